//! The flags of `clasp run` and `clasp planner`. Each flag under a help heading is also a
//! setting of `clasp.toml` and a `CLASP_*` variable (see `crate::config`).

use clasp_plan::Policy;
use clasp_plan::triggers::TriggerRule;
use clasp_runtime::job::RescaleAt;
use std::path::PathBuf;
use std::time::Duration;

/// Arguments of `clasp run` and `clasp planner`.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// Pipeline spec (TOML).
    pub spec: PathBuf,
    /// Workers at the start.
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..), help_heading = "Cluster")]
    pub workers: u32,
    /// Executor slots per worker.
    #[arg(long, default_value_t = 10, value_parser = clap::value_parser!(u32).range(1..), help_heading = "Cluster")]
    pub slots: u32,
    /// Input of a source: `[SOURCE=]file:PATH` (lines of a file), `[SOURCE=]gen[:COUNT]`
    /// (the application's seeded generator, default 100000 records) or
    /// `[SOURCE=]kafka:BROKERS/TOPIC[?start=earliest|latest|P:O,…&stop=latest|never&partitions=P,…]`
    /// (a Kafka topic, with the `kafka` feature). Repeat per source.
    #[arg(long, value_name = "SPEC", help_heading = "Input")]
    pub input: Vec<String>,
    /// Input requests per second (the maximum for burst and gradual); without it the input is
    /// unthrottled.
    #[arg(long, help_heading = "Input")]
    pub rate: Option<f64>,
    /// How the rate varies: constant, unthrottled, burst, gradual, gradual:STAGE_S (every stage
    /// that many seconds) or trace:FILE.
    #[arg(long, default_value = "constant", help_heading = "Input")]
    pub pattern: String,
    /// Stop the run after this long (e.g. 30s, 2m, or seconds): queued input is dropped and
    /// the chains in flight get a grace of 5 s, both reported; default: when the input or the
    /// pattern ends and every chain completed.
    #[arg(long, value_parser = crate::cmd::duration::parse, help_heading = "Input")]
    pub duration: Option<Duration>,
    /// Scaling policy: clasp, faasflow, zhang24, ds2, flink, faasflow-sp, zhang24-sp or static.
    #[arg(long, default_value = "static", help_heading = "Policy")]
    pub policy: Policy,
    /// Most workers a policy may use.
    #[arg(long, default_value_t = 10, help_heading = "Cluster")]
    pub max_workers: u32,
    /// With `--policy clasp`: the fewest workers whose predicted 95th percentile of end-to-end
    /// latency at the input rate is within this many milliseconds, in place of the headroom's
    /// margin (when none is, no more than those the model says lower it); a backlog's catch-up
    /// is sized for at full capacity but not judged.
    #[arg(long, value_name = "P95_MS", help_heading = "Policy")]
    pub latency_slo: Option<f64>,
    /// Start from this placement (the JSON of `clasp plan --json`).
    #[arg(long, help_heading = "Policy")]
    pub placement: Option<PathBuf>,
    /// Records per request.
    #[arg(long, default_value_t = 256, value_parser = clap::value_parser!(u32).range(1..), help_heading = "Cluster")]
    pub batch: u32,
    /// Seed for generators, patterns and routing draws.
    #[arg(long, default_value_t = 1, help_heading = "Input")]
    pub seed: u64,
    /// Write sink records here as JSON lines, or to a Kafka topic: `kafka:BROKERS/TOPIC`.
    #[arg(long, help_heading = "Output")]
    pub output: Option<PathBuf>,
    /// Write the final keyed state here as JSON lines.
    #[arg(long, help_heading = "Output")]
    pub state_dump: Option<PathBuf>,
    /// Write the observed statistics and scaling history here (JSON).
    #[arg(long, help_heading = "Output")]
    pub stats: Option<PathBuf>,
    /// Run workers as separate OS processes instead of threads of this process.
    #[arg(long, help_heading = "Cluster")]
    pub processes: bool,
    /// Emulated service time: `OPERATOR=MICROS[:spin|:sleep]`, `*` for every operator.
    #[arg(long = "service-time", value_name = "OP=MICROS[:MODE]", help_heading = "Input")]
    pub service_time: Vec<String>,
    /// Emulated chained-request costs `local=US,remote=US,fanout=US[:spin|:sleep]`: local and
    /// remote spent by the sending executor on top of the real cost, fanout (per other worker
    /// reached, per second) taken from the worker's capacity in the next second, each emulated
    /// execution holding its slot longer (to run the paper's cost regime, e.g.
    /// `local=38.5,remote=275,fanout=51500`).
    #[arg(long, value_name = "COSTS", help_heading = "Input")]
    pub dispatch_cost: Option<String>,
    /// Load the whole input into memory before starting (for measurements).
    #[arg(long, help_heading = "Input")]
    pub preload: bool,
    /// Metrics interval in milliseconds: the workers report and the autoscaler looks at the
    /// run this often, and sooner when the input rises faster than the workers complete it.
    #[arg(long, default_value_t = 1000, value_parser = clap::value_parser!(u64).range(10..=60_000), help_heading = "Cluster")]
    pub interval_ms: u64,
    /// Key groups per keyed operator.
    #[arg(long, default_value_t = 1024, value_parser = clap::value_parser!(u32).range(1..=i64::from(clasp_runtime::wire::MAX_KEY_GROUPS)), help_heading = "Cluster")]
    pub key_groups: u32,
    /// Initial estimates `alpha,beta,gamma,W` (µs, µs, µs/s, µs/s); default: this runtime's
    /// order of magnitude (0.2, 1, 100, slots × 10⁶).
    #[arg(long, help_heading = "Estimator")]
    pub coefficients: Option<String>,
    /// Trigger rule: paper (rate changed for 2 s, a rise after `--rise-after`, or lagging for 3 s)
    /// or reference.
    #[arg(long, default_value = "paper", value_parser = parse_rule, help_heading = "Triggers")]
    pub trigger: TriggerRule,
    /// Input requests before the first scaling decision (the paper's setup: 10000).
    #[arg(long, default_value_t = 0, help_heading = "Triggers")]
    pub warmup: u64,
    /// Time before the first scaling decision, cut short by an interval in which some worker
    /// is saturated or throughput falls 5 % behind the input rate.
    #[arg(long, default_value = "2s", value_parser = crate::cmd::duration::parse_or_zero, help_heading = "Triggers")]
    pub warmup_time: Duration,
    /// A rise of the input rate (more than 10 % above the rate last planned for) is acted on
    /// once it lasted this long, at most 2 s (a fall's; 2 s both ways is the paper's text), or at
    /// once in an interval the cluster falls behind in (planned for that interval's rate or its
    /// last quarter's, if higher), and planned for the newest interval's rate (the paper's
    /// setup: the window's mean).
    #[arg(long, default_value = "1s", value_parser = crate::cmd::duration::parse_or_zero, help_heading = "Triggers")]
    pub rise_after: Duration,
    /// A backlog is sized to drain within this time after a load jump (0s: size for the rate
    /// alone, as the paper does); once drained, the cluster steps back to the rate's size.
    /// CLASP plans the drain at full capacity (its 10 % margin per worker is for the rate).
    #[arg(long, default_value = "2s", value_parser = crate::cmd::duration::parse_or_zero, help_heading = "Triggers")]
    pub catch_up: Duration,
    /// A scale-in goes ahead only if it is still decided this long after it first was.
    #[arg(long, default_value = "2s", value_parser = crate::cmd::duration::parse_or_zero, help_heading = "Triggers")]
    pub scale_in_delay: Duration,
    /// Seconds after a rescale during which a scale-in undoing it, or a re-placement of the
    /// same workers for about the same rate, is held back (a scale-out never is).
    #[arg(long, default_value_t = 10.0, help_heading = "Triggers")]
    pub cooldown: f64,
    /// Rescales to make whatever the policy decides: `REQUESTS:WORKERS`, comma-separated, e.g.
    /// `20000:3,60000:1` moves to CLASP's placement on 3 workers once 20,000 input requests
    /// entered the planner, then back to 1 after 60,000.
    #[arg(long, value_delimiter = ',', value_name = "REQUESTS:WORKERS", help_heading = "Policy")]
    pub rescale_at: Vec<RescaleAt>,
    /// Address workers join (`clasp planner`; `clasp run` uses loopback).
    #[arg(long, default_value = "127.0.0.1:0", help_heading = "Cluster")]
    pub listen: String,
    /// No live progress line.
    #[arg(long, help_heading = "Output")]
    pub quiet: bool,
    /// Whether decisions are carried out: act, or recommend (decide and report every decision
    /// in the logs, /metrics and the API, and never rescale).
    #[arg(long, value_enum, default_value = "act", help_heading = "Policy")]
    pub scaling: ScalingMode,
    /// Address of the admin server (/metrics, /api/v1, the dashboard at /); port 0 picks a
    /// free port. Loopback unless told otherwise.
    #[arg(
        long = "admin-address",
        visible_alias = "admin",
        value_name = "ADDR",
        default_value = "127.0.0.1:0",
        help_heading = "Admin"
    )]
    pub admin_address: String,
    /// No admin server.
    #[arg(long, help_heading = "Admin")]
    pub no_admin: bool,
    /// The cluster secret and TLS (`clasp run` makes a secret for its own cluster).
    #[command(flatten, next_help_heading = "Security")]
    pub security: crate::cmd::security::SecurityArgs,
    /// Checkpoints and recovery.
    #[command(flatten, next_help_heading = "Fault tolerance")]
    pub fault: crate::cmd::fault::FaultArgs,
}

/// `--scaling`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum ScalingMode {
    /// Rescale as the policy decides.
    Act,
    /// Report every decision, never rescale (metrics-only).
    Recommend,
}

pub fn parse_rule(s: &str) -> Result<TriggerRule, String> {
    match s {
        "paper" => Ok(TriggerRule::Paper),
        "reference" => Ok(TriggerRule::Reference),
        _ => Err(format!("unknown trigger rule `{s}`; use paper or reference")),
    }
}
