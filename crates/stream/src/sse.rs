//! A sans-I/O Server-Sent Events parser (bytes in, events out), following the
//! WHATWG `text/event-stream` rules, shared by the client and the proxy.
//!
//! Feed it every read of a response body with [`SseParser::push`]; it calls back
//! once per event that the read *completed*, in order, and returns how many that
//! was. It does no I/O and takes no time stamps: the caller stamps one
//! `Instant::now()` per read (right after the read returns) and gives that instant
//! to every event the push completed. An event split across reads is therefore
//! stamped by the read that brought its last byte (its terminating blank line), and
//! several events completed by one read share that read's instant — the client
//! cannot know when the bytes left the server within one read.
//!
//! Handled: events split anywhere across reads (inside a line, inside a `\r\n`, or
//! inside the byte-order mark), several events per read, `\n`, `\r\n` and `\r` line
//! ends, `:` comments, multi-line `data:` (joined with `\n`), `event:`, `id:` and
//! `retry:` lines, unknown fields (ignored), a leading UTF-8 BOM.
//!
//! Allocation: none per event. An event whose one `data:` line lies inside a single
//! read is handed out as a slice of that read; only events split across reads or
//! with several `data:` lines are copied, into buffers that are reused.

use std::fmt;

/// One dispatched event. The slices borrow the parser's buffers or the pushed bytes
/// and live only for the callback.
#[derive(Clone, Copy, PartialEq, Eq)]
pub struct Event<'a> {
    /// The `event:` field; empty when absent (the SSE default type, `message`).
    pub event: &'a [u8],
    /// The `data:` lines joined with `\n` (without the final newline).
    pub data: &'a [u8],
    /// The last `id:` seen in the stream so far (it persists across events); empty
    /// when none.
    pub id: &'a [u8],
}

impl Event<'_> {
    /// Whether this is a plain message event (no `event:` line, or `event: message`).
    pub fn is_message(&self) -> bool {
        self.event.is_empty() || self.event == b"message"
    }
}

impl fmt::Debug for Event<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Event")
            .field("event", &String::from_utf8_lossy(self.event))
            .field("data", &String::from_utf8_lossy(self.data))
            .field("id", &String::from_utf8_lossy(self.id))
            .finish()
    }
}

/// An event or line grew past the parser's size limit.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("SSE event larger than {limit} bytes")]
pub struct SseError {
    /// The limit in force.
    pub limit: usize,
}

const BOM: [u8; 3] = [0xEF, 0xBB, 0xBF];

/// Where the pending event's data lives.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Pending {
    /// No `data:` line yet.
    None,
    /// One `data:` line, a range of the bytes being pushed (zero copy).
    Input(usize, usize),
    /// In `self.data`.
    Buffer,
}

/// Incremental `text/event-stream` parser. Reuse one per stream; [`SseParser::reset`]
/// makes it ready for another stream while keeping its buffers.
#[derive(Debug)]
pub struct SseParser {
    /// An unterminated line carried over from earlier pushes.
    line: Vec<u8>,
    /// The pending event's data when it could not stay a slice of the input.
    data: Vec<u8>,
    /// The pending event's `event:` field.
    event: Vec<u8>,
    /// The last event id.
    id: Vec<u8>,
    pending: Pending,
    /// The last valid `retry:` value, in milliseconds.
    retry: Option<u64>,
    /// The previous push ended with `\r`: a `\n` starting the next one belongs to it.
    skip_lf: bool,
    /// Bytes of the BOM matched at the start of the stream so far.
    bom_matched: u8,
    /// The start of the stream has been checked for a BOM.
    bom_done: bool,
    max_event_bytes: usize,
}

impl Default for SseParser {
    fn default() -> Self {
        SseParser::new()
    }
}

impl SseParser {
    /// A parser with a 16 MiB limit per line and per event.
    pub fn new() -> Self {
        SseParser::with_limit(16 << 20)
    }

    /// A parser that rejects lines or events larger than `max_event_bytes`.
    pub fn with_limit(max_event_bytes: usize) -> Self {
        SseParser {
            line: Vec::new(),
            data: Vec::new(),
            event: Vec::new(),
            id: Vec::new(),
            pending: Pending::None,
            retry: None,
            skip_lf: false,
            bom_matched: 0,
            bom_done: false,
            max_event_bytes,
        }
    }

    /// Forgets the stream seen so far (keeps the buffers' memory).
    pub fn reset(&mut self) {
        self.line.clear();
        self.data.clear();
        self.event.clear();
        self.id.clear();
        self.pending = Pending::None;
        self.retry = None;
        self.skip_lf = false;
        self.bom_matched = 0;
        self.bom_done = false;
    }

    /// The last `retry:` value of the stream (milliseconds), if any.
    pub fn retry_ms(&self) -> Option<u64> {
        self.retry
    }

    /// Whether bytes of an unfinished event or line are held (a stream that ends
    /// now ends mid-event).
    pub fn has_partial(&self) -> bool {
        !self.line.is_empty() || self.pending != Pending::None || !self.event.is_empty()
    }

    /// Parses the next bytes of the stream, calling `on_event` for every event they
    /// complete, in order. Returns the number of events completed.
    pub fn push<F>(&mut self, input: &[u8], mut on_event: F) -> Result<usize, SseError>
    where
        F: FnMut(Event<'_>),
    {
        let mut pos = 0;
        if !self.bom_done {
            while pos < input.len() && (self.bom_matched as usize) < BOM.len() {
                if input[pos] == BOM[self.bom_matched as usize] {
                    self.bom_matched += 1;
                    pos += 1;
                } else {
                    // Not a BOM after all: the bytes matched so far are content.
                    let matched = self.bom_matched as usize;
                    self.line.extend_from_slice(&BOM[..matched]);
                    self.bom_matched = BOM.len() as u8;
                }
            }
            if (self.bom_matched as usize) < BOM.len() {
                return Ok(0); // the whole push was a prefix of the BOM
            }
            self.bom_done = true;
        }
        if self.skip_lf && pos < input.len() {
            self.skip_lf = false;
            if input[pos] == b'\n' {
                pos += 1;
            }
        }
        let mut events = 0;
        while pos < input.len() {
            let Some(rel) = memchr::memchr2(b'\n', b'\r', &input[pos..]) else {
                break;
            };
            let end = pos + rel;
            let next = if input[end] == b'\r' {
                if end + 1 < input.len() {
                    if input[end + 1] == b'\n' {
                        end + 2
                    } else {
                        end + 1
                    }
                } else {
                    self.skip_lf = true;
                    end + 1
                }
            } else {
                end + 1
            };
            if self.line.is_empty() {
                events += self.line_in_input(input, pos, end, &mut on_event)?;
            } else {
                if self.line.len() + (end - pos) > self.max_event_bytes {
                    return Err(self.too_big());
                }
                self.line.extend_from_slice(&input[pos..end]);
                let line = std::mem::take(&mut self.line);
                let r = self.line_owned(&line, &mut on_event);
                self.line = line;
                self.line.clear();
                events += r?;
            }
            pos = next;
        }
        if pos < input.len() {
            if self.line.len() + (input.len() - pos) > self.max_event_bytes {
                return Err(self.too_big());
            }
            self.line.extend_from_slice(&input[pos..]);
        }
        // The input goes away after this call: a pending slice of it must be copied.
        if let Pending::Input(s, e) = self.pending {
            self.data.clear();
            self.data.extend_from_slice(&input[s..e]);
            self.pending = Pending::Buffer;
        }
        Ok(events)
    }

    /// Ends the stream. The WHATWG rules drop an event that was not terminated by a
    /// blank line; this parser is lenient where no bytes were lost: if the pending
    /// event's `data:` lines were all complete (only the final blank line is
    /// missing), it is dispatched. An unterminated last line is dropped (it may be
    /// cut). Returns the number of events dispatched (0 or 1) and resets the parser.
    pub fn finish<F>(&mut self, mut on_event: F) -> usize
    where
        F: FnMut(Event<'_>),
    {
        let n = if self.pending == Pending::Buffer {
            on_event(Event {
                event: &self.event,
                data: &self.data,
                id: &self.id,
            });
            1
        } else {
            0
        };
        self.reset();
        n
    }

    fn too_big(&self) -> SseError {
        SseError {
            limit: self.max_event_bytes,
        }
    }

    /// A complete line lying in `input[start..end]` (zero-copy path).
    fn line_in_input<F>(
        &mut self,
        input: &[u8],
        start: usize,
        end: usize,
        on_event: &mut F,
    ) -> Result<usize, SseError>
    where
        F: FnMut(Event<'_>),
    {
        let line = &input[start..end];
        if line.is_empty() {
            return Ok(self.dispatch(input, on_event));
        }
        let Some((name, vstart)) = split_field(line) else {
            return Ok(0);
        };
        if name == b"data" {
            let (vs, ve) = (start + vstart, end);
            match self.pending {
                Pending::None => self.pending = Pending::Input(vs, ve),
                Pending::Input(s, e) => {
                    self.data.clear();
                    self.data.extend_from_slice(&input[s..e]);
                    self.append_data(&input[vs..ve])?;
                    self.pending = Pending::Buffer;
                }
                Pending::Buffer => self.append_data(&input[vs..ve])?,
            }
            if let Pending::Input(s, e) = self.pending
                && e - s > self.max_event_bytes
            {
                return Err(self.too_big());
            }
        } else {
            self.other_field(name, &line[vstart..]);
        }
        Ok(0)
    }

    /// A complete line that was assembled in a buffer (copy path).
    fn line_owned<F>(&mut self, line: &[u8], on_event: &mut F) -> Result<usize, SseError>
    where
        F: FnMut(Event<'_>),
    {
        if line.is_empty() {
            return Ok(self.dispatch(&[], on_event));
        }
        let Some((name, vstart)) = split_field(line) else {
            return Ok(0);
        };
        let value = &line[vstart..];
        if name == b"data" {
            match self.pending {
                Pending::None => {
                    self.data.clear();
                    self.data.extend_from_slice(value);
                    self.pending = Pending::Buffer;
                }
                // A carried-over line completes at the start of a push, before any
                // input slice can be pending.
                Pending::Input(..) | Pending::Buffer => self.append_data(value)?,
            }
        } else {
            self.other_field(name, value);
        }
        Ok(0)
    }

    fn append_data(&mut self, value: &[u8]) -> Result<(), SseError> {
        if self.data.len() + 1 + value.len() > self.max_event_bytes {
            return Err(self.too_big());
        }
        self.data.push(b'\n');
        self.data.extend_from_slice(value);
        Ok(())
    }

    fn other_field(&mut self, name: &[u8], value: &[u8]) {
        match name {
            b"event" => {
                self.event.clear();
                self.event.extend_from_slice(value);
            }
            b"id" if memchr::memchr(0, value).is_none() => {
                self.id.clear();
                self.id.extend_from_slice(value);
            }
            b"retry" if !value.is_empty() && value.iter().all(u8::is_ascii_digit) => {
                self.retry = std::str::from_utf8(value).ok().and_then(|s| s.parse().ok());
            }
            _ => {}
        }
    }

    /// A blank line: dispatch the pending event, if it has data.
    fn dispatch<F>(&mut self, input: &[u8], on_event: &mut F) -> usize
    where
        F: FnMut(Event<'_>),
    {
        let data: &[u8] = match self.pending {
            Pending::None => {
                self.event.clear();
                return 0;
            }
            Pending::Input(s, e) => &input[s..e],
            Pending::Buffer => &self.data,
        };
        on_event(Event {
            event: &self.event,
            data,
            id: &self.id,
        });
        self.pending = Pending::None;
        self.data.clear();
        self.event.clear();
        1
    }
}

/// Splits a non-empty line into its field name and the offset of its value; `None`
/// for a comment. One space after the colon is not part of the value.
#[inline]
fn split_field(line: &[u8]) -> Option<(&[u8], usize)> {
    if line[0] == b':' {
        return None;
    }
    match memchr::memchr(b':', line) {
        Some(c) => {
            let v = if line.get(c + 1) == Some(&b' ') {
                c + 2
            } else {
                c + 1
            };
            Some((&line[..c], v))
        }
        None => Some((line, line.len())),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Debug, Clone, PartialEq, Eq)]
    struct Owned {
        event: String,
        data: String,
        id: String,
    }

    fn collect(parser: &mut SseParser, input: &[u8], out: &mut Vec<Owned>) -> usize {
        parser
            .push(input, |e| {
                out.push(Owned {
                    event: String::from_utf8(e.event.to_vec()).unwrap(),
                    data: String::from_utf8(e.data.to_vec()).unwrap(),
                    id: String::from_utf8(e.id.to_vec()).unwrap(),
                })
            })
            .unwrap()
    }

    fn parse_all(input: &[u8]) -> Vec<Owned> {
        let mut p = SseParser::new();
        let mut out = Vec::new();
        collect(&mut p, input, &mut out);
        out
    }

    fn data(events: &[Owned]) -> Vec<&str> {
        events.iter().map(|e| e.data.as_str()).collect()
    }

    #[test]
    fn several_events_in_one_read() {
        let mut p = SseParser::new();
        let mut out = Vec::new();
        let n = collect(&mut p, b"data: a\n\ndata: b\n\ndata: [DONE]\n\n", &mut out);
        assert_eq!(n, 3);
        assert_eq!(data(&out), ["a", "b", "[DONE]"]);
    }

    #[test]
    fn event_split_across_reads_completes_on_the_last_read() {
        let mut p = SseParser::new();
        let mut out = Vec::new();
        assert_eq!(collect(&mut p, b"data: {\"a\"", &mut out), 0);
        assert_eq!(collect(&mut p, b":1}\n", &mut out), 0);
        assert!(p.has_partial());
        assert_eq!(collect(&mut p, b"\ndata: x\n\n", &mut out), 2);
        assert_eq!(data(&out), ["{\"a\":1}", "x"]);
        assert!(!p.has_partial());
    }

    #[test]
    fn crlf_and_cr_line_ends() {
        assert_eq!(
            data(&parse_all(b"data: a\r\n\r\ndata: b\r\rdata: c\n\n")),
            ["a", "b", "c"]
        );
    }

    #[test]
    fn crlf_split_between_reads_is_one_line_end() {
        let mut p = SseParser::new();
        let mut out = Vec::new();
        collect(&mut p, b"data: a\r", &mut out);
        collect(&mut p, b"\n\r", &mut out);
        collect(&mut p, b"\n", &mut out);
        assert_eq!(data(&out), ["a"]);
        // a lone CR followed by a new read starting with data is a line end too
        let mut p = SseParser::new();
        let mut out = Vec::new();
        collect(&mut p, b"data: a\r", &mut out);
        collect(&mut p, b"\rdata: b\r\r", &mut out);
        assert_eq!(data(&out), ["a", "b"]);
    }

    #[test]
    fn comments_are_ignored_and_do_not_dispatch() {
        let out = parse_all(b": ping\n\n:\n\ndata: a\n: inside\n\n");
        assert_eq!(data(&out), ["a"]);
    }

    #[test]
    fn multi_line_data_is_joined_with_newlines() {
        let out = parse_all(b"data: one\ndata:two\ndata\ndata:  three\n\n");
        assert_eq!(data(&out), ["one\ntwo\n\n three"]);
    }

    #[test]
    fn event_and_id_fields() {
        let out = parse_all(b"event: error\nid: 7\ndata: x\n\ndata: y\n\nid\ndata: z\n\n");
        assert_eq!(
            out[0],
            Owned {
                event: "error".into(),
                data: "x".into(),
                id: "7".into()
            }
        );
        assert_eq!(
            out[1],
            Owned {
                event: "".into(),
                data: "y".into(),
                id: "7".into()
            }
        );
        assert_eq!(out[2].id, "");
    }

    #[test]
    fn event_type_without_data_is_reset_at_blank_line() {
        let out = parse_all(b"event: ping\n\ndata: a\n\n");
        assert_eq!(
            out,
            [Owned {
                event: "".into(),
                data: "a".into(),
                id: "".into()
            }]
        );
    }

    #[test]
    fn retry_and_unknown_fields() {
        let mut p = SseParser::new();
        let mut out = Vec::new();
        collect(
            &mut p,
            b"retry: 1500\nfoo: bar\ndata: a\n\nretry: x\n",
            &mut out,
        );
        assert_eq!(p.retry_ms(), Some(1500));
        assert_eq!(data(&out), ["a"]);
    }

    #[test]
    fn leading_bom_is_stripped_once() {
        let mut input = BOM.to_vec();
        input.extend_from_slice(b"data: a\n\n\xEF\xBB\xBFdata: b\n\n");
        let out = parse_all(&input);
        // the second BOM is not at the stream start: it is part of the field name,
        // which is then unknown and ignored
        assert_eq!(data(&out), ["a"]);
        // a BOM split over reads
        let mut p = SseParser::new();
        let mut out = Vec::new();
        collect(&mut p, &BOM[..1], &mut out);
        collect(&mut p, &BOM[1..2], &mut out);
        collect(&mut p, &BOM[2..], &mut out);
        collect(&mut p, b"data: a\n\n", &mut out);
        assert_eq!(data(&out), ["a"]);
        // bytes that start like a BOM but are not one are kept
        let mut p = SseParser::new();
        let mut out = Vec::new();
        collect(&mut p, b"\xEF", &mut out);
        collect(&mut p, b"data: a\n\n", &mut out);
        assert!(out.is_empty(), "field name \\xEFdata is unknown");
    }

    #[test]
    fn finish_dispatches_an_event_missing_only_its_blank_line() {
        let mut p = SseParser::new();
        let mut out = Vec::new();
        collect(&mut p, b"data: [DONE]\n", &mut out);
        assert!(out.is_empty());
        let mut got = Vec::new();
        assert_eq!(p.finish(|e| got.push(e.data.to_vec())), 1);
        assert_eq!(got, [b"[DONE]".to_vec()]);
        // an unterminated line is dropped
        let mut p = SseParser::new();
        collect(&mut p, b"data: [DO", &mut out);
        assert_eq!(p.finish(|_| panic!("no event")), 0);
    }

    #[test]
    fn oversized_events_are_rejected() {
        let mut p = SseParser::with_limit(8);
        assert!(p.push(b"data: 0123456789\n\n", |_| {}).is_err());
        let mut p = SseParser::with_limit(12);
        assert!(p.push(b"data: 0123", |_| {}).is_ok());
        assert!(p.push(b"456789", |_| {}).is_err());
        let mut p = SseParser::with_limit(8);
        assert!(p.push(b"data: 0123\ndata: 4567\n", |_| {}).is_err());
    }

    #[test]
    fn reset_forgets_partial_state() {
        let mut p = SseParser::new();
        let mut out = Vec::new();
        collect(&mut p, b"data: half", &mut out);
        p.reset();
        collect(&mut p, b"data: a\n\n", &mut out);
        assert_eq!(data(&out), ["a"]);
    }
}
