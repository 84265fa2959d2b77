//! The discrete-event engine: a cluster of simulated workers fed by the planner, run against
//! an input pattern under a fixed placement or the autoscaler.
//!
//! One event at a time, in time order: an input arrives at the planner, a request reaches a
//! worker, an execution finishes (its chained requests leave for their workers and its chain
//! may complete), a statistics interval ends (workers report; the autoscaler steps), a
//! migration advances. Every random draw comes from a generator derived from the seed, and
//! equal-time events are ordered by kind and insertion, so a seed determines the whole run.

mod arrivals;
mod execution;
mod reports;

pub use reports::{Tick, interval};

use crate::chains::Chains;
use crate::config::SimConfig;
use crate::error::SimError;
use crate::events::{DelayLine, Nanos, Timers, ns_to_s, s_to_ns, us_to_ns};
use crate::migration::Migration;
use crate::model::Model;
use crate::planner::Planner;
use crate::report::ReportLog;
use crate::routing::Routing;
use crate::summary::{IntervalRow, ScalingEvent, SimSummary};
use crate::worker::{Counters, Job, Worker};
use clasp_core::Pipeline;
use clasp_core::pattern::RatePattern;
use clasp_core::placement::Placement;
use clasp_core::rng::{SeededRng, independent_stream};
use clasp_plan::autoscaler::{Autoscaler, AutoscalerConfig, plan_rescale};
use clasp_plan::estimator::{Estimator, EstimatorConfig, Observation};
use clasp_plan::keys::{assign_keys, remap_workers};
use clasp_plan::parallelism::initial_allocation;

/// How operators are placed during a run.
#[derive(Clone, Debug)]
pub enum Deployment {
    /// One placement for the whole run.
    Static(Placement),
    /// One worker to start with (all operators, slots split by Eq. 12), then the autoscaler
    /// with a policy.
    Elastic(Box<AutoscalerConfig>),
}

/// A rare event.
#[derive(Debug)]
pub(crate) enum Timer {
    /// The next input reaches the planner.
    Arrival,
    /// A statistics interval ends.
    Tick,
    /// A migration plan reaches the workers.
    PlanArrives,
    /// Migration data reaches a worker (index into the migration's messages).
    Data(usize),
    /// A scheduled rescaling is due (index into the schedule).
    Rescale(usize),
}

/// Most chains an unthrottled input may keep in flight (it dispatches up to the limit).
const UNTHROTTLED_IN_FLIGHT: u32 = 1_000_000;

/// A simulation, ready to run.
#[derive(Debug)]
pub struct Simulation<'p> {
    pub(crate) p: &'p Pipeline,
    pub(crate) model: Model,
    pub(crate) cfg: SimConfig,
    pattern: RatePattern,
    pub(crate) now: Nanos,
    end: Nanos,
    warmup: Nanos,
    interval: Nanos,
    last_tick: Nanos,
    pub(crate) workers: Vec<Worker>,
    pub(crate) local: DelayLine,
    pub(crate) remote: DelayLine,
    pub(crate) timers: Timers<Timer>,
    pub(crate) routing: Routing,
    pub(crate) previous: Option<Routing>,
    planner: Planner,
    chains: Chains,
    pub(crate) rng: SeededRng,
    arrival_rng: SeededRng,
    worker_min: (Nanos, usize),
    worker_min_stale: bool,
    done: Vec<Job>,
    pub(crate) autoscaler: Option<Autoscaler>,
    pub(crate) migration: Option<Migration>,
    pub(crate) log: ReportLog,
    timeline: Vec<IntervalRow>,
    pub(crate) scaling: Vec<ScalingEvent>,
    measured: Counters,
    measured_inputs: u64,
    pub(crate) forwarded: u64,
    events: u64,
    active: u32,
    max_active: u32,
    active_area: f64,
    active_since: Nanos,
    /// End of the last migration (s): a fixed placement's final statistics start there.
    pub(crate) window_start: f64,
    /// Placements to move to at given times, whatever the deployment.
    schedule: Vec<(f64, Placement)>,
    /// An estimator fed every saturated report when no autoscaler runs.
    estimator: Option<Estimator>,
}

impl<'p> Simulation<'p> {
    /// A simulation of `p` under `pattern` with the model derived from the spec's hints.
    pub fn from_spec(
        p: &'p Pipeline,
        cfg: SimConfig,
        pattern: RatePattern,
        deployment: Deployment,
    ) -> Result<Self, SimError> {
        let model = Model::from_spec(p, &cfg);
        Self::new(p, model, cfg, pattern, deployment)
    }

    /// A simulation of `p` (compiled into `model`) under `pattern`. Every check happens here:
    /// a simulation that is built runs.
    pub fn new(
        p: &'p Pipeline,
        model: Model,
        cfg: SimConfig,
        pattern: RatePattern,
        deployment: Deployment,
    ) -> Result<Self, SimError> {
        cfg.validate()?;
        if model.ops.len() != p.operators.len() || model.streams != p.streams.len() {
            return Err(SimError::Config("the model is not of this pipeline".into()));
        }
        let unthrottled = pattern.rate_at(0.0).is_infinite();
        if unthrottled && cfg.max_in_flight > UNTHROTTLED_IN_FLIGHT {
            return Err(SimError::Config(format!(
                "an unthrottled input dispatches up to max_in_flight chains; {} is more than {UNTHROTTLED_IN_FLIGHT}",
                cfg.max_in_flight
            )));
        }
        let (placement, elastic) = match deployment {
            Deployment::Static(placement) => (placement, None),
            Deployment::Elastic(c) => {
                if c.plan.max_workers > cfg.max_workers {
                    return Err(SimError::Config(format!(
                        "the autoscaler may use {} workers, the cluster has {}",
                        c.plan.max_workers, cfg.max_workers
                    )));
                }
                // The input pattern says whether the input has a rate of its own.
                let c = AutoscalerConfig { unthrottled, ..*c };
                (initial_placement(p, &model, cfg.slots), Some(c))
            }
        };
        let keys = assign_keys(p, &placement, cfg.key_groups, None);
        let autoscaler = elastic
            .map(|c| Autoscaler::new(c, p, placement.clone(), keys.clone(), 0))
            .transpose()?;
        let routing = Routing::new(p, placement, keys, 0, cfg.max_workers)?;
        let counters = Counters::new(p.operators.len(), p.streams.len(), cfg.max_workers as usize);
        let workers = (0..cfg.max_workers)
            .map(|w| Worker::new(w, cfg.slots, cfg.cores(), counters.clone(), cfg.seed))
            .collect();
        let interval = s_to_ns(cfg.interval_s).max(1);
        let warmup = cfg.warmup_s.min(cfg.duration_s);
        let mut sim = Self {
            p,
            model,
            pattern,
            now: 0,
            end: s_to_ns(cfg.duration_s),
            warmup: interval * s_to_ns(warmup).div_ceil(interval),
            interval,
            last_tick: 0,
            workers,
            local: DelayLine::new(us_to_ns(cfg.local_delay_us)),
            remote: DelayLine::new(us_to_ns(cfg.remote_delay_us)),
            timers: Timers::default(),
            routing,
            previous: None,
            planner: Planner::new(cfg.planner_queue, cfg.max_in_flight, unthrottled),
            chains: Chains::default(),
            rng: independent_stream(cfg.seed, 0x6469_7370),
            arrival_rng: independent_stream(cfg.seed, 0x6172_7276),
            worker_min: (Nanos::MAX, 0),
            worker_min_stale: false,
            done: Vec::new(),
            autoscaler,
            migration: None,
            log: ReportLog::default(),
            timeline: Vec::new(),
            scaling: Vec::new(),
            measured: counters,
            measured_inputs: 0,
            forwarded: 0,
            events: 0,
            active: 0,
            max_active: 0,
            active_area: 0.0,
            active_since: 0,
            window_start: 0.0,
            schedule: Vec::new(),
            estimator: None,
            cfg,
        };
        sim.start();
        Ok(sim)
    }

    /// Activates the first placement's workers and schedules the first events.
    fn start(&mut self) {
        for w in 0..self.routing.workers() as usize {
            self.set_active(w, true);
            let limits = self.limits(w as u32);
            self.workers[w].set_limits(limits);
        }
        if self.warmup == 0 {
            self.chains.measuring = true;
        }
        self.timers.at(self.interval.min(self.end), Timer::Tick);
        if self.planner.unthrottled {
            self.try_dispatch();
        } else if let Some(t) = self.next_arrival(0) {
            self.timers.at(t, Timer::Arrival);
        }
    }

    /// Moves to each placement at its time (s) with a migration, as if the autoscaler had
    /// decided it (workers relabelled to move as little as possible); a rescaling due while
    /// another migration runs waits for it. For migration experiments.
    pub fn with_rescales(mut self, schedule: Vec<(f64, Placement)>) -> Self {
        for (i, (t, _)) in schedule.iter().enumerate() {
            self.timers.at(s_to_ns(*t), Timer::Rescale(i));
        }
        self.schedule = schedule;
        self
    }

    /// Feeds every saturated worker report to an estimator with `cfg` (a run with a
    /// autoscaler feeds its own); the summary reports its coefficients. For estimator
    /// experiments on a fixed placement.
    pub fn with_estimator(mut self, cfg: EstimatorConfig) -> Self {
        self.estimator = Some(Estimator::new(cfg));
        self
    }

    /// A scheduled rescaling is due: migrate, or wait for the running migration to end.
    fn scheduled_rescale(&mut self, i: usize) {
        if self.migration.is_some() {
            self.timers.at(self.now + us_to_ns(1_000.0), Timer::Rescale(i));
            return;
        }
        let placement = remap_workers(&self.routing.placement, self.schedule[i].1.clone());
        let rate = self.pattern.rate_at(ns_to_s(self.now));
        let (keys, plan) = match self.autoscaler.as_mut() {
            Some(a) => match a.rescale_to(self.p, placement.clone()) {
                Ok(r) => (r.keys, r.migration),
                Err(_) => return,
            },
            None => {
                plan_rescale(self.p, &self.routing.placement, &self.routing.keys, &placement, &[])
            }
        };
        self.begin_migration(placement, keys, plan, "scheduled", rate);
    }

    /// Feeds this interval's saturated reports to the stand-alone estimator.
    fn estimate(&mut self, t: f64) {
        let Some(est) = self.estimator.as_mut() else { return };
        for r in self.log.window(t, t).filter(|r| r.saturated) {
            est.observe(r.worker.0, &Observation::from(&r.worker_stats(self.p)));
        }
    }

    /// Per-operator instance limits of worker `w` under the current routing.
    pub(crate) fn limits(&self, w: u32) -> Vec<u32> {
        (0..self.model.ops.len())
            .map(|o| {
                let n = self.routing.instances(o, w);
                if self.model.ops[o].one_at_a_time { n.min(1) } else { n }
            })
            .collect()
    }

    /// Marks worker `w` active or not, keeping the time-weighted worker count.
    pub(crate) fn set_active(&mut self, w: usize, active: bool) {
        if self.workers[w].active == active {
            return;
        }
        self.active_area += f64::from(self.active) * ns_to_s(self.now - self.active_since);
        self.active_since = self.now;
        self.workers[w].active = active;
        if active {
            self.active += 1;
            self.max_active = self.max_active.max(self.active);
        } else {
            self.active -= 1;
        }
    }

    /// Runs to the end and reports.
    pub fn run(mut self) -> SimSummary {
        loop {
            let (t, next) = self.next_event();
            if t > self.end {
                break;
            }
            self.now = t;
            self.events += 1;
            match next {
                Next::Timer => {
                    let (_, timer) = self.timers.pop().expect("a timer is due");
                    self.on_timer(timer);
                }
                Next::Remote => {
                    let d = self.remote.pop().expect("a delivery is due");
                    self.on_delivery(d);
                }
                Next::Local => {
                    let d = self.local.pop().expect("a delivery is due");
                    self.on_delivery(d);
                }
                Next::Worker(w) => self.on_worker(w),
            }
        }
        self.now = self.end;
        self.summary()
    }

    /// The earliest event: timers first, then remote and local deliveries, then workers.
    #[inline]
    fn next_event(&mut self) -> (Nanos, Next) {
        let mut best = (Nanos::MAX, Next::Timer);
        if let Some(t) = self.timers.next_due() {
            best = (t, Next::Timer);
        }
        if let Some(t) = self.remote.next_due()
            && t < best.0
        {
            best = (t, Next::Remote);
        }
        if let Some(t) = self.local.next_due()
            && t < best.0
        {
            best = (t, Next::Local);
        }
        let (t, w) = self.worker_min();
        if t < best.0 {
            best = (t, Next::Worker(w));
        }
        best
    }

    /// The worker whose next execution finishes first.
    #[inline]
    fn worker_min(&mut self) -> (Nanos, usize) {
        if self.worker_min_stale {
            let mut best = (Nanos::MAX, 0);
            for (i, w) in self.workers.iter().enumerate() {
                if w.next < best.0 {
                    best = (w.next, i);
                }
            }
            self.worker_min = best;
            self.worker_min_stale = false;
        }
        self.worker_min
    }

    /// Worker `w`'s next finishing time changed.
    #[inline]
    pub(crate) fn worker_changed(&mut self, w: usize) {
        let t = self.workers[w].next;
        if t < self.worker_min.0 {
            self.worker_min = (t, w);
        } else if self.worker_min.1 == w {
            self.worker_min_stale = true;
        }
    }

    fn on_timer(&mut self, timer: Timer) {
        match timer {
            Timer::Arrival => {
                self.planner.offer(self.now);
                self.try_dispatch();
                if let Some(t) = self.next_arrival(self.now) {
                    self.timers.at(t, Timer::Arrival);
                }
            }
            Timer::Tick => self.on_tick(),
            Timer::PlanArrives => self.plan_arrives(),
            Timer::Data(i) => self.data_arrives(i),
            Timer::Rescale(i) => self.scheduled_rescale(i),
        }
    }
}

/// Which queue the next event comes from.
#[derive(Clone, Copy, Debug)]
enum Next {
    Timer,
    Remote,
    Local,
    Worker(usize),
}

/// One worker running everything, its slots split over the operators in proportion to their
/// demand per input (Eq. 12).
fn initial_placement(p: &Pipeline, model: &Model, slots: u32) -> Placement {
    let demand: Vec<f64> =
        model.requests_per_input().iter().zip(&model.ops).map(|(n, o)| n * o.exec_us).collect();
    Placement::single_worker(p, &initial_allocation(&demand, slots))
}
