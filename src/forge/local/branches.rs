//! Branch protection on the local forge: the `pre-receive` hook's judgement of a push.
//!
//! A push made by a worker's process (found by the kernel's view of the pusher: the worker's
//! cgroup or its guard among the hook's ancestors, never its environment — see
//! `contain::worker_of_self`) may only create or move that worker's own branch (`orch/<id>`)
//! in its own repository's remote: not another worker's branch, not a base branch, not a tag,
//! and it may delete nothing. Everyone else — orch's landing, an operator at a terminal —
//! pushes as before. A worker of another state directory pushes nothing here.

use crate::contain::WorkerOfProcess;

/// One `<old> <new> <ref>` line of a hook's input.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RefUpdate {
    pub old: String,
    pub new: String,
    pub git_ref: String,
}

impl RefUpdate {
    fn deletes(&self) -> bool {
        self.new.bytes().all(|b| b == b'0')
    }
}

/// Every ref update of a hook's input (malformed lines are kept as refusals by the caller:
/// they name no ref a worker may move).
pub fn ref_updates(input: &str) -> Vec<RefUpdate> {
    input
        .lines()
        .filter_map(|line| {
            let mut f = line.split_whitespace();
            Some(RefUpdate {
                old: f.next()?.to_string(),
                new: f.next()?.to_string(),
                git_ref: f.next()?.to_string(),
            })
        })
        .collect()
}

/// What orch knows of the pushing worker: its repository and branch (`None`: no such worker
/// in this state directory).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PusherRecord {
    pub repo: String,
    pub branch: String,
}

/// Why each refused update of a push into `repo`'s remote by `pusher` is refused; empty: the
/// push may go on. `same_state_dir`: the pusher is a worker of this forge's state directory.
pub fn refusals(
    pusher: &WorkerOfProcess,
    same_state_dir: bool,
    record: Option<&PusherRecord>,
    repo: &str,
    updates: &[RefUpdate],
) -> Vec<String> {
    let who = &pusher.id;
    if !same_state_dir {
        return vec![format!(
            "worker {who} belongs to another orch state directory: it pushes nothing to this forge"
        )];
    }
    let Some(rec) = record else {
        return vec![format!(
            "worker {who} is not a worker of this orch: it pushes nothing to this forge"
        )];
    };
    let own = format!("refs/heads/{}", rec.branch);
    updates
        .iter()
        .filter_map(|u| {
            let why = if rec.repo != repo {
                format!(
                    "worker {who} works on {}: it may not push to {repo}'s remote",
                    rec.repo
                )
            } else if u.git_ref != own {
                format!(
                    "worker {who} may push only to its own branch {} (not to another worker's branch or a base branch)",
                    rec.branch
                )
            } else if u.deletes() {
                format!("worker {who} may not delete its branch {}", rec.branch)
            } else {
                return None;
            };
            Some(format!("{}: {why}", u.git_ref))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    const ZERO: &str = "0000000000000000000000000000000000000000";
    const A: &str = "1111111111111111111111111111111111111111";
    const B: &str = "2222222222222222222222222222222222222222";

    fn worker(id: &str) -> WorkerOfProcess {
        WorkerOfProcess {
            id: id.into(),
            tag: None,
            channel: None,
        }
    }

    fn rec() -> PusherRecord {
        PusherRecord {
            repo: "alpha".into(),
            branch: "orch/w-1".into(),
        }
    }

    fn update(git_ref: &str, new: &str) -> RefUpdate {
        RefUpdate {
            old: A.into(),
            new: new.into(),
            git_ref: git_ref.into(),
        }
    }

    #[test]
    fn a_worker_moves_only_its_own_branch_of_its_own_repository() {
        let w = worker("w-1");
        assert!(
            refusals(
                &w,
                true,
                Some(&rec()),
                "alpha",
                &[update("refs/heads/orch/w-1", B)]
            )
            .is_empty()
        );
        for (r, repo, new, says) in [
            ("refs/heads/orch/w-2", "alpha", B, "only to its own branch"),
            ("refs/heads/main", "alpha", B, "only to its own branch"),
            ("refs/tags/v1", "alpha", B, "only to its own branch"),
            ("refs/heads/orch/w-1", "alpha", ZERO, "may not delete"),
            ("refs/heads/orch/w-1", "beta", B, "works on alpha"),
        ] {
            let out = refusals(&w, true, Some(&rec()), repo, &[update(r, new)]);
            assert_eq!(out.len(), 1, "{r} {repo}");
            assert!(out[0].starts_with(r) && out[0].contains(says), "{out:?}");
        }
    }

    #[test]
    fn an_unknown_worker_or_one_of_another_state_directory_pushes_nothing() {
        let w = worker("w-9");
        let u = [update("refs/heads/orch/w-9", B)];
        assert!(refusals(&w, true, None, "alpha", &u)[0].contains("not a worker of this orch"));
        assert!(refusals(&w, false, Some(&rec()), "alpha", &u)[0].contains("another orch state"));
    }

    #[test]
    fn hook_input_lines_are_read_whole() {
        let u = ref_updates(&format!(
            "{A} {B} refs/heads/main\n{B} {ZERO} refs/tags/x\nbad\n"
        ));
        assert_eq!(u.len(), 2);
        assert_eq!(u[1].git_ref, "refs/tags/x");
        assert!(u[1].deletes());
    }
}
