//! The sampler: on a fixed cadence (10 ms by default), records in-flight, queue
//! depth and cap as `sample` records, on its own thread so that a busy runtime
//! does not delay it (each sample is stamped when it is read, so lateness never
//! misplaces one).

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering::Relaxed};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use tpscope_model::{Occupancy, RunClock, SampleRecord};

use crate::live::LiveStats;
use crate::writer::WriterTx;

/// One reading: when, in flight, queued, cap.
pub type Reading = (Instant, u32, u32, Option<u32>);

/// A running sampler thread.
pub struct Sampler {
    stop: Arc<AtomicBool>,
    handle: Option<JoinHandle<()>>,
}

impl Sampler {
    /// Starts sampling `probe` every `interval`, writing to `tx` (when given) and
    /// updating `live`.
    pub fn start(
        run_id: String,
        interval: Duration,
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
                let take = || {
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
                    if let Some(tx) = &tx {
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
                    take();
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
                        take();
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
