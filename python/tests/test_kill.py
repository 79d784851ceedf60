"""A Python process killed mid-run (SIGKILL) leaves a span log that `tpscope report`
and tpscope.analyze read, holding every span finished more than a second before."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time

import tpscope
from conftest import PYTHON, cli, records

SCRIPT = r"""
import sys, time, tpscope
rec = tpscope.Recorder(sys.argv[1], cap=2)
for i in range(30):
    with rec.request(f"early-{i}") as r:
        r.admitted()
        r.tokens(2)
print("finished", flush=True)
stuck = rec.queued("in-flight")
stuck.admitted()
stuck.tokens(1)
time.sleep(60)
"""


def test_a_killed_process_keeps_every_span_finished_a_second_before(tmp_path):
    path = tmp_path / "killed.jsonl"
    proc = subprocess.Popen([PYTHON, "-c", SCRIPT, str(path)], stdout=subprocess.PIPE, text=True)
    try:
        assert proc.stdout.readline().strip() == "finished"
        time.sleep(1.2)
    finally:
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait()
        proc.stdout.close()
    assert proc.returncode == -signal.SIGKILL

    spans = records(path, "span")
    assert sorted(s["request_id"] for s in spans) == sorted(f"early-{i}" for i in range(30))
    assert records(path, "end") == []
    out = cli("report", "--format", "json", str(path))
    assert out.returncode == 0, out.stderr
    report = json.loads(out.stdout)
    assert report == tpscope.analyze(path)
    run = report["runs"][0]
    assert (run["complete"], run["counts"]["spans"], run["counts"]["ok"]) == (False, 30, 30)
