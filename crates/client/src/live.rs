//! Output tokens as they stream, and when the last bytes of any stream arrived,
//! for a live display (the bench's progress line): a finished-requests count
//! showed "0 tok/s" while 32 streams were busy, and a hung server looked the same
//! as a slow one. Shared by every attempt of a client; never a measurement.

use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::time::{Duration, Instant};

/// Live counters fed by the attempts of a client that has them.
#[derive(Debug)]
pub struct LiveTokens {
    base: Instant,
    tokens: AtomicU64,
    /// Nanoseconds from `base` to the last read of any response body.
    last_read_ns: AtomicU64,
}

impl Default for LiveTokens {
    fn default() -> Self {
        LiveTokens {
            base: Instant::now(),
            tokens: AtomicU64::new(0),
            last_read_ns: AtomicU64::new(0),
        }
    }
}

impl LiveTokens {
    fn ns(&self, at: Instant) -> u64 {
        u64::try_from(at.saturating_duration_since(self.base).as_nanos()).unwrap_or(u64::MAX)
    }

    /// Zeroes the count for a new run; its start counts as the last read.
    pub fn reset(&self) {
        self.tokens.store(0, Relaxed);
        self.last_read_ns.store(self.ns(Instant::now()), Relaxed);
    }

    /// A body read at `at` brought `tokens` more output tokens (0: bytes only).
    pub fn read(&self, tokens: u64, at: Instant) {
        if tokens > 0 {
            self.tokens.fetch_add(tokens, Relaxed);
        }
        self.last_read_ns.fetch_max(self.ns(at), Relaxed);
    }

    /// Output tokens streamed since the last reset (failed requests' included).
    pub fn tokens(&self) -> u64 {
        self.tokens.load(Relaxed)
    }

    /// How long before `now` the last body read (or the reset) was.
    pub fn silent_for(&self, now: Instant) -> Duration {
        Duration::from_nanos(self.ns(now).saturating_sub(self.last_read_ns.load(Relaxed)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_streamed_tokens_and_silence_since_the_last_read() {
        let l = LiveTokens::default();
        l.reset();
        let t0 = Instant::now();
        l.read(3, t0);
        l.read(0, t0 + Duration::from_secs(2));
        l.read(2, t0 + Duration::from_secs(1));
        assert_eq!(l.tokens(), 5);
        assert_eq!(
            l.silent_for(t0 + Duration::from_secs(7)),
            Duration::from_secs(5)
        );
        l.reset();
        assert_eq!(l.tokens(), 0);
    }
}
