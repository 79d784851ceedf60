//! A load sweep's table (pure): the runs of one sweep, found by their run records'
//! `load.sweep` settings, one row per level from each run's report, the knee, and
//! with goals the highest load that still met them and its cost. `bench` prints it
//! at the end of a sweep and `report` of the sweep's log prints the same value.

use serde::Serialize;

use crate::input::RunInput;
use crate::knee::{Knee, LevelPoint, knee};
use crate::report::RunReport;
use crate::stats::Quantity;

/// One level of a sweep: its run's figures.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct LevelRow {
    /// The level: a concurrency cap or a request rate.
    pub level: f64,
    /// The run measured at it.
    pub run_id: String,
    /// Ok spans in the window.
    pub ok: u64,
    /// All spans in the window.
    pub spans: u64,
    /// System output tokens per second.
    pub system_tps: Option<f64>,
    /// TTFT after admission (`t_first_token`), p50, seconds.
    pub ttft_p50_s: Option<f64>,
    /// TTFT after admission, p90, seconds.
    pub ttft_p90_s: Option<f64>,
    /// TTFT after admission, p99, seconds.
    pub ttft_p99_s: Option<f64>,
    /// `ttft_user` p99 (queue included; in a closed loop, the client's backlog).
    pub ttft_user_p99_s: Option<f64>,
    /// Stream TPS p50.
    pub stream_tps_p50: Option<f64>,
    /// Gap fraction.
    pub gap_fraction: Option<f64>,
    /// Requests per second that met the goals (with goals).
    pub goodput_rps: Option<f64>,
    /// Their output tokens per second (with goals).
    pub goodput_tps: Option<f64>,
    /// The share of requests that met the goals (with goals).
    pub goodput_share: Option<f64>,
    /// Cost per million output tokens (with a price per hour).
    pub cost_per_million_output_tokens: Option<f64>,
}

/// The highest load that still met the goals.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct WithinGoals {
    /// The goals (`ttft:500ms,tpot:50ms`).
    pub goals: String,
    /// The share of a level's requests that must meet them (0.9 for p90).
    pub slo_share: f64,
    /// The highest level at which at least that share met them (`None`: none did).
    pub level: Option<f64>,
    /// Its row.
    pub row: Option<usize>,
    /// Cost per million output tokens at that level (with a price per hour).
    pub cost_per_million_output_tokens: Option<f64>,
}

/// One sweep: a row per level, increasing.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct SweepTable {
    /// `concurrency` or `rate`.
    pub parameter: String,
    /// Whether every level was a closed loop (its queue time is the client's backlog).
    pub closed_loop: bool,
    /// The levels.
    pub rows: Vec<LevelRow>,
    /// The knee (`at` names a row).
    pub knee: Knee,
    /// The knee's level, when there is one.
    pub knee_level: Option<f64>,
    /// With goals: the highest level that met them.
    pub within_goals: Option<WithinGoals>,
}

/// A run's place in a sweep, from its run record.
struct Place {
    parameter: String,
    level: f64,
    index: u64,
    levels: u64,
}

fn place(input: &RunInput) -> Option<Place> {
    let s = input.load_field("sweep")?;
    Some(Place {
        parameter: s.get("parameter")?.as_str()?.to_string(),
        level: s.get("level")?.as_f64()?,
        index: s.get("index")?.as_u64()?,
        levels: s.get("levels")?.as_u64()?,
    })
}

fn p(s: &crate::stats::Summary<std::time::Duration>, q: f64) -> Option<f64> {
    if q == 0.5 { s.p50 } else { s.p99 }.map(Quantity::to_f64)
}

fn row(level: f64, r: &RunReport) -> LevelRow {
    let d = &r.distributions;
    LevelRow {
        level,
        run_id: r.run_id.clone(),
        ok: r.counts.status.ok,
        spans: r.counts.spans,
        system_tps: r.system_tps.map(|t| t.0),
        ttft_p50_s: p(&d.t_first_token, 0.5),
        ttft_p90_s: p(&d.t_first_token, 0.9),
        ttft_p99_s: p(&d.t_first_token, 0.99),
        ttft_user_p99_s: p(&d.ttft_user, 0.99),
        stream_tps_p50: d.stream_tps.p50.map(|t| t.0),
        gap_fraction: r.gap_fraction,
        goodput_rps: r.goodput.as_ref().and_then(|g| g.requests_per_second),
        goodput_tps: r
            .goodput
            .as_ref()
            .and_then(|g| g.output_tokens_per_second.map(|t| t.0)),
        goodput_share: r.goodput.as_ref().and_then(|g| g.share),
        cost_per_million_output_tokens: r.cost.as_ref().and_then(|c| c.per_million_output_tokens),
    }
}

/// The tables of the sweeps among `runs` (each input with its report, in log
/// order): consecutive runs of one parameter whose sweep index rises form one
/// sweep. A level meets the goals when at least `slo_share` of its requests did.
pub fn sweep_tables(runs: &[(&RunInput, &RunReport)], slo_share: f64) -> Vec<SweepTable> {
    /// The runs of one sweep so far, and the last index seen.
    struct Group<'a> {
        parameter: String,
        levels: u64,
        last: u64,
        rows: Vec<(f64, &'a RunReport)>,
    }
    let mut groups: Vec<Group<'_>> = Vec::new();
    for (input, report) in runs {
        let Some(pl) = place(input) else { continue };
        match groups.last_mut() {
            Some(g)
                if g.parameter == pl.parameter && g.levels == pl.levels && pl.index > g.last =>
            {
                g.last = pl.index;
                g.rows.push((pl.level, report));
            }
            _ => groups.push(Group {
                parameter: pl.parameter,
                levels: pl.levels,
                last: pl.index,
                rows: vec![(pl.level, report)],
            }),
        }
    }
    groups
        .into_iter()
        .filter(|g| g.levels > 1)
        .map(|mut g| {
            g.rows.sort_by(|a, b| a.0.total_cmp(&b.0));
            table(g.parameter, &g.rows, slo_share)
        })
        .collect()
}

fn table(parameter: String, levels: &[(f64, &RunReport)], slo_share: f64) -> SweepTable {
    let rows: Vec<LevelRow> = levels.iter().map(|(l, r)| row(*l, r)).collect();
    let points: Vec<LevelPoint> = rows
        .iter()
        .map(|r| LevelPoint {
            level: r.level,
            system_tps: r.system_tps,
            latency_s: r.ttft_p99_s,
        })
        .collect();
    let k = knee(&points);
    let within_goals = levels
        .iter()
        .find_map(|(_, r)| r.goodput.as_ref())
        .map(|g| {
            // Shares are compared with a little slack so that 9 of 10 meets 90 %.
            let best = rows
                .iter()
                .rposition(|r| r.goodput_share.is_some_and(|s| s >= slo_share - 1e-12));
            WithinGoals {
                goals: g.goals_text.clone(),
                slo_share,
                level: best.map(|i| rows[i].level),
                row: best,
                cost_per_million_output_tokens: best
                    .and_then(|i| rows[i].cost_per_million_output_tokens),
            }
        });
    SweepTable {
        parameter,
        closed_loop: levels.iter().all(|(_, r)| r.closed_loop),
        knee_level: match k {
            Knee::At(i) => rows.get(i).map(|r| r.level),
            _ => None,
        },
        knee: k,
        rows,
        within_goals,
    }
}

/// Every run of a sweep above its knee: its diagnosis never advises raising
/// the cap ([`crate::diagnosis::above_knee`]).
pub fn apply_knees(runs: &mut [RunReport], sweeps: &[SweepTable]) {
    for t in sweeps {
        let Some(knee) = t.knee_level else { continue };
        for row in t.rows.iter().filter(|r| r.level > knee) {
            let run = runs.iter_mut().find(|r| r.run_id == row.run_id);
            if let Some(d) = run.and_then(|r| r.diagnosis.as_mut()) {
                crate::diagnosis::above_knee(d, row.level, knee);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::goodput::parse_goals;
    use crate::input::SpanFacts;
    use crate::test_support::{capped_run, ts};
    use crate::{Options, analyze};

    /// A closed-loop sweep level: `n` requests through `cap` slots, each taking
    /// `first` ms to its first token and 200 ms in all.
    fn level(i: u64, cap: u32, first: i64) -> RunInput {
        level_taking(i, cap, first, 200, 20)
    }

    /// The same with `n` requests, each taking `hold` ms in all.
    fn level_taking(i: u64, cap: u32, first: i64, hold: i64, n: i64) -> RunInput {
        let mut input = capped_run(cap);
        input.run_id = format!("r{i}");
        if let Some(r) = input.run.as_mut() {
            r.load = serde_json::json!({
                "mode": "closed_loop",
                "sweep": {"parameter": "concurrency", "level": cap, "index": i, "levels": 3}
            });
        }
        for k in 0..n {
            let a = (k / i64::from(cap)) * hold;
            input.push_span(
                SpanFacts::ok(
                    ts(0),
                    Some(ts(a)),
                    Some(ts(a + first)),
                    Some(ts(a + hold - 1)),
                    ts(a + hold),
                    50,
                ),
                None,
            );
        }
        input
    }

    #[test]
    fn the_highest_level_meeting_the_goals_for_the_slo_share_is_named() {
        let inputs = [level(0, 1, 20), level(1, 4, 60), level(2, 16, 150)];
        let mut opts = Options {
            goals: Some(parse_goals("ttft:100ms").unwrap()),
            ..Options::default()
        };
        opts.prices.per_hour = Some(2.0);
        let reports: Vec<RunReport> = inputs.iter().map(|i| analyze(i, &opts)).collect();
        let runs: Vec<_> = inputs.iter().zip(&reports).collect();
        let t = sweep_tables(&runs, 0.9);
        assert_eq!(t.len(), 1);
        let t = &t[0];
        assert_eq!(t.parameter, "concurrency");
        assert!(t.closed_loop);
        assert_eq!(
            t.rows.iter().map(|r| r.level).collect::<Vec<_>>(),
            [1.0, 4.0, 16.0]
        );
        let w = t.within_goals.as_ref().unwrap();
        assert_eq!((w.level, w.row), (Some(4.0), Some(1)));
        assert_eq!(w.goals, "ttft:100ms");
        assert_eq!(
            w.cost_per_million_output_tokens,
            reports[1].cost.as_ref().unwrap().per_million_output_tokens
        );
        assert!(w.cost_per_million_output_tokens.is_some());
        // Without goals there is no such line; a run outside any sweep is no table.
        let plain: Vec<RunReport> = inputs
            .iter()
            .map(|i| analyze(i, &Options::default()))
            .collect();
        let runs: Vec<_> = inputs.iter().zip(&plain).collect();
        assert_eq!(sweep_tables(&runs, 0.9)[0].within_goals, None);
        let lone = capped_run(2);
        let r = analyze(&lone, &Options::default());
        assert!(sweep_tables(&[(&lone, &r)], 0.9).is_empty());
    }

    #[test]
    fn two_sweeps_in_one_log_are_two_tables() {
        let a = [level(0, 1, 20), level(1, 4, 60), level(2, 16, 150)];
        let opts = Options::default();
        let reports: Vec<RunReport> = a.iter().chain(&a).map(|i| analyze(i, &opts)).collect();
        let runs: Vec<_> = a.iter().chain(&a).zip(&reports).collect();
        let t = sweep_tables(&runs, 0.9);
        assert_eq!(t.len(), 2);
        assert!(t.iter().all(|t| t.rows.len() == 3));
    }

    /// A level above the sweep's knee (16 slots, each request 4.5 times as
    /// slow as at 4: less throughput) never advises raising the cap; the knee's
    /// own level keeps its diagnosis.
    #[test]
    fn above_the_knee_no_run_of_the_sweep_is_told_to_raise_its_cap() {
        let mut inputs = [
            level(0, 1, 20),
            level(1, 4, 60),
            level_taking(2, 16, 150, 900, 64),
        ];
        // The server's gauges say it ran every request the client held: at the
        // cap with work waiting, on its own, that would be the client's cap.
        inputs[2].server_samples = vec![tpscope_model::ServerSampleRecord {
            run_id: "r2".into(),
            at: ts(0),
            running: Some(16.0),
            waiting: Some(0.0),
            kv_cache_usage: Some(0.1),
            preemptions_total: Some(0.0),
            ..Default::default()
        }];
        let opts = Options::default();
        let mut reports: Vec<RunReport> = inputs.iter().map(|i| analyze(i, &opts)).collect();
        let runs: Vec<_> = inputs.iter().zip(&reports).collect();
        let t = sweep_tables(&runs, 0.9);
        assert_eq!(t[0].knee_level, Some(4.0), "{:?}", t[0].knee);
        let at_knee = reports[1].diagnosis.clone();
        let before = reports[2].diagnosis.as_ref().unwrap();
        assert_eq!(before.limit, Some(crate::diagnosis::State::ClientCap));
        assert!(
            before.sentence.contains("raise the client's cap"),
            "{before:?}"
        );
        apply_knees(&mut reports, &t);
        let above = reports[2].diagnosis.as_ref().unwrap();
        assert!(
            above.sentence.contains("above the sweep's knee (4)"),
            "{above:?}"
        );
        assert!(
            !above.sentence.contains("raise the client's cap"),
            "{above:?}"
        );
        assert_eq!(reports[1].diagnosis, at_knee);
    }
}
