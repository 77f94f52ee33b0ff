"""Step-time models and rooflines derived from a capacity plan."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from planner.core.capacity import CapacityPlan
from planner.core.specs import GpuSpec
from planner.errors import InputError

if TYPE_CHECKING:  # numpy stays off the `planner capacity` path
    from planner.core.latency import Roofline
    from planner.core.slo import StepModel


def roofline_for(plan: CapacityPlan, **efficiencies: float) -> Roofline:
    """The step-time roofline of one GPU of a capacity plan (efficiencies: Roofline fields)."""
    return roofline_from(
        plan.gpu,
        weights_per_gpu=plan.ledger.weights_bytes_per_gpu,
        kv_per_sequence=plan.kv_bytes_per_sequence_mean,
        active_params_per_gpu=max(1, plan.model.params_active // plan.settings.tp),
        weight_dtype=plan.weight_dtype,
        **efficiencies,
    )


def roofline_from(
    gpu: GpuSpec,
    *,
    weights_per_gpu: int,
    kv_per_sequence: int,
    active_params_per_gpu: int,
    weight_dtype: str,
    **efficiencies: float,
) -> Roofline:
    """A GPU's step-time roofline for given per-GPU weights, KV per sequence and parameters."""
    from planner.core.latency import Roofline

    flops = gpu.bf16_dense_flops or gpu.fp16_dense_flops
    if weight_dtype.startswith("fp8") and gpu.fp8_dense_flops:
        flops = gpu.fp8_dense_flops
    if not gpu.hbm_bandwidth_bytes_per_s or not flops:
        raise InputError("--gpu", f"{gpu.id} has no bandwidth/FLOPs on record; cannot derive v")
    return Roofline(
        weights_bytes_per_gpu=weights_per_gpu,
        kv_bytes_per_sequence=kv_per_sequence,
        active_params_per_gpu=active_params_per_gpu,
        bandwidth_bytes_per_s=float(gpu.hbm_bandwidth_bytes_per_s),
        flops_per_s=float(flops),
        **efficiencies,
    )


def derived_step_model(plan: CapacityPlan, **efficiencies: float) -> StepModel:
    """a, b, the compute slope and the prefill cost from the plan's roofline, with arithmetic."""
    label = f"{plan.model.name} on {plan.gpu.id} x TP {plan.settings.tp}"
    return step_model_from(roofline_for(plan, **efficiencies), label, plan.settings.mean_tokens)


def step_model_from(r: Roofline, label: str, mean_tokens: int) -> StepModel:
    """The step-time model of a roofline, with its arithmetic written out."""
    from planner.core.latency import FLOPS_PER_PARAM_PER_TOKEN
    from planner.core.slo import StepModel

    bw = r.bandwidth_bytes_per_s * r.bandwidth_efficiency
    flops = r.flops_per_s * r.flops_efficiency
    memory_a = r.weights_bytes_per_gpu / bw * 1e3
    b = r.kv_bytes_per_sequence / bw * 1e3
    compute = FLOPS_PER_PARAM_PER_TOKEN * r.active_params_per_gpu / flops * 1e3
    tb = r.bandwidth_bytes_per_s / 1e12
    tf = r.flops_per_s / 1e12
    arithmetic = (
        f"a = {r.weights_bytes_per_gpu / 1e9:,.2f} GB weights/GPU / ({tb:.2f} TB/s x "
        f"{r.bandwidth_efficiency}) = {memory_a:.3f} ms, + {r.overhead_ms} ms overhead "
        f"= {memory_a + r.overhead_ms:.3f} ms",
        f"b = {r.kv_bytes_per_sequence / 1e6:,.2f} MB KV per sequence at "
        f"{mean_tokens:,} tokens / ({tb:.2f} TB/s x {r.bandwidth_efficiency}) "
        f"= {b:.4f} ms",
        f"compute = 2 x {r.active_params_per_gpu / 1e9:,.2f}B active params/GPU / ({tf:,.1f} "
        f"TFLOP/s x {r.flops_efficiency}) = {compute:.4f} ms per sequence",
    )
    return StepModel(
        a_ms=memory_a + r.overhead_ms,
        b_ms=b,
        prefill_ms_per_token=compute,
        memory_a_ms=memory_a,
        compute_ms_per_seq=compute,
        arithmetic=arithmetic,
        source=f"derived: {label} (roofline estimate)",
    )


def derived_cost_model(plan: CapacityPlan) -> dict[str, Any]:
    """The simulator's cost model from the plan's roofline (docs/method.md, step time)."""
    return sim_cost_from(derived_step_model(plan))


def sim_cost_from(step: StepModel) -> dict[str, Any]:
    """The simulator's cost model for a step-time model (overhead kept apart when known)."""
    memory_a = step.memory_a_ms if step.memory_a_ms is not None else step.a_ms
    return {
        "a_ms": memory_a,
        "b_ms": step.b_ms,
        "prefill_ms_per_token": step.prefill_ms_per_token,
        "overhead_ms": step.a_ms - memory_a,
        "source": step.source,
    }
