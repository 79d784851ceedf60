//! The public recording API (docs/design.md §17): a [`Recorder`] that any program uses to
//! write a span log of its own requests: a file, and a [`Session`] on it (the
//! [`Writer`] thread, where assembly, counting and writing happen, the sampler of
//! the recorder's own in-flight and queue counts, the run's records). The caller's
//! thread only stamps times and bumps counters.

use std::fs::{File, OpenOptions};
use std::io::{self, Read, Seek, SeekFrom};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tpscope_model::Timestamp;
use tpscope_tokens::Tokenizer;

use crate::live::{LiveSnapshot, LiveStats};
use crate::otlp::{ExportStats, OtlpConfig};
use crate::request::Queued;
use crate::run::RunInfo;
use crate::session::{Running, Session};
use crate::writer::{RunCounts, Writer};

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
    /// Another recorder (in this process or another) is writing the file.
    #[error(
        "{}: another recorder is writing it ({holder}); two writers would interleave \
         their lines into an unreadable log: give each process its own file and read \
         them together (`tpscope report a.jsonl b.jsonl`)",
        path.display()
    )]
    Locked {
        /// The file.
        path: PathBuf,
        /// Who holds it, as the system says (`process 4031: python worker.py`).
        holder: String,
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
    /// Spans the OTLP export dropped (they are in the log):
    /// [`Recorder::export_stats`] says why.
    pub not_exported: u64,
}

/// Records one run of the caller's own requests into a span log. `Send + Sync`:
/// share it by reference or in an `Arc`; each request gets its own handle from
/// [`Recorder::queued`]. Closing (or dropping) it writes the `end` record.
pub struct Recorder {
    session: Arc<Session>,
    live: Arc<LiveStats>,
    path: PathBuf,
    running: Mutex<Option<Running>>,
    otlp: Option<Arc<ExportStats>>,
}

/// A [`Recorder`] with options beyond its run: how an existing file is treated,
/// and an OTLP export of its spans.
#[derive(Clone, Debug)]
pub struct RecorderBuilder {
    path: PathBuf,
    info: RunInfo,
    mode: OpenMode,
    otlp: Option<OtlpConfig>,
}

impl RecorderBuilder {
    /// Treats an existing file as `mode` says (default [`OpenMode::New`]).
    pub fn mode(mut self, mode: OpenMode) -> RecorderBuilder {
        self.mode = mode;
        self
    }

    /// Also exports every span to an OpenTelemetry collector (docs/otlp.md).
    pub fn otlp(mut self, cfg: OtlpConfig) -> RecorderBuilder {
        self.otlp = Some(cfg);
        self
    }

    /// Starts recording.
    pub fn open(self) -> Result<Recorder, RecordError> {
        let RecorderBuilder {
            path,
            mut info,
            mode,
            otlp,
        } = self;
        let file = open_file(&path, mode)?;
        let live = Arc::new(LiveStats::default());
        let mut writer = Writer::to_writer(file, Tokenizer::default(), Some(live.clone()));
        let otlp = otlp.map(|cfg| writer.export_otlp(cfg));
        info.sample_interval.get_or_insert(DEFAULT_SAMPLE_INTERVAL);
        if info.tool.is_empty() {
            info.tool = crate::run::TOOL.into();
        }
        let (session, running) = Session::start(writer, live.clone(), info, |_| {}, None);
        Ok(Recorder {
            session,
            live,
            path,
            running: Mutex::new(Some(running)),
            otlp,
        })
    }
}

impl Recorder {
    /// A recorder into `path` with options ([`RecorderBuilder`]): `Recorder::builder(path,
    /// info).otlp(cfg).open()`.
    pub fn builder(path: impl AsRef<Path>, info: RunInfo) -> RecorderBuilder {
        RecorderBuilder {
            path: path.as_ref().to_path_buf(),
            info,
            mode: OpenMode::New,
            otlp: None,
        }
    }

    /// Starts recording into a new file at `path`; an existing file is an error
    /// ([`RecordError::Exists`]), never truncated.
    pub fn create(path: impl AsRef<Path>, info: RunInfo) -> Result<Recorder, RecordError> {
        Recorder::open(path, info, OpenMode::New)
    }

    /// Starts recording into `path`, treating an existing file as `mode` says.
    pub fn open(
        path: impl AsRef<Path>,
        info: RunInfo,
        mode: OpenMode,
    ) -> Result<Recorder, RecordError> {
        Recorder::builder(path, info).mode(mode).open()
    }

    /// What the OTLP export did, when the recorder exports (final after
    /// [`Recorder::close`]).
    pub fn export_stats(&self) -> Option<&ExportStats> {
        self.otlp.as_deref()
    }

    /// A request became ready (`queued_at` is now); `id` is the caller's name for
    /// it, written as the span's `request_id` (span ids are the recorder's own).
    pub fn queued(&self, id: impl Into<String>) -> Queued {
        self.session.queue();
        Queued::new(self.session.clone(), id.into())
    }

    /// Changes the in-flight cap from now on: written at once as a sample stating the
    /// new cap, which the analysis uses from that instant (docs/design.md §3).
    pub fn set_cap(&self, cap: u32) {
        self.session.set_cap(cap);
    }

    /// The run's id (as written in every record).
    pub fn run_id(&self) -> &str {
        self.session.run_id()
    }

    /// The file being written.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The instant now on the run's clock (as the handles stamp it).
    pub fn now(&self) -> Timestamp {
        self.session.now()
    }

    /// Live counters for a progress display: spans written by status, tokens, and
    /// the last sample's in-flight, queue depth and gap fraction so far.
    pub fn snapshot(&self) -> LiveSnapshot {
        self.live.snapshot()
    }

    /// Waits until every span finished so far is written and flushed to the file.
    pub fn flush(&self) {
        self.session.sync();
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
        let (counts, (in_flight, queued)) = running.close().map_err(|source| RecordError::Io {
            path: self.path.clone(),
            source,
        })?;
        Ok(Closed {
            counts,
            unfinished: u64::from(in_flight) + u64::from(queued),
            not_exported: self.otlp.as_ref().map_or(0, |s| s.not_exported()),
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
        OpenMode::New => {
            let f = OpenOptions::new()
                .write(true)
                .create_new(true)
                .open(path)
                .map_err(|e| match e.kind() {
                    io::ErrorKind::AlreadyExists => RecordError::Exists {
                        path: path.to_path_buf(),
                    },
                    _ => io(e),
                })?;
            crate::lock::lock(&f, path)?;
            Ok(f)
        }
        OpenMode::Overwrite => {
            // Locked before it is emptied: a file another recorder writes is kept.
            let f = OpenOptions::new()
                .write(true)
                .create(true)
                .truncate(false)
                .open(path)
                .map_err(io)?;
            crate::lock::lock(&f, path)?;
            f.set_len(0).map_err(io)?;
            Ok(f)
        }
        OpenMode::Append => {
            let mut f = OpenOptions::new()
                .read(true)
                .append(true)
                .create(true)
                .open(path)
                .map_err(io)?;
            crate::lock::lock(&f, path)?;
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
