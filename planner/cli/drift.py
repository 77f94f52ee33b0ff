"""`planner drift`: fail CI when what runs, or the model upstream, no longer matches the plan."""

from typing import Annotated, Any

import typer

from planner.cli.render import console, emit_json, fit_columns, print_table, report_format


def drift(
    plan: Annotated[str, typer.Argument(help="Plan lock file written by `capacity --save`.")],
    recompute: Annotated[
        bool | None,
        typer.Option(
            "--recompute/--no-recompute",
            help="Re-read inputs and recompute [default: on unless --against-* given].",
        ),
    ] = None,
    revision: Annotated[
        str,
        typer.Option(
            "--hub-ref",
            "--revision",
            help="Recompute the Hub config at the 'current' requested ref or the 'pinned' "
            "commit (elsewhere --revision is the Hub revision itself).",
        ),
    ] = "current",
    tolerance: Annotated[str, typer.Option(help="Relative tolerance for figures.")] = "2%",
    against_args: Annotated[
        list[str] | None, typer.Option(help="A deployed command line (repeatable).")
    ] = None,
    against_args_file: Annotated[
        list[str] | None,
        typer.Option(help="Command file, vLLM --config YAML, k8s manifest or compose file."),
    ] = None,
    against_metrics: Annotated[
        list[str] | None, typer.Option(help="A running server's /metrics URL (repeatable).")
    ] = None,
    endpoints: Annotated[
        str | None, typer.Option(help="File with one /metrics URL per line.")
    ] = None,
    timeout: Annotated[float | None, typer.Option(help="Seconds per /metrics fetch [5].")] = None,
    calibration: Annotated[
        str | None,
        typer.Option(help="Recompute with this calibration profile [default: the plan's]."),
    ] = None,
    upgrade_to: Annotated[
        str | None,
        typer.Option(
            help="Engine version to upgrade to: drift if it loses more KV capacity than "
            "--tolerance."
        ),
    ] = None,
    output_format: Annotated[
        str | None,
        typer.Option("--format", help="table, json or github (Actions annotations) [table]."),
    ] = None,
    json_out: Annotated[bool, typer.Option("--json", help="Same as --format json.")] = False,
) -> None:
    """Exit 0 clean, 1 drift, 2 bad plan or input, 3 a source unreachable."""
    from planner.api import drift_report, parse_tolerance
    from planner.errors import InputError
    from planner.sources.deployed import DEFAULT_TIMEOUT_S

    fmt = report_format(json_out, output_format)
    urls = list(against_metrics or [])
    if endpoints is not None:
        from planner.sources.files import ARGS_LIMIT_BYTES, read_text

        lines = read_text(endpoints, "--endpoints", ARGS_LIMIT_BYTES).splitlines()
        urls += [u.strip() for u in lines if u.strip() and not u.strip().startswith("#")]
    if timeout is not None and not against_metrics and endpoints is None:
        raise InputError(
            "--timeout", "times /metrics fetches: add --against-metrics or --endpoints"
        )
    report = drift_report(
        plan_path=plan,
        recompute=recompute,
        revision_mode=revision,
        tolerance=parse_tolerance(tolerance),
        against_args=list(against_args or []),
        against_args_files=list(against_args_file or []),
        metrics_urls=urls,
        timeout_s=DEFAULT_TIMEOUT_S if timeout is None else timeout,
        calibration_path=calibration,
        upgrade_to=upgrade_to,
    )
    if fmt == "json":
        emit_json(report)
    elif fmt == "github":
        render_github(report)
    else:
        render_table(report)
    raise typer.Exit(report["exit_code"])


def render_table(report: dict[str, Any]) -> None:
    """Sources, then one row per difference (or "clean")."""
    from rich.table import Table

    out = console()
    for s in report["sources"]:
        out.print(f"{s['where']}: {s['status']}", markup=False)
    if not report["differences"]:
        out.print("clean" if report["clean"] else "no drift found, but a source was unreachable")
        return
    table = Table(title=f"Drift against {report['plan']}", title_justify="left")
    for col in ("where", "key", "planned", "actual", "tolerance"):
        table.add_column(col)
    for d in report["differences"]:
        table.add_row(d["where"], d["key"], str(d["planned"]), str(d["actual"]), d["tolerance"])
    print_table(out, fit_columns(table, wrap=("where", "key", "planned", "actual")))


def render_github(report: dict[str, Any]) -> None:
    """GitHub Actions annotations: an error per difference, a warning per unreachable source."""
    import sys

    for d in report["differences"]:
        sys.stdout.write(
            f"::error file={report['plan']},title=planner drift::{d['where']}: {d['key']} "
            f"planned {d['planned']}, actual {d['actual']} (tolerance {d['tolerance']})\n"
        )
    for s in report["sources"]:
        if s["status"].startswith("unreachable"):
            sys.stdout.write(f"::warning title=planner drift::{s['where']}: {s['status']}\n")
    if report["clean"]:
        sys.stdout.write(f"::notice title=planner drift::{report['plan']}: clean\n")
