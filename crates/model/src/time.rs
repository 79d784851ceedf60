//! Instants on the UTC time line ([`Timestamp`]), their RFC 3339 text form, and the
//! run clock that anchors a monotonic clock to the wall clock once per run.

use std::fmt;
use std::num::NonZeroU64;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use serde::{Deserialize, Deserializer, Serialize, Serializer};

/// An instant in UTC, as nanoseconds since the Unix epoch (1970-01-01T00:00:00Z).
///
/// Stored as a plain integer so that sorting and subtracting are exact; rendered as
/// RFC 3339 with nine fractional digits (`2026-11-21T13:58:27.123456789Z`). The
/// one instant it cannot hold, `i64::MIN` nanoseconds (in 1677), is the niche that
/// makes an `Option<Timestamp>` 8 bytes: span facts hold three of them per span.
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Timestamp(NonZeroU64);

/// Flipping the sign bit maps i64 onto u64 in order, and `i64::MIN` onto 0.
const SIGN: u64 = 1 << 63;

impl Default for Timestamp {
    /// The Unix epoch.
    fn default() -> Self {
        Timestamp::from_unix_nanos(0)
    }
}

impl fmt::Debug for Timestamp {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_tuple("Timestamp")
            .field(&self.unix_nanos())
            .finish()
    }
}

/// The earliest instant a span log may carry (2000-01-01T00:00:00Z). Anything
/// earlier is almost certainly a number read in the wrong unit.
pub const EARLIEST_PLAUSIBLE: Timestamp = Timestamp::from_unix_nanos(946_684_800_000_000_000);
/// The latest instant a span log may carry (2200-01-01T00:00:00Z).
pub const LATEST_PLAUSIBLE: Timestamp = Timestamp::from_unix_nanos(7_258_118_400_000_000_000);

impl Timestamp {
    /// The instant `nanos` nanoseconds after the Unix epoch (`i64::MIN`, in 1677,
    /// becomes one nanosecond later).
    pub const fn from_unix_nanos(nanos: i64) -> Self {
        match NonZeroU64::new(nanos as u64 ^ SIGN) {
            Some(bits) => Timestamp(bits),
            None => Timestamp(NonZeroU64::MIN),
        }
    }

    /// Nanoseconds since the Unix epoch.
    pub const fn unix_nanos(self) -> i64 {
        (self.0.get() ^ SIGN) as i64
    }

    /// Seconds since the Unix epoch, as a float (for rendering and plotting only).
    pub fn unix_seconds_f64(self) -> f64 {
        self.unix_nanos() as f64 / 1e9
    }

    /// The current wall-clock time. Producers should use [`RunClock`] instead, so
    /// that a clock step during a run does not bend durations.
    pub fn now_wall() -> Self {
        match SystemTime::now().duration_since(UNIX_EPOCH) {
            Ok(d) => Timestamp::from_unix_nanos(d.as_nanos().min(i64::MAX as u128) as i64),
            Err(e) => {
                Timestamp::from_unix_nanos(-(e.duration().as_nanos().min(i64::MAX as u128) as i64))
            }
        }
    }

    /// `self − earlier` when `self` is not before `earlier`; `None` otherwise.
    pub fn since(self, earlier: Timestamp) -> Option<Duration> {
        let d = self.unix_nanos().checked_sub(earlier.unix_nanos())?;
        (d >= 0).then(|| Duration::from_nanos(d as u64))
    }

    /// `self − other` in nanoseconds, which may be negative.
    pub fn signed_nanos_since(self, other: Timestamp) -> i64 {
        self.unix_nanos().saturating_sub(other.unix_nanos())
    }

    /// The instant `d` later (saturating at the end of the representable range).
    pub fn after(self, d: Duration) -> Timestamp {
        Timestamp::from_unix_nanos(
            self.unix_nanos()
                .saturating_add(d.as_nanos().min(i64::MAX as u128) as i64),
        )
    }

    /// The instant `d` earlier (saturating).
    pub fn before(self, d: Duration) -> Timestamp {
        Timestamp::from_unix_nanos(
            self.unix_nanos()
                .saturating_sub(d.as_nanos().min(i64::MAX as u128) as i64),
        )
    }

    /// Whether the instant lies in [2000-01-01, 2200-01-01), the range a span log
    /// is allowed to carry.
    pub fn is_plausible(self) -> bool {
        self >= EARLIEST_PLAUSIBLE && self < LATEST_PLAUSIBLE
    }

    /// Parses an RFC 3339 instant: `YYYY-MM-DDTHH:MM:SS[.fraction](Z|±HH:MM)`.
    /// `t`/`T`/space are accepted as the separator and `z`/`Z` as UTC; up to nine
    /// fractional digits are kept (more are rejected rather than rounded silently).
    pub fn parse_rfc3339(s: &str) -> Result<Timestamp, TimeParseError> {
        parse_rfc3339(s.as_bytes()).ok_or_else(|| TimeParseError {
            text: truncate_for_message(s),
        })
    }
}

fn truncate_for_message(s: &str) -> String {
    if s.len() <= 60 {
        s.to_string()
    } else {
        let mut end = 60;
        while !s.is_char_boundary(end) {
            end -= 1;
        }
        format!("{}…", &s[..end])
    }
}

/// A timestamp text that is not RFC 3339.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "`{text}` is not an RFC 3339 timestamp between 1678 and 2262 (expected e.g. 2026-11-21T13:58:27.123456789Z)"
)]
pub struct TimeParseError {
    /// The offending text (cut to 60 characters).
    pub text: String,
}

fn digits(b: &[u8], from: usize, n: usize) -> Option<i64> {
    let mut v = 0i64;
    for i in from..from + n {
        let c = *b.get(i)?;
        if !c.is_ascii_digit() {
            return None;
        }
        v = v * 10 + i64::from(c - b'0');
    }
    Some(v)
}

/// Days since 1970-01-01 of a proleptic Gregorian date (H. Hinnant's algorithm).
fn days_from_civil(y: i64, m: i64, d: i64) -> i64 {
    let y = if m <= 2 { y - 1 } else { y };
    let era = if y >= 0 { y } else { y - 399 } / 400;
    let yoe = y - era * 400;
    let mp = (m + 9) % 12;
    let doy = (153 * mp + 2) / 5 + d - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

/// The civil date of a day count since 1970-01-01 (inverse of `days_from_civil`).
fn civil_from_days(z: i64) -> (i64, i64, i64) {
    let z = z + 719_468;
    let era = if z >= 0 { z } else { z - 146_096 } / 146_097;
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let y = yoe + era * 400;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    (if m <= 2 { y + 1 } else { y }, m, d)
}

fn days_in_month(y: i64, m: i64) -> i64 {
    match m {
        1 | 3 | 5 | 7 | 8 | 10 | 12 => 31,
        4 | 6 | 9 | 11 => 30,
        _ if (y % 4 == 0 && y % 100 != 0) || y % 400 == 0 => 29,
        _ => 28,
    }
}

/// Seconds since the epoch at the start of the hour `YYYY-MM-DDTHH` (validated).
fn hour_start(b: &[u8]) -> Option<i64> {
    if b.len() < 13 || b[4] != b'-' || b[7] != b'-' || !matches!(b[10], b'T' | b't' | b' ') {
        return None;
    }
    let (y, mo, d, h) = (
        digits(b, 0, 4)?,
        digits(b, 5, 2)?,
        digits(b, 8, 2)?,
        digits(b, 11, 2)?,
    );
    if !(1..=12).contains(&mo) || d < 1 || d > days_in_month(y, mo) || h > 23 {
        return None;
    }
    Some(days_from_civil(y, mo, d) * 86_400 + h * 3600)
}

/// The hour of the last canonical timestamp parsed: a log's timestamps mostly share
/// it, so [`Timestamp::parse_canonical`] redoes the calendar only when it changes.
#[derive(Clone, Copy, Debug)]
pub struct HourCache {
    /// `YYYY-MM-DDTHH` of the cached hour, as bytes 0..8 and 5..13 (two loads
    /// compare faster than a 13-byte array).
    key: (u64, u64),
    /// Seconds since the epoch at its start.
    start: i64,
}

impl HourCache {
    #[inline]
    fn key_of(b: &[u8; 30]) -> (u64, u64) {
        let word = |i: usize| {
            let mut w = [0; 8];
            w.copy_from_slice(&b[i..i + 8]);
            u64::from_le_bytes(w)
        };
        (word(0), word(5))
    }
}

impl Default for HourCache {
    fn default() -> Self {
        let mut epoch = [b'0'; 30];
        epoch[..13].copy_from_slice(b"1970-01-01T00");
        HourCache {
            key: HourCache::key_of(&epoch),
            start: 0,
        }
    }
}

thread_local! {
    /// The cache of [`Timestamp::parse_rfc3339`]'s fast path.
    static LAST_HOUR: std::cell::Cell<HourCache> = std::cell::Cell::new(HourCache::default());
}

/// Eight ASCII digits as a number (the first digit most significant), or `None` if
/// any byte is not a digit. Branch-free: a fraction costs a few multiplications
/// instead of a loop.
#[inline]
fn eight_digits(b: [u8; 8]) -> Option<u64> {
    let v = u64::from_le_bytes(b);
    // Each byte is 0x30..=0x39: high nibble 3, and adding 6 does not leave it.
    let high = 0xF0F0_F0F0_F0F0_F0F0u64;
    if (v & high) | ((v.wrapping_add(0x0606_0606_0606_0606) & high) >> 4) != 0x3333_3333_3333_3333 {
        return None;
    }
    let v = v - 0x3030_3030_3030_3030;
    // Pairs, then quads, then the eight (the first byte is the lowest).
    // The products wrap on purpose: only the bits kept by the masks and the shift
    // matter.
    let v = v.wrapping_mul(10).wrapping_add(v >> 8);
    let mask = 0x0000_00FF_0000_00FFu64;
    let v = (v & mask)
        .wrapping_mul(0x000F_4240_0000_0064)
        .wrapping_add(((v >> 16) & mask).wrapping_mul(0x0000_2710_0000_0001))
        >> 32;
    Some(v)
}

impl Timestamp {
    /// Parses the form tpscope writes, `YYYY-MM-DDTHH:MM:SS.fffffffffZ` (exactly
    /// these 30 bytes), reusing `cache` when the hour is the one parsed last.
    /// `None` for any other text, which [`Timestamp::parse_rfc3339`] may still
    /// accept; for text this accepts, both give the same instant.
    #[inline]
    pub fn parse_canonical(b: &[u8; 30], cache: &mut HourCache) -> Option<Timestamp> {
        if b[13] != b':' || b[16] != b':' || b[19] != b'.' || b[29] != b'Z' {
            return None;
        }
        let key = HourCache::key_of(b);
        let start = if key == cache.key {
            cache.start
        } else {
            let start = hour_start(&b[..13])?;
            *cache = HourCache { key, start };
            start
        };
        let two = |i: usize| {
            let (a, b) = (b[i].wrapping_sub(b'0'), b[i + 1].wrapping_sub(b'0'));
            (a < 10 && b < 10).then(|| i64::from(a * 10 + b))
        };
        let (mi, s) = (two(14)?, two(17)?);
        // A leap second (:60) is folded into the next second, as most systems do.
        if mi > 59 || s > 60 {
            return None;
        }
        let last = b[28].wrapping_sub(b'0');
        if last >= 10 {
            return None;
        }
        let head: [u8; 8] = b[20..28].try_into().ok()?;
        let frac = eight_digits(head)? as i64 * 10 + i64::from(last);
        (start + mi * 60 + s)
            .checked_mul(1_000_000_000)?
            .checked_add(frac)
            .map(Timestamp::from_unix_nanos)
    }
}

/// The canonical form through the thread's hour cache.
fn parse_canonical(b: &[u8]) -> Option<Timestamp> {
    let b: &[u8; 30] = b.try_into().ok()?;
    let mut cache = LAST_HOUR.with(std::cell::Cell::get);
    let t = Timestamp::parse_canonical(b, &mut cache);
    LAST_HOUR.with(|c| c.set(cache));
    t
}

fn parse_rfc3339(b: &[u8]) -> Option<Timestamp> {
    parse_canonical(b).or_else(|| parse_general(b))
}

/// Every form `parse_rfc3339` accepts, without the canonical fast path.
fn parse_general(b: &[u8]) -> Option<Timestamp> {
    if b.len() < 20 || b[4] != b'-' || b[7] != b'-' || b[13] != b':' || b[16] != b':' {
        return None;
    }
    if !matches!(b[10], b'T' | b't' | b' ') {
        return None;
    }
    let (y, mo, d) = (digits(b, 0, 4)?, digits(b, 5, 2)?, digits(b, 8, 2)?);
    let (h, mi, s) = (digits(b, 11, 2)?, digits(b, 14, 2)?, digits(b, 17, 2)?);
    if !(1..=12).contains(&mo) || d < 1 || d > days_in_month(y, mo) || h > 23 || mi > 59 {
        return None;
    }
    // A leap second (:60) is folded into the next second, as most systems do.
    if s > 60 {
        return None;
    }
    let mut i = 19;
    let mut frac = 0i64;
    if b.get(i) == Some(&b'.') {
        i += 1;
        let start = i;
        while i < b.len() && b[i].is_ascii_digit() {
            if i - start >= 9 {
                return None;
            }
            frac = frac * 10 + i64::from(b[i] - b'0');
            i += 1;
        }
        let n = i - start;
        if n == 0 {
            return None;
        }
        frac *= 10i64.pow(9 - n as u32);
    }
    let offset_secs = match b.get(i)? {
        b'Z' | b'z' if i + 1 == b.len() => 0,
        c @ (b'+' | b'-') if i + 6 == b.len() && b[i + 3] == b':' => {
            let oh = digits(b, i + 1, 2)?;
            let om = digits(b, i + 4, 2)?;
            if oh > 23 || om > 59 {
                return None;
            }
            let off = oh * 3600 + om * 60;
            if *c == b'+' { off } else { -off }
        }
        _ => return None,
    };
    let secs = days_from_civil(y, mo, d) * 86_400 + h * 3600 + mi * 60 + s - offset_secs;
    secs.checked_mul(1_000_000_000)?
        .checked_add(frac)
        .map(Timestamp::from_unix_nanos)
}

impl fmt::Display for Timestamp {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let secs = self.unix_nanos().div_euclid(1_000_000_000);
        let nanos = self.unix_nanos().rem_euclid(1_000_000_000);
        let days = secs.div_euclid(86_400);
        let sod = secs.rem_euclid(86_400);
        let (y, m, d) = civil_from_days(days);
        write!(
            f,
            "{y:04}-{m:02}-{d:02}T{:02}:{:02}:{:02}.{nanos:09}Z",
            sod / 3600,
            sod / 60 % 60,
            sod % 60
        )
    }
}

impl Serialize for Timestamp {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

impl<'de> Deserialize<'de> for Timestamp {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl serde::de::Visitor<'_> for V {
            type Value = Timestamp;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("an RFC 3339 timestamp string")
            }
            fn visit_str<E: serde::de::Error>(self, v: &str) -> Result<Timestamp, E> {
                Timestamp::parse_rfc3339(v).map_err(E::custom)
            }
        }
        d.deserialize_str(V)
    }
}

/// Serde helpers for `Duration` fields stored as seconds (a JSON number).
pub mod duration_secs {
    use super::*;

    /// Writes a duration as fractional seconds.
    pub fn serialize<S: Serializer>(d: &Duration, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_f64(d.as_secs_f64())
    }

    /// Reads non-negative, finite fractional seconds.
    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Duration, D::Error> {
        let v = f64::deserialize(d)?;
        Duration::try_from_secs_f64(v).map_err(|_| {
            serde::de::Error::custom(format!("{v} is not a non-negative number of seconds"))
        })
    }

    /// The same for `Option<Duration>`.
    pub mod option {
        use super::*;

        /// Writes `Some(d)` as fractional seconds and `None` as null.
        pub fn serialize<S: Serializer>(d: &Option<Duration>, s: S) -> Result<S::Ok, S::Error> {
            match d {
                Some(d) => s.serialize_f64(d.as_secs_f64()),
                None => s.serialize_none(),
            }
        }

        /// Reads null or non-negative, finite fractional seconds.
        pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Option<Duration>, D::Error> {
            match Option::<f64>::deserialize(d)? {
                None => Ok(None),
                Some(v) => Duration::try_from_secs_f64(v).map(Some).map_err(|_| {
                    serde::de::Error::custom(format!("{v} is not a non-negative number of seconds"))
                }),
            }
        }
    }
}

/// One monotonic clock anchored once to the wall clock, so that every timestamp of a
/// run is `anchor_wall + (mono − anchor_mono)` (docs/design.md §2): a wall-clock step
/// during the run does not bend durations.
#[derive(Clone, Copy, Debug)]
pub struct RunClock {
    anchor_wall: Timestamp,
    anchor_mono: Instant,
}

impl RunClock {
    /// Anchors a clock now.
    pub fn start() -> Self {
        RunClock {
            anchor_mono: Instant::now(),
            anchor_wall: Timestamp::now_wall(),
        }
    }

    /// Anchors a clock at a given pair (for tests and replays).
    pub fn anchored(anchor_wall: Timestamp, anchor_mono: Instant) -> Self {
        RunClock {
            anchor_wall,
            anchor_mono,
        }
    }

    /// The wall-clock instant of the anchor.
    pub fn anchor_wall(&self) -> Timestamp {
        self.anchor_wall
    }

    /// The monotonic instant of the anchor.
    pub fn anchor_mono(&self) -> Instant {
        self.anchor_mono
    }

    /// The timestamp of a monotonic instant (instants before the anchor are placed
    /// before the anchor's wall time, too).
    pub fn at(&self, mono: Instant) -> Timestamp {
        match mono.checked_duration_since(self.anchor_mono) {
            Some(d) => self.anchor_wall.after(d),
            None => self.anchor_wall.before(self.anchor_mono - mono),
        }
    }

    /// The timestamp of now.
    pub fn now(&self) -> Timestamp {
        self.at(Instant::now())
    }
}

#[cfg(test)]
mod tests;
