//! `sessions`: the clasp command line with the bundled applications and `sessions.sessionize`.

fn main() -> std::process::ExitCode {
    let mut registry = clasp::bundled_registry();
    clasp_example_sessions::register(&mut registry);
    clasp::main_with(registry)
}
