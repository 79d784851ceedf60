//! `--gpu-metrics` end to end: a loopback page shaped like an NVIDIA DCGM
//! exporter's (two GPUs at 300 W and 100 W whose energy counters rise with the
//! clock, 45 % and 15 % busy) scraped while `tpscope bench` measures the built-in
//! simulator; the report's GPU section gives the power, the energy over the
//! window, joules per output token consistent with system TPS, the cost per kWh,
//! and the server's side is untouched by the GPU scrapes.

mod bench_support;

use std::io::{Read, Write};
use std::net::TcpListener;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering::Relaxed};
use std::time::{Duration, Instant};

use bench_support::{bench, check_log, refused, tpscope};

/// Serves a DCGM-shaped page whose counters follow the wall clock, until dropped.
struct Dcgm {
    port: u16,
    stop: Arc<AtomicBool>,
    thread: Option<std::thread::JoinHandle<()>>,
}

fn page(elapsed: f64) -> String {
    // Energy in mJ since a made-up boot: 300 W and 100 W since `elapsed` 0.
    let e0 = 5.0e9 + 300_000.0 * elapsed;
    let e1 = 7.0e9 + 100_000.0 * elapsed;
    let labels = |g: u32| {
        format!(
            "gpu=\"{g}\",UUID=\"GPU-{g}\",device=\"nvidia{g}\",modelName=\"NVIDIA H100 80GB HBM3\",Hostname=\"node-a\""
        )
    };
    format!(
        "# HELP DCGM_FI_DEV_GPU_UTIL GPU utilization (in %).\n# TYPE DCGM_FI_DEV_GPU_UTIL gauge\n\
         DCGM_FI_DEV_GPU_UTIL{{{l0}}} 45\nDCGM_FI_DEV_GPU_UTIL{{{l1}}} 15\n\
         # TYPE DCGM_FI_DEV_POWER_USAGE gauge\n\
         DCGM_FI_DEV_POWER_USAGE{{{l0}}} 300.0\nDCGM_FI_DEV_POWER_USAGE{{{l1}}} 100.0\n\
         # TYPE DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION counter\n\
         DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION{{{l0}}} {e0:.0}\n\
         DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION{{{l1}}} {e1:.0}\n\
         DCGM_FI_DEV_FB_USED{{{l0}}} 40960\nDCGM_FI_DEV_FB_USED{{{l1}}} 20480\n",
        l0 = labels(0),
        l1 = labels(1),
    )
}

impl Dcgm {
    fn start() -> Dcgm {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        listener.set_nonblocking(true).unwrap();
        let port = listener.local_addr().unwrap().port();
        let stop = Arc::new(AtomicBool::new(false));
        let s2 = stop.clone();
        let t0 = Instant::now();
        let thread = std::thread::spawn(move || {
            let mut conns = Vec::new();
            while !s2.load(Relaxed) {
                let Ok((mut c, _)) = listener.accept() else {
                    std::thread::sleep(Duration::from_millis(5));
                    continue;
                };
                let stop = s2.clone();
                conns.push(std::thread::spawn(move || {
                    c.set_nonblocking(false).unwrap();
                    c.set_read_timeout(Some(Duration::from_millis(50))).unwrap();
                    let mut head = Vec::new();
                    let mut buf = [0u8; 4096];
                    // One answer per request head, on a kept-alive connection.
                    while !stop.load(Relaxed) {
                        match c.read(&mut buf) {
                            Ok(0) => break,
                            Ok(n) => head.extend_from_slice(&buf[..n]),
                            Err(_) => continue,
                        }
                        while let Some(i) = head.windows(4).position(|w| w == b"\r\n\r\n") {
                            head.drain(..i + 4);
                            let body = page(t0.elapsed().as_secs_f64());
                            let r = format!(
                                "HTTP/1.1 200 OK\r\ncontent-type: text/plain; version=0.0.4\r\ncontent-length: {}\r\n\r\n{body}",
                                body.len()
                            );
                            if c.write_all(r.as_bytes()).is_err() {
                                return;
                            }
                        }
                    }
                }));
            }
            for c in conns {
                let _ = c.join();
            }
        });
        Dcgm {
            port,
            stop,
            thread: Some(thread),
        }
    }
}

impl Drop for Dcgm {
    fn drop(&mut self) {
        self.stop.store(true, Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

#[test]
fn bench_with_gpu_metrics_reports_energy_per_output_token() {
    let dcgm = Dcgm::start();
    let url = format!("http://127.0.0.1:{}/metrics", dcgm.port);
    let dir = tempfile::tempdir().unwrap();
    let run = bench(
        dir.path(),
        "gpu.jsonl",
        &[
            "--gpu-metrics",
            &url,
            "--server-metrics-interval",
            "100ms",
            "--requests",
            "48",
            "--concurrency",
            "8",
            "--output-tokens",
            "64",
            "--sim-speed",
            "20",
            "-q",
        ],
    );
    assert_eq!(run.status.code(), Some(0), "{}", run.stderr);
    check_log(&run.out);
    let out = tpscope()
        .args(["report", run.out.to_str().unwrap(), "--format", "json"])
        .args(["--price-per-kwh", "0.30"])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let r = &v["runs"][0];
    let e = &r["energy"];
    assert_eq!(e["gpus"], 2, "{e}");
    assert_eq!(e["hosts"], serde_json::json!(["node-a"]));
    assert_eq!(e["from_counter"], true);
    assert!(e["scrapes"].as_u64().unwrap() >= 2, "{e}");
    // 400 W in all; scrape stamps are midway between request and answer, so
    // allow the counter's clock a little slack.
    let power = e["mean_power_w"].as_f64().unwrap();
    assert!((power - 400.0).abs() < 40.0, "{power}");
    // Utilisation: the two devices' mean.
    assert!(
        (e["mean_util"].as_f64().unwrap() - 0.30).abs() < 1e-9,
        "{e}"
    );
    let window = r["window"]["duration_s"].as_f64().unwrap();
    let joules = e["energy_j"].as_f64().unwrap();
    assert!(
        (joules - power * window).abs() < 1e-6 * joules,
        "{joules} vs {power} W × {window} s"
    );
    let tps = r["system_tps"].as_f64().unwrap();
    let per_token = e["joules_per_output_token"].as_f64().unwrap();
    assert!(
        (per_token * tps * window - joules).abs() < 1e-6 * joules,
        "{per_token} J/token"
    );
    let cost = e["energy_cost"].as_f64().unwrap();
    assert!((cost - 0.30 * joules / 3.6e6).abs() < 1e-12, "{cost}");
    assert_eq!(e["price_per_kwh"], 0.30);
    // The simulator's own page is still the server's side (its scrapes only).
    assert_eq!(r["server"]["server"], "vllm", "{}", r["server"]);

    let text = tpscope()
        .args(["report", run.out.to_str().unwrap()])
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&text.stdout);
    assert!(text.contains("GPU energy (2 GPUs on node-a"), "{text}");
    assert!(text.contains("energy per output token"), "{text}");
}

#[test]
fn gpu_metrics_that_do_not_answer_or_are_not_urls_stop_before_the_run() {
    refused(
        &["--gpu-metrics", "gpu-node:9400"],
        &["--gpu-metrics", "http"],
    );
    // Port 9 on loopback: nothing listens (a refused connection).
    let dir = tempfile::tempdir().unwrap();
    let url = "http://127.0.0.1:9/metrics";
    let out = bench(
        dir.path(),
        "dead.jsonl",
        &["--gpu-metrics", url, "--requests", "1"],
    );
    assert_ne!(out.status.code(), Some(0));
    assert!(
        out.stderr.contains(&format!("--gpu-metrics: {url}")),
        "{}",
        out.stderr
    );
}
