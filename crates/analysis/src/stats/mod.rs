//! Statistics: the one percentile method and the distribution summary used by every
//! report, comparison and chart of tpscope.
//!
//! **Percentile method.** Linear interpolation between closest ranks, numpy's
//! default (`method="linear"`, Hyndman & Fan type 7): for `n` sorted values
//! `x[0..n]` and a quantile `q` in [0, 1], let `h = (n − 1)·q`; the percentile is
//! `x[⌊h⌋] + (h − ⌊h⌋)·(x[⌊h⌋+1] − x[⌊h⌋])`. With one value every percentile is
//! that value; with none there is no percentile (`None`).
//!
//! **Interval of a median from few samples** ([`median_interval`]): the
//! distribution-free one from order statistics (e.g. Conover, *Practical
//! Nonparametric Statistics*, §3.2). For `n` sorted values the interval from
//! the `k`-th smallest to the `k`-th largest holds the population's median with
//! probability `1 − 2·P(B ≤ k − 1)`, `B ~ Binomial(n, ½)`, whatever the
//! distribution; the largest `k` whose coverage reaches the level asked is
//! taken. It assumes only independent samples, so it suits a handful of
//! benchmark rounds, where a bootstrap's percentile interval is too narrow.

pub mod bootstrap;

use std::time::Duration;

use serde::{Serialize, Serializer};

/// The `q`-quantile (0 ≤ q ≤ 1) of values sorted ascending, by the one percentile
/// method of tpscope: linear interpolation between closest ranks (Hyndman & Fan
/// type 7, numpy's default; see the module doc). `None` for an empty slice or a `q`
/// outside [0, 1].
pub fn quantile_sorted(sorted: &[f64], q: f64) -> Option<f64> {
    if sorted.is_empty() || !(0.0..=1.0).contains(&q) {
        return None;
    }
    let h = (sorted.len() - 1) as f64 * q;
    let lo = h.floor() as usize;
    let hi = (lo + 1).min(sorted.len() - 1);
    let frac = h - lo as f64;
    Some(sorted[lo] + frac * (sorted[hi] - sorted[lo]))
}

/// Sorts finite values ascending in place (non-finite values must not be passed;
/// callers only collect computable metrics).
pub fn sort_values(values: &mut [f64]) {
    values.sort_unstable_by(f64::total_cmp);
}

/// A quantity a summary can be made of: converted to f64 for arithmetic, and back.
pub trait Quantity: Copy {
    /// The quantity as a plain number in its base unit (seconds, tokens, tokens/s).
    fn to_f64(self) -> f64;
    /// The quantity from a plain number in its base unit.
    fn from_f64(v: f64) -> Self;
}

impl Quantity for Duration {
    fn to_f64(self) -> f64 {
        self.as_secs_f64()
    }
    fn from_f64(v: f64) -> Self {
        Duration::from_secs_f64(v.max(0.0))
    }
}

/// Output tokens per second.
#[derive(Clone, Copy, Debug, PartialEq, PartialOrd, Default)]
pub struct TokensPerSecond(pub f64);

impl Quantity for TokensPerSecond {
    fn to_f64(self) -> f64 {
        self.0
    }
    fn from_f64(v: f64) -> Self {
        TokensPerSecond(v)
    }
}

impl Serialize for TokensPerSecond {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_f64(self.0)
    }
}

/// A count of tokens (fractional for means and interpolated percentiles).
#[derive(Clone, Copy, Debug, PartialEq, PartialOrd, Default)]
pub struct Tokens(pub f64);

impl Quantity for Tokens {
    fn to_f64(self) -> f64 {
        self.0
    }
    fn from_f64(v: f64) -> Self {
        Tokens(v)
    }
}

impl Serialize for Tokens {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_f64(self.0)
    }
}

/// A distribution: count, mean, min, the standard percentiles and max. Every field
/// but `count` is `None` when `count` is 0.
#[derive(Clone, Copy, Debug, PartialEq, Default, Serialize)]
#[serde(bound(serialize = "Q: Quantity"))]
pub struct Summary<Q> {
    /// Values summarised.
    pub count: u64,
    /// Arithmetic mean.
    #[serde(serialize_with = "ser_opt")]
    pub mean: Option<Q>,
    /// Smallest value.
    #[serde(serialize_with = "ser_opt")]
    pub min: Option<Q>,
    /// Median (q = 0.5).
    #[serde(serialize_with = "ser_opt")]
    pub p50: Option<Q>,
    /// q = 0.9.
    #[serde(serialize_with = "ser_opt")]
    pub p90: Option<Q>,
    /// q = 0.95.
    #[serde(serialize_with = "ser_opt")]
    pub p95: Option<Q>,
    /// q = 0.99.
    #[serde(serialize_with = "ser_opt")]
    pub p99: Option<Q>,
    /// q = 0.999.
    #[serde(serialize_with = "ser_opt")]
    pub p99_9: Option<Q>,
    /// Largest value.
    #[serde(serialize_with = "ser_opt")]
    pub max: Option<Q>,
}

fn ser_opt<Q: Quantity, S: Serializer>(v: &Option<Q>, s: S) -> Result<S::Ok, S::Error> {
    match v {
        Some(q) => s.serialize_f64(q.to_f64()),
        None => s.serialize_none(),
    }
}

/// The quantiles `qs` (each in [0, 1]) of unsorted values, by linear interpolation
/// between closest ranks (Hyndman & Fan type 7, as [`quantile_sorted`]), in O(n)
/// expected time per distinct rank (selection, not a full sort).
/// Reorders `values`. `None` for each quantile when `values` is empty.
pub fn quantiles(values: &mut [f64], qs: &[f64]) -> Vec<Option<f64>> {
    let n = values.len();
    if n == 0 {
        return vec![None; qs.len()];
    }
    // Every rank the interpolation reads: ⌊h⌋, and ⌊h⌋ + 1 when h has a fraction
    // (otherwise its weight is 0; every value above ⌊h⌋ is finite).
    let mut ranks: Vec<usize> = Vec::with_capacity(qs.len() * 2);
    for q in qs {
        let h = (n - 1) as f64 * q.clamp(0.0, 1.0);
        ranks.push(h.floor() as usize);
        if h.fract() > 0.0 {
            ranks.push((h.floor() as usize + 1).min(n - 1));
        }
    }
    ranks.sort_unstable();
    ranks.dedup();
    // Place each rank at its index, in ascending order, each within the part above
    // the previous one. The smallest or the largest value of that part is found by
    // a scan and swapped into place, which is several times cheaper than a
    // selection (min, max, and the rank just above a selected one are such).
    let mut lo = 0;
    for &r in &ranks {
        let part = &mut values[lo..];
        let extreme = if r == lo {
            part.iter()
                .enumerate()
                .min_by(|a, b| a.1.total_cmp(b.1))
                .map(|(i, _)| (i, 0))
        } else if r == n - 1 {
            part.iter()
                .enumerate()
                .max_by(|a, b| a.1.total_cmp(b.1))
                .map(|(i, _)| (i, part.len() - 1))
        } else {
            part.select_nth_unstable_by(r - lo, f64::total_cmp);
            None
        };
        if let Some((from, to)) = extreme {
            part.swap(from, to);
        }
        lo = r + 1;
    }
    qs.iter()
        .map(|q| {
            if !(0.0..=1.0).contains(q) {
                return None;
            }
            let h = (n - 1) as f64 * q;
            let l = h.floor() as usize;
            let u = (l + 1).min(n - 1);
            Some(values[l] + (h - l as f64) * (values[u] - values[l]))
        })
        .collect()
}

/// The `q`-quantile (0 ≤ q ≤ 1) of a histogram: `(value, count)` pairs sorted
/// ascending by value. The same number as [`quantile_sorted`] (Hyndman & Fan type
/// 7) over the values each repeated `count` times, without expanding them. `None`
/// when the counts sum to 0 or `q` is outside [0, 1].
pub fn quantile_counted(counted: &[(f64, u64)], q: f64) -> Option<f64> {
    let n: u64 = counted.iter().map(|(_, c)| c).sum();
    if n == 0 || !(0.0..=1.0).contains(&q) {
        return None;
    }
    let h = (n - 1) as f64 * q;
    let lo = h.floor() as u64;
    let hi = (lo + 1).min(n - 1);
    // The value at 0-based rank r: the first whose cumulative count exceeds r.
    let at = |r: u64| {
        let mut cum = 0;
        counted.iter().find_map(|(v, c)| {
            cum += c;
            (cum > r).then_some(*v)
        })
    };
    let (x_lo, x_hi) = (at(lo)?, at(hi)?);
    Some(x_lo + (h - lo as f64) * (x_hi - x_lo))
}

impl<Q: Quantity> Summary<Q> {
    /// Summarises values (in the quantity's base unit); reorders them.
    pub fn of(values: &mut [f64]) -> Summary<Q> {
        if values.is_empty() {
            return Self::of_sorted(&[]);
        }
        let q = quantiles(values, &[0.0, 0.5, 0.9, 0.95, 0.99, 0.999, 1.0]);
        let mean = values.iter().sum::<f64>() / values.len() as f64;
        let v = |i: usize| q[i].map(Q::from_f64);
        Summary {
            count: values.len() as u64,
            mean: Some(Q::from_f64(mean)),
            min: v(0),
            p50: v(1),
            p90: v(2),
            p95: v(3),
            p99: v(4),
            p99_9: v(5),
            max: v(6),
        }
    }

    /// Summarises values already sorted ascending.
    pub fn of_sorted(sorted: &[f64]) -> Summary<Q> {
        let q = |p| quantile_sorted(sorted, p).map(Q::from_f64);
        let mean = (!sorted.is_empty())
            .then(|| Q::from_f64(sorted.iter().sum::<f64>() / sorted.len() as f64));
        Summary {
            count: sorted.len() as u64,
            mean,
            min: sorted.first().map(|v| Q::from_f64(*v)),
            p50: q(0.5),
            p90: q(0.9),
            p95: q(0.95),
            p99: q(0.99),
            p99_9: q(0.999),
            max: sorted.last().map(|v| Q::from_f64(*v)),
        }
    }
}

/// A distribution-free interval of a median (see the module doc), and the
/// probability that it holds the median.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct MedianInterval {
    /// The `k`-th smallest value.
    pub lo: f64,
    /// The `k`-th largest value.
    pub hi: f64,
    /// `1 − 2·P(B ≤ k − 1)`, `B ~ Binomial(n, ½)`: at least the level asked.
    pub coverage: f64,
}

/// The narrowest order-statistic interval of the median of values sorted
/// ascending whose coverage is at least `level` (0 < level < 1); `None` when
/// even the whole range falls short (fewer than 6 values at 95 %) or `level`
/// is outside (0, 1).
pub fn median_interval(sorted: &[f64], level: f64) -> Option<MedianInterval> {
    let n = sorted.len();
    if n == 0 || !(level > 0.0 && level < 1.0) {
        return None;
    }
    // P(B = i) in logs, so that ½ⁿ does not underflow for large n.
    let mut log_p = -(n as f64) * std::f64::consts::LN_2;
    let mut below = 0.0;
    let mut best = None;
    for k in 1..=n.div_ceil(2) {
        // P(B ≤ k − 1): add P(B = k − 1), then step the term to P(B = k).
        below += log_p.exp();
        log_p += ((n - (k - 1)) as f64).ln() - (k as f64).ln();
        let coverage = 1.0 - 2.0 * below;
        if coverage < level {
            break;
        }
        best = Some(MedianInterval {
            lo: sorted[k - 1],
            hi: sorted[n - k],
            coverage,
        });
    }
    best
}

/// `num / den` when `den > 0`; `None` otherwise (never NaN or infinity).
pub fn ratio(num: f64, den: f64) -> Option<f64> {
    (den > 0.0 && num.is_finite() && den.is_finite()).then(|| num / den)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn median_interval_takes_the_order_statistics_by_hand() {
        let v: Vec<f64> = (1..=12).map(f64::from).collect();
        // n = 12: k = 3 covers 1 − 2·(1 + 12 + 66)/4096; k = 4 would cover
        // 1 − 2·(79 + 220)/4096 = 0.854.
        let i = median_interval(&v, 0.95).unwrap();
        assert_eq!((i.lo, i.hi), (3.0, 10.0));
        assert!((i.coverage - (1.0 - 2.0 * 79.0 / 4096.0)).abs() < 1e-12);
        // At 80 % k = 4 suffices.
        let i = median_interval(&v, 0.8).unwrap();
        assert_eq!((i.lo, i.hi), (4.0, 9.0));
        // Six values: only the whole range, 1 − 2/64 = 0.969.
        let six = [1.0, 2.0, 3.0, 4.0, 5.0, 6.0];
        let i = median_interval(&six, 0.95).unwrap();
        assert_eq!((i.lo, i.hi), (1.0, 6.0));
        assert!((i.coverage - 0.96875).abs() < 1e-12);
        // Five values cannot reach 95 % (1 − 2/32 = 0.9375); nothing, or a bad
        // level, gives none.
        assert_eq!(median_interval(&six[..5], 0.95), None);
        assert_eq!(median_interval(&[], 0.5), None);
        assert_eq!(median_interval(&six, 1.0), None);
        assert_eq!(median_interval(&six, f64::NAN), None);
    }

    #[test]
    fn median_interval_of_many_values_narrows_to_the_normal_one() {
        // n = 10,000: the 95 % interval is about n/2 ± 1.96·√n/2 = ±98 ranks;
        // the ½ⁿ that starts the sum underflows unless kept in logs.
        let v: Vec<f64> = (0..10_000).map(f64::from).collect();
        let i = median_interval(&v, 0.95).unwrap();
        assert!((4895.0..=4905.0).contains(&i.lo), "{i:?}");
        assert_eq!(i.hi, 9999.0 - i.lo);
        assert!((0.95..0.953).contains(&i.coverage), "{i:?}");
    }

    #[test]
    fn quantiles_match_numpy_linear_by_hand() {
        // numpy.percentile([1, 2, 3, 4], [0, 25, 50, 90, 100]) = [1, 1.75, 2.5, 3.7, 4]
        let v = [1.0, 2.0, 3.0, 4.0];
        let q = |p| quantile_sorted(&v, p).unwrap();
        assert_eq!(q(0.0), 1.0);
        assert!((q(0.25) - 1.75).abs() < 1e-12);
        assert!((q(0.5) - 2.5).abs() < 1e-12);
        assert!((q(0.9) - 3.7).abs() < 1e-12);
        assert_eq!(q(1.0), 4.0);
        // numpy.percentile([10, 20, 30, 40, 50, 60, 70, 80, 90, 100], 99) = 99.1
        let w: Vec<f64> = (1..=10).map(|i| i as f64 * 10.0).collect();
        assert!((quantile_sorted(&w, 0.99).unwrap() - 99.1).abs() < 1e-9);
        // numpy.percentile(same, 99.9) = 99.91
        assert!((quantile_sorted(&w, 0.999).unwrap() - 99.91).abs() < 1e-9);
    }

    #[test]
    fn quantile_of_nothing_is_none_and_of_one_is_it() {
        assert_eq!(quantile_sorted(&[], 0.5), None);
        assert_eq!(quantile_sorted(&[7.0], 0.99), Some(7.0));
        assert_eq!(quantile_sorted(&[1.0, 2.0], 1.5), None);
    }

    #[test]
    fn summary_of_values() {
        let mut v = vec![3.0, 1.0, 2.0];
        let s: Summary<Tokens> = Summary::of(&mut v);
        assert_eq!(s.count, 3);
        assert_eq!(s.mean, Some(Tokens(2.0)));
        assert_eq!(s.min, Some(Tokens(1.0)));
        assert_eq!(s.p50, Some(Tokens(2.0)));
        assert_eq!(s.max, Some(Tokens(3.0)));
        let empty: Summary<Duration> = Summary::of(&mut []);
        assert_eq!(empty.count, 0);
        assert_eq!(empty.p99, None);
        let json = serde_json::to_value(empty).unwrap();
        assert!(json["p99"].is_null());
    }

    proptest::proptest! {
        #[test]
        fn selection_quantiles_equal_sorted_quantiles(
            mut v in proptest::collection::vec(
                proptest::prop_oneof![-1e6f64..1e6, proptest::strategy::Strategy::prop_map(0i32..4, f64::from)],
                1..200,
            ),
            q in 0.0f64..=1.0,
        ) {
            let mut sorted = v.clone();
            sort_values(&mut sorted);
            let by_sort = quantile_sorted(&sorted, q).unwrap();
            let by_select = quantiles(&mut v, &[q, 0.5, 0.999])[0].unwrap();
            proptest::prop_assert_eq!(by_sort, by_select);
        }

        /// Every quantile a summary reports, at once, with ties and small sizes.
        #[test]
        fn summary_quantiles_equal_sorted_quantiles(
            mut v in proptest::collection::vec(
                proptest::prop_oneof![-1e6f64..1e6, proptest::strategy::Strategy::prop_map(0i32..4, f64::from)],
                1..300,
            ),
        ) {
            let qs = [0.0, 0.5, 0.9, 0.95, 0.99, 0.999, 1.0];
            let mut sorted = v.clone();
            sort_values(&mut sorted);
            let by_sort: Vec<_> = qs.iter().map(|&q| quantile_sorted(&sorted, q)).collect();
            proptest::prop_assert_eq!(by_sort, quantiles(&mut v, &qs));
        }
    }

    #[test]
    fn counted_quantiles_equal_expanded_ones() {
        let counted = [(1.0, 3), (2.0, 0), (5.0, 2), (9.0, 1)];
        let expanded = [1.0, 1.0, 1.0, 5.0, 5.0, 9.0];
        for q in [0.0, 0.1, 0.25, 0.5, 0.6, 0.9, 0.99, 1.0] {
            assert_eq!(
                quantile_counted(&counted, q),
                quantile_sorted(&expanded, q),
                "q={q}"
            );
        }
        assert_eq!(quantile_counted(&[(4.0, 0)], 0.5), None);
        assert_eq!(quantile_counted(&counted, 1.5), None);
    }

    #[test]
    fn ratio_refuses_zero_denominators() {
        assert_eq!(ratio(1.0, 0.0), None);
        assert_eq!(ratio(1.0, 4.0), Some(0.25));
    }
}
