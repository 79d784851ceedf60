//! The benchmark's upstream: a minimal HTTP/1.1 server that answers every request
//! with an OpenAI chat-completions stream (`include_usage` shape) of `chunks`
//! content chunks, one every `period` from the request's arrival, each carrying
//! its sequence number and its send time (nanoseconds since the benchmark's
//! clock origin, taken just before the chunk's `write`). Keep-alive: a connection
//! serves requests one after another (nginx and tpscope pool them).
//!
//! Written on plain tokio sockets rather than hyper so that the send stamp sits
//! next to the write syscall (hyper hands frames to its connection task first),
//! and so that the upstream spends as little of the shared cores as possible.

use std::io;
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

/// One HTTP/1.1 chunk holding `data`.
fn chunk(out: &mut Vec<u8>, data: &[u8]) {
    out.extend_from_slice(format!("{:x}\r\n", data.len()).as_bytes());
    out.extend_from_slice(data);
    out.extend_from_slice(b"\r\n");
}

async fn connection(mut sock: TcpStream, shape: Shape, origin: Instant) -> io::Result<()> {
    let mut buf: Vec<u8> = Vec::with_capacity(4096);
    let mut n = 0u64;
    loop {
        if !read_request(&mut sock, &mut buf).await? {
            return Ok(());
        }
        n += 1;
        stream(&mut sock, shape, origin, n).await?;
    }
}

/// Reads one request (head and body) and drops it; `false` at a clean EOF
/// between requests.
async fn read_request(sock: &mut TcpStream, buf: &mut Vec<u8>) -> io::Result<bool> {
    let head_end = loop {
        if let Some(i) = find(buf, b"\r\n\r\n") {
            break i + 4;
        }
        if buf.len() > 64 << 10 {
            return Err(io::Error::other("request head over 64 KiB"));
        }
        if read_more(sock, buf).await? == 0 {
            return if buf.is_empty() {
                Ok(false)
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
    if header("transfer-encoding:").is_some_and(|v| v.contains("chunked")) {
        // The body ends with the last chunk and an empty trailer section.
        loop {
            if let Some(i) = find(&buf[head_end..], b"0\r\n\r\n") {
                buf.drain(..head_end + i + 5);
                return Ok(true);
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
    Ok(true)
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

async fn stream(sock: &mut TcpStream, shape: Shape, origin: Instant, req: u64) -> io::Result<()> {
    let mut out = Vec::with_capacity(1024);
    out.extend_from_slice(
        b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ncache-control: no-cache\r\ntransfer-encoding: chunked\r\n\r\n",
    );
    chunk(
        &mut out,
        format!(
            "{PREFIX}{{\"index\":0,\"delta\":{{\"role\":\"assistant\",\"content\":\"\"}},\"logprobs\":null,\"finish_reason\":null}}],\"usage\":null}}\n\n"
        )
        .as_bytes(),
    );
    sock.write_all(&out).await?;
    let start = if shape.steps {
        // The last step boundary before now; the first chunk goes at the next.
        let p = shape.period.as_nanos().max(1);
        let k = origin.elapsed().as_nanos() / p;
        tokio::time::Instant::from_std(origin + Duration::from_nanos((k * p) as u64))
    } else {
        tokio::time::Instant::now()
    };
    for seq in 0..shape.chunks {
        tokio::time::sleep_until(start + shape.period * (seq + 1)).await;
        out.clear();
        let sent = origin.elapsed().as_nanos();
        chunk(
            &mut out,
            format!(
                "{PREFIX}{{\"index\":0,\"delta\":{{\"content\":\" w{}\"}},\"logprobs\":null,\"finish_reason\":null}}],\"usage\":null,\"bench\":{{\"seq\":{seq},\"sent_ns\":{sent},\"req\":{req}}}}}\n\n",
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
