"""The openai SDK's Responses API, instrumented, against a loopback server that
speaks its event stream (tpscope sim speaks chat completions): the `*.delta` events
are the output, `response.completed` carries usage."""

from __future__ import annotations

import json
from http.server import BaseHTTPRequestHandler

import pytest

import tpscope
from conftest import records, ts_ns, serve

openai = pytest.importorskip("openai")

WORDS = ["Rivers", " carve", " valleys", "."]


def response(status, usage=None):
    r = {"id": "resp_1", "object": "response", "created_at": 0, "model": "m", "status": status,
         "output": [], "parallel_tool_calls": False, "tool_choice": "auto", "tools": []}
    if usage:
        r["usage"] = usage
    return r


USAGE = {"input_tokens": 7, "output_tokens": len(WORDS), "total_tokens": 7 + len(WORDS),
         "input_tokens_details": {"cached_tokens": 0}, "output_tokens_details": {"reasoning_tokens": 0}}


class Handler(BaseHTTPRequestHandler):
    def log_message(self, *args):
        pass

    def do_POST(self):
        body = json.loads(self.rfile.read(int(self.headers["content-length"])))
        if not body.get("stream"):
            reply = json.dumps(response("completed", USAGE)).encode()
            self.send_response(200)
            self.send_header("content-type", "application/json")
            self.send_header("content-length", str(len(reply)))
            self.end_headers()
            self.wfile.write(reply)
            return
        self.send_response(200)
        self.send_header("content-type", "text/event-stream")
        self.end_headers()
        events = [{"type": "response.created", "sequence_number": 0, "response": response("in_progress")}]
        for i, w in enumerate(WORDS):
            events.append({"type": "response.output_text.delta", "sequence_number": i + 1, "item_id": "m1",
                           "output_index": 0, "content_index": 0, "delta": w, "logprobs": []})
        events.append({"type": "response.completed", "sequence_number": 9,
                       "response": response("completed", USAGE)})
        for e in events:
            self.wfile.write(f"event: {e['type']}\ndata: {json.dumps(e)}\n\n".encode())
            self.wfile.flush()


@pytest.fixture
def server():
    with serve(Handler) as url:
        yield url + "/v1"


def test_responses_streams_and_replies_become_spans_with_usage(tmp_path, server):
    path = tmp_path / "t.jsonl"
    rec = tpscope.Recorder(path, cap=1)
    client = tpscope.openai.instrument(openai.OpenAI(base_url=server, api_key="k", max_retries=0), rec)
    with rec.request("streamed"):
        events = list(client.responses.create(model="m", input="rivers?", stream=True))
    assert [e.type for e in events].count("response.output_text.delta") == len(WORDS)
    with rec.request("whole"):
        client.responses.create(model="m", input="rivers?")
    rec.close()
    spans = {s["request_id"]: s for s in records(path, "span")}
    for name in ("streamed", "whole"):
        s = spans[name]
        assert (s["status"], s["output_tokens"], s["input_tokens"], s["token_source"]) == (
            "ok", len(WORDS), 7, "usage"), name
    assert spans["streamed"]["attempts"][0]["tokens"] == len(WORDS)
    assert ts_ns(spans["streamed"]["first_token_at"]) <= ts_ns(spans["streamed"]["last_token_at"])
