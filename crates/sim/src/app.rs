//! State shared by the HTTP handlers, the response bodies and the engine thread:
//! [`App`], and the commands ([`Cmd`]) the engine thread receives.

use std::sync::atomic::AtomicU64;
use std::sync::mpsc::Sender;
use std::sync::{Arc, Mutex};
use std::time::Instant;

use tpscope_model::RunClock;

use crate::config::SimConfig;
use crate::handoff::SeqShared;
use crate::metrics::Metrics;
use crate::sync::lock;
use crate::truth::TruthRecord;

/// A message to the engine thread.
pub(crate) enum Cmd {
    /// A new request.
    Submit(Box<Submission>),
    /// The client went away (or a cut fault fired): forget the sequence.
    Abort(u64),
    /// Stop: abort everything and end the thread.
    Shutdown,
}

/// A request handed to the engine.
pub(crate) struct Submission {
    pub index: u64,
    pub prompt_tokens: u32,
    /// Chained hashes of the full blocks of prompt and reply (prefix caching on).
    pub block_hashes: Vec<u64>,
    pub output_tokens: u32,
    /// Whether the output length is the `max_tokens` cap (finish reason `length`).
    pub capped: bool,
    pub arrived: Instant,
    pub shared: Arc<SeqShared>,
}

/// State shared by every handler and body.
pub(crate) struct App {
    pub config: SimConfig,
    pub model_name: String,
    /// The model name as a JSON string literal (quoted, escaped).
    pub model_json: String,
    pub clock: RunClock,
    pub created: u64,
    pub next_index: AtomicU64,
    /// Requests seen per (prompt tokens, max_tokens): the key of each one's EOS
    /// draw, so the same seed and workload give the same lengths whatever order
    /// the requests arrive in (see [`crate::draws::eos_key`]).
    pub eos_seen: Mutex<std::collections::HashMap<(u32, Option<u32>), u64>>,
    pub engine: Mutex<Option<Sender<Cmd>>>,
    pub metrics: Arc<Mutex<Metrics>>,
    pub truth: Mutex<Option<Sender<TruthRecord>>>,
}

impl App {
    /// Sends a command to the engine; false when the engine is gone.
    pub(crate) fn send(&self, cmd: Cmd) -> bool {
        match lock(&self.engine).as_ref() {
            Some(tx) => tx.send(cmd).is_ok(),
            None => false,
        }
    }

    pub(crate) fn record_truth(&self, r: TruthRecord) {
        if let Some(tx) = lock(&self.truth).as_ref() {
            let _ = tx.send(r);
        }
    }
}
