//! What decides where a woken thread runs on the machine, for the benchmark's
//! header: the kernel, and the guest knobs that change placement. On a guest
//! that packs normal-priority wakes onto busy vCPUs, one worker of either proxy
//! added five to seven times the latency of two, an effect of the guest, not of
//! the proxies (docs/proxy-bench.md, "Where a woken thread runs").

/// The kernel facts the header names; `None` where the machine has no such
/// file (or it cannot be read).
#[derive(Debug, Default)]
pub struct Kernel {
    /// `/proc/sys/kernel/osrelease`.
    pub release: Option<String>,
    /// `/proc/sys/kernel/sched_vcpu_pack`, from a guest-kernel patch (not in
    /// mainline Linux): above 0, a woken normal-priority thread is kept on
    /// its waker's busy vCPU while another idles, so that idle vCPUs stay
    /// halted. Real-time threads are placed by their own class, which it
    /// left alone in the traces behind this (all went to the idle vCPU).
    pub vcpu_pack: Option<i64>,
    /// `/sys/module/haltpoll/parameters/guest_halt_poll_ns`: how long an idle
    /// guest vCPU polls before it halts (0: at once, so a wake sent to it
    /// waits for the host to run it).
    pub halt_poll_ns: Option<u64>,
}

/// The header's `kernel:` line; `realtime`: the benchmark runs under a
/// real-time policy (`chrt`), which the packing does not touch; `pinned`:
/// `--pin apart` leaves the kernel no choice of CPU to make.
pub fn kernel_line(k: &Kernel, realtime: bool, pinned: bool) -> String {
    let mut parts = vec![k.release.clone().unwrap_or_else(|| "?".into())];
    if let Some(p) = k.vcpu_pack {
        parts.push(format!("vCPU packing (sched_vcpu_pack) {p}"));
    }
    match k.halt_poll_ns {
        Some(0) => parts.push("idle vCPUs halt without polling (guest_halt_poll_ns 0)".into()),
        Some(ns) => parts.push(format!("idle vCPUs poll {ns} ns before they halt")),
        None => {}
    }
    let mut line = format!("kernel: {}", parts.join("; "));
    if !realtime && !pinned && k.vcpu_pack.is_some_and(|p| p > 0) {
        line.push_str(
            "\n  (at normal priority this guest queues a woken thread behind its busy waker while \
             another vCPU idles: the latencies show its placement as much as the proxies'; \
             run under chrt -f 10 or with --pin apart to compare proxies, see docs/proxy-bench.md)",
        );
    }
    line
}

/// Parses a knob's file: its one number.
pub fn knob<T: std::str::FromStr>(text: &str) -> Option<T> {
    text.trim().parse().ok()
}
