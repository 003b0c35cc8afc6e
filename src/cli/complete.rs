//! Shell completions: clap_complete's static script for the public command tree, plus the values
//! only the organisation knows — repository names (repos.yaml) and worker ids (the state) — which
//! the bash, zsh and fish scripts ask the running orch for through the hidden
//! `orch __complete repos|workers`.
//!
//! clap's own dynamic completion (`CompleteEnv`) is behind the unstable `unstable-dynamic`
//! feature, which the vetted crate list rules out; the few arguments that take a repository or a
//! worker id are found in the command tree itself, so a new command taking `--repo` or `<id>` is
//! completed without touching this file. Elvish and PowerShell get the static script.

use clap::Command;
use clap_complete::Shell;

/// What an argument's value names.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Kind {
    /// A repository of repos.yaml.
    Repos,
    /// A worker id from the state.
    Workers,
}

impl Kind {
    fn word(self) -> &'static str {
        match self {
            Kind::Repos => "repos",
            Kind::Workers => "workers",
        }
    }
}

/// One argument that takes a repository or a worker id.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Slot {
    /// Subcommand words after `orch`, e.g. `["sessions", "show"]`.
    path: Vec<String>,
    /// `Some("repo")` for `--repo`; `None` for the command's first positional.
    long: Option<String>,
    kind: Kind,
}

/// Arguments named `repo` take a repository; the positional `id` takes a worker id (`--id` on
/// `spawn` names a new worker, so it is not one).
fn slots(tree: &Command) -> Vec<Slot> {
    fn walk(cmd: &Command, path: &mut Vec<String>, out: &mut Vec<Slot>) {
        for arg in cmd.get_arguments() {
            let positional = arg.is_positional();
            let kind = match arg.get_id().as_str() {
                "repo" => Kind::Repos,
                "id" if positional => Kind::Workers,
                _ => continue,
            };
            // Only a command's first positional is completed (all of ours have one).
            if positional && cmd.get_positionals().next().map(|a| a.get_id()) != Some(arg.get_id())
            {
                continue;
            }
            out.push(Slot {
                path: path.clone(),
                long: arg.get_long().map(str::to_string),
                kind,
            });
        }
        for sub in cmd.get_subcommands().filter(|s| !s.is_hide_set()) {
            path.push(sub.get_name().to_string());
            walk(sub, path, out);
            path.pop();
        }
    }
    let mut out = Vec::new();
    walk(tree, &mut Vec::new(), &mut out);
    out
}

/// Every subcommand path of the tree, e.g. `ci`, `ci/status`.
fn paths(cmd: &Command, prefix: &str, out: &mut Vec<String>) {
    for sub in cmd.get_subcommands().filter(|s| !s.is_hide_set()) {
        let p = format!("{prefix}/{}", sub.get_name());
        out.push(p.clone());
        paths(sub, &p, out);
    }
}

/// The completion script for `shell`: clap's, with the dynamic values wired in.
pub fn script(shell: Shell, tree: &mut Command) -> String {
    let mut buf = Vec::new();
    clap_complete::generate(shell, tree, "orch", &mut buf);
    let base = String::from_utf8_lossy(&buf).into_owned();
    let slots = slots(tree);
    match shell {
        Shell::Bash => bash(base, tree, &slots),
        Shell::Zsh => zsh(base),
        Shell::Fish => fish(base, &slots),
        _ => base,
    }
}

fn bash(base: String, tree: &Command, slots: &[Slot]) -> String {
    let mut all = Vec::new();
    paths(tree, "orch", &mut all);
    let known = all
        .iter()
        .map(|p| format!("\"{p}\""))
        .collect::<Vec<_>>()
        .join("|");
    let mut cases = String::new();
    for kind in [Kind::Repos, Kind::Workers] {
        let pats: Vec<String> = slots
            .iter()
            .filter(|s| s.kind == kind)
            .map(|s| {
                let path = std::iter::once("orch")
                    .chain(s.path.iter().map(String::as_str))
                    .collect::<Vec<_>>()
                    .join("/");
                match &s.long {
                    Some(long) => format!("\"{path}|--{long}\""),
                    // The first positional: the word before it is the subcommand's own name.
                    None => format!("\"{path}|{}\"", s.path.last().map_or("", |w| w.as_str())),
                }
            })
            .collect();
        if !pats.is_empty() {
            cases.push_str(&format!(
                "        {}) kind={} ;;\n",
                pats.join("|"),
                kind.word()
            ));
        }
    }
    // clap registers `_orch`; ours answers repository and worker arguments and hands every other
    // word to it.
    let base = match base.rfind("if [[ \"${BASH_VERSINFO[0]}\"") {
        Some(at) => base[..at].trim_end().to_string(),
        None => base,
    };
    format!(
        r#"{base}

_orch_dynamic() {{
    local cur="${{COMP_WORDS[COMP_CWORD]}}" prev="" path="orch" kind="" w i
    (( COMP_CWORD > 0 )) && prev="${{COMP_WORDS[COMP_CWORD-1]}}"
    for (( i = 1; i < COMP_CWORD; i++ )); do
        w="${{COMP_WORDS[i]}}"
        case "$path/$w" in
            {known}) path="$path/$w" ;;
        esac
    done
    case "$path|$prev" in
{cases}    esac
    if [[ -n $kind && $cur != -* ]]; then
        local IFS=$'\n'
        COMPREPLY=($(compgen -W "$("${{COMP_WORDS[0]}}" __complete "$kind" 2>/dev/null)" -- "$cur"))
        return 0
    fi
    _orch "$@"
}}

if [[ "${{BASH_VERSINFO[0]}}" -eq 4 && "${{BASH_VERSINFO[1]}}" -ge 4 || "${{BASH_VERSINFO[0]}}" -gt 4 ]]; then
    complete -F _orch_dynamic -o nosort -o bashdefault -o default orch
else
    complete -F _orch_dynamic -o bashdefault -o default orch
fi
"#
    )
}

fn zsh(base: String) -> String {
    let helpers = r#"_orch_repos() {
    local -a values
    values=(${(f)"$(${words[1]} __complete repos 2>/dev/null)"})
    compadd -a values
}
_orch_workers() {
    local -a values
    values=(${(f)"$(${words[1]} __complete workers 2>/dev/null)"})
    compadd -a values
}

"#;
    let replaced = base
        .replace(":REPO:_default'", ":REPO:_orch_repos'")
        .replace("':repo:_default'", "':repo:_orch_repos'")
        .replace("':id:_default'", "':id:_orch_workers'");
    // The helpers go before the file's last statement, which runs `_orch` when the file is
    // autoloaded as a function.
    match replaced.rfind("if [ \"$funcstack[1]\" = \"_orch\" ]") {
        Some(at) => format!("{}{helpers}{}", &replaced[..at], &replaced[at..]),
        None => format!("{helpers}{replaced}"),
    }
}

fn fish(mut base: String, slots: &[Slot]) -> String {
    base.push('\n');
    for s in slots {
        let cond = match s.path.as_slice() {
            [top] => format!("__fish_orch_using_subcommand {top}"),
            [top, rest @ ..] => format!(
                "__fish_orch_using_subcommand {top}; and __fish_seen_subcommand_from {}",
                rest.join(" ")
            ),
            [] => "__fish_orch_needs_command".to_string(),
        };
        let what = match &s.long {
            Some(long) => format!("-l {long} -x"),
            None => "-f".to_string(),
        };
        base.push_str(&format!(
            "complete -c orch -n \"{cond}\" {what} -a \"(orch __complete {})\"\n",
            s.kind.word()
        ));
    }
    base
}

/// How many ended workers (the most recent) a completion offers.
const COMPLETED_ENDED: usize = 200;

/// `orch __complete KIND`: the values, one per line; nothing (and exit 0) where there are none or
/// the organisation cannot be read — a completion never prints an error or creates state.
pub fn values(ctx: &super::Ctx, kind: Kind) -> i32 {
    let Ok(config) = ctx.load_config() else {
        return 0;
    };
    let out: Vec<String> = match kind {
        Kind::Repos => config.repos.iter().map(|r| r.name.clone()).collect(),
        Kind::Workers => match ctx.existing_store(&config) {
            // Live workers and the most recently ended: a completion never reads the history.
            Ok(Some(mut store)) => store
                .read(|tx| {
                    use crate::store::workers as ws;
                    let mut all = ws::live_workers(tx)?;
                    all.extend(ws::ended_workers(
                        tx,
                        &ws::HistoryFilter::default(),
                        None,
                        Some(COMPLETED_ENDED),
                    )?);
                    Ok(all)
                })
                .map(|ws| ws.into_iter().map(|w| w.id).collect())
                .unwrap_or_default(),
            _ => Vec::new(),
        },
    };
    for v in out {
        println!("{v}");
    }
    0
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn repository_and_worker_arguments_are_found_in_the_tree() {
        let tree = crate::cli::completion_command();
        let found = slots(&tree);
        let has = |path: &[&str], long: Option<&str>, kind: Kind| {
            found
                .iter()
                .any(|s| s.path == path && s.long.as_deref() == long && s.kind == kind)
        };
        assert!(has(&["spawn"], Some("repo"), Kind::Repos), "{found:?}");
        assert!(has(&["can-spawn"], None, Kind::Repos), "{found:?}");
        assert!(
            has(&["ci", "status"], Some("repo"), Kind::Repos),
            "{found:?}"
        );
        assert!(has(&["cancel"], None, Kind::Workers), "{found:?}");
        assert!(has(&["sessions", "show"], None, Kind::Workers), "{found:?}");
        // `spawn --id` names a new worker: not completed from the state.
        assert!(
            !found.iter().any(|s| s.long.as_deref() == Some("id")),
            "{found:?}"
        );
    }

    #[test]
    fn zsh_and_fish_ask_orch_for_the_values() {
        let mut tree = crate::cli::completion_command();
        let b = script(Shell::Bash, &mut tree);
        assert_eq!(b.matches("complete -F").count(), 2, "{b}");
        assert!(!b.contains("complete -F _orch "), "{b}");
        let z = script(Shell::Zsh, &mut tree);
        assert!(z.contains(":REPO:_orch_repos'"));
        assert!(z.contains("':id:_orch_workers'"));
        assert!(z.find("_orch_repos() {").unwrap() < z.rfind("if [ \"$funcstack[1]\"").unwrap());
        let f = script(Shell::Fish, &mut tree);
        assert!(f.contains(
            "complete -c orch -n \"__fish_orch_using_subcommand sessions; and __fish_seen_subcommand_from show\" -f -a \"(orch __complete workers)\""
        ), "{f}");
    }
}
