"""Name-based entry points shared by the CLI and the Python API (same validation, same numbers)."""

from __future__ import annotations

from typing import Any

from pydantic import ValidationError

from planner.core.capacity import CapacityPlan, CapacitySettings, plan_capacity
from planner.errors import InputError
from planner.sources.models import resolve_model
from planner.sources.presets import find_gpu
from planner.units import KV_DTYPES, WEIGHT_DTYPES, normalize_dtype

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
    else:
        values["hbm_bytes"], values["hbm_basis"] = card.memory_bytes_marketed, "marketed"
    try:
        parsed = CapacitySettings(**values)
    except ValidationError as exc:
        raise settings_error(exc) from exc
    return plan_capacity(spec, card, parsed)
