//! The OpenTelemetry Python SDK's console-exporter output (`ConsoleSpanExporter`:
//! each finished span's `to_json()`, indented objects one after another), which
//! people save and publish as `traces.jsonl`: turned into one OTLP/JSON document so
//! the OTLP importer ([`super::otlp`]) reads it as it reads the Collector's files.
//! Instants there are RFC 3339 text, ids `0x`-prefixed hex, attributes a map.

use std::collections::HashSet;

use serde_json::{Map, Value, json};
use tpscope_model::Timestamp;

/// What the conversion found besides the spans, for the import's warnings.
#[derive(Debug, Default, PartialEq, Eq)]
pub(super) struct Converted {
    /// The spans as one OTLP/JSON `ExportTraceServiceRequest`.
    pub document: Value,
    /// Printouts that repeat a span (printed at its start too, or by two processors).
    pub repeated: u64,
    /// Spans never printed with an `end_time` (still open when the program stopped).
    pub unfinished: u64,
}

/// Whether the bytes start like the console exporter's output: a JSON object whose
/// `context` holds a `trace_id`.
pub(super) fn is_console(bytes: &[u8]) -> bool {
    let mut stream = serde_json::Deserializer::from_slice(bytes).into_iter::<Value>();
    matches!(stream.next(), Some(Ok(v)) if v["context"]["trace_id"].is_string())
}

/// The spans of console-exporter output, or what is wrong with it (the span's
/// position, counted from 1, and the field).
pub(super) fn convert(bytes: &[u8]) -> Result<Converted, String> {
    let mut spans = Vec::new();
    let (mut ended, mut open) = (HashSet::new(), HashSet::new());
    let mut out = Converted::default();
    let stream = serde_json::Deserializer::from_slice(bytes).into_iter::<Value>();
    for (i, v) in stream.enumerate() {
        let at = |e: String| format!("span {}: {e}", i + 1);
        let v = v.map_err(|e| at(e.to_string()))?;
        let id = (
            v["context"]["trace_id"].clone(),
            v["context"]["span_id"].clone(),
        );
        if v["end_time"].is_null() {
            out.repeated += u64::from(!open.insert(id.clone()) || ended.contains(&id));
            continue;
        }
        if ended.contains(&id) {
            out.repeated += 1;
            continue;
        }
        out.repeated += u64::from(open.contains(&id));
        spans.push(span(&v).map_err(at)?);
        ended.insert(id);
    }
    out.unfinished = open.difference(&ended).count() as u64;
    out.document = json!({"resourceSpans": [{"scopeSpans": [{"spans": spans}]}]});
    Ok(out)
}

fn span(v: &Value) -> Result<Value, String> {
    // `0x`-prefixed hex; a root span's `parent_id` is null.
    let hex = |v: &Value| -> String {
        v.as_str()
            .map(|s| s.trim_start_matches("0x").to_string())
            .unwrap_or_default()
    };
    let time = |field: &str| -> Result<String, String> {
        let text = v[field]
            .as_str()
            .ok_or_else(|| format!("field `{field}`: missing (expected an RFC 3339 instant)"))?;
        Timestamp::parse_rfc3339(text)
            .map(|t| t.unix_nanos().to_string())
            .map_err(|e| format!("field `{field}`: {e}"))
    };
    // UNSET, OK, ERROR: OTLP's codes 0, 1, 2.
    let code = match v["status"]["status_code"].as_str() {
        Some("ERROR") => 2,
        Some("OK") => 1,
        _ => 0,
    };
    let events: Vec<Value> = v["events"]
        .as_array()
        .map(|events| {
            events
                .iter()
                .map(|e| {
                    let at = e["timestamp"]
                        .as_str()
                        .and_then(|t| Timestamp::parse_rfc3339(t).ok())
                        .map(|t| t.unix_nanos().to_string());
                    json!({"name": e["name"], "timeUnixNano": at})
                })
                .collect()
        })
        .unwrap_or_default();
    Ok(json!({
        "traceId": hex(&v["context"]["trace_id"]),
        "spanId": hex(&v["context"]["span_id"]),
        "parentSpanId": hex(&v["parent_id"]),
        "name": v["name"],
        "startTimeUnixNano": time("start_time")?,
        "endTimeUnixNano": time("end_time")?,
        "attributes": attributes(v["attributes"].as_object()),
        "events": events,
        "status": {"code": code, "message": v["status"]["description"]},
    }))
}

/// The attribute map as OTLP key-values (arrays and nested maps have no use here).
fn attributes(map: Option<&Map<String, Value>>) -> Vec<Value> {
    let Some(map) = map else { return Vec::new() };
    map.iter()
        .filter_map(|(k, v)| {
            let value = match v {
                Value::String(s) => json!({"stringValue": s}),
                Value::Bool(b) => json!({"boolValue": b}),
                Value::Number(n) if n.is_i64() || n.is_u64() => {
                    json!({"intValue": n.to_string()})
                }
                Value::Number(n) => json!({"doubleValue": n.as_f64()}),
                _ => return None,
            };
            Some(json!({"key": k, "value": value}))
        })
        .collect()
}
