//! The ground-truth log (`--truth-log FILE`): one JSON line per request saying when
//! the simulator received it and handed its first and last output token to the
//! socket writer, written by a dedicated thread that flushes whenever its queue
//! runs dry (so a killed simulator loses at most the lines still queued).

use std::fs::File;
use std::io::{BufWriter, Write};
use std::path::{Path, PathBuf};
use std::sync::mpsc::{Receiver, Sender, channel};
use std::thread::JoinHandle;

use serde::Serialize;
use tpscope_model::Timestamp;

use crate::SimError;

/// One request's ground truth.
#[derive(Clone, Debug, Serialize)]
pub(crate) struct TruthRecord {
    /// The response id (`chatcmpl-sim-7`, `cmpl-sim-7`).
    pub request_id: String,
    /// Arrival order (0-based) among completion requests; keys the seeded draws.
    pub index: u64,
    /// The API called: `chat`, `completions`, `messages` or `responses`.
    pub endpoint: &'static str,
    /// Whether the response was streamed.
    pub stream: bool,
    /// HTTP status sent.
    pub status: u16,
    /// When the request's headers were received.
    pub received_at: Timestamp,
    /// When the chunk holding the first output token was handed to the writer.
    pub first_token_at: Option<Timestamp>,
    /// When the chunk holding the last delivered output token was handed over.
    pub last_token_at: Option<Timestamp>,
    /// Output tokens handed to the writer.
    pub tokens: u32,
    /// Prompt tokens counted.
    pub prompt_tokens: u32,
    /// The injected fault, if any.
    pub fault: Option<&'static str>,
    /// `stop` or `length` when the response completed; `None` when it did not.
    pub finish_reason: Option<&'static str>,
}

/// The writer thread and its queue.
pub(crate) struct TruthLog {
    tx: Sender<TruthRecord>,
    thread: JoinHandle<Result<(), SimError>>,
}

impl TruthLog {
    /// Creates (truncates) the file and starts the writer.
    pub(crate) fn create(path: &Path) -> Result<TruthLog, SimError> {
        let file = File::create(path).map_err(|source| SimError::Io {
            what: format!("creating truth log {}", path.display()),
            source,
        })?;
        let (tx, rx) = channel();
        let p = path.to_path_buf();
        let thread = std::thread::Builder::new()
            .name("tpscope-sim-truth".into())
            .spawn(move || write_loop(rx, BufWriter::new(file), p))
            .map_err(|source| SimError::Io {
                what: "starting the truth-log thread".into(),
                source,
            })?;
        Ok(TruthLog { tx, thread })
    }

    pub(crate) fn sender(&self) -> Sender<TruthRecord> {
        self.tx.clone()
    }

    /// Drops this handle's sender and waits for the writer to drain and flush
    /// (other senders must be gone for it to finish).
    pub(crate) fn finish(self) -> Result<(), SimError> {
        drop(self.tx);
        self.thread.join().map_err(|_| SimError::Panicked {
            thread: "truth-log",
        })?
    }
}

fn write_loop(
    rx: Receiver<TruthRecord>,
    mut w: BufWriter<File>,
    path: PathBuf,
) -> Result<(), SimError> {
    let io = |source| SimError::Io {
        what: format!("writing truth log {}", path.display()),
        source,
    };
    while let Ok(first) = rx.recv() {
        let mut rec = Some(first);
        while let Some(r) = rec {
            serde_json::to_writer(&mut w, &r).map_err(|e| io(e.into()))?;
            w.write_all(b"\n").map_err(io)?;
            rec = rx.try_recv().ok();
        }
        w.flush().map_err(io)?;
    }
    w.flush().map_err(io)
}
