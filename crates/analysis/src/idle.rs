//! The idle stage of [`crate::analyze()`]: over the window, the time work waited
//! while a slot was free (the gap) from the exact steps, the same estimated from
//! the samples, the backlog, utilization and mean occupancy, with the warnings
//! that say when those figures cannot be read as they stand.

use std::time::Duration;

use serde::Serialize;
use tpscope_model::time::duration_secs;
use tpscope_model::{Occupancy, Timestamp};

use crate::input::RunInput;
use crate::stats::ratio;
use crate::steps::Integrals;
use crate::window::Window;

/// Idle time (docs/design.md §3) over the window.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct Idle {
    /// Time when queue depth > 0 and in-flight < cap (absent when the producer
    /// recorded no queue times).
    #[serde(
        rename = "gap_time_s",
        serialize_with = "duration_secs::option::serialize"
    )]
    pub gap_time: Option<Duration>,
    /// Time when queue depth > 0 (absent as `gap_time`).
    #[serde(
        rename = "backlog_time_s",
        serialize_with = "duration_secs::option::serialize"
    )]
    pub backlog_time: Option<Duration>,
    /// Samples in the window (the sampled estimate uses them).
    pub samples: u64,
}

/// The idle stage's figures, each the [`crate::RunReport`] field of its name
/// (`None` when it cannot be computed).
pub(crate) struct IdleFigures {
    pub gap_fraction: Option<f64>,
    pub gap_fraction_sampled: Option<f64>,
    pub gap_fraction_of_backlog: Option<f64>,
    pub utilization: Option<f64>,
    pub mean_in_flight: Option<f64>,
    pub mean_queue_depth: Option<f64>,
    pub idle: Idle,
}

/// The idle stage, from the steps' integrals over `window`; warns when the
/// exact and sampled gap fractions differ by more than `gap_disagreement`.
pub(crate) fn idle(
    input: &RunInput,
    integrals: &Integrals,
    window: Option<Window>,
    gap_disagreement: f64,
    warnings: &mut Vec<String>,
) -> IdleFigures {
    let (w0, w1) = window.map(|w| (w.start, w.end)).unwrap_or_default();
    let win_ns = w1.signed_nanos_since(w0) as f64;
    let gap_fraction = ratio(integrals.gap_ns as f64, win_ns);
    let utilization = utilization(integrals, warnings);
    let (samples, gap_fraction_sampled) = sampled_gap(input, window);
    if let (Some(exact), Some(sampled)) = (gap_fraction, gap_fraction_sampled)
        && (exact - sampled).abs() > gap_disagreement
    {
        warnings.push(format!(
            "exact gap fraction {exact:.4} and sampled {sampled:.4} differ by more than \
             {gap_disagreement}: samples may be too sparse, or spans are missing from the log"
        ));
    }
    if input.run.is_none() {
        warnings.push(
            "no `run` record: the cap is unknown, so every queued moment counts as a gap".into(),
        );
    } else if input.run_cap().is_none() && integrals.backlog_ns > 0 {
        warnings.push("the run has no cap: every queued moment counts as a gap".into());
    }
    IdleFigures {
        gap_fraction,
        gap_fraction_sampled,
        gap_fraction_of_backlog: integrals.gap_share_of_backlog(win_ns as i64),
        utilization,
        mean_in_flight: ratio(integrals.in_flight_ns, win_ns),
        mean_queue_depth: ratio(integrals.queue_ns, win_ns),
        idle: Idle {
            gap_time: Some(integrals.gap()),
            backlog_time: Some(integrals.backlog()),
            samples,
        },
    }
}

/// ∫ in_flight dt / ∫ cap dt, when the cap held throughout.
fn utilization(integrals: &Integrals, warnings: &mut Vec<String>) -> Option<f64> {
    let u = if integrals.uncapped_ns == 0 {
        ratio(integrals.in_flight_ns, integrals.cap_ns)
    } else {
        None
    };
    // More in flight than the cap allows cannot happen in one run: the log holds
    // merged runs or is corrupt, and a utilization above 100 % would mislead.
    if let Some(u) = u.filter(|u| *u > 1.0 + 1e-9) {
        warnings.push(format!(
            "more spans were in flight than the cap allows (utilization would be {:.0} %): \
             the log may hold merged runs or be corrupt; utilization is not shown",
            u * 100.0
        ));
        return None;
    }
    u
}

/// The samples in the window, and the sampled gap fraction. The cap a sample
/// sees is the last one stated by a sample at or before it, else the run's.
/// Without a heartbeat (one sample per tick) the fraction is the share of the
/// window's samples that saw a gap; with one (a sample on a change and at least
/// every heartbeat) each sample holds until the next, or the window's end, and
/// the fraction is the share of the time they cover that was a gap. Where
/// requests stated their queue times, a sample's queue is at least the one
/// their spans show at its instant ([`StatedQueue`]).
fn sampled_gap(input: &RunInput, window: Option<Window>) -> (u64, Option<f64>) {
    let mut cap = input.run_cap();
    let mut stated = StatedQueue::of(input);
    let held = input.sample_heartbeat().is_some();
    let (mut n_samples, mut n_gap) = (0u64, 0u64);
    let (mut covered_ns, mut gap_ns) = (0i64, 0i64);
    // The sample holding before the current one: when it was taken, and whether
    // it saw a gap.
    let mut holding: Option<(Timestamp, bool)> = None;
    let mut samples: Vec<_> = input.samples.clone();
    samples.sort_by_key(|s| s.at);
    let Some(w) = window else {
        return (0, None);
    };
    let mut hold = |from: Timestamp, to: Timestamp, gap: bool| {
        let ns = to.min(w.end).signed_nanos_since(from.max(w.start)).max(0);
        covered_ns += ns;
        gap_ns += if gap { ns } else { 0 };
    };
    for smp in &samples {
        if smp.cap.is_some() {
            cap = smp.cap;
        }
        let queue_depth = match stated.as_mut() {
            Some(q) => smp.queue_depth.max(q.depth_at(smp.at)),
            None => smp.queue_depth,
        };
        let gap = Occupancy {
            in_flight: smp.in_flight,
            queue_depth,
            cap,
        }
        .is_gap();
        if let Some((from, was_gap)) = holding {
            hold(from, smp.at, was_gap);
        }
        holding = Some((smp.at, gap));
        if smp.at >= w.start && smp.at <= w.end {
            n_samples += 1;
            n_gap += u64::from(gap);
        }
    }
    if !held {
        return (n_samples, ratio(n_gap as f64, n_samples as f64));
    }
    if let Some((from, was_gap)) = holding {
        hold(from, w.end, was_gap);
    }
    (n_samples, ratio(gap_ns as f64, covered_ns as f64))
}

/// The queue of a run whose requests stated when their work was ready
/// (`x-tpscope-queued-at`, counted by the proxy's `end` record): a request is
/// queued in its span from that instant, but a proxy samples only requests that
/// have arrived, so its samples never counted the stretch before. The spans'
/// queue at a sample's instant holds both the stated stretches and the
/// arrived requests waiting for a slot (which the sample did count), so the
/// sample's queue is the larger of the two; a sample still counts requests
/// whose spans are missing from the log.
struct StatedQueue {
    /// Instants a span entered the queue, and left it, each sorted.
    entered: Vec<Timestamp>,
    left: Vec<Timestamp>,
    /// How many of each lie at or before the last instant asked.
    next: (usize, usize),
}

impl StatedQueue {
    /// `None` unless the run's requests stated queue times.
    fn of(input: &RunInput) -> Option<StatedQueue> {
        if input.end.as_ref().and_then(|e| e.queued_at_stated) <= Some(0) {
            return None;
        }
        // As the steps: a span is queued over `queued_at ≤ t < dequeued_at`.
        let (mut entered, mut left): (Vec<_>, Vec<_>) = input
            .spans
            .iter()
            .filter(|s| s.dequeued_at() > s.queued_at)
            .map(|s| (s.queued_at, s.dequeued_at()))
            .unzip();
        entered.sort_unstable();
        left.sort_unstable();
        Some(StatedQueue {
            entered,
            left,
            next: (0, 0),
        })
    }

    /// Spans queued at `at` (instants asked in order).
    fn depth_at(&mut self, at: Timestamp) -> u32 {
        let upto = |v: &[Timestamp], from: usize| from + v[from..].partition_point(|t| *t <= at);
        self.next = (
            upto(&self.entered, self.next.0),
            upto(&self.left, self.next.1),
        );
        u32::try_from(self.next.0 - self.next.1).unwrap_or(u32::MAX)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::steps::Steps;
    use crate::test_support::{capped_run, ok_span};
    use crate::window::{WindowSpec, windows};

    /// Cap 1; the second span waits 0..1 s behind the first, then 1..2 s for a
    /// free slot (admitted at 3 s after the first leaves at 2 s): 1 s of gap.
    fn run() -> RunInput {
        let mut input = capped_run(1);
        input.spans = vec![ok_span(0, 0, 2000, 10), ok_span(0, 3000, 4000, 10)];
        input
    }

    fn figures(input: &RunInput, warnings: &mut Vec<String>) -> IdleFigures {
        let steps = Steps::new(input);
        let w = windows(input, &steps, WindowSpec::Full, warnings).chosen;
        let integrals = steps.integrate(w.unwrap().start, w.unwrap().end);
        idle(input, &integrals, w, 0.02, warnings)
    }

    #[test]
    fn the_gap_is_waiting_work_beside_a_free_slot() {
        let mut warnings = Vec::new();
        let f = figures(&run(), &mut warnings);
        assert_eq!(f.idle.gap_time, Some(Duration::from_secs(1)));
        assert_eq!(f.idle.backlog_time, Some(Duration::from_secs(3)));
        assert_eq!(f.gap_fraction, Some(0.25));
        assert_eq!(f.gap_fraction_of_backlog, Some(1.0 / 3.0));
        assert_eq!(f.utilization, Some(0.75));
        assert_eq!((f.idle.samples, f.gap_fraction_sampled), (0, None));
        assert!(warnings.is_empty(), "{warnings:?}");
    }

    #[test]
    fn more_in_flight_than_the_cap_hides_utilization_with_a_warning() {
        let mut input = run();
        input.spans = vec![ok_span(0, 0, 2000, 10), ok_span(0, 0, 2000, 10)];
        let mut warnings = Vec::new();
        let f = figures(&input, &mut warnings);
        assert_eq!(f.utilization, None);
        assert!(
            warnings[0].contains("utilization would be 200 %"),
            "{warnings:?}"
        );
    }

    /// The run's occupancy read every 10 ms over 0..4 s: in flight, queued.
    fn ticks() -> Vec<(i64, u32, u32)> {
        (0..=400)
            .map(|k| {
                let ms = k * 10;
                match ms {
                    0..2000 => (ms, 1, 1),
                    2000..3000 => (ms, 0, 1),
                    3000..4000 => (ms, 1, 0),
                    _ => (ms, 0, 0),
                }
            })
            .collect()
    }

    fn with_samples(readings: &[(i64, u32, u32)], heartbeat: Option<Duration>) -> RunInput {
        let mut input = run();
        input.run.as_mut().unwrap().sample_heartbeat = heartbeat;
        input.samples = readings
            .iter()
            .map(|&(ms, in_flight, queue_depth)| crate::input::SampleFacts {
                at: crate::test_support::ts(ms),
                in_flight,
                queue_depth,
                cap: None,
            })
            .collect();
        input
    }

    #[test]
    fn samples_on_every_tick_are_counted_as_before() {
        let mut warnings = Vec::new();
        let f = figures(&with_samples(&ticks(), None), &mut warnings);
        // 100 of the 401 samples in the window saw the gap (2000..3000 ms).
        assert_eq!(f.idle.samples, 401);
        assert_eq!(f.gap_fraction_sampled, Some(100.0 / 401.0));
    }

    #[test]
    fn samples_thinned_to_changes_and_a_heartbeat_hold_until_the_next() {
        // A sample on a change and at least every 500 ms.
        let (mut kept, mut last) = (Vec::new(), None::<(i64, u32, u32)>);
        for t in ticks() {
            if last.is_none_or(|l| (l.1, l.2) != (t.1, t.2) || t.0 - l.0 >= 500) {
                kept.push(t);
                last = Some(t);
            }
        }
        assert!(kept.len() < 15, "{kept:?}");
        let mut warnings = Vec::new();
        let held = figures(
            &with_samples(&kept, Some(Duration::from_millis(500))),
            &mut warnings,
        );
        assert_eq!(held.gap_fraction_sampled, Some(0.25));
        assert!(warnings.is_empty(), "{warnings:?}");
        // Counted as if one per tick, the same samples would be far off.
        let counted = figures(&with_samples(&kept, None), &mut warnings);
        assert!((counted.gap_fraction_sampled.unwrap() - 0.25).abs() > 0.02);
    }

    #[test]
    fn samples_follow_queue_times_stated_from_before_the_proxy_saw_the_request() {
        // The second request says its work was ready at 0 but reached the
        // proxy at 3 s, admitted at once: the proxy's samples never saw it
        // queued, so without its statement they saw no gap at all.
        let unseen: Vec<_> = ticks().into_iter().map(|(ms, i, _)| (ms, i, 0)).collect();
        let mut input = with_samples(&unseen, None);
        let mut warnings = Vec::new();
        let f = figures(&input, &mut warnings);
        assert_eq!(f.gap_fraction_sampled, Some(0.0));
        assert!(warnings[0].contains("differ by more than"), "{warnings:?}");
        input.end = Some(tpscope_model::EndRecord {
            run_id: "r".into(),
            ended_at: crate::test_support::ts(4000),
            spans: 2,
            status: tpscope_model::StatusCounts {
                ok: 2,
                error: 0,
                cancelled: 0,
            },
            samples: 401,
            schedule_late_max: None,
            queued_at_stated: Some(1),
            cut_at_stop: Some(0),
            model: None,
        });
        let mut warnings = Vec::new();
        let f = figures(&input, &mut warnings);
        // As the samples that saw the queue: 100 of 401 in 2000..3000 ms.
        assert_eq!(f.gap_fraction_sampled, Some(100.0 / 401.0));
        assert!(warnings.is_empty(), "{warnings:?}");
        // Samples that counted a queue the spans do not show keep it (a span
        // may be missing from the log).
        let mut missing = with_samples(&ticks(), None);
        missing.end = input.end.clone();
        missing.spans[1] = ok_span(3000, 3000, 4000, 10);
        let f = figures(&missing, &mut Vec::new());
        assert_eq!(f.gap_fraction_sampled, Some(100.0 / 401.0));
    }

    #[test]
    fn without_a_run_record_every_queued_moment_is_a_gap_and_said() {
        let mut input = run();
        input.run = None;
        let mut warnings = Vec::new();
        figures(&input, &mut warnings);
        assert!(warnings[0].starts_with("no `run` record"), "{warnings:?}");
    }
}
