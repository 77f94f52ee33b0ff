"""`planner simulate` with a deployment: predict what `vllm bench serve` / SGLang
`bench_serving` would print for it.

The deployment is planned once by the engine model (serve plan: KV pool, max_num_seqs,
batched-token budget as the engine would start with them), its step time comes from the
step-time model, and the engine's scheduler runs the benchmark's load (closed loop or an
arrival rate) over the benchmark's lengths. Everything printed is an estimate; the output
says so.

This module poses the benchmark (its requests, the client, the deployment's instances) and
hands it to the run that fits the deployment: planner.api.bench_aggregated for one pool,
planner.api.bench_disagg for a prefill pool and a decode pool.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal

from planner.api.bench_aggregated import Layout, run_aggregated
from planner.api.bench_disagg import run_disaggregated
from planner.api.bench_instance import (
    Deployment,
    Instance,
    attention_groups_of,
    bench_client_of,
    check_ep,
    plan_instance,
    release_target,
)
from planner.api.bench_load import Lengths, Load, Posed, Speculation, bench_trace
from planner.api.bench_report import speculation_flags
from planner.core.disagg import role_values
from planner.core.step.overhead import BENCH_CLIENT_MS_PER_CHUNK
from planner.errors import InputError

if TYPE_CHECKING:
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
    )
    from planner.sources.models import resolve_model

    preset, model = deployment.preset, deployment.model
    settings, dp, ep = dict(deployment.settings), deployment.dp, deployment.ep
    scheduler_steps = deployment.scheduler_steps

    tails = percentiles or DEFAULT_PERCENTILES
    if client is not None and client not in (*BENCH_CLIENT_MS_PER_CHUNK, "none"):
        raise InputError("--bench-client", f"{client!r}: vllm, sglang, vllm-2024 or none")

    tp = int(settings.get("tp", 1))
    pp = int(settings.get("pp", 1))
    if dp < 1:
        raise InputError("--dp", f"must be >= 1 (got {dp})")
    engine_name = str(settings.get("engine", "vllm"))
    if disagg is not None:
        _check_disaggregated(deployment, speculation)
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
    # a disaggregated run's pools speculate as SGLang's (_check_disaggregated); an aggregated
    # run's line is its planned server's (run_aggregated)
    spec_line = None
    if speculation is not None and disagg is not None:
        target = release_target(engine_name, settings.get("version"), spec)
        spec_line = speculation_flags(speculation, spec, engine_name, target)
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

    instance = _Instances(deployment, values, spec, longest, load.trace_seed(), disagg)
    closed = load.concurrency
    if closed is None and (load.rate_per_s is None or not math.isfinite(load.rate_per_s)):
        closed = trace.size  # no rate (vllm bench serve's default, inf): every request at t = 0
    posed = Posed(
        trace=trace,
        echo=workload_echo,
        load=load,
        lengths=lengths,
        closed=closed,
        paced=paced,
        percentiles=tails,
        empty=empty,
        client=client,
    )
    if disagg is not None:
        return run_disaggregated(
            disagg,
            posed,
            instance,
            engine=engine_name,
            version=settings.get("version"),
            spec=spec,
            source={"preset": preset, "model": model},
            prefix=prefix,
            speculation=speculation,
            spec_line=spec_line,
            sweep=sweep,
        )
    return run_aggregated(
        instance(tp, ep, attention_groups),
        posed,
        Layout(tp=tp, pp=pp, dp=dp, ep=ep, scheduler_steps=scheduler_steps),
        spec=spec,
        mean_total=mean_total,
        prefix=prefix,
        speculation=speculation,
        sweep=sweep,
    )


def _check_disaggregated(deployment: Deployment, speculation: Speculation | None) -> None:
    """Refuse, by its flag, what a disaggregated run does not take: one DP or EP size for both
    pools (each pool has its own flags), V0's multi-step rounds, speculation in vLLM's pools."""
    if speculation is not None and deployment.settings.get("engine", "vllm") != "sglang":
        raise InputError("--spec-alpha", "with --disagg is modelled for SGLang's pools only")
    for flag, given, why in (
        ("--dp", deployment.dp != 1, "each pool takes its own: --prefill-dp / --decode-dp"),
        (
            "--ep",
            deployment.ep not in (None, 1),
            "each pool takes its own: --prefill-ep / --decode-ep",
        ),
        (
            "--num-scheduler-steps",
            deployment.scheduler_steps != 1,
            "V0's multi-step rounds are not modelled with --disagg",
        ),
    ):
        if given:
            raise InputError(flag, why)


@dataclass(frozen=True)
class _Instances:
    """The deployment's engine instances, planned with the run's serve values: one for each TP
    (and EP) size, data-parallel attention groups and pool role the run asks for."""

    deployment: Deployment
    values: dict[str, Any]
    spec: ModelSpec
    longest: int
    seed: int
    disagg: DisaggLayout | None

    def __call__(
        self,
        tp_size: int,
        ep_size: int | None,
        groups: int = 1,
        role: Literal["prefill", "decode"] | None = None,
    ) -> Instance:
        """The instance at one TP (and EP) size; `groups` data-parallel attention groups (vLLM
        DP ranks of a MoE model, SGLang attention-DP groups); `role`: its pool's in a
        disaggregated deployment, with that role's flags (a pool's layout error named by the
        pool's own flag)."""
        d = self.deployment
        own: dict[str, Any] = {"tp": tp_size}
        engine = str(d.settings.get("engine", "vllm"))
        values = self.values
        if role is not None and self.disagg is not None:
            values = role_values(values, engine, role, self.disagg.transfer_backend)
            values = _with_pool_args(values, engine, role, self.disagg)
        try:
            return plan_instance(
                replicas=d.dp,
                gpu=d.gpu,
                preset=d.preset,
                model=d.model,
                revision=d.revision,
                values=values | own,
                attention_groups=groups,
                spec=self.spec,
                longest=self.longest,
                ep=ep_size,
                calibration=d.calibration,
                scheduler_steps=d.scheduler_steps,
                seed=self.seed,
            )
        except InputError as err:
            flag = pool_flag(err.field, role, own_tp=tp_size != int(d.settings.get("tp", 1)))
            text = self.disagg and (
                self.disagg.prefill_args if role == "prefill" else self.disagg.decode_args
            )
            if text and any(_names_flag(text, name) for name in err.field.split(" / ")):
                flag = f"--{role}-args"  # the pool's own flag's value
            if flag is None:
                raise
            raise InputError(flag, err.message) from err


def _names_flag(text: str, flag: str) -> bool:
    """Whether a pool's flags `text` give `flag` itself (not one it is the start of:
    --max-num-seqs is not in --max-num-seqs-x)."""
    import re

    return re.search(rf"(?<![\w-]){re.escape(flag)}(?![\w-])", text) is not None


def _with_pool_args(
    values: dict[str, Any], engine: str, role: Literal["prefill", "decode"], disagg: DisaggLayout
) -> dict[str, Any]:
    """A pool's serve values: the deployment's, overridden by the pool's own engine flags
    (--prefill-args / --decode-args, read as the shared ones are: SGLang's
    --max-running-requests is the instance's, which its attention-DP groups share)."""
    from planner.core.serve import pool_overrides

    text = disagg.prefill_args if role == "prefill" else disagg.decode_args
    if not text:
        return values
    over = pool_overrides(engine, text, f"--{role}-args")
    extra = dict(values.get("extra") or {}) | over.pop("extra", {})
    return values | over | ({"extra": extra} if extra else {})


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
