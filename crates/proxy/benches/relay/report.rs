//! What the relay benchmark prints: the setup, one line per path and round, and
//! the summary table (pooled percentiles, the latency each proxy adds over the
//! direct path, its spread across rounds, CPU per relayed token, memory).

use crate::client::StreamOut;
use crate::pool::{self, Figures};
use crate::stats::{Dist, Grid, Spread, flatten, paired_median, spread, us};
use crate::{Opts, PathKind};

/// What a round cost, beside its latencies.
#[derive(Debug)]
pub struct Costs {
    /// From the first connect to the last stream's end.
    pub wall_s: f64,
    /// The proxy's CPU time over the round (all its processes).
    pub proxy_cpu_s: Option<f64>,
    /// The part of it in user space (the rest is the kernel's: syscalls and
    /// loopback TCP).
    pub proxy_user_s: Option<f64>,
    /// The benchmark's own client and upstream threads.
    pub client_cpu_s: f64,
    pub upstream_cpu_s: f64,
    /// The whole machine's busy share over the round (every process, ours or not).
    pub machine_busy: Option<f64>,
    /// The 1-minute load average before and after.
    pub load1: [Option<f64>; 2],
    /// The proxy's resident memory at the end, and its peak (MiB).
    pub rss_mib: Option<f64>,
    pub hwm_mib: Option<f64>,
    /// tpscope's span log: spans, and those `ok` with every token.
    pub spans: Option<(usize, usize)>,
    /// Connections the machine dropped for a full accept queue meanwhile (any
    /// listener: a stream that waited out a SYN retransmit starts late).
    pub overflows: Option<u64>,
    /// The proxy's workers, and the busiest one's share of their CPU (see
    /// `stats::busiest_share`).
    pub busiest: Option<(usize, f64)>,
}

/// One path's round.
pub struct Round {
    pub path: PathKind,
    pub round: u32,
    pub grid: Grid,
    pub dist: Dist,
    /// How late the upstream wrote the measured chunks (µs after their due
    /// instants): the load this path's round got.
    pub late: Dist,
    /// How long the requests took from the client's send to the upstream's
    /// read (µs; none where the path did not pass the send instant on).
    pub forward: Dist,
    /// Content chunks (one token each) the client received, warm-up included.
    pub tokens: u64,
    /// Measured chunks per second of wall time, while every stream was open.
    pub chunks_per_s: f64,
    /// Streams that ended well, with `usage.completion_tokens` = chunks.
    pub usage_ok: usize,
    pub errors: Vec<String>,
    pub costs: Costs,
}

impl Round {
    pub fn new(path: PathKind, round: u32, outs: Vec<StreamOut>, costs: Costs) -> Round {
        let tokens = outs.iter().map(|o| o.chunks).sum();
        // Each stream's rate over its measured chunks, summed: the relayed rate
        // while every stream is open (the streams' windows are offset by the
        // connect ramp, so one window over all of them would dilute it).
        let chunks_per_s = outs
            .iter()
            .filter_map(|o| {
                let (a, b) = o.span?;
                let n = o.lat.iter().flatten().count();
                (b > a && n > 1).then(|| (n - 1) as f64 / ((b - a) as f64 / 1e9))
            })
            .sum::<f64>();
        let usage_ok = outs
            .iter()
            .filter(|o| o.error.is_none() && o.usage_tokens == Some(o.lat.len() as u64))
            .count();
        let errors = outs.iter().filter_map(|o| o.error.clone()).collect();
        let late = Dist::of_ns(&crate::client::lateness(&outs));
        let forward = Dist::of_ns(&crate::client::forwarding(&outs));
        let grid: Grid = outs.into_iter().map(|o| o.lat).collect();
        Round {
            path,
            round,
            dist: Dist::of_ns(&flatten(&grid)),
            late,
            forward,
            grid,
            tokens,
            chunks_per_s,
            usage_ok,
            errors,
            costs,
        }
    }

    /// What the ratio lines compare of this round, as run `run` by `program`.
    pub fn figures(&self, run: &str, program: &str) -> Figures {
        Figures {
            run: run.to_string(),
            round: self.round,
            path: self.path,
            program: program.to_string(),
            p50_us: self.dist.at("p50"),
            p99_us: self.dist.at("p99"),
            cpu_us: self.cpu_us_per_token(),
            user_us: self.user_us_per_token(),
        }
    }

    /// Proxy CPU microseconds per relayed token.
    fn cpu_us_per_token(&self) -> Option<f64> {
        let cpu = self.costs.proxy_cpu_s?;
        (self.tokens > 0).then(|| cpu * 1e6 / self.tokens as f64)
    }

    /// Proxy user-space CPU microseconds per relayed token.
    fn user_us_per_token(&self) -> Option<f64> {
        let cpu = self.costs.proxy_user_s?;
        (self.tokens > 0).then(|| cpu * 1e6 / self.tokens as f64)
    }

    /// Proxy CPU as a share of one core.
    fn cpu_share(&self) -> Option<f64> {
        Some(self.costs.proxy_cpu_s? / self.costs.wall_s)
    }

    /// The share of all cores the measured processes used (client, upstream and
    /// proxy): what this benchmark itself asks of the machine.
    fn bench_share(&self) -> f64 {
        let c = &self.costs;
        (c.client_cpu_s + c.upstream_cpu_s + c.proxy_cpu_s.unwrap_or(0.0))
            / (c.wall_s * cores() as f64)
    }
}

/// The CPUs this process may run on, read once: first before `--pin apart`
/// narrows the main thread (which the count would otherwise follow).
pub fn cores() -> usize {
    static CORES: std::sync::OnceLock<usize> = std::sync::OnceLock::new();
    *CORES.get_or_init(|| std::thread::available_parallelism().map_or(1, |n| n.get()))
}

fn pct(v: Option<f64>) -> String {
    v.map_or("–".into(), |v| format!("{:.0} %", v * 100.0))
}

fn num(v: Option<f64>, digits: usize) -> String {
    v.map_or("–".into(), |v| format!("{v:.digits$}"))
}

pub fn header(o: &Opts, paths: &[PathKind], pins: Option<&crate::pin::Pins>) {
    let names: Vec<&str> = paths.iter().map(|p| p.name()).collect();
    println!(
        "relay bench: {} streams × {} chunks, one every {:?} per stream ({}; {:.0} chunks/s offered), chunks {}..{} of each stream measured (connects spread over {} periods); {} rounds of [{}], order rotated each round; {} cores, load average {} at the start; scheduling: {}",
        o.streams,
        o.chunks,
        o.period,
        if o.steps {
            "all streams' chunks at the same instants"
        } else {
            "streams spread over the period"
        },
        f64::from(o.streams) / o.period.as_secs_f64(),
        o.measured().start,
        o.measured().end,
        o.ramp(),
        o.rounds,
        names.join(", "),
        cores(),
        crate::procs::load1().map_or("?".into(), |l| format!("{l:.2}")),
        crate::procs::scheduling(),
    );
    println!(
        "{}",
        crate::kernel::kernel_line(
            &crate::procs::kernel(),
            crate::procs::realtime(),
            pins.is_some()
        )
    );
    if let Some(p) = pins {
        println!("{}", p.describe());
    }
    match (o.workers, pins) {
        (Some(n), _) => println!(
            "workers: {n} for every proxy (--workers: tpscope --threads {n}, nginx worker_processes {n}, LiteLLM --num_workers {n})"
        ),
        (None, Some(p)) => println!(
            "workers: each proxy's default on its {n} CPU{s} (tpscope: one per CPU it may run on, {n}; nginx: worker_processes {n}, as its `auto` counts every CPU of the machine; LiteLLM: one)",
            n = p.proxy.len(),
            s = if p.proxy.len() == 1 { "" } else { "s" }
        ),
        (None, None) => println!(
            "workers: each proxy's default (tpscope and nginx: one per core; LiteLLM: one)"
        ),
    }
    if paths.contains(&PathKind::Tpscope) {
        println!("tpscope: {}", o.tpscope.display());
    }
    if let (true, Some(b)) = (paths.contains(&PathKind::Baseline), &o.baseline) {
        println!("baseline: {}", b.display());
    }
    if let (true, Some(n)) = (paths.contains(&PathKind::Nginx), &o.nginx) {
        let v = std::process::Command::new(n)
            .arg("-v")
            .output()
            .map(|o| String::from_utf8_lossy(&o.stderr).trim().to_string())
            .unwrap_or_default();
        println!("nginx: {} ({v})", n.display());
    }
    if paths.contains(&PathKind::Litellm) {
        // The venv's interpreter, beside its `litellm` command.
        let v = std::process::Command::new(o.litellm.with_file_name("python"))
            .args([
                "-c",
                "import importlib.metadata as m; print(m.version('litellm'))",
            ])
            .output()
            .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string())
            .unwrap_or_default();
        println!("litellm: {} (LiteLLM {v})", o.litellm.display());
    }
}

pub fn round_line(r: &Round) {
    let c = &r.costs;
    let q = |n| us(r.dist.at(n));
    println!(
        "round {} {:<8} n={} p50 {} p90 {} p99 {} p99.9 {} max {} µs | request to upstream p50 {} p99 {} µs, upstream late p50 {} p99 {} µs | {} chunks/s | proxy CPU {} s = {} µs/token (user {}; {} of a core), RSS {} MiB (peak {}) | client {:.2} s, upstream {:.2} s CPU | bench {} of all cores, machine busy {} | load {}→{}{} | {}/{} streams ok{}{}{}",
        r.round,
        r.path.name(),
        r.dist.n,
        q("p50"),
        q("p90"),
        q("p99"),
        q("p99.9"),
        q("max"),
        us(r.forward.at("p50")),
        us(r.forward.at("p99")),
        us(r.late.at("p50")),
        us(r.late.at("p99")),
        num(Some(r.chunks_per_s), 0),
        num(c.proxy_cpu_s, 2),
        num(r.cpu_us_per_token(), 2),
        num(r.user_us_per_token(), 2),
        pct(r.cpu_share()),
        num(c.rss_mib, 1),
        num(c.hwm_mib, 1),
        c.client_cpu_s,
        c.upstream_cpu_s,
        pct(Some(r.bench_share())),
        pct(c.machine_busy),
        num(c.load1[0], 2),
        num(c.load1[1], 2),
        c.busiest
            .map(|(n, s)| format!(" | busiest of {n} workers {}", pct(Some(s))))
            .unwrap_or_default(),
        r.usage_ok,
        r.grid.len(),
        c.spans
            .map(|(s, ok)| format!(", {s} spans ({ok} ok with every token)"))
            .unwrap_or_default(),
        c.overflows
            .filter(|n| *n > 0)
            .map(|n| format!(" | {n} accept-queue overflows on the machine"))
            .unwrap_or_default(),
        r.errors
            .first()
            .map(|e| format!(" | {} errors, first: {e}", r.errors.len()))
            .unwrap_or_default(),
    );
}

/// The summary table of `rounds`, then the ratio lines of `figs` (the same
/// rounds' figures).
pub fn summary(o: &Opts, paths: &[PathKind], rounds: &[Round], figs: &[Figures]) {
    let of = |p: PathKind| rounds.iter().filter(move |r| r.path == p);
    let pooled = |p: PathKind| {
        let all: Vec<i64> = of(p).flat_map(|r| flatten(&r.grid)).collect();
        Dist::of_ns(&all)
    };
    let direct = pooled(PathKind::Direct);
    let direct_of = |round: u32| of(PathKind::Direct).find(|r| r.round == round);
    println!();
    println!(
        "Latency per chunk (µs, send → client read), pooled over {} rounds; added = path − direct at the same percentile (pooled; per round: median [min – max]); paired = median of per-chunk differences with the direct round, by stream and sequence; CPU: median round; RSS: largest round:",
        o.rounds
    );
    println!();
    println!(
        "| path | p50 | p90 | p99 | p99.9 | added p50 | added p99 | added p99 per round | added p99.9 | paired Δ | CPU µs/token | user µs/token | CPU (of a core) | RSS peak MiB |"
    );
    println!("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|");
    for &p in paths {
        let d = pooled(p);
        let is_direct = p == PathKind::Direct;
        let added = d.minus(&direct);
        let per_round = |name: &str| {
            Spread::of(of(p).map(|r| {
                let base = direct_of(r.round)?;
                Some(r.dist.at(name)? - base.dist.at(name)?)
            }))
        };
        let paired = Spread::of(of(p).map(|r| paired_median(&r.grid, &direct_of(r.round)?.grid)));
        let spread_of = |f: &dyn Fn(&Round) -> Option<f64>| Spread::of(of(p).map(f));
        let cpu = spread_of(&|r| r.cpu_us_per_token());
        let user = spread_of(&|r| r.user_us_per_token());
        let share = spread_of(&|r| r.cpu_share());
        let hwm = spread_of(&|r| r.costs.hwm_mib);
        let dash = |s: String| if is_direct { "–".to_string() } else { s };
        println!(
            "| {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} |",
            p.name(),
            us(d.at("p50")),
            us(d.at("p90")),
            us(d.at("p99")),
            us(d.at("p99.9")),
            dash(us(added[0])),
            dash(us(added[2])),
            dash(spread(per_round("p99"))),
            dash(us(added[3])),
            dash(paired.map_or("–".into(), |s| us(Some(s.median)))),
            num(cpu.map(|s| s.median), 2),
            num(user.map(|s| s.median), 2),
            pct(share.map(|s| s.median)),
            num(hwm.map(|s| s.max), 1),
        );
    }
    load_line(paths, rounds);
    let _ = ratios(figs);
    let busy = Spread::of(rounds.iter().map(|r| r.costs.machine_busy));
    let ours = Spread::of(rounds.iter().map(|r| Some(r.bench_share())));
    let loads = Spread::of(rounds.iter().flat_map(|r| r.costs.load1));
    let errors: usize = rounds.iter().map(|r| r.errors.len()).sum();
    println!();
    println!(
        "Machine: {} cores; client, upstream and proxy used {} of all cores (median of the rounds; max {}); the machine was busy {} (every process, ours or not; min {} max {}), load average {} to {}; {} stream errors in all.",
        cores(),
        pct(ours.map(|s| s.median)),
        pct(ours.map(|s| s.max)),
        pct(busy.map(|s| s.median)),
        pct(busy.map(|s| s.min)),
        pct(busy.map(|s| s.max)),
        num(loads.map(|s| s.min), 2),
        num(loads.map(|s| s.max), 2),
        errors,
    );
}

/// The load each path got: how long its requests took to reach the upstream
/// (what a proxy adds before the first token) and how late the upstream
/// wrote its chunks (on shared cores a path that holds them when the
/// upstream's clock ticks makes its writes later, and a late tick's chunks go
/// out together, in a bigger burst).
fn load_line(paths: &[PathKind], rounds: &[Round]) {
    let of = |p: PathKind, f: &dyn Fn(&Round) -> Option<f64>| {
        Spread::of(rounds.iter().filter(|r| r.path == p).map(f)).map(|s| s.median)
    };
    let each = |f50: &dyn Fn(&Round) -> Option<f64>, f99: &dyn Fn(&Round) -> Option<f64>| {
        paths
            .iter()
            .map(|&p| format!("{} {} / {}", p.name(), us(of(p, f50)), us(of(p, f99))))
            .collect::<Vec<_>>()
            .join(", ")
    };
    println!();
    println!(
        "The load each path got (µs, median of the rounds' p50 / p99): the request's way from the client's send to the upstream's read {}; the upstream's lateness (its write after the instant its schedule had the chunk due) {}. Every path's streams are scheduled from the client's send, so a path's later requests do not move its chunks; a path whose lateness is larger got burstier load than the others.",
        each(&|r| r.forward.at("p50"), &|r| r.forward.at("p99")),
        each(&|r| r.late.at("p50"), &|r| r.late.at("p99")),
    );
}

/// tpscope against the other paths, round by round ([`pool::ratio_lines`]);
/// whether there was any to print.
pub fn ratios(figs: &[Figures]) -> bool {
    let lines = pool::ratio_lines(figs);
    let any = !lines.is_empty();
    if any {
        println!();
        println!(
            "Ratios, round by round: median [min – max] over the rounds; the 95 % interval of that median (order statistics, distribution-free; from 6 rounds) and what it shows:"
        );
        for l in lines {
            println!("{l}");
        }
    }
    any
}
