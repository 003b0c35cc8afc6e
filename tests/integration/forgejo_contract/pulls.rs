//! The pull request API of the fake Forgejo (`docs/forgejo-pulls.md`), driven over HTTP
//! with reqwest on every tested version: create, read, merge for real in a bare repository,
//! and every refusal in the reference's order, with the version's body shapes.

use super::*;
use crate::support::{commit_file, git, init_repo, push_head};
use serde_json::{Value, json};
use std::path::{Path, PathBuf};

per_version!(
    every_style_moves_the_base_branch,
    created_pull_has_the_reference_shape,
    duplicate_open_pull_is_409,
    head_equal_to_base_is_422,
    missing_fields_are_422,
    missing_branches_are_404_by_version,
    stale_pin_after_a_push_is_409_once_checked,
    branch_protection_is_405_with_its_reason,
    merging_twice_is_405_with_an_empty_message,
    conflict_is_405_try_again_later,
    is_merged_is_204_or_404,
    unknown_pull_is_404,
    work_in_progress_is_405,
    siblings_recheck_after_a_merge,
    delete_branch_after_merge_keeps_the_pull_ref,
    fast_forward_only_on_a_diverged_head_is_500,
    disallowed_style_is_405,
    auto_merge_is_scheduled_not_merged,
    post_needs_a_token,
);

/// The release a version string names (`16.0.0+gitea-1.22.0` → 16).
fn major(version: &str) -> u32 {
    version.split('.').next().unwrap().parse().unwrap()
}

/// A fake serving a bare repository (`main` with one commit) and a clone to make commits in.
struct Forge {
    fake: FakeForgejo,
    level: u32,
    bare: PathBuf,
    work: PathBuf,
    http: reqwest::Client,
    _tmp: tempfile::TempDir,
}

impl Forge {
    async fn new(version: &str) -> Forge {
        let tmp = tempfile::tempdir().unwrap();
        let bare = tmp.path().join("alpha.git");
        let work = tmp.path().join("work");
        std::fs::create_dir_all(&bare).unwrap();
        git(&bare, &["init", "-q", "--bare", "-b", "main"]);
        init_repo(&work, REPO);
        push_head(&work, &bare, "main");
        let fake = FakeForgejo::start(version).await;
        fake.require_token(Some(TOKEN));
        fake.serve_git(REPO, &bare);
        Forge {
            fake,
            level: major(version),
            bare,
            work,
            http: reqwest::Client::new(),
            _tmp: tmp,
        }
    }

    fn api(&self, path: &str) -> String {
        format!("{}/api/v1/repos/{OWNER}/{REPO}/{path}", self.fake.uri())
    }

    /// The tip of `branch` in the bare repository.
    fn tip(&self, branch: &str) -> String {
        git(&self.bare, &["rev-parse", &format!("refs/heads/{branch}")])
    }

    fn bare(&self) -> &Path {
        &self.bare
    }

    /// Commits `file` = `content` on `branch`, started from the bare repository's `from`,
    /// and pushes it; returns the new tip.
    fn commit_on(&self, branch: &str, from: &str, file: &str, content: &str) -> String {
        git(
            &self.work,
            &["fetch", "-q", self.bare.to_str().unwrap(), from],
        );
        git(&self.work, &["checkout", "-q", "-B", branch, "FETCH_HEAD"]);
        let sha = commit_file(&self.work, file, content, &format!("{branch}: {file}"));
        push_head(&self.work, &self.bare, branch);
        sha
    }

    /// One more commit on top of `branch` as the bare repository has it.
    fn push_to(&self, branch: &str, file: &str, content: &str) -> String {
        self.commit_on(branch, branch, file, content)
    }

    async fn send(&self, req: reqwest::RequestBuilder) -> (u16, String) {
        let resp = req
            .header("Authorization", format!("token {TOKEN}"))
            .send()
            .await
            .unwrap();
        (resp.status().as_u16(), resp.text().await.unwrap())
    }

    async fn get(&self, path: &str) -> (u16, String) {
        self.send(self.http.get(self.api(path))).await
    }

    async fn post(&self, path: &str, body: Value) -> (u16, String) {
        self.send(self.http.post(self.api(path)).json(&body)).await
    }

    async fn create(&self, head: &str, base: &str, title: &str) -> (u16, Value) {
        let (status, body) = self
            .post(
                "pulls",
                json!({ "head": head, "base": base, "title": title, "body": "why" }),
            )
            .await;
        (status, serde_json::from_str(&body).unwrap())
    }

    /// Creates head → main and returns the PullRequest.
    async fn open(&self, head: &str, title: &str) -> Value {
        let (status, pr) = self.create(head, "main", title).await;
        assert_eq!(status, 201, "{pr}");
        pr
    }

    async fn pull(&self, number: i64) -> Value {
        let (status, body) = self.get(&format!("pulls/{number}")).await;
        assert_eq!(status, 200, "{body}");
        serde_json::from_str(&body).unwrap()
    }

    async fn merge(&self, number: i64, body: Value) -> (u16, String) {
        self.post(&format!("pulls/{number}/merge"), body).await
    }

    /// A merge with `Do` and the head pin.
    async fn merge_pinned(&self, number: i64, style: &str, pin: &str) -> (u16, String) {
        self.merge(number, json!({ "Do": style, "head_commit_id": pin }))
            .await
    }
}

fn number(pr: &Value) -> i64 {
    pr["number"].as_i64().unwrap()
}

fn message(body: &str) -> Value {
    serde_json::from_str::<Value>(body).unwrap()["message"].clone()
}

fn keys(v: &Value) -> Vec<&str> {
    v.as_object().unwrap().keys().map(String::as_str).collect()
}

/// `ctx.NotFound()`'s body on this version, with `message` and `errors`.
fn assert_not_found(level: u32, body: &str, msg: &str, errors: &[&str]) {
    let v: Value = serde_json::from_str(body).unwrap();
    assert_eq!(v["message"], msg, "{body}");
    assert_eq!(v["url"], "https://forgejo.example/api/swagger");
    if level <= 8 {
        assert_eq!(keys(&v), ["errors", "message", "url"], "v8: a sorted map");
        if errors.is_empty() {
            assert_eq!(v["errors"], Value::Null, "{body}");
        } else {
            assert_eq!(v["errors"], json!(errors), "{body}");
        }
    } else {
        assert_eq!(keys(&v), ["message", "url", "errors"], "v9+: APINotFound");
        assert_eq!(v["errors"], json!(errors), "{body}");
    }
}

const NOT_FOUND: &str = "The target couldn't be found.";

// ---- scenarios ----------------------------------------------------------------------------

/// Create → get → merge with the right pin → 200, for each style; the base branch moves to
/// a commit holding the change, the pull request reads merged and closed.
async fn every_style_moves_the_base_branch(version: &str) {
    let f = Forge::new(version).await;
    for style in [
        "merge",
        "squash",
        "rebase",
        "rebase-merge",
        "fast-forward-only",
    ] {
        let branch = format!("orch/land-{style}");
        let file = format!("{style}.txt");
        let head = f.commit_on(&branch, "main", &file, &format!("{style}\n"));
        // Diverge main (another file) except for fast-forward-only.
        if style != "fast-forward-only" {
            f.push_to("main", &format!("{style}-base.txt"), "base\n");
        }
        let base_before = f.tip("main");
        let title = format!("Land {style}");
        let pr = f.open(&branch, &title).await;
        let n = number(&pr);
        assert_eq!(pr["head"]["sha"], head);
        assert_eq!(pr["base"]["sha"], base_before);
        assert_eq!(pr["mergeable"], true, "{pr}");
        let got = f.pull(n).await;
        assert_eq!(got["head"]["sha"], head);
        assert_eq!(f.get(&format!("pulls/{n}/merge")).await.0, 404);

        let (status, body) = f.merge_pinned(n, style, &head).await;
        assert_eq!((status, body.as_str()), (200, ""), "{style}");

        let after = f.tip("main");
        assert_ne!(after, base_before, "{style}: main moved");
        assert_eq!(
            git(f.bare(), &["show", &format!("main:{file}")]),
            style,
            "{style}: the change is on main"
        );
        git(
            f.bare(),
            &["merge-base", "--is-ancestor", &base_before, &after],
        );
        let parents = git(f.bare(), &["rev-list", "--parents", "-n1", &after]);
        let parents = parents.split(' ').count() - 1;
        let subject = git(f.bare(), &["log", "-1", "--format=%s", &after]);
        match style {
            "merge" | "rebase-merge" => {
                assert_eq!(parents, 2, "{style}: a merge commit");
                assert_eq!(
                    subject,
                    format!("Merge pull request '{title}' (#{n}) from {branch} into main")
                );
            }
            "squash" => {
                assert_eq!(parents, 1);
                assert_eq!(subject, format!("{title} (#{n})"));
                assert_eq!(
                    git(f.bare(), &["log", "-1", "--format=%an <%ae>", &after]),
                    "orch-test <orch-test@noreply.forgejo.example>"
                );
            }
            "rebase" => {
                assert_eq!(parents, 1);
                assert_ne!(after, head, "rebased onto the diverged main");
                assert_eq!(subject, format!("{branch}: {file}"), "the head's commit");
            }
            _ => assert_eq!(after, head, "fast-forward"),
        }

        let merged = f.pull(n).await;
        assert_eq!(merged["merged"], true);
        assert_eq!(merged["state"], "closed");
        assert_eq!(merged["merge_commit_sha"], after);
        assert!(merged["merged_at"].is_string(), "{merged}");
        assert!(merged["closed_at"].is_string(), "{merged}");
        assert_eq!(merged["merged_by"]["login"], OWNER);
        assert_eq!(merged["head"]["sha"], head, "the head branch is untouched");
        let (status, body) = f.get(&format!("pulls/{n}/merge")).await;
        assert_eq!((status, body.as_str()), (204, ""));

        let record = f.fake.pull_merges(REPO).pop().unwrap();
        assert_eq!(
            (record.number, record.style.as_str(), record.base.as_str()),
            (n, style, "main")
        );
        assert_eq!(
            (record.head_sha.as_str(), record.base_before.as_str()),
            (head.as_str(), base_before.as_str())
        );
        assert_eq!(record.base_after, after);
    }
    assert_eq!(f.fake.pull_merges(REPO).len(), 5);
    // The client's request, as the fake received it.
    let hit = f
        .fake
        .hits()
        .into_iter()
        .rfind(|h| h.method == "POST" && h.path.ends_with("/merge"))
        .unwrap();
    let sent: Value = serde_json::from_str(&hit.body).unwrap();
    assert_eq!(sent["Do"], "fast-forward-only");
}

async fn created_pull_has_the_reference_shape(version: &str) {
    let f = Forge::new(version).await;
    let head = f.commit_on("orch/land-42", "main", "a.txt", "one\ntwo\n");
    let (status, pr) = f.create("orch-test:orch/land-42", "main", "Land #42").await;
    assert_eq!(status, 201, "{pr}");
    let n = number(&pr);
    assert_eq!(n, 1);
    assert_ne!(pr["id"], pr["number"], "id is the row id, not the number");
    assert!(pr.get("index").is_none());
    let root = format!("{}/", f.fake.uri());
    let html = format!("{root}{OWNER}/{REPO}/pulls/1");
    assert_eq!(pr["html_url"], html);
    if f.level >= 16 {
        assert_eq!(
            pr["url"],
            format!("{root}api/v1/repos/{OWNER}/{REPO}/pulls/1")
        );
    } else {
        assert_eq!(pr["url"], html);
    }
    assert_eq!(pr["diff_url"], format!("{html}.diff"));
    assert_eq!(
        (&pr["title"], &pr["body"], &pr["state"]),
        (&json!("Land #42"), &json!("why"), &json!("open"))
    );
    assert_eq!(
        (&pr["draft"], &pr["mergeable"], &pr["merged"]),
        (&json!(false), &json!(true), &json!(false))
    );
    for k in ["merged_at", "merge_commit_sha", "merged_by", "closed_at"] {
        assert_eq!(pr[k], Value::Null, "{k}");
    }
    assert_eq!(pr["labels"], json!([]));
    assert_eq!(pr["assignees"], Value::Null);
    let reviewers = if f.level >= 11 {
        json!([])
    } else {
        Value::Null
    };
    assert_eq!(pr["requested_reviewers"], reviewers);
    assert_eq!(pr.get("requested_reviewers_teams").is_some(), f.level >= 9);
    assert_eq!(pr.get("flow").is_some(), f.level >= 11);
    let main = f.tip("main");
    for (side, branch, sha) in [("head", "orch/land-42", &head), ("base", "main", &main)] {
        let b = &pr[side];
        assert_eq!(keys(b), ["label", "ref", "sha", "repo_id", "repo"]);
        assert_eq!((&b["label"], &b["ref"]), (&json!(branch), &json!(branch)));
        assert_eq!(&b["sha"], &json!(sha));
        assert_eq!(b["repo_id"], 63);
        assert_eq!(b["repo"]["full_name"], format!("{OWNER}/{REPO}"));
    }
    assert_eq!(pr["merge_base"], main);
    assert_eq!(
        (&pr["changed_files"], &pr["additions"], &pr["deletions"]),
        (&json!(1), &json!(2), &json!(0))
    );
    // Struct order, as Go writes it.
    let order = keys(&pr);
    let at = |k: &str| order.iter().position(|x| *x == k).unwrap();
    assert!(at("id") < at("url") && at("url") < at("number") && at("number") < at("user"));
    assert!(at("mergeable") < at("merged") && at("base") < at("head"));
    assert_eq!(f.fake.pull(REPO, n).unwrap(), pr);
    // The head is also kept under refs/pull/<n>/head.
    assert_eq!(git(f.bare(), &["rev-parse", "refs/pull/1/head"]), head);

    // head.sha follows the branch live.
    let newer = f.push_to("orch/land-42", "b.txt", "b\n");
    let got = f.pull(n).await;
    assert_eq!(got["head"]["sha"], newer);
    assert_eq!(git(f.bare(), &["rev-parse", "refs/pull/1/head"]), newer);
}

async fn duplicate_open_pull_is_409(version: &str) {
    let f = Forge::new(version).await;
    f.commit_on("orch/land-1", "main", "a.txt", "a\n");
    let pr = f.open("orch/land-1", "first").await;
    let (status, body) = f.create("orch/land-1", "main", "second").await;
    assert_eq!(status, 409, "{body}");
    assert_eq!(
        body["message"],
        format!(
            "pull request already exists for these targets [id: {}, issue_id: {}, head_repo_id: 63, base_repo_id: 63, head_branch: orch/land-1, base_branch: main]",
            pr["id"],
            number(&pr)
        )
    );
    assert_eq!(keys(&body), ["message", "url"]);
    // The owner-prefixed head names the same branch.
    let (status, _) = f.create("orch-test:orch/land-1", "main", "third").await;
    assert_eq!(status, 409);
    // Once closed, a new one may be opened.
    f.fake.close_pull(REPO, number(&pr));
    let (status, again) = f.create("orch/land-1", "main", "again").await;
    assert_eq!(status, 201, "{again}");
    assert_eq!(number(&again), 2);
}

async fn head_equal_to_base_is_422(version: &str) {
    let f = Forge::new(version).await;
    let (status, body) = f.create("main", "main", "nothing").await;
    assert_eq!(status, 422);
    assert_eq!(
        body,
        json!({
            "message": "Invalid PullRequest: There are no changes between the head and the base",
            "url": "https://forgejo.example/api/swagger",
        })
    );
    // A head with no commits ahead is not refused: 201, mergeable, but the merge is 405.
    git(f.bare(), &["branch", "orch/empty", "main"]);
    let pr = f.open("orch/empty", "no commits").await;
    assert_eq!(pr["mergeable"], true);
    let (status, body) = f.merge(number(&pr), json!({ "Do": "merge" })).await;
    assert_eq!(
        (status, message(&body)),
        (405, json!("Please try again later"))
    );
}

async fn missing_fields_are_422(version: &str) {
    let f = Forge::new(version).await;
    let (status, body) = f
        .post("pulls", json!({ "base": "main", "title": "t" }))
        .await;
    assert_eq!((status, message(&body)), (422, json!("[Head]: Required")));
    let (status, body) = f
        .post("pulls", json!({ "Head": "x", "BASE": "main" }))
        .await;
    assert_eq!((status, message(&body)), (422, json!("[Title]: Required")));
    f.commit_on("orch/x", "main", "x.txt", "x\n");
    let pr = f.open("orch/x", "x").await;
    let n = number(&pr);
    let (status, body) = f.merge(n, json!({ "head_commit_id": "abc" })).await;
    assert_eq!((status, message(&body)), (422, json!("[Do]: Required")));
    let (status, body) = f.merge(n, json!({ "Do": "octopus" })).await;
    assert_eq!((status, message(&body)), (422, json!("[Do]: In")));
    // Go matches keys case-insensitively: `do` is `Do`.
    let (status, body) = f.merge(n, json!({ "do": "merge" })).await;
    assert_eq!((status, body.as_str()), (200, ""));
}

async fn missing_branches_are_404_by_version(version: &str) {
    let f = Forge::new(version).await;
    let level = f.level;
    f.commit_on("orch/here", "main", "a.txt", "a\n");

    let (status, body) = f
        .post(
            "pulls",
            json!({ "head": "orch/here", "base": "gone", "title": "t" }),
        )
        .await;
    assert_eq!(status, 404, "{body}");
    if level >= 13 {
        assert_not_found(
            level,
            &body,
            NOT_FOUND,
            &[
                "could not find 'gone' to be a commit, branch or tag in the base repository orch-test/alpha",
            ],
        );
    } else {
        assert_not_found(level, &body, "BaseNotExist", &[]);
    }

    let (status, body) = f
        .post(
            "pulls",
            json!({ "head": "orch/gone", "base": "main", "title": "t" }),
        )
        .await;
    match level {
        8 => {
            assert_eq!(status, 404);
            assert_not_found(level, &body, NOT_FOUND, &[]);
        }
        9..=11 => {
            // `IsCommitExist(baseBranch)`: the missing head passes, `GetCompareInfo` fails.
            assert_eq!(status, 500);
            assert_eq!(message(&body), "");
        }
        12 => {
            assert_eq!(status, 404);
            assert_not_found(level, &body, "IsRefExist", &[]);
        }
        _ => {
            assert_eq!(status, 404);
            assert_not_found(
                level,
                &body,
                NOT_FOUND,
                &[
                    "could not find 'orch/gone' to be a commit, branch or tag in the head repository orch-test/alpha",
                ],
            );
        }
    }

    let (status, body) = f
        .post(
            "pulls",
            json!({ "head": "stranger:orch/here", "base": "main", "title": "t" }),
        )
        .await;
    assert_eq!(status, 404);
    if level >= 13 {
        assert_not_found(
            level,
            &body,
            NOT_FOUND,
            &["the owner stranger does not exist"],
        );
    } else {
        assert_not_found(level, &body, "GetUserByName", &[]);
    }
    // Nothing was created.
    assert!(f.fake.pull(REPO, 1).is_none());
}

/// A push to the head while the pull request is checked: 405 until the check ends, then
/// the stale pin is 409 `head out of date`; the exact new tip merges.
async fn stale_pin_after_a_push_is_409_once_checked(version: &str) {
    let f = Forge::new(version).await;
    f.fake.pull_checking_for(REPO, 2);
    let old = f.commit_on("orch/land-7", "main", "a.txt", "a\n");
    let pr = f.open("orch/land-7", "Land #7").await;
    assert_eq!(pr["mergeable"], true, "decided at creation");
    let new = f.push_to("orch/land-7", "b.txt", "b\n");

    let got = f.pull(number(&pr)).await;
    assert_eq!(
        (&got["mergeable"], &got["head"]["sha"]),
        (&json!(false), &json!(new))
    );
    let (status, body) = f.merge_pinned(1, "merge", &old).await;
    assert_eq!(
        (status, message(&body)),
        (405, json!("Please try again later"))
    );
    assert_eq!(
        f.pull(1).await["mergeable"],
        false,
        "second GET: still checking"
    );
    assert_eq!(f.pull(1).await["mergeable"], true, "the check ended");

    let (status, body) = f.merge_pinned(1, "merge", &old).await;
    assert_eq!((status, message(&body)), (409, json!("head out of date")));
    let (status, body) = f.merge_pinned(1, "merge", &new[..12]).await;
    assert_eq!(
        (status, message(&body)),
        (409, json!("head out of date")),
        "no short SHAs"
    );
    let (status, body) = f.merge_pinned(1, "merge", &new.to_uppercase()).await;
    assert_eq!(
        (status, message(&body)),
        (409, json!("head out of date")),
        "exact string"
    );
    assert_eq!(
        f.tip("main"),
        git(f.bare(), &["rev-parse", "refs/pull/1/head~2"])
    );

    let (status, body) = f.merge_pinned(1, "merge", &new).await;
    assert_eq!((status, body.as_str()), (200, ""));
    git(f.bare(), &["merge-base", "--is-ancestor", &new, "main"]);
    // A set check can also be started by hand.
    f.commit_on("orch/other", "main", "o.txt", "o\n");
    let other = f.open("orch/other", "other").await;
    f.fake.set_pull_checking(REPO, number(&other), 1);
    assert_eq!(f.pull(number(&other)).await["mergeable"], false);
    assert_eq!(f.pull(number(&other)).await["mergeable"], true);
}

async fn branch_protection_is_405_with_its_reason(version: &str) {
    let f = Forge::new(version).await;
    let head = f.commit_on("orch/p", "main", "p.txt", "p\n");
    let pr = f.open("orch/p", "protected").await;
    let n = number(&pr);
    let reason = "Not all required status checks successful";
    f.fake.protect_branch(REPO, "main", reason);
    let main = f.tip("main");
    // Protection is checked before the pin.
    let (status, body) = f.merge_pinned(n, "merge", &"0".repeat(40)).await;
    assert_eq!(status, 405);
    assert_eq!(
        serde_json::from_str::<Value>(&body).unwrap(),
        json!({
            "message": format!("not allowed to merge [reason: {reason}]"),
            "url": "https://forgejo.example/api/swagger",
        })
    );
    assert_eq!(f.tip("main"), main, "nothing pushed");
    // `mergeable` does not reflect protection.
    assert_eq!(f.pull(n).await["mergeable"], true);
    let (status, branch) = f.get("branches/main").await;
    assert_eq!(status, 200);
    assert_eq!(
        serde_json::from_str::<Value>(&branch).unwrap()["protected"],
        true
    );

    f.fake
        .protect_branch_for_admins(REPO, "main", "Does not have enough approvals");
    let (status, body) = f
        .merge(
            n,
            json!({ "Do": "merge", "head_commit_id": head, "force_merge": true }),
        )
        .await;
    assert_eq!(
        (status, message(&body)),
        (
            405,
            json!("not allowed to merge [reason: Does not have enough approvals]")
        )
    );
    // A rule that does not apply to admins: the owner's force_merge passes it.
    f.fake.protect_branch(REPO, "main", reason);
    let (status, body) = f
        .merge(
            n,
            json!({ "Do": "squash", "head_commit_id": head, "force_merge": true }),
        )
        .await;
    assert_eq!((status, body.as_str()), (200, ""));
}

async fn merging_twice_is_405_with_an_empty_message(version: &str) {
    let f = Forge::new(version).await;
    let head = f.commit_on("orch/twice", "main", "t.txt", "t\n");
    let pr = f.open("orch/twice", "twice").await;
    assert_eq!(f.merge_pinned(number(&pr), "merge", &head).await.0, 200);
    let main = f.tip("main");
    let (status, body) = f.merge_pinned(number(&pr), "merge", &head).await;
    assert_eq!(status, 405);
    assert_eq!(
        serde_json::from_str::<Value>(&body).unwrap(),
        json!({ "message": "", "url": "https://forgejo.example/api/swagger" })
    );
    assert_eq!(f.tip("main"), main);
    assert_eq!(f.fake.pull_merges(REPO).len(), 1);
}

async fn conflict_is_405_try_again_later(version: &str) {
    let f = Forge::new(version).await;
    let head = f.commit_on("orch/clash", "main", "README", "theirs\n");
    f.push_to("main", "README", "ours\n");
    let (status, pr) = f.create("orch/clash", "main", "clash").await;
    assert_eq!(status, 201);
    assert_eq!(pr["mergeable"], false, "{pr}");
    assert_eq!(f.pull(number(&pr)).await["mergeable"], false);
    let main = f.tip("main");
    let (status, body) = f.merge_pinned(number(&pr), "merge", &head).await;
    assert_eq!(
        (status, message(&body)),
        (405, json!("Please try again later"))
    );
    assert_eq!(f.tip("main"), main);
    // Resolved on the head: mergeable again, and it merges.
    git(&f.work, &["fetch", "-q", f.bare.to_str().unwrap(), "main"]);
    git(&f.work, &["checkout", "-q", "orch/clash"]);
    git(
        &f.work,
        &["merge", "-q", "-X", "ours", "FETCH_HEAD", "-m", "resolve"],
    );
    push_head(&f.work, &f.bare, "orch/clash");
    let resolved = f.tip("orch/clash");
    assert_eq!(f.pull(number(&pr)).await["mergeable"], true);
    assert_eq!(f.merge_pinned(number(&pr), "merge", &resolved).await.0, 200);
    assert_eq!(git(f.bare(), &["show", "main:README"]), "theirs");
}

async fn is_merged_is_204_or_404(version: &str) {
    let f = Forge::new(version).await;
    let (status, body) = f.get("pulls/9/merge").await;
    assert_eq!(status, 404);
    assert_not_found(f.level, &body, NOT_FOUND, &[]);
    let head = f.commit_on("orch/m", "main", "m.txt", "m\n");
    let pr = f.open("orch/m", "m").await;
    let (status, body) = f.get("pulls/1/merge").await;
    assert_eq!(status, 404);
    assert_not_found(f.level, &body, NOT_FOUND, &[]);
    assert_eq!(f.merge_pinned(number(&pr), "rebase", &head).await.0, 200);
    let (status, body) = f.get("pulls/1/merge").await;
    assert_eq!((status, body.as_str()), (204, ""));
}

async fn unknown_pull_is_404(version: &str) {
    let f = Forge::new(version).await;
    let (status, body) = f.get("pulls/5").await;
    assert_eq!(status, 404);
    assert_not_found(f.level, &body, NOT_FOUND, &[]);
    let (status, body) = f.merge(5, json!({ "Do": "merge" })).await;
    assert_eq!(status, 404);
    assert_not_found(
        f.level,
        &body,
        "GetPullRequestByIndex",
        &[
            "pull request does not exist [id: 0, issue_id: 0, head_repo_id: 0, base_repo_id: 63, head_branch: , base_branch: ]",
        ],
    );
    // An unknown repository is the JSON 404 of repoAssignment.
    let resp = f
        .http
        .get(format!(
            "{}/api/v1/repos/{OWNER}/nope/pulls/1",
            f.fake.uri()
        ))
        .header("Authorization", format!("token {TOKEN}"))
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status().as_u16(), 404);
    assert_not_found(f.level, &resp.text().await.unwrap(), NOT_FOUND, &[]);
    // A closed (not merged) pull request: 404 on merge.
    f.commit_on("orch/c", "main", "c.txt", "c\n");
    let pr = f.open("orch/c", "c").await;
    f.fake.close_pull(REPO, number(&pr));
    assert_eq!(f.pull(number(&pr)).await["state"], "closed");
    let (status, body) = f.merge(number(&pr), json!({ "Do": "merge" })).await;
    assert_eq!(status, 404);
    assert_not_found(f.level, &body, NOT_FOUND, &[]);
}

async fn work_in_progress_is_405(version: &str) {
    let f = Forge::new(version).await;
    f.commit_on("orch/wip", "main", "w.txt", "w\n");
    let pr = f.open("orch/wip", "[wip] not yet").await;
    assert_eq!(
        (&pr["draft"], &pr["mergeable"]),
        (&json!(true), &json!(false))
    );
    let (status, body) = f.merge(number(&pr), json!({ "Do": "merge" })).await;
    assert_eq!(
        (status, message(&body)),
        (405, json!("Work in progress PRs cannot be merged"))
    );
}

/// A merge pushes the base: the other open pull requests on it are checked again.
async fn siblings_recheck_after_a_merge(version: &str) {
    let f = Forge::new(version).await;
    f.fake.pull_checking_for(REPO, 1);
    let a = f.commit_on("orch/a", "main", "a.txt", "a\n");
    f.commit_on("orch/b", "main", "b.txt", "b\n");
    let pa = f.open("orch/a", "a").await;
    let pb = f.open("orch/b", "b").await;
    assert_eq!(f.merge_pinned(number(&pa), "merge", &a).await.0, 200);
    let got = f.pull(number(&pb)).await;
    assert_eq!(got["mergeable"], false, "checking after the base moved");
    assert_eq!(got["base"]["sha"], f.tip("main"));
    let got = f.pull(number(&pb)).await;
    assert_eq!(got["mergeable"], true);
    assert_eq!(
        f.pull(number(&pa)).await["mergeable"],
        true,
        "merged: not rechecked"
    );
}

async fn delete_branch_after_merge_keeps_the_pull_ref(version: &str) {
    let f = Forge::new(version).await;
    let head = f.commit_on("orch/del", "main", "d.txt", "d\n");
    let pr = f.open("orch/del", "del").await;
    let (status, body) = f
        .merge(
            number(&pr),
            json!({ "Do": "merge", "head_commit_id": head, "delete_branch_after_merge": true }),
        )
        .await;
    assert_eq!((status, body.as_str()), (200, ""));
    let gone = git(f.bare(), &["branch", "--list", "orch/del"]);
    assert_eq!(gone, "", "the head branch is deleted");
    let got = f.pull(number(&pr)).await;
    assert_eq!(
        (
            &got["head"]["ref"],
            &got["head"]["sha"],
            &got["head"]["label"]
        ),
        (
            &json!(format!("refs/pull/{}/head", number(&pr))),
            &json!(head),
            &json!("orch/del")
        )
    );
    // A deleted head branch closes an open pull request.
    f.commit_on("orch/gone", "main", "g.txt", "g\n");
    let other = f.open("orch/gone", "gone").await;
    git(f.bare(), &["branch", "-D", "orch/gone"]);
    let got = f.pull(number(&other)).await;
    assert_eq!(
        (&got["state"], &got["merged"]),
        (&json!("closed"), &json!(false))
    );
    // The default branch is not deleted: 403 after the merge.
    git(f.bare(), &["branch", "dev", "main"]);
    f.push_to("main", "late.txt", "late\n");
    let (status, pm) = f.create("main", "dev", "back").await;
    assert_eq!(status, 201);
    let (status, body) = f
        .merge(
            number(&pm),
            json!({ "Do": "merge", "delete_branch_after_merge": true }),
        )
        .await;
    let text = if f.level >= 9 {
        "the head branch is the default branch"
    } else {
        "can not delete default branch"
    };
    assert_eq!((status, message(&body)), (403, json!(text)));
    assert_eq!(f.fake.pull(REPO, number(&pm)).unwrap()["merged"], true);
}

async fn fast_forward_only_on_a_diverged_head_is_500(version: &str) {
    let f = Forge::new(version).await;
    let head = f.commit_on("orch/ff", "main", "f.txt", "f\n");
    f.push_to("main", "g.txt", "g\n");
    let pr = f.open("orch/ff", "ff").await;
    let main = f.tip("main");
    let (status, body) = f
        .merge_pinned(number(&pr), "fast-forward-only", &head)
        .await;
    assert_eq!((status, message(&body)), (500, json!("")));
    assert_eq!(f.tip("main"), main);
    assert_eq!(f.pull(number(&pr)).await["merged"], false);
}

async fn disallowed_style_is_405(version: &str) {
    let f = Forge::new(version).await;
    let head = f.commit_on("orch/s", "main", "s.txt", "s\n");
    let pr = f.open("orch/s", "s").await;
    f.fake.allow_merge_styles(REPO, &["merge"]);
    let verb = if f.level >= 15 {
        "is not an allowed merge style"
    } else {
        "is not allowed an allowed merge style"
    };
    let (status, body) = f.merge_pinned(number(&pr), "squash", &head).await;
    assert_eq!(
        (status, message(&body)),
        (405, json!(format!("squash {verb} for this repository")))
    );
    // Manually merged is off by default too; allowed, it marks a commit on the base.
    let (status, body) = f
        .merge(
            number(&pr),
            json!({ "Do": "manually-merged", "MergeCommitID": head }),
        )
        .await;
    assert_eq!(
        (status, message(&body)),
        (
            405,
            json!(format!("manually-merged {verb} for this repository"))
        )
    );
    f.fake
        .allow_merge_styles(REPO, &["merge", "manually-merged"]);
    let (status, _) = f
        .merge(
            number(&pr),
            json!({ "Do": "manually-merged", "MergeCommitID": head }),
        )
        .await;
    assert_eq!(status, 409, "the head is not on main");
    git(f.bare(), &["update-ref", "refs/heads/main", &head]);
    let (status, body) = f
        .merge(
            number(&pr),
            json!({ "Do": "manually-merged", "MergeCommitID": head }),
        )
        .await;
    assert_eq!((status, body.as_str()), (200, ""));
    let got = f.pull(number(&pr)).await;
    assert_eq!(
        (&got["merged"], &got["merge_commit_sha"]),
        (&json!(true), &json!(head))
    );
}

async fn auto_merge_is_scheduled_not_merged(version: &str) {
    let f = Forge::new(version).await;
    let head = f.commit_on("orch/auto", "main", "a.txt", "a\n");
    let pr = f.open("orch/auto", "auto").await;
    let n = number(&pr);
    f.fake
        .protect_branch(REPO, "main", "Not all required status checks successful");
    let main = f.tip("main");
    let body =
        json!({ "Do": "merge", "head_commit_id": "stale", "merge_when_checks_succeed": true });
    let (status, text) = f.merge(n, body.clone()).await;
    assert_eq!(
        (status, text.as_str()),
        (201, ""),
        "protection and pin are skipped"
    );
    assert_eq!(
        f.fake.auto_merge_scheduled(REPO, n).as_deref(),
        Some("merge")
    );
    assert_eq!(f.tip("main"), main, "never merged inline");
    let (status, text) = f.merge(n, body).await;
    assert_eq!(status, 409);
    assert_eq!(
        message(&text),
        format!(
            "pull request is already scheduled to auto merge when checks succeed [pull_id: {}]",
            pr["id"]
        )
    );
    assert_eq!(f.pull(n).await["merged"], false);
    assert_eq!(f.tip("orch/auto"), head);
}

async fn post_needs_a_token(version: &str) {
    let f = Forge::new(version).await;
    f.fake.require_token(None);
    f.commit_on("orch/t", "main", "t.txt", "t\n");
    let resp = f
        .http
        .post(f.api("pulls"))
        .json(&json!({ "head": "orch/t", "base": "main", "title": "t" }))
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status().as_u16(), 401);
    assert_eq!(message(&resp.text().await.unwrap()), "token is required");
    // Reading needs none on a repository the caller can see.
    let pr = f.open("orch/t", "t").await;
    let resp = f
        .http
        .get(f.api(&format!("pulls/{}", number(&pr))))
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status().as_u16(), 200);
}
