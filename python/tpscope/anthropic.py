"""Instrumentation of the official `anthropic` SDK (sync `Anthropic` and
`AsyncAnthropic`):

    client = tpscope.anthropic.instrument(anthropic.AsyncAnthropic(...), rec)

Every Messages call stamps the request of the enclosing `rec.request(...)` block
(or becomes a span of its own): `messages.create` streamed or not, the
`messages.stream()` helper, `with_raw_response` and `with_streaming_response`
(stamped when parsed), and the same on `client.beta.messages`. A span gets its first
and last token (the `content_block_delta` events), output chunks, usage
(`message_start`'s input tokens, `message_delta`'s output tokens), the message id,
the HTTP status and a failure's cause. The caller receives the SDK's own objects.
"""

from __future__ import annotations

from typing import Any, TypeVar

from ._instrument import Dialect, Tally, is_async_client, wrap

__all__ = ["instrument"]

C = TypeVar("C")


class AnthropicDialect(Dialect):
    def chunk(self, event: Any, tally: Tally) -> int:
        kind = getattr(event, "type", None)
        if kind == "content_block_delta":
            delta = getattr(event, "delta", None)
            for field in ("text", "thinking", "partial_json"):
                text = getattr(delta, field, None)
                if isinstance(text, str) and text:
                    tally.text.append(text)
                    break
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
        for block in getattr(reply, "content", None) or []:
            text = getattr(block, "text", None)
            if isinstance(text, str) and text:
                tally.text.append(text)


_DIALECTS = {"/v1/messages": AnthropicDialect()}


def instrument(client: C, rec: Any) -> C:
    """Stamps `client`'s Messages calls on `rec` (a tpscope.Recorder); returns the
    same client. Instrumenting it again (with a new recorder) sends its calls to
    that recorder from then on."""
    is_async = is_async_client(client)
    wrap(client.messages, rec, _DIALECTS, is_async)  # type: ignore[attr-defined]
    beta = getattr(client, "beta", None)
    messages = getattr(beta, "messages", None) if beta is not None else None
    if messages is not None:
        wrap(messages, rec, _DIALECTS, is_async)
    return client
