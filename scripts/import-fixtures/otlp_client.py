"""Drive `tpscope sim` with the official OpenAI Python SDK instrumented by
opentelemetry-instrumentation-openai-v2, and write the finished spans as an
OTLP/JSON file (ExportTraceServiceRequest in proto3 JSON, trace and span ids
hex-encoded as the OTLP/JSON file format requires).

usage: otlp_client.py BASE_URL MODEL N OUT.json
"""
import base64
import json
import sys
from concurrent.futures import ThreadPoolExecutor

from google.protobuf.json_format import MessageToDict
from openai import OpenAI
from opentelemetry import trace
from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
from opentelemetry.instrumentation.openai_v2 import OpenAIInstrumentor
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor, SpanExporter, SpanExportResult

base_url, model, n, out = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4]
finished = []


class Collect(SpanExporter):
    def export(self, spans):
        finished.extend(spans)
        return SpanExportResult.SUCCESS


provider = TracerProvider()
provider.add_span_processor(SimpleSpanProcessor(Collect()))
trace.set_tracer_provider(provider)
OpenAIInstrumentor().instrument(tracer_provider=provider)

client = OpenAI(base_url=base_url, api_key="unused")


def one(i):
    stream = client.chat.completions.create(
        model=model,
        messages=[{"role": "user", "content": f"Request {i}: say something long."}],
        max_tokens=16 + 8 * (i % 5),
        stream=True,
        stream_options={"include_usage": True},
    )
    for _ in stream:
        pass
    # A non-streaming request too: spans without a first-chunk time.
    if i % 4 == 0:
        client.chat.completions.create(
            model=model,
            messages=[{"role": "user", "content": f"Request {i}b"}],
            max_tokens=8,
        )


with ThreadPoolExecutor(4) as pool:
    list(pool.map(one, range(n)))
provider.shutdown()

doc = MessageToDict(encode_spans(finished))


def hexify(obj):
    # proto3 JSON writes bytes as base64; OTLP/JSON wants hex trace/span ids.
    if isinstance(obj, dict):
        return {
            k: (base64.b64decode(v).hex() if k in ("traceId", "spanId", "parentSpanId") and v else hexify(v))
            for k, v in obj.items()
        }
    if isinstance(obj, list):
        return [hexify(v) for v in obj]
    return obj


with open(out, "w") as f:
    json.dump(hexify(doc), f, indent=1)
    f.write("\n")
print(f"wrote {len(finished)} spans to {out}")
