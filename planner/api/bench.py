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
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from planner.core.engines.calibration import Calibration  # a Deployment field
from planner.core.parallel import (
    deployment_gpus,
    fields_layout,
    layout_fields,
    moe_ranks,
    ranks_share_tp,
)
from planner.core.step.overhead import (
    BENCH_CLIENT_MS_PER_CHUNK,
    BENCH_CLIENT_MS_PER_REQUEST,
    FRONTEND_MS_PER_TOKEN,
    REQUEST_PATH_MS,
    VLLM_V1_SINCE,
    api_server_label,
    api_server_ms_per_request,
    bench_client_ms_per_chunk,
)
from planner.errors import InputError, PlannerError
from planner.sim.arrivals import MAX_ARRIVAL_CV
from planner.sim.engine import MAX_SPEC_K

if TYPE_CHECKING:
    import numpy as np
    from numpy.typing import NDArray

    from planner.core.engines.calibration import StepCalibration
    from planner.core.engines.common import EnginePrediction
    from planner.core.serve import ServePlan
    from planner.core.specs import GpuSpec, ModelSpec
    from planner.core.step.model import StepTime
    from planner.sim.disagg import DisaggLayout
    from planner.sim.engine import CurveCost, ReserveAdmission, RunState, SimConfig, WindowPool
    from planner.sim.prefix import PrefixShare
    from planner.sim.workload import Trace

# vllm bench serve's default --num-prompts (vllm/benchmarks/serve.py).
DEFAULT_BENCH_REQUESTS = 1000
# A closed loop runs at least this many requests per client by default, so the steady state
# outweighs the ramp at the start and the drain at the end (a benchmark's own choice; the
# public sweeps use 5-10 per client, and the SGLang cookbook's "standard benchmark" is
# num_prompts = concurrency x 5: sgl-project/sgl-cookbook, docs/autoregressive/DeepSeek/
# DeepSeek-R1.md).
REQUESTS_PER_CLIENT = 5
# SGLang admits a request only while its pool keeps room for the running requests' remaining
# outputs times a new-token ratio: 0.7 at start, decaying over 600 decode steps to 0.7 x 0.14,
# reset on every retraction to the decoded share plus 20 tokens per request; a request's
# remaining output counts at most 4,096 tokens (python/sglang/global_config.py:
# default_init_new_token_ratio, default_min_new_token_ratio_factor,
# default_new_token_ratio_decay_steps, retract_decode_steps; schedule_policy.py
# CLIP_MAX_NEW_TOKENS_ESTIMATION).
SGLANG_INIT_NEW_TOKEN_RATIO = 0.7
SGLANG_MIN_NEW_TOKEN_RATIO_FACTOR = 0.14
SGLANG_NEW_TOKEN_RATIO_DECAY_STEPS = 600
SGLANG_RETRACT_DECODE_STEPS = 20
SGLANG_CLIP_MAX_NEW_TOKENS = 4096
# A PD decode instance pre-allocates a landing request's KV only while its pool keeps 512 tokens
# free for every request it holds (running, transferring or waiting) and for the new one beside
# its prompt, not SGLang's new-token ratio (disaggregation/decode.py DecodePreallocQueue
# _allocatable_tokens, num_reserved_decode_tokens: SGLANG_NUM_RESERVED_DECODE_TOKENS in 0.4.7,
# --num-reserved-decode-tokens from 0.4.8; read in the 0.4.7, 0.5.2 and 0.5.13 wheels).
SGLANG_PD_RESERVED_DECODE_TOKENS = 512
# A retraction frees requests until the rest have room for retract_decode_steps (20) more
# tokens each before SGLang 0.5.2, and from 0.5.2 only until the next decode step fits
# (schedule_batch.py retract_decode: get_required_tokens in 0.5.1, check_decode_mem in 0.5.2).
SGLANG_RETRACT_TO_NEXT_STEP_SINCE = (0, 5, 2)
# The ratio is the default times --schedule-conservativeness (1.0), which SGLang multiplies by
# 0.3 under data-parallel attention (server_args.py, arg_groups/parallel_hook.py from 0.5.23):
# each attention group admits more boldly.
SGLANG_DP_ATTENTION_CONSERVATIVENESS = 0.3
# vLLM's V1 engine (the default from 0.8.0, VLLM_V1_SINCE) mixes prefill chunks into decode
# steps; V0 ran prefill-only steps unless chunked prefill was enabled (vllm/core/scheduler.py,
# 0.6.x). V0's multi-step scheduling (--num-scheduler-steps) arrived in vLLM 0.6.0 (release notes:
# "multi-step scheduling"; vLLM blog, 2024-09-05, "vLLM v0.6.0: 2.7x throughput improvement").
# vLLM V0 captured CUDA graphs for decode batches of 1, 2, 4 and every 8 up to 256
# (vllm/worker/model_runner.py _BATCH_SIZES_TO_CAPTURE, 0.6.x); mixed prefill steps ran eager.
VLLM_V0_GRAPH_MAX_BATCH = 256
# V0 admits a prompt only while 1% of the GPU blocks stay free after it (vllm/core/
# block_manager.py can_allocate, watermark 0.01; read in the 0.6.3 wheel).
VLLM_V0_WATERMARK = 0.01
VLLM_MULTI_STEP_SINCE = (0, 6, 0)
# Multi-step with chunked prefill arrived in 0.6.3 (0.6.2's engine args refuse the pair:
# "Chunked prefill is not supported with multi-step"; vllm/core/scheduler.py, read in the
# 0.6.2 and 0.6.3 wheels): a round's first step carries the prompts beside the decodes, whole,
# and the prompts it completes decode through the rest of the round (lookahead slots); new
# requests join only between rounds, which is what the simulator's rounds do. Its default
# budget is max(max_model_len, 2048) tokens, as without chunked prefill (V0_MIN_BATCHED_TOKENS),
# so the default does not turn prompts away (vllm/config.py SchedulerConfig, 0.6.3 on).
VLLM_MULTI_STEP_CHUNKED_SINCE = (0, 6, 3)
# vLLM V0's async output processing (0.6.0 on, default): the engine's step() processes the
# previous step's outputs in a callback while this step's forward runs, and returns them when
# it ends, so a step's tokens reach the client one step late (the first, and the last, whose
# client then sends its next request); with nothing left unfinished it drains them at once
# (vllm/engine/llm_engine.py LLMEngine.step, 0.6.3). Off under pipeline parallelism and
# speculative decoding (vllm/config.py ModelConfig.verify_async_output_proc). V1's engine
# core returns a step's outputs as it ends.
VLLM_ASYNC_OUTPUT_SINCE = (0, 6, 0)
# vLLM starts one API server per data-parallel rank by default from 0.15 (--api-server-count
# None -> --data-parallel-size; 1 through 0.14: vllm/entrypoints/openai/cli_args.py and
# cli/serve.py, read in the 0.14.0 and 0.15.0 wheels).
VLLM_API_SERVER_PER_RANK_SINCE = (0, 15, 0)


class Load(BaseModel):
    """The benchmark's load: a closed loop of N clients, or an arrival rate."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    concurrency: int | None = Field(default=None, gt=0, le=1_000_000)
    rate_per_s: float | None = Field(default=None, gt=0, allow_inf_nan=True)
    cv: float | None = Field(default=None, gt=0, le=MAX_ARRIVAL_CV)
    requests: int | None = Field(default=None, gt=0, le=1_000_000)
    seed: int | None = Field(
        default=None, ge=0, description="None: the planner's 0, or the client's own default"
    )

    def trace_seed(self) -> int:
        """The seed the planner's own draws take (0 unless given)."""
        return 0 if self.seed is None else self.seed


class Lengths(BaseModel):
    """Prompt and output lengths: fixed (`--prompt-len/--output-len`), ranged
    (`--len-range F`: uniform in [F x L, L]) or a workload preset's distributions."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    workload: str | None = None
    prompt_len: int | None = Field(default=None, gt=0, le=2**24)
    output_len: int | None = Field(default=None, gt=0, le=2**24)
    len_range: float | None = Field(default=None, ge=0, le=1)
    len_spread: float | None = Field(default=None, ge=0, lt=1)
    trace: str | None = None
    prompt_mean: float | None = Field(default=None, ge=1, le=2**24)
    output_mean: float | None = Field(default=None, ge=1, le=2**24)
    empty_share: float | None = Field(
        default=None,
        ge=0,
        lt=1,
        description="share of requests whose first token is EOS: no text, one engine step "
        "after the prefill (the rest stream at least one token)",
    )


# A draft forward dearer than ten target steps is no draft (its c: a draft model's step over
# the target's): above it, a typo.
MAX_DRAFT_COST = 10.0


class Speculation(BaseModel):
    """Speculative decoding in the benchmark: each sequence's draft proposes `k` tokens a step,
    each accepted with probability `alpha` (the first rejection ends the run), each draft
    forward costing `draft_cost` x a plain target step (an EAGLE head ~0.05; a draft model its
    own step over the target's)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    alpha: float = Field(ge=0, le=1)
    k: int = Field(default=4, ge=1, le=MAX_SPEC_K)
    draft_cost: float = Field(default=0.05, ge=0, le=MAX_DRAFT_COST)


def _trace(load: Load, lengths: Lengths, client: str | None = None) -> tuple[Trace, dict[str, Any]]:
    """The requests to send and a description of them. SGLang's client (`client` "sglang")
    sends its random dataset's lengths as it draws them (planner.sim.workload.
    with_sglang_random_lengths), request for request at its seed."""
    import numpy as np

    from planner.api.simulate import load_workload
    from planner.sim.workload import (
        SGLANG_BENCH_SEED,
        LengthDist,
        Workload,
        generate,
        load_trace,
        with_empty_outputs,
        with_means,
        with_sglang_random_lengths,
    )

    for flag, mean, fixed in (
        ("--prompt-mean", lengths.prompt_mean, lengths.prompt_len),
        ("--output-mean", lengths.output_mean, lengths.output_len),
    ):
        if mean is None:
            continue
        if lengths.trace is not None:
            raise InputError(flag, "rescales a generated workload; a --trace keeps its lengths")
        ranged_lengths = (lengths.len_range is not None and lengths.len_range < 1) or bool(
            lengths.len_spread
        )
        if fixed is not None and not ranged_lengths:
            if flag == "--prompt-mean":
                raise InputError(flag, "rescales a length distribution; a fixed length is its mean")
            if mean >= fixed:
                raise InputError(
                    flag, f"with --output-len, outputs stop at EOS: give a mean below {fixed}"
                )
    if lengths.trace is not None and lengths.empty_share:
        raise InputError("--empty-outputs", "draws on a generated workload; a --trace has its own")
    if lengths.trace is not None:
        from planner.sources.files import TRACE_LIMIT_BYTES, read_text

        trace = load_trace(read_text(lengths.trace, "--trace", TRACE_LIMIT_BYTES), lengths.trace)
        return trace, {"trace": lengths.trace, "requests": trace.size}
    base = load_workload(lengths.workload or "reference")
    prompt, output = base.prompt_tokens, base.output_tokens
    ratio, spread = lengths.len_range, lengths.len_spread
    if ratio is not None and spread is not None:
        raise InputError("--len-spread", "give --len-range or --len-spread, not both")
    ranged = "--len-range" if ratio is not None else "--len-spread"

    def dist(length: int | None, current: LengthDist) -> LengthDist:
        if length is None:
            if (ratio is not None or spread is not None) and lengths.workload is None:
                raise InputError(ranged, "needs --prompt-len and --output-len")
            return current
        if spread:  # vllm bench serve: uniform in [L (1 - r), L (1 + r)]
            low, high = max(1, int(length * (1 - spread))), int(length * (1 + spread))
            return LengthDist(distribution="uniform", median=length, min=low, max=high)
        if ratio is None or ratio >= 1:
            return LengthDist(distribution="fixed", median=length, min=length, max=length)
        low = max(1, int(length * ratio))
        return LengthDist(distribution="uniform", median=length, min=low, max=length)

    prompt = dist(lengths.prompt_len, prompt)
    output = dist(lengths.output_len, output)
    output_mean = lengths.output_mean
    if output.distribution == "fixed" and output_mean is not None:
        # --output-len L --output-mean M: run without --ignore-eos, stopping at EOS before L
        output = LengthDist.stopping_at_eos(output.max, output_mean)
        output_mean = None
    requests = load.requests
    if requests is None:
        requests = DEFAULT_BENCH_REQUESTS
        if load.concurrency is not None:
            requests = max(requests, REQUESTS_PER_CLIENT * load.concurrency)
    arrival: Literal["poisson", "gamma"] = "poisson"
    if load.cv is not None and load.cv != 1.0:
        arrival = "gamma"
    rate = load.rate_per_s if load.rate_per_s and math.isfinite(load.rate_per_s) else math.inf
    w = Workload(
        arrival=arrival,
        cv=load.cv or 1.0,
        rate_per_s=rate if math.isfinite(rate) else 1.0,  # unused: closed loop or all at once
        requests=requests,
        seed=load.trace_seed(),
        prompt_tokens=prompt,
        output_tokens=output,
    )
    trace = generate(w)
    # SGLang's client sends its random dataset's own draw (uniform lengths from a range ratio)
    sglang_seed = SGLANG_BENCH_SEED if load.seed is None else load.seed
    uniform = ratio is not None and ratio < 1 and output.distribution == "uniform"
    drawn = False
    if client == "sglang" and uniform and lengths.prompt_len and lengths.output_len:
        trace = with_sglang_random_lengths(
            trace, lengths.prompt_len, lengths.output_len, ratio or 0.0, sglang_seed
        )
        drawn = True
    trace = with_means(trace, lengths.prompt_mean, output_mean)
    # after the means (a one-token output is an empty one): the share asked for, else the
    # workload's own
    empty_share = base.empty_output_share if lengths.empty_share is None else lengths.empty_share
    trace = with_empty_outputs(trace, empty_share, load.trace_seed())
    if load.rate_per_s is not None and not math.isfinite(load.rate_per_s):
        trace = type(trace)(
            np.zeros(trace.size),
            trace.prompt_tokens,
            trace.output_tokens,
            trace.cached_prefix_tokens,
        )
    echo = w.model_dump(
        exclude={
            "description",
            "shared_prefix_fraction",
            "shared_prefix_tokens",
            "empty_output_share",
        }
    )
    summary = w.summary()
    if load.concurrency is not None and math.isfinite(rate):
        # paced: released at the rate, at most N in flight (vllm bench serve's semaphore)
        summary = summary.replace(" req/s,", f" req/s, at most {load.concurrency:,} in flight,", 1)
        echo["max_concurrency"] = load.concurrency
    elif load.concurrency is not None or load.rate_per_s is None or not math.isfinite(rate):
        # the arrival process is not the workload's: say only what the requests are
        summary = f"{w.requests:,} requests, " + summary.split(", ", 2)[-1]
        echo["arrival"] = "closed loop" if load.concurrency is not None else "all at t = 0"
        echo.pop("rate_per_s")
        echo.pop("cv")
    for name, mean in (("prompt", lengths.prompt_mean), ("output", output_mean)):
        if mean is not None:
            summary += f", {name}s scaled to mean {mean:g}"
            echo[f"{name}_mean"] = mean
    if empty_share:
        summary += f", {empty_share:.0%} end at their first token (no text)"
        echo["empty_output_share"] = empty_share
    if drawn:
        summary += f", the lengths sglang.bench_serving draws at --seed {sglang_seed}"
        echo["length_sampler"] = f"sglang.bench_serving --seed {sglang_seed}"
    echo["description"] = summary
    return trace, echo


class Deployment(BaseModel):
    """What a benchmark runs against: a model on a GPU under the engine's serve settings (the
    serve plan's names: engine, version, tp, pp, kv_cache_dtype, ...), laid out over data-
    parallel ranks and experts, with vLLM V0's scheduler flags and a calibration profile."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    gpu: str
    preset: str | None = None
    model: str | None = None
    revision: str | None = None
    settings: dict[str, Any] = Field(default_factory=dict)
    dp: int = 1
    ep: int | None = None
    dp_attention: bool = False
    chunked_prefill: bool | None = Field(
        default=None,
        description="vLLM V0's --enable-chunked-prefill (prefill chunks mixed into decode "
        "steps, as V1 always does); None: the release's default",
    )
    scheduler_steps: int = Field(
        default=1, description="vLLM V0's --num-scheduler-steps (multi-step scheduling)"
    )
    calibration: Calibration | None = None

    @classmethod
    def split(cls, flat: dict[str, Any]) -> tuple[Deployment, dict[str, Any]]:
        """A Deployment from its fields in a flat argument dict, and the rest of it (a
        benchmark's load, lengths, ...)."""
        where = cls(**{k: v for k, v in flat.items() if k in cls.model_fields})
        return where, {k: v for k, v in flat.items() if k not in cls.model_fields}


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
    from planner.sim.bench import DEFAULT_PERCENTILES, TEXT_TTFT_CLIENTS, bench_metrics
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
    trace, workload_echo = _trace(load, lengths, bench_client_of(engine_name, client))
    # what the client counts of an empty output (planner.sim.bench.TEXT_TTFT_CLIENTS)
    empty = {
        "empty_outputs": bool(workload_echo.get("empty_output_share")),
        "text_ttft": bench_client_of(engine_name, client) in TEXT_TTFT_CLIENTS,
    }
    spec = resolve_model(preset, model, deployment.revision)
    attention_groups = _attention_groups(
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

    def instance(tp_size: int, ep_size: int | None, groups: int = 1) -> Instance:
        """This deployment's engine instance at one TP (and EP) size; `groups` data-parallel
        attention groups (vLLM DP ranks of a MoE model, SGLang attention-DP groups)."""
        return _instance(
            replicas=dp,
            gpu=gpu,
            preset=preset,
            model=model,
            revision=deployment.revision,
            values=values | {"tp": tp_size},
            attention_groups=groups,
            spec=spec,
            longest=longest,
            ep=ep_size,
            calibration=calibration,
            scheduler_steps=scheduler_steps,
            seed=load.trace_seed(),
        )

    closed = load.concurrency
    if closed is None and (load.rate_per_s is None or not math.isfinite(load.rate_per_s)):
        closed = trace.size  # no rate (vllm bench serve's default, inf): every request at t = 0
    if disagg is not None:
        return _disaggregated(
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
    # one client process reads every replica's and DP rank's streams
    inst = with_bench_client(inst, trace, max(dp, inst.attention_groups), client)
    if speculation is not None:
        inst = with_speculation(inst, speculation)
    plan = inst.plan

    def run_at(concurrency: int | None, trace_now: Trace) -> dict[str, Any]:
        cfg = inst.cfg.model_copy(
            update={"concurrency": concurrency, "paced": paced and concurrency is not None}
        )
        trace_now, ignored = multi_step_ignored(trace_now, cfg)
        served, delay, hits = prefix_served(
            trace_now, prefix, inst, concurrency, load.rate_per_s, load.trace_seed()
        )
        run = execute(served, inst.cost, cfg, delay)
        metrics = bench_metrics(run, served, replicas=dp, percentiles=tails, **empty)
        metrics["ignored_requests"] = ignored * dp
        if hits is not None:
            metrics["prefix_cache"] = hits
        return metrics

    def share(n: int) -> int:
        return max(1, math.ceil(n / dp))

    # one replica's share (prefixes are drawn per replica: each one's cache sees its own share)
    one = trace.share(dp)
    metrics = run_at(share(closed) if closed else None, one)
    gpus = deployment_gpus(inst.engine, tp, pp, dp, inst.attention_groups)
    mean_tokens = max(1, round(mean_total))
    result: dict[str, Any] = {
        **_per_gpu(metrics, gpus),
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
        "deployment": _deployment_echo(inst, spec, dp, ep, scheduler_steps),
        "workload": workload_echo,
        "calibration": None if inst.calibrated is None else inst.calibrated.model_dump(),
        "step_ms": {
            str(b): served_step.step_ms(b, mean_tokens)
            for b in sorted({1, min(64, plan.max_num_seqs), plan.max_num_seqs})
        },
        "sweep": None,
        "speculation": _speculation_echo(speculation),
    }
    result["notes"] = _run_notes(
        inst, metrics, trace.size, mean_tokens, client, scheduler_steps, result["speculation"]
    )
    if sweep:
        points = []
        for n in sweep:
            if n < 1:
                raise InputError("--sweep", "concurrency values must be >= 1")
            requests = load.requests or max(DEFAULT_BENCH_REQUESTS // 4, REQUESTS_PER_CLIENT * n)
            swept, _ = _trace(
                load.model_copy(update={"requests": requests}),
                lengths,
                bench_client_of(engine_name, client),
            )
            point = _per_gpu(run_at(share(n), swept.share(dp)), gpus)
            points.append({"max_concurrency": n, **point})
        result["sweep"] = points
    return result


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


def _deployment_echo(
    inst: Instance, spec: ModelSpec, dp: int, ep: int | None, scheduler_steps: int
) -> dict[str, Any]:
    """The deployment as the output echoes it: the layout, the engine's resolved scheduler
    settings and pool, and the launch command its plan prints."""
    plan, p, cfg, values = inst.plan, inst.prediction, inst.cfg, inst.values
    scheduler = (
        "prefill chunks mixed into decode steps"
        if cfg.mixed
        else "prefill-only steps (decode waits)"
    )
    if scheduler_steps > 1:
        scheduler += (
            f"; multi-step: {scheduler_steps} decode steps per scheduling round "
            f"(--num-scheduler-steps {scheduler_steps})"
        )
    return {
        "model": spec.name,
        "gpu": inst.card.id,
        "engine": inst.engine,
        "engine_version": p.version,
        "tp": int(values.get("tp", 1)),
        "pp": int(values.get("pp", 1)),
        "dp": dp,
        "dp_attention": inst.attention_groups > 1,
        "ep": ep or 1,
        "weight_dtype": inst.weight_dtype,
        "kv_cache_dtype": values.get("kv_cache_dtype", "auto"),
        "max_num_seqs": plan.max_num_seqs,
        "max_num_batched_tokens": inst.budget,
        "kv_cache_tokens": p.kv_cache_tokens,
        "kv_window_tokens": window_tokens(cfg),
        "block_size": cfg.block_tokens,
        "scheduler": scheduler,
        "num_scheduler_steps": scheduler_steps,
        "command": plan.command,
        "kv_tiers": plan.kv_tiers.model_dump() if plan.kv_tiers else None,
    }


def _speculation_echo(speculation: Speculation | None) -> dict[str, Any] | None:
    """The run's speculative decoding as the output echoes it, with the tokens a step is
    expected to emit per sequence (None: no speculation)."""
    if speculation is None:
        return None
    from planner.core.speculative import expected_tokens

    tokens = expected_tokens(speculation.alpha, speculation.k)
    return speculation.model_dump() | {"expected_tokens_per_step": tokens}


def _run_notes(
    inst: Instance,
    metrics: dict[str, Any],
    requests: int,
    mean_tokens: int,
    client: str | None,
    scheduler_steps: int,
    speculation: dict[str, Any] | None,
) -> list[str]:
    """What the run's figures leave out or assume, each in one line: steps outside the
    engine's CUDA graphs, the collectives' fabric, speculation, the host's serial CPU work,
    the API server, ROCm's fp8 rescale passes and the requests multi-step rounds ignore.
    `speculation`: the run's echo of it (_speculation_echo)."""
    curve, p, engine = inst.curve, inst.prediction, inst.engine
    peak = metrics["peak_running_seqs"]
    notes = graph_coverage_notes(engine, p, peak, inst.cfg.mixed)
    notes += fabric_notes(curve, engine)
    if inst.cfg.lockstep_groups > 1:
        notes.append(lockstep_note(engine, inst.cfg.lockstep_groups))
    if speculation is not None:
        k = speculation["k"]
        notes.append(
            f"speculative decoding: each decode step verifies {k} drafts per sequence on the "
            f"step model ({speculation['expected_tokens_per_step']:.2f} tokens expected at "
            f"alpha {speculation['alpha']:g}) after {k} draft forwards of "
            f"{speculation['draft_cost']:g} x a plain step; the draft's weights and KV are not in "
            "the engine's pool here"
        )
    if curve.host_ms_per_seq:
        notes.append(
            f"vLLM {p.version} schedules each step in series with the GPU: "
            f"{curve.host_ms_per_seq * 1000:.1f} us of CPU per running sequence is added "
            "(its scheduler, its input preparation and, in V0, its sampler's outputs, "
            "measured on a CPU)"
            + (f", once per round of {scheduler_steps} steps" if scheduler_steps > 1 else "")
        )
    notes += frontend_notes(
        curve, engine, p.version, peak, mean_tokens, inst.api_server_ranks, client, scheduler_steps
    )
    if curve.dequant_bytes_per_token:
        notes.append(
            f"vLLM {p.version} on ROCm has no row-wise scaled fp8 GEMM (0.7.3 added one): this "
            "checkpoint's per-channel / per-token fp8 linears write fp32 and rescale in "
            f"separate passes, {curve.dequant_bytes_per_token / 1e6:,.1f} MB of HBM traffic "
            "per token per GPU, priced in every step"
        )
    if metrics["ignored_requests"]:
        notes.append(
            f"{metrics['ignored_requests']:,} of {requests:,} requests have prompts longer "
            f"than {inst.budget:,} tokens: vLLM V0's multi-step rounds do not chunk prompts and "
            "finish those at once with no output (the figures are the other requests'; the "
            "benchmark_serving.py of that era counts them completed with a TTFT of 0, which "
            "pulls its TTFT figures down; raise --max-num-batched-tokens to serve them)"
        )
    return notes


def frontend_notes(
    curve: StepTime,
    engine: str,
    version: str,
    peak: int,
    context: int,
    ranks: int,
    client: str | None = None,
    scheduler_steps: int = 1,
) -> list[str]:
    """What streamed the tokens at the run's peak batch where that outlasted the GPU step:
    the API server (`ranks` DP ranks sharing one) or the benchmark client, measured; an engine
    whose API server is not measured (vLLM V0), where vLLM V1's would have set the pace: the
    figures may be optimistic, and the output says so rather than borrow the number. A V0
    multi-step round (`scheduler_steps`) pays the engine's own time once, its steps shorter."""
    if not peak:
        return []
    terms = curve.terms(peak, context)
    saved_ms = curve.step_overhead_ms(peak) * (1.0 - 1.0 / scheduler_steps)
    notes = []
    if terms.frontend_ms >= terms.step_ms > 0:
        gpu_ms = curve.model_copy(
            update={"frontend_ms_per_token": 0.0, "client_ms_per_token": 0.0}
        ).step_ms(peak, context)
        if curve.client_ms_per_token > curve.frontend_ms_per_token:
            notes.append(
                f"at {peak:,} running sequences the benchmark client "
                f"({BENCH_CLIENT_NAMES[bench_client_of(engine, client)]}: one process reads "
                f"every stream) takes {terms.frontend_ms:.1f} ms to read a step's chunks "
                f"(measured on a CPU), more than the {gpu_ms:.1f} ms GPU step: the ITL, TPOT and "
                "duration it prints are its own pace (--bench-client none: the engine's)"
            )
        else:
            name, flag = api_server_label(engine)
            shared = (
                f" per DP rank, one API server streaming all {ranks} ranks' tokens ({name} "
                f"default: one unless {flag} says more)"
                if ranks > 1
                else f" {name} API server (one process unless {flag} says more)"
            )
            notes.append(
                f"at {peak:,} running sequences{shared}, "
                f"{curve.frontend_ms_per_token / ranks * 1e3:.0f} us per streamed token "
                f"(measured on a CPU), takes longer than the {gpu_ms:.1f} ms GPU step: tokens "
                "reach the clients at its pace"
            )
    per_token_ms = FRONTEND_MS_PER_TOKEN["vllm"]
    step_ms = terms.step_ms - saved_ms
    if curve.frontend_ms_per_token or peak * per_token_ms < step_ms:
        return notes
    return [
        *notes,
        f"vLLM {version}'s API server is not priced: streaming {peak:,} tokens a step would "
        f"take vLLM V1's {peak * per_token_ms:.1f} ms ({per_token_ms * 1e3:.0f} us a token, "
        f"measured), more than the {step_ms:.1f} ms step, so TPOT here may be optimistic",
    ]


def fabric_notes(curve: StepTime, engine: str, role: str = "") -> list[str]:
    """Where the collectives leave one board: a TP group spanning nodes, and wide expert
    parallelism (SGLang on NVIDIA: DeepEP's all-to-all, priced; otherwise the engine's default
    gather, its all-to-all backends not modelled)."""
    fabric, notes = curve.fabric, []
    if fabric.crosses_nodes(curve.tp):
        notes.append(
            f"{role}the TP group of {curve.tp} spans nodes ({fabric.domain_gpus} GPUs a "
            "fabric): its all-reduces run over each GPU's 400 Gb/s NIC"
        )
    ranks = curve.moe_ranks or curve.tp
    where = "across nodes" if fabric.crosses_nodes(ranks) else "over NVLink"
    if curve.moe_layers and curve.moe_all_to_all:
        overlap = (
            "half-batches overlap it with compute (--enable-two-batch-overlap)"
            if curve.overlap_all_to_all
            else "nothing overlaps it with compute (--enable-two-batch-overlap would)"
        )
        notes.append(
            f"{role}the MoE layers span {ranks} GPUs: priced as DeepEP's dispatch and combine "
            f"{where} (--moe-a2a-backend deepep, on the line); {overlap}"
        )
    elif curve.moe_layers and fabric.crosses_nodes(ranks):
        other = (
            "DeepEP through VLLM_ALL2ALL_BACKEND is not modelled"
            if engine == "vllm"
            else "--moe-a2a-backend deepep would run DeepEP on NVIDIA; AMD's MoRI backend is "
            "not modelled"
        )
        notes.append(
            f"{role}the MoE layers span {ranks} GPUs across nodes: priced as {engine}'s default "
            f"exchange, every token gathered on every rank over the NIC; {other}"
        )
    return notes


def ranks_per_api_server(engine: str, version: str | None, dp: int) -> int:
    """The data-parallel ranks one API server streams for. vLLM: all of them before 0.15
    (--api-server-count defaulted to 1), one each from 0.15 (it defaults to the DP size:
    vllm/entrypoints/cli/serve.py, read in 0.14.0 and 0.15.0; no release: the newest). SGLang:
    all of them, one TokenizerManager per server unless --tokenizer-worker-num says more."""
    from planner.core.engines.common import parse_version

    if dp < 2:
        return 1
    if engine == "sglang":
        return dp
    if engine != "vllm" or version is None:
        return 1
    return dp if parse_version(version) < VLLM_API_SERVER_PER_RANK_SINCE else 1


# vLLM's DP ranks agree on each step's token count and pad to the largest: through 0.16 whenever
# CUDA graphs are configured (v1/worker/gpu_model_runner.py: allow_dp_padding = cudagraph_mode
# != NONE, "to avoid excessive padding when running prefills" only under enforce-eager), so a
# prefill on one rank runs as many tokens on every rank; from 0.17 only when every rank's step
# runs in a CUDA graph (v1/worker/dp_utils.py: should_dp_pad = synced_cudagraph_mode != 0), which
# a long prefill does not. SGLang gathers the sum of the groups' tokens in a step that prefills
# (layers/dp_attention.py DpPaddingMode: SUM_LEN when an extend is in the batch).
VLLM_DP_UNPADDED_PREFILL_SINCE = (0, 17, 0)


def lockstep_note(engine: str, ranks: int) -> str:
    """What the simulation assumes of data-parallel ranks that step together. Their MoE
    layers meet every rank's tokens in each step, so the ranks run their steps in lockstep:
    SGLang gathers each attention-DP group's batch before every forward and runs an idle one
    where a group has none (managers/scheduler_components/dp_attn.py
    prepare_mlp_sync_batch_raw, 0.5.13; its CUDA graphs only when every group decodes); vLLM's
    DP engine cores of a MoE model run dummy steps to keep in step (v1/engine/core.py
    DPEngineCoreProc). One rank is simulated with its share of the load; the others are taken
    to be as loaded (planner.sim.engine: `SimConfig.lockstep_groups`)."""
    who = "attention-DP groups" if engine == "sglang" else "data-parallel ranks"
    return (
        f"the {ranks} {who} step together (their MoE layers meet every rank's tokens each "
        "step): one is simulated with its share of the load, and the others, as loaded, "
        "start prefills at its steady rate at random, each holding its decode step as long as "
        "a prefill step, while its own prefill steps meet their decode tokens (a closed loop "
        "of identical requests keeps them in phase: they prefill together); an expectation no "
        "run with data-parallel attention has checked"
    )


def graph_coverage_notes(
    engine: str, prediction: EnginePrediction, peak_running: int, mixed: bool
) -> list[str]:
    """Where the run leaves the engine's CUDA graphs: decode steps beyond the largest
    captured batch, and vLLM V0's steps that mix prefill chunks into decodes (V0 captured
    decode-only batches), launch every kernel from the host, which the step model (whose
    per-layer kernel cost is measured inside graphs) does not price."""
    from planner.core.engines.common import parse_version

    notes = []
    v0 = engine != "sglang" and parse_version(prediction.version) < VLLM_V1_SINCE
    if v0 and mixed:
        notes.append(
            "vLLM V0 runs the steps that mix prefill chunks into decodes without CUDA graphs "
            "(it captures decode-only batches): their host launch cost is not priced, so "
            "those steps are optimistic"
        )
    batch = graph_batch_note(engine, prediction, peak_running, v0)
    return notes + ([batch] if batch else [])


def graph_batch_note(
    engine: str, prediction: EnginePrediction, peak_running: int, v0: bool
) -> str | None:
    """Where the simulated batch outgrew the largest one the engine captures a graph for."""
    settings = prediction.settings
    if engine == "sglang":
        largest = int(str(settings.get("cuda_graph_max_bs_decode") or 0))
        flag = "--cuda-graph-max-bs"
    elif v0:
        largest, flag = VLLM_V0_GRAPH_MAX_BATCH, "its fixed capture list"
    else:
        largest, flag = prediction.graph_max_batch or 0, "--max-cudagraph-capture-size"
    if not largest or peak_running <= largest:
        return None
    return (
        f"up to {peak_running:,} sequences ran at once, past the {largest:,} the engine "
        f"captures CUDA graphs for ({flag}): decode steps above it launch every kernel from "
        "the host, a cost the step model does not price; those steps are optimistic"
    )


def multi_step_ignored(trace: Trace, cfg: SimConfig) -> tuple[Trace, int]:
    """The requests vLLM V0 serves under multi-step scheduling, and how many it ignores. Its
    rounds do not chunk prompts: a prompt longer than min(max_model_len,
    max_num_batched_tokens) is finished at once with no output (vllm/core/scheduler.py 0.6.3,
    _get_prompt_limit, FINISHED_IGNORED). It takes no engine time, so the rest run as if it
    were not sent; the figures are the served requests'. Clients count one differently: the
    benchmark_serving.py of that era (vLLM 0.6.3 benchmarks/backend_request_func.py) times
    the first token only on a chunk with text, so it counts the request completed with no
    output and a TTFT of 0; `vllm bench serve` (0.33 benchmarks/lib/endpoint_request_func.py)
    times it at its finishing chunk."""
    if not (cfg.whole_prompts and cfg.scheduler_steps > 1):
        return trace, 0
    keep = trace.prompt_tokens <= cfg.step_token_budget
    ignored = int(trace.size - keep.sum())
    if ignored == trace.size:
        raise InputError(
            "--max-num-batched-tokens",
            f"{cfg.step_token_budget:,}: vLLM V0's multi-step rounds do not chunk prompts and "
            "ignore every prompt longer than that (finished with no output): all of these are",
        )
    return (trace.subset(keep) if ignored else trace), ignored


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
    per_token = p.bytes_per_block // inst.cfg.block_tokens
    own = float((trace.prompt_tokens + trace.output_tokens).mean())
    if concurrency is None:
        out_mean = float(trace.output_tokens.mean())
        step_s = curve.step_ms(plan.max_num_seqs, 1) / 1e3
        concurrency = math.ceil((rate_per_s or 0.0) * out_mean * step_s)
    running = min(plan.max_num_seqs, max(1, concurrency))
    room = max(0, p.kv_cache_tokens - math.ceil(running * own))
    served, delay, hits = with_tiers(
        trace,
        prefix,
        gpu_room_tokens=room,
        cpu_tier_tokens=cpu_tokens,
        kv_bytes_per_token=per_token,
        host_link_bytes_per_s=host_link_bytes_per_s(inst.card),
        seed=seed,
    )
    return served, delay, hits.model_dump()


def window_tokens(cfg: SimConfig) -> int | None:
    """The sliding-window pool's tokens where the engine keeps one (SGLang, hybrid SWA)."""
    return None if cfg.window_pool is None else int(cfg.window_pool.tokens)


def step_constants(curve: StepTime, calibrated: StepCalibration | None) -> dict[str, str]:
    """Where the step model's constants for this card come from: its GPU family's, fitted on
    measured step times or extrapolated from other families, or the user's calibration."""
    family = curve.family
    if calibrated is not None:
        return {
            "gpu_family": family.name if family else "given",
            "basis": "calibrated",
            "source": "by planner calibrate --bench on your own results",
        }
    if family is None:
        return {"gpu_family": "given", "basis": "given", "source": "by the caller"}
    return {"gpu_family": family.name, "basis": family.basis, "source": family.source}


def engine_scheduler(
    engine: str, version: tuple[int, int, int], chunked_prefill: bool
) -> tuple[bool, ReserveAdmission | None]:
    """How the engine's scheduler runs: whether prompts share steps with decodes (vLLM V1,
    chunked or not; V0 with chunked prefill on, `chunked_prefill` being the plan's resolved
    value), and SGLang's reserve admission (None for vLLM)."""
    from planner.sim.engine import ReserveAdmission

    mixed = engine == "vllm" and (version >= VLLM_V1_SINCE or chunked_prefill)
    if engine != "sglang":
        return mixed, None
    return mixed, ReserveAdmission(
        init_ratio=SGLANG_INIT_NEW_TOKEN_RATIO,
        min_ratio=SGLANG_INIT_NEW_TOKEN_RATIO * SGLANG_MIN_NEW_TOKEN_RATIO_FACTOR,
        decay_steps=SGLANG_NEW_TOKEN_RATIO_DECAY_STEPS,
        retract_steps=SGLANG_RETRACT_DECODE_STEPS,
        keep_steps=1
        if version >= SGLANG_RETRACT_TO_NEXT_STEP_SINCE
        else SGLANG_RETRACT_DECODE_STEPS,
        clip_tokens=SGLANG_CLIP_MAX_NEW_TOKENS,
    )


def check_scheduler_steps(steps: int, engine: str, version: tuple[int, int, int]) -> None:
    """Refuse --num-scheduler-steps where the engine has no multi-step scheduling: it is vLLM
    V0's, from 0.6.0 (vLLM v0.6.0 release notes) until V1 became the default in 0.8.0."""
    from planner.sim.engine import MAX_MULTI_STEP

    if steps == 1:
        return
    flag = "--num-scheduler-steps"
    if not 1 <= steps <= MAX_MULTI_STEP:
        raise InputError(flag, f"must be in [1, {MAX_MULTI_STEP}] (got {steps})")
    if engine != "vllm":
        raise InputError(flag, f"multi-step scheduling is vLLM V0's; {engine} has none")
    shown = ".".join(map(str, version))
    if version < VLLM_MULTI_STEP_SINCE:
        raise InputError(flag, f"vLLM {shown} predates multi-step scheduling (0.6.0)")
    if version >= VLLM_V1_SINCE:
        raise InputError(
            flag,
            f"vLLM {shown} runs the V1 engine, which has no multi-step scheduling "
            "(V0 releases 0.6.0-0.7.x: --engine-version)",
        )


class WouldNotStart(PlannerError):
    """The engine refuses the instance's settings; `reasons` says why, as the plan does."""

    def __init__(self, reasons: list[str], lead: str = "the engine would not start") -> None:
        self.reasons = reasons
        super().__init__(f"{lead}: " + "; ".join(reasons))


class CannotServe(WouldNotStart):
    """The engine starts, but refuses requests of the workload (SGLang's length cap)."""

    def __init__(self, reasons: list[str]) -> None:
        super().__init__(reasons, "the engine starts but cannot serve the workload")


@dataclass(frozen=True)
class Instance:
    """One engine instance of the deployment: its plan, step model and scheduler settings."""

    plan: ServePlan
    payload: dict[str, Any]
    prediction: EnginePrediction  # its plan's
    attention_groups: int  # data-parallel attention groups it runs (the engine's own for SGLang)
    api_server_ranks: int  # data-parallel ranks whose tokens its API server streams
    curve: StepTime
    cost: CurveCost
    cfg: SimConfig  # without the load (its block and scheduler)
    engine: str
    budget: int
    calibrated: StepCalibration | None
    weight_dtype: str
    card: GpuSpec
    values: dict[str, Any]  # the serve settings its plan was made with (the line's)


# How the output names each benchmark client.
BENCH_CLIENT_NAMES = {
    "vllm": "vllm bench serve, or any client of the OpenAI stream",
    "sglang": "sglang.bench_serving on SGLang's native stream",
    "vllm-2024": "vLLM's 2024 benchmark_serving.py on the OpenAI stream",
}


def bench_client_of(engine: str, client: str | None) -> str:
    """The benchmark client a run is read by: the one named, else the engine's own."""
    return client or (engine if engine in BENCH_CLIENT_MS_PER_CHUNK else "vllm")


def with_bench_client(
    inst: Instance, trace: Trace, streams: int, client: str | None, sends: bool = True
) -> Instance:
    """The instance as the benchmark client sees it (`client`; None: the engine's own): that
    one process reads the streams of `streams` schedulers stepping side by side, each chunk at
    its measured time for the run's mean length already generated (SGLang's native chunks
    carry the whole output so far), and (`sends`: the requests reach this instance from the
    client) sends every request, in series with the API server's admission of it."""
    from planner.sim.engine import CurveCost

    client = bench_client_of(inst.engine, client)
    if client == "none":
        return inst
    if sends and inst.cfg.front_door is not None:
        door = inst.cfg.front_door.model_copy(update={"client_ms": BENCH_CLIENT_MS_PER_REQUEST})
        inst = replace(inst, cfg=inst.cfg.model_copy(update={"front_door": door}))
    out = trace.output_tokens.astype(float)
    mean_generated = float((out * (out + 1) / 2).sum() / max(out.sum(), 1.0))
    per_chunk_ms = bench_client_ms_per_chunk(client, mean_generated) * streams
    curve = inst.curve.model_copy(update={"client_ms_per_token": per_chunk_ms})
    return replace(inst, curve=curve, cost=CurveCost(curve, inst.cost.source))


def with_speculation(inst: Instance, speculation: Speculation) -> Instance:
    """The instance running speculative decoding: its scheduler draws each sequence's accepted
    drafts, and every decode step costs the target's verification of k drafts per sequence
    (planner.core.spec_load.verify_ms) plus k draft forwards (V0's multi-step rounds, which do
    not speculate, are refused by the simulator's own check)."""
    from planner.sim.engine import CurveCost

    cfg = inst.cfg.model_copy(
        update={
            "spec_alpha": speculation.alpha,
            "spec_k": speculation.k,
            "spec_draft_cost": speculation.draft_cost,
            # V0 turns async output processing off under speculative decoding
            "outputs_one_step_late": False,
        }
    )
    cost = CurveCost(
        inst.curve,
        f"{inst.cost.source}, verifying {speculation.k} drafts a step",
        spec_k=speculation.k,
        spec_draft_cost=speculation.draft_cost,
    )
    return replace(inst, cfg=cfg, cost=cost)


def _instance(
    *,
    gpu: str,
    preset: str | None,
    model: str | None,
    revision: str | None,
    values: dict[str, Any],
    spec: ModelSpec,
    longest: int,
    ep: int | None,
    calibration: Calibration | None,
    seed: int,
    scheduler_steps: int = 1,
    as_launched: bool = True,
    attention_groups: int = 1,
    replicas: int = 1,
    gpu_memory_gib: float | None = None,
) -> Instance:
    """Plan one engine instance and build its step model and scheduler settings. As launched
    (a benchmark's server) it runs the engine's own running cap unless `values` sets
    max_num_seqs; otherwise the plan's advised max_num_seqs.

    `attention_groups` > 1: the instance is one of that many data-parallel attention groups
    whose tokens meet in the MoE layers (vLLM --data-parallel-size on a MoE model: one DP rank
    at TP `tp`; SGLang data-parallel attention: `tp` GPUs, the group's attention on
    tp / groups of them). Its scheduler, KV pool and running cap are the group's.
    `replicas`: the deployment's data-parallel ranks beside the groups (vLLM
    --data-parallel-size on a dense model); with the groups, they say how many ranks' tokens one
    API server streams (each rank's step lasts at least their streaming). `gpu_memory_gib`: the
    memory to plan against where the user gave it (capacity's --gpu-memory-gib)."""
    from planner.core.engines.common import parse_version
    from planner.sim.engine import CurveCost
    from planner.sources.presets import find_gpu

    engine_name = str(values.get("engine", "vllm"))
    # the line says so: the DP ranks or attention groups, and the expert parallelism
    values = dict(values)
    extra = dict(values.get("extra") or {})
    extra |= layout_fields(engine_name, attention_groups, ep if spec.num_experts else None)
    if extra:
        values["extra"] = extra
    plan, payload, attention_groups = _launched_plan(
        values,
        spec,
        attention_groups,
        scheduler_steps,
        as_launched,
        source={"gpu": gpu, "preset": preset, "model": model, "revision": revision},
        gpu_memory_gib=gpu_memory_gib,
    )
    p = started(plan)
    _check_serves(plan, values, longest)
    engine = plan.engine
    version = parse_version(p.version)
    card = find_gpu(gpu)
    variant = values.get("weight_dtype")
    weight_dtype = (
        str(payload["model"]["weight_dtype"]) if variant is None else str(variant).lower()
    )
    sglang_groups = ranks_share_tp(engine_name) and attention_groups > 1
    curve = _instance_curve(
        spec, card, plan, payload, values, weight_dtype, attention_groups, sglang_groups, ep
    )
    # the ranks one API server streams for: the groups this instance resolved, or the replicas
    api_ranks = ranks_per_api_server(engine, p.version, max(replicas, attention_groups))
    if api_ranks > 1:
        streamed = curve.frontend_ms_per_token * api_ranks
        curve = curve.model_copy(update={"frontend_ms_per_token": streamed})
    calibrated = None
    if calibration is not None:
        tp = int(values.get("tp", 1))
        calibrated = check_step_calibration(calibration, engine, card.id, spec.name, tp)
        curve = apply_step_calibration(curve, calibrated)
    check_scheduler_steps(scheduler_steps, engine, version)
    cfg, budget = _scheduler_config(plan, longest, seed, scheduler_steps, sglang_groups)
    if spec.num_experts and attention_groups > 1:  # the ranks meet in every MoE layer
        cfg = cfg.model_copy(
            update={
                "lockstep_groups": attention_groups,
                "lockstep_padded": engine == "vllm" and version < VLLM_DP_UNPADDED_PREFILL_SINCE,
            }
        )
    return Instance(
        plan=plan,
        payload=payload,
        prediction=p,
        attention_groups=attention_groups,
        api_server_ranks=api_ranks,
        curve=curve,
        cost=CurveCost(curve, f"step-time model: {curve.label}"),
        cfg=cfg,
        engine=engine,
        budget=budget,
        calibrated=calibrated,
        weight_dtype=weight_dtype,
        card=card,
        values=values,
    )


def _launched_plan(
    values: dict[str, Any],
    spec: ModelSpec,
    attention_groups: int,
    scheduler_steps: int,
    as_launched: bool,
    source: dict[str, Any],
    gpu_memory_gib: float | None,
) -> tuple[ServePlan, dict[str, Any], int]:
    """The serve plan of the instance as it is launched, its payload and the attention-DP
    groups it runs. `values` (updated in place) gains what the launch pins: the engine's own
    running cap where a benchmark's server runs it (with the memory fraction the line pins),
    and V0 multi-step's budget. Raises WouldNotStart where the engine refuses the settings."""
    from planner.api.capacity import pinned_memory_fraction, serve_report

    engine_name = str(values.get("engine", "vllm"))
    sglang_groups = ranks_share_tp(engine_name) and attention_groups > 1

    def replan() -> tuple[ServePlan, dict[str, Any]]:
        return serve_report(**source, gpu_memory_gib=gpu_memory_gib, settings=values, spec=spec)

    plan, payload = replan()
    if engine_name == "sglang" and plan.prediction is not None:
        # the attention-DP groups the server runs: the flag's, or those it sets by itself
        attention_groups = int(str(plan.prediction.settings.get("attn_dp_size", 1)))
        sglang_groups = attention_groups > 1
    if (
        as_launched
        and plan.fits
        and values.get("max_num_seqs") is None
        and plan.cap > plan.max_num_seqs
    ):
        # A benchmark runs the server as launched: the engine's own running cap, with the KV
        # pool deciding preemption (the plan's smaller max_num_seqs is advice, not the default).
        # (SGLang's flag is the deployment's: each attention group runs the cap it computes;
        # its memory fraction stays the one the line pins, as SGLang's heuristic would size a
        # decode instance's reserve by the running cap)
        values["max_num_seqs"] = plan.cap * (attention_groups if sglang_groups else 1)
        if values.get("memory_fraction") is None:
            values["memory_fraction"] = pinned_memory_fraction(plan)
        plan, payload = replan()
    if (
        scheduler_steps > 1
        and plan.prediction is not None
        and values.get("max_num_batched_tokens") is None
        and plan.prediction.settings.get("enable_chunked_prefill") is True
    ):
        # V0's multi-step rounds with chunked prefill default the budget to the context
        from planner.core.engines.vllm import V0_MIN_BATCHED_TOKENS

        context = int(str(plan.prediction.settings["max_model_len"]))
        values["max_num_batched_tokens"] = max(context, V0_MIN_BATCHED_TOKENS)
        plan, payload = replan()
    if not plan.fits:
        raise WouldNotStart(list(plan.reasons))
    started(plan)
    return plan, payload, attention_groups


def started(plan: ServePlan) -> EnginePrediction:
    """The engine's own figures of a plan that starts (every instance simulated has them)."""
    if plan.prediction is None:
        raise WouldNotStart(list(plan.reasons) or ["the engine model has no figures for it"])
    return plan.prediction


def _check_serves(plan: ServePlan, values: dict[str, Any], longest: int) -> None:
    """Refuse an instance that starts but cannot hold the run's longest request: SGLang's
    pool (or its sliding-window pool) smaller than it, vLLM's auto-fitted context shorter."""
    from planner.core.engines.sglang import SWA_FULL_TOKENS_RATIO

    p = started(plan)
    if plan.engine == "sglang" and longest > p.kv_cache_tokens - 1:
        # SGLang starts with a pool smaller than the context but caps requests at it
        raise CannotServe(
            [
                f"requests of up to {longest:,} tokens, and SGLang's pool of "
                f"{p.kv_cache_tokens:,} tokens refuses or truncates those past "
                f"{p.kv_cache_tokens - 1:,}"
            ]
        )
    if values.get("max_model_len_auto"):
        fitted = int(str(p.settings["max_model_len"]))
        if fitted < longest:
            raise InputError(
                "--context",
                f"auto fits {fitted:,} tokens, shorter than the longest request ({longest:,} "
                "tokens): vLLM refuses those",
            )
    window = _window_pool(p)
    if window is not None and longest > window.tokens:
        raise CannotServe(
            [
                f"requests of up to {longest:,} tokens, and SGLang's sliding-window pool of "
                f"{window.tokens:,} tokens ({SWA_FULL_TOKENS_RATIO} of the full pool's) "
                "cannot hold one whole"
            ]
        )


def _window_pool(p: EnginePrediction) -> WindowPool | None:
    """SGLang's sliding-window pool where the prediction keeps one (hybrid SWA), else None."""
    from planner.sim.engine import WindowPool

    if not p.settings.get("swa_max_total_num_tokens"):
        return None
    block = int(str(p.settings["page_size"]))
    span = int(str(p.settings["sliding_window_size"]))
    return WindowPool(
        tokens=int(str(p.settings["swa_max_total_num_tokens"])),
        window=span,
        page=min(block, span),
    )


def _instance_curve(
    spec: ModelSpec,
    card: GpuSpec,
    plan: ServePlan,
    payload: dict[str, Any],
    values: dict[str, Any],
    weight_dtype: str,
    attention_groups: int,
    sglang_groups: bool,
    ep: int | None,
) -> StepTime:
    """The instance's step model: its ranks' weights as the step streams them, the KV dtype
    the engine resolved, and the exchange and expert split its plan's line runs."""
    from planner.core.engines.common import parse_version
    from planner.core.step import step_time_for
    from planner.units import dtype_bytes

    p, engine = started(plan), plan.engine
    tp = int(values.get("tp", 1))
    pp = int(values.get("pp", 1))
    groups = attention_groups if spec.num_experts else 1  # dense: DP ranks are replicas
    # the ranks' weights as the step streams them: without the RoPE cache each one holds whole
    whole = (p.weights_bytes - p.rope_cache_bytes) * tp * pp
    if groups > 1:  # the ranks' weights are not 1/TP of the model: the whole as loaded
        whole = int(payload["model"]["loaded_weights_bytes"])
    return step_time_for(
        spec,
        card,
        tp=tp // attention_groups if sglang_groups else tp,
        weights_bytes=whole,
        weight_dtype=weight_dtype,
        # the KV dtype the engine resolved (SGLang runs DeepSeek's sparse attention in fp8 on
        # Blackwell whatever `auto` would say)
        kv_dtype_bytes=dtype_bytes(p.kv_dtype),
        engine=engine,
        version=parse_version(p.version),
        pp=pp,
        attention_dp=groups,
        # the exchange and expert split the plan's line runs (SGLang: DeepEP as it says)
        all_to_all=p.settings.get("moe_a2a_backend") == "deepep" if engine == "sglang" else None,
        expert_ranks=ep if ep is not None and ep > 1 else None,
        redundant_experts=int(str(p.settings.get("ep_num_redundant_experts") or 0)),
        two_batch_overlap=bool(p.settings.get("enable_two_batch_overlap")),
    )


def _scheduler_config(
    plan: ServePlan, longest: int, seed: int, scheduler_steps: int, sglang_groups: bool
) -> tuple[SimConfig, int]:
    """The simulator's settings for the engine's scheduler as the plan resolves it (its running
    cap, token budget, KV pool and admission), and the token budget a step runs."""
    from planner.core.engines.common import parse_version
    from planner.sim.door import FrontDoor
    from planner.sim.engine import SimConfig

    p, engine = started(plan), plan.engine
    version = parse_version(p.version)
    vllm_engine = engine == "vllm"
    block = int(str(p.settings["block_size" if vllm_engine else "page_size"]))
    # SGLang: each attention-DP group's share of the chunked-prefill size, as the server runs it
    budget = int(
        str(p.settings["max_num_batched_tokens" if vllm_engine else "chunked_prefill_per_group"])
    )
    if budget <= 0:  # SGLang's -1 turns chunking off: one prompt at a time, whole
        budget = longest
    # vLLM's resolved chunked prefill (the flag, else the release's default for this
    # max_model_len); without it, or in V0's multi-step rounds, prompts are not split
    chunked = bool(p.settings.get("enable_chunked_prefill", True)) if vllm_engine else True
    mixed, reserve = engine_scheduler(engine, version, chunked)
    if sglang_groups and reserve is not None:
        scale = SGLANG_DP_ATTENTION_CONSERVATIVENESS
        reserve = reserve.model_copy(
            update={
                "init_ratio": reserve.init_ratio * scale,
                "min_ratio": reserve.min_ratio * scale,
            }
        )
    if scheduler_steps > 1 and mixed and version < VLLM_MULTI_STEP_CHUNKED_SINCE:
        raise InputError(
            "--num-scheduler-steps",
            f"vLLM {'.'.join(map(str, version))} predates multi-step scheduling with chunked "
            "prefill (0.6.3); pose it with --no-enable-chunked-prefill",
        )
    server_ms, server_ms_per_token = api_server_ms_per_request(engine, version)
    cfg = SimConfig(
        policy="chunked",
        request_path_ms=REQUEST_PATH_MS,
        front_door=FrontDoor(server_ms=server_ms, server_ms_per_prompt_token=server_ms_per_token),
        max_batch=plan.max_num_seqs,
        # vLLM refuses a token budget below max_num_seqs; SGLang's prefill step runs alone,
        # its chunk the whole budget (managers/schedule_policy.py PrefillAdder:
        # rem_chunk_tokens, 0.5.13), however many requests it runs
        step_token_budget=max(budget, plan.max_num_seqs) if vllm_engine else budget,
        chunk_tokens=max(budget, plan.max_num_seqs) if vllm_engine else budget,
        kv_blocks=max(1, p.kv_cache_tokens // block),
        block_tokens=block,
        mixed=mixed,
        reserve=reserve,
        window_pool=_window_pool(p),
        seed=seed,
        scheduler_steps=scheduler_steps,
        whole_prompts=vllm_engine and (not chunked or scheduler_steps > 1),
        # V1 allocates KV for the tokens it schedules; V0's can_allocate took the whole prompt
        admit_chunk=vllm_engine and chunked and version >= VLLM_V1_SINCE,
        admit_headroom_blocks=(
            int(VLLM_V0_WATERMARK * p.kv_cache_tokens // block)
            if vllm_engine and version < VLLM_V1_SINCE
            else 0
        ),
        outputs_one_step_late=(
            vllm_engine
            and VLLM_ASYNC_OUTPUT_SINCE <= version < VLLM_V1_SINCE
            and int(str(p.settings.get("pipeline_parallel_size", 1))) == 1
        ),
    )
    return cfg, budget


def pd_command(
    values: dict[str, Any],
    plan: ServePlan,
    role: Literal["prefill", "decode"],
    *,
    gpu: str,
    preset: str | None,
    model: str | None,
    spec: ModelSpec,
    backend: str | None = None,
) -> str:
    """A disaggregated pool's serve line: the pool as planned (`values`, `plan`), with its
    role's flags (SGLang --disaggregation-mode with its transfer `backend`, Mooncake unless
    named; vLLM --kv-transfer-config with the NIXL connector, each instance both sending and
    receiving) and the memory fraction its plan ran with pinned, so the line starts the pool
    simulated."""
    import json

    from planner.api.capacity import pinned_memory_fraction, serve_report
    from planner.core.disagg import VLLM_PD_CONNECTOR, DisaggRole

    if values.get("engine") == "sglang":
        flags = DisaggRole(mode=role, transfer_backend=backend or "mooncake")
    else:
        flags = DisaggRole(kv_transfer_config=json.dumps(VLLM_PD_CONNECTOR, separators=(",", ":")))
    pinned = values | {"disagg": flags, "memory_fraction": pinned_memory_fraction(plan)}
    made, _ = serve_report(
        gpu=gpu, preset=preset, model=model, revision=None, gpu_memory_gib=None,
        settings=pinned, spec=spec,
    )  # fmt: skip
    return str(made.command)


def pd_router(engine: str, prefill: int, decode: int) -> str:
    """What fronts the pools: SGLang's router in PD mode over every instance, or for vLLM a
    prefill/decode-aware router."""
    if engine == "sglang":
        return "python -m sglang_router.launch_router --pd-disaggregation " + " ".join(
            [f"--prefill http://prefill-{i}:30000" for i in range(prefill)]
            + [f"--decode http://decode-{i}:30000" for i in range(decode)]
        )
    return "a prefill/decode-aware router (llm-d or Dynamo) in front of both pools"


def check_ep(ep: int | None, engine: str, tp: int, groups: int) -> None:
    """--ep is 1 or the ranks the engine's MoE layers span for this layout (refused else)."""
    span = moe_ranks(engine, tp, groups)
    if ep is not None and ep not in (1, span):
        raise InputError("--ep", f"{ep}: the engine's expert parallelism spans {span} ranks here")


def deployment_instance(where: Deployment, longest: int | None = None) -> tuple[Instance, int]:
    """One engine instance of a deployment exactly as `simulate` plans it (serve plan, step
    model, scheduler), for commands that ask about its step time without a load (`slo`,
    `spec`), and the number of data-parallel attention groups it is one of (1: none).
    `longest`: the longest request it must serve (default: its context; 1 where only the step
    matters)."""
    from planner.api.capacity import DEFAULT_CONTEXT_TOKENS
    from planner.sources.models import resolve_model

    if where.dp < 1:
        raise InputError("--dp", f"must be >= 1 (got {where.dp})")
    spec = resolve_model(where.preset, where.model, where.revision)
    settings = where.settings
    engine = str(settings.get("engine", "vllm"))
    tp = int(settings.get("tp", 1))
    groups = _attention_groups(
        engine,
        tp,
        where.dp,
        where.dp_attention,
        moe=bool(spec.num_experts),
        version=settings.get("version"),
    )
    check_ep(where.ep, engine, tp, groups)
    values = dict(settings)
    values.setdefault("context_tokens", min(DEFAULT_CONTEXT_TOKENS, spec.max_context_tokens))
    inst = _instance(
        gpu=where.gpu,
        preset=where.preset,
        model=where.model,
        revision=where.revision,
        values=values,
        spec=spec,
        longest=int(values["context_tokens"]) if longest is None else longest,
        ep=where.ep,
        calibration=where.calibration,
        seed=0,
        as_launched=False,
        attention_groups=groups,
        replicas=where.dp,
    )
    return inst, groups


def line_instance(
    *,
    gpu: str,
    preset: str | None,
    model: str | None,
    revision: str | None,
    gpu_memory_gib: float | None,
    settings: dict[str, Any],
    spec: ModelSpec,
    calibration: Calibration | None,
) -> Instance | None:
    """The engine instance `simulate` and `slo` plan for a serve line's settings, its layout
    read from the line's own fields (capacity's --dp / --dp-attention / --ep: PP stages,
    data-parallel ranks or attention groups, expert parallelism) and a profile's step terms
    applied: the step `capacity --tpot`, `--spec-alpha` and `diagnose --plan` price. None where
    it would not start: the plan then says why."""
    from planner.api.capacity import DEFAULT_CONTEXT_TOKENS

    values = dict(settings)
    values.setdefault("context_tokens", min(DEFAULT_CONTEXT_TOKENS, spec.max_context_tokens))
    engine = str(values.get("engine", "vllm"))
    tp = int(values.get("tp", 1))
    dp, split, ep, spans = fields_layout(engine, dict(values.get("extra") or {}))
    groups = _attention_groups(
        engine,
        tp,
        dp,
        split,
        moe=bool(spec.num_experts),
        version=values.get("version"),
        flag="--dp-attention",
    )
    if spans:  # vLLM's --enable-expert-parallel: the experts span the layout's MoE ranks
        ep = moe_ranks(engine, tp, groups)
    profile = calibration if calibration is not None and calibration.step is not None else None
    try:
        return _instance(
            gpu=gpu,
            preset=preset,
            model=model,
            revision=revision,
            values=values,
            spec=spec,
            longest=1,  # no workload: only the step matters
            ep=ep,
            calibration=profile,
            seed=0,
            as_launched=False,
            attention_groups=groups,
            replicas=dp,
            gpu_memory_gib=gpu_memory_gib,
        )
    except WouldNotStart:
        return None


def _attention_groups(
    engine: str,
    tp: int,
    dp: int,
    dp_attention: bool,
    *,
    moe: bool,
    version: str | None,
    flag: str = "--dp-attention",
) -> int:
    """Data-parallel attention groups of one deployment (1: none; DP ranks are then whole
    replicas). vLLM runs a MoE model's --data-parallel-size ranks that way on its own, from the
    V1 engine (0.8.0, VLLM_V1_SINCE) whose DP ranks synchronize in the expert layers; a dense
    model's DP ranks are replicas. --dp-attention names SGLang's --enable-dp-attention /
    --attn-dp-size, whose groups divide its TP size."""
    from planner.core.engines.common import parse_version

    if not dp_attention:
        if engine != "vllm" or not moe or dp < 2:
            return 1
        newest = version is None or parse_version(version) >= VLLM_V1_SINCE
        return dp if newest else 1
    if engine == "vllm":
        raise InputError(
            flag,
            "is SGLang's; vLLM runs a MoE model's --dp ranks as attention DP by itself, each "
            "rank a --tp group (GPUs = TP x DP: --tp 1 --dp 8 for eight one-GPU groups)",
        )
    if dp < 2:
        raise InputError(
            flag,
            f"needs --dp N, 2 or more attention-DP groups that divide --tp {tp} (SGLang's "
            f"--dp N --enable-dp-attention; e.g. --dp {tp})",
        )
    if tp % dp:
        raise InputError(flag, f"needs groups that divide the TP size {tp} (got --dp {dp})")
    if not moe:
        raise InputError(flag, "is modelled for MoE models (attention DP, experts over all GPUs)")
    return dp


# KV transfer between the pools: within one fabric over the GPUs' own links (NVLink through
# NVSwitch at the full rate, one xGMI link between two MI300X-class GPUs), across nodes over
# each GPU's RDMA NIC (planner.core.step.comm.Fabric). SGLang's default transfer backend,
# Mooncake, moves KV over RDMA even between GPUs of one node (MOONCAKE_PROTOCOL defaults to
# "rdma", python/sglang/srt/environ.py, read in 0.5.13; its NVLink pools are opt-in); vLLM's
# NIXL connector rides NVLink inside a node (UCX's CUDA IPC).
# Per request, beside the bytes: the hand-off from the prefill instance to the decode
# instance until the decode instance emits the first token, by engine.
# SGLang: the router's hop to both servers, the decode server's own tokenization, the
# bootstrap handshake (the decode server pre-allocates KV and sends its indices before the
# prefill server may run the request) and the queues each scheduler polls once per event-loop
# iteration (bootstrap, transfer, prebuilt batch): 52 ms, measured as the median excess of
# TTFT over prefill + transfer + one request path on the 15 rows of dstack's 8 x H200
# gpt-oss-120b SGLang 1P1D-3P1D sweep at 32 clients with prompts up to 2,048 tokens
# (benchmarks/data/e2e.jsonl, 2025-09; 46-90 ms where prefill does not queue).
# vLLM: the proxy sends the decode instance a request of its own (one more request path,
# REQUEST_PATH_MS) after the prefill instance answers, plus the connector's setup: an
# estimate of 1 ms until a measurement replaces it.
SGLANG_PD_HANDOFF_MS = 52.0
DISAGG_TRANSFER_SETUP_MS = 1.0


def disagg_handoff_ms(engine: str) -> float:
    """The per-request hand-off between the pools beside the KV bytes, ms."""
    if engine == "sglang":
        return SGLANG_PD_HANDOFF_MS
    return REQUEST_PATH_MS + DISAGG_TRANSFER_SETUP_MS


def transfer_plan(
    spec: ModelSpec, prompt_tokens: NDArray[np.int64], kv_dtype_bytes: int, prefill_tp: int,
    decode_tp: int, link: str | None, gpus: int, card: GpuSpec, engine: str,
    backend: str | None = None,
) -> tuple[NDArray[np.float64], dict[str, Any]]:  # fmt: skip
    """Per-request KV transfer time (ms) from the prefill pool to the decode pool, and how it
    was priced. Bytes: the prompt's KV, one copy (all layers: K and V of every KV head, or the
    MLA latent); GQA heads are sharded over the ranks and move in parallel, an MLA latent is
    whole on every rank, so one rank's copy sets the time. The engine's hand-off
    (disagg_handoff_ms) is added to every request."""
    import numpy as np

    from planner.core.kv import kv_bytes_per_token
    from planner.core.specs import KvKind
    from planner.core.step.comm import fabric_of

    per_token = kv_bytes_per_token(spec, 1, kv_dtype_bytes)
    mla = any(g.kind is KvKind.MLA for g in spec.kv_groups)
    parallel = 1 if mla else max(1, min(prefill_tp, decode_tp, spec.num_kv_heads or 1))
    fabric = fabric_of(card)
    # SGLang's backends other than NIXL (Mooncake by default) move KV over RDMA in a node too
    rdma_in_node = engine == "sglang" and backend != "nixl"
    default = "rdma" if fabric.crosses_nodes(gpus) or rdma_in_node else "nvlink"
    where = link or default
    if where not in ("nvlink", "rdma"):
        raise InputError("--disagg-link", f"{link!r}; accepted: nvlink, rdma")
    rate = fabric.peer_bytes_per_s() if where == "nvlink" else fabric.nic_bytes_per_s
    bytes_ = np.asarray(prompt_tokens, dtype=np.float64) * per_token
    setup = disagg_handoff_ms(engine)
    ms = bytes_ / (rate * parallel) * 1e3 + setup
    return ms, {
        "kv_bytes_per_token": per_token,
        "link": where,
        "link_bytes_per_s": rate,
        "parallel_ranks": parallel,
        "setup_ms": setup,
    }


def decode_pool_config(dec: Instance) -> SimConfig:
    """A decode instance's scheduler settings: the engine's, except that SGLang's decode
    instance admits on its flat per-request reserve (SGLANG_PD_RESERVED_DECODE_TOKENS), not
    the new-token ratio of an aggregated server."""
    cfg = dec.cfg
    if dec.engine != "sglang" or cfg.reserve is None:
        return cfg
    flat = cfg.reserve.model_copy(
        update={
            "flat_tokens": SGLANG_PD_RESERVED_DECODE_TOKENS,
            "init_ratio": 0.0,
            "min_ratio": 0.0,
        }
    )
    return cfg.model_copy(update={"reserve": flat})


def run_pools(
    spec: ModelSpec, trace: Trace, layout: DisaggLayout, pre: Instance, dec: Instance,
    link: str | None, concurrency: int | None, backend: str | None = None,
) -> tuple[RunState, dict[str, Any], NDArray[np.float64], dict[str, Any]]:  # fmt: skip
    """Both pools of a disaggregated deployment over a trace (open loop, or `concurrency`
    clients): the client-side RunState, the pools' figures, each request's transfer time and
    how the transfer was priced."""
    from planner.sim import disagg as dis

    ms, how = transfer_plan(
        spec, trace.prompt_tokens, pre.curve.kv_dtype_bytes, pre.curve.tp, dec.curve.tp, link,
        layout.gpus, pre.card, pre.engine, backend,
    )  # fmt: skip
    # a pool's ranks run the same kind of step: all prefill, or all decode (a landing costs
    # nothing), so none waits on another's different work
    alone = {"lockstep_groups": 1}
    state, info = dis.run(
        trace,
        layout,
        prefill_cost=pre.cost,
        prefill_cfg=pre.cfg.model_copy(update=alone),
        decode_cost=dis.DecodeOnlyCost(dec.cost),
        decode_cfg=decode_pool_config(dec).model_copy(update=alone),
        transfer_ms=ms,
        concurrency=concurrency,
    )
    return state, info, ms, how


def _disaggregated(
    *,
    engine: str,
    version: str | None,
    disagg: DisaggLayout,
    link: str | None,
    trace: Trace,
    closed: int | None,
    load: Load,
    spec: ModelSpec,
    workload_echo: dict[str, Any],
    instance: Callable[[int, int | None, int], Instance],
    percentiles: tuple[float, ...],
    client: str | None = None,
    source: dict[str, str | None] | None = None,
    backend: str | None = None,
    empty: dict[str, bool] | None = None,
) -> dict[str, Any]:
    """The benchmark over a prefill pool and a decode pool (planner.sim.disagg). A pool's
    attention-DP groups (SGLang) are its schedulers, each with its share of the requests; the
    benchmark client reads every decode scheduler's streams."""
    import numpy as np

    from planner.sim.bench import bench_metrics

    for flag, ep in (("--prefill-ep", disagg.prefill_ep), ("--decode-ep", disagg.decode_ep)):
        if ep > 1 and not spec.num_experts:
            raise InputError(flag, f"{spec.name} has no experts to spread")
    from planner.core.engines.common import parse_version

    for flag, groups, pool_tp in (
        ("--prefill-dp", disagg.prefill_dp, disagg.prefill_tp),
        ("--decode-dp", disagg.decode_dp, disagg.decode_tp),
    ):
        if groups > 1 and engine == "sglang":
            _attention_groups(engine, pool_tp, groups, True, moe=bool(spec.num_experts),
                              version=None, flag=flag)  # fmt: skip
        elif groups > 1 and version is not None and parse_version(version) < VLLM_V1_SINCE:
            raise InputError(flag, "vLLM's data-parallel ranks in one server are V1's (0.8+)")
        if groups > 1 and disagg.dp_within_tp != (engine == "sglang"):
            raise InputError(flag, "the layout's DP placement does not match the engine")
    pre = instance(
        disagg.prefill_tp, disagg.prefill_ep if disagg.prefill_ep > 1 else None, disagg.prefill_dp
    )
    dec = instance(
        disagg.decode_tp, disagg.decode_ep if disagg.decode_ep > 1 else None, disagg.decode_dp
    )
    dec = with_bench_client(dec, trace, disagg.decode_schedulers, client, sends=False)
    state, info, ms, how = run_pools(spec, trace, disagg, pre, dec, link, closed, backend)
    metrics = bench_metrics(state, trace, percentiles=percentiles, **(empty or {}))
    gpus = disagg.gpus

    def pool(
        inst: Instance, role: Literal["prefill", "decode"], count: int, tp_size: int, ep: int,
        groups: int,
    ) -> dict[str, Any]:  # fmt: skip
        p = inst.prediction
        where = source or {}
        return {
            "instances": count,
            "tp": tp_size,
            "ep": ep,
            "dp": groups,
            "max_num_seqs": inst.plan.max_num_seqs,
            "max_num_batched_tokens": inst.budget,
            "kv_cache_tokens": p.kv_cache_tokens,
            "command": pd_command(
                inst.values,
                inst.plan,
                role,
                gpu=inst.card.id,
                preset=where.get("preset"),
                model=where.get("model"),
                spec=spec,
                backend=backend,
            ),
        }

    return {
        **_per_gpu(metrics, gpus),
        "max_concurrency": load.concurrency,
        "request_rate": load.rate_per_s if load.concurrency is None else None,
        "gpus": gpus,
        "estimate": (
            "predicted by the step-time model and the engine's scheduler for each pool, with the "
            "KV transfer priced on the link (docs/disagg.md); not a measurement"
        ),
        "step_constants": step_constants(pre.curve, None),
        "request_path_ms": REQUEST_PATH_MS,
        "bench_client": bench_client_of(engine, client),
        "deployment": {
            "model": spec.name,
            "gpu": pre.card.id,
            "engine": pre.engine,
            "engine_version": pre.prediction.version,
            # the decode pool's instance, as the KV and the command here are
            "tp": disagg.decode_tp,
            "pp": 1,
            "dp": disagg.decode_dp,
            "dp_attention": dec.attention_groups > 1,
            "ep": disagg.decode_ep,
            "weight_dtype": pre.weight_dtype,
            "kv_cache_dtype": dec.plan.flags.get("kv_cache_dtype", "auto"),
            "max_num_seqs": dec.plan.max_num_seqs,
            "max_num_batched_tokens": pre.budget,
            "kv_cache_tokens": dec.prediction.kv_cache_tokens,
            "kv_window_tokens": window_tokens(dec.cfg),
            "block_size": dec.cfg.block_tokens,
            "scheduler": f"disaggregated {disagg.label}: prefill-only and decode-only pools",
            "command": dec.plan.command,
            "kv_tiers": None,
            "disagg": {
                "layout": disagg.label,
                "prefill": pool(
                    pre,
                    "prefill",
                    disagg.prefill,
                    disagg.prefill_tp,
                    disagg.prefill_ep,
                    disagg.prefill_dp,
                ),
                "decode": pool(
                    dec,
                    "decode",
                    disagg.decode,
                    disagg.decode_tp,
                    disagg.decode_ep,
                    disagg.decode_dp,
                ),
                "router": pd_router(engine, disagg.prefill, disagg.decode),
                "transfer": how
                | {
                    "mean_bytes_per_request": float(trace.prompt_tokens.mean())
                    * how["kv_bytes_per_token"],
                    "median_ms": float(np.median(ms)),
                },
                **info,
            },
        },
        "workload": workload_echo,
        "calibration": None,
        "step_ms": {},
        "sweep": None,
        # the decode pool's batch against its CUDA graphs (its steps are decode-only) and its
        # API server
        "notes": graph_coverage_notes(
            dec.engine, dec.prediction, metrics["peak_running_seqs"], mixed=False
        )
        + fabric_notes(pre.curve, pre.engine, "prefill pool: ")
        + fabric_notes(dec.curve, dec.engine, "decode pool: ")
        + frontend_notes(
            dec.curve,
            dec.engine,
            dec.prediction.version,
            metrics["peak_running_seqs"],
            max(1, round(float((trace.prompt_tokens + trace.output_tokens).mean()))),
            dec.api_server_ranks,
            client,
        ),
    }


def _per_gpu(metrics: dict[str, Any], gpus: int) -> dict[str, Any]:
    """The benchmark's figures plus per-GPU and per-user throughput (the public sweeps' axes)."""
    tpot = metrics["median_tpot_ms"]
    return {
        **metrics,
        "output_throughput_per_gpu": metrics["output_throughput"] / gpus,
        "total_token_throughput_per_gpu": metrics["total_token_throughput"] / gpus,
        "tokens_per_s_per_user": 1000.0 / tpot if tpot > 0 else None,
    }


def check_step_calibration(
    cal: Calibration, engine: str, gpu_id: str, model: str, tp: int
) -> StepCalibration:
    """The profile's step terms, refused when they were measured on another deployment."""
    if cal.step is None:
        raise InputError(
            "--calibration",
            "the profile has no step terms: make one with `planner calibrate --bench RESULT.json`",
        )
    for what, theirs, mine in (
        ("engine", cal.engine, engine),
        ("GPU", cal.gpu, gpu_id),
        ("model", cal.model, model),
        ("TP", cal.tensor_parallel_size, tp),
    ):
        if str(theirs) != str(mine):
            raise InputError(
                "--calibration",
                f"the profile was measured with {what} {theirs}, this deployment has {mine}: "
                "a step calibration holds for the deployment it was measured on",
            )
    return cal.step


def apply_step_calibration(curve: StepTime, step: StepCalibration) -> StepTime:
    """The step model with measured corrections: HBM-read time scaled, a fixed time per step
    added (never below zero engine overhead)."""
    return curve.model_copy(
        update={
            "memory_scale": step.memory_scale,
            "overhead_ms": max(0.0, curve.overhead_ms + step.step_offset_ms),
            "label": f"{curve.label}, calibrated on your serving results",
        }
    )
