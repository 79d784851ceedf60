//! The analysis reader keeps a span's `session_id` and `turn` on its facts
//! (numbered per run, the same on the fast and the general path), so that the
//! report's `sessions` section needs no second read of the log.

use std::io::Cursor;
use std::path::Path;

use tpscope_analysis::{Options, SessionTurn, SpanFacts, analyze};
use tpscope_log::{LogError, LogSet, LogWriter, ReadOptions, Reader};
use tpscope_model::{Record, Span, Status, Timestamp};

fn read_text(text: &str) -> Result<LogSet, LogError> {
    let mut r = Reader::new(ReadOptions::default());
    r.read_from(Path::new("s.jsonl"), Cursor::new(text.as_bytes().to_vec()))?;
    Ok(r.finish())
}

fn span(id: u32, session: Option<&str>, turn: Option<u32>, ttft_ms: i64) -> Span {
    let t = |ms: i64| Timestamp::from_unix_nanos(1_767_225_600_000_000_000 + ms * 1_000_000);
    let q = i64::from(id) * 1000;
    Span {
        run_id: "r".into(),
        span_id: id.to_string(),
        request_id: None,
        status: Status::Ok,
        queued_at: t(q),
        admitted_at: Some(t(q)),
        first_token_at: Some(t(q + ttft_ms)),
        last_token_at: Some(t(q + ttft_ms + 50)),
        released_at: t(q + ttft_ms + 50),
        output_tokens: 5,
        input_tokens: Some(100),
        token_source: None,
        retry_count: 0,
        retry_causes: vec![],
        attempts: vec![],
        error: None,
        chunks: None,
        session_id: session.map(str::to_string),
        turn,
        tokenizer_output_tokens: None,
        finish_reason: None,
    }
}

fn written(spans: &[Span]) -> String {
    let mut w = LogWriter::new(Vec::new());
    for s in spans {
        w.write(&Record::Span(s.clone())).unwrap();
    }
    String::from_utf8(w.into_inner()).unwrap()
}

fn session(facts: &SpanFacts) -> Option<(u32, u32)> {
    facts
        .session
        .map(|SessionTurn { session, turn }| (session, turn.get()))
}

#[test]
fn sessions_are_numbered_per_run_in_order_of_first_appearance_on_both_paths() {
    let mut text = written(&[
        span(1, Some("b"), Some(1), 200),
        span(2, Some("a"), Some(1), 300),
        span(3, Some("b"), Some(2), 20),
        // A session id alone, or a turn alone, places a span in no session.
        span(4, Some("a"), None, 10),
        span(5, None, Some(2), 10),
    ]);
    // An escaped id and a non-canonical time: read by the general path.
    text.push_str(
        r#"{"kind":"span","run_id":"r","span_id":"6","status":"ok","queued_at":"2026-01-01T00:00:10Z","admitted_at":"2026-01-01T00:00:10Z","first_token_at":"2026-01-01T00:00:10.03Z","last_token_at":"2026-01-01T00:00:11Z","released_at":"2026-01-01T00:00:11Z","output_tokens":4,"session_id":"\u0061","turn":2}"#,
    );
    text.push('\n');
    let set = read_text(&text).unwrap();
    let input = &set.runs[0].input;
    let got: Vec<_> = input.spans.iter().map(session).collect();
    assert_eq!(
        got,
        [
            Some((0, 1)),
            Some((1, 1)),
            Some((0, 2)),
            None,
            None,
            Some((1, 2))
        ]
    );
    assert_eq!(input.session_ids.len(), 2);
    let r = analyze(input, &Options::default());
    let s = r.sessions.expect("a sessions section");
    assert_eq!(s.totals.sessions, 2);
    assert_eq!(s.by_turn.len(), 2);
    assert_eq!(s.by_turn[1].spans, 2);
    assert!((s.by_turn[0].ttft_p50_s.unwrap() - 0.25).abs() < 1e-9);
    assert!((s.by_turn[1].ttft_p50_ratio_to_turn_1.unwrap() - 0.1).abs() < 1e-9);
}

#[test]
fn a_run_without_sessions_has_no_section() {
    let set = read_text(&written(&[span(1, None, None, 10)])).unwrap();
    assert!(set.runs[0].input.spans[0].session.is_none());
    assert!(
        analyze(&set.runs[0].input, &Options::default())
            .sessions
            .is_none()
    );
}

#[test]
fn a_turn_that_is_not_a_count_is_named() {
    let line =
        written(&[span(1, Some("a"), Some(1), 10)]).replace(r#""turn":1"#, r#""turn":"one""#);
    let e = read_text(&line).unwrap_err().to_string();
    assert!(e.contains("s.jsonl:1: field `turn`"), "{e}");
    let line = written(&[span(1, Some("a"), Some(1), 10)])
        .replace(r#""session_id":"a""#, r#""session_id":7"#);
    let e = read_text(&line).unwrap_err().to_string();
    assert!(
        e.contains("field `session_id`: expected a string, found"),
        "{e}"
    );
    // Turns count from 1, on both paths (the fast one declines, the general one names it).
    let line = written(&[span(1, Some("a"), Some(1), 10)]).replace(r#""turn":1"#, r#""turn":0"#);
    let e = read_text(&line).unwrap_err().to_string();
    assert!(
        e.contains("s.jsonl:1: field `turn`: 0: turns count from 1"),
        "{e}"
    );
}
