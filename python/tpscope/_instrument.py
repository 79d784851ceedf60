"""Wrapping an SDK's `create` method (sync or async, streamed or not) so that each
call stamps its request: the one of the enclosing `request` block (found through
the context variable, so it works across `await`), or a span of its own, queued and
admitted at the call. The caller receives the SDK's own objects: a stream keeps its
class, only its iterator is wrapped.

An SDK module supplies a `Dialect`: how to ask for usage, which chunks carry output,
where usage and the response id are.
"""

from __future__ import annotations

import functools
import inspect
from typing import Any, Callable, Optional

from . import _current, _Scope
from ._causes import cause_of, message_of

_MARK = "__tpscope_instrumented__"


class Tally:
    """What one call's reply said: usage and the response id."""

    __slots__ = ("output", "input", "rid")

    def __init__(self) -> None:
        self.output: Optional[int] = None
        self.input: Optional[int] = None
        self.rid: Optional[str] = None


class Dialect:
    """One SDK's reply shapes; subclasses fill these in."""

    def prepare(self, kwargs: dict) -> bool:
        """Adjusts a streamed call's arguments; True when it added a usage-only
        chunk that the caller did not ask for (to be hidden)."""
        return False

    def chunk(self, chunk: Any, tally: Tally) -> int:
        """Reads one streamed chunk into `tally`; returns 1 if it carries output,
        0 if not, -1 if it is the usage-only chunk (no choices)."""
        raise NotImplementedError

    def whole(self, reply: Any, tally: Tally) -> None:
        """Reads a non-streamed reply into `tally`."""
        raise NotImplementedError


def _begin(rec: Any) -> tuple:
    """The scope a call stamps, and whether the call owns it (no enclosing block)."""
    scope = _current.get()
    if scope is None or scope.rec is not rec:
        scope = _Scope(rec, rec.queued(""))
        scope.req.admitted()
        return scope, True
    if scope.failed is not None:
        # The block tries again after a failed call: that call was an attempt.
        scope.req.retry(scope.failed[0])
        scope.failed = None
    scope.req.admitted()
    return scope, False


def _failed(scope: _Scope, own: bool, exc: BaseException) -> None:
    if own:
        scope.finish(exc)
    elif scope.req.state != "finished":
        scope.failed = (cause_of(exc), message_of(exc))


def _succeeded(scope: _Scope, own: bool, tally: Tally) -> None:
    if tally.rid is not None:
        scope.req.response_id(tally.rid)
    scope.add_usage(tally.output, tally.input)
    if own:
        scope.finish(None)


def _stamp(req: Any, dialect: Dialect, chunk: Any, tally: Tally) -> int:
    kind = dialect.chunk(chunk, tally)
    if kind == 1:
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


def _whole(reply: Any, scope: _Scope, own: bool, dialect: Dialect) -> None:
    tally = Tally()
    dialect.whole(reply, tally)
    # The output arrived at once: its first and last token are now.
    scope.req.tokens(0)
    _succeeded(scope, own, tally)


class _Call:
    """One call's stamping, around the SDK's own `create` (sync or async)."""

    __slots__ = ("scope", "own", "dialect", "streamed", "hide")

    def __init__(self, rec: Any, dialect: Dialect, kwargs: dict) -> None:
        self.scope, self.own = _begin(rec)
        self.dialect = dialect
        self.streamed = kwargs.get("stream") is True
        self.hide = dialect.prepare(kwargs) if self.streamed else False

    def failed(self, exc: BaseException) -> None:
        _failed(self.scope, self.own, exc)

    def replied(self, reply: Any, stream: Callable) -> Any:
        if self.streamed:
            reply._iterator = stream(reply._iterator, self.scope, self.own, self.dialect, self.hide)
        else:
            _whole(reply, self.scope, self.own, self.dialect)
        return reply


def wrap(resource: Any, rec: Any, dialect: Dialect) -> None:
    """Replaces `resource.create` with one stamped on `rec` (once)."""
    create = resource.create
    if getattr(create, _MARK, False):
        return
    # The SDKs' async `create` is wrapped by a sync decorator: ask the class.
    if inspect.iscoroutinefunction(create) or type(resource).__name__.startswith("Async"):

        @functools.wraps(create)
        async def async_create(*args: Any, **kwargs: Any) -> Any:
            call = _Call(rec, dialect, kwargs)
            try:
                reply = await create(*args, **kwargs)
            except BaseException as e:
                call.failed(e)
                raise
            return call.replied(reply, _async_stream)

        setattr(async_create, _MARK, True)
        resource.create = async_create
        return

    @functools.wraps(create)
    def sync_create(*args: Any, **kwargs: Any) -> Any:
        call = _Call(rec, dialect, kwargs)
        try:
            reply = create(*args, **kwargs)
        except BaseException as e:
            call.failed(e)
            raise
        return call.replied(reply, _sync_stream)

    setattr(sync_create, _MARK, True)
    resource.create = sync_create
