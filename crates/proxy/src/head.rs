//! The repeated head of an OpenAI stream's chunks, parsed once per stream: every
//! chunk of a chat or text completion starts with the same bytes
//! (`{"id":…,"object":…,"created":…,"model":…,`), which tell the span nothing
//! new after the first chunk. [`Head`] learns them from a chunk, and hands each
//! later chunk that starts with them to the decoder as `{` and the rest: the
//! chunk scanner then reads about half the bytes (the relay's largest cost in
//! user space, docs/proxy-bench.md).
//!
//! Why it is exact: the head holds only whole top-level fields of an allowlist
//! (identity fields that the decoder takes from the first chunk, or never), each
//! with a string, number or literal value, so `{` + rest is a JSON object exactly
//! when the chunk is one, and decodes to the same tokens, text, finish reason,
//! usage and errors. The one leniency: a later chunk repeating an allowlisted
//! field in its rest is not refused as a duplicate.

use tpscope_stream::Event;
use tpscope_stream::openai::is_done;

/// Fields a head may hold: identical in every chunk of a stream, and read by
/// the decoder from its first chunk only (`id`, `model`), to spot an error
/// object (`object`; an error's differs, so its chunk does not match), or not
/// at all.
const FIELDS: [&[u8]; 6] = [
    b"id",
    b"object",
    b"created",
    b"model",
    b"system_fingerprint",
    b"service_tier",
];

/// Heads learned again after a mismatch, at most (a server whose heads vary
/// from chunk to chunk is then decoded in full, as without a head).
const RELEARN: u8 = 4;

/// A stream's learned head and the buffer its shortened chunks are built in.
#[derive(Default)]
pub(crate) struct Head {
    /// `{` and whole `"field":value,` pairs; empty: none learned.
    head: Vec<u8>,
    buf: Vec<u8>,
    learned: u8,
}

impl Head {
    /// Passes `ev` to `decode`, shortened when it starts with the learned head;
    /// learns a head from a chunk that does not.
    pub fn relay(&mut self, ev: Event<'_>, decode: impl FnOnce(Event<'_>)) {
        if !ev.is_message() || is_done(ev.data) {
            return decode(ev);
        }
        // The rest must start with the next field's key: `{` + rest is then an
        // object exactly when the chunk is one (a trailing comma stays an error).
        if self.head.len() > 1
            && ev.data.get(self.head.len()) == Some(&b'"')
            && ev.data.starts_with(&self.head)
        {
            self.buf.clear();
            self.buf.push(b'{');
            self.buf.extend_from_slice(&ev.data[self.head.len()..]);
            return decode(Event {
                data: &self.buf,
                ..ev
            });
        }
        decode(ev);
        if self.learned < RELEARN {
            self.learned += 1;
            self.head.clear();
            let n = head_len(ev.data);
            self.head.extend_from_slice(&ev.data[..n]);
        }
    }
}

/// The length of `data`'s head: `{` and the leading `"field":value,` pairs whose
/// field is in [`FIELDS`] and whose value is a string, number or literal, up to
/// and including the comma after the last; 0 when there is no such pair.
fn head_len(data: &[u8]) -> usize {
    if data.first() != Some(&b'{') {
        return 0;
    }
    let mut end = 0;
    let mut i = 1;
    loop {
        let Some((key, after)) = string(data, i) else {
            return end;
        };
        if !FIELDS.contains(&key) || data.get(after) != Some(&b':') {
            return end;
        }
        let Some(next) = scalar(data, after + 1) else {
            return end;
        };
        if data.get(next) != Some(&b',') {
            return end;
        }
        i = next + 1;
        end = i;
    }
}

/// The body of the string starting at `at` (without escapes: an escaped
/// string ends the head) and the index just past its closing quote.
fn string(data: &[u8], at: usize) -> Option<(&[u8], usize)> {
    if data.get(at) != Some(&b'"') {
        return None;
    }
    let body = &data[at + 1..];
    let close = body
        .iter()
        .position(|&c| c == b'"' || c == b'\\' || c < 0x20)?;
    if body[close] != b'"' {
        return None;
    }
    Some((&body[..close], at + 1 + close + 1))
}

/// The index just past a string, number or literal starting at `at`.
fn scalar(data: &[u8], at: usize) -> Option<usize> {
    match data.get(at)? {
        b'"' => string(data, at).map(|(_, end)| end),
        b'-' | b'0'..=b'9' | b't' | b'f' | b'n' => {
            let len = data[at..]
                .iter()
                .position(|c| !matches!(c, b'0'..=b'9' | b'a'..=b'z' | b'.' | b'+' | b'-' | b'E'))
                .unwrap_or(data.len() - at);
            Some(at + len)
        }
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ev(data: &[u8]) -> Event<'_> {
        Event {
            event: b"",
            data,
            id: b"",
        }
    }

    /// What the decoder is handed for each chunk, in order.
    fn relayed(chunks: &[&[u8]]) -> Vec<String> {
        let mut h = Head::default();
        let mut out = Vec::new();
        for c in chunks {
            h.relay(ev(c), |e| {
                out.push(String::from_utf8_lossy(e.data).into_owned())
            });
        }
        out
    }

    const A: &[u8] = br#"{"id":"c1","object":"chat.completion.chunk","created":17,"model":"m","system_fingerprint":null,"choices":[{"index":0,"delta":{"content":"a"}}]}"#;
    const B: &[u8] = br#"{"id":"c1","object":"chat.completion.chunk","created":17,"model":"m","system_fingerprint":null,"choices":[{"index":0,"delta":{"content":"b"}}],"usage":null}"#;

    #[test]
    fn later_chunks_lose_only_the_repeated_identity_fields() {
        let out = relayed(&[A, B, b"[DONE]"]);
        assert_eq!(out[0], String::from_utf8_lossy(A));
        assert_eq!(
            out[1],
            r#"{"choices":[{"index":0,"delta":{"content":"b"}}],"usage":null}"#
        );
        assert_eq!(out[2], "[DONE]");
    }

    #[test]
    fn usage_choices_and_errors_never_enter_the_head() {
        // Usage before choices: the head stops before it, so each chunk keeps it.
        let u = br#"{"id":"x","usage":{"completion_tokens":3},"choices":[]}"#;
        assert_eq!(head_len(u), br#"{"id":"x","#.len());
        assert_eq!(head_len(br#"{"error":{"message":"m"},"id":"x"}"#), 0);
        assert_eq!(head_len(br#"{"choices":[],"id":"x"}"#), 0);
        // An object value, an escaped string, a control character or a
        // missing comma ends the head.
        assert_eq!(
            head_len(br#"{"id":"x","model":{"a":1},"choices":[]}"#),
            br#"{"id":"x","#.len()
        );
        assert_eq!(head_len(br#"{"id":"a\"b","choices":[]}"#), 0);
        assert_eq!(head_len(b"{\"id\":\"a\tb\",\"choices\":[]}"), 0);
        assert_eq!(head_len(br#"{"id":"x"}"#), 0);
        assert_eq!(head_len(b"[1,2]"), 0);
    }

    #[test]
    fn a_trailing_comma_after_the_head_is_still_refused() {
        let bad = br#"{"id":"c1","object":"chat.completion.chunk","created":17,"model":"m","system_fingerprint":null,}"#;
        let out = relayed(&[A, bad]);
        assert_eq!(out[1].as_bytes(), bad);
    }

    #[test]
    fn an_error_chunk_with_another_head_is_decoded_whole() {
        let err = br#"{"id":"c1","object":"error","message":"overloaded","code":503}"#;
        let out = relayed(&[A, err]);
        assert_eq!(out[1], String::from_utf8_lossy(err));
    }

    #[test]
    fn varying_heads_are_learned_a_few_times_then_decoded_whole() {
        let chunks: Vec<Vec<u8>> = (0..10)
            .map(|i| format!(r#"{{"id":"c{i}","choices":[]}}"#).into_bytes())
            .collect();
        let refs: Vec<&[u8]> = chunks.iter().map(|c| c.as_slice()).collect();
        let out = relayed(&refs);
        for (o, c) in out.iter().zip(&refs) {
            assert_eq!(o.as_bytes(), *c);
        }
    }

    #[test]
    fn shortened_chunks_decode_to_the_same_account_as_whole_ones() {
        use tpscope_stream::Dialect;
        let wire = [A, B, br#"{"id":"c1","object":"chat.completion.chunk","created":17,"model":"m","system_fingerprint":null,"choices":[{"index":0,"delta":{},"finish_reason":"stop"}],"usage":{"prompt_tokens":2,"completion_tokens":2,"total_tokens":4}}"#, b"[DONE]"];
        let now = std::time::Instant::now();
        let mut whole = Dialect::OpenAi.account(true, false);
        let mut short = Dialect::OpenAi.account(true, false);
        let mut h = Head::default();
        for c in wire {
            whole.on_event(ev(c), now);
            h.relay(ev(c), |e| short.on_event(e, now));
        }
        assert_eq!(short.tokens(), 2);
        assert_eq!(
            (short.tokens(), short.content_chunks, short.is_done()),
            (whole.tokens(), whole.content_chunks, whole.is_done())
        );
        assert_eq!(short.text, whole.text);
        assert_eq!(short.model, whole.model);
        assert_eq!(short.finish_reason, whole.finish_reason);
        assert_eq!(short.usage, whole.usage);
    }
}
