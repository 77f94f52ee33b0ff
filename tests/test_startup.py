"""Heavy modules stay off the start-up paths (timing itself lives in benchmarks/startup.py)."""

from __future__ import annotations

import subprocess
import sys

import pytest

from planner.cli.app import COMMANDS, SUMMARIES, command_function

PROBE = """
import sys
from planner.cli.app import main
main({args!r})
print("LOADED:" + ",".join(m for m in sys.modules if m.split(".")[0] in {top!r} or m in {top!r}))
"""
COMMAND_MODULES = {f"planner.cli.{name}" for name in COMMANDS}


@pytest.mark.parametrize(
    ("args", "forbidden"),
    [
        # the root help lists the commands from their summaries: no command module loads
        (["--help"], {"numpy", "huggingface_hub", "pynvml", "pydantic", *COMMAND_MODULES}),
        (
            ["capacity", "--preset", "gqa-70b", "--gpu", "mi300x"],
            {"numpy", "huggingface_hub", *(COMMAND_MODULES - {"planner.cli.capacity"})},
        ),
    ],
)
def test_no_heavy_imports(args: list[str], forbidden: set[str]) -> None:
    top = sorted({m.split(".")[0] for m in forbidden} | forbidden)
    out = subprocess.run(
        [sys.executable, "-c", PROBE.format(args=args, top=top)],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    line = next(ln for ln in out.splitlines() if ln.startswith("LOADED:"))
    assert not forbidden & set(filter(None, line.removeprefix("LOADED:").split(",")))


@pytest.mark.parametrize("name", sorted(COMMANDS))
def test_the_root_help_lists_each_commands_own_summary(name: str) -> None:
    """`planner --help` lists commands without loading them: its summaries must be the first
    line of each command's docstring, what the command's own --help prints."""
    doc = command_function(name).__doc__ or ""
    assert SUMMARIES[name] == doc.strip().splitlines()[0]


@pytest.mark.parametrize(("setting", "scanned"), [(None, False), ("some_plugin", True)])
def test_pydantic_scans_for_plugins_only_when_some_may_load(
    setting: str | None, scanned: bool
) -> None:
    """All plugins disabled (the CLI's default): pydantic's loader is stood in for and the
    entry-point scan's importlib.metadata never loads. A user naming plugins to disable gets
    pydantic's own loader (and the others load)."""
    import os

    env = {k: v for k, v in os.environ.items() if k != "PYDANTIC_DISABLE_PLUGINS"}
    if setting is not None:
        env["PYDANTIC_DISABLE_PLUGINS"] = setting
    probe = (
        "import sys\n"
        "from planner.cli.app import main\n"
        "main(['capacity', '--preset', 'gqa-70b', '--gpu', 'mi300x', '--json'])\n"
        # pydantic's own loader is a file; the CLI's stand-in is not
        "print('SCANNED:', hasattr(sys.modules['pydantic.plugin._loader'], '__file__'))"
    )
    out = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, check=True, env=env
    ).stdout
    assert f"SCANNED: {scanned}" in out
