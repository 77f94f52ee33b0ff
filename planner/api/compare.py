"""Upgrade impact: the same serve plan under another engine version (or the other engine)."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from planner.errors import InputError

if TYPE_CHECKING:
    from planner.core.serve import ServePlan

ENGINES = ("vllm", "sglang")


def parse_target(text: str, engine: str) -> tuple[str, str | None]:
    """`0.28.0` (this engine), `sglang` (its newest) or `sglang:0.5.8` -> (engine, version)."""
    from planner.core.engines.common import parse_version

    raw = text.strip().lower()
    name, _, version = raw.partition(":") if ":" in raw else ("", "", raw)
    if not name and raw in ENGINES:
        name, version = raw, ""
    name = name or engine
    if name not in ENGINES:
        raise InputError("--compare-version", f"{text!r}: accepted: 0.28.0, sglang, sglang:0.5.8")
    if version:
        parse_version(version, "--compare-version")
    return name, version or None


def target_settings(settings: dict[str, Any], engine: str, version: str | None) -> dict[str, Any]:
    """The capacity settings for the comparison run (engine-specific flags dropped on a switch)."""
    from planner.core.flags import kv_cache_flag

    out = dict(settings)
    before = out.get("engine", "vllm")
    out["engine"], out["version"] = engine, version
    if engine != before:
        # the other engine's own flags do not carry over: only the fields its settings take
        from planner.core.engines.sglang import SglangSettings
        from planner.core.engines.vllm import VllmSettings

        takes = (VllmSettings if engine == "vllm" else SglangSettings).model_fields
        out["extra"] = {k: v for k, v in (out.get("extra") or {}).items() if k in takes}
        kv = str(out.get("kv_cache_dtype", "auto"))
        if kv.startswith("fp8"):
            out["kv_cache_dtype"] = kv_cache_flag(engine, "fp8")
        # the memory fraction means a different thing in each engine: each takes its own default
        out.pop("memory_fraction", None)
    return {k: v for k, v in out.items() if v is not None}


def version_comparison(
    plan: ServePlan,
    payload: dict[str, Any],
    target: str,
    run: Callable[[dict[str, Any]], tuple[ServePlan, dict[str, Any]]],
    settings: dict[str, Any],
) -> dict[str, Any]:
    """Plan the same inputs under `target` and report what moved, term by term, and why.

    `run(settings) -> (plan, payload)` re-plans with everything else unchanged.
    """
    from planner.core.engines.changes import change_row, changes_between, compare
    from planner.core.engines.common import parse_version

    engine = settings.get("engine", "vllm")
    other_engine, other_version = parse_target(target, engine)
    other_plan, other_payload = run(target_settings(settings, other_engine, other_version))
    a, b = plan.prediction, other_plan.prediction

    def side(p: ServePlan, pl: dict[str, Any], name: str) -> dict[str, Any]:
        return {
            "engine": name,
            "version": None if p.prediction is None else p.prediction.version,
            "fits": p.fits,
            "reasons": p.reasons,
            "max_num_seqs": p.max_num_seqs,
            "max_seqs_at_mean": p.max_seqs_at_mean,
            "max_seqs_at_context": p.max_seqs_at_context,
            "command": p.command,
            "kv_pool_bytes": pl["kv_pool_bytes"],
        }

    out: dict[str, Any] = {
        "before": side(plan, payload, engine),
        "after": side(other_plan, other_payload, other_engine),
        "terms": [],
        "settings": [],
        "engine_changes": [],
        "notes_before": [],
        "notes_after": [],
    }
    if a is not None and b is not None:
        out |= compare(a, b)
        if other_engine == engine:
            out["engine_changes"] = changes_between(
                engine, parse_version(a.version), parse_version(b.version)
            )
    for key in ("max_num_seqs", "max_seqs_at_mean", "max_seqs_at_context"):
        out["terms"].append(change_row(key, out["before"][key], out["after"][key]))
    return out
