//! Every flag of every command is documented in that command's guide under docs/
//! (the README only points there): the test reads each subcommand's clap definition
//! and looks for `--flag` in the page, so a new flag without a line in its guide fails.

#[cfg(test)]
mod tests {
    use clap::CommandFactory;

    use crate::Cli;

    /// Each command's guide.
    const GUIDES: [(&str, &str, &str); 6] = [
        (
            "bench",
            "docs/bench.md",
            include_str!("../../../docs/bench.md"),
        ),
        (
            "report",
            "docs/report.md",
            include_str!("../../../docs/report.md"),
        ),
        (
            "compare",
            "docs/report.md",
            include_str!("../../../docs/report.md"),
        ),
        ("sim", "docs/sim.md", include_str!("../../../docs/sim.md")),
        (
            "proxy",
            "docs/proxy.md",
            include_str!("../../../docs/proxy.md"),
        ),
        (
            "import",
            "docs/import.md",
            include_str!("../../../docs/import.md"),
        ),
    ];

    /// Whether `page` names `--flag` as a whole word (not as the start of a longer flag).
    fn mentions(page: &str, flag: &str) -> bool {
        let needle = format!("--{flag}");
        page.match_indices(&needle).any(|(i, _)| {
            page[i + needle.len()..]
                .chars()
                .next()
                .is_none_or(|c| !(c.is_ascii_alphanumeric() || c == '-'))
        })
    }

    #[test]
    fn every_flag_of_every_command_is_in_its_guide() {
        let cli = Cli::command();
        let mut missing = Vec::new();
        for (name, path, page) in GUIDES {
            let cmd = cli
                .find_subcommand(name)
                .unwrap_or_else(|| panic!("no subcommand {name}"));
            for arg in cmd.get_arguments().filter(|a| !a.is_hide_set()) {
                let longs = arg
                    .get_long()
                    .into_iter()
                    .chain(arg.get_visible_aliases().into_iter().flatten());
                for long in longs.filter(|l| !matches!(*l, "help" | "version")) {
                    if !mentions(page, long) {
                        missing.push(format!("{path}: `tpscope {name} --{long}`"));
                    }
                }
            }
        }
        assert!(
            missing.is_empty(),
            "flags missing from their guide:\n{}",
            missing.join("\n")
        );
    }

    #[test]
    fn a_flag_is_found_only_as_a_whole_word() {
        assert!(mentions("see `--out FILE`", "out"));
        assert!(mentions("ends with --out", "out"));
        assert!(!mentions("see `--output-tokens`", "out"));
        assert!(!mentions("see `--out2`", "out"));
    }
}
