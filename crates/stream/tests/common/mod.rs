//! What the dialect tests share: fixtures, an account's facts without instants,
//! and replaying reads through a decoder.

#![allow(dead_code)]

use std::time::{Duration, Instant};

use tpscope_model::Cause;
use tpscope_stream::{SseParser, StreamAccount, StreamEnd, Usage};

pub fn fixture(name: &str) -> Vec<u8> {
    let path = format!("{}/tests/fixtures/{name}", env!("CARGO_MANIFEST_DIR"));
    std::fs::read(&path).unwrap_or_else(|e| panic!("{path}: {e}"))
}

/// What an account holds, without instants.
#[derive(Debug, PartialEq)]
pub struct Facts {
    pub text: String,
    pub content_chunks: u64,
    pub tokens: u64,
    pub usage: Option<Usage>,
    pub finish_reason: Option<String>,
    pub response_id: Option<String>,
    pub events: u64,
    pub end: Option<Result<(), (Cause, String)>>,
}

pub fn facts<D>(a: &StreamAccount<D>) -> Facts {
    Facts {
        text: a.text.clone(),
        content_chunks: a.content_chunks,
        tokens: a.tokens(),
        usage: a.usage,
        finish_reason: a.finish_reason.clone(),
        response_id: a.response_id.clone(),
        events: a.events,
        end: a.end.as_ref().map(|e| match e {
            StreamEnd::Done(_) => Ok(()),
            StreamEnd::Failed { cause, message } => Err((*cause, message.clone())),
        }),
    }
}

/// Feeds `reads`, the i-th stamped `t0 + i ms`, then ends the body.
pub fn replay<D: tpscope_stream::Decoder>(
    mut account: StreamAccount<D>,
    reads: &[&[u8]],
) -> (StreamAccount<D>, Instant) {
    let t0 = Instant::now();
    let mut parser = SseParser::new();
    for (i, r) in reads.iter().enumerate() {
        account.push(&mut parser, r, t0 + Duration::from_millis(i as u64));
    }
    account.end_of_body(&mut parser, t0 + Duration::from_millis(reads.len() as u64));
    (account, t0)
}
