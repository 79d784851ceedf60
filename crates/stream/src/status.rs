//! The rules of a response head that are not HTTP plumbing, shared by every
//! producer that reads responses (the bench's client, the proxy): which cause an
//! error status is, the failure's message from its bounded body, and the
//! `Retry-After` the retry policy honours (on a 429 or 503 only).

use std::fmt::Display;
use std::time::{Duration, SystemTime};

use tpscope_model::Cause;

use crate::openai;

/// The cause and message of an attempt that got the error status `code`
/// (`shown`: how the status is written in the message) with `body` (the bounded
/// start of it): `HTTP {shown}`, then the server's own message when the body has one.
pub fn error_status(code: u16, shown: impl Display, body: &[u8]) -> (Cause, String) {
    let cause = Cause::from_http_status(code).unwrap_or(Cause::Http4xx);
    let base = openai::error_body_message(body).unwrap_or_default();
    let message = if base.is_empty() {
        format!("HTTP {shown}")
    } else {
        format!("HTTP {shown}: {base}")
    };
    (cause, message)
}

/// The wait a response with status `code` asks for in its `Retry-After` header
/// (`header`), read only on a 429 or a 503.
pub fn retry_after(code: u16, header: Option<&[u8]>, now: SystemTime) -> Option<Duration> {
    if !matches!(code, 429 | 503) {
        return None;
    }
    parse_retry_after(header?, now)
}

/// Parses `Retry-After`: delay-seconds (a decimal number is accepted too) or an
/// HTTP date (a date in the past gives zero).
pub fn parse_retry_after(value: &[u8], now: SystemTime) -> Option<Duration> {
    let s = std::str::from_utf8(value).ok()?.trim();
    if let Ok(secs) = s.parse::<u64>() {
        return Some(Duration::from_secs(secs));
    }
    if let Ok(secs) = s.parse::<f64>() {
        return Duration::try_from_secs_f64(secs).ok();
    }
    let at = httpdate::parse_http_date(s).ok()?;
    Some(at.duration_since(now).unwrap_or(Duration::ZERO))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn retry_after_seconds_and_dates() {
        let now = SystemTime::UNIX_EPOCH + Duration::from_secs(1_000_000_000);
        assert_eq!(parse_retry_after(b"7", now), Some(Duration::from_secs(7)));
        assert_eq!(
            parse_retry_after(b" 1.5 ", now),
            Some(Duration::from_millis(1500))
        );
        let later = httpdate::fmt_http_date(now + Duration::from_secs(30));
        assert_eq!(
            parse_retry_after(later.as_bytes(), now),
            Some(Duration::from_secs(30))
        );
        let earlier = httpdate::fmt_http_date(now - Duration::from_secs(30));
        assert_eq!(
            parse_retry_after(earlier.as_bytes(), now),
            Some(Duration::ZERO)
        );
        assert_eq!(parse_retry_after(b"soon", now), None);
        assert_eq!(parse_retry_after(b"-3", now), None);
    }

    #[test]
    fn retry_after_is_read_on_429_and_503_only() {
        let now = SystemTime::UNIX_EPOCH;
        let wait = Some(Duration::from_secs(2));
        assert_eq!(retry_after(429, Some(b"2"), now), wait);
        assert_eq!(retry_after(503, Some(b"2"), now), wait);
        assert_eq!(retry_after(500, Some(b"2"), now), None);
        assert_eq!(retry_after(429, None, now), None);
    }

    #[test]
    fn error_status_names_the_cause_and_the_servers_message() {
        let body = br#"{"error":{"message":"slow down"}}"#;
        assert_eq!(
            error_status(429, 429, body),
            (Cause::Http429, "HTTP 429: slow down".to_string())
        );
        assert_eq!(
            error_status(502, "502 Bad Gateway", b""),
            (Cause::Http5xx, "HTTP 502 Bad Gateway".to_string())
        );
        assert_eq!(error_status(418, 418, b"").0, Cause::Http4xx);
    }
}
