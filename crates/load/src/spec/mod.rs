//! The validated spec of a benchmark: the flags of `tpscope bench` as given
//! ([`Flags`], plain values) checked together into a [`BenchSpec`] — the workload
//! read, the runs laid out (one, or one per sweep level), the defaults filled in —
//! with a typed [`SpecError`] naming the flag when they do not fit. The spec also
//! makes each run's [`RunPlan`] and the run record's load settings (`settings.rs`).
//! Beside it: the flags (`flags.rs`), the target URL and vLLM's habits
//! (`target.rs`), where the log goes (`output.rs`).

mod context;
mod error;
mod flags;
mod layout;
mod output;
pub mod parse;
mod ramp;
mod settings;
mod sources;
mod target;
#[cfg(test)]
mod tests;

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use tpscope_client::{Api, ClientConfig, Timeouts};
use tpscope_model::TokenSource;
use tpscope_model::units::Warmup;
use tpscope_record::Dispatch;
use tpscope_tokens::mix;

use crate::executor::RunPlan;
use crate::retry::RetryPolicy;
use crate::schedule::Schedule;
use crate::workload::Workload;
use crate::workload::sessions::SessionPlan;

pub use context::{ContextFit, fit as fit_context, usable as usable_context};
pub use error::SpecError;
pub use flags::{BadDatasetName, DatasetName, Flags, Limit, defaults};
use layout::lay_out;
pub use output::{Output, unique_name};
pub use settings::{
    ConnectionSettings, LoadSettings, RampSettings, SessionSettings, SimulatorSettings,
    SweepSettings, TimeoutSettings, WarmupSettings,
};
use sources::{dataset_name, exact_lengths, session_plan, workload_of};
pub use target::{ResolvedTarget, resolve_target};

/// The cap of a closed loop when `--concurrency` is not given.
pub const DEFAULT_CONCURRENCY: u32 = 32;
/// An open loop's length when neither `--requests` nor `--duration` is given.
pub const DEFAULT_OPEN_DURATION: Duration = Duration::from_secs(30);
/// The first-token limit when `--timeout-first-token` is not given: long enough
/// for a deep server queue, short enough that a server that never answers is seen.
pub const DEFAULT_FIRST_TOKEN_TIMEOUT: Duration = Duration::from_secs(300);
/// The stall limit when `--timeout-stall` is not given.
pub const DEFAULT_STALL_TIMEOUT: Duration = Duration::from_secs(60);
/// The longest the model lookup (`GET /models`) waits; shorter when the
/// first-token limit is.
pub const MODEL_LOOKUP_TIMEOUT: Duration = Duration::from_secs(30);
/// `--dataset-name random`'s lengths when none are given (vLLM's defaults).
pub const RANDOM_INPUT_LEN: u32 = 1024;
/// See [`RANDOM_INPUT_LEN`].
pub const RANDOM_OUTPUT_LEN: u32 = 128;

/// One run of a sweep (or the only run).
#[derive(Clone, Debug)]
pub struct Level {
    /// The cap.
    pub cap: Option<u32>,
    /// When requests become ready.
    pub schedule: Schedule,
    /// Requests in this run.
    pub requests: Option<u64>,
    /// `concurrency 8` / `rate 2` in a sweep.
    pub label: Option<String>,
    /// The swept value.
    pub value: f64,
}

/// A benchmark, validated.
#[derive(Debug)]
pub struct BenchSpec {
    /// The server's base URL (`None`: the built-in simulator).
    pub url: Option<String>,
    /// The API.
    pub api: Api,
    /// Extra body fields: `--extra-body`, the flags' own ([`Flags::body_fields`]),
    /// and `ignore_eos` and `min_tokens` when lengths are exact.
    pub extra_body: serde_json::Map<String, serde_json::Value>,
    /// Whether `ignore_eos: true` is sent.
    pub ignore_eos: bool,
    /// The `min_tokens` sent (every request asks for this fixed length).
    pub min_tokens: Option<u32>,
    /// Ask for usage.
    pub include_usage: bool,
    /// Client settings.
    pub client: ClientConfig,
    /// The runs (one, or one per sweep level).
    pub levels: Vec<Level>,
    /// `concurrency` or `rate` when sweeping.
    pub sweep: Option<&'static str>,
    /// Stop admitting after this long.
    pub duration: Option<Duration>,
    /// Retries.
    pub retry: RetryPolicy,
    /// Whether the user gave `--input-tokens` or `--output-tokens` (then lengths
    /// that cannot fit the model's context are an error, not shortened).
    pub lengths_given: bool,
    /// What requests ask for.
    pub workload: Arc<Workload>,
    /// Multi-turn sessions (`--sessions`, `--conversations`).
    pub sessions: Option<Arc<SessionPlan>>,
    /// Where the log goes.
    pub out: Output,
    /// Labels.
    pub labels: BTreeMap<String, String>,
    /// Remarks for the user about how the flags are taken (none are errors).
    pub notes: Vec<String>,
    /// The flags as given (vLLM's dataset names resolved): what the spec uses as
    /// given is read from here (the model, key, headers, seed, dispatch, tokenizer,
    /// warm-up, …), so a flag is defined once, in `flags.rs`.
    pub flags: Flags,
    /// The flags as the user wrote them, for the run record (`load.flags_given`):
    /// the command line fills it in; empty for a library caller unless it does.
    pub given: Vec<GivenFlag>,
}

/// One flag as written on the command line, for the run record (secrets
/// redacted by whoever fills it in).
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize)]
pub struct GivenFlag {
    /// The long name, with its dashes (`--concurrency`).
    pub flag: String,
    /// Its values as written, in order (empty for a switch).
    pub values: Vec<String>,
}

impl BenchSpec {
    /// Validates the flags together; every error names its flag.
    pub fn from_flags(mut a: Flags) -> Result<BenchSpec, SpecError> {
        let mut notes = Vec::new();
        let target = resolve_target(a.url.as_deref(), a.endpoint.as_deref(), a.api, &mut notes)?;
        dataset_name(&mut a)?;
        if !(a.time_scale.is_finite() && a.time_scale > 0.0) {
            return Err(SpecError::TimeScale(a.time_scale));
        }
        let (workload, trace) = workload_of(&a, target.api, &mut notes)?;
        let sessions = session_plan(&a)?;
        let (levels, sweep, duration) = lay_out(
            &a,
            &workload,
            trace.as_deref(),
            sessions.is_some(),
            &mut notes,
        )?;
        if a.dispatch == Dispatch::Waves && levels.iter().any(|l| l.cap.is_none()) {
            return Err(SpecError::WavesWithoutCap);
        }

        let mut extra_body = a.extra_body.clone().unwrap_or_default();
        extra_body.extend(a.body_fields());
        let (ignore_eos, min_tokens) = exact_lengths(
            &mut extra_body,
            a.ignore_eos(),
            a.output_tokens.as_ref(),
            &workload,
        );
        let client = client_config(&a);
        Ok(BenchSpec {
            url: target.url,
            api: target.api,
            extra_body,
            ignore_eos,
            min_tokens,
            include_usage: !a.no_usage,
            client,
            levels,
            sweep,
            duration,
            retry: RetryPolicy {
                max_retries: a.max_retries,
                base: a.retry_backoff,
            },
            lengths_given: a.input_tokens.is_some() || a.output_tokens.is_some(),
            workload: Arc::new(workload),
            sessions,
            out: Output::from_flag(a.out.clone()),
            labels: a.labels.iter().cloned().collect(),
            notes,
            flags: a,
            given: Vec::new(),
        })
    }

    /// The plan of one level's run.
    pub fn plan(&self, level: &Level, run_id: String) -> RunPlan {
        RunPlan {
            run_id: run_id.clone(),
            schedule: level.schedule.clone(),
            requests: level.requests,
            duration: self.duration,
            cap: level.cap,
            dispatch: self.flags.dispatch,
            workload: self.workload.clone(),
            sessions: self.sessions.clone(),
            tokenizer: self.flags.tokenizer,
            seed: self.flags.seed,
            context: None,
            prompt_salt: if self.flags.same_prompts {
                0
            } else {
                prompt_salt(&run_id)
            },
            retry: self.retry,
            sample_interval: Some(self.flags.sample_interval),
            drain_timeout: self.flags.drain_timeout,
        }
    }

    /// The warm-up's plan, when `--warmup` is given: the first level's load with
    /// other prompts, bounded by the warm-up's count or time, not sampled.
    pub fn warmup_plan(&self) -> Option<RunPlan> {
        let w = self.flags.warmup?;
        let mut plan = self.plan(&self.levels[0], "warmup".into());
        // Different prompts from the measured run's, the same shape of load.
        plan.seed = mix(self.flags.seed ^ 0x3A53_0FF5);
        plan.sample_interval = None;
        match w {
            Warmup::Requests(n) => {
                plan.requests = Some(n);
                plan.duration = None;
            }
            Warmup::Time(d) => {
                plan.requests = None;
                plan.duration = Some(d);
            }
        }
        Some(plan)
    }

    /// The token source spans use unless they say otherwise.
    pub fn token_source(&self) -> TokenSource {
        if self.include_usage {
            TokenSource::Usage
        } else {
            TokenSource::Tokenizer(self.flags.tokenizer.name().into())
        }
    }

    /// The load settings of the run of level `index`.
    pub fn load_settings(
        &self,
        index: usize,
        simulator: Option<SimulatorSettings>,
    ) -> LoadSettings<'_> {
        let level = &self.levels[index];
        let (mode, rate, arrival) = match &level.schedule {
            Schedule::Backlog => ("closed_loop", None, None),
            Schedule::Rate { rate, arrival } => {
                ("open_loop", Some(*rate), Some(arrival.to_string()))
            }
            Schedule::Trace { .. } => ("trace_replay", None, None),
            Schedule::RampedRate { ramp, arrival } => {
                ("open_loop", Some(ramp.ramp.to), Some(arrival.to_string()))
            }
            Schedule::RampedBacklog { .. } => ("closed_loop", None, None),
        };
        let ramp_up = ramp::settings(&level.schedule);
        let t = &self.client.timeouts;
        LoadSettings {
            mode,
            concurrency: level.cap,
            requests: level.requests,
            duration_s: secs(self.duration),
            dispatch: self.flags.dispatch.to_string(),
            seed: self.flags.seed,
            prompts: match (&*self.workload, self.flags.same_prompts) {
                (Workload::Prompts { .. }, _) => "as_written",
                (_, true) => "same_every_run",
                (_, false) => "salted_by_run_id",
            },
            context_limit: None,
            workload: self.workload.settings(),
            max_retries: self.retry.max_retries,
            retry_backoff_s: self.retry.base.as_secs_f64(),
            timeouts_s: TimeoutSettings {
                connect: secs(t.connect),
                first_token: secs(t.first_token),
                stall: secs(t.stall),
                total: secs(t.total),
            },
            include_usage: self.include_usage,
            ignore_eos: self.ignore_eos,
            min_tokens: self.min_tokens,
            record_chunks: self.client.record_chunks,
            rx_timestamps: self.client.rx_timestamps.effective().as_str(),
            connections: ConnectionSettings {
                keepalive: self.client.keepalive,
                opening: if self.client.connect_burst > 0 {
                    "paced"
                } else {
                    "at_once"
                },
                burst: self.client.connect_burst,
                spacing_s: tpscope_client::config::CONNECT_SPACING.as_secs_f64(),
            },
            rate,
            arrival,
            ramp_up,
            warmup: self.flags.warmup.map(|w| WarmupSettings {
                amount: w.to_string(),
                written: false,
            }),
            sweep: self.sweep.map(|parameter| SweepSettings {
                parameter,
                level: level.value,
                index,
                levels: self.levels.len(),
            }),
            simulator,
            sessions: self.sessions.as_deref().map(SessionPlan::settings),
            flags_given: &self.given,
        }
    }
}

impl BenchSpec {
    /// The longest the model lookup waits: the first-token limit, at most
    /// [`MODEL_LOOKUP_TIMEOUT`].
    pub fn model_lookup_timeout(&self) -> Duration {
        self.client
            .timeouts
            .first_token
            .map_or(MODEL_LOOKUP_TIMEOUT, |t| t.min(MODEL_LOOKUP_TIMEOUT))
    }
}

/// The client's settings from the flags (the default limits where none is given).
fn client_config(a: &Flags) -> ClientConfig {
    ClientConfig {
        timeouts: Timeouts {
            connect: Some(a.timeout_connect),
            first_token: a
                .timeout_first_token
                .map_or(Some(DEFAULT_FIRST_TOKEN_TIMEOUT), |l| l.0),
            stall: a.timeout_stall.map_or(Some(DEFAULT_STALL_TIMEOUT), |l| l.0),
            total: a.timeout_total,
        },
        record_chunks: a.record_chunks,
        keep_text: true,
        rx_timestamps: a.rx_timestamps,
        keepalive: !a.no_keepalive,
        ..ClientConfig::default()
    }
}

fn secs(d: Option<Duration>) -> Option<f64> {
    d.map(|d| d.as_secs_f64())
}

/// The salt of a run's synthetic prompts: a hash of its id (never 0, which means
/// none), so a log says which text was sent.
pub fn prompt_salt(run_id: &str) -> u64 {
    run_id
        .bytes()
        .fold(0xC0FF_EE00_u64, |h, b| mix(h ^ u64::from(b)))
        .max(1)
}
