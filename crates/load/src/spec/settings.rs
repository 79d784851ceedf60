//! The run record's `load` settings: what a run of the spec was asked to do, as
//! one serialisable value per run (derived from the spec, never assembled by hand).

use std::time::Duration;

use serde::Serialize;

use super::BenchSpec;
use crate::schedule::Schedule;
use crate::workload::WorkloadSettings;

/// The `load` object of a bench run's `run` record.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct LoadSettings<'a> {
    /// `closed_loop`, `open_loop` or `trace_replay`.
    pub mode: &'static str,
    /// The cap.
    pub concurrency: Option<u32>,
    /// Requests of the run, when bounded by a count.
    pub requests: Option<u64>,
    /// `--duration`, seconds.
    pub duration_s: Option<f64>,
    /// `--dispatch`.
    pub dispatch: String,
    /// `--seed`.
    pub seed: u64,
    /// What requests ask for.
    pub workload: WorkloadSettings<'a>,
    /// `--max-retries`.
    pub max_retries: u32,
    /// `--retry-backoff`, seconds.
    pub retry_backoff_s: f64,
    /// The client's limits, seconds.
    pub timeouts_s: TimeoutSettings,
    /// Whether usage was asked for.
    pub include_usage: bool,
    /// `--record-chunks`.
    pub record_chunks: bool,
    /// The receive-timestamp source in effect.
    pub rx_timestamps: &'static str,
    /// Open loop: requests per second.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub rate: Option<f64>,
    /// Open loop: the inter-arrival process.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub arrival: Option<String>,
    /// The warm-up before the run.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub warmup: Option<WarmupSettings>,
    /// This run's place in a sweep.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub sweep: Option<SweepSettings>,
    /// The built-in simulator measured, when it was.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub simulator: Option<SimulatorSettings>,
}

/// The client's limits, seconds (`None`: no limit).
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
pub struct TimeoutSettings {
    /// Opening a connection.
    pub connect: Option<f64>,
    /// From an attempt's start to its first token.
    pub first_token: Option<f64>,
    /// Between two chunks.
    pub stall: Option<f64>,
    /// A whole attempt.
    pub total: Option<f64>,
}

/// The warm-up: how much, and that it is not in the log.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct WarmupSettings {
    /// `--warmup` as given (requests or a time).
    pub amount: String,
    /// Always false: warm-up requests are not written.
    pub written: bool,
}

/// A run's place in a sweep.
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
pub struct SweepSettings {
    /// `concurrency` or `rate`.
    pub parameter: &'static str,
    /// This run's level.
    pub level: f64,
    /// Its index among the levels.
    pub index: usize,
    /// How many levels the sweep has.
    pub levels: usize,
}

/// The built-in simulator's main settings (filled in by whoever started it).
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct SimulatorSettings {
    /// The model preset's name.
    pub model: String,
    /// The GPU preset's name.
    pub gpu: String,
    /// Tensor-parallel degree.
    pub tp: u32,
    /// Its speed (`realtime`, `max` or a factor).
    pub speed: String,
    /// Most sequences in its batch.
    pub max_num_seqs: u32,
    /// Its seed.
    pub seed: u64,
}

fn secs(d: Option<Duration>) -> Option<f64> {
    d.map(|d| d.as_secs_f64())
}

impl BenchSpec {
    /// The load settings of the run of level `index`.
    pub fn load_settings(
        &self,
        index: usize,
        simulator: Option<SimulatorSettings>,
    ) -> LoadSettings<'_> {
        let level = &self.levels[index];
        let (mode, rate, arrival) = match &level.schedule {
            Schedule::Backlog => ("closed_loop", None, None),
            Schedule::Rate { rate, arrival } => {
                ("open_loop", Some(*rate), Some(arrival.to_string()))
            }
            Schedule::Trace { .. } => ("trace_replay", None, None),
        };
        let t = &self.client.timeouts;
        LoadSettings {
            mode,
            concurrency: level.cap,
            requests: level.requests,
            duration_s: secs(self.duration),
            dispatch: self.dispatch.to_string(),
            seed: self.seed,
            workload: self.workload.settings(),
            max_retries: self.retry.max_retries,
            retry_backoff_s: self.retry.base.as_secs_f64(),
            timeouts_s: TimeoutSettings {
                connect: secs(t.connect),
                first_token: secs(t.first_token),
                stall: secs(t.stall),
                total: secs(t.total),
            },
            include_usage: self.include_usage,
            record_chunks: self.client.record_chunks,
            rx_timestamps: self.client.rx_timestamps.effective().as_str(),
            rate,
            arrival,
            warmup: self.warmup.map(|w| WarmupSettings {
                amount: w.to_string(),
                written: false,
            }),
            sweep: self.sweep.map(|parameter| SweepSettings {
                parameter,
                level: level.value,
                index,
                levels: self.levels.len(),
            }),
            simulator,
        }
    }
}
