//! When each stream of the relay benchmark connects, and which of its chunks are
//! measured, pure: chunks keep an even phase across the streams, the connects
//! are spread over about a second, and only chunks sent while every stream is
//! open count.

use std::ops::Range;
use std::time::Duration;

/// Periods over which the streams' connects are spread: about a second, as
/// 1,000 connects at once overflow a listener's accept queue and the dropped
/// ones wait out a SYN retransmit (1 s).
pub fn ramp(period: Duration) -> u32 {
    (1.0 / period.as_secs_f64()).ceil().clamp(1.0, 1e6) as u32
}

/// When stream `i` of `n` connects, from the round's start: at phase `i/n` of
/// the period (its chunks then arrive evenly among the others'), plus
/// `i mod ramp` whole periods.
pub fn start_offset(i: u32, n: u32, period: Duration, ramp: u32) -> Duration {
    period.mul_f64(f64::from(i) / f64::from(n.max(1))) + period * (i % ramp.max(1))
}

/// The sequence numbers measured in each stream: the first `max(warmup, ramp)`
/// and the last `ramp` are left out, so every measured chunk is sent while all
/// streams are open (the last stream connects up to `ramp` periods after the
/// first, and the first ends up to `ramp` periods before the last).
pub fn measured(warmup: u32, chunks: u32, ramp: u32) -> Range<u32> {
    warmup.max(ramp)..chunks.saturating_sub(ramp)
}
