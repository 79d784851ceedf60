//! `bench`'s and the proxy's scraping of the server's own metrics (docs/design.md §8
//! `server_sample`) and of GPU telemetry: the `--server-metrics`,
//! `--server-metrics-interval` and `--gpu-metrics` flags, where the server's page
//! is (the target root's `/metrics` unless told). The scrapers themselves run
//! in the load engine's bench (`tpscope_load::bench`), one per page and run.

use std::time::Duration;

use tpscope_model::units::parse_duration;
use tpscope_scrape::{Scraper, ScraperConfig, metrics_url_of};

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
    /// Cadence of the server scrapes (and of the GPU scrapes).
    #[arg(long, default_value = "1s", value_name = "DUR", value_parser = parse_interval, help_heading = "Output")]
    pub server_metrics_interval: Duration,
    /// NVIDIA DCGM exporter pages (e.g. http://gpu-node:9400/metrics), one per GPU
    /// host, scraped beside the server's: the report adds energy per output token,
    /// mean power and GPU utilisation.
    #[arg(long, value_name = "URL", num_args = 1.., value_parser = parse_gpu_metrics, help_heading = "Output")]
    pub gpu_metrics: Vec<String>,
}

fn parse_gpu_metrics(s: &str) -> Result<String, String> {
    let t = s.trim();
    if t.starts_with("http://") || t.starts_with("https://") {
        Ok(t.to_string())
    } else {
        Err(format!(
            "`{s}` is not an http(s):// URL (a DCGM exporter's page, e.g. http://127.0.0.1:9400/metrics)"
        ))
    }
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
    /// The pages to scrape for a target at `base_url`: the server's (unless off,
    /// or the default page does not answer: said on standard error) and the GPU
    /// pages. An explicit URL that does not answer is an error naming its flag.
    pub async fn resolve_all(&self, base_url: &str) -> anyhow::Result<Vec<ScraperConfig>> {
        let mut pages: Vec<ScraperConfig> = self.resolve(base_url).await?.into_iter().collect();
        pages.extend(self.resolve_gpu().await?);
        Ok(pages)
    }

    /// The GPU pages, each checked to answer with a DCGM exporter's metrics.
    pub async fn resolve_gpu(&self) -> anyhow::Result<Vec<ScraperConfig>> {
        let interval = self.server_metrics_interval;
        let timeout = ScraperConfig::new("", interval).timeout;
        let mut out = Vec::new();
        for u in &self.gpu_metrics {
            match Scraper::probe_gpu(u, timeout).await {
                Ok(_) => out.push(ScraperConfig::new(u.clone(), interval)),
                Err(e) => anyhow::bail!("--gpu-metrics: {u}: {e}"),
            }
        }
        Ok(out)
    }

    /// The server's page to scrape for a target at `base_url`, or `None` (off, or
    /// the default page does not answer: said on standard error). An explicit URL
    /// that does not answer is an error naming the flag.
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
