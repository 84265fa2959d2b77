//! Fuzz targets that run on the stable toolchain. Each [`Target`] takes arbitrary bytes and
//! must neither panic nor allocate what the bytes announce; [`run`] feeds it seeded inputs —
//! valid examples of its format, mutated byte by byte (flips, insertions, deletions,
//! truncations, splices, interesting integers), and plain random bytes — and counts them.
//!
//! `cargo run --release -p clasp-fuzz -- --inputs 10000000` runs every target; the tests run
//! short variants.

mod mutate;
mod targets;

pub use mutate::Mutator;
pub use targets::{TARGETS, Target};

/// Feeds `target` `inputs` inputs drawn from `seed`; returns how many it ran. A crash is a
/// panic, which unwinds out of here with the input that caused it printed.
pub fn run(target: &Target, inputs: u64, seed: u64) -> u64 {
    run_reporting(target, inputs, seed, u64::MAX, |_| {})
}

/// [`run`], calling `report` with the count of inputs run so far after every `every` of them,
/// so that a long run that is stopped still tells how far it got without a crash.
pub fn run_reporting(
    target: &Target,
    inputs: u64,
    seed: u64,
    every: u64,
    mut report: impl FnMut(u64),
) -> u64 {
    let corpus = (target.corpus)();
    let mut m = Mutator::new(seed, corpus);
    let mut input = Vec::new();
    for n in 0..inputs {
        m.next_input(&mut input);
        let outcome = std::panic::catch_unwind(|| (target.run)(&input));
        if let Err(panic) = outcome {
            eprintln!("{}: input {n} panicked: {:02x?}", target.name, &input);
            std::panic::resume_unwind(panic);
        }
        if (n + 1) % every.max(1) == 0 {
            report(n + 1);
        }
    }
    inputs
}
