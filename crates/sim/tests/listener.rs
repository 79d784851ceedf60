//! The simulator's socket: its accept queue holds a storm of connections opened at
//! once (none waits for a SYN retransmit), and a connection that does not finish its
//! request head in time is closed while others are served.

mod common;

use std::net::SocketAddr;
use std::sync::mpsc;
use std::time::Duration;

use common::{TIMEOUT, fast_config, post, start};
use serde_json::json;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::task::JoinSet;
use tpscope_sim::{SimConfig, Speed};

const STORM: usize = 1000;

/// Retransmitted segments of a connection, SYNs included (Linux `TCP_INFO`).
#[cfg(target_os = "linux")]
fn retransmits(s: &TcpStream) -> u32 {
    use std::os::fd::AsRawFd;
    // SAFETY: TCP_INFO fills at most `len` bytes of the zeroed struct we own.
    unsafe {
        let mut info: libc::tcp_info = std::mem::zeroed();
        let mut len = std::mem::size_of::<libc::tcp_info>() as libc::socklen_t;
        let rc = libc::getsockopt(
            s.as_raw_fd(),
            libc::IPPROTO_TCP,
            libc::TCP_INFO,
            (&raw mut info).cast(),
            &mut len,
        );
        assert_eq!(rc, 0, "getsockopt(TCP_INFO)");
        info.tcpi_total_retrans
    }
}

#[cfg(not(target_os = "linux"))]
fn retransmits(_: &TcpStream) -> u32 {
    0
}

/// Sends `GET /health` and reads the response to its end (the request asks for the
/// connection to be closed); the response and the segments the client retransmitted.
///
/// A connection the server's full accept queue dropped still looks open to the client
/// (the kernel answered its SYN, or will on a retry), but its handshake or its request
/// is retransmitted, after a second or more, until the server takes it: a retransmit
/// count above 0 is that wait.
async fn health(mut s: TcpStream) -> (String, u32) {
    s.write_all(b"GET /health HTTP/1.1\r\nHost: sim\r\nConnection: close\r\n\r\n")
        .await
        .expect("write");
    let mut out = Vec::new();
    s.read_to_end(&mut out).await.expect("read");
    (String::from_utf8_lossy(&out).into_owned(), retransmits(&s))
}

#[test]
fn connection_storm_of_a_thousand_waits_in_the_accept_queue_without_syn_drops() {
    let fds = tpscope_sim::raise_nofile_limit().unwrap_or(0);
    let queue = tpscope_sim::accept_queue();
    if fds < 2 * STORM as u64 + 200 || queue.is_some_and(|q| (q as usize) < STORM) {
        eprintln!(
            "SKIPPED connection_storm: needs {} file descriptors (have {fds}) and an accept \
             queue of {STORM} (net.core.somaxconn allows {queue:?})",
            2 * STORM + 200
        );
        return;
    }
    // The simulator on a runtime of one worker, which we then block: nothing accepts
    // while the storm arrives, so every connection must wait in the kernel's queue.
    let sim_rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .unwrap();
    let sim = sim_rt.block_on(start(fast_config()));
    let addr = sim.addr();
    let (blocked_tx, blocked_rx) = mpsc::channel();
    let (release_tx, release_rx) = mpsc::channel::<()>();
    sim_rt.spawn(async move {
        let _ = blocked_tx.send(());
        let _ = release_rx.recv();
    });
    blocked_rx.recv().expect("the server's worker is blocked");

    let client = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let streams = client.block_on(async {
        let mut set = JoinSet::new();
        for _ in 0..STORM {
            set.spawn(TcpStream::connect(addr));
        }
        let mut streams = Vec::new();
        let mut errors = Vec::new();
        // Bounded only so that a regression fails instead of hanging: a dropped SYN
        // waits 1 s, 3 s, 7 s… for the server that is not accepting.
        let _ = tokio::time::timeout(TIMEOUT, async {
            while let Some(r) = set.join_next().await {
                match r.expect("connect task") {
                    Ok(s) => streams.push(s),
                    Err(e) => errors.push(e.to_string()),
                }
            }
        })
        .await;
        assert!(errors.is_empty(), "connect errors: {errors:?}");
        streams
    });
    // Unblock the server before asserting, so a failure still shuts it down.
    let _ = release_tx.send(());
    let established = streams.len();
    let (served, retransmitted) = client.block_on(async {
        let mut set = JoinSet::new();
        for s in streams {
            set.spawn(tokio::time::timeout(TIMEOUT, health(s)));
        }
        let (mut ok, mut retransmitted) = (0, 0);
        while let Some(r) = set.join_next().await {
            if let Ok((text, retrans)) = r.expect("health task") {
                ok += usize::from(text.starts_with("HTTP/1.1 200"));
                retransmitted += usize::from(retrans > 0);
            }
        }
        (ok, retransmitted)
    });
    sim_rt.block_on(sim.shutdown()).unwrap();
    assert_eq!(
        established, STORM,
        "connections established while the server was not accepting"
    );
    assert_eq!(
        retransmitted, 0,
        "connections that retransmitted (dropped by a full accept queue)"
    );
    assert_eq!(served, STORM, "connections served");
}

/// A slow client: half a request head, then nothing.
async fn half_a_head(addr: SocketAddr) -> TcpStream {
    let mut s = TcpStream::connect(addr).await.expect("connect");
    s.write_all(b"POST /v1/chat/completions HTTP/1.1\r\nHost: sim\r\nContent-Ty")
        .await
        .expect("write");
    s
}

/// Reads until the server closes the connection; what it sent before closing.
async fn until_closed(mut s: TcpStream) -> Vec<u8> {
    let mut out = Vec::new();
    let mut buf = [0u8; 1024];
    loop {
        match s.read(&mut buf).await {
            Ok(0) | Err(_) => return out,
            Ok(n) => out.extend_from_slice(&buf[..n]),
        }
    }
}

fn chat(model: &str, tokens: u32) -> serde_json::Value {
    json!({
        "model": model,
        "messages": [{"role": "user", "content": "Tell me about rivers."}],
        "stream": true,
        "max_tokens": tokens,
        "ignore_eos": true,
    })
}

#[tokio::test]
async fn slowloris_connection_is_closed_after_the_header_read_timeout_and_others_are_served() {
    let sim = start(SimConfig {
        header_read_timeout: Duration::from_millis(300),
        ..fast_config()
    })
    .await;
    let addr = sim.addr();
    let slow = half_a_head(addr).await;
    let idle = TcpStream::connect(addr).await.expect("connect");
    // While the slow client holds its connection, others are served.
    let r = post(addr, "/v1/chat/completions", &chat(sim.model_name(), 5)).await;
    assert_eq!(r.status, 200);
    // The server closes both: the half head and the connection that sent nothing.
    // (The bound only turns a regression into a failure instead of a hang.)
    let sent = tokio::time::timeout(TIMEOUT, until_closed(slow))
        .await
        .expect("the server closed the slow connection");
    assert!(
        sent.is_empty() || !sent.starts_with(b"HTTP/1.1 200"),
        "{}",
        String::from_utf8_lossy(&sent)
    );
    tokio::time::timeout(TIMEOUT, until_closed(idle))
        .await
        .expect("the server closed the idle connection");
    // And it goes on serving.
    let r = post(addr, "/v1/chat/completions", &chat(sim.model_name(), 5)).await;
    assert_eq!(r.status, 200);
    assert!(r.complete);
    sim.shutdown().await.unwrap();
}

#[tokio::test]
async fn a_stream_longer_than_the_header_read_timeout_is_not_cut() {
    // In real time 200 tokens take over a second of steps: the head timeout covers
    // reading the request head only, never a response being written.
    let sim = start(SimConfig {
        header_read_timeout: Duration::from_millis(200),
        speed: Speed::Realtime,
        ..SimConfig::default()
    })
    .await;
    let r = post(
        sim.addr(),
        "/v1/chat/completions",
        &chat(sim.model_name(), 200),
    )
    .await;
    assert_eq!(r.status, 200);
    assert!(r.complete, "the stream ended cleanly");
    let events = r.events();
    assert_eq!(events.last().map(|(_, d)| d.as_str()), Some("[DONE]"));
    // A role chunk, 200 token chunks and a finish chunk before [DONE].
    assert_eq!(events.len(), 1 + 200 + 1 + 1);
    sim.shutdown().await.unwrap();
}
