//! Hand-made runs for every part of the ledger, ramps, overfull runs, failures,
//! and the exact sum on random span sets.

use std::time::Duration;

use proptest::prelude::*;
use tpscope_model::{Cause, Status, Timestamp};

use super::*;
use crate::input::{SampleFacts, SpanFacts};
use crate::test_support::{capped_run, ts};

const MS: i128 = 1_000_000;

/// An ok span: queued, admitted, first and last token, released (ms).
fn ok(q: i64, a: i64, f: i64, l: i64, r: i64) -> SpanFacts {
    SpanFacts::ok(ts(q), Some(ts(a)), Some(ts(f)), Some(ts(l)), ts(r), 10)
}

/// The raw tally over `[from, to)` ms, one bucket.
fn raw(input: &RunInput, from: i64, to: i64) -> Tally {
    let (w0, w1) = (ts(from).unix_nanos(), ts(to).unix_nanos());
    let grid = Grid {
        w0,
        w1,
        b: w1 - w0,
        n: 1,
    };
    tally(input, &Steps::new(input), grid, DEFAULT_HANDOFF)
}

fn ms(t: &Tally, p: Part) -> i128 {
    t.sum[p.index()] / MS
}

/// The parts add up to the slot-time (plus any in flight above the cap).
fn assert_exact(t: &Tally) {
    let total: i128 = t.sum.iter().sum();
    assert_eq!(total, t.tot.cap_ns + t.tot.above_ns, "{:?}", t.sum);
}

fn ledger_of(input: &RunInput, from: i64, to: i64) -> Capacity {
    capacity_ledger(
        input,
        &Steps::new(input),
        (ts(from), ts(to)),
        None,
        DEFAULT_HANDOFF,
        false,
    )
}

#[test]
fn an_ok_span_is_split_into_connect_first_token_wait_generating_and_post() {
    let mut input = capped_run(1);
    let mut s = ok(0, 0, 20, 100, 110);
    s.client.connect = Some(Duration::from_millis(5).into());
    input.spans.push(s);
    let t = raw(&input, 0, 110);
    assert_exact(&t);
    assert_eq!(ms(&t, Part::Connect), 5);
    assert_eq!(ms(&t, Part::FirstTokenWait), 15);
    assert_eq!(ms(&t, Part::Generating), 80);
    assert_eq!(ms(&t, Part::Post), 10);
    let c = ledger_of(&input, 0, 110);
    assert_eq!(c.slot_seconds, Some(0.11));
    assert!((c.share(Part::Generating).unwrap() - 80.0 / 110.0).abs() < 1e-12);
    assert!(c.part(Part::Connect).missing.is_none());
}

#[test]
fn retried_attempts_are_failed_time_and_the_wait_between_them_backoff() {
    let mut input = capped_run(1);
    let mut s = ok(0, 0, 60, 90, 100);
    s.retry_count = 1;
    s.retry_causes = vec![Cause::Http5xx].into();
    input.spans.push(s);
    input.last_attempts.push((0, ts(50)));
    input.retry_waits.push((0, Duration::from_millis(20)));
    let mut e = SpanFacts::ok(ts(100), Some(ts(100)), None, None, ts(130), 0);
    e.status = Status::Error;
    e.error_cause = Some(Cause::Http5xx);
    input.spans.push(e);
    let t = raw(&input, 0, 130);
    assert_exact(&t);
    assert_eq!(ms(&t, Part::Failed), 30 + 30);
    assert_eq!(ms(&t, Part::Backoff), 20);
    assert_eq!(ms(&t, Part::FirstTokenWait), 10);
    assert_eq!(ms(&t, Part::Generating), 30);
    assert_eq!(ms(&t, Part::Post), 10);
    // No attempt recorded a connect time: absent with the reason, never 0.
    let c = ledger_of(&input, 0, 130);
    assert_eq!(c.seconds(Part::Connect), None);
    assert!(c.part(Part::Connect).missing.is_some());
    assert_eq!(c.seconds(Part::Backoff), Some(0.02));
}

/// A retried span without attempt times: back-off cannot be told from failure.
#[test]
fn backoff_is_absent_when_retried_spans_carry_no_attempts() {
    let mut input = capped_run(1);
    let mut s = ok(0, 0, 60, 90, 100);
    s.retry_count = 2;
    input.spans.push(s);
    let c = ledger_of(&input, 0, 100);
    assert!(c.part(Part::Backoff).missing.is_some());
    assert_eq!(c.seconds(Part::Generating), Some(0.03));
}

#[test]
fn free_slots_are_handoff_held_back_or_no_demand() {
    let mut input = capped_run(1);
    input.spans.extend([
        ok(0, 0, 10, 90, 100),
        // Waiting since 0: refilled 5 ms after the slot freed (a hand-off).
        ok(0, 105, 110, 190, 200),
        // Waiting since 0: refilled 50 ms after the slot freed (held back).
        ok(0, 250, 260, 290, 300),
        // Nothing waited from 300 to 400.
        ok(400, 400, 410, 490, 500),
    ]);
    let t = raw(&input, 0, 500);
    assert_exact(&t);
    assert_eq!(ms(&t, Part::Handoff), 5);
    assert_eq!(ms(&t, Part::HeldBack), 50);
    assert_eq!(ms(&t, Part::NoDemand), 100);
    // The gap is the steps': hand-off + held back = gap time × free slots.
    let gap = Steps::new(&input).integrate(ts(0), ts(500)).gap_ns as i128;
    assert_eq!(
        gap,
        t.sum[Part::Handoff.index()] + t.sum[Part::HeldBack.index()]
    );
}

/// Two slots freed at 10 and 20 ms while work waited, refilled at 25 and 26:
/// first in, first out, the slot freed at 10 waited 15 ms (held back) and the
/// one freed at 20 waited 6 (a hand-off). Last in, first out would say 5 and 16.
#[test]
fn freed_slots_are_matched_to_admissions_first_in_first_out() {
    let mut input = capped_run(2);
    input.spans.extend([
        ok(0, 0, 1, 9, 10),
        ok(0, 0, 1, 19, 20),
        ok(0, 25, 30, 90, 100),
        ok(0, 26, 30, 90, 100),
    ]);
    let t = raw(&input, 0, 100);
    assert_exact(&t);
    assert_eq!(ms(&t, Part::HeldBack), 15);
    assert_eq!(ms(&t, Part::Handoff), 6);
}

/// A slot free for long with nothing waiting, then work arrives and is taken
/// at once: the refill is timed from when the work began to wait.
#[test]
fn a_slot_idle_without_demand_is_timed_from_when_work_began_to_wait() {
    let mut input = capped_run(1);
    input
        .spans
        .extend([ok(0, 0, 1, 9, 10), ok(500, 503, 510, 590, 600)]);
    let t = raw(&input, 0, 600);
    assert_exact(&t);
    assert_eq!(ms(&t, Part::NoDemand), 490);
    assert_eq!(ms(&t, Part::Handoff), 3);
    assert_eq!(ms(&t, Part::HeldBack), 0);
}

/// A ramp: the cap goes from 1 to 3 at 50 ms (a sample states it); the new
/// slots are free with nothing waiting.
#[test]
fn a_changing_cap_is_followed() {
    let mut input = capped_run(1);
    input.spans.push(ok(0, 0, 10, 90, 100));
    input.samples.push(SampleFacts {
        at: ts(50),
        in_flight: 1,
        queue_depth: 0,
        cap: Some(3),
    });
    let t = raw(&input, 0, 100);
    assert_exact(&t);
    assert_eq!(t.tot.cap_ns, (50 + 3 * 50) * MS);
    assert_eq!(ms(&t, Part::NoDemand), 100);
    // Cut back to 1 at 70 ms: the cut closes free slots, not spans.
    input.samples.push(SampleFacts {
        at: ts(70),
        in_flight: 1,
        queue_depth: 0,
        cap: Some(1),
    });
    let t = raw(&input, 0, 100);
    assert_exact(&t);
    assert_eq!(ms(&t, Part::NoDemand), 40);
}

#[test]
fn in_flight_above_the_cap_is_counted_and_named() {
    let mut input = capped_run(1);
    input
        .spans
        .extend([ok(0, 0, 10, 90, 100), ok(0, 0, 10, 90, 100)]);
    let t = raw(&input, 0, 100);
    assert_exact(&t);
    assert_eq!(t.tot.above_ns, 100 * MS);
    let c = ledger_of(&input, 0, 100);
    assert_eq!(c.slot_seconds, Some(0.1));
    assert_eq!(c.above_cap_slot_seconds, Some(0.1));
    assert_eq!(c.seconds(Part::Generating), Some(0.16));
}

#[test]
fn an_uncapped_run_knows_its_busy_parts_only() {
    let mut input = capped_run(1);
    input.run.as_mut().unwrap().cap = None;
    input.spans.push(ok(0, 0, 10, 90, 100));
    let c = ledger_of(&input, 0, 100);
    assert_eq!(c.slot_seconds, None);
    assert_eq!(c.seconds(Part::Generating), Some(0.08));
    assert_eq!(c.share(Part::Generating), None);
    for p in [Part::Handoff, Part::HeldBack, Part::NoDemand] {
        assert!(c.part(p).missing.is_some() && c.seconds(p).is_none());
    }
}

#[test]
fn without_queue_times_the_free_parts_are_absent() {
    let mut input = capped_run(2);
    input.spans.push(ok(0, 0, 10, 90, 100));
    let c = capacity_ledger(
        &input,
        &Steps::new(&input),
        (ts(0), ts(100)),
        None,
        DEFAULT_HANDOFF,
        true,
    );
    assert!(c.part(Part::NoDemand).missing.is_some());
    assert_eq!(c.seconds(Part::Generating), Some(0.08));
    let json = serde_json::to_value(&c).unwrap();
    assert!(json["parts"]["no_demand"]["slot_seconds"].is_null());
    assert!(json["parts"]["no_demand"]["missing"].is_string());
    assert_eq!(json["handoff_threshold_s"], 0.01);
}

/// Waves of two: the slot freed at 10 waits for the wave's end at 100.
/// Per 40 ms bucket, the held-back time lies where it happened, and the
/// buckets add up to the window's ledger.
#[test]
fn buckets_cut_each_part_where_it_happened() {
    let mut input = capped_run(2);
    input.spans.extend([
        ok(0, 0, 1, 9, 10),
        ok(0, 0, 1, 99, 100),
        ok(0, 100, 101, 119, 120),
        ok(0, 100, 101, 119, 120),
    ]);
    let c = capacity_ledger(
        &input,
        &Steps::new(&input),
        (ts(0), ts(120)),
        Some((Duration::from_millis(40), 3)),
        DEFAULT_HANDOFF,
        false,
    );
    let b = c.buckets.as_ref().unwrap();
    let held = |k: usize| (b[k][Part::HeldBack.index()] * 1e3).round();
    assert_eq!((held(0), held(1), held(2)), (30.0, 40.0, 20.0));
    for p in Part::ALL {
        let sum: f64 = b.iter().map(|row| row[p.index()]).sum();
        let whole = c.seconds(p).unwrap_or(0.0);
        assert!((sum - whole).abs() < 1e-12, "{p:?}");
    }
    let json = serde_json::to_value(&c).unwrap();
    assert_eq!(json["buckets"]["held_back"].as_array().unwrap().len(), 3);
}

/// The window clips every part: only `[50, 150)` of a 0–200 ms span counts.
#[test]
fn parts_are_clipped_to_the_window() {
    let mut input = capped_run(1);
    input.spans.push(ok(0, 0, 100, 180, 200));
    let t = raw(&input, 50, 150);
    assert_exact(&t);
    assert_eq!(ms(&t, Part::FirstTokenWait), 50);
    assert_eq!(ms(&t, Part::Generating), 50);
}

fn span(q: i64, a: Option<i64>, f: i64, l: i64, r: i64, status: u8) -> SpanFacts {
    let t = |ms: i64| Timestamp::from_unix_nanos(ms * 1_000_000 + 7);
    let mut s = SpanFacts::ok(t(q), a.map(t), Some(t(f)), Some(t(l)), t(r), 3);
    match status {
        0 => {}
        1 => {
            s.status = Status::Error;
            s.error_cause = Some(Cause::Http5xx);
        }
        _ => s.status = Status::Cancelled,
    }
    s.client.connect = (f % 3 == 0).then(|| Duration::from_micros(1500).into());
    s
}

proptest! {
    /// The sum holds on any span set, caps changing, out-of-order stamps,
    /// retries and spans above the cap included, per bucket and in total.
    #[test]
    fn the_parts_add_up_to_the_slot_time_exactly(
        spans in proptest::collection::vec(
            (0i64..60, proptest::option::of(0i64..20), -5i64..40, -5i64..40, 0i64..40, 0u8..3,
             proptest::option::of((0i64..30, 0u64..20_000_000))),
            0..25,
        ),
        caps in proptest::collection::vec((-5i64..120, 1u32..5), 0..4),
        base in 1u32..4,
        window in (-10i64..60, 1i64..150),
        buckets in 1usize..7,
    ) {
        let mut input = capped_run(base);
        for (q, wait, f, l, hold, st, retry) in spans {
            let a = wait.map(|w| q + w);
            let start = a.unwrap_or(q);
            let i = input.spans.len();
            input.spans.push(span(q, a, start + f, start + l, start + hold, st));
            if let Some((at, between)) = retry {
                input.spans[i].retry_count = 1;
                input.last_attempts.push((i, Timestamp::from_unix_nanos((start + at) * 1_000_000)));
                input.retry_waits.push((i, Duration::from_nanos(between)));
            }
        }
        input.samples = caps
            .iter()
            .map(|&(at, cap)| SampleFacts {
                at: Timestamp::from_unix_nanos(at * 1_000_000),
                in_flight: 0,
                queue_depth: 0,
                cap: Some(cap),
            })
            .collect();
        let (w0, w1) = (window.0 * 1_000_000, (window.0 + window.1) * 1_000_000);
        let n = buckets;
        let b = ((w1 - w0) + n as i64 - 1) / n as i64;
        let grid = Grid { w0, w1, b, n };
        let steps = Steps::new(&input);
        let t = tally(&input, &steps, grid, DEFAULT_HANDOFF);
        prop_assert_eq!(t.tot.uncapped_ns, 0);
        let total: i128 = t.sum.iter().sum();
        prop_assert_eq!(total, t.tot.cap_ns + t.tot.above_ns);
        // Free parts are the steps' free slot-time; hand-off and held back
        // its gap.
        let integ = steps.integrate(Timestamp::from_unix_nanos(w0), Timestamp::from_unix_nanos(w1));
        // The ledger's own pass gives the idle stage the same integrals.
        prop_assert_eq!(t.tot.integrals, integ);
        prop_assert!((t.tot.cap_ns as f64 - integ.cap_ns).abs() < 1.0);
        let busy: i128 = Part::ALL.iter().filter(|p| !p.is_free()).map(|p| t.sum[p.index()]).sum();
        prop_assert!((busy as f64 - integ.in_flight_ns).abs() < 1.0);
        for row in &t.acc {
            prop_assert!(row.iter().all(|&x| x >= 0));
        }
    }
}

/// Waves of two through two slots: the held-back slot-time is named as
/// blocked orchestration, with how long and how many slots at once.
#[test]
fn held_back_time_is_named_blocked_orchestration() {
    let mut input = capped_run(2);
    input.spans.extend([
        ok(0, 0, 1, 9, 10),
        ok(0, 0, 1, 99, 100),
        ok(0, 100, 101, 119, 120),
        ok(0, 100, 101, 189, 200),
    ]);
    let c = ledger_of(&input, 0, 200);
    let first = &c.causes[0];
    assert_eq!(first.cause, "blocked_orchestration");
    assert!(
        first.sentence.contains("0.090 s at a time"),
        "{}",
        first.sentence
    );
    assert!(
        first.sentence.contains("1.0 slots at once"),
        "{}",
        first.sentence
    );
    let r = c.refills.as_ref().unwrap();
    assert_eq!(r.held_back.count, 1);
}

#[test]
fn failed_attempts_and_backoff_are_named_failures() {
    let mut input = capped_run(1);
    let mut s = ok(0, 0, 60, 90, 100);
    s.retry_count = 1;
    s.wasted_tokens = 7;
    input.spans.push(s);
    input.last_attempts.push((0, ts(50)));
    input.retry_waits.push((0, Duration::from_millis(20)));
    let c = ledger_of(&input, 0, 100);
    let f = c.causes.iter().find(|c| c.cause == "failures").unwrap();
    assert!((f.share - 0.5).abs() < 1e-9);
    assert!(f.sentence.contains("7 tokens wasted"), "{}", f.sentence);
    // Nothing was free: no orchestration cause.
    assert!(c.causes.iter().all(|c| c.cause != "blocked_orchestration"));
}

#[test]
fn a_server_slow_to_end_its_streams_is_a_stream_tail_not_a_downstream_stall() {
    // What broke: against real vLLM the time after the last token (its usage
    // chunk and end marker came ~33 ms later) was named a downstream stall and
    // the advice was to release slots before post-processing. Here the end
    // marker arrives 30 ms after the last token, the release 1 ms after it.
    let mut input = capped_run(1);
    let mut s = ok(0, 0, 10, 69, 100);
    s.client.end_at = Some(ts(99));
    input.spans.push(s);
    let c = ledger_of(&input, 0, 100);
    let tail = c.causes.iter().find(|c| c.cause == "stream_tail").unwrap();
    assert!((tail.share - 0.30).abs() < 1e-9, "{}", tail.share);
    assert!(
        tail.sentence.contains("30.0 ms a request"),
        "{}",
        tail.sentence
    );
    // The client's own 1 ms is below the noticeable share: not named.
    assert!(c.causes.iter().all(|c| c.cause != "downstream_stalls"));
    // Without the end marker's arrival the whole post time is the client's.
    input.spans[0].client.end_at = None;
    let c = ledger_of(&input, 0, 100);
    assert!(c.causes.iter().all(|c| c.cause != "stream_tail"));
    let d = c
        .causes
        .iter()
        .find(|c| c.cause == "downstream_stalls")
        .unwrap();
    assert!((d.share - 0.31).abs() < 1e-9, "{}", d.share);
}

/// A million spans (a closed loop of 64 slots with varied holds, retries and
/// failures, the cap changing twice): the parts still add up exactly.
#[test]
fn the_sum_holds_on_a_million_spans() {
    let mut input = capped_run(64);
    let mut seed = 0x9E37_79B9_7F4A_7C15u64;
    let mut next = || {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        seed
    };
    let mut free_at = vec![0i64; 64];
    for i in 0..1_000_000usize {
        let slot = i % 64;
        let q = (i as i64 / 64) * 3;
        let a = free_at[slot].max(q) + (next() % 4) as i64;
        let hold = 5 + (next() % 400) as i64;
        let mut s = SpanFacts::ok(
            Timestamp::from_unix_nanos(q * 1_000_000),
            Some(Timestamp::from_unix_nanos(a * 1_000_000)),
            Some(Timestamp::from_unix_nanos((a + 2) * 1_000_000)),
            Some(Timestamp::from_unix_nanos((a + hold - 1) * 1_000_000)),
            Timestamp::from_unix_nanos((a + hold) * 1_000_000),
            10,
        );
        if next() % 100 == 0 {
            s.status = Status::Error;
        }
        if next() % 200 == 0 {
            s.retry_count = 1;
            input
                .last_attempts
                .push((i, Timestamp::from_unix_nanos((a + 1) * 1_000_000)));
            input.retry_waits.push((i, Duration::from_micros(500)));
        }
        free_at[slot] = a + hold;
        input.spans.push(s);
    }
    for (at, cap) in [(1_000_000i64, 48u32), (2_000_000, 64)] {
        input.samples.push(SampleFacts {
            at: Timestamp::from_unix_nanos(at * 1_000_000),
            in_flight: 0,
            queue_depth: 0,
            cap: Some(cap),
        });
    }
    let steps = Steps::new(&input);
    let end = input.spans.iter().map(|s| s.released_at).max().unwrap();
    let (w0, w1) = (0, end.unix_nanos());
    let t = tally(
        &input,
        &steps,
        Grid {
            w0,
            w1,
            b: w1 - w0,
            n: 1,
        },
        DEFAULT_HANDOFF,
    );
    let total: i128 = t.sum.iter().sum();
    assert_eq!(total, t.tot.cap_ns + t.tot.above_ns);
    assert!(t.sum[Part::Generating.index()] > 0 && t.sum[Part::Failed.index()] > 0);
}
