//! The response body the client reads: the upstream body relayed frame by frame
//! as it arrives (never buffered), each data frame shown to the request's
//! [`Track`] on the way; an upstream that sends nothing for the idle limit is
//! cut (`timeout_stall`). Dropped before its end (the client went away), it drops
//! the upstream body too, which closes that connection: the upstream stops.

use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use bytes::Bytes;
use http_body::{Body, Frame, SizeHint};
use http_body_util::Full;
use hyper::body::Incoming;
use tokio::time::Sleep;
use tpscope_client::UpstreamRx;
use tpscope_model::Cause;

use crate::track::Track;

/// A body error as the server reports it.
pub type BoxError = Box<dyn std::error::Error + Send + Sync>;

/// What the proxy answers with: its own short body, or a relayed one.
pub enum ProxyBody {
    /// A response of the proxy itself (an error, the metrics).
    Full(Full<Bytes>),
    /// The upstream's body.
    Relay(Box<Relay>),
}

impl ProxyBody {
    /// A body of the proxy's own.
    pub fn full(b: impl Into<Bytes>) -> ProxyBody {
        ProxyBody::Full(Full::new(b.into()))
    }
}

/// The upstream's body being relayed.
pub struct Relay {
    inner: Incoming,
    track: Option<Track>,
    idle: Option<Duration>,
    /// Fires at the earliest possible stall; re-armed lazily from `last_data`
    /// (resetting a timer on every frame costs more than the relay itself).
    sleep: Option<Pin<Box<Sleep>>>,
    /// The task the timer was last polled for: until its deadline it will wake
    /// that task, so a poll before then only costs (twice per relayed frame).
    timer_task: Option<std::task::Waker>,
    last_data: Instant,
    ended: bool,
    /// The upstream connection's arrival stamps, and when the request went.
    rx: UpstreamRx,
    sent_at: Instant,
}

impl Relay {
    /// Relays `inner`, recording into `track` when it is a completion.
    pub fn new(
        inner: Incoming,
        track: Option<Track>,
        idle: Option<Duration>,
        rx: UpstreamRx,
        sent_at: Instant,
    ) -> Relay {
        Relay {
            rx,
            sent_at,
            inner,
            track,
            idle,
            sleep: idle.map(|d| Box::pin(tokio::time::sleep(d))),
            timer_task: None,
            last_data: Instant::now(),
            ended: false,
        }
    }
}

/// How long before the idle timer's deadline a poll checks it anyway.
const TIMER_SLACK: Duration = Duration::from_millis(1);

#[derive(Debug, thiserror::Error)]
#[error("the upstream sent nothing for {0:?}; the response was cut")]
struct Stalled(Duration);

impl Body for ProxyBody {
    type Data = Bytes;
    type Error = BoxError;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, BoxError>>> {
        match self.get_mut() {
            ProxyBody::Full(f) => Pin::new(f).poll_frame(cx).map_err(|e| match e {}),
            ProxyBody::Relay(r) => r.poll(cx),
        }
    }

    fn is_end_stream(&self) -> bool {
        match self {
            ProxyBody::Full(f) => f.is_end_stream(),
            ProxyBody::Relay(r) => r.ended,
        }
    }

    fn size_hint(&self) -> SizeHint {
        match self {
            ProxyBody::Full(f) => f.size_hint(),
            ProxyBody::Relay(r) => r.inner.size_hint(),
        }
    }
}

impl Relay {
    fn poll(&mut self, cx: &mut Context<'_>) -> Poll<Option<Result<Frame<Bytes>, BoxError>>> {
        if self.ended {
            return Poll::Ready(None);
        }
        match Pin::new(&mut self.inner).poll_frame(cx) {
            Poll::Ready(Some(Ok(frame))) => {
                if let Some(d) = frame.data_ref() {
                    let st = self.rx.frame(d, self.sent_at);
                    if let Some(t) = self.track.as_mut() {
                        t.data_stamped(d, st, self.rx.kernel());
                    }
                    self.last_data = st.received;
                }
                // A body of known length is complete with its last byte; the
                // server may not poll again.
                if self.inner.is_end_stream() {
                    self.ended = true;
                    if let Some(mut t) = self.track.take() {
                        t.end(Instant::now());
                    }
                }
                Poll::Ready(Some(Ok(frame)))
            }
            Poll::Ready(Some(Err(e))) => {
                self.ended = true;
                if let Some(mut t) = self.track.take() {
                    t.fail(Cause::Disconnect, format!("the upstream's body broke: {e}"));
                }
                Poll::Ready(Some(Err(Box::new(e))))
            }
            Poll::Ready(None) => {
                self.ended = true;
                if let Some(mut t) = self.track.take() {
                    t.end(Instant::now());
                }
                Poll::Ready(None)
            }
            Poll::Pending => {
                let (Some(s), Some(idle)) = (self.sleep.as_mut(), self.idle) else {
                    return Poll::Pending;
                };
                // A millisecond early: the timer's wheel rounds deadlines up to
                // its tick, so the wake it sends is never before this.
                if self
                    .timer_task
                    .as_ref()
                    .is_some_and(|w| w.will_wake(cx.waker()))
                    && Instant::now() + TIMER_SLACK < s.deadline().into_std()
                {
                    return Poll::Pending;
                }
                // Data came since the timer was armed: move it to the real
                // deadline (its poll registers the waker) before calling a stall.
                let mut fired = s.as_mut().poll(cx).is_ready();
                while fired {
                    let deadline = self.last_data + idle;
                    if Instant::now() >= deadline {
                        break;
                    }
                    s.as_mut().reset(deadline.into());
                    fired = s.as_mut().poll(cx).is_ready();
                }
                if fired {
                    self.ended = true;
                    if let Some(mut t) = self.track.take() {
                        t.fail(
                            Cause::TimeoutStall,
                            format!("the upstream sent nothing for {idle:?}"),
                        );
                    }
                    return Poll::Ready(Some(Err(Box::new(Stalled(idle)))));
                }
                if !self
                    .timer_task
                    .as_ref()
                    .is_some_and(|w| w.will_wake(cx.waker()))
                {
                    self.timer_task = Some(cx.waker().clone());
                }
                Poll::Pending
            }
        }
    }
}
