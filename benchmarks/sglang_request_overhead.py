"""SGLang's API server: its CPU time per new request, on the CPU with the engine's own code.

SGLang's HTTP server and TokenizerManager share one process and one event loop. For each new
request on the native `/generate` endpoint (what `sglang.bench_serving --backend sglang`
posts) the loop normalizes the `GenerateReqInput`, registers its state, tokenizes the prompt
in line (the default: no `--enable-dynamic-batch-tokenizer`, one `--tokenizer-worker-num`),
builds the `TokenizedGenerateReqInput` (its sampling parameters normalized and checked) and
pickles it to the scheduler over ZMQ. None of it overlaps the next request's, so a burst
reaches the scheduler one such service apart. This times that path, and tokenizing alone, on a
bare TokenizerManager (no sockets, no model; the ZMQ send is the pickling it does) at the
ShareGPT mean prompt and at 2,000 tokens. HTTP (uvicorn and FastAPI accepting a connection and
a JSON body) is request_overhead.py's figure: SGLang serves on the same stack.

    # in a virtual environment with sglang==X --no-deps, a CPU torch, the transformers it pins
    # and what the imports ask for (see sglang_frontend_overhead.py)
    python benchmarks/sglang_request_overhead.py

It appends one JSON line to benchmarks/data/host-overhead.jsonl.
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import pickle
import statistics
import tempfile
import time
import types
from pathlib import Path
from typing import Any

from frontend_overhead import synthetic_tokenizer  # same folder: the script's own sys.path[0]
from host_overhead import append_record
from request_overhead import LONG_PROMPT_TOKENS, PROMPT_TOKENS, prompt_text

TIMED_REQUESTS = 500
RUNS = 7
OUT = Path(__file__).parent / "data" / "host-overhead.jsonl"


def bare_tokenizer_manager(folder: Path) -> Any:
    """A TokenizerManager with what the request path reads: default server settings, the
    synthetic tokenizer, a Llama-shaped model config and a socket that only pickles."""
    from sglang.srt import server_args as sa
    from sglang.srt.disaggregation.utils import DisaggregationMode
    from sglang.srt.managers.tokenizer_manager import TokenizerManager
    from sglang.srt.sampling.sampling_params import SamplingParams
    from transformers import AutoTokenizer

    args = sa.ServerArgs.__new__(sa.ServerArgs)
    for field in dataclasses.fields(sa.ServerArgs):
        if field.default is not dataclasses.MISSING:
            setattr(args, field.name, field.default)
        elif field.default_factory is not dataclasses.MISSING:
            setattr(args, field.name, field.default_factory())
    args.model_path = str(folder)
    sa.set_global_server_args_for_scheduler(args)
    manager = object.__new__(TokenizerManager)
    manager.server_args = args
    manager.tokenizer = AutoTokenizer.from_pretrained(str(folder))
    manager.model_config = types.SimpleNamespace(
        hf_config=types.SimpleNamespace(architectures=["LlamaForCausalLM"]),
        vocab_size=manager.tokenizer.vocab_size,
        is_multimodal=False,
    )
    fields = {
        "enable_metrics": False,
        "rid_to_state": {},
        "disaggregation_mode": DisaggregationMode.NULL,
        "async_dynamic_batch_tokenizer": None,
        "mm_processor": None,
        "context_len": 131072,
        "num_reserved_tokens": 0,
        "preferred_sampling_params": None,
        "sampling_params_class": SamplingParams,
        "enable_priority_scheduling": False,
        "default_priority_value": None,
        "fake_bootstrap_room_counter": 0,
        "validate_total_tokens": True,
        "max_req_input_len": None,
        "send_to_scheduler": types.SimpleNamespace(send_pyobj=pickle.dumps),
    }
    for name, value in fields.items():
        setattr(manager, name, value)
    return manager


async def requests_us(manager: Any, text: str, n: int) -> float:
    """The event loop's work per request on the /generate path up to the scheduler, us."""
    from sglang.srt.managers.io_struct import GenerateReqInput

    manager.rid_to_state.clear()
    start = time.perf_counter()
    for i in range(n):
        obj = GenerateReqInput(
            text=text, sampling_params={"max_new_tokens": 200}, stream=True, rid=f"r{i}"
        )
        obj.normalize_batch_and_arguments()
        manager._set_default_priority(obj)
        manager._init_req_state(obj, None)
        manager._send_one_request(await manager._tokenize_one_request(obj))
    return (time.perf_counter() - start) / n * 1e6


def measure(manager: Any, tokens: int) -> dict[str, float]:
    """The path and tokenizing alone at one prompt length: medians of RUNS."""
    text = prompt_text(manager.tokenizer, tokens)
    asyncio.run(requests_us(manager, text, TIMED_REQUESTS // 10))  # warm
    path = [asyncio.run(requests_us(manager, text, TIMED_REQUESTS)) for _ in range(RUNS)]
    alone = []
    for _ in range(RUNS):
        start = time.perf_counter()
        for _ in range(TIMED_REQUESTS):
            manager.tokenizer([text])
        alone.append((time.perf_counter() - start) / TIMED_REQUESTS * 1e6)
    return {
        "prompt_token_ids": len(manager.tokenizer(text).input_ids),
        "path_us": round(statistics.median(path), 1),
        "path_us_range": [round(min(path), 1), round(max(path), 1)],
        "tokenize_us": round(statistics.median(alone), 1),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--out", type=Path, default=OUT)
    args = parser.parse_args()
    import sglang

    with tempfile.TemporaryDirectory() as tmp:
        synthetic_tokenizer(Path(tmp))
        manager = bare_tokenizer_manager(Path(tmp))
        short = measure(manager, PROMPT_TOKENS)
        long = measure(manager, LONG_PROMPT_TOKENS)
    for row in (short, long):
        print(
            f"{row['prompt_token_ids']:5d} tokens: {row['path_us']:8.1f} us a request "
            f"{row['path_us_range']}, tokenizing {row['tokenize_us']:.1f}"
        )
    append_record(
        args.out,
        "SGLang TokenizerManager: the event loop's work per new request on /generate up to "
        "the scheduler (normalize, state, in-line tokenizing, TokenizedGenerateReqInput, "
        "pickling), and tokenizing alone",
        "sglang",
        sglang.__version__,
        short=short,
        long=long,
    )


if __name__ == "__main__":
    main()
