//! Goodput (docs/design.md §15): latency goals, the one grammar they are written in,
//! whether a request met them, and the report's goodput section.
//!
//! A goal bounds one per-span metric of [`crate::METRICS`]: `ttft` bounds
//! `t_first_token` (TTFT *after admission*), `tpot` bounds `tpot`, `e2e` bounds
//! `t_in_flight` (admission to release). Admission, not queueing, is the start
//! because in a closed loop every request is ready at t = 0 and its queue time is
//! the client's own backlog, not the server's latency; it is also where vLLM's
//! `--goodput` starts its clock (when the request is sent). A request meets the
//! goals when it succeeded and every bounded metric is at or under its goal; a
//! failed request never does.

use std::fmt;
use std::str::FromStr;
use std::time::Duration;

use serde::ser::SerializeMap;
use serde::{Serialize, Serializer};
use tpscope_model::Status;
use tpscope_model::units::{BadDuration, format_duration, parse_duration};

use crate::input::SpanFacts;
use crate::metrics::{SpanMetric, metric, missing};
use crate::stats::TokensPerSecond;

/// One kind of goal: its key, vLLM's key, and the metric it bounds.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct GoalKind {
    /// The key in `ttft:500ms`.
    pub key: &'static str,
    /// The key vLLM's `--goodput` uses for it.
    pub vllm_key: &'static str,
    /// The row of [`crate::METRICS`] it bounds.
    pub metric: &'static str,
}

/// The goals that can be set, in the order they are written and shown.
pub const GOAL_KINDS: [GoalKind; 3] = [
    GoalKind {
        key: "ttft",
        vllm_key: "ttft",
        metric: "t_first_token",
    },
    GoalKind {
        key: "tpot",
        vllm_key: "tpot",
        metric: "tpot",
    },
    GoalKind {
        key: "e2e",
        vllm_key: "e2el",
        metric: "t_in_flight",
    },
];

/// Latency goals: at most one bound per [`GOAL_KINDS`] entry, at least one set.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Goals {
    bounds: [Option<Duration>; GOAL_KINDS.len()],
}

/// A goals text that cannot be read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum BadGoals {
    /// No goal at all.
    #[error("no goal given (expected e.g. ttft:500ms,tpot:50ms,e2e:10s)")]
    Empty,
    /// A piece without `key:value`.
    #[error("`{0}` is not KEY:VALUE (expected e.g. ttft:500ms)")]
    Pair(String),
    /// An unknown key.
    #[error("unknown goal `{0}` (expected ttft, tpot or e2e; vLLM's e2el is e2e)")]
    Key(String),
    /// The same goal twice.
    #[error("goal `{0}` is given twice")]
    Twice(&'static str),
    /// A value that is not a duration.
    #[error("goal `{key}`: {source} (a bare number means milliseconds, as in vLLM)")]
    Value {
        /// The goal's key.
        key: &'static str,
        /// Why the value was refused.
        source: BadDuration,
    },
}

impl Goals {
    /// The goals set, with their kind and bound, in [`GOAL_KINDS`] order.
    pub fn iter(&self) -> impl Iterator<Item = (&'static GoalKind, Duration)> + '_ {
        GOAL_KINDS
            .iter()
            .zip(self.bounds)
            .filter_map(|(k, b)| b.map(|b| (k, b)))
    }

    /// The bound of the goal with this key.
    pub fn get(&self, key: &str) -> Option<Duration> {
        self.iter().find(|(k, _)| k.key == key).map(|(_, b)| b)
    }

    /// Whether no goal is set.
    pub fn is_empty(&self) -> bool {
        self.bounds.iter().all(Option::is_none)
    }

    /// These goals with `other`'s added (a goal in both is an error).
    pub fn merged(mut self, other: Goals) -> Result<Goals, BadGoals> {
        for (i, b) in other.bounds.into_iter().enumerate() {
            if let Some(b) = b {
                if self.bounds[i].is_some() {
                    return Err(BadGoals::Twice(GOAL_KINDS[i].key));
                }
                self.bounds[i] = Some(b);
            }
        }
        Ok(self)
    }

    /// Whether one span met every goal (docs/design.md §15): it succeeded, and each
    /// bounded metric is at or under its bound. A span without a per-token time
    /// (one output token, or every token in one instant) cannot break a `tpot`
    /// goal, as in vLLM; any other missing metric (no first token) misses it.
    pub fn met_by(&self, s: &SpanFacts) -> bool {
        s.status == Status::Ok && self.iter().all(|(k, bound)| meets(k, bound, s))
    }
}

fn row(k: &GoalKind) -> Option<&'static SpanMetric> {
    metric(k.metric)
}

/// Whether `s` meets the goal of kind `k`.
fn meets(k: &GoalKind, bound: Duration, s: &SpanFacts) -> bool {
    let Some(m) = row(k) else { return false };
    match (m.value)(s) {
        Some(v) => v <= bound.as_secs_f64(),
        None => {
            k.key == "tpot"
                && matches!(
                    (m.missing)(s),
                    missing::SINGLE_TOKEN | missing::ZERO_STREAM_TIME
                )
        }
    }
}

/// Parses goals: `ttft:500ms,tpot:50ms,e2e:10s` (durations in the one grammar of
/// [`tpscope_model::units`]), or vLLM's `ttft:500 tpot:50 e2el:10000` (pairs
/// separated by spaces or commas; a bare number is milliseconds, as in vLLM).
pub fn parse_goals(text: &str) -> Result<Goals, BadGoals> {
    let mut goals = Goals::default();
    for piece in text
        .split(|c: char| c == ',' || c.is_whitespace())
        .filter(|p| !p.is_empty())
    {
        let (key, value) = piece
            .split_once(':')
            .ok_or_else(|| BadGoals::Pair(piece.to_string()))?;
        let key = key.trim().to_ascii_lowercase();
        let i = GOAL_KINDS
            .iter()
            .position(|k| k.key == key || k.vllm_key == key)
            .ok_or(BadGoals::Key(key))?;
        let kind = &GOAL_KINDS[i];
        let value = value.trim();
        // vLLM's values are bare milliseconds; tpscope's carry their unit.
        let bare = !value.is_empty() && value.chars().all(|c| c.is_ascii_digit() || c == '.');
        let text = if bare {
            format!("{value}ms")
        } else {
            value.to_string()
        };
        let bound = parse_duration(&text).map_err(|_| BadGoals::Value {
            key: kind.key,
            source: BadDuration {
                text: value.to_string(),
            },
        })?;
        if goals.bounds[i].replace(bound).is_some() {
            return Err(BadGoals::Twice(kind.key));
        }
    }
    if goals.is_empty() {
        return Err(BadGoals::Empty);
    }
    Ok(goals)
}

impl FromStr for Goals {
    type Err = BadGoals;
    fn from_str(s: &str) -> Result<Goals, BadGoals> {
        parse_goals(s)
    }
}

/// `ttft:500ms,tpot:50ms`: the form [`parse_goals`] reads back.
impl fmt::Display for Goals {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let parts: Vec<String> = self
            .iter()
            .map(|(k, b)| format!("{}:{}", k.key, format_duration(b)))
            .collect();
        f.write_str(&parts.join(","))
    }
}

/// Serialised as `{"ttft_s": 0.5, …}`: each goal set, in seconds.
impl Serialize for Goals {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut m = s.serialize_map(None)?;
        for (k, b) in self.iter() {
            m.serialize_entry(&format!("{}_s", k.key), &b.as_secs_f64())?;
        }
        m.end()
    }
}

/// The goodput of a window: what met the goals, per second and as a share.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Goodput {
    /// The goals judged.
    pub goals: Goals,
    /// Text form of the goals (`ttft:500ms,tpot:50ms`).
    pub goals_text: String,
    /// Spans released in the window that succeeded or failed (cancelled ones are
    /// left out, as from the success rate).
    pub judged: u64,
    /// Those that succeeded and met every goal.
    pub met: u64,
    /// For each goal, the judged spans that missed it (a failure misses them all).
    pub missed_by_goal: std::collections::BTreeMap<&'static str, u64>,
    /// met / window length (requests per second).
    pub requests_per_second: Option<f64>,
    /// Output tokens of the spans that met the goals / window length.
    pub output_tokens_per_second: Option<TokensPerSecond>,
    /// met / judged.
    pub share: Option<f64>,
}

/// Tallies the goodput of the spans of one window.
#[derive(Clone, Debug)]
pub(crate) struct Tally {
    goals: Goals,
    judged: u64,
    met: u64,
    tokens: u64,
    missed: [u64; GOAL_KINDS.len()],
}

impl Tally {
    pub fn new(goals: Goals) -> Tally {
        Tally {
            goals,
            judged: 0,
            met: 0,
            tokens: 0,
            missed: [0; GOAL_KINDS.len()],
        }
    }

    /// Counts one span released in the window.
    pub fn add(&mut self, s: &SpanFacts) {
        if s.status == Status::Cancelled {
            return;
        }
        self.judged += 1;
        let mut all = s.status == Status::Ok;
        for (i, k) in GOAL_KINDS.iter().enumerate() {
            let Some(bound) = self.goals.bounds[i] else {
                continue;
            };
            if s.status != Status::Ok || !meets(k, bound, s) {
                self.missed[i] += 1;
                all = false;
            }
        }
        if all {
            self.met += 1;
            self.tokens += s.output_tokens;
        }
    }

    /// The section, over a window of `window_s` seconds.
    pub fn finish(self, window_s: f64) -> Goodput {
        let per_s = |n: f64| crate::stats::ratio(n, window_s);
        Goodput {
            goals: self.goals,
            goals_text: self.goals.to_string(),
            judged: self.judged,
            met: self.met,
            missed_by_goal: self
                .goals
                .iter()
                .map(|(k, _)| {
                    let i = GOAL_KINDS.iter().position(|g| g.key == k.key).unwrap_or(0);
                    (k.key, self.missed[i])
                })
                .collect(),
            requests_per_second: per_s(self.met as f64),
            output_tokens_per_second: per_s(self.tokens as f64).map(TokensPerSecond),
            share: crate::stats::ratio(self.met as f64, self.judged as f64),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::test_support::ts;
    use tpscope_model::Cause;

    fn ms(v: u64) -> Option<Duration> {
        Some(Duration::from_millis(v))
    }

    #[test]
    fn goals_read_tpscope_durations_and_vllm_milliseconds() {
        let g = parse_goals("ttft:500ms,tpot:50ms,e2e:10s").unwrap();
        assert_eq!(g.bounds, [ms(500), ms(50), ms(10_000)]);
        let v = parse_goals("ttft:500 tpot:50 e2el:10000").unwrap();
        assert_eq!(v, g);
        assert_eq!(parse_goals("TTFT:0.5s").unwrap().get("ttft"), ms(500));
        assert_eq!(g.to_string(), "ttft:500ms,tpot:50ms,e2e:10s");
        assert_eq!(parse_goals(&g.to_string()).unwrap(), g);
    }

    #[test]
    fn bad_goals_name_the_key_and_what_was_expected() {
        let e = parse_goals("ttft:500ms,itl:5ms").unwrap_err().to_string();
        assert!(
            e.contains("`itl`") && e.contains("ttft, tpot or e2e"),
            "{e}"
        );
        let e = parse_goals("tpot:fast").unwrap_err().to_string();
        assert!(e.contains("`tpot`") && e.contains("`fast`"), "{e}");
        let e = parse_goals("ttft=5ms").unwrap_err().to_string();
        assert!(e.contains("KEY:VALUE"), "{e}");
        assert_eq!(parse_goals(" , "), Err(BadGoals::Empty));
        assert_eq!(parse_goals("e2e:1s e2el:2"), Err(BadGoals::Twice("e2e")));
        assert!(parse_goals("ttft:-5").is_err());
        let a = parse_goals("ttft:1s").unwrap();
        assert_eq!(
            a.merged(parse_goals("ttft:2s").unwrap()),
            Err(BadGoals::Twice("ttft"))
        );
    }

    fn span(status: Status, first_ms: i64, last_ms: i64, tokens: u64) -> SpanFacts {
        SpanFacts {
            status,
            error_cause: (status == Status::Error).then_some(Cause::Http5xx),
            ..SpanFacts::ok(
                ts(0),
                Some(ts(1000)),
                Some(ts(1000 + first_ms)),
                Some(ts(1000 + last_ms)),
                ts(1000 + last_ms + 1),
                tokens,
            )
        }
    }

    #[test]
    fn ttft_goals_start_at_admission_not_at_the_queue() {
        // Queued a second before admission: a 500 ms TTFT goal judges the 100 ms
        // from admission, not the 1.1 s the backlog adds.
        let g = parse_goals("ttft:500ms").unwrap();
        assert!(g.met_by(&span(Status::Ok, 100, 900, 10)));
        assert!(!g.met_by(&span(Status::Ok, 600, 900, 10)));
    }

    #[test]
    fn failed_requests_never_meet_goals_and_single_tokens_meet_tpot() {
        let g = parse_goals("tpot:50ms,e2e:10s").unwrap();
        assert!(!g.met_by(&span(Status::Error, 10, 20, 3)));
        // tpot = 900 ms / 9 = 100 ms > 50 ms.
        assert!(!g.met_by(&span(Status::Ok, 100, 1000, 10)));
        assert!(g.met_by(&span(Status::Ok, 100, 100, 1)));
        let mut t = Tally::new(g);
        for s in [
            span(Status::Ok, 100, 200, 10),
            span(Status::Ok, 100, 1000, 10),
            span(Status::Error, 10, 20, 3),
            span(Status::Cancelled, 10, 20, 3),
        ] {
            t.add(&s);
        }
        let out = t.finish(2.0);
        assert_eq!((out.judged, out.met), (3, 1));
        assert_eq!(out.requests_per_second, Some(0.5));
        assert_eq!(out.output_tokens_per_second, Some(TokensPerSecond(5.0)));
        assert_eq!(out.missed_by_goal["tpot"], 2);
        assert_eq!(out.missed_by_goal["e2e"], 1);
        assert!((out.share.unwrap() - 1.0 / 3.0).abs() < 1e-12);
    }
}
