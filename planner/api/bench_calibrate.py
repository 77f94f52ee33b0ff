"""`planner calibrate --bench`: fit the step model's two free terms to your serving results.

Each result (`vllm bench serve --save-result` JSON, SGLang `bench_serving` output) is replayed
through the benchmark predictor at its own load (concurrency or rate, request count, mean
lengths) on the deployment named by the flags. Two corrections are fitted, by Gauss-Newton on
the median TPOT of every result: a ratio on the time of HBM reads (weights and KV: it scales
with the bytes, so it carries to other batches and contexts) and an offset per step (host and
kernel time the model misses: the same at every batch). One result fits the ratio alone.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from planner.api.bench import benchmark
from planner.api.bench_instance import Deployment
from planner.api.bench_load import Lengths, Load
from planner.core.engines.calibration import BenchRecord, Calibration, StepCalibration
from planner.errors import InputError
from planner.sim.arrivals import cv_of_burstiness
from planner.sources.bench_result import read_bench_results

# Gauss-Newton passes, and the relative TPOT error at which the fit stops early.
FIT_PASSES = 4
FIT_TOLERANCE = 0.002
# Finite-difference steps of the two terms.
SCALE_STEP = 0.1
OFFSET_STEP_MS = 0.5
# Bounds that keep a fitted term physical: HBM reads between 20x faster and 20x slower than
# modelled, a per-step offset within +-1 s.
SCALE_BOUNDS = (0.05, 20.0)
OFFSET_BOUNDS_MS = (-1000.0, 1000.0)


def _replay(record: BenchRecord, where: Deployment, profile: Calibration | None) -> dict[str, Any]:
    """The predictor at one result's load and mean lengths."""
    # vllm bench serve's --burstiness: gamma gaps (a paced or open-loop rate's)
    cv = None if record.burstiness is None else cv_of_burstiness(record.burstiness)
    if record.max_concurrency is not None:
        # with a finite rate too: released at the rate, at most N in flight (paced)
        load = Load(
            concurrency=record.max_concurrency,
            rate_per_s=record.request_rate,
            cv=cv if record.request_rate is not None else None,
            requests=record.completed,
        )
    elif record.request_rate is not None:
        load = Load(rate_per_s=record.request_rate, cv=cv, requests=record.completed)
    else:
        load = Load(rate_per_s=math.inf, requests=record.completed)
    lengths = Lengths(
        prompt_len=max(1, round(record.mean_input_tokens)),
        output_len=max(2, round(record.mean_output_tokens)),
    )
    return benchmark(
        where.model_copy(update={"calibration": profile}),
        load=load,
        lengths=lengths,
        client=record.client,
    )


def bench_calibration(
    *,
    bench_paths: list[str],
    gpu: str,
    preset: str | None,
    model: str | None,
    revision: str | None = None,
    settings: dict[str, Any],
    dp: int = 1,
) -> tuple[Calibration, dict[str, Any]]:
    """Fit the step terms on the results; the profile and a per-result report."""
    if not bench_paths:
        raise InputError("--bench", "give at least one benchmark result file")
    records = [r for path in bench_paths for r in read_bench_results(path)]
    where = Deployment(
        gpu=gpu, preset=preset, model=model, revision=revision, settings=settings, dp=dp
    )
    first = _replay(records[0], where, None)
    d = first["deployment"]
    base = Calibration(
        engine=d["engine"],
        engine_version=d["engine_version"],
        gpu=d["gpu"],
        model=d["model"],
        tensor_parallel_size=d["tp"],
        pipeline_parallel_size=d["pp"],
        benchmarks=tuple(records),
    )
    measured = np.asarray([r.median_tpot_ms for r in records])

    def tpots(scale: float, offset: float) -> tuple[np.ndarray, list[dict[str, Any]]]:
        step = StepCalibration(
            memory_scale=scale, step_offset_ms=offset, basis="fit", results=len(records)
        )
        profile = base.model_copy(update={"step": step})
        runs = [_replay(r, where, profile) for r in records]
        return np.asarray([x["median_tpot_ms"] for x in runs]), runs

    before, before_runs = tpots(1.0, 0.0)
    scale, offset = 1.0, 0.0
    now, runs = before, before_runs
    for _ in range(FIT_PASSES):
        if np.max(np.abs(now - measured) / measured) < FIT_TOLERANCE:
            break
        ds = SCALE_STEP * scale
        by_scale = (tpots(scale + ds, offset)[0] - now) / ds
        columns = [by_scale]
        if len(records) > 1:
            columns.append((tpots(scale, offset + OFFSET_STEP_MS)[0] - now) / OFFSET_STEP_MS)
        jacobian = np.stack(columns, axis=1)
        delta = np.linalg.lstsq(jacobian, measured - now, rcond=None)[0]
        scale = float(np.clip(scale + delta[0], *SCALE_BOUNDS))
        if len(records) > 1:
            offset = float(np.clip(offset + delta[1], *OFFSET_BOUNDS_MS))
        now, runs = tpots(scale, offset)
    fitted = (
        "HBM-read time ratio and per-step offset"
        if len(records) > 1
        else ("HBM-read time ratio (one result: no offset)")
    )
    step = StepCalibration(
        memory_scale=scale,
        step_offset_ms=offset,
        basis=f"{fitted}, fitted on the median TPOT of {len(records)} serving result(s)",
        results=len(records),
    )
    profile = base.model_copy(update={"step": step})
    rows = []
    for r, b, a in zip(records, before_runs, runs, strict=True):
        rows.append(
            {
                "result": r.path,
                "max_concurrency": r.max_concurrency,
                "request_rate": r.request_rate,
                "measured": {
                    "median_tpot_ms": r.median_tpot_ms,
                    "output_throughput": r.output_throughput,
                },
                "uncalibrated": _figures(b, r),
                "calibrated": _figures(a, r),
            }
        )
    report = {
        "profile": profile.model_dump(),
        "results": rows,
        "deployment": d,
        "notes": [
            "a step calibration holds for this deployment (engine, GPU, model, TP); "
            "--calibration refuses it elsewhere",
        ],
    }
    return profile, report


def _figures(run: dict[str, Any], record: BenchRecord) -> dict[str, float]:
    """Predicted TPOT and output throughput with their errors against the result."""
    tpot, tput = run["median_tpot_ms"], run["output_throughput"]
    return {
        "median_tpot_ms": tpot,
        "tpot_error": (tpot - record.median_tpot_ms) / record.median_tpot_ms,
        "output_throughput": tput,
        "throughput_error": (tput - record.output_throughput) / record.output_throughput,
    }
