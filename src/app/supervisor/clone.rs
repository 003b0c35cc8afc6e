//! As the supervisor lets go of a change that landed: the user's clone brought up to date
//! where that is safe (`gitops::bring_forward`), and what was done — or the command that does
//! it — recorded in the worker's history (`orch logs`) and told to the operator.

use super::Supervisor;
use crate::forge::Forge;
use crate::milestone::LandState;

impl<F: Forge + 'static> Supervisor<'_, F> {
    pub(super) fn bring_clone_forward(&mut self) {
        let Some(l) = &self.w.progress.landing else {
            return;
        };
        let (LandState::Landed | LandState::Broken, Some(landed)) = (l.state, l.landed.clone())
        else {
            return;
        };
        let Some(repo) = self.env.config.repo(&self.w.repo).cloned() else {
            return;
        };
        let said = match crate::gitops::fetch(&repo.path, &self.w.remote).and_then(|()| {
            crate::gitops::bring_forward(&repo.path, &repo.branch, landed.as_str(), &self.w.remote)
        }) {
            Ok(f) => f.describe(&repo.branch, landed.as_str(), &repo.path),
            Err(e) => format!(
                "{}: {} not brought to the landed {}: {e}; `git -C {} pull {} {}`",
                repo.path.display(),
                repo.branch,
                landed.short(),
                repo.path.display(),
                self.w.remote,
                repo.branch
            ),
        };
        tracing::info!(worker = %self.w.id, "{said}");
        let (id, milestone) = (self.w.id.clone(), self.w.progress.milestone);
        if let Err(e) = self
            .store
            .write(|tx| crate::store::workers::add_event(tx, &id, "clone", milestone, &said))
        {
            tracing::warn!(worker = %id, error = %e, "cannot record what became of the clone");
        }
    }
}
