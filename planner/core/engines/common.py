"""Shared pieces of the engine models: versions, term provenance, the prediction record."""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Literal, TypeVar

from pydantic import BaseModel, ConfigDict, Field

from planner.core.specs import GpuSpec, KvKind, ModelSpec
from planner.errors import InputError, PlannerError
from planner.units import GIB_BYTES, ceil_div

T = TypeVar("T")
# The engines' own names, as messages spell them.
ENGINE_NAMES = {"vllm": "vLLM", "sglang": "SGLang"}

TermSource = Literal[
    "exact", "derived", "calibrated", "log", "device", "user", "default", "your-logs"
]

# NVML total minus what cudaMemGetInfo reports, for cards whose CUDA total no log printed:
# the median of six cards where both figures are public (nvidia-smi totals and the totals engine
# start-up logs print, in vLLM / SGLang GitHub issues):
# H100 0.46, A100-40GB 0.44, L40S 0.57, L4 0.33, RTX 4090 0.36, RTX 3090 0.42 GiB.
CUDA_RESERVED_BYTES = round(0.43 * GIB_BYTES)

# Rotary-embedding cos/sin cache vLLM and SGLang allocate with the weights:
# max_position_embeddings x rotary_dim x dtype bytes. Llama-3.1-8B: 131,072 x 128 x 2 B =
# 32 MiB, which is the gap between its safetensors total (14.957 GiB) and the logged 14.99 GiB.
ROTARY_CACHE_COPIES = 1


def parse_version(text: str, field: str = "--engine-version") -> tuple[int, int, int]:
    """`0.19.0`, `v0.8.1`, `0.7.2 (V0)`, `~0.4.1` -> (major, minor, patch)."""
    m = re.search(r"(\d+)\.(\d+)(?:\.(\d+))?", text)
    if not m:
        raise InputError(field, f"{text!r} is not a version like 0.19.0")
    return int(m.group(1)), int(m.group(2)), int(m.group(3) or 0)


def outside_table(
    engine: str,
    version: tuple[int, int, int],
    oldest: tuple[int, int, int],
    newest: tuple[int, int, int],
) -> list[str]:
    """A note when the asked version lies outside the releases this planner models."""
    if version > newest:
        return [
            f"{engine} {version_text(version)} is newer than the newest release modelled "
            f"({version_text(newest)}): that release's rules are used"
        ]
    if version < oldest:
        return [
            f"{engine} {version_text(version)} is older than the oldest release modelled "
            f"({version_text(oldest)}): that release's rules are used, unchecked against a log "
            "of this version"
        ]
    return []


# The releases that load a ModelOpt MIXED_PRECISION checkpoint, by the algorithm its layers name,
# as read in the wheels: vLLM's ModelOptMixedPrecisionConfig (model_executor/layers/quantization/
# modelopt.py) from 0.17 (absent from 0.16) with FP8 and NVFP4 layers, W4A16_NVFP4 ones from
# 0.22 (absent from 0.21), MXFP8 ones from 0.25 (absent from 0.24); SGLang's (srt/layers/
# quantization/modelopt_quant.py) from 0.5.10 (absent from 0.5.9), W4A16_NVFP4 from 0.5.15
# (absent from 0.5.14), MXFP8 from 0.5.17 (absent from 0.5.16). An algorithm a release does not
# know fails its load.
MIXED_PRECISION_SINCE: dict[str, dict[str, tuple[int, int, int]]] = {
    "vllm": {
        "FP8": (0, 17, 0),
        "NVFP4": (0, 17, 0),
        "W4A16_NVFP4": (0, 22, 0),
        "MXFP8": (0, 25, 0),
    },
    "sglang": {
        "FP8": (0, 5, 10),
        "NVFP4": (0, 5, 10),
        "W4A16_NVFP4": (0, 5, 15),
        "MXFP8": (0, 5, 17),
    },
}


def check_mixed_precision(model: ModelSpec, engine: str, version: tuple[int, int, int]) -> None:
    """Refuse a ModelOpt MIXED_PRECISION checkpoint on a release that cannot load one of the
    algorithms its layers name (MIXED_PRECISION_SINCE)."""
    since = MIXED_PRECISION_SINCE.get(engine)
    if not model.mixed_precision_algos or since is None:
        return
    needed = max(since[a] for a in model.mixed_precision_algos)
    if version < needed:
        named = ", ".join(model.mixed_precision_algos)
        raise InputError(
            "--engine-version",
            f"{version_text(version)}: {engine} loads {model.name}'s ModelOpt MIXED_PRECISION "
            f"layers ({named}) from {version_text(needed)}",
        )


def as_of(
    spans: tuple[tuple[tuple[int, int, int], T], ...], version: tuple[int, int, int], before: T
) -> T:
    """The value of the newest span (first release, value) a release has reached; `before`
    where it predates them all."""
    reached = [value for first, value in spans if version >= first]
    return reached[-1] if reached else before


def refuse_before(
    engine: str,
    version: tuple[int, int, int],
    since: Mapping[str, tuple[int, int, int]],
    asked: Mapping[str, bool],
) -> None:
    """Refuse, naming the first, a flag asked (`asked[flag]`) of a release older than the first
    that takes it (`since[flag]`)."""
    for flag, first in since.items():
        if asked[flag] and version < first:
            raise InputError(
                flag,
                f"{engine} takes it from {version_text(first)} (this plan runs {engine} "
                f"{version_text(version)})",
            )


def version_text(v: tuple[int, int, int]) -> str:
    """(0, 19, 0) -> "0.19.0"."""
    return ".".join(map(str, v))


class NoKvCache(PlannerError):
    """The engine's arithmetic leaves no KV cache: a finding (exit 1), not bad input."""

    def __init__(self, flag: str, message: str) -> None:
        self.flag = flag
        super().__init__(f"{flag}: {message}")


# vLLM / SGLang `--dtype` spellings -> our dtype names ("auto" resolves against the checkpoint).
ENGINE_DTYPES = {
    "half": "fp16",
    "float16": "fp16",
    "bfloat16": "bf16",
    "float": "fp32",
    "float32": "fp32",
}


# vLLM / SGLang `--kv-cache-dtype` spellings of the one- and two-byte caches the ledger models
# ("auto": the compute dtype). vLLM's fp8_ds_mla is DeepSeek's scaled fp8 layout for sparse
# attention: one byte per element here, its scales and bf16 RoPE part added by the vLLM model
# (vllm.ds_mla_layout). vLLM 0.34 (vllm/config/cache.py CacheDType) also takes other formats
# that store scales or packed values beside the elements (*_per_token_head, nvfp4,
# TurboQuant); SGLang 0.5 takes fp4_e2m1: their page sizes are not modelled, so they are
# refused rather than sized as one byte per element.
KV_CACHE_DTYPES = {
    "float16": "fp16",
    "half": "fp16",
    "bfloat16": "bf16",
    "bf16": "bf16",
    "fp8": "fp8",
    "fp8_e4m3": "fp8",
    "fp8_e5m2": "fp8",
    "fp8_inc": "fp8",
    "fp8_ds_mla": "fp8",
}
KV_CACHE_DTYPE_NAMES = ("auto", *KV_CACHE_DTYPES)


def kv_cache_dtype_refusal(flag: str) -> str | None:
    """Why an engine's --kv-cache-dtype spelling cannot be sized, or None."""
    if flag in ("", *KV_CACHE_DTYPE_NAMES):
        return None
    return (
        f"kv_cache_dtype={flag[:40]!r} is not a KV cache format the ledger models "
        f"({', '.join(KV_CACHE_DTYPE_NAMES)})"
    )


def kv_cache_dtype(flag: str, model: ModelSpec, run_flag: str) -> str:
    """The KV cache's dtype (one of units.KV_DTYPES) for an engine's --kv-cache-dtype spelling:
    the compute dtype for "auto"; ValueError for a format the ledger does not model."""
    if refusal := kv_cache_dtype_refusal(flag):
        raise ValueError(refusal)
    return KV_CACHE_DTYPES.get(flag) or compute_dtype(model, run_flag)


# CUDA compute capability majors the engines switch kernels on (developer.nvidia.com/cuda-gpus).
HOPPER_MAJOR = 9  # H100, H200, H20, GH200: 9.0
BLACKWELL_MAJOR = 10  # data-centre Blackwell: B200 and GB200 10.0, B300 10.3
CONSUMER_BLACKWELL_MAJOR = 12  # RTX 50, RTX PRO 6000 Blackwell: 12.0; GB10: 12.1


# DeepSeek's fp8 MLA cache layout for its sparse attention (FlashMLA's sparse kernels; vLLM's
# "fp8_ds_mla", vllm/v1/kv_cache_interface.py MLAAttentionSpec; SGLang's DSA pool,
# DSATokenToKVPool): the latent's no-RoPE part in fp8 with one fp32 scale per 128 values, the
# RoPE part in bf16: 656 bytes per token per layer for DeepSeek-V3.2's 512 + 64.
DS_MLA_QUANT_BLOCK_VALUES = 128
DS_MLA_SCALE_BYTES = 4
DS_MLA_ROPE_BYTES = 2


def is_mla(model: ModelSpec) -> bool:
    """Multi-head latent attention: layers that keep one compressed latent per token."""
    return any(g.kind is KvKind.MLA for g in model.kv_groups)


def is_dsa(model: ModelSpec) -> bool:
    """DeepSeek's sparse attention: the layers keep a lightning-indexer key beside the latent."""
    return any(g.indexer_bytes_per_token for g in model.kv_groups)


def ds_mla_latent_bytes(latent_dim: int, rope_dim: int) -> int:
    """Bytes one token's latent takes per layer in DeepSeek's scaled fp8 MLA layout."""
    nope = latent_dim - rope_dim
    return (
        nope + nope // DS_MLA_QUANT_BLOCK_VALUES * DS_MLA_SCALE_BYTES + rope_dim * DS_MLA_ROPE_BYTES
    )


def capability(gpu: GpuSpec) -> tuple[int, int]:
    """The card's CUDA compute capability; (99, 0) where unknown or not NVIDIA (no switch)."""
    if gpu.vendor.lower() != "nvidia" or gpu.compute_capability is None:
        return (99, 0)
    major, minor = gpu.compute_capability.split(".")
    return int(major), int(minor)


def compute_dtype(model: ModelSpec, flag: str) -> str:
    """The dtype the engine computes in: `--dtype auto` keeps bf16/fp16 and runs fp32 as fp16."""
    if flag in ("auto", ""):
        return "fp16" if model.native_dtype == "fp32" else model.native_dtype
    return ENGINE_DTYPES[flag]


class EnginePrediction(BaseModel):
    """One engine's start-up arithmetic, term by term, and the lines it should log."""

    model_config = ConfigDict(extra="forbid")

    name: str
    version: str
    total_memory_bytes: int
    requested_memory_bytes: int
    weights_bytes: int
    activation_peak_bytes: int
    non_torch_bytes: int
    cudagraph_bytes: int
    graph_max_batch: int | None = Field(
        default=None,
        ge=0,
        description="the largest decode batch the engine captures a CUDA graph for (vLLM V1; "
        "0 in eager mode; None where the engine's own setting says)",
    )
    connector_bytes: int = Field(
        default=0, ge=0, description="a KV connector's GPU-side buffers (LMCache's staging chunk)"
    )
    rope_cache_bytes: int = Field(
        default=0,
        ge=0,
        description="the RoPE cos/sin cache inside weights_bytes (allocated with the weights, "
        "not streamed every step as they are)",
    )
    available_kv_bytes: int
    kv_dtype: str = Field(
        description="the KV cache's dtype as the engine resolves --kv-cache-dtype (a units "
        "dtype name: bf16, fp16, fp8, ...)",
    )
    resolved_notes: list[str] = Field(
        default_factory=list,
        exclude=True,  # among `notes` in every dump already
        description="where the engine runs other than its flags name (a KV cache of another "
        "dtype, data-parallel attention it turns on), and why: what a run's figures rest on "
        "(also among `notes`)",
    )
    bytes_per_block: int
    num_gpu_blocks: int
    usable_blocks: int = Field(description="num_gpu_blocks minus the reserved null block")
    kv_cache_tokens: int
    max_concurrency: float
    blocks_per_request: int
    num_kv_groups: int
    settings: dict[str, object]
    defaults_used: list[str]
    term_sources: dict[str, TermSource]
    log_lines: list[str]
    notes: list[str] = Field(default_factory=list)


def total_term(
    gpu: GpuSpec, measured: int | None, measured_source: TermSource
) -> tuple[int, TermSource]:
    """The total an engine budgets from: measured (log / device) when given, else modelled."""
    if measured is not None:
        return measured, measured_source
    return cuda_total_bytes(gpu)


# Bytes per parameter of unquantized checkpoints, by the weight dtype a config names.
UNQUANTIZED_BYTES = {"fp32": 4, "fp16": 2, "bf16": 2}


class Sharding(BaseModel):
    """How one rank's weights split when attention and the MoE layers span different groups
    (data-parallel attention): the rest of the model follows `dense_ranks`."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    attention_ranks: int = Field(ge=1, description="GPUs one attention layer is split over")
    dense_ranks: int = Field(ge=1, description="GPUs the dense FFN, norms and lm_head span")
    expert_ranks: int = Field(ge=1, description="GPUs the routed experts are spread over")
    embedding_ranks: int = Field(
        default=0,
        ge=0,
        description="GPUs the input embedding is split over on its own (1: whole on every GPU; "
        "0: with the rest, over dense_ranks)",
    )
    dense_mlp_ranks: int = Field(
        default=0,
        ge=0,
        description="GPUs the dense (not routed) MLPs are split over on their own (1: whole on "
        "every GPU, SGLang's --moe-dense-tp-size 1; 0: with the rest)",
    )
    lm_head_ranks: int = Field(
        default=0,
        ge=0,
        description="GPUs an untied lm_head is split over on its own (SGLang's "
        "--enable-dp-lm-head: the attention TP group; 0: with the rest)",
    )


def weights_term(
    model: ModelSpec,
    override_bytes: int | None,
    override_exact: bool | None,
    measured: int | None,
    tp: int,
    pp: int,
    dtype_bytes: int,
    sharding: Sharding | None = None,
) -> tuple[int, TermSource]:
    """Weights as loaded on one rank, and whether that figure is exact, derived or logged."""
    if measured is not None:
        return measured, "log"
    weights = model.weights_bytes if override_bytes is None else override_bytes
    exact = model.weights_exact if override_exact is None else override_exact
    stored = UNQUANTIZED_BYTES.get(model.weight_dtype)
    if override_bytes is None and stored is not None and stored != dtype_bytes:
        # An unquantized checkpoint loads in the run dtype: --dtype float32 on a bf16
        # checkpoint doubles it, an fp32 checkpoint under --dtype auto (fp16) halves it
        # (both engines cast each tensor as it loads: vLLM model_loader, SGLang loader).
        weights = weights * dtype_bytes // stored
        exact = False
    if sharding is not None:
        loaded = sharded_weights_bytes(model, weights, pp, dtype_bytes, sharding)
        return loaded, "derived"  # each part at the checkpoint's mean bytes per parameter
    loaded = loaded_weights_bytes(model, weights, tp, pp, dtype_bytes)
    return loaded, "exact" if exact else "derived"


def sharded_weights_bytes(
    model: ModelSpec, weights_bytes: int, pp: int, dtype_bytes: int, sharding: Sharding
) -> int:
    """One rank's weights under `sharding`: the checkpoint split into routed experts,
    attention, the input embedding, the dense MLPs, an untied lm_head and the rest by parameter
    count (each at the checkpoint's mean bytes per parameter, but the lm_head at the run's
    16-bit width: quantized checkpoints keep it unquantized), each part over its own ranks,
    plus the RoPE cache."""
    per_param = weights_bytes / max(model.params_total, 1)
    experts = min(weights_bytes, round(model.expert_params * per_param))
    attention = min(weights_bytes - experts, round(model.attention_params * per_param))
    embedding = round(model.embedding_params * per_param) if sharding.embedding_ranks else 0
    dense_mlp = round(model.dense_mlp_params * per_param) if sharding.dense_mlp_ranks else 0
    untied = sharding.lm_head_ranks and not model.tied_embeddings
    lm_head = min(weights_bytes, model.embedding_params * dtype_bytes) if untied else 0
    rest = max(0, weights_bytes - experts - attention - embedding - dense_mlp - lm_head)
    rope = rope_cache_bytes(model, dtype_bytes)
    return (
        ceil_div(experts, sharding.expert_ranks * pp)
        + ceil_div(attention, sharding.attention_ranks * pp)
        + ceil_div(rest, sharding.dense_ranks * pp)
        + ceil_div(embedding, max(1, sharding.embedding_ranks))  # the first stage's
        + ceil_div(dense_mlp, max(1, sharding.dense_mlp_ranks) * pp)
        + ceil_div(lm_head, max(1, sharding.lm_head_ranks))  # the last stage's
        + rope
    )


def cuda_total_bytes(gpu: GpuSpec) -> tuple[int, TermSource]:
    """Total memory as cudaMemGetInfo reports it: logged figure, else NVML minus a reserve."""
    if gpu.memory_bytes_cuda:
        return gpu.memory_bytes_cuda, "calibrated"
    if gpu.memory_bytes_nvml:
        return gpu.memory_bytes_nvml - CUDA_RESERVED_BYTES, "derived"
    return gpu.memory_bytes_marketed, "derived"


def rope_cache_bytes(model: ModelSpec, dtype_bytes: int) -> int:
    """The RoPE cos/sin cache each rank allocates with its weights: a row per position."""
    return model.max_context_tokens * rotary_dim(model) * dtype_bytes * ROTARY_CACHE_COPIES


def rotary_dim(model: ModelSpec) -> int:
    """Width of the RoPE cos/sin cache rows (the head dimension)."""
    return model.head_dim


def loaded_weights_bytes(
    model: ModelSpec, weights_bytes: int, tp: int, pp: int, dtype_bytes: int
) -> int:
    """Weights as the engine holds them on one rank: the checkpoint share plus the RoPE cache."""
    return ceil_div(weights_bytes, tp * pp) + rope_cache_bytes(model, dtype_bytes)


def check_stages(model: ModelSpec, pp: int) -> None:
    """Every pipeline stage needs at least one decoder layer (both engines split by layer)."""
    if pp > model.num_layers:
        raise InputError(
            "--pp", f"{pp:,} stages for {model.num_layers} layers: each stage needs at least one"
        )
