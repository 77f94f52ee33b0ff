"""One engine instance of a deployment as the engine would start it: the serve plan, the
step model over its ranks, and the scheduler settings the simulator runs (the engine's
admission, budget and multi-step rounds, by release)."""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any, TypeVar

from pydantic import BaseModel, ConfigDict, Field

from planner.api.bench_load import Speculation
from planner.core.engines.calibration import Calibration  # a Deployment field
from planner.core.parallel import fields_layout, layout_fields, moe_ranks, ranks_share_tp
from planner.core.step.overhead import (
    BENCH_CLIENT_MS_PER_CHUNK,
    BENCH_CLIENT_MS_PER_REQUEST,
    REQUEST_PATH_MS,
    VLLM_V1_SINCE,
    api_server_ms_per_request,
    bench_client_ms_per_chunk,
    sglang_overlap,
)
from planner.errors import InputError, PlannerError

if TYPE_CHECKING:
    from planner.core.engines.calibration import StepCalibration
    from planner.core.engines.common import EnginePrediction
    from planner.core.flags import SpecTarget
    from planner.core.serve import ServePlan
    from planner.core.specs import GpuSpec, ModelSpec
    from planner.core.step.launch import Graphs
    from planner.core.step.model import StepTime
    from planner.core.step.moe import MoeExchange
    from planner.sim.config import ReserveAdmission, SimConfig, WindowPool
    from planner.sim.cost import CurveCost
    from planner.sim.workload import Trace

T = TypeVar("T")


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
# 0.8.0 - 0.10.0 still take --num-scheduler-steps and run it on V0 (their V1 oracle falls back:
# planner.core.engines.vllm.v0_fallback); 0.10.1 removed the flag with multi-step scheduling
# (engine/arg_utils.py, read in the 0.10.0 and 0.10.1 wheels).
VLLM_MULTI_STEP_REMOVED_IN = (0, 10, 1)
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
# What an idle data-parallel rank brings to the MoE layers. SGLang's idle attention-DP groups run
# empty batches, which its decode gather pads with zero rows (layers/dp_attention.py, 0.5.23).
# vLLM's idle DP ranks run a dummy batch padded to the busiest rank's tokens: its V1 model
# runner leaves the ids its buffer last held (v1/worker/gpu_model_runner.py `_dummy_run`,
# 0.11-0.33), which route as real tokens; model runner V2 zeroes them (v1/worker/gpu/
# input_batch.py `make_dummy`), and is the default for every model from 0.30 unless a feature it
# lacks is asked for, dual-batch overlap among them (config/vllm.py use_v2_model_runner; 0.22-0.28
# only for listed architectures or, from 0.26, dense models). Rows of zeros give every expert the
# same router logit: they route to one set of top-k experts, as one token does.
VLLM_V2_RUNNER_DEFAULT_SINCE = (0, 30, 0)


def multi_step_ignored(trace: Trace, cfg: SimConfig) -> tuple[Trace, Trace]:
    """The requests vLLM V0 serves under multi-step scheduling, and those it ignores. Its
    rounds do not chunk prompts: a prompt longer than min(max_model_len,
    max_num_batched_tokens) is finished at once with no output (vllm/core/scheduler.py 0.6.3,
    _get_prompt_limit, FINISHED_IGNORED). It takes no engine time, so the rest run as if it
    were not sent. Clients count one as completed with no output; the benchmark_serving.py of
    that era (vLLM 0.6.3 benchmarks/backend_request_func.py) times the first token only on a
    chunk with text, so it records a TTFT of 0; `vllm bench serve` (0.33
    benchmarks/lib/endpoint_request_func.py) times it at its finishing chunk
    (planner.sim.bench.bench_metrics `ignored_prompt_tokens`). Returns the served requests and the
    ignored ones."""
    if not (cfg.whole_prompts and cfg.scheduler_steps > 1):
        return trace, trace.subset(trace.prompt_tokens < 0)  # none ignored
    keep = trace.prompt_tokens <= cfg.step_token_budget
    ignored = int(trace.size - keep.sum())
    if ignored == trace.size:
        raise InputError(
            "--max-num-batched-tokens",
            f"{cfg.step_token_budget:,}: vLLM V0's multi-step rounds do not chunk prompts and "
            "ignore every prompt longer than that (finished with no output): all of these are",
        )
    return trace.subset(keep), trace.subset(~keep)


def caches_prefixes(engine: str, prediction: EnginePrediction, model: ModelSpec) -> bool:
    """Whether the started engine serves repeated prompt prefixes from its KV cache: as the
    line sets it (vLLM --enable-prefix-caching / --no-enable-prefix-caching, SGLang
    --disable-radix-cache), else by the release's default: SGLang's radix cache on; vLLM's
    by planner.core.engines.vllm.prefix_caching_on (V1 on, hybrid models from 0.26; V0 off)."""
    from planner.core.engines.common import parse_version
    from planner.core.engines.vllm import prefix_caching_on

    settings = prediction.settings
    if engine != "vllm":
        return not settings.get("disable_radix_cache")
    stated = settings.get("enable_prefix_caching")
    release = parse_version(prediction.version)
    runs = "v0" if settings.get("engine") == "v0" else "v1"
    return prefix_caching_on(model, release, runs, stated if isinstance(stated, bool) else None)


def runs_v0(engine: str, prediction: EnginePrediction) -> bool:
    """Whether the planned server runs vLLM's V0 engine: every release before 0.8, and those of
    0.8 - 0.10 whose V1 oracle falls back (planner.core.engines.vllm.v0_fallback)."""
    return engine == "vllm" and prediction.settings.get("engine") == "v0"


def spec_target(engine: str, prediction: EnginePrediction | None, model: ModelSpec) -> SpecTarget:
    """The server speculation's flags are written for: the plan's release (vLLM's engine too:
    V0 where it runs V0), or the newest releases where the plan has no figures."""
    from planner.core.engines.common import parse_version
    from planner.core.flags import SpecTarget

    if prediction is None:
        return SpecTarget(architecture=model.architecture)
    if engine == "sglang":
        return SpecTarget(
            sglang_release=parse_version(prediction.version), architecture=model.architecture
        )
    return SpecTarget(
        vllm_release=parse_version(prediction.version),
        vllm_v0=runs_v0(engine, prediction),
        architecture=model.architecture,
        chunked=prediction.settings.get("enable_chunked_prefill") is True,
    )


def release_target(engine: str, version: object, model: ModelSpec | None) -> SpecTarget:
    """The server speculation's flags are written for where no plan says more: the release
    named (`version`, as the settings hold it; the newest where None), V0 before 0.8."""
    from planner.core.engines import release
    from planner.core.flags import SpecTarget

    architecture = model.architecture if model is not None else None
    named = release(engine, None if version is None else str(version))
    if engine == "sglang":
        return SpecTarget(sglang_release=named, architecture=architecture)
    return SpecTarget(vllm_release=named, vllm_v0=named < VLLM_V1_SINCE, architecture=architecture)


def engine_scheduler(
    engine: str, version: tuple[int, int, int], chunked_prefill: bool, v0: bool
) -> tuple[bool, ReserveAdmission | None]:
    """How the engine's scheduler runs: whether prompts share steps with decodes (vLLM V1,
    chunked or not; V0 (`v0`) with chunked prefill on, `chunked_prefill` being the plan's
    resolved value), and SGLang's reserve admission (None for vLLM)."""
    from planner.sim.config import ReserveAdmission

    mixed = engine == "vllm" and (not v0 or chunked_prefill)
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
    V0's, from 0.6.0 (vLLM v0.6.0 release notes) until 0.10.1 removed it (0.8.0 - 0.10.0 fall
    back to V0 for it)."""
    from planner.sim.config import MAX_MULTI_STEP

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
    if version >= VLLM_MULTI_STEP_REMOVED_IN:
        raise InputError(
            flag,
            f"vLLM {shown} has no multi-step scheduling (V0's, 0.6.0-0.10.0: --engine-version)",
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
    from planner.sim.cost import CurveCost

    client = bench_client_of(inst.engine, client)
    if client == "none":
        return inst
    if sends:
        inst = with_client_sends(inst, client)
    out = trace.output_tokens.astype(float)
    mean_generated = float((out * (out + 1) / 2).sum() / max(out.sum(), 1.0))
    per_chunk_ms = bench_client_ms_per_chunk(client, mean_generated) * streams
    curve = inst.curve.model_copy(update={"client_ms_per_token": per_chunk_ms})
    return replace(inst, curve=curve, cost=CurveCost(curve, inst.cost.source))


def with_client_sends(inst: Instance, client: str | None) -> Instance:
    """The instance whose front door the benchmark client's requests come through: the client
    sends each one in series (BENCH_CLIENT_MS_PER_REQUEST) before the API server admits it
    (`client`: none, the engine's pace, sends at no cost)."""
    door = inst.cfg.front_door
    if door is None or bench_client_of(inst.engine, client) == "none":
        return inst
    door = door.model_copy(update={"client_ms": BENCH_CLIENT_MS_PER_REQUEST})
    return replace(inst, cfg=inst.cfg.model_copy(update={"front_door": door}))


def with_speculation(inst: Instance, speculation: Speculation) -> Instance:
    """The instance running speculative decoding: its scheduler draws each sequence's accepted
    drafts, and every decode step costs the target's verification of k drafts per sequence
    (planner.core.spec_load.verify_ms) plus k draft forwards (V0's multi-step rounds, which do
    not speculate, are refused by the simulator's own check)."""
    from planner.sim.cost import CurveCost

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


def plan_instance(
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
    from planner.core.engines import release
    from planner.core.engines.common import parse_version
    from planner.sim.cost import CurveCost
    from planner.sources.presets import find_gpu

    engine_name = str(values.get("engine", "vllm"))
    check_scheduler_steps(scheduler_steps, engine_name, release(engine_name, values.get("version")))
    # the line says so: the DP ranks or attention groups, the expert parallelism, and V0's
    # multi-step rounds (which make a 0.8 - 0.10.0 release run V0)
    values = dict(values)
    extra = dict(values.get("extra") or {})
    extra |= layout_fields(engine_name, attention_groups, ep if spec.num_experts else None)
    if scheduler_steps > 1:
        extra["num_scheduler_steps"] = scheduler_steps
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
    cfg, budget = _scheduler_config(plan, spec, longest, seed, scheduler_steps, sglang_groups)
    if spec.num_experts and attention_groups > 1:  # the ranks meet in every MoE layer
        empty = idle_ranks_empty(engine, version, p.settings)
        cfg = cfg.model_copy(
            update={
                "lockstep_groups": attention_groups,
                "lockstep_padded": engine == "vllm" and version < VLLM_DP_UNPADDED_PREFILL_SINCE,
                # idle ranks' zero rows (SGLang's gather: DeepEP / MoRI dispatch none; vLLM's
                # V2 dummy rows, which every backend dispatches), or vLLM V1's stale ones
                "lockstep_zero_rows": empty and (engine != "sglang" or not curve.moe_all_to_all),
                "lockstep_decode_padded": engine == "vllm" and not empty,
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
    from planner.sim.config import WindowPool

    if not p.settings.get("swa_max_total_num_tokens"):
        return None
    block = int(str(p.settings["page_size"]))
    span = int(str(p.settings["sliding_window_size"]))
    return WindowPool(
        tokens=int(str(p.settings["swa_max_total_num_tokens"])),
        window=span,
        page=min(block, span),
    )


def line_exchange(settings: dict[str, Any], engine: str, ep: int | None) -> MoeExchange:
    """The MoE exchange a plan's line runs: DeepEP (or MoRI) as SGLang's --moe-a2a-backend
    says, or vLLM's --all2all-backend where its kernels run (else each engine's default), the
    expert split and redundant experts it asks for, and two-batch overlap at SGLang's or at
    vLLM's --enable-dbo thresholds."""
    from planner.core.engines.vllm import DBO_MIN_TOKENS
    from planner.core.step.moe import TWO_BATCH_MIN_TOKENS, MoeExchange

    backend = settings.get("moe_a2a_backend")
    dbo = bool(settings.get("enable_dbo"))
    return MoeExchange(
        all_to_all=(
            backend in ("deepep", "mori") if engine == "sglang" else bool(settings.get("deepep"))
        ),
        kernels="mori" if backend == "mori" else "deepep",
        expert_ranks=ep if ep is not None and ep > 1 else None,
        redundant_experts=int(str(settings.get("ep_num_redundant_experts") or 0)),
        two_batch_overlap=bool(settings.get("enable_two_batch_overlap")) or dbo,
        overlap_min_tokens=DBO_MIN_TOKENS if dbo else TWO_BATCH_MIN_TOKENS,
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
    from planner.core.step.attention_dp import AttentionDp
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
        dp=AttentionDp(
            groups=groups,
            dense_mlp_replicated=bool(p.settings.get("dense_mlp_replicated")),
            dp_lm_head=bool(p.settings.get("enable_dp_lm_head")),
        ),
        exchange=line_exchange(p.settings, engine, ep),
        async_scheduling=scheduling_beside_gpu(engine, p.settings, p.version, sglang_groups),
        stream_interval=int(str(p.settings.get("stream_interval") or 1)),
        graphs=engine_graphs(engine, p),
        v0=runs_v0(engine, p),
    )


def scheduling_beside_gpu(
    engine: str, settings: dict[str, Any], version: str, dp_attention: bool
) -> bool | None:
    """Whether the engine schedules while the GPU runs a step, as its settings resolved it:
    vLLM's async scheduling (None: the release's default), SGLang's overlap scheduler
    (overhead.sglang_overlap: its release, --disable-overlap-schedule, attention DP)."""
    from planner.core.engines.common import parse_version

    if engine == "sglang":
        disabled = bool(settings.get("disable_overlap_schedule"))
        return sglang_overlap(parse_version(version), disabled, dp_attention)
    return bool(settings["async_scheduling"]) if "async_scheduling" in settings else None


def eager_flag(engine: str, prediction: EnginePrediction, v0: bool) -> str | None:
    """The flag that runs every step without CUDA graphs, where the line sets it: SGLang's
    --disable-cuda-graph, vLLM's --enforce-eager (V0's too, whose graphs are otherwise read
    from its fixed capture list)."""
    if engine == "sglang":
        return "--disable-cuda-graph" if prediction.settings.get("disable_cuda_graph") else None
    eager = prediction.settings.get("enforce_eager") is True
    if eager or (not v0 and prediction.graph_max_batch == 0):
        return "--enforce-eager"
    return None


def engine_graphs(engine: str, prediction: EnginePrediction) -> Graphs:
    """The steps the engine replays CUDA graphs for: none under its eager flag; vLLM V1's of
    up to its largest capture size in tokens (piecewise graphs hold prompt chunks too), V0's
    decode-only batches up to 256; SGLang's decode batches up to --cuda-graph-max-bs and its
    prompt steps up to its prefill graphs' size, as it resolves them (none before 0.5.10, on
    AMD, or where its rules turn them off: planner.core.engines.sglang.prefill_graph_tokens)."""
    from planner.core.step.launch import ALL_GRAPHED, Graphs

    v0 = runs_v0(engine, prediction)
    if eager_flag(engine, prediction, v0) is not None:
        return Graphs(max_tokens=0)
    if v0:
        return Graphs(max_tokens=VLLM_V0_GRAPH_MAX_BATCH, prompt_max_tokens=0)
    if engine == "sglang":
        settings = prediction.settings
        largest = int(str(settings.get("cuda_graph_max_bs_decode") or 0))
        prompts = settings.get("prefill_graph_max_tokens")
        return Graphs(
            max_tokens=largest or None,
            prompt_max_tokens=None if prompts is None else int(str(prompts)),
        )
    largest = prediction.graph_max_batch or 0
    return Graphs(max_tokens=largest) if largest else ALL_GRAPHED


def _scheduler_config(
    plan: ServePlan,
    model: ModelSpec,
    longest: int,
    seed: int,
    scheduler_steps: int,
    sglang_groups: bool,
) -> tuple[SimConfig, int]:
    """The simulator's settings for the engine's scheduler as the plan resolves it for `model`
    (its running cap, token budget, KV pool and admission), and the token budget a step
    runs."""
    from planner.core.engines.common import parse_version
    from planner.core.engines.sglang import DEFAULT_MAX_PREFILL_TOKENS
    from planner.core.engines.vllm import grouped_pool
    from planner.sim.config import SimConfig
    from planner.sim.door import FrontDoor

    p, engine = started(plan), plan.engine
    version = parse_version(p.version)
    vllm_engine = engine == "vllm"
    block = int(str(p.settings["block_size" if vllm_engine else "page_size"]))
    # SGLang: each attention-DP group's share of the chunked-prefill size, as the server runs it
    budget = int(
        str(p.settings["max_num_batched_tokens" if vllm_engine else "chunked_prefill_per_group"])
    )
    # SGLang stops adding requests to a prefill batch at max_prefill_tokens too (PrefillAdder's
    # rem_input_tokens: the server's 16,384 in each scheduler, not split over attention-DP
    # groups; managers/schedule_policy.py and tp_worker.py, 0.5.13): where a chunk is larger,
    # the last request taken may pass it; with chunking off (-1) prompts run whole, a batch of
    # them up to max_prefill_tokens (taken here as the longest prompt, where longer: SGLang
    # takes the first whatever its length)
    most = int(str(p.settings.get("max_prefill_tokens") or DEFAULT_MAX_PREFILL_TOKENS))
    input_cap = None
    if not vllm_engine and budget > most:
        input_cap = most
    unchunked = budget <= 0
    if unchunked:
        budget = max(longest, most)
    # vLLM's resolved chunked prefill (the flag, else the release's default for this
    # max_model_len); without it, or in V0's multi-step rounds, prompts are not split
    chunked = bool(p.settings.get("enable_chunked_prefill", True)) if vllm_engine else True
    v0 = runs_v0(engine, p)
    mixed, reserve = engine_scheduler(engine, version, chunked, v0)
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
    server_ms, server_ms_per_token = api_server_ms_per_request(engine, version, v0)
    kv_blocks, states = max(1, p.kv_cache_tokens // block), 0
    grouped = grouped_pool(model, p) if vllm_engine else None
    if grouped is not None:  # blocks held whatever a request's length (vllm.grouped_pool)
        kv_blocks, states = max(1, grouped[0]), grouped[1]
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
        kv_blocks=kv_blocks,
        block_tokens=block,
        state_blocks_per_seq=states,
        mixed=mixed,
        reserve=reserve,
        window_pool=_window_pool(p),
        seed=seed,
        scheduler_steps=scheduler_steps,
        whole_prompts=(vllm_engine and (not chunked or scheduler_steps > 1)) or unchunked,
        # V1 allocates KV for the tokens it schedules; V0's can_allocate took the whole prompt
        admit_chunk=vllm_engine and chunked and not v0,
        admit_headroom_blocks=(int(VLLM_V0_WATERMARK * p.kv_cache_tokens // block) if v0 else 0),
        outputs_one_step_late=(
            v0
            and version >= VLLM_ASYNC_OUTPUT_SINCE
            and int(str(p.settings.get("pipeline_parallel_size", 1))) == 1
        ),
        recv_interval=int(str(p.settings.get("scheduler_recv_interval") or 1)),
        prefill_input_cap=input_cap,
    )
    return cfg, budget


def idle_ranks_empty(engine: str, version: tuple[int, int, int], settings: dict[str, Any]) -> bool:
    """Whether an idle data-parallel rank brings no tokens of its own to the MoE layers
    (VLLM_V2_RUNNER_DEFAULT_SINCE): SGLang's empty batches, vLLM's zeroed dummy rows from 0.30
    unless --enable-dbo keeps the V1 model runner."""
    if engine == "sglang":
        return True
    return (
        engine == "vllm"
        and version >= VLLM_V2_RUNNER_DEFAULT_SINCE
        and not settings.get("enable_dbo")
    )


def lockstep_load(inst: Instance, clients: int, ranks: int) -> float:
    """The other ranks' requests, each rank's as a share of the busiest one's, in a closed
    loop of `clients` over `ranks`: SGLang hands requests round-robin (--load-balance-method),
    vLLM's front end to the least loaded rank (v1/engine/core_client.py), so the busiest keeps
    ceil(N / ranks) and the rest share N - that. 1 (every rank as loaded) for an open loop
    (`clients` 0), ranks not in lockstep, and vLLM before 0.17, which pads every rank's step to
    the busiest one's tokens (a decode step stays so through the V1 model runner:
    SimConfig.lockstep_decode_padded)."""
    cfg = inst.cfg
    if cfg.lockstep_groups == 1 or cfg.lockstep_padded or clients <= 0 or ranks < 2:
        return 1.0
    busiest = math.ceil(clients / ranks)
    return min(1.0, (clients - busiest) / ((ranks - 1) * busiest))


def check_ep(ep: int | None, engine: str, tp: int, groups: int) -> None:
    """--ep is 1 or the ranks the engine's MoE layers span for this layout (refused else)."""
    span = moe_ranks(engine, tp, groups)
    if ep is not None and ep not in (1, span):
        raise InputError("--ep", f"{ep}: the engine's expert parallelism spans {span} ranks here")


def within_mori_chunk(build: Callable[[dict[str, Any]], T], allowed: bool) -> tuple[T, int | None]:
    """`build` at no pinned settings, or, where SGLang refuses MoRI past its dispatch cap at
    the engine's default chunk and the caller sets the chunk itself (`allowed`: a line that
    budgets its own step), again at the largest chunk MoRI takes; with that chunk (None
    where the default stood)."""
    from planner.core.engines.sglang import MoriChunkRefused

    try:
        return build({}), None
    except MoriChunkRefused as e:
        if not allowed:
            raise
        return build({"max_num_batched_tokens": e.largest}), e.largest


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
    groups = attention_groups_of(
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
    inst = plan_instance(
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
    groups = attention_groups_of(
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
        return plan_instance(
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


def attention_groups_of(
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
        # SGLang turns the flag off at --dp-size 1 (server_args.py _handle_data_parallelism in
        # 0.5.2-0.5.10, arg_groups/overrides.py _data_parallelism_defaults in 0.5.15; from
        # 0.5.23 it resolves to attn_dp_size > 1): plain TP, as `capacity` plans it
        return 1
    if tp % dp:
        raise InputError(flag, f"needs groups that divide the TP size {tp} (got --dp {dp})")
    if not moe:
        raise InputError(flag, "is modelled for MoE models (attention DP, experts over all GPUs)")
    return dp


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
