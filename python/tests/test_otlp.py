"""The OTLP export, read by a loopback receiver with the official
`opentelemetry-proto` package (the OTLP/JSON body parsed into an
ExportTraceServiceRequest, hex ids turned into the bytes the proto holds): spans of
the Python Recorder and of `tpscope proxy` arrive as GenAI spans; a dead collector
costs the export, not the log, and close() says so. Also `sample_heartbeat=`."""

from __future__ import annotations

import base64
import json
import re
import signal
import socket
import subprocess
import threading
import time
import urllib.request
from http.server import BaseHTTPRequestHandler

import pytest

import tpscope
from conftest import records, serve, tpscope_bin

json_format = pytest.importorskip("google.protobuf.json_format")
trace_service = pytest.importorskip("opentelemetry.proto.collector.trace.v1.trace_service_pb2")


class Collector:
    """What a loopback OTLP/HTTP receiver got: (path, headers, body) per POST."""

    def __init__(self) -> None:
        self.got = []
        self.lock = threading.Lock()

    def handler(self):
        collector = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self):
                body = self.rfile.read(int(self.headers["Content-Length"]))
                with collector.lock:
                    collector.got.append((self.path, dict(self.headers), body))
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", "2")
                self.end_headers()
                self.wfile.write(b"{}")

            def log_message(self, *args):
                pass

        return Handler

    def requests(self):
        """Each body as the official proto's ExportTraceServiceRequest."""
        with self.lock:
            return [parse(body) for _, _, body in self.got]

    def spans(self):
        return [s for r in self.requests() for rs in r.resource_spans for ss in rs.scope_spans for s in ss.spans]


def parse(body: bytes):
    """OTLP/JSON into the proto: the JSON mapping writes trace and span ids as hex,
    where protobuf's JSON holds bytes as base64."""
    doc = json.loads(body)
    for rs in doc.get("resourceSpans", []):
        for ss in rs.get("scopeSpans", []):
            for s in ss.get("spans", []):
                for k in ("traceId", "spanId", "parentSpanId"):
                    if s.get(k):
                        s[k] = base64.b64encode(bytes.fromhex(s[k])).decode()
    return json_format.ParseDict(doc, trace_service.ExportTraceServiceRequest())


def attrs(span) -> dict:
    out = {}
    for kv in span.attributes:
        v = kv.value
        kind = v.WhichOneof("value")
        out[kv.key] = [x.string_value for x in v.array_value.values] if kind == "array_value" else getattr(v, kind)
    return out


def closed_port() -> str:
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return f"http://127.0.0.1:{port}"


def test_recorder_spans_are_genai_spans_to_the_official_proto(tmp_path):
    collector = Collector()
    with serve(collector.handler()) as url:
        path = tmp_path / "r.jsonl"
        rec = tpscope.Recorder(
            path, model="m-1", url="http://10.1.2.3:8000/v1", api="chat",
            otlp_endpoint=url, otlp_headers={"authorization": "Bearer s3cret"},
        )
        ok = rec.queued("ok")
        ok.admitted()
        ok.first_token()
        ok.tokens(3)
        ok.finish_ok(output_tokens=12, input_tokens=7)
        bad = rec.queued("bad")
        bad.admitted()
        bad.finish_err("http_5xx", "upstream unavailable")
        counts = rec.close()
    assert counts["not_exported"] == 0 and rec.otlp_warning is None
    assert all(p == "/v1/traces" and h.get("authorization") == "Bearer s3cret" for p, h, _ in collector.got)
    spans = {attrs(s)["tpscope.request_id"]: s for s in collector.spans()}
    assert set(spans) == {"ok", "bad"}
    ok, bad = spans["ok"], spans["bad"]
    a = attrs(ok)
    assert ok.name == "chat m-1" and ok.kind == 3  # SPAN_KIND_CLIENT
    assert len(ok.trace_id) == 16 and len(ok.span_id) == 8
    assert a["gen_ai.operation.name"] == "chat"
    assert a["gen_ai.request.model"] == "m-1"
    assert (a["gen_ai.usage.output_tokens"], a["gen_ai.usage.input_tokens"]) == (12, 7)
    assert (a["server.address"], a["server.port"]) == ("10.1.2.3", 8000)
    logged = {s["request_id"]: s for s in records(path, "span")}
    assert a["tpscope.span_id"] == logged["ok"]["span_id"]
    events = [e.name for e in ok.events]
    assert events[:2] == ["tpscope.queued", "tpscope.admitted"]
    assert "tpscope.first_token" in events and events[-1] == "tpscope.released"
    assert bad.status.code == 2 and bad.status.message == "upstream unavailable"
    assert attrs(bad)["error.type"] == "http_5xx"


def test_a_dead_collector_costs_the_export_not_the_log_and_close_warns(tmp_path):
    path = tmp_path / "d.jsonl"
    rec = tpscope.Recorder(path, otlp_endpoint=closed_port())
    for i in range(2):
        r = rec.queued(f"r{i}")
        r.admitted()
        r.finish_ok(output_tokens=1)
    with pytest.warns(RuntimeWarning, match=r"otlp: 2 spans not exported \(connecting: connection refused"):
        counts = rec.close()
    assert (counts["spans"], counts["not_exported"]) == (2, 2)
    assert len(records(path, "span")) == 2 and len(records(path, "end")) == 1


def test_bad_otlp_arguments_name_the_keyword(tmp_path):
    with pytest.raises(tpscope.TpscopeError, match="otlp_endpoint: .*https is not supported"):
        tpscope.Recorder(tmp_path / "a.jsonl", otlp_endpoint="https://otel.example.com")
    with pytest.raises(tpscope.TpscopeError, match="otlp_headers: given without otlp_endpoint"):
        tpscope.Recorder(tmp_path / "b.jsonl", otlp_headers={"a": "b"})


def test_the_proxys_spans_are_genai_spans_to_the_official_proto(tmp_path, start_sim):
    sim = start_sim()
    collector = Collector()
    out = tmp_path / "p.jsonl"
    with serve(collector.handler()) as url:
        proxy = subprocess.Popen(
            [tpscope_bin(), "proxy", "--upstream", sim.base_url.rsplit("/v1", 1)[0], "--listen", "127.0.0.1:0",
             "--out", str(out), "--server-metrics", "off", "--otlp-endpoint", url],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        )
        try:
            line = proxy.stdout.readline()
            addr = re.search(r"http://(\S+)", line).group(1)
            for i in range(3):
                body = json.dumps({"model": sim.model, "stream": True, "max_tokens": 8,
                                   "messages": [{"role": "user", "content": f"hi {i}"}]}).encode()
                req = urllib.request.Request(f"http://{addr}/v1/chat/completions", data=body,
                                             headers={"Content-Type": "application/json"})
                with urllib.request.urlopen(req, timeout=30) as resp:
                    resp.read()
        finally:
            proxy.send_signal(signal.SIGTERM)
            _, err = proxy.communicate(timeout=30)
        assert proxy.returncode == 0, err
    assert "otlp:" not in err
    logged = {s["span_id"]: s for s in records(out, "span")}
    spans = collector.spans()
    assert len(spans) == len(logged) == 3
    for s in spans:
        a = attrs(s)
        assert a["gen_ai.usage.output_tokens"] == logged[a["tpscope.span_id"]]["output_tokens"] > 0
        assert a["server.address"] == "127.0.0.1"
        assert "tpscope.first_token" in [e.name for e in s.events]


def test_sample_heartbeat_writes_an_idle_recorders_samples_per_heartbeat(tmp_path):
    path = tmp_path / "h.jsonl"
    rec = tpscope.Recorder(path, sample_interval="1ms", sample_heartbeat="100ms")
    time.sleep(0.6)
    counts = rec.close()
    assert records(path, "run")[0]["sample_heartbeat_s"] == 0.1
    # About 600 ticks idle: a sample per heartbeat (6), the first and the last.
    assert 3 <= counts["samples"] <= 20, counts
    with pytest.raises(tpscope.TpscopeError, match="sample_heartbeat"):
        tpscope.Recorder(tmp_path / "x.jsonl", sample_heartbeat="often")
