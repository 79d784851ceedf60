//! The translation of vLLM command lines, and the docs' list of its flags.

use super::*;

fn known() -> Vec<String> {
    [
        "url",
        "base-url",
        "model",
        "out",
        "concurrency",
        "max-concurrency",
        "requests",
        "num-prompts",
        "dataset-name",
        "input-tokens",
        "random-input-len",
        "output-tokens",
        "random-output-len",
        "goodput",
        "seed",
        "label",
        "tokenizer",
        "extra-body",
        "api",
        "warmup",
        "ignore-eos",
        "record-chunks",
        "request-rate",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect()
}

fn run(line: &str) -> anyhow::Result<Translated> {
    let args = std::iter::once("tpscope")
        .chain(line.split_whitespace())
        .map(OsString::from)
        .collect();
    translate(args, &known())
}

fn args(t: &Translated) -> String {
    t.args
        .iter()
        .map(|a| a.to_str().unwrap())
        .collect::<Vec<_>>()
        .join(" ")
}

#[test]
fn a_pasted_vllm_command_line_failed_on_flags_tpscope_did_not_take() {
    let t = run(
        "bench --backend openai-chat --host 127.0.0.1 --port 8001 --model m \
         --dataset-name random --random-input-len 100 --random-output-len 20 \
         --random-range-ratio 0.5 --num-warmups 2 --temperature 0 \
         --tokenizer /models/m --goodput ttft:500 tpot:50 --percentile-metrics ttft,e2el \
         --metric-percentiles 50,99 --save-result --save-detailed --result-dir out \
         --result-filename r.json --out run.jsonl --metadata a=1 b=2 --label mine",
    )
    .unwrap();
    let a = args(&t);
    assert_eq!(
        a,
        "tpscope bench --api chat --model m --dataset-name random --random-input-len \
         uniform:50..150 --random-output-len uniform:10..30 --warmup 2 --temperature 0 \
         --tokenizer hf:/models/m --goodput ttft:500 tpot:50 --out run.jsonl --label a=1 \
         --label b=2 --url http://127.0.0.1:8001/v1 --ignore-eos --record-chunks"
    );
    let r = t.result.unwrap();
    assert!(r.detailed);
    assert_eq!(r.metrics, ["ttft", "e2el"]);
    assert_eq!(r.percentiles, [50.0, 99.0]);
    assert_eq!(r.dir.as_deref(), Some(std::path::Path::new("out")));
    assert_eq!(r.filename.as_deref(), Some("r.json"));
    assert_eq!(r.label.as_deref(), Some("mine"));
    assert_eq!(r.backend, "openai-chat");
    assert_eq!(r.log, PathBuf::from("run.jsonl"));
    assert_eq!(r.metadata.len(), 2);
}

#[test]
fn a_flag_tpscope_does_not_take_is_refused_listing_the_vllm_flags_it_does() {
    let e = run("bench --sonnet-input-len 5").unwrap_err().to_string();
    assert!(
        e.starts_with("--sonnet-input-len: vLLM's flag is not taken"),
        "{e}"
    );
    assert!(
        e.contains("--save-result") && e.contains("--random-range-ratio"),
        "{e}"
    );
    // Once a line is vLLM's, any unknown flag is refused with the list.
    let e = run("bench --save-result --frobnicate")
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("--frobnicate: vLLM's flag") && e.contains("--goodput"),
        "{e}"
    );
    // tpscope's own line: unknown flags are clap's to name.
    let t = run("bench --frobnicate").unwrap();
    assert_eq!(args(&t), "tpscope bench --frobnicate");
    let t = run("bench --goodput ttft:1s --frobnicate").unwrap();
    assert_eq!(args(&t), "tpscope bench --goodput ttft:1s --frobnicate");
}

#[test]
fn tpscope_lines_and_other_commands_pass_unchanged() {
    for line in [
        "bench --tokenizer hf:/m --label k=v --goodput ttft:1s --url http://x/v1",
        "report --label x",
    ] {
        let t = run(line).unwrap();
        assert_eq!(args(&t), format!("tpscope {line}"));
        assert!(t.result.is_none());
    }
    let e = run("bench --backend tgi").unwrap_err().to_string();
    assert!(e.contains("--backend: `tgi`"), "{e}");
    let e = run("bench --save-result --out -").unwrap_err().to_string();
    assert!(e.contains("--out FILE"), "{e}");
}

#[test]
fn docs_list_every_accepted_vllm_flag() {
    let doc = include_str!("../../../../docs/vllm.md");
    for (flag, _) in ACCEPTED {
        assert!(
            doc.contains(&format!("| `{flag}` |")),
            "docs/vllm.md lacks {flag}"
        );
    }
}
