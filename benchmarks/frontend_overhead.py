"""vLLM V1's API server: its CPU time per streamed token, on the CPU with the engine's own code.

vLLM V1 runs the model in its engine-core process and streams from one API server process
(`--api-server-count` 1 unless data-parallel): for every token of every running request that
process decodes the engine's output message, detokenizes, builds the OpenAI stream chunk and
writes it to the client's connection. When a step's batch is large and the GPU fast, that work
outlasts the step and the client sees the API server's pace. This measures it in two parts:

- output processing: the engine's outputs for B requests (msgpack, as the engine core sends
  them) through `OutputProcessor.process_outputs` in chunks of 128 (as AsyncLLM's output
  handler runs it), each request's asyncio consumer woken to build its `CompletionStreamResponse`
  and serialize it, as the completions endpoint does; B = 1-1,024, one token each, per step;
- HTTP: a FastAPI `StreamingResponse` on uvicorn (uvloop, httptools: `vllm serve`'s stack)
  writing such chunks to B local connections: the server process's CPU seconds per chunk.

The tokenizer is a byte-level BPE of 32,000 tokens trained here on synthetic text (the
incremental detokenizer's cost per token depends little on the vocabulary).

    # in a virtual environment with vllm==X --no-deps, a CPU torch, transformers 4.x,
    # uvicorn[standard] and what the imports ask for
    python benchmarks/frontend_overhead.py [--stream-interval N]   # N: vLLM 0.12+

With --stream-interval N a request's output leaves every N tokens (after its first): the output
processing is timed over each such group of steps, per step.

It appends one JSON line per run to benchmarks/data/host-overhead.jsonl.
"""

from __future__ import annotations

import asyncio
import json
import random
import statistics
import string
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from host_overhead import (  # same folder: the script's own sys.path[0]
    append_record,
    build,
    process_cpu_s,
    server_script_args,
)

BATCHES = (1, 8, 32, 64, 128, 256, 512, 1024)
TIMED_STEPS = 40
PROMPT_TOKENS = 64
HTTP_CONNECTIONS = 256
HTTP_CHUNKS = 400
OUT = Path(__file__).parent / "data" / "host-overhead.jsonl"
# A completions stream chunk as vLLM writes it (its size is what uvicorn moves)
CHUNK = (
    'data: {"id":"cmpl-0123456789abcdef","object":"text_completion","created":1700000000,'
    '"model":"m","choices":[{"index":0,"text":" word","logprobs":null,"finish_reason":null,'
    '"stop_reason":null}],"usage":null}\n\n'
)


def synthetic_tokenizer(folder: Path) -> None:
    """A 32,000-token byte-level BPE trained on random words, saved for transformers."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

    rng = random.Random(0)
    letters = string.ascii_lowercase
    words = ["".join(rng.choices(letters, k=rng.randint(2, 10))) for _ in range(60_000)]
    lines = (" ".join(rng.choices(words, k=12)) + "." for _ in range(200_000))
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=32_000,
        special_tokens=["<s>", "</s>"],
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
    )
    tok.train_from_iterator(lines, trainer)
    tok.save(str(folder / "tokenizer.json"))
    config = {"tokenizer_class": "PreTrainedTokenizerFast", "bos_token": "<s>", "eos_token": "</s>"}
    (folder / "tokenizer_config.json").write_text(json.dumps(config))


def output_processor(folder: Path, batch: int, interval: int = 1) -> Any:
    """This release's OutputProcessor over the tokenizer in `folder`, emitting a request's
    output every `interval` tokens (--stream-interval, 0.12+)."""
    import inspect

    from vllm.v1.engine.output_processor import OutputProcessor

    if interval > 1 and "stream_interval" not in inspect.signature(OutputProcessor).parameters:
        raise SystemExit(f"--stream-interval: this vLLM has none (0.12+), asked {interval}")
    try:  # 0.8-0.10: a tokenizer group
        from vllm.transformers_utils.tokenizer_group import TokenizerGroup

        group = TokenizerGroup(
            str(folder), enable_lora=False, max_num_seqs=batch, max_input_length=None
        )
        return OutputProcessor(group, log_stats=False), group.tokenizer
    except ImportError:
        from vllm.tokenizers.registry import get_tokenizer

        tokenizer = get_tokenizer(str(folder))
        processor = build(
            OutputProcessor, tokenizer=tokenizer, log_stats=False, stream_interval=interval
        )
        return processor, tokenizer


async def output_steps(folder: Path, batch: int, interval: int = 1) -> list[float]:
    """Wall time (ms) of the API server's output work for one step of `batch` tokens; with
    `interval` > 1 each request's chunk leaves every `interval` steps (after its first token):
    the mean over such a group of steps."""
    try:
        from vllm.entrypoints.openai.protocol import (
            CompletionResponseStreamChoice,
            CompletionStreamResponse,
        )
    except ImportError:  # moved under completion/ in later releases
        from vllm.entrypoints.openai.completion.protocol import (
            CompletionResponseStreamChoice,
            CompletionStreamResponse,
        )
    from vllm.sampling_params import RequestOutputKind, SamplingParams
    from vllm.v1.engine import EngineCoreOutput, EngineCoreOutputs, EngineCoreRequest
    from vllm.v1.engine.output_processor import RequestOutputCollector
    from vllm.v1.serial_utils import MsgpackDecoder, MsgpackEncoder

    processor, tokenizer = output_processor(folder, batch, interval)
    rng = random.Random(1)
    vocab = tokenizer.vocab_size
    params = SamplingParams(
        max_tokens=100_000, ignore_eos=True, output_kind=RequestOutputKind.DELTA
    )
    collectors = {}
    for i in range(batch):
        request = build(
            EngineCoreRequest,
            request_id=str(i),
            external_req_id=str(i),
            prompt_token_ids=[rng.randrange(3, vocab) for _ in range(PROMPT_TOKENS)],
            mm_kwargs=None,
            mm_hashes=None,
            mm_placeholders=None,
            mm_features=None,
            sampling_params=params,
            pooling_params=None,
            eos_token_id=1,
            arrival_time=time.time(),
            lora_request=None,
            cache_salt=None,
            data_parallel_rank=None,
        )
        collector = build(
            RequestOutputCollector, output_kind=RequestOutputKind.DELTA, request_id=str(i)
        )
        processor.add_request(request, None, None, 0, collector)
        collectors[str(i)] = collector
    written: list[str] = []

    async def stream(request_id: str, collector: Any) -> None:
        while True:
            out = await collector.get()
            for o in out.outputs:
                choice = CompletionResponseStreamChoice(
                    index=0, text=o.text, logprobs=None, finish_reason=None, stop_reason=None
                )
                chunk = CompletionStreamResponse(
                    id=request_id, created=0, model="m", choices=[choice]
                )
                written.append(f"data: {chunk.model_dump_json(exclude_unset=False)}\n\n")

    tasks = [asyncio.create_task(stream(r, c)) for r, c in collectors.items()]
    encoder, decoder = MsgpackEncoder(), MsgpackDecoder(EngineCoreOutputs)
    times = []
    # the first token leaves at once, then one chunk a request every `interval` steps
    groups = [1] + [interval] * (TIMED_STEPS + 5)
    for group, steps in enumerate(groups):
        frames = [
            encoder.encode(
                EngineCoreOutputs(
                    outputs=[
                        EngineCoreOutput(request_id=str(i), new_token_ids=[rng.randrange(3, vocab)])
                        for i in range(batch)
                    ]
                )
            )
            for _ in range(steps)
        ]
        start = time.perf_counter()
        for frame in frames:
            got = decoder.decode(frame)
            for k in range(0, len(got.outputs), 128):
                processor.process_outputs(got.outputs[k : k + 128])
                await asyncio.sleep(0)
        ms = await until_written(written, batch, start)
        if group > 5:
            times.append(ms / steps)
    for task in tasks:
        task.cancel()
    return times


async def until_written(written: list[Any], batch: int, start: float) -> float:
    """Wait until every request's stream wrote its chunk for the step; the step's ms since
    `start` (the chunks are cleared for the next step)."""
    while len(written) < batch:
        await asyncio.sleep(0)
    ms = (time.perf_counter() - start) * 1e3
    written.clear()
    return ms


def serve_chunks(port: int) -> None:
    """The HTTP side: a FastAPI app streaming CHUNK n times per request (run in a child)."""
    import uvicorn
    from fastapi import FastAPI
    from fastapi.responses import StreamingResponse

    app = FastAPI()

    @app.get("/stream/{n}")
    async def stream(n: int) -> StreamingResponse:
        async def chunks() -> Any:
            for _ in range(n):
                yield CHUNK
                await asyncio.sleep(0)
            yield "data: [DONE]\n\n"

        return StreamingResponse(chunks(), media_type="text/event-stream")

    uvicorn.run(app, host="127.0.0.1", port=port, log_level="warning")


def http_us_per_chunk(port: int = 18123) -> float:
    """The streaming server's CPU time per chunk written, microseconds."""
    child = subprocess.Popen([sys.executable, __file__, "--serve", str(port)])

    async def read_one() -> int:
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        writer.write(f"GET /stream/{HTTP_CHUNKS} HTTP/1.1\r\nHost: x\r\n\r\n".encode())
        await writer.drain()
        seen = 0
        while data := await reader.read(65536):
            seen += data.count(b"data: ")
            if b"[DONE]" in data:
                break
        writer.close()
        return seen

    async def run() -> float:
        before = process_cpu_s(child.pid)
        seen = await asyncio.gather(*[read_one() for _ in range(HTTP_CONNECTIONS)])
        return (process_cpu_s(child.pid) - before) / sum(seen) * 1e6

    try:
        time.sleep(3)
        return asyncio.run(run())
    finally:
        child.terminate()


def main() -> None:
    args = server_script_args(__doc__ or "", OUT, stream_interval=True)
    if args.serve:
        serve_chunks(args.serve)
        return
    import vllm

    interval = args.stream_interval
    step_ms: dict[str, float] = {}
    with tempfile.TemporaryDirectory() as tmp:
        synthetic_tokenizer(Path(tmp))
        for batch in BATCHES:
            ms = statistics.median(asyncio.run(output_steps(Path(tmp), batch, interval)))
            step_ms[str(batch)] = round(ms, 4)
            print(f"B {batch:5d}  output processing {ms:8.3f} ms  {ms / batch * 1e3:6.2f} us/token")
    points = [(int(b), ms) for b, ms in step_ms.items() if int(b) >= 32]
    slope = statistics.linear_regression([b for b, _ in points], [ms for _, ms in points]).slope
    http = http_us_per_chunk()
    print(f"marginal: {slope * 1e3:.2f} us per token; HTTP {http:.2f} us per chunk")
    append_record(
        args.out,
        "V1 API server: output processing + stream chunk, and HTTP write per chunk",
        "vllm",
        vllm.__version__,
        **({"stream_interval": interval} if interval > 1 else {}),
        step_ms=step_ms,
        marginal_us_per_token=round(slope * 1e3, 2),
        http_us_per_chunk=round(http, 2),
    )


if __name__ == "__main__":
    main()
