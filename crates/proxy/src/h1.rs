//! HTTP/1.1 messages as the proxy's own relay reads and writes them (pure, no
//! I/O): which requests it serves itself ([`Plain`]), a response body's framing
//! and its decoder ([`Framing`], [`Decoder`]), and the bytes of the heads and
//! chunks it writes. Everything else (HTTP/1.0, `Expect`, `Upgrade`, chunked
//! request bodies, a malformed or oversized head) is left to hyper's server.

use bytes::{BufMut, Bytes, BytesMut};
use hyper::header::{self, HeaderMap, HeaderName, HeaderValue};
use hyper::{Method, StatusCode};

/// Headers a head may have (hyper's server allows 100 as well).
pub(crate) const MAX_HEADERS: usize = 100;
/// The largest head the relay reads; a larger one is hyper's to refuse.
pub(crate) const MAX_HEAD: usize = 64 << 10;
/// The longest chunk-size line (size, extensions) accepted from an upstream.
const MAX_SIZE_LINE: usize = 4096;

/// A request the relay serves itself: HTTP/1.1, origin-form target, a body of
/// declared length (or none) within the limit.
#[derive(Debug)]
pub(crate) struct Plain {
    pub method: Method,
    /// Path and query as sent.
    pub target: String,
    pub headers: HeaderMap,
    /// Bytes of the head, consumed from the read buffer.
    pub head_len: usize,
    pub body_len: usize,
    /// The client sent a `Content-Length` (forwarded as such).
    pub has_length: bool,
    /// The client asked to close after this response.
    pub close: bool,
}

/// What the bytes at the start of a client connection's buffer are.
#[derive(Debug)]
pub(crate) enum Parsed {
    /// A request the relay serves.
    Plain(Plain),
    /// More bytes are needed.
    Partial,
    /// Hyper's to serve (or refuse).
    Other,
}

/// Parses a request head at the start of `buf`.
pub(crate) fn parse_request(buf: &[u8], max_body: u64) -> Parsed {
    let mut raw = [httparse::EMPTY_HEADER; MAX_HEADERS];
    let mut req = httparse::Request::new(&mut raw);
    let head_len = match req.parse(buf) {
        Ok(httparse::Status::Complete(n)) => n,
        Ok(httparse::Status::Partial) if buf.len() < MAX_HEAD => return Parsed::Partial,
        _ => return Parsed::Other,
    };
    let (Some(method), Some(target), Some(1)) = (req.method, req.path, req.version) else {
        return Parsed::Other;
    };
    let (Ok(method), true) = (
        Method::from_bytes(method.as_bytes()),
        target.starts_with('/'),
    ) else {
        return Parsed::Other;
    };
    // HEAD and CONNECT responses are framed by the method, not the head.
    if method == Method::HEAD || method == Method::CONNECT {
        return Parsed::Other;
    }
    let Some(headers) = header_map(req.headers) else {
        return Parsed::Other;
    };
    if headers.contains_key(header::TRANSFER_ENCODING)
        || headers.contains_key(header::EXPECT)
        || headers.contains_key(header::UPGRADE)
    {
        return Parsed::Other;
    }
    let mut lengths = headers.get_all(header::CONTENT_LENGTH).iter();
    let body_len = match (lengths.next(), lengths.next()) {
        (None, _) => 0,
        (Some(v), None) => match length(v) {
            Some(n) if n <= max_body => n as usize,
            // Over the limit (hyper's path answers 413) or not a number (400).
            _ => return Parsed::Other,
        },
        _ => return Parsed::Other,
    };
    let close = connection_has(&headers, "close");
    Parsed::Plain(Plain {
        method,
        target: target.to_string(),
        has_length: headers.contains_key(header::CONTENT_LENGTH),
        headers,
        head_len,
        body_len,
        close,
    })
}

fn header_map(raw: &[httparse::Header<'_>]) -> Option<HeaderMap> {
    let mut map = HeaderMap::with_capacity(raw.len());
    for h in raw {
        let name = HeaderName::from_bytes(h.name.as_bytes()).ok()?;
        let value = HeaderValue::from_bytes(h.value).ok()?;
        map.append(name, value);
    }
    Some(map)
}

/// A `Content-Length` value: decimal digits only (no sign, no list), so that
/// what the relay reads is what the upstream is told.
fn length(v: &HeaderValue) -> Option<u64> {
    let v = v.as_bytes().trim_ascii();
    if v.is_empty() || !v.iter().all(u8::is_ascii_digit) {
        return None;
    }
    std::str::from_utf8(v).ok()?.parse().ok()
}

/// Whether the `Connection` headers list `token`.
fn connection_has(h: &HeaderMap, token: &str) -> bool {
    crate::headers::connection_tokens(h).any(|t| t.eq_ignore_ascii_case(token))
}

/// An upstream's response head.
#[derive(Debug)]
pub(crate) struct ResponseHead {
    pub status: StatusCode,
    pub headers: HeaderMap,
    pub head_len: usize,
    pub framing: Framing,
    /// The upstream keeps the connection open after the body.
    pub keep_alive: bool,
}

/// Why an upstream's response head cannot be relayed.
#[derive(Debug, thiserror::Error)]
pub(crate) enum HeadError {
    #[error("the upstream's response head is malformed: {0}")]
    Malformed(String),
    #[error("the upstream's response head is larger than {MAX_HEAD} bytes")]
    TooLarge,
    #[error("the upstream answered with a protocol switch (101) that was not asked for")]
    Switch,
}

/// Parses a response head at the start of `buf` (`None`: more bytes needed). A
/// 1xx informational head comes back too: the caller skips it.
pub(crate) fn parse_response(buf: &[u8]) -> Result<Option<ResponseHead>, HeadError> {
    let mut raw = [httparse::EMPTY_HEADER; MAX_HEADERS];
    let mut res = httparse::Response::new(&mut raw);
    let head_len = match res.parse(buf) {
        Ok(httparse::Status::Complete(n)) => n,
        Ok(httparse::Status::Partial) if buf.len() < MAX_HEAD => return Ok(None),
        Ok(httparse::Status::Partial) => return Err(HeadError::TooLarge),
        Err(e) => return Err(HeadError::Malformed(e.to_string())),
    };
    let code = res.code.unwrap_or(0);
    let status =
        StatusCode::from_u16(code).map_err(|_| HeadError::Malformed(format!("status {code}")))?;
    if code == 101 {
        return Err(HeadError::Switch);
    }
    let headers = header_map(res.headers)
        .ok_or_else(|| HeadError::Malformed("a header name or value".into()))?;
    let framing = Framing::of(status, &headers)?;
    let http10 = res.version == Some(0);
    let keep_alive = framing != Framing::UntilClose
        && !connection_has(&headers, "close")
        && (!http10 || connection_has(&headers, "keep-alive"));
    Ok(Some(ResponseHead {
        status,
        headers,
        head_len,
        framing,
        keep_alive,
    }))
}

/// How a response body ends (RFC 9112 §6.3).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Framing {
    /// No body (1xx, 204, 304).
    Empty,
    Length(u64),
    Chunked,
    /// Until the upstream closes the connection.
    UntilClose,
}

impl Framing {
    fn of(status: StatusCode, h: &HeaderMap) -> Result<Framing, HeadError> {
        if status.is_informational()
            || status == StatusCode::NO_CONTENT
            || status == StatusCode::NOT_MODIFIED
        {
            return Ok(Framing::Empty);
        }
        if let Some(te) = h.get_all(header::TRANSFER_ENCODING).iter().next_back() {
            let last = te.to_str().ok().and_then(|v| v.rsplit(',').next());
            return Ok(match last {
                Some(c) if c.trim().eq_ignore_ascii_case("chunked") => Framing::Chunked,
                _ => Framing::UntilClose,
            });
        }
        let mut lengths = h.get_all(header::CONTENT_LENGTH).iter();
        match (lengths.next(), lengths.next()) {
            (None, _) => Ok(Framing::UntilClose),
            (Some(v), None) => length(v)
                .map(Framing::Length)
                .ok_or_else(|| HeadError::Malformed("Content-Length".into())),
            _ => Err(HeadError::Malformed("more than one Content-Length".into())),
        }
    }
}

/// Why an upstream's body cannot be decoded.
#[derive(Debug, thiserror::Error)]
#[error("the upstream's chunked body is malformed: {0}")]
pub(crate) struct BodyError(&'static str);

/// Finds a response body of one [`Framing`] in the bytes read, without moving
/// them: the relay forwards a chunked or sized body as it came (one write of
/// what one read brought) and shows the data ranges found here to the span.
#[derive(Debug)]
pub(crate) struct Decoder {
    state: State,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum State {
    Size,
    Data(u64),
    DataEnd,
    Trailers,
    Left(u64),
    UntilClose,
    Done,
}

impl Decoder {
    pub fn new(framing: Framing) -> Decoder {
        let state = match framing {
            Framing::Empty | Framing::Length(0) => State::Done,
            Framing::Length(n) => State::Left(n),
            Framing::Chunked => State::Size,
            Framing::UntilClose => State::UntilClose,
        };
        Decoder { state }
    }

    /// Whether the body is complete.
    pub fn ended(&self) -> bool {
        self.state == State::Done
    }

    /// Scans `buf` (the bytes not yet consumed), giving `data` each range of
    /// body data in it; returns how many bytes are consumed. What is left is a
    /// framing line not yet whole (or, after the end, bytes beyond the body).
    pub fn scan(
        &mut self,
        buf: &[u8],
        mut data: impl FnMut(std::ops::Range<usize>),
    ) -> Result<usize, BodyError> {
        let mut pos = 0;
        loop {
            let rest = &buf[pos..];
            match self.state {
                State::Done => return Ok(pos),
                State::Left(n) | State::Data(n) => {
                    if rest.is_empty() {
                        return Ok(pos);
                    }
                    let take = n.min(rest.len() as u64);
                    data(pos..pos + take as usize);
                    pos += take as usize;
                    self.state = match self.state {
                        State::Left(_) if take == n => State::Done,
                        State::Left(_) => State::Left(n - take),
                        _ if take == n => State::DataEnd,
                        _ => State::Data(n - take),
                    };
                }
                State::UntilClose => {
                    if !rest.is_empty() {
                        data(pos..buf.len());
                    }
                    return Ok(buf.len());
                }
                State::Size => {
                    let Some((line, used)) = line(rest)? else {
                        return Ok(pos);
                    };
                    let size = line.split(|b| *b == b';').next().unwrap_or(b"");
                    let n = chunk_size(size)?;
                    pos += used;
                    self.state = if n == 0 {
                        State::Trailers
                    } else {
                        State::Data(n)
                    };
                }
                State::DataEnd => {
                    if rest.len() < 2 {
                        return Ok(pos);
                    }
                    if &rest[..2] != b"\r\n" {
                        return Err(BodyError("a chunk is longer than its size"));
                    }
                    pos += 2;
                    self.state = State::Size;
                }
                State::Trailers => {
                    let Some((line, used)) = line(rest)? else {
                        return Ok(pos);
                    };
                    pos += used;
                    if line.is_empty() {
                        self.state = State::Done;
                    }
                }
            }
        }
    }
}

/// The first line of `buf` (without its CRLF) and its length with it.
fn line(buf: &[u8]) -> Result<Option<(&[u8], usize)>, BodyError> {
    match buf.iter().position(|c| *c == b'\n') {
        Some(i) => {
            let l = &buf[..i];
            Ok(Some((l.strip_suffix(b"\r").unwrap_or(l), i + 1)))
        }
        None if buf.len() > MAX_SIZE_LINE => Err(BodyError("a chunk-size line is too long")),
        None => Ok(None),
    }
}

fn chunk_size(s: &[u8]) -> Result<u64, BodyError> {
    let s = s.trim_ascii();
    if s.is_empty() || s.len() > 15 {
        return Err(BodyError(
            "a chunk size is not a hex number of at most 15 digits",
        ));
    }
    let mut n = 0u64;
    for c in s {
        let d = (*c as char)
            .to_digit(16)
            .ok_or(BodyError("a chunk size is not a hex number"))?;
        n = n * 16 + u64::from(d);
    }
    Ok(n)
}

/// The head of a request to the upstream: `method` to the upstream's `prefix`
/// and the request's `target`, its `headers` (hop-by-hop ones already gone) with
/// the upstream's `Host` and the body's length.
pub(crate) fn request_head(
    method: &Method,
    prefix: &str,
    target: &str,
    authority: &str,
    headers: &HeaderMap,
    body_len: Option<usize>,
) -> BytesMut {
    let mut b = BytesMut::with_capacity(256 + headers.len() * 48);
    b.put_slice(method.as_str().as_bytes());
    b.put_u8(b' ');
    b.put_slice(prefix.as_bytes());
    b.put_slice(target.as_bytes());
    b.put_slice(b" HTTP/1.1\r\nhost: ");
    b.put_slice(authority.as_bytes());
    b.put_slice(b"\r\n");
    put_headers(&mut b, headers);
    if let Some(n) = body_len {
        b.put_slice(b"content-length: ");
        put_decimal(&mut b, n as u64);
        b.put_slice(b"\r\n");
    }
    b.put_slice(b"\r\n");
    b
}

/// The head of a response to the client; a rechunked body gets
/// `transfer-encoding: chunked`, and `close` a `connection: close`.
pub(crate) fn response_head(
    status: StatusCode,
    headers: &HeaderMap,
    chunked: bool,
    close: bool,
) -> BytesMut {
    let mut b = BytesMut::with_capacity(128 + headers.len() * 48);
    b.put_slice(b"HTTP/1.1 ");
    b.put_slice(status.as_str().as_bytes());
    b.put_u8(b' ');
    b.put_slice(status.canonical_reason().unwrap_or("").as_bytes());
    b.put_slice(b"\r\n");
    put_headers(&mut b, headers);
    if chunked {
        b.put_slice(b"transfer-encoding: chunked\r\n");
    }
    if close {
        b.put_slice(b"connection: close\r\n");
    }
    b.put_slice(b"\r\n");
    b
}

fn put_headers(b: &mut BytesMut, headers: &HeaderMap) {
    for (k, v) in headers {
        b.put_slice(k.as_str().as_bytes());
        b.put_slice(b": ");
        b.put_slice(v.as_bytes());
        b.put_slice(b"\r\n");
    }
}

fn put_decimal(b: &mut BytesMut, n: u64) {
    let mut digits = [0u8; 20];
    let mut i = digits.len();
    let mut n = n;
    loop {
        i -= 1;
        digits[i] = b'0' + (n % 10) as u8;
        n /= 10;
        if n == 0 {
            break;
        }
    }
    b.put_slice(&digits[i..]);
}

/// The size line of a chunk of `n` bytes, cut from `scratch` (one allocation
/// serves many lines).
pub(crate) fn chunk_line(scratch: &mut BytesMut, n: usize) -> Bytes {
    if scratch.capacity() - scratch.len() < 20 {
        scratch.reserve(1024);
    }
    let digits = format_hex(n);
    scratch.put_slice(&digits.0[digits.1..]);
    scratch.put_slice(b"\r\n");
    scratch.split().freeze()
}

fn format_hex(mut n: usize) -> ([u8; 16], usize) {
    let mut d = [0u8; 16];
    let mut i = d.len();
    loop {
        i -= 1;
        d[i] = b"0123456789abcdef"[n % 16];
        n /= 16;
        if n == 0 {
            break;
        }
    }
    (d, i)
}

/// A chunk's end.
pub(crate) const CRLF: Bytes = Bytes::from_static(b"\r\n");
/// The last chunk of a rechunked body.
pub(crate) const LAST_CHUNK: Bytes = Bytes::from_static(b"0\r\n\r\n");

#[cfg(test)]
#[path = "h1_tests.rs"]
mod tests;
