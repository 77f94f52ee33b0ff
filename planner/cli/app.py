"""The `planner` Typer app and its entry point (one-line errors, documented exit codes)."""

from __future__ import annotations

import signal
import sys
from typing import Annotated

import typer

from planner.cli import (
    calibrate,
    capacity,
    diagnose,
    drift,
    fleet,
    gpus,
    presets,
    simulate,
    slo,
    spec,
)
from planner.cli.numbers import checked

app = typer.Typer(
    name="planner",
    help="Capacity planner and tuning advisor for LLM serving (vLLM, SGLang).",
    add_completion=False,
    pretty_exceptions_enable=False,
    rich_markup_mode=None,
    context_settings={"help_option_names": ["-h", "--help"]},
)


@app.callback(invoke_without_command=True)
def root(
    ctx: typer.Context,
    version: Annotated[
        bool, typer.Option("--version", "-V", help="Print the planner version and exit.")
    ] = False,
) -> None:
    """Capacity planner and tuning advisor for LLM serving (vLLM, SGLang)."""
    if version:
        from planner import __version__

        sys.stdout.write(f"planner {__version__}\n")
        raise typer.Exit(0)
    if ctx.invoked_subcommand is None:
        sys.stdout.write(ctx.get_help() + "\n")
        raise typer.Exit(0)


app.command("capacity")(checked(capacity.capacity))
app.command("presets")(checked(presets.presets))
app.command("spec")(checked(spec.spec))
app.command("gpus")(checked(gpus.gpus))
app.command("simulate")(checked(simulate.simulate))
app.command("slo")(checked(slo.slo))
app.command("drift")(checked(drift.drift))
app.command("diagnose")(checked(diagnose.diagnose))
app.command("fleet")(checked(fleet.fleet))
app.command("calibrate")(checked(calibrate.calibrate))


def main(argv: list[str] | None = None) -> int:
    """Run the CLI; expected errors print one `Error:` line on stderr and return their exit code."""
    # Typer bundles its own Click: its exceptions live here, not in a separately installed click.
    from typer._click.exceptions import ClickException

    from planner.errors import PlannerError

    if argv is None and hasattr(signal, "SIGPIPE"):
        # `planner ... | head`: end quietly when the reader goes away, as cat and grep do.
        signal.signal(signal.SIGPIPE, signal.SIG_DFL)
    command = typer.main.get_command(app)
    args = sys.argv[1:] if argv is None else argv
    as_json = "--json" in args[: args.index("--")] if "--" in args else "--json" in args
    try:
        result = command.main(args=args, prog_name="planner", standalone_mode=False)
    except PlannerError as exc:
        sys.stderr.write(f"Error: {exc}\n")
        if as_json:
            _json_error(str(exc), getattr(exc, "field", None), exc.exit_code)
        return exc.exit_code
    except ClickException as exc:
        message = " ".join(exc.format_message().split())
        sys.stderr.write(f"Error: {message}\n")
        if as_json:
            _json_error(message, _click_field(exc), exc.exit_code)
        return exc.exit_code
    except typer.Abort:
        sys.stderr.write("Aborted.\n")
        return 1
    return result if isinstance(result, int) else 0


def _json_error(message: str, field: str | None, exit_code: int) -> None:
    """Under --json every failing exit prints one JSON object on stdout too (docs/json.md)."""
    import json

    payload = {"error": message, "field": field, "exit_code": exit_code}
    sys.stdout.write(json.dumps(payload, sort_keys=True, indent=2) + "\n")


def _click_field(exc: Exception) -> str | None:
    """The option a usage error is about, when Click names one."""
    param = getattr(exc, "param", None)
    opts = getattr(param, "opts", None) or []
    return next((o for o in opts if o.startswith("--")), None)
