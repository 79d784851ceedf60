//! GPU energy beside the tokens: from the GPU-telemetry scrapes of a run (NVIDIA
//! DCGM exporter pages, `server_sample.gpus`), the energy the GPUs used over the
//! window, joules per output token and tokens per joule, mean power and
//! utilisation, the energy's cost at a price per kWh, and utilisation beside the
//! gap (a GPU half idle while work was held back is the pipeline's loss).
//!
//! Energy per device is its energy counter's rise between the first and the last
//! scrape inside the window (DCGM's counter is exact; power is a sample); a device
//! without the counter integrates its power readings as a step function instead.
//! The energy of the window is the devices' summed mean power over the scraped
//! stretch times the window's length, so scrapes that start a little after the
//! window or end a little before it still give the whole window's energy, and
//! joules per token divides it by the same tokens system TPS counts. Pure.

use std::collections::BTreeMap;
use std::time::Duration;

use serde::Serialize;
use tpscope_model::{GpuReading, ServerSampleRecord, Timestamp};

use crate::input::RunInput;
use tpscope_model::time::duration_secs;

/// A share of GPU utilisation below which, with a gap at or above
/// [`GAP_NOTE`], the report puts the two side by side.
pub const LOW_UTIL: f64 = 0.5;
/// The gap fraction from which a low utilisation is the pipeline's doing.
pub const GAP_NOTE: f64 = 0.2;

/// The GPUs' side of a run.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Energy {
    /// Devices seen (host and device id pairs).
    pub gpus: u64,
    /// Hosts seen (those the exporter names).
    pub hosts: Vec<String>,
    /// GPU-telemetry scrapes inside the window.
    pub scrapes: u64,
    /// The stretch the scrapes covered inside the window.
    #[serde(rename = "measured_s", serialize_with = "duration_secs::serialize")]
    pub measured: Duration,
    /// Whether the energy came from DCGM's energy counters (else from power readings).
    pub from_counter: bool,
    /// Energy the GPUs used over the window (joules).
    pub energy_j: Option<f64>,
    /// Their summed mean power over the scraped stretch (watts).
    pub mean_power_w: Option<f64>,
    /// Time-weighted mean utilisation over devices and the window, 0–1.
    pub mean_util: Option<f64>,
    /// The largest framebuffer use of one scrape, summed over devices (bytes).
    pub max_fb_used_bytes: Option<f64>,
    /// Joules per output token of the window's ok spans.
    pub joules_per_output_token: Option<f64>,
    /// Output tokens per joule.
    pub output_tokens_per_joule: Option<f64>,
    /// The price per kWh the cost uses.
    pub price_per_kwh: Option<f64>,
    /// The energy's cost over the window.
    pub energy_cost: Option<f64>,
    /// The energy's cost per million output tokens.
    pub energy_cost_per_million_output_tokens: Option<f64>,
    /// A sentence when the GPUs idled while the pipeline held work back.
    pub note: Option<String>,
}

/// The run's GPU-telemetry scrapes, in time order.
fn gpu_samples(input: &RunInput) -> Vec<&ServerSampleRecord> {
    let mut v: Vec<&ServerSampleRecord> =
        input.server_samples.iter().filter(|s| s.is_gpu()).collect();
    v.sort_by_key(|s| s.at);
    v
}

type Device = (Option<String>, String);

/// The GPU section of a run over `window`, `None` without GPU scrapes in it.
/// `output_tokens` are the window's (system TPS's numerator, pro rata), `gap_fraction` the
/// report's.
pub fn energy(
    input: &RunInput,
    window: (Timestamp, Timestamp),
    output_tokens: f64,
    gap_fraction: Option<f64>,
    price_per_kwh: Option<f64>,
) -> Option<Energy> {
    let (w0, w1) = window;
    let samples: Vec<&ServerSampleRecord> = gpu_samples(input)
        .into_iter()
        .filter(|s| s.at >= w0 && s.at <= w1)
        .collect();
    let (first, last) = (samples.first()?.at, samples.last()?.at);
    let measured = last.since(first).unwrap_or_default();
    let window_len = w1.since(w0).unwrap_or_default();

    // Each device's readings in time order.
    let mut devices: BTreeMap<Device, Vec<(Timestamp, &GpuReading)>> = BTreeMap::new();
    for s in &samples {
        for g in &s.gpus {
            devices
                .entry((g.host.clone(), g.gpu.clone()))
                .or_default()
                .push((s.at, g));
        }
    }
    let counters: Vec<Option<f64>> = devices.values().map(|r| counter_rise(r)).collect();
    let from_counter = !counters.is_empty() && counters.iter().all(Option::is_some);
    let measured_j: Option<f64> = if from_counter {
        Some(counters.iter().flatten().sum())
    } else {
        devices
            .values()
            .map(|r| power_integral(r))
            .sum::<Option<f64>>()
    };
    let measured_s = measured.as_secs_f64();
    let mean_power_w = measured_j
        .filter(|_| measured_s > 0.0)
        .map(|j| j / measured_s);
    let energy_j = mean_power_w.map(|w| w * window_len.as_secs_f64());
    let per_token = energy_j
        .filter(|_| output_tokens > 0.0)
        .map(|j| j / output_tokens);
    let per_joule = energy_j.filter(|j| *j > 0.0).map(|j| output_tokens / j);
    let energy_cost = price_per_kwh.zip(energy_j).map(|(p, j)| p * j / 3.6e6);
    let mean_util = mean_util(&devices, last);
    let note = match (mean_util, gap_fraction) {
        (Some(u), Some(g)) if u < LOW_UTIL && g >= GAP_NOTE => Some(format!(
            "the GPUs were {:.0} % busy while work waited with slots free {:.0} % of the \
             window (the gap): the pipeline, not the model, left them idle",
            u * 100.0,
            g * 100.0
        )),
        _ => None,
    };
    let hosts: Vec<String> = {
        let mut h: Vec<String> = devices.keys().filter_map(|(h, _)| h.clone()).collect();
        h.dedup();
        h
    };
    Some(Energy {
        gpus: devices.len() as u64,
        hosts,
        scrapes: samples.len() as u64,
        measured,
        from_counter,
        energy_j,
        mean_power_w,
        mean_util,
        max_fb_used_bytes: samples
            .iter()
            .filter_map(|s| s.gpus.iter().map(|g| g.fb_used_bytes).sum::<Option<f64>>())
            .reduce(f64::max),
        joules_per_output_token: per_token,
        output_tokens_per_joule: per_joule,
        price_per_kwh,
        energy_cost,
        energy_cost_per_million_output_tokens: energy_cost
            .filter(|_| output_tokens > 0.0)
            .map(|c| c / output_tokens * 1e6),
        note,
    })
}

/// A device's energy counter rise (joules) between its first and last reading
/// that have one; `None` with fewer than two, or when it fell (a driver reload).
fn counter_rise(readings: &[(Timestamp, &GpuReading)]) -> Option<f64> {
    let first = readings.iter().find_map(|(_, g)| g.energy_j)?;
    let last = readings.iter().rev().find_map(|(_, g)| g.energy_j)?;
    let n = readings
        .iter()
        .filter(|(_, g)| g.energy_j.is_some())
        .count();
    (n >= 2 && last >= first).then_some(last - first)
}

/// A device's power readings as a step function (each holds until the next),
/// integrated over its readings' stretch (joules); `None` with fewer than two.
fn power_integral(readings: &[(Timestamp, &GpuReading)]) -> Option<f64> {
    let with: Vec<(Timestamp, f64)> = readings
        .iter()
        .filter_map(|(t, g)| g.power_w.map(|p| (*t, p)))
        .collect();
    if with.len() < 2 {
        return None;
    }
    Some(
        with.windows(2)
            .map(|w| w[0].1 * w[1].0.since(w[0].0).unwrap_or_default().as_secs_f64())
            .sum(),
    )
}

/// Time-weighted mean utilisation over every device's readings (each holds until
/// the device's next reading, the last until `end`); `None` without any.
fn mean_util(
    devices: &BTreeMap<Device, Vec<(Timestamp, &GpuReading)>>,
    end: Timestamp,
) -> Option<f64> {
    let (mut weighted, mut total, mut plain, mut n) = (0.0, 0.0, 0.0, 0u64);
    for readings in devices.values() {
        let with: Vec<(Timestamp, f64)> = readings
            .iter()
            .filter_map(|(t, g)| g.util.map(|u| (*t, u)))
            .collect();
        for (i, (t, u)) in with.iter().enumerate() {
            let next = with.get(i + 1).map_or(end, |n| n.0);
            let dt = next.since(*t).unwrap_or_default().as_secs_f64();
            weighted += u * dt;
            total += dt;
            plain += u;
            n += 1;
        }
    }
    if total > 0.0 {
        Some(weighted / total)
    } else {
        // One scrape each: no stretch to weigh by.
        (n > 0).then(|| plain / n as f64)
    }
}

#[cfg(test)]
mod tests;
