//! The repeat shortcut of a stream's decoder: the last event that carried one
//! piece of output text and nothing else, kept with its text cut out.
//!
//! Why: a server streams one chunk per token, and the chunks of one response
//! differ only in that text (vLLM, SGLang, llama.cpp and the simulator repeat the
//! id, object, created and model, and `"finish_reason":null`, byte for byte).
//! Parsing each chunk whole costs most of the client's CPU per token; checking
//! that a chunk is the last one with another plain string in the same place
//! costs two `memcmp`s and a scan of the text.
//!
//! Why it is exact: a JSON scan reads the bytes left to right, so a chunk that
//! starts with the same bytes up to the text's opening quote, holds a string body
//! with no quote, backslash or control byte, and ends with the same bytes from
//! the closing quote, parses to the same chunk with only that string changed.
//! Its facts are then the kept chunk's with the new text. Anything else (escapes,
//! usage, a finish reason, another field) is parsed whole.
//!
//! Trailing fields the decoder skips may differ too (OpenAI's API appends a
//! random `obfuscation` string to every chunk; the relay benchmark its `bench`
//! stamps): a chunk that matches the kept one up to the top-level `,` where the
//! kept one's skipped members began, and whose own members from there are ones
//! the decoder skips (checked by the dialect's scanner, as a whole parse would
//! check them), parses to the same facts: the scanner is in the same state at
//! that comma, and skipped members add none.

/// The kept event: its data, and where its text was.
#[derive(Clone, Debug, Default)]
pub struct Repeat {
    data: Vec<u8>,
    /// The text's body (between its quotes) in `data`: `[start, end)`.
    start: usize,
    end: usize,
    /// Whether the text is answer text (not reasoning).
    content: bool,
    /// Where `data`'s trailing skipped members begin (a top-level `,`): not yet
    /// looked for (`None`), none (`Some(None)`). Found when first needed.
    skipped: Option<Option<usize>>,
}

impl Repeat {
    /// Asks the CPU to fetch the kept event's bytes (see [`crate::prefetch`]).
    #[inline]
    pub fn prefetch(&self) {
        crate::prefetch(self.data.as_ptr(), self.data.len());
    }

    /// Keeps `data`, an event whose only fact was the output text `text` (a
    /// string body that is a slice of `data`, non-empty); `content` when it is
    /// answer text. A `text` outside `data` is ignored.
    pub fn learn(&mut self, data: &[u8], text: &[u8], content: bool) {
        let base = data.as_ptr() as usize;
        let at = text.as_ptr() as usize;
        let Some(start) = at.checked_sub(base) else {
            return;
        };
        let end = start + text.len();
        if text.is_empty() || end >= data.len() || start == 0 {
            return;
        }
        self.data.clear();
        self.data.extend_from_slice(data);
        (self.start, self.end, self.content) = (start, end, content);
        self.skipped = None;
    }

    /// The text of `data` and whether it is answer text, when `data` is the kept
    /// event with another non-empty plain string (valid UTF-8, no `"`, `\` or
    /// control byte) in the text's place, and, where the kept event's trailing
    /// skipped members began, members that `skipped(data, at)` says the decoder
    /// skips (from the `,` at `at` to the end of the event).
    #[inline]
    pub fn text_of<'a>(
        &mut self,
        data: &'a [u8],
        skipped: impl Fn(&[u8], usize) -> bool,
    ) -> Option<(&'a str, bool)> {
        if self.data.is_empty() {
            return None;
        }
        let head = &self.data[..self.start];
        if !data.starts_with(head) {
            return None;
        }
        let end = head.len() + tpscope_json::plain_len(&data[head.len()..]);
        if end == head.len() {
            return None;
        }
        let (rest, tail) = (&data[end..], &self.data[self.end..]);
        if rest != tail {
            let kept = &self.data;
            let at = *self
                .skipped
                .get_or_insert_with(|| skipped_from(kept, self.end, &skipped));
            let same = &self.data[self.end..at?];
            if !rest.starts_with(same) || !skipped(data, end + same.len()) {
                return None;
            }
        }
        let text = std::str::from_utf8(&data[head.len()..end]).ok()?;
        Some((text, self.content))
    }
}

/// The first top-level `,` after `from` (the kept text's closing quote) in
/// `data` (a whole JSON object) from which `skipped` says every member is one
/// the decoder skips; `None` when there is none. Runs once per kept event.
fn skipped_from(data: &[u8], from: usize, skipped: impl Fn(&[u8], usize) -> bool) -> Option<usize> {
    // Commas and their depth relative to the text's container. The object's
    // last `}` leaves depth 0, so its members sit one above the final depth.
    let mut commas = Vec::new();
    let (mut i, mut depth) = (from + 1, 0i32);
    while i < data.len() {
        match data[i] {
            b'"' => {
                i += 1;
                while i < data.len() && data[i] != b'"' {
                    i += if data[i] == b'\\' { 2 } else { 1 };
                }
            }
            b'{' | b'[' => depth += 1,
            b'}' | b']' => depth -= 1,
            b',' => commas.push((i, depth)),
            _ => {}
        }
        i += 1;
    }
    commas
        .into_iter()
        .filter(|&(_, d)| d == depth + 1)
        .map(|(at, _)| at)
        .find(|&at| skipped(data, at))
}

#[cfg(test)]
mod tests {
    use super::*;

    const CHUNK: &[u8] =
        br#"{"id":"c1","choices":[{"index":0,"delta":{"content":" cat"},"finish_reason":null}]}"#;

    fn none(_: &[u8], _: usize) -> bool {
        false
    }

    fn learned() -> Repeat {
        let mut r = Repeat::default();
        let at = memchr::memmem::find(CHUNK, b" cat").unwrap();
        r.learn(CHUNK, &CHUNK[at..at + 4], true);
        r
    }

    #[test]
    fn a_chunk_that_differs_only_in_plain_text_repeats() {
        let mut r = learned();
        let next = br#"{"id":"c1","choices":[{"index":0,"delta":{"content":" sat on"}},"finish_reason":null}]}"#;
        // The closing bytes differ (an extra brace): not the same chunk.
        assert_eq!(r.text_of(next, none), None);
        let next = r#"{"id":"c1","choices":[{"index":0,"delta":{"content":" sat on é"},"finish_reason":null}]}"#;
        assert_eq!(r.text_of(next.as_bytes(), none), Some((" sat on é", true)));
    }

    #[test]
    fn escapes_other_fields_and_empty_text_are_not_repeats() {
        let mut r = learned();
        for other in [
            &br#"{"id":"c1","choices":[{"index":0,"delta":{"content":"a\"b"},"finish_reason":null}]}"#[..],
            br#"{"id":"c1","choices":[{"index":0,"delta":{"content":"a\nb"},"finish_reason":null}]}"#,
            br#"{"id":"c1","choices":[{"index":0,"delta":{"content":""},"finish_reason":null}]}"#,
            br#"{"id":"c2","choices":[{"index":0,"delta":{"content":"x"},"finish_reason":null}]}"#,
            br#"{"id":"c1","choices":[{"index":0,"delta":{"content":"x"},"finish_reason":"stop"}]}"#,
            b"{\"id\":\"c1\",\"choices\":[{\"index\":0,\"delta\":{\"content\":\"\x01\"},\"finish_reason\":null}]}",
            b"{\"id\":\"c1\",\"choices\":[{\"index\":0,\"delta\":{\"content\":\"\xff\"},\"finish_reason\":null}]}",
        ] {
            assert_eq!(r.text_of(other, none), None, "{}", String::from_utf8_lossy(other));
        }
        assert_eq!(Repeat::default().text_of(CHUNK, none), None);
    }

    #[test]
    fn text_outside_the_data_is_not_learned() {
        let mut r = Repeat::default();
        let elsewhere = b"cat".to_vec();
        r.learn(CHUNK, &elsewhere, true);
        assert_eq!(r.text_of(CHUNK, none), None);
    }
}
