"""`planner fleet` by name: candidates over GPUs, TP and precision, searched and ranked."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any, Literal

from pydantic import ValidationError

from planner.errors import InputError, validation_text
from planner.units import as_float, ceil_div

if TYPE_CHECKING:
    from planner.api.bench_instance import Instance
    from planner.core.engines.calibration import Calibration
    from planner.core.fleet import Promise, Trial
    from planner.core.specs import GpuSpec, ModelSpec
    from planner.sim.config import SimConfig
    from planner.sim.cost import CurveCost
    from planner.sim.engine import RunState
    from planner.sim.prefix import PrefixShare
    from planner.sim.workload import Trace, Workload

# Reports one candidate done: its GPU, TP size and precision.
Progress = Callable[[str, int, str], None]


@dataclass(frozen=True)
class Question:
    """What every candidate of one fleet search is judged by and planned with: the model and
    engine, the traffic, its promise and the requests' lengths, and what each line carries
    beside its layout (a calibration, reserved memory, a shared prefix, an offload tier, the
    KV cache's dtype). One per search, shared by its jobs."""

    spec: ModelSpec
    preset: str | None
    model: str | None
    engine: str
    engine_version: str | None
    calibration: Calibration | None
    reserved_bytes: int | None
    context_tokens: int
    mean_tokens: int  # the mean tokens a request holds (prompt, half its output, a shared prefix)
    workload: Workload
    promise: Promise
    rate_per_s: float
    headroom: float
    mean_prompt_tokens: float
    mean_output_tokens: float
    prefix: PrefixShare | None
    offload: dict[str, Any] | None
    kv_fp8: bool = False  # an fp8 KV cache (--kv-dtype fp8), else the model's 16 bits


@dataclass(frozen=True)
class Job:
    """One candidate to plan and search: a layout of one GPU type at one precision, priced,
    and the search's question. Jobs run in a process pool, so a job carries everything its
    candidate needs."""

    question: Question
    card: GpuSpec
    precision: str
    tp: int
    ep: bool  # expert parallelism (experts whole on E / EP GPUs) rather than sharded
    groups: int  # data-parallel attention groups (1: none)
    pp: int
    price_per_gpu_hour: float | None  # None: not priced
    decode_groups: int = 1  # a disaggregated unit's decode instance's attention groups
    ratio: tuple[int, int] | None = None  # a disaggregated unit's prefill and decode instances

    def pools(self) -> tuple[int, int]:
        """A disaggregated unit's prefill and decode instances (its P:D ratio)."""
        if self.ratio is None:
            raise ValueError("an aggregated candidate has no P:D ratio")
        return self.ratio


# GPUs tried when --gpus is not given: common data-centre cards, NVIDIA and AMD.
DEFAULT_GPUS = ("h100", "h200", "mi300x", "a100-sxm4-80gb", "l40s")
# Replicas added, one at a time, where the planned load's own trial misses the promise that
# the sustainable rate's kept (their samples differ near the goodput bound): past these the
# candidate is rejected rather than planned on a rate its trials disagree on.
MAX_ADDED_REPLICAS = 2
# max_num_seqs tried per candidate, as shares of what the KV cache holds at the mean length.
SEQS_SHARES = (1.0, 0.5, 0.25)
# Largest TP tried: one 8-GPU node (NVLink / Infinity Fabric domain of an HGX or MI300X board);
# across nodes, pipeline stages are (PP_STAGES).
MAX_TP = 8
# Pipeline stages tried (one node each, TP of the widest size within it) when no TP of one node
# starts the model: two and four nodes.
PP_STAGES = (2, 4)
# What the ranking minimises: $/h (with prices), GPUs, or the TPOT bound at the peak (the
# promise's percentile at its upper confidence bound).
OBJECTIVES = ("cost", "gpus", "latency")
# The step model's median error on TPOT against public serving results (19.6% over 91 posed
# rows, `python benchmarks/e2e.py`): a candidate whose single-sequence step is within it of the
# TPOT promise holds it only if the model errs the kind way, so it is reported, not ranked.
STEP_MODEL_TPOT_ERROR = 0.2


# Model field (path) -> the flag that sets it, for validation errors.
FLEET_FLAGS = {
    "rate_per_s": "--rate",
    "cv": "--cv",
    "prompt_tokens": "--prompt-len",
    "output_tokens": "--output-len",
    "tpot_ms": "--tpot",
    "ttft_ms": "--ttft",
    "percentile": "--percentile",
    "goodput": "--goodput",
}


# Which median of presets/prices.yaml prices the candidates when no price is given.
PRICE_BASES = ("gpu-cloud", "hyperscaler")


def shipped_prices(basis: str) -> tuple[dict[str, float], str]:
    """The shipped price table at one basis, and a line naming the basis and dates."""
    from planner.sources.presets import preset_root, read_yaml

    if basis not in PRICE_BASES:
        raise InputError("--price-basis", f"{basis!r}; accepted: {', '.join(PRICE_BASES)}")
    table = read_yaml(preset_root() / "prices.yaml", "--price-basis")
    key = basis.replace("-", "_")
    prices = {gpu: float(e[key]) for gpu, e in table.items() if e.get(key) is not None}
    dates = sorted(d for e in table.values() for d in str(e.get("dates", "")).split(" .. ") if d)
    span = f"{dates[0]} .. {dates[-1]}" if dates else "undated"
    label = "GPU-cloud" if basis == "gpu-cloud" else "hyperscaler"
    return prices, (
        f"shipped: the {label} median of on-demand list prices per GPU-hour, dated {span} "
        "(presets/prices.yaml, each with its provider and source); --price GPU=$ overrides"
    )


def parse_prices(
    texts: list[str] | str | None, path: str | None, basis: str | None = "gpu-cloud"
) -> tuple[dict[str, float], str]:
    """Prices by catalog id and where they came from: the shipped table at `basis` (None: none),
    then a YAML file {gpu: $ per GPU-hour}, then `--price h100=2.49,mi300x=2.1` (repeatable;
    later wins), each name resolved through the GPU aliases."""
    from planner.sources.presets import find_gpu

    prices: dict[str, float] = {}
    origin = "missing: pass --price GPU=$/h or --prices FILE"
    if basis is not None:
        prices, origin = shipped_prices(basis)
    raw: dict[str, Any] = {}
    if path is not None:
        from planner.sources.files import ARGS_LIMIT_BYTES, load_yaml_documents, read_text

        docs = load_yaml_documents(read_text(path, "--prices", ARGS_LIMIT_BYTES), "--prices", path)
        if len(docs) != 1 or not isinstance(docs[0][1], dict):
            raise InputError("--prices", f"{path}: expected a mapping of GPU -> $ per GPU-hour")
        raw |= docs[0][1]
    if isinstance(texts, str):
        texts = [texts]
    for text in texts or []:
        for part in [p for p in text.split(",") if p.strip()]:
            name, eq, value = part.partition("=")
            if not eq:
                raise InputError("--price", f"{part!r}: expected GPU=DOLLARS_PER_HOUR")
            raw[name.strip()] = value.strip()
    for name, value in raw.items():
        try:
            price = as_float(value)  # an integer YAML spells past float's range: infinite
        except (TypeError, ValueError) as exc:
            raise InputError("--price", f"{name}: {str(value)[:40]!r} is not a number") from exc
        if not 0 < price < 1e4:
            raise InputError("--price", f"{name}: $ per GPU-hour must be in (0, 10,000)")
        prices[find_gpu(str(name), "--price").id] = price
    if raw:
        origin = "given" if basis is None else f"given where named; elsewhere {origin}"
    return prices, origin


# The KV caches `--kv-dtype` pins every candidate to: the model's own 16 bits (auto) or fp8
# (vLLM's --kv-cache-dtype fp8, SGLang's fp8_e4m3: both engines' e4m3 cache).
KV_DTYPES = ("auto", "fp8", "fp8_e4m3")


def _promise_and_workload(
    promise: dict[str, Any], workload: dict[str, Any], rate: float
) -> tuple[Promise, Workload]:
    """The promise and the workload at `rate`, validated: a bad field is refused by the flag
    that set it (FLEET_FLAGS)."""
    from planner.core.fleet import Promise
    from planner.sim.workload import Workload

    try:
        return Promise(**promise), Workload.model_validate(workload | {"rate_per_s": rate})
    except ValidationError as exc:
        err = exc.errors()[0]
        path = ".".join(str(p) for p in err["loc"])
        flag = next((f for key, f in FLEET_FLAGS.items() if path.startswith(key)), path)
        raise InputError(flag, f"{validation_text(err)} (got {err.get('input')!r})") from exc


def _tp_sizes(spec: ModelSpec, tps: list[int] | None) -> list[int]:
    """The TP sizes searched: those asked for (each dividing the attention heads), else every
    one that divides them up to a node's MAX_TP."""
    from planner.core.serve import valid_tp

    if tps is None:
        return [t for t in valid_tp(spec) if t <= MAX_TP]
    bad = [t for t in tps if t not in valid_tp(spec)]
    if bad:
        raise InputError(
            "--tp",
            f"{bad[0]} does not divide {spec.name}'s attention heads; accepted: "
            + ", ".join(str(t) for t in valid_tp(spec)),
        )
    return sorted(set(tps))


def fleet_report(
    *,
    preset: str | None,
    model: str | None,
    rate: float,
    promise: dict[str, Any],
    revision: str | None = None,
    gpus: list[str],
    engine: str,
    prices: dict[str, float],
    headroom: float,
    workload: dict[str, Any],
    progress: Progress | None = None,
    calibration: Calibration | None = None,
    reserved_bytes: int | None = None,
    workers: int = 1,
    prices_origin: str | None = None,
    context: int | None = None,
    objective: str | None = None,
    tps: list[int] | None = None,
    precisions: list[str] | None = None,
    engine_version: str | None = None,
    disagg: str = "auto",
    prefix: PrefixShare | None = None,
    offload: dict[str, Any] | None = None,
    kv_dtype: str | None = None,
) -> dict[str, Any]:
    """Every candidate, searched, and the ranking (the documented `--json` object).

    `prefix`: a planner.sim.prefix.PrefixShare: a share of requests opens with a shared prefix
    that the replica's prefix cache serves where it still holds it (as `planner simulate
    --prefix-share` runs it; a disaggregated unit's prefill instances, each from its own cache).
    `offload`: the KV offload tier every candidate's line carries (OffloadSettings fields, as
    capacity and simulate take them): a CPU tier the prefixes are served from too (vLLM's:
    disaggregated units are not searched then; SGLang's HiCache: on a unit's prefill pool).

    `calibration`: a profile from `planner calibrate`, applied to the candidates on its card
    and engine (a profile measured on one card says nothing about another). `objective`: what
    the ranking minimises (cost by default when every candidate is priced, else GPUs); `tps`,
    `precisions`, `engine_version` pin a dimension of the search. `disagg`: auto (MoE models),
    on or off: add xPyD units of each GPU beside the aggregated candidates. `kv_dtype`: the KV
    cache every candidate runs, auto (the model's 16 bits) or fp8.
    """
    from planner.api import fleet_disagg
    from planner.api.fleet_curves import front
    from planner.sources.models import resolve_model
    from planner.sources.presets import find_gpu

    if not 0 < headroom <= 1:
        raise InputError("--headroom", f"must be in (0, 1] (got {headroom})")
    if engine not in ("vllm", "sglang"):
        raise InputError("--engine", f"{engine!r}; accepted: vllm, sglang")
    if objective is not None and objective not in OBJECTIVES:
        raise InputError("--objective", f"{objective!r}; accepted: {', '.join(OBJECTIVES)}")
    promised, w = _promise_and_workload(promise, workload, rate)
    spec = resolve_model(preset, model, revision)
    kv = (kv_dtype or "auto").strip().lower()
    if kv not in KV_DTYPES:
        raise InputError("--kv-dtype", f"{kv_dtype!r}; accepted: {', '.join(KV_DTYPES)}")
    if prefix is not None and prefix.share <= 0:
        prefix = None
    if offload and engine == "vllm":
        # SGLang's HiCache goes on a unit's prefill pool (pool_values)
        if disagg == "on":
            raise InputError(
                "--disagg",
                "on with a KV offload tier: vLLM's --kv-offloading-size replaces the NIXL "
                "connector a pool runs",
            )
        disagg = "off"
    lengths = _request_lengths(spec, w, prefix, context)
    context, mean = lengths.context_tokens, lengths.mean_tokens
    mean_prompt, mean_output = lengths.mean_prompt_tokens, lengths.mean_output_tokens
    layouts = _tp_sizes(spec, tps)
    question = Question(
        spec=spec,
        preset=preset,
        model=model,
        engine=engine,
        engine_version=engine_version,
        calibration=calibration,
        reserved_bytes=reserved_bytes,
        context_tokens=context,
        mean_tokens=mean,
        workload=w,
        promise=promised,
        rate_per_s=rate,
        headroom=headroom,
        mean_prompt_tokens=mean_prompt,
        mean_output_tokens=mean_output,
        prefix=prefix,
        offload=offload,
        kv_fp8=kv.startswith("fp8"),
    )
    # Every TP of one node: a wider TP sustains more per replica and may cost less per
    # token; the ranking, not the search order, decides.
    jobs = [
        Job(
            question=question,
            card=card,
            precision=precision,
            tp=tp,
            ep=ep,
            groups=groups,
            pp=1,
            price_per_gpu_hour=prices.get(card.id),
        )
        for card in (find_gpu(g) for g in gpus)
        for precision in _precisions(spec, card, precisions)
        for tp in layouts
        for ep, groups in _parallel_options(spec, engine, tp)
    ]
    if not jobs:
        raise InputError("--precision", "no candidate GPU runs the precisions asked for")
    candidates = _run_jobs(jobs, workers, progress, _candidate)
    # pipeline stages across nodes, TP within each: where no layout of one node starts, and
    # (TP not pinned) where the widest one takes more than one replica or cannot keep the
    # promise (its KV pool beside the weights may be what binds; two nodes hold the weights
    # once, and the ranking, not the search, decides)
    stretched = [
        replace(job, tp=max(layouts), pp=pp)
        for job in jobs
        if job.tp == max(layouts) and not job.ep and _widened(candidates, job, tps is None)
        for pp in PP_STAGES
    ]
    candidates += _run_jobs(stretched, workers, progress, _candidate)
    unit_jobs: dict[int, Job] = {}
    if fleet_disagg.wanted(disagg, spec):
        units = fleet_disagg.unit_jobs(jobs, candidates, max(layouts), spec, engine)
        for got in _run_jobs(units, workers, progress, fleet_disagg.disagg_units):
            candidates += got["rows"]
            unit_jobs |= {id(r): j for r, j in zip(got["rows"], got["jobs"], strict=True)}
    ranked, objective = _rank(candidates, objective)
    if unit_jobs:
        # the curve of the best unit of each GPU and precision (a closed-loop sweep of two
        # pools costs more than an aggregated one; the others keep their operating point)
        chosen = fleet_disagg.best_units(ranked)
        curves = _run_jobs(
            [unit_jobs[id(c)] for c in chosen], workers, progress, fleet_disagg.disagg_curve_row
        )
        for c, got in zip(chosen, curves, strict=True):
            c["curve"] = got["curve"]
    return {
        "pareto": front(ranked, promised.tpot_ms),
        "model": spec.name,
        "rate_per_s": rate,
        "promise": promised.model_dump(),
        # the request count of the preset is not what runs: each trial simulates its own
        "workload": w.model_dump() | {"description": w.summary().split(", ", 1)[1]},
        "headroom": headroom,
        "objective": objective,
        "ranked_by": RANKED_BY[objective],
        "prices": prices_origin or ("given" if prices else "missing: pass --price GPU=$/h"),
        "winner": ranked[0] if ranked else None,
        "candidates": ranked + [c for c in candidates if not c["ranked"]],
    }


@dataclass(frozen=True)
class RequestLengths:
    """What the workload's requests ask of every candidate's line: the context it serves
    (`--context`, else the longest request asked for), the mean tokens a running sequence
    holds, and the mean prompt and output of a sample of the workload."""

    context_tokens: int
    mean_tokens: int
    mean_prompt_tokens: float
    mean_output_tokens: float


def _request_lengths(
    spec: ModelSpec, w: Workload, prefix: PrefixShare | None, context: int | None
) -> RequestLengths:
    """The lengths every candidate is planned for; a context that cannot hold the longest
    request, or requests past the model's maximum, refused naming the flag."""
    from planner.sim.workload import generate

    sample = generate(w)
    longest = int((sample.prompt_tokens + sample.output_tokens).max())
    mean_prompt = float(sample.prompt_tokens.mean())
    mean_output = float(sample.output_tokens.mean())
    if prefix is not None:  # a shared prefix opens the prompt: the requests hold it
        longest += prefix.tokens
    # the longest request asked for
    asked = int(w.prompt_tokens.max + w.output_tokens.max) + (prefix.tokens if prefix else 0)
    if asked > spec.max_context_tokens and context is None:
        raise InputError(
            "--prompt-len",
            f"requests of up to {asked:,} tokens exceed {spec.name}'s maximum of "
            f"{spec.max_context_tokens:,} (the engines refuse them)",
        )
    if context is None:
        context = asked
    elif not longest <= context <= spec.max_context_tokens:
        raise InputError(
            "--context",
            f"{context:,} must hold the longest request ({longest:,} tokens) and stay within "
            f"{spec.name}'s maximum of {spec.max_context_tokens:,}",
        )
    opening = prefix.mean_tokens if prefix else 0.0
    mean = max(1, min(context, round(mean_prompt + opening + mean_output / 2)))
    return RequestLengths(
        context_tokens=context,
        mean_tokens=mean,
        mean_prompt_tokens=mean_prompt,
        mean_output_tokens=mean_output,
    )


def _rank(
    candidates: list[dict[str, Any]], objective: str | None
) -> tuple[list[dict[str, Any]], str]:
    """The candidates that fit and that no wider layout of the same GPU and weights beats,
    best first by the objective (cost where every fitting candidate is priced, else GPUs);
    each candidate marked ranked or dominated, with the reason."""
    fitting = [c for c in candidates if c["fits"]]
    priced = bool(fitting) and all(c["dollars_per_hour"] is not None for c in fitting)
    if objective == "cost" and fitting and not priced:
        raise InputError("--objective", "cost needs a price for every GPU: pass --price GPU=$/h")
    objective = objective or ("cost" if priced else "gpus")
    key = _objective_key(objective)
    for c in candidates:
        wider = _cheaper_wider(c, fitting, key) if c["fits"] else None
        c["ranked"] = bool(c["fits"]) and wider is None
        c["dominated_by"] = None
        if wider is not None:
            c["dominated_by"] = layout_name(wider)
            c["reason"] = (
                f"{_width(wider)} of the same GPU and weights does better on {objective}: "
                f"{_objective_text(objective, wider)} against {_objective_text(objective, c)}"
            )
    return sorted((c for c in candidates if c["ranked"]), key=key), objective


# The field each objective ranks by (ties: fewer GPUs, then more tokens/s per GPU).
RANKED_BY = {"cost": "dollars_per_hour", "gpus": "gpus", "latency": "tpot_ms_at_load"}


def _objective_key(objective: str) -> Callable[[dict[str, Any]], tuple[float, ...]]:
    """The sort key of an objective: its field first, fewer GPUs and more tokens/s per GPU
    breaking ties."""
    field = RANKED_BY[objective]

    def key(c: dict[str, Any]) -> tuple[float, ...]:
        return (float(c[field]), float(c["gpus"]), -float(c["tokens_per_s_per_gpu"]))

    return key


def _width(c: dict[str, Any]) -> str:
    """A layout's parallelism in words: `TP 4`, `TP 8 x PP 2`."""
    return f"TP {c['tp']}" + (f" x PP {c['pp']}" if c.get("pp", 1) > 1 else "")


def _objective_text(objective: str, c: dict[str, Any]) -> str:
    """A candidate's figure on the objective, for a reason line."""
    if objective == "cost":
        return f"${c['dollars_per_hour']:,.2f}/h"
    if objective == "gpus":
        return f"{c['gpus']} GPUs"
    return f"TPOT bound {c['tpot_ms_at_load']:.1f} ms"


def _cheaper_wider(
    c: dict[str, Any],
    fitting: list[dict[str, Any]],
    key: Callable[[dict[str, Any]], tuple[float, ...]],
) -> dict[str, Any] | None:
    """The best wider layout (more GPUs per replica: TP, or TP x PP) of the same GPU, weights
    and engine that beats `c` on the objective (a narrower layout that costs more is never
    worth listing), or None."""
    wider = [
        o
        for o in fitting
        if o["gpu"] == c["gpu"]
        and o["precision"] == c["precision"]
        and o["engine"] == c["engine"]
        and (o["ep"] > 1) == (c["ep"] > 1)
        and o.get("disagg") is None
        and c.get("disagg") is None
        and o["tp"] * o.get("pp", 1) > c["tp"] * c.get("pp", 1)
        and key(o)[0] < key(c)[0]
    ]
    return min(wider, key=key) if wider else None


def no_room(t1_ms: float, tpot_ms: float, layout: str, rate_per_s: float) -> str | None:
    """Why a layout is not ranked when its single-sequence step t(1) sits within the step
    model's TPOT error of the promise (it holds only if the model errs the kind way), or
    None."""
    if t1_ms * (1 + STEP_MODEL_TPOT_ERROR) <= tpot_ms:
        return None
    return (
        f"TPOT {tpot_ms:g} ms leaves no room on one {layout}: t(1) = {t1_ms:.1f} ms is within "
        f"the step model's {STEP_MODEL_TPOT_ERROR:.0%} error of it (it would sustain "
        f"{rate_per_s:.2g} req/s per replica)"
    )


def layout_name(c: dict[str, Any]) -> str:
    """A candidate's layout in words: `h100-sxm5-80gb TP 4 EP fp8`, `mi300x 1P2D TP 4 fp8`."""
    ep = " EP" if c.get("ep", 1) > 1 else ""
    pp = f" x PP {c['pp']}" if c.get("pp", 1) > 1 else ""
    pools = f" {c['disagg']}" if c.get("disagg") else ""
    dp = ""
    if c.get("dp", 1) > 1:
        dp = f" DP-attn {c['dp']}" if c.get("engine") == "sglang" else f" x DP {c['dp']}"
    return f"{c['gpu']}{pools} TP {c['tp']}{dp}{pp}{ep} {c['precision']}"


def _parallel_options(spec: ModelSpec, engine: str, tp: int) -> list[tuple[bool, int]]:
    """(expert parallelism, data-parallel attention groups) tried for a TP size. A MoE model
    on more than one GPU: with expert parallelism and without (vLLM --enable-expert-parallel,
    SGLang --ep-size: experts whole on E / EP GPUs instead of every expert sharded). An MLA
    MoE model (whose latent every TP rank holds whole, so TP adds no KV room) also gets data-
    parallel attention with EP filling one node: SGLang TP N with N attention groups (attention
    TP 1), vLLM --data-parallel-size 8 / TP."""
    if not spec.num_experts:
        return [(False, 1)]
    options = [(False, 1), (True, 1)] if tp > 1 else [(False, 1)]
    mla = any(g.kind.value == "mla" for g in spec.kv_groups)
    if mla and engine == "sglang" and tp > 1:
        options.append((True, tp))
    if mla and engine == "vllm" and tp < MAX_TP and MAX_TP % tp == 0:
        options.append((True, MAX_TP // tp))
    return options


def replica_gpus(job: Job) -> int:
    """GPUs of one replica: its TP x PP group, times vLLM's data-parallel ranks (SGLang's
    attention-DP groups live inside its TP group)."""
    from planner.core.parallel import deployment_gpus

    groups = job.groups
    return deployment_gpus(job.question.engine, int(job.tp), int(job.pp), groups, groups)


def _precisions(spec: ModelSpec, card: GpuSpec, asked: list[str] | None) -> list[str]:
    """The weight precisions tried on a card: the checkpoint's own, and fp8 for 16-bit
    checkpoints on cards with fp8 tensor cores (the engines quantize at load); `asked` keeps
    those named."""
    if spec.weight_dtype not in ("bf16", "fp16", "fp32"):
        found = [str(spec.weight_dtype)]
    else:
        found = ["bf16" if spec.native_dtype != "fp16" else "fp16"]
        if card.fp8_dense_flops:
            found.append("fp8")
    if asked is None:
        return found
    return [p for p in found if p in asked or (p == "fp16" and "bf16" in asked)]


def _run_jobs(
    jobs: list[Job],
    workers: int,
    progress: Progress | None,
    evaluate: Callable[[Job], dict[str, Any]],
) -> list[dict[str, Any]]:
    """Every candidate evaluated, in a process pool of `workers` when there is more than one
    (candidates are independent); progress reported as each finishes, order kept."""
    results: list[dict[str, Any] | None] = [None] * len(jobs)
    if workers <= 1 or len(jobs) <= 1:
        for i, job in enumerate(jobs):
            results[i] = evaluate(job)
            if progress is not None:
                progress(job.card.id, job.tp, job.precision)
    else:
        from concurrent.futures import ProcessPoolExecutor, as_completed

        with ProcessPoolExecutor(max_workers=min(workers, len(jobs))) as pool:
            futures = {pool.submit(evaluate, job): i for i, job in enumerate(jobs)}
            for future in as_completed(futures):
                i = futures[future]
                results[i] = future.result()
                if progress is not None:
                    progress(jobs[i].card.id, jobs[i].tp, jobs[i].precision)
    return [r for r in results if r is not None]


def serve_values(job: Job) -> dict[str, Any]:
    """The serve settings of a candidate's instance: engine and release, layout, the longest
    request's context, weights, and the engine extras (a memory calibration measured on this
    card and engine, other tenants' memory, expert parallelism)."""
    from planner.core.parallel import layout_fields

    spec, card, engine = job.question.spec, job.card, job.question.engine
    fp8 = job.precision == "fp8" and spec.weight_dtype in ("bf16", "fp16", "fp32")
    extra: dict[str, Any] = {}
    cal = job.question.calibration
    if cal is not None and cal.gpu == card.id and cal.engine == engine:
        extra["calibration"] = cal
    if job.question.reserved_bytes:
        extra["reserved_bytes"] = job.question.reserved_bytes
    extra |= layout_fields(engine, job.groups, _ep_size(job))
    return (
        {
            "engine": engine,
            "version": job.question.engine_version,
            "tp": job.tp,
            "pp": job.pp,
            "context_tokens": job.question.context_tokens,
            "mean_tokens": job.question.mean_tokens,
            "quantization": "fp8" if fp8 else None,
            "dtype": "auto" if card.supports_bf16 else "half",
            "extra": extra,
        }
        | ({"offload": job.question.offload} if job.question.offload else {})
        | _kv_setting(job)
    )


def _kv_setting(job: Job) -> dict[str, Any]:
    """The KV cache dtype of a candidate's line where --kv-dtype fp8 asked for one (each
    engine's e4m3 spelling); none otherwise: the engine's own default."""
    from planner.core.flags import kv_cache_flag

    q = job.question
    return {"kv_cache_dtype": kv_cache_flag(q.engine, "fp8")} if q.kv_fp8 else {}


def _widened(candidates: list[dict[str, Any]], job: Job, cramped: bool) -> bool:
    """Whether a GPU and precision's widest one-node layout (`job`) is also tried across nodes:
    none of its one-node layouts starts, or (`cramped`: asked) the widest one, without expert
    parallelism, starts but needs more than one replica or keeps the promise at no rate."""
    own = [c for c in candidates if (c["gpu"], c["precision"]) == (job.card.id, job.precision)]
    if not any(c.get("starts") for c in own):
        return True
    if not cramped:
        return False
    widest = [c for c in own if c["tp"] == job.tp and c.get("ep", 1) == 1 and c.get("dp", 1) == 1]
    return any(c.get("starts") and (not c.get("fits") or c["replicas"] > 1) for c in widest)


def job_instance(
    job: Job, as_launched: bool, role: Literal["prefill", "decode"] | None = None
) -> Instance:
    """A candidate's engine instance, planned and timed as `planner simulate` plans it (as
    launched: the engine's running cap; else the plan's advised max_num_seqs); `role`: its
    pool's in a disaggregated unit, with that role's flags."""
    from planner.api.bench_instance import plan_instance

    values = pool_values(job, role)
    return plan_instance(
        gpu=job.card.id,
        preset=job.question.preset,
        model=job.question.model,
        revision=None,
        values=values,
        spec=job.question.spec,
        longest=job.question.context_tokens,
        ep=_ep_size(job),
        calibration=None,
        seed=0,
        as_launched=as_launched,
        attention_groups=job.groups,
    )


def pool_values(job: Job, role: Literal["prefill", "decode"] | None) -> dict[str, Any]:
    """A candidate's serve values (serve_values), as a disaggregated unit's pool of `role`
    runs them: with that role's flags, and SGLang's HiCache on the prefill pool only (a decode
    server refuses it: planner.core.serve.offload_tiers)."""
    from planner.core.disagg import role_values

    values = serve_values(job)
    return values if role is None else role_values(values, job.question.engine, role)


def _ep_size(job: Job) -> int | None:
    """The GPUs a candidate's expert parallelism spans (None: experts sharded)."""
    from planner.core.parallel import moe_ranks

    if not job.ep:
        return None
    return moe_ranks(job.question.engine, int(job.tp), job.groups)


def _at_planned_load(
    job: Job, inst: Instance, cfg: SimConfig, replicas: int, sustained_requests: int
) -> tuple[Trial, int, float]:
    """The promise judged at the planned load (the rate shared by `replicas` replicas and each
    one's data-parallel groups): the trial, the replicas and the rate a group takes. A lower
    rate is judged on fewer requests, so its bound can be looser than the sustainable rate's
    (judged on `sustained_requests`): where it misses, it is judged again on as many requests,
    then with one replica more at a time (at most MAX_ADDED_REPLICAS)."""
    from planner.core.fleet import trial

    # every trial runs the step-time model itself, step by step, as `planner simulate` runs
    # this instance (inst.cost): a cost linearised at the mean context prices the batch's long
    # requests and long prompts' attention at the mean, and judged the promise 25-30% kind (the
    # reference chat workload's p95 TTFT and TPOT on Llama-3.1-70B)
    q, cost, groups = job.question, inst.cost, job.groups
    w, promised = q.workload, q.promise
    at_rate = q.rate_per_s / replicas / groups
    at_load = trial(w, at_rate, cost, cfg, promised, _prefixed(job, inst, cost, cfg, at_rate))
    for added in range(MAX_ADDED_REPLICAS + 1 if not at_load.ok else 0):
        replicas += 1 if added else 0
        at_rate = q.rate_per_s / replicas / groups
        runner = _prefixed(job, inst, cost, cfg, at_rate)
        at_load = trial(w, at_rate, cost, cfg, promised, runner, min_requests=sustained_requests)
        if at_load.ok:
            break
    return at_load, replicas, at_rate


def _prefixed(
    job: Job, inst: Instance, cost: CurveCost, cfg: SimConfig, rate: float
) -> Callable[[Trace], RunState] | None:
    """A trial's runner when requests share a prefix: each trace served from the replica's
    prefix cache at `rate` (planner.api.bench_aggregated.prefix_served, as simulate serves it); None
    (the plain run) without one."""
    prefix = job.question.prefix
    if prefix is None:
        return None
    from planner.api.bench_aggregated import prefix_served
    from planner.sim.engine import execute

    def run(trace: Trace) -> RunState:
        seed = job.question.workload.seed
        served, delay, _ = prefix_served(trace, prefix, inst, None, rate, seed)
        return execute(served, cost, cfg, delay)

    return run


def _sustained(job: Job, inst: Instance, t1_ms: float) -> tuple[Trial, SimConfig] | str:
    """The highest rate one replica (one data-parallel group) keeps the promise at, searched
    over max_num_seqs caps (the KV-bound value and lower ones, which can hold a TPOT the full
    batch misses; the one sustaining the most wins), and the cap it ran at; or why no rate
    from MIN_UTILISATION of the replica's capacity keeps it. `t1_ms`: its single-sequence
    step, for the reason."""
    from planner.core.fleet import (
        MIN_UTILISATION,
        STABLE_UTILISATION,
        missed_by,
        sustainable_rate,
        trial,
    )

    q = job.question
    w, promised, mean = q.workload, q.promise, q.mean_tokens
    mean_prompt, mean_output = q.mean_prompt_tokens, q.mean_output_tokens
    plan, cost = inst.plan, inst.cost
    longest = int(w.prompt_tokens.max + w.output_tokens.max)
    prefix = q.prefix
    if prefix is not None:
        longest += prefix.tokens  # a request may open with the shared prefix
    best = None
    cfg = None
    missed: list[tuple[float, Trial]] = []  # each cap's ceiling and its lowest failed trial
    bounding: Trial | None = None  # the failed trial just above the best rate found
    # max_num_seqs is searched too: the KV-bound value and lower caps, which can hold a
    # TPOT the full batch misses; the one sustaining the most wins.
    for share in SEQS_SHARES:
        seqs = max(1, round(plan.max_num_seqs * share))
        if bounding is not None and bounding.peak_running <= seqs:
            # the rate that failed above the best one never ran this many sequences at once:
            # this cap would not have bound it, and cannot hold it either (a search of its own
            # would differ only in its traces' sampling)
            continue
        trial_cfg = inst.cfg.model_copy(update={"max_batch": seqs})
        if seqs * ceil_div(longest, trial_cfg.block_tokens) <= (trial_cfg.kv_blocks or 0):
            # the pool holds every running request at its longest: it never refuses or
            # preempts one, and simulating without it gives the same run, faster
            trial_cfg = trial_cfg.model_copy(update={"kv_blocks": None, "reserve": None})
        budget = trial_cfg.step_token_budget
        # half the full batch's throughput; a lower cap starts from the rate the last one held
        full_ms = cost.step_ms(seqs, seqs * mean, 0, 0.0)
        guess = seqs / (full_ms / 1000.0) / max(mean_output, 1.0) / 2
        if best is not None:
            guess = best.rate_per_s

        failed: list[Trial] = []
        judged: dict[float, Trial] = {}

        def judge(
            r: float,
            c: SimConfig = trial_cfg,
            m: CurveCost = cost,
            seen: list[Trial] = failed,
            memo: dict[float, Trial] = judged,
        ) -> Trial:
            if r not in memo:
                memo[r] = trial(w, r, m, c, promised, runner=_prefixed(job, inst, m, c, r))
                if not memo[r].ok:
                    seen.append(memo[r])
            return memo[r]

        # the most a replica can serve (utilisation 1): each request costs its output's share
        # of full-batch decode steps plus its prompt at the marginal prefill cost per token
        # (a budget of prompt tokens whose attention spans a mean prompt's pairs)
        decode_ms = full_ms / seqs
        pairs = budget * (mean_prompt + 1) / 2
        prefill_ms = (cost.step_ms(seqs, seqs * mean, budget, pairs) - full_ms) / budget
        ceiling = STABLE_UTILISATION * 1000.0 / (mean_output * decode_ms + mean_prompt * prefill_ms)
        if best is not None and ceiling <= best.rate_per_s:
            break  # a lower cap serves less still: it cannot beat the rate already found
        # a lower cap that misses the promise at the rate already found misses it above too
        if best is None or judge(guess).ok:
            found = sustainable_rate(
                judge, min(guess, ceiling), floor=MIN_UTILISATION * ceiling, ceiling=ceiling
            )
            if found is not None and (best is None or found.rate_per_s > best.rate_per_s):
                best, cfg = found, trial_cfg
            if found is None and failed:
                missed.append((ceiling, min(failed, key=lambda t: t.rate_per_s)))
        above = [t for t in failed if best is None or t.rate_per_s > best.rate_per_s]
        bounding = min(above, key=lambda t: t.rate_per_s) if above else None
        if all(
            t.tpot_ms <= promised.tpot_ms and t.slow_tpot_share <= 1 - promised.goodput
            for t in failed
        ):
            break  # TPOT never bound: a lower cap only queues requests longer
    if best is None:
        served = f"no rate from {MIN_UTILISATION:.0%} of what one replica can serve"
        if not missed:  # no trial ran: the first rate tried was past the capacity
            return f"{served} meets the promise"
        ceiling, lowest = missed[0]
        return (
            f"{served} ({ceiling:.3g} req/s) meets the promise: at "
            f"{lowest.rate_per_s:.3g} req/s {missed_by(lowest, promised)}; "
            f"t(1) = {t1_ms:.1f} ms"
        )
    assert cfg is not None
    return best, cfg


def _candidate(job: Job) -> dict[str, Any]:
    """One candidate (GPU, precision, layout) planned, searched and costed; picklable, so the
    search runs candidates in a process pool."""
    from planner.api.bench_instance import WouldNotStart, started
    from planner.api.bench_report import graph_coverage_notes
    from planner.api.capacity import serve_report
    from planner.api.fleet_curves import layout_curve
    from planner.core.engines import engine_notes
    from planner.core.fleet import costed, missed_by, replicas_for
    from planner.core.parallel import line_max_num_seqs

    q, card, tp, pp = job.question, job.card, job.tp, job.pp
    spec, w, promised, rate, mean = q.spec, q.workload, q.promise, q.rate_per_s, q.mean_tokens
    mean_prompt, mean_output, headroom = q.mean_prompt_tokens, q.mean_output_tokens, q.headroom
    values = serve_values(job)
    groups = job.groups
    per_replica = replica_gpus(job)
    row: dict[str, Any] = {
        "gpu": card.id,
        "tp": tp,
        "ep": _ep_size(job) or 1,
        "dp": groups,
        "dp_attention": groups > 1,
        "pp": pp,
        "precision": job.precision,
        "engine": job.question.engine,
        "price_per_gpu_hour": job.price_per_gpu_hour,
        "calibrated": "calibration" in values["extra"],
    }
    # the replica as `planner simulate` runs it: the engine's scheduler (chunked prefill at the
    # batched-token budget, its KV pool and admission) and step-time model, at the plan's
    # advised max_num_seqs (what the KV cache holds at the mean length)
    try:
        inst = job_instance(job, as_launched=False)
    except WouldNotStart as exc:  # or starts but cannot serve the workload: not a replica
        return row | {"fits": False, "reason": exc.reasons[0], "starts": False}
    except InputError as exc:  # the engine refuses this card or layout (SGLang: OpenAI's MXFP4
        # on a gfx942): not a replica either, whatever the other candidates do
        return row | {"fits": False, "reason": exc.message, "starts": False}
    row["starts"] = True
    plan = inst.plan
    t1_ms = inst.curve.step_ms(1, mean)
    searched = _sustained(job, inst, t1_ms)
    if isinstance(searched, str):
        return row | {"fits": False, "reason": searched}
    best, cfg = searched
    cramped = no_room(t1_ms, promised.tpot_ms, layout_name(row), best.rate_per_s)
    if cramped is not None:
        return row | {"fits": False, "reason": cramped}
    # the search ran one data-parallel group (its own scheduler and KV pool); a replica runs
    # `groups` of them in step, each taking its share of the requests
    best = best.model_copy(update={"rate_per_s": best.rate_per_s * groups})
    replicas = replicas_for(rate, best.rate_per_s, headroom)
    # the layout's curve, as `planner simulate --concurrency N` predicts it for the planned
    # line at its KV-bound max_num_seqs (the rate search may cap it lower for the promise)
    curve_points = layout_curve(
        inst=inst, workload=w, gpus=per_replica, groups=groups, prefix=job.question.prefix
    )
    at_load, replicas, at_rate = _at_planned_load(job, inst, cfg, replicas, best.requests)
    if not at_load.ok:
        return row | {
            "fits": False,
            "reason": f"the promise does not hold at the planned load, {at_rate:.3g} req/s a "
            f"replica: {missed_by(at_load, promised)}",
        }
    seqs = cfg.max_batch
    # SGLang's --max-running-requests is the deployment's, shared among its attention groups
    flag_seqs = line_max_num_seqs(seqs, job.question.engine, groups)
    line = plan
    if seqs != plan.max_num_seqs:  # the launch line at the cap the search chose, re-planned
        line, _ = serve_report(
            gpu=card.id,
            preset=job.question.preset,
            model=job.question.model,
            revision=None,
            gpu_memory_gib=None,
            settings=values | {"max_num_seqs": flag_seqs},
            spec=spec,
        )
        if not line.fits:
            return row | {"fits": False, "reason": line.reasons[0]}
    launched = started(line)
    return (
        row
        | costed(
            best=best,
            at_load=at_load,
            replicas=replicas,
            gpus_per_replica=per_replica,
            price_per_gpu_hour=job.price_per_gpu_hour,
            rate=rate,
            # the prompts as asked for: with the shared prefix they open with
            mean_prompt=mean_prompt + (q.prefix.mean_tokens if q.prefix else 0.0),
            mean_output=mean_output,
        )
        | {
            "max_num_seqs": flag_seqs,  # the line's (SGLang's: shared by its attention groups)
            "kv_cache_tokens": launched.kv_cache_tokens,
            "mean_tokens": mean,
            "engine_version": launched.version,
            "command": line.command,
            "flags": line.flags,
            "curve": curve_points,
            "peak_running_seqs": at_load.peak_running,
            # the release the rules are a stand-in for, what the engine runs other than its
            # flags name, and, at the planned load, steps past its CUDA graphs (floored at the
            # host's launches)
            "notes": engine_notes(launched)
            + graph_coverage_notes(
                job.question.engine, launched, inst.curve, at_load.peak_running, cfg.mixed
            ),
        }
    )
