"""Disaggregated fleet candidates: xPyD units of one GPU type (x prefill and y decode instances
of one TP), each searched for the rate it sustains within the promise, costed like the
aggregated candidates they are ranked beside (docs/fleet.md, docs/disagg.md).

A unit is planned and simulated as `planner simulate --disagg xPyD` runs it (planner.sim.disagg:
prefill-only and decode-only pools, the prompt's KV over the link in between); replicas are
whole units.
"""

from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING, Any, Literal

if TYPE_CHECKING:
    from planner.api.bench_instance import Instance
    from planner.api.fleet import Job
    from planner.core.fleet import Trial
    from planner.core.specs import ModelSpec
    from planner.sim.disagg import DisaggLayout
    from planner.sim.engine import RunState
    from planner.sim.workload import Trace

# P:D ratios a unit may take (at most four instances: the shapes the SGLang and Dynamo docs
# and the published xPyD sweeps run); per GPU and TP the RATIOS_TRIED nearest to the workload's
# balance are searched (see ratios_for).
DISAGG_RATIOS = ((1, 1), (1, 2), (1, 3), (2, 1), (3, 1), (2, 3), (3, 2))
RATIOS_TRIED = 2
# When fleet adds disaggregated candidates by default: MoE models, the class the engines'
# disaggregated deployments serve (a dense model's decode gains little from a pool of its own
# next to chunked prefill; `--disagg on` asks anyway).
DISAGG_MODES = ("auto", "on", "off")


def ratios_for(prefill_ms: float, decode_ms: float) -> list[tuple[int, int]]:
    """The P:D ratios nearest (in log ratio) to the balance of the work one request gives each
    pool: its prompt's prefill time against its output's share of full-batch decode steps.
    A unit whose pools are loaded alike wastes neither."""
    import math

    balance = max(prefill_ms, 1e-9) / max(decode_ms, 1e-9)
    ranked = sorted(DISAGG_RATIOS, key=lambda r: abs(math.log(r[0] / r[1] / balance)))
    return ranked[:RATIOS_TRIED]


def pool_work_ms(inst: Instance, mean_prompt: float, mean_output: float) -> tuple[float, float]:
    """GPU time one request costs the prefill pool (its prompt in full chunks) and the decode
    pool (its output at the full batch's time per token), ms."""
    from planner.sim import disagg as dis

    seqs = inst.plan.max_num_seqs
    context = max(1, round(mean_prompt + mean_output / 2))
    decode = dis.DecodeOnlyCost(inst.cost).step_ms(seqs, seqs * context, 0, 0.0) / seqs
    chunk = inst.budget
    # a full chunk of prompts of the mean length: each token attends to half of its prompt
    prefill = inst.cost.step_ms(0, 0, chunk, chunk * (mean_prompt + 1) / 2) / chunk
    return max(mean_prompt, 1.0) * prefill, mean_output * decode


def unit_work_ms(job: Job, inst: Instance, dec: Instance) -> tuple[float, float]:
    """GPU time one request costs a unit's prefill pool (`inst`) and decode pool (`dec`), ms
    (pool_work_ms): a shared prefix counted as the prefill pool's cache serves it at best (a
    hit: its own tokens prefill) and as the decode pool holds it (its KV read every step)."""
    q = job.question
    opening = q.prefix.mean_tokens if q.prefix is not None else 0.0
    prefill_ms = pool_work_ms(inst, q.mean_prompt_tokens, q.mean_output_tokens)[0]
    decode_ms = pool_work_ms(dec, q.mean_prompt_tokens + opening, q.mean_output_tokens)[1]
    return prefill_ms, decode_ms


def wanted(mode: str, spec: ModelSpec) -> bool:
    """Whether this search adds disaggregated candidates."""
    from planner.errors import InputError

    if mode not in DISAGG_MODES:
        raise InputError("--disagg", f"{mode!r}; accepted: {', '.join(DISAGG_MODES)}")
    return mode == "on" or (mode == "auto" and bool(spec.num_experts))


def decode_groups(spec: ModelSpec, engine: str, tp: int) -> int:
    """Data-parallel groups a unit's decode instance may take (1: none): for an MLA MoE model,
    the data-parallel attention layout fleet searches aggregated (SGLang TP N with N groups,
    vLLM TP N x DP 8 / N), EP across them."""
    from planner.api.fleet import _parallel_options

    grouped = [g for ep, g in _parallel_options(spec, engine, tp) if ep and g > 1]
    return grouped[0] if grouped else 1


def unit_jobs(
    jobs: list[Job], candidates: list[dict[str, Any]], widest_tp: int, spec: ModelSpec, engine: str
) -> list[Job]:
    """The xPyD units searched beside the aggregated candidates: each GPU and precision's
    pools at the narrowest TP an aggregated replica started with (unit_tp) and at the widest,
    without EP; at the widest an MLA MoE model's decode pool also runs data-parallel attention
    with EP over the node (its running requests' latents no longer copied on every TP rank),
    the layout its engines' disaggregated deployments run: the costliest units to simulate,
    tried at one P:D ratio (disagg_units)."""
    units: list[Job] = []
    for job in jobs:
        narrowest = unit_tp(candidates, job.card.id, job.precision)
        if narrowest is None or job.ep or job.tp not in (narrowest, widest_tp):
            continue
        units.append(job)
        groups = decode_groups(spec, engine, job.tp)
        if groups > 1 and job.tp == widest_tp:
            units.append(replace(job, decode_groups=groups))
    return units


def best_units(ranked: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The best-ranked disaggregated candidate of each GPU and precision (whose curve is swept)."""
    best: dict[tuple[str, str], dict[str, Any]] = {}
    for c in ranked:
        if c.get("disagg"):
            best.setdefault((c["gpu"], c["precision"]), c)
    return list(best.values())


def decode_job(job: Job) -> Job:
    """The job of a unit's decode instance: the unit's own, or with its data-parallel groups
    and expert parallelism."""
    groups = job.decode_groups
    return job if groups == 1 else replace(job, groups=groups, ep=True)


def disagg_commands(
    job: Job, inst: Instance, layout: DisaggLayout, dec: Instance
) -> dict[str, str]:
    """The serve line of each pool, planned with its role's flags (SGLang --disaggregation-mode
    with the Mooncake transfer backend; vLLM --kv-transfer-config with the NIXL connector, each
    instance both sending and receiving), and the router in front of them. `inst` / `dec`: the
    prefill and decode instances."""
    from planner.api.bench_disagg import pd_command, pd_router
    from planner.api.fleet import pool_values

    def line(role: Literal["prefill", "decode"]) -> str:
        own, pool = (job, inst) if role == "prefill" else (decode_job(job), dec)
        seqs = pool.plan.max_num_seqs
        if inst.engine == "sglang":  # the deployment's cap, shared by its attention groups
            seqs *= own.groups
        values = pool_values(own, role) | {"max_num_seqs": seqs}
        return pd_command(
            values, pool.plan, role, gpu=job.card.id, preset=job.question.preset,
            model=job.question.model, spec=job.question.spec,
        )  # fmt: skip

    router = pd_router(inst.engine, layout.prefill, layout.decode)
    return {"prefill": line("prefill"), "decode": line("decode"), "router": router}


def disagg_units(job: Job) -> dict[str, Any]:
    """The units of one GPU, precision and TP: the ratios nearest the workload's balance, each
    searched and costed (`rows`, with the job that made each in `jobs`); picklable for the
    process pool."""
    from planner.api.bench_instance import WouldNotStart

    try:
        inst, dec = _unit_instances(job)
    except WouldNotStart:  # the aggregated candidate of this layout already says why
        return {"rows": [], "jobs": []}
    prefill_ms, decode_ms = unit_work_ms(job, inst, dec)
    # a decode instance of G groups serves G requests' worth per group step
    groups = job.decode_groups
    balance = (prefill_ms, decode_ms / groups)
    # a data-parallel decode unit, the costliest to simulate (its decode pool runs thousands
    # of requests at once), is tried at the one ratio nearest the balance
    ratios = ratios_for(*balance)[: 1 if groups > 1 else RATIOS_TRIED]
    jobs = [replace(job, ratio=ratio) for ratio in ratios]
    return {"rows": [disagg_candidate(j, inst, dec) for j in jobs], "jobs": jobs}


def disagg_candidate(job: Job, inst: Instance, dec: Instance) -> dict[str, Any]:
    """One xPyD unit searched and costed (`inst` / `dec`: the engine instance of the prefill
    and of the decode pool; one group's, under data-parallel attention)."""
    from planner.api.bench_report import graph_coverage_notes
    from planner.api.fleet import layout_name, no_room, serve_values
    from planner.core.engines import engine_notes
    from planner.core.fleet import (
        STABLE_UTILISATION,
        costed,
        replicas_for,
        sustainable_rate,
        trial,
    )
    from planner.core.parallel import line_max_num_seqs

    card, tp, precision = job.card, job.tp, job.precision
    p, d = job.pools()
    layout = _layout(job)
    q = job.question
    w, promised, rate, headroom = q.workload, q.promise, q.rate_per_s, q.headroom
    mean_prompt, mean_output = q.mean_prompt_tokens, q.mean_output_tokens
    groups = job.decode_groups
    row: dict[str, Any] = {
        "gpu": card.id,
        "tp": tp,
        "ep": 1 if groups == 1 else layout.decode_ep,
        "dp": groups,
        "dp_attention": groups > 1,
        "pp": 1,
        "precision": precision,
        "engine": job.question.engine,
        "disagg": layout.label,
        "price_per_gpu_hour": job.price_per_gpu_hour,
        "calibrated": "calibration" in serve_values(job)["extra"],
    }

    def runner(trace: Trace) -> RunState:
        return _run_unit(job, inst, dec, layout, trace, None)[0]

    seqs = dec.plan.max_num_seqs
    # capacity of each pool at utilisation 1: decode at its full batch, prefill at its budget
    prefill_ms, decode_ms = unit_work_ms(job, inst, dec)
    schedulers = layout.decode_schedulers
    ceiling = STABLE_UTILISATION * min(schedulers * 1000.0 / decode_ms, p * 1000.0 / prefill_ms)
    sizing = inst.cfg.model_copy(update={"max_batch": seqs * schedulers})

    def judge(r: float) -> Trial:
        return trial(w, r, None, sizing, promised, runner=runner)

    best = sustainable_rate(judge, ceiling / 2, ceiling=ceiling)
    if best is None:
        return row | {
            "fits": False,
            "reason": f"no rate meets the promise on one {layout.label} unit",
            "starts": True,
        }
    context = max(1, round(mean_prompt + mean_output / 2))
    t1 = dec.curve.step_ms(1, context)
    cramped = no_room(t1, promised.tpot_ms, layout_name(row), best.rate_per_s)
    if cramped is not None:
        return row | {"fits": False, "reason": cramped, "starts": True}
    replicas = replicas_for(rate, best.rate_per_s, headroom)
    at_load = trial(w, rate / replicas, None, sizing, promised, runner=runner)
    commands = disagg_commands(job, inst, layout, dec)
    return (
        row
        | costed(
            best=best,
            at_load=at_load,
            replicas=replicas,
            gpus_per_replica=layout.gpus,
            price_per_gpu_hour=job.price_per_gpu_hour,
            rate=rate,
            mean_prompt=mean_prompt,
            mean_output=mean_output,
        )
        | {
            # the decode line's value (SGLang's: shared by its attention groups)
            "max_num_seqs": line_max_num_seqs(seqs, job.question.engine, groups),
            "kv_cache_tokens": dec.prediction.kv_cache_tokens,
            "mean_tokens": job.question.mean_tokens,
            "engine_version": inst.prediction.version,
            "command": commands["decode"],
            "pools": {
                "layout": layout.label,
                "prefill_instances": p,
                "decode_instances": d,
                "decode_dp": layout.decode_dp,
                "decode_ep": layout.decode_ep,
                "gpus_per_unit": layout.gpus,
                **{f"{k}_command": v for k, v in commands.items()},
            },
            "flags": dict(dec.plan.flags),
            "curve": None,  # filled for the best unit of each GPU and precision (disagg_curve)
            "starts": True,
            # the busiest decode scheduler at the planned load, against its CUDA graphs
            "peak_running_seqs": at_load.peak_running,
            "notes": engine_notes(dec.prediction)
            + graph_coverage_notes(
                job.question.engine, dec.prediction, dec.curve, at_load.peak_running, mixed=False
            ),
        }
    )


def _layout(job: Job) -> DisaggLayout:
    """The job's xPyD layout (its decode instances with their data-parallel groups and EP)."""
    from planner.api.fleet import _ep_size
    from planner.core.parallel import ranks_share_tp
    from planner.sim.disagg import DisaggLayout

    p, d = job.pools()
    groups = job.decode_groups
    return DisaggLayout(
        prefill=p,
        decode=d,
        prefill_tp=job.tp,
        decode_tp=job.tp,
        decode_dp=groups,
        decode_ep=_ep_size(decode_job(job)) or 1,
        dp_within_tp=ranks_share_tp(job.question.engine),
    )


def _unit_instances(job: Job) -> tuple[Instance, Instance]:
    """The prefill and the decode pool's engine instances, as launched and each with its role's
    flags: planned as `planner simulate --disagg` plans them."""
    from planner.api.fleet import job_instance

    return (
        job_instance(job, as_launched=True, role="prefill"),
        job_instance(decode_job(job), as_launched=True, role="decode"),
    )


def _run_unit(
    job: Job,
    inst: Instance,
    dec: Instance,
    layout: DisaggLayout,
    trace: Trace,
    clients: int | None,
) -> tuple[RunState, Trace]:
    """One unit over a trace (open loop, or `clients` in a closed loop): the RunState, and the
    trace as served (a shared prefix opening the prompts, from the prefill instances' caches
    where they hold it, as `planner simulate --disagg` serves it)."""
    from planner.api.bench_disagg import pools_prefix_served, run_pools

    q = job.question
    trace, served, _ = pools_prefix_served(
        trace, q.prefix, inst, dec, layout, clients, q.workload.seed
    )
    state, _, _, _ = run_pools(q.spec, trace, layout, inst, dec, None, clients, None, served)
    return state, trace


def disagg_curve(job: Job) -> list[dict[str, Any]]:
    """A unit's closed-loop sweep, as `planner simulate --disagg xPyD --concurrency N` predicts
    it: the points of fleet_curves.layout_curve."""
    from planner.api.fleet_curves import (
        CURVE_MIN_REQUESTS,
        CURVE_REQUESTS_PER_CLIENT,
        clients_for,
        curve_point,
    )
    from planner.sim.bench import bench_metrics
    from planner.sim.workload import generate

    inst, dec = _unit_instances(job)
    layout = _layout(job)
    points = []
    # up to one decode scheduler's running cap (an instance's, or one attention group's): past
    # it the unit's curve only extends along its throughput plateau, and those closed loops
    # cost the most to settle
    for clients in clients_for(dec.plan.max_num_seqs):
        requests = max(CURVE_MIN_REQUESTS, CURVE_REQUESTS_PER_CLIENT * clients)
        trace = generate(job.question.workload.model_copy(update={"requests": requests, "seed": 0}))
        m = bench_metrics(*_run_unit(job, inst, dec, layout, trace, clients))
        points.append(curve_point(clients, m, layout.gpus))
    return points


def unit_tp(candidates: list[dict[str, Any]], gpu: str, precision: str) -> int | None:
    """The narrowest TP at which one instance of the model starts on this GPU. Units are tried
    at it (the most instances per GPU) and at the widest TP searched (the most KV room per
    instance: a narrow instance of a large model may hold little more than its weights)."""
    started = [
        c["tp"]
        for c in candidates
        if c["gpu"] == gpu
        and c["precision"] == precision
        and c.get("starts")
        and c["ep"] == 1
        and c.get("pp", 1) == 1
    ]
    return min(started) if started else None


def disagg_curve_row(job: Job) -> dict[str, Any]:
    """disagg_curve in the shape the fleet's process pool returns (a row with its layout)."""
    return {"gpu": job.card.id, "tp": job.tp, "precision": job.precision,
            "curve": disagg_curve(job)}  # fmt: skip
