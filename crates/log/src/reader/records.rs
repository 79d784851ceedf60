//! The record-level reader: whole [`Record`]s (ids, attempts, labels, chunks)
//! from span logs, one at a time with the line each came from, for importers,
//! merging and re-exporting. Lines are checked exactly as the analysis reader
//! checks them (the same scanner and parsers, the same errors, the same handling
//! of a cut-off last line and of `skip_invalid`); it takes the general path only,
//! as the fast path reads analysis facts, not records.

use std::collections::{BTreeMap, VecDeque};
use std::fs::File;
use std::io::{BufRead, BufReader};
use std::iter::FusedIterator;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use tpscope_model::Record;

use super::lines::{FileState, LineAt, Tally};
use super::runs::{Runs, run_warnings};
use super::whole::{Seen, record_of};
use super::{LogError, ReadOptions};

/// One record as read, with where it was.
#[derive(Clone, Debug, PartialEq)]
pub struct LineRecord {
    /// The file it came from (or the name given to [`RecordReader::new`]).
    pub file: Arc<Path>,
    /// Its 1-based line number.
    pub line: u64,
    /// The record.
    pub record: Record,
}

/// The source being read.
struct Current<R> {
    name: Arc<Path>,
    r: R,
    file: FileState,
}

/// Reads whole records from span logs as a streaming iterator: each item is the
/// next record with its line, or the error that ends the read (no item follows
/// one). Runs are grouped by `run_id` across files for the checks, so a span id
/// repeated in another file of the same run is an error, as for the analysis.
/// After the last item, [`RecordReader::warnings`] holds the cut-off last lines
/// and the runs without a `run` record or with an `end` record that counts other
/// spans, and [`RecordReader::skipped`] the records skipped by reason.
pub struct RecordReader<R> {
    opts: ReadOptions,
    current: Option<Current<R>>,
    /// Files still to open (for [`RecordReader::open`]).
    paths: VecDeque<PathBuf>,
    /// How a file of `paths` is opened.
    open: fn(&Path) -> std::io::Result<R>,
    line: Vec<u8>,
    runs: Runs<Seen>,
    records: u64,
    unknown_kinds: BTreeMap<String, u64>,
    skipped: BTreeMap<String, u64>,
    warnings: Vec<String>,
    done: bool,
}

impl RecordReader<BufReader<File>> {
    /// Records of the span logs at `paths`, read one after the other; each file
    /// is opened when its turn comes.
    pub fn open<P: AsRef<Path>>(
        paths: impl IntoIterator<Item = P>,
        opts: ReadOptions,
    ) -> RecordReader<BufReader<File>> {
        let mut reader = RecordReader::with_source(None, opts, |p| {
            File::open(p).map(|f| BufReader::with_capacity(1 << 16, f))
        });
        reader.paths = paths
            .into_iter()
            .map(|p| p.as_ref().to_path_buf())
            .collect();
        reader
    }
}

impl<R: BufRead> RecordReader<R> {
    /// Records of span-log text from `r`; `name` is used in messages and items.
    pub fn new(name: &Path, r: R, opts: ReadOptions) -> RecordReader<R> {
        let current = Current {
            name: name.into(),
            r,
            file: FileState::default(),
        };
        // No paths follow, so nothing is ever opened.
        RecordReader::with_source(Some(current), opts, |_| {
            Err(std::io::Error::other("no file to open"))
        })
    }

    fn with_source(
        current: Option<Current<R>>,
        opts: ReadOptions,
        open: fn(&Path) -> std::io::Result<R>,
    ) -> RecordReader<R> {
        RecordReader {
            opts,
            current,
            paths: VecDeque::new(),
            open,
            line: Vec::with_capacity(1024),
            runs: Runs::default(),
            records: 0,
            unknown_kinds: BTreeMap::new(),
            skipped: BTreeMap::new(),
            warnings: Vec::new(),
            done: false,
        }
    }

    /// Records read so far (excluding skipped ones and blank lines).
    pub fn records(&self) -> u64 {
        self.records
    }

    /// Records skipped so far, by reason (only with `skip_invalid`).
    pub fn skipped(&self) -> &BTreeMap<String, u64> {
        &self.skipped
    }

    /// Records of kinds this version does not read, skipped so far, by kind (as
    /// [`LogSet::unknown_kinds`](super::LogSet::unknown_kinds)).
    pub fn unknown_kinds(&self) -> &BTreeMap<String, u64> {
        &self.unknown_kinds
    }

    /// Warnings so far; those about whole runs come once the input is exhausted.
    pub fn warnings(&self) -> &[String] {
        &self.warnings
    }

    /// The next record, `None` at the end of the input.
    fn read(&mut self) -> Result<Option<LineRecord>, LogError> {
        loop {
            let Some(cur) = &mut self.current else {
                let Some(path) = self.paths.pop_front() else {
                    self.finish();
                    return Ok(None);
                };
                let r = (self.open)(&path).map_err(|source| LogError::Io {
                    file: path.clone(),
                    source,
                })?;
                self.current = Some(Current {
                    name: path.into(),
                    r,
                    file: FileState::default(),
                });
                continue;
            };
            self.line.clear();
            let n = cur
                .r
                .read_until(b'\n', &mut self.line)
                .map_err(|source| LogError::Io {
                    file: cur.name.to_path_buf(),
                    source,
                })?;
            if n == 0 {
                let end = cur.file.end(&cur.name, self.opts.skip_invalid);
                self.current = None;
                end?;
                continue;
            }
            let no = cur.file.count(&self.line);
            let Some(at) = LineAt::new(&self.line, no) else {
                continue;
            };
            let unit = self.opts.time_unit;
            let unknown = &mut self.unknown_kinds;
            let result = at
                .text()
                .and_then(|text| record_of(text, unit, &mut self.runs, unknown));
            let tally = Tally {
                records: &mut self.records,
                skipped: &mut self.skipped,
                warnings: &mut self.warnings,
            };
            if let Some(Some(record)) =
                cur.file
                    .conclude(&cur.name, &at, result, self.opts.skip_invalid, tally)?
            {
                return Ok(Some(LineRecord {
                    file: cur.name.clone(),
                    line: no,
                    record,
                }));
            }
        }
    }

    /// The warnings about whole runs, once the input is exhausted.
    fn finish(&mut self) {
        for seen in std::mem::take(&mut self.runs).into_runs() {
            run_warnings(
                &seen.run_id,
                seen.run.is_some(),
                seen.end_spans,
                seen.spans,
                &mut self.warnings,
            );
        }
    }
}

impl<R: BufRead> Iterator for RecordReader<R> {
    type Item = Result<LineRecord, LogError>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.done {
            return None;
        }
        let item = self.read().transpose();
        self.done = !matches!(item, Some(Ok(_)));
        item
    }
}

impl<R: BufRead> FusedIterator for RecordReader<R> {}
