//! Seeded bootstrap confidence intervals for ratio-of-sums metrics: a circular
//! block bootstrap over time buckets (system TPS, gap fraction), and i.i.d.
//! resampling over spans (success rate, retry rate). Pure and deterministic: the
//! same units, settings and seed give the same replicates on every platform.
//!
//! Every metric judged by `compare` is a ratio of sums, `Σ num / Σ den`, over
//! resampling units: a time bucket contributes (tokens, seconds) to system TPS and
//! (gap seconds, seconds) to gap fraction; a span contributes (1 if ok, 1 if ok or
//! error) to success rate and (retry_count, 1) to retry rate. A replicate draws as
//! many units as the run has, with replacement, and recomputes the ratio.

use super::quantile_sorted;

/// SplitMix64 (Steele, Lea & Flood 2014): a tiny, fast, well-mixed 64-bit PRNG. Used
/// instead of a crate so that replicates never change with a dependency's version.
#[derive(Clone, Debug)]
pub struct SplitMix64 {
    state: u64,
}

impl SplitMix64 {
    /// A generator started from `seed`.
    pub fn new(seed: u64) -> Self {
        SplitMix64 { state: seed }
    }

    /// The next 64 random bits.
    pub fn next_u64(&mut self) -> u64 {
        self.state = self.state.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.state;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// A uniform index in `0..n` (`n > 0`), by Lemire's multiply-shift; the bias is
    /// below n / 2⁶⁴, far under anything a bootstrap can see.
    pub fn below(&mut self, n: usize) -> usize {
        debug_assert!(n > 0);
        ((u128::from(self.next_u64()) * n as u128) >> 64) as usize
    }

    /// A uniform number in [0, 1) with 53 random bits.
    pub fn unit_f64(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 * (1.0 / (1u64 << 53) as f64)
    }

    /// A uniform number in (0, 1]: safe to take the logarithm of.
    fn open_unit_f64(&mut self) -> f64 {
        ((self.next_u64() >> 11) + 1) as f64 * (1.0 / (1u64 << 53) as f64)
    }

    /// A standard normal deviate (Marsaglia's polar method).
    fn normal(&mut self) -> f64 {
        loop {
            let u = 2.0 * self.unit_f64() - 1.0;
            let v = 2.0 * self.unit_f64() - 1.0;
            let s = u * u + v * v;
            if s > 0.0 && s < 1.0 {
                return u * (-2.0 * s.ln() / s).sqrt();
            }
        }
    }

    /// A Gamma(shape, 1) deviate (Marsaglia & Tsang 2000; shape < 1 by boosting).
    fn gamma(&mut self, shape: f64) -> f64 {
        if shape < 1.0 {
            let g = self.gamma(shape + 1.0);
            return g * self.open_unit_f64().powf(1.0 / shape);
        }
        let d = shape - 1.0 / 3.0;
        let c = 1.0 / (9.0 * d).sqrt();
        loop {
            let x = self.normal();
            let v = 1.0 + c * x;
            if v <= 0.0 {
                continue;
            }
            let v = v * v * v;
            let u = self.open_unit_f64();
            if u.ln() < 0.5 * x * x + d - d * v + d * v.ln() {
                return d * v;
            }
        }
    }

    /// A Beta(a, b) deviate from two gammas.
    fn beta(&mut self, a: f64, b: f64) -> f64 {
        let x = self.gamma(a);
        let y = self.gamma(b);
        x / (x + y)
    }

    /// An exact Binomial(n, p) deviate in O(log n) gamma draws (Knuth, TAOCP vol. 2,
    /// §3.4.1, exercise 27: split on the median order statistic of n uniforms, then
    /// finish with Bernoulli trials once n is small).
    pub fn binomial(&mut self, mut n: u64, mut p: f64) -> u64 {
        if p <= 0.0 || n == 0 {
            return 0;
        }
        if p >= 1.0 {
            return n;
        }
        let mut k = 0u64;
        while n > 16 {
            let a = 1 + n / 2;
            let b = n + 1 - a;
            let x = self.beta(a as f64, b as f64);
            if x >= p {
                n = a - 1;
                p /= x;
            } else {
                k += a;
                n = b - 1;
                p = (p - x) / (1.0 - x);
            }
            if p.is_nan() || p <= 0.0 {
                return k;
            }
            if p >= 1.0 {
                return k + n;
            }
        }
        for _ in 0..n {
            if self.unit_f64() < p {
                k += 1;
            }
        }
        k
    }
}

/// One resampling unit: its contribution to the numerator and the denominator of a
/// ratio of sums.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Unit {
    /// Added to the numerator (tokens, gap seconds, 1 for an ok span, retries).
    pub num: f64,
    /// Added to the denominator (bucket seconds, 1 per counted span).
    pub den: f64,
}

impl Unit {
    /// A unit contributing `num` and `den`.
    pub fn new(num: f64, den: f64) -> Unit {
        Unit { num, den }
    }
}

/// Settings of a bootstrap: how many replicates, from which seed, at which level.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct BootstrapConfig {
    /// Replicates to draw (at least 1; 2,000 gives stable 95% percentile intervals).
    pub resamples: usize,
    /// Seed of the generator; the same seed gives the same intervals.
    pub seed: u64,
    /// Coverage of the intervals, e.g. 0.95.
    pub level: f64,
}

impl Default for BootstrapConfig {
    fn default() -> Self {
        BootstrapConfig {
            resamples: 2000,
            seed: 1,
            level: 0.95,
        }
    }
}

/// Replicates of a statistic in the order drawn; `None` where a replicate had no
/// value (for a ratio, its denominator summed to zero).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Replicates {
    /// One entry per replicate drawn.
    pub draws: Vec<Option<f64>>,
}

impl Replicates {
    /// Replicates from values in draw order; non-finite values count as undefined.
    pub fn from_options(it: impl IntoIterator<Item = Option<f64>>) -> Replicates {
        Replicates {
            draws: it
                .into_iter()
                .map(|v| v.filter(|v| v.is_finite()))
                .collect(),
        }
    }

    /// How many replicates had no value.
    pub fn undefined(&self) -> usize {
        self.draws.iter().filter(|d| d.is_none()).count()
    }

    /// The defined values, in draw order.
    pub fn defined(&self) -> impl Iterator<Item = f64> + '_ {
        self.draws.iter().flatten().copied()
    }
}

/// The block length used when none is given: ⌈n^(1/3)⌉, the usual rate for the
/// moving/circular block bootstrap of a mean, at least 1.
pub fn auto_block_len(n: usize) -> usize {
    ((n as f64).cbrt().ceil() as usize).max(1)
}

fn ratio_of(num: f64, den: f64) -> Option<f64> {
    super::ratio(num, den)
}

/// Replicates of `Σ num / Σ den` under the circular block bootstrap: each replicate
/// concatenates blocks of `block_len` consecutive units (wrapping around the end)
/// starting at uniform positions until it has `units.len()` units. Neighbouring time
/// buckets are correlated (a long request spans many), which keeps that correlation
/// inside a block. `block_len` 1 is the ordinary i.i.d. bootstrap.
pub fn block_ratio_replicates(
    units: &[Unit],
    block_len: usize,
    resamples: usize,
    rng: &mut SplitMix64,
) -> Replicates {
    let n = units.len();
    if n == 0 {
        return Replicates {
            draws: vec![None; resamples],
        };
    }
    let block_len = block_len.clamp(1, n);
    let mut out = Vec::with_capacity(resamples);
    for _ in 0..resamples {
        let (mut num, mut den) = (0.0, 0.0);
        let mut taken = 0;
        while taken < n {
            let start = rng.below(n);
            let len = block_len.min(n - taken);
            for j in 0..len {
                let u = units[(start + j) % n];
                num += u.num;
                den += u.den;
            }
            taken += len;
        }
        out.push(ratio_of(num, den));
    }
    Replicates::from_options(out)
}

/// Distinct unit values with how many units carry each: spans mostly share a few
/// values (ok / error / cancelled; 0, 1, 2 retries).
fn distinct_units(units: &[Unit]) -> Vec<(Unit, u64)> {
    let mut keyed: Vec<((u64, u64), Unit)> = units
        .iter()
        .map(|u| ((u.num.to_bits(), u.den.to_bits()), *u))
        .collect();
    keyed.sort_unstable_by_key(|(k, _)| *k);
    let mut out: Vec<(Unit, u64)> = Vec::new();
    let mut last_key = None;
    for (k, u) in keyed {
        if last_key == Some(k) {
            if let Some(last) = out.last_mut() {
                last.1 += 1;
            }
        } else {
            out.push((u, 1));
            last_key = Some(k);
        }
    }
    out
}

/// Above this many distinct unit values, drawing the counts per value costs more
/// than drawing the units one by one.
const MULTINOMIAL_MAX_DISTINCT: usize = 64;

/// Replicates of `Σ num / Σ den` under the i.i.d. bootstrap over units (spans).
/// Identical in distribution to drawing `units.len()` units with replacement; when
/// the units take few distinct values (the usual case for rates) the counts per
/// value are drawn as one multinomial, so a million spans cost no more than ten.
pub fn iid_ratio_replicates(units: &[Unit], resamples: usize, rng: &mut SplitMix64) -> Replicates {
    let n = units.len();
    if n == 0 {
        return Replicates {
            draws: vec![None; resamples],
        };
    }
    let distinct = distinct_units(units);
    if distinct.len() > MULTINOMIAL_MAX_DISTINCT {
        return block_ratio_replicates(units, 1, resamples, rng);
    }
    let mut out = Vec::with_capacity(resamples);
    for _ in 0..resamples {
        // Multinomial by sequential conditional binomials.
        let (mut num, mut den) = (0.0, 0.0);
        let mut left_n = n as u64;
        let mut left_w = n as u64;
        for (i, (u, w)) in distinct.iter().enumerate() {
            let k = if i + 1 == distinct.len() {
                left_n
            } else {
                rng.binomial(left_n, *w as f64 / left_w as f64)
            };
            num += u.num * k as f64;
            den += u.den * k as f64;
            left_n -= k;
            left_w -= w;
            if left_n == 0 {
                break;
            }
        }
        out.push(ratio_of(num, den));
    }
    Replicates::from_options(out)
}

/// A two-sided confidence interval.
#[derive(Clone, Copy, Debug, PartialEq, serde::Serialize)]
pub struct Interval {
    /// Lower bound.
    pub low: f64,
    /// Upper bound.
    pub high: f64,
    /// Nominal coverage, e.g. 0.95.
    pub level: f64,
}

impl Interval {
    /// Whether `x` lies inside the closed interval.
    pub fn contains(&self, x: f64) -> bool {
        self.low <= x && x <= self.high
    }
}

/// The largest share of undefined replicates an interval tolerates: beyond it the
/// defined ones are a biased picture of the statistic, and there is no interval.
pub const MAX_UNDEFINED_SHARE: f64 = 0.01;

/// The percentile interval of replicates at `level` (e.g. 0.95 → the 2.5th and
/// 97.5th percentiles, by the one percentile method of [`crate::stats`]). `None`
/// when there are no defined replicates, more than [`MAX_UNDEFINED_SHARE`] were
/// undefined, or `level` is not in (0, 1).
pub fn percentile_interval(replicates: &Replicates, level: f64) -> Option<Interval> {
    let mut sorted: Vec<f64> = replicates.defined().collect();
    if !(level > 0.0 && level < 1.0) || sorted.is_empty() {
        return None;
    }
    let total = replicates.draws.len();
    if replicates.undefined() as f64 > MAX_UNDEFINED_SHARE * total as f64 {
        return None;
    }
    super::sort_values(&mut sorted);
    let alpha = (1.0 - level) / 2.0;
    Some(Interval {
        low: quantile_sorted(&sorted, alpha)?,
        high: quantile_sorted(&sorted, 1.0 - alpha)?,
        level,
    })
}

/// Replicates of a change between two independent samples: the i-th baseline
/// replicate is paired with the i-th candidate replicate and `change(base, cand)`
/// is taken; a pair where either side or the change is undefined is undefined.
pub fn paired_change(
    base: &Replicates,
    cand: &Replicates,
    change: impl Fn(f64, f64) -> Option<f64>,
) -> Replicates {
    Replicates::from_options(
        base.draws
            .iter()
            .zip(&cand.draws)
            .map(|(b, c)| change((*b)?, (*c)?)),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn splitmix_matches_reference_values() {
        // Reference output of SplitMix64 seeded with 0 (from the authors' C code).
        let mut r = SplitMix64::new(0);
        assert_eq!(r.next_u64(), 0xE220_A839_7B1D_CDAF);
        assert_eq!(r.next_u64(), 0x6E78_9E6A_A1B9_65F4);
        assert_eq!(r.next_u64(), 0x06C4_5D18_8009_454F);
    }

    #[test]
    fn below_stays_in_range_and_covers_it() {
        let mut r = SplitMix64::new(7);
        let mut seen = [0u32; 5];
        for _ in 0..10_000 {
            seen[r.below(5)] += 1;
        }
        for s in seen {
            assert!((1800..2200).contains(&s), "{seen:?}");
        }
    }

    #[test]
    fn binomial_has_the_right_mean_and_variance() {
        let mut r = SplitMix64::new(11);
        for (n, p) in [(10u64, 0.3), (1000, 0.5), (1_000_000, 0.01), (50_000, 0.97)] {
            let draws: Vec<f64> = (0..4000).map(|_| r.binomial(n, p) as f64).collect();
            let mean = draws.iter().sum::<f64>() / draws.len() as f64;
            let var =
                draws.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / (draws.len() - 1) as f64;
            let (m, v) = (n as f64 * p, n as f64 * p * (1.0 - p));
            // Mean within 5 standard errors; variance within 15%.
            assert!(
                (mean - m).abs() < 5.0 * (v / 4000.0).sqrt(),
                "n={n} p={p} mean={mean}"
            );
            assert!(
                (var / v - 1.0).abs() < 0.15,
                "n={n} p={p} var={var} expected {v}"
            );
            assert!(draws.iter().all(|x| *x >= 0.0 && *x <= n as f64));
        }
        assert_eq!(r.binomial(0, 0.5), 0);
        assert_eq!(r.binomial(9, 0.0), 0);
        assert_eq!(r.binomial(9, 1.0), 9);
    }

    fn rates(ok: usize, err: usize) -> Vec<Unit> {
        let mut v = vec![Unit::new(1.0, 1.0); ok];
        v.extend(std::iter::repeat_n(Unit::new(0.0, 1.0), err));
        v
    }

    #[test]
    fn bootstrap_is_deterministic_for_a_seed() {
        let units: Vec<Unit> = (0..200)
            .map(|i| Unit::new((i % 7) as f64 * 3.0, 1.0))
            .collect();
        let a = block_ratio_replicates(&units, 5, 300, &mut SplitMix64::new(42));
        let b = block_ratio_replicates(&units, 5, 300, &mut SplitMix64::new(42));
        let c = block_ratio_replicates(&units, 5, 300, &mut SplitMix64::new(43));
        assert_eq!(a, b);
        assert_ne!(a, c);
        let spans = rates(950, 50);
        let a = iid_ratio_replicates(&spans, 300, &mut SplitMix64::new(1));
        let b = iid_ratio_replicates(&spans, 300, &mut SplitMix64::new(1));
        assert_eq!(a, b);
    }

    #[test]
    fn constant_units_give_a_degenerate_interval() {
        let units = vec![Unit::new(50.0, 1.0); 100];
        let r = block_ratio_replicates(&units, 4, 500, &mut SplitMix64::new(3));
        let ci = percentile_interval(&r, 0.95).unwrap();
        assert_eq!((ci.low, ci.high), (50.0, 50.0));
    }

    #[test]
    fn success_rate_interval_matches_the_binomial_standard_error() {
        // 900 ok of 1000: se = sqrt(0.9 · 0.1 / 1000) ≈ 0.00949; a 95% interval is
        // about ±1.96 se = ±0.0186.
        let spans = rates(900, 100);
        let r = iid_ratio_replicates(&spans, 4000, &mut SplitMix64::new(5));
        let ci = percentile_interval(&r, 0.95).unwrap();
        assert!(ci.contains(0.9));
        let half = (ci.high - ci.low) / 2.0;
        assert!((half - 0.0186).abs() < 0.002, "{ci:?}");
        // The same through the direct resampler (many distinct values force it).
        let r2 = block_ratio_replicates(&spans, 1, 4000, &mut SplitMix64::new(5));
        let ci2 = percentile_interval(&r2, 0.95).unwrap();
        assert!(
            ((ci2.high - ci2.low) / 2.0 - 0.0186).abs() < 0.002,
            "{ci2:?}"
        );
    }

    #[test]
    fn many_distinct_values_fall_back_to_direct_resampling() {
        let units: Vec<Unit> = (0..500).map(|i| Unit::new(i as f64, 1.0)).collect();
        let r = iid_ratio_replicates(&units, 1000, &mut SplitMix64::new(9));
        let ci = percentile_interval(&r, 0.95).unwrap();
        // mean 249.5, sd ≈ 144.3, se ≈ 6.45, ±1.96 se ≈ ±12.6
        assert!(ci.contains(249.5), "{ci:?}");
        assert!(((ci.high - ci.low) / 2.0 - 12.6).abs() < 2.0, "{ci:?}");
    }

    #[test]
    fn block_bootstrap_widens_intervals_of_correlated_series() {
        // A slow square wave: 20 buckets high, 20 low. Neighbours are correlated, so
        // the i.i.d. bootstrap understates the uncertainty of the mean.
        let units: Vec<Unit> = (0..400)
            .map(|i| Unit::new(if (i / 20) % 2 == 0 { 100.0 } else { 0.0 }, 1.0))
            .collect();
        let iid = percentile_interval(
            &block_ratio_replicates(&units, 1, 2000, &mut SplitMix64::new(1)),
            0.95,
        )
        .unwrap();
        let blocks = percentile_interval(
            &block_ratio_replicates(&units, 20, 2000, &mut SplitMix64::new(1)),
            0.95,
        )
        .unwrap();
        assert!(
            blocks.high - blocks.low > 1.5 * (iid.high - iid.low),
            "{iid:?} {blocks:?}"
        );
    }

    #[test]
    fn undefined_replicates_and_empty_input_give_no_interval() {
        assert_eq!(
            percentile_interval(
                &block_ratio_replicates(&[], 3, 10, &mut SplitMix64::new(0)),
                0.95
            ),
            None
        );
        let zero_den = vec![Unit::new(0.0, 0.0); 10];
        let r = iid_ratio_replicates(&zero_den, 10, &mut SplitMix64::new(0));
        assert_eq!(r.undefined(), 10);
        assert_eq!(percentile_interval(&r, 0.95), None);
        let ok = Replicates::from_options([Some(1.0), Some(2.0)]);
        assert_eq!(percentile_interval(&ok, 1.0), None);
    }

    #[test]
    fn paired_change_pairs_in_draw_order() {
        let b = Replicates::from_options([Some(1.0), Some(2.0), Some(4.0), None]);
        let c = Replicates::from_options([Some(2.0), Some(2.0), Some(2.0), Some(1.0)]);
        let d = paired_change(&b, &c, |b, c| Some(c / b - 1.0));
        assert_eq!(d.draws, vec![Some(1.0), Some(0.0), Some(-0.5), None]);
        assert_eq!(d.undefined(), 1);
        let none = paired_change(&b, &c, |b, _| (b < 3.0).then_some(0.0));
        assert_eq!(none.undefined(), 2);
        assert_eq!(auto_block_len(0), 1);
        assert_eq!(auto_block_len(27), 3);
        assert_eq!(auto_block_len(28), 4);
    }
}
