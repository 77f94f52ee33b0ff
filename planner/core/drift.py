"""Drift: differences between a committed plan and what is true now.

Three comparisons, each a pure function of parsed inputs: the plan's figures and flags against
a recomputation, its flags against deployed command lines / manifests, and its flags and KV
capacity against a running server's /metrics.
"""

from __future__ import annotations

import shlex
from typing import Any

from pydantic import BaseModel, ConfigDict

from planner.core.engines.vllm import DEFAULT_BLOCK_SIZE
from planner.core.flags import Deployed, parse_argv
from planner.plan import PlanLock


class Difference(BaseModel):
    """One row of the drift report."""

    model_config = ConfigDict(extra="forbid")

    where: str
    key: str
    planned: Any
    actual: Any
    tolerance: str


def _number(value: Any) -> float | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, (int, float)):
        return float(value)
    try:
        return float(str(value))
    except ValueError:
        return None


def _differs(planned: Any, actual: Any, tolerance: float) -> bool:
    p, a = _number(planned), _number(actual)
    if p is not None and a is not None:
        return abs(a - p) > tolerance * abs(p)
    return str(planned) != str(actual)


def compare_figures(
    planned: dict[str, Any], actual: dict[str, Any], tolerance: float, where: str
) -> list[Difference]:
    """Numbers within a relative tolerance, everything else exactly."""
    rows = []
    for key in sorted(planned):
        value = actual.get(key, "(absent)")
        tol = tolerance if _number(planned[key]) is not None else 0.0
        if _differs(planned[key], value, tol):
            rows.append(
                Difference(
                    where=where,
                    key=key,
                    planned=planned[key],
                    actual=value,
                    tolerance=f"{tol:.1%}" if tol else "exact",
                )
            )
    return rows


def line_flags(line: str) -> dict[str, str]:
    """Flags of a planned launch line."""
    got = parse_argv(shlex.split(line), "plan")
    return got.flags if got else {}


def compare_flags(
    planned_line: str, actual: dict[str, str], where: str, skip: tuple[str, ...] = ()
) -> list[Difference]:
    """Every flag the plan sets must be set to the same value (numbers compared as numbers)."""
    rows = []
    for flag, value in sorted(line_flags(planned_line).items()):
        if flag in skip or (flag == "--model" and value.startswith("$")):
            continue
        got = actual.get(flag, "(unset: engine default)")
        if _differs(value, got, 0.0):
            rows.append(
                Difference(where=where, key=flag, planned=value, actual=got, tolerance="exact")
            )
    return rows


def compare_deployed(lock: PlanLock, deployed: Deployed) -> list[Difference]:
    """A deployed command / manifest against the plan's line for that engine."""
    return compare_flags(lock.flags[deployed.engine], deployed.flags, deployed.where)


def planned_kv_tokens(lock: PlanLock) -> int | None:
    """KV tokens per GPU the plan promises: the engine's figure, else the textbook pool."""
    figures = lock.figures
    if "engine.kv_cache_tokens" in figures:
        return int(figures["engine.kv_cache_tokens"])
    pool, per_token = figures.get("kv_pool_bytes"), figures.get("kv_bytes_per_token")
    if pool and per_token:
        return int(pool) // int(per_token)
    return None


def compare_metrics(
    lock: PlanLock,
    samples: dict[str, list[tuple[dict[str, str], float]]],
    where: str,
    tolerance: float,
) -> tuple[list[Difference], str]:
    """vLLM's cache_config_info or SGLang's constant gauges against the plan."""
    rows: list[Difference] = []
    tokens = planned_kv_tokens(lock)
    if "vllm:cache_config_info" in samples:
        labels = samples["vllm:cache_config_info"][0][0]
        planned = line_flags(lock.flags["vllm"])
        checks = (
            ("--gpu-memory-utilization", "gpu_memory_utilization"),
            ("--block-size", "block_size"),
            ("--kv-cache-dtype", "cache_dtype"),
        )
        for flag, label in checks:
            if flag in planned and label in labels and _differs(planned[flag], labels[label], 0):
                rows.append(
                    Difference(
                        where=where,
                        key=label,
                        planned=planned[flag],
                        actual=labels[label],
                        tolerance="exact",
                    )
                )
        actual_tokens = None
        engines = samples["vllm:cache_config_info"]
        if labels.get("kv_cache_size_tokens", "None") != "None":
            actual_tokens = int(float(labels["kv_cache_size_tokens"]))
        elif labels.get("num_gpu_blocks", "None") != "None":
            blocks = int(float(labels["num_gpu_blocks"]))  # summed over DP engines
            block = int(float(labels.get("block_size", DEFAULT_BLOCK_SIZE)))
            actual_tokens = blocks * block // len(engines)
        if tokens and actual_tokens is not None and actual_tokens < tokens * (1 - tolerance):
            rows.append(
                Difference(
                    where=where,
                    key="kv_cache_tokens",
                    planned=tokens,
                    actual=actual_tokens,
                    tolerance=f"{tolerance:.1%}",
                )
            )
        return rows, "ok (vllm:cache_config_info)"
    if "sglang:max_total_num_tokens" in samples:
        actual = int(samples["sglang:max_total_num_tokens"][0][1])
        if tokens and actual < tokens * (1 - tolerance):
            rows.append(
                Difference(
                    where=where,
                    key="max_total_num_tokens",
                    planned=tokens,
                    actual=actual,
                    tolerance=f"{tolerance:.1%}",
                )
            )
        planned = line_flags(lock.flags["sglang"])
        for flag, metric in (
            ("--page-size", "sglang:page_size"),
            ("--context-length", "sglang:context_len"),
        ):
            if flag in planned and metric in samples:
                value = samples[metric][0][1]
                if _differs(planned[flag], value, 0):
                    rows.append(
                        Difference(
                            where=where,
                            key=metric,
                            planned=planned[flag],
                            actual=int(value),
                            tolerance="exact",
                        )
                    )
        return rows, "ok (sglang gauges)"
    return rows, "reachable, but no vllm:cache_config_info or sglang:max_total_num_tokens"
