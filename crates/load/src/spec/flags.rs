//! The one definition of `tpscope bench`'s load flags ([`Flags`]): each field's
//! doc comment is its help text, and with the `clap` feature its attribute is the
//! flag (name, aliases, default, value parser in `parse.rs`), so a new flag is one
//! field here, its default in [`Flags::default`], and, for a request-body field, one
//! line in [`Flags::body_fields`]: the spec keeps the flags as given
//! ([`BenchSpec::flags`](super::BenchSpec::flags)) and the run record lists those
//! given on the command line. Also vLLM's dataset names
//! ([`DatasetName`]) and the defaults as written on the command line.

// The doc comments are the flags' help text, as the user reads it: `<shape>` and
// `<UTC time>` there are placeholders, not HTML.
#![allow(rustdoc::invalid_html_tags)]

use std::path::PathBuf;
use std::time::Duration;

use tpscope_client::{Api, RxTimestamps};
use tpscope_model::units::{Warmup, parse_duration};
use tpscope_record::Dispatch;
use tpscope_tokens::Tokenizer;

#[cfg(feature = "clap")]
use super::parse::*;
use crate::dist::LengthDist;
use crate::ramp::{Ramp, RampShape};
use crate::schedule::Arrival;
use crate::workload::sessions::ThinkTime;
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

/// The defaults of the flags that have one, as written on the command line (the
/// help shows them; [`Flags::default`] parses them).
pub mod defaults {
    /// `--tokenizer`.
    pub const TOKENIZER: &str = "o200k_base";
    /// `--time-scale`.
    pub const TIME_SCALE: f64 = 1.0;
    /// `--dispatch`.
    pub const DISPATCH: &str = "work-conserving";
    /// `--drain-timeout`.
    pub const DRAIN_TIMEOUT: &str = "30s";
    /// `--retry-backoff`.
    pub const RETRY_BACKOFF: &str = "500ms";
    /// `--timeout-connect`.
    pub const TIMEOUT_CONNECT: &str = "10s";
    /// `--sample-interval`.
    pub const SAMPLE_INTERVAL: &str = "10ms";
    /// `--rx-timestamps`.
    pub const RX_TIMESTAMPS: &str = "kernel";
}

/// A time limit that `none` lifts (`--timeout-first-token`, `--timeout-stall`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Limit(pub Option<Duration>);

/// The load flags of `tpscope bench` as given: each value parsed on its own, not
/// yet checked against the others ([`BenchSpec::from_flags`](super::BenchSpec::from_flags)
/// does). The command line adds the target's simulator, the report's and the
/// output's own flags beside these.
#[derive(Clone, Debug, PartialEq)]
#[cfg_attr(feature = "clap", derive(clap::Args))]
pub struct Flags {
    /// Base URL of an OpenAI-compatible server, up to the API version (e.g.
    /// http://127.0.0.1:8000/v1; one without a path gets /v1, as in vLLM).
    /// Without it, the built-in simulator is started in-process and measured.
    #[cfg_attr(
        feature = "clap",
        arg(
            long,
            visible_alias = "base-url",
            value_name = "URL",
            help_heading = "Target"
        )
    )]
    pub url: Option<String>,
    /// API to call: chat (/chat/completions), completions (/completions),
    /// responses (OpenAI Responses, /responses) or anthropic (Anthropic
    /// Messages, /messages). Default: chat, or what --endpoint names.
    #[cfg_attr(feature = "clap", arg(long, value_parser = parse_api, help_heading = "Target"))]
    pub api: Option<Api>,
    /// vLLM's endpoint: the API's path under the base URL, e.g.
    /// /v1/chat/completions, /v1/completions, /v1/responses or /v1/messages (sets --api and
    /// the URL's /v1).
    #[cfg_attr(
        feature = "clap",
        arg(long, value_name = "PATH", help_heading = "Target")
    )]
    pub endpoint: Option<String>,
    /// Model name to request (default: the first model of GET /models).
    #[cfg_attr(feature = "clap", arg(long, help_heading = "Target"))]
    pub model: Option<String>,
    /// API key, sent as `Authorization: Bearer` (with --api anthropic as
    /// `x-api-key`); never written to the log.
    #[cfg_attr(
        feature = "clap",
        arg(
            long,
            env = "OPENAI_API_KEY",
            hide_env_values = true,
            help_heading = "Target"
        )
    )]
    pub api_key: Option<String>,
    /// Extra request header `Name: value` (repeatable).
    #[cfg_attr(feature = "clap", arg(long = "header", value_name = "K:V", value_parser = parse_header, help_heading = "Target"))]
    pub headers: Vec<(String, String)>,
    /// Extra JSON fields merged into every request body, e.g. '{"ignore_eos": true}'.
    #[cfg_attr(feature = "clap", arg(long, value_name = "JSON", value_parser = parse_extra_body, help_heading = "Target"))]
    pub extra_body: Option<serde_json::Map<String, serde_json::Value>>,
    /// Sampling temperature sent in every request body (`temperature`; 0 is
    /// greedy). Overrides a `temperature` in --extra-body. Default: the server's.
    #[cfg_attr(feature = "clap", arg(long, value_name = "T", value_parser = parse_non_negative, help_heading = "Target"))]
    pub temperature: Option<f64>,
    /// Do not ask for `stream_options.include_usage` (for servers that reject it);
    /// tokens are then counted from the text with --tokenizer.
    #[cfg_attr(feature = "clap", arg(long, help_heading = "Target"))]
    pub no_usage: bool,
    /// Tokenizer of exact-length prompts and of counts without usage: o200k_base
    /// (default), cl100k_base, or hf:PATH (a Hugging Face tokenizer.json, or a model
    /// directory holding one; loaded offline). The run record names it.
    #[cfg_attr(feature = "clap", arg(long, value_name = "NAME|hf:PATH", value_parser = parse_tokenizer, default_value = defaults::TOKENIZER, help_heading = "Target"))]
    pub tokenizer: Tokenizer,

    /// Prompt length in tokens (under --tokenizer): N or a distribution
    /// (uniform:LO..HI, normal:MEAN,SD, lognormal:MEAN,SD, exp:MEAN, azure).
    /// Default without any workload flag: (input, output) pairs drawn from the
    /// bundled Azure 2023 conversation trace.
    #[cfg_attr(feature = "clap", arg(long, visible_alias = "random-input-len", value_name = "N|DIST", value_parser = parse_input_dist, help_heading = "Workload"))]
    pub input_tokens: Option<LengthDist>,
    /// Output length (`max_tokens`): N or a distribution, as --input-tokens.
    #[cfg_attr(feature = "clap", arg(long, visible_alias = "random-output-len", value_name = "N|DIST", value_parser = parse_output_dist, help_heading = "Workload"))]
    pub output_tokens: Option<LengthDist>,
    /// JSONL file of prompts: each line a string, {"prompt": ...} or {"messages":
    /// [...]}, optionally with "max_tokens"; OpenAI batch lines ({"body": ...}) too.
    #[cfg_attr(
        feature = "clap",
        arg(long, value_name = "FILE", help_heading = "Workload")
    )]
    pub dataset: Option<PathBuf>,
    /// ShareGPT file (JSON array or JSONL of {"conversations": [...]}): the first
    /// human turn is the prompt; a following reply sets the output length.
    #[cfg_attr(
        feature = "clap",
        arg(long, value_name = "FILE", help_heading = "Workload")
    )]
    pub sharegpt: Option<PathBuf>,
    /// Multi-turn: this many sessions, each sending its turns in order, each turn's
    /// prompt the whole history with the server's replies. Turns are drawn from the
    /// single-turn workload (--input-tokens, --dataset, ...).
    #[cfg_attr(feature = "clap", arg(long, value_name = "N", value_parser = parse_positive_u64, help_heading = "Workload"))]
    pub sessions: Option<u64>,
    /// Turns per session: N or a distribution, as --input-tokens (default 3).
    #[cfg_attr(feature = "clap", arg(long, value_name = "N|DIST", value_parser = parse_turns, help_heading = "Workload"))]
    pub turns: Option<LengthDist>,
    /// Pause between a reply and the session's next turn: a duration (2s),
    /// exp:MEAN or uniform:LO..HI.
    #[cfg_attr(feature = "clap", arg(long, value_name = "DIST", value_parser = parse_think_time, help_heading = "Workload"))]
    pub think_time: Option<ThinkTime>,
    /// Multi-turn conversations from a file, one session each: ShareGPT
    /// ({"conversations": [...]}, JSON array or JSONL) or OpenAI chat JSONL
    /// ({"messages": [...]} with several user turns). The file's assistant turns
    /// are replaced by the server's replies.
    #[cfg_attr(
        feature = "clap",
        arg(long, value_name = "FILE", help_heading = "Workload")
    )]
    pub conversations: Option<PathBuf>,
    /// Shared prefixes: prompts start with one of --prefix-count prefixes of this
    /// many tokens, then a suffix of --input-tokens (vLLM's prefix_repetition).
    #[cfg_attr(feature = "clap", arg(long, visible_alias = "prefix-repetition-prefix-len", value_name = "L", value_parser = parse_positive_u32, help_heading = "Workload"))]
    pub prefix_len: Option<u32>,
    /// Shared prefixes: how many distinct prefixes (default 1).
    #[cfg_attr(feature = "clap", arg(long, visible_alias = "prefix-repetition-num-prefixes", value_name = "K", value_parser = parse_positive_u32, help_heading = "Workload"))]
    pub prefix_count: Option<u32>,
    /// Shared prefixes: the share of requests that start with a shared prefix, in
    /// 0..=1 (default 1); the others get a prefix of the same length of their own.
    #[cfg_attr(
        feature = "clap",
        arg(long, value_name = "R", help_heading = "Workload")
    )]
    pub prefix_share: Option<f64>,
    /// vLLM's dataset names: random (synthetic prompts; 1024 tokens in, 128 out
    /// unless --random-input-len/--random-output-len), sharegpt (as --sharegpt) or
    /// custom (a JSONL of prompts, as --dataset), the last two read from
    /// --dataset-path. vLLM's others (sonnet, hf, …) are not available.
    #[cfg_attr(feature = "clap", arg(long, value_name = "NAME", value_parser = parse_dataset_name, help_heading = "Workload"))]
    pub dataset_name: Option<DatasetName>,
    /// The file of --dataset-name sharegpt or custom.
    #[cfg_attr(
        feature = "clap",
        arg(long, value_name = "FILE", help_heading = "Workload")
    )]
    pub dataset_path: Option<PathBuf>,
    /// Send `ignore_eos: true` so every reply runs to its `max_tokens` (vLLM's
    /// flag). On by default when --output-tokens is one fixed N, with `min_tokens: N`
    /// where every request asks for N: outputs then have exactly N tokens on
    /// servers that honour them (vLLM, SGLang, llama.cpp, the built-in simulator).
    #[cfg_attr(
        feature = "clap",
        arg(long, overrides_with = "no_ignore_eos", help_heading = "Workload")
    )]
    pub ignore_eos: bool,
    /// Do not send `ignore_eos`/`min_tokens`: --output-tokens is then only a cap.
    #[cfg_attr(
        feature = "clap",
        arg(long, overrides_with = "ignore_eos", help_heading = "Workload")
    )]
    pub no_ignore_eos: bool,
    /// Replay a trace's arrival times and lengths: mooncake:FILE (JSONL) or
    /// azure:FILE (Azure LLM inference CSV). With --rate, only its lengths are used.
    #[cfg_attr(feature = "clap", arg(long, value_name = "KIND:FILE", value_parser = parse_trace, help_heading = "Workload"))]
    pub trace: Option<(TraceFormat, PathBuf)>,
    /// Multiply the trace's arrival offsets by F (0.5 replays twice as fast).
    #[cfg_attr(feature = "clap", arg(
        long,
        default_value_t = defaults::TIME_SCALE,
        value_name = "F",
        help_heading = "Workload"
    ))]
    pub time_scale: f64,
    /// Seed of lengths, prompts, arrivals and retry jitter (same seed, same requests).
    #[cfg_attr(feature = "clap", arg(long, default_value_t = 0, value_parser = parse_count::<u64>, help_heading = "Workload"))]
    pub seed: u64,
    /// Send the same prompt text in every run with this --seed. By default the
    /// text of synthetic prompts is salted by the run id (same lengths, other
    /// words), so a repeated run does not find the last run's prompts in the
    /// server's prefix cache. Prompts from a file are always sent as written.
    #[cfg_attr(feature = "clap", arg(long, help_heading = "Workload"))]
    pub same_prompts: bool,

    /// The in-flight cap; a comma list (1,8,32,128) sweeps it, one run per level.
    /// Default 32 in closed loop; no cap in open loop or trace replay.
    #[cfg_attr(feature = "clap", arg(long, visible_alias = "max-concurrency", value_name = "N[,N…]", value_delimiter = ',', value_parser = parse_positive_u32, help_heading = "Load"))]
    pub concurrency: Vec<u32>,
    /// Requests per run (default: 10 × the cap, at least 40, in closed loop; the
    /// whole file or trace; with --duration or in open loop, as many as are ready
    /// within it).
    #[cfg_attr(feature = "clap", arg(long, visible_alias = "num-prompts", value_name = "N", value_parser = parse_positive_u64, help_heading = "Load"))]
    pub requests: Option<u64>,
    /// Stop admitting after this long (e.g. 60s); requests still queued then are
    /// recorded as cancelled, in-flight ones finish. Alone in closed loop, the
    /// backlog is endless (one cap's worth always waits). Open loop default: 30s.
    #[cfg_attr(feature = "clap", arg(long, value_name = "DUR", value_parser = parse_duration_arg, help_heading = "Load"))]
    pub duration: Option<Duration>,
    /// Open loop: requests per second; a comma list (1,2,4) sweeps it. `inf` means
    /// closed loop (as in vLLM).
    #[cfg_attr(feature = "clap", arg(long, visible_alias = "request-rate", value_name = "R[,R…]", value_delimiter = ',', value_parser = parse_rate, help_heading = "Load"))]
    pub rate: Vec<Option<f64>>,
    /// Inter-arrival process of the open loop: poisson, constant, or gamma:<shape>
    /// (shape < 1 burstier than Poisson).
    #[cfg_attr(feature = "clap", arg(long, value_name = "PROCESS", value_parser = parse_arrival, help_heading = "Load"))]
    pub arrival: Option<Arrival>,
    /// vLLM's name for the gamma shape (1 = Poisson); same as --arrival gamma:F.
    #[cfg_attr(feature = "clap", arg(long, value_name = "F", conflicts_with = "arrival", value_parser = parse_burstiness, help_heading = "Load"))]
    pub burstiness: Option<f64>,
    /// Grow the load over the run: linear:FROM..TO or exponential:FROM..TO — the
    /// rate with --rate TO (requests per second), else the concurrency cap
    /// (closed loop; --concurrency, if given, is TO). Over --duration when given
    /// (a function of time), else over the requests (of the request's index).
    #[cfg_attr(feature = "clap", arg(long, value_name = "SHAPE:FROM..TO", value_parser = parse_ramp, help_heading = "Load"))]
    pub ramp_up: Option<Ramp>,
    /// vLLM's ramp: linear or exponential, from --ramp-up-start-rps to
    /// --ramp-up-end-rps (same as --ramp-up SHAPE:START..END --rate END).
    #[cfg_attr(feature = "clap", arg(long, value_name = "SHAPE", value_parser = ["linear", "exponential"], conflicts_with = "ramp_up", requires_all = ["ramp_up_start_rps", "ramp_up_end_rps"], help_heading = "Load"))]
    pub ramp_up_strategy: Option<String>,
    /// vLLM's ramp start rate (with --ramp-up-strategy).
    #[cfg_attr(
        feature = "clap",
        arg(
            long,
            value_name = "R",
            requires = "ramp_up_strategy",
            help_heading = "Load"
        )
    )]
    pub ramp_up_start_rps: Option<f64>,
    /// vLLM's ramp end rate (with --ramp-up-strategy).
    #[cfg_attr(
        feature = "clap",
        arg(
            long,
            value_name = "R",
            requires = "ramp_up_strategy",
            help_heading = "Load"
        )
    )]
    pub ramp_up_end_rps: Option<f64>,
    /// Warm-up before the measured run: N requests or a time (10s). Warm-up
    /// requests run the same load, finish, and are not written to the log.
    #[cfg_attr(feature = "clap", arg(long, value_name = "N|DUR", value_parser = parse_warmup_arg, help_heading = "Load"))]
    pub warmup: Option<Warmup>,
    /// How queued requests pass the cap: work-conserving (a freed slot is filled
    /// at once) or waves (send a batch of N, wait for all of it, send the next).
    #[cfg_attr(feature = "clap", arg(long, default_value = defaults::DISPATCH, value_parser = parse_dispatch, help_heading = "Load"))]
    pub dispatch: Dispatch,
    /// After the run stops admitting (--duration, Ctrl-C), how long in-flight
    /// requests may finish before they are cancelled.
    #[cfg_attr(feature = "clap", arg(long, default_value = defaults::DRAIN_TIMEOUT, value_name = "DUR", value_parser = parse_duration_arg, help_heading = "Load"))]
    pub drain_timeout: Duration,

    /// Retries per request (429, 5xx, connection errors, cut or stalled streams),
    /// holding the slot while backing off.
    #[cfg_attr(feature = "clap", arg(
        long,
        default_value_t = 0,
        value_name = "N",
        value_parser = parse_count::<u32>,
        help_heading = "Retries and timeouts"
    ))]
    pub max_retries: u32,
    /// First back-off; doubles per retry (jittered, at most 30s), never shorter
    /// than the server's Retry-After.
    #[cfg_attr(feature = "clap", arg(long, default_value = defaults::RETRY_BACKOFF, value_name = "DUR", value_parser = parse_duration_arg, help_heading = "Retries and timeouts"))]
    pub retry_backoff: Duration,
    /// Limit for opening a connection.
    #[cfg_attr(feature = "clap", arg(long, default_value = defaults::TIMEOUT_CONNECT, value_name = "DUR", value_parser = parse_duration_arg, help_heading = "Retries and timeouts"))]
    pub timeout_connect: Duration,
    /// Limit from an attempt's start to its first token [default: 300s; `none`
    /// lifts it]. The model lookup (GET /models) waits as long, at most 30s.
    #[cfg_attr(feature = "clap", arg(long, value_name = "DUR|none", value_parser = parse_limit, help_heading = "Retries and timeouts"))]
    pub timeout_first_token: Option<Limit>,
    /// Limit between two chunks once streaming began [default: 60s; `none` lifts it].
    #[cfg_attr(feature = "clap", arg(long, value_name = "DUR|none", value_parser = parse_limit, help_heading = "Retries and timeouts"))]
    pub timeout_stall: Option<Limit>,
    /// Limit for a whole attempt (default: none).
    #[cfg_attr(feature = "clap", arg(long, value_name = "DUR", value_parser = parse_limit_above_zero, help_heading = "Retries and timeouts"))]
    pub timeout_total: Option<Duration>,

    /// Span log to write (default: a new tpscope-run-<UTC time>-<salt>.jsonl
    /// here); `-` writes it to standard output (the report then goes to standard
    /// error). An existing file is never replaced unless --overwrite; a FIFO or
    /// pipe is written to. A sweep writes all its runs to this one file.
    #[cfg_attr(
        feature = "clap",
        arg(long, value_name = "FILE|-", help_heading = "Output")
    )]
    pub out: Option<PathBuf>,
    /// Replace an existing --out file.
    #[cfg_attr(feature = "clap", arg(long, help_heading = "Output"))]
    pub overwrite: bool,
    /// For CI: exit 1 when a run's share of failed requests (error / (ok +
    /// error)) is above this, as a fraction (0.05) or a percentage (5%).
    #[cfg_attr(feature = "clap", arg(long, value_name = "F|P%", value_parser = parse_error_rate, help_heading = "Output"))]
    pub max_error_rate: Option<f64>,
    /// Cadence of `sample` records (in-flight, queue depth, cap).
    #[cfg_attr(feature = "clap", arg(long, default_value = defaults::SAMPLE_INTERVAL, value_name = "DUR", value_parser = parse_sample_interval, help_heading = "Output"))]
    pub sample_interval: Duration,
    /// Record every chunk's arrival (for inter-token latency).
    #[cfg_attr(feature = "clap", arg(long, help_heading = "Output"))]
    pub record_chunks: bool,
    /// Where arrival times (first byte, first and last token, chunks) come from:
    /// kernel (when the bytes reached the host: the kernel's receive timestamp,
    /// Linux only, elsewhere as user) or user (when the client's task got them).
    #[cfg_attr(feature = "clap", arg(long, default_value = defaults::RX_TIMESTAMPS, value_name = "SOURCE", value_parser = parse_rx_timestamps, help_heading = "Output"))]
    pub rx_timestamps: RxTimestamps,
    /// Open a new connection for every request and ask the server to close it
    /// (`Connection: close`). By default connections are reused; a request lost
    /// because the server closed a reused connection before replying is resent
    /// at once on a new one (counted as a resend, not a retry).
    #[cfg_attr(feature = "clap", arg(long, help_heading = "Target"))]
    pub no_keepalive: bool,
    /// Free-form label `key=value` for the run record (repeatable).
    #[cfg_attr(feature = "clap", arg(long = "label", value_name = "K=V", value_parser = parse_label, help_heading = "Output"))]
    pub labels: Vec<(String, String)>,
}

impl Default for Flags {
    /// The flags as the command line leaves them when none is given.
    fn default() -> Flags {
        let duration = |s: &str| parse_duration(s).expect("a default duration parses");
        Flags {
            url: None,
            api: None,
            endpoint: None,
            model: None,
            api_key: None,
            headers: Vec::new(),
            extra_body: None,
            temperature: None,
            no_usage: false,
            tokenizer: defaults::TOKENIZER
                .parse()
                .expect("the default tokenizer parses"),
            input_tokens: None,
            output_tokens: None,
            dataset: None,
            sharegpt: None,
            sessions: None,
            turns: None,
            think_time: None,
            conversations: None,
            prefix_len: None,
            prefix_count: None,
            prefix_share: None,
            dataset_name: None,
            dataset_path: None,
            ignore_eos: false,
            no_ignore_eos: false,
            trace: None,
            time_scale: defaults::TIME_SCALE,
            seed: 0,
            same_prompts: false,
            concurrency: Vec::new(),
            requests: None,
            duration: None,
            rate: Vec::new(),
            arrival: None,
            burstiness: None,
            ramp_up: None,
            ramp_up_strategy: None,
            ramp_up_start_rps: None,
            ramp_up_end_rps: None,
            warmup: None,
            dispatch: defaults::DISPATCH
                .parse()
                .expect("the default dispatch parses"),
            drain_timeout: duration(defaults::DRAIN_TIMEOUT),
            max_retries: 0,
            retry_backoff: duration(defaults::RETRY_BACKOFF),
            timeout_connect: duration(defaults::TIMEOUT_CONNECT),
            timeout_first_token: None,
            timeout_stall: None,
            timeout_total: None,
            out: None,
            overwrite: false,
            max_error_rate: None,
            sample_interval: duration(defaults::SAMPLE_INTERVAL),
            record_chunks: false,
            rx_timestamps: defaults::RX_TIMESTAMPS
                .parse()
                .expect("the default source parses"),
            no_keepalive: false,
            labels: Vec::new(),
        }
    }
}

impl Flags {
    /// The request-body fields the flags set, each under the API's name: merged
    /// over `--extra-body` into every request (a flag given wins).
    pub fn body_fields(&self) -> serde_json::Map<String, serde_json::Value> {
        let mut body = serde_json::Map::new();
        let mut set = |key: &str, v: Option<serde_json::Value>| {
            if let Some(v) = v {
                body.insert(key.to_string(), v);
            }
        };
        set("temperature", self.temperature.map(Into::into));
        body
    }

    /// `--ignore-eos` (`Some(true)`), `--no-ignore-eos` (`Some(false)`); `None`:
    /// on when every request asks for the same fixed output length.
    pub fn ignore_eos(&self) -> Option<bool> {
        match (self.ignore_eos, self.no_ignore_eos) {
            (true, _) => Some(true),
            (_, true) => Some(false),
            _ => None,
        }
    }

    /// The rates, with vLLM's ramp's end rate when no `--rate` is given.
    pub fn rates(&self) -> Vec<Option<f64>> {
        match (self.rate.is_empty(), self.ramp_up_end_rps) {
            // vLLM's ramp is of the rate, ending at its end rate.
            (true, Some(end)) => vec![Some(end)],
            _ => self.rate.clone(),
        }
    }

    /// `--ramp-up`, or vLLM's `--ramp-up-strategy` with its start and end rates,
    /// unchecked (the spec checks every ramp and names `--ramp-up` when one cannot
    /// ramp).
    pub fn ramp(&self) -> Option<Ramp> {
        self.ramp_up.or_else(|| {
            let shape = match self.ramp_up_strategy.as_deref()? {
                "exponential" => RampShape::Exponential,
                _ => RampShape::Linear,
            };
            Some(Ramp {
                shape,
                from: self.ramp_up_start_rps?,
                to: self.ramp_up_end_rps?,
            })
        })
    }
}
