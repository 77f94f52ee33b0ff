"""Shared fixtures: drive the real CLI entry point."""

from __future__ import annotations

import os
from collections.abc import Callable

import pytest
from helpers import Result
from hypothesis import settings

from planner.cli.app import main

# Property tests draw the same examples on every run (derived from each test's name), so a
# green run here is a green run in CI; HYPOTHESIS_PROFILE=explore searches new ones (and keeps
# what it finds in .hypothesis/ to replay).
settings.register_profile("repro", derandomize=True)
settings.register_profile("explore", derandomize=False, max_examples=300)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "repro"))


@pytest.fixture
def cli(capsys: pytest.CaptureFixture[str]) -> Callable[..., Result]:
    """Run `planner ARGS...` in-process through the real entry point."""

    def run(*args: str) -> Result:
        code = main(list(args))
        captured = capsys.readouterr()
        return Result(code, captured.out, captured.err)

    return run
