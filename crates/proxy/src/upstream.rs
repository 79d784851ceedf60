//! The proxy's HTTP/1.1 connections to a plain-`http` upstream: opened by the
//! forwarder's connector (its timeout and kernel receive stamps), driven in the
//! task that relays the response, and kept idle in a bounded pool between
//! requests.
//!
//! Why: under hyper-util's pooled client every upstream connection is a task of
//! its own that reads the socket, decodes the chunked body and hands each frame
//! over a channel to the task that writes it to the client: two task wake-ups and
//! a channel hand-over per relayed chunk. Here the relayed body polls hyper's
//! connection future itself (see [`Driven`]), so the frame is read, decoded and
//! written in one poll of one task. HTTPS upstreams keep the pooled client.

use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicU8, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll, Wake, Waker};
use std::time::{Duration, Instant};

use http_body::{Body, Frame};
use hyper::body::Incoming;
use hyper::client::conn::http1;
use hyper::header::{self, HeaderValue};
use hyper::{Request, Response, Uri};
use tpscope_client::{ForwardBody, Forwarder, UpstreamIo, UpstreamRx};
use tpscope_model::Cause;

/// Why a request got no response head: the cause, what to say, and the error
/// (to tell a request body over the limit from a broken connection).
pub(crate) type SendFailure = (
    Cause,
    String,
    Option<Box<dyn std::error::Error + Send + Sync>>,
);

/// Read buffer per upstream connection, as the server side's (docs/design.md §12's
/// 64 KB per stream).
const MAX_BUF: usize = 64 << 10;

/// A connection between two requests.
struct Idle {
    send: http1::SendRequest<ForwardBody>,
    conn: http1::Connection<UpstreamIo, ForwardBody>,
    rx: UpstreamRx,
    since: Instant,
}

/// Idle upstream connections of one upstream.
pub(crate) struct Pool {
    forwarder: Forwarder,
    /// The upstream's origin, to open connections to.
    origin: Uri,
    /// The `Host` every request carries.
    host: HeaderValue,
    idle: Mutex<Vec<Idle>>,
    max_idle: usize,
    idle_timeout: Option<Duration>,
}

/// The connection a response is read from, polled by the task that relays the
/// response; handed back to the pool when the response ended whole, closed when
/// dropped before (the client went away: the upstream sees it at once).
pub(crate) struct Driven {
    send: http1::SendRequest<ForwardBody>,
    /// `None` once the connection future has finished (closed or broken).
    conn: Option<http1::Connection<UpstreamIo, ForwardBody>>,
    rx: UpstreamRx,
    pool: Arc<Pool>,
    /// The waker the connection and the body are polled with.
    wake: Arc<SelfWake>,
    waker: Waker,
}

/// The waker of a connection and its body polled together. The two wake each
/// other for every frame (the connection hands a frame over, the body takes
/// it), and each wake would poll the task once more for nothing: wakes that
/// come while the pair is being polled only note that the connection has work
/// ([`WOKEN`]), and turn into one more turn of the pair's loop
/// ([`Driven::poll_body`]); any other (the socket is readable) also wakes the
/// task. The connection is polled only after a wake: every waker it registers
/// is this one, so without one it has nothing to do.
struct SelfWake {
    state: AtomicU8,
    task: Mutex<Option<Waker>>,
}

/// The pair is being polled.
const ACTIVE: u8 = 1;
/// A wake came since the connection was last polled.
const WOKEN: u8 = 2;

impl Wake for SelfWake {
    fn wake(self: Arc<Self>) {
        self.wake_by_ref();
    }

    fn wake_by_ref(self: &Arc<Self>) {
        if self.state.fetch_or(WOKEN, Ordering::AcqRel) & ACTIVE == 0
            && let Some(w) = self.task.lock().unwrap_or_else(|e| e.into_inner()).as_ref()
        {
            w.wake_by_ref();
        }
    }
}

impl Driven {
    /// The next frame of `body` (the response read on this connection), the
    /// connection polled first, when woken, to read the socket and feed it.
    pub fn poll_body(
        &mut self,
        body: &mut Incoming,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<bytes::Bytes>, hyper::Error>>> {
        {
            let mut task = self.wake.task.lock().unwrap_or_else(|e| e.into_inner());
            if !task.as_ref().is_some_and(|w| w.will_wake(cx.waker())) {
                *task = Some(cx.waker().clone());
            }
        }
        let mut own = Context::from_waker(&self.waker);
        loop {
            if self.wake.state.swap(ACTIVE, Ordering::AcqRel) & WOKEN != 0 {
                poll_conn(&mut self.conn, &mut own);
            }
            let r = Pin::new(&mut *body).poll_frame(&mut own);
            let state = self.wake.state.fetch_and(!ACTIVE, Ordering::AcqRel);
            // A frame: the server polls the body again after writing it (and
            // the connection then, as taking the frame woke it).
            if r.is_ready() || state & WOKEN == 0 {
                return r;
            }
        }
    }

    /// The response ended whole: the connection serves the next request.
    pub fn release(mut self) {
        // One more turn moves hyper's connection to idle (ready for a request).
        poll_conn(&mut self.conn, &mut Context::from_waker(Waker::noop()));
        if let Some(conn) = self.conn.take() {
            self.pool.put(Idle {
                send: self.send,
                conn,
                rx: self.rx,
                since: Instant::now(),
            });
        }
    }
}

/// Polls the connection (it reads and writes the socket); `None` once it ended.
fn poll_conn(conn: &mut Option<http1::Connection<UpstreamIo, ForwardBody>>, cx: &mut Context<'_>) {
    if let Some(c) = conn.as_mut()
        && Pin::new(c).poll(cx).is_ready()
    {
        *conn = None;
    }
}

impl Pool {
    /// The pool of `forwarder`'s connections to `origin` (`scheme://authority`),
    /// keeping at most `max_idle` idle ones for at most `idle_timeout`.
    pub fn new(
        forwarder: Forwarder,
        origin: Uri,
        max_idle: usize,
        idle_timeout: Option<Duration>,
    ) -> Option<Pool> {
        let authority = origin.authority()?;
        // As hyper-util's client writes it: the port only when not the default.
        let host = match authority.port_u16() {
            Some(80) | None => authority.host().to_string(),
            Some(p) => format!("{}:{p}", authority.host()),
        };
        Some(Pool {
            forwarder,
            host: HeaderValue::from_str(&host).ok()?,
            origin,
            idle: Mutex::new(Vec::new()),
            max_idle,
            idle_timeout,
        })
    }

    fn put(&self, idle: Idle) {
        let mut v = self.idle.lock().unwrap_or_else(|e| e.into_inner());
        if v.len() < self.max_idle {
            v.push(idle);
        }
    }

    /// The most recently used idle connection that is still open and ready.
    fn checkout(&self) -> Option<Idle> {
        loop {
            let mut i = self.idle.lock().unwrap_or_else(|e| e.into_inner()).pop()?;
            if self.idle_timeout.is_some_and(|t| i.since.elapsed() >= t) {
                continue;
            }
            // Nobody polls an idle connection: this turn sees whether the
            // upstream closed it meanwhile.
            let mut cx = Context::from_waker(Waker::noop());
            if Pin::new(&mut i.conn).poll(&mut cx).is_ready() || !i.send.is_ready() {
                continue;
            }
            return Some(i);
        }
    }

    async fn open(&self) -> Result<Idle, SendFailure> {
        let io = self
            .forwarder
            .open(self.origin.clone())
            .await
            .map_err(|(c, m)| (c, m, None))?;
        let rx = io.rx();
        let (send, conn) = http1::Builder::new()
            .max_buf_size(MAX_BUF)
            .handshake(io)
            .await
            .map_err(|e| {
                let (c, m) = tpscope_client::no_response(&e);
                (c, m, None)
            })?;
        Ok(Idle {
            send,
            conn,
            rx,
            since: Instant::now(),
        })
    }

    /// Sends `req` (origin-form URI; its `Host` is set here) on an idle
    /// connection, or a new one; the response head and the connection to read
    /// its body from. A request that an idle connection could not take (the
    /// upstream had closed it) goes on a new one.
    pub async fn send(
        self: &Arc<Self>,
        mut req: Request<ForwardBody>,
    ) -> Result<(Response<Incoming>, Driven), SendFailure> {
        req.headers_mut().insert(header::HOST, self.host.clone());
        loop {
            let (idle, reused) = match self.checkout() {
                Some(i) => (i, true),
                None => (self.open().await?, false),
            };
            let Idle {
                mut send, conn, rx, ..
            } = idle;
            let mut conn = Some(conn);
            let out = {
                let mut res = std::pin::pin!(send.try_send_request(req));
                std::future::poll_fn(|cx| {
                    // The connection writes the request and reads the head here.
                    poll_conn(&mut conn, cx);
                    res.as_mut().poll(cx)
                })
                .await
            };
            match out {
                Ok(res) => {
                    let wake = Arc::new(SelfWake {
                        // The connection was polled with another waker until now.
                        state: AtomicU8::new(WOKEN),
                        task: Mutex::new(None),
                    });
                    let driven = Driven {
                        send,
                        conn,
                        rx,
                        pool: self.clone(),
                        waker: Waker::from(wake.clone()),
                        wake,
                    };
                    return Ok((res, driven));
                }
                Err(mut e) => match e.take_message() {
                    // Never sent: a closed idle connection; try a new one.
                    Some(r) if reused => req = r,
                    _ => {
                        let err = e.into_error();
                        let (c, m) = tpscope_client::no_response(&err);
                        return Err((c, m, Some(Box::new(err))));
                    }
                },
            }
        }
    }
}

impl Driven {
    /// The arrival stamps of the connection's reads.
    pub fn rx(&self) -> UpstreamRx {
        self.rx.clone()
    }
}
