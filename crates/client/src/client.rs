//! The HTTP client: sends one streaming request attempt to an OpenAI-compatible
//! server over a pooled hyper connection and stamps its times. Failures come back
//! as data (an [`AttemptOutcome`] with a [`Cause`]), never as errors or panics.
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

use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime};

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::body::Incoming;
use hyper::header::{self, HeaderMap, HeaderName, HeaderValue};
use hyper::{Method, Request, Response, StatusCode, Uri};
use hyper_util::client::legacy::Client as HyperClient;
use hyper_util::rt::{TokioExecutor, TokioTimer};
use serde::Serialize;
use serde::ser::{SerializeMap, Serializer as _};
use tokio_util::sync::CancellationToken;
use tpscope_model::{Attempt, Cause, ChunkMark, RunClock, Timestamp};

use crate::chunk::{self, Usage};
use crate::config::{Api, ClientConfig, Endpoint, Prompt, RequestSpec};
use crate::connector::{ConnTag, ConnectError, Connector, tls_config};
use crate::rx::{read_instant, read_stamp};
use crate::sse::SseParser;
use crate::stream::{StreamEnd, StreamState};

/// Largest error body read to find the server's message.
const ERROR_BODY_LIMIT: usize = 64 << 10;
/// Longest wait for the rest of an error body once its status is known.
const ERROR_BODY_WAIT: Duration = Duration::from_secs(5);
/// How long to keep reading after `[DONE]` for the body's end, so the connection
/// can go back to the pool (usually the end arrives in the same read).
const DRAIN_LIMIT: Duration = Duration::from_secs(1);
/// The total limit of `list_models` when no total timeout is configured.
const LIST_MODELS_LIMIT: Duration = Duration::from_secs(30);

/// A configuration problem found by [`Client::new`], or a failed `list_models`.
#[derive(Debug, thiserror::Error)]
pub enum ClientError {
    /// The base URL is not a usable `http(s)://host[:port][/path]` URL.
    #[error("invalid base URL `{url}`: {reason}")]
    InvalidUrl {
        /// The URL as given.
        url: String,
        /// What is wrong with it.
        reason: String,
    },
    /// An extra header (or the API key) is not a valid HTTP header.
    #[error("invalid header `{name}`: {reason}")]
    InvalidHeader {
        /// The header name (never the value, which may be a credential).
        name: String,
        /// What is wrong with it.
        reason: String,
    },
    /// The TLS configuration could not be built.
    #[error("TLS setup failed: {0}")]
    Tls(String),
    /// A request (`list_models`) failed.
    #[error("{what} failed ({cause}{}): {message}", status.map(|s| format!(", HTTP {s}")).unwrap_or_default())]
    Request {
        /// What was asked (e.g. `GET /v1/models`).
        what: String,
        /// The failure cause (closed list).
        cause: Cause,
        /// The HTTP status, when a response arrived.
        status: Option<u16>,
        /// What went wrong.
        message: String,
    },
}

/// Everything one attempt produced. `attempt.cause` is `None` iff the attempt ended
/// ok (the stream's `[DONE]` arrived, or a complete non-streaming answer).
#[derive(Clone, Debug, PartialEq)]
pub struct AttemptOutcome {
    /// The attempt record: `started_at` (the request was handed to the pool),
    /// `first_byte_at` (the response head had arrived and was parsed),
    /// `first_token_at` (the read that completed the first event carrying non-empty
    /// output or reasoning text), `ended_at` (the read that completed `[DONE]`, or
    /// when the failure was seen), `http_status`, `cause`, `tokens` (usage's
    /// `completion_tokens` when the server sent usage, else `content_chunks`),
    /// `connection_reused`, `connect_time` (only when this attempt waited for the
    /// connection to be opened). `backoff` is left `None`.
    pub attempt: Attempt,
    /// The read that completed the last event carrying output.
    pub last_token_at: Option<Timestamp>,
    /// The read that completed the first event carrying non-empty answer text
    /// (content, refusal, tool call; not reasoning). Equals `first_token_at` for
    /// models that do not stream reasoning.
    pub first_content_at: Option<Timestamp>,
    /// The server's token counts (the last value of each field it sent).
    pub usage: Option<Usage>,
    /// Events that carried non-empty output or reasoning text.
    pub content_chunks: u64,
    /// Output and reasoning text received, unescaped, in arrival order (empty when
    /// `ClientConfig::keep_text` is off); for counting tokens after the stream.
    pub text: String,
    /// One mark per content chunk when `record_chunks`: offset from
    /// `first_token_at` (events completed by one read share its instant), and
    /// tokens (the growth of `usage.completion_tokens` when the server sends usage
    /// on every chunk, else 1).
    pub chunks: Option<Vec<ChunkMark>>,
    /// The server's `Retry-After` on a 429 or 503 (seconds or an HTTP date).
    pub retry_after: Option<Duration>,
    /// What went wrong, for failed attempts (server message or transport error;
    /// never prompt text or credentials).
    pub error_message: Option<String>,
    /// The response `id`.
    pub response_id: Option<String>,
    /// The first `finish_reason` the server sent (`stop`, `length`, …).
    pub finish_reason: Option<String>,
    /// Response body bytes received (after HTTP framing).
    pub bytes_received: u64,
    /// SSE data events received (`[DONE]` included).
    pub events: u64,
    /// The id of the connection the response came on (numbered from 1 per
    /// client, in the order connections were opened); `None` when no response
    /// head arrived.
    pub connection_id: Option<u64>,
    /// How long after the first token's bytes arrived (as stamped in
    /// `first_token_at`) the attempt's task received them from the connection:
    /// the client's own delay that kernel receive timestamps keep out of
    /// `first_token_at`. Zero with user-side stamps (with kernel stamps, a read
    /// the kernel did not stamp counts from when hyper's connection task read
    /// it); `None` without a first token, or for a non-streaming answer.
    pub first_token_lag: Option<Duration>,
}

impl AttemptOutcome {
    /// Whether the attempt ended ok.
    pub fn is_ok(&self) -> bool {
        self.attempt.cause.is_none()
    }

    /// The failure cause, if any.
    pub fn cause(&self) -> Option<Cause> {
        self.attempt.cause
    }
}

struct Inner {
    http: HyperClient<Connector, Full<Bytes>>,
    endpoint: Endpoint,
    config: ClientConfig,
    request_uri: Uri,
    models_uri: Uri,
    post_headers: HeaderMap,
    get_headers: HeaderMap,
}

/// An OpenAI-compatible streaming client over a shared connection pool. Cheap to
/// clone (an `Arc`); clones share the pool.
#[derive(Clone)]
pub struct Client {
    inner: Arc<Inner>,
}

impl std::fmt::Debug for Client {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Client")
            .field("endpoint", &self.inner.endpoint)
            .field("config", &self.inner.config)
            .finish()
    }
}

fn bad_url(url: &str, reason: impl Into<String>) -> ClientError {
    ClientError::InvalidUrl {
        url: url.to_string(),
        reason: reason.into(),
    }
}

impl Client {
    /// Validates the endpoint and builds the client (no connection is opened yet).
    pub fn new(endpoint: Endpoint, config: ClientConfig) -> Result<Client, ClientError> {
        let url = endpoint.base_url.trim();
        let base = url.trim_end_matches('/');
        let https = if base.starts_with("https://") {
            true
        } else if base.starts_with("http://") {
            false
        } else {
            return Err(bad_url(url, "expected http:// or https://"));
        };
        let authority = base
            .split("://")
            .nth(1)
            .unwrap_or("")
            .split('/')
            .next()
            .unwrap_or("");
        if authority.is_empty() {
            return Err(bad_url(url, "no host"));
        }
        if authority.contains('@') {
            return Err(bad_url(
                url,
                "credentials in the URL are not supported; give an API key instead",
            ));
        }
        if base.contains('?') || base.contains('#') {
            return Err(bad_url(url, "a base URL has no query or fragment"));
        }
        let parse = |path: &str| -> Result<Uri, ClientError> {
            format!("{base}{path}")
                .parse::<Uri>()
                .map_err(|e| bad_url(url, e.to_string()))
        };
        let request_uri = parse(endpoint.api.path())?;
        let models_uri = parse("/models")?;

        let mut get_headers = HeaderMap::new();
        get_headers.insert(header::ACCEPT, HeaderValue::from_static("application/json"));
        get_headers.insert(
            header::USER_AGENT,
            HeaderValue::from_static(concat!("tpscope/", env!("CARGO_PKG_VERSION"))),
        );
        if let Some(key) = &endpoint.api_key {
            let mut v = HeaderValue::from_str(&format!("Bearer {}", key.trim())).map_err(|_| {
                ClientError::InvalidHeader {
                    name: "authorization".into(),
                    reason: "the API key holds characters not allowed in a header".into(),
                }
            })?;
            v.set_sensitive(true);
            get_headers.insert(header::AUTHORIZATION, v);
        }
        let mut post_headers = get_headers.clone();
        post_headers.insert(
            header::ACCEPT,
            HeaderValue::from_static("text/event-stream"),
        );
        post_headers.insert(
            header::CONTENT_TYPE,
            HeaderValue::from_static("application/json"),
        );
        for (name, value) in &endpoint.headers {
            let n = HeaderName::from_bytes(name.trim().as_bytes()).map_err(|_| {
                ClientError::InvalidHeader {
                    name: name.clone(),
                    reason: "not a valid header name".into(),
                }
            })?;
            let mut v =
                HeaderValue::from_str(value.trim()).map_err(|_| ClientError::InvalidHeader {
                    name: name.clone(),
                    reason: "the value holds characters not allowed in a header".into(),
                })?;
            v.set_sensitive(true);
            post_headers.insert(n.clone(), v.clone());
            get_headers.insert(n, v);
        }

        let tls = if https {
            Some(tls_config(config.http2, &config.extra_root_certs_der).map_err(ClientError::Tls)?)
        } else {
            None
        };
        let connector = Connector::new(
            tls,
            config.timeouts.connect,
            config.tcp_nodelay,
            config.rx_timestamps,
        );
        let mut builder = HyperClient::builder(TokioExecutor::new());
        builder
            .pool_timer(TokioTimer::new())
            .timer(TokioTimer::new())
            .pool_idle_timeout(config.pool_idle_timeout)
            .pool_max_idle_per_host(config.pool_max_idle_per_host)
            .http2_only(config.http2_prior_knowledge);
        let http = builder.build(connector);
        Ok(Client {
            inner: Arc::new(Inner {
                http,
                endpoint,
                config,
                request_uri,
                models_uri,
                post_headers,
                get_headers,
            }),
        })
    }

    /// The endpoint this client calls.
    pub fn endpoint(&self) -> &Endpoint {
        &self.inner.endpoint
    }

    /// The client settings.
    pub fn config(&self) -> &ClientConfig {
        &self.inner.config
    }

    /// The URL requests are posted to (`{base}/chat/completions` or
    /// `{base}/completions`).
    pub fn request_url(&self) -> String {
        self.inner.request_uri.to_string()
    }

    /// `GET {base}/models`: the ids in the OpenAI `{"data": [{"id": …}]}` answer.
    /// Bounded by the total timeout (30 s when none is set).
    pub async fn list_models(&self) -> Result<Vec<String>, ClientError> {
        let what = format!("GET {}", self.inner.models_uri.path());
        let fail = |cause: Cause, status: Option<u16>, message: String| ClientError::Request {
            what: what.clone(),
            cause,
            status,
            message,
        };
        let limit = self
            .inner
            .config
            .timeouts
            .total
            .unwrap_or(LIST_MODELS_LIMIT);
        let mut req = Request::new(Full::new(Bytes::new()));
        *req.method_mut() = Method::GET;
        *req.uri_mut() = self.inner.models_uri.clone();
        *req.headers_mut() = self.inner.get_headers.clone();
        let work = async {
            let res = self.inner.http.request(req).await.map_err(|e| {
                let (cause, msg) = transport_failure(&e);
                fail(cause, None, msg)
            })?;
            let status = res.status();
            let body = read_limited(res.into_body(), self.inner.config.max_event_bytes)
                .await
                .map_err(|(cause, msg)| fail(cause, Some(status.as_u16()), msg))?;
            if !status.is_success() {
                let cause = Cause::from_http_status(status.as_u16()).unwrap_or(Cause::Http4xx);
                let msg = chunk::error_body_message(&body).unwrap_or_else(|| status.to_string());
                return Err(fail(cause, Some(status.as_u16()), msg));
            }
            parse_models(&body).map_err(|m| fail(Cause::Malformed, Some(status.as_u16()), m))
        };
        match tokio::time::timeout(limit, work).await {
            Ok(r) => r,
            Err(_) => Err(fail(
                Cause::TimeoutTotal,
                None,
                format!("no answer within {limit:?}"),
            )),
        }
    }

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
        let body = request_body(&inner.endpoint, spec);
        let mut req = Request::new(Full::new(Bytes::from(body)));
        *req.method_mut() = Method::POST;
        *req.uri_mut() = inner.request_uri.clone();
        *req.headers_mut() = inner.post_headers.clone();

        let start = Instant::now();
        let mut rec = Recorder::new(clock, start, cfg);
        if cancel.is_cancelled() {
            return rec.finish(
                Some(Cause::Cancelled),
                start,
                Some("cancelled before sending".into()),
            );
        }
        let deadlines = Deadlines {
            total: cfg.timeouts.total.map(|d| start + d),
            first_token: cfg.timeouts.first_token.map(|d| start + d),
            stall: cfg.timeouts.stall,
        };
        // A child token: polling it locks only its own node, not the parent that
        // a whole run's attempts may share.
        let cancel = cancel.child_token();
        let cancelled = cancel.cancelled();
        tokio::pin!(cancelled);
        let sleep = tokio::time::sleep_until(tokio::time::Instant::from_std(start));
        tokio::pin!(sleep);

        // 1. The response head.
        let mut armed = deadlines.next(None, None);
        if let Some((at, _)) = armed {
            sleep.as_mut().reset(at.into());
        }
        let request = inner.http.request(req);
        tokio::pin!(request);
        let mut res: Response<Incoming> = tokio::select! {
            biased;
            _ = &mut cancelled => {
                return rec.finish(Some(Cause::Cancelled), Instant::now(), Some("cancelled while waiting for the response".into()));
            }
            _ = &mut sleep, if armed.is_some() => {
                let cause = armed.map(|(_, c)| c).unwrap_or(Cause::TimeoutTotal);
                return rec.finish(Some(cause), Instant::now(), Some(timeout_message(cause, cfg)));
            }
            r = &mut request => match r {
                Ok(res) => res,
                Err(e) => {
                    let (cause, msg) = transport_failure(&e);
                    if matches!(cause, Cause::Connect | Cause::TimeoutConnect) {
                        rec.attempt.connection_reused = Some(false);
                    }
                    return rec.finish(Some(cause), Instant::now(), Some(msg));
                }
            },
        };
        // The tag is taken out of the response (nothing else reads it) and kept for
        // the connection's arrival cell, which stamps every read below.
        let conn = res.extensions_mut().remove::<ConnTag>().map(|ConnTag(c)| c);
        let rx = conn.as_ref().and_then(|c| c.rx.as_deref());
        let head_at = read_instant(rx, start);
        rec.attempt.first_byte_at = Some(clock.at(head_at));
        let status = res.status();
        rec.attempt.http_status = Some(status.as_u16());
        if let Some(info) = &conn {
            let reused = info.claim();
            rec.connection_id = Some(info.id);
            rec.attempt.connection_reused = Some(reused);
            // A fresh connection opened before this attempt started was opened for
            // another request (which then got a pooled one): this attempt did not
            // wait for it.
            if !reused && info.opened_at >= start {
                rec.attempt.connect_time = Some(info.connect_time);
            }
        }
        let json_answer = res
            .headers()
            .get(header::CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
            .is_some_and(|ct| ct.trim_start().starts_with("application/json"));

        // 2. Error statuses: read a bounded body for the message, then stop.
        if !status.is_success() {
            if matches!(
                status,
                StatusCode::TOO_MANY_REQUESTS | StatusCode::SERVICE_UNAVAILABLE
            ) {
                rec.retry_after = res
                    .headers()
                    .get(header::RETRY_AFTER)
                    .and_then(|v| parse_retry_after(v.as_bytes(), SystemTime::now()));
            }
            let cause = Cause::from_http_status(status.as_u16()).unwrap_or(Cause::Http4xx);
            // The status decides the cause: a cancel, a timeout or a cut while
            // reading the rest of an error body does not change what the server said.
            let mut body = res.into_body();
            let mut buf = Vec::new();
            let cap = tokio::time::sleep(ERROR_BODY_WAIT);
            tokio::pin!(cap);
            loop {
                tokio::select! {
                    biased;
                    _ = &mut cancelled => break,
                    _ = &mut sleep, if armed.is_some() => break,
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
            let base = chunk::error_body_message(&buf).unwrap_or_default();
            let message = if base.is_empty() {
                format!("HTTP {status}")
            } else {
                format!("HTTP {status}: {base}")
            };
            return rec.finish(Some(cause), now, Some(message));
        }

        let mut body = res.into_body();
        // 3. A server that ignored `stream: true` and answered with one JSON body.
        if json_answer {
            let mut json_body = Vec::new();
            // The answer is complete with its last data read.
            let mut last_read = None;
            let body_res = loop {
                tokio::select! {
                    biased;
                    _ = &mut cancelled => break Err((Cause::Cancelled, "cancelled while reading the response".to_string())),
                    _ = &mut sleep, if armed.is_some() => {
                        let now = Instant::now();
                        match deadlines.next(None, None) {
                            Some((at, cause)) if at <= now => break Err((cause, timeout_message(cause, cfg))),
                            other => { armed = other; if let Some((at, _)) = armed { sleep.as_mut().reset(at.into()); } }
                        }
                    }
                    f = body.frame() => match f {
                        Some(Ok(frame)) => {
                            if let Some(d) = frame.data_ref() {
                                rec.bytes_received += d.len() as u64;
                                if json_body.len() + d.len() > cfg.max_event_bytes {
                                    break Err((Cause::Malformed, format!("response body larger than {} bytes", cfg.max_event_bytes)));
                                }
                                json_body.extend_from_slice(d);
                                last_read = Some(read_instant(rx, start));
                            }
                        }
                        Some(Err(e)) => break Err((Cause::Disconnect, format!("response body cut: {}", error_chain(&e)))),
                        None => break Ok(()),
                    },
                }
            };
            let now = Instant::now();
            return match body_res {
                Err((cause, msg)) => rec.finish(Some(cause), now, Some(msg)),
                Ok(()) => rec.whole_answer(&json_body, last_read.unwrap_or(now)),
            };
        }

        // 4. The event stream: the hot loop.
        let mut parser = SseParser::with_limit(cfg.max_event_bytes);
        armed = deadlines.next(None, None);
        if let Some((at, _)) = armed {
            sleep.as_mut().reset(at.into());
        }
        loop {
            let wake = tokio::select! {
                biased;
                _ = &mut cancelled => Wake::Cancelled,
                _ = &mut sleep, if armed.is_some() => Wake::Deadline,
                f = body.frame() => Wake::Frame(f),
            };
            match wake {
                Wake::Cancelled => {
                    return rec.finish(
                        Some(Cause::Cancelled),
                        Instant::now(),
                        Some("cancelled while streaming".into()),
                    );
                }
                Wake::Deadline => {
                    let now = Instant::now();
                    match deadlines.next(rec.stream.first_token, rec.stream.last_event) {
                        Some((at, cause)) if at <= now => {
                            return rec.finish(Some(cause), now, Some(timeout_message(cause, cfg)));
                        }
                        // The sleep is re-armed lazily: a stall deadline moves with
                        // every event, and resetting the timer per chunk costs more
                        // than waking once to find it moved.
                        other => {
                            armed = other;
                            if let Some((at, _)) = armed {
                                sleep.as_mut().reset(at.into());
                            }
                        }
                    }
                }
                Wake::Frame(None) => {
                    let now = Instant::now();
                    rec.stream.end_of_body(&mut parser, now);
                    return rec.finish_stream(now);
                }
                Wake::Frame(Some(Err(e))) => {
                    let now = Instant::now();
                    rec.stream.fail(
                        Cause::Disconnect,
                        format!("the stream broke: {}", error_chain(&e)),
                    );
                    return rec.finish_stream(now);
                }
                Wake::Frame(Some(Ok(frame))) => {
                    let Some(data) = frame.data_ref() else {
                        continue;
                    };
                    // One stamp per read: every event this read completes shares it.
                    let (now, received) = read_stamp(rx, start);
                    rec.bytes_received += data.len() as u64;
                    let had_first = rec.stream.first_token.is_some();
                    rec.stream.push(&mut parser, data, now);
                    if !had_first && rec.stream.first_token.is_some() {
                        rec.first_token_lag = Some(received - now);
                    }
                    match rec.stream.end {
                        None => {
                            // Deadlines only move later with each event, except at
                            // the first token (first-token limit → stall limit).
                            if !had_first && rec.stream.first_token.is_some() {
                                armed =
                                    deadlines.next(rec.stream.first_token, rec.stream.last_event);
                                if let Some((at, _)) = armed {
                                    sleep.as_mut().reset(at.into());
                                }
                            }
                        }
                        Some(StreamEnd::Done(at)) => {
                            // Read the body's end so the connection can be pooled.
                            let drain_until = deadlines
                                .total
                                .map_or(at + DRAIN_LIMIT, |t| t.min(at + DRAIN_LIMIT));
                            let _ = tokio::time::timeout_at(drain_until.into(), async {
                                tokio::select! {
                                    biased;
                                    _ = &mut cancelled => {}
                                    _ = async { while let Some(Ok(_)) = body.frame().await {} } => {}
                                }
                            })
                            .await;
                            return rec.finish_stream(now);
                        }
                        Some(StreamEnd::Failed { .. }) => return rec.finish_stream(now),
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

/// The attempt being recorded.
struct Recorder<'c> {
    clock: &'c RunClock,
    attempt: Attempt,
    stream: StreamState,
    retry_after: Option<Duration>,
    bytes_received: u64,
    connection_id: Option<u64>,
    first_token_lag: Option<Duration>,
}

impl<'c> Recorder<'c> {
    fn new(clock: &'c RunClock, start: Instant, cfg: &ClientConfig) -> Self {
        let t = clock.at(start);
        Recorder {
            clock,
            attempt: Attempt {
                started_at: t,
                first_byte_at: None,
                first_token_at: None,
                ended_at: t,
                http_status: None,
                cause: None,
                tokens: 0,
                connection_reused: None,
                connect_time: None,
                backoff: None,
            },
            stream: StreamState::new(cfg.keep_text, cfg.record_chunks),
            retry_after: None,
            bytes_received: 0,
            connection_id: None,
            first_token_lag: None,
        }
    }

    /// A complete non-streaming answer.
    fn whole_answer(mut self, body: &[u8], now: Instant) -> AttemptOutcome {
        match chunk::parse_response(body) {
            Err(e) => self.finish(
                Some(Cause::Malformed),
                now,
                Some(format!("response does not parse: {}", e.0)),
            ),
            Ok(c) => {
                if let Some(err) = c.server_error() {
                    return self.finish(Some(err.cause), now, Some(err.message));
                }
                self.stream.events += 1;
                self.stream.absorb(&c, now);
                self.finish(None, now, None)
            }
        }
    }

    /// Ends the attempt as the stream's end says (`ended` is when the failure was
    /// seen; a `[DONE]` carries its own instant).
    fn finish_stream(mut self, ended: Instant) -> AttemptOutcome {
        match self.stream.end.take() {
            Some(StreamEnd::Done(at)) => self.finish(None, at, None),
            Some(StreamEnd::Failed { cause, message }) => {
                self.finish(Some(cause), ended, Some(message))
            }
            None => self.finish(
                Some(Cause::Disconnect),
                ended,
                Some("the stream ended without data: [DONE]".into()),
            ),
        }
    }

    fn finish(
        self,
        cause: Option<Cause>,
        ended: Instant,
        message: Option<String>,
    ) -> AttemptOutcome {
        let clock = self.clock;
        let st = self.stream;
        let mut attempt = self.attempt;
        attempt.ended_at = clock.at(ended);
        attempt.cause = cause;
        attempt.first_token_at = st.first_token.map(|t| clock.at(t));
        attempt.tokens = st.tokens();
        AttemptOutcome {
            attempt,
            last_token_at: st.last_token.map(|t| clock.at(t)),
            first_content_at: st.first_content.map(|t| clock.at(t)),
            usage: st.usage,
            content_chunks: st.content_chunks,
            text: st.text,
            chunks: st.chunks,
            retry_after: self.retry_after,
            error_message: if cause.is_some() { message } else { None },
            response_id: st.response_id,
            finish_reason: st.finish_reason,
            bytes_received: self.bytes_received,
            events: st.events,
            connection_id: self.connection_id,
            first_token_lag: self.first_token_lag,
        }
    }
}

/// The cause and message of a request that got no response head.
fn transport_failure(e: &hyper_util::client::legacy::Error) -> (Cause, String) {
    let mut src: Option<&(dyn std::error::Error + 'static)> = Some(e);
    while let Some(s) = src {
        if let Some(ce) = s.downcast_ref::<ConnectError>() {
            return match ce {
                ConnectError::Timeout(_) => (Cause::TimeoutConnect, ce.to_string()),
                _ => (Cause::Connect, ce.to_string()),
            };
        }
        src = s.source();
    }
    if e.is_connect() {
        return (Cause::Connect, error_chain(e));
    }
    // The connection broke before a response head arrived (e.g. the server closed
    // a pooled connection, or reset it).
    (
        Cause::Disconnect,
        format!("no response: {}", error_chain(e)),
    )
}

/// An error and its sources, joined with `: `.
fn error_chain(e: &(dyn std::error::Error + 'static)) -> String {
    let mut s = e.to_string();
    let mut src = e.source();
    while let Some(x) = src {
        let t = x.to_string();
        if !s.contains(&t) {
            s.push_str(": ");
            s.push_str(&t);
        }
        src = x.source();
    }
    s
}

/// Reads a whole body of at most `limit` bytes.
async fn read_limited(mut body: Incoming, limit: usize) -> Result<Vec<u8>, (Cause, String)> {
    let mut buf = Vec::new();
    while let Some(frame) = body.frame().await {
        let frame =
            frame.map_err(|e| (Cause::Disconnect, format!("body cut: {}", error_chain(&e))))?;
        if let Some(d) = frame.data_ref() {
            if buf.len() + d.len() > limit {
                return Err((Cause::Malformed, format!("body larger than {limit} bytes")));
            }
            buf.extend_from_slice(d);
        }
    }
    Ok(buf)
}

fn parse_models(body: &[u8]) -> Result<Vec<String>, String> {
    #[derive(serde::Deserialize)]
    struct List {
        data: Vec<Model>,
    }
    #[derive(serde::Deserialize)]
    struct Model {
        id: String,
    }
    serde_json::from_slice::<List>(body)
        .map(|l| l.data.into_iter().map(|m| m.id).collect())
        .map_err(|e| format!("expected {{\"data\": [{{\"id\": …}}]}}: {e}"))
}

/// Parses `Retry-After`: delay-seconds (a decimal number is accepted too) or an
/// HTTP date (a date in the past gives zero).
pub fn parse_retry_after(value: &[u8], now: SystemTime) -> Option<Duration> {
    let s = std::str::from_utf8(value).ok()?.trim();
    if let Ok(secs) = s.parse::<u64>() {
        return Some(Duration::from_secs(secs));
    }
    if let Ok(secs) = s.parse::<f64>() {
        return Duration::try_from_secs_f64(secs).ok();
    }
    let at = httpdate::parse_http_date(s).ok()?;
    Some(at.duration_since(now).unwrap_or(Duration::ZERO))
}

#[derive(Serialize)]
struct WireMessage<'a> {
    role: &'a str,
    content: &'a str,
}

/// The JSON body of one request: `model`, `messages` (chat) or `prompt`
/// (completions), `max_tokens`, `stream: true`, `stream_options.include_usage`
/// when asked, then the endpoint's extra fields (which replace tpscope's own of the
/// same name).
pub fn request_body(endpoint: &Endpoint, spec: &RequestSpec) -> Vec<u8> {
    let mut out = Vec::with_capacity(192 + prompt_len(&spec.prompt));
    let extra = &endpoint.extra_body;
    let mut ser = serde_json::Serializer::new(&mut out);
    // Serialising strings, numbers and `serde_json::Value`s into a Vec cannot fail.
    let result = (|| -> Result<(), serde_json::Error> {
        let mut map = ser.serialize_map(None)?;
        if !extra.contains_key("model") {
            map.serialize_entry("model", &endpoint.model)?;
        }
        match (endpoint.api, &spec.prompt) {
            (Api::Chat, Prompt::Text(t)) if !extra.contains_key("messages") => {
                map.serialize_entry(
                    "messages",
                    &[WireMessage {
                        role: "user",
                        content: t,
                    }],
                )?;
            }
            (Api::Chat, Prompt::Messages(ms)) if !extra.contains_key("messages") => {
                let wire: Vec<WireMessage<'_>> = ms
                    .iter()
                    .map(|m| WireMessage {
                        role: &m.role,
                        content: &m.content,
                    })
                    .collect();
                map.serialize_entry("messages", &wire)?;
            }
            (Api::Completions, Prompt::Text(t)) if !extra.contains_key("prompt") => {
                map.serialize_entry("prompt", t)?;
            }
            (Api::Completions, Prompt::Messages(ms)) if !extra.contains_key("prompt") => {
                let joined: Vec<&str> = ms.iter().map(|m| m.content.as_str()).collect();
                map.serialize_entry("prompt", &joined.join("\n\n"))?;
            }
            _ => {}
        }
        if let Some(n) = spec.max_tokens
            && !extra.contains_key("max_tokens")
        {
            map.serialize_entry("max_tokens", &n)?;
        }
        if !extra.contains_key("stream") {
            map.serialize_entry("stream", &true)?;
        }
        if endpoint.include_usage && !extra.contains_key("stream_options") {
            map.serialize_entry(
                "stream_options",
                &serde_json::json!({"include_usage": true}),
            )?;
        }
        for (k, v) in extra {
            map.serialize_entry(k, v)?;
        }
        map.end()
    })();
    debug_assert!(result.is_ok());
    out
}

fn prompt_len(p: &Prompt) -> usize {
    match p {
        Prompt::Text(t) => t.len(),
        Prompt::Messages(ms) => ms.iter().map(|m| m.content.len() + m.role.len() + 32).sum(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::Message;

    #[test]
    fn retry_after_seconds_and_dates() {
        let now = SystemTime::UNIX_EPOCH + Duration::from_secs(1_000_000_000);
        assert_eq!(parse_retry_after(b"7", now), Some(Duration::from_secs(7)));
        assert_eq!(
            parse_retry_after(b" 1.5 ", now),
            Some(Duration::from_millis(1500))
        );
        let later = httpdate::fmt_http_date(now + Duration::from_secs(30));
        assert_eq!(
            parse_retry_after(later.as_bytes(), now),
            Some(Duration::from_secs(30))
        );
        let earlier = httpdate::fmt_http_date(now - Duration::from_secs(30));
        assert_eq!(
            parse_retry_after(earlier.as_bytes(), now),
            Some(Duration::ZERO)
        );
        assert_eq!(parse_retry_after(b"soon", now), None);
        assert_eq!(parse_retry_after(b"-3", now), None);
    }

    #[test]
    fn chat_body_has_messages_stream_usage_and_extra_fields() {
        let mut ep = Endpoint::new("http://h/v1", Api::Chat, "m");
        ep.extra_body
            .insert("ignore_eos".into(), serde_json::Value::Bool(true));
        ep.extra_body
            .insert("max_tokens".into(), serde_json::json!(9));
        let spec = RequestSpec {
            prompt: Prompt::Messages(vec![
                Message {
                    role: "system".into(),
                    content: "be brief".into(),
                },
                Message {
                    role: "user".into(),
                    content: "hi \"there\"".into(),
                },
            ]),
            max_tokens: Some(5),
        };
        let v: serde_json::Value = serde_json::from_slice(&request_body(&ep, &spec)).unwrap();
        assert_eq!(
            v,
            serde_json::json!({
                "model": "m",
                "messages": [{"role": "system", "content": "be brief"}, {"role": "user", "content": "hi \"there\""}],
                "stream": true,
                "stream_options": {"include_usage": true},
                "ignore_eos": true,
                "max_tokens": 9,
            })
        );
    }

    #[test]
    fn completions_body_has_prompt_and_max_tokens() {
        let mut ep = Endpoint::new("http://h/v1", Api::Completions, "m");
        ep.include_usage = false;
        let spec = RequestSpec {
            prompt: Prompt::Text("once".into()),
            max_tokens: Some(3),
        };
        let v: serde_json::Value = serde_json::from_slice(&request_body(&ep, &spec)).unwrap();
        assert_eq!(
            v,
            serde_json::json!({"model": "m", "prompt": "once", "max_tokens": 3, "stream": true})
        );
        let spec = RequestSpec {
            prompt: Prompt::Messages(vec![
                Message {
                    role: "user".into(),
                    content: "a".into(),
                },
                Message {
                    role: "user".into(),
                    content: "b".into(),
                },
            ]),
            max_tokens: None,
        };
        let v: serde_json::Value = serde_json::from_slice(&request_body(&ep, &spec)).unwrap();
        assert_eq!(v["prompt"], "a\n\nb");
    }

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

    #[test]
    fn bad_urls_and_headers_are_rejected_with_names() {
        let cfg = ClientConfig::default();
        for url in [
            "ftp://x/v1",
            "http://",
            "http://u:p@h/v1",
            "http://h/v1?x=1",
            "localhost:8000/v1",
        ] {
            let e = Client::new(Endpoint::new(url, Api::Chat, "m"), cfg.clone()).unwrap_err();
            assert!(matches!(e, ClientError::InvalidUrl { .. }), "{url}: {e}");
        }
        let mut ep = Endpoint::new("http://h:1/v1/", Api::Chat, "m");
        ep.headers.push(("bad header".into(), "v".into()));
        let e = Client::new(ep, cfg.clone()).unwrap_err();
        assert!(e.to_string().contains("bad header"), "{e}");
        let mut ep = Endpoint::new("http://h:1/v1/", Api::Chat, "m");
        ep.api_key = Some("sk-secret\n".into());
        ep.headers.push(("x-key".into(), "line\nbreak".into()));
        let e = Client::new(ep, cfg.clone()).unwrap_err();
        assert!(!e.to_string().contains("line"), "{e}");
        let c = Client::new(Endpoint::new("http://h:1/v1/", Api::Completions, "m"), cfg).unwrap();
        assert_eq!(c.request_url(), "http://h:1/v1/completions");
    }

    #[test]
    fn debug_output_hides_credentials() {
        let mut ep = Endpoint::new("http://h/v1", Api::Chat, "m");
        ep.api_key = Some("sk-secret".into());
        ep.headers.push(("x-api-key".into(), "hidden-value".into()));
        let c = Client::new(ep, ClientConfig::default()).unwrap();
        let s = format!("{c:?}");
        assert!(
            !s.contains("sk-secret") && !s.contains("hidden-value"),
            "{s}"
        );
        assert!(s.contains("x-api-key"));
    }
}
