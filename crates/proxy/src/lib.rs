//! tpscope's recording reverse proxy (docs/design.md §11): every request is forwarded
//! to the upstream unchanged (hop-by-hop headers aside) and every response is
//! relayed as it arrives; completions (`/chat/completions`, `/completions`,
//! `/messages`) become spans through the one recording seam (`tpscope_record`:
//! writer thread, sampler, admission), with an optional cap and bounded FIFO, and
//! Prometheus metrics on a separate port. Clients speak HTTP/1.1 (keep-alive) or
//! HTTP/2 (h2c); upstreams `http` or `https` (rustls + ring, the client crate's
//! connector). Optionally the upstream's own metrics page is scraped into
//! `server_sample` records of the same run (`tpscope_scrape`, as bench does).
//!
//! [`start`] binds and serves; the [`ProxyHandle`] stops it (drain, then the
//! `end` record and flush).
#![warn(missing_docs)]

mod fast;
mod gate;
mod h1;
mod h1_relay;
mod headers;
mod metrics;
mod preface;
mod rec;
mod relay;
mod rotate;
mod service;
mod shards;
mod stop;
mod track;

use std::collections::BTreeMap;
use std::io::{self, Write};
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use hyper_util::rt::{TokioIo, TokioTimer};
use tokio::net::TcpListener;
use tokio::sync::watch;
use tpscope_client::{ClientConfig, Forwarder, Timeouts};
use tpscope_model::TargetApi;
pub use tpscope_record::Dispatch;
use tpscope_record::{RunCounts, RunInfo};
use tpscope_scrape::Scraper;
pub use tpscope_scrape::{ScrapeSummary, ScraperConfig};
pub use tpscope_tokens::Tokenizer;

pub use headers::{QUEUED_AT, completion_dialect, queued_at, strip_hop_by_hop};
pub use metrics::Metrics;
pub use rotate::{Rotate, parse_size, rotated_path};
pub use stop::CutNow;

/// Everything `tpscope proxy` is told.
#[derive(Clone, Debug)]
pub struct ProxyConfig {
    /// The upstream's origin (`http(s)://host:port`), optionally with a path
    /// prefix put before every request's path.
    pub upstream: String,
    /// Where clients connect (loopback unless told otherwise).
    pub listen: SocketAddr,
    /// The span log (`None`: spans are counted in the metrics only).
    pub out: Option<PathBuf>,
    /// Rotate the span log by size or age.
    pub rotate: Option<Rotate>,
    /// At most this many completions forwarded at once.
    pub cap: Option<u32>,
    /// How the cap lets queued work through: work-conserving (a freed slot is
    /// filled at once), or in waves (to show what a wave-shaped pipeline costs).
    pub dispatch: Dispatch,
    /// At most this many waiting for a slot (with a cap).
    pub queue_limit: usize,
    /// The status of a refusal when the queue is full (429 or 503).
    pub queue_full_status: u16,
    /// The `Retry-After` of a refusal.
    pub retry_after: Duration,
    /// The cadence of `sample` records and of the gap counters.
    pub sample_interval: Duration,
    /// Largest request body forwarded; larger ones are answered 413.
    pub max_body: u64,
    /// Longest wait for a request's headers (and for the next request on an
    /// idle keep-alive connection).
    pub header_timeout: Duration,
    /// Longest wait for the upstream's response head.
    pub upstream_timeout: Duration,
    /// Longest silence of the upstream in the middle of a body.
    pub idle_timeout: Duration,
    /// Longest wait to connect to the upstream.
    pub connect_timeout: Duration,
    /// Longest wait for open requests to finish at a stop.
    pub drain_timeout: Duration,
    /// Serve Prometheus text on this address (`/metrics`).
    pub metrics_listen: Option<SocketAddr>,
    /// Labels of the run record.
    pub labels: BTreeMap<String, String>,
    /// Scrape the upstream's own metrics page into `server_sample` records while
    /// the proxy runs (first scrape before it serves, last after it drains), as
    /// `bench --server-metrics` does; `None`: not scraped.
    pub server_metrics: Option<ScraperConfig>,
    /// GPU-telemetry pages (NVIDIA DCGM exporters) scraped the same way, for the
    /// report's energy per token.
    pub gpu_metrics: Vec<ScraperConfig>,
    /// Counts the output of responses without `usage` (named in the run record).
    pub tokenizer: Tokenizer,
    /// How many requests the pipeline behind the proxy keeps in flight, when
    /// known (the run record's `load.pipeline_width`: the width of the gap the
    /// report infers when requests do not state their queue time).
    pub pipeline_width: Option<u32>,
    /// Also export every span to an OpenTelemetry collector (docs/otlp.md).
    pub otlp: Option<tpscope_record::OtlpConfig>,
    /// Serving threads, each with its own connections (`None`: one per core).
    pub threads: Option<usize>,
}

impl ProxyConfig {
    /// Defaults for `upstream`: loopback port 9000, 32 MiB bodies, no cap.
    pub fn new(upstream: impl Into<String>) -> ProxyConfig {
        ProxyConfig {
            upstream: upstream.into(),
            listen: SocketAddr::from(([127, 0, 0, 1], 9000)),
            out: None,
            rotate: None,
            cap: None,
            dispatch: Dispatch::WorkConserving,
            queue_limit: 1000,
            queue_full_status: 429,
            retry_after: Duration::from_secs(1),
            sample_interval: tpscope_record::DEFAULT_SAMPLE_INTERVAL,
            max_body: 32 << 20,
            header_timeout: Duration::from_secs(30),
            upstream_timeout: Duration::from_secs(600),
            idle_timeout: Duration::from_secs(300),
            connect_timeout: Duration::from_secs(10),
            drain_timeout: Duration::from_secs(30),
            metrics_listen: None,
            labels: BTreeMap::new(),
            server_metrics: None,
            gpu_metrics: Vec::new(),
            tokenizer: Tokenizer::default(),
            pipeline_width: None,
            otlp: None,
            threads: None,
        }
    }
}

/// Why the proxy could not start or stop cleanly.
#[derive(Debug, thiserror::Error)]
pub enum ProxyError {
    /// `--upstream` is not an `http(s)://host[:port][/prefix]` URL.
    #[error("--upstream `{url}`: {reason}")]
    Upstream {
        /// The URL as given.
        url: String,
        /// What is wrong.
        reason: String,
    },
    /// `--queue-full-status` is neither 429 nor 503.
    #[error("--queue-full-status {0}: expected 429 or 503")]
    QueueFullStatus(u16),
    /// Zero serving threads asked for.
    #[error("the proxy needs at least one serving thread")]
    NoThreads,
    /// A serving thread could not be started.
    #[error("cannot start {threads} serving threads: {source}")]
    Threads {
        /// How many were asked for.
        threads: usize,
        /// What the system said.
        source: io::Error,
    },
    /// Binding a listening address failed.
    #[error("cannot listen on {addr}: {source}")]
    Bind {
        /// The address.
        addr: SocketAddr,
        /// What the system said.
        source: io::Error,
    },
    /// The upstream's metrics page cannot be scraped (a URL the client rejects,
    /// or no thread for the scraper).
    #[error("--server-metrics {url}: {reason}")]
    ServerMetrics {
        /// The page's URL.
        url: String,
        /// What is wrong.
        reason: String,
    },
    /// Creating or writing the span log failed.
    #[error("{path}: {source}")]
    Log {
        /// The file.
        path: String,
        /// What the system said.
        source: io::Error,
    },
}

/// The upstream split into what requests need.
#[derive(Clone, Debug)]
pub(crate) struct Upstream {
    pub https: bool,
    pub scheme: hyper::http::uri::Scheme,
    pub authority: hyper::http::uri::Authority,
    /// Put before every request's path (no trailing `/`; empty for none).
    pub prefix: String,
    /// As given, for messages (no credentials, see `redact_url`).
    pub shown: String,
}

fn parse_upstream(url: &str) -> Result<Upstream, ProxyError> {
    let bad = |reason: &str| ProxyError::Upstream {
        url: tpscope_record::redact_url(url),
        reason: reason.into(),
    };
    let uri: hyper::Uri = url
        .parse()
        .map_err(|_| bad("not a URL (expected http://host:port or https://host)"))?;
    let scheme = uri
        .scheme()
        .cloned()
        .ok_or_else(|| bad("no scheme (http or https)"))?;
    let https = match scheme.as_str() {
        "http" => false,
        "https" => true,
        _ => return Err(bad("the scheme must be http or https")),
    };
    let authority = uri.authority().cloned().ok_or_else(|| bad("no host"))?;
    if authority.as_str().contains('@') {
        return Err(bad(
            "credentials in the URL are not forwarded; send them as headers",
        ));
    }
    if uri.query().is_some() {
        return Err(bad("a query string cannot be forwarded"));
    }
    Ok(Upstream {
        https,
        scheme,
        authority,
        prefix: uri.path().trim_end_matches('/').to_string(),
        shown: tpscope_record::redact_url(url),
    })
}

/// A running proxy.
pub struct ProxyHandle {
    addr: SocketAddr,
    metrics_addr: Option<SocketAddr>,
    stop: watch::Sender<bool>,
    served: tokio::task::JoinHandle<()>,
    metrics_task: Option<tokio::task::JoinHandle<()>>,
    running: rec::Running,
    run_id: String,
    scraper: Option<Scraper>,
    gpu_scrapers: Vec<Scraper>,
    cut: CutNow,
    otlp: Option<Arc<tpscope_record::ExportStats>>,
}

impl ProxyHandle {
    /// Ends a stop's drain at once when called (a second signal): what is
    /// still open is written as cancelled.
    pub fn cutter(&self) -> CutNow {
        self.cut.clone()
    }

    /// Where clients connect.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// Where Prometheus scrapes, when asked for.
    pub fn metrics_addr(&self) -> Option<SocketAddr> {
        self.metrics_addr
    }

    /// The run's id (in every record).
    pub fn run_id(&self) -> &str {
        &self.run_id
    }

    /// What the OTLP export did, when the proxy exports (final once the
    /// shutdown has returned).
    pub fn export_stats(&self) -> Option<Arc<tpscope_record::ExportStats>> {
        self.otlp.clone()
    }

    /// Stops accepting, lets open requests finish (up to the drain timeout; the
    /// rest are cancelled), then writes the `end` record and flushes.
    pub async fn shutdown(self) -> Result<RunCounts, ProxyError> {
        self.shutdown_with_scrapes().await.map(|(counts, _)| counts)
    }

    /// [`ProxyHandle::shutdown`], and what the scraper of the upstream's metrics
    /// did (`None` when it did not run): its last scrape is taken after the drain,
    /// so the server's counters cover every request the proxy forwarded.
    pub async fn shutdown_with_scrapes(
        self,
    ) -> Result<(RunCounts, Option<ScrapeSummary>), ProxyError> {
        let _ = self.stop.send(true);
        let _ = self.served.await;
        if let Some(m) = self.metrics_task {
            m.abort();
            let _ = m.await;
        }
        let running = self.running;
        let scraper = self.scraper;
        let gpu_scrapers = self.gpu_scrapers;
        tokio::task::spawn_blocking(move || {
            // Before the `end` record: the last server sample belongs to the run.
            let scrapes = scraper.map(Scraper::stop);
            for g in gpu_scrapers {
                g.stop();
            }
            running.close().map(|counts| (counts, scrapes))
        })
        .await
        .unwrap_or_else(|_| Err(io::Error::other("the writer panicked")))
        .map_err(|source| ProxyError::Log {
            path: "the span log".into(),
            source,
        })
    }
}

/// One serving thread per core the process may use, as nginx's `worker_processes
/// auto`. Fewer lose at normal priority: on two cores shared with a client and an
/// upstream, one thread added 6.5× the median latency of two (257 against 40 µs),
/// though under `chrt -f 10` it added a little less (0.94×; docs/proxy-bench.md,
/// "The thread count at normal priority").
fn default_threads() -> usize {
    std::thread::available_parallelism().map_or(1, |n| n.get())
}

/// The run record is written but the proxy cannot serve: ends the run (its
/// `end` record) before the caller says why.
async fn end_started_run(running: rec::Running, scrapers: Vec<Scraper>) {
    let _ = tokio::task::spawn_blocking(move || {
        for s in scrapers {
            s.stop();
        }
        running.close()
    })
    .await;
}

/// Binds, starts the run and serves until [`ProxyHandle::shutdown`].
pub async fn start(cfg: ProxyConfig) -> Result<ProxyHandle, ProxyError> {
    let upstream = parse_upstream(&cfg.upstream)?;
    if !matches!(cfg.queue_full_status, 429 | 503) {
        return Err(ProxyError::QueueFullStatus(cfg.queue_full_status));
    }
    let client_cfg = ClientConfig {
        timeouts: Timeouts {
            connect: Some(cfg.connect_timeout),
            ..Timeouts::default()
        },
        ..ClientConfig::default()
    };
    // One forwarder (a pool of upstream connections) per serving thread, so
    // both connections of a stream are served by one thread.
    let threads = cfg.threads.unwrap_or_else(default_threads);
    if threads == 0 {
        return Err(ProxyError::NoThreads);
    }
    let mut forwarders = Vec::with_capacity(threads);
    for _ in 0..threads {
        forwarders.push(Forwarder::new(upstream.https, &client_cfg).map_err(|e| {
            ProxyError::Upstream {
                url: upstream.shown.clone(),
                reason: e.to_string(),
            }
        })?);
    }
    let listener = TcpListener::bind(cfg.listen)
        .await
        .map_err(|source| ProxyError::Bind {
            addr: cfg.listen,
            source,
        })?;
    let addr = listener.local_addr().map_err(|source| ProxyError::Bind {
        addr: cfg.listen,
        source,
    })?;
    let metrics_listener = match cfg.metrics_listen {
        Some(a) => Some(
            TcpListener::bind(a)
                .await
                .map_err(|source| ProxyError::Bind { addr: a, source })?,
        ),
        None => None,
    };
    let metrics_addr = metrics_listener.as_ref().and_then(|l| l.local_addr().ok());

    let mut info = RunInfo::new()
        .url(&upstream.shown)
        .api(TargetApi::Proxied)
        .sample_interval(cfg.sample_interval)
        .load(
            serde_json::json!({"mode": "proxy", "listen": addr.to_string(),
            "queue_limit": cfg.cap.map(|_| cfg.queue_limit),
            "dispatch": cfg.cap.map(|_| cfg.dispatch.to_string()),
            "pipeline_width": cfg.pipeline_width}),
        );
    if let Some(c) = cfg.cap {
        info = info.cap(c);
    }
    info.tokenizer = Some(cfg.tokenizer.name().into());
    for (k, v) in &cfg.labels {
        info = info.label(k.clone(), v.clone());
    }
    let header = rotate::HeaderSlot::default();
    let out: Box<dyn Write + Send> = match (&cfg.out, &cfg.rotate) {
        (None, _) => Box::new(io::sink()),
        (Some(p), None) => {
            Box::new(
                std::fs::File::create_new(p).map_err(|source| ProxyError::Log {
                    path: p.display().to_string(),
                    source,
                })?,
            )
        }
        (Some(p), Some(r)) => Box::new(rotate::Rotating::open(p, *r, header.clone()).map_err(
            |source| ProxyError::Log {
                path: rotate::rotated_path(p, 0).display().to_string(),
                source,
            },
        )?),
    };
    let metrics = Arc::new(Metrics::new(cfg.cap));
    let (running, rec, otlp) = rec::start(
        out,
        info,
        cfg.tokenizer,
        cfg.otlp.clone(),
        metrics.clone(),
        |r| header.set(r),
    );
    let run_id = rec.session.run_id().to_string();
    // The server's page first, then the GPU pages: each scraper's first scrape
    // precedes the first request.
    let pages: Vec<ScraperConfig> = cfg
        .server_metrics
        .iter()
        .chain(&cfg.gpu_metrics)
        .cloned()
        .collect();
    let mut scrapers = Vec::with_capacity(pages.len());
    for sc in pages {
        let url = tpscope_record::redact_url(&sc.url);
        match Scraper::start(
            sc,
            run_id.clone(),
            rec.session.clock(),
            rec.session.writer().clone(),
        )
        .await
        {
            Ok(s) => scrapers.push(s),
            Err(e) => {
                end_started_run(running, scrapers).await;
                return Err(ProxyError::ServerMetrics {
                    url,
                    reason: e.to_string(),
                });
            }
        }
    }
    let gpu_scrapers = scrapers.split_off(usize::from(cfg.server_metrics.is_some()));
    let scraper = scrapers.pop();
    let gate = cfg.cap.map(|c| {
        let (a, u) = (rec.clone(), rec.clone());
        gate::Gate::new(
            c,
            cfg.queue_limit,
            cfg.dispatch,
            Box::new(move |at| a.admit_at(at)),
            Box::new(move || u.unadmit()),
        )
    });
    // Plain-HTTP upstreams are relayed by the proxy's own HTTP/1.1 code
    // (`fast`); TLS ones by hyper's client.
    let plain_origin = (!upstream.https)
        .then(|| {
            format!("http://{}", upstream.authority)
                .parse::<hyper::Uri>()
                .ok()
        })
        .flatten();
    let states = forwarders
        .into_iter()
        .map(|forwarder| {
            Arc::new(service::State {
                upstream: upstream.clone(),
                forwarder,
                gate: gate.clone(),
                rec: rec.clone(),
                cfg: cfg.clone(),
                plain: plain_origin.clone().map(|o| {
                    fast::Pool::new(o, client_cfg.pool_idle_timeout.unwrap_or(Duration::MAX))
                }),
            })
        })
        .collect();
    let (stop, stop_rx) = watch::channel(false);
    let cut = CutNow::default();
    let shards = match shards::Shards::start(listener, states, &stop_rx).await {
        Ok(s) => s,
        Err(source) => {
            scrapers.extend(gpu_scrapers);
            scrapers.extend(scraper);
            end_started_run(running, scrapers).await;
            return Err(ProxyError::Threads { threads, source });
        }
    };
    let served = tokio::spawn(shards.run(stop_rx.clone(), cut.clone()));
    let metrics_task = metrics_listener
        .map(|l| tokio::spawn(serve_metrics(l, metrics, cfg.header_timeout, stop_rx)));
    Ok(ProxyHandle {
        addr,
        metrics_addr,
        stop,
        served,
        metrics_task,
        running,
        run_id,
        scraper,
        gpu_scrapers,
        cut,
        otlp,
    })
}

async fn serve_metrics(
    listener: TcpListener,
    metrics: Arc<Metrics>,
    header_timeout: Duration,
    mut stop: watch::Receiver<bool>,
) {
    loop {
        let (stream, _) = tokio::select! {
            _ = stop.changed() => return,
            r = listener.accept() => match r {
                Ok(x) => x,
                Err(_) => {
                    tokio::time::sleep(Duration::from_millis(50)).await;
                    continue;
                }
            },
        };
        let m = metrics.clone();
        tokio::spawn(async move {
            let svc = hyper::service::service_fn(move |req| {
                let m = m.clone();
                async move { Ok::<_, std::convert::Infallible>(service::metrics_response(&m, &req)) }
            });
            // A scraper sends its request at once: the header timeout holds
            // here too, so idle connections do not pile up.
            let _ = hyper::server::conn::http1::Builder::new()
                .timer(TokioTimer::new())
                .header_read_timeout(header_timeout)
                .serve_connection(TokioIo::new(stream), svc)
                .await;
        });
    }
}
