//! The connector under the pooled hyper client: opens TCP (and TLS with ALPN) and
//! tags every connection with its id and connect time, so that each attempt can
//! tell whether it ran on a fresh or a reused connection (ECOSYSTEM §7.3: connector
//! calls are not attempts, because a pooled connection may win the race against a
//! connect started for the same request). With kernel receive timestamps asked
//! for, the TCP stream (plain, or under TLS) is an [`RxTcp`] that records when the
//! bytes it reads arrived, in a cell the tag carries to every response (see
//! [`crate::rx`]).

use std::future::Future;
use std::io;
use std::net::{IpAddr, SocketAddr};
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use hyper::Uri;
use hyper::rt::{Read, ReadBufCursor, Write};
use hyper_util::client::legacy::connect::{Connected, Connection};
use hyper_util::rt::TokioIo;
use tokio::net::TcpStream;
use tokio::sync::{OwnedSemaphorePermit, Semaphore};

use crate::config::{CONNECT_SPACING, RxTimestamps};
use crate::rx::{RxCell, RxTcp};

/// Facts about one connection, shared by every response that runs on it.
#[derive(Debug)]
pub(crate) struct ConnInfo {
    /// Sequence number of the connection within its client (from 1).
    pub id: u64,
    /// When the connector started opening it.
    pub opened_at: Instant,
    /// DNS + TCP (+ TLS) time.
    pub connect_time: Duration,
    /// Set by the first response that runs on the connection.
    claimed: AtomicBool,
    /// The latest arrival of bytes read from the connection (kernel receive
    /// timestamps); `None` when they are off or the socket refused them.
    pub rx: Option<Arc<RxCell>>,
    /// The connection's place among those being opened (see
    /// [`crate::config::ClientConfig::connect_burst`]), until the server answers.
    pacing: Arc<Mutex<Option<OwnedSemaphorePermit>>>,
}

impl ConnInfo {
    /// Marks the connection used; returns whether it had been used before. The
    /// server has answered on it, so it no longer counts as being opened.
    pub fn claim(&self) -> bool {
        self.pacing.lock().unwrap_or_else(|e| e.into_inner()).take();
        self.claimed.swap(true, Ordering::AcqRel)
    }

    /// Whether a response has run on the connection before.
    pub fn was_used(&self) -> bool {
        self.claimed.load(Ordering::Acquire)
    }
}

/// The tag hyper-util copies into the extensions of every response
/// (`Connected::extra`).
#[derive(Clone, Debug)]
pub(crate) struct ConnTag(pub Arc<ConnInfo>);

/// Why a connection could not be opened.
#[derive(Debug, thiserror::Error)]
pub(crate) enum ConnectError {
    /// The connect timeout passed.
    #[error("connecting took longer than {0:?}")]
    Timeout(Duration),
    /// The URL cannot be connected to (unsupported scheme, no host).
    #[error("{0}")]
    BadTarget(String),
    /// DNS or TCP failed (refused, unreachable, …).
    #[error("{0}")]
    Io(String),
    /// The TLS handshake failed.
    #[error("TLS handshake failed: {0}")]
    Tls(String),
}

struct Inner {
    tls: Option<tokio_rustls::TlsConnector>,
    connect_timeout: Option<Duration>,
    nodelay: bool,
    rx: RxTimestamps,
    next_id: AtomicU64,
    /// Places for connections being opened (`None`: no pacing), of `burst_size`.
    burst: Option<Arc<Semaphore>>,
    burst_size: usize,
}

/// A `tower::Service<Uri>` that opens tagged connections.
#[derive(Clone)]
pub(crate) struct Connector {
    inner: Arc<Inner>,
}

impl Connector {
    pub fn new(
        tls: Option<Arc<rustls::ClientConfig>>,
        connect_timeout: Option<Duration>,
        nodelay: bool,
        rx: RxTimestamps,
        burst: usize,
    ) -> Self {
        Connector {
            inner: Arc::new(Inner {
                tls: tls.map(tokio_rustls::TlsConnector::from),
                connect_timeout,
                nodelay,
                rx,
                next_id: AtomicU64::new(1),
                burst: (burst > 0).then(|| Arc::new(Semaphore::new(burst))),
                burst_size: burst,
            }),
        }
    }

    /// Connections holding a place among those being opened (`None`: no pacing).
    pub(crate) fn opening(&self) -> Option<usize> {
        let sem = self.inner.burst.as_ref()?;
        Some(self.inner.burst_size - sem.available_permits())
    }
}

impl Connector {
    /// The connector of `config` for `https` or plain HTTP upstreams, stamping
    /// receives as `rx` says (the client's and the proxy's forwarder's one recipe).
    pub fn of_config(
        https: bool,
        config: &crate::ClientConfig,
        rx: RxTimestamps,
    ) -> Result<Self, crate::ClientError> {
        let tls = if https {
            Some(
                tls_config(config.http2, &config.extra_root_certs_der)
                    .map_err(crate::ClientError::Tls)?,
            )
        } else {
            None
        };
        Ok(Connector::new(
            tls,
            config.timeouts.connect,
            config.tcp_nodelay,
            rx,
            config.connect_burst,
        ))
    }
}

impl tower_service::Service<Uri> for Connector {
    type Response = Conn;
    type Error = ConnectError;
    type Future = Pin<Box<dyn Future<Output = Result<Conn, ConnectError>> + Send>>;

    fn poll_ready(&mut self, _cx: &mut Context<'_>) -> Poll<Result<(), ConnectError>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, uri: Uri) -> Self::Future {
        let inner = self.inner.clone();
        Box::pin(async move {
            // Wait for a place among the connections being opened; the wait is
            // part of this connection's connect time, as the user sees it.
            let place_wait = Instant::now();
            let place = match &inner.burst {
                Some(sem) => sem.clone().acquire_owned().await.ok(),
                None => None,
            };
            // The cell exists before the connection does, so that no read of it
            // goes unrecorded.
            let cell = (inner.rx == RxTimestamps::Kernel).then(|| Arc::new(RxCell::new()));
            let open = open(&inner, &uri, cell);
            let (io, h2, rx) = match inner.connect_timeout {
                Some(limit) => tokio::time::timeout(limit, open)
                    .await
                    .map_err(|_| ConnectError::Timeout(limit))??,
                None => open.await?,
            };
            let pacing = Arc::new(Mutex::new(place));
            if pacing.lock().unwrap_or_else(|e| e.into_inner()).is_some() {
                // Give the place back after the spacing if the server has not
                // answered by then (an answer gives it back at once).
                let p = Arc::downgrade(&pacing);
                tokio::spawn(async move {
                    tokio::time::sleep(CONNECT_SPACING).await;
                    if let Some(p) = p.upgrade() {
                        p.lock().unwrap_or_else(|e| e.into_inner()).take();
                    }
                });
            }
            let info = ConnInfo {
                id: inner.next_id.fetch_add(1, Ordering::Relaxed),
                opened_at: place_wait,
                connect_time: place_wait.elapsed(),
                claimed: AtomicBool::new(false),
                rx,
                pacing,
            };
            Ok(Conn {
                io,
                h2,
                tag: ConnTag(Arc::new(info)),
            })
        })
    }
}

/// Opens the connection: its IO, whether it speaks HTTP/2, and its arrival cell
/// (`cell`, unless the socket refused kernel timestamps).
async fn open(
    inner: &Inner,
    uri: &Uri,
    cell: Option<Arc<RxCell>>,
) -> Result<(Io, bool, Option<Arc<RxCell>>), ConnectError> {
    let tls = match uri.scheme_str() {
        Some("http") => false,
        Some("https") => true,
        other => {
            return Err(ConnectError::BadTarget(format!(
                "unsupported URL scheme {other:?}"
            )));
        }
    };
    let host = uri
        .host()
        .ok_or_else(|| ConnectError::BadTarget("the URL has no host".into()))?;
    let host = host.trim_start_matches('[').trim_end_matches(']');
    let port = uri.port_u16().unwrap_or(if tls { 443 } else { 80 });
    let tcp = tcp_connect(host, port).await?;
    if inner.nodelay {
        // Not fatal: the stream still works with Nagle on.
        let _ = tcp.set_nodelay(true);
    }
    let tcp = RxTcp::new(tcp, cell, !tls);
    let cell = tcp.cell();
    if !tls {
        return Ok((Io::Plain(TokioIo::new(tcp)), false, cell));
    }
    let Some(connector) = &inner.tls else {
        return Err(ConnectError::BadTarget(
            "https URL but TLS is not set up".into(),
        ));
    };
    let name = rustls::pki_types::ServerName::try_from(host.to_string())
        .map_err(|e| ConnectError::BadTarget(format!("invalid TLS server name `{host}`: {e}")))?;
    let stream = connector
        .connect(name, tcp)
        .await
        .map_err(|e| ConnectError::Tls(e.to_string()))?;
    let h2 = stream.get_ref().1.alpn_protocol() == Some(b"h2");
    Ok((Io::Tls(Box::new(TokioIo::new(stream))), h2, cell))
}

async fn tcp_connect(host: &str, port: u16) -> Result<TcpStream, ConnectError> {
    if let Ok(ip) = host.parse::<IpAddr>() {
        return TcpStream::connect(SocketAddr::new(ip, port))
            .await
            .map_err(|e| io_error(&e, host, port));
    }
    let addrs = tokio::net::lookup_host((host, port))
        .await
        .map_err(|e| ConnectError::Io(format!("cannot resolve `{host}`: {e}")))?;
    let mut last = None;
    for addr in addrs {
        match TcpStream::connect(addr).await {
            Ok(s) => return Ok(s),
            Err(e) => last = Some(e),
        }
    }
    Err(match last {
        Some(e) => io_error(&e, host, port),
        None => ConnectError::Io(format!("`{host}` resolved to no address")),
    })
}

fn io_error(e: &io::Error, host: &str, port: u16) -> ConnectError {
    ConnectError::Io(format!("cannot connect to {host}:{port}: {e}"))
}

enum Io {
    Plain(TokioIo<RxTcp>),
    Tls(Box<TokioIo<tokio_rustls::client::TlsStream<RxTcp>>>),
}

/// One open connection (plain or TLS) with its tag.
pub(crate) struct Conn {
    io: Io,
    h2: bool,
    tag: ConnTag,
}

impl Conn {
    /// The TCP stream of a plain (not TLS) connection, and its facts; `None`
    /// for TLS.
    pub fn into_plain(self) -> Option<(RxTcp, Arc<ConnInfo>)> {
        match self.io {
            Io::Plain(s) => Some((s.into_inner(), self.tag.0)),
            Io::Tls(_) => None,
        }
    }
}

impl Connection for Conn {
    fn connected(&self) -> Connected {
        let c = Connected::new().extra(self.tag.clone());
        if self.h2 { c.negotiated_h2() } else { c }
    }
}

impl Read for Conn {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: ReadBufCursor<'_>,
    ) -> Poll<io::Result<()>> {
        match &mut self.get_mut().io {
            Io::Plain(s) => Pin::new(s).poll_read(cx, buf),
            Io::Tls(s) => Pin::new(s.as_mut()).poll_read(cx, buf),
        }
    }
}

impl Write for Conn {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        match &mut self.get_mut().io {
            Io::Plain(s) => Pin::new(s).poll_write(cx, buf),
            Io::Tls(s) => Pin::new(s.as_mut()).poll_write(cx, buf),
        }
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match &mut self.get_mut().io {
            Io::Plain(s) => Pin::new(s).poll_flush(cx),
            Io::Tls(s) => Pin::new(s.as_mut()).poll_flush(cx),
        }
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match &mut self.get_mut().io {
            Io::Plain(s) => Pin::new(s).poll_shutdown(cx),
            Io::Tls(s) => Pin::new(s.as_mut()).poll_shutdown(cx),
        }
    }

    fn is_write_vectored(&self) -> bool {
        match &self.io {
            Io::Plain(s) => s.is_write_vectored(),
            Io::Tls(s) => s.is_write_vectored(),
        }
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        match &mut self.get_mut().io {
            Io::Plain(s) => Pin::new(s).poll_write_vectored(cx, bufs),
            Io::Tls(s) => Pin::new(s.as_mut()).poll_write_vectored(cx, bufs),
        }
    }
}

/// Builds the rustls configuration: Web PKI roots plus `extra_roots`, ring crypto,
/// ALPN `h2` (when `http2`) and `http/1.1`.
pub(crate) fn tls_config(
    http2: bool,
    extra_roots: &[Vec<u8>],
) -> Result<Arc<rustls::ClientConfig>, String> {
    let mut roots = rustls::RootCertStore {
        roots: webpki_roots::TLS_SERVER_ROOTS.to_vec(),
    };
    for (i, der) in extra_roots.iter().enumerate() {
        roots
            .add(rustls::pki_types::CertificateDer::from(der.clone()))
            .map_err(|e| format!("extra root certificate #{}: {e}", i + 1))?;
    }
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let mut config = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| e.to_string())?
        .with_root_certificates(roots)
        .with_no_client_auth();
    config.alpn_protocols = if http2 {
        vec![b"h2".to_vec(), b"http/1.1".to_vec()]
    } else {
        vec![b"http/1.1".to_vec()]
    };
    Ok(Arc::new(config))
}
