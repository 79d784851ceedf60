"""A real asyncio pipeline on the official openai SDK against `tpscope sim`, written
the way people write it badly (gather in batches, every batch waiting for its
slowest request) and then fixed (a worker pool fed from one queue): tpscope.analyze
sees the idle slots of the first, none in the second, and tpscope.compare passes
the fix."""

from __future__ import annotations

import asyncio

import pytest

import tpscope
import tpscope.openai

openai = pytest.importorskip("openai")

CAP = 4
JOBS = 24


def lengths():
    # Uneven replies, as real ones are: the batch waits for its longest.
    return [16 + (i * 37) % 200 for i in range(JOBS)]


async def call(client, model, n):
    stream = await client.chat.completions.create(
        model=model,
        messages=[{"role": "user", "content": "Summarise a river."}],
        max_tokens=n,
        extra_body={"ignore_eos": True},
        stream=True,
    )
    async for _ in stream:
        pass


async def batched(rec, client, model):
    jobs = [(rec.queued(f"job-{i}"), n) for i, n in enumerate(lengths())]  # all ready now

    async def one(job, n):
        async with rec.request(job) as r:
            r.admitted()
            await call(client, model, n)

    for k in range(0, JOBS, CAP):
        await asyncio.gather(*(one(j, n) for j, n in jobs[k : k + CAP]))


async def pooled(rec, client, model):
    queue: asyncio.Queue = asyncio.Queue()
    for i, n in enumerate(lengths()):
        queue.put_nowait((rec.queued(f"job-{i}"), n))  # all ready now

    async def worker():
        while not queue.empty():
            job, n = queue.get_nowait()
            async with rec.request(job) as r:
                r.admitted()
                await call(client, model, n)

    await asyncio.gather(*(worker() for _ in range(CAP)))


def record(path, sim, pipeline):
    async def main():
        client = openai.AsyncOpenAI(base_url=sim.base_url, api_key="sim", max_retries=0, timeout=60)
        await call(client, sim.model, 1)  # the SDK's first call sets itself up
        rec = tpscope.Recorder(path, cap=CAP, labels={"pipeline": pipeline.__name__}, model=sim.model)
        tpscope.openai.instrument(client, rec)
        await pipeline(rec, client, sim.model)
        await client.close()
        return rec.close()

    counts = asyncio.run(main())
    assert (counts["spans"], counts["ok"]) == (JOBS, JOBS)


def test_batched_gather_leaves_slots_idle_and_a_worker_pool_fills_them(tmp_path, start_sim):
    # Half real time: the run is long beside Python's own per-request overhead, even on
    # a loaded machine (each stalled transition between two requests is a gap).
    sim = start_sim("--speed", "0.5")
    bad, fixed = tmp_path / "bad.jsonl", tmp_path / "fixed.jsonl"
    record(bad, sim, batched)
    record(fixed, sim, pooled)

    bad_run = tpscope.analyze(bad)["runs"][0]
    fixed_run = tpscope.analyze(fixed)["runs"][0]
    print("gap fraction: batched", bad_run["gap_fraction"], "pooled", fixed_run["gap_fraction"])
    assert bad_run["gap_fraction"] > 0.2
    assert fixed_run["gap_fraction"] < 0.01

    verdict = tpscope.compare(bad, fixed)
    assert verdict["overall"] == "pass", verdict
