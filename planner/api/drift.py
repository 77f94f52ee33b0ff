"""`planner drift` by name: a plan lock against recomputation, deployments and /metrics."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from planner.api.capacity import capacity_report
from planner.errors import InputError

if TYPE_CHECKING:  # numpy stays off the `planner capacity` path
    from planner.core.drift import Difference
    from planner.core.engines.calibration import Calibration
    from planner.plan import PlanLock


def parse_tolerance(text: str) -> float:
    """`2%` or `0.02` -> 0.02."""
    raw = text.strip()
    try:
        value = float(raw[:-1]) / 100 if raw.endswith("%") else float(raw)
    except ValueError as exc:
        raise InputError("--tolerance", f"{text!r}: expected a share like 2% or 0.02") from exc
    if not 0 <= value < 1:
        raise InputError("--tolerance", f"{text!r} is outside [0%, 100%)")
    return value


def _recompute(
    lock: PlanLock,
    model: str | None,
    revision: str | None,
    calibration: Calibration | None = None,
    version: str | None = None,
) -> dict[str, Any]:
    """The plan's `--json` object recomputed from its inputs, with the ledger it was made with.

    `version`: recompute under another engine version (an upgrade check).
    """
    from planner.api.capacity import serve_report
    from planner.core.capacity import capacity_json

    i = lock.inputs
    if i.ledger == "engine":
        settings, tpot = lock_serve_settings(lock)
        if version is not None:
            settings["version"] = version
        _plan, payload = serve_report(
            gpu=i.gpu,
            preset=i.preset,
            model=model,
            revision=revision,
            gpu_memory_gib=i.gpu_memory_gib,
            settings=settings,
            tpot_ms=tpot,
            calibration=calibration,
        )
        return payload
    if version is not None:
        raise InputError("--upgrade-to", "checks engine-ledger plans (this one is textbook)")
    plan, prediction = capacity_report(
        gpu=i.gpu,
        preset=i.preset,
        model=model,
        revision=revision,
        gpu_memory_gib=i.gpu_memory_gib,
        settings=i.settings,
        engine=i.engine.model_dump() if i.engine else None,
    )
    payload = capacity_json(plan)
    if prediction is not None:
        payload["engine"] = prediction.model_dump()
    return payload


def lock_serve_settings(lock: PlanLock) -> tuple[dict[str, Any], float | None]:
    """An engine-ledger plan's serve settings as `capacity` planned them (its engine and
    release included), and the TPOT budget it capped the batch for: what `drift` recomputes
    and `diagnose` prices the running server with."""
    i = lock.inputs
    settings = dict(i.settings)
    tpot = settings.pop("tpot_ms", None)
    if i.engine is not None:
        if i.engine.flags:
            raise InputError(
                "inputs.engine.flags",
                "an engine-ledger plan keeps its engine settings under inputs.settings",
            )
        settings |= {"engine": i.engine.name, "version": i.engine.version}
    return {k: v for k, v in settings.items() if v is not None}, tpot


def _profile(
    lock: PlanLock, plan_path: str, given: str | None, rows: list[Difference]
) -> Calibration | None:
    """The calibration profile to recompute with (`--calibration`, else the plan's own).

    A profile whose content changed since the plan was made is a difference of its own.
    """
    from planner.core import drift
    from planner.sources.calibration import load_calibration

    path = given or model_relative_to(lock.inputs.calibration, plan_path)
    if path is None:
        return None
    profile = load_calibration(path)
    planned = lock.inputs.calibration_sha256
    if given is None and planned and profile.fingerprint() != planned:
        rows.append(
            drift.Difference(
                where="recompute",
                key="calibration.sha256",
                planned=planned[:12],
                actual=profile.fingerprint()[:12],
                tolerance="exact",
            )
        )
    return profile


def model_relative_to(model: str | None, plan_path: str) -> str | None:
    """A plan's relative model path is relative to the plan's folder (as `--save` writes it)."""
    from pathlib import Path

    if model is None or Path(model).is_absolute():
        return model
    beside = Path(plan_path).parent / model
    return str(beside) if beside.exists() else model


def drift_report(
    *,
    plan_path: str,
    recompute: bool | None,
    revision_mode: str,
    tolerance: float,
    against_args: list[str],
    against_args_files: list[str],
    metrics_urls: list[str],
    timeout_s: float,
    calibration_path: str | None = None,
    upgrade_to: str | None = None,
) -> dict[str, Any]:
    """Compare a plan lock with a recomputation, deployed args and /metrics; stable output.

    `calibration_path` overrides the plan's profile; `upgrade_to` recomputes the plan under
    that engine version and reports capacity it would lose beyond the tolerance.
    """
    from planner.core import drift
    from planner.errors import SourceUnavailable
    from planner.plan import figures_from, load
    from planner.sources.deployed import (
        check_metrics_url,
        check_timeout,
        fetch_metrics,
        parse_args_text,
        parse_prometheus,
    )
    from planner.sources.files import ARGS_LIMIT_BYTES, PLAN_LIMIT_BYTES, read_text

    lock = load(read_text(plan_path, "plan", PLAN_LIMIT_BYTES), plan_path)
    if revision_mode not in ("current", "pinned"):
        raise InputError("--hub-ref", f"{revision_mode!r}; accepted: current, pinned")
    check_timeout(timeout_s)
    for url in metrics_urls:
        check_metrics_url(url)
    args_texts = [(text, f"--against-args[{i}]") for i, text in enumerate(against_args)]
    args_texts += [
        (read_text(name, "--against-args-file", ARGS_LIMIT_BYTES), name)
        for name in against_args_files
    ]
    rows: list[drift.Difference] = []
    sources: list[dict[str, str]] = []
    unreachable = False
    if recompute is None:
        recompute = not (against_args or against_args_files or metrics_urls)
    profile = _profile(lock, plan_path, calibration_path, rows)
    if recompute or upgrade_to:
        i = lock.inputs
        revision = i.revision if revision_mode == "pinned" and i.revision else i.requested_revision
    if upgrade_to is not None:
        from planner.core.engines.common import parse_version

        parse_version(upgrade_to, "--upgrade-to")
        where = f"upgrade to {upgrade_to}"
        try:
            after = _recompute(
                lock, model_relative_to(i.model, plan_path), revision, profile, upgrade_to
            )
        except SourceUnavailable as exc:
            sources.append({"where": where, "status": f"unreachable: {exc}"})
            unreachable = True
        else:
            lost = drift.compare_losses(lock.figures, figures_from(after), tolerance, where)
            rows += lost
            engine = after.get("engine") or {}
            status = f"{len(lost)} loss{'es' if len(lost) != 1 else ''}" if lost else "ok"
            sources.append(
                {
                    "where": where,
                    "status": f"{status}: {engine.get('kv_cache_tokens', 0):,} KV tokens "
                    f"(planned {lock.figures.get('engine.kv_cache_tokens', 0):,})",
                }
            )
    if recompute:
        try:
            payload = _recompute(lock, model_relative_to(i.model, plan_path), revision, profile)
        except SourceUnavailable as exc:
            sources.append({"where": "recompute", "status": f"unreachable: {exc}"})
            unreachable = True
        else:
            found = drift.compare_recomputed(lock, payload, tolerance)
            rows += found
            changed = len(found)
            status = f"{changed} difference{'s' if changed != 1 else ''}" if changed else "ok"
            sources.append({"where": "recompute", "status": f"{status} (revision {revision_mode})"})
    for text, origin in args_texts:
        for deployed in parse_args_text(text, origin):
            found = drift.compare_deployed(lock, deployed)
            rows += found
            status = f"{len(found)} difference{'s' if len(found) != 1 else ''}" if found else "ok"
            sources.append({"where": deployed.where, "status": f"{status} ({deployed.engine})"})
    for scrape in fetch_metrics(metrics_urls, timeout_s) if metrics_urls else []:
        if scrape.text is None:
            unreachable = True
            sources.append({"where": scrape.url, "status": scrape.error or "unreachable"})
            continue
        found, status = drift.compare_metrics(
            lock, parse_prometheus(scrape.text), scrape.url, tolerance
        )
        rows += found
        sources.append({"where": scrape.url, "status": status})
    code = 1 if rows else (3 if unreachable else 0)
    return {
        "plan": plan_path,
        "clean": not rows and not unreachable,
        "exit_code": code,
        "differences": [r.model_dump() for r in rows],
        "sources": sources,
    }
