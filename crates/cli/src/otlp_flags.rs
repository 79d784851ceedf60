//! `--otlp-endpoint` and `--otlp-header` of `bench` and the proxy: every span the
//! run writes is also exported to an OpenTelemetry collector (docs/otlp.md); the
//! exporter itself is the recording seam's (`tpscope_record::OtlpConfig`).

use tpscope_record::otlp::parse_header;
use tpscope_record::{ExportStats, OtlpConfig};

/// The flags.
#[derive(clap::Args, Debug, Clone, Default)]
pub struct OtlpArgs {
    /// Also export every span to an OpenTelemetry collector, as OTLP/HTTP JSON
    /// GenAI spans: its base URL (http://127.0.0.1:4318; spans go to /v1/traces)
    /// or the full traces URL. Batched off the hot path; a dead or slow collector
    /// costs exports (counted, warned at the end), never spans in the log.
    #[arg(long, value_name = "URL", value_parser = parse_endpoint, help_heading = "Output")]
    pub otlp_endpoint: Option<OtlpConfig>,
    /// A header sent with each export (e.g. `authorization=Bearer TOKEN`);
    /// repeatable.
    #[arg(long, value_name = "NAME=VALUE", value_parser = parse_otlp_header, requires = "otlp_endpoint", help_heading = "Output")]
    pub otlp_header: Vec<(String, String)>,
}

fn parse_endpoint(s: &str) -> Result<OtlpConfig, String> {
    OtlpConfig::new(s).map_err(|e| e.to_string())
}

fn parse_otlp_header(s: &str) -> Result<(String, String), String> {
    parse_header(s).map_err(|e| e.to_string())
}

impl OtlpArgs {
    /// The exporter's settings, when asked for.
    pub fn config(&self) -> Option<OtlpConfig> {
        self.otlp_endpoint.clone().map(|mut c| {
            c.headers.extend(self.otlp_header.iter().cloned());
            c
        })
    }
}

/// Says on standard error what the export dropped, once the writer has finished.
pub fn warn_dropped(stats: Option<&ExportStats>) {
    if let Some(w) = stats.and_then(ExportStats::warning) {
        eprintln!("warning: {w}");
    }
}
