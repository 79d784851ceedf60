//! A load sweep's table (throughput against latency, one row per level), its knee
//! and, with goals, the highest load within them: the same cells for `bench` at the
//! end of a sweep and for `report` of the sweep's log, as text or markdown.

use std::fmt::Write;

use tpscope_analysis::knee::{KNEE_SHARE, Knee};
use tpscope_analysis::levels::SweepTable;

use crate::fmt::{md_table, or_dash, rate, text_table};

fn num(v: Option<f64>, scale: f64, digits: usize) -> String {
    or_dash(v.map(|v| format!("{:.*}", digits, v * scale)))
}

/// The level as written in the sweep (`8`, `2.5`).
fn level(v: f64) -> String {
    format!("{v}")
}

/// Column heads and one row of cells per level. TTFT after admission leads; the
/// queue-inclusive TTFT is named the client's backlog in a closed loop.
pub fn cells(t: &SweepTable) -> (Vec<String>, Vec<Vec<String>>) {
    let goals = t.within_goals.is_some();
    let priced = t
        .rows
        .iter()
        .any(|r| r.cost_per_million_output_tokens.is_some());
    let mut heads: Vec<String> = [
        t.parameter.as_str(),
        "ok/spans",
        "system tok/s",
        "TTFT p50",
        "TTFT p99",
        if t.closed_loop {
            "backlog+TTFT p99"
        } else {
            "TTFT user p99"
        },
        "stream tok/s p50",
        "gap %",
    ]
    .map(String::from)
    .to_vec();
    if goals {
        heads.extend(["goodput req/s", "goodput tok/s", "met goals %"].map(String::from));
    }
    if priced {
        heads.push("cost/Mtok".into());
    }
    heads.push(String::new());
    let mut rows: Vec<Vec<String>> = t
        .rows
        .iter()
        .enumerate()
        .map(|(i, r)| {
            let mut v = vec![
                level(r.level),
                format!("{}/{}", r.ok, r.spans),
                or_dash(r.system_tps.map(|v| format!("{v:.0}"))),
                num(r.ttft_p50_s, 1.0, 3) + " s",
                num(r.ttft_p99_s, 1.0, 3) + " s",
                num(r.ttft_user_p99_s, 1.0, 3) + " s",
                or_dash(r.stream_tps_p50.map(rate)),
                num(r.gap_fraction, 100.0, 2),
            ];
            if goals {
                v.push(num(r.goodput_rps, 1.0, 3));
                v.push(or_dash(r.goodput_tps.map(|v| format!("{v:.0}"))));
                v.push(num(r.goodput_share, 100.0, 1));
            }
            if priced {
                v.push(num(r.cost_per_million_output_tokens, 1.0, 4));
            }
            let mut mark = Vec::new();
            if t.knee == Knee::At(i) {
                mark.push("knee");
            }
            if t.within_goals.as_ref().and_then(|w| w.row) == Some(i) {
                mark.push("highest within goals");
            }
            v.push(if mark.is_empty() {
                String::new()
            } else {
                format!("← {}", mark.join(", "))
            });
            v
        })
        .collect();
    // The marks read left-aligned: padded to one width (text tables trim the end).
    let w = rows
        .iter()
        .filter_map(|r| r.last())
        .map(|m| m.chars().count())
        .max()
        .unwrap_or(0);
    for r in &mut rows {
        if let Some(m) = r.last_mut() {
            let pad = w - m.chars().count();
            m.push_str(&" ".repeat(pad));
        }
    }
    (heads, rows)
}

/// The sentences under the table: the knee, the highest load within the goals,
/// and in a closed loop what the queue-inclusive column is.
pub fn lines(t: &SweepTable) -> Vec<String> {
    let p = &t.parameter;
    let mut out = vec![match (&t.knee, t.knee_level) {
        (Knee::At(_), Some(l)) => format!(
            "knee: {p} {} — the lowest level reaching {:.0}% of the best throughput; higher levels mostly add latency.",
            level(l),
            KNEE_SHARE * 100.0
        ),
        (Knee::NotReached, _) => {
            "knee: not reached — throughput was still rising at the highest level; sweep higher."
                .to_string()
        }
        _ => "knee: unknown — fewer than two levels produced a throughput.".to_string(),
    }];
    if let Some(w) = &t.within_goals {
        let share = format!("{:.0}%", w.slo_share * 100.0);
        out.push(match (w.level, w.row.and_then(|i| t.rows.get(i))) {
            (Some(l), Some(r)) => format!(
                "within goals ({}) for {share} of requests: up to {p} {} — goodput {} req/s, {} tok/s{}.",
                w.goals,
                level(l),
                num(r.goodput_rps, 1.0, 3),
                or_dash(r.goodput_tps.map(|v| format!("{v:.0}"))),
                w.cost_per_million_output_tokens
                    .map(|c| format!(", {c:.4} per million output tokens"))
                    .unwrap_or_default()
            ),
            _ => format!(
                "within goals ({}) for {share} of requests: no level — every level missed them.",
                w.goals
            ),
        });
    }
    if t.closed_loop {
        out.push(
            "closed loop: every request was ready at the start, so backlog+TTFT is the client's own \
             backlog plus TTFT, not what a user of the server waits; TTFT is from admission."
                .to_string(),
        );
    }
    out
}

/// The sweep tables as text, each with its title, knee and notes.
pub fn text(tables: &[SweepTable]) -> String {
    let mut o = String::new();
    for (i, t) in tables.iter().enumerate() {
        if i > 0 {
            o.push('\n');
        }
        let _ = writeln!(
            o,
            "Sweep of {}: throughput vs latency (one run per level)",
            t.parameter
        );
        let (heads, rows) = cells(t);
        text_table(&mut o, &heads, &rows);
        for l in lines(t) {
            let _ = writeln!(o, "{l}");
        }
    }
    o
}

/// The sweep tables as markdown.
pub fn markdown(tables: &[SweepTable]) -> String {
    let mut o = String::new();
    for t in tables {
        let _ = writeln!(o, "## Sweep of {}: throughput vs latency\n", t.parameter);
        let (heads, rows) = cells(t);
        md_table(&mut o, &heads, &rows);
        o.push('\n');
        for l in lines(t) {
            let _ = writeln!(o, "{l}\n");
        }
    }
    o
}

#[cfg(test)]
mod tests {
    use super::*;
    use tpscope_analysis::levels::{LevelRow, WithinGoals};

    fn row(level: f64) -> LevelRow {
        LevelRow {
            level,
            run_id: format!("r{level}"),
            ok: 10,
            spans: 10,
            system_tps: Some(100.0 * level),
            ttft_p50_s: Some(0.01),
            ttft_p90_s: Some(0.015),
            ttft_p99_s: Some(0.02),
            ttft_user_p99_s: Some(6.07),
            stream_tps_p50: Some(50.0),
            gap_fraction: Some(0.0),
            goodput_rps: Some(2.0),
            goodput_tps: Some(80.0),
            goodput_share: Some(0.95),
            cost_per_million_output_tokens: None,
        }
    }

    fn table(closed_loop: bool) -> SweepTable {
        SweepTable {
            parameter: "concurrency".into(),
            closed_loop,
            rows: vec![row(1.0), row(4.0)],
            knee: Knee::NotReached,
            knee_level: None,
            within_goals: Some(WithinGoals {
                goals: "ttft:500ms".into(),
                slo_share: 0.9,
                level: Some(4.0),
                row: Some(1),
                cost_per_million_output_tokens: None,
            }),
        }
    }

    #[test]
    fn closed_loop_sweep_table_names_the_queue_as_backlog_not_ttft_user() {
        // A closed loop's queue is the client's own backlog (all requests ready at
        // t = 0): it was printed as "TTFT user p50 6.07 s" at c=1.
        let closed = text(&[table(true)]);
        assert!(!closed.contains("TTFT user"), "{closed}");
        assert!(closed.contains("backlog+TTFT p99"), "{closed}");
        assert!(closed.contains("client's own backlog"), "{closed}");
        // TTFT after admission leads.
        let head = closed.lines().nth(1).unwrap();
        assert!(head.find("TTFT p50").unwrap() < head.find("backlog").unwrap());
        let open = text(&[table(false)]);
        assert!(
            open.contains("TTFT user p99") && !open.contains("backlog"),
            "{open}"
        );
    }

    #[test]
    fn the_highest_level_within_goals_is_marked_and_said() {
        let t = text(&[table(false)]);
        assert!(t.contains("← highest within goals"), "{t}");
        assert!(
            t.contains("within goals (ttft:500ms) for 90% of requests: up to concurrency 4"),
            "{t}"
        );
        assert!(t.contains("knee: not reached"), "{t}");
        let md = markdown(&[table(false)]);
        assert!(md.contains("| goodput req/s |"), "{md}");
    }
}
