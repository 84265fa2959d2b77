//! Helpers shared by the unit tests.

use clasp_core::placement::{OperatorPlacement, Placement, Share};
use clasp_core::{Pipeline, WorkerId};
use std::path::PathBuf;

/// A pipeline from the repository's `pipelines/` folder.
pub fn pipeline(name: &str) -> Pipeline {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../pipelines").join(name);
    clasp_core::spec::load(&path).expect("the repository's pipelines are valid")
}

/// Every operator split evenly over `workers` workers with `instances` instances each.
pub fn spread_placement(p: &Pipeline, workers: u32, instances: u32) -> Placement {
    Placement {
        workers,
        operators: p
            .operators
            .iter()
            .map(|o| OperatorPlacement {
                operator: o.id,
                demand: 0.0,
                shares: (0..workers)
                    .map(|w| Share {
                        worker: WorkerId(w),
                        share: 0.0,
                        fraction: 1.0 / f64::from(workers),
                        instances,
                    })
                    .collect(),
            })
            .collect(),
    }
}

/// Every operator split evenly over `workers` workers, 10 instances each.
pub fn even_placement(p: &Pipeline, workers: u32) -> Placement {
    spread_placement(p, workers, 10)
}
