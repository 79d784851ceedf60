//! Hand-made spans for the analysis tests: times are milliseconds after a fixed origin.

#![allow(dead_code)]

use std::time::Duration;

use tpscope_analysis::{RunInput, SampleFacts, SpanFacts};
use tpscope_model::{Cause, RunRecord, SCHEMA, Status, Target, Timestamp};

pub const ORIGIN_NS: i64 = 1_800_000_000_000_000_000;

pub fn t(ms: i64) -> Timestamp {
    Timestamp::from_unix_nanos(ORIGIN_NS + ms * 1_000_000)
}

pub fn run(cap: Option<u32>) -> RunRecord {
    RunRecord {
        run_id: "r1".into(),
        schema: SCHEMA.into(),
        tool: "test".into(),
        started_at: t(0),
        target: Target::default(),
        cap,
        token_source: Some(tpscope_model::TokenSource::Usage),
        tokenizer: None,
        sample_interval: Some(Duration::from_millis(10)),
        sample_heartbeat: None,
        load: serde_json::Value::Null,
        labels: Default::default(),
        queue_times: Default::default(),
    }
}

/// An ok span: queued, admitted, first token, last token, released (ms), tokens.
pub fn ok(q: i64, a: i64, f: i64, l: i64, r: i64, tokens: u64) -> SpanFacts {
    SpanFacts {
        status: Status::Ok,
        error_cause: None,
        queued_at: t(q),
        admitted_at: Some(t(a)),
        first_token_at: Some(t(f)),
        last_token_at: Some(t(l)),
        released_at: t(r),
        output_tokens: tokens,
        input_tokens: Some(100),
        retry_count: 0,
        retry_causes: Box::default(),
        wasted_tokens: 0,
        client: Default::default(),
        chunks: None,
        session: None,
    }
}

/// A span that never got a first token: admitted (or not) and released with a cause.
pub fn failed(q: i64, a: Option<i64>, r: i64, status: Status, cause: Cause) -> SpanFacts {
    SpanFacts {
        status,
        error_cause: Some(cause),
        queued_at: t(q),
        admitted_at: a.map(t),
        first_token_at: None,
        last_token_at: None,
        released_at: t(r),
        output_tokens: 0,
        input_tokens: None,
        retry_count: 0,
        retry_causes: Box::default(),
        wasted_tokens: 0,
        client: Default::default(),
        chunks: None,
        session: None,
    }
}

pub fn input(cap: Option<u32>, spans: Vec<SpanFacts>) -> RunInput {
    let mut i = RunInput {
        run_id: "r1".into(),
        run: Some(run(cap)),
        ..RunInput::default()
    };
    for s in spans {
        i.push_span(s, None);
    }
    i
}

pub fn sample(ms: i64, in_flight: u32, queue_depth: u32, cap: Option<u32>) -> SampleFacts {
    SampleFacts {
        at: t(ms),
        in_flight,
        queue_depth,
        cap,
    }
}

pub fn close(a: f64, b: f64) -> bool {
    (a - b).abs() < 1e-9 * (1.0 + a.abs().max(b.abs()))
}
