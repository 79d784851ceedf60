//! The `tpscope` binary: flags, configuration, progress display and wiring of the
//! library crates. The only crate with clap, the terminal and `anyhow`.

mod analysis_flags;
mod bench_args;
mod bench_cmd;
mod bench_config;
mod bench_out;
mod bench_scrape;
mod bench_sim_flags;
mod bench_sweep;
mod compare_cmd;
mod docs_flags;
mod exit;
mod fd_limit;
mod import_cmd;
mod otlp_flags;
mod out_file;
mod progress;
mod proxy_cmd;
mod report_cmd;
mod signals;
mod sim_cmd;
mod sim_flags;
mod vllm_compat;
mod vllm_result;

use std::io::{self, Write};
use std::process::ExitCode;

use clap::{CommandFactory, FromArgMatches, Parser, Subcommand};

#[derive(Parser)]
#[command(
    name = "tpscope",
    version,
    about = "Measure how fast LLM inference really produces tokens, and find the time when it does not.",
    propagate_version = true
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Drive load at an OpenAI-compatible endpoint (or the built-in simulator) and record a span log.
    Bench(Box<bench_args::BenchArgs>),
    /// Turn span logs into metrics: TPS, TTFT, queue time, gap fraction, retries, cost.
    Report(Box<report_cmd::ReportArgs>),
    /// Judge a candidate run against a baseline by the acceptance criteria (exit 0/1/3, 2 on bad input).
    Compare(Box<compare_cmd::CompareArgs>),
    /// Serve a simulated continuous-batching inference engine (OpenAI-compatible).
    Sim(Box<sim_cmd::SimArgs>),
    /// Turn other tools' results (vLLM, AIPerf, GuideLLM, genai-bench, inference-perf, LLMPerf, OTLP traces) into a span log.
    Import(Box<import_cmd::ImportArgs>),
    /// Forward to an inference server, recording every completion as a span (cap, queue, Prometheus metrics).
    Proxy(Box<proxy_cmd::ProxyArgs>),
}

/// Whether an error chain is a broken pipe (e.g. `tpscope report … | head`), which
/// is success for a command-line tool.
fn is_broken_pipe(e: &anyhow::Error) -> bool {
    e.chain().any(|c| {
        c.downcast_ref::<io::Error>()
            .is_some_and(|io| io.kind() == io::ErrorKind::BrokenPipe)
    })
}

/// The long flags and aliases of `tpscope bench` (for the vLLM translation).
fn bench_flags(cmd: &clap::Command) -> Vec<String> {
    let Some(bench) = cmd.find_subcommand("bench") else {
        return Vec::new();
    };
    let mut names = vec!["help".to_string()];
    for a in bench.get_arguments() {
        names.extend(a.get_long().map(str::to_string));
        names.extend(
            a.get_all_aliases()
                .into_iter()
                .flatten()
                .map(str::to_string),
        );
    }
    names
}

fn main() -> ExitCode {
    // A pasted `vllm bench serve` line: vLLM's flags into tpscope's.
    let cmd = Cli::command();
    let translated = match vllm_compat::translate(std::env::args_os().collect(), &bench_flags(&cmd))
    {
        Ok(t) => t,
        Err(e) => {
            let _ = writeln!(io::stderr(), "error: {e:#}");
            return ExitCode::from(exit::EXIT_BAD_INPUT);
        }
    };
    let matches = cmd.clone().get_matches_from(translated.args);
    let cli = Cli::from_arg_matches(&matches).unwrap_or_else(|e| e.exit());
    let result = match cli.command {
        Command::Bench(mut a) => {
            if let (Some(bench), Some(m)) = (
                cmd.find_subcommand("bench"),
                matches.subcommand_matches("bench"),
            ) {
                a.given = bench_args::given_flags(bench, m);
            }
            let goals = a.goodput.goals().ok().flatten();
            bench_cmd::run(*a).and_then(|code| match &translated.result {
                Some(settings) => vllm_result::save(settings, goals.as_ref()).map(|_| code),
                None => Ok(code),
            })
        }
        Command::Report(a) => report_cmd::run(*a),
        Command::Compare(a) => compare_cmd::run(*a),
        Command::Sim(a) => sim_cmd::run(*a),
        Command::Import(a) => import_cmd::run(*a),
        Command::Proxy(a) => proxy_cmd::run(*a),
    };
    match result {
        Ok(code) => code,
        Err(e) if is_broken_pipe(&e) => ExitCode::SUCCESS,
        Err(e) => {
            let _ = writeln!(io::stderr(), "error: {}", exit::message(&e));
            ExitCode::from(exit::status_of(&e))
        }
    }
}
