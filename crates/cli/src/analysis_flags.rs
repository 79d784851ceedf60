//! What `report` and `compare` share: the flags that choose how span logs are read
//! and analysed (window, timestamp unit, invalid records, prices, goodput goals,
//! imports), validated once into [`Settings`] (as the Python package's arguments
//! are), and writing the rendered bytes out. `bench` reuses the goodput flags.

use std::io::Write;
use std::path::Path;

use tpscope_analysis::settings::parse_slo_percentile;
use tpscope_analysis::{BadSetting, DEFAULT_SLO_SHARE, Goals, Settings, SettingsText};

use crate::exit::ResultExt;

/// The reading and analysis flags of `report` and `compare`.
#[derive(clap::Args, Debug, Clone)]
pub struct AnalysisFlags {
    /// The window the figures cover: full, steady, or FROM..TO in seconds from the run's start (e.g. 10..70).
    #[arg(long, default_value = "full", value_name = "full|steady|FROM..TO")]
    pub window: String,
    /// Unit of timestamps written as numbers (since the Unix epoch).
    #[arg(long, value_name = "s|ms|us|ns")]
    pub time_unit: Option<String>,
    /// Skip invalid records (counted and reported by reason) instead of stopping at the first.
    #[arg(long)]
    pub skip_invalid: bool,
    /// Price of the deployment per hour (for cost per million output tokens and per completion).
    #[arg(long, value_name = "PRICE")]
    pub price_per_hour: Option<f64>,
    /// Price per million input tokens (API pricing).
    #[arg(long, value_name = "PRICE")]
    pub price_per_mtok_in: Option<f64>,
    /// Price per million output tokens (API pricing).
    #[arg(long, value_name = "PRICE")]
    pub price_per_mtok_out: Option<f64>,
    /// Price of a kWh (the GPUs' energy cost, with --gpu-metrics scrapes in the log).
    #[arg(long, value_name = "PRICE")]
    pub price_per_kwh: Option<f64>,
    /// The capacity ledger's hand-off threshold: a freed slot refilled within
    /// this long of work waiting for it was a hand-off, longer was held back.
    #[arg(long, default_value = "10ms", value_name = "DUR")]
    pub handoff: String,
    /// Goodput goals.
    #[command(flatten)]
    pub goodput: GoodputFlags,
    /// How many requests the pipeline keeps in flight, for the gap inferred
    /// when a log lacks queue times (default: the most seen in flight).
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(1..))]
    pub pipeline_width: Option<u32>,
    /// The files are another tool's results, imported on the fly: auto, vllm, aiperf, guidellm, genai-bench, inference-perf, llmperf, otlp.
    #[arg(long, value_name = "FORMAT")]
    pub from: Option<String>,
}

/// The goodput flags of `report`, `compare` and `bench` (docs/design.md §15).
#[derive(clap::Args, Debug, Clone)]
pub struct GoodputFlags {
    /// Latency goals for goodput, e.g. ttft:500ms,tpot:50ms,e2e:10s (TTFT from
    /// admission; e2e from admission to release). vLLM's form is read too:
    /// "ttft:500 tpot:50 e2el:10000" (bare numbers are milliseconds). Repeatable.
    #[arg(long, value_name = "GOALS", value_parser = parse_goals_arg)]
    pub goodput: Vec<String>,
    /// A sweep level is within the goals when at least this percentage of its
    /// requests met them (the sweep table names the highest such level).
    #[arg(long, value_name = "P", default_value_t = 90.0, value_parser = parse_slo_percentile)]
    pub slo_percentile: f64,
}

impl Default for GoodputFlags {
    /// The flags as given when none is.
    fn default() -> Self {
        GoodputFlags {
            goodput: Vec::new(),
            slo_percentile: DEFAULT_SLO_SHARE * 100.0,
        }
    }
}

/// Checks a `--goodput` value as clap reads it (the goals are read again, with
/// the others, into [`Settings`]).
fn parse_goals_arg(s: &str) -> Result<String, String> {
    s.parse::<Goals>().map_err(|e| e.to_string())?;
    Ok(s.to_string())
}

/// A bad setting, named by its flag.
pub fn flag_error(e: BadSetting) -> anyhow::Error {
    anyhow::anyhow!("{}: {e}", e.setting.flag())
}

impl GoodputFlags {
    /// The `--goodput` values as given.
    pub fn texts(&self) -> Vec<&str> {
        self.goodput.iter().map(String::as_str).collect()
    }

    /// The goals of every `--goodput` together (`None`: none given), checked as
    /// the analysis settings check them.
    pub fn goals(&self) -> anyhow::Result<Option<Goals>> {
        let s = Settings::new(&SettingsText {
            goodput: self.texts(),
            slo_percentile: self.slo_percentile,
            ..SettingsText::default()
        })
        .map_err(flag_error)?;
        Ok(s.options.goals)
    }
}

impl Default for AnalysisFlags {
    /// The flags as given when none is.
    fn default() -> Self {
        AnalysisFlags {
            window: "full".into(),
            time_unit: None,
            skip_invalid: false,
            price_per_hour: None,
            price_per_mtok_in: None,
            price_per_mtok_out: None,
            price_per_kwh: None,
            goodput: GoodputFlags::default(),
            handoff: "10ms".into(),
            pipeline_width: None,
            from: None,
        }
    }
}

impl AnalysisFlags {
    /// The flags as given, with `bucket` as the time series' bucket.
    pub fn text<'a>(&'a self, bucket: Option<&'a str>) -> SettingsText<'a> {
        SettingsText {
            window: &self.window,
            bucket,
            time_unit: self.time_unit.as_deref(),
            skip_invalid: self.skip_invalid,
            price_per_hour: self.price_per_hour,
            price_per_mtok_in: self.price_per_mtok_in,
            price_per_mtok_out: self.price_per_mtok_out,
            price_per_kwh: self.price_per_kwh,
            goodput: self.goodput.texts(),
            slo_percentile: self.goodput.slo_percentile,
            from: self.from.as_deref(),
            handoff: Some(&self.handoff),
            pipeline_width: self.pipeline_width,
        }
    }

    /// The flags validated (each error names its flag), with `bucket` (as given to
    /// `--bucket`) as the time series' bucket.
    pub fn settings(&self, bucket: Option<&str>) -> anyhow::Result<Settings> {
        Settings::new(&self.text(bucket)).map_err(flag_error)
    }
}

/// Writes rendered bytes to `path` (named by `flag` in errors; never replacing a
/// file without `overwrite`, see [`crate::out_file`]), or to standard output without
/// one. A write error is a runtime failure (exit 1) when `runtime_failure` is set
/// (`compare` leaves it unset: its exit 1 means a criterion failed), except a broken
/// pipe on standard output, which `main` treats as success.
pub fn write_out(
    bytes: &[u8],
    path: Option<&Path>,
    flag: &str,
    overwrite: bool,
    runtime_failure: bool,
) -> anyhow::Result<()> {
    match path {
        Some(path) if path != Path::new("-") => crate::out_file::write(
            crate::out_file::Target { flag, path },
            overwrite,
            runtime_failure,
            bytes,
        ),
        _ => {
            let mut out = std::io::stdout().lock();
            out.write_all(bytes)
                .and_then(|()| out.flush())
                .map_err(|e| {
                    if runtime_failure && e.kind() != std::io::ErrorKind::BrokenPipe {
                        Err::<(), _>(e).failure().unwrap_err()
                    } else {
                        e.into()
                    }
                })
        }
    }
}
