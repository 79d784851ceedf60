//! Multi-turn runs (pure): TTFT by turn index (the prefix cache's benefit shows as
//! later turns starting sooner) and per-session totals, from spans that carry
//! `session_id` and `turn`. Percentiles by the one method of [`crate::stats`].

use std::collections::BTreeMap;

use serde::Serialize;
use tpscope_model::{Span, Status};

use crate::stats::quantile_sorted;

/// One turn index across every session.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct TurnRow {
    /// The turn (from 1).
    pub turn: u32,
    /// Spans of this turn.
    pub spans: u64,
    /// Of them, ok.
    pub ok: u64,
    /// TTFT after admission of the ok spans with a first token, p50 (s).
    pub ttft_p50_s: Option<f64>,
    /// p90 (s).
    pub ttft_p90_s: Option<f64>,
    /// Mean prompt tokens (where known).
    pub input_tokens_mean: Option<f64>,
}

/// Totals over the sessions.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct SessionTotals {
    /// Sessions seen.
    pub sessions: u64,
    /// Sessions whose every turn ended ok.
    pub complete: u64,
    /// Turns per session: mean.
    pub turns_mean: f64,
    /// Output tokens per session: mean.
    pub output_tokens_mean: f64,
    /// A session's length, first `queued_at` to last `released_at` (s): p50.
    pub duration_p50_s: Option<f64>,
    /// p90 (s).
    pub duration_p90_s: Option<f64>,
}

/// The multi-turn section of a report.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct SessionReport {
    /// By turn index, ascending.
    pub by_turn: Vec<TurnRow>,
    /// Per-session totals.
    pub totals: SessionTotals,
}

/// One session's running totals: turns, whether all were ok, output tokens, first
/// `queued_at` and last `released_at` (unix seconds).
type SessionAcc = (u64, bool, u64, f64, f64);

fn pct(sorted: &[f64], q: f64) -> Option<f64> {
    quantile_sorted(sorted, q)
}

/// The multi-turn section, or `None` when no span carries a turn.
pub fn session_report<'a>(spans: impl IntoIterator<Item = &'a Span>) -> Option<SessionReport> {
    let mut turns: BTreeMap<u32, (u64, u64, Vec<f64>, Vec<u64>)> = BTreeMap::new();
    let mut sessions: BTreeMap<(&str, &str), SessionAcc> = BTreeMap::new();
    for s in spans {
        let (Some(turn), Some(sid)) = (s.turn, s.session_id.as_deref()) else {
            continue;
        };
        let row = turns.entry(turn).or_default();
        row.0 += 1;
        let ok = s.status == Status::Ok;
        if ok {
            row.1 += 1;
            if let (Some(a), Some(f)) = (s.admitted_at, s.first_token_at)
                && let Some(d) = f.since(a)
            {
                row.2.push(d.as_secs_f64());
            }
        }
        if let Some(n) = s.input_tokens {
            row.3.push(n);
        }
        let q = s.queued_at.unix_nanos() as f64 / 1e9;
        let r = s.released_at.unix_nanos() as f64 / 1e9;
        let e = sessions
            .entry((s.run_id.as_str(), sid))
            .or_insert((0, true, 0, q, r));
        e.0 += 1;
        e.1 &= ok;
        e.2 += s.output_tokens;
        e.3 = e.3.min(q);
        e.4 = e.4.max(r);
    }
    if turns.is_empty() {
        return None;
    }
    let by_turn = turns
        .into_iter()
        .map(|(turn, (spans, ok, mut ttft, inputs))| {
            ttft.sort_by(f64::total_cmp);
            TurnRow {
                turn,
                spans,
                ok,
                ttft_p50_s: pct(&ttft, 0.5),
                ttft_p90_s: pct(&ttft, 0.9),
                input_tokens_mean: (!inputs.is_empty())
                    .then(|| inputs.iter().sum::<u64>() as f64 / inputs.len() as f64),
            }
        })
        .collect();
    let n = sessions.len() as f64;
    let mut durations: Vec<f64> = sessions.values().map(|s| s.4 - s.3).collect();
    durations.sort_by(f64::total_cmp);
    let totals = SessionTotals {
        sessions: sessions.len() as u64,
        complete: sessions.values().filter(|s| s.1).count() as u64,
        turns_mean: sessions.values().map(|s| s.0 as f64).sum::<f64>() / n,
        output_tokens_mean: sessions.values().map(|s| s.2 as f64).sum::<f64>() / n,
        duration_p50_s: pct(&durations, 0.5),
        duration_p90_s: pct(&durations, 0.9),
    };
    Some(SessionReport { by_turn, totals })
}

#[cfg(test)]
mod tests {
    use super::*;
    use tpscope_model::Timestamp;

    fn span(sid: &str, turn: u32, q_ms: i64, ttft_ms: i64, status: Status) -> Span {
        let t = |ms: i64| Timestamp::from_unix_nanos(1_767_225_600_000_000_000 + ms * 1_000_000);
        let ok = status == Status::Ok;
        Span {
            run_id: "r".into(),
            span_id: format!("{sid}-{turn}"),
            request_id: None,
            status,
            queued_at: t(q_ms),
            admitted_at: Some(t(q_ms)),
            first_token_at: ok.then(|| t(q_ms + ttft_ms)),
            last_token_at: ok.then(|| t(q_ms + ttft_ms + 100)),
            released_at: t(q_ms + ttft_ms + 100),
            output_tokens: if ok { 10 } else { 0 },
            input_tokens: Some(100 * u64::from(turn)),
            token_source: None,
            retry_count: 0,
            retry_causes: vec![],
            attempts: vec![],
            error: (!ok).then(|| tpscope_model::SpanError {
                cause: tpscope_model::Cause::Http5xx,
                message: "x".into(),
            }),
            chunks: None,
            session_id: Some(sid.into()),
            turn: Some(turn),
            tokenizer_output_tokens: None,
        }
    }

    #[test]
    fn ttft_by_turn_and_session_totals() {
        let spans = [
            span("a", 1, 0, 200, Status::Ok),
            span("a", 2, 400, 20, Status::Ok),
            span("b", 1, 0, 300, Status::Ok),
            span("b", 2, 500, 40, Status::Error),
        ];
        let r = session_report(&spans).unwrap();
        assert_eq!(r.by_turn.len(), 2);
        assert_eq!(r.by_turn[0].ttft_p50_s, Some(0.25));
        // Turn 2: one ok span with a first token; the failed one has no TTFT.
        assert_eq!((r.by_turn[1].spans, r.by_turn[1].ok), (2, 1));
        assert!((r.by_turn[1].ttft_p50_s.unwrap() - 0.02).abs() < 1e-9);
        assert_eq!(r.by_turn[1].input_tokens_mean, Some(200.0));
        assert_eq!((r.totals.sessions, r.totals.complete), (2, 1));
        assert_eq!(r.totals.turns_mean, 2.0);
        assert_eq!(r.totals.output_tokens_mean, 15.0);
        assert!(session_report(&[]).is_none());
    }
}
