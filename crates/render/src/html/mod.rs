//! Self-contained HTML pages of a report or a comparison: inline SVG charts with
//! axis labels and units, summary tables and warnings, readable in light and dark
//! schemes. One file, no network: no external scripts, fonts or images. The pages
//! draw [`Detail`] chart data and format report values; they compute nothing.

mod capacity;
pub(crate) mod charts;
mod levels;
pub(crate) mod page;
mod section;
mod server;
mod sessions;
pub(crate) mod svg;

use tpscope_analysis::compare::Compared;
use tpscope_analysis::detail::{CdfMetric, Detail};
use tpscope_analysis::{Report, RunReport};
use tpscope_model::TargetApi;

use crate::compare::{criterion_cells, criterion_heads, headline_cells, method_line, side_line};
use crate::fmt::{SUMMARY_HEADS, summary_cells};
use crate::rows::{
    backlog_left, by_cause, closed_loop_note, distribution_rows, failure_message_lines,
    headline_rows, length_label, missing_lines, target_name, window_line,
};
use charts::Series;
use page::{Cell, document, table, warnings};
use svg::esc;

fn run_meta(r: &RunReport) -> String {
    let t = &r.target;
    let mut s = format!(
        "<p class=\"meta\">target {} · model {} · api {} · cap {} · tokens from {}</p>\n",
        esc(target_name(r)),
        esc(t.model.as_deref().unwrap_or("?")),
        esc(t.api.as_ref().map_or("?", TargetApi::as_str)),
        r.cap.map_or("none".to_string(), |c| c.to_string()),
        esc(&if r.token_sources.is_empty() {
            "?".to_string()
        } else {
            r.token_sources
                .iter()
                .map(|s| format!("{} ({} spans)", s.source, s.spans))
                .collect::<Vec<_>>()
                .join(", ")
        })
    );
    s.push_str(&format!(
        "<p class=\"meta\">{}{}{}</p>\n",
        esc(&window_line(r)),
        r.tool
            .as_ref()
            .map(|t| format!(" · recorded by {}", esc(t)))
            .unwrap_or_default(),
        if r.complete {
            ""
        } else {
            " · <strong>incomplete</strong> (no end record)"
        }
    ));
    if !r.labels.is_empty() {
        let labels: Vec<String> = r.labels.iter().map(|(k, v)| format!("{k}={v}")).collect();
        s.push_str(&format!(
            "<p class=\"meta\">labels {}</p>\n",
            esc(&labels.join(" "))
        ));
    }
    if let Some(c) = &r.command {
        s.push_str(&format!(
            "<p class=\"meta\">command <code>{}</code></p>\n",
            esc(c)
        ));
    }
    s
}

/// What the server did (TTFT, TPOT, stream and system TPS), first.
fn lead_table(r: &RunReport) -> String {
    let rows: Vec<Vec<Cell>> = crate::lead::lead_rows(r)
        .into_iter()
        .map(|l| {
            vec![
                Cell::Text(l.label.to_string()),
                Cell::Text(l.value),
                Cell::Why(l.why.to_string()),
            ]
        })
        .collect();
    let mut s = String::from("<div class=\"lead\">\n");
    s.push_str(&table(
        &[
            "what the server did".into(),
            "value".into(),
            "meaning".into(),
        ],
        &rows,
    ));
    if let Some(b) = crate::lead::backlog_line(r) {
        s.push_str(&format!("<p class=\"note\">{}</p>\n", esc(&b)));
    }
    s.push_str("</div>\n");
    s
}

fn summary_tables(r: &RunReport) -> String {
    let mut s = String::new();
    let c = &r.counts;
    s.push_str(&format!(
        "<p>{} spans: {} ok, {} error, {} cancelled{} · failures by cause: {} · retries {} ({}) · wasted tokens {} · output tokens {}</p>\n",
        c.spans,
        c.status.ok,
        c.status.error,
        c.status.cancelled,
        esc(&backlog_left(c)),
        esc(&by_cause(&c.errors_by_cause)),
        c.retries,
        esc(&by_cause(&c.retries_by_cause)),
        c.wasted_tokens,
        c.output_tokens
    ));
    let messages = failure_message_lines(r);
    if !messages.is_empty() {
        s.push_str(
            "<p class=\"meta\">most frequent failure messages:</p>\n<ul class=\"failures\">\n",
        );
        for line in messages {
            s.push_str(&format!("<li><code>{}</code></li>\n", esc(&line)));
        }
        s.push_str("</ul>\n");
    }
    let rows: Vec<Vec<Cell>> = headline_rows(r)
        .into_iter()
        .map(|(k, v, why)| {
            vec![
                Cell::Text(k.to_string()),
                Cell::Text(v),
                Cell::Why(why.to_string()),
            ]
        })
        .collect();
    s.push_str(&table(
        &["metric".into(), "value".into(), "meaning".into()],
        &rows,
    ));
    s
}

fn distribution_tables(r: &RunReport) -> String {
    let mut s = String::new();
    let (main, conv) = distribution_rows(r);
    let mut heads = vec!["ok spans".to_string()];
    heads.extend(SUMMARY_HEADS.iter().map(|h| h.to_string()));
    let to_rows = |rs: &[crate::rows::DistRow]| -> Vec<Vec<Cell>> {
        rs.iter()
            .map(|d| {
                let mut v = vec![Cell::Text(format!("{} ({})", d.name, d.unit))];
                v.extend(d.cells.iter().cloned().map(Cell::Text));
                v
            })
            .collect()
    };
    s.push_str(&table(&heads, &to_rows(&main)));
    s.push_str("<h3>Conventional forms, as other tools print them</h3>\n");
    s.push_str(&table(&heads, &to_rows(&conv)));
    s.push_str("<h3>Stream TPS (tokens/s) by output length</h3>\n");
    let mut heads = vec!["output tokens".to_string()];
    heads.extend(SUMMARY_HEADS.iter().map(|h| h.to_string()));
    let rows: Vec<Vec<Cell>> = r
        .stream_tps_by_output_length
        .iter()
        .map(|b| {
            let mut v = vec![Cell::Text(length_label(b.min_tokens, b.max_tokens))];
            v.extend(
                summary_cells(&b.stream_tps, 1.0, 1)
                    .into_iter()
                    .map(Cell::Text),
            );
            v
        })
        .collect();
    s.push_str(&table(&heads, &rows));
    if let Some(note) = closed_loop_note(r) {
        s.push_str(&format!("<p class=\"note\">{}</p>\n", esc(note)));
    }
    let missing = missing_lines(r);
    if !missing.is_empty() {
        s.push_str(&format!(
            "<p class=\"note\">Ok spans lacking a metric: {}.</p>\n",
            esc(&missing.join("; "))
        ));
    }
    s
}

fn cdf_grid(prefix: &str, runs: &[Series<'_>]) -> String {
    let mut s = String::from("<div class=\"grid2\">\n");
    s.push_str(&charts::cdf(
        &format!("{prefix}-cdf-ttft"),
        "CDF of time to first token",
        runs,
        &[CdfMetric::TtftUser, CdfMetric::TFirstToken],
    ));
    s.push_str(&charts::cdf(
        &format!("{prefix}-cdf-queue"),
        "CDF of queue time",
        runs,
        &[CdfMetric::TQueue],
    ));
    s.push_str(&charts::cdf(
        &format!("{prefix}-cdf-stream"),
        "CDF of stream TPS",
        runs,
        &[CdfMetric::StreamTps],
    ));
    s.push_str(&charts::cdf(
        &format!("{prefix}-cdf-e2e"),
        "CDF of end-to-end TPS",
        runs,
        &[CdfMetric::EndToEndTps],
    ));
    s.push_str("</div>\n");
    s
}

const CDF_NOTE: &str = "<p class=\"note\">Each curve passes through the metric's percentiles as the report computes them (linear interpolation between closest ranks). ttft_user includes the queue; t_first_token starts at admission.</p>\n";

fn run_section(prefix: &str, r: &RunReport, d: Option<&Detail>, heading: &str) -> String {
    let mut s = String::new();
    s.push_str(heading);
    s.push_str(&run_meta(r));
    s.push_str(&warnings(&r.warnings));
    s.push_str("<h2>Summary</h2>\n");
    s.push_str(&lead_table(r));
    s.push_str(&summary_tables(r));
    let one: Vec<Series<'_>> = d
        .map(|d| Series {
            detail: d,
            label: &r.run_id,
            class: None,
        })
        .into_iter()
        .collect();
    for sec in crate::section::run_sections(r) {
        s.push_str(&section::html(prefix, &sec, &one));
    }
    if let [run] = one.as_slice() {
        s.push_str("<h2>Timeline</h2>\n");
        s.push_str(&charts::occupancy(&format!("{prefix}-occupancy"), &one));
        s.push_str(&capacity::chart(prefix, r));
        s.push_str(&charts::queue(&format!("{prefix}-queue"), &one));
        s.push_str("<h2>System TPS over time</h2>\n");
        s.push_str(&charts::tps(&format!("{prefix}-tps"), &one));
        s.push_str("<h2>Request waterfall</h2>\n");
        s.push_str(&charts::waterfall(&format!("{prefix}-waterfall"), run));
        s.push_str("<h2>Distributions</h2>\n");
        s.push_str(&cdf_grid(prefix, &one));
        s.push_str(CDF_NOTE);
        s.push_str("<h2>Stream TPS against output length</h2>\n");
        s.push_str(&charts::scatter(&format!("{prefix}-scatter"), &one));
    } else {
        s.push_str("<p class=\"note\">No chart data for this run.</p>\n");
    }
    s.push_str("<h2>Distribution tables</h2>\n");
    s.push_str(&distribution_tables(r));
    s
}

/// The HTML page of a report: for each run its summary, warnings, charts and
/// tables. `details` holds the chart data of the runs (matched by run id; a run
/// without one gets tables only).
pub fn report(report: &Report, details: &[Detail]) -> Vec<u8> {
    let mut body = String::new();
    let title = match report.runs.as_slice() {
        [one] => format!("tpscope report — run {}", one.run_id),
        runs => format!("tpscope report — {} runs", runs.len()),
    };
    body.push_str(&format!("<h1>{}</h1>\n", esc(&title)));
    let mut top = report.warnings.clone();
    if !report.skipped.is_empty() {
        let list: Vec<String> = report
            .skipped
            .iter()
            .map(|(k, v)| format!("{v} {k}"))
            .collect();
        top.push(format!("skipped invalid records: {}", list.join(", ")));
    }
    body.push_str(&warnings(&top));
    if report.runs.is_empty() {
        body.push_str("<p>No runs in the input.</p>\n");
    }
    // A sweep's curve and table lead: its runs are the levels behind them.
    for (i, t) in report.sweeps.iter().enumerate() {
        body.push_str(&levels::section(i, t));
    }
    let many = report.runs.len() > 1;
    for (i, r) in report.runs.iter().enumerate() {
        let d = details.iter().find(|d| d.run_id == r.run_id);
        let heading = if many {
            format!("<h2>Run {}</h2>\n", esc(&r.run_id))
        } else {
            String::new()
        };
        body.push_str(&format!("<section id=\"run-{i}\">\n"));
        body.push_str(&run_section(&format!("r{i}"), r, d, &heading));
        body.push_str("</section>\n");
    }
    document(&title, &body).into_bytes()
}

fn verdict_html(v: tpscope_analysis::compare::Verdict) -> String {
    format!("<span class=\"verdict {0}\">{0}</span>", v.as_str())
}

/// The HTML page of a comparison: the verdict table, the headline metrics side by
/// side, and the charts with baseline and candidate overlaid.
pub fn compare(compared: &Compared, baseline: &Detail, candidate: &Detail) -> Vec<u8> {
    let c = &compared.comparison;
    let mut body = String::new();
    let title = format!(
        "tpscope compare — {} vs {}",
        c.baseline.run_id, c.candidate.run_id
    );
    body.push_str(&format!(
        "<h1>tpscope compare {}</h1>\n",
        verdict_html(c.overall)
    ));
    body.push_str(&format!(
        "<p class=\"meta\"><strong>baseline</strong> {}</p>\n<p class=\"meta\"><strong>candidate</strong> {}</p>\n",
        esc(&side_line(&c.baseline)),
        esc(&side_line(&c.candidate))
    ));
    body.push_str(&warnings(&c.warnings));
    body.push_str("<h2>Verdicts</h2>\n");
    let rows: Vec<Vec<Cell>> = c
        .criteria
        .iter()
        .map(|r| {
            let mut cells: Vec<Cell> = criterion_cells(r).into_iter().map(Cell::Text).collect();
            if let Some(last) = cells.last_mut() {
                *last = Cell::Html(verdict_html(r.verdict));
            }
            cells.push(Cell::Why(r.reason.clone()));
            cells
        })
        .collect();
    let mut heads = criterion_heads(c.bootstrap.level);
    heads.push("why".into());
    body.push_str(&table(&heads, &rows));
    body.push_str(&format!(
        "<p class=\"note\">{}.</p>\n",
        esc(&method_line(c))
    ));
    body.push_str("<h2>Headline metrics</h2>\n");
    let rows: Vec<Vec<Cell>> = c
        .headline
        .iter()
        .map(|r| headline_cells(r).into_iter().map(Cell::Text).collect())
        .collect();
    body.push_str(&table(
        &[
            "metric".into(),
            "baseline".into(),
            "candidate".into(),
            "change".into(),
        ],
        &rows,
    ));
    if let Some(s) = crate::ledger::compare_section(c) {
        body.push_str(&section::html("cmp", &s, &[]));
    }

    let runs = [
        Series {
            detail: baseline,
            label: "baseline",
            class: Some("base"),
        },
        Series {
            detail: candidate,
            label: "candidate",
            class: Some("cand"),
        },
    ];
    body.push_str("<h2>Timeline</h2>\n");
    body.push_str(&charts::occupancy("cmp-occupancy", &runs));
    body.push_str(&charts::queue("cmp-queue", &runs));
    body.push_str("<h2>System TPS over time</h2>\n");
    body.push_str(&charts::tps("cmp-tps", &runs));
    if let Some(b) = baseline.tps.first().map(|p| p.duration) {
        body.push_str(&format!(
            "<p class=\"note\">Both runs in {} buckets, chosen so the longer run spans 30–60 of them. \
             The baseline is the wide, pale line underneath; the candidate the thin line on top. \
             The verdicts' intervals resample finer buckets.</p>\n",
            esc(&charts::short_secs(b.as_secs_f64()))
        ));
    }
    body.push_str("<h2>Distributions</h2>\n");
    body.push_str(&cdf_grid("cmp", &runs));
    body.push_str(CDF_NOTE);
    body.push_str("<h2>Stream TPS against output length</h2>\n");
    body.push_str(&charts::scatter("cmp-scatter", &runs));
    body.push_str("<h2>Request waterfalls</h2>\n<h3>Baseline</h3>\n");
    body.push_str(&charts::waterfall("cmp-waterfall-base", &runs[0]));
    body.push_str("<h3>Candidate</h3>\n");
    body.push_str(&charts::waterfall("cmp-waterfall-cand", &runs[1]));
    for (name, r) in [
        ("Baseline", &compared.baseline),
        ("Candidate", &compared.candidate),
    ] {
        body.push_str(&format!("<h2>{name}: run {}</h2>\n", esc(&r.run_id)));
        body.push_str(&run_meta(r));
        body.push_str(&warnings(&r.warnings));
        body.push_str(&summary_tables(r));
    }
    document(&title, &body).into_bytes()
}
