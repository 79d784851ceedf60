//! `tpscope compare`: placeholder until its issue lands.

use std::process::ExitCode;

/// Flags of `tpscope compare`.
#[derive(clap::Args, Debug)]
pub struct CompareArgs {}

/// Runs `tpscope compare`.
pub fn run(_args: CompareArgs) -> anyhow::Result<ExitCode> {
    anyhow::bail!("tpscope compare is not built yet")
}
