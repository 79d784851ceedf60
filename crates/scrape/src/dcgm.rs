//! NVIDIA DCGM exporter pages (`DCGM_FI_*`, a GPU node's `:9400/metrics`): one
//! [`GpuReading`] per device — utilisation, power, the energy counter, framebuffer
//! in use — with its host and model. Pure.
//!
//! A device is told by its `Hostname` and `UUID` (its `gpu` index when there is no
//! UUID). Series of a MIG instance (`GPU_I_ID`) are left out: power, energy and
//! utilisation are the whole device's, and a MIG series would count it again.
//! DCGM writes "blank" (not supported, not yet sampled) as sentinels just below
//! 2^31 (32-bit fields), at 2^47 (doubles) and just below 2^63 (64-bit fields):
//! those are no value, not a reading.

use std::collections::BTreeMap;

use tpscope_model::GpuReading;

use crate::text::{Exposition, PromSample};

/// Whether a page is a DCGM exporter's.
pub fn is_dcgm(page: &Exposition) -> bool {
    page.samples.iter().any(|s| s.name.starts_with("DCGM_FI_"))
}

/// A value DCGM uses for "no reading": its 32-bit blanks (0x7ffffff0 and the 15
/// after it), its double blanks (2^47 and up to 16 above) and its 64-bit ones
/// (from 0x7ffffffffffffff0). Exact ranges, since the energy counter may pass 2^31.
fn is_blank(v: f64) -> bool {
    const INT32: f64 = 2_147_483_632.0;
    const FP64: f64 = 140_737_488_355_328.0;
    !v.is_finite()
        || (INT32..=INT32 + 15.0).contains(&v)
        || (FP64..=FP64 + 16.0).contains(&v)
        || v >= 9.2e18
}

/// How a field's value becomes a reading's.
type Setter = fn(&mut GpuReading, f64);

/// The fields read, each with how its value becomes a reading's.
const FIELDS: [(&str, Setter); 4] = [
    ("DCGM_FI_DEV_GPU_UTIL", |g, v| g.util = Some(v / 100.0)),
    ("DCGM_FI_DEV_POWER_USAGE", |g, v| g.power_w = Some(v)),
    // Millijoules since the driver loaded.
    ("DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION", |g, v| {
        g.energy_j = Some(v / 1000.0)
    }),
    // MiB.
    ("DCGM_FI_DEV_FB_USED", |g, v| {
        g.fb_used_bytes = Some(v * 1024.0 * 1024.0)
    }),
];

/// The devices of a DCGM page, in the order of (host, device).
pub fn gpus(page: &Exposition) -> Vec<GpuReading> {
    let mut by_device: BTreeMap<(Option<String>, String), GpuReading> = BTreeMap::new();
    for s in &page.samples {
        let Some((_, set)) = FIELDS.iter().find(|(n, _)| *n == s.name) else {
            continue;
        };
        if s.label("GPU_I_ID").is_some() || is_blank(s.value) {
            continue;
        }
        let Some(key) = device(s) else {
            continue;
        };
        let g = by_device.entry(key.clone()).or_insert_with(|| GpuReading {
            host: key.0.clone(),
            gpu: key.1.clone(),
            model: s.label("modelName").map(str::to_string),
            ..GpuReading::default()
        });
        set(g, s.value);
    }
    // A device listed only by blank values says nothing.
    by_device
        .into_values()
        .filter(|g| {
            g.util.is_some()
                || g.power_w.is_some()
                || g.energy_j.is_some()
                || g.fb_used_bytes.is_some()
        })
        .collect()
}

fn device(s: &PromSample<'_>) -> Option<(Option<String>, String)> {
    let id = s.label("UUID").or_else(|| s.label("gpu"))?;
    let host = s.label("Hostname").filter(|h| !h.is_empty());
    Some((host.map(str::to_string), id.to_string()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::text::parse;

    #[test]
    fn devices_are_told_apart_by_host_and_uuid_and_mig_series_are_left_out() {
        let page = parse(
            "DCGM_FI_DEV_POWER_USAGE{gpu=\"0\",UUID=\"GPU-a\",Hostname=\"n1\"} 300.5\n\
             DCGM_FI_DEV_POWER_USAGE{gpu=\"0\",UUID=\"GPU-b\",Hostname=\"n2\"} 200\n\
             DCGM_FI_DEV_GPU_UTIL{gpu=\"0\",UUID=\"GPU-a\",Hostname=\"n1\"} 87\n\
             DCGM_FI_DEV_GPU_UTIL{gpu=\"0\",UUID=\"GPU-a\",Hostname=\"n1\",GPU_I_ID=\"13\"} 99\n\
             DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION{gpu=\"0\",UUID=\"GPU-a\",Hostname=\"n1\"} 1500\n\
             DCGM_FI_DEV_FB_USED{gpu=\"0\",UUID=\"GPU-a\",Hostname=\"n1\"} 2\n",
        );
        assert!(is_dcgm(&page));
        let g = gpus(&page);
        assert_eq!(g.len(), 2);
        assert_eq!(
            (g[0].host.as_deref(), g[0].gpu.as_str()),
            (Some("n1"), "GPU-a")
        );
        assert_eq!(g[0].util, Some(0.87));
        assert_eq!(g[0].power_w, Some(300.5));
        assert_eq!(g[0].energy_j, Some(1.5));
        assert_eq!(g[0].fb_used_bytes, Some(2.0 * 1024.0 * 1024.0));
        assert_eq!((g[1].gpu.as_str(), g[1].util), ("GPU-b", None));
    }

    #[test]
    fn blank_sentinels_are_no_reading() {
        // dcgm-exporter's README shows 9223372036854775794 for a blank field.
        let page = parse(
            "DCGM_FI_DEV_POWER_USAGE{gpu=\"0\", UUID=\"GPU-x\"} 9223372036854775794\n\
             DCGM_FI_DEV_GPU_UTIL{gpu=\"0\", UUID=\"GPU-x\"} 2147483632\n\
             DCGM_FI_DEV_FB_USED{gpu=\"1\", UUID=\"GPU-y\"} 9223372036854775794\n",
        );
        assert!(gpus(&page).is_empty());
        // A real energy counter past 2^31 mJ is a reading.
        let page = parse("DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION{gpu=\"0\"} 31035686671\n");
        assert_eq!(gpus(&page)[0].energy_j, Some(31035686.671));
    }

    #[test]
    fn a_page_without_uuids_uses_the_index() {
        let page = parse("DCGM_FI_DEV_POWER_USAGE{gpu=\"3\"} 100\n");
        let g = gpus(&page);
        assert_eq!((g[0].gpu.as_str(), g[0].host.as_deref()), ("3", None));
    }
}
