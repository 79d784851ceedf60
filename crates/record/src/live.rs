//! Live counters of a running recording, written by the producer (the bench's
//! executor), the sampler and the writer thread, and read by progress displays.
//! They never own a measurement: the span log is the record; these are for watching.

use std::sync::Mutex;
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering::Relaxed};
use std::time::Instant;

use tpscope_model::{Status, StatusCounts};

/// Counters of the current run (reset when a sweep moves to its next level).
#[derive(Debug)]
pub struct LiveStats {
    /// Requests finished (any status).
    pub done: AtomicU64,
    /// Of which ok.
    pub ok: AtomicU64,
    /// Of which error.
    pub error: AtomicU64,
    /// Of which cancelled.
    pub cancelled: AtomicU64,
    /// Output tokens of ok requests (tokenizer counts are added when the writer
    /// has counted them).
    pub tokens: AtomicU64,
    /// Requests holding a slot, as of the last sample.
    pub in_flight: AtomicU32,
    /// Requests waiting, as of the last sample.
    pub queue_depth: AtomicU32,
    /// The cap (`u32::MAX`: none).
    pub cap: AtomicU32,
    /// Samples taken.
    pub samples: AtomicU64,
    /// Samples that saw a gap (work waiting while a slot was free).
    pub gap_samples: AtomicU64,
    /// Requests the run will make, when known (`u64::MAX`: unknown).
    pub planned: AtomicU64,
    /// The client's own lag (docs/design.md §13).
    pub lag: crate::lag::ClientLag,
    started: Mutex<Option<Instant>>,
    label: Mutex<String>,
}

impl Default for LiveStats {
    fn default() -> Self {
        LiveStats {
            done: AtomicU64::new(0),
            ok: AtomicU64::new(0),
            error: AtomicU64::new(0),
            cancelled: AtomicU64::new(0),
            tokens: AtomicU64::new(0),
            in_flight: AtomicU32::new(0),
            queue_depth: AtomicU32::new(0),
            cap: AtomicU32::new(u32::MAX),
            samples: AtomicU64::new(0),
            gap_samples: AtomicU64::new(0),
            planned: AtomicU64::new(u64::MAX),
            lag: Default::default(),
            started: Mutex::new(None),
            label: Mutex::new(String::new()),
        }
    }
}

/// A consistent-enough copy of the counters for one progress frame.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct LiveSnapshot {
    /// Finished requests.
    pub done: u64,
    /// Planned requests, when known.
    pub planned: Option<u64>,
    /// Ok, failed after retries, cancelled.
    pub status: StatusCounts,
    /// Output tokens of ok requests.
    pub tokens: u64,
    /// Seconds since the run started (`None` before it starts).
    pub elapsed_s: Option<f64>,
    /// In flight at the last sample.
    pub in_flight: u32,
    /// Queue depth at the last sample.
    pub queue_depth: u32,
    /// The cap, when there is one.
    pub cap: Option<u32>,
    /// Fraction of samples that saw a gap, when any sample was taken.
    pub gap_fraction: Option<f64>,
    /// What is running (e.g. `concurrency 8` in a sweep, `warm-up`).
    pub label: String,
    /// A warning when the client itself is behind (its timings are then upper
    /// bounds).
    pub lagging: Option<String>,
}

impl LiveStats {
    /// Zeroes the counters for a new run and starts its clock.
    pub fn start_run(&self, label: &str, planned: Option<u64>, cap: Option<u32>) {
        for c in [
            &self.done,
            &self.ok,
            &self.error,
            &self.cancelled,
            &self.tokens,
            &self.samples,
            &self.gap_samples,
        ] {
            c.store(0, Relaxed);
        }
        self.lag.reset();
        self.in_flight.store(0, Relaxed);
        self.queue_depth.store(0, Relaxed);
        self.cap.store(cap.unwrap_or(u32::MAX), Relaxed);
        self.planned.store(planned.unwrap_or(u64::MAX), Relaxed);
        *self.started.lock().unwrap_or_else(|e| e.into_inner()) = Some(Instant::now());
        *self.label.lock().unwrap_or_else(|e| e.into_inner()) = label.to_string();
    }

    /// Counts one finished span; an ok span adds its output tokens.
    pub fn span_done(&self, status: Status, output_tokens: u64) {
        self.done.fetch_add(1, Relaxed);
        match status {
            Status::Ok => {
                self.ok.fetch_add(1, Relaxed);
                self.tokens.fetch_add(output_tokens, Relaxed);
            }
            Status::Error => {
                self.error.fetch_add(1, Relaxed);
            }
            Status::Cancelled => {
                self.cancelled.fetch_add(1, Relaxed);
            }
        }
    }

    /// Replaces an ok span's provisional token count (chunks, counted when it
    /// finished) with the tokenizer's count (made later, on the writer thread).
    pub fn recount_tokens(&self, provisional: u64, counted: u64) {
        let _ = self.tokens.fetch_update(Relaxed, Relaxed, |v| {
            Some(v.saturating_sub(provisional).saturating_add(counted))
        });
    }

    /// A copy of the counters now.
    pub fn snapshot(&self) -> LiveSnapshot {
        let samples = self.samples.load(Relaxed);
        let cap = self.cap.load(Relaxed);
        let planned = self.planned.load(Relaxed);
        LiveSnapshot {
            done: self.done.load(Relaxed),
            planned: (planned != u64::MAX).then_some(planned),
            status: StatusCounts {
                ok: self.ok.load(Relaxed),
                error: self.error.load(Relaxed),
                cancelled: self.cancelled.load(Relaxed),
            },
            tokens: self.tokens.load(Relaxed),
            elapsed_s: self
                .started
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .map(|s| s.elapsed().as_secs_f64()),
            in_flight: self.in_flight.load(Relaxed),
            queue_depth: self.queue_depth.load(Relaxed),
            cap: (cap != u32::MAX).then_some(cap),
            gap_fraction: (samples > 0)
                .then(|| self.gap_samples.load(Relaxed) as f64 / samples as f64),
            label: self.label.lock().unwrap_or_else(|e| e.into_inner()).clone(),
            lagging: self.lag.warning(),
        }
    }
}
