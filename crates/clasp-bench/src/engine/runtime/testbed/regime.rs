//! Dispatch-cost regimes: this runtime's native costs, or the paper's emulated on top of them,
//! and the true costs the policies plan with in each.

use crate::settings::values::DispatchCosts;
use clasp_core::stats::Coefficients;
use clasp_runtime::wire::DispatchCost;

/// The paper's dispatch costs (§5.3): α = 38.5 µs per local and β = 275 µs per remote
/// chained request, γ = 51,500 µs per remote destination per second.
pub const PAPER_COST: &str = "local=38.5,remote=275,fanout=51500";

/// γ under native costs: a small nominal value, as no fan-out cost is measurable here.
pub const NATIVE_GAMMA_US: f64 = 100.0;

/// This runtime's own α and β: worker CPU per local and per remote chained request.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct NativeCosts {
    /// α (µs).
    pub alpha_us: f64,
    /// β (µs).
    pub beta_us: f64,
    /// Measured in this run (`clasp bench dispatch`'s measurement), or nominal.
    pub measured: bool,
}

impl NativeCosts {
    /// The nominal planning values of experiments that do not measure them: the order of
    /// magnitude `clasp bench dispatch` reports on this machine (a few hundred ns). Next to
    /// 400 µs executions any value of that order plans the same placements.
    pub const NOMINAL: Self = Self { alpha_us: 0.35, beta_us: 0.6, measured: false };

    /// What a report says about them.
    pub fn describe(&self) -> String {
        format!(
            "native alpha {} us, beta {} us ({}), gamma {NATIVE_GAMMA_US} us/s (nominal)",
            crate::engine::runtime::sig(self.alpha_us),
            crate::engine::runtime::sig(self.beta_us),
            if self.measured {
                "measured at the start of this run, as `clasp bench dispatch` does"
            } else {
                "nominal planning values"
            }
        )
    }
}

/// Which dispatch costs a run has: native, or emulated on top of native.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Regime {
    /// The emulated costs, `None` for native.
    pub cost: Option<DispatchCost>,
}

impl Regime {
    /// This runtime's own costs, nothing emulated.
    pub fn native() -> Self {
        Self { cost: None }
    }

    /// The paper's costs, emulated.
    pub fn paper() -> Self {
        Self { cost: Some(DispatchCost::parse(PAPER_COST).expect("the paper's costs parse")) }
    }

    /// The regimes a `dispatch_cost` setting asks for.
    pub fn all(costs: DispatchCosts) -> Vec<Self> {
        match costs {
            DispatchCosts::Both => vec![Self::native(), Self::paper()],
            DispatchCosts::Native => vec![Self::native()],
            DispatchCosts::Paper => vec![Self::paper()],
            DispatchCosts::Emulated(c) => vec![Self { cost: Some(c) }],
        }
    }

    /// `native`, or `emulated` for a table column.
    pub fn label(&self) -> &'static str {
        if self.cost.is_some() { "emulated" } else { "native" }
    }

    /// What the regime is, for a report's setup lines.
    pub fn describe(&self) -> String {
        match self.cost {
            None => "native dispatch costs (this runtime's own, nothing emulated)".into(),
            Some(c) => format!(
                "EMULATED dispatch costs: local {} us, remote {} us, fanout {} us/s ({:?}), on top of the native ones",
                c.local_us, c.remote_us, c.fanout_us, c.mode
            ),
        }
    }

    /// The true costs of a worker with `slots` sleeping slots given this runtime's `native`
    /// costs: what the policies plan with.
    pub fn coefficients(&self, native: NativeCosts, slots: u32) -> Coefficients {
        let capacity = f64::from(slots) * 1e6;
        let (local, remote, fanout) =
            self.cost.map_or((0.0, 0.0, 0.0), |c| (c.local_us, c.remote_us, c.fanout_us));
        Coefficients {
            alpha: native.alpha_us + local,
            beta: native.beta_us + remote,
            gamma: NATIVE_GAMMA_US + fanout,
            capacity,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn regimes_follow_the_setting() {
        let both = Regime::all(DispatchCosts::Both);
        assert_eq!((both[0].label(), both[1].label()), ("native", "emulated"));
        let c = both[1].cost.unwrap();
        assert_eq!((c.local_us, c.remote_us, c.fanout_us), (38.5, 275.0, 51_500.0));
        assert!(both[1].describe().contains("EMULATED"));
        assert_eq!(Regime::all(DispatchCosts::Native), [Regime::native()]);
    }

    #[test]
    fn emulated_coefficients_add_to_native_and_capacity_is_slot_time() {
        let native = NativeCosts { alpha_us: 0.2, beta_us: 0.9, measured: true };
        let c = Regime::paper().coefficients(native, 2);
        assert_eq!(c.capacity, 2e6);
        assert_eq!((c.alpha, c.beta, c.gamma), (38.5 + 0.2, 275.0 + 0.9, 51_500.0 + 100.0));
        let n = Regime::native().coefficients(native, 4);
        assert_eq!((n.alpha, n.beta, n.capacity), (0.2, 0.9, 4e6));
    }
}
