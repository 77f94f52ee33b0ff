"""The textbook HBM ledger (docs/method.md §2): pool, contiguous vs paged concurrency, binding."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from planner.core.flags import EngineFlags, engine_flags
from planner.core.kv import (
    KvGroupRow,
    check_tp,
    group_rows,
    kv_bytes_per_sequence,
    kv_bytes_per_token,
    tp_replication,
)
from planner.core.specs import GpuSpec, ModelSpec
from planner.errors import InputError, PlannerError
from planner.units import DTYPE_BITS, GIB_BYTES, bytes_for_elements, ceil_div, dtype_bytes

# docs/method.md §2: "a few GiB of activations/workspace"; 4 GiB reproduces its ~42 GiB pool.
DEFAULT_WORKSPACE_BYTES = 4 * GIB_BYTES
# docs/method.md §2: 5% fragmentation headroom.
DEFAULT_HEADROOM_FRACTION = 0.05
# docs/method.md §2: mean actual length ~2,000 tokens per sequence.
DEFAULT_MEAN_TOKENS = 2000
# vLLM and SGLang-style paging default (vLLM CacheConfig.DEFAULT_BLOCK_SIZE = 16 on CUDA).
DEFAULT_BLOCK_TOKENS = 16
# docs/method.md §2: compute batch cap 128 in the reference case.
DEFAULT_COMPUTE_BATCH_CAP = 128
# Above this gpu_memory_utilization the engine has almost no slack (docs/method.md §7).
HIGH_UTILIZATION_WARNING = 0.95


class DoesNotFit(PlannerError):
    """The weights (plus workspace) leave no room for a KV pool: a finding, exit 1."""


class CapacitySettings(BaseModel):
    """Every knob of the ledger; CLI flags and the Python API share this validator."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    tp: int = Field(default=1, ge=1)
    context_tokens: int = Field(gt=0, description="max model length (tokens)")
    mean_tokens: int = Field(default=DEFAULT_MEAN_TOKENS, gt=0)
    block_tokens: int = Field(default=DEFAULT_BLOCK_TOKENS, gt=0)
    kv_dtype: str = "bf16"
    weight_dtype: str | None = Field(default=None, description="override; None = checkpoint's")
    headroom_fraction: float = Field(default=DEFAULT_HEADROOM_FRACTION, ge=0.0, lt=1.0)
    workspace_bytes: int = Field(default=DEFAULT_WORKSPACE_BYTES, ge=0)
    compute_batch_cap: int = Field(default=DEFAULT_COMPUTE_BATCH_CAP, gt=0)
    hbm_bytes: int = Field(gt=0, description="per-GPU memory the ledger plans against")
    hbm_basis: str = Field(default="marketed", description="marketed | nvml | cuda | user")


class Ledger(BaseModel):
    """Per-GPU memory budget, line by line."""

    model_config = ConfigDict(extra="forbid")

    hbm_bytes: int
    hbm_basis: str
    weights_bytes_total: int
    weights_bytes_per_gpu: int
    weights_fraction_of_hbm: float
    weights_exact: bool
    workspace_bytes: int
    headroom_bytes: int
    kv_pool_bytes: int


class CapacityPlan(BaseModel):
    """Inputs, every intermediate figure, the verdict and the flags of one capacity plan."""

    model_config = ConfigDict(extra="forbid")

    model: ModelSpec
    gpu: GpuSpec
    settings: CapacitySettings
    weight_dtype: str
    ledger: Ledger
    kv_bytes_per_token: int
    kv_bytes_per_sequence: int
    kv_bytes_per_sequence_mean: int
    kv_bytes_per_sequence_paged_mean: int
    kv_layer_groups: list[KvGroupRow]
    max_seqs_contiguous: int
    max_seqs_paged: int
    paged_over_contiguous: float | None
    batch_cap: int
    operating_concurrency: int
    binding: Literal["memory", "latency"]
    binding_reason: str
    kv_replication_factor: int
    gpu_memory_utilization: float
    mem_fraction_static: float
    warnings: list[str]
    flags: EngineFlags
    gpu_provenance: list[str] = Field(default_factory=list, description="device vs catalog")


def weights_bytes_for(model: ModelSpec, weight_dtype: str | None) -> tuple[int, str, bool]:
    """Checkpoint weight bytes, or with linear layers re-stored in `weight_dtype`.

    Returns (bytes, dtype label, exact). An override is an estimate: embeddings, norms and other
    non-linear parameters stay in the model's native dtype.
    """
    if weight_dtype is None:
        return model.weights_bytes, model.weight_dtype, model.weights_exact
    other = model.params_total - model.quantizable_params
    total = bytes_for_elements(model.quantizable_params, weight_dtype) + bytes_for_elements(
        other, model.native_dtype if model.native_dtype in DTYPE_BITS else "bf16"
    )
    return total, weight_dtype, False


def _binding(paged: int, cap: int, mean_tokens: int) -> tuple[Literal["memory", "latency"], str]:
    if paged < cap:
        return "memory", (
            f"memory binds: the KV pool holds {paged} sequences of ~{mean_tokens:,} tokens, "
            f"fewer than the batch cap of {cap}"
        )
    return "latency", (
        f"latency/compute binds: the KV pool holds {paged} sequences of ~{mean_tokens:,} tokens, "
        f"more than the batch cap of {cap}"
    )


def _floor_to(value: float, places: int) -> float:
    scale: int = 10**places
    return int(value * scale) / scale


def plan_capacity(model: ModelSpec, gpu: GpuSpec, settings: CapacitySettings) -> CapacityPlan:
    """Compute the ledger, both concurrencies and the binding resource for one GPU of a TP group."""
    s = settings
    check_tp(model, s.tp)
    if s.context_tokens > model.max_context_tokens:
        raise InputError(
            "--context",
            f"{s.context_tokens:,} exceeds {model.name}'s maximum of "
            f"{model.max_context_tokens:,} tokens",
        )
    if s.mean_tokens > s.context_tokens:
        raise InputError("--mean-len", f"{s.mean_tokens:,} is above --context {s.context_tokens:,}")

    warnings: list[str] = []
    weights_total, weight_dtype, weights_exact = weights_bytes_for(model, s.weight_dtype)
    weights_per_gpu = ceil_div(weights_total, s.tp)
    free = s.hbm_bytes - weights_per_gpu - s.workspace_bytes
    if free <= 0:
        raise DoesNotFit(
            f"{model.name} needs {weights_per_gpu / GIB_BYTES:.1f} GiB of weights per GPU plus "
            f"{s.workspace_bytes / GIB_BYTES:.1f} GiB workspace, but {gpu.id} has "
            f"{s.hbm_bytes / GIB_BYTES:.1f} GiB; raise --tp or lower --weight-dtype"
        )
    headroom = int(free * s.headroom_fraction)
    pool = free - headroom

    kvb = dtype_bytes(s.kv_dtype)
    per_token = kv_bytes_per_token(model, s.tp, kvb)
    per_seq_ctx = kv_bytes_per_sequence(model, s.context_tokens, s.tp, kvb)
    per_seq_mean = kv_bytes_per_sequence(model, s.mean_tokens, s.tp, kvb)
    per_seq_paged = kv_bytes_per_sequence(model, s.mean_tokens, s.tp, kvb, s.block_tokens)

    contiguous = pool // per_seq_ctx
    paged = pool // per_seq_paged
    cap = s.compute_batch_cap
    binding, reason = _binding(paged, cap, s.mean_tokens)
    operating = min(paged, cap)

    replication, tp_notes = tp_replication(model, s.tp)
    warnings += tp_notes
    if contiguous == 0:
        warnings.append(
            f"one {s.context_tokens:,}-token sequence needs {per_seq_ctx / GIB_BYTES:.2f} GiB, "
            "more "
            f"than the {pool / GIB_BYTES:.2f} GiB pool: a contiguous allocator cannot serve it"
        )
    if paged == 0:
        warnings.append("the KV pool cannot hold even one mean-length sequence")
    if s.kv_dtype in ("int8", "fp32"):
        warnings.append(
            f"neither vLLM nor SGLang has a --kv-cache-dtype for {s.kv_dtype}; "
            f"the flags leave it at auto"
        )
    if s.weight_dtype is not None:
        warnings.append(
            f"weights re-stored as {weight_dtype} are estimated from the parameter count"
        )

    util = _floor_to((weights_per_gpu + s.workspace_bytes + pool) / s.hbm_bytes, 2)
    mem_fraction = _floor_to((weights_per_gpu + pool) / s.hbm_bytes, 2)
    if util > HIGH_UTILIZATION_WARNING:
        warnings.append(
            f"the plan hands the engine {util:.0%} of HBM (--gpu-memory-utilization {util:.2f}); "
            "docs/method.md §7 suggests ~0.90: raise --headroom or --workspace-gib for slack "
            "(fewer sequences), or check the engine's own arithmetic with --engine"
        )

    flags = engine_flags(
        model=model,
        tp=s.tp,
        context_tokens=s.context_tokens,
        max_seqs=max(operating, 1),
        gpu_memory_utilization=util,
        mem_fraction_static=mem_fraction,
        kv_dtype=s.kv_dtype,
        block_tokens=s.block_tokens,
    )
    return CapacityPlan(
        model=model,
        gpu=gpu,
        settings=s,
        weight_dtype=weight_dtype,
        ledger=Ledger(
            hbm_bytes=s.hbm_bytes,
            hbm_basis=s.hbm_basis,
            weights_bytes_total=weights_total,
            weights_bytes_per_gpu=weights_per_gpu,
            weights_fraction_of_hbm=weights_per_gpu / s.hbm_bytes,
            weights_exact=weights_exact,
            workspace_bytes=s.workspace_bytes,
            headroom_bytes=headroom,
            kv_pool_bytes=pool,
        ),
        kv_bytes_per_token=per_token,
        kv_bytes_per_sequence=per_seq_ctx,
        kv_bytes_per_sequence_mean=per_seq_mean,
        kv_bytes_per_sequence_paged_mean=per_seq_paged,
        kv_layer_groups=group_rows(model, s.tp, kvb),
        max_seqs_contiguous=contiguous,
        max_seqs_paged=paged,
        paged_over_contiguous=(paged / contiguous) if contiguous else None,
        batch_cap=cap,
        operating_concurrency=operating,
        binding=binding,
        binding_reason=reason,
        kv_replication_factor=replication,
        gpu_memory_utilization=util,
        mem_fraction_static=mem_fraction,
        warnings=warnings,
        flags=flags,
    )


def capacity_json(plan: CapacityPlan) -> dict[str, Any]:
    """The documented `--json` object of `planner capacity` (docs/json.md)."""
    m, s, led = plan.model, plan.settings, plan.ledger
    return {
        "ledger": "textbook",
        "fits": True,
        "reasons": [],
        "suggestions": [],
        "model": {
            "name": m.name,
            "source": m.source,
            "revision": m.revision,
            "config_sha256": m.config_sha256,
            "params_total": m.params_total,
            "params_exact": m.params_exact,
            "params_active": m.params_active,
            "weights_bytes": led.weights_bytes_total,
            "weights_exact": led.weights_exact,
            "weights_basis": m.weights_basis if s.weight_dtype is None else "override estimate",
            "weight_dtype": plan.weight_dtype,
            "max_context_tokens": m.max_context_tokens,
        },
        "gpu": {"id": plan.gpu.id, "name": plan.gpu.name, "provenance": plan.gpu_provenance},
        "settings": {
            "tp": s.tp,
            "context_tokens": s.context_tokens,
            "mean_tokens": s.mean_tokens,
            "block_tokens": s.block_tokens,
            "kv_dtype": s.kv_dtype,
            "headroom_fraction": s.headroom_fraction,
            "workspace_bytes": s.workspace_bytes,
            "compute_batch_cap": s.compute_batch_cap,
        },
        "hbm_bytes": led.hbm_bytes,
        "hbm_basis": led.hbm_basis,
        "weights_bytes_per_gpu": led.weights_bytes_per_gpu,
        "weights_fraction_of_hbm": round(led.weights_fraction_of_hbm, 6),
        "workspace_bytes": led.workspace_bytes,
        "headroom_bytes": led.headroom_bytes,
        "kv_pool_bytes": led.kv_pool_bytes,
        "kv_bytes_per_token": plan.kv_bytes_per_token,
        "kv_bytes_per_sequence": plan.kv_bytes_per_sequence,
        "kv_bytes_per_sequence_mean": plan.kv_bytes_per_sequence_mean,
        "kv_layer_groups": [row.model_dump() for row in plan.kv_layer_groups],
        "max_seqs_contiguous": plan.max_seqs_contiguous,
        "max_seqs_paged": plan.max_seqs_paged,
        "batch_cap": plan.batch_cap,
        "operating_concurrency": plan.operating_concurrency,
        "binding": plan.binding,
        "binding_reason": plan.binding_reason,
        "kv_replication_factor": plan.kv_replication_factor,
        "warnings": plan.warnings,
        "flags": plan.flags.model_dump(),
    }
