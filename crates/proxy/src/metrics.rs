//! The proxy's Prometheus metrics (prometheus-client, text exposition): tokens,
//! requests by status and cause, client retries seen, in flight, queue depth,
//! cap, gap and backlog seconds (counters, accumulated on the sampler's cadence
//! with `model::Occupancy`, the one gap predicate), and histograms of the
//! per-span metrics t_first_token, t_queue, stream_tps and end_to_end_tps (the
//! values computed by `analysis::span_metrics`, the one place they are).

use std::sync::Mutex;
use std::sync::atomic::AtomicU64;
use std::time::Instant;

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};
use prometheus_client::registry::{Registry, Unit};
use tpscope_analysis::{SpanFacts, span_metrics};
use tpscope_model::{Cause, Occupancy, Status, Usage};
use tpscope_record::Finished;

/// Labels of `tpscope_requests_total`.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct RequestLabels {
    /// `ok`, `error` or `cancelled`.
    pub status: String,
    /// The failure cause (closed list), empty for ok.
    pub cause: String,
}

/// Every metric the proxy exports, registered once.
pub struct Metrics {
    registry: Registry,
    output_tokens: Counter,
    input_tokens: Counter,
    requests: Family<RequestLabels, Counter>,
    retries: Counter,
    queue_full: Counter,
    in_flight: Gauge,
    queue_depth: Gauge,
    cap: Gauge,
    gap: Counter<f64, std::sync::atomic::AtomicU64>,
    backlog: Counter<f64, std::sync::atomic::AtomicU64>,
    ttft: Histogram,
    t_queue: Histogram,
    stream_tps: Histogram,
    e2e_tps: Histogram,
    /// Recent samples, to re-sweep when a request states that it was queued
    /// before it arrived (bounded: [`RECENT`]).
    recent: Mutex<Recent>,
}

/// Samples kept for re-sweeping (at the default 10 ms cadence, 655 s, less
/// when stated requests close intervals between samples; 2 MiB); a
/// stated queue stretch older than the oldest is counted from there.
const RECENT: usize = 65_536;

/// One sample: its instant, the occupancy seen, and the requests since known
/// to have been queued then (stated by `x-tpscope-queued-at`).
#[derive(Clone, Copy, Debug)]
struct Seen {
    at: Instant,
    in_flight: u32,
    queue_depth: u32,
    cap: Option<u32>,
    stated: u32,
}

impl Seen {
    fn occupancy(&self) -> Occupancy {
        Occupancy {
            in_flight: self.in_flight,
            queue_depth: self.queue_depth.saturating_add(self.stated),
            cap: self.cap,
        }
    }
}

#[derive(Default)]
struct Recent(std::collections::VecDeque<Seen>);

impl Metrics {
    /// A registry holding every metric at zero, and `tpscope_cap` when there is a
    /// cap. Without one the series is absent rather than 0: a 0 would make
    /// `sum(tpscope_in_flight) / sum(tpscope_cap)` infinite and understate a
    /// fleet's total cap.
    pub fn new(cap: Option<u32>) -> Metrics {
        let mut registry = Registry::with_prefix("tpscope");
        let output_tokens = Counter::default();
        let input_tokens = Counter::default();
        let requests = Family::<RequestLabels, Counter>::default();
        let retries = Counter::default();
        let queue_full = Counter::default();
        let in_flight = Gauge::default();
        let queue_depth = Gauge::default();
        let gap = Counter::<f64, AtomicU64>::default();
        let backlog = Counter::<f64, AtomicU64>::default();
        // Seconds: 1 ms … 65 s; tokens per second: 1 … 32k.
        let ttft = Histogram::new(exponential_buckets(0.001, 2.0, 17));
        let t_queue = Histogram::new(exponential_buckets(0.001, 2.0, 17));
        let stream_tps = Histogram::new(exponential_buckets(1.0, 2.0, 16));
        let e2e_tps = Histogram::new(exponential_buckets(1.0, 2.0, 16));
        registry.register(
            "output_tokens",
            "Output tokens of finished completions",
            output_tokens.clone(),
        );
        registry.register(
            "input_tokens",
            "Prompt tokens of finished completions, where the server reported them",
            input_tokens.clone(),
        );
        registry.register(
            "requests",
            "Completion requests finished, by status and failure cause",
            requests.clone(),
        );
        registry.register(
            "retries",
            "Requests a client marked as retries (x-stainless-retry-count > 0)",
            retries.clone(),
        );
        registry.register(
            "queue_full",
            "Requests refused because the queue was full",
            queue_full.clone(),
        );
        registry.register(
            "in_flight",
            "Completions forwarded and not yet released",
            in_flight.clone(),
        );
        registry.register(
            "queue_depth",
            "Completions waiting for a slot",
            queue_depth.clone(),
        );
        // Every series a dashboard divides by exists, at 0, before the first
        // request (the labelled family shows once it has one).
        let _ = requests.get_or_create(&RequestLabels {
            status: Status::Ok.as_str().to_string(),
            cause: String::new(),
        });
        let cap_gauge = Gauge::default();
        if let Some(c) = cap {
            cap_gauge.set(i64::from(c));
            registry.register(
                "cap",
                "The in-flight cap (absent without one)",
                cap_gauge.clone(),
            );
        }
        registry.register_with_unit(
            "gap",
            "Time with work waiting while a slot was free (rate() is the gap fraction)",
            Unit::Seconds,
            gap.clone(),
        );
        registry.register_with_unit(
            "backlog",
            "Time with work waiting",
            Unit::Seconds,
            backlog.clone(),
        );
        registry.register_with_unit(
            "t_first_token",
            "First token after admission (TTFT)",
            Unit::Seconds,
            ttft.clone(),
        );
        registry.register_with_unit(
            "t_queue",
            "Time from queued to admitted",
            Unit::Seconds,
            t_queue.clone(),
        );
        registry.register(
            "stream_tps",
            "Output tokens per second between first and last token",
            stream_tps.clone(),
        );
        registry.register(
            "end_to_end_tps",
            "Output tokens per second from admission to release",
            e2e_tps.clone(),
        );
        Metrics {
            registry,
            output_tokens,
            input_tokens,
            requests,
            retries,
            queue_full,
            in_flight,
            queue_depth,
            cap: cap_gauge,
            gap,
            backlog,
            ttft,
            t_queue,
            stream_tps,
            e2e_tps,
            recent: Mutex::new(Recent::default()),
        }
    }

    /// The text exposition (OpenMetrics text, which Prometheus scrapes).
    pub fn render(&self) -> String {
        let mut out = String::new();
        // Writing into a String cannot fail.
        let _ = prometheus_client::encoding::text::encode(&mut out, &self.registry);
        out
    }

    /// A sample of the occupancy at `at`: gauges now, and the time since the
    /// previous sample added to gap and backlog as the previous sample said.
    pub fn occupancy(&self, at: Instant, in_flight: u32, queue_depth: u32, cap: Option<u32>) {
        self.in_flight.set(i64::from(in_flight));
        self.queue_depth.set(i64::from(queue_depth));
        if let Some(c) = cap {
            self.cap.set(i64::from(c));
        }
        let mut recent = self.recent.lock().unwrap_or_else(|e| e.into_inner());
        let seen = Seen {
            at,
            in_flight,
            queue_depth,
            cap,
            stated: 0,
        };
        self.add(&mut recent, seen);
    }

    /// Counts the interval since the previous sample as that sample says, and
    /// keeps `seen` (never before the previous one).
    fn add(&self, recent: &mut Recent, mut seen: Seen) {
        if let Some(prev) = recent.0.back() {
            seen.at = seen.at.max(prev.at);
            let occ = prev.occupancy();
            let dt = seen.at.saturating_duration_since(prev.at).as_secs_f64();
            if occ.is_gap() {
                self.gap.inc_by(dt);
            }
            if occ.is_backlog() {
                self.backlog.inc_by(dt);
            }
        }
        if recent.0.len() == RECENT {
            recent.0.pop_front();
        }
        recent.0.push_back(seen);
    }

    /// A request arriving at `now` states that it was queued since `from`:
    /// the recent samples over that stretch are swept again with it queued,
    /// and the time that becomes backlog or gap is added to the counters.
    pub fn queued_before(&self, from: Instant, now: Instant) {
        let mut recent = self.recent.lock().unwrap_or_else(|e| e.into_inner());
        // Close the open interval at `now` as the sampler would have, so that
        // every interval swept again is closed (and marked once).
        if let Some(&last) = recent.0.back().filter(|l| l.at < now) {
            self.add(
                &mut recent,
                Seen {
                    at: now,
                    stated: 0,
                    ..last
                },
            );
        }
        let (mut gap, mut backlog) = (0.0, 0.0);
        for i in (0..recent.0.len().saturating_sub(1)).rev() {
            let end = recent.0[i + 1].at;
            let seen = &mut recent.0[i];
            if end <= from {
                break;
            }
            let dt = end
                .saturating_duration_since(seen.at.max(from))
                .as_secs_f64();
            let before = seen.occupancy();
            seen.stated = seen.stated.saturating_add(1);
            let after = seen.occupancy();
            if after.is_gap() && !before.is_gap() {
                gap += dt;
            }
            if after.is_backlog() && !before.is_backlog() {
                backlog += dt;
            }
        }
        self.gap.inc_by(gap);
        self.backlog.inc_by(backlog);
    }

    /// A client's retry was seen.
    pub fn retry(&self) {
        self.retries.inc();
    }

    /// The queue was full.
    pub fn refused(&self) {
        self.queue_full.inc();
    }

    /// A completion finished.
    pub fn finished(&self, f: &Finished) {
        let o = f.outcomes.last();
        let (st, cause) = match (&f.cancelled, o.and_then(|o| o.attempt.cause)) {
            (Some(_), _) | (None, Some(Cause::Cancelled)) => {
                (Status::Cancelled, Some(Cause::Cancelled))
            }
            (None, Some(c)) => (Status::Error, Some(c)),
            (None, None) if o.is_some() => (Status::Ok, None),
            (None, None) => (Status::Cancelled, Some(Cause::Cancelled)),
        };
        self.requests
            .get_or_create(&RequestLabels {
                status: st.as_str().to_string(),
                cause: cause.map(|c| c.as_str().to_string()).unwrap_or_default(),
            })
            .inc();
        let Some(o) = o else { return };
        // Provisional without usage: content chunks (the writer counts text later).
        let usage = o.usage.and_then(Usage::counted);
        let tokens = usage
            .and_then(|u| u.completion_tokens)
            .unwrap_or(o.attempt.tokens);
        if let Some(p) = usage.and_then(|u| u.prompt_tokens) {
            self.input_tokens.inc_by(p);
        }
        if st != Status::Ok {
            return;
        }
        self.output_tokens.inc_by(tokens);
        let facts = SpanFacts::ok(
            f.queued_at,
            f.admitted_at,
            o.attempt.first_token_at,
            o.last_token_at,
            f.released_at,
            tokens,
        );
        let m = span_metrics(&facts);
        for (name, h) in [
            ("t_first_token", &self.ttft),
            ("t_queue", &self.t_queue),
            ("stream_tps", &self.stream_tps),
            ("end_to_end_tps", &self.e2e_tps),
        ] {
            if let Some(v) = m.get(name) {
                h.observe(v);
            }
        }
    }
}

impl Default for Metrics {
    /// Without a cap.
    fn default() -> Self {
        Metrics::new(None)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tpscope_model::{AttemptOutcome, Timestamp};

    fn t(ms: i64) -> Timestamp {
        Timestamp::from_unix_nanos(1_800_000_000_000_000_000 + ms * 1_000_000)
    }

    /// Every `tpscope_…` series the shipped rules and dashboard use.
    fn names_in(text: &str) -> Vec<String> {
        let mut out = Vec::new();
        let mut rest = text;
        while let Some(i) = rest.find("tpscope_") {
            let tail = &rest[i..];
            let end = tail
                .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
                .unwrap_or(tail.len());
            out.push(tail[..end].to_string());
            rest = &tail[end..];
        }
        out
    }

    #[test]
    fn deploy_files_use_only_exported_names() {
        let m = Metrics::new(Some(4));
        m.occupancy(std::time::Instant::now(), 1, 2, Some(4));
        // A labelled family shows once it has a series.
        m.finished(&Finished {
            seq: 0,
            queued_at: t(0),
            admitted_at: None,
            released_at: t(5),
            outcomes: Vec::new(),
            planned_input_tokens: None,
            cancelled: Some("left the queue".into()),
            session_id: None,
            turn: None,
        });
        let text = m.render();
        for file in [
            include_str!("../../../deploy/prometheus/rules.yml"),
            include_str!("../../../deploy/grafana/tpscope.json"),
        ] {
            for name in names_in(file) {
                // A family with no series yet shows only its TYPE line.
                let base = ["_total", "_bucket", "_sum", "_count"]
                    .iter()
                    .find_map(|s| name.strip_suffix(s))
                    .unwrap_or(&name);
                assert!(
                    text.lines().any(|l| l.starts_with(&format!("{name} "))
                        || l.starts_with(&format!("{name}{{"))
                        || l.starts_with(&format!("# TYPE {base} "))),
                    "{name} is not exported:\n{text}"
                );
            }
        }
    }

    #[test]
    fn an_uncapped_proxy_exports_no_cap_series_rather_than_a_zero_cap() {
        // A 0 made the shipped utilization rule, in flight over cap, +Inf for an
        // uncapped proxy (and a fleet's figure wrong with one in it).
        let m = Metrics::new(None);
        m.occupancy(std::time::Instant::now(), 3, 0, None);
        let text = m.render();
        assert!(!text.contains("tpscope_cap"), "{text}");
        let capped = Metrics::new(Some(8)).render();
        assert!(capped.contains("tpscope_cap 8"), "{capped}");
    }

    #[test]
    fn gap_and_backlog_accumulate_between_samples_as_the_earlier_sample_says() {
        let m = Metrics::new(None);
        let t0 = std::time::Instant::now();
        // Waiting with a free slot for 1 s, then at the cap for 1 s.
        m.occupancy(t0, 1, 3, Some(2));
        m.occupancy(t0 + std::time::Duration::from_secs(1), 2, 3, Some(2));
        m.occupancy(t0 + std::time::Duration::from_secs(2), 2, 0, Some(2));
        let text = m.render();
        assert!(text.contains("tpscope_gap_seconds_total 1.0"), "{text}");
        assert!(text.contains("tpscope_backlog_seconds_total 2.0"), "{text}");
    }

    #[test]
    fn a_request_queued_before_it_arrived_adds_its_stretch_to_gap_and_backlog() {
        // Samples every second: one in flight of a cap of 2, nothing queued.
        let m = Metrics::new(Some(2));
        let t0 = std::time::Instant::now();
        let s = std::time::Duration::from_millis;
        for i in 0..4 {
            m.occupancy(t0 + s(1000 * i), 1, 0, Some(2));
        }
        // One request says it was queued since 0.5 s, arriving at 3.5 s: the
        // 3 s between were backlog, and gap (a slot was free).
        m.queued_before(t0 + s(500), t0 + s(3500));
        let text = m.render();
        assert!(text.contains("tpscope_gap_seconds_total 3.0"), "{text}");
        assert!(text.contains("tpscope_backlog_seconds_total 3.0"), "{text}");
        // A second over the same stretch: backlog already, no more time.
        m.queued_before(t0 + s(500), t0 + s(3500));
        m.occupancy(t0 + s(4000), 1, 0, Some(2));
        let text = m.render();
        assert!(text.contains("tpscope_gap_seconds_total 3.0"), "{text}");
        // At the cap, a stated stretch is backlog but no gap.
        let m = Metrics::new(Some(1));
        m.occupancy(t0, 1, 0, Some(1));
        m.occupancy(t0 + s(1000), 1, 0, Some(1));
        m.queued_before(t0, t0 + s(2000));
        let text = m.render();
        assert!(text.contains("tpscope_gap_seconds_total 0.0"), "{text}");
        assert!(text.contains("tpscope_backlog_seconds_total 2.0"), "{text}");
    }

    #[test]
    fn every_series_exists_at_zero_before_the_first_request() {
        let text = Metrics::new(None).render();
        for line in [
            "tpscope_requests_total{status=\"ok\",cause=\"\"} 0",
            "tpscope_output_tokens_total 0",
            "tpscope_gap_seconds_total 0.0",
            "tpscope_backlog_seconds_total 0.0",
            "tpscope_in_flight 0",
        ] {
            assert!(text.contains(line), "{line} in {text}");
        }
    }

    #[test]
    fn a_finished_completion_counts_tokens_status_and_its_metrics() {
        let m = Metrics::new(None);
        let f = Finished {
            seq: 0,
            queued_at: t(0),
            admitted_at: Some(t(100)),
            released_at: t(1100),
            outcomes: vec![{
                let mut o = AttemptOutcome::started(t(100));
                o.attempt.first_byte_at = Some(t(150));
                o.attempt.first_token_at = Some(t(200));
                o.attempt.ended_at = t(1100);
                o.attempt.http_status = Some(200);
                o.attempt.tokens = 11;
                o.last_token_at = Some(t(1100));
                o.usage = Some(Usage::new(11, Some(7)));
                o.content_chunks = 11;
                o
            }],
            planned_input_tokens: None,
            cancelled: None,
            session_id: None,
            turn: None,
        };
        m.finished(&f);
        let text = m.render();
        assert!(text.contains("tpscope_output_tokens_total 11"), "{text}");
        assert!(text.contains("tpscope_input_tokens_total 7"), "{text}");
        assert!(
            text.contains("tpscope_requests_total{status=\"ok\",cause=\"\"} 1"),
            "{text}"
        );
        // t_first_token 0.1 s, t_queue 0.1 s; stream_tps 11 tokens / 0.9 s.
        assert!(
            text.contains("tpscope_t_first_token_seconds_sum 0.1"),
            "{text}"
        );
        assert!(text.contains("tpscope_t_queue_seconds_count 1"), "{text}");
        assert!(text.contains("tpscope_stream_tps_sum 12.2"), "{text}");
    }
}
