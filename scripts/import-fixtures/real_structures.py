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


def aiperf_010(out: Path):
    """AIPerf 0.10 (summary schema 1.3), as anud18/qwen36-vllm-aiperf-benchmark's
    results: records with `credit_issued_ns`, `request_start_ns`, `request_end_ns`
    (after the last response: the stream's close), `request_latency` to the last
    response; the warm-up records are not written; the concurrency is only in the
    summary (`input_config.phases`). AIPerf's `benchmark_duration` runs from the first
    request sent to the last response."""
    rnd = random.Random(11)
    t0 = 1785304510529803202
    free = [t0, t0]  # two workers: --concurrency 2
    recs = []
    for i in range(6):
        w = min(range(2), key=lambda k: free[k])
        credit = free[w] + rnd.randint(300_000, 900_000)
        start = credit + rnd.randint(500_000, 2_100_000)
        osl = rnd.randint(5, 12)
        ttft_ns = rnd.randint(700_000_000, 2_000_000_000)
        gaps = [rnd.randint(35_000_000, 70_000_000) for _ in range(osl - 1)]
        lat_ns = ttft_ns + sum(gaps)
        end = start + lat_ns + rnd.randint(100_000, 900_000)
        free[w] = end
        isl = rnd.randint(20, 1600)
        ms = lambda ns: ns / 1e6
        recs.append({
            "metadata": {
                "session_num": i, "x_request_id": f"req-{i:04d}",
                "x_correlation_id": f"corr-{i:04d}", "conversation_id": f"session_{i + 2:06d}",
                "turn_index": 0, "credit_issued_ns": credit, "request_start_ns": start,
                "request_ack_ns": start + 130_000_000, "request_end_ns": end,
                "worker_id": f"worker_{w}", "record_processor_id": "record_processor_0",
                "benchmark_phase": "profiling", "was_cancelled": False, "agent_depth": 0,
            },
            "metrics": {
                "request_latency": {"value": ms(lat_ns), "unit": "ms"},
                "time_to_second_token": {"value": ms(gaps[0]), "unit": "ms"},
                "output_sequence_length": {"value": osl, "unit": "tokens"},
                "usage_total_tokens": {"value": osl + isl, "unit": "tokens"},
                "time_to_first_token": {"value": ms(ttft_ns), "unit": "ms"},
                "http_req_chunks_received": {"value": osl + 1, "unit": "count"},
                "output_token_count": {"value": osl, "unit": "tokens"},
                "usage_completion_tokens": {"value": osl, "unit": "tokens"},
                "usage_prompt_tokens": {"value": isl, "unit": "tokens"},
                "input_sequence_length": {"value": isl, "unit": "tokens"},
                "inter_chunk_latency": {"value": [ms(g) for g in gaps], "unit": "ms"},
                "time_to_first_output_token": {"value": ms(ttft_ns), "unit": "ms"},
                "inter_token_latency": {"value": ms(sum(gaps)) / (osl - 1), "unit": "ms"},
            },
        })
    d = out / "aiperf-0.10-layout"
    d.mkdir(parents=True, exist_ok=True)
    with open(d / "profile_export.jsonl", "w") as f:
        for r in recs:
            f.write(json.dumps(r, separators=(",", ":")) + "\n")

    def stats(values, unit):
        return {"unit": unit, "avg": statistics.fmean(values),
                **{f"p{q}": pct(values, q) for q in (50, 90, 95, 99)},
                "min": min(values), "max": max(values), "count": len(values),
                "sum": sum(values)}

    m = [r["metrics"] for r in recs]
    md = [r["metadata"] for r in recs]
    first = min(x["request_start_ns"] for x in md)
    last = max(x["request_start_ns"] + round(y["request_latency"]["value"] * 1e6)
               for x, y in zip(md, m))
    duration = (last - first) / 1e9
    osl = sum(y["output_sequence_length"]["value"] for y in m)
    isl = sum(y["input_sequence_length"]["value"] for y in m)
    summary = {
        "schema_version": "1.3", "aiperf_version": "0.10.0",
        "request_throughput": {"unit": "requests/sec", "avg": len(recs) / duration},
        "request_latency": stats([y["request_latency"]["value"] for y in m], "ms"),
        "request_count": {"unit": "requests", "avg": float(len(recs))},
        "time_to_first_token": stats([y["time_to_first_token"]["value"] for y in m], "ms"),
        "inter_token_latency": stats([y["inter_token_latency"]["value"] for y in m], "ms"),
        "output_token_throughput": {"unit": "tokens/sec", "avg": osl / duration},
        "total_output_tokens": {"unit": "tokens", "avg": float(osl)},
        "benchmark_duration": {"unit": "sec", "avg": duration},
        "total_isl": {"unit": "tokens", "avg": float(isl)},
        "total_osl": {"unit": "tokens", "avg": float(osl)},
        "input_config": {
            "endpoint": {"type": "chat", "streaming": True, "use_server_token_count": True},
            "phases": [
                {"name": "warmup", "type": "concurrency", "exclude_from_results": True,
                 "requests": 2, "concurrency": 1},
                {"name": "profiling", "type": "concurrency", "requests": len(recs),
                 "concurrency": 2},
            ],
        },
        "was_cancelled": False, "error_summary": [],
    }
    (d / "profile_export_aiperf.json").write_text(json.dumps(summary, indent=2))


def vllm_06_chunked(out: Path):
    """vLLM 0.6 era `--save-result` (LambdaLabsML/vllm-benchmark): per-request columns
    but no `latencies` or `start_times`, rate `inf`, a server sending several tokens a
    chunk (fewer ITLs than tokens), and `*_latency_ms` from latencies that run past the
    last chunk to the stream's close."""
    rnd = random.Random(11)
    n = 6
    ttfts, itls, outs, ins, lat = [], [], [], [], []
    for _ in range(n):
        ttfts.append(0.13 + rnd.random() * 0.01)
        chunks = rnd.randint(1, 8)
        itls.append([0.11 + rnd.random() * 0.01 for _ in range(chunks)])
        outs.append(chunks * 10 + rnd.randint(0, 9))
        ins.append(rnd.randint(4, 400))
        lat.append(ttfts[-1] + sum(itls[-1]) + 0.005 + rnd.random() * 0.015)
    tpots = [(lat[i] - ttfts[i]) / (outs[i] - 1) for i in range(n) if outs[i] > 1]
    flat = [x for l in itls for x in l]
    # All sent at once (rate inf): the benchmark lasts as long as its longest request.
    duration = max(lat) + 0.0025
    doc = {
        "date": "20240907-082900",
        "backend": "vllm",
        "model_id": "m",
        "tokenizer_id": "m",
        "best_of": 1,
        "use_beam_search": False,
        "num_prompts": n,
        "request_rate": "inf",
        "duration": duration,
        "completed": n,
        "total_input_tokens": sum(ins),
        "total_output_tokens": sum(outs),
        "request_throughput": n / duration,
        "input_throughput": sum(ins) / duration,
        "output_throughput": sum(outs) / duration,
    }
    for key, vals in (("ttft", ttfts), ("tpot", tpots), ("itl", flat), ("latency", lat)):
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
    d = out / "vllm-0.6-chunked"
    d.mkdir(parents=True, exist_ok=True)
    (d / "vllm-infqps-m-20240907-082900.json").write_text(json.dumps(doc))


if __name__ == "__main__":
    out = Path(sys.argv[1])
    for d in ("vllm-0.5.4", "vllm-0.19.1", "guidellm-0.5-warmup", "guidellm-0.3"):
        (out / d).mkdir(parents=True, exist_ok=True)
    vllm(out / "vllm-0.5.4", False, "vllm-infqps-m-20250301-101500.json")
    vllm(out / "vllm-0.19.1", True, "vllm-infqps-concurrency4-m-20250301-101500.json")
    guidellm(out)
    guidellm_03(out)
    aiperf_010(out)
    vllm_06_chunked(out)
