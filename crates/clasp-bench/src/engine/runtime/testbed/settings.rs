//! The settings every testbed experiment takes (`scaling`, `placement`, `worker-count`,
//! `validate`, `state-locality`, `coefficients`).

use crate::settings::values::{Apps, Count, DispatchCosts, Time, TimeOrZero};
use crate::{BenchError, Options};
use serde::{Deserialize, Serialize};

/// How workers are started.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum LaunchAs {
    /// Processes of the `clasp` binary (a run leaves nothing behind).
    Processes,
    /// Threads of the bench process.
    Threads,
}

/// The emulated testbed's settings.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct TestbedSettings {
    /// Dispatch-cost regimes.
    pub dispatch_cost: DispatchCosts,
    /// Executor slots per worker.
    pub slots: Count<1, 64>,
    /// Sleeping service time of every operator per record.
    pub exec_time: Time,
    /// Unmeasured time at the start of a run.
    pub warmup: TimeOrZero,
    /// Measured time after the warm-up.
    pub run: Time,
    /// Applications.
    pub apps: Apps,
    /// Worker processes or threads.
    pub launch: LaunchAs,
}

impl TestbedSettings {
    /// One slot, 400 µs, both regimes, runs of 3 + 8 s (quick 1 + 2 s), on `apps`.
    pub fn preset(quick: bool, apps: &[&str]) -> Self {
        Self {
            dispatch_cost: DispatchCosts::Both,
            slots: Count(1),
            exec_time: Time::from_micros(400.0),
            warmup: TimeOrZero::from_secs(if quick { 1.0 } else { 3.0 }),
            run: Time::from_secs(if quick { 2.0 } else { 8.0 }),
            apps: Apps::of(apps),
            launch: LaunchAs::Processes,
        }
    }

    /// Checks what the value types cannot: every application has a generated input.
    pub fn check(&self) -> Result<(), BenchError> {
        for a in &self.apps.0 {
            clasp_apps::inputs::source(a, None)
                .map_err(|e| BenchError::Config(format!("--set apps: {a}: {e}")))?;
        }
        Ok(())
    }

    /// These settings and the experiment's own (`own`) from `opts`, over the presets.
    pub fn read<E>(
        experiment: &str,
        opts: &Options,
        preset: &Self,
        own: &E,
    ) -> Result<(Self, E), BenchError>
    where
        E: Serialize + serde::de::DeserializeOwned,
    {
        let (bed, own) = crate::settings::Scope::new(experiment, opts).two(preset, own)?;
        bed.check()?;
        Ok((bed, own))
    }
}

impl Default for TestbedSettings {
    fn default() -> Self {
        Self::preset(false, &["syn"])
    }
}
