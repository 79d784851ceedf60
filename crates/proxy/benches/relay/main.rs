//! The relay benchmark (docs/design.md §12): the latency a proxy adds to
//! each streamed chunk at 1,000 concurrent streams, `tpscope proxy` against the
//! direct path, against nginx as a plain streaming reverse proxy and against
//! LiteLLM's proxy server (the gateway of Python pipelines), in the same run; and
//! each proxy's CPU time per relayed token and its memory.
//!
//! One process holds the upstream (a minimal SSE server on its own runtime
//! thread, `bench-upstream`) and the client (`bench-client`); each content chunk
//! carries the instant the upstream wrote it, and its latency is the instant the
//! client's read returned it minus that (one monotonic clock). The proxies run as
//! child processes: the `tpscope` release binary (`tpscope proxy --out` a span
//! log in a temporary directory), Debian's nginx with a generated config, and
//! LiteLLM's proxy (one worker, a generated pass-through config) from the venv
//! that scripts/litellm-venv.sh makes. The
//! paths take turns, in a rotated order each round, so that the machine's
//! background load falls on all of them alike; every figure is given per round
//! and pooled. See docs/proxy-bench.md for the method and its caveats.
//!
//! Run: `cargo build --release -p tpscope-cli && cargo bench -p tpscope-proxy
//! --bench relay` (options: `--streams 1000`, `--period-ms 50`, `--chunks 200`,
//! `--warmup 20` (first chunks of each stream left out; at least the connect
//! ramp's periods, and as many are left out at the end, so that every measured
//! chunk is sent while all streams are open), `--rounds 3`, `--arrivals
//! spread|steps` (streams start spread over one period, or every stream's chunk
//! at the same instants, as an engine's decode steps emit them),
//! `--paths direct,tpscope,nginx,litellm` (and `baseline`), `--tpscope PATH` (else
//! `$TPSCOPE_BIN`, else target/release/tpscope), `--baseline PATH` (else
//! `$TPSCOPE_BASELINE`: another build of tpscope, run as the `baseline` path so
//! that one run gives the new/old ratios), `--nginx PATH` (else /usr/sbin/nginx or `nginx`
//! on PATH), `--litellm PATH` (else `$LITELLM_BIN`, else
//! .venv-litellm/bin/litellm), `--workers N|default` (every proxy at N serving
//! threads or worker processes; else each at its own default), `--pin
//! apart|none` (the upstream, the client and each proxy on CPUs of their own,
//! see `pin.rs`), `--dump DIR` (each round's measured chunks to
//! `DIR/PATH-ROUND.tsv`: stream, sequence, send instant, latency and due
//! instant in ns, for analyses the tables do not make; an existing file is not
//! overwritten),
//! `--log FILE` (each round's figures appended to a rounds log, see
//! `pool.rs`), `--pool FILE[,FILE…]` (run nothing: the ratio lines over every
//! run in those logs); a path whose program is missing is skipped with a
//! message saying how to install it).

mod client;
mod kernel;
mod litellm_conf;
mod nginx_conf;
mod path;
mod pin;
mod pool;
mod procs;
mod report;
mod schedule;
mod stats;
mod upstream;

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

pub use path::PathKind;
use procs::Proxy;
use report::Round;
use upstream::Shape;

/// What the benchmark is told.
pub struct Opts {
    pub streams: u32,
    pub period: Duration,
    pub chunks: u32,
    pub warmup: u32,
    pub rounds: u32,
    pub steps: bool,
    pub paths: Vec<PathKind>,
    pub tpscope: PathBuf,
    pub baseline: Option<PathBuf>,
    pub nginx: Option<PathBuf>,
    pub litellm: PathBuf,
    /// `--workers N`: every proxy at N serving threads or worker processes
    /// (`None`: each at its own default).
    pub workers: Option<u32>,
    /// `--pin apart`: the upstream, the client and the proxy each on CPUs of
    /// their own ([`pin::plan`]).
    pub pin: bool,
    pub dump: Option<PathBuf>,
    /// The rounds log each round's figures are appended to.
    pub log: Option<PathBuf>,
    /// Rounds logs to pool instead of running.
    pub pool: Vec<PathBuf>,
}

impl Opts {
    /// Periods over which the connects are spread.
    pub fn ramp(&self) -> u32 {
        schedule::ramp(self.period)
    }

    /// The sequence numbers measured in each stream.
    pub fn measured(&self) -> std::ops::Range<u32> {
        schedule::measured(self.warmup, self.chunks, self.ramp())
    }
}

fn opts() -> Result<Opts, String> {
    let target = std::env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| Path::new(env!("CARGO_MANIFEST_DIR")).join("../../target"));
    let mut o = Opts {
        streams: 1000,
        period: Duration::from_millis(50),
        chunks: 200,
        warmup: 20,
        rounds: 3,
        steps: false,
        paths: vec![PathKind::Direct, PathKind::Tpscope, PathKind::Nginx],
        tpscope: std::env::var_os("TPSCOPE_BIN")
            .map(PathBuf::from)
            .unwrap_or_else(|| target.join("release/tpscope")),
        baseline: std::env::var_os("TPSCOPE_BASELINE").map(PathBuf::from),
        nginx: None,
        litellm: std::env::var_os("LITELLM_BIN")
            .map(PathBuf::from)
            .unwrap_or_else(|| {
                Path::new(env!("CARGO_MANIFEST_DIR")).join("../../.venv-litellm/bin/litellm")
            }),
        workers: None,
        pin: false,
        dump: None,
        log: None,
        pool: Vec::new(),
    };
    let args: Vec<String> = std::env::args().skip(1).collect();
    let mut it = args.iter();
    while let Some(flag) = it.next() {
        // `cargo bench` passes `--bench` to every benchmark binary.
        if flag == "--bench" {
            continue;
        }
        let v = it.next().ok_or(format!("{flag} needs a value"))?;
        let num = |what: &str| -> Result<u32, String> {
            v.parse()
                .ok()
                .filter(|n| *n > 0)
                .ok_or(format!("{flag} {v}: expected {what}"))
        };
        match flag.as_str() {
            "--streams" => o.streams = num("a number of streams > 0")?,
            "--chunks" => o.chunks = num("a number of chunks > 0")?,
            "--rounds" => o.rounds = num("a number of rounds > 0")?,
            "--warmup" => {
                o.warmup = v
                    .parse()
                    .map_err(|_| format!("--warmup {v}: expected a number of chunks"))?
            }
            "--period-ms" => {
                let ms: f64 = v
                    .parse()
                    .ok()
                    .filter(|m: &f64| *m > 0.0 && m.is_finite())
                    .ok_or(format!("--period-ms {v}: expected milliseconds > 0"))?;
                o.period = Duration::from_secs_f64(ms / 1e3);
            }
            "--paths" => {
                let unknown = |p: &str| {
                    format!(
                        "--paths: unknown path `{p}` (direct, tpscope, baseline, nginx, litellm)"
                    )
                };
                o.paths = v
                    .split(',')
                    .map(str::trim)
                    .map(|p| PathKind::from_name(p).ok_or_else(|| unknown(p)))
                    .collect::<Result<_, _>>()?
            }
            "--arrivals" => {
                o.steps = match v.as_str() {
                    "spread" => false,
                    "steps" => true,
                    _ => return Err(format!("--arrivals {v}: expected spread or steps")),
                }
            }
            "--tpscope" => o.tpscope = PathBuf::from(v),
            "--baseline" => o.baseline = Some(PathBuf::from(v)),
            "--nginx" => o.nginx = Some(PathBuf::from(v)),
            "--litellm" => o.litellm = PathBuf::from(v),
            "--workers" => {
                o.workers = match v.as_str() {
                    "default" => None,
                    _ => Some(num("a number of workers > 0, or default")?),
                }
            }
            "--pin" => {
                o.pin = match v.as_str() {
                    "apart" => true,
                    "none" => false,
                    _ => return Err(format!("--pin {v}: expected apart or none")),
                }
            }
            "--dump" => {
                std::fs::create_dir_all(v).map_err(|e| format!("--dump {v}: {e}"))?;
                o.dump = Some(PathBuf::from(v));
            }
            "--log" => o.log = Some(PathBuf::from(v)),
            "--pool" => o.pool = v.split(',').map(PathBuf::from).collect(),
            _ => return Err(format!("unknown option {flag}")),
        }
    }
    // Refused before any round runs rather than after one (nothing measured is lost).
    if let Some(dir) = &o.dump {
        for p in &o.paths {
            for r in 1..=o.rounds {
                let f = client::dump_file(dir, p.name(), r);
                if f.exists() {
                    return Err(format!(
                        "--dump: {} exists (a dump is never overwritten; choose another directory)",
                        f.display()
                    ));
                }
            }
        }
    }
    // A file that is not a rounds log is refused now, not after the first round.
    if let Some(log) = o.log.as_ref().filter(|_| o.pool.is_empty()) {
        pool::append(log, &[])?;
    }
    if o.measured().is_empty() {
        return Err(format!(
            "--chunks {} with --warmup {} leaves no chunk to measure (the first {} and the last {} of each stream are left out)",
            o.chunks,
            o.warmup,
            o.warmup.max(o.ramp()),
            o.ramp()
        ));
    }
    if o.nginx.is_none() {
        o.nginx = std::iter::once(PathBuf::from("/usr/sbin/nginx"))
            .chain(
                std::env::var_os("PATH")
                    .map(|p| {
                        std::env::split_paths(&p)
                            .map(|d| d.join("nginx"))
                            .collect::<Vec<_>>()
                    })
                    .unwrap_or_default(),
            )
            .find(|p| p.is_file());
    }
    Ok(o)
}

/// Puts the main thread (the round's orchestration, and the threads it starts
/// next) on `cpu`; `None`: nothing to do.
fn pin_main(cpu: Option<usize>) {
    if let Some(c) = cpu
        && let Err(e) = procs::pin_this_thread(&[c])
    {
        eprintln!("relay bench: --pin apart: CPU {c}: {e}");
        std::process::exit(1);
    }
}

fn runtime(name: &str) -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .thread_name(name)
        .enable_all()
        .build()
        .expect("a tokio runtime")
}

/// Everything a round needs.
struct Bench {
    o: Opts,
    origin: Instant,
    upstream: SocketAddr,
    client_rt: tokio::runtime::Runtime,
    /// `--pin apart`'s CPUs.
    pins: Option<pin::Pins>,
    tmp: tempfile::TempDir,
    tck: f64,
}

impl Bench {
    /// One path, one round: start the proxy, stream, read the counters, stop it.
    fn round(&self, path: PathKind, round: u32) -> Result<Round, String> {
        let how = procs::Launch {
            workers: self.o.workers,
            cpus: self.pins.as_ref().map(|p| p.proxy.as_slice()),
        };
        let proxy = match path {
            PathKind::Direct => None,
            PathKind::Tpscope => Some(Proxy::tpscope(
                &self.o.tpscope,
                self.upstream,
                &self.tmp.path().join(format!("tpscope-{round}.jsonl")),
                how,
            )?),
            PathKind::Baseline => Some(Proxy::tpscope(
                self.o.baseline.as_deref().ok_or("no --baseline")?,
                self.upstream,
                &self.tmp.path().join(format!("baseline-{round}.jsonl")),
                how,
            )?),
            PathKind::Nginx => {
                let dir = self.tmp.path().join(format!("nginx-{round}"));
                std::fs::create_dir_all(&dir).map_err(|e| format!("{}: {e}", dir.display()))?;
                let bin = self.o.nginx.as_deref().ok_or("no nginx")?;
                // nginx's `auto` counts the machine's CPUs, not those it may
                // run on: pinned, its default is one worker per CPU it has.
                let workers = how.workers.or(how.cpus.map(|c| c.len() as u32));
                Some(Proxy::nginx(
                    bin,
                    self.upstream,
                    &dir,
                    procs::Launch { workers, ..how },
                )?)
            }
            PathKind::Litellm => {
                let dir = self.tmp.path().join(format!("litellm-{round}"));
                std::fs::create_dir_all(&dir).map_err(|e| format!("{}: {e}", dir.display()))?;
                Some(Proxy::litellm(&self.o.litellm, self.upstream, &dir, how)?)
            }
        };
        let addr = proxy.as_ref().map_or(self.upstream, |p| p.addr);
        let cpu = |p: &Option<Proxy>| p.as_ref().and_then(|p| p.cpu_user_s(self.tck));
        let own = || {
            (
                procs::own_threads_cpu_s("bench-client", self.tck),
                procs::own_threads_cpu_s("bench-upstream", self.tck),
            )
        };
        let workers = |p: &Option<Proxy>| p.as_ref().map(|p| p.workers_cpu_s(self.tck));
        let (jiffies0, cpu0, own0, load0) =
            (procs::machine_jiffies(), cpu(&proxy), own(), procs::load1());
        let workers0 = workers(&proxy).unwrap_or_default();
        let overflows0 = procs::listen_overflows();
        let t0 = Instant::now();
        let (o, origin) = (&self.o, self.origin);
        let (ramp, measure) = (self.o.ramp(), self.o.measured());
        let outs = self.client_rt.block_on(async move {
            let start = tokio::time::Instant::now() + Duration::from_millis(100);
            let tasks: Vec<_> = (0..o.streams)
                .map(|i| {
                    // With steps the upstream aligns the chunks anyway.
                    let at = start + schedule::start_offset(i, o.streams, o.period, ramp);
                    tokio::spawn(client::run_stream(
                        addr,
                        at,
                        origin,
                        o.chunks,
                        measure.clone(),
                    ))
                })
                .collect();
            let mut outs = Vec::with_capacity(tasks.len());
            for t in tasks {
                outs.push(t.await.unwrap_or_default());
            }
            outs
        });
        let wall = t0.elapsed().as_secs_f64();
        if let Some(dir) = &self.o.dump {
            let file = client::dump_file(dir, path.name(), round);
            std::fs::File::create_new(&file)
                .and_then(|f| client::dump(std::io::BufWriter::new(f), &outs))
                .map_err(|e| format!("--dump: {}: {e}", file.display()))?;
        }
        let (cpu1, own1, load1) = (cpu(&proxy), own(), procs::load1());
        // Each worker's CPU over the round (matched by name: a thread or
        // process that started meanwhile counts from zero).
        let spent: Vec<f64> = workers(&proxy)
            .unwrap_or_default()
            .iter()
            .map(|(k, v)| v - workers0.iter().find(|(k0, _)| k0 == k).map_or(0.0, |w| w.1))
            .collect();
        let busiest = stats::busiest_share(&spent).map(|s| (spent.len(), s));
        let overflows = procs::listen_overflows()
            .zip(overflows0)
            .map(|(a, b)| a.saturating_sub(b));
        let busy = procs::machine_jiffies()
            .zip(jiffies0)
            .map(|((b1, t1), (b0, t0))| (b1 - b0) as f64 / (t1 - t0).max(1) as f64);
        let (rss, hwm) = proxy
            .as_ref()
            .map_or((None, None), |p| (p.mem_mib("VmRSS"), p.mem_mib("VmHWM")));
        let log = proxy.as_ref().and_then(|p| p.log.clone());
        if let Some(p) = proxy {
            p.stop();
        }
        let spans = log.map(|l| procs::spans_in(&l, self.o.chunks));
        Ok(Round::new(
            path,
            round,
            outs,
            report::Costs {
                wall_s: wall,
                proxy_cpu_s: cpu1.zip(cpu0).map(|(a, b)| a.0 - b.0),
                proxy_user_s: cpu1.zip(cpu0).map(|(a, b)| a.1 - b.1),
                client_cpu_s: own1.0 - own0.0,
                upstream_cpu_s: own1.1 - own0.1,
                machine_busy: busy,
                load1: [load0, load1],
                rss_mib: rss,
                hwm_mib: hwm,
                spans,
                overflows,
                busiest,
            },
        ))
    }
}

fn main() {
    let o = match opts() {
        Ok(o) => o,
        Err(e) => {
            eprintln!("relay bench: {e}");
            std::process::exit(2);
        }
    };
    if !o.pool.is_empty() {
        std::process::exit(pooled(&o.pool));
    }
    let _ = tpscope_sim::raise_nofile_limit();
    let mut paths = o.paths.clone();
    if paths.contains(&PathKind::Tpscope) && !o.tpscope.is_file() {
        println!(
            "skipping tpscope: no binary at {} (build it: cargo build --release -p tpscope-cli, or pass --tpscope PATH)",
            o.tpscope.display()
        );
        paths.retain(|p| *p != PathKind::Tpscope);
    }
    if paths.contains(&PathKind::Baseline) && !o.baseline.as_ref().is_some_and(|b| b.is_file()) {
        println!(
            "skipping baseline: no binary at {} (pass --baseline PATH: another build of tpscope, e.g. main's)",
            o.baseline
                .as_ref()
                .map_or("(none given)".into(), |b| b.display().to_string())
        );
        paths.retain(|p| *p != PathKind::Baseline);
    }
    if paths.contains(&PathKind::Nginx) && !o.nginx.as_ref().is_some_and(|n| n.is_file()) {
        match &o.nginx {
            Some(n) => println!("skipping nginx: no binary at {}", n.display()),
            None => println!(
                "skipping nginx: not installed (apt-get install nginx, or pass --nginx PATH)"
            ),
        }
        paths.retain(|p| *p != PathKind::Nginx);
    }
    if paths.contains(&PathKind::Litellm) && !o.litellm.is_file() {
        println!(
            "skipping litellm: no LiteLLM proxy at {} (install it: scripts/litellm-venv.sh, or pass --litellm PATH)",
            o.litellm.display()
        );
        paths.retain(|p| *p != PathKind::Litellm);
    }
    let pins = match o.pin.then(procs::pin_plan).transpose() {
        Ok(p) => p,
        Err(e) => {
            eprintln!("relay bench: {e}");
            std::process::exit(2);
        }
    };
    let _ = report::cores(); // the machine's count, before pin_main narrows this thread
    let origin = Instant::now();
    // A runtime's threads start on the CPUs of the thread that builds it.
    pin_main(pins.as_ref().map(|p| p.upstream));
    let upstream_rt = runtime("bench-upstream");
    let shape = Shape {
        chunks: o.chunks,
        period: o.period,
        steps: o.steps,
    };
    let listener = upstream_rt
        .block_on(tokio::net::TcpListener::bind("127.0.0.1:0"))
        .expect("binding the upstream on 127.0.0.1");
    let upstream = listener.local_addr().expect("the upstream's address");
    upstream_rt.spawn(upstream::serve(listener, shape, origin));
    upstream_rt.spawn(upstream::ticker());
    pin_main(pins.as_ref().map(|p| p.client));
    let client_rt = runtime("bench-client");
    if let Some(Err(e)) = pins.as_ref().map(procs::check_pinned) {
        eprintln!("relay bench: {e}");
        std::process::exit(1);
    }
    let bench = Bench {
        o,
        origin,
        upstream,
        client_rt,
        pins,
        tmp: tempfile::tempdir().expect("a temporary directory"),
        tck: procs::clk_tck(),
    };
    report::header(&bench.o, &paths, bench.pins.as_ref());
    let run = format!(
        "{}-{}",
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_secs()),
        std::process::id()
    );
    let mut rounds: Vec<Round> = Vec::new();
    let mut figs = Vec::new();
    for r in 0..bench.o.rounds {
        // Rotate the order each round: no path always runs first, or after another.
        let mut order = paths.clone();
        order.rotate_left(r as usize % paths.len().max(1));
        for p in order {
            match bench.round(p, r + 1) {
                Ok(round) => {
                    report::round_line(&round);
                    let f = round.figures(&run, &program(&bench.o, p));
                    // Appended as each round ends: a run cut short keeps what it measured.
                    if let Some(log) = &bench.o.log
                        && let Err(e) = pool::append(log, std::slice::from_ref(&f))
                    {
                        println!("{e}");
                    }
                    figs.push(f);
                    rounds.push(round);
                }
                Err(e) => println!("round {} {}: failed: {e}", r + 1, p.name()),
            }
        }
    }
    report::summary(&bench.o, &paths, &rounds, &figs);
    drop(upstream_rt);
}

/// The program a path runs, as the rounds log names it (empty: the direct
/// path), with the workers it was given when `--workers` set them and whether
/// `--pin apart` held it (so that a pool mixing such runs says so).
fn program(o: &Opts, p: PathKind) -> String {
    let shown = |b: Option<&Path>| {
        b.map_or(String::new(), |b| {
            let mut notes = match o.workers {
                Some(1) => vec!["1 worker".to_string()],
                Some(n) => vec![format!("{n} workers")],
                None => Vec::new(),
            };
            if o.pin {
                notes.push("pinned apart".into());
            }
            match notes.is_empty() {
                true => b.display().to_string(),
                false => format!("{} ({})", b.display(), notes.join(", ")),
            }
        })
    };
    match p {
        PathKind::Direct => String::new(),
        PathKind::Tpscope => shown(Some(&o.tpscope)),
        PathKind::Baseline => shown(o.baseline.as_deref()),
        PathKind::Nginx => shown(o.nginx.as_deref()),
        PathKind::Litellm => shown(Some(&o.litellm)),
    }
}

/// `--pool`: the ratio lines over every run in the rounds logs `files`; the
/// exit code (2: a file unreadable or not a rounds log).
fn pooled(files: &[PathBuf]) -> i32 {
    let mut rows = Vec::new();
    for f in files {
        let name = f.display().to_string();
        let parsed = std::fs::read_to_string(f)
            .map_err(|e| format!("{name}: {e}"))
            .and_then(|text| pool::parse(&name, &text));
        match parsed {
            Ok(r) => rows.extend(r),
            Err(e) => {
                eprintln!("relay bench: --pool {e}");
                return 2;
            }
        }
    }
    let runs: std::collections::BTreeSet<&str> = rows.iter().map(|r| r.run.as_str()).collect();
    println!(
        "relay bench: pooling {} rounds logs: {} path-rounds of {} runs",
        files.len(),
        rows.len(),
        runs.len()
    );
    for (path, progs) in pool::programs(&rows) {
        let progs: Vec<&str> = progs.iter().map(String::as_str).collect();
        println!("{}: {}", path.name(), progs.join(", "));
    }
    if !report::ratios(&rows) {
        println!(
            "no tpscope round has a baseline, nginx or LiteLLM round of the same run and round to compare with"
        );
        return 1;
    }
    0
}
