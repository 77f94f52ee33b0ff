"""SGLang's scheduler: its CPU time per decode step, by running batch, with the engine's own code.

SGLang's overlap scheduler (event_loop_overlap, on by default from 0.3.6) prepares step N+1 and
processes step N's output on the CPU while the GPU runs step N+1, so its CPU time per step is
hidden unless it outlasts the GPU's; with --disable-overlap-schedule it runs between GPU steps.
This times, on the CPU with no model (a bare ScheduleBatch on CPU memory pools, a radix cache,
B requests of 1,000-token prompts already prefilled), what one decode step runs of it:

- update_running_batch's part: `filter_batch`, `check_decode_mem` and `prepare_for_decode`
  (the KV slot allocation, the sequence lengths);
- the overlap loop's `batch.copy()` of the launched batch;
- `process_batch_result_decode` (each request's token appended, its finish state, the output
  streamed to the detokenizer: the BatchTokenIDOutput built and pickled, as ZMQ's send_pyobj
  does).

The forward's own CPU work (ForwardBatch.init_new, the CUDA-graph replay's input copies, the
sampler's launch) is not in it: the figure is a floor.

    # a virtual environment with sglang==X --no-deps, a CPU torch, the transformers it pins and
    # what the imports ask for (a stub torchvision package will do: nothing here calls it)
    python benchmarks/sglang_scheduler_overhead.py --config FOLDER   # e.g. Llama-3.1-8B's

(the recorded run: tests/data/models/meta-llama--Llama-3.1-8B). It appends one JSON line to
benchmarks/data/host-overhead.jsonl; the step model's
SGLANG_SCHEDULE_MS_PER_SEQ (planner/core/step/overhead.py) cites it.
"""

from __future__ import annotations

import argparse
import pickle
import statistics
import time
import types
from array import array
from pathlib import Path
from typing import Any

from host_overhead import append_record  # same folder: the script's own sys.path[0]

BATCHES = (8, 32, 64, 128, 256, 512, 1024)
PROMPT_TOKENS = 1000
HEADROOM_TOKENS = 4096  # KV slots a request may still take (no retraction in the run)
TIMED_STEPS = 40
WARMUP_STEPS = 5
OUT = Path(__file__).parent / "data" / "host-overhead.jsonl"


class PickledSink:
    """The scheduler's socket to the detokenizer: each output pickled, as send_pyobj does."""

    def __init__(self) -> None:
        self.sent_bytes = 0

    def send_output(self, obj: Any, *args: Any, **kwargs: Any) -> None:
        self.sent_bytes += len(pickle.dumps(obj))

    send_pyobj = send_output


class QuietReporter:
    """SchedulerMetricsReporter's decode counters, without the periodic log line."""

    num_generated_tokens = 0
    forward_ct_decode = 0
    enable_metrics = False

    def report_decode_stats(self, *args: Any, **kwargs: Any) -> None:
        """The every-40-steps log line: per step, not per request."""

    def update_spec_metrics(self, *args: Any, **kwargs: Any) -> None:
        """Speculative decoding's counters (not run here)."""


def decode_batch(config: str, batch: int) -> tuple[Any, Any]:
    """A prefilled decode batch of `batch` requests and the result processor for it."""
    import torch
    from sglang.srt.configs.model_config import ModelConfig
    from sglang.srt.disaggregation.utils import DisaggregationMode
    from sglang.srt.managers.schedule_batch import Req, ScheduleBatch
    from sglang.srt.managers.scheduler_components.batch_result_processor import (
        SchedulerBatchResultProcessor,
    )
    from sglang.srt.managers.scheduler_components.output_streamer import (
        SchedulerOutputStreamer,
    )
    from sglang.srt.mem_cache.allocator.token import TokenToKVPoolAllocator
    from sglang.srt.mem_cache.cache_init_params import CacheInitParams
    from sglang.srt.mem_cache.memory_pool import ReqToTokenPool
    from sglang.srt.mem_cache.radix_cache import RadixCache
    from sglang.srt.sampling.sampling_params import SamplingParams
    from sglang.srt.server_args import ServerArgs, set_global_server_args_for_scheduler
    from sglang.srt.speculative.spec_info import SpeculativeAlgorithm

    args = ServerArgs(model_path=config, device="cpu", skip_server_warmup=True)
    set_global_server_args_for_scheduler(args)
    model = ModelConfig.from_server_args(args)
    context = PROMPT_TOKENS + HEADROOM_TOKENS
    requests = ReqToTokenPool(
        size=batch + 8, max_context_len=context, device="cpu", enable_memory_saver=False
    )
    slots = TokenToKVPoolAllocator(
        size=batch * context + 1024,
        dtype=torch.bfloat16,
        device="cpu",
        kvcache=None,
        need_sort=False,
    )
    cache = RadixCache(
        CacheInitParams(
            disable=False, req_to_token_pool=requests, token_to_kv_pool_allocator=slots, page_size=1
        )
    )
    reqs = []
    for i in range(batch):
        params = SamplingParams(max_new_tokens=1_000_000, temperature=0.0, ignore_eos=True)
        params.normalize(None)
        params.verify(model.vocab_size)
        prompt = array("q", [(i * 7919 + j) % 120_000 + 10 for j in range(PROMPT_TOKENS)])
        req = Req(f"r{i}", "", prompt, params, stream=True, vocab_size=model.vocab_size)
        req.init_next_round_input(cache)
        req.set_extend_input_len(len(req.full_untruncated_fill_ids) - len(req.prefix_indices))
        req.fill_len = len(req.full_untruncated_fill_ids)
        reqs.append(req)
    running = ScheduleBatch.init_new(
        reqs, requests, slots, cache, model, True, SpeculativeAlgorithm.NONE
    )
    running.prepare_for_extend()
    for req in reqs:  # the prefill's token, as process_batch_result_prefill appends it
        req.output_ids.append(11)
    streamer = SchedulerOutputStreamer(
        send_to_detokenizer=PickledSink(),
        tree_cache=cache,
        ps=types.SimpleNamespace(dp_rank=None, attn_tp_rank=0, tp_rank=0),
        server_args=args,
        is_generation=True,
        spec_algorithm=SpeculativeAlgorithm.NONE,
        disaggregation_mode=DisaggregationMode.NULL,
        enable_hicache_storage=lambda: False,
        load_inquirer_get_loads=lambda req: None,
    )
    processor = SchedulerBatchResultProcessor(
        is_generation=True,
        disaggregation_mode=DisaggregationMode.NULL,
        enable_overlap=True,
        enable_overlap_mlx=False,
        server_args=args,
        model_config=model,
        token_to_kv_pool_allocator=slots,
        tree_cache=cache,
        hisparse_coordinator=None,
        req_to_token_pool=requests,
        decode_offload_manager=None,
        metrics_collector=None,
        metrics_reporter=QuietReporter(),
        draft_worker=None,
        model_worker=None,
        logprob_result_processor=None,
        output_streamer=streamer,
        abort_request=lambda *a: None,
    )
    return running, processor


def step_ms(config: str, batch: int) -> dict[str, float]:
    """Median CPU time (ms) of one decode step's parts at `batch` running requests."""
    import torch
    from sglang.srt.layers.logits_processor import LogitsProcessorOutput
    from sglang.srt.managers.utils import GenerationBatchResult

    running, processor = decode_batch(config, batch)
    parts: dict[str, list[float]] = {"prepare": [], "copy": [], "result": []}
    for step in range(TIMED_STEPS + WARMUP_STEPS):
        start = time.perf_counter()
        running.filter_batch(v1_spec_info_filtered=True)
        running.check_decode_mem()
        running.prepare_for_decode()
        prepared = time.perf_counter()
        launched = running.copy()
        copied = time.perf_counter()
        tokens = torch.full((batch,), 12 + step, dtype=torch.int64)
        result = GenerationBatchResult(
            logits_output=LogitsProcessorOutput(next_token_logits=None),
            next_token_ids=tokens,
            can_run_cuda_graph=True,
        )
        processor.process_batch_result_decode(launched, result)
        done = time.perf_counter()
        if step >= WARMUP_STEPS:
            parts["prepare"].append((prepared - start) * 1e3)
            parts["copy"].append((copied - prepared) * 1e3)
            parts["result"].append((done - copied) * 1e3)
    return {k: round(statistics.median(v), 4) for k, v in parts.items()}


def slope_us(step_ms_by_batch: dict[int, float]) -> float:
    """Least-squares microseconds per request over the batches timed."""
    xs, ys = list(step_ms_by_batch), list(step_ms_by_batch.values())
    mx, my = statistics.fmean(xs), statistics.fmean(ys)
    num = sum((x - mx) * (y - my) for x, y in zip(xs, ys, strict=True))
    den = sum((x - mx) ** 2 for x in xs)
    return round(num / den * 1e3, 2)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--config", required=True, help="a model folder holding config.json")
    parser.add_argument("--out", type=Path, default=OUT)
    args = parser.parse_args()
    import sglang

    by_part: dict[str, dict[str, float]] = {"prepare": {}, "copy": {}, "result": {}}
    total: dict[int, float] = {}
    for batch in BATCHES:
        parts = step_ms(args.config, batch)
        for name, ms in parts.items():
            by_part[name][str(batch)] = ms
        total[batch] = sum(parts.values())
        print(f"B {batch:5d}  {parts}  {total[batch]:.3f} ms")
    append_record(
        args.out,
        "SGLang scheduler, one decode step on the CPU: filter_batch + check_decode_mem + "
        "prepare_for_decode, the overlap copy, process_batch_result_decode with its output "
        "pickled to the detokenizer (no forward)",
        "sglang",
        sglang.__version__,
        model=Path(args.config).name,
        prompt_tokens=PROMPT_TOKENS,
        step_ms=by_part,
        marginal_us_per_request=slope_us(total),
    )


if __name__ == "__main__":
    main()
