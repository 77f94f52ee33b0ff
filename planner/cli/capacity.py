"""`planner capacity`: the HBM ledger, contiguous vs paged concurrency, binding, launch flags."""

from dataclasses import dataclass, replace
from typing import Annotated, Any

import typer

from planner.cli.capacity_render import (
    render_capacity,
    render_comparison,
    render_log_report,
    render_serve,
)
from planner.cli.engine_flags import host_settings
from planner.cli.numbers import (
    CONTEXT_FLAGS,
    MAX_GPU_MEMORY_GIB,
    TP_FLAGS,
    All2AllBackend,
    AsyncScheduling,
    DataParallelAddress,
    DataParallelSizeLocal,
    DisableCudaGraph,
    DisableOverlapSchedule,
    DisableRadixCache,
    DistInitAddr,
    DistributedExecutorBackend,
    EnableDbo,
    EnableDpLmHead,
    EnablePrefixCaching,
    EnableTwoBatchOverlap,
    EngineDtype,
    EpNumRedundantExperts,
    HubTimeout,
    JsonOut,
    MambaFullMemoryRatio,
    MambaRadixCacheStrategy,
    MaxMambaCacheSize,
    MaxPrefillTokens,
    MoeA2aBackend,
    MoeDenseTpSize,
    Nnodes,
    NodeRank,
    ReservedGib,
    Revision,
    SchedulerRecvInterval,
    StreamInterval,
    TrustRemoteCode,
    apply_hub_timeout,
    defaults_of,
    max_model_len_value,
    reserved_bytes,
)
from planner.cli.render import emit_json

DTYPE_HELP = "fp32, fp16, bf16, fp8, int8"


# Largest host memory --host-memory-gib takes: 64 TiB, beyond any one node sold.
MAX_HOST_MEMORY_GIB = 65536


def capacity(
    preset: Annotated[
        str | None, typer.Option(help="Model preset name (see `planner presets`).")
    ] = None,
    model: Annotated[
        str | None, typer.Option(help="Model folder (with config.json), config file, or Hub id.")
    ] = None,
    revision: Revision = None,
    gpu: Annotated[
        str, typer.Option(help="GPU id, alias or device name (see `planner gpus`).")
    ] = "",
    ledger: Annotated[
        str,
        typer.Option(
            help="engine: what vLLM / SGLang will allocate (the default); textbook: the "
            "teaching ledger of docs/method.md."
        ),
    ] = "engine",
    tp: Annotated[
        int,
        typer.Option(*TP_FLAGS, help="Tensor-parallel size."),
    ] = 1,
    context: Annotated[
        str | None,
        typer.Option(
            *CONTEXT_FLAGS,
            metavar="<int|auto>",
            help="Max model length in tokens, or auto (vLLM 0.14+: the longest the KV cache "
            "holds) [default: min(8192, model max)].",
        ),
    ] = None,
    mean_len: Annotated[
        int | None,
        typer.Option(help="Mean actual tokens per sequence [default: min(2000, context)]."),
    ] = None,
    block_size: Annotated[
        int | None, typer.Option(help="KV page size in tokens [default: the engine's; 16].")
    ] = None,
    kv_dtype: Annotated[
        str | None,
        typer.Option(
            "--kv-dtype",
            "--kv-cache-dtype",
            help=f"KV cache dtype: {DTYPE_HELP}, or the engines' auto / fp8_e4m3 / fp8_e5m2 "
            "[default: model dtype].",
        ),
    ] = None,
    weight_dtype: Annotated[
        str | None,
        typer.Option(
            help="Re-store linear weights as fp32/fp16/bf16/fp8/int8/int4/fp4 (estimate; the "
            "engine ledger takes fp8, as --quantization fp8)."
        ),
    ] = None,
    dtype: EngineDtype = None,
    tpot: Annotated[
        float | None,
        typer.Option(help="TPOT budget, ms: caps max_num_seqs on the estimated step time."),
    ] = None,
    spec_alpha: Annotated[
        float | None,
        typer.Option(help="Speculative acceptance rate: add speculation where it pays."),
    ] = None,
    spec_method: Annotated[
        str, typer.Option(help="Speculation method with --spec-alpha (as `planner spec`).")
    ] = "eagle3",
    headroom: Annotated[
        float | None, typer.Option(help="Textbook: fragmentation headroom share [0.05].")
    ] = None,
    workspace_gib: Annotated[
        float | None, typer.Option(help="Textbook: activations and workspace per GPU, GiB [4].")
    ] = None,
    compute_batch_cap: Annotated[
        int | None, typer.Option(help="Textbook: batch cap from compute / latency [128].")
    ] = None,
    gpu_memory_gib: Annotated[
        float | None, typer.Option(help="Override the GPU's memory per device, GiB.")
    ] = None,
    explain: Annotated[bool, typer.Option(help="Show the per-layer-group KV breakdown.")] = False,
    engine: Annotated[str | None, typer.Option(help="vllm or sglang [default: vllm].")] = None,
    engine_version: Annotated[
        str | None, typer.Option(help="Engine version [default: newest documented].")
    ] = None,
    gpu_memory_utilization: Annotated[float | None, typer.Option(help="vLLM flag.")] = None,
    max_model_len: Annotated[
        str | None, typer.Option(metavar="<int|auto>", help="vLLM flag (same as --context).")
    ] = None,
    max_num_batched_tokens: Annotated[int | None, typer.Option(help="vLLM flag.")] = None,
    max_num_seqs: Annotated[
        int | None, typer.Option(help="vLLM flag: the most it may run.")
    ] = None,
    enforce_eager: Annotated[bool, typer.Option(help="vLLM flag: no CUDA graphs.")] = False,
    async_scheduling: AsyncScheduling = None,
    enable_prefix_caching: EnablePrefixCaching = None,
    all2all_backend: All2AllBackend = None,
    enable_dbo: EnableDbo = False,
    stream_interval: StreamInterval = None,
    scheduler_recv_interval: SchedulerRecvInterval = None,
    max_prefill_tokens: MaxPrefillTokens = None,
    kv_cache_memory_bytes: Annotated[int | None, typer.Option(help="vLLM flag.")] = None,
    enable_lora: Annotated[
        bool, typer.Option(help="vLLM flag: LoRA buffers load with the weights.")
    ] = False,
    max_lora_rank: Annotated[
        int | None, typer.Option(help="vLLM flag (with --enable-lora) [default: 16].")
    ] = None,
    max_loras: Annotated[
        int | None, typer.Option(help="vLLM flag (with --enable-lora) [default: 1].")
    ] = None,
    enable_expert_parallel: Annotated[
        bool, typer.Option(help="vLLM flag: MoE experts split whole across the TP ranks.")
    ] = False,
    max_cudagraph_capture_size: Annotated[
        int | None,
        typer.Option(
            "--max-cudagraph-capture-size",
            "--cuda-graph-sizes",
            help="vLLM flag: the largest batch captured in a CUDA graph (each size captured "
            "holds graph memory; --cuda-graph-sizes N before 0.11.1) [default: min(2 x "
            "max_num_seqs, 512)].",
        ),
    ] = None,
    enable_chunked_prefill: Annotated[
        bool | None,
        typer.Option(
            "--enable-chunked-prefill/--no-enable-chunked-prefill",
            help="vLLM flag: split prompts across steps under --max-num-batched-tokens (off: "
            "each step must hold a whole max_model_len prompt) [default: V1 on; V0 on above "
            "32K --context].",
        ),
    ] = None,
    flashinfer: Annotated[
        bool | None,
        typer.Option(
            "--flashinfer/--no-flashinfer",
            help="vLLM 0.9-0.11: FlashInfer installed (its sampler kernels) [default: yes for "
            "serve, the vllm-openai image; no for the LLM class or --colocated].",
        ),
    ] = None,
    usage_context: Annotated[
        str, typer.Option(help="vLLM entry point: serve (`vllm serve`) or llm (the LLM class).")
    ] = "serve",
    colocated: Annotated[
        bool,
        typer.Option(
            help="vLLM runs inside a process that already used CUDA (Unsloth, TRL colocate)."
        ),
    ] = False,
    reserved_gib: ReservedGib = None,
    calibration: Annotated[
        str | None,
        typer.Option(help="A profile from `planner calibrate`: your logs' terms replace ours."),
    ] = None,
    compare_version: Annotated[
        str | None,
        typer.Option(
            help="Plan again under another version (0.28.0) or engine (sglang, sglang:0.5.8) "
            "and show what moves, term by term, and why."
        ),
    ] = None,
    trust_remote_code: TrustRemoteCode = False,
    nnodes: Nnodes = None,
    node_rank: NodeRank = None,
    dist_init_addr: DistInitAddr = None,
    distributed_executor_backend: DistributedExecutorBackend = None,
    data_parallel_size_local: DataParallelSizeLocal = None,
    data_parallel_address: DataParallelAddress = None,
    pp: Annotated[
        int,
        typer.Option(
            "--pp",
            "--pipeline-parallel-size",
            "--pp-size",
            help="Pipeline-parallel size (engine ledger).",
        ),
    ] = 1,
    dp: Annotated[
        int | None,
        typer.Option(
            "--dp",
            "--data-parallel-size",
            "--dp-size",
            help="Data-parallel ranks (engine ledger; the plan is one rank's). vLLM: a MoE "
            "model's experts span TP x DP. SGLang: whole replicas, or with --dp-attention "
            "attention-DP groups inside --tp.",
        ),
    ] = None,
    dp_attention: Annotated[
        bool,
        typer.Option(
            "--dp-attention",
            "--enable-dp-attention",
            help="SGLang flag: --dp groups of data-parallel attention (attention TP = tp / dp).",
        ),
    ] = False,
    attn_dp_size: Annotated[
        int | None,
        typer.Option(
            "--attn-dp-size",
            "--attention-data-parallel-size",
            help="SGLang 0.5.23+ flag: attention-DP groups (the same as --dp N --dp-attention).",
        ),
    ] = None,
    ep_size: Annotated[
        int | None,
        typer.Option(
            "--ep-size", "--expert-parallel-size", help="SGLang flag: expert-parallel size."
        ),
    ] = None,
    ep: Annotated[
        int | None,
        typer.Option(
            "--ep",
            help="Expert-parallel size as slo and simulate take it: the GPUs the MoE layers "
            "span (vLLM: TP x DP, its --enable-expert-parallel; SGLang: TP, its --ep-size).",
        ),
    ] = None,
    ep_num_redundant_experts: EpNumRedundantExperts = None,
    moe_a2a_backend: MoeA2aBackend = None,
    enable_two_batch_overlap: EnableTwoBatchOverlap = False,
    moe_dense_tp_size: MoeDenseTpSize = None,
    enable_dp_lm_head: EnableDpLmHead = False,
    disable_radix_cache: DisableRadixCache = False,
    disable_cuda_graph: DisableCudaGraph = False,
    disable_overlap_schedule: DisableOverlapSchedule = False,
    quantization: Annotated[
        str | None,
        typer.Option(
            help="Engine --quantization: awq, gptq, fp8, mxfp4, bitsandbytes (vLLM through 0.27)."
        ),
    ] = None,
    mem_fraction_static: Annotated[float | None, typer.Option(help="SGLang flag.")] = None,
    chunked_prefill_size: Annotated[int | None, typer.Option(help="SGLang flag.")] = None,
    cuda_graph_max_bs_decode: Annotated[
        int | None,
        typer.Option("--cuda-graph-max-bs-decode", "--cuda-graph-max-bs", help="SGLang flag."),
    ] = None,
    page_size: Annotated[
        int | None, typer.Option(help="SGLang flag (same as --block-size).")
    ] = None,
    max_running_requests: Annotated[int | None, typer.Option(help="SGLang flag.")] = None,
    mamba_full_memory_ratio: MambaFullMemoryRatio = None,
    max_mamba_cache_size: MaxMambaCacheSize = None,
    mamba_radix_cache_strategy: MambaRadixCacheStrategy = None,
    context_length: Annotated[
        str | None, typer.Option(metavar="<int>", help="SGLang flag (same as --context).")
    ] = None,
    kv_offloading_size: Annotated[
        float | None,
        typer.Option(
            help="vLLM flag (0.11.1+; native 0.14+): KV offload to CPU memory, GiB over all ranks."
        ),
    ] = None,
    kv_offloading_backend: Annotated[
        str | None, typer.Option(help="vLLM flag with --kv-offloading-size: native or lmcache.")
    ] = None,
    lmcache_config: Annotated[
        str | None,
        typer.Option(
            help="LMCache YAML (chunk_size, max_local_cpu_size, local_disk, "
            "max_local_disk_size) for --kv-offloading-backend lmcache [default: "
            "$LMCACHE_CONFIG_FILE, else the LMCACHE_* variables]."
        ),
    ] = None,
    enable_hierarchical_cache: Annotated[
        bool, typer.Option(help="SGLang flag: HiCache, a host-memory KV tier.")
    ] = False,
    hicache_ratio: Annotated[
        float | None, typer.Option(help="SGLang flag: host pool / device pool [2].")
    ] = None,
    hicache_size: Annotated[
        float | None, typer.Option(help="SGLang flag: host pool per rank, GB [0: the ratio].")
    ] = None,
    host_memory_gib: Annotated[
        float | None,
        typer.Option(
            help="Host memory per node, GiB, the offload tier is checked against [default: "
            "this host's with --gpu auto]."
        ),
    ] = None,
    disaggregation_mode: Annotated[
        str | None,
        typer.Option(help="SGLang flag: null, prefill or decode (a disaggregated pool)."),
    ] = None,
    disaggregation_transfer_backend: Annotated[
        str | None, typer.Option(help="SGLang flag: mooncake, nixl, ascend, mori.")
    ] = None,
    kv_transfer_config: Annotated[
        str | None,
        typer.Option(help='vLLM flag: KV connector JSON, e.g. {"kv_connector":"NixlConnector"}.'),
    ] = None,
    from_log: Annotated[
        str | None, typer.Option(help="Re-run a vLLM / SGLang start-up log, term by term.")
    ] = None,
    save: Annotated[
        str | None, typer.Option(help="Write a plan lock file (YAML) for `planner drift`.")
    ] = None,
    hub_timeout: HubTimeout = None,
    json_out: JsonOut = False,
) -> None:
    """Does the model fit, how many sequences run at once, what binds them, and the flags."""
    flags = CapacityFlags(**locals())
    apply_hub_timeout(hub_timeout)
    if flags.from_log is not None:
        _replay_log(flags, flags.from_log)
        return
    ctx, auto, block = _checked_common(flags)
    if flags.ledger == "engine":
        _serve(flags, _engine_ledger_settings(flags, ctx, auto, block))
        return
    _refuse_engine_options(flags)
    _textbook(
        flags,
        {
            "tp": flags.tp,
            "context_tokens": ctx,
            "mean_tokens": flags.mean_len,
            "block_tokens": block,
            "kv_dtype": flags.kv_dtype,
            "weight_dtype": flags.weight_dtype,
            "headroom_fraction": flags.headroom,
            "workspace_gib": flags.workspace_gib,
            "compute_batch_cap": flags.compute_batch_cap,
        },
    )


# Each flag's value when it is not typed (the command's defaults).
_DEFAULTS = defaults_of(capacity)


@dataclass(frozen=True)
class CapacityFlags:
    """Every flag `planner capacity` was given, under its parameter's name: its three modes
    (a start-up log's replay, the engine ledger, the textbook ledger) each read theirs."""

    preset: str | None
    model: str | None
    revision: str | None
    gpu: str
    ledger: str
    tp: int
    context: str | None
    mean_len: int | None
    block_size: int | None
    kv_dtype: str | None
    weight_dtype: str | None
    dtype: str | None
    tpot: float | None
    spec_alpha: float | None
    spec_method: str
    headroom: float | None
    workspace_gib: float | None
    compute_batch_cap: int | None
    gpu_memory_gib: float | None
    explain: bool
    engine: str | None
    engine_version: str | None
    gpu_memory_utilization: float | None
    max_model_len: str | None
    max_num_batched_tokens: int | None
    max_num_seqs: int | None
    enforce_eager: bool
    async_scheduling: bool | None
    enable_prefix_caching: bool | None
    all2all_backend: str | None
    enable_dbo: bool
    stream_interval: int | None
    scheduler_recv_interval: int | None
    max_prefill_tokens: int | None
    kv_cache_memory_bytes: int | None
    enable_lora: bool
    max_lora_rank: int | None
    max_loras: int | None
    enable_expert_parallel: bool
    max_cudagraph_capture_size: int | None
    enable_chunked_prefill: bool | None
    flashinfer: bool | None
    usage_context: str
    colocated: bool
    reserved_gib: float | None
    calibration: str | None
    compare_version: str | None
    trust_remote_code: bool
    nnodes: int | None
    node_rank: str | None
    dist_init_addr: str | None
    distributed_executor_backend: str | None
    data_parallel_size_local: int | None
    data_parallel_address: str | None
    pp: int
    dp: int | None
    dp_attention: bool
    attn_dp_size: int | None
    ep_size: int | None
    ep: int | None
    ep_num_redundant_experts: int | None
    moe_a2a_backend: str | None
    enable_two_batch_overlap: bool
    moe_dense_tp_size: int | None
    enable_dp_lm_head: bool
    disable_radix_cache: bool
    disable_cuda_graph: bool
    disable_overlap_schedule: bool
    quantization: str | None
    mem_fraction_static: float | None
    chunked_prefill_size: int | None
    cuda_graph_max_bs_decode: int | None
    page_size: int | None
    max_running_requests: int | None
    mamba_full_memory_ratio: float | None
    max_mamba_cache_size: int | None
    mamba_radix_cache_strategy: str | None
    context_length: str | None
    kv_offloading_size: float | None
    kv_offloading_backend: str | None
    lmcache_config: str | None
    enable_hierarchical_cache: bool
    hicache_ratio: float | None
    hicache_size: float | None
    host_memory_gib: float | None
    disaggregation_mode: str | None
    disaggregation_transfer_backend: str | None
    kv_transfer_config: str | None
    from_log: str | None
    save: str | None
    hub_timeout: float | None
    json_out: bool


def _replay_log(f: CapacityFlags, log_path: str) -> None:
    """--from-log: re-run a vLLM / SGLang start-up log through the engine model, term by term."""
    from planner.api import from_log_report

    report = from_log_report(
        log_path=log_path,
        gpu=f.gpu or None,
        preset=f.preset,
        model=f.model,
        revision=f.revision,
        version=f.engine_version,
    )
    if f.json_out:
        emit_json(report)
    else:
        render_log_report(report)


def _checked_common(f: CapacityFlags) -> tuple[int | None, bool, int | None]:
    """The checks both ledgers share, each failure one error naming its flag, and what they
    agree on: the context (None: the model's own), whether it is vLLM's `auto`, the block
    size."""
    from planner.core.engines.vllm import MAX_MODEL_LEN_AUTO
    from planner.errors import InputError
    from planner.sources.files import check_writable

    if not f.gpu:
        raise InputError("--gpu", "required: a GPU id such as mi300x or h100 (see `planner gpus`)")
    if f.save is not None:
        check_writable(f.save, "--save")
    if f.gpu_memory_gib is not None and not 0 < f.gpu_memory_gib <= MAX_GPU_MEMORY_GIB:
        raise InputError(
            "--gpu-memory-gib",
            f"must be in (0, {MAX_GPU_MEMORY_GIB:,}] GiB (got {f.gpu_memory_gib})",
        )
    if f.ledger not in ("engine", "textbook"):
        raise InputError("--ledger", f"{f.ledger!r}; accepted: engine, textbook")
    if f.engine is not None and f.engine not in ("vllm", "sglang"):
        raise InputError("--engine", f"{f.engine!r}; accepted: vllm, sglang")
    if not f.enable_lora and (f.max_lora_rank is not None or f.max_loras is not None):
        typed = "--max-lora-rank" if f.max_lora_rank is not None else "--max-loras"
        raise InputError(typed, "--max-lora-rank / --max-loras need --enable-lora")
    given_lengths = (
        ("--context", f.context),
        ("--max-model-len", f.max_model_len),
        ("--context-length", f.context_length),
    )
    lengths = [max_model_len_value(v, flag) for flag, v in given_lengths if v is not None]
    if len(set(lengths)) > 1:
        raise InputError("--context", "--context, --max-model-len and --context-length disagree")
    ctx = lengths[0] if lengths else None
    auto = ctx == MAX_MODEL_LEN_AUTO
    if auto:
        ctx = None  # vLLM starts from the model's own length and fits it
    blocks = {v for v in (f.block_size, f.page_size) if v is not None}
    if len(blocks) > 1:
        raise InputError("--block-size", "--block-size and --page-size disagree")
    block = blocks.pop() if blocks else None
    if auto and f.ledger != "engine":
        raise InputError(
            "--context", "auto is vLLM's fit to its KV cache; the textbook ledger takes a length"
        )
    return ctx, auto, block


def _engine_ledger_settings(
    f: CapacityFlags, ctx: int | None, auto: bool, block: int | None
) -> dict[str, object]:
    """The serve plan's settings the flags state for the engine ledger; a textbook knob, or
    the other engine's flag, is one error naming it."""
    from planner.core.disagg import disagg_role
    from planner.errors import InputError

    textbook_only = {
        "--headroom": f.headroom,
        "--workspace-gib": f.workspace_gib,
        "--compute-batch-cap": f.compute_batch_cap,
    }
    for flag, value in textbook_only.items():
        if value is not None:
            raise InputError(flag, "a textbook-ledger knob: add --ledger textbook")
    name = f.engine or "vllm"
    if f.ep is not None:
        ep_size, enable_expert_parallel = _expert_parallel(
            name,
            f.tp,
            f.dp,
            f.dp_attention,
            f.attn_dp_size,
            f.ep,
            f.ep_size,
            f.enable_expert_parallel,
        )
        f = replace(f, ep_size=ep_size, enable_expert_parallel=enable_expert_parallel)
    for flag in _given(f, SGLANG_ONLY_FLAGS if name == "vllm" else VLLM_ONLY_FLAGS):
        raise InputError(flag, f"not a {name} flag (pass --engine to pick the engine)")
    parallel = _data_parallel(name, f.tp, f.dp, f.dp_attention, f.attn_dp_size, f.ep_size)
    settings: dict[str, object] = {
        "engine": name,
        "version": f.engine_version,
        "tp": f.tp,
        "pp": f.pp,
        "context_tokens": ctx,
        "max_model_len_auto": auto,
        "mean_tokens": f.mean_len,
        "kv_cache_dtype": engine_kv_dtype(name, f.kv_dtype, f.engine_version),
        "dtype": f.dtype or "auto",
        "quantization": f.quantization,
        "weight_dtype": f.weight_dtype,
        "memory_fraction": f.gpu_memory_utilization if name == "vllm" else f.mem_fraction_static,
        "max_num_seqs": f.max_num_seqs if name == "vllm" else f.max_running_requests,
        "block_size": block,
        "max_num_batched_tokens": f.max_num_batched_tokens
        if name == "vllm"
        else f.chunked_prefill_size,
        "extra": _engine_extra(
            name,
            enforce_eager=f.enforce_eager,
            async_scheduling=f.async_scheduling,
            enable_prefix_caching=f.enable_prefix_caching,
            all2all_backend=f.all2all_backend,
            enable_dbo=f.enable_dbo,
            stream_interval=f.stream_interval,
            scheduler_recv_interval=f.scheduler_recv_interval,
            max_prefill_tokens=f.max_prefill_tokens,
            kv_cache_memory_bytes=f.kv_cache_memory_bytes,
            enable_lora=f.enable_lora,
            enable_expert_parallel=f.enable_expert_parallel,
            max_cudagraph_capture_size=f.max_cudagraph_capture_size,
            enable_chunked_prefill=f.enable_chunked_prefill,
            flashinfer=f.flashinfer,
            max_lora_rank=f.max_lora_rank,
            max_loras=f.max_loras,
            usage_context=f.usage_context,
            colocated=f.colocated,
            reserved_bytes=reserved_bytes(f.reserved_gib),
            cuda_graph_max_bs_decode=f.cuda_graph_max_bs_decode,
            ep_num_redundant_experts=f.ep_num_redundant_experts,
            enable_two_batch_overlap=f.enable_two_batch_overlap or None,
            moe_a2a_backend=f.moe_a2a_backend,
            moe_dense_tp_size=f.moe_dense_tp_size,
            enable_dp_lm_head=f.enable_dp_lm_head or None,
            disable_radix_cache=f.disable_radix_cache or None,
            disable_cuda_graph=f.disable_cuda_graph or None,
            disable_overlap_schedule=f.disable_overlap_schedule or None,
            mamba_full_memory_ratio=f.mamba_full_memory_ratio,
            max_mamba_cache_size=f.max_mamba_cache_size,
            mamba_radix_cache_strategy=f.mamba_radix_cache_strategy,
        )
        | parallel,
    }
    settings["offload"] = offload_settings(
        gpu=f.gpu,
        kv_offloading_size=f.kv_offloading_size,
        kv_offloading_backend=f.kv_offloading_backend,
        lmcache_config=f.lmcache_config,
        hicache=f.enable_hierarchical_cache,
        hicache_ratio=f.hicache_ratio,
        hicache_size=f.hicache_size,
        host_memory_gib=f.host_memory_gib,
    )
    settings["disagg"] = disagg_role(
        name, f.disaggregation_mode, f.disaggregation_transfer_backend, f.kv_transfer_config
    )
    settings |= host_settings(name, vars(f))
    return {k: v for k, v in settings.items() if v is not None}


# Each engine's own flags (the other engine refuses them), and the engine ledger's other
# options (the textbook ledger refuses them all), by the CapacityFlags field that holds each.
VLLM_ONLY_FLAGS = {
    "--gpu-memory-utilization": "gpu_memory_utilization",
    "--max-num-batched-tokens": "max_num_batched_tokens",
    "--max-num-seqs": "max_num_seqs",
    "--kv-cache-memory-bytes": "kv_cache_memory_bytes",
    "--enable-expert-parallel": "enable_expert_parallel",
    "--max-cudagraph-capture-size": "max_cudagraph_capture_size",
    "--enable-chunked-prefill": "enable_chunked_prefill",
    "--async-scheduling": "async_scheduling",
    "--enable-prefix-caching": "enable_prefix_caching",
    "--all2all-backend": "all2all_backend",
    "--enable-dbo": "enable_dbo",
    "--flashinfer": "flashinfer",
    "--kv-offloading-size": "kv_offloading_size",
    "--kv-offloading-backend": "kv_offloading_backend",
    "--lmcache-config": "lmcache_config",
    "--distributed-executor-backend": "distributed_executor_backend",
    "--data-parallel-size-local": "data_parallel_size_local",
    "--data-parallel-address": "data_parallel_address",
}


SGLANG_ONLY_FLAGS = {
    "--nnodes": "nnodes",
    "--node-rank": "node_rank",
    "--dist-init-addr": "dist_init_addr",
    "--mem-fraction-static": "mem_fraction_static",
    "--chunked-prefill-size": "chunked_prefill_size",
    "--max-running-requests": "max_running_requests",
    "--cuda-graph-max-bs": "cuda_graph_max_bs_decode",
    "--scheduler-recv-interval": "scheduler_recv_interval",
    "--max-prefill-tokens": "max_prefill_tokens",
    "--mamba-full-memory-ratio": "mamba_full_memory_ratio",
    "--max-mamba-cache-size": "max_mamba_cache_size",
    "--mamba-radix-cache-strategy": "mamba_radix_cache_strategy",
    "--enable-hierarchical-cache": "enable_hierarchical_cache",
    "--hicache-ratio": "hicache_ratio",
    "--hicache-size": "hicache_size",
    "--dp-attention": "dp_attention",
    "--attn-dp-size": "attn_dp_size",
    "--ep-size": "ep_size",
    "--ep-num-redundant-experts": "ep_num_redundant_experts",
    "--enable-two-batch-overlap": "enable_two_batch_overlap",
    "--moe-a2a-backend": "moe_a2a_backend",
    "--moe-dense-tp-size": "moe_dense_tp_size",
    "--enable-dp-lm-head": "enable_dp_lm_head",
    "--disable-radix-cache": "disable_radix_cache",
    "--disable-cuda-graph": "disable_cuda_graph",
    "--disable-overlap-schedule": "disable_overlap_schedule",
}


ENGINE_LEDGER_FLAGS = {
    "--ep": "ep",
    "--dp": "dp",
    "--tpot": "tpot",
    "--dtype": "dtype",
    "--spec-alpha": "spec_alpha",
    "--engine": "engine",
    "--engine-version": "engine_version",
    "--quantization": "quantization",
    "--enable-lora": "enable_lora",
    "--enforce-eager": "enforce_eager",
    "--stream-interval": "stream_interval",
    "--colocated": "colocated",
    "--reserved-gib": "reserved_gib",
    "--calibration": "calibration",
    "--compare-version": "compare_version",
    "--pp": "pp",
    "--host-memory-gib": "host_memory_gib",
    "--disaggregation-mode": "disaggregation_mode",
    "--disaggregation-transfer-backend": "disaggregation_transfer_backend",
    "--kv-transfer-config": "kv_transfer_config",
}


def _given(f: CapacityFlags, table: dict[str, str]) -> list[str]:
    """The flags of `table` the user typed: a value other than the command's default."""
    return [flag for flag, name in table.items() if getattr(f, name) != _DEFAULTS[name]]


def _refuse_engine_options(f: CapacityFlags) -> None:
    """An engine-ledger option typed with --ledger textbook is one error naming it."""
    from planner.errors import InputError

    for flag in _given(f, VLLM_ONLY_FLAGS | SGLANG_ONLY_FLAGS | ENGINE_LEDGER_FLAGS):
        raise InputError(flag, "an engine-ledger option (drop --ledger textbook)")


def offload_settings(
    *,
    gpu: str | None,
    kv_offloading_size: float | None,
    kv_offloading_backend: str | None,
    lmcache_config: str | None,
    hicache: bool,
    hicache_ratio: float | None,
    hicache_size: float | None,
    host_memory_gib: float | None,
) -> dict[str, object] | None:
    """The offload flags as OffloadSettings fields (None: nothing offloaded); `gpu` "auto"
    reads the host's memory too (None: no card named, as fleet searches several)."""
    from planner.errors import InputError
    from planner.units import GIB_BYTES

    if not (kv_offloading_size or kv_offloading_backend or lmcache_config or hicache):
        if hicache_ratio is not None or hicache_size is not None:
            raise InputError("--hicache-ratio", "needs --enable-hierarchical-cache")
        if host_memory_gib is not None:
            raise InputError(
                "--host-memory-gib",
                "checks an offload tier: add --kv-offloading-size or --enable-hierarchical-cache",
            )
        return None
    if kv_offloading_backend not in (None, "native", "lmcache"):
        raise InputError(
            "--kv-offloading-backend", f"{kv_offloading_backend!r}; accepted: native, lmcache"
        )
    if lmcache_config is not None and kv_offloading_backend != "lmcache":
        raise InputError("--lmcache-config", "needs --kv-offloading-backend lmcache")
    out: dict[str, object] = {
        "kv_offloading_size_gib": kv_offloading_size,
        "kv_offloading_backend": kv_offloading_backend,
        "hicache": hicache,
        "hicache_ratio": hicache_ratio,
        "hicache_size_gb": hicache_size,
    }
    if kv_offloading_backend == "lmcache":
        from planner.sources.offload import lmcache_config as read_lmcache

        out["lmcache"] = read_lmcache(lmcache_config).model_dump()
    if host_memory_gib is not None:
        if not 0 < host_memory_gib <= MAX_HOST_MEMORY_GIB:
            raise InputError(
                "--host-memory-gib",
                f"must be in (0, {MAX_HOST_MEMORY_GIB:,}] (got {host_memory_gib})",
            )
        out["host_memory_bytes"] = int(host_memory_gib * GIB_BYTES)
        out["host_memory_source"] = "--host-memory-gib"
    elif gpu is not None and gpu.strip().lower() == "auto":
        from planner.sources.offload import host_memory_bytes

        found = host_memory_bytes()
        if found is not None:
            out["host_memory_bytes"] = found
            out["host_memory_source"] = "/proc/meminfo MemTotal"
    return {k: v for k, v in out.items() if v is not None and v is not False}


def engine_kv_dtype(engine: str, kv_dtype: str | None, version: str | None = None) -> str:
    """Our --kv-dtype as the engine's --kv-cache-dtype. 16-bit KV is the engine's auto (the
    model's dtype), but bf16 keeps the release's own spelling where it has one: `auto` is not
    16 bits for DeepSeek's sparse attention there (vLLM 0.11's fp8_ds_mla, SGLang's fp8 on
    Blackwell); fp8 is the release's spelling of it (fp8_e5m2 in vLLM before 0.4.1 and SGLang
    before 0.4.3)."""
    from planner.core.engines.common import parse_version
    from planner.core.serve import SGLANG_16BIT_KV_SINCE, VLLM_KV_DTYPE_SINCE, fp8_kv_spelling
    from planner.errors import InputError
    from planner.units import KV_DTYPES, normalize_dtype

    text = (kv_dtype or "auto").strip().lower()
    if text == "auto":
        return "auto"
    at = parse_version(version) if version else None
    fp8 = fp8_kv_spelling(engine, at)  # the release's spelling (the same byte)
    if text in ("fp8_e4m3", "fp8_e5m2"):  # the engines' own spellings
        return text if engine == "sglang" and text == "fp8_e5m2" else fp8
    if text == "fp8_ds_mla":  # vLLM's DeepSeek layout (the engine model checks the model)
        return text
    name = normalize_dtype(text, "--kv-dtype", KV_DTYPES)
    if name == "bf16":
        spelling = "bfloat16" if engine == "vllm" else "bf16"
        since = (VLLM_KV_DTYPE_SINCE if engine == "vllm" else SGLANG_16BIT_KV_SINCE)[spelling]
        return spelling if version is None or parse_version(version) >= since else "auto"
    if name == "fp16":
        return "auto"
    if name == "fp8":
        return fp8
    raise InputError(
        "--kv-dtype", f"{engine} has no {name} KV cache; accepted: fp16, bf16 (auto), fp8"
    )


# Data-parallel / expert-parallel ranks beyond any deployment the engine model describes.
MAX_PARALLEL_RANKS = 4096


def _expert_parallel(
    engine: str,
    tp: int,
    dp: int | None,
    dp_attention: bool,
    attn_dp_size: int | None,
    ep: int,
    ep_size: int | None,
    enable_expert_parallel: bool,
) -> tuple[int | None, bool]:
    """--ep as the engine's own flags: SGLang's --ep-size, vLLM's --enable-expert-parallel
    (its experts then span TP x DP); 1 or the span the engine's layout gives (as `simulate`
    checks it), never beside the engine's own flag."""
    from planner.api.bench_instance import check_ep
    from planner.errors import InputError

    if ep_size is not None or enable_expert_parallel:
        own = "--ep-size" if ep_size is not None else "--enable-expert-parallel"
        raise InputError("--ep", f"give --ep or the engine's own {own}, not both")
    if not 1 <= ep <= MAX_PARALLEL_RANKS:
        raise InputError("--ep", f"must be in [1, {MAX_PARALLEL_RANKS:,}] (got {ep})")
    groups = 1
    if engine == "vllm":
        groups = dp or 1
    elif dp_attention or attn_dp_size:
        groups = attn_dp_size or dp or 1
    check_ep(ep, engine, tp, groups)
    if ep == 1:
        return None, False
    return (ep, False) if engine == "sglang" else (None, True)


def _data_parallel(
    engine: str,
    tp: int,
    dp: int | None,
    dp_attention: bool,
    attn_dp_size: int | None,
    ep: int | None,
) -> dict[str, object]:
    """The data-parallel layout as the engine's settings fields: vLLM data_parallel_size;
    SGLang dp_size (whole replicas behind its DP controller), attn_dp_size (from --attn-dp-size,
    or --dp with --dp-attention) and ep_size."""
    from planner.errors import InputError

    for flag, value in (("--dp", dp), ("--attn-dp-size", attn_dp_size), ("--ep-size", ep)):
        if value is not None and not 1 <= value <= MAX_PARALLEL_RANKS:
            raise InputError(flag, f"must be in [1, {MAX_PARALLEL_RANKS:,}] (got {value})")
    if engine == "vllm":
        return {"data_parallel_size": dp} if dp and dp > 1 else {}
    fields: dict[str, object] = {}
    if dp_attention or attn_dp_size:
        groups = attn_dp_size or dp or 1
        if dp not in (None, 1, groups):
            # 0.5.23 rejects --dp-size > 1 beside --attn-dp-size > 1; before it, --dp-size
            # with --enable-dp-attention counted the groups
            raise InputError("--attn-dp-size", f"{groups} disagrees with --dp {dp}")
        if tp % groups:
            flag = "--attn-dp-size" if attn_dp_size else "--dp"
            raise InputError(flag, f"{groups} attention-DP groups must divide --tp {tp}")
        if groups > 1:
            fields["attn_dp_size"] = groups
    elif dp and dp > 1:
        fields["dp_size"] = dp
    if ep and ep > 1:
        fields["ep_size"] = ep
    return fields


def _engine_extra(engine: str, **given: object) -> dict[str, object]:
    """The remaining engine flags, as that engine's settings fields (defaults left out)."""
    reserved = {"reserved_bytes": given["reserved_bytes"]} if given["reserved_bytes"] else {}
    if engine == "vllm":
        names = (
            "enforce_eager",
            "kv_cache_memory_bytes",
            "stream_interval",
            "usage_context",
            "colocated",
            "enable_expert_parallel",
            "max_cudagraph_capture_size",
            "all2all_backend",
            "enable_dbo",
        )
        # unset means None, False or the default entry point; a 0 the user typed is kept (and
        # refused by the settings), not mistaken for False
        extra = {k: given[k] for k in names if given[k] not in (None, "serve")}
        extra = {k: v for k, v in extra.items() if v is not False}
        for tri_state in (
            "flashinfer",
            "enable_chunked_prefill",
            "async_scheduling",
            "enable_prefix_caching",
        ):
            if given[tri_state] is not None:
                extra[tri_state] = given[tri_state]
        extra |= reserved
        if given["enable_lora"]:
            extra["enable_lora"] = True
            for k in ("max_lora_rank", "max_loras"):
                if given[k] is not None:
                    extra[k] = given[k]
        return extra
    keys = (
        "stream_interval",
        "scheduler_recv_interval",
        "max_prefill_tokens",
        "cuda_graph_max_bs_decode",
        "mamba_full_memory_ratio",
        "max_mamba_cache_size",
        "mamba_radix_cache_strategy",
        "ep_num_redundant_experts",
        "enable_two_batch_overlap",
        "moe_a2a_backend",
        "moe_dense_tp_size",
        "enable_dp_lm_head",
        "disable_radix_cache",
        "disable_cuda_graph",
        "disable_overlap_schedule",
    )
    return {k: given[k] for k in keys if given[k] is not None} | reserved


def _serve(f: CapacityFlags, settings: dict[str, object]) -> None:
    """The engine ledger: plan, save, print; exit 1 when the engine would not start."""
    from planner.api import serve_report

    profile = None
    if f.calibration is not None:
        from planner.sources.calibration import load_calibration

        profile = load_calibration(f.calibration)

    engine = settings.get("engine", "vllm")
    speculation = None if f.spec_alpha is None else {"alpha": f.spec_alpha, "method": f.spec_method}

    def run(values: dict[str, object]) -> tuple[Any, dict[str, Any]]:
        return serve_report(
            calibration=profile if values.get("engine", "vllm") == engine else None,
            gpu=f.gpu,
            preset=f.preset,
            model=f.model,
            revision=f.revision,
            gpu_memory_gib=f.gpu_memory_gib,
            settings=dict(values),
            tpot_ms=f.tpot,
            speculation=speculation,
        )

    plan, payload = run(settings)
    if f.compare_version is not None:
        from planner.api.compare import version_comparison

        payload["comparison"] = version_comparison(plan, payload, f.compare_version, run, settings)
    if f.save is not None:
        from planner.api import serve_lock
        from planner.plan import dump
        from planner.sources.files import saved_model_ref, write_file

        lock = serve_lock(
            payload,
            preset=f.preset,
            model=None if f.model is None else saved_model_ref(f.model, f.save),
            revision=f.revision,
            gpu=f.gpu,
            gpu_memory_gib=f.gpu_memory_gib,
            settings=settings,
            tpot_ms=f.tpot,
            calibration=None if f.calibration is None else saved_model_ref(f.calibration, f.save),
        )
        write_file(f.save, "--save", dump(lock))
    if f.json_out:
        emit_json(payload)
    else:
        render_serve(plan, payload, f.explain)
        if f.compare_version is not None:
            render_comparison(payload["comparison"])
    if not plan.fits:
        raise typer.Exit(1)


def _textbook(f: CapacityFlags, settings: dict[str, object]) -> None:
    """The teaching ledger of docs/method.md, unchanged figures and keys."""
    from planner.api import capacity_report, lock_for
    from planner.core.capacity import DEFAULT_BLOCK_TOKENS, DoesNotFit, capacity_json
    from planner.errors import InputError
    from planner.units import GIB_BYTES

    workspace = settings.pop("workspace_gib")
    if workspace is not None:
        assert isinstance(workspace, float)
        if not 0 <= workspace <= MAX_GPU_MEMORY_GIB:
            raise InputError(
                "--workspace-gib", f"must be in [0, {MAX_GPU_MEMORY_GIB:,}] GiB (got {workspace})"
            )
        settings["workspace_bytes"] = round(workspace * GIB_BYTES)
    if settings.get("block_tokens") is None:
        settings["block_tokens"] = DEFAULT_BLOCK_TOKENS
    settings = {k: v for k, v in settings.items() if v is not None}
    try:
        plan, _prediction = capacity_report(
            gpu=f.gpu,
            preset=f.preset,
            model=f.model,
            revision=f.revision,
            gpu_memory_gib=f.gpu_memory_gib,
            settings=settings,
            engine=None,
        )
    except DoesNotFit as exc:
        if not f.json_out:
            raise
        emit_json({"ledger": "textbook", "fits": False, "reasons": [str(exc)], "suggestions": []})
        raise typer.Exit(1) from exc
    if f.save is not None:
        from planner.plan import dump
        from planner.sources.files import saved_model_ref, write_file

        lock = lock_for(
            plan,
            None,
            preset=f.preset,
            model=None if f.model is None else saved_model_ref(f.model, f.save),
            revision=f.revision,
            gpu=f.gpu,
            gpu_memory_gib=f.gpu_memory_gib,
            settings=settings,
            engine=None,
        )
        write_file(f.save, "--save", dump(lock))
    if f.json_out:
        emit_json(capacity_json(plan))
        return
    render_capacity(plan, f.explain)
