//! The sampler: on a fixed cadence (10 ms by default), records in-flight, queue
//! depth and cap as `sample` records, on its own thread so that a busy runtime
//! does not delay it (each sample is stamped when it is read, so lateness never
//! misplaces one). With a heartbeat, a tick's reading is written only when the
//! state changed since the last one written, or the heartbeat has passed since
//! it (`Thinning`): an idle run then costs a sample per heartbeat, not per tick.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering::Relaxed};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use tpscope_model::{Occupancy, RunClock, SampleRecord};

use crate::live::LiveStats;
use crate::writer::WriterTx;

/// One reading: when, in flight, queued, cap.
pub type Reading = (Instant, u32, u32, Option<u32>);

/// The sampled state: in flight, queued, cap.
type State = (u32, u32, Option<u32>);

/// Which readings are written: every one without a heartbeat; with one, a
/// reading whose state differs from the last written, or taken a heartbeat or
/// more after it (so each written sample holds until the next).
#[derive(Debug)]
pub(crate) struct Thinning {
    heartbeat: Option<Duration>,
    last: Option<(Instant, State)>,
}

impl Thinning {
    /// Thinning to changes and `heartbeat` (`None`: write every reading).
    pub(crate) fn new(heartbeat: Option<Duration>) -> Thinning {
        Thinning {
            heartbeat,
            last: None,
        }
    }

    /// Whether the reading of `state` at `at` is written (`force`: always, as
    /// the last one of a run is); a written one becomes the last.
    pub(crate) fn keep(&mut self, at: Instant, state: State, force: bool) -> bool {
        let keep = match (self.heartbeat, self.last) {
            (Some(beat), Some((t, last))) if !force => {
                last != state || at.saturating_duration_since(t) >= beat
            }
            _ => true,
        };
        if keep {
            self.last = Some((at, state));
        }
        keep
    }
}

/// A running sampler thread.
pub struct Sampler {
    stop: Arc<AtomicBool>,
    handle: Option<JoinHandle<()>>,
}

impl Sampler {
    /// Starts sampling `probe` every `interval`, writing to `tx` (when given,
    /// thinned to changes and `heartbeat` when that is set) and updating `live`
    /// on every tick.
    pub fn start(
        run_id: String,
        interval: Duration,
        heartbeat: Option<Duration>,
        clock: RunClock,
        probe: Box<dyn Fn() -> Reading + Send>,
        tx: Option<WriterTx>,
        live: Arc<LiveStats>,
    ) -> Sampler {
        let stop = Arc::new(AtomicBool::new(false));
        let stop2 = stop.clone();
        let interval = interval.max(Duration::from_micros(100));
        let handle = std::thread::Builder::new()
            .name("tpscope-sampler".into())
            .spawn(move || {
                let mut thinning = Thinning::new(heartbeat);
                let mut take = |last: bool| {
                    let (at, in_flight, queue_depth, cap) = probe();
                    live.samples.fetch_add(1, Relaxed);
                    live.lag.ticks.fetch_add(1, Relaxed);
                    let occ = Occupancy {
                        in_flight,
                        queue_depth,
                        cap,
                    };
                    if occ.is_gap() {
                        live.gap_samples.fetch_add(1, Relaxed);
                    }
                    live.in_flight.store(in_flight, Relaxed);
                    live.queue_depth.store(queue_depth, Relaxed);
                    if let Some(tx) = &tx
                        && thinning.keep(at, (in_flight, queue_depth, cap), last)
                    {
                        tx.sample(SampleRecord {
                            run_id: run_id.clone(),
                            at: clock.at(at),
                            in_flight,
                            queue_depth,
                            cap,
                        });
                    }
                };
                let mut next = Instant::now();
                loop {
                    take(false);
                    next += interval;
                    let now = Instant::now();
                    if next < now {
                        // Fell behind (machine overloaded): skip the missed ticks
                        // rather than burst, keeping the cadence's phase.
                        let behind = (now - next).as_nanos() / interval.as_nanos() + 1;
                        next += interval * behind.min(u32::MAX as u128) as u32;
                        // The client's own lag (docs/design.md §13): the report counts
                        // them from the gaps between samples, the live line here.
                        live.lag
                            .missed_ticks
                            .fetch_add(u64::try_from(behind).unwrap_or(u64::MAX), Relaxed);
                    }
                    while !stop2.load(Relaxed) && Instant::now() < next {
                        std::thread::sleep((next - Instant::now()).min(Duration::from_millis(50)));
                    }
                    if stop2.load(Relaxed) {
                        // One last sample at the end, so the record covers the whole run.
                        take(true);
                        return;
                    }
                }
            })
            .expect("spawn the sampler thread");
        Sampler {
            stop,
            handle: Some(handle),
        }
    }

    /// Takes a last sample and stops.
    pub fn stop(mut self) {
        self.stop.store(true, Relaxed);
        if let Some(h) = self.handle.take() {
            let _ = h.join();
        }
    }
}

impl Drop for Sampler {
    fn drop(&mut self) {
        self.stop.store(true, Relaxed);
        if let Some(h) = self.handle.take() {
            let _ = h.join();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A simulated idle day on the default cadence (10 ms ticks, 10 s heartbeat)
    /// with one busy minute: an idle recorder wrote every tick (8.6 M samples,
    /// about 1.1 GB a day); now it writes one per heartbeat and one per change.
    #[test]
    fn an_idle_day_writes_a_sample_per_heartbeat_not_per_tick() {
        let (tick, beat) = (Duration::from_millis(10), Duration::from_secs(10));
        let mut thin = Thinning::new(Some(beat));
        let t0 = Instant::now();
        let ticks = 86_400 * 100u32;
        let busy = 3_600 * 100..3_660 * 100;
        let mut written = 0u32;
        for k in 0..ticks {
            // Busy: the state changes every tick (in flight alternates 1, 2).
            let state = if busy.contains(&k) {
                (1 + k % 2, 0, Some(4))
            } else {
                (0, 0, Some(4))
            };
            written += u32::from(thin.keep(t0 + tick * k, state, k + 1 == ticks));
        }
        let idle_beats = 86_400 / 10;
        let busy_ticks = 6_000;
        assert!(written <= idle_beats + busy_ticks + 2, "{written}");
        assert!(
            written >= idle_beats - 10,
            "a heartbeat was skipped: {written}"
        );
    }

    #[test]
    fn without_a_heartbeat_every_reading_is_written() {
        let mut thin = Thinning::new(None);
        let t0 = Instant::now();
        assert!((0..100).all(|k| thin.keep(t0 + Duration::from_millis(k), (0, 0, None), false)));
    }

    #[test]
    fn a_change_and_the_last_reading_are_written_at_once() {
        let mut thin = Thinning::new(Some(Duration::from_secs(10)));
        let t0 = Instant::now();
        let at = |ms| t0 + Duration::from_millis(ms);
        assert!(thin.keep(at(0), (0, 0, None), false));
        assert!(!thin.keep(at(10), (0, 0, None), false));
        assert!(thin.keep(at(20), (0, 1, None), false));
        assert!(!thin.keep(at(30), (0, 1, None), false));
        assert!(thin.keep(at(40), (0, 1, Some(2)), false));
        assert!(thin.keep(at(50), (0, 1, Some(2)), true));
        assert!(thin.keep(at(10_050), (0, 1, Some(2)), false));
    }
}
