//! The gap a pipeline holds back when it does not say: from
//! admissions and releases alone, the pipeline's width (most in flight, or as
//! stated), whether new requests follow releases one by one (work-conserving)
//! or come in bursts after the in-flight count drained (waves), and the slot
//! time held back before each burst. An estimate, kept apart from the exact
//! gap of the sweep; the header `x-tpscope-queued-at` with `--cap` makes it
//! exact ([`RECIPE`]).

use std::time::Duration;

use serde::Serialize;
use tpscope_model::{QueueTimes, Timestamp};

use crate::input::{RunInput, SpanFacts};
use tpscope_model::time::duration_secs;

/// What makes the inferred figure exact, in one line.
pub const RECIPE: &str = "for the exact gap, send the header x-tpscope-queued-at (when the work \
     was ready) with each request and run the proxy with --cap (the pipeline's width)";

/// A burst counts as prompted by the release before it when it starts within
/// this share of the median in-flight time after it …
const PROMPT_SHARE: f64 = 0.1;
/// … and never less than this (a loaded client's reaction time).
const PROMPT_MIN: Duration = Duration::from_millis(50);

/// The pipeline's shape as admissions and releases show it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Shape {
    /// New requests follow releases about one per release: little held back.
    WorkConserving,
    /// New requests come in bursts after several releases (batches waiting for
    /// their slowest request): the slots freed before each burst were held back.
    Waves,
    /// New requests do not follow releases (demand arriving on its own):
    /// nothing suggests work was held back.
    Open,
    /// Every request was sent before the first release: nothing was held back.
    OneBurst,
}

/// Where the width came from.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum WidthSource {
    /// `--pipeline-width` (or the proxy's run record).
    Stated,
    /// The most requests in flight at once.
    MaxInFlight,
}

/// The inferred gap of a run whose queue times were not stated.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct InferredGap {
    /// Inferred gap time / window length (`None` for an empty window).
    #[serde(rename = "value")]
    pub fraction: Option<f64>,
    /// The width used (slots the pipeline keeps busy).
    pub width: u32,
    /// Where the width came from.
    pub width_source: WidthSource,
    /// The shape, which is the method of the inference.
    pub method: Shape,
    /// Time with a slot free while (inferred) work was held back.
    #[serde(rename = "gap_time_s", serialize_with = "duration_secs::serialize")]
    pub gap_time: Duration,
    /// Slot time held back: for each burst, the slots free since the first
    /// release after the previous burst, times how long they stayed free (for a
    /// capacity ledger's `held_back` part, marked inferred).
    #[serde(
        rename = "held_back_slot_s",
        serialize_with = "duration_secs::serialize"
    )]
    pub held_back: Duration,
    /// Bursts of admissions (consecutive admissions with no release between).
    pub bursts: u64,
    /// Of which started right after a release (all but the first could be).
    pub prompted: u64,
    /// Mean releases before a prompted burst (about 1: work-conserving).
    pub releases_per_burst: Option<f64>,
    /// How to make the figure exact.
    pub recipe: &'static str,
}

/// Whether the run's queue times were not stated, so that its exact gap sees
/// only the producer's own queue: an import without them, or a proxy run none
/// of whose requests carried `x-tpscope-queued-at` (its `end` record says).
pub fn queue_times_unstated(input: &RunInput) -> bool {
    input
        .run
        .as_ref()
        .is_some_and(|r| r.queue_times == QueueTimes::Unmeasured)
        || input
            .end
            .as_ref()
            .is_some_and(|e| e.queued_at_stated == Some(0))
}

/// The pipeline's width as the run record states it (`load.pipeline_width`,
/// written by `tpscope proxy --pipeline-width`).
pub fn stated_width(input: &RunInput) -> Option<u32> {
    input
        .load_field("pipeline_width")
        .and_then(|v| v.as_u64())
        .and_then(|w| u32::try_from(w).ok())
        .filter(|w| *w > 0)
}

/// Infers the held-back gap of `spans` over `window` (`width`: stated, else the
/// most in flight). `None` when no span was admitted.
pub fn infer_gap(
    spans: &[SpanFacts],
    window: (Timestamp, Timestamp),
    width: Option<u32>,
) -> Option<InferredGap> {
    // (instant, +1 admission / -1 release); releases first at a tie, so a slot
    // handed over at one instant is not two in flight.
    let mut events: Vec<(i64, i8)> = Vec::with_capacity(spans.len() * 2);
    let mut held: Vec<i64> = Vec::with_capacity(spans.len());
    for s in spans {
        let Some(a) = s.admitted_at else { continue };
        let (a, r) = (
            a.unix_nanos(),
            s.released_at.unix_nanos().max(a.unix_nanos()),
        );
        events.push((a, 1));
        events.push((r, -1));
        held.push(r - a);
    }
    if events.is_empty() {
        return None;
    }
    events.sort_unstable();
    let (mut n, mut most) = (0i64, 0i64);
    for (_, d) in &events {
        n += i64::from(*d);
        most = most.max(n);
    }
    let (width, width_source) = match width {
        Some(w) if w > 0 => (w, WidthSource::Stated),
        _ => (
            u32::try_from(most).unwrap_or(u32::MAX).max(1),
            WidthSource::MaxInFlight,
        ),
    };
    held.sort_unstable();
    let median = held[held.len() / 2];
    let prompt_ns = ((median as f64 * PROMPT_SHARE) as i64).max(PROMPT_MIN.as_nanos() as i64);
    let w = Walk::new(width, window, prompt_ns).run(&events);
    let (w0, w1) = (window.0.unix_nanos(), window.1.unix_nanos());
    let later_bursts = w.bursts.saturating_sub(1);
    let method = if later_bursts == 0 {
        Shape::OneBurst
    } else if (w.prompted as f64) < 0.5 * later_bursts as f64 {
        Shape::Open
    } else if w.releases_before_prompted as f64 > 1.5 * w.prompted as f64 {
        Shape::Waves
    } else {
        Shape::WorkConserving
    };
    // Arrivals that do not follow releases say nothing of held-back work.
    let (gap_ns, slot_ns) = match method {
        Shape::Open | Shape::OneBurst => (0, 0.0),
        _ => (w.gap_ns, w.slot_ns),
    };
    Some(InferredGap {
        fraction: (w1 > w0).then(|| gap_ns as f64 / (w1 - w0) as f64),
        width,
        width_source,
        method,
        gap_time: Duration::from_nanos(gap_ns.max(0) as u64),
        held_back: Duration::from_secs_f64(slot_ns.max(0.0) / 1e9),
        bursts: w.bursts,
        prompted: w.prompted,
        releases_per_burst: (w.prompted > 0)
            .then(|| w.releases_before_prompted as f64 / w.prompted as f64),
        recipe: RECIPE,
    })
}

/// The walk over admissions and releases: bursts, and the free slot time
/// between each burst and the first release before it, kept when the burst
/// turns out to be prompted by a release.
struct Walk {
    width: i64,
    w0: i64,
    w1: i64,
    prompt_ns: i64,
    bursts: u64,
    prompted: u64,
    releases_before_prompted: u64,
    gap_ns: i64,
    slot_ns: f64,
}

impl Walk {
    fn new(width: u32, window: (Timestamp, Timestamp), prompt_ns: i64) -> Walk {
        Walk {
            width: i64::from(width),
            w0: window.0.unix_nanos(),
            w1: window.1.unix_nanos(),
            prompt_ns,
            bursts: 0,
            prompted: 0,
            releases_before_prompted: 0,
            gap_ns: 0,
            slot_ns: 0.0,
        }
    }

    /// The part of `[a, b)` inside the window.
    fn clip(&self, a: i64, b: i64) -> i64 {
        (b.min(self.w1) - a.max(self.w0)).max(0)
    }

    fn run(mut self, events: &[(i64, i8)]) -> Walk {
        let mut n = 0i64;
        let mut prev_t = events.first().map_or(0, |e| e.0);
        // Since the first release after the last burst: free time and slot
        // time, releases, the last release.
        let (mut pend_gap, mut pend_slot, mut releases) = (0i64, 0f64, 0u64);
        let mut last_release: Option<i64> = None;
        let mut in_burst = false;
        // The current burst's claim on the free time before it, settled when
        // the burst has ended (its size is known then).
        let mut claim: Option<Claim> = None;
        for &(t, d) in events {
            if releases > 0 {
                let dt = self.clip(prev_t, t);
                let free = (self.width - n).max(0);
                if free > 0 {
                    pend_gap += dt;
                    pend_slot += (free * dt) as f64;
                }
            }
            prev_t = t;
            if d > 0 {
                if !in_burst {
                    self.bursts += 1;
                    self.settle(claim.take());
                    claim = last_release.map(|r| Claim {
                        gap: pend_gap,
                        slot: pend_slot,
                        releases,
                        timely: t - r <= self.prompt_ns,
                        from_empty: n == 0,
                        size: 0,
                    });
                    (pend_gap, pend_slot, releases, last_release) = (0, 0.0, 0, None);
                    in_burst = true;
                }
                if let Some(c) = claim.as_mut() {
                    c.size += 1;
                }
                n += 1;
            } else {
                in_burst = false;
                releases += 1;
                last_release = Some(t);
                n -= 1;
            }
        }
        self.settle(claim);
        self
    }

    /// Counts a burst as prompted by the releases before it, and their free
    /// time as held back, when it came within the prompt window of a release,
    /// or refilled a drained pipeline with several requests at once: a wave
    /// whose client reacted late (a Python pipeline on a starved host sent its
    /// next batch 180–280 ms after the last release, outside the window, and
    /// its waves read as open arrivals). The late reaction is held back too: the
    /// work was ready.
    fn settle(&mut self, claim: Option<Claim>) {
        let Some(c) = claim else { return };
        if c.timely || (c.from_empty && c.size >= 2) {
            self.prompted += 1;
            self.releases_before_prompted += c.releases;
            self.gap_ns += c.gap;
            self.slot_ns += c.slot;
        }
    }
}

/// A burst's claim on the free time since the first release before it.
struct Claim {
    gap: i64,
    slot: f64,
    releases: u64,
    /// It started within the prompt window of the last release.
    timely: bool,
    /// Nothing was in flight when it started.
    from_empty: bool,
    /// Admissions in the burst.
    size: u64,
}

#[cfg(test)]
mod tests {
    use super::*;

    fn t(ms: i64) -> Timestamp {
        Timestamp::from_unix_nanos(1_800_000_000_000_000_000 + ms * 1_000_000)
    }

    fn span(a: i64, r: i64) -> SpanFacts {
        SpanFacts::ok(t(a), Some(t(a)), Some(t(a + 10)), Some(t(r)), t(r), 10)
    }

    /// Batches of `w` started together, each waiting for its slowest: request
    /// `i` of a batch lasts `base + i × step` ms; the next batch starts `think`
    /// ms after the slowest.
    fn waves(batches: usize, w: i64, base: i64, step: i64, think: i64) -> Vec<SpanFacts> {
        let mut out = Vec::new();
        let mut at = 0;
        for _ in 0..batches {
            for i in 0..w {
                out.push(span(at, at + base + i * step));
            }
            at += base + (w - 1) * step + think;
        }
        out
    }

    fn window(spans: &[SpanFacts]) -> (Timestamp, Timestamp) {
        let a = spans.iter().map(|s| s.queued_at).min().unwrap();
        let b = spans.iter().map(|s| s.released_at).max().unwrap();
        (a, b)
    }

    #[test]
    fn waves_hold_back_the_slots_freed_before_each_burst() {
        // Batches of 4 lasting 1, 2, 3, 4 s: each batch's slots free from the
        // first release (1 s) to the next batch (4 s + 5 ms). The pipeline's
        // own gap (work waiting, a slot free): 3.005 s of each 4.005 s, but
        // not after the last batch (no work waits then).
        let spans = waves(5, 4, 1000, 1000, 5);
        let g = infer_gap(&spans, window(&spans), None).unwrap();
        assert_eq!(g.method, Shape::Waves);
        assert_eq!((g.width, g.width_source), (4, WidthSource::MaxInFlight));
        assert_eq!((g.bursts, g.prompted), (5, 4));
        assert_eq!(g.releases_per_burst, Some(4.0));
        assert_eq!(g.gap_time, Duration::from_millis(4 * 3005));
        // Slots: 1 free for 1 s, 2 for 1 s, 3 for 1 s, 4 for 5 ms, per wave.
        assert_eq!(
            g.held_back,
            Duration::from_millis(4 * (1000 + 2000 + 3000 + 20))
        );
        let total = 5.0 * 4.005 - 0.005;
        let want = 4.0 * 3.005 / total;
        assert!((g.fraction.unwrap() - want).abs() < 1e-9, "{g:?}");
        assert_eq!(g.recipe, RECIPE);
    }

    #[test]
    fn waves_whose_client_reacts_late_are_still_waves() {
        // What broke: against real vLLM a Python pipeline's next batch came
        // 180-280 ms after the last release, outside the prompt window, and the
        // shape read as open arrivals (inferred 0 against its own gap of 0.29).
        // Batches of 4 lasting 1-4 s, the next sent 600 ms after the slowest
        // (the window is a tenth of the 2.5 s median: 250 ms).
        let spans = waves(5, 4, 1000, 1000, 600);
        let g = infer_gap(&spans, window(&spans), None).unwrap();
        assert_eq!(g.method, Shape::Waves, "{g:?}");
        assert_eq!((g.bursts, g.prompted), (5, 4));
        assert_eq!(g.gap_time, Duration::from_millis(4 * 3600));
    }

    #[test]
    fn a_worker_pool_refills_each_slot_at_once_and_holds_little_back() {
        // Four workers, each sending its next request 2 ms after the last.
        let mut spans = Vec::new();
        for wkr in 0..4i64 {
            let mut at = wkr * 37;
            for k in 0..20i64 {
                let d = 500 + ((wkr * 7 + k * 13) % 11) * 40;
                spans.push(span(at, at + d));
                at += d + 2;
            }
        }
        let g = infer_gap(&spans, window(&spans), None).unwrap();
        assert_eq!(g.method, Shape::WorkConserving, "{g:?}");
        assert_eq!(g.width, 4);
        assert!(g.fraction.unwrap() < 0.02, "{g:?}");
        assert!(g.releases_per_burst.unwrap() <= 1.5, "{g:?}");
    }

    #[test]
    fn arrivals_that_do_not_follow_releases_infer_nothing() {
        // One request every 700 ms lasting 1 s (never prompted by a release:
        // each arrives 300 ms or more after the last one ended).
        let spans: Vec<SpanFacts> = (0..30).map(|i| span(i * 700, i * 700 + 1000)).collect();
        let g = infer_gap(&spans, window(&spans), None).unwrap();
        assert_eq!(g.method, Shape::Open, "{g:?}");
        assert_eq!(g.fraction, Some(0.0));
        assert_eq!(g.held_back, Duration::ZERO);
    }

    #[test]
    fn everything_sent_at_once_is_one_burst_with_nothing_held_back() {
        let spans: Vec<SpanFacts> = (0..8).map(|i| span(0, 1000 + i * 100)).collect();
        let g = infer_gap(&spans, window(&spans), None).unwrap();
        assert_eq!(g.method, Shape::OneBurst);
        assert_eq!((g.width, g.bursts, g.prompted), (8, 1, 0));
        assert_eq!(g.fraction, Some(0.0));
    }

    #[test]
    fn a_stated_width_counts_slots_the_pipeline_never_filled() {
        // Waves of 2 in a pipeline stated 4 wide: 2 slots were free throughout,
        // so every moment between bursts counts, and more slot time.
        let spans = waves(3, 2, 1000, 1000, 0);
        let seen = infer_gap(&spans, window(&spans), None).unwrap();
        let stated = infer_gap(&spans, window(&spans), Some(4)).unwrap();
        assert_eq!(stated.width_source, WidthSource::Stated);
        assert_eq!(stated.method, Shape::Waves);
        assert_eq!(seen.gap_time, stated.gap_time);
        // Seen 2 wide: 1 slot for 1 s per wave; stated 4: 3 slots for 1 s.
        assert_eq!(seen.held_back, Duration::from_secs(2));
        assert_eq!(stated.held_back, Duration::from_secs(6));
    }

    #[test]
    fn only_the_window_counts_and_unadmitted_spans_are_left_out() {
        let mut spans = waves(3, 4, 1000, 1000, 0);
        let never = SpanFacts {
            admitted_at: None,
            ..span(500, 600)
        };
        spans.push(never);
        // Waves at 0, 4 and 8 s, each holding back from its first release
        // (1 s, 5 s) to the next burst: in 4 … 8 s only 5 … 8 s counts, in
        // 2 … 8 s also 2 … 4 s.
        let g = infer_gap(&spans, (t(4000), t(8000)), None).unwrap();
        assert_eq!(g.gap_time, Duration::from_secs(3));
        let g = infer_gap(&spans, (t(2000), t(8000)), None).unwrap();
        assert_eq!(g.gap_time, Duration::from_secs(5));
        assert!(infer_gap(&spans[12..], window(&spans), None).is_none());
    }

    #[test]
    fn the_report_infers_only_where_queue_times_were_not_stated() {
        use tpscope_model::EndRecord;
        let mut input = crate::test_support::capped_run(4);
        input.spans = waves(4, 4, 1000, 1000, 0);
        let end = |stated| EndRecord {
            run_id: "r".into(),
            ended_at: t(16_000),
            spans: 16,
            status: tpscope_model::StatusCounts {
                ok: 16,
                ..Default::default()
            },
            samples: 0,
            schedule_late_max: None,
            queued_at_stated: stated,
            cut_at_stop: Some(0),
            model: None,
        };
        let opts = crate::Options::default();
        // A bench run (no proxy counts) and a proxy run whose requests stated
        // their queue times: the exact figure stands alone.
        for stated in [None, Some(16)] {
            input.end = Some(end(stated));
            assert_eq!(crate::analyze(&input, &opts).gap_fraction_inferred, None);
        }
        // A proxy run none of whose requests said: exact 0, inferred 3/4.
        input.end = Some(end(Some(0)));
        let r = crate::analyze(&input, &opts);
        assert_eq!(r.gap_fraction, Some(0.0));
        let g = r.gap_fraction_inferred.unwrap();
        assert_eq!((g.method, g.width), (Shape::Waves, 4));
        assert!((g.fraction.unwrap() - 9.0 / 16.0).abs() < 1e-9, "{g:?}");
        // The width stated to the proxy (its run record), then to report.
        input.run.as_mut().unwrap().load = serde_json::json!({"pipeline_width": 6});
        let g = crate::analyze(&input, &opts).gap_fraction_inferred.unwrap();
        assert_eq!((g.width, g.width_source), (6, WidthSource::Stated));
        let opts = crate::Options {
            pipeline_width: Some(5),
            ..opts
        };
        assert_eq!(
            crate::analyze(&input, &opts)
                .gap_fraction_inferred
                .unwrap()
                .width,
            5
        );
        // An import without queue times: no exact gap, the inferred one.
        input.end = None;
        input.run.as_mut().unwrap().queue_times = QueueTimes::Unmeasured;
        let r = crate::analyze(&input, &opts);
        assert_eq!(r.gap_fraction, None);
        assert!(r.gap_fraction_inferred.is_some());
    }

    #[test]
    fn the_json_names_the_value_width_and_method() {
        let spans = waves(3, 4, 1000, 1000, 0);
        let g = infer_gap(&spans, window(&spans), None).unwrap();
        let v = serde_json::to_value(&g).unwrap();
        assert_eq!(v["method"], "waves");
        assert_eq!(v["width"], 4);
        assert_eq!(v["width_source"], "max_in_flight");
        assert!(v["value"].as_f64().unwrap() > 0.4);
        assert!(
            v["recipe"]
                .as_str()
                .unwrap()
                .contains("x-tpscope-queued-at")
        );
    }
}
