//! One attempt: sends one streaming request over a pooled hyper connection and
//! follows it to its end, stamping its times. Failures come back as data (an
//! [`AttemptOutcome`] with a [`Cause`]), never as errors or panics. The phases are
//! the response head, an error status, a non-streaming JSON answer, and the event
//! stream (the hot loop).
//!
//! The hot path (one iteration per body read) takes one `Instant::now()` and one
//! relaxed load of the connection's arrival cell, feeds the bytes to the SSE parser
//! and each completed event to the chunk parser, and counts; it never tokenises,
//! allocates per chunk (beyond appending received text), or computes statistics.
//!
//! Body reads (and the response head) are stamped with [`read_instant`]: the
//! kernel's receive time of the bytes when the connection records it
//! ([`crate::config::RxTimestamps::Kernel`]), else the instant the attempt's task
//! got them. hyper reads the socket in its own connection task and hands frames
//! to this task over a channel, so under load `Instant::now()` here can be
//! milliseconds after the bytes arrived; the kernel's stamp is the arrival.

use std::pin::Pin;
use std::time::{Duration, Instant, SystemTime};

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::body::Incoming;
use hyper::header;
use hyper::{Method, Request, Response};
use tokio::time::Sleep;
use tokio_util::sync::{CancellationToken, WaitForCancellationFuture};
use tpscope_model::{AttemptOutcome, Cause, RunClock};
use tpscope_stream::{SseParser, StreamEnd};

use crate::client::{Client, error_chain, transport_failure};
use crate::config::{ClientConfig, RequestSpec};
use crate::connector::ConnTag;
use crate::live::LiveTokens;
use crate::outcome::AttemptRecord;
use crate::request::request_body;
use crate::rx::{RxCell, frame_stamp, read_instant, read_stamp};

/// Largest error body read to find the server's message.
const ERROR_BODY_LIMIT: usize = 64 << 10;
/// Longest wait for the rest of an error body once its status is known.
const ERROR_BODY_WAIT: Duration = Duration::from_secs(5);
/// How long to keep reading after `[DONE]` for the body's end, so the connection
/// can go back to the pool (usually the end arrives in the same read).
const DRAIN_LIMIT: Duration = Duration::from_secs(1);

/// What ends a wait of the attempt besides the body: the cancel signal and the
/// deadline timer, with the limit it is armed for.
struct Waits<'p, 'c> {
    cancelled: Pin<&'p mut WaitForCancellationFuture<'c>>,
    sleep: Pin<&'p mut Sleep>,
    armed: Option<(Instant, Cause)>,
    deadlines: Deadlines,
}

impl Waits<'_, '_> {
    /// Arms the timer for `next` (disarmed when `None`).
    fn arm(&mut self, next: Option<(Instant, Cause)>) {
        self.armed = next;
        if let Some((at, _)) = next {
            self.sleep.as_mut().reset(at.into());
        }
    }
}

/// Where the attempt's reads are stamped from.
#[derive(Clone, Copy)]
struct Stamps<'a> {
    rx: Option<&'a RxCell>,
    start: Instant,
}

impl Client {
    /// Sends one streaming request and follows it to its end, stamping its times
    /// through `clock`. Never panics and never fails: a failure is an outcome with a
    /// cause. `cancel` ends the attempt at once (cause `cancelled`, what arrived so
    /// far kept).
    pub async fn attempt(
        &self,
        spec: &RequestSpec,
        clock: &RunClock,
        cancel: &CancellationToken,
    ) -> AttemptOutcome {
        let inner = &*self.inner;
        let cfg = &inner.config;
        let body = Bytes::from(request_body(&inner.endpoint, spec));
        let request = || {
            let mut req = Request::new(Full::new(body.clone()));
            *req.method_mut() = Method::POST;
            *req.uri_mut() = inner.request_uri.clone();
            *req.headers_mut() = inner.post_headers.clone();
            req
        };

        let start = Instant::now();
        let mut rec = AttemptRecord::new(clock, start, cfg, inner.endpoint.api.into());
        if cancel.is_cancelled() {
            return rec.finish(
                Some(Cause::Cancelled),
                start,
                Some("cancelled before sending".into()),
            );
        }
        // A child token: polling it locks only its own node, not the parent that
        // a whole run's attempts may share.
        let cancel = cancel.child_token();
        let cancelled = cancel.cancelled();
        tokio::pin!(cancelled);
        let sleep = tokio::time::sleep_until(tokio::time::Instant::from_std(start));
        tokio::pin!(sleep);
        let mut w = Waits {
            cancelled,
            sleep,
            armed: None,
            deadlines: Deadlines {
                total: cfg.timeouts.total.map(|d| start + d),
                first_token: cfg.timeouts.first_token.map(|d| start + d),
                stall: cfg.timeouts.stall,
            },
        };

        // 1. The response head. A request lost to a keep-alive race (the server
        // closed a pooled connection as it went out, before any reply) is sent
        // again at once on a new connection: not a retry, counted apart.
        w.arm(w.deadlines.next(None, None));
        let mut resends = 0u32;
        let mut res = loop {
            let http = if cfg.keepalive && resends == 0 {
                &inner.http
            } else {
                &inner.fresh
            };
            match response_head(http.request(request()), &mut w, cfg).await {
                Ok(res) => break res,
                Err(Failed::Transport(e))
                    if resends < MAX_RESENDS && crate::client::closed_before_reply(&e) =>
                {
                    resends += 1;
                }
                Err(f) => {
                    let (cause, msg) = f.cause();
                    if matches!(cause, Cause::Connect | Cause::TimeoutConnect) {
                        rec.attempt.connection_reused = Some(false);
                    }
                    rec.attempt.resends = resends;
                    return rec.finish(Some(cause), Instant::now(), Some(msg));
                }
            }
        };
        rec.attempt.resends = resends;
        // The tag is taken out of the response (nothing else reads it) and kept for
        // the connection's arrival cell, which stamps every read below.
        let conn = res.extensions_mut().remove::<ConnTag>().map(|ConnTag(c)| c);
        let at = Stamps {
            rx: conn.as_ref().and_then(|c| c.rx.as_deref()),
            start,
        };
        rec.head(
            read_instant(at.rx, start),
            res.status(),
            conn.as_deref(),
            start,
        );
        let json_answer = res
            .headers()
            .get(header::CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
            .is_some_and(|ct| ct.trim_start().starts_with("application/json"));

        if !res.status().is_success() {
            return error_status(res, &mut w, rec).await;
        }
        rec.body.content_type = res
            .headers()
            .get(header::CONTENT_TYPE)
            .map(|v| String::from_utf8_lossy(v.as_bytes()).into_owned());
        let live = inner.live.as_deref();
        let body = Body {
            body: res.into_body(),
            w: &mut w,
            rec,
            cfg,
            at,
            live,
            live_reported: 0,
        };
        if json_answer {
            let o = body.whole_answer().await;
            if let Some(l) = live {
                l.read(o.attempt.tokens, Instant::now());
            }
            return o;
        }
        body.event_stream().await
    }
}

/// Resends after keep-alive races, at most (each on a new connection, so a
/// second one means the server closes fresh connections too).
const MAX_RESENDS: u32 = 2;

/// Why no response head came.
enum Failed {
    /// Cancelled or timed out: the cause and message.
    Stopped(Cause, String),
    /// The transport failed.
    Transport(hyper_util::client::legacy::Error),
}

impl Failed {
    fn cause(self) -> (Cause, String) {
        match self {
            Failed::Stopped(c, m) => (c, m),
            Failed::Transport(e) => transport_failure(&e),
        }
    }
}

/// Waits for the response head.
async fn response_head(
    request: impl Future<Output = Result<Response<Incoming>, hyper_util::client::legacy::Error>>,
    w: &mut Waits<'_, '_>,
    cfg: &ClientConfig,
) -> Result<Response<Incoming>, Failed> {
    tokio::pin!(request);
    tokio::select! {
        biased;
        _ = &mut w.cancelled => Err(Failed::Stopped(Cause::Cancelled, "cancelled while waiting for the response".into())),
        _ = &mut w.sleep, if w.armed.is_some() => {
            let cause = w.armed.map(|(_, c)| c).unwrap_or(Cause::TimeoutTotal);
            Err(Failed::Stopped(cause, timeout_message(cause, cfg)))
        }
        r = &mut request => r.map_err(Failed::Transport),
    }
}

/// An error status: reads a bounded body for the message, then stops.
async fn error_status(
    res: Response<Incoming>,
    w: &mut Waits<'_, '_>,
    mut rec: AttemptRecord<'_>,
) -> AttemptOutcome {
    let status = res.status();
    rec.retry_after = tpscope_stream::retry_after(
        status.as_u16(),
        res.headers().get(header::RETRY_AFTER).map(|v| v.as_bytes()),
        SystemTime::now(),
    );
    // The status decides the cause: a cancel, a timeout or a cut while
    // reading the rest of an error body does not change what the server said.
    let mut body = res.into_body();
    let mut buf = Vec::new();
    let cap = tokio::time::sleep(ERROR_BODY_WAIT);
    tokio::pin!(cap);
    loop {
        tokio::select! {
            biased;
            _ = &mut w.cancelled => break,
            _ = &mut w.sleep, if w.armed.is_some() => break,
            _ = &mut cap => break,
            f = body.frame() => match f {
                Some(Ok(frame)) => {
                    if let Some(d) = frame.data_ref() {
                        let room = ERROR_BODY_LIMIT.saturating_sub(buf.len());
                        buf.extend_from_slice(&d[..d.len().min(room)]);
                        rec.bytes_received += d.len() as u64;
                        if buf.len() >= ERROR_BODY_LIMIT {
                            break;
                        }
                    }
                }
                Some(Err(_)) | None => break,
            },
        }
    }
    let now = Instant::now();
    let (cause, message) = tpscope_stream::error_status(status.as_u16(), status, &buf);
    rec.finish(Some(cause), now, Some(message))
}

/// The body of a successful response and what reading it needs.
struct Body<'a, 'p, 'c> {
    body: Incoming,
    w: &'a mut Waits<'p, 'c>,
    rec: AttemptRecord<'a>,
    cfg: &'a ClientConfig,
    at: Stamps<'a>,
    /// Where tokens are counted as they stream, and how many were.
    live: Option<&'a LiveTokens>,
    live_reported: u64,
}

impl Body<'_, '_, '_> {
    /// A server that ignored `stream: true` and answered with one JSON body.
    async fn whole_answer(mut self) -> AttemptOutcome {
        let mut json_body = Vec::new();
        // The answer is complete with its last data read.
        let mut last_read = None;
        let body_res = loop {
            tokio::select! {
                biased;
                _ = &mut self.w.cancelled => break Err((Cause::Cancelled, "cancelled while reading the response".to_string())),
                _ = &mut self.w.sleep, if self.w.armed.is_some() => {
                    let now = Instant::now();
                    match self.w.deadlines.next(None, None) {
                        Some((at, cause)) if at <= now => break Err((cause, timeout_message(cause, self.cfg))),
                        other => self.w.arm(other),
                    }
                }
                f = self.body.frame() => match f {
                    Some(Ok(frame)) => {
                        if let Some(d) = frame.data_ref() {
                            self.rec.bytes_received += d.len() as u64;
                            if json_body.len() + d.len() > self.cfg.max_event_bytes {
                                break Err((Cause::Malformed, format!("response body larger than {} bytes", self.cfg.max_event_bytes)));
                            }
                            json_body.extend_from_slice(d);
                            last_read = Some(read_instant(self.at.rx, self.at.start));
                        }
                    }
                    Some(Err(e)) => break Err((Cause::Disconnect, format!("response body cut: {}", error_chain(&e)))),
                    None => break Ok(()),
                },
            }
        };
        let now = Instant::now();
        match body_res {
            Err((cause, msg)) => self.rec.finish(Some(cause), now, Some(msg)),
            Ok(()) => self.rec.whole_answer(&json_body, last_read.unwrap_or(now)),
        }
    }

    /// The event stream: the hot loop, one iteration per body read.
    async fn event_stream(mut self) -> AttemptOutcome {
        let mut parser = SseParser::with_limit(self.cfg.max_event_bytes);
        self.w.arm(self.w.deadlines.next(None, None));
        loop {
            let wake = tokio::select! {
                biased;
                _ = &mut self.w.cancelled => Wake::Cancelled,
                _ = &mut self.w.sleep, if self.w.armed.is_some() => Wake::Deadline,
                f = self.body.frame() => Wake::Frame(f),
            };
            match wake {
                Wake::Cancelled => {
                    return self.rec.finish(
                        Some(Cause::Cancelled),
                        Instant::now(),
                        Some("cancelled while streaming".into()),
                    );
                }
                Wake::Deadline => {
                    let now = Instant::now();
                    match self
                        .w
                        .deadlines
                        .next(self.rec.stream.first_token, self.rec.stream.last_event)
                    {
                        Some((at, cause)) if at <= now => {
                            return self.rec.finish(
                                Some(cause),
                                now,
                                Some(timeout_message(cause, self.cfg)),
                            );
                        }
                        // The sleep is re-armed lazily: a stall deadline moves with
                        // every event, and resetting the timer per chunk costs more
                        // than waking once to find it moved.
                        other => self.w.arm(other),
                    }
                }
                Wake::Frame(None) => {
                    // The body's end: its last read (the terminal chunk) is the
                    // cell's latest arrival.
                    let (at, now) = read_stamp(self.at.rx, self.at.start);
                    if self.at.rx.is_some() {
                        self.rec.rx.end_at = Some(at);
                    }
                    self.rec.stream.end_of_body(&mut parser, now);
                    return self.rec.finish_stream(now);
                }
                Wake::Frame(Some(Err(e))) => {
                    let now = Instant::now();
                    self.rec.stream.fail(
                        Cause::Disconnect,
                        format!("the stream broke: {}", error_chain(&e)),
                    );
                    return self.rec.finish_stream(now);
                }
                Wake::Frame(Some(Ok(frame))) => {
                    let Some(data) = frame.data_ref() else {
                        continue;
                    };
                    // One stamp per frame: the arrival of the read that brought
                    // its bytes (see `rx`); every event it completes shares it.
                    let mut fs = frame_stamp(self.at.rx, data, self.at.start);
                    // Stamps never go backwards: a frame not traced to its read
                    // took the connection's latest arrival, an upper bound.
                    if let Some(prev) = self.rec.stream.last_event {
                        fs.at = fs.at.max(prev);
                    }
                    let now = fs.at;
                    self.rec.bytes_received += data.len() as u64;
                    self.rec.body.keep(data);
                    let had_first = self.rec.stream.first_token.is_some();
                    let chunks_before = self.rec.stream.content_chunks;
                    self.rec.stream.push(&mut parser, data, now);
                    if let Some(live) = self.live {
                        // Usage may replace the chunk count (both only grow).
                        let t = self.rec.stream.tokens();
                        live.read(t.saturating_sub(self.live_reported), now);
                        self.live_reported = self.live_reported.max(t);
                    }
                    let first = !had_first && self.rec.stream.first_token.is_some();
                    if first {
                        self.rec.first_token_lag = Some(fs.received - now);
                    }
                    if self.at.rx.is_some() {
                        let chunks = self.rec.stream.content_chunks - chunks_before;
                        self.rec.rx.frame(&fs, chunks, first);
                    }
                    match self.rec.stream.end {
                        None => {
                            // Deadlines only move later with each event, except at
                            // the first token (first-token limit → stall limit).
                            if first {
                                self.w.arm(
                                    self.w.deadlines.next(
                                        self.rec.stream.first_token,
                                        self.rec.stream.last_event,
                                    ),
                                );
                            }
                        }
                        Some(StreamEnd::Done(at)) => {
                            if self.at.rx.is_some() {
                                self.rec.rx.end_at = Some(at);
                            }
                            // The client is done with the stream when it has read
                            // `[DONE]`, not when the kernel received it.
                            self.rec.stream.end = Some(StreamEnd::Done(fs.received));
                            drain(&mut self.body, self.w, fs.received).await;
                            return self.rec.finish_stream(fs.received);
                        }
                        Some(StreamEnd::Failed { .. }) => {
                            return self.rec.finish_stream(fs.received);
                        }
                    }
                }
            }
        }
    }
}

enum Wake {
    Cancelled,
    Deadline,
    Frame(Option<Result<hyper::body::Frame<Bytes>, hyper::Error>>),
}

/// Reads the body's end after `[DONE]` (at `done`) so the connection can be pooled.
async fn drain(body: &mut Incoming, w: &mut Waits<'_, '_>, done: Instant) {
    let drain_until = w
        .deadlines
        .total
        .map_or(done + DRAIN_LIMIT, |t| t.min(done + DRAIN_LIMIT));
    let _ = tokio::time::timeout_at(drain_until.into(), async {
        tokio::select! {
            biased;
            _ = &mut w.cancelled => {}
            _ = async { while let Some(Ok(_)) = body.frame().await {} } => {}
        }
    })
    .await;
}

/// The attempt's time limits as instants.
struct Deadlines {
    total: Option<Instant>,
    first_token: Option<Instant>,
    stall: Option<Duration>,
}

impl Deadlines {
    /// The earliest limit in force and the cause it ends the attempt with: the
    /// first-token limit until the first token, the stall limit after it.
    fn next(
        &self,
        first_token: Option<Instant>,
        last_event: Option<Instant>,
    ) -> Option<(Instant, Cause)> {
        let phase = match first_token {
            None => self.first_token.map(|t| (t, Cause::TimeoutFirstToken)),
            Some(ft) => self.stall.map(|s| {
                (
                    last_event.map_or(ft, |e| e.max(ft)) + s,
                    Cause::TimeoutStall,
                )
            }),
        };
        match (self.total.map(|t| (t, Cause::TimeoutTotal)), phase) {
            (Some(a), Some(b)) => Some(if b.0 < a.0 { b } else { a }),
            (a, b) => a.or(b),
        }
    }
}

fn timeout_message(cause: Cause, cfg: &ClientConfig) -> String {
    let t = &cfg.timeouts;
    match cause {
        Cause::TimeoutFirstToken => format!(
            "no output within the first-token timeout ({:?})",
            t.first_token.unwrap_or_default()
        ),
        Cause::TimeoutStall => format!(
            "no chunk within the stall timeout ({:?})",
            t.stall.unwrap_or_default()
        ),
        Cause::TimeoutTotal => format!(
            "the attempt passed the total timeout ({:?})",
            t.total.unwrap_or_default()
        ),
        Cause::TimeoutConnect => format!(
            "connecting took longer than {:?}",
            t.connect.unwrap_or_default()
        ),
        other => other.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn deadlines_switch_from_first_token_to_stall() {
        let t0 = Instant::now();
        let d = Deadlines {
            total: Some(t0 + Duration::from_secs(10)),
            first_token: Some(t0 + Duration::from_secs(2)),
            stall: Some(Duration::from_millis(500)),
        };
        assert_eq!(
            d.next(None, None),
            Some((t0 + Duration::from_secs(2), Cause::TimeoutFirstToken))
        );
        let ft = t0 + Duration::from_secs(1);
        assert_eq!(
            d.next(Some(ft), Some(ft)),
            Some((ft + Duration::from_millis(500), Cause::TimeoutStall))
        );
        let late = t0 + Duration::from_millis(9_800);
        assert_eq!(
            d.next(Some(ft), Some(late)),
            Some((t0 + Duration::from_secs(10), Cause::TimeoutTotal))
        );
        let none = Deadlines {
            total: None,
            first_token: None,
            stall: None,
        };
        assert_eq!(none.next(None, None), None);
    }
}
