"""`planner calibrate`: your start-up logs -> a calibration profile for capacity, fleet, drift."""

from __future__ import annotations

from typing import Annotated, Any

import typer

from planner.cli.render import console, emit_json, fit_columns, print_table


def calibrate(
    logs: Annotated[
        list[str], typer.Argument(help="vLLM / SGLang start-up logs of one deployment.")
    ],
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
    save: Annotated[
        str | None, typer.Option(help="Write the profile (YAML) for --calibration.")
    ] = None,
    json_out: Annotated[bool, typer.Option("--json", help="Print one JSON object.")] = False,
) -> None:
    """Measure the engine model's terms on your own logs; save them as a calibration profile."""
    from planner.api.calibrate import calibrate_report
    from planner.sources.files import check_writable

    if save is not None:
        check_writable(save, "--save")
    profile, report = calibrate_report(
        log_paths=list(logs),
        gpu=gpu,
        preset=preset,
        model=model,
        revision=revision,
        version=engine_version,
    )
    if save is not None:
        from planner.sources.calibration import dump_calibration
        from planner.sources.files import write_file

        write_file(save, "--save", dump_calibration(profile))
        report["saved"] = save
    if json_out:
        emit_json(report)
    else:
        render(report)


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
    if report.get("saved"):
        out.print(f"saved: {report['saved']} (use it with --calibration)", markup=False)
    for note in report["notes"]:
        out.print(f"note: {note}", markup=False)
