"""tpscope.spans: one row per span, as columns that pandas takes as they are, with
the same figures as the report (its per-span CSV, and its distributions)."""

from __future__ import annotations

import csv
import io
import json
import math
import time

import pytest

import tpscope
from conftest import cli

METRICS = ["t_queue", "t_first_token", "ttft_user", "t_stream", "t_in_flight", "t_post",
           "stream_tps", "end_to_end_tps", "tpot", "decode_tps"]


def make_log(path):
    """A run with ok spans (streamed, usage, one token), a retry, an error, a
    span cancelled in the queue, and a session's turns."""
    with tpscope.Recorder(path, cap=2) as rec:
        for i in range(8):
            r = rec.queued(f"ok-{i}")
            time.sleep(0.001)
            r.admitted()
            for _ in range(2 + i):
                time.sleep(0.0005)
                r.tokens(1)
            if i % 2:
                r.finish_ok(output_tokens=2 + i, input_tokens=10)
            else:
                r.finish_ok()
        one = rec.queued("single")
        one.tokens(1)
        one.finish_ok()
        retried = rec.queued("retried")
        retried.admitted()
        retried.retry("http_429")
        retried.tokens(2)
        retried.finish_ok()
        failed = rec.queued("failed")
        failed.admitted()
        failed.finish_err("http_5xx", "upstream said 503")
        rec.queued("gave-up").cancel("gave up")


def test_columns_are_equal_length_and_match_the_cli_csv(tmp_path):
    path = tmp_path / "t.jsonl"
    make_log(path)
    cols = tpscope.spans(path)
    n = len(cols["span_id"])
    assert n == 12
    assert all(len(v) == n for v in cols.values()), {k: len(v) for k, v in cols.items()}
    for m in METRICS:
        assert m in cols
    out = cli("report", "--format", "csv", str(path))
    assert out.returncode == 0, out.stderr
    rows = list(csv.DictReader(io.StringIO(out.stdout)))
    assert [r["span_id"] for r in rows] == cols["span_id"]
    for i, row in enumerate(rows):
        assert row["status"] == cols["status"][i]
        assert row["request_id"] == (cols["request_id"][i] or "")
        assert row["error_cause"] == (cols["cause"][i] or "")
        assert row["token_source"] == (cols["token_source"][i] or "")
        assert int(row["output_tokens"]) == cols["output_tokens"][i]
        assert int(row["retry_count"]) == cols["retry_count"][i]
        for m in METRICS:
            key = m + "_s" if m in ("t_queue", "t_first_token", "ttft_user", "t_stream",
                                     "t_in_flight", "t_post", "tpot") else m
            ours = cols[m][i]
            if row[key] == "":
                assert ours is None, (m, i)
            else:
                assert ours == pytest.approx(float(row[key]), rel=1e-6, abs=1e-9), (m, i)
    by_id = dict(zip(cols["request_id"], range(n)))
    r = by_id["retried"]
    assert (cols["retry_count"][r], cols["retry_causes"][r]) == (1, ["http_429"])
    f = by_id["failed"]
    assert (cols["status"][f], cols["cause"][f], cols["error_message"][f]) == (
        "error", "http_5xx", "upstream said 503")
    g = by_id["gave-up"]
    assert cols["status"][g] == "cancelled" and cols["admitted_s"][g] is None
    assert cols["t_queue"][g] is None
    assert cols["tpot"][by_id["single"]] is None
    assert cols["token_source"][by_id["ok-1"]] == "usage"
    assert cols["input_tokens"][by_id["ok-1"]] == 10


def test_instants_are_seconds_from_the_run_start_and_absolute_nanoseconds(tmp_path):
    path = tmp_path / "t.jsonl"
    make_log(path)
    cols = tpscope.spans(path)
    run = json.loads(path.read_text().splitlines()[0])
    from conftest import ts_ns

    start = ts_ns(run["started_at"])
    for stem in ("queued", "admitted", "first_token", "last_token", "released"):
        for s, ns in zip(cols[f"{stem}_s"], cols[f"{stem}_at_ns"]):
            assert (s is None) == (ns is None)
            if s is not None:
                assert s == pytest.approx((ns - start) / 1e9, abs=1e-9)
    i = cols["request_id"].index("ok-3")
    assert cols["t_queue"][i] == pytest.approx(cols["admitted_s"][i] - cols["queued_s"][i], abs=1e-9)


def test_a_dataframe_of_the_columns_agrees_with_the_json_report(tmp_path):
    path = tmp_path / "t.jsonl"
    make_log(path)
    cols = tpscope.spans(path)
    report = tpscope.analyze(path)["runs"][0]
    try:
        import pandas
    except ImportError:
        pandas = None
    if pandas is not None:
        df = pandas.DataFrame(cols)
        assert len(df) == report["counts"]["spans"]
        assert (df["status"] == "ok").sum() == report["counts"]["ok"]
        assert df["retry_count"].sum() == sum(cols["retry_count"])
    # Each metric's distribution in the report is over the ok spans that have it;
    # its median is Hyndman-Fan type 7 (the JSON rounds to 4 significant digits).
    ok = [i for i, s in enumerate(cols["status"]) if s == "ok"]
    for m in METRICS:
        summary = report.get(m) or report["conventional"][m]
        values = sorted(cols[m][i] for i in ok if cols[m][i] is not None)
        assert summary["count"] == len(values), m
        if not values:
            continue
        h = (len(values) - 1) * 0.5
        lo = math.floor(h)
        median = values[lo] + (h - lo) * (values[min(lo + 1, len(values) - 1)] - values[lo])
        assert summary["p50"] == pytest.approx(median, rel=2e-3), m
        assert summary["max"] == pytest.approx(values[-1], rel=2e-3), m


def test_the_window_is_the_reports(tmp_path):
    path = tmp_path / "t.jsonl"
    make_log(path)
    report = tpscope.analyze(path, window="0..0.01")["runs"][0]
    cols = tpscope.spans(path, window="0..0.01")
    assert len(cols["span_id"]) == report["counts"]["spans"] < 12
    assert all(t <= 0.01 for t in cols["released_s"])
    with pytest.raises(tpscope.TpscopeError, match="window: `most`"):
        tpscope.spans(path, window="most")
