//! What the board (`orch serve`) reads beyond the views the commands print: the figures of
//! `/metrics`, each one aggregate query, and a cheap test of whether anything changed.

use super::sql::Tx;

/// Counts over the store for `/metrics` (the history kept: `orch gc` prunes ended workers).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Figures {
    /// Workers by milestone (as stored: `WORKING`, …).
    pub workers_by_milestone: Vec<(String, u64)>,
    /// Active chain locks by kind (`worker`, `hold`).
    pub locks_by_kind: Vec<(String, u64)>,
    /// Pushed commits by orch's CI verdict (`green`, `red`, …; unjudged ones left out).
    pub ci_verdicts: Vec<(String, u64)>,
    /// Respawns summed over the workers.
    pub respawns: u64,
    /// Contract violations recorded in workers' histories.
    pub violations: u64,
    /// Supervisors' CI queries that failed after the forge client's retries, by the event's
    /// kind (`ForgeError::event_kind`).
    pub forge_errors: Vec<(String, u64)>,
    /// The nodes' heartbeats: name, when it last beat (ms, moved onto this host's clock from the
    /// database's), live workers. A time, not an age: `/metrics` serves a read again while the
    /// store has not changed, and a dead node changes nothing — its age must still grow.
    pub nodes: Vec<(String, i64, i64)>,
    /// Alert deliveries by sink and state (`pending`, `delivered`, `given_up`).
    pub deliveries: Vec<(String, String, u64)>,
    /// Deliveries still pending, and when the oldest pending one's alert was raised.
    pub outbox_pending: u64,
    pub outbox_oldest_ms: Option<i64>,
    /// Dollars the workers' agents spent.
    pub spend_usd: f64,
    /// Fatal holds in force.
    pub fatal_holds: u64,
    /// For every push with a decided verdict (green, red, sync_not_done, no_run): ms from the
    /// push to the recording of its verdict.
    pub ci_waits_ms: Vec<i64>,
    /// What the agents spent by the workers' model (None: the agent's default): dollars and
    /// tokens (input, output, cache read, cache write).
    pub spend_by_model: Vec<ModelSpend>,
}

#[derive(Debug, Clone, Default, PartialEq)]
pub struct ModelSpend {
    pub model: Option<String>,
    pub cost_usd: f64,
    pub input_tokens: u64,
    pub output_tokens: u64,
    pub cache_read_tokens: u64,
    pub cache_write_tokens: u64,
}

fn pairs(tx: &Tx, sql: &str) -> super::sql::Result<Vec<(String, u64)>> {
    let mut st = tx.prepare_cached(sql)?;
    let rows = st.query_map([], |r| {
        Ok((r.get::<_, String>(0)?, r.get::<_, i64>(1)? as u64))
    })?;
    rows.collect()
}

pub fn figures(tx: &Tx) -> super::sql::Result<Figures> {
    let one = |sql: &str| -> super::sql::Result<i64> { tx.query_row(sql, [], |r| r.get(0)) };
    let mut deliveries = Vec::new();
    {
        let mut st = tx.prepare_cached(
            "SELECT sink, state, count(*) FROM alert_deliveries GROUP BY sink, state ORDER BY sink, state",
        )?;
        let rows = st.query_map([], |r| {
            Ok((
                r.get::<_, String>(0)?,
                r.get::<_, String>(1)?,
                r.get::<_, i64>(2)? as u64,
            ))
        })?;
        for row in rows {
            deliveries.push(row?);
        }
    }
    Ok(Figures {
        workers_by_milestone: pairs(
            tx,
            "SELECT milestone, count(*) FROM workers GROUP BY milestone ORDER BY milestone",
        )?,
        locks_by_kind: pairs(
            tx,
            "SELECT kind, count(*) FROM locks GROUP BY kind ORDER BY kind",
        )?,
        ci_verdicts: pairs(
            tx,
            "SELECT verdict, count(*) FROM pushes WHERE verdict IS NOT NULL GROUP BY verdict ORDER BY verdict",
        )?,
        respawns: one("SELECT coalesce(sum(respawns), 0) FROM workers")? as u64,
        violations: one("SELECT count(*) FROM worker_events WHERE kind = 'violation'")? as u64,
        forge_errors: pairs(
            tx,
            "SELECT kind, count(*) FROM worker_events
             WHERE kind IN ('forge_error_transient', 'forge_error_blocking', 'forge_error_malformed')
             GROUP BY kind ORDER BY kind",
        )?,
        nodes: {
            let skew = tx.clock_ms()? - super::now_ms();
            super::nodes::list(tx)?
                .into_iter()
                .map(|n| (n.name, n.heartbeat_ms - skew, n.workers))
                .collect()
        },
        deliveries,
        outbox_pending: one("SELECT count(*) FROM alert_deliveries WHERE state = 'pending'")?
            as u64,
        outbox_oldest_ms: tx.query_row(
            "SELECT min(a.at_ms) FROM alert_deliveries d JOIN alerts a ON a.id = d.alert_id
             WHERE d.state = 'pending'",
            [],
            |r| r.get(0),
        )?,
        spend_usd: tx.query_row(
            "SELECT coalesce(sum(cost_usd), 0.0) FROM worker_usage",
            [],
            |r| r.get(0),
        )?,
        fatal_holds: one("SELECT count(*) FROM fatal_holds")? as u64,
        ci_waits_ms: {
            let mut st = tx.prepare_cached(
                "SELECT checked_ms - pushed_ms FROM pushes
                 WHERE verdict IN ('green', 'red', 'sync_not_done', 'no_run') AND checked_ms IS NOT NULL",
            )?;
            let rows = st.query_map([], |r| r.get::<_, i64>(0))?;
            rows.collect::<Result<_, _>>()?
        },
        spend_by_model: {
            let mut st = tx.prepare_cached(
                "SELECT w.model, sum(u.cost_usd), sum(u.input_tokens), sum(u.output_tokens),
                        sum(u.cache_read_tokens), sum(u.cache_write_tokens)
                 FROM worker_usage u JOIN workers w ON w.id = u.worker_id
                 GROUP BY w.model ORDER BY w.model",
            )?;
            let rows = st.query_map([], |r| {
                Ok(ModelSpend {
                    model: r.get(0)?,
                    cost_usd: r.get(1)?,
                    input_tokens: r.get::<_, i64>(2)? as u64,
                    output_tokens: r.get::<_, i64>(3)? as u64,
                    cache_read_tokens: r.get::<_, i64>(4)? as u64,
                    cache_write_tokens: r.get::<_, i64>(5)? as u64,
                })
            })?;
            rows.collect::<Result<_, _>>()?
        },
    })
}

/// A number that changes when another connection commits, so a watcher learns that the store
/// changed with no table read: SQLite's `data_version`; on PostgreSQL the snapshot's xmax
/// (the next transaction id: it moves with every write anywhere in the cluster, so it may
/// change with nothing of orch's changed — a watcher then reads once for nothing).
pub fn data_version(tx: &Tx) -> super::sql::Result<i64> {
    if tx.backend() == "sqlite" {
        return tx.query_row("PRAGMA data_version", [], |r| r.get(0));
    }
    tx.query_row(
        "SELECT pg_snapshot_xmax(pg_current_snapshot())::text::bigint",
        [],
        |r| r.get(0),
    )
}
