//! A client connection's first bytes, read under the header timeout before
//! hyper's HTTP/1-or-2 detection. That detection (hyper-util's `auto` builder)
//! has no timeout of its own: a connection that sends nothing, or trickles the
//! HTTP/2 preface a byte at a time, would be held open forever, and HTTP/1's
//! header timeout only starts once the version is known. The bytes read here are
//! handed back in front of the stream ([`Prefixed`]), so hyper sees them as sent.

use std::io;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;

use bytes::Bytes;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, ReadBuf};
use tokio::net::TcpStream;

/// What an HTTP/2 client sends first (RFC 9113 §3.4).
const H2_PREFACE: &[u8; 24] = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";

/// Reads until the bytes decide the version (the whole HTTP/2 preface, or a byte
/// that departs from it: HTTP/1), within `timeout`. `None`: the client closed,
/// failed or was too slow, and the connection is to be dropped.
pub(crate) async fn read_preface(mut stream: TcpStream, timeout: Duration) -> Option<Prefixed> {
    let mut head = [0u8; 24];
    let mut len = 0;
    let deadline = tokio::time::Instant::now() + timeout;
    while len < head.len() && head[..len] == H2_PREFACE[..len] {
        let n = tokio::time::timeout_at(deadline, stream.read(&mut head[len..]))
            .await
            .ok()?
            .ok()?;
        if n == 0 {
            return None;
        }
        len += n;
    }
    Some(Prefixed::new(Bytes::copy_from_slice(&head[..len]), stream))
}

/// A stream whose first bytes were already read: they are read again first.
pub(crate) struct Prefixed {
    head: Bytes,
    inner: TcpStream,
}

impl Prefixed {
    /// `inner`, with `head` read from it already.
    pub fn new(head: Bytes, inner: TcpStream) -> Prefixed {
        Prefixed { head, inner }
    }

    /// Whether the client speaks HTTP/2 (its first bytes are the preface).
    pub fn is_h2(&self) -> bool {
        self.head.starts_with(H2_PREFACE)
    }

    /// The bytes read so far (not yet served) and the stream.
    pub fn into_parts(self) -> (Bytes, TcpStream) {
        (self.head, self.inner)
    }
}

impl AsyncRead for Prefixed {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        if !this.head.is_empty() {
            let n = this.head.len().min(buf.remaining());
            buf.put_slice(&this.head.split_to(n));
            return Poll::Ready(Ok(()));
        }
        Pin::new(&mut this.inner).poll_read(cx, buf)
    }
}

impl AsyncWrite for Prefixed {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.get_mut().inner).poll_write(cx, buf)
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.get_mut().inner).poll_write_vectored(cx, bufs)
    }

    // hyper writes head and chunk in one call when the stream says it can.
    fn is_write_vectored(&self) -> bool {
        self.inner.is_write_vectored()
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().inner).poll_flush(cx)
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().inner).poll_shutdown(cx)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::AsyncWriteExt;
    use tokio::net::TcpListener;

    async fn pair() -> (TcpStream, TcpStream) {
        let l = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let c = TcpStream::connect(l.local_addr().unwrap()).await.unwrap();
        let (s, _) = l.accept().await.unwrap();
        (c, s)
    }

    #[tokio::test]
    async fn the_bytes_read_come_back_first_then_the_rest_of_the_stream() {
        let (mut c, s) = pair().await;
        c.write_all(b"GET / HTTP/1.1\r\n").await.unwrap();
        let mut p = read_preface(s, Duration::from_secs(30)).await.unwrap();
        c.write_all(b"host: x\r\n\r\n").await.unwrap();
        drop(c);
        let mut all = Vec::new();
        p.read_to_end(&mut all).await.unwrap();
        assert_eq!(all, b"GET / HTTP/1.1\r\nhost: x\r\n\r\n");
    }

    #[tokio::test]
    async fn the_http2_preface_is_read_whole_even_when_it_comes_in_pieces() {
        let (mut c, s) = pair().await;
        let t = tokio::spawn(read_preface(s, Duration::from_secs(30)));
        c.write_all(&H2_PREFACE[..5]).await.unwrap();
        tokio::task::yield_now().await;
        c.write_all(&H2_PREFACE[5..]).await.unwrap();
        let p = t.await.unwrap().unwrap();
        assert!(p.is_h2());
        assert_eq!(&p.head[..], H2_PREFACE);
    }

    #[tokio::test]
    async fn a_silent_or_closed_client_is_dropped() {
        let (_c, s) = pair().await;
        assert!(
            read_preface(s, Duration::from_millis(50)).await.is_none(),
            "silent past the timeout"
        );
        let (c, s) = pair().await;
        drop(c);
        assert!(read_preface(s, Duration::from_secs(30)).await.is_none());
    }
}
