"""`planner calibrate` by name: start-up logs -> a calibration profile, checked term by term."""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any

from planner.api.engines import LoggedRun, read_logged_run
from planner.core.engines.calibration import (
    Calibration,
    CalibrationLog,
    TermCalibration,
    combine,
    measure,
)
from planner.errors import InputError
from planner.units import GIB_BYTES

if TYPE_CHECKING:
    from planner.core.engines.common import EnginePrediction

# Terms a log can print, per engine, in ledger order.
VLLM_TERMS = (
    "total_memory_bytes",
    "weights_bytes",
    "activation_peak_bytes",
    "non_torch_bytes",
    "cudagraph_bytes",
    "connector_bytes",
)
SGLANG_TERMS = ("total_memory_bytes", "pre_load_free_bytes", "weights_bytes")
# A non-KV remainder off the model by more than this share of the budget usually means a setting
# the log does not print (utilisation, max_num_seqs) differs from the default assumed: say so.
IMPLAUSIBLE_SHARE = 0.10


def modelled_term(predicted: EnginePrediction, name: str) -> int:
    """A term of a prediction; SGLang's pre-load free memory is total less its start-up use."""
    if name == "pre_load_free_bytes":
        from planner.core.engines.sglang import PRE_LOAD_USED_BYTES

        return int(predicted.total_memory_bytes) - PRE_LOAD_USED_BYTES
    return int(getattr(predicted, name))


def logged_available_bytes(run: LoggedRun, predicted: EnginePrediction) -> int | None:
    """The KV budget a log states: its own line, else its block count x the block's bytes."""
    log = run.log
    if log.available_kv_bytes is not None:
        return int(log.available_kv_bytes)
    if log.num_gpu_blocks is not None:
        # the count is a floor: take the middle of the block it was floored from
        return int(log.num_gpu_blocks * predicted.bytes_per_block + predicted.bytes_per_block // 2)
    return None


def measure_run(
    run: LoggedRun,
    predicted: EnginePrediction,
    slope_total: int | None = None,
    others: EnginePrediction | None = None,
) -> list[TermCalibration]:
    """One log's corrections: each printed term, and the non-KV remainder it leaves unsplit.

    `slope_total`: the device total measured across logs at different utilisations, used
    where the log does not print it. A log whose deployment runs a KV connector (LMCache,
    the native offloading connector, NIXL) measures the connector's GPU-side buffers from its
    remainder instead: what is left beyond the activation peak and non-torch memory of
    `others`, the prediction the deployment's logs without a connector calibrate (their
    corrections counted once, in their own terms), else of the model.
    """
    logged: dict[str, int] = dict(run.log.terms)
    names = VLLM_TERMS if run.engine == "vllm" else SGLANG_TERMS
    out = [
        measure(n, logged[n], modelled_term(predicted, n), "printed in the log")
        for n in names
        if n in logged
    ]
    if slope_total is not None and "total_memory_bytes" not in logged:
        logged["total_memory_bytes"] = slope_total
        out.insert(
            0,
            measure(
                "total_memory_bytes",
                slope_total,
                predicted.total_memory_bytes,
                "slope of the KV budget over gpu_memory_utilization across the logs",
            ),
        )
    if run.engine != "vllm" or "non_torch_bytes" in logged:
        return out
    available = logged_available_bytes(run, predicted)
    if available is None or run.flags.get("kv_cache_memory_bytes"):
        return out
    if available <= 0:
        raise InputError("LOG", f"{run.path}: the log's KV budget is 0: nothing to calibrate from")
    # The log prints the budget but not every term: what it leaves beyond the weights (and
    # the graph estimate) is activation + non-torch. The part the model does not explain is a
    # non-torch offset; where the log leaves less than the modelled non-torch memory, the
    # modelled activation peak is the overestimate and takes a ratio instead.
    total = logged.get("total_memory_bytes", predicted.total_memory_bytes)
    util = float(str(predicted.settings["gpu_memory_utilization"]))
    requested = math.ceil(total * util)
    weights = logged.get("weights_bytes", predicted.weights_bytes)
    graph = logged.get("cudagraph_bytes", predicted.cudagraph_bytes)
    activation = logged.get("activation_peak_bytes", predicted.activation_peak_bytes)
    remainder = requested - weights - graph - available
    if run.flags.get("kv_connector"):
        # activation + non-torch + the connector's buffers: what the activation and non-torch
        # memory (as the plain logs calibrate them) do not explain is the connector's
        base = others if others is not None else predicted
        activation = logged.get("activation_peak_bytes", base.activation_peak_bytes)
        logged_connector = remainder - activation - base.non_torch_bytes
        basis = (
            f"{run.flags['kv_connector']}'s GPU-side buffers: total x utilisation - weights - "
            "activation - non-torch - graphs - KV budget"
        )
        out.append(
            measure("connector_bytes", round(logged_connector), predicted.connector_bytes, basis)
        )
        return out
    logged_non_torch = remainder - activation
    if abs(logged_non_torch - predicted.non_torch_bytes) > IMPLAUSIBLE_SHARE * requested:
        run.notes.append(
            f"the log leaves {(logged_non_torch - predicted.non_torch_bytes) / GIB_BYTES:+.2f} "
            "GiB of non-KV memory the model does not explain: check the settings the log does "
            "not print (they are taken as the engine's defaults: gpu_memory_utilization "
            f"{util}, max_num_seqs {predicted.settings.get('max_num_seqs')})"
        )
    basis = "non-KV remainder: total x utilisation - weights - activation - graphs - KV budget"
    if (
        logged_non_torch < predicted.non_torch_bytes
        and "activation_peak_bytes" not in logged
        and predicted.activation_peak_bytes > 0
    ):
        left = remainder - predicted.non_torch_bytes
        if left < 0:
            raise InputError(
                "LOG",
                f"{run.path}: the KV budget it states leaves {left / GIB_BYTES:.2f} GiB for the "
                "activation peak: the log's settings are not what it states (or not one run)",
            )
        out.append(
            measure(
                "activation_peak_bytes",
                left,
                predicted.activation_peak_bytes,
                basis.replace("activation - ", "non-torch - "),
            )
        )
        return out
    out.append(measure("non_torch_bytes", logged_non_torch, predicted.non_torch_bytes, basis))
    return out


def total_from_slope(runs: list[tuple[LoggedRun, EnginePrediction]]) -> int | None:
    """The device total from vLLM logs that differ only in gpu_memory_utilization.

    From 0.9 nothing else in the budget depends on the utilisation, so the KV budget moves by
    exactly total x the utilisation step (a least-squares slope over every such log).
    """
    points = []
    for run, pred in runs:
        available = logged_available_bytes(run, pred)
        if run.engine != "vllm" or available is None or "total_memory_bytes" in run.log.terms:
            return None
        points.append((float(str(pred.settings["gpu_memory_utilization"])), available, run))
    others = [
        {k: v for k, v in r.log.settings.items() if k != "gpu_memory_utilization"}
        for _, _, r in points
    ]
    utils = {u for u, _, _ in points}
    if len(utils) < 2 or any(o != others[0] for o in others):
        return None
    mean_u = sum(u for u, _, _ in points) / len(points)
    mean_a = sum(a for _, a, _ in points) / len(points)
    num = sum((u - mean_u) * (a - mean_a) for u, a, _ in points)
    den = sum((u - mean_u) ** 2 for u, _, _ in points)
    return round(num / den) if den and num > 0 else None


def profile_from(
    runs: list[tuple[LoggedRun, EnginePrediction, list[TermCalibration]]],
) -> Calibration:
    """The profile over several logs of one deployment (the median correction per term)."""
    first_run, first_pred, _ = runs[0]
    return Calibration(
        engine=first_run.engine,
        engine_version=first_pred.version,
        gpu=first_run.gpu_id,
        model=first_run.spec.name,
        tensor_parallel_size=_tp(first_pred),
        pipeline_parallel_size=_pp(first_pred),
        terms=combine([terms for _, _, terms in runs]),
        logs=tuple(
            CalibrationLog(
                path=run.path,
                sha256=run.sha256,
                engine_version=pred.version,
                settings={k: v for k, v in run.log.settings.items() if _plain(v)},
                kv_cache_tokens=run.log.kv_cache_tokens,
                available_kv_bytes=logged_available_bytes(run, pred),
            )
            for run, pred, _ in runs
        ),
    )


def _plain(value: object) -> bool:
    return isinstance(value, (int, float, str, bool)) or value is None


def _tp(p: EnginePrediction) -> int:
    return int(str(p.settings.get("tensor_parallel_size", p.settings.get("tp_size", 1))))


def _pp(p: EnginePrediction) -> int:
    return int(str(p.settings.get("pipeline_parallel_size", p.settings.get("pp_size", 1))))


def _error(predicted: EnginePrediction, run: LoggedRun) -> dict[str, Any]:
    """Predicted vs logged KV figures for one log."""
    logged_tokens = run.log.kv_cache_tokens
    available = logged_available_bytes(run, predicted)
    row: dict[str, Any] = {
        "log": run.path,
        "kv_cache_tokens": {"logged": logged_tokens, "predicted": predicted.kv_cache_tokens},
        "available_kv_bytes": {"logged": available, "predicted": predicted.available_kv_bytes},
    }
    if logged_tokens:
        row["kv_cache_tokens"]["error"] = predicted.kv_cache_tokens / logged_tokens - 1
    if available:
        row["available_kv_bytes"]["error"] = predicted.available_kv_bytes / available - 1
    return row


def _modelled(run: LoggedRun) -> EnginePrediction:
    """The engine model at the log's settings, even where it would leave no KV cache.

    A deployment whose terms the model overestimates is exactly one to calibrate: its terms
    are then read with a nominal KV budget (vLLM's --kv-cache-memory-bytes path).
    """
    from planner.core.engines.common import NoKvCache

    try:
        return run.plan()
    except NoKvCache:
        if run.engine != "vllm":
            raise
        run.no_kv = True
        run.notes.append(
            "the engine model leaves this log's settings no KV cache (the log shows one): its "
            "terms are measured all the same"
        )
        return run.plan(kv_cache_memory_bytes=GIB_BYTES)


def _held_out_error(run: LoggedRun, error: str) -> dict[str, Any]:
    return {"log": run.path, "error": error, "kv_cache_tokens": None}


def _held_out(run: LoggedRun, profile: Calibration) -> dict[str, Any]:
    """One log predicted from a profile of the others (a profile can leave it no KV at all)."""
    from planner.core.engines.common import NoKvCache

    try:
        return _error(run.plan(calibration=profile), run)
    except NoKvCache as exc:
        return _held_out_error(run, str(exc))


def calibrate_report(
    *,
    log_paths: list[str],
    gpu: str | None,
    preset: str | None = None,
    model: str | None = None,
    revision: str | None = None,
    version: str | None = None,
) -> tuple[Calibration, dict[str, Any]]:
    """Read the logs, measure each term, build the profile, and check it on every log."""
    if not log_paths:
        raise InputError("LOG", "give at least one start-up log")
    runs: list[tuple[LoggedRun, EnginePrediction, list[TermCalibration]]] = []
    for path in log_paths:
        run = read_logged_run(
            path, gpu, preset, model, revision, version, field="LOG", require_tokens=False
        )
        runs.append((run, _modelled(run), []))
    first = runs[0][0]
    for run, pred, _ in runs[1:]:
        for what, mine, theirs in (
            ("engine", run.engine, first.engine),
            ("version", pred.version, runs[0][1].version),
            ("GPU", run.gpu_id, first.gpu_id),
            ("model", run.spec.name, first.spec.name),
        ):
            if mine != theirs:
                raise InputError(
                    "LOG",
                    f"{run.path}: {what} {mine} differs from {theirs} in {first.path}: one "
                    "profile is one deployment",
                )
    slope_total = total_from_slope([(r, p) for r, p, _ in runs])
    # the logs without a KV connector first: a connector's logs measure its buffers net of
    # what those calibrate
    has_connector = [bool(r.flags.get("kv_connector")) for r, _, _ in runs]
    plain = [
        (r, p, measure_run(r, p, slope_total))
        for (r, p, _), own in zip(runs, has_connector, strict=True)
        if not own
    ]
    measured = [m for m in plain if m[2]]
    plain_profile = profile_from(measured) if measured else None
    by_run = {id(r): terms for r, _, terms in plain}
    for i, (r, p, _) in enumerate(runs):
        if has_connector[i]:
            others = r.plan(calibration=plain_profile) if plain_profile else None
            by_run[id(r)] = measure_run(r, p, slope_total, others)
    runs = [(r, p, by_run[id(r)]) for r, p, _ in runs]
    if not any(terms for _, _, terms in runs):
        raise InputError(
            "LOG",
            "the logs print no memory term and no KV budget to calibrate from (vLLM: 'Model "
            "loading took', 'Available KV cache memory', the profiling summary; SGLang: 'Load "
            "weight begin/end', 'KV Cache is allocated')",
        )
    profile = profile_from([r for r in runs if r[2]])
    per_log = []
    for run, predicted, _terms in runs:
        calibrated = run.plan(calibration=profile)
        rows = []
        for name in VLLM_TERMS if run.engine == "vllm" else SGLANG_TERMS:
            if name == "connector_bytes" and not run.flags.get("kv_connector"):
                continue
            logged = run.log.terms.get(name)
            rows.append(
                {
                    "term": name,
                    "logged": logged,
                    "predicted": modelled_term(predicted, name),
                    "calibrated": modelled_term(calibrated, name),
                    "source": calibrated.term_sources.get(name),
                }
            )
        entry = {
            "log": run.path,
            "sha256": run.sha256,
            "engine": run.engine,
            "engine_version": predicted.version,
            "terms": rows,
            "uncalibrated": _held_out_error(run, "the model leaves no KV cache")
            if run.no_kv
            else _error(predicted, run),
            "calibrated": _error(calibrated, run),
            "notes": run.notes,
        }
        per_log.append(entry)
    checks = []
    if len(runs) > 1:
        # each log predicted from a profile of the others: what the profile is worth elsewhere
        for i, (run, _pred, _terms) in enumerate(runs):
            rest = [r for j, r in enumerate(runs) if j != i and r[2]]
            if not rest:
                continue
            held_out = profile_from(rest)
            checks.append({"from": [r[0].path for r in rest]} | _held_out(run, held_out))
    report = {
        "profile": profile.model_dump(),
        "logs": per_log,
        "cross_checks": checks,
        "notes": [
            "each term is carried to other settings by its rule: absolute (the device total), "
            "ratio (weights, activation peak, CUDA graphs), offset (non-torch memory, a KV "
            "connector's buffers); see docs/calibrate.md"
        ],
    }
    return profile, report
