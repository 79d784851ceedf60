"""First-token agreement of the openai instrumentation with `tpscope sim --truth-log`:
the distribution of (span's first_token_at - the simulator's) over many streams.

    TPSCOPE_BIN=target/release/tpscope python python/bench/first_token.py [--requests N] [--concurrency C]
"""
import argparse
import pathlib
import sys
import tempfile

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1] / "tests"))
from conftest import Sim  # noqa: E402
from test_openai import first_token_errors_ms  # noqa: E402


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--requests", type=int, default=400)
    ap.add_argument("--concurrency", type=int, default=4)
    a = ap.parse_args()
    with tempfile.TemporaryDirectory() as d:
        d = pathlib.Path(d)
        sim = Sim(["--truth-log", str(d / "truth.jsonl")])
        try:
            e = first_token_errors_ms(d, sim, d / "truth.jsonl", a.requests, a.concurrency)
        finally:
            sim.stop()
    q = lambda p: e[min(len(e) - 1, int(p * len(e)))]
    print(f"{len(e)} streams, {a.concurrency} at a time: first-token error vs truth (ms) "
          f"min {e[0]:.3f} median {q(0.5):.3f} p90 {q(0.9):.3f} p99 {q(0.99):.3f} max {e[-1]:.3f}; "
          f"within 2 ms: {sum(x <= 2.0 for x in e) / len(e):.1%}")


main()
