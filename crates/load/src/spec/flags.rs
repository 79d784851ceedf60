//! The flags of a benchmark as the command line parsed them, each on its own
//! ([`Flags`]), and vLLM's dataset names ([`DatasetName`]).

use std::path::PathBuf;
use std::time::Duration;

use tpscope_client::{Api, RxTimestamps};
use tpscope_model::units::Warmup;
use tpscope_record::Dispatch;

use crate::dist::LengthDist;
use crate::schedule::Arrival;
use crate::workload::trace::TraceFormat;

/// vLLM's `--dataset-name` values that tpscope has an equivalent for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DatasetName {
    /// Synthetic prompts of `--random-input-len` / `--random-output-len` tokens.
    Random,
    /// A ShareGPT file (`--dataset-path`), as `--sharegpt`.
    ShareGpt,
    /// A JSONL file of prompts (`--dataset-path`), as `--dataset`.
    Custom,
}

/// A `--dataset-name` tpscope has no equivalent for.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error(
    "tpscope has no `{0}` dataset (expected random, sharegpt or custom; \
     --trace replays Mooncake and Azure traces)"
)]
pub struct BadDatasetName(pub String);

impl std::str::FromStr for DatasetName {
    type Err = BadDatasetName;

    fn from_str(s: &str) -> Result<DatasetName, BadDatasetName> {
        match s.trim() {
            "random" => Ok(DatasetName::Random),
            "sharegpt" => Ok(DatasetName::ShareGpt),
            "custom" => Ok(DatasetName::Custom),
            other => Err(BadDatasetName(other.to_string())),
        }
    }
}

/// The flags of a benchmark as given: each value parsed on its own, not yet
/// checked against the others (the command line's parsers fill it).
#[derive(Clone, Debug, PartialEq)]
pub struct Flags {
    /// `--url` (`--base-url`).
    pub url: Option<String>,
    /// `--endpoint` (vLLM's: the API path under the base URL).
    pub endpoint: Option<String>,
    /// `--api` (`None`: chat, or what `--endpoint` names).
    pub api: Option<Api>,
    /// `--model`.
    pub model: Option<String>,
    /// `--api-key`.
    pub api_key: Option<String>,
    /// `--header`s.
    pub headers: Vec<(String, String)>,
    /// `--extra-body`.
    pub extra_body: Option<serde_json::Map<String, serde_json::Value>>,
    /// `--no-usage`.
    pub no_usage: bool,
    /// `--input-tokens`.
    pub input_tokens: Option<LengthDist>,
    /// `--output-tokens`.
    pub output_tokens: Option<LengthDist>,
    /// `--dataset`.
    pub dataset: Option<PathBuf>,
    /// `--sharegpt`.
    pub sharegpt: Option<PathBuf>,
    /// `--dataset-name` (vLLM's).
    pub dataset_name: Option<DatasetName>,
    /// `--dataset-path` (vLLM's).
    pub dataset_path: Option<PathBuf>,
    /// `--ignore-eos` (`Some(true)`), `--no-ignore-eos` (`Some(false)`); `None`:
    /// on when every request asks for the same fixed output length.
    pub ignore_eos: Option<bool>,
    /// `--trace`.
    pub trace: Option<(TraceFormat, PathBuf)>,
    /// `--time-scale`.
    pub time_scale: f64,
    /// `--seed`.
    pub seed: u64,
    /// `--same-prompts`.
    pub same_prompts: bool,
    /// `--concurrency` (a list sweeps it).
    pub concurrency: Vec<u32>,
    /// `--requests`.
    pub requests: Option<u64>,
    /// `--duration`.
    pub duration: Option<Duration>,
    /// `--rate` (a list sweeps it; `None` is `inf`, a closed loop).
    pub rate: Vec<Option<f64>>,
    /// `--arrival`.
    pub arrival: Option<Arrival>,
    /// `--burstiness`.
    pub burstiness: Option<f64>,
    /// `--ramp-up`: the rate (open loop) or the cap (closed loop) grows.
    pub ramp_up: Option<crate::ramp::Ramp>,
    /// `--warmup`.
    pub warmup: Option<Warmup>,
    /// `--dispatch`.
    pub dispatch: Dispatch,
    /// `--drain-timeout`.
    pub drain_timeout: Duration,
    /// `--max-retries`.
    pub max_retries: u32,
    /// `--retry-backoff`.
    pub retry_backoff: Duration,
    /// `--timeout-connect`.
    pub timeout_connect: Duration,
    /// `--timeout-first-token`: `None` when not given (the default applies),
    /// `Some(None)` for `none` (no limit).
    pub timeout_first_token: Option<Option<Duration>>,
    /// `--timeout-stall`, as `--timeout-first-token`.
    pub timeout_stall: Option<Option<Duration>>,
    /// `--timeout-total`.
    pub timeout_total: Option<Duration>,
    /// `--out` (`-`: standard output).
    pub out: Option<PathBuf>,
    /// `--overwrite`: an existing `--out` file may be replaced.
    pub overwrite: bool,
    /// `--max-error-rate`: the largest share of failed requests a run may have.
    pub max_error_rate: Option<f64>,
    /// `--sample-interval`.
    pub sample_interval: Duration,
    /// `--record-chunks`.
    pub record_chunks: bool,
    /// `--rx-timestamps`.
    pub rx_timestamps: RxTimestamps,
    /// `--no-keepalive`: a new connection per request.
    pub no_keepalive: bool,
    /// `--label`s.
    pub labels: Vec<(String, String)>,
    /// `--tokenizer`: of exact-length prompts and of counts without `usage`.
    pub tokenizer: tpscope_tokens::Tokenizer,
    /// `--sessions`: multi-turn sessions.
    pub sessions: Option<u64>,
    /// `--turns`: turns per session.
    pub turns: Option<LengthDist>,
    /// `--think-time`: the pause between a reply and the next turn.
    pub think_time: Option<crate::workload::sessions::ThinkTime>,
    /// `--conversations`: a file of multi-turn conversations.
    pub conversations: Option<PathBuf>,
    /// `--prefix-count`: distinct shared prefixes.
    pub prefix_count: Option<u32>,
    /// `--prefix-len`: tokens of each shared prefix.
    pub prefix_len: Option<u32>,
    /// `--prefix-share`: the share of requests that start with a shared prefix.
    pub prefix_share: Option<f64>,
}
