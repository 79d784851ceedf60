#!/usr/bin/env bash
# GPU energy check on a machine with an NVIDIA GPU and PyTorch, without vLLM or DCGM:
# a transformers server decodes on the GPU (scripts/gpu/hf_server.py, a random 1.1B
# Llama), scripts/gpu/nvml_exporter.py serves the GPU's NVML readings under DCGM's
# names, and `tpscope bench --gpu-metrics` measures two runs (16 and 4 streams at
# once). An independent NVML log (power and energy counter every 100 ms) is kept
# beside them to check the report's energy, power and utilisation.
#
#   TPSCOPE_BIN=target/release/tpscope TOKENIZER_DIR=DIR OUT=DIR scripts/gpu/check.sh
# (SIZE=dir serves the model in TOKENIZER_DIR instead of the random 1.1B Llama;
# REQUESTS=N sets the requests per run, 64 by default.)
set -u
OUT=${OUT:-/tmp/tpscope-gpu-check}
BIN=${TPSCOPE_BIN:-target/release/tpscope}
TOK=${TOKENIZER_DIR:?the folder holding tokenizer.json}
REQUESTS=${REQUESTS:-64}
mkdir -p "$OUT"
log="$OUT/logs.txt"
: >"$log"

{ nvidia-smi; nvidia-smi -q -d POWER; } >"$OUT/nvidia-smi.txt" 2>&1

python3 scripts/gpu/nvml_exporter.py --port 9400 >>"$log" 2>&1 &
python3 - "$OUT/nvml.csv" <<'EOF' >>"$log" 2>&1 &
import sys, time, pynvml
pynvml.nvmlInit()
h = pynvml.nvmlDeviceGetHandleByIndex(0)
with open(sys.argv[1], "w", buffering=1) as f:
    f.write("unix_s,power_w,energy_mj,util_pct\n")
    while True:
        f.write(f"{time.time():.3f},{pynvml.nvmlDeviceGetPowerUsage(h) / 1000:.3f},"
                f"{pynvml.nvmlDeviceGetTotalEnergyConsumption(h)},"
                f"{pynvml.nvmlDeviceGetUtilizationRates(h).gpu}\n")
        time.sleep(0.1)
EOF
python3 scripts/gpu/hf_server.py --model-dir "$TOK" --size "${SIZE:-1b}" --max-batch 16 \
    --port 8000 >>"$log" 2>&1 &

for _ in $(seq 180); do
    curl -sf http://127.0.0.1:8000/health >/dev/null && curl -sf \
        http://127.0.0.1:9400/metrics >/dev/null && break
    sleep 1
done
curl -s http://127.0.0.1:9400/metrics >>"$log"

for c in 16 4; do
    echo "== bench --concurrency $c" >>"$log"
    "$BIN" bench --url http://127.0.0.1:8000 --api completions --model tiny-llama \
        --tokenizer "hf:$TOK/tokenizer.json" --requests "$REQUESTS" --concurrency "$c" \
        --input-tokens 256 --output-tokens 128 --seed 7 \
        --gpu-metrics http://127.0.0.1:9400/metrics --server-metrics-interval 0.5s \
        --price-per-kwh 0.25 --out "$OUT/run-$c.jsonl" >>"$log" 2>&1
    echo "bench exit $?" >>"$log"
    "$BIN" report "$OUT/run-$c.jsonl" --format json >"$OUT/report-$c.json" 2>>"$log"
done
"$BIN" report "$OUT/run-16.jsonl" >"$OUT/report-16.txt" 2>>"$log"
"$BIN" report "$OUT/run-4.jsonl" >>"$OUT/report-16.txt" 2>>"$log"
kill %1 %2 %3 2>/dev/null
echo done >>"$log"
