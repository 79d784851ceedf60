//! End to end: vLLM's habits work — a `--base-url` without `/v1`, `--endpoint`,
//! `--dataset-name`, `--request-rate inf --burstiness 1` — and negative numbers
//! are refused naming the flag and its bound, not as unknown arguments.

mod bench_support;

use bench_support::{SilentServer, bench, check_log, refused};

#[test]
fn negative_numbers_name_the_flag_and_its_bound() {
    refused(&["--concurrency", "-3"], &["--concurrency", "≥ 1"]);
    refused(&["--requests", "-5"], &["--requests", "≥ 1"]);
    refused(&["--max-retries", "-1"], &["--max-retries", "≥ 0"]);
    refused(&["--rate", "-2"], &["--rate", "> 0"]);
    refused(&["--time-scale", "-1"], &["--time-scale", "> 0"]);
    refused(
        &["--max-error-rate", "-0.1"],
        &["--max-error-rate", "from 0"],
    );
}

#[test]
fn vllm_dataset_names_without_an_equivalent_are_refused_naming_the_flag() {
    refused(
        &["--dataset-name", "sonnet"],
        &["--dataset-name", "no `sonnet` dataset"],
    );
    refused(&["--dataset-name", "sharegpt"], &["--dataset-path"]);
    refused(&["--dataset-path", "x.json"], &["--dataset-name"]);
    refused(&["--endpoint", "/v1/embeddings"], &["--endpoint"]);
}

#[test]
fn base_url_without_v1_and_endpoint_reach_vllms_paths() {
    let server = SilentServer::start();
    let dir = tempfile::tempdir().unwrap();
    let base = format!("http://127.0.0.1:{}", server.port);
    let common = [
        "--model",
        "m",
        "--requests",
        "1",
        "--timeout-first-token",
        "500ms",
        "--input-tokens",
        "4",
        "--output-tokens",
        "2",
        // Only the API's paths are counted here, not a probe of /metrics.
        "--server-metrics",
        "off",
    ];
    let mut chat = vec!["--base-url", base.as_str()];
    chat.extend(common);
    let run = bench(dir.path(), "c.jsonl", &chat);
    assert_eq!(run.status.code(), Some(1), "{}", run.stderr);
    assert!(
        run.stderr.contains("/v1"),
        "the added /v1 is noted: {}",
        run.stderr
    );
    let mut completions = vec!["--base-url", base.as_str(), "--endpoint", "/v1/completions"];
    completions.extend(common);
    let run = bench(dir.path(), "p.jsonl", &completions);
    assert_eq!(run.status.code(), Some(1), "{}", run.stderr);
    let mut lines = server.request_lines();
    lines.sort();
    assert_eq!(lines.len(), 2, "{lines:?}");
    assert!(
        lines[0].starts_with("POST /v1/chat/completions "),
        "{lines:?}"
    );
    assert!(lines[1].starts_with("POST /v1/completions "), "{lines:?}");
}

#[test]
fn request_rate_inf_with_burstiness_1_and_dataset_name_random_run() {
    let dir = tempfile::tempdir().unwrap();
    let run = bench(
        dir.path(),
        "v.jsonl",
        &[
            "--sim-speed",
            "max",
            "--request-rate",
            "inf",
            "--burstiness",
            "1",
            "--max-concurrency",
            "4",
            "--num-prompts",
            "8",
            "--dataset-name",
            "random",
            "--random-input-len",
            "16",
            "--random-output-len",
            "8",
        ],
    );
    assert_eq!(run.status.code(), Some(0), "{}", run.stderr);
    let (spans, end) = check_log(&run.out);
    assert_eq!(end.status.ok, 8);
    assert!(spans.iter().all(|s| s.output_tokens == 8));
}
