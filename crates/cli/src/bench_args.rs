//! The flags of `tpscope bench` (but the `--sim-*` ones, in `bench_sim_flags.rs`),
//! each parsed on its own, and their hand-over to the load engine's spec, which
//! checks them together.

use std::path::PathBuf;
use std::time::Duration;

use tpscope_client::{Api, RxTimestamps};
use tpscope_load::ramp::{Ramp, RampShape};
use tpscope_load::spec::{DatasetName, Flags};
use tpscope_load::workload::trace::{TraceFormat, parse_trace_arg};
use tpscope_load::{Arrival, Column, LengthDist};
use tpscope_model::units::{Warmup, parse_duration, parse_warmup};
use tpscope_record::Dispatch;

use crate::bench_sim_flags::SimFlags;

/// Flags of `tpscope bench`.
///
/// Modes: with no `--rate` and no `--trace` it is a closed loop — every request is
/// ready at the start and waits in the queue for one of `--concurrency` slots (a
/// backlog, like a batch job); with `--rate` it is an open loop (arrivals on a
/// schedule; those beyond the cap wait in the queue, and that wait is recorded);
/// with `--trace` the trace's own arrival times are replayed.
#[derive(clap::Args, Debug)]
// Negative numbers reach the value parsers, which say which bound they break.
#[command(after_help = AFTER_HELP, allow_negative_numbers = true)]
pub struct BenchArgs {
    /// Base URL of an OpenAI-compatible server, up to the API version (e.g.
    /// http://127.0.0.1:8000/v1; one without a path gets /v1, as in vLLM).
    /// Without it, the built-in simulator is started in-process and measured.
    #[arg(
        long,
        visible_alias = "base-url",
        value_name = "URL",
        help_heading = "Target"
    )]
    pub url: Option<String>,
    /// API to call: chat (/chat/completions), completions (/completions),
    /// responses (OpenAI Responses, /responses) or anthropic (Anthropic
    /// Messages, /messages). Default: chat, or what --endpoint names.
    #[arg(long, value_parser = parse_api, help_heading = "Target")]
    pub api: Option<Api>,
    /// vLLM's endpoint: the API's path under the base URL, e.g.
    /// /v1/chat/completions, /v1/completions, /v1/responses or /v1/messages (sets --api and
    /// the URL's /v1).
    #[arg(long, value_name = "PATH", help_heading = "Target")]
    pub endpoint: Option<String>,
    /// Model name to request (default: the first model of GET /models).
    #[arg(long, help_heading = "Target")]
    pub model: Option<String>,
    /// API key, sent as `Authorization: Bearer` (with --api anthropic as
    /// `x-api-key`); never written to the log.
    #[arg(
        long,
        env = "OPENAI_API_KEY",
        hide_env_values = true,
        help_heading = "Target"
    )]
    pub api_key: Option<String>,
    /// Extra request header `Name: value` (repeatable).
    #[arg(long = "header", value_name = "K:V", value_parser = parse_header, help_heading = "Target")]
    pub headers: Vec<(String, String)>,
    /// Extra JSON fields merged into every request body, e.g. '{"ignore_eos": true}'.
    #[arg(long, value_name = "JSON", value_parser = parse_extra_body, help_heading = "Target")]
    pub extra_body: Option<serde_json::Map<String, serde_json::Value>>,
    /// Do not ask for `stream_options.include_usage` (for servers that reject it);
    /// tokens are then counted from the text with --tokenizer.
    #[arg(long, help_heading = "Target")]
    pub no_usage: bool,
    /// Tokenizer of exact-length prompts and of counts without usage: o200k_base
    /// (default), cl100k_base, or hf:PATH (a Hugging Face tokenizer.json, or a model
    /// directory holding one; loaded offline). The run record names it.
    #[arg(long, value_name = "NAME|hf:PATH", value_parser = parse_tokenizer, default_value = "o200k_base", help_heading = "Target")]
    pub tokenizer: tpscope_tokens::Tokenizer,

    /// Prompt length in tokens (under --tokenizer): N or a distribution
    /// (uniform:LO..HI, normal:MEAN,SD, lognormal:MEAN,SD, exp:MEAN, azure).
    /// Default without any workload flag: (input, output) pairs drawn from the
    /// bundled Azure 2023 conversation trace.
    #[arg(long, visible_alias = "random-input-len", value_name = "N|DIST", value_parser = parse_input_dist, help_heading = "Workload")]
    pub input_tokens: Option<LengthDist>,
    /// Output length (`max_tokens`): N or a distribution, as --input-tokens.
    #[arg(long, visible_alias = "random-output-len", value_name = "N|DIST", value_parser = parse_output_dist, help_heading = "Workload")]
    pub output_tokens: Option<LengthDist>,
    /// JSONL file of prompts: each line a string, {"prompt": ...} or {"messages":
    /// [...]}, optionally with "max_tokens"; OpenAI batch lines ({"body": ...}) too.
    #[arg(long, value_name = "FILE", help_heading = "Workload")]
    pub dataset: Option<PathBuf>,
    /// ShareGPT file (JSON array or JSONL of {"conversations": [...]}): the first
    /// human turn is the prompt; a following reply sets the output length.
    #[arg(long, value_name = "FILE", help_heading = "Workload")]
    pub sharegpt: Option<PathBuf>,
    /// Multi-turn: this many sessions, each sending its turns in order, each turn's
    /// prompt the whole history with the server's replies. Turns are drawn from the
    /// single-turn workload (--input-tokens, --dataset, ...).
    #[arg(long, value_name = "N", value_parser = parse_positive_u64, help_heading = "Workload")]
    pub sessions: Option<u64>,
    /// Turns per session: N or a distribution, as --input-tokens (default 3).
    #[arg(long, value_name = "N|DIST", value_parser = parse_turns, help_heading = "Workload")]
    pub turns: Option<LengthDist>,
    /// Pause between a reply and the session's next turn: a duration (2s),
    /// exp:MEAN or uniform:LO..HI.
    #[arg(long, value_name = "DIST", value_parser = parse_think_time, help_heading = "Workload")]
    pub think_time: Option<tpscope_load::workload::sessions::ThinkTime>,
    /// Multi-turn conversations from a file, one session each: ShareGPT
    /// ({"conversations": [...]}, JSON array or JSONL) or OpenAI chat JSONL
    /// ({"messages": [...]} with several user turns). The file's assistant turns
    /// are replaced by the server's replies.
    #[arg(long, value_name = "FILE", help_heading = "Workload")]
    pub conversations: Option<PathBuf>,
    /// Shared prefixes: prompts start with one of --prefix-count prefixes of this
    /// many tokens, then a suffix of --input-tokens (vLLM's prefix_repetition).
    #[arg(long, visible_alias = "prefix-repetition-prefix-len", value_name = "L", value_parser = parse_positive_u32, help_heading = "Workload")]
    pub prefix_len: Option<u32>,
    /// Shared prefixes: how many distinct prefixes (default 1).
    #[arg(long, visible_alias = "prefix-repetition-num-prefixes", value_name = "K", value_parser = parse_positive_u32, help_heading = "Workload")]
    pub prefix_count: Option<u32>,
    /// Shared prefixes: the share of requests that start with a shared prefix, in
    /// 0..=1 (default 1); the others get a prefix of the same length of their own.
    #[arg(long, value_name = "R", help_heading = "Workload")]
    pub prefix_share: Option<f64>,
    /// vLLM's dataset names: random (synthetic prompts; 1024 tokens in, 128 out
    /// unless --random-input-len/--random-output-len), sharegpt (as --sharegpt) or
    /// custom (a JSONL of prompts, as --dataset), the last two read from
    /// --dataset-path. vLLM's others (sonnet, hf, …) are not available.
    #[arg(long, value_name = "NAME", value_parser = parse_dataset_name, help_heading = "Workload")]
    pub dataset_name: Option<DatasetName>,
    /// The file of --dataset-name sharegpt or custom.
    #[arg(long, value_name = "FILE", help_heading = "Workload")]
    pub dataset_path: Option<PathBuf>,
    /// Send `ignore_eos: true` so every reply runs to its `max_tokens` (vLLM's
    /// flag). On by default when --output-tokens is one fixed N, with `min_tokens: N`
    /// where every request asks for N: outputs then have exactly N tokens on
    /// servers that honour them (vLLM, SGLang, llama.cpp, the built-in simulator).
    #[arg(long, overrides_with = "no_ignore_eos", help_heading = "Workload")]
    pub ignore_eos: bool,
    /// Do not send `ignore_eos`/`min_tokens`: --output-tokens is then only a cap.
    #[arg(long, overrides_with = "ignore_eos", help_heading = "Workload")]
    pub no_ignore_eos: bool,
    /// Replay a trace's arrival times and lengths: mooncake:FILE (JSONL) or
    /// azure:FILE (Azure LLM inference CSV). With --rate, only its lengths are used.
    #[arg(long, value_name = "KIND:FILE", value_parser = parse_trace, help_heading = "Workload")]
    pub trace: Option<(TraceFormat, PathBuf)>,
    /// Multiply the trace's arrival offsets by F (0.5 replays twice as fast).
    #[arg(
        long,
        default_value_t = 1.0,
        value_name = "F",
        help_heading = "Workload"
    )]
    pub time_scale: f64,
    /// Seed of lengths, prompts, arrivals and retry jitter (same seed, same requests).
    #[arg(long, default_value_t = 0, value_parser = parse_count::<u64>, help_heading = "Workload")]
    pub seed: u64,
    /// Send the same prompt text in every run with this --seed. By default the
    /// text of synthetic prompts is salted by the run id (same lengths, other
    /// words), so a repeated run does not find the last run's prompts in the
    /// server's prefix cache. Prompts from a file are always sent as written.
    #[arg(long, help_heading = "Workload")]
    pub same_prompts: bool,

    /// The in-flight cap; a comma list (1,8,32,128) sweeps it, one run per level.
    /// Default 32 in closed loop; no cap in open loop or trace replay.
    #[arg(long, visible_alias = "max-concurrency", value_name = "N[,N…]", value_delimiter = ',', value_parser = parse_positive_u32, help_heading = "Load")]
    pub concurrency: Vec<u32>,
    /// Requests per run (default: 10 × the cap, at least 40, in closed loop; the
    /// whole file or trace; with --duration or in open loop, as many as are ready
    /// within it).
    #[arg(long, visible_alias = "num-prompts", value_name = "N", value_parser = parse_positive_u64, help_heading = "Load")]
    pub requests: Option<u64>,
    /// Stop admitting after this long (e.g. 60s); requests still queued then are
    /// recorded as cancelled, in-flight ones finish. Alone in closed loop, the
    /// backlog is endless (one cap's worth always waits). Open loop default: 30s.
    #[arg(long, value_name = "DUR", value_parser = parse_duration_arg, help_heading = "Load")]
    pub duration: Option<Duration>,
    /// Open loop: requests per second; a comma list (1,2,4) sweeps it. `inf` means
    /// closed loop (as in vLLM).
    #[arg(long, visible_alias = "request-rate", value_name = "R[,R…]", value_delimiter = ',', value_parser = parse_rate, help_heading = "Load")]
    pub rate: Vec<Option<f64>>,
    /// Inter-arrival process of the open loop: poisson, constant, or gamma:<shape>
    /// (shape < 1 burstier than Poisson).
    #[arg(long, value_name = "PROCESS", value_parser = parse_arrival, help_heading = "Load")]
    pub arrival: Option<Arrival>,
    /// vLLM's name for the gamma shape (1 = Poisson); same as --arrival gamma:F.
    #[arg(long, value_name = "F", conflicts_with = "arrival", value_parser = parse_burstiness, help_heading = "Load")]
    pub burstiness: Option<f64>,
    /// Grow the load over the run: linear:FROM..TO or exponential:FROM..TO — the
    /// rate with --rate TO (requests per second), else the concurrency cap
    /// (closed loop; --concurrency, if given, is TO). Over --duration when given
    /// (a function of time), else over the requests (of the request's index).
    #[arg(long, value_name = "SHAPE:FROM..TO", value_parser = parse_ramp, help_heading = "Load")]
    pub ramp_up: Option<Ramp>,
    /// vLLM's ramp: linear or exponential, from --ramp-up-start-rps to
    /// --ramp-up-end-rps (same as --ramp-up SHAPE:START..END --rate END).
    #[arg(long, value_name = "SHAPE", value_parser = ["linear", "exponential"], conflicts_with = "ramp_up", requires_all = ["ramp_up_start_rps", "ramp_up_end_rps"], help_heading = "Load")]
    pub ramp_up_strategy: Option<String>,
    /// vLLM's ramp start rate (with --ramp-up-strategy).
    #[arg(
        long,
        value_name = "R",
        requires = "ramp_up_strategy",
        help_heading = "Load"
    )]
    pub ramp_up_start_rps: Option<f64>,
    /// vLLM's ramp end rate (with --ramp-up-strategy).
    #[arg(
        long,
        value_name = "R",
        requires = "ramp_up_strategy",
        help_heading = "Load"
    )]
    pub ramp_up_end_rps: Option<f64>,
    /// Warm-up before the measured run: N requests or a time (10s). Warm-up
    /// requests run the same load, finish, and are not written to the log.
    #[arg(long, value_name = "N|DUR", value_parser = parse_warmup_arg, help_heading = "Load")]
    pub warmup: Option<Warmup>,
    /// How queued requests pass the cap: work-conserving (a freed slot is filled
    /// at once) or waves (send a batch of N, wait for all of it, send the next).
    #[arg(long, default_value = "work-conserving", value_parser = parse_dispatch, help_heading = "Load")]
    pub dispatch: Dispatch,
    /// After the run stops admitting (--duration, Ctrl-C), how long in-flight
    /// requests may finish before they are cancelled.
    #[arg(long, default_value = "30s", value_name = "DUR", value_parser = parse_duration_arg, help_heading = "Load")]
    pub drain_timeout: Duration,

    /// Retries per request (429, 5xx, connection errors, cut or stalled streams),
    /// holding the slot while backing off.
    #[arg(
        long,
        default_value_t = 0,
        value_name = "N",
        value_parser = parse_count::<u32>,
        help_heading = "Retries and timeouts"
    )]
    pub max_retries: u32,
    /// First back-off; doubles per retry (jittered, at most 30s), never shorter
    /// than the server's Retry-After.
    #[arg(long, default_value = "500ms", value_name = "DUR", value_parser = parse_duration_arg, help_heading = "Retries and timeouts")]
    pub retry_backoff: Duration,
    /// Limit for opening a connection.
    #[arg(long, default_value = "10s", value_name = "DUR", value_parser = parse_duration_arg, help_heading = "Retries and timeouts")]
    pub timeout_connect: Duration,
    /// Limit from an attempt's start to its first token [default: 300s; `none`
    /// lifts it]. The model lookup (GET /models) waits as long, at most 30s.
    #[arg(long, value_name = "DUR|none", value_parser = parse_limit, help_heading = "Retries and timeouts")]
    pub timeout_first_token: Option<Limit>,
    /// Limit between two chunks once streaming began [default: 60s; `none` lifts it].
    #[arg(long, value_name = "DUR|none", value_parser = parse_limit, help_heading = "Retries and timeouts")]
    pub timeout_stall: Option<Limit>,
    /// Limit for a whole attempt (default: none).
    #[arg(long, value_name = "DUR", value_parser = parse_limit_above_zero, help_heading = "Retries and timeouts")]
    pub timeout_total: Option<Duration>,

    /// Span log to write (default: a new tpscope-run-<UTC time>-<salt>.jsonl
    /// here); `-` writes it to standard output (the report then goes to standard
    /// error). An existing file is never replaced unless --overwrite; a FIFO or
    /// pipe is written to. A sweep writes all its runs to this one file.
    #[arg(long, value_name = "FILE|-", help_heading = "Output")]
    pub out: Option<PathBuf>,
    /// Replace an existing --out file.
    #[arg(long, help_heading = "Output")]
    pub overwrite: bool,
    /// For CI: exit 1 when a run's share of failed requests (error / (ok +
    /// error)) is above this, as a fraction (0.05) or a percentage (5%).
    #[arg(long, value_name = "F|P%", value_parser = parse_error_rate, help_heading = "Output")]
    pub max_error_rate: Option<f64>,
    /// Cadence of `sample` records (in-flight, queue depth, cap).
    #[arg(long, default_value = "10ms", value_name = "DUR", value_parser = parse_sample_interval, help_heading = "Output")]
    pub sample_interval: Duration,
    /// Record every chunk's arrival (for inter-token latency).
    #[arg(long, help_heading = "Output")]
    pub record_chunks: bool,
    /// Where arrival times (first byte, first and last token, chunks) come from:
    /// kernel (when the bytes reached the host: the kernel's receive timestamp,
    /// Linux only, elsewhere as user) or user (when the client's task got them).
    #[arg(long, default_value = "kernel", value_name = "SOURCE", value_parser = parse_rx_timestamps, help_heading = "Output")]
    pub rx_timestamps: RxTimestamps,
    /// Open a new connection for every request and ask the server to close it
    /// (`Connection: close`). By default connections are reused; a request lost
    /// because the server closed a reused connection before replying is resent
    /// at once on a new one (counted as a resend, not a retry).
    #[arg(long, help_heading = "Target")]
    pub no_keepalive: bool,
    /// Free-form label `key=value` for the run record (repeatable).
    #[arg(long = "label", value_name = "K=V", value_parser = parse_label, help_heading = "Output")]
    pub labels: Vec<(String, String)>,
    /// No progress line and no report (the span log is still written).
    #[arg(long, short, help_heading = "Output")]
    pub quiet: bool,
    /// Price of the deployment per hour: the report's cost per million output
    /// tokens, and in a sweep the cost at the highest load within --goodput goals.
    #[arg(long, value_name = "PRICE", help_heading = "Goodput and cost")]
    pub price_per_hour: Option<f64>,
    /// Price of a kWh: the GPUs' energy cost per million output tokens (with
    /// --gpu-metrics).
    #[arg(long, value_name = "PRICE", help_heading = "Goodput and cost")]
    pub price_per_kwh: Option<f64>,
    /// Goodput goals and the sweep's SLO percentile (as `tpscope report`'s).
    #[command(flatten, next_help_heading = "Goodput and cost")]
    pub goodput: crate::analysis_flags::GoodputFlags,

    /// The built-in simulator's flags.
    #[command(flatten)]
    pub sim: SimFlags,
    #[command(flatten)]
    pub server_metrics: crate::bench_scrape::ServerMetricsArgs,
    #[command(flatten)]
    pub otlp: crate::otlp_flags::OtlpArgs,
}

const AFTER_HELP: &str = "\
Examples:
  tpscope bench                                   # measure the built-in simulator (~20 s)
  tpscope bench --url http://127.0.0.1:8000/v1 --concurrency 64 --requests 1000
  tpscope bench --url URL --rate 2,4,8 --duration 60s        # open-loop sweep
  tpscope bench --concurrency 1,8,32,128 --output-tokens 256 # concurrency sweep
  tpscope bench --trace mooncake:trace.jsonl --time-scale 0.5
  tpscope bench --dispatch waves                  # see what batch-and-wait costs

Warm-up requests are sent before the measured run, drained, and not written.
A fixed --output-tokens N sends ignore_eos (and min_tokens) so every output has N
tokens; --no-ignore-eos makes N only a cap. The --sim-* flags configure the
built-in simulator and are refused with --url.
vLLM's flags: --base-url (with or without /v1) --endpoint --max-concurrency
--request-rate (inf: all at once) --burstiness --num-prompts --random-input-len
--random-output-len --dataset-name random|sharegpt|custom --dataset-path
--ignore-eos --seed.";

/// A limit that `none` lifts.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Limit(pub Option<Duration>);

fn parse_limit(s: &str) -> Result<Limit, String> {
    match s.trim() {
        "none" | "off" => Ok(Limit(None)),
        t => match parse_duration(t) {
            Ok(d) if d.is_zero() => Err(format!("`{s}` is 0 (give a time > 0, or none)")),
            Ok(d) => Ok(Limit(Some(d))),
            Err(e) => Err(format!("{e} (or none for no limit)")),
        },
    }
}

fn parse_error_rate(s: &str) -> Result<f64, String> {
    let t = s.trim();
    let (num, scale) = match t.strip_suffix('%') {
        Some(p) => (p.trim(), 100.0),
        None => (t, 1.0),
    };
    match num.parse::<f64>().map(|v| v / scale) {
        Ok(v) if (0.0..=1.0).contains(&v) => Ok(v),
        _ => Err(format!(
            "`{s}` must be a fraction from 0 to 1 (0.05) or a percentage from 0% to 100% (5%)"
        )),
    }
}

fn parse_dataset_name(s: &str) -> Result<DatasetName, String> {
    s.parse()
        .map_err(|e: tpscope_load::spec::BadDatasetName| e.to_string())
}

fn parse_api(s: &str) -> Result<Api, String> {
    s.parse().map_err(|e: tpscope_client::BadApi| e.to_string())
}

fn parse_rx_timestamps(s: &str) -> Result<RxTimestamps, String> {
    s.parse()
        .map_err(|e: tpscope_client::BadRxTimestamps| e.to_string())
}

fn parse_header(s: &str) -> Result<(String, String), String> {
    let (k, v) = s
        .split_once(':')
        .ok_or_else(|| format!("`{s}` is not a header (expected Name:value)"))?;
    let k = k.trim();
    if k.is_empty()
        || !k
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"-_".contains(&b))
    {
        return Err(format!("`{k}` is not a header name"));
    }
    Ok((k.to_string(), v.trim().to_string()))
}

fn parse_extra_body(s: &str) -> Result<serde_json::Map<String, serde_json::Value>, String> {
    match serde_json::from_str::<serde_json::Value>(s) {
        Ok(serde_json::Value::Object(m)) => Ok(m),
        Ok(_) => Err("expected a JSON object, e.g. '{\"ignore_eos\": true}'".into()),
        Err(e) => Err(format!("not valid JSON: {e}")),
    }
}

fn parse_input_dist(s: &str) -> Result<LengthDist, String> {
    LengthDist::parse(s, Column::Input).map_err(|e| e.to_string())
}

fn parse_output_dist(s: &str) -> Result<LengthDist, String> {
    LengthDist::parse(s, Column::Output).map_err(|e| e.to_string())
}

fn parse_turns(s: &str) -> Result<LengthDist, String> {
    LengthDist::parse(s, Column::Output).map_err(|e| e.to_string())
}

fn parse_think_time(s: &str) -> Result<tpscope_load::workload::sessions::ThinkTime, String> {
    s.parse()
        .map_err(|e: tpscope_load::workload::sessions::BadThinkTime| e.to_string())
}

fn parse_positive_u32(s: &str) -> Result<u32, String> {
    match s.trim().parse::<u32>() {
        Ok(n) if n > 0 => Ok(n),
        _ => Err(format!("`{s}` must be a whole number ≥ 1")),
    }
}

fn parse_positive_u64(s: &str) -> Result<u64, String> {
    match s.trim().parse::<u64>() {
        Ok(n) if n > 0 => Ok(n),
        _ => Err(format!("`{s}` must be a whole number ≥ 1")),
    }
}

/// A count that may be 0 (`--max-retries`, `--seed`).
fn parse_count<T: std::str::FromStr>(s: &str) -> Result<T, String> {
    s.trim()
        .parse::<T>()
        .map_err(|_| format!("`{s}` must be a whole number ≥ 0"))
}

fn parse_duration_arg(s: &str) -> Result<Duration, String> {
    parse_duration(s).map_err(|e| e.to_string())
}

/// A time limit: 0 would end every request before it starts.
fn parse_limit_above_zero(s: &str) -> Result<Duration, String> {
    let d = parse_duration_arg(s)?;
    if d.is_zero() {
        return Err(format!(
            "`{s}` leaves no time for a request (give a limit above 0, e.g. 60s, or leave it \
             out for none)"
        ));
    }
    Ok(d)
}

fn parse_sample_interval(s: &str) -> Result<Duration, String> {
    let d = parse_duration_arg(s)?;
    if d < Duration::from_millis(1) {
        return Err(format!("`{s}` is shorter than 1ms"));
    }
    Ok(d)
}

fn parse_rate(s: &str) -> Result<Option<f64>, String> {
    let t = s.trim();
    if t == "inf" {
        return Ok(None);
    }
    match t.parse::<f64>() {
        Ok(r) if r.is_finite() && r > 0.0 && r <= 1e6 => Ok(Some(r)),
        // A number, but more than one client can pace: say the bound it breaks.
        Ok(r) if r > 1e6 => Err(format!(
            "`{s}` requests per second is more than one client can pace (at most 1000000); \
             for everything at once give inf"
        )),
        _ => Err(format!(
            "`{s}` is not a rate (expected requests per second > 0, or inf)"
        )),
    }
}

fn parse_arrival(s: &str) -> Result<Arrival, String> {
    s.parse::<Arrival>().map_err(|e| e.to_string())
}

fn parse_ramp(s: &str) -> Result<Ramp, String> {
    s.parse::<Ramp>().map_err(|e| e.to_string())
}

fn parse_burstiness(s: &str) -> Result<f64, String> {
    match s.trim().parse::<f64>() {
        Ok(f) if f.is_finite() && f > 0.0 && f <= 1e6 => Ok(f),
        _ => Err(format!(
            "`{s}` is not a gamma shape (expected a number > 0)"
        )),
    }
}

fn parse_warmup_arg(s: &str) -> Result<Warmup, String> {
    parse_warmup(s).map_err(|e| e.to_string())
}

fn parse_dispatch(s: &str) -> Result<Dispatch, String> {
    s.parse::<Dispatch>().map_err(|e| e.to_string())
}

fn parse_label(s: &str) -> Result<(String, String), String> {
    match s.split_once('=') {
        Some((k, v)) if !k.trim().is_empty() => Ok((k.trim().to_string(), v.to_string())),
        _ => Err(format!("`{s}` is not a label (expected key=value)")),
    }
}

fn parse_tokenizer(s: &str) -> Result<tpscope_tokens::Tokenizer, String> {
    s.parse()
        .map_err(|e: tpscope_tokens::TokenizerError| e.to_string())
}

fn parse_trace(s: &str) -> Result<(TraceFormat, PathBuf), String> {
    parse_trace_arg(s).map_err(|e| e.to_string())
}

impl BenchArgs {
    /// `--ramp-up-strategy` with its start and end rates, unchecked (the spec
    /// checks every ramp and names `--ramp-up` when one cannot ramp).
    fn vllm_ramp(&self) -> Option<Ramp> {
        let shape = match self.ramp_up_strategy.as_deref()? {
            "exponential" => RampShape::Exponential,
            _ => RampShape::Linear,
        };
        Some(Ramp {
            shape,
            from: self.ramp_up_start_rps?,
            to: self.ramp_up_end_rps?,
        })
    }

    /// The load engine's flags (all but the target URL, the simulator's and `--quiet`).
    pub fn flags(&self) -> Flags {
        Flags {
            url: self.url.clone(),
            endpoint: self.endpoint.clone(),
            api: self.api,
            model: self.model.clone(),
            api_key: self.api_key.clone(),
            headers: self.headers.clone(),
            extra_body: self.extra_body.clone(),
            no_usage: self.no_usage,
            input_tokens: self.input_tokens.clone(),
            output_tokens: self.output_tokens.clone(),
            dataset: self.dataset.clone(),
            sharegpt: self.sharegpt.clone(),
            dataset_name: self.dataset_name,
            dataset_path: self.dataset_path.clone(),
            ignore_eos: match (self.ignore_eos, self.no_ignore_eos) {
                (true, _) => Some(true),
                (_, true) => Some(false),
                _ => None,
            },
            trace: self.trace.clone(),
            time_scale: self.time_scale,
            seed: self.seed,
            same_prompts: self.same_prompts,
            concurrency: self.concurrency.clone(),
            requests: self.requests,
            duration: self.duration,
            rate: match (self.rate.is_empty(), self.ramp_up_end_rps) {
                // vLLM's ramp is of the rate, ending at its end rate.
                (true, Some(end)) => vec![Some(end)],
                _ => self.rate.clone(),
            },
            arrival: self.arrival,
            burstiness: self.burstiness,
            ramp_up: self.ramp_up.or_else(|| self.vllm_ramp()),
            warmup: self.warmup,
            dispatch: self.dispatch,
            drain_timeout: self.drain_timeout,
            max_retries: self.max_retries,
            retry_backoff: self.retry_backoff,
            timeout_connect: self.timeout_connect,
            timeout_first_token: self.timeout_first_token.map(|l| l.0),
            timeout_stall: self.timeout_stall.map(|l| l.0),
            timeout_total: self.timeout_total,
            out: self.out.clone(),
            overwrite: self.overwrite,
            max_error_rate: self.max_error_rate,
            sample_interval: self.sample_interval,
            record_chunks: self.record_chunks,
            rx_timestamps: self.rx_timestamps,
            no_keepalive: self.no_keepalive,
            labels: self.labels.clone(),
            tokenizer: self.tokenizer,
            sessions: self.sessions,
            turns: self.turns.clone(),
            think_time: self.think_time,
            conversations: self.conversations.clone(),
            prefix_count: self.prefix_count,
            prefix_len: self.prefix_len,
            prefix_share: self.prefix_share,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::bench_sim_flags::parse_sim_fault;
    use clap::Args;
    use tpscope_load::spec::{
        DEFAULT_FIRST_TOKEN_TIMEOUT, DEFAULT_STALL_TIMEOUT, MODEL_LOOKUP_TIMEOUT,
    };

    #[test]
    fn help_states_the_default_limits_and_that_sim_flags_are_refused_with_url() {
        let help = BenchArgs::augment_args(clap::Command::new("bench"))
            .render_long_help()
            .to_string();
        let help = help.split_whitespace().collect::<Vec<_>>().join(" ");
        for (needle, d) in [
            (
                "[default: {}s; `none` lifts it]. The model",
                DEFAULT_FIRST_TOKEN_TIMEOUT,
            ),
            ("[default: {}s; `none` lifts it] ", DEFAULT_STALL_TIMEOUT),
            ("at most {}s", MODEL_LOOKUP_TIMEOUT),
        ] {
            let needle = needle.replace("{}", &d.as_secs().to_string());
            assert!(help.contains(&needle), "help lacks `{needle}`");
        }
        assert!(help.contains("Built-in simulator (passed to it; refused with --url)"));
    }

    #[test]
    fn negative_numbers_are_named_with_their_bound() {
        assert!(
            parse_positive_u32("-3")
                .unwrap_err()
                .contains("must be a whole number ≥ 1")
        );
        assert!(parse_count::<u32>("-1").unwrap_err().contains("≥ 0"));
        assert!(parse_rate("-2").unwrap_err().contains("> 0"));
        assert_eq!(parse_error_rate("5%"), Ok(0.05));
        assert_eq!(parse_error_rate("0.1"), Ok(0.1));
        assert!(parse_error_rate("-0.1").is_err());
        assert!(parse_error_rate("150%").is_err());
        assert_eq!(parse_limit("none"), Ok(Limit(None)));
        assert_eq!(parse_limit("2s"), Ok(Limit(Some(Duration::from_secs(2)))));
        assert!(parse_limit("0s").is_err());
    }

    #[test]
    fn value_parsers_explain_bad_values() {
        assert!(parse_header("X-A: b").is_ok());
        assert!(parse_header("nocolon").unwrap_err().contains("Name:value"));
        assert!(parse_extra_body("[1]").unwrap_err().contains("JSON object"));
        assert!(parse_rate("0").is_err());
        assert_eq!(parse_rate("inf").unwrap(), None);
        assert!(
            parse_sim_fault("404=0.1")
                .unwrap_err()
                .contains("not a fault")
        );
        assert!(
            parse_sim_fault("429=2")
                .unwrap_err()
                .contains("probability")
        );
        assert!(parse_sample_interval("100us").is_err());
        assert_eq!(parse_rx_timestamps("user"), Ok(RxTimestamps::User));
        assert!(
            parse_rx_timestamps("hw")
                .unwrap_err()
                .contains("expected kernel or user")
        );
    }
}
