//! A pasted `vllm bench serve` command line runs against the built-in simulator,
//! writes vLLM's result JSON, and `tpscope import --from vllm` reads it back to the
//! same figures (such lines failed on --save-result, --backend, --host,
//! --random-range-ratio, the unquoted --goodput and more).

use std::path::Path;
use std::process::{Command, Output};

fn tpscope(dir: &Path, args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_tpscope"))
        .current_dir(dir)
        .args(args)
        .output()
        .expect("run tpscope")
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

const LINE: &str = "bench --backend openai-chat --dataset-name random --random-input-len 64 \
    --random-output-len 16 --random-range-ratio 0.25 --num-prompts 40 --max-concurrency 8 \
    --request-rate inf --goodput ttft:500 tpot:50 --percentile-metrics ttft,tpot,itl,e2el \
    --metric-percentiles 50,90,99 --num-warmups 2 --temperature 0 --seed 3 \
    --save-result --save-detailed --result-dir res --result-filename vllm.json \
    --out run.jsonl --quiet";

#[test]
fn a_pasted_vllm_bench_serve_line_saves_a_result_that_imports_to_the_same_figures() {
    let dir = tempfile::tempdir().unwrap();
    let args: Vec<&str> = LINE.split_whitespace().collect();
    let o = tpscope(dir.path(), &args);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let saved = dir.path().join("res/vllm.json");
    let v: serde_json::Value = serde_json::from_slice(&std::fs::read(&saved).unwrap()).unwrap();
    // vLLM's keys, its detailed arrays included.
    for key in [
        "date",
        "backend",
        "endpoint_type",
        "model_id",
        "tokenizer_id",
        "num_prompts",
        "request_rate",
        "burstiness",
        "max_concurrency",
        "duration",
        "completed",
        "failed",
        "total_input_tokens",
        "total_output_tokens",
        "request_throughput",
        "request_goodput",
        "output_throughput",
        "total_token_throughput",
        "input_lens",
        "output_lens",
        "ttfts",
        "itls",
        "latencies",
        "start_times",
        "generated_texts",
        "errors",
        "max_output_tokens_per_s",
        "max_concurrent_requests",
        "mean_ttft_ms",
        "median_ttft_ms",
        "std_ttft_ms",
        "p50_ttft_ms",
        "p90_ttft_ms",
        "p99_ttft_ms",
        "mean_tpot_ms",
        "p99_tpot_ms",
        "mean_itl_ms",
        "p99_itl_ms",
        "mean_e2el_ms",
        "p99_e2el_ms",
    ] {
        assert!(v.get(key).is_some(), "no {key}: {v}");
    }
    assert_eq!(v["completed"], 40);
    assert_eq!(v["max_concurrency"], 8);
    assert_eq!(v["request_rate"], "inf");
    assert_eq!(v["ttfts"].as_array().unwrap().len(), 40);
    // --random-range-ratio 0.25 around 16 output tokens, as vLLM draws them (EOS
    // ignored); the prompts' 48..=80 tokens arrive with the server's chat template.
    let lens = |key: &str| -> Vec<u64> {
        v[key]
            .as_array()
            .unwrap()
            .iter()
            .map(|n| n.as_u64().unwrap())
            .collect()
    };
    assert!(
        lens("output_lens").iter().all(|n| (12..=20).contains(n)),
        "{v}"
    );
    let input = lens("input_lens");
    let (lo, hi) = (input.iter().min().unwrap(), input.iter().max().unwrap());
    assert!(*lo >= 48 && hi - lo <= 32, "{input:?}");
    // Within the loose goals every request counts toward goodput.
    assert_eq!(v["request_goodput"], v["request_throughput"]);

    let o = tpscope(
        dir.path(),
        &[
            "import",
            "--from",
            "vllm",
            "res/vllm.json",
            "-o",
            "back.jsonl",
        ],
    );
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let o = tpscope(dir.path(), &["report", "back.jsonl", "--format", "json"]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let r: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    let r = &r["runs"][0];
    assert_eq!(r["counts"]["ok"], v["completed"]);
    assert_eq!(r["counts"]["output_tokens"], v["total_output_tokens"]);
    assert_eq!(r["counts"]["input_tokens"], v["total_input_tokens"]);
    let close = |a: &serde_json::Value, ms: &serde_json::Value, what: &str| {
        let (a, b) = (a.as_f64().unwrap() * 1000.0, ms.as_f64().unwrap());
        // Stamps are whole nanoseconds.
        assert!((a - b).abs() < 1e-5, "{what}: {a} ms vs vLLM's {b} ms");
    };
    for (ours, theirs) in [("t_first_token", "ttft"), ("t_in_flight", "e2el")] {
        close(&r[ours]["mean"], &v[format!("mean_{theirs}_ms")], theirs);
        for p in ["50", "90", "99"] {
            close(
                &r[ours][format!("p{p}")],
                &v[format!("p{p}_{theirs}_ms")],
                theirs,
            );
        }
    }
    let itl = &r["conventional"]["inter_token_latency"];
    close(&itl["mean"], &v["mean_itl_ms"], "itl");
    close(&itl["p99"], &v["p99_itl_ms"], "itl");
    // The saved result is never replaced: the same line again is refused.
    let o = tpscope(dir.path(), &args);
    assert_ne!(o.status.code(), Some(0));
}

#[test]
fn a_vllm_flag_tpscope_does_not_take_lists_the_ones_it_does() {
    let dir = tempfile::tempdir().unwrap();
    let o = tpscope(
        dir.path(),
        &["bench", "--save-result", "--sonnet-input-len", "5"],
    );
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    let e = stderr(&o);
    assert!(
        e.contains("--sonnet-input-len: vLLM's flag is not taken"),
        "{e}"
    );
    assert!(
        e.contains("--percentile-metrics") && e.contains("--host"),
        "{e}"
    );
}
