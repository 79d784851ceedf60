"""Events per second of the Python recording API on one thread (one core).

    python python/bench/events.py [--events N]

An event is one call that stamps: queued (rec.queued), admitted, tokens(1) and
finish_ok. Requests of 1 queued + 1 admitted + 30 tokens + 1 finish = 33 events,
the shape of a streamed reply. Also timed: the same through `with rec.request()`.
"""
import argparse
import os
import tempfile
import time

import tpscope

TOKENS = 30
PER_REQUEST = TOKENS + 3


def raw(rec, requests):
    for i in range(requests):
        r = rec.queued("r")
        r.admitted()
        for _ in range(TOKENS):
            r.tokens(1)
        r.finish_ok()


def blocks(rec, requests):
    for i in range(requests):
        with rec.request("r") as r:
            r.admitted()
            for _ in range(TOKENS):
                r.tokens(1)


def measure(name, fn, requests, repeats=5):
    best = None
    for k in range(repeats):
        with tempfile.TemporaryDirectory() as d:
            rec = tpscope.Recorder(os.path.join(d, "b.jsonl"))
            t0 = time.perf_counter()
            fn(rec, requests)
            dt = time.perf_counter() - t0
            counts = rec.close()
            assert counts["spans"] == requests, counts
        best = dt if best is None else min(best, dt)
    events = requests * PER_REQUEST
    print(f"{name}: {events / best / 1e6:.2f} M events/s ({best / events * 1e9:.0f} ns/event, best of {repeats})")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--events", type=int, default=2_000_000)
    requests = max(1, ap.parse_args().events // PER_REQUEST)
    measure("handles (queued/admitted/tokens/finish_ok)", raw, requests)
    measure("request blocks (with rec.request)", blocks, requests)


main()
