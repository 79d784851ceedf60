//! The writer thread: writes `run`, `span`, `sample`, `server_sample` and `end` records through
//! `tpscope_log`'s [`LogWriter`] over a `BufWriter`, on its own thread, assembling
//! spans and counting tokens of replies without `usage` there (off the hot path).
//! It flushes at least every [`FLUSH_EVERY`] while records arrive, so a killed run
//! keeps every span released more than a second before. Spans, `run` and `end`
//! records come only from a [`crate::Session`] (the crate's one path for them);
//! samples and server samples from anyone holding a [`WriterTx`].

use std::collections::HashMap;
use std::fs::File;
use std::io::{self, BufWriter, Write};
use std::path::Path;
use std::sync::Arc;
use std::sync::mpsc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use tpscope_log::LogWriter;
use tpscope_model::{
    EndRecord, Record, RunRecord, SampleRecord, ServerSampleRecord, Span, Status, StatusCounts,
    Timestamp,
};
use tpscope_tokens::Tokenizer;

use crate::assemble::{Finished, apply_counts, checked_span};
use crate::inbox::{Inbox, Next};
use crate::live::LiveStats;
use crate::otlp::{ExportStats, ExportTx, Exporter, OtlpConfig};

/// The longest records wait in the buffer before being flushed to the file.
pub const FLUSH_EVERY: Duration = Duration::from_millis(200);

enum Msg {
    Run(Box<RunRecord>),
    Finished(Box<Handed>),
    Sample(SampleRecord),
    ServerSample(Box<ServerSampleRecord>),
    End {
        run_id: String,
        ended_at: Timestamp,
        schedule_late: Option<Duration>,
        proxy: Option<ProxyEnd>,
    },
    Sync(mpsc::Sender<()>),
    Export(ExportTx),
    Close,
}

/// Called on the writer thread with each span of a session as soon as it is
/// assembled and validated (before the tokenizer's counts): a producer's own
/// tally of its spans (the bench's run summary).
pub type SpanHook = Arc<dyn Fn(&Span) + Send + Sync>;

/// A finished request on its way to the writer thread, and how its session
/// wants its span made.
pub(crate) struct Handed {
    /// The run it belongs to.
    pub(crate) run_id: Arc<str>,
    /// The caller's name for it (the span's `request_id`), if any.
    pub(crate) request_id: Option<String>,
    /// What the producer measured.
    pub(crate) finished: Finished,
    /// Whether `finished.seq` is kept (a producer that numbers its requests
    /// itself: the bench, in arrival order); else the writer numbers the
    /// session's spans 1, 2, … in release order.
    pub(crate) numbered: bool,
    /// The session's live counters, which count the span (else the writer's).
    pub(crate) live: Option<Arc<LiveStats>>,
    /// Shown the span once it is assembled.
    pub(crate) on_span: Option<SpanHook>,
}

/// What a proxy run's `end` record adds.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ProxyEnd {
    /// Completions whose client stated when it queued them.
    pub queued_at_stated: u64,
    /// Streams still open when the drain ended, written as cancelled.
    pub cut_at_stop: u64,
    /// The model the responses named.
    pub model: Option<String>,
}

/// Counts the writer kept for one run (they go into its `end` record).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct RunCounts {
    /// Span records written.
    pub spans: u64,
    /// Of which ok, error and cancelled.
    pub status: StatusCounts,
    /// Sample records written.
    pub samples: u64,
}

/// A handle to send records to the writer thread; cheap to clone.
#[derive(Clone)]
pub struct WriterTx {
    tx: mpsc::Sender<Msg>,
}

impl WriterTx {
    /// Writes a run's first record (a [`crate::Session`]'s).
    pub(crate) fn run(&self, r: RunRecord) {
        let _ = self.tx.send(Msg::Run(Box::new(r)));
    }

    /// Assembles a finished request on the writer thread as `h` says (the one
    /// path of a [`crate::Session`]'s spans): numbered, validated, shown to its
    /// hook, counted in its live counters (else the writer's), and written.
    pub(crate) fn hand(&self, h: Handed) {
        let _ = self.tx.send(Msg::Finished(Box::new(h)));
    }

    /// Writes a sample.
    pub fn sample(&self, s: SampleRecord) {
        let _ = self.tx.send(Msg::Sample(s));
    }

    /// Writes a scrape of the server's metrics (a `server_sample` record).
    pub fn server_sample(&self, s: ServerSampleRecord) {
        let _ = self.tx.send(Msg::ServerSample(Box::new(s)));
    }

    /// Writes a run's `end` record with the counts of what was written for it
    /// and the client's worst pacing lateness (open loop).
    pub(crate) fn end(&self, run_id: &str, ended_at: Timestamp, schedule_late: Option<Duration>) {
        let _ = self.tx.send(Msg::End {
            run_id: run_id.to_string(),
            ended_at,
            schedule_late,
            proxy: None,
        });
    }

    /// Writes a proxy run's `end` record: the counts, and what only the proxy
    /// knows (how many requests stated their queue time, how many streams the
    /// stop cut).
    pub(crate) fn end_proxy(&self, run_id: &str, ended_at: Timestamp, proxy: ProxyEnd) {
        let _ = self.tx.send(Msg::End {
            run_id: run_id.to_string(),
            ended_at,
            schedule_late: None,
            proxy: Some(proxy),
        });
    }

    /// Waits until everything sent so far is written and flushed.
    pub fn sync(&self) {
        let (tx, rx) = mpsc::channel();
        if self.tx.send(Msg::Sync(tx)).is_ok() {
            let _ = rx.recv();
        }
    }
}

/// The writer thread and its channel.
pub struct Writer {
    tx: WriterTx,
    handle: Option<JoinHandle<io::Result<HashMap<String, RunCounts>>>>,
    exporter: Option<Exporter>,
}

impl Writer {
    /// Creates (truncates) `path` and starts writing to it.
    pub fn create(
        path: &Path,
        tokenizer: Tokenizer,
        live: Option<Arc<LiveStats>>,
    ) -> io::Result<Writer> {
        let file = File::create(path)?;
        Ok(Writer::to_writer(file, tokenizer, live))
    }

    /// Starts writing to any writer.
    pub fn to_writer<W: Write + Send + 'static>(
        w: W,
        tokenizer: Tokenizer,
        live: Option<Arc<LiveStats>>,
    ) -> Writer {
        let (tx, rx) = mpsc::channel();
        let handle = std::thread::Builder::new()
            .name("tpscope-recorder".into())
            .spawn(move || {
                let out = LogWriter::new(BufWriter::with_capacity(256 * 1024, w));
                writer_loop(out, rx, tokenizer, live)
            })
            .expect("spawn the recorder thread");
        Writer {
            tx: WriterTx { tx },
            handle: Some(handle),
            exporter: None,
        }
    }

    /// Also sends every span written from now on to an OpenTelemetry collector
    /// (docs/otlp.md), from a thread of its own through a bounded queue: the log
    /// never waits for it, and what cannot be exported is counted in the returned
    /// stats (final once [`Writer::finish`] returns).
    pub fn export_otlp(&mut self, cfg: OtlpConfig) -> Arc<ExportStats> {
        let (ex, tx) = Exporter::start(cfg);
        let stats = ex.stats();
        let _ = self.tx.tx.send(Msg::Export(tx));
        if let Some(mut old) = self.exporter.replace(ex) {
            // Its queue's sender was replaced on the writer thread.
            old.finish();
        }
        stats
    }

    /// A handle for sending records.
    pub fn sender(&self) -> WriterTx {
        self.tx.clone()
    }

    /// Writes everything sent so far, flushes, stops the thread, and returns the
    /// counts per run (or the first write error).
    /// Stops the exporter, if any, after the writer thread (which dropped the
    /// queue's sender) so that it sends what is still queued, for a bounded time.
    pub fn finish(mut self) -> io::Result<HashMap<String, RunCounts>> {
        let _ = self.tx.tx.send(Msg::Close);
        let r = match self.handle.take().map(JoinHandle::join) {
            Some(Ok(r)) => r,
            Some(Err(_)) => Err(io::Error::other("the recorder thread panicked")),
            None => Ok(HashMap::new()),
        };
        if let Some(ex) = &mut self.exporter {
            ex.finish();
        }
        r
    }
}

impl Drop for Writer {
    fn drop(&mut self) {
        if let Some(h) = self.handle.take() {
            let _ = self.tx.tx.send(Msg::Close);
            let _ = h.join();
        }
        if let Some(ex) = &mut self.exporter {
            ex.finish();
        }
    }
}

fn writer_loop<W: Write>(
    mut w: LogWriter<BufWriter<W>>,
    rx: mpsc::Receiver<Msg>,
    tokenizer: Tokenizer,
    live: Option<Arc<LiveStats>>,
) -> io::Result<HashMap<String, RunCounts>> {
    let mut counts: HashMap<String, RunCounts> = HashMap::new();
    let mut error: Option<io::Error> = None;
    let mut last_flush = Instant::now();
    let mut dirty = false;
    let mut finished_seq: HashMap<Arc<str>, u64> = HashMap::new();
    // The exporter's queue, and each run's record for its spans' attributes.
    let mut export: Option<ExportTx> = None;
    let mut runs: HashMap<String, Arc<RunRecord>> = HashMap::new();
    let mut inbox = Inbox::new(rx);
    loop {
        let msg = match inbox.next(FLUSH_EVERY / 2) {
            Next::Msg(m) => m,
            Next::Idle => {
                if dirty && error.is_none() {
                    if let Err(e) = w.flush() {
                        error = Some(e);
                    }
                    dirty = false;
                    last_flush = Instant::now();
                }
                continue;
            }
            Next::Closed => break,
        };
        let record = match msg {
            Msg::Close => break,
            Msg::Sync(ack) => {
                if error.is_none()
                    && let Err(e) = w.flush()
                {
                    error = Some(e);
                }
                dirty = false;
                last_flush = Instant::now();
                let _ = ack.send(());
                continue;
            }
            Msg::Export(tx) => {
                export = Some(tx);
                continue;
            }
            Msg::Run(r) => {
                counts.entry(r.run_id.clone()).or_default();
                runs.insert(r.run_id.clone(), Arc::new((*r).clone()));
                Record::Run(*r)
            }
            Msg::Finished(h) => {
                let Handed {
                    run_id,
                    request_id,
                    finished: mut f,
                    numbered,
                    live: own,
                    on_span,
                } = *h;
                if !numbered {
                    let seq = finished_seq.entry(run_id.clone()).or_default();
                    f.seq = *seq;
                    *seq += 1;
                }
                let (mut s, to_count) = checked_span(&run_id, tokenizer.name(), request_id, f);
                let span_live = own.or_else(|| live.clone());
                if let Some(live) = &span_live {
                    live.span_done(s.status, s.output_tokens);
                }
                if let Some(hook) = &on_span {
                    hook(&s);
                }
                if !to_count.is_empty() {
                    let before = s.output_tokens;
                    let n: Vec<(usize, u64)> = to_count
                        .attempts
                        .iter()
                        .map(|(i, text)| (*i, tokenizer.count(text) as u64))
                        .collect();
                    apply_counts(&mut s, &n, to_count.span_from_final);
                    if let Some(text) = &to_count.check {
                        s.tokenizer_output_tokens = Some(tokenizer.count(text) as u64);
                    }
                    if let Some(live) = &span_live
                        && s.status == Status::Ok
                    {
                        // The producer counted the provisional (chunk) figure.
                        live.recount_tokens(before, s.output_tokens);
                    }
                }
                let c = counts.entry(s.run_id.clone()).or_default();
                c.spans += 1;
                c.status.add(s.status);
                Record::Span(s)
            }
            Msg::Sample(s) => {
                counts.entry(s.run_id.clone()).or_default().samples += 1;
                Record::Sample(s)
            }
            Msg::ServerSample(s) => Record::ServerSample(s),
            Msg::End {
                run_id,
                ended_at,
                schedule_late,
                proxy,
            } => {
                let c = counts.get(&run_id).copied().unwrap_or_default();
                Record::End(EndRecord {
                    run_id,
                    ended_at,
                    spans: c.spans,
                    status: c.status,
                    samples: c.samples,
                    schedule_late_max: schedule_late,
                    queued_at_stated: proxy.as_ref().map(|p| p.queued_at_stated),
                    cut_at_stop: proxy.as_ref().map(|p| p.cut_at_stop),
                    model: proxy.and_then(|p| p.model),
                })
            }
        };
        if error.is_none() {
            if let Err(e) = w.write(&record) {
                error = Some(e);
            }
            dirty = true;
        }
        // After the write: the log never waits for the export.
        if let (Some(ex), Record::Span(s)) = (&export, &record) {
            ex.offer(runs.get(&s.run_id).cloned(), s);
        }
        // Checked on every record (a clock read is small beside a record's
        // serialisation): a steady trickle of samples never times the receive out.
        if dirty
            && error.is_none()
            && (matches!(record, Record::End(_)) || last_flush.elapsed() >= FLUSH_EVERY)
        {
            if let Err(e) = w.flush() {
                error = Some(e);
            }
            dirty = false;
            last_flush = Instant::now();
        }
    }
    if error.is_none()
        && let Err(e) = w.flush()
    {
        error = Some(e);
    }
    match error {
        Some(e) => Err(e),
        None => Ok(counts),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Mutex;
    use tpscope_model::{AttemptOutcome, Cause, RunClock, TokenSource};

    use crate::Session;

    /// A writer whose bytes can be read while the recorder still holds it.
    #[derive(Clone, Default)]
    struct Shared(Arc<Mutex<Vec<u8>>>);
    impl Write for Shared {
        fn write(&mut self, b: &[u8]) -> io::Result<usize> {
            self.0.lock().unwrap().extend_from_slice(b);
            Ok(b.len())
        }
        fn flush(&mut self) -> io::Result<()> {
            Ok(())
        }
    }

    fn t(ms: i64) -> Timestamp {
        Timestamp::from_unix_nanos(1_800_000_000_000_000_000 + ms * 1_000_000)
    }

    /// Run `r1`'s session on `w` (spans keep their `seq`), writing no `run` record.
    fn session(w: &Writer) -> Session {
        let live = Arc::new(LiveStats::default());
        Session::shared(w.sender(), live, "r1", RunClock::start(), Some(2))
    }

    /// Request `seq` of a run: one attempt, ok or failed with a 5xx, receiving
    /// `text` in two chunks (no usage) when it is not empty.
    fn finished(seq: u64, ok: bool, text: &str) -> Finished {
        let mut o = AttemptOutcome::started(t(1));
        o.attempt.ended_at = t(4);
        o.attempt.http_status = Some(if ok { 200 } else { 500 });
        o.attempt.cause = (!ok).then_some(Cause::Http5xx);
        o.error_message = (!ok).then(|| "x".into());
        if !text.is_empty() {
            o.attempt.first_token_at = Some(t(2));
            o.last_token_at = Some(t(3));
            o.content_chunks = 2;
            o.text = text.into();
        }
        Finished {
            seq,
            queued_at: t(0),
            admitted_at: Some(t(1)),
            released_at: t(5),
            outcomes: vec![o],
            planned_input_tokens: None,
            cancelled: None,
            session_id: None,
            turn: None,
        }
    }

    fn lines(buf: &Shared) -> Vec<Record> {
        String::from_utf8(buf.0.lock().unwrap().clone())
            .unwrap()
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect()
    }

    #[test]
    fn writes_every_record_with_end_counts() {
        let buf = Shared::default();
        let rec = Writer::to_writer(buf.clone(), Tokenizer::O200kBase, None);
        let tx = rec.sender();
        tx.run(RunRecord {
            run_id: "r1".into(),
            schema: tpscope_model::SCHEMA.into(),
            tool: "t".into(),
            started_at: t(0),
            target: Default::default(),
            cap: Some(2),
            token_source: None,
            tokenizer: None,
            sample_interval: None,
            sample_heartbeat: None,
            load: serde_json::Value::Null,
            labels: Default::default(),
            queue_times: Default::default(),
        });
        let s = session(&rec);
        s.finished(None, finished(0, true, ""));
        s.finished(None, finished(1, false, ""));
        tx.sample(SampleRecord {
            run_id: "r1".into(),
            at: t(3),
            in_flight: 1,
            queue_depth: 0,
            cap: Some(2),
        });
        tx.end("r1", t(9), None);
        rec.finish().unwrap();
        let recs = lines(&buf);
        assert_eq!(recs.len(), 5);
        let Record::End(e) = &recs[4] else {
            panic!("end last")
        };
        assert_eq!(
            (
                e.spans,
                e.status.ok,
                e.status.error,
                e.status.cancelled,
                e.samples
            ),
            (2, 1, 1, 0, 1)
        );
    }

    #[test]
    fn spans_are_on_disk_soon_after_release_without_closing() {
        let buf = Shared::default();
        let rec = Writer::to_writer(buf.clone(), Tokenizer::O200kBase, None);
        session(&rec).finished(None, finished(0, true, ""));
        // No sync, no close: the periodic flush must get it out within a second.
        let deadline = Instant::now() + Duration::from_secs(1);
        while lines(&buf).is_empty() && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(10));
        }
        assert_eq!(lines(&buf).len(), 1);
        drop(rec);
    }

    #[test]
    fn a_steady_trickle_of_samples_does_not_hold_a_span_back() {
        // The flush deadline was checked only every 64 records, and a trickle of
        // records never lets the idle timeout fire: at one sample per 50 ms a span
        // waited 3.2 s for its flush.
        let buf = Shared::default();
        let rec = Writer::to_writer(buf.clone(), Tokenizer::O200kBase, None);
        let tx = rec.sender();
        session(&rec).finished(None, finished(0, true, ""));
        let sample = SampleRecord {
            run_id: "r1".into(),
            at: t(3),
            in_flight: 1,
            queue_depth: 0,
            cap: None,
        };
        let deadline = Instant::now() + Duration::from_secs(2);
        while lines(&buf).is_empty() && Instant::now() < deadline {
            tx.sample(sample.clone());
            std::thread::sleep(Duration::from_millis(50));
        }
        assert!(!lines(&buf).is_empty(), "the span is still in the buffer");
        drop(rec);
    }

    #[test]
    fn replies_without_usage_are_counted_by_the_tokenizer_on_the_writer() {
        let buf = Shared::default();
        let rec = Writer::to_writer(buf.clone(), Tokenizer::O200kBase, None);
        // Two chunks received: the span counts 2 until the tokenizer counts 4.
        session(&rec).finished(None, finished(0, true, "Hello, world!"));
        rec.finish().unwrap();
        let Record::Span(s) = &lines(&buf)[0] else {
            panic!()
        };
        assert_eq!(
            s.token_source,
            Some(TokenSource::Tokenizer("o200k_base".into()))
        );
        assert_eq!((s.output_tokens, s.attempts[0].tokens), (4, 4));
    }
}
