#!/usr/bin/env python3
"""A small OpenAI-compatible server that decodes on a GPU with Hugging Face transformers.

For checking tpscope's GPU energy figures on a machine without vLLM: the tokens come
from a real transformer's forward passes on the GPU, so the power and energy that
`--gpu-metrics` reads belong to the work being measured. Static batching: the engine
takes up to `--max-batch` waiting requests, prefills them together (left-padded) and
decodes greedily until the longest is done; requests that arrive meanwhile wait for
the next batch. EOS is ignored: every request gets `max_tokens` tokens.

    --model-dir DIR      tokenizer.json (and, with --size dir, config + weights)
    --size dir|1b        dir: the model in DIR; 1b: a randomly initialised
                         1.1B-parameter Llama (TinyLlama's shape) in bf16

Serves POST /v1/completions and /v1/chat/completions (streamed or not, usage in the
last chunk with stream_options.include_usage), GET /v1/models and /health.
"""

import argparse
import asyncio
import json
import queue
import threading
import time
import uuid

import torch
from aiohttp import web
from tokenizers import Tokenizer


def load_model(args, vocab: int):
    from transformers import AutoModelForCausalLM, LlamaConfig, LlamaForCausalLM

    dev = torch.device(args.device)
    if args.size == "dir":
        model = AutoModelForCausalLM.from_pretrained(args.model_dir)
        return model.to(dev).eval()
    cfg = LlamaConfig(
        vocab_size=vocab,
        hidden_size=2048,
        intermediate_size=5632,
        num_hidden_layers=22,
        num_attention_heads=32,
        num_key_value_heads=4,
        max_position_embeddings=4096,
    )
    with dev:
        model = LlamaForCausalLM(cfg).to(torch.bfloat16)
    return model.eval()


class Engine:
    """One thread runs batches; each request gets its tokens through an asyncio queue."""

    def __init__(self, model, tok, max_batch, device):
        self.model, self.tok, self.max_batch = model, tok, max_batch
        self.device = torch.device(device)
        self.waiting = queue.Queue()
        self.steps = 0

    def start(self):
        threading.Thread(target=self.run, daemon=True).start()

    def submit(self, ids, max_tokens, loop, out):
        self.waiting.put((ids, max_tokens, loop, out))

    def run(self):
        while True:
            batch = [self.waiting.get()]
            while len(batch) < self.max_batch:
                try:
                    batch.append(self.waiting.get_nowait())
                except queue.Empty:
                    break
            try:
                self.decode(batch)
            except Exception as e:  # a failed batch fails its requests, not the server
                for _, _, loop, out in batch:
                    loop.call_soon_threadsafe(out.put_nowait, e)

    @torch.inference_mode()
    def decode(self, batch):
        b = len(batch)
        width = max(len(ids) for ids, *_ in batch)
        inp = torch.zeros((b, width), dtype=torch.long)
        mask = torch.zeros((b, width), dtype=torch.long)
        for i, (ids, *_) in enumerate(batch):
            inp[i, width - len(ids):] = torch.tensor(ids)
            mask[i, width - len(ids):] = 1
        inp, mask = inp.to(self.device), mask.to(self.device)
        pos = (mask.cumsum(-1) - 1).clamp(min=0)
        out = self.model(input_ids=inp, attention_mask=mask, position_ids=pos, use_cache=True)
        longest = max(m for _, m, *_ in batch)
        for step in range(longest):
            nxt = out.logits[:, -1].argmax(-1)
            toks = nxt.tolist()
            self.steps += 1
            for i, (_, m, loop, q) in enumerate(batch):
                if step < m:
                    loop.call_soon_threadsafe(q.put_nowait, toks[i])
                if step == m - 1:
                    loop.call_soon_threadsafe(q.put_nowait, None)
            if step == longest - 1:
                break
            mask = torch.cat([mask, torch.ones((b, 1), dtype=mask.dtype, device=self.device)], 1)
            pos = pos[:, -1:] + 1
            out = self.model(input_ids=nxt[:, None], attention_mask=mask, position_ids=pos,
                             past_key_values=out.past_key_values, use_cache=True)


class _Discard:
    """A stand-in event loop for the warm-up batch, whose tokens go nowhere."""

    def call_soon_threadsafe(self, *_args):
        pass


def prompt_of(body, chat):
    if chat:
        return "\n".join(str(m.get("content", "")) for m in body.get("messages", []))
    p = body.get("prompt", "")
    return p if isinstance(p, str) else " ".join(map(str, p))


def make_app(engine, tok, name):
    async def models(_req):
        return web.json_response({"object": "list", "data": [{"id": name, "object": "model"}]})

    async def health(_req):
        return web.Response(text="ok")

    async def complete(req, chat):
        body = await req.json()
        ids = tok.encode(prompt_of(body, chat)).ids or [1]
        max_tokens = int(body.get("max_tokens") or body.get("max_completion_tokens") or 16)
        q = asyncio.Queue()
        engine.submit(ids, max_tokens, asyncio.get_running_loop(), q)
        rid, created = f"cmpl-{uuid.uuid4().hex}", int(time.time())
        kind = "chat.completion.chunk" if chat else "text_completion"
        usage = {"prompt_tokens": len(ids), "completion_tokens": max_tokens,
                 "total_tokens": len(ids) + max_tokens}

        def choice(text, finish):
            if chat:
                return {"index": 0, "delta": {"content": text}, "finish_reason": finish}
            return {"index": 0, "text": text, "logprobs": None, "finish_reason": finish}

        if not body.get("stream"):
            pieces = []
            while (t := await q.get()) is not None:
                if isinstance(t, Exception):
                    raise web.HTTPInternalServerError(text=str(t))
                pieces.append(t)
            text = tok.decode(pieces)
            c = ({"index": 0, "message": {"role": "assistant", "content": text},
                  "finish_reason": "length"} if chat else choice(text, "length"))
            return web.json_response({"id": rid, "object": kind.removesuffix(".chunk"),
                                      "created": created, "model": name, "choices": [c],
                                      "usage": usage})
        resp = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
        await resp.prepare(req)

        async def send(obj):
            await resp.write(b"data: " + json.dumps(obj).encode() + b"\n\n")

        n = 0
        while (t := await q.get()) is not None:
            if isinstance(t, Exception):
                break
            n += 1
            finish = "length" if n == max_tokens else None
            await send({"id": rid, "object": kind, "created": created, "model": name,
                        "choices": [choice(tok.decode([t]), finish)]})
        if (body.get("stream_options") or {}).get("include_usage"):
            await send({"id": rid, "object": kind, "created": created, "model": name,
                        "choices": [], "usage": usage})
        await resp.write(b"data: [DONE]\n\n")
        return resp

    app = web.Application()
    app.router.add_get("/v1/models", models)
    app.router.add_get("/health", health)
    app.router.add_post("/v1/completions", lambda r: complete(r, False))
    app.router.add_post("/v1/chat/completions", lambda r: complete(r, True))
    return app


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model-dir", required=True)
    ap.add_argument("--size", choices=["dir", "1b"], default="dir")
    ap.add_argument("--name", default="tiny-llama")
    ap.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    ap.add_argument("--max-batch", type=int, default=8)
    ap.add_argument("--port", type=int, default=8000)
    args = ap.parse_args()
    tok = Tokenizer.from_file(f"{args.model_dir}/tokenizer.json")
    model = load_model(args, tok.get_vocab_size())
    engine = Engine(model, tok, args.max_batch, args.device)
    # One warm-up batch so the first measured request does not pay for CUDA's start.
    engine.decode([([1, 2, 3], 4, _Discard(), asyncio.Queue())])
    engine.start()
    print(f"serving {args.name} ({args.size}) on {args.device}, port {args.port}", flush=True)
    web.run_app(make_app(engine, tok, args.name), host="127.0.0.1", port=args.port,
                print=None)


if __name__ == "__main__":
    main()
