//! Shared helpers of the `tpscope bench` end-to-end tests: run the binary (bounded
//! in time) and read its span log back.
#![allow(dead_code)]

use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};

use tpscope_model::{EndRecord, Record, RunRecord, SampleRecord, Span};

/// The longest any one bench invocation in these tests may take.
pub const LIMIT: Duration = Duration::from_secs(120);

/// One finished invocation.
pub struct Run {
    pub status: ExitStatus,
    pub stdout: String,
    pub stderr: String,
    pub out: PathBuf,
}

pub fn tpscope() -> Command {
    Command::new(env!("CARGO_BIN_EXE_tpscope"))
}

/// Spawns `tpscope bench ARGS --out DIR/NAME` with piped output.
pub fn spawn(dir: &Path, name: &str, args: &[&str]) -> (Child, PathBuf) {
    let out = dir.join(name);
    let child = tpscope()
        .arg("bench")
        .args(args)
        .arg("--out")
        .arg(&out)
        .env_remove("OPENAI_API_KEY")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start tpscope");
    (child, out)
}

/// Waits for a child, killing it after [`LIMIT`].
pub fn wait(mut child: Child, out: PathBuf) -> Run {
    let deadline = Instant::now() + LIMIT;
    // Drain the pipes on threads so a chatty child cannot block.
    let mut so = child.stdout.take().unwrap();
    let mut se = child.stderr.take().unwrap();
    let t1 = std::thread::spawn(move || {
        let mut s = String::new();
        let _ = so.read_to_string(&mut s);
        s
    });
    let t2 = std::thread::spawn(move || {
        let mut s = String::new();
        let _ = se.read_to_string(&mut s);
        s
    });
    let status = loop {
        if let Some(st) = child.try_wait().unwrap() {
            break st;
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            panic!("tpscope bench ran longer than {LIMIT:?}");
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    Run {
        status,
        stdout: t1.join().unwrap(),
        stderr: t2.join().unwrap(),
        out,
    }
}

/// Waits (bounded by `within`) for `child` to exit successfully, and returns its
/// standard error; a child still running then is killed and the test fails.
pub fn wait_stopped(mut child: Child, within: Duration) -> String {
    let t0 = Instant::now();
    loop {
        if let Some(status) = child.try_wait().unwrap() {
            let mut err = String::new();
            child
                .stderr
                .take()
                .unwrap()
                .read_to_string(&mut err)
                .unwrap();
            assert!(status.success(), "{status}: {err}");
            return err;
        }
        if t0.elapsed() > within {
            let _ = child.kill();
            panic!("not stopped within {within:?}");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Waits until a line of the span log at `path` satisfies `ready` (the run is
/// under way: handlers installed, requests flowing), polling the file as the
/// writer flushes it; panics after [`LIMIT`]. Tests wait for this rather than a
/// fixed time, which a loaded machine makes too short.
pub fn wait_for_line(path: &Path, ready: impl Fn(&str) -> bool) {
    let deadline = Instant::now() + LIMIT;
    loop {
        if std::fs::read_to_string(path).is_ok_and(|text| text.lines().any(&ready)) {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "{} never showed the line waited for",
            path.display()
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Sends `signal` (e.g. `-INT`) to a process.
pub fn signal(pid: u32, signal: &str) {
    let ok = Command::new("kill")
        .arg(signal)
        .arg(pid.to_string())
        .status()
        .unwrap();
    assert!(ok.success());
}

/// Runs `tpscope bench ARGS` (its `--out` never written) and checks it is refused
/// as bad input (exit 2), naming each of `needles`, never as an unknown argument.
pub fn refused(args: &[&str], needles: &[&str]) {
    let out = tpscope()
        .arg("bench")
        .args(args)
        .arg("--out")
        .arg("/nonexistent/never-written.jsonl")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2), "{args:?} accepted");
    let err = String::from_utf8_lossy(&out.stderr);
    for n in needles {
        assert!(err.contains(n), "{args:?}: {err}");
    }
    assert!(!err.contains("unexpected argument"), "{args:?}: {err}");
}

/// Runs `tpscope bench ARGS --out DIR/NAME` to the end.
pub fn bench(dir: &Path, name: &str, args: &[&str]) -> Run {
    let (c, out) = spawn(dir, name, args);
    wait(c, out)
}

/// Every record of a span log, each line parsed strictly.
pub fn records(path: &Path) -> Vec<Record> {
    std::fs::read_to_string(path)
        .unwrap_or_else(|e| panic!("{}: {e}", path.display()))
        .lines()
        .enumerate()
        .map(|(i, l)| {
            serde_json::from_str(l).unwrap_or_else(|e| panic!("{}:{}: {e}", path.display(), i + 1))
        })
        .collect()
}

pub fn spans(recs: &[Record]) -> Vec<Span> {
    recs.iter()
        .filter_map(|r| {
            if let Record::Span(s) = r {
                Some(s.clone())
            } else {
                None
            }
        })
        .collect()
}

pub fn runs(recs: &[Record]) -> Vec<RunRecord> {
    recs.iter()
        .filter_map(|r| {
            if let Record::Run(s) = r {
                Some(s.clone())
            } else {
                None
            }
        })
        .collect()
}

pub fn ends(recs: &[Record]) -> Vec<EndRecord> {
    recs.iter()
        .filter_map(|r| {
            if let Record::End(s) = r {
                Some(s.clone())
            } else {
                None
            }
        })
        .collect()
}

pub fn samples(recs: &[Record]) -> Vec<SampleRecord> {
    recs.iter()
        .filter_map(|r| {
            if let Record::Sample(s) = r {
                Some(s.clone())
            } else {
                None
            }
        })
        .collect()
}

/// The analysis crate's report of every run in the file.
pub fn analyze(path: &Path) -> Vec<tpscope_analysis::RunReport> {
    let set = tpscope_log::read_paths(&[path.to_path_buf()], tpscope_log::ReadOptions::default())
        .unwrap();
    set.runs
        .iter()
        .map(|r| tpscope_analysis::analyze(&r.input, &tpscope_analysis::Options::default()))
        .collect()
}

/// Checks what every bench log must satisfy: a run record first, an end record
/// last whose counts match the spans, every span valid.
pub fn check_log(path: &Path) -> (Vec<Span>, EndRecord) {
    let recs = records(path);
    assert!(
        matches!(recs.first(), Some(Record::Run(_))),
        "the first record is a run record"
    );
    assert!(
        matches!(recs.last(), Some(Record::End(_))),
        "the last record is an end record"
    );
    let spans = spans(&recs);
    for s in &spans {
        s.validate()
            .unwrap_or_else(|e| panic!("span {}: {e}", s.span_id));
    }
    let end = ends(&recs).pop().unwrap();
    let count = |st: tpscope_model::Status| spans.iter().filter(|s| s.status == st).count() as u64;
    assert_eq!(end.spans, spans.len() as u64);
    assert_eq!(end.status.ok, count(tpscope_model::Status::Ok));
    assert_eq!(end.status.error, count(tpscope_model::Status::Error));
    assert_eq!(
        end.status.cancelled,
        count(tpscope_model::Status::Cancelled)
    );
    assert_eq!(
        end.spans,
        end.status.ok + end.status.error + end.status.cancelled
    );
    (spans, end)
}

/// A loopback server that accepts connections, notes each request's first line,
/// and never answers; stopped (every connection closed) when dropped.
pub struct SilentServer {
    pub port: u16,
    lines: std::sync::Arc<std::sync::Mutex<Vec<String>>>,
    stop: std::sync::Arc<std::sync::atomic::AtomicBool>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl SilentServer {
    pub fn start() -> SilentServer {
        use std::sync::atomic::Ordering::Relaxed;
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        listener.set_nonblocking(true).unwrap();
        let port = listener.local_addr().unwrap().port();
        let lines = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
        let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        let (l2, s2) = (lines.clone(), stop.clone());
        let thread = std::thread::spawn(move || {
            let mut conns = Vec::new();
            while !s2.load(Relaxed) {
                match listener.accept() {
                    Ok((mut c, _)) => {
                        let (lines, stop) = (l2.clone(), s2.clone());
                        conns.push(std::thread::spawn(move || {
                            c.set_nonblocking(false).unwrap();
                            c.set_read_timeout(Some(Duration::from_millis(50))).unwrap();
                            let mut head = Vec::new();
                            let mut buf = [0u8; 4096];
                            let mut noted = false;
                            // Read (and hold the connection) until stopped; answer nothing.
                            while !stop.load(Relaxed) {
                                match c.read(&mut buf) {
                                    Ok(0) => break,
                                    Ok(n) => head.extend_from_slice(&buf[..n]),
                                    Err(_) => {}
                                }
                                if !noted && let Some(i) = head.iter().position(|b| *b == b'\n') {
                                    let line =
                                        String::from_utf8_lossy(&head[..i]).trim().to_string();
                                    lines.lock().unwrap().push(line);
                                    noted = true;
                                }
                            }
                        }));
                    }
                    Err(_) => std::thread::sleep(Duration::from_millis(10)),
                }
            }
            for c in conns {
                let _ = c.join();
            }
        });
        SilentServer {
            port,
            lines,
            stop,
            thread: Some(thread),
        }
    }

    /// The first line of every request received so far.
    pub fn request_lines(&self) -> Vec<String> {
        self.lines.lock().unwrap().clone()
    }
}

impl Drop for SilentServer {
    fn drop(&mut self) {
        self.stop.store(true, std::sync::atomic::Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// Starts `tpscope ARGS` in `dir` (a server: sim or proxy); the child and the first
/// line it prints on standard output.
pub fn start_server(dir: &Path, args: &[&str]) -> (Child, String) {
    use std::io::BufRead;
    let mut child = tpscope()
        .args(args)
        .current_dir(dir)
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("start tpscope");
    let mut line = String::new();
    std::io::BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    (child, line)
}

/// The `host:port` after the first `http://` of `line`.
pub fn addr_in(line: &str) -> String {
    let rest = &line[line.find("http://").expect("an address") + 7..];
    rest[..rest
        .find(|c: char| c == '/' || c.is_whitespace())
        .unwrap_or(rest.len())]
        .to_string()
}
