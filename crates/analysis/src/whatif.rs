//! What fixing the gap gains: the run's requests replayed
//! work-conserving at its cap — each taking the slot time it took, arriving
//! when it was queued, admitted first in first out the moment a slot frees —
//! and the window, system TPS and cost that replay would have given.

use serde::Serialize;
use tpscope_model::Status;

use crate::input::{RunInput, SpanFacts};
use crate::stats::ratio;

/// What the replay assumes, said with every figure.
pub const ASSUMPTIONS: &str = "each request holds its slot as long as it did in the run \
(service times do not grow with load: at the same cap the server sees no more concurrency \
than the cap); it arrives when it was queued and takes the first free slot, first in first \
out; the run's cap holds throughout; later turns of a conversation keep their queue times";

/// The replayed run.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct WorkConserving {
    /// First arrival to last release of the replay.
    pub window_s: f64,
    /// Output tokens of the ok spans over that window.
    pub system_tps: Option<f64>,
    /// price_per_hour / (system_tps × 3600) × 10⁶, with `--price-per-hour`.
    pub cost_per_million_output_tokens: Option<f64>,
    /// The replay's system TPS over the run's (`None` when either is unknown).
    pub gain: Option<f64>,
}

/// The what-if of a run.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct WhatIf {
    /// The work-conserving replay.
    pub work_conserving: WorkConserving,
    /// What it assumes.
    pub assumptions: &'static str,
}

/// The replay of `input` at its cap; `None` without a cap or admitted spans.
/// `measured_tps` is the run's own system TPS, for the gain.
pub fn what_if(
    input: &RunInput,
    measured_tps: Option<f64>,
    price_per_hour: Option<f64>,
) -> Option<WhatIf> {
    let mut replay = Replay::new(input)?;
    for s in &input.spans {
        replay.add(s);
    }
    replay.finish(input, measured_tps, price_per_hour)
}

/// (arrival, original admission, first answer, hold) of an admitted span.
type Job = (i64, i64, i64, i64);

/// Requests queued and admitted at one instant (a wave) keep the order the
/// server answered them in, which follows the order they were sent: ordered
/// by hold, the shortest went first and the longest were left for the end, a
/// tail the run never had.
fn job(s: &SpanFacts) -> Option<Job> {
    let a = s.admitted_at?;
    let hold = s.released_at.signed_nanos_since(a).max(0);
    let answered = s.first_token_at.unwrap_or(s.released_at);
    Some((
        s.queued_at.unix_nanos(),
        a.unix_nanos(),
        answered.unix_nanos(),
        hold,
    ))
}

/// The replay fed span by span, in log order: logs are nearly always in
/// arrival order already, so the jobs are replayed as they come, in a pass
/// over the spans that another stage makes anyway (the collect stage's), with
/// no vector of a million jobs to fault in and sort; only a log out of order
/// is sorted and replayed again at the end.
pub(crate) struct Replay {
    free: SlotHeap,
    /// Output tokens of the admitted ok spans.
    tokens: u64,
    /// Whether the jobs so far came in order.
    sorted: bool,
    last: Option<Job>,
    start: Option<i64>,
    end: i64,
}

impl Replay {
    /// An empty replay at the run's cap; `None` without one.
    pub(crate) fn new(input: &RunInput) -> Option<Replay> {
        let cap = input.run_cap().filter(|&c| c > 0)? as usize;
        // No more slots than spans: a cap of millions would be a heap of
        // millions (slots past the jobs' count are never reused).
        let slots = cap.min(input.spans.len());
        Some(Replay {
            free: SlotHeap(vec![i64::MIN; slots]),
            tokens: 0,
            sorted: true,
            last: None,
            start: None,
            end: i64::MIN,
        })
    }

    /// The next span of the log.
    #[inline]
    pub(crate) fn add(&mut self, s: &SpanFacts) {
        let Some(j) = job(s) else { return };
        if s.status == Status::Ok {
            self.tokens += s.output_tokens;
        }
        if !self.sorted || self.last.is_some_and(|l| l > j) {
            self.sorted = false;
            return;
        }
        self.last = Some(j);
        self.start.get_or_insert(j.0);
        self.end = self.end.max(self.free.take(j.0, j.3));
    }

    /// The what-if, once every span of `input` was added; `None` when none
    /// was admitted.
    pub(crate) fn finish(
        mut self,
        input: &RunInput,
        measured_tps: Option<f64>,
        price_per_hour: Option<f64>,
    ) -> Option<WhatIf> {
        let mut start = self.start?;
        let mut end = self.end;
        if !self.sorted {
            let mut jobs: Vec<_> = input.spans.iter().filter_map(job).collect();
            jobs.sort_unstable();
            self.free.0.fill(i64::MIN);
            start = jobs[0].0;
            end = i64::MIN;
            for &(arrival, _, _, hold) in &jobs {
                end = end.max(self.free.take(arrival, hold));
            }
        }
        let end = end.max(start);
        let window_s = (end - start) as f64 / 1e9;
        let system_tps = ratio(self.tokens as f64, window_s);
        Some(WhatIf {
            work_conserving: WorkConserving {
                window_s,
                system_tps,
                cost_per_million_output_tokens: price_per_hour
                    .zip(system_tps)
                    .and_then(|(p, t)| ratio(p, t * 3600.0))
                    .map(|v| v * 1e6),
                gain: system_tps.zip(measured_tps).and_then(|(a, b)| ratio(a, b)),
            },
            assumptions: ASSUMPTIONS,
        })
    }
}

/// A binary min-heap of instants whose least is replaced, never popped: the
/// replay's slots. The new instant sinks to the bottom choosing the lesser
/// child without comparing itself (no branch to mispredict per level), then
/// rises: a slot's next free instant is mostly later than the others', so it
/// rises little. `BinaryHeap` compared at every level (a third of the what-if's
/// time at a million spans).
struct SlotHeap(Vec<i64>);

impl SlotHeap {
    /// A job arriving at `arrival` takes the earliest free slot for `hold`;
    /// returns when it is done.
    #[inline]
    fn take(&mut self, arrival: i64, hold: i64) -> i64 {
        let done = arrival.max(self.0[0]).saturating_add(hold);
        self.replace_min(done);
        done
    }

    fn replace_min(&mut self, v: i64) {
        let h = &mut self.0;
        let n = h.len();
        let mut pos = 0;
        let mut child = 1;
        while child + 1 < n {
            child += usize::from(h[child + 1] < h[child]);
            h[pos] = h[child];
            pos = child;
            child = 2 * pos + 1;
        }
        if child + 1 == n {
            h[pos] = h[child];
            pos = child;
        }
        while pos > 0 {
            let parent = (pos - 1) / 2;
            if h[parent] <= v {
                break;
            }
            h[pos] = h[parent];
            pos = parent;
        }
        h[pos] = v;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::input::SpanFacts;
    use crate::test_support::{capped_run, ts};

    fn ok(q: i64, a: i64, r: i64) -> SpanFacts {
        SpanFacts::ok(
            ts(q),
            Some(ts(a)),
            Some(ts(a + 1)),
            Some(ts(r - 1)),
            ts(r),
            100,
        )
    }

    /// Two waves of two through two slots: in the run, the second wave waited
    /// for the slowest of the first (100 ms); replayed, the short request's
    /// slot takes the next at 10 ms.
    #[test]
    fn waves_replayed_work_conserving_need_a_shorter_window() {
        let mut input = capped_run(2);
        input.spans.extend([
            ok(0, 0, 10),
            ok(0, 0, 100),
            ok(0, 100, 110),
            ok(0, 100, 200),
        ]);
        let w = what_if(&input, Some(400.0 / 0.2), Some(3.6)).unwrap();
        let wc = &w.work_conserving;
        // Slot 1: 0–10, 10–20, 20–120; slot 2: 0–100. Ends at 120 ms.
        assert!((wc.window_s - 0.12).abs() < 1e-12, "{wc:?}");
        assert!((wc.system_tps.unwrap() - 400.0 / 0.12).abs() < 1e-6);
        assert!((wc.gain.unwrap() - 0.2 / 0.12).abs() < 1e-9);
        // 3.6 per hour at 3,333 tok/s: 0.3 per million.
        assert!((wc.cost_per_million_output_tokens.unwrap() - 0.3).abs() < 1e-9);
        assert!(w.assumptions.contains("service times do not grow"));
    }

    /// Requests that arrive apart are not moved earlier than their arrival.
    #[test]
    fn a_replay_never_starts_a_request_before_it_arrived() {
        let mut input = capped_run(4);
        input.spans.extend([ok(0, 0, 10), ok(500, 500, 510)]);
        let w = what_if(&input, None, None).unwrap();
        assert!((w.work_conserving.window_s - 0.51).abs() < 1e-12);
        assert_eq!(w.work_conserving.gain, None);
    }

    /// One wave of three through two slots, the long request answered first:
    /// replayed in that order it shares the window with the two short ones
    /// (30 ms); taken shortest first, it would start after them (40 ms).
    #[test]
    fn a_wave_is_replayed_in_the_order_it_was_answered_not_shortest_first() {
        let mut input = capped_run(2);
        let span = |first: i64, r: i64| {
            let mut s = ok(0, 0, r);
            s.first_token_at = Some(ts(first));
            s
        };
        input.spans.extend([span(3, 10), span(2, 10), span(1, 30)]);
        let w = what_if(&input, None, None).unwrap();
        assert!((w.work_conserving.window_s - 0.03).abs() < 1e-12, "{w:?}");
    }

    /// The slot heap against the plain rule (the earliest free slot takes
    /// the next job), on jobs of random holds through random caps.
    #[test]
    fn the_slot_heap_replays_as_the_earliest_free_slot_would() {
        let mut x = 0x9E37_79B9_7F4A_7C15u64;
        let mut rnd = |m: u64| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x % m
        };
        for _ in 0..200 {
            let cap = 1 + rnd(80) as usize;
            let jobs: Vec<(i64, i64, i64, i64)> = (0..1 + rnd(60) as i64)
                .map(|i| (i * rnd(5) as i64, 0, 0, rnd(40) as i64))
                .scan(0, |t, (a, _, _, h)| {
                    *t = (*t).max(a);
                    Some((*t, 0, 0, h))
                })
                .collect();
            let mut slots = vec![i64::MIN; cap];
            let mut end = jobs[0].0;
            for &(arrival, _, _, hold) in &jobs {
                let i = (0..cap).min_by_key(|&i| slots[i]).unwrap();
                slots[i] = arrival.max(slots[i]) + hold;
                end = end.max(slots[i]);
            }
            let mut heap = SlotHeap(vec![i64::MIN; cap]);
            let last = jobs.iter().map(|j| heap.take(j.0, j.3)).max().unwrap();
            assert_eq!(last.max(jobs[0].0), end);
        }
    }

    #[test]
    fn an_uncapped_run_has_no_what_if() {
        let mut input = capped_run(1);
        input.run.as_mut().unwrap().cap = None;
        input.spans.push(ok(0, 0, 10));
        assert_eq!(what_if(&input, None, None), None);
    }
}
