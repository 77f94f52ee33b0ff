"""Shared fixtures: drive the real CLI entry point."""

from __future__ import annotations

from collections.abc import Callable

import pytest
from helpers import Result

from planner.cli.app import main


@pytest.fixture
def cli(capsys: pytest.CaptureFixture[str]) -> Callable[..., Result]:
    """Run `planner ARGS...` in-process through the real entry point."""

    def run(*args: str) -> Result:
        code = main(list(args))
        captured = capsys.readouterr()
        return Result(code, captured.out, captured.err)

    return run
