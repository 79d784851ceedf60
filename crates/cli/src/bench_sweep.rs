//! What `tpscope bench` prints after a sweep: the sweep's table and knee exactly as
//! `tpscope report` of the sweep's log shows them (one analysis, one renderer), and
//! where the runs were written.

use std::io::Write;

use tpscope_analysis::Report;

/// Prints the sweep tables of `report` (the runs as recorded to `name`; `file` is
/// how to name the log to `tpscope report`) to `to`.
pub fn print_sweep_table(
    report: &Report,
    (name, file): (&str, &str),
    to: &mut dyn Write,
) -> anyhow::Result<()> {
    to.write_all(tpscope_render::levels::text(&report.sweeps).as_bytes())?;
    writeln!(
        to,
        "One run per level, all in {name}. Full reports: tpscope report {file}"
    )?;
    Ok(())
}
