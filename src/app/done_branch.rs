//! A look at the forge for DONE workers whose branch moved afterwards. The local forge's
//! post-receive hook sees a push at once; a ref moved without a push (`git update-ref` in the
//! bare repository, a restored backup, a forge admin) runs no hook, and a DONE worker without
//! a landing has no supervisor left to notice: so `orch resume` (cron) — and `orch status` on
//! the local forge, whose remotes are local files — read
//! the heads of the recent DONE workers' branches from the forge — one `ls-remote` per
//! repository and remote — and raise the same `done_branch_moved` alert
//! (`alerts::done_branch`, once per moved head).

use super::Loaded;
use crate::gitops;
use crate::store::Store;
use crate::store::workers::{WorkerRecord, recent_done_of};
use std::collections::BTreeMap;

/// How many of a repository's most recently updated DONE workers are looked at: the look
/// costs one `ls-remote` per repository whatever the number, but old history is not re-read
/// for ever.
const RECENT: usize = 200;

/// Raises `done_branch_moved` for every recent DONE worker whose branch on the forge is not
/// at its DONE commit any more. Never fails its caller: what cannot be read is logged and
/// looked at again next time.
pub fn look(l: &Loaded, store: &mut Store) {
    for repo in &l.config.repos {
        let done = match store.read(|tx| recent_done_of(tx, &repo.name, RECENT)) {
            Ok(d) => d,
            Err(e) => {
                tracing::warn!(repo = %repo.name, error = %e, "cannot read the DONE workers");
                return;
            }
        };
        let mut by_remote: BTreeMap<String, Vec<WorkerRecord>> = BTreeMap::new();
        for w in done {
            if w.branch == format!("orch/{}", w.id) {
                by_remote.entry(w.remote.clone()).or_default().push(w);
            }
        }
        for (remote, workers) in by_remote {
            let heads = match gitops::remote_heads(&repo.path, &remote, "orch/") {
                Ok(h) => h,
                Err(e) => {
                    tracing::warn!(repo = %repo.name, remote, error = %e, "cannot read the DONE workers' branches on the forge");
                    continue;
                }
            };
            for w in workers {
                let want = format!("refs/heads/{}", w.branch);
                let head = heads
                    .iter()
                    .find(|(r, _)| *r == want)
                    .map(|(_, s)| s.as_str());
                match crate::alerts::done_branch::raise(store, &l.state_dir, &w, head) {
                    Ok(Some(m)) => tracing::warn!(worker = %w.id, "{m}"),
                    Ok(None) => {}
                    Err(e) => {
                        tracing::warn!(worker = %w.id, error = %e, "cannot record that its DONE branch moved")
                    }
                }
            }
        }
    }
}
