//! Wrong-typed values in repos.yaml (`deps: 5`, `max_parallel: "x"`, a repository given as a
//! list), every one reported with its position — and then set aside, so that the typed read
//! and the validation of everything else still run in the same `orch check`.
//!
//! The document's key tree ([`Node`]) is checked against the shape each known key expects;
//! unknown keys are [`super::raw::unknown_keys`]'s to report. A wrong value is set aside by
//! renaming its key in the text (one character, so every other position stays the same): the
//! typed shapes ignore keys they do not know.

use super::raw::{self, Node, Scalar};
use crate::yaml::Pos;
use serde_saphyr::Spanned;

/// What a key's value must be.
#[derive(Debug)]
pub(super) enum Shape {
    /// Any scalar (names, paths, durations: their own checks say more).
    Text,
    Int,
    /// An integer or a decimal number.
    Number,
    List(&'static Shape),
    Map(&'static [Field]),
    /// `repos:`: repository name → its settings.
    Repos,
    /// `alerts:`: a list of sinks, or a mapping with `sinks` and delivery settings.
    Alerts,
}

/// A known key, the shape of its value, and whether it may be left empty (`key:` or `~`).
pub(super) type Field = (&'static str, Shape, bool);

const TEXTS: Shape = Shape::List(&Shape::Text);

pub(super) const FORGE: &[Field] = &[
    ("kind", Shape::Text, false),
    ("url", Shape::Text, true),
    ("owner", Shape::Text, true),
    ("token_env", Shape::Text, true),
    ("request_timeout", Shape::Text, true),
    ("give_up_after", Shape::Text, true),
    ("max_concurrent_runs", Shape::Int, true),
    ("lost_hook_grace", Shape::Text, true),
];
pub(super) const CI: &[Field] = &[
    ("sync_job", Shape::Text, true),
    ("required_jobs", TEXTS, true),
    ("start_timeout", Shape::Text, true),
    ("poll_interval", Shape::Text, true),
];
pub(super) const WORKER: &[Field] = &[
    ("agent", Shape::Text, true),
    ("command", TEXTS, true),
    ("max_parallel", Shape::Int, true),
    ("env_passthrough", TEXTS, true),
    ("max_respawns", Shape::Int, true),
    ("stop_grace", Shape::Text, true),
    ("max_cost_usd", Shape::Number, true),
    ("max_tokens", Shape::Int, true),
];
pub(super) const WEBHOOK: &[Field] = &[("url_env", Shape::Text, false)];
pub(super) const SINK: &[Field] = &[
    ("webhook", Shape::Map(WEBHOOK), true),
    ("command", TEXTS, true),
    ("min_severity", Shape::Text, true),
    ("timeout", Shape::Text, true),
];
pub(super) const ALERTS: &[Field] = &[
    ("sinks", Shape::List(&Shape::Map(SINK)), false),
    ("dedup_window", Shape::Text, true),
    ("retry_initial", Shape::Text, true),
    ("max_attempts", Shape::Int, true),
];
pub(super) const JOB: &[Field] = &[
    ("name", Shape::Text, false),
    ("run", Shape::Text, false),
    ("needs", TEXTS, false),
    ("timeout", Shape::Text, true),
];
pub(super) const REPO_CI: &[Field] = &[("jobs", Shape::List(&Shape::Map(JOB)), false)];
pub(super) const REPO: &[Field] = &[
    ("path", Shape::Text, true),
    ("branch", Shape::Text, true),
    ("deps", TEXTS, false),
    ("ci", Shape::Map(REPO_CI), true),
];
pub(super) const TOP: &[Field] = &[
    ("forge", Shape::Map(FORGE), true),
    ("ci", Shape::Map(CI), true),
    ("worker", Shape::Map(WORKER), true),
    ("alerts", Shape::Alerts, true),
    ("repos", Shape::Repos, false),
];

/// One wrong-typed value: where it is, what is wrong, and the key to rename so that the
/// typed read skips it (`None`: nothing to rename — a repository set aside by the typed read
/// itself, or `repos:` whose absence the typed read reports).
#[derive(Debug)]
pub(super) struct WrongType {
    pub(super) pos: Option<Pos>,
    pub(super) message: String,
    pub(super) set_aside: Option<Pos>,
    /// The typed read cannot go on without it (`repos:` not a mapping).
    pub(super) stops: bool,
}

/// Every wrong-typed value of the document, in document order.
pub(super) fn wrong_types(doc: &Spanned<Node>) -> Vec<WrongType> {
    let mut out = Vec::new();
    if let Node::Map(_) = &doc.value {
        check_map(doc, TOP, "", None, &mut out);
    }
    out
}

/// `text` with the keys of `wrong` renamed (their first character replaced), so that the
/// typed read ignores those entries; every line and column stays where it was.
pub(super) fn set_aside(text: &str, wrong: &[WrongType]) -> String {
    let keys: Vec<Pos> = wrong.iter().filter_map(|w| w.set_aside).collect();
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
    out: &mut Vec<WrongType>,
) {
    let Node::Map(entries) = &node.value else {
        wrong(node, path, "a mapping", key, out);
        return;
    };
    for (k, value) in entries {
        let name = k.value.0.as_str();
        let Some((_, shape, may_be_empty)) = fields.iter().find(|(n, _, _)| *n == name) else {
            continue; // unknown: reported by `unknown_keys`
        };
        let path = if path.is_empty() {
            name.to_string()
        } else {
            format!("{path}.{name}")
        };
        if matches!(value.value, Node::Scalar(Scalar::Null)) {
            if !may_be_empty {
                let expected = describe_shape(shape);
                let set_aside = (name != "repos").then(|| raw::pos(k)).flatten();
                out.push(WrongType {
                    pos: raw::pos(value).or(raw::pos(k)),
                    message: format!("{path} is empty; it must be {expected}"),
                    set_aside,
                    stops: name == "repos",
                });
            }
            continue;
        }
        check(value, shape, &path, raw::pos(k), out);
    }
}

fn check(
    node: &Spanned<Node>,
    shape: &Shape,
    path: &str,
    key: Option<Pos>,
    out: &mut Vec<WrongType>,
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
        Shape::Repos => {
            let Node::Map(entries) = &node.value else {
                // The typed read cannot go on without the repositories.
                wrong(
                    node,
                    path,
                    "a mapping of repository names to their settings",
                    None,
                    out,
                );
                if let Some(w) = out.last_mut() {
                    w.stops = true;
                }
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
            Node::Seq(_) => check(node, &Shape::List(&Shape::Map(SINK)), path, key, out),
            _ => check_map(node, ALERTS, path, key, out),
        },
    }
}

fn wrong(
    node: &Spanned<Node>,
    path: &str,
    expected: &str,
    key: Option<Pos>,
    out: &mut Vec<WrongType>,
) {
    out.push(WrongType {
        pos: raw::pos(node).or(key),
        message: format!("{path} must be {expected}, not {}", found(&node.value)),
        set_aside: key,
        stops: false,
    });
}

fn describe_shape(shape: &Shape) -> String {
    match shape {
        Shape::Text => "a value".into(),
        Shape::Int => "a whole number".into(),
        Shape::Number => "a number".into(),
        Shape::List(item) => format!("a list of {}", plural(item)),
        Shape::Map(_) | Shape::Alerts => "a mapping".into(),
        Shape::Repos => "a mapping of repository names to their settings".into(),
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
            (FORGE, raw::FORGE),
            (CI, raw::CI),
            (WORKER, raw::WORKER),
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
        let found = wrong_types(&doc(text));
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
    fn quoted_keys_are_renamed_inside_their_quotes() {
        let text = "worker: { \"max_parallel\": [1] }\nrepos: {}\n";
        let aside = set_aside(text, &wrong_types(&doc(text)));
        assert_eq!(aside, "worker: { \"_ax_parallel\": [1] }\nrepos: {}\n");
    }
}
