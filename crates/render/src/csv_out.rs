//! One CSV row per span with its derived metrics (seconds and tokens per second).

use tpscope_analysis::{RunInput, SpanMetrics, span_metrics};

/// The header of the per-span CSV.
pub const HEADER: [&str; 22] = [
    "run_id",
    "span_id",
    "status",
    "error_cause",
    "queued_at",
    "admitted_at",
    "first_token_at",
    "last_token_at",
    "released_at",
    "output_tokens",
    "input_tokens",
    "retry_count",
    "t_queue_s",
    "t_first_token_s",
    "ttft_user_s",
    "t_stream_s",
    "t_in_flight_s",
    "t_post_s",
    "stream_tps",
    "end_to_end_tps",
    "tpot_s",
    "decode_tps",
];

/// Renders the spans of runs as CSV: `runs` pairs each run's input with its span
/// ids (in span order; a missing id is written empty). Absent values are empty cells.
pub fn render(runs: &[(&RunInput, &[Box<str>])]) -> Vec<u8> {
    let mut w = csv::Writer::from_writer(Vec::new());
    let _ = w.write_record(HEADER);
    let opt = |v: Option<String>| v.unwrap_or_default();
    for (input, ids) in runs {
        for (i, s) in input.spans.iter().enumerate() {
            let m: SpanMetrics = span_metrics(s);
            let d =
                |v: Option<std::time::Duration>| opt(v.map(|d| format!("{:.9}", d.as_secs_f64())));
            let r = |v: Option<tpscope_analysis::TokensPerSecond>| {
                opt(v.map(|r| format!("{:.6}", r.0)))
            };
            let t = |v: Option<tpscope_model::Timestamp>| opt(v.map(|t| t.to_string()));
            let row = [
                input.run_id.clone(),
                ids.get(i).map(|s| s.to_string()).unwrap_or_default(),
                s.status.to_string(),
                opt(s.error_cause.map(|c| c.to_string())),
                s.queued_at.to_string(),
                t(s.admitted_at),
                t(s.first_token_at),
                t(s.last_token_at),
                s.released_at.to_string(),
                s.output_tokens.to_string(),
                opt(s.input_tokens.map(|n| n.to_string())),
                s.retry_count.to_string(),
                d(m.t_queue),
                d(m.t_first_token),
                d(m.ttft_user),
                d(m.t_stream),
                d(m.t_in_flight),
                d(m.t_post),
                r(m.stream_tps),
                r(m.end_to_end_tps),
                d(m.tpot),
                r(m.decode_tps),
            ];
            let _ = w.write_record(&row);
        }
    }
    w.into_inner().unwrap_or_default()
}
