"""`planner diagnose` by name: two /metrics scrapes (live or saved) and the deployment's model."""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any

from planner.errors import InputError, PlannerError, SourceUnavailable

if TYPE_CHECKING:
    from planner.core.diagnose import Effects, Samples
    from planner.core.specs import ModelSpec

# The longest --window / --interval accepted, seconds: an hour is not a health check.
MAX_WINDOW_S = 3600.0
# Seconds between two live scrapes by default: long enough for a counter to move at a few
# requests per second, short enough for a CI step.
DEFAULT_WINDOW_S = 10.0


def _samples(text: str) -> Samples:
    from planner.sources.deployed import parse_prometheus

    return parse_prometheus(text)


def scrape_pair(url: str, window_s: float, timeout_s: float) -> tuple[Samples, Samples, float]:
    """Two scrapes of one endpoint `window_s` apart (each bounded in time and bytes)."""
    from planner.sources.deployed import fetch_metrics

    if not 0 < window_s <= MAX_WINDOW_S:
        raise InputError("--window", f"must be in (0, {MAX_WINDOW_S:g}] s (got {window_s})")
    first = fetch_metrics([url], timeout_s, "--metrics")[0]
    if first.text is None:
        raise SourceUnavailable(f"{url}: {first.error}")
    started = time.monotonic()
    time.sleep(window_s)
    second = fetch_metrics([url], timeout_s, "--metrics")[0]
    if second.text is None:
        raise SourceUnavailable(f"{url}: {second.error}")
    return _samples(first.text), _samples(second.text), time.monotonic() - started


def snapshot_pair(paths: list[str], interval_s: float | None) -> tuple[Samples, Samples, float]:
    """Two saved scrapes and the seconds between them."""
    from planner.sources.deployed import MAX_METRICS_BYTES
    from planner.sources.files import read_text

    if len(paths) != 2:
        raise InputError("--snapshots", "two files: the earlier scrape, then the later one")
    if interval_s is None or not 0 < interval_s <= MAX_WINDOW_S:
        raise InputError(
            "--interval", f"seconds between the snapshots, in (0, {MAX_WINDOW_S:g}] (required)"
        )
    a, b = (read_text(p, "--snapshots", MAX_METRICS_BYTES) for p in paths)
    return _samples(a), _samples(b), interval_s


def effects_for(
    *,
    plan_path: str | None,
    preset: str | None,
    model: str | None,
    gpu: str | None,
    settings: dict[str, Any],
    spec: ModelSpec | None = None,
) -> Effects:
    """The deployment's models (step time, KV capacity) from a plan or a model and GPU
    (`spec`: the model already resolved from those names), and the engine they are priced on
    (None for a textbook plan, which names none)."""
    from planner.api.capacity import serve_report
    from planner.api.latency import step_model_from_curve
    from planner.core import slo
    from planner.core.diagnose import Effects
    from planner.core.serve import sequences_held
    from planner.core.step import step_time_for
    from planner.sources.models import resolve_model
    from planner.sources.presets import find_gpu

    tpot_ms = gpu_memory_gib = profile = revision = None
    textbook = False  # a textbook plan names no engine
    if plan_path is not None:
        from planner.api.drift import lock_serve_settings, model_relative_to
        from planner.plan import load
        from planner.sources.files import PLAN_LIMIT_BYTES, read_text

        lock = load(read_text(plan_path, "--plan", PLAN_LIMIT_BYTES), plan_path)
        i = lock.inputs
        preset, gpu, gpu_memory_gib = i.preset, i.gpu, i.gpu_memory_gib
        model = model_relative_to(i.model, plan_path)  # as `drift` reads a saved plan's
        revision = i.requested_revision  # the Hub revision asked for, as `drift` rereads it
        given = {k: v for k, v in settings.items() if v is not None}
        if i.ledger == "engine":
            # the line as planned: engine, release, precision, layout, its TPOT cap and
            # calibration (the flags given here win)
            stored, tpot_ms = lock_serve_settings(lock)
            settings = stored | given
            calibration = model_relative_to(i.calibration, plan_path)
            if calibration is not None:
                from planner.sources.calibration import load_calibration

                profile = load_calibration(calibration)
        else:  # a textbook plan's settings are not an engine's: its size and lengths
            textbook = True
            stored = dict(i.settings)
            settings = {
                "tp": stored.get("tp", 1),
                "context_tokens": stored.get("context_tokens"),
                "mean_tokens": stored.get("mean_tokens"),
            } | given
    if gpu is None or (preset is None and model is None):
        if preset is not None or model is not None:
            raise InputError("--gpu", "required with --preset/--model")
        return Effects()
    values = {k: v for k, v in settings.items() if v is not None}
    if spec is None:
        spec = resolve_model(preset, model, revision)
    plan, _payload = serve_report(
        gpu=gpu,
        preset=preset,
        model=model,
        revision=revision,
        gpu_memory_gib=gpu_memory_gib,
        settings=values,
        tpot_ms=tpot_ms,
        calibration=profile,
        spec=spec,
    )
    mean = int(_payload["settings"]["mean_tokens"])
    prediction = plan.prediction
    served = None
    if plan.fits:
        # the engine instance `simulate`, `slo` and `capacity --tpot` price for the same line
        # (its PP / DP / EP layout and a profile's step terms included): one t(B)
        from planner.api.bench_instance import line_instance

        served = line_instance(
            gpu=gpu,
            preset=preset,
            model=model,
            revision=revision,
            gpu_memory_gib=gpu_memory_gib,
            settings=values | {"mean_tokens": mean},
            spec=spec,
            calibration=profile,
        )
    # a deployment that would not start: the checkpoint's weights on the card
    curve = (
        served.curve
        if served is not None
        else step_time_for(spec, find_gpu(gpu), tp=int(values.get("tp", 1)))
    )
    step = step_model_from_curve(curve, mean)

    def kv_sequences_at(tokens: int) -> int:
        return 0 if prediction is None else sequences_held(spec, prediction, tokens)

    return Effects(
        step_ms=lambda b: step.step_ms(b),
        batch_cap=lambda tpot: slo.batch_cap(step, tpot),
        kv_sequences_at=kv_sequences_at,
        max_model_len=int(_payload["settings"]["context_tokens"]),
        max_num_seqs=plan.max_num_seqs or None,
        engine=None if textbook else plan.engine,
    )


def _served_effects(
    spec: ModelSpec,
    preset: str | None,
    model: str | None,
    gpu: str,
    settings: dict[str, Any],
    served: dict[str, object],
) -> Effects:
    """The deployment's models without a lock file: the model (resolved once) and GPU given,
    on the engine, KV cache, memory share and context the scrape reports (the flags given
    win); where the engine model cannot plan what the server reports, on the flags alone."""
    given = {k: v for k, v in settings.items() if v is not None}
    named = {"preset": preset, "model": model, "gpu": gpu}
    try:
        return effects_for(plan_path=None, **named, settings=served | given, spec=spec)
    except PlannerError:
        return effects_for(plan_path=None, **named, settings=settings, spec=spec)


def _check_plan_engine(fx: Effects, plan_path: str, scraped: object, where: str) -> None:
    """A plan for one engine does not price another's server: its pool, running cap and flags
    are that engine's (a textbook plan names none)."""
    if fx.engine is not None and scraped is not None and fx.engine != scraped:
        raise InputError(
            "--plan",
            f"{plan_path} plans a {fx.engine} server; {where} is {scraped}'s (pass its own "
            "plan, or --preset/--model and --gpu)",
        )


def diagnose_report(
    *,
    metrics_url: str | None,
    window_s: float,
    snapshots: list[str],
    interval_s: float | None,
    timeout_s: float,
    budgets: dict[str, Any],
    plan_path: str | None,
    preset: str | None,
    model: str | None,
    gpu: str | None,
    settings: dict[str, Any],
) -> dict[str, Any]:
    """Everything `planner diagnose` reports, as its documented JSON object."""
    from planner.core.diagnose import Budgets, diagnose, mismatch, served_settings
    from planner.core.slo import check_budget
    from planner.sources.deployed import check_metrics_url, check_timeout

    for flag, key in (("--tpot", "tpot_ms"), ("--ttft", "ttft_ms")):
        if budgets.get(key) is not None:
            check_budget(flag, budgets[key])
    if not 0 < budgets.get("percentile", 95.0) < 100:
        raise InputError("--percentile", "must be in (0, 100)")
    if (metrics_url is None) == (not snapshots):
        raise InputError("--metrics", "give one of --metrics URL or --snapshots A,B")
    served = plan_path is None and (preset is not None or model is not None)
    if served:
        # priced on the server the scrape shows (below): the model and GPU checked first, so a
        # typo does not wait out the window
        from planner.sources.models import resolve_model
        from planner.sources.presets import find_gpu

        if gpu is None:
            raise InputError("--gpu", "required with --preset/--model")
        spec = resolve_model(preset, model)
        find_gpu(gpu)
    else:
        fx = effects_for(
            plan_path=plan_path, preset=preset, model=model, gpu=gpu, settings=settings
        )
    if metrics_url is not None:
        check_metrics_url(metrics_url, "--metrics")
        check_timeout(timeout_s)
        before, after, interval = scrape_pair(metrics_url, window_s, timeout_s)
        where = metrics_url
    else:
        before, after, interval = snapshot_pair(snapshots, interval_s)
        where = " -> ".join(snapshots)
    flag = "--metrics" if metrics_url is not None else "--snapshots"
    differs = mismatch(before, after)
    if differs is not None:
        raise InputError(
            flag,
            f"{where}: the two scrapes are not one server ({differs}); compare two scrapes "
            "of the same server",
        )
    if served:
        assert gpu is not None
        fx = _served_effects(spec, preset, model, gpu, settings, served_settings(after))
    elif plan_path is not None:
        _check_plan_engine(fx, plan_path, served_settings(after).get("engine"), where)
    result = diagnose(before, after, interval, Budgets(**budgets), fx)
    if result.engine == "unknown":
        raise InputError(flag, f"{where}: no vLLM or SGLang metrics in the scrape")
    return {"source": where} | result.model_dump()
