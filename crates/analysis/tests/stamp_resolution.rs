//! Figures that were absurd at the edges of what a log can say. A stream whose
//! tokens all arrived in one read (a buffering proxy, the simulator under CPU load)
//! once led a report with "stream TPS p50 5,000,000,000 tok/s, TPOT 0 µs": first
//! and last token lay a nanosecond apart. And microseconds of backlog read as "gap
//! 100 % of backlog".

mod common;

use common::*;
use tpscope_analysis::metrics::{STAMP_RESOLUTION, collapsed_stream};
use tpscope_analysis::{Options, analyze};
use tpscope_model::Timestamp;

fn plus_nanos(t: Timestamp, ns: i64) -> Timestamp {
    Timestamp::from_unix_nanos(t.unix_nanos() + ns)
}

#[test]
fn tokens_a_nanosecond_apart_gave_five_billion_tokens_per_second() {
    let mut one_read = ok(0, 0, 10, 10, 20, 5);
    one_read.last_token_at = Some(plus_nanos(one_read.first_token_at.unwrap(), 1));
    let mut at_resolution = ok(0, 0, 10, 10, 20, 5);
    at_resolution.last_token_at = Some(plus_nanos(
        at_resolution.first_token_at.unwrap(),
        STAMP_RESOLUTION.as_nanos() as i64,
    ));
    let normal = ok(0, 0, 10, 1010, 1020, 11);
    assert!(collapsed_stream(&one_read));
    assert!(!collapsed_stream(&at_resolution));
    assert!(!collapsed_stream(&normal));
    let r = analyze(
        &input(Some(3), vec![one_read, at_resolution, normal]),
        &Options::default(),
    );
    // The one-read span is absent with a reason; the others are counted.
    assert_eq!(r.distributions.stream_tps.count, 2);
    assert_eq!(r.missing["stream_tps"]["zero_stream_time"], 1);
    assert_eq!(r.missing["tpot"]["zero_stream_time"], 1);
    assert_eq!(r.missing["decode_tps"]["zero_stream_time"], 1);
    assert_eq!(r.conventional.tpot.count, 2);
    // The quality section counts it.
    assert_eq!(r.measurement_quality.collapsed_streams, 1);
}

#[test]
fn a_single_token_span_is_not_a_collapsed_stream() {
    let single = ok(0, 0, 10, 10, 20, 1);
    assert!(!collapsed_stream(&single));
    let r = analyze(&input(Some(1), vec![single]), &Options::default());
    assert_eq!(r.measurement_quality.collapsed_streams, 0);
    assert_eq!(r.missing["tpot"]["single_token"], 1);
}

/// An open loop's requests waited microseconds each for the client to admit them,
/// and the report said the gap was 100 % of the backlog.
#[test]
fn gap_fraction_of_backlog_was_100_percent_without_backlog() {
    let mut spans = Vec::new();
    for i in 0..10 {
        let mut s = ok(
            i * 200,
            i * 200,
            i * 200 + 10,
            i * 200 + 50,
            i * 200 + 60,
            5,
        );
        // Admitted 7 µs after it was queued, a slot free all along.
        s.admitted_at = Some(plus_nanos(s.queued_at, 7_000));
        spans.push(s);
    }
    let r = analyze(&input(Some(4), spans), &Options::default());
    assert!(r.idle.backlog_time.unwrap() > std::time::Duration::ZERO);
    assert_eq!(r.gap_fraction_of_backlog, None);
    // Real backlog: two requests behind a cap of one for most of the run.
    let waiting = vec![ok(0, 0, 10, 900, 1000, 5), ok(0, 1000, 1010, 1900, 2000, 5)];
    let r = analyze(&input(Some(1), waiting), &Options::default());
    assert_eq!(r.gap_fraction_of_backlog, Some(0.0));
}
