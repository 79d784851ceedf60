//! The flags of `tpscope bench`: the load engine's own ([`Flags`], defined once in
//! `tpscope_load::spec`, clap's through its `clap` feature), then the command
//! line's (`--quiet`, the report's goodput and prices, the `--sim-*` ones in
//! `bench_sim_flags.rs`, the server's metrics).

use clap::parser::ValueSource;
use tpscope_load::spec::{Flags, GivenFlag};

use crate::bench_sim_flags::SimFlags;

/// Flags of `tpscope bench`.
///
/// Modes: with no `--rate` and no `--trace` it is a closed loop — every request is
/// ready at the start and waits in the queue for one of `--concurrency` slots (a
/// backlog, like a batch job); with `--rate` it is an open loop (arrivals on a
/// schedule; those beyond the cap wait in the queue, and that wait is recorded);
/// with `--trace` the trace's own arrival times are replayed.
#[derive(clap::Args, Debug)]
// Negative numbers reach the value parsers, which say which bound they break.
#[command(after_help = AFTER_HELP, allow_negative_numbers = true)]
pub struct BenchArgs {
    /// The load engine's flags (target, workload, load, retries and timeouts, output).
    #[command(flatten)]
    pub flags: Flags,
    /// No progress line and no report (the span log is still written).
    #[arg(long, short, help_heading = "Output")]
    pub quiet: bool,
    /// Price of the deployment per hour: the report's cost per million output
    /// tokens, and in a sweep the cost at the highest load within --goodput goals.
    #[arg(long, value_name = "PRICE", help_heading = "Goodput and cost")]
    pub price_per_hour: Option<f64>,
    /// Price of a kWh: the GPUs' energy cost per million output tokens (with
    /// --gpu-metrics).
    #[arg(long, value_name = "PRICE", help_heading = "Goodput and cost")]
    pub price_per_kwh: Option<f64>,
    /// Goodput goals and the sweep's SLO percentile (as `tpscope report`'s).
    #[command(flatten, next_help_heading = "Goodput and cost")]
    pub goodput: crate::analysis_flags::GoodputFlags,

    /// The built-in simulator's flags.
    #[command(flatten)]
    pub sim: SimFlags,
    #[command(flatten)]
    pub server_metrics: crate::bench_scrape::ServerMetricsArgs,
    #[command(flatten)]
    pub otlp: crate::otlp_flags::OtlpArgs,
    /// The flags as written on the command line, for the run record (filled in
    /// by [`given_flags`] from clap's matches; not a flag).
    #[arg(skip)]
    pub given: Vec<GivenFlag>,
}

/// The flags of `cmd` given on the command line in `m` (not defaults, not the
/// environment), one entry per occurrence in the order they were written, each
/// with its values as written (a comma list stays one value), for the run record:
/// every flag is recorded without code of its own. Secrets are redacted: the key,
/// header values, and URLs' credentials and queries.
pub fn given_flags(cmd: &clap::Command, m: &clap::ArgMatches) -> Vec<GivenFlag> {
    let mut out = Vec::new();
    for arg in cmd.get_arguments() {
        let (id, Some(long)) = (arg.get_id().as_str(), arg.get_long()) else {
            continue;
        };
        if m.value_source(id) != Some(ValueSource::CommandLine) {
            continue;
        }
        let flag = format!("--{long}");
        let mut at = m.indices_of(id).into_iter().flatten();
        if !arg.get_action().takes_values() {
            out.push((
                at.next().unwrap_or(0),
                GivenFlag {
                    flag,
                    values: Vec::new(),
                },
            ));
            continue;
        }
        for occurrence in m.get_raw_occurrences(id).into_iter().flatten() {
            let raw: Vec<String> = occurrence
                .map(|v| redact(long, &v.to_string_lossy()))
                .collect();
            let index = at.next().unwrap_or(0);
            at.by_ref().take(raw.len().saturating_sub(1)).for_each(drop);
            let values = match arg.get_value_delimiter() {
                Some(d) => vec![raw.join(&d.to_string())],
                None => raw,
            };
            out.push((
                index,
                GivenFlag {
                    flag: flag.clone(),
                    values,
                },
            ));
        }
    }
    out.sort_by_key(|(index, _)| *index);
    out.into_iter().map(|(_, g)| g).collect()
}

/// A flag's value as the run record may keep it.
fn redact(long: &str, v: &str) -> String {
    if long == "api-key" {
        "[redacted]".into()
    } else if long.ends_with("header") {
        let name = v.split_once(':').map_or(v, |(k, _)| k).trim();
        format!("{name}: [redacted]")
    } else if v.contains("://") {
        tpscope_record::redact_url(v)
    } else {
        v.to_string()
    }
}

const AFTER_HELP: &str = "\
Examples:
  tpscope bench                                   # measure the built-in simulator (~20 s)
  tpscope bench --url http://127.0.0.1:8000/v1 --concurrency 64 --requests 1000
  tpscope bench --url URL --rate 2,4,8 --duration 60s        # open-loop sweep
  tpscope bench --concurrency 1,8,32,128 --output-tokens 256 # concurrency sweep
  tpscope bench --trace mooncake:trace.jsonl --time-scale 0.5
  tpscope bench --dispatch waves                  # see what batch-and-wait costs

Warm-up requests are sent before the measured run, drained, and not written.
A fixed --output-tokens N sends ignore_eos (and min_tokens) so every output has N
tokens; --no-ignore-eos makes N only a cap. The --sim-* flags configure the
built-in simulator and are refused with --url.
vLLM's flags: --base-url (with or without /v1) --endpoint --max-concurrency
--request-rate (inf: all at once) --burstiness --num-prompts --random-input-len
--random-output-len --dataset-name random|sharegpt|custom --dataset-path
--ignore-eos --seed.";

#[cfg(test)]
mod tests {
    use super::*;
    use crate::bench_sim_flags::parse_sim_fault;
    use clap::Args;
    use tpscope_load::spec::{
        DEFAULT_FIRST_TOKEN_TIMEOUT, DEFAULT_STALL_TIMEOUT, MODEL_LOOKUP_TIMEOUT,
    };

    #[test]
    fn help_states_the_default_limits_and_that_sim_flags_are_refused_with_url() {
        let help = BenchArgs::augment_args(clap::Command::new("bench"))
            .render_long_help()
            .to_string();
        let help = help.split_whitespace().collect::<Vec<_>>().join(" ");
        for (needle, d) in [
            (
                "[default: {}s; `none` lifts it]. The model",
                DEFAULT_FIRST_TOKEN_TIMEOUT,
            ),
            ("[default: {}s; `none` lifts it] ", DEFAULT_STALL_TIMEOUT),
            ("at most {}s", MODEL_LOOKUP_TIMEOUT),
        ] {
            let needle = needle.replace("{}", &d.as_secs().to_string());
            assert!(help.contains(&needle), "help lacks `{needle}`");
        }
        assert!(help.contains("Built-in simulator (passed to it; refused with --url)"));
    }

    #[test]
    fn a_library_callers_default_flags_are_the_command_lines() {
        // Each default is written in clap's attribute and in `Flags::default` (what
        // a Rust program calling `load::bench` starts from): were they to drift,
        // the library would measure other requests than `tpscope bench`.
        #[derive(clap::Parser)]
        struct Bench {
            #[command(flatten)]
            flags: Flags,
        }
        let parsed = <Bench as clap::Parser>::try_parse_from(["bench"]).unwrap();
        assert_eq!(parsed.flags, Flags::default());
    }

    #[test]
    fn the_flags_given_are_recorded_as_written_without_defaults_or_secrets() {
        let cmd = BenchArgs::augment_args(clap::Command::new("bench"));
        let m = cmd.clone().get_matches_from([
            "bench",
            "--concurrency",
            "4,8",
            "--api-key",
            "sk-secret",
            "--header",
            "Authorization: Bearer sk-secret",
            "--url",
            "http://user:pw@127.0.0.1:8000/v1?key=sk-secret",
            "--record-chunks",
            "--temperature=0",
        ]);
        let given = given_flags(&cmd, &m);
        let text = serde_json::to_string(&given).unwrap();
        assert!(
            !text.contains("sk-secret") && !text.contains("pw@"),
            "{text}"
        );
        let find = |f: &str| given.iter().find(|g| g.flag == f).map(|g| g.values.clone());
        assert_eq!(find("--concurrency"), Some(vec!["4,8".into()]));
        assert_eq!(find("--api-key"), Some(vec!["[redacted]".into()]));
        assert_eq!(
            find("--header"),
            Some(vec!["Authorization: [redacted]".into()])
        );
        assert_eq!(find("--url"), Some(vec!["http://127.0.0.1:8000/v1".into()]));
        assert_eq!(find("--record-chunks"), Some(vec![]));
        assert_eq!(find("--temperature"), Some(vec!["0".into()]));
        // Defaults (--tokenizer, --dispatch, …) were not written: not recorded;
        // the rest in the order written.
        let order: Vec<&str> = given.iter().map(|g| g.flag.as_str()).collect();
        assert_eq!(
            order,
            [
                "--concurrency",
                "--api-key",
                "--header",
                "--url",
                "--record-chunks",
                "--temperature"
            ]
        );
    }

    #[test]
    fn repeated_flags_keep_each_occurrence_in_the_order_written() {
        let cmd = BenchArgs::augment_args(clap::Command::new("bench"));
        let m = cmd.clone().get_matches_from([
            "bench",
            "--label",
            "a=1",
            "--goodput",
            "ttft:500 tpot:50",
            "--rate=1,2",
            "--label",
            "b=2",
        ]);
        let given: Vec<(String, Vec<String>)> = given_flags(&cmd, &m)
            .into_iter()
            .map(|g| (g.flag, g.values))
            .collect();
        let g = |f: &str, v: &[&str]| (f.to_string(), v.iter().map(|s| s.to_string()).collect());
        assert_eq!(
            given,
            [
                g("--label", &["a=1"]),
                g("--goodput", &["ttft:500 tpot:50"]),
                g("--rate", &["1,2"]),
                g("--label", &["b=2"]),
            ]
        );
    }

    #[test]
    fn value_parsers_explain_bad_values() {
        assert!(
            parse_sim_fault("404=0.1")
                .unwrap_err()
                .contains("not a fault")
        );
        assert!(
            parse_sim_fault("429=2")
                .unwrap_err()
                .contains("probability")
        );
    }
}
