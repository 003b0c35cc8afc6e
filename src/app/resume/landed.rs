//! What a rebuild may believe of a DONE whose checkpoint says its change reached the base
//! branch (`landed`, `broken`: landed and a dependent held; `reverted`). CI cannot always prove
//! such a DONE again (the local forge's run history was in the lost database), and a DONE
//! rebuilt as unproven lands again from the start: a change long on the base branch then waited
//! for base CI it would not get, or — its chain taken by another unproven DONE — was refused
//! for a lock "an operator released".
//!
//! The file's word is not taken: git's is. The base branch is fetched from the remote into
//! orch's own clone and the landing believed only when the DONE commit is in the history of
//! the commit the base was moved to, and that commit (and a revert's, for `reverted`) is in
//! the base branch's history now. A worker cannot put a commit there itself (its pushes go to
//! its own branch); what is there was landed by orch after CI, or merged by a person — landed
//! either way. A change integrated by rebase or squash onto a moved base leaves no such
//! history (its landed commit is a new one): that commit must then have the base head it was
//! built on in its history and carry the very change of the DONE commit (the same patch id).

use crate::app::Loaded;
use crate::milestone::LandState;
use crate::store::workers::WorkerRecord;
use std::collections::{HashMap, HashSet};

/// For each DONE worker among `workers` whose recorded landing reached the base branch: the
/// base head it was found in (`Ok`), or why it is not believed (`Err`). Other workers are not
/// in the answer.
pub fn on_base(l: &Loaded, workers: &[WorkerRecord]) -> HashMap<String, Result<String, String>> {
    let mut fetched = HashSet::new();
    let mut out = HashMap::new();
    for w in workers {
        let Some(landing) = &w.progress.landing else {
            continue;
        };
        if !matches!(
            landing.state,
            LandState::Landed | LandState::Broken | LandState::Reverted
        ) {
            continue;
        }
        let found = (|| {
            let repo = l
                .config
                .repo(&w.repo)
                .ok_or_else(|| format!("{} is not configured", w.repo))?;
            let done = match (&landing.done_sha, &w.progress.tracked_sha) {
                (Some(d), Some(t)) if d == t => d,
                _ => return Err("its landing's DONE commit is not its tracked commit".into()),
            };
            let landed = landing
                .landed
                .as_ref()
                .ok_or("its landing names no landed commit")?;
            if fetched.insert((repo.name.clone(), w.remote.clone()))
                && let Err(e) = crate::gitops::fetch(&repo.path, &w.remote)
            {
                tracing::warn!(repo = %repo.name, error = %e, "cannot fetch the base branch to look for landed changes");
            }
            let head = crate::gitops::base_sha(&repo.path, &w.remote, &repo.branch)
                .map_err(|e| format!("the base branch cannot be read ({e})"))?;
            let ancestor =
                |a: &str, b: &str, what: &str| match crate::gitops::is_ancestor(&repo.path, a, b) {
                    Ok(true) => Ok(()),
                    Ok(false) => Err(what.to_string()),
                    Err(e) => Err(format!("{what} cannot be told ({e})")),
                };
            let within = ancestor(
                done.as_str(),
                landed.as_str(),
                &format!(
                    "its DONE commit {} is not in the history of the landed commit {}",
                    done.short(),
                    landed.short()
                ),
            );
            if let Err(why) = within {
                // Rebased or squashed onto a moved base: a new commit, which must carry the
                // very change of the DONE commit onto the base head it was built on.
                let onto = landing.onto.as_ref().ok_or(why.clone())?;
                ancestor(onto.as_str(), landed.as_str(), &why)?;
                match crate::gitops::lands_change(
                    &repo.path,
                    done.as_str(),
                    onto.as_str(),
                    landed.as_str(),
                ) {
                    Ok(true) => {}
                    Ok(false) => {
                        return Err(format!(
                            "{why}, nor does it carry the DONE commit's change onto {}",
                            onto.short()
                        ));
                    }
                    Err(e) => return Err(format!("{why} ({e})")),
                }
            }
            ancestor(
                landed.as_str(),
                &head,
                &format!(
                    "the landed commit {} is not on {}",
                    landed.short(),
                    repo.branch
                ),
            )?;
            if landing.state == LandState::Reverted {
                let revert = landing
                    .reverted
                    .as_ref()
                    .ok_or("its landing names no revert")?;
                ancestor(
                    revert.as_str(),
                    &head,
                    &format!("the revert {} is not on {}", revert.short(), repo.branch),
                )?;
            }
            Ok(head)
        })();
        out.insert(w.id.clone(), found);
    }
    out
}
