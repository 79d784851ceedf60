//! The capacity ledger (issue 23): where every slot-second of the window went.
//! Slot-time ∫ cap(t) dt is partitioned, exactly, by what each slot was doing:
//! an occupied slot by its span's phase, a free one by whether work waited and
//! how soon the slot was refilled. One pass over the spans and one over the
//! sweep's segments (the gap predicate is the sweep's); no per-instant work.

use std::collections::VecDeque;
use std::time::Duration;

use serde::ser::SerializeMap;
use serde::{Serialize, Serializer};
use tpscope_model::{Status, Timestamp};

use crate::input::RunInput;
use crate::sweep::Sweep;

/// The default hand-off threshold (`--handoff`): a freed slot refilled within
/// this much of work waiting was a hand-off, not held back.
pub const DEFAULT_HANDOFF: Duration = Duration::from_millis(10);

/// What a slot was doing; the ledger's parts, in the order reports list them.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Part {
    /// Admitted, the connection not yet made.
    Connect,
    /// Request sent, no token yet (server queue, prefill, network).
    FirstTokenWait,
    /// Between the first and last token of an attempt that ended ok.
    Generating,
    /// Last token to release.
    Post,
    /// Inside an attempt that did not end ok.
    Failed,
    /// Between a failed attempt and the next, holding the slot.
    Backoff,
    /// Free while work waited, refilled within the hand-off threshold.
    Handoff,
    /// Free while work waited, longer than the threshold.
    HeldBack,
    /// Free with nothing waiting.
    NoDemand,
}

impl Part {
    /// Every part, in report order.
    pub const ALL: [Part; 9] = [
        Part::Connect,
        Part::FirstTokenWait,
        Part::Generating,
        Part::Post,
        Part::Failed,
        Part::Backoff,
        Part::Handoff,
        Part::HeldBack,
        Part::NoDemand,
    ];

    /// The part's name in every format.
    pub fn name(self) -> &'static str {
        match self {
            Part::Connect => "connect",
            Part::FirstTokenWait => "first_token_wait",
            Part::Generating => "generating",
            Part::Post => "post",
            Part::Failed => "failed",
            Part::Backoff => "backoff",
            Part::Handoff => "handoff",
            Part::HeldBack => "held_back",
            Part::NoDemand => "no_demand",
        }
    }

    /// Whether the part counts free slots (the others count occupied ones).
    pub fn is_free(self) -> bool {
        matches!(self, Part::Handoff | Part::HeldBack | Part::NoDemand)
    }

    fn index(self) -> usize {
        self as usize
    }
}

/// Slot-nanoseconds per part (integers, so the parts add up exactly).
pub type SlotNanos = [i128; 9];

/// How a part was found when it was not measured directly: a hook for
/// estimates (an inferred held-back share for logs without queue times).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Inferred {
    /// The method, in a few words.
    pub method: String,
}

/// One part of the ledger.
#[derive(Clone, Debug, PartialEq)]
pub struct LedgerPart {
    /// Which part.
    pub part: Part,
    /// Its slot-seconds (`None`: the run cannot know it; see `missing`).
    pub slot_seconds: Option<f64>,
    /// Its share of the slot-time (`None` when either is unknown).
    pub share: Option<f64>,
    /// Why it is absent.
    pub missing: Option<String>,
    /// Set when the figure is an estimate rather than a measurement.
    pub inferred: Option<Inferred>,
}

impl Serialize for LedgerPart {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut m = s.serialize_map(None)?;
        m.serialize_entry("slot_seconds", &self.slot_seconds)?;
        m.serialize_entry("share", &self.share)?;
        if let Some(why) = &self.missing {
            m.serialize_entry("missing", why)?;
        }
        if let Some(inf) = &self.inferred {
            m.serialize_entry("inferred", &true)?;
            m.serialize_entry("method", &inf.method)?;
        }
        m.end()
    }
}

/// The ledger of a window: slot-time and its parts, per bucket when the report
/// has a time series.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Capacity {
    /// ∫ cap dt over the window (`None` when the cap was unknown or unlimited
    /// for part of it: free slots are then not defined).
    pub slot_seconds: Option<f64>,
    /// ∫ (in_flight − cap)⁺ dt: spans in flight above the cap (a merged or
    /// corrupt log), included in the busy parts; absent when none.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub above_cap_slot_seconds: Option<f64>,
    /// The parts, in [`Part::ALL`] order.
    #[serde(serialize_with = "parts_map")]
    pub parts: Vec<LedgerPart>,
    /// The hand-off threshold used.
    #[serde(rename = "handoff_threshold_s", serialize_with = "crate::report::secs")]
    pub handoff_threshold: Duration,
    /// Slot-seconds per part per bucket of the time series (absent without one).
    #[serde(
        skip_serializing_if = "Option::is_none",
        serialize_with = "buckets_map"
    )]
    pub buckets: Option<Vec<[f64; 9]>>,
}

impl Capacity {
    /// The part `p`.
    pub fn part(&self, p: Part) -> &LedgerPart {
        &self.parts[p.index()]
    }

    /// The slot-seconds of `p`, when known.
    pub fn seconds(&self, p: Part) -> Option<f64> {
        self.part(p).slot_seconds
    }

    /// The share of `p`, when known.
    pub fn share(&self, p: Part) -> Option<f64> {
        self.part(p).share
    }
}

fn parts_map<S: Serializer>(parts: &[LedgerPart], s: S) -> Result<S::Ok, S::Error> {
    let mut m = s.serialize_map(Some(parts.len()))?;
    for p in parts {
        m.serialize_entry(p.part.name(), p)?;
    }
    m.end()
}

fn buckets_map<S: Serializer>(b: &Option<Vec<[f64; 9]>>, s: S) -> Result<S::Ok, S::Error> {
    let b = b.as_deref().unwrap_or_default();
    let mut m = s.serialize_map(Some(9))?;
    for p in Part::ALL {
        let col: Vec<f64> = b.iter().map(|row| row[p.index()]).collect();
        m.serialize_entry(p.name(), &col)?;
    }
    m.end()
}

/// Where the ledger adds up: the window `[w0, w1)` cut into `n` buckets of `b`
/// nanoseconds (the last clipped at `w1`).
#[derive(Clone, Copy, Debug)]
struct Grid {
    w0: i64,
    w1: i64,
    b: i64,
    n: usize,
}

impl Grid {
    fn idx(&self, t: i64) -> usize {
        (((t - self.w0).max(0) / self.b) as usize).min(self.n - 1)
    }

    fn start(&self, k: usize) -> i64 {
        self.w0 + k as i64 * self.b
    }

    fn end(&self, k: usize) -> i64 {
        if k + 1 == self.n {
            self.w1
        } else {
            self.start(k + 1)
        }
    }

    /// Adds `weight` slots over `[s, e)` ∩ window to `part`, bucket by bucket.
    fn spread(&self, acc: &mut [SlotNanos], part: Part, s: i64, e: i64, weight: i128) {
        let (s, e) = (s.max(self.w0), e.min(self.w1));
        if e <= s || weight == 0 {
            return;
        }
        let (k0, k1) = (self.idx(s), self.idx(e - 1));
        for (k, row) in acc.iter_mut().enumerate().take(k1 + 1).skip(k0) {
            let len = e.min(self.end(k)) - s.max(self.start(k));
            row[part.index()] += weight * i128::from(len.max(0));
        }
    }
}

/// A free slot waiting to be refilled: when it became free and the gap time
/// accumulated up to then (so its own gap time is a difference).
#[derive(Clone, Copy, Debug)]
struct FreeSlot {
    opened: i64,
    g_open: i64,
}

/// The free-slot side of the sweep: a FIFO of free slots and the cumulative gap
/// clock `g` (window time during which work waited), with its value at each
/// bucket start so that a slot's gap time can be cut into buckets.
struct FreeSlots<'a> {
    grid: Grid,
    handoff: i64,
    fifo: VecDeque<FreeSlot>,
    g: i64,
    g_at: Vec<i64>,
    /// The next bucket start whose `g_at` is not yet set.
    next_mark: usize,
    /// Start of the current stretch with work waiting, if any.
    backlog_since: Option<i64>,
    acc: &'a mut [SlotNanos],
}

impl FreeSlots<'_> {
    /// The gap clock at bucket starts up to `t`: `g` has been advanced to the
    /// segment end; `g_seg0`/`s` are its value and instant at the segment start
    /// and `gap` whether it grew over it.
    fn mark(&mut self, t: i64, s: i64, g_seg0: i64, gap: bool) {
        while self.next_mark < self.grid.n && self.grid.start(self.next_mark) <= t {
            let at = self.grid.start(self.next_mark);
            let grown = if gap {
                (at.min(self.grid.w1) - s.max(self.grid.w0)).max(0)
            } else {
                0
            };
            self.g_at[self.next_mark] = (g_seg0 + grown).min(self.g);
            self.next_mark += 1;
        }
    }

    /// Closes the oldest free slot at `t` (an admission or a cap cut): its gap
    /// time is a hand-off when it was refilled within the threshold of work
    /// starting to wait for it, else held back.
    fn close(&mut self, t: i64) {
        let Some(slot) = self.fifo.pop_front() else {
            return;
        };
        let waited_from = self.backlog_since.map_or(t, |b| b.max(slot.opened));
        let part = if t - waited_from <= self.handoff {
            Part::Handoff
        } else {
            Part::HeldBack
        };
        let grid = self.grid;
        let (k0, k1) = (grid.idx(slot.opened), grid.idx(t));
        for k in k0..=k1 {
            let from = if k == k0 { slot.g_open } else { self.g_at[k] };
            let to = if k == k1 { self.g } else { self.g_at[k + 1] };
            self.acc[k][part.index()] += i128::from((to - from).max(0));
        }
    }

    /// Makes the count of free slots `free` at `t`: new ones open, surplus
    /// ones (the oldest) close.
    fn set_free(&mut self, free: u32, t: i64) {
        while self.fifo.len() > free as usize {
            self.close(t);
        }
        while self.fifo.len() < free as usize {
            self.fifo.push_back(FreeSlot {
                opened: t,
                g_open: self.g,
            });
        }
    }
}

/// Per-span retry facts: index, time spent between attempts, last attempt start.
fn retries(input: &RunInput) -> Vec<(usize, Timestamp, Duration)> {
    let mut waits = input.retry_waits.clone();
    waits.sort_by_key(|w| w.0);
    let mut v: Vec<(usize, Timestamp, Duration)> = input
        .last_attempts
        .iter()
        .map(|&(i, t)| {
            let wait = waits
                .binary_search_by_key(&i, |w| w.0)
                .map_or(Duration::ZERO, |k| waits[k].1);
            (i, t, wait)
        })
        .collect();
    v.sort_by_key(|r| r.0);
    v
}

/// The busy parts: each admitted span's time in the window, by phase. Returns
/// whether some retried span carried no attempt times.
fn busy(input: &RunInput, grid: &Grid, acc: &mut [SlotNanos]) -> bool {
    let mut unsplit = false;
    let retried = retries(input);
    let mut next = retried.iter().peekable();
    for (i, s) in input.spans.iter().enumerate() {
        let retry = loop {
            match next.peek() {
                Some(r) if r.0 < i => {
                    next.next();
                }
                Some(r) if r.0 == i => break next.next(),
                _ => break None,
            }
        };
        unsplit |= s.retry_count > 0 && retry.is_none();
        let Some(a) = s.admitted_at.map(|a| a.unix_nanos()) else {
            continue;
        };
        let r = s.released_at.unix_nanos();
        if r <= a || r <= grid.w0 || a >= grid.w1 {
            continue;
        }
        // Phase edges, clamped into [a, r] and kept in order, so the phases
        // partition the slot's time whatever the span's stamps say.
        let mut at = a;
        let mut edge = |t: i64| {
            at = t.clamp(at, r);
            at
        };
        let connect = s.client.connect.map_or(0, |d| d.as_nanos() as i64);
        let c = edge(a.saturating_add(connect));
        grid.spread(acc, Part::Connect, a, c, 1);
        let mut from = c;
        if let Some(&(_, last, wait)) = retry {
            let last = edge(last.unix_nanos());
            let b = (last - wait.as_nanos() as i64).max(from);
            grid.spread(acc, Part::Failed, from, b, 1);
            grid.spread(acc, Part::Backoff, b, last, 1);
            from = last;
        }
        if s.status == Status::Error {
            grid.spread(acc, Part::Failed, from, r, 1);
            continue;
        }
        let first = s
            .first_token_at
            .or(s.last_token_at)
            .map_or(r, |t| t.unix_nanos());
        let f = edge(first);
        let l = edge(s.last_token_at.map_or(f, |t| t.unix_nanos()));
        grid.spread(acc, Part::FirstTokenWait, from, f, 1);
        grid.spread(acc, Part::Generating, f, l, 1);
        grid.spread(acc, Part::Post, l, r, 1);
    }
    unsplit
}

/// What the free side found besides its parts.
struct FreeTotals {
    cap_ns: i128,
    above_ns: i128,
    uncapped_ns: i64,
}

/// The free parts, from the sweep's segments: free slots matched to admissions
/// first in, first out.
fn free(sweep: &Sweep, grid: Grid, handoff: Duration, acc: &mut [SlotNanos]) -> FreeTotals {
    let mut tot = FreeTotals {
        cap_ns: 0,
        above_ns: 0,
        uncapped_ns: 0,
    };
    let mut fs = FreeSlots {
        grid,
        handoff: handoff.as_nanos().min(i64::MAX as u128) as i64,
        fifo: VecDeque::new(),
        g: 0,
        g_at: vec![0; grid.n + 1],
        next_mark: 0,
        backlog_since: None,
        acc,
    };
    let mut last_end = grid.w1;
    for seg in sweep.segments() {
        let (s, e) = (seg.start.unix_nanos(), seg.end.unix_nanos());
        last_end = e;
        let free = seg.cap.map_or(0, |c| c.saturating_sub(seg.in_flight));
        // Before a slot opens or closes at `s`, the backlog that is waiting for
        // it: still the one before `s` when work keeps waiting across it.
        fs.set_free(free, s);
        fs.backlog_since = if seg.is_backlog() {
            Some(fs.backlog_since.unwrap_or(s))
        } else {
            None
        };
        let (cs, ce) = (s.max(grid.w0), e.min(grid.w1));
        let clipped = (ce - cs).max(0);
        let g0 = fs.g;
        // The sweep's own gap predicate: work waits while a slot is free.
        let gap = seg.is_gap() && free > 0;
        if gap {
            fs.g += clipped;
        }
        fs.mark(e, s, g0, gap);
        match seg.cap {
            Some(c) => {
                tot.cap_ns += i128::from(c) * i128::from(clipped);
                let over = seg.in_flight.saturating_sub(c);
                tot.above_ns += i128::from(over) * i128::from(clipped);
            }
            None => tot.uncapped_ns += clipped,
        }
        if !seg.is_backlog() {
            grid.spread(fs.acc, Part::NoDemand, s, e, i128::from(free));
        }
        if s >= grid.w1 && fs.fifo.is_empty() {
            break;
        }
    }
    // Bucket starts after the last segment see the final gap clock; slots
    // still free when the run ends were never refilled.
    fs.mark(i64::MAX, i64::MAX, fs.g, false);
    fs.backlog_since = None;
    fs.set_free(0, last_end);
    tot
}

/// The ledger in slot-nanoseconds, per bucket and summed.
struct Tally {
    acc: Vec<SlotNanos>,
    sum: SlotNanos,
    tot: FreeTotals,
    unsplit: bool,
}

fn tally(input: &RunInput, sweep: &Sweep, grid: Grid, handoff: Duration) -> Tally {
    let mut acc = vec![[0i128; 9]; grid.n];
    let unsplit = busy(input, &grid, &mut acc);
    let tot = free(sweep, grid, handoff, &mut acc);
    let mut sum = [0i128; 9];
    for row in &acc {
        for (s, x) in sum.iter_mut().zip(row) {
            *s += x;
        }
    }
    Tally {
        acc,
        sum,
        tot,
        unsplit,
    }
}

/// The ledger of the window `[w0, w1)`, in `buckets` (length, count) when the
/// report has a time series.
pub fn capacity_ledger(
    input: &RunInput,
    sweep: &Sweep,
    window: (Timestamp, Timestamp),
    buckets: Option<(Duration, usize)>,
    handoff: Duration,
    queue_unmeasured: bool,
) -> Capacity {
    let (w0, w1) = (window.0.unix_nanos(), window.1.unix_nanos());
    let (b, n) = match buckets {
        Some((b, n)) if n > 0 && !b.is_zero() => (b.as_nanos() as i64, n),
        _ => ((w1 - w0).max(1), 1),
    };
    let Tally {
        acc,
        sum,
        tot,
        unsplit,
    } = tally(input, sweep, Grid { w0, w1, b, n }, handoff);
    let known = |p: Part| missing_reason(input, p, unsplit, tot.uncapped_ns, queue_unmeasured);
    let slot_ns = (tot.uncapped_ns == 0).then_some(tot.cap_ns + tot.above_ns);
    let secs = |ns: i128| ns as f64 / 1e9;
    let parts = Part::ALL
        .iter()
        .map(|&p| {
            let missing = known(p);
            let x = sum[p.index()];
            let slot_seconds = missing.is_none().then(|| secs(x));
            LedgerPart {
                part: p,
                slot_seconds,
                share: slot_seconds
                    .and(slot_ns)
                    .filter(|&t| t > 0)
                    .map(|t| x as f64 / t as f64),
                missing,
                inferred: None,
            }
        })
        .collect();
    Capacity {
        slot_seconds: (tot.uncapped_ns == 0).then(|| secs(tot.cap_ns)),
        above_cap_slot_seconds: (tot.above_ns > 0).then(|| secs(tot.above_ns)),
        parts,
        handoff_threshold: handoff,
        buckets: buckets
            .is_some()
            .then(|| acc.iter().map(|row| row.map(secs)).collect()),
    }
}

/// Why the run cannot know part `p` (`None`: it can).
fn missing_reason(
    input: &RunInput,
    p: Part,
    unsplit_retries: bool,
    uncapped_ns: i64,
    queue_unmeasured: bool,
) -> Option<String> {
    match p {
        Part::Connect if !input.spans.iter().any(|s| s.client.connect.is_some()) => {
            Some("no attempt recorded a connect time (counted in first_token_wait)".into())
        }
        Part::Backoff if unsplit_retries => {
            Some("retried spans carry no attempt times (back-off counted in failed)".into())
        }
        _ if p.is_free() && uncapped_ns > 0 => Some(format!(
            "the cap was unknown or unlimited for {:.3} s of the window: free slots are not defined",
            uncapped_ns as f64 / 1e9
        )),
        _ if p.is_free() && queue_unmeasured => {
            Some("the producer recorded no queue times: whether work waited is not known".into())
        }
        _ => None,
    }
}

#[cfg(test)]
mod tests;
