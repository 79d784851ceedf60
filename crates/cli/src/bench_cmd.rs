//! `tpscope bench`: placeholder until its issue lands.

use std::process::ExitCode;

/// Flags of `tpscope bench`.
#[derive(clap::Args, Debug)]
pub struct BenchArgs {}

/// Runs `tpscope bench`.
pub fn run(_args: BenchArgs) -> anyhow::Result<ExitCode> {
    anyhow::bail!("tpscope bench is not built yet")
}
