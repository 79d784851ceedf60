//! The fast chunk parser: a hand-written JSON scanner (on the lexing shared with
//! the span-log reader, `tpscope-json`) that fills the same [`Chunk`] types as
//! the serde reference parser ([`super::chunk::parse_chunk_serde`])
//! about three times faster, because it skips unwanted values with `memchr` instead
//! of visiting them, and never builds a field it does not need.
//!
//! It accepts and rejects what serde_json does for these types (the tests compare
//! both on fixtures, corrupted chunks and generated chunks: objects, strings,
//! escapes, control characters, numbers, literals, nesting, duplicate fields,
//! trailing bytes), with three deliberate differences: a top-level JSON array is
//! not a chunk (serde's derive would read it positionally), nesting deeper than
//! 128 levels is rejected even inside skipped fields (the scanner recurses), and
//! the UTF-8 of strings it *skips* is not checked (strings it keeps are).

use tpscope_json::{MAX_DEPTH, plain_len, skip_ws};

use super::chunk::{
    Choice, Chunk, ChunkError, Delta, Few, FunctionCall, JsonStr, RawJson, ToolCall,
};
use crate::Usage;

/// Parses the data of one streamed event (not `[DONE]`: check
/// [`is_done`](super::chunk::is_done) first), with the fast scanner (see this
/// module's notes for its leniencies).
pub fn parse_chunk(data: &[u8]) -> Result<Chunk<'_>, ChunkError> {
    scan_chunk(data).map_err(|e| ChunkError(format!("{} at byte {}", e.what, e.at)))
}

/// Parses a non-streaming answer (`chat.completion` or `text_completion`): the same
/// shape, with `message` instead of `delta`, and its `usage`.
pub fn parse_response(body: &[u8]) -> Result<Chunk<'_>, ChunkError> {
    parse_chunk(body)
}

/// Where and why scanning failed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct ScanError {
    pub at: usize,
    pub what: &'static str,
}

type R<T> = Result<T, ScanError>;

struct Scanner<'a> {
    b: &'a [u8],
    i: usize,
    depth: u32,
}

/// Parses one chunk (or non-streaming answer).
fn scan_chunk(b: &[u8]) -> R<Chunk<'_>> {
    let mut s = Scanner { b, i: 0, depth: 0 };
    let mut chunk = Chunk::default();
    s.ws();
    s.chunk(&mut chunk)?;
    s.ws();
    if s.i != b.len() {
        return Err(s.err("trailing characters"));
    }
    Ok(chunk)
}

/// The top-level fields the decoder reads ([`Scanner::chunk`]); it skips others.
const CHUNK_FIELDS: [&[u8]; 8] = [
    b"id", b"object", b"model", b"choices", b"usage", b"error", b"message", b"code",
];

/// Whether `b[at..]` ends a chunk's top-level object, after one of its values,
/// with members the decoder skips only: `,"key":value` pairs whose key has no
/// escape and is none of [`CHUNK_FIELDS`], then `}` and whitespace. The same
/// scanner at the same depth as [`parse_chunk`], so it accepts what that does.
pub(crate) fn skipped_members(b: &[u8], at: usize) -> bool {
    let mut s = Scanner { b, i: at, depth: 1 };
    s.skipped_members().is_ok() && s.i == b.len()
}

impl<'a> Scanner<'a> {
    /// See [`skipped_members`]; the cursor ends after the trailing whitespace.
    fn skipped_members(&mut self) -> R<()> {
        loop {
            self.ws();
            match self.peek() {
                Some(b'}') => {
                    self.i += 1;
                    self.ws();
                    return Ok(());
                }
                Some(b',') => self.i += 1,
                _ => return Err(self.err("expected `,` or `}`")),
            }
            self.ws();
            let (key, escaped) = self.raw_string()?;
            if escaped || CHUNK_FIELDS.contains(&key) {
                return Err(self.err("a field the decoder reads"));
            }
            self.ws();
            self.eat(b':', "expected `:`")?;
            self.ws();
            self.skip()?;
        }
    }

    #[inline]
    fn err(&self, what: &'static str) -> ScanError {
        ScanError { at: self.i, what }
    }

    #[inline]
    fn peek(&self) -> Option<u8> {
        self.b.get(self.i).copied()
    }

    #[inline]
    fn ws(&mut self) {
        self.i = skip_ws(self.b, self.i);
    }

    #[inline]
    fn eat(&mut self, c: u8, what: &'static str) -> R<()> {
        if self.peek() == Some(c) {
            self.i += 1;
            Ok(())
        } else {
            Err(self.err(what))
        }
    }

    /// A string's raw body (between its quotes) and whether it has escapes; the
    /// cursor is on the opening quote.
    #[inline]
    fn raw_string(&mut self) -> R<(&'a [u8], bool)> {
        self.eat(b'"', "expected a string")?;
        let b = self.b;
        let start = self.i;
        let mut i = start;
        let mut escaped = false;
        loop {
            i += plain_len(&b[i..]);
            if i >= b.len() {
                self.i = b.len();
                return Err(self.err("unterminated string"));
            }
            if b[i] < 0x20 {
                self.i = i;
                return Err(self.err("control character in a string"));
            }
            if b[i] == b'"' {
                self.i = i + 1;
                return Ok((&b[start..i], escaped));
            }
            // An escape: `\X` with X one of "\/bfnrt, or `\uXXXX`.
            escaped = true;
            match b.get(i + 1) {
                Some(b'"' | b'\\' | b'/' | b'b' | b'f' | b'n' | b'r' | b't') => i += 2,
                Some(b'u') => {
                    if !b
                        .get(i + 2..i + 6)
                        .is_some_and(|h| h.iter().all(u8::is_ascii_hexdigit))
                    {
                        self.i = i;
                        return Err(self.err("invalid \\u escape"));
                    }
                    i += 6;
                }
                _ => {
                    self.i = i;
                    return Err(self.err("invalid escape"));
                }
            }
        }
    }

    /// A string kept for the caller: its body must be valid UTF-8.
    #[inline]
    fn json_str(&mut self) -> R<JsonStr<'a>> {
        let at = self.i;
        let (raw, _) = self.raw_string()?;
        if raw.is_ascii() {
            // SAFETY: every byte is below 0x80, so the bytes are ASCII, valid UTF-8.
            return Ok(JsonStr::from_raw(unsafe {
                std::str::from_utf8_unchecked(raw)
            }));
        }
        match std::str::from_utf8(raw) {
            Ok(s) => Ok(JsonStr::from_raw(s)),
            Err(_) => Err(ScanError {
                at,
                what: "invalid UTF-8 in a string",
            }),
        }
    }

    /// `null` (→ `None`) or a string.
    #[inline]
    fn opt_str(&mut self) -> R<Option<JsonStr<'a>>> {
        match self.peek() {
            Some(b'n') => self.null().map(|_| None),
            Some(b'"') => self.json_str().map(Some),
            _ => Err(self.err("expected a string or null")),
        }
    }

    #[inline]
    fn literal(&mut self, word: &'static [u8]) -> R<()> {
        if self.b[self.i..].starts_with(word) {
            self.i += word.len();
            Ok(())
        } else {
            Err(self.err("invalid literal"))
        }
    }

    #[inline]
    fn null(&mut self) -> R<()> {
        self.literal(b"null")
    }

    /// Whether the next value is `null` (consumed if so).
    #[inline]
    fn is_null(&mut self) -> R<bool> {
        if self.peek() == Some(b'n') {
            self.null()?;
            Ok(true)
        } else {
            Ok(false)
        }
    }

    /// A JSON number; returns its value when it is a non-negative integer that
    /// fits in u64.
    fn number(&mut self) -> R<Option<u64>> {
        let n = tpscope_json::number(self.b, self.i).map_err(|e| ScanError {
            at: e.at,
            what: "invalid number",
        })?;
        self.i = n.end;
        if n.float || n.negative {
            return Ok(None);
        }
        Ok(n.magnitude(self.b))
    }

    /// `null` (→ `None`) or a non-negative integer.
    fn opt_u64(&mut self) -> R<Option<u64>> {
        if self.is_null()? {
            return Ok(None);
        }
        let at = self.i;
        match self.number()? {
            Some(v) => Ok(Some(v)),
            None => Err(ScanError {
                at,
                what: "expected a non-negative integer",
            }),
        }
    }

    fn enter(&mut self) -> R<()> {
        self.depth += 1;
        if self.depth > MAX_DEPTH {
            return Err(self.err("nested too deeply"));
        }
        Ok(())
    }

    /// Skips any value.
    fn skip(&mut self) -> R<()> {
        match self.peek() {
            Some(b'"') => self.raw_string().map(|_| ()),
            Some(b'{') => self.object(|s, _| s.skip()),
            Some(b'[') => self.array(|s| s.skip()),
            Some(b't') => self.literal(b"true"),
            Some(b'f') => self.literal(b"false"),
            Some(b'n') => self.null(),
            // Checked, not converted: a skipped number's value is never read.
            Some(b'-' | b'0'..=b'9') => {
                let n = tpscope_json::number(self.b, self.i).map_err(|e| ScanError {
                    at: e.at,
                    what: "invalid number",
                })?;
                self.i = n.end;
                Ok(())
            }
            Some(_) => Err(self.err("expected a value")),
            None => Err(self.err("unexpected end")),
        }
    }

    /// A value kept as raw JSON text (`null` → `None`).
    fn opt_raw(&mut self) -> R<Option<RawJson<'a>>> {
        if self.is_null()? {
            return Ok(None);
        }
        let start = self.i;
        self.skip()?;
        // The bytes of a skipped value may include unchecked string bytes.
        match std::str::from_utf8(&self.b[start..self.i]) {
            Ok(s) => Ok(Some(RawJson::from_raw(s))),
            Err(_) => Err(ScanError {
                at: start,
                what: "invalid UTF-8",
            }),
        }
    }

    /// An object; `field(scanner, key)` must consume each value. Keys with escapes
    /// are unescaped before being handed over.
    fn object(&mut self, mut field: impl FnMut(&mut Self, &[u8]) -> R<()>) -> R<()> {
        self.eat(b'{', "expected an object")?;
        self.enter()?;
        self.ws();
        if self.peek() == Some(b'}') {
            self.i += 1;
            self.depth -= 1;
            return Ok(());
        }
        loop {
            self.ws();
            let at = self.i;
            let (key, escaped) = self.raw_string()?;
            self.ws();
            self.eat(b':', "expected `:`")?;
            self.ws();
            if escaped {
                let text = std::str::from_utf8(key).map_err(|_| ScanError {
                    at,
                    what: "invalid UTF-8 in a key",
                })?;
                let mut k = String::new();
                JsonStr::from_raw(text).append_to(&mut k);
                field(self, k.as_bytes())?;
            } else {
                field(self, key)?;
            }
            self.ws();
            match self.peek() {
                Some(b',') => self.i += 1,
                Some(b'}') => {
                    self.i += 1;
                    self.depth -= 1;
                    return Ok(());
                }
                _ => return Err(self.err("expected `,` or `}`")),
            }
        }
    }

    /// An array; `item(scanner)` must consume each element.
    fn array(&mut self, mut item: impl FnMut(&mut Self) -> R<()>) -> R<()> {
        self.eat(b'[', "expected an array")?;
        self.enter()?;
        self.ws();
        if self.peek() == Some(b']') {
            self.i += 1;
            self.depth -= 1;
            return Ok(());
        }
        loop {
            self.ws();
            item(self)?;
            self.ws();
            match self.peek() {
                Some(b',') => self.i += 1,
                Some(b']') => {
                    self.i += 1;
                    self.depth -= 1;
                    return Ok(());
                }
                _ => return Err(self.err("expected `,` or `]`")),
            }
        }
    }

    /// `null` (→ `None`) or an array of `T`s.
    fn opt_few<T>(&mut self, mut item: impl FnMut(&mut Self) -> R<T>) -> R<Option<Few<T>>> {
        if self.is_null()? {
            return Ok(None);
        }
        let mut few = Few::default();
        self.array(|s| {
            let x = item(s)?;
            few.push(x);
            Ok(())
        })?;
        Ok(Some(few))
    }

    fn chunk(&mut self, c: &mut Chunk<'a>) -> R<()> {
        let mut seen = Seen::default();
        self.object(|s, key| {
            match key {
                b"id" => {
                    seen.once(s, 0)?;
                    c.id = s.opt_str()?;
                }
                b"object" => {
                    seen.once(s, 1)?;
                    c.object = s.opt_str()?;
                }
                b"model" => {
                    seen.once(s, 2)?;
                    c.model = s.opt_str()?;
                }
                b"choices" => {
                    seen.once(s, 3)?;
                    c.choices = None;
                    if !s.is_null()? {
                        let few = c.choices.insert(Few::default());
                        s.array(|s| s.choice(few.push_default()))?;
                    }
                }
                b"usage" => {
                    seen.once(s, 4)?;
                    c.usage = if s.is_null()? { None } else { Some(s.usage()?) };
                }
                b"error" => {
                    seen.once(s, 5)?;
                    c.error = s.opt_raw()?;
                }
                b"message" => {
                    seen.once(s, 6)?;
                    c.message = s.opt_str()?;
                }
                b"code" => {
                    seen.once(s, 7)?;
                    c.code = s.opt_raw()?;
                }
                _ => s.skip()?,
            }
            Ok(())
        })
    }

    fn choice(&mut self, c: &mut Choice<'a>) -> R<()> {
        let mut seen = Seen::default();
        self.object(|s, key| {
            match key {
                b"index" => {
                    seen.once(s, 0)?;
                    let at = s.i;
                    c.index = match s.opt_u64()? {
                        Some(v) => Some(u32::try_from(v).map_err(|_| ScanError {
                            at,
                            what: "index out of range",
                        })?),
                        None => None,
                    };
                }
                b"delta" => {
                    seen.once(s, 1)?;
                    c.delta = None;
                    if !s.is_null()? {
                        s.delta(c.delta.insert(Delta::default()))?;
                    }
                }
                b"message" => {
                    seen.once(s, 2)?;
                    c.message = None;
                    if !s.is_null()? {
                        s.delta(c.message.insert(Delta::default()))?;
                    }
                }
                b"text" => {
                    seen.once(s, 3)?;
                    c.text = s.opt_str()?;
                }
                b"finish_reason" => {
                    seen.once(s, 4)?;
                    c.finish_reason = s.opt_str()?;
                }
                _ => s.skip()?,
            }
            Ok(())
        })
    }

    fn delta(&mut self, d: &mut Delta<'a>) -> R<()> {
        let mut seen = Seen::default();
        self.object(|s, key| {
            match key {
                b"content" => {
                    seen.once(s, 0)?;
                    d.content = s.opt_str()?;
                }
                b"role" => {
                    seen.once(s, 1)?;
                    d.role = s.opt_str()?;
                }
                b"reasoning_content" => {
                    seen.once(s, 2)?;
                    d.reasoning_content = s.opt_str()?;
                }
                b"reasoning" => {
                    seen.once(s, 3)?;
                    d.reasoning = s.opt_str()?;
                }
                b"refusal" => {
                    seen.once(s, 4)?;
                    d.refusal = s.opt_str()?;
                }
                b"tool_calls" => {
                    seen.once(s, 5)?;
                    d.tool_calls = s.opt_few(|s| s.tool_call())?;
                }
                _ => s.skip()?,
            }
            Ok(())
        })
    }

    fn tool_call(&mut self) -> R<ToolCall<'a>> {
        let mut t = ToolCall::default();
        let mut seen = Seen::default();
        self.object(|s, key| {
            if key == b"function" {
                seen.once(s, 0)?;
                t.function = if s.is_null()? {
                    None
                } else {
                    let mut f = FunctionCall::default();
                    let mut seen_f = Seen::default();
                    s.object(|s, key| {
                        match key {
                            b"name" => {
                                seen_f.once(s, 0)?;
                                f.name = s.opt_str()?;
                            }
                            b"arguments" => {
                                seen_f.once(s, 1)?;
                                f.arguments = s.opt_str()?;
                            }
                            _ => s.skip()?,
                        }
                        Ok(())
                    })?;
                    Some(f)
                };
            } else {
                s.skip()?;
            }
            Ok(())
        })?;
        Ok(t)
    }

    fn usage(&mut self) -> R<Usage> {
        let mut u = Usage::default();
        let mut seen = Seen::default();
        self.object(|s, key| {
            match key {
                b"prompt_tokens" => {
                    seen.once(s, 0)?;
                    u.prompt_tokens = s.opt_u64()?;
                }
                b"completion_tokens" => {
                    seen.once(s, 1)?;
                    u.completion_tokens = s.opt_u64()?;
                }
                b"completion_tokens_details" => {
                    seen.once(s, 2)?;
                    u.reasoning_tokens = s.details(b"reasoning_tokens")?;
                }
                b"prompt_tokens_details" => {
                    seen.once(s, 3)?;
                    u.cached_tokens = s.details(b"cached_tokens")?;
                }
                _ => s.skip()?,
            }
            Ok(())
        })?;
        Ok(u)
    }

    /// `null` or an object; the value of its `name` field.
    fn details(&mut self, name: &[u8]) -> R<Option<u64>> {
        if self.is_null()? {
            return Ok(None);
        }
        let mut v = None;
        let mut seen = Seen::default();
        self.object(|s, key| {
            if key == name {
                seen.once(s, 0)?;
                v = s.opt_u64()?;
            } else {
                s.skip()?;
            }
            Ok(())
        })?;
        Ok(v)
    }
}

/// Fields already seen in one object (serde rejects duplicates; so do we).
#[derive(Default)]
struct Seen(u16);

impl Seen {
    #[inline]
    fn once(&mut self, s: &Scanner<'_>, bit: u8) -> R<()> {
        let m = 1u16 << bit;
        if self.0 & m != 0 {
            return Err(s.err("duplicate field"));
        }
        self.0 |= m;
        Ok(())
    }
}

#[cfg(test)]
#[path = "scan_tests.rs"]
mod tests;
