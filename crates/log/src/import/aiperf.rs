//! NVIDIA AIPerf `profile_export.jsonl` (AIPerf 0.3 to 0.13): one JSON object per
//! request with `metadata` (wall-clock nanosecond stamps: `credit_issued_ns` — when
//! the timing manager released the request, its schedule —, `request_start_ns`,
//! `request_end_ns`, `was_cancelled`, `x_request_id`), `metrics` (each
//! `{value, unit}`: `time_to_first_token`, `request_latency` — to the last response
//! —, `output_token_count` or `output_sequence_length`, `input_sequence_length`,
//! `inter_chunk_latency`) and `error` (`{code, type, message}` or null). Token
//! counts come from AIPerf's tokenizer (`tokenizer:aiperf`); the output count is
//! `output_sequence_length` (reasoning tokens included, as AIPerf's own output
//! throughput counts them), else `output_token_count`.
//!
//! The records of AIPerf before 0.3 are read too: `metadata.timestamp_ns` (the
//! request's start), `metadata.credit_phase`, the metrics `ttft`,
//! `request_latency` and `max_response_timestamp` (the last response, in ns), no
//! schedule (so no queue) and no end for a failed request (it ends where it
//! started). A last line cut off mid-record (a killed AIPerf) is left out with a
//! warning, as tpscope's own logs do. The records hold no concurrency: read from
//! the `profile_export_aiperf.json` beside them, it is the run's cap, unless the
//! records go past it (an agentic trace's sub-agents run beside its sessions).

use std::borrow::Cow;
use std::time::Duration;

use serde::Deserialize;
use serde::de::IgnoredAny;
use tpscope_model::{Cause, Timestamp, TokenSource};

use super::ImportError;
use super::build::{Cx, Raw, cause_of_status};
use tpscope_model::ChunkMark;

#[derive(Deserialize)]
struct Line<'a> {
    #[serde(borrow)]
    metadata: Option<Metadata<'a>>,
    #[serde(borrow, default)]
    metrics: Metrics<'a>,
    #[serde(borrow, default)]
    error: Option<ErrorDetails<'a>>,
}

/// The metrics read (a struct, not a map: unknown metrics are skipped unparsed).
#[derive(Deserialize, Default)]
struct Metrics<'a> {
    #[serde(borrow, alias = "ttft")]
    time_to_first_token: Option<Metric<'a>>,
    #[serde(borrow)]
    request_latency: Option<Metric<'a>>,
    #[serde(borrow)]
    output_token_count: Option<Metric<'a>>,
    #[serde(borrow)]
    output_sequence_length: Option<Metric<'a>>,
    #[serde(borrow)]
    usage_completion_tokens: Option<Metric<'a>>,
    #[serde(borrow)]
    usage_prompt_tokens: Option<Metric<'a>>,
    #[serde(borrow)]
    input_sequence_length: Option<Metric<'a>>,
    /// A failed request's input length (AIPerf names it apart from the others').
    #[serde(borrow)]
    error_isl: Option<Metric<'a>>,
    #[serde(borrow)]
    inter_chunk_latency: Option<Metric<'a>>,
    /// Before 0.3: the last response's wall-clock stamp.
    max_response_timestamp: Option<NsMetric>,
}

/// A wall-clock stamp metric, kept an integer (an `f64` would round it to 256 ns).
#[derive(Deserialize)]
struct NsMetric {
    value: i64,
}

#[derive(Deserialize)]
struct Metadata<'a> {
    #[serde(borrow, default)]
    x_request_id: Option<Cow<'a, str>>,
    credit_issued_ns: Option<i64>,
    request_start_ns: Option<i64>,
    request_end_ns: Option<i64>,
    /// Before 0.3: the request's start.
    timestamp_ns: Option<i64>,
    #[serde(default)]
    was_cancelled: bool,
    #[serde(borrow, default, alias = "credit_phase")]
    benchmark_phase: Option<Cow<'a, str>>,
}

#[derive(Deserialize)]
struct Metric<'a> {
    value: MetricValue,
    #[serde(borrow, default)]
    unit: Option<Cow<'a, str>>,
}

/// A metric's value: a number, a list of numbers, or anything else (ignored).
enum MetricValue {
    Number(f64),
    List(Vec<f64>),
    Other,
}

// By hand rather than `#[serde(untagged)]`, which buffers every value first (a third
// of the import's time).
impl<'de> Deserialize<'de> for MetricValue {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> serde::de::Visitor<'de> for V {
            type Value = MetricValue;
            fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str("a metric value")
            }
            fn visit_f64<E>(self, v: f64) -> Result<MetricValue, E> {
                Ok(MetricValue::Number(v))
            }
            fn visit_u64<E>(self, v: u64) -> Result<MetricValue, E> {
                Ok(MetricValue::Number(v as f64))
            }
            fn visit_i64<E>(self, v: i64) -> Result<MetricValue, E> {
                Ok(MetricValue::Number(v as f64))
            }
            fn visit_str<E>(self, _: &str) -> Result<MetricValue, E> {
                Ok(MetricValue::Other)
            }
            fn visit_bool<E>(self, _: bool) -> Result<MetricValue, E> {
                Ok(MetricValue::Other)
            }
            fn visit_unit<E>(self) -> Result<MetricValue, E> {
                Ok(MetricValue::Other)
            }
            fn visit_seq<A: serde::de::SeqAccess<'de>>(
                self,
                mut a: A,
            ) -> Result<MetricValue, A::Error> {
                let mut out = Vec::new();
                let mut numbers = true;
                while let Some(v) = a.next_element::<MetricValue>()? {
                    match v {
                        MetricValue::Number(n) => out.push(n),
                        _ => numbers = false,
                    }
                }
                Ok(if numbers {
                    MetricValue::List(out)
                } else {
                    MetricValue::Other
                })
            }
            fn visit_map<A: serde::de::MapAccess<'de>>(
                self,
                mut a: A,
            ) -> Result<MetricValue, A::Error> {
                while a.next_entry::<IgnoredAny, IgnoredAny>()?.is_some() {}
                Ok(MetricValue::Other)
            }
        }
        d.deserialize_any(V)
    }
}

#[derive(Deserialize)]
struct ErrorDetails<'a> {
    code: Option<u64>,
    #[serde(borrow, default, rename = "type")]
    kind: Option<Cow<'a, str>>,
    #[serde(borrow, default)]
    message: Option<Cow<'a, str>>,
}

/// Nanoseconds per unit of a duration metric.
fn unit_ns(unit: Option<&str>) -> Option<f64> {
    match unit.unwrap_or("ms") {
        "ns" => Some(1.0),
        "us" | "µs" => Some(1e3),
        "ms" => Some(1e6),
        "s" | "sec" => Some(1e9),
        _ => None,
    }
}

impl Metric<'_> {
    fn duration(&self) -> Option<Duration> {
        let per = unit_ns(self.unit.as_deref())?;
        match self.value {
            MetricValue::Number(v) if v.is_finite() && v >= 0.0 => {
                Some(Duration::from_nanos((v * per).round() as u64))
            }
            _ => None,
        }
    }
    fn count(&self) -> Option<u64> {
        match self.value {
            MetricValue::Number(v) if v.is_finite() && v >= 0.0 => Some(v.round() as u64),
            _ => None,
        }
    }
}

fn cause_of(e: &ErrorDetails<'_>) -> Cause {
    let kind = e.kind.as_deref().unwrap_or("").to_ascii_lowercase();
    let fallback = if kind.contains("timeout") {
        Cause::TimeoutTotal
    } else if kind.contains("disconnect") {
        // aiohttp's `ServerDisconnectedError`: the stream cut short, not a connect.
        Cause::Disconnect
    } else if kind.contains("connect") {
        Cause::Connect
    } else if kind.contains("cancel") {
        Cause::Cancelled
    } else if ["valueerror", "decode", "parse", "json"]
        .iter()
        .any(|k| kind.contains(k))
    {
        // AIPerf's parser refusing a response ("Unsupported OpenAI object type: None").
        Cause::Malformed
    } else {
        Cause::Disconnect
    };
    cause_of_status(e.code, fallback)
}

fn line(cx: &Cx<'_>, record: &str, text: &str) -> Result<Raw, ImportError> {
    let l: Line<'_> = serde_json::from_str(text).map_err(|e| {
        cx.bad(
            record,
            None,
            format!("{e} (expected an AIPerf record {{metadata, metrics, error}})"),
        )
    })?;
    let md = l
        .metadata
        .ok_or_else(|| cx.bad(record, Some("metadata"), "missing"))?;
    let ns = |field: &str, v: Option<i64>| {
        v.map(Timestamp::from_unix_nanos).ok_or_else(|| {
            cx.bad(
                record,
                Some(field),
                "missing (expected wall-clock nanoseconds)",
            )
        })
    };
    let m = &l.metrics;
    let start = ns(
        "metadata.request_start_ns",
        md.request_start_ns.or(md.timestamp_ns),
    )?;
    let old_end = m.max_response_timestamp.as_ref().map(|t| t.value);
    // Before 0.3 a failed request records no end: it ends where it started.
    let old_failed_end = (md.request_start_ns.is_none() && l.error.is_some()).then_some(start);
    let end = match md.request_end_ns.or(old_end) {
        Some(n) => Timestamp::from_unix_nanos(n),
        None => old_failed_end.map_or_else(|| ns("metadata.request_end_ns", None), Ok)?,
    };
    let ttft = m.time_to_first_token.as_ref().and_then(Metric::duration);
    let latency = m.request_latency.as_ref().and_then(Metric::duration);
    let usage = m.usage_completion_tokens.as_ref().and_then(Metric::count);
    let out = usage.or_else(|| {
        m.output_sequence_length
            .as_ref()
            .or(m.output_token_count.as_ref())
            .and_then(Metric::count)
    });
    let token_source = Some(if usage.is_some() {
        TokenSource::Usage
    } else {
        TokenSource::Tokenizer("aiperf".into())
    });
    let first = ttft.map(|d| start.after(d));
    let last = match (first, latency) {
        (Some(f), Some(l)) => Some(start.after(l).max(f)),
        (f, _) => f,
    };
    let chunks = match (first, m.inter_chunk_latency.as_ref()) {
        (Some(_), Some(m)) => match (&m.value, unit_ns(m.unit.as_deref())) {
            (MetricValue::List(gaps), Some(per)) => {
                let mut at = 0f64;
                let mut marks = vec![ChunkMark {
                    offset: Duration::ZERO,
                    tokens: 1,
                }];
                for g in gaps {
                    at += g * per;
                    marks.push(ChunkMark {
                        offset: Duration::from_nanos(at.max(0.0) as u64),
                        tokens: 1,
                    });
                }
                Some(marks)
            }
            _ => None,
        },
        _ => None,
    };
    let error = if md.was_cancelled {
        Some((Cause::Cancelled, "cancelled by AIPerf".to_string()))
    } else {
        l.error.as_ref().map(|e| {
            (
                cause_of(e),
                e.message.as_deref().unwrap_or_default().to_string(),
            )
        })
    };
    let ok = error.is_none();
    Ok(Raw {
        request_id: md.x_request_id.map(Cow::into_owned),
        queued_at: md.credit_issued_ns.map(Timestamp::from_unix_nanos),
        sent_at: Some(start),
        first_token_at: first,
        last_token_at: last,
        ended_at: Some(end.max(last.unwrap_or(end))),
        output_tokens: Some(if ok { out.unwrap_or(0) } else { 0 }),
        input_tokens: m
            .usage_prompt_tokens
            .as_ref()
            .or(m.input_sequence_length.as_ref())
            .or(m.error_isl.as_ref())
            .and_then(Metric::count),
        token_source,
        error,
        chunks: if ok { chunks } else { None },
    })
    .map(|mut r| {
        // The warmup phase is not part of the measured run.
        if md.benchmark_phase.as_deref() == Some("warmup") {
            r.sent_at = None;
        }
        r
    })
}

/// The most requests in flight at once (sent to released), a release before a send
/// at the same instant.
fn peak_in_flight(spans: &[tpscope_model::Span]) -> u64 {
    let mut events: Vec<(Timestamp, i64)> = spans
        .iter()
        .filter_map(|s| Some([(s.admitted_at?, 1), (s.released_at, -1)]))
        .flatten()
        .collect();
    events.sort_unstable();
    let (mut now, mut peak) = (0i64, 0i64);
    for (_, step) in events {
        now += step;
        peak = peak.max(now);
    }
    peak as u64
}

/// Whether a line is JSON cut off mid-value (a killed writer's last line).
fn is_cut(l: &str) -> bool {
    serde_json::from_str::<IgnoredAny>(l).is_err_and(|e| e.is_eof())
}

/// `concurrency`: AIPerf's `--concurrency`, which its records do not hold (the
/// summary beside them does; see `import_files`): the run's cap.
pub(super) fn import(
    cx: &mut Cx<'_>,
    bytes: &[u8],
    concurrency: Option<u32>,
) -> Result<(), ImportError> {
    let text =
        std::str::from_utf8(bytes).map_err(|e| cx.not_format(format!("not UTF-8 text: {e}")))?;
    cx.run.tool = "aiperf".into();
    cx.run.cap = concurrency;
    if let Some(c) = concurrency {
        cx.run.load = serde_json::json!({ "concurrency": c });
    }
    cx.run.token_source = Some(TokenSource::Tokenizer("aiperf".into()));
    cx.queue_known = true;
    let mut any = false;
    let mut warmup = 0u64;
    let mut old = 0u64;
    let last = text.lines().count().saturating_sub(1);
    for (i, l) in text.lines().enumerate() {
        if l.trim().is_empty() {
            continue;
        }
        let record = format!("line {}", i + 1);
        if i == last && !text.ends_with('\n') && is_cut(l) {
            cx.warnings.push(format!(
                "{}:{}: the last line is cut off ({} bytes, the JSON ends early); ignored",
                cx.file.display(),
                i + 1,
                l.len()
            ));
            continue;
        }
        old += u64::from(!l.contains("\"request_start_ns\""));
        match line(cx, &record, l) {
            Ok(raw) if raw.sent_at.is_none() => warmup += 1,
            Ok(raw) => {
                if raw.queued_at.is_none() {
                    cx.queue_known = false;
                }
                any = true;
                cx.push(&record, raw)?
            }
            Err(e) if !any && i == 0 => {
                return Err(cx.not_format(format!("{e}")));
            }
            Err(e) => cx.reject(e)?,
        }
    }
    if warmup > 0 {
        cx.warnings.push(format!(
            "{}: {warmup} warmup records left out",
            cx.file.display()
        ));
    }
    if let Some(cap) = concurrency {
        let peak = peak_in_flight(&cx.spans);
        if peak > u64::from(cap) {
            // A cap the run went past would put slot-time above the cap and a
            // what-if slower than the run itself.
            cx.run.cap = None;
            cx.warnings.push(format!(
                "{}: up to {peak} requests were in flight at once, above AIPerf's \
                 concurrency {cap} (it counts sessions; an agentic trace's sub-agents run \
                 beside them): imported without a cap (no utilization; no free slots in the \
                 capacity ledger)",
                cx.file.display()
            ));
        }
    }
    if old > 0 {
        cx.warnings.push(format!(
            "{}: {old} records of AIPerf before 0.3 (no `request_start_ns`): read with the \
             start in `timestamp_ns` and the end at `max_response_timestamp` (a failed one \
             ends where it started); no schedule, so no queue",
            cx.file.display()
        ));
    }
    Ok(())
}
