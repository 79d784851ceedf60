//! One CSV row per span: its facts, then its derived metrics (one column per row of
//! [`METRICS`]: seconds with a `_s` suffix, tokens per second without).

use tpscope_analysis::metrics::MetricUnit;
use tpscope_analysis::{METRICS, RunInput, SpanText, span_rows};

use crate::RenderError;

/// The columns before the metrics: the span's identity and facts.
const FACT_COLUMNS: [&str; 15] = [
    "run_id",
    "span_id",
    "request_id",
    "status",
    "error_cause",
    "error_message",
    "queued_at",
    "admitted_at",
    "first_token_at",
    "last_token_at",
    "released_at",
    "output_tokens",
    "input_tokens",
    "token_source",
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

/// One run's spans for the CSV: its input, and in span order its span ids and
/// the strings the analysis does not keep (request id, token source, failure
/// message); a missing entry is written empty.
pub type CsvRun<'a> = (&'a RunInput, &'a [Box<str>], &'a [SpanText]);

/// Renders the spans of runs as CSV. Absent values are empty cells; a span that
/// names no token source gets the run's.
pub fn render(runs: &[CsvRun<'_>]) -> Result<Vec<u8>, RenderError> {
    let mut w = csv::Writer::from_writer(Vec::new());
    w.write_record(header())?;
    let opt = |v: Option<String>| v.unwrap_or_default();
    let t = |v: Option<tpscope_model::Timestamp>| opt(v.map(|t| t.to_string()));
    let none = SpanText::default();
    for (input, ids, texts) in runs {
        let default_source = input
            .run
            .as_ref()
            .and_then(|r| r.token_source.as_ref())
            .map(|s| s.to_string());
        for (i, row) in span_rows(input).enumerate() {
            let s = row.facts;
            let text = texts.get(i).unwrap_or(&none);
            let text_of = |v: &Option<Box<str>>| v.as_deref().unwrap_or_default().to_string();
            let mut cells = vec![
                input.run_id.clone(),
                ids.get(i).map(|s| s.to_string()).unwrap_or_default(),
                text_of(&text.request_id),
                s.status.to_string(),
                opt(s.error_cause.map(|c| c.to_string())),
                text_of(&text.error_message),
                s.queued_at.to_string(),
                t(s.admitted_at),
                t(s.first_token_at),
                t(s.last_token_at),
                s.released_at.to_string(),
                s.output_tokens.to_string(),
                opt(s.input_tokens.map(|n| n.to_string())),
                // Only spans that received tokens have a source (docs/design.md §4).
                if s.output_tokens > 0 || s.first_token_at.is_some() {
                    text.token_source
                        .as_deref()
                        .map(str::to_string)
                        .or_else(|| default_source.clone())
                        .unwrap_or_default()
                } else {
                    String::new()
                },
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
            "run_id,span_id,request_id,status,error_cause,error_message,queued_at,admitted_at,\
             first_token_at,last_token_at,released_at,output_tokens,input_tokens,token_source,\
             retry_count,t_queue_s,\
             t_first_token_s,ttft_user_s,t_stream_s,t_in_flight_s,t_post_s,stream_tps,\
             end_to_end_tps,tpot_s,decode_tps"
        );
    }
}
