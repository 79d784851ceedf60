//! `tpscope report`: placeholder until its issue lands.

use std::process::ExitCode;

/// Flags of `tpscope report`.
#[derive(clap::Args, Debug)]
pub struct ReportArgs {}

/// Runs `tpscope report`.
pub fn run(_args: ReportArgs) -> anyhow::Result<ExitCode> {
    anyhow::bail!("tpscope report is not built yet")
}
