"""Pareto curves of fleet candidates: each layout's closed-loop concurrency sweep through the
benchmark predictor (the engine instance `planner simulate` runs), and the front across them.

A curve is what the public cross-vendor sweeps draw: output tokens/s per GPU against tokens/s
per user (1000 / median TPOT) as the number of clients grows. Each point is the same prediction
`planner simulate --concurrency N` prints for that deployment and workload.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from planner.api.bench_instance import Instance
    from planner.sim.prefix import PrefixShare
    from planner.sim.workload import Workload

# Clients per point: powers of four (the public sweeps' 1 ... 256 style), up to the engine's
# running cap (beyond it more clients only queue), the cap itself as the last point.
CURVE_CLIENTS = (1, 4, 16, 64, 256, 1024)
# Requests per point: three per client (a closed loop's ramp and drain stay a small share) and
# at least CURVE_MIN_REQUESTS, so the single-client point averages over the length distribution.
CURVE_REQUESTS_PER_CLIENT = 3
CURVE_MIN_REQUESTS = 48


def clients_for(cap: int) -> list[int]:
    """The sweep's client counts for an engine whose running cap is `cap`."""
    points = [n for n in CURVE_CLIENTS if n < cap]
    return [*points, cap]


def layout_curve(
    *,
    inst: Instance,
    workload: Workload,
    gpus: int,
    groups: int = 1,
    prefix: PrefixShare | None = None,
) -> list[dict[str, Any]]:
    """One layout's points: for each client count, what the benchmark would print for the
    engine instance `inst` on `gpus` GPUs (an estimate), per GPU
    and per user. With `groups` data-parallel groups the instance is one group, given its
    share of the clients (as `planner simulate --dp` runs it); with a shared `prefix`, served
    from the instance's prefix cache as simulate serves it."""
    from planner.api.bench_aggregated import prefix_served
    from planner.sim.bench import bench_metrics
    from planner.sim.engine import execute
    from planner.sim.workload import generate

    points = []
    for clients in clients_for(inst.plan.max_num_seqs):
        total = clients * groups  # the benchmark's clients, each group serving its share
        requests = max(CURVE_MIN_REQUESTS, CURVE_REQUESTS_PER_CLIENT * total)
        trace = generate(workload.model_copy(update={"requests": requests, "seed": 0}))
        trace = trace.share(groups)  # one group's, as `planner simulate --dp` deals them
        served, delay, _ = prefix_served(trace, prefix, inst, clients, None, 0)
        cfg = inst.cfg.model_copy(update={"concurrency": clients})
        run = execute(served, inst.cost, cfg, delay)
        metrics = bench_metrics(run, served, replicas=groups, requests=requests)
        points.append(curve_point(total, metrics, gpus))
    return points


def curve_point(clients: int, m: dict[str, Any], gpus: int) -> dict[str, Any]:
    """One point of a curve from the benchmark's figures at `clients`, per GPU and per user."""
    tpot = float(m["median_tpot_ms"])
    return {
        "max_concurrency": clients,
        "output_tokens_per_s_per_gpu": float(m["output_throughput"]) / gpus,
        "tokens_per_s_per_user": 1000.0 / tpot if tpot > 0 else None,
        "median_tpot_ms": tpot,
        "median_ttft_ms": float(m["median_ttft_ms"]),
        "request_throughput": float(m["request_throughput"]),
    }


def front(candidates: list[dict[str, Any]], tpot_ms: float) -> list[dict[str, Any]]:
    """The points of every candidate's curve that no other point beats on both tokens/s per GPU
    and tokens/s per user, by tokens/s per user; each says whether it is within the TPOT
    promise (at the median, as the sweeps draw it)."""
    points = [
        {
            "gpu": c["gpu"],
            "tp": c["tp"],
            "ep": c["ep"],
            "dp": c.get("dp", 1),
            "engine": c.get("engine"),
            "pp": c.get("pp", 1),
            "disagg": c.get("disagg"),
            "precision": c["precision"],
            **p,
            "meets_tpot": p["median_tpot_ms"] <= tpot_ms,
        }
        for c in candidates
        for p in c.get("curve") or []
        if p["tokens_per_s_per_user"] is not None
    ]
    kept = []
    for p in points:
        x, y = p["tokens_per_s_per_user"], p["output_tokens_per_s_per_gpu"]
        beaten = any(
            o is not p
            and o["tokens_per_s_per_user"] >= x
            and o["output_tokens_per_s_per_gpu"] >= y
            and (o["tokens_per_s_per_user"] > x or o["output_tokens_per_s_per_gpu"] > y)
            for o in points
        )
        if not beaten:
            kept.append(p)
    return sorted(kept, key=lambda p: p["tokens_per_s_per_user"])
