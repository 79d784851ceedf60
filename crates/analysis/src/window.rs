//! The window a run's figures cover — all of it, its steady state, or a range
//! given in seconds from its start — and the window stage of [`crate::analyze()`]:
//! which window, and the warnings when the one asked for is not there.

use std::time::Duration;

use serde::Serialize;
use tpscope_model::Timestamp;
use tpscope_model::time::duration_secs;

use crate::input::RunInput;
use crate::steps::Steps;

/// Which window the figures cover.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum WindowSpec {
    /// First `queued_at` to last `released_at`.
    #[default]
    Full,
    /// From in-flight first reaching the cap to the backlog last emptying (falls back
    /// to the full window, with a warning, when the run has no such stretch).
    Steady,
    /// `[from, to]` as offsets from the run's start.
    Range {
        /// Start offset.
        from: Duration,
        /// End offset (after `from`).
        to: Duration,
    },
}

/// Which stretch of time a run's figures cover.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum WindowKind {
    /// First `queued_at` to last `released_at`.
    Full,
    /// From in-flight first reaching the cap to the backlog last emptying.
    Steady,
    /// A range given in seconds from the run's start.
    Range,
}

/// A time window `[start, end]`.
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
pub struct Window {
    /// How it was chosen.
    pub kind: WindowKind,
    /// Start instant.
    pub start: Timestamp,
    /// End instant.
    pub end: Timestamp,
    /// `end − start`.
    #[serde(rename = "duration_s", serialize_with = "duration_secs::serialize")]
    pub duration: Duration,
    /// Start, as an offset from the run's start.
    #[serde(rename = "from_s", serialize_with = "duration_secs::serialize")]
    pub from: Duration,
    /// End, as an offset from the run's start.
    #[serde(rename = "to_s", serialize_with = "duration_secs::serialize")]
    pub to: Duration,
}

fn window_of(kind: WindowKind, start: Timestamp, end: Timestamp, origin: Timestamp) -> Window {
    Window {
        kind,
        start,
        end,
        duration: end.since(start).unwrap_or_default(),
        from: start.since(origin).unwrap_or_default(),
        to: end.since(origin).unwrap_or_default(),
    }
}

/// The steady-state window: from the first instant in-flight reaches the cap to the
/// last instant the backlog empties. `None` without a cap, a backlog, or a stretch
/// between the two.
pub fn steady_bounds(steps: &Steps) -> Option<(Timestamp, Timestamp)> {
    // The backlog's last end is read from the edges: only the walk to the
    // first segment at the cap is left (a walk of every segment was 2 % of
    // reading and analysing a million spans).
    let e = steps.last_backlog_end()?;
    let s = steps.segments().find(|seg| seg.occupancy().at_cap())?.start;
    (e > s).then_some((s, e))
}

/// A run's windows: the one its figures cover, and the two it always has.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Windows {
    /// First `queued_at` to last `released_at` (`None`: no spans).
    pub full: Option<Window>,
    /// The steady state, when the run has one.
    pub steady: Option<Window>,
    /// The window asked for (the full one when no steady state was found).
    pub chosen: Option<Window>,
}

impl Windows {
    /// The chosen window's `[start, end]` (both the epoch when there is none).
    pub fn bounds(&self) -> (Timestamp, Timestamp) {
        self.chosen.map(|w| (w.start, w.end)).unwrap_or_default()
    }
}

/// The window stage: the run's full and steady windows and the one `spec` asks
/// for, with a warning when it asks for a steady state the run does not have
/// (`steps`: [`Steps::new`] of `input`).
pub fn windows(
    input: &RunInput,
    steps: &Steps,
    spec: WindowSpec,
    warnings: &mut Vec<String>,
) -> Windows {
    // Both ends of the full window, found as the steps were built (`steps`
    // are `input`'s).
    let (first_queued, last_released) = steps.span_bounds().unzip();
    let origin = input.origin().or(first_queued).unwrap_or_default();
    let steady = steady_bounds(steps).map(|(s, e)| window_of(WindowKind::Steady, s, e, origin));
    let full = first_queued
        .zip(last_released)
        .map(|(s, e)| window_of(WindowKind::Full, s, e, origin));
    let chosen = match spec {
        WindowSpec::Full => full,
        WindowSpec::Steady => match steady {
            Some(w) => Some(w),
            None => {
                warnings.push(
                    "no steady-state window (in-flight never reached the cap while work waited); \
                     figures cover the full window"
                        .to_string(),
                );
                full
            }
        },
        WindowSpec::Range { from, to } => Some(window_of(
            WindowKind::Range,
            origin.after(from),
            origin.after(to),
            origin,
        )),
    };
    Windows {
        full,
        steady,
        chosen,
    }
}

/// The warning for a range that holds no span (`spans`: those released in it).
pub fn empty_range_warning(spec: WindowSpec, w: &Windows, spans: u64) -> Option<String> {
    if !matches!(spec, WindowSpec::Range { .. }) || spans != 0 {
        return None;
    }
    let (w, f) = (w.chosen?, w.full?);
    Some(format!(
        "the window {:.3}–{:.3} s holds no spans (the run covers \
         {:.3}–{:.3} s after its start): the window is empty",
        w.from.as_secs_f64(),
        w.to.as_secs_f64(),
        f.from.as_secs_f64(),
        f.to.as_secs_f64()
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::test_support::{capped_run, ok_span, ts};

    /// Two spans through a cap of one: the second waits 1 s for the first's slot.
    fn run() -> RunInput {
        let mut input = capped_run(1);
        input.spans = vec![ok_span(0, 0, 2000, 10), ok_span(1000, 2000, 4000, 10)];
        input
    }

    /// Every segment walked, as the steady window was first found.
    fn walked_steady_bounds(steps: &Steps) -> Option<(Timestamp, Timestamp)> {
        let mut start = None;
        let mut last_backlog_end = None;
        for seg in steps.segments() {
            if start.is_none() && seg.occupancy().at_cap() {
                start = Some(seg.start);
            }
            if seg.is_backlog() {
                last_backlog_end = Some(seg.end);
            }
        }
        let (s, e) = (start?, last_backlog_end?);
        (e > s).then_some((s, e))
    }

    proptest::proptest! {
        /// The steady window with the backlog's end read from the edges is
        /// the walked one: spans never admitted, admitted at their release,
        /// cap changes stated by samples.
        #[test]
        fn the_steady_window_is_the_walked_one(
            spans in proptest::collection::vec(
                (0i64..500, 0i64..80, 0i64..200, proptest::bool::weighted(0.9)),
                0..30,
            ),
            cap in 1u32..4,
            caps in proptest::collection::vec((0i64..600, 1u32..4), 0..3),
        ) {
            let mut input = capped_run(cap);
            for &(q, wait, hold, admitted) in &spans {
                let mut s = ok_span(q, q + wait, q + wait + hold, 1);
                if !admitted {
                    s.admitted_at = None;
                    s.first_token_at = None;
                    s.last_token_at = None;
                }
                input.spans.push(s);
            }
            for &(at, c) in &caps {
                input.samples.push(crate::input::SampleFacts {
                    at: ts(at),
                    in_flight: 0,
                    queue_depth: 0,
                    cap: Some(c),
                });
            }
            let steps = Steps::new(&input);
            proptest::prop_assert_eq!(steady_bounds(&steps), walked_steady_bounds(&steps));
        }
    }

    #[test]
    fn full_is_first_queue_to_last_release_from_the_runs_start() {
        let input = run();
        let mut warnings = Vec::new();
        let w = windows(&input, &Steps::new(&input), WindowSpec::Full, &mut warnings);
        let full = w.full.unwrap();
        assert_eq!((full.start, full.end), (ts(0), ts(4000)));
        assert_eq!(full.duration, Duration::from_secs(4));
        assert_eq!(w.chosen, w.full);
        assert_eq!(w.bounds(), (ts(0), ts(4000)));
        assert!(warnings.is_empty(), "{warnings:?}");
    }

    #[test]
    fn steady_asked_for_without_a_steady_state_falls_back_with_a_warning() {
        let mut input = run();
        input.spans.truncate(1);
        let mut warnings = Vec::new();
        let w = windows(
            &input,
            &Steps::new(&input),
            WindowSpec::Steady,
            &mut warnings,
        );
        assert_eq!(w.steady, None);
        assert_eq!(w.chosen, w.full);
        assert!(
            warnings[0].starts_with("no steady-state window"),
            "{warnings:?}"
        );
    }

    #[test]
    fn a_range_is_offsets_from_the_start_and_an_empty_one_is_said() {
        let input = run();
        let spec = WindowSpec::Range {
            from: Duration::from_secs(10),
            to: Duration::from_secs(20),
        };
        let w = windows(&input, &Steps::new(&input), spec, &mut Vec::new());
        let r = w.chosen.unwrap();
        assert_eq!(
            (r.kind, r.start, r.end),
            (WindowKind::Range, ts(10_000), ts(20_000))
        );
        let warning = empty_range_warning(spec, &w, 0).unwrap();
        assert!(
            warning.starts_with(
                "the window 10.000–20.000 s holds no spans (the run covers 0.000–4.000 s"
            ),
            "{warning}"
        );
        assert_eq!(empty_range_warning(spec, &w, 1), None);
        assert_eq!(empty_range_warning(WindowSpec::Full, &w, 0), None);
    }
}
