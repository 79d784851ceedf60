//! tpscope as a library: one dependency that re-exports the public API of every
//! layer (docs/design.md §9), so a Rust program can record, read, analyse and render
//! span logs exactly as the `tpscope` binary does.
//!
//! ```no_run
//! use tpscope::analysis::{Options, analyze};
//! use tpscope::log::{ReadOptions, read_paths};
//!
//! let set = read_paths(&["run.jsonl".into()], ReadOptions::default())?;
//! for run in &set.runs {
//!     let report = analyze(&run.input, &Options::default());
//!     println!("{} system TPS {:?}", report.run_id, report.system_tps);
//! }
//! # Ok::<(), tpscope::log::LogError>(())
//! ```
#![warn(missing_docs)]

pub use tpscope_analysis as analysis;
pub use tpscope_client as client;
pub use tpscope_load as load;
pub use tpscope_log as log;
pub use tpscope_model as model;
pub use tpscope_proxy as proxy;
pub use tpscope_record as record;
pub use tpscope_render as render;
pub use tpscope_scrape as scrape;
pub use tpscope_sim as sim;
pub use tpscope_stream as stream;
pub use tpscope_tokens as tokens;

pub use tpscope_model::{Cause, Record, RunRecord, SampleRecord, Span, Status, Timestamp};
