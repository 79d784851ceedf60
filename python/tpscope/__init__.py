"""Record your own pipeline's LLM requests as a tpscope span log, and analyse span logs.

    rec = tpscope.Recorder("spans.jsonl", cap=8)
    async with rec.request("job-1") as r:   # queued now
        async with semaphore:
            r.admitted()                     # took a slot
            ...                              # instrumented SDK calls stamp tokens
    rec.close()
    tpscope.analyze("spans.jsonl")["runs"][0]["gap"]["fraction"]

Every time is stamped by the Rust core on the run's monotonic clock; every metric is
computed by the same Rust code as ``tpscope report`` (nothing is recomputed here).
"""

from __future__ import annotations

import contextvars
import json
import os
from typing import Any, Dict, Iterable, Optional, Union

from . import _tpscope
from ._causes import cause_of, message_of
from ._tpscope import CAUSES, COMPARE_SCHEMA, REPORT_SCHEMA, Request, TpscopeError

__all__ = [
    "CAUSES",
    "COMPARE_SCHEMA",
    "REPORT_SCHEMA",
    "Recorder",
    "Request",
    "RequestBlock",
    "TpscopeError",
    "analyze",
    "cause_of",
    "compare",
    "current",
]

PathLike = Union[str, "os.PathLike[str]"]


class _Scope:
    """What a `request` block shares with the SDK instrumentation through the
    context variable: the handle, and what the block's calls have told so far."""

    __slots__ = ("rec", "req", "failed", "output", "input", "usage_seen")

    def __init__(self, rec: "Recorder", req: Request) -> None:
        self.rec = rec
        self.req = req
        # (cause, message) of the block's last failed call, until a later call retries.
        self.failed: Optional[tuple] = None
        self.output = 0
        self.input: Optional[int] = None
        self.usage_seen = False

    def add_usage(self, output: Optional[int], input: Optional[int]) -> None:
        if output is None:
            return
        self.usage_seen = True
        self.output += output
        if input is not None:
            self.input = (self.input or 0) + input

    def finish(self, exc: Optional[BaseException]) -> None:
        req = self.req
        if req.state == "finished":
            return
        if exc is not None:
            req.finish_err(cause_of(exc), message_of(exc))
        elif self.failed is not None:
            # The block swallowed its last call's error and made no other: it failed.
            req.finish_err(*self.failed)
        elif self.usage_seen:
            req.finish_ok(self.output, self.input)
        else:
            req.finish_ok()


_current: "contextvars.ContextVar[Optional[_Scope]]" = contextvars.ContextVar(
    "tpscope_request", default=None
)


def current() -> Optional[Request]:
    """The request of the innermost `request` block around the caller (across
    `await`), or None."""
    scope = _current.get()
    return scope.req if scope is not None else None


class RequestBlock:
    """`with rec.request(id) as r:` / `async with ...`: queued on entry; call
    `r.admitted()` when it takes a slot (an instrumented SDK call admits it if you
    have not). A clean exit finishes it ok (with the usage its SDK calls reported),
    an exception finishes it with the cause from `tpscope.CAUSES`, and
    `asyncio.CancelledError` (or KeyboardInterrupt) makes it cancelled. The exception
    is never swallowed."""

    __slots__ = ("_rec", "_id", "_scope", "_token")

    def __init__(self, rec: "Recorder", id: Union[str, Request]) -> None:
        self._rec = rec
        self._id = id

    def __enter__(self) -> Request:
        req = self._id if isinstance(self._id, Request) else self._rec.queued(self._id)
        self._scope = _Scope(self._rec, req)
        self._token = _current.set(self._scope)
        return req

    def __exit__(self, exc_type, exc, tb) -> bool:
        _current.reset(self._token)
        self._scope.finish(exc)
        return False

    async def __aenter__(self) -> Request:
        return self.__enter__()

    async def __aexit__(self, exc_type, exc, tb) -> bool:
        return self.__exit__(exc_type, exc, tb)


class Recorder(_tpscope.Recorder):
    """Records one run of your own requests into a span log (format tpscope.spans/1).

    Recorder(path, *, cap=None, labels=None, sample_interval=None, mode="new",
             model=None, url=None, api=None)

    `cap` is your pipeline's concurrency limit (the gap fraction needs it);
    `sample_interval` is seconds or a duration text ("10ms", the default);
    `mode` is "new" (never overwrite), "append" or "overwrite". The recorder samples
    its own in-flight and queued counts, writes on its own thread and flushes at
    least every 200 ms. Use it as a context manager, or call `close()`.
    """

    def request(self, id: Union[str, Request] = "") -> RequestBlock:
        """A context manager (sync or async) around one request; see RequestBlock.
        Without an id, the span's request_id is the server's response id. Given a
        handle from `queued()` (work that became ready earlier, e.g. a whole batch
        queued up front), the block carries on with it instead of queuing anew."""
        return RequestBlock(self, id)

    def __enter__(self) -> "Recorder":
        return self

    def __exit__(self, exc_type, exc, tb) -> bool:
        self.close()
        return False


def _paths(p: Union[PathLike, Iterable[PathLike]]) -> list:
    if isinstance(p, (str, os.PathLike)):
        return [os.fspath(p)]
    return [os.fspath(x) for x in p]


def analyze(path_or_paths: Union[PathLike, Iterable[PathLike]], **options: Any) -> Dict[str, Any]:
    """The `tpscope.report/1` document of one or more span logs, exactly as
    `tpscope report --format json` prints it.

    Options (as the CLI flags): window="full"|"steady"|"FROM..TO", bucket="1s",
    time_unit=None, skip_invalid=False, price_per_hour, price_per_mtok_in,
    price_per_mtok_out, goodput (goals as `ttft:500ms,tpot:50ms,e2e:10s`). Raises
    TpscopeError with the reader's message (file, line, field) on a bad log."""
    return json.loads(_tpscope.analyze_json(_paths(path_or_paths), **options))


def compare(baseline: PathLike, candidate: PathLike, **options: Any) -> Dict[str, Any]:
    """The `tpscope.compare/1` document (criteria, intervals, verdicts, `overall`)
    of a candidate run against a baseline, as `tpscope compare --format json`.

    Options: baseline_run, candidate_run, resamples=2000, seed=1, confidence=0.95,
    min_tps_gain=0.0, max_success_drop=0.01, min_gap_drop=0.0, max_retry_rise=0.01,
    max_goodput_drop=0.01 (judged when goodput goals are given), allow_mismatch=False,
    window, time_unit, skip_invalid, prices and goodput (as analyze).
    Shares are fractions (0.05 is 5%)."""
    return json.loads(
        _tpscope.compare_json(os.fspath(baseline), os.fspath(candidate), **options)
    )
