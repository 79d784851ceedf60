//! Each acceptance criterion's verdict on hand-made runs: a clear win, a clear loss,
//! a noise-level difference (inconclusive), and a baseline without backlog (the gap
//! criterion is skipped); the mismatch check; determinism for a seed.

use std::time::Duration;

use tpscope_analysis::compare::{
    CompareConfig, CompareError, Criterion, RunRef, Thresholds, Verdict, check_mismatch, compare,
};
use tpscope_analysis::stats::bootstrap::{BootstrapConfig, SplitMix64};
use tpscope_analysis::{Options, RunInput, SpanFacts};
use tpscope_model::{Cause, RunRecord, SCHEMA, Status, Target, Timestamp, TokenSource};

/// How a synthetic closed-loop run behaves.
#[derive(Clone, Copy)]
struct Load {
    requests: usize,
    cap: u32,
    /// Seconds between arrivals (0: everything queued at the start).
    arrival_every: f64,
    /// Mean stream rate per request (tokens/s).
    stream_tps: f64,
    /// Seconds a freed slot stays idle before the next request takes it (the
    /// orchestration gap that `gap_fraction` measures).
    refill_delay: f64,
    /// Probability that a request fails.
    error_p: f64,
    /// Probability of each of up to two retries.
    retry_p: f64,
    seed: u64,
}

impl Default for Load {
    fn default() -> Self {
        Load {
            requests: 600,
            cap: 8,
            arrival_every: 0.0,
            stream_tps: 50.0,
            refill_delay: 0.0,
            error_p: 0.0,
            retry_p: 0.0,
            seed: 1,
        }
    }
}

fn ts(secs: f64) -> Timestamp {
    Timestamp::from_unix_nanos(1_800_000_000_000_000_000 + (secs * 1e9).round() as i64)
}

fn run_record(id: &str, cap: u32, model: &str, source: TokenSource) -> RunRecord {
    RunRecord {
        run_id: id.into(),
        schema: SCHEMA.into(),
        tool: "test".into(),
        started_at: ts(0.0),
        target: Target {
            url: None,
            model: Some(model.into()),
            api: Some("chat".into()),
        },
        cap: Some(cap),
        token_source: Some(source),
        tokenizer: None,
        sample_interval: None,
        sample_heartbeat: None,
        load: serde_json::Value::Null,
        labels: Default::default(),
        queue_times: Default::default(),
    }
}

/// A run of `load.requests` requests through `load.cap` slots, each slot refilled
/// `refill_delay` after it frees; lengths, rates and failures drawn from the seed.
fn synth(id: &str, load: Load) -> RunInput {
    let mut rng = SplitMix64::new(load.seed);
    let mut input = RunInput {
        run_id: id.into(),
        run: Some(run_record(id, load.cap, "m", TokenSource::Usage)),
        ..RunInput::default()
    };
    let mut slots = vec![0.0f64; load.cap as usize];
    for i in 0..load.requests {
        let queued = i as f64 * load.arrival_every;
        let (slot, free) = slots
            .iter()
            .copied()
            .enumerate()
            .min_by(|a, b| a.1.total_cmp(&b.1))
            .unwrap();
        let admitted = queued.max(free + if free > 0.0 { load.refill_delay } else { 0.0 });
        let tokens = 100 + rng.below(200) as u64;
        let rate = load.stream_tps * (0.7 + 0.6 * rng.unit_f64());
        let ttft = 0.05 + 0.1 * rng.unit_f64();
        let first = admitted + ttft;
        let last = first + tokens as f64 / rate;
        let released = last + 0.002;
        let failed = rng.unit_f64() < load.error_p;
        let retries = (0..2).filter(|_| rng.unit_f64() < load.retry_p).count() as u32;
        slots[slot] = released;
        let facts = SpanFacts {
            status: if failed { Status::Error } else { Status::Ok },
            error_cause: failed.then_some(Cause::Http5xx),
            queued_at: ts(queued),
            admitted_at: Some(ts(admitted)),
            first_token_at: Some(ts(first)),
            last_token_at: Some(ts(last)),
            released_at: ts(released),
            output_tokens: tokens,
            input_tokens: Some(50),
            retry_count: retries,
            retry_causes: vec![Cause::Http429; retries as usize].into(),
            wasted_tokens: 0,
            client: Default::default(),
            chunks: None,
            session: None,
        };
        input.push_span(facts, None);
    }
    input
}

fn cfg(seed: u64) -> CompareConfig {
    CompareConfig {
        thresholds: Thresholds::default(),
        bootstrap: BootstrapConfig {
            resamples: 1000,
            seed,
            level: 0.95,
        },
        allow_mismatch: false,
    }
}

fn run(base: &RunInput, cand: &RunInput) -> tpscope_analysis::compare::Comparison {
    compare(
        RunRef {
            input: base,
            source: "base.jsonl",
        },
        RunRef {
            input: cand,
            source: "cand.jsonl",
        },
        &Options::default(),
        &cfg(7),
    )
    .expect("comparable")
    .comparison
}

fn verdict(c: &tpscope_analysis::compare::Comparison, k: Criterion) -> Verdict {
    c.criterion(k).unwrap().verdict
}

#[test]
fn clear_win_passes_every_criterion() {
    let base = synth(
        "b",
        Load {
            refill_delay: 0.3,
            error_p: 0.05,
            retry_p: 0.1,
            ..Load::default()
        },
    );
    let cand = synth(
        "c",
        Load {
            stream_tps: 90.0,
            refill_delay: 0.0,
            error_p: 0.0,
            retry_p: 0.0,
            seed: 2,
            ..Load::default()
        },
    );
    let c = run(&base, &cand);
    for k in [
        Criterion::SystemTps,
        Criterion::SuccessRate,
        Criterion::GapFraction,
        Criterion::RetryRate,
    ] {
        assert_eq!(
            verdict(&c, k),
            Verdict::Pass,
            "{k:?}: {:#?}",
            c.criterion(k)
        );
    }
    assert_eq!(c.overall, Verdict::Pass);
    let tps = c.criterion(Criterion::SystemTps).unwrap();
    let iv = tps.interval.unwrap();
    assert!(iv.low > 0.3 && iv.contains(tps.change.unwrap()), "{tps:#?}");
}

#[test]
fn clear_loss_fails_every_criterion() {
    let base = synth(
        "b",
        Load {
            refill_delay: 0.0,
            ..Load::default()
        },
    );
    let cand = synth(
        "c",
        Load {
            stream_tps: 25.0,
            refill_delay: 0.5,
            error_p: 0.15,
            retry_p: 0.3,
            seed: 2,
            ..Load::default()
        },
    );
    let c = run(&base, &cand);
    for k in [
        Criterion::SystemTps,
        Criterion::GapFraction,
        Criterion::SuccessRate,
        Criterion::RetryRate,
    ] {
        assert_eq!(
            verdict(&c, k),
            Verdict::Fail,
            "{k:?}: {:#?}",
            c.criterion(k)
        );
    }
    assert_eq!(c.overall, Verdict::Fail);

    // With a baseline that has gaps, a candidate with larger gaps fails the gap criterion.
    let base = synth(
        "b",
        Load {
            refill_delay: 0.1,
            ..Load::default()
        },
    );
    let cand = synth(
        "c",
        Load {
            refill_delay: 0.6,
            seed: 2,
            ..Load::default()
        },
    );
    assert_eq!(
        verdict(&run(&base, &cand), Criterion::GapFraction),
        Verdict::Fail
    );
}

#[test]
fn noise_level_difference_is_inconclusive() {
    let base = synth(
        "b",
        Load {
            refill_delay: 0.1,
            error_p: 0.05,
            retry_p: 0.1,
            seed: 11,
            ..Load::default()
        },
    );
    let cand = synth(
        "c",
        Load {
            refill_delay: 0.1,
            error_p: 0.05,
            retry_p: 0.1,
            seed: 12,
            ..Load::default()
        },
    );
    let c = compare(
        RunRef {
            input: &base,
            source: "b",
        },
        RunRef {
            input: &cand,
            source: "c",
        },
        &Options::default(),
        &CompareConfig {
            thresholds: Thresholds {
                max_success_drop: 0.0,
                max_retry_rise: 0.0,
                ..Thresholds::default()
            },
            ..cfg(3)
        },
    )
    .unwrap()
    .comparison;
    for k in [
        Criterion::SystemTps,
        Criterion::SuccessRate,
        Criterion::GapFraction,
        Criterion::RetryRate,
    ] {
        let r = c.criterion(k).unwrap();
        assert_eq!(r.verdict, Verdict::Inconclusive, "{k:?}: {r:#?}");
        assert!(r.interval.unwrap().contains(r.threshold), "{r:#?}");
    }
    assert_eq!(c.overall, Verdict::Inconclusive);
}

#[test]
fn no_backlog_skips_the_gap_criterion() {
    // Arrivals slower than service: nothing ever waits for a slot.
    let base = synth(
        "b",
        Load {
            arrival_every: 2.0,
            requests: 200,
            ..Load::default()
        },
    );
    let cand = synth(
        "c",
        Load {
            arrival_every: 2.0,
            requests: 200,
            stream_tps: 80.0,
            seed: 5,
            ..Load::default()
        },
    );
    let c = run(&base, &cand);
    let gap = c.criterion(Criterion::GapFraction).unwrap();
    assert_eq!(gap.verdict, Verdict::Skipped);
    assert!(
        gap.reason.contains("neither run had a backlog"),
        "{}",
        gap.reason
    );
    assert_eq!(gap.baseline, Some(0.0));
    // Skipped criteria do not decide the overall verdict.
    assert_ne!(c.overall, Verdict::Skipped);
}

#[test]
fn identical_runs_pass_the_does_not_worsen_criteria() {
    let base = synth(
        "b",
        Load {
            refill_delay: 0.2,
            ..Load::default()
        },
    );
    let c = run(&base, &base.clone());
    assert_eq!(verdict(&c, Criterion::SuccessRate), Verdict::Pass);
    assert_eq!(verdict(&c, Criterion::RetryRate), Verdict::Pass);
    // Resampled independently, the TPS interval of a run against itself spans 0.
    assert_eq!(verdict(&c, Criterion::SystemTps), Verdict::Inconclusive);
}

#[test]
fn too_few_spans_give_no_interval() {
    let base = synth(
        "b",
        Load {
            requests: 5,
            ..Load::default()
        },
    );
    let cand = synth(
        "c",
        Load {
            requests: 5,
            seed: 3,
            ..Load::default()
        },
    );
    let c = run(&base, &cand);
    let r = c.criterion(Criterion::SuccessRate).unwrap();
    assert_eq!(r.verdict, Verdict::Inconclusive);
    assert!(r.reason.contains("too few spans"), "{}", r.reason);
}

#[test]
fn same_seed_same_intervals() {
    let base = synth(
        "b",
        Load {
            refill_delay: 0.1,
            error_p: 0.05,
            ..Load::default()
        },
    );
    let cand = synth(
        "c",
        Load {
            refill_delay: 0.05,
            error_p: 0.04,
            seed: 9,
            ..Load::default()
        },
    );
    let a = run(&base, &cand);
    let b = run(&base, &cand);
    assert_eq!(a, b);
    let other = compare(
        RunRef {
            input: &base,
            source: "b",
        },
        RunRef {
            input: &cand,
            source: "c",
        },
        &Options::default(),
        &cfg(8),
    )
    .unwrap()
    .comparison;
    assert_ne!(
        a.criterion(Criterion::SystemTps).unwrap().interval,
        other.criterion(Criterion::SystemTps).unwrap().interval
    );
}

#[test]
fn mismatched_token_source_model_or_tokenizer_is_refused_naming_both_values() {
    let base = synth("b", Load::default());
    let mut cand = synth(
        "c",
        Load {
            seed: 2,
            ..Load::default()
        },
    );
    let rec = cand.run.as_mut().unwrap();
    rec.token_source = Some(TokenSource::Chunks);
    rec.target.model = Some("other-model".into());
    let m = check_mismatch(&base, &cand);
    let whats: Vec<_> = m.iter().map(|m| m.what).collect();
    assert_eq!(whats, vec!["token source", "model"]);
    let err = compare(
        RunRef {
            input: &base,
            source: "b",
        },
        RunRef {
            input: &cand,
            source: "c",
        },
        &Options::default(),
        &cfg(1),
    )
    .unwrap_err();
    let CompareError::Mismatch(_) = &err else {
        panic!("{err:?}")
    };
    let msg = err.to_string();
    assert!(msg.contains("usage") && msg.contains("chunks"), "{msg}");
    assert!(
        msg.contains("baseline m") && msg.contains("candidate other-model"),
        "{msg}"
    );

    // Allowed: judged, and the mismatches are listed.
    let ok = compare(
        RunRef {
            input: &base,
            source: "b",
        },
        RunRef {
            input: &cand,
            source: "c",
        },
        &Options::default(),
        &CompareConfig {
            allow_mismatch: true,
            ..cfg(1)
        },
    )
    .unwrap()
    .comparison;
    assert_eq!(ok.mismatches.len(), 2);

    // Two tokenizers by name.
    let mut tb = synth("b", Load::default());
    tb.run.as_mut().unwrap().token_source = Some(TokenSource::Tokenizer("o200k_base".into()));
    let mut tc = synth("c", Load::default());
    tc.run.as_mut().unwrap().token_source = Some(TokenSource::Tokenizer("cl100k_base".into()));
    let m = check_mismatch(&tb, &tc);
    assert_eq!(m.len(), 1);
    assert_eq!(
        (m[0].what, m[0].baseline.as_str(), m[0].candidate.as_str()),
        ("tokenizer", "o200k_base", "cl100k_base")
    );
}

#[test]
fn bad_bootstrap_settings_are_refused() {
    let base = synth("b", Load::default());
    let mut c = cfg(1);
    c.bootstrap.resamples = 0;
    let e = compare(
        RunRef {
            input: &base,
            source: "b",
        },
        RunRef {
            input: &base,
            source: "b",
        },
        &Options::default(),
        &c,
    );
    assert!(matches!(e, Err(CompareError::Config(_))));
}

#[test]
fn bucket_tracks_the_run_extent() {
    let short = synth(
        "s",
        Load {
            requests: 40,
            ..Load::default()
        },
    );
    let b = tpscope_analysis::compare::bootstrap_bucket(&short);
    assert!(
        b < Duration::from_secs(1) && b >= Duration::from_millis(1),
        "{b:?}"
    );
    let long = synth(
        "l",
        Load {
            requests: 200,
            arrival_every: 2.0,
            ..Load::default()
        },
    );
    assert_eq!(
        tpscope_analysis::compare::bootstrap_bucket(&long),
        Duration::from_secs(1)
    );
}

#[test]
fn gap_rise_from_a_baseline_of_zero_fails() {
    // What broke: a baseline that refills instantly has a backlog but no gap; a
    // candidate that leaves slots idle half the time was skipped ("nothing to
    // drop") and so could never fail. A rise from 0 is a failure.
    let base = synth("b", Load::default());
    let cand = synth(
        "c",
        Load {
            refill_delay: 0.5,
            seed: 2,
            ..Load::default()
        },
    );
    let c = run(&base, &cand);
    assert!(
        !c.warnings.iter().any(|w| w.contains("same run")),
        "{:?}",
        c.warnings
    );
    let gap = c.criterion(Criterion::GapFraction).unwrap();
    assert_eq!(gap.baseline, Some(0.0), "{gap:#?}");
    assert!(gap.candidate.unwrap() > 0.2, "{gap:#?}");
    assert_eq!(gap.verdict, Verdict::Fail, "{gap:#?}");
    assert_eq!(c.overall, Verdict::Fail);

    // The same holds when the baseline never had a backlog at all but the
    // candidate did: judged, since either run had one.
    let idle = synth(
        "b",
        Load {
            arrival_every: 2.0,
            requests: 200,
            ..Load::default()
        },
    );
    assert_eq!(
        verdict(&run(&idle, &cand), Criterion::GapFraction),
        Verdict::Fail
    );

    // Two runs with a backlog and no gap at all: nothing to drop, not judged.
    let again = synth(
        "c",
        Load {
            seed: 3,
            ..Load::default()
        },
    );
    let gap = run(&base, &again);
    let gap = gap.criterion(Criterion::GapFraction).unwrap();
    assert_eq!(gap.verdict, Verdict::Skipped, "{gap:#?}");
    assert!(
        gap.reason.contains("no gap time") || gap.reason.contains("neither run had gap"),
        "{}",
        gap.reason
    );
}

#[test]
fn failures_without_tokens_do_not_make_a_run_mixed_or_refused() {
    // What broke: failed spans were logged with token source `chunks` and cancelled
    // ones with `usage`, so any run with failures warned "different sources" and
    // `compare` refused it against a clean run ("token source differs"). The run's
    // source is decided by its ok spans (docs/design.md §4).
    let base = synth("b", Load::default());
    let mut cand = synth(
        "c",
        Load {
            seed: 2,
            ..Load::default()
        },
    );
    let t = ts(1.0);
    let failed = |status, cause, tokens: u64| SpanFacts {
        status,
        error_cause: Some(cause),
        queued_at: t,
        admitted_at: Some(t),
        first_token_at: (tokens > 0).then_some(t),
        last_token_at: (tokens > 0).then_some(t),
        released_at: ts(1.5),
        output_tokens: tokens,
        input_tokens: None,
        retry_count: 0,
        retry_causes: Box::default(),
        wasted_tokens: 0,
        client: Default::default(),
        chunks: None,
        session: None,
    };
    let push = |input: &mut RunInput, spans: &[(Status, Cause, u64, TokenSource)]| {
        for (status, cause, tokens, source) in spans {
            input.push_span(failed(*status, *cause, *tokens), Some(source));
        }
    };
    for _ in 0..5 {
        // Even a failure that received tokens, counted from chunks, leaves the run's
        // source to its ok spans.
        push(
            &mut cand,
            &[
                (Status::Error, Cause::Http5xx, 0, TokenSource::Chunks),
                (Status::Cancelled, Cause::Cancelled, 0, TokenSource::Usage),
                (Status::Error, Cause::Disconnect, 7, TokenSource::Chunks),
            ],
        );
    }
    assert_eq!(
        cand.effective_token_sources(),
        vec![(TokenSource::Usage, 600)]
    );
    assert!(check_mismatch(&base, &cand).is_empty());
    let c = run(&base, &cand);
    assert!(
        !c.warnings.iter().any(|w| w.contains("different sources")),
        "{:?}",
        c.warnings
    );

    // A run where nothing succeeded is named by the spans that received tokens.
    let mut none_ok = RunInput {
        run_id: "f".into(),
        ..RunInput::default()
    };
    push(
        &mut none_ok,
        &[
            (Status::Error, Cause::Http4xx, 0, TokenSource::Usage),
            (Status::Error, Cause::Disconnect, 3, TokenSource::Chunks),
        ],
    );
    assert_eq!(
        none_ok.effective_token_sources(),
        vec![(TokenSource::Chunks, 1)]
    );
}

#[test]
fn comparing_a_run_with_itself_warns() {
    // What broke: `compare run.jsonl run.jsonl` judged resampling noise without a word.
    let base = synth("b", Load::default());
    let c = run(&base, &base.clone());
    assert!(
        c.warnings.iter().any(|w| w.contains("the same run (`b`)")),
        "{:?}",
        c.warnings
    );
}

#[test]
fn goodput_is_a_fifth_criterion_only_when_goals_are_given() {
    let base = synth("b", Load::default());
    let slower = synth(
        "c",
        Load {
            stream_tps: 25.0,
            seed: 2,
            ..Load::default()
        },
    );
    let judge = |cand: &RunInput, goals: Option<&str>| {
        compare(
            RunRef {
                input: &base,
                source: "b",
            },
            RunRef {
                input: cand,
                source: "c",
            },
            &Options {
                goals: goals.map(|g| tpscope_analysis::parse_goals(g).unwrap()),
                ..Options::default()
            },
            &cfg(5),
        )
        .unwrap()
        .comparison
    };
    // Without goals: the four criteria and no other.
    let c = judge(&slower, None);
    assert_eq!(c.criteria.len(), 4);
    assert!(c.criterion(Criterion::Goodput).is_none());
    // With goals, a candidate whose requests take twice as long fails it.
    let c = judge(&slower, Some("e2e:5s"));
    let g = c.criterion(Criterion::Goodput).unwrap();
    assert_eq!(c.criteria.len(), 5);
    assert_eq!(g.verdict, Verdict::Fail, "{g:#?}");
    assert!(g.baseline.unwrap() > g.candidate.unwrap());
    assert!(g.interval.unwrap().contains(g.change.unwrap()));
    // A like-for-like candidate is not failed by it.
    let same = synth(
        "c",
        Load {
            seed: 2,
            ..Load::default()
        },
    );
    let c = judge(&same, Some("e2e:5s"));
    assert_ne!(verdict(&c, Criterion::Goodput), Verdict::Fail);
}

/// Two identical runs were judged FAIL (exit 1) when the second ran during a CPU
/// spike: a poorly measured run makes the verdict inconclusive.
#[test]
fn a_loss_measured_poorly_was_judged_fail_not_inconclusive() {
    let base = synth(
        "b",
        Load {
            refill_delay: 0.0,
            ..Load::default()
        },
    );
    let mut cand = synth(
        "c",
        Load {
            stream_tps: 25.0,
            refill_delay: 0.5,
            seed: 2,
            ..Load::default()
        },
    );
    assert_eq!(run(&base, &cand).overall, Verdict::Fail);
    // Its first tokens were stamped late: measurement quality is poor.
    cand.client_stamps = vec![
        tpscope_analysis::ClientStamps {
            first_token_exact: Some(false),
            ..Default::default()
        };
        cand.spans.len()
    ];
    let c = run(&base, &cand);
    assert_eq!(c.overall, Verdict::Inconclusive);
    assert!(
        c.warnings
            .iter()
            .any(|w| w.contains("inconclusive: the candidate was measured poorly")),
        "{:?}",
        c.warnings
    );
}

/// Same seed, different workload: the server chose where replies end, and the
/// comparison said nothing about it.
#[test]
fn runs_whose_output_tokens_differ_are_said_to_compare_different_workloads() {
    let base = synth("b", Load::default());
    let mut cand = synth("c", Load::default());
    let c = run(&base, &cand);
    assert!(!c.warnings.iter().any(|w| w.contains("workloads differ")));
    for s in cand.spans.iter_mut().step_by(2) {
        s.output_tokens += 40;
    }
    let c = run(&base, &cand);
    assert!(
        c.warnings
            .iter()
            .any(|w| w.starts_with("the workloads differ:") && w.contains("(EOS)")),
        "{:?}",
        c.warnings
    );
}
