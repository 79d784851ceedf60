//! `tpscope bench`: its flags, their validation into one [`BenchConfig`], and the
//! wiring of the built-in simulator (when no `--url`), the HTTP client, the
//! recorder, the load executor (one run per sweep level), the progress line,
//! Ctrl-C, and the report at the end.

use crate::progress;

use std::collections::BTreeMap;
use std::net::{Ipv4Addr, SocketAddr};
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

use anyhow::{Context, bail};
use tpscope_client::{Api, Client, ClientConfig, Endpoint, RxTimestamps, Timeouts};
use tpscope_load::schedule::scale_offsets;
use tpscope_load::sweep::{Knee, LevelPoint, knee};
use tpscope_load::workload::{
    self, PromptItem, TraceEntry, TraceFormat, parse_trace_arg, read_azure_csv, read_mooncake,
    read_prompts_jsonl, read_sharegpt,
};
use tpscope_load::{
    Arrival, Column, Control, Dispatch, LengthDist, LiveStats, Recorder, RetryPolicy, RunPlan,
    RunSummary, Schedule, Workload, execute,
};
use tpscope_model::units::{Warmup, parse_duration, parse_warmup};
use tpscope_model::{RunClock, RunRecord, SCHEMA, Target, Timestamp, TokenSource};
use tpscope_sim::{SimConfig, SimOverrides};
use tpscope_tokens::{Tokenizer, mix};

/// The cap of a closed loop when `--concurrency` is not given.
pub const DEFAULT_CONCURRENCY: u32 = 32;
/// An open loop's length when neither `--requests` nor `--duration` is given.
pub const DEFAULT_OPEN_DURATION: Duration = Duration::from_secs(30);

/// The help section of the flags passed to the built-in simulator.
const SIM_HEADING: &str = "Built-in simulator (passed to it; ignored with --url)";

/// Flags of `tpscope bench`.
///
/// Modes: with no `--rate` and no `--trace` it is a closed loop — every request is
/// ready at the start and waits in the queue for one of `--concurrency` slots (a
/// backlog, like a batch job); with `--rate` it is an open loop (arrivals on a
/// schedule; those beyond the cap wait in the queue, and that wait is recorded);
/// with `--trace` the trace's own arrival times are replayed.
#[derive(clap::Args, Debug)]
#[command(after_help = AFTER_HELP)]
pub struct BenchArgs {
    /// Base URL of an OpenAI-compatible server, up to the API version (e.g.
    /// http://127.0.0.1:8000/v1). Without it, the built-in simulator is started
    /// in-process and measured.
    #[arg(
        long,
        visible_alias = "base-url",
        value_name = "URL",
        help_heading = "Target"
    )]
    pub url: Option<String>,
    /// API to call: chat (/chat/completions) or completions (/completions).
    #[arg(long, default_value = "chat", value_parser = parse_api, help_heading = "Target")]
    pub api: Api,
    /// Model name to request (default: the first model of GET /models).
    #[arg(long, help_heading = "Target")]
    pub model: Option<String>,
    /// API key, sent as `Authorization: Bearer`; never written to the log.
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
    /// tokens are then counted from the text with o200k_base.
    #[arg(long, help_heading = "Target")]
    pub no_usage: bool,

    /// Prompt length in tokens (o200k_base): N or a distribution
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
    /// Replay a trace's arrival times and lengths: mooncake:FILE (JSONL) or
    /// azure:FILE (Azure LLM inference CSV). With --rate, only its lengths are used.
    #[arg(long, value_name = "KIND:FILE", value_parser = parse_trace_arg, help_heading = "Workload")]
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
    #[arg(long, default_value_t = 0, help_heading = "Workload")]
    pub seed: u64,

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
    /// Limit from an attempt's start to its first token (default: none).
    #[arg(long, value_name = "DUR", value_parser = parse_duration_arg, help_heading = "Retries and timeouts")]
    pub timeout_first_token: Option<Duration>,
    /// Limit between two chunks once streaming began (default: none).
    #[arg(long, value_name = "DUR", value_parser = parse_duration_arg, help_heading = "Retries and timeouts")]
    pub timeout_stall: Option<Duration>,
    /// Limit for a whole attempt (default: none).
    #[arg(long, value_name = "DUR", value_parser = parse_duration_arg, help_heading = "Retries and timeouts")]
    pub timeout_total: Option<Duration>,

    /// Span log to write (default: tpscope-run-<UTC time>.jsonl here). A sweep
    /// writes all its runs to this one file.
    #[arg(long, value_name = "FILE", help_heading = "Output")]
    pub out: Option<PathBuf>,
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
    /// Free-form label `key=value` for the run record (repeatable).
    #[arg(long = "label", value_name = "K=V", value_parser = parse_label, help_heading = "Output")]
    pub labels: Vec<(String, String)>,
    /// No progress line and no report (the span log is still written).
    #[arg(long, short, help_heading = "Output")]
    pub quiet: bool,

    /// Built-in simulator (no --url): model preset (llama-3.1-8b, llama-3.1-70b).
    #[arg(
        long,
        value_name = "PRESET",
        help_heading = SIM_HEADING
    )]
    pub sim_model: Option<String>,
    /// Built-in simulator: GPU preset (h100, h200, a100-80gb, l40s).
    #[arg(
        long,
        value_name = "PRESET",
        help_heading = SIM_HEADING
    )]
    pub sim_gpu: Option<String>,
    /// Built-in simulator: realtime, max, or a speed-up factor such as 10.
    #[arg(
        long,
        value_name = "SPEED",
        help_heading = SIM_HEADING
    )]
    pub sim_speed: Option<String>,
    /// Built-in simulator: a TOML file of `tpscope sim` settings.
    #[arg(
        long,
        value_name = "FILE",
        help_heading = SIM_HEADING
    )]
    pub sim_config: Option<PathBuf>,
    /// Built-in simulator: inject a fault with a probability, KIND=P, KIND one of
    /// 429, 500, 503, cut, stall, malformed, slow-first-token (repeatable).
    #[arg(long = "sim-fault", value_name = "KIND=P", value_parser = parse_sim_fault, help_heading = SIM_HEADING)]
    pub sim_faults: Vec<(String, f64)>,
    /// Built-in simulator: write its ground truth (first/last token times) here.
    #[arg(
        long,
        value_name = "FILE",
        help_heading = SIM_HEADING
    )]
    pub sim_truth_log: Option<PathBuf>,
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
vLLM aliases: --base-url --max-concurrency --request-rate --num-prompts
--random-input-len --random-output-len --burstiness --seed.";

fn parse_api(s: &str) -> Result<Api, String> {
    match s {
        "chat" => Ok(Api::Chat),
        "completions" => Ok(Api::Completions),
        _ => Err(format!(
            "`{s}` is not an API (expected chat or completions)"
        )),
    }
}

fn parse_rx_timestamps(s: &str) -> Result<RxTimestamps, String> {
    s.parse()
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

fn parse_positive_u32(s: &str) -> Result<u32, String> {
    match s.trim().parse::<u32>() {
        Ok(n) if n > 0 => Ok(n),
        _ => Err(format!("`{s}` is not a whole number ≥ 1")),
    }
}

fn parse_positive_u64(s: &str) -> Result<u64, String> {
    match s.trim().parse::<u64>() {
        Ok(n) if n > 0 => Ok(n),
        _ => Err(format!("`{s}` is not a whole number ≥ 1")),
    }
}

fn parse_duration_arg(s: &str) -> Result<Duration, String> {
    parse_duration(s).map_err(|e| e.to_string())
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
        _ => Err(format!(
            "`{s}` is not a rate (expected requests per second > 0, or inf)"
        )),
    }
}

fn parse_arrival(s: &str) -> Result<Arrival, String> {
    s.parse::<Arrival>().map_err(|e| e.to_string())
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

const SIM_FAULTS: [&str; 7] = [
    "429",
    "500",
    "503",
    "cut",
    "stall",
    "malformed",
    "slow-first-token",
];

fn parse_sim_fault(s: &str) -> Result<(String, f64), String> {
    let (k, p) = s
        .split_once('=')
        .ok_or_else(|| format!("`{s}` is not KIND=P (e.g. 429=0.1)"))?;
    if !SIM_FAULTS.contains(&k) {
        return Err(format!(
            "`{k}` is not a fault (expected one of {})",
            SIM_FAULTS.join(", ")
        ));
    }
    match p.trim().parse::<f64>() {
        Ok(p) if (0.0..=1.0).contains(&p) => Ok((k.to_string(), p)),
        _ => Err(format!("`{p}` is not a probability in 0..=1")),
    }
}

/// What is measured.
#[derive(Debug)]
pub enum TargetConfig {
    /// The built-in simulator, started in-process.
    Sim(Box<SimConfig>),
    /// A server at this base URL.
    Url(String),
}

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

/// Every flag of `tpscope bench`, validated.
#[derive(Debug)]
pub struct BenchConfig {
    /// What is measured.
    pub target: TargetConfig,
    /// The API.
    pub api: Api,
    /// The model (`None`: ask the server).
    pub model: Option<String>,
    /// The key.
    pub api_key: Option<String>,
    /// Extra headers.
    pub headers: Vec<(String, String)>,
    /// Extra body fields.
    pub extra_body: serde_json::Map<String, serde_json::Value>,
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
    /// Dispatch.
    pub dispatch: Dispatch,
    /// Retries.
    pub retry: RetryPolicy,
    /// Seed.
    pub seed: u64,
    /// Sample cadence.
    pub sample_interval: Duration,
    /// Drain bound.
    pub drain_timeout: Duration,
    /// What requests ask for.
    pub workload: Arc<Workload>,
    /// Warm-up.
    pub warmup: Option<Warmup>,
    /// Where the log goes.
    pub out: PathBuf,
    /// No progress, no report.
    pub quiet: bool,
    /// Labels.
    pub labels: BTreeMap<String, String>,
}

fn sim_overrides(a: &BenchArgs) -> anyhow::Result<SimOverrides> {
    let mut o = match &a.sim_config {
        Some(p) => SimOverrides::from_toml_file(p)
            .with_context(|| format!("--sim-config {}", p.display()))?,
        None => SimOverrides::default(),
    };
    let mut f = SimOverrides {
        model: a.sim_model.clone(),
        gpu: a.sim_gpu.clone(),
        speed: a.sim_speed.clone(),
        truth_log: a.sim_truth_log.clone(),
        seed: Some(a.seed),
        ..SimOverrides::default()
    };
    for (k, p) in &a.sim_faults {
        let p = Some(*p);
        match k.as_str() {
            "429" => f.fault_429 = p,
            "500" => f.fault_500 = p,
            "503" => f.fault_503 = p,
            "cut" => f.fault_cut = p,
            "stall" => f.fault_stall = p,
            "malformed" => f.fault_malformed = p,
            _ => f.fault_slow_first_token = p,
        }
    }
    o = o.merge(f);
    Ok(o)
}

impl BenchConfig {
    /// Validates the flags; every error names its flag.
    pub fn from_args(a: BenchArgs) -> anyhow::Result<BenchConfig> {
        let target = match &a.url {
            Some(u) => {
                if !(u.starts_with("http://") || u.starts_with("https://")) {
                    bail!("--url: `{u}` must start with http:// or https://");
                }
                TargetConfig::Url(u.trim_end_matches('/').to_string())
            }
            None => {
                let cfg = sim_overrides(&a)?
                    .resolve()
                    .map_err(|e| anyhow::anyhow!("built-in simulator (--sim-*): {e}"))?;
                TargetConfig::Sim(Box::new(cfg))
            }
        };
        if a.url.is_some()
            && (a.sim_model.is_some()
                || a.sim_gpu.is_some()
                || a.sim_speed.is_some()
                || !a.sim_faults.is_empty()
                || a.sim_truth_log.is_some()
                || a.sim_config.is_some())
        {
            bail!("--sim-* flags configure the built-in simulator and cannot be used with --url");
        }
        if !(a.time_scale.is_finite() && a.time_scale > 0.0) {
            bail!("--time-scale: `{}` must be a number > 0", a.time_scale);
        }
        let sources = [a.dataset.is_some(), a.sharegpt.is_some(), a.trace.is_some()]
            .iter()
            .filter(|b| **b)
            .count();
        if sources > 1 {
            bail!("--dataset, --sharegpt and --trace are alternatives: give one");
        }
        if a.input_tokens.is_some() && sources > 0 {
            bail!(
                "--input-tokens applies to synthetic prompts; the prompts come from the file here"
            );
        }
        let tokenizer = Tokenizer::O200kBase;
        let mut trace: Option<Vec<TraceEntry>> = None;
        let workload = if let Some(p) = &a.dataset {
            let items = read_prompts_jsonl(p).map_err(|e| anyhow::anyhow!("--dataset: {e}"))?;
            check_prompts_fit(&items, a.api, p)?;
            Workload::Prompts {
                source: p.display().to_string(),
                items: Arc::new(items),
                output: a
                    .output_tokens
                    .clone()
                    .unwrap_or(LengthDist::Azure(Column::Output)),
            }
        } else if let Some(p) = &a.sharegpt {
            let items =
                read_sharegpt(p, tokenizer).map_err(|e| anyhow::anyhow!("--sharegpt: {e}"))?;
            Workload::Prompts {
                source: p.display().to_string(),
                items: Arc::new(items),
                output: a
                    .output_tokens
                    .clone()
                    .unwrap_or(LengthDist::Azure(Column::Output)),
            }
        } else if let Some((fmt, p)) = &a.trace {
            if a.output_tokens.is_some() {
                bail!("--output-tokens: a trace gives each request's output length");
            }
            let entries = match fmt {
                TraceFormat::Mooncake => read_mooncake(p),
                TraceFormat::Azure => read_azure_csv(p),
            }
            .map_err(|e| anyhow::anyhow!("--trace: {e}"))?;
            trace = Some(entries.clone());
            Workload::Trace {
                source: format!(
                    "{}:{}",
                    if *fmt == TraceFormat::Mooncake {
                        "mooncake"
                    } else {
                        "azure"
                    },
                    p.display()
                ),
                entries: Arc::new(entries),
            }
        } else if a.input_tokens.is_none() && a.output_tokens.is_none() {
            Workload::AzureChat
        } else {
            Workload::Synthetic {
                input: a
                    .input_tokens
                    .clone()
                    .unwrap_or(LengthDist::Azure(Column::Input)),
                output: a
                    .output_tokens
                    .clone()
                    .unwrap_or(LengthDist::Azure(Column::Output)),
            }
        };

        let arrival = match (a.arrival, a.burstiness) {
            (Some(x), _) => x,
            (None, Some(b)) => Arrival::from_burstiness(b),
            (None, None) => Arrival::Poisson,
        };
        let rates: Vec<Option<f64>> = a.rate.clone();
        let open_rates: Vec<f64> = rates.iter().flatten().copied().collect();
        if !open_rates.is_empty() && open_rates.len() != rates.len() {
            bail!("--rate: `inf` (closed loop) cannot be mixed with rates in one sweep");
        }
        if (a.arrival.is_some() || a.burstiness.is_some()) && open_rates.is_empty() {
            bail!("--arrival/--burstiness shape an open loop: give --rate too");
        }
        if open_rates.len() > 1 && a.concurrency.len() > 1 {
            bail!("--rate and --concurrency cannot both be swept: give a list to one of them");
        }
        if trace.is_none() && a.time_scale != 1.0 {
            bail!("--time-scale applies to --trace replay");
        }
        let mut sorted = a.concurrency.clone();
        sorted.sort_unstable();
        sorted.dedup();
        if sorted.len() != a.concurrency.len() {
            bail!("--concurrency: levels must be distinct");
        }
        let open = !open_rates.is_empty();
        let replay = trace.is_some() && !open;
        let file_len = workload.len().map(|n| n as u64);
        let default_requests = |cap: Option<u32>| -> Option<u64> {
            if let Some(n) = a.requests {
                // A replayed trace ends with its last entry.
                return Some(if replay {
                    n.min(file_len.unwrap_or(n))
                } else {
                    n
                });
            }
            if let Some(n) = file_len {
                return Some(n);
            }
            if open || a.duration.is_some() {
                // Bounded by time: in closed loop an endless backlog.
                return None;
            }
            Some((u64::from(cap.unwrap_or(DEFAULT_CONCURRENCY)) * 10).max(40))
        };
        let duration = match (
            a.duration,
            open && a.requests.is_none() && file_len.is_none(),
        ) {
            (Some(d), _) => Some(d),
            (None, true) => Some(DEFAULT_OPEN_DURATION),
            (None, false) => None,
        };
        if duration.is_some_and(|d| d.is_zero()) {
            bail!("--duration must be longer than 0");
        }
        let mut levels = Vec::new();
        let mut sweep = None;
        if open_rates.len() > 1 {
            sweep = Some("rate");
            let cap = a.concurrency.first().copied();
            let mut rs = open_rates.clone();
            rs.sort_by(f64::total_cmp);
            for r in rs {
                levels.push(Level {
                    cap,
                    schedule: Schedule::Rate { rate: r, arrival },
                    requests: default_requests(cap),
                    label: Some(format!("rate {r}")),
                    value: r,
                });
            }
        } else {
            let caps: Vec<Option<u32>> = if a.concurrency.is_empty() {
                vec![if open || replay {
                    None
                } else {
                    Some(DEFAULT_CONCURRENCY)
                }]
            } else {
                sorted.iter().map(|c| Some(*c)).collect()
            };
            if caps.len() > 1 {
                sweep = Some("concurrency");
            }
            let schedule = if let Some(&r) = open_rates.first() {
                Schedule::Rate { rate: r, arrival }
            } else if let Some(t) = &trace {
                Schedule::Trace {
                    offsets: Arc::new(scale_offsets(t.iter().map(|e| e.offset), a.time_scale)),
                }
            } else {
                Schedule::Backlog
            };
            for cap in caps {
                levels.push(Level {
                    cap,
                    schedule: schedule.clone(),
                    requests: default_requests(cap),
                    label: sweep.map(|_| format!("concurrency {}", cap.unwrap_or(0))),
                    value: f64::from(cap.unwrap_or(0)),
                });
            }
        }
        if a.dispatch == Dispatch::Waves && levels.iter().any(|l| l.cap.is_none()) {
            bail!("--dispatch waves needs a cap: give --concurrency");
        }

        let out = match &a.out {
            Some(p) => p.clone(),
            None => PathBuf::from(format!(
                "tpscope-run-{}.jsonl",
                utc_compact(Timestamp::now_wall())
            )),
        };
        let client = ClientConfig {
            timeouts: Timeouts {
                connect: Some(a.timeout_connect),
                first_token: a.timeout_first_token,
                stall: a.timeout_stall,
                total: a.timeout_total,
            },
            record_chunks: a.record_chunks,
            keep_text: true,
            rx_timestamps: a.rx_timestamps,
            ..ClientConfig::default()
        };
        let mut labels: BTreeMap<String, String> = BTreeMap::new();
        for (k, v) in &a.labels {
            labels.insert(k.clone(), v.clone());
        }
        Ok(BenchConfig {
            target,
            api: a.api,
            model: a.model.clone(),
            api_key: a.api_key.clone().filter(|k| !k.is_empty()),
            headers: a.headers.clone(),
            extra_body: a.extra_body.clone().unwrap_or_default(),
            include_usage: !a.no_usage,
            client,
            levels,
            sweep,
            duration,
            dispatch: a.dispatch,
            retry: RetryPolicy {
                max_retries: a.max_retries,
                base: a.retry_backoff,
            },
            seed: a.seed,
            sample_interval: a.sample_interval,
            drain_timeout: a.drain_timeout,
            workload: Arc::new(workload),
            warmup: a.warmup,
            out,
            quiet: a.quiet,
            labels,
        })
    }
}

fn check_prompts_fit(items: &[PromptItem], api: Api, path: &Path) -> anyhow::Result<()> {
    if api == Api::Completions
        && let Some(i) = items
            .iter()
            .position(|i| matches!(i.prompt, workload::Prompt::Messages(_)))
    {
        eprintln!(
            "note: --dataset {}: prompt {} holds chat messages; with --api completions their contents are joined into one prompt",
            path.display(),
            i + 1
        );
    }
    Ok(())
}

/// `2026-11-21T14:05:12.123Z` → `20261121T140512Z`.
fn utc_compact(t: Timestamp) -> String {
    let s = t.to_string();
    let mut out: String = s
        .chars()
        .take(19)
        .filter(|c| *c != '-' && *c != ':')
        .collect();
    out.push('Z');
    out
}

/// The URL without user:password and without query string (which may hold keys).
fn redact_url(url: &str) -> String {
    let (scheme, rest) = url.split_once("://").unwrap_or(("", url));
    let rest = rest.split(['?', '#']).next().unwrap_or("");
    let (authority, path) = match rest.find('/') {
        Some(i) => rest.split_at(i),
        None => (rest, ""),
    };
    let host = authority.rsplit_once('@').map_or(authority, |(_, h)| h);
    if scheme.is_empty() {
        format!("{host}{path}")
    } else {
        format!("{scheme}://{host}{path}")
    }
}

fn new_run_id(seq: usize) -> String {
    let now = Timestamp::now_wall();
    let salt = mix(now.unix_nanos() as u64 ^ (u64::from(std::process::id()) << 32) ^ seq as u64);
    format!("{}-{:06x}", utc_compact(now), salt & 0xff_ffff)
}

fn load_settings(
    cfg: &BenchConfig,
    level: &Level,
    index: usize,
    sim: Option<&SimConfig>,
) -> serde_json::Value {
    use serde_json::json;
    let mode = match &level.schedule {
        Schedule::Backlog => "closed_loop",
        Schedule::Rate { .. } => "open_loop",
        Schedule::Trace { .. } => "trace_replay",
    };
    let mut v = json!({
        "mode": mode,
        "concurrency": level.cap,
        "requests": level.requests,
        "duration_s": cfg.duration.map(|d| d.as_secs_f64()),
        "dispatch": cfg.dispatch.to_string(),
        "seed": cfg.seed,
        "workload": cfg.workload.describe(),
        "max_retries": cfg.retry.max_retries,
        "retry_backoff_s": cfg.retry.base.as_secs_f64(),
        "timeouts_s": {
            "connect": cfg.client.timeouts.connect.map(|d| d.as_secs_f64()),
            "first_token": cfg.client.timeouts.first_token.map(|d| d.as_secs_f64()),
            "stall": cfg.client.timeouts.stall.map(|d| d.as_secs_f64()),
            "total": cfg.client.timeouts.total.map(|d| d.as_secs_f64()),
        },
        "include_usage": cfg.include_usage,
        "record_chunks": cfg.client.record_chunks,
        "rx_timestamps": cfg.client.rx_timestamps.effective().as_str(),
    });
    if let Schedule::Rate { rate, arrival } = &level.schedule {
        v["rate"] = json!(rate);
        v["arrival"] = json!(arrival.to_string());
    }
    if let Some(w) = cfg.warmup {
        v["warmup"] = json!({ "amount": w.to_string(), "written": false });
    }
    if let Some(p) = cfg.sweep {
        v["sweep"] = json!({ "parameter": p, "level": level.value, "index": index, "levels": cfg.levels.len() });
    }
    if let Some(s) = sim {
        v["simulator"] = json!({
            "model": s.model.name, "gpu": s.gpu.name, "tp": s.tp, "speed": s.speed.to_string(),
            "max_num_seqs": s.max_num_seqs, "seed": s.seed,
        });
    }
    v
}

/// Runs `tpscope bench`.
pub fn run(args: BenchArgs) -> anyhow::Result<ExitCode> {
    let cfg = BenchConfig::from_args(args)?;
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .thread_name("tpscope-bench")
        .build()
        .context("starting the async runtime")?;
    let _ = tpscope_sim::raise_nofile_limit();
    // The simulator gets a runtime (and threads) of its own, so its work does not
    // queue behind the client's and its CPU time can be told apart.
    let sim_rt = match &cfg.target {
        TargetConfig::Sim(_) => Some(
            tokio::runtime::Builder::new_multi_thread()
                .worker_threads(1)
                .enable_all()
                .thread_name("tpscope-sim-http")
                .build()
                .context("starting the simulator's runtime")?,
        ),
        TargetConfig::Url(_) => None,
    };
    let (sim, base_url) = match (&cfg.target, &sim_rt) {
        (TargetConfig::Sim(sc), Some(srt)) => {
            let sc = (**sc).clone();
            let h = srt
                .block_on(tpscope_sim::start(
                    sc,
                    SocketAddr::from((Ipv4Addr::LOCALHOST, 0)),
                ))
                .map_err(|e| anyhow::anyhow!("starting the built-in simulator: {e}"))?;
            let url = h.base_url();
            (Some(h), url)
        }
        (TargetConfig::Url(u), _) => (None, u.clone()),
        _ => unreachable!("a simulator target has its runtime"),
    };
    let outcome = rt.block_on(bench(
        &cfg,
        base_url,
        sim.as_ref().map(|h| h.config().clone()),
    ));
    if let (Some(h), Some(srt)) = (sim, sim_rt) {
        // Bounded: a simulator that does not stop must not hang the benchmark,
        // whose log is complete by now.
        match srt
            .block_on(async { tokio::time::timeout(Duration::from_secs(5), h.shutdown()).await })
        {
            Ok(Ok(())) => {}
            Ok(Err(e)) => eprintln!("warning: stopping the built-in simulator: {e}"),
            Err(_) => {
                eprintln!("warning: the built-in simulator did not stop within 5 s; leaving it")
            }
        }
        srt.shutdown_timeout(Duration::from_millis(500));
    }
    let (summaries, interrupted) = outcome?;
    rt.shutdown_timeout(Duration::from_secs(1));
    let total: RunSummary = summaries.iter().fold(RunSummary::default(), |mut acc, s| {
        acc.spans += s.spans;
        acc.ok += s.ok;
        acc.error += s.error;
        acc.cancelled += s.cancelled;
        acc
    });
    if !cfg.quiet {
        if cfg.levels.len() > 1 {
            print_sweep_table(&cfg)?;
        } else if let Err(e) = crate::report_cmd::print_after_bench(&cfg.out) {
            eprintln!("warning: the report could not be produced: {e:#}");
        }
    }
    eprintln!(
        "wrote {} spans ({} ok, {} error, {} cancelled) to {}",
        total.spans,
        total.ok,
        total.error,
        total.cancelled,
        cfg.out.display()
    );
    if interrupted {
        return Ok(ExitCode::from(130));
    }
    if total.ok == 0 && total.spans > 0 {
        eprintln!("error: no request succeeded");
        return Ok(ExitCode::from(1));
    }
    Ok(ExitCode::SUCCESS)
}

async fn bench(
    cfg: &BenchConfig,
    base_url: String,
    sim: Option<SimConfig>,
) -> anyhow::Result<(Vec<RunSummary>, bool)> {
    let mut endpoint = Endpoint::new(
        base_url.clone(),
        cfg.api,
        cfg.model.clone().unwrap_or_default(),
    );
    endpoint.api_key = cfg.api_key.clone();
    endpoint.headers = cfg.headers.clone();
    endpoint.extra_body = cfg.extra_body.clone();
    endpoint.include_usage = cfg.include_usage;
    let shown_url = redact_url(&base_url);
    if endpoint.model.is_empty() {
        let probe = Client::new(endpoint.clone(), cfg.client.clone()).context("--url")?;
        let models = probe.list_models().await.with_context(|| {
            format!("asking {shown_url}/models for a model (give --model to skip this)")
        })?;
        endpoint.model = models
            .into_iter()
            .next()
            .with_context(|| format!("{shown_url}/models lists no model: give --model"))?;
    }
    let client = Arc::new(Client::new(endpoint.clone(), cfg.client.clone()).context("--url")?);
    let tokenizer = Tokenizer::O200kBase;
    let live = Arc::new(LiveStats::default());
    let recorder = Recorder::create(&cfg.out, tokenizer, Some(live.clone()))
        .with_context(|| format!("--out: creating {}", cfg.out.display()))?;
    let control = Control::default();
    let ctrlc = {
        let c = control.clone();
        tokio::spawn(async move {
            if tokio::signal::ctrl_c().await.is_err() {
                return;
            }
            eprintln!(
                "\nstopping: no new requests; in-flight ones finish (Ctrl-C again to cancel them)"
            );
            c.stop.cancel();
            if tokio::signal::ctrl_c().await.is_ok() {
                eprintln!("\ncancelling in-flight requests");
                c.cancel.cancel();
            }
        })
    };
    let progress = progress::Progress::start(live.clone(), cfg.quiet);
    let plan_for = |level: &Level, run_id: String| RunPlan {
        run_id,
        schedule: level.schedule.clone(),
        requests: level.requests,
        duration: cfg.duration,
        cap: level.cap,
        dispatch: cfg.dispatch,
        workload: cfg.workload.clone(),
        tokenizer,
        seed: cfg.seed,
        retry: cfg.retry,
        sample_interval: Some(cfg.sample_interval),
        drain_timeout: cfg.drain_timeout,
    };
    if let Some(w) = cfg.warmup {
        let first = &cfg.levels[0];
        let mut plan = plan_for(first, "warmup".into());
        // Different prompts from the measured run's, the same shape of load.
        plan.seed = mix(cfg.seed ^ 0x3A53_0FF5);
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
        let planned = plan.requests;
        live.start_run("warm-up", planned, plan.cap);
        if planned != Some(0) {
            execute(
                plan,
                RunClock::start(),
                client.clone(),
                None,
                live.clone(),
                &control,
            )
            .await;
        }
    }
    let mut summaries = Vec::new();
    for (i, level) in cfg.levels.iter().enumerate() {
        if control.stop.is_cancelled() {
            break;
        }
        let run_id = new_run_id(i);
        let clock = RunClock::start();
        let mut labels = cfg.labels.clone();
        if let Some(l) = &level.label {
            labels.insert("sweep".into(), l.replace(' ', "="));
        }
        let rec = recorder.sender();
        rec.run(RunRecord {
            run_id: run_id.clone(),
            schema: SCHEMA.into(),
            tool: format!("tpscope {}", env!("CARGO_PKG_VERSION")),
            started_at: clock.anchor_wall(),
            target: Target {
                url: match &cfg.target {
                    TargetConfig::Url(_) => Some(shown_url.clone()),
                    TargetConfig::Sim(_) => None,
                },
                model: Some(endpoint.model.clone()),
                api: Some(cfg.api.as_str().into()),
            },
            cap: level.cap,
            token_source: Some(if cfg.include_usage {
                TokenSource::Usage
            } else {
                TokenSource::Tokenizer(tokenizer.name().into())
            }),
            tokenizer: Some(tokenizer.name().into()),
            sample_interval: Some(cfg.sample_interval),
            load: load_settings(cfg, level, i, sim.as_ref()),
            labels,
        });
        live.start_run(
            level.label.as_deref().unwrap_or(""),
            level.requests,
            level.cap,
        );
        let summary = execute(
            plan_for(level, run_id.clone()),
            clock,
            client.clone(),
            Some(rec.clone()),
            live.clone(),
            &control,
        )
        .await;
        rec.end(&run_id, clock.now());
        rec.sync();
        summaries.push(summary);
    }
    progress.finish();
    ctrlc.abort();
    recorder
        .finish()
        .with_context(|| format!("--out: writing {}", cfg.out.display()))?;
    let interrupted = control.stop.is_cancelled() || control.cancel.is_cancelled();
    Ok((summaries, interrupted))
}

/// Reads the sweep's runs back, analyses each with the analysis crate, and prints
/// the throughput-vs-latency table with the knee.
fn print_sweep_table(cfg: &BenchConfig) -> anyhow::Result<()> {
    let set = tpscope_log::read_paths(
        std::slice::from_ref(&cfg.out),
        tpscope_log::ReadOptions::default(),
    )
    .with_context(|| format!("reading back {}", cfg.out.display()))?;
    let opts = tpscope_analysis::Options::default();
    let secs = |d: Option<Duration>| d.map(|d| d.as_secs_f64());
    let mut rows = Vec::new();
    let mut points = Vec::new();
    for (level, run) in cfg.levels.iter().zip(set.runs.iter()) {
        let r = tpscope_analysis::analyze(&run.input, &opts);
        let tps = r.system_tps.map(|t| t.0);
        let ttft = &r.distributions.ttft_user;
        let point = LevelPoint {
            level: level.value,
            system_tps: tps,
            latency_s: secs(ttft.p99),
        };
        rows.push((
            level,
            r.counts.ok,
            r.counts.spans,
            tps,
            secs(ttft.p50),
            secs(ttft.p99),
            r.distributions.t_first_token.p50.map(|d| d.as_secs_f64()),
            r.distributions.stream_tps.p50.map(|t| t.0),
            r.gap_fraction,
        ));
        points.push(point);
    }
    let k = knee(&points);
    let param = cfg.sweep.unwrap_or("level");
    let fmt = |v: Option<f64>, scale: f64, digits: usize| {
        v.map_or("–".to_string(), |v| format!("{:.*}", digits, v * scale))
    };
    println!(
        "Sweep of {param}: throughput vs latency (one run per level, all in {})",
        cfg.out.display()
    );
    println!(
        "{:>12}  {:>9}  {:>12}  {:>13}  {:>13}  {:>14}  {:>13}  {:>7}",
        param,
        "ok/spans",
        "system tok/s",
        "TTFT user p50",
        "TTFT user p99",
        "TTFT admit p50",
        "stream tok/s",
        "gap %"
    );
    for (i, (level, ok, spans, tps, p50, p99, tft, stps, gap)) in rows.iter().enumerate() {
        let mark = if k == Knee::At(i) { "  ← knee" } else { "" };
        println!(
            "{:>12}  {:>9}  {:>12}  {:>12}s  {:>12}s  {:>13}s  {:>13}  {:>7}{mark}",
            level.value,
            format!("{ok}/{spans}"),
            fmt(*tps, 1.0, 0),
            fmt(*p50, 1.0, 3),
            fmt(*p99, 1.0, 3),
            fmt(*tft, 1.0, 3),
            fmt(*stps, 1.0, 1),
            fmt(*gap, 100.0, 2),
        );
    }
    match k {
        Knee::At(i) => println!(
            "knee: {param} {} — the lowest level reaching 90% of the best throughput; higher levels mostly add latency.",
            cfg.levels[i].value
        ),
        Knee::NotReached => println!(
            "knee: not reached — throughput was still rising at the highest level; sweep higher."
        ),
        Knee::Unknown => println!("knee: unknown — fewer than two levels produced a throughput."),
    }
    println!("Full reports: tpscope report {}", cfg.out.display());
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn urls_lose_credentials_and_queries() {
        assert_eq!(
            redact_url("https://user:pw@host:8/v1?key=x"),
            "https://host:8/v1"
        );
        assert_eq!(
            redact_url("http://127.0.0.1:8000/v1"),
            "http://127.0.0.1:8000/v1"
        );
    }

    #[test]
    fn compact_utc_names() {
        let t = Timestamp::parse_rfc3339("2026-11-21T14:05:12.5Z").unwrap();
        assert_eq!(utc_compact(t), "20261121T140512Z");
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
