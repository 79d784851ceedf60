//! tpscope's data model: spans, runs, samples, failure causes and timestamps — the
//! one vocabulary shared by every producer (bench, proxy, importers) and consumer.
//! Pure: no I/O, no async.
#![warn(missing_docs)]

pub mod api;
pub mod cause;
mod fields;
pub mod import_format;
pub mod occupancy;
pub mod outcome;
pub mod record;
pub mod rotation;
pub mod server;
pub mod span;
pub mod status_counts;
pub mod time;
pub mod units;

pub use api::{Api, BadApi, TargetApi};
pub use cause::{Cause, Status, UnknownCause};
pub use occupancy::Occupancy;
pub use outcome::{AttemptOutcome, Usage};
pub use record::{
    EndRecord, LEGACY_QUEUE_LABEL, QueueTimes, Record, RunRecord, SCHEMA, SampleRecord, Target,
};
pub use rotation::rotated_path;
pub use server::{GpuReading, HistogramTotals, ServerSampleRecord};
pub use span::{
    Attempt, ChunkMark, Invalid, Lifecycle, MAX_PLAUSIBLE_SPAN, MAX_PLAUSIBLE_TOKENS, Span,
    SpanError, TokenSource, check_lifecycle,
};
pub use status_counts::StatusCounts;
pub use time::{HourCache, RunClock, TimeParseError, Timestamp};
pub use units::{BadDuration, BadTimeUnit, TimeUnit, format_duration, parse_duration};
