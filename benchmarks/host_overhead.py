"""The engine's own CPU time per decode step, by running batch: vLLM's scheduler on the CPU.

The step model prices what the GPU does; an engine that schedules the next step only after the
last one finished adds its scheduler's time to every step. This measures that time with the
engine's own scheduler classes on the CPU (no GPU, no model): B requests of 1,000-token prompts
are admitted and prefilled, then each decode step is timed:

- vLLM V1 (0.8 on): `Scheduler.schedule()` and `update_from_output()` with one sampled token
  per request (what EngineCore.step runs around the model; the workers' input preparation is
  not included, so the figure is a floor).
- vLLM V0 (before 0.8): `Scheduler.schedule()`; the token append the engine's output processing
  does is timed apart (V0 from 0.6.0 overlaps output processing with the next step). With
  `--v0-input-prep`, the driver worker's input preparation instead, which runs between the
  schedule and the forward: `ModelInputForGPUBuilder` (positions, slot mapping, block tables,
  CUDA-graph padding; its attention-metadata builder the common one, tensors left on the CPU)
  and `SamplingMetadata.prepare`, for B decoding sequences at 1,200 tokens of context. With
  `--v0-sampler`, the driver's `Sampler` on those sequences' logits: its sampling tensors, the
  greedy pick, the sampled tokens' logprobs and ranks and the per-sequence output objects, which
  run after the forward and before the next step is scheduled (a 512-token vocabulary keeps the
  tensor math, a GPU's in a server, out of the CPU time).
- vLLM V1 with `--v1-input-prep`: the worker's `_update_states` and `_prepare_inputs` (numpy
  over the persistent batch, attention metadata), through V1's CPU model runner on a one-layer
  Llama with dummy weights, for the scheduler's own outputs at B requests.

Run it in a virtual environment holding the release to measure and a CPU build of torch (the
scheduler needs no GPU; a CUDA wheel's kernels are never called):

    pip install torch --index-url https://download.pytorch.org/whl/cpu
    pip install vllm==0.10.1 --no-deps   # then the imports it asks for
    python benchmarks/host_overhead.py --config tests/data/models/meta-llama--Llama-3.1-8B

It appends one JSON line per run to benchmarks/data/host-overhead.jsonl (release, CPU, Python,
microseconds per request at each batch). The step model's per-sequence host constants cite it.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import statistics
import time
from pathlib import Path
from typing import Any

BATCHES = (1, 8, 32, 64, 128, 256, 512, 1024)
PROMPT_TOKENS = 1000
BLOCKS = 200_000  # KV blocks: far more than any batch here holds (no preemption)
SAMPLER_VOCAB_TOKENS = 512
TIMED_STEPS = 200
OUT = Path(__file__).parent / "data" / "host-overhead.jsonl"


def cpu_name() -> str:
    """The CPU's model name (/proc/cpuinfo), else what platform says."""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def process_cpu_s(pid: int) -> float:
    """A process's user + system CPU seconds so far (Linux /proc)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def server_script_args(doc: str, out: Path, stream_interval: bool = False) -> argparse.Namespace:
    """The command line of a script that measures against a local server it starts as a
    child of itself: --out, the hidden --serve PORT the child runs with and, where the script
    takes it, --stream-interval N (a request's chunk every N tokens)."""
    parser = argparse.ArgumentParser(description=doc.split("\n", 1)[0])
    parser.add_argument("--out", type=Path, default=out)
    parser.add_argument("--serve", type=int, help=argparse.SUPPRESS)
    if stream_interval:
        parser.add_argument("--stream-interval", type=int, default=1)
    return parser.parse_args()


def append_record(out: Path, what: str, package: str, version: str, **figures: Any) -> None:
    """Append one measurement to `out` (JSON lines): what was timed, the release, this
    machine's Python and CPU, the date and the figures."""
    record = {
        "what": what,
        package: version,
        "python": platform.python_version(),
        "cpu": cpu_name(),
        "date": datetime.date.today().isoformat(),
        **figures,
    }
    with out.open("a") as f:
        f.write(json.dumps(record) + "\n")
    print(f"appended to {out}")


def build(cls: Any, **kwargs: Any) -> Any:
    """`cls(**kwargs)` with only the arguments this release's `cls` takes (the constructors
    gained and lost arguments between releases)."""
    import inspect

    names = inspect.signature(cls).parameters
    return cls(**{k: v for k, v in kwargs.items() if k in names})


def add_v1_requests(scheduler: Any, batch: int) -> None:
    """`batch` requests of PROMPT_TOKENS-token prompts that never stop, into a V1 scheduler."""
    from vllm.sampling_params import SamplingParams
    from vllm.v1.request import Request

    for i in range(batch):
        scheduler.add_request(
            build(
                Request,
                request_id=str(i),
                prompt_token_ids=[1] * PROMPT_TOKENS,
                sampling_params=SamplingParams(max_tokens=100_000, ignore_eos=True),
                pooling_params=None,
                eos_token_id=2,
                multi_modal_kwargs=None,
                multi_modal_hashes=None,
                multi_modal_placeholders=None,
            )
        )


def one_token_each(scheduler: Any, out: Any) -> None:
    """Report one sampled token for every request a V1 scheduler output scheduled."""
    from vllm.v1.outputs import ModelRunnerOutput

    ids = list(out.num_scheduled_tokens)
    result = build(
        ModelRunnerOutput,
        req_ids=ids,
        req_id_to_index={r: i for i, r in enumerate(ids)},
        sampled_token_ids=[[7] for _ in ids],
        spec_token_ids=None,
        logprobs=None,
        prompt_logprobs_dict={},
        pooler_output=[],
    )
    scheduler.update_from_output(out, result)


def v1_scheduler_config(batch: int) -> Any:
    """vLLM V1's scheduler settings for `batch` running requests (the budget at least the
    batch, so every request decodes each step)."""
    from vllm.config import SchedulerConfig

    return build(
        SchedulerConfig,
        max_num_seqs=batch,
        max_num_batched_tokens=max(8192, batch),
        max_model_len=4096,
        is_encoder_decoder=False,
    )


def v1_steps(config: str, batch: int) -> list[float]:
    """Decode-step times (ms) of vLLM V1's scheduler at `batch` running requests."""
    import torch
    import vllm.platforms as platforms
    from vllm.config import CacheConfig, DeviceConfig, ModelConfig, VllmConfig
    from vllm.platforms.cpu import CpuPlatform
    from vllm.v1.core.sched.scheduler import Scheduler
    from vllm.v1.kv_cache_interface import FullAttentionSpec, KVCacheConfig, KVCacheGroupSpec
    from vllm.v1.structured_output import StructuredOutputManager

    platforms._current_platform = CpuPlatform()  # no GPU here: the scheduler never asks for one
    model = ModelConfig(
        model=config, tokenizer=config, skip_tokenizer_init=True, max_model_len=4096
    )
    # prefix caching off (a server's default has it on, which hashes each filled block too)
    cache = build(
        CacheConfig,
        block_size=16,
        gpu_memory_utilization=0.9,
        swap_space=0,
        enable_prefix_caching=False,
    )
    cache.num_gpu_blocks = BLOCKS
    vllm_config = VllmConfig(
        model_config=model,
        scheduler_config=v1_scheduler_config(batch),
        cache_config=cache,
        device_config=DeviceConfig(device="cpu"),
    )
    spec = build(
        FullAttentionSpec,
        block_size=16,
        num_kv_heads=8,
        head_size=128,
        dtype=torch.bfloat16,
        use_mla=False,
    )
    kv = KVCacheConfig(
        num_blocks=BLOCKS, kv_cache_tensors=[], kv_cache_groups=[KVCacheGroupSpec(["l"], spec)]
    )
    scheduler = build(
        Scheduler,
        vllm_config=vllm_config,
        kv_cache_config=kv,
        structured_output_manager=StructuredOutputManager(vllm_config),
        block_size=16,
        log_stats=True,
    )
    add_v1_requests(scheduler, batch)

    def step() -> float:
        start = time.perf_counter()
        out = scheduler.schedule()
        one_token_each(scheduler, out)
        return (time.perf_counter() - start) * 1e3

    while scheduler.waiting or len(scheduler.running) < batch:
        step()
    for _ in range(5):
        step()
    return [step() for _ in range(TIMED_STEPS)]


def v0_steps(batch: int) -> list[float]:
    """Decode-step times (ms) of vLLM V0's Scheduler.schedule() at `batch` running sequences."""
    from vllm.config import CacheConfig, SchedulerConfig
    from vllm.core.scheduler import Scheduler
    from vllm.sampling_params import SamplingParams
    from vllm.sequence import Logprob, Sequence, SequenceGroup

    cache = CacheConfig(block_size=16, gpu_memory_utilization=0.9, swap_space=0, cache_dtype="auto")
    cache.num_gpu_blocks, cache.num_cpu_blocks = BLOCKS, 0
    config = SchedulerConfig(
        max_num_batched_tokens=max(8192, batch), max_num_seqs=batch, max_model_len=4096
    )
    scheduler = Scheduler(config, cache, None)
    for i in range(batch):
        seq = Sequence(i, {"prompt_token_ids": [1] * PROMPT_TOKENS}, 16, eos_token_id=2)
        scheduler.add_seq_group(
            SequenceGroup(
                str(i),
                [seq],
                time.time(),
                sampling_params=SamplingParams(max_tokens=100_000, ignore_eos=True),
            )
        )

    def step() -> float:
        start = time.perf_counter()
        _, out, _ = scheduler.schedule()
        spent = (time.perf_counter() - start) * 1e3
        for scheduled in out.scheduled_seq_groups:  # what the engine does between steps
            group = scheduled.seq_group
            group.update_num_computed_tokens(scheduled.token_chunk_size)
            if not group.is_prefill():
                for seq in group.get_seqs():
                    seq.append_token_id(7, {7: Logprob(0.0)})
        return spent

    while scheduler.waiting or any(g.is_prefill() for g in scheduler.running):
        step()
    for _ in range(5):
        step()
    return [step() for _ in range(TIMED_STEPS)]


def v0_input_prep_steps(batch: int, sampler: bool = False) -> list[float]:
    """Per-step times (ms) of vLLM V0's input preparation for `batch` decoding sequences: the
    driver worker's ModelInputForGPUBuilder and SamplingMetadata.prepare (no GPU: tensors stay
    on the CPU, the attention-metadata builder is the common one the backends share); with
    `sampler`, of its Sampler on the step's logits instead."""
    import types

    import numpy as np
    import torch
    from vllm.attention.backends.utils import CommonMetadataBuilder
    from vllm.model_executor.sampling_metadata import SamplingMetadata, SamplingMetadataCache
    from vllm.sampling_params import SamplingParams
    from vllm.sequence import SequenceData, SequenceGroupMetadata
    from vllm.worker.model_runner import (
        ModelInputForGPUBuilder,
        ModelInputForGPUWithSamplingMetadata,
    )

    class Metadata:
        def __init__(self, **fields: Any) -> None:
            self.__dict__.update(fields)

    class Builder(CommonMetadataBuilder):  # type: ignore[misc]
        _metadata_cls = Metadata

    class Backend:
        @staticmethod
        def get_builder_cls() -> type:
            return Builder

        @staticmethod
        def make_metadata_builder(*args: Any, **kwargs: Any) -> Any:
            return Builder(*args, **kwargs)

        @staticmethod
        def make_metadata(**fields: Any) -> Any:
            return Metadata(**fields)

        @staticmethod
        def get_name() -> str:
            return "common"

    block, context, graphs = 16, PROMPT_TOKENS + 200, 512
    runner = types.SimpleNamespace(
        _model_input_cls=ModelInputForGPUWithSamplingMetadata,
        attn_backend=Backend,
        block_size=block,
        device=torch.device("cpu"),
        inter_data_cache={},
        lora_config=None,
        max_batchsize_to_capture=graphs,
        max_seq_len_to_capture=8192,
        model_config=types.SimpleNamespace(
            enforce_eager=False, hf_config=None, is_encoder_decoder_model=False
        ),
        model_is_mrope=False,
        multi_modal_input_mapper=None,
        pin_memory=False,
        prompt_adapter_config=None,
        scheduler_config=types.SimpleNamespace(chunked_prefill_enabled=True, is_multi_step=False),
        sliding_window=None,
        graph_block_tables=np.zeros((graphs, 8192 // block), dtype=np.int32),
    )
    groups = []
    for i in range(batch):
        data = SequenceData.from_seqs([1] * PROMPT_TOKENS, [7] * (context - PROMPT_TOKENS))
        data.update_num_computed_tokens(context - 1)
        groups.append(
            SequenceGroupMetadata(
                request_id=str(i),
                is_prompt=False,
                seq_data={i: data},
                sampling_params=SamplingParams(temperature=0.0, max_tokens=100_000),
                block_tables={i: list(range(i * 100, i * 100 + -(-context // block)))},
                do_sample=True,
                token_chunk_size=1,
            )
        )
    cache = SamplingMetadataCache()

    def prepare() -> Any:
        builder = ModelInputForGPUBuilder(runner, None)
        for group in groups:
            builder.add_seq_group(group)
        builder.reset_cached_inter_data()
        model_input = builder.build()
        return SamplingMetadata.prepare(
            groups, model_input.seq_lens, model_input.query_lens, runner.device, False, {}, cache
        )

    if sampler:
        # the sampler's own work on the step's logits: sampling tensors, the greedy pick, the
        # sampled tokens' logprobs and ranks and the per-sequence output objects; a 512-token
        # vocabulary keeps the tensor math (a GPU's, in a server) out of the CPU time
        import vllm.model_executor.sampling_metadata as sampling
        from vllm.model_executor.layers.sampler import Sampler

        sampling.is_pin_memory_available = lambda: False  # no accelerator to pin for
        sample = Sampler()
        metadata = prepare()
        logits = torch.randn(batch, SAMPLER_VOCAB_TOKENS)

        def step() -> float:
            start = time.perf_counter()
            sample(logits, metadata)
            return (time.perf_counter() - start) * 1e3

    else:

        def step() -> float:
            start = time.perf_counter()
            prepare()
            return (time.perf_counter() - start) * 1e3

    for _ in range(5):
        step()
    return [step() for _ in range(TIMED_STEPS // 4)]


def v1_input_prep_steps(batch: int) -> list[float]:
    """Per-step times (ms) of vLLM V1's worker input preparation for `batch` decoding requests:
    GPUModelRunner._update_states and _prepare_inputs, run by V1's CPU model runner (the same
    code, its tensors on the CPU) on a one-layer Llama with dummy weights."""
    import tempfile

    import torch
    import vllm.platforms as platforms
    from vllm.platforms.cpu import CpuPlatform

    # before the modules that read the platform at import time (the attention selector)
    platforms._current_platform = CpuPlatform()
    from vllm.config import (
        CacheConfig,
        DeviceConfig,
        LoadConfig,
        ModelConfig,
        VllmConfig,
        set_current_vllm_config,
    )
    from vllm.distributed import (
        init_distributed_environment,
        initialize_model_parallel,
        model_parallel_is_initialized,
    )
    from vllm.v1.core.sched.scheduler import Scheduler
    from vllm.v1.kv_cache_interface import (
        FullAttentionSpec,
        KVCacheConfig,
        KVCacheGroupSpec,
        KVCacheTensor,
    )
    from vllm.v1.structured_output import StructuredOutputManager
    from vllm.v1.worker.cpu_model_runner import CPUModelRunner

    folder = tempfile.mkdtemp()
    config = {
        "architectures": ["LlamaForCausalLM"],
        "model_type": "llama",
        "hidden_size": 256,
        "intermediate_size": 512,
        "num_attention_heads": 4,
        "num_key_value_heads": 1,
        "num_hidden_layers": 1,
        "vocab_size": 32000,
        "max_position_embeddings": 4096,
        "rms_norm_eps": 1e-5,
        "torch_dtype": "bfloat16",
    }
    Path(folder, "config.json").write_text(json.dumps(config))
    if not model_parallel_is_initialized():
        init_distributed_environment(1, 0, "tcp://127.0.0.1:29533", 0, "gloo")
        initialize_model_parallel(1, 1)
    block, layer = 16, "model.layers.0.self_attn.attn"
    blocks = batch * (PROMPT_TOKENS // block + 24) + 64
    cache = build(
        CacheConfig,
        block_size=block,
        gpu_memory_utilization=0.9,
        swap_space=0,
        enable_prefix_caching=False,
    )
    cache.num_gpu_blocks = blocks
    vllm_config = VllmConfig(
        model_config=ModelConfig(
            model=folder,
            tokenizer=folder,
            skip_tokenizer_init=True,
            max_model_len=4096,
            dtype="bfloat16",
        ),
        scheduler_config=v1_scheduler_config(batch),
        cache_config=cache,
        device_config=DeviceConfig(device="cpu"),
        load_config=LoadConfig(load_format="dummy"),
    )
    spec = build(
        FullAttentionSpec,
        block_size=block,
        num_kv_heads=1,
        head_size=64,
        dtype=torch.bfloat16,
        use_mla=False,
    )
    kv = KVCacheConfig(
        num_blocks=blocks,
        kv_cache_tensors=[KVCacheTensor(size=spec.page_size_bytes * blocks, shared_by=[layer])],
        kv_cache_groups=[KVCacheGroupSpec([layer], spec)],
    )
    scheduler = build(
        Scheduler,
        vllm_config=vllm_config,
        kv_cache_config=kv,
        structured_output_manager=StructuredOutputManager(vllm_config),
        log_stats=False,
    )
    with set_current_vllm_config(vllm_config):
        runner = CPUModelRunner(vllm_config, torch.device("cpu"))
        runner.load_model()
    runner.initialize_kv_cache(kv)
    add_v1_requests(scheduler, batch)

    def step() -> float:
        out = scheduler.schedule()
        start = time.perf_counter()
        runner._update_states(out)
        runner._prepare_inputs(out)
        spent = (time.perf_counter() - start) * 1e3
        one_token_each(scheduler, out)
        return spent

    while scheduler.waiting or len(scheduler.running) < batch:
        step()
    for _ in range(10):
        step()
    return [step() for _ in range(TIMED_STEPS // 4)]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--config", required=True, help="a folder holding a config.json")
    parser.add_argument("--out", type=Path, default=OUT)
    parser.add_argument(
        "--v0-input-prep", action="store_true", help="V0: time the input preparation instead"
    )
    parser.add_argument(
        "--v1-input-prep", action="store_true", help="V1: time the input preparation instead"
    )
    parser.add_argument("--v0-sampler", action="store_true", help="V0: time the sampler instead")
    args = parser.parse_args()
    import vllm

    version = vllm.__version__
    v1 = tuple(int(p) for p in version.split(".")[:2]) >= (0, 8)
    sampler = args.v0_sampler and not v1
    prep = (args.v0_input_prep or sampler) and not v1
    prep_v1 = args.v1_input_prep and v1
    step_ms: dict[str, float] = {}
    for batch in BATCHES:
        if prep:
            times = v0_input_prep_steps(batch, sampler)
        elif prep_v1:
            times = v1_input_prep_steps(batch)
        else:
            times = v1_steps(args.config, batch) if v1 else v0_steps(batch)
        ms = statistics.median(times)
        step_ms[str(batch)] = round(ms, 4)
        print(f"B {batch:5d}  step {ms:8.3f} ms  {ms / batch * 1e3:7.2f} us per request")
    # the marginal cost of one more running request: least squares over the batches from 32
    points = [(int(b), ms) for b, ms in step_ms.items() if int(b) >= 32]
    slope = statistics.linear_regression([b for b, _ in points], [ms for _, ms in points]).slope
    print(f"marginal: {slope * 1e3:.2f} us per running request")
    what = "V1 Scheduler.schedule()+update_from_output()" if v1 else "V0 Scheduler.schedule()"
    if prep:
        what = "V0 driver input prep: ModelInputForGPUBuilder + SamplingMetadata.prepare"
    if sampler:
        what = f"V0 Sampler.forward on the CPU ({SAMPLER_VOCAB_TOKENS}-token vocabulary)"
    if prep_v1:
        what = "V1 worker input prep: GPUModelRunner._update_states + _prepare_inputs (CPU runner)"
    append_record(
        args.out,
        what,
        "vllm",
        version,
        prompt_tokens=PROMPT_TOKENS,
        step_ms=step_ms,
        marginal_us_per_request=round(slope * 1e3, 2),
    )


if __name__ == "__main__":
    main()
