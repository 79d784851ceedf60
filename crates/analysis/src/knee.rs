//! The knee of a load sweep (pure): from one throughput-and-latency point per
//! level, where more load stops buying throughput and only adds latency.

/// One sweep level's figures (from the analysis of its run).
#[derive(Clone, Debug, PartialEq)]
pub struct LevelPoint {
    /// The level: a concurrency cap or a request rate.
    pub level: f64,
    /// System output tokens per second over the run's window.
    pub system_tps: Option<f64>,
    /// Latency the knee is judged against (e.g. TTFT p99 as the user saw it), seconds.
    pub latency_s: Option<f64>,
}

/// Where the knee is.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Knee {
    /// At this row: the lowest level reaching [`KNEE_SHARE`] of the best throughput;
    /// levels above it add latency for at most the remaining 10 %.
    At(usize),
    /// Throughput was still rising at the highest level: sweep higher.
    NotReached,
    /// Fewer than two levels with a throughput: no knee can be judged.
    Unknown,
}

/// The share of the best throughput that counts as "at capacity".
pub const KNEE_SHARE: f64 = 0.9;

/// Finds the knee of rows sorted by increasing level.
pub fn knee(points: &[LevelPoint]) -> Knee {
    let with: Vec<(usize, f64)> = points
        .iter()
        .enumerate()
        .filter_map(|(i, p)| p.system_tps.filter(|t| t.is_finite()).map(|t| (i, t)))
        .collect();
    if with.len() < 2 {
        return Knee::Unknown;
    }
    let best = with.iter().map(|&(_, t)| t).fold(f64::MIN, f64::max);
    let Some(&(i, _)) = with.iter().find(|&&(_, t)| t >= KNEE_SHARE * best) else {
        return Knee::Unknown;
    };
    if Some(&i) == with.last().map(|(i, _)| i) {
        Knee::NotReached
    } else {
        Knee::At(i)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pts(tps: &[Option<f64>]) -> Vec<LevelPoint> {
        tps.iter()
            .enumerate()
            .map(|(i, t)| LevelPoint {
                level: (1 << i) as f64,
                system_tps: *t,
                latency_s: Some(i as f64),
            })
            .collect()
    }

    #[test]
    fn the_knee_is_the_first_level_near_the_best_throughput() {
        assert_eq!(
            knee(&pts(&[Some(100.0), Some(700.0), Some(950.0), Some(1000.0)])),
            Knee::At(2)
        );
        // Throughput falling past the peak (overload) still has a knee.
        assert_eq!(
            knee(&pts(&[Some(100.0), Some(1000.0), Some(800.0)])),
            Knee::At(1)
        );
    }

    #[test]
    fn rising_to_the_end_means_not_reached() {
        assert_eq!(
            knee(&pts(&[Some(100.0), Some(200.0), Some(400.0)])),
            Knee::NotReached
        );
    }

    #[test]
    fn too_few_points_have_no_knee() {
        assert_eq!(knee(&pts(&[Some(100.0)])), Knee::Unknown);
        assert_eq!(knee(&pts(&[None, Some(5.0), None])), Knee::Unknown);
    }
}
