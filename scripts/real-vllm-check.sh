#!/usr/bin/env bash
# Checks tpscope against a real vLLM server (not run in CI: too heavy). Start one first,
# e.g. with ../shared/realserver (`start.sh DIR vllm`, the tiny random Llama on :8000):
#   scripts/real-vllm-check.sh [URL] [hf:TOKENIZER]
# Runs, each through the release binary: a multi-turn run and a shared-prefix run
# (vLLM's own prefix-cache hit counter must rise), an Anthropic Messages run, and a
# bench → proxy → vLLM run; every run's output tokens must equal vLLM's
# generation-token counter's increase. Then a user's pipeline on the official openai
# SDK (scripts/sdk_pipeline.py, in .venv-sdk: scripts/sdk-venv.sh) through the proxy,
# in waves and as a worker pool: without x-tpscope-queued-at the report's inferred
# gap must be within 0.05 of the pipeline's own (waves) or below 0.05 (pool); with
# the header and --cap 4, the exact gap within 0.05 of it.
set -euo pipefail
url=${1:-http://127.0.0.1:8000}
tok=${2:-}
root="$(cd "$(dirname "$0")/.." && pwd)"
bin="$root/target/release/tpscope"
[ -x "$bin" ] || cargo build --release --manifest-path "$root/Cargo.toml"
dir=$(mktemp -d)
trap 'kill "${proxy_pid:-0}" 2>/dev/null || true; rm -rf "$dir"' EXIT
tokargs=()
[ -n "$tok" ] && tokargs=(--tokenizer "$tok")

metric() { # sum of a vLLM counter over its label sets
  curl -sf "$url/metrics" | awk -v n="$1" '$1 ~ "^"n"(\\{|$)" {s += $2} END {printf "%d\n", s}'
}
tokens_of() { # output tokens in a span log, from its report's JSON
  "$bin" report "$1" --format json | python3 -c 'import json,sys; print(sum(r["counts"]["output_tokens"] for r in json.load(sys.stdin)["runs"]))'
}
check() { # name, log, generation tokens before
  local got want
  got=$(tokens_of "$2"); want=$(( $(metric vllm:generation_tokens_total) - $3 ))
  echo "$1: output tokens $got, vLLM generated $want"
  [ "$got" -eq "$want" ] || { echo "FAIL: $1 tokens differ" >&2; exit 1; }
}

q0=$(metric vllm:prefix_cache_queries_total); h0=$(metric vllm:prefix_cache_hits_total)
g0=$(metric vllm:generation_tokens_total)
"$bin" bench --url "$url" "${tokargs[@]}" --sessions 8 --turns 4 --input-tokens 200 \
  --output-tokens 32 --concurrency 4 --out "$dir/multi-turn.jsonl" >/dev/null
check "multi-turn" "$dir/multi-turn.jsonl" "$g0"
q1=$(metric vllm:prefix_cache_queries_total); h1=$(metric vllm:prefix_cache_hits_total)
echo "multi-turn: vLLM prefix cache hits $((h1 - h0)) of $((q1 - q0)) queried tokens"
[ $((h1 - h0)) -gt 0 ] || { echo "FAIL: no prefix-cache hits in the multi-turn run" >&2; exit 1; }
"$bin" report "$dir/multi-turn.jsonl" | sed -n '/TTFT by turn/,/^  sessions:/p'

g0=$(metric vllm:generation_tokens_total)
"$bin" bench --url "$url" "${tokargs[@]}" --prefix-len 512 --prefix-count 2 --prefix-share 0.75 \
  --input-tokens 64 --output-tokens 32 --concurrency 8 --requests 80 --out "$dir/prefix.jsonl" >/dev/null
check "shared prefix" "$dir/prefix.jsonl" "$g0"
q2=$(metric vllm:prefix_cache_queries_total); h2=$(metric vllm:prefix_cache_hits_total)
echo "shared prefix: vLLM prefix cache hits $((h2 - h1)) of $((q2 - q1)) queried tokens"
[ $((h2 - h1)) -gt 0 ] || { echo "FAIL: no prefix-cache hits in the shared-prefix run" >&2; exit 1; }

g0=$(metric vllm:generation_tokens_total)
"$bin" bench --url "$url" --api anthropic --input-tokens 100 --output-tokens 48 --concurrency 4 \
  --requests 16 --out "$dir/anthropic.jsonl" >/dev/null
check "anthropic messages" "$dir/anthropic.jsonl" "$g0"

port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
"$bin" proxy --upstream "$url" --listen "127.0.0.1:$port" --out "$dir/proxy.jsonl" --cap 8 \
  2>"$dir/proxy.err" & proxy_pid=$!
sleep 1
g0=$(metric vllm:generation_tokens_total)
"$bin" bench --url "http://127.0.0.1:$port" --input-tokens 150 --output-tokens 40 --concurrency 6 \
  --requests 24 --server-metrics off --out "$dir/via-proxy.jsonl" >/dev/null
kill -INT "$proxy_pid"; wait "$proxy_pid" || true; proxy_pid=
check "bench through the proxy" "$dir/via-proxy.jsonl" "$g0"
check "the proxy's own log" "$dir/proxy.jsonl" "$g0"
# The proxy scraped vLLM's /metrics (its default): the report has the server's side.
"$bin" report "$dir/proxy.jsonl" | grep -q "server vs client (vllm" ||
  { echo "FAIL: the proxy's report has no server section" >&2; exit 1; }
echo "the proxy's report: server vs client from vLLM's /metrics"
py="$root/.venv-sdk/bin/python"
[ -x "$py" ] || bash "$root/scripts/sdk-venv.sh"
pipeline() { # name, shape (waves|pool), header (0|1), proxy flags...
  local name=$1 shape=$2 header=$3 port
  shift 3
  port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
  "$bin" proxy --upstream "$url" --listen "127.0.0.1:$port" --out "$dir/$shape$header.jsonl" \
    "$@" 2>"$dir/$shape$header.err" & proxy_pid=$!
  sleep 1
  g0=$(metric vllm:generation_tokens_total)
  "$py" "$root/scripts/sdk_pipeline.py" "http://127.0.0.1:$port/v1" --shape "$shape" --width 4 \
    --requests 16 --tokens "${PIPELINE_TOKENS:-16}" $([ "$header" = 1 ] && echo --header) \
    >"$dir/$shape$header.own.json"
  kill -INT "$proxy_pid"; wait "$proxy_pid" || true; proxy_pid=
  check "$name" "$dir/$shape$header.jsonl" "$g0"
  "$bin" report "$dir/$shape$header.jsonl" --format json >"$dir/$shape$header.report.json"
  python3 - "$name" "$shape" "$header" "$dir/$shape$header.own.json" "$dir/$shape$header.report.json" <<'PY'
import json, sys
name, shape, header, own_file, report_file = sys.argv[1:]
own = json.load(open(own_file))["own_gap"]
r = json.load(open(report_file))["runs"][0]
exact, inf = r["gap_fraction"], r.get("gap_fraction_inferred")
said = f"{name}: the pipeline's own gap {own:.3f}, the proxy's exact {exact:.3f}"
if inf:
    said += f", inferred {inf['value']:.3f} ({inf['method']}, width {inf['width']})"
print(said)
if header == "1":
    ok = inf is None and abs(exact - own) < 0.05
elif shape == "waves":
    ok = inf is not None and abs(inf["value"] - own) < 0.05
else:
    ok = inf is not None and inf["value"] < 0.05
sys.exit(0 if ok else f"FAIL: {name}: the proxy's gap is not the pipeline's")
PY
}
pipeline "sdk waves, no header" waves 0
pipeline "sdk pool, no header" pool 0 --cap 4
pipeline "sdk waves, header, --cap 4" waves 1 --cap 4
pipeline "sdk pool, header, --cap 4" pool 1 --cap 4
echo "all checks passed against $url"
