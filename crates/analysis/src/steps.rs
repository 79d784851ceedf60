//! The exact occupancy steps, built from span edges: queue depth, in-flight and cap as step functions
//! of time, and their integrals over a window (gap time, backlog time, utilization)
//! — docs/design.md §3 "Idle time". O(n log n) in spans.

use std::time::Duration;

use tpscope_model::{Occupancy, Timestamp};

use crate::input::RunInput;

/// A maximal stretch of time over which queue depth, in-flight and cap are constant.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Segment {
    /// Start (inclusive).
    pub start: Timestamp,
    /// End (exclusive); always after `start`.
    pub end: Timestamp,
    /// Spans with `queued_at ≤ t < admitted_at` (or `< released_at` if never admitted).
    pub queue_depth: u32,
    /// Spans with `admitted_at ≤ t < released_at`.
    pub in_flight: u32,
    /// The cap in force; `None` when uncapped or unknown.
    pub cap: Option<u32>,
}

impl Segment {
    /// Whether this stretch is a gap: work waits (queue depth > 0) while fewer
    /// streams than the cap are in flight (any in-flight count, when uncapped).
    pub fn is_gap(&self) -> bool {
        self.occupancy().is_gap()
    }

    /// Whether work waits.
    pub fn is_backlog(&self) -> bool {
        self.occupancy().is_backlog()
    }

    /// What the run held during this stretch.
    pub fn occupancy(&self) -> Occupancy {
        Occupancy {
            in_flight: self.in_flight,
            queue_depth: self.queue_depth,
            cap: self.cap,
        }
    }

    /// Length in nanoseconds.
    pub fn nanos(&self) -> i64 {
        self.end.signed_nanos_since(self.start)
    }
}

/// What a span edge changes: (queue depth, in-flight), indexed by the edge kind
/// (eight entries, so that any 3-bit kind indexes it without a bounds check).
const KINDS: [(i8, i8); 8] = [
    (1, 0),  // enters the queue
    (-1, 1), // leaves the queue and takes a slot at one instant
    (0, 1),  // takes a slot without waiting
    (-1, 0), // leaves the queue without a slot
    (0, -1), // gives its slot back
    (0, 0),
    (0, 0),
    (0, 0),
];
const ENQUEUE: u8 = 0;
const DEQUEUE_ADMIT: u8 = 1;
const ADMIT: u8 = 2;
const DEQUEUE: u8 = 3;
const RELEASE: u8 = 4;
const KIND_BITS: u32 = 3;

/// Span edges as integer keys, the instant (nanoseconds after `origin`) above the
/// kind: sorting them is a plain integer sort, and at a million spans 8-byte keys
/// sorted 2× faster than 16-byte edges. Runs whose edges span more than 2^61 ns
/// (73 years) get 16-byte keys. The order of edges at one instant is irrelevant:
/// a segment starts after all of them.
#[derive(Clone, Debug)]
enum Edges {
    Narrow(Vec<u64>),
    Wide(Vec<u128>),
}

/// An edge key: an offset from the steps' origin above a 3-bit kind.
trait Key: Copy {
    fn offset(self) -> u64;
    fn kind(self) -> usize;
}

impl Key for u64 {
    #[inline]
    fn offset(self) -> u64 {
        self >> KIND_BITS
    }
    #[inline]
    fn kind(self) -> usize {
        (self & 7) as usize
    }
}

impl Key for u128 {
    #[inline]
    fn offset(self) -> u64 {
        (self >> KIND_BITS) as u64
    }
    #[inline]
    fn kind(self) -> usize {
        (self & 7) as usize
    }
}

/// Applies the edges of `keys[*i..]` at `offset` to the counts; returns the
/// offset of the next edge, if any.
#[inline]
fn apply<K: Key>(
    keys: &[K],
    i: &mut usize,
    offset: u64,
    queue: &mut i64,
    in_flight: &mut i64,
) -> Option<u64> {
    while let Some(&k) = keys.get(*i) {
        if k.offset() != offset {
            return Some(k.offset());
        }
        let (dq, df) = KINDS[k.kind()];
        *queue += i64::from(dq);
        *in_flight += i64::from(df);
        *i += 1;
    }
    None
}

/// The edges of all spans of a run and its cap changes, sorted once.
#[derive(Clone, Debug)]
pub struct Steps {
    origin: i64,
    edges: Edges,
    /// Cap changes stated by samples: (instant, cap), in time order, a later
    /// sample after an earlier one at the same instant.
    caps: Vec<(i64, u32)>,
    base_cap: Option<u32>,
    /// The spans' first `queued_at` and last `released_at` (`None`: no spans).
    full: Option<(Timestamp, Timestamp)>,
}

impl Steps {
    /// Builds the steps of a run: span edges, the run's cap, and cap changes stated
    /// by samples (a sample's cap applies from its instant on).
    pub fn new(input: &RunInput) -> Steps {
        Steps::build(input, false)
    }

    /// [`Steps::new`], with 16-byte keys when `wide` even if 8 would do.
    fn build(input: &RunInput, wide: bool) -> Steps {
        // Each span's edges, as (instant, kind).
        let span_edges = |s: &crate::input::SpanFacts| {
            let deq = s.dequeued_at();
            let queued = deq > s.queued_at;
            let admitted = s.admitted_at.filter(|&a| s.released_at > a);
            let first = queued.then_some((s.queued_at, ENQUEUE));
            let middle = match admitted {
                // Leaving the queue and taking a slot at one instant is one edge:
                // fewer edges to sort.
                Some(a) if queued => Some((a, DEQUEUE_ADMIT)),
                Some(a) => Some((a, ADMIT)),
                None if queued => Some((deq, DEQUEUE)),
                None => None,
            };
            let last = admitted.map(|_| (s.released_at, RELEASE));
            [first, middle, last].into_iter().flatten()
        };
        // Every edge is at a span's queued_at, admitted_at or released_at (a span
        // built by a library caller need not have them in order). The same pass
        // finds the first queued_at and the last released_at: the full window
        // ([`Steps::span_bounds`]), which then needs no pass of its own.
        let mut full: Option<(Timestamp, Timestamp)> = None;
        let mut edge_bounds: Option<(Timestamp, Timestamp)> = None;
        for s in &input.spans {
            let (q, r) = (s.queued_at, s.released_at);
            full = Some(full.map_or((q, r), |(lo, hi)| (lo.min(q), hi.max(r))));
            let (lo, hi) = s
                .admitted_at
                .map_or((q.min(r), q.max(r)), |a| (q.min(a).min(r), q.max(a).max(r)));
            edge_bounds = Some(edge_bounds.map_or((lo, hi), |(l, h)| (l.min(lo), h.max(hi))));
        }
        let (origin, end) =
            edge_bounds.map_or((0, 0), |(lo, hi)| (lo.unix_nanos(), hi.unix_nanos()));
        let range = end.abs_diff(origin);
        let offset = |t: Timestamp| t.unix_nanos().abs_diff(origin);
        let capacity = input.spans.len() * 3;
        let edges = if range < 1 << (64 - KIND_BITS) && !wide {
            let mut keys = Vec::with_capacity(capacity);
            for s in &input.spans {
                keys.extend(
                    span_edges(s).map(|(t, kind)| offset(t) << KIND_BITS | u64::from(kind)),
                );
            }
            keys.sort_unstable();
            Edges::Narrow(keys)
        } else {
            let mut keys = Vec::with_capacity(capacity);
            for s in &input.spans {
                keys.extend(
                    span_edges(s)
                        .map(|(t, kind)| u128::from(offset(t)) << KIND_BITS | u128::from(kind)),
                );
            }
            keys.sort_unstable();
            Edges::Wide(keys)
        };
        let mut caps: Vec<(i64, u32)> = input
            .samples
            .iter()
            .filter_map(|smp| smp.cap.map(|c| (smp.at.unix_nanos(), c)))
            .collect();
        // Stable: of two cap changes at one instant, the later sample wins.
        caps.sort_by_key(|c| c.0);
        Steps {
            origin,
            edges,
            caps,
            base_cap: input.run_cap(),
            full,
        }
    }

    /// The first `queued_at` and the last `released_at` of the spans the steps
    /// were built from (`None`: none), found in the pass that builds them.
    pub fn span_bounds(&self) -> Option<(Timestamp, Timestamp)> {
        self.full
    }

    /// The end of the last stretch with work waiting: the last instant a span
    /// left the queue (every span that queued has left it by then, and it
    /// queued before). `None` when no span queued. Read from the edges'
    /// end, not by a walk of the segments.
    pub fn last_backlog_end(&self) -> Option<Timestamp> {
        fn last<K: Key>(keys: &[K]) -> Option<u64> {
            keys.iter()
                .rev()
                .find(|k| matches!(k.kind() as u8, DEQUEUE_ADMIT | DEQUEUE))
                .map(|k| k.offset())
        }
        let offset = match &self.edges {
            Edges::Narrow(k) => last(k),
            Edges::Wide(k) => last(k),
        }?;
        Some(Timestamp::from_unix_nanos(
            self.origin.wrapping_add(offset as i64),
        ))
    }

    /// The segments, in time order, from the first edge to the last. Stretches where
    /// nothing is queued or in flight are included (they count toward the window).
    pub fn segments(&self) -> Segments<'_> {
        let first_span = match &self.edges {
            Edges::Narrow(k) => k.first().map(|k| k.offset()),
            Edges::Wide(k) => k.first().map(|k| k.offset()),
        };
        Segments {
            steps: self,
            i: 0,
            c: 0,
            next_span: first_span.map(|o| self.origin.wrapping_add(o as i64)),
            queue: 0,
            in_flight: 0,
            cap: self.base_cap,
        }
    }

    /// Time-weighted integrals of the segments clipped to `[w0, w1)`.
    pub fn integrate(&self, w0: Timestamp, w1: Timestamp) -> Integrals {
        let mut acc = Integrals::default();
        for seg in self.segments() {
            if seg.end <= w0 {
                continue;
            }
            if seg.start >= w1 {
                break;
            }
            let a = seg.start.max(w0);
            let b = seg.end.min(w1);
            acc.add(&seg, b.signed_nanos_since(a));
        }
        acc
    }
}

/// Integrals over a window, in nanoseconds (× count for the weighted ones).
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Integrals {
    /// Time with queue depth > 0 and in-flight < cap.
    pub gap_ns: i64,
    /// Time with queue depth > 0.
    pub backlog_ns: i64,
    /// ∫ in_flight dt.
    pub in_flight_ns: f64,
    /// ∫ queue_depth dt.
    pub queue_ns: f64,
    /// ∫ cap dt over the capped part of the window.
    pub cap_ns: f64,
    /// Time over which the cap was unknown or unlimited.
    pub uncapped_ns: i64,
}

impl Integrals {
    /// Adds a stretch of `ns` nanoseconds in the state of `seg`.
    pub fn add(&mut self, seg: &Segment, ns: i64) {
        if ns <= 0 {
            return;
        }
        if seg.is_gap() {
            self.gap_ns += ns;
        }
        if seg.is_backlog() {
            self.backlog_ns += ns;
        }
        self.in_flight_ns += f64::from(seg.in_flight) * ns as f64;
        self.queue_ns += f64::from(seg.queue_depth) * ns as f64;
        match seg.cap {
            Some(c) => self.cap_ns += f64::from(c) * ns as f64,
            None => self.uncapped_ns += ns,
        }
    }

    /// Gap time as a duration.
    pub fn gap(&self) -> Duration {
        Duration::from_nanos(self.gap_ns.max(0) as u64)
    }

    /// Backlog time as a duration.
    pub fn backlog(&self) -> Duration {
        Duration::from_nanos(self.backlog_ns.max(0) as u64)
    }

    /// The share of the backlog that was gap, over a window of `window_ns`; `None`
    /// when there was no backlog to speak of (under [`BACKLOG_SHARE_MIN`] of the
    /// window): an open loop's requests wait microseconds each for the client to
    /// admit them, and that read as "gap 100 % of backlog".
    pub fn gap_share_of_backlog(&self, window_ns: i64) -> Option<f64> {
        if (self.backlog_ns as f64) < BACKLOG_SHARE_MIN * window_ns as f64 {
            return None;
        }
        crate::stats::ratio(self.gap_ns as f64, self.backlog_ns as f64)
    }
}

/// The least backlog, as a share of the window, whose gap share is reported.
pub const BACKLOG_SHARE_MIN: f64 = 0.01;

/// Iterator over the [`Segment`]s of a [`Steps`].
pub struct Segments<'a> {
    steps: &'a Steps,
    /// The next span edge.
    i: usize,
    /// The next cap change.
    c: usize,
    /// The instant of the next span edge.
    next_span: Option<i64>,
    queue: i64,
    in_flight: i64,
    cap: Option<u32>,
}

impl Segments<'_> {
    /// The instant of the next edge of either kind.
    #[inline]
    fn next_instant(&self) -> Option<i64> {
        let cap = self.steps.caps.get(self.c).map(|c| c.0);
        match (self.next_span, cap) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }
}

impl Iterator for Segments<'_> {
    type Item = Segment;

    // Inlined into each pass's loop: a call per segment (four passes over
    // ~2 segments a span) cost 7 % of the analysis' instructions.
    #[inline]
    fn next(&mut self) -> Option<Segment> {
        let steps = self.steps;
        let t = self.next_instant()?;
        if self.next_span == Some(t) {
            // Span edges are keyed by their offset from the origin (every span edge
            // is at or after it).
            let offset = t.wrapping_sub(steps.origin) as u64;
            let (q, f) = (&mut self.queue, &mut self.in_flight);
            let next = match &steps.edges {
                Edges::Narrow(k) => apply(k, &mut self.i, offset, q, f),
                Edges::Wide(k) => apply(k, &mut self.i, offset, q, f),
            };
            self.next_span = next.map(|o| steps.origin.wrapping_add(o as i64));
        }
        while let Some(&(_, cap)) = steps.caps.get(self.c).filter(|c| c.0 == t) {
            self.cap = Some(cap);
            self.c += 1;
        }
        // Every edge at `t` is consumed, so the segment is never empty.
        let end = self.next_instant()?;
        Some(Segment {
            start: Timestamp::from_unix_nanos(t),
            end: Timestamp::from_unix_nanos(end),
            queue_depth: self.queue.max(0) as u32,
            in_flight: self.in_flight.max(0) as u32,
            cap: self.cap,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::input::{SampleFacts, SpanFacts};
    use proptest::prelude::*;
    use tpscope_model::{Cause, Status};

    fn span(q: i64, a: Option<i64>, r: i64) -> SpanFacts {
        let t = Timestamp::from_unix_nanos;
        SpanFacts {
            status: Status::Error,
            error_cause: Some(Cause::Http5xx),
            queued_at: t(q),
            admitted_at: a.map(t),
            first_token_at: None,
            last_token_at: None,
            released_at: t(r),
            output_tokens: 0,
            input_tokens: None,
            retry_count: 0,
            retry_causes: Box::default(),
            wasted_tokens: 0,
            client: Default::default(),
            chunks: None,
            session: None,
        }
    }

    fn input(spans: Vec<SpanFacts>, caps: &[(i64, u32)]) -> RunInput {
        RunInput {
            spans,
            samples: caps
                .iter()
                .map(|&(at, cap)| SampleFacts {
                    at: Timestamp::from_unix_nanos(at),
                    in_flight: 0,
                    queue_depth: 0,
                    cap: Some(cap),
                })
                .collect(),
            ..RunInput::default()
        }
    }

    /// A run from 1700 to 2200: more than 2^61 ns, so 16-byte keys; checked by hand.
    #[test]
    fn runs_longer_than_73_years_are_swept_exactly() {
        let y1700 = -8_520_336_000_000_000_000i64;
        let y2200 = 7_258_118_400_000_000_000i64;
        let input = input(
            vec![
                span(y1700, Some(y1700 + 5), y1700 + 9),
                span(y2200, None, y2200 + 3),
            ],
            &[(y1700 - 1, 2), (y2200 + 1, 1)],
        );
        let steps = Steps::new(&input);
        assert!(matches!(steps.edges, Edges::Wide(_)));
        let got: Vec<_> = steps
            .segments()
            .map(|s| {
                (
                    s.start.unix_nanos(),
                    s.end.unix_nanos(),
                    s.queue_depth,
                    s.in_flight,
                    s.cap,
                )
            })
            .collect();
        assert_eq!(
            got,
            [
                (y1700 - 1, y1700, 0, 0, Some(2)),
                (y1700, y1700 + 5, 1, 0, Some(2)),
                (y1700 + 5, y1700 + 9, 0, 1, Some(2)),
                (y1700 + 9, y2200, 0, 0, Some(2)),
                (y2200, y2200 + 1, 1, 0, Some(2)),
                (y2200 + 1, y2200 + 3, 1, 0, Some(1)),
            ]
        );
    }

    /// Span facts built by a library caller are not checked: an admission before
    /// the span was queued must still sort before it (offsets from the earliest
    /// instant of any edge, not from the earliest queued_at).
    #[test]
    fn spans_with_edges_before_their_queued_at_are_swept_in_time_order() {
        let input = input(vec![span(10, Some(4), 20), span(6, Some(6), 8)], &[]);
        let got: Vec<_> = Steps::new(&input)
            .segments()
            .map(|s| (s.start.unix_nanos(), s.end.unix_nanos(), s.in_flight))
            .collect();
        assert_eq!(got, [(4, 6, 1), (6, 8, 2), (8, 20, 1)]);
    }

    proptest! {
        #[test]
        fn wide_and_narrow_keys_give_the_same_segments(
            spans in proptest::collection::vec(
                (0i64..50, proptest::option::of(0i64..20), 0i64..30),
                0..20,
            ),
            caps in proptest::collection::vec((-5i64..90, 1u32..4), 0..4),
        ) {
            let spans = spans
                .into_iter()
                .map(|(q, wait, hold)| {
                    let a = wait.map(|w| q + w);
                    span(q, a, a.unwrap_or(q) + hold)
                })
                .collect();
            let input = input(spans, &caps);
            let narrow: Vec<_> = Steps::build(&input, false).segments().collect();
            let wide: Vec<_> = Steps::build(&input, true).segments().collect();
            prop_assert_eq!(narrow, wide);
        }
    }
}
