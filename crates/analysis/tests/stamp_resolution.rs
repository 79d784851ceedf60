//! A stream whose tokens all arrived in one read (a buffering proxy, the simulator
//! under CPU load) once led a report with "stream TPS p50 5,000,000,000 tok/s,
//! TPOT 0 µs": first and last token lay a nanosecond apart.

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
