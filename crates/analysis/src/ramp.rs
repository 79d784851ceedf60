//! How a ramped run's throughput followed its load (pure): the window's time
//! series cut into equal segments, each with the load it offered (the cap in
//! force, or requests queued per second) and the throughput it got, and the knee
//! of those points (the sweep's rule, [`crate::knee`]): the load above which more
//! load stopped buying throughput.

use serde::Serialize;

use crate::input::RunInput;
use crate::knee::{Knee, LevelPoint, knee};
use crate::series::TimeSeries;
use crate::window::Window;

/// Segments a ramp is cut into (fewer when the series has fewer buckets).
pub const SEGMENTS: usize = 10;

/// One segment of the ramp.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct RampPoint {
    /// Segment start, seconds from the window start.
    pub from_s: f64,
    /// Segment end, seconds from the window start.
    pub to_s: f64,
    /// The load offered: the time-weighted cap (concurrency), or requests queued
    /// per second (rate); `None` when the cap was unknown throughout.
    pub load: Option<f64>,
    /// Output tokens per second of the segment.
    pub system_tps: Option<f64>,
}

/// How throughput followed a ramp.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct RampFollow {
    /// What the ramp raised: `rate` or `concurrency` (the run record's
    /// `load.ramp_up.applies_to`).
    pub applies_to: String,
    /// The segments, in time order.
    pub points: Vec<RampPoint>,
    /// The knee among the segments (an index into `points`).
    pub knee: Knee,
}

impl RampFollow {
    /// One sentence for a human reader.
    pub fn sentence(&self) -> String {
        let rate = self.applies_to == "rate";
        let load = |l: Option<f64>| match (l, rate) {
            (None, _) => "?".to_string(),
            (Some(l), true) => format!("{l:.1} req/s"),
            (Some(l), false) => format!("a cap of {l:.0}"),
        };
        let best = self
            .points
            .iter()
            .filter_map(|p| p.system_tps)
            .fold(None, |m: Option<f64>, t| Some(m.map_or(t, |m| m.max(t))));
        match (&self.knee, best) {
            (Knee::At(i), Some(best)) => {
                let p = &self.points[*i];
                format!(
                    "throughput followed the load up to {} ({:.0} tok/s from {:.1} s); above \
                     it the ramp added load but throughput stayed at {:.0} tok/s at most: the \
                     server's knee",
                    load(p.load),
                    p.system_tps.unwrap_or(0.0),
                    p.from_s,
                    best
                )
            }
            (Knee::NotReached, _) => format!(
                "throughput still rose with the load at the ramp's end ({}): the knee is above \
                 it; ramp higher",
                load(self.points.last().and_then(|p| p.load))
            ),
            _ => "too few segments with throughput to tell where it stopped following".into(),
        }
    }
}

/// How throughput followed the ramp of `input`, when its run record says it was
/// ramped and the window has a time series.
pub(crate) fn ramp_follow(input: &RunInput, ts: &TimeSeries, w: &Window) -> Option<RampFollow> {
    let applies_to = input
        .load_field("ramp_up")?
        .get("applies_to")?
        .as_str()?
        .to_string();
    let w0 = w.start.unix_nanos();
    // The ramp ends with the last admission: the drain after it (in-flight work
    // finishing, nothing new let in) is not the server's answer to more load.
    let last_admitted = input
        .spans
        .iter()
        .filter_map(|s| s.admitted_at)
        .map(|t| t.unix_nanos())
        .max()?;
    let n = ts
        .buckets
        .iter()
        .take_while(|b| w0 + (b.start.as_nanos() as i64) < last_admitted)
        .count();
    if n == 0 {
        return None;
    }
    let segments = SEGMENTS.min(n);
    let mut points = Vec::with_capacity(segments);
    for k in 0..segments {
        let bs = &ts.buckets[k * n / segments..(k + 1) * n / segments];
        let (Some(first), Some(last)) = (bs.first(), bs.last()) else {
            continue;
        };
        let from = first.start;
        let to = last.start + last.duration;
        let secs = (to - from).as_secs_f64();
        let tokens: f64 = bs.iter().map(|b| b.tokens).sum();
        let load = if applies_to == "rate" {
            let (a, b) = (w0 + from.as_nanos() as i64, w0 + to.as_nanos() as i64);
            let queued = input
                .spans
                .iter()
                .filter(|s| (a..b).contains(&s.queued_at.unix_nanos()))
                .count();
            (secs > 0.0).then(|| queued as f64 / secs)
        } else {
            let (sum, dur) = bs.iter().fold((0.0, 0.0), |(s, d), b| match b.cap {
                Some(c) => (
                    s + f64::from(c) * b.duration.as_secs_f64(),
                    d + b.duration.as_secs_f64(),
                ),
                None => (s, d),
            });
            (dur > 0.0).then(|| sum / dur)
        };
        points.push(RampPoint {
            from_s: from.as_secs_f64(),
            to_s: to.as_secs_f64(),
            load,
            system_tps: (secs > 0.0).then(|| tokens / secs),
        });
    }
    let levels: Vec<LevelPoint> = points
        .iter()
        .map(|p| LevelPoint {
            level: p.load.unwrap_or(f64::NAN),
            system_tps: p.system_tps.filter(|_| p.load.is_some()),
            latency_s: None,
        })
        .collect();
    // The sweep's rule (the first level within 10 % of the best) would name a
    // knee near the end of a ramp that still rises in step with its load.
    let knee = if still_following(&points) {
        Knee::NotReached
    } else {
        knee(&levels)
    };
    Some(RampFollow {
        applies_to,
        knee,
        points,
    })
}

/// Whether, over the ramp's last third, throughput grew at least half as much
/// (relatively) as the load did.
fn still_following(points: &[RampPoint]) -> bool {
    let both: Vec<(f64, f64)> = points
        .iter()
        .filter_map(|p| Some((p.load?, p.system_tps?)))
        .filter(|&(l, t)| l > 0.0 && t > 0.0)
        .collect();
    let n = both.len();
    if n < 3 {
        return false;
    }
    let (a, b) = (both[n - 1 - (n / 3).max(1)], both[n - 1]);
    let load_gain = b.0 / a.0 - 1.0;
    load_gain > 0.0 && b.1 / a.1 - 1.0 >= 0.5 * load_gain
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;
    use crate::input::SpanFacts;
    use crate::report::{Bucket, WindowKind};
    use crate::test_support::{capped_run, ts};

    fn series(caps_tps: &[(u32, f64)]) -> TimeSeries {
        TimeSeries {
            bucket: Duration::from_secs(1),
            buckets: caps_tps
                .iter()
                .enumerate()
                .map(|(i, &(cap, tps))| Bucket {
                    start: Duration::from_secs(i as u64),
                    duration: Duration::from_secs(1),
                    tokens: tps,
                    system_tps: None,
                    in_flight: 0.0,
                    queue_depth: 0.0,
                    cap: Some(cap),
                    gap: Duration::ZERO,
                    backlog: Duration::ZERO,
                })
                .collect(),
        }
    }

    fn window(secs: u64) -> Window {
        Window {
            kind: WindowKind::Full,
            start: ts(0),
            end: ts(secs as i64 * 1000),
            duration: Duration::from_secs(secs),
            from: Duration::ZERO,
            to: Duration::from_secs(secs),
        }
    }

    /// A span queued and admitted at `ms`.
    fn span_at(ms: i64) -> SpanFacts {
        let t = ts(ms);
        SpanFacts::ok(t, Some(t), Some(t), Some(t), t, 1)
    }

    /// A ramped run whose last admission is at `last_ms`.
    fn ramped(applies_to: &str, last_ms: i64) -> RunInput {
        let mut input = capped_run(10);
        input.run.as_mut().unwrap().load = serde_json::json!({
            "mode": "closed_loop",
            "ramp_up": {"shape": "linear", "applies_to": applies_to, "from": 1, "to": 10, "over": "duration"}
        });
        input.push_span(span_at(last_ms), None);
        input
    }

    #[test]
    fn a_cap_ramp_names_the_cap_where_throughput_stopped_following() {
        // Throughput grows with the cap up to 6, then flattens.
        let steps: Vec<(u32, f64)> = (1..=10).map(|c| (c, 100.0 * f64::from(c.min(6)))).collect();
        let f = ramp_follow(&ramped("concurrency", 9_500), &series(&steps), &window(10)).unwrap();
        assert_eq!(f.points.len(), 10);
        assert_eq!(f.knee, Knee::At(5), "{f:?}");
        assert_eq!(f.points[5].load, Some(6.0));
        assert!(
            f.sentence().contains("up to a cap of 6 "),
            "{}",
            f.sentence()
        );
    }

    /// Against the sim, a cap ramp to 64 still rising at its end was called a knee
    /// at 64: the drain after the last admission (throughput falling as in-flight
    /// work finished) counted as the server's answer to more load.
    #[test]
    fn a_ramp_still_rising_at_its_end_says_ramp_higher_and_its_drain_is_left_out() {
        let mut steps: Vec<(u32, f64)> = (1..=10).map(|c| (c, 100.0 * f64::from(c))).collect();
        steps.push((10, 400.0));
        let f = ramp_follow(&ramped("concurrency", 9_500), &series(&steps), &window(11)).unwrap();
        assert_eq!(f.points.len(), 10, "{f:?}");
        assert_eq!(f.knee, Knee::NotReached);
        assert!(f.sentence().contains("ramp higher"));
    }

    #[test]
    fn a_rate_ramp_counts_requests_queued_per_second_and_an_unramped_run_has_none() {
        let mut input = ramped("rate", 0);
        for i in 1..20i64 {
            input.push_span(span_at(i * 400), None);
        }
        let steps: Vec<(u32, f64)> = (0..8).map(|_| (10, 500.0)).collect();
        let f = ramp_follow(&input, &series(&steps), &window(8)).unwrap();
        assert_eq!(f.points[0].load, Some(3.0)); // 0, 400 and 800 ms
        assert!(ramp_follow(&capped_run(4), &series(&steps), &window(8)).is_none());
    }
}
