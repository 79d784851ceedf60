//! The exact gap steps against a brute-force evaluation on a fine time grid.

mod common;

use common::*;
use proptest::prelude::*;
use tpscope_analysis::{RunInput, Steps};
use tpscope_model::{Cause, Status};

/// Spans on a 1 ms grid: queued, optional admission, release. Evaluating the state
/// at the middle of every millisecond gives the exact measure.
fn brute(input: &RunInput, w0: i64, w1: i64) -> (i64, i64, i64) {
    let mut caps: Vec<(i64, u32)> = input
        .samples
        .iter()
        .filter_map(|s| {
            s.cap
                .map(|c| ((s.at.unix_nanos() - ORIGIN_NS) / 1_000_000, c))
        })
        .collect();
    caps.sort_by_key(|c| c.0);
    let (mut gap, mut backlog, mut in_flight_ms) = (0, 0, 0);
    for ms in w0..w1 {
        let mid = ORIGIN_NS * 2 + (2 * ms + 1) * 1_000_000; // doubled to keep integers
        let at = |t: tpscope_model::Timestamp| t.unix_nanos() * 2;
        let mut q = 0;
        let mut f = 0u32;
        for s in &input.spans {
            if at(s.queued_at) <= mid && mid < at(s.dequeued_at()) {
                q += 1;
            }
            if let Some(a) = s.admitted_at
                && at(a) <= mid
                && mid < at(s.released_at)
            {
                f += 1;
            }
        }
        let cap = caps
            .iter()
            .rev()
            .find(|c| c.0 <= ms)
            .map(|c| c.1)
            .or(input.run_cap());
        if q > 0 && cap.is_none_or(|c| f < c) {
            gap += 1;
        }
        if q > 0 {
            backlog += 1;
        }
        in_flight_ms += i64::from(f);
    }
    (gap, backlog, in_flight_ms)
}

fn arb_span() -> impl Strategy<Value = tpscope_analysis::SpanFacts> {
    (0i64..60, 0i64..20, 0i64..30, any::<bool>(), any::<bool>()).prop_map(
        |(q, wait, hold, admitted, ok_status)| {
            if admitted {
                let a = q + wait;
                let r = a + hold;
                if ok_status {
                    ok(q, a, a, r, r, 3)
                } else {
                    failed(q, Some(a), r, Status::Error, Cause::Http5xx)
                }
            } else {
                failed(q, None, q + wait, Status::Cancelled, Cause::Cancelled)
            }
        },
    )
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(400))]
    #[test]
    fn steps_match_brute_force(
        spans in proptest::collection::vec(arb_span(), 0..25),
        cap in proptest::option::of(1u32..5),
        cap_changes in proptest::collection::vec((0i64..100, 1u32..5), 0..4),
        w0 in 0i64..40,
        len in 0i64..80,
    ) {
        let mut inp = input(cap, spans);
        inp.samples = cap_changes.iter().map(|&(ms, c)| sample(ms, 0, 0, Some(c))).collect();
        let steps = Steps::new(&inp);
        let i = steps.integrate(t(w0), t(w0 + len));
        let (gap, backlog, in_flight) = brute(&inp, w0, w0 + len);
        prop_assert_eq!(i.gap_ns, gap * 1_000_000);
        prop_assert_eq!(i.backlog_ns, backlog * 1_000_000);
        prop_assert_eq!(i.in_flight_ns, (in_flight * 1_000_000) as f64);
    }
}

#[test]
fn ties_and_zero_length_spans_do_not_count() {
    // A releases at 10 ms exactly when B is admitted: no gap at the tie. C is
    // queued and admitted at the same instant, and holds its slot for 0 ms.
    let inp = input(
        Some(1),
        vec![
            ok(0, 0, 0, 10, 10, 1),
            ok(0, 10, 10, 20, 20, 1),
            ok(20, 20, 20, 20, 20, 1),
        ],
    );
    let i = Steps::new(&inp).integrate(t(0), t(20));
    assert_eq!(i.gap_ns, 0);
    assert_eq!(i.backlog_ns, 10_000_000);
    assert_eq!(brute(&inp, 0, 20), (0, 10, 20));
}
