#!/usr/bin/env bash
# The relay at other serving-thread counts than the default, against the default and
# nginx, on this host: one run of the relay benchmark per count and scheduling, each
# round logged for `--pool` (docs/proxy-bench.md, "The thread count at normal
# priority"). The default (one per core, as nginx's) was checked on a 2-core machine;
# this is the check for a host with more cores, e.g. whether fewer threads add less
# there.
#
#   cargo build --release -p tpscope-cli
#   THREADS="4 8" ROUNDS=6 scripts/relay-threads.sh    # logs relay-threads-SCHED-N.tsv
#
# THREADS: the counts to try (default: half the cores); ROUNDS: rounds per count (12
# for a verdict); SCHED: `normal` (as users run the proxy), `fifo` (`chrt -f 10`, the
# figure on a shared machine: docs/proxy-bench.md, "Priority"), or both (the default;
# one thread against two differed by 6.5x between them); PIN: `none` (the default) or
# `apart` (the benchmark's --pin apart: the upstream, the client and the proxies on
# CPUs of their own, which on a host of 3+ CPUs measures the relay's own latency; its
# logs end in -apart); LOG: the logs' prefix; TPSCOPE_BIN: the build under test. A log
# that exists is appended to, never overwritten: run again to pool more rounds.
set -euo pipefail
cd "$(dirname "$0")/.."
bin=$(realpath -m "${TPSCOPE_BIN:-target/release/tpscope}")
rounds=${ROUNDS:-12}
prefix=${LOG:-relay-threads}
threads=${THREADS:-$(( ($(nproc) + 1) / 2 ))}
scheds=${SCHED:-normal fifo}
pin=${PIN:-none}
[ -x "$bin" ] || { echo "relay-threads: no tpscope at $bin (cargo build --release -p tpscope-cli)" >&2; exit 2; }
for n in $threads; do
  [[ "$n" =~ ^[1-9][0-9]*$ ]] || { echo "relay-threads: THREADS: \`$n\` is not a thread count (1 or more)" >&2; exit 2; }
done

case "$pin" in
  none) suffix= ;;
  apart) suffix=-apart ;;
  *) echo "relay-threads: PIN: \`$pin\` is not none or apart" >&2; exit 2 ;;
esac
for s in $scheds; do
  case "$s" in
    normal) ;;
    fifo) chrt -f 10 true 2>/dev/null || { echo "relay-threads: SCHED=fifo: this host refuses chrt -f 10 (run as root, or SCHED=normal)" >&2; exit 2; } ;;
    *) echo "relay-threads: SCHED: \`$s\` is not normal or fifo" >&2; exit 2 ;;
  esac
done

bench=$(cargo bench -p tpscope-proxy --bench relay --no-run 2>&1 |
  sed -n 's/.*Executable benches\/relay\/main.rs (\(.*\))$/\1/p' | tail -1)
[ -x "$bench" ] || { echo "relay-threads: the relay benchmark did not build" >&2; exit 1; }

# The same binary, told its thread count (the benchmark runs any program as a path),
# at a path that stays the same from run to run: the logs name it as the program.
wdir=target/relay-threads
mkdir -p "$wdir"
for n in $threads; do
  w="$(realpath -m "$wdir")/tpscope-threads-$n"
  # Quoted with bash's %q, so the wrapper is a bash script too.
  printf '#!/usr/bin/env bash\nif [ "$1" = proxy ]; then exec %q "$@" --threads %s; fi\nexec %q "$@"\n' \
    "$bin" "$n" "$bin" >"$w"
  chmod +x "$w"
  for s in $scheds; do
    prio=()
    [ "$s" = fifo ] && prio=(chrt -f 10)
    echo "== $s priority, --pin $pin: tpscope --threads $n (path tpscope) against the default (baseline) and nginx"
    "${prio[@]}" "$bench" --paths direct,tpscope,baseline,nginx --rounds "$rounds" \
      --pin "$pin" --tpscope "$w" --baseline "$bin" --log "$prefix-$s-$n$suffix.tsv"
  done
done
for n in $threads; do
  for s in $scheds; do
    echo "== pooled, $s priority, --pin $pin: tpscope --threads $n (path tpscope) against the default (baseline) and nginx"
    "$bench" --pool "$prefix-$s-$n$suffix.tsv"
  done
done
