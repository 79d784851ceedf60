//! A benchmark from a Rust program: `cargo run -p tpscope-load --example bench --
//! [URL]` runs 40 requests at concurrency 1 and 8 against the server at URL (or
//! against the simulator, started in-process), writes `bench-example.jsonl`
//! (`tpscope report` reads it) and prints each run's counts.
use std::net::{Ipv4Addr, SocketAddr};

use tpscope_load::bench::{BenchTarget, bench};
use tpscope_load::spec::{BenchSpec, Flags};

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let url = std::env::args().nth(1);
    // The flags of `tpscope bench --concurrency 1,8 --requests 40`, checked together.
    let spec = BenchSpec::from_flags(Flags {
        url: url.clone(),
        concurrency: vec![1, 8],
        requests: Some(40),
        ..Flags::default()
    })?;
    let sim = match url {
        Some(_) => None,
        None => Some(
            tpscope_sim::start(
                tpscope_sim::SimConfig {
                    speed: tpscope_sim::Speed::Max,
                    ..Default::default()
                },
                SocketAddr::from((Ipv4Addr::LOCALHOST, 0)),
            )
            .await?,
        ),
    };
    let base_url = match (&spec.url, &sim) {
        (Some(u), _) => u.clone(),
        (None, Some(s)) => s.base_url(),
        (None, None) => unreachable!("no URL starts the simulator"),
    };
    let log = std::fs::File::create_new("bench-example.jsonl")?;
    let run = bench(&spec, BenchTarget::url(base_url), Box::new(log)).await?;
    for (id, s) in run.run_ids.iter().zip(&run.summaries) {
        println!(
            "{id}: {} ok, {} error, {} cancelled",
            s.status.ok, s.status.error, s.status.cancelled
        );
    }
    if let Some(s) = sim {
        s.shutdown().await?;
    }
    Ok(())
}
