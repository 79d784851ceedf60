//! The chart of the "server vs client" section: the server's running, waiting
//! and KV usage beside the client's in-flight and queue on one time axis.

use tpscope_analysis::server::ServerVsClient;

use super::charts::{Series, TIME_LABEL, figure, step_values, steps_with_end, time_extent};
use super::svg::{Axis, Chart, Geometry};

/// Server running and waiting (dashed) over the client's in-flight and queue,
/// and the server's KV usage below, on the run's time axis.
pub(crate) fn chart(id: &str, sv: &ServerVsClient, one: &[Series<'_>]) -> String {
    let pts = |f: fn(&tpscope_analysis::server::ServerPoint) -> Option<f64>| -> Vec<(f64, f64)> {
        sv.series
            .iter()
            .filter_map(|p| f(p).map(|v| (p.at.as_secs_f64(), v)))
            .collect()
    };
    let running = pts(|p| p.running);
    let waiting = pts(|p| p.waiting);
    let kv = pts(|p| p.kv_cache_usage.map(|k| k * 100.0));
    let last = sv.series.last().map_or(0.0, |p| p.at.as_secs_f64());
    let end = time_extent(one).max(last);
    let occ = one.first().map(|s| &s.detail.occupancy);
    let client_top = occ
        .map(|o| {
            o.steps
                .iter()
                .map(|st| st.in_flight_max.max(st.queue_max))
                .max()
                .unwrap_or(0)
        })
        .unwrap_or(0);
    let server_top = running
        .iter()
        .chain(&waiting)
        .map(|p| p.1)
        .fold(0.0, f64::max);
    let top = f64::from(client_top).max(server_top);
    let x = Axis::linear(TIME_LABEL, 0.0, end);
    let y = Axis::linear("requests", 0.0, top * 1.08 + 0.5)
        .integer()
        .nice();
    let mut ch = Chart::new(
        id,
        "Server running and waiting beside client in flight and queue",
        Geometry::standard(300.0),
        &x,
        &y,
    );
    let mut keys: Vec<(String, String)> = Vec::new();
    if let Some(o) = occ.filter(|o| !o.steps.is_empty()) {
        let e = o.end.as_secs_f64();
        ch.line(
            "inflight",
            &steps_with_end(step_values(&o.steps, |st| st.in_flight_max), e),
            true,
        );
        ch.line(
            "queue",
            &steps_with_end(step_values(&o.steps, |st| st.queue_max), e),
            true,
        );
        keys.push(("line inflight".into(), "client in flight".into()));
        keys.push(("line queue".into(), "client queue".into()));
    }
    if !running.is_empty() {
        ch.line("srun dashed", &steps_with_end(running, end), true);
        keys.push(("line srun dashed".into(), "server running".into()));
    }
    if !waiting.is_empty() {
        ch.line("swait dashed", &steps_with_end(waiting, end), true);
        keys.push(("line swait dashed".into(), "server waiting".into()));
    }
    if keys.is_empty() {
        ch.mark_empty("no running or waiting figures from the server");
    }
    let mut out = figure(ch.finish(), &keys);
    let y = Axis::linear("KV cache usage (%)", 0.0, 100.0);
    let mut ch = Chart::new(
        &format!("{id}-kv"),
        "Server KV cache usage",
        Geometry::standard(160.0),
        &x,
        &y,
    );
    let mut keys = Vec::new();
    if kv.is_empty() {
        ch.mark_empty("the server does not export KV cache usage");
    } else {
        ch.line("skv", &steps_with_end(kv, end), true);
        keys.push(("line skv".into(), "server KV cache usage".into()));
    }
    out.push_str(&figure(ch.finish(), &keys));
    out.push_str(
        "<p class=\"note\">Server values are scraped: each holds until the next scrape.</p>\n",
    );
    out
}
