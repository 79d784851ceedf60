//! The bundled Azure 2023 conversation trace's (input, output) token lengths: the
//! default workload's joint lengths and the `azure` length distribution.

use std::sync::OnceLock;

/// The bundled Azure 2023 conversation trace as (input, output) token pairs.
pub fn azure_lengths() -> &'static [(u32, u32)] {
    static TABLE: OnceLock<Vec<(u32, u32)>> = OnceLock::new();
    TABLE.get_or_init(|| {
        include_str!("../data/azure_conv_lengths.txt")
            .lines()
            .filter(|l| !l.starts_with('#') && !l.trim().is_empty())
            .filter_map(|l| {
                let (a, b) = l.split_once(' ')?;
                Some((a.trim().parse().ok()?, b.trim().parse().ok()?))
            })
            .collect()
    })
}
