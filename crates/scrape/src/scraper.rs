//! The scraper: on its own thread (with a single-threaded runtime, so it never
//! queues behind the streams it measures), fetches a `/metrics` page on a
//! cadence, normalises it and sends a `server_sample` record to the writer. One
//! scrape is taken when it starts and one when it stops, so the counters' deltas
//! cover exactly the stretch in between. `bench` starts one per run; the proxy can
//! start one the same way.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use tokio::sync::oneshot;
use tpscope_client::{Api, Client, ClientConfig, ClientError, Endpoint};
use tpscope_model::{RunClock, ServerSampleRecord};
use tpscope_record::WriterTx;

use crate::normalize::normalize;
use crate::text::parse;

/// The default cadence of scrapes.
pub const DEFAULT_INTERVAL: Duration = Duration::from_secs(1);

/// Where and how often to scrape.
#[derive(Clone, Debug)]
pub struct ScraperConfig {
    /// The page's URL (`http://host:port/metrics`).
    pub url: String,
    /// The cadence.
    pub interval: Duration,
    /// The longest one scrape may take (a slower answer counts as failed).
    pub timeout: Duration,
}

impl ScraperConfig {
    /// Scrapes of `url` every `interval`, each within the interval (at least 1 s,
    /// at most 10 s).
    pub fn new(url: impl Into<String>, interval: Duration) -> ScraperConfig {
        ScraperConfig {
            url: url.into(),
            interval,
            timeout: interval.clamp(Duration::from_secs(1), Duration::from_secs(10)),
        }
    }
}

/// The `/metrics` URL at the root of a server whose API base is `base_url`
/// (`http://h:8000/v1` → `http://h:8000/metrics`).
pub fn metrics_url_of(base_url: &str) -> String {
    let t = base_url.trim();
    let scheme_end = t.find("://").map_or(0, |i| i + 3);
    let root_end = t[scheme_end..]
        .find('/')
        .map_or(t.len(), |i| scheme_end + i);
    format!("{}/metrics", &t[..root_end])
}

/// What a scrape gives: the record, and the parser's warnings.
fn scrape_once(
    body: &[u8],
    run_id: &str,
    at: tpscope_model::Timestamp,
) -> (ServerSampleRecord, Vec<String>) {
    let text = String::from_utf8_lossy(body);
    let page = parse(&text);
    let rec = normalize(&page, run_id, at);
    (rec, page.warnings)
}

/// Why a scraper could not start.
#[derive(Debug, thiserror::Error)]
pub enum StartError {
    /// The URL is not usable.
    #[error(transparent)]
    Client(#[from] ClientError),
    /// No thread could be started.
    #[error("spawning the scraper thread: {0}")]
    Spawn(std::io::Error),
}

/// Counts kept while scraping.
#[derive(Default)]
struct Counters {
    ok: AtomicU64,
    failed: AtomicU64,
}

/// What a scraper did, when stopped.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ScrapeSummary {
    /// Scrapes written.
    pub scrapes: u64,
    /// Scrapes that failed (no answer, an error status, or an empty page).
    pub failed: u64,
    /// The first few problems (failures, malformed lines), for a warning.
    pub problems: Vec<String>,
}

/// A running scraper.
pub struct Scraper {
    stop: Option<oneshot::Sender<()>>,
    handle: Option<JoinHandle<Vec<String>>>,
    counters: Arc<Counters>,
    url: String,
}

/// Problems kept for the summary.
const MAX_PROBLEMS: usize = 5;

impl Scraper {
    /// Fetches the page once to see whether it answers with Prometheus text: the
    /// number of series it shows, or why not.
    pub async fn probe(url: &str, timeout: Duration) -> Result<usize, String> {
        let client = client_for(url).map_err(|e| e.to_string())?;
        let body = client.get_page(timeout).await.map_err(|e| e.to_string())?;
        let n = parse(&String::from_utf8_lossy(&body)).samples.len();
        if n == 0 {
            Err("the page holds no Prometheus samples".into())
        } else {
            Ok(n)
        }
    }

    /// Fetches a GPU-telemetry page once: the number of devices it shows, or why
    /// it is not an NVIDIA DCGM exporter's page with a device's readings.
    pub async fn probe_gpu(url: &str, timeout: Duration) -> Result<usize, String> {
        let client = client_for(url).map_err(|e| e.to_string())?;
        let body = client.get_page(timeout).await.map_err(|e| e.to_string())?;
        let text = String::from_utf8_lossy(&body);
        let page = parse(&text);
        if !crate::dcgm::is_dcgm(&page) {
            return Err(format!(
                "not an NVIDIA DCGM exporter's page (no DCGM_FI_ series among its {})",
                page.samples.len()
            ));
        }
        match crate::dcgm::gpus(&page).len() {
            0 => Err("a DCGM page without utilisation, power or energy of any GPU".into()),
            n => Ok(n),
        }
    }

    /// The page this scraper reads.
    pub fn url(&self) -> &str {
        &self.url
    }

    /// Starts scraping for run `run_id`, sending records to `tx`; returns after the
    /// first scrape has been sent (or has failed), so that it precedes any request
    /// the run makes.
    pub async fn start(
        cfg: ScraperConfig,
        run_id: String,
        clock: RunClock,
        tx: WriterTx,
    ) -> Result<Scraper, StartError> {
        let client = client_for(&cfg.url)?;
        let url = cfg.url.clone();
        let (stop_tx, stop_rx) = oneshot::channel();
        let (first_tx, first_rx) = oneshot::channel();
        let counters = Arc::new(Counters::default());
        let c2 = counters.clone();
        let handle = std::thread::Builder::new()
            .name("tpscope-scraper".into())
            .spawn(move || {
                let rt = match tokio::runtime::Builder::new_current_thread()
                    .enable_all()
                    .build()
                {
                    Ok(rt) => rt,
                    Err(e) => {
                        let _ = first_tx.send(());
                        return vec![format!("the scraper could not start: {e}")];
                    }
                };
                rt.block_on(run(cfg, client, run_id, clock, tx, stop_rx, first_tx, c2))
            })
            .map_err(StartError::Spawn)?;
        // The first scrape is bounded by its timeout; a thread that ends without
        // signalling drops the sender, which ends the wait too.
        let _ = first_rx.await;
        Ok(Scraper {
            stop: Some(stop_tx),
            handle: Some(handle),
            counters,
            url,
        })
    }

    /// Takes a last scrape, stops, and says what was done. Blocks for at most the
    /// last scrape's timeout (call it where blocking is allowed, e.g. through
    /// `spawn_blocking`).
    pub fn stop(mut self) -> ScrapeSummary {
        if let Some(s) = self.stop.take() {
            let _ = s.send(());
        }
        let problems = self
            .handle
            .take()
            .and_then(|h| h.join().ok())
            .unwrap_or_default();
        ScrapeSummary {
            scrapes: self.counters.ok.load(Relaxed),
            failed: self.counters.failed.load(Relaxed),
            problems,
        }
    }
}

impl Drop for Scraper {
    fn drop(&mut self) {
        if let Some(s) = self.stop.take() {
            let _ = s.send(());
        }
        if let Some(h) = self.handle.take() {
            let _ = h.join();
        }
    }
}

/// A client for the page at `url`: no API key (metrics pages are not behind one,
/// and a key must not travel to another host).
fn client_for(url: &str) -> Result<Client, ClientError> {
    let config = ClientConfig {
        pool_max_idle_per_host: 1,
        ..ClientConfig::default()
    };
    Client::new(Endpoint::new(url, Api::Chat, ""), config)
}

#[allow(clippy::too_many_arguments)]
async fn run(
    cfg: ScraperConfig,
    client: Client,
    run_id: String,
    clock: RunClock,
    tx: WriterTx,
    mut stop: oneshot::Receiver<()>,
    first: oneshot::Sender<()>,
    counters: Arc<Counters>,
) -> Vec<String> {
    let mut problems: Vec<String> = Vec::new();
    let note = |p: String, problems: &mut Vec<String>| {
        if problems.len() < MAX_PROBLEMS && !problems.contains(&p) {
            problems.push(p);
        }
    };
    let interval = cfg.interval.max(Duration::from_millis(10));
    let mut next = Instant::now();
    let mut last = false;
    let mut first = Some(first);
    loop {
        let sent = Instant::now();
        match client.get_page(cfg.timeout).await {
            Ok(body) => {
                let received = Instant::now();
                // Stamped midway: the page was rendered somewhere in between.
                let at = clock.at(sent + (received - sent) / 2);
                let (rec, warnings) = scrape_once(&body, &run_id, at);
                for w in warnings {
                    note(format!("{}: {w}", cfg.url), &mut problems);
                }
                if rec.raw.is_empty() {
                    counters.failed.fetch_add(1, Relaxed);
                    note(
                        format!("{}: no samples on the page", cfg.url),
                        &mut problems,
                    );
                } else {
                    counters.ok.fetch_add(1, Relaxed);
                    tx.server_sample(rec);
                }
            }
            Err(e) => {
                counters.failed.fetch_add(1, Relaxed);
                note(e.to_string(), &mut problems);
            }
        }
        if let Some(f) = first.take() {
            let _ = f.send(());
        }
        if last {
            return problems;
        }
        next += interval;
        let now = Instant::now();
        if next < now {
            // Fell behind (a slow answer): skip the missed ticks, keep the phase.
            let behind = (now - next).as_nanos() / interval.as_nanos() + 1;
            next += interval * behind.min(u32::MAX as u128) as u32;
        }
        tokio::select! {
            _ = tokio::time::sleep_until(next.into()) => {}
            _ = &mut stop => last = true,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_metrics_url_is_at_the_server_root() {
        assert_eq!(
            metrics_url_of("http://127.0.0.1:8000/v1"),
            "http://127.0.0.1:8000/metrics"
        );
        assert_eq!(metrics_url_of("https://h/openai/v1/"), "https://h/metrics");
        assert_eq!(metrics_url_of("http://h:9"), "http://h:9/metrics");
    }
}
