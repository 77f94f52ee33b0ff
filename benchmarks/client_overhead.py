"""The benchmark client's CPU time per streamed chunk, with the clients' own code on this CPU.

`vllm bench serve` and SGLang's `bench_serving` run every request of a benchmark in one
asyncio process: for each chunk of each stream, aiohttp reads the line and the request
function decodes it, parses its JSON and takes the timestamps the benchmark reports. When B
requests stream at once, the client has B chunks to handle per engine step; if that takes
longer than the step, the client reads the tokens late and the ITL, TPOT and duration it
prints are its own pace, not the engine's. This measures that per-chunk time:

- a child process serves B streaming responses from a plain asyncio socket server, one chunk
  per request per "step", the steps paced slower than the client so that it keeps up (one
  chunk per read, as when it is not the bottleneck);
- this process runs the client's own request function (vLLM: `async_request_openai_completions`
  on the TCPConnector `vllm bench serve` builds; SGLang: `async_request_sglang_generate`, a
  session per request, its native `/generate` stream) for the B requests, and its CPU time
  over two runs of different lengths gives the time per chunk, connection set-up excluded.

vLLM's chunks carry one token's text (a delta). SGLang's native stream carries the whole text
and every output id so far (`incremental_streaming_output` off, the default), so its chunks
grow with the output; the SGLang client is timed at 0, 500 and 2,000 tokens generated.

    # in a virtual environment with vllm==X (or sglang==X) --no-deps and aiohttp
    python benchmarks/client_overhead.py --client vllm|sglang

It appends one JSON line to benchmarks/data/host-overhead.jsonl.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import subprocess
import sys
import time
from pathlib import Path

from host_overhead import append_record  # same folder: the script's own sys.path[0]

OUT = Path(__file__).parent / "data" / "host-overhead.jsonl"
BATCHES = (64, 256, 1024)
GENERATED = (0, 500, 2000)  # SGLang: tokens already in each chunk's text
SHORT_STEPS, LONG_STEPS = 20, 120  # two runs; their difference is (LONG - SHORT) x B chunks
# The server's pause between steps per request in the step: slower than either client, so the
# client reads one chunk per stream per step (microseconds)
PACE_US_PER_CHUNK = 150
PORT = 18231
VLLM_CHUNK = (
    'data: {"id":"cmpl-0123456789abcdef","object":"text_completion","created":1700000000,'
    '"model":"m","choices":[{"index":0,"text":" word","logprobs":null,"finish_reason":null,'
    '"stop_reason":null}],"usage":null}\n\n'
)
VLLM_USAGE = (
    'data: {"id":"cmpl-0123456789abcdef","object":"text_completion","created":1700000000,'
    '"model":"m","choices":[],"usage":{"prompt_tokens":200,"total_tokens":%d,'
    '"completion_tokens":%d}}\n\n'
)
# SGLang 0.5.13's native stream chunk as its TokenizerManager writes it (dumps_json of the
# output dict; captured with benchmarks/sglang_frontend_overhead.py's bare manager)
SGLANG_META = (
    '{"id":"r0","finish_reason":null,"prompt_tokens":200,"weight_version":"default",'
    '"num_retractions":0,"reasoning_tokens":0,"completion_tokens":%d,"cached_tokens":0,'
    '"response_sent_to_client_ts":1796269204.4901402}'
)
HEADERS = (
    b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\nconnection: close\r\n"
    b"cache-control: no-cache\r\n\r\n"
)


def chunk(client: str, generated: int) -> bytes:
    """The stream chunk carrying the `generated`-th token."""
    if client == "vllm":
        return VLLM_CHUNK.encode()
    text = json.dumps(" word" * generated)
    ids = json.dumps([7] * generated, separators=(",", ":"))
    body = f'{{"text":{text},"output_ids":{ids},"meta_info":{SGLANG_META % generated}}}'
    return f"data: {body}\n\n".encode()


def serve(client: str, batch: int, steps: int, start: int) -> None:
    """The child: accept `batch` requests, then stream `steps` chunks to each, paced."""

    async def run() -> None:
        ready: list[asyncio.StreamWriter] = []
        all_in = asyncio.Event()

        async def accept(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            head = await reader.readuntil(b"\r\n\r\n")
            length = 0
            for line in head.split(b"\r\n"):
                if line.lower().startswith(b"content-length:"):
                    length = int(line.split(b":")[1])
            await reader.readexactly(length)
            writer.write(HEADERS)
            ready.append(writer)
            if len(ready) == batch:
                all_in.set()

        server = await asyncio.start_server(accept, "127.0.0.1", PORT, backlog=4096)
        print("ready", flush=True)
        await all_in.wait()
        pace_s = batch * PACE_US_PER_CHUNK / 1e6
        for k in range(steps):
            data = chunk(client, start + k + 1)
            for writer in ready:
                writer.write(data)
            await asyncio.sleep(pace_s)
        tail = (VLLM_USAGE % (200 + steps, steps)).encode() if client == "vllm" else b""
        for writer in ready:
            writer.write(tail + b"data: [DONE]\n\n")
            writer.close()
        server.close()

    asyncio.run(run())


def client_cpu_s(client: str, batch: int, steps: int, start: int) -> float:
    """This process's CPU seconds to run `batch` streams of `steps` chunks with the client's
    own request function."""
    child = subprocess.Popen(
        [sys.executable, __file__, "--serve", client, str(batch), str(steps), str(start)],
        stdout=subprocess.PIPE,
        text=True,
    )
    assert child.stdout is not None
    if child.stdout.readline().strip() != "ready":
        raise RuntimeError(f"the chunk server did not start (port {PORT} in use?)")
    url = f"http://127.0.0.1:{PORT}"
    try:
        if client == "vllm":
            spent = asyncio.run(_vllm(url, batch, steps))
        else:
            spent = asyncio.run(_sglang(url, batch, steps))
    except BaseException:
        child.terminate()
        raise
    child.wait(timeout=600)
    return spent


async def _vllm(url: str, batch: int, steps: int) -> float:
    import aiohttp
    from vllm.benchmarks.lib.endpoint_request_func import (
        RequestFuncInput,
        async_request_openai_completions,
    )

    # the session `vllm bench serve` opens (vllm/benchmarks/serve.py)
    connector = aiohttp.TCPConnector(limit=batch, limit_per_host=batch, force_close=False)
    async with aiohttp.ClientSession(
        connector=connector, timeout=aiohttp.ClientTimeout(total=6 * 60 * 60)
    ) as session:
        request = RequestFuncInput(
            prompt="hi", api_url=f"{url}/v1/completions", prompt_len=200, output_len=steps,
            model="m", ignore_eos=True,
        )  # fmt: skip
        before = time.process_time()
        outs = await asyncio.gather(
            *[async_request_openai_completions(request, session) for _ in range(batch)]
        )
        spent = time.process_time() - before
    assert all(o.success and o.output_tokens == steps for o in outs), outs[0].error
    return spent


async def _sglang(url: str, batch: int, steps: int) -> float:
    import sglang.bench_serving as bench

    bench.args = argparse.Namespace(
        temperature=0.0, disable_ignore_eos=False, top_p=1.0, disable_stream=False,
        return_logprob=False, return_routed_experts=False, logprob_start_len=-1,
        top_logprobs_num=0, token_ids_logprob=None,
    )  # fmt: skip
    request = bench.RequestFuncInput(
        prompt="hi", api_url=f"{url}/generate", prompt_len=200, output_len=steps, model="m",
        lora_name="", image_data=None, extra_request_body={},
    )  # fmt: skip
    before = time.process_time()
    outs = await asyncio.gather(
        *[bench.async_request_sglang_generate(request) for _ in range(batch)]
    )
    spent = time.process_time() - before
    assert all(o.success for o in outs), outs[0].error
    return spent


def us_per_chunk(client: str, batch: int, start: int) -> float:
    """Client CPU per chunk (us): the longer run's extra chunks over the extra CPU time."""
    short = client_cpu_s(client, batch, SHORT_STEPS, start)
    long = client_cpu_s(client, batch, LONG_STEPS, start)
    return (long - short) / ((LONG_STEPS - SHORT_STEPS) * batch) * 1e6


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--client", choices=("vllm", "sglang"))
    parser.add_argument("--out", type=Path, default=OUT)
    parser.add_argument("--serve", nargs=4, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.serve:
        client, batch, steps, start = args.serve
        serve(client, int(batch), int(steps), int(start))
        return
    if args.client is None:
        parser.error("--client is required")
    # the client's module first: an import error surfaces before a server is started
    if args.client == "vllm":
        import vllm as package
        import vllm.benchmarks.lib.endpoint_request_func  # noqa: F401

        starts: tuple[int, ...] = (0,)
    else:
        import sglang as package
        import sglang.bench_serving

        starts = GENERATED
    result: dict[str, dict[str, float]] = {}
    for start in starts:
        row = result[str(start)] = {}
        for batch in BATCHES:
            row[str(batch)] = round(us_per_chunk(args.client, batch, start), 2)
            print(f"generated {start:5d}  B {batch:5d}  {row[str(batch)]:6.2f} us per chunk")
    append_record(
        args.out,
        f"benchmark client ({args.client}): CPU per streamed chunk, by tokens generated so far "
        "and batch",
        args.client,
        package.__version__,
        us_per_chunk=result,
    )


if __name__ == "__main__":
    main()
