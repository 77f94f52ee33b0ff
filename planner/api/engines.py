"""Engine-faithful predictions by name, and re-runs of engine start-up logs."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from pydantic import ValidationError

from planner.errors import InputError, validation_text
from planner.sources.models import resolve_model
from planner.sources.presets import find_gpu

if TYPE_CHECKING:  # numpy stays off the `planner capacity` path
    from pydantic import BaseModel

    from planner.core.engines.common import EnginePrediction
    from planner.core.specs import ModelSpec
    from planner.sources.startup_log import StartupLog


# --quantization values whose weight bytes we can size (online fp8 included).
SIZED_QUANTIZATIONS = ("awq", "gptq", "fp8", "mxfp4", "modelopt_fp4", "bitsandbytes")


def engine_plan(
    *,
    engine: str,
    gpu: str,
    preset: str | None = None,
    model: str | None = None,
    revision: str | None = None,
    quantization: str | None = None,
    measured: dict[str, Any] | None = None,
    engine_mode: str | None = None,
    spec: ModelSpec | None = None,
    **flags: Any,
) -> EnginePrediction:
    """Predict an engine's start-up KV figures (vLLM or SGLang) from names and flags.

    `spec`: the model already resolved from preset / model / revision (read once by callers
    that predict the same model several times).
    """
    from planner.core.engines import sglang, vllm
    from planner.core.hf_config import quantized_weights_bytes

    if spec is None:
        spec = resolve_model(preset, model, revision)
    measured = dict(measured or {})
    if gpu.strip().lower() == "auto":
        from planner.sources.devices import cuda_runtime_total_bytes, detect, planning_gpu

        card, _device_bytes, _provenance = planning_gpu(detect())
        cuda_total = cuda_runtime_total_bytes()
        if cuda_total is not None and "total_memory_bytes" not in measured:
            measured |= {"total_memory_bytes": cuda_total, "total_memory_source": "device"}
    else:
        card = find_gpu(gpu)
    weights = exact = None
    if quantization is not None:
        if quantization not in SIZED_QUANTIZATIONS:
            raise InputError(
                "--quantization", f"{quantization!r}; sized: {', '.join(SIZED_QUANTIZATIONS)}"
            )
        weights, exact = quantized_weights_bytes(spec, quantization), False
    try:
        if engine == "vllm":
            if engine_mode is not None:
                flags["engine"] = engine_mode
            return vllm.predict(
                spec,
                card,
                vllm.VllmSettings(**flags),
                vllm.MeasuredTerms(**measured),
                weights,
                exact,
            )
        if engine == "sglang":
            return sglang.predict(
                spec,
                card,
                sglang.SglangSettings(**flags),
                sglang.MeasuredTerms(**measured),
                weights,
                exact,
            )
    except ValidationError as exc:
        err = exc.errors()[0]
        key = str(err["loc"][0]) if err["loc"] else "settings"
        raise InputError("--" + key.replace("_", "-"), validation_text(err)) from exc
    raise InputError("--engine", f"{engine!r}; accepted: vllm, sglang")


class LoggedRun:
    """A start-up log read for re-running: what it printed, and the plan inputs it implies."""

    def __init__(
        self,
        path: str,
        log: StartupLog,
        sha256: str,
        common: dict[str, Any],
        flags: dict[str, Any],
        field: str = "--from-log",
    ):
        self.path, self.log, self.sha256, self.common, self.flags = path, log, sha256, common, flags
        self.field = field  # the option that named the log (calibrate: LOG)
        self.notes: list[str] = []
        self.no_kv = False  # the engine model leaves the log's settings no KV cache
        self._spec: ModelSpec | None = None

    @property
    def engine(self) -> str:
        return str(self.common["engine"])

    @property
    def spec(self) -> ModelSpec:
        """The model, resolved once for every prediction of this log."""
        if self._spec is None:
            c = self.common
            self._spec = resolve_model(c["preset"], c["model"], c["revision"])
        return self._spec

    @property
    def gpu_id(self) -> str:
        return str(find_gpu(str(self.common["gpu"])).id)

    def plan(self, **extra: Any) -> EnginePrediction:
        """The engine model at the log's settings (plus `extra` engine_plan keywords). A
        setting the engine model refuses came from the log, so the error names the option that
        gave the log (the flags the user typed beside it keep their own names)."""
        try:
            return engine_plan(**self.common, **self.flags, spec=self.spec, **extra)
        except InputError as exc:
            if exc.field in TYPED_WITH_A_LOG:
                raise
            refused = f"{self.path}: a logged setting is refused: {exc.field}: {exc.message}"
            raise InputError(self.field, refused) from exc


# The flags a user types beside --from-log; every other setting comes from the log.
TYPED_WITH_A_LOG = frozenset(
    {"--gpu", "--model", "--preset", "--revision", "--engine-version", "--calibration"}
)


def read_logged_run(
    log_path: str,
    gpu: str | None,
    preset: str | None,
    model: str | None,
    revision: str | None,
    version: str | None,
    field: str = "--from-log",
    require_tokens: bool = True,
) -> LoggedRun:
    """Parse a start-up log and turn its settings into engine_plan inputs."""
    import hashlib

    from planner.sources.files import LOG_LIMIT_BYTES, read_bytes
    from planner.sources.startup_log import parse_startup_log

    # Logs are decoded leniently: a stray byte in a server log is not a reason to refuse it.
    raw = read_bytes(log_path, field, LOG_LIMIT_BYTES)
    log = parse_startup_log(raw.decode("utf-8", errors="replace"), log_path, field, require_tokens)
    if gpu is None:
        raise InputError("--gpu", "the log does not name the GPU; pass --gpu (e.g. h100)")
    if preset is None and model is None:
        if log.model is None:
            raise InputError("--model", "the log names no model; pass --model or --preset")
        model = log.model
    flags: dict[str, Any] = dict(log.settings)
    quantization = flags.pop("quantization", None)
    notes = []
    if version or log.version:
        flags["version"] = version or log.version
    else:
        notes.append("the log names no engine version; pass --engine-version (newest assumed)")
    if log.engine == "vllm" and log.engine_mode:
        flags["engine_mode"] = log.engine_mode
    if log.engine == "sglang":
        flags = {k: v for k, v in flags.items() if k in SGLANG_LOG_KEYS}
    common = {
        "engine": log.engine or "vllm",
        "gpu": gpu,
        "preset": preset,
        "model": model,
        "revision": revision,
        "quantization": quantization,
    }
    run = LoggedRun(log_path, log, hashlib.sha256(raw).hexdigest(), common, flags, field)
    run.notes = notes
    return run


def from_log_report(
    *,
    log_path: str,
    gpu: str | None,
    preset: str | None = None,
    model: str | None = None,
    revision: str | None = None,
    version: str | None = None,
) -> dict[str, Any]:
    """Re-run a logged start-up: pure prediction vs log, and a replay with the logged terms."""
    from planner.core.engines.sglang import MeasuredTerms as SglangMeasured
    from planner.core.engines.vllm import MeasuredTerms as VllmMeasured

    def memory_terms(model: type[BaseModel]) -> list[str]:
        return [f for f in model.model_fields if f.endswith("_bytes")]

    vllm_measured, sglang_measured = memory_terms(VllmMeasured), memory_terms(SglangMeasured)
    run = read_logged_run(log_path, gpu, preset, model, revision, version)
    log, flags, notes, engine = run.log, run.flags, run.notes, run.engine
    predicted = run.plan()
    replayed = run.plan(measured=log.terms)
    measured_fields = sglang_measured if engine == "sglang" else vllm_measured
    missing = [t for t in measured_fields if t not in log.terms]
    if missing:
        notes.append(
            "the log prints no "
            + ", ".join(t.removesuffix("_bytes").replace("_", " ") for t in missing)
            + ": the replay uses the modelled "
            + ("value" if len(missing) == 1 else "values")
            + ", so it can differ from the log by those terms"
        )
    logged: dict[str, Any] = {
        "kv_cache_tokens": log.kv_cache_tokens,
        "num_gpu_blocks": log.num_gpu_blocks,
        "max_concurrency": log.max_concurrency,
        "available_kv_bytes": log.available_kv_bytes,
    } | log.terms
    rows = []
    for key in LOG_TERMS:
        value = logged.get(key)
        mine = getattr(predicted, key, None)
        if value is None or mine is None:
            continue
        diff = mine - value
        relative = diff / value if value else None
        rows.append(
            {
                "term": key,
                "logged": value,
                "predicted": mine,
                "difference": diff,
                "relative": relative,
            }
        )
    head = {
        "engine": engine,
        "version": flags.get("version"),
        "engine_mode": log.engine_mode,
        "model": log.model,
        "settings": log.settings,
        "lines": log.lines_read,
    }
    return {
        "log": head | logged,
        "predicted": predicted.model_dump(),
        "replayed": replayed.model_dump(),
        "differences": rows,
        "notes": notes,
    }


# Terms a log can print, in ledger order.
LOG_TERMS = (
    "total_memory_bytes",
    "pre_load_free_bytes",
    "weights_bytes",
    "activation_peak_bytes",
    "non_torch_bytes",
    "cudagraph_bytes",
    "available_kv_bytes",
    "num_gpu_blocks",
    "kv_cache_tokens",
    "max_concurrency",
)


# Settings an SGLang log carries that SglangSettings takes.
SGLANG_LOG_KEYS = (
    "version",
    "mem_fraction_static",
    "tp_size",
    "chunked_prefill_size",
    "context_length",
    "page_size",
    "kv_cache_dtype",
    "attn_dp_size",
    "dp_size",
    "ep_size",
)
