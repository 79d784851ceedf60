//! The `diagnosis` and "server vs client" sections of a run, as [`Section`]s the
//! text, markdown and HTML renderers lay out alike. Formatting only.

use tpscope_analysis::RunReport;
use tpscope_analysis::diagnosis::Diagnosis;
use tpscope_analysis::server::ServerVsClient;

use crate::fmt::{or_dash, pct, secs};
use crate::section::{Block, Chart, Section};

/// Heads of the diagnosis table.
pub const DIAGNOSIS_HEADS: [&str; 5] = ["state", "share", "time", "meaning", "next step"];

/// The diagnosis table's rows.
pub fn diagnosis_rows(d: &Diagnosis) -> Vec<Vec<String>> {
    d.states
        .iter()
        .map(|s| {
            vec![
                s.name.to_string(),
                pct(s.share),
                secs(s.time),
                s.meaning.to_string(),
                s.next_step.to_string(),
            ]
        })
        .collect()
}

/// The heading of the diagnosis section.
pub fn diagnosis_heading(d: &Diagnosis) -> &'static str {
    if d.with_server {
        "diagnosis (client and server)"
    } else {
        "diagnosis (client side only)"
    }
}

fn num(v: Option<f64>, decimals: usize) -> String {
    or_dash(v.map(|x| format!("{x:.decimals$}")))
}

/// The heading of the server-vs-client section.
pub fn server_heading(s: &ServerVsClient) -> String {
    format!(
        "server vs client ({}, {} scrapes)",
        s.server.as_deref().unwrap_or("unknown server"),
        s.scrapes
    )
}

/// The server-vs-client section as (what, server, client) rows.
pub fn server_rows(r: &RunReport, s: &ServerVsClient) -> Vec<[String; 3]> {
    let tokens = |v: Option<f64>| or_dash(v.map(|x| format!("{x:.0}")));
    let diff = s
        .output_tokens_difference
        .map(|d| format!(" ({:+.2} %)", d * 100.0))
        .unwrap_or_default();
    vec![
        [
            "running / in flight (mean)".into(),
            num(s.mean_running, 1),
            num(r.mean_in_flight, 1),
        ],
        [
            "waiting / queued (mean)".into(),
            num(s.mean_waiting, 1),
            num(r.mean_queue_depth, 1),
        ],
        [
            "KV cache usage (max)".into(),
            or_dash(s.max_kv_cache_usage.map(pct)),
            "—".into(),
        ],
        ["preemptions".into(), tokens(s.preemptions), "—".into()],
        [
            "output tokens".into(),
            format!("{}{diff}", tokens(s.server_output_tokens)),
            s.client_output_tokens.to_string(),
        ],
        [
            "input tokens".into(),
            tokens(s.server_input_tokens),
            or_dash(s.client_input_tokens.map(|n| n.to_string())),
        ],
        [
            "TTFT mean (server: from arrival; client: t_first_token)".into(),
            or_dash(s.server_ttft_mean.map(secs)),
            or_dash(s.client_ttft_mean.map(secs)),
        ],
        [
            "queue time mean (server: its queue; client: t_queue)".into(),
            or_dash(s.server_queue_time_mean.map(secs)),
            or_dash(s.client_queue_time_mean.map(secs)),
        ],
    ]
}

/// The diagnosis section: its limit sentence, the states, and its notes.
pub fn section(r: &RunReport) -> Option<Section<'_>> {
    let d = r.diagnosis.as_ref()?;
    // A terminal has the limit's next step in the sentence; the others' are
    // in markdown and the page.
    let mut s = Section::new("diagnosis", diagnosis_heading(d))
        .with(Block::Lead(d.sentence.clone()))
        .prose_table(&DIAGNOSIS_HEADS, diagnosis_rows(d), 2, 1);
    for n in &d.notes {
        s = s.with(Block::Note(n.trim_end_matches('.').to_string()));
    }
    Some(s)
}

/// The server-vs-client section: the two sides' figures and, in a page, a chart.
pub fn server_section(r: &RunReport) -> Option<Section<'_>> {
    let s = r.server.as_ref()?;
    let rows: Vec<Vec<String>> = server_rows(r, s).into_iter().map(Vec::from).collect();
    Some(
        Section::new("server", server_heading(s))
            .table(&["", "server", "client"], rows)
            .with(Block::Chart(Chart::Server(s))),
    )
}
