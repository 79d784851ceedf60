use super::*;

fn plain(s: &str) -> Plain {
    match parse_request(s.as_bytes(), 1000) {
        Parsed::Plain(p) => p,
        other => panic!("{s:?}: {other:?}"),
    }
}

fn is_other(s: &str) -> bool {
    matches!(parse_request(s.as_bytes(), 1000), Parsed::Other)
}

#[test]
fn a_post_with_a_length_is_the_relays_and_its_head_is_consumed() {
    let s = "POST /v1/chat/completions?x=1 HTTP/1.1\r\nHost: a\r\nContent-Length: 5\r\n\
             Connection: close\r\n\r\nhello";
    let p = plain(s);
    assert_eq!(p.method, Method::POST);
    assert_eq!(p.target, "/v1/chat/completions?x=1");
    assert_eq!(
        (p.head_len, p.body_len, p.has_length),
        (s.len() - 5, 5, true)
    );
    assert!(p.close);
    assert_eq!(p.headers["host"], "a");
    let g = plain("GET /v1/models HTTP/1.1\r\n\r\n");
    assert_eq!((g.body_len, g.has_length, g.close), (0, false, false));
}

#[test]
fn a_partial_head_asks_for_more_and_an_endless_one_is_hypers() {
    assert!(matches!(
        parse_request(b"POST /v1/chat/completions HTTP/1.1\r\nHost", 1000),
        Parsed::Partial
    ));
    let endless = format!("GET / HTTP/1.1\r\nx: {}", "a".repeat(MAX_HEAD));
    assert!(is_other(&endless));
}

#[test]
fn what_hyper_serves_or_refuses_is_left_to_it() {
    for s in [
        "GET / HTTP/1.0\r\n\r\n",
        "HEAD / HTTP/1.1\r\n\r\n",
        "CONNECT a:443 HTTP/1.1\r\n\r\n",
        "GET http://a/ HTTP/1.1\r\n\r\n",
        "POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n",
        "POST / HTTP/1.1\r\nExpect: 100-continue\r\nContent-Length: 1\r\n\r\n",
        "GET / HTTP/1.1\r\nUpgrade: websocket\r\nConnection: upgrade\r\n\r\n",
        // over the body limit (413), not a number, two lengths (400)
        "POST / HTTP/1.1\r\nContent-Length: 1001\r\n\r\n",
        "POST / HTTP/1.1\r\nContent-Length: x\r\n\r\n",
        "POST / HTTP/1.1\r\nContent-Length: +1\r\n\r\n",
        "POST / HTTP/1.1\r\nContent-Length: 1, 1\r\n\r\n",
        "POST / HTTP/1.1\r\nContent-Length: 1\r\nContent-Length: 1\r\n\r\n",
        "GARBAGE\r\n\r\n",
    ] {
        assert!(is_other(s), "{s:?}");
    }
}

fn head(s: &str) -> ResponseHead {
    parse_response(s.as_bytes()).unwrap().unwrap()
}

#[test]
fn a_response_heads_framing_and_keep_alive() {
    let h = head("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nrest");
    assert_eq!(
        (h.framing, h.keep_alive, h.head_len),
        (Framing::Chunked, true, 47)
    );
    let h = head("HTTP/1.1 200 OK\r\nContent-Length: 12\r\nConnection: close\r\n\r\n");
    assert_eq!((h.framing, h.keep_alive), (Framing::Length(12), false));
    let h = head("HTTP/1.1 200 OK\r\n\r\n");
    assert_eq!((h.framing, h.keep_alive), (Framing::UntilClose, false));
    let h = head("HTTP/1.0 200 OK\r\nContent-Length: 1\r\n\r\n");
    assert!(!h.keep_alive, "HTTP/1.0 closes unless it says keep-alive");
    let h = head("HTTP/1.1 204 No Content\r\nContent-Length: 9\r\n\r\n");
    assert_eq!(h.framing, Framing::Empty);
    let h = head("HTTP/1.1 100 Continue\r\n\r\n");
    assert!(h.status.is_informational());
    assert!(
        parse_response(b"HTTP/1.1 200 OK\r\nContent-Le")
            .unwrap()
            .is_none()
    );
    for bad in [
        "HTTP/1.1 200 OK\r\nContent-Length: x\r\n\r\n",
        "HTTP/1.1 200 OK\r\nContent-Length: -1\r\n\r\n",
        "HTTP/1.1 200 OK\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\n",
        "HTTP/1.1 101 Switching Protocols\r\n\r\n",
        "nonsense\r\n\r\n",
    ] {
        assert!(parse_response(bad.as_bytes()).is_err(), "{bad:?}");
    }
}

/// Feeds `wire` to a decoder `step` bytes at a time, as reads append to a
/// buffer that loses what was consumed; the data and whether it ended.
fn decode(framing: Framing, wire: &[u8], step: usize) -> Result<(Vec<u8>, bool), BodyError> {
    let mut d = Decoder::new(framing);
    let mut buf: Vec<u8> = Vec::new();
    let mut data = Vec::new();
    // An empty first piece: a body with nothing to read ends at once.
    for part in std::iter::once(&[][..]).chain(wire.chunks(step)) {
        buf.extend_from_slice(part);
        let mut ranges = Vec::new();
        let used = d.scan(&buf, |r| ranges.push(r))?;
        for r in ranges {
            data.extend_from_slice(&buf[r]);
        }
        buf.drain(..used);
        if d.ended() {
            return Ok((data, true));
        }
    }
    Ok((data, false))
}

#[test]
fn a_chunked_body_decodes_the_same_in_any_pieces_and_ends_after_its_trailers() {
    let wire = b"5;ext=1\r\nhello\r\n0A\r\n0123456789\r\n0\r\nx-trailer: 1\r\n\r\n";
    for step in [1, 2, 3, 7, wire.len()] {
        let (data, ended) = decode(Framing::Chunked, wire, step).unwrap();
        assert_eq!(
            (data.as_slice(), ended),
            (&b"hello0123456789"[..], true),
            "{step}"
        );
    }
    let (data, ended) = decode(Framing::Chunked, b"5\r\nhel", 100).unwrap();
    assert_eq!((data.as_slice(), ended), (&b"hel"[..], false));
}

#[test]
fn a_malformed_chunked_body_is_an_error_not_a_panic() {
    for bad in [
        &b"zz\r\n"[..],
        b"5\r\nhelloXX",
        b"1234567890abcdef0\r\n",
        b"\r\n",
    ] {
        assert!(decode(Framing::Chunked, bad, 100).is_err(), "{bad:?}");
    }
    let long = vec![b'1'; MAX_SIZE_LINE + 1];
    assert!(decode(Framing::Chunked, &long, 100).is_err());
}

#[test]
fn a_length_body_ends_at_its_length_and_an_until_close_one_never_does() {
    let (data, ended) = decode(Framing::Length(4), b"abcdEXTRA", 3).unwrap();
    assert_eq!((data.as_slice(), ended), (&b"abcd"[..], true));
    assert_eq!(decode(Framing::Length(0), b"", 1).unwrap(), (vec![], true));
    assert_eq!(decode(Framing::Empty, b"x", 1).unwrap(), (vec![], true));
    let (data, ended) = decode(Framing::UntilClose, b"all of it", 4).unwrap();
    assert_eq!((data.as_slice(), ended), (&b"all of it"[..], false));
}

#[test]
fn what_is_consumed_stops_at_a_framing_line_not_yet_whole_and_at_the_bodys_end() {
    let mut d = Decoder::new(Framing::Chunked);
    let mut ranges = Vec::new();
    // the size line of the second chunk is cut: the first chunk and its CRLF go
    let used = d.scan(b"3\r\nabc\r\n1", |r| ranges.push(r)).unwrap();
    assert_eq!((used, ranges.len(), ranges.first()), (8, 1, Some(&(3..6))));
    let mut d = Decoder::new(Framing::Length(2));
    assert_eq!(
        d.scan(b"abEXTRA", |_| {}).unwrap(),
        2,
        "bytes after the body stay"
    );
    assert!(d.ended());
}

#[test]
fn heads_and_chunk_lines_are_written_as_http_1_1() {
    let mut h = HeaderMap::new();
    h.insert("content-type", HeaderValue::from_static("application/json"));
    let r = request_head(&Method::POST, "/p", "/v1/x?q=1", "up:8000", &h, Some(12));
    assert_eq!(
        &r[..],
        b"POST /p/v1/x?q=1 HTTP/1.1\r\nhost: up:8000\r\ncontent-type: application/json\r\n\
          content-length: 12\r\n\r\n"
    );
    let r = request_head(&Method::GET, "", "/", "up", &HeaderMap::new(), None);
    assert_eq!(&r[..], b"GET / HTTP/1.1\r\nhost: up\r\n\r\n");
    let r = response_head(StatusCode::OK, &h, true, true);
    assert_eq!(
        &r[..],
        b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ntransfer-encoding: chunked\r\n\
          connection: close\r\n\r\n"
    );
    let mut scratch = BytesMut::new();
    assert_eq!(&chunk_line(&mut scratch, 0)[..], b"0\r\n");
    assert_eq!(&chunk_line(&mut scratch, 255)[..], b"ff\r\n");
    assert_eq!(&chunk_line(&mut scratch, 4096)[..], b"1000\r\n");
}
