//! Benchmark of the importers: a 1,000,000-request file of a tool's output
//! turned into spans on one core. Prints records per second of CPU time for each
//! format measured.
//!
//! `cargo bench -p tpscope-log --bench import` (`TPSCOPE_BENCH_REQUESTS` for another
//! size). The files are generated in memory from the shapes of the committed real
//! fixtures: `vllm bench serve` columns with 8 inter-token latencies per request,
//! AIPerf `profile_export.jsonl` lines with its core metrics, and LLMPerf's array.

use std::fmt::Write as _;
use std::path::Path;
use std::time::{Duration, Instant};

use tpscope_log::import::{Format, ImportOptions, import};

fn cpu_time() -> Duration {
    // utime + stime of this process, in clock ticks (100 Hz on Linux).
    let stat = std::fs::read_to_string("/proc/self/stat").unwrap_or_default();
    let after = stat.rsplit_once(')').map(|x| x.1).unwrap_or("");
    let f: Vec<&str> = after.split_whitespace().collect();
    let ticks: u64 = f.get(11).and_then(|v| v.parse().ok()).unwrap_or(0)
        + f.get(12).and_then(|v| v.parse().ok()).unwrap_or(0);
    Duration::from_millis(ticks * 10)
}

fn vllm(n: usize) -> String {
    let mut cols: [String; 8] = Default::default();
    for i in 0..n {
        let start = 2066.0 + i as f64 * 0.002;
        let sep = if i == 0 { "" } else { "," };
        let _ = write!(cols[0], "{sep}{:.12}", 0.04 + (i % 97) as f64 * 1e-4);
        let _ = write!(
            cols[1],
            "{sep}[0.0061,0.0062,0.0059,0.0063,0.0060,0.0061,0.0064,0.0058]"
        );
        let _ = write!(cols[2], "{sep}{:.12}", 0.1 + (i % 97) as f64 * 1e-4);
        let _ = write!(cols[3], "{sep}{start:.9}");
        let _ = write!(cols[4], "{sep}{:.12}", (i % 13) as f64 * 1e-4);
        let _ = write!(cols[5], "{sep}{}", 60 + i % 20);
        let _ = write!(cols[6], "{sep}\"\"");
        let _ = write!(cols[7], "{sep}{}", 9);
    }
    format!(
        "{{\"date\":\"20261123-104432\",\"backend\":\"openai\",\"model_id\":\"m\",\"max_concurrency\":64,\
         \"ttfts\":[{}],\"itls\":[{}],\"latencies\":[{}],\"start_times\":[{}],\"queue_times\":[{}],\
         \"input_lens\":[{}],\"output_lens\":[{}],\"errors\":[{}]}}",
        cols[0], cols[1], cols[2], cols[3], cols[4], cols[5], cols[7], cols[6]
    )
}

fn aiperf(n: usize) -> String {
    let mut s = String::with_capacity(n * 700);
    for i in 0..n {
        let t0 = 1_795_431_533_325_561_945i64 + i as i64 * 2_000_000;
        let _ = writeln!(
            s,
            "{{\"metadata\":{{\"session_num\":{i},\"x_request_id\":\"f98cd959-768b-43d9-82ac-{i:012}\",\
             \"credit_issued_ns\":{t0},\"request_start_ns\":{},\"request_end_ns\":{},\
             \"worker_id\":\"worker_f8544278\",\"benchmark_phase\":\"profiling\",\"was_cancelled\":false}},\
             \"metrics\":{{\"time_to_first_token\":{{\"value\":29.485629,\"unit\":\"ms\"}},\
             \"request_latency\":{{\"value\":232.815778,\"unit\":\"ms\"}},\
             \"output_token_count\":{{\"value\":32,\"unit\":\"tokens\"}},\
             \"usage_completion_tokens\":{{\"value\":32,\"unit\":\"tokens\"}},\
             \"input_sequence_length\":{{\"value\":64,\"unit\":\"tokens\"}},\
             \"inter_token_latency\":{{\"value\":6.559037,\"unit\":\"ms\"}}}},\"error\":null}}",
            t0 + 9_000_000,
            t0 + 243_000_000
        );
    }
    s
}

fn llmperf(n: usize) -> String {
    let mut s = String::with_capacity(n * 330);
    s.push('[');
    for i in 0..n {
        if i > 0 {
            s.push(',');
        }
        let _ = write!(
            s,
            "{{\"error_code\":null,\"error_msg\":\"\",\"inter_token_latency_s\":0.0465,\
             \"ttft_s\":{:.6},\"end_to_end_latency_s\":7.453143953000108,\
             \"request_output_throughput_token_per_s\":20.2599,\"number_total_tokens\":710,\
             \"number_output_tokens\":160,\"number_input_tokens\":550}}",
            0.6 + (i % 50) as f64 * 1e-3
        );
    }
    s.push(']');
    s
}

fn main() {
    // `cargo bench` passes --bench; nothing else is accepted.
    let n: usize = std::env::var("TPSCOPE_BENCH_REQUESTS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(1_000_000);
    for (format, text) in [
        (Format::Vllm, vllm(n)),
        (Format::Aiperf, aiperf(n)),
        (Format::Llmperf, llmperf(n)),
    ] {
        let (c0, w0) = (cpu_time(), Instant::now());
        let imported = import(
            Some(format),
            Path::new("bench"),
            text.as_bytes(),
            &ImportOptions::default(),
        )
        .expect("the generated file imports");
        let (cpu, wall) = (cpu_time() - c0, w0.elapsed());
        assert_eq!(imported.spans.len(), n);
        println!(
            "{format:>8}: {n} requests ({:.0} MB) in {:.2} s CPU ({:.2} s wall): {:.0} records/s of CPU time",
            text.len() as f64 / 1e6,
            cpu.as_secs_f64(),
            wall.as_secs_f64(),
            n as f64 / cpu.as_secs_f64().max(1e-9)
        );
        drop(imported);
    }
}
