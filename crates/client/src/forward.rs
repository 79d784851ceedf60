//! A pooled client that forwards arbitrary requests (the proxy's upstream side):
//! tpscope's own connector (TCP, TLS with rustls + ring and ALPN, the connect
//! timeout) under hyper-util's pool, so the proxy does not open connections a
//! second way. Failures without a response head map to causes as the bench's.

use bytes::Bytes;
use http_body_util::combinators::BoxBody;
use hyper::body::Incoming;
use hyper::{Request, Response, Uri};
use hyper_util::client::legacy::Client as HyperClient;
use hyper_util::rt::{TokioExecutor, TokioTimer};
use tpscope_model::Cause;

use crate::client::{ClientError, transport_failure};
use crate::config::ClientConfig;
use crate::connector::{ConnInfo, ConnectError, Connector};
use crate::rx::RxTcp;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use tokio::io::{AsyncRead, AsyncWrite};

/// The body of a forwarded request: whatever the proxy's client sent, possibly
/// wrapped (a size limit).
pub type ForwardBody = BoxBody<Bytes, Box<dyn std::error::Error + Send + Sync>>;

/// Forwards requests to one upstream over pooled connections.
#[derive(Clone)]
pub struct Forwarder {
    http: HyperClient<Connector, ForwardBody>,
    connector: Connector,
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
            http: builder.build(connector.clone()),
            connector,
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

impl Forwarder {
    /// Opens a plain-HTTP connection to `origin` (`http://host:port`) with the
    /// forwarder's connector (its connect timeout, kernel receive stamps), for a
    /// relay that speaks HTTP/1.1 itself; the cause and message of a failure as
    /// [`Forwarder::send`] gives them.
    pub async fn connect_plain(&self, origin: &Uri) -> Result<UpstreamConn, (Cause, String)> {
        use tower_service::Service;
        let conn = self.connector.clone().call(origin.clone()).await;
        let conn = conn.map_err(|e| match e {
            ConnectError::Timeout(_) => (Cause::TimeoutConnect, e.to_string()),
            _ => (Cause::Connect, e.to_string()),
        })?;
        let (io, info) = conn.into_plain().ok_or_else(|| {
            (
                Cause::Connect,
                format!("{origin} is not a plain HTTP origin"),
            )
        })?;
        let mut io = io;
        // Its reader and its stamper are the relay's one task: no lock per read.
        io.keep_notes_local();
        Ok(UpstreamConn { io, info })
    }

    /// New connections that hold a place among those being opened at once
    /// ([`crate::ClientConfig::connect_burst`]): opened, not yet answered on,
    /// nor older than the spacing. `None` without pacing.
    pub fn opening(&self) -> Option<usize> {
        self.connector.opening()
    }
}

/// A plain-HTTP upstream connection (see [`Forwarder::connect_plain`]): its
/// reads record when their bytes arrived, as the pooled client's do.
pub struct UpstreamConn {
    io: RxTcp,
    /// The connection's facts (kept with it, as a pooled connection's are).
    info: Arc<ConnInfo>,
}

impl UpstreamConn {
    /// The upstream answered on the connection (a response head came): it no
    /// longer holds a place among the connections being opened. The pooled
    /// client gives its place back at the first response; the proxy's relay
    /// did not, so each new connection held its place for the whole spacing
    /// (50 ms) and more new streams than places at once waited for them.
    pub fn answered(&self) {
        self.info.claim();
    }

    /// Whether the connection carries kernel receive stamps.
    pub fn kernel(&self) -> bool {
        self.io.kernel()
    }

    /// The latest arrival on the connection, not before `start` (the request
    /// was sent) nor after now: the response head's stamp.
    pub fn latest(&self, start: std::time::Instant) -> std::time::Instant {
        self.io.latest(start)
    }

    /// The stamp of body data `data` read after `start`: a slice of the buffer
    /// the connection's last read filled is traced to that read.
    pub fn frame(&self, data: &[u8], start: std::time::Instant) -> RxStamp {
        rx_stamp(self.io.frame_stamp(data, start), self.kernel())
    }

    /// Whether an idle connection can carry a request: the upstream has not
    /// closed it, nor sent anything unasked.
    pub fn is_reusable(&self) -> bool {
        let mut cx = Context::from_waker(std::task::Waker::noop());
        let mut probe = [0u8; 1];
        let mut buf = tokio::io::ReadBuf::new(&mut probe);
        matches!(self.io.poll_peek(&mut cx, &mut buf), Poll::Pending)
    }
}

impl AsyncRead for UpstreamConn {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut tokio::io::ReadBuf<'_>,
    ) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.get_mut().io).poll_read(cx, buf)
    }
}

impl AsyncWrite for UpstreamConn {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<std::io::Result<usize>> {
        Pin::new(&mut self.get_mut().io).poll_write(cx, buf)
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.get_mut().io).poll_flush(cx)
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.get_mut().io).poll_shutdown(cx)
    }
}

/// When a forwarded response's bytes reached the host: the kernel receive
/// timestamps of its upstream connection, as the client's own reads carry them
/// (`None` inside where the system gives none: then the instant of the read).
pub struct UpstreamRx {
    conn: Option<Arc<ConnInfo>>,
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
        rx_stamp(
            crate::rx::frame_stamp(self.cell(), data, start),
            self.kernel(),
        )
    }
}

fn rx_stamp(f: crate::rx::FrameStamp, kernel: bool) -> RxStamp {
    RxStamp {
        at: f.at,
        received: f.received,
        exact: f.exact && kernel,
        traced: f.read.is_some(),
    }
}
