//! The short variants of the fuzz targets, for CI: every target on seeded inputs, the
//! mutator's inputs differ from the corpus and from each other, and a run reports its progress.

use clasp_fuzz::{Mutator, TARGETS, run};

#[test]
fn every_target_takes_seeded_inputs_without_a_crash() {
    for t in TARGETS {
        assert_eq!(run(t, 2_000, 7), 2_000, "{}", t.name);
    }
}

#[test]
fn the_mutator_makes_new_inputs_from_the_corpus() {
    let corpus = vec![b"[pipeline]\nname = \"x\"\n".to_vec()];
    let mut m = Mutator::new(3, corpus.clone());
    let mut seen = std::collections::HashSet::new();
    let mut unchanged = 0;
    let mut input = Vec::new();
    for _ in 0..1000 {
        m.next_input(&mut input);
        unchanged += usize::from(input == corpus[0]);
        seen.insert(input.clone());
    }
    assert!(seen.len() > 900, "{} distinct inputs", seen.len());
    assert!(unchanged < 100, "{unchanged} inputs equal the example");
}

#[test]
fn a_run_reports_its_count_after_every_step() {
    let t = TARGETS.iter().find(|t| t.name == "spec").unwrap();
    let mut seen = Vec::new();
    let ran = clasp_fuzz::run_reporting(t, 1_250, 7, 500, |n| seen.push(n));
    assert_eq!(ran, 1_250);
    assert_eq!(seen, [500, 1_000]);
}
