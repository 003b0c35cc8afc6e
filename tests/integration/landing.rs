//! From DONE to the base branch, on the local forge, with CI that really builds on the
//! dependencies' base branches: vm's `test` reads core's base branch from the forge and fails
//! without core's change, net's reads vm's. Scripted workers: `land_worker.sh`.

use crate::support::{Org, RepoSpec, Spec, output_text, poll_until};
use orch::milestone::{LandState, Milestone};
use serde_json::Value;
use std::path::{Path, PathBuf};
use std::time::Duration;

/// core ← vm ← net; each one's `test` needs its dependency's change on the base branch.
pub(crate) fn org(land: Option<&str>) -> Org {
    org_with(land, None)
}

/// `org` with a `downstream:` mapping (None: orch's default).
fn org_with(land: Option<&str>, downstream: Option<&str>) -> Org {
    // The run's checkout of its upstream at the base head it found ($ORCH_UPSTREAMS).
    let probe = |dep: &str| format!("grep -q '{dep} feature' \"$ORCH_UPSTREAMS/{dep}/{dep}.txt\"");
    // vm also refuses a core that says "breaking" (the downstream breakage scenario).
    // (unless vm handles it: what a fix worker adds).
    let vm_test = format!(
        "{} && {{ ! grep -q breaking \"$ORCH_UPSTREAMS/core/core.txt\" || test -f handles-breaking.txt; }}",
        probe("core")
    );
    let mut spec = Spec::local("land_worker.sh")
        .repo(RepoSpec::new("core").standard_ci("true"))
        .repo(RepoSpec::new("vm").deps(&["core"]).standard_ci(&vm_test))
        .repo(RepoSpec::new("net").deps(&["vm"]).standard_ci(&probe("vm")))
        // orch's default: each landing checks its direct dependents.
        .downstream(downstream);
    spec.max_parallel = 3;
    if let Some(l) = land {
        spec = spec.land(l);
    }
    Org::new(spec)
}

fn wave_file(org: &Org, name: &str) -> PathBuf {
    let text = format!(
        "name: {name}\ntasks:\n  - {{id: core-1, repo: core, task: \"core feature\"}}\n  - {{id: vm-1, repo: vm, task: \"vm feature\"}}\n  - {{id: net-1, repo: net, task: \"net feature\"}}\n"
    );
    let path = org.root.join(format!("{name}.yaml"));
    std::fs::write(&path, text).unwrap();
    path
}

fn tick(org: &Org, file: &Path) {
    let out = org.run(&["wave", "run", file.to_str().unwrap(), "--tick"]);
    assert_eq!(out.status.code(), Some(0), "{}", output_text(&out));
}

fn status(org: &Org, name: &str) -> Value {
    org.json(&["wave", "status", name, "--json"])
}

fn bare(org: &Org, repo: &str) -> PathBuf {
    org.state.join("forge").join(format!("{repo}.git"))
}

/// The head of `branch` in the forge's remote of `repo`.
fn forge_head(org: &Org, repo: &str, branch: &str) -> String {
    let out = std::process::Command::new("git")
        .arg("--git-dir")
        .arg(bare(org, repo))
        .args(["rev-parse", &format!("refs/heads/{branch}")])
        .output()
        .unwrap();
    String::from_utf8_lossy(&out.stdout).trim().to_string()
}

fn is_ancestor(org: &Org, repo: &str, a: &str, b: &str) -> bool {
    std::process::Command::new("git")
        .arg("--git-dir")
        .arg(bare(org, repo))
        .args(["merge-base", "--is-ancestor", a, b])
        .status()
        .unwrap()
        .success()
}

fn worker_of(org: &Org, repo: &str) -> orch::store::workers::WorkerRecord {
    org.workers()
        .into_iter()
        .find(|w| w.repo == repo)
        .unwrap_or_else(|| panic!("no worker on {repo}"))
}

fn landing_state(w: &orch::store::workers::WorkerRecord) -> Option<LandState> {
    w.progress.landing.as_ref().map(|l| l.state)
}

/// The base branch's CI for `sha` is green with the sync job `success`.
fn assert_base_green(org: &Org, repo: &str, sha: &str) {
    let v = org.json(&["ci", "status", "--repo", repo, "--sha", sha, "--json"]);
    assert_eq!(v["verdict"], "green", "{repo} {sha}: {v:#}");
    let runs = v["runs"].as_array().unwrap();
    // The worker's branch run (a fast-forward) and the base branch's own, or the landing
    // branch's and the base's (an integration): every one green with the sync job success.
    assert!(runs.len() >= 2, "the base branch ran CI for it too: {v:#}");
    for run in runs {
        let sync = run["jobs"]
            .as_array()
            .unwrap()
            .iter()
            .find(|j| j["name"] == "radicle-push")
            .unwrap_or_else(|| panic!("no sync job: {v:#}"));
        assert_eq!(sync["status"], "success", "{repo} {sha}: {v:#}");
    }
}

#[test]
fn a_bottom_up_wave_lands_each_change_in_order_and_dependents_build_on_it() {
    let org = org(None);
    let base0: Vec<String> = ["core", "vm", "net"]
        .iter()
        .map(|r| {
            // The forge's remote is made at the first spawn; the clone's main is its seed.
            crate::support::git(&org.clone_path(r), &["rev-parse", "HEAD"])
                .trim()
                .to_string()
        })
        .collect();
    let file = wave_file(&org, "up");
    let v = poll_until(
        "the wave to finish",
        Duration::from_secs(180),
        || {
            tick(&org, &file);
            std::thread::sleep(Duration::from_millis(300));
            let v = status(&org, "up");
            (v["finished"] == true).then_some(v)
        },
        || format!("{:#}", status(&org, "up")),
    );
    assert_eq!(v["done"], 3, "{v:#}");
    let mut landed_at = Vec::new();
    for (i, repo) in ["core", "vm", "net"].iter().enumerate() {
        let w = worker_of(&org, repo);
        assert_eq!(w.milestone(), Milestone::Done);
        let l = w.progress.landing.clone().expect("a landing");
        assert_eq!(l.state, LandState::Landed, "{repo}: {l:?}");
        let done = w.progress.tracked_sha.clone().unwrap();
        let head = forge_head(&org, repo, "main");
        // The base was not moved by anyone else: a fast-forward to the verified commit.
        assert_eq!(
            head,
            done.as_str(),
            "{repo}: base fast-forwarded to the DONE commit"
        );
        assert_ne!(head, base0[i]);
        assert_base_green(&org, repo, &head);
        assert_eq!(
            org.lock_of(&w.id),
            None,
            "{repo}: lock released after landing"
        );
        // The lock went only after the landing (its release names it).
        let history = org.store().lock_history().unwrap();
        let rel = history
            .iter()
            .find(|h| h.holder == w.id && h.action == "release")
            .expect("released");
        assert!(
            rel.reason.as_deref().unwrap_or("").contains("landed"),
            "{rel:?}"
        );
        landed_at.push((w.created_ms, rel.at_ms));
        let events: Vec<String> = org
            .events(&w.id)
            .into_iter()
            .filter(|e| e.kind == "landing")
            .map(|e| e.detail)
            .collect();
        assert!(
            events.iter().any(|e| e.starts_with("pending -> base_ci")),
            "{events:?}"
        );
        // core and vm have a dependent checked on their landed change first; net has none.
        let last = if *repo == "net" {
            "base_ci -> landed"
        } else {
            "downstream -> landed"
        };
        assert!(events.iter().any(|e| e.starts_with(last)), "{events:?}");
    }
    // In order: each dependent started after its upstream had landed, from the landed head.
    for i in 1..3 {
        assert!(
            landed_at[i].0 >= landed_at[i - 1].1,
            "task {i} started before its upstream landed: {landed_at:?}"
        );
    }
    // Each dependent's handoff file (named in its prompt) names the upstream changes it
    // builds on.
    let core = worker_of(&org, "core");
    let core_landed = core.progress.landing.unwrap().landed.unwrap();
    let vm = worker_of(&org, "vm");
    let prompt = std::fs::read_to_string(org.state.join(&vm.id).join("prompt.md")).unwrap();
    assert!(prompt.contains("Context: $ORCH_HANDOFF"), "{prompt}");
    let handoff = std::fs::read_to_string(org.state.join(&vm.id).join("handoff.md")).unwrap();
    assert!(
        handoff.contains("UPSTREAM: changes landed in your dependencies")
            && handoff.contains(&format!("- core: {} on main", core_landed.short()))
            && handoff.contains("LIMITS: WORKING "),
        "{handoff}"
    );
    // orch status shows the landing.
    let table = String::from_utf8(org.run(&["status"]).stdout).unwrap();
    assert!(
        table.contains("LANDING") && table.contains(&format!("landed {}", core_landed.short())),
        "{table}"
    );
    let s = org.json(&["status", "--json"]);
    let row = s["workers"]
        .as_array()
        .unwrap()
        .iter()
        .find(|w| w["worker_id"] == core.id.as_str())
        .unwrap()
        .clone();
    assert_eq!(row["landing"]["state"], "landed", "{row:#}");
    assert_eq!(row["landing"]["landed_sha"], core_landed.as_str());
    for repo in ["vm", "net"] {
        let w = worker_of(&org, repo);
        let started = std::fs::read_to_string(org.out.join(format!("started-at-{}", w.id)))
            .unwrap()
            .trim()
            .to_string();
        assert_eq!(
            started, w.base_sha,
            "the worktree starts at the base it recorded"
        );
    }
}

#[test]
fn a_commit_pushed_to_the_base_meanwhile_is_integrated_verified_and_landed() {
    let org = org(None);
    let id = org.spawn("core", "core feature [base]", "t-base");
    org.wait_done(&id);
    let w = org.worker(&id);
    let l = w.progress.landing.clone().unwrap();
    assert_eq!(l.state, LandState::Landed, "{l:?}");
    let done = w.progress.tracked_sha.clone().unwrap();
    let head = forge_head(&org, "core", "main");
    assert_ne!(head, done.as_str(), "an integration, not the DONE commit");
    assert!(is_ancestor(&org, "core", done.as_str(), &head));
    assert_eq!(l.landed.as_ref().map(|s| s.as_str()), Some(head.as_str()));
    assert_eq!(l.attempts, 1);
    // The integration was verified on its landing branch before the base moved to it.
    assert_eq!(
        forge_head(&org, "core", &format!("{}-land", w.branch)),
        head
    );
    assert_base_green(&org, "core", &head);
    assert_eq!(org.lock_of(&id), None);
}

#[test]
fn a_conflict_with_the_base_keeps_the_lock_and_alerts() {
    let org = org(None);
    let id = org.spawn("core", "core feature [conflict]", "t-conflict");
    org.wait_until("the landing to conflict", Duration::from_secs(90), || {
        let w = org.worker(&id);
        landing_state(&w) == Some(LandState::Conflict) && !w.supervised(orch::store::now_ms())
    });
    let w = org.worker(&id);
    assert_eq!(w.milestone(), Milestone::Done);
    let l = w.progress.landing.clone().unwrap();
    assert!(
        l.detail.as_deref().unwrap_or("").contains("core.txt"),
        "the conflicting file is named: {l:?}"
    );
    assert_eq!(org.lock_of(&id).as_deref(), Some("core"), "lock kept");
    let alerts = org.alerts(&id);
    assert!(
        alerts.iter().any(|a| a["kind"] == "landing_conflict"),
        "{alerts:?}"
    );
    // The base branch holds only the other commit.
    let done = w.progress.tracked_sha.unwrap();
    assert!(!is_ancestor(
        &org,
        "core",
        done.as_str(),
        &forge_head(&org, "core", "main")
    ));
    // A person merges by hand: the change is then on its base branch; the release is audited.
    let out = org.run(&["release", &id, "--force", "--reason", "merged by hand"]);
    assert!(out.status.success(), "{}", output_text(&out));
}

#[test]
fn a_worker_that_pushes_three_times_green_is_not_stopped_until_it_says_done() {
    let org = org(None);
    let id = org.spawn("core", "core feature [three]", "t-three");
    let greens = org.out.join(format!("green-{id}"));
    org.wait_until("three green pushes", Duration::from_secs(90), || {
        std::fs::read_to_string(&greens).is_ok_and(|s| s.lines().count() == 3)
    });
    let w = org.worker(&id);
    assert_eq!(
        w.milestone(),
        Milestone::PushedToCi,
        "green, but the worker has not said DONE"
    );
    assert!(w.worker_running, "the worker was not stopped");
    assert_eq!(org.pushes(&id).len(), 3);
    std::fs::write(org.out.join(format!("release-{id}")), "").unwrap();
    org.wait_done(&id);
    let w = org.worker(&id);
    let last = std::fs::read_to_string(&greens).unwrap();
    let last = last.lines().last().unwrap();
    assert_eq!(w.progress.tracked_sha.as_ref().unwrap().as_str(), last);
    assert_eq!(
        forge_head(&org, "core", "main"),
        last,
        "the last push landed"
    );
}

#[test]
fn a_worker_that_ends_its_turn_after_a_green_push_is_done_without_the_word() {
    let org = org(None);
    let id = org.spawn("core", "core feature [exit]", "t-exit");
    org.wait_done(&id);
    let w = org.worker(&id);
    assert_eq!(w.milestone(), Milestone::Done);
    assert_eq!(w.exit_code, Some(0));
    assert_eq!(landing_state(&w), Some(LandState::Landed));
}

#[test]
fn with_land_none_the_wave_waits_for_a_person_and_goes_on_once_merged() {
    let org = org(Some("{policy: none}"));
    let file = wave_file(&org, "manual");
    let core = poll_until(
        "core's task to be DONE",
        Duration::from_secs(90),
        || {
            tick(&org, &file);
            std::thread::sleep(Duration::from_millis(300));
            org.workers()
                .into_iter()
                .find(|w| w.repo == "core" && w.milestone() == Milestone::Done)
        },
        || format!("{:#}", status(&org, "manual")),
    );
    assert_eq!(landing_state(&core), Some(LandState::Waiting));
    assert_eq!(
        org.lock_of(&core.id),
        None,
        "land: none frees the lock at DONE"
    );
    // Nothing lands by itself: vm is not started, and status says why.
    for _ in 0..3 {
        tick(&org, &file);
    }
    assert!(org.workers().iter().all(|w| w.repo != "vm"), "vm waits");
    let v = status(&org, "manual");
    let text = v.to_string();
    assert!(
        text.contains("land: none") && text.contains(&core.branch),
        "wave status says why: {v:#}"
    );
    // A person merges core's branch.
    let done = core.progress.tracked_sha.clone().unwrap();
    let ok = std::process::Command::new("git")
        .arg("--git-dir")
        .arg(bare(&org, "core"))
        .args(["update-ref", "refs/heads/main", done.as_str()])
        .status()
        .unwrap();
    assert!(ok.success());
    let v = poll_until(
        "the wave to finish",
        Duration::from_secs(120),
        || {
            tick(&org, &file);
            std::thread::sleep(Duration::from_millis(300));
            let v = status(&org, "manual");
            // Merge vm's and net's branches by hand as they come.
            for repo in ["vm", "net"] {
                if let Some(w) = org
                    .workers()
                    .into_iter()
                    .find(|w| w.repo == repo && w.milestone() == Milestone::Done)
                {
                    let sha = w.progress.tracked_sha.unwrap();
                    let _ = std::process::Command::new("git")
                        .arg("--git-dir")
                        .arg(bare(&org, repo))
                        .args(["update-ref", "refs/heads/main", sha.as_str()])
                        .status();
                }
            }
            (v["finished"] == true).then_some(v)
        },
        || format!("{:#}", status(&org, "manual")),
    );
    assert_eq!(v["done"], 3, "{v:#}");
    assert_eq!(
        landing_state(&org.worker(&core.id)),
        Some(LandState::Landed)
    );
}

#[test]
fn a_landed_change_that_breaks_a_dependent_is_caught_alerted_and_held() {
    let org = org(None);
    // vm's base must carry core's feature for vm's CI to be green at all: land one first.
    let first = org.spawn("core", "core feature", "t-first");
    org.wait_done(&first);
    let first_w = org.worker(&first);
    let l = first_w.progress.landing.clone().unwrap();
    assert_eq!(l.state, LandState::Landed, "{l:?}");
    // Its dependent was checked against it, green.
    assert_eq!(l.downstream.len(), 1);
    assert_eq!(l.downstream[0].repo, "vm");
    assert_eq!(
        l.downstream[0].verdict,
        Some(orch::ci::verdict::VerdictKind::Green),
        "{l:?}"
    );
    // vm's base head ran CI on a verification branch, never a new commit on vm's base.
    let vm_base = forge_head(&org, "vm", "main");
    assert_eq!(l.downstream[0].sha.as_ref().unwrap().as_str(), vm_base);
    assert_eq!(
        forge_head(&org, "vm", &format!("orch/verify/{first}")),
        vm_base
    );

    // Now a change that breaks vm.
    let id = org.spawn("core", "core feature, breaking", "t-break");
    org.wait_done(&id);
    let w = org.worker(&id);
    let l = w.progress.landing.clone().unwrap();
    assert_eq!(l.state, LandState::Broken, "{l:?}");
    let landed = l.landed.clone().unwrap();
    assert_eq!(
        forge_head(&org, "core", "main"),
        landed.as_str(),
        "the change stays landed"
    );
    assert_eq!(
        l.downstream[0].failed_jobs,
        vec!["test".to_string()],
        "{l:?}"
    );
    let alerts = org.alerts(&id);
    let a = alerts
        .iter()
        .find(|a| a["kind"] == "downstream_breakage")
        .unwrap_or_else(|| panic!("{alerts:?}"));
    let msg = a["message"].as_str().unwrap();
    assert!(
        msg.contains(landed.short()) && msg.contains("vm") && msg.contains("test"),
        "{msg}"
    );
    // sessions show tells the landing and each dependent's check.
    let shown = String::from_utf8(org.run(&["sessions", "show", &id]).stdout).unwrap();
    let line = shown
        .lines()
        .find(|l| l.starts_with("landing"))
        .unwrap_or_else(|| panic!("{shown}"));
    assert!(
        line.contains("broken") && line.contains("vm: red"),
        "{line}"
    );
    // core's own lock went; vm's chain is held for a person, in the same transaction.
    assert_eq!(org.lock_of(&id), None);
    let s = org.json(&["status", "--json"]);
    let holds: Vec<&Value> = s["locks"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|l| l["holder"] == format!("hold:orch-downstream-{id}").as_str())
        .collect();
    assert_eq!(holds.len(), 1, "{s:#}");
    assert_eq!(holds[0]["repo"], "vm");
    // Nothing starts on vm while it is held.
    let out = org.run(&["can-spawn", "vm"]);
    assert_eq!(out.status.code(), Some(1), "{}", output_text(&out));
    let out = org.run(&["unhold", "vm"]);
    assert!(out.status.success(), "{}", output_text(&out));
}

/// core alone, whose CI waits at a gate for runs of the base branch and of landing branches
/// (the worker's own branch runs at once): a landing stops where the test wants it.
fn gated_org() -> Org {
    let spec = Spec::local("land_worker.sh").repo(RepoSpec::new("core").standard_ci(
        "case \"$ORCH_CI_REF\" in refs/heads/main|refs/heads/orch/*-land) \
         while [ ! -e \"$(cd ../../../../.. && pwd)/ctl/gates/core\" ]; do sleep 0.05; done;; esac; true",
    ));
    Org::new(spec)
}

fn landing_of(org: &Org, id: &str) -> orch::milestone::Landing {
    org.worker(id).progress.landing.unwrap()
}

/// How many times the base branch of `repo` was moved by orch (its `landing` events).
fn base_moves(org: &Org, id: &str) -> usize {
    org.events(id)
        .iter()
        .filter(|e| e.kind == "landing" && e.detail.contains("base moved to"))
        .count()
}

#[test]
fn killed_while_its_integration_is_verified_resume_finishes_the_landing_once() {
    let org = gated_org();
    let id = org.spawn("core", "core feature [base]", "t-kill-verify");
    org.wait_until(
        "the integration under verification",
        Duration::from_secs(60),
        || landing_of(&org, &id).state == LandState::Verifying,
    );
    org.kill_supervisor(&id);
    assert_eq!(
        org.lock_of(&id).as_deref(),
        Some("core"),
        "the lock outlives the kill"
    );
    let answer = org.resume();
    let r = crate::support::resumed_entry(&answer, &id).unwrap_or_else(|| panic!("{answer}"));
    assert_eq!(r["action"], "following", "{r}");
    org.open_gate("core");
    org.wait_done(&id);
    let l = landing_of(&org, &id);
    assert_eq!(l.state, LandState::Landed, "{l:?}");
    assert_eq!(l.attempts, 1, "the integration was not built again");
    assert_eq!(base_moves(&org, &id), 1, "landed once");
    assert_eq!(forge_head(&org, "core", "main"), l.landed.unwrap().as_str());
    assert_eq!(org.lock_of(&id), None);
}

#[test]
fn killed_while_the_base_branch_ci_runs_resume_finishes_the_landing_once() {
    let org = gated_org();
    let id = org.spawn("core", "core feature", "t-kill-base");
    org.wait_until("the base branch's CI", Duration::from_secs(60), || {
        landing_of(&org, &id).state == LandState::BaseCi
    });
    let head = forge_head(&org, "core", "main");
    org.kill_supervisor(&id);
    org.resume();
    org.open_gate("core");
    org.wait_done(&id);
    let l = landing_of(&org, &id);
    assert_eq!(l.state, LandState::Landed, "{l:?}");
    assert_eq!(base_moves(&org, &id), 1);
    assert_eq!(
        forge_head(&org, "core", "main"),
        head,
        "the base did not move again"
    );
    assert_eq!(org.lock_of(&id), None);
}

#[test]
fn a_move_made_but_not_recorded_before_a_kill_is_found_again_not_made_twice() {
    let org = gated_org();
    let id = org.spawn("core", "core feature [base]", "t-kill-cas");
    org.wait_until(
        "the integration under verification",
        Duration::from_secs(60),
        || landing_of(&org, &id).state == LandState::Verifying,
    );
    org.kill_supervisor(&id);
    // The compare-and-swap happened (the base is at the integration), its record did not.
    let l = landing_of(&org, &id);
    let candidate = l.candidate.clone().unwrap();
    let ok = std::process::Command::new("git")
        .arg("--git-dir")
        .arg(bare(&org, "core"))
        .args([
            "update-ref",
            "refs/heads/main",
            candidate.as_str(),
            l.onto.unwrap().as_str(),
        ])
        .status()
        .unwrap();
    assert!(ok.success());
    org.resume();
    org.open_gate("core");
    org.wait_done(&id);
    let l = landing_of(&org, &id);
    assert_eq!(l.state, LandState::Landed, "{l:?}");
    assert_eq!(l.landed.as_ref(), Some(&candidate), "{l:?}");
    assert_eq!(
        forge_head(&org, "core", "main"),
        candidate.as_str(),
        "nothing landed twice"
    );
    assert_eq!(org.lock_of(&id), None);
}

/// A DONE worker's branch moved by someone else while its integration is under verification
/// (the landing has not moved the base): DONE is taken back — BLOCKED, its lock kept, its
/// landing back to planned — a critical alert names both commits, and nothing lands: not the
/// moved head, and not the integration either once its CI turns green.
#[test]
fn a_done_branch_moved_before_its_landing_takes_done_back_and_nothing_lands() {
    let org = gated_org();
    let id = org.spawn("core", "core feature [base]", "t-moved");
    org.wait_until(
        "the integration under verification",
        Duration::from_secs(60),
        || landing_of(&org, &id).state == LandState::Verifying,
    );
    let w = org.worker(&id);
    assert_eq!(w.progress.milestone, Milestone::Done);
    let done = w.progress.tracked_sha.clone().unwrap();
    let candidate = landing_of(&org, &id).candidate.unwrap();
    let base_before = forge_head(&org, "core", "main");
    // Someone outside any worker (the forge takes the push) moves the worker's branch.
    let work = org.root.join("elsewhere");
    crate::support::git(
        &org.root,
        &[
            "clone",
            "-q",
            "--branch",
            &format!("orch/{id}"),
            bare(&org, "core").to_str().unwrap(),
            work.to_str().unwrap(),
        ],
    );
    std::fs::write(work.join("other.txt"), "not the verified change\n").unwrap();
    crate::support::git(&work, &["add", "other.txt"]);
    crate::support::git(&work, &["commit", "-q", "-m", "moved"]);
    crate::support::git(&work, &["push", "-q", "origin", &format!("HEAD:orch/{id}")]);
    let moved = crate::support::git(&work, &["rev-parse", "HEAD"])
        .trim()
        .to_string();
    let w = org.wait_milestone(&id, "BLOCKED", Duration::from_secs(60));
    let reason = w.progress.end_reason.clone().unwrap_or_default();
    assert!(reason.contains(&moved), "{reason}");
    assert_eq!(
        w.progress.landing.as_ref().map(|l| l.state),
        Some(LandState::Planned)
    );
    assert_eq!(
        org.lock_of(&id).as_deref(),
        Some("core"),
        "the lock is kept"
    );
    let alert = org
        .alerts(&id)
        .into_iter()
        .find(|a| a["kind"] == "done_reopened")
        .unwrap_or_else(|| panic!("{:?}", org.alerts(&id)));
    assert_eq!(alert["severity"], "critical");
    let text = alert["message"].as_str().unwrap();
    assert!(
        text.contains(done.as_str()) && text.contains(&moved),
        "{text}"
    );
    // Nothing waits for the integration's CI any more: its run is cancelled once the
    // supervisor lets go (or, had it finished first, it is green). Either way nothing lands.
    org.open_gate("core");
    org.wait_until("the integration's CI", Duration::from_secs(60), || {
        let v = org.json(&[
            "ci",
            "status",
            "--repo",
            "core",
            "--sha",
            candidate.as_str(),
            "--json",
        ]);
        v["verdict"] == "green" || v["verdict"] == "red"
    });
    let w = org.worker(&id);
    assert_eq!(w.progress.milestone, Milestone::Blocked);
    assert_eq!(
        forge_head(&org, "core", "main"),
        base_before,
        "nothing landed"
    );
    assert!(!is_ancestor(&org, "core", &moved, &base_before));
    assert_eq!(base_moves(&org, &id), 0);
    org.run(&["cancel", &id]);
}

/// The same move made on the forge's server without a push (`git update-ref` in the bare
/// repository: no hook runs): the supervisor, still landing, sees it at its next look at the
/// branch, takes DONE back, and raises the same `done_branch_moved` alert a push raises.
#[test]
fn a_done_branch_moved_without_a_push_before_its_landing_is_alerted_as_a_push_is() {
    let org = gated_org();
    let id = org.spawn("core", "core feature [base]", "t-moved-ref");
    org.wait_until(
        "the integration under verification",
        Duration::from_secs(60),
        || landing_of(&org, &id).state == LandState::Verifying,
    );
    let done = org.worker(&id).progress.tracked_sha.clone().unwrap();
    let git = |args: &[&str]| {
        let out = std::process::Command::new("git")
            .arg("--git-dir")
            .arg(bare(&org, "core"))
            .args(args)
            .env("GIT_AUTHOR_NAME", "someone")
            .env("GIT_AUTHOR_EMAIL", "someone@example.invalid")
            .env("GIT_COMMITTER_NAME", "someone")
            .env("GIT_COMMITTER_EMAIL", "someone@example.invalid")
            .output()
            .unwrap();
        assert!(out.status.success(), "{out:?}");
        String::from_utf8(out.stdout).unwrap().trim().to_string()
    };
    let tree = format!("{}^{{tree}}", done.as_str());
    let moved = git(&["commit-tree", &tree, "-p", done.as_str(), "-m", "moved"]);
    git(&[
        "update-ref",
        &format!("refs/heads/orch/{id}"),
        &moved,
        done.as_str(),
    ]);
    org.wait_milestone(&id, "BLOCKED", Duration::from_secs(60));
    let alert = org
        .alerts(&id)
        .into_iter()
        .find(|a| a["kind"] == "done_branch_moved")
        .unwrap_or_else(|| panic!("{:?}", org.alerts(&id)));
    assert_eq!(alert["severity"], "critical");
    let text = alert["message"].as_str().unwrap();
    assert!(
        text.contains(done.as_str()) && text.contains(&moved),
        "{text}"
    );
    org.run(&["cancel", &id]);
}

/// The landing `method`s on a base that moved: merge (above), rebase and squash, each verified
/// on the landing branch before the base moves; and found again (not made twice) when the move
/// happened before a kill.
fn lands_with_method(method: &str) {
    let org = org(Some(&format!("{{method: {method}}}")));
    let id = org.spawn("core", "core feature [base]", &format!("t-{method}"));
    org.wait_done(&id);
    let w = org.worker(&id);
    let l = w.progress.landing.clone().unwrap();
    assert_eq!(l.state, LandState::Landed, "{l:?}");
    let head = forge_head(&org, "core", "main");
    assert_eq!(l.landed.as_ref().map(|s| s.as_str()), Some(head.as_str()));
    let bare = bare(&org, "core");
    let git = |args: &[&str]| {
        let o = std::process::Command::new("git")
            .arg("--git-dir")
            .arg(&bare)
            .args(args)
            .output()
            .unwrap();
        String::from_utf8_lossy(&o.stdout).trim().to_string()
    };
    // One parent: the other commit on the base; the change's content on top of it.
    let parents = git(&["rev-list", "--parents", "-n", "1", &head]);
    assert_eq!(parents.split_whitespace().count(), 2, "{method}: {parents}");
    assert_eq!(
        git(&["show", &format!("{head}:core.txt")]),
        "core feature [base]"
    );
    assert_eq!(
        git(&["show", &format!("{head}:other.txt")]),
        "someone else's change"
    );
    assert!(!is_ancestor(
        &org,
        "core",
        w.progress.tracked_sha.unwrap().as_str(),
        &head
    ));
    assert_eq!(
        forge_head(&org, "core", &format!("{}-land", w.branch)),
        head
    );
    assert_base_green(&org, "core", &head);
}

#[test]
fn rebase_lands_the_change_replayed_on_the_moved_base() {
    lands_with_method("rebase");
}

#[test]
fn squash_lands_the_change_as_one_commit_on_the_moved_base() {
    lands_with_method("squash");
}

#[test]
fn wave_retry_gives_a_blocked_task_another_go_inside_its_wave() {
    let org = org(None);
    let file = org.root.join("retry.yaml");
    std::fs::write(
        &file,
        "name: retry\ntasks:\n  - {id: core-1, repo: core, task: \"core feature [fail-once]\"}\n  - {id: vm-1, repo: vm, task: \"vm feature\"}\n",
    )
    .unwrap();
    let first = poll_until(
        "core-1 to be BLOCKED",
        Duration::from_secs(60),
        || {
            tick(&org, &file);
            std::thread::sleep(Duration::from_millis(200));
            org.workers().into_iter().find(|w| {
                w.repo == "core"
                    && w.milestone() == Milestone::Blocked
                    && !w.supervised(orch::store::now_ms())
            })
        },
        || format!("{:#}", status(&org, "retry")),
    );
    assert_eq!(
        org.lock_of(&first.id).as_deref(),
        Some("core"),
        "BLOCKED keeps its lock"
    );
    for _ in 0..2 {
        tick(&org, &file);
    }
    assert!(
        org.workers().iter().all(|w| w.repo != "vm"),
        "vm waits for core-1"
    );
    // Not a task that runs, nor one of a wave that does not exist.
    let out = org.run(&["wave", "retry", "retry", "vm-1"]);
    assert_eq!(out.status.code(), Some(1), "{}", output_text(&out));
    let out = org.run(&["wave", "retry", "nowave", "core-1"]);
    assert_eq!(out.status.code(), Some(2), "{}", output_text(&out));
    let out = org.run(&["wave", "retry", "retry", "core-1", "--by", "ops"]);
    assert!(out.status.success(), "{}", output_text(&out));
    assert!(
        String::from_utf8_lossy(&out.stdout).contains("gets attempt 2"),
        "{}",
        output_text(&out)
    );
    assert_eq!(org.lock_of(&first.id), None, "released, audited");
    let v = poll_until(
        "the wave to finish",
        Duration::from_secs(120),
        || {
            tick(&org, &file);
            std::thread::sleep(Duration::from_millis(300));
            let v = status(&org, "retry");
            (v["finished"] == true).then_some(v)
        },
        || format!("{:#}", status(&org, "retry")),
    );
    assert_eq!(v["done"], 2, "{v:#}");
    let second = org
        .workers()
        .into_iter()
        .find(|w| w.task_id.as_deref() == Some("retry:core-1#2"))
        .expect("attempt 2 carries its own task id");
    assert_eq!(second.milestone(), Milestone::Done);
    // Attempt 2 was told attempt 1's checkpoint.
    let prompt = std::fs::read_to_string(org.state.join(&second.id).join("prompt.md")).unwrap();
    assert!(
        prompt.contains(&format!(
            "REASSIGNED: you take this task over from worker {} (BLOCKED",
            first.id
        )) && prompt.contains("- summary: BLOCKED on core"),
        "{prompt}"
    );
    assert_eq!(
        org.worker(&first.id).milestone(),
        Milestone::Blocked,
        "history kept"
    );
    let history = org.store().lock_history().unwrap();
    assert!(history.iter().any(|h| h.holder == first.id
        && h.action == "release"
        && h.reason.as_deref().unwrap_or("").contains("wave retry")));
}

mod interleavings {
    //! A property over random interleavings of base pushes (by someone else, clean or
    //! conflicting), landings and kills of the landing's supervisor (then `orch resume`), on the
    //! local forge: the base head only ever moves (by orch) to a commit whose CI is green, no
    //! change lands twice, and every DONE commit ends on its base branch or in a recorded
    //! conflict or refusal (with its alert).

    use super::*;
    use proptest::prelude::*;

    #[derive(Debug, Clone, Copy)]
    enum Base {
        Still,
        Moved,
        Conflicting,
    }

    fn task_text(i: usize, base: Base) -> String {
        match base {
            Base::Still => format!("core feature {i}"),
            Base::Moved => format!("core feature {i} [base]"),
            Base::Conflicting => format!("core feature {i} [conflict]"),
        }
    }

    fn settled(org: &Org, id: &str) -> bool {
        let w = org.worker(id);
        let landing = w.progress.landing.as_ref().map(|l| l.state);
        let ended = match w.milestone() {
            Milestone::Done => !w.progress.landing_active(),
            m => m.is_terminal(),
        };
        ended && !w.supervised(orch::store::now_ms())
            || matches!(landing, Some(LandState::Conflict | LandState::Refused))
    }

    fn run(steps: &[(Base, Option<u64>)]) {
        let org = org(None);
        let mut ids = Vec::new();
        for (i, (base, kill)) in steps.iter().enumerate() {
            let id = org.spawn_detached("core", &task_text(i, *base));
            if let Some(ms) = kill {
                std::thread::sleep(Duration::from_millis(*ms));
                let w = org.worker(&id);
                if let Some(pid) = w
                    .supervisor_pid
                    .filter(|_| w.supervised(orch::store::now_ms()))
                {
                    crate::support::kill9(pid as i32);
                    org.wait_until(
                        "the killed supervisor gone",
                        Duration::from_secs(10),
                        || !orch::process::process_alive(pid as i32, None),
                    );
                }
            }
            poll_until(
                "the task to settle",
                Duration::from_secs(90),
                || {
                    // Whoever runs next resumes what a kill left (as a cron tick would).
                    if !org.worker(&id).supervised(orch::store::now_ms()) {
                        org.resume();
                    }
                    std::thread::sleep(Duration::from_millis(100));
                    settled(&org, &id).then_some(())
                },
                || org.diag(&id),
            );
            let l = landing_of(&org, &id);
            if matches!(l.state, LandState::Conflict | LandState::Refused) {
                // A person resolves it (here: gives up on it) so the next task can start.
                let out = org.run(&["release", &id, "--force", "--reason", "test: resolved"]);
                assert!(out.status.success(), "{}", output_text(&out));
            }
            ids.push(id);
        }
        let head = forge_head(&org, "core", "main");
        for id in &ids {
            let w = org.worker(id);
            assert_eq!(w.milestone(), Milestone::Done, "{}", org.diag(id));
            let l = w.progress.landing.clone().unwrap();
            let done = l.done_sha.clone().expect("a DONE commit");
            match l.state {
                LandState::Landed => {
                    let landed = l.landed.clone().unwrap();
                    assert!(is_ancestor(&org, "core", landed.as_str(), &head), "{l:?}");
                    assert!(
                        is_ancestor(&org, "core", done.as_str(), &head)
                            || l.method != orch::config::LandMethod::Merge,
                        "DONE commit {done} of {id} not on main: {l:?}"
                    );
                }
                LandState::Conflict | LandState::Refused => {
                    assert!(l.detail.is_some(), "{l:?}");
                    let alerts = org.alerts(id);
                    assert!(
                        alerts.iter().any(|a| a["kind"]
                            .as_str()
                            .is_some_and(|k| k.starts_with("landing_"))),
                        "{alerts:?}"
                    );
                }
                other => panic!("{id} ended its landing {other}: {l:?}"),
            }
            // Each base move orch made went to a commit whose CI is green, once per change.
            let moves: Vec<String> = org
                .events(id)
                .into_iter()
                .filter(|e| e.kind == "landing")
                .filter_map(|e| {
                    e.detail
                        .split("base moved to ")
                        .nth(1)
                        .map(|r| r.split_whitespace().next().unwrap().to_string())
                })
                .collect();
            assert!(
                moves.len() <= 1,
                "{id} moved the base {} times",
                moves.len()
            );
            for short in moves {
                let full = l.landed.clone().unwrap();
                assert!(full.as_str().starts_with(&short), "{short} vs {full}");
                let v = org.json(&[
                    "ci",
                    "status",
                    "--repo",
                    "core",
                    "--sha",
                    full.as_str(),
                    "--json",
                ]);
                assert_eq!(v["verdict"], "green", "{v:#}");
            }
        }
        assert!(
            orch::store::first_conflict(&org.config.graph, &org.store().lock_history().unwrap())
                .is_none()
        );
    }

    fn step() -> impl Strategy<Value = (Base, Option<u64>)> {
        (
            prop_oneof![
                Just(Base::Still),
                Just(Base::Moved),
                Just(Base::Conflicting)
            ],
            proptest::option::of(0u64..1500),
        )
    }

    proptest! {
        #![proptest_config(ProptestConfig {
            cases: 4,
            max_shrink_iters: 8,
            failure_persistence: None,
            ..ProptestConfig::default()
        })]
        #[test]
        fn the_base_only_moves_to_green_and_every_done_commit_lands_or_is_recorded(
            steps in proptest::collection::vec(step(), 2..4)
        ) {
            run(&steps);
        }
    }
}

#[test]
fn a_breakage_is_handed_to_a_fix_worker_that_lands_the_fix_without_a_gap() {
    let org = org_with(None, Some("{depth: 1, on_breakage: fix}"));
    // A green organisation first: core's feature, then vm's (net's CI reads vm's).
    let first = org.spawn("core", "core feature", "t-first");
    org.wait_done(&first);
    let vm = org.spawn("vm", "vm feature", "t-vm");
    org.wait_done(&vm);
    assert_eq!(landing_of(&org, &vm).state, LandState::Landed);
    let id = org.spawn("core", "core feature, breaking", "t-break");
    org.wait_done(&id);
    let l = landing_of(&org, &id);
    assert_eq!(l.state, LandState::Broken, "{l:?}");
    let fix = poll_until(
        "the fix worker",
        Duration::from_secs(30),
        || {
            org.workers().into_iter().find(|w| {
                w.task_id.as_deref() == Some("t-break/fix-vm")
                    && org.state.join(&w.id).join("prompt.md").exists()
            })
        },
        || org.diag(&id),
    );
    assert_eq!(fix.repo, "vm");
    assert!(
        fix.task.starts_with("Fix vm: core's change"),
        "{}",
        fix.task
    );
    org.wait_done(&fix.id);
    let fw = org.worker(&fix.id);
    assert_eq!(
        fw.progress.landing.as_ref().map(|l| l.state),
        Some(LandState::Landed),
        "{}",
        org.diag(&fix.id)
    );
    // The fix is on vm's base, and vm is green again with core's breaking change.
    let vm_head = forge_head(&org, "vm", "main");
    assert!(is_ancestor(
        &org,
        "vm",
        fw.progress.tracked_sha.unwrap().as_str(),
        &vm_head
    ));
    assert_base_green(&org, "vm", &vm_head);
    // The fix was told what broke and why: the failing job's log.
    let prompt = std::fs::read_to_string(org.state.join(&fix.id).join("prompt.md")).unwrap();
    assert!(
        prompt.contains("DOWNSTREAM FIX") && prompt.contains("--- test (last"),
        "{prompt}"
    );
    // No gap: core's lock went to the hold and the hold to the fix, each in one transaction.
    let history = org.store().lock_history().unwrap();
    let hold = format!("hold:orch-downstream-{id}");
    let release_core = history
        .iter()
        .position(|h| h.holder == id && h.action == "release")
        .unwrap();
    let hold_acquire = history
        .iter()
        .position(|h| h.holder == hold && h.action == "acquire")
        .unwrap();
    let hold_release = history
        .iter()
        .position(|h| h.holder == hold && h.action == "release")
        .unwrap();
    let fix_acquire = history
        .iter()
        .position(|h| h.holder == fix.id && h.action == "acquire")
        .unwrap();
    assert_eq!(hold_acquire, release_core + 1, "{history:?}");
    assert_eq!(fix_acquire, hold_release + 1, "{history:?}");
    assert!(
        history[hold_release]
            .reason
            .as_deref()
            .unwrap_or("")
            .contains(&fix.id),
        "{:?}",
        history[hold_release]
    );
    assert!(orch::store::first_conflict(&org.config.graph, &history).is_none());
    // Nothing is held any more.
    let s = org.json(&["status", "--json"]);
    assert_eq!(s["locks"].as_array().unwrap().len(), 0, "{s:#}");
}

#[test]
fn with_on_conflict_fix_a_replacement_takes_the_lock_over_and_lands_the_change() {
    let org = org(Some("{on_conflict: fix}"));
    let id = org.spawn("core", "core feature [conflict]", "t-conflict-fix");
    let replacement = poll_until(
        "the replacement worker",
        Duration::from_secs(60),
        || {
            // Its prompt is written just after its record.
            org.workers().into_iter().find(|w| {
                w.task_id.as_deref() == Some("t-conflict-fix")
                    && w.id != id
                    && org.state.join(&w.id).join("prompt.md").exists()
            })
        },
        || org.diag(&id),
    );
    assert_eq!(landing_of(&org, &id).state, LandState::Conflict);
    assert_eq!(replacement.task, "core feature [conflict]");
    let prompt =
        std::fs::read_to_string(org.state.join(&replacement.id).join("prompt.md")).unwrap();
    assert!(
        prompt.contains("REPLACEMENT after a landing conflict") && prompt.contains("core.txt"),
        "{prompt}"
    );
    org.wait_done(&replacement.id);
    let r = org.worker(&replacement.id);
    assert_eq!(
        r.progress.landing.as_ref().map(|l| l.state),
        Some(LandState::Landed),
        "{}",
        org.diag(&replacement.id)
    );
    let head = forge_head(&org, "core", "main");
    assert!(is_ancestor(
        &org,
        "core",
        r.progress.tracked_sha.unwrap().as_str(),
        &head
    ));
    // The lock went from the conflicted worker to its replacement in one transaction.
    let history = org.store().lock_history().unwrap();
    let released = history
        .iter()
        .position(|h| h.holder == id && h.action == "release")
        .unwrap();
    assert_eq!(history[released + 1].holder, replacement.id, "{history:?}");
    assert_eq!(history[released + 1].action, "acquire");
    assert!(orch::store::first_conflict(&org.config.graph, &history).is_none());
    assert_eq!(org.lock_of(&replacement.id), None);
}

#[test]
fn a_breaking_change_is_reverted_verified_like_any_landing() {
    let org = org_with(None, Some("{depth: 1, on_breakage: revert}"));
    let first = org.spawn("core", "core feature", "t-first");
    org.wait_done(&first);
    let good = forge_head(&org, "core", "main");
    let id = org.spawn("core", "core feature, breaking", "t-revert");
    org.wait_done(&id);
    let l = landing_of(&org, &id);
    assert_eq!(l.state, LandState::Reverted, "{l:?}");
    let landed = l.landed.clone().unwrap();
    let reverted = l.reverted.clone().unwrap();
    let head = forge_head(&org, "core", "main");
    assert_eq!(head, reverted.as_str(), "the base is at the revert");
    assert!(
        is_ancestor(&org, "core", landed.as_str(), &head),
        "reverted, not rewritten"
    );
    let show = |rev: &str| {
        let o = std::process::Command::new("git")
            .arg("--git-dir")
            .arg(bare(&org, "core"))
            .args(["show", &format!("{rev}:core.txt")])
            .output()
            .unwrap();
        String::from_utf8_lossy(&o.stdout).trim().to_string()
    };
    assert_eq!(show(&head), show(&good), "the breaking content is gone");
    assert_eq!(show(&head), "core feature");
    // Verified on its own branch first, then the base's CI.
    assert_eq!(forge_head(&org, "core", &format!("orch/{id}-revert")), head);
    assert_base_green(&org, "core", &head);
    let alerts = org.alerts(&id);
    assert!(
        alerts.iter().any(|a| a["kind"] == "downstream_breakage"
            && a["message"].as_str().unwrap().contains("reverts")),
        "{alerts:?}"
    );
    assert!(alerts.iter().any(|a| a["kind"] == "reverted"), "{alerts:?}");
    // The lock went after the revert's base CI; nothing is held.
    assert_eq!(org.lock_of(&id), None);
    let s = org.json(&["status", "--json"]);
    assert_eq!(s["locks"].as_array().unwrap().len(), 0, "{s:#}");
    let row = s["workers"]
        .as_array()
        .unwrap()
        .iter()
        .find(|w| w["worker_id"] == id.as_str())
        .unwrap()
        .clone();
    assert_eq!(row["landing"]["state"], "reverted", "{row:#}");
}

#[test]
fn a_wave_task_may_set_its_own_land_policy() {
    let org = org(None);
    let file = org.root.join("own.yaml");
    std::fs::write(
        &file,
        "name: own\ntasks:\n  - {id: core-1, repo: core, task: \"core feature\", land: none}\n  - {id: vm-1, repo: vm, task: \"vm feature\"}\n",
    )
    .unwrap();
    let core = poll_until(
        "core-1 DONE",
        Duration::from_secs(60),
        || {
            tick(&org, &file);
            std::thread::sleep(Duration::from_millis(200));
            org.workers()
                .into_iter()
                .find(|w| w.repo == "core" && w.milestone() == Milestone::Done)
        },
        || format!("{:#}", status(&org, "own")),
    );
    let l = core.progress.landing.clone().unwrap();
    assert_eq!(
        l.policy,
        orch::config::LandPolicy::None,
        "the task's own land"
    );
    assert_eq!(l.state, LandState::Waiting);
    assert_eq!(org.lock_of(&core.id), None);
    tick(&org, &file);
    assert!(
        org.workers().iter().all(|w| w.repo != "vm"),
        "vm waits for core's change"
    );
}

#[test]
fn an_operators_forced_release_stops_a_landing_before_it_moves_the_base() {
    let org = gated_org();
    let id = org.spawn("core", "core feature [base]", "t-release");
    org.wait_until(
        "the integration under verification",
        Duration::from_secs(60),
        || landing_of(&org, &id).state == LandState::Verifying,
    );
    let before = forge_head(&org, "core", "main");
    let out = org.run(&["release", &id, "--force", "--reason", "not today"]);
    assert!(out.status.success(), "{}", output_text(&out));
    org.wait_until("the landing to stop", Duration::from_secs(30), || {
        let w = org.worker(&id);
        landing_of(&org, &id).state == LandState::Refused && !w.supervised(orch::store::now_ms())
    });
    org.open_gate("core");
    let l = landing_of(&org, &id);
    assert!(
        l.detail
            .as_deref()
            .unwrap_or("")
            .contains("released by an operator"),
        "{l:?}"
    );
    assert_eq!(
        forge_head(&org, "core", "main"),
        before,
        "the base did not move"
    );
}

#[test]
fn with_land_direct_the_worker_pushes_to_the_base_and_done_is_judged_there() {
    let org = org(Some("{policy: direct}"));
    let id = org.spawn("core", "core feature [three]", "t-direct");
    let greens = org.out.join(format!("green-{id}"));
    org.wait_until("three green pushes", Duration::from_secs(90), || {
        std::fs::read_to_string(&greens).is_ok_and(|s| s.lines().count() == 3)
    });
    let w = org.worker(&id);
    assert_eq!(
        w.branch, "main",
        "the worker's branch on the forge is the base branch"
    );
    assert_eq!(
        w.milestone(),
        Milestone::PushedToCi,
        "green, not DONE without the word"
    );
    let last = std::fs::read_to_string(&greens).unwrap();
    let last = last.lines().last().unwrap().to_string();
    assert_eq!(
        forge_head(&org, "core", "main"),
        last,
        "each push landed as it was made"
    );
    assert_eq!(
        org.lock_of(&id).as_deref(),
        Some("core"),
        "the chain lock keeps others off"
    );
    let prompt = std::fs::read_to_string(org.state.join(&id).join("prompt.md")).unwrap();
    assert!(
        prompt.contains("LANDING: direct — push with `git push orch HEAD:main`"),
        "{prompt}"
    );
    std::fs::write(org.out.join(format!("release-{id}")), "").unwrap();
    org.wait_done(&id);
    let w = org.worker(&id);
    let l = w.progress.landing.clone().unwrap();
    assert_eq!(l.state, LandState::Landed, "{l:?}");
    assert_eq!(w.progress.tracked_sha.as_ref().unwrap().as_str(), last);
    assert_eq!(l.landed.as_ref().map(|s| s.as_str()), Some(last.as_str()));
    assert_eq!(org.lock_of(&id), None);
    // Its local branch is orch/<id>; the clone's own main is not the worker's, and gc leaves it.
    let clone = org.clone_path("core");
    let main_before = crate::support::git(&clone, &["rev-parse", "refs/heads/main"]);
    assert!(
        crate::support::git(&clone, &["rev-parse", &format!("refs/heads/orch/{id}")]).len() == 40
    );
    let out = org.run(&["gc"]);
    assert!(out.status.success(), "{}", output_text(&out));
    assert_eq!(
        crate::support::git(&clone, &["rev-parse", "refs/heads/main"]),
        main_before
    );
}

/// The shipped workers push with a plain `git push` (tests/workers/happy.sh as `orch init
/// --example`'s worker.sh and docs/aider-worker.sh do): under `land: direct` it must go to the
/// base branch, not be refused by git because the local branch `orch/<id>` has another name.
#[test]
fn with_land_direct_a_plain_git_push_lands_and_the_worker_is_done() {
    let org = Org::new(
        Spec::local("happy.sh")
            .repo(RepoSpec::new("alpha").standard_ci("true"))
            .land("{policy: direct}"),
    );
    let id = org.spawn_detached("alpha", "a feature");
    org.wait_done(&id);
    let w = org.worker(&id);
    let sha = w.progress.tracked_sha.clone().expect("a pushed commit");
    assert_eq!(
        forge_head(&org, "alpha", "main"),
        sha.as_str(),
        "the plain push went to the base: {}",
        org.diag(&id)
    );
    let l = w.progress.landing.clone().unwrap();
    assert_eq!(l.state, LandState::Landed, "{l:?}");
}
