//! The server's side beside the client's (docs/design.md §14): the server's samples as
//! step functions (each scrape's values hold until the next scrape; nothing is
//! known before the first), its token counters' deltas against the client's
//! totals, and its own TTFT and queue-time means (Δsum / Δcount of its histograms)
//! next to the client's.

use std::time::Duration;

use serde::Serialize;
use tpscope_model::time::duration_secs;
use tpscope_model::{HistogramTotals, ServerSampleRecord, Status, Timestamp};

use crate::input::RunInput;
use crate::stats::ratio;

/// Relative difference between the server's and the client's output tokens above
/// which the report warns.
pub const TOKEN_TOLERANCE: f64 = 0.01;

/// One scrape, placed on the report's time axis.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct ServerPoint {
    /// When it was taken, from the run's origin.
    #[serde(rename = "at_s", serialize_with = "duration_secs::serialize")]
    pub at: Duration,
    /// Requests in the server's batch.
    pub running: Option<f64>,
    /// Requests in the server's queue.
    pub waiting: Option<f64>,
    /// KV cache usage (0–1).
    pub kv_cache_usage: Option<f64>,
}

/// The server's view of a run beside the client's.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct ServerVsClient {
    /// The server's dialect, as recognised from its metric names.
    pub server: Option<String>,
    /// Scrapes in the run.
    pub scrapes: u64,
    /// Time-weighted mean of the server's running requests over the window.
    pub mean_running: Option<f64>,
    /// Time-weighted mean of the server's waiting requests over the window.
    pub mean_waiting: Option<f64>,
    /// The largest KV cache usage scraped in the window.
    pub max_kv_cache_usage: Option<f64>,
    /// Preemptions during the run (the counter's delta, first scrape to last).
    pub preemptions: Option<f64>,
    /// Output tokens the server generated during the run (counter delta).
    pub server_output_tokens: Option<f64>,
    /// Output tokens the client received: ok spans' plus those of failed attempts.
    pub client_output_tokens: u64,
    /// (server − client) / client.
    pub output_tokens_difference: Option<f64>,
    /// Prompt tokens the server processed during the run (counter delta).
    pub server_input_tokens: Option<f64>,
    /// Prompt tokens of the client's spans that know theirs.
    pub client_input_tokens: Option<u64>,
    /// The server's mean TTFT over the run (from arrival at the server).
    #[serde(
        rename = "server_ttft_mean_s",
        serialize_with = "duration_secs::option::serialize"
    )]
    pub server_ttft_mean: Option<Duration>,
    /// The client's mean t_first_token (from admission: network and server queue included).
    #[serde(
        rename = "client_ttft_mean_s",
        serialize_with = "duration_secs::option::serialize"
    )]
    pub client_ttft_mean: Option<Duration>,
    /// The server's mean time in its own queue.
    #[serde(
        rename = "server_queue_time_mean_s",
        serialize_with = "duration_secs::option::serialize"
    )]
    pub server_queue_time_mean: Option<Duration>,
    /// The client's mean t_queue (waiting for a client slot).
    #[serde(
        rename = "client_queue_time_mean_s",
        serialize_with = "duration_secs::option::serialize"
    )]
    pub client_queue_time_mean: Option<Duration>,
    /// The scrapes, for the chart.
    pub series: Vec<ServerPoint>,
}

/// The run's server samples in time order (GPU-telemetry scrapes are
/// [`crate::energy`]'s, not the server's).
pub fn sorted_samples(input: &RunInput) -> Vec<&ServerSampleRecord> {
    let mut v: Vec<&ServerSampleRecord> = input
        .server_samples
        .iter()
        .filter(|s| !s.is_gpu())
        .collect();
    v.sort_by_key(|s| s.at);
    v
}

/// last − first of a counter over the samples that have it; `None` when fewer than
/// two do or it went down (the server restarted).
fn delta(
    samples: &[&ServerSampleRecord],
    f: impl Fn(&ServerSampleRecord) -> Option<f64>,
) -> Option<f64> {
    let first = samples.iter().find_map(|s| f(s))?;
    let last = samples.iter().rev().find_map(|s| f(s))?;
    let d = last - first;
    (d >= 0.0 && samples.iter().filter(|s| f(s).is_some()).count() >= 2).then_some(d)
}

fn hist_mean(
    samples: &[&ServerSampleRecord],
    f: impl Fn(&ServerSampleRecord) -> Option<HistogramTotals> + Copy,
) -> Option<Duration> {
    let sum = delta(samples, |s| f(s).map(|h| h.sum))?;
    let count = delta(samples, |s| f(s).map(|h| h.count))?;
    ratio(sum, count).and_then(|m| Duration::try_from_secs_f64(m).ok())
}

/// Time-weighted mean of a server value over `[w0, w1)`, each scrape's value
/// holding until the next (the last one until `w1`); stretches before the first
/// scrape or without the value are left out.
fn step_mean(
    samples: &[&ServerSampleRecord],
    w0: Timestamp,
    w1: Timestamp,
    f: impl Fn(&ServerSampleRecord) -> Option<f64>,
) -> Option<f64> {
    let (mut weighted, mut known) = (0.0, 0.0);
    for (i, s) in samples.iter().enumerate() {
        let end = samples.get(i + 1).map_or(w1, |n| n.at.min(w1));
        let start = s.at.max(w0);
        let ns = end.signed_nanos_since(start);
        if ns <= 0 {
            continue;
        }
        if let Some(v) = f(s) {
            weighted += v * ns as f64;
            known += ns as f64;
        }
    }
    ratio(weighted, known)
}

/// The server's side of a run, `None` without server samples. `client_ttft_mean`
/// and `client_queue_mean` are the report's; `warnings` gets the token check.
pub fn server_vs_client(
    input: &RunInput,
    window: (Timestamp, Timestamp),
    client_ttft_mean: Option<Duration>,
    client_queue_mean: Option<Duration>,
    warnings: &mut Vec<String>,
) -> Option<ServerVsClient> {
    let samples = sorted_samples(input);
    if samples.is_empty() {
        return None;
    }
    let (w0, w1) = window;
    let origin = input
        .origin()
        .or_else(|| samples.first().map(|s| s.at))
        .unwrap_or_default();
    let client_output: u64 = input
        .spans
        .iter()
        .map(|s| {
            let ok = if s.status == Status::Ok {
                s.output_tokens
            } else {
                0
            };
            ok + s.wasted_tokens
        })
        .sum();
    let client_input = input
        .spans
        .iter()
        .filter(|s| s.status == Status::Ok)
        .map(|s| s.input_tokens)
        .sum::<Option<u64>>();
    let server_output = delta(&samples, |s| s.generation_tokens_total);
    let difference =
        server_output.and_then(|s| ratio(s - client_output as f64, client_output as f64));
    if let (Some(d), Some(s)) = (difference, server_output)
        && d.abs() > TOKEN_TOLERANCE
    {
        let why = if d > 0.0 {
            "other traffic on the server during the run, requests the client gave up on \
             that the server finished, or a client count from text (a tokenizer or chunks) \
             that is below the server's"
        } else {
            "output counted by a tokenizer other than the model's, or by chunks (usage \
             missing), or the server's counter not covering every replica the client reached"
        };
        warnings.push(format!(
            "the server counted {s:.0} output tokens during the run, the client {client_output} \
             ({:+.1} %): likely {why}",
            d * 100.0
        ));
    }
    let max_kv = samples
        .iter()
        .filter(|s| s.at >= w0 && s.at <= w1)
        .filter_map(|s| s.kv_cache_usage)
        .reduce(f64::max);
    Some(ServerVsClient {
        server: samples.iter().find_map(|s| s.server.clone()),
        scrapes: samples.len() as u64,
        mean_running: step_mean(&samples, w0, w1, |s| s.running),
        mean_waiting: step_mean(&samples, w0, w1, |s| s.waiting),
        max_kv_cache_usage: max_kv,
        preemptions: delta(&samples, |s| s.preemptions_total),
        server_output_tokens: server_output,
        client_output_tokens: client_output,
        output_tokens_difference: difference,
        server_input_tokens: delta(&samples, |s| s.prompt_tokens_total),
        client_input_tokens: client_input,
        server_ttft_mean: hist_mean(&samples, |s| s.ttft),
        client_ttft_mean,
        server_queue_time_mean: hist_mean(&samples, |s| s.queue_time),
        client_queue_time_mean: client_queue_mean,
        series: samples
            .iter()
            .map(|s| ServerPoint {
                at: s.at.since(origin).unwrap_or_default(),
                running: s.running,
                waiting: s.waiting,
                kv_cache_usage: s.kv_cache_usage,
            })
            .collect(),
    })
}
