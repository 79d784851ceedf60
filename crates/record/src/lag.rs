//! The client's own lag while a run is under way (docs/design.md §13): sampler ticks
//! missed, open-loop pacing lateness, the worst kernel-to-task lag and the
//! chunks stamped only as upper bounds, for the live line. The report computes
//! the same figures from the span log (`analysis::measurement_quality`).

use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::time::Duration;

use tpscope_model::Span;

/// The worst client lag the live line lets pass without a word.
const LAG_WARN: Duration = Duration::from_millis(5);

/// Counters of the client's own lag in the current run.
#[derive(Debug, Default)]
pub struct ClientLag {
    /// Sampler ticks skipped because the sampler thread ran late.
    pub missed_ticks: AtomicU64,
    /// Sampler ticks taken.
    pub ticks: AtomicU64,
    /// The latest a timed arrival was queued after its schedule, ns.
    pub schedule_late_max_ns: AtomicU64,
    /// The worst kernel-arrival-to-task lag of a finished request, ns.
    pub lag_max_ns: AtomicU64,
    /// Content chunks whose reads were traced.
    pub traced_chunks: AtomicU64,
    /// Of which stamped only as upper bounds.
    pub inexact_chunks: AtomicU64,
}

fn ns(d: Duration) -> u64 {
    u64::try_from(d.as_nanos()).unwrap_or(u64::MAX)
}

impl ClientLag {
    /// Zeroes the counters for a new run.
    pub fn reset(&self) {
        for c in [
            &self.missed_ticks,
            &self.ticks,
            &self.schedule_late_max_ns,
            &self.lag_max_ns,
            &self.traced_chunks,
            &self.inexact_chunks,
        ] {
            c.store(0, Relaxed);
        }
    }

    /// A timed arrival was queued `late` after its schedule.
    pub fn schedule_late(&self, late: Duration) {
        self.schedule_late_max_ns.fetch_max(ns(late), Relaxed);
    }

    /// The worst pacing lateness so far (`None`: none recorded).
    pub fn schedule_late_max(&self) -> Option<Duration> {
        match self.schedule_late_max_ns.load(Relaxed) {
            0 => None,
            n => Some(Duration::from_nanos(n)),
        }
    }

    /// Adds a finished span's attempts.
    pub fn span(&self, span: &Span) {
        for a in &span.attempts {
            if let Some(l) = a.client_lag {
                self.lag_max_ns.fetch_max(ns(l), Relaxed);
            }
            self.traced_chunks
                .fetch_add(a.traced_chunks.unwrap_or(0), Relaxed);
            self.inexact_chunks
                .fetch_add(a.inexact_chunks.unwrap_or(0), Relaxed);
        }
    }

    /// A short warning when the client is measurably behind; `None` otherwise.
    pub fn warning(&self) -> Option<String> {
        let mut why = Vec::new();
        let lag = Duration::from_nanos(self.lag_max_ns.load(Relaxed));
        if lag > LAG_WARN {
            why.push(format!("lag {:.0} ms", lag.as_secs_f64() * 1e3));
        }
        let (missed, ticks) = (self.missed_ticks.load(Relaxed), self.ticks.load(Relaxed));
        if missed * 20 > missed + ticks && missed > 0 {
            why.push(format!(
                "{:.0}% ticks missed",
                missed as f64 * 100.0 / (missed + ticks) as f64
            ));
        }
        let (inexact, traced) = (
            self.inexact_chunks.load(Relaxed),
            self.traced_chunks.load(Relaxed),
        );
        if inexact * 20 > traced && inexact > 0 {
            why.push(format!(
                "{:.0}% stamps inexact",
                inexact as f64 * 100.0 / traced as f64
            ));
        }
        if let Some(l) = self.schedule_late_max().filter(|&l| l > LAG_WARN) {
            why.push(format!("pacing {:.0} ms late", l.as_secs_f64() * 1e3));
        }
        (!why.is_empty()).then(|| format!("CLIENT LAGGING ({})", why.join(", ")))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn warns_only_when_the_client_is_behind() {
        let lag = ClientLag::default();
        lag.ticks.store(100, Relaxed);
        lag.schedule_late(Duration::from_micros(200));
        assert_eq!(lag.warning(), None);
        lag.missed_ticks.store(50, Relaxed);
        lag.schedule_late(Duration::from_millis(40));
        assert_eq!(
            lag.warning().as_deref(),
            Some("CLIENT LAGGING (33% ticks missed, pacing 40 ms late)")
        );
        lag.reset();
        assert_eq!(lag.warning(), None);
    }
}
