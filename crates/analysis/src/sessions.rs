//! Multi-turn runs (pure): TTFT by turn index (the prefix cache's benefit shows as
//! later turns starting sooner, so each turn's TTFT p50 is also given as a ratio
//! to turn 1's) and per-session totals, from the spans' [`SpanFacts::session`].
//! Over the whole run, whatever the report's window: a session straddles any
//! window. Percentiles by the one method of [`crate::stats`].

use std::collections::BTreeMap;

use serde::Serialize;
use tpscope_model::Status;

pub use crate::input::SessionTurn;
use crate::input::SpanFacts;
pub use crate::session_ids::{SessionIds, decimal_id_below};
use crate::stats::{quantile_sorted, ratio, sort_values};

/// One turn index across every session.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct TurnRow {
    /// The turn (from 1).
    pub turn: u32,
    /// Spans of this turn.
    pub spans: u64,
    /// Of them, ok.
    pub ok: u64,
    /// TTFT after admission (`first_token_at − admitted_at`) of the ok spans
    /// with a first token, p50 (s).
    pub ttft_p50_s: Option<f64>,
    /// p90 (s).
    pub ttft_p90_s: Option<f64>,
    /// This turn's TTFT p50 / turn 1's (below 1: the turn started sooner, as a
    /// cached prefix makes it); `None` without both.
    pub ttft_p50_ratio_to_turn_1: Option<f64>,
    /// Mean prompt tokens of the spans that know theirs.
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
    /// Turns per session: most.
    pub turns_max: u64,
    /// Output tokens per session (every turn's): mean.
    pub output_tokens_mean: f64,
    /// Prompt tokens per session (every turn's, each carrying the history): mean;
    /// `None` when some turn does not know its prompt tokens.
    pub input_tokens_mean: Option<f64>,
    /// A session's length, first `queued_at` to last `released_at` (s): p50.
    pub duration_p50_s: Option<f64>,
    /// p90 (s).
    pub duration_p90_s: Option<f64>,
    /// The longest (s).
    pub duration_max_s: Option<f64>,
}

/// The `sessions` section of a run's report.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct SessionReport {
    /// By turn index, ascending.
    pub by_turn: Vec<TurnRow>,
    /// Per-session totals.
    pub totals: SessionTotals,
}

/// One turn index's running figures.
#[derive(Default)]
struct TurnAcc {
    spans: u64,
    ok: u64,
    ttft_s: Vec<f64>,
    input_sum: u64,
    input_known: u64,
}

/// One session's running totals.
struct SessionAcc {
    turns: u64,
    all_ok: bool,
    output_tokens: u64,
    /// `None` once a turn does not know its prompt tokens.
    input_tokens: Option<u64>,
    first_queued_ns: i64,
    last_released_ns: i64,
}

/// The sessions' running totals: by number in a vector where numbers are
/// below the count of spans (readers number sessions densely), else in a map
/// (a hand-made input), so that a large number cannot size a vector.
#[derive(Default)]
struct Accs {
    dense: Vec<Option<SessionAcc>>,
    sparse: BTreeMap<u32, SessionAcc>,
}

impl Accs {
    fn get(&mut self, n: u32, spans: usize, new: impl FnOnce() -> SessionAcc) -> &mut SessionAcc {
        let i = n as usize;
        if i < spans {
            if i >= self.dense.len() {
                self.dense
                    .resize_with((i + 1).next_power_of_two().min(spans), || None);
            }
            self.dense[i].get_or_insert_with(new)
        } else {
            self.sparse.entry(n).or_insert_with(new)
        }
    }

    fn into_values(self) -> Vec<SessionAcc> {
        self.dense
            .into_iter()
            .flatten()
            .chain(self.sparse.into_values())
            .collect()
    }
}

/// The section, or `None` when no span belongs to a session.
pub fn session_report(spans: &[SpanFacts]) -> Option<SessionReport> {
    let mut turns: BTreeMap<u32, TurnAcc> = BTreeMap::new();
    let mut sessions = Accs::default();
    for s in spans {
        let Some(at) = s.session else {
            continue;
        };
        let ok = s.status == Status::Ok;
        let row = turns.entry(at.turn.get()).or_default();
        row.spans += 1;
        if ok {
            row.ok += 1;
            if let (Some(a), Some(f)) = (s.admitted_at, s.first_token_at)
                && let Some(d) = f.since(a)
            {
                row.ttft_s.push(d.as_secs_f64());
            }
        }
        if let Some(n) = s.input_tokens {
            row.input_sum += n;
            row.input_known += 1;
        }
        let (q, r) = (s.queued_at.unix_nanos(), s.released_at.unix_nanos());
        let e = sessions.get(at.session, spans.len(), || SessionAcc {
            turns: 0,
            all_ok: true,
            output_tokens: 0,
            input_tokens: Some(0),
            first_queued_ns: q,
            last_released_ns: r,
        });
        e.turns += 1;
        e.all_ok &= ok;
        e.output_tokens += s.output_tokens;
        e.input_tokens = e.input_tokens.zip(s.input_tokens).map(|(a, b)| a + b);
        e.first_queued_ns = e.first_queued_ns.min(q);
        e.last_released_ns = e.last_released_ns.max(r);
    }
    if turns.is_empty() {
        return None;
    }
    let mut by_turn: Vec<TurnRow> = turns
        .into_iter()
        .map(|(turn, mut acc)| {
            sort_values(&mut acc.ttft_s);
            TurnRow {
                turn,
                spans: acc.spans,
                ok: acc.ok,
                ttft_p50_s: quantile_sorted(&acc.ttft_s, 0.5),
                ttft_p90_s: quantile_sorted(&acc.ttft_s, 0.9),
                ttft_p50_ratio_to_turn_1: None,
                input_tokens_mean: ratio(acc.input_sum as f64, acc.input_known as f64),
            }
        })
        .collect();
    let first = by_turn
        .iter()
        .find(|t| t.turn == 1)
        .and_then(|t| t.ttft_p50_s);
    for t in &mut by_turn {
        t.ttft_p50_ratio_to_turn_1 = t.ttft_p50_s.zip(first).and_then(|(v, f)| ratio(v, f));
    }
    let sessions: Vec<SessionAcc> = sessions.into_values();
    let n = sessions.len() as f64;
    let mut durations: Vec<f64> = sessions
        .iter()
        .map(|s| (s.last_released_ns - s.first_queued_ns).max(0) as f64 / 1e9)
        .collect();
    sort_values(&mut durations);
    let input: Option<u64> = sessions.iter().map(|s| s.input_tokens).sum();
    let totals = SessionTotals {
        sessions: sessions.len() as u64,
        complete: sessions.iter().filter(|s| s.all_ok).count() as u64,
        turns_mean: sessions.iter().map(|s| s.turns as f64).sum::<f64>() / n,
        turns_max: sessions.iter().map(|s| s.turns).max().unwrap_or(0),
        output_tokens_mean: sessions.iter().map(|s| s.output_tokens as f64).sum::<f64>() / n,
        input_tokens_mean: input.map(|i| i as f64 / n),
        duration_p50_s: quantile_sorted(&durations, 0.5),
        duration_p90_s: quantile_sorted(&durations, 0.9),
        duration_max_s: durations.last().copied(),
    };
    Some(SessionReport { by_turn, totals })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::input::ClientTimes;
    use tpscope_model::{Cause, Timestamp};

    /// A span of session `session`, turn `turn`, queued at `q_ms`, admitted at
    /// once, its first token `ttft_ms` later and released 100 ms after that.
    fn span(session: u32, turn: u32, q_ms: i64, ttft_ms: i64, status: Status) -> SpanFacts {
        let t = |ms: i64| Timestamp::from_unix_nanos(1_767_225_600_000_000_000 + ms * 1_000_000);
        let ok = status == Status::Ok;
        SpanFacts {
            status,
            error_cause: (!ok).then_some(Cause::Http5xx),
            queued_at: t(q_ms),
            admitted_at: Some(t(q_ms)),
            first_token_at: ok.then(|| t(q_ms + ttft_ms)),
            last_token_at: ok.then(|| t(q_ms + ttft_ms + 100)),
            released_at: t(q_ms + ttft_ms + 100),
            output_tokens: if ok { 10 } else { 0 },
            input_tokens: Some(100 * u64::from(turn)),
            retry_count: 0,
            retry_causes: Box::default(),
            wasted_tokens: 0,
            chunks: None,
            client: ClientTimes::default(),
            session: Some(SessionTurn {
                session,
                turn: std::num::NonZeroU32::new(turn).unwrap(),
            }),
        }
    }

    #[test]
    fn ttft_by_turn_with_its_ratio_to_turn_1_and_session_totals() {
        let spans = [
            span(0, 1, 0, 200, Status::Ok),
            span(0, 2, 400, 20, Status::Ok),
            span(1, 1, 0, 300, Status::Ok),
            span(1, 2, 500, 40, Status::Error),
            span(1, 3, 900, 60, Status::Ok),
        ];
        let r = session_report(&spans).unwrap();
        assert_eq!(r.by_turn.len(), 3);
        let t1 = &r.by_turn[0];
        // Type 7 between 0.2 and 0.3: p50 0.25, p90 0.29.
        assert_eq!(t1.ttft_p50_s, Some(0.25));
        assert!((t1.ttft_p90_s.unwrap() - 0.29).abs() < 1e-9);
        assert_eq!(t1.ttft_p50_ratio_to_turn_1, Some(1.0));
        // Turn 2: one ok span with a first token; the failed one has no TTFT.
        let t2 = &r.by_turn[1];
        assert_eq!((t2.spans, t2.ok), (2, 1));
        assert!((t2.ttft_p50_s.unwrap() - 0.02).abs() < 1e-9);
        assert!((t2.ttft_p50_ratio_to_turn_1.unwrap() - 0.08).abs() < 1e-9);
        assert_eq!(t2.input_tokens_mean, Some(200.0));
        assert!((r.by_turn[2].ttft_p50_ratio_to_turn_1.unwrap() - 0.24).abs() < 1e-9);
        let t = &r.totals;
        assert_eq!((t.sessions, t.complete, t.turns_max), (2, 1, 3));
        assert_eq!(t.turns_mean, 2.5);
        assert_eq!(t.output_tokens_mean, 20.0);
        assert_eq!(t.input_tokens_mean, Some((300.0 + 600.0) / 2.0));
        // Session 0: 0 to 520 ms; session 1: 0 to 1060 ms.
        assert!((t.duration_p50_s.unwrap() - 0.79).abs() < 1e-9);
        assert!((t.duration_max_s.unwrap() - 1.06).abs() < 1e-9);
    }

    #[test]
    fn session_ids_are_numbered_in_order_of_first_appearance_decimal_or_not() {
        let mut ids = SessionIds::default();
        let got: Vec<u32> = ["7", "x", "7", "07", "0", "x", "4194304", "4194303"]
            .iter()
            .map(|id| ids.number(id))
            .collect();
        // "07" and 4194304 are not in the dense table: hashed, as any other id.
        assert_eq!(got, [0, 1, 0, 2, 3, 1, 4, 5]);
        assert_eq!(ids.len(), 6);
    }

    #[test]
    fn a_session_number_beyond_the_spans_is_counted_too() {
        let mut far = span(4_000_000_000, 1, 0, 10, Status::Ok);
        far.output_tokens = 3;
        let r = session_report(&[span(0, 1, 0, 10, Status::Ok), far]).unwrap();
        assert_eq!(r.totals.sessions, 2);
        assert_eq!(r.totals.output_tokens_mean, 6.5);
    }

    #[test]
    fn a_run_without_sessions_has_no_section() {
        let mut plain = span(0, 1, 0, 10, Status::Ok);
        plain.session = None;
        assert!(session_report(&[plain]).is_none());
        assert!(session_report(&[]).is_none());
    }

    #[test]
    fn without_a_turn_1_or_its_ttft_there_is_no_ratio_and_unknown_prompts_are_none() {
        let mut later = span(0, 2, 0, 10, Status::Ok);
        later.input_tokens = None;
        let failed_first = span(1, 1, 0, 10, Status::Error);
        let r = session_report(&[later, failed_first]).unwrap();
        assert_eq!(r.by_turn[0].ttft_p50_s, None);
        assert!(
            r.by_turn
                .iter()
                .all(|t| t.ttft_p50_ratio_to_turn_1.is_none())
        );
        assert_eq!(r.by_turn[1].input_tokens_mean, None);
        assert_eq!(r.totals.input_tokens_mean, None);
    }
}
