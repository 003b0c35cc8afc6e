fn main() {
    // A CLI whose output is piped into `head` should end quietly, not panic: restore the
    // default SIGPIPE disposition that the Rust runtime replaces with "ignore".
    // SAFETY: called first thing in main, before any other thread exists.
    unsafe {
        libc::signal(libc::SIGPIPE, libc::SIG_DFL);
    }
    std::process::exit(orch::cli::main());
}
