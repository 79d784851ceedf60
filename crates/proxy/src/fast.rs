//! The proxy's own HTTP/1.1 relay, for plain-HTTP upstreams: a client
//! connection's requests are read, forwarded over this thread's pooled upstream
//! connections and relayed back by one task, chunk by chunk, with no connection
//! task per side and no body channel between them (hyper's server and client
//! took 1.23–1.37× nginx's CPU per relayed token; docs/proxy-bench.md). A request
//! it does not serve itself ([`h1::parse_request`]: HTTP/1.0, `Expect`, upgrades,
//! chunked request bodies, a malformed head) hands the connection, with the bytes
//! read so far, to hyper's server for the rest of its life; HTTP/2 clients and
//! `https` upstreams never come here.
//!
//! What a request sees is what hyper's path gives: the same admission
//! ([`service::admit`]), spans ([`crate::track::Track`]), arrival stamps, answers of the proxy's
//! own (502, 504) and idle cut; a client that leaves is noticed at once (its
//! connection reads EOF), which drops its span as cancelled and closes the
//! upstream connection.

use std::future::poll_fn;
use std::pin::Pin;
use std::sync::Mutex;
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use bytes::{Buf, Bytes, BytesMut};
use http_body_util::BodyExt;
use hyper::header::{self, HeaderMap};
use hyper::{Response, Uri};
use tokio::io::{AsyncRead, AsyncWriteExt, ReadBuf};
use tokio::net::TcpStream;
use tokio::sync::watch;
use tpscope_client::{Forwarder, UpstreamConn};
use tpscope_model::Cause;

use crate::h1::{self, Framing, Parsed, Plain};
use crate::h1_relay::{End, Relay};
use crate::headers::{QUEUED_AT, strip_hop_by_hop};
use crate::preface::Prefixed;
use crate::relay::ProxyBody;
use crate::service::{self, Admit, State};

/// One thread's idle plain-HTTP upstream connections (most recent last).
pub(crate) struct Pool {
    origin: Uri,
    idle: Mutex<Vec<(UpstreamConn, Instant)>>,
    max_idle: Duration,
}

impl Pool {
    /// A pool for `origin` (`http://host:port`) whose connections idle at most
    /// `max_idle`.
    pub fn new(origin: Uri, max_idle: Duration) -> Pool {
        Pool {
            origin,
            idle: Mutex::new(Vec::new()),
            max_idle,
        }
    }

    /// The most recently used idle connection the upstream has not closed.
    fn take(&self) -> Option<UpstreamConn> {
        let mut idle = self.idle.lock().unwrap_or_else(|e| e.into_inner());
        while let Some((c, at)) = idle.pop() {
            if at.elapsed() < self.max_idle && c.is_reusable() {
                return Some(c);
            }
        }
        None
    }

    fn put(&self, c: UpstreamConn) {
        let mut idle = self.idle.lock().unwrap_or_else(|e| e.into_inner());
        idle.retain(|(_, at)| at.elapsed() < self.max_idle);
        idle.push((c, Instant::now()));
    }
}

/// How much one read of either side asks for.
pub(crate) const READ_SIZE: usize = 8 << 10;
/// The most a client may send ahead (a pipelined request) while its response
/// is relayed; beyond it, the client is not read until the response ends.
const AHEAD: usize = 64 << 10;

/// Serves `io`'s HTTP/1.1 requests until the client closes, the header timeout
/// passes, the proxy stops, or a request is hyper's (then the connection comes
/// back, with the bytes read so far in front).
pub(crate) async fn serve(
    io: Prefixed,
    st: &State,
    pool: &Pool,
    stop: &mut watch::Receiver<bool>,
) -> Option<Prefixed> {
    let (head, mut io) = io.into_parts();
    let mut buf = BytesMut::from(&head[..]);
    loop {
        let deadline = tokio::time::Instant::now() + st.cfg.header_timeout;
        // Bytes known to end no head: a head is parsed again only when a line
        // ended since (a client trickling its head a byte at a time would
        // otherwise cost a parse of all it sent per byte).
        let mut seen = 0;
        let req = loop {
            if buf[seen..].contains(&b'\n') || buf.len() >= h1::MAX_HEAD {
                match h1::parse_request(&buf, st.cfg.max_body) {
                    Parsed::Plain(p) => break p,
                    Parsed::Other => return Some(Prefixed::new(buf.freeze(), io)),
                    Parsed::Partial => {}
                }
            }
            seen = buf.len();
            // A stop closes a connection between requests, not in one.
            let idle = buf.is_empty();
            let read = tokio::select! {
                r = tokio::time::timeout_at(deadline, read_some(&mut io, &mut buf)) => r,
                _ = stop.wait_for(|s| *s), if idle => return None,
            };
            if !matches!(read, Ok(Ok(n)) if n > 0) {
                return None;
            }
        };
        buf.advance(req.head_len);
        let close = req.close;
        if !one(st, pool, &mut io, &mut buf, req).await || close || *stop.borrow() {
            let _ = io.shutdown().await;
            return None;
        }
    }
}

async fn read_some(io: &mut TcpStream, buf: &mut BytesMut) -> std::io::Result<usize> {
    buf.reserve(READ_SIZE);
    tokio::io::AsyncReadExt::read_buf(io, buf).await
}

/// Serves one request; whether the client connection can carry another.
async fn one(
    st: &State,
    pool: &Pool,
    io: &mut TcpStream,
    ahead: &mut BytesMut,
    req: Plain,
) -> bool {
    let path = req.target.split('?').next().unwrap_or("");
    // Admitted at its head, as hyper's path does: the body's upload is the
    // request's own time, not queue time. A client that leaves while its
    // request waits for a slot or a response is never sent, or stops waiting:
    // the future is dropped with its span.
    let admitted = tokio::select! {
        a = service::admit(st, &req.method, path, &req.headers) => a,
        _ = client_gone(io, ahead) => return false,
    };
    let mut track = match admitted {
        Admit::Pass(t) => t.map(|t| *t),
        Admit::Answer(r) => {
            // A body not yet read would be taken for the next request: the
            // connection goes on only when it is all here.
            let whole = ahead.len() >= req.body_len;
            if whole {
                ahead.advance(req.body_len);
            }
            return answer(io, r, req.close || !whole).await && whole;
        }
    };
    while ahead.len() < req.body_len {
        if !matches!(read_some(io, ahead).await, Ok(n) if n > 0) {
            return false;
        }
    }
    let body = ahead.split_to(req.body_len).freeze();
    let mut headers = req.headers;
    strip_hop_by_hop(&mut headers);
    headers.remove(QUEUED_AT);
    headers.remove(header::HOST);
    headers.remove(header::CONTENT_LENGTH);
    let declared = req.has_length.then_some(req.body_len);
    let mut out = h1::request_head(
        &req.method,
        &st.upstream.prefix,
        &req.target,
        st.upstream.authority.as_str(),
        &headers,
        declared,
    );
    out.extend_from_slice(&body);
    let out = out.freeze();
    let sent_at = Instant::now();
    let exchange =
        tokio::time::timeout(st.cfg.upstream_timeout, exchange(&st.forwarder, pool, &out));
    let got = tokio::select! {
        g = exchange => g,
        _ = client_gone(io, ahead) => return false,
    };
    let (mut up, mut ubuf, head) = match got {
        Ok(Ok(x)) => x,
        Ok(Err((cause, msg))) => {
            let r = service::unreachable(st, track.as_mut(), cause, &msg);
            return answer(io, r, req.close).await;
        }
        Err(_) => {
            let r = service::no_response(st, track.as_mut());
            return answer(io, r, req.close).await;
        }
    };
    // The head's arrival (kernel stamp), not when this task got to it.
    if let Some(t) = track.as_mut() {
        t.head(head.status, &head.headers, up.latest(sent_at));
    }
    let mut headers = head.headers;
    strip_hop_by_hop(&mut headers);
    // A chunked body goes on chunked as it came; one that ends with the
    // connection is chunked here (the client's connection stays open).
    let chunked = matches!(head.framing, Framing::Chunked | Framing::UntilClose);
    if chunked {
        headers.remove(header::CONTENT_LENGTH);
    }
    let idle = Some(st.cfg.idle_timeout).filter(|d| *d > Duration::ZERO);
    let first = h1::response_head(head.status, &headers, chunked, req.close).freeze();
    let mut relay = Relay::new(head.framing, first, track, sent_at, idle);
    let end = poll_fn(|cx| relay.poll(cx, &mut up, &mut ubuf, io, ahead)).await;
    match end {
        End::Done => {
            if head.keep_alive && ubuf.is_empty() {
                pool.put(up);
            }
            true
        }
        // The span is dropped as cancelled (or whole, when its end marker came).
        End::ClientGone => false,
        End::Broke(cause, msg) => {
            relay.fail(cause, msg);
            false
        }
    }
}

/// Sends `req` over a pooled connection (or a new one) and reads the response
/// head. A reused connection that fails before any byte of a response (the
/// upstream closed it as it went idle) is replaced once by a new one.
async fn exchange(
    fwd: &Forwarder,
    pool: &Pool,
    req: &[u8],
) -> Result<(UpstreamConn, BytesMut, h1::ResponseHead), (Cause, String)> {
    let mut reused = pool.take();
    loop {
        let retry = reused.is_some();
        let mut up = match reused.take() {
            Some(c) => c,
            None => fwd.connect_plain(&pool.origin).await?,
        };
        let mut buf = BytesMut::with_capacity(READ_SIZE);
        let failed = match up.write_all(req).await {
            Err(e) => e.to_string(),
            Ok(()) => match read_head(&mut up, &mut buf).await {
                Ok(head) => return Ok((up, buf, head)),
                Err(HeadRead::Head(e)) => return Err((Cause::Disconnect, e.to_string())),
                Err(HeadRead::Io(e)) if !buf.is_empty() => {
                    return Err((Cause::Disconnect, format!("no response: {e}")));
                }
                Err(HeadRead::Io(e)) => e,
            },
        };
        if !retry {
            return Err((Cause::Disconnect, format!("no response: {failed}")));
        }
    }
}

enum HeadRead {
    Io(String),
    Head(h1::HeadError),
}

/// Reads the response head (skipping 1xx ones) into `buf`; the body's first
/// bytes stay there.
async fn read_head(
    up: &mut UpstreamConn,
    buf: &mut BytesMut,
) -> Result<h1::ResponseHead, HeadRead> {
    loop {
        match h1::parse_response(buf).map_err(HeadRead::Head)? {
            Some(h) => {
                // The upstream took the connection (a 1xx says so too): its
                // place among those being opened goes to the next new one.
                up.answered();
                buf.advance(h.head_len);
                if !h.status.is_informational() {
                    return Ok(h);
                }
            }
            None => {
                buf.reserve(READ_SIZE);
                match tokio::io::AsyncReadExt::read_buf(up, buf).await {
                    Ok(0) => return Err(HeadRead::Io("the upstream closed the connection".into())),
                    Ok(_) => {}
                    Err(e) => return Err(HeadRead::Io(e.to_string())),
                }
            }
        }
    }
}

/// Resolves when the client closes its connection (or it fails); bytes it sends
/// meanwhile are kept in `ahead`, up to [`AHEAD`].
async fn client_gone(io: &mut TcpStream, ahead: &mut BytesMut) {
    poll_fn(|cx| match poll_client(io, ahead, cx) {
        true => Poll::Ready(()),
        false => Poll::Pending,
    })
    .await
}

/// Reads what the client sent; whether it has gone.
pub(crate) fn poll_client(io: &mut TcpStream, ahead: &mut BytesMut, cx: &mut Context<'_>) -> bool {
    while ahead.len() < AHEAD {
        ahead.reserve(1024);
        let mut rb = ReadBuf::uninit(ahead.spare_capacity_mut());
        match Pin::new(&mut *io).poll_read(cx, &mut rb) {
            Poll::Pending => return false,
            Poll::Ready(Err(_)) => return true,
            Poll::Ready(Ok(())) => {
                let n = rb.filled().len();
                if n == 0 {
                    return true;
                }
                // SAFETY: `poll_read` initialised the first `n` spare bytes.
                unsafe { ahead.set_len(ahead.len() + n) };
            }
        }
    }
    false
}

/// Writes an answer of the proxy's own; whether the connection goes on.
async fn answer(io: &mut TcpStream, r: Response<ProxyBody>, close: bool) -> bool {
    let (parts, body) = r.into_parts();
    let body = match body {
        ProxyBody::Full(f) => f.collect().await.map(|c| c.to_bytes()).unwrap_or_default(),
        ProxyBody::Relay(_) => Bytes::new(),
    };
    let mut headers: HeaderMap = parts.headers;
    headers.insert(header::CONTENT_LENGTH, body.len().into());
    let mut out = h1::response_head(parts.status, &headers, false, close);
    out.extend_from_slice(&body);
    io.write_all(&out).await.is_ok()
}

#[cfg(test)]
mod tests {
    use std::io::{Read, Write};

    use tpscope_client::ClientConfig;

    use super::*;

    /// A new upstream connection holds a place among those being opened at
    /// once until the upstream answers on it; the relay never said it had,
    /// so each held its place for the whole spacing (50 ms) and a burst of
    /// new streams beyond the places waited for them.
    #[tokio::test]
    async fn an_upstreams_answer_gives_its_connections_place_back_at_once() {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let origin: Uri = format!("http://{}", listener.local_addr().unwrap())
            .parse()
            .unwrap();
        let upstream = std::thread::spawn(move || {
            let (mut s, _) = listener.accept().unwrap();
            let mut buf = [0u8; 1024];
            let mut got = Vec::new();
            while !got.windows(4).any(|w| w == b"\r\n\r\n") {
                let n = s.read(&mut buf).unwrap();
                assert!(n > 0, "the relay closed before its request's head");
                got.extend_from_slice(&buf[..n]);
            }
            s.write_all(b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\nok")
                .unwrap();
            // Held open until the relay is done with it.
            let _ = s.read(&mut buf);
        });
        let cfg = ClientConfig {
            connect_burst: 4,
            ..ClientConfig::default()
        };
        let fwd = Forwarder::new(false, &cfg).unwrap();
        let pool = Pool::new(origin, Duration::from_secs(60));
        assert_eq!(fwd.opening(), Some(0));
        let req = b"GET / HTTP/1.1\r\nhost: upstream\r\n\r\n";
        let (up, body, head) = exchange(&fwd, &pool, req).await.unwrap();
        assert_eq!(head.status, hyper::StatusCode::OK);
        assert_eq!(&body[..], b"ok");
        assert_eq!(
            fwd.opening(),
            Some(0),
            "the answered connection kept its place"
        );
        drop(up);
        upstream.join().unwrap();
    }
}
