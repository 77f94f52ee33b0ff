"""`planner spec` by name: the speculative-decoding advisor, optionally coupled to load."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from planner.api.capacity import capacity_plan
from planner.errors import InputError, PlannerError

if TYPE_CHECKING:  # numpy stays off the `planner capacity` path
    from planner.api.bench_instance import Deployment
    from planner.core.capacity import CapacityPlan
    from planner.core.engines.calibration import Calibration
    from planner.core.flags import SpecTarget
    from planner.core.spec_load import StepCost


def parse_floats(text: str, field: str) -> list[float]:
    """`0.7` or `0.5,0.7,0.9`."""
    try:
        return [float(x) for x in text.split(",") if x.strip()]
    except ValueError as exc:
        raise InputError(field, f"{text!r}: expected a number or a comma-separated list") from exc


# The most draft tokens per step `--k` may ask for: engines cap num_speculative_tokens far lower.
MAX_SPEC_K = 64


def parse_ks(text: str) -> list[int]:
    """`4`, `1-16` or `1,2,4`, each k in [1, MAX_SPEC_K]."""
    try:
        if "-" in text.strip()[1:]:
            lo_text, hi_text = text.split("-", 1)
            lo, hi = int(lo_text), int(hi_text)
            if lo > hi:
                raise InputError("--k", f"{text!r}: the range runs backwards")
            ks = [lo, hi] if lo < 1 or hi > MAX_SPEC_K else list(range(lo, hi + 1))
        else:
            ks = [int(x) for x in text.split(",") if x.strip()]
    except ValueError as exc:
        raise InputError("--k", f"{text!r}: expected K, LO-HI or a comma-separated list") from exc
    if not ks:
        raise InputError("--k", f"{text!r}: no k given")
    bad = [k for k in ks if not 1 <= k <= MAX_SPEC_K]
    if bad:
        raise InputError("--k", f"{bad[0]} is outside [1, {MAX_SPEC_K}]")
    return ks


def spec_advice(
    *,
    alphas: list[float],
    ks: list[int],
    draft_cost: float,
    verify_cost: float,
    method: str,
    max_batch: int,
    concurrency: int | None = None,
    gpu: str | None = None,
    preset: str | None = None,
    model: str | None = None,
    revision: str | None = None,
    memory_fraction: float | None = None,
    draft_model: str | None = None,
    engine: str = "vllm",
    engine_version: str | None = None,
    dp: int = 1,
    ep: int | None = None,
    dp_attention: bool = False,
    calibration: Calibration | None = None,
    **settings: Any,
) -> dict[str, Any]:
    """Everything `planner spec` reports, as its documented JSON object (`settings`: the
    target's deployment, as `slo` takes it: tp, pp, context_tokens, mean_tokens, weight_dtype,
    kv_dtype, extra (the engine's own MoE exchange flags); `dp`, `ep`, `dp_attention`: its
    data- and expert-parallel layout, as `slo` and
    `simulate` take them; `calibration`: a profile whose step terms the target's step takes)."""
    from planner.api.bench_instance import release_target
    from planner.core import speculative as sp
    from planner.core.flags import check_spec_method
    from planner.core.spec_load import disable_above, load_points
    from planner.sources.models import check_revision

    check_revision(model, revision)
    _check_request(engine, method, max_batch, concurrency)
    result = _textbook(method, alphas, ks, draft_cost, verify_cost)
    top = max(alphas)
    pp = int(settings.pop("pp", None) or 1)  # the engine's layout: not the textbook plan's
    exchange = settings.pop("extra", None)  # the engine's own flags (its MoE exchange): likewise
    laid_out = pp > 1 or dp > 1 or (ep or 1) > 1 or dp_attention
    if gpu is None:
        if laid_out:
            raise InputError("--pp/--dp/--ep", "need a model and GPU (--preset/--model, --gpu)")
        if preset or model or draft_model:
            raise InputError("--gpu", "required with --preset/--model/--draft-model")
        if concurrency is not None:
            raise InputError("--concurrency", "needs a model and GPU (--preset/--model, --gpu)")
        chosen = sp.best(top, ks, draft_cost, verify_cost)
        where = f"alpha {top:g}, c {draft_cost:g}, v {verify_cost:g}"
        server = release_target(engine, engine_version, None)
        check_spec_method(method, engine, server, "--method")
        return result | _decision(
            method, draft_model, top, chosen.k, chosen.speedup, where, None, target=server
        )
    plan, mean_tokens = _target_plan(gpu, preset, model, revision, method, pp, settings)
    draft_line = None
    if draft_model is not None:
        if plan is None:
            raise InputError(
                "--draft-model",
                "sizes the draft in one TP group's KV pool; this target needs --pp to fit",
            )
        draft_line, result["draft"] = _draft_beside(plan, gpu, draft_model, settings)
    from planner.api.bench_instance import Deployment
    from planner.api.slo import serve_values

    deployment = Deployment(
        gpu=gpu,
        preset=preset,
        model=model,
        revision=revision,
        settings=serve_values(
            settings
            | {"mean_tokens": mean_tokens, "pp": pp, "memory_fraction": memory_fraction}
            | ({"extra": exchange} if exchange else {}),
            engine,
            engine_version,
        ),
        dp=dp,
        ep=ep,
        dp_attention=dp_attention,
        calibration=calibration,
    )
    target, capacity, operating, resolved, server = _operating_point(
        deployment, plan, mean_tokens, laid_out=laid_out, memory_fraction=memory_fraction
    )
    check_spec_method(method, engine, server, "--method")
    if engine_version is not None:
        from planner.core.engines import release_notes

        result["notes"] = release_notes(engine, engine_version)
    result["notes"] += resolved
    if result["draft"] is not None:
        capacity = result["draft"]["max_seqs_paged_with_draft"]
    limit = max(1, min(max_batch, capacity))
    result["scan_limit"] = limit
    result["disable_above_concurrency"] = [
        {"alpha": a, "concurrency": disable_above(target, a, ks, limit, draft_cost, draft_line)}
        for a in alphas
    ]
    grid = sorted({b for b in (1, 8, 32, 128, operating, limit) if 0 < b <= limit})
    result["load"] = [
        {"alpha": a, **p.model_dump()}
        for a in alphas
        for p in load_points(target, a, ks, grid, draft_cost, draft_line)
    ]
    result["operating_concurrency"] = operating
    at = min(concurrency or operating, limit)
    point = load_points(target, top, ks, [max(1, at)], draft_cost, draft_line)[0]
    stop = next(d["concurrency"] for d in result["disable_above_concurrency"] if d["alpha"] == top)
    where = f"alpha {top:g} at {point.batch} concurrent sequences"
    return result | _decision(
        method, draft_model, top, point.best_k, point.speedup, where, stop, point.batch, server
    )


def _target_plan(
    gpu: str,
    preset: str | None,
    model: str | None,
    revision: str | None,
    method: str,
    pp: int,
    settings: dict[str, Any],
) -> tuple[CapacityPlan | None, int]:
    """The target's textbook plan (one TP group's: None where only the pipeline's stages fit
    the model, which the engine instance plans) and the mean context its step is priced at;
    MTP refused for a target without MTP layers."""
    from planner.sources.models import resolve_model

    plan: CapacityPlan | None = None
    try:
        plan = capacity_plan(gpu=gpu, preset=preset, model=model, revision=revision, **settings)
    except PlannerError:
        if pp < 2:
            raise
    target_model = plan.model if plan is not None else resolve_model(preset, model, revision)
    if method == "mtp" and target_model.mtp_layers == 0:
        raise InputError(
            "--method",
            f"mtp needs a target with MTP layers; {target_model.name} has none "
            "(num_nextn_predict_layers is 0 or absent): use eagle3, ngram or draft",
        )
    if plan is not None:
        return plan, plan.settings.mean_tokens
    from planner.api.capacity import DEFAULT_MEAN_TOKENS

    return None, int(settings.get("mean_tokens") or DEFAULT_MEAN_TOKENS)


def _check_request(engine: str, method: str, max_batch: int, concurrency: int | None) -> None:
    """Refuse, by the flag typed, an engine, method, batch cap or concurrency out of range."""
    from planner.core.flags import SPEC_METHODS

    if engine not in ("vllm", "sglang"):
        raise InputError("--engine", f"{engine!r}; accepted: vllm, sglang")
    if method not in SPEC_METHODS:
        raise InputError("--method", f"{method!r}; accepted: {', '.join(SPEC_METHODS)}")
    if max_batch < 1:
        raise InputError("--max-batch", f"{max_batch} < 1")
    if concurrency is not None and concurrency < 1:
        raise InputError("--concurrency", f"{concurrency} < 1")


def _textbook(
    method: str, alphas: list[float], ks: list[int], draft_cost: float, verify_cost: float
) -> dict[str, Any]:
    """The report's load-free part: the speedup of every (alpha, k), the best k for each
    alpha, the alpha at which each k breaks even, and how the best moves with the verify cost;
    the load, draft and off-switch fields empty until a deployment fills them."""
    from planner.core import speculative as sp
    from planner.core.flags import SPEC_NEEDS

    return {
        "method": method,
        "method_needs": SPEC_NEEDS[method],
        "draft_cost": draft_cost,
        "verify_cost": verify_cost,
        "rows": [r.model_dump() for r in sp.table(alphas, ks, draft_cost, verify_cost)],
        "best": [
            {"alpha": a, "k": b.k, "speedup": b.speedup}
            for a in alphas
            for b in [sp.best(a, ks, draft_cost, verify_cost)]
        ],
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
        "notes": [],
    }


def _operating_point(
    deployment: Deployment,
    plan: CapacityPlan | None,
    mean_tokens: int,
    *,
    laid_out: bool,
    memory_fraction: float | None,
) -> tuple[StepCost, int, int, list[str], SpecTarget]:
    """The target's step, the sequences its KV cache holds, the concurrency it runs at, where
    the engine runs other than the flags name (EnginePrediction.resolved_notes), and the server
    the speculation flags are written for.

    The operating point is what the engine will run: the serve plan's max_num_seqs, and no
    more sequences than the engine's KV cache holds (the pool `capacity` prints). Speculation
    is priced on the step model of the engine instance `simulate` plans for the same flags
    (every term of it, the layout's included), as `capacity --spec-alpha` does. Where the
    engine would not start, a textbook plan's step and pool stand in, unless the layout or the
    memory share given is the engine's to start (refused, naming the flags)."""
    from planner.api.bench_instance import (
        WouldNotStart,
        deployment_instance,
        release_target,
        spec_target,
    )
    from planner.api.slo import memory_flag
    from planner.core.spec_load import curve_cost

    engine = str(deployment.settings["engine"])
    try:
        served, _groups = deployment_instance(deployment, longest=1)
    except WouldNotStart as e:
        if laid_out or deployment.calibration is not None or memory_fraction is not None:
            flags = "--tp/--pp/--dp"
            if memory_fraction is not None:
                flags += "/" + memory_flag(engine)
            raise InputError(flags, "; ".join(e.reasons)) from e
        assert plan is not None  # (a pipeline deployment that would not start was refused)
        server = release_target(engine, deployment.settings.get("version"), plan.model)
        return _plan_step(plan), plan.max_seqs_paged, plan.operating_concurrency, [], server
    serve, step = served.plan, curve_cost(served.curve, mean_tokens)
    server = spec_target(engine, served.prediction, served.curve.model)
    notes = served.prediction.resolved_notes
    return step, serve.max_seqs_at_mean, serve.max_num_seqs, notes, server


def _draft_beside(
    plan: CapacityPlan, gpu: str, draft_model: str, settings: dict[str, Any]
) -> tuple[StepCost, dict[str, Any]]:
    """A draft model beside the target (`plan`) on each of its GPUs: the draft's own step, and
    what it takes from the target's KV pool (its weights, its KV per sequence at the target's
    mean) as `planner spec --json` reports it. The draft runs as its own checkpoint stores it
    (the target's --weight-dtype is not its), one copy per GPU (TP 1)."""
    from planner.core.kv import kv_bytes_per_sequence
    from planner.units import dtype_bytes

    own = {k: v for k, v in settings.items() if k != "weight_dtype"}
    draft_plan = capacity_plan(gpu=gpu, model=draft_model, **(own | {"tp": 1}))
    kvb = dtype_bytes(plan.settings.kv_dtype)
    draft_seq = kv_bytes_per_sequence(
        draft_plan.model, plan.settings.mean_tokens, 1, kvb, plan.settings.block_tokens
    )
    pool = plan.ledger.kv_pool_bytes - draft_plan.ledger.weights_bytes_per_gpu
    with_draft = max(0, pool) // (plan.kv_bytes_per_sequence_paged_mean + draft_seq)
    return _plan_step(draft_plan), {
        "name": draft_plan.model.name,
        "weights_bytes_per_gpu": draft_plan.ledger.weights_bytes_per_gpu,
        "kv_bytes_per_sequence_mean": draft_seq,
        "max_seqs_paged_without_draft": plan.max_seqs_paged,
        "max_seqs_paged_with_draft": with_draft,
    }


def _plan_step(plan: CapacityPlan) -> StepCost:
    """The step of a plan without an engine instance (a draft model, a target the engine would
    not start): the step-time model of its TP group, at the plan's mean context."""
    from planner.api.latency import derived_step_model
    from planner.core.spec_load import curve_cost

    curve = derived_step_model(plan).curve
    assert curve is not None
    return curve_cost(curve, plan.settings.mean_tokens)


def _decision(
    method: str,
    draft_model: str | None,
    alpha: float,
    k: int,
    speedup: float,
    where: str,
    stop: int | None,
    concurrency: int | None = None,
    target: SpecTarget | None = None,
) -> dict[str, Any]:
    """Enable speculation (k, flags, off-switch) only where it pays; else say to leave it off
    (the flags written for `target`'s server, the newest release's where None)."""
    from planner.core.flags import SpecTarget, spec_flags

    chosen = {"alpha": alpha, "k": k, "speedup": speedup, "concurrency": concurrency}
    if speedup <= 1.0:
        return {
            "chosen": chosen,
            "enable": False,
            "advice": f"speculation does not pay at {where} (best {speedup:.2f}x at k {k}): "
            "leave it off",
            "flags": None,
        }
    off = None if stop is None or stop < 1 else stop
    advice = f"k {k} at {where}: {speedup:.2f}x"
    if off is not None:
        advice += f"; it stops paying above {off} concurrent sequences"
    return {
        "chosen": chosen,
        "enable": True,
        "advice": advice,
        "flags": spec_flags(method, k, draft_model, off, target or SpecTarget()).model_dump(),
    }
