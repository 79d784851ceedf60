//! What a 200 that is not an event stream held (an HTML error page from a proxy,
//! plain text, garbage): its content type and first bytes, so the failure names
//! them instead of "the stream ended without data: [DONE]".

/// Bytes of the body kept to show.
const KEEP: usize = 64;

/// The content type and the first bytes of a streamed response's body.
#[derive(Debug, Default)]
pub(crate) struct BodyHead {
    /// The `content-type` header, when sent.
    pub content_type: Option<String>,
    head: Vec<u8>,
    bytes: u64,
}

impl BodyHead {
    /// Keeps the start of one body read (nothing once [`KEEP`] bytes are held).
    #[inline]
    pub fn keep(&mut self, data: &[u8]) {
        self.bytes += data.len() as u64;
        if self.head.len() < KEEP {
            let n = (KEEP - self.head.len()).min(data.len());
            self.head.extend_from_slice(&data[..n]);
        }
    }

    /// The failure message of a body that brought bytes but not one server-sent
    /// event; `None` when it brought nothing (a cut, not a wrong body).
    pub fn not_a_stream(&self, status: u16) -> Option<String> {
        if self.head.iter().all(u8::is_ascii_whitespace) {
            return None;
        }
        let ct = self.content_type.as_deref().unwrap_or("none given");
        let text = String::from_utf8_lossy(&self.head);
        let shown: String = text.chars().flat_map(char::escape_debug).collect();
        let more = if self.bytes > self.head.len() as u64 {
            "…"
        } else {
            ""
        };
        Some(format!(
            "HTTP {status} with content type {ct} and not one server-sent event in its {} \
             bytes (expected text/event-stream; is --url the API, not a web page or a \
             proxy's error page?); the body starts: \"{shown}{more}\"",
            self.bytes
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_html_page_with_200_was_named_a_missing_done() {
        let mut b = BodyHead {
            content_type: Some("text/html; charset=utf-8".into()),
            ..BodyHead::default()
        };
        b.keep(b"<!DOCTYPE html>\n<html><head><title>Login</title></head><body>");
        b.keep(b"<p>Please sign in</p></body></html>");
        let m = b.not_a_stream(200).unwrap();
        assert!(
            m.starts_with("HTTP 200 with content type text/html; charset=utf-8"),
            "{m}"
        );
        assert!(m.contains("in its 96 bytes"), "{m}");
        assert!(m.contains(r#"starts: "<!DOCTYPE html>\n<html>"#), "{m}");
        assert!(m.ends_with("…\""), "{m}");
        let mut garbage = BodyHead::default();
        garbage.keep(&[0xff, 0x00, b'x']);
        let m = garbage.not_a_stream(200).unwrap();
        assert!(m.contains("content type none given"), "{m}");
        assert!(m.contains("starts: \"\u{fffd}\\0x\""), "{m}");
        assert_eq!(BodyHead::default().not_a_stream(200), None);
    }
}
