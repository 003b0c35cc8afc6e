//! SQLite's migrations, keyed on its `user_version`: entry n brings the schema to version n + 1.
//! Never edit a released entry: append a new one, here and in `postgres.rs`.

pub(super) const MIGRATIONS: &[&str] = &[
    // 1: chain locks, their history, workers.
    r#"
    CREATE TABLE locks (
        id          INTEGER PRIMARY KEY AUTOINCREMENT,
        repo        TEXT NOT NULL UNIQUE,
        holder      TEXT NOT NULL,
        kind        TEXT NOT NULL CHECK (kind IN ('hold', 'worker')),
        reason      TEXT,
        by          TEXT,
        acquired_ms INTEGER NOT NULL
    );
    CREATE TABLE lock_history (
        seq     INTEGER PRIMARY KEY AUTOINCREMENT,
        lock_id INTEGER NOT NULL,
        action  TEXT NOT NULL CHECK (action IN ('acquire', 'release')),
        repo    TEXT NOT NULL,
        holder  TEXT NOT NULL,
        kind    TEXT NOT NULL,
        reason  TEXT,
        by      TEXT,
        pid     INTEGER NOT NULL,
        at_ms   INTEGER NOT NULL
    );
    CREATE INDEX lock_history_lock ON lock_history (lock_id);
    CREATE TABLE workers (
        id             TEXT PRIMARY KEY,
        repo           TEXT NOT NULL,
        task           TEXT NOT NULL,
        task_id        TEXT,
        component      TEXT,
        plan           TEXT,
        milestone      TEXT NOT NULL,
        -- milestone::Progress as JSON: the state machine's whole state
        progress       TEXT NOT NULL,
        branch         TEXT NOT NULL,
        base_sha       TEXT NOT NULL,
        worktree       TEXT NOT NULL,
        remote         TEXT NOT NULL,
        day            TEXT NOT NULL,
        supervisor_pid INTEGER,
        supervisor_start INTEGER,
        lease_until_ms INTEGER,
        worker_pid     INTEGER,
        worker_running INTEGER NOT NULL DEFAULT 0,
        exit_code      INTEGER,
        respawns       INTEGER NOT NULL DEFAULT 0,
        resume_note    TEXT,
        created_ms     INTEGER NOT NULL,
        updated_ms     INTEGER NOT NULL
    );
    -- Everything that happened to a worker, in order: transitions, claims, violations, CI.
    CREATE TABLE worker_events (
        seq       INTEGER PRIMARY KEY AUTOINCREMENT,
        worker_id TEXT NOT NULL,
        at_ms     INTEGER NOT NULL,
        kind      TEXT NOT NULL,
        milestone TEXT NOT NULL,
        detail    TEXT NOT NULL
    );
    CREATE INDEX worker_events_worker ON worker_events (worker_id, seq);
    -- The inbox: `orch report` claims and operator requests, applied by the supervisor.
    CREATE TABLE requests (
        id           INTEGER PRIMARY KEY AUTOINCREMENT,
        worker_id    TEXT NOT NULL,
        kind         TEXT NOT NULL,
        milestone    TEXT,
        sha          TEXT,
        job          TEXT,
        note         TEXT,
        by           TEXT,
        created_ms   INTEGER NOT NULL,
        processed_ms INTEGER,
        outcome      TEXT
    );
    CREATE INDEX requests_pending ON requests (worker_id, processed_ms);
    -- Every SHA a worker pushed, with orch's CI verdict for it.
    CREATE TABLE pushes (
        worker_id   TEXT NOT NULL,
        sha         TEXT NOT NULL,
        pushed_ms   INTEGER NOT NULL,
        verdict     TEXT,
        detail      TEXT,
        failed_jobs TEXT,
        runs        TEXT,
        checked_ms  INTEGER,
        PRIMARY KEY (worker_id, sha)
    );
    CREATE TABLE alerts (
        id        INTEGER PRIMARY KEY AUTOINCREMENT,
        at_ms     INTEGER NOT NULL,
        severity  TEXT NOT NULL,
        worker_id TEXT,
        repo      TEXT,
        kind      TEXT NOT NULL,
        message   TEXT NOT NULL
    );
    CREATE INDEX workers_repo ON workers (repo);
    "#,
    // 2: the local forge's CI runs and their jobs (src/forge/local).
    r#"
    CREATE TABLE local_runs (
        id           INTEGER PRIMARY KEY AUTOINCREMENT,
        repo         TEXT NOT NULL,
        number       INTEGER NOT NULL,
        ref          TEXT NOT NULL,
        sha          TEXT NOT NULL,
        event        TEXT NOT NULL DEFAULT 'push',
        status       TEXT NOT NULL,
        runner_pid   INTEGER,
        runner_start INTEGER,
        note         TEXT,
        created_ms   INTEGER NOT NULL,
        started_ms   INTEGER,
        finished_ms  INTEGER,
        UNIQUE (repo, number)
    );
    CREATE INDEX local_runs_sha ON local_runs (repo, sha);
    CREATE INDEX local_runs_open ON local_runs (id) WHERE finished_ms IS NULL;
    CREATE TABLE local_jobs (
        id          INTEGER PRIMARY KEY AUTOINCREMENT,
        run_id      INTEGER NOT NULL REFERENCES local_runs (id),
        seq         INTEGER NOT NULL,
        name        TEXT NOT NULL,
        command     TEXT NOT NULL,
        needs       TEXT NOT NULL,
        timeout_ms  INTEGER NOT NULL,
        status      TEXT NOT NULL,
        pid         INTEGER,
        exit_code   INTEGER,
        note        TEXT,
        started_ms  INTEGER,
        finished_ms INTEGER,
        UNIQUE (run_id, name)
    );
    "#,
    // 3: whether a request's outcome is a refusal (typed, instead of read from its text).
    r#"
    ALTER TABLE requests ADD COLUMN refused INTEGER;
    "#,
    // 4: alert de-duplication (repeat count, resolution), the delivery outbox: one row per
    // (alert, sink), created by whoever drains it (alerts recorded before this are settled),
    // and the base-branch CI of upstream repositories (cascade).
    r#"
    ALTER TABLE alerts ADD COLUMN repeats INTEGER NOT NULL DEFAULT 1;
    ALTER TABLE alerts ADD COLUMN last_ms INTEGER;
    ALTER TABLE alerts ADD COLUMN resolved_ms INTEGER;
    ALTER TABLE alerts ADD COLUMN settled INTEGER NOT NULL DEFAULT 0;
    UPDATE alerts SET settled = 1, last_ms = at_ms;
    CREATE INDEX alerts_dedup ON alerts (kind, worker_id, repo, at_ms);
    CREATE INDEX alerts_unsettled ON alerts (id) WHERE settled = 0;
    CREATE TABLE alert_deliveries (
        alert_id     INTEGER NOT NULL REFERENCES alerts (id),
        sink         TEXT NOT NULL,
        state        TEXT NOT NULL CHECK (state IN ('pending', 'delivered', 'given_up')),
        attempts     INTEGER NOT NULL DEFAULT 0,
        next_ms      INTEGER NOT NULL,
        last_error   TEXT,
        claimed_by   INTEGER,
        claimed_until_ms INTEGER,
        done_ms      INTEGER,
        PRIMARY KEY (alert_id, sink)
    );
    CREATE INDEX alert_deliveries_due ON alert_deliveries (next_ms) WHERE state = 'pending';
    -- Cascade: the CI of each repository's base branch as last polled, shared by every
    -- process that watches it (one poll per repository per interval, by the claim's holder).
    CREATE TABLE upstream_ci (
        repo          TEXT PRIMARY KEY,
        branch        TEXT NOT NULL,
        sha           TEXT,
        verdict       TEXT,
        failed_jobs   TEXT NOT NULL DEFAULT '[]',
        detail        TEXT,
        checked_ms    INTEGER NOT NULL DEFAULT 0,
        poller_pid    INTEGER,
        poll_until_ms INTEGER NOT NULL DEFAULT 0
    );
    "#,
    // 5: waves (src/store/waves.rs): a wave as first seen, its tasks and their workers.
    r#"
    CREATE TABLE waves (
        name          TEXT PRIMARY KEY,
        file          TEXT NOT NULL,
        created_ms    INTEGER NOT NULL,
        updated_ms    INTEGER NOT NULL,
        finished_ms   INTEGER,
        cancelled_ms  INTEGER,
        cancelled_by  TEXT,
        ready_waiting INTEGER NOT NULL DEFAULT 0
    );
    CREATE TABLE wave_tasks (
        wave        TEXT NOT NULL REFERENCES waves (name),
        id          TEXT NOT NULL,
        seq         INTEGER NOT NULL,
        definition  TEXT NOT NULL,
        estimate_ms INTEGER,
        worker_id   TEXT,
        started_ms  INTEGER,
        alerted_ms  INTEGER,
        PRIMARY KEY (wave, id)
    );
    CREATE INDEX wave_tasks_worker ON wave_tasks (worker_id);
    CREATE INDEX workers_task_id ON workers (task_id);
    "#,
    // 6: what a worker's agent spent (summed across respawns) and its conversation id
    // (src/store/usage.rs).
    r#"
    CREATE TABLE worker_usage (
        worker_id          TEXT PRIMARY KEY,
        session_id         TEXT,
        session_started    INTEGER NOT NULL DEFAULT 0,
        cost_usd           REAL NOT NULL DEFAULT 0,
        input_tokens       INTEGER NOT NULL DEFAULT 0,
        output_tokens      INTEGER NOT NULL DEFAULT 0,
        cache_read_tokens  INTEGER NOT NULL DEFAULT 0,
        cache_write_tokens INTEGER NOT NULL DEFAULT 0,
        invocations        INTEGER NOT NULL DEFAULT 0,
        thread_tokens      INTEGER,
        updated_ms         INTEGER NOT NULL
    );
    "#,
    // 7: agents whose API is rate-limited, and until when (no new worker of it before).
    r#"
    CREATE TABLE agent_limits (
        agent    TEXT PRIMARY KEY,
        until_ms INTEGER NOT NULL,
        detail   TEXT NOT NULL
    );
    "#,
    // 8: where each event falls in the worker's log: the log's length when it was recorded
    // (`orch logs` interleaves them; log lines carry no time).
    r#"
    ALTER TABLE worker_events ADD COLUMN log_bytes INTEGER;
    "#,
    // 9: a wave task given another go (`orch wave retry`) counts its attempts: the worker of
    // attempt n > 1 carries the task id `<wave>:<task>#<n>`.
    r#"
    ALTER TABLE wave_tasks ADD COLUMN attempt INTEGER NOT NULL DEFAULT 1;
    "#,
    // 10: a lock acquire or release writes two pages (the lock's, the history row's), not
    // five. `locks` is keyed by its repository (one b-tree, still one lock per repository),
    // and a lock's id is now the `seq` of its acquire row (store/locks.rs), so neither table
    // needs AUTOINCREMENT's `sqlite_sequence` page. `seq` stays strictly increasing without
    // it: an INTEGER PRIMARY KEY takes the largest rowid + 1 and history rows are never
    // deleted. The ids of locks taken before stay theirs and cannot meet a new one: each
    // was counted once per acquire row, so none exceeds the largest `seq` so far. The index
    // on `lock_id` goes: nothing looks history up by lock (replay reads it all, by `seq`).
    r#"
    CREATE TABLE lock_history_10 (
        seq     INTEGER PRIMARY KEY,
        lock_id INTEGER NOT NULL,
        action  TEXT NOT NULL CHECK (action IN ('acquire', 'release')),
        repo    TEXT NOT NULL,
        holder  TEXT NOT NULL,
        kind    TEXT NOT NULL,
        reason  TEXT,
        by      TEXT,
        pid     INTEGER NOT NULL,
        at_ms   INTEGER NOT NULL
    );
    INSERT INTO lock_history_10 (seq, lock_id, action, repo, holder, kind, reason, by, pid, at_ms)
        SELECT seq, lock_id, action, repo, holder, kind, reason, by, pid, at_ms FROM lock_history;
    DROP TABLE lock_history;
    ALTER TABLE lock_history_10 RENAME TO lock_history;
    CREATE TABLE locks_10 (
        repo        TEXT PRIMARY KEY,
        id          INTEGER NOT NULL,
        holder      TEXT NOT NULL,
        kind        TEXT NOT NULL CHECK (kind IN ('hold', 'worker')),
        reason      TEXT,
        by          TEXT,
        acquired_ms INTEGER NOT NULL
    ) WITHOUT ROWID;
    INSERT INTO locks_10 (repo, id, holder, kind, reason, by, acquired_ms)
        SELECT repo, id, holder, kind, reason, by, acquired_ms FROM locks;
    DROP TABLE locks;
    ALTER TABLE locks_10 RENAME TO locks;
    "#,
    // 11: history bounded in cost. `ended_ms`: when the worker ended for good (terminal, and
    // no change of it still landing; NULL while it is live), set with its progress
    // (`store::workers::ended`), so commands that load the organisation read live workers
    // through a partial index and ended ones newest first, never the whole history.
    // `cleaned_ms`: when `orch gc` found nothing of the worker left in its clone (so later
    // runs skip it, and its history may be pruned after `history.keep`). `store_meta`: small
    // watermarks (the last checkpoint refresh of ended workers).
    r#"
    ALTER TABLE workers ADD COLUMN ended_ms INTEGER;
    ALTER TABLE workers ADD COLUMN cleaned_ms INTEGER;
    UPDATE workers SET ended_ms = updated_ms
     WHERE milestone IN ('DONE', 'FAILED', 'CANCELLED')
       AND NOT (milestone = 'DONE' AND COALESCE(json_extract(progress, '$.landing.state'), '')
                IN ('pending', 'verifying', 'base_ci', 'downstream', 'reverting'));
    CREATE INDEX workers_live ON workers (created_ms, id) WHERE ended_ms IS NULL;
    CREATE INDEX workers_ended ON workers (ended_ms, id) WHERE ended_ms IS NOT NULL;
    CREATE INDEX workers_running ON workers (id) WHERE worker_running = 1;
    CREATE INDEX workers_updated ON workers (updated_ms);
    CREATE INDEX workers_uncleaned ON workers (created_ms, id)
        WHERE ended_ms IS NOT NULL AND cleaned_ms IS NULL;
    CREATE INDEX alerts_worker ON alerts (worker_id);
    CREATE INDEX pushes_sha ON pushes (sha);
    CREATE TABLE store_meta (
        key   TEXT PRIMARY KEY,
        value INTEGER NOT NULL
    );
    "#,
    // 12: the model a worker's agent runs with (`worker.model`, a repository's, a task's, or
    // an override's: `config::model`) and why, chosen once at spawn so that every respawn and
    // resume of the worker runs the same one. NULL: the agent's own default.
    r#"
    ALTER TABLE workers ADD COLUMN model TEXT;
    ALTER TABLE workers ADD COLUMN model_source TEXT;
    "#,
    // 13: fatal holds (`orch fatal`, a worker's FATAL report, a secret in a pushed diff): the
    // chain of `repo` is halted until an operator clears it. Not a chain lock — the paused
    // workers keep theirs (nothing lost), and a lock beside them would conflict — but a stop
    // over them: spawn, respawn, resume and every supervisor in the chain read it.
    r#"
    CREATE TABLE fatal_holds (
        repo      TEXT PRIMARY KEY,
        reason    TEXT NOT NULL,
        by        TEXT NOT NULL,
        worker_id TEXT,
        at_ms     INTEGER NOT NULL
    ) WITHOUT ROWID;
    "#,
    // 14: fatal holds that were cleared, with who cleared them and when: the record an
    // incident review needs (`orch fatal REPO` shows the last; a hold row itself is deleted
    // on clearing, so that a new FATAL can be taken on the same chain).
    r#"
    CREATE TABLE fatal_cleared (
        id         INTEGER PRIMARY KEY,
        repo       TEXT NOT NULL,
        reason     TEXT NOT NULL,
        by         TEXT NOT NULL,
        worker_id  TEXT,
        at_ms      INTEGER NOT NULL,
        cleared_by TEXT NOT NULL,
        cleared_ms INTEGER NOT NULL
    );
    CREATE INDEX fatal_cleared_repo ON fatal_cleared (repo, cleared_ms);
    "#,
    // 15: several nodes on one store. A lease names its holder's node beside its pid (a pid
    // means something only where it was taken), and each acquisition of a worker's lease
    // numbers it: `fence` goes up by one per claim, and every write its supervisor makes
    // checks it first, so a supervisor whose lease was taken over writes nothing. `nodes`:
    // each node's heartbeat, slots and version (`orch nodes`). The events' kinds are
    // counted by the board's `/metrics` (violations). `wave_ticks`: the one tick of a wave
    // running now, whichever node runs it (a claim with an expiry, renewed while it runs).
    // `nodes.place`: where the node's pids mean something (`node::place`), so that two hosts
    // beating under one name are told apart and refused.
    // `local_runs.runner_host`: the host a local-forge runner's pid was recorded on (a shared
    // forge directory): only that host may judge it dead.
    r#"
    ALTER TABLE workers ADD COLUMN node TEXT;
    ALTER TABLE workers ADD COLUMN fence INTEGER NOT NULL DEFAULT 0;
    CREATE TABLE nodes (
        name         TEXT PRIMARY KEY,
        version      TEXT NOT NULL,
        slots        INTEGER NOT NULL,
        started_ms   INTEGER NOT NULL,
        heartbeat_ms INTEGER NOT NULL,
        place        TEXT
    );
    CREATE INDEX worker_events_kind ON worker_events (kind);
    CREATE TABLE wave_ticks (
        wave     TEXT PRIMARY KEY,
        node     TEXT NOT NULL,
        pid      INTEGER NOT NULL,
        until_ms INTEGER NOT NULL
    );
    ALTER TABLE local_runs ADD COLUMN runner_host TEXT;
    "#,
];
