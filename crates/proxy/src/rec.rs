//! The proxy's run: a `tpscope_record` [`Session`] (the one recording seam: the
//! writer thread and sampler, the run clock and id, the occupancy that the
//! sampler and the metrics read) and the proxy's metrics, told each sample and
//! each finished request.

use std::io::Write;
use std::sync::Arc;

use tpscope_model::{RunRecord, Timestamp};
use tpscope_record::{
    ExportStats, Finished, LiveStats, OtlpConfig, RunCounts, RunInfo, Session, Writer, session,
};
use tpscope_tokens::Tokenizer;

use crate::metrics::Metrics;

/// What every request shares.
pub(crate) struct Rec {
    pub session: Arc<Session>,
    pub metrics: Arc<Metrics>,
    /// What the `end` record adds (stated queue times, requests cut at stop).
    pub tally: crate::stop::EndTally,
}

impl Rec {
    /// A queued request takes a slot (at `at`, else now): the occupancy moves,
    /// and the instant.
    pub fn admit_at(&self, at: Option<Timestamp>) -> Timestamp {
        self.session.admit();
        at.unwrap_or_else(|| self.session.now())
    }

    /// A request admitted by the gate but never used goes back to queued (it is
    /// leaving the queue).
    pub fn unadmit(&self) {
        self.session.unadmit();
    }

    /// Hands a finished request to the writer thread and counts it.
    pub fn finished(&self, f: Finished) {
        self.metrics.finished(&f);
        self.session.finished(None, f);
    }
}

/// The writer and sampler of a running proxy, and what its `end` record adds.
pub(crate) struct Running(session::Running, Arc<Rec>);

/// Starts the run: writes its `run` record through `out` (`on_run` makes the
/// record known to the writer that reopens files) and starts sampling on
/// `info`'s cadence; the writer counts responses without `usage` with
/// `tokenizer`, and exports every span to `otlp` when given (its stats).
pub(crate) fn start(
    out: Box<dyn Write + Send>,
    info: RunInfo,
    tokenizer: Tokenizer,
    otlp: Option<OtlpConfig>,
    metrics: Arc<Metrics>,
    on_run: impl FnOnce(&RunRecord),
) -> (Running, Arc<Rec>, Option<Arc<ExportStats>>) {
    let live = Arc::new(LiveStats::default());
    let mut writer = Writer::to_writer(out, tokenizer, Some(live.clone()));
    let otlp = otlp.map(|c| writer.export_otlp(c));
    let observed = metrics.clone();
    let observe = Box::new(move |at, in_flight, queued, cap| {
        observed.occupancy(at, in_flight, queued, cap);
    });
    let (session, running) = Session::start(writer, live, info, on_run, Some(observe));
    let rec = Arc::new(Rec {
        session,
        metrics,
        tally: Default::default(),
    });
    (Running(running, rec.clone()), rec, otlp)
}

impl Running {
    /// A last sample, the `end` record (with what only the proxy knows), flush;
    /// the counts written.
    pub fn close(self) -> std::io::Result<RunCounts> {
        let end = self.1.tally.end();
        self.0.close_with(Some(end)).map(|(counts, _)| counts)
    }
}
