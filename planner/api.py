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
    from planner.core.slo import StepModel

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


def roofline_for(plan: CapacityPlan, **efficiencies: float) -> Roofline:
    """The step-time roofline of one GPU of a capacity plan (efficiencies: Roofline fields)."""
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
        **efficiencies,
    )


def derived_step_model(plan: CapacityPlan, **efficiencies: float) -> StepModel:
    """a, b, the compute slope and the prefill cost from the plan's roofline, with arithmetic."""
    from planner.core.latency import FLOPS_PER_PARAM_PER_TOKEN
    from planner.core.slo import StepModel

    r = roofline_for(plan, **efficiencies)
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
        f"{plan.settings.mean_tokens:,} tokens / ({tb:.2f} TB/s x {r.bandwidth_efficiency}) "
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
        source=f"derived: {plan.model.name} on {plan.gpu.id} x TP {plan.settings.tp} (roofline)",
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


def derived_cost_model(plan: CapacityPlan) -> dict[str, Any]:
    """The simulator's cost model from the plan's roofline (REFERENCE section 3)."""
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


def load_workload(name: str) -> Any:
    """A workload preset by name (presets/workloads/NAME.yaml)."""
    from pydantic import ValidationError

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
    from pathlib import Path

    from pydantic import ValidationError

    from planner.sim.engine import CostModel, SimConfig, simulate
    from planner.sim.workload import generate, load_trace

    w = load_workload(workload)
    for key, flag in (("rate_per_s", "--rate"), ("requests", "--requests")):
        if key in overrides and overrides[key] is not None and overrides[key] <= 0:
            raise InputError(flag, f"must be > 0 (got {overrides[key]})")
    w = w.model_copy(update={k: v for k, v in overrides.items() if v is not None})
    if trace_path is not None:
        path = Path(trace_path)
        if not path.is_file():
            raise InputError("--trace", f"{trace_path}: no such file")
        trace = load_trace(path.read_text(encoding="utf-8"), trace_path)
        workload_echo: dict[str, Any] = {"trace": trace_path, "requests": trace.size}
    else:
        trace = generate(w)
        workload_echo = w.model_dump() | {"name": workload}
    cost_values = dict(cost or {})
    plan_echo = None
    if gpu is not None or preset is not None or model is not None:
        if gpu is None:
            raise InputError("--gpu", "required with --preset/--model")
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
        raise InputError(SIM_FLAGS.get(key, key), err["msg"].lower()) from exc
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


def read_fit_csv(path: str) -> tuple[list[float], list[float]]:
    """`batch,step_ms` rows (header required), for --fit."""
    import csv
    from pathlib import Path

    file = Path(path)
    if not file.is_file():
        raise InputError("--fit", f"{path}: no such file")
    rows = list(csv.DictReader(file.read_text(encoding="utf-8").splitlines()))
    if not rows or not {"batch", "step_ms"} <= set(rows[0]):
        raise InputError("--fit", f"{path}: needs a header with columns batch,step_ms")
    batches, times = [], []
    for no, row in enumerate(rows, start=2):
        try:
            b, t = float(row["batch"]), float(row["step_ms"])
        except (TypeError, ValueError) as exc:
            raise InputError(
                "--fit", f"{path} line {no}: batch and step_ms must be numbers"
            ) from exc
        if b < 1 or t <= 0:
            raise InputError("--fit", f"{path} line {no}: batch >= 1 and step_ms > 0 expected")
        batches.append(b)
        times.append(t)
    return batches, times


def slo_advice(
    *,
    tpot_ms: float,
    ttft_ms: float | None = None,
    prompt_tokens: int | None = None,
    a_ms: float | None = None,
    b_ms: float | None = None,
    prefill_ms_per_token: float | None = None,
    fit_path: str | None = None,
    efficiencies: dict[str, float] | None = None,
    validate_rate: float | None = None,
    workload: str = "reference",
    gpu: str | None = None,
    preset: str | None = None,
    model: str | None = None,
    **settings: Any,
) -> dict[str, Any]:
    """Everything `planner slo` reports, as its documented JSON object."""
    from planner.core import slo
    from planner.core.flags import MODEL_PLACEHOLDER

    if tpot_ms <= 0:
        raise InputError("--tpot", f"must be > 0 ms (got {tpot_ms})")
    if ttft_ms is not None and ttft_ms <= 0:
        raise InputError("--ttft", f"must be > 0 ms (got {ttft_ms})")
    if ttft_ms is not None and prompt_tokens is None:
        raise InputError("--prompt-len", "required with --ttft (the prompt the budget covers)")
    if prompt_tokens is not None and prompt_tokens < 1:
        raise InputError("--prompt-len", f"must be >= 1 (got {prompt_tokens})")
    prefill = (
        slo.REFERENCE_PREFILL_MS_PER_TOKEN
        if prefill_ms_per_token is None
        else (prefill_ms_per_token)
    )
    if prefill < 0:
        raise InputError("--prefill-ms-per-token", f"must be >= 0 (got {prefill})")
    plan = None
    if gpu is not None or preset is not None or model is not None:
        if gpu is None:
            raise InputError("--gpu", "required with --preset/--model")
        plan = capacity_plan(gpu=gpu, preset=preset, model=model, **settings)
    given = a_ms is not None or b_ms is not None
    if sum([given, fit_path is not None]) > 1:
        raise InputError("--fit", "use one cost source: --a-ms/--b-ms or --fit")
    if given:
        if a_ms is None or b_ms is None:
            raise InputError("--a-ms/--b-ms", "give both a and b")
        if a_ms < 0 or b_ms < 0:
            raise InputError("--a-ms/--b-ms", "must be >= 0")
        step = slo.StepModel(a_ms=a_ms, b_ms=b_ms, prefill_ms_per_token=prefill, source="given")
    elif fit_path is not None:
        step = slo.fit(*read_fit_csv(fit_path), prefill_ms_per_token=prefill)
    elif plan is not None:
        step = derived_step_model(plan, **(efficiencies or {}))
        if prefill_ms_per_token is not None:
            step = step.model_copy(update={"prefill_ms_per_token": prefill_ms_per_token})
    else:
        step = slo.StepModel(
            a_ms=slo.REFERENCE_A_MS,
            b_ms=slo.REFERENCE_B_MS,
            prefill_ms_per_token=prefill,
            source="reference",
        )
    cap = slo.batch_cap(step, tpot_ms)
    chunk = slo.max_prefill_chunk(step, tpot_ms)
    t1, tcap = step.step_ms(1), step.step_ms(cap)
    result: dict[str, Any] = {
        "a_ms": step.a_ms,
        "b_ms": step.b_ms,
        "prefill_ms_per_token": step.prefill_ms_per_token,
        "source": step.source,
        "arithmetic": list(step.arithmetic),
        "r2": step.r2,
        "compute_bound_above_batch": step.knee_batch,
        "tpot_ms": tpot_ms,
        "batch_cap": cap,
        "step_ms_at_cap": tcap,
        "throughput_tok_s_at_cap": cap / tcap * 1000.0,
        "latency_x_vs_batch_1": tcap / t1,
        "throughput_x_vs_batch_1": (cap / tcap) / (1 / t1),
        "max_prefill_chunk_tokens": chunk,
        "prefill_stall_ms": None,
        "ttft_single_prefill_fits": None,
        "memory_cap": None,
        "operating_concurrency": cap,
        "binding": "latency",
        "binding_reason": f"latency binds: TPOT {tpot_ms:g} ms allows {cap} sequences",
        "validated_cap": None,
        "validation": None,
        "curve": [
            {"batch": b, "step_ms": step.step_ms(b), "tok_s": b / step.step_ms(b) * 1000.0}
            for b in sorted({1, cap * 2} | {max(1, round(cap * f / 8)) for f in range(1, 13)})
        ],
    }
    if prompt_tokens is not None:
        stall = slo.prefill_ms(step, prompt_tokens)
        result["prefill_stall_ms"] = stall
        if ttft_ms is not None:
            result["ttft_single_prefill_fits"] = stall <= ttft_ms
    if plan is not None:
        memory = plan.max_seqs_paged
        result["memory_cap"] = memory
        result["operating_concurrency"] = min(memory, cap)
        if memory < cap:
            result["binding"] = "memory"
            result["binding_reason"] = (
                f"memory binds: the KV pool holds {memory} sequences, fewer than the "
                f"{cap} that TPOT {tpot_ms:g} ms allows"
            )
        else:
            result["binding_reason"] = (
                f"latency binds: TPOT {tpot_ms:g} ms allows {cap} sequences, fewer than the "
                f"{memory} the KV pool holds"
            )
    seqs = result["operating_concurrency"]
    ref = plan.model.serve_id if plan and plan.model.serve_id else MODEL_PLACEHOLDER
    result["flags"] = {
        "vllm": f"vllm serve {ref} --max-num-seqs {seqs} --max-num-batched-tokens "
        f"{max(chunk, seqs)}",
        "sglang": f"python -m sglang.launch_server --model-path {ref} --max-running-requests "
        f"{seqs} --chunked-prefill-size {chunk}",
    }
    if validate_rate is not None:
        result |= _validate_cap(step, cap, tpot_ms, ttft_ms, validate_rate, workload)
    return result


def _validate_cap(
    step: StepModel, cap: int, tpot_ms: float, ttft_ms: float | None, rate: float, workload: str
) -> dict[str, Any]:
    """Simulate chunked serving at caps up to the curve's and keep the goodput-maximising one."""
    from planner.sim.engine import CostModel, SimConfig, simulate
    from planner.sim.workload import generate

    if rate <= 0:
        raise InputError("--rate", f"must be > 0 (got {rate})")
    cost = CostModel() if step.source == "reference" else CostModel(**sim_cost_from(step))
    trace = generate(load_workload(workload).model_copy(update={"rate_per_s": rate}))
    fractions = (1 / 8, 1 / 6, 1 / 4, 1 / 3, 1 / 2, 2 / 3, 5 / 6, 1.0)
    caps = sorted({max(1, round(cap * f)) for f in fractions})
    budget = max(caps[-1], 512)
    ttft_slo = ttft_ms if ttft_ms is not None else VALIDATE_DEFAULT_TTFT_MS
    rows = []
    for c in caps:
        cfg = SimConfig(
            policy="chunked",
            max_batch=c,
            step_token_budget=budget,
            chunk_tokens=512,
            slo_ttft_ms=ttft_slo,
            slo_tpot_ms=tpot_ms,
        )
        m = simulate(trace, cost, cfg)
        rows.append(
            {
                "max_batch": c,
                "goodput_pct": m.goodput_pct,
                "tok_s": m.tok_s,
                "tpot_p95_ms": m.tpot_ms.p95,
                "ttft_p95_ms": m.ttft_ms.p95,
            }
        )
    best = max(rows, key=lambda r: (r["goodput_pct"], -r["max_batch"]))
    return {
        "validated_cap": best["max_batch"],
        "validation": {
            "rate_per_s": rate,
            "workload": workload,
            "slo_ttft_ms": ttft_slo,
            "caps": rows,
        },
    }


# REFERENCE section 5 sweep: TTFT <= 2,000 ms when --validate runs without --ttft.
VALIDATE_DEFAULT_TTFT_MS = 2000.0


# --quantization values whose weight bytes we can size (online fp8 included).
SIZED_QUANTIZATIONS = ("awq", "gptq", "fp8", "mxfp4")


def engine_plan(
    *,
    engine: str,
    gpu: str,
    preset: str | None = None,
    model: str | None = None,
    revision: str | None = None,
    quantization: str | None = None,
    measured: dict[str, Any] | None = None,
    engine_mode: str | None = None,
    **flags: Any,
) -> Any:
    """Predict an engine's start-up KV figures (vLLM or SGLang) from names and flags."""
    from planner.core.engines import sglang, vllm
    from planner.core.hf_config import quantized_weights_bytes

    spec = resolve_model(preset, model, revision)
    measured = dict(measured or {})
    if gpu.strip().lower() == "auto":
        from planner.sources.devices import cuda_runtime_total_bytes, detect, planning_gpu

        card, _device_bytes, _provenance = planning_gpu(detect())
        cuda_total = cuda_runtime_total_bytes()
        if cuda_total is not None and "total_memory_bytes" not in measured:
            measured |= {"total_memory_bytes": cuda_total, "total_memory_source": "device"}
    else:
        card = find_gpu(gpu)
    weights = exact = None
    if quantization is not None:
        if quantization not in SIZED_QUANTIZATIONS:
            raise InputError(
                "--quantization", f"{quantization!r}; sized: {', '.join(SIZED_QUANTIZATIONS)}"
            )
        weights, exact = quantized_weights_bytes(spec, quantization), False
    try:
        if engine == "vllm":
            if engine_mode is not None:
                flags["engine"] = engine_mode
            return vllm.predict(
                spec,
                card,
                vllm.VllmSettings(**flags),
                vllm.MeasuredTerms(**measured),
                weights,
                exact,
            )
        if engine == "sglang":
            return sglang.predict(
                spec,
                card,
                sglang.SglangSettings(**flags),
                sglang.MeasuredTerms(**measured),
                weights,
                exact,
            )
    except ValidationError as exc:
        err = exc.errors()[0]
        key = str(err["loc"][0]) if err["loc"] else "settings"
        raise InputError("--" + key.replace("_", "-"), err["msg"].lower()) from exc
    raise InputError("--engine", f"{engine!r}; accepted: vllm, sglang")


def from_log_report(
    *,
    log_path: str,
    gpu: str | None,
    preset: str | None = None,
    model: str | None = None,
    revision: str | None = None,
    version: str | None = None,
) -> dict[str, Any]:
    """Re-run a logged start-up: pure prediction vs log, and a replay with the logged terms."""
    from pathlib import Path

    from planner.sources.startup_log import parse_startup_log

    path = Path(log_path)
    if not path.is_file():
        raise InputError("--from-log", f"{log_path}: no such file")
    log = parse_startup_log(path.read_text(encoding="utf-8", errors="replace"), log_path)
    if gpu is None:
        raise InputError("--gpu", "the log does not name the GPU; pass --gpu (e.g. h100)")
    if preset is None and model is None:
        if log.model is None:
            raise InputError("--model", "the log names no model; pass --model or --preset")
        model = log.model
    flags: dict[str, Any] = dict(log.settings)
    quantization = flags.pop("quantization", None)
    notes = []
    if version or log.version:
        flags["version"] = version or log.version
    else:
        notes.append("the log names no engine version; pass --engine-version (newest assumed)")
    if log.engine == "vllm" and log.engine_mode:
        flags["engine_mode"] = log.engine_mode
    if log.engine == "sglang":
        flags = {k: v for k, v in flags.items() if k in SGLANG_LOG_KEYS}
    engine = log.engine or "vllm"
    common = {
        "engine": engine,
        "gpu": gpu,
        "preset": preset,
        "model": model,
        "revision": revision,
        "quantization": quantization,
    }
    predicted = engine_plan(**common, **flags)
    replayed = engine_plan(**common, measured=log.terms, **flags)
    logged: dict[str, Any] = {
        "kv_cache_tokens": log.kv_cache_tokens,
        "num_gpu_blocks": log.num_gpu_blocks,
        "max_concurrency": log.max_concurrency,
        "available_kv_bytes": log.available_kv_bytes,
    } | log.terms
    rows = []
    for key in LOG_TERMS:
        value = logged.get(key)
        mine = getattr(predicted, key, None)
        if value is None or mine is None:
            continue
        diff = mine - value
        relative = diff / value if value else None
        rows.append(
            {
                "term": key,
                "logged": value,
                "predicted": mine,
                "difference": diff,
                "relative": relative,
            }
        )
    head = {
        "engine": engine,
        "version": flags.get("version"),
        "engine_mode": log.engine_mode,
        "model": log.model,
        "settings": log.settings,
        "lines": log.lines_read,
    }
    return {
        "log": head | logged,
        "predicted": predicted.model_dump(),
        "replayed": replayed.model_dump(),
        "differences": rows,
        "notes": notes,
    }


# Terms a log can print, in ledger order.
LOG_TERMS = (
    "total_memory_bytes",
    "pre_load_free_bytes",
    "weights_bytes",
    "activation_peak_bytes",
    "non_torch_bytes",
    "cudagraph_bytes",
    "available_kv_bytes",
    "num_gpu_blocks",
    "kv_cache_tokens",
    "max_concurrency",
)


# Settings an SGLang log carries that SglangSettings takes.
SGLANG_LOG_KEYS = (
    "version",
    "mem_fraction_static",
    "tp_size",
    "chunked_prefill_size",
    "context_length",
    "page_size",
    "kv_cache_dtype",
)


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


def parse_tolerance(text: str) -> float:
    """`2%` or `0.02` -> 0.02."""
    raw = text.strip()
    try:
        value = float(raw[:-1]) / 100 if raw.endswith("%") else float(raw)
    except ValueError as exc:
        raise InputError("--tolerance", f"{text!r}: expected a share like 2% or 0.02") from exc
    if not 0 <= value < 1:
        raise InputError("--tolerance", f"{text!r} is outside [0%, 100%)")
    return value


def drift_report(
    *,
    plan_path: str,
    recompute: bool | None,
    revision_mode: str,
    tolerance: float,
    against_args: list[str],
    against_args_files: list[str],
    metrics_urls: list[str],
    timeout_s: float,
) -> dict[str, Any]:
    """Compare a plan lock with a recomputation, deployed args and /metrics; stable output."""
    from pathlib import Path

    from planner import drift
    from planner.errors import SourceUnavailable
    from planner.plan import figures_from, load
    from planner.sources.deployed import fetch_metrics, parse_args_text, parse_prometheus

    path = Path(plan_path)
    if not path.is_file():
        raise InputError("plan", f"{plan_path}: no such file")
    lock = load(path.read_text(encoding="utf-8"), plan_path)
    if revision_mode not in ("current", "pinned"):
        raise InputError("--revision", f"{revision_mode!r}; accepted: current, pinned")
    if timeout_s <= 0:
        raise InputError("--timeout", f"must be > 0 s (got {timeout_s})")
    rows: list[drift.Difference] = []
    sources: list[dict[str, str]] = []
    unreachable = False
    if recompute is None:
        recompute = not (against_args or against_args_files or metrics_urls)
    if recompute:
        i = lock.inputs
        revision = i.revision if revision_mode == "pinned" and i.revision else i.requested_revision
        try:
            plan, prediction = capacity_report(
                gpu=i.gpu,
                preset=i.preset,
                model=i.model,
                revision=revision,
                gpu_memory_gib=i.gpu_memory_gib,
                settings=i.settings,
                engine=i.engine.model_dump() if i.engine else None,
            )
        except SourceUnavailable as exc:
            sources.append({"where": "recompute", "status": f"unreachable: {exc}"})
            unreachable = True
        else:
            from planner.core.capacity import capacity_json

            payload = capacity_json(plan)
            if prediction is not None:
                payload["engine"] = prediction.model_dump()
            where = "recompute"
            if i.config_sha256 and plan.model.config_sha256 != i.config_sha256:
                rows.append(
                    drift.Difference(
                        where=where,
                        key="model.config_sha256",
                        planned=i.config_sha256[:12],
                        actual=(plan.model.config_sha256 or "")[:12],
                        tolerance="exact",
                    )
                )
            if i.revision and plan.model.revision and plan.model.revision != i.revision:
                rows.append(
                    drift.Difference(
                        where=where,
                        key="model.revision",
                        planned=i.revision,
                        actual=plan.model.revision,
                        tolerance="exact",
                    )
                )
            rows += drift.compare_figures(lock.figures, figures_from(payload), tolerance, where)
            for engine, line in sorted(lock.flags.items()):
                actual = plan.flags.model_dump()[engine]
                rows += drift.compare_flags(line, drift.line_flags(actual), f"{where} {engine}")
            sources.append({"where": "recompute", "status": f"ok (revision {revision_mode})"})
    for index, text in enumerate(against_args):
        for deployed in parse_args_text(text, f"--against-args[{index}]"):
            rows += drift.compare_deployed(lock, deployed)
            sources.append({"where": deployed.where, "status": f"ok ({deployed.engine})"})
    for name in against_args_files:
        file = Path(name)
        if not file.is_file():
            raise InputError("--against-args-file", f"{name}: no such file")
        for deployed in parse_args_text(file.read_text(encoding="utf-8"), name):
            rows += drift.compare_deployed(lock, deployed)
            sources.append({"where": deployed.where, "status": f"ok ({deployed.engine})"})
    for scrape in fetch_metrics(metrics_urls, timeout_s) if metrics_urls else []:
        if scrape.text is None:
            unreachable = True
            sources.append({"where": scrape.url, "status": scrape.error or "unreachable"})
            continue
        found, status = drift.compare_metrics(
            lock, parse_prometheus(scrape.text), scrape.url, tolerance
        )
        rows += found
        sources.append({"where": scrape.url, "status": status})
    code = 1 if rows else (3 if unreachable else 0)
    return {
        "plan": plan_path,
        "clean": not rows and not unreachable,
        "exit_code": code,
        "differences": [r.model_dump() for r in rows],
        "sources": sources,
    }
