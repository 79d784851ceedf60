//! The exact sweep over span edges: queue depth, in-flight and cap as step functions
//! of time, and their integrals over a window (gap time, backlog time, utilization)
//! — DESIGN.md §3 "Idle time". O(n log n) in spans.

use std::time::Duration;

use tpscope_model::Timestamp;

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
        self.queue_depth > 0 && self.cap.is_none_or(|c| self.in_flight < c)
    }

    /// Whether work waits.
    pub fn is_backlog(&self) -> bool {
        self.queue_depth > 0
    }

    /// Length in nanoseconds.
    pub fn nanos(&self) -> i64 {
        self.end.signed_nanos_since(self.start)
    }
}

/// No cap change on this edge.
const NO_CAP_CHANGE: u32 = u32::MAX;

/// One edge: 16 bytes, so that a million spans' four edges stay small.
#[derive(Clone, Copy, Debug)]
struct Edge {
    t: i64,
    dq: i16,
    df: i16,
    cap: u32,
}

/// The edges of all spans of a run and its cap changes, sorted once.
#[derive(Clone, Debug)]
pub struct Sweep {
    edges: Vec<Edge>,
    base_cap: Option<u32>,
}

impl Sweep {
    /// Builds the sweep of a run: span edges, the run's cap, and cap changes stated
    /// by samples (a sample's cap applies from its instant on).
    pub fn new(input: &RunInput) -> Sweep {
        let mut edges = Vec::with_capacity(input.spans.len() * 3 + 8);
        let edge = |t: Timestamp, dq, df| Edge {
            t: t.unix_nanos(),
            dq,
            df,
            cap: NO_CAP_CHANGE,
        };
        for s in &input.spans {
            let deq = s.dequeued_at();
            let queued = deq > s.queued_at;
            let admitted = s.admitted_at.filter(|&a| s.released_at > a);
            if queued {
                edges.push(edge(s.queued_at, 1, 0));
            }
            match admitted {
                // Leaving the queue and taking a slot at one instant is one edge:
                // fewer edges to sort.
                Some(a) if queued => edges.push(edge(a, -1, 1)),
                Some(a) => edges.push(edge(a, 0, 1)),
                None if queued => edges.push(edge(deq, -1, 0)),
                None => {}
            }
            if admitted.is_some() {
                edges.push(edge(s.released_at, 0, -1));
            }
        }
        edges.sort_unstable_by_key(|e| e.t);
        let mut caps: Vec<Edge> = input
            .samples
            .iter()
            .filter_map(|smp| {
                smp.cap.map(|c| Edge {
                    t: smp.at.unix_nanos(),
                    dq: 0,
                    df: 0,
                    cap: c.min(NO_CAP_CHANGE - 1),
                })
            })
            .collect();
        // Stable: of two cap changes at one instant, the later sample wins.
        caps.sort_by_key(|e| e.t);
        let edges = if caps.is_empty() {
            edges
        } else {
            merge_after_ties(edges, caps)
        };
        Sweep {
            edges,
            base_cap: input.run_cap(),
        }
    }

    /// The segments, in time order, from the first edge to the last. Stretches where
    /// nothing is queued or in flight are included (they count toward the window).
    pub fn segments(&self) -> Segments<'_> {
        Segments {
            edges: &self.edges,
            i: 0,
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

/// Merges two sorted edge lists; at equal instants the cap changes come last.
fn merge_after_ties(spans: Vec<Edge>, caps: Vec<Edge>) -> Vec<Edge> {
    let mut out = Vec::with_capacity(spans.len() + caps.len());
    let mut c = caps.into_iter().peekable();
    for e in spans {
        while let Some(cap) = c.next_if(|cap| cap.t < e.t) {
            out.push(cap);
        }
        out.push(e);
    }
    out.extend(c);
    out
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
}

/// Iterator over the [`Segment`]s of a [`Sweep`].
pub struct Segments<'a> {
    edges: &'a [Edge],
    i: usize,
    queue: i64,
    in_flight: i64,
    cap: Option<u32>,
}

impl Iterator for Segments<'_> {
    type Item = Segment;

    fn next(&mut self) -> Option<Segment> {
        loop {
            let t = self.edges.get(self.i)?.t;
            while let Some(e) = self.edges.get(self.i).filter(|e| e.t == t) {
                self.queue += i64::from(e.dq);
                self.in_flight += i64::from(e.df);
                if e.cap != NO_CAP_CHANGE {
                    self.cap = Some(e.cap);
                }
                self.i += 1;
            }
            let end = self.edges.get(self.i)?.t;
            if end > t {
                return Some(Segment {
                    start: Timestamp::from_unix_nanos(t),
                    end: Timestamp::from_unix_nanos(end),
                    queue_depth: self.queue.max(0) as u32,
                    in_flight: self.in_flight.max(0) as u32,
                    cap: self.cap,
                });
            }
        }
    }
}
