//! [`Dialect`]: the decoder chosen at run time (the client's `--api`, the proxy's
//! request path), dispatching to one dialect module's `decode`; and the
//! dialect's non-streaming answer ([`Dialect::absorb_answer`]).

use std::time::Instant;

use tpscope_model::{Api, Cause};

use crate::account::{Decoder, StreamAccount};
use crate::sse::Event;
use crate::{anthropic, openai, responses};

/// Which wire format a response stream is in: the decoder to run, not the API
/// kind (that is the model's `Api`, which chooses its dialect: chat and
/// completions share one).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum Dialect {
    /// OpenAI chat/completions chunks ending in `data: [DONE]`.
    #[default]
    OpenAi,
    /// Anthropic Messages events ending in `event: message_stop`.
    Anthropic,
    /// OpenAI Responses events ending in `response.completed` (or `.incomplete`).
    Responses,
}

impl From<Api> for Dialect {
    /// The wire format of the API's responses.
    fn from(api: Api) -> Dialect {
        match api {
            Api::Chat | Api::Completions => Dialect::OpenAi,
            Api::Anthropic => Dialect::Anthropic,
            Api::Responses => Dialect::Responses,
        }
    }
}

/// A response stream of a dialect chosen at run time.
pub type AnyStream = StreamAccount<Dialect>;

impl Decoder for Dialect {
    const MISSING_END: &'static str = "the stream ended without its end marker";

    fn missing_end(&self) -> &'static str {
        match self {
            Dialect::OpenAi => <openai::OpenAi as Decoder>::MISSING_END,
            Dialect::Anthropic => <anthropic::Anthropic as Decoder>::MISSING_END,
            Dialect::Responses => <responses::Responses as Decoder>::MISSING_END,
        }
    }

    fn on_event(&mut self, ev: Event<'_>, now: Instant, account: &mut StreamAccount<Self>) {
        match self {
            Dialect::OpenAi => openai::decode(ev, now, account),
            Dialect::Anthropic => anthropic::decode(ev, now, account),
            Dialect::Responses => responses::decode(ev, now, account),
        }
    }
}

impl Dialect {
    /// An empty account decoding this dialect.
    pub fn account(self, keep_text: bool, record_chunks: bool) -> AnyStream {
        StreamAccount::with_decoder(self, keep_text, record_chunks)
    }

    /// A whole non-streaming answer read into `account` at `now`; the cause and
    /// message when it does not parse or reports an error.
    pub fn absorb_answer<D>(
        self,
        account: &mut StreamAccount<D>,
        body: &[u8],
        now: Instant,
    ) -> Result<(), (Cause, String)> {
        match self {
            Dialect::OpenAi => {
                let c = openai::parse_response(body).map_err(|e| {
                    (
                        Cause::Malformed,
                        format!("response does not parse: {}", e.0),
                    )
                })?;
                if let Some(err) = c.server_error() {
                    return Err((err.cause, err.message));
                }
                if c.choices.is_none() {
                    // JSON, but not a completion (another API's answer, a proxy's
                    // page): not an ok request with 0 tokens.
                    let shown = String::from_utf8_lossy(&body[..body.len().min(120)]);
                    return Err((
                        Cause::Malformed,
                        format!(
                            "the 200 response is not a completion (no `choices`): {}",
                            shown.trim()
                        ),
                    ));
                }
                account.event(now);
                openai::absorb(account, &c, now);
                Ok(())
            }
            Dialect::Anthropic => anthropic::absorb_message(account, body, now),
            Dialect::Responses => responses::absorb_response(account, body, now),
        }
    }
}
