//! Fixtures shared by the unit tests: instants, a run with a cap, an ok span.

use tpscope_model::{RunRecord, SCHEMA, Target, Timestamp};

use crate::input::{RunInput, SpanFacts};

/// `ms` milliseconds after a fixed instant.
pub(crate) fn ts(ms: i64) -> Timestamp {
    Timestamp::from_unix_nanos(1_800_000_000_000_000_000 + ms * 1_000_000)
}

/// Run `r`, started at `ts(0)` with a cap, and no spans yet.
pub(crate) fn capped_run(cap: u32) -> RunInput {
    RunInput {
        run_id: "r".into(),
        run: Some(RunRecord {
            run_id: "r".into(),
            schema: SCHEMA.into(),
            tool: String::new(),
            started_at: ts(0),
            target: Target::default(),
            cap: Some(cap),
            token_source: None,
            tokenizer: None,
            sample_interval: None,
            sample_heartbeat: None,
            load: serde_json::Value::Null,
            labels: Default::default(),
            queue_times: Default::default(),
        }),
        ..RunInput::default()
    }
}

/// An ok span queued at `q`, admitted at `a` and released at `r` (ms after
/// `ts(0)`), its `tokens` streamed from 100 ms after admission to 100 ms
/// before release.
pub(crate) fn ok_span(q: i64, a: i64, r: i64, tokens: u64) -> SpanFacts {
    SpanFacts::ok(
        ts(q),
        Some(ts(a)),
        Some(ts(a + 100)),
        Some(ts(r - 100)),
        ts(r),
        tokens,
    )
}
