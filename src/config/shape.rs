//! Wrong-typed values in repos.yaml (`deps: 5`, `max_parallel: "x"`, a repository given as a
//! list) and required keys left out, every one reported with its position — and then set
//! aside, so that the typed read and the validation of everything else still run in the same
//! `orch check`.
//!
//! The document's key tree ([`Node`]) is checked against the shape each known key expects;
//! unknown keys are [`super::raw::unknown_keys`]'s to report. A wrong value is set aside by
//! renaming its key in the text (one character, so every other position stays the same): the
//! typed shapes ignore keys they do not know, and take required ones as optional, so that a
//! wrong or missing required value is reported here once and nowhere else.

use super::raw::{self, Node, Scalar};
use crate::yaml::Pos;
use serde_saphyr::Spanned;

/// What a key's value must be.
#[derive(Debug)]
pub(super) enum Shape {
    /// Any scalar (names, paths, durations: their own checks say more).
    Text,
    Int,
    /// `true` or `false`.
    Bool,
    /// An integer or a decimal number.
    Number,
    List(&'static Shape),
    Map(&'static [Field]),
    /// `repos:`: repository name → its settings.
    Repos,
    /// `alerts:`: a list of sinks, or a mapping with `sinks` and delivery settings.
    Alerts,
    /// One alert sink: its settings, exactly one of `webhook` and `command` among them.
    Sink,
    /// `env:`: variable names → single values (their names are validation's to judge).
    Env,
}

/// Whether a known key must be written, and whether it may be left empty (`key:` or `~`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Presence {
    /// May be left out or left empty.
    Optional,
    /// May be left out, but not left empty.
    NotEmpty,
    /// Must be written, with a value.
    Required,
}

use Presence::{NotEmpty, Optional, Required};

/// A known key, the shape of its value, and whether it must be there.
pub(super) type Field = (&'static str, Shape, Presence);

const TEXTS: Shape = Shape::List(&Shape::Text);

pub(super) const FORGE: &[Field] = &[
    ("kind", Shape::Text, Required),
    ("url", Shape::Text, Optional),
    ("owner", Shape::Text, Optional),
    ("token_env", Shape::Text, Optional),
    ("token_file", Shape::Text, Optional),
    ("request_timeout", Shape::Text, Optional),
    ("give_up_after", Shape::Text, Optional),
    ("max_concurrent_runs", Shape::Int, Optional),
    ("lost_hook_grace", Shape::Text, Optional),
    ("path", Shape::Text, Optional),
];
pub(super) const CI: &[Field] = &[
    ("sync_job", Shape::Text, Optional),
    ("required_jobs", TEXTS, Optional),
    ("start_timeout", Shape::Text, Optional),
    ("poll_interval", Shape::Text, Optional),
    ("protected_paths", TEXTS, Optional),
];
pub(super) const WORKER: &[Field] = &[
    ("agent", Shape::Text, Optional),
    ("command", TEXTS, Optional),
    ("max_parallel", Shape::Int, Optional),
    ("max_parallel_total", Shape::Int, Optional),
    ("env_passthrough", TEXTS, Optional),
    ("max_respawns", Shape::Int, Optional),
    ("stop_grace", Shape::Text, Optional),
    ("max_cost_usd", Shape::Number, Optional),
    ("max_tokens", Shape::Int, Optional),
    ("user", Shape::Text, Optional),
    ("users", TEXTS, Optional),
    ("sandbox", Shape::Bool, Optional),
    ("hide", TEXTS, Optional),
    ("model", Shape::Text, NotEmpty),
    ("model_overrides", Shape::Map(MODEL_OVERRIDES), Optional),
];
pub(super) const MODEL_OVERRIDES: &[Field] = &[
    ("critical_path", Shape::Text, NotEmpty),
    ("complexity_high", Shape::Text, NotEmpty),
    ("security_sensitive", Shape::Text, NotEmpty),
    ("cross_repo", Shape::Text, NotEmpty),
];
pub(super) const WEBHOOK: &[Field] = &[("url_env", Shape::Text, Required)];
pub(super) const SINK: &[Field] = &[
    ("webhook", Shape::Map(WEBHOOK), Optional),
    ("command", TEXTS, Optional),
    ("min_severity", Shape::Text, Optional),
    ("timeout", Shape::Text, Optional),
];
pub(super) const ALERTS: &[Field] = &[
    ("sinks", Shape::List(&Shape::Sink), NotEmpty),
    ("dedup_window", Shape::Text, Optional),
    ("retry_initial", Shape::Text, Optional),
    ("max_attempts", Shape::Int, Optional),
];
pub(super) const JOB: &[Field] = &[
    ("name", Shape::Text, Required),
    ("run", Shape::Text, Required),
    ("needs", TEXTS, NotEmpty),
    ("timeout", Shape::Text, Optional),
    ("env", Shape::Env, Optional),
];
pub(super) const LAND: &[Field] = &[
    ("policy", Shape::Text, Optional),
    ("method", Shape::Text, Optional),
    ("max_attempts", Shape::Int, Optional),
    ("on_conflict", Shape::Text, Optional),
];
pub(super) const DOWNSTREAM: &[Field] = &[
    ("depth", Shape::Int, Optional),
    ("on_breakage", Shape::Text, Optional),
];
pub(super) const HISTORY: &[Field] = &[("keep", Shape::Text, Optional)];
pub(super) const SERVE: &[Field] = &[("token_env", Shape::Text, Optional)];
pub(super) const STORE: &[Field] = &[
    ("url", Shape::Text, Optional),
    ("url_env", Shape::Text, Optional),
    ("password_env", Shape::Text, Optional),
];
pub(super) const NODE: &[Field] = &[("name", Shape::Text, Optional)];
pub(super) const REPO_CI: &[Field] = &[
    ("jobs", Shape::List(&Shape::Map(JOB)), NotEmpty),
    ("protected_paths", TEXTS, Optional),
    ("env", Shape::Env, Optional),
];
pub(super) const REPO: &[Field] = &[
    ("path", Shape::Text, Optional),
    ("branch", Shape::Text, Optional),
    ("deps", TEXTS, NotEmpty),
    ("ci", Shape::Map(REPO_CI), Optional),
    ("land", Shape::Map(LAND), Optional),
    ("model", Shape::Text, NotEmpty),
];
pub(super) const TOP: &[Field] = &[
    ("forge", Shape::Map(FORGE), Optional),
    ("ci", Shape::Map(CI), Optional),
    ("worker", Shape::Map(WORKER), Optional),
    ("alerts", Shape::Alerts, Optional),
    ("land", Shape::Map(LAND), Optional),
    ("downstream", Shape::Map(DOWNSTREAM), Optional),
    ("history", Shape::Map(HISTORY), Optional),
    ("serve", Shape::Map(SERVE), Optional),
    ("store", Shape::Map(STORE), Optional),
    ("node", Shape::Map(NODE), Optional),
    ("repos", Shape::Repos, Required),
];

/// One value of the wrong shape, or a required key left out: where, what is wrong, and the
/// key to rename so that the typed read skips the value (`None`: nothing to rename — a key
/// left out, or a repository the typed read sets aside itself).
#[derive(Debug)]
pub(super) struct ShapeProblem {
    pub(super) pos: Option<Pos>,
    pub(super) message: String,
    pub(super) set_aside: Option<Pos>,
}

/// Every wrong-typed value and every required key left out, in document order (a key left
/// out after the keys of its mapping).
pub(super) fn shape_problems(doc: &Spanned<Node>) -> Vec<ShapeProblem> {
    let mut out = Vec::new();
    match &doc.value {
        Node::Map(_) => check_map(doc, TOP, "", None, &mut out),
        // An empty file: the typed read takes it as a mapping with nothing in it.
        Node::Scalar(Scalar::Null) => out.push(ShapeProblem {
            pos: None,
            message: "the file is empty; it needs at least `repos` (the repositories)".into(),
            set_aside: None,
        }),
        _ => {} // not a mapping: the typed read says so
    }
    out
}

/// `text` with the keys of `problems` renamed (their first character replaced), so that the
/// typed read ignores those entries; every line and column stays where it was.
pub(super) fn set_aside(text: &str, problems: &[ShapeProblem]) -> String {
    let keys: Vec<Pos> = problems.iter().filter_map(|w| w.set_aside).collect();
    if keys.is_empty() {
        return text.to_string();
    }
    let mut out = String::with_capacity(text.len());
    for (i, line) in text.split_inclusive('\n').enumerate() {
        let line_no = i as u64 + 1;
        let mut cols: Vec<u64> = keys
            .iter()
            .filter(|p| p.line == line_no)
            .map(|p| p.column)
            .collect();
        if cols.is_empty() {
            out.push_str(line);
            continue;
        }
        cols.sort_unstable();
        let mut quoted_from = None;
        for (c, ch) in line.chars().enumerate() {
            let col = c as u64 + 1;
            let at_key = cols.contains(&col) || quoted_from == Some(col);
            if at_key && (ch == '"' || ch == '\'') {
                // A quoted key: rename its first character inside the quotes.
                quoted_from = Some(col + 1);
                out.push(ch);
            } else if at_key {
                quoted_from = None;
                out.push(if ch == '_' { 'x' } else { '_' });
            } else {
                out.push(ch);
            }
        }
    }
    out
}

fn check_map(
    node: &Spanned<Node>,
    fields: &[Field],
    path: &str,
    key: Option<Pos>,
    out: &mut Vec<ShapeProblem>,
) {
    let Node::Map(entries) = &node.value else {
        wrong(node, path, "a mapping", key, out);
        return;
    };
    let within = |name: &str| {
        if path.is_empty() {
            name.to_string()
        } else {
            format!("{path}.{name}")
        }
    };
    for (k, value) in entries {
        let name = k.value.0.as_str();
        let Some((_, shape, presence)) = fields.iter().find(|(n, _, _)| *n == name) else {
            continue; // unknown: reported by `unknown_keys`
        };
        let path = within(name);
        if matches!(value.value, Node::Scalar(Scalar::Null)) {
            if *presence != Optional {
                out.push(ShapeProblem {
                    pos: raw::pos(value).or(raw::pos(k)),
                    message: format!("{path} is empty; it must be {}", describe_shape(shape)),
                    set_aside: raw::pos(k),
                });
            }
            continue;
        }
        check(value, shape, &path, raw::pos(k), out);
    }
    // A required key written with a wrong value was reported above; only one left out is
    // reported here (the typed read takes both as absent, and says nothing more).
    for (name, _, presence) in fields {
        if *presence == Required && !entries.iter().any(|(k, _)| k.value.0 == *name) {
            let place = if path.is_empty() {
                "at the top level".to_string()
            } else {
                format!("in {path}")
            };
            out.push(ShapeProblem {
                pos: raw::pos(node).or(key),
                message: format!("`{name}` is missing {place} (it is required)"),
                set_aside: None,
            });
        }
    }
}

fn check(
    node: &Spanned<Node>,
    shape: &Shape,
    path: &str,
    key: Option<Pos>,
    out: &mut Vec<ShapeProblem>,
) {
    match shape {
        Shape::Text => {
            if !matches!(node.value, Node::Scalar(_)) {
                wrong(node, path, "a single value", key, out);
            }
        }
        Shape::Int => {
            let ok = match &node.value {
                Node::Scalar(Scalar::Int(_)) => true,
                Node::Scalar(Scalar::Str(s)) => s.trim().parse::<i64>().is_ok(),
                _ => false,
            };
            if !ok {
                wrong(node, path, "a whole number", key, out);
            }
        }
        Shape::Bool => {
            if !matches!(&node.value, Node::Scalar(Scalar::Bool(_))) {
                wrong(node, path, "true or false", key, out);
            }
        }
        Shape::Number => {
            let ok = match &node.value {
                Node::Scalar(Scalar::Int(_) | Scalar::Float(_)) => true,
                Node::Scalar(Scalar::Str(s)) => s.trim().parse::<f64>().is_ok(),
                _ => false,
            };
            if !ok {
                wrong(node, path, "a number", key, out);
            }
        }
        Shape::List(item) => {
            let Node::Seq(items) = &node.value else {
                wrong(node, path, &format!("a list of {}", plural(item)), key, out);
                return;
            };
            for (i, it) in items.iter().enumerate() {
                check(it, item, &format!("{path}[{i}]"), key, out);
            }
        }
        Shape::Map(fields) => check_map(node, fields, path, key, out),
        Shape::Env => {
            let Node::Map(entries) = &node.value else {
                wrong(
                    node,
                    path,
                    "a mapping of variable names to values",
                    key,
                    out,
                );
                return;
            };
            for (name, value) in entries {
                let path = format!("{path}.{}", name.value.0);
                check(value, &Shape::Text, &path, raw::pos(name), out);
            }
        }
        Shape::Repos => {
            let Node::Map(entries) = &node.value else {
                wrong(
                    node,
                    path,
                    "a mapping of repository names to their settings",
                    key,
                    out,
                );
                return;
            };
            for (name, repo) in entries {
                let path = format!("repos.{}", name.value.0);
                match &repo.value {
                    Node::Map(_) => check_map(repo, REPO, &path, raw::pos(name), out),
                    // Set aside by the typed read (see `raw::RepoValue`).
                    _ => wrong(
                        repo,
                        &path,
                        "a mapping of settings (path, branch, deps, ci; `{}` for none)",
                        None,
                        out,
                    ),
                }
            }
        }
        Shape::Alerts => match &node.value {
            Node::Seq(_) => check(node, &Shape::List(&Shape::Sink), path, key, out),
            _ => check_map(node, ALERTS, path, key, out),
        },
        Shape::Sink => {
            check_map(node, SINK, path, key, out);
            // Said here, where a kind written with a wrong value still counts as written:
            // the typed read, which sees it set aside, would call it left out.
            if let Node::Map(entries) = &node.value {
                let kinds = entries
                    .iter()
                    .filter(|(k, v)| {
                        matches!(k.value.0.as_str(), "webhook" | "command")
                            && !matches!(v.value, Node::Scalar(Scalar::Null))
                    })
                    .count();
                if kinds != 1 {
                    out.push(ShapeProblem {
                        pos: raw::pos(node).or(key),
                        message: "alerts: each entry needs exactly one of webhook or command"
                            .into(),
                        set_aside: None,
                    });
                }
            }
        }
    }
}

fn wrong(
    node: &Spanned<Node>,
    path: &str,
    expected: &str,
    key: Option<Pos>,
    out: &mut Vec<ShapeProblem>,
) {
    out.push(ShapeProblem {
        pos: raw::pos(node).or(key),
        message: format!("{path} must be {expected}, not {}", found(&node.value)),
        set_aside: key,
    });
}

fn describe_shape(shape: &Shape) -> String {
    match shape {
        Shape::Text => "a value".into(),
        Shape::Int => "a whole number".into(),
        Shape::Bool => "true or false".into(),
        Shape::Number => "a number".into(),
        Shape::List(item) => format!("a list of {}", plural(item)),
        Shape::Map(_) | Shape::Alerts | Shape::Sink => "a mapping".into(),
        Shape::Repos => "a mapping of repository names to their settings".into(),
        Shape::Env => "a mapping of variable names to values".into(),
    }
}

fn plural(shape: &Shape) -> &'static str {
    match shape {
        Shape::Text => "names",
        Shape::Int => "whole numbers",
        Shape::Number => "numbers",
        _ => "mappings",
    }
}

/// What was written instead, for the message.
fn found(node: &Node) -> String {
    match node {
        Node::Map(_) => "a mapping".into(),
        Node::Seq(_) => "a list".into(),
        Node::Scalar(Scalar::Null) => "empty".into(),
        Node::Scalar(Scalar::Bool(b)) => format!("{b}"),
        Node::Scalar(Scalar::Int(i)) => format!("the number {i}"),
        Node::Scalar(Scalar::Float(f)) => format!("the number {f}"),
        Node::Scalar(Scalar::Str(s)) => {
            let shown: String = s.chars().take(40).collect();
            let cut = if shown.len() < s.len() { "…" } else { "" };
            format!("the text {:?}", format!("{shown}{cut}"))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn names(fields: &[Field]) -> Vec<&str> {
        fields.iter().map(|(n, _, _)| *n).collect()
    }

    #[test]
    fn every_known_key_has_a_shape() {
        for (shapes, known) in [
            (TOP, raw::TOP),
            (STORE, raw::STORE),
            (NODE, raw::NODE),
            (FORGE, raw::FORGE),
            (CI, raw::CI),
            (WORKER, raw::WORKER),
            (MODEL_OVERRIDES, raw::MODEL_OVERRIDES),
            (ALERTS, raw::ALERTS),
            (SINK, raw::SINK),
            (WEBHOOK, raw::WEBHOOK),
            (REPO, raw::REPO),
            (REPO_CI, raw::REPO_CI),
            (JOB, raw::JOB),
        ] {
            assert_eq!(names(shapes), known);
        }
    }

    fn doc(text: &str) -> Spanned<Node> {
        crate::yaml::from_yaml_str(text).unwrap()
    }

    #[test]
    fn wrong_types_are_found_with_positions_and_set_aside() {
        let text = "worker:\n  max_parallel: \"x\"\nrepos:\n  core: { deps: 5, branch: main }\n  sdk: [a, b]\n  vm:\n    deps: [core, [x]]\n";
        let found = shape_problems(&doc(text));
        let got: Vec<(u64, u64, &str)> = found
            .iter()
            .map(|w| {
                let p = w.pos.unwrap();
                (p.line, p.column, w.message.as_str())
            })
            .collect();
        assert_eq!(
            got,
            [
                (
                    2,
                    17,
                    "worker.max_parallel must be a whole number, not the text \"x\""
                ),
                (
                    4,
                    17,
                    "repos.core.deps must be a list of names, not the number 5"
                ),
                (
                    5,
                    8,
                    "repos.sdk must be a mapping of settings (path, branch, deps, ci; `{}` for none), not a list"
                ),
                (7, 18, "repos.vm.deps[1] must be a single value, not a list"),
            ]
        );
        let aside = set_aside(text, &found);
        assert_eq!(
            aside,
            "worker:\n  _ax_parallel: \"x\"\nrepos:\n  core: { _eps: 5, branch: main }\n  sdk: [a, b]\n  vm:\n    _eps: [core, [x]]\n"
        );
    }

    #[test]
    fn a_required_key_is_one_problem_whether_wrong_typed_or_left_out() {
        let text = "forge: { kind: [local] }\nrepos:\n  a:\n    ci: { jobs: [{ run: x }] }\n";
        let found = shape_problems(&doc(text));
        let got: Vec<(Option<Pos>, &str, Option<Pos>)> = found
            .iter()
            .map(|w| (w.pos, w.message.as_str(), w.set_aside))
            .collect();
        let at = |line, column| Some(Pos { line, column });
        assert_eq!(
            got,
            [
                (
                    at(1, 16),
                    "forge.kind must be a single value, not a list",
                    at(1, 10)
                ),
                (
                    at(4, 18),
                    "`name` is missing in repos.a.ci.jobs[0] (it is required)",
                    None
                ),
            ]
        );
        // Set aside, the wrong value reads as left out; nothing else moves.
        assert_eq!(
            set_aside(text, &found),
            "forge: { _ind: [local] }\nrepos:\n  a:\n    ci: { jobs: [{ run: x }] }\n"
        );
    }

    #[test]
    fn quoted_keys_are_renamed_inside_their_quotes() {
        let text = "worker: { \"max_parallel\": [1] }\nrepos: {}\n";
        let aside = set_aside(text, &shape_problems(&doc(text)));
        assert_eq!(aside, "worker: { \"_ax_parallel\": [1] }\nrepos: {}\n");
    }
}
