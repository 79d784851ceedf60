//! What the proxy does to headers: drops hop-by-hop ones (RFC 9110 §7.6.1: those
//! named by `Connection`, and `Connection`, `Proxy-Connection`, `Keep-Alive`,
//! `TE`, `Transfer-Encoding`, `Upgrade`) and its own `x-tpscope-queued-at`,
//! reads that header (RFC 3339 or Unix seconds), and says which request paths are
//! completions (the model's [`Api::of_path`]) and so in which dialect.

use hyper::HeaderMap;
use hyper::header::{self, HeaderName};
use tpscope_model::{Api, Timestamp};
use tpscope_stream::Dialect;

/// The header in which a client states when it queued the request itself.
pub const QUEUED_AT: &str = "x-tpscope-queued-at";

/// Removes hop-by-hop headers (and those `Connection` lists) in place.
pub fn strip_hop_by_hop(h: &mut HeaderMap) {
    let listed: Vec<HeaderName> = connection_tokens(h)
        .filter_map(|n| HeaderName::from_bytes(n.as_bytes()).ok())
        .collect();
    for n in listed {
        h.remove(n);
    }
    for n in [
        header::CONNECTION,
        HeaderName::from_static("proxy-connection"),
        HeaderName::from_static("keep-alive"),
        header::TE,
        header::TRANSFER_ENCODING,
        header::UPGRADE,
    ] {
        h.remove(n);
    }
}

/// The tokens the `Connection` headers list (`close`, `keep-alive`, header
/// names), trimmed.
pub(crate) fn connection_tokens(h: &HeaderMap) -> impl Iterator<Item = &str> {
    h.get_all(header::CONNECTION)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(','))
        .map(str::trim)
}

/// The completion dialect of a `POST` to `path` (the dialect of the API the path
/// calls), or `None` for anything that is not a completion (passed through, not
/// recorded; `/responses/{id}`, retrieving or cancelling one, is not).
pub fn completion_dialect(method: &hyper::Method, path: &str) -> Option<Dialect> {
    if method != hyper::Method::POST {
        return None;
    }
    Api::of_path(path).map(Dialect::from)
}

/// The instant a client put in [`QUEUED_AT`]: RFC 3339, or Unix seconds (a
/// decimal number). `None` when absent or not one of those.
pub fn queued_at(h: &HeaderMap) -> Option<Timestamp> {
    let v = h.get(QUEUED_AT)?.to_str().ok()?.trim();
    if let Ok(secs) = v.parse::<f64>() {
        if !secs.is_finite() || !(0.0..=1e11).contains(&secs) {
            return None;
        }
        return Some(Timestamp::from_unix_nanos((secs * 1e9).round() as i64));
    }
    Timestamp::parse_rfc3339(v).ok()
}

#[cfg(test)]
mod tests {
    use super::*;
    use hyper::header::HeaderValue;

    #[test]
    fn hop_by_hop_and_connection_listed_headers_are_dropped() {
        let mut h = HeaderMap::new();
        h.insert(
            header::CONNECTION,
            HeaderValue::from_static("keep-alive, x-hop"),
        );
        h.insert("x-hop", HeaderValue::from_static("1"));
        h.insert("keep-alive", HeaderValue::from_static("timeout=5"));
        h.insert(
            header::TRANSFER_ENCODING,
            HeaderValue::from_static("chunked"),
        );
        h.insert(header::TE, HeaderValue::from_static("trailers"));
        h.insert(header::AUTHORIZATION, HeaderValue::from_static("Bearer k"));
        h.insert("x-end", HeaderValue::from_static("2"));
        strip_hop_by_hop(&mut h);
        let mut names: Vec<&str> = h.keys().map(|k| k.as_str()).collect();
        names.sort_unstable();
        assert_eq!(names, ["authorization", "x-end"]);
    }

    #[test]
    fn completion_paths_and_dialects() {
        let post = hyper::Method::POST;
        assert_eq!(
            completion_dialect(&post, "/v1/chat/completions"),
            Some(Dialect::OpenAi)
        );
        assert_eq!(
            completion_dialect(&post, "/v1/completions"),
            Some(Dialect::OpenAi)
        );
        assert_eq!(
            completion_dialect(&post, "/v1/messages"),
            Some(Dialect::Anthropic)
        );
        assert_eq!(
            completion_dialect(&post, "/v1/responses"),
            Some(Dialect::Responses)
        );
        assert_eq!(
            completion_dialect(&post, "/v1/responses/resp_1/cancel"),
            None
        );
        assert_eq!(completion_dialect(&post, "/v1/embeddings"), None);
        assert_eq!(
            completion_dialect(&hyper::Method::GET, "/v1/chat/completions"),
            None
        );
    }

    #[test]
    fn queued_at_reads_rfc3339_and_unix_seconds() {
        let mut h = HeaderMap::new();
        h.insert(QUEUED_AT, HeaderValue::from_static("1700000000.5"));
        assert_eq!(
            queued_at(&h),
            Some(Timestamp::from_unix_nanos(1_700_000_000_500_000_000))
        );
        h.insert(
            QUEUED_AT,
            HeaderValue::from_static("2023-11-14T22:13:20.5Z"),
        );
        assert_eq!(
            queued_at(&h),
            Some(Timestamp::from_unix_nanos(1_700_000_000_500_000_000))
        );
        h.insert(QUEUED_AT, HeaderValue::from_static("yesterday"));
        assert_eq!(queued_at(&h), None);
        h.insert(QUEUED_AT, HeaderValue::from_static("-5"));
        assert_eq!(queued_at(&h), None);
    }
}
