//! The OpenAI chat/completions dialect: chunk types ([`chunk`]), the fast scanner
//! ([`parse_chunk`], module `scan`), and the [`OpenAi`] decoder that turns events
//! (`data: {chunk}`, `data: [DONE]`, `event: error`) into account facts.

pub mod chunk;
mod scan;

use std::time::Instant;

use tpscope_model::Cause;

pub use chunk::{
    Chunk, ChunkError, DONE, PartKind, error_body_message, is_done, parse_chunk_serde,
};
pub use scan::{parse_chunk, parse_response};

use crate::account::{Decoder, StreamAccount};
use crate::sse::Event;

/// An OpenAI-style stream (the client's and proxy's default dialect).
pub type StreamState = StreamAccount<OpenAi>;

/// The OpenAI chat/completions decoder (stateless: every chunk stands alone).
#[derive(Clone, Copy, Debug, Default)]
pub struct OpenAi;

impl Decoder for OpenAi {
    const MISSING_END: &'static str = "the stream ended without data: [DONE]";

    fn on_event(&mut self, ev: Event<'_>, now: Instant, account: &mut StreamAccount<Self>) {
        decode(ev, now, account);
    }
}

/// Decodes one OpenAI-style event into `account` (the dialect-neutral entry that
/// [`crate::Dialect`] calls too).
pub fn decode<D>(ev: Event<'_>, now: Instant, account: &mut StreamAccount<D>) {
    if !ev.is_message() {
        if ev.event == b"error" {
            account.event(now);
            let err = match parse_chunk(ev.data).ok().and_then(|c| c.server_error()) {
                Some(e) => e,
                None => chunk::ServerError {
                    cause: Cause::Http5xx,
                    message: error_body_message(ev.data).unwrap_or_else(|| "(no message)".into()),
                },
            };
            account.fail(
                err.cause,
                format!("error event in the stream: {}", err.message),
            );
        }
        // Other named events (keep-alives of some gateways) are not chunks.
        return;
    }
    account.event(now);
    if is_done(ev.data) {
        if account.completion_events == 0 {
            // A 200 stream of nothing but `[DONE]` (or of JSON that is not a
            // completion) is not an empty success: nothing was generated.
            let n = account.events - 1;
            account.fail(Cause::Malformed, format!(
                "the stream ended with data: [DONE] before any completion chunk ({n} other events, none with `choices` or `usage`)"
            ));
        } else {
            account.done(now);
        }
        return;
    }
    // The usual chunk: the last one with other text (see `crate::repeat`).
    if let Some((text, content)) = account.repeat.text_of(ev.data, scan::skipped_members) {
        account.completion_events += 1;
        if let Some(out) = account.text_sink() {
            out.push_str(text);
        }
        account.output(now, content, None);
        return;
    }
    match parse_chunk(ev.data) {
        Ok(c) => {
            if let Some(err) = c.server_error() {
                account.fail(err.cause, format!("error in the stream: {}", err.message));
            } else {
                absorb(account, &c, now);
                if let Some((kind, text)) = c.lone_output() {
                    let content = kind != PartKind::Reasoning;
                    account
                        .repeat
                        .learn(ev.data, text.raw().as_bytes(), content);
                }
            }
        }
        Err(e) => {
            let n = account.events;
            account.fail(
                Cause::Malformed,
                format!("event {n} does not parse: {}", e.0),
            );
        }
    }
}

/// Takes what one parsed chunk (or a whole non-streaming answer) carries.
pub fn absorb<D>(account: &mut StreamAccount<D>, chunk: &Chunk<'_>, now: Instant) {
    if chunk.choices.is_some() || chunk.usage.is_some() {
        account.completion_events += 1;
    }
    if let Some(id) = chunk.id {
        account.response_id(|| id.to_cow().into_owned());
    }
    if let Some(m) = chunk.model {
        account.model(|| m.to_cow().into_owned());
    }
    if let Some(r) = chunk.finish_reason() {
        account.finish_reason(|| r.to_cow().into_owned());
    }
    let usage_growth = chunk.usage.and_then(|u| account.usage(u));
    let seen = chunk.collect_output(account.text_sink());
    if seen.any() {
        account.output(now, seen.content, usage_growth);
    } else {
        account.growth_without_output(usage_growth);
    }
}

#[cfg(test)]
mod tests {
    use crate::repeat::Repeat;

    fn learned(chunk: &[u8], text: &[u8]) -> Repeat {
        let mut r = Repeat::default();
        let at = memchr::memmem::find(chunk, text).unwrap();
        r.learn(chunk, &chunk[at..at + text.len()], true);
        r
    }

    #[test]
    fn a_chunk_whose_skipped_members_differ_repeats() {
        let a = br#"{"choices":[{"delta":{"content":" w1"},"finish_reason":null}],"usage":null,"bench":{"seq":1,"sent_ns":5}}"#;
        let b = br#"{"choices":[{"delta":{"content":" w22"},"finish_reason":null}],"usage":null,"bench":{"seq":22,"sent_ns":61},"obfuscation":"q"}"#;
        let mut r = learned(a, b" w1");
        assert_eq!(
            r.text_of(b, super::scan::skipped_members),
            Some((" w22", true))
        );
        // Without skipped members, or with one the decoder reads: parsed whole.
        let c = br#"{"choices":[{"delta":{"content":" w3"},"finish_reason":null}],"usage":null}"#;
        assert_eq!(
            r.text_of(c, super::scan::skipped_members),
            Some((" w3", true))
        );
        let d = br#"{"choices":[{"delta":{"content":" w4"},"finish_reason":null}],"usage":null,"model":"m"}"#;
        assert_eq!(r.text_of(d, super::scan::skipped_members), None);
        let e = br#"{"choices":[{"delta":{"content":" w5"},"finish_reason":"stop"}],"usage":null,"bench":{}}"#;
        assert_eq!(r.text_of(e, super::scan::skipped_members), None);
        // A kept chunk without skipped members needs the same tail.
        let mut r = learned(c, b" w3");
        assert_eq!(r.text_of(b, super::scan::skipped_members), None);
        assert_eq!(r.text_of(a, super::scan::skipped_members), None);
    }
}
