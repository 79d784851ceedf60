//! Retries: which failure causes are retried, and the back-off before the next
//! attempt (exponential with jitter, `Retry-After` honoured). The request keeps its
//! slot while it backs off (docs/design.md §2).

use std::time::Duration;

use rand::Rng;
use tpscope_model::Cause;

/// The longest back-off the exponential grows to.
pub const MAX_BACKOFF: Duration = Duration::from_secs(30);
/// The longest `Retry-After` honoured; a longer one is cut to this, so one server
/// answer cannot stall a run for hours.
pub const MAX_RETRY_AFTER: Duration = Duration::from_secs(120);

/// When and how to retry a failed attempt.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RetryPolicy {
    /// Attempts after the first, at most.
    pub max_retries: u32,
    /// The first back-off; it doubles per retry up to [`MAX_BACKOFF`].
    pub base: Duration,
}

impl Default for RetryPolicy {
    fn default() -> Self {
        RetryPolicy {
            max_retries: 0,
            base: Duration::from_millis(500),
        }
    }
}

/// Whether a failure cause is worth another attempt: overload (429), server errors,
/// connection failures, and streams that broke off or stalled. Client errors (4xx),
/// malformed responses, the total timeout and cancellation are final.
pub fn is_retryable(cause: Cause) -> bool {
    matches!(
        cause,
        Cause::Http429
            | Cause::Http5xx
            | Cause::Connect
            | Cause::TimeoutConnect
            | Cause::TimeoutFirstToken
            | Cause::TimeoutStall
            | Cause::Disconnect
    )
}

impl RetryPolicy {
    /// The back-off before retry number `retry` (1 for the first retry): the
    /// exponential `base · 2^(retry−1)` capped at [`MAX_BACKOFF`], with "equal jitter"
    /// (uniform in [half, full]) so that synchronised failures spread out, and never
    /// shorter than the server's `Retry-After` (itself capped at [`MAX_RETRY_AFTER`]),
    /// which gets jitter of its own on top: up to a quarter of it (at least half the
    /// base back-off), so requests told to come back in 1 s do not all return at
    /// the same instant. Deterministic for a seeded `rng`.
    pub fn backoff<R: Rng + ?Sized>(
        &self,
        retry: u32,
        retry_after: Option<Duration>,
        rng: &mut R,
    ) -> Duration {
        let exp = self
            .base
            .checked_mul(1u32 << retry.saturating_sub(1).min(20))
            .unwrap_or(MAX_BACKOFF)
            .min(MAX_BACKOFF);
        let half = exp / 2;
        let jittered = half + exp.saturating_sub(half).mul_f64(rng.random::<f64>());
        match retry_after {
            Some(ra) => {
                let ra = ra.min(MAX_RETRY_AFTER);
                let spread = (ra / 4).max(self.base / 2);
                jittered.max(ra + spread.mul_f64(rng.random::<f64>()))
            }
            None => jittered,
        }
    }

    /// Whether to retry after an attempt that failed with `cause`, when
    /// `retries_done` retries were made already; the back-off if so.
    pub fn decide<R: Rng + ?Sized>(
        &self,
        cause: Cause,
        retries_done: u32,
        retry_after: Option<Duration>,
        rng: &mut R,
    ) -> Option<Duration> {
        (is_retryable(cause) && retries_done < self.max_retries)
            .then(|| self.backoff(retries_done + 1, retry_after, rng))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::SeedableRng;
    use rand::rngs::StdRng;

    #[test]
    fn retry_after_gets_jitter_on_top_so_429s_do_not_retry_in_lockstep() {
        // What broke: every 429 retry waited exactly the 1.000 s Retry-After.
        let p = RetryPolicy {
            max_retries: 3,
            base: Duration::from_millis(100),
        };
        let ra = Some(Duration::from_secs(1));
        let draws = |seed| {
            let mut rng = StdRng::seed_from_u64(seed);
            (0..200)
                .map(|_| p.backoff(1, ra, &mut rng))
                .collect::<Vec<_>>()
        };
        let waits = draws(5);
        assert!(
            waits
                .iter()
                .all(|d| *d >= Duration::from_secs(1) && *d <= Duration::from_millis(1250))
        );
        let distinct: std::collections::BTreeSet<_> = waits.iter().collect();
        assert!(distinct.len() > 150, "{} distinct waits", distinct.len());
        assert_eq!(waits, draws(5), "deterministic under the seed");
        assert_ne!(waits, draws(6));
    }

    #[test]
    fn backoff_doubles_with_jitter_and_is_capped() {
        let p = RetryPolicy {
            max_retries: 10,
            base: Duration::from_millis(100),
        };
        let mut rng = StdRng::seed_from_u64(1);
        for retry in 1..=12u32 {
            let full = (Duration::from_millis(100) * 2u32.pow(retry - 1)).min(MAX_BACKOFF);
            for _ in 0..200 {
                let d = p.backoff(retry, None, &mut rng);
                assert!(
                    d >= full / 2 && d <= full,
                    "retry {retry}: {d:?} not in [{:?}, {full:?}]",
                    full / 2
                );
            }
        }
        // Jitter actually varies.
        let a: Vec<_> = (0..10).map(|_| p.backoff(3, None, &mut rng)).collect();
        assert!(a.windows(2).any(|w| w[0] != w[1]));
    }

    #[test]
    fn retry_after_is_honoured_and_bounded() {
        let p = RetryPolicy {
            max_retries: 3,
            base: Duration::from_millis(10),
        };
        let mut rng = StdRng::seed_from_u64(2);
        let d = p.backoff(1, Some(Duration::from_secs(2)), &mut rng);
        assert!(
            d >= Duration::from_secs(2) && d <= Duration::from_millis(2500),
            "{d:?}"
        );
        let d = p.backoff(1, Some(Duration::from_secs(9999)), &mut rng);
        assert!(
            d >= MAX_RETRY_AFTER && d <= MAX_RETRY_AFTER * 5 / 4,
            "{d:?}"
        );
    }

    #[test]
    fn only_retryable_causes_within_the_budget_are_retried() {
        let p = RetryPolicy {
            max_retries: 2,
            base: Duration::from_millis(1),
        };
        let mut rng = StdRng::seed_from_u64(3);
        assert!(p.decide(Cause::Http429, 0, None, &mut rng).is_some());
        assert!(p.decide(Cause::Http5xx, 1, None, &mut rng).is_some());
        assert!(
            p.decide(Cause::Http5xx, 2, None, &mut rng).is_none(),
            "budget spent"
        );
        for c in [
            Cause::Http4xx,
            Cause::Malformed,
            Cause::TimeoutTotal,
            Cause::Cancelled,
        ] {
            assert!(
                p.decide(c, 0, None, &mut rng).is_none(),
                "{c} must not be retried"
            );
        }
        let none = RetryPolicy::default();
        assert!(none.decide(Cause::Http429, 0, None, &mut rng).is_none());
    }
}
