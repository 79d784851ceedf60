//! The `--sim-*` flags of `tpscope bench`: the built-in simulator's settings,
//! passed to it when no `--url` is given (kept together, apart from the load's
//! flags; the fault kinds and their keys come from the simulator's table of knobs).

use std::path::PathBuf;

use anyhow::Context;
use tpscope_sim::SimOverrides;
use tpscope_sim::config::knobs::{fault_knob, fault_names};
use tpscope_sim::config::{KNOBS, KnobValue};

/// The help section of the flags passed to the built-in simulator.
const SIM_HEADING: &str = "Built-in simulator (passed to it; refused with --url)";

/// The `--sim-*` flags.
#[derive(clap::Args, Debug)]
pub struct SimFlags {
    /// Built-in simulator (no --url): model preset (llama-3.1-8b, llama-3.1-70b).
    #[arg(
        long,
        value_name = "PRESET",
        help_heading = SIM_HEADING
    )]
    pub sim_model: Option<String>,
    /// Built-in simulator: GPU preset (h100, h200, a100-80gb, l40s).
    #[arg(
        long,
        value_name = "PRESET",
        help_heading = SIM_HEADING
    )]
    pub sim_gpu: Option<String>,
    /// Built-in simulator: realtime, max, or a speed-up factor such as 10.
    #[arg(
        long,
        value_name = "SPEED",
        help_heading = SIM_HEADING
    )]
    pub sim_speed: Option<String>,
    /// Built-in simulator: a TOML file of `tpscope sim` settings.
    #[arg(
        long,
        value_name = "FILE",
        help_heading = SIM_HEADING
    )]
    pub sim_config: Option<PathBuf>,
    /// Built-in simulator: inject a fault with a probability, KIND=P, KIND one of
    /// 429, 500, 503, cut, stall, malformed, slow-first-token (repeatable); or
    /// connection-close=1 (`Connection: close` on every response, as `tpscope sim
    /// --connection-close`; all or nothing, so P is 0 or 1).
    #[arg(long = "sim-fault", value_name = "KIND=P", value_parser = parse_sim_fault, help_heading = SIM_HEADING)]
    pub sim_faults: Vec<(String, f64)>,
    /// Built-in simulator: write its ground truth (first/last token times) here.
    #[arg(
        long,
        value_name = "FILE",
        help_heading = SIM_HEADING
    )]
    pub sim_truth_log: Option<PathBuf>,
}

/// The simulator's switch that `--sim-fault connection-close=1` turns on.
const CONNECTION_CLOSE: &str = "connection-close";

/// Parses `--sim-fault KIND=P`.
pub fn parse_sim_fault(s: &str) -> Result<(String, f64), String> {
    let (k, p) = s
        .split_once('=')
        .ok_or_else(|| format!("`{s}` is not KIND=P (e.g. 429=0.1)"))?;
    if k == CONNECTION_CLOSE {
        return match p.trim().parse::<f64>() {
            Ok(p) if p == 0.0 || p == 1.0 => Ok((k.to_string(), p)),
            _ => Err(format!(
                "`{p}`: the simulator closes every connection or none, so connection-close takes 0 or 1"
            )),
        };
    }
    if fault_knob(k).is_none() {
        return Err(format!(
            "`{k}` is not a fault (expected one of {}, {CONNECTION_CLOSE})",
            fault_names().collect::<Vec<_>>().join(", ")
        ));
    }
    match p.trim().parse::<f64>() {
        Ok(p) if (0.0..=1.0).contains(&p) => Ok((k.to_string(), p)),
        _ => Err(format!("`{p}` is not a probability in 0..=1")),
    }
}

impl SimFlags {
    /// Whether any `--sim-*` flag is given.
    pub fn any(&self) -> bool {
        self.sim_model.is_some()
            || self.sim_gpu.is_some()
            || self.sim_speed.is_some()
            || !self.sim_faults.is_empty()
            || self.sim_truth_log.is_some()
            || self.sim_config.is_some()
    }

    /// The simulator's settings from `--sim-config` and the other flags (the run's
    /// `--seed` is the simulator's too, and so is its `--tokenizer` unless the
    /// config file names one).
    pub fn overrides(
        &self,
        seed: u64,
        tokenizer: tpscope_tokens::Tokenizer,
    ) -> anyhow::Result<SimOverrides> {
        let a = self;
        let mut o = match &a.sim_config {
            Some(p) => SimOverrides::from_toml_file(p)
                .with_context(|| format!("--sim-config {}", p.display()))?,
            None => SimOverrides::default(),
        };
        let mut f = SimOverrides {
            model: a.sim_model.clone(),
            gpu: a.sim_gpu.clone(),
            speed: a.sim_speed.clone(),
            truth_log: a.sim_truth_log.clone(),
            seed: Some(seed),
            ..SimOverrides::default()
        };
        for (k, p) in &a.sim_faults {
            // The kind was checked by the flag's parser; the knob table owns the key.
            let (knob, value) = if k == CONNECTION_CLOSE {
                let knob = KNOBS.iter().find(|n| n.flag() == CONNECTION_CLOSE);
                (knob, KnobValue::Switch(*p == 1.0))
            } else {
                (fault_knob(k), KnobValue::F64(*p))
            };
            let knob = knob.with_context(|| format!("--sim-fault: `{k}`"))?;
            knob.set(&mut f, value)
                .with_context(|| format!("--sim-fault {k}"))?;
        }
        if o.tokenizer.is_none() {
            f.tokenizer = Some(tokenizer.spec());
        }
        o = o.merge(f);
        Ok(o)
    }
}
