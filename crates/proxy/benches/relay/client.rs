//! The benchmark's client: one HTTP/1.1 connection per stream, one streamed chat
//! completion on it, and the latency of every content chunk: the instant the
//! `read` that completed the chunk returned, minus the send time the upstream
//! wrote into it (one process, one monotonic clock).
//!
//! Plain tokio sockets and a small chunked-encoding decoder rather than hyper:
//! the arrival stamp sits next to the read syscall (hyper's client reads in its
//! connection task and passes frames over a channel), and the client spends as
//! little of the shared cores as possible. The same client measures every path.

use std::net::SocketAddr;
use std::ops::Range;
use std::time::Instant;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

use crate::upstream::{FWD, MARK, SENT_HEADER};

/// What one stream saw.
#[derive(Debug, Default)]
pub struct StreamOut {
    /// Latency (ns) of each content chunk by sequence number; `None` for chunks
    /// outside the measured range and chunks not received.
    pub lat: Vec<Option<i64>>,
    /// Send instant (ns since the origin) of each measured chunk, by sequence
    /// number (for `--dump`); 0 where `lat` is `None`.
    pub sent: Vec<i64>,
    /// The instant the upstream's schedule had each measured chunk due (ns
    /// since the origin), by sequence number; 0 where `lat` is `None`.
    pub due: Vec<i64>,
    /// Content chunks received (warm-up included).
    pub chunks: u64,
    /// How long the request took from the client's send to the upstream's read
    /// (ns; `None` where the path did not pass the send instant on).
    pub forward: Option<i64>,
    /// `usage.completion_tokens` of the stream's last chunk.
    pub usage_tokens: Option<u64>,
    /// Arrival (ns since the origin) of the first and last measured chunk.
    pub span: Option<(i64, i64)>,
    /// Why the stream did not end with `[DONE]` and the last HTTP chunk.
    pub error: Option<String>,
}

impl StreamOut {
    /// A stream of `chunks` chunks, none received yet.
    pub fn new(chunks: u32) -> StreamOut {
        StreamOut {
            lat: vec![None; chunks as usize],
            sent: vec![0; chunks as usize],
            due: vec![0; chunks as usize],
            ..StreamOut::default()
        }
    }
}

/// Where `--dump` writes a round's chunks: `DIR/PATH-ROUND.tsv`.
pub fn dump_file(dir: &std::path::Path, path: &str, round: u32) -> std::path::PathBuf {
    dir.join(format!("{path}-{round}.tsv"))
}

/// Writes the measured chunks of `outs` as tab-separated lines: stream index,
/// sequence number, send instant, latency and the instant the chunk was due
/// (ns), after a header line.
pub fn dump(mut w: impl std::io::Write, outs: &[StreamOut]) -> std::io::Result<()> {
    writeln!(w, "stream\tseq\tsent_ns\tlatency_ns\tdue_ns")?;
    for (i, o) in outs.iter().enumerate() {
        for (seq, ((lat, sent), due)) in o.lat.iter().zip(&o.sent).zip(&o.due).enumerate() {
            if let Some(lat) = lat {
                writeln!(w, "{i}\t{seq}\t{sent}\t{lat}\t{due}")?;
            }
        }
    }
    w.flush()
}

/// The request's way to the upstream of each stream of `outs` that has it (ns).
pub fn forwarding(outs: &[StreamOut]) -> Vec<i64> {
    outs.iter().filter_map(|o| o.forward).collect()
}

/// How late the upstream wrote each measured chunk of `outs` (ns, its send
/// instant less the instant its schedule had it due).
pub fn lateness(outs: &[StreamOut]) -> Vec<i64> {
    outs.iter()
        .flat_map(|o| {
            o.lat
                .iter()
                .zip(o.sent.iter().zip(&o.due))
                .filter_map(|(lat, (sent, due))| lat.map(|_| sent - due))
        })
        .collect()
}

/// The request every stream sends (the model LiteLLM's config routes).
pub(crate) const BODY: &str = r#"{"model":"bench-model","stream":true,"stream_options":{"include_usage":true},"messages":[{"role":"user","content":"Write a long story."}]}"#;

/// Streams one completion from `addr`, connecting at `start`.
pub async fn run_stream(
    addr: SocketAddr,
    start: tokio::time::Instant,
    origin: Instant,
    chunks: u32,
    measure: Range<u32>,
) -> StreamOut {
    tokio::time::sleep_until(start).await;
    let mut out = StreamOut::new(chunks);
    if let Err(e) = stream(addr, origin, &measure, &mut out).await {
        out.error = Some(e);
    }
    out
}

async fn stream(
    addr: SocketAddr,
    origin: Instant,
    measure: &Range<u32>,
    out: &mut StreamOut,
) -> Result<(), String> {
    let mut sock = TcpStream::connect(addr)
        .await
        .map_err(|e| format!("connect: {e}"))?;
    let _ = sock.set_nodelay(true);
    // The send instant goes with the request, so that the upstream schedules
    // the stream from it on every path (see `upstream::stream`).
    let req = format!(
        "POST /v1/chat/completions HTTP/1.1\r\nhost: {addr}\r\ncontent-type: application/json\r\nauthorization: Bearer bench\r\n{SENT_HEADER}: {}\r\ncontent-length: {}\r\n\r\n{BODY}",
        origin.elapsed().as_nanos(),
        BODY.len()
    );
    sock.write_all(req.as_bytes())
        .await
        .map_err(|e| format!("write: {e}"))?;
    let mut raw: Vec<u8> = Vec::with_capacity(8192);
    let mut tmp = vec![0u8; 16384];
    let mut head_done = false;
    let mut dec = Chunked::default();
    let mut body: Vec<u8> = Vec::with_capacity(8192);
    let mut done = false;
    loop {
        let n = sock
            .read(&mut tmp)
            .await
            .map_err(|e| format!("read: {e}"))?;
        let now = origin.elapsed().as_nanos() as i64;
        if n == 0 {
            return Err(if done {
                "EOF before the last HTTP chunk".into()
            } else {
                format!("EOF after {} chunks, before [DONE]", out.chunks)
            });
        }
        raw.extend_from_slice(&tmp[..n]);
        if !head_done {
            let Some(i) = find(&raw, b"\r\n\r\n") else {
                continue;
            };
            let head = String::from_utf8_lossy(&raw[..i]).to_ascii_lowercase();
            if !head.starts_with("http/1.1 200") {
                return Err(format!("response {}", head.lines().next().unwrap_or("")));
            }
            if !head.contains("transfer-encoding: chunked") {
                return Err("the response is not chunked".into());
            }
            raw.drain(..i + 4);
            head_done = true;
        }
        let ended = dec.decode(&mut raw, &mut body)?;
        while let Some(i) = find(&body, b"\n\n") {
            event(&body[..i], now, measure, out, &mut done);
            body.drain(..i + 2);
        }
        if ended {
            return if done {
                Ok(())
            } else {
                Err("the body ended before [DONE]".into())
            };
        }
    }
}

/// Takes one SSE event's latency (when its sequence number is in `measure`),
/// usage or end.
pub(crate) fn event(
    ev: &[u8],
    now: i64,
    measure: &Range<u32>,
    out: &mut StreamOut,
    done: &mut bool,
) {
    if let Some(i) = find(ev, MARK) {
        let rest = &ev[i + MARK.len()..];
        let seq = number(rest);
        let sent = find(rest, b"\"sent_ns\":").and_then(|j| number(&rest[j + 10..]));
        let due = find(rest, b"\"due_ns\":").and_then(|j| number(&rest[j + 9..]));
        if let (Some(seq), Some(sent)) = (seq, sent) {
            out.chunks += 1;
            if u32::try_from(seq).is_ok_and(|s| measure.contains(&s))
                && let Some(slot) = out.lat.get_mut(seq as usize)
            {
                *slot = Some(now - sent as i64);
                if let Some(at) = out.sent.get_mut(seq as usize) {
                    *at = sent as i64;
                }
                // A chunk without its due instant counts as on time.
                if let Some(at) = out.due.get_mut(seq as usize) {
                    *at = due.unwrap_or(sent) as i64;
                }
                out.span = Some(match out.span {
                    None => (now, now),
                    Some((a, _)) => (a, now),
                });
            }
        }
    } else if let Some(i) = find(ev, FWD) {
        out.forward = number(&ev[i + FWD.len()..]).map(|n| n as i64);
    } else if let Some(i) = find(ev, b"\"completion_tokens\":") {
        out.usage_tokens = number(&ev[i + 20..]);
    } else if ev == b"data: [DONE]" {
        *done = true;
    }
}

/// The decimal number at the start of `s`.
fn number(s: &[u8]) -> Option<u64> {
    let end = s
        .iter()
        .position(|b| !b.is_ascii_digit())
        .unwrap_or(s.len());
    std::str::from_utf8(&s[..end]).ok()?.parse().ok()
}

fn find(hay: &[u8], needle: &[u8]) -> Option<usize> {
    hay.windows(needle.len()).position(|w| w == needle)
}

/// A decoder of HTTP/1.1 chunked transfer coding.
#[derive(Default)]
pub(crate) struct Chunked {
    /// Data bytes left in the current chunk (then its CRLF).
    left: usize,
    in_data: bool,
}

impl Chunked {
    /// Moves the data in `raw` to `body`, keeping an incomplete size line or CRLF
    /// in `raw`; `true` once the last chunk (size 0) and its trailer ended.
    pub(crate) fn decode(&mut self, raw: &mut Vec<u8>, body: &mut Vec<u8>) -> Result<bool, String> {
        let mut at = 0;
        let ended = loop {
            if self.in_data {
                let take = self.left.min(raw.len() - at);
                body.extend_from_slice(&raw[at..at + take]);
                at += take;
                self.left -= take;
                if self.left > 0 || raw.len() - at < 2 {
                    break false;
                }
                if &raw[at..at + 2] != b"\r\n" {
                    return Err("a chunk does not end with CRLF".into());
                }
                at += 2;
                self.in_data = false;
            }
            let Some(i) = find(&raw[at..], b"\r\n") else {
                break false;
            };
            let line = std::str::from_utf8(&raw[at..at + i]).map_err(|e| e.to_string())?;
            let size = line.split(';').next().unwrap_or("").trim();
            let size = usize::from_str_radix(size, 16)
                .map_err(|_| format!("bad chunk size line `{line}`"))?;
            if size == 0 {
                // The last chunk: wait for the empty line that ends the trailers.
                if find(&raw[at..], b"\r\n\r\n").is_some() {
                    break true;
                }
                break false;
            }
            at += i + 2;
            self.left = size;
            self.in_data = true;
        };
        raw.drain(..at);
        Ok(ended)
    }
}
