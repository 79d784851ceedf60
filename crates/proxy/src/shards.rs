//! The proxy's serving threads, as nginx's workers rather than a work-stealing
//! pool: each of N threads runs a one-thread runtime and serves the connections
//! it is given whole (the client's connection, its requests, a pool of upstream
//! connections of its own, the relayed bodies), so a relayed chunk wakes a task
//! on the thread that read it. On one runtime of N workers a stream's two
//! connection tasks ran wherever they had been stolen to, and idle workers were
//! woken to steal: at 16 workers that cost 1.24–1.28× nginx's CPU per token,
//! against 0.9–1.0× on one or two (docs/proxy-bench.md, "Threads").
//!
//! One accept loop hands each new connection to the thread with the fewest open
//! (threads accepting for themselves from one listener took them unevenly: the
//! first awake drained the backlog, 85 % of the relay's work went to one of two
//! threads, and a thread that lags reads backlogs, which costs the exact stamps
//! two more syscalls per read). What the threads share is what a request
//! shares: the cap's gate, the recorder and the metrics, each touched once or
//! twice per request.

use std::future::Future;
use std::io;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::task::{Context, Poll};
use std::time::Duration;

use hyper_util::rt::{TokioExecutor, TokioIo, TokioTimer};
use hyper_util::server::conn::auto;
use hyper_util::server::graceful::GracefulShutdown;
use tokio::net::TcpListener;
use tokio::sync::{mpsc, oneshot, watch};

use crate::stop::CutNow;
use crate::{fast, preface, service};

/// The serving threads, started: each says when its drain is over and when it
/// has ended.
pub(crate) struct Shards {
    listener: TcpListener,
    /// Each thread's inbox of connections, and how many it has open.
    inboxes: Vec<(mpsc::UnboundedSender<std::net::TcpStream>, Arc<AtomicUsize>)>,
    drained: Vec<oneshot::Receiver<()>>,
    done: Vec<oneshot::Receiver<()>>,
    /// Tells every thread to cut what is still open: once every thread's drain
    /// is over, or at a second signal.
    cut_all: watch::Sender<bool>,
    /// The recorder every thread shares (its stop tally).
    rec: Arc<crate::rec::Rec>,
}

impl Shards {
    /// Starts one thread per state, each serving what it is given until `stop`;
    /// returns once every thread's runtime is built.
    pub async fn start(
        listener: TcpListener,
        states: Vec<Arc<service::State>>,
        stop: &watch::Receiver<bool>,
    ) -> io::Result<Shards> {
        let rec = states
            .first()
            .map(|s| s.rec.clone())
            .ok_or_else(|| io::Error::other("no serving thread"))?;
        let (cut_all, cut_rx) = watch::channel(false);
        let mut done = Vec::with_capacity(states.len());
        let mut drained = Vec::with_capacity(states.len());
        let mut inboxes = Vec::with_capacity(states.len());
        for (i, st) in states.into_iter().enumerate() {
            let (give, inbox) = mpsc::unbounded_channel();
            let open = Arc::new(AtomicUsize::new(0));
            inboxes.push((give, open.clone()));
            let (tx, rx) = oneshot::channel();
            let (drained_tx, drained_rx) = oneshot::channel();
            let (ready_tx, ready) = oneshot::channel();
            let (stop, cut) = (stop.clone(), cut_rx.clone());
            // The runtime is built and dropped on its own thread: a runtime
            // dropped inside another's async context panics.
            std::thread::Builder::new()
                .name(format!("tpscope-proxy-{i}"))
                .spawn(move || {
                    let rt = tokio::runtime::Builder::new_current_thread()
                        .enable_all()
                        .build();
                    let rt = match rt {
                        Ok(rt) => {
                            let _ = ready_tx.send(Ok(()));
                            rt
                        }
                        Err(e) => {
                            let _ = ready_tx.send(Err(e));
                            return;
                        }
                    };
                    rt.block_on(serve(inbox, open, st, stop, cut, drained_tx));
                    // Pooled upstream connections close with the runtime.
                    drop(rt);
                    let _ = tx.send(());
                })?;
            ready
                .await
                .unwrap_or_else(|_| Err(io::Error::other("a serving thread ended at its start")))?;
            done.push(rx);
            drained.push(drained_rx);
        }
        Ok(Shards {
            listener,
            inboxes,
            drained,
            done,
            cut_all,
            rec,
        })
    }

    /// Accepts until `stop`, giving each connection to the thread with the
    /// fewest open. Then the stop: every thread drains; once all are drained (or
    /// at a second signal) what is still open is cut, on every thread at once.
    /// A thread ends by dropping its runtime, and with it every task still there
    /// (HTTP/2 streams are tasks of their own), so their spans are recorded
    /// before this returns and the `end` record follows them.
    pub async fn run(mut self, mut stop: watch::Receiver<bool>, cut: CutNow) {
        loop {
            if *stop.borrow() {
                break;
            }
            let stream = tokio::select! {
                r = stop.changed() => match r {
                    Ok(()) => continue,
                    Err(_) => break,
                },
                r = self.listener.accept() => match r {
                    Ok((s, _)) => s,
                    // Out of descriptors and the like: wait a moment rather than spin.
                    Err(_) => {
                        tokio::time::sleep(Duration::from_millis(50)).await;
                        continue;
                    }
                },
            };
            let _ = stream.set_nodelay(true);
            let Ok(mut stream) = stream.into_std() else {
                continue;
            };
            while let Some(i) =
                (0..self.inboxes.len()).min_by_key(|&i| self.inboxes[i].1.load(Ordering::Relaxed))
            {
                let (give, open) = &self.inboxes[i];
                open.fetch_add(1, Ordering::Relaxed);
                match give.send(stream) {
                    Ok(()) => break,
                    // That thread is gone (it panicked): the others serve.
                    Err(mpsc::error::SendError(s)) => {
                        self.inboxes.swap_remove(i);
                        stream = s;
                    }
                }
            }
        }
        // Closing the inboxes and the listener: no new connection is served.
        self.inboxes.clear();
        drop(self.listener);
        // Cutting starts only when no thread is draining any more: a client
        // that leaves during another thread's drain is not cut by the stop.
        for mut rx in self.drained {
            tokio::select! {
                _ = &mut rx => {}
                _ = cut.0.notified() => break,
            }
        }
        self.rec.tally.start_cutting();
        let _ = self.cut_all.send(true);
        for rx in self.done {
            let _ = rx.await;
        }
    }
}

/// Counts a thread's connection open until dropped.
struct Open(Arc<AtomicUsize>);

impl Drop for Open {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::Relaxed);
    }
}

/// One thread's connections, and its drain.
async fn serve(
    mut inbox: mpsc::UnboundedReceiver<std::net::TcpStream>,
    open: Arc<AtomicUsize>,
    state: Arc<service::State>,
    mut stop: watch::Receiver<bool>,
    mut cut: watch::Receiver<bool>,
    drained: oneshot::Sender<()>,
) {
    let graceful = GracefulShutdown::new();
    let mut builder = auto::Builder::new(TokioExecutor::new());
    builder
        .http1()
        .timer(TokioTimer::new())
        .header_read_timeout(state.cfg.header_timeout)
        // Read and write buffers per connection: hyper's ~400 KB default would
        // be held by every stream whose client reads slowly (docs/design.md §12's 64 KB).
        .max_buf_size(64 << 10)
        .keep_alive(true);
    builder
        .http2()
        .timer(TokioTimer::new())
        .keep_alive_interval(Some(Duration::from_secs(30)))
        .keep_alive_timeout(state.cfg.header_timeout);
    let builder = Arc::new(builder);
    let mut conns = tokio::task::JoinSet::new();
    loop {
        if *stop.borrow() {
            break;
        }
        let stream = tokio::select! {
            _ = stop.changed() => break,
            Some(_) = conns.join_next(), if !conns.is_empty() => continue,
            s = inbox.recv() => match s {
                Some(s) => s,
                None => break,
            },
        };
        let counted = Open(open.clone());
        let Ok(stream) = tokio::net::TcpStream::from_std(stream) else {
            continue;
        };
        let st = state.clone();
        let (builder, watcher, mut stop) = (builder.clone(), graceful.watcher(), stop.clone());
        // Its state is cold at each wake (a thousand others ran since): see
        // [`Prefetched`].
        let fut = async move {
            let _counted = counted;
            // Version detection has no timeout of its own: the header timeout
            // covers it (an idle or trickling client is dropped), and a stop
            // does not wait for a client that has not yet spoken.
            let io = tokio::select! {
                io = preface::read_preface(stream, st.cfg.header_timeout) => io,
                _ = stop.wait_for(|s| *s) => None,
            };
            let Some(io) = io else { return };
            // HTTP/1.1 to a plain upstream: the proxy's own relay, until a
            // request it leaves to hyper.
            let io = match &st.plain {
                Some(pool) if !io.is_h2() => match fast::serve(io, &st, pool, &mut stop).await {
                    Some(io) => io,
                    None => return,
                },
                _ => io,
            };
            let svc = hyper::service::service_fn(move |req| service::handle(st.clone(), req));
            let conn = builder.serve_connection(TokioIo::new(io), svc).into_owned();
            let _ = watcher.watch(conn).await;
        };
        conns.spawn(Prefetched { inner: fut });
    }
    drop(inbox);
    tokio::select! {
        _ = tokio::time::timeout(state.cfg.drain_timeout, graceful.shutdown()) => {}
        _ = cut.wait_for(|c| *c) => {}
    }
    let _ = drained.send(());
    // When every thread is drained: what is still open is cut, each request's
    // record, dropped with its connection, written as cancelled with the
    // tokens relayed so far.
    let _ = cut.wait_for(|c| *c).await;
    conns.abort_all();
    while conns.join_next().await.is_some() {}
}

pin_project_lite::pin_project! {
    /// A connection's task whose whole state is asked of the memory at once at
    /// each poll, before the nested `async` functions of the relay read their
    /// states one after another (each a cache line of its own, which a wake
    /// found cold: four stalls in a row, the largest part of the relay's
    /// user-space time in `perf` at a thousand streams). A hint: it changes no
    /// result.
    struct Prefetched<F> {
        #[pin]
        inner: F,
    }
}

impl<F: Future> Future for Prefetched<F> {
    type Output = F::Output;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<F::Output> {
        let this = self.project();
        tpscope_stream::prefetch_of(&*this.inner);
        this.inner.poll(cx)
    }
}
