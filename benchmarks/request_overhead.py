"""vLLM V1's API server and `vllm bench serve`: their CPU time per new request, on the CPU with
the engine's own code.

Before a request reaches the engine core, the one API server process accepts its HTTP
connection, validates the completions body, tokenizes the prompt, turns it into the engine's
request (`Processor.process_inputs`), registers its output state (`OutputProcessor.add_request`)
and sends it over ZMQ (msgpack). The benchmark client, one asyncio process, opens a new
`aiohttp.ClientSession` and connection for every request and posts it. Both are serial: when a
run sends its requests at once (`--request-rate inf`, no `--max-concurrency`), the k-th request
reaches the engine k times the slower of the two after the first. This measures, at the ShareGPT
mean prompt (215 tokens; the in-process part at 2,000 tokens too, for tokenizing's share):

- the API server's work in process: `CompletionRequest` validation, tokenizing,
  `to_sampling_params`, `process_inputs`, `add_request` and the msgpack encoding, per request,
  and tokenizing alone (which runs on the server's tokenizer thread, beside its event loop);
- HTTP, server side: uvicorn (uvloop, httptools) and FastAPI accepting a new connection,
  reading the JSON body and starting a two-chunk stream: the server process's CPU seconds per
  request;
- the client: `vllm bench serve`'s request loop (POST, reading the stream to its end) in both
  shapes: the 2024 script's new `aiohttp.ClientSession` per request, and the one session of
  `vllm bench serve` (0.10 on), here opening as many connections as a burst does: the client
  process's CPU seconds per request.

The tokenizer is the synthetic byte-level BPE of frontend_overhead.py.

    # in a virtual environment with vllm==X --no-deps, a CPU torch, transformers 4.x,
    # uvicorn[standard], aiohttp and what the imports ask for
    python benchmarks/request_overhead.py

It appends one JSON line per run to benchmarks/data/host-overhead.jsonl.
"""

from __future__ import annotations

import asyncio
import json
import random
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from frontend_overhead import synthetic_tokenizer  # same folder: the script's own sys.path[0]
from host_overhead import append_record, build, process_cpu_s, server_script_args

PROMPT_TOKENS = 215  # the ShareGPT prompts' mean (presets/workloads/sharegpt.yaml)
LONG_PROMPT_TOKENS = 2000
TIMED_REQUESTS = 2000
HTTP_REQUESTS = 1000
RUNS = 5
OUT = Path(__file__).parent / "data" / "host-overhead.jsonl"
# A Llama-shaped config for ModelConfig (the processor reads its limits, not its weights)
LLAMA = {
    "architectures": ["LlamaForCausalLM"],
    "model_type": "llama",
    "hidden_size": 4096,
    "intermediate_size": 14336,
    "num_attention_heads": 32,
    "num_key_value_heads": 8,
    "num_hidden_layers": 32,
    "vocab_size": 32000,
    "max_position_embeddings": 8192,
    "rms_norm_eps": 1e-5,
    "torch_dtype": "bfloat16",
}
CHUNK = 'data: {"id":"cmpl-0","object":"text_completion","choices":[{"index":0,"text":" x"}]}\n\n'


def prompt_text(tokenizer: Any, tokens: int) -> str:
    """Random vocabulary decoded to a text of about `tokens` tokens."""
    rng = random.Random(2)
    ids = [rng.randrange(3, tokenizer.vocab_size) for _ in range(tokens)]
    return str(tokenizer.decode(ids))


def tokenize_us(folder: Path, prompt_tokens: int) -> tuple[float, int]:
    """Tokenizing one prompt alone, microseconds (the median of RUNS), and its token count:
    the API server runs it on its own thread (0.10: AsyncMicrobatchTokenizer, one worker,
    batches of up to 32 prompts, which the Rust tokenizer encodes on several cores)."""
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(str(folder))
    text = prompt_text(tokenizer, prompt_tokens)
    runs = []
    for _ in range(RUNS):
        start = time.perf_counter()
        for _ in range(TIMED_REQUESTS // 4):
            tokenizer(text)
        runs.append((time.perf_counter() - start) / (TIMED_REQUESTS // 4) * 1e6)
    return statistics.median(runs), len(tokenizer(text).input_ids)


def in_process_us(folder: Path, prompt_tokens: int) -> float:
    """The API server's own work per request (no HTTP), microseconds: the median of RUNS."""
    import vllm.platforms as platforms
    from vllm.config import ModelConfig, VllmConfig
    from vllm.entrypoints.openai.protocol import CompletionRequest
    from vllm.platforms.cpu import CpuPlatform
    from vllm.sampling_params import RequestOutputKind
    from vllm.transformers_utils.tokenizer_group import TokenizerGroup
    from vllm.v1.engine.output_processor import OutputProcessor, RequestOutputCollector
    from vllm.v1.engine.processor import Processor
    from vllm.v1.serial_utils import MsgpackEncoder

    platforms._current_platform = CpuPlatform()
    (folder / "config.json").write_text(json.dumps(LLAMA))
    config = VllmConfig(model_config=ModelConfig(model=str(folder), max_model_len=8192))
    group = TokenizerGroup(str(folder), enable_lora=False, max_num_seqs=256, max_input_length=None)
    processor = Processor(config, group)
    outputs = OutputProcessor(group, log_stats=False)
    encoder = MsgpackEncoder()
    tokenizer = group.tokenizer
    body = {"model": "m", "prompt": prompt_text(tokenizer, prompt_tokens), "max_tokens": 200}
    body |= {"stream": True, "ignore_eos": True}
    runs = []
    for run in range(RUNS):
        start = time.perf_counter()
        for i in range(TIMED_REQUESTS):
            request = CompletionRequest(**body)
            ids = tokenizer(request.prompt).input_ids
            params = request.to_sampling_params(max_tokens=200, logits_processor_pattern=None)
            params.output_kind = RequestOutputKind.DELTA
            rid = f"{run}-{i}"
            _, core = processor.process_inputs(rid, {"prompt_token_ids": ids}, params)
            queue = build(RequestOutputCollector, output_kind=params.output_kind, request_id=rid)
            outputs.add_request(core, None, None, 0, queue)
            encoder.encode(core)
        runs.append((time.perf_counter() - start) / TIMED_REQUESTS * 1e6)
        outputs.abort_requests([f"{run}-{i}" for i in range(TIMED_REQUESTS)])
    return statistics.median(runs)


def serve(port: int) -> None:
    """The HTTP side: a FastAPI app that reads a JSON body and streams two chunks (a child)."""
    import uvicorn
    from fastapi import FastAPI, Request
    from fastapi.responses import StreamingResponse

    app = FastAPI()

    @app.post("/v1/completions")
    async def completions(request: Request) -> StreamingResponse:
        await request.json()

        async def chunks() -> Any:
            yield CHUNK
            yield "data: [DONE]\n\n"

        return StreamingResponse(chunks(), media_type="text/event-stream")

    uvicorn.run(app, host="127.0.0.1", port=port, log_level="warning")


async def bench_requests(port: int, n: int, prompt: str, shared: bool) -> None:
    """The benchmark's request loop, as its completions request function runs it: the POST, the
    stream read line by line to [DONE]; in a new aiohttp session per request (the 2024 script)
    or in one session for the run (`vllm bench serve`)."""
    import aiohttp

    timeout = aiohttp.ClientTimeout(total=6 * 60 * 60)
    payload = {"model": "m", "prompt": prompt, "max_tokens": 200, "stream": True}
    url = f"http://127.0.0.1:{port}/v1/completions"

    async def post(session: Any) -> None:
        async with session.post(url=url, json=payload) as response:
            async for chunk in response.content:
                line = chunk.strip().decode("utf-8").removeprefix("data: ")
                if line and line != "[DONE]":
                    json.loads(line)

    async def own_session() -> None:
        async with aiohttp.ClientSession(trust_env=True, timeout=timeout) as session:
            await post(session)

    if not shared:
        await asyncio.gather(*[own_session() for _ in range(n)])
        return
    connector = aiohttp.TCPConnector(limit=0, limit_per_host=0, keepalive_timeout=60)
    async with aiohttp.ClientSession(connector=connector, trust_env=True, timeout=timeout) as s:
        await asyncio.gather(*[post(s) for _ in range(n)])


def http_us(prompt: str, shared: bool, port: int = 18124) -> tuple[float, float]:
    """Server and client CPU microseconds per request over HTTP: the median of RUNS."""
    child = subprocess.Popen([sys.executable, __file__, "--serve", str(port)])
    try:
        time.sleep(3)
        server, client = [], []
        for _ in range(RUNS):
            s0, c0 = process_cpu_s(child.pid), time.process_time()
            asyncio.run(bench_requests(port, HTTP_REQUESTS, prompt, shared))
            server.append((process_cpu_s(child.pid) - s0) / HTTP_REQUESTS * 1e6)
            client.append((time.process_time() - c0) / HTTP_REQUESTS * 1e6)
        return statistics.median(server), statistics.median(client)
    finally:
        child.terminate()


def main() -> None:
    args = server_script_args(__doc__ or "", OUT)
    if args.serve:
        serve(args.serve)
        return
    import vllm
    from transformers import AutoTokenizer

    with tempfile.TemporaryDirectory() as tmp:
        synthetic_tokenizer(Path(tmp))
        prompt = prompt_text(AutoTokenizer.from_pretrained(tmp), PROMPT_TOKENS)
        work = in_process_us(Path(tmp), PROMPT_TOKENS)
        long_work = in_process_us(Path(tmp), LONG_PROMPT_TOKENS)
        tok, tokens = tokenize_us(Path(tmp), PROMPT_TOKENS)
        long_tok, long_tokens = tokenize_us(Path(tmp), LONG_PROMPT_TOKENS)
    server, client_2024 = http_us(prompt, shared=False)
    _, client = http_us(prompt, shared=True)
    print(f"API server: {work:.1f} us in process ({long_work:.1f} at {LONG_PROMPT_TOKENS} tokens)")
    print(f"of which tokenizing {tok:.1f} us ({tokens} tokens), {long_tok:.1f} ({long_tokens})")
    print(f"API server: {server:.1f} us HTTP per request")
    print(f"client: {client_2024:.1f} us per request (new session), {client:.1f} (one session)")
    append_record(
        args.out,
        "V1 API server and vllm bench serve client: CPU time per new request",
        "vllm",
        vllm.__version__,
        prompt_tokens=PROMPT_TOKENS,
        long_prompt_tokens=LONG_PROMPT_TOKENS,
        api_server_in_process_us_per_request=round(work, 1),
        api_server_in_process_us_per_long_request=round(long_work, 1),
        prompt_token_ids=tokens,
        long_prompt_token_ids=long_tokens,
        tokenize_us_per_request=round(tok, 1),
        tokenize_us_per_long_request=round(long_tok, 1),
        api_server_http_us_per_request=round(server, 1),
        client_new_session_us_per_request=round(client_2024, 1),
        client_one_session_us_per_request=round(client, 1),
    )


if __name__ == "__main__":
    main()
