//! `--otlp-endpoint` of bench and the proxy, against a loopback receiver: every
//! span of the log arrives as a GenAI span with its tokens and instants; the
//! exported payloads, imported back with `tpscope import --from otlp`, give the
//! log's output tokens, TTFT and stream TPS; a dead collector costs the export
//! (one warning with the count and cause), never the run or its log, and a slow
//! one holds the end of the run back by a bounded time.

mod bench_support;
#[path = "../../record/tests/otlp_support/mod.rs"]
mod otlp_support;

use std::collections::HashMap;
use std::path::Path;
use std::time::{Duration, Instant};

use bench_support::{
    addr_in, analyze, bench, check_log, signal, start_server, tpscope, wait_stopped,
};
use otlp_support::{Receiver, closed_port};
use serde_json::Value;

const LOAD: [&str; 7] = [
    "--concurrency",
    "4",
    "--requests",
    "16",
    "--output-tokens",
    "24",
    "-q",
];

fn attr<'a>(span: &'a Value, key: &str) -> Option<&'a Value> {
    span["attributes"]
        .as_array()?
        .iter()
        .find(|kv| kv["key"] == key)
        .map(|kv| &kv["value"])
}

fn text<'a>(span: &'a Value, key: &str) -> &'a str {
    attr(span, key)
        .and_then(|v| v["stringValue"].as_str().or(v["intValue"].as_str()))
        .unwrap_or_else(|| panic!("no attribute {key} in {span}"))
}

/// The exported spans by their span id in the log.
fn by_span_id(recv: &Receiver) -> HashMap<String, Value> {
    recv.spans()
        .into_iter()
        .map(|s| (text(&s, "tpscope.span_id").to_string(), s))
        .collect()
}

#[test]
fn bench_exports_every_span_of_the_log_with_its_tokens_and_instants() {
    let recv = Receiver::start();
    let dir = tempfile::tempdir().unwrap();
    let mut args = LOAD.to_vec();
    args.extend(["--otlp-endpoint", &recv.url, "--otlp-header", "x-team=eval"]);
    let run = bench(dir.path(), "b.jsonl", &args);
    assert!(run.status.success(), "{}", run.stderr);
    assert!(!run.stderr.contains("otlp:"), "{}", run.stderr);
    let (spans, _) = check_log(&run.out);
    let got = by_span_id(&recv);
    assert_eq!(got.len(), spans.len());
    assert!(
        recv.got().iter().all(
            |g| g.path == "/v1/traces" && g.headers.contains(&("x-team".into(), "eval".into()))
        )
    );
    for s in &spans {
        let o = &got[&s.span_id];
        assert_eq!(text(o, "gen_ai.operation.name"), "chat");
        assert_eq!(text(o, "gen_ai.request.model"), "sim-llama-3.1-8b");
        assert_eq!(
            text(o, "gen_ai.usage.output_tokens"),
            s.output_tokens.to_string()
        );
        assert_eq!(text(o, "tpscope.run_id"), s.run_id);
        assert_eq!(text(o, "tpscope.status"), s.status.as_str());
        let event = |name: &str| {
            o["events"]
                .as_array()
                .unwrap()
                .iter()
                .find(|e| e["name"] == name)
                .map(|e| e["timeUnixNano"].as_str().unwrap().to_string())
        };
        let nanos = |t: Option<tpscope_model::Timestamp>| t.map(|t| t.unix_nanos().to_string());
        assert_eq!(event("tpscope.queued"), nanos(Some(s.queued_at)));
        assert_eq!(event("tpscope.admitted"), nanos(s.admitted_at));
        assert_eq!(event("tpscope.first_token"), nanos(s.first_token_at));
        assert_eq!(event("tpscope.last_token"), nanos(s.last_token_at));
        assert_eq!(event("tpscope.released"), nanos(Some(s.released_at)));
    }
}

#[test]
fn exported_spans_imported_back_give_the_logs_tokens_ttft_stream_tps_and_gap() {
    let recv = Receiver::start();
    let dir = tempfile::tempdir().unwrap();
    let full = format!("{}/v1/traces", recv.url);
    let mut args = LOAD.to_vec();
    args.extend(["--otlp-endpoint", &full]);
    let run = bench(dir.path(), "b.jsonl", &args);
    assert!(run.status.success(), "{}", run.stderr);
    let exported = dir.path().join("exported.jsonl");
    std::fs::write(&exported, recv.bodies_as_lines()).unwrap();
    let imported = dir.path().join("imported.jsonl");
    let out = tpscope()
        .args(["import", "--from", "otlp"])
        .arg(&exported)
        .arg("--output")
        .arg(&imported)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let (a, b) = (&analyze(&run.out)[0], &analyze(&imported)[0]);
    assert_eq!(b.counts, a.counts);
    assert_eq!(b.output_length, a.output_length);
    assert_eq!(b.distributions.t_first_token, a.distributions.t_first_token);
    assert_eq!(b.distributions.ttft_user, a.distributions.ttft_user);
    assert_eq!(b.distributions.stream_tps, a.distributions.stream_tps);
    assert!(a.distributions.stream_tps.count > 0);
    // The run's cap travels on every span: the gap fraction (16 requests at a cap
    // of 4, none held back: 0) and the window are the log's. Without the cap the
    // import read as uncapped and the same run showed a gap of 0.73.
    assert_eq!(b.gap_fraction, a.gap_fraction);
    assert_eq!(a.gap_fraction, Some(0.0));
    assert_eq!(b.window.map(|w| w.duration), a.window.map(|w| w.duration));
}

#[test]
fn a_dead_collector_leaves_the_run_and_its_log_whole_and_says_what_was_lost() {
    let dir = tempfile::tempdir().unwrap();
    let mut args = LOAD.to_vec();
    let dead = closed_port();
    args.extend(["--otlp-endpoint", &dead]);
    let run = bench(dir.path(), "b.jsonl", &args);
    assert!(run.status.success(), "{}", run.stderr);
    let (spans, end) = check_log(&run.out);
    assert_eq!((spans.len(), end.spans), (16, 16));
    assert!(
        run.stderr
            .contains("warning: otlp: 16 spans not exported (connecting: connection refused: 16)"),
        "{}",
        run.stderr
    );
}

#[test]
fn a_slow_collector_costs_the_export_not_the_run_and_the_close_is_bounded() {
    // Answers after 20 s: every POST times out at the exporter's 5 s.
    let recv = Receiver::with_delay(Duration::from_secs(20));
    let dir = tempfile::tempdir().unwrap();
    let mut args = LOAD.to_vec();
    args.extend(["--otlp-endpoint", &recv.url]);
    let t0 = Instant::now();
    let run = bench(dir.path(), "b.jsonl", &args);
    assert!(run.status.success(), "{}", run.stderr);
    // The run, then at most the 5 s the close waits and one POST's 5 s.
    assert!(t0.elapsed() < Duration::from_secs(40), "{:?}", t0.elapsed());
    let (spans, _) = check_log(&run.out);
    assert_eq!(spans.len(), 16);
    assert!(
        run.stderr
            .contains("warning: otlp: 16 spans not exported (")
            && run.stderr.contains("no answer within 5 s"),
        "{}",
        run.stderr
    );
}

#[test]
fn a_bad_otlp_endpoint_or_header_is_refused_naming_the_flag() {
    bench_support::refused(
        &["--otlp-endpoint", "https://otel.example.com"],
        &["--otlp-endpoint", "https is not supported"],
    );
    bench_support::refused(
        &[
            "--otlp-endpoint",
            "http://127.0.0.1:4318",
            "--otlp-header",
            "nope",
        ],
        &["--otlp-header", "NAME=VALUE"],
    );
}

fn proxy_run(dir: &Path, otlp: &str) -> (std::path::PathBuf, String) {
    let (sim, sim_line) = start_server(dir, &["sim", "--port", "0"]);
    let up = format!("http://{}", addr_in(&sim_line));
    let out = dir.join("p.jsonl");
    let (proxy, line) = start_server(
        dir,
        &[
            "proxy",
            "--upstream",
            &up,
            "--listen",
            "127.0.0.1:0",
            "--out",
            out.to_str().unwrap(),
            "--server-metrics",
            "off",
            "--otlp-endpoint",
            otlp,
        ],
    );
    let url = format!("http://{}/v1", addr_in(&line));
    let mut args = LOAD.to_vec();
    args.extend(["--url", &url, "--model", "sim-llama-3.1-8b"]);
    let run = bench(dir, "client.jsonl", &args);
    assert!(run.status.success(), "{}", run.stderr);
    signal(proxy.id(), "-TERM");
    let err = wait_stopped(proxy, Duration::from_secs(30));
    signal(sim.id(), "-INT");
    wait_stopped(sim, Duration::from_secs(30));
    (out, err)
}

#[test]
fn the_proxy_exports_every_span_it_records() {
    let recv = Receiver::start();
    let dir = tempfile::tempdir().unwrap();
    let (out, err) = proxy_run(dir.path(), &recv.url);
    assert!(!err.contains("otlp:"), "{err}");
    let (spans, _) = check_log(&out);
    assert_eq!(spans.len(), 16);
    let got = by_span_id(&recv);
    assert_eq!(got.len(), 16);
    for s in &spans {
        let o = &got[&s.span_id];
        assert_eq!(
            text(o, "gen_ai.usage.output_tokens"),
            s.output_tokens.to_string()
        );
        assert_eq!(text(o, "server.address"), "127.0.0.1");
    }
}

#[test]
fn the_proxy_warns_at_its_stop_what_a_dead_collector_lost() {
    let dir = tempfile::tempdir().unwrap();
    let (out, err) = proxy_run(dir.path(), &closed_port());
    assert_eq!(check_log(&out).0.len(), 16);
    assert!(
        err.contains("warning: otlp: 16 spans not exported (connecting: connection refused"),
        "{err}"
    );
}
