//! Multi-turn sessions and shared prefixes against the simulator with prefix
//! caching on: each turn carries the history with the server's own replies (so its
//! cached prefix is the previous turn's prompt and reply), the shared-prefix
//! workload's hit rate from `/metrics` follows its share ratio, and counts without
//! usage equal usage when client and simulator use the same Hugging Face tokenizer.
//! Counts, not times: the simulator runs as fast as possible.

use std::collections::BTreeMap;
use std::io::{Read, Write};
use std::net::{Ipv4Addr, SocketAddr, TcpStream};
use std::sync::Arc;
use std::time::Duration;

use tpscope_client::{Api, Client, ClientConfig, Endpoint};
use tpscope_load::workload::sessions::{SessionPlan, SessionSource};
use tpscope_load::{Control, LengthDist, RetryPolicy, RunPlan, Schedule, Workload, execute};
use tpscope_model::{Record, RunClock, Span, Status, TokenSource};
use tpscope_record::{Dispatch, LiveStats, Writer};
use tpscope_sim::{SimConfig, Speed};
use tpscope_tokens::Tokenizer;

mod support;

use support::Buf;

fn plan(
    workload: Workload,
    sessions: Option<SessionPlan>,
    requests: u64,
    tok: Tokenizer,
) -> RunPlan {
    RunPlan {
        run_id: "t".into(),
        schedule: Schedule::Backlog,
        requests: Some(requests),
        duration: None,
        cap: Some(4),
        dispatch: Dispatch::WorkConserving,
        workload: Arc::new(workload),
        sessions: sessions.map(Arc::new),
        tokenizer: tok,
        seed: 7,
        prompt_salt: 0,
        context: None,
        retry: RetryPolicy::default(),
        sample_interval: None,
        drain_timeout: Duration::from_secs(30),
    }
}

/// `vllm:NAME value` from the simulator's `/metrics`.
fn metric(addr: SocketAddr, name: &str) -> f64 {
    let mut s = TcpStream::connect(addr).unwrap();
    write!(
        s,
        "GET /metrics HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"
    )
    .unwrap();
    let mut text = String::new();
    s.read_to_string(&mut text).unwrap();
    text.lines()
        .find_map(|l| {
            let rest = l.strip_prefix(name)?;
            rest.starts_with(['{', ' '])
                .then(|| rest.rsplit(' ').next())
                .flatten()
        })
        .unwrap_or_else(|| panic!("{name} missing from /metrics"))
        .trim()
        .parse()
        .unwrap()
}

/// Runs `p` against a fresh simulator; returns the spans and the cache counters.
async fn run(p: RunPlan, usage: bool) -> (Vec<Span>, f64, f64) {
    let cfg = SimConfig {
        speed: Speed::Max,
        prefix_caching: true,
        tokenizer: p.tokenizer,
        ..SimConfig::default()
    };
    let sim = tpscope_sim::start(cfg, SocketAddr::from((Ipv4Addr::LOCALHOST, 0)))
        .await
        .unwrap();
    let mut ep = Endpoint::new(sim.base_url(), Api::Chat, sim.model_name());
    ep.include_usage = usage;
    ep.extra_body
        .insert("ignore_eos".into(), serde_json::Value::Bool(true));
    let client = Arc::new(
        Client::new(
            ep,
            ClientConfig {
                keep_text: true,
                ..ClientConfig::default()
            },
        )
        .unwrap(),
    );
    let buf = Buf::default();
    let rec = Writer::to_writer(buf.clone(), p.tokenizer, None);
    execute(
        p,
        RunClock::start(),
        client,
        Some(rec.sender()),
        Arc::new(LiveStats::default()),
        &Control::default(),
    )
    .await;
    rec.finish().unwrap();
    let (q, h) = (
        metric(sim.addr(), "vllm:prefix_cache_queries_total"),
        metric(sim.addr(), "vllm:prefix_cache_hits_total"),
    );
    sim.shutdown().await.unwrap();
    let text = String::from_utf8(buf.0.lock().unwrap().clone()).unwrap();
    let spans = text
        .lines()
        .filter_map(|l| match serde_json::from_str::<Record>(l).unwrap() {
            Record::Span(s) => Some(s),
            _ => None,
        })
        .collect();
    (spans, q, h)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_turn_hits_the_previous_turns_prompt_and_reply_in_the_cache() {
    let sessions = SessionPlan {
        source: SessionSource::Synthetic {
            sessions: 6,
            turns: LengthDist::Fixed(4),
        },
        think_time: None,
    };
    let w = Workload::Synthetic {
        input: LengthDist::Fixed(300),
        output: LengthDist::Fixed(40),
    };
    let (spans, queries, hits) = run(plan(w, Some(sessions), 0, Tokenizer::O200kBase), true).await;
    assert_eq!(spans.len(), 24);
    assert!(spans.iter().all(|s| s.status == Status::Ok));
    // Per session, turn k's prompt starts with turn k-1's prompt and reply: the
    // cache predicts floor((prompt + reply - 1) / 16) blocks of it.
    let mut by: BTreeMap<(String, u32), &Span> = BTreeMap::new();
    for s in &spans {
        by.insert((s.session_id.clone().unwrap(), s.turn.unwrap()), s);
    }
    let mut predicted = 0u64;
    let mut prompt_total = 0u64;
    for ((sid, turn), s) in &by {
        let p = s.input_tokens.unwrap();
        prompt_total += p;
        if *turn > 1 {
            let prev = by[&(sid.clone(), turn - 1)];
            assert!(
                p > prev.input_tokens.unwrap() + prev.output_tokens,
                "history grows"
            );
            let carried = prev.input_tokens.unwrap() + prev.output_tokens - 1;
            predicted += (carried / 16 * 16).min((p - 1) / 16 * 16);
        }
    }
    assert_eq!(
        queries as u64, prompt_total,
        "queries count every prompt token"
    );
    let rel = (hits - predicted as f64).abs() / predicted as f64;
    assert!(rel <= 0.05, "hits {hits} vs predicted {predicted}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_shared_prefix_hit_rate_follows_the_share_ratio() {
    let (len, suffix, share) = (512u32, 512u32, 0.6);
    let w = Workload::SharedPrefix {
        count: 2,
        len,
        share,
        input: LengthDist::Fixed(suffix),
        output: LengthDist::Fixed(4),
    };
    let n = 400;
    let (spans, queries, hits) = run(plan(w, None, n, Tokenizer::O200kBase), true).await;
    assert_eq!(spans.len() as u64, n);
    // A request with a shared prefix finds its 32 blocks once the prefix was seen;
    // a prompt is 1024 tokens plus the chat format's own (7 for one message).
    let expected = share * f64::from(len) / (queries / n as f64);
    let rate = hits / queries;
    assert!(
        (rate - expected).abs() <= 0.05 * expected,
        "hit rate {rate:.4} vs {expected:.4}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn counts_without_usage_equal_usage_under_the_same_hf_tokenizer() {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../tokens/tests/data/qwen2");
    let tok: Tokenizer = format!("hf:{}", dir.display()).parse().unwrap();
    let w = Workload::Synthetic {
        input: LengthDist::Fixed(64),
        output: LengthDist::Uniform { lo: 5, hi: 60 },
    };
    let (with_usage, ..) = run(plan(w.clone(), None, 20, tok), true).await;
    let (counted, ..) = run(plan(w, None, 20, tok), false).await;
    let tokens = |spans: &[Span]| {
        let mut v: Vec<(String, u64)> = spans
            .iter()
            .map(|s| (s.span_id.clone(), s.output_tokens))
            .collect();
        v.sort();
        v
    };
    assert!(
        counted
            .iter()
            .all(|s| s.token_source == Some(TokenSource::Tokenizer(tok.name().to_string())))
    );
    assert!(
        with_usage
            .iter()
            .all(|s| s.token_source == Some(TokenSource::Usage))
    );
    assert_eq!(tokens(&counted), tokens(&with_usage));
}
