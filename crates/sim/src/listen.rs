//! The socket side of the server: a listener whose accept queue holds thousands of
//! connections opened at once, and the accept loop that serves HTTP/1.1 on it with a
//! request-head timeout (slow or idle clients are closed) and graceful shutdown.

use std::future::Future;
use std::io;
use std::net::SocketAddr;
use std::time::Duration;

use axum::Router;
use hyper::server::conn::http1;
use hyper_util::rt::{TokioIo, TokioTimer};
use hyper_util::server::graceful::GracefulShutdown;
use hyper_util::service::TowerToHyperService;
use tokio::net::{TcpListener, TcpSocket};

/// The accept queue asked of `listen(2)`. The usual 128 (std's and Tokio's) drops
/// SYNs when hundreds of streams connect at once, and each dropped SYN costs its
/// client a one-second retransmit; the kernel caps the figure at
/// `net.core.somaxconn` (see [`accept_queue`]).
pub const LISTEN_BACKLOG: u32 = 4096;

/// Binds `addr` with [`LISTEN_BACKLOG`] (and `SO_REUSEADDR`, as Tokio's own bind).
pub(crate) fn bind(addr: SocketAddr) -> io::Result<TcpListener> {
    let socket = if addr.is_ipv4() {
        TcpSocket::new_v4()?
    } else {
        TcpSocket::new_v6()?
    };
    #[cfg(unix)]
    socket.set_reuseaddr(true)?;
    socket.bind(addr)?;
    socket.listen(LISTEN_BACKLOG)
}

/// The accept queue the kernel grants the listener: [`LISTEN_BACKLOG`] capped by
/// `net.core.somaxconn`, where that can be read (Linux); `None` elsewhere.
pub fn accept_queue() -> Option<u32> {
    let text = std::fs::read_to_string("/proc/sys/net/core/somaxconn").ok()?;
    let cap: u32 = text.trim().parse().ok()?;
    Some(LISTEN_BACKLOG.min(cap))
}

/// Serves `router` on `listener` until `stop` resolves, then stops accepting and
/// waits for the open connections to finish (each ends after its current response;
/// idle ones at once). A connection that has not sent a complete request head
/// within `head_timeout` of being opened, or of its previous response ending, is
/// closed.
pub(crate) async fn serve(
    listener: TcpListener,
    router: Router,
    head_timeout: Duration,
    stop: impl Future<Output = ()>,
) {
    let mut http = http1::Builder::new();
    http.timer(TokioTimer::new())
        .header_read_timeout(head_timeout);
    let graceful = GracefulShutdown::new();
    let mut stop = std::pin::pin!(stop);
    loop {
        let tcp = tokio::select! {
            () = &mut stop => break,
            r = listener.accept() => match r {
                Ok((tcp, _)) => tcp,
                Err(e) => {
                    accept_failed(&e).await;
                    continue;
                }
            },
        };
        // Nagle's algorithm would hold a small chunk until the client's delayed ACK
        // (tens of ms), inflating every first-token time: send each frame at once.
        let _ = tcp.set_nodelay(true);
        let service = TowerToHyperService::new(router.clone());
        let conn = graceful.watch(http.serve_connection(TokioIo::new(tcp), service));
        tokio::spawn(async move {
            // A head timeout or a client going away ends the connection; nothing to
            // report.
            let _ = conn.await;
        });
    }
    drop(listener);
    graceful.shutdown().await;
}

/// After a failed accept: a connection reset before it was accepted is nothing;
/// anything else (out of file descriptors) gets a pause before the next try, as
/// hyper and axum do, instead of a busy loop.
async fn accept_failed(e: &io::Error) {
    use io::ErrorKind::{ConnectionAborted, ConnectionRefused, ConnectionReset};
    if !matches!(
        e.kind(),
        ConnectionRefused | ConnectionAborted | ConnectionReset
    ) {
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}
