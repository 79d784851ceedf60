//! OTLP/JSON trace files (OTLP 1.x `ExportTraceServiceRequest` in its JSON form, one
//! document or one per line as the Collector's file exporter writes) with the
//! OpenTelemetry GenAI semantic conventions (1.26 and later; OpenLLMetry's older
//! `gen_ai.usage.prompt_tokens`/`completion_tokens` too). Every span with a
//! `gen_ai.operation.name` or a `gen_ai.usage.output_tokens` attribute is one
//! request: start and end from the span, tokens from `gen_ai.usage.*` (the server's
//! usage), the first token from `gen_ai.response.time_to_first_chunk` or the first
//! event named like `*first_token*`/`*first_chunk*`/`*chunk*`, where present.

use serde::Deserialize;
use serde_json::Value;
use tpscope_model::{Cause, Target, Timestamp, TokenSource};

use super::ImportError;
use super::build::{Cx, Raw, cause_of_status, secs};

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct Request {
    #[serde(default)]
    resource_spans: Vec<ResourceSpans>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct ResourceSpans {
    #[serde(default)]
    scope_spans: Vec<ScopeSpans>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct ScopeSpans {
    #[serde(default)]
    spans: Vec<OSpan>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct OSpan {
    #[serde(default)]
    span_id: String,
    #[serde(default)]
    start_time_unix_nano: Option<Value>,
    #[serde(default)]
    end_time_unix_nano: Option<Value>,
    #[serde(default)]
    attributes: Vec<KeyValue>,
    #[serde(default)]
    events: Vec<Event>,
    #[serde(default)]
    status: Option<Status>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct Event {
    #[serde(default)]
    time_unix_nano: Option<Value>,
    #[serde(default)]
    name: String,
}

#[derive(Deserialize)]
struct Status {
    #[serde(default)]
    code: Option<Value>,
    #[serde(default)]
    message: Option<String>,
}

#[derive(Deserialize)]
struct KeyValue {
    key: String,
    #[serde(default)]
    value: AnyValue,
}

#[derive(Deserialize, Default)]
#[serde(rename_all = "camelCase")]
struct AnyValue {
    string_value: Option<String>,
    int_value: Option<Value>,
    double_value: Option<f64>,
}

/// A 64-bit integer as OTLP/JSON writes it: a decimal string, or a number.
fn int(v: &Value) -> Option<i64> {
    match v {
        Value::String(s) => s.parse().ok(),
        Value::Number(n) => n.as_i64(),
        _ => None,
    }
}

impl OSpan {
    fn attr(&self, key: &str) -> Option<&AnyValue> {
        self.attributes
            .iter()
            .find(|kv| kv.key == key)
            .map(|kv| &kv.value)
    }
    fn int_attr(&self, keys: &[&str]) -> Option<u64> {
        keys.iter().find_map(|k| {
            let v = self.attr(k)?;
            v.int_value
                .as_ref()
                .and_then(int)
                .or_else(|| v.double_value.map(|d| d as i64))
                .or_else(|| v.string_value.as_deref().and_then(|s| s.parse().ok()))
                .and_then(|n| u64::try_from(n).ok())
        })
    }
    fn str_attr(&self, key: &str) -> Option<&str> {
        self.attr(key)?.string_value.as_deref()
    }
    fn is_genai(&self) -> bool {
        self.attr("gen_ai.operation.name").is_some()
            || self.attr("gen_ai.usage.output_tokens").is_some()
            || self.attr("gen_ai.usage.completion_tokens").is_some()
    }
}

const OUTPUT: &[&str] = &[
    "gen_ai.usage.output_tokens",
    "gen_ai.usage.completion_tokens",
];
const INPUT: &[&str] = &["gen_ai.usage.input_tokens", "gen_ai.usage.prompt_tokens"];

fn cause_of(s: &OSpan) -> Cause {
    let kind = s.str_attr("error.type").unwrap_or("").to_ascii_lowercase();
    let fallback = if kind.contains("ratelimit") {
        Cause::Http429
    } else if kind.contains("timeout") {
        Cause::TimeoutTotal
    } else if kind.contains("connection") || kind.contains("connect") {
        Cause::Connect
    } else if kind.contains("internalserver") {
        Cause::Http5xx
    } else if kind.contains("badrequest")
        || kind.contains("notfound")
        || kind.contains("authentication")
    {
        Cause::Http4xx
    } else {
        Cause::Disconnect
    };
    let status = s.int_attr(&["http.response.status_code", "http.status_code"]);
    cause_of_status(status, fallback)
}

fn is_error(s: &OSpan) -> bool {
    match s.status.as_ref().and_then(|st| st.code.as_ref()) {
        Some(Value::Number(n)) => n.as_u64() == Some(2),
        Some(Value::String(c)) => c == "STATUS_CODE_ERROR",
        _ => false,
    }
}

fn span(cx: &Cx<'_>, record: &str, s: &OSpan, no_first: &mut u64) -> Result<Raw, ImportError> {
    let time = |field: &str, v: &Option<Value>| {
        v.as_ref()
            .and_then(int)
            .filter(|n| *n > 0)
            .map(Timestamp::from_unix_nanos)
            .ok_or_else(|| cx.bad(record, Some(field), "missing (expected Unix nanoseconds)"))
    };
    let start = time("startTimeUnixNano", &s.start_time_unix_nano)?;
    let end = time("endTimeUnixNano", &s.end_time_unix_nano)?;
    let error = is_error(s).then(|| {
        let msg = s
            .status
            .as_ref()
            .and_then(|st| st.message.clone())
            .or_else(|| s.str_attr("error.type").map(str::to_string))
            .unwrap_or_default();
        (cause_of(s), msg)
    });
    let out = s.int_attr(OUTPUT);
    let ttfc = s
        .attr("gen_ai.response.time_to_first_chunk")
        .and_then(|v| v.double_value)
        .and_then(secs)
        .map(|d| start.after(d));
    let event = s
        .events
        .iter()
        .filter(|e| {
            let n = e.name.to_ascii_lowercase();
            n.contains("first_token") || n.contains("first_chunk") || n.contains("chunk")
        })
        .filter_map(|e| e.time_unix_nano.as_ref().and_then(int))
        .min()
        .map(Timestamp::from_unix_nanos);
    let mut first = ttfc.or(event);
    if first.is_none() && error.is_none() && out.unwrap_or(0) > 0 {
        // No first-token time recorded: the tokens arrived by the end, which is all
        // that is known (exact for non-streaming calls).
        *no_first += 1;
        first = Some(end);
    }
    Ok(Raw {
        request_id: s
            .str_attr("gen_ai.response.id")
            .map(str::to_string)
            .or_else(|| (!s.span_id.is_empty()).then(|| s.span_id.clone())),
        sent_at: Some(start),
        first_token_at: first.map(|f| f.min(end)),
        last_token_at: first.map(|_| end),
        ended_at: Some(end),
        output_tokens: Some(if error.is_some() { 0 } else { out.unwrap_or(0) }),
        input_tokens: s.int_attr(INPUT),
        error,
        ..Raw::default()
    })
}

pub(super) fn import(cx: &mut Cx<'_>, bytes: &[u8]) -> Result<(), ImportError> {
    // One document, or one per line (the Collector's file exporter).
    let docs: Vec<Request> = match serde_json::from_slice::<Request>(bytes) {
        Ok(d) => vec![d],
        Err(whole) => {
            let text = std::str::from_utf8(bytes).map_err(|_| cx.not_format(format!("{whole}")))?;
            let mut docs = Vec::new();
            for (i, l) in text
                .lines()
                .enumerate()
                .filter(|(_, l)| !l.trim().is_empty())
            {
                let d = serde_json::from_str(l).map_err(|e| {
                    cx.not_format(format!("line {}: {e} (expected an OTLP/JSON ExportTraceServiceRequest with `resourceSpans`)", i + 1))
                })?;
                docs.push(d);
            }
            docs
        }
    };
    cx.run.tool = "otlp".into();
    cx.run.token_source = Some(TokenSource::Usage);
    let mut spans: Vec<&OSpan> = docs
        .iter()
        .flat_map(|d| &d.resource_spans)
        .flat_map(|r| &r.scope_spans)
        .flat_map(|s| &s.spans)
        .filter(|s| s.is_genai())
        .collect();
    if spans.is_empty() {
        return Err(cx.not_format(
            "no span has a `gen_ai.operation.name` or `gen_ai.usage.output_tokens` attribute",
        ));
    }
    let start = |s: &&OSpan| s.start_time_unix_nano.as_ref().and_then(int).unwrap_or(0);
    spans.sort_by_key(start);
    if let Some(m) = spans
        .iter()
        .find_map(|s| s.str_attr("gen_ai.request.model"))
    {
        let server = spans.iter().find_map(|s| {
            let host = s.str_attr("server.address")?;
            Some(match s.int_attr(&["server.port"]) {
                Some(p) => format!("{host}:{p}"),
                None => host.to_string(),
            })
        });
        cx.run.target = Target {
            url: server,
            model: Some(m.to_string()),
            api: spans[0]
                .str_attr("gen_ai.operation.name")
                .map(str::to_string),
        };
    }
    let mut no_first = 0;
    for (i, s) in spans.iter().enumerate() {
        let record = format!("span {i} ({})", s.span_id);
        match span(cx, &record, s, &mut no_first) {
            Ok(raw) => cx.push(&record, raw)?,
            Err(e) => cx.reject(e)?,
        }
    }
    if no_first > 0 {
        cx.warnings.push(format!(
            "{}: {no_first} spans record no first-token time (no gen_ai.response.time_to_first_chunk \
             or chunk event): their first token is placed at the span's end, so their TTFT is the \
             whole call and their stream metrics are absent",
            cx.file.display()
        ));
    }
    Ok(())
}
