//! `--ramp-up` in a spec: which knob it ramps (the rate of an open loop, the cap
//! of a closed loop), over what (`--duration` when the run has one, else its
//! request count), what it cannot ramp, and how the run record states it.

use std::time::Duration;

use super::{Level, SpecError};
use crate::ramp::{Ramp, RampOver, RampPlan, RampShape};
use crate::schedule::Schedule;
use crate::spec::settings::RampSettings;

/// Turns the one level's schedule into its ramped form.
pub(super) fn ramp_levels(
    levels: &mut [Level],
    ramp: Ramp,
    duration: Option<Duration>,
    concurrency: &[u32],
    sessions: bool,
) -> Result<(), SpecError> {
    let bad = |m: String| Err(SpecError::Ramp(m));
    if Ramp::new(ramp.shape, ramp.from, ramp.to).is_none() {
        return bad(format!(
            "`{ramp}` cannot ramp up: FROM must be at least 0 and below TO (above 0 for exponential)"
        ));
    }
    if sessions {
        return bad(
            "multi-turn sessions cannot be ramped (leave out --sessions or --ramp-up)".into(),
        );
    }
    let [level] = levels else {
        return bad("a sweep cannot be ramped: give one --rate or one --concurrency".into());
    };
    let over = match (duration, level.requests) {
        (Some(d), _) => RampOver::Duration(d),
        (None, Some(n)) => RampOver::Requests(n),
        (None, None) => return bad("give --duration or --requests to ramp over".into()),
    };
    let plan = RampPlan { ramp, over };
    level.schedule = match &level.schedule {
        Schedule::Rate { rate, arrival } => {
            if *rate != ramp.to {
                return bad(format!(
                    "the ramp ends at the rate: give --rate {} (the rate it ends at), not {rate}",
                    ramp.to
                ));
            }
            Schedule::RampedRate {
                ramp: plan,
                arrival: *arrival,
            }
        }
        Schedule::Backlog => {
            if ramp.from.fract() != 0.0 || ramp.to.fract() != 0.0 || ramp.from < 1.0 {
                return bad(format!(
                    "a closed loop ramps its concurrency: `{ramp}` needs whole numbers from 1 (or give --rate to ramp the rate)"
                ));
            }
            if let Some(c) = concurrency.first().filter(|c| f64::from(**c) != ramp.to) {
                return bad(format!(
                    "the ramp ends at the concurrency: give --concurrency {} (the cap it ends at), not {c}",
                    ramp.to
                ));
            }
            level.cap = Some(ramp.to as u32);
            Schedule::RampedBacklog { ramp: plan }
        }
        Schedule::Trace { .. } => {
            return bad(
                "a trace's own arrival times cannot be ramped: give --rate to use only its lengths"
                    .into(),
            );
        }
        Schedule::RampedRate { .. } | Schedule::RampedBacklog { .. } => level.schedule.clone(),
    };
    Ok(())
}

/// The run record's `ramp_up`, for a ramped schedule.
pub(super) fn settings(schedule: &Schedule) -> Option<RampSettings> {
    let (plan, applies_to) = match schedule {
        Schedule::RampedRate { ramp, .. } => (ramp, "rate"),
        Schedule::RampedBacklog { ramp } => (ramp, "concurrency"),
        _ => return None,
    };
    Some(RampSettings {
        shape: match plan.ramp.shape {
            RampShape::Linear => "linear",
            RampShape::Exponential => "exponential",
        },
        applies_to,
        from: plan.ramp.from,
        to: plan.ramp.to,
        over: plan.over_name(),
    })
}
