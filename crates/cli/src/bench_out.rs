//! Where `tpscope bench` writes its span log, and the report built from what was
//! recorded. A run file is never replaced or truncated unless `--overwrite` says so
//! (new files are created with create-new semantics, the default name is unique);
//! `--out -` is standard output, and a FIFO or pipe is written to as it is. The
//! report never reads `--out` back (a pipe cannot be): the bytes written are also
//! fed, as they go, to the log reader on a thread of its own.

use std::fs::{File, OpenOptions};
use std::io::{self, Read, Write};
use std::path::{Path, PathBuf};
use std::sync::mpsc;
use std::thread::JoinHandle;

use anyhow::Context;
use tpscope_load::spec::{BenchSpec, Output, unique_name};
use tpscope_log::{LogSet, ReadOptions, Reader};
use tpscope_model::Timestamp;

use crate::exit::ResultExt;

/// How many unique names are tried before giving up (each collision is another
/// process that started in the same microsecond with the same salt).
const NAME_ATTEMPTS: u32 = 64;

/// The span log's destination, opened.
pub struct OpenedLog {
    /// Where the bytes go.
    pub sink: Box<dyn Write + Send>,
    /// How it is named to the user (`standard output` for `-`).
    pub name: String,
    /// Whether it is standard output (the report then goes to standard error).
    pub stdout: bool,
    /// The file this call created, to remove if the run never starts.
    pub created: Option<PathBuf>,
}

/// A file [`open`] created, removed when dropped if nothing was written to it (a
/// bench that failed before recording leaves no empty file behind) unless kept.
pub struct CreatedGuard(pub Option<PathBuf>);

impl CreatedGuard {
    /// The bench ran: the file stays, whatever it holds.
    pub fn keep(mut self) {
        self.0 = None;
    }
}

impl Drop for CreatedGuard {
    fn drop(&mut self) {
        if let Some(p) = self.0.take()
            && std::fs::metadata(&p).is_ok_and(|m| m.is_file() && m.len() == 0)
        {
            let _ = std::fs::remove_file(p);
        }
    }
}

/// Refuses an `--out` file that exists, before anything runs (the open itself
/// checks again, atomically).
pub fn check(spec: &BenchSpec) -> anyhow::Result<()> {
    if let Output::File(p) = &spec.out
        && !spec.flags.overwrite
        && std::fs::metadata(p).is_ok_and(|m| m.is_file())
    {
        return Err(exists(p));
    }
    Ok(())
}

/// Refuses an `--out` or `--sim-truth-log` that is one of the run's own input
/// files (or both on one file), even with `--overwrite`; a truth log that exists
/// is refused without it.
pub fn check_inputs(args: &crate::bench_args::BenchArgs) -> anyhow::Result<()> {
    use crate::out_file::{Target, check};
    let (a, sim) = (&args.flags, &args.sim);
    let mut inputs: Vec<&Path> = [
        &a.dataset,
        &a.sharegpt,
        &a.conversations,
        &a.dataset_path,
        &sim.sim_config,
    ]
    .into_iter()
    .filter_map(|p| p.as_deref())
    .collect();
    inputs.extend(a.trace.as_ref().map(|(_, p)| p.as_path()));
    let targets: Vec<Target<'_>> = [("--out", &a.out), ("--sim-truth-log", &sim.sim_truth_log)]
        .into_iter()
        .filter_map(|(flag, p)| p.as_deref().map(|path| Target { flag, path }))
        .collect();
    // --out's existence is `check`'s (a FIFO is fine); here only its inputs.
    check(&targets, &inputs, true)?;
    match sim.sim_truth_log.as_deref() {
        Some(path) => check(
            &[Target {
                flag: "--sim-truth-log",
                path,
            }],
            &[],
            a.overwrite,
        ),
        None => Ok(()),
    }
}

fn exists(p: &Path) -> anyhow::Error {
    anyhow::anyhow!(
        "--out: {} already exists; give another name, remove it, or add --overwrite to replace it",
        p.display()
    )
}

/// Opens where the span log goes.
pub fn open(spec: &BenchSpec) -> anyhow::Result<OpenedLog> {
    let file = |f: File, p: &Path, created: bool| OpenedLog {
        sink: Box::new(f),
        name: p.display().to_string(),
        stdout: false,
        created: created.then(|| p.to_path_buf()),
    };
    match &spec.out {
        Output::Stdout => Ok(OpenedLog {
            sink: Box::new(io::stdout()),
            name: "standard output".into(),
            stdout: true,
            created: None,
        }),
        Output::File(p) => match std::fs::metadata(p) {
            // A FIFO, pipe or device: written to, nothing to replace.
            Ok(m) if !m.is_file() => {
                let f = OpenOptions::new()
                    .write(true)
                    .open(p)
                    .failure()
                    .with_context(|| format!("--out: opening {}", p.display()))?;
                Ok(file(f, p, false))
            }
            Ok(_) if spec.flags.overwrite => {
                let f = File::create(p)
                    .failure()
                    .with_context(|| format!("--out: replacing {}", p.display()))?;
                Ok(file(f, p, false))
            }
            _ => match create_new(p) {
                Ok(f) => Ok(file(f, p, true)),
                Err(e) if e.kind() == io::ErrorKind::AlreadyExists => Err(exists(p)),
                Err(e) => Err(e)
                    .failure()
                    .with_context(|| format!("--out: creating {}", p.display())),
            },
        },
        Output::Unique => {
            let now = Timestamp::now_wall();
            for attempt in 0..NAME_ATTEMPTS {
                let p = unique_name(now, attempt);
                match create_new(&p) {
                    Ok(f) => return Ok(file(f, &p, true)),
                    Err(e) if e.kind() == io::ErrorKind::AlreadyExists => continue,
                    Err(e) => {
                        return Err(e)
                            .failure()
                            .with_context(|| format!("creating {} (give --out)", p.display()));
                    }
                }
            }
            Err(anyhow::anyhow!(
                "no unused tpscope-run-*.jsonl name after {NAME_ATTEMPTS} tries: give --out"
            ))
            .failure()
        }
    }
}

fn create_new(p: &Path) -> io::Result<File> {
    OpenOptions::new().write(true).create_new(true).open(p)
}

/// A sink that also hands every byte written to the report's reader.
pub struct Tee {
    out: Box<dyn Write + Send>,
    feed: mpsc::Sender<Vec<u8>>,
}

impl Write for Tee {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        let n = self.out.write(buf)?;
        // The reader may have stopped on a bad record; the log is still written.
        let _ = self.feed.send(buf[..n].to_vec());
        Ok(n)
    }

    fn flush(&mut self) -> io::Result<()> {
        self.out.flush()
    }
}

/// The bytes fed by a [`Tee`], as a reader; ends when the tee is dropped.
struct Feed {
    rx: mpsc::Receiver<Vec<u8>>,
    cur: Vec<u8>,
    pos: usize,
}

impl Read for Feed {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        while self.pos == self.cur.len() {
            match self.rx.recv() {
                Ok(v) => (self.cur, self.pos) = (v, 0),
                Err(_) => return Ok(0),
            }
        }
        let n = buf.len().min(self.cur.len() - self.pos);
        buf[..n].copy_from_slice(&self.cur[self.pos..self.pos + n]);
        self.pos += n;
        Ok(n)
    }
}

/// The log as recorded, read into runs on its own thread while the run goes.
pub type Recorded = JoinHandle<Result<LogSet, tpscope_log::LogError>>;

/// Wraps `sink` so that what is written is also read, under `name`, into the
/// runs the report is made of.
pub fn tee(sink: Box<dyn Write + Send>, name: &str, opts: ReadOptions) -> (Tee, Recorded) {
    let (tx, rx) = mpsc::channel();
    let name = PathBuf::from(name);
    let handle = std::thread::Builder::new()
        .name("tpscope-report-reader".into())
        .spawn(move || {
            let mut reader = Reader::new(opts);
            reader.read_from(
                &name,
                Feed {
                    rx,
                    cur: Vec::new(),
                    pos: 0,
                },
            )?;
            Ok(reader.finish())
        })
        .expect("spawn the report's reader thread");
    (
        Tee {
            out: sink,
            feed: tx,
        },
        handle,
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_tee_writes_through_and_feeds_the_same_bytes() {
        let (tx, rx) = mpsc::channel();
        let mut t = Tee {
            out: Box::new(io::sink()),
            feed: tx,
        };
        t.write_all(b"abc\n").unwrap();
        t.write_all(b"de").unwrap();
        drop(t);
        let mut s = String::new();
        Feed {
            rx,
            cur: Vec::new(),
            pos: 0,
        }
        .read_to_string(&mut s)
        .unwrap();
        assert_eq!(s, "abc\nde");
    }
}
