//! Writing span logs: one JSON record per line.

use std::io::{self, Write};

use tpscope_model::Record;

/// Writes records of a span log to any writer, one JSON object per line.
/// Buffering and flushing are the caller's (wrap a file in a `BufWriter` and call
/// [`LogWriter::flush`] at least every second so a killed run loses little).
pub struct LogWriter<W: Write> {
    out: W,
    line: Vec<u8>,
}

impl<W: Write> LogWriter<W> {
    /// A writer over `out`.
    pub fn new(out: W) -> Self {
        LogWriter {
            out,
            line: Vec::with_capacity(1024),
        }
    }

    /// Writes one record as one line.
    pub fn write(&mut self, record: &Record) -> io::Result<()> {
        self.line.clear();
        serde_json::to_writer(&mut self.line, record).map_err(io::Error::other)?;
        self.line.push(b'\n');
        self.out.write_all(&self.line)
    }

    /// Flushes the underlying writer.
    pub fn flush(&mut self) -> io::Result<()> {
        self.out.flush()
    }

    /// The underlying writer.
    pub fn into_inner(self) -> W {
        self.out
    }
}
