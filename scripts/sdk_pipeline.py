"""A user's pipeline on the official openai SDK (AsyncOpenAI), for checking what
`tpscope proxy` sees of it: REQUESTS streamed chat completions, all ready at the
start, sent by one of two shapes of WIDTH at a time:

  waves  batches of WIDTH with asyncio.gather, each waiting for its slowest
         request before the next batch is sent (work held back);
  pool   WIDTH workers, each taking the next job as soon as its own is back.

With --header every request carries x-tpscope-queued-at: when its work was ready
(the start). The pipeline measures its own gap from its own clock: the time
with work not yet sent while fewer than WIDTH requests were out, over the run
(from the start to the last response's end). A request is out from when the
SDK hands it to its HTTP client (an httpx request hook, after the SDK's own
work of building it: milliseconds a request on a loaded machine, while the
server's slot is free) to when the pipeline has read its response's end. It
prints one JSON object: own_gap, requests, output_tokens (the server's usage),
seconds.

  python sdk_pipeline.py BASE_URL [--model M] [--shape waves|pool] [--header]
                         [--width 4] [--requests 16] [--tokens 32]
"""

import argparse
import asyncio
import json
import time

import openai


def max_tokens(i, unit):
    """Output tokens of job i: 1 to 8 units, so a batch waits for its longest."""
    return unit * (1 + i * 5 % 8)


def own_gap(start, spans, width):
    """Time with work unsent and fewer than `width` out, over start..last end."""
    events = sorted([(a, 1) for a, _ in spans] + [(b, -1) for _, b in spans])
    out, sent, gap, prev = 0, 0, 0.0, start
    for t, d in events:
        if sent < len(spans) and out < width:
            gap += t - prev
        prev = t
        out += d
        sent += d > 0
    return gap / (events[-1][0] - start)


async def main():
    p = argparse.ArgumentParser()
    p.add_argument("base_url")
    p.add_argument("--model")
    p.add_argument("--shape", choices=["waves", "pool"], default="waves")
    p.add_argument("--header", action="store_true")
    p.add_argument("--width", type=int, default=4)
    p.add_argument("--requests", type=int, default=16)
    p.add_argument("--tokens", type=int, default=32)
    a = p.parse_args()
    sent = {}

    async def on_request(request):
        sent[request.headers.get("x-pipeline-job")] = time.monotonic()

    http = openai.DefaultAsyncHttpxClient(event_hooks={"request": [on_request]})
    client = openai.AsyncOpenAI(
        base_url=a.base_url, api_key="sk-pipeline", max_retries=0, timeout=120, http_client=http
    )
    # Warm the client before the work is ready: the SDK imports its chat
    # resource on first use (over a second on a loaded machine, holding the
    # event loop), which would be the SDK's gap, not the shape's.
    client.chat.completions
    listed = await client.models.list()
    model = a.model or listed.data[0].id
    ready = time.time()
    start = time.monotonic()
    ready_at = {"x-tpscope-queued-at": f"{ready:.6f}"} if a.header else {}
    spans, tokens = [], 0

    async def one(i):
        nonlocal tokens
        stream = await client.chat.completions.create(
            model=model,
            messages=[{"role": "user", "content": f"Tell me about rivers, part {i}."}],
            max_tokens=max_tokens(i, a.tokens),
            stream=True,
            stream_options={"include_usage": True},
            extra_body={"ignore_eos": True},
            extra_headers={"x-pipeline-job": str(i), **ready_at},
        )
        async for chunk in stream:
            if chunk.usage is not None:
                tokens += chunk.usage.completion_tokens
        spans.append((sent[str(i)], time.monotonic()))

    if a.shape == "waves":
        for b in range(0, a.requests, a.width):
            await asyncio.gather(*(one(i) for i in range(b, min(b + a.width, a.requests))))
    else:
        jobs = iter(range(a.requests))

        async def worker():
            for i in jobs:
                await one(i)

        await asyncio.gather(*(worker() for _ in range(a.width)))
    end = time.monotonic()
    await client.close()
    print(json.dumps({
        "own_gap": own_gap(start, spans, a.width),
        "requests": len(spans),
        "output_tokens": tokens,
        "seconds": end - start,
    }))


asyncio.run(main())
