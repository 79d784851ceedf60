//! The whole run's occupancy (in-flight, queue depth and cap) as steps, and its gap
//! time as bands: exact for small runs, binned into [`OCCUPANCY_BINS`] for busy ones
//! so that the charts stay bounded in size and keep every spike.

use std::time::Duration;

use tpscope_model::Timestamp;

use super::{
    GapBand, MAX_EXACT_STEPS, MAX_GAP_INTERVALS, OCCUPANCY_BINS, OccupancySeries, OccupancyStep,
};
use crate::input::RunInput;
use crate::steps::Steps;

/// The occupancy steps and gap bands of a run, offsets from `origin`, and whether
/// the bands are binned.
pub(super) fn occupancy_and_gaps(
    input: &RunInput,
    origin: Timestamp,
) -> (OccupancySeries, Vec<GapBand>, bool) {
    let steps = Steps::new(input);
    let segments: Vec<_> = steps.segments().collect();
    let (Some(first), Some(last)) = (segments.first(), segments.last()) else {
        return (OccupancySeries::default(), Vec::new(), false);
    };
    let (t0, t1) = (first.start.unix_nanos(), last.end.unix_nanos());
    let o = origin.unix_nanos();
    let at = |ns: i64| Duration::from_nanos((ns - o).max(0) as u64);
    let end = at(t1);

    // Exact gap intervals, contiguous ones merged.
    let mut gaps: Vec<(i64, i64)> = Vec::new();
    for s in segments.iter().filter(|s| s.is_gap()) {
        let (a, b) = (s.start.unix_nanos(), s.end.unix_nanos());
        match gaps.last_mut() {
            Some(g) if g.1 == a => g.1 = b,
            _ => gaps.push((a, b)),
        }
    }

    let span_ns = (t1 - t0).max(1);
    let bins = OCCUPANCY_BINS as i64;
    let bin_ns = (span_ns + bins - 1) / bins;
    let bin_of = |ns: i64| (((ns - t0) / bin_ns).clamp(0, bins - 1)) as usize;

    let occupancy = if segments.len() <= MAX_EXACT_STEPS {
        OccupancySeries {
            steps: segments
                .iter()
                .map(|s| OccupancyStep {
                    at: at(s.start.unix_nanos()),
                    in_flight_min: s.in_flight,
                    in_flight_max: s.in_flight,
                    queue_min: s.queue_depth,
                    queue_max: s.queue_depth,
                    cap: s.cap,
                })
                .collect(),
            end,
            bin: None,
        }
    } else {
        let mut steps: Vec<Option<OccupancyStep>> = vec![None; OCCUPANCY_BINS];
        for s in &segments {
            let (a, b) = (s.start.unix_nanos(), s.end.unix_nanos());
            for slot in steps.iter_mut().take(bin_of(b - 1) + 1).skip(bin_of(a)) {
                let st = slot.get_or_insert(OccupancyStep {
                    at: Duration::ZERO,
                    in_flight_min: u32::MAX,
                    in_flight_max: 0,
                    queue_min: u32::MAX,
                    queue_max: 0,
                    cap: s.cap,
                });
                st.in_flight_min = st.in_flight_min.min(s.in_flight);
                st.in_flight_max = st.in_flight_max.max(s.in_flight);
                st.queue_min = st.queue_min.min(s.queue_depth);
                st.queue_max = st.queue_max.max(s.queue_depth);
                st.cap = match (st.cap, s.cap) {
                    (Some(x), Some(y)) => Some(x.min(y)),
                    (x, y) => x.or(y),
                };
            }
        }
        OccupancySeries {
            steps: steps
                .into_iter()
                .enumerate()
                .filter_map(|(i, s)| {
                    s.map(|mut s| {
                        s.at = at(t0 + i as i64 * bin_ns);
                        s
                    })
                })
                .collect(),
            end,
            bin: Some(Duration::from_nanos(bin_ns as u64)),
        }
    };

    if gaps.len() <= MAX_GAP_INTERVALS {
        let bands = gaps
            .iter()
            .map(|(a, b)| GapBand {
                from: at(*a),
                to: at(*b),
                share: 1.0,
            })
            .collect();
        return (occupancy, bands, false);
    }
    let mut gap_ns = vec![0i64; OCCUPANCY_BINS];
    for (a, b) in gaps {
        for (i, slot) in gap_ns
            .iter_mut()
            .enumerate()
            .take(bin_of(b - 1) + 1)
            .skip(bin_of(a))
        {
            let lo = t0 + i as i64 * bin_ns;
            *slot += (b.min(lo + bin_ns) - a.max(lo)).max(0);
        }
    }
    let bands = gap_ns
        .iter()
        .enumerate()
        .filter(|(_, g)| **g > 0)
        .map(|(i, g)| {
            let lo = t0 + i as i64 * bin_ns;
            let hi = (lo + bin_ns).min(t1);
            GapBand {
                from: at(lo),
                to: at(hi),
                share: (*g as f64 / (hi - lo).max(1) as f64).min(1.0),
            }
        })
        .collect();
    (occupancy, bands, true)
}
