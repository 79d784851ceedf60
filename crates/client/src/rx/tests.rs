//! Tests of kernel receive stamps and split reads (`rx.rs`).

use super::*;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

#[test]
fn cell_is_empty_until_noted_and_only_moves_forward() {
    let cell = RxCell::new();
    assert_eq!(cell.latest(), None);
    let t1 = Instant::now();
    cell.note(t1);
    let got = cell.latest().unwrap();
    assert!(
        got <= t1 && t1 - got < Duration::from_micros(1),
        "{got:?} {t1:?}"
    );
    cell.note(base());
    assert_eq!(cell.latest(), Some(got));
}

#[test]
fn read_instant_takes_the_cell_only_within_the_attempt_and_not_after_now() {
    let start = Instant::now();
    // No cell, or an empty one: now.
    assert!(read_instant(None, start) >= start);
    let cell = RxCell::new();
    assert!(read_instant(Some(&cell), start) >= start);
    // A stamp before the attempt's start belongs to earlier data.
    cell.note(base());
    let before = Instant::now();
    assert!(read_instant(Some(&cell), before) >= before);
    // A stamp inside the attempt is used as is.
    let arrived = Instant::now();
    cell.note(arrived);
    let got = read_instant(Some(&cell), start);
    assert!(got <= arrived && arrived - got < Duration::from_micros(1));
    // A stamp later than now (not possible from a read, but bounded all the
    // same) gives way to now.
    let cell = RxCell::new();
    cell.note(Instant::now() + Duration::from_secs(3600));
    let t = Instant::now();
    let got = read_instant(Some(&cell), start);
    assert!(got >= t && got < t + Duration::from_secs(3600));
}

#[cfg(target_os = "linux")]
#[tokio::test]
async fn loopback_reads_carry_kernel_stamps_of_the_write_not_of_the_read() {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let (sent_tx, mut sent_rx) = tokio::sync::mpsc::unbounded_channel();
    // Answers every `g` with `hello`, telling the client when it wrote.
    let server = tokio::spawn(async move {
        let (mut s, _) = listener.accept().await.unwrap();
        let mut go = [0u8; 1];
        while s.read_exact(&mut go).await.is_ok() {
            let _ = sent_tx.send(Instant::now());
            s.write_all(b"hello").await.unwrap();
        }
    });
    let tcp = TcpStream::connect(addr).await.unwrap();
    let mut rx = RxTcp::new(tcp, Some(Arc::new(RxCell::new())), false);
    let cell = rx.cell().expect("loopback TCP accepts SO_TIMESTAMPNS");
    assert_eq!(cell.latest(), None);
    // The kernel turns receive stamping on in deferred work when the first
    // socket asks for it, so the first packets may come unstamped (their
    // reads then note the read's own instant); a few rounds get past that.
    let mut stamped = None;
    for _ in 0..100 {
        rx.write_all(b"g").await.unwrap();
        // Wait until the reply has arrived, then let it sit in the socket
        // before reading it.
        rx.tcp.readable().await.unwrap();
        let ready_at = Instant::now();
        tokio::time::sleep(Duration::from_millis(10)).await;
        let mut got = [0u8; 5];
        rx.read_exact(&mut got).await.unwrap();
        let read_at = Instant::now();
        assert_eq!(&got, b"hello");
        let sent = sent_rx.recv().await.unwrap();
        let arrived = cell.latest().expect("the read noted an arrival");
        assert!(arrived <= read_at, "arrival after the read returned");
        // A read's own instant comes after the 10 ms sleep; a kernel stamp
        // before readiness (5 ms of slack for a preemption inside the clock
        // conversion; such a round is just not counted).
        if arrived <= ready_at + Duration::from_millis(5) {
            stamped = Some((sent, arrived));
            break;
        }
    }
    drop(rx);
    server.await.unwrap();
    let (sent, arrived) = stamped.expect("no read in 100 carried a kernel stamp");
    // The kernel stamped the bytes in the server's write: not before it
    // (50 ms of slack for the wall-to-monotonic conversion).
    assert!(
        arrived + Duration::from_millis(50) >= sent,
        "arrival {:?} before the write",
        sent - arrived
    );
}

#[tokio::test]
async fn without_a_cell_reads_are_plain() {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let server = tokio::spawn(async move {
        let (mut s, _) = listener.accept().await.unwrap();
        s.write_all(b"plain").await.unwrap();
    });
    let mut rx = RxTcp::new(TcpStream::connect(addr).await.unwrap(), None, false);
    assert!(rx.cell().is_none());
    let mut got = Vec::new();
    rx.read_to_end(&mut got).await.unwrap();
    assert_eq!(got, b"plain");
    server.await.unwrap();
}

/// Broke: a reader held up (the proxy under `kill -STOP`) after reading a
/// response's head found its first event and the next ones waiting together,
/// read them in one plain read, and stamped the first token with the arrival of
/// the last: 60 ms late, as inexact. Reads stay split until an event is read.
#[cfg(target_os = "linux")]
#[tokio::test]
async fn a_first_event_held_behind_the_head_is_read_alone() {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let (step_tx, mut step_rx) = tokio::sync::mpsc::unbounded_channel::<()>();
    let server = tokio::spawn(async move {
        let (mut s, _) = listener.accept().await.unwrap();
        let mut req = [0u8; 1];
        s.read_exact(&mut req).await.unwrap();
        s.write_all(b"HTTP/1.1 200 OK\r\n\r\n").await.unwrap();
        step_rx.recv().await.unwrap();
        s.write_all(b"data: first\n\n").await.unwrap();
        tokio::time::sleep(Duration::from_millis(20)).await;
        s.write_all(b"data: second\n\n").await.unwrap();
        step_rx.recv().await;
    });
    let tcp = TcpStream::connect(addr).await.unwrap();
    let mut rx = RxTcp::new(tcp, Some(Arc::new(RxCell::new())), true);
    if rx.cell().is_none() {
        eprintln!("no kernel receive stamps here: reads are plain");
        return;
    }
    rx.write_all(b"g").await.unwrap();
    let mut buf = [0u8; 1024];
    let n = rx.read(&mut buf).await.unwrap();
    assert_eq!(&buf[..n], b"HTTP/1.1 200 OK\r\n\r\n");
    // Both events arrive while the reader is held up.
    step_tx.send(()).unwrap();
    tokio::time::sleep(Duration::from_millis(60)).await;
    let n = rx.read(&mut buf).await.unwrap();
    assert_eq!(&buf[..n], b"data: first\n\n", "one event per read");
    let n = rx.read(&mut buf).await.unwrap();
    assert_eq!(&buf[..n], b"data: second\n\n");
    step_tx.send(()).unwrap();
    drop(rx);
    server.await.unwrap();
}

#[test]
fn a_backlog_splits_at_the_end_of_a_server_write_not_inside_it() {
    let a = b"22\r\ndata: {\"a\":1}\n\ndata: {\"b\":2}\n\n\r\n";
    let b = b"11\r\ndata: {\"c\":3}\n\n\r\n";
    // Two chunked writes: the first ends after its CRLF, its two events whole.
    assert_eq!(split_point(&[&a[..], b].concat()), a.len());
    // A body without chunks: each event is a write of its own.
    let plain = b"data: 1\n\ndata: 2\n\n";
    assert_eq!(split_point(plain), 9);
    // No end in sight: all of it.
    assert_eq!(split_point(b"data: 1"), 7);
}

#[test]
fn one_read_serves_bytes_within_the_bound_of_the_last_read() {
    let bound = EXACT_WITHIN.as_nanos() as u64;
    assert!(!within_bound(0, 5), "no read yet: nothing to be within");
    assert!(within_bound(1_000, 1_000 + bound));
    assert!(!within_bound(1_000, 1_000 + bound + 1));
    // An arrival before the last read's (an unstamped read noted its own,
    // later, instant) is within it.
    assert!(within_bound(5_000, 1_000));
}

/// Broke: two writes 5 ms apart waiting in the socket were read in two reads,
/// and the first was counted exact, but both reads carried the same kernel
/// stamp, the second write's: Linux merges a segment into the one waiting in
/// the receive queue and gives the merged buffer the newer arrival. A read that
/// ends inside such a buffer is now an upper bound, not exact.
#[cfg(target_os = "linux")]
#[tokio::test]
async fn a_first_write_merged_with_a_later_one_in_the_socket_is_not_stamped_exact() {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let first = b"22\r\ndata: {\"a\":1}\n\ndata: {\"b\":2}\n\n\r\n".to_vec();
    let second = b"11\r\ndata: {\"c\":3}\n\n\r\n".to_vec();
    let (a, b) = (first.clone(), second.clone());
    let server = tokio::spawn(async move {
        let (mut s, _) = listener.accept().await.unwrap();
        let mut go = [0u8; 1];
        s.read_exact(&mut go).await.unwrap();
        s.write_all(&a).await.unwrap();
        tokio::time::sleep(Duration::from_millis(5)).await;
        s.write_all(&b).await.unwrap();
        // Held open until the client is done.
        let _ = s.read(&mut go).await;
    });
    let start = Instant::now();
    let tcp = TcpStream::connect(addr).await.unwrap();
    let mut rx = RxTcp::new(tcp, Some(Arc::new(RxCell::new())), true);
    let cell = rx.cell().expect("loopback TCP accepts SO_TIMESTAMPNS");
    // A request went out: the response's reads are split.
    rx.write_all(b"g").await.unwrap();
    // Both writes wait in the socket before the first read.
    let want = first.len() + second.len();
    loop {
        tokio::time::sleep(Duration::from_millis(20)).await;
        let mut peek = [0u8; 256];
        if rx.tcp.peek(&mut peek).await.unwrap() >= want {
            break;
        }
    }
    let mut buf = vec![0u8; 4096];
    let n1 = rx.read(&mut buf).await.unwrap();
    let n2 = rx.read(&mut buf[n1..]).await.unwrap();
    assert_eq!((n1, n2), (first.len(), second.len()), "one read per write");
    assert_eq!(&buf[..n1 + n2], &[first, second].concat()[..]);
    let (r1, r2) = {
        let log = cell.log.lock().unwrap();
        (log.notes[0], log.notes[1])
    };
    assert_eq!((r1.seq, r2.seq), (1, 2));
    // The frames hyper hands on: each chunk's data, without its size line and CRLF.
    let f1 = frame_stamp(Some(&cell), &buf[4..n1 - 2], start);
    let f2 = frame_stamp(Some(&cell), &buf[n1 + 4..n1 + n2 - 2], start);
    // The last read ends with the second write's last event (then the chunk's
    // CRLF) and the buffer it came from: its stamp is that event's arrival.
    assert_eq!(r2.event_end, r2.end - 2);
    assert!(f2.exact);
    // One kernel stamp converted twice to the monotonic clock may differ by a
    // few nanoseconds; distinct arrivals here are 5 ms apart.
    if r2.at.abs_diff(r1.at) < 1_000_000 {
        // The kernel merged the writes: the first read's stamp is the second
        // write's arrival, 5 ms after its own.
        assert_eq!(r1.event_end, 0);
        assert!(!f1.exact, "a merged first write counted exact");
    } else {
        assert_eq!(r1.event_end, r1.end - 2);
        assert!(f1.exact);
    }
    drop(rx);
    server.await.unwrap();
}

#[test]
fn an_event_end_counts_only_when_line_breaks_alone_follow_it() {
    assert_eq!(last_event_end(b"data: a\n\n"), Some(9));
    assert_eq!(
        last_event_end(b"data: a\n\n\r\n"),
        Some(9),
        "a chunk's CRLF after it"
    );
    assert_eq!(last_event_end(b"data: a\n\ndata: b\n\n\r\n"), Some(18));
    assert_eq!(
        last_event_end(b"data: a\n\ndata: b"),
        None,
        "an event begun after it"
    );
    assert_eq!(last_event_end(b"data: a\n"), None);
    assert_eq!(last_event_end(b"\n\n"), Some(2));
    assert_eq!(last_event_end(b""), None);
}

/// A stream that keeps its notes (the proxy's own relay reads and stamps in one
/// task) traces data to its last read without writing the cell.
#[cfg(target_os = "linux")]
#[tokio::test]
async fn a_stream_keeping_its_notes_traces_data_to_its_last_read_and_leaves_the_cell() {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let server = tokio::spawn(async move {
        let (mut s, _) = listener.accept().await.unwrap();
        s.write_all(b"11\r\ndata: {\"c\":3}\n\n\r\n").await.unwrap();
        let mut go = [0u8; 1];
        let _ = s.read(&mut go).await;
    });
    let start = Instant::now();
    let tcp = TcpStream::connect(addr).await.unwrap();
    let mut rx = RxTcp::new(tcp, Some(Arc::new(RxCell::new())), true);
    rx.keep_notes_local();
    let cell = rx.cell().expect("loopback TCP accepts SO_TIMESTAMPNS");
    let mut buf = vec![0u8; 4096];
    let n = rx.read(&mut buf).await.unwrap();
    // The read may stop at the event's end, before the chunk's CRLF.
    assert!(n >= 21, "{n}");
    let data = &buf[4..21];
    let f = rx.frame_stamp(data, start);
    assert_eq!(f.read, Some(1), "traced to the read");
    assert!(f.at >= start && f.at <= f.received);
    assert_eq!(
        rx.latest(start),
        f.at,
        "the head's stamp is the last read's"
    );
    assert_eq!(cell.latest(), None, "the cell is not written");
    // Data the last read did not write is not traced to it.
    let other = [0u8; 4];
    assert_eq!(rx.frame_stamp(&other, start).read, None);
    drop(rx);
    server.await.unwrap();
}

#[test]
fn several_events_counts_event_ends_as_a_substring_search_does() {
    let one = b"4d\r\ndata: {\"a\":1}\n\n\r\n";
    assert!(!several_events(one));
    assert!(several_events(b"data: 1\n\ndata: 2\n\n"));
    // `\n\n\n` is one end (non-overlapping), `\n\n\n\n` two.
    assert!(!several_events(b"data: 1\n\n\n"));
    assert!(several_events(b"data: 1\n\n\n\n"));
    assert!(!several_events(b""));
    assert!(!several_events(b"\n"));
}

proptest::proptest! {
    #[test]
    fn several_events_agrees_with_memmem(buf in proptest::collection::vec(
        proptest::sample::select(vec![b'\n', b'\r', b'a', b':']), 0..64,
    )) {
        let want = memchr::memmem::find_iter(&buf, b"\n\n").nth(1).is_some();
        proptest::prop_assert_eq!(several_events(&buf), want);
    }
}
