"""Instrumentation of the official `openai` SDK (sync `OpenAI` and `AsyncOpenAI`):

    client = tpscope.openai.instrument(openai.AsyncOpenAI(...), rec)

Every call to chat completions, text completions and the Responses API stamps the
request of the enclosing `rec.request(...)` block (or becomes a span of its own):
`create` streamed or not, the `.stream()` and `.parse()` helpers,
`with_raw_response` and `with_streaming_response` (stamped when parsed). A span
gets its first and last token, output chunks, `usage`, the response id, the HTTP
status and a failure's cause. A streamed chat or text completion that did not ask
for `stream_options.include_usage` gets it added, and the extra usage-only chunk is
not passed on. What the caller receives is otherwise the SDK's own objects.
"""

from __future__ import annotations

from typing import Any, TypeVar

from ._instrument import Dialect, Tally, is_async_client, wrap

__all__ = ["instrument"]

C = TypeVar("C")


def _output(choice: Any, tally: Tally) -> bool:
    delta = getattr(choice, "delta", None)
    if delta is None:  # completions: the text is on the choice
        text = getattr(choice, "text", None)
        if text:
            tally.text.append(text)
        return bool(text)
    content = getattr(delta, "content", None)
    if content:
        tally.text.append(content)
        return True
    if getattr(delta, "tool_calls", None) or getattr(delta, "refusal", None):
        return True
    # Reasoning servers (vLLM, DeepSeek) add these beside `content`.
    extra = getattr(delta, "model_extra", None) or {}
    reasoning = extra.get("reasoning_content") or extra.get("reasoning")
    if isinstance(reasoning, str) and reasoning:
        tally.text.append(reasoning)
    return bool(reasoning)


class CompletionsDialect(Dialect):
    """`/chat/completions` and `/completions`: chunks with `choices`, usage last."""

    def prepare(self, body: Any) -> bool:
        if not isinstance(body, dict):
            return False
        opts = body.get("stream_options")
        if isinstance(opts, dict) and opts.get("include_usage"):
            return False
        body["stream_options"] = {**(opts if isinstance(opts, dict) else {}), "include_usage": True}
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
        hits = [_output(c, tally) for c in choices]
        return 1 if any(hits) else 0

    def whole(self, reply: Any, tally: Tally) -> None:
        tally.rid = getattr(reply, "id", None)
        usage = getattr(reply, "usage", None)
        if usage is not None:
            tally.output = getattr(usage, "completion_tokens", None)
            tally.input = getattr(usage, "prompt_tokens", None)
        for c in getattr(reply, "choices", None) or []:
            message = getattr(c, "message", None)
            text = getattr(message, "content", None) if message is not None else getattr(c, "text", None)
            if isinstance(text, str) and text:
                tally.text.append(text)


class ResponsesDialect(Dialect):
    """`/responses`: typed events; `*.delta` events carry output, the final
    `response.completed` carries usage."""

    def chunk(self, event: Any, tally: Tally) -> int:
        kind = getattr(event, "type", None) or ""
        if kind.endswith(".delta"):
            delta = getattr(event, "delta", None)
            if isinstance(delta, str) and delta:
                tally.text.append(delta)
            return 1
        response = getattr(event, "response", None)
        if response is not None:
            tally.rid = getattr(response, "id", None) or tally.rid
            usage = getattr(response, "usage", None)
            if usage is not None:
                tally.output = getattr(usage, "output_tokens", None)
                tally.input = getattr(usage, "input_tokens", None)
        return 0

    def whole(self, reply: Any, tally: Tally) -> None:
        tally.rid = getattr(reply, "id", None)
        usage = getattr(reply, "usage", None)
        if usage is not None:
            tally.output = getattr(usage, "output_tokens", None)
            tally.input = getattr(usage, "input_tokens", None)
        text = getattr(reply, "output_text", None)
        if isinstance(text, str) and text:
            tally.text.append(text)


_COMPLETIONS = CompletionsDialect()
_RESPONSES = ResponsesDialect()


def instrument(client: C, rec: Any) -> C:
    """Stamps `client`'s chat completions, text completions and Responses API calls
    on `rec` (a tpscope.Recorder); returns the same client. Instrumenting it again
    (with a new recorder) sends its calls to that recorder from then on."""
    is_async = is_async_client(client)
    resources = [
        (client.chat.completions, {"/chat/completions": _COMPLETIONS}),  # type: ignore[attr-defined]
        (client.completions, {"/completions": _COMPLETIONS}),  # type: ignore[attr-defined]
    ]
    responses = getattr(client, "responses", None)
    if responses is not None:
        resources.append((responses, {"/responses": _RESPONSES}))
    for resource, dialects in resources:
        wrap(resource, rec, dialects, is_async)
    return client
