//! The executor's [`Sender`] for the real HTTP client (`tpscope_client::Client`):
//! maps one client attempt outcome to the load engine's [`Outcome`].

use tokio_util::sync::CancellationToken;
use tpscope_client::{AttemptOutcome, Client};
use tpscope_model::RunClock;
use tpscope_record::{Outcome, Usage};

use crate::sender::Sender;
use crate::workload::Request;

/// Converts the client's outcome (moving, never copying, the text).
pub fn outcome_from_client(o: AttemptOutcome) -> Outcome {
    let usage = o.usage.and_then(|u| {
        u.completion_tokens.map(|c| Usage {
            prompt_tokens: u.prompt_tokens,
            completion_tokens: c,
        })
    });
    Outcome {
        attempt: o.attempt,
        last_token_at: o.last_token_at,
        usage,
        content_chunks: o.content_chunks,
        text: (!o.text.is_empty()).then_some(o.text),
        chunks: o.chunks,
        retry_after: o.retry_after,
        error_message: o.error_message,
        response_id: o.response_id,
    }
}

impl Sender for Client {
    async fn attempt(
        &self,
        request: &Request,
        clock: &RunClock,
        cancel: &CancellationToken,
    ) -> Outcome {
        outcome_from_client(Client::attempt(self, &request.spec, clock, cancel).await)
    }
}
