//! Temporary dispatcher (branch `localforge`): only the hidden local-forge commands. The real
//! CLI keeps this argv shape (`orch __local-forge …`) and calls the same function.

fn main() {
    let args: Vec<String> = std::env::args().collect();
    if args.get(1).map(String::as_str) == Some(orch::forge::local::INTERNAL_COMMAND) {
        std::process::exit(orch::forge::local::internal_main(&args[2..]));
    }
    eprintln!("orch: this build only has `orch __local-forge …`");
    std::process::exit(2);
}
