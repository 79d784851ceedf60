#!/usr/bin/env bash
# Reading + analysing one span log with two builds of the read_analyze benchmark,
# interleaved (A B A B ...), each pinned to CPU 0 by the benchmark itself:
# prints each round's spans per CPU-second, the best and the median of each
# build, their ratio, and the load average before and after.
#
#   scripts/perf-compare-reader.sh OLD_BENCH NEW_BENCH LOG [ROUNDS]
#
# OLD_BENCH and NEW_BENCH are read_analyze executables, e.g. an older commit's
#   git worktree add /tmp/old 806922e && (cd /tmp/old &&
#     cargo bench -p tpscope-log --bench read_analyze --no-run)
# and this tree's `cargo bench -p tpscope-log --bench read_analyze --no-run`
# (target/release/deps/read_analyze-*). LOG is a span log both read (make one
# with TPSCOPE_BENCH_KEEP=LOG OLD_BENCH; the older build's generator, so that
# the older reader meets only records it knows). ROUNDS defaults to 3.
set -euo pipefail

if [[ $# -lt 3 || $# -gt 4 ]]; then
    sed -n '2,16p' "$0" | sed 's/^# \{0,1\}//' >&2
    exit 2
fi
old=$1 new=$2 log=$3 rounds=${4:-3}
for f in "$old" "$new"; do
    [[ -x $f ]] || { echo "not an executable: $f" >&2; exit 2; }
done
[[ -r $log ]] || { echo "cannot read the log: $log" >&2; exit 2; }
[[ $rounds =~ ^[1-9][0-9]*$ ]] || { echo "ROUNDS must be a positive whole number: $rounds" >&2; exit 2; }

# One run: spans per CPU-second of reading + analysis, from the benchmark's
# own lines ("spans: N ...", "read + analysis: X s CPU").
run() {
    local out spans cpu
    out=$(TPSCOPE_BENCH_LOG=$log "$1") || { echo "failed: $1" >&2; echo "$out" >&2; exit 1; }
    spans=$(sed -n 's/^spans: \([0-9]*\).*/\1/p' <<<"$out")
    cpu=$(sed -n 's/.*read + analysis: \([0-9.]*\) s CPU.*/\1/p' <<<"$out")
    if [[ -z $spans || -z $cpu ]]; then
        echo "unexpected output of $1:" >&2
        echo "$out" >&2
        exit 1
    fi
    awk -v n="$spans" -v c="$cpu" 'BEGIN { printf "%.0f\n", n / c }'
}

echo "log: $log ($(du -h "$log" | cut -f1))"
echo "old: $old"
echo "new: $new"
echo "load average before: $(cut -d' ' -f1-3 /proc/loadavg)"
olds=() news=()
for ((i = 1; i <= rounds; i++)); do
    a=$(run "$old")
    b=$(run "$new")
    olds+=("$a") news+=("$b")
    printf 'round %d: old %s spans/s, new %s spans/s\n' "$i" "$a" "$b"
done
echo "load average after: $(cut -d' ' -f1-3 /proc/loadavg)"

# Best and median of each build, and the ratios new / old.
summary() {
    printf '%s\n' "$@" | sort -n | awk '
        { v[NR] = $1 }
        END {
            m = (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2
            printf "%.0f %.0f\n", v[NR], m
        }'
}
read -r ob om <<<"$(summary "${olds[@]}")"
read -r nb nm <<<"$(summary "${news[@]}")"
printf 'old: best %s, median %s spans/s\n' "$ob" "$om"
printf 'new: best %s, median %s spans/s\n' "$nb" "$nm"
awk -v ob="$ob" -v nb="$nb" -v om="$om" -v nm="$nm" \
    'BEGIN { printf "new / old: %.3f (best), %.3f (median)\n", nb / ob, nm / om }'
