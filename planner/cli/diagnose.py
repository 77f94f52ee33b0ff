"""`planner diagnose`: read a running server's /metrics and say which knob comes next."""

import sys
from typing import Annotated, Any

import typer

from planner.cli.render import console, emit_json, fit_columns, print_table, report_format


def diagnose(
    metrics: Annotated[
        str | None, typer.Option(help="A vLLM or SGLang /metrics URL, scraped twice.")
    ] = None,
    window: Annotated[
        float | None, typer.Option(help="Seconds between the two scrapes [10].")
    ] = None,
    snapshots: Annotated[
        str | None, typer.Option(help="Two saved scrapes instead: EARLIER.prom,LATER.prom.")
    ] = None,
    interval: Annotated[
        float | None, typer.Option(help="Seconds between the --snapshots (required with them).")
    ] = None,
    timeout: Annotated[
        float | None, typer.Option(help="Seconds per scrape (headers and body) [5].")
    ] = None,
    tpot: Annotated[float | None, typer.Option(help="TPOT budget, ms.")] = None,
    ttft: Annotated[float | None, typer.Option(help="TTFT budget, ms.")] = None,
    percentile: Annotated[float, typer.Option(help="Percentile the budgets hold at.")] = 95.0,
    draft_cost: Annotated[
        float, typer.Option(help="Draft cost per target forward, for speculation checks.")
    ] = 0.05,
    plan: Annotated[
        str | None, typer.Option(help="The deployment's plan lock file (model, GPU, settings).")
    ] = None,
    preset: Annotated[str | None, typer.Option(help="Model preset (instead of --plan).")] = None,
    model: Annotated[str | None, typer.Option(help="Model folder or Hub id.")] = None,
    gpu: Annotated[str | None, typer.Option(help="GPU id, with --preset/--model.")] = None,
    tp: Annotated[int | None, typer.Option(help="Tensor-parallel size.")] = None,
    context: Annotated[int | None, typer.Option(help="The server's max model length.")] = None,
    output_format: Annotated[
        str | None,
        typer.Option("--format", help="table, json or github (Actions annotations) [table]."),
    ] = None,
    json_out: Annotated[bool, typer.Option("--json", help="Same as --format json.")] = False,
    watch: Annotated[
        bool, typer.Option(help="Re-run every window and print only what changed (Ctrl-C ends).")
    ] = False,
) -> None:
    """Exit 0 healthy, 1 a check calls for action, 2 bad input, 3 the endpoint unreachable."""
    from planner.api.diagnose import (
        DEFAULT_WINDOW_S,
        MAX_WINDOW_S,
        diagnose_report,
    )
    from planner.errors import InputError
    from planner.sources.deployed import DEFAULT_TIMEOUT_S

    fmt = report_format(json_out, output_format)
    if snapshots is not None:
        # saved scrapes: no endpoint to wait on or time out
        for flag, value in (("--window", window), ("--timeout", timeout)):
            if value is not None:
                raise InputError(flag, "times live --metrics scrapes; --snapshots take --interval")
    elif interval is not None:
        raise InputError(
            "--interval", "is the time between --snapshots; --metrics scrapes are --window apart"
        )
    window = DEFAULT_WINDOW_S if window is None else window
    timeout = DEFAULT_TIMEOUT_S if timeout is None else timeout
    if not 0 <= draft_cost <= 1:
        raise InputError("--draft-cost", f"must be in [0, 1] (got {draft_cost})")
    if watch and metrics is None:
        raise InputError("--watch", "needs --metrics (a live endpoint)")
    if not 0 < window <= MAX_WINDOW_S:
        raise InputError("--window", f"must be in (0, {MAX_WINDOW_S:g}] s (got {window})")

    def run() -> dict[str, Any]:
        return diagnose_report(
            metrics_url=metrics,
            window_s=window,
            snapshots=[p for p in (snapshots or "").split(",") if p],
            interval_s=interval,
            timeout_s=timeout,
            budgets={
                "tpot_ms": tpot,
                "ttft_ms": ttft,
                "percentile": percentile,
                "draft_cost": draft_cost,
            },
            plan_path=plan,
            preset=preset,
            model=model,
            gpu=gpu,
            settings={"tp": tp, "context_tokens": context},
        )

    report = run()
    show(report, fmt)
    if watch:
        try:
            while True:
                previous, report = report, run()
                changed = _changes(previous, report)
                for line in changed:
                    sys.stdout.write(line + "\n")
                sys.stdout.flush()
        except KeyboardInterrupt:
            pass
    raise typer.Exit(0 if report["healthy"] else 1)


def _changes(old: dict[str, Any], new: dict[str, Any]) -> list[str]:
    """One line per check whose verdict or value moved."""
    before = {f["check"]: f for f in old["findings"]}
    lines = []
    for f in new["findings"]:
        was = before.get(f["check"])
        if was is None or (was["verdict"], was["value"]) != (f["verdict"], f["value"]):
            lines.append(f"{f['check']}: {f['value']} ({f['verdict']})")
    return lines


def show(report: dict[str, Any], fmt: str) -> None:
    """The report in the chosen format."""
    if fmt == "json":
        emit_json(report)
        return
    if fmt == "github":
        for f in report["findings"]:
            if f["verdict"] == "fail":
                sys.stdout.write(
                    f"::error title=planner diagnose::{f['check']} {f['value']} (threshold "
                    f"{f['threshold']}): {f['action'] or 'see planner diagnose'}\n"
                )
        if report["healthy"]:
            sys.stdout.write(f"::notice title=planner diagnose::{report['source']}: healthy\n")
        return
    from rich.table import Table

    out = console()
    out.print(
        f"{report['engine']} at {report['source']}, {report['interval_s']:.1f} s window",
        markup=False,
    )
    table = Table(title="Checklist", title_justify="left")
    for col in ("check", "value", "threshold", "verdict"):
        table.add_column(col)
    for f in report["findings"]:
        table.add_row(f["check"], f["value"], f["threshold"], f["verdict"])
    print_table(out, fit_columns(table, wrap=("value", "threshold")))
    if report["config"]:
        shown = ", ".join(f"{k}={v}" for k, v in report["config"].items())
        out.print(f"running with: {shown}", markup=False)
    for name in report["counter_resets"]:
        out.print(f"note: {name} was reset between the scrapes (counted from the reset)")
    advice = report["advice"]
    if advice is None:
        out.print("[bold]Healthy:[/] every check passes.")
        return
    out.print(
        f"[bold]Next:[/] {advice['check']} {advice['value']}: {advice['action']}", markup=True
    )
    if advice["expected_effect"]:
        out.print(f"  expected: {advice['expected_effect']}", markup=False)
