//! The proxy's default number of serving threads: one per core. Session 17 made
//! it half the cores because, measured only under `chrt -f 10`, one thread on two
//! cores added a little less latency than two; at normal priority it added 6.5×
//! the median of two (docs/proxy-bench.md, "The thread count at normal
//! priority"). Its own test binary: the serving threads are counted among this
//! process's threads by name, and no other proxy may run beside it.

mod common;

use common::*;

/// The names of this process's threads (Linux: `/proc/self/task/*/comm`).
#[cfg(target_os = "linux")]
fn thread_names() -> Vec<String> {
    std::fs::read_dir("/proc/self/task")
        .map(|d| {
            d.filter_map(Result::ok)
                .filter_map(|t| std::fs::read_to_string(t.path().join("comm")).ok())
                .map(|n| n.trim().to_string())
                .collect()
        })
        .unwrap_or_default()
}

#[cfg(target_os = "linux")]
#[tokio::test]
async fn the_proxy_serves_on_one_thread_per_core_by_default_not_half() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("p.jsonl");
    // An upstream that is never asked: the threads start with the proxy.
    let upstream = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let cfg = config(upstream.local_addr().unwrap(), &out);
    assert_eq!(cfg.threads, None, "the default, not a count");
    let p = proxy(cfg).await;
    let serving = thread_names()
        .iter()
        .filter(|n| n.starts_with("tpscope-proxy-"))
        .count();
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    p.shutdown().await.unwrap();
    assert_eq!(serving, cores, "serving threads on {cores} cores");
}
