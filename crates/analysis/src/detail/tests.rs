//! The chart data of small, big and empty runs.

use super::*;
use crate::analyze::{Options, analyze};
use crate::test_support::{capped_run, ts};

fn span(q: i64, a: i64, f: i64, l: i64, r: i64, tokens: u64) -> SpanFacts {
    SpanFacts {
        status: Status::Ok,
        error_cause: None,
        queued_at: ts(q),
        admitted_at: Some(ts(a)),
        first_token_at: Some(ts(f)),
        last_token_at: Some(ts(l)),
        released_at: ts(r),
        output_tokens: tokens,
        input_tokens: None,
        retry_count: 0,
        retry_causes: Box::default(),
        wasted_tokens: 0,
        client: Default::default(),
        chunks: None,
        session: None,
    }
}

fn input(spans: Vec<SpanFacts>, cap: u32) -> RunInput {
    let mut i = capped_run(cap);
    for s in spans {
        i.push_span(s, None);
    }
    i
}

#[test]
fn small_run_has_exact_steps_gaps_and_phases() {
    // cap 1: A holds the slot 0..1000; B waits from 0, admitted at 1200 after a
    // 200 ms gap (queue 1, in-flight 0 < cap 1), released at 2000.
    let inp = input(
        vec![
            span(0, 0, 100, 900, 1000, 81),
            span(0, 1200, 1300, 1900, 2000, 61),
        ],
        1,
    );
    let rep = analyze(
        &inp,
        &Options {
            bucket: Some(Duration::from_millis(500)),
            ..Options::default()
        },
    );
    let d = detail(&inp, &rep);
    assert!(d.occupancy.bin.is_none());
    let steps: Vec<_> = d
        .occupancy
        .steps
        .iter()
        .map(|s| (s.at.as_millis(), s.in_flight_max, s.queue_max, s.cap))
        .collect();
    assert_eq!(
        steps,
        vec![
            (0, 1, 1, Some(1)),
            (1000, 0, 1, Some(1)),
            (1200, 1, 0, Some(1))
        ]
    );
    assert_eq!(d.occupancy.end, Duration::from_millis(2000));
    assert_eq!(
        d.gaps,
        vec![GapBand {
            from: Duration::from_millis(1000),
            to: Duration::from_millis(1200),
            share: 1.0
        }]
    );
    assert_eq!(d.waterfall.total, 2);
    assert!(!d.waterfall.sampled());
    assert_eq!(
        d.waterfall.rows[1].admitted,
        Some(Duration::from_millis(1200))
    );
    // TPS buckets cover the window, offset from the origin.
    assert_eq!(d.tps.len(), 4);
    assert_eq!(d.tps[0].start, Duration::ZERO);
    // CDF ends are min and max; the middle is the report's p50.
    let q = d.cdf(CdfMetric::TQueue).unwrap();
    assert_eq!(q.count, 2);
    assert_eq!(q.points.first().unwrap(), &(0.0, 0.0));
    assert_eq!(q.points.last().unwrap(), &(1.2, 1.0));
    let p50 = q.points[(CDF_POINTS - 1) / 2].0;
    assert!((p50 - rep.distributions.t_queue.p50.unwrap().as_secs_f64()).abs() < 1e-12);
    // stream TPS: 81 tokens / 0.8 s and 61 / 0.6 s.
    let sc: Vec<_> = d
        .scatter
        .points
        .iter()
        .map(|(n, r)| (*n, (r.0 * 1000.0).round()))
        .collect();
    assert_eq!(sc, vec![(81, 101250.0), (61, 101667.0)]);
}

#[test]
fn big_runs_are_bounded_and_keep_maxima() {
    // 5,000 short requests through cap 4, one burst of 50 queued at 1 s.
    let mut spans = Vec::new();
    for i in 0..5000i64 {
        let t = i * 10;
        spans.push(span(t, t, t + 2, t + 8, t + 9, 10));
    }
    for k in 0..50 {
        spans.push(span(
            1000,
            1000 + k * 9,
            1000 + k * 9 + 1,
            1000 + k * 9 + 5,
            1000 + k * 9 + 6,
            5,
        ));
    }
    let inp = input(spans, 4);
    let rep = analyze(&inp, &Options::default());
    let d = detail(&inp, &rep);
    assert!(d.occupancy.bin.is_some());
    assert!(d.occupancy.steps.len() <= OCCUPANCY_BINS);
    let max_q = d.occupancy.steps.iter().map(|s| s.queue_max).max().unwrap();
    assert!(max_q >= 49, "the burst's queue survives binning: {max_q}");
    assert_eq!(d.waterfall.rows.len(), MAX_WATERFALL);
    assert_eq!(d.waterfall.total, 5050);
    assert_eq!(d.waterfall.first, (5050 - MAX_WATERFALL) / 2);
    assert!(
        d.waterfall
            .rows
            .windows(2)
            .all(|w| w[0].queued <= w[1].queued)
    );
    assert!(d.waterfall.sampled());
    assert!(d.scatter.points.len() <= MAX_SCATTER);
    assert_eq!(d.scatter.total, 5050);
    for c in &d.cdfs {
        assert!(c.points.len() <= CDF_POINTS);
    }
    // Without a time series there is no TPS data, and nothing breaks.
    assert!(d.tps.is_empty());
    // With a fine one, neighbouring buckets merge, keeping the total.
    let rep = analyze(
        &inp,
        &Options {
            bucket: Some(Duration::from_millis(20)),
            ..Options::default()
        },
    );
    let buckets = rep.time_series.as_ref().unwrap().buckets.len();
    assert!(buckets > MAX_TPS_POINTS);
    let d = detail(&inp, &rep);
    assert!(d.tps.len() <= MAX_TPS_POINTS);
    let total: f64 = d
        .tps
        .iter()
        .map(|p| p.system_tps.unwrap().0 * p.duration.as_secs_f64())
        .sum();
    assert!(
        (total - rep.counts.output_tokens as f64).abs() < 1e-6 * total,
        "{total}"
    );
}

#[test]
fn empty_run_gives_empty_charts() {
    let inp = input(vec![], 2);
    let rep = analyze(&inp, &Options::default());
    let d = detail(&inp, &rep);
    assert!(d.occupancy.steps.is_empty() && d.gaps.is_empty() && d.waterfall.rows.is_empty());
    assert!(d.cdfs.iter().all(|c| c.points.is_empty() && c.count == 0));
}

#[test]
fn even_sample_keeps_ends_and_bounds() {
    assert_eq!(even_sample(3, 10), vec![0, 1, 2]);
    let s = even_sample(10_000, 1000);
    assert_eq!(s.len(), 1000);
    assert_eq!((s[0], s[999]), (0, 9999));
    assert!(s.windows(2).all(|w| w[0] < w[1]));
}

#[test]
fn every_cdf_is_a_row_of_the_metric_table() {
    for c in CdfMetric::ALL {
        assert!(metric(c.name()).is_some(), "{}", c.name());
    }
}

#[test]
fn compare_tps_chart_uses_one_readable_bucket_for_both_runs() {
    // The comparison page drew TPS in the bootstrap's buckets: ~70 ms for a 14 s
    // run, different per run, unreadable. Both now share one 1-2-5 bucket.
    assert_eq!(
        chart_bucket(Duration::from_secs(14)),
        Duration::from_millis(500)
    );
    assert_eq!(
        chart_bucket(Duration::from_secs(600)),
        Duration::from_secs(10)
    );
    assert_eq!(
        chart_bucket(Duration::from_millis(30)),
        Duration::from_millis(10)
    );
    let short = input(
        (0..50)
            .map(|k| span(0, k * 100, k * 100 + 10, k * 100 + 90, k * 100 + 100, 40))
            .collect(),
        1,
    );
    let long = input(
        (0..140)
            .map(|k| span(0, k * 100, k * 100 + 10, k * 100 + 90, k * 100 + 100, 40))
            .collect(),
        1,
    );
    let (b, c) = compare_details(&short, &long, &Options::default());
    let widths = |d: &Detail| {
        d.tps
            .iter()
            .map(|p| p.duration)
            .take(b.tps.len() - 1)
            .collect::<Vec<_>>()
    };
    assert!(
        widths(&b)
            .iter()
            .chain(&widths(&c))
            .all(|w| *w == Duration::from_millis(500))
    );
    assert_eq!(c.tps.len(), 28);
}
