"""Minimal fixtures with the structure of real published result files whose
licence does not allow committing them (crates/log/tests/data/import/real/README.md
lists the originals). Values are synthetic; the summary fields are computed the
way each tool computes them (numpy's linear percentiles = type 7). Deterministic:
`python3 scripts/import-fixtures/real_structures.py crates/log/tests/data/import/real`."""

import json
import random
import statistics
import sys
from pathlib import Path


def pct(values, q):
    v = sorted(values)
    h = (len(v) - 1) * q / 100
    lo = int(h)
    hi = min(lo + 1, len(v) - 1)
    return v[lo] + (h - lo) * (v[hi] - v[lo])


def vllm(out: Path, with_starts: bool, name: str):
    rnd = random.Random(7 if with_starts else 5)
    n = 12
    ttfts, itls, outs, ins, starts = [], [], [], [], []
    t = 1000.0 + rnd.random()
    for i in range(n):
        starts.append(t + i * 0.05)
        ttfts.append(0.05 + rnd.random() * 0.1)
        k = rnd.randint(4, 9)
        outs.append(k)
        ins.append(rnd.randint(20, 40))
        itls.append([0.01 + rnd.random() * 0.02 for _ in range(k - 1)])
    # vLLM's latency: the last token's arrival, ttft plus the ITLs.
    lat = [ttfts[i] + sum(itls[i]) for i in range(n)]
    tpots = [(lat[i] - ttfts[i]) / (outs[i] - 1) for i in range(n) if outs[i] > 1]
    flat = [x for l in itls for x in l]
    end = max(starts[i] + lat[i] for i in range(n))
    duration = end - min(starts) + 0.0123
    doc = {
        "date": "20250301-101500",
        "backend": "vllm",
        "model_id": "m",
        "tokenizer_id": "m",
        "num_prompts": n,
        "request_rate": "inf",
        "duration": duration,
        "completed": n,
        "total_input_tokens": sum(ins),
        "total_output_tokens": sum(outs),
        "request_throughput": n / duration,
        "output_throughput": sum(outs) / duration,
        "total_token_throughput": (sum(ins) + sum(outs)) / duration,
    }
    if with_starts:
        doc.update({"burstiness": 1.0, "max_concurrency": 4})
        doc["max_output_tokens_per_s"] = 412.0
        doc["max_concurrent_requests"] = 4.0
    for key, vals in (("ttft", ttfts), ("tpot", tpots), ("itl", flat)):
        doc[f"mean_{key}_ms"] = statistics.fmean(vals) * 1000
        doc[f"median_{key}_ms"] = statistics.median(vals) * 1000
        doc[f"std_{key}_ms"] = statistics.pstdev(vals) * 1000
        doc[f"p99_{key}_ms"] = pct(vals, 99) * 1000
    doc.update(
        {
            "input_lens": ins,
            "output_lens": outs,
            "ttfts": ttfts,
            "itls": itls,
            "generated_texts": ["x" * k for k in outs],
            "errors": [""] * n,
        }
    )
    if with_starts:
        doc["start_times"] = starts
    (out / name).write_text(json.dumps(doc))


def guidellm(out: Path):
    """GuideLLM 0.5 (report `metadata.version` 1): warm-up and cool-down of 10%."""
    rnd = random.Random(3)
    t0 = 1772473358.5061343
    total = 100.0
    ms, me = t0 + 10.0, t0 + 90.0
    reqs = []
    t = t0
    for i in range(8):
        lat = 6.0 + rnd.random() * 8.0
        ttft = 0.05 + rnd.random() * 0.02 if i else 1.2436
        first = t + ttft
        last = t + lat - 0.01
        reqs.append((t, first, last, t + lat, rnd.randint(200, 400)))
        t += lat + 0.002
    inside = [r for r in reqs if r[3] >= ms and r[0] <= me]
    stats = [{
        "type_": "generative_request_stats",
        "request_id": f"req-{i}",
        "response_id": f"cmpl-{i}",
        "request_args": json.dumps({"body": {"model": "m", "stream": True}}),
        "output": None,
        "info": {
            "status": "completed",
            "timings": {
                "queued": s - 0.5,
                "request_start": s,
                "first_token_iteration": f,
                "last_token_iteration": l,
                "request_end": e,
            },
            "error": None,
        },
        "input_metrics": {"text_tokens": 64},
        "output_metrics": {"text_tokens": n},
        "request_start_time": s,
        "request_end_time": e,
        "time_to_first_token_ms": (f - s) * 1000,
    } for i, (s, f, l, e, n) in enumerate(reqs)]
    ttft = [(r[1] - r[0]) * 1000 for r in inside]
    doc = {
        "metadata": {"version": 1, "guidellm_version": "0.5.0"},
        "args": {"warmup": 0.1, "cooldown": 0.1, "max_seconds": total},
        "benchmarks": [{
            "type_": "generative_benchmark",
            "config": {
                "strategy": {"type_": "synchronous"},
                "warmup": {"percent": 0.1, "value": None, "mode": "prefer_duration"},
                "cooldown": {"percent": 0.1, "value": None, "mode": "prefer_duration"},
            },
            "scheduler_metrics": {
                "start_time": t0 - 0.002,
                "request_start_time": t0,
                "measure_start_time": ms,
                "measure_end_time": me,
                "request_end_time": t0 + total,
            },
            "metrics": {
                "request_totals": {"successful": len(inside), "errored": 0,
                                   "incomplete": 0, "total": len(inside)},
                "time_to_first_token_ms": {"successful": {
                    "mean": statistics.fmean(ttft), "count": len(ttft),
                    "max": max(ttft)}},
            },
            "requests": {"successful": stats, "errored": [], "incomplete": []},
            "warmup_duration": ms - t0,
            "cooldown_duration": t0 + total - me,
        }],
    }
    (out / "guidellm-0.5-warmup" / "benchmarks.json").write_text(json.dumps(doc, indent=1))


def guidellm_03(out: Path):
    """GuideLLM 0.3's report: flat request timings, the strategy under `args`."""
    t = 1745000000.123456
    reqs = []
    for i in range(3):
        reqs.append({
            "type_": "generative_text_response",
            "request_id": f"r{i}",
            "request_type": "text_completions",
            "scheduler_info": {"queued_time": t - 0.25, "targeted_start_time": t},
            "prompt": "p",
            "output": "o",
            "prompt_tokens": 32,
            "output_tokens": 16,
            "start_time": t,
            "end_time": t + 1.5,
            "first_token_time": t + 0.125,
            "last_token_time": t + 1.375,
        })
        t += 0.5
    doc = {"benchmarks": [{
        "type_": "generative_benchmark",
        "args": {"strategy": {"type_": "concurrent", "streams": 2}},
        "start_time": reqs[0]["start_time"],
        "end_time": reqs[-1]["end_time"],
        "requests": {"successful": reqs, "errored": [], "incomplete": []},
    }]}
    (out / "guidellm-0.3" / "benchmarks.json").write_text(json.dumps(doc, indent=1))


if __name__ == "__main__":
    out = Path(sys.argv[1])
    for d in ("vllm-0.5.4", "vllm-0.19.1", "guidellm-0.5-warmup", "guidellm-0.3"):
        (out / d).mkdir(parents=True, exist_ok=True)
    vllm(out / "vllm-0.5.4", False, "vllm-infqps-m-20250301-101500.json")
    vllm(out / "vllm-0.19.1", True, "vllm-infqps-concurrency4-m-20250301-101500.json")
    guidellm(out)
    guidellm_03(out)
