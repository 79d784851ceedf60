//! One line of a span log, whoever reads it (the analysis loader or the record
//! reader): counted, passed over when blank, and a failure turned into an error
//! naming the file, line and field, a skipped record counted by reason
//! (`skip_invalid`), or a warning for a cut-off last line.

use std::collections::BTreeMap;
use std::path::Path;
use std::str::Utf8Error;

use super::LogError;
use crate::json::JsonError;
use crate::scalar::{FieldProblem, problem};

/// Counts for the file being read.
#[derive(Default)]
pub(super) struct FileState {
    /// Lines seen (1-based number of the current line).
    pub(super) lines: u64,
    /// Records accepted.
    pub(super) records: u64,
    /// Lines that were not blank.
    pub(super) filled: u64,
    /// Bytes of the lines seen.
    pub(super) bytes: u64,
    /// The file's size, when known.
    pub(super) size: Option<u64>,
}

/// Why a line gave no record.
pub(super) enum Failure {
    /// The JSON itself is broken (as a last line cut off by a killed writer is).
    Syntax(FieldProblem),
    /// A field is wrong (or the record as a whole, when the field name is empty).
    Field(FieldProblem),
    /// The line is not UTF-8 text.
    NotUtf8(Utf8Error),
}

impl Failure {
    /// A line that is not valid JSON.
    pub(super) fn syntax(e: JsonError) -> Failure {
        Failure::Syntax(problem("", "malformed_json", e.to_string()))
    }
}

impl From<FieldProblem> for Failure {
    fn from(p: FieldProblem) -> Failure {
        Failure::Field(p)
    }
}

/// What a read counts across its files.
pub(super) struct Tally<'t> {
    /// Records accepted.
    pub(super) records: &'t mut u64,
    /// Records skipped, by reason.
    pub(super) skipped: &'t mut BTreeMap<String, u64>,
    /// Warnings.
    pub(super) warnings: &'t mut Vec<String>,
}

/// One line that is not blank.
pub(super) struct LineAt<'b> {
    /// The line without its line break.
    pub(super) bytes: &'b [u8],
    /// Its 1-based number.
    pub(super) no: u64,
    /// Whether it ended with a line break (a last line may not).
    complete: bool,
}

impl<'b> LineAt<'b> {
    /// Line `no` (`raw` with its `\n`, unless it is a last line cut off); `None`
    /// when it is blank.
    pub(super) fn new(raw: &'b [u8], no: u64) -> Option<LineAt<'b>> {
        let complete = raw.last() == Some(&b'\n');
        let mut bytes = raw;
        while let [rest @ .., b'\n' | b'\r'] = bytes {
            bytes = rest;
        }
        if bytes.iter().all(u8::is_ascii_whitespace) {
            return None;
        }
        Some(LineAt {
            bytes,
            no,
            complete,
        })
    }

    /// The line as text.
    pub(super) fn text(&self) -> Result<&'b str, Failure> {
        std::str::from_utf8(self.bytes).map_err(Failure::NotUtf8)
    }
}

impl FileState {
    /// Counts one line (with its `\n`, unless it is a last line cut off) and
    /// returns its number.
    pub(super) fn count(&mut self, raw: &[u8]) -> u64 {
        self.lines += 1;
        self.bytes += raw.len() as u64;
        self.lines
    }

    /// What became of a line: its record, or `None` when it was skipped or cut
    /// off (and counted so), or the error that ends the read.
    #[inline]
    pub(super) fn conclude<T>(
        &mut self,
        name: &Path,
        at: &LineAt<'_>,
        result: Result<T, Failure>,
        skip_invalid: bool,
        tally: Tally<'_>,
    ) -> Result<Option<T>, LogError> {
        self.filled += 1;
        match result {
            Ok(v) => {
                self.records += 1;
                *tally.records += 1;
                Ok(Some(v))
            }
            Err(f) => fail(name, at, f, skip_invalid, tally).map(|()| None),
        }
    }

    /// The check at the end of a file: one without a single record is bad input
    /// (a JSON array, plain text, a lone line cut off), unless its lines were
    /// skipped as invalid on request.
    pub(super) fn end(&self, name: &Path, skip_invalid: bool) -> Result<(), LogError> {
        if self.records > 0 || (skip_invalid && self.filled > 0) {
            return Ok(());
        }
        Err(if self.filled == 0 {
            LogError::Empty {
                file: name.to_path_buf(),
            }
        } else {
            LogError::NoRecords {
                file: name.to_path_buf(),
                lines: self.filled,
            }
        })
    }
}

/// A line that gave no record: an error naming the file, line and field, or
/// (with `skip_invalid`) a count by reason, or a warning for a cut-off last line.
#[cold]
fn fail(
    name: &Path,
    at: &LineAt<'_>,
    failure: Failure,
    skip_invalid: bool,
    tally: Tally<'_>,
) -> Result<(), LogError> {
    // What a first line starts with names the commonest wrong files: compressed
    // logs and text saved with a byte-order mark.
    if at.no == 1 {
        let what = if at.bytes.starts_with(&[0x1f, 0x8b]) {
            Some("gzip-compressed data (decompress it first: `gzip -dc FILE | tpscope report -`)")
        } else if at.bytes.starts_with(&[0xef, 0xbb, 0xbf]) {
            Some(
                "a UTF-8 byte-order mark (BOM) before the first record (save the file without one)",
            )
        } else {
            None
        };
        if let Some(what) = what {
            return Err(LogError::Binary {
                file: name.to_path_buf(),
                line: at.no,
                what,
            });
        }
    }
    // Valid JSON never holds a raw NUL, so only a failed line is searched for one.
    if memchr::memchr(0, at.bytes).is_some() {
        return Err(LogError::Binary {
            file: name.to_path_buf(),
            line: at.no,
            what: "a NUL byte",
        });
    }
    let (field, p) = match failure {
        Failure::NotUtf8(_) if at.no == 1 => {
            return Err(LogError::Binary {
                file: name.to_path_buf(),
                line: at.no,
                what: "bytes that are not UTF-8",
            });
        }
        Failure::NotUtf8(e) => (
            None,
            problem(
                "",
                "not_utf8",
                format!("not UTF-8 text at byte {}", e.valid_up_to()),
            ),
        ),
        Failure::Syntax(p) if !at.complete => {
            // The writer was killed mid-line: keep everything before it.
            tally.warnings.push(format!(
                "{}:{}: the last line is cut off ({} bytes, {}); ignored",
                name.display(),
                at.no,
                at.bytes.len(),
                p.problem
            ));
            return Ok(());
        }
        Failure::Syntax(p) => (None, p),
        Failure::Field(p) => ((!p.field.is_empty()).then(|| p.field.clone()), p),
    };
    if skip_invalid {
        let key = if p.field.is_empty() {
            p.category.to_string()
        } else {
            format!("{} `{}`", p.category, p.field)
        };
        *tally.skipped.entry(key).or_default() += 1;
        Ok(())
    } else {
        Err(LogError::Record {
            file: name.to_path_buf(),
            line: at.no,
            field,
            problem: p.problem,
        })
    }
}
