use super::glob::glob_with;
use super::*;

// ---- matching -----------------------------------------------------------------------------

/// gobwas/glob v0.2.3 `glob_test.go` (`TestGlob`): (matches, pattern, text, separator).
#[test]
fn gobwas_glob_cases() {
    let cases: &[(bool, &str, &str, Option<char>)] = &[
        (true, "* ?at * eyes", "my cat has very bright eyes", None),
        (true, "", "", None),
        (false, "", "b", None),
        (true, "*ä", "åä", None),
        (true, "abc", "abc", None),
        (true, "a*c", "abc", None),
        (true, "a*c", "a12345c", None),
        (true, "a?c", "a1c", None),
        (true, "a.b", "a.b", Some('.')),
        (true, "a.*", "a.b", Some('.')),
        (true, "a.**", "a.b.c", Some('.')),
        (true, "a.?.c", "a.b.c", Some('.')),
        (true, "a.?.?", "a.b.c", Some('.')),
        (true, "?at", "cat", None),
        (true, "?at", "fat", None),
        (true, "*", "abc", None),
        (true, r"\*", "*", None),
        (true, "**", "a.b.c", Some('.')),
        (false, "?at", "at", None),
        (false, "?at", "fat", Some('f')),
        (false, "a.*", "a.b.c", Some('.')),
        (false, "a.?.c", "a.bb.c", Some('.')),
        (false, "*", "a.b.c", Some('.')),
        (true, "*test", "this is a test", None),
        (true, "this*", "this is a test", None),
        (true, "*is *", "this is a test", None),
        (true, "*is*a*", "this is a test", None),
        (true, "**test**", "this is a test", None),
        (true, "**is**a***test*", "this is a test", None),
        (false, "*is", "this is a test", None),
        (false, "*no*", "this is a test", None),
        (true, "[!a]*", "this is a test3", None),
        (true, "*abc", "abcabc", None),
        (true, "**abc", "abcabc", None),
        (true, "???", "abc", None),
        (true, "?*?", "abc", None),
        (true, "?*?", "ac", None),
        (false, "sta", "stagnation", None),
        (true, "sta*", "stagnation", None),
        (false, "sta?", "stagnation", None),
        (false, "sta?n", "stagnation", None),
        (true, "{abc,def}ghi", "defghi", None),
        (true, "{abc,abcd}a", "abcda", None),
        (true, "{a,ab}{bc,f}", "abc", None),
        (true, "{*,**}{a,b}", "ab", None),
        (false, "{*,**}{a,b}", "ac", None),
        (true, "/{rate,[a-z][a-z][a-z]}*", "/rate", None),
        (true, "/{rate,[0-9][0-9][0-9]}*", "/rate", None),
        (true, "/{rate,[a-z][a-z][a-z]}*", "/usd", None),
        (true, "{*.google.*,*.yandex.*}", "www.google.com", Some('.')),
        (true, "{*.google.*,*.yandex.*}", "www.yandex.com", Some('.')),
        (false, "{*.google.*,*.yandex.*}", "yandex.com", Some('.')),
        (false, "{*.google.*,*.yandex.*}", "google.com", Some('.')),
        (true, "{*.google.*,yandex.*}", "www.google.com", Some('.')),
        (true, "{*.google.*,yandex.*}", "yandex.com", Some('.')),
        (false, "{*.google.*,yandex.*}", "www.yandex.com", Some('.')),
        (false, "{*.google.*,yandex.*}", "google.com", Some('.')),
    ];
    for (want, pattern, text, sep) in cases {
        assert_eq!(
            glob_with(pattern, text, *sep),
            Some(*want),
            "{pattern:?} against {text:?} (separator {sep:?})"
        );
    }
}

/// What does not compile in gobwas/glob (`Compile` returns an error).
#[test]
fn gobwas_compile_errors() {
    for pattern in ["[a", "a[", "[a-zA-Z]", "[z-a]", "[!]", "[]", "[a-"] {
        assert_eq!(glob_with(pattern, "a", Some('/')), None, "{pattern:?}");
    }
    // Outside a class or alternatives these are text.
    assert_eq!(glob_with("a]b", "a]b", Some('/')), Some(true));
    assert_eq!(glob_with("a}b,c", "a}b,c", Some('/')), Some(true));
    // Inside a class a backslash escapes; a list may hold `-` and `!` after the first.
    assert_eq!(glob_with(r"[\]]", "]", Some('/')), Some(true));
    assert_eq!(glob_with("[ab-]", "-", Some('/')), Some(true));
    assert_eq!(glob_with("[!!]", "!", Some('/')), Some(false));
    // Classes take the separator too; `?` does not.
    assert_eq!(glob_with("a[/]b", "a/b", Some('/')), Some(true));
    assert_eq!(glob_with("a[!x]b", "a/b", Some('/')), Some(true));
    assert_eq!(glob_with("a?b", "a/b", Some('/')), Some(false));
    // Alternatives left open are closed at the end; they nest.
    assert_eq!(glob_with("x{a,b", "xb", Some('/')), Some(true));
    assert_eq!(glob_with("{a,{b,c}d}", "cd", Some('/')), Some(true));
    assert_eq!(glob_with("{a,{b,c}d}", "c", Some('/')), Some(false));
    // `***` is `**` then `*`.
    assert_eq!(glob_with("a***", "a/b/c", Some('/')), Some(true));
}

/// Forgejo's `TestBranchRuleMatch` (`models/git/protected_branch_test.go`).
#[test]
fn forgejo_rule_match_cases() {
    let cases = [
        ("release/*", "release/v1.17", true),
        ("release/**/v1.17", "release/test/v1.17", true),
        ("release/**/v1.17", "release/test/1/v1.17", true),
        ("release/*/v1.17", "release/test/1/v1.17", false),
        ("release/v*", "release/v1.16", true),
        ("*", "release/v1.16", false),
        ("**", "release/v1.16", true),
        ("main", "main", true),
        ("master", "main", false),
    ];
    for (rule, branch, want) in cases {
        assert_eq!(rule_matches(rule, branch), want, "{rule} - {branch}");
    }
}

#[test]
fn a_plain_name_ignores_case_and_a_glob_does_not() {
    assert!(rule_matches("Main", "main"));
    assert!(rule_matches("RELEASE/V1", "release/v1"));
    assert!(!rule_matches("Ma*", "main"));
    assert!(rule_matches("ma*", "main"));
    // A name that is not a glob is never one: `.` and `+` are plain.
    assert!(rule_matches("v1.0+x", "V1.0+X"));
    assert!(!rule_matches("v1.0", "v1x0"));
}

#[test]
fn a_glob_that_does_not_compile_is_the_literal_name() {
    assert!(rule_matches("release/[a", "release/[a"));
    assert!(!rule_matches("release/[a", "release/a"));
    assert!(!rule_matches("release/[a", "RELEASE/[A"));
    assert!(rule_matches("[a-zA-Z]", "[a-zA-Z]"));
    assert!(!rule_matches("[a-zA-Z]", "b"));
}

#[test]
fn main_star_and_release_star() {
    assert!(rule_matches("main*", "main"));
    assert!(rule_matches("main*", "main-next"));
    assert!(!rule_matches("main*", "main/x"));
    assert!(rule_matches("release/*", "release/1.0"));
    assert!(!rule_matches("release/*", "release/1.0/hotfix"));
    assert!(!rule_matches("release/*", "release"));
}

/// The README's rule for workers' branches covers them and not orch's own rebuilt branches.
#[test]
fn the_worker_branch_rule_leaves_land_and_revert_branches_out() {
    for repo in ["core", "my-repo", "a"] {
        let worker = format!("orch/{repo}-1a2b3c4d");
        assert!(rule_matches(WORKER_BRANCHES_RULE, &worker), "{worker}");
        for suffix in ["land", "revert"] {
            let own = format!("{worker}-{suffix}");
            assert!(!rule_matches(WORKER_BRANCHES_RULE, &own), "{own}");
            assert!(rule_matches("orch/*", &own), "{own}");
        }
        let verify = format!("orch/verify/{repo}-1a2b3c4d");
        assert!(!rule_matches(WORKER_BRANCHES_RULE, &verify));
    }
}

/// Forgejo's `TestBranchRuleMatchPriority` (`models/git/protected_branch_list_test.go`).
#[test]
fn forgejo_rule_priority_cases() {
    let cases: &[(&[&str], &str, Option<usize>)] = &[
        (&["release/*", "release/v1.17"], "release/v1.17", Some(1)),
        (&["release/v1.17", "release/*"], "release/v1.17", Some(0)),
        (
            &["release/**/v1.17", "release/test/v1.17"],
            "release/test/v1.17",
            Some(1),
        ),
        (
            &["release/test/v1.17", "release/**/v1.17"],
            "release/test/v1.17",
            Some(0),
        ),
        (&["release/**", "release/v1.0.0"], "release/v1.0.0", Some(1)),
        (&["release/v1.0.0", "release/**"], "release/v1.0.0", Some(0)),
        (&["release/**", "release/v1.0.0"], "release/v2.0.0", Some(0)),
        (&["release/*", "release/v1.0.0"], "release/1/v2.0.0", None),
    ];
    for (names, branch, want) in cases {
        let rules: Vec<Rule> = names.iter().map(|n| Rule::new(n)).collect();
        let got = first_match(&rules, branch).map(|r| r.name.as_str());
        assert_eq!(got, want.map(|i| names[i]), "{names:?} {branch}");
    }
    // Among globs (and among plain names) the server's order decides: the oldest first.
    let rules = [Rule::new("ma*"), Rule::new("*n")];
    assert_eq!(first_match(&rules, "main").unwrap().name, "ma*");
}

// ---- findings -----------------------------------------------------------------------------

fn subject(policy: LandPolicy, account: Option<&'static str>) -> Subject<'static> {
    Subject {
        repo: "core",
        base: "main",
        policy,
        reverts: false,
        account,
    }
}

fn whitelisted(name: &str, users: &[&str]) -> Rule {
    Rule {
        enable_push: true,
        push_whitelist: Some(Whitelist {
            users: users.iter().map(|u| u.to_string()).collect(),
            ..Whitelist::default()
        }),
        ..Rule::new(name)
    }
}

/// The rules README recommends: the base whitelisted to orch's account, workers' branches
/// protected and open to pushes.
fn recommended(base_rule: Rule) -> Vec<Rule> {
    vec![
        base_rule,
        Rule {
            enable_push: true,
            ..Rule::new(WORKER_BRANCHES_RULE)
        },
    ]
}

#[test]
fn the_recommended_rules_leave_nothing_to_say() {
    let merge = subject(LandPolicy::Merge, Some("orch-bot"));
    let rules = recommended(whitelisted("main", &["orch-bot"]));
    assert_eq!(findings(&rules, &merge), []);
    // The account is compared as Forgejo compares user names: without case.
    let rules = recommended(whitelisted("main", &["Orch-Bot"]));
    assert_eq!(findings(&rules, &merge), []);
    // pull_request: no pushes at all.
    let pr = subject(LandPolicy::PullRequest, Some("orch-bot"));
    assert_eq!(findings(&recommended(Rule::new("main")), &pr), []);
    // none: the same.
    let none = subject(LandPolicy::None, None);
    assert_eq!(findings(&recommended(Rule::new("main")), &none), []);
    // direct: the workers' accounts whitelisted (orch cannot know them).
    let direct = subject(LandPolicy::Direct, Some("orch-bot"));
    let rules = recommended(whitelisted("main", &["worker-1", "worker-2"]));
    assert_eq!(findings(&rules, &direct), []);
}

#[test]
fn an_unprotected_base_is_named_with_its_repository_and_branch() {
    let s = subject(LandPolicy::Merge, Some("orch-bot"));
    let got = findings(&[], &s);
    assert_eq!(
        got,
        [Finding::BaseUnprotected, Finding::WorkerBranchesUnprotected]
    );
    let text = Said {
        finding: &got[0],
        subject: &s,
    }
    .to_string();
    assert!(text.starts_with("repository core: base branch main is not protected"));
    assert!(
        text.contains("push whitelist of orch's account orch-bot only"),
        "{text}"
    );
    // A rule for another branch covers nothing here.
    let got = findings(&[whitelisted("develop", &["orch-bot"])], &s);
    assert_eq!(got[0], Finding::BaseUnprotected);
}

#[test]
fn glob_rules_cover_the_base() {
    let s = Subject {
        base: "release/1.0",
        ..subject(LandPolicy::Merge, Some("orch-bot"))
    };
    let rules = recommended(whitelisted("release/*", &["orch-bot"]));
    assert_eq!(findings(&rules, &s), []);
    let s = subject(LandPolicy::Merge, Some("orch-bot"));
    let rules = recommended(whitelisted("main*", &["orch-bot"]));
    assert_eq!(findings(&rules, &s), []);
    // `*` stops at `/`.
    let s = Subject {
        base: "release/1.0/hotfix",
        ..s
    };
    let rules = recommended(whitelisted("release/*", &["orch-bot"]));
    assert_eq!(findings(&rules, &s)[0], Finding::BaseUnprotected);
}

#[test]
fn a_rule_open_to_every_writer_is_named() {
    let open = Rule {
        enable_push: true,
        ..Rule::new("main")
    };
    for policy in [
        LandPolicy::Merge,
        LandPolicy::PullRequest,
        LandPolicy::Direct,
        LandPolicy::None,
    ] {
        let s = subject(policy, Some("orch-bot"));
        assert_eq!(
            findings(&recommended(open.clone()), &s),
            [Finding::BaseOpenToWriters {
                rule: "main".into()
            }],
            "{policy:?}"
        );
    }
}

#[test]
fn others_in_the_whitelist_matter_when_orch_moves_the_base() {
    let mut rule = whitelisted("main", &["orch-bot", "alice"]);
    if let Some(w) = rule.push_whitelist.as_mut() {
        w.teams = vec!["release".into()];
        w.deploy_keys = true;
    }
    let s = subject(LandPolicy::Merge, Some("orch-bot"));
    let got = findings(&recommended(rule.clone()), &s);
    assert_eq!(
        got,
        [Finding::OthersMayPush {
            rule: "main".into(),
            others: vec![
                "user alice".into(),
                "team release".into(),
                "deploy keys".into()
            ],
        }]
    );
    let text = Said {
        finding: &got[0],
        subject: &s,
    }
    .to_string();
    assert!(
        text.contains("lets user alice, team release, deploy keys push to base branch main"),
        "{text}"
    );
    // With reverts orch moves the base under pull_request too.
    let s = Subject {
        reverts: true,
        ..subject(LandPolicy::PullRequest, Some("orch-bot"))
    };
    assert!(matches!(
        findings(&recommended(rule.clone()), &s)[0],
        Finding::OthersMayPush { .. }
    ));
    // An unknown account: nothing compared.
    let s = subject(LandPolicy::Merge, None);
    assert_eq!(findings(&recommended(rule), &s), []);
}

#[test]
fn a_rule_that_keeps_orch_out_of_the_base_is_named() {
    let s = subject(LandPolicy::Merge, Some("orch-bot"));
    // Not in the whitelist.
    assert_eq!(
        findings(&recommended(whitelisted("main", &["alice"])), &s),
        [
            Finding::OthersMayPush {
                rule: "main".into(),
                others: vec!["user alice".into()]
            },
            Finding::OrchCannotPush {
                rule: "main".into(),
                push_disabled: false
            }
        ]
    );
    // A team might hold the account: not said.
    let mut team = whitelisted("main", &[]);
    if let Some(w) = team.push_whitelist.as_mut() {
        w.teams = vec!["bots".into()];
    }
    assert_eq!(
        findings(&recommended(team), &s),
        [Finding::OthersMayPush {
            rule: "main".into(),
            others: vec!["team bots".into()]
        }]
    );
    // An empty whitelist keeps everyone out, whatever the account.
    let s_unknown = subject(LandPolicy::Merge, None);
    assert_eq!(
        findings(&recommended(whitelisted("main", &[])), &s_unknown),
        [Finding::OrchCannotPush {
            rule: "main".into(),
            push_disabled: false
        }]
    );
    // Pushes disabled.
    assert_eq!(
        findings(&recommended(Rule::new("main")), &s),
        [Finding::OrchCannotPush {
            rule: "main".into(),
            push_disabled: true
        }]
    );
    // direct: the workers are the ones kept out.
    let direct = subject(LandPolicy::Direct, Some("orch-bot"));
    assert_eq!(
        findings(&recommended(Rule::new("main")), &direct),
        [Finding::WorkersCannotPushBase {
            rule: "main".into()
        }]
    );
}

#[test]
fn pull_requests_need_no_pushes_and_orch_in_the_merge_whitelist() {
    let s = subject(LandPolicy::PullRequest, Some("orch-bot"));
    assert_eq!(
        findings(&recommended(whitelisted("main", &["alice"])), &s),
        [Finding::PushesNotNeeded {
            rule: "main".into(),
            who: vec!["user alice".into()]
        }]
    );
    let merge_list = |users: &[&str]| Rule {
        merge_whitelist: Some(Whitelist {
            users: users.iter().map(|u| u.to_string()).collect(),
            ..Whitelist::default()
        }),
        ..Rule::new("main")
    };
    assert_eq!(
        findings(&recommended(merge_list(&["alice"])), &s),
        [Finding::OrchCannotMerge {
            rule: "main".into()
        }]
    );
    assert_eq!(
        findings(&recommended(merge_list(&["alice", "orch-bot"])), &s),
        []
    );
}

#[test]
fn force_pushes_are_named_where_the_server_has_the_setting() {
    let s = subject(LandPolicy::Merge, Some("orch-bot"));
    let mut rule = whitelisted("main", &["orch-bot"]);
    rule.force_push = Some(false);
    assert_eq!(findings(&recommended(rule.clone()), &s), []);
    rule.force_push = Some(true);
    assert_eq!(
        findings(&recommended(rule), &s),
        [Finding::ForcePushAllowed {
            rule: "main".into()
        }]
    );
}

#[test]
fn workers_branches_protected_open_and_not_orchs_own() {
    let s = subject(LandPolicy::Merge, Some("orch-bot"));
    let base = whitelisted("main", &["orch-bot"]);
    // `orch/*` covers orch/<id>-land, which landing rebuilds with a force push.
    let wide = vec![
        base.clone(),
        Rule {
            enable_push: true,
            ..Rule::new("orch/*")
        },
    ];
    assert_eq!(
        findings(&wide, &s),
        [Finding::RebuiltBranchProtected {
            rule: "orch/*".into(),
            suffix: "land"
        }]
    );
    // Without landing by orch it is harmless; with reverts the revert branch is named.
    let none = subject(LandPolicy::None, None);
    assert_eq!(findings(&wide[1..], &none), [Finding::BaseUnprotected]);
    let reverts = Subject {
        reverts: true,
        ..subject(LandPolicy::PullRequest, Some("orch-bot"))
    };
    let wide_pr = vec![
        Rule::new("main"),
        Rule {
            enable_push: true,
            ..Rule::new("orch/**")
        },
    ];
    let got = findings(&wide_pr, &reverts);
    assert!(
        got.contains(&Finding::RebuiltBranchProtected {
            rule: "orch/**".into(),
            suffix: "revert"
        }),
        "{got:?}"
    );
    // Closed to pushes: workers could not push (except with direct, where they push the base).
    let closed = vec![base.clone(), Rule::new(WORKER_BRANCHES_RULE)];
    assert_eq!(
        findings(&closed, &s),
        [Finding::WorkerBranchesClosed {
            rule: WORKER_BRANCHES_RULE.into()
        }]
    );
    // Unprotected: the advisory.
    let got = findings(&[base], &s);
    assert_eq!(got, [Finding::WorkerBranchesUnprotected]);
    let text = Said {
        finding: &got[0],
        subject: &s,
    }
    .to_string();
    assert!(text.contains("orch/core-<8 hex digits>"), "{text}");
    assert!(text.contains(WORKER_BRANCHES_RULE), "{text}");
}
