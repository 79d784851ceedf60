//! What one scrape costs the client: the scraper's thread CPU time per scrape of a
//! real vLLM page (54 KB, `tests/data/vllm-0.32.0-cpu-under-load.prom`) served on
//! loopback with `Connection: close` (a new connection per scrape: the dearer
//! case), fetched, parsed, normalised and serialised as the writer does. The
//! scraper runs on its own single-threaded runtime, so its thread's CPU clock holds
//! all of it. Run: `cargo bench -p tpscope-scrape --bench scrape`.

use std::io::{Read, Write};
use std::net::TcpListener;
use std::time::{Duration, Instant};

use tpscope_client::{Api, Client, ClientConfig, Endpoint};
use tpscope_model::{Record, Timestamp};
use tpscope_scrape::{normalize, parse};

fn thread_cpu() -> Duration {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: a valid pointer to a timespec the call fills.
    unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) };
    Duration::new(ts.tv_sec as u64, ts.tv_nsec as u32)
}

fn main() {
    let page = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/data/vllm-0.32.0-cpu-under-load.prom"
    ))
    .unwrap();
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    let body = page.clone();
    std::thread::spawn(move || {
        for conn in listener.incoming() {
            let Ok(mut c) = conn else { continue };
            let mut buf = [0u8; 4096];
            let _ = c.read(&mut buf);
            let head = format!(
                "HTTP/1.1 200 OK\r\ncontent-type: text/plain; version=0.0.4\r\ncontent-length: {}\r\nconnection: close\r\n\r\n",
                body.len()
            );
            let _ = c.write_all(head.as_bytes());
            let _ = c.write_all(body.as_bytes());
        }
    });
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let client = Client::new(
        Endpoint::new(format!("http://{addr}/metrics"), Api::Chat, ""),
        ClientConfig::default(),
    )
    .unwrap();
    let n = 2000u32;
    let (mut bytes, mut series) = (0usize, 0usize);
    let scrape = |bytes: &mut usize, series: &mut usize| {
        let body = rt
            .block_on(client.get_page(Duration::from_secs(5)))
            .unwrap();
        let text = String::from_utf8_lossy(&body);
        let e = parse(&text);
        let rec = normalize(&e, "run", Timestamp::from_unix_nanos(0));
        *series = rec.raw.len();
        let line = serde_json::to_vec(&Record::ServerSample(Box::new(rec))).unwrap();
        *bytes = line.len();
    };
    for _ in 0..100 {
        scrape(&mut bytes, &mut series);
    }
    let (cpu0, wall0) = (thread_cpu(), Instant::now());
    for _ in 0..n {
        scrape(&mut bytes, &mut series);
    }
    let per = (thread_cpu() - cpu0) / n;
    let wall = wall0.elapsed() / n;
    // The pure part alone: parse, normalise, serialise.
    let cpu1 = thread_cpu();
    for _ in 0..n {
        let e = parse(&page);
        let rec = normalize(&e, "run", Timestamp::from_unix_nanos(0));
        std::hint::black_box(serde_json::to_vec(&Record::ServerSample(Box::new(rec))).unwrap());
    }
    let pure = (thread_cpu() - cpu1) / n;
    println!(
        "parse + normalise + serialise: {:.1} us CPU per page",
        pure.as_secs_f64() * 1e6
    );
    println!(
        "scrape of a {} KB vLLM page ({series} series kept, {bytes}-byte record): \
         {:.1} us CPU per scrape ({:.1} us wall); at 1 s: {:.4} % of one core",
        page.len() / 1024,
        per.as_secs_f64() * 1e6,
        wall.as_secs_f64() * 1e6,
        per.as_secs_f64() * 100.0
    );
}
