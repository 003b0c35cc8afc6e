//! Branch protection on Forgejo as `orch check` judges it (pure): which rule covers a branch,
//! and what a repository's rules leave open for the way its changes land. The rules come
//! from `GET /repos/{owner}/{repo}/branch_protections` (`forge::forgejo`); what Forgejo does
//! with them, v8–v16, is in docs/forgejo-branch-protection.md. In short:
//!
//! - the first rule that matches a branch is the one that applies: plain names before globs,
//!   then the oldest first (the order the API lists them in; [`first_match`] sorts again);
//! - a branch a rule covers can never be force-pushed or deleted, by anyone (the pre-receive
//!   hook refuses both before it looks at who pushes); no Forgejo v8–v16 has a setting for
//!   it (`enable_force_push` is Gitea's: where a server sends it, it is read);
//! - who may push: nobody without `enable_push`; everyone with write access with it and no
//!   whitelist; else the whitelisted users, members of the whitelisted teams, and deploy keys
//!   when `push_whitelist_deploy_keys`.

mod glob;

pub use glob::{is_glob, rule_matches};

use crate::config::LandPolicy;
use std::fmt;

/// Who a rule lets do something (its whitelist, when enabled).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Whitelist {
    pub users: Vec<String>,
    pub teams: Vec<String>,
    /// `push_whitelist_deploy_keys`: deploy keys with write access (push whitelists only).
    pub deploy_keys: bool,
}

impl Whitelist {
    fn names_user(&self, account: &str) -> bool {
        self.users.iter().any(|u| u.eq_ignore_ascii_case(account))
    }

    /// Everyone it lets in but `account`: `user a`, `team t`, `deploy keys`.
    fn others(&self, account: Option<&str>) -> Vec<String> {
        let mut out: Vec<String> = self
            .users
            .iter()
            .filter(|u| account.is_none_or(|a| !u.eq_ignore_ascii_case(a)))
            .map(|u| format!("user {u}"))
            .collect();
        out.extend(self.teams.iter().map(|t| format!("team {t}")));
        if self.deploy_keys {
            out.push("deploy keys".into());
        }
        out
    }

    fn is_empty(&self) -> bool {
        self.users.is_empty() && self.teams.is_empty() && !self.deploy_keys
    }
}

/// One branch protection rule, as much of it as orch judges.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Rule {
    /// `rule_name`: a branch name or a glob.
    pub name: String,
    /// `enable_push`: pushes are allowed at all.
    pub enable_push: bool,
    /// `enable_push_whitelist` with its users, teams and deploy keys; `None`: everyone with
    /// write access may push (when `enable_push`).
    pub push_whitelist: Option<Whitelist>,
    /// `enable_merge_whitelist` with its users and teams; `None`: everyone with write access
    /// may merge a pull request.
    pub merge_whitelist: Option<Whitelist>,
    /// `enable_force_push` where the server has it (Gitea; no Forgejo v8–v16): `None` means
    /// force pushes are refused on a covered branch, whoever pushes.
    pub force_push: Option<bool>,
}

impl Rule {
    /// A rule that protects its branches and lets nobody push (Forgejo's defaults).
    pub fn new(name: &str) -> Rule {
        Rule {
            name: name.to_string(),
            enable_push: false,
            push_whitelist: None,
            merge_whitelist: None,
            force_push: None,
        }
    }

    pub fn matches(&self, branch: &str) -> bool {
        rule_matches(&self.name, branch)
    }
}

/// The rule that applies to `branch` (`GetFirstMatchProtectedBranchRule`): plain names first,
/// then globs, each in the order given (the server's: oldest first).
pub fn first_match<'a>(rules: &'a [Rule], branch: &str) -> Option<&'a Rule> {
    let plain = rules.iter().filter(|r| !is_glob(&r.name));
    let globs = rules.iter().filter(|r| is_glob(&r.name));
    plain.chain(globs).find(|r| r.matches(branch))
}

/// A repository and how its changes land: what its rules are judged against.
#[derive(Debug, Clone, Copy)]
pub struct Subject<'a> {
    pub repo: &'a str,
    /// The base branch (repos.yaml `branch`).
    pub base: &'a str,
    pub policy: LandPolicy,
    /// orch lands reverts of breaking changes itself (`downstream.on_breakage: revert` with a
    /// depth): it pushes to the base branch and to `orch/<id>-revert`.
    pub reverts: bool,
    /// The login of the account orch's token belongs to (`GET /api/v1/user`), when known.
    pub account: Option<&'a str>,
}

impl Subject<'_> {
    /// Whether orch itself moves the base branch (a push with its token).
    fn orch_pushes_base(&self) -> bool {
        self.policy == LandPolicy::Merge || (self.reverts && self.policy != LandPolicy::None)
    }

    /// Whether judging the rules needs orch's account (whitelists are compared with it).
    pub fn needs_account(&self) -> bool {
        self.orch_pushes_base() || self.policy == LandPolicy::PullRequest
    }

    fn account_text(&self) -> String {
        match self.account {
            Some(a) => format!("orch's account {a}"),
            None => "orch's account (the token's)".into(),
        }
    }

    /// A worker's branch (`orch/<repo>-<8 hex>`, `spawn::new_id`).
    fn worker_branch(&self) -> String {
        format!("orch/{}-{SAMPLE_ID}", self.repo)
    }
}

/// The 8 hex digits of a sample worker id.
const SAMPLE_ID: &str = "0123abcd";

/// The rule name README recommends for workers' branches: `orch/<repo>-<8 hex>` only, not
/// orch's own `orch/<id>-land` and `orch/<id>-revert`, which it rebuilds with force pushes.
pub const WORKER_BRANCHES_RULE: &str = "orch/*-????????";

/// What `orch check` says about a repository's branch protection (each a warning).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Finding {
    /// No rule covers the base branch.
    BaseUnprotected,
    /// The rule covering the base lets everyone with write access push.
    BaseOpenToWriters { rule: String },
    /// The rule lets others than orch push to a base only orch should move.
    OthersMayPush { rule: String, others: Vec<String> },
    /// orch moves the base, and the rule does not let its account push.
    OrchCannotPush { rule: String, push_disabled: bool },
    /// `land.policy: direct`, and the rule lets nobody push to the base.
    WorkersCannotPushBase { rule: String },
    /// `land.policy: pull_request`: direct pushes allowed though none are needed.
    PushesNotNeeded { rule: String, who: Vec<String> },
    /// `land.policy: pull_request`: the merge whitelist leaves orch's account out.
    OrchCannotMerge { rule: String },
    /// The server says the rule allows force pushes (`enable_force_push`).
    ForcePushAllowed { rule: String },
    /// No rule covers workers' branches (advisory).
    WorkerBranchesUnprotected,
    /// The rule covering workers' branches lets nobody push.
    WorkerBranchesClosed { rule: String },
    /// A rule covers a branch orch force-pushes (`orch/<id>-land`, `orch/<id>-revert`).
    RebuiltBranchProtected { rule: String, suffix: &'static str },
}

/// Judges `rules` (the repository's, in the server's order) for `subject`.
pub fn findings(rules: &[Rule], subject: &Subject) -> Vec<Finding> {
    let mut out = Vec::new();
    match first_match(rules, subject.base) {
        None => out.push(Finding::BaseUnprotected),
        Some(rule) => base_findings(rule, subject, &mut out),
    }
    let worker = subject.worker_branch();
    match first_match(rules, &worker) {
        None => out.push(Finding::WorkerBranchesUnprotected),
        Some(rule) if !rule.enable_push && subject.policy != LandPolicy::Direct => {
            out.push(Finding::WorkerBranchesClosed {
                rule: rule.name.clone(),
            })
        }
        Some(_) => {}
    }
    let mut rebuilt = Vec::new();
    if subject.policy == LandPolicy::Merge {
        rebuilt.push("land");
    }
    if subject.reverts && subject.policy != LandPolicy::None {
        rebuilt.push("revert");
    }
    for suffix in rebuilt {
        if let Some(rule) = first_match(rules, &format!("{worker}-{suffix}")) {
            out.push(Finding::RebuiltBranchProtected {
                rule: rule.name.clone(),
                suffix,
            });
        }
    }
    out
}

fn base_findings(rule: &Rule, s: &Subject, out: &mut Vec<Finding>) {
    let name = || rule.name.clone();
    if rule.force_push == Some(true) {
        out.push(Finding::ForcePushAllowed { rule: name() });
    }
    match (&rule.push_whitelist, rule.enable_push) {
        (_, false) => {
            if s.orch_pushes_base() {
                out.push(Finding::OrchCannotPush {
                    rule: name(),
                    push_disabled: true,
                });
            } else if s.policy == LandPolicy::Direct {
                out.push(Finding::WorkersCannotPushBase { rule: name() });
            }
        }
        (None, true) => out.push(Finding::BaseOpenToWriters { rule: name() }),
        (Some(list), true) => {
            if s.orch_pushes_base() {
                if let Some(account) = s.account {
                    let others = list.others(Some(account));
                    if !others.is_empty() {
                        out.push(Finding::OthersMayPush {
                            rule: name(),
                            others,
                        });
                    }
                }
                // A team may hold the account: only a whitelist without teams says no.
                let named = s.account.map(|a| list.names_user(a));
                if list.teams.is_empty() && (list.users.is_empty() || named == Some(false)) {
                    out.push(Finding::OrchCannotPush {
                        rule: name(),
                        push_disabled: false,
                    });
                }
            } else if s.policy == LandPolicy::PullRequest && !list.is_empty() {
                out.push(Finding::PushesNotNeeded {
                    rule: name(),
                    who: list.others(None),
                });
            }
        }
    }
    if s.policy == LandPolicy::PullRequest
        && let (Some(list), Some(account)) = (&rule.merge_whitelist, s.account)
        && !list.names_user(account)
        && list.teams.is_empty()
    {
        out.push(Finding::OrchCannotMerge { rule: name() });
    }
}

/// A finding in words, for `subject`'s repository.
pub struct Said<'a> {
    pub finding: &'a Finding,
    pub subject: &'a Subject<'a>,
}

impl fmt::Display for Said<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let s = self.subject;
        let (repo, base) = (s.repo, s.base);
        write!(f, "repository {repo}: ")?;
        let who_should_push = if s.orch_pushes_base() {
            format!("a push whitelist of {} only", s.account_text())
        } else {
            match s.policy {
                LandPolicy::Direct => {
                    "a push whitelist of the accounts your workers push with (land.policy direct)"
                        .to_string()
                }
                LandPolicy::PullRequest => {
                    "pushes disabled (land.policy pull_request: orch merges through pull requests)"
                        .to_string()
                }
                _ => "pushes disabled or whitelisted to the people who merge (land.policy none)"
                    .to_string(),
            }
        };
        match self.finding {
            Finding::BaseUnprotected => write!(
                f,
                "base branch {base} is not protected on the forge (no branch protection rule matches it): anyone with write access can push to it, force-push or delete it; protect it with {who_should_push}"
            ),
            Finding::BaseOpenToWriters { rule } => write!(
                f,
                "rule \"{rule}\" lets anyone with write access push to base branch {base} (enable_push without a push whitelist); set {who_should_push}"
            ),
            Finding::OthersMayPush { rule, others } => write!(
                f,
                "rule \"{rule}\" lets {} push to base branch {base} besides {}: only orch moves it (land.policy {}), so its push whitelist should name orch's account only",
                others.join(", "),
                s.account_text(),
                s.policy.as_str()
            ),
            Finding::OrchCannotPush {
                rule,
                push_disabled: true,
            } => write!(
                f,
                "rule \"{rule}\" forbids every push to base branch {base} (enable_push is off), and orch moves it (land.policy {}{}): its landings would be refused; enable pushes with {who_should_push}",
                s.policy.as_str(),
                if s.policy == LandPolicy::Merge {
                    ""
                } else {
                    ", downstream.on_breakage revert"
                }
            ),
            Finding::OrchCannotPush {
                rule,
                push_disabled: false,
            } => write!(
                f,
                "rule \"{rule}\" does not let {} push to base branch {base} (not in its push whitelist), and orch moves it (land.policy {}): its landings would be refused; add it to the whitelist",
                s.account_text(),
                s.policy.as_str()
            ),
            Finding::WorkersCannotPushBase { rule } => write!(
                f,
                "rule \"{rule}\" forbids every push to base branch {base} (enable_push is off), and with land.policy direct the workers push to it: their pushes would be refused; enable pushes with {who_should_push}"
            ),
            Finding::PushesNotNeeded { rule, who } => write!(
                f,
                "rule \"{rule}\" lets {} push to base branch {base} directly; with land.policy pull_request no direct push is needed (changes land through merged pull requests): disable pushes",
                who.join(", ")
            ),
            Finding::OrchCannotMerge { rule } => write!(
                f,
                "rule \"{rule}\" does not let {} merge pull requests into {base} (not in its merge whitelist): with land.policy pull_request its merges would be refused",
                s.account_text()
            ),
            Finding::ForcePushAllowed { rule } => write!(
                f,
                "rule \"{rule}\" allows force pushes to base branch {base} (enable_force_push): a force push can rewrite what was verified; turn it off"
            ),
            Finding::WorkerBranchesUnprotected => write!(
                f,
                "workers' branches (orch/{repo}-<8 hex digits>) are not protected (no rule matches {}): anyone with write access can force-push or delete one, which orch only notices afterwards; a rule \"{WORKER_BRANCHES_RULE}\" forbids both (advisory)",
                s.worker_branch()
            ),
            Finding::WorkerBranchesClosed { rule } => write!(
                f,
                "rule \"{rule}\" forbids every push to workers' branches (orch/{repo}-<8 hex digits>, enable_push is off): workers could not push their work; enable pushes (whitelisted to your workers' accounts where you can)"
            ),
            Finding::RebuiltBranchProtected { rule, suffix } => {
                let why = if *suffix == "land" {
                    "an integration it rebuilt after the base moved (land.policy merge)"
                } else {
                    "a revert it rebuilt after the base moved (downstream.on_breakage revert)"
                };
                write!(
                    f,
                    "rule \"{rule}\" also covers orch's own branches orch/<worker id>-{suffix}: Forgejo refuses every force push to a protected branch, and orch force-pushes {why} there, so such a landing would be refused; narrow the rule to workers' branches (\"{WORKER_BRANCHES_RULE}\")"
                )
            }
        }
    }
}

#[cfg(test)]
mod tests;
