//! tpscope as a library: one dependency that re-exports the public API of every
//! layer (docs/design.md §9), so a Rust program can record, read, analyse and render
//! span logs exactly as the `tpscope` binary does. Each layer is a feature (all on
//! by default, `full`): a program that only analyses logs takes
//! `default-features = false, features = ["analyze"]`, one that only records its
//! own requests `features = ["record"]`; neither builds tokio, hyper, axum or the
//! Hugging Face tokenizers.
//!
//! ```no_run
//! # #[cfg(feature = "analyze")] {
//! use tpscope::analysis::{Options, analyze};
//! use tpscope::log::{ReadOptions, read_paths};
//!
//! let set = read_paths(&["run.jsonl".into()], ReadOptions::default())?;
//! for run in &set.runs {
//!     let report = analyze(&run.input, &Options::default());
//!     println!("{} system TPS {:?}", report.run_id, report.system_tps);
//! }
//! # }
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
#![warn(missing_docs)]

#[cfg(feature = "analyze")]
pub use tpscope_analysis as analysis;
#[cfg(feature = "client")]
pub use tpscope_client as client;
#[cfg(feature = "load")]
pub use tpscope_load as load;
#[cfg(any(feature = "analyze", feature = "record"))]
pub use tpscope_log as log;
pub use tpscope_model as model;
#[cfg(feature = "proxy")]
pub use tpscope_proxy as proxy;
#[cfg(feature = "record")]
pub use tpscope_record as record;
#[cfg(feature = "analyze")]
pub use tpscope_render as render;
#[cfg(feature = "scrape")]
pub use tpscope_scrape as scrape;
#[cfg(feature = "sim")]
pub use tpscope_sim as sim;
#[cfg(feature = "stream")]
pub use tpscope_stream as stream;
#[cfg(any(feature = "record", feature = "hf"))]
pub use tpscope_tokens as tokens;

pub use tpscope_model::{Cause, Record, RunRecord, SampleRecord, Span, Status, Timestamp};
