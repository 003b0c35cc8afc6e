//! The graph drawn for people and tools: DOT and Mermaid.

use super::*;

impl RepoGraph {
    /// Graphviz DOT, edges from dependency to dependent. Every id is quoted (and escaped), so
    /// no repository name is read as a keyword (`node`, `graph`, `edge`, …) or split at a `.`
    /// or `-`.
    pub fn to_dot(&self) -> String {
        let q = |n: &str| format!("\"{}\"", n.replace('\\', "\\\\").replace('"', "\\\""));
        let mut s = String::from("digraph repos {\n  rankdir=BT;\n");
        for name in &self.names {
            s.push_str(&format!("  {};\n", q(name)));
        }
        for name in &self.names {
            for d in self.direct_deps(name) {
                s.push_str(&format!("  {} -> {};\n", q(name), q(&d)));
            }
        }
        s.push_str("}\n");
        s
    }

    /// Mermaid flowchart, arrows from a repository to what it depends on. Node ids are
    /// generated (`r0`, `r1`, … in the order of the names), never derived from a name: two
    /// names that differ only in punctuation (`core.x`, `core-x`) stay two nodes, and no
    /// name becomes a reserved word (`end`, `graph`, `subgraph`, `style`, `class`, `click`).
    /// The names are the quoted labels.
    pub fn to_mermaid(&self) -> String {
        let ids: HashMap<&str, String> = self
            .names
            .iter()
            .enumerate()
            .map(|(i, n)| (n.as_str(), format!("r{i}")))
            .collect();
        // Mermaid's own escape for a quote inside a quoted label.
        let label = |n: &str| n.replace('"', "#quot;");
        let mut s = String::from("graph BT\n");
        for name in &self.names {
            s.push_str(&format!("  {}[\"{}\"]\n", ids[name.as_str()], label(name)));
        }
        for name in &self.names {
            for d in self.direct_deps(name) {
                if let Some(to) = ids.get(d.as_str()) {
                    s.push_str(&format!("  {} --> {to}\n", ids[name.as_str()]));
                }
            }
        }
        s
    }
}
