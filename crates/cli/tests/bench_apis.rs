//! `tpscope bench --api anthropic` and `--api responses` end to end against the
//! built-in simulator's `/v1/messages` and `/v1/responses`: every span is ok, its
//! tokens come from the API's usage and agree with the simulator's truth log, and the
//! run record names the API.

mod bench_support;

use std::collections::HashMap;

use bench_support::{bench, check_log, records};
use tpscope_model::{Record, Status, TokenSource};

#[derive(serde::Deserialize)]
struct Truth {
    request_id: String,
    endpoint: String,
    tokens: u32,
    prompt_tokens: u32,
}

/// `bench --api API` against the simulator: every span ok, tokens from usage equal to
/// the truth log's, ids with `id_prefix`, the truth log naming `endpoint`.
fn bench_speaks(api: &str, id_prefix: &str, endpoint: &str) {
    let dir = tempfile::tempdir().unwrap();
    let truth_path = dir.path().join("truth.jsonl");
    let run = bench(
        dir.path(),
        &format!("{api}.jsonl"),
        &[
            "--api",
            api,
            "--concurrency",
            "8",
            "--requests",
            "24",
            "--output-tokens",
            "16",
            "--sim-truth-log",
            truth_path.to_str().unwrap(),
            "-q",
        ],
    );
    assert_eq!(run.status.code(), Some(0), "{}", run.stderr);
    let (spans, end) = check_log(&run.out);
    assert_eq!(end.status.ok, 24, "{end:?}");
    let Some(Record::Run(r)) = records(&run.out).into_iter().next() else {
        panic!("no run record")
    };
    assert_eq!(r.target.api.as_ref().map(|a| a.as_str()), Some(api));
    let truth: HashMap<String, Truth> = std::fs::read_to_string(&truth_path)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str::<Truth>(l).unwrap())
        .map(|t| (t.request_id.clone(), t))
        .collect();
    for s in &spans {
        assert_eq!(s.status, Status::Ok);
        let id = s
            .request_id
            .as_deref()
            .expect("the response id is recorded");
        assert!(id.starts_with(id_prefix), "{id}");
        let t = &truth[id];
        assert_eq!(t.endpoint, endpoint);
        assert_eq!(s.token_source, Some(TokenSource::Usage));
        assert_eq!(s.output_tokens, u64::from(t.tokens), "{id}");
        assert_eq!(s.input_tokens, Some(u64::from(t.prompt_tokens)), "{id}");
        assert!(s.first_token_at.is_some() && s.last_token_at.is_some());
    }
}

#[test]
fn bench_speaks_anthropic_messages_to_the_simulator() {
    bench_speaks("anthropic", "msg_", "messages");
}

#[test]
fn bench_speaks_the_responses_api_to_the_simulator() {
    bench_speaks("responses", "resp_", "responses");
}
