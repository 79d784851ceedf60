"""The recording API without any SDK: transitions, context managers, causes of
exceptions, and Rust errors surfacing as TpscopeError with the Rust message."""

from __future__ import annotations

import asyncio
import json

import pytest

import tpscope
from conftest import cli, records, ts_ns


def spans_by_id(path):
    return {s.get("request_id"): s for s in records(path, "span")}


def test_every_transition_lands_in_the_span_log(tmp_path):
    path = tmp_path / "t.jsonl"
    rec = tpscope.Recorder(path, cap=4, labels={"job": "t"}, sample_interval="5ms")
    ok = rec.queued("ok")
    assert ok.state == "queued"
    ok.admitted()
    assert ok.state == "admitted"
    ok.first_token()
    ok.tokens(3)
    ok.finish_ok(output_tokens=12, input_tokens=7)
    assert ok.state == "finished"
    chunks = rec.queued("chunks")
    chunks.admitted()
    for _ in range(5):
        chunks.tokens()
    chunks.finish_ok()
    retried = rec.queued("retried")
    retried.admitted()
    retried.retry("http_429")
    retried.finish_err("http_5xx", "upstream unavailable")
    rec.queued("left").cancel("gave up")
    dropped = rec.queued("dropped")
    dropped.admitted()
    del dropped
    rec.set_cap(8)
    counts = rec.close()
    assert counts == {"spans": 5, "ok": 2, "error": 1, "cancelled": 2, "samples": counts["samples"], "unfinished": 0}
    assert counts["samples"] >= 2

    s = spans_by_id(path)
    assert s["ok"]["status"] == "ok"
    assert (s["ok"]["output_tokens"], s["ok"]["input_tokens"], s["ok"]["token_source"]) == (12, 7, "usage")
    assert ts_ns(s["ok"]["queued_at"]) <= ts_ns(s["ok"]["admitted_at"]) <= ts_ns(s["ok"]["first_token_at"])
    assert (s["chunks"]["output_tokens"], s["chunks"]["token_source"]) == (5, "chunks")
    assert s["retried"]["status"] == "error"
    assert s["retried"]["retry_causes"] == ["http_429"]
    assert s["retried"]["error"]["cause"] == "http_5xx"
    assert s["left"]["status"] == "cancelled" and "admitted_at" not in s["left"]
    assert s["dropped"]["status"] == "cancelled"
    run = records(path, "run")[0]
    assert (run["cap"], run["labels"], run["sample_interval_s"]) == (4, {"job": "t"}, 0.005)
    assert any(x.get("cap") == 8 for x in records(path, "sample"))
    assert len(records(path, "end")) == 1


def test_a_finished_request_refuses_more_events(tmp_path):
    with tpscope.Recorder(tmp_path / "t.jsonl") as rec:
        r = rec.queued("a")
        r.finish_ok()
        with pytest.raises(tpscope.TpscopeError, match="already finished"):
            r.tokens(1)


def test_rust_errors_become_tpscope_errors_with_the_rust_message(tmp_path):
    path = tmp_path / "t.jsonl"
    tpscope.Recorder(path).close()
    with pytest.raises(tpscope.TpscopeError, match="already exists"):
        tpscope.Recorder(path)
    with tpscope.Recorder(path, mode="append") as rec:
        with pytest.raises(tpscope.TpscopeError, match="unknown failure cause `oops`"):
            rec.queued("x").finish_err("oops")
    with pytest.raises(tpscope.TpscopeError, match="mode: `sideways`"):
        tpscope.Recorder(tmp_path / "u.jsonl", mode="sideways")
    with pytest.raises(tpscope.TpscopeError, match="sample_interval"):
        tpscope.Recorder(tmp_path / "v.jsonl", sample_interval="soon")
    bad = tmp_path / "bad.jsonl"
    lines = path.read_text().splitlines(keepends=True)
    bad.write_text(lines[0] + '{"kind":"span","run_id":5}\n' + "".join(lines[1:]))
    with pytest.raises(tpscope.TpscopeError, match="bad.jsonl:2"):
        tpscope.analyze(bad)
    with pytest.raises(tpscope.TpscopeError, match="window: `most`"):
        tpscope.analyze(path, window="most")
    with pytest.raises(tpscope.TpscopeError, match="confidence: 1.5 is not between"):
        tpscope.compare(path, path, confidence=1.5)


def test_sync_blocks_turn_exceptions_into_error_spans_and_keep_raising(tmp_path):
    path = tmp_path / "t.jsonl"
    with tpscope.Recorder(path, cap=2) as rec:
        with rec.request("fine") as r:
            r.admitted()
            r.tokens(4)
        with pytest.raises(TimeoutError):
            with rec.request("timed-out") as r:
                r.admitted()
                raise TimeoutError("too slow")
        with pytest.raises(KeyError):
            with rec.request("own-bug"):
                raise KeyError("choices")
        with pytest.raises(KeyboardInterrupt):
            with rec.request("interrupted") as r:
                raise KeyboardInterrupt
    s = spans_by_id(path)
    assert (s["fine"]["status"], s["fine"]["output_tokens"]) == ("ok", 4)
    assert s["timed-out"]["error"]["cause"] == "timeout_total"
    assert "too slow" in s["timed-out"]["error"]["message"]
    assert s["own-bug"]["error"]["cause"] == "malformed"
    assert s["interrupted"]["status"] == "cancelled"


def test_async_blocks_record_cancellation_as_cancelled(tmp_path):
    path = tmp_path / "t.jsonl"

    async def main():
        rec = tpscope.Recorder(path, cap=2)
        sem = asyncio.Semaphore(1)

        async def job(i):
            async with rec.request(f"job-{i}") as r:
                async with sem:
                    r.admitted()
                    assert tpscope.current() is r
                    await asyncio.sleep(0.01 if i == 0 else 10)
                    r.tokens(2)

        tasks = [asyncio.ensure_future(job(i)) for i in range(3)]
        await asyncio.wait_for(tasks[0], 5)
        await asyncio.sleep(0.02)
        for t in tasks[1:]:
            t.cancel()
        await asyncio.gather(*tasks[1:], return_exceptions=True)
        assert tpscope.current() is None
        rec.close()

    asyncio.run(main())
    s = spans_by_id(path)
    assert s["job-0"]["status"] == "ok"
    assert s["job-1"]["status"] == "cancelled" and "admitted_at" in s["job-1"]
    # Still waiting for the semaphore when cancelled: cancelled in the queue.
    assert s["job-2"]["status"] == "cancelled" and "admitted_at" not in s["job-2"]


def test_cause_of_maps_by_class_name_and_status():
    class APIStatusError(Exception):
        def __init__(self, status):
            self.status_code = status

    class RateLimitError(APIStatusError):
        pass

    class APIConnectionError(Exception):
        pass

    class APITimeoutError(APIConnectionError):
        pass

    assert tpscope.cause_of(RateLimitError(429)) == "http_429"
    assert tpscope.cause_of(APIStatusError(404)) == "http_4xx"
    assert tpscope.cause_of(APIStatusError(503)) == "http_5xx"
    assert tpscope.cause_of(APIConnectionError()) == "connect"
    assert tpscope.cause_of(APITimeoutError()) == "timeout_total"
    assert tpscope.cause_of(asyncio.CancelledError()) == "cancelled"
    assert tpscope.cause_of(ValueError()) == "malformed"
    assert set(tpscope.CAUSES) >= {"http_429", "connect", "cancelled"}


def test_analyze_and_compare_return_exactly_what_the_cli_prints(tmp_path):
    paths = []
    for name, service in (("a", 0.004), ("b", 0.001)):
        path = tmp_path / f"{name}.jsonl"
        with tpscope.Recorder(path, cap=2) as rec:
            handles = [rec.queued(str(i)) for i in range(20)]
            for h in handles:
                h.admitted()
                h.tokens(3)
                import time

                time.sleep(service)
                h.finish_ok()
        paths.append(path)
    report = tpscope.analyze(paths[0])
    assert report["schema"] == tpscope.REPORT_SCHEMA
    out = cli("report", "--format", "json", str(paths[0]))
    assert out.returncode == 0, out.stderr
    assert report == json.loads(out.stdout)
    ours = tpscope.compare(paths[0], paths[1], resamples=200)
    out = cli("compare", "--format", "json", "--resamples", "200", str(paths[0]), str(paths[1]))
    assert out.returncode in (0, 1, 3), out.stderr
    assert ours == json.loads(out.stdout)
    assert ours["schema"] == tpscope.COMPARE_SCHEMA
    both = tpscope.analyze([paths[0], str(paths[1])], window="full", bucket="100ms")
    assert len(both["runs"]) == 2


def test_analyze_reads_a_rotation_by_its_base_name_and_warns_of_unknown_kinds(tmp_path):
    whole = tmp_path / "whole.jsonl"
    with tpscope.Recorder(whole, cap=2) as rec:
        for i in range(10):
            h = rec.queued(str(i))
            h.admitted()
            h.tokens(2)
            h.finish_ok()
    lines = whole.read_text().splitlines()
    run, rest = lines[0], lines[1:]
    half = len(rest) // 2
    unknown = json.dumps({"kind": "gpu_sample", "run_id": json.loads(run)["run_id"]})
    (tmp_path / "live-0000.jsonl").write_text("\n".join([run, *rest[:half]]) + "\n")
    (tmp_path / "live-0001.jsonl").write_text("\n".join([run, unknown, *rest[half:]]) + "\n")
    with pytest.warns(UserWarning, match="kind `gpu_sample`"):
        report = tpscope.analyze(tmp_path / "live.jsonl")
    assert report["runs"][0]["counts"]["spans"] == 10
    assert report == tpscope.analyze(whole)


def test_bad_arguments_name_the_argument_and_the_value_to_use(tmp_path):
    with pytest.raises(tpscope.TpscopeError, match=r"cap: 0 would admit no request.*cap=8"):
        tpscope.Recorder(tmp_path / "a.jsonl", cap=0)
    with pytest.raises(OverflowError, match=r"cap: 4294967296 is out of range"):
        tpscope.Recorder(tmp_path / "b.jsonl", cap=2**32)
    with pytest.raises(OverflowError, match=r"cap: -1 is out of range"):
        tpscope.Recorder(tmp_path / "c.jsonl", cap=-1)
    with pytest.raises(TypeError, match=r"cap: '8' is not an integer"):
        tpscope.Recorder(tmp_path / "d.jsonl", cap="8")
    with tpscope.Recorder(tmp_path / "e.jsonl", cap=2) as rec:
        with pytest.raises(tpscope.TpscopeError, match="cap: 0 would admit"):
            rec.set_cap(0)
        r = rec.queued("x")
        with pytest.raises(OverflowError, match=r"^n: -3 is out of range"):
            r.tokens(-3)
        with pytest.raises(OverflowError, match="output_tokens: 18446744073709551616"):
            r.finish_ok(output_tokens=2**64)
        r.finish_ok(output_tokens=2)
    path = tmp_path / "e.jsonl"
    with pytest.raises(tpscope.TpscopeError) as e:
        tpscope.Recorder(path)
    assert 'mode="append"' in str(e.value) and 'mode="overwrite"' in str(e.value)
    assert "OpenMode" not in str(e.value)
    with pytest.raises(tpscope.TpscopeError, match='mode: `sideways` is not "new"'):
        tpscope.Recorder(tmp_path / "f.jsonl", mode="sideways")


def test_calls_after_close_raise_instead_of_vanishing(tmp_path):
    rec = tpscope.Recorder(tmp_path / "t.jsonl", cap=2)
    open_request = rec.queued("open")
    assert rec.close()["unfinished"] == 1
    assert rec.closed
    for call in (lambda: rec.queued("late"), lambda: rec.set_cap(3), rec.flush,
                 lambda: open_request.tokens(1), open_request.finish_ok):
        with pytest.raises(tpscope.TpscopeError, match="is closed.*open a new tpscope.Recorder"):
            call()
    with pytest.raises(tpscope.TpscopeError, match="is closed"):
        with rec.request("block"):
            pass
    assert rec.close()["spans"] == 0  # closing again is harmless


def test_cause_of_reads_what_an_exception_was_raised_from_innermost_first():
    class RemoteProtocolError(Exception):
        pass

    class APIConnectionError(Exception):
        pass

    class APIStatusError(Exception):
        status_code = 503

    def raised_from(outer, inner):
        try:
            try:
                raise inner
            except Exception as e:
                raise outer from e
        except Exception as e:
            return e

    # A stream the server cut, wrapped by the SDK: a disconnect, not a connect failure.
    assert tpscope.cause_of(raised_from(APIConnectionError(), RemoteProtocolError())) == "disconnect"
    assert tpscope.cause_of(APIConnectionError()) == "connect"
    # An HTTP status decides over what it was raised from.
    assert tpscope.cause_of(raised_from(APIStatusError(), TimeoutError())) == "http_5xx"
    with pytest.raises(TypeError, match="python -m tpscope report --format"):
        tpscope.analyze("x.jsonl", format="text")
