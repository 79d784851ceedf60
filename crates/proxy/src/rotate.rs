//! Span-log rotation (`--rotate 1GiB` or `--rotate 1h`): a `Write` under the
//! recording seam's writer thread that, once the current file is too large or
//! too old, moves to the next file at a line boundary and starts it with the
//! run's `run` record (the same `run_id`), so every file reads on its own.
//! Files are `STEM-0000.EXT`, `STEM-0001.EXT`, … (they sort in order; the names
//! are `tpscope_model::rotated_path`'s, which the readers use to read a whole
//! rotation as one run).

use std::fs::File;
use std::io::{self, Write};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

pub use tpscope_model::rotated_path;
use tpscope_model::{Record, RunRecord};

/// When to move to the next file.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Rotate {
    /// Once a file holds this many bytes.
    Size(u64),
    /// Once a file is this old.
    Age(Duration),
}

impl std::str::FromStr for Rotate {
    type Err = String;

    /// `1GiB`, `500MB`, `64KiB`, `1000` (bytes), or a duration (`1h`, `30m`).
    fn from_str(s: &str) -> Result<Rotate, String> {
        if let Ok(n) = parse_size(s) {
            return Ok(Rotate::Size(n));
        }
        match tpscope_model::parse_duration(s.trim()) {
            Ok(d) if !d.is_zero() => Ok(Rotate::Age(d)),
            _ => Err(format!(
                "`{s}`: expected a size (1GiB, 500MB) or a duration (1h, 30m)"
            )),
        }
    }
}

/// A positive byte size: `32MiB`, `1GiB`, `500MB`, `64KB`, `1000B` or `1000`.
pub fn parse_size(s: &str) -> Result<u64, String> {
    let t = s.trim();
    let units: [(&str, u64); 7] = [
        ("GiB", 1 << 30),
        ("MiB", 1 << 20),
        ("KiB", 1 << 10),
        ("GB", 1_000_000_000),
        ("MB", 1_000_000),
        ("KB", 1_000),
        ("B", 1),
    ];
    let (num, mul) = units
        .iter()
        .find_map(|(suffix, mul)| t.strip_suffix(suffix).map(|n| (n.trim(), *mul)))
        .unwrap_or((t, 1));
    match num.parse::<u64>() {
        Ok(n) if n > 0 => Ok(n.saturating_mul(mul)),
        _ => Err(format!(
            "`{s}`: expected a positive size such as 32MiB or 1GiB"
        )),
    }
}

/// The run record's line, shared with the writer that starts new files.
#[derive(Clone, Default)]
pub struct HeaderSlot(Arc<Mutex<Vec<u8>>>);

impl HeaderSlot {
    /// Keeps `run`'s record as the first line of every later file.
    pub fn set(&self, run: &RunRecord) {
        let mut line = serde_json::to_vec(&Record::Run(run.clone())).unwrap_or_default();
        line.push(b'\n');
        *self.0.lock().unwrap_or_else(|e| e.into_inner()) = line;
    }

    fn get(&self) -> Vec<u8> {
        self.0.lock().unwrap_or_else(|e| e.into_inner()).clone()
    }
}

/// The rotating file.
pub(crate) struct Rotating {
    base: PathBuf,
    rotate: Rotate,
    header: HeaderSlot,
    index: u32,
    file: File,
    written: u64,
    opened: Instant,
}

impl Rotating {
    /// Creates the first file (an existing one is an error).
    pub fn open(base: &Path, rotate: Rotate, header: HeaderSlot) -> io::Result<Rotating> {
        let file = File::create_new(rotated_path(base, 0))?;
        Ok(Rotating {
            base: base.to_path_buf(),
            rotate,
            header,
            index: 0,
            file,
            written: 0,
            opened: Instant::now(),
        })
    }

    fn due(&self) -> bool {
        match self.rotate {
            Rotate::Size(n) => self.written >= n,
            Rotate::Age(d) => self.opened.elapsed() >= d,
        }
    }

    fn next_file(&mut self) -> io::Result<()> {
        self.file.flush()?;
        self.index += 1;
        self.file = File::create_new(rotated_path(&self.base, self.index))?;
        let header = self.header.get();
        self.file.write_all(&header)?;
        self.written = header.len() as u64;
        self.opened = Instant::now();
        Ok(())
    }
}

impl Write for Rotating {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        // Rotate only at a line boundary: write up to the first newline, then
        // switch when due, so no record is split between files.
        let n = match memchr_newline(buf) {
            Some(i) => i + 1,
            None => buf.len(),
        };
        let n = self.file.write(&buf[..n])?;
        self.written += n as u64;
        if n > 0 && buf[n - 1] == b'\n' && self.due() {
            self.next_file()?;
        }
        Ok(n)
    }

    fn flush(&mut self) -> io::Result<()> {
        self.file.flush()
    }
}

fn memchr_newline(b: &[u8]) -> Option<usize> {
    b.iter().position(|&c| c == b'\n')
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_and_durations_parse_and_bad_ones_say_what_was_expected() {
        assert_eq!("1GiB".parse(), Ok(Rotate::Size(1 << 30)));
        assert_eq!("500MB".parse(), Ok(Rotate::Size(500_000_000)));
        assert_eq!("1h".parse(), Ok(Rotate::Age(Duration::from_secs(3600))));
        let e = "soon".parse::<Rotate>().unwrap_err();
        assert!(e.contains("expected a size"), "{e}");
        assert!("0B".parse::<Rotate>().is_err());
    }

    #[test]
    fn files_rotate_at_line_boundaries_each_starting_with_the_run_line() {
        let dir = tempfile::tempdir().unwrap();
        let base = dir.path().join("spans.jsonl");
        let header = HeaderSlot::default();
        *header.0.lock().unwrap() = b"{\"kind\":\"run\"}\n".to_vec();
        let mut w = Rotating::open(&base, Rotate::Size(20), header).unwrap();
        w.write_all(b"{\"kind\":\"run\"}\n").unwrap();
        for i in 0..5 {
            w.write_all(format!("{{\"n\":{i},\"pad\":\"xxxxxxxx\"}}\n").as_bytes())
                .unwrap();
        }
        w.flush().unwrap();
        let mut files: Vec<String> = std::fs::read_dir(dir.path())
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        files.sort();
        assert_eq!(files[0], "spans-0000.jsonl");
        assert!(files.len() >= 3, "{files:?}");
        for f in &files {
            let text = std::fs::read_to_string(dir.path().join(f)).unwrap();
            if text.is_empty() {
                continue;
            }
            assert!(text.starts_with("{\"kind\":\"run\"}\n"), "{f}: {text}");
            assert!(text.ends_with('\n'), "{f}");
        }
    }
}
