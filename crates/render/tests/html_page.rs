//! The HTML pages of a report and of a comparison: self-contained (nothing loaded
//! from anywhere), every chart present with its marks, hostile text escaped, and
//! bounded in size for a big run. The browser check is `crates/cli/tests/html_browser.rs`.

use std::time::Duration;

use tpscope_analysis::compare::{CompareConfig, RunRef, compare};
use tpscope_analysis::detail::{compare_details, detail};
use tpscope_analysis::stats::bootstrap::SplitMix64;
use tpscope_analysis::{Options, Report, RunInput, SpanFacts, analyze};
use tpscope_model::{Cause, RunRecord, SCHEMA, Status, Target, Timestamp, TokenSource};
use tpscope_render::html;

fn ts(secs: f64) -> Timestamp {
    Timestamp::from_unix_nanos(1_800_000_000_000_000_000 + (secs * 1e9).round() as i64)
}

/// A closed-loop run: `n` requests queued in bursts through `cap` slots, each freed
/// slot refilled after `refill` seconds; some fail, some retry.
fn synth(id: &str, n: usize, cap: u32, rate: f64, refill: f64, seed: u64) -> RunInput {
    let mut rng = SplitMix64::new(seed);
    let mut input = RunInput {
        run_id: id.into(),
        run: Some(RunRecord {
            run_id: id.into(),
            schema: SCHEMA.into(),
            tool: "tpscope test".into(),
            started_at: ts(0.0),
            target: Target {
                url: None,
                model: Some("m".into()),
                api: Some("chat".into()),
            },
            cap: Some(cap),
            token_source: Some(TokenSource::Usage),
            tokenizer: None,
            sample_interval: None,
            sample_heartbeat: None,
            load: serde_json::Value::Null,
            labels: Default::default(),
            queue_times: Default::default(),
        }),
        ..RunInput::default()
    };
    let mut slots = vec![0.0f64; cap as usize];
    for i in 0..n {
        let queued = (i / 40) as f64 * 6.0;
        let (slot, free) = slots
            .iter()
            .copied()
            .enumerate()
            .min_by(|a, b| a.1.total_cmp(&b.1))
            .unwrap();
        let admitted = queued.max(free + if free > 0.0 { refill } else { 0.0 });
        let tokens = 20 + rng.below(400) as u64;
        let r = rate * (0.6 + 0.8 * rng.unit_f64());
        let first = admitted + 0.05 + 0.2 * rng.unit_f64();
        let last = first + tokens as f64 / r;
        let released = last + 0.003;
        let failed = rng.unit_f64() < 0.03;
        let retries = u32::from(rng.unit_f64() < 0.05);
        slots[slot] = released;
        input.push_span(
            SpanFacts {
                status: if failed { Status::Error } else { Status::Ok },
                error_cause: failed.then_some(Cause::Http5xx),
                queued_at: ts(queued),
                admitted_at: Some(ts(admitted)),
                first_token_at: Some(ts(first)),
                last_token_at: Some(ts(last)),
                released_at: ts(released),
                output_tokens: tokens,
                input_tokens: Some(100),
                retry_count: retries,
                retry_causes: vec![Cause::Http429; retries as usize].into(),
                wasted_tokens: 0,
                client: Default::default(),
                chunks: None,
                session: None,
            },
            None,
        );
    }
    input
}

fn opts() -> Options {
    Options {
        bucket: Some(Duration::from_secs(1)),
        ..Options::default()
    }
}

fn report_page(inputs: &[&RunInput]) -> String {
    let runs: Vec<_> = inputs.iter().map(|i| analyze(i, &opts())).collect();
    let details: Vec<_> = inputs
        .iter()
        .zip(&runs)
        .map(|(i, r)| detail(i, r))
        .collect();
    let report = Report {
        schema: tpscope_analysis::REPORT_SCHEMA,
        runs,
        skipped: Default::default(),
        warnings: vec!["a reader warning".into()],
        sweeps: Vec::new(),
    };
    String::from_utf8(html::report(&report, &details)).unwrap()
}

fn compare_page(b: &RunInput, c: &RunInput) -> String {
    let cmp = compare(
        RunRef {
            input: b,
            source: "base.jsonl",
        },
        RunRef {
            input: c,
            source: "cand.jsonl",
        },
        &Options::default(),
        &CompareConfig::default(),
    )
    .unwrap();
    let (db, dc) = compare_details(b, c, &Options::default());
    String::from_utf8(html::compare(&cmp, &db, &dc)).unwrap()
}

/// Nothing that a browser would fetch: no URLs in attributes, no links, no imports.
fn assert_self_contained(page: &str) {
    let lower = page.to_lowercase();
    for bad in [
        "http://", "https://", "<link", "src=", "@import", "url(http", "href=\"/", "//cdn",
    ] {
        assert!(!lower.contains(bad), "page contains `{bad}`");
    }
    // The only url() references are the charts' own clip paths.
    for (i, _) in lower.match_indices("url(") {
        assert!(lower[i..].starts_with("url(#"), "external url() at {i}");
    }
}

fn chart_ids(page: &str) -> Vec<String> {
    page.match_indices("<svg class=\"chart\"")
        .map(|(i, _)| {
            let rest = &page[i..];
            let id = rest.split("id=\"").nth(1).unwrap();
            id[..id.find('"').unwrap()].to_string()
        })
        .collect()
}

fn save(name: &str, page: &str) {
    let dir = std::path::Path::new(env!("CARGO_TARGET_TMPDIR")).join("html");
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join(name), page).unwrap();
}

#[test]
fn report_page_is_self_contained_with_every_chart() {
    let run = synth("run-1", 400, 8, 60.0, 0.4, 1);
    let page = report_page(&[&run]);
    save("report.html", &page);
    assert_self_contained(&page);
    assert!(page.starts_with("<!DOCTYPE html>"));
    let ids = chart_ids(&page);
    assert_eq!(
        ids,
        [
            "r0-occupancy",
            "r0-capacity",
            "r0-queue",
            "r0-tps",
            "r0-waterfall",
            "r0-cdf-ttft",
            "r0-cdf-queue",
            "r0-cdf-stream",
            "r0-cdf-e2e",
            "r0-scatter"
        ]
    );
    assert!(!page.contains("data-empty=\"1\""), "every chart has data");
    for needle in [
        "requests in flight",
        "time since run start (s)",
        "system TPS (output tokens/s)",
        "fraction of requests",
        "output length (tokens)",
        "steady state",
        "a reader warning",
        "All 400 requests of the window",
        "class=\"gap\"",
    ] {
        assert!(page.contains(needle), "missing `{needle}`");
    }
    assert_eq!(
        page.matches("<svg class=\"chart\"").count(),
        page.matches("</svg>").count() - page.matches("class=\"swatch\"").count()
    );
}

#[test]
fn compare_page_overlays_both_runs_and_shows_verdicts() {
    let b = synth("base", 400, 8, 60.0, 0.4, 1);
    let c = synth("cand", 400, 8, 90.0, 0.0, 2);
    let page = compare_page(&b, &c);
    save("compare.html", &page);
    assert_self_contained(&page);
    let ids = chart_ids(&page);
    assert_eq!(ids.len(), 10, "{ids:?}");
    for needle in [
        "system TPS improves",
        "success rate does not drop",
        "gap fraction drops",
        "retry rate does not rise",
        "class=\"verdict pass\"",
        "line base",
        "line cand",
        "(baseline)",
        "(candidate)",
        "95% CI",
    ] {
        assert!(page.contains(needle), "missing `{needle}`");
    }
}

#[test]
fn compare_page_shows_the_baseline_line_beside_the_candidate_in_one_stated_bucket() {
    // The baseline was drawn in the candidate's style underneath it (hidden where
    // they overlap), and TPS over time came in the bootstrap's ~70 ms buckets.
    let b = synth("base", 400, 8, 60.0, 0.0, 1);
    let page = compare_page(&b, &b.clone());
    let tps = &page[page.find("id=\"cmp-tps\"").unwrap()..];
    let tps = &tps[..tps.find("</figure>").unwrap_or(tps.len())];
    // Both lines are drawn, the baseline first (underneath), each with its legend.
    let (lb, lc) = (
        tps.find("<path class=\"line base\""),
        tps.find("<path class=\"line cand\""),
    );
    assert!(lb.is_some() && lc.is_some() && lb < lc, "{lb:?} {lc:?}");
    assert!(tps.contains("(baseline)") && tps.contains("(candidate)"));
    // The styles differ by more than colour: a wide, translucent baseline under a
    // thin candidate, and different dash patterns for their caps.
    for rule in [
        "path.line.base{stroke-width:",
        "path.line.cand{stroke-width:",
        "path.line.base.dashed{stroke-dasharray:",
        "path.line.cand.dashed{stroke-dasharray:",
    ] {
        assert!(page.contains(rule), "missing `{rule}`");
    }
    // One bucket, chosen for reading and stated: the runs span ~200 s, so 5 s
    // (40 steps), where the bootstrap resamples 1 s buckets.
    assert!(tps.contains("per 5 s bucket (baseline)"), "legend");
    assert!(tps.contains("per 5 s bucket (candidate)"), "legend");
    assert!(page.contains("Both runs in 5 s buckets"), "note");
}

#[test]
fn hostile_run_ids_are_escaped() {
    let run = synth("<script>alert(1)</script>", 50, 4, 60.0, 0.0, 3);
    let page = report_page(&[&run]);
    assert!(!page.contains("<script>alert"));
    assert!(page.contains("&lt;script&gt;alert(1)&lt;/script&gt;"));
}

#[test]
fn big_run_page_stays_small_and_says_it_sampled() {
    let run = synth("big", 20_000, 64, 60.0, 0.05, 4);
    let page = report_page(&[&run]);
    save("big.html", &page);
    assert!(page.len() < 3_000_000, "page is {} bytes", page.len());
    assert!(page.contains("A sample: the 1000 requests queued in the middle of the window (numbers 9501–10500 of its 20000 in queue order)"), "waterfall note");
    assert!(page.contains("bin; band: min–max"));
}

#[test]
fn empty_and_multi_run_reports_render() {
    let empty = RunInput {
        run_id: "empty".into(),
        ..RunInput::default()
    };
    let other = synth("two", 60, 4, 60.0, 0.1, 5);
    let page = report_page(&[&empty, &other]);
    assert_self_contained(&page);
    assert!(page.contains("<h2>Run empty</h2>") && page.contains("<h2>Run two</h2>"));
    assert!(
        page.contains("data-empty=\"1\""),
        "the empty run's charts say they are empty"
    );
    assert!(page.contains("no requests in this run"));
}

#[test]
fn report_page_of_a_sweep_shows_its_table_and_knee() {
    let mut runs: Vec<RunInput> = (0..3)
        .map(|i| synth(&format!("c{i}"), 120, 1 << (2 * i), 60.0, 0.0, i as u64))
        .collect();
    for (i, r) in runs.iter_mut().enumerate() {
        if let Some(rec) = r.run.as_mut() {
            rec.load = serde_json::json!({"mode": "closed_loop", "sweep":
                {"parameter": "concurrency", "level": 1 << (2 * i), "index": i, "levels": 3}});
        }
    }
    let reports: Vec<_> = runs.iter().map(|i| analyze(i, &opts())).collect();
    let pairs: Vec<_> = runs.iter().zip(&reports).collect();
    let sweeps = tpscope_analysis::levels::sweep_tables(&pairs, 0.9);
    let report = Report {
        schema: tpscope_analysis::REPORT_SCHEMA,
        runs: reports,
        skipped: Default::default(),
        warnings: vec![],
        sweeps,
    };
    let page = String::from_utf8(html::report(&report, &[])).unwrap();
    assert!(page.contains("Sweep of concurrency: throughput vs latency"));
    assert!(page.contains("knee:") && page.contains("backlog+TTFT p99"));
}

/// One hand-made level of a sweep: throughput rising to a plateau, TTFT climbing.
fn level_row(level: f64, tps: f64, ttft_p50: f64) -> tpscope_analysis::levels::LevelRow {
    tpscope_analysis::levels::LevelRow {
        level,
        run_id: format!("c{level}"),
        ok: 100,
        spans: 100,
        system_tps: Some(tps),
        ttft_p50_s: Some(ttft_p50),
        ttft_p90_s: Some(ttft_p50 * 2.0),
        ttft_p99_s: Some(ttft_p50 * 3.0),
        ttft_user_p99_s: Some(ttft_p50 * 4.0),
        stream_tps_p50: Some(50.0),
        gap_fraction: Some(0.0),
        goodput_rps: Some(2.0),
        goodput_tps: Some(80.0),
        goodput_share: Some(0.95),
        cost_per_million_output_tokens: Some(0.5),
    }
}

#[test]
fn sweep_page_put_its_table_last_cut_off_and_without_a_chart() {
    // `bench --concurrency 1,8,32 --html` put the sweep table under every run's
    // section, with no chart and its right-hand columns cut off.
    let run = synth("c1", 60, 1, 60.0, 0.0, 1);
    let sweep = tpscope_analysis::levels::SweepTable {
        parameter: "concurrency".into(),
        closed_loop: false,
        rows: vec![
            level_row(1.0, 120.0, 0.020),
            level_row(8.0, 900.0, 0.045),
            level_row(32.0, 950.0, 0.300),
        ],
        knee: tpscope_analysis::knee::Knee::At(1),
        knee_level: Some(8.0),
        within_goals: Some(tpscope_analysis::levels::WithinGoals {
            goals: "ttft:500ms".into(),
            slo_share: 0.9,
            level: Some(8.0),
            row: Some(1),
            cost_per_million_output_tokens: Some(0.5),
        }),
    };
    let report = Report {
        schema: tpscope_analysis::REPORT_SCHEMA,
        runs: vec![analyze(&run, &opts())],
        skipped: Default::default(),
        warnings: vec![],
        sweeps: vec![sweep],
    };
    let page = String::from_utf8(html::report(&report, &[])).unwrap();
    save("sweep.html", &page);
    assert_self_contained(&page);
    let first_run = page
        .find("<section id=\"run-0\"")
        .expect("the run's section");
    let sweep_at = page
        .find("<section class=\"sweep\"")
        .expect("the sweep's section");
    assert!(sweep_at < first_run, "the sweep leads the page");
    let sweep = &page[sweep_at..first_run];
    // Both charts, drawn (not empty), before the table.
    let ids = chart_ids(sweep);
    assert_eq!(ids, ["sweep0-tps", "sweep0-ttft"], "{ids:?}");
    assert!(!sweep.contains("data-empty"), "the sweep charts have data");
    assert!(sweep.contains("class=\"line tps\"") && sweep.contains("class=\"line ttft\""));
    assert!(
        sweep.contains("class=\"line ttft dashed\""),
        "TTFT p90 drawn"
    );
    assert!(sweep.find("<svg").unwrap() < sweep.find("<table").unwrap());
    // The knee marked on both charts, and named in the table and the note.
    assert_eq!(sweep.matches("<g class=\"knee\">").count(), 2, "{sweep}");
    assert!(sweep.contains("knee: concurrency 8"));
    assert!(sweep.contains("← knee, highest within goals"));
    assert!(sweep.contains("knee: concurrency 8 — the lowest level"));
    // The table wraps its heads and marks, and scrolls inside its box rather than
    // running off the page.
    assert!(sweep.contains("<div class=\"tablewrap\"><table>"));
    assert!(page.contains(".tablewrap{overflow-x:auto}"));
    assert!(page.contains(".sweep th,.sweep td:last-child{white-space:normal}"));
    assert!(sweep.contains("cost/Mtok") && sweep.contains("met goals %"));

    // Throughput still rising at the top level: no mark, and the charts say why.
    let mut rising = report;
    rising.sweeps[0].knee = tpscope_analysis::knee::Knee::NotReached;
    rising.sweeps[0].knee_level = None;
    let page = String::from_utf8(html::report(&rising, &[])).unwrap();
    assert!(!page.contains("<g class=\"knee\">"));
    assert_eq!(page.matches("knee not reached: sweep higher").count(), 2);
}
