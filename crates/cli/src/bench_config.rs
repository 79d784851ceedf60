//! What `tpscope bench` runs, from its flags: the target (a URL, or the built-in
//! simulator configured by the `--sim-*` flags) and the load engine's validated spec.

use tpscope_load::spec::{BenchSpec, SimulatorSettings};
use tpscope_sim::SimConfig;

use tpscope_analysis::{Goals, Options, Settings, SettingsText};

use crate::analysis_flags::flag_error;
use crate::bench_args::BenchArgs;

/// What is measured.
#[derive(Debug)]
pub enum TargetConfig {
    /// The built-in simulator, started in-process.
    Sim(Box<SimConfig>),
    /// A server at this base URL.
    Url(String),
}

/// Every flag of `tpscope bench`, validated.
#[derive(Debug)]
pub struct BenchConfig {
    /// What is measured.
    pub target: TargetConfig,
    /// The load: workload, runs, retries, client settings, output.
    pub spec: BenchSpec,
    /// No progress, no report.
    pub quiet: bool,
    /// Where the server's metrics are scraped from, and how often.
    pub server_metrics: crate::bench_scrape::ServerMetricsArgs,
    /// Where every span is also exported (OTLP), when asked.
    pub otlp: crate::otlp_flags::OtlpArgs,
    /// Goodput goals and the price per hour, for the report at the end.
    pub report: ReportExtras,
}

/// What `bench`'s report adds to `tpscope report`'s defaults.
#[derive(Debug, Clone)]
pub struct ReportExtras {
    /// `--goodput`, checked.
    pub goals: Option<Goals>,
    /// `--slo-percentile`, as a share.
    pub slo_share: f64,
    /// `--price-per-hour`, checked.
    pub price_per_hour: Option<f64>,
    /// `--price-per-kwh`, checked.
    pub price_per_kwh: Option<f64>,
}

impl ReportExtras {
    /// Sets the goals, the SLO share and the price in the report's options.
    pub fn apply(&self, opts: &mut Options) -> anyhow::Result<()> {
        opts.goals = self.goals;
        opts.slo_share = self.slo_share;
        opts.prices.per_hour = self.price_per_hour;
        opts.prices.per_kwh = self.price_per_kwh;
        Ok(())
    }
}

impl BenchConfig {
    /// Validates the flags; every error names its flag. An `--out` file that
    /// exists is refused here, before anything runs.
    pub fn from_args(a: BenchArgs) -> anyhow::Result<BenchConfig> {
        crate::bench_out::check_inputs(&a)?;
        let mut spec = BenchSpec::from_flags(a.flags.clone())?;
        spec.given = a.given.clone();
        let target = match &spec.url {
            Some(u) => TargetConfig::Url(u.clone()),
            None => {
                let cfg = a
                    .sim
                    .overrides(a.flags.seed, a.flags.tokenizer)?
                    .resolve()
                    .map_err(|e| anyhow::anyhow!("built-in simulator (--sim-*): {e}"))?;
                TargetConfig::Sim(Box::new(cfg))
            }
        };
        if a.flags.url.is_some() && a.sim.any() {
            anyhow::bail!(
                "--sim-* flags configure the built-in simulator and cannot be used with --url"
            );
        }
        let settings = Settings::new(&SettingsText {
            price_per_hour: a.price_per_hour,
            price_per_kwh: a.price_per_kwh,
            goodput: a.goodput.texts(),
            slo_percentile: a.goodput.slo_percentile,
            ..SettingsText::default()
        })
        .map_err(flag_error)?;
        let o = settings.options;
        let report = ReportExtras {
            goals: o.goals,
            slo_share: o.slo_share,
            price_per_hour: o.prices.per_hour,
            price_per_kwh: o.prices.per_kwh,
        };
        crate::bench_out::check(&spec)?;
        Ok(BenchConfig {
            target,
            spec,
            quiet: a.quiet,
            report,
            server_metrics: a.server_metrics,
            otlp: a.otlp,
        })
    }
}

/// The simulator's settings for the run record.
pub fn simulator_settings(s: &SimConfig) -> SimulatorSettings {
    SimulatorSettings {
        model: s.model.name.clone(),
        gpu: s.gpu.name.clone(),
        tp: s.tp,
        speed: s.speed.to_string(),
        max_num_seqs: s.max_num_seqs,
        seed: s.seed,
    }
}
