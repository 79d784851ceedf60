//! The fast path for the lines tpscope writes itself: span and sample records with
//! their keys in writer order, plain strings and canonical timestamps, read straight
//! into analysis facts, as the general path's record ([`Parsed`]) so that the
//! reader files both alike. Any other line — and any line the general reader would
//! reject — is declined (`None`) and read by the general path, which alone reports
//! errors; for every line this accepts, the general path gives the same record.

use std::borrow::Cow;
use std::num::NonZeroU32;
use std::time::Duration;

use crate::reader::Parsed;
use tpscope_analysis::input::saturate;
use tpscope_analysis::{ClientFacts, SampleFacts, SpanFacts};
use tpscope_json::{plain_ascii_len, plain_len};
use tpscope_model::{
    Cause, HourCache, MAX_PLAUSIBLE_TOKENS, Status, Timestamp, TokenSource, check_lifecycle,
};

/// Declares a module of keys as they follow a value, `,"key":`, one constant per
/// field of one of the model's lists ([`tpscope_model::span_fields!`],
/// [`tpscope_model::attempt_fields!`]); constants, so matching them costs what a
/// literal does.
macro_rules! keys_after_value {
    ([$module:ident] $($(#[$attr:meta])* $name:ident $(as $key:literal)?: $ty:ty,)*) => {
        #[allow(non_upper_case_globals, dead_code)] // `key::chunks`: such lines are declined
        mod $module {
            $(pub(super) const $name: &[u8] =
                concat!(",\"", tpscope_model::field_key!($name $(as $key)?), "\":").as_bytes();)*
        }
    };
}

tpscope_model::span_fields!(keys_after_value[key]);
tpscope_model::attempt_fields!(keys_after_value[attempt_key]);

/// Reads one line (without its line break) written in tpscope's own form: its
/// run id and record; `None` when the line is anything else, valid or not
/// (including text that is not UTF-8).
// The record is built where it is returned: a span's facts were copied twice
// on the way out (checking the line's end after building it, and converting
// a record of the fast path's own into the reader's).
pub(crate) fn fast_record<'a>(
    line: &'a [u8],
    hours: &mut HourCache,
) -> Option<(&'a str, Parsed<'a>)> {
    // Not validated as UTF-8 as a whole: everything outside strings must match
    // ASCII literals, digits and timestamps, and every string is checked as
    // it is read, so a line this accepts is valid UTF-8.
    let mut c = Cursor { b: line, pos: 0 };
    if c.lit(b"{\"kind\":\"span\"") && c.lit(key::run_id) {
        span(&mut c, hours)
    } else if c.lit(b"{\"kind\":\"sample\",\"run_id\":") {
        sample(&mut c, hours)
    } else {
        None
    }
}

fn sample<'a>(c: &mut Cursor<'a>, hours: &mut HourCache) -> Option<(&'a str, Parsed<'a>)> {
    let run_id = c.nonempty_str()?;
    c.need(b",\"at\":")?;
    let at = c.time(hours).filter(|t| t.is_plausible())?;
    c.need(b",\"in_flight\":")?;
    let in_flight = c.u32()?;
    c.need(b",\"queue_depth\":")?;
    let queue_depth = c.u32()?;
    let cap = if c.lit(b",\"cap\":") {
        Some(c.u32()?)
    } else {
        None
    };
    c.end()?;
    Some((
        run_id,
        Parsed::Sample(SampleFacts {
            at,
            in_flight,
            queue_depth,
            cap,
        }),
    ))
}

fn span<'a>(c: &mut Cursor<'a>, hours: &mut HourCache) -> Option<(&'a str, Parsed<'a>)> {
    let run_id = c.nonempty_str()?;
    c.need(key::span_id)?;
    let span_id = c.nonempty_str()?;
    let request_id = if c.lit(key::request_id) {
        Some(c.str()?)
    } else {
        None
    };
    c.need(key::status)?;
    let status = match c.str()? {
        "ok" => Status::Ok,
        "error" => Status::Error,
        "cancelled" => Status::Cancelled,
        _ => return None,
    };
    c.need(key::queued_at)?;
    let queued_at = c.time(hours)?;
    let admitted_at = c.opt_time(key::admitted_at, hours)?;
    let first_token_at = c.opt_time(key::first_token_at, hours)?;
    let last_token_at = c.opt_time(key::last_token_at, hours)?;
    c.need(key::released_at)?;
    let released_at = c.time(hours)?;
    c.need(key::output_tokens)?;
    let output_tokens = c.uint()?;
    let input_tokens = if c.lit(key::input_tokens) {
        Some(c.uint().filter(|&n| n <= MAX_PLAUSIBLE_TOKENS)?)
    } else {
        None
    };
    let source = if c.lit(key::token_source) {
        Some(c.str()?.parse::<TokenSource>().ok()?)
    } else {
        None
    };
    c.need(key::retry_count)?;
    let retry_count = c.u32()?;
    let mut retry_causes = Vec::new();
    if c.lit(key::retry_causes) && c.lit(b"[") {
        loop {
            retry_causes.push(c.cause()?);
            if !c.lit(b",") {
                break;
            }
        }
        c.need(b"]")?;
        if retry_causes.len() != retry_count as usize {
            return None;
        }
    }
    let mut wasted_tokens = 0;
    let mut last_attempt_at = None;
    let mut client = ClientFacts::default();
    if c.lit(key::attempts) && c.lit(b"[") {
        let mut n = 0;
        let (mut between, mut prev_end) = (std::time::Duration::ZERO, None);
        loop {
            let (wasted, (started, ended), facts) = attempt(c, hours)?;
            wasted_tokens += wasted;
            // The first attempt's facts are the span's so far (adding them to
            // none gives them back): most spans make one attempt.
            if n == 0 {
                client = facts;
            } else {
                client.add(facts);
            }
            n += 1;
            if n > 1 {
                between += started
                    .since(prev_end.unwrap_or(started))
                    .unwrap_or_default();
                last_attempt_at = Some((started, between));
            }
            prev_end = Some(ended);
            if !c.lit(b",") {
                break;
            }
        }
        c.need(b"]")?;
    }
    let mut error_message = None;
    let error_cause = if c.lit(key::error) && c.lit(b"{\"cause\":") {
        let cause = c.cause()?;
        if c.lit(b",\"message\":") {
            error_message = Some(c.str()?);
        }
        c.need(b"}")?;
        Some(cause)
    } else {
        None
    };
    // Multi-turn fields: kept only when both are given, as the general path does.
    let session_id = if c.lit(key::session_id) {
        Some(c.str()?)
    } else {
        None
    };
    // Turns count from 1: a 0 is for the general path to name.
    let turn = if c.lit(key::turn) {
        Some(NonZeroU32::new(c.u32()?)?)
    } else {
        None
    };
    let tokenizer_tokens = if c.lit(key::tokenizer_output_tokens) {
        Some(c.uint()?)
    } else {
        None
    };
    // The analysis does not read it; a plain string is skipped, any other value
    // declined (for the general path to judge).
    if c.lit(key::finish_reason) {
        c.str()?;
    }
    let facts = SpanFacts {
        status,
        error_cause,
        queued_at,
        admitted_at,
        first_token_at,
        last_token_at,
        released_at,
        output_tokens,
        input_tokens,
        retry_count,
        retry_causes: retry_causes.into(),
        wasted_tokens,
        chunks: None,
        client: client.times,
        session: None,
    };
    check_lifecycle(facts.lifecycle()).ok()?;
    c.end()?;
    Some((
        run_id,
        Parsed::Span {
            facts,
            stamps: client.stamps,
            source,
            span_id: Cow::Borrowed(span_id),
            error_message: error_message.map(Cow::Borrowed),
            request_id: request_id.map(Cow::Borrowed),
            last_attempt_at,
            session: session_id.zip(turn).map(|(id, t)| (Cow::Borrowed(id), t)),
            tokenizer_tokens,
        },
    ))
}

/// One attempt object; returns the tokens it wasted (those of an attempt that did
/// not end ok), when it started and ended, and its client facts. Fields the analysis does
/// not use are only validated.
fn attempt(
    c: &mut Cursor<'_>,
    hours: &mut HourCache,
) -> Option<(u64, (Timestamp, Timestamp), ClientFacts)> {
    // `{"started_at":`: the first key follows the brace, not a value.
    c.need(b"{")?;
    c.need(&attempt_key::started_at[1..])?;
    let started = c.time(hours)?;
    if c.lit(attempt_key::first_byte_at) {
        c.str()?;
    }
    if c.lit(attempt_key::first_token_at) {
        c.str()?;
    }
    c.need(attempt_key::ended_at)?;
    let ended = c.time(hours)?;
    if ended < started {
        return None;
    }
    let mut facts = ClientFacts::default();
    facts.times.end_at = c.opt_time(attempt_key::end_at, hours)?;
    if c.lit(attempt_key::http_status) {
        c.number()?;
    }
    let failed = if c.lit(attempt_key::cause) {
        c.cause()?;
        true
    } else {
        false
    };
    c.need(attempt_key::tokens)?;
    let tokens = c.uint().filter(|&n| n <= MAX_PLAUSIBLE_TOKENS)?;
    if !c.at(b'}') {
        optional_attempt_fields(c, &mut facts)?;
    }
    c.need(b"}")?;
    Some((if failed { tokens } else { 0 }, (started, ended), facts))
}

/// The optional fields that may follow an attempt's `tokens` (none may, and
/// then their keys are not tried one by one: most attempts end there or soon
/// after).
#[inline(always)]
fn optional_attempt_fields(c: &mut Cursor<'_>, facts: &mut ClientFacts) -> Option<()> {
    if c.lit(attempt_key::connection_reused) && !(c.lit(b"true") || c.lit(b"false")) {
        return None;
    }
    if c.lit(attempt_key::connect_time) {
        facts.times.connect = Some(c.secs()?.into());
    }
    if c.lit(attempt_key::backoff) {
        c.number()?;
    }
    // How exactly the client stamped it: only a client that traces reads says.
    if c.at(b'}') {
        return Some(());
    }
    if c.lit(attempt_key::client_lag) {
        facts.stamps.lag = Some(c.secs()?);
    }
    if c.lit(attempt_key::reads) {
        facts.stamps.reads = saturate(c.uint()?);
    }
    if c.lit(attempt_key::traced_chunks) {
        facts.stamps.traced_chunks = saturate(c.uint()?);
    }
    if c.lit(attempt_key::inexact_chunks) {
        facts.stamps.inexact_chunks = saturate(c.uint()?);
    }
    if c.lit(attempt_key::first_token_exact) {
        facts.stamps.first_token_exact = Some(if c.lit(b"true") {
            true
        } else {
            c.need(b"false")?;
            false
        });
    }
    if c.lit(attempt_key::resends) {
        facts.stamps.resends = c.u32()?;
    }
    Some(())
}

/// A position in a line.
struct Cursor<'a> {
    b: &'a [u8],
    pos: usize,
}

impl<'a> Cursor<'a> {
    /// Consumes `s` if the text continues with it.
    #[inline(always)]
    fn lit(&mut self, s: &[u8]) -> bool {
        match self.b.get(self.pos..self.pos + s.len()) {
            Some(w) if w == s => {
                self.pos += s.len();
                true
            }
            _ => false,
        }
    }

    /// Whether `b` comes next.
    #[inline(always)]
    fn at(&self, b: u8) -> bool {
        self.b.get(self.pos) == Some(&b)
    }

    /// Consumes `s`, which must come next.
    #[inline(always)]
    fn need(&mut self, s: &[u8]) -> Option<()> {
        self.lit(s).then_some(())
    }

    /// The record's closing brace, which must end the line.
    #[inline(always)]
    fn end(&mut self) -> Option<()> {
        (self.lit(b"}") && self.pos == self.b.len()).then_some(())
    }

    /// A string without escapes (its quotes consumed, its content returned).
    #[inline]
    fn str(&mut self) -> Option<&'a str> {
        self.need(b"\"")?;
        let start = self.pos;
        let rest = &self.b[start..];
        let ascii = plain_ascii_len(rest);
        let s = if rest.get(ascii) == Some(&b'"') {
            // SAFETY: `plain_ascii_len` passed only ASCII bytes.
            unsafe { std::str::from_utf8_unchecked(&rest[..ascii]) }
        } else {
            // Not ASCII: checked here. Escapes and control bytes (invalid raw)
            // are for the general path.
            let len = plain_len(rest);
            if rest.get(len) != Some(&b'"') {
                return None;
            }
            std::str::from_utf8(&rest[..len]).ok()?
        };
        self.pos = start + s.len() + 1;
        Some(s)
    }

    fn nonempty_str(&mut self) -> Option<&'a str> {
        self.str().filter(|s| !s.is_empty())
    }

    fn cause(&mut self) -> Option<Cause> {
        self.str()?.parse().ok()
    }

    /// A canonical timestamp string, `"YYYY-MM-DDTHH:MM:SS.fffffffffZ"`.
    #[inline(always)]
    fn time(&mut self, hours: &mut HourCache) -> Option<Timestamp> {
        let quoted: &[u8; 32] = self.b.get(self.pos..self.pos + 32)?.try_into().ok()?;
        let (open, rest) = quoted.split_first()?;
        let (text, close) = rest.split_first_chunk::<30>()?;
        if *open != b'"' || close != b"\"" {
            return None;
        }
        let t = Timestamp::parse_canonical(text, hours)?;
        self.pos += 32;
        Some(t)
    }

    /// A timestamp after `key`, when the key comes next; `None` when it comes but
    /// its value is not a canonical timestamp.
    #[inline(always)]
    fn opt_time(&mut self, key: &[u8], hours: &mut HourCache) -> Option<Option<Timestamp>> {
        if self.lit(key) {
            self.time(hours).map(Some)
        } else {
            Some(None)
        }
    }

    /// A whole number without sign, fraction or exponent that fits in 64 bits.
    #[inline(always)]
    fn uint(&mut self) -> Option<u64> {
        let start = self.pos;
        let mut v = 0u64;
        while let Some(&c) = self.b.get(self.pos) {
            let d = c.wrapping_sub(b'0');
            if d >= 10 {
                break;
            }
            v = v.checked_mul(10)?.checked_add(u64::from(d))?;
            self.pos += 1;
        }
        let n = self.pos - start;
        if n == 0 || (n > 1 && self.b[start] == b'0') {
            return None;
        }
        // A fraction or exponent makes it a float: the general path decides.
        if matches!(self.b.get(self.pos), Some(b'.' | b'e' | b'E')) {
            return None;
        }
        Some(v)
    }

    fn u32(&mut self) -> Option<u32> {
        u32::try_from(self.uint()?).ok()
    }

    fn digits(&mut self) -> usize {
        let start = self.pos;
        while matches!(self.b.get(self.pos), Some(b'0'..=b'9')) {
            self.pos += 1;
        }
        self.pos - start
    }

    /// A non-negative number of seconds, read as the general path reads it.
    fn secs(&mut self) -> Option<Duration> {
        let start = self.pos;
        self.number()?;
        let v: f64 = std::str::from_utf8(&self.b[start..self.pos])
            .ok()?
            .parse()
            .ok()?;
        Duration::try_from_secs_f64(v).ok()
    }

    /// Any JSON number (validated, not read).
    fn number(&mut self) -> Option<()> {
        self.lit(b"-");
        let int_start = self.pos;
        let n = self.digits();
        if n == 0 || (n > 1 && self.b[int_start] == b'0') {
            return None;
        }
        if self.lit(b".") && self.digits() == 0 {
            return None;
        }
        if matches!(self.b.get(self.pos), Some(b'e' | b'E')) {
            self.pos += 1;
            if matches!(self.b.get(self.pos), Some(b'+' | b'-')) {
                self.pos += 1;
            }
            if self.digits() == 0 {
                return None;
            }
        }
        Some(())
    }
}
