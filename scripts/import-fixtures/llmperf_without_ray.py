"""LLMPerf's token benchmark (token_benchmark_ray.py, ray-project/llmperf at its
latest commit) with Ray's actors replaced by threads, because Ray's node cannot start
on the 2-core machine the fixture was made on ("The current node timed out during
startup"). Everything that measures or summarises is LLMPerf's own code: the
OpenAIChatCompletionsClient.llm_request method (called unmodified), the prompt
sampler, the per-request post-processing (copied line for line from
get_token_throughput_latencies) and metrics_summary; only the launcher differs
(num_concurrent_requests threads, each sending its next request when the previous
one ends, as RequestsLauncher's actor pool does).

usage: llmperf_without_ray.py MODEL N CONCURRENCY RESULTS_DIR
       (OPENAI_API_BASE, OPENAI_API_KEY and LLMPERF_TOKENIZER, a tokenizer folder, set)
"""
import json
import os
import random
import re
import sys
import threading
import time
from pathlib import Path

sys.argv, argv = sys.argv[:1], sys.argv[1:]
import token_benchmark_ray as tb  # noqa: E402  (LLMPerf's script; parses no args on import)
from llmperf import common_metrics  # noqa: E402
from llmperf.models import RequestConfig  # noqa: E402
from llmperf.ray_clients.openai_chat_completions_client import OpenAIChatCompletionsClient  # noqa: E402
from llmperf.utils import LLMPerfResults, randomly_sample_sonnet_lines_prompt, sample_random_positive_int  # noqa: E402

model, n, conc, results_dir = argv[0], int(argv[1]), int(argv[2]), argv[3]
mean_in, sd_in, mean_out, sd_out = 64, 8, 32, 4
random.seed(11111)
# LLMPerf loads hf-internal-testing/llama-tokenizer from the Hub, which cannot be
# reached here: the same class loads a local tokenizer.json instead.
tokenizer = tb.LlamaTokenizerFast.from_pretrained(os.environ["LLMPERF_TOKENIZER"])
get_token_length = lambda text: len(tokenizer.encode(text))  # noqa: E731
client = OpenAIChatCompletionsClient.__ray_metadata__.modified_class()
jobs = []
for _ in range(n):
    out = sample_random_positive_int(mean_out, sd_out)
    prompt = randomly_sample_sonnet_lines_prompt(
        tokenizer=tokenizer, prompt_tokens_mean=mean_in, prompt_tokens_stddev=sd_in, expect_output_tokens=out
    )
    jobs.append((prompt, out))

lock = threading.Lock()
completed = []
start_time = time.monotonic()


def worker():
    while True:
        with lock:
            if not jobs:
                return
            prompt, out = jobs.pop()
        cfg = RequestConfig(
            model=model, prompt=prompt, sampling_params={"max_tokens": out, "ignore_eos": True},
            sample_time=time.monotonic() - start_time, llm_api="openai",
        )
        request_metrics, gen_text, req_config = client.llm_request(cfg)
        # As get_token_throughput_latencies does with each finished request:
        num_output_tokens = get_token_length(gen_text)
        if num_output_tokens:
            request_metrics[common_metrics.INTER_TOKEN_LAT] /= num_output_tokens
        else:
            request_metrics[common_metrics.INTER_TOKEN_LAT] = 0
        request_metrics[common_metrics.NUM_OUTPUT_TOKENS] = num_output_tokens
        request_metrics[common_metrics.NUM_TOTAL_TOKENS] = request_metrics[common_metrics.NUM_INPUT_TOKENS] + num_output_tokens
        if request_metrics[common_metrics.E2E_LAT] > 0:
            request_metrics[common_metrics.REQ_OUTPUT_THROUGHPUT] = num_output_tokens / request_metrics[common_metrics.E2E_LAT]
        else:
            request_metrics[common_metrics.REQ_OUTPUT_THROUGHPUT] = 0
        with lock:
            completed.append(request_metrics)


threads = [threading.Thread(target=worker) for _ in range(conc)]
for t in threads:
    t.start()
for t in threads:
    t.join()
end_time = time.monotonic()
ret = tb.metrics_summary(completed, start_time, end_time)
summary = {"model": model, "mean_input_tokens": mean_in, "stddev_input_tokens": sd_in,
           "mean_output_tokens": mean_out, "stddev_output_tokens": sd_out,
           "num_concurrent_requests": conc, "additional_sampling_params": {"ignore_eos": True}, "results": ret}
filename = re.sub(r"-{2,}", "-", re.sub(r"[^\w\d-]+", "-", f"{model}_{mean_in}_{mean_out}"))
d = Path(results_dir)
d.mkdir(parents=True, exist_ok=True)
with open(d / f"{filename}_summary.json", "w") as f:
    json.dump(LLMPerfResults(name=f"{filename}_summary", metadata=summary).to_dict(), f, indent=4, default=str)
with open(d / f"{filename}_individual_responses.json", "w") as f:
    json.dump(completed, f, indent=4)
