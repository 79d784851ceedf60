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
use tpscope_client::{Client, Endpoint, LiveTokens};
use tpscope_load::{BenchSpec, Control, RunSummary, execute};
use tpscope_log::LogSet;
use tpscope_model::{RunClock, Target};
use tpscope_record::{LiveStats, RunInfo, TOOL, Writer, new_run_id, redact_url};
use tpscope_sim::SimConfig;

use crate::bench_args::BenchArgs;
use crate::bench_config::{BenchConfig, TargetConfig, simulator_settings};
use crate::bench_out::{self, OpenedLog, Recorded};
use crate::bench_scrape;
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
    if let Ok(limit) = tpscope_sim::raise_nofile_limit() {
        let sim = matches!(cfg.target, TargetConfig::Sim(_));
        crate::fd_limit::check(&cfg.spec, sim, limit)?;
    }
    let log = bench_out::open(&cfg.spec)?;
    let (log_name, log_stdout) = (log.name.clone(), log.stdout);
    let created = bench_out::CreatedGuard(log.created.clone());
    // The report's settings are `tpscope report`'s own defaults.
    let mut report = ReportConfig::from_args(&ReportArgs::for_file(Path::new(&log_name)))?;
    cfg.report.apply(&mut report.analysis)?;
    // The simulator gets a runtime (and threads) of its own, so its work does not
    // queue behind the client's and its CPU time can be told apart.
    let sim_rt = match &cfg.target {
        TargetConfig::Sim(_) => Some(
            tokio::runtime::Builder::new_multi_thread()
                .worker_threads(1)
                .enable_all()
                .thread_name("tpscope-sim-http")
                .build()
                .failure()
                .context("starting the simulator's runtime")?,
        ),
        TargetConfig::Url(_) => None,
    };
    let (sim, base_url) = match (&cfg.target, &sim_rt) {
        (TargetConfig::Sim(sc), Some(srt)) => {
            let sc = (**sc).clone();
            let h = srt
                .block_on(tpscope_sim::start(
                    sc,
                    SocketAddr::from((Ipv4Addr::LOCALHOST, 0)),
                ))
                .map_err(|e| anyhow::anyhow!("starting the built-in simulator: {e}"))
                .failure()?;
            let url = h.base_url();
            (Some(h), url)
        }
        (TargetConfig::Url(u), _) => (None, u.clone()),
        _ => unreachable!("a simulator target has its runtime"),
    };
    let outcome = rt.block_on(bench(
        &cfg,
        base_url,
        sim.as_ref().map(|h| h.config().clone()),
        signals,
        log,
        &report,
    ));
    if let (Some(h), Some(srt)) = (sim, sim_rt) {
        // Bounded: a simulator that does not stop must not hang the benchmark,
        // whose log is complete by now.
        match srt
            .block_on(async { tokio::time::timeout(Duration::from_secs(5), h.shutdown()).await })
        {
            Ok(Ok(())) => {}
            Ok(Err(e)) => eprintln!("warning: stopping the built-in simulator: {e}"),
            Err(_) => {
                eprintln!("warning: the built-in simulator did not stop within 5 s; leaving it")
            }
        }
        srt.shutdown_timeout(Duration::from_millis(500));
    }
    let Finished {
        summaries,
        interrupted,
        recorded,
    } = outcome?;
    created.keep();
    rt.shutdown_timeout(Duration::from_secs(1));
    let total: RunSummary = summaries.iter().fold(RunSummary::default(), |mut acc, s| {
        acc.spans += s.spans;
        acc.ok += s.ok;
        acc.error += s.error;
        acc.cancelled += s.cancelled;
        acc
    });
    let spec = &cfg.spec;
    if interrupted.is_some() && summaries.is_empty() {
        // Stopped before the measured run began (during the warm-up, or before
        // it): there is nothing to report, and the user must not wait for one.
        let when = if spec.warmup.is_some() {
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
        total.spans, total.ok, total.error, total.cancelled,
    );
    if let Some(signo) = interrupted {
        return Ok(ExitCode::from(signals::exit_status(signo)));
    }
    let reasons = failure_reasons(&summaries);
    if total.error > 0 && total.ok > 0 {
        // The server's own words (what broke: "--model nope" said only "no request
        // succeeded"; the reason was in the log).
        eprintln!("most frequent failures: {}", reasons.join("; "));
    }
    if total.ok == 0 && total.spans > 0 {
        match reasons.first() {
            Some(first) => eprintln!("error: no request succeeded; {first}"),
            None => eprintln!("error: no request succeeded"),
        }
        return Ok(ExitCode::from(EXIT_FAILURE));
    }
    if let Some(max) = spec.max_error_rate
        && let Some(line) = error_rate_exceeded(spec, &summaries, max)
    {
        eprintln!("error: {line}");
        return Ok(ExitCode::from(EXIT_FAILURE));
    }
    Ok(ExitCode::SUCCESS)
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
        let done = s.ok + s.error;
        let share = (done > 0).then(|| s.error as f64 / done as f64)?;
        (share > max).then(|| {
            let run = level
                .label
                .as_ref()
                .map(|l| format!(" at {l}"))
                .unwrap_or_default();
            format!(
                "{:.1}% of requests failed{run} ({} of {done}), above --max-error-rate {:.1}%",
                share * 100.0,
                s.error,
                max * 100.0
            )
        })
    })
}

async fn bench(
    cfg: &BenchConfig,
    base_url: String,
    sim: Option<SimConfig>,
    mut signals: StopSignals,
    log: OpenedLog,
    report: &ReportConfig,
) -> anyhow::Result<Finished> {
    let spec = &cfg.spec;
    let mut endpoint = Endpoint::new(
        base_url.clone(),
        spec.api,
        spec.model.clone().unwrap_or_default(),
    );
    endpoint.api_key = spec.api_key.clone();
    endpoint.headers = spec.headers.clone();
    endpoint.extra_body = spec.extra_body.clone();
    endpoint.include_usage = spec.include_usage;
    let shown_url = redact_url(&base_url);
    // The model's context, when known: the simulator's own, or what the server's
    // model list says (vLLM's max_model_len).
    let mut max_model_len = sim.as_ref().map(|s| s.model.max_model_len);
    let mut model_root = None;
    if endpoint.model.is_empty() {
        let probe = Client::new(endpoint.clone(), spec.client.clone()).context("--url")?;
        let limit = spec.model_lookup_timeout();
        let models = tokio::time::timeout(
            limit,
            crate::progress::said_after_2s(
                probe.models(),
                format!(
                    "waiting for {shown_url}/models to name the model (up to {} s; give --model \
                 to skip this)",
                    limit.as_secs_f64()
                ),
            ),
        )
        .await
        .map_err(|_| {
            anyhow::anyhow!(
                "no answer within {} s: is it an OpenAI-compatible server, and up?",
                limit.as_secs_f64()
            )
        })
        .and_then(|r| Ok(r?))
        .failure()
        .with_context(|| {
            format!("asking {shown_url}/models for a model (give --model to skip this)")
        })?;
        let first = models
            .into_iter()
            .next()
            .with_context(|| format!("{shown_url}/models lists no model: give --model"))?;
        endpoint.model = first.id;
        max_model_len = max_model_len.or(first.max_model_len);
        model_root = first.root;
    }
    let context = match max_model_len {
        // Unmarked: lengths that cannot fit are bad input (exit 2).
        Some(m) => spec.context_fit(m)?,
        None => Default::default(),
    };
    if let Some(note) = &context.note {
        eprintln!("note: {note}");
    }
    let streamed = Arc::new(LiveTokens::default());
    let client = Arc::new(
        Client::with_live(
            endpoint.clone(),
            spec.client.clone(),
            Some(streamed.clone()),
        )
        .context("--url")?,
    );
    let live = Arc::new(LiveStats::default());
    let (sink, recorded): (Box<dyn Write + Send>, _) = if cfg.quiet {
        (log.sink, None)
    } else {
        let (tee, recorded) = bench_out::tee(log.sink, &log.name, report.read);
        (Box::new(tee), Some(recorded))
    };
    let mut writer = Writer::to_writer(sink, spec.tokenizer, Some(live.clone()));
    let otlp = cfg.otlp.start(&mut writer);
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
    let progress = progress::Progress::start(live.clone(), streamed.clone(), cfg.quiet);
    if let Some(plan) = spec.warmup_plan() {
        let planned = plan.requests;
        live.start_run("warm-up", planned, plan.cap);
        streamed.reset();
        if planned != Some(0) {
            execute(
                plan,
                RunClock::start(),
                client.clone(),
                None,
                live.clone(),
                &control,
            )
            .await;
        }
    }
    let mut summaries = Vec::new();
    for (i, level) in spec.levels.iter().enumerate() {
        if control.stop.is_cancelled() {
            break;
        }
        let run_id = new_run_id(i);
        let clock = RunClock::start();
        let mut labels = spec.labels.clone();
        if let Some(l) = &level.label {
            labels.insert("sweep".into(), l.replace(' ', "="));
        }
        if let Some(root) = &model_root {
            labels.insert(
                tpscope_analysis::count_check::MODEL_ROOT_LABEL.into(),
                root.clone(),
            );
        }
        let mut load = spec.load_settings(i, sim.as_ref().map(simulator_settings));
        load.context_limit = context.limit;
        let info = RunInfo {
            tool: TOOL.into(),
            target: Target {
                url: match &cfg.target {
                    TargetConfig::Url(_) => Some(shown_url.clone()),
                    TargetConfig::Sim(_) => None,
                },
                model: Some(endpoint.model.clone()),
                api: Some(spec.api.as_str().into()),
            },
            cap: level.cap,
            token_source: Some(spec.token_source()),
            tokenizer: Some(spec.tokenizer.name().into()),
            sample_interval: Some(spec.sample_interval),
            // The bench's sampler writes every tick (no heartbeat).
            sample_heartbeat: None,
            load: serde_json::to_value(load).context("the run's load settings")?,
            labels,
        };
        let rec = writer.sender();
        rec.run(info.record(run_id.clone(), &clock));
        live.start_run(
            level.label.as_deref().unwrap_or(""),
            level.requests,
            level.cap,
        );
        streamed.reset();
        let mut plan = spec.plan(level, run_id.clone());
        plan.context = context.limit;
        let scraper = bench_scrape::start(&scrape, &run_id, clock, rec.clone()).await;
        let summary = execute(
            plan,
            clock,
            client.clone(),
            Some(rec.clone()),
            live.clone(),
            &control,
        )
        .await;
        bench_scrape::stop(scraper).await;
        rec.end(&run_id, clock.now(), live.lag.schedule_late_max());
        rec.sync();
        summaries.push(summary);
    }
    progress.finish();
    ctrlc.abort();
    writer
        .finish()
        .failure()
        .with_context(|| format!("--out: writing {}", log.name))?;
    crate::otlp_flags::warn_dropped(otlp.as_deref());
    let interrupted = (control.stop.is_cancelled() || control.cancel.is_cancelled())
        .then(|| stopped_by.load(Relaxed))
        .map(|signo| if signo == 0 { 2 } else { signo });
    Ok(Finished {
        summaries,
        interrupted,
        recorded,
    })
}
