//! The record-level reader: whole records with their line numbers from files, path
//! lists and any `BufRead`; the same errors, cut-off last line and skipping as the
//! analysis reader; and records written by `LogWriter` read back equal.

use std::collections::BTreeMap;
use std::io::Cursor;
use std::path::{Path, PathBuf};
use std::time::Duration;

use tpscope_log::{LogError, LogWriter, ReadOptions, Reader, RecordReader};
use tpscope_model::{
    Attempt, Cause, ChunkMark, EndRecord, Record, RunRecord, SCHEMA, SampleRecord, Span, SpanError,
    Status, Target, Timestamp, TokenSource,
};

fn fixture(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures")
        .join(name)
}

/// What a record reader gave for a text: its items and its counts after them.
struct Outcome {
    items: Vec<Result<(u64, Record), String>>,
    records: u64,
    skipped: BTreeMap<String, u64>,
    warnings: Vec<String>,
}

/// Every item of a record reader over `text`, and its counts after them.
fn read(text: &str, opts: ReadOptions) -> Outcome {
    let mut r = RecordReader::new(Path::new("test.jsonl"), text.as_bytes(), opts);
    let items = r
        .by_ref()
        .map(|i| i.map(|lr| (lr.line, lr.record)).map_err(|e| e.to_string()))
        .collect();
    Outcome {
        items,
        records: r.records(),
        skipped: r.skipped().clone(),
        warnings: r.warnings().to_vec(),
    }
}

/// The error the analysis reader gives for `text`.
fn analysis_error(text: &str) -> String {
    let mut r = Reader::new(ReadOptions::default());
    r.read_from(
        Path::new("test.jsonl"),
        Cursor::new(text.as_bytes().to_vec()),
    )
    .unwrap_err()
    .to_string()
}

/// The error the record reader ends with for `text`, after the records before it.
fn record_error(text: &str) -> String {
    match read(text, ReadOptions::default()).items.last() {
        Some(Err(e)) => e.clone(),
        other => panic!("no error: {other:?}"),
    }
}

const RUN: &str = r#"{"kind":"run","run_id":"r","schema":"tpscope.spans/1","started_at":"2026-01-01T00:00:00Z","cap":2}"#;
const SPAN: &str = r#"{"kind":"span","run_id":"r","span_id":"1","status":"ok","queued_at":"2026-01-01T00:00:00Z","admitted_at":"2026-01-01T00:00:00Z","first_token_at":"2026-01-01T00:00:01Z","last_token_at":"2026-01-01T00:00:02Z","released_at":"2026-01-01T00:00:02Z","output_tokens":4}"#;

#[test]
fn a_good_file_gives_every_record_with_its_line_as_serde_reads_it() {
    for name in ["two_spans_cap1.jsonl", "bench_sim_faults.jsonl"] {
        let path = fixture(name);
        let text = std::fs::read_to_string(&path).unwrap();
        let mut reader = RecordReader::open([&path], ReadOptions::default());
        let items: Vec<_> = reader.by_ref().map(Result::unwrap).collect();
        let lines: Vec<(usize, &str)> = text
            .lines()
            .enumerate()
            .filter(|(_, l)| !l.trim().is_empty())
            .collect();
        assert_eq!(items.len(), lines.len(), "{name}");
        for (item, (i, line)) in items.iter().zip(&lines) {
            assert_eq!(item.line, *i as u64 + 1);
            assert_eq!(&*item.file, path.as_path());
            let expected: Record = serde_json::from_str(line).unwrap();
            assert_eq!(item.record, expected, "{name}:{}", item.line);
        }
        assert_eq!(reader.records(), lines.len() as u64);
        assert!(reader.skipped().is_empty());
        assert!(reader.warnings().is_empty(), "{:?}", reader.warnings());
    }
}

#[test]
fn a_bad_field_gives_the_analysis_readers_error() {
    let cases = [
        SPAN.replace(r#""queued_at":"2026-01-01T00:00:00Z","#, ""),
        SPAN.replace(r#""output_tokens":4"#, r#""output_tokens":-4"#),
        SPAN.replace(r#""output_tokens":4"#, r#""output_tokens":"four""#),
        SPAN.replace(r#""status":"ok""#, r#""status":"fine""#),
        SPAN.replace("00:00:01Z\",\"last", "2025-01-01T00:00:01Z\",\"last"),
        SPAN.replace(
            r#""output_tokens":4"#,
            r#""output_tokens":4,"attempts":[{"started_at":"2026-01-01T00:00:00Z","ended_at":"2026-01-01T00:00:02Z","cause":"gremlins","tokens":4}]"#,
        ),
        SPAN.replace(r#""output_tokens":4"#, r#""output_tokens":4,"chunks":[[1]]"#),
        r#"{"kind":"spam",,}"#.to_string(),
        r#"{"kind": "span",,}"#.to_string(),
        format!("{SPAN}\n{SPAN}"),
        RUN.replace(r#""cap":2"#, r#""cap":3"#),
    ];
    for case in cases {
        let text = format!("{RUN}\n{case}\n");
        let e = record_error(&text);
        assert_eq!(e, analysis_error(&text), "{case}");
        assert!(e.starts_with("test.jsonl:"), "{e}");
    }
    assert_eq!(
        record_error(&format!(
            "{RUN}\n{}\n",
            SPAN.replace(r#""output_tokens":4"#, r#""output_tokens":-4"#)
        )),
        "test.jsonl:2: field `output_tokens`: expected a non-negative whole number, found the negative number -4"
    );
}

#[test]
fn fields_the_analysis_skips_are_checked_in_whole_records() {
    let with = |extra: &str| {
        let text = format!(
            "{RUN}\n{}\n",
            SPAN.replace(
                r#""output_tokens":4"#,
                &format!(r#""output_tokens":4,{extra}"#)
            )
        );
        record_error(&text)
    };
    assert_eq!(
        with(r#""request_id":5"#),
        "test.jsonl:2: field `request_id`: expected a string, found the number 5"
    );
    let attempt = r#""attempts":[{"started_at":"2026-01-01T00:00:00Z","ended_at":"2026-01-01T00:00:02Z","tokens":4,"#;
    assert_eq!(
        with(&format!(r#"{attempt}"http_status":"200"}}]"#)),
        "test.jsonl:2: field `attempts[0].http_status`: expected a non-negative whole number, found the string \"200\""
    );
    assert_eq!(
        with(&format!(r#"{attempt}"http_status":70000}}]"#)),
        "test.jsonl:2: field `attempts[0].http_status`: 70000 is too large (at most 65535)"
    );
    assert_eq!(
        with(&format!(r#"{attempt}"connection_reused":1}}]"#)),
        "test.jsonl:2: field `attempts[0].connection_reused`: expected true or false, found the number 1"
    );
    assert_eq!(
        with(&format!(r#"{attempt}"backoff_s":-1}}]"#)),
        "test.jsonl:2: field `attempts[0].backoff_s`: -1 is not a non-negative number of seconds"
    );
    assert_eq!(
        with(r#""attempts":[{"ended_at":"2026-01-01T00:00:02Z"}]"#),
        "test.jsonl:2: field `attempts[0].started_at`: missing (required)"
    );
    // The analysis reads the same lines: it does not look at these fields.
    let ok = format!(
        "{RUN}\n{}\n",
        SPAN.replace(
            r#""output_tokens":4"#,
            r#""output_tokens":4,"request_id":5"#
        )
    );
    let mut r = Reader::new(ReadOptions::default());
    r.read_from(Path::new("test.jsonl"), Cursor::new(ok.into_bytes()))
        .unwrap();
}

#[test]
fn a_cut_off_last_line_is_ignored_with_a_warning() {
    let cut = &SPAN[..SPAN.len() / 2];
    let out = read(&format!("{RUN}\n{SPAN}\n{cut}"), ReadOptions::default());
    let lines: Vec<u64> = out.items.iter().map(|i| i.as_ref().unwrap().0).collect();
    assert_eq!(lines, [1, 2]);
    assert!(
        out.warnings[0].starts_with("test.jsonl:3: the last line is cut off"),
        "{:?}",
        out.warnings
    );
    // A complete last line without a newline is a normal record.
    let out = read(&format!("{RUN}\n{SPAN}"), ReadOptions::default());
    assert_eq!(out.items.len(), 2);
    assert!(out.warnings.iter().all(|w| !w.contains("cut off")));
}

#[test]
fn skip_invalid_counts_reasons_as_the_analysis_does() {
    let second = |s: &str| s.replace(r#""span_id":"1""#, r#""span_id":"2""#);
    let bad = [
        "{\"kind\":\"span\"".to_string(),
        SPAN.replace(r#""status":"ok""#, r#""status":"fine""#),
        SPAN.to_string(),
        second(SPAN).replace(r#""output_tokens":4"#, r#""output_tokens":"4""#),
        // A `run` record repeated with another cap (an exact repeat continues
        // the run, as a rotation's next file does).
        RUN.replace(r#""cap":2"#, r#""cap":3"#),
    ];
    let text = format!("{RUN}\n{SPAN}\n{}\n{}\n", bad.join("\n"), second(SPAN));
    let opts = ReadOptions {
        skip_invalid: true,
        ..ReadOptions::default()
    };
    let out = read(&text, opts);
    let lines: Vec<u64> = out.items.iter().map(|i| i.as_ref().unwrap().0).collect();
    assert_eq!(lines, [1, 2, 8]);
    let mut analysis = Reader::new(opts);
    analysis
        .read_from(Path::new("test.jsonl"), Cursor::new(text.into_bytes()))
        .unwrap();
    let set = analysis.finish();
    assert_eq!(out.skipped, set.skipped);
    assert_eq!(out.records, set.records);
    assert_eq!(out.skipped.values().sum::<u64>(), 5, "{:?}", out.skipped);
}

#[test]
fn several_runs_in_one_file_are_checked_run_by_run() {
    let other = |s: &str| s.replace(r#""run_id":"r""#, r#""run_id":"q""#);
    let end = r#"{"kind":"end","run_id":"r","ended_at":"2026-01-01T00:00:03Z","spans":2}"#;
    // The same span id in two runs is fine; runs interleave.
    let text = format!("{RUN}\n{}\n{SPAN}\n{}\n{end}\n", other(RUN), other(SPAN));
    let out = read(&text, ReadOptions::default());
    let runs: Vec<(u64, String)> = out
        .items
        .iter()
        .map(|i| {
            let (line, r) = i.as_ref().unwrap();
            (*line, r.run_id().to_string())
        })
        .collect();
    assert_eq!(
        runs,
        [(1, "r"), (2, "q"), (3, "r"), (4, "q"), (5, "r")].map(|(l, r)| (l, r.to_string()))
    );
    assert_eq!(
        out.warnings,
        ["run `r`: the `end` record counts 2 spans, the log has 1"]
    );
    // A run without its `run` record is warned about once the input is read.
    let out = read(&format!("{RUN}\n{}\n", other(SPAN)), ReadOptions::default());
    assert_eq!(
        out.warnings,
        ["run `q` has no `run` record (its cap and settings are unknown)"]
    );
    // A span id repeated within one run is an error, as is a second run record.
    assert_eq!(
        record_error(&format!(
            "{RUN}\n{}\n{SPAN}\n{}\n",
            other(SPAN),
            other(SPAN)
        )),
        "test.jsonl:4: field `span_id`: duplicate span id `1` in run `q`"
    );
}

#[test]
fn a_path_list_is_read_in_order_with_each_files_lines() {
    let dir = tempfile::tempdir().unwrap();
    let a = dir.path().join("a.jsonl");
    let b = dir.path().join("b.jsonl");
    std::fs::write(&a, format!("{RUN}\n{SPAN}\n")).unwrap();
    std::fs::write(
        &b,
        format!(
            "\n{}\n",
            SPAN.replace(r#""span_id":"1""#, r#""span_id":"2""#)
        ),
    )
    .unwrap();
    let items: Vec<_> = RecordReader::open([&a, &b], ReadOptions::default())
        .map(Result::unwrap)
        .map(|i| (i.file.to_path_buf(), i.line))
        .collect();
    assert_eq!(items, [(a.clone(), 1), (a.clone(), 2), (b.clone(), 2)]);
    // Runs are grouped across files: the same span id in another file is a duplicate.
    std::fs::write(&b, SPAN).unwrap();
    let last = RecordReader::open([&a, &b], ReadOptions::default())
        .last()
        .unwrap()
        .unwrap_err();
    assert_eq!(
        last.to_string(),
        format!(
            "{}:1: field `span_id`: duplicate span id `1` in run `r`",
            b.display()
        )
    );
    // A missing file ends the read with an error naming it; nothing follows an error.
    let mut r = RecordReader::open(
        [&a, &dir.path().join("none.jsonl"), &a],
        ReadOptions::default(),
    );
    assert!(r.next().unwrap().is_ok());
    assert!(r.next().unwrap().is_ok());
    assert!(matches!(r.next(), Some(Err(LogError::Io { .. }))));
    assert!(r.next().is_none());
    // An empty file is an error, as for the analysis.
    std::fs::write(&b, "").unwrap();
    let e = RecordReader::open([&b], ReadOptions::default())
        .next()
        .unwrap()
        .unwrap_err();
    assert!(matches!(e, LogError::Empty { .. }), "{e}");
}

#[test]
fn records_written_by_the_writer_read_back_equal() {
    let t = |ms: i64| Timestamp::from_unix_nanos(1_767_225_600_000_000_000 + ms * 1_000_000);
    let records = vec![
        Record::Run(RunRecord {
            run_id: "w".into(),
            schema: SCHEMA.into(),
            tool: "tpscope test".into(),
            started_at: t(0),
            target: Target {
                url: Some("http://127.0.0.1:8000/v1".into()),
                model: Some("m".into()),
                api: Some("chat".into()),
            },
            cap: Some(4),
            token_source: Some(TokenSource::Tokenizer("o200k_base".into())),
            tokenizer: Some("o200k_base".into()),
            sample_interval: Some(Duration::from_millis(250)),
            sample_heartbeat: Some(Duration::from_secs(10)),
            load: serde_json::json!({"mode": "closed", "concurrency": 4}),
            labels: BTreeMap::from([("case".into(), "round trip \"é\"".into())]),
            queue_times: tpscope_model::QueueTimes::Unmeasured,
        }),
        Record::Sample(SampleRecord {
            run_id: "w".into(),
            at: t(5),
            in_flight: 3,
            queue_depth: 1,
            cap: Some(4),
        }),
        Record::Span(Span {
            run_id: "w".into(),
            span_id: "s-1".into(),
            request_id: Some("chatcmpl-1\n".into()),
            status: Status::Ok,
            queued_at: t(0),
            admitted_at: Some(t(1)),
            first_token_at: Some(t(20)),
            last_token_at: Some(t(120)),
            released_at: t(121),
            output_tokens: 7,
            input_tokens: Some(12),
            token_source: Some(TokenSource::Chunks),
            retry_count: 1,
            retry_causes: vec![Cause::Http429],
            attempts: vec![
                Attempt {
                    first_byte_at: Some(t(2)),
                    ended_at: t(2),
                    http_status: Some(429),
                    cause: Some(Cause::Http429),
                    connection_reused: Some(false),
                    connect_time: Some(Duration::from_millis(1)),
                    backoff: Some(Duration::from_millis(5)),
                    ..Attempt::started(t(1))
                },
                Attempt {
                    first_byte_at: Some(t(15)),
                    first_token_at: Some(t(20)),
                    ended_at: t(121),
                    http_status: Some(200),
                    tokens: 7,
                    connection_reused: Some(true),
                    ..Attempt::started(t(7))
                },
            ],
            error: None,
            chunks: Some(vec![
                ChunkMark {
                    offset: Duration::ZERO,
                    tokens: 1,
                },
                ChunkMark {
                    offset: Duration::from_millis(100),
                    tokens: 6,
                },
            ]),
            // A multi-turn span's fields round-trip too.
            session_id: Some("7".into()),
            turn: Some(2),
            tokenizer_output_tokens: None,
            finish_reason: None,
        }),
        Record::Span(Span {
            run_id: "w".into(),
            span_id: "s-2".into(),
            request_id: None,
            status: Status::Error,
            queued_at: t(2),
            admitted_at: Some(t(3)),
            first_token_at: None,
            last_token_at: None,
            released_at: t(50),
            output_tokens: 0,
            input_tokens: None,
            token_source: None,
            retry_count: 0,
            retry_causes: vec![],
            attempts: vec![],
            error: Some(SpanError {
                cause: Cause::Disconnect,
                message: "stream ended without [DONE]".into(),
            }),
            chunks: None,
            session_id: None,
            turn: None,
            tokenizer_output_tokens: None,
            finish_reason: None,
        }),
        Record::End(EndRecord {
            run_id: "w".into(),
            ended_at: t(200),
            spans: 2,
            status: tpscope_model::StatusCounts {
                ok: 1,
                error: 1,
                cancelled: 0,
            },
            samples: 1,
            schedule_late_max: None,
            queued_at_stated: None,
            cut_at_stop: None,
            model: None,
        }),
    ];
    let mut w = LogWriter::new(Vec::new());
    for r in &records {
        w.write(r).unwrap();
    }
    let bytes = w.into_inner();
    let reader = RecordReader::new(
        Path::new("w.jsonl"),
        bytes.as_slice(),
        ReadOptions::default(),
    );
    let back: Vec<Record> = reader.map(|r| r.unwrap().record).collect();
    assert_eq!(back, records);
    // Written again, the bytes are the same.
    let mut w = LogWriter::new(Vec::new());
    for r in &back {
        w.write(r).unwrap();
    }
    assert_eq!(w.into_inner(), bytes);
}
