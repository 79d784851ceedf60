//! tpscope's spans as OTLP/JSON (an `ExportTraceServiceRequest` in the JSON form
//! the OTLP/HTTP spec defines: lowerCamelCase fields, hex trace and span ids, enums
//! as integers, 64-bit integers as decimal strings). Pure: bytes in memory, no I/O.
//!
//! Each span is one GenAI client span (its own trace) from `queued_at` to
//! `released_at`, named `{operation} {model}`, with the GenAI semantic-convention
//! attributes, tpscope's own as `tpscope.*`, and tpscope's instants as events;
//! the names are [`super::otlp_names`]'s, which the importer reads back.

use serde::Serialize;
use tpscope_model::{RunRecord, Span, Status, Timestamp};

use super::otlp_names::{self as n, INSTANTS, operation_of};

/// The OTLP span kind `SPAN_KIND_CLIENT`.
const KIND_CLIENT: u8 = 3;
/// The OTLP status code `STATUS_CODE_ERROR` (`STATUS_CODE_UNSET` is 0).
const STATUS_ERROR: u8 = 2;

/// One span to encode and its run's record (the target: model, API, server; the
/// cap), when known.
pub type Item<'a> = (&'a Span, Option<&'a RunRecord>);

/// The OTLP/JSON `ExportTraceServiceRequest` of `spans`, under one resource
/// whose `service.name` is `service`.
pub fn encode<'a>(spans: impl IntoIterator<Item = Item<'a>>, service: &str) -> Vec<u8> {
    let request = Request {
        resource_spans: [ResourceSpans {
            resource: Resource {
                attributes: vec![
                    Kv::str("service.name", service),
                    Kv::str("service.version", env!("CARGO_PKG_VERSION")),
                ],
            },
            scope_spans: [ScopeSpans {
                scope: Scope {
                    name: "tpscope",
                    version: env!("CARGO_PKG_VERSION"),
                },
                spans: spans.into_iter().map(|(s, t)| span(s, t)).collect(),
            }],
        }],
    };
    // Serialising plain structs of strings and integers cannot fail.
    serde_json::to_vec(&request).unwrap_or_default()
}

fn span(s: &Span, run: Option<&RunRecord>) -> OSpan {
    let target = run.map(|r| &r.target);
    let model = target.and_then(|t| t.model.as_deref());
    let operation = operation_of(target.and_then(|t| t.api.as_ref()));
    let mut attributes = vec![Kv::str(n::OPERATION, operation)];
    if let Some(m) = model {
        attributes.push(Kv::str(n::REQUEST_MODEL, m));
    }
    if let Some((host, port)) = target.and_then(|t| t.url.as_deref()).and_then(host_port) {
        attributes.push(Kv::str(n::SERVER_ADDRESS, host));
        if let Some(p) = port {
            attributes.push(Kv::int(n::SERVER_PORT, u64::from(p)));
        }
    }
    if let Some(i) = s.input_tokens {
        attributes.push(Kv::int(n::INPUT_TOKENS, i));
    }
    attributes.push(Kv::int(n::OUTPUT_TOKENS, s.output_tokens));
    if let Some(f) = &s.finish_reason {
        attributes.push(Kv::strings(n::FINISH_REASONS, [f.as_str()]));
    }
    if let Some(e) = &s.error {
        attributes.push(Kv::str(n::ERROR_TYPE, e.cause.as_str()));
        attributes.push(Kv::str(n::CAUSE, e.cause.as_str()));
    }
    attributes.push(Kv::str(n::RUN_ID, &s.run_id));
    attributes.push(Kv::str(n::SPAN_ID, &s.span_id));
    if let Some(r) = &s.request_id {
        attributes.push(Kv::str(n::REQUEST_ID, r));
    }
    attributes.push(Kv::str(n::STATUS, s.status.as_str()));
    attributes.push(Kv::int(n::RETRY_COUNT, u64::from(s.retry_count)));
    if let Some(t) = &s.token_source {
        attributes.push(Kv::str(n::TOKEN_SOURCE, &t.to_string()));
    }
    if let Some(id) = &s.session_id {
        attributes.push(Kv::str(n::SESSION_ID, id));
    }
    if let Some(t) = s.turn {
        attributes.push(Kv::int(n::TURN, u64::from(t)));
    }
    if let Some(c) = s.tokenizer_output_tokens {
        attributes.push(Kv::int(n::TOKENIZER_OUTPUT_TOKENS, c));
    }
    if let Some(c) = run.and_then(|r| r.cap) {
        attributes.push(Kv::int(n::CAP, u64::from(c)));
    }
    let events = INSTANTS
        .iter()
        .filter_map(|i| {
            (i.of)(s).map(|at| Event {
                time_unix_nano: nanos(at),
                name: i.name,
            })
        })
        .collect();
    let (trace_id, span_id) = ids(&s.run_id, &s.span_id);
    OSpan {
        trace_id,
        span_id,
        name: match model {
            Some(m) => format!("{operation} {m}"),
            None => operation.to_string(),
        },
        kind: KIND_CLIENT,
        start_time_unix_nano: nanos(s.queued_at),
        end_time_unix_nano: nanos(s.released_at),
        attributes,
        events,
        status: match (s.status, &s.error) {
            (Status::Ok, _) => OStatus::default(),
            (_, e) => OStatus {
                code: STATUS_ERROR,
                message: e.as_ref().map(|e| e.message.clone()).unwrap_or_default(),
            },
        },
    }
}

fn nanos(t: Timestamp) -> String {
    t.unix_nanos().to_string()
}

/// The host and port of an `http(s)://host[:port]/…` URL.
fn host_port(url: &str) -> Option<(&str, Option<u16>)> {
    let rest = url.split_once("://").map_or(url, |(_, r)| r);
    let authority = rest.split(['/', '?', '#']).next()?;
    let authority = authority.rsplit_once('@').map_or(authority, |(_, a)| a);
    if authority.is_empty() {
        return None;
    }
    // A bracketed IPv6 literal keeps its colons.
    let (host, port) = match authority.rsplit_once(':') {
        Some((h, p)) if !p.contains(']') => (h, p.parse().ok()),
        _ => (authority, None),
    };
    Some((host.trim_start_matches('[').trim_end_matches(']'), port))
}

/// A trace id (16 bytes) and span id (8 bytes) in hex, derived from the run and
/// span ids: the same span exports under the same ids, and no id is all zeros
/// (which OTLP calls invalid).
fn ids(run_id: &str, span_id: &str) -> (String, String) {
    let h = |seed: u64| {
        let mut x = seed;
        for b in run_id.bytes().chain([0xff]).chain(span_id.bytes()) {
            x ^= u64::from(b);
            x = x.wrapping_mul(0x0000_0100_0000_01b3);
        }
        // A final mix (splitmix64) spreads short, similar inputs over all bits.
        x = (x ^ (x >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        x = (x ^ (x >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        (x ^ (x >> 31)).max(1)
    };
    let (a, b, c) = (
        h(0xcbf2_9ce4_8422_2325),
        h(0x6c62_272e_07bb_0142),
        h(0x9e37_79b9_7f4a_7c15),
    );
    (format!("{a:016x}{b:016x}"), format!("{c:016x}"))
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct Request<'a> {
    resource_spans: [ResourceSpans<'a>; 1],
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct ResourceSpans<'a> {
    resource: Resource,
    scope_spans: [ScopeSpans<'a>; 1],
}

#[derive(Serialize)]
struct Resource {
    attributes: Vec<Kv>,
}

#[derive(Serialize)]
struct ScopeSpans<'a> {
    scope: Scope<'a>,
    spans: Vec<OSpan>,
}

#[derive(Serialize)]
struct Scope<'a> {
    name: &'a str,
    version: &'a str,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct OSpan {
    trace_id: String,
    span_id: String,
    name: String,
    kind: u8,
    start_time_unix_nano: String,
    end_time_unix_nano: String,
    attributes: Vec<Kv>,
    events: Vec<Event>,
    status: OStatus,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct Event {
    time_unix_nano: String,
    name: &'static str,
}

#[derive(Serialize, Default)]
struct OStatus {
    code: u8,
    #[serde(skip_serializing_if = "String::is_empty")]
    message: String,
}

#[derive(Serialize)]
struct Kv {
    key: &'static str,
    value: AnyValue,
}

/// An OTLP `AnyValue`: exactly one of its fields is set.
#[derive(Serialize, Default)]
#[serde(rename_all = "camelCase")]
struct AnyValue {
    #[serde(skip_serializing_if = "Option::is_none")]
    string_value: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    int_value: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    array_value: Option<Array>,
}

#[derive(Serialize)]
struct Array {
    values: Vec<AnyValue>,
}

impl AnyValue {
    fn str(v: &str) -> AnyValue {
        AnyValue {
            string_value: Some(v.to_string()),
            ..AnyValue::default()
        }
    }
}

impl Kv {
    fn str(key: &'static str, v: &str) -> Kv {
        Kv {
            key,
            value: AnyValue::str(v),
        }
    }
    fn int(key: &'static str, v: u64) -> Kv {
        Kv {
            key,
            value: AnyValue {
                int_value: Some(v.to_string()),
                ..AnyValue::default()
            },
        }
    }
    fn strings<'s>(key: &'static str, v: impl IntoIterator<Item = &'s str>) -> Kv {
        Kv {
            key,
            value: AnyValue {
                array_value: Some(Array {
                    values: v.into_iter().map(AnyValue::str).collect(),
                }),
                ..AnyValue::default()
            },
        }
    }
}

#[cfg(test)]
#[path = "otlp_encode_tests.rs"]
mod tests;
