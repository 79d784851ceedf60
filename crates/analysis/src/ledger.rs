//! The capacity ledger: where every slot-second of the window went.
//! Slot-time ∫ cap(t) dt is partitioned, exactly, by what each slot was doing:
//! an occupied slot by its span's phase, a free one by whether work waited and
//! how soon the slot was refilled. One pass over the spans and one over the
//! steps' segments (the gap predicate is the steps'); no per-instant work.

use std::collections::VecDeque;
use std::time::Duration;

use tpscope_model::{Status, Timestamp};

use crate::input::{RunInput, SpanFacts};
use crate::steps::{Integrals, Segment, Steps};

/// The default hand-off threshold (`--handoff`): a freed slot refilled within
/// this much of work waiting was a hand-off, not held back.
pub const DEFAULT_HANDOFF: Duration = Duration::from_millis(10);

mod causes;
mod grid;
mod parts;

use grid::{Grid, Spread, Stage};

pub use causes::GapCause;
pub use parts::*;

/// A free slot waiting to be refilled: when it became free and the gap time
/// accumulated up to then (so its own gap time is a difference).
#[derive(Clone, Copy, Debug)]
struct FreeSlot {
    opened: i64,
    g_open: i64,
}

/// The free-slot side of the steps: a FIFO of free slots and the cumulative gap
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
    /// Refills timed (count, Σ wait ns) that were hand-offs and held back.
    refills: [(u64, i128); 2],
    spread: &'a mut Spread,
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
        let wait = t - waited_from;
        let part = if wait <= self.handoff {
            Part::Handoff
        } else {
            Part::HeldBack
        };
        if wait > 0 && slot.opened < self.grid.w1 && t > self.grid.w0 {
            let r = &mut self.refills[usize::from(part == Part::HeldBack)];
            r.0 += 1;
            r.1 += i128::from(wait);
        }
        let grid = self.grid;
        let (k0, k1) = (grid.idx(slot.opened), grid.idx(t));
        for k in k0..=k1 {
            let from = if k == k0 { slot.g_open } else { self.g_at[k] };
            let to = if k == k1 { self.g } else { self.g_at[k + 1] };
            self.spread.acc[k][part.index()] += i128::from((to - from).max(0));
        }
    }

    /// Makes the count of free slots `free` at `t`: new ones open, surplus
    /// ones (the oldest) close. Inlined for the common case of no change (a
    /// call per segment showed in instruction counts).
    #[inline(always)]
    fn set_free(&mut self, free: u32, t: i64) {
        if self.fifo.len() != free as usize {
            self.change_free(free, t);
        }
    }

    fn change_free(&mut self, free: u32, t: i64) {
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

/// What the busy pass saw besides the parts.
#[derive(Clone, Copy, Debug, Default)]
struct BusyFacts {
    /// Some retried span carried no attempt times.
    unsplit: bool,
    /// Admitted spans that overlap the window.
    requests: u64,
    /// Of which opened a connection.
    new_connections: u64,
    /// Tokens their failed attempts received.
    wasted_tokens: u64,
    /// Of the post time of spans whose end marker's arrival is known: from the
    /// last token to the end marker (the server ending its stream) …
    tail_ns: i64,
    /// … and from the end marker to the release (the client's own).
    after_end_ns: i64,
    /// The spans those two sums are over.
    split_spans: u64,
}

/// The busy parts: each admitted span's time in the window, by phase.
fn busy(input: &RunInput, spread: &mut Spread) -> BusyFacts {
    let grid = spread.grid;
    let mut facts = BusyFacts::default();
    let mut unsplit = false;
    let retried = retries(input);
    let mut next = retried.iter().peekable();
    let mut stages = std::mem::take(&mut spread.stages);
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
        facts.requests += 1;
        facts.new_connections += u64::from(s.client.connect.is_some());
        facts.wasted_tokens += s.wasted_tokens;
        // Phase edges, clamped into [a, r] and kept in order, so the phases
        // partition the slot's time whatever the span's stamps say.
        let mut at = a;
        let mut edge = |t: i64| {
            at = t.clamp(at, r);
            at
        };
        let connect = s.client.connect.map_or(0, |d| d.get().as_nanos() as i64);
        let c = edge(a.saturating_add(connect));
        // The phases follow one another: each starts its walk of the buckets
        // where the last ended.
        let mut pos = spread.at(a.max(grid.w0));
        if retry.is_none() && s.status != Status::Error {
            // Nearly every span: its phases counted by the stages it passes.
            let (f, l) = phase_ends(s, &mut edge, r);
            if c == a {
                stages.pass(&grid, &mut pos, a, Stage::AdmittedConnected);
            } else {
                stages.pass(&grid, &mut pos, a, Stage::Admitted);
                stages.pass(&grid, &mut pos, c, Stage::Connected);
            }
            stages.pass(&grid, &mut pos, f, Stage::FirstToken);
            // The last token is 0 to a few buckets on: found by division, not
            // walked to (the walk's exit mispredicted at nearly every span).
            pos = grid.at(l.max(grid.w0));
            stages.pass(&grid, &mut pos, l, Stage::LastToken);
            stages.pass(&grid, &mut pos, r, Stage::Released);
            facts.add_end(s, l, r);
            continue;
        }
        spread.add(&mut pos, Part::Connect, a, c, 1);
        let mut from = c;
        if let Some(&(_, last, wait)) = retry {
            let last = edge(last.unix_nanos());
            let b = (last - wait.as_nanos() as i64).max(from);
            spread.add(&mut pos, Part::Failed, from, b, 1);
            spread.add(&mut pos, Part::Backoff, b, last, 1);
            from = last;
        }
        if s.status == Status::Error {
            spread.add(&mut pos, Part::Failed, from, r, 1);
            continue;
        }
        let (f, l) = phase_ends(s, &mut edge, r);
        spread.add(&mut pos, Part::FirstTokenWait, from, f, 1);
        spread.add(&mut pos, Part::Generating, f, l, 1);
        spread.add(&mut pos, Part::Post, l, r, 1);
        facts.add_end(s, l, r);
    }
    spread.stages = stages;
    facts.unsplit = unsplit;
    facts
}

/// A span's first and last token as its phases end (`edge` keeps them in
/// order within its slot time; `r`: its release).
#[inline(always)]
fn phase_ends(s: &SpanFacts, edge: &mut impl FnMut(i64) -> i64, r: i64) -> (i64, i64) {
    let first = s
        .first_token_at
        .or(s.last_token_at)
        .map_or(r, |t| t.unix_nanos());
    let f = edge(first);
    let l = edge(s.last_token_at.map_or(f, |t| t.unix_nanos()));
    (f, l)
}

impl BusyFacts {
    /// Splits the post time of a span whose end marker's arrival is known
    /// (`l`, `r`: its last token and release as its phases end).
    #[inline(always)]
    fn add_end(&mut self, s: &SpanFacts, l: i64, r: i64) {
        if let Some(e) = s.client.end_at.map(|e| e.unix_nanos().clamp(l, r)) {
            self.tail_ns += e - l;
            self.after_end_ns += r - e;
            self.split_spans += 1;
        }
    }
}

/// What the free side found besides its parts.
struct FreeTotals {
    cap_ns: i128,
    above_ns: i128,
    uncapped_ns: i64,
    /// Gap time (work waited while a slot was free), clipped to the window.
    gap_ns: i64,
    refills: [(u64, i128); 2],
    /// The steps' integrals over the window, from the same pass.
    integrals: Integrals,
}

/// The free parts, from the steps' segments: free slots matched to admissions
/// first in, first out.
fn free(
    steps: &Steps,
    handoff: Duration,
    spread: &mut Spread,
    mut each: impl FnMut(&Segment),
) -> FreeTotals {
    let grid = spread.grid;
    let mut tot = FreeTotals {
        cap_ns: 0,
        above_ns: 0,
        uncapped_ns: 0,
        gap_ns: 0,
        refills: [(0, 0); 2],
        integrals: Integrals::default(),
    };
    let mut fs = FreeSlots {
        grid,
        handoff: handoff.as_nanos().min(i64::MAX as u128) as i64,
        fifo: VecDeque::new(),
        g: 0,
        g_at: vec![0; grid.n + 1],
        next_mark: 0,
        backlog_since: None,
        refills: [(0, 0); 2],
        spread,
    };
    // The bucket the last segment began in: segments come in time order.
    let mut pos = fs.spread.at(grid.w0);
    let mut last_end = grid.w1;
    // A cap and the window's time at it since it last changed.
    let mut at_cap = (0u32, 0i64);
    for seg in steps.segments() {
        each(&seg);
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
        tot.integrals.add(&seg, clipped);
        let g0 = fs.g;
        // The steps' own gap predicate: work waits while a slot is free.
        let gap = seg.is_gap() && free > 0;
        if gap {
            fs.g += clipped;
        }
        fs.mark(e, s, g0, gap);
        match seg.cap {
            Some(c) => {
                // The window's time at one cap, multiplied once per cap.
                if c != at_cap.0 {
                    tot.cap_ns += i128::from(at_cap.0) * i128::from(at_cap.1);
                    at_cap = (c, 0);
                }
                at_cap.1 += clipped;
                if seg.in_flight > c {
                    tot.above_ns += i128::from(seg.in_flight - c) * i128::from(clipped);
                }
            }
            None => tot.uncapped_ns += clipped,
        }
        if free > 0 && !seg.is_backlog() {
            fs.spread
                .add(&mut pos, Part::NoDemand, s, e, i64::from(free));
        }
        if s >= grid.w1 && fs.fifo.is_empty() {
            break;
        }
    }
    tot.cap_ns += i128::from(at_cap.0) * i128::from(at_cap.1);
    // Bucket starts after the last segment see the final gap clock; slots
    // still free when the run ends were never refilled.
    fs.mark(i64::MAX, i64::MAX, fs.g, false);
    fs.backlog_since = None;
    fs.set_free(0, last_end);
    tot.gap_ns = fs.g;
    tot.refills = fs.refills;
    tot
}

/// The ledger in slot-nanoseconds, per bucket and summed.
struct Tally {
    acc: Vec<SlotNanos>,
    sum: SlotNanos,
    tot: FreeTotals,
    busy: BusyFacts,
}

#[cfg(test)]
fn tally(input: &RunInput, steps: &Steps, grid: Grid, handoff: Duration) -> Tally {
    tally_with(input, steps, grid, handoff, |_| {})
}

/// The tally, showing `each` every segment of the steps it walks (the
/// segments of the window, and maybe some after).
fn tally_with(
    input: &RunInput,
    steps: &Steps,
    grid: Grid,
    handoff: Duration,
    each: impl FnMut(&Segment),
) -> Tally {
    let mut spread = Spread::new(grid);
    let busy = busy(input, &mut spread);
    let tot = free(steps, handoff, &mut spread, each);
    let acc = spread.finish();
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
        busy,
    }
}

/// The ledger of the window `[w0, w1)`, in `buckets` (length, count) when the
/// report has a time series.
pub fn capacity_ledger(
    input: &RunInput,
    steps: &Steps,
    window: (Timestamp, Timestamp),
    buckets: Option<(Duration, usize)>,
    handoff: Duration,
    queue_unmeasured: bool,
) -> Capacity {
    capacity_and_integrals(input, steps, window, buckets, handoff, queue_unmeasured).0
}

/// [`capacity_ledger`], and the steps' integrals over the same window (equal
/// to [`Steps::integrate`]'s) from the same pass over its segments: the
/// analysis needs both, and a pass of its own cost a fifth of the ledger.
pub fn capacity_and_integrals(
    input: &RunInput,
    steps: &Steps,
    window: (Timestamp, Timestamp),
    buckets: Option<(Duration, usize)>,
    handoff: Duration,
    queue_unmeasured: bool,
) -> (Capacity, Integrals) {
    capacity_integrals_and(
        input,
        steps,
        window,
        buckets,
        handoff,
        queue_unmeasured,
        |_| {},
    )
}

/// [`capacity_and_integrals`], showing `each` every segment of the window
/// (and maybe some after it) as its pass walks them: the time series' buckets
/// are filled there, without a walk of their own.
pub(crate) fn capacity_integrals_and(
    input: &RunInput,
    steps: &Steps,
    window: (Timestamp, Timestamp),
    buckets: Option<(Duration, usize)>,
    handoff: Duration,
    queue_unmeasured: bool,
    each: impl FnMut(&Segment),
) -> (Capacity, Integrals) {
    let (w0, w1) = (window.0.unix_nanos(), window.1.unix_nanos());
    let (b, n) = match buckets {
        Some((b, n)) if n > 0 && !b.is_zero() => (b.as_nanos() as i64, n),
        _ => ((w1 - w0).max(1), 1),
    };
    let Tally {
        acc,
        sum,
        tot,
        busy,
    } = tally_with(input, steps, Grid { w0, w1, b, n }, handoff, each);
    let known = |p: Part| missing_reason(input, p, busy.unsplit, tot.uncapped_ns, queue_unmeasured);
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
    let stat = |(count, wait): (u64, i128)| RefillStat {
        count,
        mean_wait_s: (count > 0).then(|| wait as f64 / count as f64 / 1e9),
    };
    let free_known = tot.uncapped_ns == 0 && !queue_unmeasured;
    let gap = sum[Part::Handoff.index()] + sum[Part::HeldBack.index()];
    let mut capacity = Capacity {
        slot_seconds: (tot.uncapped_ns == 0).then(|| secs(tot.cap_ns)),
        above_cap_slot_seconds: (tot.above_ns > 0).then(|| secs(tot.above_ns)),
        parts,
        handoff_threshold: handoff,
        buckets: buckets
            .is_some()
            .then(|| acc.iter().map(|row| row.map(secs)).collect()),
        refills: free_known.then(|| Refills {
            handoff: stat(tot.refills[0]),
            held_back: stat(tot.refills[1]),
            mean_free_slots_in_gap: (tot.gap_ns > 0).then(|| gap as f64 / tot.gap_ns as f64),
        }),
        causes: Vec::new(),
    };
    capacity.causes = causes::causes(
        &capacity,
        &causes::Evidence {
            requests: busy.requests,
            new_connections: busy.new_connections,
            wasted_tokens: busy.wasted_tokens,
            post_split: (busy.tail_ns + busy.after_end_ns > 0).then_some(causes::PostSplit {
                tail: Duration::from_nanos(busy.tail_ns.max(0) as u64),
                after_end: Duration::from_nanos(busy.after_end_ns.max(0) as u64),
                spans: busy.split_spans,
            }),
        },
    );
    (capacity, tot.integrals)
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
