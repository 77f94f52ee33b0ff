"""Drift: differences between a committed plan and what is true now.

Three comparisons, each a pure function of parsed inputs: the plan's figures and flags against
a recomputation, its flags against deployed command lines / manifests, and its flags and KV
capacity against a running server's /metrics.
"""

from __future__ import annotations

import math
import shlex
from typing import Any

from pydantic import BaseModel, ConfigDict

from planner.core.diagnose import Samples
from planner.core.engines import vllm
from planner.core.engines.vllm import DEFAULT_BLOCK_SIZE
from planner.core.flags import ENGINE_FLAG_DEFAULTS, Deployed, parse_argv
from planner.plan import PlanLock, figures_from


class Difference(BaseModel):
    """One row of the drift report."""

    model_config = ConfigDict(extra="forbid")

    where: str
    key: str
    planned: Any
    actual: Any
    tolerance: str


def _number(value: Any) -> float | None:
    """A finite number, or None (text, NaN and infinities compare as text)."""
    if isinstance(value, bool):
        return None
    try:
        number = float(value) if isinstance(value, (int, float)) else float(str(value))
    except (ValueError, OverflowError):
        return None
    return number if math.isfinite(number) else None


def _count(value: Any) -> int | None:
    """A finite, non-negative count read from a metric (labels are text), or None."""
    number = _number(value)
    return int(number) if number is not None and number >= 0 else None


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


# Capacity figures an engine upgrade is checked on: a drop beyond the tolerance is drift.
CAPACITY_KEYS = (
    "engine.kv_cache_tokens",
    "engine.available_kv_bytes",
    "max_seqs_paged",
    "operating_concurrency",
)


def compare_losses(
    planned: dict[str, Any], actual: dict[str, Any], tolerance: float, where: str
) -> list[Difference]:
    """Capacity figures that fell by more than the tolerance (a gain is not drift)."""
    rows = []
    for key in CAPACITY_KEYS:
        before, after = _number(planned.get(key)), _number(actual.get(key))
        if before is None or after is None:
            continue
        if after < before * (1 - tolerance):
            rows.append(
                Difference(
                    where=where,
                    key=key,
                    planned=planned[key],
                    actual=actual[key],
                    tolerance=f"-{tolerance:.1%}",
                )
            )
    return rows


def line_flags(line: str) -> dict[str, str]:
    """Flags of a planned launch line."""
    got = parse_argv(shlex.split(line), "plan")
    return got.flags if got else {}


def planned_prefix_caching(flags: dict[str, str]) -> bool | None:
    """Prefix caching as a vLLM line states it (--enable-prefix-caching or its --no- form), or
    None where the line leaves it to the release's default (which depends on the model)."""
    if "--no-enable-prefix-caching" in flags:
        return False
    if "--enable-prefix-caching" in flags:
        return flags["--enable-prefix-caching"].lower() != "false"
    return None


def compare_flags(
    planned_line: str,
    actual: dict[str, str],
    where: str,
    defaults: dict[str, str] | None = None,
    skip: tuple[str, ...] = (),
) -> list[Difference]:
    """Every flag the plan sets must be set to the same value (numbers compared as numbers).

    A flag left out counts as the engine's default where `defaults` knows it.
    """
    rows = []
    for flag, value in sorted(line_flags(planned_line).items()):
        if flag in skip or value.startswith("$"):
            continue  # a shell variable the operator sets on each host ($MODEL, $NODE_RANK)
        default = (defaults or {}).get(flag)
        got = actual.get(flag, default if default is not None else "(unset: engine default)")
        if _differs(value, got, 0.0):
            if flag not in actual and default is not None:
                got = f"(unset: default {default})"
            rows.append(
                Difference(where=where, key=flag, planned=value, actual=got, tolerance="exact")
            )
    return rows


def compare_deployed(lock: PlanLock, deployed: Deployed) -> list[Difference]:
    """A deployed command / manifest against the plan's line for that engine."""
    if deployed.engine not in lock.flags:
        planned = ", ".join(sorted(lock.flags)) or "none"
        return [
            Difference(
                where=deployed.where,
                key="engine",
                planned=planned,
                actual=deployed.engine,
                tolerance="exact",
            )
        ]
    return compare_flags(
        lock.flags[deployed.engine],
        deployed.flags,
        deployed.where,
        ENGINE_FLAG_DEFAULTS.get(deployed.engine),
    )


def planned_kv_tokens(lock: PlanLock) -> int | None:
    """KV tokens per GPU the plan promises: the engine's figure, else the textbook pool."""
    figures = lock.figures
    if "engine.kv_cache_tokens" in figures:
        return _count(figures["engine.kv_cache_tokens"])
    pool, per_token = (
        _count(figures.get("kv_pool_bytes")),
        _count(figures.get("kv_bytes_per_token")),
    )
    if pool and per_token:
        return pool // per_token
    return None


def _model_differs(lock: PlanLock, samples: Samples, where: str) -> list[Difference]:
    """The served model against the plan's, by its last path component (a local folder of
    the same checkpoint matches its Hub id; a --served-model-name alias does not)."""
    from planner.core.diagnose import served_models

    served = served_models(samples)
    planned = next(
        (m for m in (line_flags(line).get("--model") for line in lock.flags.values()) if m), None
    )
    if not served or planned is None or planned.startswith("$"):
        return []

    def checkpoint(name: str) -> str:
        return name.rstrip("/").rsplit("/", 1)[-1].lower()

    if checkpoint(planned) in {checkpoint(name) for name in served}:
        return []
    actual = ", ".join(sorted(served))
    return [Difference(where=where, key="model", planned=planned, actual=actual, tolerance="exact")]


# --kv-cache-dtype spellings vLLM rewrites before its config is reported, so that
# cache_config_info's cache_dtype names another: DeepSeek-V3.2's fp8 layout (0.11: auto and fp8
# spellings, 0.12-0.17: fp8 spellings) and its bfloat16 (reported as auto from 0.11)
# (vllm/model_executor/models/config.py DeepseekV32ForCausalLM).
# What vLLM reports for `auto` where it runs the FP8 KV cache a checkpoint declares (0.14+:
# utils/torch_utils.py MODELOPT_TO_VLLM_KV_CACHE_DTYPE_MAP's fp8_e4m3; an llm-compressor scheme
# sets plain fp8 in the attention layer).
VLLM_CHECKPOINT_FP8_SPELLINGS = frozenset({"fp8_e4m3", "fp8"})
VLLM_RESOLVED_KV_DTYPES = frozenset(
    {
        ("auto", vllm.DS_MLA_FLAG),
        ("fp8", vllm.DS_MLA_FLAG),
        ("fp8_e4m3", vllm.DS_MLA_FLAG),
        ("fp8_e5m2", vllm.DS_MLA_FLAG),
        ("bfloat16", "auto"),
    }
)


def compare_recomputed(
    lock: PlanLock, payload: dict[str, Any], tolerance: float, where: str = "recompute"
) -> list[Difference]:
    """The plan made again now (`payload`, the plan's JSON) against the lock: the config's hash
    and the model's revision exactly, every figure within `tolerance`, each engine's line flag
    by flag. A local model folder is spelled relative to wherever the plan was made; its
    content is pinned by the hash, so the path itself is not compared."""
    i = lock.inputs
    rows: list[Difference] = []
    recomputed_sha = payload["model"]["config_sha256"]
    recomputed_rev = payload["model"]["revision"]
    if i.config_sha256 and recomputed_sha != i.config_sha256:
        rows.append(
            Difference(
                where=where,
                key="model.config_sha256",
                planned=i.config_sha256[:12],
                actual=(recomputed_sha or "")[:12],
                tolerance="exact",
            )
        )
    if i.revision and recomputed_rev and recomputed_rev != i.revision:
        rows.append(
            Difference(
                where=where,
                key="model.revision",
                planned=i.revision,
                actual=recomputed_rev,
                tolerance="exact",
            )
        )
    rows += compare_figures(lock.figures, figures_from(payload), tolerance, where)
    skip = ("--model",) if payload["model"]["source"] == "local" else ()
    for engine, line in sorted(lock.flags.items()):
        actual = payload["flags"].get(engine, "")
        rows += compare_flags(line, line_flags(actual), f"{where} {engine}", skip=skip)
    return rows


def compare_metrics(
    lock: PlanLock,
    samples: Samples,
    where: str,
    tolerance: float,
) -> tuple[list[Difference], str]:
    """vLLM's cache_config_info or SGLang's constant gauges against the plan, and the model
    the server names against the plan's."""
    rows: list[Difference] = _model_differs(lock, samples, where)
    if "vllm:cache_config_info" in samples:
        rows += _vllm_differences(lock, samples, where, tolerance)
        return rows, "ok (vllm:cache_config_info)"
    if "sglang:max_total_num_tokens" in samples:
        rows += _sglang_differences(lock, samples, where, tolerance)
        return rows, "ok (sglang gauges)"
    return rows, "reachable, but no vllm:cache_config_info or sglang:max_total_num_tokens"


def _vllm_differences(
    lock: PlanLock,
    samples: Samples,
    where: str,
    tolerance: float,
) -> list[Difference]:
    """vLLM's cache_config_info against the plan: the memory share, block size, KV dtype and
    prefix caching exactly (each as vLLM reports what it resolved the flag to), and the KV
    tokens within `tolerance` of those planned."""
    rows: list[Difference] = []
    tokens = planned_kv_tokens(lock)
    planned = _vllm_planned(lock)
    labels = _vllm_resolved(samples["vllm:cache_config_info"][0][0], planned, lock)
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
    stated = planned_prefix_caching(planned)
    served = labels.get("enable_prefix_caching")
    if stated is not None and served in ("True", "False") and served != str(stated):
        rows.append(
            Difference(
                where=where,
                key="enable_prefix_caching",
                planned=str(stated),
                actual=served,
                tolerance="exact",
            )
        )
    raw, actual_tokens = _vllm_kv_tokens(
        labels, len(samples["vllm:cache_config_info"]), planned, lock
    )
    if (
        tokens
        and raw != "None"
        and (actual_tokens is None or actual_tokens < tokens * (1 - tolerance))
    ):
        rows.append(
            Difference(
                where=where,
                key="kv_cache_tokens",
                planned=tokens,
                actual=raw if actual_tokens is None else actual_tokens,
                tolerance=f"{tolerance:.1%}",
            )
        )
    return rows


def _vllm_planned(lock: PlanLock) -> dict[str, str]:
    """The plan's vLLM flags as vLLM reports them: an SGLang plan's page size as the block size
    (nothing else means the same), and the block the plan runs where vLLM raises it past the
    flag (a hybrid model's)."""
    planned = line_flags(lock.flags.get("vllm", ""))
    if not planned:
        sglang_line = line_flags(lock.flags.get("sglang", ""))
        if "--page-size" in sglang_line:
            planned = {"--block-size": sglang_line["--page-size"]}
    if "engine.block_size" in lock.figures and "--block-size" in planned:
        planned = planned | {"--block-size": str(lock.figures["engine.block_size"])}
    return planned


def _vllm_resolved(
    labels: dict[str, str], planned: dict[str, str], lock: PlanLock
) -> dict[str, str]:
    """cache_config_info's labels with what vLLM resolved a flag to read as the flag planned:
    an unset memory share as the release's default, a KV dtype spelling vLLM rewrote (or the
    checkpoint's FP8 cache that `auto` runs) as the flag."""
    labels = dict(labels)
    if labels.get("gpu_memory_utilization") == "None":
        # vLLM 0.34 leaves the field unset and resolves it by the sizing mode: 1.0 with the
        # extensible KV cache, 0.92 without (config/cache.py resolved_gpu_memory_utilization)
        extensible = labels.get("enable_extensible_kv_cache", "True") != "False"
        labels["gpu_memory_utilization"] = str(
            vllm.EXTENSIBLE_DEFAULT_UTILIZATION
            if extensible
            else vllm.rules_for(vllm.NEWEST_VERSION).default_gpu_memory_utilization
        )
    if (planned.get("--kv-cache-dtype"), labels.get("cache_dtype")) in VLLM_RESOLVED_KV_DTYPES:
        # the spelling vLLM rewrote the flag to for DeepSeek-V3.2 is the flag as planned
        labels["cache_dtype"] = planned["--kv-cache-dtype"]
    elif (
        planned.get("--kv-cache-dtype") == "auto"
        and labels.get("cache_dtype") in VLLM_CHECKPOINT_FP8_SPELLINGS
        and lock.figures.get("engine.kv_dtype") == "fp8"
    ):
        # `auto` resolved to the FP8 cache the checkpoint declares, as the plan ran it
        labels["cache_dtype"] = "auto"
    return labels


def _vllm_kv_tokens(
    labels: dict[str, str], engines: int, planned: dict[str, str], lock: PlanLock
) -> tuple[Any, int | None]:
    """The KV tokens a vLLM server reports (per engine, from its blocks where the label is
    older: summed over `engines` DP engines, at the block the scrape names, else the plan's),
    and the raw label value shown where it does not read as a count."""
    raw: Any = labels.get("kv_cache_size_tokens", "None")
    actual_tokens = _count(raw)
    if raw == "None":
        raw = labels.get("num_gpu_blocks", "None")
        blocks = _count(raw)  # summed over DP engines
        # a scrape without the block label: the block the plan runs (else vLLM's default)
        planned_block = lock.figures.get("engine.block_size") or planned.get(
            "--block-size", DEFAULT_BLOCK_SIZE
        )
        block = _count(labels.get("block_size", planned_block))
        actual_tokens = blocks * block // engines if blocks is not None and block else None
        if blocks is not None and not block:
            raw = labels.get("block_size")
    return raw, actual_tokens


def _sglang_differences(
    lock: PlanLock,
    samples: Samples,
    where: str,
    tolerance: float,
) -> list[Difference]:
    """SGLang's constant gauges against the plan: its KV tokens within `tolerance` of those
    planned, its page size and context length exactly."""
    rows: list[Difference] = []
    tokens = planned_kv_tokens(lock)
    value = samples["sglang:max_total_num_tokens"][0][1]
    actual = _count(value)
    if tokens and (actual is None or actual < tokens * (1 - tolerance)):
        rows.append(
            Difference(
                where=where,
                key="max_total_num_tokens",
                planned=tokens,
                actual=str(value) if actual is None else actual,
                tolerance=f"{tolerance:.1%}",
            )
        )
    planned = line_flags(lock.flags.get("sglang", ""))
    if not planned:  # a vLLM plan: its block size and max model length are what compare
        vllm_line = line_flags(lock.flags.get("vllm", ""))
        renames = {"--block-size": "--page-size", "--max-model-len": "--context-length"}
        planned = {renames[k]: v for k, v in vllm_line.items() if k in renames}
    for flag, metric in (
        ("--page-size", "sglang:page_size"),
        ("--context-length", "sglang:context_len"),
    ):
        if flag in planned and metric in samples:
            gauge = samples[metric][0][1]
            if _differs(planned[flag], gauge, 0):
                shown = _count(gauge)
                rows.append(
                    Difference(
                        where=where,
                        key=metric,
                        planned=planned[flag],
                        actual=str(gauge) if shown is None else shown,
                        tolerance="exact",
                    )
                )
    return rows
