//! The records of a span log (format `tpscope.spans/1`, docs/design.md §8): `run`,
//! `span`, `sample` and `end`, each one JSON line tagged by `kind`.

use std::collections::BTreeMap;
use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::api::TargetApi;
use crate::server::ServerSampleRecord;
use crate::span::{Span, TokenSource};
use crate::status_counts::StatusCounts;
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
    /// The API the requests called (`chat`, `completions`, …, `proxy`, or another
    /// producer's name).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub api: Option<TargetApi>,
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
    /// When set, a `sample` is written only when the sampled state (in flight,
    /// queued, cap) changes and at least this often: each sample then holds until
    /// the next. Absent (every log before the field, and bench runs): one sample
    /// per tick.
    #[serde(
        default,
        rename = "sample_heartbeat_s",
        with = "duration_secs::option",
        skip_serializing_if = "Option::is_none"
    )]
    pub sample_heartbeat: Option<Duration>,
    /// Load settings as the producer understood them (free-form object).
    #[serde(default, skip_serializing_if = "serde_json::Value::is_null")]
    pub load: serde_json::Value,
    /// Free-form labels (`key: value`).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub labels: BTreeMap<String, String>,
    /// Whether the spans' `queued_at` was measured; absent (every log before the
    /// field, and every run tpscope records) means measured.
    #[serde(default, skip_serializing_if = "QueueTimes::is_measured")]
    pub queue_times: QueueTimes,
}

/// Whether a run's queue times were measured (the run record's `queue_times`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum QueueTimes {
    /// `queued_at` is when the request started waiting (for a slot or its
    /// schedule), as tpscope and the tools that record a queue measure it.
    #[default]
    Measured,
    /// The producer recorded no queue or schedule times: `queued_at` is the send
    /// time, so queue time, the user's TTFT and the gap fraction are unknown.
    Unmeasured,
}

impl QueueTimes {
    /// Whether the queue times were measured (the field's default, not written).
    pub fn is_measured(&self) -> bool {
        *self == QueueTimes::Measured
    }
}

impl std::str::FromStr for QueueTimes {
    type Err = String;

    /// The field's value as written: `measured` or `unmeasured`.
    fn from_str(s: &str) -> Result<QueueTimes, String> {
        match s {
            "measured" => Ok(QueueTimes::Measured),
            "unmeasured" => Ok(QueueTimes::Unmeasured),
            other => Err(format!(
                "unknown value `{other}` (expected measured or unmeasured)"
            )),
        }
    }
}

/// The run label importers wrote before the run record had `queue_times`:
/// `queue_times=unmeasured` (read for one release; see
/// [`RunRecord::adopt_legacy_queue_label`]).
pub const LEGACY_QUEUE_LABEL: (&str, &str) = ("queue_times", "unmeasured");

impl RunRecord {
    /// Moves the label [`LEGACY_QUEUE_LABEL`] of a log written before the
    /// `queue_times` field into the field, so that the rest of tpscope reads one
    /// form. Kept for one release after the field came.
    pub fn adopt_legacy_queue_label(&mut self) {
        let (key, value) = LEGACY_QUEUE_LABEL;
        if self.labels.get(key).is_some_and(|v| v == value) {
            self.labels.remove(key);
            self.queue_times = QueueTimes::Unmeasured;
        }
    }
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
    /// Of which ok, error and cancelled (written flat: `ok`, `error`, `cancelled`).
    #[serde(flatten)]
    pub status: StatusCounts,
    /// Sample records written.
    #[serde(default)]
    pub samples: u64,
    /// Open loop: the latest the client put a request in the queue after its
    /// scheduled time (its own pacing lateness, docs/design.md §13).
    #[serde(
        default,
        rename = "schedule_late_max_s",
        with = "duration_secs::option",
        skip_serializing_if = "Option::is_none"
    )]
    pub schedule_late_max: Option<Duration>,
    /// The proxy: completions whose client stated when it queued them
    /// (`x-tpscope-queued-at`); 0 means the pipeline's own queue was unseen.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub queued_at_stated: Option<u64>,
    /// The proxy: streams still open when the drain ended at a stop, written
    /// as cancelled spans with the tokens relayed so far.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cut_at_stop: Option<u64>,
    /// The proxy: the model the responses named (the proxy does not parse
    /// requests, so its run record names none).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model: Option<String>,
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

#[cfg(test)]
mod tests {
    use super::*;

    fn run(extra: &str) -> RunRecord {
        serde_json::from_str(&format!(
            r#"{{"run_id":"r","schema":"tpscope.spans/1","started_at":"2026-01-01T00:00:00Z"{extra}}}"#
        ))
        .unwrap()
    }

    #[test]
    fn an_end_record_writes_its_status_counts_flat_in_their_place() {
        // The counts moved into one StatusCounts; the line must not change.
        let line = r#"{"kind":"end","run_id":"r","ended_at":"2026-01-01T00:00:01.000000000Z","spans":4,"ok":2,"error":1,"cancelled":1,"samples":3}"#;
        let rec: Record = serde_json::from_str(line).unwrap();
        let Record::End(e) = &rec else {
            panic!("an end record")
        };
        assert_eq!((e.status.ok, e.status.error, e.status.cancelled), (2, 1, 1));
        assert_eq!(serde_json::to_string(&rec).unwrap(), line);
        // Counts a reader of an older log lacks are 0.
        let old = r#"{"kind":"end","run_id":"r","ended_at":"2026-01-01T00:00:01Z","spans":0}"#;
        let Record::End(e) = serde_json::from_str::<Record>(old).unwrap() else {
            panic!("an end record")
        };
        assert_eq!(e.status, StatusCounts::default());
    }

    #[test]
    fn queue_times_is_measured_unless_written_and_written_only_when_unmeasured() {
        let mut r = run("");
        assert_eq!(r.queue_times, QueueTimes::Measured);
        assert!(!serde_json::to_string(&r).unwrap().contains("queue_times"));
        r.queue_times = QueueTimes::Unmeasured;
        let text = serde_json::to_string(&r).unwrap();
        assert!(text.contains(r#""queue_times":"unmeasured""#), "{text}");
        assert_eq!(serde_json::from_str::<RunRecord>(&text).unwrap(), r);
        assert_eq!("unmeasured".parse(), Ok(QueueTimes::Unmeasured));
        assert!(
            "sometimes"
                .parse::<QueueTimes>()
                .unwrap_err()
                .contains("expected measured")
        );
    }

    #[test]
    fn the_legacy_label_moves_into_the_field_and_other_labels_stay() {
        let mut r = run(r#","labels":{"queue_times":"unmeasured","job":"a"}"#);
        r.adopt_legacy_queue_label();
        assert_eq!(r.queue_times, QueueTimes::Unmeasured);
        assert_eq!(r.labels.keys().collect::<Vec<_>>(), ["job"]);
        let mut r = run(r#","labels":{"queue_times":"other"}"#);
        r.adopt_legacy_queue_label();
        assert_eq!(r.queue_times, QueueTimes::Measured);
        assert_eq!(r.labels.len(), 1);
    }
}
