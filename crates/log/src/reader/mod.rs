//! Reading span logs: one streaming pass per file into per-run analysis inputs,
//! with errors that name the file, line and field. This module holds the analysis
//! reader's entry points; the per-line handling (`lines`), the scanning (`scan`),
//! the record parsers (`parse`), run assembly (`runs`) and the record-level reader
//! (`records`, `whole`) live in its submodules.

mod lines;
mod options;
mod parse;
mod records;
mod runs;
mod scan;
mod whole;

use std::fs::File;
use std::io::{BufRead, BufReader, Read};
use std::path::{Path, PathBuf};

use tpscope_model::HourCache;

use lines::{Failure, FileState, LineAt};
pub use options::{LoadedRun, LogError, LogSet, ReadOptions};
pub(crate) use parse::Parsed;
use parse::parse_record;
pub use records::{LineRecord, RecordReader};
use runs::{RunLens, Runs};
use scan::{Line, scan_line};

use crate::fast::fast_record;

/// Lines read before the rest of a file's records are estimated from its size.
const ESTIMATE_AFTER_LINES: u64 = 4096;

/// Reads span logs, grouping records by `run_id` across files.
pub struct Reader {
    opts: ReadOptions,
    set: LogSet,
    runs: Runs<LoadedRun>,
    /// The hour cache of the fast path's timestamps.
    hours: HourCache,
    /// What the only run held when the file being read began.
    file_base: RunLens,
}

impl Reader {
    /// A reader with the given options.
    pub fn new(opts: ReadOptions) -> Reader {
        Reader {
            opts,
            set: LogSet::default(),
            runs: Runs::default(),
            hours: HourCache::default(),
            file_base: RunLens::default(),
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
        self.file_base = self.run_lens();
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
        file.end(name, self.opts.skip_invalid)
    }

    /// Handles one line (with its `\n`, unless it is a last line cut off).
    fn line(&mut self, name: &Path, file: &mut FileState, raw: &[u8]) -> Result<(), LogError> {
        if file.count(raw) == ESTIMATE_AFTER_LINES {
            self.reserve_rest(file);
        }
        let Some(at) = LineAt::new(raw, file.lines) else {
            return Ok(());
        };
        let result = match fast_record(at.bytes, &mut self.hours) {
            Some((run_id, parsed)) => self.file(run_id, parsed).map_err(Failure::Field),
            None => at.text().and_then(|text| self.record(text)),
        };
        let skip_invalid = self.opts.skip_invalid;
        file.conclude(name, &at, result, skip_invalid, self.set.tally())
            .map(drop)
    }

    /// Parses and files one record with the general reader.
    fn record(&mut self, text: &str) -> Result<(), Failure> {
        // Filled in place: a `Line` is 800 bytes, and moving it showed in profiles.
        let mut line = Line::default();
        scan_line(text, &mut line).map_err(Failure::syntax)?;
        let (run_id, parsed) = parse_record(&line, self.opts.time_unit)?;
        Ok(self.file(run_id, parsed)?)
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
mod agreement;
