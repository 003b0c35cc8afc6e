//! Landed work brought to the user's clone (issue 37: "changes land on the local forge's
//! main; the clone's own main stays behind"). Only where nothing of the user's can be lost:
//! the base branch moved by a fast-forward, when it is checked out in the clone's main work
//! tree with nothing uncommitted, or — checked out nowhere — its ref moved by a
//! compare-and-swap. Anything else is left alone and said, with the command that does it.

use super::{GitError, branch_tip, checked_out_in, git, is_ancestor, uncommitted_changes};
use std::path::Path;

/// What became of the clone's base branch.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Forward {
    /// It was at the landed commit already.
    AlreadyThere,
    /// Moved from this commit to the landed one.
    Moved { from: String },
    /// Left as it was: why, and what brings it up to date.
    Left { why: String },
}

impl Forward {
    /// In words, for the worker's history and the operator.
    pub fn describe(&self, branch: &str, sha: &str, clone: &Path) -> String {
        let short = &sha[..sha.len().min(10)];
        match self {
            Forward::AlreadyThere => format!("{}: {branch} is at {short} already", clone.display()),
            Forward::Moved { from } => format!(
                "{}: {branch} fast-forwarded from {} to the landed {short}",
                clone.display(),
                &from[..from.len().min(10)]
            ),
            Forward::Left { why } => format!(
                "{}: {branch} left behind the landed {short}: {why}",
                clone.display()
            ),
        }
    }
}

/// Brings `branch` of the clone at `clone` to `sha` (a commit the clone has: fetched from the
/// forge) where that is safe; says what it did.
pub fn bring_forward(
    clone: &Path,
    branch: &str,
    sha: &str,
    remote: &str,
) -> Result<Forward, GitError> {
    let how = format!(
        "`git -C {} merge --ff-only {remote}/{branch}` on {branch}",
        clone.display()
    );
    let Some(tip) = branch_tip(clone, branch)? else {
        return Ok(Forward::Left {
            why: format!("the clone has no branch {branch}"),
        });
    };
    if tip == sha {
        return Ok(Forward::AlreadyThere);
    }
    if !is_ancestor(clone, &tip, sha)? {
        return Ok(Forward::Left {
            why: format!(
                "it has commits the landed one does not (not a fast-forward): merge or rebase it yourself ({how})"
            ),
        });
    }
    let holders = checked_out_in(clone, branch)?;
    let main_tree = std::fs::canonicalize(clone).unwrap_or_else(|_| clone.to_path_buf());
    match holders.as_slice() {
        [] => {
            // Checked out nowhere: the ref alone moves, if it is still where it was seen.
            git(
                clone,
                &["update-ref", &format!("refs/heads/{branch}"), sha, &tip],
            )?;
            Ok(Forward::Moved { from: tip })
        }
        [only] if std::fs::canonicalize(only).unwrap_or_else(|_| only.clone()) == main_tree => {
            let dirty = uncommitted_changes(clone)?;
            if !dirty.is_empty() {
                return Ok(Forward::Left {
                    why: format!(
                        "its work tree has uncommitted changes ({}); {how} once they are committed or put away",
                        dirty.iter().take(3).cloned().collect::<Vec<_>>().join(", ")
                    ),
                });
            }
            git(clone, &["merge", "--ff-only", "--quiet", sha])?;
            Ok(Forward::Moved { from: tip })
        }
        _ => Ok(Forward::Left {
            why: format!("{branch} is checked out in another work tree; {how} there"),
        }),
    }
}
