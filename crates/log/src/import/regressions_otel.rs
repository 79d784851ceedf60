//! Regressions found importing real published OpenTelemetry traces (vLLM's own
//! spans, an agent framework's console output), each on a small hand-made input of
//! the layout that showed it.

use std::path::Path;
use std::time::Duration;

use super::*;

fn run(format: Option<Format>, text: &str) -> Result<Imported, ImportError> {
    let opts = ImportOptions::default();
    import(format, Path::new("t.json"), text.as_bytes(), &opts)
}

fn otlp(spans: &str) -> String {
    format!(r#"{{"resourceSpans":[{{"scopeSpans":[{{"spans":[{spans}]}}]}}]}}"#)
}

fn after(s: &Span, at: Option<tpscope_model::Timestamp>) -> Duration {
    at.unwrap().since(s.admitted_at.unwrap()).unwrap()
}

#[test]
fn otlp_vllm_span_closing_after_its_last_token_ends_its_stream_at_the_e2e_latency() {
    // vLLM 0.29's `llm_request` span closes 1.3 ms after the e2e latency it states
    // (the span is emitted after the request finished): the span's end was taken as
    // the last token, so the decode time, TPOT and stream TPS read that much slower.
    let text = otlp(
        r#"{"name":"llm_request","startTimeUnixNano":"1790341371000000000",
      "endTimeUnixNano":"1790341371256000000","attributes":[
      {"key":"gen_ai.latency.time_to_first_token","value":{"doubleValue":0.1}},
      {"key":"gen_ai.latency.e2e","value":{"doubleValue":0.25}},
      {"key":"gen_ai.usage.completion_tokens","value":{"intValue":"6"}}]}"#,
    );
    let i = run(None, &text).unwrap();
    let s = &i.spans[0];
    assert_eq!(after(s, s.first_token_at), Duration::from_millis(100));
    assert_eq!(after(s, s.last_token_at), Duration::from_millis(250));
    assert_eq!(after(s, Some(s.released_at)), Duration::from_millis(256));
    // An e2e past the span's end is not an instant of it: the end stays the last token.
    let late = text.replace("0.25}", "0.3}");
    let s = &run(None, &late).unwrap().spans[0];
    assert_eq!(s.last_token_at, Some(s.released_at));
}

#[test]
fn otlp_agent_and_tool_spans_are_not_model_calls() {
    // An agent framework (Microsoft Agent Framework) wraps its chat calls in
    // `invoke_agent` spans summing their usage, and its tools in `execute_tool`
    // spans: each was a request, so the tokens counted twice and tools counted as
    // requests of unknown tokens.
    let span = |id: &str, parent: &str, op: &str, out: &str, from: u64, to: u64| {
        let usage = match out {
            "" => String::new(),
            n => format!(r#",{{"key":"gen_ai.usage.output_tokens","value":{{"intValue":"{n}"}}}}"#),
        };
        format!(
            r#"{{"traceId":"t","spanId":"{id}","parentSpanId":"{parent}",
            "startTimeUnixNano":"{}","endTimeUnixNano":"{}","attributes":[
            {{"key":"gen_ai.operation.name","value":{{"stringValue":"{op}"}}}}{usage}]}}"#,
            1_790_000_000_000_000_000 + from * 1_000_000,
            1_790_000_000_000_000_000 + to * 1_000_000,
        )
    };
    let spans = [
        span("a", "", "invoke_agent", "15", 0, 900),
        span("c1", "a", "chat", "10", 10, 400),
        span("x", "a", "execute_tool", "", 410, 420),
        span("c2", "a", "chat", "5", 430, 890),
    ];
    let i = run(Some(Format::Otlp), &otlp(&spans.join(","))).unwrap();
    let out: Vec<u64> = i.spans.iter().map(|s| s.output_tokens).collect();
    assert_eq!(out, [10, 5]);
    assert!(!i.run.labels.contains_key("tokens_unknown_spans"));
    assert!(
        i.warnings
            .iter()
            .any(|w| w.contains("2 agent and tool spans")),
        "{:?}",
        i.warnings
    );
    // The agent's span alone is no call at all.
    let e = run(Some(Format::Otlp), &otlp(&spans[0])).unwrap_err();
    assert!(e.to_string().contains("no span is a model call"), "{e}");
}

/// The Python SDK's console exporter: a span printed at its start (no end), then
/// again when it ended, and a second processor printing it once more.
const CONSOLE: &str = r#"{
    "name": "chat m",
    "context": {"trace_id": "0xab", "span_id": "0x01", "trace_state": "[]"},
    "kind": "SpanKind.CLIENT",
    "parent_id": null,
    "start_time": "2026-03-01T20:47:18.717057Z",
    "end_time": null,
    "status": {"status_code": "UNSET"},
    "attributes": {"gen_ai.operation.name": "chat"},
    "events": []
}
{
    "name": "chat m",
    "context": {"trace_id": "0xab", "span_id": "0x01", "trace_state": "[]"},
    "kind": "SpanKind.CLIENT",
    "parent_id": null,
    "start_time": "2026-03-01T20:47:18.717057Z",
    "end_time": "2026-03-01T20:47:19.503262Z",
    "status": {"status_code": "UNSET"},
    "attributes": {"gen_ai.operation.name": "chat", "gen_ai.request.model": "m",
                   "gen_ai.usage.input_tokens": 145, "gen_ai.usage.output_tokens": 51},
    "events": [{"name": "gen_ai.first_chunk", "timestamp": "2026-03-01T20:47:18.900000Z",
                "attributes": {}}]
}
"#;

#[test]
fn otlp_python_console_exporter_output_is_read_once_per_span() {
    // A published `traces.jsonl` of an agent framework's GenAI spans, as the
    // Python SDK's ConsoleSpanExporter prints them: "cannot tell which tool", and
    // with `--from otlp` "line 1: EOF while parsing an object".
    let failed = CONSOLE
        .replace("0x01", "0x02")
        .replace("\"UNSET\"}", "\"ERROR\", \"description\": \"boom\"}");
    let open = CONSOLE
        .split("}\n{")
        .next()
        .unwrap()
        .replace("0x01", "0x03")
        + "}";
    let text = format!("{CONSOLE}{CONSOLE}{failed}{open}");
    let i = run(None, &text).unwrap();
    assert_eq!(i.format, Format::Otlp);
    assert_eq!(i.spans.len(), 2);
    let s = &i.spans[0];
    assert_eq!((s.output_tokens, s.input_tokens), (51, Some(145)));
    assert_eq!(after(s, s.first_token_at), Duration::from_micros(182_943));
    assert_eq!(
        after(s, Some(s.released_at)),
        Duration::from_micros(786_205)
    );
    assert_eq!(i.spans[1].error.as_ref().unwrap().message, "boom");
    let said = |w: &str| i.warnings.iter().any(|x| x.contains(w));
    // Three repeats of span 1, one of span 2 (its start); span 3 never ended.
    assert!(said("4 printouts repeat a span"), "{:?}", i.warnings);
    assert!(said("1 spans never ended"), "{:?}", i.warnings);
    let bad = CONSOLE.replace("2026-03-01T20:47:19.503262Z", "yesterday");
    let e = run(None, &bad).unwrap_err().to_string();
    assert!(e.contains("span 2: field `end_time`"), "{e}");
}

#[test]
fn otlp_document_without_resource_spans_says_so() {
    // A file of bare spans (`{"spans": [...]}`, a trace tool's own flattening of
    // SGLang's spans) was "no span has a `gen_ai.operation.name` …", though its
    // spans have usage: it holds no OTLP document at all.
    let e = run(Some(Format::Otlp), r#"{"spans":[{"name":"Req r1"}]}"#)
        .unwrap_err()
        .to_string();
    assert!(e.contains("no `resourceSpans` at the top level"), "{e}");
}
