//! The HTTP client: one [`Client`] per endpoint over a shared hyper connection
//! pool, built from a validated endpoint (URL, headers, TLS); `list_models`, and
//! the transport-error wording shared with the attempt (module `attempt`, which
//! sends one streaming request and stamps its times).

use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::body::Incoming;
use hyper::header::{self, HeaderMap, HeaderName, HeaderValue};
use hyper::{Method, Request, Uri};
use hyper_util::client::legacy::Client as HyperClient;
use hyper_util::rt::{TokioExecutor, TokioTimer};
use tpscope_model::Cause;
use tpscope_stream::openai;

use crate::config::{Api, ClientConfig, Endpoint};
use crate::connector::{ConnectError, Connector};
use crate::live::LiveTokens;

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

/// hyper's largest read buffer per connection: without a cap it grows to
/// ~400 KB on a connection whose reader falls behind (4 GB at 10,000 streams);
/// SSE bodies stream through it, so 64 KB (docs/design.md §12) costs nothing.
pub(crate) const MAX_READ_BUF: usize = 64 << 10;

pub(crate) struct Inner {
    pub http: HyperClient<Connector, Full<Bytes>>,
    /// The same connector without a pool: every request on a new connection
    /// (keep-alive resends, `keepalive: false`).
    pub fresh: HyperClient<Connector, Full<Bytes>>,
    pub endpoint: Endpoint,
    pub config: ClientConfig,
    pub request_uri: Uri,
    models_uri: Uri,
    pub post_headers: HeaderMap,
    get_headers: HeaderMap,
    /// Tokens as they stream, for a live display, when asked for.
    pub live: Option<Arc<LiveTokens>>,
}

/// An OpenAI-compatible streaming client over a shared connection pool. Cheap to
/// clone (an `Arc`); clones share the pool.
#[derive(Clone)]
pub struct Client {
    pub(crate) inner: Arc<Inner>,
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
        Client::with_live(endpoint, config, None)
    }

    /// As [`Client::new`], with every attempt counting its tokens into `live` as
    /// they stream.
    pub fn with_live(
        endpoint: Endpoint,
        config: ClientConfig,
        live: Option<Arc<LiveTokens>>,
    ) -> Result<Client, ClientError> {
        let (https, request_uri, models_uri) = endpoint_uris(&endpoint)?;
        let (get_headers, post_headers) = endpoint_headers(&endpoint)?;

        let connector = Connector::of_config(https, &config, config.rx_timestamps)?;
        let mut builder = HyperClient::builder(TokioExecutor::new());
        builder
            .pool_timer(TokioTimer::new())
            .timer(TokioTimer::new())
            .pool_idle_timeout(config.pool_idle_timeout)
            .pool_max_idle_per_host(config.pool_max_idle_per_host)
            .http1_max_buf_size(MAX_READ_BUF)
            .http2_only(config.http2_prior_knowledge);
        let http = builder.build(connector.clone());
        builder.pool_max_idle_per_host(0);
        let fresh = builder.build(connector);
        let mut post_headers = post_headers;
        if !config.keepalive {
            post_headers.insert(header::CONNECTION, HeaderValue::from_static("close"));
        }
        Ok(Client {
            inner: Arc::new(Inner {
                http,
                fresh,
                endpoint,
                config,
                request_uri,
                models_uri,
                post_headers,
                get_headers,
                live,
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
        Ok(self.models().await?.into_iter().map(|m| m.id).collect())
    }

    /// `GET {base}/models`: each model with its context length when the server
    /// says (vLLM's `max_model_len`). Bounded as [`Client::list_models`].
    pub async fn models(&self) -> Result<Vec<ModelInfo>, ClientError> {
        let limit = self
            .inner
            .config
            .timeouts
            .total
            .unwrap_or(LIST_MODELS_LIMIT);
        let uri = self.inner.models_uri.clone();
        let (body, status, fail) = self.get(uri, "application/json", limit).await?;
        parse_models(&body).map_err(|m| fail(Cause::Malformed, Some(status), m))
    }

    /// `GET {base}` itself, as text (a Prometheus `/metrics` page when the base URL
    /// names one), within `limit`; a non-2xx answer is an error.
    pub async fn get_page(&self, limit: Duration) -> Result<Vec<u8>, ClientError> {
        let uri = self
            .inner
            .endpoint
            .base_url
            .trim()
            .trim_end_matches('/')
            .parse::<Uri>()
            .map_err(|e| bad_url(&self.inner.endpoint.base_url, e.to_string()))?;
        Ok(self.get(uri, "text/plain", limit).await?.0)
    }

    /// A `GET` of `uri` within `limit`: the body and status of a 2xx answer, and
    /// the error maker for what the caller finds wrong with it.
    async fn get(
        &self,
        uri: Uri,
        accept: &'static str,
        limit: Duration,
    ) -> Result<
        (
            Vec<u8>,
            u16,
            impl Fn(Cause, Option<u16>, String) -> ClientError,
        ),
        ClientError,
    > {
        let what = format!("GET {}", uri.path());
        let fail = move |cause: Cause, status: Option<u16>, message: String| ClientError::Request {
            what: what.clone(),
            cause,
            status,
            message,
        };
        let mut req = Request::new(Full::new(Bytes::new()));
        *req.method_mut() = Method::GET;
        *req.uri_mut() = uri;
        *req.headers_mut() = self.inner.get_headers.clone();
        req.headers_mut()
            .insert(header::ACCEPT, HeaderValue::from_static(accept));
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
                let msg = openai::error_body_message(&body).unwrap_or_else(|| status.to_string());
                return Err(fail(cause, Some(status.as_u16()), msg));
            }
            Ok((body, status.as_u16()))
        };
        match tokio::time::timeout(limit, work).await {
            Ok(Ok((body, status))) => Ok((body, status, fail)),
            Ok(Err(e)) => Err(e),
            Err(_) => Err(fail(
                Cause::TimeoutTotal,
                None,
                format!("no answer within {limit:?}"),
            )),
        }
    }
}

/// Checks the base URL; whether it is `https`, and the request and models URIs.
fn endpoint_uris(endpoint: &Endpoint) -> Result<(bool, Uri, Uri), ClientError> {
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
    Ok((https, request_uri, models_uri))
}

/// The `anthropic-version` header sent with `--api anthropic`.
pub const ANTHROPIC_VERSION: &str = "2023-06-01";

/// The headers of `GET`s and of the streaming `POST`: user agent, API key and the
/// endpoint's extra headers (all marked sensitive), and the accepted types.
fn endpoint_headers(endpoint: &Endpoint) -> Result<(HeaderMap, HeaderMap), ClientError> {
    let mut get_headers = HeaderMap::new();
    get_headers.insert(header::ACCEPT, HeaderValue::from_static("application/json"));
    get_headers.insert(
        header::USER_AGENT,
        HeaderValue::from_static(concat!("tpscope/", env!("CARGO_PKG_VERSION"))),
    );
    if let Some(key) = &endpoint.api_key {
        // Anthropic takes the bare key in `x-api-key`; the others a bearer token.
        let (name, value) = match endpoint.api {
            Api::Anthropic => (HeaderName::from_static("x-api-key"), key.trim().to_string()),
            _ => (header::AUTHORIZATION, format!("Bearer {}", key.trim())),
        };
        let mut v = HeaderValue::from_str(&value).map_err(|_| ClientError::InvalidHeader {
            name: name.as_str().into(),
            reason: "the API key holds characters not allowed in a header".into(),
        })?;
        v.set_sensitive(true);
        get_headers.insert(name, v);
    }
    if endpoint.api == Api::Anthropic {
        get_headers.insert(
            HeaderName::from_static("anthropic-version"),
            HeaderValue::from_static(ANTHROPIC_VERSION),
        );
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
    Ok((get_headers, post_headers))
}

/// The connection a request failed on, when hyper says.
pub(crate) fn failed_conn(
    e: &hyper_util::client::legacy::Error,
) -> Option<Arc<crate::connector::ConnInfo>> {
    let mut ext = hyper::http::Extensions::new();
    e.connect_info()?.get_extras(&mut ext);
    ext.remove::<crate::connector::ConnTag>().map(|t| t.0)
}

/// Whether a request that got no response head is safe to send again at once: it
/// ran on a reused connection that closed (or was reset) before any byte of a
/// response came back, so the server cannot have acted on it (a keep-alive race:
/// the server closed an idle connection as the request went out).
pub(crate) fn closed_before_reply(e: &hyper_util::client::legacy::Error) -> bool {
    if e.is_connect() || !failed_conn(e).is_some_and(|c| c.was_used()) {
        return false;
    }
    let mut src: Option<&(dyn std::error::Error + 'static)> = Some(e);
    while let Some(s) = src {
        if let Some(h) = s.downcast_ref::<hyper::Error>() {
            // A partial response is a parse error, not an incomplete message.
            if h.is_incomplete_message() || h.is_canceled() {
                return true;
            }
        }
        if let Some(io) = s.downcast_ref::<std::io::Error>() {
            return matches!(
                io.kind(),
                std::io::ErrorKind::ConnectionReset
                    | std::io::ErrorKind::ConnectionAborted
                    | std::io::ErrorKind::BrokenPipe
            );
        }
        src = s.source();
    }
    false
}

/// The cause and message of a request that got no response head.
pub(crate) fn transport_failure(e: &hyper_util::client::legacy::Error) -> (Cause, String) {
    let (cause, message) = transport_cause(e);
    match out_of_files(e) {
        Some(what) => (cause, format!("{what}: {message}")),
        None => (cause, message),
    }
}

/// The client's own open-file limit, when an error in `e`'s chain is EMFILE or
/// ENFILE: said first, so the failure is not read as the server's.
fn out_of_files(e: &(dyn std::error::Error + 'static)) -> Option<&'static str> {
    let mut src = Some(e);
    while let Some(s) = src {
        if let Some(io) = s.downcast_ref::<std::io::Error>() {
            match io.raw_os_error() {
                Some(libc::EMFILE) => {
                    return Some(
                        "the client ran out of open files (its own limit, ulimit -n; not the \
                         server's)",
                    );
                }
                Some(libc::ENFILE) => {
                    return Some("the client's host ran out of open files (not the server's)");
                }
                _ => {}
            }
        }
        src = s.source();
    }
    None
}

fn transport_cause(e: &hyper_util::client::legacy::Error) -> (Cause, String) {
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
pub(crate) fn error_chain(e: &(dyn std::error::Error + 'static)) -> String {
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

/// One entry of a server's model list.
#[derive(Clone, Debug, PartialEq, Eq, serde::Deserialize)]
pub struct ModelInfo {
    /// The model's id (what requests name).
    pub id: String,
    /// The most tokens (prompt + output) one request may hold, when the server
    /// says (vLLM's `max_model_len`; a value that is not a positive integer is
    /// taken as unknown).
    #[serde(default, deserialize_with = "positive_or_none")]
    pub max_model_len: Option<u32>,
    /// Where the server loaded the model from, when it says (vLLM's `root`): the
    /// count check knows a tokenizer from that directory is the model's.
    #[serde(default)]
    pub root: Option<String>,
}

fn positive_or_none<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Option<u32>, D::Error> {
    let v: Option<serde_json::Value> = serde::Deserialize::deserialize(d)?;
    Ok(v.and_then(|v| v.as_u64())
        .and_then(|n| u32::try_from(n).ok())
        .filter(|&n| n > 0))
}

fn parse_models(body: &[u8]) -> Result<Vec<ModelInfo>, String> {
    #[derive(serde::Deserialize)]
    struct List {
        data: Vec<ModelInfo>,
    }
    serde_json::from_slice::<List>(body)
        .map(|l| l.data)
        .map_err(|e| format!("expected {{\"data\": [{{\"id\": …}}]}}: {e}"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::Api;

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

    /// 5,000 streams under `ulimit -n 2048` failed as "connect: Too many open
    /// files", read as the server's failures.
    #[test]
    fn too_many_open_files_is_named_the_clients_own_limit() {
        #[derive(Debug)]
        struct Wrap(std::io::Error);
        impl std::fmt::Display for Wrap {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str("connect")
            }
        }
        impl std::error::Error for Wrap {
            fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
                Some(&self.0)
            }
        }
        let e = Wrap(std::io::Error::from_raw_os_error(libc::EMFILE));
        let what = out_of_files(&e).unwrap();
        assert!(what.contains("client ran out of open files") && what.contains("not the server's"));
        let other = Wrap(std::io::Error::from_raw_os_error(libc::ECONNREFUSED));
        assert_eq!(out_of_files(&other), None);
    }
}
