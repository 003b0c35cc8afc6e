//! Maven: `pom.xml`'s own coordinates (`<groupId>` — or its `<parent>`'s — and
//! `<artifactId>`), each `<dependency>` of `<dependencies>` (not `<dependencyManagement>`'s
//! constraints, not plugins') by `group:artifact`, and `<modules>`. A small reader of
//! elements: comments, processing instructions, CDATA and attributes are skipped.

use super::{Ecosystem, Manifest, Source};

/// What the reader reports, in document order.
#[derive(Debug, PartialEq)]
enum Event<'a> {
    /// An element opens, at this byte offset, under these ancestors.
    Open(String, usize),
    /// An element without child elements: its path (`project/groupId`), text and offset.
    Leaf(String, &'a str, usize),
    Close(String),
}

fn events(text: &str) -> Result<Vec<Event<'_>>, String> {
    let mut out = Vec::new();
    let mut stack: Vec<(&str, usize, bool)> = Vec::new(); // name, content start, has children
    let mut at = 0;
    while let Some(rel) = text[at..].find('<') {
        let start = at + rel;
        let rest = &text[start..];
        let skip_to = |end: &str| {
            rest.find(end)
                .map(|e| start + e + end.len())
                .ok_or_else(|| {
                    format!(
                        "unclosed {} at line {}",
                        &rest[..rest.len().min(9)],
                        line(text, start)
                    )
                })
        };
        if rest.starts_with("<!--") {
            at = skip_to("-->")?;
            continue;
        }
        if rest.starts_with("<![CDATA[") {
            at = skip_to("]]>")?;
            continue;
        }
        if rest.starts_with("<?") {
            at = skip_to("?>")?;
            continue;
        }
        let end = skip_to(">")?;
        let inner = &text[start + 1..end - 1];
        at = end;
        if inner.starts_with('!') {
            continue;
        }
        if let Some(name) = inner.strip_prefix('/') {
            let name = local(name.trim());
            let Some((open, content, has_children)) = stack.pop() else {
                return Err(format!(
                    "</{name}> closes nothing at line {}",
                    line(text, start)
                ));
            };
            if open != name {
                return Err(format!(
                    "</{name}> closes <{open}> at line {}",
                    line(text, start)
                ));
            }
            let path = path_of(&stack, name);
            if !has_children {
                out.push(Event::Leaf(
                    path.clone(),
                    text[content..start].trim(),
                    content,
                ));
            }
            out.push(Event::Close(path));
            continue;
        }
        let self_closing = inner.ends_with('/');
        let name = local(
            inner
                .trim_end_matches('/')
                .split(|c: char| c.is_whitespace())
                .next()
                .unwrap_or(""),
        );
        if let Some(parent) = stack.last_mut() {
            parent.2 = true;
        }
        out.push(Event::Open(path_of(&stack, name), start));
        if self_closing {
            out.push(Event::Close(path_of(&stack, name)));
        } else {
            stack.push((name, end, false));
        }
    }
    Ok(out)
}

/// A name without its namespace prefix.
fn local(name: &str) -> &str {
    name.rsplit(':').next().unwrap_or(name)
}

fn path_of(stack: &[(&str, usize, bool)], name: &str) -> String {
    let mut p: Vec<&str> = stack.iter().map(|(n, _, _)| *n).collect();
    p.push(name);
    p.join("/")
}

fn line(text: &str, offset: usize) -> usize {
    text[..offset].matches('\n').count() + 1
}

const DEPENDENCY: &str = "project/dependencies/dependency";

pub fn read(file: &str, text: &str, m: &mut Manifest) -> Result<(), String> {
    let mut group = None;
    let mut parent_group = None;
    let mut artifact = None;
    // Each dependency: group, artifact, where its element opens.
    let mut deps: Vec<(Option<&str>, Option<&str>, usize)> = Vec::new();
    for e in events(text)? {
        match e {
            Event::Open(p, at) if p == DEPENDENCY => deps.push((None, None, at)),
            Event::Leaf(p, v, _) => match p.as_str() {
                "project/groupId" => group = Some(v),
                "project/parent/groupId" => parent_group = Some(v),
                "project/artifactId" => artifact = Some(v),
                "project/modules/module" => m.members.push(v.to_string()),
                _ => {
                    let last = deps.last_mut();
                    match (p.strip_prefix(DEPENDENCY), last) {
                        (Some("/groupId"), Some(d)) => d.0 = Some(v),
                        (Some("/artifactId"), Some(d)) => d.1 = Some(v),
                        _ => {}
                    }
                }
            },
            _ => {}
        }
    }
    let group = group.or(parent_group);
    if let (Some(g), Some(a)) = (group, artifact) {
        m.name(Ecosystem::Jvm, &format!("{g}:{a}"));
    }
    for (g, a, at) in deps {
        let (Some(g), Some(a)) = (g, a) else { continue };
        let g = match g {
            "${project.groupId}" | "${groupId}" | "${pom.groupId}" => group.unwrap_or(g),
            _ => g,
        };
        // The line of the artifactId: the one that names it.
        let offset = text[at..].find("<artifactId>").map_or(at, |i| at + i);
        m.dep(
            Ecosystem::Jvm,
            &format!("{g}:{a}"),
            Source::at(file, text, offset),
        );
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn coordinates_dependencies_and_modules() {
        let text = r#"<?xml version="1.0" encoding="UTF-8"?>
<project xmlns="http://maven.apache.org/POM/4.0.0">
  <!-- the billing service; uses <artifactId>ledger</artifactId> through core -->
  <parent>
    <groupId>org.acme</groupId>
    <artifactId>acme-parent</artifactId>
  </parent>
  <artifactId>billing</artifactId>
  <description>Billing, on top of org.acme:core</description>
  <modules>
    <module>billing-api</module>
  </modules>
  <dependencyManagement>
    <dependencies>
      <dependency><groupId>org.acme</groupId><artifactId>managed</artifactId></dependency>
    </dependencies>
  </dependencyManagement>
  <dependencies>
    <dependency>
      <groupId>${project.groupId}</groupId>
      <artifactId>core</artifactId>
      <version>${project.version}</version>
    </dependency>
    <dependency>
      <groupId>junit</groupId>
      <artifactId>junit</artifactId>
      <scope>test</scope>
      <exclusions><exclusion><groupId>x</groupId><artifactId>y</artifactId></exclusion></exclusions>
    </dependency>
  </dependencies>
  <build><plugins><plugin><groupId>org.apache</groupId><artifactId>surefire</artifactId></plugin></plugins></build>
</project>
"#;
        let mut m = Manifest::default();
        read("pom.xml", text, &mut m).unwrap();
        assert_eq!(m.names[0].name, "org.acme:billing");
        let deps: Vec<(String, usize)> = m
            .deps
            .iter()
            .map(|d| (d.key.name.clone(), d.source.line))
            .collect();
        assert_eq!(
            deps,
            vec![("org.acme:core".into(), 21), ("junit:junit".into(), 26)]
        );
        assert_eq!(m.deps[0].source.text, "<artifactId>core</artifactId>");
        assert_eq!(m.members, vec!["billing-api"]);
    }

    #[test]
    fn broken_xml_says_where() {
        let mut m = Manifest::default();
        let err = read("pom.xml", "<project>\n<groupId>x</artifactId>", &mut m).unwrap_err();
        assert!(err.contains("line 2"), "{err}");
    }
}
