//! `--pin apart`: the CPUs the benchmark's upstream, its client and the proxy
//! under test each run on, so that none of the three waits out another's run
//! on a shared core (on a 2-core guest the added latency was mostly such
//! waits and where the kernel put a woken thread; docs/proxy-bench.md,
//! "Pinned apart").

/// Which CPUs each part runs on.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Pins {
    /// The upstream's runtime thread.
    pub upstream: usize,
    /// The client's runtime thread (the upstream's own CPU on 2 CPUs).
    pub client: usize,
    /// Every process and thread of the proxy under test.
    pub proxy: Vec<usize>,
}

/// The parts' CPUs from those this process may run on (`allowed`, ascending):
/// the upstream on the first, the client on the second, the proxy on the rest;
/// with two, the upstream and the client share the first, so that the proxy
/// still has a CPU of its own.
pub fn plan(allowed: &[usize]) -> Result<Pins, String> {
    match allowed {
        [] | [_] => Err(format!(
            "--pin apart: needs at least 2 CPUs, and this process may run on {} (taskset or the cgroup's cpuset decides)",
            cpu_list(allowed)
        )),
        [a, b] => Ok(Pins {
            upstream: *a,
            client: *a,
            proxy: vec![*b],
        }),
        [a, b, rest @ ..] => Ok(Pins {
            upstream: *a,
            client: *b,
            proxy: rest.to_vec(),
        }),
    }
}

impl Pins {
    /// The header's line.
    pub fn describe(&self) -> String {
        let proxy = format!("each proxy on {}", cpus(&self.proxy));
        if self.upstream == self.client {
            format!(
                "pinned apart (--pin apart): upstream and client on CPU {} (with 2 CPUs they share it), {proxy}",
                self.upstream
            )
        } else {
            format!(
                "pinned apart (--pin apart): upstream on CPU {}, client on CPU {}, {proxy}",
                self.upstream, self.client
            )
        }
    }
}

/// `CPU 3` or `CPUs 2-15`.
fn cpus(list: &[usize]) -> String {
    match list {
        [one] => format!("CPU {one}"),
        _ => format!("CPUs {}", cpu_list(list)),
    }
}

/// A CPU list as `taskset -c` and `/proc/*/status` write it: `0-3,8,10-11`
/// (`none` when empty).
pub fn cpu_list(list: &[usize]) -> String {
    let mut runs: Vec<(usize, usize)> = Vec::new();
    for &c in list {
        match runs.last_mut() {
            Some((_, end)) if *end + 1 == c => *end = c,
            _ => runs.push((c, c)),
        }
    }
    if runs.is_empty() {
        return "none".into();
    }
    runs.iter()
        .map(|&(a, b)| {
            if a == b {
                a.to_string()
            } else {
                format!("{a}-{b}")
            }
        })
        .collect::<Vec<_>>()
        .join(",")
}
