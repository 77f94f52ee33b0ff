"""The `planner` Typer app and its entry point (one-line errors, documented exit codes)."""

from __future__ import annotations

import sys

import typer

from planner.cli import capacity, drift, gpus, presets, simulate, slo, spec

app = typer.Typer(
    name="planner",
    help="Capacity planner and tuning advisor for LLM serving (vLLM, SGLang).",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    rich_markup_mode=None,
)
app.command("capacity")(capacity.capacity)
app.command("presets")(presets.presets)
app.command("spec")(spec.spec)
app.command("gpus")(gpus.gpus)
app.command("simulate")(simulate.simulate)
app.command("slo")(slo.slo)
app.command("drift")(drift.drift)


def main(argv: list[str] | None = None) -> int:
    """Run the CLI; expected errors print one `Error:` line on stderr and return their exit code."""
    # Typer bundles its own Click: its exceptions live here, not in a separately installed click.
    from typer._click.exceptions import ClickException

    from planner.errors import PlannerError

    command = typer.main.get_command(app)
    try:
        result = command.main(
            args=sys.argv[1:] if argv is None else argv,
            prog_name="planner",
            standalone_mode=False,
        )
    except PlannerError as exc:
        sys.stderr.write(f"Error: {exc}\n")
        return exc.exit_code
    except ClickException as exc:
        sys.stderr.write(f"Error: {exc.format_message()}\n")
        return exc.exit_code
    except typer.Abort:
        sys.stderr.write("Aborted.\n")
        return 1
    return result if isinstance(result, int) else 0
