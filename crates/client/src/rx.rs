//! When response bytes arrived at the host: kernel receive timestamps on the
//! client's sockets (Linux `SO_TIMESTAMPNS`), kept per connection in an
//! [`RxCell`], and [`read_instant`], the stamp the client gives a body read.
//!
//! Why: hyper reads the socket in its own connection task and hands each body
//! frame to the attempt's task over a channel. Under load (1,000 streams that
//! each get a token at the same engine step, simulator and client sharing two
//! cores) the attempt's task runs milliseconds after the bytes arrived, and an
//! `Instant::now()` taken there measures the client's own queueing. The kernel
//! stamps every received packet when it reaches the host's network stack; the
//! connection's reader ([`RxTcp`]) takes that stamp from each `recvmsg`, converts
//! it to the monotonic clock, and records the latest one in the connection's
//! cell. The attempt's task then stamps a frame with the cell's value (see
//! [`read_instant`] for the bounds that keep it honest).
//!
//! Costs and caveats: a read is one `recvmsg` (instead of `read`) and two vDSO
//! clock reads; turning the option on makes the kernel stamp every packet the
//! host receives while any socket has it on. The stamp is software
//! (`CLOCK_REALTIME`, converted at read time, so a wall-clock step between
//! arrival and read shifts it). On loopback the kernel stamps the bytes in the
//! sender's write; on a network, when the driver hands the packet to the stack.

use std::io;
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, LazyLock, Mutex, OnceLock};
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use memchr::memmem;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::TcpStream;

/// The process-wide origin of the nanosecond counts stored in cells.
static BASE: OnceLock<Instant> = OnceLock::new();

fn base() -> Instant {
    *BASE.get_or_init(Instant::now)
}

/// The largest read while the socket shows no backlog: larger than the SSE events
/// of LLM servers (150–500 bytes), so a client that keeps up reads each event
/// whole, and small enough that the first read of a backlog spans only a few.
pub(crate) const READ_CAP: usize = 1024;
/// How much a backlogged reader peeks: enough to see a server write of many
/// events whole (one HTTP chunk), so that one read can take it.
const PEEK_CAP: usize = 64 << 10;
/// A stamp counts as exact when it is the arrival of the event's own last byte,
/// or when every byte of its read arrived within this span.
pub(crate) const EXACT_WITHIN: Duration = Duration::from_micros(100);
/// Reads remembered per connection (hyper holds at most a few frames at a time).
const LOG_LEN: usize = 16;

fn nanos_of(at: Instant) -> u64 {
    let n = at.saturating_duration_since(base()).as_nanos();
    u64::try_from(n).unwrap_or(u64::MAX).max(1)
}

fn instant_of(n: u64) -> Instant {
    base() + Duration::from_nanos(n)
}

/// One read of the connection's reader: the buffer addresses it filled and when
/// its bytes arrived, so a body frame (a slice of hyper's read buffer) can be
/// traced to the read that brought it.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct ReadNote {
    /// The buffer range `[start, end)` the read wrote.
    start: usize,
    end: usize,
    /// Arrival of the read's last byte (ns since the base; kernel stamp, or the
    /// read's own instant).
    at: u64,
    /// Arrival of the previous read's last byte (0: none): every byte of this
    /// read arrived in `(prev, at]`.
    prev: u64,
    /// The address just past the read's last SSE event end (`\n\n`), when only
    /// line breaks follow it (the read ended with that event, so its stamp is
    /// that event's arrival); 0 otherwise.
    event_end: usize,
    /// Order of the read on its connection (from 1).
    seq: u64,
}

impl ReadNote {
    /// The note of a read that wrote `buf`, its last byte arriving at `at`
    /// (see [`RxCell::note_read`]).
    #[cfg_attr(not(target_os = "linux"), allow(dead_code))]
    pub(crate) fn new(buf: &[u8], at: Instant, prev: u64, seq: u64, shared: bool) -> ReadNote {
        // Never before the previous read's: TCP delivers in order, and an earlier
        // read the kernel did not stamp noted its own (later) instant.
        let at_n = nanos_of(at).max(prev);
        let start = buf.as_ptr() as usize;
        let event_end = match last_event_end(buf) {
            Some(i) if !shared => start + i,
            _ => 0,
        };
        ReadNote {
            start,
            end: start + buf.len(),
            at: at_n,
            prev,
            event_end,
            seq,
        }
    }

    /// Whether the read wrote the last byte of `data`.
    fn wrote_end_of(&self, data: &[u8]) -> bool {
        let last = (data.as_ptr() as usize + data.len()).wrapping_sub(1);
        self.seq > 0 && !data.is_empty() && self.start <= last && last < self.end
    }
}

/// The stamp of one body frame.
#[derive(Clone, Copy, Debug)]
pub(crate) struct FrameStamp {
    /// The arrival to stamp the frame's events with.
    pub at: Instant,
    /// When the attempt's task got the frame.
    pub received: Instant,
    /// Whether `at` is the arrival of the frame's last event itself (see
    /// [`EXACT_WITHIN`]); `false` when it only bounds it from above.
    pub exact: bool,
    /// The read the frame came from (`None`: not traced to one).
    pub read: Option<u64>,
}

#[derive(Debug, Default)]
struct ReadLog {
    notes: [ReadNote; LOG_LEN],
    next: usize,
}

/// Arrivals of bytes read from one connection: the latest arrival (nanoseconds
/// since a process-wide base instant; 0: nothing stamped yet; it only moves
/// forward) and the log of recent reads.
#[derive(Debug)]
pub(crate) struct RxCell {
    nanos: AtomicU64,
    log: Mutex<ReadLog>,
}

impl RxCell {
    /// An empty cell.
    pub fn new() -> Self {
        base();
        RxCell {
            nanos: AtomicU64::new(0),
            log: Mutex::new(ReadLog::default()),
        }
    }

    /// Notes one read: `buf` is what it wrote (in the reader's buffer), `at` the
    /// arrival of its last byte, `prev` that of the previous read's. `shared`:
    /// `at` is shared with bytes after the read (see [`ReadState::shared_stamp`]),
    /// so no event of the read has it as its own arrival.
    #[cfg_attr(not(target_os = "linux"), allow(dead_code))]
    pub(crate) fn note_read(
        &self,
        buf: &[u8],
        at: Instant,
        prev: u64,
        seq: u64,
        shared: bool,
    ) -> u64 {
        let note = ReadNote::new(buf, at, prev, seq, shared);
        {
            let mut log = self.log.lock().unwrap_or_else(|e| e.into_inner());
            let i = log.next;
            log.notes[i] = note;
            log.next = (i + 1) % LOG_LEN;
        }
        self.note(at);
        note.at
    }

    /// The read that wrote the last byte of `data` (a frame's bytes), if still
    /// in the log. The newest such read is the one: the frame's memory cannot be
    /// written again while the frame holds it.
    fn read_of(&self, data: &[u8]) -> Option<ReadNote> {
        let log = self.log.lock().unwrap_or_else(|e| e.into_inner());
        log.notes
            .iter()
            .filter(|n| n.wrote_end_of(data))
            .max_by_key(|n| n.seq)
            .copied()
    }

    /// Records that bytes read now arrived at `at` (ignored if an arrival already
    /// recorded is later).
    #[cfg_attr(not(target_os = "linux"), allow(dead_code))]
    pub fn note(&self, at: Instant) {
        let n = nanos_of(at);
        // Relaxed is enough: the connection task notes an arrival before it hands
        // the frame over through hyper's channel (a release/acquire pair), so the
        // attempt's task that received the frame sees this value or a later one.
        self.nanos.fetch_max(n, Ordering::Relaxed);
    }

    /// The latest arrival recorded, if any.
    pub fn latest(&self) -> Option<Instant> {
        match self.nanos.load(Ordering::Relaxed) {
            0 => None,
            n => Some(instant_of(n)),
        }
    }
}

/// Just past the last SSE event end (`\n\n`) of `buf` when only line breaks
/// follow it. Looks only at the line breaks that end `buf` (a read's last few
/// bytes), not at the whole read: this runs on every read.
fn last_event_end(buf: &[u8]) -> Option<usize> {
    let tail = buf
        .iter()
        .rposition(|b| !matches!(b, b'\r' | b'\n'))
        .map_or(0, |i| i + 1);
    buf[tail..]
        .windows(2)
        .rposition(|w| w[0] == b'\n' && w[1] == b'\n')
        .map(|i| tail + i + 2)
}

/// Searchers for an SSE event end and for one that ends an HTTP chunk, built
/// once: building a `memmem` searcher costs more than the search itself on a
/// short read, and a backlogged reader searches on each of its reads.
static EVENT_END: LazyLock<memmem::Finder<'static>> =
    LazyLock::new(|| memmem::Finder::new(b"\n\n"));
static CHUNK_END: LazyLock<memmem::Finder<'static>> =
    LazyLock::new(|| memmem::Finder::new(b"\n\n\r\n"));

/// Whether `buf` holds an SSE event end (`\n\n`).
#[cfg_attr(not(target_os = "linux"), allow(dead_code))]
fn has_event(buf: &[u8]) -> bool {
    EVENT_END.find(buf).is_some()
}

/// Whether `buf` holds two SSE event ends (`\n\n`) or more (counted as
/// `memmem` would: `\n\n\n` is one). A read of one chunk holds three or four
/// line feeds, so stepping from one to the next with `memchr` costs less than
/// a substring search.
fn several_events(buf: &[u8]) -> bool {
    let mut ends = 0;
    let mut at = 0;
    while let Some(i) = memchr::memchr(b'\n', &buf[at..]) {
        let i = at + i;
        if buf.get(i + 1) == Some(&b'\n') {
            ends += 1;
            if ends == 2 {
                return true;
            }
            at = i + 2;
        } else {
            at = i + 1;
        }
    }
    false
}

/// Where a backlogged reader should stop: just past the first server write in
/// `peeked` and the line breaks after it. A write is one HTTP chunk, so its end
/// is an event end followed by the chunk's CRLF (`\n\n\r\n`); its events
/// arrived together, so one read, stamped with the arrival of the write's last
/// byte, stamps them all exactly, and splitting it further buys nothing. A body
/// without chunks shows no such end: then the first event end. All of `peeked`
/// when it holds neither.
#[cfg_attr(not(target_os = "linux"), allow(dead_code))]
fn split_point(peeked: &[u8]) -> usize {
    let end = match CHUNK_END.find(peeked) {
        Some(i) => Some(i),
        None => EVENT_END.find(peeked),
    };
    match end {
        None => peeked.len(),
        Some(i) => {
            let mut p = i + 2;
            while p < peeked.len() && matches!(peeked[p], b'\r' | b'\n') {
                p += 1;
            }
            p
        }
    }
}

/// Whether bytes that arrived by `last` (ns since the base) are within the
/// exactness bound of a read that arrived at `prev` (0: no read yet), so that
/// one read can take them all and its stamp serve each of their events.
#[cfg_attr(not(target_os = "linux"), allow(dead_code))]
fn within_bound(prev: u64, last: u64) -> bool {
    prev > 0 && last.saturating_sub(prev) <= EXACT_WITHIN.as_nanos() as u64
}

/// The stamp of a body frame `data` read from a connection with cell `cell`
/// (`start`: the attempt's start; an older arrival belongs to earlier data).
/// Traced to its read when the frame is a slice of the buffer the read filled
/// (plain HTTP/1.1); else the cell's latest arrival, as [`read_stamp`].
#[inline]
pub(crate) fn frame_stamp(cell: Option<&RxCell>, data: &[u8], start: Instant) -> FrameStamp {
    let note = cell.and_then(|c| c.read_of(data));
    stamp_of(note, cell.and_then(RxCell::latest), data, start)
}

/// [`frame_stamp`] from the note of the read that wrote `data`'s last byte (if
/// known) and the connection's latest arrival.
#[inline]
fn stamp_of(
    note: Option<ReadNote>,
    latest: Option<Instant>,
    data: &[u8],
    start: Instant,
) -> FrameStamp {
    let now = Instant::now();
    if let Some(note) = note {
        let at = instant_of(note.at);
        if at >= start && at <= now {
            let floor = note.prev.max(nanos_of(start));
            let frame_end = data.as_ptr() as usize + data.len();
            // The frame's last event ended the read: the read's stamp is the
            // arrival of that event's last byte.
            let own = note.event_end == frame_end;
            let tight = note.at.saturating_sub(floor) <= EXACT_WITHIN.as_nanos() as u64;
            return FrameStamp {
                at,
                received: now,
                exact: own || tight,
                read: Some(note.seq),
            };
        }
    }
    let (at, received) = bounded(latest, start, now);
    FrameStamp {
        at,
        received,
        exact: false,
        read: None,
    }
}

/// The instant to stamp a body read (or the response head) with: the latest
/// arrival on the connection, when there is one, it is not older than
/// `not_before` (the attempt's start: an older stamp belongs to earlier data)
/// and not later than now; otherwise `Instant::now()`.
///
/// Why this is honest: the connection's reader records, on every read that
/// returns data, an instant no earlier than the bytes' arrival (the kernel's
/// stamp, or its own `now` when the kernel gave none), and does so before hyper
/// hands the frame on. So when the attempt's task holds a frame, the cell is at
/// or after the arrival of the frame's bytes, and the result lies between that
/// arrival and `Instant::now()`. With HTTP/1.1 the connection carries one
/// response at a time and the stamp is the arrival of the frame's last read (or
/// of a read just after it, if hyper already read ahead). With HTTP/2 the cell is
/// shared by the connection's streams, so the stamp is an upper bound (the latest
/// arrival of any stream's bytes), still never later than `Instant::now()`.
///
/// Hot path: one `Instant::now()`, one relaxed atomic load, no allocation.
#[inline]
pub(crate) fn read_instant(cell: Option<&RxCell>, not_before: Instant) -> Instant {
    read_stamp(cell, not_before).0
}

/// [`read_instant`] and the `Instant::now()` it was bounded by.
#[inline]
pub(crate) fn read_stamp(cell: Option<&RxCell>, not_before: Instant) -> (Instant, Instant) {
    bounded(cell.and_then(RxCell::latest), not_before, Instant::now())
}

/// `latest` when it lies in `[not_before, now)`, else `now`; and `now`.
fn bounded(latest: Option<Instant>, not_before: Instant, now: Instant) -> (Instant, Instant) {
    match latest {
        Some(at) if at >= not_before && at < now => (at, now),
        _ => (now, now),
    }
}

/// A TCP stream whose reads record arrival instants in a cell (when kernel
/// stamps could be turned on); a plain `TcpStream` otherwise.
pub(crate) struct RxTcp {
    tcp: TcpStream,
    cell: Option<Arc<RxCell>>,
    state: ReadState,
}

/// The reader's own state between reads.
#[derive(Debug, Default)]
pub(crate) struct ReadState {
    /// The bytes are plain HTTP/1.1 (not TLS): reads may be split at event ends
    /// and traced by address.
    pub plain: bool,
    /// The socket showed a backlog: take one event per read.
    pub split: bool,
    /// A request went out and no SSE event end has been read since: reads stay
    /// split until one is, so that a first token that waits in the socket
    /// behind the response head (the reader held up between the two) is read
    /// with its own arrival, not with that of the events after it.
    pub awaiting_event: bool,
    /// The arrival of the last read's last byte (ns since the base; 0: none).
    pub prev: u64,
    /// Reads so far.
    pub seq: u64,
    /// Bytes a peek saw after the split it chose: when they all arrived within
    /// the bound of that split's read, the next read takes them without peeking.
    pub rest: usize,
    /// The last read's kernel stamp is shared with bytes still queued behind it:
    /// Linux merges a segment into the one waiting in the receive queue and gives
    /// the merged buffer the newer arrival, so the stamp only bounds the read's
    /// last byte from above.
    pub shared_stamp: bool,
    /// Notes stay here ([`ReadState::last`]) instead of the cell: the one task
    /// that reads the connection also stamps its data (the proxy's own relay),
    /// so no lock is taken per read.
    pub local: bool,
    /// The last read's note, when `local`.
    pub last: ReadNote,
}

impl RxTcp {
    /// Wraps `tcp`. With a `cell`, turns on kernel receive timestamps; if the
    /// socket refuses them (or not on Linux), the cell is dropped and reads are
    /// plain reads, exactly as without one. `plain`: the stream carries HTTP/1.1
    /// in the clear (so reads may be split at SSE event ends).
    pub fn new(tcp: TcpStream, cell: Option<Arc<RxCell>>, plain: bool) -> Self {
        let cell = cell.filter(|_| enable_kernel_stamps(&tcp));
        RxTcp {
            tcp,
            cell,
            state: ReadState {
                plain,
                ..ReadState::default()
            },
        }
    }

    /// Peeks without consuming (whether the peer closed or sent something).
    pub fn poll_peek(
        &self,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<usize>> {
        self.tcp.poll_peek(cx, buf)
    }

    /// Keeps the reads' notes in the stream rather than its cell (see
    /// [`ReadState::local`]): [`RxTcp::frame_stamp`] and [`RxTcp::latest`]
    /// read them, and the cell is no longer written.
    pub fn keep_notes_local(&mut self) {
        self.state.local = true;
    }

    /// The stamp of `data` (a slice of what the last read wrote, or later),
    /// read after `start`; for a stream that keeps its notes.
    pub fn frame_stamp(&self, data: &[u8], start: Instant) -> FrameStamp {
        let last = self.state.last;
        let note = (self.cell.is_some() && last.wrote_end_of(data)).then_some(last);
        stamp_of(note, self.latest_note(), data, start)
    }

    /// The last read's arrival, not before `start` nor after now; for a stream
    /// that keeps its notes.
    pub fn latest(&self, start: Instant) -> Instant {
        bounded(self.latest_note(), start, Instant::now()).0
    }

    fn latest_note(&self) -> Option<Instant> {
        (self.cell.is_some() && self.state.last.seq > 0).then(|| instant_of(self.state.last.at))
    }

    /// Whether the stream's reads carry kernel receive stamps: asked per relayed
    /// frame, so it reads the field without touching the cell (cloning the
    /// `Arc` to ask wrote its count, a cache line the frame needs nothing else
    /// from).
    #[inline]
    pub fn kernel(&self) -> bool {
        self.cell.is_some()
    }

    /// The cell this stream records arrivals in (`None`: no kernel stamps).
    pub fn cell(&self) -> Option<Arc<RxCell>> {
        self.cell.clone()
    }
}

#[cfg(target_os = "linux")]
fn enable_kernel_stamps(tcp: &TcpStream) -> bool {
    linux::enable(tcp)
}

#[cfg(not(target_os = "linux"))]
fn enable_kernel_stamps(_tcp: &TcpStream) -> bool {
    false
}

impl AsyncRead for RxTcp {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        #[cfg(target_os = "linux")]
        if let Some(cell) = &this.cell {
            return linux::poll_read_stamped(&this.tcp, cell, &mut this.state, cx, buf);
        }
        Pin::new(&mut this.tcp).poll_read(cx, buf)
    }
}

impl RxTcp {
    /// A request went out: its response's head, role event and first token may
    /// arrive together, and only split reads stamp the first token with its own
    /// arrival (two syscalls for the response's first reads, not for the stream).
    fn wrote(&mut self, r: &Poll<io::Result<usize>>) {
        if matches!(r, Poll::Ready(Ok(n)) if *n > 0) {
            self.state.split = true;
            self.state.awaiting_event = true;
        }
    }
}

impl AsyncWrite for RxTcp {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        let this = self.get_mut();
        let r = Pin::new(&mut this.tcp).poll_write(cx, buf);
        this.wrote(&r);
        r
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().tcp).poll_flush(cx)
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().tcp).poll_shutdown(cx)
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        let this = self.get_mut();
        let r = Pin::new(&mut this.tcp).poll_write_vectored(cx, bufs);
        this.wrote(&r);
        r
    }

    fn is_write_vectored(&self) -> bool {
        self.tcp.is_write_vectored()
    }
}

#[cfg(target_os = "linux")]
mod linux;

#[cfg(test)]
mod tests;
