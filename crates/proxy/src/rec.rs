//! The proxy's run: the `tpscope_record` writer thread and sampler (the one
//! recording seam), the run clock and id, and the occupancy (in flight and
//! queued, packed in one atomic as the recording API does) that the sampler and
//! the metrics read.

use std::io::Write;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::time::{Duration, Instant};

use tpscope_model::{RunClock, RunRecord};
use tpscope_record::{
    Finished, LiveStats, RunCounts, RunInfo, Sampler, Writer, WriterTx, new_run_id,
};
use tpscope_tokens::Tokenizer;

use crate::metrics::Metrics;

/// One request's move from the queue to a slot, as an addend to `occupancy`.
pub(crate) const ADMIT: u64 = (1 << 32) - 1;
/// One slot, as an addend to `occupancy`.
pub(crate) const SLOT: u64 = 1 << 32;

/// What every request shares.
pub(crate) struct Rec {
    pub run_id: Arc<str>,
    pub clock: RunClock,
    pub tx: WriterTx,
    /// In flight in the high 32 bits, queued in the low 32.
    pub occupancy: AtomicU64,
    pub cap: Option<u32>,
    pub metrics: Arc<Metrics>,
    /// What the `end` record adds (stated queue times, requests cut at stop).
    pub tally: crate::stop::EndTally,
}

impl Rec {
    /// (in flight, queued).
    pub fn reading(&self) -> (u32, u32) {
        let occ = self.occupancy.load(Relaxed);
        ((occ >> 32) as u32, occ as u32)
    }

    /// A queued request takes a slot (at `at`, else now): the occupancy moves,
    /// and the instant.
    pub fn admit_at(&self, at: Option<tpscope_model::Timestamp>) -> tpscope_model::Timestamp {
        self.occupancy.fetch_add(ADMIT, Relaxed);
        at.unwrap_or_else(|| self.clock.now())
    }

    /// A request admitted by the gate but never used goes back to queued (it is
    /// leaving the queue).
    pub fn unadmit(&self) {
        self.occupancy.fetch_sub(ADMIT, Relaxed);
    }

    /// Hands a finished request to the writer thread and counts it.
    pub fn finished(&self, f: Finished) {
        self.metrics.finished(&f);
        self.tx.finished(self.run_id.clone(), None, f);
    }
}

/// The writer and sampler of a running proxy.
pub(crate) struct Running {
    writer: Writer,
    sampler: Sampler,
    rec: Arc<Rec>,
}

/// Starts the run: writes its `run` record through `out` (`rotate` makes the
/// record known to the writer that reopens files) and starts sampling; the
/// writer counts responses without `usage` with `tokenizer`.
pub(crate) fn start(
    out: Box<dyn Write + Send>,
    info: RunInfo,
    tokenizer: Tokenizer,
    interval: Duration,
    metrics: Arc<Metrics>,
    on_run: impl FnOnce(&RunRecord),
) -> (Running, Arc<Rec>) {
    let live = Arc::new(LiveStats::default());
    let writer = Writer::to_writer(out, tokenizer, Some(live.clone()));
    let clock = RunClock::start();
    let run_id: Arc<str> = new_run_id(0).into();
    let cap = info.cap;
    let record = info.record(run_id.to_string(), &clock);
    on_run(&record);
    writer.sender().run(record);
    live.start_run("", None, cap);
    let rec = Arc::new(Rec {
        run_id: run_id.clone(),
        clock,
        tx: writer.sender(),
        occupancy: AtomicU64::new(0),
        cap,
        metrics,
        tally: Default::default(),
    });
    let probe = rec.clone();
    let sampler = Sampler::start(
        run_id.to_string(),
        interval,
        clock,
        Box::new(move || {
            let at = Instant::now();
            let (in_flight, queued) = probe.reading();
            probe.metrics.occupancy(at, in_flight, queued, probe.cap);
            (at, in_flight, queued, probe.cap)
        }),
        Some(writer.sender()),
        live,
    );
    (
        Running {
            writer,
            sampler,
            rec: rec.clone(),
        },
        rec,
    )
}

impl Running {
    /// A last sample, the `end` record, flush; the counts written.
    pub fn close(self) -> std::io::Result<RunCounts> {
        self.sampler.stop();
        self.rec
            .tx
            .end_proxy(&self.rec.run_id, self.rec.clock.now(), self.rec.tally.end());
        let counts = self.writer.finish()?;
        Ok(counts.get(&*self.rec.run_id).copied().unwrap_or_default())
    }
}
