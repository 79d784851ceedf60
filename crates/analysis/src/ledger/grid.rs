//! The ledger's buckets and how slot-time is added to them: each end of an
//! interval costs O(1) whatever the buckets it crosses (a step in its part's
//! rate), so the busy pass costs a few steps per span, not one loop per phase.

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
        }
    }

    /// A position at `t` (in the window).
    pub(super) fn at(&self, t: i64) -> At {
        let k = self.grid.idx(t);
        At {
            k,
            end: self.grid.end(k),
        }
    }

    /// Moves `at` forward to the bucket of `t` (in the window, at or after
    /// `at`'s bucket): a walk over the few buckets a phase crosses, a division
    /// past them.
    #[inline(always)]
    fn seek(&self, at: &mut At, t: i64) {
        if t < at.end {
            return;
        }
        if t - at.end > self.grid.b.saturating_mul(4) {
            *at = self.at(t);
            return;
        }
        while t >= at.end && at.k + 1 < self.grid.n {
            at.k += 1;
            at.end = self.grid.end(at.k);
        }
    }

    /// `w` more slots in `part` from `t` (in `[w0, w1]`) on; `at` is at or
    /// before `t`'s bucket, and is left there.
    #[inline(always)]
    fn step(&mut self, at: &mut At, t: i64, part: Part, w: i64) {
        if t >= self.grid.w1 {
            return;
        }
        self.seek(at, t);
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
        } = self;
        let mut slots = [0i64; 9];
        for (k, row) in acc.iter_mut().enumerate() {
            let len = i128::from((grid.end(k) - grid.start(k)).max(0));
            for (p, x) in row.iter_mut().enumerate() {
                slots[p] += rate[k][p];
                *x += i128::from(slots[p]) * len;
            }
        }
        acc
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
}
