//! The span-log reader: the golden file, every kind of bad input, and round trips
//! through the writer.

use std::collections::BTreeMap;
use std::io::Cursor;
use std::path::{Path, PathBuf};
use std::time::Duration;

use tpscope_analysis::{Options, analyze};
use tpscope_log::{
    LogError, LogSet, LogWriter, ReadOptions, Reader, RecordReader, TimeUnit, read_paths,
};
use tpscope_model::{Record, RunRecord, SCHEMA, Span, Status, Timestamp};

fn fixture(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures")
        .join(name)
}

fn read_text(text: &str, opts: ReadOptions) -> Result<LogSet, LogError> {
    let mut r = Reader::new(opts);
    r.read_from(
        Path::new("test.jsonl"),
        Cursor::new(text.as_bytes().to_vec()),
    )?;
    Ok(r.finish())
}

fn err_text(text: &str) -> String {
    read_text(text, ReadOptions::default())
        .unwrap_err()
        .to_string()
}

const RUN: &str = r#"{"kind":"run","run_id":"r","schema":"tpscope.spans/1","started_at":"2026-01-01T00:00:00Z","cap":2}"#;
const SPAN: &str = r#"{"kind":"span","run_id":"r","span_id":"1","status":"ok","queued_at":"2026-01-01T00:00:00Z","admitted_at":"2026-01-01T00:00:00Z","first_token_at":"2026-01-01T00:00:01Z","last_token_at":"2026-01-01T00:00:02Z","released_at":"2026-01-01T00:00:02Z","output_tokens":4}"#;

#[test]
fn golden_file_gives_the_hand_computed_report() {
    let set = read_paths(&[fixture("two_spans_cap1.jsonl")], ReadOptions::default()).unwrap();
    assert_eq!(set.runs.len(), 1);
    assert!(set.warnings.is_empty(), "{:?}", set.warnings);
    let r = analyze(&set.runs[0].input, &Options::default());
    // 15 tokens over 6.5 s; 2 ok of 3; 1 retry over 3 spans; 3 wasted tokens.
    assert!((r.system_tps.unwrap().0 - 15.0 / 6.5).abs() < 1e-9);
    assert!((r.success_rate.unwrap() - 2.0 / 3.0).abs() < 1e-12);
    assert!((r.retry_rate.unwrap() - 1.0 / 3.0).abs() < 1e-12);
    assert_eq!(r.counts.wasted_tokens, 3);
    assert_eq!(r.counts.retries_by_cause["http_429"], 1);
    assert_eq!(r.counts.errors_by_cause["disconnect"], 1);
    assert_eq!(r.idle.backlog_time, Some(Duration::from_secs(3)));
    assert_eq!(r.gap_fraction, Some(0.0));
    assert_eq!(r.gap_fraction_sampled, Some(0.0));
    assert_eq!(r.labels["case"], "two spans behind a cap of one");
    assert!(r.complete);
}

#[test]
fn malformed_json_names_file_and_line() {
    let e = err_text(&format!("{RUN}\n{{\"kind\": \"span\",,}}\n"));
    assert!(e.starts_with("test.jsonl:2: malformed JSON"), "{e}");
}

#[test]
fn missing_required_field_is_named() {
    let e = err_text(&format!(
        "{RUN}\n{}\n",
        SPAN.replace(r#""queued_at":"2026-01-01T00:00:00Z","#, "")
    ));
    assert_eq!(e, "test.jsonl:2: field `queued_at`: missing (required)");
}

#[test]
fn first_token_before_admission_is_rejected() {
    let e = err_text(&format!(
        "{RUN}\n{}\n",
        SPAN.replace(
            r#""first_token_at":"2026-01-01T00:00:01Z""#,
            r#""first_token_at":"2025-12-31T23:59:59Z""#
        )
    ));
    assert!(
        e.starts_with("test.jsonl:2: field `first_token_at`: "),
        "{e}"
    );
    assert!(e.contains("before admitted_at"), "{e}");
}

#[test]
fn negative_and_absurd_values_are_rejected() {
    let e = err_text(&format!(
        "{RUN}\n{}\n",
        SPAN.replace(r#""output_tokens":4"#, r#""output_tokens":-4"#)
    ));
    assert_eq!(
        e,
        "test.jsonl:2: field `output_tokens`: expected a non-negative whole number, found the negative number -4"
    );
    let e = err_text(&format!(
        "{RUN}\n{}\n",
        SPAN.replace(r#""output_tokens":4"#, r#""output_tokens":4000000000000"#)
    ));
    assert!(
        e.contains("field `output_tokens`") && e.contains("more than"),
        "{e}"
    );
    let e = err_text(&format!(
        "{RUN}\n{}\n",
        SPAN.replace(
            "2026-01-01T00:00:02Z\",\"output",
            "2201-01-01T00:00:02Z\",\"output"
        )
    ));
    assert!(
        e.contains("field `released_at`") && e.contains("outside 2000..2200"),
        "{e}"
    );
    let e = err_text(&format!(
        "{RUN}\n{}\n",
        SPAN.replace(r#""output_tokens":4"#, r#""output_tokens":"four""#)
    ));
    assert!(
        e.contains(
            "field `output_tokens`: expected a non-negative whole number, found the string \"four\""
        ),
        "{e}"
    );
}

/// docs/design.md §8: readers ignore record kinds they do not know (a newer writer's), but
/// the reader stopped at the first with "unknown record kind". Both readers now
/// skip them unchecked (a newer kind need not have a `run_id`) and count them by
/// kind; the spans around them are read.
#[test]
fn unknown_record_kinds_stopped_the_read_instead_of_being_skipped() {
    let text = format!(
        "{RUN}\n{{\"kind\":\"spam\",\"run_id\":\"r\"}}\n{SPAN}\n\
         {{\"kind\":\"spam\",\"x\":[1,{{}}]}}\n{{\"kind\":\"eggs\",\"at\":1,\"at\":2}}\n"
    );
    let set = read_text(&text, ReadOptions::default()).unwrap();
    assert_eq!(set.runs.len(), 1);
    assert_eq!(set.runs[0].input.spans.len(), 1);
    assert_eq!(
        set.unknown_kinds,
        BTreeMap::from([("eggs".to_string(), 1), ("spam".to_string(), 2)])
    );
    assert!(set.skipped.is_empty(), "{:?}", set.skipped);
    let mut records = RecordReader::new(
        Path::new("test.jsonl"),
        Cursor::new(text.as_bytes()),
        ReadOptions::default(),
    );
    let kinds: Vec<&str> = records
        .by_ref()
        .map(|r| match r.unwrap().record {
            Record::Run(_) => "run",
            Record::Span(_) => "span",
            _ => "other",
        })
        .collect();
    assert_eq!(kinds, ["run", "span"]);
    assert_eq!(records.unknown_kinds(), &set.unknown_kinds);
    // Still JSON: a broken line of an unknown kind is malformed, and a kind that
    // is not a string is named.
    assert!(err_text(&format!("{RUN}\n{{\"kind\":\"spam\",}}\n")).contains("malformed JSON"));
    assert_eq!(
        err_text(&format!("{RUN}\n{{\"kind\":7}}\n")),
        "test.jsonl:2: field `kind`: expected a string, found the number 7"
    );
}

#[test]
fn duplicate_span_ids_are_rejected() {
    let e = err_text(&format!("{RUN}\n{SPAN}\n{SPAN}\n"));
    assert_eq!(
        e,
        "test.jsonl:3: field `span_id`: duplicate span id `1` in run `r`"
    );
}

#[test]
fn cut_off_last_line_is_accepted_with_a_warning() {
    let cut = &SPAN[..SPAN.len() / 2];
    let set = read_text(&format!("{RUN}\n{SPAN}\n{cut}"), ReadOptions::default()).unwrap();
    assert_eq!(set.runs[0].input.spans.len(), 1);
    assert!(
        set.warnings
            .iter()
            .any(|w| w.starts_with("test.jsonl:3: the last line is cut off")),
        "{:?}",
        set.warnings
    );
    // A complete last line without a newline is a normal record.
    let set = read_text(&format!("{RUN}\n{SPAN}"), ReadOptions::default()).unwrap();
    assert_eq!(set.runs[0].input.spans.len(), 1);
    assert!(set.warnings.iter().all(|w| !w.contains("cut off")));
}

#[test]
fn empty_and_binary_files_are_rejected() {
    assert_eq!(
        err_text(""),
        "test.jsonl: the file is empty (expected a span log: JSON Lines, one record per line)"
    );
    assert_eq!(
        err_text("\n\n"),
        "test.jsonl: the file is empty (expected a span log: JSON Lines, one record per line)"
    );
    let mut r = Reader::new(ReadOptions::default());
    let e = r
        .read_from(
            Path::new("x.bin"),
            Cursor::new(vec![0x1f, 0x8b, 0x08, 0x00, 0xff, 0xfe]),
        )
        .unwrap_err();
    // What broke: a gzip file was reported as "a NUL byte"; it is named as gzip.
    assert!(
        e.to_string().starts_with("x.bin:1: gzip-compressed data"),
        "{e}"
    );
    let mut r = Reader::new(ReadOptions::default());
    let e = r
        .read_from(Path::new("x.bin"), Cursor::new(b"ab\0cd\n".to_vec()))
        .unwrap_err();
    assert_eq!(
        e.to_string(),
        "x.bin:1: a NUL byte — this does not look like a span log (JSON Lines text)"
    );
    let mut r = Reader::new(ReadOptions::default());
    let e = r
        .read_from(Path::new("x.bin"), Cursor::new(vec![0xff, 0xfe, b'a']))
        .unwrap_err();
    assert!(e.to_string().contains("not UTF-8"), "{e}");
}

#[test]
fn missing_file_names_the_file() {
    let e = read_paths(
        &[PathBuf::from("/nonexistent/run.jsonl")],
        ReadOptions::default(),
    )
    .unwrap_err();
    assert!(e.to_string().starts_with("/nonexistent/run.jsonl: "), "{e}");
}

#[test]
fn skip_invalid_counts_reasons_and_keeps_the_rest() {
    let bad_order = SPAN
        .replace(r#""span_id":"1""#, r#""span_id":"2""#)
        .replace("00:00:01Z\",\"last", "2025-01-01T00:00:01Z\",\"last");
    let text = format!(
        "{RUN}\n{SPAN}\nnot json\n{SPAN}\n{bad_order}\n{{\"kind\":\"x\",\"run_id\":\"r\"}}\n"
    );
    let opts = ReadOptions {
        skip_invalid: true,
        ..ReadOptions::default()
    };
    let set = read_text(&text, opts).unwrap();
    assert_eq!(set.runs[0].input.spans.len(), 1);
    assert_eq!(set.skipped["malformed_json"], 1);
    assert_eq!(set.skipped["duplicate_span_id `span_id`"], 1);
    // A kind this version does not know is not invalid: skipped apart.
    assert_eq!(set.unknown_kinds["x"], 1);
    assert_eq!(set.skipped.values().sum::<u64>(), 3, "{:?}", set.skipped);
}

#[test]
fn numeric_timestamps_need_a_unit() {
    let span = r#"{"kind":"span","run_id":"r","span_id":"1","status":"ok","queued_at":1767225600.0,"admitted_at":1767225600.5,"first_token_at":1767225601,"last_token_at":1767225602,"released_at":1767225602,"output_tokens":4}"#;
    let e = err_text(&format!("{RUN}\n{span}\n"));
    assert!(
        e.contains("field `queued_at`") && e.contains("--time-unit"),
        "{e}"
    );
    let set = read_text(
        &format!("{RUN}\n{span}\n"),
        ReadOptions {
            time_unit: Some(TimeUnit::S),
            ..ReadOptions::default()
        },
    )
    .unwrap();
    let s = &set.runs[0].input.spans[0];
    assert_eq!(
        s.admitted_at.unwrap().since(s.queued_at),
        Some(Duration::from_millis(500))
    );
    // Milliseconds read as seconds land far in the future: rejected as implausible.
    let ms = span.replace("1767225600.0", "1767225600000");
    let e = read_text(
        &format!("{RUN}\n{ms}\n"),
        ReadOptions {
            time_unit: Some(TimeUnit::S),
            ..ReadOptions::default()
        },
    )
    .unwrap_err();
    assert!(e.to_string().contains("field `queued_at`"), "{e}");
}

#[test]
fn runs_are_grouped_by_run_id_across_files() {
    let dir = tempfile::tempdir().unwrap();
    let a = dir.path().join("a.jsonl");
    let b = dir.path().join("b.jsonl");
    std::fs::write(&a, format!("{RUN}\n{SPAN}\n")).unwrap();
    std::fs::write(&b, SPAN.replace(r#""span_id":"1""#, r#""span_id":"2""#)).unwrap();
    let set = read_paths(&[a, b], ReadOptions::default()).unwrap();
    assert_eq!(set.runs.len(), 1);
    assert_eq!(set.runs[0].input.spans.len(), 2);
    // no end record → warned by the analysis, not the reader.
    let r = analyze(&set.runs[0].input, &Options::default());
    assert!(!r.complete);
}

/// An ok span of 7 tokens, queued at 2026-01-01T00:00:00Z and streaming from 20 ms
/// to 120 ms.
fn ok_span(run_id: &str, span_id: &str) -> Span {
    let t = |ms: i64| Timestamp::from_unix_nanos(1_767_225_600_000_000_000 + ms * 1_000_000);
    Span {
        run_id: run_id.into(),
        span_id: span_id.into(),
        request_id: None,
        status: Status::Ok,
        queued_at: t(0),
        admitted_at: Some(t(1)),
        first_token_at: Some(t(20)),
        last_token_at: Some(t(120)),
        released_at: t(121),
        output_tokens: 7,
        input_tokens: Some(12),
        token_source: None,
        retry_count: 0,
        retry_causes: vec![],
        attempts: vec![],
        error: None,
        chunks: None,
        session_id: None,
        turn: None,
        tokenizer_output_tokens: None,
        finish_reason: None,
    }
}

#[test]
fn writer_output_reads_back_identically() {
    let t = |s: i64| Timestamp::from_unix_nanos(1_767_225_600_000_000_000 + s * 1_000_000);
    let run = RunRecord {
        run_id: "w".into(),
        schema: SCHEMA.into(),
        tool: "test".into(),
        started_at: t(0),
        target: Default::default(),
        cap: Some(3),
        token_source: Some(tpscope_model::TokenSource::Usage),
        tokenizer: None,
        sample_interval: Some(Duration::from_millis(10)),
        sample_heartbeat: None,
        load: serde_json::json!({"concurrency": 3}),
        labels: Default::default(),
        queue_times: Default::default(),
    };
    let span = ok_span("w", "s1");
    let mut w = LogWriter::new(Vec::new());
    w.write(&Record::Run(run.clone())).unwrap();
    w.write(&Record::Span(span.clone())).unwrap();
    let text = String::from_utf8(w.into_inner()).unwrap();
    // Every line is also a valid model::Record.
    for line in text.lines() {
        serde_json::from_str::<Record>(line).unwrap();
    }
    let set = read_text(&text, ReadOptions::default()).unwrap();
    let input = &set.runs[0].input;
    assert_eq!(input.run.as_ref().unwrap(), &run);
    assert_eq!(
        input.spans[0],
        tpscope_analysis::SpanFacts::of(&span, &mut Default::default())
    );
}

/// The hand-written scanner that replaced serde for speed must keep naming the
/// field at fault, inside `attempts` too.
#[test]
fn fast_scanner_errors_name_the_field_inside_attempts() {
    let with = |extra: &str| {
        let span = SPAN.replace(
            r#""output_tokens":4"#,
            &format!(r#""output_tokens":4,{extra}"#),
        );
        err_text(&format!("{RUN}\n{span}\n"))
    };
    assert_eq!(
        with(r#""attempts":5"#),
        "test.jsonl:2: field `attempts`: expected an array of attempt objects, found the number 5"
    );
    assert_eq!(
        with(r#""attempts":[{"started_at":"2026-01-01T00:00:00Z"},"x"]"#),
        "test.jsonl:2: field `attempts[1]`: expected an attempt object, found the string \"x\""
    );
    assert!(
        with(r#""attempts":[{"started_at":"2026-01-01T00:00:00Z","cause":"nope"}]"#)
            .starts_with("test.jsonl:2: field `attempts[0].cause`: unknown failure cause `nope`")
    );
    assert_eq!(
        with(
            r#""attempts":[{"started_at":"2026-01-01T00:00:02Z","ended_at":"2026-01-01T00:00:01Z"}]"#
        ),
        "test.jsonl:2: field `attempts[0].ended_at`: 2026-01-01T00:00:01.000000000Z is before started_at (2026-01-01T00:00:02.000000000Z)"
    );
    assert_eq!(
        with(r#""status":"ok""#),
        "test.jsonl:2: field `status`: the field appears twice in the record"
    );
    // Two attempts of 2^64 − 1 wasted tokens each overflowed the span's sum.
    let huge =
        r#"{"started_at":"2026-01-01T00:00:00Z","cause":"http_5xx","tokens":18446744073709551615}"#;
    assert_eq!(
        with(&format!(r#""attempts":[{huge},{huge}]"#)),
        "test.jsonl:2: field `attempts[0].tokens`: 18446744073709551615 tokens is implausible"
    );
    assert_eq!(
        with(r#""retry_causes":"http_429""#),
        "test.jsonl:2: field `retry_causes`: expected an array of cause names, found the string \"http_429\""
    );
}

/// Keys in another order than tpscope writes them, escaped keys and unknown
/// nested values read the same as the canonical line.
#[test]
fn fast_scanner_reads_reordered_and_escaped_keys_like_the_canonical_line() {
    let canonical = read_text(&format!("{RUN}\n{SPAN}\n"), ReadOptions::default()).unwrap();
    let reordered = r#"{"output_tokens":4,"released_at":"2026-01-01T00:00:02Z","extra":{"a":[1,{"b":null}]},"last_token_at":"2026-01-01T00:00:02Z","first_token_at":"2026-01-01T00:00:01Z","admitted_at":"2026-01-01T00:00:00Z","queued_at":"2026-01-01T00:00:00Z","st\u0061tus":"ok","span_id":"1","run_id":"r","kind":"span"}"#;
    let other = read_text(&format!("{RUN}\n{reordered}\n"), ReadOptions::default()).unwrap();
    assert_eq!(canonical.runs[0].input.spans, other.runs[0].input.spans);
}

/// Lines as tpscope writes them take a fast path, and ids that are small numbers
/// are kept in a bitset rather than hashed: duplicates must still be found in
/// every form, and ids that only look alike must not collide.
#[test]
fn duplicate_span_ids_are_found_in_written_lines_of_every_id_form() {
    let span = |id: &str| {
        Record::Span(Span {
            request_id: Some(format!("chatcmpl-{id}")),
            ..ok_span("r", id)
        })
    };
    let ids = [
        "0",
        "1",
        "01",
        "64",
        "63",
        "abc",
        "67108863",
        "67108864",
        "99999999",
        "100000000",
    ];
    let mut w = LogWriter::new(Vec::new());
    for id in ids {
        w.write(&span(id)).unwrap();
    }
    let text = String::from_utf8(w.into_inner()).unwrap();
    let opts = ReadOptions {
        keep_span_ids: true,
        ..ReadOptions::default()
    };
    let set = read_text(&text, opts).unwrap();
    let read: Vec<&str> = set.runs[0].span_ids.iter().map(|s| &**s).collect();
    assert_eq!(read, ids);
    for (i, id) in ids.iter().enumerate() {
        let mut w = LogWriter::new(Vec::new());
        w.write(&span(id)).unwrap();
        let again = String::from_utf8(w.into_inner()).unwrap();
        assert_eq!(
            err_text(&format!("{text}{again}")),
            format!(
                "test.jsonl:{}: field `span_id`: duplicate span id `{id}` in run `r`",
                ids.len() + 1
            ),
            "id {i}"
        );
    }
}

#[test]
fn a_utf8_bom_is_named_as_such() {
    // What broke: a log saved with a byte-order mark failed as malformed JSON.
    let mut r = Reader::new(ReadOptions::default());
    let mut bytes = vec![0xef, 0xbb, 0xbf];
    bytes.extend_from_slice(b"{\"kind\":\"end\"}\n");
    let e = r
        .read_from(Path::new("bom.jsonl"), Cursor::new(bytes))
        .unwrap_err();
    assert!(
        e.to_string()
            .starts_with("bom.jsonl:1: a UTF-8 byte-order mark (BOM)"),
        "{e}"
    );
}

#[test]
fn failure_messages_reach_the_analysis_by_both_readers() {
    // What broke: the report said "http_4xx 3" while the reason was only in the log.
    let mut span = ok_span("m", "1");
    span.status = Status::Error;
    span.first_token_at = None;
    span.last_token_at = None;
    span.output_tokens = 0;
    span.error = Some(tpscope_model::SpanError {
        cause: tpscope_model::Cause::Http4xx,
        message: "HTTP 400: `stream_options` is only allowed when `stream` is true".into(),
    });
    let mut w = LogWriter::new(Vec::new());
    w.write(&Record::Span(span.clone())).unwrap();
    // The same failure with an escaped quote: read by the general path.
    span.span_id = "2".into();
    span.error.as_mut().unwrap().message =
        "HTTP 400: \"stream_options\" is only allowed when `stream` is true".into();
    w.write(&Record::Span(span.clone())).unwrap();
    span.span_id = "3".into();
    span.error.as_mut().unwrap().message =
        "HTTP 400: `stream_options` is only allowed when `stream` is true".into();
    w.write(&Record::Span(span)).unwrap();
    let text = String::from_utf8(w.into_inner()).unwrap();
    let set = read_text(&text, ReadOptions::default()).unwrap();
    let top = set.runs[0].input.error_messages.top(3);
    assert_eq!(top.len(), 1);
    assert_eq!(top[0].cause, tpscope_model::Cause::Http4xx);
    assert_eq!(top[0].messages[0].count, 2);
    assert!(
        top[0].messages[0]
            .message
            .starts_with("HTTP 400: `stream_options`")
    );
    assert_eq!(
        top[0].messages[1].message,
        "HTTP 400: \"stream_options\" is only allowed when `stream` is true"
    );
}

#[test]
fn retried_spans_keep_their_last_attempts_start_for_the_waterfall() {
    // What broke: the waterfall could not tell back-off from the first-token wait.
    let log = fixture("bench_sim_faults.jsonl");
    let set = read_paths(&[log], ReadOptions::default()).unwrap();
    let input = &set.runs[0].input;
    let retried = input.spans.iter().filter(|s| s.retry_count > 0).count();
    assert!(retried > 0);
    assert_eq!(input.last_attempts.len(), retried);
    for &(i, t) in &input.last_attempts {
        let s = &input.spans[i];
        assert!(s.retry_count > 0 && s.admitted_at.unwrap() < t && t <= s.released_at);
    }
}
