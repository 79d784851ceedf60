//! Every metric on hand-made spans against a hand-computed answer.

mod common;

use std::time::Duration;

use common::*;
use tpscope_analysis::{Options, Prices, WindowKind, WindowSpec, analyze};
use tpscope_model::{Cause, ChunkMark, Status};

fn secs(d: Option<Duration>) -> f64 {
    d.expect("present").as_secs_f64()
}

#[test]
fn two_spans_behind_a_cap_of_one() {
    // A: queued 0, admitted 0, tokens 1 s..3 s, released 3 s, 10 tokens.
    // B: queued 0, waits for A's slot, admitted 3 s, tokens 4..5 s, released 6 s, 5 tokens.
    let input = input(
        Some(1),
        vec![
            ok(0, 0, 1000, 3000, 3000, 10),
            ok(0, 3000, 4000, 5000, 6000, 5),
        ],
    );
    let r = analyze(&input, &Options::default());
    let w = r.window.unwrap();
    assert_eq!(w.kind, WindowKind::Full);
    assert_eq!(w.duration, Duration::from_secs(6));
    assert!(close(r.system_tps.unwrap().0, 15.0 / 6.0));
    assert_eq!(r.success_rate, Some(1.0));
    assert_eq!(r.retry_rate, Some(0.0));
    // B waited 3 s while A held the only slot: backlog, but no gap.
    assert_eq!(r.idle.backlog_time, Some(Duration::from_secs(3)));
    assert_eq!(r.idle.gap_time, Some(Duration::ZERO));
    assert_eq!(r.gap_fraction, Some(0.0));
    assert_eq!(r.gap_fraction_of_backlog, Some(0.0));
    // in flight: 1 over [0, 6] (A then B) → utilization 1.
    assert!(close(r.utilization.unwrap(), 1.0));
    let d = &r.distributions;
    assert!(close(secs(d.t_queue.mean), 1.5));
    assert!(close(secs(d.t_queue.max), 3.0));
    assert!(close(secs(d.t_first_token.p50), 1.0));
    assert!(close(secs(d.ttft_user.max), 4.0));
    assert!(close(secs(d.t_stream.min), 1.0));
    assert!(close(secs(d.t_stream.max), 2.0));
    assert!(close(secs(d.t_in_flight.max), 3.0));
    assert!(close(secs(d.t_post.max), 1.0));
    assert!(close(secs(d.t_post.min), 0.0));
    assert!(close(d.stream_tps.mean.unwrap().0, 5.0));
    // e2e: 10/3 and 5/3 → mean 2.5.
    assert!(close(d.end_to_end_tps.mean.unwrap().0, 2.5));
    // tpot: A 2 s / 9, B 1 s / 4; decode_tps: 9/2, 4/1.
    assert!(close(secs(r.conventional.tpot.max), 0.25));
    assert!(close(r.conventional.decode_tps.max.unwrap().0, 4.5));
    assert_eq!(r.output_length.max.unwrap().0, 10.0);
    assert_eq!(r.counts.output_tokens, 15);
    assert_eq!(r.counts.input_tokens, 200);
}

#[test]
fn free_slot_while_work_waits_is_a_gap() {
    // cap 2; A in flight 0..4 s; B queued at 1 s but admitted only at 3 s although
    // a slot was free: 2 s of gap in a 5 s window.
    let input = input(
        Some(2),
        vec![
            ok(0, 0, 100, 4000, 4000, 40),
            ok(1000, 3000, 3100, 5000, 5000, 19),
        ],
    );
    let r = analyze(&input, &Options::default());
    assert_eq!(r.idle.gap_time, Some(Duration::from_secs(2)));
    assert_eq!(r.idle.backlog_time, Some(Duration::from_secs(2)));
    assert!(close(r.gap_fraction.unwrap(), 0.4));
    assert_eq!(r.gap_fraction_of_backlog, Some(1.0));
    // ∫in_flight = 4 + 2 = 6; ∫cap = 2 × 5 = 10.
    assert!(close(r.utilization.unwrap(), 0.6));
    assert!(close(r.mean_in_flight.unwrap(), 1.2));
    assert!(close(r.mean_queue_depth.unwrap(), 0.4));
}

#[test]
fn no_backlog_means_zero_gap_and_no_gap_of_backlog() {
    let input = input(
        Some(4),
        vec![ok(0, 0, 10, 100, 100, 5), ok(50, 50, 60, 200, 200, 5)],
    );
    let r = analyze(&input, &Options::default());
    assert_eq!(r.gap_fraction, Some(0.0));
    assert_eq!(r.gap_fraction_of_backlog, None);
    assert_eq!(r.steady_window, None);
}

#[test]
fn never_admitted_span_waits_in_the_queue_until_released() {
    // cap 1, nothing in flight; a cancelled span sits queued 1..2 s: all gap.
    let input = input(
        Some(1),
        vec![
            ok(0, 0, 100, 1000, 1000, 9),
            failed(1000, None, 2000, Status::Cancelled, Cause::Cancelled),
        ],
    );
    let r = analyze(&input, &Options::default());
    assert_eq!(r.idle.gap_time, Some(Duration::from_secs(1)));
    assert!(close(r.gap_fraction.unwrap(), 0.5));
    assert_eq!(r.counts.status.cancelled, 1);
    // Never admitted: the backlog left at the end, not a failure.
    assert_eq!(r.counts.backlog_left, 1);
    assert_eq!(r.counts.errors_by_cause.get(Cause::Cancelled), 0);
    // cancelled spans are apart from the success rate.
    assert_eq!(r.success_rate, Some(1.0));
}

#[test]
fn cap_change_from_samples_turns_waiting_into_a_gap() {
    // run cap 1; A holds the slot 0..4 s; B queued from 0 to 4 s. A sample at 2 s
    // says the cap became 2: from then on B waits beside a free slot (gap 2 s).
    let mut inp = input(
        Some(1),
        vec![
            ok(0, 0, 10, 4000, 4000, 10),
            ok(0, 4000, 4010, 5000, 5000, 10),
        ],
    );
    inp.samples = vec![
        sample(0, 1, 1, None),
        sample(2000, 1, 1, Some(2)),
        sample(3000, 1, 1, None),
    ];
    let r = analyze(&inp, &Options::default());
    assert_eq!(r.idle.gap_time, Some(Duration::from_secs(2)));
    assert_eq!(r.idle.backlog_time, Some(Duration::from_secs(4)));
    // samples: 0 s not a gap (cap 1), 2 s and 3 s gaps (cap 2) → 2/3.
    assert!(close(r.gap_fraction_sampled.unwrap(), 2.0 / 3.0));
    assert_eq!(r.idle.samples, 3);
    // exact 0.4 vs sampled 0.667: warned.
    assert!(
        r.warnings.iter().any(|w| w.contains("sampled")),
        "{:?}",
        r.warnings
    );
}

#[test]
fn counts_rates_retries_and_wasted_tokens() {
    let mut a = ok(0, 0, 10, 20, 20, 3);
    a.retry_count = 2;
    a.retry_causes = vec![Cause::Http429, Cause::Disconnect].into();
    a.wasted_tokens = 7;
    let b = failed(0, Some(0), 30, Status::Error, Cause::Http5xx);
    let c = failed(0, Some(0), 30, Status::Error, Cause::TimeoutStall);
    let d = failed(0, Some(0), 30, Status::Cancelled, Cause::Cancelled);
    let r = analyze(&input(None, vec![a, b, c, d]), &Options::default());
    assert_eq!(
        (
            r.counts.spans,
            r.counts.status.ok,
            r.counts.status.error,
            r.counts.status.cancelled
        ),
        (4, 1, 2, 1)
    );
    assert!(close(r.success_rate.unwrap(), 1.0 / 3.0));
    assert!(close(r.retry_rate.unwrap(), 0.5));
    assert_eq!(r.counts.retries_by_cause["http_429"], 1);
    assert_eq!(r.counts.retries_by_cause["disconnect"], 1);
    assert_eq!(r.counts.errors_by_cause["http_5xx"], 1);
    assert_eq!(r.counts.errors_by_cause["timeout_stall"], 1);
    assert_eq!(r.counts.wasted_tokens, 7);
    // uncapped: utilization unknown.
    assert_eq!(r.utilization, None);
}

#[test]
fn metrics_that_cannot_be_computed_are_absent_with_a_reason() {
    // One single-chunk span (t_stream 0, one token) and one with 0 tokens (no first token).
    let one = ok(0, 0, 10, 10, 20, 1);
    let mut none = ok(0, 0, 10, 10, 20, 0);
    none.first_token_at = None;
    none.last_token_at = None;
    let r = analyze(&input(Some(2), vec![one, none]), &Options::default());
    assert_eq!(r.distributions.stream_tps.count, 0);
    assert_eq!(r.distributions.stream_tps.p50, None);
    assert_eq!(r.missing["stream_tps"]["zero_stream_time"], 1);
    assert_eq!(r.missing["stream_tps"]["no_first_token"], 1);
    assert_eq!(r.missing["tpot"]["single_token"], 1);
    assert_eq!(r.missing["inter_token_latency"]["no_chunks_recorded"], 1);
    // e2e for 0 tokens is a real 0, not absent.
    assert_eq!(r.distributions.end_to_end_tps.count, 2);
    assert_eq!(r.distributions.t_stream.count, 1);
}

#[test]
fn inter_token_latency_splits_multi_token_chunks() {
    let mut s = ok(0, 0, 100, 400, 400, 4);
    // chunks at +0 (1 token), +100 ms (1 token), +300 ms (2 tokens).
    s.chunks = Some(
        vec![
            ChunkMark {
                offset: Duration::ZERO,
                tokens: 1,
            },
            ChunkMark {
                offset: Duration::from_millis(100),
                tokens: 1,
            },
            ChunkMark {
                offset: Duration::from_millis(300),
                tokens: 2,
            },
        ]
        .into_boxed_slice(),
    );
    let r = analyze(&input(Some(1), vec![s]), &Options::default());
    let itl = &r.conventional.inter_token_latency;
    // gaps: 100 ms, then 200 ms over 2 tokens → 100 ms, 100 ms.
    assert_eq!(itl.count, 3);
    assert!(close(secs(itl.max), 0.1));
}

#[test]
fn stream_tps_is_bucketed_by_output_length() {
    let short = ok(0, 0, 0, 1000, 1000, 10); // 10 tok/s, bucket 1..16
    let long = ok(0, 0, 0, 1000, 1000, 500); // 500 tok/s, bucket 257..1024
    let r = analyze(&input(Some(2), vec![short, long]), &Options::default());
    let b = &r.stream_tps_by_output_length;
    assert_eq!((b[0].min_tokens, b[0].max_tokens), (1, Some(16)));
    assert_eq!(b[0].stream_tps.p50.unwrap().0, 10.0);
    assert_eq!((b[3].min_tokens, b[3].max_tokens), (257, Some(1024)));
    assert_eq!(b[3].stream_tps.p50.unwrap().0, 500.0);
    assert_eq!((b[5].min_tokens, b[5].max_tokens), (4097, None));
    assert_eq!(b[5].stream_tps.count, 0);
}

#[test]
fn cost_from_hourly_and_token_prices() {
    // 3600 tokens over 1 s? Use 36 tokens over a 10 s window: 3.6 tok/s.
    let s = ok(0, 0, 0, 10_000, 10_000, 36);
    let opts = Options {
        prices: Prices {
            per_hour: Some(2.0),
            per_mtok_in: Some(1.0),
            per_mtok_out: Some(10.0),
            per_kwh: None,
        },
        ..Options::default()
    };
    let r = analyze(&input(Some(1), vec![s]), &opts);
    let c = r.cost.unwrap();
    // 2 / (3.6 × 3600) × 1e6 = 154.32…
    assert!(close(
        c.per_million_output_tokens.unwrap(),
        2.0 / (3.6 * 3600.0) * 1e6
    ));
    // one completion in 10 s → 360 per hour → 2/360.
    assert!(close(c.per_completion.unwrap(), 2.0 / 360.0));
    // 100 input × 1/1e6 + 36 output × 10/1e6.
    assert!(close(c.token_cost_total.unwrap(), (100.0 + 360.0) / 1e6));
}

#[test]
fn steady_and_range_windows() {
    // cap 1: A 0..2 s, B queued at 0 admitted 2..4 s, C queued 0 admitted 4..6 s.
    let spans = vec![
        ok(0, 0, 0, 2000, 2000, 20),
        ok(0, 2000, 2000, 4000, 4000, 20),
        ok(0, 4000, 4000, 6000, 6000, 20),
    ];
    let inp = input(Some(1), spans);
    let steady = analyze(
        &inp,
        &Options {
            window: WindowSpec::Steady,
            ..Options::default()
        },
    );
    let w = steady.window.unwrap();
    assert_eq!(w.kind, WindowKind::Steady);
    // in-flight reaches the cap at 0; the backlog last empties at 4 s.
    assert_eq!((w.from, w.to), (Duration::ZERO, Duration::from_secs(4)));
    // tokens 0..4 s: 40 → 10 tok/s.
    assert!(close(steady.system_tps.unwrap().0, 10.0));
    let range = analyze(
        &inp,
        &Options {
            window: WindowSpec::Range {
                from: Duration::from_secs(1),
                to: Duration::from_secs(3),
            },
            ..Options::default()
        },
    );
    // tokens in [1, 3] s: 10 + 10 = 20 over 2 s.
    assert!(close(range.system_tps.unwrap().0, 10.0));
    // only A (released at 2 s) is released inside [1, 3] s.
    assert_eq!(range.counts.spans, 1);
}

#[test]
fn time_series_spreads_tokens_and_idle_time_over_buckets() {
    let inp = input(
        Some(2),
        vec![
            ok(0, 0, 0, 2000, 2000, 20),
            ok(1000, 1500, 1500, 2500, 2500, 10),
        ],
    );
    let r = analyze(
        &inp,
        &Options {
            bucket: Some(Duration::from_secs(1)),
            ..Options::default()
        },
    );
    let ts = r.time_series.unwrap();
    assert_eq!(ts.buckets.len(), 3);
    let tok: Vec<f64> = ts.buckets.iter().map(|b| b.tokens).collect();
    assert!(
        close(tok[0], 10.0) && close(tok[1], 15.0) && close(tok[2], 5.0),
        "{tok:?}"
    );
    // B waited 1.0..1.5 s with a free slot: 0.5 s gap in bucket 1.
    assert_eq!(ts.buckets[1].gap, Duration::from_millis(500));
    assert!(close(ts.buckets[1].in_flight, 1.5));
    // the last bucket is half long: 5 tokens in 0.5 s.
    assert_eq!(ts.buckets[2].duration, Duration::from_millis(500));
    assert!(close(ts.buckets[2].system_tps.unwrap().0, 10.0));
    let total: f64 = tok.iter().sum();
    assert!(close(total, 30.0));
}

#[test]
fn a_run_with_no_spans_has_no_window_and_no_rates() {
    let r = analyze(&input(Some(1), vec![]), &Options::default());
    assert_eq!(r.window, None);
    assert_eq!(r.system_tps, None);
    assert_eq!(r.success_rate, None);
    assert_eq!(r.gap_fraction, None);
}

#[test]
fn tpot_of_a_collapsed_stream_is_absent_not_zero() {
    // What broke: a stream whose tokens all arrived at one instant (t_stream 0, several
    // tokens) counted as tpot 0 ms while stream_tps dropped it.
    let collapsed = ok(0, 0, 10, 10, 20, 12);
    let normal = ok(0, 0, 10, 1010, 1020, 11);
    let r = analyze(
        &input(Some(2), vec![collapsed, normal]),
        &Options::default(),
    );
    assert_eq!(r.conventional.tpot.count, 1);
    assert_eq!(secs(r.conventional.tpot.p50), 0.1);
    assert_eq!(r.missing["tpot"]["zero_stream_time"], 1);
    assert_eq!(r.missing["stream_tps"]["zero_stream_time"], 1);
    assert_eq!(r.conventional.decode_tps.count, 1);
}

#[test]
fn request_and_total_token_throughput_as_vllm_prints_them() {
    // What broke: the summary had output TPS only; vLLM users read request throughput
    // and total (input + output) token throughput beside it.
    let a = ok(0, 0, 500, 1500, 2000, 30);
    let b = ok(0, 0, 1000, 1900, 2000, 50);
    let c = failed(0, Some(0), 2000, Status::Error, Cause::Http5xx);
    let r = analyze(&input(Some(2), vec![a.clone(), b, c]), &Options::default());
    let w = r.window.unwrap();
    let win = w.end.since(w.start).unwrap().as_secs_f64();
    assert!(close(win, 2.0), "{win}");
    assert!(close(r.request_throughput.unwrap(), 1.0));
    assert!(close(
        r.total_token_throughput.unwrap().0,
        (200.0 + 80.0) / 2.0
    ));

    // An ok span without its input tokens leaves the total unknown, not too low.
    let mut blind = a;
    blind.input_tokens = None;
    let r = analyze(&input(Some(2), vec![blind]), &Options::default());
    assert!(r.request_throughput.is_some());
    assert_eq!(r.total_token_throughput, None);
}

#[test]
fn window_outside_the_run_warns_that_it_is_empty() {
    // What broke: `--window 50..60` on a 2 s run printed all dashes without a word.
    let inp = input(Some(1), vec![ok(0, 0, 500, 1500, 2000, 30)]);
    let r = analyze(
        &inp,
        &Options {
            window: WindowSpec::Range {
                from: Duration::from_secs(50),
                to: Duration::from_secs(60),
            },
            ..Options::default()
        },
    );
    assert_eq!(r.counts.spans, 0);
    assert!(
        r.warnings
            .iter()
            .any(|w| w.contains("50.000–60.000 s") && w.contains("the window is empty")),
        "{:?}",
        r.warnings
    );
    // A window inside the run does not warn.
    let r = analyze(
        &inp,
        &Options {
            window: WindowSpec::Range {
                from: Duration::ZERO,
                to: Duration::from_secs(2),
            },
            ..Options::default()
        },
    );
    assert!(
        !r.warnings.iter().any(|w| w.contains("empty")),
        "{:?}",
        r.warnings
    );
}

#[test]
fn in_flight_above_the_cap_warns_instead_of_a_utilization_above_100_percent() {
    // What broke: a merged or corrupt log (more in flight than the cap) printed
    // utilization 444,559 %.
    let spans = (0..4).map(|_| ok(0, 0, 500, 1500, 2000, 30)).collect();
    let r = analyze(&input(Some(1), spans), &Options::default());
    assert_eq!(r.utilization, None);
    assert!(
        r.warnings
            .iter()
            .any(|w| w.contains("more spans were in flight than the cap")),
        "{:?}",
        r.warnings
    );
    let r = analyze(
        &input(
            Some(4),
            (0..4).map(|_| ok(0, 0, 500, 1500, 2000, 30)).collect(),
        ),
        &Options::default(),
    );
    assert!(close(r.utilization.unwrap(), 1.0));
    assert!(
        !r.warnings
            .iter()
            .any(|w| w.contains("in flight than the cap"))
    );
}
