//! `bench`'s scraping of the server's own metrics (docs/design.md §8 `server_sample`):
//! the `--server-metrics` and `--server-metrics-interval` flags, where the page is
//! (the target root's `/metrics` unless told), and one scraper per run, started
//! before its first request and stopped after its last.

use std::time::Duration;

use tpscope_model::RunClock;
use tpscope_model::units::parse_duration;
use tpscope_record::WriterTx;
use tpscope_scrape::{ScrapeSummary, Scraper, ScraperConfig, metrics_url_of};

/// Where the server's metrics are.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ServerMetrics {
    /// The target root's `/metrics`, when it answers with Prometheus text.
    Auto,
    /// Not scraped.
    Off,
    /// This URL (an error when it does not answer).
    Url(String),
}

/// The flags.
#[derive(clap::Args, Debug, Clone)]
pub struct ServerMetricsArgs {
    /// The server's Prometheus page, scraped while the run lasts into
    /// `server_sample` records: a URL, or `off`. Default: the target root's
    /// /metrics when it answers (the built-in simulator's too).
    #[arg(long, value_name = "URL|off", value_parser = parse_server_metrics, help_heading = "Output")]
    pub server_metrics: Option<ServerMetrics>,
    /// Cadence of the server scrapes.
    #[arg(long, default_value = "1s", value_name = "DUR", value_parser = parse_interval, help_heading = "Output")]
    pub server_metrics_interval: Duration,
}

fn parse_server_metrics(s: &str) -> Result<ServerMetrics, String> {
    let t = s.trim();
    match t {
        "off" | "none" => Ok(ServerMetrics::Off),
        "auto" => Ok(ServerMetrics::Auto),
        _ if t.starts_with("http://") || t.starts_with("https://") => {
            Ok(ServerMetrics::Url(t.to_string()))
        }
        _ => Err(format!(
            "`{s}` is neither an http(s):// URL nor `off` (e.g. http://127.0.0.1:8000/metrics)"
        )),
    }
}

fn parse_interval(s: &str) -> Result<Duration, String> {
    let d = parse_duration(s).map_err(|e| e.to_string())?;
    if d < Duration::from_millis(10) {
        return Err(format!("`{s}` is shorter than 10ms"));
    }
    Ok(d)
}

impl ServerMetricsArgs {
    /// The page to scrape for a target at `base_url`, or `None` (off, or the
    /// default page does not answer: said on standard error). An explicit URL that
    /// does not answer is an error naming the flag.
    pub async fn resolve(&self, base_url: &str) -> anyhow::Result<Option<ScraperConfig>> {
        let interval = self.server_metrics_interval;
        let timeout = ScraperConfig::new("", interval).timeout;
        match self.server_metrics.clone().unwrap_or(ServerMetrics::Auto) {
            ServerMetrics::Off => Ok(None),
            ServerMetrics::Url(u) => match Scraper::probe(&u, timeout).await {
                Ok(_) => Ok(Some(ScraperConfig::new(u, interval))),
                Err(e) => anyhow::bail!(
                    "--server-metrics: {u} does not answer with Prometheus text: {e} \
                     (give --server-metrics off to run without it)"
                ),
            },
            ServerMetrics::Auto => {
                let u = metrics_url_of(base_url);
                match Scraper::probe(&u, timeout).await {
                    Ok(_) => Ok(Some(ScraperConfig::new(u, interval))),
                    Err(e) => {
                        eprintln!(
                            "note: no server metrics at {u} ({e}); the diagnosis uses the \
                             client side only (--server-metrics URL names another page)"
                        );
                        Ok(None)
                    }
                }
            }
        }
    }
}

/// Starts a run's scraper (its first scrape taken before this returns).
pub async fn start(
    cfg: &Option<ScraperConfig>,
    run_id: &str,
    clock: RunClock,
    tx: WriterTx,
) -> Option<Scraper> {
    let cfg = cfg.clone()?;
    match Scraper::start(cfg, run_id.to_string(), clock, tx).await {
        Ok(s) => Some(s),
        Err(e) => {
            eprintln!("warning: server metrics are not scraped: {e}");
            None
        }
    }
}

/// Takes a run's last scrape and stops its scraper, warning when scrapes failed.
pub async fn stop(scraper: Option<Scraper>) {
    let Some(s) = scraper else {
        return;
    };
    let summary: ScrapeSummary = tokio::task::spawn_blocking(move || s.stop())
        .await
        .unwrap_or_default();
    if summary.failed > 0 || !summary.problems.is_empty() {
        eprintln!(
            "warning: {} of {} server scrapes failed; {}",
            summary.failed,
            summary.failed + summary.scrapes,
            summary.problems.join("; ")
        );
    }
}
