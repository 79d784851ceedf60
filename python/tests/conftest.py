"""Shared fixtures: the `tpscope` binary (TPSCOPE_BIN, or the workspace's release or
debug build) and simulators started on a free loopback port and always stopped."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import threading
from contextlib import contextmanager
from http.server import ThreadingHTTPServer
from datetime import datetime, timezone
from pathlib import Path
from typing import List, Optional

import pytest

ROOT = Path(__file__).resolve().parents[2]


def tpscope_bin() -> str:
    env = os.environ.get("TPSCOPE_BIN")
    if env:
        return env
    for profile in ("release", "debug"):
        p = ROOT / "target" / profile / "tpscope"
        if p.exists():
            return str(p)
    pytest.fail("no tpscope binary: build it (cargo build -p tpscope-cli) or set TPSCOPE_BIN")


class Sim:
    """A `tpscope sim` process listening on 127.0.0.1 (port chosen by the system)."""

    def __init__(self, args: List[str]) -> None:
        cmd = [tpscope_bin(), "sim", "--host", "127.0.0.1", "--port", "0", *args]
        self.proc = subprocess.Popen(
            cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
        )
        line = self.proc.stdout.readline()
        m = re.search(r"listening on (\S+) \(model (.+)\)", line)
        if not m:
            self.stop()
            raise RuntimeError(f"tpscope sim did not start: {line!r} {self.proc.stderr.read()}")
        self.base_url, self.model = m.group(1), m.group(2)

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGINT)
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        for f in (self.proc.stdout, self.proc.stderr):
            if f:
                f.close()


@pytest.fixture
def start_sim():
    """Starts simulators with the given flags; stops them all after the test."""
    started: List[Sim] = []

    def start(*args: str) -> Sim:
        sim = Sim(list(args))
        started.append(sim)
        return sim

    yield start
    for sim in started:
        sim.stop()


@contextmanager
def serve(handler):
    """A ThreadingHTTPServer with `handler` on a free loopback port, for APIs
    tpscope sim does not speak; yields its base URL and always stops it."""
    srv = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=srv.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{srv.server_address[1]}"
    finally:
        srv.shutdown()
        srv.server_close()
        thread.join()


def ts_ns(text: Optional[str]) -> Optional[int]:
    """Nanoseconds since the epoch of an RFC 3339 UTC timestamp with up to nine
    fractional digits (the span log's form)."""
    if text is None:
        return None
    m = re.fullmatch(r"(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d)(?:\.(\d{1,9}))?Z", text)
    assert m, text
    whole = datetime.strptime(m.group(1), "%Y-%m-%dT%H:%M:%S").replace(tzinfo=timezone.utc)
    frac = (m.group(2) or "").ljust(9, "0")
    return int(whole.timestamp()) * 1_000_000_000 + int(frac)


def records(path, kind: str) -> list:
    """The records of one kind in a span log (tolerating a cut-off last line)."""
    out = []
    for line in Path(path).read_text().splitlines():
        try:
            r = json.loads(line)
        except ValueError:
            continue
        if r.get("kind") == kind:
            out.append(r)
    return out


def cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([tpscope_bin(), *args], capture_output=True, text=True, timeout=120)


PYTHON = sys.executable
