//! A user's third pass, end to end: no writer replaces a file unless
//! asked, and never one of its own inputs.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

fn golden() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../log/tests/fixtures/two_spans_cap1.jsonl")
}

fn tpscope(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_tpscope"))
        .args(args)
        .output()
        .expect("run tpscope")
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

#[test]
fn report_output_onto_its_own_span_log_replaced_the_log() {
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("run.jsonl");
    std::fs::copy(golden(), &log).unwrap();
    let before = std::fs::read(&log).unwrap();
    let l = log.to_str().unwrap();
    for extra in [&[][..], &["--overwrite"][..]] {
        for flag in ["-o", "--html"] {
            let mut args = vec!["report", l, flag, l];
            args.extend_from_slice(extra);
            let o = tpscope(&args);
            assert_eq!(o.status.code(), Some(2), "{flag} {extra:?}: {}", stderr(&o));
            assert!(stderr(&o).contains("inputs"), "{}", stderr(&o));
        }
    }
    assert_eq!(std::fs::read(&log).unwrap(), before);
}

#[test]
fn report_and_compare_outputs_replaced_existing_files_unasked() {
    let dir = tempfile::tempdir().unwrap();
    let g = golden();
    let g = g.to_str().unwrap();
    let out = dir.path().join("out.txt");
    std::fs::write(&out, "keep").unwrap();
    let o_ = out.to_str().unwrap();
    for cmd in [
        vec!["report", g, "-o", o_],
        vec!["report", g, "--html", o_],
        vec!["compare", g, g, "-o", o_],
    ] {
        let o = tpscope(&cmd);
        assert_eq!(o.status.code(), Some(2), "{cmd:?}: {}", stderr(&o));
        assert!(stderr(&o).contains("--overwrite"), "{}", stderr(&o));
        assert_eq!(std::fs::read_to_string(&out).unwrap(), "keep");
    }
    let o = tpscope(&["report", g, "-o", o_, "--overwrite"]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert!(
        std::fs::read_to_string(&out)
            .unwrap()
            .contains("run golden")
    );
    // compare's baseline is one of its inputs too.
    let o = tpscope(&["compare", g, g, "-o", g, "--overwrite"]);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert!(stderr(&o).contains("inputs"), "{}", stderr(&o));
}

#[test]
fn import_output_onto_its_input_is_refused_even_with_overwrite() {
    let dir = tempfile::tempdir().unwrap();
    let src = dir.path().join("vllm.json");
    let body = r#"{"date":"20250101-000000","backend":"openai","model_id":"m","num_prompts":1,"completed":1,"duration":1.0,"input_lens":[10],"output_lens":[5],"ttfts":[0.1],"itls":[[0.1,0.1,0.1,0.1]],"generated_texts":["x"],"errors":[""]}"#;
    std::fs::write(&src, body).unwrap();
    let s = src.to_str().unwrap();
    let o = tpscope(&["import", "--from", "vllm", s, "-o", s, "--overwrite"]);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert!(stderr(&o).contains("inputs"), "{}", stderr(&o));
    assert_eq!(std::fs::read_to_string(&src).unwrap(), body);
}

/// The golden log with a Hugging Face tokenizer from the directory the server
/// loaded the model from, and its counts of the two ok replies (12 for usage 10, 5
/// for 5: +13.3 %); `ended` keeps its end record.
fn counted_log(ended: bool) -> String {
    let text = std::fs::read_to_string(golden())
        .unwrap()
        .replace(
            r#""labels":{"#,
            r#""tokenizer":"hf:hf@6e58f0b2","labels":{"model_root":"/srv/model/hf","#,
        )
        .replace(
            r#""tokens":10}]}"#,
            r#""tokens":10}],"tokenizer_output_tokens":12}"#,
        )
        .replace(
            r#""tokens":5}]}"#,
            r#""tokens":5}],"tokenizer_output_tokens":5}"#,
        );
    if ended {
        text
    } else {
        text.lines()
            .filter(|l| !l.contains(r#""kind":"end""#))
            .map(|l| format!("{l}\n"))
            .collect()
    }
}

fn count_warning(log: &str) -> String {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("counted.jsonl");
    std::fs::write(&p, log).unwrap();
    let o = tpscope(&["report", p.to_str().unwrap(), "--format", "json"]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    v["runs"][0]["count_check"]["warning"]
        .as_str()
        .unwrap()
        .to_string()
}

#[test]
fn count_check_blamed_the_models_own_tokenizer() {
    let w = count_warning(&counted_log(true));
    assert!(
        w.contains(": the replies re-encode to more tokens than the server generated"),
        "{w}"
    );
    assert!(w.contains("usage counts are the ones to trust"), "{w}");
    assert!(!w.contains("not the model's"), "{w}");
}

#[test]
fn count_check_blamed_the_tokenizer_for_a_cut_run() {
    let w = count_warning(&counted_log(false));
    assert!(w.contains(": the run has no end record"), "{w}");
}

#[test]
fn a_one_line_file_that_is_not_a_span_log_exited_0() {
    let dir = tempfile::tempdir().unwrap();
    for (name, body) in [
        ("array.json", r#"[{"ttft": 0.1}, {"ttft": 0.2}]"#),
        ("notes.txt", "just some text"),
    ] {
        let p = dir.path().join(name);
        std::fs::write(&p, body).unwrap();
        let o = tpscope(&["report", p.to_str().unwrap()]);
        assert_eq!(o.status.code(), Some(2), "{name}: {}", stderr(&o));
        let e = stderr(&o);
        assert!(e.contains(name) && e.contains("not one record"), "{e}");
    }
}

#[test]
#[cfg(unix)]
fn streams_past_the_open_file_limit_failed_as_server_errors_with_exit_0() {
    let dir = tempfile::tempdir().unwrap();
    let bin = env!("CARGO_BIN_EXE_tpscope");
    let o = Command::new("bash")
        .current_dir(dir.path())
        .arg("-c")
        .arg(format!(
            "ulimit -n 256 && exec {bin} bench --concurrency 200 --requests 200 \
             --output-tokens 4 --input-tokens 8 --out run.jsonl --quiet"
        ))
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    let e = stderr(&o);
    assert!(
        e.contains("200 streams at once need about 464 open files"),
        "{e}"
    );
    assert!(
        e.contains("at most 256") && e.contains("--concurrency to 96"),
        "{e}"
    );
    assert!(!dir.path().join("run.jsonl").exists());
}

/// Output tokens of a bench run with `seed`, sorted (the workload's lengths).
fn run_lengths(dir: &Path, name: &str, seed: &str) -> Vec<u64> {
    // The default workload: (input, output) pairs where the server picks EOS.
    let o = tpscope(&[
        "bench",
        "--requests",
        "120",
        "--seed",
        seed,
        "--quiet",
        "--out",
        dir.join(name).to_str().unwrap(),
    ]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let text = std::fs::read_to_string(dir.join(name)).unwrap();
    let mut lens: Vec<u64> = text
        .lines()
        .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
        .filter(|v| v["kind"] == "span")
        .map(|v| v["output_tokens"].as_u64().unwrap())
        .collect();
    lens.sort_unstable();
    lens
}

#[test]
fn same_seed_runs_generated_different_workloads_when_the_server_chose_eos() {
    let dir = tempfile::tempdir().unwrap();
    let a = run_lengths(dir.path(), "a.jsonl", "7");
    let b = run_lengths(dir.path(), "b.jsonl", "7");
    assert_eq!(a.len(), 120);
    assert_eq!(a, b, "same seed, same lengths whatever the arrival order");
}

#[test]
fn negative_numbers_huge_rates_zero_timeouts_and_taken_ports_got_unclear_messages() {
    let g = golden();
    let g = g.to_str().unwrap();
    let cases: [(&[&str], &str); 5] = [
        (
            &["report", g, "--price-per-hour", "-1"],
            "--price-per-hour: -1 is not a non-negative price",
        ),
        (
            &["compare", g, g, "--price-per-mtok-out", "-2"],
            "--price-per-mtok-out: -2 is not a non-negative price",
        ),
        (
            &["bench", "--rate", "1e9"],
            "more than one client can pace (at most 1000000)",
        ),
        (
            &["bench", "--timeout-total", "0s"],
            "leaves no time for a request",
        ),
        (
            &["bench", "--concurrency", "-3"],
            "`-3` must be a whole number ≥ 1",
        ),
    ];
    for (args, want) in cases {
        let o = tpscope(args);
        assert_eq!(o.status.code(), Some(2), "{args:?}: {}", stderr(&o));
        assert!(stderr(&o).contains(want), "{args:?}: {}", stderr(&o));
    }
    // A port in use: said once, with what to do.
    let taken = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = taken.local_addr().unwrap().port().to_string();
    let o = tpscope(&["sim", "--port", &port]);
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
    let e = stderr(&o);
    assert!(e.contains("cannot listen on"), "{e}");
    assert!(e.contains("port 0 for a free one"), "{e}");
    let first = e.find("in use").unwrap();
    assert!(
        !e[first + 6..].contains("in use (os error"),
        "printed twice: {e}"
    );
}

#[test]
fn a_dead_servers_model_list_was_a_silent_wait() {
    // Accepts connections and never answers.
    let silent = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}/v1", silent.local_addr().unwrap());
    let o = tpscope(&[
        "bench",
        "--url",
        &url,
        "--timeout-first-token",
        "4s",
        "--requests",
        "1",
        "--quiet",
    ]);
    drop(silent);
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
    let e = stderr(&o);
    assert!(
        e.contains(&format!(
            "note: waiting for {url}/models to name the model (up to 4 s"
        )),
        "{e}"
    );
}

#[test]
fn the_sweeps_next_line_suggested_a_compare_that_exits_2() {
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("sweep.jsonl");
    let o = tpscope(&[
        "bench",
        "--concurrency",
        "1,2",
        "--requests",
        "4",
        "--input-tokens",
        "8",
        "--output-tokens",
        "4",
        "--out",
        log.to_str().unwrap(),
    ]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let all = format!("{}{}", String::from_utf8_lossy(&o.stdout), stderr(&o));
    let line = all
        .lines()
        .map(str::trim)
        .find(|l| l.starts_with("tpscope compare "))
        .unwrap_or_else(|| panic!("no compare line: {all}"));
    let cmd = line.split("   ").next().unwrap();
    assert!(
        cmd.contains("--baseline-run") && cmd.contains("--candidate-run"),
        "{cmd}"
    );
    let args: Vec<&str> = cmd.split_whitespace().skip(1).collect();
    let c = tpscope(&args);
    assert!(
        matches!(c.status.code(), Some(0 | 1 | 3)),
        "{cmd}: {}",
        stderr(&c)
    );
}

#[test]
fn numeric_timestamps_in_the_wrong_unit_gave_no_hint_which_unit() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("ms.jsonl");
    std::fs::write(
        &p,
        concat!(
            r#"{"kind":"run","run_id":"n","schema":"tpscope.spans/1","tool":"x","started_at":1767225600000,"target":{},"cap":1}"#,
            "\n",
            r#"{"kind":"span","run_id":"n","span_id":"a","status":"ok","queued_at":1767225600000,"released_at":1767225601000,"output_tokens":0}"#,
            "\n"
        ),
    )
    .unwrap();
    let p = p.to_str().unwrap();
    for extra in [&[][..], &["--time-unit", "s"][..]] {
        let mut args = vec!["report", p];
        args.extend_from_slice(extra);
        let o = tpscope(&args);
        assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
        assert!(
            stderr(&o).contains("; as ms it is 2026-01-01T00:00:00"),
            "{}",
            stderr(&o)
        );
        assert!(stderr(&o).contains("give --time-unit ms"), "{}", stderr(&o));
    }
}
