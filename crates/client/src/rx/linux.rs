//! `SO_TIMESTAMPNS` and `recvmsg` on the tokio socket (Linux): the reads behind
//! [`RxTcp`](super::RxTcp) and the kernel stamps they return.

use std::io;
use std::mem::{self, MaybeUninit};
use std::os::fd::{AsRawFd, RawFd};
use std::task::{Context, Poll, ready};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use tokio::io::{Interest, ReadBuf};
use tokio::net::TcpStream;

use super::{PEEK_CAP, READ_CAP, ReadNote, ReadState, RxCell, nanos_of, split_point, within_bound};

/// Turns on software receive timestamps (`SCM_TIMESTAMPNS` control messages,
/// `CLOCK_REALTIME`); false if the socket refuses.
pub(super) fn enable(tcp: &TcpStream) -> bool {
    let on: libc::c_int = 1;
    // SAFETY: the descriptor is an open socket owned by `tcp`; the option value
    // points to a live `c_int` and its size is passed with it.
    let r = unsafe {
        libc::setsockopt(
            tcp.as_raw_fd(),
            libc::SOL_SOCKET,
            libc::SO_TIMESTAMPNS,
            (&on as *const libc::c_int).cast(),
            mem::size_of::<libc::c_int>() as libc::socklen_t,
        )
    };
    r == 0
}

/// Control-message space for one `SCM_TIMESTAMPNS` (a 16-byte header and a
/// 16-byte timespec) and room to spare, aligned for `cmsghdr`.
#[repr(C, align(8))]
struct Control([u8; 64]);

/// One `recvmsg` into `buf`: the bytes read and the kernel's receive stamp of
/// the last packet they came from, when it sent one.
fn recv_stamped(
    fd: RawFd,
    buf: &mut [MaybeUninit<u8>],
    flags: libc::c_int,
) -> io::Result<(usize, Option<libc::timespec>)> {
    let mut control = Control([0; 64]);
    let mut iov = libc::iovec {
        iov_base: buf.as_mut_ptr().cast(),
        iov_len: buf.len(),
    };
    // SAFETY: `msghdr` is a plain C struct for which all zeroes is a valid
    // (empty) value.
    let mut msg: libc::msghdr = unsafe { mem::zeroed() };
    msg.msg_iov = &mut iov;
    msg.msg_iovlen = 1;
    let n = loop {
        msg.msg_control = control.0.as_mut_ptr().cast();
        msg.msg_controllen = mem::size_of::<Control>() as _;
        // SAFETY: `msg` points to one iovec over `buf` (writable, `buf.len()`
        // bytes; recvmsg only writes bytes, which may start uninitialised) and
        // to `control` (writable, `msg_controllen` bytes); all outlive the call.
        let n = unsafe { libc::recvmsg(fd, &mut msg, flags) };
        if n >= 0 {
            break n as usize;
        }
        let e = io::Error::last_os_error();
        if e.kind() != io::ErrorKind::Interrupted {
            return Err(e);
        }
    };
    let want = mem::size_of::<libc::timespec>();
    let mut stamp = None;
    // SAFETY: the kernel filled `msg_control` with `msg_controllen` bytes of
    // well-formed control messages; CMSG_FIRSTHDR/CMSG_NXTHDR stay within them
    // and return null at the end; the data is read unaligned and only when its
    // length is exactly one `timespec`.
    unsafe {
        let mut c = libc::CMSG_FIRSTHDR(&msg);
        while !c.is_null() {
            let h = &*c;
            if h.cmsg_level == libc::SOL_SOCKET
                && h.cmsg_type == libc::SCM_TIMESTAMPNS
                && h.cmsg_len as usize == libc::CMSG_LEN(want as u32) as usize
            {
                stamp = Some(std::ptr::read_unaligned(
                    libc::CMSG_DATA(c).cast::<libc::timespec>(),
                ));
            }
            c = libc::CMSG_NXTHDR(&msg, c);
        }
    }
    Ok((n, stamp))
}

/// The monotonic instant of a kernel `CLOCK_REALTIME` stamp, or now when there
/// is none. `lag = wall_now − stamp` (never below zero) is taken from now: the
/// wall clock is read first, so the result is never earlier than the arrival
/// (by the few nanoseconds between the two clock reads). A wall-clock step
/// between arrival and read would shift it by the step.
fn arrival(stamp: Option<libc::timespec>) -> Instant {
    let wall = SystemTime::now();
    let now = Instant::now();
    let Some(ts) = stamp else {
        return now;
    };
    let (Ok(secs), Ok(nanos)) = (u64::try_from(ts.tv_sec), u32::try_from(ts.tv_nsec)) else {
        return now;
    };
    if nanos >= 1_000_000_000 {
        return now;
    }
    let at = UNIX_EPOCH + Duration::new(secs, nanos);
    let lag = wall.duration_since(at).unwrap_or(Duration::ZERO);
    now.checked_sub(lag).unwrap_or(now)
}

/// One `recvmsg` and the arrival of what it read (see [`arrival`]).
fn recv_at(
    fd: RawFd,
    buf: &mut [MaybeUninit<u8>],
    flags: libc::c_int,
) -> io::Result<(usize, Instant)> {
    let (n, stamp) = recv_stamped(fd, buf, flags)?;
    Ok((n, arrival(stamp)))
}

/// Whether the bytes queued after a read carry the read's own kernel stamp
/// `raw`: then the kernel merged them into the buffer the read took its last
/// byte from, and `raw` is their arrival, later than that byte's. One
/// one-byte peek; nothing queued, or no stamp, says no.
fn shares_stamp(fd: RawFd, raw: Option<libc::timespec>) -> bool {
    let Some(s) = raw else { return false };
    let mut one = [MaybeUninit::<u8>::uninit(); 1];
    match recv_stamped(fd, &mut one, libc::MSG_PEEK | libc::MSG_DONTWAIT) {
        Ok((1, Some(t))) => t.tv_sec == s.tv_sec && t.tv_nsec == s.tv_nsec,
        _ => false,
    }
}

/// One read as the state asks: the bytes read, their arrival, and whether
/// the socket may hold more (so readiness must be kept).
fn read_once(
    fd: RawFd,
    st: &mut ReadState,
    buf: &mut [MaybeUninit<u8>],
) -> io::Result<(usize, Instant, bool)> {
    let len = buf.len();
    st.shared_stamp = false;
    if !st.plain {
        let (n, stamp) = recv_at(fd, buf, 0)?;
        return Ok((n, stamp, n == len));
    }
    if st.split {
        // Bytes a peek already saw, all within the bound of the last read:
        // take them at once (its stamp serves them all; no peek needed).
        if st.rest > 0 {
            let take = st.rest.min(len);
            let (m, raw) = recv_stamped(fd, &mut buf[..take], 0)?;
            // Bytes that came after the peek may have been merged in.
            st.shared_stamp = m > 0 && shares_stamp(fd, raw);
            st.rest -= m.min(st.rest);
            return Ok((m, arrival(raw), m > 0));
        }
        // Peek to see the backlog and where its first server write ends,
        // then take exactly that much, so the kernel's stamp is the arrival
        // of that write's last byte.
        let want = len.min(PEEK_CAP);
        let (n, stamp) = recv_at(fd, &mut buf[..want], libc::MSG_PEEK)?;
        if n == 0 {
            let (n, stamp) = recv_at(fd, buf, 0)?;
            return Ok((n, stamp, false));
        }
        // SAFETY: the peek wrote `n` initialised bytes at the start of `buf`.
        let peeked: &[u8] = unsafe { std::slice::from_raw_parts(buf.as_ptr().cast(), n) };
        let last = nanos_of(stamp);
        // All of the backlog arrived within the bound of the last read:
        // splitting it gains nothing.
        let take = if within_bound(st.prev, last) {
            n
        } else {
            split_point(peeked)
        };
        let has_event = super::has_event(&peeked[..take]);
        let (m, raw) = recv_stamped(fd, &mut buf[..take], 0)?;
        let stamp = arrival(raw);
        // The first write may have been merged with later ones while it waited.
        st.shared_stamp = m > 0 && m < n && shares_stamp(fd, raw);
        if has_event && m == take {
            st.awaiting_event = false;
        }
        if m == take && m < n && within_bound(nanos_of(stamp), last) {
            // The rest of what was peeked arrived within the bound of this
            // read: the next read takes it whole.
            st.rest = n - m;
        }
        let more = m < n || n == want;
        if !more && !st.awaiting_event {
            st.split = false;
        }
        return Ok((m, stamp, more));
    }
    let want = len.min(READ_CAP);
    let (n, raw) = recv_stamped(fd, &mut buf[..want], 0)?;
    let stamp = arrival(raw);
    st.shared_stamp = n == want && shares_stamp(fd, raw);
    // SAFETY: recvmsg wrote `n` initialised bytes at the start of `buf`.
    let got: &[u8] = unsafe { std::slice::from_raw_parts(buf.as_ptr().cast(), n) };
    if n == want || super::several_events(got) {
        st.split = true;
    }
    Ok((n, stamp, n == want))
}

/// `AsyncRead::poll_read` through `recvmsg`, noting each read in `cell`: its
/// bytes' buffer range and arrival (the kernel's stamp, or the read's own
/// instant when the kernel sent none, so the cell is never earlier than the
/// arrival of any byte read).
pub(super) fn poll_read_stamped(
    tcp: &TcpStream,
    cell: &RxCell,
    st: &mut ReadState,
    cx: &mut Context<'_>,
    buf: &mut ReadBuf<'_>,
) -> Poll<io::Result<()>> {
    if buf.remaining() == 0 {
        return Poll::Ready(Ok(()));
    }
    let fd = tcp.as_raw_fd();
    loop {
        ready!(tcp.poll_read_ready(cx))?;
        // SAFETY: recvmsg only writes initialised bytes into the slice and never
        // de-initialises any; `assume_init` below covers exactly the `n` written.
        let unfilled = unsafe { buf.unfilled_mut() };
        let mut got = None;
        let res = tcp.try_io(Interest::READABLE, || {
            let (n, stamp, more) = read_once(fd, st, unfilled)?;
            got = Some((n, stamp));
            // As tokio's own TCP read on epoll: a short read shows the socket
            // was drained, so report WouldBlock to have `try_io` clear the
            // readiness (with the tick it saw before this read, so a newer
            // event is kept) and spare the next poll a failing syscall. The
            // bytes read are returned below all the same.
            if n > 0 && !more {
                Err(io::ErrorKind::WouldBlock.into())
            } else {
                Ok(())
            }
        });
        match (got, res) {
            (Some((n, stamp)), _) => {
                // SAFETY: recvmsg wrote `n` bytes at the start of the unfilled
                // part.
                unsafe { buf.assume_init(n) };
                let start = buf.filled().len();
                buf.advance(n);
                if n > 0 {
                    st.seq += 1;
                    let bytes = &buf.filled()[start..];
                    let at = if st.local {
                        st.last = ReadNote::new(bytes, stamp, st.prev, st.seq, st.shared_stamp);
                        st.last.at
                    } else {
                        cell.note_read(bytes, stamp, st.prev, st.seq, st.shared_stamp)
                    };
                    // A shared stamp is not this read's last byte's arrival:
                    // the next read's bytes may have come before it, so they
                    // are bounded by the last unshared read's arrival.
                    if !st.shared_stamp {
                        st.prev = at;
                    }
                }
                return Poll::Ready(Ok(()));
            }
            (None, Err(e)) if e.kind() == io::ErrorKind::WouldBlock => continue,
            (None, Err(e)) => return Poll::Ready(Err(e)),
            (None, Ok(())) => unreachable!("try_io returned Ok without running the read"),
        }
    }
}
