//! The simulator's Prometheus metrics under vLLM's names (gauges, counters,
//! histograms with vLLM's buckets), rendered as Prometheus text; and the engine's
//! step-lateness record (how late each real-time step woke), summarised by the
//! analysis crate's percentile method.
//!
//! Latency histograms are in simulated seconds (equal to wall seconds at
//! `--speed realtime`), observed by the engine when it emits tokens: they describe
//! the simulated GPU, not the network (a stall or slow-first-token fault, injected on
//! the way out, does not show here, as it would not in vLLM's own metrics).

use std::fmt::Write as _;
use std::time::Duration;

use tpscope_analysis::stats::quantile_sorted;

/// vLLM's TTFT buckets (seconds).
const TTFT_BUCKETS: &[f64] = &[
    0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5, 10.0,
    20.0, 40.0, 80.0, 160.0, 640.0, 2560.0,
];
/// vLLM's inter-token-latency buckets (seconds).
const ITL_BUCKETS: &[f64] = &[
    0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.2, 0.3, 0.4, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5, 10.0, 20.0,
    40.0, 80.0,
];
/// vLLM's request-latency buckets (seconds), used for e2e and queue time.
const REQUEST_BUCKETS: &[f64] = &[
    0.3, 0.5, 0.8, 1.0, 1.5, 2.0, 2.5, 5.0, 10.0, 15.0, 20.0, 30.0, 40.0, 50.0, 60.0, 120.0, 240.0,
    480.0, 960.0, 1920.0, 7680.0,
];

/// A cumulative-bucket histogram of seconds.
#[derive(Clone, Debug)]
pub(crate) struct Histogram {
    bounds: &'static [f64],
    counts: Vec<u64>,
    sum: f64,
    count: u64,
}

impl Histogram {
    fn new(bounds: &'static [f64]) -> Self {
        Histogram {
            bounds,
            counts: vec![0; bounds.len() + 1],
            sum: 0.0,
            count: 0,
        }
    }

    pub(crate) fn observe(&mut self, secs: f64) {
        let i = self.bounds.partition_point(|b| *b < secs);
        self.counts[i] += 1;
        self.sum += secs;
        self.count += 1;
    }

    fn render(&self, out: &mut String, name: &str, help: &str, labels: &str) {
        let _ = writeln!(out, "# HELP {name} {help}\n# TYPE {name} histogram");
        let mut cum = 0;
        for (b, c) in self.bounds.iter().zip(&self.counts) {
            cum += c;
            let _ = writeln!(out, "{name}_bucket{{{labels},le=\"{b}\"}} {cum}");
        }
        let _ = writeln!(out, "{name}_bucket{{{labels},le=\"+Inf\"}} {}", self.count);
        let _ = writeln!(out, "{name}_sum{{{labels}}} {}", self.sum);
        let _ = writeln!(out, "{name}_count{{{labels}}} {}", self.count);
    }
}

/// Why a request left the engine (vLLM's `finished_reason` label).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum FinishedReason {
    Stop = 0,
    Length = 1,
    Abort = 2,
}

/// Everything `/metrics` shows. Updated by the engine thread under one lock per step.
#[derive(Clone, Debug)]
pub(crate) struct Metrics {
    pub running: u64,
    pub waiting: u64,
    pub kv_usage: f64,
    pub prompt_tokens: u64,
    pub generation_tokens: u64,
    pub preemptions: u64,
    /// Prompt tokens looked up in the prefix cache (vLLM counts tokens).
    pub prefix_cache_queries: u64,
    /// Of those, tokens found cached.
    pub prefix_cache_hits: u64,
    pub success: [u64; 3],
    pub ttft: Histogram,
    pub itl: Histogram,
    pub e2e: Histogram,
    pub queue: Histogram,
}

impl Metrics {
    pub(crate) fn new() -> Self {
        Metrics {
            running: 0,
            waiting: 0,
            kv_usage: 0.0,
            prompt_tokens: 0,
            generation_tokens: 0,
            preemptions: 0,
            prefix_cache_queries: 0,
            prefix_cache_hits: 0,
            success: [0; 3],
            ttft: Histogram::new(TTFT_BUCKETS),
            itl: Histogram::new(ITL_BUCKETS),
            e2e: Histogram::new(REQUEST_BUCKETS),
            queue: Histogram::new(REQUEST_BUCKETS),
        }
    }

    /// Prometheus text exposition (version 0.0.4), labelled like vLLM
    /// (`model_name`, `engine`).
    pub(crate) fn render(&self, model_name: &str) -> String {
        let mut escaped = String::with_capacity(model_name.len());
        for c in model_name.chars() {
            match c {
                '\\' => escaped.push_str("\\\\"),
                '"' => escaped.push_str("\\\""),
                '\n' => escaped.push_str("\\n"),
                c => escaped.push(c),
            }
        }
        let labels = format!("model_name=\"{escaped}\",engine=\"0\"");
        let mut out = String::with_capacity(8192);
        let mut scalar = |name: &str, kind: &str, help: &str, v: String| {
            let _ = writeln!(
                out,
                "# HELP {name} {help}\n# TYPE {name} {kind}\n{name}{{{labels}}} {v}"
            );
        };
        scalar(
            "vllm:num_requests_running",
            "gauge",
            "Number of requests in the running batch.",
            self.running.to_string(),
        );
        scalar(
            "vllm:num_requests_waiting",
            "gauge",
            "Number of requests waiting to be scheduled (new or preempted).",
            self.waiting.to_string(),
        );
        scalar(
            "vllm:kv_cache_usage_perc",
            "gauge",
            "KV-cache usage: 1 means all blocks are in use.",
            self.kv_usage.to_string(),
        );
        scalar(
            "vllm:prompt_tokens_total",
            "counter",
            "Prompt tokens of requests that were scheduled.",
            self.prompt_tokens.to_string(),
        );
        scalar(
            "vllm:generation_tokens_total",
            "counter",
            "Output tokens generated.",
            self.generation_tokens.to_string(),
        );
        scalar(
            "vllm:num_preemptions_total",
            "counter",
            "Preemptions (recompute) of running requests.",
            self.preemptions.to_string(),
        );
        scalar(
            "vllm:prefix_cache_queries_total",
            "counter",
            "Prefix cache queries, in terms of number of queried tokens.",
            self.prefix_cache_queries.to_string(),
        );
        scalar(
            "vllm:prefix_cache_hits_total",
            "counter",
            "Prefix cache hits, in terms of number of cached tokens.",
            self.prefix_cache_hits.to_string(),
        );
        let _ = writeln!(
            out,
            "# HELP vllm:request_success_total Requests that left the engine, by reason.\n\
             # TYPE vllm:request_success_total counter"
        );
        for (reason, n) in ["stop", "length", "abort"].iter().zip(self.success) {
            let _ = writeln!(
                out,
                "vllm:request_success_total{{{labels},finished_reason=\"{reason}\"}} {n}"
            );
        }
        self.ttft.render(
            &mut out,
            "vllm:time_to_first_token_seconds",
            "Time from arrival to the first output token (simulated seconds).",
            &labels,
        );
        self.itl.render(
            &mut out,
            "vllm:inter_token_latency_seconds",
            "Time between consecutive output tokens of a request (simulated seconds).",
            &labels,
        );
        self.e2e.render(
            &mut out,
            "vllm:e2e_request_latency_seconds",
            "Time from arrival to the last output token (simulated seconds).",
            &labels,
        );
        self.queue.render(
            &mut out,
            "vllm:request_queue_time_seconds",
            "Time from arrival to first scheduling (simulated seconds).",
            &labels,
        );
        out
    }
}

/// How late real-time steps woke relative to their deadlines, at 1 µs resolution
/// up to 50 ms (later wakes are counted in the last bucket, and in `max`).
#[derive(Clone, Debug)]
pub(crate) struct Lateness {
    micros: Vec<u64>,
    steps: u64,
    max: Duration,
}

const LATENESS_SLOTS: usize = 50_000;

impl Lateness {
    pub(crate) fn new() -> Self {
        Lateness {
            micros: vec![0; LATENESS_SLOTS + 1],
            steps: 0,
            max: Duration::ZERO,
        }
    }

    pub(crate) fn record(&mut self, late: Duration) {
        let us = (late.as_micros() as usize).min(LATENESS_SLOTS);
        self.micros[us] += 1;
        self.steps += 1;
        self.max = self.max.max(late);
    }

    /// The `q`-quantile by tpscope's one percentile method
    /// ([`tpscope_analysis::stats::quantile_sorted`]), truncated to the record's
    /// 1 µs resolution. The record keeps counts per microsecond, so that it stays
    /// bounded however long the engine runs; a summary (rare) expands them into the
    /// sorted values the method reads.
    fn quantile(&self, q: f64) -> Option<Duration> {
        let mut sorted = Vec::with_capacity(usize::try_from(self.steps).unwrap_or(0));
        for (us, &n) in self.micros.iter().enumerate() {
            sorted.extend(std::iter::repeat_n(us as f64, n as usize));
        }
        quantile_sorted(&sorted, q).map(|us| Duration::from_micros(us as u64))
    }

    pub(crate) fn summary(&self) -> StepLateness {
        StepLateness {
            steps: self.steps,
            p50: self.quantile(0.5),
            p99: self.quantile(0.99),
            max: (self.steps > 0).then_some(self.max),
        }
    }
}

/// How late the engine woke for its real-time step deadlines (wake instant minus
/// deadline; never negative). Only real-time and scaled speeds record steps.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct StepLateness {
    /// Steps that slept to a deadline.
    pub steps: u64,
    /// Median lateness (tpscope's percentile method, truncated to 1 µs); `None`
    /// when no step was recorded.
    pub p50: Option<Duration>,
    /// 99th-percentile lateness (tpscope's percentile method, truncated to 1 µs);
    /// `None` when no step was recorded.
    pub p99: Option<Duration>,
    /// Largest lateness; `None` when no step was recorded.
    pub max: Option<Duration>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn histogram_buckets_are_cumulative_in_the_text() {
        let mut m = Metrics::new();
        m.ttft.observe(0.003);
        m.ttft.observe(0.05);
        m.ttft.observe(5000.0);
        let text = m.render("sim-x");
        assert!(text.contains(
            "vllm:time_to_first_token_seconds_bucket{model_name=\"sim-x\",engine=\"0\",le=\"0.005\"} 1"
        ));
        assert!(text.contains(
            "vllm:time_to_first_token_seconds_bucket{model_name=\"sim-x\",engine=\"0\",le=\"0.06\"} 2"
        ));
        assert!(text.contains(
            "vllm:time_to_first_token_seconds_bucket{model_name=\"sim-x\",engine=\"0\",le=\"+Inf\"} 3"
        ));
        assert!(text.contains(
            "vllm:time_to_first_token_seconds_count{model_name=\"sim-x\",engine=\"0\"} 3"
        ));
    }

    #[test]
    fn lateness_quantiles() {
        let mut l = Lateness::new();
        assert_eq!(l.summary().p99, None);
        for us in 1..=100 {
            l.record(Duration::from_micros(us));
        }
        let s = l.summary();
        assert_eq!(s.steps, 100);
        assert_eq!(s.p50, Some(Duration::from_micros(50)));
        assert_eq!(s.p99, Some(Duration::from_micros(99)));
        assert_eq!(s.max, Some(Duration::from_micros(100)));
    }
}
