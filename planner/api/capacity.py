"""Capacity plans by name: resolve the model and GPU, validate settings, plan, lock."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from pydantic import ValidationError

from planner.api.engines import engine_plan
from planner.core.engines import release
from planner.core.engines.common import capability, check_mixed_precision
from planner.core.quantization import (
    check_flag_takes,
    check_quantization_loads,
    checkpoint_method,
    flag_gap,
)
from planner.core.specs import (
    INT8_W8A8_LABEL,
    MODELOPT_NVFP4,
    MODELOPT_NVFP4_METHOD,
    W8A8_INT8_METHOD,
)
from planner.core.step.gemm import FP8_LABELS
from planner.errors import InputError, validation_text
from planner.sources.models import resolve_model
from planner.sources.presets import find_gpu
from planner.units import KV_DTYPES, WEIGHT_DTYPES, normalize_dtype

if TYPE_CHECKING:
    from planner.api.bench_instance import Instance

    # the textbook ledger is imported where it is planned: the engine's plan never reads it
    from planner.core.capacity import CapacityPlan
    from planner.core.engines.calibration import Calibration
    from planner.core.engines.common import EnginePrediction, TermSource
    from planner.core.serve import ServePlan, ServeSettings
    from planner.core.specs import GpuSpec, ModelSpec
    from planner.core.step.model import StepTime
    from planner.plan import EngineInputs, PlanLock

# Default max model length when --context is not given (capped at the model's own maximum).
DEFAULT_CONTEXT_TOKENS = 8192


# CapacitySettings field -> the CLI flag that sets it, so validation errors name the flag.
SETTING_FLAGS = {
    "tp": "--tp",
    "context_tokens": "--context",
    "mean_tokens": "--mean-len",
    "block_tokens": "--block-size",
    "kv_dtype": "--kv-dtype",
    "weight_dtype": "--weight-dtype",
    "headroom_fraction": "--headroom",
    "workspace_bytes": "--workspace-gib",
    "compute_batch_cap": "--compute-batch-cap",
    "hbm_bytes": "--gpu-memory-gib",
    # engine ledger (planner.core.serve.ServeSettings)
    "pp": "--pp",
    "kv_cache_dtype": "--kv-dtype",
    "dtype": "--dtype",
    "quantization": "--quantization",
    "memory_fraction": "--gpu-memory-utilization / --mem-fraction-static",
    "max_num_seqs": "--max-num-seqs / --max-running-requests",
    "block_size": "--block-size",
    "max_num_batched_tokens": "--max-num-batched-tokens / --chunked-prefill-size",
    # KV offload (planner.core.offload.OffloadSettings)
    "kv_offloading_size_gib": "--kv-offloading-size",
    "kv_offloading_backend": "--kv-offloading-backend",
    "hicache_ratio": "--hicache-ratio",
    "hicache_size_gb": "--hicache-size",
    "host_memory_bytes": "--host-memory-gib",
    # prefill/decode disaggregation (planner.core.disagg.DisaggRole)
    "disagg": "--disaggregation-mode / --kv-transfer-config",
}


def settings_error(exc: ValidationError) -> InputError:
    """The first pydantic error as a one-line InputError naming the CLI flag."""
    err = exc.errors()[0]
    key = str(err["loc"][0]) if err["loc"] else "settings"
    if key == "offload" and len(err["loc"]) > 1:
        key = str(err["loc"][1])
    value = err.get("input")
    return InputError(SETTING_FLAGS.get(key, key), f"{validation_text(err)} (got {value!r})")


def capacity_plan(
    *,
    gpu: str,
    preset: str | None = None,
    model: str | None = None,
    revision: str | None = None,
    gpu_memory_bytes: int | None = None,
    **settings: Any,
) -> CapacityPlan:
    """Resolve the model and GPU by name, validate the settings, and plan."""
    from planner.core.capacity import CapacitySettings, plan_capacity

    spec = resolve_model(preset, model, revision)
    provenance: list[str] = []
    device_bytes: int | None = None
    if gpu.strip().lower() == "auto":
        from planner.sources.devices import detect, planning_gpu

        card, device_bytes, provenance = planning_gpu(detect())
    else:
        card = find_gpu(gpu)
    values = dict(settings)
    values.setdefault("context_tokens", min(DEFAULT_CONTEXT_TOKENS, spec.max_context_tokens))
    values.setdefault("mean_tokens", min(DEFAULT_MEAN_TOKENS, values["context_tokens"]))
    kv = values.get("kv_dtype") or spec.native_dtype
    values["kv_dtype"] = normalize_dtype(kv, "--kv-dtype", KV_DTYPES)
    if values.get("weight_dtype") is not None:
        named = str(values["weight_dtype"]).strip().lower()
        values["weight_dtype"] = normalize_dtype(
            FOUR_BIT_FORMATS.get(named, named), "--weight-dtype", WEIGHT_DTYPES
        )
    if gpu_memory_bytes is not None:
        values["hbm_bytes"], values["hbm_basis"] = gpu_memory_bytes, "user"
    elif device_bytes is not None:
        values["hbm_bytes"], values["hbm_basis"] = device_bytes, "device"
    else:
        values["hbm_bytes"], values["hbm_basis"] = card.memory_bytes_marketed, "marketed"
    try:
        parsed = CapacitySettings(**values)
    except ValidationError as exc:
        raise settings_error(exc) from exc
    plan = plan_capacity(spec, card, parsed)
    return plan.model_copy(update={"gpu_provenance": provenance}) if provenance else plan


def capacity_report(
    *,
    gpu: str,
    preset: str | None,
    model: str | None,
    revision: str | None,
    gpu_memory_gib: float | None,
    settings: dict[str, Any],
    engine: dict[str, Any] | None,
) -> tuple[CapacityPlan, EnginePrediction | None]:
    """The textbook plan and, when an engine is named, that engine's prediction."""
    from planner.units import GIB_BYTES

    plan = capacity_plan(
        gpu=gpu,
        preset=preset,
        model=model,
        revision=revision,
        gpu_memory_bytes=round(gpu_memory_gib * GIB_BYTES) if gpu_memory_gib else None,
        **settings,
    )
    if engine is None:
        return plan, None
    flags = dict(engine.get("flags") or {})
    quantization = flags.pop("quantization", None)
    _check_engine_flags(engine.get("name"), flags)
    if engine.get("version"):
        flags["version"] = engine["version"]
    measured = {}
    if gpu_memory_gib:
        measured["total_memory_bytes"] = round(gpu_memory_gib * GIB_BYTES)
    prediction = engine_plan(
        engine=engine["name"],
        gpu=gpu,
        preset=preset,
        model=model,
        revision=revision,
        quantization=quantization,
        measured=measured,
        **flags,
    )
    return plan, prediction


def _check_engine_flags(name: object, flags: dict[str, Any]) -> None:
    """Engine flags name fields of that engine's settings, nothing else."""
    from planner.core.engines.sglang import SglangSettings
    from planner.core.engines.vllm import VllmSettings

    fields = {"vllm": VllmSettings.model_fields, "sglang": SglangSettings.model_fields}
    if name not in fields:
        raise InputError("--engine", f"{name!r}; accepted: vllm, sglang")
    known = set(fields[name])
    for key in flags:
        if key not in known:
            raise InputError(
                f"engine.flags.{key}", f"not a {name} setting; accepted: {', '.join(sorted(known))}"
            )


def lock_for(
    plan: CapacityPlan,
    prediction: EnginePrediction | None,
    *,
    preset: str | None,
    model: str | None,
    revision: str | None,
    gpu: str,
    gpu_memory_gib: float | None,
    settings: dict[str, Any],
    engine: dict[str, Any] | None,
) -> PlanLock:
    """The plan lock file for a textbook plan (with an engine prediction, if one was made)."""
    from planner.core.capacity import capacity_json
    from planner.plan import EngineInputs

    payload = capacity_json(plan)
    if prediction is not None:
        payload["engine"] = prediction.model_dump()
    return _lock(
        payload,
        preset=preset,
        model=model,
        revision=revision,
        gpu=gpu,
        gpu_memory_gib=gpu_memory_gib,
        ledger="textbook",
        settings=dict(settings),
        engine=EngineInputs(**engine) if engine else None,
    )


def _lock(
    payload: dict[str, Any],
    *,
    preset: str | None,
    model: str | None,
    revision: str | None,
    gpu: str,
    gpu_memory_gib: float | None,
    ledger: str,
    settings: dict[str, Any],
    engine: EngineInputs | None,
    calibration: str | None = None,
) -> PlanLock:
    """A plan lock file from a capacity `--json` object and the inputs that made it."""
    from planner import __version__
    from planner.plan import SCHEMA_VERSION, PlanInputs, PlanLock, figures_from

    return PlanLock(
        schema_version=SCHEMA_VERSION,
        planner_version=__version__,
        inputs=PlanInputs(
            preset=preset,
            model=model,
            requested_revision=revision,
            revision=payload["model"]["revision"],
            config_sha256=payload["model"]["config_sha256"],
            gpu=gpu,
            gpu_memory_gib=gpu_memory_gib,
            ledger=ledger,
            settings=settings,
            engine=engine,
            calibration=calibration,
            calibration_sha256=None
            if payload.get("calibration") is None
            else payload["calibration"]["sha256"],
        ),
        figures=figures_from(payload),
        flags=payload["flags"],
    )


# Checkpoint methods the SGLang line leaves unnamed (vLLM's --quantization spells them; SGLang
# takes a checkpoint's method from its config).
SGLANG_READS_FROM_CHECKPOINT = frozenset({"fbgemm_fp8", "quark"})
# Default mean actual tokens per sequence when --mean-len is not given (capped at the context).
DEFAULT_MEAN_TOKENS = 2000
# vLLM runs int8 W8A8 GEMMs from compute capability 7.5 (CutlassScaledMMLinearKernel.
# is_supported, vllm/model_executor/layers/quantization/kernels/scaled_mm/cutlass.py, 0.14.0).
INT8_W8A8_MIN_CAPABILITY = (7, 5)
# --weight-dtype values that name a variant checkpoint of the same architecture (sized by its
# quantization format) rather than an online re-quantization: NVFP4 (ModelOpt), MXFP4, 4-bit
# AWQ for int4, and int8 W8A8 for int8 (compressed-tensors' and SGLang's exports: int8 weights
# multiplying int8 activations).
VARIANT_CHECKPOINTS = {
    "fp4": MODELOPT_NVFP4_METHOD,
    "nvfp4": MODELOPT_NVFP4_METHOD,
    "mxfp4": "mxfp4",
    "int4": "awq",
    "int8": W8A8_INT8_METHOD,
}
# The 4-bit float formats among them, which the textbook ledger sizes at its 4 bits a weight.
FOUR_BIT_FORMATS = {"nvfp4": "fp4", "mxfp4": "fp4"}
# The engines' --quantization method names read as the format each runs, so a launch line's flag
# pastes into --weight-dtype: each variant's method above, AWQ's Marlin kernel, GPTQ and its
# Marlin kernel (read as their 4-bit exports) and ModelOpt's FP8 (vLLM's QUANTIZATION_METHODS,
# vllm/model_executor/layers/quantization/__init__.py; SGLang spells them alike).
ENGINE_QUANTIZATION_NAMES = {
    method: dtype for dtype, method in VARIANT_CHECKPOINTS.items() if dtype != "fp4"
} | {"awq_marlin": "int4", "gptq": "int4", "gptq_marlin": "int4", "modelopt": "fp8"}


# vLLM's Marlin-kernel names for the same AWQ and GPTQ checkpoints (awq_marlin.py /
# gptq_marlin.py in vllm/model_executor/layers/quantization: the weights repacked, their bytes
# alike): on a launch line they name the checkpoint's own method with another kernel.
MARLIN_METHODS = {"awq_marlin": "awq", "gptq_marlin": "gptq"}


def served_weight_dtype(name: str | None) -> str | None:
    """--weight-dtype as typed, an engine's --quantization method read as the format it runs."""
    if name is None:
        return None
    return ENGINE_QUANTIZATION_NAMES.get(name.strip().lower(), name)


def stores_fp8(spec: ModelSpec) -> bool:
    """Whether a checkpoint stores its weights in fp8, in any of the formats the engines read
    as fp8 (its own method: fp8, FBGEMM's, Quark's, compressed-tensors' float8, ModelOpt's)."""
    return spec.weight_dtype.startswith("fp8") or spec.weight_dtype in FP8_LABELS


def _refuse_requantizing(spec: ModelSpec, flag: str, method: str) -> None:
    """Refuse an online quantization method for a checkpoint already quantized in another
    format: vLLM and SGLang serve such a checkpoint as stored, and raise where --quantization
    names another method than its config's ("Quantization method specified in the model config
    (...) does not match the quantization method specified in the `quantization` argument":
    vllm/config/model.py _verify_quantization, 0.34.0; sglang/srt/configs/model_config.py,
    0.5.13), unless the checkpoint's own method overrides it, as ModelOpt's and OpenAI's MXFP4
    do (then the flag is dropped in silence). Either way the weights are the checkpoint's."""
    if spec.weight_dtype in ("bf16", "fp16", "fp32"):
        return
    raise InputError(
        flag,
        f"{method}: {spec.name} is already quantized ({spec.weight_dtype}), and the engines "
        "serve a quantized checkpoint as stored (another --quantization is refused or "
        "ignored); drop it, or give a 16-bit checkpoint to re-quantize",
    )


def pinned_memory_fraction(plan: ServePlan) -> object:
    """The memory fraction to pin when a plan is made again with another running cap: SGLang's
    as this plan resolved it (SGLang sizes its reserve by the running cap, so an unpinned
    heuristic would move the pool); None for vLLM, whose fraction does not move with the cap."""
    if plan.engine != "sglang" or plan.prediction is None:
        return None
    return plan.prediction.settings.get("mem_fraction_static")


def _served_weights(
    spec: ModelSpec, card: GpuSpec, values: dict[str, Any]
) -> tuple[int | None, bool | None]:
    """The weights a line serves: the checkpoint's as stored, a re-stored fp8 copy (online
    --quantization fp8 or another sized method) or a variant checkpoint of the same
    architecture (an NVFP4 / MXFP4 / AWQ export), refused where the engine refuses it. Returns
    their bytes (None: the checkpoint's own) and whether those are exact; takes --weight-dtype
    out of `values` and sets the --quantization the line prints."""
    from planner.core.hf_config import quantized_weights_bytes

    weight_dtype = values.pop("weight_dtype", None)
    if weight_dtype is not None and weight_dtype.strip().lower() == checkpoint_method(spec):
        weight_dtype = None  # the checkpoint's own method named (`modelopt_mixed`, `quark`)
    variant: str | None = None
    if weight_dtype is not None:
        variant = VARIANT_CHECKPOINTS.get(weight_dtype.strip().lower())
        if variant is not None and variant == checkpoint_method(spec):
            # the checkpoint's own format named (as its line's --quantization names it): its
            # weights as stored, the method on the line (below), not a re-stored export
            variant = None
        elif variant is None:
            weight_dtype = normalize_dtype(weight_dtype, "--weight-dtype", WEIGHT_DTYPES)
            sixteen = ("bf16", "fp16")
            if weight_dtype in sixteen and spec.weight_dtype in sixteen:
                # the checkpoint's own 16 bits (the run dtype, bf16 or fp16, is --dtype's)
                weight_dtype = None
            elif weight_dtype in sixteen:
                raise InputError(
                    "--weight-dtype",
                    f"{weight_dtype}: {spec.name} stores {spec.weight_dtype} weights, which the "
                    "engines serve as stored (16 bits needs a 16-bit checkpoint); use --ledger "
                    "textbook to size one",
                )
            elif weight_dtype != "fp8":
                raise InputError(
                    "--weight-dtype",
                    f"{weight_dtype}: the engine ledger re-stores weights as fp8 (online "
                    f"--quantization fp8) or sizes a variant checkpoint "
                    f"({', '.join(VARIANT_CHECKPOINTS)}); use --ledger textbook for others",
                )
            elif stores_fp8(spec):
                weight_dtype = None  # fp8 weights asked of a checkpoint that stores them
            else:
                _refuse_requantizing(spec, "--weight-dtype", "fp8")
                values.setdefault("quantization", "fp8")
    weights = exact = None
    quantization = values.get("quantization")
    # the flag a method asked of the engine came from, for a refusal to name
    asked_by = "--weight-dtype" if weight_dtype is not None else "--quantization"
    engine = str(values.get("engine") or "vllm")
    version = release(engine, str(values["version"]) if values.get("version") else None)
    nvfp4 = variant == MODELOPT_NVFP4_METHOD or (
        variant is None
        and (
            spec.weight_dtype.startswith(MODELOPT_NVFP4)
            # a MIXED_PRECISION export with w4a4 NVFP4 layers (its W4A16 ones run Marlin)
            or "NVFP4" in spec.mixed_precision_algos
        )
    )
    if nvfp4 and engine == "sglang":
        from planner.core.engines import sglang

        sglang.check_nvfp4_experts(spec, card, version)
    int8 = variant == W8A8_INT8_METHOD or spec.weight_dtype == INT8_W8A8_LABEL
    if int8 and capability(card) < INT8_W8A8_MIN_CAPABILITY:
        raise InputError(
            "--weight-dtype" if variant else "--gpu",
            f"int8 W8A8 runs on CUDA compute capability 7.5 and later (vLLM's CUTLASS int8 "
            f"GEMM); the {card.id} has {card.compute_capability}",
        )
    if variant is None and spec.mixed_precision_algos:
        check_mixed_precision(spec, engine, version)
    if variant is not None:
        # A variant checkpoint of the same architecture (an NVFP4 / MXFP4 / AWQ export): the
        # engine reads its quantization from that checkpoint, so no flag is printed for it.
        check_quantization_loads(engine, variant, version, "--weight-dtype")
        weights, exact = quantized_weights_bytes(spec, variant), False
        values["quantization"] = None
    elif quantization is not None and (
        method := MARLIN_METHODS.get(quantization, quantization)
    ) != checkpoint_method(spec):
        from planner.api.engines import SIZED_QUANTIZATIONS

        if method not in SIZED_QUANTIZATIONS:
            raise InputError(
                "--quantization",
                f"{quantization!r}; sized: {', '.join(SIZED_QUANTIZATIONS)} (and "
                f"{', '.join(MARLIN_METHODS)}, their Marlin kernels)",
            )
        _refuse_requantizing(spec, "--quantization", quantization)
        check_flag_takes(engine, quantization, version, asked_by)
        if spec.weight_dtype in ("bf16", "fp16", "fp32"):
            weights, exact = quantized_weights_bytes(spec, method), False
    else:  # the checkpoint's own method (named by the user or not): its weights as stored
        # (a release that cannot load the method does not start: the serve plan says so)
        label = checkpoint_method(spec)
        if label in SGLANG_READS_FROM_CHECKPOINT and engine == "sglang":
            label = None  # not a value of SGLang's flag: it reads the method from the checkpoint
        if label is not None and flag_gap(engine, label, version) is not None:
            label = None  # no such value of this release's flag: it reads the checkpoint's config
        if quantization in MARLIN_METHODS:
            # the kernel the line names stays on it (vLLM runs the AWQ kernel when told `awq`)
            check_flag_takes(engine, quantization, version, "--quantization")
            label = quantization
        values["quantization"] = label
    return weights, exact


def serve_report(
    *,
    gpu: str,
    preset: str | None,
    model: str | None,
    revision: str | None,
    gpu_memory_gib: float | None,
    settings: dict[str, Any],
    tpot_ms: float | None = None,
    speculation: dict[str, Any] | None = None,
    calibration: Calibration | None = None,
    spec: ModelSpec | None = None,
) -> tuple[ServePlan, dict[str, Any]]:
    """The engine-faithful serve plan by name, and its `--json` object (textbook keys + more).

    `calibration`: a profile from `planner calibrate` (planner.core.engines.calibration).
    `spec`: the model already resolved from these names (a search plans many instances of it).
    """
    from planner.core.serve import ServeSettings, plan_serve, serve_json

    if spec is None:
        spec = resolve_model(preset, model, revision)
    card, measured, basis = _card(gpu, gpu_memory_gib)
    values = dict(settings)
    if values.get("max_model_len_auto"):
        # vLLM's `auto` starts from the model's own length and fits it to the KV cache
        values["context_tokens"] = spec.max_context_tokens
    values.setdefault("context_tokens", min(DEFAULT_CONTEXT_TOKENS, spec.max_context_tokens))
    values.setdefault("mean_tokens", min(DEFAULT_MEAN_TOKENS, values["context_tokens"]))
    if values["context_tokens"] > spec.max_context_tokens:
        raise InputError(
            "--context",
            f"{values['context_tokens']:,} exceeds {spec.name}'s maximum of "
            f"{spec.max_context_tokens:,} tokens (the engines refuse it)",
        )
    weights, exact = _served_weights(spec, card, values)
    tp = values.get("tp", 1)
    if not isinstance(tp, int) or tp < 1:
        raise InputError("--tp", f"must be a positive integer (got {tp})")
    from planner.core.kv import check_tp

    # SGLang's attention-DP groups split the TP group: the heads shard over each group's share
    groups = (values.get("extra") or {}).get("attn_dp_size") or 1
    split = isinstance(groups, int) and groups > 1 and tp % groups == 0
    check_tp(spec, tp // groups if split else tp)
    served = None  # the engine instance simulate plans for this line, where a step is asked
    chunk_given = values.get("max_num_batched_tokens") is not None
    if tpot_ms is not None or speculation is not None:
        from planner.api.bench_instance import line_instance, within_mori_chunk
        from planner.units import GIB_BYTES

        def served_with(pinned: dict[str, Any]) -> Instance | None:
            # the gpu as resolved (a detected card's name, its measured memory as the user's)
            return line_instance(
                gpu=card.id,
                preset=preset,
                model=model,
                revision=revision,
                gpu_memory_gib=None if measured is None else measured[0] / GIB_BYTES,
                settings=settings
                | {
                    k: values[k]
                    for k in ("context_tokens", "mean_tokens", "max_model_len_auto")
                    if k in values
                }
                | pinned,
                spec=spec,
                calibration=calibration,
            )

        # where the engine's default chunk is past what MoRI dispatches, the line --tpot prints
        # sets its own within the step budget (as `slo`'s): planned at MoRI's largest
        served, mori_chunk = within_mori_chunk(served_with, tpot_ms is not None and not chunk_given)
        if mori_chunk is not None:
            values["max_num_batched_tokens"] = mori_chunk
    if tpot_ms is not None and served is not None:
        values |= _latency_cap(served, int(values["mean_tokens"]), tpot_ms)
    if calibration is not None:
        values["extra"] = dict(values.get("extra") or {}) | {"calibration": calibration}
    try:
        serve_settings = ServeSettings(**values)
    except ValidationError as exc:
        raise settings_error(exc) from exc
    plan = plan_serve(spec, card, serve_settings, weights, exact, measured=measured)
    if tpot_ms is not None and served is not None and plan.fits and speculation is None:
        # (with speculation each decode takes 1 + k tokens of a vLLM step: the engine's own
        # budget stays)
        budgeted = _latency_budget(served, serve_settings, tpot_ms, plan, chunk_given)
        if budgeted is not None:
            # the step's tokens `planner slo` budgets at this cap, and the pool the engine then
            # plans (the smaller budget frees memory: its cap may hold a few more sequences)
            again = plan_serve(spec, card, budgeted, weights, exact, measured=measured)
            if again.fits:
                serve_settings, plan = budgeted, again
    if serve_settings.max_model_len_auto and plan.prediction is not None:
        # the figures are at the length vLLM fitted
        fitted = int(str(plan.prediction.settings["max_model_len"]))
        serve_settings = serve_settings.model_copy(update={"context_tokens": fitted})
    if speculation is not None and plan.fits and served is not None:
        plan = _with_speculation(plan, spec, served.curve, serve_settings, speculation)
    payload = serve_json(plan, spec, card, serve_settings)
    if speculation is not None:
        payload["speculation"] = plan.speculation
    payload["hbm_basis"] = basis
    # the whole model as loaded (a re-stored or variant checkpoint's size): what a step reads
    # across all the GPUs, split by a data-parallel layout's own sharding
    payload["model"]["loaded_weights_bytes"] = spec.weights_bytes if weights is None else weights
    payload["calibration"] = (
        None
        if calibration is None
        else calibration.model_dump() | {"sha256": calibration.fingerprint()}
    )
    return plan, payload


def _with_speculation(
    plan: ServePlan, spec: ModelSpec, curve: StepTime, s: ServeSettings, options: dict[str, Any]
) -> ServePlan:
    """The serve plan with speculative decoding decided at its own max_num_seqs (as `spec`),
    on `curve`, the step model of the engine instance simulate plans for the line."""
    from planner.api.bench_instance import spec_target
    from planner.core.flags import SPEC_METHODS, check_spec_method, spec_flags
    from planner.core.spec_load import curve_cost, disable_above, load_points
    from planner.core.speculative import validate

    alpha, method = float(options["alpha"]), str(options.get("method", "eagle3"))
    draft_cost = float(options.get("draft_cost", 0.05))
    ks = list(range(1, 17))
    validate([alpha], ks, draft_cost, 0.0)
    if method not in SPEC_METHODS:
        raise InputError("--spec-method", f"{method!r}; accepted: {', '.join(SPEC_METHODS)}")
    if method == "mtp" and spec.mtp_layers == 0:
        raise InputError("--spec-method", f"mtp needs MTP layers; {spec.name} has none")
    step = curve_cost(curve, s.mean_tokens)
    batch = max(1, plan.max_num_seqs)
    point = load_points(step, alpha, ks, [batch], draft_cost)[0]
    stop = disable_above(step, alpha, ks, max(batch, plan.max_seqs_at_mean), draft_cost)
    decision: dict[str, Any] = {
        "alpha": alpha,
        "method": method,
        "k": point.best_k,
        "speedup": point.speedup,
        "concurrency": batch,
        "enable": point.speedup > 1.0,
        "disable_above_concurrency": stop,
    }
    update: dict[str, Any] = {"speculation": decision}
    target = spec_target(plan.engine, plan.prediction, spec)
    check_spec_method(method, plan.engine, target, "--spec-method")
    if decision["enable"]:
        # the engine never runs more than its cap: a stop above it needs no switch (and a
        # batch cap there would raise the plan's)
        off = stop if stop is not None and 1 <= stop < batch else None
        extra = spec_flags(method, point.best_k, None, off, target).model_dump()[plan.engine]
        update["command"] = f"{plan.command} {extra}"
        update["warnings"] = [
            *plan.warnings,
            "speculation is an estimate (docs/method.md §4) and its draft model or head is "
            "not in the memory ledger",
        ]
    else:
        update["warnings"] = [
            *plan.warnings,
            f"speculation at alpha {alpha:g} does not pay at {batch} sequences "
            f"({point.speedup:.2f}x): the line leaves it off",
        ]
    return plan.model_copy(update=update)


def _card(
    gpu: str, gpu_memory_gib: float | None
) -> tuple[GpuSpec, tuple[int, TermSource] | None, str]:
    """The GPU by name, the total memory to plan against if measured, and its basis."""
    from planner.units import GIB_BYTES

    measured: tuple[int, TermSource] | None = None
    basis = "cuda"
    if gpu.strip().lower() == "auto":
        from planner.sources.devices import cuda_runtime_total_bytes, detect, planning_gpu

        card, _device_bytes, _provenance = planning_gpu(detect())
        cuda_total = cuda_runtime_total_bytes()
        basis = "device"
        if cuda_total is not None:
            measured = (cuda_total, "device")
    else:
        card = find_gpu(gpu)
    if gpu_memory_gib:
        measured, basis = (round(gpu_memory_gib * GIB_BYTES), "user"), "user"
    return card, measured, basis


# The workload whose prompt-to-output ratio `capacity --tpot` balances its cap with: `planner
# slo`'s default (presets/workloads/reference.yaml).
BALANCE_WORKLOAD = "reference"


def _latency_cap(served: Instance, mean_tokens: int, tpot_ms: float) -> dict[str, Any]:
    """The batch cap a TPOT budget allows on the served instance's step model (as `planner
    slo` caps it)."""
    from planner.api.latency import step_model_from_curve
    from planner.api.simulate import prompt_per_output
    from planner.core import slo

    curve = served.curve
    step = step_model_from_curve(curve, mean_tokens)
    cap = slo.batch_cap(step, tpot_ms)
    reason = (
        f"TPOT {tpot_ms:g} ms (estimated step time, t(B) = {step.a_ms:.2f} + {step.b_ms:.4f} B ms)"
    )
    # as `planner slo`: the mean step, the prompts the batch's requests bring included
    ratio = prompt_per_output(BALANCE_WORKLOAD)
    balanced = slo.balanced_cap(step, tpot_ms, cap, ratio)
    if balanced < cap:
        reason += (
            f", with the prefill of {ratio:.2f} prompt tokens per output token (the "
            f"{BALANCE_WORKLOAD} workload) inside it"
        )
        cap = balanced
    at_cap = curve.terms(max(1, cap), mean_tokens)
    if at_cap.frontend_ms and at_cap.frontend_ms >= at_cap.step_ms:
        from planner.core.step.overhead import api_server_label

        reason += (
            f" (there {api_server_label(served.engine)[0]} API server, streaming "
            f"{curve.frontend_ms_per_token * 1e3:.0f} us a token, sets the step)"
        )
    elif at_cap.scheduler_ms and at_cap.scheduler_ms >= at_cap.step_ms:
        reason += (
            f" (there the scheduler's work beside the GPU, "
            f"{curve.overlapped_host_ms_per_seq * 1e3:.1f} us a running sequence, sets the step)"
        )
    return {"latency_cap": cap, "latency_reason": reason}


def _latency_budget(
    served: Instance, s: ServeSettings, tpot_ms: float, plan: ServePlan, chunk_given: bool
) -> ServeSettings | None:
    """The line's step budget under a TPOT, as `planner slo` sets it at the plan's running
    cap: vLLM's tokens a step (the decodes plus the prompt tokens that fit inside TPOT),
    SGLang's prefill chunk (the largest inside TPOT), never above the engine's own (or the
    largest MoRI takes, where the plan pinned it). None where the user gave one or the
    engine's own already keeps a step inside TPOT."""
    from planner.api.bench_instance import runs_v0
    from planner.api.latency import step_model_from_curve
    from planner.api.slo import step_budget
    from planner.core.serve import engine_chunk_pages, engine_step_tokens

    if chunk_given or plan.prediction is None:
        return None
    step = step_model_from_curve(served.curve, s.mean_tokens)
    if not step.prefill_ms_per_token:
        return None
    own = engine_step_tokens(plan.prediction)
    page = engine_chunk_pages(plan.prediction)
    v0 = runs_v0(s.engine, plan.prediction)
    values = step_budget(
        step, tpot_ms, plan.max_num_seqs, s.engine, s.version, served.attention_groups, own,
        page, v0,
    )  # fmt: skip
    if values["max_num_batched_tokens"] == own:
        return None  # the engine's own budget already keeps a step inside TPOT
    return s.model_copy(
        update={
            "max_num_batched_tokens": values["max_num_batched_tokens"],
            "extra": s.extra | values.get("extra", {}),
        }
    )


def serve_lock(
    payload: dict[str, Any],
    *,
    preset: str | None,
    model: str | None,
    revision: str | None,
    gpu: str,
    gpu_memory_gib: float | None,
    settings: dict[str, Any],
    tpot_ms: float | None,
    calibration: str | None = None,
) -> PlanLock:
    """The plan lock file for an engine-ledger plan (recomputed by `planner drift`)."""
    from planner.plan import EngineInputs

    stored = {k: v for k, v in settings.items() if k not in ("engine", "version")}
    if tpot_ms is not None:
        stored["tpot_ms"] = tpot_ms
    return _lock(
        payload,
        preset=preset,
        model=model,
        revision=revision,
        gpu=gpu,
        gpu_memory_gib=gpu_memory_gib,
        ledger="engine",
        settings=stored,
        engine=EngineInputs(name=settings.get("engine", "vllm"), version=settings.get("version")),
        calibration=calibration,
    )
