"""`planner simulate` with a deployment: predict what `vllm bench serve` / SGLang
`bench_serving` would print for it.

The deployment is planned once by the engine model (serve plan: KV pool, max_num_seqs,
batched-token budget as the engine would start with them), its step time comes from the
step-time model, and the engine's scheduler runs the benchmark's load (closed loop or an
arrival rate) over the benchmark's lengths. Everything printed is an estimate; the output
says so.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any, Literal

from planner.api.bench_disagg import run_disaggregated
from planner.api.bench_instance import (
    Deployment,
    Instance,
    attention_groups_of,
    bench_client_of,
    caches_prefixes,
    check_ep,
    lockstep_load,
    multi_step_ignored,
    plan_instance,
    with_bench_client,
    with_speculation,
)
from planner.api.bench_load import (
    DEFAULT_BENCH_REQUESTS,
    REQUESTS_PER_CLIENT,
    Lengths,
    Load,
    Speculation,
    bench_trace,
)
from planner.api.bench_report import (
    deployment_echo,
    per_gpu,
    run_notes,
    speculation_echo,
    speculation_flags,
    step_constants,
)
from planner.core.disagg import pool_role
from planner.core.parallel import deployment_gpus
from planner.core.step.overhead import BENCH_CLIENT_MS_PER_CHUNK, REQUEST_PATH_MS
from planner.errors import InputError

if TYPE_CHECKING:
    import numpy as np
    from numpy.typing import NDArray

    from planner.core.specs import ModelSpec
    from planner.sim.disagg import DisaggLayout
    from planner.sim.prefix import PrefixShare
    from planner.sim.workload import Trace


def benchmark(
    deployment: Deployment,
    *,
    load: Load,
    lengths: Lengths,
    sweep: list[int] | None = None,
    prefix: PrefixShare | None = None,
    disagg: DisaggLayout | None = None,
    percentiles: tuple[float, ...] | None = None,
    client: str | None = None,
    speculation: Speculation | None = None,
) -> dict[str, Any]:
    """What the benchmark would print for this deployment under this load (an estimate).

    `prefix`: a PrefixShare, served from the GPU's prefix cache, an offload tier
    (settings["offload"]) or prefilled. `percentiles`: the tail figures to print
    (--metric-percentiles; default 99). `client`: the benchmark client, which reads every
    stream in one process and whose time per chunk paces what it prints where the engine
    streams faster: "vllm" (an OpenAI-stream client such as vllm bench serve), "sglang"
    (sglang.bench_serving's native stream), "none" (the engine's pace); None: the engine's
    own. `speculation`: speculative decoding, each decode step the target's verification of k
    drafts per sequence on the step model plus the drafts' forwards, each sequence emitting the
    tokens its draw accepts (+1)."""
    from planner.sim.bench import (
        DEFAULT_PERCENTILES,
        TEXT_TTFT_CLIENTS,
        EmptyCounting,
        bench_metrics,
    )
    from planner.sim.engine import execute
    from planner.sources.models import resolve_model

    gpu, preset, model = deployment.gpu, deployment.preset, deployment.model
    settings, dp, ep = dict(deployment.settings), deployment.dp, deployment.ep
    scheduler_steps, calibration = deployment.scheduler_steps, deployment.calibration

    tails = percentiles or DEFAULT_PERCENTILES
    if client is not None and client not in (*BENCH_CLIENT_MS_PER_CHUNK, "none"):
        raise InputError("--bench-client", f"{client!r}: vllm, sglang, vllm-2024 or none")

    tp = int(settings.get("tp", 1))
    pp = int(settings.get("pp", 1))
    if dp < 1:
        raise InputError("--dp", f"must be >= 1 (got {dp})")
    engine_name = str(settings.get("engine", "vllm"))
    if disagg is not None:
        for flag, given in (
            ("--dp", dp != 1),
            ("--ep", ep not in (None, 1)),
            ("--sweep", bool(sweep)),
            ("--prefix-share", prefix is not None),
            ("--calibration", calibration is not None),
            ("--num-scheduler-steps", scheduler_steps != 1),
            ("--rate", load.concurrency is not None and load.rate_per_s is not None),
            ("--spec-alpha", speculation is not None),
        ):
            if given:
                raise InputError(flag, "not modelled with --disagg yet (one pool layout each)")
    # --rate with --concurrency: released at the rate, at most N in flight (vllm bench serve
    # --request-rate R --max-concurrency N); --rate inf with --concurrency: a plain closed loop
    paced = (
        load.concurrency is not None
        and load.rate_per_s is not None
        and math.isfinite(load.rate_per_s)
    )
    trace, workload_echo = bench_trace(load, lengths, bench_client_of(engine_name, client))
    # what the client counts of an empty output (planner.sim.bench.TEXT_TTFT_CLIENTS)
    empty: EmptyCounting = {
        "empty_outputs": bool(workload_echo.get("empty_output_share")),
        "text_ttft": bench_client_of(engine_name, client) in TEXT_TTFT_CLIENTS,
    }
    spec = resolve_model(preset, model, deployment.revision)
    spec_line = None if speculation is None else speculation_flags(speculation, spec, engine_name)
    attention_groups = attention_groups_of(
        engine_name,
        tp,
        dp,
        deployment.dp_attention,
        moe=bool(spec.num_experts),
        version=settings.get("version"),
    )
    # the ranks the MoE layers span: the DP ranks' experts are one group only where the engine
    # runs them that way; SGLang's --dp-size and old vLLM replicas each keep their own
    check_ep(ep, engine_name, tp, attention_groups)
    values, longest, mean_total = _serve_values(
        settings, spec, trace, prefix, deployment.chunked_prefill
    )

    def instance(
        tp_size: int,
        ep_size: int | None,
        groups: int = 1,
        role: Literal["prefill", "decode"] | None = None,
    ) -> Instance:
        """This deployment's engine instance at one TP (and EP) size; `groups` data-parallel
        attention groups (vLLM DP ranks of a MoE model, SGLang attention-DP groups); `role`:
        its pool's in a disaggregated deployment, with that role's flags."""
        own: dict[str, Any] = {"tp": tp_size}
        if role is not None and disagg is not None:
            own["disagg"] = pool_role(engine_name, role, disagg.transfer_backend)
        try:
            return plan_instance(
                replicas=dp,
                gpu=gpu,
                preset=preset,
                model=model,
                revision=deployment.revision,
                values=values | own,
                attention_groups=groups,
                spec=spec,
                longest=longest,
                ep=ep_size,
                calibration=calibration,
                scheduler_steps=scheduler_steps,
                seed=load.trace_seed(),
            )
        except InputError as err:
            flag = pool_flag(err.field, role, own_tp=tp_size != tp)
            if flag is None:
                raise
            raise InputError(flag, err.message) from err

    closed = load.concurrency
    if closed is None and (load.rate_per_s is None or not math.isfinite(load.rate_per_s)):
        closed = trace.size  # no rate (vllm bench serve's default, inf): every request at t = 0
    if disagg is not None:
        return run_disaggregated(
            engine=engine_name,
            version=settings.get("version"),
            disagg=disagg,
            link=disagg.link,
            trace=trace,
            closed=closed,
            load=load,
            spec=spec,
            workload_echo=workload_echo,
            instance=instance,
            percentiles=tails,
            client=client,
            source={"preset": preset, "model": model},
            backend=disagg.transfer_backend,
            empty=empty,
        )
    inst = instance(tp, ep, attention_groups)
    served_step = inst.curve  # the service's step, as `slo` prices it (no benchmark client)
    # the ranks the load spreads over, each run as this one: the DP replicas or ranks, or the
    # attention groups SGLang turns on by itself
    ranks = max(dp, inst.attention_groups)
    # one client process reads every replica's and DP rank's streams
    inst = with_bench_client(inst, trace, ranks, client)
    if speculation is not None:
        inst = with_speculation(inst, speculation)
    plan = inst.plan

    def run_at(
        concurrency: int | None, trace_now: Trace, total: int, requests: int
    ) -> dict[str, Any]:
        """One replica's run at `concurrency` clients of the `total` the benchmark has, on
        its share `trace_now` of the benchmark's `requests`."""
        cfg = inst.cfg.model_copy(
            update={
                "concurrency": concurrency,
                "paced": paced and concurrency is not None,
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
            percentiles=tails,
            stream_interval=inst.curve.stream_interval,
            **empty,
        )
        metrics["ignored_requests"] = requests - served_requests
        if hits is not None:
            metrics["prefix_cache"] = hits
        return metrics

    def share(n: int) -> int:
        return max(1, math.ceil(n / ranks))

    # one replica's share (prefixes are drawn per replica: each one's cache sees its own share)
    one = trace.share(ranks)
    metrics = run_at(share(closed) if closed else None, one, closed or 0, trace.size)
    gpus = deployment_gpus(inst.engine, tp, pp, dp, inst.attention_groups)
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
        "bench_client": bench_client_of(engine_name, client),
        "deployment": deployment_echo(inst, spec, dp, ep, scheduler_steps),
        "workload": workload_echo,
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
        client,
        scheduler_steps,
        result["speculation"],
        lockstep_load(inst, closed or 0, ranks),
        open_loop=closed is None,
    )
    if sweep:
        points = []
        for n in sweep:
            if n < 1:
                raise InputError("--sweep", "concurrency values must be >= 1")
            requests = load.requests or max(DEFAULT_BENCH_REQUESTS // 4, REQUESTS_PER_CLIENT * n)
            swept, _ = bench_trace(
                load.model_copy(update={"requests": requests}),
                lengths,
                bench_client_of(engine_name, client),
            )
            point = per_gpu(run_at(share(n), swept.share(ranks), n, swept.size), gpus)
            points.append({"max_concurrency": n, **point})
        result["sweep"] = points
    return result


def pool_flag(field: str, role: str | None, own_tp: bool) -> str | None:
    """The flag a disaggregated pool's layout error belongs to (None: the one it names): its
    EP and DP are its own flags' (--ep and --dp are refused beside --disagg), its TP is --tp
    unless its own flag set another (`own_tp`)."""
    if role is None:
        return None
    pool = {"--ep": f"--{role}-ep", "--dp": f"--{role}-dp"}
    if own_tp:
        pool["--tp"] = f"--{role}-tp"
    return pool.get(field)


def _serve_values(
    settings: dict[str, Any],
    spec: ModelSpec,
    trace: Trace,
    prefix: PrefixShare | None,
    chunked_prefill: bool | None,
) -> tuple[dict[str, Any], int, float]:
    """The serve settings each instance is planned with, the longest request of the run and
    its mean tokens (prompt, output and a shared prefix). The context is the one given, else
    the planner's default stretched to the longest request; a context shorter than a request,
    or a request longer than the model's maximum, is refused."""
    from planner.api.capacity import DEFAULT_CONTEXT_TOKENS

    engine = str(settings.get("engine", "vllm"))
    extra_prompt = prefix.tokens if prefix is not None and prefix.share > 0 else 0
    longest = int((trace.prompt_tokens + trace.output_tokens).max()) + extra_prompt
    if longest > spec.max_context_tokens:
        raise InputError(
            "--prompt-len",
            f"requests of up to {longest:,} tokens exceed {spec.name}'s maximum of "
            f"{spec.max_context_tokens:,} (the engines refuse them)",
        )
    values = dict(settings)
    if chunked_prefill is not None:
        if engine != "vllm":
            raise InputError(
                "--enable-chunked-prefill",
                "vLLM's flag: SGLang chunks prompts by --chunked-prefill-size (-1 turns it off)",
            )
        values["extra"] = dict(values.get("extra") or {}) | {
            "enable_chunked_prefill": chunked_prefill
        }
    context = values.get("context_tokens")
    if values.get("max_model_len_auto"):
        pass  # vLLM fits it to the KV cache; each instance checks the longest request fits
    elif context is None:
        values["context_tokens"] = max(
            longest, min(DEFAULT_CONTEXT_TOKENS, spec.max_context_tokens)
        )
    elif context < longest:
        raise InputError(
            "--context", f"{context:,} is shorter than the longest request ({longest:,} tokens)"
        )
    mean_total = float((trace.prompt_tokens + trace.output_tokens).mean())
    if prefix is not None:
        mean_total += prefix.share * prefix.tokens
    values.setdefault(
        "mean_tokens",
        min(max(1, math.ceil(mean_total)), values.get("context_tokens", spec.max_context_tokens)),
    )
    return values, longest, mean_total


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
    from planner.core.step.comm import host_link_bytes_per_s
    from planner.sim.prefix import with_tiers

    plan, p, curve = inst.plan, inst.prediction, inst.curve
    tiers = plan.kv_tiers
    cpu_tokens = 0 if tiers is None else sum(t.tokens for t in tiers.tiers if t.tier == "CPU")
    caches = caches_prefixes(inst.engine, p, curve.model)
    per_token = p.bytes_per_block // inst.cfg.block_tokens
    own = float((trace.prompt_tokens + trace.output_tokens).mean())
    if concurrency is None:
        out_mean = float(trace.output_tokens.mean())
        step_s = curve.step_ms(plan.max_num_seqs, 1) / 1e3
        concurrency = math.ceil((rate_per_s or 0.0) * out_mean * step_s)
    running = min(plan.max_num_seqs, max(1, concurrency))
    room = max(0, p.kv_cache_tokens - math.ceil(running * own)) if caches else 0
    served, delay, hits = with_tiers(
        trace,
        prefix,
        gpu_room_tokens=room,
        cpu_tier_tokens=cpu_tokens if caches else 0,
        kv_bytes_per_token=per_token,
        host_link_bytes_per_s=host_link_bytes_per_s(inst.card),
        seed=seed,
    )
    return served, delay, hits.model_dump()
