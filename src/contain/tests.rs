//! Unit tests of the pure parts of containment (and two looks at this process).

use super::*;

const MOUNTINFO: &str = "\
31 23 0:28 / /sys/fs/cgroup rw,relatime - tmpfs tmpfs rw,mode=755
32 31 0:29 / /sys/fs/cgroup/cpu rw,relatime - cgroup cgroup rw,cpu
41 31 0:38 / /sys/fs/cgroup/unified rw,relatime - cgroup2 cgroup2 rw
";

#[test]
fn finds_the_cgroup2_mount() {
    let (mount, root) = cgroup2_mount(MOUNTINFO).unwrap();
    assert_eq!(mount, Path::new("/sys/fs/cgroup/unified"));
    assert_eq!(root, "/");
    let pure = "29 23 0:26 / /sys/fs/cgroup rw,nosuid shared:4 - cgroup2 cgroup2 rw,nsdelegate\n";
    assert_eq!(cgroup2_mount(pure).unwrap().0, Path::new("/sys/fs/cgroup"));
    let escaped = "29 23 0:26 /sub /my\\040cg rw - cgroup2 none rw\n";
    assert_eq!(
        cgroup2_mount(escaped).unwrap(),
        (PathBuf::from("/my cg"), "/sub".to_string())
    );
    assert!(cgroup2_mount("31 23 0:28 / /sys/fs/cgroup rw - tmpfs tmpfs rw\n").is_none());
}

#[test]
fn reads_the_unified_path() {
    assert_eq!(
        unified_path("4:memory:/x\n0::/user.slice/a.scope\n").as_deref(),
        Some("/user.slice/a.scope")
    );
    assert_eq!(unified_path("0::/\n").as_deref(), Some("/"));
    assert!(unified_path("4:memory:/x\n").is_none());
}

#[test]
fn maps_a_cgroup_path_to_its_directory() {
    let m = Path::new("/sys/fs/cgroup");
    assert_eq!(cgroup_dir(m, "/", "/").unwrap(), m);
    assert_eq!(cgroup_dir(m, "/", "/a/b").unwrap(), m.join("a/b"));
    // A mount of a subtree (a cgroup namespace's view, a bind mount).
    assert_eq!(cgroup_dir(m, "/a", "/a/b").unwrap(), m.join("b"));
    assert_eq!(cgroup_dir(m, "/a", "/a").unwrap(), m);
    assert!(cgroup_dir(m, "/a", "/ab/c").is_none());
    assert!(cgroup_dir(m, "/", "/a/../../etc").is_none());
}

#[test]
fn tags_are_stable_and_distinct() {
    let a = state_dir_tag(Path::new("/srv/org/sessions"));
    assert_eq!(a, state_dir_tag(Path::new("/srv/org/sessions")));
    assert_ne!(a, state_dir_tag(Path::new("/srv/org2/sessions")));
    assert!(is_tag(&a), "{a}");
    assert_eq!(a.len(), TAG_PREFIX.len() + 16);
    // FNV-1a 64 of the empty input is its offset basis: the function is the standard one.
    assert_eq!(state_dir_tag(Path::new("")), "orch-cbf29ce484222325");
}

#[test]
fn knows_a_worker_cgroup_and_its_outside() {
    let tag = state_dir_tag(Path::new("/s"));
    assert_eq!(
        outside_worker_cgroup(&format!("/{tag}/alpha-0a1b2c3d")).as_deref(),
        Some("/")
    );
    assert_eq!(
        outside_worker_cgroup(&format!("/user.slice/x.scope/{tag}/alpha-0a1b2c3d/deeper"))
            .as_deref(),
        Some("/user.slice/x.scope")
    );
    assert!(outside_worker_cgroup(&format!("/{tag}")).is_none());
    assert!(outside_worker_cgroup("/user.slice/orch-nothex/alpha").is_none());
    assert!(outside_worker_cgroup("/").is_none());
}

fn p(pid: i32, ppid: i32) -> Proc {
    Proc {
        pid,
        ppid,
        pgrp: pid,
        session: pid,
        dead: false,
        start_ticks: 0,
    }
}

#[test]
fn walks_descendants_and_skips_helpers() {
    // 10 guard ─ 11 worker ─ 12 child ─ 13 grandchild
    //          ├ 20 daemon (reparented to the subreaper guard) ─ 21
    //          └ 30 helper ─ 31 its job
    // 40 unrelated ─ 41
    let procs = [
        p(10, 1),
        p(11, 10),
        p(12, 11),
        p(13, 12),
        p(20, 10),
        p(21, 20),
        p(30, 10),
        p(31, 30),
        p(40, 1),
        p(41, 40),
    ];
    let mut got: Vec<i32> = descendants(&procs, 10, |q| q.pid == 30)
        .iter()
        .map(|q| q.pid)
        .collect();
    got.sort();
    assert_eq!(got, vec![11, 12, 13, 20, 21]);
    assert!(descendants(&procs, 13, |_| false).is_empty());
    // A cycle in a racy snapshot does not loop forever.
    let cyc = [p(2, 3), p(3, 2)];
    assert_eq!(descendants(&cyc, 2, |_| false).len(), 1);
}

#[test]
fn this_process_is_not_an_orch_helper() {
    let me = std::process::id() as i32;
    let st = proc_stat(me).unwrap();
    let mine = Proc {
        pid: me,
        ppid: st.ppid,
        pgrp: st.pgrp,
        session: me, // even if it led its session, its argv is not an orch helper's
        dead: false,
        start_ticks: st.start_ticks,
    };
    assert!(!is_orch_helper(&mine));
    assert!(now_ticks() >= st.start_ticks);
}

#[test]
fn uptime_is_read_without_rounding_down() {
    assert_eq!(uptime_ticks("4099.56", 100), Some(409956));
    assert_eq!(uptime_ticks("4099.5", 100), Some(409950));
    assert_eq!(uptime_ticks("12", 100), Some(1200));
    assert_eq!(uptime_ticks("1.999", 1000), Some(1999));
    assert_eq!(uptime_ticks("x.5", 100), None);
}
