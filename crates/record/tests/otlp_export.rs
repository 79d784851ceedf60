//! The recorder's OTLP export against a loopback receiver: spans arrive as GenAI
//! spans with tpscope's attributes and events; a dead collector and a slow one
//! cost the export (counted, with the cause), never the log or the run's close.

mod common;
mod otlp_support;

use std::time::{Duration, Instant};

use common::read;
use otlp_support::{Receiver, closed_port};
use tpscope_record::{Cause, OtlpConfig, Recorder, RunInfo, Usage};

fn info() -> RunInfo {
    RunInfo::new()
        .model("llama-test")
        .url("http://127.0.0.1:8000/v1")
        .api("chat")
}

fn quick(url: &str) -> OtlpConfig {
    let mut c = OtlpConfig::new(url).unwrap();
    c.timeout = Duration::from_millis(300);
    c.every = Duration::from_millis(20);
    c
}

fn attr<'a>(span: &'a serde_json::Value, key: &str) -> Option<&'a serde_json::Value> {
    span["attributes"]
        .as_array()?
        .iter()
        .find(|kv| kv["key"] == key)
        .map(|kv| &kv["value"])
}

/// Three requests (two ok, one failed) through a recorder that exports.
fn record(rec: &Recorder) {
    for i in 0..3 {
        let req = rec.queued(format!("req-{i}")).admitted();
        if i == 1 {
            req.finish_err(Cause::Http5xx, "upstream unavailable");
            continue;
        }
        req.first_token();
        req.tokens(4);
        req.finish_ok(Usage::new(4, Some(20)));
    }
}

#[test]
fn recorder_spans_reach_the_collector_as_genai_spans() {
    let recv = Receiver::start();
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("spans.jsonl");
    let cfg = quick(&recv.url).header("authorization=Bearer t0k").unwrap();
    let rec = Recorder::builder(&path, info()).otlp(cfg).open().unwrap();
    record(&rec);
    let closed = rec.close().unwrap();
    assert_eq!(closed.not_exported, 0);
    assert_eq!(rec.export_stats().unwrap().exported(), 3);
    assert_eq!(rec.export_stats().unwrap().warning(), None);
    let got = recv.got();
    assert!(!got.is_empty());
    for g in &got {
        assert_eq!(g.path, "/v1/traces");
        let h = |k: &str| {
            g.headers
                .iter()
                .find(|(n, _)| n == k)
                .map(|(_, v)| v.as_str())
        };
        assert_eq!(h("content-type"), Some("application/json"));
        assert_eq!(h("authorization"), Some("Bearer t0k"));
    }
    let spans = recv.spans();
    let log = read(&path);
    assert_eq!((spans.len(), log.spans.len()), (3, 3));
    for (s, l) in spans.iter().zip(&log.spans) {
        assert_eq!(s["name"], "chat llama-test");
        assert_eq!(
            attr(s, "gen_ai.request.model").unwrap()["stringValue"],
            "llama-test"
        );
        assert_eq!(
            attr(s, "server.address").unwrap()["stringValue"],
            "127.0.0.1"
        );
        assert_eq!(
            attr(s, "tpscope.run_id").unwrap()["stringValue"],
            l.run_id.as_str()
        );
        assert_eq!(
            attr(s, "tpscope.request_id").unwrap()["stringValue"],
            l.request_id.as_deref().unwrap()
        );
        assert_eq!(s["startTimeUnixNano"], l.queued_at.unix_nanos().to_string());
    }
    assert_eq!(
        attr(&spans[0], "gen_ai.usage.output_tokens").unwrap()["intValue"],
        "4"
    );
    assert_eq!(
        attr(&spans[0], "gen_ai.usage.input_tokens").unwrap()["intValue"],
        "20"
    );
    assert_eq!(
        attr(&spans[1], "error.type").unwrap()["stringValue"],
        "http_5xx"
    );
    assert_eq!(spans[1]["status"]["code"], 2);
    let first = spans[0]["events"]
        .as_array()
        .unwrap()
        .iter()
        .find(|e| e["name"] == "tpscope.first_token")
        .expect("a first-token event");
    assert_eq!(
        first["timeUnixNano"],
        log.spans[0]
            .first_token_at
            .unwrap()
            .unix_nanos()
            .to_string()
    );
}

#[test]
fn a_dead_collector_drops_the_export_with_its_cause_and_the_log_is_whole() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("spans.jsonl");
    let rec = Recorder::builder(&path, info())
        .otlp(quick(&closed_port()))
        .open()
        .unwrap();
    record(&rec);
    let closed = rec.close().unwrap();
    assert_eq!(closed.counts.spans, 3);
    assert_eq!(closed.not_exported, 3);
    let warning = rec.export_stats().unwrap().warning().unwrap();
    assert!(
        warning.starts_with("otlp: 3 spans not exported (connecting: connection refused"),
        "{warning}"
    );
    let log = read(&path);
    assert_eq!((log.spans.len(), log.ends.len()), (3, 1));
}

#[test]
fn a_slow_collector_never_holds_the_log_or_the_close_back() {
    let recv = Receiver::with_delay(Duration::from_secs(3));
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("spans.jsonl");
    let mut cfg = quick(&recv.url);
    cfg.batch = 2;
    cfg.queue = 4;
    let rec = Recorder::builder(&path, info()).otlp(cfg).open().unwrap();
    for i in 0..40 {
        rec.queued(format!("r{i}"))
            .admitted()
            .finish_ok(Usage::new(1, None));
    }
    // Every span is in the log at once, whatever the collector does.
    rec.flush();
    assert_eq!(read(&path).spans.len(), 40);
    let t = Instant::now();
    let closed = rec.close().unwrap();
    // The close waits for the export at most its timeout (300 ms) and one POST.
    assert!(t.elapsed() < Duration::from_secs(3), "{:?}", t.elapsed());
    assert_eq!(closed.counts.spans, 40);
    assert!(closed.not_exported > 0);
    let stats = rec.export_stats().unwrap();
    assert_eq!(stats.exported() + stats.not_exported(), 40);
    let warning = stats.warning().unwrap();
    assert!(warning.contains("no answer within 0.3 s"), "{warning}");
    assert!(warning.contains("the export queue was full"), "{warning}");
}
