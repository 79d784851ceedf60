//! The benchmark's upstream: a minimal HTTP/1.1 server that answers every request
//! with an OpenAI chat-completions stream (`include_usage` shape) of `chunks`
//! content chunks, one every `period` from the request's arrival, each carrying
//! its sequence number, its send time (nanoseconds since the benchmark's clock
//! origin, taken just before the chunk's `write`) and the instant the schedule
//! had it due: their difference is how late the upstream itself was, which a
//! path that takes the upstream's cores makes larger (its chunks then come in
//! bigger bursts, a different load than the other paths got). Keep-alive: a
//! connection serves requests one after another (nginx and tpscope pool them).
//!
//! Written on plain tokio sockets rather than hyper so that the send stamp sits
//! next to the write syscall (hyper hands frames to its connection task first),
//! and so that the upstream spends as little of the shared cores as possible.

use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::time::{Duration, Instant};

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

/// What each stream looks like.
#[derive(Clone, Copy, Debug)]
pub struct Shape {
    /// Content chunks per stream (one token each).
    pub chunks: u32,
    /// Time between two chunks of a stream.
    pub period: Duration,
    /// Every stream's chunks at the same instants (multiples of `period` from
    /// the clock origin), as an engine's decode steps emit them; else each
    /// stream's from its request's arrival.
    pub steps: bool,
}

/// The field each content chunk carries (after the OpenAI ones), which the
/// client looks for.
pub const MARK: &[u8] = b"\"bench\":{\"seq\":";

/// The field of the role chunk that gives the request's way to the upstream.
pub const FWD: &[u8] = b"\"bench\":{\"fwd_ns\":";

/// Serves until the runtime is dropped.
pub async fn serve(listener: TcpListener, shape: Shape, origin: Instant) {
    loop {
        let Ok((sock, _)) = listener.accept().await else {
            continue;
        };
        let _ = sock.set_nodelay(true);
        tokio::spawn(async move {
            let _ = connection(sock, shape, origin).await;
        });
    }
}

/// Wakes the upstream's runtime on every millisecond, so that each millisecond's
/// due chunks go out in that millisecond whatever the path. tokio's driver
/// sleeps in `epoll_wait`, whose timeout is whole milliseconds counted from the
/// end of the last run: its wakes drift with the runs' lengths (the writes',
/// which depend on whom they wake), and a millisecond whose wake came late
/// goes out with the next in one burst, so each path got a different load
/// (27–36 % of the chunks written in bursts of 25 or more, by path; 0.1–8.4 %
/// with this clock; docs/proxy-bench.md, session 20). A timerfd's expiry
/// wakes the driver, which then fires the timers due. Without one (refused)
/// the upstream runs on tokio's wakes alone, as before.
pub async fn ticker() {
    let Some(fd) = timerfd(Duration::from_millis(1)) else {
        return;
    };
    // SAFETY: the AsyncFd owns the descriptor (an OwnedFd) for its whole life.
    let registered = unsafe {
        tokio::io::unix::AsyncFd::register_with_interest(fd, tokio::io::Interest::READABLE)
    };
    let Ok(fd) = registered else {
        return;
    };
    let mut expiries = [0u8; 8];
    loop {
        let Ok(mut guard) = fd.readable().await else {
            return;
        };
        // SAFETY: reads at most 8 bytes into a buffer of 8 from a descriptor
        // this task owns.
        let _ = unsafe { libc::read(fd.as_raw_fd(), expiries.as_mut_ptr().cast(), 8) };
        // One read takes every expiry so far: nothing is readable until the next.
        guard.clear_ready();
    }
}

/// A non-blocking timerfd that expires every `every`.
pub(crate) fn timerfd(every: Duration) -> Option<OwnedFd> {
    // SAFETY: a system call with constant flags; its descriptor is owned below.
    let raw = unsafe {
        libc::timerfd_create(
            libc::CLOCK_MONOTONIC,
            libc::TFD_NONBLOCK | libc::TFD_CLOEXEC,
        )
    };
    if raw < 0 {
        return None;
    }
    // SAFETY: `raw` is a new descriptor nothing else owns.
    let fd = unsafe { OwnedFd::from_raw_fd(raw) };
    let ts = libc::timespec {
        tv_sec: every.as_secs() as libc::time_t,
        tv_nsec: every.subsec_nanos() as libc::c_long,
    };
    let spec = libc::itimerspec {
        it_interval: ts,
        it_value: ts,
    };
    // SAFETY: `spec` is a valid itimerspec; the old value is not asked for.
    let set = unsafe { libc::timerfd_settime(fd.as_raw_fd(), 0, &spec, std::ptr::null_mut()) };
    (set == 0).then_some(fd)
}

/// One HTTP/1.1 chunk holding `data`.
fn chunk(out: &mut Vec<u8>, data: &[u8]) {
    out.extend_from_slice(format!("{:x}\r\n", data.len()).as_bytes());
    out.extend_from_slice(data);
    out.extend_from_slice(b"\r\n");
}

async fn connection(mut sock: TcpStream, shape: Shape, origin: Instant) -> io::Result<()> {
    let mut buf: Vec<u8> = Vec::with_capacity(4096);
    let mut n = 0u64;
    while let Some(client_sent) = read_request(&mut sock, &mut buf).await? {
        n += 1;
        stream(&mut sock, shape, origin, n, client_sent).await?;
    }
    Ok(())
}

/// The header in which the client says when it sent the request (ns since
/// the origin).
pub const SENT_HEADER: &str = "x-bench-sent-ns";

/// Reads one request (head and body); `None` at a clean EOF between requests,
/// else the client's send instant when the request carries it.
async fn read_request(sock: &mut TcpStream, buf: &mut Vec<u8>) -> io::Result<Option<Option<u64>>> {
    let head_end = loop {
        if let Some(i) = find(buf, b"\r\n\r\n") {
            break i + 4;
        }
        if buf.len() > 64 << 10 {
            return Err(io::Error::other("request head over 64 KiB"));
        }
        if read_more(sock, buf).await? == 0 {
            return if buf.is_empty() {
                Ok(None)
            } else {
                Err(io::ErrorKind::UnexpectedEof.into())
            };
        }
    };
    let head = String::from_utf8_lossy(&buf[..head_end]).to_ascii_lowercase();
    let header = |name: &str| {
        head.lines()
            .find_map(|l| l.strip_prefix(name).map(|v| v.trim().to_string()))
    };
    let sent = header(&format!("{SENT_HEADER}:")).and_then(|v| v.parse().ok());
    if header("transfer-encoding:").is_some_and(|v| v.contains("chunked")) {
        // The body ends with the last chunk and an empty trailer section.
        loop {
            if let Some(i) = find(&buf[head_end..], b"0\r\n\r\n") {
                buf.drain(..head_end + i + 5);
                return Ok(Some(sent));
            }
            if read_more(sock, buf).await? == 0 {
                return Err(io::ErrorKind::UnexpectedEof.into());
            }
        }
    }
    let len: usize = header("content-length:")
        .map(|v| {
            v.parse()
                .map_err(|_| io::Error::other("bad content-length"))
        })
        .transpose()?
        .unwrap_or(0);
    while buf.len() < head_end + len {
        if read_more(sock, buf).await? == 0 {
            return Err(io::ErrorKind::UnexpectedEof.into());
        }
    }
    buf.drain(..head_end + len);
    Ok(Some(sent))
}

async fn read_more(sock: &mut TcpStream, buf: &mut Vec<u8>) -> io::Result<usize> {
    let mut tmp = [0u8; 4096];
    let n = sock.read(&mut tmp).await?;
    buf.extend_from_slice(&tmp[..n]);
    Ok(n)
}

fn find(hay: &[u8], needle: &[u8]) -> Option<usize> {
    hay.windows(needle.len()).position(|w| w == needle)
}

/// The OpenAI chunk of a stream before the per-chunk fields.
const PREFIX: &str = r#"data: {"id":"chatcmpl-bench","object":"chat.completion.chunk","created":1763900000,"model":"bench-model","system_fingerprint":null,"choices":["#;

/// Streams one response; `client_sent`: when the client sent the request.
async fn stream(
    sock: &mut TcpStream,
    shape: Shape,
    origin: Instant,
    req: u64,
    client_sent: Option<u64>,
) -> io::Result<()> {
    let arrived = origin.elapsed().as_nanos() as u64;
    // How long the request took to get here (the client's send to this read):
    // what a proxy adds before the first token, given to the client in the
    // role chunk.
    let fwd = client_sent.map_or(String::new(), |s| {
        format!(",\"bench\":{{\"fwd_ns\":{}}}", arrived.saturating_sub(s))
    });
    let mut out = Vec::with_capacity(1024);
    out.extend_from_slice(
        b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ncache-control: no-cache\r\ntransfer-encoding: chunked\r\n\r\n",
    );
    chunk(
        &mut out,
        format!(
            "{PREFIX}{{\"index\":0,\"delta\":{{\"role\":\"assistant\",\"content\":\"\"}},\"logprobs\":null,\"finish_reason\":null}}],\"usage\":null{fwd}}}\n\n"
        )
        .as_bytes(),
    );
    sock.write_all(&out).await?;
    let start = if shape.steps {
        // The last step boundary before now; the first chunk goes at the next.
        let p = shape.period.as_nanos().max(1);
        let k = origin.elapsed().as_nanos() / p;
        tokio::time::Instant::from_std(origin + Duration::from_nanos((k * p) as u64))
    } else if let Some(sent) = client_sent {
        // From the client's send, not this arrival: every path's streams then
        // follow one schedule, whatever a proxy did with the requests (through
        // tpscope they came bunched: up to 37 streams due in one millisecond of
        // the period, against nginx's 31 and the direct path's 24; session 20).
        tokio::time::Instant::from_std(origin + Duration::from_nanos(sent))
    } else {
        tokio::time::Instant::now()
    };
    for seq in 0..shape.chunks {
        let due_at = start + shape.period * (seq + 1);
        tokio::time::sleep_until(due_at).await;
        out.clear();
        let sent = origin.elapsed().as_nanos();
        let due = due_at
            .into_std()
            .saturating_duration_since(origin)
            .as_nanos();
        chunk(
            &mut out,
            format!(
                "{PREFIX}{{\"index\":0,\"delta\":{{\"content\":\" w{}\"}},\"logprobs\":null,\"finish_reason\":null}}],\"usage\":null,\"bench\":{{\"seq\":{seq},\"sent_ns\":{sent},\"due_ns\":{due},\"req\":{req}}}}}\n\n",
                seq % 100
            )
            .as_bytes(),
        );
        sock.write_all(&out).await?;
    }
    out.clear();
    chunk(
        &mut out,
        format!(
            "{PREFIX}{{\"index\":0,\"delta\":{{}},\"logprobs\":null,\"finish_reason\":\"stop\"}}],\"usage\":null}}\n\n"
        )
        .as_bytes(),
    );
    chunk(
        &mut out,
        format!(
            "{PREFIX}],\"usage\":{{\"prompt_tokens\":12,\"completion_tokens\":{},\"total_tokens\":{}}}}}\n\n",
            shape.chunks,
            shape.chunks + 12
        )
        .as_bytes(),
    );
    chunk(&mut out, b"data: [DONE]\n\n");
    out.extend_from_slice(b"0\r\n\r\n");
    sock.write_all(&out).await
}
