//! Inside a JSON string: finding the end of a plain run eight bytes at a time,
//! reading `\u` hex digits, and unescaping a body already known to be valid.

const ONES: u64 = 0x0101_0101_0101_0101;
const HIGHS: u64 = 0x8080_8080_8080_8080;

/// Marks (in the high bit of each byte) the bytes of `w` that end a plain string
/// run: `"`, `\` or a control character. Only the lowest mark is exact, which is
/// all the caller uses.
#[inline]
fn string_stops(w: u64) -> u64 {
    let quote = w ^ (ONES * u64::from(b'"'));
    let backslash = w ^ (ONES * u64::from(b'\\'));
    let zero = |v: u64| v.wrapping_sub(ONES) & !v & HIGHS;
    let control = w.wrapping_sub(ONES * 0x20) & !w & HIGHS;
    zero(quote) | zero(backslash) | control
}

/// How many leading bytes of `b` need no attention inside a string (none is `"`,
/// `\` or a control byte), eight at a time.
#[inline]
pub fn plain_len(b: &[u8]) -> usize {
    plain_run::<false>(b)
}

/// As [`plain_len`], stopping at any byte that is not ASCII too: what it passes
/// over is valid UTF-8 without a check (a whole-line check cost the fast
/// reader 8 % of its time).
#[inline]
pub fn plain_ascii_len(b: &[u8]) -> usize {
    plain_run::<true>(b)
}

#[inline(always)]
fn plain_run<const ASCII: bool>(b: &[u8]) -> usize {
    let mut pos = 0;
    while let Some(chunk) = b.get(pos..pos + 8) {
        let w = u64::from_le_bytes(chunk.try_into().unwrap_or([0; 8]));
        let stops = string_stops(w) | if ASCII { w & HIGHS } else { 0 };
        if stops != 0 {
            return pos + (stops.trailing_zeros() / 8) as usize;
        }
        pos += 8;
    }
    while let Some(&c) = b.get(pos) {
        if c == b'"' || c == b'\\' || c < 0x20 || (ASCII && c >= 0x80) {
            return pos;
        }
        pos += 1;
    }
    pos
}

/// The value of the four hex digits at `at`, if there are four.
#[inline]
pub fn hex4(b: &[u8], at: usize) -> Option<u32> {
    let s = b.get(at..at + 4)?;
    let mut v = 0u32;
    for &c in s {
        v = v * 16 + (c as char).to_digit(16)?;
    }
    Some(v)
}

/// Appends the unescaped text of a JSON string body (between its quotes) that a
/// scanner already validated. Lone surrogates become U+FFFD.
pub fn unescape_into(raw: &str, out: &mut String) {
    let Some(first) = memchr::memchr(b'\\', raw.as_bytes()) else {
        out.push_str(raw);
        return;
    };
    out.push_str(&raw[..first]);
    let raw = &raw[first..];
    let b = raw.as_bytes();
    let mut i = 0;
    let mut run = 0;
    while i < b.len() {
        if b[i] != b'\\' {
            i += 1;
            continue;
        }
        out.push_str(&raw[run..i]);
        let Some(&e) = b.get(i + 1) else {
            run = b.len();
            break;
        };
        i += 2;
        match e {
            b'n' => out.push('\n'),
            b't' => out.push('\t'),
            b'r' => out.push('\r'),
            b'b' => out.push('\u{8}'),
            b'f' => out.push('\u{c}'),
            b'u' => {
                let hi = hex4(b, i);
                i += 4;
                let c = match hi {
                    Some(h @ 0xD800..=0xDBFF) => {
                        if b.get(i) == Some(&b'\\') && b.get(i + 1) == Some(&b'u') {
                            match hex4(b, i + 2) {
                                Some(lo @ 0xDC00..=0xDFFF) => {
                                    i += 6;
                                    char::from_u32(0x10000 + ((h - 0xD800) << 10) + (lo - 0xDC00))
                                }
                                _ => None,
                            }
                        } else {
                            None
                        }
                    }
                    Some(c) => char::from_u32(c),
                    None => None,
                };
                out.push(c.unwrap_or('\u{FFFD}'));
            }
            // `\"`, `\\`, `\/` and anything else: the character itself.
            other => out.push(other as char),
        }
        run = i.min(b.len());
    }
    if run < b.len() {
        out.push_str(&raw[run..]);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plain_runs_stop_at_quotes_backslashes_and_controls() {
        assert_eq!(plain_len(b"abcdefghij\"x"), 10);
        assert_eq!(plain_len(b"ab\\"), 2);
        assert_eq!(plain_len(b"abcdefgh\tij"), 8);
        assert_eq!(plain_len("é plain".as_bytes()), 8);
    }

    #[test]
    fn ascii_runs_stop_at_the_first_byte_that_is_not_ascii_too() {
        for at in 0..20 {
            let mut text = "x".repeat(at);
            text.push_str("é\"");
            assert_eq!(plain_ascii_len(text.as_bytes()), at, "{text}");
            assert_eq!(plain_len(text.as_bytes()), at + 2, "{text}");
            // Before a quote, a backslash or a control byte, those stop it.
            let stop = format!("{}\"é", "y".repeat(at));
            assert_eq!(plain_ascii_len(stop.as_bytes()), at);
        }
        assert_eq!(plain_ascii_len(b"abcdefghij\tk"), 10);
        assert_eq!(plain_ascii_len(b"plain ascii to the end"), 22);
    }

    #[test]
    fn unescapes_pairs_and_replaces_lone_surrogates() {
        let mut s = String::new();
        unescape_into(r#"a\n\u00e9\ud83d\ude00\ud800x\/"#, &mut s);
        assert_eq!(s, "a\n\u{e9}\u{1F600}\u{FFFD}x/");
    }
}
