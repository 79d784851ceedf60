#!/usr/bin/env bash
# The proxy's memory under abuse ("stays safe" in docs/proxy.md), as docs/performance.md states it:
# `tpscope proxy` (release build) in front of `tpscope sim`, then
# scripts/proxy_abuse_load.py opens 10,000 idle connections, runs 100 concurrent
# streams of 200, 2,000 and 20,000 tokens while they stay open, sends a 100 MiB
# chunked body, and prints the proxy's VmRSS before, during (peak) and after.
#   cargo build --release -p tpscope-cli && scripts/proxy-abuse.sh [IDLE] [STREAMS] [TOKENS]
# Needs about IDLE+STREAMS open files per process (the script raises the soft
# limit to the hard one) and python3. Uses 127.0.0.1 ports picked by the system.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
bin="${TPSCOPE_BIN:-$root/target/release/tpscope}"
idle="${1:-10000}" streams="${2:-100}" tokens="${3:-200}"
[ -x "$bin" ] || { echo "no $bin: run cargo build --release -p tpscope-cli" >&2; exit 1; }
ulimit -n "$(ulimit -Hn)"
tmp="$(mktemp -d)"
pids=()
cleanup() {
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
  wait 2>/dev/null || true
  rm -rf "$tmp"
}
trap cleanup EXIT

# Waits for "listening on http://ADDR" in $1 and prints ADDR.
addr_of() {
  for _ in $(seq 100); do
    if a=$(grep -o 'listening on http://[0-9.]*:[0-9]*' "$1" | head -1 | sed 's|.*http://||'); [ -n "$a" ]; then
      echo "$a"; return 0
    fi
    sleep 0.1
  done
  echo "no address in $1:" >&2; cat "$1" >&2; return 1
}

# As fast as the engine model runs: 20,000-token streams take seconds, not minutes.
"$bin" sim --port 0 --speed max >"$tmp/sim.out" 2>&1 & pids+=($!)
sim="$(addr_of "$tmp/sim.out")"
model="$(sed -n 's/.*(model \(.*\))$/\1/p' "$tmp/sim.out" | head -1)"
# A long header timeout: the idle connections stay open for the whole run.
"$bin" proxy --upstream "http://$sim" --listen 127.0.0.1:0 --out "$tmp/live.jsonl" \
  --header-timeout 10m >"$tmp/proxy.out" 2>&1 & pids+=($!)
proxy_pid=$!
proxy="$(addr_of "$tmp/proxy.out")"
echo "tpscope proxy (pid $proxy_pid) on $proxy in front of tpscope sim on $sim; $(nproc) CPUs"
python3 "$root/scripts/proxy_abuse_load.py" --proxy "$proxy" --pid "$proxy_pid" --model "$model" \
  --idle "$idle" --streams "$streams" --tokens "$tokens"
