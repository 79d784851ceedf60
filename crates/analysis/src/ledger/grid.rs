//! The ledger's buckets and how slot-time is added to them: each end of an
//! interval costs O(1) whatever the buckets it crosses (a step in its part's
//! rate), so the busy pass costs a few steps per span, not one loop per phase.
//! An ok span's phases are counted by the stages it passes ([`Stage`]): one
//! step per stage, not two per phase.

use super::{Part, SlotNanos};

/// Where the ledger adds up: the window `[w0, w1)` cut into `n` buckets of `b`
/// nanoseconds (the last clipped at `w1`).
#[derive(Clone, Copy, Debug)]
pub(super) struct Grid {
    pub(super) w0: i64,
    pub(super) w1: i64,
    pub(super) b: i64,
    pub(super) n: usize,
}

impl Grid {
    pub(super) fn idx(&self, t: i64) -> usize {
        (((t - self.w0).max(0) / self.b) as usize).min(self.n - 1)
    }

    /// A position at `t` (in the window).
    pub(super) fn at(&self, t: i64) -> At {
        let k = self.idx(t);
        At {
            k,
            end: self.end(k),
        }
    }

    /// Moves `at` forward to the bucket of `t` (in the window, at or after
    /// `at`'s bucket): a walk over the few buckets a phase crosses, a division
    /// past them.
    #[inline(always)]
    pub(super) fn seek(&self, at: &mut At, t: i64) {
        if t < at.end {
            return;
        }
        if t - at.end > self.b.saturating_mul(4) {
            *at = self.at(t);
            return;
        }
        while t >= at.end && at.k + 1 < self.n {
            at.k += 1;
            at.end = self.end(at.k);
        }
    }

    pub(super) fn start(&self, k: usize) -> i64 {
        self.w0 + k as i64 * self.b
    }

    /// The end of bucket `k`, clipped at the window's end (a bucket past it
    /// is empty).
    pub(super) fn end(&self, k: usize) -> i64 {
        if k + 1 == self.n {
            self.w1
        } else {
            self.start(k + 1).min(self.w1)
        }
    }
}

/// Slot-nanoseconds per bucket and part, built from steps: a step of `w` slots
/// at `t` adds `w × (end of t's bucket − t)` to that bucket and `w` to the
/// part's rate from the next bucket on; [`Spread::finish`] adds the rates
/// times the bucket lengths. All integers: the same sums as adding each
/// interval bucket by bucket.
pub(super) struct Spread {
    pub(super) grid: Grid,
    /// Per bucket: what lies inside it directly (steps' partial buckets, and
    /// the free side's own additions).
    pub(super) acc: Vec<SlotNanos>,
    /// Per bucket: the change of each part's slot count at its start.
    rate: Vec<[i64; 9]>,
    /// The spans that passed each stage, per bucket.
    pub(super) stages: StageTally,
}

/// Per bucket, the spans that passed each [`Stage`] in it. Taken out of its
/// [`Spread`] for the busy pass, so that its vector is the pass's own (its
/// pointer and length were read again from memory at each step).
#[derive(Default)]
pub(super) struct StageTally {
    rows: Vec<StageRow>,
    /// (bucket, stage) of each carry out of a [`StageRow::sum`] (never, but
    /// for buckets of years).
    carries: Vec<(usize, usize)>,
}

/// The stages an ok span passes in order, each at an instant: admitted,
/// connected, first token, last token, released. The spans past each stage
/// are a step function of time, and each busy phase is the difference of two
/// adjacent stages' counts (connect = admitted − connected, …, post = last
/// token − released): one step per stage, where each phase's two steps put
/// two to each boundary between phases, and each step half as many writes
/// (the busy pass was bound by its stores).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Stage {
    Admitted,
    Connected,
    FirstToken,
    LastToken,
    Released,
    /// Admitted and connected at one instant (no connect time): one step.
    AdmittedConnected,
}

/// The stages' count.
const STAGES: usize = 6;

/// The phase between each stage and the next, in stage order.
const PHASES: [Part; 4] = [
    Part::Connect,
    Part::FirstTokenWait,
    Part::Generating,
    Part::Post,
];

/// Per bucket and [`Stage`]: the spans that passed it in the bucket, and the
/// sum of `end of the bucket − the instant` over them (in 64 bits, its
/// carries apart: a step's add is then one write, not two).
#[derive(Clone, Copy, Debug, Default)]
struct StageRow {
    passed: [u64; STAGES],
    sum: [u64; STAGES],
}

/// A bucket and its end, moved forward along one time line.
#[derive(Clone, Copy, Debug)]
pub(super) struct At {
    k: usize,
    end: i64,
}

impl Spread {
    pub(super) fn new(grid: Grid) -> Spread {
        Spread {
            grid,
            acc: vec![[0; 9]; grid.n],
            rate: vec![[0; 9]; grid.n + 1],
            stages: StageTally {
                rows: vec![StageRow::default(); grid.n],
                carries: Vec::new(),
            },
        }
    }

    /// A position at `t` (in the window).
    pub(super) fn at(&self, t: i64) -> At {
        self.grid.at(t)
    }

    /// `w` more slots in `part` from `t` (in `[w0, w1]`) on; `at` is at or
    /// before `t`'s bucket, and is left there.
    #[inline(always)]
    fn step(&mut self, at: &mut At, t: i64, part: Part, w: i64) {
        if t >= self.grid.w1 {
            return;
        }
        self.grid.seek(at, t);
        let p = part.index();
        self.acc[at.k][p] += i128::from(w) * i128::from(at.end - t);
        self.rate[at.k + 1][p] += w;
    }

    /// Adds `w` slots in `part` over `[s, e)` ∩ window; `at` is at or before
    /// the bucket of `s` (the window's first will do) and is left at or before
    /// that of `e`, for the next interval of a time line.
    #[inline(always)]
    pub(super) fn add(&mut self, at: &mut At, part: Part, s: i64, e: i64, w: i64) {
        let (s, e) = (s.max(self.grid.w0), e.min(self.grid.w1));
        if e <= s || w == 0 {
            return;
        }
        self.step(at, s, part, w);
        self.step(at, e, part, -w);
    }

    /// The slot-nanoseconds of each bucket.
    pub(super) fn finish(self) -> Vec<SlotNanos> {
        let Spread {
            grid,
            mut acc,
            rate,
            stages:
                StageTally {
                    rows: stages,
                    carries,
                },
        } = self;
        let mut slots = [0i64; 9];
        // Spans past each stage before the bucket.
        let mut before = [0i128; STAGES];
        for (k, row) in acc.iter_mut().enumerate() {
            let len = i128::from((grid.end(k) - grid.start(k)).max(0));
            for (p, x) in row.iter_mut().enumerate() {
                slots[p] += rate[k][p];
                *x += i128::from(slots[p]) * len;
            }
            // Each stage's span-time in the bucket, then the phases between.
            let mut past = [0i128; STAGES];
            for (j, y) in past.iter_mut().enumerate() {
                *y = i128::from(stages[k].sum[j]) + before[j] * len;
                before[j] += i128::from(stages[k].passed[j]);
            }
            for &(_, j) in carries.iter().filter(|c| c.0 == k) {
                past[j] += 1i128 << 64;
            }
            let both = past[Stage::AdmittedConnected as usize];
            let stage = [
                past[Stage::Admitted as usize] + both,
                past[Stage::Connected as usize] + both,
                past[Stage::FirstToken as usize],
                past[Stage::LastToken as usize],
                past[Stage::Released as usize],
            ];
            for (i, p) in PHASES.iter().enumerate() {
                row[p.index()] += stage[i] - stage[i + 1];
            }
        }
        acc
    }
}

impl StageTally {
    /// One more span past `stage` from `t` (clamped into `grid`'s window) on;
    /// `at` is at or before `t`'s bucket, and is left there. The stages of
    /// a span come in order, at instants that do not decrease.
    #[inline(always)]
    pub(super) fn pass(&mut self, grid: &Grid, at: &mut At, t: i64, stage: Stage) {
        let t = t.max(grid.w0);
        if t >= grid.w1 {
            return;
        }
        grid.seek(at, t);
        let j = stage as usize;
        let row = &mut self.rows[at.k];
        row.passed[j] += 1;
        let (sum, carry) = row.sum[j].overflowing_add((at.end - t) as u64);
        row.sum[j] = sum;
        if carry {
            self.carries.push((at.k, j));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// Bucket by bucket, as the ledger first added intervals.
    fn reference(grid: &Grid, acc: &mut [SlotNanos], part: Part, s: i64, e: i64, w: i64) {
        let (s, e) = (s.max(grid.w0), e.min(grid.w1));
        for (k, row) in acc.iter_mut().enumerate() {
            let len = e.min(grid.end(k)) - s.max(grid.start(k));
            row[part.index()] += i128::from(w) * i128::from(len.max(0));
        }
    }

    proptest! {
        /// Steps give each bucket exactly what adding the interval bucket by
        /// bucket gives, intervals crossing many buckets and the window's ends
        /// included.
        #[test]
        fn steps_give_the_same_buckets_as_adding_bucket_by_bucket(
            w0 in -50i64..50,
            len in 1i64..400,
            n in 1usize..12,
            intervals in proptest::collection::vec(
                (-100i64..500, 0i64..300, 0usize..9, -3i64..5),
                0..30,
            ),
        ) {
            let b = (len + n as i64 - 1) / n as i64;
            let grid = Grid { w0, w1: w0 + len, b, n };
            let mut spread = Spread::new(grid);
            let mut want = vec![[0i128; 9]; n];
            let mut at = spread.at(w0);
            for &(s, d, p, w) in &intervals {
                let part = Part::ALL[p];
                // Along a time line where the intervals allow it, else from
                // the window's start.
                if s < w0 + at.k as i64 * b {
                    at = spread.at(w0);
                }
                spread.add(&mut at, part, s, s + d, w);
                reference(&grid, &mut want, part, s, s + d, w);
            }
            prop_assert_eq!(spread.finish(), want);
        }
    }

    /// One span's stages (admitted, connected, first token, last token,
    /// released: non-decreasing), passed and phase by phase.
    fn span_both_ways(
        grid: &Grid,
        spread: &mut Spread,
        stages: &mut StageTally,
        want: &mut [SlotNanos],
        t: [i64; 5],
    ) {
        let mut at = spread.at(t[0].max(grid.w0));
        if t[1] == t[0] {
            stages.pass(grid, &mut at, t[0], Stage::AdmittedConnected);
        } else {
            stages.pass(grid, &mut at, t[0], Stage::Admitted);
            stages.pass(grid, &mut at, t[1], Stage::Connected);
        }
        stages.pass(grid, &mut at, t[2], Stage::FirstToken);
        stages.pass(grid, &mut at, t[3], Stage::LastToken);
        stages.pass(grid, &mut at, t[4], Stage::Released);
        for (i, p) in PHASES.iter().enumerate() {
            reference(grid, want, *p, t[i], t[i + 1], 1);
        }
    }

    proptest! {
        /// Stages passed give each bucket exactly the phases between them,
        /// added bucket by bucket, spans outside the window and crossing its
        /// ends included.
        #[test]
        fn stages_give_the_phases_between_them(
            w0 in -50i64..50,
            len in 1i64..400,
            n in 1usize..12,
            spans in proptest::collection::vec(
                (-100i64..500, [0i64..3, 0..60, 0..200, 0..40]),
                0..30,
            ),
        ) {
            let b = (len + n as i64 - 1) / n as i64;
            let grid = Grid { w0, w1: w0 + len, b, n };
            let mut spread = Spread::new(grid);
            let mut stages = std::mem::take(&mut spread.stages);
            let mut want = vec![[0i128; 9]; n];
            for &(a, d) in &spans {
                let t = [a, a + d[0], a + d[0] + d[1], a + d[0] + d[1] + d[2],
                    a + d[0] + d[1] + d[2] + d[3]];
                span_both_ways(&grid, &mut spread, &mut stages, &mut want, t);
            }
            spread.stages = stages;
            prop_assert_eq!(spread.finish(), want);
        }
    }

    /// A bucket of centuries: the stages' sums carry out of 64 bits, and
    /// the phases keep every nanosecond.
    #[test]
    fn stage_sums_that_carry_out_of_64_bits_keep_their_phases() {
        let grid = Grid {
            w0: 0,
            w1: i64::MAX,
            b: i64::MAX,
            n: 1,
        };
        let mut spread = Spread::new(grid);
        let mut stages = std::mem::take(&mut spread.stages);
        let mut want = vec![[0i128; 9]; 1];
        for i in 0..8 {
            let t = [i, i, 1 << 40, 1 << 61, i64::MAX - 1];
            span_both_ways(&grid, &mut spread, &mut stages, &mut want, t);
        }
        assert!(
            !stages.carries.is_empty(),
            "no carry: the test tests nothing"
        );
        spread.stages = stages;
        assert_eq!(spread.finish(), want);
    }
}
