//! A strict, allocation-free JSON scanner for span-log lines: it walks one object
//! in place, hands each member to the caller, and validates everything it skips.
//!
//! serde_json with a derived struct spent most of the reader's time (≈ 300 MB/s);
//! span lines are flat objects with one small array of small objects (`attempts`),
//! so a scanner that lets the caller descend where it needs to, and skips the rest
//! with validation, reads them several times faster. It accepts exactly RFC 8259
//! JSON (no trailing commas, no leading zeros, no raw control characters in
//! strings, no lone surrogates) and nests at most [`MAX_DEPTH`] levels deep. The
//! byte-level lexing (string runs, whitespace, number syntax) is `tpscope-json`'s,
//! shared with the stream chunk scanner.

use std::borrow::Cow;

use tpscope_json::{MAX_DEPTH, plain_len, skip_ws};

use crate::scalar::Scalar;

/// Why a line is not valid JSON.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct JsonError {
    /// Byte offset of the problem in the line.
    pub pos: usize,
    /// Whether the text ended before the value did (a cut-off line).
    pub eof: bool,
    /// What was expected or found.
    pub what: &'static str,
}

impl std::fmt::Display for JsonError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if self.eof {
            write!(
                f,
                "the JSON ends early: {} at column {}",
                self.what,
                self.pos + 1
            )
        } else {
            write!(
                f,
                "malformed JSON: {} at column {}",
                self.what,
                self.pos + 1
            )
        }
    }
}

pub(crate) type JsonResult<T> = Result<T, JsonError>;

/// The keys an object is expected to have, in the order writers emit them.
pub(crate) struct KeyTable {
    /// The key names.
    pub names: &'static [&'static str],
    /// Per key, its text and closing quote as a little-endian word with the mask
    /// of the bytes used (mask 0: the key is too long for one word).
    pub words: &'static [(u128, u128)],
}

/// A key with its closing quote as one little-endian word, and its mask, so a
/// predicted key is checked with one comparison (no memcmp call).
pub(crate) const fn key_word(key: &str) -> (u128, u128) {
    let b = key.as_bytes();
    if b.len() >= 16 {
        return (0, 0);
    }
    let (mut word, mut mask, mut i) = (0u128, 0u128, 0);
    while i < b.len() {
        word |= (b[i] as u128) << (8 * i);
        mask |= 0xff << (8 * i);
        i += 1;
    }
    word |= (b'"' as u128) << (8 * i);
    mask |= 0xff << (8 * i);
    (word, mask)
}

/// A cursor over one JSON text.
pub(crate) struct Scanner<'a> {
    text: &'a str,
    b: &'a [u8],
    pos: usize,
}

impl<'a> Scanner<'a> {
    /// A scanner at the start of `text`.
    pub fn new(text: &'a str) -> Scanner<'a> {
        Scanner {
            text,
            b: text.as_bytes(),
            pos: 0,
        }
    }

    /// The text between two byte offsets that lie on ASCII delimiters (quotes,
    /// brackets, commas, the ends of a number or of the text).
    #[inline]
    fn slice(&self, start: usize, end: usize) -> &'a str {
        debug_assert!(self.text.is_char_boundary(start) && self.text.is_char_boundary(end));
        let bytes = &self.b[start..end];
        // SAFETY: `bytes` is a range of the valid UTF-8 `text` whose ends are next to
        // ASCII bytes the scanner stopped at, so both ends are char boundaries and
        // the range is valid UTF-8. (str slicing re-checked both boundaries for
        // every string, which showed in profiles.)
        unsafe { std::str::from_utf8_unchecked(bytes) }
    }

    fn err(&self, what: &'static str) -> JsonError {
        JsonError {
            pos: self.pos.min(self.b.len()),
            eof: self.pos >= self.b.len(),
            what,
        }
    }

    #[inline]
    fn ws(&mut self) {
        self.pos = skip_ws(self.b, self.pos);
    }

    /// The next significant byte, after whitespace.
    #[inline]
    pub fn peek(&mut self) -> Option<u8> {
        self.ws();
        self.b.get(self.pos).copied()
    }

    #[inline]
    fn expect(&mut self, c: u8, what: &'static str) -> JsonResult<()> {
        if self.peek() == Some(c) {
            self.pos += 1;
            Ok(())
        } else {
            Err(self.err(what))
        }
    }

    /// Checks that nothing but whitespace follows.
    pub fn end(&mut self) -> JsonResult<()> {
        match self.peek() {
            None => Ok(()),
            Some(_) => Err(self.err("trailing characters after the object")),
        }
    }

    /// Walks an object, calling `member(key, scanner)` for each member; the callback
    /// must consume exactly one value.
    pub fn object(
        &mut self,
        mut member: impl FnMut(Cow<'a, str>, &mut Scanner<'a>) -> JsonResult<()>,
    ) -> JsonResult<()> {
        const NO_KEYS: KeyTable = KeyTable {
            names: &[],
            words: &[],
        };
        self.object_keyed(&NO_KEYS, |_, key, sc| member(key, sc))
    }

    /// Walks an object whose keys are mostly from `keys`, calling `member(index,
    /// key, scanner)` for each member (`index` into `keys`, or `None` for another
    /// key); the callback must consume exactly one value. Writers emit keys in a
    /// fixed order, so the few keys after the last one matched are tried in place
    /// first, which skips scanning and looking up the key text.
    pub fn object_keyed(
        &mut self,
        keys: &KeyTable,
        mut member: impl FnMut(Option<usize>, Cow<'a, str>, &mut Scanner<'a>) -> JsonResult<()>,
    ) -> JsonResult<()> {
        const LOOKAHEAD: usize = 4;
        self.expect(b'{', "expected `{`")?;
        if self.peek() == Some(b'}') {
            self.pos += 1;
            return Ok(());
        }
        let mut next = 0;
        let names = keys.names;
        loop {
            if self.peek() != Some(b'"') {
                return Err(self.err("expected a key (a string)"));
            }
            self.pos += 1;
            let rest = &self.b[self.pos..];
            let word = rest
                .get(..16)
                .map(|w| u128::from_le_bytes(w.try_into().unwrap_or([0; 16])));
            let predicted = (next..(next + LOOKAHEAD).min(names.len())).find(|&i| {
                let (w, mask) = keys.words[i];
                match word {
                    Some(word) if mask != 0 => word & mask == w,
                    _ => {
                        let k = names[i].as_bytes();
                        rest.len() > k.len() && rest.starts_with(k) && rest[k.len()] == b'"'
                    }
                }
            });
            let (index, key) = match predicted {
                Some(i) => {
                    self.pos += names[i].len() + 1;
                    (Some(i), Cow::Borrowed(names[i]))
                }
                None => {
                    let key = self.string_body()?;
                    (names.iter().position(|k| *k == key), key)
                }
            };
            if let Some(i) = index {
                next = i + 1;
            }
            self.expect(b':', "expected `:`")?;
            member(index, key, self)?;
            if !self.another(b'}', "expected `,` or `}`")? {
                return Ok(());
            }
        }
    }

    /// After a member or element: consumes `,` (true: another follows) or the
    /// closing bracket (false).
    #[inline]
    fn another(&mut self, close: u8, what: &'static str) -> JsonResult<bool> {
        match self.peek() {
            Some(b',') => {
                self.pos += 1;
                Ok(true)
            }
            Some(c) if c == close => {
                self.pos += 1;
                Ok(false)
            }
            _ => Err(self.err(what)),
        }
    }

    /// Walks an array, calling `element(scanner)` for each element; the callback
    /// must consume exactly one value.
    pub fn array(
        &mut self,
        mut element: impl FnMut(&mut Scanner<'a>) -> JsonResult<()>,
    ) -> JsonResult<()> {
        self.expect(b'[', "expected `[`")?;
        if self.peek() == Some(b']') {
            self.pos += 1;
            return Ok(());
        }
        loop {
            element(self)?;
            if !self.another(b']', "expected `,` or `]`")? {
                return Ok(());
            }
        }
    }

    /// Reads one value as a [`Scalar`]; an object or array is validated, skipped
    /// and named.
    pub fn scalar(&mut self) -> JsonResult<Scalar<'a>> {
        match self.peek() {
            Some(b'"') => {
                self.pos += 1;
                self.string_body().map(Scalar::Str)
            }
            Some(b'{') => {
                self.skip()?;
                Ok(Scalar::Other("an object"))
            }
            Some(b'[') => {
                self.skip()?;
                Ok(Scalar::Other("an array"))
            }
            Some(b't') => self.literal("true", Scalar::Bool(true)),
            Some(b'f') => self.literal("false", Scalar::Bool(false)),
            Some(b'n') => self.literal("null", Scalar::Null),
            Some(b'-' | b'0'..=b'9') => self.number(),
            Some(_) => Err(self.err("expected a value")),
            None => Err(self.err("expected a value")),
        }
    }

    /// Validates and skips one value, returning its text.
    pub fn raw(&mut self) -> JsonResult<&'a str> {
        self.ws();
        let start = self.pos;
        self.skip()?;
        Ok(self.slice(start, self.pos))
    }

    fn literal(&mut self, word: &'static str, v: Scalar<'a>) -> JsonResult<Scalar<'a>> {
        let end = self.pos + word.len();
        match self.b.get(self.pos..end) {
            Some(w) if w == word.as_bytes() => {
                self.pos = end;
                Ok(v)
            }
            _ => {
                // A prefix of the word at the end of the text is a cut-off value.
                let rest = &self.b[self.pos..];
                if word.as_bytes().starts_with(rest) {
                    self.pos = self.b.len();
                }
                Err(self.err("expected a value"))
            }
        }
    }

    /// Validates a number's text; returns (integer digits, whether it has a
    /// fraction or exponent).
    fn number_text(&mut self) -> JsonResult<(usize, bool)> {
        let n = match tpscope_json::number(self.b, self.pos) {
            Ok(n) => n,
            Err(e) => {
                self.pos = e.at;
                return Err(self.err(e.what));
            }
        };
        // The shared lexer stops after a leading `0`; a digit there is an error.
        if self.b[n.int_start] == b'0' && matches!(self.b.get(n.int_start + 1), Some(b'0'..=b'9')) {
            self.pos = n.int_start + 1;
            return Err(self.err("a number has a leading zero"));
        }
        self.pos = n.end;
        Ok((n.int_len, n.float))
    }

    fn number(&mut self) -> JsonResult<Scalar<'a>> {
        let start = self.pos;
        let negative = self.b[start] == b'-';
        let int_start = start + usize::from(negative);
        let (n, float) = self.number_text()?;
        if !float && n <= 20 {
            let v = self.b[int_start..int_start + n]
                .iter()
                .try_fold(0u64, |v, &c| {
                    v.checked_mul(10)?.checked_add(u64::from(c - b'0'))
                });
            match v {
                Some(v) if !negative => return Ok(Scalar::U(v)),
                Some(0) => return Ok(Scalar::U(0)),
                // Down to i64::MIN, whose magnitude is i64::MAX + 1.
                Some(v) if v <= i64::MAX as u64 + 1 => {
                    return Ok(Scalar::I((v as i64).wrapping_neg()));
                }
                _ => {}
            }
        }
        // Floats, and integers too large for 64 bits (serde_json reads those as f64).
        match self.slice(start, self.pos).parse::<f64>() {
            Ok(f) if f.is_finite() => Ok(Scalar::F(f)),
            _ => Err(JsonError {
                pos: start,
                eof: false,
                what: "a number out of range",
            }),
        }
    }

    /// Reads a string after its opening quote.
    fn string_body(&mut self) -> JsonResult<Cow<'a, str>> {
        let start = self.pos;
        self.plain_run();
        match self.b.get(self.pos) {
            Some(b'"') => {
                let s = self.slice(start, self.pos);
                self.pos += 1;
                Ok(Cow::Borrowed(s))
            }
            Some(b'\\') => {
                let mut out = String::with_capacity(self.pos - start + 16);
                out.push_str(self.slice(start, self.pos));
                self.escaped_rest(&mut out)?;
                Ok(Cow::Owned(out))
            }
            Some(_) => Err(self.err("a control character inside a string")),
            None => Err(self.err("a string without its closing quote")),
        }
    }

    /// Advances over bytes that need no attention inside a string.
    #[inline]
    fn plain_run(&mut self) {
        self.pos += plain_len(&self.b[self.pos..]);
    }

    /// Decodes the rest of a string that has escapes, from a `\`.
    fn escaped_rest(&mut self, out: &mut String) -> JsonResult<()> {
        loop {
            let run = self.pos;
            self.plain_run();
            out.push_str(self.slice(run, self.pos));
            match self.b.get(self.pos) {
                Some(b'"') => {
                    self.pos += 1;
                    return Ok(());
                }
                Some(b'\\') => {
                    self.pos += 1;
                    let c = match self.b.get(self.pos) {
                        Some(b'"') => '"',
                        Some(b'\\') => '\\',
                        Some(b'/') => '/',
                        Some(b'b') => '\u{8}',
                        Some(b'f') => '\u{c}',
                        Some(b'n') => '\n',
                        Some(b'r') => '\r',
                        Some(b't') => '\t',
                        Some(b'u') => {
                            self.pos += 1;
                            let c = self.unicode_escape()?;
                            out.push(c);
                            continue;
                        }
                        Some(_) => return Err(self.err("an invalid escape")),
                        None => return Err(self.err("a string without its closing quote")),
                    };
                    self.pos += 1;
                    out.push(c);
                }
                Some(_) => return Err(self.err("a control character inside a string")),
                None => return Err(self.err("a string without its closing quote")),
            }
        }
    }

    fn hex4(&mut self) -> JsonResult<u32> {
        let mut v = 0u32;
        for _ in 0..4 {
            let d = match self.b.get(self.pos) {
                Some(c @ b'0'..=b'9') => c - b'0',
                Some(c @ b'a'..=b'f') => c - b'a' + 10,
                Some(c @ b'A'..=b'F') => c - b'A' + 10,
                Some(_) => return Err(self.err("an invalid \\u escape")),
                None => return Err(self.err("a string without its closing quote")),
            };
            v = v * 16 + u32::from(d);
            self.pos += 1;
        }
        Ok(v)
    }

    /// Decodes `XXXX` after `\u`, joining a surrogate pair.
    fn unicode_escape(&mut self) -> JsonResult<char> {
        let hi = self.hex4()?;
        let code = if (0xD800..0xDC00).contains(&hi) {
            let rest = &self.b[self.pos..];
            if !rest.starts_with(b"\\u") {
                return Err(if rest.len() < 2 && b"\\u".starts_with(rest) {
                    self.pos = self.b.len();
                    self.err("a string without its closing quote")
                } else {
                    self.err("a lone surrogate in a \\u escape")
                });
            }
            self.pos += 2;
            let lo = self.hex4()?;
            if !(0xDC00..0xE000).contains(&lo) {
                return Err(self.err("a lone surrogate in a \\u escape"));
            }
            0x10000 + ((hi - 0xD800) << 10) + (lo - 0xDC00)
        } else {
            hi
        };
        char::from_u32(code).ok_or_else(|| self.err("a lone surrogate in a \\u escape"))
    }

    /// Validates and skips one value of any kind, nested at most [`MAX_DEPTH`]
    /// levels, without recursion (a bit per level says object or array).
    fn skip(&mut self) -> JsonResult<()> {
        let mut kinds: u128 = 0; // bit d set: level d is an object
        let mut depth: u32 = 0;
        // Whether the next token must be a value (after `[`, `,` or `:`).
        loop {
            // A value.
            match self.peek() {
                Some(open @ (b'{' | b'[')) => {
                    if depth == MAX_DEPTH {
                        return Err(self.err("nesting deeper than 128 levels"));
                    }
                    self.pos += 1;
                    let is_object = open == b'{';
                    if is_object {
                        kinds |= 1 << depth;
                    } else {
                        kinds &= !(1 << depth);
                    }
                    depth += 1;
                    let close = if is_object { b'}' } else { b']' };
                    if self.peek() == Some(close) {
                        self.pos += 1;
                        depth -= 1;
                    } else {
                        if is_object {
                            self.key()?;
                        }
                        continue;
                    }
                }
                Some(b'"') => {
                    self.pos += 1;
                    self.skip_string()?;
                }
                // Range is checked only where a number is read, as serde_json does.
                Some(b'-' | b'0'..=b'9') => {
                    self.number_text()?;
                }
                _ => {
                    self.scalar()?;
                }
            }
            // After a value: close levels or move to the next element.
            loop {
                if depth == 0 {
                    return Ok(());
                }
                let is_object = kinds & (1 << (depth - 1)) != 0;
                let close = if is_object { b'}' } else { b']' };
                match self.peek() {
                    Some(b',') => {
                        self.pos += 1;
                        if is_object {
                            self.key()?;
                        }
                        break;
                    }
                    Some(c) if c == close => {
                        self.pos += 1;
                        depth -= 1;
                    }
                    _ => {
                        return Err(self.err(if is_object {
                            "expected `,` or `}`"
                        } else {
                            "expected `,` or `]`"
                        }));
                    }
                }
            }
        }
    }

    /// Skips `"key":` inside an object being skipped.
    fn key(&mut self) -> JsonResult<()> {
        if self.peek() != Some(b'"') {
            return Err(self.err("expected a key (a string)"));
        }
        self.pos += 1;
        self.skip_string()?;
        self.expect(b':', "expected `:`")
    }

    /// Validates and skips a string after its opening quote, without decoding.
    fn skip_string(&mut self) -> JsonResult<()> {
        loop {
            self.plain_run();
            match self.b.get(self.pos) {
                Some(b'"') => {
                    self.pos += 1;
                    return Ok(());
                }
                Some(b'\\') => {
                    self.pos += 1;
                    match self.b.get(self.pos) {
                        Some(b'"' | b'\\' | b'/' | b'b' | b'f' | b'n' | b'r' | b't') => {
                            self.pos += 1
                        }
                        // Surrogates are checked only where a string is decoded, as
                        // serde_json does.
                        Some(b'u') => {
                            self.pos += 1;
                            self.hex4()?;
                        }
                        Some(_) => return Err(self.err("an invalid escape")),
                        None => return Err(self.err("a string without its closing quote")),
                    }
                }
                Some(_) => return Err(self.err("a control character inside a string")),
                None => return Err(self.err("a string without its closing quote")),
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Reads a whole text as one value, the way the reader does for a line.
    fn value(text: &str) -> JsonResult<Scalar<'_>> {
        let mut s = Scanner::new(text);
        let v = s.scalar()?;
        s.end()?;
        Ok(v)
    }

    fn agrees_with_serde(text: &str) {
        let mut s = Scanner::new(text);
        let ours = s.raw().and_then(|_| s.end());
        let theirs = serde_json::from_str::<serde::de::IgnoredAny>(text);
        assert_eq!(
            ours.is_ok(),
            theirs.is_ok(),
            "{text:?}: ours {ours:?}, serde {theirs:?}"
        );
        // Whether an error is a cut-off text is checked by
        // `cut_off_text_is_flagged_as_eof`; serde_json differs on details (a number
        // cut after `.` is not EOF to it, a bad `\u` escape before the end is).
    }

    #[test]
    fn validity_agrees_with_serde_json() {
        for text in [
            r#"{}"#,
            r#"[]"#,
            r#"{"a":1,"b":[1,2,{"c":null}],"d":"x\"y\\z\u00e9\ud83d\ude00"}"#,
            r#"{"a":1,}"#,
            r#"[1,2,]"#,
            r#"{"a" 1}"#,
            r#"{"a":01}"#,
            r#"{"a":-}"#,
            r#"{"a":1.}"#,
            r#"{"a":1e}"#,
            r#"{"a":.5}"#,
            r#"{"a":+1}"#,
            r#"{"a":tru}"#,
            r#"{"a":true"#,
            r#"{"a":"x"#,
            r#"{"a":"\x"}"#,
            r#"{"a":"\u12"}"#,
            r#"{"a":"\ud800"}"#,
            r#"{"a":"\udc00x"}"#,
            "{\"a\":\"tab\there\"}",
            r#"{"a":1} x"#,
            r#"{"a":[1,2"#,
            r#"{"a":{"b":"#,
            r#"{"a":1e400}"#,
            r#"{"a":-0,"b":-0.0e-0,"c":123456789012345678901234567890}"#,
            r#"{1:2}"#,
            r#"{"a":nul"#,
            r#" { "a" : [ 1 , { } , [ ] ] } "#,
            r#"{"a":1}}"#,
            r#"{"a":1]"#,
            r#"[}"#,
            r#"""#,
        ] {
            agrees_with_serde(text);
        }
    }

    #[test]
    fn lone_surrogates_are_rejected_where_decoded() {
        assert_eq!(
            value(r#""\ud800""#).unwrap_err().what,
            "a lone surrogate in a \\u escape"
        );
    }

    #[test]
    fn numbers_keep_their_type() {
        assert_eq!(value("0").unwrap(), Scalar::U(0));
        assert_eq!(value("-0").unwrap(), Scalar::U(0));
        assert_eq!(value("18446744073709551615").unwrap(), Scalar::U(u64::MAX));
        assert_eq!(value("-42").unwrap(), Scalar::I(-42));
        assert_eq!(value("1.5e3").unwrap(), Scalar::F(1500.0));
        assert_eq!(
            value("18446744073709551616").unwrap(),
            Scalar::F(1.8446744073709552e19)
        );
        assert_eq!(value("-9223372036854775808").unwrap(), Scalar::I(i64::MIN));
        assert_eq!(
            value("-9223372036854775809").unwrap(),
            Scalar::F(-9.223372036854776e18)
        );
        assert_eq!(value("1e400").unwrap_err().what, "a number out of range");
    }

    #[test]
    fn strings_borrow_unless_escaped() {
        assert_eq!(
            value(r#""plain é""#).unwrap(),
            Scalar::Str(Cow::Borrowed("plain é"))
        );
        match value(r#""a\nb\u00e9\ud83d\ude00 long enough to cross a word""#).unwrap() {
            Scalar::Str(Cow::Owned(s)) => {
                assert_eq!(s, "a\nb\u{e9}\u{1F600} long enough to cross a word")
            }
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn deep_nesting_is_an_error_not_a_stack_overflow() {
        let deep = "[".repeat(100_000);
        let e = value(&deep).unwrap_err();
        assert_eq!(e.what, "nesting deeper than 128 levels");
        let ok = format!("{}{}", "[".repeat(128), "]".repeat(128));
        assert!(value(&ok).is_ok());
    }

    #[test]
    fn cut_off_text_is_flagged_as_eof() {
        let line = r#"{"kind":"span","attempts":[{"started_at":"2026-01-01T00:00:00Z","tokens":12}],"x":true}"#;
        for cut in 1..line.len() {
            let mut s = Scanner::new(&line[..cut]);
            let r = s.raw().and_then(|_| s.end());
            let e = r.unwrap_err();
            assert!(e.eof, "cut at {cut}: {e:?}");
        }
    }

    #[test]
    fn keyed_walk_finds_keys_in_any_order_and_escaped() {
        const KEYS: KeyTable = KeyTable {
            names: &["kind", "run_id", "at", "kin", "a_key_of_16_byte"],
            words: &[
                key_word("kind"),
                key_word("run_id"),
                key_word("at"),
                key_word("kin"),
                key_word("a_key_of_16_byte"),
            ],
        };
        let text = r#"{"kin":0,"kind":1,"other":2,"at":3,"run_id":4,"r\u0075n_id":5,"kind":6,"a_key_of_16_byte":7,"kind":8}"#;
        let mut s = Scanner::new(text);
        let mut seen = Vec::new();
        s.object_keyed(&KEYS, |i, k, s| {
            seen.push((i, k.into_owned(), s.scalar()?));
            Ok(())
        })
        .unwrap();
        s.end().unwrap();
        let idx: Vec<_> = seen.iter().map(|(i, k, _)| (*i, k.as_str())).collect();
        assert_eq!(
            idx,
            [
                (Some(3), "kin"),
                (Some(0), "kind"),
                (None, "other"),
                (Some(2), "at"),
                (Some(1), "run_id"),
                (Some(1), "run_id"),
                (Some(0), "kind"),
                (Some(4), "a_key_of_16_byte"),
                (Some(0), "kind"),
            ]
        );
        assert_eq!(seen[6].2, Scalar::U(6));
        assert_eq!(seen[8].2, Scalar::U(8));
    }

    #[test]
    fn object_walk_hands_out_members_in_order() {
        let mut s = Scanner::new(r#"{"a":1,"b\u0021":[true,null],"c":{"d":"e"}}"#);
        let mut seen = Vec::new();
        s.object(|k, s| {
            let v = if k == "b!" {
                let mut n = 0;
                s.array(|s| s.scalar().map(|_| n += 1))?;
                format!("{n} elements")
            } else {
                format!("{:?}", s.scalar()?)
            };
            seen.push(format!("{k}={v}"));
            Ok(())
        })
        .unwrap();
        s.end().unwrap();
        assert_eq!(seen, ["a=U(1)", "b!=2 elements", "c=Other(\"an object\")"]);
    }

    /// A real span line, to mutate.
    const LINE: &str = r#"{"kind":"span","run_id":"r","span_id":"7","status":"ok","queued_at":"2026-01-01T00:00:00.5Z","attempts":[{"started_at":"2026-01-01T00:00:01Z","tokens":12,"cause":null,"x":[1.5e-3,-0,true,{"y":"\u00e9\n"}]}],"output_tokens":12}"#;

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig::with_cases(2000))]

        #[test]
        fn random_texts_are_judged_like_serde_json(text in r#"[\[\]{}:,"\\0-9a-fuE.+\- tnrl]{0,24}"#) {
            agrees_with_serde(&text);
        }

        #[test]
        fn mutated_lines_are_judged_like_serde_json(
            at in 0usize..LINE.len(),
            c in proptest::sample::select(br#"{}[]:,"\0123456789.eE+- tnulx"#.to_vec()),
            how in 0u8..3,
        ) {
            let mut b = LINE.as_bytes().to_vec();
            match how {
                0 => b.insert(at, c),
                1 => { b.remove(at); }
                _ => b[at] = c,
            }
            if let Ok(text) = std::str::from_utf8(&b) {
                agrees_with_serde(text);
            }
        }
    }
}
