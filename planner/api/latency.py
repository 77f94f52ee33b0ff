"""Step-time models and rooflines derived from a capacity plan."""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any

from planner.core.capacity import CapacityPlan
from planner.core.specs import GpuSpec
from planner.errors import InputError

if TYPE_CHECKING:  # numpy stays off the `planner capacity` path
    from planner.core.engines.calibration import StepCalibration
    from planner.core.latency import Roofline
    from planner.core.slo import StepModel
    from planner.core.step import StepTime


def roofline_for(plan: CapacityPlan, **efficiencies: float) -> Roofline:
    """The speculative-decoding roofline of a plan, on the step-time model's calibrated terms:
    weights read (at the plan's operating batch), the GPU's achievable bandwidth, and the
    kernels + engine overhead as the fixed cost (efficiencies: Roofline fields override)."""
    curve = derived_step_model(plan).curve
    assert curve is not None
    terms = curve.terms(max(1, plan.operating_concurrency), plan.settings.mean_tokens)
    values = curve_rates(curve) | {"overhead_ms": terms.kernels_ms + terms.overhead_ms}
    return roofline_from(
        plan.gpu,
        weights_per_gpu=terms.weights_read_bytes,
        kv_per_sequence=plan.kv_bytes_per_sequence_mean,
        active_params_per_gpu=max(1, plan.model.params_active // plan.settings.tp),
        **(values | efficiencies),
    )


def curve_rates(curve: StepTime) -> dict[str, float]:
    """The step model's rates a roofline prices with: the GEMMs' rate (the weights' dtype's,
    at its low-precision share) and efficiency, the bandwidth share, the KV read's, and any
    unfused dequantization's bytes per token."""
    return {
        "flops_per_s": curve.flops_per_s * curve.low_precision_scale,
        "flops_efficiency": curve.flops_efficiency,
        "bandwidth_efficiency": curve.bandwidth_efficiency,
        "attention_bandwidth_scale": curve.attention_bandwidth_scale,
        "dequant_bytes_per_token": curve.dequant_bytes_per_token,
        "mla_flops_per_kv_byte": curve.mla_flops_per_kv_byte,
        "mla_flops_per_s": curve.mla_flops_per_s,
        "mla_query_heads": curve.mla_query_heads,
    }


def roofline_from(
    gpu: GpuSpec,
    *,
    weights_per_gpu: int,
    kv_per_sequence: int,
    active_params_per_gpu: int,
    **rates: float,
) -> Roofline:
    """A GPU's step-time roofline for given per-GPU weights, KV per sequence and parameters,
    at the step model's `rates` (`curve_rates`, with any override)."""
    from planner.core.latency import Roofline

    if not gpu.hbm_bandwidth_bytes_per_s:
        raise InputError("--gpu", f"{gpu.id} has no bandwidth on record; cannot derive v")
    return Roofline(
        weights_bytes_per_gpu=weights_per_gpu,
        kv_bytes_per_sequence=kv_per_sequence,
        active_params_per_gpu=active_params_per_gpu,
        bandwidth_bytes_per_s=float(gpu.hbm_bandwidth_bytes_per_s),
        **rates,
    )


def derived_step_model(
    plan: CapacityPlan,
    *,
    engine: str = "vllm",
    version: tuple[int, int, int] | None = None,
    step_calibration: StepCalibration | None = None,
    kv_dtype: str | None = None,
    **efficiencies: float,
) -> StepModel:
    """The step-time model of a plan (docs/method.md §3) under one engine and release,
    linearised to a and b for display and the simulator; efficiencies override the calibrated
    terms (bandwidth_efficiency, flops_efficiency, overhead_ms); `step_calibration`: the step
    terms of a `calibrate --bench` profile; `kv_dtype`: the one the engine runs, where it is
    not the plan's."""
    from planner.core.step import step_time_for
    from planner.units import dtype_bytes

    kvb = dtype_bytes(kv_dtype or plan.settings.kv_dtype)
    curve = step_time_for(
        plan.model,
        plan.gpu,
        tp=plan.settings.tp,
        weights_bytes=plan.ledger.weights_bytes_total,
        weight_dtype=plan.weight_dtype,
        kv_dtype_bytes=kvb,
        engine=engine,
        version=version,
    )
    if step_calibration is not None:
        from planner.api.bench_instance import apply_step_calibration

        curve = apply_step_calibration(curve, step_calibration)
    return step_model_from_curve(curve, plan.settings.mean_tokens, **efficiencies)


# Batch the linear slope b is read at (a representative decode batch).
SLOPE_REFERENCE_BATCH = 32


def step_model_from_curve(curve: StepTime, context: int, **overrides: float) -> StepModel:
    """a, b (linearised at B = 1 and SLOPE_REFERENCE_BATCH), the prefill cost, the terms."""
    from planner.core.slo import StepModel
    from planner.core.step.family import PCIE_ALLREDUCE

    updates: dict[str, float] = {}
    if "bandwidth_efficiency" in overrides:
        updates["bandwidth_efficiency"] = overrides["bandwidth_efficiency"]
    if "flops_efficiency" in overrides:
        updates["flops_efficiency"] = overrides["flops_efficiency"]
    if "overhead_ms" in overrides:
        updates["overhead_ms"] = overrides["overhead_ms"]
    curve = curve.model_copy(update=updates)
    one = curve.terms(1, context)
    ref = curve.terms(SLOPE_REFERENCE_BATCH, context)
    b = (ref.step_ms - one.step_ms) / (SLOPE_REFERENCE_BATCH - 1)
    a = one.step_ms - b
    fixed = one.kernels_ms + one.allreduce_ms + one.all_to_all_ms + one.overhead_ms
    prefill = curve.gemm(1, sampled=0)[2]  # the linear layers' work per prompt token, ms
    if not all(math.isfinite(x) for x in (a, b, prefill)):
        # only a share small enough to underflow (1e-320) gets here: name what was given
        given = ", ".join(f"--{k.replace('_', '-')} {v:g}" for k, v in updates.items())
        raise InputError(
            "--flops-efficiency" if "flops_efficiency" in updates else "--bandwidth-efficiency",
            f"{given or 'these efficiencies'} make a step longer than any finite time",
        )
    peak_tb = curve.bandwidth_bytes_per_s / 1e12
    ranks = f"TP {curve.tp}"
    if curve.moe_ranks and curve.moe_ranks != curve.tp:
        ranks += f", MoE over {curve.moe_ranks}"
    if curve.tp > 1 and curve.allreduce == PCIE_ALLREDUCE:
        ranks += ", NCCL over PCIe"
    arithmetic = (
        f"memory: {one.weights_read_bytes / 1e9:,.2f} GB weights read per step (embedding "
        f"gathered, not read{'; MoE: experts B tokens route to' if curve.num_experts else ''})"
        f" + B x {curve.kv_bytes(context) / 1e6:,.2f} MB KV at {context:,} tokens, over "
        f"{peak_tb:.2f} TB/s x {curve.bandwidth_efficiency} achievable"
        + (
            f" (the KV at x {curve.attention_bandwidth_scale:.3g} of that: {curve.family.name}'s "
            "decode attention)"
            if curve.attention_bandwidth_scale != 1 and curve.family is not None
            else ""
        ),
        *mla_lines(curve),
        *mid_m_lines(curve),
        *moe_gemm_lines(curve),
        f"fixed: {curve.layers} layers x {curve.kernel_ms_per_layer * 1e3:.0f} us kernels "
        + kernel_notes(curve)
        + moe_fixed_text(curve)
        + f"= {one.kernels_ms:.2f} ms, all-reduce {one.allreduce_ms:.2f} ms ({ranks}), "
        + (
            f"{'MoRI' if curve.all_to_all_kernels == 'mori' else 'DeepEP'} all-to-all "
            f"{one.all_to_all_ms:.2f} ms (wide expert parallelism), "
            if one.all_to_all_ms
            else ""
        )
        + f"engine overhead {one.overhead_ms:.2f} ms ({curve.engine})",
        f"t(1) = {one.step_ms:.3f} ms, t({SLOPE_REFERENCE_BATCH}) = {ref.step_ms:.3f} ms -> "
        f"a = {a:.3f} ms, b = {b:.4f} ms per sequence (the curve itself sets the cap)",
    )
    return StepModel(
        a_ms=max(a, 0.0),
        b_ms=max(b, 0.0),
        prefill_ms_per_token=prefill,
        memory_a_ms=max(a - fixed, 0.0),
        compute_ms_per_seq=None,
        arithmetic=arithmetic,
        source=f"derived: {curve.label} (step-time model, an estimate)",
        curve=curve,
        context_tokens=context,
    )


def moe_fixed_text(curve: StepTime) -> str:
    """The MoE layers' fixed part of the arithmetic: their routing kernels and idle experts'
    exits, or under DeepEP DeepGEMM's walk of every expert a GPU holds, which no batch
    shortens."""
    if not (curve.num_experts and curve.moe_layers):
        return ""
    if curve.deepgemm_experts and curve.experts_per_gpu:
        return (
            f"+ {curve.moe_layers} MoE layers' routing kernels and DeepGEMM's walk of the "
            f"{curve.experts_per_gpu} experts a GPU holds ({curve.moe_fixed_ms(1):.2f} ms a "
            "step) "
        )
    return (
        f"+ {curve.moe_layers} MoE layers' routing kernels and idle experts' early exits "
        f"({curve.moe_fixed_ms(1):.2f} ms at B = 1, fewer idle as B grows) "
    )


def kernel_notes(curve: StepTime) -> str:
    """What the per-layer kernel figure holds beyond launches: the family's GEMM floor, and
    an MLA layer's measured module excess ('' where neither applies)."""
    notes = []
    if curve.family is not None and curve.family.gemm_floor_ms:
        notes.append(
            f"of which {curve.family.gemm_floor_ms * 1e3:.1f} us a GEMM kernel on "
            f"{curve.family.name}"
        )
    if curve.mla_layer_ms:
        notes.append(
            f"an MLA layer's decode module {curve.mla_layer_ms * 1e3:.0f} us more, as NVIDIA's "
            "kernel tables time it"
        )
    return f"({'; '.join(notes)}) " if notes else ""


def mla_lines(curve: StepTime) -> tuple[str, ...]:
    """The absorbed MLA decode kernels' multiply, where the model has one: it sets the
    attention time where it outlasts the KV read."""
    if curve.mla_flops_per_kv_byte <= 0 or curve.mla_flops_per_s <= 0:
        return ()
    return (
        f"attention: MLA decodes absorbed, {curve.mla_flops_per_kv_byte:,.0f} FLOPs a KV byte "
        f"at {curve.mla_flops_per_s / 1e12:,.0f} TFLOP/s (FlashMLA's share of the bf16 rate); "
        "where that outlasts the read it sets the attention time",
    )


def mid_m_lines(curve: StepTime) -> tuple[str, ...]:
    """The family's slowdown of dense GEMMs between decode and prefill, where it has one."""
    if curve.family is None or curve.mid_m_slowdown(curve.gemm_kind, SLOPE_REFERENCE_BATCH) == 1:
        return ()
    at = ", ".join(
        f"x {curve.mid_m_slowdown(curve.gemm_kind, tokens):.2f} at {tokens:,}"
        for tokens in (SLOPE_REFERENCE_BATCH, 256, 1024, 4096)
    )
    return (
        f"linear: the dense {curve.gemm_kind} GEMMs over B tokens take longer than their stream "
        f"and multiply on {curve.family.name} ({at} tokens; ROCm's kernel tables)",
    )


def moe_gemm_lines(curve: StepTime) -> tuple[str, ...]:
    """The family's share for the routed experts' multiply, where its fused MoE kernels reach
    less of the rate than its dense GEMMs, or DeepGEMM's under DeepEP more."""
    if curve.family is None or not curve.num_experts:
        return ()
    stream = (
        (
            f"experts: streamed at x {curve.moe_stream_scale:.2f} of the weights' share on "
            f"{curve.family.name} (the fused MoE kernels of their kind unpack them first; "
            "NVIDIA's kernel tables)",
        )
        if curve.moe_stream_scale < 1
        else ()
    )
    if curve.deepgemm_experts:
        return (
            f"experts: their multiply at x {curve.moe_gemm_scale:.2f} of the dense GEMMs' share "
            f"of the rate on {curve.family.name} (DeepGEMM's grouped GEMMs under DeepEP, at "
            f"{curve.family.deepep_moe_fp8_share:.2f} of the fp8 rate; NVIDIA's kernel tables of "
            "SGLang's): it sets a long prefill's expert time and a wide batch's",
            *stream,
        )
    if curve.moe_gemm_scale == 1:
        return stream
    amd = curve.family.name.startswith(("cdna", "amd"))
    tables = "ROCm's kernel tables" if amd else "NVIDIA's kernel tables"
    if curve.sglang_moe_shares:
        tables += " of SGLang's own kernels"
    if curve.family.moe_half_width and curve.expert_width_per_gpu:
        tables += f", for the {curve.expert_width_per_gpu:,} columns of an expert each GPU holds"
    return (
        f"experts: their multiply at x {curve.moe_gemm_scale:.2f} of the dense GEMMs' share of "
        f"the rate on {curve.family.name} (fused MoE kernels at 8K-32K tokens; {tables}): it "
        "sets a long prefill's expert time, not decode's expert read",
        *stream,
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
