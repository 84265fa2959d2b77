//! The `clasp` command: one binary, one subcommand per task, with the bundled applications.

fn main() -> std::process::ExitCode {
    clasp::main_with(clasp::bundled_registry())
}
