"""Record your own pipeline's LLM requests as a tpscope span log, and analyse span logs.

    import asyncio, openai, tpscope

    async def main():
        client = openai.AsyncOpenAI()
        with tpscope.Recorder("spans.jsonl", cap=8, mode="overwrite") as rec:
            tpscope.openai.instrument(client, rec)    # every call stamps its tokens
            slots = asyncio.Semaphore(8)

            async def job(i):
                async with rec.request(f"job-{i}") as r:   # queued now
                    async with slots:
                        r.admitted()                       # took a slot
                        stream = await client.chat.completions.create(
                            model="gpt-4o-mini", stream=True,
                            messages=[{"role": "user", "content": "hi"}])
                        async for _ in stream:
                            pass

            await asyncio.gather(*(job(i) for i in range(32)))

    asyncio.run(main())
    report = tpscope.analyze("spans.jsonl")
    print(report["runs"][0]["gap_fraction"])     # share of time work waited by a free slot
    rows = tpscope.spans("spans.jsonl")          # one row per span: pandas.DataFrame(rows)

Without an SDK, stamp a request by hand:

    import tpscope
    with tpscope.Recorder("hand.jsonl", cap=2, mode="overwrite") as rec:
        with rec.request("one") as r:
            r.admitted()
            r.tokens(3)
    print(tpscope.analyze("hand.jsonl")["runs"][0]["counts"]["ok"])   # 1

`tpscope.openai` and `tpscope.anthropic` load on first use. Every time is stamped
by the Rust core on the run's monotonic clock; every metric is computed by the same
Rust code as ``tpscope report`` (nothing is recomputed here). `python -m tpscope
report spans.jsonl` prints the report as the CLI does.
"""

from __future__ import annotations

import contextvars
import importlib
import json
import os
import warnings
from typing import Any, Dict, Iterable, List, Optional, Union

from . import _tpscope
from ._causes import cause_of, message_of
from ._tpscope import CAUSES, COMPARE_SCHEMA, REPORT_SCHEMA, Request, TpscopeError

__version__: str = _tpscope.__version__

__all__ = [
    "CAUSES",
    "COMPARE_SCHEMA",
    "REPORT_SCHEMA",
    "Recorder",
    "Request",
    "RequestBlock",
    "TpscopeError",
    "__version__",
    "analyze",
    "anthropic",
    "cause_of",
    "compare",
    "current",
    "openai",
    "spans",
]

# The SDK instrumentation, imported on first access (`tpscope.openai`), as
# scientific Python packages load their submodules.
_SUBMODULES = ("openai", "anthropic")


def __getattr__(name: str) -> Any:
    if name in _SUBMODULES:
        return importlib.import_module(f".{name}", __name__)
    raise AttributeError(f"module 'tpscope' has no attribute {name!r}")


def __dir__() -> List[str]:
    return sorted(set(globals()) | set(_SUBMODULES))


PathLike = Union[str, "os.PathLike[str]"]


class _Scope:
    """What a `request` block shares with the SDK instrumentation through the
    context variable: the handle, and what the block's calls have told so far."""

    __slots__ = ("rec", "req", "failed", "output", "input", "usage_seen", "text")

    def __init__(self, rec: "Recorder", req: Request) -> None:
        self.rec = rec
        self.req = req
        # (cause, message) of the block's last failed call, until a later call retries.
        self.failed: Optional[tuple] = None
        self.output = 0
        self.input: Optional[int] = None
        self.usage_seen = False
        # Output text of calls that gave no usable usage, for the tokenizer.
        self.text: List[str] = []

    def add_text(self, text: str, input: Optional[int]) -> None:
        self.text.append(text)
        if input is not None:
            self.input = (self.input or 0) + input

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
            if self.text:
                req.text("".join(self.text))
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
             model=None, url=None, api=None, sample_heartbeat=None,
             otlp_endpoint=None, otlp_headers=None)

    `cap` is your pipeline's concurrency limit (the gap fraction needs it);
    `sample_interval` is seconds or a duration text ("10ms", the default);
    `sample_heartbeat` is how often a sample is written when nothing changes
    (samples are written on a change; default 10 s);
    `mode` is "new" (never overwrite), "append" or "overwrite". The recorder samples
    its own in-flight and queued counts, writes on its own thread and flushes at
    least every 200 ms. Use it as a context manager, or call `close()`.

    `otlp_endpoint` (e.g. "http://127.0.0.1:4318") also exports every span to an
    OpenTelemetry collector (OTLP/HTTP JSON, docs/otlp.md), with `otlp_headers`
    ({name: value}) on each export; what the collector did not take is counted in
    `close()`'s `not_exported` and warned about (RuntimeWarning).
    """

    def close(self) -> Dict[str, int]:
        """Ends the run (see the native close); warns when the OTLP export lost spans."""
        counts = super().close()
        if counts.get("not_exported"):
            warnings.warn(self.otlp_warning, RuntimeWarning, stacklevel=2)
        return counts

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


def _json_only(name: str, command: str, options: Dict[str, Any]) -> None:
    if "format" in options:
        raise TypeError(
            f"{name}() returns the JSON document as a dict and takes no format=; for "
            f"text, markdown or csv run `python -m tpscope {command} --format ...`"
        )


def analyze(path_or_paths: Union[PathLike, Iterable[PathLike]], **options: Any) -> Dict[str, Any]:
    """The `tpscope.report/1` document of one or more span logs, exactly as
    `tpscope report --format json` prints it.

    Options (as the CLI flags): window="full"|"steady"|"FROM..TO", bucket="1s",
    time_unit=None, skip_invalid=False, price_per_hour, price_per_mtok_in,
    price_per_mtok_out, goodput (goals as `ttft:500ms,tpot:50ms,e2e:10s`). Raises
    TpscopeError with the reader's message (file, line, field) on a bad log."""
    _json_only("analyze", "report", options)
    return json.loads(_tpscope.analyze_json(_paths(path_or_paths), **options))


def spans(
    path_or_paths: Union[PathLike, Iterable[PathLike]],
    *,
    window: str = "full",
    time_unit: Optional[str] = None,
    skip_invalid: bool = False,
) -> Dict[str, list]:
    """One row per span released in each run's window, as columns: a dict of
    equal-length lists that `pandas.DataFrame(...)` and `polars.DataFrame(...)` take
    as they are. Computed by the same Rust code as the report (its `METRICS` table).

    Columns: run_id, span_id, request_id, status, cause, error_message; the instants
    queued, admitted, first_token, last_token, released as `<name>_s` (seconds from
    the run's start) and `<name>_at_ns` (nanoseconds since the Unix epoch, UTC:
    `pandas.to_datetime(df.queued_at_ns, unit="ns", utc=True)`); the per-span metrics
    t_queue, t_first_token, ttft_user, t_stream, t_in_flight, t_post (seconds),
    stream_tps, end_to_end_tps (tokens/s), tpot (seconds), decode_tps (tokens/s);
    output_tokens, input_tokens, token_source, retry_count, retry_causes (a list
    per span), wasted_tokens, session and turn. A value that cannot be computed
    (no first token, one token, never admitted) is None.

    window="full"|"steady"|"FROM..TO" as the report's; time_unit and skip_invalid
    as `analyze`."""
    return _tpscope.spans_columns(
        _paths(path_or_paths), window=window, time_unit=time_unit, skip_invalid=skip_invalid
    )


def compare(baseline: PathLike, candidate: PathLike, **options: Any) -> Dict[str, Any]:
    """The `tpscope.compare/1` document (criteria, intervals, verdicts, `overall`)
    of a candidate run against a baseline, as `tpscope compare --format json`.

    Options: baseline_run, candidate_run, resamples=2000, seed=1, confidence=0.95,
    min_tps_gain=0.0, max_success_drop=0.01, min_gap_drop=0.0, max_retry_rise=0.01,
    max_goodput_drop=0.01 (judged when goodput goals are given), allow_mismatch=False,
    window, time_unit, skip_invalid, prices and goodput (as analyze).
    Shares are fractions (0.05 is 5%)."""
    _json_only("compare", "compare", options)
    text, _status = _tpscope.compare_json(os.fspath(baseline), os.fspath(candidate), **options)
    return json.loads(text)
