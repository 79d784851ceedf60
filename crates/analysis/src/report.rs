//! The report value: every number `tpscope report` shows, for one run, with its
//! JSON form (schema `tpscope.report/1`; durations in seconds, rates per second).

use std::collections::BTreeMap;
use std::time::Duration;

use serde::ser::SerializeMap;
use serde::{Serialize, Serializer};
use tpscope_model::{Cause, Target, Timestamp};

use crate::goodput::Goodput;
use crate::levels::SweepTable;
use crate::stats::{Summary, Tokens, TokensPerSecond};

/// The schema name of the JSON report.
pub const REPORT_SCHEMA: &str = "tpscope.report/1";

/// Serialises a duration as seconds (every duration in tpscope's JSON).
pub(crate) fn secs<S: Serializer>(d: &Duration, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_f64(d.as_secs_f64())
}

/// Serialises an optional duration as seconds or null.
pub(crate) fn opt_secs<S: Serializer>(d: &Option<Duration>, s: S) -> Result<S::Ok, S::Error> {
    match d {
        Some(d) => secs(d, s),
        None => s.serialize_none(),
    }
}

/// Reports of every run read, plus what the reader had to say.
#[derive(Clone, Debug, Serialize)]
pub struct Report {
    /// Always [`REPORT_SCHEMA`].
    pub schema: &'static str,
    /// One report per run, in order of first appearance.
    pub runs: Vec<RunReport>,
    /// Records skipped (with `--skip-invalid`), by reason.
    pub skipped: BTreeMap<String, u64>,
    /// Reader warnings (cut-off last lines, runs without `run` or `end` records).
    pub warnings: Vec<String>,
    /// The table of each load sweep among the runs (one run per level).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub sweeps: Vec<SweepTable>,
}

/// Which stretch of time a run's figures cover.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum WindowKind {
    /// First `queued_at` to last `released_at`.
    Full,
    /// From in-flight first reaching the cap to the backlog last emptying.
    Steady,
    /// A range given in seconds from the run's start.
    Range,
}

/// A time window `[start, end]`.
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
pub struct Window {
    /// How it was chosen.
    pub kind: WindowKind,
    /// Start instant.
    pub start: Timestamp,
    /// End instant.
    pub end: Timestamp,
    /// `end − start`.
    #[serde(rename = "duration_s", serialize_with = "secs")]
    pub duration: Duration,
    /// Start, as an offset from the run's start.
    #[serde(rename = "from_s", serialize_with = "secs")]
    pub from: Duration,
    /// End, as an offset from the run's start.
    #[serde(rename = "to_s", serialize_with = "secs")]
    pub to: Duration,
}

/// Span counts over the spans released in the window.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct Counts {
    /// All spans released in the window.
    pub spans: u64,
    /// Spans with status `ok`.
    pub ok: u64,
    /// Spans with status `error`.
    pub error: u64,
    /// Spans with status `cancelled` (kept apart from the success rate).
    pub cancelled: u64,
    /// Of the cancelled spans, those never admitted: the backlog left when the
    /// run stopped admitting (end of `--duration`, Ctrl-C). They were never sent,
    /// so they are not failures and not in `errors_by_cause`.
    pub backlog_left: u64,
    /// Non-ok spans by failure cause (the backlog left at the end aside).
    pub errors_by_cause: CauseCounts,
    /// Σ retry_count.
    pub retries: u64,
    /// Retried attempts by cause.
    pub retries_by_cause: CauseCounts,
    /// Tokens received by attempts that did not end ok.
    pub wasted_tokens: u64,
    /// Output tokens of ok spans (whole spans, not only their part in the window).
    pub output_tokens: u64,
    /// Input tokens of ok spans that know theirs.
    pub input_tokens: u64,
    /// Ok spans that do not know their input tokens.
    pub ok_without_input_tokens: u64,
}

/// Counts by failure cause. Listed and serialised (as a JSON object) in the
/// alphabetical order of the cause names, the order reports have always used.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct CauseCounts(BTreeMap<Cause, u64>);

impl CauseCounts {
    /// Counts one more of `cause`.
    pub fn add(&mut self, cause: Cause) {
        *self.0.entry(cause).or_default() += 1;
    }

    /// The count of `cause` (0 when none).
    pub fn get(&self, cause: Cause) -> u64 {
        self.0.get(&cause).copied().unwrap_or(0)
    }

    /// Whether nothing was counted.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// The causes counted with their counts, by cause name.
    pub fn iter(&self) -> impl Iterator<Item = (Cause, u64)> + '_ {
        let mut v: Vec<(Cause, u64)> = self.0.iter().map(|(c, n)| (*c, *n)).collect();
        v.sort_unstable_by_key(|(c, _)| c.as_str());
        v.into_iter()
    }
}

/// The count of the cause named `name`; panics, like a map, when none was counted.
impl std::ops::Index<&str> for CauseCounts {
    type Output = u64;
    fn index(&self, name: &str) -> &u64 {
        name.parse::<Cause>()
            .ok()
            .and_then(|c| self.0.get(&c))
            .unwrap_or_else(|| panic!("no count for cause `{name}`"))
    }
}

impl Serialize for CauseCounts {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut m = s.serialize_map(Some(self.0.len()))?;
        for (c, n) in self.iter() {
            m.serialize_entry(c.as_str(), &n)?;
        }
        m.end()
    }
}

/// Idle time (docs/design.md §3) over the window.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct Idle {
    /// Time when queue depth > 0 and in-flight < cap (absent when the producer
    /// recorded no queue times).
    #[serde(rename = "gap_time_s", serialize_with = "opt_secs")]
    pub gap_time: Option<Duration>,
    /// Time when queue depth > 0 (absent as `gap_time`).
    #[serde(rename = "backlog_time_s", serialize_with = "opt_secs")]
    pub backlog_time: Option<Duration>,
    /// Samples in the window (the sampled estimate uses them).
    pub samples: u64,
}

/// The derived-metric distributions (docs/design.md §3), over ok spans released in the window.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct Distributions {
    /// admitted_at − queued_at.
    pub t_queue: Summary<Duration>,
    /// first_token_at − admitted_at (TTFT after admission).
    pub t_first_token: Summary<Duration>,
    /// first_token_at − queued_at (what the user waited, queue included).
    pub ttft_user: Summary<Duration>,
    /// last_token_at − first_token_at.
    pub t_stream: Summary<Duration>,
    /// released_at − admitted_at.
    pub t_in_flight: Summary<Duration>,
    /// released_at − last_token_at.
    pub t_post: Summary<Duration>,
    /// output_tokens / t_stream.
    pub stream_tps: Summary<TokensPerSecond>,
    /// output_tokens / t_in_flight.
    pub end_to_end_tps: Summary<TokensPerSecond>,
}

/// Metrics in the forms other tools print, for comparison with them.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct Conventional {
    /// t_stream / (output_tokens − 1) (time per output token, as vLLM prints it).
    pub tpot: Summary<Duration>,
    /// (output_tokens − 1) / t_stream.
    pub decode_tps: Summary<TokensPerSecond>,
    /// Inter-token latency from recorded chunk arrivals; a chunk of k tokens counts
    /// as k gaps of (gap / k).
    pub inter_token_latency: Summary<Duration>,
}

/// Stream TPS of the ok spans whose output length falls in `[min_tokens, max_tokens]`.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct LengthBucket {
    /// Smallest output length in the bucket.
    pub min_tokens: u64,
    /// Largest output length in the bucket (`None`: no upper bound).
    pub max_tokens: Option<u64>,
    /// Stream TPS of those spans.
    pub stream_tps: Summary<TokensPerSecond>,
}

/// Cost of the window's output (docs/design.md §6), in the currency of the prices given.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct Cost {
    /// The deployment's price per hour, as given.
    pub price_per_hour: Option<f64>,
    /// price_per_hour / (system_tps × 3600) × 10⁶.
    pub per_million_output_tokens: Option<f64>,
    /// price_per_hour / ok completions per hour.
    pub per_completion: Option<f64>,
    /// Per-token prices (per million input / output tokens), as given.
    pub price_per_mtok_in: Option<f64>,
    /// As given.
    pub price_per_mtok_out: Option<f64>,
    /// Σ over ok spans of input and output tokens at the per-token prices.
    pub token_cost_total: Option<f64>,
    /// token_cost_total / ok spans.
    pub token_cost_per_completion: Option<f64>,
}

/// One time bucket of the series.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Bucket {
    /// Bucket start, as an offset from the window start.
    #[serde(rename = "start_s", serialize_with = "secs")]
    pub start: Duration,
    /// Bucket length (the last bucket may be shorter).
    #[serde(rename = "duration_s", serialize_with = "secs")]
    pub duration: Duration,
    /// Output tokens of ok spans attributed to this bucket (spread over each span's
    /// [first_token_at, last_token_at], or at recorded chunk arrivals).
    pub tokens: f64,
    /// tokens / duration.
    pub system_tps: Option<TokensPerSecond>,
    /// Time-weighted mean in-flight.
    pub in_flight: f64,
    /// Time-weighted mean queue depth.
    pub queue_depth: f64,
    /// The cap in force at the bucket's end (`None`: uncapped or unknown).
    pub cap: Option<u32>,
    /// Gap time in the bucket.
    #[serde(rename = "gap_s", serialize_with = "secs")]
    pub gap: Duration,
    /// Backlog time in the bucket.
    #[serde(rename = "backlog_s", serialize_with = "secs")]
    pub backlog: Duration,
}

/// A time series over the window.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct TimeSeries {
    /// Bucket length.
    #[serde(rename = "bucket_s", serialize_with = "secs")]
    pub bucket: Duration,
    /// The buckets, from the window start.
    pub buckets: Vec<Bucket>,
}

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
    /// Whose capacity was idle (`None` when the run has no window).
    pub diagnosis: Option<crate::diagnosis::Diagnosis>,
    /// Warnings about this run's data.
    pub warnings: Vec<String>,
}
