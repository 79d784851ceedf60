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


def cause_of(exc: BaseException) -> str:
    """The failure cause of an exception raised by a request: an HTTP status error
    by its status (429, 4xx, 5xx), timeouts and connection errors by kind,
    cancellation as `cancelled`. An error the SDK raised for an error event inside
    a stream is `http_5xx` (the server failed mid-response); any other exception
    (the caller's own code failing on the reply) is `malformed`."""
    if isinstance(exc, asyncio.CancelledError):
        return "cancelled"
    status = getattr(exc, "status_code", None)
    if status is None:
        response = getattr(exc, "response", None)
        status = getattr(response, "status_code", None)
    names = [c.__name__ for c in type(exc).__mro__]
    for name in names:
        if name == "APIStatusError" or name == "HTTPStatusError":
            break
        cause = _BY_NAME.get(name)
        if cause is not None:
            return cause
    if isinstance(status, int):
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
