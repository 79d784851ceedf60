//! Scraping the server's own metrics while a run measures it (docs/design.md §8
//! `server_sample`, §14): a Prometheus text parser ([`text`]) and the
//! normalisation of each server's names into one vocabulary
//! ([`normalize`](mod@normalize)), and the GPU readings of an NVIDIA DCGM
//! exporter's page ([`dcgm`]), all pure; and the scraper task ([`scraper`]) that
//! fetches the page on a cadence off the hot path and writes `server_sample` records, for `bench` and the proxy alike.
//!
//! Prometheus text is parsed here rather than with a crate: `prometheus-parse`
//! (0.2.5, 2023) matches names with `\w+`, so it drops every `vllm:`/`sglang:`/
//! `llamacpp:` series, and pulls in regex and chrono; `openmetrics-parser` is
//! LGPL-3.0 and rejects a whole page for one bad line. The format is line-based and
//! small (names, `{label="value"}` with three escapes, a float with `NaN`/`±Inf`,
//! an optional timestamp), and a page from a server must never stop a benchmark:
//! a bad line is a warning, the rest is used.
#![warn(missing_docs)]

pub mod dcgm;
pub mod normalize;
pub mod scraper;
pub mod text;

pub use normalize::{ServerKind, normalize};
pub use scraper::{
    DEFAULT_INTERVAL, ScrapeSummary, Scraper, ScraperConfig, StartError, metrics_url_of,
};
pub use text::{Exposition, PromSample, parse};
