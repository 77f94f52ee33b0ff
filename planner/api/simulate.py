"""`planner simulate` by name: workloads, cost models and policies into one report."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from pydantic import ValidationError

from planner.errors import InputError, validation_text

if TYPE_CHECKING:  # numpy stays off the `planner capacity` path
    from planner.sim.workload import Workload


def load_workload(name: str) -> Workload:
    """A workload preset by name (presets/workloads/NAME.yaml)."""

    from planner.sim.workload import Workload
    from planner.sources.presets import (
        preset_names,
        preset_root,
        read_yaml,
        unknown_name_error,
        validation_message,
    )

    names = preset_names("workloads")
    if name not in names:
        raise unknown_name_error("--workload", "workload", name, names)
    path = preset_root() / "workloads" / f"{name}.yaml"
    try:
        return Workload.model_validate(read_yaml(path, "--workload"))
    except ValidationError as exc:
        raise InputError("--workload", f"{path}: {validation_message(exc)}") from exc


def prompt_per_output(name: str) -> float:
    """Prompt tokens a workload preset's requests prefill per token they decode (its seeded
    trace, prefix-cache hits skipped): the prefill each decoded token brings into the steps."""
    from planner.sim.workload import generate

    trace = generate(load_workload(name))
    prefilled = int(trace.prompt_tokens.sum() - trace.cached_prefix_tokens.sum())
    return prefilled / max(int(trace.output_tokens.sum()), 1)


def simulation(
    *,
    workload: str = "reference",
    trace_path: str | None = None,
    overrides: dict[str, Any],
    policies: list[str],
    sweep: list[int] | None,
    cost: dict[str, Any] | None,
    sim: dict[str, Any],
    gpu: str | None = None,
    preset: str | None = None,
    model: str | None = None,
    capacity_settings: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """Everything `planner simulate` reports, as its documented JSON object."""
    import numpy as np

    from planner.sim.config import SimConfig
    from planner.sim.cost import CostModel
    from planner.sim.engine import simulate
    from planner.sim.workload import Workload, generate, load_trace, with_shared_prefix

    w = load_workload(workload)
    given = {k: v for k, v in overrides.items() if v is not None}
    try:
        w = Workload.model_validate(w.model_dump() | given)
    except ValidationError as exc:
        err = exc.errors()[0]
        key = str(err["loc"][0]) if err["loc"] else "workload"
        raise InputError(WORKLOAD_FLAGS.get(key, key), validation_text(err)) from exc
    if trace_path is not None:
        from planner.sources.files import TRACE_LIMIT_BYTES, read_text

        trace = load_trace(read_text(trace_path, "--trace", TRACE_LIMIT_BYTES), trace_path)
        rng = np.random.default_rng(w.seed)
        trace = with_shared_prefix(trace, w.shared_prefix_fraction, w.shared_prefix_tokens, rng)
        workload_echo: dict[str, Any] = {"trace": trace_path, "requests": trace.size}
        if w.shared_prefix_fraction and w.shared_prefix_tokens:
            workload_echo |= {
                "shared_prefix_fraction": w.shared_prefix_fraction,
                "shared_prefix_tokens": w.shared_prefix_tokens,
                "seed": w.seed,
            }
    else:
        trace = generate(w)
        workload_echo = w.model_dump() | {"name": workload, "description": w.summary()}
    cost_values = dict(cost or {})
    plan_echo = None
    if gpu is not None or preset is not None or model is not None:
        if gpu is None:
            raise InputError("--gpu", "required with --preset/--model")
        # the engine model is imported only when a model is simulated (the reference run
        # does not pay for it)
        from planner.api.capacity import capacity_plan
        from planner.api.latency import derived_cost_model

        plan = capacity_plan(gpu=gpu, preset=preset, model=model, **(capacity_settings or {}))
        cost_values = derived_cost_model(plan) | cost_values
        if sim.get("kv_blocks") is None:
            page = plan.kv_bytes_per_token * plan.settings.block_tokens
            sim = sim | {
                "kv_blocks": max(1, plan.ledger.kv_pool_bytes // page),
                "block_tokens": plan.settings.block_tokens,
            }
        plan_echo = {"model": plan.model.name, "gpu": plan.gpu.id, "kv_blocks": sim["kv_blocks"]}
    try:
        cost_model = CostModel(**cost_values)
        configs = [SimConfig(policy=p, **sim) for p in policies]
    except ValidationError as exc:
        err = exc.errors()[0]
        key = str(err["loc"][-1]) if err["loc"] else "settings"
        raise InputError(SIM_FLAGS.get(key, key), validation_text(err)) from exc
    result: dict[str, Any] = {
        "workload": workload_echo,
        "cost_model": cost_model.model_dump(),
        "capacity": plan_echo,
        "policies": [simulate(trace, cost_model, c).model_dump() for c in configs],
        "sweep": None,
        "goodput_peak": None,
    }
    if sweep:
        if min(sweep) < 1:
            raise InputError("--sweep", "max_batch values must be >= 1")
        base = configs[-1]
        points = [
            simulate(trace, cost_model, base.model_copy(update={"max_batch": mb})).model_dump()
            for mb in sweep
        ]
        result["sweep"] = points
        peak = max(points, key=lambda p: (p["goodput_pct"], -p["max_batch"]))
        result["goodput_peak"] = {
            "max_batch": peak["max_batch"],
            "goodput_pct": peak["goodput_pct"],
        }
    return result


# Workload field -> flag.
WORKLOAD_FLAGS = {
    "rate_per_s": "--rate",
    "requests": "--requests",
    "seed": "--seed",
    "shared_prefix_fraction": "--shared-prefix-fraction",
    "shared_prefix_tokens": "--shared-prefix-tokens",
}


# SimConfig / CostModel field -> flag, so validation errors name what the user typed.
SIM_FLAGS = {
    "max_batch": "--max-batch",
    "step_token_budget": "--step-token-budget",
    "chunk_tokens": "--chunk-tokens",
    "kv_blocks": "--kv-blocks",
    "block_tokens": "--block-size",
    "spec_alpha": "--spec-alpha",
    "spec_k": "--spec-k",
    "slo_ttft_ms": "--slo-ttft-ms",
    "slo_tpot_ms": "--slo-tpot-ms",
    "a_ms": "--a-ms",
    "b_ms": "--b-ms",
    "prefill_ms_per_token": "--prefill-ms-per-token",
    "overhead_ms": "--overhead-ms",
}
