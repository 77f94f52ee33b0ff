"""Capacity plans by name: resolve the model and GPU, validate settings, plan, lock."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from pydantic import ValidationError

from planner.api.engines import engine_plan
from planner.core.capacity import CapacityPlan, CapacitySettings, plan_capacity
from planner.errors import InputError
from planner.sources.models import resolve_model
from planner.sources.presets import find_gpu
from planner.units import KV_DTYPES, WEIGHT_DTYPES, normalize_dtype

if TYPE_CHECKING:  # numpy stays off the `planner capacity` path
    pass

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


def capacity_report(
    *,
    gpu: str,
    preset: str | None,
    model: str | None,
    revision: str | None,
    gpu_memory_gib: float | None,
    settings: dict[str, Any],
    engine: dict[str, Any] | None,
) -> tuple[CapacityPlan, Any]:
    """The textbook plan and, when an engine is named, that engine's prediction."""
    from planner.units import GIB_BYTES

    plan = capacity_plan(
        gpu=gpu,
        preset=preset,
        model=model,
        revision=revision,
        gpu_memory_bytes=round(gpu_memory_gib * GIB_BYTES) if gpu_memory_gib else None,
        **settings,
    )
    if engine is None:
        return plan, None
    flags = dict(engine.get("flags") or {})
    quantization = flags.pop("quantization", None)
    _check_engine_flags(engine.get("name"), flags)
    if engine.get("version"):
        flags["version"] = engine["version"]
    measured = {}
    if gpu_memory_gib:
        measured["total_memory_bytes"] = round(gpu_memory_gib * GIB_BYTES)
    prediction = engine_plan(
        engine=engine["name"],
        gpu=gpu,
        preset=preset,
        model=model,
        revision=revision,
        quantization=quantization,
        measured=measured,
        **flags,
    )
    return plan, prediction


def _check_engine_flags(name: Any, flags: dict[str, Any]) -> None:
    """Engine flags name fields of that engine's settings, nothing else."""
    from planner.core.engines.sglang import SglangSettings
    from planner.core.engines.vllm import VllmSettings

    fields = {"vllm": VllmSettings.model_fields, "sglang": SglangSettings.model_fields}
    if name not in fields:
        raise InputError("--engine", f"{name!r}; accepted: vllm, sglang")
    known = set(fields[name])
    for key in flags:
        if key not in known:
            raise InputError(
                f"engine.flags.{key}", f"not a {name} setting; accepted: {', '.join(sorted(known))}"
            )


def lock_for(
    plan: CapacityPlan,
    prediction: Any,
    *,
    preset: str | None,
    model: str | None,
    revision: str | None,
    gpu: str,
    gpu_memory_gib: float | None,
    settings: dict[str, Any],
    engine: dict[str, Any] | None,
) -> Any:
    """The plan lock file for a computed plan."""
    from planner import __version__
    from planner.core.capacity import capacity_json
    from planner.plan import SCHEMA_VERSION, EngineInputs, PlanInputs, PlanLock, figures_from

    payload = capacity_json(plan)
    if prediction is not None:
        payload["engine"] = prediction.model_dump()
    return PlanLock(
        schema_version=SCHEMA_VERSION,
        planner_version=__version__,
        inputs=PlanInputs(
            preset=preset,
            model=model,
            requested_revision=revision,
            revision=plan.model.revision,
            config_sha256=plan.model.config_sha256,
            gpu=gpu,
            gpu_memory_gib=gpu_memory_gib,
            settings=dict(settings),
            engine=EngineInputs(**engine) if engine else None,
        ),
        figures=figures_from(payload),
        flags=plan.flags.model_dump(),
    )
