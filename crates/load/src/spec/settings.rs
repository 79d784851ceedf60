//! The run record's `load` settings: what a run of the spec was asked to do, as
//! one serialisable value per run (made by `BenchSpec::load_settings`, never
//! assembled by hand as JSON).

use serde::Serialize;

use crate::workload::WorkloadSettings;

/// The `load` object of a bench run's `run` record.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct LoadSettings<'a> {
    /// `closed_loop`, `open_loop` or `trace_replay`.
    pub mode: &'static str,
    /// The cap.
    pub concurrency: Option<u32>,
    /// Requests of the run, when bounded by a count.
    pub requests: Option<u64>,
    /// `--duration`, seconds.
    pub duration_s: Option<f64>,
    /// `--dispatch`.
    pub dispatch: String,
    /// `--seed`.
    pub seed: u64,
    /// The text of synthetic prompts: `salted_by_run_id` (the default: another
    /// text of the same lengths each run, so no run finds the last one's prompts
    /// in a prefix cache), `same_every_run` (`--same-prompts`), or `as_written`
    /// (prompts from a file).
    pub prompts: &'static str,
    /// The most tokens (prompt + output) a request asked for, when requests were
    /// shortened to fit the model's context (`max_model_len`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub context_limit: Option<u32>,
    /// What requests ask for.
    pub workload: WorkloadSettings<'a>,
    /// `--max-retries`.
    pub max_retries: u32,
    /// `--retry-backoff`, seconds.
    pub retry_backoff_s: f64,
    /// The client's limits, seconds.
    pub timeouts_s: TimeoutSettings,
    /// Whether usage was asked for.
    pub include_usage: bool,
    /// Whether `ignore_eos: true` was sent (exact output lengths).
    pub ignore_eos: bool,
    /// The `min_tokens` sent, when every request asked for the same length.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub min_tokens: Option<u32>,
    /// `--record-chunks`.
    pub record_chunks: bool,
    /// The receive-timestamp source in effect.
    pub rx_timestamps: &'static str,
    /// How connections were opened and reused.
    pub connections: ConnectionSettings,
    /// Open loop: requests per second.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub rate: Option<f64>,
    /// Open loop: the inter-arrival process.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub arrival: Option<String>,
    /// `--ramp-up`: what grew, how, and over what.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ramp_up: Option<RampSettings>,
    /// The warm-up before the run.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub warmup: Option<WarmupSettings>,
    /// This run's place in a sweep.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub sweep: Option<SweepSettings>,
    /// The built-in simulator measured, when it was.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub simulator: Option<SimulatorSettings>,
    /// Multi-turn sessions (`--sessions`, `--conversations`), when the run had them.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub sessions: Option<SessionSettings<'a>>,
    /// The flags as written on the command line (secrets redacted): a flag is
    /// recorded here without a settings field of its own.
    #[serde(skip_serializing_if = "<[_]>::is_empty")]
    pub flags_given: &'a [super::GivenFlag],
}

/// The `sessions` object of the `load` settings: how many sessions, where their
/// turns came from, and the pause between turns.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct SessionSettings<'a> {
    /// Sessions in the run (`--sessions`; with `--conversations` alone, one per
    /// conversation in the file).
    pub count: u64,
    /// `--turns` in its syntax (synthetic sessions, each turn's user message
    /// drawn from the workload).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub turns: Option<String>,
    /// `--conversations`: the file the turns came from.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub conversations: Option<&'a str>,
    /// `--think-time` in its syntax (`null`: each turn sent as soon as the reply
    /// to the previous one ended).
    pub think_time: Option<String>,
}

/// How the client opened and reused connections.
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
pub struct ConnectionSettings {
    /// Connections were reused (`--no-keepalive` turns it off).
    pub keepalive: bool,
    /// `paced` (at most `burst` connections being opened at once, each holding
    /// its place until the server answers on it or `spacing_s` passes) or
    /// `at_once`.
    pub opening: &'static str,
    /// Connections being opened at once, at most.
    pub burst: usize,
    /// How long an unanswered new connection holds its place, seconds.
    pub spacing_s: f64,
}

/// The client's limits, seconds (`None`: no limit).
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
pub struct TimeoutSettings {
    /// Opening a connection.
    pub connect: Option<f64>,
    /// From an attempt's start to its first token.
    pub first_token: Option<f64>,
    /// Between two chunks.
    pub stall: Option<f64>,
    /// A whole attempt.
    pub total: Option<f64>,
}

/// The warm-up: how much, and that it is not in the log.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct WarmupSettings {
    /// `--warmup` as given (requests or a time).
    pub amount: String,
    /// Always false: warm-up requests are not written.
    pub written: bool,
}

/// A run's place in a sweep.
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
pub struct SweepSettings {
    /// `concurrency` or `rate`.
    pub parameter: &'static str,
    /// This run's level.
    pub level: f64,
    /// Its index among the levels.
    pub index: usize,
    /// How many levels the sweep has.
    pub levels: usize,
}

/// The built-in simulator's main settings (filled in by whoever started it).
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct SimulatorSettings {
    /// The model preset's name.
    pub model: String,
    /// The GPU preset's name.
    pub gpu: String,
    /// Tensor-parallel degree.
    pub tp: u32,
    /// Its speed (`realtime`, `max` or a factor).
    pub speed: String,
    /// Most sequences in its batch.
    pub max_num_seqs: u32,
    /// Its seed.
    pub seed: u64,
}

/// The `ramp_up` object of the `load` settings.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct RampSettings {
    /// `linear` or `exponential`.
    pub shape: &'static str,
    /// `rate` (requests per second, open loop) or `concurrency` (the cap).
    pub applies_to: &'static str,
    /// The value at the start.
    pub from: f64,
    /// The value at the end.
    pub to: f64,
    /// `duration` (a function of time) or `requests` (of the request's index).
    pub over: &'static str,
}
