//! The `server_sample` record (docs/design.md §8): the server's own view, scraped from its
//! Prometheus endpoint while a run measures it, normalised to one vocabulary
//! (requests running and waiting, KV cache usage, counters, latency histogram sums)
//! with every other value it showed kept by name.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::time::Timestamp;

/// A histogram's running sum and count (seconds and observations), as the server
/// exports them: the mean over a stretch is Δsum / Δcount.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct HistogramTotals {
    /// Σ observed values (seconds).
    pub sum: f64,
    /// Observations.
    pub count: f64,
}

/// One scrape of the server's metrics. Every normalised field is `None` when the
/// server does not export it (or under a name tpscope does not know).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct ServerSampleRecord {
    /// The run this sample belongs to.
    pub run_id: String,
    /// When the scrape was taken (midway between sending it and its answer).
    pub at: Timestamp,
    /// The server's dialect as recognised from its names: `vllm`, `sglang`, `tgi`,
    /// `llamacpp`, `trtllm`; `None` when none was recognised.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub server: Option<String>,
    /// Requests in the server's running batch.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub running: Option<f64>,
    /// Requests waiting in the server's own queue.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub waiting: Option<f64>,
    /// KV cache usage, 0–1 (the fullest engine's, when there are several).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kv_cache_usage: Option<f64>,
    /// Preemptions since the server started (a counter).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub preemptions_total: Option<f64>,
    /// Prompt tokens processed since the server started (a counter).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub prompt_tokens_total: Option<f64>,
    /// Output tokens generated since the server started (a counter).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub generation_tokens_total: Option<f64>,
    /// The server's time-to-first-token histogram (sum and count).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ttft: Option<HistogramTotals>,
    /// The server's queue-time histogram (sum and count).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub queue_time: Option<HistogramTotals>,
    /// Every other value the page showed, by series (`name` or `name{labels}`),
    /// histogram buckets and `_created` stamps left out.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub raw: BTreeMap<String, f64>,
    /// The GPUs a GPU-telemetry page (NVIDIA DCGM exporter, `server: "dcgm"`)
    /// showed, one entry per device; empty for an inference server's page.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub gpus: Vec<GpuReading>,
}

/// One GPU's readings in one scrape of a GPU-telemetry page. Each value is `None`
/// when the page does not export it (or reports it blank).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct GpuReading {
    /// The host the exporter names (`Hostname`), when it names one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub host: Option<String>,
    /// The device: its UUID when given, else its index.
    pub gpu: String,
    /// The device's model name (`modelName`), when given.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model: Option<String>,
    /// Utilisation, 0–1 (DCGM's percentage over 100).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub util: Option<f64>,
    /// Power draw (watts).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub power_w: Option<f64>,
    /// Energy used since the device's counter started (joules; a counter).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub energy_j: Option<f64>,
    /// Framebuffer memory in use (bytes).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fb_used_bytes: Option<f64>,
}

impl ServerSampleRecord {
    /// Whether this is a GPU-telemetry scrape rather than an inference server's.
    pub fn is_gpu(&self) -> bool {
        !self.gpus.is_empty()
    }
}
