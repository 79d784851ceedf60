//! The relay loop of the proxy's own HTTP/1.1 path ([`crate::fast`]): one poll
//! reads the upstream, writes a chunked or sized body on as it came, straight
//! from the buffer the read filled (a body the upstream ends by closing is
//! chunked here), then shows each data range to the span with its arrival
//! stamp; it notices a client that leaves, a body that breaks, and an upstream
//! silent past the idle limit.

use std::io::IoSlice;
use std::pin::Pin;
use std::task::{Context, Poll, Waker};
use std::time::{Duration, Instant};

use bytes::{Buf, Bytes, BytesMut};
use smallvec::SmallVec;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::TcpStream;
use tokio::time::Sleep;
use tpscope_client::UpstreamConn;
use tpscope_model::Cause;

use crate::fast::{READ_SIZE, poll_client};
use crate::h1::{self, Decoder, Framing};
use crate::track::Track;

/// The data ranges of one scan: a read holds one chunk or a few, kept inline
/// (no heap buffer to touch per read).
type Ranges = SmallVec<[std::ops::Range<usize>; 4]>;

/// How a relay ended.
pub(crate) enum End {
    /// The whole body went to the client.
    Done,
    /// The client closed its connection (or writing to it failed).
    ClientGone,
    /// The upstream broke the body, or went silent past the idle limit.
    Broke(Cause, String),
}

/// A response body on its way from the upstream to the client.
pub(crate) struct Relay {
    dec: Decoder,
    /// The body ends when the upstream closes: it goes to the client chunked.
    until_close: bool,
    /// The body goes to the client chunked by the relay (it came unframed).
    rechunk: bool,
    /// Bytes to write to the client, in order.
    out: Vec<Bytes>,
    /// Where chunk-size lines are cut from.
    scratch: BytesMut,
    track: Option<Track>,
    sent_at: Instant,
    idle: Option<Duration>,
    /// Fires at the earliest possible stall; re-armed lazily from `last_data`.
    sleep: Option<Pin<Box<Sleep>>>,
    /// The task the timer was last polled for: until its deadline it will wake
    /// that task, so polling it again before then only costs.
    timer_task: Option<Waker>,
    /// The timer's deadline, kept here: read per poll, it would otherwise be
    /// one more cold cache line per relayed chunk (the boxed timer's).
    armed: Option<Instant>,
    last_data: Instant,
    /// When the data of this poll was handed on: the clock a stall check
    /// needs, read already.
    fresh: Option<Instant>,
    /// The body ended; what is in `out` is its last.
    finished: bool,
}

impl Relay {
    /// The relay of a body of `framing`, `head` (the response head) written
    /// first; `idle`: the longest silence of the upstream.
    pub fn new(
        framing: Framing,
        head: Bytes,
        track: Option<Track>,
        sent_at: Instant,
        idle: Option<Duration>,
    ) -> Relay {
        let until_close = framing == Framing::UntilClose;
        Relay {
            dec: Decoder::new(framing),
            until_close,
            rechunk: until_close,
            out: vec![head],
            scratch: BytesMut::new(),
            track,
            sent_at,
            idle,
            sleep: None,
            timer_task: None,
            armed: None,
            last_data: Instant::now(),
            fresh: None,
            finished: false,
        }
    }

    /// The upstream broke the body: the span fails with `cause`.
    pub fn fail(&mut self, cause: Cause, msg: String) {
        if let Some(mut t) = self.track.take() {
            t.fail(cause, msg);
        }
    }

    /// Relays until the body's end, the client's leaving, or a break.
    pub fn poll(
        &mut self,
        cx: &mut Context<'_>,
        up: &mut UpstreamConn,
        ubuf: &mut BytesMut,
        io: &mut TcpStream,
        ahead: &mut BytesMut,
    ) -> Poll<End> {
        self.fresh = None;
        self.prefetch(ubuf);
        loop {
            if !self.out.is_empty() {
                match self.write(cx, io) {
                    Poll::Ready(Ok(())) => {}
                    Poll::Ready(Err(())) => return Poll::Ready(End::ClientGone),
                    // A client that reads slowly holds the upstream back (no
                    // buffering beyond the socket's).
                    Poll::Pending => {
                        return match poll_client(io, ahead, cx) {
                            true => Poll::Ready(End::ClientGone),
                            false => Poll::Pending,
                        };
                    }
                }
            }
            if self.finished {
                return Poll::Ready(End::Done);
            }
            // One scan takes all it can: what it wrote went out, so unless the
            // client's socket held some back or the body ended, read on.
            if let Some(end) = self.decode(cx, up, ubuf, io) {
                return Poll::Ready(end);
            }
            if !self.out.is_empty() || self.finished {
                continue;
            }
            ubuf.reserve(READ_SIZE);
            let mut rb = ReadBuf::uninit(ubuf.spare_capacity_mut());
            match Pin::new(&mut *up).poll_read(cx, &mut rb) {
                Poll::Ready(Ok(())) => {
                    let n = rb.filled().len();
                    // SAFETY: `poll_read` initialised the first `n` spare bytes.
                    unsafe { ubuf.set_len(ubuf.len() + n) };
                    if n == 0 {
                        if !self.until_close {
                            return Poll::Ready(End::Broke(
                                Cause::Disconnect,
                                "the upstream's body broke: the upstream closed the connection \
                                 before the body's end"
                                    .into(),
                            ));
                        }
                        self.end();
                    }
                }
                Poll::Ready(Err(e)) => {
                    return Poll::Ready(End::Broke(
                        Cause::Disconnect,
                        format!("the upstream's body broke: {e}"),
                    ));
                }
                Poll::Pending => {
                    if poll_client(io, ahead, cx) {
                        return Poll::Ready(End::ClientGone);
                    }
                    if let Some(idle) = self.stalled(cx) {
                        return Poll::Ready(End::Broke(
                            Cause::TimeoutStall,
                            format!("the upstream sent nothing for {idle:?}"),
                        ));
                    }
                    return Poll::Pending;
                }
            }
        }
    }

    /// Asks the memory for what this poll will touch outside the task's own
    /// state (which [`crate::shards`] prefetches whole): the span's kept event
    /// and text, and where the read will land. A wake is for one stream of a
    /// thousand, whose lines the others have pushed out of the caches; asked
    /// at once, they arrive together while the read's and the write's system
    /// calls run, instead of one stall after another as the parse reaches them
    /// (docs/proxy-bench.md, "Prefetching a stream's state").
    #[inline]
    fn prefetch(&self, ubuf: &mut BytesMut) {
        if let Some(t) = &self.track {
            t.prefetch_data();
        }
        // The reserve the read makes anyway when nothing is left over (it
        // moves the buffer's start back), made first to know where it lands.
        if ubuf.is_empty() {
            ubuf.reserve(READ_SIZE);
            tpscope_stream::prefetch(ubuf.spare_capacity_mut().as_ptr(), 256);
        }
    }

    /// Takes what the decoder can out of the upstream's buffer to the client:
    /// a chunked or sized body as it came (written straight from the buffer
    /// when nothing waits before it; copied into `out` what the socket does not
    /// take), a body that ends with the connection chunked; each data range
    /// stamped and shown to the span after the write, so that the bytes leave
    /// before they are parsed. `Some` when the relay ends here.
    fn decode(
        &mut self,
        cx: &mut Context<'_>,
        up: &UpstreamConn,
        ubuf: &mut BytesMut,
        io: &mut TcpStream,
    ) -> Option<End> {
        let mut ranges = Ranges::new();
        let used = match self.dec.scan(ubuf, |r| ranges.push(r)) {
            Ok(n) => n,
            Err(e) => {
                return Some(End::Broke(
                    Cause::Disconnect,
                    format!("the upstream's body broke: {e}"),
                ));
            }
        };
        let mut gone = false;
        if used > 0 && !self.rechunk {
            let raw = &ubuf[..used];
            let written = match self.out.is_empty() {
                true => match Pin::new(&mut *io).poll_write(cx, raw) {
                    Poll::Ready(Ok(0)) | Poll::Ready(Err(_)) => {
                        gone = true;
                        used
                    }
                    Poll::Ready(Ok(n)) => n,
                    Poll::Pending => 0,
                },
                false => 0,
            };
            if written < used {
                self.out.push(Bytes::copy_from_slice(&raw[written..]));
            }
        }
        for r in ranges {
            let d = &ubuf[r];
            let st = up.frame(d, self.sent_at);
            if let Some(t) = self.track.as_mut() {
                t.data_stamped(d, st, up.kernel());
            }
            self.last_data = st.received;
            self.fresh = Some(st.received);
            if self.rechunk {
                self.out.push(h1::chunk_line(&mut self.scratch, d.len()));
                self.out.push(Bytes::copy_from_slice(d));
                self.out.push(h1::CRLF);
            }
        }
        if gone {
            return Some(End::ClientGone);
        }
        ubuf.advance(used);
        if self.dec.ended() {
            self.end();
        }
        None
    }

    fn end(&mut self) {
        if self.finished {
            return;
        }
        self.finished = true;
        if let Some(mut t) = self.track.take() {
            t.end(Instant::now());
        }
        if self.rechunk {
            self.out.push(h1::LAST_CHUNK);
        }
    }

    /// Writes `out` to the client (as much as its socket takes).
    fn write(&mut self, cx: &mut Context<'_>, io: &mut TcpStream) -> Poll<Result<(), ()>> {
        while !self.out.is_empty() {
            let mut slices = [IoSlice::new(&[]); 32];
            let k = self.out.len().min(slices.len());
            for (s, b) in slices.iter_mut().zip(&self.out) {
                *s = IoSlice::new(b);
            }
            let mut n = match Pin::new(&mut *io).poll_write_vectored(cx, &slices[..k]) {
                Poll::Pending => return Poll::Pending,
                Poll::Ready(Ok(0)) | Poll::Ready(Err(_)) => return Poll::Ready(Err(())),
                Poll::Ready(Ok(n)) => n,
            };
            let mut whole = 0;
            for b in self.out.iter_mut() {
                if n >= b.len() {
                    n -= b.len();
                    whole += 1;
                } else {
                    b.advance(n);
                    break;
                }
            }
            self.out.drain(..whole);
        }
        Poll::Ready(Ok(()))
    }

    /// Whether the upstream has been silent past the idle limit (then the limit).
    fn stalled(&mut self, cx: &mut Context<'_>) -> Option<Duration> {
        let idle = self.idle?;
        let registered = self
            .timer_task
            .as_ref()
            .is_some_and(|w| w.will_wake(cx.waker()));
        // A millisecond early: the timer's wheel rounds deadlines up to its
        // tick, so the wake it sends is never before this. The clock read when
        // this poll's data was handed on serves: microseconds old, and the
        // registered timer wakes the task by its deadline all the same.
        let now = self.fresh.unwrap_or_else(Instant::now);
        if registered && self.armed.is_some_and(|d| now + TIMER_SLACK < d) {
            return None;
        }
        let s = self
            .sleep
            .get_or_insert_with(|| Box::pin(tokio::time::sleep(idle)));
        // Data came since the timer was armed: move it to the real deadline
        // (its poll registers the waker) before calling a stall.
        while s.as_mut().poll(cx).is_ready() {
            let deadline = self.last_data + idle;
            if Instant::now() >= deadline {
                return Some(idle);
            }
            s.as_mut().reset(deadline.into());
        }
        self.armed = Some(s.deadline().into_std());
        if !registered {
            self.timer_task = Some(cx.waker().clone());
        }
        None
    }
}

/// How long before the idle timer's deadline a poll checks it anyway.
const TIMER_SLACK: Duration = Duration::from_millis(1);
