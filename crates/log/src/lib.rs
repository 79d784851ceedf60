//! Span logs on disk (format `tpscope.spans/1`, docs/design.md §8): a streaming reader
//! that turns JSON Lines into per-run analysis inputs with errors naming the file,
//! line and field ([`Reader`], [`read_paths`]); a record-level reader that gives
//! whole records with their line ([`RecordReader`]), checked the same way; the
//! files of a rotated log found by its base name ([`expand_rotations`]); a writer
//! ([`LogWriter`]); importers of other tools' outputs ([`import`]).
#![warn(missing_docs)]

mod fast;
pub mod import;
mod json;
pub mod reader;
pub mod rotation;
pub mod scalar;
pub mod writer;

pub use reader::{
    LineRecord, LoadedRun, LogError, LogSet, ReadOptions, Reader, RecordReader, read_paths,
};
pub use rotation::{Expanded, expand_rotations, rotation_files};
pub use scalar::{BadTimeUnit, TimeUnit};
pub use writer::LogWriter;
