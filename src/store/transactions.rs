//! Transactions: reads on a snapshot, writes that take the write lock first (on SQLite after
//! their turn in the write queue), and the fence that makes a supervisor whose lease moved on
//! write nothing.

use super::*;

impl Store {
    /// Makes every write of this store carry the fencing token `token` of worker `id`'s
    /// lease: the transaction checks first that the lease was not taken again since, and
    /// writes nothing when it was ([`StoreError::Fenced`]). A supervisor's own connection:
    /// one paused, partitioned or slow past its lease can change nothing once another process
    /// holds the worker.
    pub fn fence(&mut self, id: &str, token: i64) {
        self.fence = Some((id.to_string(), token));
        self.fence_lost = false;
    }

    /// Waits until a chain lock may have been released, at most `timeout`: on PostgreSQL until
    /// a release anywhere is announced (LISTEN/NOTIFY) or the timeout; on SQLite the timeout
    /// (its waiters poll). Never longer than `timeout`: notifications can be lost. True when a
    /// release was announced.
    pub fn wait_lock_released(&mut self, timeout: Duration) -> bool {
        match &mut self.backend {
            Backend::Pg(c) => match c.wait_notified(locks::LOCK_CHANNEL, timeout) {
                Ok(notified) => notified,
                Err(_) => {
                    std::thread::sleep(timeout);
                    false
                }
            },
            Backend::Sqlite(_) => {
                std::thread::sleep(timeout);
                false
            }
        }
    }

    /// Writes without a fence again (tests: this store plays another process).
    #[cfg(test)]
    pub(crate) fn unfence(&mut self) {
        self.fence = None;
    }

    /// Whether a write was refused by the fence: the lease belongs to another process now.
    pub fn fence_lost(&self) -> bool {
        self.fence_lost
    }

    /// The fencing check of a write transaction: `Err(now)` when the lease moved on.
    fn check_fence(fence: &Option<(String, i64)>, tx: &Tx) -> sql::Result<Result<(), Option<i64>>> {
        let Some((id, token)) = fence else {
            return Ok(Ok(()));
        };
        let now = workers::fence_of(tx, id)?;
        Ok(if now == Some(*token) {
            Ok(())
        } else {
            Err(now)
        })
    }

    fn fenced(&mut self, now: Option<i64>) -> StoreError {
        self.fence_lost = true;
        let (worker, fence) = self.fence.clone().unwrap_or_default();
        StoreError::Fenced { worker, fence, now }
    }

    /// A write transaction with the write lock taken up front (SQLite's `BEGIN IMMEDIATE`,
    /// PostgreSQL's advisory lock), so a read-check-write inside it cannot interleave with
    /// another process's — on any host.
    fn begin_write(&mut self) -> sql::Result<Tx<'_>> {
        Ok(match &mut self.backend {
            Backend::Sqlite(c) => {
                Tx::sqlite(c.transaction_with_behavior(TransactionBehavior::Immediate)?)
            }
            Backend::Pg(c) => Tx::pg(c.write()?),
        })
    }

    /// Runs `f` in one write transaction ([`Store::begin_write`]): the write lock is taken up
    /// front, so a read-check-write inside `f` cannot interleave with another process's.
    pub fn write<T>(&mut self, f: impl FnOnce(&Tx) -> sql::Result<T>) -> Result<T, StoreError> {
        let _turn = self.take_turn()?;
        let fence = self.fence.clone();
        let r = (|| {
            let tx = self.begin_write()?;
            crate::fault::hold_write();
            if let Err(now) = Self::check_fence(&fence, &tx)? {
                return Ok(Err(now));
            }
            let v = f(&tx)?;
            tx.commit()?;
            Ok::<_, sql::Error>(Ok(v))
        })();
        match r {
            Ok(Ok(v)) => Ok(v),
            Ok(Err(now)) => Err(self.fenced(now)),
            Err(e) => Err(self.classify(e)),
        }
    }

    /// Runs `f` in a write transaction that is always rolled back (what a pass would do,
    /// measured or tried without keeping it).
    pub fn rolled_back<T>(
        &mut self,
        f: impl FnOnce(&Tx) -> sql::Result<T>,
    ) -> Result<T, StoreError> {
        let _turn = self.take_turn()?;
        let fence = self.fence.clone();
        let r = (|| {
            let tx = self.begin_write()?;
            if let Err(now) = Self::check_fence(&fence, &tx)? {
                return Ok(Err(now));
            }
            f(&tx).map(Ok)
        })();
        match r {
            Ok(Ok(v)) => Ok(v),
            Ok(Err(now)) => Err(self.fenced(now)),
            Err(e) => Err(self.classify(e)),
        }
    }

    /// This writer's turn in the host's write queue ([`write_queue`]), held until its
    /// transaction ends; none on PostgreSQL. Busy when the queue stood still for this store's
    /// patience, naming who held it.
    fn take_turn(&mut self) -> Result<Option<write_queue::Turn>, StoreError> {
        let Some(queue) = self.queue.take() else {
            return Ok(None);
        };
        if crate::fault::write_queue_off() {
            self.queue = Some(queue);
            return Ok(None);
        }
        let patience = self.waits;
        let taken = queue.take(patience, &mut |pid| self.judge_stopped_writer(pid));
        self.queue = Some(queue);
        match taken {
            Ok(turn) => Ok(Some(turn)),
            Err(stalled) => {
                let mut holders: Vec<String> = stalled.holder.into_iter().collect();
                holders.extend(health::holders(&self.path));
                Err(StoreError::Locked {
                    path: self.path.clone(),
                    waited: patience,
                    holders,
                })
            }
        }
    }

    /// What may be done about process `pid`, stopped while it holds the write turn: a
    /// supervisor is ended once the lease it holds lapsed (it has lost its worker then: the
    /// fence refuses what it would write, and another process may take the worker over), any
    /// other orch process after [`write_queue::STOPPED_BOUND`]; a process that is not orch is
    /// never signalled.
    fn judge_stopped_writer(&mut self, pid: i32) -> write_queue::Verdict {
        use write_queue::Verdict;
        if !health::is_orch(pid) {
            return Verdict::Foreign;
        }
        let cmd = health::command_of(pid);
        let supervised = cmd
            .strip_prefix("orch __supervise ")
            .and_then(|rest| rest.split_whitespace().next())
            .map(str::to_string);
        if let Some(id) = supervised
            && let Ok(Some(w)) = self.worker(&id)
            && let Some(lease) = w.lease().filter(|l| l.held_by(pid as i64))
            && crate::process::proc_stat(pid)
                .is_some_and(|s| lease.start.is_none_or(|t| t as u64 == s.start_ticks))
        {
            // A second past the lapse, so that clocks read a millisecond apart agree.
            let left = (lease.until_ms + 1_000 - now_ms()).max(0) as u64;
            return Verdict::EndAt(std::time::Instant::now() + Duration::from_millis(left));
        }
        Verdict::EndAfter(write_queue::STOPPED_BOUND)
    }

    /// Read-only access: a consistent snapshot (SQLite's deferred transaction in WAL mode,
    /// PostgreSQL's `REPEATABLE READ READ ONLY`).
    pub fn read<T>(&mut self, f: impl FnOnce(&Tx) -> sql::Result<T>) -> Result<T, StoreError> {
        let r = (|| {
            let tx = match &mut self.backend {
                Backend::Sqlite(c) => {
                    Tx::sqlite(c.transaction_with_behavior(TransactionBehavior::Deferred)?)
                }
                Backend::Pg(c) => Tx::pg(c.read()?),
            };
            f(&tx)
        })();
        r.map_err(|e| self.classify(e))
    }

    /// The raw connection, for modules that own their own tables.
    #[cfg(test)]
    pub(crate) fn conn(&mut self) -> &mut Connection {
        match &mut self.backend {
            Backend::Sqlite(c) => c,
            Backend::Pg(_) => panic!("not a SQLite store"),
        }
    }
}
