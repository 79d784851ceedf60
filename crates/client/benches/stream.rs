//! End-to-end client cost: `Client::attempt` streaming from a local server that
//! runs in a child process (so its CPU is not counted), many streams at once.
//! Prints the client process's CPU time per streamed token. Run:
//! `cargo bench -p tpscope-client --bench stream` (TPSCOPE_BENCH_STREAMS,
//! TPSCOPE_BENCH_TOKENS and TPSCOPE_BENCH_PER_WRITE change the shape).

use std::io::{BufRead, BufReader, Write as _};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio_util::sync::CancellationToken;
use tpscope_client::{Api, Client, ClientConfig, Endpoint, Prompt, RequestSpec};
use tpscope_model::RunClock;

const SERVER_ENV: &str = "TPSCOPE_BENCH_SERVER";

fn env_or(name: &str, default: usize) -> usize {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

/// The whole SSE reply for `tokens` tokens, as HTTP chunks of `per_write` events.
fn reply(tokens: usize, per_write: usize) -> Vec<Vec<u8>> {
    let mut events = vec![
        r#"{"id":"chatcmpl-bench","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":{"role":"assistant","content":""},"logprobs":null,"finish_reason":null}]}"#.to_string(),
    ];
    for i in 0..tokens {
        events.push(format!(
            r#"{{"id":"chatcmpl-bench","object":"chat.completion.chunk","created":1,"model":"meta-llama/Llama-3.1-8B-Instruct","choices":[{{"index":0,"delta":{{"content":" w{}"}},"logprobs":null,"finish_reason":null}}]}}"#,
            i % 100
        ));
    }
    events.push(format!(
        r#"{{"id":"chatcmpl-bench","object":"chat.completion.chunk","created":1,"model":"m","choices":[],"usage":{{"prompt_tokens":10,"completion_tokens":{tokens},"total_tokens":{}}}}}"#,
        tokens + 10
    ));
    events.push("[DONE]".into());
    events
        .chunks(per_write)
        .map(|group| {
            let mut body = Vec::new();
            for e in group {
                body.extend_from_slice(b"data: ");
                body.extend_from_slice(e.as_bytes());
                body.extend_from_slice(b"\n\n");
            }
            let mut chunk = format!("{:x}\r\n", body.len()).into_bytes();
            chunk.extend_from_slice(&body);
            chunk.extend_from_slice(b"\r\n");
            chunk
        })
        .collect()
}

fn serve() {
    let tokens = env_or("TPSCOPE_BENCH_TOKENS", 200);
    let per_write = env_or("TPSCOPE_BENCH_PER_WRITE", 1).max(1);
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async move {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        println!("{}", listener.local_addr().unwrap().port());
        std::io::stdout().flush().unwrap();
        let chunks = std::sync::Arc::new(reply(tokens, per_write));
        // Stop when the parent goes away (its pipe to our stdin closes).
        std::thread::spawn(|| {
            let mut b = [0u8; 1];
            let _ = std::io::Read::read(&mut std::io::stdin(), &mut b);
            std::process::exit(0);
        });
        loop {
            let (mut sock, _) = listener.accept().await.unwrap();
            let _ = sock.set_nodelay(true);
            let chunks = chunks.clone();
            tokio::spawn(async move {
                let mut buf = Vec::new();
                loop {
                    let end = loop {
                        if let Some(i) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
                            break i + 4;
                        }
                        let mut tmp = [0u8; 8192];
                        match sock.read(&mut tmp).await {
                            Ok(0) | Err(_) => return,
                            Ok(n) => buf.extend_from_slice(&tmp[..n]),
                        }
                    };
                    let head = String::from_utf8_lossy(&buf[..end]).to_ascii_lowercase();
                    let len: usize = head
                        .lines()
                        .find_map(|l| l.strip_prefix("content-length:").map(|v| v.trim().parse().unwrap_or(0)))
                        .unwrap_or(0);
                    while buf.len() < end + len {
                        let mut tmp = [0u8; 8192];
                        match sock.read(&mut tmp).await {
                            Ok(0) | Err(_) => return,
                            Ok(n) => buf.extend_from_slice(&tmp[..n]),
                        }
                    }
                    buf.drain(..end + len);
                    let head = b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ntransfer-encoding: chunked\r\n\r\n";
                    if sock.write_all(head).await.is_err() {
                        return;
                    }
                    for c in chunks.iter() {
                        if sock.write_all(c).await.is_err() {
                            return;
                        }
                        // Let other connections write between chunks, as a server
                        // stepping a batch would.
                        tokio::task::yield_now().await;
                    }
                    if sock.write_all(b"0\r\n\r\n").await.is_err() {
                        return;
                    }
                }
            });
        }
    });
}

/// CPU time (user + system) of this process so far.
fn process_cpu() -> Duration {
    let stat = std::fs::read_to_string("/proc/self/stat").unwrap_or_default();
    let after = stat.rsplit_once(')').map(|(_, r)| r).unwrap_or("");
    let f: Vec<&str> = after.split_whitespace().collect();
    // Fields 14 and 15 (utime, stime) are the 12th and 13th after the command name.
    let ticks: u64 = f.get(11).and_then(|v| v.parse().ok()).unwrap_or(0)
        + f.get(12).and_then(|v| v.parse().ok()).unwrap_or(0);
    Duration::from_millis(ticks * 10)
}

fn main() {
    if std::env::var_os(SERVER_ENV).is_some() {
        serve();
        return;
    }
    let quick = std::env::args().any(|a| a == "--test");
    let streams = env_or("TPSCOPE_BENCH_STREAMS", if quick { 8 } else { 1000 });
    let tokens = env_or("TPSCOPE_BENCH_TOKENS", 200);
    let per_write = env_or("TPSCOPE_BENCH_PER_WRITE", 1);
    let requests = env_or("TPSCOPE_BENCH_REQUESTS", if quick { 16 } else { 10_000 });

    let mut child = Command::new(std::env::current_exe().unwrap())
        .env(SERVER_ENV, "1")
        .env("TPSCOPE_BENCH_TOKENS", tokens.to_string())
        .env("TPSCOPE_BENCH_PER_WRITE", per_write.to_string())
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .expect("start the server process");
    let mut line = String::new();
    BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    let port: u16 = line.trim().parse().expect("server port");

    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .unwrap();
    let (ok, got_tokens, wall, cpu) = rt.block_on(async move {
        let client = Client::new(
            Endpoint::new(format!("http://127.0.0.1:{port}/v1"), Api::Chat, "m"),
            ClientConfig::default(),
        )
        .unwrap();
        let spec = RequestSpec {
            prompt: Prompt::Text("bench".into()),
            max_tokens: Some(tokens as u32),
        };
        // Warm the pool: one connection per stream.
        let clock = RunClock::start();
        let next = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
        let run = |limit: usize| {
            let mut tasks = tokio::task::JoinSet::new();
            for _ in 0..streams {
                let (client, spec, next) = (client.clone(), spec.clone(), next.clone());
                tasks.spawn(async move {
                    let cancel = CancellationToken::new();
                    let (mut ok, mut toks) = (0u64, 0u64);
                    while next.fetch_add(1, std::sync::atomic::Ordering::Relaxed) < limit {
                        let o = client.attempt(&spec, &clock, &cancel).await;
                        if o.is_ok() {
                            ok += 1;
                        }
                        toks += o.attempt.tokens;
                    }
                    (ok, toks)
                });
            }
            tasks
        };
        let mut warm = run(streams);
        while warm.join_next().await.is_some() {}
        next.store(0, std::sync::atomic::Ordering::Relaxed);
        let cpu0 = process_cpu();
        let t0 = Instant::now();
        let mut tasks = run(requests);
        let (mut ok, mut toks) = (0, 0);
        while let Some(r) = tasks.join_next().await {
            let (o, t) = r.unwrap();
            ok += o;
            toks += t;
        }
        (ok, toks, t0.elapsed(), process_cpu() - cpu0)
    });
    drop(child.stdin.take());
    let _ = child.kill();
    let _ = child.wait();
    println!(
        "tpscope-client end to end: {streams} streams, {requests} requests of {tokens} tokens, {per_write} event(s) per server write"
    );
    println!("  ok requests        {ok}");
    println!("  tokens             {got_tokens}");
    println!("  wall               {:.2} s", wall.as_secs_f64());
    println!("  client CPU         {:.2} s", cpu.as_secs_f64());
    println!(
        "  client CPU / token {:.0} ns  ({:.2} M tokens per CPU-second)",
        cpu.as_nanos() as f64 / got_tokens.max(1) as f64,
        got_tokens as f64 / cpu.as_secs_f64().max(1e-9) / 1e6
    );
}
