//! Helpers shared by the unit tests.

use clasp_core::Pipeline;
use clasp_core::placement::Placement;
use std::path::PathBuf;

/// A pipeline from the repository's `pipelines/` folder.
pub fn pipeline(name: &str) -> Pipeline {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../pipelines").join(name);
    clasp_core::spec::load(&path).expect("the repository's pipelines are valid")
}

/// Every operator split evenly over `workers` workers with `instances` instances each.
pub fn spread_placement(p: &Pipeline, workers: u32, instances: u32) -> Placement {
    Placement::even(p, workers, instances)
}

/// Every operator split evenly over `workers` workers, 10 instances each.
pub fn even_placement(p: &Pipeline, workers: u32) -> Placement {
    spread_placement(p, workers, 10)
}
