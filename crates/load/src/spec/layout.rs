//! The runs a benchmark's flags lay out: one, or one per sweep level (of the
//! concurrency or the rate), each with its cap, schedule and request count, and
//! the run's duration; ramps reshape them.

use std::sync::Arc;
use std::time::Duration;

use super::{DEFAULT_CONCURRENCY, DEFAULT_OPEN_DURATION, Flags, Level, SpecError, ramp};
use crate::schedule::{Arrival, Schedule, scale_offsets};
use crate::workload::Workload;
use crate::workload::trace::TraceEntry;

/// The levels, the swept parameter (`concurrency` or `rate`) and the duration.
pub(super) type Layout = (Vec<Level>, Option<&'static str>, Option<Duration>);

/// Lays out the runs of `a` over `workload` (`trace`: a replayed trace's entries;
/// `sessions`: whether the run is of multi-turn sessions).
pub(super) fn lay_out(
    a: &Flags,
    workload: &Workload,
    trace: Option<&[TraceEntry]>,
    sessions: bool,
    notes: &mut Vec<String>,
) -> Result<Layout, SpecError> {
    let arrival = match (a.arrival, a.burstiness) {
        (Some(x), _) => x,
        (None, Some(b)) => Arrival::from_burstiness(b),
        (None, None) => Arrival::Poisson,
    };
    let rates = a.rates();
    let open_rates: Vec<f64> = rates.iter().flatten().copied().collect();
    if !open_rates.is_empty() && open_rates.len() != rates.len() {
        return Err(SpecError::RateMix);
    }
    if a.arrival.is_some() && open_rates.is_empty() {
        return Err(SpecError::ArrivalWithoutRate);
    }
    if let Some(b) = a.burstiness.filter(|b| *b != 1.0 && open_rates.is_empty()) {
        // As in vLLM, where `--request-rate inf` sends every request at once.
        notes.push(format!(
            "--burstiness {b} shapes an open loop (--request-rate R); without one every request is ready at once and it has no effect"
        ));
    }
    if open_rates.len() > 1 && a.concurrency.len() > 1 {
        return Err(SpecError::TwoSweeps);
    }
    if trace.is_none() && a.time_scale != 1.0 {
        return Err(SpecError::TimeScaleWithoutTrace);
    }
    let mut sorted = a.concurrency.clone();
    sorted.sort_unstable();
    sorted.dedup();
    if sorted.len() != a.concurrency.len() {
        return Err(SpecError::RepeatedLevel);
    }
    let open = !open_rates.is_empty();
    if sessions && (open || trace.is_some()) {
        return Err(SpecError::SessionsOpenLoop);
    }
    let replay = trace.is_some() && !open;
    let file_len = workload.len().map(|n| n as u64);
    let default_requests = |cap: Option<u32>| -> Option<u64> {
        if let Some(n) = a.requests {
            // A replayed trace ends with its last entry.
            return Some(if replay {
                n.min(file_len.unwrap_or(n))
            } else {
                n
            });
        }
        if let Some(n) = file_len {
            return Some(n);
        }
        if open || a.duration.is_some() {
            // Bounded by time: in closed loop an endless backlog.
            return None;
        }
        Some((u64::from(cap.unwrap_or(DEFAULT_CONCURRENCY)) * 10).max(40))
    };
    let duration = match (
        a.duration,
        open && a.requests.is_none() && file_len.is_none(),
    ) {
        (Some(d), _) => Some(d),
        (None, true) => Some(DEFAULT_OPEN_DURATION),
        (None, false) => None,
    };
    if duration.is_some_and(|d| d.is_zero()) {
        return Err(SpecError::ZeroDuration);
    }
    let mut levels = Vec::new();
    let mut sweep = None;
    if open_rates.len() > 1 {
        sweep = Some("rate");
        let cap = a.concurrency.first().copied();
        let mut rs = open_rates.clone();
        rs.sort_by(f64::total_cmp);
        for r in rs {
            levels.push(Level {
                cap,
                schedule: Schedule::Rate { rate: r, arrival },
                requests: default_requests(cap),
                label: Some(format!("rate {r}")),
                value: r,
            });
        }
    } else {
        let caps: Vec<Option<u32>> = if a.concurrency.is_empty() {
            vec![if open || replay {
                None
            } else {
                Some(DEFAULT_CONCURRENCY)
            }]
        } else {
            sorted.iter().map(|c| Some(*c)).collect()
        };
        if caps.len() > 1 {
            sweep = Some("concurrency");
        }
        let schedule = if let Some(&r) = open_rates.first() {
            Schedule::Rate { rate: r, arrival }
        } else if let Some(t) = &trace {
            Schedule::Trace {
                offsets: Arc::new(scale_offsets(t.iter().map(|e| e.offset), a.time_scale)),
            }
        } else {
            Schedule::Backlog
        };
        for cap in caps {
            levels.push(Level {
                cap,
                schedule: schedule.clone(),
                requests: default_requests(cap),
                label: sweep.map(|_| format!("concurrency {}", cap.unwrap_or(0))),
                value: f64::from(cap.unwrap_or(0)),
            });
        }
    }
    if let Some(ramp) = a.ramp() {
        ramp::ramp_levels(&mut levels, ramp, duration, &a.concurrency, sessions)?;
    }
    Ok((levels, sweep, duration))
}
