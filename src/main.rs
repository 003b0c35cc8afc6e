fn main() {
    let args: Vec<String> = std::env::args().collect();
    // The pid the store records in lock history: this process's as the host sees it (it may
    // run in a worker's PID namespace), which only containment knows how to read.
    orch::store::set_writer_pid(orch::pidns::host_pid());
    // A CLI whose output is piped into `head` should end quietly, not panic: restore the
    // default SIGPIPE disposition that the Rust runtime replaces with "ignore". Not in the
    // long-lived processes that write to no one's pipe but hold database sessions (a
    // supervisor, the local forge's hook and runner): a session the server dropped must be a
    // write error there, never a silent kill. (Their children get the default back:
    // `process::spawn_in_group`, and every other orch process sets it here.)
    // (A supervisor's argv carries global options before `__supervise`.)
    let background = args.get(1).map(String::as_str) == Some(orch::forge::local::INTERNAL_COMMAND)
        || args.iter().skip(1).any(|a| a == "__supervise");
    if !background {
        // SAFETY: called first thing in main, before any other thread exists.
        unsafe {
            libc::signal(libc::SIGPIPE, libc::SIG_DFL);
        }
    }
    // No other process of this user may read this one's memory, environment or descriptors
    // (/proc/<pid>/mem, environ, fd) or ptrace it: workers run as the same user, and orch
    // holds the forge token. Reset by exec, so workers are unaffected.
    let _ = rustix::process::set_dumpable_behavior(rustix::process::DumpableBehavior::NotDumpable);
    // A worker of another account (`worker.user`) owns its clone, which orch reads with
    // libgit2: ownership is no reason to refuse it (orch's git never runs what a repository's
    // configuration names; see gitops.rs).
    // SAFETY: set once, before any other thread exists or any repository is opened.
    unsafe {
        let _ = git2::opts::set_verify_owner_validation(false);
    }
    // The local forge's git hook and job runner call back into this binary with a fixed argv
    // shape that is not part of the user-facing CLI.
    if args.get(1).map(String::as_str) == Some(orch::forge::local::INTERNAL_COMMAND) {
        std::process::exit(orch::forge::local::internal_main(&args[2..]));
    }
    if args.get(1).map(String::as_str) == Some(orch::guard::GUARD_COMMAND) {
        std::process::exit(orch::guard::guard_main(&args[2..]));
    }
    if args.get(1).map(String::as_str) == Some(orch::report_wire::RELAY_COMMAND) {
        std::process::exit(orch::report_wire::relay_main(&args[2..]));
    }
    if args.get(1).map(String::as_str) == Some(orch::pidns::INIT_COMMAND) {
        std::process::exit(orch::pidns::init_main(&args[2..]));
    }
    std::process::exit(orch::cli::main());
}
