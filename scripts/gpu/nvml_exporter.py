#!/usr/bin/env python3
"""Serve a GPU's NVML readings under DCGM exporter's metric names, for `--gpu-metrics`.

dcgm-exporter reads these fields from NVML through DCGM; where it is not installed
(a workstation, a cloud VM without the DCGM packages) this page gives tpscope the
same four series, with dcgm-exporter's labels:

    DCGM_FI_DEV_GPU_UTIL                  % (nvmlDeviceGetUtilizationRates().gpu)
    DCGM_FI_DEV_POWER_USAGE               W (nvmlDeviceGetPowerUsage, mW / 1000)
    DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION  mJ (nvmlDeviceGetTotalEnergyConsumption)
    DCGM_FI_DEV_FB_USED                   MiB (nvmlDeviceGetMemoryInfo().used)

Needs `nvidia-ml-py` (import name `pynvml`). Every scrape reads NVML afresh.

    python3 scripts/gpu/nvml_exporter.py --port 9400
    tpscope bench --gpu-metrics http://127.0.0.1:9400/metrics ...
"""

import argparse
import http.server
import socket

import pynvml

FIELDS = (
    ("DCGM_FI_DEV_GPU_UTIL", "gauge", "GPU utilization (in %)."),
    ("DCGM_FI_DEV_POWER_USAGE", "gauge", "Power draw (in W)."),
    ("DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION", "counter",
     "Total energy consumption since boot (in mJ)."),
    ("DCGM_FI_DEV_FB_USED", "gauge", "Framebuffer memory used (in MiB)."),
)


def _text(value):
    return value.decode() if isinstance(value, bytes) else str(value)


def page() -> str:
    host = socket.gethostname()
    lines = []
    devices = []
    for i in range(pynvml.nvmlDeviceGetCount()):
        h = pynvml.nvmlDeviceGetHandleByIndex(i)
        labels = (
            f'gpu="{i}",UUID="{_text(pynvml.nvmlDeviceGetUUID(h))}",'
            f'device="nvidia{i}",modelName="{_text(pynvml.nvmlDeviceGetName(h))}",'
            f'Hostname="{host}"'
        )
        values = (
            pynvml.nvmlDeviceGetUtilizationRates(h).gpu,
            pynvml.nvmlDeviceGetPowerUsage(h) / 1000.0,
            pynvml.nvmlDeviceGetTotalEnergyConsumption(h),
            pynvml.nvmlDeviceGetMemoryInfo(h).used // (1024 * 1024),
        )
        devices.append((labels, values))
    for k, (name, kind, help_text) in enumerate(FIELDS):
        lines.append(f"# HELP {name} {help_text}")
        lines.append(f"# TYPE {name} {kind}")
        for labels, values in devices:
            lines.append(f"{name}{{{labels}}} {values[k]}")
    return "\n".join(lines) + "\n"


class Handler(http.server.BaseHTTPRequestHandler):
    def do_GET(self):  # noqa: N802 (http.server's name)
        if self.path.split("?")[0] != "/metrics":
            self.send_error(404)
            return
        body = page().encode()
        self.send_response(200)
        self.send_header("Content-Type", "text/plain; version=0.0.4")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args):
        pass


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--host", default="127.0.0.1")
    ap.add_argument("--port", type=int, default=9400)
    args = ap.parse_args()
    pynvml.nvmlInit()
    server = http.server.ThreadingHTTPServer((args.host, args.port), Handler)
    print(f"serving DCGM-named NVML readings on http://{args.host}:{args.port}/metrics",
          flush=True)
    server.serve_forever()


if __name__ == "__main__":
    main()
