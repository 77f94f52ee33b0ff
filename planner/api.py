"""Name-based entry points shared by the CLI and the Python API (same validation, same numbers)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from pydantic import ValidationError

from planner.core.capacity import CapacityPlan, CapacitySettings, plan_capacity
from planner.errors import InputError
from planner.sources.models import resolve_model
from planner.sources.presets import find_gpu
from planner.units import KV_DTYPES, WEIGHT_DTYPES, normalize_dtype

if TYPE_CHECKING:  # numpy stays off the `planner capacity` path
    from planner.core.latency import Roofline

# Default max model length when --context is not given (capped at the model's own maximum).
DEFAULT_CONTEXT_TOKENS = 8192

# CapacitySettings field -> the CLI flag that sets it, so validation errors name the flag.
SETTING_FLAGS = {
    "tp": "--tp",
    "context_tokens": "--context",
    "mean_tokens": "--mean-len",
    "block_tokens": "--block-size",
    "kv_dtype": "--kv-dtype",
    "weight_dtype": "--weight-dtype",
    "headroom_fraction": "--headroom",
    "workspace_bytes": "--workspace-gib",
    "compute_batch_cap": "--compute-batch-cap",
    "hbm_bytes": "--gpu-memory-gib",
}


def settings_error(exc: ValidationError) -> InputError:
    """The first pydantic error as a one-line InputError naming the CLI flag."""
    err = exc.errors()[0]
    key = str(err["loc"][0]) if err["loc"] else "settings"
    value = err.get("input")
    return InputError(SETTING_FLAGS.get(key, key), f"{err['msg'].lower()} (got {value!r})")


def capacity_plan(
    *,
    gpu: str,
    preset: str | None = None,
    model: str | None = None,
    revision: str | None = None,
    gpu_memory_bytes: int | None = None,
    **settings: Any,
) -> CapacityPlan:
    """Resolve the model and GPU by name, validate the settings, and plan."""
    spec = resolve_model(preset, model, revision)
    provenance: list[str] = []
    device_bytes: int | None = None
    if gpu.strip().lower() == "auto":
        from planner.sources.devices import detect, planning_gpu

        card, device_bytes, provenance = planning_gpu(detect())
    else:
        card = find_gpu(gpu)
    values = dict(settings)
    values.setdefault("context_tokens", min(DEFAULT_CONTEXT_TOKENS, spec.max_context_tokens))
    kv = values.get("kv_dtype") or spec.native_dtype
    values["kv_dtype"] = normalize_dtype(kv, "--kv-dtype", KV_DTYPES)
    if values.get("weight_dtype") is not None:
        values["weight_dtype"] = normalize_dtype(
            values["weight_dtype"], "--weight-dtype", WEIGHT_DTYPES
        )
    if gpu_memory_bytes is not None:
        values["hbm_bytes"], values["hbm_basis"] = gpu_memory_bytes, "user"
    elif device_bytes is not None:
        values["hbm_bytes"], values["hbm_basis"] = device_bytes, "device"
    else:
        values["hbm_bytes"], values["hbm_basis"] = card.memory_bytes_marketed, "marketed"
    try:
        parsed = CapacitySettings(**values)
    except ValidationError as exc:
        raise settings_error(exc) from exc
    plan = plan_capacity(spec, card, parsed)
    return plan.model_copy(update={"gpu_provenance": provenance}) if provenance else plan


def parse_floats(text: str, field: str) -> list[float]:
    """`0.7` or `0.5,0.7,0.9`."""
    try:
        return [float(x) for x in text.split(",") if x.strip()]
    except ValueError as exc:
        raise InputError(field, f"{text!r}: expected a number or a comma-separated list") from exc


def parse_ks(text: str) -> list[int]:
    """`4`, `1-16` or `1,2,4`."""
    try:
        if "-" in text.strip()[1:]:
            lo, hi = text.split("-", 1)
            return list(range(int(lo), int(hi) + 1))
        return [int(x) for x in text.split(",") if x.strip()]
    except ValueError as exc:
        raise InputError("--k", f"{text!r}: expected K, LO-HI or a comma-separated list") from exc


def roofline_for(plan: CapacityPlan) -> Roofline:
    """The step-time roofline of one GPU of a capacity plan."""
    from planner.core.latency import Roofline

    gpu = plan.gpu
    flops = gpu.bf16_dense_flops
    if plan.weight_dtype.startswith("fp8") and gpu.fp8_dense_flops:
        flops = gpu.fp8_dense_flops
    if not gpu.hbm_bandwidth_bytes_per_s or not flops:
        raise InputError("--gpu", f"{gpu.id} has no bandwidth/FLOPs on record; cannot derive v")
    return Roofline(
        weights_bytes_per_gpu=plan.ledger.weights_bytes_per_gpu,
        kv_bytes_per_sequence=plan.kv_bytes_per_sequence_mean,
        active_params_per_gpu=max(1, plan.model.params_active // plan.settings.tp),
        bandwidth_bytes_per_s=float(gpu.hbm_bandwidth_bytes_per_s),
        flops_per_s=float(flops),
    )


def spec_advice(
    *,
    alphas: list[float],
    ks: list[int],
    draft_cost: float,
    verify_cost: float,
    method: str,
    max_batch: int,
    gpu: str | None = None,
    preset: str | None = None,
    model: str | None = None,
    draft_model: str | None = None,
    **settings: Any,
) -> dict[str, Any]:
    """Everything `planner spec` reports, as its documented JSON object."""
    from planner.core import speculative as sp
    from planner.core.flags import SPEC_METHODS, SPEC_NEEDS, spec_flags
    from planner.core.kv import kv_bytes_per_sequence
    from planner.core.spec_load import disable_above, load_points
    from planner.units import dtype_bytes

    if method not in SPEC_METHODS:
        raise InputError("--method", f"{method!r}; accepted: {', '.join(SPEC_METHODS)}")
    if max_batch < 1:
        raise InputError("--max-batch", f"{max_batch} < 1")
    rows = sp.table(alphas, ks, draft_cost, verify_cost)
    bests = {a: sp.best(a, ks, draft_cost, verify_cost) for a in alphas}
    top = max(alphas)
    result: dict[str, Any] = {
        "method": method,
        "method_needs": SPEC_NEEDS[method],
        "draft_cost": draft_cost,
        "verify_cost": verify_cost,
        "rows": [r.model_dump() for r in rows],
        "best": [{"alpha": a, "k": b.k, "speedup": b.speedup} for a, b in bests.items()],
        "break_even_alpha": [
            {"k": k, "alpha": sp.break_even_alpha(k, draft_cost, verify_cost)} for k in ks
        ],
        "v_sensitivity": [
            {"v": v, "alpha": a, "k": b.k, "speedup": b.speedup}
            for v in sp.V_SENSITIVITY_GRID
            for a in alphas
            for b in [sp.best(a, ks, draft_cost, v)]
        ],
        "disable_above_concurrency": None,
        "load": None,
        "draft": None,
        "flags": spec_flags(method, bests[top].k, draft_model).model_dump(),
    }
    if gpu is None:
        if preset or model or draft_model:
            raise InputError("--gpu", "required with --preset/--model/--draft-model")
        return result
    plan = capacity_plan(gpu=gpu, preset=preset, model=model, **settings)
    target = roofline_for(plan)
    draft_line = None
    if draft_model is not None:
        draft_plan = capacity_plan(gpu=gpu, model=draft_model, **(settings | {"tp": 1}))
        draft_line = roofline_for(draft_plan)
        kvb = dtype_bytes(plan.settings.kv_dtype)
        draft_seq = kv_bytes_per_sequence(
            draft_plan.model, plan.settings.mean_tokens, 1, kvb, plan.settings.block_tokens
        )
        pool = plan.ledger.kv_pool_bytes - draft_plan.ledger.weights_bytes_per_gpu
        with_draft = max(0, pool) // (plan.kv_bytes_per_sequence_paged_mean + draft_seq)
        result["draft"] = {
            "name": draft_plan.model.name,
            "weights_bytes_per_gpu": draft_plan.ledger.weights_bytes_per_gpu,
            "kv_bytes_per_sequence_mean": draft_seq,
            "max_seqs_paged_without_draft": plan.max_seqs_paged,
            "max_seqs_paged_with_draft": with_draft,
        }
    # No more sequences can run than the KV pool holds: scan only up to that.
    limit = max(1, min(max_batch, plan.max_seqs_paged))
    result["scan_limit"] = limit
    result["disable_above_concurrency"] = [
        {"alpha": a, "concurrency": disable_above(target, a, ks, limit, draft_cost, draft_line)}
        for a in alphas
    ]
    grid = sorted({b for b in (1, 8, 32, 128, plan.operating_concurrency, limit) if 0 < b <= limit})
    result["load"] = [
        {"alpha": a, **p.model_dump()}
        for a in alphas
        for p in load_points(target, a, ks, grid, draft_cost, draft_line)
    ]
    result["operating_concurrency"] = plan.operating_concurrency
    return result
