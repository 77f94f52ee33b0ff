"""Docs cannot drift from the CLI: every command is documented and has help; every option of
every command appears in its doc page."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest
import typer
from helpers import Result

from planner.cli.app import app

ROOT = Path(__file__).resolve().parent.parent
Cli = Callable[..., Result]
PAGES = {
    "capacity": "capacity.md",
    "spec": "spec.md",
    "slo": "slo.md",
    "simulate": "simulate.md",
    "drift": "drift.md",
    "gpus": "gpus.md",
    "diagnose": "diagnose.md",
    "fleet": "fleet.md",
    "calibrate": "calibrate.md",
}
COMMANDS = sorted(c.name or "" for c in app.registered_commands)


def test_every_command_is_in_the_readme_and_has_a_page() -> None:
    readme = (ROOT / "README.md").read_text()
    for name in COMMANDS:
        assert f"planner {name}" in readme, name
        if name != "presets":
            assert (ROOT / "docs" / PAGES[name]).exists(), name


@pytest.mark.parametrize("name", COMMANDS)
def test_every_command_has_help(cli: Cli, name: str) -> None:
    r = cli(name, "--help")
    assert r.code == 0 and "Usage:" in r.out and len(r.out) > 150


@pytest.mark.parametrize("name", [n for n in COMMANDS if n in PAGES and n != "capacity"])
def test_every_option_is_documented(name: str) -> None:
    command = typer.main.get_command(app).commands[name]  # type: ignore[attr-defined]
    page = (ROOT / "docs" / PAGES[name]).read_text()
    engine_page = (ROOT / "docs" / "engines.md").read_text()
    missing = []
    for param in command.params:
        for opt in param.opts:
            if opt.startswith("--") and opt not in ("--help",) and opt not in page + engine_page:
                missing.append(opt)
    assert not missing, f"{name}: undocumented {missing}"


def test_capacity_options_are_documented() -> None:
    command = typer.main.get_command(app).commands["capacity"]  # type: ignore[attr-defined]
    text = "".join(
        (ROOT / "docs" / p).read_text() for p in ("capacity.md", "engines.md", "drift.md")
    )
    missing = [o for p in command.params for o in p.opts if o.startswith("--") and o not in text]
    assert not missing, missing
