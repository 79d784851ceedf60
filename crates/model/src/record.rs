//! The records of a span log (format `tpscope.spans/1`, DESIGN.md §8): `run`,
//! `span`, `sample` and `end`, each one JSON line tagged by `kind`.

use std::collections::BTreeMap;
use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::server::ServerSampleRecord;
use crate::span::{Span, TokenSource};
use crate::time::{Timestamp, duration_secs};

/// The schema name written in every `run` record.
pub const SCHEMA: &str = "tpscope.spans/1";

/// What a run measured.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Target {
    /// Base URL, without credentials (e.g. `http://127.0.0.1:8000/v1`); `None` for the
    /// built-in simulator.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub url: Option<String>,
    /// The model name sent in requests.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model: Option<String>,
    /// The API: `chat`, `completions`, or another producer's name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub api: Option<String>,
}

/// The first record of a run.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct RunRecord {
    /// Unique id of the run; every other record of the run carries it.
    pub run_id: String,
    /// Always [`SCHEMA`] for this version of the format.
    pub schema: String,
    /// The producer and its version, e.g. `tpscope 0.1.0`.
    #[serde(default)]
    pub tool: String,
    /// When the run started (the run clock's anchor).
    pub started_at: Timestamp,
    /// What was measured.
    #[serde(default)]
    pub target: Target,
    /// The in-flight cap; `None` when there was none (every queued moment is then a gap).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cap: Option<u32>,
    /// The token source spans use unless they say otherwise.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub token_source: Option<TokenSource>,
    /// The tokenizer used for synthetic prompts or counting, when any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tokenizer: Option<String>,
    /// The cadence of `sample` records.
    #[serde(
        default,
        rename = "sample_interval_s",
        with = "duration_secs::option",
        skip_serializing_if = "Option::is_none"
    )]
    pub sample_interval: Option<Duration>,
    /// Load settings as the producer understood them (free-form object).
    #[serde(default, skip_serializing_if = "serde_json::Value::is_null")]
    pub load: serde_json::Value,
    /// Free-form labels (`key: value`).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub labels: BTreeMap<String, String>,
}

/// In-flight and queue depth at one instant, taken on a fixed cadence.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct SampleRecord {
    /// The run this sample belongs to.
    pub run_id: String,
    /// When the sample was taken.
    pub at: Timestamp,
    /// Requests holding a slot.
    pub in_flight: u32,
    /// Requests waiting for a slot (not counting those backing off outside the queue).
    pub queue_depth: u32,
    /// The cap in force; `None` when uncapped. A change here changes `cap(t)`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cap: Option<u32>,
}

/// The last record of a run: a reader that sees it knows the run is whole.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct EndRecord {
    /// The run that ended.
    pub run_id: String,
    /// When the run ended.
    pub ended_at: Timestamp,
    /// Span records written.
    pub spans: u64,
    /// Of which `ok`.
    #[serde(default)]
    pub ok: u64,
    /// Of which `error`.
    #[serde(default)]
    pub error: u64,
    /// Of which `cancelled`.
    #[serde(default)]
    pub cancelled: u64,
    /// Sample records written.
    #[serde(default)]
    pub samples: u64,
    /// Open loop: the latest the client put a request in the queue after its
    /// scheduled time (its own pacing lateness, DESIGN §13).
    #[serde(
        default,
        rename = "schedule_late_max_s",
        with = "duration_secs::option",
        skip_serializing_if = "Option::is_none"
    )]
    pub schedule_late_max: Option<Duration>,
}

/// One line of a span log.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Record {
    /// A run's first line.
    Run(RunRecord),
    /// One finished request.
    Span(Span),
    /// A fixed-cadence sample of in-flight and queue depth.
    Sample(SampleRecord),
    /// A run's last line.
    End(EndRecord),
    /// One scrape of the server's own metrics (readers that predate it skip it).
    ServerSample(Box<ServerSampleRecord>),
}

impl Record {
    /// The run this record belongs to.
    pub fn run_id(&self) -> &str {
        match self {
            Record::Run(r) => &r.run_id,
            Record::Span(s) => &s.run_id,
            Record::Sample(s) => &s.run_id,
            Record::End(e) => &e.run_id,
            Record::ServerSample(s) => &s.run_id,
        }
    }
}
