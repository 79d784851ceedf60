#!/usr/bin/env bash
# Runs two builds of the client benchmark interleaved (A B A B …) in one run and
# prints each build's client CPU per streamed token, their ratio (new / old), and
# the first-token error and exact-stamp shares of both (docs/performance.md).
#
# Usage: scripts/perf-compare.sh OLD_BENCH NEW_BENCH [ROUNDS] [-- BENCH ARGS]
#   OLD_BENCH, NEW_BENCH: client benchmark executables
#     (target/release/deps/client-*, from `cargo bench -p tpscope-load --bench
#     client --no-run` in each checkout)
#   ROUNDS: rounds of each measurement (default 3)
#   BENCH ARGS: passed to both CPU runs (e.g. --streams 1000 --requests 8000)
# The machine's load average is printed before and after: compare builds only
# within one run.
set -euo pipefail

if [ $# -lt 2 ]; then
    sed -n '2,14p' "$0" | sed 's/^# \{0,1\}//'
    exit 2
fi
old=$1
new=$2
shift 2
rounds=3
if [ $# -gt 0 ] && [ "$1" != "--" ]; then
    rounds=$1
    shift
fi
[ "${1:-}" = "--" ] && shift
for b in "$old" "$new"; do
    [ -x "$b" ] || { echo "not an executable: $b" >&2; exit 2; }
done

echo "load average before: $(cut -d' ' -f1-3 /proc/loadavg)"
declare -A cpu ttft shares
for r in $(seq 1 "$rounds"); do
    for which in old new; do
        bin=$old
        [ $which = new ] && bin=$new
        # µs of client CPU per token, from the CPU benchmark's result line.
        out=$("$bin" --only cpu "$@" 2>&1)
        us=$(grep -o '([0-9.]* µs of client CPU per token' <<<"$out" | grep -o '[0-9.]*' | head -1)
        cpu[$which]="${cpu[$which]:-} $us"
        echo "round $r $which: ${us} µs of client CPU per token"
    done
done
for r in $(seq 1 "$rounds"); do
    for which in old new; do
        bin=$old
        [ $which = new ] && bin=$new
        out=$("$bin" --only ttft 2>&1)
        p99=$(grep -o 'p99 [0-9]* µs' <<<"$out" | head -1)
        ttft[$which]="${ttft[$which]:-} ${p99#p99 }"
        ex=$(grep -o 'first tokens [0-9.]* %.*chunks [0-9.]* %' <<<"$out" | sed 's/ of [0-9]*//' || true)
        shares[$which]="${shares[$which]:-}${ex:-(no exact-stamp tally in this build)}; "
        echo "round $r $which: first-token error ${p99:-?}; ${ex:-no exact-stamp tally}"
    done
done
echo "load average after: $(cut -d' ' -f1-3 /proc/loadavg)"

median() { tr ' ' '\n' | grep . | sort -g | awk '{v[NR]=$1} END {print (NR%2) ? v[(NR+1)/2] : (v[NR/2]+v[NR/2+1])/2}'; }
mo=$(median <<<"${cpu[old]}")
mn=$(median <<<"${cpu[new]}")
echo
echo "client CPU per token (µs), median of $rounds: old $mo (${cpu[old]# }), new $mn (${cpu[new]# })"
awk -v o="$mo" -v n="$mn" 'BEGIN { printf "ratio new/old: %.2f\n", n / o }'
echo "first-token error p99: old${ttft[old]}, new${ttft[new]}"
echo "exact stamps: old: ${shares[old]}"
echo "              new: ${shares[new]}"
