//! Reading span logs: one streaming pass per file into per-run analysis inputs,
//! with errors that name the file, line and field. This module holds the public
//! entry points and the per-line handling; the scanning, the record parsers and
//! run assembly live in its submodules.

mod options;
mod parse;
mod runs;
mod scan;

use std::borrow::Cow;
use std::collections::HashMap;
use std::fs::File;
use std::hash::RandomState;
use std::io::{BufRead, BufReader, Read};
use std::path::{Path, PathBuf};

use tpscope_model::HourCache;

pub use options::{LoadedRun, LogError, LogSet, ReadOptions};
use parse::{Parsed, parse_line};
use runs::RunAcc;
use scan::{Line, scan_line};

use crate::fast::{FastRecord, fast_record};
use crate::scalar::*;

/// Counts for the file being read.
#[derive(Default)]
struct FileState {
    /// Lines seen (1-based number of the current line).
    lines: u64,
    /// Records accepted.
    records: u64,
    /// Bytes of the lines seen.
    bytes: u64,
    /// The file's size, when known.
    size: Option<u64>,
}

/// Lines read before the rest of a file's records are estimated from its size.
const ESTIMATE_AFTER_LINES: u64 = 4096;

/// Reads span logs, grouping records by `run_id` across files.
pub struct Reader {
    opts: ReadOptions,
    set: LogSet,
    index: HashMap<String, usize>,
    accs: Vec<RunAcc>,
    /// The run of the previous record.
    last: Option<usize>,
    hash_keys: (RandomState, RandomState),
    /// The hour cache of the fast path's timestamps.
    hours: HourCache,
}

impl Reader {
    /// A reader with the given options.
    pub fn new(opts: ReadOptions) -> Reader {
        Reader {
            opts,
            set: LogSet::default(),
            index: HashMap::new(),
            accs: Vec::new(),
            last: None,
            hash_keys: (RandomState::new(), RandomState::new()),
            hours: HourCache::default(),
        }
    }

    /// Reads one file.
    pub fn read_path(&mut self, path: &Path) -> Result<(), LogError> {
        let file = File::open(path).map_err(|source| LogError::Io {
            file: path.to_path_buf(),
            source,
        })?;
        let size = file
            .metadata()
            .ok()
            .filter(|m| m.is_file())
            .map(|m| m.len());
        self.read_sized(path, file, size)
    }

    /// Reads span-log text from any reader; `name` is used in messages.
    pub fn read_from(&mut self, name: &Path, r: impl Read) -> Result<(), LogError> {
        self.read_sized(name, r, None)
    }

    /// Reads span-log text of `size` bytes, when known (to size the span vectors
    /// once instead of growing them by copying).
    fn read_sized(&mut self, name: &Path, r: impl Read, size: Option<u64>) -> Result<(), LogError> {
        let mut r = BufReader::with_capacity(1 << 20, r);
        let mut spill = Vec::new();
        let mut file = FileState {
            size,
            ..FileState::default()
        };
        let io = |source| LogError::Io {
            file: name.to_path_buf(),
            source,
        };
        loop {
            let avail = r.fill_buf().map_err(io)?;
            if avail.is_empty() {
                break;
            }
            // Lines wholly inside the buffer are parsed where they lie; only a line
            // that straddles a refill is copied.
            let mut used = 0;
            for end in memchr::memchr_iter(b'\n', avail) {
                self.line(name, &mut file, &avail[used..=end])?;
                used = end + 1;
            }
            if used > 0 {
                r.consume(used);
                continue;
            }
            spill.clear();
            r.read_until(b'\n', &mut spill).map_err(io)?;
            self.line(name, &mut file, &spill)?;
        }
        if file.records == 0 && file.lines == 0 {
            return Err(LogError::Empty {
                file: name.to_path_buf(),
            });
        }
        if file.records == 0 && !self.opts.skip_invalid && self.set.warnings.is_empty() {
            return Err(LogError::Empty {
                file: name.to_path_buf(),
            });
        }
        Ok(())
    }

    /// Handles one line (with its `\n`, unless it is a last line cut off).
    fn line(&mut self, name: &Path, file: &mut FileState, raw: &[u8]) -> Result<(), LogError> {
        file.lines += 1;
        file.bytes += raw.len() as u64;
        if file.lines == ESTIMATE_AFTER_LINES {
            self.reserve_rest(file);
        }
        let line_no = file.lines;
        let complete = raw.last() == Some(&b'\n');
        let mut bytes = raw;
        while let [rest @ .., b'\n' | b'\r'] = bytes {
            bytes = rest;
        }
        if bytes.iter().all(u8::is_ascii_whitespace) {
            return Ok(());
        }
        // Valid JSON never holds a raw NUL, so only a failed line is searched for one.
        let binary = |bytes: &[u8]| {
            memchr::memchr(0, bytes).map(|_| LogError::Binary {
                file: name.to_path_buf(),
                line: line_no,
                what: "a NUL byte",
            })
        };
        let result = match fast_record(bytes, &mut self.hours) {
            Some(FastRecord::Span {
                run_id,
                span_id,
                facts,
                source,
            }) => {
                let span_id = Cow::Borrowed(span_id);
                let parsed = Parsed::Span {
                    facts,
                    source,
                    span_id,
                };
                self.file(run_id, parsed).map_err(|p| (false, p))
            }
            Some(FastRecord::Sample { run_id, facts }) => self
                .file(run_id, Parsed::Sample(facts))
                .map_err(|p| (false, p)),
            None => {
                let text = match std::str::from_utf8(bytes) {
                    Ok(t) => t,
                    Err(e) => {
                        if let Some(b) = binary(bytes) {
                            return Err(b);
                        }
                        if line_no == 1 {
                            return Err(LogError::Binary {
                                file: name.to_path_buf(),
                                line: line_no,
                                what: "bytes that are not UTF-8",
                            });
                        }
                        let p = problem(
                            "",
                            "not_utf8",
                            format!("not UTF-8 text at byte {}", e.valid_up_to()),
                        );
                        return self.reject(name, line_no, None, p);
                    }
                };
                self.record(text)
            }
        };
        match result {
            Ok(()) => {
                file.records += 1;
                self.set.records += 1;
                Ok(())
            }
            Err(_) if let Some(b) = binary(bytes) => Err(b),
            Err((syntax, p)) if syntax && !complete => {
                // The writer was killed mid-line: keep everything before it.
                self.set.warnings.push(format!(
                    "{}:{line_no}: the last line is cut off ({} bytes, {}); ignored",
                    name.display(),
                    bytes.len(),
                    p.problem
                ));
                Ok(())
            }
            Err((syntax, p)) => {
                let field = (!syntax && !p.field.is_empty()).then(|| p.field.clone());
                self.reject(name, line_no, field, p)
            }
        }
    }

    fn reject(
        &mut self,
        name: &Path,
        line: u64,
        field: Option<String>,
        p: FieldProblem,
    ) -> Result<(), LogError> {
        if self.opts.skip_invalid {
            let key = if p.field.is_empty() {
                p.category.to_string()
            } else {
                format!("{} `{}`", p.category, p.field)
            };
            *self.set.skipped.entry(key).or_default() += 1;
            Ok(())
        } else {
            Err(LogError::Record {
                file: name.to_path_buf(),
                line,
                field,
                problem: p.problem,
            })
        }
    }

    /// Parses and files one record. The flag says whether the JSON itself is broken.
    fn record(&mut self, text: &str) -> Result<(), (bool, FieldProblem)> {
        // Filled in place: a `Line` is 800 bytes, and moving it showed in profiles.
        let mut line = Line::default();
        scan_line(text, &mut line)
            .map_err(|e| (true, problem("", "malformed_json", e.to_string())))?;
        let kind = match line.kind.as_ref() {
            Some(Scalar::Str(k)) => k.as_ref(),
            Some(other) => {
                return Err((
                    false,
                    problem(
                        "kind",
                        "wrong_type",
                        format!("expected a string, found {}", other.describe()),
                    ),
                ));
            }
            None => {
                return Err((
                    false,
                    problem(
                        "kind",
                        "missing_field",
                        "missing (expected run, span, sample or end)",
                    ),
                ));
            }
        };
        let (run_id, parsed) =
            parse_line(&line, kind, self.opts.time_unit).map_err(|p| (false, p))?;
        self.file(run_id, parsed).map_err(|p| (false, p))
    }
}

/// Reads span logs from files, grouping runs by `run_id` across them.
pub fn read_paths(paths: &[PathBuf], opts: ReadOptions) -> Result<LogSet, LogError> {
    let mut reader = Reader::new(opts);
    for p in paths {
        reader.read_path(p)?;
    }
    Ok(reader.finish())
}

#[cfg(test)]
mod fast_vs_general;
