//! What orch's own `git` takes from a clone's configuration: its data, never its commands.
//!
//! A worker can write its clone's configuration (worktrees share `.git/config`; an included
//! file; `config.worktree`) and `.gitattributes`, and every git orch runs there afterwards —
//! a spawn's fetch, a landing, `orch gc`'s `status` — reads them. Naming the dangerous keys
//! (hooks, fsmonitor, filters, textconv, merge drivers, gpg programs, editors, pagers…) is a
//! race against git's next release, so this goes the other way: the keys a clone may set for
//! orch's git are listed ([`KEPT`]: what the repository is, its remotes and branches as data,
//! who commits); every other key the clone's files set is pinned on orch's command line to a
//! value that runs nothing (command-line values win over files), and the few keys a
//! command-line value cannot undo are refused with the key and the file named. git's own
//! `config --list --includes` reads the files, so includes and conditional includes are seen
//! as git sees them.
//!
//! git2 (libgit2), which orch uses for everything local, runs no configured program: no
//! hooks, no external filter drivers, no fsmonitor.

/// Keys a clone's configuration keeps for orch's git (`*` one subsection): none names a
/// program. Keys are compared as git prints them: section and name lower-case.
const KEPT: &[&str] = &[
    "core.repositoryformatversion",
    "core.filemode",
    "core.bare",
    "core.logallrefupdates",
    "core.ignorecase",
    "core.precomposeunicode",
    "core.symlinks",
    "core.autocrlf",
    "core.eol",
    "core.safecrlf",
    "core.quotepath",
    "core.checkstat",
    "core.trustctime",
    "core.sparsecheckout",
    "core.sparsecheckoutcone",
    "core.splitindex",
    "core.untrackedcache",
    "core.commitgraph",
    "core.multipackindex",
    "extensions.*",
    "remote.*.url",
    "remote.*.pushurl",
    "remote.*.fetch",
    "remote.*.push",
    "remote.*.mirror",
    "remote.*.tagopt",
    "remote.*.prune",
    "remote.*.prunetags",
    "remote.*.skipdefaultupdate",
    "remote.*.skipfetchall",
    "remote.*.promisor",
    "remote.*.partialclonefilter",
    // orch's own fetch and push name the remote's programs on their command line
    // (`--upload-pack`, `--receive-pack`), which wins over these; a worker of another account
    // relays its transport through them in its own clone.
    "remote.*.uploadpack",
    "remote.*.receivepack",
    "branch.*.remote",
    "branch.*.merge",
    "branch.*.pushremote",
    "branch.*.rebase",
    "branch.*.description",
    "user.name",
    "user.email",
    "init.defaultbranch",
    // Already read by git as the file is read: pinning them would do nothing but fail (a
    // command-line include must be absolute). What they include is listed key by key.
    "include.path",
    "includeif.*.path",
];

/// Keys whose file values a command-line value cannot undo: each value is another rule
/// (`url.<base>.insteadOf`: an added empty one would rewrite every URL).
const REFUSED: &[&str] = &["url.*.insteadof", "url.*.pushinsteadof"];

/// One key to set on orch's git command line (`GIT_CONFIG_KEY_<n>`/`GIT_CONFIG_VALUE_<n>`:
/// no quoting, a subsection may hold `=`).
pub type Pin = (String, String);

/// From `git config --list --show-scope --includes -z` output: the pins that neutralise what
/// the clone's own files (scopes `local` and `worktree`) set outside [`KEPT`], or why orch's
/// git must not run there at all.
pub fn pins(listing: &[u8]) -> Result<Vec<Pin>, String> {
    let mut out: Vec<Pin> = Vec::new();
    let mut fields = listing.split(|b| *b == 0);
    while let (Some(scope), Some(entry)) = (fields.next(), fields.next()) {
        if !matches!(scope, b"local" | b"worktree") {
            continue;
        }
        let entry = String::from_utf8_lossy(entry);
        // A key alone (no newline) is a boolean written without a value: true.
        let (key, value) = match entry.split_once('\n') {
            Some((k, v)) => (k, Some(v)),
            None => (entry.as_ref(), None),
        };
        if REFUSED.iter().any(|p| matches(p, key)) {
            return Err(format!(
                "its configuration ({scope}) sets `{key}`, which would redirect orch's own git and which a command-line value cannot undo; remove it (`git config --{scope} --unset-all {key}`) or set it in your user configuration instead",
                scope = String::from_utf8_lossy(scope),
            ));
        }
        if KEPT.iter().any(|p| matches(p, key)) || value.is_some_and(runs_nothing) {
            continue;
        }
        if !out.iter().any(|(k, _)| k == key) {
            // Empty: no program for a command key, false for a boolean, no list entry for
            // a list git resets on an empty value.
            out.push((key.to_string(), String::new()));
        }
    }
    Ok(out)
}

/// A value that cannot name a program orch would run: a number (with git's unit suffix) or
/// a boolean that turns something off. (`true` could: `filter.x.clean = true` would empty
/// every file it cleans.)
fn runs_nothing(value: &str) -> bool {
    let digits = value
        .strip_suffix(['k', 'K', 'm', 'M', 'g', 'G'])
        .unwrap_or(value);
    let digits = digits.strip_prefix(['-', '+']).unwrap_or(digits);
    (!digits.is_empty() && digits.bytes().all(|b| b.is_ascii_digit()))
        || matches!(value.to_ascii_lowercase().as_str(), "false" | "no" | "off")
}

/// Whether `key` (`section.sub.section.name` as git prints it) matches `pattern`, whose `*`
/// stands for a whole subsection (which may itself hold dots).
fn matches(pattern: &str, key: &str) -> bool {
    match pattern.split_once(".*.") {
        None => match pattern.strip_suffix(".*") {
            Some(section) => key
                .strip_prefix(section)
                .is_some_and(|rest| rest.starts_with('.') && !rest[1..].contains('.')),
            None => key == pattern,
        },
        Some((section, name)) => key
            .strip_prefix(section)
            .and_then(|rest| rest.strip_prefix('.'))
            .and_then(|rest| rest.rsplit_once('.'))
            .is_some_and(|(sub, n)| !sub.is_empty() && n == name),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn listing(entries: &[(&str, &str)]) -> Vec<u8> {
        let mut out = Vec::new();
        for (scope, entry) in entries {
            out.extend_from_slice(scope.as_bytes());
            out.push(0);
            out.extend_from_slice(entry.as_bytes());
            out.push(0);
        }
        out
    }

    #[test]
    fn every_key_outside_the_data_a_clone_may_keep_is_pinned_to_nothing() {
        let l = listing(&[
            ("global", "core.editor\nvim"),
            ("local", "core.repositoryformatversion\n0"),
            ("local", "core.bare\nfalse"),
            ("local", "remote.orch.url\n/srv/forge/core.git"),
            ("local", "remote.Or.g.fetch\n+refs/heads/*:refs/remotes/x/*"),
            ("local", "filter.x.clean\nsh -c evil"),
            ("local", "filter.x.required"),
            ("worktree", "diff.x.textconv\nevil"),
            ("local", "core.fsmonitor\n/tmp/evil"),
            ("local", "gc.auto\n0"),
            ("local", "core.bigfilethreshold\n512m"),
            ("local", "pull.rebase\ntrue"),
            ("local", "filter.x.clean\nother"),
            ("local", "filter.a=b.smudge\nevil"),
            ("command", "core.hookspath\n/dev/null"),
        ]);
        let pins = pins(&l).unwrap();
        let keys: Vec<&str> = pins.iter().map(|(k, _)| k.as_str()).collect();
        assert_eq!(
            keys,
            [
                "filter.x.clean",
                "filter.x.required",
                "diff.x.textconv",
                "core.fsmonitor",
                "pull.rebase",
                "filter.a=b.smudge"
            ]
        );
        assert!(pins.iter().all(|(_, v)| v.is_empty()));
    }

    #[test]
    fn a_url_rewrite_in_the_clone_is_refused_with_its_key() {
        let l = listing(&[("local", "url.file:///tmp/evil.insteadof\n/srv/forge/")]);
        let e = pins(&l).unwrap_err();
        assert!(e.contains("url.file:///tmp/evil.insteadof"), "{e}");
        // In the user's own configuration it is theirs to set.
        let l = listing(&[("global", "url.https://x/.insteadof\ngh:")]);
        assert_eq!(pins(&l).unwrap(), Vec::<Pin>::new());
    }

    #[test]
    fn patterns_match_whole_subsections() {
        assert!(matches("remote.*.url", "remote.a.b.url"));
        assert!(!matches("remote.*.url", "remote.url"));
        assert!(!matches("remote.*.url", "remote.x.urls"));
        assert!(matches("extensions.*", "extensions.objectformat"));
        assert!(!matches("extensions.*", "extensions.a.b"));
        assert!(matches("core.bare", "core.bare"));
        assert!(!matches("core.bare", "core.barex"));
    }
}
