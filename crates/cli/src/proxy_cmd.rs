//! `tpscope proxy`: flags of the recording reverse proxy, and its life: start,
//! print where it listens, serve until SIGINT/SIGTERM/SIGHUP, then drain open
//! requests, write the `end` record and flush.

use std::collections::BTreeMap;
use std::io::Write;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::Duration;

use anyhow::Context;
use tpscope_proxy::{Dispatch, ProxyConfig, ProxyError, Rotate};

use crate::bench_scrape::ServerMetricsArgs;
use crate::exit::ResultExt;
use crate::signals::StopSignals;

/// Flags of `tpscope proxy`.
#[derive(clap::Args, Debug)]
pub struct ProxyArgs {
    /// The server to forward to: `http(s)://host:port` (a path is put before
    /// every request's path).
    #[arg(long, value_name = "URL")]
    pub upstream: String,
    /// Where clients connect. Loopback unless told otherwise; port 0 picks a
    /// free one (the address is printed).
    #[arg(long, default_value = "127.0.0.1:9000", value_name = "ADDR", value_parser = parse_addr)]
    pub listen: SocketAddr,
    /// The span log (completions become spans; other requests pass untouched).
    /// Default: a new file named as bench names its runs
    /// (tpscope-run-<time>-<salt>.jsonl, printed); `none` records nothing.
    #[arg(long, value_name = "FILE|none")]
    pub out: Option<PathBuf>,
    /// Rotate the span log by size (1GiB) or age (1h): files FILE-0000, -0001, …
    /// each start with the run record and read on their own; `tpscope report FILE`
    /// reads them all as one run.
    #[arg(long, value_name = "SIZE|DURATION", value_parser = parse_rotate)]
    pub rotate: Option<Rotate>,
    /// How many requests the pipeline behind the proxy keeps in flight, when
    /// known: the width of the gap the report infers when requests do not state
    /// their queue time (default: the most seen in flight).
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(1..))]
    pub pipeline_width: Option<u32>,
    /// Serve Prometheus metrics on this address (`/metrics`).
    #[arg(long, value_name = "ADDR", value_parser = parse_addr)]
    pub metrics_listen: Option<SocketAddr>,
    /// Forward at most N completions at once; the rest wait in a FIFO queue.
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(1..))]
    pub cap: Option<u32>,
    /// Completions that may wait for a slot (with --cap); beyond it they are refused.
    #[arg(long, default_value_t = 1000, value_name = "N")]
    pub queue_limit: usize,
    /// The status of a refusal when the queue is full: 429 (with Retry-After) or 503.
    #[arg(long, default_value_t = 429, value_name = "STATUS", value_parser = parse_full_status)]
    pub queue_full_status: u16,
    /// How --cap lets work through: work-conserving (a freed slot is filled at
    /// once) or waves (all slots, then wait for all of them: to show what a
    /// wave-shaped pipeline costs).
    #[arg(long, default_value = "work-conserving", value_parser = parse_dispatch)]
    pub dispatch: Dispatch,
    /// Cadence of the `sample` records and of the gap counters.
    #[arg(long, default_value = "10ms", value_name = "DURATION", value_parser = parse_dur)]
    pub sample_interval: Duration,
    /// Largest request body forwarded (413 beyond).
    #[arg(long, default_value = "32MiB", value_name = "SIZE", value_parser = tpscope_proxy::parse_size)]
    pub max_body: u64,
    /// Longest wait for a request's headers, and for the next request on an idle
    /// keep-alive connection.
    #[arg(long, default_value = "30s", value_name = "DURATION", value_parser = parse_dur)]
    pub header_timeout: Duration,
    /// Longest wait for the upstream's response head (504 beyond).
    #[arg(long, default_value = "10m", value_name = "DURATION", value_parser = parse_dur)]
    pub upstream_timeout: Duration,
    /// Longest silence of the upstream inside a response (the response is cut).
    #[arg(long, default_value = "5m", value_name = "DURATION", value_parser = parse_dur)]
    pub idle_timeout: Duration,
    /// Longest wait to connect to the upstream (502 beyond).
    #[arg(long, default_value = "10s", value_name = "DURATION", value_parser = parse_dur)]
    pub connect_timeout: Duration,
    /// At a stop, how long open requests may take to finish.
    #[arg(long, default_value = "30s", value_name = "DURATION", value_parser = parse_dur)]
    pub drain_timeout: Duration,
    /// Serving threads, each with its own connections and upstream pool (default:
    /// one per core; docs/proxy.md).
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u16).range(1..))]
    pub threads: Option<u16>,
    /// A label of the run record, `KEY=VALUE` (repeatable).
    #[arg(long = "label", value_name = "KEY=VALUE", value_parser = parse_label)]
    pub labels: Vec<(String, String)>,
    /// The upstream's own metrics, scraped into `server_sample` records as
    /// `bench` does (default: the upstream root's /metrics when it answers).
    #[command(flatten)]
    pub server_metrics: ServerMetricsArgs,
    /// Every span also exported to an OpenTelemetry collector.
    #[command(flatten)]
    pub otlp: crate::otlp_flags::OtlpArgs,
    /// Tokenizer of the counts of responses without usage: o200k_base (default),
    /// cl100k_base, or hf:PATH (a Hugging Face tokenizer.json, or a model
    /// directory holding one; read offline). The run record names it.
    #[arg(long, value_name = "NAME|hf:PATH", value_parser = parse_tokenizer, default_value = "o200k_base")]
    pub tokenizer: tpscope_proxy::Tokenizer,
}

fn parse_tokenizer(s: &str) -> Result<tpscope_proxy::Tokenizer, String> {
    s.parse()
        .map_err(|e: tpscope_tokens::TokenizerError| e.to_string())
}

fn parse_addr(s: &str) -> Result<SocketAddr, String> {
    let t = s
        .strip_prefix("localhost:")
        .map(|p| format!("127.0.0.1:{p}"));
    t.as_deref()
        .unwrap_or(s)
        .parse()
        .map_err(|_| format!("`{s}` is not an address (expected e.g. 127.0.0.1:9000)"))
}

fn parse_rotate(s: &str) -> Result<Rotate, String> {
    s.parse()
}

fn parse_dur(s: &str) -> Result<Duration, String> {
    tpscope_model::parse_duration(s).map_err(|e| e.to_string())
}

fn parse_dispatch(s: &str) -> Result<Dispatch, String> {
    s.parse()
        .map_err(|e: tpscope_record::BadDispatch| e.to_string())
}

fn parse_full_status(s: &str) -> Result<u16, String> {
    match s.trim() {
        "429" => Ok(429),
        "503" => Ok(503),
        _ => Err(format!("`{s}`: expected 429 or 503")),
    }
}

fn parse_label(s: &str) -> Result<(String, String), String> {
    match s.split_once('=') {
        Some((k, v)) if !k.trim().is_empty() => Ok((k.trim().into(), v.into())),
        _ => Err(format!("`{s}`: expected KEY=VALUE")),
    }
}

/// Where the span log goes: `--out FILE`, nothing for `--out none`, else a
/// new file named as bench names its runs (never one that exists).
fn out_path(out: Option<&Path>) -> Option<PathBuf> {
    match out {
        Some(p) if p == Path::new("none") => None,
        Some(p) => Some(p.to_path_buf()),
        None => {
            let now = tpscope_model::Timestamp::now_wall();
            // The proxy creates the file with create-new semantics: a name
            // taken since is refused there, never overwritten.
            (0..64)
                .map(|i| tpscope_load::spec::unique_name(now, i))
                .find(|p| !p.exists())
        }
    }
}

/// Runs `tpscope proxy`.
pub fn run(args: ProxyArgs) -> anyhow::Result<ExitCode> {
    let mut cfg = ProxyConfig::new(args.upstream.clone());
    cfg.listen = args.listen;
    cfg.out = out_path(args.out.as_deref());
    if cfg.out.is_none() && args.rotate.is_some() {
        anyhow::bail!("--rotate: there is no span log to rotate (--out none)");
    }
    cfg.pipeline_width = args.pipeline_width;
    cfg.rotate = args.rotate;
    cfg.metrics_listen = args.metrics_listen;
    cfg.cap = args.cap;
    cfg.queue_limit = args.queue_limit;
    cfg.queue_full_status = args.queue_full_status;
    cfg.dispatch = args.dispatch;
    cfg.sample_interval = args.sample_interval;
    cfg.max_body = args.max_body;
    cfg.header_timeout = args.header_timeout;
    cfg.upstream_timeout = args.upstream_timeout;
    cfg.idle_timeout = args.idle_timeout;
    cfg.connect_timeout = args.connect_timeout;
    cfg.drain_timeout = args.drain_timeout;
    cfg.labels = args.labels.into_iter().collect::<BTreeMap<_, _>>();
    cfg.tokenizer = args.tokenizer;
    cfg.otlp = args.otlp.config();
    // Each client and each upstream stream is a socket: make room for thousands.
    let _ = tpscope_sim::raise_nofile_limit();
    cfg.threads = args.threads.map(usize::from);
    // The serving threads are the proxy's own (one runtime each); this one
    // runs the signals, the scrapers and the metrics page.
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .context("starting the async runtime")
        .failure()?;
    let out = cfg.out.clone();
    rt.block_on(async move {
        let mut cfg = cfg;
        let mut signals = StopSignals::install()
            .context("installing the signal handlers")
            .failure()?;
        // Before the proxy starts: an explicit page that does not answer is bad input.
        cfg.server_metrics = args.server_metrics.resolve(&args.upstream).await?;
        cfg.gpu_metrics = args.server_metrics.resolve_gpu().await?;
        let handle = match tpscope_proxy::start(cfg).await {
            Ok(h) => h,
            // A bad --upstream or status is bad input (exit 2); the rest failed
            // while starting (exit 1).
            Err(
                e @ (ProxyError::Upstream { .. }
                | ProxyError::QueueFullStatus(_)
                | ProxyError::ServerMetrics { .. }),
            ) => {
                return Err(e.into());
            }
            Err(e) => return Err(e).failure(),
        };
        let log = out;
        {
            let mut out = std::io::stdout().lock();
            write!(
                out,
                "tpscope proxy listening on http://{} → {}",
                handle.addr(),
                tpscope_record::redact_url(&args.upstream)
            )?;
            match &log {
                Some(p) => write!(out, ", spans to {}", p.display())?,
                None => write!(out, ", recording nothing (--out none)")?,
            }
            if let Some(m) = handle.metrics_addr() {
                write!(out, " (metrics on http://{m}/metrics)")?;
            }
            writeln!(out)?;
            out.flush()?;
        }
        let signo = signals.recv().await;
        let otlp = handle.export_stats();
        // A second signal ends the drain at once; what is open is still
        // written, as cancelled.
        let cut = handle.cutter();
        let stopping = handle.shutdown_with_scrapes();
        tokio::pin!(stopping);
        let stopped = tokio::select! {
            r = &mut stopping => r,
            Some(_) = signals.recv() => {
                cut.cut();
                stopping.await
            }
        };
        let (counts, scrapes) = stopped.failure()?;
        crate::otlp_flags::warn_dropped(otlp.as_deref());
        let mut err = std::io::stderr().lock();
        if let Some(s) = scrapes.filter(|s| s.failed > 0 || !s.problems.is_empty()) {
            writeln!(
                err,
                "warning: {} of {} server scrapes failed; {}",
                s.failed,
                s.failed + s.scrapes,
                s.problems.join("; ")
            )?;
        }
        writeln!(
            err,
            "tpscope proxy stopped{}: {} spans ({} ok, {} error, {} cancelled){}",
            signo.map(|s| format!(" by signal {s}")).unwrap_or_default(),
            counts.spans,
            counts.status.ok,
            counts.status.error,
            counts.status.cancelled,
            log.as_ref()
                .map(|p| format!(" in {}", p.display()))
                .unwrap_or_default(),
        )?;
        anyhow::Ok(())
    })?;
    Ok(ExitCode::SUCCESS)
}
