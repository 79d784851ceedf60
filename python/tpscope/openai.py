"""Instrumentation of the official `openai` SDK (sync `OpenAI` and `AsyncOpenAI`):

    client = tpscope.openai.instrument(openai.AsyncOpenAI(...), rec)

Each `chat.completions.create` and `completions.create`, streamed or not, stamps
the request of the enclosing `rec.request(...)` block (or becomes a span of its
own): first and last token, output chunks, `usage`, the response id, and a failure's
cause. A streamed call that did not ask for `stream_options.include_usage` gets it
added, and the extra usage-only chunk is not passed on. What the caller receives is
otherwise the SDK's own objects, unchanged.
"""

from __future__ import annotations

from typing import Any, TypeVar

from ._instrument import Dialect, Tally, wrap

__all__ = ["instrument"]

C = TypeVar("C")


def _output(choice: Any) -> bool:
    delta = getattr(choice, "delta", None)
    if delta is None:  # completions: the text is on the choice
        return bool(getattr(choice, "text", None))
    if getattr(delta, "content", None) or getattr(delta, "tool_calls", None):
        return True
    if getattr(delta, "refusal", None):
        return True
    # Reasoning servers (vLLM, DeepSeek) add these beside `content`.
    extra = getattr(delta, "model_extra", None) or {}
    return bool(extra.get("reasoning_content") or extra.get("reasoning"))


class OpenAIDialect(Dialect):
    def prepare(self, kwargs: dict) -> bool:
        opts = kwargs.get("stream_options")
        if isinstance(opts, dict) and opts.get("include_usage"):
            return False
        kwargs["stream_options"] = {**(opts if isinstance(opts, dict) else {}), "include_usage": True}
        return True

    def chunk(self, chunk: Any, tally: Tally) -> int:
        if tally.rid is None:
            tally.rid = getattr(chunk, "id", None)
        usage = getattr(chunk, "usage", None)
        if usage is not None:
            tally.output = getattr(usage, "completion_tokens", None)
            tally.input = getattr(usage, "prompt_tokens", None)
        choices = getattr(chunk, "choices", None) or []
        if not choices:
            return -1 if usage is not None else 0
        return 1 if any(_output(c) for c in choices) else 0

    def whole(self, reply: Any, tally: Tally) -> None:
        tally.rid = getattr(reply, "id", None)
        usage = getattr(reply, "usage", None)
        if usage is not None:
            tally.output = getattr(usage, "completion_tokens", None)
            tally.input = getattr(usage, "prompt_tokens", None)


_DIALECT = OpenAIDialect()


def instrument(client: C, rec: Any) -> C:
    """Stamps `client`'s chat and text completions on `rec` (a tpscope.Recorder);
    returns the same client. Instrumenting twice does nothing more."""
    for resource in (client.chat.completions, client.completions):  # type: ignore[attr-defined]
        wrap(resource, rec, _DIALECT)
    return client
