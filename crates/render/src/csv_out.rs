//! One CSV row per span: its facts, then its derived metrics (one column per row of
//! [`METRICS`]: seconds with a `_s` suffix, tokens per second without).

use tpscope_analysis::metrics::MetricUnit;
use tpscope_analysis::{METRICS, RunInput, span_rows};

use crate::RenderError;

/// The columns before the metrics: the span's identity and facts.
const FACT_COLUMNS: [&str; 12] = [
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
];

/// The header of the per-span CSV.
pub fn header() -> Vec<String> {
    let metrics = METRICS.iter().map(|m| match m.unit {
        MetricUnit::Seconds => format!("{}_s", m.name),
        _ => m.name.to_string(),
    });
    FACT_COLUMNS
        .iter()
        .map(|c| c.to_string())
        .chain(metrics)
        .collect()
}

/// Renders the spans of runs as CSV: `runs` pairs each run's input with its span
/// ids (in span order; a missing id is written empty). Absent values are empty cells.
pub fn render(runs: &[(&RunInput, &[Box<str>])]) -> Result<Vec<u8>, RenderError> {
    let mut w = csv::Writer::from_writer(Vec::new());
    w.write_record(header())?;
    let opt = |v: Option<String>| v.unwrap_or_default();
    let t = |v: Option<tpscope_model::Timestamp>| opt(v.map(|t| t.to_string()));
    for (input, ids) in runs {
        for (i, row) in span_rows(input).enumerate() {
            let s = row.facts;
            let mut cells = vec![
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
            ];
            cells.extend(row.metrics.iter().map(|(m, v)| {
                opt(v.map(|v| match m.unit {
                    MetricUnit::Seconds => format!("{v:.9}"),
                    _ => format!("{v:.6}"),
                }))
            }));
            w.write_record(&cells)?;
        }
    }
    w.into_inner()
        .map_err(|e| RenderError::Csv(e.into_error().into()))
}

#[cfg(test)]
mod tests {
    #[test]
    fn header_is_the_facts_then_one_column_per_metric() {
        assert_eq!(
            super::header().join(","),
            "run_id,span_id,status,error_cause,queued_at,admitted_at,first_token_at,\
             last_token_at,released_at,output_tokens,input_tokens,retry_count,t_queue_s,\
             t_first_token_s,ttft_user_s,t_stream_s,t_in_flight_s,t_post_s,stream_tps,\
             end_to_end_tps,tpot_s,decode_tps"
        );
    }
}
