//! `tpscope sim`: placeholder until its issue lands.

use std::process::ExitCode;

/// Flags of `tpscope sim`.
#[derive(clap::Args, Debug)]
pub struct SimArgs {}

/// Runs `tpscope sim`.
pub fn run(_args: SimArgs) -> anyhow::Result<ExitCode> {
    anyhow::bail!("tpscope sim is not built yet")
}
