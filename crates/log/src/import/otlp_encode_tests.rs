use std::path::Path;

use serde_json::Value;
use tpscope_model::{
    Attempt, Cause, RunRecord, Span, SpanError, Status, Target, Timestamp, TokenSource,
};

use super::encode;
use crate::import::{Format, ImportOptions, import};

fn t(ms: i64) -> Timestamp {
    Timestamp::from_unix_nanos(1_800_000_000_000_000_000 + ms * 1_000_000)
}

fn span(id: &str, status: Status) -> Span {
    Span {
        run_id: "run-1".into(),
        span_id: id.into(),
        request_id: Some(format!("req-{id}")),
        status,
        queued_at: t(0),
        admitted_at: Some(t(10)),
        first_token_at: (status == Status::Ok).then(|| t(110)),
        last_token_at: (status == Status::Ok).then(|| t(610)),
        released_at: t(620),
        output_tokens: if status == Status::Ok { 50 } else { 0 },
        input_tokens: Some(200),
        token_source: Some(TokenSource::Usage),
        retry_count: 0,
        retry_causes: vec![],
        attempts: vec![Attempt {
            ended_at: t(620),
            ..Attempt::started(t(12))
        }],
        error: (status != Status::Ok).then(|| SpanError {
            cause: Cause::Http5xx,
            message: "upstream said 503".into(),
        }),
        chunks: None,
        session_id: None,
        turn: None,
        tokenizer_output_tokens: None,
        finish_reason: (status == Status::Ok).then(|| "stop".into()),
    }
}

/// A run record with `target()` and a cap of 4.
fn run() -> RunRecord {
    RunRecord {
        run_id: "r".into(),
        schema: tpscope_model::SCHEMA.into(),
        tool: "tpscope".into(),
        started_at: t(0),
        target: Target {
            url: Some("http://10.0.0.5:8000/v1".into()),
            model: Some("llama-3-8b".into()),
            api: Some("chat".into()),
        },
        cap: Some(4),
        token_source: None,
        tokenizer: None,
        sample_interval: None,
        sample_heartbeat: None,
        load: serde_json::Value::Null,
        labels: Default::default(),
        queue_times: Default::default(),
    }
}

fn attr<'a>(span: &'a Value, key: &str) -> &'a Value {
    span["attributes"]
        .as_array()
        .unwrap()
        .iter()
        .find(|kv| kv["key"] == key)
        .map(|kv| &kv["value"])
        .unwrap_or_else(|| panic!("no attribute {key}"))
}

#[test]
fn a_span_becomes_a_genai_client_span_in_otlp_json() {
    let ok = span("1", Status::Ok);
    let tgt = run();
    let doc: Value = serde_json::from_slice(&encode([(&ok, Some(&tgt))], "tpscope")).unwrap();
    let rs = &doc["resourceSpans"][0];
    assert_eq!(rs["resource"]["attributes"][0]["key"], "service.name");
    let s = &rs["scopeSpans"][0]["spans"][0];
    assert_eq!(s["name"], "chat llama-3-8b");
    assert_eq!(s["kind"], 3);
    // Ids in hex of the right width; 64-bit integers as decimal strings.
    assert_eq!(s["traceId"].as_str().unwrap().len(), 32);
    assert_eq!(s["spanId"].as_str().unwrap().len(), 16);
    assert_eq!(s["startTimeUnixNano"], t(0).unix_nanos().to_string());
    assert_eq!(s["endTimeUnixNano"], t(620).unix_nanos().to_string());
    assert_eq!(attr(s, "gen_ai.operation.name")["stringValue"], "chat");
    assert_eq!(attr(s, "gen_ai.request.model")["stringValue"], "llama-3-8b");
    assert_eq!(attr(s, "gen_ai.usage.output_tokens")["intValue"], "50");
    assert_eq!(attr(s, "gen_ai.usage.input_tokens")["intValue"], "200");
    assert_eq!(
        attr(s, "gen_ai.response.finish_reasons")["arrayValue"]["values"][0]["stringValue"],
        "stop"
    );
    assert_eq!(attr(s, "server.address")["stringValue"], "10.0.0.5");
    assert_eq!(attr(s, "server.port")["intValue"], "8000");
    assert_eq!(attr(s, "tpscope.request_id")["stringValue"], "req-1");
    assert_eq!(attr(s, "tpscope.token_source")["stringValue"], "usage");
    let events: Vec<&str> = s["events"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["name"].as_str().unwrap())
        .collect();
    assert_eq!(
        events,
        [
            "tpscope.queued",
            "tpscope.admitted",
            "tpscope.sent",
            "tpscope.first_token",
            "tpscope.last_token",
            "tpscope.released"
        ]
    );
    assert_eq!(
        s["events"][3]["timeUnixNano"],
        t(110).unix_nanos().to_string()
    );
    assert_eq!(s["status"]["code"], 0);
}

#[test]
fn a_failed_span_has_an_error_status_and_its_cause_as_error_type() {
    let bad = span("2", Status::Error);
    let doc: Value = serde_json::from_slice(&encode([(&bad, None)], "svc")).unwrap();
    let s = &doc["resourceSpans"][0]["scopeSpans"][0]["spans"][0];
    assert_eq!(s["name"], "chat");
    assert_eq!(s["status"]["code"], 2);
    assert_eq!(s["status"]["message"], "upstream said 503");
    assert_eq!(attr(s, "error.type")["stringValue"], "http_5xx");
    // No first token: no event for it.
    assert_eq!(s["events"].as_array().unwrap().len(), 4);
}

#[test]
fn spans_of_two_runs_get_different_ids() {
    let a = span("1", Status::Ok);
    let mut b = a.clone();
    b.run_id = "run-2".into();
    let doc: Value = serde_json::from_slice(&encode([(&a, None), (&b, None)], "s")).unwrap();
    let spans = &doc["resourceSpans"][0]["scopeSpans"][0]["spans"];
    assert_ne!(spans[0]["traceId"], spans[1]["traceId"]);
    assert_ne!(spans[0]["spanId"], spans[1]["spanId"]);
}

#[test]
fn exported_spans_import_back_with_the_same_instants_and_counts() {
    let spans = [
        span("1", Status::Ok),
        span("2", Status::Error),
        span("3", Status::Ok),
    ];
    let tgt = run();
    // Two documents, one per line, as a receiver saves two batches.
    let mut bytes = encode(spans[..2].iter().map(|s| (s, Some(&tgt))), "tpscope");
    bytes.push(b'\n');
    bytes.extend(encode([(&spans[2], Some(&tgt))], "tpscope"));
    let got = import(
        Some(Format::Otlp),
        Path::new("x.jsonl"),
        &bytes,
        &ImportOptions::default(),
    )
    .unwrap();
    assert_eq!(got.spans.len(), 3);
    assert_eq!(got.run.target.model.as_deref(), Some("llama-3-8b"));
    assert_eq!(got.run.target.url.as_deref(), Some("10.0.0.5:8000"));
    // The run's cap comes back, so the gap fraction of the import is the log's.
    assert_eq!(got.run.cap, Some(4));
    assert_eq!(got.run.queue_times, tpscope_model::QueueTimes::Measured);
    for (a, b) in spans.iter().zip(&got.spans) {
        assert_eq!(b.request_id, a.request_id);
        assert_eq!(b.status, a.status);
        assert_eq!(b.queued_at, a.queued_at);
        assert_eq!(b.admitted_at, a.admitted_at);
        assert_eq!(b.first_token_at, a.first_token_at);
        assert_eq!(b.last_token_at, a.last_token_at);
        assert_eq!(b.released_at, a.released_at);
        assert_eq!(b.output_tokens, a.output_tokens);
        assert_eq!(b.input_tokens, a.input_tokens);
        assert_eq!(
            b.error.as_ref().map(|e| e.cause),
            a.error.as_ref().map(|e| e.cause)
        );
    }
}
