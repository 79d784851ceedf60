//! The public recording API (docs/design.md §17): a [`Recorder`] that any program uses to
//! write a span log of its own requests. It is the bench's machinery, reused: the
//! [`Writer`] thread (assembly, counting and writing happen there), the [`Sampler`]
//! (reading the recorder's own in-flight and queue counts on the cadence) and
//! [`RunInfo`]. The caller's thread only stamps times and bumps counters.

use std::fs::{File, OpenOptions};
use std::io::{self, Read, Seek, SeekFrom};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering::Relaxed};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use tpscope_model::{RunClock, SampleRecord, Timestamp};
use tpscope_tokens::Tokenizer;

use crate::live::{LiveSnapshot, LiveStats};
use crate::request::Queued;
use crate::run::{RunInfo, new_run_id};
use crate::sampler::Sampler;
use crate::writer::{RunCounts, Writer, WriterTx};

/// The sampling cadence when the [`RunInfo`] names none (docs/design.md §8).
pub const DEFAULT_SAMPLE_INTERVAL: Duration = Duration::from_millis(10);

/// How [`Recorder::open`] treats a file that already exists.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum OpenMode {
    /// Refuse it: a run file is never overwritten unless asked ([`Recorder::create`]).
    #[default]
    New,
    /// Add this run after the runs already in it (several runs may share a file).
    Append,
    /// Replace what it holds.
    Overwrite,
}

/// Why a recorder could not start or finish.
#[derive(Debug, thiserror::Error)]
pub enum RecordError {
    /// [`OpenMode::New`] and the file is there.
    #[error(
        "{}: already exists; a span log is never overwritten unless asked \
         (choose a new name, or open it with OpenMode::Append or OpenMode::Overwrite)",
        path.display()
    )]
    Exists {
        /// The file.
        path: PathBuf,
    },
    /// [`OpenMode::Append`] to a file whose last line was cut off (a killed run):
    /// what is appended would make that line a malformed record in the middle.
    #[error(
        "{}: its last line is cut off (a run that was killed?), so a run appended \
         after it would be unreadable; record into a new file",
        path.display()
    )]
    CutOff {
        /// The file.
        path: PathBuf,
    },
    /// Opening, reading or writing the file failed.
    #[error("{}: {source}", path.display())]
    Io {
        /// The file.
        path: PathBuf,
        /// What the system said.
        source: io::Error,
    },
}

/// What [`Recorder::close`] reports about the run.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Closed {
    /// What was written: spans by status, and samples (as in the `end` record).
    pub counts: RunCounts,
    /// Requests still queued or in flight at the close: their handles were neither
    /// finished nor dropped, so they are not in the log.
    pub unfinished: u64,
}

/// What handles share with the recorder: the clock, the writer's channel and the
/// occupancy the sampler reads.
pub(crate) struct Shared {
    pub(crate) run_id: Arc<str>,
    pub(crate) clock: RunClock,
    pub(crate) tx: WriterTx,
    /// In flight in the high 32 bits, queued in the low 32: one atomic per
    /// transition, so a sample never sees a request in both or in neither.
    pub(crate) occupancy: AtomicU64,
    /// The cap (`u32::MAX`: none).
    cap: AtomicU32,
}

/// One request's move from the queue to a slot, as an addend to `occupancy`.
pub(crate) const ADMIT: u64 = (1 << 32) - 1;
/// One slot, as an addend to `occupancy`.
pub(crate) const SLOT: u64 = 1 << 32;

impl Shared {
    fn reading(&self) -> (u32, u32, Option<u32>) {
        let occ = self.occupancy.load(Relaxed);
        let cap = self.cap.load(Relaxed);
        (
            (occ >> 32) as u32,
            occ as u32,
            (cap != u32::MAX).then_some(cap),
        )
    }
}

struct Running {
    writer: Writer,
    sampler: Sampler,
}

/// Records one run of the caller's own requests into a span log. `Send + Sync`:
/// share it by reference or in an `Arc`; each request gets its own handle from
/// [`Recorder::queued`]. Closing (or dropping) it writes the `end` record.
pub struct Recorder {
    shared: Arc<Shared>,
    live: Arc<LiveStats>,
    path: PathBuf,
    running: Mutex<Option<Running>>,
}

impl Recorder {
    /// Starts recording into a new file at `path`; an existing file is an error
    /// ([`RecordError::Exists`]), never truncated.
    pub fn create(path: impl AsRef<Path>, info: RunInfo) -> Result<Recorder, RecordError> {
        Recorder::open(path, info, OpenMode::New)
    }

    /// Starts recording into `path`, treating an existing file as `mode` says.
    pub fn open(
        path: impl AsRef<Path>,
        mut info: RunInfo,
        mode: OpenMode,
    ) -> Result<Recorder, RecordError> {
        let path = path.as_ref().to_path_buf();
        let file = open_file(&path, mode)?;
        let live = Arc::new(LiveStats::default());
        let writer = Writer::to_writer(file, Tokenizer::default(), Some(live.clone()));
        let clock = RunClock::start();
        let run_id: Arc<str> = new_run_id(0).into();
        let interval = *info.sample_interval.get_or_insert(DEFAULT_SAMPLE_INTERVAL);
        if info.tool.is_empty() {
            info.tool = crate::run::TOOL.into();
        }
        let shared = Arc::new(Shared {
            run_id: run_id.clone(),
            clock,
            tx: writer.sender(),
            occupancy: AtomicU64::new(0),
            cap: AtomicU32::new(info.cap.unwrap_or(u32::MAX)),
        });
        live.start_run("", None, info.cap);
        shared.tx.run(info.record(run_id.to_string(), &clock));
        let probe_from = shared.clone();
        let sampler = Sampler::start(
            run_id.to_string(),
            interval,
            clock,
            Box::new(move || {
                let at = Instant::now();
                let (in_flight, queued, cap) = probe_from.reading();
                (at, in_flight, queued, cap)
            }),
            Some(writer.sender()),
            live.clone(),
        );
        Ok(Recorder {
            shared,
            live,
            path,
            running: Mutex::new(Some(Running { writer, sampler })),
        })
    }

    /// A request became ready (`queued_at` is now); `id` is the caller's name for
    /// it, written as the span's `request_id` (span ids are the recorder's own).
    pub fn queued(&self, id: impl Into<String>) -> Queued {
        self.shared.occupancy.fetch_add(1, Relaxed);
        Queued::new(self.shared.clone(), id.into())
    }

    /// Changes the in-flight cap from now on: written at once as a sample stating the
    /// new cap, which the analysis uses from that instant (docs/design.md §3).
    pub fn set_cap(&self, cap: u32) {
        let s = &self.shared;
        s.cap.store(cap, Relaxed);
        self.live.cap.store(cap, Relaxed);
        let at = s.clock.now();
        let (in_flight, queue_depth, _) = s.reading();
        s.tx.sample(SampleRecord {
            run_id: s.run_id.to_string(),
            at,
            in_flight,
            queue_depth,
            cap: Some(cap),
        });
    }

    /// The run's id (as written in every record).
    pub fn run_id(&self) -> &str {
        &self.shared.run_id
    }

    /// The file being written.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The instant now on the run's clock (as the handles stamp it).
    pub fn now(&self) -> Timestamp {
        self.shared.clock.now()
    }

    /// Live counters for a progress display: spans written by status, tokens, and
    /// the last sample's in-flight, queue depth and gap fraction so far.
    pub fn snapshot(&self) -> LiveSnapshot {
        self.live.snapshot()
    }

    /// Waits until every span finished so far is written and flushed to the file.
    pub fn flush(&self) {
        self.shared.tx.sync();
    }

    /// Ends the run: takes a last sample, writes the `end` record, flushes and
    /// stops the writer. Later calls (and dropping) do nothing; requests finished
    /// after the close are not recorded.
    pub fn close(&self) -> Result<Closed, RecordError> {
        let Some(running) = self
            .running
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .take()
        else {
            return Ok(Closed::default());
        };
        running.sampler.stop();
        let (in_flight, queued, _) = self.shared.reading();
        self.shared
            .tx
            .end(&self.shared.run_id, self.shared.clock.now(), None);
        let counts = running.writer.finish().map_err(|source| RecordError::Io {
            path: self.path.clone(),
            source,
        })?;
        Ok(Closed {
            counts: counts
                .get(&*self.shared.run_id)
                .copied()
                .unwrap_or_default(),
            unfinished: u64::from(in_flight) + u64::from(queued),
        })
    }
}

impl Drop for Recorder {
    fn drop(&mut self) {
        let _ = self.close();
    }
}

fn open_file(path: &Path, mode: OpenMode) -> Result<File, RecordError> {
    let io = |source| RecordError::Io {
        path: path.to_path_buf(),
        source,
    };
    match mode {
        OpenMode::New => OpenOptions::new()
            .write(true)
            .create_new(true)
            .open(path)
            .map_err(|e| match e.kind() {
                io::ErrorKind::AlreadyExists => RecordError::Exists {
                    path: path.to_path_buf(),
                },
                _ => io(e),
            }),
        OpenMode::Overwrite => File::create(path).map_err(io),
        OpenMode::Append => {
            let mut f = OpenOptions::new()
                .read(true)
                .append(true)
                .create(true)
                .open(path)
                .map_err(io)?;
            if f.metadata().map_err(io)?.len() > 0 {
                let mut last = [0u8];
                f.seek(SeekFrom::End(-1)).map_err(io)?;
                f.read_exact(&mut last).map_err(io)?;
                if last[0] != b'\n' {
                    return Err(RecordError::CutOff {
                        path: path.to_path_buf(),
                    });
                }
            }
            Ok(f)
        }
    }
}
