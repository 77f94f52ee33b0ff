"""Serving-benchmark result files: `vllm bench serve --save-result` JSON and SGLang
`bench_serving --output-file` JSONL, read bounded and checked field by field."""

from __future__ import annotations

import hashlib
import math
from typing import Any

from planner.core.engines.calibration import BenchClient, BenchRecord
from planner.errors import InputError
from planner.sim.arrivals import cv_of_burstiness
from planner.sources.files import ARGS_LIMIT_BYTES, parse_json, read_bytes
from planner.units import as_float

FIELD = "--bench"
# A result file with the per-request arrays (input_lens, ttfts, itls, generated texts) of a
# few thousand requests is a few MiB; 64 MiB is far above any.
BENCH_LIMIT_BYTES = 16 * ARGS_LIMIT_BYTES
# The figures a result must print to be fitted on (both tools write these names).
REQUIRED = (
    "completed",
    "total_input_tokens",
    "total_output_tokens",
    "median_tpot_ms",
    "output_throughput",
)


def _number(obj: dict[str, Any], key: str, where: str, *, positive: bool) -> float:
    value = obj.get(key)
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise InputError(
            FIELD,
            f"{where}: {key} is missing or not a number; expected a `vllm bench serve "
            "--save-result` JSON or SGLang bench_serving output",
        )
    number = _finite(value)
    if number is None or number < 0 or (positive and number == 0):
        raise InputError(FIELD, f"{where}: {key} is {str(value)[:40]}, not a usable figure")
    return number


def _finite(value: float) -> float | None:
    """`value` as a finite float, or None (NaN, an infinity, or an integer past float's range,
    which JSON can spell)."""
    number = as_float(value)
    return number if math.isfinite(number) else None


# sglang.bench_serving's backends that read SGLang's native stream (every other backend of
# either tool reads an OpenAI stream: python/sglang/bench_serving.py ASYNC_REQUEST_FUNCS, 0.5.13)
SGLANG_NATIVE_BACKENDS = ("sglang", "sglang-native")


def _client(obj: dict[str, Any]) -> BenchClient | None:
    """The client that read the run's streams: vllm bench serve writes `endpoint_type` (later
    releases `backend` too) and reads OpenAI streams whatever the backend; sglang.bench_serving
    writes `backend` alone, native for its own backend."""
    if "endpoint_type" in obj:
        return "vllm"
    backend = obj.get("backend")
    if not isinstance(backend, str):
        return None
    return "sglang" if backend in SGLANG_NATIVE_BACKENDS else "vllm"


def _record(obj: Any, path: str, where: str, digest: str) -> BenchRecord:
    if not isinstance(obj, dict):
        raise InputError(FIELD, f"{where}: expected one JSON object per result")
    for key in REQUIRED:
        _number(obj, key, where, positive=key != "total_input_tokens")
    completed = int(_number(obj, "completed", where, positive=True))
    concurrency = obj.get("max_concurrency")
    if concurrency is not None and (
        isinstance(concurrency, bool) or not isinstance(concurrency, int) or concurrency < 1
    ):
        raise InputError(FIELD, f"{where}: max_concurrency {concurrency!r} is not a count")
    rate = obj.get("request_rate")
    rate_value: float | None = None
    if isinstance(rate, str) and rate.strip().lower() in ("inf", "infinity"):
        rate_value = math.inf
    elif isinstance(rate, (int, float)) and not isinstance(rate, bool):
        rate_value = as_float(rate)  # an integer past float's range: every request at once
        if math.isnan(rate_value) or rate_value <= 0:
            raise InputError(FIELD, f"{where}: request_rate {rate!r} is not a rate")
    elif rate is not None:
        raise InputError(FIELD, f"{where}: request_rate {rate!r} is not a rate")
    burstiness = obj.get("burstiness")  # vllm bench serve's gamma shape (1.0: Poisson)
    if burstiness is not None:
        if isinstance(burstiness, bool) or not isinstance(burstiness, (int, float)):
            raise InputError(FIELD, f"{where}: burstiness {burstiness!r} is not a gamma shape")
        shape = _finite(burstiness)
        if shape is None:
            shown = str(burstiness)[:40]
            raise InputError(FIELD, f"{where}: burstiness {shown} is not a gamma shape")
        try:
            cv_of_burstiness(shape)
        except InputError as exc:
            raise InputError(FIELD, f"{where}: burstiness {exc.message}") from exc
    return BenchRecord(
        path=path,
        sha256=digest,
        max_concurrency=concurrency,
        request_rate=None if rate_value is None or math.isinf(rate_value) else rate_value,
        burstiness=None if burstiness in (None, 1, 1.0) else _finite(burstiness),
        completed=completed,
        mean_input_tokens=_number(obj, "total_input_tokens", where, positive=False) / completed,
        mean_output_tokens=_number(obj, "total_output_tokens", where, positive=True) / completed,
        median_tpot_ms=_number(obj, "median_tpot_ms", where, positive=True),
        output_throughput=_number(obj, "output_throughput", where, positive=True),
        client=_client(obj),
    )


def read_bench_results(path: str) -> list[BenchRecord]:
    """Every result in one file: a JSON object, or JSON lines (SGLang appends one per run)."""
    raw = read_bytes(path, FIELD, BENCH_LIMIT_BYTES)
    digest = hashlib.sha256(raw).hexdigest()
    text = raw.decode("utf-8", errors="replace").strip()
    if not text:
        raise InputError(FIELD, f"{path}: empty")
    try:
        whole = parse_json(text, FIELD, path)
    except InputError:
        whole = None
    if whole is not None:
        return [_record(whole, path, path, digest)]
    out = []
    for no, line in enumerate(text.splitlines(), start=1):
        if line.strip():
            obj = parse_json(line, FIELD, f"{path} line {no}")
            out.append(_record(obj, path, f"{path} line {no}", digest))
    return out
