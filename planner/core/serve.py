"""The serve plan: the engine's own start-up arithmetic turned into a verdict and a launch line.

Every figure comes from the engine model (vLLM or SGLang, by version) run on the exact flags the
printed line sets, so pasting the line reproduces the prediction. The plan says whether the
engine would start, how many sequences it runs at the mean length, what binds them, and, when it
would not start, which re-planned alternatives do (docs/method.md, "The serve plan").
"""

from __future__ import annotations

import json
import math
import shlex
from typing import Any, Literal, NamedTuple

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from planner.core import hosts
from planner.core.disagg import SGLANG_TRANSFER_BACKEND_FLAG_SINCE, DisaggRole
from planner.core.disagg import check_release as check_disagg_release
from planner.core.engines import release, sglang, vllm
from planner.core.engines.common import ENGINE_DTYPES as DTYPE_FLAG_NAMES
from planner.core.engines.common import (
    EnginePrediction,
    NoKvCache,
    TermSource,
    as_of,
    parse_version,
    refuse_before,
    version_text,
)
from planner.core.engines.registry import native_since, registry_gap
from planner.core.kv import tp_replication
from planner.core.offload import KvTiers, OffloadSettings, check_offload_flags
from planner.core.parallel import line_max_num_seqs, ranks_share_tp
from planner.core.quantization import checkpoint_load_gap, checkpoint_method
from planner.core.search import largest_passing
from planner.core.specs import GpuSpec, ModelSpec
from planner.core.step.overhead import SGLANG_OVERLAP_SINCE
from planner.errors import InputError
from planner.units import GIB_BYTES, ceil_div

# How many times the plan is re-run with its own max_num_seqs before it must have settled: a
# smaller max_num_seqs only frees memory (fewer sampler rows, fewer CUDA-graph sizes), so the
# sequence count the KV cache holds can only grow and the loop ends after one or two passes.
MAX_PLAN_PASSES = 4
# Values each engine's argument parser accepts (vLLM vllm/config/cache.py CacheDType,
# vllm/config/model.py ModelDType, 0.11-0.33; SGLang srt/server_args.py choices, 0.5.x). A
# value outside these is refused before anything is printed.
#
# vLLM's --block-size choices by release, each from the first release of its span (read in
# each wheel: vllm/engine/arg_utils.py `choices` through 0.8.4, then the BlockSize Literal of
# vllm/config.py and vllm/config/cache.py, which the parser turns into its choices). Release
# branches differed, so the spans are irregular: 0.3.3-0.4.0 took 128 and 0.4.1 did not,
# 0.5.5 alone took up to 2048, 0.6.5 lacks the 64 and 128 of 0.6.4 and 0.6.6.
VLLM_BLOCK_SIZE_CHOICES: tuple[tuple[tuple[int, int, int], tuple[int, ...]], ...] = (
    ((0, 0, 0), (8, 16, 32)),
    ((0, 3, 3), (8, 16, 32, 128)),
    ((0, 4, 1), (8, 16, 32)),
    ((0, 5, 5), (8, 16, 32, 128, 256, 512, 1024, 2048)),
    ((0, 6, 0), (8, 16, 32)),
    ((0, 6, 4), (8, 16, 32, 64, 128)),
    ((0, 6, 5), (8, 16, 32)),
    ((0, 6, 6), (8, 16, 32, 64, 128)),
    ((0, 8, 5), (1, 8, 16, 32, 64, 128)),
    ((0, 11, 1), (1, 8, 16, 32, 64, 128, 256)),
)
# From 0.18.0 the parser takes any positive integer (CacheConfig.block_size: int) and the
# attention backend splits each block into kernel blocks of a size it supports (FlashAttention
# and Triton any multiple of 16, FlashInfer 16 / 32 / 64: get_supported_kernel_block_sizes in
# vllm/v1/attention/backends/, 0.18.0), so a multiple of 16 runs on every backend: the planner
# takes those beside the sizes the last listed release took.
VLLM_ANY_BLOCK_SIZE_SINCE = (0, 18, 0)
VLLM_KERNEL_BLOCK_ALIGNMENT = 16
# A hybrid (attention + Mamba / linear-attention) model's attention block size is set by vLLM
# itself, in multiples of the kernel's 16-token alignment, so that an attention page covers a
# state page (vllm/model_executor/models/config.py HybridAttentionMambaModelConfig; its log
# reads "Setting attention block size to 544 tokens"). Such a size, read back from a log or a
# cache_config_info label, is accepted when it is the one vLLM derives, and left off the line.
HYBRID_BLOCK_ALIGNMENT = 16
# vLLM's fp8 spellings by the release that took them (engine/arg_utils.py --kv-cache-dtype
# choices, read in the wheels): fp8_e5m2 alone from 0.3.0 through 0.4.0, fp8 alone in 0.4.1 and
# 0.4.2, all three from 0.4.3. The ledger sizes each at a byte.
VLLM_FP8_KV_SPELLINGS = (
    ((0, 3, 0), ("fp8_e5m2",)),
    ((0, 4, 1), ("fp8",)),
    ((0, 4, 3), ("fp8", "fp8_e4m3", "fp8_e5m2")),
)
# The spellings every release from 0.4.3 takes (the 16-bit ones below by their own release).
VLLM_KV_CACHE_DTYPES = ("auto", *VLLM_FP8_KV_SPELLINGS[-1][1])
# SGLang's: fp8_e5m2 alone before it took fp8_e4m3 (sglang.FP8_E4M3_KV_SINCE), e4m3 first after.
SGLANG_FP8_KV_SPELLINGS = (
    ((0, 0, 0), ("fp8_e5m2",)),
    (sglang.FP8_E4M3_KV_SINCE, ("fp8_e4m3", "fp8_e5m2")),
)
# vLLM's flag for the largest CUDA-graph batch: --cuda-graph-sizes N from 0.9.0 (one value: sizes
# 1, 2, 4 and every 8 to N; SchedulerConfig, config.py 0.9.0), --max-cudagraph-capture-size from
# 0.11.1 (engine/arg_utils.py, read in the 0.8.5, 0.9.0, 0.11.0 and 0.11.1 wheels); before 0.9.0
# no flag sets it.
VLLM_CUDA_GRAPH_SIZES_SINCE = (0, 9, 0)
VLLM_CAPTURE_SIZE_FLAG_SINCE = (0, 11, 1)
SGLANG_KV_CACHE_DTYPES = ("auto", *SGLANG_FP8_KV_SPELLINGS[-1][1])
# --kv-cache-dtype spellings and the first release that takes each (vLLM vllm/config/cache.py
# CacheDType: bfloat16 from 0.11, float16 from 0.18, DeepSeek's fp8_ds_mla from 0.12; SGLang
# server_args.py choices: bf16 / bfloat16 from 0.5.4); the 16-bit ones are two bytes.
VLLM_KV_DTYPE_SINCE = {"bfloat16": (0, 11, 0), "float16": (0, 18, 0), "fp8_ds_mla": (0, 12, 0)}
SGLANG_16BIT_KV_SINCE = {"bf16": (0, 5, 4), "bfloat16": (0, 5, 4)}
ENGINE_DTYPES = ("auto", *DTYPE_FLAG_NAMES)
# Utilisation the suggestions may go up to: the engines' own defaults leave 8-10% of the device
# to the allocator's fragmentation, other processes and peaks the profile does not see.
MAX_SUGGESTED_UTILIZATION = 0.95
# Decimals a memory fraction is printed (and pinned) to.
FRACTION_SCALE = 10_000
# A fraction already on the 4-decimal grid (a pasted line's 0.7605) is kept: its float product
# with the scale can land a hair under the integer (7604.9999...), which floor would take a step
# down. Far below the grid's step, far above a double's rounding error.
FRACTION_GRID_TOLERANCE = 1e-9


def pinned_fraction(fraction: float) -> float:
    """The fraction a line prints: floored to 4 decimals (never above what the engine takes)."""
    return math.floor(fraction * FRACTION_SCALE + FRACTION_GRID_TOLERANCE) / FRACTION_SCALE


# SGLang starts with a pool smaller than --context-length: it caps a request at
# min(context, pool) - 1 tokens and its input 5 below that, and refuses to start only when no
# input is left ("Memory pool size is too small"; managers/tp_worker.py, read in 0.4.10 and
# 0.5.4-0.5.23, where 0.5.23 also logs a warning for the small pool).
SGLANG_REQUEST_INPUT_MARGIN_TOKENS = 5
# TP sizes tried for a suggestion: one node of up to 8 GPUs, then multi-node groups.
SUGGESTED_TP_LIMIT = 64


class ServeSettings(BaseModel):
    """What the user asked for; None means the engine's own default for that version and GPU."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    engine: Literal["vllm", "sglang"] = "vllm"
    version: str | None = None
    tp: int = Field(default=1, ge=1)
    pp: int = Field(default=1, ge=1)
    context_tokens: int = Field(gt=0, description="--max-model-len / --context-length")
    max_model_len_auto: bool = Field(
        default=False,
        description="vLLM --max-model-len auto (0.14+): the engine fits the length to its KV "
        "cache, starting from context_tokens (the model's own length)",
    )
    mean_tokens: int = Field(gt=0)
    kv_cache_dtype: str = "auto"
    dtype: str = "auto"
    quantization: str | None = None
    memory_fraction: float | None = Field(
        default=None, gt=0, le=1, description="--gpu-memory-utilization / --mem-fraction-static"
    )
    max_num_seqs: int | None = Field(default=None, gt=0)
    block_size: int | None = Field(default=None, gt=0)
    max_num_batched_tokens: int | None = Field(
        default=None, gt=0, description="vLLM --max-num-batched-tokens / SGLang chunked prefill"
    )
    extra: dict[str, Any] = Field(default_factory=dict, description="other engine flags as given")
    latency_cap: int | None = Field(default=None, gt=0, description="batch cap from --tpot")
    latency_reason: str | None = None
    disagg: DisaggRole | None = Field(
        default=None,
        description="prefill/decode disaggregation flags, or vLLM's --kv-transfer-config (its "
        "connector's GPU-side buffers join the ledger)",
    )
    offload: OffloadSettings | None = Field(
        default=None, description="KV offload tiers (vLLM --kv-offloading-size, SGLang HiCache)"
    )
    nnodes: int | None = Field(
        default=None,
        gt=0,
        description="SGLang --nnodes as a pasted line over hosts gives it (checked against the "
        "hosts the layout spans; the line states its own)",
    )
    distributed_executor_backend: str | None = Field(
        default=None,
        description="vLLM --distributed-executor-backend (ray or mp) as given, and in a plan the "
        "one its line names (Ray where one server spans hosts: hosts.executor)",
    )
    data_parallel_size_local: int | None = Field(
        default=None,
        gt=0,
        description="vLLM --data-parallel-size-local as given (checked against the ranks a "
        "host runs; the line states its own)",
    )


class Suggestion(BaseModel):
    """A change that makes the plan fit, verified by re-planning it."""

    model_config = ConfigDict(extra="forbid")

    change: str
    flags: dict[str, Any]
    max_num_seqs: int
    kv_cache_tokens: int


# What binds a plan's batch: the KV cache, the latency budget, the engine's own cap, or nothing
# (the engine would not start).
Binding = Literal["memory", "latency", "engine", "none"]


class ServePlan(BaseModel):
    """The verdict, the engine's figures and the one line that realises them."""

    model_config = ConfigDict(extra="forbid")

    engine: str
    fits: bool
    reasons: list[str]
    prediction: EnginePrediction | None
    flags: dict[str, Any] = Field(description="the engine settings the line sets (field names)")
    command: str
    max_num_seqs: int
    max_seqs_at_mean: int
    max_seqs_at_context: int
    cap: int
    cap_source: str
    binding: Binding
    binding_reason: str
    kv_tiers: KvTiers | None = Field(default=None, description="where KV lives beyond the GPU")
    warnings: list[str]
    suggestions: list[Suggestion] = Field(default_factory=list)
    speculation: dict[str, Any] | None = Field(
        default=None, description="speculative decoding decided at max_num_seqs (--spec-alpha)"
    )


# The GPU vendors the engine model covers: vLLM and SGLang on CUDA and ROCm. Intel Gaudi runs
# vLLM through its own plugin (vllm-gaudi: HPU graphs, bucketed shapes, its own memory profile),
# which this model does not describe.
ENGINE_MODEL_VENDORS = ("nvidia", "amd")


def fp8_kv_spellings(engine: str, version: tuple[int, int, int] | None) -> tuple[str, ...]:
    """The --kv-cache-dtype spellings of an fp8 cache an engine release takes (None: the
    newest; none before vLLM 0.3.0)."""
    spans = VLLM_FP8_KV_SPELLINGS if engine == "vllm" else SGLANG_FP8_KV_SPELLINGS
    return spans[-1][1] if version is None else as_of(spans, version, ())


def fp8_kv_spelling(engine: str, version: tuple[int, int, int] | None) -> str:
    """The spelling a line gives a release's fp8 cache (its first; `fp8` where none)."""
    return next(iter(fp8_kv_spellings(engine, version)), "fp8")


def vllm_block_sizes(version: tuple[int, int, int]) -> tuple[int, ...]:
    """The --block-size values a vLLM release's parser lists (VLLM_BLOCK_SIZE_CHOICES)."""
    return as_of(VLLM_BLOCK_SIZE_CHOICES, version, VLLM_BLOCK_SIZE_CHOICES[0][1])


def vllm_takes_block_size(version: tuple[int, int, int], block: int) -> bool:
    """Whether a vLLM release starts with --block-size `block`: a listed size, or from
    VLLM_ANY_BLOCK_SIZE_SINCE any multiple of the kernels' alignment."""
    if block in vllm_block_sizes(version):
        return True
    aligned = block > 0 and block % VLLM_KERNEL_BLOCK_ALIGNMENT == 0
    return aligned and version >= VLLM_ANY_BLOCK_SIZE_SINCE


def vllm_block_sizes_text(version: tuple[int, int, int]) -> str:
    """What a vLLM release takes for --block-size, in words."""
    listed = ", ".join(map(str, vllm_block_sizes(version)))
    if version >= VLLM_ANY_BLOCK_SIZE_SINCE:
        return f"{listed} or any multiple of {VLLM_KERNEL_BLOCK_ALIGNMENT}"
    return listed


def check_kv_cache_dtype(s: ServeSettings) -> None:
    """--kv-cache-dtype must be a spelling the release takes and the ledger sizes."""

    version = release(s.engine, s.version)
    plain = ("auto", *fp8_kv_spellings(s.engine, version))
    if s.engine == "vllm":
        name, since = "vLLM", VLLM_KV_DTYPE_SINCE
    else:
        name, since = "SGLang", SGLANG_16BIT_KV_SINCE
    accepted = (*plain, *(k for k, v in since.items() if version >= v))
    if s.kv_cache_dtype not in accepted:
        raise InputError(
            "--kv-cache-dtype",
            f"{s.kv_cache_dtype!r}: {name} {'.'.join(map(str, version))} takes "
            + ", ".join(accepted),
        )


def check_flags(s: ServeSettings, gpu: GpuSpec, model: ModelSpec | None = None) -> None:
    """Refuse values the engine's own parser (or the GPU) would refuse, naming the flag."""
    if gpu.vendor not in ENGINE_MODEL_VENDORS:
        raise InputError(
            "--gpu",
            f"{gpu.id} ({gpu.vendor}) runs {s.engine} through its own backend (vllm-gaudi on "
            "Gaudi), whose memory the engine model does not cover; `--ledger textbook` plans it "
            "from the teaching ledger",
        )
    if s.max_model_len_auto and s.engine != "vllm":
        raise InputError(
            "--context",
            "auto is vLLM's --max-model-len auto (0.14+); SGLang's --context-length takes a length",
        )
    version = release(s.engine, s.version)
    if s.engine == "vllm":
        block = s.block_size
        derived = model is not None and is_hybrid(model) and block is not None
        if (
            block is not None
            and not vllm_takes_block_size(version, block)
            and not (derived and block % HYBRID_BLOCK_ALIGNMENT == 0)
        ):
            raise InputError(
                "--block-size",
                f"vLLM {version_text(version)} takes {vllm_block_sizes_text(version)} "
                f"(got {block})",
            )
    check_kv_cache_dtype(s)
    if s.engine == "vllm":
        _check_vllm_flags_taken(s, version)
    if s.offload is not None:
        check_offload_flags(s.engine, version, s.offload)
    if s.engine == "vllm":
        _check_vllm_connector(s, version)
    if s.disagg is not None:
        check_disagg_release(s.disagg, s.engine, version)
    hosts.check(
        host_span(s, gpu), s.nnodes, s.distributed_executor_backend, s.data_parallel_size_local
    )
    if s.dtype not in ENGINE_DTYPES:
        raise InputError("--dtype", f"{s.dtype!r}; accepted: {', '.join(ENGINE_DTYPES)}")
    if s.dtype == "bfloat16" and not gpu.supports_bf16:
        raise InputError("--dtype", f"{gpu.name} has no bf16 support; use --dtype half")
    if (
        s.engine == "vllm"
        and s.max_num_seqs is not None
        and s.max_num_batched_tokens is not None
        and s.max_num_batched_tokens < s.max_num_seqs
    ):
        # vLLM's SchedulerConfig refuses this at start-up.
        raise InputError(
            "--max-num-batched-tokens",
            f"{s.max_num_batched_tokens:,} is below --max-num-seqs {s.max_num_seqs:,}: vLLM "
            "needs room for one token of every running sequence",
        )
    if s.mean_tokens > s.context_tokens:
        raise InputError(
            "--mean-len", f"{s.mean_tokens:,} is above the context {s.context_tokens:,}"
        )


def _check_vllm_flags_taken(s: ServeSettings, version: tuple[int, int, int]) -> None:
    """Refuse a vLLM flag the user gave that the release does not have yet."""
    text = version_text(version)
    if s.extra.get("max_cudagraph_capture_size") is not None and (
        version < VLLM_CUDA_GRAPH_SIZES_SINCE
    ):
        raise InputError(
            "--max-cudagraph-capture-size",
            f"vLLM {text} has no flag for it (--cuda-graph-sizes from "
            f"{version_text(VLLM_CUDA_GRAPH_SIZES_SINCE)}, --max-cudagraph-capture-size from "
            f"{version_text(VLLM_CAPTURE_SIZE_FLAG_SINCE)})",
        )
    flag = "--kv-cache-memory-bytes"
    asked = {flag: s.extra.get("kv_cache_memory_bytes") is not None}
    refuse_before("vLLM", version, {flag: vllm.KV_CACHE_MEMORY_BYTES_SINCE}, asked)


def _check_vllm_connector(s: ServeSettings, version: tuple[int, int, int]) -> None:
    """Refuse a KV connector the release's factory does not register yet (named by
    --engine-version: the newest release, the default, has them all; a disaggregated pool's
    NIXL is the planner's own choice), once the flags that start one are the release's."""
    connector, _chunk = vllm_connector(s)
    since = vllm.CONNECTOR_SINCE.get(connector or "")
    if since is not None and version < since:
        raise InputError(
            "--engine-version",
            f"vLLM {version_text(version)} has no {connector} (from {version_text(since)})",
        )


def resolved_dtype(model: ModelSpec, gpu: GpuSpec, s: ServeSettings) -> tuple[str, list[str]]:
    """The --dtype to launch with: `auto` unless the GPU cannot run the checkpoint's bf16."""
    if s.dtype == "auto" and model.native_dtype == "bf16" and not gpu.supports_bf16:
        return "half", [
            f"{gpu.name} has no bf16: the line sets --dtype half (the engine refuses bf16 there)"
        ]
    return s.dtype, []


def is_hybrid(model: ModelSpec) -> bool:
    """Attention layers beside Mamba / linear-attention state layers."""
    kinds = [g.kind.per_token for g in model.kv_groups]
    return any(kinds) and not all(kinds)


def _check_derived_block(
    model: ModelSpec,
    gpu: GpuSpec,
    fields: dict[str, Any],
    weights: tuple[int | None, bool | None],
    measured: tuple[int, TermSource] | None,
) -> None:
    """A block size outside vLLM's list must be the one vLLM derives for this hybrid model."""
    given, version = fields["block_size"], release("vllm", fields.get("version"))
    try:
        own = predict(
            model,
            gpu,
            "vllm",
            {k: v for k, v in fields.items() if k != "block_size"},
            *weights,
            measured,
        )
    except NoKvCache:
        return  # the plan itself says why it does not start
    derived = int(str(own.settings["block_size"]))
    if derived != given:
        raise InputError(
            "--block-size",
            f"vLLM {version_text(version)} takes {', '.join(map(str, vllm_block_sizes(version)))}; "
            f"it sets {model.name}'s attention block size itself, to {derived} here "
            f"(got {given})",
        )


def data_parallel_ranks(s: ServeSettings, model: ModelSpec) -> int:
    """Data-parallel ranks of the deployment, each with its own scheduler and KV pool (vLLM
    --data-parallel-size, SGLang attention-DP groups: the flag's, or those the server sets by
    itself); the plan's figures are one rank's."""
    if s.engine == "sglang":
        from planner.core.engines import sglang

        forced = sglang.forced_attention_dp(model, release("sglang", s.version), s.tp)
        if forced > 1:
            return forced
    key = "data_parallel_size" if s.engine == "vllm" else "attn_dp_size"
    return int(s.extra.get(key) or 1)


def attention_tp(s: ServeSettings, model: ModelSpec) -> int:
    """GPUs one attention layer is split over: the TP size, or under SGLang's data-parallel
    attention its share of the TP group."""
    return s.tp // data_parallel_ranks(s, model) if ranks_share_tp(s.engine) else s.tp


def _engine_fields(
    s: ServeSettings, dtype: str, seqs: int | None, tokens: int | None, groups: int = 1
) -> dict[str, Any]:
    """The engine's Settings fields for one pass (None = engine default); `groups`: the
    deployment's data-parallel ranks (data_parallel_ranks)."""
    if s.engine == "vllm":
        fields: dict[str, Any] = {
            "tensor_parallel_size": s.tp,
            "pipeline_parallel_size": s.pp,
            "max_model_len": vllm.MAX_MODEL_LEN_AUTO if s.max_model_len_auto else s.context_tokens,
            "gpu_memory_utilization": s.memory_fraction,
            "max_num_seqs": seqs,
            "max_num_batched_tokens": tokens,
            "block_size": s.block_size,
            "kv_cache_dtype": s.kv_cache_dtype,
            "dtype": dtype,
            "distributed_executor_backend": s.distributed_executor_backend,
        }
        fields["kv_connector"], fields["kv_connector_chunk_tokens"] = vllm_connector(s)
    else:
        fields = {
            "tp_size": s.tp,
            "pp_size": s.pp,
            "context_length": s.context_tokens,
            "mem_fraction_static": s.memory_fraction,
            # the flag is the deployment's: SGLang gives each attention-DP group its share
            "max_running_requests": line_max_num_seqs(seqs, "sglang", groups) if seqs else None,
            "chunked_prefill_size": tokens,
            "page_size": s.block_size,
            "kv_cache_dtype": s.kv_cache_dtype,
            "dtype": dtype,
            # a PD instance's memory reserve follows its role
            "disaggregation_mode": s.disagg.mode if s.disagg is not None else None,
        }
    if s.version is not None:
        fields["version"] = s.version
    fields |= s.extra
    return {k: v for k, v in fields.items() if v is not None}


def vllm_connector(s: ServeSettings) -> tuple[str | None, int | None]:
    """The KV connector a vLLM plan runs and LMCache's chunk: --kv-transfer-config's, else the
    one --kv-offloading-size starts (0.12+, vllm/config/vllm.py: the native backend is the
    OffloadingConnector, lmcache the LMCacheConnectorV1), else none. Both given are refused:
    vLLM's _post_init_kv_transfer_config sets kv_connector to the offloading one whenever the
    size is given (0.12-0.34), so the named connector (a disaggregated pool's NIXL) would not
    run."""
    o = s.offload
    offloading = o is not None and bool(o.kv_offloading_size_gib)
    if s.disagg is not None and s.disagg.kv_transfer_config:
        if offloading:
            raise InputError(
                "--kv-offloading-size",
                "vLLM replaces the --kv-transfer-config connector with its offloading one "
                "when this is given, so the line would run no KV transfer; a pool with a CPU "
                "tier takes a MultiConnector in --kv-transfer-config (not modelled)",
            )
        return str(json.loads(s.disagg.kv_transfer_config)["kv_connector"]), None
    if o is None or not offloading:
        return None, None
    if o.kv_offloading_backend == "lmcache":
        return "LMCacheConnectorV1", o.lmcache.chunk_size if o.lmcache else None
    return "OffloadingConnector", None


def predict(
    model: ModelSpec,
    gpu: GpuSpec,
    engine: str,
    fields: dict[str, Any],
    weights_bytes: int | None,
    weights_exact: bool | None,
    total: tuple[int, TermSource] | None = None,
) -> EnginePrediction:
    """One run of the engine model on explicit settings fields (`total`: a measured total).
    SGLang's model is imported only for an SGLang plan: vLLM's, the default, starts faster."""
    total_bytes, source = total if total else (None, "log")
    try:
        if engine == "vllm":
            settings = vllm.VllmSettings(**fields)
        else:
            from planner.core.engines import sglang

            sg_settings = sglang.SglangSettings(**fields)
    except ValidationError as exc:
        err = exc.errors()[0]
        key = str(err["loc"][0]) if err["loc"] else "settings"
        flag = "--" + ENGINE_FLAG_NAMES.get(key, key).replace("_", "-")
        raise InputError(flag, f"{err['msg'].lower()} (got {err.get('input')!r})") from exc
    if engine == "vllm":
        terms = vllm.MeasuredTerms(total_memory_bytes=total_bytes, total_memory_source=source)
        return vllm.predict(model, gpu, settings, terms, weights_bytes, weights_exact)
    sg_terms = sglang.MeasuredTerms(total_memory_bytes=total_bytes, total_memory_source=source)
    return sglang.predict(model, gpu, sg_settings, sg_terms, weights_bytes, weights_exact)


def _shown(
    fields: dict[str, Any], s: ServeSettings, p: EnginePrediction | None = None
) -> dict[str, Any]:
    """The fields the line states: the engine settings plus the weights' --quantization, the
    offload flags and what the plan chose for the layout (SGLang's DeepEP across nodes)."""
    shown = fields | ({"quantization": s.quantization} if s.quantization else {})
    if p is not None and p.settings.get("moe_a2a_backend"):
        shown["moe_a2a_backend"] = p.settings["moe_a2a_backend"]
    if p is not None and p.settings.get("deepep_mode"):
        shown["deepep_mode"] = p.settings["deepep_mode"]
    if s.offload is not None:
        shown |= {k: v for k, v in s.offload.line_fields(s.engine).items() if v is not None}
    if s.disagg is not None:
        shown |= {k: v for k, v in s.disagg.line_fields(s.engine).items() if v is not None}
    return shown


def offload_tiers(model: ModelSpec, p: EnginePrediction, s: ServeSettings) -> KvTiers | None:
    """The KV tiers the offload flags give this plan (None: nothing offloaded)."""
    from planner.core.offload import kv_tiers

    if s.offload is None:
        return None
    if s.engine == "sglang" and s.offload.hicache:
        decode = s.disagg is not None and s.disagg.mode == "decode"
        if decode or p.settings.get("disable_radix_cache"):
            # server_args.py (0.5.2-0.5.15), arg_groups/kv_cache_hook.py (0.5.23): the two are
            # "mutually exclusive"; a PD decode server turns its radix cache off first
            why = "a decode server, which turns its radix cache off" if decode else ""
            raise InputError(
                "--enable-hierarchical-cache",
                "SGLang refuses to start with it beside --disable-radix-cache"
                + (f" ({why})" if why else ""),
            )
    block = int(str(p.settings["block_size" if s.engine == "vllm" else "page_size"]))
    if is_hybrid(model) and (s.offload.kv_offloading_size_gib or s.offload.hicache):
        raise InputError(
            "--kv-offloading-size" if s.engine == "vllm" else "--enable-hierarchical-cache",
            f"KV offload of a hybrid model ({model.name}: attention + state layers) is not "
            "modelled",
        )
    return kv_tiers(
        engine=s.engine,
        version=parse_version(p.version),
        offload=s.offload,
        gpu_tokens=p.kv_cache_tokens,
        per_token_bytes=p.bytes_per_block // block,
        block_tokens=block,
        ranks=s.tp * s.pp,
        connector_bytes=p.connector_bytes,
    )


def sequences_held(model: ModelSpec, p: EnginePrediction, tokens: int, window: bool = True) -> int:
    """Sequences of `tokens` tokens the predicted KV cache holds at once (`window`: SGLang's
    window-layer pool counted too)."""
    if p.name == "vllm":
        per_request = vllm.request_blocks(model, p, tokens)
        return max(0, p.usable_blocks) // per_request
    page = int(str(p.settings["page_size"]))
    held = p.kv_cache_tokens // (ceil_div(tokens, page) * page)
    if not any(g.kind.per_token for g in model.kv_groups):
        held = p.kv_cache_tokens  # no attention KV: only the state pool limits
    window_tokens = p.settings.get("swa_max_total_num_tokens")
    if window_tokens and window:
        # SGLang's window-layer pool holds a running sequence's prompt and up to two windows
        # of its output (engines/sglang.py window_pool): counted whole, as outputs that short
        # are held
        held = min(held, int(str(window_tokens)) // (ceil_div(tokens, page) * page))
    mamba = p.settings.get("max_mamba_cache_size")
    if mamba:
        strategy = p.settings.get("mamba_radix_cache_strategy")
        per_request = sglang.mamba_slots_per_request(
            bool(p.settings.get("disable_radix_cache")),
            None if strategy is None else str(strategy),
            not p.settings.get("disable_overlap_schedule"),
        )
        held = min(held, int(str(mamba)) // per_request)
    return held


def engine_cap(p: EnginePrediction) -> int:
    """The running-sequence cap the engine uses with these settings."""
    key = "max_num_seqs" if p.name == "vllm" else "max_running_requests"
    return int(str(p.settings[key]))


def engine_step_tokens(p: EnginePrediction) -> int:
    """The tokens a step takes by the engine's settings: vLLM's max_num_batched_tokens,
    SGLang's --chunked-prefill-size (the flag's; -1: prompts are not chunked)."""
    key = "max_num_batched_tokens" if p.name == "vllm" else "chunked_prefill_size"
    return int(str(p.settings[key]))


def engine_chunk_pages(p: EnginePrediction) -> int:
    """The tokens SGLang's chunked-prefill size must be a multiple of, per attention-DP group:
    its page (it asserts the chunk divides by it: sglang._check_chunk_pages); 1 for vLLM."""
    return int(str(p.settings.get("page_size") or 1)) if p.name == "sglang" else 1


def _with_slack(s: ServeSettings) -> tuple[ServeSettings, list[str]]:
    """The settings planned: vLLM 0.34's default utilization (1.0, its extensible KV cache
    sized from the memory free after warm-up) is pinned at the release's estimate-based
    default instead, so a pasted line leaves the device the slack every earlier release left
    (other processes, allocations vLLM does not measure) and binds the same where the
    extensible cache falls back (no CUDA VMM, some KV connectors); a fraction asked for stands."""
    if s.engine != "vllm" or s.memory_fraction is not None:
        return s, []

    rules = vllm.rules_for(release("vllm", s.version))
    if not rules.extensible_kv:
        return s, []
    util = rules.default_gpu_memory_utilization
    return s.model_copy(update={"memory_fraction": util}), [
        f"--gpu-memory-utilization {util} pinned: vLLM's own default from 0.34 is 1.0 (its "
        "extensible KV cache, sized after warm-up less its margin); the line keeps the "
        f"{round((1 - util) * 100)}% earlier releases left for memory vLLM does not measure, "
        "and binds the same where that cache falls back to estimate-based sizing"
    ]


def _fraction(p: EnginePrediction) -> float:
    key = "gpu_memory_utilization" if p.name == "vllm" else "mem_fraction_static"
    return float(str(p.settings[key]))


def _start_refusal(model: ModelSpec, p: EnginePrediction, s: ServeSettings) -> str | None:
    """Why the engine would refuse to start with this cache, if it would."""
    if p.name == "vllm":
        unchunked = vllm.unchunked_budget_refusal(p.settings)
        if unchunked:
            return unchunked
        # vLLM compares one request's blocks, in bytes, with the KV memory: the null block it
        # later keeps back counts (vllm/v1/core/kv_cache_utils.py check_enough_kv_cache_memory)
        need = vllm.start_blocks(model, p, s.context_tokens)
        if p.num_gpu_blocks < need:
            return (
                f"vLLM refuses to start: one {s.context_tokens:,}-token request needs {need:,} "
                f"blocks, the KV cache holds {max(p.num_gpu_blocks, 0):,} "
                f"({p.available_kv_bytes / GIB_BYTES:.2f} GiB)"
            )
        return None
    if min(s.context_tokens, p.kv_cache_tokens) - 1 - SGLANG_REQUEST_INPUT_MARGIN_TOKENS <= 0:
        return (
            f"SGLang refuses to start: its pool of {p.kv_cache_tokens:,} tokens leaves no "
            "request input (Memory pool size is too small)"
        )
    return None


def _context_caps(p: EnginePrediction, s: ServeSettings) -> str | None:
    """SGLang with a pool smaller than the context: a warning, not a refusal (see
    SGLANG_REQUEST_INPUT_MARGIN_TOKENS)."""
    if p.name != "sglang" or p.kv_cache_tokens >= s.context_tokens:
        return None
    return (
        f"SGLang's pool holds {p.kv_cache_tokens:,} tokens, fewer than one "
        f"{s.context_tokens:,}-token request: it starts and refuses requests longer than "
        f"{p.kv_cache_tokens - 1:,} tokens"
    )


def _line_block_size(
    model: ModelSpec, s: ServeSettings, p: EnginePrediction, warnings: list[str]
) -> int:
    """The KV block (SGLang: page) size the line states: the flag's, else the engine's default;
    for vLLM's non-hybrid models the one the prediction runs (an attention backend may impose
    one: a warning names it where it overrides the flag)."""
    # The block size the flag sets (vLLM raises hybrid models' attention block by itself, from
    # the flag's value, so the raised size is never what the line says).
    # A hybrid model's derived size (plan_serve checks it first) is set by vLLM from the
    # default flag.
    version = parse_version(p.version)
    default_block = vllm.default_block_size(version) if s.engine == "vllm" else 0
    block = s.block_size or (
        default_block if s.engine == "vllm" else int(str(p.settings["page_size"]))
    )
    if s.engine == "vllm" and block not in vllm_block_sizes(version):
        block = default_block
    if s.engine == "sglang" or not is_hybrid(model):
        # the block the prediction runs (an attention backend may impose one: its note names
        # it) is the one the line states
        key, name = ("block_size", "vLLM") if s.engine == "vllm" else ("page_size", "SGLang")
        runs = int(str(p.settings[key]))
        if s.block_size is not None and s.block_size != runs:
            # the prediction's note names the backend that set it
            why = next((n for n in p.notes if n.startswith(f"{key} {runs}: ")), "")
            warnings.append(
                f"{key} {s.block_size} -> {runs} on {name} {p.version}: "
                f"{why.partition(': ')[2] or 'set by its attention backend'}; the line says "
                "what it runs"
            )
        block = runs
    return block


class _Refusal(NamedTuple):
    """A pass the engine would not start with: its fields and the engine's reason."""

    fields: dict[str, Any]
    why: str


def _largest_batch(
    model: ModelSpec,
    gpu: GpuSpec,
    pinned: ServeSettings,
    dtype: str,
    groups: int,
    tokens: int,
    cap: int,
    p: EnginePrediction,
    fields: dict[str, Any],
    weights: tuple[int | None, bool | None],
    measured: tuple[int, TermSource] | None,
) -> tuple[EnginePrediction, dict[str, Any], int] | _Refusal:
    """The most sequences, up to `cap`, whose own KV cache holds them at the mean (a smaller
    batch frees memory: fewer sampler rows and CUDA graphs), from `p` and `fields`, the engine
    default's pass; the prediction, fields and batch, or the pass the engine refuses."""

    def budget(seqs: int) -> int:
        """The batched-token budget at `seqs` (vLLM requires it >= max_num_seqs)."""
        return max(tokens, seqs) if pinned.engine == "vllm" else tokens

    # at least one sequence is tried: the engine default's cap may leave too little for
    # one at the mean (the sampler and CUDA graphs of 1,024 sequences) where one fits
    seqs = max(1, min(cap, sequences_held(model, p, pinned.mean_tokens)))
    for _ in range(MAX_PLAN_PASSES):
        if seqs < 1:
            break
        fields = _engine_fields(pinned, dtype, seqs, budget(seqs), groups)
        try:
            p = predict(model, gpu, pinned.engine, fields, *weights, measured)
        except NoKvCache as exc:
            return _Refusal(fields, str(exc))
        held = sequences_held(model, p, pinned.mean_tokens)
        if held >= seqs:
            break
        seqs = held
    # The smaller batch freed memory (fewer sampler rows, fewer CUDA graphs): take the
    # largest batch that still fits what its own cache holds (bisection; more sequences
    # never free memory, so the test is monotone).
    low, high = seqs, min(cap, sequences_held(model, p, pinned.mean_tokens))
    while 1 <= low < high:
        mid = (low + high + 1) // 2
        trial = _engine_fields(pinned, dtype, mid, budget(mid), groups)
        try:
            q = predict(model, gpu, pinned.engine, trial, *weights, measured)
        except NoKvCache:
            high = mid - 1
            continue
        if sequences_held(model, q, pinned.mean_tokens) >= mid:
            low, p, fields, seqs = mid, q, trial, mid
        else:
            high = mid - 1
    return p, fields, seqs


def _as_given(
    model: ModelSpec,
    gpu: GpuSpec,
    pinned: ServeSettings,
    dtype: str,
    groups: int,
    seqs: int,
    tokens: int,
    weights: tuple[int | None, bool | None],
    measured: tuple[int, TermSource] | None,
) -> tuple[EnginePrediction, dict[str, Any], int] | _Refusal:
    """The engine at the user's own batch (`seqs`) and batched-token budget (vLLM's at least
    the batch): the prediction, fields and batch, or the pass the engine refuses."""
    budget = pinned.max_num_batched_tokens or (
        max(tokens, seqs) if pinned.engine == "vllm" else tokens
    )
    fields = _engine_fields(pinned, dtype, seqs, budget, groups)
    try:
        p = predict(model, gpu, pinned.engine, fields, *weights, measured)
    except NoKvCache as exc:
        return _Refusal(fields, str(exc))
    return p, fields, seqs


def _start_reasons(
    model: ModelSpec,
    p: EnginePrediction,
    s: ServeSettings,
    tiers: KvTiers | None,
    warnings: list[str],
) -> list[str]:
    """Why the engine would not start or serve this plan: an architecture its release does
    not register, a request it refuses, a KV offload tier the host cannot hold; what only
    warns (a registry gap it falls back on, the context caps) goes to `warnings`."""
    reasons: list[str] = []
    version = parse_version(p.version)
    gap = registry_gap(s.engine, model.architecture, version)
    if gap is not None:
        (reasons if gap[1] else warnings).append(gap[0])
    weights_gap = checkpoint_load_gap(model, s.engine, version)
    if weights_gap is not None:
        reasons.append(f"{weights_gap[0]}: {model.name} does not load")
    refusal = _start_refusal(model, p, s)
    if refusal:
        reasons.append(refusal)
    elif caps := _context_caps(p, s):
        warnings.append(caps)
    if tiers is not None and tiers.fits_host is False and tiers.host_memory_bytes is not None:
        need_gib = tiers.host_bytes_per_node / GIB_BYTES
        have_gib = tiers.host_memory_bytes / GIB_BYTES
        largest = ", ".join(f"{k} {v:g}" for k, v in (tiers.largest_fitting or {}).items())
        reasons.append(
            f"the KV offload tier needs {need_gib:,.1f} GiB of host memory ({tiers.ranks} "
            f"rank{'s' if tiers.ranks != 1 else ''}), more than the {have_gib:,.1f} GiB the "
            f"host has; largest that fits: {largest}"
        )
    return reasons


def plan_serve(
    model: ModelSpec,
    gpu: GpuSpec,
    s: ServeSettings,
    weights_bytes: int | None = None,
    weights_exact: bool | None = None,
    suggest: bool = True,
    measured: tuple[int, TermSource] | None = None,
) -> ServePlan:
    """The engine-faithful plan for these settings (see the module docstring).

    `measured`: the total memory a detected device reports, and where it came from.
    """
    check_flags(s, gpu, model)
    dtype, warnings = resolved_dtype(model, gpu, s)
    s, slack = _with_slack(s)
    warnings += slack
    groups = data_parallel_ranks(s, model)
    warnings += tp_replication(model, attention_tp(s, model))[1]
    span = host_span(s, gpu)
    if spread := hosts.warning(span):
        warnings.append(spread)
    if s.engine == "vllm":
        ran = hosts.executor(span, s.distributed_executor_backend)
        s = s.model_copy(update={"distributed_executor_backend": ran})
    reasons: list[str] = []
    # the plan's sequences are one DP rank's: vLLM's --max-num-seqs already is, SGLang's
    # --max-running-requests is the deployment's, each attention-DP group taking its share
    given_seqs = s.max_num_seqs
    if given_seqs is not None and s.engine == "sglang":
        given_seqs = max(1, given_seqs // groups)
    fields = _engine_fields(s, dtype, given_seqs, s.max_num_batched_tokens, groups)
    weights = (weights_bytes, weights_exact)
    if (
        s.engine == "vllm"
        and s.block_size is not None
        and is_hybrid(model)
        and s.block_size not in vllm_block_sizes(release(s.engine, s.version))
    ):
        _check_derived_block(model, gpu, fields, weights, measured)
    try:
        p = predict(model, gpu, s.engine, fields, *weights, measured)
    except NoKvCache as exc:
        return _refused(model, gpu, s, fields, str(exc), warnings, weights, suggest, measured)
    # Pin the defaults the engine picked, so the line states them and they cannot move.
    # The line prints the fraction to 4 decimals: pin it there (floored, never above what the
    # engine would take), so the printed value is the one predicted.
    fraction = pinned_fraction(_fraction(p))
    tokens = engine_step_tokens(p)
    block = _line_block_size(model, s, p, warnings)
    pinned = s.model_copy(update={"memory_fraction": fraction, "block_size": block})
    cap_engine = engine_cap(p)
    seqs_name = "max_num_seqs" if s.engine == "vllm" else "max_running_requests"
    cap, cap_source = cap_engine, seqs_name
    if s.latency_cap is not None and s.latency_cap < cap:
        cap, cap_source = s.latency_cap, "latency budget"
    if given_seqs is not None:
        # The user's own value is what the engine will run with: predicted as given, not planned.
        cap, cap_source = given_seqs, f"your {seqs_name}"
        run = _as_given(model, gpu, pinned, dtype, groups, given_seqs, tokens, weights, measured)
    else:
        run = _largest_batch(
            model, gpu, pinned, dtype, groups, tokens, cap, p, fields, weights, measured
        )
    if isinstance(run, _Refusal):
        return _refused(model, gpu, s, run.fields, run.why, warnings, weights, suggest, measured)
    p, fields, seqs = run
    if given_seqs is not None:
        held = sequences_held(model, p, s.mean_tokens)
        if held < seqs:
            warnings.append(
                f"{seqs_name} {seqs:,} is more than the {held:,} sequences of ~{s.mean_tokens:,} "
                "tokens the KV cache holds: expect preemptions at full load"
            )
    if s.max_model_len_auto:
        # the length vLLM fitted is the context every figure below is at
        s = s.model_copy(update={"context_tokens": int(str(p.settings["max_model_len"]))})
        if s.mean_tokens > s.context_tokens:
            warnings.append(
                f"max_model_len auto fits {s.context_tokens:,} tokens, below the mean of "
                f"{s.mean_tokens:,}: vLLM refuses longer requests"
            )
    held_mean = sequences_held(model, p, s.mean_tokens)
    held_context = sequences_held(model, p, s.context_tokens)
    tiers = offload_tiers(model, p, s)
    reasons += _start_reasons(model, p, s, tiers, warnings)
    if seqs < 1 and not reasons:
        reasons.append(f"the KV cache cannot hold one {s.mean_tokens:,}-token sequence")
    fits = not reasons
    binding, why = _binding(model, p, s, reasons, held_mean, cap, cap_source, groups)
    plan = ServePlan(
        engine=s.engine,
        fits=fits,
        reasons=reasons,
        prediction=p,
        flags=_shown(fields, s, p),
        command=command_line(model, s.engine, _shown(fields, s, p), p.version, span),
        max_num_seqs=max(seqs, 0),
        max_seqs_at_mean=held_mean,
        max_seqs_at_context=held_context,
        cap=cap,
        cap_source=cap_source,
        binding=binding,
        binding_reason=why,
        warnings=warnings,
        kv_tiers=tiers,
    )
    if not fits and suggest:
        plan.suggestions = suggestions(model, gpu, s, weights, measured)
    return plan


def _binding(
    model: ModelSpec,
    p: EnginePrediction,
    s: ServeSettings,
    reasons: list[str],
    held_mean: int,
    cap: int,
    cap_source: str,
    groups: int,
) -> tuple[Binding, str]:
    """What binds the plan's batch, and why in one sentence: nothing where the engine would not
    start (its first reason), the KV cache where it holds fewer sequences at the mean than the
    cap (`cap`, set by `cap_source`), else the latency budget or the engine's own cap."""
    binding: Binding
    # the user's own cap is named as theirs ("your max_num_seqs"), the engine's as its
    given = cap_source.startswith("your ")
    if reasons:
        binding, why = "none", reasons[0]
    elif held_mean < cap:
        binding = "memory"
        why = (
            f"memory binds: the KV cache holds {held_mean:,} sequences of ~{s.mean_tokens:,} "
            f"tokens, fewer than {cap_source if given else f'the {cap_source}'} cap of {cap:,}"
        )
        window_tokens = p.settings.get("swa_max_total_num_tokens")
        if window_tokens and sequences_held(model, p, s.mean_tokens, window=False) > held_mean:
            why = why.replace(
                "the KV cache holds",
                f"the window layers' pool ({int(str(window_tokens)):,} tokens) holds",
            )
            span = int(str(p.settings["sliding_window_size"]))
            if s.mean_tokens > 2 * span:
                why += (
                    f" (each counted whole: one whose output runs past two {span:,}-token "
                    "windows holds less there; `simulate` runs the pool per request)"
                )
        if groups > 1:
            why = why.replace(
                "the KV cache holds", f"each of the {groups} DP ranks' KV caches holds"
            )
        if s.latency_cap is None:
            why += " (no latency budget given: pass --tpot for a latency cap)"
    elif cap_source == "latency budget":
        binding = "latency"
        why = (
            f"latency binds: {s.latency_reason or 'the budget'} allows {cap:,} sequences, "
            f"fewer than the {held_mean:,} the KV cache holds"
        )
    else:
        binding = "engine"
        owner = cap_source if given else f"the engine's {cap_source}"
        why = (
            f"{owner} of {cap:,} binds: the KV cache would hold {held_mean:,} "
            "sequences (no latency budget given: pass --tpot to size the batch for a TPOT)"
        )
    return binding, why


def _refused(
    model: ModelSpec,
    gpu: GpuSpec,
    s: ServeSettings,
    fields: dict[str, Any],
    reason: str,
    warnings: list[str],
    weights: tuple[int | None, bool | None],
    suggest: bool,
    measured: tuple[int, TermSource] | None,
) -> ServePlan:
    """A plan the engine cannot start: no KV cache at all."""
    text = reason.split(": ", 1)[-1]
    return ServePlan(
        engine=s.engine,
        fits=False,
        reasons=[f"{s.engine}: {text}"],
        prediction=None,
        flags=_shown(fields, s),
        command=command_line(model, s.engine, _shown(fields, s), s.version, host_span(s, gpu)),
        max_num_seqs=0,
        max_seqs_at_mean=0,
        max_seqs_at_context=0,
        cap=0,
        cap_source="none",
        binding="none",
        binding_reason=f"does not fit: {text}",
        warnings=warnings,
        suggestions=suggestions(model, gpu, s, weights, measured) if suggest else [],
    )


def _first_loading_release(
    model: ModelSpec, engine: str, version: str | None
) -> tuple[bool, tuple[str, str] | None]:
    """Whether the named release cannot load the model (its architecture unregistered with no
    fallback, or its weights' method unknown to it), and the first release that loads both,
    with what that one adds (None: none does). Unnamed: the newest, which loads what it can."""
    if not version:
        return False, None
    named = parse_version(version)
    firsts: list[tuple[tuple[int, int, int], str] | None] = []
    gap = registry_gap(engine, model.architecture, named)
    if gap is not None and gap[1]:
        since = native_since(engine, model.architecture or "")
        firsts.append((parse_version(since), model.architecture or "") if since else None)
    weights = checkpoint_load_gap(model, engine, named)
    if weights is not None:
        loads = weights[1]
        firsts.append((loads, f"{checkpoint_method(model)} weights") if loads else None)
    if not firsts:
        return False, None
    if None in firsts:
        return True, None
    # the latest of them (the architecture named first where both arrive together)
    first, what = max((f for f in firsts if f is not None), key=lambda f: f[0])
    return True, (version_text(first), what)


def suggestions(
    model: ModelSpec,
    gpu: GpuSpec,
    s: ServeSettings,
    weights: tuple[int | None, bool | None],
    measured: tuple[int, TermSource] | None = None,
) -> list[Suggestion]:
    """Re-planned alternatives that fit: TP, max_model_len, utilisation, fp8 weights / KV."""
    out: list[Suggestion] = []

    def fits(settings: ServeSettings, w: tuple[int | None, bool | None] = weights) -> bool:
        try:
            return plan_serve(model, gpu, settings, *w, suggest=False, measured=measured).fits
        except InputError:
            return False

    def attempt(
        change: str, settings: ServeSettings, w: tuple[int | None, bool | None] = weights
    ) -> bool:
        if not fits(settings, w):
            return False
        plan = plan_serve(model, gpu, settings, *w, suggest=False, measured=measured)
        assert plan.prediction is not None
        out.append(
            Suggestion(
                change=change,
                flags=plan.flags,
                max_num_seqs=plan.max_num_seqs,
                kv_cache_tokens=plan.prediction.kv_cache_tokens,
            )
        )
        return True

    # a release without the model or its weights' method: only one that has both starts,
    # whatever else changes
    blocked, first = _first_loading_release(model, s.engine, s.version)
    if blocked:
        if first is not None:
            since, what = first
            attempt(
                f"--engine-version {since} (the first with {what})",
                s.model_copy(update={"version": since}),
            )
        return out
    for tp in valid_tp(model):
        if tp > s.tp and attempt(f"--tensor-parallel-size {tp}", s.model_copy(update={"tp": tp})):
            break

    # the largest context that still starts (auto has already fitted it)
    def starts(length: int) -> bool:
        return fits(s.model_copy(update={"context_tokens": length}))

    low, high = s.mean_tokens, s.context_tokens - 1
    best = None
    if not s.max_model_len_auto and low <= high and starts(low):
        best = largest_passing(low, high, starts)
    if best is not None:
        attempt(f"--max-model-len {best}", s.model_copy(update={"context_tokens": best}))

    # vLLM: the most sequences that still start (its profile, CUDA graphs and V0's Mamba state
    # cache are sized by max_num_seqs; SGLang's pool is a share of memory whatever the cap)
    def starts_with(seqs: int) -> bool:
        return fits(s.model_copy(update={"max_num_seqs": seqs}))

    most = (s.max_num_seqs or vllm.V1_LARGE_TIER_MAX_NUM_SEQS) - 1
    if s.engine == "vllm" and most >= 1 and starts_with(1):
        seqs = largest_passing(1, most, starts_with)
        attempt(f"--max-num-seqs {seqs}", s.model_copy(update={"max_num_seqs": seqs}))
    start = round((s.memory_fraction or 0.5) * 100) + 1
    for pct in range(start, round(MAX_SUGGESTED_UTILIZATION * 100) + 1):
        if attempt(
            f"memory fraction {pct / 100:.2f}", s.model_copy(update={"memory_fraction": pct / 100})
        ):
            break
    fp8_capable = gpu.fp8_dense_flops is not None
    if fp8_capable and s.quantization is None and model.weight_dtype in ("bf16", "fp16", "fp32"):
        from planner.core.hf_config import quantized_weights_bytes

        fp8 = (quantized_weights_bytes(model, "fp8"), False)
        attempt(
            "fp8 weights (--quantization fp8)", s.model_copy(update={"quantization": "fp8"}), fp8
        )
    if fp8_capable and s.kv_cache_dtype == "auto":
        kv = "fp8" if s.engine == "vllm" else "fp8_e4m3"
        attempt(
            f"fp8 KV cache (--kv-cache-dtype {kv})", s.model_copy(update={"kv_cache_dtype": kv})
        )
    return out


def valid_tp(model: ModelSpec) -> list[int]:
    """TP sizes that split the attention heads evenly (KV heads evenly, or replicated)."""
    sizes = []
    for tp in range(1, min(model.num_attention_heads, SUGGESTED_TP_LIMIT) + 1):
        kv = model.num_kv_heads
        if model.num_attention_heads % tp == 0 and (kv % tp == 0 or tp % kv == 0):
            sizes.append(tp)
    return sizes


# Settings field -> the engine's flag, in the order the line prints them.
VLLM_FLAGS = (
    ("tensor_parallel_size", "--tensor-parallel-size"),
    ("pipeline_parallel_size", "--pipeline-parallel-size"),
    ("data_parallel_size", "--data-parallel-size"),
    ("max_model_len", "--max-model-len"),
    ("max_num_seqs", "--max-num-seqs"),
    ("max_num_batched_tokens", "--max-num-batched-tokens"),
    ("gpu_memory_utilization", "--gpu-memory-utilization"),
    ("block_size", "--block-size"),
    ("kv_cache_dtype", "--kv-cache-dtype"),
    ("dtype", "--dtype"),
    ("quantization", "--quantization"),
    ("kv_cache_memory_bytes", "--kv-cache-memory-bytes"),
    ("enable_lora", "--enable-lora"),
    ("enable_expert_parallel", "--enable-expert-parallel"),
    ("max_cudagraph_capture_size", "--max-cudagraph-capture-size"),
    ("enable_chunked_prefill", "--enable-chunked-prefill"),
    ("max_lora_rank", "--max-lora-rank"),
    ("max_loras", "--max-loras"),
    ("enforce_eager", "--enforce-eager"),
    ("async_scheduling", "--async-scheduling"),
    ("enable_prefix_caching", "--enable-prefix-caching"),
    ("all2all_backend", "--all2all-backend"),
    ("enable_dbo", "--enable-dbo"),
    ("stream_interval", "--stream-interval"),
    ("kv_offloading_size", "--kv-offloading-size"),
    ("kv_offloading_backend", "--kv-offloading-backend"),
    ("kv_transfer_config", "--kv-transfer-config"),
    ("distributed_executor_backend", "--distributed-executor-backend"),
    ("num_scheduler_steps", "--num-scheduler-steps"),
)
SGLANG_FLAGS = (
    ("tp_size", "--tp-size"),
    ("pp_size", "--pp-size"),
    ("attn_dp_size", "--attn-dp-size"),
    ("dp_size", "--dp-size"),
    ("enable_dp_attention", "--enable-dp-attention"),
    ("ep_size", "--ep-size"),
    ("context_length", "--context-length"),
    ("max_running_requests", "--max-running-requests"),
    ("chunked_prefill_size", "--chunked-prefill-size"),
    ("mem_fraction_static", "--mem-fraction-static"),
    ("page_size", "--page-size"),
    ("kv_cache_dtype", "--kv-cache-dtype"),
    ("dtype", "--dtype"),
    ("quantization", "--quantization"),
    ("cuda_graph_max_bs_decode", "--cuda-graph-max-bs"),
    ("stream_interval", "--stream-interval"),
    ("scheduler_recv_interval", "--scheduler-recv-interval"),
    ("max_prefill_tokens", "--max-prefill-tokens"),
    ("mamba_full_memory_ratio", "--mamba-full-memory-ratio"),
    ("max_mamba_cache_size", "--max-mamba-cache-size"),
    ("enable_hierarchical_cache", "--enable-hierarchical-cache"),
    ("hicache_ratio", "--hicache-ratio"),
    ("hicache_size", "--hicache-size"),
    ("disaggregation_mode", "--disaggregation-mode"),
    ("disaggregation_transfer_backend", "--disaggregation-transfer-backend"),
    ("moe_a2a_backend", "--moe-a2a-backend"),
    ("deepep_mode", "--deepep-mode"),
    ("ep_num_redundant_experts", "--ep-num-redundant-experts"),
    ("enable_two_batch_overlap", "--enable-two-batch-overlap"),
    ("enable_deepep_moe", "--enable-deepep-moe"),
    ("moe_dense_tp_size", "--moe-dense-tp-size"),
    ("enable_dp_lm_head", "--enable-dp-lm-head"),
    ("disable_radix_cache", "--disable-radix-cache"),
    ("disable_cuda_graph", "--disable-cuda-graph"),
    ("disable_overlap_schedule", "--disable-overlap-schedule"),
    ("mamba_radix_cache_strategy", "--mamba-radix-cache-strategy"),
)
# Values every version of both engines defaults to: the line leaves them out (they change
# nothing, and `planner drift` reads an omitted one as its default).
LINE_DEFAULTS: dict[str, Any] = {
    "stream_interval": 1,
    "num_scheduler_steps": 1,
    "scheduler_recv_interval": 1,
    "max_prefill_tokens": sglang.DEFAULT_MAX_PREFILL_TOKENS,
    "pipeline_parallel_size": 1,
    "data_parallel_size": 1,
    "pp_size": 1,
    "attn_dp_size": 1,
    "dp_size": 1,
    "ep_size": 1,
    "dtype": "auto",
    "moe_a2a_backend": "none",
    "all2all_backend": vllm.DEFAULT_ALL2ALL,  # vLLM's since the flag (0.11.1)
}
# SGLang's --attn-dp-size arrived in 0.5.23; before it DP attention was --dp-size N with
# --enable-dp-attention, which 0.5.23 still rewrites to attn_dp_size = N (server_args.py).
SGLANG_ATTN_DP_SIZE_SINCE = (0, 5, 23)
# SGLang chose the MoE all-to-all with --moe-a2a-backend from 0.5.0 (0.4.10.post2 took both);
# before, DeepEP was --enable-deepep-moe (server_args.py, read in the 0.4.9.post6, 0.4.10 and
# 0.4.10.post2 wheels).
SGLANG_MOE_A2A_BACKEND_SINCE = (0, 5, 0)
# Engine settings fields whose flag is spelled differently.
ENGINE_FLAG_NAMES = {
    "cuda_graph_max_bs_decode": "cuda_graph_max_bs",
    "tensor_parallel_size": "tp",
    "pipeline_parallel_size": "pp",
    "tp_size": "tp",
    "pp_size": "pp",
}
MODEL_PLACEHOLDER = "$MODEL"
SHELL_PLACEHOLDERS = frozenset(
    {MODEL_PLACEHOLDER, hosts.NODE_RANK_PLACEHOLDER, hosts.HEAD_ADDR_PLACEHOLDER, hosts.HEAD_ADDR}
)


def host_span(s: ServeSettings, gpu: GpuSpec) -> hosts.Span:
    """How one server spreads over hosts: its GPUs (TP x PP, and its replicas: vLLM's
    data-parallel ranks, SGLang's --dp-size) over a host's (planner.core.hosts)."""
    key = "data_parallel_size" if s.engine == "vllm" else "dp_size"
    replicas = int(s.extra.get(key) or 1)
    return hosts.span(s.engine, release(s.engine, s.version), s.tp, s.pp, replicas, gpu)


# `vllm serve` arrived in vLLM 0.5.2 (the wheel's first console script, `vllm =
# vllm.scripts:main`; 0.5.0 and 0.5.1 ship neither); before it the OpenAI server was started as
# a module, which every release still accepts (vllm/entrypoints/openai/api_server.py).
VLLM_SERVE_SINCE = (0, 5, 2)
# --kv-cache-dtype arrived with the fp8 (e5m2) KV cache in vLLM 0.3.0 (vllm/engine/arg_utils.py):
# an older release refuses the flag, so its line leaves the default ("auto") out.
VLLM_KV_CACHE_DTYPE_SINCE = (0, 3, 0)
# How a vLLM line turns chunked prefill off: releases through 0.8.4 parse
# --enable-chunked-prefill as an optional boolean (StoreBoolean, nargs="?":
# `--enable-chunked-prefill False`), 0.8.5 on as argparse's BooleanOptionalAction generated from
# SchedulerConfig (`--no-enable-chunked-prefill`); neither accepts the other's form
# (vllm/engine/arg_utils.py, read in the 0.8.4 and 0.8.5 wheels).
VLLM_NO_FLAG_FORM_SINCE = (0, 8, 5)
# --enable-prefix-caching was a bare store_true flag in V0 (off by default: vllm/engine/
# arg_utils.py, 0.6.4) and is a BooleanOptionalAction from V1's 0.8.0 (on by default;
# `--no-enable-prefix-caching` turns it off: the 0.8.0 wheel's arg_utils.py). Before 0.8 off is
# the default, so the line leaves it out.
VLLM_NO_PREFIX_CACHING_SINCE = (0, 8, 0)


def command_line(
    model: ModelSpec,
    engine: str,
    fields: dict[str, Any],
    version: str | None = None,
    span: hosts.Span | None = None,
) -> str:
    """The launch line setting exactly `fields` (booleans as bare flags, defaults left out), in
    the form the engine release accepts; a server over hosts (`span`) says how it spans them."""
    ref = model.serve_id or MODEL_PLACEHOLDER
    release = parse_version(version) if version else None
    old_vllm = engine == "vllm" and release is not None and release < VLLM_SERVE_SINCE
    head = (
        ["python", "-m", "vllm.entrypoints.openai.api_server", "--model", ref]
        if old_vllm
        else ["vllm", "serve", ref]
        if engine == "vllm"
        else [
            "python",
            "-m",
            "sglang.launch_server",
            "--model-path",
            ref,
        ]
    )
    parts = []
    fields = dict(fields)
    attn_dp = fields.get("attn_dp_size") or 1
    old_sglang = engine == "sglang" and release is not None and release < SGLANG_ATTN_DP_SIZE_SINCE
    if old_sglang and attn_dp > 1:
        fields |= {"attn_dp_size": None, "dp_size": attn_dp, "enable_dp_attention": True}
    old_a2a = engine == "sglang" and release is not None and release < SGLANG_MOE_A2A_BACKEND_SINCE
    if old_a2a and fields.get("moe_a2a_backend") == "deepep":
        fields |= {"moe_a2a_backend": None, "enable_deepep_moe": True}
    # flags an earlier release spells otherwise or lacks (one that lacks it runs its default)
    old_capture = release is not None and release < VLLM_CAPTURE_SIZE_FLAG_SINCE
    no_page_size = release is not None and release < sglang.PAGE_SIZE_SINCE
    serial = release is not None and release < SGLANG_OVERLAP_SINCE
    # --disaggregation-transfer-backend from 0.4.6: 0.4.5's PD ran over Mooncake unasked
    one_backend = release is not None and release < SGLANG_TRANSFER_BACKEND_FLAG_SINCE
    for field, flag in VLLM_FLAGS if engine == "vllm" else SGLANG_FLAGS:
        value = fields.get(field)
        if field == "page_size" and no_page_size:
            continue  # no --page-size yet: its pages are single tokens
        if field == "disable_overlap_schedule" and serial:
            continue  # no overlap scheduler (nor its flag) yet: it schedules in series
        if field == "disaggregation_transfer_backend" and one_backend:
            continue  # no flag yet: Mooncake, the one backend
        if field == "max_cudagraph_capture_size" and old_capture:
            flag = "--cuda-graph-sizes"  # one value: the same largest size
        if field == "enable_chunked_prefill" and value is False:
            if release is not None and release < vllm.FLAG_SINCE[flag]:
                continue  # no flag yet: prompts are never chunked
            new_form = release is None or release >= VLLM_NO_FLAG_FORM_SINCE
            parts += ["--no-enable-chunked-prefill"] if new_form else [flag, "False"]
            continue
        if field == "async_scheduling" and value is False:
            # asked off: the release's BooleanOptionalAction form (0.10 on, where the flag is)
            parts.append("--no-async-scheduling")
            continue
        if field == "enable_prefix_caching" and value is False:
            if release is None or release >= VLLM_NO_PREFIX_CACHING_SINCE:
                parts.append("--no-enable-prefix-caching")
            continue
        if value is None or value is False or LINE_DEFAULTS.get(field) == value:
            continue
        if (
            field == "kv_cache_dtype"
            and value == "auto"
            and engine == "vllm"
            and release is not None
            and release < VLLM_KV_CACHE_DTYPE_SINCE
        ):
            continue
        if value is True:
            parts.append(flag)
        elif field == "max_model_len" and value == vllm.MAX_MODEL_LEN_AUTO:
            parts += [flag, "auto"]
        elif isinstance(value, float):
            parts += [flag, f"{value:.4f}".rstrip("0").rstrip(".")]
        else:
            parts += [flag, str(value)]
    if span is not None:
        parts += hosts.line_flags(span)
    if model.trust_remote_code:
        # the config's auto_map names code in the repo: both engines refuse to load it without
        # this flag (transformers' trust_remote_code, passed through by vLLM and SGLang)
        parts.append("--trust-remote-code")
    return " ".join(p if p in SHELL_PLACEHOLDERS else shlex.quote(p) for p in head + parts)


# Line fields that take a word (or a JSON object), kept as text.
STRING_FIELDS = (
    "kv_cache_dtype",
    "dtype",
    "quantization",
    "kv_offloading_backend",
    "kv_transfer_config",
    "disaggregation_mode",
    "disaggregation_transfer_backend",
    "moe_a2a_backend",
    "deepep_mode",
    "all2all_backend",
    "mamba_radix_cache_strategy",
    "distributed_executor_backend",
)
# Line fields that are bare flags, and those that take a decimal number.
BOOLEAN_FIELDS = (
    "enable_lora",
    "enforce_eager",
    "async_scheduling",
    "enable_prefix_caching",
    "disable_radix_cache",
    "disable_cuda_graph",
    "disable_overlap_schedule",
    "enable_expert_parallel",
    "enable_dp_attention",
    "enable_hierarchical_cache",
    "enable_deepep_moe",
    "enable_two_batch_overlap",
    "enable_dbo",
    "enable_dp_lm_head",
)
FLOAT_FIELDS = (
    "gpu_memory_utilization",
    "mem_fraction_static",
    "mamba_full_memory_ratio",
    "kv_offloading_size",
    "hicache_ratio",
    "hicache_size",
)


# A pool's own engine flags (simulate --prefill-args / --decode-args): the settings fields that
# are ServeSettings' own, by engine; the rest go to its extras as the engine's fields. Refused
# there: what the pools share or set by their own options (layout, role, weights, KV dtype,
# context, offload).
POOL_TOP_FIELDS = {
    "vllm": {
        "gpu_memory_utilization": "memory_fraction",
        "max_num_seqs": "max_num_seqs",
        "max_num_batched_tokens": "max_num_batched_tokens",
        "block_size": "block_size",
        "distributed_executor_backend": "distributed_executor_backend",
    },
    "sglang": {
        "mem_fraction_static": "memory_fraction",
        "max_running_requests": "max_num_seqs",
        "chunked_prefill_size": "max_num_batched_tokens",
        "page_size": "block_size",
    },
}
POOL_SHARED_FIELDS = frozenset(
    {
        "tensor_parallel_size", "pipeline_parallel_size", "data_parallel_size",
        "enable_expert_parallel", "tp_size", "pp_size", "attn_dp_size", "dp_size",
        "enable_dp_attention", "ep_size", "max_model_len", "context_length", "kv_cache_dtype",
        "dtype", "quantization", "kv_transfer_config", "disaggregation_mode",
        "enable_chunked_prefill", "disaggregation_transfer_backend", "kv_offloading_size",
        "kv_offloading_backend",
        "enable_hierarchical_cache", "hicache_ratio", "hicache_size",
    }
)  # fmt: skip


def pool_overrides(engine: str, text: str, flag: str) -> dict[str, Any]:
    """The serve values a disaggregated pool's own engine flags set (`text`, as on its command
    line; `flag`: the option that gave them): ServeSettings' own fields and the engine's extras.
    A flag the plan does not model, or one the pools share or set by their own options, is
    refused naming it."""
    from planner.core.flags import parse_argv

    head = "vllm serve MODEL" if engine == "vllm" else "python -m sglang.launch_server"
    try:
        words = shlex.split(text)
    except ValueError as exc:
        raise InputError(flag, str(exc).lower()) from exc
    parsed = parse_argv([*shlex.split(head), *words], flag)
    flags = dict(parsed.flags) if parsed else {}
    flags.pop("--model", None)
    values = set(flags.values())
    for word in words:  # short flags and stray words: the parser would pass them by
        if not word.startswith("--") and word not in values:
            raise InputError(flag, f"{word!r}: expected --flag value pairs, as on the line")
    known = {f: field for field, f in (VLLM_FLAGS if engine == "vllm" else SGLANG_FLAGS)}
    if engine == "vllm":
        known |= VLLM_NEGATIVE_FLAGS
    for name in sorted(flags):
        if name not in known:
            raise InputError(flag, f"{name} is not a {engine} flag the plan models")
        if known[name] in POOL_SHARED_FIELDS:
            raise InputError(flag, f"{name}: the pools share it, or take it by their own options")
        if known[name] == "num_scheduler_steps":
            raise InputError(flag, f"{name}: V0's multi-step rounds are not modelled with --disagg")
    try:
        fields = fields_from_flags(engine, flags)
    except ValueError as exc:  # a number flag given a word
        raise InputError(flag, f"a flag's value is not a number ({exc})") from exc
    top = POOL_TOP_FIELDS[engine]
    out: dict[str, Any] = {top[k]: v for k, v in fields.items() if k in top}
    extra = {k: v for k, v in fields.items() if k not in top}
    if extra:
        out["extra"] = extra
    return out


def fields_from_line(engine: str, line: str) -> dict[str, Any]:
    """The settings fields a launch line sets (the inverse of `command_line`)."""
    from planner.core.flags import parse_argv

    parsed = parse_argv(shlex.split(line), "line")
    return fields_from_flags(engine, parsed.flags if parsed else {})


# vLLM's negative forms of its BooleanOptionalAction flags, and the field each turns off.
VLLM_NEGATIVE_FLAGS = {
    "--no-enable-chunked-prefill": "enable_chunked_prefill",
    "--no-async-scheduling": "async_scheduling",
    "--no-enable-prefix-caching": "enable_prefix_caching",
}


def fields_from_flags(engine: str, flags: dict[str, str]) -> dict[str, Any]:
    """The settings fields a launch line's parsed flags set (planner.core.flags.parse_argv);
    ValueError where a number flag holds a word."""
    out: dict[str, Any] = {}
    if engine == "vllm":
        out |= {field: False for flag, field in VLLM_NEGATIVE_FLAGS.items() if flag in flags}
    for field, flag in VLLM_FLAGS if engine == "vllm" else SGLANG_FLAGS:
        if flag not in flags:
            continue
        raw = flags[flag]
        if field == "enable_chunked_prefill" or field in BOOLEAN_FIELDS:
            out[field] = raw.lower() == "true"  # bare, `--flag=False` or `--flag False`
        elif field in FLOAT_FIELDS:
            out[field] = float(raw)
        elif field in STRING_FIELDS:
            out[field] = raw
        else:
            out[field] = int(raw)
    if out.pop("enable_dp_attention", False) and "dp_size" in out:
        out["attn_dp_size"] = out.pop("dp_size")  # SGLang's own rewrite (0.5.23)
    if out.pop("enable_deepep_moe", False):
        out["moe_a2a_backend"] = "deepep"  # SGLang's own rewrite (0.4.10.post2)
    return out


def serve_json(plan: ServePlan, model: ModelSpec, gpu: GpuSpec, s: ServeSettings) -> dict[str, Any]:
    """The `--json` object: the textbook ledger's keys filled from the engine, plus its own."""
    from planner.core.engines import engine_kv_dtype
    from planner.core.kv import group_rows, kv_bytes_per_sequence, kv_bytes_per_token
    from planner.units import dtype_bytes

    p = plan.prediction
    # the dtype the engine resolved (a refused plan has no prediction: the engine's rule)
    kv_dtype = (
        p.kv_dtype if p else engine_kv_dtype(s.engine, model, gpu, s.version, s.kv_cache_dtype)
    )
    kv_bytes = dtype_bytes(kv_dtype)
    total = p.total_memory_bytes if p else 0
    workspace = (p.activation_peak_bytes + p.non_torch_bytes + p.cudagraph_bytes) if p else 0
    return {
        "ledger": "engine",
        "fits": plan.fits,
        "reasons": plan.reasons,
        "suggestions": [x.model_dump() for x in plan.suggestions],
        "model": {
            "name": model.name,
            "source": model.source,
            "revision": model.revision,
            "config_sha256": model.config_sha256,
            "params_total": model.params_total,
            "params_exact": model.params_exact,
            "params_active": model.params_active,
            "weights_bytes": model.weights_bytes,
            "weights_exact": model.weights_exact,
            "weights_basis": model.weights_basis,
            # a quantized checkpoint's own label (nvfp4, fp8-fbgemm: what its GEMMs run at),
            # else the online --quantization, else the checkpoint's dtype
            "weight_dtype": model.weight_dtype
            if model.weight_dtype not in ("bf16", "fp16", "fp32")
            else s.quantization or model.weight_dtype,
            "max_context_tokens": model.max_context_tokens,
        },
        "gpu": {"id": gpu.id, "name": gpu.name, "provenance": []},
        "settings": {
            "engine": s.engine,
            "tp": s.tp,
            "pp": s.pp,
            "context_tokens": s.context_tokens,
            "mean_tokens": s.mean_tokens,
            "block_tokens": plan.flags.get("block_size", plan.flags.get("page_size")),
            "kv_dtype": "fp8" if s.kv_cache_dtype.startswith("fp8") else "auto",
            "latency_cap": s.latency_cap,
            "data_parallel_ranks": data_parallel_ranks(s, model),
            "attention_tp": attention_tp(s, model),
        },
        "hbm_bytes": total,
        "hbm_basis": "cuda",
        "weights_bytes_per_gpu": p.weights_bytes if p else 0,
        "weights_fraction_of_hbm": round(p.weights_bytes / total, 6) if p and total else 0.0,
        "workspace_bytes": workspace,
        "headroom_bytes": (total - p.requested_memory_bytes) if p else 0,
        "kv_pool_bytes": max(p.available_kv_bytes, 0) if p else 0,
        "kv_bytes_per_token": kv_bytes_per_token(model, s.tp, kv_bytes),
        "kv_bytes_per_sequence": kv_bytes_per_sequence(model, s.context_tokens, s.tp, kv_bytes),
        "kv_bytes_per_sequence_mean": kv_bytes_per_sequence(model, s.mean_tokens, s.tp, kv_bytes),
        "kv_layer_groups": [r.model_dump() for r in group_rows(model, s.tp, kv_bytes)],
        "max_seqs_contiguous": plan.max_seqs_at_context,
        "max_seqs_paged": plan.max_seqs_at_mean,
        "batch_cap": plan.cap,
        "operating_concurrency": plan.max_num_seqs,
        "binding": plan.binding,
        "binding_reason": plan.binding_reason,
        "kv_replication_factor": tp_replication(model, attention_tp(s, model))[0],
        "warnings": plan.warnings,
        "flags": {s.engine: plan.command},
        "engine": p.model_dump() if p else None,
        "kv_tiers": plan.kv_tiers.model_dump() if plan.kv_tiers else None,
    }
