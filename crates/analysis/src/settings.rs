//! The settings of an analysis as a user gives them — the flags of `report` and
//! `compare` (some of them `bench`'s too) and the keyword arguments of the Python
//! package's `analyze` and `compare` — validated once into [`Settings`]. Each
//! setting names itself the CLI's way ([`Setting::flag`]) and Python's
//! ([`Setting::key`]); the checks and their messages are the same for both. The
//! analysis part is [`Options`], which library callers may build directly.

use std::time::Duration;

use tpscope_model::import_format::Format;
use tpscope_model::units::parse_duration;
use tpscope_model::{BadTimeUnit, TimeUnit};

use crate::cost::Prices;
use crate::goodput::{Goals, parse_goals};
use crate::window::WindowSpec;

/// The share of a sweep level's requests that must meet the goals (`--slo-percentile 90`).
pub const DEFAULT_SLO_SHARE: f64 = 0.9;

/// How to analyse a run.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Options {
    /// The window.
    pub window: WindowSpec,
    /// Bucket length of the time series (`None`: no series).
    pub bucket: Option<Duration>,
    /// Prices for the cost section.
    pub prices: Prices,
    /// Warn when the exact and sampled gap fractions differ by more than this.
    pub gap_disagreement: f64,
    /// Latency goals for goodput (docs/design.md §15); `None`: no goodput section.
    pub goals: Option<Goals>,
    /// A sweep level meets the goals when at least this share of its requests
    /// met them (`--slo-percentile 90` is 0.9).
    pub slo_share: f64,
    /// The capacity ledger's hand-off threshold (`--handoff`).
    pub handoff: Duration,
    /// The pipeline's width for the inferred gap (`--pipeline-width`; `None`:
    /// the run record's, else the most in flight).
    pub pipeline_width: Option<u32>,
}

impl Default for Options {
    fn default() -> Self {
        Options {
            window: WindowSpec::Full,
            bucket: None,
            prices: Prices::default(),
            gap_disagreement: 0.02,
            goals: None,
            slo_share: DEFAULT_SLO_SHARE,
            handoff: crate::ledger::DEFAULT_HANDOFF,
            pipeline_width: None,
        }
    }
}

/// One setting of an analysis.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Setting {
    /// The window the figures cover.
    Window,
    /// The time series' bucket.
    Bucket,
    /// The unit of timestamps written as numbers.
    TimeUnit,
    /// [`Prices::per_hour`].
    PricePerHour,
    /// [`Prices::per_mtok_in`].
    PricePerMtokIn,
    /// [`Prices::per_mtok_out`].
    PricePerMtokOut,
    /// [`Prices::per_kwh`].
    PricePerKwh,
    /// Goodput goals.
    Goodput,
    /// The share of a sweep level's requests that must meet the goals.
    SloPercentile,
    /// The other tool whose results are imported on the fly.
    From,
    /// The capacity ledger's hand-off threshold.
    Handoff,
}

impl Setting {
    /// The CLI flag.
    pub fn flag(self) -> &'static str {
        match self {
            Setting::Window => "--window",
            Setting::Bucket => "--bucket",
            Setting::TimeUnit => "--time-unit",
            Setting::PricePerHour => "--price-per-hour",
            Setting::PricePerMtokIn => "--price-per-mtok-in",
            Setting::PricePerMtokOut => "--price-per-mtok-out",
            Setting::PricePerKwh => "--price-per-kwh",
            Setting::Goodput => "--goodput",
            Setting::SloPercentile => "--slo-percentile",
            Setting::From => "--from",
            Setting::Handoff => "--handoff",
        }
    }

    /// The argument's name in code (Python keyword arguments; `from` is a
    /// Python keyword, so the argument is `from_`).
    pub fn key(self) -> &'static str {
        match self {
            Setting::Window => "window",
            Setting::Bucket => "bucket",
            Setting::TimeUnit => "time_unit",
            Setting::PricePerHour => "price_per_hour",
            Setting::PricePerMtokIn => "price_per_mtok_in",
            Setting::PricePerMtokOut => "price_per_mtok_out",
            Setting::PricePerKwh => "price_per_kwh",
            Setting::Goodput => "goodput",
            Setting::SloPercentile => "slo_percentile",
            Setting::From => "from_",
            Setting::Handoff => "handoff",
        }
    }
}

/// A setting that is not valid: `reason` follows the setting's name
/// (`{flag}: {reason}`), as every caller writes it.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{reason}")]
pub struct BadSetting {
    /// Which setting.
    pub setting: Setting,
    /// What is wrong with its value.
    pub reason: String,
}

impl BadSetting {
    fn new(setting: Setting, reason: impl ToString) -> BadSetting {
        BadSetting {
            setting,
            reason: reason.to_string(),
        }
    }
}

/// The settings as given, before any is checked.
#[derive(Clone, Debug, PartialEq)]
pub struct SettingsText<'a> {
    /// `full`, `steady` or `FROM..TO`.
    pub window: &'a str,
    /// The time series' bucket (`None`: no series, as `compare`, whose bootstrap
    /// chooses each run's own).
    pub bucket: Option<&'a str>,
    /// `s`, `ms`, `us` or `ns` (`None`: the reader's default).
    pub time_unit: Option<&'a str>,
    /// Skip invalid records (counted by reason) instead of stopping at the first.
    pub skip_invalid: bool,
    /// Price of the deployment per hour.
    pub price_per_hour: Option<f64>,
    /// Price per million input tokens.
    pub price_per_mtok_in: Option<f64>,
    /// Price per million output tokens.
    pub price_per_mtok_out: Option<f64>,
    /// Price of a kWh (the GPUs' energy).
    pub price_per_kwh: Option<f64>,
    /// Goodput goals, each in [`parse_goals`]'s form; together they must not set
    /// a goal twice.
    pub goodput: Vec<&'a str>,
    /// Percentage of a sweep level's requests that must meet the goals.
    pub slo_percentile: f64,
    /// `auto` or a format's name (`None`: the files are span logs).
    pub from: Option<&'a str>,
    /// The capacity ledger's hand-off threshold (`None`: 10 ms).
    pub handoff: Option<&'a str>,
    /// The pipeline's width for the inferred gap (`None`: the run's).
    pub pipeline_width: Option<u32>,
}

impl Default for SettingsText<'_> {
    /// The settings when none is given.
    fn default() -> Self {
        SettingsText {
            window: "full",
            bucket: None,
            time_unit: None,
            skip_invalid: false,
            price_per_hour: None,
            price_per_mtok_in: None,
            price_per_mtok_out: None,
            price_per_kwh: None,
            goodput: Vec::new(),
            slo_percentile: DEFAULT_SLO_SHARE * 100.0,
            from: None,
            handoff: None,
            pipeline_width: None,
        }
    }
}

/// The settings of an analysis, validated.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Settings {
    /// How to analyse each run.
    pub options: Options,
    /// The unit of timestamps written as numbers.
    pub time_unit: Option<TimeUnit>,
    /// Skip invalid records instead of stopping at the first.
    pub skip_invalid: bool,
    /// Whether the files are other tools' results: `Some(None)` sniffs each
    /// file's format, `Some(Some(f))` reads them as `f`, `None` reads span logs.
    pub from: Option<Option<Format>>,
}

impl Settings {
    /// Checks every setting, in the order the CLI lists them; the first that is
    /// wrong is the error.
    pub fn new(t: &SettingsText<'_>) -> Result<Settings, BadSetting> {
        let time_unit = t
            .time_unit
            .map(|u| {
                u.parse::<TimeUnit>()
                    .map_err(|e: BadTimeUnit| BadSetting::new(Setting::TimeUnit, e))
            })
            .transpose()?;
        let bucket = t.bucket.map(parse_bucket).transpose()?;
        let window = t
            .window
            .parse::<WindowSpec>()
            .map_err(|e| BadSetting::new(Setting::Window, e))?;
        let prices = Prices {
            per_hour: price(Setting::PricePerHour, t.price_per_hour)?,
            per_mtok_in: price(Setting::PricePerMtokIn, t.price_per_mtok_in)?,
            per_mtok_out: price(Setting::PricePerMtokOut, t.price_per_mtok_out)?,
            per_kwh: price(Setting::PricePerKwh, t.price_per_kwh)?,
        };
        let goals = goals(&t.goodput)?;
        let slo_share = slo_percentile(t.slo_percentile)? / 100.0;
        let from = t.from.map(import_format).transpose()?;
        let handoff = match t.handoff {
            Some(h) => parse_duration(h).map_err(|e| BadSetting::new(Setting::Handoff, e))?,
            None => crate::ledger::DEFAULT_HANDOFF,
        };
        Ok(Settings {
            options: Options {
                window,
                bucket,
                prices,
                goals,
                slo_share,
                handoff,
                pipeline_width: t.pipeline_width,
                ..Options::default()
            },
            time_unit,
            skip_invalid: t.skip_invalid,
            from,
        })
    }
}

fn parse_bucket(text: &str) -> Result<Duration, BadSetting> {
    let bucket = parse_duration(text).map_err(|e| BadSetting::new(Setting::Bucket, e))?;
    if bucket.is_zero() {
        return Err(BadSetting::new(
            Setting::Bucket,
            "the bucket must be longer than 0",
        ));
    }
    Ok(bucket)
}

/// Refuses a negative or non-finite price.
pub fn price(setting: Setting, v: Option<f64>) -> Result<Option<f64>, BadSetting> {
    match v {
        Some(p) if !p.is_finite() || p < 0.0 => Err(BadSetting::new(
            setting,
            format!("{p} is not a non-negative price"),
        )),
        _ => Ok(v),
    }
}

/// The goals of every text together (`None`: none given).
pub fn goals(texts: &[&str]) -> Result<Option<Goals>, BadSetting> {
    let mut all: Option<Goals> = None;
    for text in texts {
        let g = parse_goals(text).map_err(|e| BadSetting::new(Setting::Goodput, e))?;
        all = Some(match all {
            None => g,
            Some(a) => a
                .merged(g)
                .map_err(|e| BadSetting::new(Setting::Goodput, e))?,
        });
    }
    Ok(all)
}

fn slo_percentile(p: f64) -> Result<f64, BadSetting> {
    if p > 0.0 && p <= 100.0 {
        Ok(p)
    } else {
        Err(BadSetting::new(Setting::SloPercentile, not_a_percentage(p)))
    }
}

fn not_a_percentage(text: impl std::fmt::Display) -> String {
    format!("`{text}` is not a percentage in (0, 100] (e.g. 90 for 90 % of requests)")
}

/// Reads `--slo-percentile`'s text (`90`, `90%`) as a percentage in (0, 100].
pub fn parse_slo_percentile(text: &str) -> Result<f64, String> {
    match text.trim().trim_end_matches('%').trim().parse::<f64>() {
        Ok(p) if p > 0.0 && p <= 100.0 => Ok(p),
        _ => Err(not_a_percentage(text)),
    }
}

/// An import format's name, or `auto` (`None`: sniffed per file).
pub fn import_format(text: &str) -> Result<Option<Format>, BadSetting> {
    if text == "auto" {
        return Ok(None);
    }
    text.parse::<Format>()
        .map(Some)
        .map_err(|e| BadSetting::new(Setting::From, e))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn bad(t: SettingsText<'_>) -> (Setting, String) {
        let e = Settings::new(&t).unwrap_err();
        (e.setting, e.to_string())
    }

    #[test]
    fn defaults_are_the_analysis_defaults() {
        let s = Settings::new(&SettingsText::default()).unwrap();
        assert_eq!(s.options, Options::default());
        assert_eq!((s.time_unit, s.skip_invalid, s.from), (None, false, None));
    }

    #[test]
    fn every_setting_is_read() {
        let s = Settings::new(&SettingsText {
            window: "10..70",
            bucket: Some("500ms"),
            time_unit: Some("ms"),
            skip_invalid: true,
            price_per_hour: Some(2.0),
            price_per_mtok_in: Some(0.5),
            price_per_mtok_out: Some(1.5),
            price_per_kwh: Some(0.25),
            goodput: vec!["ttft:500ms", "tpot:50ms"],
            slo_percentile: 95.0,
            from: Some("vllm"),
            handoff: Some("25ms"),
            pipeline_width: Some(4),
        })
        .unwrap();
        let o = s.options;
        assert_eq!(
            o.window,
            WindowSpec::Range {
                from: Duration::from_secs(10),
                to: Duration::from_secs(70)
            }
        );
        assert_eq!(o.bucket, Some(Duration::from_millis(500)));
        assert_eq!(o.handoff, Duration::from_millis(25));
        assert_eq!(o.pipeline_width, Some(4));
        assert_eq!(s.time_unit, Some(TimeUnit::Ms));
        assert!(s.skip_invalid);
        assert_eq!(
            (
                o.prices.per_hour,
                o.prices.per_mtok_in,
                o.prices.per_mtok_out,
                o.prices.per_kwh
            ),
            (Some(2.0), Some(0.5), Some(1.5), Some(0.25))
        );
        assert_eq!(
            o.goals.unwrap().to_string(),
            parse_goals("ttft:500ms,tpot:50ms").unwrap().to_string()
        );
        assert!((o.slo_share - 0.95).abs() < 1e-12);
        assert_eq!(s.from, Some(Some(Format::Vllm)));
        let auto = SettingsText {
            from: Some("auto"),
            ..SettingsText::default()
        };
        assert_eq!(Settings::new(&auto).unwrap().from, Some(None));
    }

    #[test]
    fn each_bad_setting_is_named_with_what_was_expected() {
        let d = SettingsText::default;
        let cases = [
            (
                SettingsText {
                    window: "soon",
                    ..d()
                },
                Setting::Window,
                "full, steady or FROM..TO",
            ),
            (
                SettingsText {
                    bucket: Some("0s"),
                    ..d()
                },
                Setting::Bucket,
                "the bucket must be longer than 0",
            ),
            (
                SettingsText {
                    bucket: Some("often"),
                    ..d()
                },
                Setting::Bucket,
                "is not a duration",
            ),
            (
                SettingsText {
                    time_unit: Some("h"),
                    ..d()
                },
                Setting::TimeUnit,
                "unknown time unit `h`",
            ),
            (
                SettingsText {
                    price_per_mtok_out: Some(-1.0),
                    ..d()
                },
                Setting::PricePerMtokOut,
                "-1 is not a non-negative price",
            ),
            (
                SettingsText {
                    price_per_hour: Some(f64::NAN),
                    ..d()
                },
                Setting::PricePerHour,
                "NaN is not a non-negative price",
            ),
            (
                SettingsText {
                    goodput: vec!["ttft:1s", "ttft:2s"],
                    ..d()
                },
                Setting::Goodput,
                "ttft",
            ),
            (
                SettingsText {
                    goodput: vec!["fast"],
                    ..d()
                },
                Setting::Goodput,
                "fast",
            ),
            (
                SettingsText {
                    slo_percentile: 150.0,
                    ..d()
                },
                Setting::SloPercentile,
                "`150` is not a percentage in (0, 100]",
            ),
            (
                SettingsText {
                    from: Some("locust"),
                    ..d()
                },
                Setting::From,
                "unknown format `locust`",
            ),
        ];
        for (text, setting, words) in cases {
            let (got, msg) = bad(text);
            assert_eq!(got, setting, "{msg}");
            assert!(msg.contains(words), "{setting:?}: {msg}");
        }
    }

    #[test]
    fn flags_and_keys_name_every_setting_apart() {
        let all = [
            Setting::Window,
            Setting::Bucket,
            Setting::TimeUnit,
            Setting::PricePerHour,
            Setting::PricePerMtokIn,
            Setting::PricePerMtokOut,
            Setting::Goodput,
            Setting::SloPercentile,
            Setting::From,
        ];
        for s in all {
            assert_eq!(s.flag().trim_start_matches("--").replace('-', "_"), {
                s.key().trim_end_matches('_').to_string()
            });
        }
    }

    #[test]
    fn slo_percentile_text_takes_a_percent_sign() {
        assert_eq!(parse_slo_percentile("90%"), Ok(90.0));
        assert_eq!(parse_slo_percentile(" 100 "), Ok(100.0));
        let e = parse_slo_percentile("0").unwrap_err();
        assert!(e.contains("`0` is not a percentage"), "{e}");
    }
}
