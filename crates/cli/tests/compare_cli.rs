//! `tpscope compare` end to end: exit status 0 on a clear win, 1 on a clear loss,
//! 3 on a noise-level difference, 2 on bad input (each naming the file or flag);
//! two runs of one file; JSON, markdown and HTML outputs.

mod compare_support;

use compare_support::*;
use tpscope_model::TokenSource;

fn win_loss_logs(dir: &std::path::Path) -> (String, String, String) {
    let base = log(
        dir,
        "base.jsonl",
        "base",
        Load {
            refill_delay: 0.3,
            error_p: 0.03,
            retry_p: 0.05,
            ..Load::default()
        },
    );
    let better = log(
        dir,
        "better.jsonl",
        "better",
        Load {
            stream_tps: 110.0,
            seed: 2,
            ..Load::default()
        },
    );
    let worse = log(
        dir,
        "worse.jsonl",
        "worse",
        Load {
            stream_tps: 30.0,
            refill_delay: 0.8,
            error_p: 0.2,
            retry_p: 0.4,
            seed: 3,
            ..Load::default()
        },
    );
    let s = |p: std::path::PathBuf| p.to_str().unwrap().to_string();
    (s(base), s(better), s(worse))
}

#[test]
fn clear_win_exits_0_clear_loss_exits_1() {
    let dir = scratch("compare_cli_win_loss");
    let (base, better, worse) = win_loss_logs(&dir);
    let o = tpscope(&["compare", &base, &better]);
    assert_eq!(o.status.code(), Some(0), "{}{}", stdout(&o), stderr(&o));
    let text = stdout(&o);
    assert!(text.starts_with("tpscope compare: PASS (exit 0)"), "{text}");
    for k in [
        "system TPS improves",
        "success rate does not drop",
        "gap fraction drops",
        "retry rate does not rise",
        "95% CI",
    ] {
        assert!(text.contains(k), "missing {k}: {text}");
    }
    let o = tpscope(&["compare", &base, &worse]);
    assert_eq!(o.status.code(), Some(1), "{}{}", stdout(&o), stderr(&o));
    assert!(stdout(&o).starts_with("tpscope compare: FAIL (exit 1)"));
}

#[test]
fn noise_level_difference_exits_3() {
    let dir = scratch("compare_cli_noise");
    let a = log(
        &dir,
        "a.jsonl",
        "a",
        Load {
            refill_delay: 0.1,
            seed: 11,
            ..Load::default()
        },
    );
    let b = log(
        &dir,
        "b.jsonl",
        "b",
        Load {
            refill_delay: 0.1,
            seed: 12,
            ..Load::default()
        },
    );
    let o = tpscope(&["compare", a.to_str().unwrap(), b.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(3), "{}{}", stdout(&o), stderr(&o));
    assert!(stdout(&o).contains("inconclusive"));
}

#[test]
fn json_and_markdown_outputs() {
    let dir = scratch("compare_cli_formats");
    let (base, better, _) = win_loss_logs(&dir);
    let o = tpscope(&[
        "compare",
        &base,
        &better,
        "--format",
        "json",
        "--resamples",
        "300",
        "--seed",
        "9",
    ]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let v: serde_json::Value = serde_json::from_str(&stdout(&o)).expect("valid JSON");
    assert_eq!(v["schema"], "tpscope.compare/1");
    assert_eq!(v["overall"], "pass");
    assert_eq!(v["criteria"].as_array().unwrap().len(), 4);
    assert_eq!(v["criteria"][0]["criterion"], "system_tps");
    assert!(v["criteria"][0]["interval"]["low"].as_f64().unwrap() > 0.0);
    assert_eq!(v["bootstrap"]["resamples"], 300);
    assert_eq!(v["bootstrap"]["seed"], 9);
    assert_eq!(v["baseline"]["source"], base.as_str());
    // Same seed, same bytes.
    let again = tpscope(&[
        "compare",
        &base,
        &better,
        "--format",
        "json",
        "--resamples",
        "300",
        "--seed",
        "9",
    ]);
    assert_eq!(o.stdout, again.stdout);

    let o = tpscope(&["compare", &base, &better, "--format", "markdown"]);
    let md = stdout(&o);
    assert!(md.starts_with("### tpscope compare: ✅ pass"), "{md}");
    assert!(
        md.contains("| criterion | baseline | candidate | change | 95% CI | threshold | verdict |")
    );
}

#[test]
fn two_runs_of_one_file_by_run_id() {
    let dir = scratch("compare_cli_one_file");
    let mut recs = records(
        "before",
        "m",
        TokenSource::Usage,
        Load {
            refill_delay: 0.3,
            ..Load::default()
        },
    );
    recs.extend(records(
        "after",
        "m",
        TokenSource::Usage,
        Load {
            stream_tps: 110.0,
            seed: 5,
            ..Load::default()
        },
    ));
    let path = dir.join("both.jsonl");
    write_log(&path, &recs);
    let p = path.to_str().unwrap();
    let o = tpscope(&[
        "compare",
        p,
        "--baseline-run",
        "before",
        "--candidate-run",
        "after",
    ]);
    assert_eq!(o.status.code(), Some(0), "{}{}", stdout(&o), stderr(&o));
    assert!(stdout(&o).contains(&format!("{p}#before")));

    // One file without run ids, an unknown run id, two runs without a choice.
    let o = tpscope(&["compare", p]);
    assert_eq!(o.status.code(), Some(2));
    assert!(
        stderr(&o).contains("--baseline-run and --candidate-run"),
        "{}",
        stderr(&o)
    );
    let o = tpscope(&[
        "compare",
        p,
        "--baseline-run",
        "before",
        "--candidate-run",
        "nope",
    ]);
    assert_eq!(o.status.code(), Some(2));
    let e = stderr(&o);
    assert!(
        e.contains("--candidate-run") && e.contains("nope") && e.contains("before, after"),
        "{e}"
    );
    let o = tpscope(&["compare", p, p]);
    assert_eq!(o.status.code(), Some(2));
    assert!(
        stderr(&o)
            .contains("holds 2 runs (before, after); choose the baseline with --baseline-run"),
        "{}",
        stderr(&o)
    );
}

#[test]
fn mismatched_runs_are_refused_unless_allowed() {
    let dir = scratch("compare_cli_mismatch");
    let a = dir.join("a.jsonl");
    write_log(
        &a,
        &records("a", "llama-8b", TokenSource::Usage, Load::default()),
    );
    let b = dir.join("b.jsonl");
    write_log(
        &b,
        &records(
            "b",
            "qwen-7b",
            TokenSource::Chunks,
            Load {
                seed: 2,
                ..Load::default()
            },
        ),
    );
    let (a, b) = (a.to_str().unwrap(), b.to_str().unwrap());
    let o = tpscope(&["compare", a, b]);
    assert_eq!(o.status.code(), Some(2));
    let e = stderr(&o);
    for k in [
        "model differs: baseline llama-8b, candidate qwen-7b",
        "token source differs",
        "usage",
        "chunks",
        "--allow-mismatch",
    ] {
        assert!(e.contains(k), "missing `{k}` in {e}");
    }
    let o = tpscope(&["compare", a, b, "--allow-mismatch"]);
    assert_ne!(o.status.code(), Some(2), "{}", stderr(&o));
    assert!(stdout(&o).contains("compared although model differs"));
}

#[test]
fn bad_input_exits_2_naming_the_file_or_flag() {
    let dir = scratch("compare_cli_bad");
    let good = log(&dir, "good.jsonl", "g", Load::default());
    let g = good.to_str().unwrap();
    let broken = dir.join("broken.jsonl");
    std::fs::write(&broken, "{\"kind\":\"run\",\n").unwrap();
    let missing = dir.join("missing.jsonl");
    let cases: Vec<(Vec<String>, &str)> = vec![
        (
            vec![g.into(), missing.to_str().unwrap().into()],
            "missing.jsonl",
        ),
        (
            vec![g.into(), broken.to_str().unwrap().into()],
            "broken.jsonl",
        ),
        (
            vec![g.into(), g.into(), "--min-tps-gain".into(), "lots".into()],
            "--min-tps-gain",
        ),
        (
            vec![
                g.into(),
                g.into(),
                "--max-success-drop".into(),
                "150%".into(),
            ],
            "--max-success-drop",
        ),
        (
            vec![g.into(), g.into(), "--confidence".into(), "1".into()],
            "--confidence",
        ),
        (
            vec![g.into(), g.into(), "--resamples".into(), "0".into()],
            "--resamples",
        ),
        (
            vec![g.into(), g.into(), "--window".into(), "later".into()],
            "--window",
        ),
        (
            vec![g.into(), g.into(), "--format".into(), "yaml".into()],
            "--format",
        ),
    ];
    for (args, needle) in cases {
        let mut full = vec!["compare".to_string()];
        full.extend(args);
        let refs: Vec<&str> = full.iter().map(String::as_str).collect();
        let o = tpscope(&refs);
        assert_eq!(o.status.code(), Some(2), "{full:?}: {}", stderr(&o));
        assert!(
            stderr(&o).contains(needle),
            "{full:?}: `{needle}` not in {}",
            stderr(&o)
        );
        assert!(!stderr(&o).contains("panicked"), "{}", stderr(&o));
    }
}

#[test]
fn html_page_is_written() {
    let dir = scratch("compare_cli_html");
    let (base, better, _) = win_loss_logs(&dir);
    let page = dir.join("cmp.html");
    let o = tpscope(&[
        "compare",
        &base,
        &better,
        "--html",
        page.to_str().unwrap(),
        "--resamples",
        "200",
    ]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let html = std::fs::read_to_string(&page).unwrap();
    assert!(html.starts_with("<!DOCTYPE html>"));
    assert_eq!(html.matches("<svg class=\"chart\"").count(), 10);
    let o = tpscope(&[
        "compare",
        &base,
        &better,
        "--html",
        dir.join("no/such/dir.html").to_str().unwrap(),
    ]);
    assert_eq!(o.status.code(), Some(2));
    assert!(stderr(&o).contains("--html"), "{}", stderr(&o));
}

#[test]
fn goodput_goals_add_a_fifth_criterion_and_bad_goals_exit_2_naming_the_flag() {
    let dir = scratch("slo-goals");
    let (base, _better, worse) = win_loss_logs(&dir);
    // Without --goodput, four criteria; with it, goodput is judged too.
    let plain = tpscope(&["compare", &base, &worse]);
    assert!(
        !stdout(&plain).contains("goodput does not drop"),
        "{}",
        stdout(&plain)
    );
    let out = tpscope(&[
        "compare",
        &base,
        &worse,
        "--goodput",
        "e2e:6s",
        "--format",
        "json",
    ]);
    let v: serde_json::Value = serde_json::from_str(&stdout(&out)).unwrap();
    let crit = v["criteria"].as_array().unwrap();
    assert_eq!(crit.len(), 5, "{v}");
    let g = crit.iter().find(|c| c["criterion"] == "goodput").unwrap();
    assert_eq!(g["verdict"], "fail", "{g}");
    assert_eq!(out.status.code(), Some(1));
    // vLLM's form is read too: milliseconds, space-separated.
    let vllm = tpscope(&["compare", &base, &worse, "--goodput", "e2el:6000"]);
    assert!(
        stdout(&vllm).contains("goodput does not drop"),
        "{}",
        stdout(&vllm)
    );
    for (bad, named) in [
        ("itl:5ms", "`itl`"),
        ("ttft:soon", "`soon`"),
        ("ttft", "KEY:VALUE"),
    ] {
        let out = tpscope(&["compare", &base, &worse, "--goodput", bad]);
        assert_eq!(out.status.code(), Some(2), "{bad}");
        let e = stderr(&out);
        assert!(e.contains("--goodput") && e.contains(named), "{bad}: {e}");
    }
}
