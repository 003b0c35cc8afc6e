//! The node this process runs on: one host's orch (its state and worktree roots) among those
//! sharing one store. Named by `ORCH_NODE`, else `node.name` of repos.yaml, else the host's
//! name. A lease records its holder's node with its pid: a pid means something only on the
//! node that wrote it, so another node judges that lease by its expiry alone.

use std::sync::OnceLock;

/// Overrides `node.name` (several nodes on one machine, or a shared repos.yaml).
pub const NODE_ENV: &str = "ORCH_NODE";

static CONFIGURED: OnceLock<Option<String>> = OnceLock::new();

/// Records `node.name` of the configuration this process loaded (the first call wins: one
/// process, one node).
pub fn configure(name: Option<&str>) {
    let _ = CONFIGURED.set(name.map(str::to_string));
}

/// This process's node.
pub fn name() -> &'static str {
    static NAME: OnceLock<String> = OnceLock::new();
    NAME.get_or_init(|| {
        if let Ok(v) = std::env::var(NODE_ENV)
            && valid(&v).is_ok()
        {
            return v;
        }
        if let Some(Some(v)) = CONFIGURED.get() {
            return v.clone();
        }
        hostname()
    })
}

/// Where this process's pids mean something: the host's name, its kernel's boot and its PID
/// namespace (`<hostname>/<boot id>/<pid namespace>`). Two processes of one node always share
/// it; two hosts (or two containers, each with PIDs of its own) under one node name do not —
/// and would judge each other's leases by pids that name nothing there.
pub fn place() -> &'static str {
    static PLACE: OnceLock<String> = OnceLock::new();
    PLACE.get_or_init(|| {
        let boot = std::fs::read_to_string("/proc/sys/kernel/random/boot_id")
            .map(|s| s.trim().to_string())
            .unwrap_or_else(|_| "?".into());
        let pidns = std::fs::read_link("/proc/self/ns/pid")
            .map(|p| p.display().to_string())
            .unwrap_or_else(|_| "?".into());
        format!("{}/{boot}/{pidns}", hostname())
    })
}

/// The host's name (the kernel's), or "localhost" when it cannot be read.
pub fn hostname() -> String {
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .ok()
        .map(|s| s.trim().to_string())
        .filter(|s| valid(s).is_ok())
        .unwrap_or_else(|| "localhost".to_string())
}

/// A node name: 1–64 characters of letters, digits, `.`, `-` and `_` (it is shown in tables
/// and written into the store as is).
pub fn valid(name: &str) -> Result<(), String> {
    if name.is_empty() || name.len() > 64 {
        return Err(format!(
            "a node name has 1 to 64 characters, got {}",
            name.len()
        ));
    }
    if let Some(c) = name
        .chars()
        .find(|c| !(c.is_ascii_alphanumeric() || matches!(c, '.' | '-' | '_')))
    {
        return Err(format!(
            "a node name is letters, digits, '.', '-' and '_': {:?} is not allowed",
            c
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_short_and_plain() {
        assert!(valid("build-01.example").is_ok());
        assert!(valid("node_a").is_ok());
        assert!(valid("").is_err());
        assert!(valid(&"x".repeat(65)).is_err());
        assert!(valid("two words").unwrap_err().contains("' '"));
        assert!(valid("a/b").is_err());
    }

    #[test]
    fn the_host_name_is_a_valid_node_name() {
        assert!(valid(&hostname()).is_ok());
    }
}
