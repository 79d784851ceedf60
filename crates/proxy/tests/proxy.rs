//! The proxy end to end over loopback, between a test client and the simulator:
//! faithful relaying (streams, JSON answers, non-completions, HTTP/2 clients),
//! spans with the right times, tokens and causes, the cap and its queue, limits
//! and failures (413, 502, a client that goes away), and the metrics port.

mod common;

use std::time::Duration;

use common::*;
use serde_json::json;
use tpscope_model::{Cause, Record, Status, TokenSource};
use tpscope_sim::{Faults, SimConfig, Speed};
use tpscope_stream::{Dialect, SseParser};

fn decode(body: &[u8], dialect: Dialect) -> tpscope_stream::AnyStream {
    let mut a = dialect.account(true, false);
    let mut p = SseParser::new();
    let now = std::time::Instant::now();
    a.push(&mut p, body, now);
    a.end_of_body(&mut p, now);
    a
}

#[tokio::test]
async fn streams_json_answers_and_other_requests_pass_through_and_completions_become_spans() {
    let sim = sim(Speed::Max).await;
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("p.jsonl");
    let p = proxy(config(sim.addr(), &out)).await;
    let model = sim.model_name().to_string();

    let s = post(p.addr(), "/v1/chat/completions", &chat(&model, true, 12)).await;
    assert_eq!(s.status, 200);
    assert_eq!(s.headers["content-type"], "text/event-stream");
    assert!(
        s.headers.contains_key("x-request-id"),
        "upstream headers kept"
    );
    let a = decode(&s.body, Dialect::OpenAi);
    assert!(a.is_done(), "{}", s.text());
    assert_eq!(a.tokens(), 12);

    // HTTP/2 (prior knowledge) from the client, a JSON answer.
    let body = chat(&model, false, 5).to_string().into_bytes();
    let j = send(p.addr(), "POST", "/v1/chat/completions", body, &[], true).await;
    assert_eq!(j.status, 200);
    assert_eq!(j.json()["usage"]["completion_tokens"], 5);

    // Anthropic Messages.
    let m = json!({"model": model, "max_tokens": 7, "stream": true, "ignore_eos": true,
                   "messages": [{"role": "user", "content": "hi"}]});
    let r = post(p.addr(), "/v1/messages", &m).await;
    assert_eq!(r.status, 200);
    assert_eq!(decode(&r.body, Dialect::Anthropic).tokens(), 7);

    // Not a completion: relayed as the upstream answered, no span.
    let direct = send(sim.addr(), "GET", "/v1/models", vec![], &[], false).await;
    let via = send(p.addr(), "GET", "/v1/models?x=1", vec![], &[], false).await;
    assert_eq!((via.status, via.json()), (direct.status, direct.json()));
    let nf = send(p.addr(), "GET", "/nowhere", vec![], &[], false).await;
    assert_eq!(nf.status, 404);

    // Invalid JSON is forwarded unparsed; the upstream's 400 comes back and the
    // span says http_4xx.
    let bad = send(
        p.addr(),
        "POST",
        "/v1/chat/completions",
        b"{not json".to_vec(),
        &[],
        false,
    )
    .await;
    assert_eq!(bad.status, 400);
    assert!(bad.text().contains("not valid JSON"), "{}", bad.text());

    let counts = p.shutdown().await.unwrap();
    assert_eq!(
        (counts.spans, counts.status.ok, counts.status.error),
        (4, 3, 1)
    );
    let spans = spans(&out);
    for s in &spans {
        s.validate().unwrap();
        assert!(s.admitted_at.unwrap() >= s.queued_at);
        assert!(s.released_at >= s.admitted_at.unwrap());
    }
    let ok: Vec<_> = spans.iter().filter(|s| s.status == Status::Ok).collect();
    let mut tokens: Vec<u64> = ok.iter().map(|s| s.output_tokens).collect();
    tokens.sort_unstable();
    assert_eq!(tokens, [5, 7, 12]);
    for s in &ok {
        assert_eq!(s.token_source, Some(TokenSource::Usage));
        assert!(s.input_tokens.is_some());
        assert!(s.first_token_at.unwrap() <= s.last_token_at.unwrap());
        assert!(s.last_token_at.unwrap() <= s.released_at);
    }
    let err = spans.iter().find(|s| s.status == Status::Error).unwrap();
    assert_eq!(err.error.as_ref().unwrap().cause, Cause::Http4xx);
    let recs = records(&out);
    assert!(
        matches!(recs.first(), Some(Record::Run(r)) if r.target.api.as_ref().map(|a| a.as_str()) == Some("proxy"))
    );
    assert!(matches!(recs.last(), Some(Record::End(_))));
    assert!(recs.iter().any(|r| matches!(r, Record::Sample(_))));
    sim.shutdown().await.unwrap();
}

#[tokio::test]
async fn without_usage_tokens_are_counted_by_the_tokenizer_and_queued_at_header_is_used() {
    let sim = sim(Speed::Max).await;
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("p.jsonl");
    let p = proxy(config(sim.addr(), &out)).await;
    let mut body = chat(sim.model_name(), true, 9);
    body["stream_options"] = serde_json::Value::Null;
    // The client queued it two seconds ago (Unix seconds).
    let now = tpscope_model::Timestamp::now_wall().unix_seconds_f64();
    let queued = format!("{:.3}", now - 2.0);
    let r = send(
        p.addr(),
        "POST",
        "/v1/chat/completions",
        body.to_string().into_bytes(),
        &[("x-tpscope-queued-at", &queued)],
        false,
    )
    .await;
    assert_eq!(r.status, 200);
    p.shutdown().await.unwrap();
    let s = &spans(&out)[0];
    assert_eq!(s.status, Status::Ok, "{s:?}");
    assert!(
        matches!(&s.token_source, Some(TokenSource::Tokenizer(_))),
        "{:?}",
        s.token_source
    );
    assert!(s.output_tokens >= 9, "{}", s.output_tokens);
    let waited = s.admitted_at.unwrap().since(s.queued_at).unwrap();
    assert!(waited >= Duration::from_millis(1990), "{waited:?}");
    sim.shutdown().await.unwrap();
}

#[tokio::test]
async fn faults_relay_unchanged_with_their_causes() {
    let sim = sim_with(SimConfig {
        speed: Speed::Max,
        faults: Faults {
            p429: 1.0,
            ..Faults::default()
        },
        ..SimConfig::default()
    })
    .await;
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("p.jsonl");
    let p = proxy(config(sim.addr(), &out)).await;
    let r = post(
        p.addr(),
        "/v1/chat/completions",
        &chat(sim.model_name(), true, 4),
    )
    .await;
    assert_eq!(r.status, 429);
    assert_eq!(r.headers["retry-after"], "1");
    assert!(r.text().contains("Rate limit"), "{}", r.text());
    p.shutdown().await.unwrap();
    let s = &spans(&out)[0];
    assert_eq!(s.status, Status::Error);
    assert_eq!(s.error.as_ref().unwrap().cause, Cause::Http429);
    sim.shutdown().await.unwrap();

    for (faults, cause) in [
        (
            Faults {
                cut: 1.0,
                cut_after: 3,
                ..Faults::default()
            },
            Cause::Disconnect,
        ),
        (
            Faults {
                malformed: 1.0,
                ..Faults::default()
            },
            Cause::Malformed,
        ),
    ] {
        let sim = sim_with(SimConfig {
            speed: Speed::Max,
            faults,
            ..SimConfig::default()
        })
        .await;
        let out = dir.path().join(format!("{cause}.jsonl"));
        let p = proxy(config(sim.addr(), &out)).await;
        let r = post(
            p.addr(),
            "/v1/chat/completions",
            &chat(sim.model_name(), true, 20),
        )
        .await;
        assert_eq!(r.status, 200);
        p.shutdown().await.unwrap();
        let s = &spans(&out)[0];
        assert_eq!(s.error.as_ref().map(|e| e.cause), Some(cause), "{s:?}");
        sim.shutdown().await.unwrap();
    }
}

#[tokio::test]
async fn an_unreachable_upstream_is_a_502_with_a_connect_span() {
    let sim = sim(Speed::Max).await;
    let upstream = sim.addr();
    sim.shutdown().await.unwrap();
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("p.jsonl");
    let p = proxy(config(upstream, &out)).await;
    let r = post(p.addr(), "/v1/chat/completions", &chat("m", true, 4)).await;
    assert_eq!(r.status, 502);
    assert!(r.text().contains("unreachable"), "{}", r.text());
    let g = send(p.addr(), "GET", "/v1/models", vec![], &[], false).await;
    assert_eq!(g.status, 502);
    p.shutdown().await.unwrap();
    let s = &spans(&out)[0];
    assert_eq!(s.error.as_ref().unwrap().cause, Cause::Connect);
}

#[tokio::test]
async fn a_body_over_the_limit_is_413_and_the_proxy_keeps_serving() {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let sim = sim(Speed::Max).await;
    let dir = tempfile::tempdir().unwrap();
    let p = proxy(config(sim.addr(), &dir.path().join("p.jsonl"))).await;
    let mut c = tokio::net::TcpStream::connect(p.addr()).await.unwrap();
    c.write_all(
        b"POST /v1/chat/completions HTTP/1.1\r\nhost: x\r\ncontent-type: application/json\r\ncontent-length: 100000000\r\n\r\n{\"model\":",
    )
    .await
    .unwrap();
    let mut buf = vec![0u8; 4096];
    let n = tokio::time::timeout(TIMEOUT, c.read(&mut buf))
        .await
        .unwrap()
        .unwrap();
    let head = String::from_utf8_lossy(&buf[..n]);
    assert!(head.starts_with("HTTP/1.1 413"), "{head}");
    // Without a length: the limit cuts the forwarded body, also 413.
    let mut cfg = config(sim.addr(), &dir.path().join("q.jsonl"));
    cfg.max_body = 1000;
    let q = proxy(cfg).await;
    let big = vec![b' '; 5000];
    let r = send(
        q.addr(),
        "POST",
        "/v1/embeddings",
        big,
        &[("transfer-encoding", "chunked")],
        false,
    )
    .await;
    assert!(r.status == 413 || r.status == 400, "{}", r.status);
    let ok = post(
        p.addr(),
        "/v1/chat/completions",
        &chat(sim.model_name(), true, 3),
    )
    .await;
    assert_eq!(ok.status, 200);
    q.shutdown().await.unwrap();
    p.shutdown().await.unwrap();
    sim.shutdown().await.unwrap();
}

#[tokio::test]
async fn a_client_that_goes_away_mid_stream_is_cancelled_with_the_tokens_it_got() {
    use http_body_util::BodyExt;
    let sim = sim(Speed::Realtime).await;
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("p.jsonl");
    let mut cfg = config(sim.addr(), &out);
    cfg.metrics_listen = Some("127.0.0.1:0".parse().unwrap());
    let p = proxy(cfg).await;
    let addr = p.addr();
    let stream = tokio::net::TcpStream::connect(addr).await.unwrap();
    let (mut s, conn) = hyper::client::conn::http1::handshake(hyper_util::rt::TokioIo::new(stream))
        .await
        .unwrap();
    let conn = tokio::spawn(conn);
    let body = chat(sim.model_name(), true, 2000).to_string();
    let req = hyper::Request::post(format!("http://{addr}/v1/chat/completions"))
        .header("host", addr.to_string())
        .body(http_body_util::Full::new(bytes::Bytes::from(body)))
        .unwrap();
    let resp = tokio::time::timeout(TIMEOUT, s.send_request(req))
        .await
        .unwrap()
        .unwrap();
    let mut b = resp.into_body();
    // Read until some tokens arrived, then go away.
    let mut got = 0;
    while got < 400 {
        let f = tokio::time::timeout(TIMEOUT, b.frame())
            .await
            .unwrap()
            .unwrap()
            .unwrap();
        got += f.data_ref().map_or(0, |d| d.len());
    }
    drop(b);
    drop(s);
    conn.abort();
    // The proxy lets go of it at once: nothing stays in flight.
    let deadline = std::time::Instant::now() + TIMEOUT;
    let m_addr = p.metrics_addr().unwrap();
    loop {
        let m = send(m_addr, "GET", "/metrics", vec![], &[], false)
            .await
            .text();
        if m.lines().any(|l| l == "tpscope_in_flight 0") && m.contains("status=\"cancelled\"") {
            break;
        }
        assert!(std::time::Instant::now() < deadline, "{m}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    p.shutdown().await.unwrap();
    let s = &spans(&out)[0];
    assert_eq!(s.status, Status::Cancelled);
    assert!(
        s.output_tokens > 0 && s.output_tokens < 2000,
        "{}",
        s.output_tokens
    );
    sim.shutdown().await.unwrap();
}

#[tokio::test]
async fn the_cap_queues_in_fifo_refuses_a_full_queue_and_a_client_leaving_the_queue_is_never_sent()
{
    let sim = sim(Speed::Realtime).await;
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("p.jsonl");
    let mut cfg = config(sim.addr(), &out);
    cfg.cap = Some(1);
    cfg.queue_limit = 1;
    cfg.metrics_listen = Some("127.0.0.1:0".parse().unwrap());
    let p = proxy(cfg).await;
    let addr = p.addr();
    let model = sim.model_name().to_string();
    let first = {
        let b = chat(&model, true, 60);
        tokio::spawn(async move { post(addr, "/v1/chat/completions", &b).await })
    };
    // Wait until the first holds the slot.
    let m_addr = p.metrics_addr().unwrap();
    let metric = |text: &str, name: &str| -> Option<f64> {
        text.lines()
            .find(|l| l.starts_with(name))
            .and_then(|l| l.rsplit(' ').next())
            .and_then(|v| v.parse().ok())
    };
    let wait_for = |name: &'static str, want: f64| async move {
        let deadline = std::time::Instant::now() + TIMEOUT;
        loop {
            let t = send(m_addr, "GET", "/metrics", vec![], &[], false)
                .await
                .text();
            if metric(&t, name) == Some(want) {
                return t;
            }
            assert!(
                std::time::Instant::now() < deadline,
                "{name} never {want}: {t}"
            );
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    };
    wait_for("tpscope_in_flight", 1.0).await;
    // The second waits in the queue; it gives up.
    let second = {
        let b = chat(&model, true, 5);
        tokio::spawn(async move { post(addr, "/v1/chat/completions", &b).await })
    };
    wait_for("tpscope_queue_depth", 1.0).await;
    // The queue is full: the third is refused at once.
    let third = post(addr, "/v1/chat/completions", &chat(&model, true, 5)).await;
    assert_eq!(third.status, 429);
    assert_eq!(third.headers["retry-after"], "1");
    second.abort();
    let _ = second.await;
    wait_for("tpscope_queue_depth", 0.0).await;
    let r = first.await.unwrap();
    assert_eq!(r.status, 200);
    let text = wait_for("tpscope_in_flight", 0.0).await;
    assert!(text.contains("tpscope_cap 1"), "{text}");
    assert!(text.contains("tpscope_queue_full_total 1"), "{text}");
    assert!(text.contains("tpscope_gap_seconds_total"), "{text}");
    assert!(
        text.contains("tpscope_t_first_token_seconds_bucket"),
        "{text}"
    );
    p.shutdown().await.unwrap();
    let spans = spans(&out);
    assert_eq!(spans.len(), 2, "{spans:?}");
    let gone = spans
        .iter()
        .find(|s| s.status == Status::Cancelled)
        .unwrap();
    assert!(gone.admitted_at.is_none(), "never sent");
    assert!(gone.attempts.is_empty());
    // The simulator saw one request only.
    let m = send(sim.addr(), "GET", "/metrics", vec![], &[], false)
        .await
        .text();
    assert!(m.contains("vllm:request_success_total"), "{m}");
    sim.shutdown().await.unwrap();
}

#[tokio::test]
async fn a_rotated_log_is_files_that_each_read_on_their_own() {
    let sim = sim(Speed::Max).await;
    let dir = tempfile::tempdir().unwrap();
    let base = dir.path().join("live.jsonl");
    let mut cfg = config(sim.addr(), &base);
    cfg.rotate = Some(tpscope_proxy::Rotate::Size(4000));
    let p = proxy(cfg).await;
    for _ in 0..12 {
        let r = post(
            p.addr(),
            "/v1/chat/completions",
            &chat(sim.model_name(), true, 4),
        )
        .await;
        assert_eq!(r.status, 200);
    }
    p.shutdown().await.unwrap();
    let mut files: Vec<std::path::PathBuf> = std::fs::read_dir(dir.path())
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    files.sort();
    assert!(files.len() > 1, "{files:?}");
    for f in &files {
        let first = std::fs::read_to_string(f).unwrap();
        assert!(first.starts_with("{\"kind\":\"run\""), "{}", f.display());
    }
    let mut spans = 0;
    let mut run_ids = std::collections::BTreeSet::new();
    for f in &files {
        let set =
            tpscope_log::read_paths(std::slice::from_ref(f), tpscope_log::ReadOptions::default())
                .unwrap();
        assert_eq!(set.runs.len(), 1, "{}", f.display());
        spans += set.runs[0].input.spans.len();
        run_ids.insert(set.runs[0].input.run_id.clone());
    }
    assert_eq!(spans, 12);
    assert_eq!(run_ids.len(), 1, "one run, continued from file to file");
    sim.shutdown().await.unwrap();
}

#[tokio::test]
async fn responses_api_streams_through_and_becomes_a_span_with_usage() {
    let sim = sim(Speed::Max).await;
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("p.jsonl");
    let p = proxy(config(sim.addr(), &out)).await;
    let model = sim.model_name().to_string();
    let req = json!({"model": model, "input": "hi", "max_output_tokens": 9, "stream": true,
                     "ignore_eos": true});
    let r = post(p.addr(), "/v1/responses", &req).await;
    assert_eq!(r.status, 200);
    assert_eq!(r.headers["content-type"], "text/event-stream");
    let a = decode(&r.body, Dialect::Responses);
    assert!(a.is_done(), "{}", r.text());
    assert_eq!(a.tokens(), 9);
    let counts = p.shutdown().await.unwrap();
    assert_eq!((counts.spans, counts.status.ok), (1, 1));
    let spans = spans(&out);
    let s = &spans[0];
    s.validate().unwrap();
    assert_eq!(s.status, Status::Ok);
    assert_eq!(s.output_tokens, 9);
    assert_eq!(s.token_source, Some(TokenSource::Usage));
    assert!(s.input_tokens.is_some());
    assert!(s.first_token_at.unwrap() <= s.last_token_at.unwrap());
    // The request is not parsed: the run's model comes from the response.
    let end = records(&out).into_iter().find_map(|r| match r {
        Record::End(e) => Some(e),
        _ => None,
    });
    assert_eq!(end.unwrap().model.as_deref(), Some(model.as_str()));
    sim.shutdown().await.unwrap();
}
