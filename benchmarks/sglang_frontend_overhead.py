"""SGLang's API server: its CPU time per streamed token, on the CPU with the engine's own code.

SGLang streams from its TokenizerManager (the HTTP server's process; a detokenizer process
feeds it decoded text). For every token of every running request it runs
`_handle_batch_output` (the per-request output dict) and wakes the request's
`_wait_one_response`, whose chunk the native `/generate` endpoint serializes with `dumps_json`
(what `bench_serving --backend sglang` reads). With `incremental_streaming_output` off (the
default) every chunk carries the whole text and every output id so far, so the work per token
grows with the output length; this times it at B = 32-1,024 requests and 0 / 500 / 2,000
tokens already generated, on a bare TokenizerManager (no sockets, no model). The HTTP write
(benchmarks/frontend_overhead.py measures uvicorn's) and the detokenizer process are not in it.

    # in a virtual environment with sglang==X --no-deps, a CPU torch, the transformers it pins
    # and what the imports ask for (its multimodal configs import torchvision at module load:
    # a stub package will do, nothing here calls it)
    python benchmarks/sglang_frontend_overhead.py

It appends one JSON line to benchmarks/data/host-overhead.jsonl. Measured, not yet in the step
model (docs/method.md §3: SGLang's API server is not priced).
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import statistics
import time
import types
from pathlib import Path
from typing import Any

from frontend_overhead import until_written  # same folder: the script's own sys.path[0]
from host_overhead import append_record

BATCHES = (32, 256, 1024)
GENERATED = (0, 500, 2000)
TIMED_STEPS = 40
OUT = Path(__file__).parent / "data" / "host-overhead.jsonl"
# BatchStrOutput fields that stay None when nothing asks for them (the rest: empty lists)
OPTIONAL_FIELDS = frozenset(
    {
        "load",
        "customized_info",
        "cached_tokens_details",
        "dp_ranks",
        "token_steps",
        "time_stats",
        "output_hidden_states",
        "routed_experts",
        "indexer_topk",
    }
)


def bare_tokenizer_manager() -> Any:
    """A TokenizerManager with only what streaming reads: default server settings."""
    from sglang.srt.disaggregation.utils import DisaggregationMode
    from sglang.srt.managers.tokenizer_manager import TokenizerManager

    manager = object.__new__(TokenizerManager)
    manager.server_args = types.SimpleNamespace(
        batch_notify_size=16,
        weight_version="default",
        skip_tokenizer_init=False,
        incremental_streaming_output=False,
        enable_lora=False,
        speculative_algorithm=None,
        tokenizer_worker_num=1,
        enable_trace=False,
    )
    manager.enable_metrics = False
    manager.rid_to_state = {}
    manager.disaggregation_mode = DisaggregationMode.NULL
    manager.dump_requests_folder = ""
    manager.crash_dump_folder = None
    return manager


def step_output(rids: list[str], generated: int) -> Any:
    """One decode step's BatchStrOutput: one token (" word") for each request."""
    from sglang.srt.managers.io_struct import BatchStrOutput

    n = len(rids)
    values: dict[str, Any] = {
        f.name: None if f.name in OPTIONAL_FIELDS else []
        for f in dataclasses.fields(BatchStrOutput)
    }
    values |= {
        "rids": rids,
        "finished_reasons": [None] * n,
        "output_strs": [" word"] * n,
        "output_ids": [[7] for _ in range(n)],
        "prompt_tokens": [200] * n,
        "completion_tokens": [generated] * n,
        "reasoning_tokens": [0] * n,
        "cached_tokens": [0] * n,
        "retraction_counts": [0] * n,
    }
    return BatchStrOutput(**values)


async def step_ms(batch: int, generated: int) -> float:
    """Median wall time (ms) of one step's streaming work for `batch` requests."""
    from sglang.srt.disaggregation.utils import DisaggregationMode
    from sglang.srt.managers.io_struct import GenerateReqInput
    from sglang.srt.managers.tokenizer_manager import ReqState
    from sglang.srt.observability.req_time_stats import APIServerReqTimeStats
    from sglang.srt.utils.json_response import dumps_json

    manager = bare_tokenizer_manager()
    written: list[bytes] = []

    async def stream(request: Any) -> None:
        async for out in manager._wait_one_response(request, None):
            written.append(b"data: " + dumps_json(out) + b"\n\n")

    tasks = []
    rids = [f"r{i}" for i in range(batch)]
    for rid in rids:
        request = GenerateReqInput(
            text="hi", sampling_params={"max_new_tokens": 100_000}, stream=True, rid=rid
        )
        stats = APIServerReqTimeStats(disagg_mode=DisaggregationMode.NULL)
        state = ReqState([], False, asyncio.Event(), request, stats)
        state.prompt_token_ids = None
        state.output_ids = [7] * generated
        state.text = " word" * generated
        manager.rid_to_state[rid] = state
        tasks.append(asyncio.create_task(stream(request)))
    await asyncio.sleep(0)
    times = []
    for step in range(TIMED_STEPS + 5):
        message = step_output(rids, generated + step)
        start = time.perf_counter()
        await manager._handle_batch_output(message)
        ms = await until_written(written, batch, start)
        if step >= 5:
            times.append(ms)
    for task in tasks:
        task.cancel()
    return statistics.median(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--out", type=Path, default=OUT)
    args = parser.parse_args()
    import sglang

    us_per_token: dict[str, dict[str, float]] = {}
    for generated in GENERATED:
        row = us_per_token[str(generated)] = {}
        for batch in BATCHES:
            ms = asyncio.run(step_ms(batch, generated))
            row[str(batch)] = round(ms / batch * 1e3, 2)
            print(
                f"generated {generated:5d}  B {batch:5d}  {ms:8.3f} ms  {row[str(batch)]} us/token"
            )
    append_record(
        args.out,
        "SGLang TokenizerManager: _handle_batch_output + _wait_one_response + dumps_json per "
        "streamed token (native /generate, non-incremental), by tokens generated so far and "
        "batch",
        "sglang",
        sglang.__version__,
        us_per_token=us_per_token,
    )


if __name__ == "__main__":
    main()
