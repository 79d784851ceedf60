//! inference-perf `per_request_lifecycle_metrics.json` (inference-perf 0.2 to 0.7,
//! `report.request_lifecycle.per_request: true`): an array of `{start_time,
//! end_time, info, error}` with times from the client's monotonic clock (relative;
//! the run is placed at a fixed anchor), `info.response_metrics.chunk_times` (each
//! streamed chunk's arrival), `server_usage` (the server's usage) and
//! `output_tokens` (inference-perf's tokenizer). A `scheduled_time`, where a version
//! writes it, is the schedule: it becomes `queued_at`.

use std::time::Duration;

use serde_json::Value;
use tpscope_model::{Cause, ChunkMark, Target, Timestamp, TokenSource};

use super::ImportError;
use super::build::{Cx, Raw, cause_of_status};
use super::lanes::DEFAULT_ANCHOR;

pub(super) fn import(cx: &mut Cx<'_>, bytes: &[u8]) -> Result<(), ImportError> {
    let doc: Value = serde_json::from_slice(bytes)
        .map_err(|e| cx.not_format(format!("{e} (expected per_request_lifecycle_metrics.json)")))?;
    let reqs = doc
        .as_array()
        .ok_or_else(|| cx.not_format("expected a JSON array of per-request lifecycle entries"))?;
    cx.run.tool = "inference-perf".into();
    cx.run.target = Target {
        api: Some("inference-perf".into()),
        ..Target::default()
    };
    let origin = reqs
        .iter()
        .filter_map(|r| r["scheduled_time"].as_f64().or(r["start_time"].as_f64()))
        .reduce(f64::min)
        .unwrap_or(0.0);
    let at = |s: f64| -> Option<Timestamp> {
        Duration::try_from_secs_f64(s - origin)
            .ok()
            .map(|d| DEFAULT_ANCHOR.after(d))
    };
    cx.queue_known = !reqs.is_empty() && reqs.iter().all(|r| r["scheduled_time"].is_number());
    for (i, r) in reqs.iter().enumerate() {
        let record = format!("request {i}");
        let raw = (|| -> Result<Raw, ImportError> {
            let time = |field: &str| {
                r[field].as_f64().and_then(at).ok_or_else(|| {
                    cx.bad(
                        &record,
                        Some(field),
                        "missing (expected seconds of the client's clock)",
                    )
                })
            };
            let start = time("start_time")?;
            let end = time("end_time")?;
            let rm = &r["info"]["response_metrics"];
            let chunks: Vec<Timestamp> = rm["chunk_times"]
                .as_array()
                .into_iter()
                .flatten()
                .filter_map(|v| v.as_f64().and_then(at))
                .collect();
            let error = match &r["error"] {
                Value::Null => None,
                e => Some((
                    cause_of_status(e["status_code"].as_u64(), Cause::Disconnect),
                    format!(
                        "{}: {}",
                        e["error_type"].as_str().unwrap_or("error"),
                        e["error_msg"].as_str().unwrap_or_default()
                    ),
                )),
            };
            let (out, source) = match rm["server_usage"]["completion_tokens"].as_u64() {
                Some(n) => (n, TokenSource::Usage),
                None => (
                    rm["output_tokens"].as_u64().unwrap_or(0),
                    TokenSource::Tokenizer("inference-perf".into()),
                ),
            };
            let ok = error.is_none();
            let first = chunks.first().copied().filter(|_| ok);
            let marks = first.map(|f| {
                chunks
                    .iter()
                    .map(|c| ChunkMark {
                        offset: c.since(f).unwrap_or_default(),
                        tokens: 1,
                    })
                    .collect()
            });
            Ok(Raw {
                queued_at: r["scheduled_time"].as_f64().and_then(at),
                sent_at: Some(start),
                first_token_at: first,
                last_token_at: chunks.last().copied().filter(|_| ok),
                ended_at: Some(end),
                output_tokens: Some(if ok { out } else { 0 }),
                input_tokens: rm["server_usage"]["prompt_tokens"]
                    .as_u64()
                    .or_else(|| r["info"]["input_tokens"].as_u64()),
                token_source: Some(source),
                error,
                chunks: marks,
                ..Raw::default()
            })
        })();
        match raw {
            Ok(raw) => cx.push(&record, raw)?,
            Err(e) => cx.reject(e)?,
        }
    }
    Ok(())
}
