//! The proxy scrapes its upstream's own metrics page into `server_sample` records
//! (as `bench --server-metrics` does): in front of the simulator, the span log has
//! the server's samples from before the first request to after the last, and the
//! report's server side counts exactly the output and input tokens the spans do,
//! with a diagnosis that uses both sides.

mod common;

use std::time::Duration;

use common::{chat, config, post, proxy, records, sim};
use tpscope_model::Record;
use tpscope_proxy::ScraperConfig;
use tpscope_sim::Speed;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_upstream_metrics_become_server_samples_whose_tokens_match_the_spans() {
    let dir = tempfile::tempdir().unwrap();
    let sim = sim(Speed::Scaled(20.0)).await;
    let out = dir.path().join("live.jsonl");
    let mut cfg = config(sim.addr(), &out);
    cfg.server_metrics = Some(ScraperConfig::new(
        format!("http://{}/metrics", sim.addr()),
        Duration::from_millis(20),
    ));
    let p = proxy(cfg).await;
    let model = sim.model_name().to_string();
    // Streamed (with usage) and whole answers, a few at once.
    let tasks: Vec<_> = (0..4u32)
        .map(|w| {
            let (addr, model) = (p.addr(), model.clone());
            tokio::spawn(async move {
                for i in 0..4u32 {
                    let body = chat(&model, (w + i) % 2 == 0, 8 + 5 * (w * 4 + i));
                    let r = post(addr, "/v1/chat/completions", &body).await;
                    assert_eq!(r.status, 200, "{}", r.text());
                }
            })
        })
        .collect();
    for t in tasks {
        t.await.unwrap();
    }
    // Not a completion: passes through, and is no span.
    let m = post(p.addr(), "/v1/models", &serde_json::json!({})).await;
    assert!(m.status < 500, "{}", m.text());
    let (counts, scrapes) = p.shutdown_with_scrapes().await.unwrap();
    sim.shutdown().await.unwrap();
    assert_eq!(counts.status.ok, 16);
    let scrapes = scrapes.expect("the scraper ran");
    assert_eq!(scrapes.failed, 0, "{scrapes:?}");
    assert!(scrapes.scrapes >= 2, "{scrapes:?}");

    // A server sample before the first span and after the last, all before `end`.
    let recs = records(&out);
    let kinds: Vec<&str> = recs
        .iter()
        .map(|r| match r {
            Record::Run(_) => "run",
            Record::Span(_) => "span",
            Record::ServerSample(_) => "server",
            Record::End(_) => "end",
            Record::Sample(_) => "sample",
        })
        .filter(|k| *k != "sample")
        .collect();
    let first_span = kinds.iter().position(|k| *k == "span").unwrap();
    let last_span = kinds.iter().rposition(|k| *k == "span").unwrap();
    assert!(kinds[..first_span].contains(&"server"), "{kinds:?}");
    assert!(kinds[last_span..].contains(&"server"), "{kinds:?}");
    assert_eq!(kinds.last(), Some(&"end"), "{kinds:?}");

    // The report's server side, as `tpscope report live.jsonl` computes it.
    let set = tpscope_log::read_paths(&[out], tpscope_log::ReadOptions::default()).unwrap();
    assert_eq!(set.runs.len(), 1);
    let r = tpscope_analysis::analyze(&set.runs[0].input, &tpscope_analysis::Options::default());
    let s = r.server.as_ref().expect("a server side");
    assert_eq!(
        s.server.as_deref(),
        Some("vllm"),
        "the simulator speaks vLLM's names"
    );
    assert_eq!(s.client_output_tokens, r.counts.output_tokens);
    assert_eq!(
        s.server_output_tokens,
        Some(r.counts.output_tokens as f64),
        "output tokens"
    );
    assert_eq!(
        s.server_input_tokens,
        s.client_input_tokens.map(|n| n as f64),
        "input tokens"
    );
    assert!(s.client_input_tokens.is_some());
    let d = r.diagnosis.as_ref().expect("a diagnosis");
    assert!(d.with_server, "{d:?}");
}
