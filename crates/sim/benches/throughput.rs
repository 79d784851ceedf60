//! Simulator benchmarks (prints figures; no timed assertions):
//!
//! 1. Tokens per second of simulator CPU time at `--speed max` with 1,000
//!    concurrent streams. The simulator runs in a child process (this same binary,
//!    re-executed with `TPSCOPE_SIM_BENCH_ROLE=server`), so its CPU time
//!    (`getrusage(RUSAGE_SELF)`, user + system, read before and after the load) has
//!    no client share in it; the client's own CPU time is reported separately.
//! 2. Real-time step lateness (jitter) p50/p99/max, at batch 1 and with 256
//!    concurrent streams, as recorded by the engine thread.
//!
//! Run: `cargo bench -p tpscope-sim --bench throughput`
//! (env `STREAMS`, `TOKENS`, `ROUNDS`, `JITTER_SECS` change the load).

use std::io::{BufRead, BufReader, Write};
use std::net::SocketAddr;
use std::process::{Child, ChildStdin, ChildStdout, Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tpscope_sim::{SimConfig, Speed};

fn env_u64(name: &str, default: u64) -> u64 {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

/// User + system CPU seconds of this process.
fn cpu_secs() -> f64 {
    // SAFETY: getrusage writes only the struct passed in.
    let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
    unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut ru) };
    let tv = |t: libc::timeval| t.tv_sec as f64 + t.tv_usec as f64 / 1e6;
    tv(ru.ru_utime) + tv(ru.ru_stime)
}

fn main() {
    if std::env::var("TPSCOPE_SIM_BENCH_ROLE").as_deref() == Ok("server") {
        server();
    } else {
        client();
    }
}

/// The child: serve, answer `cpu`, `lateness` and `quit` on stdin.
fn server() {
    let _ = tpscope_sim::raise_nofile_limit();
    let speed = match std::env::var("SPEED").as_deref() {
        Ok("realtime") => Speed::Realtime,
        _ => Speed::Max,
    };
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async {
        let cfg = SimConfig {
            speed,
            ..SimConfig::default()
        };
        let sim = tpscope_sim::start(cfg, "127.0.0.1:0".parse().unwrap())
            .await
            .unwrap();
        println!("ADDR {} {}", sim.addr(), sim.model_name());
        std::io::stdout().flush().unwrap();
        let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
        std::thread::spawn(move || {
            for line in std::io::stdin().lock().lines() {
                let Ok(l) = line else { break };
                if tx.send(l).is_err() {
                    break;
                }
            }
        });
        while let Some(cmd) = rx.recv().await {
            match cmd.trim() {
                "cpu" => println!("CPU {}", cpu_secs()),
                "lateness" => {
                    let l = sim.step_lateness();
                    let us = |d: Option<Duration>| d.map_or(f64::NAN, |d| d.as_secs_f64() * 1e6);
                    println!(
                        "LATENESS {} {:.0} {:.0} {:.0}",
                        l.steps,
                        us(l.p50),
                        us(l.p99),
                        us(l.max)
                    );
                }
                _ => break,
            }
            std::io::stdout().flush().unwrap();
        }
        sim.shutdown().await.unwrap();
    });
}

struct Server {
    child: Child,
    stdin: ChildStdin,
    stdout: BufReader<ChildStdout>,
    addr: SocketAddr,
    model: String,
}

impl Server {
    fn spawn(speed: &str) -> Server {
        let mut child = Command::new(std::env::current_exe().unwrap())
            .env("TPSCOPE_SIM_BENCH_ROLE", "server")
            .env("SPEED", speed)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .unwrap();
        let stdin = child.stdin.take().unwrap();
        let mut stdout = BufReader::new(child.stdout.take().unwrap());
        let mut line = String::new();
        stdout.read_line(&mut line).unwrap();
        let mut parts = line.split_whitespace().skip(1);
        let addr = parts.next().unwrap().parse().unwrap();
        let model = parts.next().unwrap().to_string();
        Server {
            child,
            stdin,
            stdout,
            addr,
            model,
        }
    }

    fn ask(&mut self, cmd: &str) -> Vec<String> {
        writeln!(self.stdin, "{cmd}").unwrap();
        self.stdin.flush().unwrap();
        let mut line = String::new();
        self.stdout.read_line(&mut line).unwrap();
        line.split_whitespace()
            .skip(1)
            .map(str::to_string)
            .collect()
    }

    fn cpu(&mut self) -> f64 {
        self.ask("cpu")[0].parse().unwrap()
    }

    fn quit(mut self) {
        let _ = writeln!(self.stdin, "quit");
        let _ = self.stdin.flush();
        let _ = self.child.wait();
    }
}

/// One keep-alive connection sending `rounds` streamed requests of `tokens`
/// tokens; returns the completion tokens reported by the usage chunks.
async fn stream_loop(addr: SocketAddr, request: Arc<Vec<u8>>, rounds: u64) -> u64 {
    let mut s = TcpStream::connect(addr).await.unwrap();
    s.set_nodelay(true).unwrap();
    let mut buf = vec![0u8; 64 * 1024];
    let mut tail: Vec<u8> = Vec::with_capacity(2048);
    let mut total = 0;
    for _ in 0..rounds {
        s.write_all(&request).await.unwrap();
        tail.clear();
        loop {
            let n = s.read(&mut buf).await.unwrap();
            assert!(n > 0, "connection closed mid-response");
            tail.extend_from_slice(&buf[..n]);
            if tail.len() > 1024 {
                tail.drain(..tail.len() - 1024);
            }
            if tail.ends_with(b"0\r\n\r\n") {
                break;
            }
        }
        let text = String::from_utf8_lossy(&tail);
        let at = text.find("\"completion_tokens\":").expect("usage chunk");
        let digits: String = text[at + 20..]
            .chars()
            .take_while(char::is_ascii_digit)
            .collect();
        total += digits.parse::<u64>().unwrap();
    }
    total
}

fn request_bytes(addr: SocketAddr, model: &str, tokens: u64) -> Arc<Vec<u8>> {
    let body = format!(
        "{{\"model\":\"{model}\",\"messages\":[{{\"role\":\"user\",\"content\":\"Tell me a story.\"}}],\
         \"max_tokens\":{tokens},\"ignore_eos\":true,\"stream\":true,\
         \"stream_options\":{{\"include_usage\":true}}}}"
    );
    Arc::new(
        format!(
            "POST /v1/chat/completions HTTP/1.1\r\nhost: {addr}\r\ncontent-type: application/json\r\n\
             content-length: {}\r\n\r\n{body}",
            body.len()
        )
        .into_bytes(),
    )
}

async fn load(addr: SocketAddr, model: &str, streams: u64, tokens: u64, rounds: u64) -> u64 {
    let req = request_bytes(addr, model, tokens);
    let tasks: Vec<_> = (0..streams)
        .map(|_| tokio::spawn(stream_loop(addr, req.clone(), rounds)))
        .collect();
    let mut total = 0;
    for t in tasks {
        total += t.await.unwrap();
    }
    total
}

fn client() {
    let _ = tpscope_sim::raise_nofile_limit();
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .unwrap();
    let streams = env_u64("STREAMS", 1000);
    let tokens = env_u64("TOKENS", 1000);
    let rounds = env_u64("ROUNDS", 3);

    // 1. Throughput at --speed max.
    let mut srv = Server::spawn("max");
    let (addr, model) = (srv.addr, srv.model.clone());
    rt.block_on(load(addr, &model, 10, 10, 1)); // warm-up
    let sim0 = srv.cpu();
    let cli0 = cpu_secs();
    let t0 = Instant::now();
    let total = rt.block_on(load(addr, &model, streams, tokens, rounds));
    let wall = t0.elapsed().as_secs_f64();
    let sim_cpu = srv.cpu() - sim0;
    let cli_cpu = cpu_secs() - cli0;
    srv.quit();
    assert_eq!(total, streams * tokens * rounds, "every token arrived");
    println!(
        "speed max, {streams} concurrent streams x {rounds} rounds x {tokens} tokens: \
         {total} tokens in {wall:.2} s wall"
    );
    println!(
        "  simulator CPU {sim_cpu:.2} s -> {:.0} tokens per second of simulator CPU time",
        total as f64 / sim_cpu
    );
    println!(
        "  client CPU {cli_cpu:.2} s ({:.0} tokens/s of client CPU); wall rate {:.0} tokens/s",
        total as f64 / cli_cpu,
        total as f64 / wall
    );

    // 2. Real-time step lateness.
    let secs = env_u64("JITTER_SECS", 8);
    for (n, label) in [(1u64, "batch 1"), (256, "256 concurrent streams")] {
        let mut srv = Server::spawn("realtime");
        let (addr, model) = (srv.addr, srv.model.clone());
        // Tokens for about `secs` seconds at this batch's step time.
        let step = tpscope_sim::Roofline::new(&SimConfig::default())
            .decode_step(n, 600)
            .as_secs_f64();
        let toks = ((secs as f64 / step) as u64).max(10);
        rt.block_on(load(addr, &model, n, toks, 1));
        let l = srv.ask("lateness");
        srv.quit();
        println!(
            "realtime, {label} ({toks} tokens each): {} steps, lateness p50 {} us, p99 {} us, max {} us",
            l[0], l[1], l[2], l[3]
        );
    }
}
