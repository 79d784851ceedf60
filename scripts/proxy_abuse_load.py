#!/usr/bin/env python3
"""The load of scripts/proxy-abuse.sh (standard library only): opens IDLE silent
connections to the proxy, then runs STREAMS concurrent streamed completions of
TOKENS, ten and a hundred times TOKENS tokens while they stay open, sends a 100 MB
chunked body, and prints the proxy's VmRSS (from /proc/PID/status) before,
during (the peak, sampled every 20 ms) and after, as a Markdown table.

    proxy_abuse_load.py --proxy 127.0.0.1:9000 --pid 1234 --model sim-llama-3.1-8b
"""

import argparse
import asyncio
import json
import resource
import sys
import time


def rss_kib(pid):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    raise RuntimeError(f"no VmRSS for pid {pid}")


class Peak:
    """Samples the proxy's RSS in the background while a phase runs."""

    def __init__(self, pid):
        self.pid, self.peak, self.task = pid, 0, None

    async def _run(self):
        while True:
            self.peak = max(self.peak, rss_kib(self.pid))
            await asyncio.sleep(0.02)

    def __enter__(self):
        self.peak = rss_kib(self.pid)
        self.task = asyncio.get_running_loop().create_task(self._run())
        return self

    def __exit__(self, *exc):
        self.task.cancel()
        self.peak = max(self.peak, rss_kib(self.pid))


async def open_idle(host, port, n):
    sem = asyncio.Semaphore(200)

    async def one():
        async with sem:
            return await asyncio.open_connection(host, port)

    return await asyncio.gather(*(one() for _ in range(n)))


def request(path, body, extra=""):
    head = (
        f"POST {path} HTTP/1.1\r\nHost: proxy\r\nContent-Type: application/json\r\n"
        f"Content-Length: {len(body)}\r\nConnection: close\r\n{extra}\r\n"
    )
    return head.encode() + body


async def stream(host, port, model, tokens):
    """One streamed completion read to its end; returns its bytes."""
    body = json.dumps({
        "model": model, "stream": True, "max_tokens": tokens, "ignore_eos": True,
        "stream_options": {"include_usage": True},
        "messages": [{"role": "user", "content": "Tell me about rivers."}],
    }).encode()
    reader, writer = await asyncio.open_connection(host, port)
    writer.write(request("/v1/chat/completions", body))
    await writer.drain()
    got = await reader.read()  # Connection: close: to the end
    writer.close()
    if not got.startswith(b"HTTP/1.1 200") or b"data: [DONE]" not in got[-200:]:
        raise RuntimeError(f"a stream failed: {got[:200]!r} ... {got[-200:]!r}")
    return len(got)


async def big_body(host, port, mib):
    """A chunked body of `mib` MiB to a completion path: the proxy forwards it
    as it comes and answers 413 at --max-body; returns the status line."""
    reader, writer = await asyncio.open_connection(host, port)
    # Read while writing: the answer comes before the body has all gone.
    answer = asyncio.get_running_loop().create_task(reader.readline())
    writer.write(
        b"POST /v1/chat/completions HTTP/1.1\r\nHost: proxy\r\n"
        b"Content-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n"
    )
    chunk = b" " * (1 << 20)
    sent = 0
    try:
        for _ in range(mib):
            if answer.done():
                break
            writer.write(b"%x\r\n" % len(chunk) + chunk + b"\r\n")
            await writer.drain()
            sent += 1
        else:
            writer.write(b"0\r\n\r\n")
            await writer.drain()
    except ConnectionError:
        pass  # cut at the limit: the answer says why
    try:
        line = (await answer).decode().strip()
    except ConnectionError:
        # The proxy answered 413 and closed; our next write's reset discarded
        # the answer before it was read.
        line = "closed by the proxy"
    writer.close()
    return f"{line} after {sent} MiB sent"


async def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--proxy", required=True, help="host:port of tpscope proxy")
    ap.add_argument("--pid", type=int, required=True, help="the proxy's process id")
    ap.add_argument("--model", required=True)
    ap.add_argument("--idle", type=int, default=10_000)
    ap.add_argument("--streams", type=int, default=100)
    ap.add_argument("--tokens", type=int, default=200)
    a = ap.parse_args()
    host, port = a.proxy.rsplit(":", 1)
    port = int(port)
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if hard < a.idle + a.streams + 100:
        sys.exit(f"needs {a.idle + a.streams + 100} open files; the hard limit is {hard}")
    resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))

    rows = [("proxy started, no connection", rss_kib(a.pid))]
    t = time.monotonic()
    idle = await open_idle(host, port, a.idle)
    await asyncio.sleep(1)
    rows.append((f"{a.idle:,} idle connections open ({time.monotonic() - t:.1f} s to open)",
                 rss_kib(a.pid)))
    for tokens in (a.tokens, 10 * a.tokens, 100 * a.tokens):
        with Peak(a.pid) as p:
            t = time.monotonic()
            sizes = await asyncio.gather(*(stream(host, port, a.model, tokens)
                                           for _ in range(a.streams)))
        rows.append((f"+ {a.streams} concurrent streams of {tokens} tokens "
                     f"({sum(sizes) / 2**20:.0f} MiB relayed in {time.monotonic() - t:.1f} s), peak",
                     p.peak))
    with Peak(a.pid) as p:
        status = await big_body(host, port, 100)
    rows.append((f"+ a 100 MiB chunked body ({status}), peak", p.peak))
    still = sum(1 for r, _ in idle if not r.at_eof())
    for _, w in idle:
        w.close()
    await asyncio.sleep(2)
    rows.append((f"all closed ({still:,} idle connections were still open)", rss_kib(a.pid)))

    print("| phase | proxy VmRSS (MiB) |")
    print("|---|---:|")
    for what, kib in rows:
        print(f"| {what} | {kib / 1024:.1f} |")


if __name__ == "__main__":
    asyncio.run(main())
