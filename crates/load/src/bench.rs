//! The bench as a library call: a validated [`BenchSpec`] run against a target (a
//! server's URL, or a simulator the caller started), each level's run recorded
//! into one span log, the runs' summaries handed back. `tpscope bench` is this
//! call plus the command line's concerns (flags, files, progress, signals, the
//! report, exit statuses).
//!
//! Two steps, so a caller can act between them (the command line resolves the
//! server's metrics page and starts its progress line there): [`connect`] finds
//! the model and fits the workload to its context; [`Connected::run`] records
//! the warm-up and every level. [`bench()`] does both with no observer.
//!
//! ```no_run
//! # async fn demo() -> Result<(), Box<dyn std::error::Error>> {
//! use tpscope_load::bench::{BenchTarget, bench};
//! use tpscope_load::spec::{BenchSpec, Flags};
//!
//! let spec = BenchSpec::from_flags(Flags {
//!     url: Some("http://127.0.0.1:8000/v1".into()),
//!     requests: Some(20),
//!     ..Flags::default()
//! })?;
//! let target = BenchTarget::url(spec.url.clone().unwrap_or_default());
//! let log = std::fs::File::create_new("spans.jsonl")?;
//! let run = bench(&spec, target, Box::new(log)).await?;
//! println!("{} ok of {}", run.total().status.ok, run.total().spans);
//! # Ok(())
//! # }
//! ```

use std::io::Write;
use std::sync::Arc;
use std::time::Duration;

use tpscope_client::{Client, ClientError, Endpoint, LiveTokens};
use tpscope_model::{RunClock, Target};
use tpscope_record::{
    ExportStats, LiveStats, OtlpConfig, RunInfo, Session, TOOL, Writer, WriterTx, new_run_id,
    redact_url,
};
use tpscope_scrape::{ScrapeSummary, Scraper, ScraperConfig};

use crate::executor::{Control, RunSummary, execute, execute_in};
use crate::spec::{BenchSpec, ContextFit, SimulatorSettings, SpecError};

/// What is measured: a server at a base URL, possibly a simulator the caller
/// started (whose settings the run records name).
#[derive(Clone, Debug)]
pub struct BenchTarget {
    /// The base URL requests go to.
    pub base_url: String,
    /// The simulator behind `base_url`, when it is one (the run records then
    /// name no URL).
    pub simulator: Option<Simulated>,
}

/// A simulator measured in-process.
#[derive(Clone, Debug)]
pub struct Simulated {
    /// Its settings, for the run records.
    pub settings: SimulatorSettings,
    /// Its model's context, in tokens.
    pub max_model_len: u32,
}

impl BenchTarget {
    /// A server at `base_url`.
    pub fn url(base_url: impl Into<String>) -> BenchTarget {
        BenchTarget {
            base_url: base_url.into(),
            simulator: None,
        }
    }
}

/// What a bench tells its caller while it runs (none of it is an error).
pub trait Observer: Send + Sync {
    /// A remark: a slow model lookup, requests shortened to fit the context.
    fn note(&self, _line: &str) {}
    /// Something did not work but the bench goes on (a metrics page not scraped).
    fn warning(&self, _line: &str) {}
}

/// Says nothing.
impl Observer for () {}

/// The live counters a bench feeds as it runs (a progress line reads them).
#[derive(Clone, Debug, Default)]
pub struct Live {
    /// Requests, spans, occupancy, lag.
    pub stats: Arc<LiveStats>,
    /// Tokens as they stream.
    pub tokens: Arc<LiveTokens>,
}

/// Why a bench could not run.
#[derive(Debug, thiserror::Error)]
pub enum BenchError {
    /// The client cannot be made for this target (a bad URL or header).
    #[error("--url")]
    Client(#[source] ClientError),
    /// No model given and `GET /models` did not name one in time.
    #[error("asking {url}/models for a model (give --model to skip this)")]
    ModelLookup {
        /// The target, redacted.
        url: String,
        /// What went wrong.
        #[source]
        source: LookupError,
    },
    /// `GET /models` answered with no model.
    #[error("{url}/models lists no model: give --model")]
    NoModel {
        /// The target, redacted.
        url: String,
    },
    /// The workload cannot fit the model's context.
    #[error(transparent)]
    Context(#[from] SpecError),
    /// The span log could not be written.
    #[error("writing the span log")]
    Log(#[source] std::io::Error),
    /// A run's load settings could not be serialised.
    #[error("the run's load settings")]
    Settings(#[source] serde_json::Error),
}

impl BenchError {
    /// Whether this went wrong while running (the target, the log), rather than
    /// because of the input.
    pub fn is_failure(&self) -> bool {
        matches!(self, BenchError::ModelLookup { .. } | BenchError::Log(_))
    }
}

/// Why the model lookup failed.
#[derive(Debug, thiserror::Error)]
pub enum LookupError {
    /// No answer in time.
    #[error("no answer within {} s: is it an OpenAI-compatible server, and up?", .0.as_secs_f64())]
    Timeout(Duration),
    /// The request failed.
    #[error(transparent)]
    Client(#[from] ClientError),
}

/// A target ready to be measured: the model named, the workload fitted, the
/// client made.
pub struct Connected<'s> {
    spec: &'s BenchSpec,
    target: BenchTarget,
    /// The model requests name.
    pub model: String,
    /// The workload fitted to the model's context (with its note, if any).
    pub context: ContextFit,
    model_root: Option<String>,
    client: Arc<Client>,
    live: Live,
    otlp: Option<OtlpConfig>,
}

/// How a bench ended.
#[derive(Clone, Debug, Default)]
pub struct BenchRun {
    /// Each run's summary, in order (one per level that started; a stop before a
    /// level leaves it out).
    pub summaries: Vec<RunSummary>,
    /// The runs' ids, as the summaries.
    pub run_ids: Vec<String>,
    /// What the OTLP export sent and dropped, when spans were exported.
    pub otlp: Option<Arc<ExportStats>>,
}

impl BenchRun {
    /// The counts of every run together.
    pub fn total(&self) -> RunSummary {
        RunSummary::total(&self.summaries)
    }
}

/// Runs `spec` against `target`, the span log written to `sink`: [`connect`]
/// then [`Connected::run`], with no metrics scraped and nothing said.
pub async fn bench(
    spec: &BenchSpec,
    target: BenchTarget,
    sink: Box<dyn Write + Send>,
) -> Result<BenchRun, BenchError> {
    let connected = connect(spec, target, Live::default(), &()).await?;
    connected.run(sink, &[], &Control::default(), &()).await
}

/// Names the model (asking `GET /models` when the spec names none), fits the
/// workload to the model's context when it is known, and makes the client, whose
/// attempts count their tokens into `live`.
pub async fn connect<'s>(
    spec: &'s BenchSpec,
    target: BenchTarget,
    live: Live,
    obs: &dyn Observer,
) -> Result<Connected<'s>, BenchError> {
    let mut endpoint = endpoint(spec, &target.base_url);
    let shown_url = redact_url(&target.base_url);
    // The model's context, when known: the simulator's own, or what the server's
    // model list says (vLLM's max_model_len).
    let mut max_model_len = target.simulator.as_ref().map(|s| s.max_model_len);
    let mut model_root = None;
    if endpoint.model.is_empty() {
        let probe =
            Client::new(endpoint.clone(), spec.client.clone()).map_err(BenchError::Client)?;
        let limit = spec.model_lookup_timeout();
        let waiting = format!(
            "waiting for {shown_url}/models to name the model (up to {} s; give --model \
             to skip this)",
            limit.as_secs_f64()
        );
        let models = tokio::time::timeout(limit, said_after_2s(probe.models(), waiting, obs))
            .await
            .map_err(|_| LookupError::Timeout(limit))
            .and_then(|r| Ok(r?))
            .map_err(|source| BenchError::ModelLookup {
                url: shown_url.clone(),
                source,
            })?;
        let first = models
            .into_iter()
            .next()
            .ok_or_else(|| BenchError::NoModel {
                url: shown_url.clone(),
            })?;
        endpoint.model = first.id;
        max_model_len = max_model_len.or(first.max_model_len);
        model_root = first.root;
    }
    let context = match max_model_len {
        Some(m) => spec.context_fit(m)?,
        None => ContextFit::default(),
    };
    if let Some(note) = &context.note {
        obs.note(note);
    }
    let client = Client::with_live(
        endpoint.clone(),
        spec.client.clone(),
        Some(live.tokens.clone()),
    )
    .map_err(BenchError::Client)?;
    Ok(Connected {
        spec,
        target,
        model: endpoint.model,
        context,
        model_root,
        client: Arc::new(client),
        live,
        otlp: None,
    })
}

/// The client's endpoint of a spec at `base_url` (the model as given, or empty).
fn endpoint(spec: &BenchSpec, base_url: &str) -> Endpoint {
    let mut endpoint = Endpoint::new(
        base_url.to_string(),
        spec.api,
        spec.flags.model.clone().unwrap_or_default(),
    );
    endpoint.api_key = spec.flags.api_key.clone().filter(|k| !k.is_empty());
    endpoint.headers = spec.flags.headers.clone();
    endpoint.extra_body = spec.extra_body.clone();
    endpoint.include_usage = spec.include_usage;
    endpoint
}

/// `work`, saying `what` when it takes more than 2 s (a dead server's model list
/// was a 30 s silent wait).
async fn said_after_2s<T>(
    work: impl std::future::Future<Output = T>,
    what: String,
    obs: &dyn Observer,
) -> T {
    tokio::pin!(work);
    tokio::select! {
        out = &mut work => out,
        () = tokio::time::sleep(Duration::from_secs(2)) => {
            obs.note(&what);
            work.await
        }
    }
}

impl Connected<'_> {
    /// The live counters this bench feeds.
    pub fn live(&self) -> &Live {
        &self.live
    }

    /// Also exports every span the run writes to an OTLP collector (docs/otlp.md).
    pub fn export_otlp(&mut self, cfg: OtlpConfig) {
        self.otlp = Some(cfg);
    }

    /// Runs the warm-up (unwritten) and each level, writing the span log to
    /// `sink` and scraping `scrape`'s pages beside each run; `control` stops it
    /// early. The log is complete (flushed) when this returns.
    pub async fn run(
        self,
        sink: Box<dyn Write + Send>,
        scrape: &[ScraperConfig],
        control: &Control,
        obs: &dyn Observer,
    ) -> Result<BenchRun, BenchError> {
        let spec = self.spec;
        let live = &self.live;
        let mut writer = Writer::to_writer(sink, spec.flags.tokenizer, Some(live.stats.clone()));
        let mut out = BenchRun {
            otlp: self.otlp.clone().map(|c| writer.export_otlp(c)),
            ..BenchRun::default()
        };
        if let Some(plan) = spec.warmup_plan() {
            let planned = plan.requests;
            live.stats.start_run("warm-up", planned, plan.cap);
            live.tokens.reset();
            if planned != Some(0) {
                let (stats, client) = (live.stats.clone(), self.client.clone());
                execute(plan, RunClock::start(), client, None, stats, control).await;
            }
        }
        for i in 0..spec.levels.len() {
            if control.stop.is_cancelled() {
                break;
            }
            let run_id = new_run_id(i);
            let summary = self
                .level(i, &run_id, writer.sender(), scrape, control, obs)
                .await?;
            out.summaries.push(summary);
            out.run_ids.push(run_id);
        }
        writer.finish().map_err(BenchError::Log)?;
        Ok(out)
    }

    /// One level's run, a [`Session`] on the shared writer: its `run` record, its
    /// scrapers, the executor, its `end` record.
    async fn level(
        &self,
        i: usize,
        run_id: &str,
        rec: WriterTx,
        scrape: &[ScraperConfig],
        control: &Control,
        obs: &dyn Observer,
    ) -> Result<RunSummary, BenchError> {
        let (spec, live, level) = (self.spec, &self.live, &self.spec.levels[i]);
        let info = self.run_info(i)?;
        let session = Arc::new(Session::open(rec, live.stats.clone(), run_id, info));
        live.stats.start_run(
            level.label.as_deref().unwrap_or(""),
            level.requests,
            level.cap,
        );
        live.tokens.reset();
        let mut plan = spec.plan(level, run_id.to_string());
        plan.context = self.context.limit;
        let scrapers = start_scrapers(scrape, &session, obs).await;
        let summary = execute_in(plan, session.clone(), self.client.clone(), control).await;
        stop_scrapers(scrapers, obs).await;
        session.end(live.stats.lag.schedule_late_max());
        session.sync();
        Ok(summary)
    }

    /// The run record's metadata of level `i`.
    fn run_info(&self, i: usize) -> Result<RunInfo, BenchError> {
        let (spec, level) = (self.spec, &self.spec.levels[i]);
        let mut labels = spec.labels.clone();
        if let Some(l) = &level.label {
            labels.insert("sweep".into(), l.replace(' ', "="));
        }
        if let Some(root) = &self.model_root {
            labels.insert(
                tpscope_analysis::count_check::MODEL_ROOT_LABEL.into(),
                root.clone(),
            );
        }
        let simulator = self.target.simulator.as_ref();
        let mut load = spec.load_settings(i, simulator.map(|s| s.settings.clone()));
        load.context_limit = self.context.limit;
        Ok(RunInfo {
            tool: TOOL.into(),
            target: Target {
                url: match simulator {
                    None => Some(redact_url(&self.target.base_url)),
                    Some(_) => None,
                },
                model: Some(self.model.clone()),
                api: Some(spec.api.into()),
            },
            cap: level.cap,
            token_source: Some(spec.token_source()),
            tokenizer: Some(spec.flags.tokenizer.name().into()),
            sample_interval: Some(spec.flags.sample_interval),
            // The bench's sampler writes every tick (no heartbeat).
            sample_heartbeat: None,
            load: serde_json::to_value(load).map_err(BenchError::Settings)?,
            labels,
        })
    }
}

/// Starts a run's scrapers, one per page (each first scrape taken before this
/// returns).
async fn start_scrapers(
    pages: &[ScraperConfig],
    session: &Session,
    obs: &dyn Observer,
) -> Vec<Scraper> {
    let mut out = Vec::with_capacity(pages.len());
    for cfg in pages {
        let (run_id, clock) = (session.run_id().to_string(), session.clock());
        match Scraper::start(cfg.clone(), run_id, clock, session.writer().clone()).await {
            Ok(s) => out.push(s),
            Err(e) => obs.warning(&format!("{} is not scraped: {e}", cfg.url)),
        }
    }
    out
}

/// Takes each page's last scrape and stops its scraper, warning when scrapes failed.
async fn stop_scrapers(scrapers: Vec<Scraper>, obs: &dyn Observer) {
    for s in scrapers {
        let url = s.url().to_string();
        let summary: ScrapeSummary = tokio::task::spawn_blocking(move || s.stop())
            .await
            .unwrap_or_default();
        if summary.failed > 0 || !summary.problems.is_empty() {
            obs.warning(&format!(
                "{} of {} scrapes of {url} failed; {}",
                summary.failed,
                summary.failed + summary.scrapes,
                summary.problems.join("; ")
            ));
        }
    }
}
