//! JSON number syntax (RFC 8259: `-? (0 | [1-9][0-9]*) (. [0-9]+)? ([eE] [+-]? [0-9]+)?`)
//! and the value of a plain non-negative integer.

/// A number's text, lexed: where it ends and what shape it has.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Number {
    /// Where the number starts (at `-` or its first digit).
    pub start: usize,
    /// Where its integer digits start.
    pub int_start: usize,
    /// How many integer digits it has (1 when it is `0`).
    pub int_len: usize,
    /// One past its last byte.
    pub end: usize,
    /// It starts with `-`.
    pub negative: bool,
    /// It has a fraction or an exponent.
    pub float: bool,
}

/// A number's text breaks the grammar at `at`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct NumberError {
    /// Where a digit was expected.
    pub at: usize,
    /// Which digit was missing.
    pub what: &'static str,
}

/// Lexes the number at `pos` (at `-` or a digit). The integer part follows the
/// grammar, so `01` lexes as `0` and stops before `1`; the caller decides what a
/// digit right after a `0` means.
#[inline]
pub fn number(b: &[u8], pos: usize) -> Result<Number, NumberError> {
    let negative = b.get(pos) == Some(&b'-');
    let int_start = pos + usize::from(negative);
    let mut i = int_start;
    match b.get(i) {
        Some(b'0') => i += 1,
        Some(b'1'..=b'9') => i = digits(b, i),
        _ => {
            return Err(NumberError {
                at: i,
                what: "expected a digit",
            });
        }
    }
    let int_len = i - int_start;
    let mut float = false;
    if b.get(i) == Some(&b'.') {
        let end = digits(b, i + 1);
        if end == i + 1 {
            return Err(NumberError {
                at: end,
                what: "expected a digit after `.`",
            });
        }
        i = end;
        float = true;
    }
    if let Some(b'e' | b'E') = b.get(i) {
        i += 1;
        if let Some(b'+' | b'-') = b.get(i) {
            i += 1;
        }
        let end = digits(b, i);
        if end == i {
            return Err(NumberError {
                at: end,
                what: "expected a digit in the exponent",
            });
        }
        i = end;
        float = true;
    }
    Ok(Number {
        start: pos,
        int_start,
        int_len,
        end: i,
        negative,
        float,
    })
}

impl Number {
    /// The magnitude of its integer part when it fits in u64 (the sign and any
    /// fraction or exponent are the caller's to judge).
    #[inline]
    pub fn magnitude(&self, b: &[u8]) -> Option<u64> {
        b[self.int_start..self.int_start + self.int_len]
            .iter()
            .try_fold(0u64, |v, &c| {
                v.checked_mul(10)?.checked_add(u64::from(c - b'0'))
            })
    }
}

#[inline]
fn digits(b: &[u8], mut i: usize) -> usize {
    while let Some(b'0'..=b'9') = b.get(i) {
        i += 1;
    }
    i
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lexes_the_grammar() {
        let n = number(b"-12.5e+3,", 0).unwrap();
        assert_eq!(
            (n.int_start, n.int_len, n.end, n.negative, n.float),
            (1, 2, 8, true, true)
        );
        let n = number(b"01", 0).unwrap();
        assert_eq!((n.int_len, n.end), (1, 1));
        assert_eq!(
            number(b"18446744073709551615", 0)
                .unwrap()
                .magnitude(b"18446744073709551615"),
            Some(u64::MAX)
        );
        assert_eq!(
            number(b"18446744073709551616", 0)
                .unwrap()
                .magnitude(b"18446744073709551616"),
            None
        );
        assert_eq!(number(b"-", 0).unwrap_err().at, 1);
        assert_eq!(
            number(b"1.", 0).unwrap_err().what,
            "expected a digit after `.`"
        );
        assert_eq!(number(b"1e+x", 0).unwrap_err().at, 3);
    }
}
