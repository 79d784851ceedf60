#!/usr/bin/env python3
"""Where the relay benchmark's woken threads ran, and how long they waited.

Reads `perf sched record` files taken during a relay-bench round and prints, for
each kind of thread (the proxy's serving threads, nginx's workers, LiteLLM, the
benchmark's client and upstream), its wakes split by where it then ran -- on its
waker's core, or on another core that was idle or busy at the wake -- with the
median and p90 of the wait from the wake to running, and each kind's run
lengths. This is how docs/proxy-bench.md ("Where a woken thread runs") found a
guest's vCPU packing behind the five-fold latency of one worker at normal
priority. One trace is one draw of the placement: compare several.

    cargo bench -p tpscope-proxy --bench relay -- --paths tpscope --rounds 1 --workers 1 &
    sleep 5; perf sched record -a -o one.data -- sleep 2; wait
    scripts/sched-wakes.py one.data [more.data ...]

Needs `perf` (Debian: linux-perf) and read access to the trace files.
"""

import collections
import re
import subprocess
import sys

WAKING = re.compile(r"sched_waking: comm=(\S+) pid=(\d+)")
SWITCH = re.compile(
    r"sched_switch: prev_comm=(.+?) prev_pid=(\d+) .* ==> next_comm=(.+?) next_pid=(\d+)"
)
KINDS = ("tpscope-proxy", "nginx", "litellm", "python3", "bench-client", "bench-upstream")


def kind(comm):
    """A thread's kind: its name less a trailing worker number."""
    return re.sub(r"-\d+$", "", comm)


def quantile(values, q):
    """The value at rank floor(n*q) of the sorted values (nearest rank)."""
    if not values:
        return float("nan")
    v = sorted(values)
    return v[min(len(v) - 1, int(len(v) * q))]


def events(path):
    """`perf script` lines of one trace file."""
    cmd = ["perf", "script", "-i", path, "-F", "comm,tid,cpu,time,event,trace"]
    try:
        out = subprocess.run(cmd, capture_output=True, text=True, check=True).stdout
    except FileNotFoundError:
        sys.exit("sched-wakes: perf is not installed (Debian: apt-get install linux-perf)")
    except subprocess.CalledProcessError as e:
        # perf prints a line per event kind the fields do not fit; the cause is last.
        last = (e.stderr.strip().splitlines() or ["no message"])[-1]
        sys.exit(f"sched-wakes: {path}: perf script failed: {last}")
    return out.splitlines()


def analyse(lines):
    """Wakes by (kind, where) with their waits in µs, and run lengths by kind."""
    running = {}  # cpu -> pid on it (0: idle)
    since = {}  # cpu -> when that pid was switched in
    pending = {}  # pid -> (waking time, waker's cpu, what each cpu ran then)
    names = {0: "idle"}
    wakes = collections.defaultdict(list)
    runs = collections.defaultdict(list)
    for line in lines:
        parts = line.split()
        if len(parts) < 5 or not parts[2].startswith("["):
            continue
        try:
            cpu = int(parts[2].strip("[]"))
            t = float(parts[3].rstrip(":"))
        except ValueError:
            continue
        m = WAKING.search(line)
        if m:
            pid = int(m.group(2))
            names[pid] = m.group(1)
            pending[pid] = (t, cpu, dict(running))
            continue
        m = SWITCH.search(line)
        if not m:
            continue
        prev, nxt = int(m.group(2)), int(m.group(4))
        names[prev], names[nxt] = m.group(1), m.group(3)
        if cpu in since and prev != 0:
            runs[kind(names[prev])].append((t - since[cpu]) * 1e6)
        running[cpu], since[cpu] = nxt, t
        if nxt in pending:
            t0, waker_cpu, then = pending.pop(nxt)
            if kind(names[nxt]) not in KINDS:
                continue
            if cpu == waker_cpu:
                where = "the waker's core"
            elif then.get(cpu, 0) == 0:
                where = "another, idle"
            else:
                where = "another, busy"
            wakes[(kind(names[nxt]), where)].append((t - t0) * 1e6)
    return wakes, runs


def main(paths):
    if not paths or paths[0] in ("-h", "--help"):
        print(__doc__)
        return 0 if paths else 2
    for path in paths:
        wakes, runs = analyse(events(path))
        print(f"{path}:")
        if not wakes:
            print("  no wakes of the benchmark's or a proxy's threads (taken during a round?)")
            continue
        totals = collections.Counter()
        for (k, _), v in wakes.items():
            totals[k] += len(v)
        print("  woken thread     ran on            wakes  share  wait p50   p90 (µs)")
        for (k, where), v in sorted(wakes.items()):
            print(
                f"  {k:<16} {where:<16} {len(v):6d} {100 * len(v) / totals[k]:5.0f} %"
                f" {quantile(v, 0.5):8.0f} {quantile(v, 0.9):5.0f}"
            )
        print("  runs (switched in to out)  count   p50   p90   p99 (µs)")
        for k in sorted(runs):
            if k in KINDS:
                v = runs[k]
                print(
                    f"  {k:<26} {len(v):6d} {quantile(v, 0.5):5.0f}"
                    f" {quantile(v, 0.9):5.0f} {quantile(v, 0.99):5.0f}"
                )
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
