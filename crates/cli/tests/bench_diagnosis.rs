//! End to end against the built-in simulator: `bench` scrapes the simulator's
//! `/metrics` into `server_sample` records, the server's token counters agree with
//! the client's totals exactly, and the diagnosis names the right limit for a
//! server-bound, a client-cap-bound, a KV-bound and a pipeline-gap-bound setup.

mod bench_support;

use std::path::Path;

use bench_support::{analyze, bench, check_log, records};
use tpscope_analysis::RunReport;
use tpscope_analysis::diagnosis::State;
use tpscope_model::Record;

/// Runs a bench against the simulator configured by `sim_toml`; its report.
fn run(dir: &Path, name: &str, sim_toml: &str, args: &[&str]) -> RunReport {
    let cfg = dir.join(format!("{name}.toml"));
    std::fs::write(&cfg, sim_toml).unwrap();
    let cfg = cfg.to_str().unwrap().to_string();
    let mut all = vec![
        "--sim-config",
        &cfg,
        "--sim-speed",
        "10",
        "--server-metrics-interval",
        "20ms",
        "--input-tokens",
        "64",
        "--seed",
        "5",
    ];
    all.extend_from_slice(args);
    let out = bench(dir, &format!("{name}.jsonl"), &all);
    assert_eq!(out.status.code(), Some(0), "{}", out.stderr);
    check_log(&out.out);
    let scrapes = records(&out.out)
        .iter()
        .filter(|r| matches!(r, Record::ServerSample(_)))
        .count();
    assert!(scrapes >= 3, "{name}: {scrapes} server samples");
    let mut reports = analyze(&out.out);
    assert_eq!(reports.len(), 1);
    let r = reports.remove(0);
    assert!(
        out.stdout.contains("diagnosis (client and server)"),
        "{name}: the printed report has the diagnosis:\n{}",
        out.stdout
    );
    r
}

fn limit(r: &RunReport) -> (Option<State>, String) {
    let d = r.diagnosis.as_ref().expect("a diagnosis");
    assert!(d.with_server);
    let shares: Vec<String> = d
        .states
        .iter()
        .map(|s| format!("{} {:.3}", s.name, s.share))
        .collect();
    (d.limit, format!("{} [{}]", d.sentence, shares.join(", ")))
}

#[test]
fn a_small_server_batch_behind_a_large_client_cap_is_server_bound() {
    let dir = tempfile::tempdir().unwrap();
    let r = run(
        dir.path(),
        "server",
        "max_num_seqs = 4\n",
        &[
            "--concurrency",
            "48",
            "--requests",
            "96",
            "--output-tokens",
            "64",
        ],
    );
    let (l, why) = limit(&r);
    assert_eq!(l, Some(State::ServerQueue), "{why}");
}

#[test]
fn a_small_client_cap_before_a_large_server_batch_is_client_cap_bound_and_tokens_agree() {
    let dir = tempfile::tempdir().unwrap();
    let r = run(
        dir.path(),
        "cap",
        "max_num_seqs = 256\n",
        &[
            "--concurrency",
            "4",
            "--requests",
            "48",
            "--output-tokens",
            "64",
        ],
    );
    let (l, why) = limit(&r);
    assert_eq!(l, Some(State::ClientCap), "{why}");
    // The server's counters, first scrape to last, against the client's totals.
    let s = r.server.as_ref().expect("server vs client");
    assert_eq!(s.server.as_deref(), Some("vllm"));
    assert_eq!(
        s.server_output_tokens,
        Some(s.client_output_tokens as f64),
        "output tokens"
    );
    assert_eq!(s.output_tokens_difference, Some(0.0));
    assert_eq!(
        s.server_input_tokens,
        s.client_input_tokens.map(|n| n as f64),
        "input tokens"
    );
    assert_eq!(s.client_output_tokens, r.counts.output_tokens);
    assert!(s.server_ttft_mean.is_some() && s.client_ttft_mean.is_some());
    assert!(
        !r.warnings
            .iter()
            .any(|w| w.contains("output tokens during the run"))
    );
}

#[test]
fn a_small_kv_cache_with_long_outputs_is_kv_bound() {
    let dir = tempfile::tempdir().unwrap();
    let r = run(
        dir.path(),
        "kv",
        "max_num_seqs = 256\nnum_kv_blocks = 64\nmax_model_len = 1024\n",
        &[
            "--concurrency",
            "32",
            "--requests",
            "48",
            "--output-tokens",
            "512",
        ],
    );
    let (l, why) = limit(&r);
    assert_eq!(l, Some(State::KvBound), "{why}");
}

#[test]
fn waves_of_uneven_requests_are_pipeline_gap_bound() {
    let dir = tempfile::tempdir().unwrap();
    let r = run(
        dir.path(),
        "waves",
        "max_num_seqs = 256\n",
        &[
            "--concurrency",
            "16",
            "--requests",
            "96",
            "--output-tokens",
            "uniform:8..512",
            "--dispatch",
            "waves",
        ],
    );
    let (l, why) = limit(&r);
    assert_eq!(l, Some(State::PipelineGap), "{why}");
}

#[test]
fn server_metrics_off_leaves_the_client_side_alone() {
    let dir = tempfile::tempdir().unwrap();
    let out = bench(
        dir.path(),
        "off.jsonl",
        &[
            "--sim-speed",
            "10",
            "--requests",
            "8",
            "--concurrency",
            "2",
            "--output-tokens",
            "16",
            "--server-metrics",
            "off",
        ],
    );
    assert_eq!(out.status.code(), Some(0), "{}", out.stderr);
    assert!(
        !records(&out.out)
            .iter()
            .any(|r| matches!(r, Record::ServerSample(_)))
    );
    let r = &analyze(&out.out)[0];
    assert!(r.server.is_none());
    let d = r.diagnosis.as_ref().unwrap();
    assert!(!d.with_server && d.notes[0].contains("client side alone"));
    assert!(out.stdout.contains("diagnosis (client side only)"));
}

#[test]
fn an_explicit_server_metrics_url_that_does_not_answer_names_the_flag() {
    let dir = tempfile::tempdir().unwrap();
    // Port 9 on loopback: nothing listens (a refused connection, never the network).
    let out = bench(
        dir.path(),
        "bad.jsonl",
        &[
            "--requests",
            "1",
            "--output-tokens",
            "4",
            "--server-metrics",
            "http://127.0.0.1:9/metrics",
        ],
    );
    assert_ne!(out.status.code(), Some(0));
    assert!(out.stderr.contains("--server-metrics"), "{}", out.stderr);
}

/// Real vLLM at --concurrency 16 = --max-num-seqs 16 with long prefill steps:
/// the report said "raise the client's cap" while the server was busy (its
/// gauges update only at step end). A slow GPU model (20 TFLOPS) makes each
/// prefill step long: the generation counter stands still between scrapes
/// while the client sits at its cap, and the diagnosis calls that the server's.
#[test]
fn long_prefill_steps_at_the_servers_batch_are_server_busy_not_client_cap() {
    let dir = tempfile::tempdir().unwrap();
    let r = run(
        dir.path(),
        "prefill",
        "max_num_seqs = 16\ntflops = 20\n",
        &[
            "--concurrency",
            "16",
            "--requests",
            "64",
            "--output-tokens",
            "4",
        ],
    );
    let (l, why) = limit(&r);
    eprintln!("{why}");
    assert_ne!(l, Some(State::ClientCap), "{why}");
    let d = r.diagnosis.as_ref().unwrap();
    assert!(!d.sentence.contains("raise the client's cap"), "{why}");
    assert!(
        d.states.iter().any(|s| s.state == State::ServerBusy),
        "{why}"
    );
}
