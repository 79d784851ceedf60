//! What `tpscope bench` runs, from its flags: the target (a URL, or the built-in
//! simulator configured by the `--sim-*` flags) and the load engine's validated spec.

use tpscope_load::spec::{BenchSpec, SimulatorSettings};
use tpscope_sim::SimConfig;

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
}

impl BenchConfig {
    /// Validates the flags; every error names its flag. An `--out` file that
    /// exists is refused here, before anything runs.
    pub fn from_args(a: BenchArgs) -> anyhow::Result<BenchConfig> {
        let spec = BenchSpec::from_flags(a.flags())?;
        let target = match &spec.url {
            Some(u) => TargetConfig::Url(u.clone()),
            None => {
                let cfg = a
                    .sim
                    .overrides(a.seed, a.tokenizer)?
                    .resolve()
                    .map_err(|e| anyhow::anyhow!("built-in simulator (--sim-*): {e}"))?;
                TargetConfig::Sim(Box::new(cfg))
            }
        };
        if a.url.is_some() && a.sim.any() {
            anyhow::bail!(
                "--sim-* flags configure the built-in simulator and cannot be used with --url"
            );
        }
        crate::bench_out::check(&spec)?;
        Ok(BenchConfig {
            target,
            spec,
            quiet: a.quiet,
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
