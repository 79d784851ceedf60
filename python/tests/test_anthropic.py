"""The official anthropic SDK, instrumented, against a loopback server that speaks
the Messages API's event stream (tpscope sim speaks OpenAI's): usage, first token
and the message id land in the span, and the caller's events are unchanged."""

from __future__ import annotations

import asyncio
import json
from http.server import BaseHTTPRequestHandler

import pytest

import tpscope
import tpscope.anthropic
from conftest import records, ts_ns, serve

anthropic = pytest.importorskip("anthropic")

WORDS = ["Rivers", " carve", " valleys", " slowly", "."]


def events(n, output_tokens=len(WORDS)):
    yield "message_start", {"type": "message_start", "message": {
        "id": f"msg_{n}", "type": "message", "role": "assistant", "model": "m", "content": [],
        "stop_reason": None, "stop_sequence": None, "usage": {"input_tokens": 11, "output_tokens": 1}}}
    yield "content_block_start", {"type": "content_block_start", "index": 0,
                                  "content_block": {"type": "text", "text": ""}}
    for w in WORDS:
        yield "content_block_delta", {"type": "content_block_delta", "index": 0,
                                      "delta": {"type": "text_delta", "text": w}}
    yield "content_block_stop", {"type": "content_block_stop", "index": 0}
    yield "message_delta", {"type": "message_delta", "delta": {"stop_reason": "end_turn", "stop_sequence": None},
                            "usage": {"output_tokens": output_tokens}}
    yield "message_stop", {"type": "message_stop"}


class Handler(BaseHTTPRequestHandler):
    count = 0

    def log_message(self, *args):
        pass

    def do_POST(self):
        body = json.loads(self.rfile.read(int(self.headers["content-length"])))
        Handler.count += 1
        if body.get("stream"):
            self.send_response(200)
            self.send_header("content-type", "text/event-stream")
            self.end_headers()
            # Model "zero": a server whose usage counts no output (a bug seen in the wild).
            output = 0 if body.get("model") == "zero" else len(WORDS)
            for name, data in events(Handler.count, output):
                self.wfile.write(f"event: {name}\ndata: {json.dumps(data)}\n\n".encode())
                self.wfile.flush()
            return
        reply = json.dumps({"id": f"msg_{Handler.count}", "type": "message", "role": "assistant", "model": "m",
                            "content": [{"type": "text", "text": "".join(WORDS)}], "stop_reason": "end_turn",
                            "stop_sequence": None, "usage": {"input_tokens": 11, "output_tokens": 5}}).encode()
        self.send_response(200)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(reply)))
        self.end_headers()
        self.wfile.write(reply)


@pytest.fixture
def server():
    with serve(Handler) as url:
        yield url


def test_messages_streams_and_replies_become_spans_with_usage(tmp_path, server):
    path = tmp_path / "t.jsonl"
    rec = tpscope.Recorder(path, cap=2)
    sync = tpscope.anthropic.instrument(anthropic.Anthropic(base_url=server, api_key="k", max_retries=0), rec)
    args = dict(model="m", max_tokens=16, messages=[{"role": "user", "content": "rivers?"}])
    with rec.request("streamed") as r:
        r.admitted()
        seen = list(sync.messages.create(**args, stream=True))
    assert [e.type for e in seen].count("content_block_delta") == len(WORDS) and len(seen) == 10
    reply = sync.messages.create(**args)
    assert reply.usage.output_tokens == 5

    async def in_async():
        client = tpscope.anthropic.instrument(
            anthropic.AsyncAnthropic(base_url=server, api_key="k", max_retries=0), rec)
        async with rec.request("async-streamed"):
            stream = await client.messages.create(**args, stream=True)
            async for _ in stream:
                pass
        await client.close()

    asyncio.run(in_async())
    rec.close()
    spans = {s["request_id"]: s for s in records(path, "span")}
    for name in ("streamed", "async-streamed"):
        s = spans[name]
        assert (s["status"], s["output_tokens"], s["input_tokens"], s["token_source"]) == ("ok", 5, 11, "usage")
        assert ts_ns(s["first_token_at"]) <= ts_ns(s["last_token_at"])
        assert s["attempts"][0]["tokens"] == 5
    own = spans["msg_2"]  # outside a block: named by the message id
    assert (own["output_tokens"], own["input_tokens"]) == (5, 11)


def spans_of(path):
    return {s["request_id"]: s for s in records(path, "span")}


def test_the_stream_helper_and_raw_responses_are_recorded(tmp_path, server):
    path = tmp_path / "t.jsonl"
    rec = tpscope.Recorder(path, cap=2)
    sync = tpscope.anthropic.instrument(anthropic.Anthropic(base_url=server, api_key="k", max_retries=0), rec)
    args = dict(model="m", max_tokens=16, messages=[{"role": "user", "content": "rivers?"}])
    with rec.request("helper"):
        with sync.messages.stream(**args) as stream:
            text = "".join(stream.text_stream)
    assert text == "".join(WORDS)
    with rec.request("raw"):
        raw = sync.messages.with_raw_response.create(**args)
        assert raw.parse().usage.output_tokens == 5
    with rec.request("raw-streamed"):
        raw = sync.messages.with_raw_response.create(**args, stream=True)
        assert sum(e.type == "content_block_delta" for e in raw.parse()) == len(WORDS)
    with rec.request("streaming-response"):
        with sync.messages.with_streaming_response.create(**args, stream=True) as response:
            assert sum(e.type == "content_block_delta" for e in response.parse()) == len(WORDS)

    async def in_async():
        client = tpscope.anthropic.instrument(
            anthropic.AsyncAnthropic(base_url=server, api_key="k", max_retries=0), rec)
        async with rec.request("async-helper"):
            async with client.messages.stream(**args) as stream:
                message = await stream.get_final_message()
        assert message.usage.output_tokens == 5
        await client.close()

    asyncio.run(in_async())
    rec.close()
    spans = spans_of(path)
    for name in ("helper", "raw", "raw-streamed", "streaming-response", "async-helper"):
        s = spans[name]
        assert (s["status"], s["output_tokens"], s["input_tokens"], s["token_source"]) == (
            "ok", 5, 11, "usage"), name
        assert s["attempts"][0]["http_status"] == 200, name
        assert "first_token_at" in s, name
    assert spans["helper"]["attempts"][0]["tokens"] == 5


def test_usage_of_zero_for_streamed_text_is_counted_by_the_tokenizer_with_a_warning(tmp_path, server):
    path = tmp_path / "t.jsonl"
    rec = tpscope.Recorder(path, cap=2)
    client = tpscope.anthropic.instrument(anthropic.Anthropic(base_url=server, api_key="k", max_retries=0), rec)
    args = dict(model="zero", max_tokens=16, messages=[{"role": "user", "content": "rivers?"}])
    with pytest.warns(RuntimeWarning, match="usage says 0 output tokens"):
        with rec.request("zero"):
            list(client.messages.create(**args, stream=True))
    rec.close()
    s = spans_of(path)["zero"]
    assert s["status"] == "ok"
    assert s["token_source"].startswith("tokenizer")
    assert s["output_tokens"] > 0
