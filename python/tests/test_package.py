"""The package as a user meets it: one import gives the SDK submodules, help()'s
examples run as written, signatures show their defaults, `__version__` is there,
and `python -m tpscope report|compare` prints what the CLI prints."""

from __future__ import annotations

import inspect
import json
import os
import re
import subprocess
import textwrap

import pytest

import tpscope
from conftest import PYTHON, ROOT, cli


def test_submodules_load_on_first_attribute_access():
    code = (
        "import sys, tpscope\n"
        "assert 'tpscope.openai' not in sys.modules\n"
        "assert callable(tpscope.openai.instrument) and callable(tpscope.anthropic.instrument)\n"
        "assert 'openai' in dir(tpscope)\n"
        "try:\n    tpscope.nothing\nexcept AttributeError as e:\n    print(e)\n"
    )
    out = subprocess.run([PYTHON, "-c", code], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert "has no attribute 'nothing'" in out.stdout


def test_version_is_the_crates_version():
    cargo = (ROOT / "Cargo.toml").read_text()
    version = re.search(r'^version = "([^"]+)"', cargo, re.M).group(1)
    assert tpscope.__version__ == version


def test_signatures_show_their_defaults_not_ellipsis():
    for f in (tpscope.Recorder, tpscope.Recorder.queued, tpscope.Request.tokens,
              tpscope.Request.finish_ok, tpscope.Request.finish_err, tpscope.Request.cancel,
              tpscope.spans):
        sig = inspect.signature(f)
        for p in sig.parameters.values():
            assert p.default is not Ellipsis, (f, sig)
    assert inspect.signature(tpscope.Recorder).parameters["mode"].default == "new"
    assert inspect.signature(tpscope.Request.tokens).parameters["n"].default == 1


def doc_blocks():
    """The indented code blocks of tpscope's docstring, as help() shows them."""
    blocks, current = [], []
    for line in tpscope.__doc__.splitlines():
        if line.startswith("    ") or (current and not line.strip()):
            current.append(line)
        elif current:
            blocks.append(textwrap.dedent("\n".join(current)))
            current = []
    if current:
        blocks.append(textwrap.dedent("\n".join(current)))
    return blocks


def test_the_help_examples_run_as_written(tmp_path, start_sim):
    sdk_example, hand_example = doc_blocks()
    out = subprocess.run([PYTHON, "-c", hand_example], cwd=tmp_path, capture_output=True,
                         text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "1"
    pytest.importorskip("openai")
    sim = start_sim("--speed", "max")
    env = dict(os.environ, OPENAI_BASE_URL=sim.base_url, OPENAI_API_KEY="sim")
    # The example names a hosted model; the simulator serves its own.
    code = sdk_example.replace('"gpt-4o-mini"', repr(sim.model))
    out = subprocess.run([PYTHON, "-c", code], cwd=tmp_path, env=env, capture_output=True,
                         text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert 0.0 <= float(out.stdout.strip()) <= 1.0
    assert len(tpscope.spans(tmp_path / "spans.jsonl")["span_id"]) == 32


def run_module(*args, cwd=None):
    return subprocess.run([PYTHON, "-m", "tpscope", *args], capture_output=True, text=True,
                          timeout=120, cwd=cwd)


def small_log(path, service_ms):
    import time

    with tpscope.Recorder(path, cap=2) as rec:
        for i in range(12):
            with rec.request(str(i)) as r:
                r.admitted()
                time.sleep(service_ms / 1000)
                r.tokens(3)


def test_python_m_tpscope_report_and_compare_print_what_the_cli_prints(tmp_path):
    a, b = tmp_path / "a.jsonl", tmp_path / "b.jsonl"
    small_log(a, 3)
    small_log(b, 1)
    for fmt in ("text", "json", "markdown", "csv"):
        ours = run_module("report", "--format", fmt, str(a))
        theirs = cli("report", "--format", fmt, str(a))
        assert ours.returncode == theirs.returncode == 0, ours.stderr
        assert ours.stdout == theirs.stdout, fmt
    args = ["--resamples", "200", "--confidence", "90%", str(a), str(b)]
    ours = run_module("compare", "--format", "json", *args)
    theirs = cli("compare", "--format", "json", *args)
    assert ours.returncode == theirs.returncode, ours.stderr
    assert json.loads(ours.stdout) == json.loads(theirs.stdout)
    bad = run_module("report", "--window", "most", str(a))
    assert bad.returncode == 2 and "window: `most`" in bad.stderr


def test_python_m_tpscope_hands_other_commands_to_the_binary(tmp_path):
    from conftest import tpscope_bin

    env = dict(os.environ, TPSCOPE_BIN=tpscope_bin())
    out = subprocess.run([PYTHON, "-m", "tpscope", "sim", "--help"], capture_output=True,
                         text=True, timeout=60, env=env)
    assert out.returncode == 0 and "--fault-cut" in out.stdout
    env = {k: v for k, v in os.environ.items() if k != "TPSCOPE_BIN"}
    env["PATH"] = str(tmp_path)
    out = subprocess.run([PYTHON, "-m", "tpscope", "sim"], capture_output=True, text=True,
                         timeout=60, env=env)
    assert out.returncode == 2 and "needs the tpscope binary" in out.stderr
