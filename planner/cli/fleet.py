"""`planner fleet`: from a traffic and a latency promise to GPUs, replicas, flags and cost."""

import sys
from dataclasses import dataclass
from typing import TYPE_CHECKING, Annotated, Any

import typer

from planner.cli.fleet_k8s import (
    k8s_deployment,
    k8s_disaggregated,
    k8s_leader_worker_set,
    server_span,
)
from planner.cli.fleet_render import render
from planner.cli.numbers import (
    EnableHierarchicalCache,
    HicacheRatio,
    HicacheSize,
    HubTimeout,
    JsonOut,
    KvOffloadingBackend,
    KvOffloadingSize,
    Prefixes,
    PrefixShareOption,
    PrefixTokens,
    ReservedGib,
    Revision,
    apply_hub_timeout,
)
from planner.cli.numbers import prefix_share as parse_prefix
from planner.cli.render import emit_json

if TYPE_CHECKING:  # the profile type only: the CLI loads calibration on demand
    from planner.core.engines.calibration import Calibration


def fleet(
    rate: Annotated[float, typer.Option(help="Peak arrival rate, requests/s.")],
    tpot: Annotated[float, typer.Option(help="TPOT promise, ms.")],
    ttft: Annotated[float, typer.Option(help="TTFT promise, ms.")],
    preset: Annotated[str | None, typer.Option(help="Model preset.")] = None,
    model: Annotated[str | None, typer.Option(help="Model folder or Hub id.")] = None,
    revision: Revision = None,
    kv_dtype: Annotated[
        str | None,
        typer.Option(
            "--kv-dtype",
            "--kv-cache-dtype",
            help="KV cache every candidate runs: auto (the model's 16 bits) or fp8 [auto].",
        ),
    ] = None,
    percentile: Annotated[float, typer.Option(help="Percentile the promise holds at.")] = 95.0,
    goodput: Annotated[
        float, typer.Option(help="Share of requests meeting both budgets, percent.")
    ] = 99.0,
    gpus: Annotated[
        list[str] | None,
        typer.Option(
            "--gpus",
            "--gpu",
            help="Candidate GPUs, one or a comma-separated list; repeatable "
            "[default: h100,h200,mi300x,a100-sxm4-80gb,l40s].",
        ),
    ] = None,
    engine: Annotated[str, typer.Option(help="vllm or sglang.")] = "vllm",
    engine_version: Annotated[
        str | None, typer.Option(help="Engine release planned [default: the newest modelled].")
    ] = None,
    tp: Annotated[
        str | None, typer.Option(help="Pin the TP sizes tried: 4 or 2,4 [default: 1 to 8].")
    ] = None,
    precision: Annotated[
        str | None,
        typer.Option(help="Pin the weight precisions tried: bf16, fp8 [default: both where run]."),
    ] = None,
    objective: Annotated[
        str | None,
        typer.Option(help="Rank by cost, gpus or latency [default: cost when priced, else gpus]."),
    ] = None,
    disagg: Annotated[
        str,
        typer.Option(help="Add prefill/decode-disaggregated xPyD units: auto (MoE), on, off."),
    ] = "auto",
    price: Annotated[
        list[str] | None, typer.Option(help="$ per GPU-hour: h100=2.49,mi300x=2.10 (repeatable).")
    ] = None,
    price_basis: Annotated[
        str,
        typer.Option(help="Shipped prices: gpu-cloud or hyperscaler median, or none."),
    ] = "gpu-cloud",
    prices: Annotated[str | None, typer.Option(help="YAML file of GPU: $ per GPU-hour.")] = None,
    reserved_gib: ReservedGib = None,
    calibration: Annotated[
        str | None,
        typer.Option(
            help="A profile from `planner calibrate`: applied to candidates on its GPU and engine."
        ),
    ] = None,
    headroom: Annotated[
        float, typer.Option(help="Share of its sustainable rate a replica runs at the peak.")
    ] = 0.8,
    workload: Annotated[
        str, typer.Option(help="Length distributions from a workload preset.")
    ] = "reference",
    prompt_len: Annotated[
        int | None, typer.Option(help="Prompt tokens: fixed (or the median, --len-spread).")
    ] = None,
    output_len: Annotated[
        int | None, typer.Option(help="Output tokens: fixed (or the median, --len-spread).")
    ] = None,
    len_spread: Annotated[
        float | None,
        typer.Option(help="Lognormal sigma around --prompt-len/--output-len as medians."),
    ] = None,
    len_range: Annotated[
        float | None, typer.Option(help="Lengths uniform in [F x L, L] (--random-range-ratio).")
    ] = None,
    context: Annotated[
        int | None,
        typer.Option(
            "--context",
            "--max-model-len",
            help="Server max model length [default: the longest request asked for, or the "
            "model's maximum for a distribution].",
        ),
    ] = None,
    arrival: Annotated[
        str | None, typer.Option(help="poisson or gamma [default: gamma when --cv is given].")
    ] = None,
    cv: Annotated[
        float | None, typer.Option(help="Gamma arrivals: CV of the gaps (bursts > 1).")
    ] = None,
    save: Annotated[
        str | None, typer.Option(help="Write the winner's plan lock file (for planner drift).")
    ] = None,
    k8s: Annotated[
        str | None,
        typer.Option(
            help="Write the winner's Kubernetes manifests (YAML): a Deployment, or for an SGLang "
            "xPyD unit a StatefulSet per pool and the router."
        ),
    ] = None,
    plot: Annotated[
        str | None, typer.Option(help="Save the Pareto chart (tok/s per GPU vs per user).")
    ] = None,
    workers: Annotated[
        int | None,
        typer.Option(help="Candidates searched at once in a process pool [default: the cores]."),
    ] = None,
    prefix_share: PrefixShareOption = None,
    prefix_tokens: PrefixTokens = None,
    prefixes: Prefixes = 1,
    kv_offloading_size: KvOffloadingSize = None,
    kv_offloading_backend: KvOffloadingBackend = None,
    enable_hierarchical_cache: EnableHierarchicalCache = False,
    hicache_ratio: HicacheRatio = None,
    hicache_size: HicacheSize = None,
    hub_timeout: HubTimeout = None,
    json_out: JsonOut = False,
) -> None:
    """Which GPUs, TP, replicas and flags serve this traffic within the promise, at what cost."""
    apply_hub_timeout(hub_timeout)
    from planner.api.fleet import DEFAULT_GPUS, fleet_report, parse_prices
    from planner.errors import InputError
    from planner.sources.files import check_writable

    if arrival is None:
        arrival = "gamma" if cv is not None and cv != 1.0 else "poisson"
    if arrival not in ("poisson", "gamma"):
        raise InputError("--arrival", f"{arrival!r}; accepted: poisson, gamma")
    if arrival == "poisson" and cv is not None and cv != 1.0:
        raise InputError("--cv", f"{cv:g} describes gamma arrivals; drop --arrival poisson")
    cv = 1.0 if cv is None else cv
    if not 0 < goodput <= 100:
        raise InputError("--goodput", f"a percentage in (0, 100] (got {goodput})")
    for target, flag in ((save, "--save"), (k8s, "--k8s"), (plot, "--plot")):
        if target is not None:
            check_writable(target, flag)
    values = _workload_values(workload, arrival, cv, prompt_len, output_len, len_spread, len_range)
    tps = None if tp is None else _int_list(tp, "--tp")
    precisions = None
    if precision is not None:
        precisions = [p.strip().lower() for p in precision.split(",") if p.strip()]
        unknown = [p for p in precisions if p not in ("bf16", "fp16", "fp8")]
        if unknown or not precisions:
            raise InputError("--precision", f"{precision!r}; accepted: bf16, fp8 (comma-separated)")
    given = ",".join(gpus) if gpus else ",".join(DEFAULT_GPUS)
    names = list(dict.fromkeys(g.strip() for g in given.split(",") if g.strip()))
    if not names:
        raise InputError("--gpus", "name at least one GPU")
    show_progress = not json_out and sys.stderr.isatty()

    def progress(gpu: str, tp: int, precision: str) -> None:
        if show_progress:
            sys.stderr.write(f"\rsearched {gpu} TP {tp} {precision}".ljust(60))
            sys.stderr.flush()

    from planner.cli.capacity import offload_settings
    from planner.cli.numbers import reserved_bytes
    from planner.sources.calibration import load_calibration

    profile = None if calibration is None else load_calibration(calibration)
    reserved_gpu_bytes = reserved_bytes(reserved_gib)
    priced, origin = parse_prices(price, prices, None if price_basis == "none" else price_basis)
    report = fleet_report(
        preset=preset,
        model=model,
        revision=revision,
        kv_dtype=kv_dtype,
        rate=rate,
        promise={
            "tpot_ms": tpot,
            "ttft_ms": ttft,
            "percentile": percentile,
            "goodput": goodput / 100,
        },
        gpus=names,
        engine=engine,
        prices=priced,
        prices_origin=origin,
        headroom=headroom,
        workload=values,
        progress=progress,
        workers=_workers(workers),
        calibration=profile,
        reserved_bytes=reserved_gpu_bytes,
        context=context,
        objective=objective,
        tps=tps,
        precisions=precisions,
        engine_version=engine_version,
        disagg=disagg,
        prefix=parse_prefix(prefix_share, prefix_tokens, prefixes),
        offload=offload_settings(
            gpu=None,
            kv_offloading_size=kv_offloading_size,
            kv_offloading_backend=kv_offloading_backend,
            lmcache_config=None,
            hicache=enable_hierarchical_cache,
            hicache_ratio=hicache_ratio,
            hicache_size=hicache_size,
            host_memory_gib=None,
        ),
    )
    if show_progress:
        sys.stderr.write("\r" + " " * 60 + "\r")
    winner = report["winner"]
    if winner is not None:
        source = LockSource(preset, model, revision, calibration, profile, reserved_gpu_bytes)
        _write_winner(report, save, k8s, source)
        if not winner.get("pools"):
            typed: list[tuple[str, object]] = [
                ("--preset", preset),
                ("--model", model),
                ("--revision", revision),
                ("--calibration", calibration),
                ("--reserved-gib", reserved_gib),
                ("--workload", workload),
                ("--prompt-len", prompt_len),
                ("--output-len", output_len),
                ("--len-spread", len_spread),
                ("--len-range", len_range),
                ("--cv", cv if arrival == "gamma" else None),
                ("--prefix-share", prefix_share),
                ("--prefix-tokens", prefix_tokens),
                ("--prefixes", prefixes if prefix_share else None),
                ("--metric-percentiles", percentile),
            ]
            winner["simulate_command"] = _check_command(report, winner, typed)
    if plot is not None:
        _save_chart(report, plot, tpot)
    if json_out:
        emit_json(report)
    else:
        render(report)
    if winner is None:
        raise typer.Exit(1)


def _check_command(
    report: dict[str, Any], winner: dict[str, Any], typed: list[tuple[str, object]]
) -> str:
    """`planner simulate` of one replica of the winner at its share of the peak rate, on the
    fleet's workload: the run the candidate's figures come from (the search pools two seeds and
    prints the percentile's upper bound), for a user to check in one command. `typed`: the
    fleet flags simulate takes under the same name, as given (None: not given)."""
    import shlex

    from planner.core.flags import launch_flags
    from planner.core.fleet import MAX_TRIAL_REQUESTS

    words = ["planner", "simulate", "--gpu", winner["gpu"], "--engine", winner["engine"]]
    words += ["--engine-version", winner["engine_version"]]
    words += [
        w
        for flag, value in typed
        if value is not None
        for w in (flag, f"{value:g}" if isinstance(value, float) else str(value))
    ]
    words += launch_flags(winner["command"])
    rate = report["rate_per_s"] / winner["replicas"]
    # as many requests as the search's longest trial simulates, its seeds together
    words += ["--rate", f"{rate:g}", "--requests", str(MAX_TRIAL_REQUESTS)]
    words += ["--seed", str(report["workload"]["seed"])]
    return " ".join(shlex.quote(w) for w in words)


def _workload_values(
    workload: str,
    arrival: str,
    cv: float,
    prompt_len: int | None,
    output_len: int | None,
    len_spread: float | None,
    len_range: float | None,
) -> dict[str, Any]:
    """The workload's fields with the arrival process and any fixed lengths the flags give
    (--len-spread: lognormal around them, --len-range: uniform below them), each bad value
    one error naming its flag."""
    from planner.api.simulate import load_workload
    from planner.errors import InputError

    base = load_workload(workload)
    values: dict[str, Any] = base.model_dump() | {"arrival": arrival, "cv": cv}
    if len_spread is not None and len_range is not None:
        raise InputError("--len-range", "give --len-spread or --len-range, not both")
    for key, length, flag in (
        ("prompt_tokens", prompt_len, "--prompt-len"),
        ("output_tokens", output_len, "--output-len"),
    ):
        if length is None:
            continue
        if not 1 <= length <= 2**24:
            raise InputError(flag, f"must be in [1, {2**24:,}] tokens (got {length})")
        if len_spread is not None:  # a distribution around the length, never clipped below it
            values[key] = {
                "distribution": "lognormal",
                "median": length,
                "sigma": len_spread,
                "min": 1,
                "max": max(values[key]["max"], 4 * length),
            }
        elif len_range is not None:
            if not 0 <= len_range <= 1:
                raise InputError("--len-range", f"must be in [0, 1] (got {len_range})")
            low = max(1, int(length * len_range))
            values[key] = {"distribution": "uniform", "median": length, "min": low, "max": length}
        else:
            values[key] = {"distribution": "fixed", "median": length, "min": length, "max": length}
    return values


@dataclass(frozen=True)
class LockSource:
    """What a winner's plan lock is recomputed from beside the winner itself: the model as
    the user named it and the Hub revision asked for, the calibration profile (its path and
    what it read) and the memory reserved per GPU."""

    preset: str | None
    model: str | None
    revision: str | None
    calibration: str | None
    profile: "Calibration | None"
    reserved_bytes: int | None


def _write_winner(
    report: dict[str, Any], save: str | None, k8s: str | None, source: LockSource
) -> None:
    """--save's plan lock and --k8s's manifests for the report's winner; where one cannot be
    written for this winner yet, one error naming the flag and what to type instead."""
    from planner.errors import InputError

    winner = report["winner"]
    if winner.get("pools") is not None:
        if save is not None:
            raise InputError(
                "--save",
                f"the winner is a disaggregated {winner['disagg']} unit, whose plan lock (one per "
                "pool) is not written yet: --k8s writes its manifests; --disagg off gives an "
                "aggregated winner",
            )
        if k8s is not None and winner["engine"] != "sglang":
            raise InputError(
                "--k8s",
                f"the winner is a vLLM {winner['disagg']} unit: its pools need a prefill/decode "
                "router (llm-d, Dynamo) whose manifests planner does not write; each pool's line "
                "is printed, or --engine sglang plans SGLang's router",
            )
    span = server_span(winner)
    if k8s is not None and span.hosts > 1 and winner.get("pools"):
        raise InputError(
            "--k8s",
            f"the winner's pool instances span {span.hosts} hosts: a pool over hosts is not "
            "written yet; --tp and --precision can pin a one-host layout",
        )
    if save is not None:
        _save(save, report, source)
    if k8s is not None:
        from planner.sources.files import write_file

        name = source.model or source.preset or "model"
        if winner.get("pools") is not None:
            manifest = k8s_disaggregated(winner, name)
        elif span.hosts > 1:
            manifest = k8s_leader_worker_set(winner, name, span)
        else:
            manifest = k8s_deployment(winner, name)
        write_file(k8s, "--k8s", manifest)


def _save_chart(report: dict[str, Any], path: str, tpot: float) -> None:
    """--plot: each ranked layout's curve, tokens/s per GPU against tokens/s per user."""
    from planner.api.fleet import layout_name
    from planner.cli.plot import Chart, Series
    from planner.cli.plot import save as save_chart

    fitting = [c for c in report["candidates"] if c["ranked"]]
    save_chart(
        Chart(
            title=f"{report['model']}: tokens/s per GPU against tokens/s per user",
            x_label="tokens/s per user (1000 / median TPOT)",
            y_label="output tokens/s per GPU",
            series=[
                Series(
                    layout_name(c),
                    [q["tokens_per_s_per_user"] or 0.0 for q in c["curve"]],
                    [q["output_tokens_per_s_per_gpu"] for q in c["curve"]],
                )
                for c in fitting
            ],
            marks=[(1000.0 / tpot, f"TPOT {tpot:g} ms")],
        ),
        path,
    )


# Engine fields of a winner's layout that its plan lock carries (the line's own values).
LAYOUT_FIELDS = ("enable_expert_parallel", "data_parallel_size", "attn_dp_size", "ep_size")


def _save(path: str, report: dict[str, Any], source: LockSource) -> None:
    """The winner's plan lock, recomputed by `planner drift` like a capacity plan."""
    from planner.api import serve_lock, serve_report
    from planner.plan import dump
    from planner.sources.files import saved_model_ref, write_file

    w = report["winner"]
    flags = w["flags"]
    settings: dict[str, Any] = {
        "engine": w["engine"],
        "tp": w["tp"],
        "pp": w.get("pp", 1),
        "context_tokens": flags.get("max_model_len", flags.get("context_length")),
        # the line's own value (SGLang's is the deployment's, shared among attention groups)
        "max_num_seqs": flags.get("max_num_seqs", flags.get("max_running_requests")),
    }
    if w["precision"] == "fp8":
        settings["quantization"] = "fp8"
    if str(flags.get("kv_cache_dtype") or "auto") != "auto":
        settings["kv_cache_dtype"] = flags["kv_cache_dtype"]
    # the layout's engine fields as the line sets them (EP, DP ranks, attention groups)
    extra = {k: flags[k] for k in LAYOUT_FIELDS if flags.get(k) not in (None, False, 1)}
    if source.reserved_bytes:
        extra["reserved_bytes"] = source.reserved_bytes
    if extra:
        settings["extra"] = extra
    used = source.profile if w.get("calibrated") else None
    preset, model, calibration = source.preset, source.model, source.calibration
    _plan, payload = serve_report(
        gpu=w["gpu"],
        preset=preset,
        model=model,
        revision=source.revision,
        gpu_memory_gib=None,
        settings=dict(settings),
        calibration=used,
    )
    lock = serve_lock(
        payload,
        preset=preset,
        model=None if model is None else saved_model_ref(model, path),
        revision=source.revision,
        gpu=w["gpu"],
        gpu_memory_gib=None,
        settings=settings,
        tpot_ms=None,
        calibration=None
        if used is None or calibration is None
        else saved_model_ref(calibration, path),
    )
    write_file(path, "--save", dump(lock))


def _int_list(text: str, flag: str) -> list[int]:
    """`4` or `2,4` as integers >= 1."""
    from planner.errors import InputError

    try:
        values = [int(v) for v in text.split(",") if v.strip()]
    except ValueError as exc:
        raise InputError(flag, f"{text!r}; expected whole numbers, e.g. 2,4") from exc
    if not values or min(values) < 1 or max(values) > 1024:
        raise InputError(flag, f"{text!r}; expected whole numbers in [1, 1024], e.g. 2,4")
    return values


def _workers(given: int | None) -> int:
    """--workers, or the cores this process may use."""
    import os

    from planner.errors import InputError

    if given is None:
        return max(1, len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else 1)
    if not 1 <= given <= 256:
        raise InputError("--workers", f"must be in [1, 256] (got {given})")
    return given
