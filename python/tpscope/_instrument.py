"""Instrumenting an SDK resource at the one method every call path goes through:
its `_post` (the SDK client's `post`, bound on the resource). `create` streamed or
not, the `.stream()` helpers, `with_raw_response` and `with_streaming_response` all
post through it, so none is left out. Only the paths a `Dialect` names are stamped
(`/chat/completions`, not `/chat/completions/{id}`).

Each call stamps its request: the one of the enclosing `request` block (found
through the context variable, so it works across `await`), or a span of its own,
queued and admitted at the call. The caller receives the SDK's own objects: a
stream keeps its class, only its iterator is wrapped; a raw response is stamped
when it is parsed.

The recorder is looked up at each call, so instrumenting a client again (a
notebook cell run twice) sends its calls to the new recorder.
"""

from __future__ import annotations

import functools
import inspect
import warnings
from typing import Any, Callable, Dict, List, Optional

from . import _current, _Scope
from ._causes import cause_of, http_status_of, message_of

_WRAPPED = "__tpscope_post__"
_TARGET = "__tpscope_recorder__"


class Tally:
    """What one call's reply said: usage, the response id, and the output it
    streamed (chunks, and their text for the tokenizer when usage is missing)."""

    __slots__ = ("output", "input", "rid", "chunks", "text")

    def __init__(self) -> None:
        self.output: Optional[int] = None
        self.input: Optional[int] = None
        self.rid: Optional[str] = None
        self.chunks = 0
        self.text: List[str] = []


class Dialect:
    """One API's reply shapes; subclasses fill these in."""

    def prepare(self, body: Any) -> bool:
        """Adjusts a streamed call's JSON body; True when it added a usage-only
        chunk that the caller did not ask for (to be hidden)."""
        return False

    def chunk(self, chunk: Any, tally: Tally) -> int:
        """Reads one streamed chunk into `tally` (appending its output text);
        returns 1 if it carries output, 0 if not, -1 if it is the usage-only chunk."""
        raise NotImplementedError

    def whole(self, reply: Any, tally: Tally) -> None:
        """Reads a non-streamed reply into `tally` (usage, id, its output text)."""
        raise NotImplementedError


def _begin(rec: Any) -> tuple:
    """The scope a call stamps, and whether the call owns it (no enclosing block)."""
    scope = _current.get()
    if scope is None or scope.rec is not rec:
        scope = _Scope(rec, rec.queued())
        scope.req.admitted()
        return scope, True
    if scope.failed is not None:
        # The block tries again after a failed call: that call was an attempt.
        scope.req.retry(scope.failed[0])
        scope.failed = None
    scope.req.admitted()
    return scope, False


def _failed(scope: _Scope, own: bool, exc: BaseException) -> None:
    status = http_status_of(exc)
    if status is not None and scope.req.state != "finished":
        scope.req.http_status(status)
    if own:
        scope.finish(exc)
    elif scope.req.state != "finished":
        scope.failed = (cause_of(exc), message_of(exc))


def _succeeded(scope: _Scope, own: bool, tally: Tally) -> None:
    if tally.rid is not None:
        scope.req.response_id(tally.rid)
    text = "".join(tally.text)
    if text and not tally.output:
        # Output arrived but usage counted none (or there was no usage): never a
        # span of 0 tokens; the tokenizer counts the text.
        if tally.output == 0:
            warnings.warn(
                f"tpscope: the server's usage says 0 output tokens for a reply of "
                f"{len(text)} characters ({tally.chunks} chunks); the span counts "
                f"the text with the offline tokenizer instead",
                RuntimeWarning,
                stacklevel=4,
            )
        scope.add_text(text, tally.input)
    else:
        scope.add_usage(tally.output, tally.input)
    if own:
        scope.finish(None)


def _stamp(req: Any, dialect: Dialect, chunk: Any, tally: Tally) -> int:
    kind = dialect.chunk(chunk, tally)
    if kind == 1:
        tally.chunks += 1
        req.tokens(1)
    return kind


def _sync_stream(it, scope: _Scope, own: bool, dialect: Dialect, hide: bool):
    req, tally = scope.req, Tally()
    try:
        for chunk in it:
            if _stamp(req, dialect, chunk, tally) == -1 and hide:
                continue
            yield chunk
    except GeneratorExit:
        if own and req.state != "finished":
            req.cancel("stream closed before its end")
        raise
    except BaseException as e:
        _failed(scope, own, e)
        raise
    _succeeded(scope, own, tally)


async def _async_stream(it, scope: _Scope, own: bool, dialect: Dialect, hide: bool):
    req, tally = scope.req, Tally()
    try:
        async for chunk in it:
            if _stamp(req, dialect, chunk, tally) == -1 and hide:
                continue
            yield chunk
    except GeneratorExit:
        if own and req.state != "finished":
            req.cancel("stream closed before its end")
        raise
    except BaseException as e:
        _failed(scope, own, e)
        raise
    _succeeded(scope, own, tally)


def _status(reply: Any) -> Optional[int]:
    response = getattr(reply, "http_response", None) or getattr(reply, "response", None)
    status = getattr(response, "status_code", None)
    return status if isinstance(status, int) else None


class _Call:
    """One call's stamping, around the SDK's own `_post` (sync or async)."""

    __slots__ = ("scope", "own", "dialect", "streamed", "hide", "stream_fn", "done")

    def __init__(self, rec: Any, dialect: Dialect, kwargs: dict, stream_fn: Callable) -> None:
        self.scope, self.own = _begin(rec)
        self.dialect = dialect
        self.streamed = kwargs.get("stream") is True
        self.hide = dialect.prepare(kwargs.get("body")) if self.streamed else False
        self.stream_fn = stream_fn
        self.done = False

    def failed(self, exc: BaseException) -> None:
        _failed(self.scope, self.own, exc)

    def replied(self, reply: Any) -> Any:
        if hasattr(reply, "http_response") and callable(getattr(reply, "parse", None)):
            return self._raw(reply)
        return self._parsed(reply, _status(reply) or 200)

    def _parsed(self, reply: Any, status: int) -> Any:
        if self.done:  # a raw response parsed again returns its cached object
            return reply
        self.done = True
        req = self.scope.req
        if req.state != "finished":
            req.http_status(status)
        if self.streamed and hasattr(reply, "_iterator"):
            reply._iterator = self.stream_fn(
                reply._iterator, self.scope, self.own, self.dialect, self.hide
            )
        else:
            tally = Tally()
            self.dialect.whole(reply, tally)
            # The output arrived at once: its first and last token are now.
            if req.state != "finished":
                req.tokens(0)
            _succeeded(self.scope, self.own, tally)
        return reply

    def _raw(self, raw: Any) -> Any:
        """`with_raw_response` / `with_streaming_response`: stamped when parsed (the
        SDK caches the parsed object, so the caller gets the stamped one)."""
        parse, status = raw.parse, _status(raw) or 200
        if inspect.iscoroutinefunction(parse):

            async def async_parse(*args: Any, **kwargs: Any) -> Any:
                return self._parsed(await parse(*args, **kwargs), status)

            raw.parse = async_parse
        else:

            def sync_parse(*args: Any, **kwargs: Any) -> Any:
                return self._parsed(parse(*args, **kwargs), status)

            raw.parse = sync_parse
        return raw


def _dialect_of(dialects: Dict[str, Dialect], args: tuple, kwargs: dict) -> Optional[Dialect]:
    path = args[0] if args else kwargs.get("path")
    if not isinstance(path, str):
        return None
    return dialects.get(path.split("?", 1)[0])


def wrap(resource: Any, rec: Any, dialects: Dict[str, Dialect], is_async: bool) -> None:
    """Stamps the calls `resource` posts to the paths of `dialects` on `rec`. A
    resource wrapped before keeps its wrapper and records on `rec` from now on."""
    setattr(resource, _TARGET, rec)
    if getattr(resource, _WRAPPED, False):
        return
    post = resource._post

    if is_async:

        @functools.wraps(post)
        async def async_post(*args: Any, **kwargs: Any) -> Any:
            dialect = _dialect_of(dialects, args, kwargs)
            if dialect is None:
                return await post(*args, **kwargs)
            call = _Call(getattr(resource, _TARGET), dialect, kwargs, _async_stream)
            try:
                reply = await post(*args, **kwargs)
            except BaseException as e:
                call.failed(e)
                raise
            return call.replied(reply)

        resource._post = async_post
    else:

        @functools.wraps(post)
        def sync_post(*args: Any, **kwargs: Any) -> Any:
            dialect = _dialect_of(dialects, args, kwargs)
            if dialect is None:
                return post(*args, **kwargs)
            call = _Call(getattr(resource, _TARGET), dialect, kwargs, _sync_stream)
            try:
                reply = post(*args, **kwargs)
            except BaseException as e:
                call.failed(e)
                raise
            return call.replied(reply)

        resource._post = sync_post
    setattr(resource, _WRAPPED, True)


def is_async_client(client: Any) -> bool:
    """The SDKs name their async clients `Async…` (`AsyncOpenAI`, `AsyncAnthropic`)."""
    return any(c.__name__.startswith("Async") for c in type(client).__mro__)
