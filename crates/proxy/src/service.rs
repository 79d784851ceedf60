//! One request through the proxy: refuse a body over the limit (413), queue a
//! completion for a slot when there is a cap (429/503 when the queue is full),
//! forward method, path, query, headers and body to the upstream, and answer
//! with its status, headers and a relayed body; an unreachable upstream is a 502
//! whose body says why (and a `connect` span), a silent one a 504.

use std::convert::Infallible;
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use http_body_util::{BodyExt, Limited};
use hyper::body::Incoming;
use hyper::header::{self, HeaderValue};
use hyper::{Request, Response, StatusCode, Uri, Version};
use tpscope_client::{ForwardBody, Forwarder, UpstreamRx};
use tpscope_model::Cause;

use crate::gate::Gate;
use crate::headers::{QUEUED_AT, completion_dialect, queued_at, strip_hop_by_hop};
use crate::metrics::Metrics;
use crate::rec::Rec;
use crate::relay::{ProxyBody, Relay};
use crate::track::Track;
use crate::{ProxyConfig, Upstream};

/// What every request handler shares.
pub(crate) struct State {
    pub upstream: Upstream,
    pub forwarder: Forwarder,
    pub gate: Option<Arc<Gate>>,
    pub rec: Arc<Rec>,
    pub cfg: ProxyConfig,
    /// This thread's idle upstream connections of the proxy's own HTTP/1.1
    /// relay (`None`: the upstream is served by hyper's client only).
    pub plain: Option<crate::fast::Pool>,
}

/// An answer of the proxy itself, JSON in the OpenAI error shape.
pub(crate) fn own(status: StatusCode, kind: &str, message: &str) -> Response<ProxyBody> {
    let body = serde_json::json!({"error": {
        "message": message, "type": kind, "code": status.as_u16(),
    }});
    let mut r = Response::new(ProxyBody::full(body.to_string()));
    *r.status_mut() = status;
    r.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/json"),
    );
    r
}

/// Serves one request.
pub(crate) async fn handle(
    st: Arc<State>,
    req: Request<Incoming>,
) -> Result<Response<ProxyBody>, Infallible> {
    let max = st.cfg.max_body;
    let declared = req
        .headers()
        .get(header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.trim().parse::<u64>().ok());
    if declared.is_some_and(|n| n > max) {
        return Ok(too_large(max));
    }
    Ok(
        match admit(&st, req.method(), req.uri().path(), req.headers()).await {
            Admit::Pass(track) => forward(&st, req, track.map(|t| *t)).await,
            Admit::Answer(r) => r,
        },
    )
}

/// What the proxy does with a request before forwarding it.
pub(crate) enum Admit {
    /// Forward it, recorded when it is a completion.
    Pass(Option<Box<Track>>),
    /// Answer it with this (the queue is full).
    Answer(Response<ProxyBody>),
}

/// Counts a retry, and takes a completion through the cap: its span starts when
/// it arrived (or when its client says it queued it) and it waits for a slot.
pub(crate) async fn admit(
    st: &State,
    method: &hyper::Method,
    path: &str,
    headers: &hyper::HeaderMap,
) -> Admit {
    if headers
        .get("x-stainless-retry-count")
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.trim().parse::<u32>().ok())
        .is_some_and(|n| n > 0)
    {
        st.rec.metrics.retry();
    }
    let Some(dialect) = completion_dialect(method, path) else {
        return Admit::Pass(None);
    };
    let now = st.rec.session.now();
    let stated = queued_at(headers);
    if stated.is_some() {
        st.rec.tally.stated();
    }
    // A stated time in the future is now; one more than a day old is not
    // believed (a clock or unit mistake), and arrival is used.
    let queued = stated
        .map(|t| t.min(now))
        .filter(|t| {
            now.since(*t)
                .is_some_and(|d| d < Duration::from_secs(86_400))
        })
        .unwrap_or(now);
    // Queued before it arrived: the live counters sweep that stretch again.
    if let Some(back) = now.since(queued).filter(|d| !d.is_zero()) {
        let at = Instant::now();
        if let Some(from) = at.checked_sub(back) {
            st.rec.metrics.queued_before(from, at);
        }
    }
    let mut track = Track::queued(st.rec.clone(), dialect, queued);
    let (permit, at) = match &st.gate {
        None => (None, None),
        Some(g) => match g.enqueue() {
            Ok(ticket) => {
                let (p, at) = ticket.admitted().await;
                (Some(p), at)
            }
            Err(_) => {
                // Refused before it was queued: not a span, counted in metrics.
                track.forget();
                st.rec.metrics.refused();
                return Admit::Answer(queue_full(&st.cfg));
            }
        },
    };
    track.admitted(permit, at);
    Admit::Pass(Some(Box::new(track)))
}

fn too_large(max: u64) -> Response<ProxyBody> {
    own(
        StatusCode::PAYLOAD_TOO_LARGE,
        "request_too_large",
        &format!("tpscope proxy: the request body is larger than --max-body ({max} bytes)"),
    )
}

fn queue_full(cfg: &ProxyConfig) -> Response<ProxyBody> {
    let status =
        StatusCode::from_u16(cfg.queue_full_status).unwrap_or(StatusCode::TOO_MANY_REQUESTS);
    let mut r = own(
        status,
        "queue_full",
        &format!(
            "tpscope proxy: {} requests are already waiting for one of {} slots (--queue-limit)",
            cfg.queue_limit,
            cfg.cap.unwrap_or(0)
        ),
    );
    let secs = cfg.retry_after.as_secs_f64().ceil().max(1.0) as u64;
    if let Ok(v) = HeaderValue::from_str(&secs.to_string()) {
        r.headers_mut().insert(header::RETRY_AFTER, v);
    }
    r
}

/// The upstream URI of a request: the upstream's origin and prefix, then the
/// request's own path and query unchanged.
fn upstream_uri(up: &Upstream, uri: &Uri) -> Option<Uri> {
    let pq = uri.path_and_query().map_or("/", |p| p.as_str());
    Uri::builder()
        .scheme(up.scheme.clone())
        .authority(up.authority.clone())
        .path_and_query(format!("{}{pq}", up.prefix))
        .build()
        .ok()
}

async fn forward(
    st: &State,
    req: Request<Incoming>,
    mut track: Option<Track>,
) -> Response<ProxyBody> {
    let (mut parts, body) = req.into_parts();
    let Some(uri) = upstream_uri(&st.upstream, &parts.uri) else {
        if let Some(t) = track.as_mut() {
            t.fail(
                Cause::Http4xx,
                "the request's path cannot be forwarded".into(),
            );
        }
        return own(
            StatusCode::BAD_REQUEST,
            "bad_request",
            "tpscope proxy: the request's path cannot be forwarded",
        );
    };
    parts.uri = uri;
    // HTTP/2 clients are forwarded over the upstream connection's own version.
    parts.version = Version::HTTP_11;
    strip_hop_by_hop(&mut parts.headers);
    parts.headers.remove(QUEUED_AT);
    // The upstream's own Host (from the URI), as a reverse proxy must for TLS
    // and virtual hosts.
    parts.headers.remove(header::HOST);
    let limited: ForwardBody = Limited::new(body, st.cfg.max_body as usize).boxed();
    let req = Request::from_parts(parts, limited);
    let sent_at = Instant::now();
    let sent = tokio::time::timeout(st.cfg.upstream_timeout, st.forwarder.send(req)).await;
    let res = match sent {
        Err(_) => return no_response(st, track.as_mut()),
        Ok(Err((cause, msg, e))) => {
            if is_length_limit(&e) {
                if let Some(t) = track.as_mut() {
                    t.forget();
                }
                return too_large(st.cfg.max_body);
            }
            return unreachable(st, track.as_mut(), cause, &msg);
        }
        Ok(Ok(res)) => res,
    };
    let mut res = res;
    let rx = UpstreamRx::take(&mut res);
    // The head's arrival (kernel stamp), not when this task got to it.
    let now = rx.latest(sent_at);
    let (mut parts, body) = res.into_parts();
    if let Some(t) = track.as_mut() {
        t.head(parts.status, &parts.headers, now);
    }
    strip_hop_by_hop(&mut parts.headers);
    let idle = Some(st.cfg.idle_timeout).filter(|d| *d > Duration::ZERO);
    let relay = Relay::new(body, track, idle, rx, sent_at);
    Response::from_parts(parts, ProxyBody::Relay(Box::new(relay)))
}

/// The answer when the upstream sent no response head within the upstream
/// timeout (504); the span fails as `timeout_first_token`.
pub(crate) fn no_response(st: &State, track: Option<&mut Track>) -> Response<ProxyBody> {
    let msg = format!(
        "the upstream {} sent no response within {:?}",
        st.upstream.shown, st.cfg.upstream_timeout
    );
    if let Some(t) = track {
        t.fail(Cause::TimeoutFirstToken, msg.clone());
    }
    own(
        StatusCode::GATEWAY_TIMEOUT,
        "upstream_timeout",
        &format!("tpscope proxy: {msg}"),
    )
}

/// The answer when the upstream could not be reached or broke before its
/// response head (502, saying why); the span fails with `cause`.
pub(crate) fn unreachable(
    st: &State,
    track: Option<&mut Track>,
    cause: Cause,
    msg: &str,
) -> Response<ProxyBody> {
    let text = format!("the upstream {} is unreachable: {msg}", st.upstream.shown);
    if let Some(t) = track {
        t.fail(cause, text.clone());
    }
    own(
        StatusCode::BAD_GATEWAY,
        "upstream_unreachable",
        &format!("tpscope proxy: {text}"),
    )
}

fn is_length_limit(e: &(dyn std::error::Error + 'static)) -> bool {
    let mut src: Option<&(dyn std::error::Error + 'static)> = Some(e);
    while let Some(s) = src {
        if s.is::<http_body_util::LengthLimitError>() {
            return true;
        }
        src = s.source();
    }
    false
}

/// `GET /metrics` on the metrics port (anything else: 404).
pub(crate) fn metrics_response(
    m: &Metrics,
    req: &Request<Incoming>,
) -> Response<http_body_util::Full<Bytes>> {
    if req.uri().path() != "/metrics" {
        let mut r = Response::new(http_body_util::Full::new(Bytes::from_static(
            b"try /metrics\n",
        )));
        *r.status_mut() = StatusCode::NOT_FOUND;
        return r;
    }
    let mut r = Response::new(http_body_util::Full::new(Bytes::from(m.render())));
    r.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/openmetrics-text; version=1.0.0; charset=utf-8"),
    );
    r
}
