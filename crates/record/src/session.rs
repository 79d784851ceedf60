//! One run's recording session, for every producer that records requests as they
//! happen (the [`crate::Recorder`] of a program, the proxy, each run of a bench):
//! the run's clock and id, its occupancy (in flight and queued) and cap, the
//! writer's channel, the sampler reading that occupancy, and the run's `run` and
//! `end` records. Every finished request goes through [`Session::finished`] to the
//! writer thread, which assembles, validates and writes its span, and every run's
//! `run` and `end` records are written here: one path for each, whoever produces.

use std::io;
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering::Relaxed};
use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant};

use tpscope_model::{RunClock, RunRecord, SampleRecord, Timestamp};

use crate::assemble::Finished;
use crate::live::LiveStats;
use crate::run::{RunInfo, new_run_id};
use crate::sampler::Sampler;
use crate::writer::{Handed, ProxyEnd, RunCounts, SpanHook, Writer, WriterTx};

/// The longest a session's sampler goes without writing a sample when nothing
/// changes (the `run` record's `sample_heartbeat_s`).
pub const DEFAULT_SAMPLE_HEARTBEAT: Duration = Duration::from_secs(10);

/// One request's move from the queue to a slot, as an addend to the occupancy.
const ADMIT: u64 = (1 << 32) - 1;
/// One slot, as an addend to the occupancy.
const SLOT: u64 = 1 << 32;

/// Called with each sample the sampler takes (instant, in flight, queued, cap),
/// beside writing it: a producer's own live view (the proxy's metrics).
pub type Observer = Box<dyn Fn(Instant, u32, u32, Option<u32>) + Send>;

/// What a session's requests share: the clock, the run id, the writer's channel,
/// the occupancy the sampler reads, and the cap.
pub struct Session {
    run_id: Arc<str>,
    clock: RunClock,
    tx: WriterTx,
    live: Arc<LiveStats>,
    /// In flight in the high 32 bits, queued in the low 32: one atomic per
    /// transition, so a sample never sees a request in both or in neither.
    occupancy: AtomicU64,
    /// The cap (`u32::MAX`: none).
    cap: AtomicU32,
    /// Whether spans keep the `seq` their producer gave (span id `seq + 1`);
    /// else the writer numbers them in release order.
    numbered: bool,
    /// Shown each span once it is assembled, on the writer thread.
    on_span: OnceLock<SpanHook>,
}

/// The writer and sampler of a started session; [`Running::close`] ends the run.
pub struct Running {
    writer: Writer,
    sampler: Sampler,
    session: Arc<Session>,
}

impl Session {
    /// Starts a run on `writer` (whose live counters are `live`): a fresh run id
    /// and clock, the `run` record of `info` (shown to `on_run` before it is
    /// sent), and a sampler on `info.sample_interval` (which must be set)
    /// that also tells `observe` each sample; it writes a sample on a change and
    /// at least every `info.sample_heartbeat` ([`DEFAULT_SAMPLE_HEARTBEAT`] when
    /// unset), so that an idle run costs bytes, not gigabytes.
    pub fn start(
        writer: Writer,
        live: Arc<LiveStats>,
        mut info: RunInfo,
        on_run: impl FnOnce(&RunRecord),
        observe: Option<Observer>,
    ) -> (Arc<Session>, Running) {
        let clock = RunClock::start();
        let run_id: Arc<str> = new_run_id(0).into();
        let interval = info.sample_interval.unwrap_or(Duration::from_millis(10));
        let heartbeat = *info
            .sample_heartbeat
            .get_or_insert(DEFAULT_SAMPLE_HEARTBEAT);
        let cap = info.cap;
        let session = Arc::new(Session {
            run_id: run_id.clone(),
            clock,
            tx: writer.sender(),
            live: live.clone(),
            occupancy: AtomicU64::new(0),
            cap: AtomicU32::new(cap.unwrap_or(u32::MAX)),
            numbered: false,
            on_span: OnceLock::new(),
        });
        live.start_run("", None, cap);
        let record = info.record(run_id.to_string(), &clock);
        on_run(&record);
        session.tx.run(record);
        let probe = session.clone();
        let sampler = Sampler::start(
            run_id.to_string(),
            interval,
            Some(heartbeat),
            clock,
            Box::new(move || {
                let at = Instant::now();
                let (in_flight, queued, cap) = probe.reading();
                if let Some(f) = &observe {
                    f(at, in_flight, queued, cap);
                }
                (at, in_flight, queued, cap)
            }),
            Some(writer.sender()),
            live,
        );
        let running = Running {
            writer,
            sampler,
            session: session.clone(),
        };
        (session, running)
    }

    /// A run on a writer that other runs share, one after another (a bench's
    /// levels on one log), on a clock started now: writes the `run` record of
    /// `info` as `run_id` at once, and is otherwise [`Session::shared`].
    pub fn open(tx: WriterTx, live: Arc<LiveStats>, run_id: &str, info: RunInfo) -> Session {
        let clock = RunClock::start();
        let cap = info.cap;
        tx.run(info.record(run_id.to_string(), &clock));
        Session::shared(tx, live, run_id, clock, cap)
    }

    /// A run on a writer that other runs share, one after another (a bench's
    /// warm-up, a test): it writes no `run` record ([`Session::open`] does) and
    /// starts no sampler (the producer samples its own occupancy); its spans keep
    /// the `seq` the producer gave them, so span ids follow the producer's
    /// numbering (arrival order), and are counted in `live`; [`Session::end`]
    /// writes its `end`.
    pub fn shared(
        tx: WriterTx,
        live: Arc<LiveStats>,
        run_id: &str,
        clock: RunClock,
        cap: Option<u32>,
    ) -> Session {
        Session {
            run_id: run_id.into(),
            clock,
            tx,
            live,
            occupancy: AtomicU64::new(0),
            cap: AtomicU32::new(cap.unwrap_or(u32::MAX)),
            numbered: true,
            on_span: OnceLock::new(),
        }
    }

    /// Shows every span of the session to `hook` from now on, on the writer
    /// thread as soon as it is assembled and validated (a producer's own tally:
    /// [`Session::sync`] waits for it); a second hook is refused (returned).
    pub fn on_span(&self, hook: SpanHook) -> Result<(), SpanHook> {
        self.on_span.set(hook)
    }

    /// The live counters that count the session's spans.
    pub fn live(&self) -> &Arc<LiveStats> {
        &self.live
    }

    /// Writes the run's `end` record of a [`Session::shared`] run: the counts
    /// of what was written for it, and the client's worst pacing lateness.
    pub fn end(&self, schedule_late: Option<Duration>) {
        self.tx.end(&self.run_id, self.clock.now(), schedule_late);
    }

    /// The run's id (as written in every record).
    pub fn run_id(&self) -> &Arc<str> {
        &self.run_id
    }

    /// The run's clock.
    pub fn clock(&self) -> RunClock {
        self.clock
    }

    /// The instant now on the run's clock.
    pub fn now(&self) -> Timestamp {
        self.clock.now()
    }

    /// The writer's channel (for other records of the run: server samples).
    pub fn writer(&self) -> &WriterTx {
        &self.tx
    }

    /// In flight, queued, and the cap, as a sample reads them.
    pub fn reading(&self) -> (u32, u32, Option<u32>) {
        let occ = self.occupancy.load(Relaxed);
        let cap = self.cap.load(Relaxed);
        (
            (occ >> 32) as u32,
            occ as u32,
            (cap != u32::MAX).then_some(cap),
        )
    }

    /// A request joined the queue.
    pub fn queue(&self) {
        self.occupancy.fetch_add(1, Relaxed);
    }

    /// A queued request took a slot.
    pub fn admit(&self) {
        self.occupancy.fetch_add(ADMIT, Relaxed);
    }

    /// An admitted request goes back to queued (a slot handed over but never used).
    pub fn unadmit(&self) {
        self.occupancy.fetch_sub(ADMIT, Relaxed);
    }

    /// A request left: its slot when it held one, else its place in the queue.
    pub fn leave(&self, admitted: bool) {
        self.occupancy
            .fetch_sub(if admitted { SLOT } else { 1 }, Relaxed);
    }

    /// Changes the in-flight cap from now on: written at once as a sample stating
    /// the new cap, which the analysis uses from that instant (docs/design.md §3).
    pub fn set_cap(&self, cap: u32) {
        self.cap.store(cap, Relaxed);
        self.live.cap.store(cap, Relaxed);
        let at = self.clock.now();
        let (in_flight, queue_depth, _) = self.reading();
        self.tx.sample(SampleRecord {
            run_id: self.run_id.to_string(),
            at,
            in_flight,
            queue_depth,
            cap: Some(cap),
        });
    }

    /// Hands a finished request to the writer thread, which assembles, validates,
    /// counts and writes its span (`request_id`: the caller's name for it).
    pub fn finished(&self, request_id: Option<String>, f: Finished) {
        self.tx.hand(Handed {
            run_id: self.run_id.clone(),
            request_id,
            finished: f,
            numbered: self.numbered,
            live: Some(self.live.clone()),
            on_span: self.on_span.get().cloned(),
        });
    }

    /// Waits until every span finished so far is written and flushed.
    pub fn sync(&self) {
        self.tx.sync();
    }
}

impl Running {
    /// Ends the run: a last sample, the `end` record, flush; the counts written
    /// and the occupancy at the close (in flight, queued).
    pub fn close(self) -> io::Result<(RunCounts, (u32, u32))> {
        self.close_with(None)
    }

    /// [`Running::close`], with what a proxy's `end` record adds.
    pub fn close_with(self, proxy: Option<ProxyEnd>) -> io::Result<(RunCounts, (u32, u32))> {
        self.sampler.stop();
        let s = &self.session;
        let (in_flight, queued, _) = s.reading();
        match proxy {
            Some(p) => s.tx.end_proxy(&s.run_id, s.clock.now(), p),
            None => s.tx.end(&s.run_id, s.clock.now(), None),
        }
        let counts = self.writer.finish()?;
        let counts = counts.get(&*s.run_id).copied().unwrap_or_default();
        Ok((counts, (in_flight, queued)))
    }
}
