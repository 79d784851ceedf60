//! A real Prometheus server (Debian's `prometheus` package) scrapes the proxy
//! while a pipeline that leaves slots idle (a cap letting work through in waves)
//! and a work-conserving one run through it: the gap fraction PromQL gives over
//! each run equals the span log's (as `tpscope report` computes it) within 0.02.
//! The same server loads the shipped recording rules (every rule evaluates
//! without error and the gap rule has a series per proxy) and runs every query
//! of the shipped Grafana dashboard (each parses and returns data); `promtool`
//! checks the rules and the generated config where it is installed.
//!
//! Skipped, with a message, where `prometheus` is not installed, unless
//! `TPSCOPE_REQUIRE_PROMETHEUS=1` (`.ci/run` installs it and sets that).

mod common;

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering::Relaxed};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use common::{TIMEOUT, chat, config, post, proxy, send, sim_with};
use serde_json::Value;
use tpscope_proxy::Dispatch;
use tpscope_sim::{SimConfig, Speed};

/// Prometheus's scrape cadence: short, so that a run of a few seconds is many
/// scrapes (the comparison below does not depend on it).
const SCRAPE_INTERVAL: &str = "200ms";

/// `name` on `PATH`, else in `/usr/bin` (Debian's place).
fn binary(name: &str) -> Option<PathBuf> {
    let path = std::env::var_os("PATH").unwrap_or_default();
    std::env::split_paths(&path)
        .chain([PathBuf::from("/usr/bin")])
        .map(|d| d.join(name))
        .find(|p| p.is_file())
}

/// The `prometheus` binary, or `None` (the test is skipped) unless it is required.
fn prometheus_binary() -> Option<PathBuf> {
    let found = binary("prometheus");
    if found.is_none() {
        assert!(
            std::env::var("TPSCOPE_REQUIRE_PROMETHEUS").as_deref() != Ok("1"),
            "TPSCOPE_REQUIRE_PROMETHEUS=1 but no `prometheus` binary on PATH or in /usr/bin \
             (Debian: apt-get install prometheus)"
        );
        eprintln!(
            "skipped: no `prometheus` binary on PATH or in /usr/bin (Debian: apt-get install \
             prometheus; TPSCOPE_REQUIRE_PROMETHEUS=1 makes this a failure)"
        );
    }
    found
}

/// A Prometheus server on a loopback port it picked, killed when dropped (also
/// when the test panics).
struct Prometheus {
    child: Child,
    addr: SocketAddr,
    log: PathBuf,
}

impl Drop for Prometheus {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Prometheus {
    /// Starts `bin` on `config` with its storage in `dir`; returns once it is ready.
    async fn start(bin: &Path, dir: &Path, config: &Path) -> Prometheus {
        let log = dir.join("prometheus.log");
        let out = std::fs::File::create(&log).unwrap();
        let child = Command::new(bin)
            .arg(format!("--config.file={}", config.display()))
            .arg(format!(
                "--storage.tsdb.path={}",
                dir.join("tsdb").display()
            ))
            .arg("--web.listen-address=127.0.0.1:0")
            .stdin(Stdio::null())
            .stdout(out.try_clone().unwrap())
            .stderr(out)
            .spawn()
            .unwrap_or_else(|e| panic!("starting {}: {e}", bin.display()));
        let mut p = Prometheus {
            child,
            addr: "127.0.0.1:0".parse().unwrap(),
            log,
        };
        // Port 0: the address it got is in its log (`msg="Listening on" address=…`).
        let log_path = p.log.clone();
        let addr = p
            .wait_for("its listening address", || {
                let text = std::fs::read_to_string(&log_path).unwrap_or_default();
                let line = text.lines().find(|l| l.contains("msg=\"Listening on\""))?;
                line.split("address=")
                    .nth(1)?
                    .split_whitespace()
                    .next()?
                    .parse()
                    .ok()
            })
            .await;
        p.addr = addr;
        loop {
            let r = send(p.addr, "GET", "/-/ready", vec![], &[], false).await;
            if r.status == 200 {
                return p;
            }
            p.pause("being ready").await;
        }
    }

    /// Polls `f` until it gives a value (bounded, with Prometheus's log on failure).
    async fn wait_for<T>(&mut self, what: &str, mut f: impl FnMut() -> Option<T>) -> T {
        let t0 = Instant::now();
        loop {
            if let Some(v) = f() {
                return v;
            }
            assert!(
                t0.elapsed() < TIMEOUT,
                "Prometheus: no {what}\n{}",
                self.tail()
            );
            self.pause(what).await;
        }
    }

    async fn pause(&mut self, what: &str) {
        if let Ok(Some(st)) = self.child.try_wait() {
            panic!("Prometheus exited ({st}) while {what}:\n{}", self.tail());
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }

    fn tail(&self) -> String {
        let text = std::fs::read_to_string(&self.log).unwrap_or_default();
        let lines: Vec<&str> = text.lines().collect();
        lines[lines.len().saturating_sub(20)..].join("\n")
    }

    /// `GET path?params` on the HTTP API; the `data` of a successful answer.
    async fn api(&self, path: &str, params: &[(&str, &str)]) -> Value {
        let qs: Vec<String> = params
            .iter()
            .map(|(k, v)| format!("{k}={}", percent_encode(v)))
            .collect();
        let r = send(
            self.addr,
            "GET",
            &format!("{path}?{}", qs.join("&")),
            vec![],
            &[],
            false,
        )
        .await;
        let v: Value = serde_json::from_slice(&r.body)
            .unwrap_or_else(|e| panic!("{path} {params:?}: {e}: {}", r.text()));
        assert_eq!(v["status"], "success", "{path} {params:?}: {v}");
        v["data"].clone()
    }

    /// The instant vector of `q` (evaluated now, or at `at` Unix seconds).
    async fn query(&self, q: &str, at: Option<f64>) -> Vec<Value> {
        let at = at.map(|t| format!("{t:.3}"));
        let mut params = vec![("query", q)];
        if let Some(t) = &at {
            params.push(("time", t));
        }
        let data = self.api("/api/v1/query", &params).await;
        data["result"].as_array().cloned().unwrap_or_default()
    }

    /// The one value of `q`, or `None` when it has no series (yet).
    async fn scalar(&self, q: &str, at: Option<f64>) -> Option<f64> {
        let r = self.query(q, at).await;
        assert!(r.len() <= 1, "{q}: more than one series: {r:?}");
        r.first()
            .and_then(|s| s["value"][1].as_str())
            .map(|v| v.parse().unwrap())
    }

    /// The timestamp of the first scrape of `series` at or after `t` (Unix s).
    async fn scraped_after(&mut self, series: &str, t: f64) -> f64 {
        let t0 = Instant::now();
        loop {
            let q = format!("timestamp({series})");
            if let Some(ts) = self.scalar(&q, None).await.filter(|ts| *ts >= t) {
                return ts;
            }
            assert!(
                t0.elapsed() < TIMEOUT,
                "{series}: no scrape after {t}\n{}",
                self.tail()
            );
            self.pause("scraping").await;
        }
    }
}

/// Percent-encoding of a query parameter (everything but RFC 3986's unreserved).
fn percent_encode(s: &str) -> String {
    s.bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' => {
                (b as char).to_string()
            }
            _ => format!("%{b:02X}"),
        })
        .collect()
}

fn unix_now() -> f64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_secs_f64()
}

/// A pipeline of `workers` clients sending `requests` completions of varied
/// lengths between them, each waiting for its answer before the next.
async fn pipeline(addr: SocketAddr, model: &str, requests: usize, workers: usize) {
    let next = Arc::new(AtomicUsize::new(0));
    let tasks: Vec<_> = (0..workers)
        .map(|_| {
            let next = next.clone();
            let model = model.to_string();
            tokio::spawn(async move {
                loop {
                    let i = next.fetch_add(1, Relaxed);
                    if i >= requests {
                        return;
                    }
                    // 16 … 256 tokens: a wave waits for its longest.
                    let tokens = 16 + (i * 7 % 16) as u32 * 16;
                    let r = post(addr, "/v1/chat/completions", &chat(&model, true, tokens)).await;
                    assert_eq!(r.status, 200, "{}", r.text());
                }
            })
        })
        .collect();
    for t in tasks {
        t.await.unwrap();
    }
}

/// Every `"expr"` string in a Grafana dashboard.
fn exprs(v: &Value, out: &mut Vec<String>) {
    match v {
        Value::Object(m) => {
            for (k, x) in m {
                match (k.as_str(), x) {
                    ("expr", Value::String(s)) => out.push(s.clone()),
                    _ => exprs(x, out),
                }
            }
        }
        Value::Array(a) => a.iter().for_each(|x| exprs(x, out)),
        _ => {}
    }
}

/// `promtool ARGS` must succeed, where promtool is installed.
fn promtool(args: &[&str]) {
    let Some(bin) = binary("promtool") else {
        eprintln!("note: no promtool; `promtool {}` not run", args.join(" "));
        return;
    };
    let out = Command::new(&bin).args(args).output().unwrap();
    assert!(
        out.status.success(),
        "promtool {}: {}{}",
        args.join(" "),
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_real_prometheus_sees_the_gap_fraction_of_the_span_log() {
    let Some(bin) = prometheus_binary() else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    // Runs of a few seconds: the client's own overhead around the pipeline (in
    // the PromQL run length, no gap in it) is a small share of them.
    let sim = sim_with(SimConfig {
        speed: Speed::Scaled(5.0),
        seed: 5,
        ..SimConfig::default()
    })
    .await;
    // Both proxies up front: Prometheus is told its targets once.
    let mut proxies = Vec::new();
    for dispatch in [Dispatch::Waves, Dispatch::WorkConserving] {
        let mut cfg = config(sim.addr(), &dir.path().join(format!("{dispatch}.jsonl")));
        cfg.cap = Some(4);
        cfg.dispatch = dispatch;
        cfg.metrics_listen = Some("127.0.0.1:0".parse().unwrap());
        proxies.push((dispatch, proxy(cfg).await));
    }
    // And one without a cap, idle: it exports no `tpscope_cap` series.
    let mut cfg = config(sim.addr(), &dir.path().join("uncapped.jsonl"));
    cfg.metrics_listen = Some("127.0.0.1:0".parse().unwrap());
    let uncapped = proxy(cfg).await;
    let scraped: Vec<SocketAddr> = proxies
        .iter()
        .map(|(_, p)| p.metrics_addr().unwrap())
        .chain(uncapped.metrics_addr())
        .collect();
    let targets: Vec<String> = scraped.iter().map(|a| format!("'{a}'")).collect();

    // The shipped rules, evaluated every second rather than every 15 s so that
    // they run during the test on the real series.
    let shipped = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../deploy/prometheus/rules.yml");
    promtool(&["check", "rules", shipped.to_str().unwrap()]);
    let rules = std::fs::read_to_string(&shipped).unwrap();
    assert!(rules.contains("interval: 15s"), "{rules}");
    let rules_path = dir.path().join("rules.yml");
    std::fs::write(&rules_path, rules.replace("interval: 15s", "interval: 1s")).unwrap();
    let config_path = dir.path().join("prometheus.yml");
    std::fs::write(
        &config_path,
        format!(
            "global:\n  scrape_interval: {SCRAPE_INTERVAL}\n  scrape_timeout: {SCRAPE_INTERVAL}\n  \
             evaluation_interval: 1s\nrule_files:\n  - {}\nscrape_configs:\n  - job_name: tpscope\n    \
             static_configs:\n      - targets: [{}]\n",
            rules_path.display(),
            targets.join(", ")
        ),
    )
    .unwrap();
    promtool(&["check", "config", config_path.to_str().unwrap()]);
    let mut prom = Prometheus::start(&bin, dir.path(), &config_path).await;
    for a in &scraped {
        let series = format!("tpscope_gap_seconds_total{{instance=\"{a}\"}}");
        prom.scraped_after(&series, 0.0).await;
    }

    // Each pipeline in turn, while Prometheus scrapes. The PromQL figure is
    // `c @ after - c @ before` (the counter's last scrape before the run and its
    // first scrape after the run's last sampler tick) over the run's length as
    // this client's stopwatch saw it (not from the log). Nothing waits outside
    // the run, so the counter is flat there and the difference is exactly the
    // run's gap seconds, whatever the scrape phase. `increase()`/`rate()` over
    // the run are not used: they extrapolate from the first and last scrape
    // inside the window to its edges (clamped at the counter's zero), which moves
    // a run a few seconds long by up to a scrape interval's share: about the
    // tolerance itself. The stopwatch window holds the log's (first queued to
    // last released) plus the client's own overhead at both ends, where nothing
    // is queued, so the two fractions differ by that overhead's share.
    let mut promql = Vec::new();
    for (_, p) in &proxies {
        let series = format!(
            "tpscope_gap_seconds_total{{instance=\"{}\"}}",
            p.metrics_addr().unwrap()
        );
        let before = unix_now();
        let t0 = Instant::now();
        pipeline(p.addr(), sim.model_name(), 64, 16).await;
        let run_s = t0.elapsed().as_secs_f64();
        // A scrape after the sampler's next tick, which adds the run's last stretch.
        let after = prom.scraped_after(&series, unix_now() + 0.05).await;
        let q = format!("{series} @ {after:.3} - {series} @ {before:.3}");
        let gap_s = prom.scalar(&q, Some(after)).await.expect(&q);
        promql.push((gap_s / run_s, gap_s, run_s));
    }

    // The shipped rules ran on the real series without an error.
    let groups = prom.api("/api/v1/rules", &[]).await;
    let mut n_rules = 0;
    for g in groups["groups"].as_array().unwrap() {
        for r in g["rules"].as_array().unwrap() {
            n_rules += 1;
            assert_eq!(r["health"], "ok", "rule {}: {r}", r["name"]);
        }
    }
    assert!(n_rules >= 10, "{groups}");
    let recorded = prom.query("tpscope:gap_fraction:rate1m", None).await;
    assert_eq!(recorded.len(), 3, "a gap series per proxy: {recorded:?}");
    // The caps of the capped proxies only; utilization is theirs.
    assert_eq!(prom.scalar("sum(tpscope_cap)", None).await, Some(8.0));
    let u = prom.scalar("tpscope:utilization", None).await;
    assert!(u.is_some_and(|u| (0.0..=1.0).contains(&u)), "{u:?}");
    // Every query of the dashboard parses and has data (Grafana's
    // `$__rate_interval` is at least four scrapes; 1m here).
    let dash = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../deploy/grafana/tpscope.json");
    let dash: Value = serde_json::from_str(&std::fs::read_to_string(dash).unwrap()).unwrap();
    let mut qs = Vec::new();
    exprs(&dash, &mut qs);
    assert!(qs.len() >= 8, "{qs:?}");
    for q in qs {
        let q = q.replace("$__rate_interval", "1m");
        assert!(!q.contains('$'), "a Grafana variable left in {q}");
        let r = prom.query(&q, None).await;
        assert!(!r.is_empty(), "the dashboard's `{q}` has no data");
    }
    drop(prom);
    uncapped.shutdown().await.unwrap();

    // The span logs, read and analysed as `tpscope report` does.
    for ((dispatch, p), (from_prom, gap_s, run_s)) in proxies.into_iter().zip(promql) {
        let out = dir.path().join(format!("{dispatch}.jsonl"));
        p.shutdown().await.unwrap();
        let set = tpscope_log::read_paths(&[out], tpscope_log::ReadOptions::default()).unwrap();
        assert_eq!(set.runs.len(), 1);
        let r =
            tpscope_analysis::analyze(&set.runs[0].input, &tpscope_analysis::Options::default());
        assert_eq!(r.counts.status.ok, 64);
        let logged = r.gap_fraction.expect("a gap fraction");
        let window_s = r.window.as_ref().unwrap().duration.as_secs_f64();
        eprintln!(
            "{dispatch}: span log {logged:.4} (window {window_s:.3} s), PromQL {from_prom:.4} \
             ({gap_s:.3} s of {run_s:.3} s)"
        );
        assert!(
            (logged - from_prom).abs() <= 0.02,
            "{dispatch}: span log {logged:.4} vs PromQL {from_prom:.4} ({gap_s:.3} s / {run_s:.3} s)"
        );
        match dispatch {
            Dispatch::Waves => assert!(logged > 0.2, "waves leave slots idle: {logged}"),
            Dispatch::WorkConserving => assert!(logged < 0.01, "work-conserving: {logged}"),
        }
    }
    sim.shutdown().await.unwrap();
}
