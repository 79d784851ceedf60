//! The public recording API end to end: a hand-driven pipeline written with the
//! `Recorder`, read back by the log's readers and the analysis.

mod common;

use std::collections::BTreeSet;
use std::thread::sleep;
use std::time::Duration;

use common::{by_id, gap_oracle, read, report};
use tpscope_model::{Status, TokenSource};
use tpscope_record::{Cause, OpenMode, RecordError, Recorder, RunInfo, Usage};

fn ms(n: u64) {
    sleep(Duration::from_millis(n));
}

#[test]
fn a_hand_driven_pipeline_reads_back_with_its_spans_attempts_and_gap() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("spans.jsonl");
    let rec = Recorder::create(&path, RunInfo::new().cap(2).label("job", "eval")).unwrap();
    let a = rec.queued("a").admitted();
    ms(20);
    // One slot idle while `b` waits: a gap until it is admitted.
    let b = rec.queued("b");
    ms(30);
    let b = b.admitted();
    a.first_token();
    a.tokens(3);
    a.tokens(2);
    a.finish_ok(Usage::new(5, Some(7)));
    b.tokens(1);
    b.retry(Cause::Http429);
    b.tokens(4);
    b.finish_ok(None);
    rec.queued("c")
        .admitted()
        .finish_err(Cause::Http5xx, "upstream said 503");
    drop(rec.queued("d"));
    let e = rec.queued("e").admitted();
    e.tokens(2);
    drop(e);
    let closed = rec.close().unwrap();
    assert_eq!(closed.unfinished, 0);
    assert_eq!(
        (
            closed.counts.spans,
            closed.counts.status.ok,
            closed.counts.status.error
        ),
        (5, 2, 1)
    );
    assert_eq!(closed.counts.status.cancelled, 2);

    let log = read(&path);
    assert!(log.warnings.is_empty(), "{:?}", log.warnings);
    assert_eq!(log.runs.len(), 1);
    assert_eq!(log.runs[0].cap, Some(2));
    assert_eq!(log.runs[0].labels["job"], "eval");
    assert_eq!(log.runs[0].sample_interval, Some(Duration::from_millis(10)));
    assert_eq!(log.ends.len(), 1);
    assert_eq!(log.ends[0].spans, 5);
    let ids: Vec<&str> = log.spans.iter().map(|s| s.span_id.as_str()).collect();
    assert_eq!(ids, ["1", "2", "3", "4", "5"], "numbered in release order");
    for s in &log.spans {
        s.validate().unwrap();
    }

    let a = by_id(&log, "a");
    assert_eq!(a.status, Status::Ok);
    assert_eq!((a.output_tokens, a.input_tokens), (5, Some(7)));
    assert_eq!(a.token_source, Some(TokenSource::Usage));
    assert_eq!(a.attempts.len(), 1);
    assert_eq!(a.attempts[0].started_at, a.admitted_at.unwrap());
    assert!(a.first_token_at.unwrap() <= a.last_token_at.unwrap());
    assert_eq!(a.attempts[0].ended_at, a.released_at);

    let b = by_id(&log, "b");
    assert_eq!(b.status, Status::Ok);
    assert_eq!(
        (b.retry_count, b.retry_causes.clone()),
        (1, vec![Cause::Http429])
    );
    assert_eq!(b.attempts.len(), 2);
    assert_eq!(b.attempts[0].cause, Some(Cause::Http429));
    assert_eq!(
        b.attempts[0].tokens, 1,
        "the failed attempt's tokens are kept"
    );
    assert_eq!(b.attempts[1].started_at, b.attempts[0].ended_at);
    assert_eq!(
        (b.output_tokens, b.token_source.clone()),
        (4, Some(TokenSource::Chunks))
    );
    assert_eq!(b.first_token_at, b.attempts[1].first_token_at);
    assert!(b.admitted_at.unwrap() > b.queued_at);

    let c = by_id(&log, "c");
    assert_eq!(c.status, Status::Error);
    let err = c.error.as_ref().unwrap();
    assert_eq!(
        (err.cause, err.message.as_str()),
        (Cause::Http5xx, "upstream said 503")
    );

    let d = by_id(&log, "d");
    assert_eq!(d.status, Status::Cancelled);
    assert!(d.admitted_at.is_none() && d.attempts.is_empty());
    assert_eq!(d.error.as_ref().unwrap().cause, Cause::Cancelled);

    let e = by_id(&log, "e");
    assert_eq!(e.status, Status::Cancelled);
    assert_eq!(e.attempts.len(), 1);
    assert_eq!(e.attempts[0].tokens, 2);
    assert_eq!(
        e.error.as_ref().unwrap().message,
        "dropped without finishing"
    );

    let r = report(&path);
    assert_eq!(
        (
            r.counts.status.ok,
            r.counts.status.error,
            r.counts.status.cancelled
        ),
        (2, 1, 2)
    );
    assert_eq!(r.counts.retries, 1);
    assert_eq!(r.counts.wasted_tokens, 1 + 2);
    let gap = r.gap_fraction.unwrap();
    assert!(gap > 0.0, "b waited with a slot free");
    assert!(
        (gap - gap_oracle(&log)).abs() < 1e-9,
        "{gap} vs {}",
        gap_oracle(&log)
    );
    assert!(
        r.gap_fraction_sampled.is_some(),
        "the recorder sampled itself"
    );
    assert!(
        log.samples
            .iter()
            .all(|s| s.cap == Some(2) && s.in_flight <= 2)
    );
}

#[test]
fn set_cap_is_recorded_and_the_gap_follows_it() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("spans.jsonl");
    let rec = Recorder::create(&path, RunInfo::new().cap(1)).unwrap();
    let a = rec.queued("a").admitted();
    // At the cap: `b` waits, but no slot is idle.
    let b = rec.queued("b");
    ms(30);
    rec.set_cap(2);
    // Now a slot is idle while `b` waits.
    ms(30);
    let b = b.admitted();
    a.finish_ok(None);
    b.finish_ok(None);
    rec.close().unwrap();

    let log = read(&path);
    let raised = log
        .samples
        .iter()
        .find(|s| s.cap == Some(2))
        .expect("a sample states the new cap");
    let b = by_id(&log, "b");
    assert!(b.queued_at < raised.at && raised.at < b.admitted_at.unwrap());
    let r = report(&path);
    let gap = r.gap_fraction.unwrap();
    assert!(
        (gap - gap_oracle(&log)).abs() < 1e-9,
        "{gap} vs {}",
        gap_oracle(&log)
    );
    // Only the time after the raise (and the instants between a's stamps) is a gap.
    let w = by_id(&log, "a").queued_at;
    let total = b.released_at.since(w).unwrap().as_nanos() as f64;
    let after_raise = b.admitted_at.unwrap().since(raised.at).unwrap().as_nanos() as f64;
    assert!(gap >= after_raise / total - 1e-9);
    assert!(
        gap < b
            .admitted_at
            .unwrap()
            .since(b.queued_at)
            .unwrap()
            .as_nanos() as f64
            / total
    );
}

#[test]
fn several_threads_share_one_recorder() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("spans.jsonl");
    let rec = Recorder::create(&path, RunInfo::new().cap(4)).unwrap();
    std::thread::scope(|s| {
        for t in 0..4 {
            let rec = &rec;
            s.spawn(move || {
                for i in 0..250 {
                    let req = rec.queued(format!("{t}-{i}")).admitted();
                    req.tokens(1);
                    if i % 10 == 0 {
                        req.retry(Cause::TimeoutFirstToken);
                    }
                    req.tokens(2);
                    req.finish_ok(None);
                }
            });
        }
    });
    let closed = rec.close().unwrap();
    assert_eq!((closed.counts.spans, closed.counts.status.ok), (1000, 1000));
    let log = read(&path);
    let span_ids: BTreeSet<u64> = log
        .spans
        .iter()
        .map(|s| s.span_id.parse().unwrap())
        .collect();
    assert_eq!(span_ids, (1..=1000).collect());
    let ids: BTreeSet<&str> = log
        .spans
        .iter()
        .filter_map(|s| s.request_id.as_deref())
        .collect();
    assert_eq!(ids.len(), 1000);
    assert_eq!(log.spans.iter().map(|s| s.retry_count).sum::<u32>(), 100);
    for s in &log.spans {
        // A retried request counts its second attempt's 2 tokens, the others 1 + 2.
        assert_eq!(s.output_tokens, if s.retry_count == 1 { 2 } else { 3 });
    }
    assert!(
        log.samples
            .iter()
            .all(|s| s.in_flight <= 4 && s.queue_depth <= 4)
    );
    assert_eq!(
        log.samples.last().map(|s| (s.in_flight, s.queue_depth)),
        Some((0, 0))
    );
    let r = report(&path);
    assert_eq!(r.counts.retries, 100);
    let gap = r.gap_fraction.unwrap();
    assert!(
        (gap - gap_oracle(&log)).abs() < 1e-9,
        "{gap} vs {}",
        gap_oracle(&log)
    );
}

#[test]
fn an_existing_file_is_never_truncated() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("spans.jsonl");
    std::fs::write(&path, "precious\n").unwrap();
    let err = Recorder::create(&path, RunInfo::new())
        .err()
        .expect("refused");
    assert!(matches!(err, RecordError::Exists { .. }));
    let msg = err.to_string();
    assert!(
        msg.contains(&path.display().to_string()) && msg.contains("already exists"),
        "{msg}"
    );
    assert_eq!(std::fs::read_to_string(&path).unwrap(), "precious\n");

    let rec = Recorder::open(&path, RunInfo::new(), OpenMode::Overwrite).unwrap();
    rec.queued("x").admitted().finish_ok(None);
    rec.close().unwrap();
    assert_eq!(read(&path).spans.len(), 1, "overwritten only when asked");
}

#[test]
fn append_adds_a_run_and_refuses_a_cut_off_file() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("spans.jsonl");
    for _ in 0..2 {
        let rec = Recorder::open(&path, RunInfo::new(), OpenMode::Append).unwrap();
        rec.queued("x").admitted().finish_ok(None);
        rec.close().unwrap();
    }
    let log = read(&path);
    assert_eq!((log.runs.len(), log.spans.len(), log.ends.len()), (2, 2, 2));

    let cut = dir.path().join("cut.jsonl");
    std::fs::write(&cut, "{\"kind\":\"run\"").unwrap();
    let err = Recorder::open(&cut, RunInfo::new(), OpenMode::Append)
        .err()
        .expect("refused");
    assert!(matches!(err, RecordError::CutOff { .. }), "{err}");
}

#[test]
fn dropping_the_recorder_ends_the_run() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("spans.jsonl");
    let rec = Recorder::create(&path, RunInfo::new()).unwrap();
    let req = rec.queued("late").admitted();
    rec.queued("x").admitted().finish_ok(None);
    drop(req);
    drop(rec);
    let log = read(&path);
    assert_eq!(log.ends.len(), 1);
    assert_eq!(log.ends[0].spans, 2);
    assert_eq!(by_id(&log, "late").status, Status::Cancelled);
}

#[test]
fn an_impossible_count_becomes_an_error_span_not_an_unreadable_log() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("spans.jsonl");
    let rec = Recorder::create(&path, RunInfo::new()).unwrap();
    rec.queued("huge")
        .admitted()
        .finish_ok(Usage::new(u64::MAX, None));
    rec.close().unwrap();
    let log = read(&path);
    let s = by_id(&log, "huge");
    assert_eq!(s.status, Status::Error);
    assert_eq!(s.error.as_ref().unwrap().cause, Cause::Malformed);
    assert!(s.error.as_ref().unwrap().message.contains("output_tokens"));
    report(&path);
}

#[test]
fn a_reply_that_arrived_at_once_has_its_first_token_at_the_finish() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("spans.jsonl");
    let rec = Recorder::create(&path, RunInfo::new()).unwrap();
    rec.queued("plain")
        .admitted()
        .finish_ok(Usage::new(9, None));
    rec.close().unwrap();
    let log = read(&path);
    let s = by_id(&log, "plain");
    assert_eq!(s.status, Status::Ok);
    assert_eq!(s.first_token_at, Some(s.released_at));
    assert_eq!(s.last_token_at, Some(s.released_at));
}

#[test]
fn the_recorder_is_send_and_sync() {
    fn check<T: Send + Sync>() {}
    fn send<T: Send>() {}
    check::<Recorder>();
    send::<tpscope_record::Queued>();
    send::<tpscope_record::InFlight>();
}

/// The recording library's log has a capacity ledger: the slot `set_cap` opened
/// while `b` waited is held back, and the parts add up to the slot-time.
#[test]
fn a_library_recording_has_a_ledger_whose_parts_add_up() {
    use tpscope_analysis::ledger::Part;
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("spans.jsonl");
    let rec = Recorder::create(&path, RunInfo::new().cap(1)).unwrap();
    let a = rec.queued("a").admitted();
    let b = rec.queued("b");
    ms(5);
    rec.set_cap(2);
    ms(40);
    let b = b.admitted();
    a.finish_ok(None);
    b.finish_ok(None);
    rec.close().unwrap();

    let log = read(&path);
    let raised = log.samples.iter().find(|s| s.cap == Some(2)).unwrap().at;
    let b = by_id(&log, "b");
    let r = report(&path);
    let c = r.capacity.as_ref().expect("a ledger");
    let held = c.seconds(Part::HeldBack).unwrap();
    let waited = b.admitted_at.unwrap().since(raised).unwrap().as_secs_f64();
    assert!((held - waited).abs() < 1e-6, "{held} vs {waited}");
    let total: f64 = c.parts.iter().filter_map(|p| p.slot_seconds).sum();
    let slot = c.slot_seconds.unwrap();
    assert!((total - slot).abs() < 1e-6, "{total} vs {slot}");
    assert_eq!(c.causes[0].cause, "blocked_orchestration");
}
