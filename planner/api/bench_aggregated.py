"""One aggregated deployment's benchmark: its engine instance's scheduler runs the posed
requests (each replica or data-parallel rank its share), the benchmark's figures are read off
the run, and a concurrency sweep reruns it at each point."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from planner.api.bench_instance import (
    Instance,
    bench_client_of,
    caches_prefixes,
    lockstep_load,
    multi_step_ignored,
    spec_target,
    with_bench_client,
    with_speculation,
)
from planner.api.bench_load import Posed, Speculation
from planner.api.bench_report import (
    deployment_echo,
    per_gpu,
    run_notes,
    speculation_echo,
    speculation_flags,
    step_constants,
)
from planner.core.parallel import deployment_gpus
from planner.core.step.overhead import REQUEST_PATH_MS

if TYPE_CHECKING:
    import numpy as np
    from numpy.typing import NDArray

    from planner.core.specs import ModelSpec
    from planner.sim.prefix import PrefixShare, TierHits
    from planner.sim.workload import Trace


@dataclass(frozen=True)
class Layout:
    """The deployment's parallelism as asked: TP, PP, DP replicas or ranks, EP, and V0's
    multi-step rounds."""

    tp: int
    pp: int
    dp: int
    ep: int | None
    scheduler_steps: int


def run_aggregated(
    inst: Instance,
    posed: Posed,
    layout: Layout,
    *,
    spec: ModelSpec,
    mean_total: float,
    prefix: PrefixShare | None = None,
    speculation: Speculation | None = None,
    sweep: list[int] | None = None,
) -> dict[str, Any]:
    """The benchmark's figures for one aggregated deployment (`inst`, planned as its line
    starts it) under `posed`: the load spread over its replicas or DP ranks, each run as this
    one; `mean_total` the requests' mean tokens (the step times printed are at it); its command
    adds the speculation flags of the server it plans; `sweep` the concurrencies to rerun it at."""
    from planner.sim.bench import bench_metrics
    from planner.sim.engine import execute

    engine_name = inst.engine
    served_step = inst.curve  # the service's step, as `slo` prices it (no benchmark client)
    # the ranks the load spreads over, each run as this one: the DP replicas or ranks, or the
    # attention groups SGLang turns on by itself
    ranks = max(layout.dp, inst.attention_groups)
    # one client process reads every replica's and DP rank's streams
    inst = with_bench_client(inst, posed.trace, ranks, posed.client)
    spec_line = None
    if speculation is not None:
        target = spec_target(engine_name, inst.prediction, spec)
        spec_line = speculation_flags(speculation, spec, engine_name, target)
        inst = with_speculation(inst, speculation)
    plan = inst.plan
    load = posed.load

    def run_at(
        concurrency: int | None, trace_now: Trace, total: int, requests: int
    ) -> dict[str, Any]:
        """One replica's run at `concurrency` clients of the `total` the benchmark has, on
        its share `trace_now` of the benchmark's `requests`."""
        cfg = inst.cfg.model_copy(
            update={
                "concurrency": concurrency,
                "paced": posed.paced and concurrency is not None,
                "lockstep_load": lockstep_load(inst, total, ranks),
            }
        )
        per_request = requests / max(1, trace_now.size)  # the benchmark's requests per share's
        trace_now, ignored = multi_step_ignored(trace_now, cfg)
        served_requests = round(requests - ignored.size * per_request)
        served, delay, hits = prefix_served(
            trace_now, prefix, inst, concurrency, load.rate_per_s, load.trace_seed()
        )
        run = execute(served, inst.cost, cfg, delay)
        metrics = bench_metrics(
            run,
            served,
            replicas=ranks,
            clients=total if concurrency is not None else None,
            requests=served_requests,
            ignored_prompt_tokens=ignored.prompt_tokens,
            percentiles=posed.percentiles,
            stream_interval=inst.curve.stream_interval,
            **posed.empty,
        )
        metrics["ignored_requests"] = requests - served_requests
        if hits is not None:
            metrics["prefix_cache"] = hits
        return metrics

    def share(n: int) -> int:
        return max(1, math.ceil(n / ranks))

    closed, trace = posed.closed, posed.trace
    # one replica's share (prefixes are drawn per replica: each one's cache sees its own share)
    metrics = run_at(share(closed) if closed else None, trace.share(ranks), closed or 0, trace.size)
    gpus = deployment_gpus(engine_name, layout.tp, layout.pp, layout.dp, inst.attention_groups)
    mean_tokens = max(1, round(mean_total))
    result: dict[str, Any] = {
        **per_gpu(metrics, gpus),
        "max_concurrency": load.concurrency,
        "request_rate": load.rate_per_s,
        "gpus": gpus,
        "estimate": (
            "predicted by the step-time model and the engine's scheduler (docs/simulate.md); "
            "not a measurement"
        ),
        "step_constants": step_constants(inst.curve, inst.calibrated),
        "request_path_ms": REQUEST_PATH_MS,
        "front_door": inst.cfg.front_door.model_dump() if inst.cfg.front_door else None,
        "bench_client": bench_client_of(engine_name, posed.client),
        "deployment": deployment_echo(inst, spec, layout.dp, layout.ep, layout.scheduler_steps),
        "workload": posed.echo,
        "calibration": None if inst.calibrated is None else inst.calibrated.model_dump(),
        "step_ms": {
            str(b): served_step.step_ms(b, mean_tokens)
            for b in sorted({1, min(64, plan.max_num_seqs), plan.max_num_seqs})
        },
        "sweep": None,
        "speculation": speculation_echo(speculation),
    }
    if spec_line is not None:  # the line the run speculates with
        result["deployment"]["command"] += " " + spec_line
    result["notes"] = run_notes(
        inst,
        metrics,
        trace.size,
        mean_tokens,
        posed.client,
        layout.scheduler_steps,
        result["speculation"],
        lockstep_load(inst, closed or 0, ranks),
        open_loop=closed is None,
    )
    if sweep:
        points = []
        for n in sweep:
            swept = posed.swept(n, bench_client_of(engine_name, posed.client))
            point = per_gpu(run_at(share(n), swept.share(ranks), n, swept.size), gpus)
            points.append({"max_concurrency": n, **point})
        result["sweep"] = points
    return result


def prefix_served(
    trace: Trace,
    prefix: PrefixShare | None,
    inst: Instance,
    concurrency: int | None,
    rate_per_s: float | None,
    seed: int,
) -> tuple[Trace, NDArray[np.float64] | None, dict[str, Any] | None]:
    """The trace with its shared prefixes served from the instance's tiers (planner.sim.prefix:
    the GPU pool's room, the CPU tier the plan sizes), the time each request waits for its
    prefix to load, and the hits; the trace itself where no prefix is shared. The GPU pool less
    what the running requests hold is the prefix cache's room: the clients of a closed loop, or
    Little's law at the engine's full batch for an open one."""
    if prefix is None or prefix.share <= 0:
        return trace, None, None
    plan, curve = inst.plan, inst.curve
    own = float((trace.prompt_tokens + trace.output_tokens).mean())
    if concurrency is None:
        out_mean = float(trace.output_tokens.mean())
        step_s = curve.step_ms(plan.max_num_seqs, 1) / 1e3
        concurrency = math.ceil((rate_per_s or 0.0) * out_mean * step_s)
    running = min(plan.max_num_seqs, max(1, concurrency))
    served, delay, hits = tiers_served(trace, prefix, inst, math.ceil(running * own), seed)
    return served, delay, hits.model_dump()


def tiers_served(
    trace: Trace,
    prefix: PrefixShare,
    inst: Instance,
    held_tokens: int,
    seed: int,
    ids: NDArray[np.int64] | None = None,
) -> tuple[Trace, NDArray[np.float64], TierHits]:
    """The trace with `prefix` served from the instance's tiers, where the requests it runs
    hold `held_tokens` of its GPU pool (the rest is the prefix cache's room), the wait each
    request has for its prefix to load from the CPU tier, and the hits. `ids`: the prefix
    each request opens with (planner.sim.prefix.prefix_ids), else drawn from `seed`."""
    from planner.core.step.comm import host_link_bytes_per_s
    from planner.sim.prefix import with_tiers

    plan, p = inst.plan, inst.prediction
    tiers = plan.kv_tiers
    cpu_tokens = 0 if tiers is None else sum(t.tokens for t in tiers.tiers if t.tier == "CPU")
    caches = caches_prefixes(inst.engine, p, inst.curve.model)
    per_token = p.bytes_per_block // inst.cfg.block_tokens
    room = max(0, p.kv_cache_tokens - held_tokens) if caches else 0
    return with_tiers(
        trace,
        prefix,
        gpu_room_tokens=room,
        cpu_tier_tokens=cpu_tokens if caches else 0,
        kv_bytes_per_token=per_token,
        host_link_bytes_per_s=host_link_bytes_per_s(inst.card),
        seed=seed,
        ids=ids,
    )
