//! The reader's options, its error type and what it returns: runs of analysis
//! inputs with counts of records, skipped records and warnings.

use std::collections::BTreeMap;
use std::path::PathBuf;

use tpscope_analysis::{RunInput, RunSet, Settings};

use super::lines::Tally;
use crate::scalar::TimeUnit;

/// How to read span logs.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ReadOptions {
    /// The unit of timestamps written as numbers (`None`: numbers are rejected).
    pub time_unit: Option<TimeUnit>,
    /// Skip invalid records (counted by reason) instead of failing on the first.
    pub skip_invalid: bool,
    /// Keep span ids (for per-span output such as CSV).
    pub keep_span_ids: bool,
}

impl ReadOptions {
    /// How the settings say to read (span ids dropped; set `keep_span_ids` to keep them).
    pub fn of(settings: &Settings) -> ReadOptions {
        ReadOptions {
            time_unit: settings.time_unit,
            skip_invalid: settings.skip_invalid,
            keep_span_ids: false,
        }
    }
}

/// An error reading span logs.
#[derive(Debug, thiserror::Error)]
pub enum LogError {
    /// The file could not be opened or read.
    #[error("{file}: {source}")]
    Io {
        /// The file.
        file: PathBuf,
        /// The I/O error.
        source: std::io::Error,
    },
    /// The file holds no records.
    #[error("{file}: the file is empty (expected a span log: JSON Lines, one record per line)")]
    Empty {
        /// The file.
        file: PathBuf,
    },
    /// The file has lines but not one whole record (a JSON array, plain text, a
    /// lone line cut off).
    #[error(
        "{file}: not one record in its {lines} line(s) (expected a span log: JSON Lines, \
         one record per line, starting with a run record; another tool's results are read \
         with --from)"
    )]
    NoRecords {
        /// The file.
        file: PathBuf,
        /// Its lines.
        lines: u64,
    },
    /// The file is not text.
    #[error("{file}:{line}: {what} — this does not look like a span log (JSON Lines text)")]
    Binary {
        /// The file.
        file: PathBuf,
        /// The line where it showed.
        line: u64,
        /// What was found.
        what: &'static str,
    },
    /// A record is invalid.
    #[error("{file}:{line}: {}{problem}", field.as_ref().map(|f| format!("field `{f}`: ")).unwrap_or_default())]
    Record {
        /// The file.
        file: PathBuf,
        /// 1-based line number.
        line: u64,
        /// The offending field, when one is to blame.
        field: Option<String>,
        /// What was wrong and what was expected.
        problem: String,
    },
}

/// One run as read: its analysis input and, when asked, its span ids.
#[derive(Debug, Clone, Default)]
pub struct LoadedRun {
    /// Everything the analysis needs.
    pub input: RunInput,
    /// Span ids in span order (empty unless [`ReadOptions::keep_span_ids`]).
    pub span_ids: Vec<Box<str>>,
    /// Each span's request id, token source and failure message, in span order
    /// (empty unless [`ReadOptions::keep_span_ids`]).
    pub span_text: Vec<tpscope_analysis::SpanText>,
}

/// Everything read from one or more span logs.
#[derive(Debug, Clone, Default)]
pub struct LogSet {
    /// Runs in order of first appearance (grouped by `run_id` across files).
    pub runs: Vec<LoadedRun>,
    /// Records read (excluding skipped ones and blank lines).
    pub records: u64,
    /// Skipped records by reason (only with `skip_invalid`).
    pub skipped: BTreeMap<String, u64>,
    /// Warnings: cut-off last lines, runs without `run` or `end` records.
    pub warnings: Vec<String>,
    /// Records of kinds this version does not read (written by a newer one),
    /// skipped, by kind (docs/design.md §8: readers ignore what they do not know). The
    /// caller says so; the library prints nothing.
    pub unknown_kinds: BTreeMap<String, u64>,
}

impl LogSet {
    /// One warning per record kind skipped, for the caller to show.
    pub fn unknown_kind_warnings(&self) -> Vec<String> {
        self.unknown_kinds
            .iter()
            .map(|(kind, n)| {
                format!(
                    "skipped {n} record{} of kind `{kind}`, which this version of tpscope \
                     does not read (written by a newer one?)",
                    if *n == 1 { "" } else { "s" }
                )
            })
            .collect()
    }

    /// Its counts, for the per-line handling.
    pub(super) fn tally(&mut self) -> Tally<'_> {
        Tally {
            records: &mut self.records,
            skipped: &mut self.skipped,
            warnings: &mut self.warnings,
        }
    }
}

/// What `report` and `compare` analyse (`tpscope_analysis::analyze_set`, `choose_run`).
impl RunSet for LogSet {
    type Run = LoadedRun;
    fn runs(&self) -> &[LoadedRun] {
        &self.runs
    }
    fn input(run: &LoadedRun) -> &RunInput {
        &run.input
    }
    fn skipped(&self) -> &BTreeMap<String, u64> {
        &self.skipped
    }
    fn warnings(&self) -> &[String] {
        &self.warnings
    }
}
