//! What `report` and `compare` share: the flags that choose how span logs are read
//! and analysed (window, timestamp unit, invalid records, prices, goodput goals),
//! validated into the reader's and the analysis' options, and writing the rendered
//! bytes out. `bench` reuses the goodput flags.

use std::io::Write;
use std::path::Path;
use std::time::Duration;

use anyhow::{Context, bail};
use tpscope_analysis::{DEFAULT_SLO_SHARE, Goals, Options, Prices, WindowSpec};
use tpscope_log::{ReadOptions, TimeUnit};

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
    /// Goodput goals.
    #[command(flatten)]
    pub goodput: GoodputFlags,
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
    pub goodput: Vec<Goals>,
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

fn parse_goals_arg(s: &str) -> Result<Goals, String> {
    s.parse::<Goals>().map_err(|e| e.to_string())
}

fn parse_slo_percentile(s: &str) -> Result<f64, String> {
    match s.trim().trim_end_matches('%').trim().parse::<f64>() {
        Ok(p) if p > 0.0 && p <= 100.0 => Ok(p),
        _ => Err(format!(
            "`{s}` is not a percentage in (0, 100] (e.g. 90 for 90 % of requests)"
        )),
    }
}

impl GoodputFlags {
    /// The goals of every `--goodput` together (`None`: none given).
    pub fn goals(&self) -> anyhow::Result<Option<Goals>> {
        let mut all: Option<Goals> = None;
        for g in &self.goodput {
            all = Some(match all {
                None => *g,
                Some(a) => a
                    .merged(*g)
                    .map_err(|e| anyhow::anyhow!("--goodput: {e}"))?,
            });
        }
        Ok(all)
    }

    /// Sets the goals and the sweep's SLO share in `opts`.
    pub fn apply(&self, opts: &mut Options) -> anyhow::Result<()> {
        opts.goals = self.goals()?;
        opts.slo_share = self.slo_percentile / 100.0;
        Ok(())
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
            goodput: GoodputFlags::default(),
            from: None,
        }
    }
}

fn parse_window(text: &str) -> anyhow::Result<WindowSpec> {
    text.parse()
        .map_err(|e: tpscope_analysis::BadWindow| anyhow::anyhow!("--window: {e}"))
}

/// Refuses a negative or non-finite price, naming the flag.
pub fn price(flag: &str, v: Option<f64>) -> anyhow::Result<Option<f64>> {
    match v {
        Some(p) if !p.is_finite() || p < 0.0 => bail!("{flag}: {p} is not a non-negative price"),
        _ => Ok(v),
    }
}

impl AnalysisFlags {
    /// How to read the logs (span ids are dropped; set `keep_span_ids` to keep them).
    pub fn read_options(&self) -> anyhow::Result<ReadOptions> {
        let time_unit = self
            .time_unit
            .as_deref()
            .map(|u| {
                u.parse::<TimeUnit>()
                    .map_err(|e| anyhow::anyhow!("--time-unit: {e}"))
            })
            .transpose()?;
        Ok(ReadOptions {
            time_unit,
            skip_invalid: self.skip_invalid,
            keep_span_ids: false,
        })
    }

    /// Whether the files are imported (`Some`, with the format or `None` for auto).
    pub fn import_from(&self) -> anyhow::Result<Option<Option<tpscope_log::import::Format>>> {
        self.from
            .as_deref()
            .map(|f| crate::import_cmd::parse_from("--from", f))
            .transpose()
    }

    /// How to analyse each run, with `bucket` as the time series' bucket.
    pub fn analysis_options(&self, bucket: Option<Duration>) -> anyhow::Result<Options> {
        let mut opts = Options {
            window: parse_window(&self.window)?,
            bucket,
            prices: Prices {
                per_hour: price("--price-per-hour", self.price_per_hour)?,
                per_mtok_in: price("--price-per-mtok-in", self.price_per_mtok_in)?,
                per_mtok_out: price("--price-per-mtok-out", self.price_per_mtok_out)?,
            },
            ..Options::default()
        };
        self.goodput.apply(&mut opts)?;
        Ok(opts)
    }
}

/// Writes rendered bytes to `path`, or to standard output without one; `flag`,
/// when given, names the flag that chose the file in the error. A write error is a
/// runtime failure (exit 1) when `runtime_failure` is set (`compare` leaves it
/// unset: its exit 1 means a criterion failed), except a broken pipe on standard
/// output, which `main` treats as success.
pub fn write_out(
    bytes: &[u8],
    path: Option<&Path>,
    flag: Option<&str>,
    runtime_failure: bool,
) -> anyhow::Result<()> {
    let mark = |e: std::io::Error| -> anyhow::Error {
        if runtime_failure && e.kind() != std::io::ErrorKind::BrokenPipe {
            Err::<(), _>(e).failure().unwrap_err()
        } else {
            e.into()
        }
    };
    match path {
        Some(path) => std::fs::write(path, bytes).map_err(mark).with_context(|| {
            let flag = flag.map(|f| format!("{f}: ")).unwrap_or_default();
            format!("{flag}writing {}", path.display())
        }),
        None => {
            let mut out = std::io::stdout().lock();
            out.write_all(bytes)
                .and_then(|()| out.flush())
                .map_err(mark)
        }
    }
}
