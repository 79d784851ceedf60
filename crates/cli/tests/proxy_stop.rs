//! `tpscope proxy` loses nothing on stop and says where it records:
//! without `--out` it writes a new file named as bench names its runs and
//! prints it; `--out none` records nothing; a second SIGTERM ends a long drain
//! at once and the open stream is still written, as cancelled, and counted in
//! the `end` record.

mod bench_support;

use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use bench_support::{
    addr_in as addr, records, signal, start_server as start, wait_stopped as wait,
};
use tpscope_model::{Record, Status};

fn run_files(dir: &Path) -> Vec<PathBuf> {
    std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.to_string_lossy().contains("tpscope-run-"))
        .collect()
}

#[test]
fn without_out_the_proxy_records_to_a_new_named_file_and_says_where() {
    let dir = tempfile::tempdir().unwrap();
    let (child, line) = start(
        dir.path(),
        &[
            "proxy",
            "--upstream",
            "http://127.0.0.1:9",
            "--listen",
            "127.0.0.1:0",
        ],
    );
    assert!(line.contains("spans to tpscope-run-"), "{line}");
    signal(child.id(), "-TERM");
    let err = wait(child, Duration::from_secs(20));
    let files = run_files(dir.path());
    assert_eq!(files.len(), 1, "{files:?}");
    assert!(
        err.contains(&*files[0].file_name().unwrap().to_string_lossy()),
        "{err}"
    );
    let recs = records(&files[0]);
    assert!(matches!(recs.first(), Some(Record::Run(_))));
    assert!(matches!(recs.last(), Some(Record::End(_))));
}

#[test]
fn out_none_records_nothing_on_purpose() {
    let dir = tempfile::tempdir().unwrap();
    let (child, line) = start(
        dir.path(),
        &[
            "proxy",
            "--upstream",
            "http://127.0.0.1:9",
            "--listen",
            "127.0.0.1:0",
            "--out",
            "none",
        ],
    );
    assert!(line.contains("recording nothing (--out none)"), "{line}");
    signal(child.id(), "-TERM");
    wait(child, Duration::from_secs(20));
    assert!(std::fs::read_dir(dir.path()).unwrap().next().is_none());
}

#[test]
fn a_second_sigterm_ends_the_drain_at_once_and_the_open_stream_is_written() {
    let dir = tempfile::tempdir().unwrap();
    let (sim, sim_line) = start(dir.path(), &["sim", "--port", "0", "--speed", "0.2"]);
    let up = format!("http://{}", addr(&sim_line));
    let out = dir.path().join("p.jsonl");
    let (proxy, line) = start(
        dir.path(),
        &[
            "proxy",
            "--upstream",
            &up,
            "--listen",
            "127.0.0.1:0",
            "--drain-timeout",
            "10m",
            "--out",
            out.to_str().unwrap(),
        ],
    );
    // A long stream, read until content flows.
    let mut s = std::net::TcpStream::connect(addr(&line)).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
    let body = r#"{"model":"sim-llama-3.1-8b","stream":true,"max_tokens":5000,"ignore_eos":true,"messages":[{"role":"user","content":"hi"}]}"#;
    write!(
        s,
        "POST /v1/chat/completions HTTP/1.1\r\nhost: x\r\ncontent-type: application/json\r\ncontent-length: {}\r\n\r\n{body}",
        body.len()
    )
    .unwrap();
    let mut seen = Vec::new();
    let mut buf = [0u8; 4096];
    while seen.windows(9).filter(|w| w == b"\"content\"").count() < 3 {
        let n = s.read(&mut buf).unwrap();
        assert!(n > 0, "the stream ended early");
        seen.extend_from_slice(&buf[..n]);
    }
    let t0 = Instant::now();
    signal(proxy.id(), "-TERM");
    std::thread::sleep(Duration::from_millis(300));
    signal(proxy.id(), "-TERM");
    let err = wait(proxy, Duration::from_secs(20));
    assert!(t0.elapsed() < Duration::from_secs(20));
    assert!(err.contains("1 cancelled"), "{err}");
    let recs = records(&out);
    let span = recs
        .iter()
        .find_map(|r| match r {
            Record::Span(s) => Some(s),
            _ => None,
        })
        .expect("the open stream's span");
    assert_eq!(span.status, Status::Cancelled);
    assert!(span.attempts.last().unwrap().tokens > 0, "{span:?}");
    let Some(Record::End(end)) = recs.last() else {
        panic!("no end record")
    };
    assert_eq!(end.cut_at_stop, Some(1));
    drop(s);
    signal(sim.id(), "-INT");
    wait(sim, Duration::from_secs(20));
}
