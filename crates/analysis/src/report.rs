//! One run's report: every section [`crate::analyze()`] computes for it, gathered
//! with its JSON form (durations in seconds, rates per second). Each section's
//! type lives beside the code that computes it; this file only gathers them.

use std::collections::BTreeMap;

use serde::Serialize;
use tpscope_model::Target;

use crate::goodput::Goodput;
use crate::stats::{Summary, Tokens, TokensPerSecond};

pub use crate::cost::Cost;
pub use crate::counts::{CauseCounts, Counts};
pub use crate::distributions::{Conventional, Distributions, LengthBucket};
pub use crate::idle::Idle;
pub use crate::series::{Bucket, TimeSeries};
pub use crate::window::{Window, WindowKind};

/// A token source and how many spans used it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct SourceCount {
    /// `usage`, `tokenizer:<name>` or `chunks`.
    pub source: String,
    /// Spans that used it.
    pub spans: u64,
}

/// Everything `tpscope report` says about one run.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct RunReport {
    /// The run's id.
    pub run_id: String,
    /// The producer (`tpscope 0.1.0`), when the run record says.
    pub tool: Option<String>,
    /// What was measured.
    pub target: Target,
    /// Whether the target was tpscope's built-in simulator (the run record's
    /// `load.simulator`); a run without a URL that is not is an import or a
    /// library recording whose target was not recorded.
    pub simulated: bool,
    /// Labels from the run record.
    pub labels: BTreeMap<String, String>,
    /// The `tpscope bench` command line the run was made with (from the run
    /// record's `load.flags_given`; secrets redacted there); `None` when the record
    /// does not carry it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub command: Option<String>,
    /// The cap from the run record.
    pub cap: Option<u32>,
    /// Token sources with span counts, most used first.
    pub token_sources: Vec<SourceCount>,
    /// Whether the log had the run's `end` record.
    pub complete: bool,
    /// The window all figures below cover (`None` when the run has no spans).
    pub window: Option<Window>,
    /// The steady-state window, when the run has one (whether or not it is used).
    pub steady_window: Option<Window>,
    /// Span counts.
    pub counts: Counts,
    /// The most frequent failure messages of each cause (over the whole run,
    /// whatever the window).
    pub error_messages: Vec<crate::errors::CauseMessages>,
    /// Σ output tokens of ok spans in the window / window length (tokens of spans
    /// that straddle an edge are counted pro rata, spread over their stream).
    pub system_tps: Option<TokensPerSecond>,
    /// Ok spans released in the window / window length (requests per second), as
    /// `vllm bench serve` prints "request throughput".
    pub request_throughput: Option<f64>,
    /// (input + output tokens of the ok spans released in the window) / window
    /// length, as `vllm bench serve` prints "total token throughput"; `None` when
    /// some ok span does not know its input tokens.
    pub total_token_throughput: Option<TokensPerSecond>,
    /// ok / (ok + error); cancelled spans are counted apart.
    pub success_rate: Option<f64>,
    /// Σ retry_count / spans.
    pub retry_rate: Option<f64>,
    /// gap_time / window length, exact from the span sweep.
    pub gap_fraction: Option<f64>,
    /// Fraction of samples in the window with queue depth > 0 and in-flight < cap.
    pub gap_fraction_sampled: Option<f64>,
    /// The gap inferred from the pipeline's shape when its queue times were not
    /// stated (imports without them, a proxy no request told of its queue);
    /// `None` when the exact figure stands.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub gap_fraction_inferred: Option<crate::infer::InferredGap>,
    /// gap_time / backlog_time (`None` when there was no backlog).
    pub gap_fraction_of_backlog: Option<f64>,
    /// ∫ in_flight dt / ∫ cap dt (`None` when the cap is unknown or unlimited).
    pub utilization: Option<f64>,
    /// Time-weighted mean in-flight over the window.
    pub mean_in_flight: Option<f64>,
    /// Time-weighted mean queue depth over the window.
    pub mean_queue_depth: Option<f64>,
    /// Gap and backlog time.
    #[serde(flatten)]
    pub idle: Idle,
    /// Distributions of the derived metrics.
    #[serde(flatten)]
    pub distributions: Distributions,
    /// The conventional forms (tpot, decode_tps, inter-token latency).
    pub conventional: Conventional,
    /// For each metric, how many ok spans lacked it, by reason.
    pub missing: BTreeMap<&'static str, BTreeMap<&'static str, u64>>,
    /// How far the client's own stamps can be trusted (docs/design.md §13).
    pub measurement_quality: crate::MeasurementQuality,
    /// Output length distribution of ok spans.
    pub output_length: Summary<Tokens>,
    /// Stream TPS by output-length bucket.
    pub stream_tps_by_output_length: Vec<LengthBucket>,
    /// Cost, when prices were given.
    pub cost: Option<Cost>,
    /// Goodput, when goals were given (docs/design.md §15).
    pub goodput: Option<Goodput>,
    /// Whether every request was ready at the start (a closed loop): `t_queue` and
    /// `ttft_user` are then the client's own backlog, not what the server did.
    pub closed_loop: bool,
    /// The time series, when a bucket was asked for.
    pub time_series: Option<TimeSeries>,
    /// A ramped run (`load.ramp_up`): how throughput followed the load, from the
    /// time series (`None` for a run without a ramp or a time series).
    pub ramp: Option<crate::ramp::RampFollow>,
    /// TTFT by turn index and per-session totals of a multi-turn run (over the
    /// whole run; `None` when no span belongs to a session).
    pub sessions: Option<crate::sessions::SessionReport>,
    /// How far the tokenizer's counts agree with the server's `usage` (`None`
    /// when no span was counted both ways).
    pub count_check: Option<crate::count_check::CountCheck>,
    /// The server's side beside the client's, when the run has server samples.
    pub server: Option<crate::server::ServerVsClient>,
    /// The GPUs' energy and utilisation, when the run has GPU-telemetry scrapes.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub energy: Option<crate::energy::Energy>,
    /// Whose capacity was idle (`None` when the run has no window).
    pub diagnosis: Option<crate::diagnosis::Diagnosis>,
    /// Where every slot-second of the window went (`None` without a window).
    pub capacity: Option<crate::ledger::Capacity>,
    /// The run replayed work-conserving at its cap (`None` without a cap or
    /// queue times).
    pub what_if: Option<crate::whatif::WhatIf>,
    /// Warnings about this run's data.
    pub warnings: Vec<String>,
}
