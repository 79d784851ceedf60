//! End to end, what a new user meets (issues 15 and 16): the model's context is
//! respected, scaled simulator time is said, and the run's report points onwards.

mod bench_support;

use bench_support::{bench, check_log, runs, records};
use tpscope_model::Status;

#[test]
fn the_default_workload_fits_the_models_context_and_says_so() {
    // issue 15: the default lengths against a 4k-context vLLM drew 31 of 320
    // requests longer than max_model_len (HTTP 400).
    let dir = tempfile::tempdir().unwrap();
    let cfg = dir.path().join("sim.toml");
    std::fs::write(&cfg, "max_model_len = 1024\nspeed = \"max\"\n").unwrap();
    let cfg = cfg.display().to_string();
    let run = bench(
        dir.path(),
        "ctx.jsonl",
        &["--sim-config", &cfg, "--requests", "60", "--concurrency", "8", "-q"],
    );
    assert_eq!(run.status.code(), Some(0), "{}", run.stderr);
    assert!(
        run.stderr.contains("context is 1024 tokens (max_model_len)"),
        "{}",
        run.stderr
    );
    let (spans, end) = check_log(&run.out);
    assert_eq!(end.ok, 60, "{}", run.stderr);
    let limit = runs(&records(&run.out))[0].load["context_limit"]
        .as_u64()
        .unwrap();
    assert!(limit < 1024);
    // The server's prompt count includes the chat template: within the context.
    for s in spans.iter().filter(|s| s.status == Status::Ok) {
        assert!(s.input_tokens.unwrap() + s.output_tokens <= 1024, "{s:?}");
    }
    // Lengths the user gave that cannot fit are refused, naming the flags.
    let run = bench(
        dir.path(),
        "ctx2.jsonl",
        &[
            "--sim-config",
            &cfg,
            "--input-tokens",
            "1000",
            "--output-tokens",
            "100",
            "--requests",
            "2",
        ],
    );
    assert_eq!(run.status.code(), Some(2), "{}", run.stderr);
    assert!(
        run.stderr.contains("--input-tokens/--output-tokens") && run.stderr.contains("1100"),
        "{}",
        run.stderr
    );
}
