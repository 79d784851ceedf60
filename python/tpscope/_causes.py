"""Exceptions to failure causes (docs/design.md §7's closed list, `tpscope.CAUSES`).

Matched by class name along the exception's MRO (and `status_code` for HTTP
errors), so the openai and anthropic SDKs (same class names), httpx and asyncio
are recognised without importing any of them.
"""

from __future__ import annotations

import asyncio
from typing import Optional

# Most specific first: the first name found in the MRO decides.
_BY_NAME = {
    "CancelledError": "cancelled",
    "KeyboardInterrupt": "cancelled",
    "GeneratorExit": "cancelled",
    "RateLimitError": "http_429",
    "APITimeoutError": "timeout_total",
    "ConnectTimeout": "timeout_connect",
    "ReadTimeout": "timeout_stall",
    "WriteTimeout": "timeout_total",
    "PoolTimeout": "timeout_total",
    "TimeoutException": "timeout_total",
    "TimeoutError": "timeout_total",
    "RemoteProtocolError": "disconnect",
    "ReadError": "disconnect",
    "ConnectionResetError": "disconnect",
    "BrokenPipeError": "disconnect",
    "IncompleteRead": "disconnect",
    "ConnectError": "connect",
    "APIConnectionError": "connect",
    "ConnectionError": "connect",
    "APIResponseValidationError": "malformed",
    "JSONDecodeError": "malformed",
}


def _status_cause(status: int) -> Optional[str]:
    if status == 429:
        return "http_429"
    if 400 <= status < 500:
        return "http_4xx"
    if 500 <= status < 600:
        return "http_5xx"
    return None


def _chain(exc: BaseException) -> list:
    """The exception and what it was raised from (`__cause__`, else
    `__context__`), outermost first, without cycles."""
    chain: list = []
    e: Optional[BaseException] = exc
    while e is not None and len(chain) < 16 and all(e is not c for c in chain):
        chain.append(e)
        e = e.__cause__ if e.__cause__ is not None else e.__context__
    return chain


def http_status_of(exc: BaseException) -> Optional[int]:
    """The HTTP status an exception carries (`status_code`, or its response's)."""
    status = getattr(exc, "status_code", None)
    if status is None:
        response = getattr(exc, "response", None)
        status = getattr(response, "status_code", None)
    return status if isinstance(status, int) else None


def _by_name(exc: BaseException) -> Optional[str]:
    for cls in type(exc).__mro__:
        if cls.__name__ in ("APIStatusError", "HTTPStatusError"):
            return None
        cause = _BY_NAME.get(cls.__name__)
        if cause is not None:
            return cause
    return None


def cause_of(exc: BaseException) -> str:
    """The failure cause of an exception raised by a request: an HTTP status error
    by its status (429, 4xx, 5xx), timeouts and connection errors by kind,
    cancellation as `cancelled`. The exceptions it was raised from are read first,
    innermost first: an SDK's `APIConnectionError` raised from httpx's
    `RemoteProtocolError` (a stream the server cut) is a `disconnect`, not a
    `connect`. An error the SDK raised for an error event inside a stream is
    `http_5xx` (the server failed mid-response); any other exception (the caller's
    own code failing on the reply) is `malformed`."""
    if isinstance(exc, asyncio.CancelledError):
        return "cancelled"
    names = [c.__name__ for c in type(exc).__mro__]
    if "APIStatusError" not in names and "HTTPStatusError" not in names:
        for inner in reversed(_chain(exc)):
            cause = _by_name(inner)
            if cause is not None:
                return cause
    status = http_status_of(exc)
    if status is not None:
        by_status = _status_cause(status)
        if by_status is not None:
            return by_status
    if "APIError" in names:
        return "http_5xx"
    return "malformed"


def message_of(exc: BaseException) -> str:
    """The exception's type and message, shortened (no request content is added)."""
    text = f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__
    return text if len(text) <= 300 else text[:297] + "..."
