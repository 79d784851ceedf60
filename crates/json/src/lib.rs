//! The low-level JSON lexing that tpscope's two hand-written scanners share (the
//! span-log reader in `tpscope-log` and the stream chunk scanner in
//! `tpscope-stream`): plain string runs eight bytes at a time, whitespace, number
//! syntax, `\u` escapes and unescaping. Each scanner keeps its own walk over
//! objects and arrays and its own error wording; the bytes-level rules live here
//! once. Pure: bytes in, positions out.
#![warn(missing_docs)]

mod number;
mod string;

pub use number::{Number, NumberError, number};
pub use string::{hex4, plain_ascii_len, plain_len, unescape_into};

/// The deepest nesting either scanner accepts (serde_json's default recursion
/// limit).
pub const MAX_DEPTH: u32 = 128;

/// The position of the first byte at or after `pos` that is not JSON whitespace.
#[inline]
pub fn skip_ws(b: &[u8], mut pos: usize) -> usize {
    while let Some(b' ' | b'\t' | b'\n' | b'\r') = b.get(pos) {
        pos += 1;
    }
    pos
}
