"""`planner slo` by name: batch caps from latency budgets, validated by simulation."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from planner.api.capacity import capacity_plan
from planner.api.latency import derived_step_model, sim_cost_from, step_model_from_curve
from planner.api.simulate import load_workload, prompt_per_output
from planner.core.reference import (
    REFERENCE_A_MS,
    REFERENCE_B_MS,
    REFERENCE_PREFILL_MS_PER_TOKEN,
)
from planner.core.slo import check_budget
from planner.errors import InputError, PlannerError, validation_text
from planner.units import as_float

if TYPE_CHECKING:  # numpy stays off the `planner capacity` path
    from collections.abc import Callable

    from planner.api.bench_instance import Instance
    from planner.core.capacity import CapacityPlan
    from planner.core.engines.calibration import Calibration
    from planner.core.slo import StepModel
    from planner.sim.cost import CostModel, CurveCost


# The marker of a step model saved with --save-fit (and read back by --fit).
SAVED_FIT_KEY = "planner_step_model"
# The largest batch or step time (ms) a --fit record may state: past a billion either is no
# measurement.
MAX_FIT_FIGURE = 1e9


def read_fit_points(paths: str) -> tuple[list[float], list[float], dict[str, Any] | None]:
    """(batches, step ms, a saved model or None) from --fit files, comma-separated: CSV
    `batch,step_ms`, the JSON `vllm bench serve` saves (max_concurrency, mean_tpot_ms), SGLang
    `bench_one_batch` JSONL (batch_size, median_decode_latency in s), or a --save-fit file."""
    from planner.sources.files import ARGS_LIMIT_BYTES, parse_json, read_text

    batches: list[float] = []
    times: list[float] = []
    for path in [p.strip() for p in paths.split(",") if p.strip()]:
        text = read_text(path, "--fit", ARGS_LIMIT_BYTES)
        if path.endswith(".csv") or text.lstrip().lower().startswith("batch"):
            b, t = _csv_points(text, path)
            batches += b
            times += t
            continue
        try:  # one JSON document (vllm bench serve, --save-fit) ...
            document = parse_json(text, "--fit", path)
            records = document if isinstance(document, list) else [document]
        except InputError:  # ... or JSON lines (SGLang bench_one_batch)
            records = [
                parse_json(line, "--fit", path) for line in text.splitlines() if line.strip()
            ]
        for no, rec in enumerate(records, start=1):
            if not isinstance(rec, dict):
                raise InputError("--fit", f"{path} record {no}: expected a JSON object")
            if SAVED_FIT_KEY in rec:
                return [], [], rec
            batches.append(_positive(rec, ("max_concurrency", "num_prompts", "batch_size"), path))
            if "mean_tpot_ms" in rec:
                times.append(_positive(rec, ("mean_tpot_ms",), path))
            else:
                times.append(_positive(rec, ("median_decode_latency",), path) * 1000.0)
    if not batches:
        raise InputError("--fit", f"{paths}: no measurements")
    return batches, times, None


def _positive(rec: dict[str, Any], keys: tuple[str, ...], path: str) -> float:
    """The first of `keys` present in a record, a finite number > 0."""
    for key in keys:
        value = rec.get(key)
        if value is None:
            continue
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise InputError("--fit", f"{path}: {key} must be a number")
        number = as_float(value)  # an integer JSON spells past float's range: infinite
        if not (math.isfinite(number) and 0 < number < MAX_FIT_FIGURE):
            raise InputError("--fit", f"{path}: {key} must be a finite number > 0")
        return number
    raise InputError("--fit", f"{path}: none of {', '.join(keys)} in the record")


def _csv_points(text: str, path: str) -> tuple[list[float], list[float]]:
    """`batch,step_ms` rows (header required)."""
    import csv

    rows = list(csv.DictReader(text.splitlines()))
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
        if not (math.isfinite(b) and math.isfinite(t)) or b < 1 or t <= 0:
            raise InputError("--fit", f"{path} line {no}: batch >= 1 and step_ms > 0 expected")
        batches.append(b)
        times.append(t)
    return batches, times


def fitted_model(
    paths: str, prefill: float, derived: StepModel | None
) -> tuple[StepModel, list[dict[str, float]]]:
    """The step model --fit learns, and its residuals per measured point."""
    from pydantic import ValidationError

    from planner.core import slo

    batches, times, saved = read_fit_points(paths)
    if saved is not None:
        fields = {k: v for k, v in saved.items() if k != SAVED_FIT_KEY}
        try:
            return slo.StepModel(**fields), []
        except ValidationError as exc:
            err = exc.errors()[0]
            where = ".".join(str(p) for p in err["loc"]) or "model"
            raise InputError(
                "--fit", f"{paths}: not a saved step model ({where}: {validation_text(err)})"
            ) from exc
        except ValueError as exc:
            raise InputError("--fit", f"{paths}: not a saved step model ({exc})") from exc
    if len(set(batches)) >= 2:
        step = slo.fit(batches, times, prefill_ms_per_token=prefill)
    elif derived is not None:
        # One batch measured: keep the derived curve's shape and move it onto the measurement.
        shift = times[0] - derived.step_ms(batches[0])
        curve = derived.curve
        assert curve is not None
        curve = curve.model_copy(update={"overhead_ms": max(0.0, curve.overhead_ms + shift)})
        step = derived.model_copy(
            update={
                "curve": curve,
                "a_ms": max(0.0, derived.a_ms + shift),
                "source": f"derived, anchored on {paths} (1 point)",
            }
        )
    else:
        raise InputError(
            "--fit",
            "one batch size measured: add --preset/--model and --gpu to anchor the derived "
            "model on it, or measure 2 or more batch sizes",
        )
    residuals = [
        {
            "batch": b,
            "measured_ms": t,
            "fitted_ms": step.step_ms(b),
            "residual_pct": 100.0 * (step.step_ms(b) - t) / t,
        }
        for b, t in zip(batches, times, strict=True)
    ]
    return step, residuals


def engine_memory_cap(
    gpu: str | None,
    preset: str | None,
    model: str | None,
    settings: dict[str, Any],
    engine: str = "vllm",
    version: str | None = None,
    revision: str | None = None,
) -> int:
    """Sequences of the mean length the engine's own KV cache holds (the serve plan that
    `planner capacity` prints for the same deployment), 0 when it would not start. LMDeploy's
    cache is not modelled: its step overhead is, so its memory cap is vLLM's."""
    from planner.api.capacity import serve_report

    assert gpu is not None
    values = serve_values(settings, engine, version)
    serve, _payload = serve_report(
        gpu=gpu,
        preset=preset,
        model=model,
        revision=revision,
        gpu_memory_gib=None,
        settings=values,
    )
    return serve.max_seqs_at_mean if serve.fits else 0


def memory_flag(engine: str) -> str:
    """The engine's own flag for the memory share the serve plan's memory_fraction sets, as
    its launch line spells it (core/serve.py's VLLM_FLAGS / SGLANG_FLAGS: not imported here,
    so that a refusal on the CLI's start-up path does not load the serve plan)."""
    return "--mem-fraction-static" if engine == "sglang" else "--gpu-memory-utilization"


def serve_values(settings: dict[str, Any], engine: str, version: str | None) -> dict[str, Any]:
    """The serve plan's settings for slo's: the engine's names for the KV dtype, its release."""
    from planner.core.flags import kv_cache_flag

    keys = ("tp", "pp", "context_tokens", "mean_tokens", "memory_fraction")
    values = {k: v for k, v in settings.items() if k in keys and v is not None}
    values["engine"] = engine if engine in ("vllm", "sglang") else "vllm"
    if version is not None and engine in ("vllm", "sglang"):
        values["version"] = version
    kv = str(settings.get("kv_dtype") or "auto").lower()
    kv = "fp8" if kv.startswith("fp8") else kv  # any fp8 spelling: the fp8 cache, as before
    values["kv_cache_dtype"] = kv_cache_flag(values["engine"], kv)
    if settings.get("weight_dtype") is not None:
        values["weight_dtype"] = settings["weight_dtype"]
    if settings.get("extra"):  # the engine's own flags (its MoE exchange)
        values["extra"] = dict(settings["extra"])
    return values


def slo_advice(
    *,
    tpot_ms: float,
    ttft_ms: float | None = None,
    prompt_tokens: int | None = None,
    output_tokens: int | None = None,
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
    revision: str | None = None,
    memory_fraction: float | None = None,
    batches: list[int] | None = None,
    save_fit: str | None = None,
    engine: str = "vllm",
    engine_version: str | None = None,
    calibration: Calibration | None = None,
    dp: int = 1,
    ep: int | None = None,
    dp_attention: bool = False,
    **settings: Any,
) -> dict[str, Any]:
    """Everything `planner slo` reports, as its documented JSON object (`calibration`: a
    profile with step terms from `planner calibrate --bench`, for the derived model).

    A layout beyond tensor parallelism (`pp` in settings, `dp`, `ep`, `dp_attention`: the
    names and meaning of `capacity` and `simulate`) takes its step model and KV pool from the
    engine instance `simulate` plans; under data-parallel attention the batch is one group's."""
    from planner.core import slo
    from planner.core.parallel import line_max_num_seqs
    from planner.sources.models import check_revision

    check_revision(model, revision)
    prefill = _check_inputs(tpot_ms, ttft_ms, prompt_tokens, prefill_ms_per_token, engine)
    if output_tokens is not None and prompt_tokens is None:
        raise InputError("--prompt-len", "required with --output-len (the ratio of the two)")
    if output_tokens is not None and output_tokens < 1:
        raise InputError("--output-len", f"must be >= 1 (got {output_tokens})")
    where = _Target(
        gpu=gpu,
        preset=preset,
        model=model,
        revision=revision,
        memory_fraction=memory_fraction,
        engine=engine,
        engine_version=engine_version,
        calibration=calibration,
        pp=int(settings.pop("pp", 1) or 1),
        dp=dp,
        ep=ep,
        dp_attention=dp_attention,
        settings=settings,
    )
    source = _StepSource(
        a_ms=a_ms,
        b_ms=b_ms,
        prefill_ms_per_token=prefill_ms_per_token,
        fit_path=fit_path,
        efficiencies=efficiencies or {},
    )
    step, residuals, plan, instance, groups = _resolve_step_model(source, prefill, where)
    if save_fit is not None:
        import json

        from planner.sources.files import write_file

        saved = step.model_dump(exclude={"curve", "context_tokens", "arithmetic"})
        write_file(save_fit, "--save-fit", json.dumps({SAVED_FIT_KEY: 1} | saved, indent=2))
    cap = slo.batch_cap(step, tpot_ms)
    chunk = slo.max_prefill_chunk(step, tpot_ms)
    result = _curve_report(step, tpot_ms, cap, chunk, list(batches or []), residuals)
    if prompt_tokens is not None:
        stall = slo.prefill_ms(step, prompt_tokens)
        result["prefill_stall_ms"] = stall
        if ttft_ms is not None:
            result["ttft_single_prefill_fits"] = stall <= ttft_ms
    if instance is not None:
        result["layout"] = {
            "tp": int(settings.get("tp", 1)),
            "pp": where.pp,
            "dp": dp,
            "ep": ep or 1,
            "attention_groups": groups,
            "step_model": instance.curve.label,
        }
    # the prompt tokens each output token brings: the lengths given, else the workload's
    if prompt_tokens is not None and output_tokens is not None:
        ratio, brought_by = prompt_tokens / output_tokens, "the lengths given"
    else:
        ratio, brought_by = prompt_per_output(workload), f"the {workload} workload"
    budget: dict[str, Any] = {}
    if instance is not None:
        budget, instance, groups = _engine_budget(result, step, where, instance, groups, cap, ratio)
    elif plan is not None:
        memory = engine_memory_cap(
            gpu,
            preset,
            model,
            settings | {"memory_fraction": memory_fraction},
            engine,
            engine_version,
            revision,
        )
        _bind_memory(result, memory, tpot_ms)
    if validate_rate is not None:
        engine_at = None
        as_derived = a_ms is None and b_ms is None and fit_path is None
        if instance is not None and as_derived and not efficiencies and not prefill_ms_per_token:
            # the engine instance simulate runs, planned at each cap tried (its KV pool, token
            # budget and scheduler), serving one data-parallel rank's share of the rate
            def engine_at(seqs: int) -> Instance:
                shared = line_max_num_seqs(seqs, engine, groups)
                return where.instance(budget | {"max_num_seqs": shared}, refused=None)[0]

        result |= _validate_cap(
            step, cap, tpot_ms, ttft_ms, validate_rate, workload, engine_at=engine_at, ranks=dp
        )
        _bind_goodput(result, validate_rate)
    warnings = _bind_prefill(result, step, ratio, brought_by)
    if instance is not None:  # what the engine runs other than the flags name
        warnings = instance.prediction.resolved_notes + warnings
    if engine_version is not None and (plan is not None or instance is not None):
        from planner.core.engines import release_notes

        warnings = release_notes(engine, engine_version) + warnings
    seqs = result["operating_concurrency"]
    # A step of a full batch also carries prefill: budget the decode tokens of every running
    # sequence plus the prompt tokens that still fit inside TPOT (at most the largest chunk).
    room = slo.prefill_room(step, tpot_ms, seqs) if step.prefill_ms_per_token else chunk
    batched = budget["max_num_batched_tokens"] if budget else slo.step_tokens(step, tpot_ms, seqs)
    result["prefill_room_at_full_batch_tokens"] = room
    result["warnings"] = warnings + _room_warnings(room, seqs, tpot_ms, prompt_tokens, ttft_ms)
    if instance is not None:
        # the deployment's own line (as `capacity --tpot` prints it), planned again at these
        # caps so the engine model checks it starts
        caps = budget | {"max_num_seqs": line_max_num_seqs(seqs, engine, groups)}
        result["flags"] = {engine: where.instance(caps, refused="--tpot")[0].plan.command}
    else:
        result["flags"] = _knob_lines(plan, seqs, batched, chunk, engine_version)
    return result


def _engine_budget(
    result: dict[str, Any],
    step: StepModel,
    where: _Target,
    instance: Instance,
    groups: int,
    cap: int,
    ratio: float,
) -> tuple[dict[str, Any], Instance, int]:
    """The step budget at the cap the TPOT and the engine instance's pool allow (as `capacity
    --tpot` sets it), and the instance (with its attention groups) the engine then plans: the
    smaller budget frees memory, and fewer sequences than the engine's default free their
    sampler rows and CUDA graphs. Binds the step budget and the memory cap into `result`."""
    from planner.api.bench_instance import runs_v0
    from planner.core import slo
    from planner.core.parallel import line_max_num_seqs
    from planner.core.serve import engine_chunk_pages, engine_step_tokens

    tpot_ms, engine = float(result["tpot_ms"]), where.engine
    first = slo.balanced_cap(step, tpot_ms, min(instance.plan.max_seqs_at_mean, cap), ratio)
    assert instance.plan.prediction is not None
    own = engine_step_tokens(instance.plan.prediction)
    page = engine_chunk_pages(instance.plan.prediction)
    v0 = runs_v0(engine, instance.plan.prediction)
    budget = step_budget(step, tpot_ms, first, engine, where.engine_version, groups, own, page, v0)
    result["step_budget"] = {"tokens": budget["max_num_batched_tokens"], "at_batch": first}
    running = line_max_num_seqs(first, engine, groups)
    instance, groups = where.instance(budget | {"max_num_seqs": running})
    _bind_memory(result, instance.plan.max_seqs_at_mean, tpot_ms)
    return budget, instance, groups


def _room_warnings(
    room: int, seqs: int, tpot_ms: float, prompt_tokens: int | None, ttft_ms: float | None
) -> list[str]:
    """What the prefill room of a full batch's step (`room` prompt tokens inside TPOT) means
    for the TTFT budget: a prompt needing more such steps than TTFT allows, or no room at all."""
    warnings = []
    if prompt_tokens is not None and ttft_ms is not None and room > 0:
        steps = math.ceil(prompt_tokens / room)
        if steps * tpot_ms > ttft_ms:
            warnings.append(
                f"with {seqs} sequences decoding, a step inside TPOT {tpot_ms:g} ms has room for "
                f"{room} prompt tokens: a {prompt_tokens:,}-token prompt needs {steps} such "
                f"steps (~{steps * tpot_ms:,.0f} ms), over TTFT {ttft_ms:g} ms; lower "
                "--max-num-seqs or raise the budget"
            )
    if room == 0:
        warnings.append(
            f"a full batch of {seqs} fills the TPOT budget: every prefill chunk stretches a "
            f"step past TPOT {tpot_ms:g} ms; lower --max-num-seqs to leave room"
        )
    return warnings


def _curve_report(
    step: StepModel,
    tpot_ms: float,
    cap: int,
    chunk: int,
    batches: list[int],
    residuals: list[dict[str, float]],
) -> dict[str, Any]:
    """slo's report of the step curve and its TPOT cap, before memory, goodput or the prompts
    the requests bring bind it."""
    t1, tcap = step.step_ms(1), step.step_ms(cap)
    return {
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
        "step_budget": None,
        "validation": None,
        "fit_residuals": residuals,
        "step_ms_at": {str(b): step.step_ms(b) for b in batches},
        "terms_at": {str(b): _terms(step, b) for b in batches},
        "curve": [
            {
                "batch": b,
                "step_ms": step.step_ms(b),
                "tok_s": b / step.step_ms(b) * 1000.0,
                "terms": _terms(step, b),
            }
            for b in sorted({1, cap * 2} | {max(1, round(cap * f / 8)) for f in range(1, 13)})
        ],
    }


def _bind_memory(result: dict[str, Any], memory: int, tpot_ms: float) -> None:
    """The KV pool's cap beside the TPOT cap: the smaller binds."""
    cap = result["batch_cap"]
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


def _bind_goodput(result: dict[str, Any], rate: float) -> None:
    """The simulated goodput's cap, where it is below the others."""
    validated = result["validated_cap"]
    if validated < result["operating_concurrency"]:
        result["operating_concurrency"] = validated
        result["binding"] = "latency"
        result["binding_reason"] = (
            f"goodput binds: at {rate:g} req/s the simulated goodput peaks at "
            f"{validated} sequences, below the {result['batch_cap']} the TPOT curve allows"
        )


def _bind_prefill(
    result: dict[str, Any], step: StepModel, ratio: float, brought_by: str
) -> list[str]:
    """The largest batch whose mean step, with the prompts its requests bring (`ratio` prompt
    tokens per output token), stays inside TPOT (as `capacity --tpot` caps it); the warning
    when that is below the other caps."""
    from planner.core import slo

    tpot_ms, seqs = result["tpot_ms"], result["operating_concurrency"]
    result["prompt_tokens_per_output_token"] = ratio
    balanced = slo.balanced_cap(step, tpot_ms, seqs, ratio)
    if balanced >= seqs:
        return []
    mean_ms = slo.mean_step_ms(step, seqs, ratio)
    result["binding"] = "latency"
    result["binding_reason"] = (
        f"latency binds: TPOT {tpot_ms:g} ms allows {result['batch_cap']} sequences on decode "
        f"steps alone, {balanced} with the prefill of the prompts they bring"
    )
    result["operating_concurrency"] = balanced
    return [
        f"a full batch of {seqs} with the prompts its requests bring ({ratio:.2f} prompt "
        f"tokens per output token, {brought_by}) averages {mean_ms:.1f} ms a step, over "
        f"TPOT {tpot_ms:g} ms: the line runs {balanced}"
    ]


def _knob_lines(
    plan: CapacityPlan | None, seqs: int, batched: int, chunk: int, engine_version: str | None
) -> dict[str, str]:
    """Without a deployment (given or fitted coefficients, or an engine the instance model does
    not plan): the caps alone, on each engine's flags."""
    from planner.core.flags import MODEL_PLACEHOLDER

    served = plan.model if plan is not None else None
    ref = served.serve_id if served and served.serve_id else MODEL_PLACEHOLDER
    vllm_line = f"vllm serve {ref} --max-num-seqs {seqs} --max-num-batched-tokens {batched}"
    if _v0_release(engine_version):
        # V0 chunks prompts only with chunked prefill on (its default above 32K): without it a
        # budget under max_model_len (the model's maximum, the line setting none) is refused
        vllm_line += " --enable-chunked-prefill"
    return {
        "vllm": vllm_line,
        "sglang": f"python -m sglang.launch_server --model-path {ref} --max-running-requests "
        f"{seqs} --chunked-prefill-size {max(1, chunk)}",
    }


def step_budget(
    step: StepModel,
    tpot_ms: float,
    batch: int,
    engine: str,
    engine_version: str | None,
    groups: int = 1,
    engine_tokens: int | None = None,
    page: int = 1,
    v0: bool = False,
) -> dict[str, Any]:
    """The serve settings a TPOT sets on a line's step for `batch` running sequences (one
    rank's): vLLM's tokens a step (the decodes plus the prompt tokens that fit inside TPOT:
    slo.step_tokens), SGLang's prefill chunk (the largest inside TPOT, its prefill steps
    running apart from the decodes; the flag is the deployment's, divided among its `groups`
    attention-DP groups: `chunk_divisor`, each group's share whole `page`s, as SGLang asserts).
    A TPOT only lowers the engine's own budget
    (`engine_tokens`, the flag's; a larger one would take KV memory for prefill speed the SLO
    does not ask for). vLLM V0 (`v0`: the plan runs it, a 0.8 - 0.10 release falling back
    included) chunks prompts only with chunked prefill on (its default above 32K): without it
    a budget under max_model_len is refused."""
    from planner.core import slo
    from planner.core.engines.common import parse_version
    from planner.core.engines.sglang import chunk_divisor

    if engine == "vllm":
        tokens = slo.step_tokens(step, tpot_ms, batch)
    else:  # (a chunk of at least one token: SGLang reads 0 as no chunking)
        release = parse_version(engine_version) if engine_version else None
        share = max(1, slo.max_prefill_chunk(step, tpot_ms))
        share = max(page, share // page * page)
        tokens = share * chunk_divisor(groups, release)
    if engine_tokens is not None and engine_tokens > 0:
        tokens = min(tokens, engine_tokens)
    values: dict[str, Any] = {"max_num_batched_tokens": tokens}
    if engine == "vllm" and v0:
        values["extra"] = {"enable_chunked_prefill": True}
    return values


def _v0_release(engine_version: str | None) -> bool:
    """Whether a vLLM release runs the V0 engine by default (before 0.8.0)."""
    from planner.core.engines.common import parse_version
    from planner.core.step.overhead import VLLM_V1_SINCE

    return engine_version is not None and parse_version(engine_version) < VLLM_V1_SINCE


@dataclass(frozen=True)
class _StepSource:
    """Where `slo` takes its step model from: given a and b, a fit of measured points, or the
    derived curve with efficiency overrides (the reference model when none applies)."""

    a_ms: float | None
    b_ms: float | None
    prefill_ms_per_token: float | None
    fit_path: str | None
    efficiencies: dict[str, float]


@dataclass(frozen=True)
class _Target:
    """What `slo` prices where a GPU is given, in its own flags: a model on it under an engine
    release and a layout, with capacity's other flags (`settings`: TP, context, KV and weight
    dtypes); `instance` plans it as a Deployment at the engine's settings."""

    gpu: str | None
    preset: str | None
    model: str | None
    revision: str | None
    memory_fraction: float | None
    engine: str
    engine_version: str | None
    calibration: Calibration | None
    pp: int
    dp: int
    ep: int | None
    dp_attention: bool
    settings: dict[str, Any]

    @property
    def laid_out(self) -> bool:
        """A layout beyond tensor parallelism, which only the engine instance plans."""
        return self.pp > 1 or self.dp > 1 or (self.ep or 1) > 1 or self.dp_attention

    def instance(
        self, caps: dict[str, Any] | None = None, refused: str | None = "--tp/--pp/--dp"
    ) -> tuple[Instance, int]:
        """The engine instance `simulate` plans for these flags (at `caps`: a running cap, a
        step budget), and its attention-DP groups; one that would not start is an error
        naming `refused` (None: the engine model's own)."""
        from planner.api.bench_instance import (
            Deployment,
            WouldNotStart,
            deployment_instance,
            within_mori_chunk,
        )

        assert self.gpu is not None
        values = serve_values(
            self.settings | {"pp": self.pp, "memory_fraction": self.memory_fraction},
            self.engine,
            self.engine_version,
        )

        def planned(pinned: dict[str, Any]) -> tuple[Instance, int]:
            where = Deployment(
                gpu=self.gpu,
                preset=self.preset,
                model=self.model,
                revision=self.revision,
                settings=values | (caps or {}) | pinned,
                dp=self.dp,
                ep=self.ep,
                dp_attention=self.dp_attention,
                calibration=self.calibration,
            )
            return deployment_instance(where)

        try:
            # where the engine's default chunk is past what MoRI dispatches, the line slo
            # prints sets its own (within the step budget): the sizing pass runs at MoRI's
            # largest
            return within_mori_chunk(planned, caps is None)[0]
        except WouldNotStart as e:
            if refused is None:
                raise
            at = "" if caps is None else "at these caps: "
            if self.memory_fraction is not None:  # the memory share given may be why
                refused += "/" + memory_flag(self.engine)
            raise InputError(refused, at + "; ".join(e.reasons)) from e


def _check_inputs(
    tpot_ms: float,
    ttft_ms: float | None,
    prompt_tokens: int | None,
    prefill_ms_per_token: float | None,
    engine: str,
) -> float:
    """Refuse budgets and options no plan can take, naming the flag; the prefill cost per
    token the model will use (the reference one unless given)."""

    check_budget("--tpot", tpot_ms)
    if ttft_ms is not None:
        check_budget("--ttft", ttft_ms)
    if ttft_ms is not None and prompt_tokens is None:
        raise InputError("--prompt-len", "required with --ttft (the prompt the budget covers)")
    if prompt_tokens is not None and prompt_tokens < 1:
        raise InputError("--prompt-len", f"must be >= 1 (got {prompt_tokens})")
    prefill = (
        REFERENCE_PREFILL_MS_PER_TOKEN if prefill_ms_per_token is None else prefill_ms_per_token
    )
    if prefill and prefill < MIN_PREFILL_MS_PER_TOKEN:
        raise InputError(
            "--prefill-ms-per-token",
            f"must be 0 or at least {MIN_PREFILL_MS_PER_TOKEN:g} ms (got {prefill:g})",
        )
    if prefill < 0:
        raise InputError("--prefill-ms-per-token", f"must be >= 0 (got {prefill})")
    if engine not in ("vllm", "sglang", "lmdeploy"):
        raise InputError("--engine", f"{engine!r}; accepted: vllm, sglang, lmdeploy")
    return prefill


def _resolve_step_model(
    source: _StepSource, prefill: float, where: _Target
) -> tuple[StepModel, list[dict[str, float]], CapacityPlan | None, Instance | None, int]:
    """The step model `slo` caps with, the fit's residuals, the capacity plan (None without a
    GPU), the engine instance (vLLM / SGLang: the one `simulate` plans for the same flags, so
    both print one t(B)) and its attention-DP groups."""
    from planner.core import slo
    from planner.core.engines.common import parse_version

    gpu, engine, engine_version = where.gpu, where.engine, where.engine_version
    calibration, settings = where.calibration, where.settings
    version = parse_version(engine_version) if engine_version else None
    plan = None
    residuals: list[dict[str, float]] = []
    stepped = None
    if where.laid_out and (gpu is None or engine not in ("vllm", "sglang")):
        raise InputError(
            "--pp/--dp/--ep",
            "need --gpu, a model and --engine vllm or sglang (the engine lays the ranks out)",
        )
    instance = None
    groups = 1
    if gpu is not None or where.preset is not None or where.model is not None:
        if gpu is None:
            raise InputError("--gpu", "required with --preset/--model")
        try:
            plan = capacity_plan(  # the textbook plan: the engine's own flags are the instance's
                gpu=gpu,
                preset=where.preset,
                model=where.model,
                revision=where.revision,
                **{k: v for k, v in settings.items() if k != "extra"},
            )
        except PlannerError:
            if where.pp < 2:
                raise
            # the textbook plan is one TP group's: a model that needs the pipeline's stages to
            # fit is the engine instance's to plan (below)
            plan = None
        if where.laid_out or engine in ("vllm", "sglang"):
            instance, groups = where.instance()
    if calibration is not None and plan is not None:
        from planner.api.bench_instance import check_step_calibration

        stepped = check_step_calibration(
            calibration, engine, plan.gpu.id, plan.model.name, plan.settings.tp
        )
    elif calibration is not None:
        raise InputError("--calibration", "calibrates a derived model: add --gpu and a model")
    a_ms, b_ms, fit_path = source.a_ms, source.b_ms, source.fit_path
    given = a_ms is not None or b_ms is not None
    if sum([given, fit_path is not None]) > 1:
        raise InputError("--fit", "use one cost source: --a-ms/--b-ms or --fit")
    if given:
        if a_ms is None or b_ms is None:
            raise InputError("--a-ms/--b-ms", "give both a and b")
        if a_ms < 0 or b_ms < 0:
            raise InputError("--a-ms/--b-ms", "must be >= 0")
        step = slo.StepModel(a_ms=a_ms, b_ms=b_ms, prefill_ms_per_token=prefill, source="given")
    elif plan is not None or instance is not None:
        # the derived curve: the engine instance simulate plans for a laid-out deployment,
        # else the plan's TP group
        if instance is not None:
            mean = int(instance.payload["settings"]["mean_tokens"])
            derived = step_model_from_curve(instance.curve, mean, **source.efficiencies)
        else:
            assert plan is not None
            # the KV dtype the engine runs (SGLang picks fp8 for DeepSeek's sparse attention
            # on Blackwell where the flag is auto)
            from planner.core.engines import engine_kv_dtype

            flag = serve_values(settings, engine, engine_version)["kv_cache_dtype"]
            derived = derived_step_model(
                plan,
                engine=engine,
                version=version,
                step_calibration=stepped,
                kv_dtype=engine_kv_dtype(engine, plan.model, plan.gpu, engine_version, flag),
                **source.efficiencies,
            )
        if fit_path is not None:
            step, residuals = fitted_model(fit_path, prefill, derived)
        elif source.prefill_ms_per_token is not None:
            step = derived.model_copy(update={"prefill_ms_per_token": source.prefill_ms_per_token})
        else:
            step = derived
    elif fit_path is not None:
        step, residuals = fitted_model(fit_path, prefill, None)
    else:
        step = slo.StepModel(
            a_ms=REFERENCE_A_MS,
            b_ms=REFERENCE_B_MS,
            prefill_ms_per_token=prefill,
            source="reference",
        )
    return step, residuals, plan, instance, groups


def _terms(step: StepModel, batch: int) -> dict[str, float] | None:
    """The derived model's terms at one batch (None for given or fitted a + b x B)."""
    if step.curve is None or step.context_tokens is None:
        return None
    t = step.curve.terms(batch, step.context_tokens)
    return {
        "memory_ms": t.memory_ms,
        "weights_ms": t.memory_ms - t.attention_ms,
        "attention_ms": t.attention_ms,
        "compute_ms": t.compute_ms,
        "linear_ms": t.linear_ms,
        "dense_linear_ms": t.dense_linear_ms,
        "experts_ms": t.experts_ms,
        "lm_head_ms": t.lm_head_ms,
        "logits_ms": t.logits_ms,
        "kernels_ms": t.kernels_ms,
        "allreduce_ms": t.allreduce_ms,
        "all_to_all_ms": t.all_to_all_ms,
        "overhead_ms": t.overhead_ms,
        "frontend_ms": t.frontend_ms,
        "scheduler_ms": t.scheduler_ms,
        "weights_read_bytes": float(t.weights_read_bytes),
        "kv_read_bytes": float(t.kv_read_bytes),
        "experts_read_per_layer": t.experts_read_per_layer or 0.0,
    }


def _validate_cap(
    step: StepModel,
    cap: int,
    tpot_ms: float,
    ttft_ms: float | None,
    rate: float,
    workload: str,
    engine_at: Callable[[int], Instance] | None = None,
    ranks: int = 1,
) -> dict[str, Any]:
    """Simulate chunked serving at caps up to the curve's and keep the goodput-maximising one.

    `engine_at`: the engine instance planned at a running cap (an engine deployment's derived
    model): each cap runs as `simulate` runs it, its step model, token budget, scheduler and
    KV pool, at one of its `ranks` data-parallel ranks' share of the rate. Without it, the
    a + b x B cost model under a 512-token chunk."""
    from planner.sim.config import SimConfig
    from planner.sim.cost import CostModel
    from planner.sim.engine import simulate
    from planner.sim.workload import MAX_RATE_PER_S, MIN_RATE_PER_S, generate

    if not MIN_RATE_PER_S <= rate <= MAX_RATE_PER_S:
        raise InputError(
            "--rate", f"must be in [{MIN_RATE_PER_S:.3g}, {MAX_RATE_PER_S:g}] req/s (got {rate:g})"
        )
    cost: CostModel | CurveCost = (
        CostModel() if step.source == "reference" else CostModel(**sim_cost_from(step))
    )
    each = rate / max(1, ranks)
    if engine_at is not None:  # the requests `simulate --workload W --rate R` sends one rank
        from planner.api.bench_load import Lengths, Load, bench_trace

        trace = bench_trace(Load(rate_per_s=each), Lengths(workload=workload))[0]
    else:
        trace = generate(load_workload(workload).model_copy(update={"rate_per_s": each}))
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
        if engine_at is not None:
            inst = engine_at(c)
            cost = inst.cost
            cfg = inst.cfg.model_copy(update={"slo_ttft_ms": ttft_slo, "slo_tpot_ms": tpot_ms})
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
            "rate_per_rank_per_s": each,
            "simulator": (
                "the engine instance, as simulate runs it (step model, scheduler, KV pool)"
                if engine_at is not None
                else "a + b x B with prefill per token, 512-token chunks"
            ),
            "workload": workload,
            "slo_ttft_ms": ttft_slo,
            "caps": rows,
        },
    }


# A prefill faster than a nanosecond per token is no GPU's: below it, chunk sizes overflow.
MIN_PREFILL_MS_PER_TOKEN = 1e-6

# docs/method.md §5 sweep: TTFT <= 2,000 ms when --validate runs without --ttft.
VALIDATE_DEFAULT_TTFT_MS = 2000.0
