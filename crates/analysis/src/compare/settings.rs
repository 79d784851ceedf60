//! The checks a comparison's settings must pass before any run is read, shared by
//! the CLI's `compare` flags and the Python package's `compare` arguments (each
//! names the setting its own way: [`Setting::flag`], [`Setting::key`]).

use super::CompareConfig;

/// One setting of a comparison.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Setting {
    /// The intervals' coverage.
    Confidence,
    /// Bootstrap resamples.
    Resamples,
    /// [`super::Thresholds::min_tps_gain`].
    MinTpsGain,
    /// [`super::Thresholds::max_success_drop`].
    MaxSuccessDrop,
    /// [`super::Thresholds::min_gap_drop`].
    MinGapDrop,
    /// [`super::Thresholds::max_retry_rise`].
    MaxRetryRise,
    /// [`super::Thresholds::max_goodput_drop`].
    MaxGoodputDrop,
}

impl Setting {
    /// The CLI flag.
    pub fn flag(self) -> &'static str {
        match self {
            Setting::Confidence => "--confidence",
            Setting::Resamples => "--resamples",
            Setting::MinTpsGain => "--min-tps-gain",
            Setting::MaxSuccessDrop => "--max-success-drop",
            Setting::MinGapDrop => "--min-gap-drop",
            Setting::MaxRetryRise => "--max-retry-rise",
            Setting::MaxGoodputDrop => "--max-goodput-drop",
        }
    }

    /// The argument's name in code (Python keyword arguments).
    pub fn key(self) -> &'static str {
        match self {
            Setting::Confidence => "confidence",
            Setting::Resamples => "resamples",
            Setting::MinTpsGain => "min_tps_gain",
            Setting::MaxSuccessDrop => "max_success_drop",
            Setting::MinGapDrop => "min_gap_drop",
            Setting::MaxRetryRise => "max_retry_rise",
            Setting::MaxGoodputDrop => "max_goodput_drop",
        }
    }
}

/// A setting out of its range: `reason` follows the value as the user wrote it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{reason}")]
pub struct BadSetting {
    /// Which setting.
    pub setting: Setting,
    /// What is wrong with its value (e.g. `is not between 0 and 100%`).
    pub reason: &'static str,
}

impl CompareConfig {
    /// Checks every setting's range (shares as fractions: 0.05 is 5%).
    pub fn check(&self) -> Result<(), BadSetting> {
        let bad = |setting, reason| Err(BadSetting { setting, reason });
        let t = &self.thresholds;
        let level = self.bootstrap.level;
        if !(level > 0.0 && level < 1.0) {
            return bad(Setting::Confidence, "is not between 0 and 100% (exclusive)");
        }
        if self.bootstrap.resamples == 0 || self.bootstrap.resamples > 1_000_000 {
            return bad(Setting::Resamples, "is not between 1 and 1000000");
        }
        for (setting, v) in [
            (Setting::MinTpsGain, t.min_tps_gain),
            (Setting::MaxSuccessDrop, t.max_success_drop),
            (Setting::MinGapDrop, t.min_gap_drop),
            (Setting::MaxGoodputDrop, t.max_goodput_drop),
        ] {
            if !v.is_finite() {
                return bad(setting, "is not a finite number");
            }
        }
        if t.min_tps_gain <= -1.0 {
            return bad(
                Setting::MinTpsGain,
                "would accept any loss (must be above -100%)",
            );
        }
        if !(0.0..=1.0).contains(&t.max_success_drop) {
            return bad(Setting::MaxSuccessDrop, "is not between 0 and 100%");
        }
        if !(-1.0..=1.0).contains(&t.min_gap_drop) {
            return bad(Setting::MinGapDrop, "is not between -100% and 100%");
        }
        if !t.max_retry_rise.is_finite() || t.max_retry_rise < 0.0 {
            return bad(
                Setting::MaxRetryRise,
                "is not a non-negative number of retries per span",
            );
        }
        if !(0.0..1.0).contains(&t.max_goodput_drop) {
            return bad(
                Setting::MaxGoodputDrop,
                "is not between 0 and 100% (exclusive)",
            );
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn settings_out_of_range_are_named_by_flag_and_key() {
        assert_eq!(CompareConfig::default().check(), Ok(()));
        let mut c = CompareConfig::default();
        c.bootstrap.level = 1.0;
        assert_eq!(c.check().unwrap_err().setting, Setting::Confidence);
        let mut c = CompareConfig::default();
        c.thresholds.min_tps_gain = f64::NAN;
        let e = c.check().unwrap_err();
        assert_eq!(
            (e.setting.flag(), e.setting.key()),
            ("--min-tps-gain", "min_tps_gain")
        );
        let mut c = CompareConfig::default();
        c.thresholds.max_retry_rise = -0.5;
        assert_eq!(c.check().unwrap_err().setting, Setting::MaxRetryRise);
    }
}
