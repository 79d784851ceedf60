//! tpscope's one recording seam, used by every producer of span logs (the bench's
//! executor, the proxy and the public recording API of docs/design.md §17, the live
//! ones through one [`Session`]): span assembly from attempts and its one
//! validation ([`checked_span`]), admission (the cap and its FIFO queue), the
//! sampler, the writer thread (through `tpscope_log`'s writer), live counters and
//! the run record's metadata; and the optional OTLP exporter of every span written
//! ([`OtlpConfig`], docs/otlp.md), whose blocking HTTP POSTs on its own thread are
//! the crate's only network use. No async runtime, no randomness.
//!
//! A producer's life, as the bench does it: start a [`Writer`]; per run, send a
//! [`RunInfo`]'s record; let requests through an [`Admission`] while a [`Sampler`]
//! reads its occupancy; stamp each attempt as an [`AttemptOutcome`], and when a
//! request gives its slot back, turn its [`Finished`] attempts into a span with
//! [`checked_span`], count it in [`LiveStats`] and send it with its [`ToCount`];
//! end the run with an `end` record.
//!
//! A program recording its own requests uses the [`Recorder`] (docs/design.md §17),
//! which does all of that on its behalf (with no admission of its own: the program
//! says when work was queued and admitted):
//!
//! ```no_run
//! use tpscope_record::{Cause, Recorder, RunInfo, Usage};
//! # fn main() -> Result<(), tpscope_record::RecordError> {
//! let rec = Recorder::create("spans.jsonl", RunInfo::new().cap(32).label("job", "eval"))?;
//! let req = rec.queued("req-17"); // ready: queued_at
//! let req = req.admitted(); //        took a slot: admitted_at
//! req.first_token();
//! req.tokens(5);
//! req.finish_ok(Usage::new(212, Some(900)));
//! let failed = rec.queued("req-18").admitted();
//! failed.retry(Cause::Http429); //    a new attempt, keeping the slot
//! failed.finish_err(Cause::Http5xx, "upstream unavailable");
//! rec.set_cap(64);
//! rec.close()?; //                    the `end` record
//! # Ok(())
//! # }
//! ```
#![warn(missing_docs)]

pub mod admission;
pub mod assemble;
mod inbox;
pub mod lag;
pub mod live;
mod lock;
pub mod otlp;
pub mod recorder;
pub mod request;
pub mod run;
pub mod sampler;
pub mod session;
pub mod writer;

pub use admission::{Admission, BadDispatch, Dispatch};
pub use assemble::{Finished, ToCount, apply_counts, assemble, checked_span};
pub use lag::ClientLag;
pub use live::{LiveSnapshot, LiveStats};
pub use otlp::{BadOtlp, ExportStats, OtlpConfig};
pub use recorder::{
    Closed, DEFAULT_SAMPLE_INTERVAL, OpenMode, RecordError, Recorder, RecorderBuilder,
};
pub use request::{InFlight, Queued};
pub use run::{RunInfo, TOOL, new_run_id, redact_url, utc_compact};
pub use sampler::{Reading, Sampler};
pub use session::{DEFAULT_SAMPLE_HEARTBEAT, Observer, Running, Session};
pub use tpscope_model::{AttemptOutcome, Cause, Usage};
pub use writer::{FLUSH_EVERY, ProxyEnd, RunCounts, SpanHook, Writer, WriterTx};
