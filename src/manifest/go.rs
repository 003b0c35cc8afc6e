//! Go: `go.mod`'s `module` path and its `require`s (one line or a block); a requirement
//! marked `// indirect` is a dependency's, not the module's own.

use super::{Ecosystem, Manifest, Source};

pub fn read(file: &str, text: &str, m: &mut Manifest) {
    let mut in_require = false;
    for (i, raw) in text.lines().enumerate() {
        let indirect = raw.contains("// indirect");
        let line = raw.split("//").next().unwrap_or("").trim();
        let path = if in_require {
            if line.starts_with(')') {
                in_require = false;
                continue;
            }
            line.split_whitespace().next()
        } else if let Some(rest) = keyword(line, "module") {
            if let Some(module) = rest.split_whitespace().next() {
                m.name(Ecosystem::Go, unquote(module));
            }
            continue;
        } else if let Some(rest) = keyword(line, "require") {
            if rest.starts_with('(') {
                in_require = true;
                continue;
            }
            rest.split_whitespace().next()
        } else {
            continue;
        };
        if let Some(path) = path.filter(|_| !indirect) {
            m.dep(
                Ecosystem::Go,
                unquote(path),
                Source::line(file, text, i + 1),
            );
        }
    }
}

/// What follows `word` when `line` starts with it as a word.
fn keyword<'a>(line: &'a str, word: &str) -> Option<&'a str> {
    let rest = line.strip_prefix(word)?;
    (rest.is_empty() || rest.starts_with([' ', '\t', '('])).then(|| rest.trim_start())
}

fn unquote(s: &str) -> &str {
    s.trim_matches(['"', '`'])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn module_and_requires() {
        let text = "// the API server, see example.com/org/docs\nmodule example.com/org/api\n\ngo 1.22\n\nrequire example.com/org/core v1.2.0\n\nrequire (\n\tgithub.com/pkg/errors v0.9.1\n\t\"example.com/org/store/v2\" v2.0.0\n\tgolang.org/x/text v0.3.0 // indirect\n)\n\nreplace example.com/org/core => ../core\n";
        let mut m = Manifest::default();
        read("go.mod", text, &mut m);
        assert_eq!(m.names[0].name, "example.com/org/api");
        let deps: Vec<(String, usize)> = m
            .deps
            .iter()
            .map(|d| (d.key.name.clone(), d.source.line))
            .collect();
        assert_eq!(
            deps,
            vec![
                ("example.com/org/core".into(), 6),
                ("github.com/pkg/errors".into(), 9),
                ("example.com/org/store/v2".into(), 10),
            ]
        );
    }
}
