"""Two recorders on one file (a process pool with one recorder per worker): the
second is refused with the holder named, and the first's log stays readable."""

from __future__ import annotations

import subprocess

import pytest

import tpscope
from conftest import PYTHON, records

HOLDER = r"""
import sys, tpscope
rec = tpscope.Recorder(sys.argv[1], cap=2, mode="append")
with rec.request("held") as r:
    r.tokens(2)
rec.flush()
print("open", flush=True)
sys.stdin.readline()
rec.close()
"""


def test_a_second_process_is_refused_naming_the_holder(tmp_path):
    path = tmp_path / "shared.jsonl"
    proc = subprocess.Popen([PYTHON, "-c", HOLDER, str(path)], stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, text=True)
    try:
        assert proc.stdout.readline().strip() == "open"
        for mode in ("append", "overwrite"):
            with pytest.raises(tpscope.TpscopeError) as e:
                tpscope.Recorder(path, mode=mode)
            msg = str(e.value)
            assert "another recorder is writing it" in msg, msg
            assert f"process {proc.pid}" in msg, msg
            assert "give each process its own file" in msg
    finally:
        proc.stdin.write("\n")
        proc.stdin.close()
        proc.wait(timeout=30)
        proc.stdout.close()
    # Nothing was truncated or interleaved: the holder's run is whole.
    assert [s["request_id"] for s in records(path, "span")] == ["held"]
    assert len(records(path, "end")) == 1
    # Once it is closed, the file is free.
    with tpscope.Recorder(path, mode="append") as rec:
        rec.queued("after").finish_ok()
    assert len(records(path, "run")) == 2


def test_two_recorders_in_one_process_are_refused_too(tmp_path):
    path = tmp_path / "t.jsonl"
    with tpscope.Recorder(path):
        with pytest.raises(tpscope.TpscopeError, match="this process"):
            tpscope.Recorder(path, mode="append")
