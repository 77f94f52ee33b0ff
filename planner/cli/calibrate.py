"""`planner calibrate`: your start-up logs -> a calibration profile for capacity, fleet, drift."""

from typing import TYPE_CHECKING, Annotated, Any

import typer

from planner.cli.numbers import HubTimeout, JsonOut, KvDtype, apply_hub_timeout
from planner.cli.render import console, emit_json, fit_columns, print_table

if TYPE_CHECKING:
    from planner.core.engines.calibration import Calibration


def calibrate(
    logs: Annotated[
        list[str] | None, typer.Argument(help="vLLM / SGLang start-up logs of one deployment.")
    ] = None,
    gpu: Annotated[
        str | None, typer.Option(help="GPU id, alias or device name the logs ran on.")
    ] = None,
    preset: Annotated[str | None, typer.Option(help="Model preset name.")] = None,
    model: Annotated[
        str | None, typer.Option(help="Model folder, config file or Hub id [default: the log's].")
    ] = None,
    revision: Annotated[str | None, typer.Option(help="Hub revision.")] = None,
    engine_version: Annotated[
        str | None, typer.Option(help="Engine version, where the logs do not print it.")
    ] = None,
    bench: Annotated[
        list[str] | None,
        typer.Option(help="vllm bench serve --save-result JSON / SGLang bench_serving output."),
    ] = None,
    tp: Annotated[
        int | None,
        typer.Option("--tp", "--tensor-parallel-size", help="TP of the benchmarked server [1]."),
    ] = None,
    dp: Annotated[
        int | None, typer.Option(help="Data-parallel replicas of the benchmarked server [1].")
    ] = None,
    engine: Annotated[
        str | None, typer.Option(help="vllm or sglang (with --bench) [vllm].")
    ] = None,
    weight_dtype: Annotated[
        str | None, typer.Option(help="Weights as served (with --bench): fp8, fp4, int4.")
    ] = None,
    kv_dtype: KvDtype = None,
    save: Annotated[
        str | None, typer.Option(help="Write the profile (YAML) for --calibration.")
    ] = None,
    hub_timeout: HubTimeout = None,
    json_out: JsonOut = False,
) -> None:
    """Measure the engine model's terms on your own logs; save them as a calibration profile."""
    apply_hub_timeout(hub_timeout)
    from planner.api.calibrate import calibrate_report
    from planner.errors import InputError
    from planner.sources.files import check_writable

    if save is not None:
        check_writable(save, "--save")
    if not logs and not bench:
        raise InputError("LOG", "give start-up logs, or --bench RESULT.json (or both)")
    if not bench:
        # a start-up log carries its own settings: these describe a benchmarked server
        for flag, value in (
            ("--tp", tp),
            ("--dp", dp),
            ("--engine", engine),
            ("--weight-dtype", weight_dtype),
            ("--kv-dtype", kv_dtype),
        ):
            if value is not None:
                raise InputError(
                    flag, "describes the benchmarked server (with --bench); a log carries its own"
                )
    report: dict[str, Any] = {}
    profile: Calibration | None = None
    if logs:
        profile, report = calibrate_report(
            log_paths=list(logs),
            gpu=gpu,
            preset=preset,
            model=model,
            revision=revision,
            version=engine_version,
        )
    if bench:
        from planner.api.bench_calibrate import bench_calibration
        from planner.cli.capacity import engine_kv_dtype

        if gpu is None:
            raise InputError("--gpu", "required with --bench (the GPU the results ran on)")
        engine = "vllm" if engine is None else engine
        if engine not in ("vllm", "sglang"):
            raise InputError("--engine", f"{engine!r}; accepted: vllm, sglang")
        settings: dict[str, Any] = {
            "engine": engine,
            "tp": 1 if tp is None else tp,
            "kv_cache_dtype": engine_kv_dtype(engine, kv_dtype, engine_version),
        }
        if engine_version:
            settings["version"] = engine_version
        if weight_dtype:
            settings["weight_dtype"] = weight_dtype
        stepped, bench_report = bench_calibration(
            bench_paths=list(bench),
            gpu=gpu,
            preset=preset,
            model=model if model or preset else None,
            revision=revision,
            settings=settings,
            dp=1 if dp is None else dp,
        )
        if profile is None:
            profile, report = stepped, bench_report | {"logs": [], "cross_checks": []}
        else:
            profile = _merged(profile, stepped)
            report["bench"] = bench_report
            report["profile"] = profile.model_dump()
        report.setdefault("bench", bench_report)
    assert profile is not None  # the logs or the results made one (one of them is required)
    if save is not None:
        from planner.sources.calibration import dump_calibration
        from planner.sources.files import write_file

        write_file(save, "--save", dump_calibration(profile))
        report["saved"] = save
    if json_out:
        emit_json(report)
    else:
        render(report)


def _merged(logs_profile: "Calibration", bench_profile: "Calibration") -> "Calibration":
    """One profile from logs and benchmark results of the same deployment."""
    from planner.errors import InputError

    for what in ("engine", "gpu", "model", "tensor_parallel_size"):
        mine, theirs = getattr(logs_profile, what), getattr(bench_profile, what)
        if mine != theirs:
            raise InputError(
                "--bench",
                f"the results' {what} {theirs} differs from the logs' {mine}: one "
                "profile is one deployment",
            )
    return logs_profile.model_copy(
        update={"step": bench_profile.step, "benchmarks": bench_profile.benchmarks}
    )


def _gib(value: Any) -> str:
    from planner.units import GIB_BYTES

    return "-" if value is None else f"{value / GIB_BYTES:.2f} GiB"


def _pct(row: dict[str, Any]) -> str:
    return "" if row.get("error") is None else f" ({row['error']:+.2%})"


def render(report: dict[str, Any]) -> None:
    """Per log: logged vs modelled vs calibrated terms; then the profile and the cross-checks."""
    from rich.table import Table

    out = console()
    for log in report["logs"]:
        table = Table(title=f"{log['log']} ({log['engine']} {log['engine_version']})")
        for col in ("term", "logged", "modelled", "calibrated", "source"):
            table.add_column(col, justify="left" if col in ("term", "source") else "right")
        for row in log["terms"]:
            table.add_row(
                row["term"].removesuffix("_bytes"),
                _gib(row["logged"]),
                _gib(row["predicted"]),
                _gib(row["calibrated"]),
                str(row["source"]),
            )
        print_table(out, fit_columns(table, wrap=("term",)))
        for label in ("uncalibrated", "calibrated"):
            figures = log[label]
            if figures["kv_cache_tokens"] is None:
                out.print(f"{label}: {figures['error']}", markup=False)
                continue
            tokens, budget = figures["kv_cache_tokens"], figures["available_kv_bytes"]
            logged_tokens = "-" if tokens["logged"] is None else f"{tokens['logged']:,}"
            out.print(
                f"{label}: KV budget {_gib(budget['predicted'])} (logged "
                f"{_gib(budget['logged'])}){_pct(budget)}, {tokens['predicted']:,} tokens "
                f"(logged {logged_tokens}){_pct(tokens)}",
                markup=False,
            )
        for note in log["notes"]:
            out.print(f"note: {note}", markup=False)
    profile = report["profile"]
    out.print(
        f"profile: {profile['engine']} {profile['engine_version']} on {profile['gpu']}, "
        f"{profile['model']}, TP {profile['tensor_parallel_size']}",
        markup=False,
    )
    for t in profile["terms"]:
        value = f"x {t['value']:.4f}" if t["how"] == "ratio" else _gib(t["value"])
        if t["how"] == "offset":
            value = ("+" if t["value"] >= 0 else "") + value
        out.print(
            f"  {t['term'].removesuffix('_bytes')}: {t['how']} {value} ({t['basis']}; "
            f"{t['logs']} log{'s' if t['logs'] != 1 else ''})",
            markup=False,
        )
    for check in report["cross_checks"]:
        if check["kv_cache_tokens"] is None:
            out.print(f"cross-check: {check['log']}: {check['error']}", markup=False)
            continue
        budget, tokens = check["available_kv_bytes"], check["kv_cache_tokens"]
        out.print(
            f"cross-check: {check['log']} from {', '.join(check['from'])}: KV budget "
            f"{_gib(budget['predicted'])} vs {_gib(budget['logged'])}{_pct(budget)}"
            + (
                f", tokens {tokens['predicted']:,} vs {tokens['logged']:,}{_pct(tokens)}"
                if tokens["logged"]
                else ""
            ),
            markup=False,
        )
    bench = report.get("bench")
    if bench:
        for row in bench["results"]:
            m, u, c = row["measured"], row["uncalibrated"], row["calibrated"]
            load = (
                f"concurrency {row['max_concurrency']}"
                if row["max_concurrency"] is not None
                else f"rate {row['request_rate'] or 'inf'}"
            )
            out.print(
                f"{row['result']} ({load}): median TPOT {m['median_tpot_ms']:.2f} ms measured, "
                f"{u['median_tpot_ms']:.2f} modelled ({u['tpot_error']:+.1%}), "
                f"{c['median_tpot_ms']:.2f} calibrated ({c['tpot_error']:+.1%}); output "
                f"{m['output_throughput']:,.0f} tok/s measured, {c['output_throughput']:,.0f} "
                f"calibrated ({c['throughput_error']:+.1%})",
                markup=False,
                soft_wrap=True,
            )
        step = profile["step"]
        out.print(
            f"step terms: HBM-read time x {step['memory_scale']:.3f}, "
            f"{step['step_offset_ms']:+.3f} ms per step ({step['basis']})",
            markup=False,
            soft_wrap=True,
        )
    if report.get("saved"):
        out.print(f"saved: {report['saved']} (use it with --calibration)", markup=False)
    for note in report["notes"]:
        out.print(f"note: {note}", markup=False)
