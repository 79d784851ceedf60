//! The proxies under test as child processes (the `tpscope` release binary, Debian's
//! nginx, LiteLLM's proxy server from a venv), and what Linux says about processes
//! and the machine: CPU time from `/proc/PID/stat` (utime + stime), memory from
//! `/proc/PID/status`, the whole machine's busy share from `/proc/stat`, the load
//! average.

use std::io::{BufRead, BufReader};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use crate::litellm_conf::litellm_conf;
use crate::nginx_conf::nginx_conf;

/// Clock ticks per second of `/proc` CPU times (`getconf CLK_TCK`; 100 on Linux).
pub fn clk_tck() -> f64 {
    Command::new("getconf")
        .arg("CLK_TCK")
        .output()
        .ok()
        .and_then(|o| String::from_utf8(o.stdout).ok())
        .and_then(|s| s.trim().parse().ok())
        .unwrap_or(100.0)
}

/// The fields of a `/proc/…/stat` line after the command name (which is in
/// parentheses and may hold spaces): state is field 0, ppid 1, utime 11, stime 12.
fn stat_fields(path: &Path) -> Option<Vec<String>> {
    let s = std::fs::read_to_string(path).ok()?;
    let close = s.rfind(')')?;
    Some(s[close + 2..].split(' ').map(str::to_string).collect())
}

/// The command name of a `/proc/…/stat` line.
fn stat_comm(path: &Path) -> Option<String> {
    let s = std::fs::read_to_string(path).ok()?;
    Some(s[s.find('(')? + 1..s.rfind(')')?].to_string())
}

/// CPU seconds of a process, all its threads: in user space, and in the
/// kernel (the syscalls and the loopback TCP both kinds of proxy make alike).
fn user_sys_s(pid: u32, tck: f64) -> Option<(f64, f64)> {
    let f = stat_fields(Path::new(&format!("/proc/{pid}/stat")))?;
    let user: f64 = f.get(11)?.parse().ok()?;
    let sys: f64 = f.get(12)?.parse().ok()?;
    Some((user / tck, sys / tck))
}

/// CPU seconds (user + system) of a process, all its threads.
pub fn cpu_s(pid: u32, tck: f64) -> Option<f64> {
    user_sys_s(pid, tck).map(|(u, s)| u + s)
}

/// The `/proc/self/task/TID` directories of this process's threads whose
/// name starts with `prefix` (`None`: `/proc` unreadable).
fn own_tasks(prefix: &str) -> Option<Vec<PathBuf>> {
    let dir = std::fs::read_dir("/proc/self/task").ok()?;
    Some(
        dir.flatten()
            .map(|t| t.path())
            .filter(|t| stat_comm(&t.join("stat")).is_some_and(|c| c.starts_with(prefix)))
            .collect(),
    )
}

/// CPU seconds of this process's threads whose name starts with `prefix`.
pub fn own_threads_cpu_s(prefix: &str, tck: f64) -> f64 {
    let Some(tasks) = own_tasks(prefix) else {
        return f64::NAN;
    };
    let mut ticks = 0.0;
    for t in tasks {
        if let Some(f) = stat_fields(&t.join("stat")) {
            ticks += f.get(11).and_then(|v| v.parse::<f64>().ok()).unwrap_or(0.0)
                + f.get(12).and_then(|v| v.parse::<f64>().ok()).unwrap_or(0.0);
        }
    }
    ticks / tck
}

/// CPU seconds of each thread of `pid` whose name starts with `prefix`, by name.
pub fn threads_cpu_s(pid: u32, prefix: &str, tck: f64) -> Vec<(String, f64)> {
    let Ok(dir) = std::fs::read_dir(format!("/proc/{pid}/task")) else {
        return Vec::new();
    };
    let mut out = Vec::new();
    for t in dir.flatten() {
        let stat = t.path().join("stat");
        if let (Some(comm), Some(f)) = (stat_comm(&stat), stat_fields(&stat))
            && comm.starts_with(prefix)
        {
            let ticks = f.get(11).and_then(|v| v.parse::<f64>().ok()).unwrap_or(0.0)
                + f.get(12).and_then(|v| v.parse::<f64>().ok()).unwrap_or(0.0);
            out.push((comm, ticks / tck));
        }
    }
    out
}

/// A `kB` field of `/proc/PID/status` (`VmRSS`, `VmHWM`), in KiB.
pub fn status_kib(pid: u32, field: &str) -> Option<u64> {
    let s = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    s.lines()
        .find_map(|l| l.strip_prefix(field)?.strip_prefix(':'))?
        .trim()
        .trim_end_matches("kB")
        .trim()
        .parse()
        .ok()
}

/// The children of `pid` (nginx's workers), found by their parent in `/proc`.
pub fn children(pid: u32) -> Vec<u32> {
    let Ok(dir) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    dir.flatten()
        .filter_map(|e| e.file_name().to_str()?.parse::<u32>().ok())
        .filter(|p| {
            stat_fields(Path::new(&format!("/proc/{p}/stat")))
                .and_then(|f| f.get(1)?.parse::<u32>().ok())
                == Some(pid)
        })
        .collect()
}

/// (busy, total) jiffies of the whole machine, from `/proc/stat`.
pub fn machine_jiffies() -> Option<(u64, u64)> {
    let s = std::fs::read_to_string("/proc/stat").ok()?;
    let v: Vec<u64> = s
        .lines()
        .next()?
        .split_whitespace()
        .skip(1)
        .filter_map(|x| x.parse().ok())
        .collect();
    let total: u64 = v.iter().take(8).sum();
    // idle and iowait are fields 3 and 4.
    let idle = v.get(3)? + v.get(4).unwrap_or(&0);
    Some((total - idle, total))
}

/// How this process is scheduled: `fifo 10`, `rr 10` or `normal, nice 0` (from
/// `/proc/self/stat`: nice is field 19, rt_priority 40, policy 41).
pub fn scheduling() -> String {
    let Some(f) = stat_fields(Path::new("/proc/self/stat")) else {
        return "?".into();
    };
    let get = |i: usize| f.get(i - 3).map_or("?", |s| s.as_str());
    match get(41) {
        "1" => format!("SCHED_FIFO priority {}", get(40)),
        "2" => format!("SCHED_RR priority {}", get(40)),
        _ => format!("normal, nice {}", get(19)),
    }
}

/// This process runs under a real-time policy (`SCHED_FIFO` or `SCHED_RR`).
pub fn realtime() -> bool {
    scheduling().starts_with("SCHED_")
}

/// The kernel and its placement knobs ([`crate::kernel::Kernel`]).
pub fn kernel() -> crate::kernel::Kernel {
    let read = |p: &str| std::fs::read_to_string(p).ok();
    crate::kernel::Kernel {
        release: read("/proc/sys/kernel/osrelease").map(|s| s.trim().to_string()),
        vcpu_pack: read("/proc/sys/kernel/sched_vcpu_pack").and_then(|s| crate::kernel::knob(&s)),
        halt_poll_ns: read("/sys/module/haltpoll/parameters/guest_halt_poll_ns")
            .and_then(|s| crate::kernel::knob(&s)),
    }
}

/// The CPUs this process may run on (`sched_getaffinity`), ascending.
pub fn allowed_cpus() -> std::io::Result<Vec<usize>> {
    // SAFETY: a zeroed cpu_set_t is the empty set; the call fills it.
    let mut set: libc::cpu_set_t = unsafe { std::mem::zeroed() };
    // SAFETY: pid 0 is this thread; `set` is a cpu_set_t of the size given.
    let r = unsafe { libc::sched_getaffinity(0, std::mem::size_of_val(&set), &mut set) };
    if r != 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok((0..libc::CPU_SETSIZE as usize)
        // SAFETY: CPU_ISSET bounds-checks `c` against the set's size.
        .filter(|&c| unsafe { libc::CPU_ISSET(c, &set) })
        .collect())
}

fn cpu_set(cpus: &[usize]) -> libc::cpu_set_t {
    // SAFETY: a zeroed cpu_set_t is the empty set.
    let mut set: libc::cpu_set_t = unsafe { std::mem::zeroed() };
    for &c in cpus {
        // SAFETY: CPU_SET bounds-checks `c` against the set's size.
        unsafe { libc::CPU_SET(c, &mut set) };
    }
    set
}

/// Restricts the calling thread to `set` (one system call, no allocation: safe
/// between fork and exec too).
fn set_affinity(set: &libc::cpu_set_t) -> std::io::Result<()> {
    // SAFETY: pid 0 is this thread; `set` is a cpu_set_t of the size given.
    match unsafe { libc::sched_setaffinity(0, std::mem::size_of_val(set), set) } {
        0 => Ok(()),
        _ => Err(std::io::Error::last_os_error()),
    }
}

/// Restricts the calling thread to `cpus`; the threads it starts from now on
/// inherit that (how `--pin apart` places the runtimes' threads).
pub fn pin_this_thread(cpus: &[usize]) -> std::io::Result<()> {
    set_affinity(&cpu_set(cpus))
}

/// A command for `bin` whose process (and all it starts) runs on `cpus`
/// when given: set between fork and exec, so nothing of it ever runs elsewhere.
/// The process is sent SIGTERM when the benchmark's main thread (which starts
/// every proxy) ends, so that a benchmark killed mid-round does not leave a
/// proxy listening (nginx and LiteLLM were left running by a `kill` of it).
fn command(bin: &Path, cpus: Option<&[usize]>) -> Command {
    let mut cmd = Command::new(bin);
    let set = cpus.map(cpu_set);
    let parent = std::process::id();
    // SAFETY: the closure makes system calls on data it owns and allocates
    // nothing, which is all that is allowed between fork and exec.
    unsafe {
        std::os::unix::process::CommandExt::pre_exec(&mut cmd, move || {
            if libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGTERM) != 0 {
                return Err(std::io::Error::last_os_error());
            }
            // The benchmark ended before the signal was asked for.
            if libc::getppid() as u32 != parent {
                return Err(std::io::Error::other("the benchmark has ended"));
            }
            set.as_ref().map_or(Ok(()), set_affinity)
        });
    }
    cmd
}

/// The CPUs a thread or process may run on, as `/proc/…/status` lists them.
pub fn cpus_allowed(status: &Path) -> Option<String> {
    std::fs::read_to_string(status).ok()?.lines().find_map(|l| {
        l.strip_prefix("Cpus_allowed_list:")
            .map(|v| v.trim().to_string())
    })
}

/// The CPUs of this process's (first) thread named `name`.
pub fn own_thread_cpus(name: &str) -> Option<String> {
    let tasks = own_tasks(name)?;
    cpus_allowed(&tasks.first()?.join("status"))
}

/// `--pin apart`'s CPUs, from those this process may run on.
pub fn pin_plan() -> Result<crate::pin::Pins, String> {
    let allowed = allowed_cpus().map_err(|e| format!("--pin apart: sched_getaffinity: {e}"))?;
    crate::pin::plan(&allowed)
}

/// The runtimes' threads run where `--pin apart` put them, as the kernel says.
pub fn check_pinned(p: &crate::pin::Pins) -> Result<(), String> {
    for (name, cpu) in [("bench-upstream", p.upstream), ("bench-client", p.client)] {
        // A new thread names itself once it runs: give it a moment.
        let mut got = None;
        for _ in 0..200 {
            got = own_thread_cpus(name);
            if got.is_some() {
                break;
            }
            std::thread::sleep(Duration::from_millis(5));
        }
        if got.as_deref() != Some(cpu.to_string().as_str()) {
            return Err(format!(
                "--pin apart: thread {name} may run on {} where CPU {cpu} was asked",
                got.as_deref().unwrap_or("?")
            ));
        }
    }
    Ok(())
}

/// The machine's count of connections dropped for a full accept queue
/// (`TcpExt: ListenOverflows` in `/proc/net/netstat`).
pub fn listen_overflows() -> Option<u64> {
    let s = std::fs::read_to_string("/proc/net/netstat").ok()?;
    let mut tcp_ext = s.lines().filter(|l| l.starts_with("TcpExt:"));
    let (names, values) = (tcp_ext.next()?, tcp_ext.next()?);
    let i = names
        .split_whitespace()
        .position(|n| n == "ListenOverflows")?;
    values.split_whitespace().nth(i)?.parse().ok()
}

/// The 1-minute load average.
pub fn load1() -> Option<f64> {
    std::fs::read_to_string("/proc/loadavg")
        .ok()?
        .split_whitespace()
        .next()?
        .parse()
        .ok()
}

/// A free loopback port: bind port 0, note it, let it go (the proxy binds it
/// at once; only another process taking it in between could collide).
fn free_port() -> Result<SocketAddr, String> {
    TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map_err(|e| format!("no free port: {e}"))
}

/// How a proxy under test is started, the same for every kind of proxy.
#[derive(Clone, Copy)]
pub struct Launch<'a> {
    /// Serving threads or worker processes (`None`: the proxy's default).
    pub workers: Option<u32>,
    /// The CPUs its processes run on (`None`: wherever the kernel puts them).
    pub cpus: Option<&'a [usize]>,
}

/// A proxy under test, running.
pub struct Proxy {
    child: Child,
    /// Where clients connect.
    pub addr: SocketAddr,
    /// The process and, for nginx, its workers (CPU and memory are summed).
    pub pids: Vec<u32>,
    /// tpscope's span log.
    pub log: Option<PathBuf>,
}

impl Proxy {
    /// Starts `tpscope proxy` (the release binary `bin`) in front of `upstream`,
    /// writing its span log to `log`, on `how.workers` serving threads.
    pub fn tpscope(
        bin: &Path,
        upstream: SocketAddr,
        log: &Path,
        how: Launch,
    ) -> Result<Proxy, String> {
        let mut child = command(bin, how.cpus)
            .args(["proxy", "--listen", "127.0.0.1:0", "--upstream"])
            .arg(format!("http://{upstream}"))
            .arg("--out")
            .arg(log)
            .args(how.workers.map(|n| format!("--threads={n}")))
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .map_err(|e| format!("{}: {e}", bin.display()))?;
        // It prints `tpscope proxy listening on http://ADDR → …` once bound.
        let mut line = String::new();
        let stdout = child.stdout.take().ok_or("no stdout")?;
        let _ = BufReader::new(stdout).read_line(&mut line);
        let addr = line
            .split("http://")
            .nth(1)
            .and_then(|r| r.split_whitespace().next())
            .and_then(|a| a.parse().ok());
        let Some(addr) = addr else {
            let _ = child.kill();
            let _ = child.wait();
            return Err(format!(
                "tpscope proxy did not start (said `{}`)",
                line.trim()
            ));
        };
        let pid = child.id();
        Ok(Proxy {
            child,
            addr,
            pids: vec![pid],
            log: Some(log.to_path_buf()),
        })
    }

    /// Starts nginx (`bin`) in the foreground in front of `upstream`, its config,
    /// pid file, logs and temp files in `dir`, with `how.workers` worker
    /// processes (`None`: `auto`).
    pub fn nginx(
        bin: &Path,
        upstream: SocketAddr,
        dir: &Path,
        how: Launch,
    ) -> Result<Proxy, String> {
        let listen = free_port()?;
        let conf = dir.join("nginx.conf");
        std::fs::write(&conf, nginx_conf(dir, listen, upstream, how.workers))
            .map_err(|e| format!("{}: {e}", conf.display()))?;
        let child = command(bin, how.cpus)
            .arg("-p")
            .arg(dir)
            .arg("-e")
            .arg(dir.join("error.log"))
            .arg("-c")
            .arg(&conf)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .map_err(|e| format!("{}: {e}", bin.display()))?;
        Proxy::listening(child, listen, "nginx", &dir.join("error.log"), 10)
    }

    /// Starts LiteLLM's proxy server (`bin`: the `litellm` command of a venv)
    /// with `workers` worker processes (`None`: one) in front of `upstream`, its
    /// config and output in `dir`.
    pub fn litellm(
        bin: &Path,
        upstream: SocketAddr,
        dir: &Path,
        how: Launch,
    ) -> Result<Proxy, String> {
        let listen = free_port()?;
        let conf = dir.join("litellm.yaml");
        std::fs::write(&conf, litellm_conf(upstream))
            .map_err(|e| format!("{}: {e}", conf.display()))?;
        let out = dir.join("litellm.log");
        let log = std::fs::File::create(&out).map_err(|e| format!("{}: {e}", out.display()))?;
        let err = log.try_clone().map_err(|e| e.to_string())?;
        let child = command(bin, how.cpus)
            .arg("--config")
            .arg(&conf)
            .args(["--host", "127.0.0.1", "--port", &listen.port().to_string()])
            .arg("--num_workers")
            .arg(how.workers.unwrap_or(1).to_string())
            .envs(crate::litellm_conf::ENV)
            .current_dir(dir)
            .stdin(Stdio::null())
            .stdout(log)
            .stderr(err)
            .spawn()
            .map_err(|e| format!("{}: {e}", bin.display()))?;
        // Importing LiteLLM's proxy takes seconds (tens on a loaded machine).
        Proxy::listening(child, listen, "litellm", &out, 180)
    }

    /// Waits until `child` accepts connections on `listen` (at most `secs`),
    /// then notes its processes (a master's workers included).
    fn listening(
        mut child: Child,
        listen: SocketAddr,
        name: &str,
        log: &Path,
        secs: u64,
    ) -> Result<Proxy, String> {
        let t0 = Instant::now();
        while TcpStream::connect(listen).is_err() {
            if t0.elapsed() > Duration::from_secs(secs) || matches!(child.try_wait(), Ok(Some(_))) {
                let _ = child.kill();
                let _ = child.wait();
                let said = std::fs::read_to_string(log).unwrap_or_default();
                let tail: Vec<&str> = said.lines().rev().take(5).collect();
                return Err(format!(
                    "{name} did not start within {secs} s: {}",
                    tail.into_iter().rev().collect::<Vec<_>>().join(" / ")
                ));
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        // Its whole tree: nginx's workers, a Python server's worker processes.
        let mut pids = vec![child.id()];
        let mut i = 0;
        while i < pids.len() {
            let more = children(pids[i]);
            pids.extend(more);
            i += 1;
        }
        Ok(Proxy {
            child,
            addr: listen,
            pids,
            log: None,
        })
    }

    /// CPU seconds of all its processes, in all and in user space, each
    /// process's read once (both from the same instant).
    pub fn cpu_user_s(&self, tck: f64) -> Option<(f64, f64)> {
        self.pids.iter().try_fold((0.0, 0.0), |(all, user), p| {
            let (u, s) = user_sys_s(*p, tck)?;
            Some((all + u + s, user + u))
        })
    }

    /// CPU seconds of each of its workers, by name: tpscope's serving threads
    /// (`tpscope-proxy-N`; none in a build before them), nginx's worker
    /// processes (its master excluded).
    pub fn workers_cpu_s(&self, tck: f64) -> Vec<(String, f64)> {
        let Some((&first, rest)) = self.pids.split_first() else {
            return Vec::new();
        };
        if self.log.is_some() {
            return threads_cpu_s(first, "tpscope-proxy-", tck);
        }
        rest.iter()
            .filter_map(|p| Some((p.to_string(), cpu_s(*p, tck)?)))
            .collect()
    }

    /// Summed `field` (`VmRSS`, `VmHWM`) of its processes, in MiB.
    pub fn mem_mib(&self, field: &str) -> Option<f64> {
        let kib: Option<u64> = self.pids.iter().map(|p| status_kib(*p, field)).sum();
        kib.map(|k| k as f64 / 1024.0)
    }

    /// Stops it with SIGTERM (tpscope drains and flushes its log; nginx exits
    /// at once) and waits.
    pub fn stop(mut self) {
        let _ = Command::new("kill")
            .args(["-TERM", &self.child.id().to_string()])
            .status();
        let t0 = Instant::now();
        while t0.elapsed() < Duration::from_secs(30) {
            if matches!(self.child.try_wait(), Ok(Some(_))) {
                return;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Span records and those that are `ok` with `tokens` output tokens, in a span log.
pub fn spans_in(log: &Path, tokens: u32) -> (usize, usize) {
    let text = std::fs::read_to_string(log).unwrap_or_default();
    let spans: Vec<&str> = text
        .lines()
        .filter(|l| l.contains("\"kind\":\"span\""))
        .collect();
    let want = format!("\"output_tokens\":{tokens}");
    let ok = spans
        .iter()
        .filter(|l| l.contains("\"status\":\"ok\"") && l.contains(&want))
        .count();
    (spans.len(), ok)
}
