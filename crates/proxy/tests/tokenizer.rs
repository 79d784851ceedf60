//! `ProxyConfig::tokenizer` (`tpscope proxy --tokenizer`): a stream without
//! `usage` through the proxy is counted by the tokenizer given, so with the
//! Hugging Face tokenizer the simulator counts with, it has exactly the output
//! tokens the simulator's `usage` reports for the same request; the run record
//! names the tokenizer.

mod common;

use std::path::Path;

use common::*;
use tpscope_model::{Record, Status, TokenSource};
use tpscope_proxy::Tokenizer;
use tpscope_sim::{SimConfig, Speed};

/// The Llama-3-style fixture of the tokens crate.
fn llama() -> Tokenizer {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../tokens/tests/data/llama3");
    format!("hf:{}", dir.display())
        .parse()
        .expect("the fixture loads")
}

#[tokio::test]
async fn counts_without_usage_equal_the_simulators_usage_under_the_same_hf_tokenizer() {
    let tok = llama();
    let sim = sim_with(SimConfig {
        speed: Speed::Max,
        tokenizer: tok,
        ..SimConfig::default()
    })
    .await;
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("p.jsonl");
    let mut cfg = config(sim.addr(), &out);
    cfg.tokenizer = tok;
    let p = proxy(cfg).await;
    let lengths = [7u32, 23, 64, 150];
    for &n in &lengths {
        // The same request with usage, then without (counted by the proxy).
        let with = chat(sim.model_name(), true, n);
        assert_eq!(
            post(p.addr(), "/v1/chat/completions", &with).await.status,
            200
        );
        let mut without = with.clone();
        without["stream_options"] = serde_json::Value::Null;
        let r = post(p.addr(), "/v1/chat/completions", &without).await;
        assert_eq!(r.status, 200);
        assert!(!r.text().contains("\"usage\""), "{}", r.text());
    }
    p.shutdown().await.unwrap();
    sim.shutdown().await.unwrap();
    let records = records(&out);
    let Some(Record::Run(run)) = records.first() else {
        panic!("the log starts with its run record");
    };
    assert_eq!(run.tokenizer.as_deref(), Some(tok.name()));
    let spans = spans(&out);
    assert_eq!(spans.len(), 2 * lengths.len());
    for pair in spans.chunks(2) {
        let (usage, counted) = (&pair[0], &pair[1]);
        assert_eq!((usage.status, counted.status), (Status::Ok, Status::Ok));
        assert_eq!(usage.token_source, Some(TokenSource::Usage));
        assert_eq!(
            counted.token_source,
            Some(TokenSource::Tokenizer(tok.name().to_string()))
        );
        assert!(usage.output_tokens > 0);
        assert_eq!(
            counted.output_tokens, usage.output_tokens,
            "the proxy's count of span {} against the simulator's usage",
            counted.span_id
        );
    }
}
