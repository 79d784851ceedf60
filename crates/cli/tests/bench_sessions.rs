//! End to end: a multi-turn `bench` against the built-in simulator with prefix
//! caching on. Each conversation opens with a long, distinct document and goes
//! on with short questions, so turn 2+ prefill only the new question (the
//! history is cached) and start far sooner than turn 1: the report's `sessions`
//! section shows it in every format, and the run record says what load made it.

mod bench_support;

use std::fmt::Write;
use std::path::Path;

use bench_support::{analyze, bench, check_log, records, runs, tpscope};

/// `n` conversations: a long first turn that differs from the first word on (so
/// no session finds another's blocks in the cache), then two short ones.
fn conversations(path: &Path, n: usize) {
    let mut text = String::new();
    for i in 0..n {
        let mut doc = format!("Document {i}.");
        for w in 0..900 {
            let _ = write!(doc, " river{} delta{}", (w * 7 + i) % 97, (w + i * 13) % 89);
        }
        let msgs = serde_json::json!({"messages": [
            {"role": "user", "content": doc},
            {"role": "user", "content": "Summarise that in a sentence."},
            {"role": "user", "content": "And the main caveat?"},
        ], "max_tokens": 8});
        text.push_str(&msgs.to_string());
        text.push('\n');
    }
    std::fs::write(path, text).unwrap();
}

#[test]
fn later_turns_start_sooner_with_prefix_caching_and_every_format_shows_it() {
    let dir = tempfile::tempdir().unwrap();
    let conv = dir.path().join("chats.jsonl");
    conversations(&conv, 8);
    let sim = dir.path().join("sim.toml");
    std::fs::write(&sim, "prefix_caching = true\n").unwrap();
    let out = bench(
        dir.path(),
        "turns.jsonl",
        &[
            "--sim-config",
            sim.to_str().unwrap(),
            "--conversations",
            conv.to_str().unwrap(),
            "--think-time",
            "10ms",
            "--concurrency",
            "2",
            "--seed",
            "3",
        ],
    );
    assert_eq!(out.status.code(), Some(0), "{}", out.stderr);
    check_log(&out.out);
    let recs = records(&out.out);
    let load = &runs(&recs)[0].load;
    assert_eq!(load["sessions"]["count"], 8, "{load}");
    assert_eq!(load["sessions"]["think_time"], "0.01s", "{load}");
    assert!(
        load["sessions"]["conversations"]
            .as_str()
            .is_some_and(|c| c.ends_with("chats.jsonl")),
        "{load}"
    );

    let reports = analyze(&out.out);
    let s = reports[0].sessions.as_ref().expect("a sessions section");
    assert_eq!(s.totals.sessions, 8);
    assert_eq!((s.totals.complete, s.totals.turns_max), (8, 3));
    assert_eq!(s.by_turn.len(), 3);
    let t1 = s.by_turn[0].ttft_p50_s.unwrap();
    for t in &s.by_turn[1..] {
        let ratio = t.ttft_p50_ratio_to_turn_1.unwrap();
        // Turn 1 prefills ~3,600 tokens, later turns a dozen: far below half.
        assert!(
            ratio < 0.5,
            "turn {}: TTFT p50 {:?} s vs turn 1's {t1} s (ratio {ratio})",
            t.turn,
            t.ttft_p50_s
        );
    }
    // The printed report has the section (no second read of the log).
    assert!(
        out.stdout.contains("multi-turn sessions: TTFT by turn"),
        "{}",
        out.stdout
    );

    let report = |format: &str| {
        let o = tpscope()
            .args(["report", "--format", format])
            .arg(&out.out)
            .output()
            .unwrap();
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
        String::from_utf8(o.stdout).unwrap()
    };
    let text = report("text");
    assert!(text.contains("p50 vs turn 1"), "{text}");
    assert!(
        text.contains("sessions: 8 (8 with every turn ok)"),
        "{text}"
    );
    let md = report("markdown");
    assert!(md.contains("**Multi-turn sessions**"), "{md}");
    assert!(md.contains("| turn |"), "{md}");
    let json: serde_json::Value = serde_json::from_str(&report("json")).unwrap();
    let js = &json["runs"][0]["sessions"];
    assert_eq!(js["totals"]["sessions"], 8, "{js}");
    assert_eq!(js["by_turn"][0]["ttft_p50_ratio_to_turn_1"], 1.0, "{js}");
    let html_path = dir.path().join("r.html");
    let o = tpscope()
        .args(["report", "--html"])
        .arg(&html_path)
        .arg(&out.out)
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let html = std::fs::read_to_string(&html_path).unwrap();
    assert!(
        html.contains("<h2>Multi-turn sessions</h2>"),
        "html section"
    );
    assert!(html.contains("TTFT by turn"), "html chart");
}

#[test]
fn a_single_turn_run_has_no_sessions_section() {
    let dir = tempfile::tempdir().unwrap();
    let out = bench(
        dir.path(),
        "plain.jsonl",
        &[
            "--requests",
            "4",
            "--concurrency",
            "2",
            "--input-tokens",
            "32",
            "--output-tokens",
            "4",
        ],
    );
    assert_eq!(out.status.code(), Some(0), "{}", out.stderr);
    let recs = records(&out.out);
    assert!(runs(&recs)[0].load.get("sessions").is_none());
    assert!(analyze(&out.out)[0].sessions.is_none());
    assert!(
        !out.stdout.contains("multi-turn sessions"),
        "{}",
        out.stdout
    );
}
