//! The end of one attempt's response (pure): how a stream that stopped ended, and
//! the attempt's [`AttemptOutcome`] from the facts its producer stamped (the head,
//! its transport) and the stream account. The client and the proxy both close
//! their attempts here, so an attempt has one shape whoever read it.

use std::time::Instant;

use tpscope_model::{AttemptOutcome, Cause, RunClock};

use crate::account::{StreamAccount, StreamEnd};

/// How a stream whose body stopped ended: the instant its end marker arrived, or
/// the cause and message of its failure (`missing`: the message when nothing ended
/// it). Takes the account's end.
pub fn stream_end<D>(
    account: &mut StreamAccount<D>,
    missing: &str,
) -> Result<Instant, (Cause, String)> {
    match account.end.take() {
        Some(StreamEnd::Done(at)) => Ok(at),
        Some(StreamEnd::Failed { cause, message }) => Err((cause, message)),
        None => Err((Cause::Disconnect, missing.to_string())),
    }
}

impl<D> StreamAccount<D> {
    /// Closes the attempt `out` (its head and transport facts stamped already) as
    /// ended at `ended` with `cause` (`None`: ok) and `message` (kept for a failure
    /// only): the account's instants on `clock`, its tokens, usage, text, chunk
    /// marks, response id and finish reason.
    pub fn close(
        self,
        clock: &RunClock,
        mut out: AttemptOutcome,
        ended: Instant,
        cause: Option<Cause>,
        message: Option<String>,
    ) -> AttemptOutcome {
        let a = &mut out.attempt;
        a.ended_at = clock.at(ended);
        a.cause = cause;
        a.first_token_at = self.first_token.map(|t| clock.at(t));
        // The head precedes the first token on the wire: a head stamped with the
        // connection's latest arrival (hyper may have read ahead) is bounded by it.
        if let (Some(fb), Some(ft)) = (a.first_byte_at, a.first_token_at) {
            a.first_byte_at = Some(fb.min(ft));
        }
        a.tokens = self.tokens();
        out.last_token_at = self.last_token.map(|t| clock.at(t));
        out.first_content_at = self.first_content.map(|t| clock.at(t));
        out.usage = self.usage;
        out.content_chunks = self.content_chunks;
        out.text = self.text;
        out.chunks = self.chunks;
        out.error_message = cause.and(message);
        out.response_id = self.response_id;
        out.finish_reason = self.finish_reason;
        out.events = self.events;
        out
    }
}
