//! A pooled client that forwards arbitrary requests (the proxy's upstream side):
//! tpscope's own connector (TCP, TLS with rustls + ring and ALPN, the connect
//! timeout) under hyper-util's pool, so the proxy does not open connections a
//! second way. Failures without a response head map to causes as the bench's.

use bytes::Bytes;
use http_body_util::combinators::BoxBody;
use hyper::body::Incoming;
use hyper::{Request, Response};
use hyper_util::client::legacy::Client as HyperClient;
use hyper_util::rt::{TokioExecutor, TokioTimer};
use tpscope_model::Cause;

use crate::client::{ClientError, transport_failure};
use crate::config::ClientConfig;
use crate::connector::Connector;

/// The body of a forwarded request: whatever the proxy's client sent, possibly
/// wrapped (a size limit).
pub type ForwardBody = BoxBody<Bytes, Box<dyn std::error::Error + Send + Sync>>;

/// Forwards requests to one upstream over pooled connections.
#[derive(Clone)]
pub struct Forwarder {
    http: HyperClient<Connector, ForwardBody>,
}

impl Forwarder {
    /// A forwarder for `https` or plain HTTP upstreams, with `config`'s connect
    /// timeout, pool, TLS roots and HTTP/2 settings, and kernel receive stamps
    /// where the system gives them (see [`UpstreamRx`]).
    pub fn new(https: bool, config: &ClientConfig) -> Result<Forwarder, ClientError> {
        let rx = crate::config::RxTimestamps::Kernel.effective();
        let connector = Connector::of_config(https, config, rx)?;
        let mut builder = HyperClient::builder(TokioExecutor::new());
        builder
            .pool_timer(TokioTimer::new())
            .timer(TokioTimer::new())
            .pool_idle_timeout(config.pool_idle_timeout)
            .pool_max_idle_per_host(config.pool_max_idle_per_host)
            // The proxy's upstream side is a stream's reader too: the same cap,
            // so a client that falls behind costs 64 KB here, not ~400 KB.
            .http1_max_buf_size(crate::client::MAX_READ_BUF)
            .http2_only(config.http2_prior_knowledge);
        Ok(Forwarder {
            http: builder.build(connector),
        })
    }

    /// Sends `req` (an absolute URI); the response head, or the cause and
    /// message of why none came (`connect`, `timeout_connect`, …).
    pub async fn send(
        &self,
        req: Request<ForwardBody>,
    ) -> Result<Response<Incoming>, (Cause, String, hyper_util::client::legacy::Error)> {
        self.http.request(req).await.map_err(|e| {
            let (cause, msg) = transport_failure(&e);
            (cause, msg, e)
        })
    }
}

/// When a forwarded response's bytes reached the host: the kernel receive
/// timestamps of its upstream connection, as the client's own reads carry them
/// (`None` inside where the system gives none: then the instant of the read).
pub struct UpstreamRx {
    conn: Option<std::sync::Arc<crate::connector::ConnInfo>>,
}

/// The stamp of one relayed body frame.
#[derive(Clone, Copy, Debug)]
pub struct RxStamp {
    /// When its bytes arrived (kernel stamp), else when the proxy read them.
    pub at: std::time::Instant,
    /// When the proxy's task got the frame (`received − at`: the proxy's lag).
    pub received: std::time::Instant,
    /// Whether `at` is the arrival of the frame's own last event.
    pub exact: bool,
    /// Whether the frame was traced to one socket read.
    pub traced: bool,
}

impl UpstreamRx {
    /// Takes the connection's stamps out of `res` (nothing else reads them).
    pub fn take(res: &mut Response<Incoming>) -> UpstreamRx {
        UpstreamRx {
            conn: res
                .extensions_mut()
                .remove::<crate::connector::ConnTag>()
                .map(|t| t.0),
        }
    }

    fn cell(&self) -> Option<&crate::rx::RxCell> {
        self.conn.as_ref().and_then(|c| c.rx.as_deref())
    }

    /// Whether the connection carries kernel receive stamps.
    pub fn kernel(&self) -> bool {
        self.cell().is_some()
    }

    /// The latest arrival on the connection, not before `start` (the request
    /// was sent) nor after now: the response head's stamp.
    pub fn latest(&self, start: std::time::Instant) -> std::time::Instant {
        crate::rx::read_instant(self.cell(), start)
    }

    /// The stamp of a body frame `data` read after `start`.
    pub fn frame(&self, data: &[u8], start: std::time::Instant) -> RxStamp {
        let f = crate::rx::frame_stamp(self.cell(), data, start);
        RxStamp {
            at: f.at,
            received: f.received,
            exact: f.exact && self.kernel(),
            traced: f.read.is_some(),
        }
    }
}
