"""The `planner` Typer app and its entry point (one-line errors, documented exit codes)."""

import importlib
import os
import signal
import sys
from collections.abc import Callable
from typing import Annotated, Any

# pydantic looks for plugins (entry points of every installed distribution) when the first
# model class is built; the CLI uses none, and the scan is ~5% of a command's start-up
# (benchmarks/startup.py). Set before typer imports pydantic; an explicit setting wins.
os.environ.setdefault("PYDANTIC_DISABLE_PLUGINS", "__all__")


def _no_plugin_scan() -> None:
    """With plugins disabled pydantic's loader returns none, but importing the loader still
    imports importlib.metadata (~10 ms of every command). Stand in for it with a loader that
    returns none, as pydantic's does then (pydantic/plugin/_loader.py get_plugins, 2.5-2.14):
    only when every plugin is disabled and pydantic has not loaded its own yet."""
    import types

    name = "pydantic.plugin._loader"
    if os.environ.get("PYDANTIC_DISABLE_PLUGINS") not in ("__all__", "1", "true"):
        return
    if name in sys.modules:
        return
    loader = types.ModuleType(name)
    loader.get_plugins = lambda: ()  # type: ignore[attr-defined]
    sys.modules[name] = loader


_no_plugin_scan()

import typer  # noqa: E402 (after the plugin settings above: typer imports pydantic)

# Each command's module and function: a run imports only the module of the command it runs,
# and `planner --help` none of them (the summaries below are what it lists).
COMMANDS: dict[str, str] = {
    "capacity": "planner.cli.capacity",
    "presets": "planner.cli.presets",
    "spec": "planner.cli.spec",
    "gpus": "planner.cli.gpus",
    "simulate": "planner.cli.simulate",
    "slo": "planner.cli.slo",
    "drift": "planner.cli.drift",
    "diagnose": "planner.cli.diagnose",
    "fleet": "planner.cli.fleet",
    "calibrate": "planner.cli.calibrate",
}
# The first line of each command's docstring (tests/test_startup.py keeps them equal).
SUMMARIES: dict[str, str] = {
    "capacity": "Does the model fit, how many sequences run at once, what binds them, and the "
    "flags.",
    "presets": "List the model, GPU and workload presets shipped with planner.",
    "spec": "Speculative-decoding speedup per k, break-even alpha, and the concurrency it stops "
    "paying.",
    "gpus": "List the GPU catalog (memory, bandwidth, dense FLOPs) and detected devices.",
    "simulate": "Throughput, latency percentiles and goodput of scheduling policies on one trace.",
    "slo": "The largest batch meeting TPOT, the prefill chunk that keeps stalls inside it, and "
    "flags.",
    "drift": "Exit 0 clean, 1 drift, 2 bad plan or input, 3 a source unreachable.",
    "diagnose": "Exit 0 healthy, 1 a check calls for action, 2 bad input, 3 the endpoint "
    "unreachable.",
    "fleet": "Which GPUs, TP, replicas and flags serve this traffic within the promise, at what "
    "cost.",
    "calibrate": "Measure the engine model's terms on your own logs; save them as a calibration "
    "profile.",
}


def command_function(name: str) -> Callable[..., Any]:
    """The function behind a command, wrapped for the documented number checks."""
    from planner.cli.numbers import checked

    module = importlib.import_module(COMMANDS[name])
    function: Callable[..., Any] = getattr(module, name)
    return checked(function)


def build_app(loaded: set[str] | None = None) -> typer.Typer:
    """The Typer app. Commands in `loaded` (all when None) are the real ones; the others are
    listed by name and summary only, which is all a run of another command or the root help
    reads of them."""
    app = typer.Typer(
        name="planner",
        help="Capacity planner and tuning advisor for LLM serving (vLLM, SGLang).",
        add_completion=False,
        pretty_exceptions_enable=False,
        rich_markup_mode=None,
        context_settings={"help_option_names": ["-h", "--help"]},
    )
    app.callback(invoke_without_command=True)(root)
    for name in COMMANDS:
        if loaded is None or name in loaded:
            app.command(name)(command_function(name))
        else:
            app.command(name, help=SUMMARIES[name], add_help_option=False)(_listed_only)
    return app


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


def _listed_only() -> None:
    """Stands in for a command that is not loaded in this run (never invoked: main loads the
    command it runs)."""
    raise AssertionError("a listed-only command was invoked")


def _invoked(args: list[str]) -> str | None:
    """The command the arguments name: the first one that is not an option (the root takes
    only flags), if it is a command."""
    for arg in args:
        if arg == "--":
            return None
        if not arg.startswith("-"):
            return arg if arg in COMMANDS else None
    return None


def __getattr__(name: str) -> Any:
    """`app`: the whole app with every command loaded (docs and tests read it)."""
    if name == "app":
        return build_app()
    raise AttributeError(name)


def main(argv: list[str] | None = None) -> int:
    """Run the CLI; expected errors print one `Error:` line on stderr and return their exit code."""
    # Typer bundles its own Click: its exceptions live here, not in a separately installed click.
    from typer._click.exceptions import ClickException

    from planner.errors import InputError, PlannerError

    if argv is None and hasattr(signal, "SIGPIPE"):
        # `planner ... | head`: end quietly when the reader goes away, as cat and grep do.
        signal.signal(signal.SIGPIPE, signal.SIG_DFL)
    args = sys.argv[1:] if argv is None else argv
    name = _invoked(args)
    command = typer.main.get_command(build_app(set() if name is None else {name}))
    as_json = "--json" in args[: args.index("--")] if "--" in args else "--json" in args
    try:
        _refuse_repeats(command, name, args)
        result = command.main(args=args, prog_name="planner", standalone_mode=False)
    except PlannerError as exc:
        field = getattr(exc, "field", None)
        message = str(exc)
        typed = _typed_spelling(command, name, args, field)
        if typed is not None and isinstance(exc, InputError):
            field, message = typed, f"{typed}: {exc.message}"
        sys.stderr.write(f"Error: {message}\n")
        if as_json:
            _json_error(message, field, exc.exit_code)
        return exc.exit_code
    except ClickException as exc:
        field, message = _bad_value(args, exc) or (
            _click_field(exc),
            " ".join(exc.format_message().split()),
        )
        sys.stderr.write(f"Error: {message}\n")
        if as_json:
            _json_error(message, field, exc.exit_code)
        return exc.exit_code
    except typer.Abort:
        sys.stderr.write("Aborted.\n")
        return 1
    return result if isinstance(result, int) else 0


def _subcommand(command: Any, name: str | None) -> Any:
    """The command object `name` invokes (None: no command named, or a group)."""
    return getattr(command, "commands", {}).get(name) if name else None


def _typed_flags(args: list[str]) -> list[str]:
    """The options on the command line as typed, before a `--` (their `=value` left off; the
    values and arguments between them stay, harmlessly: none starts with `--`)."""
    return [a.split("=", 1)[0] for a in (args[: args.index("--")] if "--" in args else args)]


def _param_of(sub: Any, flag: str) -> Any:
    """The parameter of command `sub` that `flag` spells (any of its names), or None."""
    return next(
        (
            p
            for p in sub.params
            if flag in getattr(p, "opts", ()) + getattr(p, "secondary_opts", ())
        ),
        None,
    )


def _typed_spelling(
    command: Any, name: str | None, args: list[str], field: str | None
) -> str | None:
    """The spelling the user typed of the option an error names, where it is another of that
    option's names (`--tensor-parallel-size` for an error about `--tp`, `--quantization` for
    one about `--weight-dtype`); None where the error names what was typed, or no option."""
    sub = _subcommand(command, name)
    if sub is None or not field or not field.startswith("--"):
        return None
    param = _param_of(sub, field)
    flags = _typed_flags(args)
    if param is None or field in flags:
        return None
    return next((f for f in flags if f in param.opts), None)


def _refuse_repeats(command: Any, name: str | None, args: list[str]) -> None:
    """An option that takes one value, given twice: Click would keep the last one and drop the
    other without a word (`fleet --gpu h200 --gpu mi300x` planning MI300X alone), so it is an
    input error naming the flag. Repeatable options (lists) and on/off switches are left be."""
    from planner.errors import InputError

    sub = _subcommand(command, name)
    if sub is None or getattr(sub, "commands", None):
        return
    seen: dict[str, str] = {}
    for flag in _typed_flags(args):
        if not flag.startswith("--"):
            continue
        param = _param_of(sub, flag)
        if param is None or getattr(param, "multiple", True) or getattr(param, "is_flag", True):
            continue
        if param.name in seen:
            raise InputError(
                flag, f"given twice ({seen[param.name]} and {flag}); it takes one value"
            )
        seen[param.name] = flag


def _json_error(message: str, field: str | None, exit_code: int) -> None:
    """Under --json every failing exit prints one JSON object on stdout too (docs/json.md)."""
    import json

    payload = {"error": message, "field": field, "exit_code": exit_code}
    sys.stdout.write(json.dumps(payload, sort_keys=True, indent=2) + "\n")


# Typer's messages for a value of the wrong type, as what the option accepts.
VALUE_KINDS = {"valid integer": "a whole number", "valid number": "a number"}


def _bad_value(args: list[str], exc: Exception) -> tuple[str, str] | None:
    """A value of the wrong type as the option as typed and one line naming it and what it
    takes (`--requests: expects a whole number, got '1.5'`), or, where the word after the
    option is another flag, that its value is missing; None for other usage errors."""
    from typer._click.exceptions import BadParameter

    param = getattr(exc, "param", None)
    if not isinstance(exc, BadParameter) or param is None:
        return None
    spellings = (*getattr(param, "opts", ()), *getattr(param, "secondary_opts", ()))
    words = args[: args.index("--")] if "--" in args else args
    for i, word in enumerate(words):
        flag, equals, value = word.partition("=")
        if flag not in spellings:
            continue
        if not equals:
            value = words[i + 1] if i + 1 < len(words) else ""
            if value.startswith("--"):
                return flag, f"{flag} needs a value (the next word is the flag {value})"
        kind = next((k for key, k in VALUE_KINDS.items() if key in exc.message), None)
        if kind is None:
            return None
        return flag, f"{flag}: expects {kind}, got {value!r}"
    return None


def _click_field(exc: Exception) -> str | None:
    """The option a usage error is about, when Click names one."""
    param = getattr(exc, "param", None)
    opts = getattr(param, "opts", None) or []
    return next((o for o in opts if o.startswith("--")), None)
