//! `tpscope bench`: the wiring of the built-in simulator (when no `--url`), the
//! HTTP client, the writer thread, the load executor (one run per sweep level),
//! the progress line, Ctrl-C, and the report at the end. The flags are in
//! `bench_args.rs` and `bench_sim_flags.rs`, their validation in `bench_config.rs`
//! (and the load engine's spec), the log's destination and the report's feed in
//! `bench_out.rs`, the sweep's table in `bench_sweep.rs`.

use std::io::Write;
use std::net::{Ipv4Addr, SocketAddr};
use std::path::Path;
use std::process::ExitCode;
use std::sync::Arc;
use std::sync::atomic::{AtomicI32, Ordering::Relaxed};
use std::time::Duration;

use anyhow::Context;
use tpscope_load::bench::{BenchError, BenchTarget, Live, Observer, Simulated};
use tpscope_load::{BenchSpec, Control, RunSummary};
use tpscope_log::LogSet;

use crate::bench_args::BenchArgs;
use crate::bench_config::{BenchConfig, TargetConfig, simulator_settings};
use crate::bench_out::{self, OpenedLog, Recorded};
use crate::bench_sweep::print_sweep_table;
use crate::exit::{EXIT_FAILURE, ResultExt};
use crate::progress;
use crate::report_cmd::{self, ReportArgs, ReportConfig};
use crate::signals::{self, StopSignals};

/// What a bench leaves for its report.
struct Finished {
    summaries: Vec<RunSummary>,
    interrupted: Option<i32>,
    recorded: Option<Recorded>,
}

/// Runs `tpscope bench`.
pub fn run(args: BenchArgs) -> anyhow::Result<ExitCode> {
    let cfg = BenchConfig::from_args(args)?;
    for note in &cfg.spec.notes {
        eprintln!("note: {note}");
    }
    if let TargetConfig::Sim(sc) = &cfg.target {
        match sc.speed.to_string().as_str() {
            "realtime" => {}
            "max" => eprintln!(
                "note: the built-in simulator runs as fast as it can (--sim-speed max): times and rates are not a GPU's"
            ),
            f => eprintln!(
                "note: the built-in simulator runs {f}× faster than real time (--sim-speed {f}): every time is scaled by 1/{f}"
            ),
        }
    }
    // Before any thread starts: the descriptor table then grows without a wait.
    if let Ok(limit) = tpscope_sim::raise_nofile_limit() {
        let sim = matches!(cfg.target, TargetConfig::Sim(_));
        crate::fd_limit::check(&cfg.spec, sim, limit)?;
    }
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .thread_name("tpscope-bench")
        .build()
        .failure()
        .context("starting the async runtime")?;
    let signals = {
        let _in_runtime = rt.enter();
        StopSignals::install()
            .failure()
            .context("installing the signal handlers")?
    };
    let log = bench_out::open(&cfg.spec)?;
    let (log_name, log_stdout) = (log.name.clone(), log.stdout);
    let created = bench_out::CreatedGuard(log.created.clone());
    // The report's settings are `tpscope report`'s own defaults.
    let mut report = ReportConfig::from_args(&ReportArgs::for_file(Path::new(&log_name)))?;
    cfg.report.apply(&mut report.analysis)?;
    let (sim, target) = start_simulator(&cfg.target)?;
    let outcome = rt.block_on(bench(&cfg, target, signals, log, &report));
    if let Some(sim) = sim {
        sim.stop();
    }
    let Finished {
        summaries,
        interrupted,
        recorded,
    } = outcome?;
    created.keep();
    rt.shutdown_timeout(Duration::from_secs(1));
    let total = RunSummary::total(&summaries);
    let spec = &cfg.spec;
    if interrupted.is_some() && summaries.is_empty() {
        // Stopped before the measured run began (during the warm-up, or before
        // it): there is nothing to report, and the user must not wait for one.
        let when = if spec.flags.warmup.is_some() {
            "during the warm-up (--warmup)"
        } else {
            "before the run began"
        };
        eprintln!("stopped {when}: nothing was measured; {log_name} holds no run");
        return Ok(ExitCode::from(signals::exit_status(
            interrupted.unwrap_or(2),
        )));
    }
    if let Some(recorded) = recorded {
        // With the log on standard output, the report goes beside the progress line.
        let mut to: Box<dyn Write> = if log_stdout {
            Box::new(std::io::stderr())
        } else {
            Box::new(std::io::stdout())
        };
        let shown = recorded
            .join()
            .map_err(|_| anyhow::anyhow!("the report's reader stopped"))
            .and_then(|set| Ok(set?))
            .and_then(|set| {
                let file = if log_stdout { "FILE" } else { &log_name };
                print_report(spec, &set, &report, (&log_name, file), &mut to)
            });
        if let Err(e) = shown {
            eprintln!("warning: the report could not be produced: {e:#}");
        }
    }
    eprintln!(
        "wrote {} spans ({} ok, {} error, {} cancelled) to {log_name}",
        total.spans, total.status.ok, total.status.error, total.status.cancelled,
    );
    Ok(exit_status(spec, &summaries, interrupted))
}

/// The exit status of a bench that ran (said on standard error when it is not
/// success): the signal's, or 1 when no request succeeded or a run's failures
/// are above `--max-error-rate`.
fn exit_status(spec: &BenchSpec, summaries: &[RunSummary], interrupted: Option<i32>) -> ExitCode {
    let total = RunSummary::total(summaries);
    if let Some(signo) = interrupted {
        return ExitCode::from(signals::exit_status(signo));
    }
    let reasons = failure_reasons(summaries);
    if total.status.error > 0 && total.status.ok > 0 {
        // The server's own words (what broke: "--model nope" said only "no request
        // succeeded"; the reason was in the log).
        eprintln!("most frequent failures: {}", reasons.join("; "));
    }
    if total.status.ok == 0 && total.spans > 0 {
        match reasons.first() {
            Some(first) => eprintln!("error: no request succeeded; {first}"),
            None => eprintln!("error: no request succeeded"),
        }
        return ExitCode::from(EXIT_FAILURE);
    }
    if let Some(max) = spec.flags.max_error_rate
        && let Some(line) = error_rate_exceeded(spec, summaries, max)
    {
        eprintln!("error: {line}");
        return ExitCode::from(EXIT_FAILURE);
    }
    ExitCode::SUCCESS
}

/// The built-in simulator, on a runtime (and threads) of its own, so its work
/// does not queue behind the client's and its CPU time can be told apart.
struct BuiltIn {
    handle: tpscope_sim::SimHandle,
    rt: tokio::runtime::Runtime,
}

/// Starts the built-in simulator when it is the target; the target to measure.
fn start_simulator(target: &TargetConfig) -> anyhow::Result<(Option<BuiltIn>, BenchTarget)> {
    let sc = match target {
        TargetConfig::Url(u) => return Ok((None, BenchTarget::url(u.clone()))),
        TargetConfig::Sim(sc) => (**sc).clone(),
    };
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .thread_name("tpscope-sim-http")
        .build()
        .failure()
        .context("starting the simulator's runtime")?;
    let handle = rt
        .block_on(tpscope_sim::start(
            sc,
            SocketAddr::from((Ipv4Addr::LOCALHOST, 0)),
        ))
        .map_err(|e| anyhow::anyhow!("starting the built-in simulator: {e}"))
        .failure()?;
    let target = BenchTarget {
        base_url: handle.base_url(),
        simulator: Some(Simulated {
            settings: simulator_settings(handle.config()),
            max_model_len: handle.config().model.max_model_len,
        }),
    };
    Ok((Some(BuiltIn { handle, rt }), target))
}

impl BuiltIn {
    /// Stops the simulator, bounded: one that does not stop must not hang the
    /// benchmark, whose log is complete by now.
    fn stop(self) {
        let h = self.handle;
        match self
            .rt
            .block_on(async { tokio::time::timeout(Duration::from_secs(5), h.shutdown()).await })
        {
            Ok(Ok(())) => {}
            Ok(Err(e)) => eprintln!("warning: stopping the built-in simulator: {e}"),
            Err(_) => {
                eprintln!("warning: the built-in simulator did not stop within 5 s; leaving it")
            }
        }
        self.rt.shutdown_timeout(Duration::from_millis(500));
    }
}

/// The report of one run, or a sweep's table, from the log as recorded.
fn print_report(
    spec: &BenchSpec,
    set: &LogSet,
    report: &ReportConfig,
    names: (&str, &str),
    to: &mut dyn Write,
) -> anyhow::Result<()> {
    let r = report_cmd::build_report(set, &report.analysis);
    if spec.levels.len() > 1 {
        print_sweep_table(&r, names, to)?;
    } else {
        // What the server did first (what broke: the default run's latency lines
        // were mostly the client's own backlog), then the whole report.
        if let Some(run) = r.runs.first() {
            writeln!(to, "{}", tpscope_render::lead::text(run))?;
        }
        to.write_all(&report_cmd::render(&r, set, report_cmd::Format::Text)?)?;
    }
    let run_ids: Vec<&str> = set.runs.iter().map(|r| r.input.run_id.as_str()).collect();
    to.write_all(next_steps(spec, names.1, &run_ids).as_bytes())?;
    Ok(to.flush()?)
}

/// The one or two commands worth running next (`run_ids`: the runs written, for a
/// sweep's compare: its file holds several runs).
fn next_steps(spec: &BenchSpec, file: &str, run_ids: &[&str]) -> String {
    let mut steps = vec![(
        format!("tpscope report {file} --html report.html"),
        "charts: TPS over time, the request waterfall",
    )];
    if spec.levels.len() == 1 {
        steps.push((
            "tpscope bench --concurrency 1,4,16,64".into(),
            "a sweep: where throughput stops growing",
        ));
    }
    match run_ids {
        // A sweep's file holds a run per level: `compare FILE AFTER` exited 2.
        [first, .., last] => steps.push((
            format!("tpscope compare {file} --baseline-run {first} --candidate-run {last}"),
            "the lowest and highest level side by side",
        )),
        _ => steps.push((
            format!("tpscope compare {file} AFTER.jsonl"),
            "after a change: did it improve",
        )),
    }
    let w = steps.iter().map(|s| s.0.len()).max().unwrap_or(0);
    let mut o = String::from("\nnext:\n");
    for (cmd, why) in steps {
        o.push_str(&format!("  {cmd:<w$}   {why}\n"));
    }
    o
}

/// The most frequent failure message of each cause over every run, most
/// frequent first: `http_4xx ×12: HTTP 404 Not Found: The model … does not exist`.
fn failure_reasons(summaries: &[RunSummary]) -> Vec<String> {
    // A sweep's levels each keep their own tally; the same message sums.
    let mut all: Vec<(tpscope_model::Cause, String, u64)> = Vec::new();
    for c in summaries.iter().flat_map(|s| s.errors.top(1)) {
        let Some(m) = c.messages.first() else {
            continue;
        };
        match all
            .iter_mut()
            .find(|(cause, msg, _)| *cause == c.cause && *msg == m.message)
        {
            Some(e) => e.2 += m.count,
            None => all.push((c.cause, m.message.clone(), m.count)),
        }
    }
    all.sort_by_key(|e| std::cmp::Reverse(e.2));
    all.into_iter()
        .map(|(cause, msg, n)| format!("{cause} ×{n}: {msg}"))
        .collect()
}

/// The first run whose share of failed requests (error / (ok + error)) is above
/// `--max-error-rate`, said as a line.
fn error_rate_exceeded(spec: &BenchSpec, summaries: &[RunSummary], max: f64) -> Option<String> {
    summaries.iter().zip(&spec.levels).find_map(|(s, level)| {
        let done = s.status.ok + s.status.error;
        let share = (done > 0).then(|| s.status.error as f64 / done as f64)?;
        (share > max).then(|| {
            let run = level
                .label
                .as_ref()
                .map(|l| format!(" at {l}"))
                .unwrap_or_default();
            format!(
                "{:.1}% of requests failed{run} ({} of {done}), above --max-error-rate {:.1}%",
                share * 100.0,
                s.status.error,
                max * 100.0
            )
        })
    })
}

/// Prints the library's notes and warnings on standard error.
struct Say;

impl Observer for Say {
    fn note(&self, line: &str) {
        eprintln!("note: {line}");
    }

    fn warning(&self, line: &str) {
        eprintln!("warning: {line}");
    }
}

/// A library error as the command line says it (the flag it names, exit 1 for
/// what went wrong while running).
fn bench_error(e: BenchError, log_name: &str) -> anyhow::Error {
    match e {
        BenchError::Log(io) => Err::<(), _>(io)
            .failure()
            .with_context(|| format!("--out: writing {log_name}"))
            .unwrap_err(),
        e if e.is_failure() => Err::<(), _>(e).failure().unwrap_err(),
        e => e.into(),
    }
}

async fn bench(
    cfg: &BenchConfig,
    target: BenchTarget,
    mut signals: StopSignals,
    log: OpenedLog,
    report: &ReportConfig,
) -> anyhow::Result<Finished> {
    let spec = &cfg.spec;
    let base_url = target.base_url.clone();
    let live = Live::default();
    let mut connected = tpscope_load::bench::connect(spec, target, live.clone(), &Say)
        .await
        .map_err(|e| bench_error(e, &log.name))?;
    if let Some(c) = cfg.otlp.config() {
        connected.export_otlp(c);
    }
    let (sink, recorded): (Box<dyn Write + Send>, _) = if cfg.quiet {
        (log.sink, None)
    } else {
        let (tee, recorded) = bench_out::tee(log.sink, &log.name, report.read);
        (Box::new(tee), Some(recorded))
    };
    let control = Control::default();
    let stopped_by = Arc::new(AtomicI32::new(0));
    let ctrlc = {
        let (c, stopped_by) = (control.clone(), stopped_by.clone());
        tokio::spawn(async move {
            let Some(signo) = signals.recv().await else {
                return;
            };
            stopped_by.store(signo, Relaxed);
            eprintln!(
                "\nstopping: no new requests; in-flight ones finish (Ctrl-C again to cancel them)"
            );
            c.stop.cancel();
            if signals.recv().await.is_some() {
                eprintln!("\ncancelling in-flight requests");
                c.cancel.cancel();
            }
        })
    };
    let scrape = cfg.server_metrics.resolve_all(&base_url).await?;
    let progress = progress::Progress::start(live.stats.clone(), live.tokens.clone(), cfg.quiet);
    let ran = connected.run(sink, &scrape, &control, &Say).await;
    progress.finish();
    ctrlc.abort();
    let ran = ran.map_err(|e| bench_error(e, &log.name))?;
    crate::otlp_flags::warn_dropped(ran.otlp.as_deref());
    let interrupted = (control.stop.is_cancelled() || control.cancel.is_cancelled())
        .then(|| stopped_by.load(Relaxed))
        .map(|signo| if signo == 0 { 2 } else { signo });
    Ok(Finished {
        summaries: ran.summaries,
        interrupted,
        recorded,
    })
}
