//! What a worker's agent spent — dollars and tokens, summed over every invocation of the
//! task (respawns included) — and the id of its conversation, which a respawn continues.

use super::sql::{OptionalExtension, Tx, params};
use serde::Serialize;

/// Tokens as agents report them.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, schemars::JsonSchema)]
#[schemars(deny_unknown_fields)]
pub struct Tokens {
    pub input: u64,
    pub output: u64,
    pub cache_read: u64,
    pub cache_write: u64,
}

impl Tokens {
    /// What a token budget counts: every token the agent reports (input, output, cache reads
    /// and cache writes).
    pub fn total(&self) -> u64 {
        self.input + self.output + self.cache_read + self.cache_write
    }

    pub fn plus(&self, o: &Tokens) -> Tokens {
        Tokens {
            input: self.input + o.input,
            output: self.output + o.output,
            cache_read: self.cache_read + o.cache_read,
            cache_write: self.cache_write + o.cache_write,
        }
    }
}

/// A worker's row.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct Usage {
    /// The conversation id (pre-assigned, or as the agent reported it).
    pub session_id: Option<String>,
    /// The agent started that conversation (a respawn may continue it).
    pub session_started: bool,
    /// Dollars (0 when the agent reports no dollar figure: Codex).
    pub cost_usd: f64,
    pub tokens: Tokens,
    /// Agent runs that reported usage.
    pub invocations: u32,
    /// Codex: the thread's cumulative token count last seen (its figures are per thread).
    pub thread_tokens: Option<u64>,
}

pub fn get_usage(tx: &Tx, worker: &str) -> super::sql::Result<Option<Usage>> {
    tx.query_row(
        "SELECT session_id, session_started, cost_usd, input_tokens, output_tokens,
                cache_read_tokens, cache_write_tokens, invocations, thread_tokens
         FROM worker_usage WHERE worker_id = ?1",
        [worker],
        |r| {
            Ok(Usage {
                session_id: r.get(0)?,
                session_started: r.get::<_, i64>(1)? != 0,
                cost_usd: r.get(2)?,
                tokens: Tokens {
                    input: r.get::<_, i64>(3)? as u64,
                    output: r.get::<_, i64>(4)? as u64,
                    cache_read: r.get::<_, i64>(5)? as u64,
                    cache_write: r.get::<_, i64>(6)? as u64,
                },
                invocations: r.get::<_, i64>(7)? as u32,
                thread_tokens: r.get::<_, Option<i64>>(8)?.map(|t| t as u64),
            })
        },
    )
    .optional()
}

/// Writes the worker's whole row.
pub fn save_usage(tx: &Tx, worker: &str, u: &Usage, now_ms: i64) -> super::sql::Result<()> {
    tx.execute(
        "INSERT INTO worker_usage (worker_id, session_id, session_started, cost_usd, input_tokens,
             output_tokens, cache_read_tokens, cache_write_tokens, invocations, thread_tokens,
             updated_ms)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11)
         ON CONFLICT (worker_id) DO UPDATE SET session_id = ?2, session_started = ?3,
             cost_usd = ?4, input_tokens = ?5, output_tokens = ?6, cache_read_tokens = ?7,
             cache_write_tokens = ?8, invocations = ?9, thread_tokens = ?10, updated_ms = ?11",
        params![
            worker,
            u.session_id,
            u.session_started as i64,
            u.cost_usd,
            u.tokens.input as i64,
            u.tokens.output as i64,
            u.tokens.cache_read as i64,
            u.tokens.cache_write as i64,
            u.invocations as i64,
            u.thread_tokens.map(|t| t as i64),
            now_ms
        ],
    )?;
    Ok(())
}

/// Records that `agent`'s API is rate-limited until `until_ms` (the latest reset wins).
pub fn limit_agent(tx: &Tx, agent: &str, until_ms: i64, detail: &str) -> super::sql::Result<()> {
    tx.execute(
        "INSERT INTO agent_limits (agent, until_ms, detail) VALUES (?1, ?2, ?3)
         ON CONFLICT (agent) DO UPDATE SET until_ms =
             CASE WHEN excluded.until_ms > agent_limits.until_ms THEN excluded.until_ms ELSE agent_limits.until_ms END,
             detail = excluded.detail",
        params![agent, until_ms, detail],
    )?;
    Ok(())
}

/// Until when (and why) `agent` is rate-limited, if it still is at `now_ms`.
pub fn agent_limit(tx: &Tx, agent: &str, now_ms: i64) -> super::sql::Result<Option<(i64, String)>> {
    use super::sql::OptionalExtension;
    tx.query_row(
        "SELECT until_ms, detail FROM agent_limits WHERE agent = ?1 AND until_ms > ?2",
        params![agent, now_ms],
        |r| Ok((r.get(0)?, r.get(1)?)),
    )
    .optional()
}
