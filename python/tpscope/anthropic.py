"""Instrumentation of the official `anthropic` SDK (sync `Anthropic` and
`AsyncAnthropic`):

    client = tpscope.anthropic.instrument(anthropic.AsyncAnthropic(...), rec)

Each `messages.create`, streamed or not, stamps the request of the enclosing
`rec.request(...)` block (or becomes a span of its own): first and last token (the
`content_block_delta` events), output chunks, usage (`message_start`'s input tokens,
`message_delta`'s output tokens), the message id, and a failure's cause. The caller
receives the SDK's own objects, unchanged.
"""

from __future__ import annotations

from typing import Any, TypeVar

from ._instrument import Dialect, Tally, wrap

__all__ = ["instrument"]

C = TypeVar("C")


class AnthropicDialect(Dialect):
    def chunk(self, event: Any, tally: Tally) -> int:
        kind = getattr(event, "type", None)
        if kind == "content_block_delta":
            return 1
        if kind == "message_start":
            message = getattr(event, "message", None)
            tally.rid = getattr(message, "id", None)
            usage = getattr(message, "usage", None)
            tally.input = getattr(usage, "input_tokens", None)
        elif kind == "message_delta":
            usage = getattr(event, "usage", None)
            if usage is not None:
                tally.output = getattr(usage, "output_tokens", None)
                if getattr(usage, "input_tokens", None) is not None:
                    tally.input = usage.input_tokens
        return 0

    def whole(self, reply: Any, tally: Tally) -> None:
        tally.rid = getattr(reply, "id", None)
        usage = getattr(reply, "usage", None)
        if usage is not None:
            tally.output = getattr(usage, "output_tokens", None)
            tally.input = getattr(usage, "input_tokens", None)


_DIALECT = AnthropicDialect()


def instrument(client: C, rec: Any) -> C:
    """Stamps `client.messages.create` on `rec` (a tpscope.Recorder); returns the
    same client. Instrumenting twice does nothing more."""
    wrap(client.messages, rec, _DIALECT)  # type: ignore[attr-defined]
    return client
