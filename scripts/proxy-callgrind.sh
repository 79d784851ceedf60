#!/usr/bin/env bash
# Instructions and simulated cache misses per relayed chunk of a proxy, counted by
# valgrind's callgrind (docs/proxy-bench.md, "Whole-program optimisation, counted
# in instructions"): the relay benchmark drives the proxy, run under callgrind, at
# 100 streams x 40 and x 100 chunks every 200 ms; the difference of the two runs
# over the 6,000 chunks between them is printed, so start-up, connects and spans
# cancel. Counts do not depend on the machine's load, unlike CPU time; two runs of
# one build still differ by a few per cent (how often the proxy sleeps depends on
# timing).
#
# Usage: scripts/proxy-callgrind.sh [BIN]      a tpscope binary (default
#                                              target/release/tpscope)
#        scripts/proxy-callgrind.sh --nginx    Debian's nginx, its workers counted
# Needs valgrind (apt install valgrind) and a release build of the benchmark.
# CG_KEEP=DIR keeps the callgrind files there, for callgrind_annotate.
# CG_STREAMS=1000 runs 1,000 streams (one chunk each every second, 20 and 50
# chunks) with the last-level cache modelled as this machine's 1 MiB L2 per
# core: its misses then count the per-stream state a chunk finds cold.
set -euo pipefail
cd "$(dirname "$0")/.."
command -v valgrind >/dev/null || { echo "valgrind is not installed (apt install valgrind)" >&2; exit 2; }
what=${1:-target/release/tpscope}
work=$(mktemp -d)
chmod 1777 "$work" # nginx's workers run as nobody and write their own counts
trap '[ -n "${CG_KEEP:-}" ] && mkdir -p "$CG_KEEP" && cp "$work"/run*.out "$CG_KEEP"/; rm -rf "$work"' EXIT
if [ "$what" = --nginx ]; then
    flag=--nginx
    exe=$(command -v nginx || echo /usr/sbin/nginx)
    path=nginx
else
    flag=--tpscope
    exe=$(realpath "$what")
    path=tpscope
fi
cat >"$work/wrap.sh" <<EOF
#!/bin/sh
exec valgrind --tool=callgrind --cache-sim=yes --callgrind-out-file=$work/\$CG_RUN.%p.out "$exe" "\$@"
EOF
chmod +x "$work/wrap.sh"
bench=$(cargo bench -p tpscope-proxy --bench relay --no-run 2>&1 | sed -n 's/.*Executable .*(\(.*\))$/\1/p' | tail -1)
[ -x "$bench" ] || { echo "could not build the relay benchmark" >&2; exit 1; }
streams=${CG_STREAMS:-100}
if [ "$streams" = 100 ]; then
    period=200 short=40 long=100 ll=
else
    period=1000 short=20 long=50 ll=--LL=1048576,16,64
fi
sed -i "s|--cache-sim=yes|--cache-sim=yes $ll|" "$work/wrap.sh"
for n in $short $long; do
    CG_RUN=run$n "$bench" --paths "$path" "$flag" "$work/wrap.sh" --streams "$streams" --chunks $n \
        --period-ms $period --warmup 5 --rounds 1 >"$work/bench$n.txt" 2>&1 ||
        { cat "$work/bench$n.txt" >&2; exit 1; }
done
python3 - "$work" "$short" "$long" "$streams" <<'PY'
import glob, sys
work, short, long, streams = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
def totals(run):
    sums = {}
    for f in glob.glob(f"{work}/{run}.*.out"):
        events, tot = None, None
        for line in open(f):
            if line.startswith("events:"):
                events = line.split()[1:]
            elif line.startswith("totals:"):
                tot = [int(x) for x in line.split()[1:]]
        if events and tot:
            for k, v in zip(events, tot):
                sums[k] = sums.get(k, 0) + v
    return sums
a, b = totals(f"run{short}"), totals(f"run{long}")
chunks = streams * (int(long) - int(short))
for k in ["Ir", "Dr", "Dw", "I1mr", "D1mr", "D1mw", "ILmr", "DLmr", "DLmw"]:
    if k in a and k in b:
        print(f"{k:5} {(b[k] - a[k]) / chunks:10.1f} per relayed chunk")
PY
