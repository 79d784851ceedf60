//! The readers against each other. The fast path against the general one:
//! whatever line the fast path accepts, the general path reads to the same
//! record, and the fast path accepts every valid line tpscope writes with plain
//! strings. The record reader against serde: it reads every line the general
//! path accepts, to the record serde reads from it.

use std::path::Path;
use std::time::Duration;

use proptest::prelude::*;
use tpscope_analysis::{ClientStamps, SampleFacts, SpanFacts};
use tpscope_model::{
    Attempt, Cause, HourCache, Record, SampleRecord, Span, SpanError, Status, Timestamp,
    TokenSource,
};

use super::parse::{Parsed, parse_line};
use super::scan::{Line, scan_line};
use super::{ReadOptions, RecordReader};
use crate::fast::fast_record;
use crate::scalar::Scalar;

#[derive(Debug, PartialEq)]
#[allow(clippy::large_enum_variant)] // a test's copies, spans nearly all of them
enum Owned {
    Span(
        String,
        String,
        SpanFacts,
        ClientStamps,
        Option<TokenSource>,
        Option<String>,
        Option<String>,
        Option<(Timestamp, std::time::Duration)>,
        Option<(String, std::num::NonZeroU32)>,
        Option<u64>,
    ),
    Sample(String, SampleFacts),
}

/// The general path alone; `None` for a rejected line.
fn general(text: &str) -> Option<Owned> {
    let mut line = Line::default();
    scan_line(text, &mut line).ok()?;
    let kind = match line.kind.as_ref() {
        Some(Scalar::Str(k)) => k.to_string(),
        _ => return None,
    };
    let (run_id, parsed) = parse_line(&line, &kind, None).ok()?;
    owned(run_id, parsed)
}

/// A record of either path, owned.
fn owned(run_id: &str, parsed: Parsed<'_>) -> Option<Owned> {
    match parsed {
        Parsed::Span {
            facts,
            stamps,
            source,
            span_id,
            error_message,
            request_id,
            last_attempt_at,
            session,
            tokenizer_tokens,
        } => Some(Owned::Span(
            run_id.into(),
            span_id.into_owned(),
            facts,
            stamps,
            source,
            error_message.map(|m| m.into_owned()),
            request_id.map(|m| m.into_owned()),
            last_attempt_at,
            session.map(|(id, t)| (id.into_owned(), t)),
            tokenizer_tokens,
        )),
        Parsed::Sample(f) => Some(Owned::Sample(run_id.into(), f)),
        _ => None,
    }
}

/// The fast path alone; `None` for a declined line.
fn fast(bytes: &[u8]) -> Option<Owned> {
    let (run_id, parsed) = fast_record(bytes, &mut HourCache::default())?;
    owned(run_id, parsed)
}

/// Strings as writers produce them: mostly plain, sometimes empty, escaped
/// or not ASCII.
fn text() -> impl Strategy<Value = String> {
    prop_oneof![
        6 => "[a-z0-9-]{1,12}",
        1 => Just(String::new()),
        1 => Just("007".to_string()),
        1 => "[a-z\"\\\\\n\u{e9}]{1,6}",
    ]
}

fn cause() -> impl Strategy<Value = Cause> {
    proptest::sample::select(Cause::ALL.to_vec())
}

/// An instant near 2026 (or, rarely, implausibly early), at nanosecond grain.
fn at() -> impl Strategy<Value = Timestamp> {
    prop_oneof![
        20 => (0i64..4_000_000_000_000)
            .prop_map(|ns| Timestamp::from_unix_nanos(1_767_225_600_000_000_000 + ns)),
        1 => Just(Timestamp::from_unix_nanos(5)),
    ]
}

fn attempt() -> impl Strategy<Value = Attempt> {
    (
        (
            at(),
            proptest::option::of(at()),
            proptest::option::of(at()),
            at(),
        ),
        (
            proptest::option::of(100u16..600),
            proptest::option::of(cause()),
            0u64..500,
            proptest::option::of(any::<bool>()),
            proptest::option::of(0u64..3_000_000_000),
            proptest::option::of(0u64..3_000_000_000),
        ),
        (
            proptest::option::of(at()),
            proptest::option::of(0u64..3_000_000_000),
            proptest::option::of(0u64..1_000),
            proptest::option::of(0u64..1_000),
            proptest::option::of(0u64..1_000),
            proptest::option::of(any::<bool>()),
            0u32..3,
        ),
    )
        .prop_map(
            |(
                (s, fb, ft, e),
                (http, cause, tokens, reused, connect, backoff),
                (end_at, lag, reads, traced, inexact, exact, resends),
            )| Attempt {
                started_at: s,
                first_byte_at: fb,
                first_token_at: ft,
                ended_at: e,
                http_status: http,
                cause,
                tokens,
                connection_reused: reused,
                connect_time: connect.map(Duration::from_nanos),
                backoff: backoff.map(Duration::from_nanos),
                end_at,
                client_lag: lag.map(Duration::from_nanos),
                reads,
                traced_chunks: traced,
                inexact_chunks: inexact,
                first_token_exact: exact,
                resends,
            },
        )
}

fn span() -> impl Strategy<Value = Span> {
    (
        (text(), text(), proptest::option::of(text())),
        (
            proptest::sample::select(vec![Status::Ok, Status::Error, Status::Cancelled]),
            proptest::collection::vec(at(), 5),
            any::<[bool; 3]>(),
            proptest::bool::weighted(0.8),
        ),
        (
            prop_oneof![4 => 0u64..1000, 1 => Just(200_000_000u64)],
            proptest::option::of(prop_oneof![4 => 0u64..5000, 1 => Just(u64::MAX)]),
            proptest::option::of(proptest::sample::select(vec![
                TokenSource::Usage,
                TokenSource::Chunks,
                TokenSource::Tokenizer("o200k_base".into()),
            ])),
        ),
        (
            0u32..3,
            proptest::collection::vec(cause(), 0..3),
            proptest::collection::vec(attempt(), 0..3),
            proptest::option::of((cause(), text())),
        ),
        (
            proptest::option::of(text()),
            proptest::option::of(prop_oneof![4 => 0u32..20, 1 => Just(u32::MAX)]),
            // The count check's: near the usage count, or far off.
            proptest::option::of(prop_oneof![4 => 0u64..1000, 1 => Just(u64::MAX)]),
        ),
    )
        .prop_map(
            |(
                (run_id, span_id, request_id),
                (status, mut times, present, tidy),
                (output_tokens, input_tokens, token_source),
                (retry_count, mut retry_causes, mut attempts, mut error),
                (session_id, turn, tokenizer_output_tokens),
            )| {
                let mut present = present;
                // Mostly consistent, so that many spans are valid.
                if tidy {
                    times.sort();
                    present[1] |= present[2] || status == Status::Ok;
                    present[2] |= status == Status::Ok && output_tokens > 0;
                    if status == Status::Ok {
                        error = None;
                    } else if error.is_none() {
                        error = Some((Cause::TimeoutTotal, "timed out".into()));
                    }
                    retry_causes.truncate(retry_count as usize);
                    if retry_causes.len() < retry_count as usize {
                        retry_causes.clear();
                    }
                    for a in &mut attempts {
                        a.ended_at = a.ended_at.max(a.started_at);
                    }
                }
                Span {
                    run_id,
                    span_id,
                    request_id,
                    status,
                    queued_at: times[0],
                    admitted_at: present[1].then_some(times[1]),
                    first_token_at: present[2].then_some(times[2]),
                    last_token_at: present[2].then_some(times[3]),
                    released_at: times[4],
                    output_tokens,
                    input_tokens,
                    token_source,
                    retry_count,
                    retry_causes,
                    attempts,
                    error: error.map(|(cause, message)| SpanError { cause, message }),
                    chunks: None,
                    session_id,
                    turn,
                    tokenizer_output_tokens,
                    finish_reason: (status == Status::Ok).then(|| "stop".into()),
                }
            },
        )
}

fn sample() -> impl Strategy<Value = SampleRecord> {
    (
        text(),
        at(),
        0u32..100,
        0u32..100,
        proptest::option::of(0u32..100),
    )
        .prop_map(|(run_id, at, in_flight, queue_depth, cap)| SampleRecord {
            run_id,
            at,
            in_flight,
            queue_depth,
            cap,
        })
}

fn record() -> impl Strategy<Value = Record> {
    prop_oneof![3 => span().prop_map(Record::Span), 1 => sample().prop_map(Record::Sample)]
}

fn plain(s: &str) -> bool {
    s.chars().all(|c| c >= ' ' && c != '"' && c != '\\')
}

/// Whether every string of the record is one the fast path reads.
fn all_plain(r: &Record) -> bool {
    match r {
        Record::Span(s) => {
            plain(&s.run_id)
                && plain(&s.span_id)
                && s.request_id.as_deref().is_none_or(plain)
                && s.error.as_ref().is_none_or(|e| plain(&e.message))
                && s.session_id.as_deref().is_none_or(plain)
        }
        Record::Sample(s) => plain(&s.run_id),
        _ => false,
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(3000))]

    #[test]
    fn fast_path_reads_written_lines_like_the_general_path(r in record()) {
        let line = serde_json::to_string(&r).unwrap();
        let (f, g) = (fast(line.as_bytes()), general(&line));
        if f.is_some() {
            prop_assert_eq!(&f, &g, "{}", line);
        }
        if g.is_some() && all_plain(&r) {
            prop_assert!(f.is_some(), "the fast path declined a plain line: {}", line);
        }
    }

    #[test]
    fn record_reader_reads_what_the_general_path_accepts_as_serde_does(r in record()) {
        let line = serde_json::to_string(&r).unwrap();
        let mut reader = RecordReader::new(Path::new("t"), line.as_bytes(), ReadOptions::default());
        let read = reader.next().map(|r| r.map(|lr| lr.record));
        if general(&line).is_some() {
            let expected: Record = serde_json::from_str(&line).unwrap();
            prop_assert_eq!(read.unwrap().unwrap(), expected, "{}", line);
        } else {
            prop_assert!(!matches!(read, Some(Ok(_))), "{}", line);
        }
    }

    #[test]
    fn fast_path_accepts_nothing_the_general_path_reads_otherwise(
        r in record(),
        at in any::<proptest::sample::Index>(),
        c in proptest::sample::select(br#"{}[]:,"\0123456789.eE+-Z tnulx"#.to_vec()),
        how in 0u8..3,
    ) {
        let mut b = serde_json::to_string(&r).unwrap().into_bytes();
        let i = at.index(b.len());
        match how {
            0 => b.insert(i, c),
            1 => { b.remove(i); }
            _ => b[i] = c,
        }
        if let Some(f) = fast(&b) {
            let text = std::str::from_utf8(&b).unwrap();
            prop_assert_eq!(Some(f), general(text), "{}", text);
        }
    }
}

proptest! {
    // Logs of up to 40 spans: fewer cases keep it as quick as the others.
    #![proptest_config(ProptestConfig::with_cases(300))]

    /// The count check is tallied by the analysis reader as it goes (both its
    /// paths: lines in writer order take the fast one, lines with their keys
    /// sorted the general one), and computed by `count_check` over the whole
    /// spans the record reader reads: the two agree.
    #[test]
    fn the_analysis_reader_tallies_the_count_check_as_the_record_reader_computes_it(
        spans in proptest::collection::vec((span(), any::<bool>()), 1..40),
    ) {
        let mut log = String::new();
        for (i, (s, sorted)) in spans.into_iter().enumerate() {
            let s = Span { run_id: "r".into(), span_id: (i + 1).to_string(), ..s };
            let line = if sorted {
                // serde_json's map orders keys by name: not the writer's order.
                let v: serde_json::Value = serde_json::to_value(Record::Span(s)).unwrap();
                v.to_string()
            } else {
                serde_json::to_string(&Record::Span(s)).unwrap()
            };
            log.push_str(&line);
            log.push('\n');
        }
        let opts = ReadOptions { skip_invalid: true, ..ReadOptions::default() };
        let mut reader = super::Reader::new(opts);
        let read = reader.read_from(Path::new("t"), log.as_bytes());
        let whole: Result<Vec<_>, _> =
            RecordReader::new(Path::new("t"), log.as_bytes(), opts).collect();
        prop_assert_eq!(read.is_ok(), whole.is_ok());
        let Ok(whole) = whole else { return Ok(()) };
        let spans: Vec<Span> = whole
            .into_iter()
            .filter_map(|lr| match lr.record {
                Record::Span(s) => Some(s),
                _ => None,
            })
            .collect();
        let set = reader.finish();
        let tally = set.runs.first().map(|r| r.input.count_tally).unwrap_or_default();
        prop_assert_eq!(set.runs.first().map_or(0, |r| r.input.spans.len()), spans.len());
        let mut expected = tpscope_analysis::count_check::CountTally::default();
        for s in &spans {
            expected.add(s.output_tokens, s.token_source.as_ref(), s.tokenizer_output_tokens);
        }
        prop_assert_eq!(tally, expected);
        prop_assert_eq!(
            tally.finish(Some("o200k_base")),
            tpscope_analysis::count_check::count_check(&spans, Some("o200k_base"))
        );
    }
}

/// A log as `tpscope bench` wrote it against `tpscope sim` with 429s, 500s and
/// cut streams (one retry allowed): every span and sample line takes the fast
/// path, and reads as the general path reads it.
#[test]
fn a_bench_log_with_retries_and_errors_reads_alike_on_both_paths() {
    let path = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/fixtures/bench_sim_faults.jsonl"
    );
    let text = std::fs::read_to_string(path).unwrap();
    let (mut spans, mut retried, mut failed) = (0, 0, 0);
    for line in text.lines() {
        let general = general(line);
        if line.starts_with(r#"{"kind":"run""#) || line.starts_with(r#"{"kind":"end""#) {
            assert_eq!(fast(line.as_bytes()), None);
            continue;
        }
        assert!(general.is_some(), "{line}");
        assert_eq!(fast(line.as_bytes()), general, "{line}");
        if let Some(Owned::Span(_, _, facts, ..)) = general {
            spans += 1;
            retried += usize::from(facts.retry_count > 0);
            failed += usize::from(facts.status != Status::Ok);
        }
    }
    assert_eq!((spans, retried, failed), (24, 9, 3));
}

#[test]
fn fast_path_declines_what_only_the_general_path_reads() {
    let base = r#"{"kind":"sample","run_id":"r","at":"2026-01-01T00:00:00.000000000Z","in_flight":1,"queue_depth":0}"#;
    assert!(fast(base.as_bytes()).is_some());
    for other in [
        // whitespace, reordered keys, other timestamp forms, floats, escapes
        base.replace(":1,", ": 1,"),
        base.replace(
            r#""in_flight":1,"queue_depth":0"#,
            r#""queue_depth":0,"in_flight":1"#,
        ),
        base.replace(".000000000Z", "Z"),
        base.replace(":1,", ":1.0,"),
        base.replace(r#""r""#, r#""\u0072""#),
        base.replace(":1,", ":4294967296,"),
        base.replace("2026", "1990"),
        format!("{base} "),
    ] {
        assert!(fast(other.as_bytes()).is_none(), "{other}");
    }
}

/// The fast path no longer checks a whole line as UTF-8 before reading it: a
/// string that is not UTF-8 (cut off, overlong, a lone continuation byte,
/// after ASCII or after valid text) must still decline the line, and a valid
/// one read as it is.
#[test]
fn fast_path_declines_strings_that_are_not_utf8_without_a_whole_line_check() {
    let line = |run_id: &[u8]| {
        let mut b = br#"{"kind":"sample","run_id":""#.to_vec();
        b.extend_from_slice(run_id);
        b.extend_from_slice(
            br#"","at":"2026-01-01T00:00:00.000000000Z","in_flight":1,"queue_depth":0}"#,
        );
        b
    };
    for bad in [
        &b"r\xc3"[..],
        b"\xc3",
        b"abcdefgh\xe2\x82",
        b"\xc0\xaf",
        b"\x80abc",
        "é".as_bytes().split_last().unwrap().1,
        b"\xed\xa0\x80",
        b"\xff",
    ] {
        assert!(fast(&line(bad)).is_none(), "{bad:?}");
    }
    let good = line("räksmörgås-ñ-€".as_bytes());
    let text = std::str::from_utf8(&good).unwrap();
    assert!(fast(&good).is_some());
    assert_eq!(fast(&good), general(text));
}

/// The fast path takes its keys from the model's lists: a span with every field
/// but `chunks` set (and every field of its attempt), as tpscope writes it, is read
/// by the fast path alike.
#[test]
fn fast_path_reads_a_span_with_every_field_in_the_model_order() {
    let t = |ms: i64| Timestamp::from_unix_nanos(1_767_225_600_000_000_000 + ms * 1_000_000);
    let span = Span {
        run_id: "r".into(),
        span_id: "7".into(),
        request_id: Some("req-7".into()),
        status: Status::Error,
        queued_at: t(0),
        admitted_at: Some(t(1)),
        first_token_at: Some(t(2)),
        last_token_at: Some(t(3)),
        released_at: t(4),
        output_tokens: 5,
        input_tokens: Some(6),
        token_source: Some(TokenSource::Usage),
        retry_count: 1,
        retry_causes: vec![Cause::Http429],
        attempts: vec![Attempt {
            started_at: t(0),
            first_byte_at: Some(t(1)),
            first_token_at: Some(t(2)),
            ended_at: t(3),
            end_at: Some(t(3)),
            http_status: Some(200),
            cause: Some(Cause::Disconnect),
            tokens: 5,
            connection_reused: Some(true),
            connect_time: Some(Duration::from_micros(150)),
            backoff: Some(Duration::from_millis(5)),
            client_lag: Some(Duration::from_micros(40)),
            reads: Some(3),
            traced_chunks: Some(5),
            inexact_chunks: Some(1),
            first_token_exact: Some(false),
            resends: 1,
        }],
        error: Some(SpanError {
            cause: Cause::Disconnect,
            message: "cut".into(),
        }),
        chunks: None,
        session_id: Some("3".into()),
        turn: Some(2),
        tokenizer_output_tokens: Some(5),
        finish_reason: Some("length".into()),
    };
    let line = serde_json::to_string(&Record::Span(span)).unwrap();
    let keys = Span::FIELDS.iter().chain(Attempt::FIELDS);
    for key in keys.filter(|k| **k != "chunks") {
        assert!(line.contains(&format!("\"{key}\":")), "{key} in {line}");
    }
    let f = fast(line.as_bytes());
    assert!(f.is_some(), "{line}");
    assert_eq!(f, general(&line));
}

/// Counts of reads and traced or inexact chunks above 2³² − 1 panicked the
/// fast path (a conversion unwrapped where the general path saturates): both
/// paths now read them as 2³² − 1.
#[test]
fn counts_above_u32_saturate_on_the_fast_path_as_on_the_general_one() {
    let line = concat!(
        r#"{"kind":"span","run_id":"r","span_id":"1","status":"ok","#,
        r#""queued_at":"2026-01-01T00:00:00.000000000Z","#,
        r#""admitted_at":"2026-01-01T00:00:00.000000000Z","#,
        r#""first_token_at":"2026-01-01T00:00:00.100000000Z","#,
        r#""last_token_at":"2026-01-01T00:00:01.000000000Z","#,
        r#""released_at":"2026-01-01T00:00:01.000000000Z","output_tokens":10,"#,
        r#""retry_count":0,"attempts":[{"started_at":"2026-01-01T00:00:00.000000000Z","#,
        r#""ended_at":"2026-01-01T00:00:01.000000000Z","tokens":10,"#,
        r#""reads":5000000000,"traced_chunks":4294967296,"inexact_chunks":18446744073709551615}]}"#
    );
    let general = general(line).expect("the general path reads it");
    let Owned::Span(_, _, _, stamps, ..) = &general else {
        panic!("not a span: {general:?}");
    };
    assert_eq!(
        (stamps.reads, stamps.traced_chunks, stamps.inexact_chunks),
        (u32::MAX, u32::MAX, u32::MAX)
    );
    assert_eq!(fast(line.as_bytes()), Some(general));
}
