//! The closed list of failure causes (docs/design.md §7) and span statuses.

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Serialize};

/// Why an attempt or a request failed. One closed list, shared by the client, the
/// proxy, the importers and the report; every failed attempt carries exactly one.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub enum Cause {
    /// HTTP 429 Too Many Requests (retried, honouring `Retry-After`).
    #[serde(rename = "http_429")]
    Http429,
    /// Any other HTTP 4xx status.
    #[serde(rename = "http_4xx")]
    Http4xx,
    /// Any HTTP 5xx status.
    #[serde(rename = "http_5xx")]
    Http5xx,
    /// The connection could not be made (refused, reset during connect, DNS).
    #[serde(rename = "connect")]
    Connect,
    /// Connecting took longer than the connect timeout.
    #[serde(rename = "timeout_connect")]
    TimeoutConnect,
    /// No output token arrived within the first-token timeout.
    #[serde(rename = "timeout_first_token")]
    TimeoutFirstToken,
    /// No chunk arrived within the stall limit once streaming had begun.
    #[serde(rename = "timeout_stall")]
    TimeoutStall,
    /// The whole request took longer than the total timeout.
    #[serde(rename = "timeout_total")]
    TimeoutTotal,
    /// The stream ended without its end marker (`data: [DONE]`).
    #[serde(rename = "disconnect")]
    Disconnect,
    /// A chunk or response body that does not parse.
    #[serde(rename = "malformed")]
    Malformed,
    /// Cancelled by the user or the run (e.g. Ctrl-C twice).
    #[serde(rename = "cancelled")]
    Cancelled,
}

impl Cause {
    /// Every cause, in the order of docs/design.md §7 (also the order reports list them).
    pub const ALL: [Cause; 11] = [
        Cause::Http429,
        Cause::Http4xx,
        Cause::Http5xx,
        Cause::Connect,
        Cause::TimeoutConnect,
        Cause::TimeoutFirstToken,
        Cause::TimeoutStall,
        Cause::TimeoutTotal,
        Cause::Disconnect,
        Cause::Malformed,
        Cause::Cancelled,
    ];

    /// The name used in span logs and reports (`http_429`, `timeout_stall`, …).
    pub fn as_str(self) -> &'static str {
        match self {
            Cause::Http429 => "http_429",
            Cause::Http4xx => "http_4xx",
            Cause::Http5xx => "http_5xx",
            Cause::Connect => "connect",
            Cause::TimeoutConnect => "timeout_connect",
            Cause::TimeoutFirstToken => "timeout_first_token",
            Cause::TimeoutStall => "timeout_stall",
            Cause::TimeoutTotal => "timeout_total",
            Cause::Disconnect => "disconnect",
            Cause::Malformed => "malformed",
            Cause::Cancelled => "cancelled",
        }
    }

    /// The cause of an HTTP status that is not a success, if it is an error status.
    pub fn from_http_status(status: u16) -> Option<Cause> {
        match status {
            429 => Some(Cause::Http429),
            400..=499 => Some(Cause::Http4xx),
            500..=599 => Some(Cause::Http5xx),
            _ => None,
        }
    }

    /// Position in [`Cause::ALL`], for per-cause counters held in arrays.
    pub fn index(self) -> usize {
        Cause::ALL.iter().position(|c| *c == self).unwrap_or(0)
    }
}

impl fmt::Display for Cause {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A cause name that is not on the closed list.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "unknown failure cause `{0}` (expected one of: http_429, http_4xx, http_5xx, connect, timeout_connect, timeout_first_token, timeout_stall, timeout_total, disconnect, malformed, cancelled)"
)]
pub struct UnknownCause(pub String);

impl FromStr for Cause {
    type Err = UnknownCause;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Cause::ALL
            .into_iter()
            .find(|c| c.as_str() == s)
            .ok_or_else(|| UnknownCause(s.to_string()))
    }
}

/// How a request ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Status {
    /// The response completed (the stream's end marker arrived).
    Ok,
    /// The request failed after its retries; `Span::error` says why.
    Error,
    /// The request was cancelled before it finished.
    Cancelled,
}

impl Status {
    /// The name used in span logs (`ok`, `error`, `cancelled`).
    pub fn as_str(self) -> &'static str {
        match self {
            Status::Ok => "ok",
            Status::Error => "error",
            Status::Cancelled => "cancelled",
        }
    }
}

impl fmt::Display for Status {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cause_names_round_trip_through_text_and_json() {
        for c in Cause::ALL {
            assert_eq!(c.as_str().parse::<Cause>().unwrap(), c);
            let json = serde_json::to_string(&c).unwrap();
            assert_eq!(json, format!("\"{}\"", c.as_str()));
            assert_eq!(c.index(), Cause::ALL.iter().position(|x| *x == c).unwrap());
        }
        assert!("http429".parse::<Cause>().is_err());
    }

    #[test]
    fn http_statuses_map_to_causes() {
        assert_eq!(Cause::from_http_status(429), Some(Cause::Http429));
        assert_eq!(Cause::from_http_status(404), Some(Cause::Http4xx));
        assert_eq!(Cause::from_http_status(503), Some(Cause::Http5xx));
        assert_eq!(Cause::from_http_status(200), None);
    }
}
