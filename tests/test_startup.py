"""Heavy modules stay off the start-up paths (timing itself lives in benchmarks/startup.py)."""

from __future__ import annotations

import subprocess
import sys

import pytest

PROBE = """
import sys
from planner.cli.app import main
main({args!r})
print("LOADED:" + ",".join(m for m in ("numpy", "huggingface_hub", "pynvml") if m in sys.modules))
"""


@pytest.mark.parametrize(
    ("args", "forbidden"),
    [
        (["--help"], {"numpy", "huggingface_hub", "pynvml"}),
        (["capacity", "--preset", "gqa-70b", "--gpu", "mi300x"], {"numpy", "huggingface_hub"}),
    ],
)
def test_no_heavy_imports(args: list[str], forbidden: set[str]) -> None:
    out = subprocess.run(
        [sys.executable, "-c", PROBE.format(args=args)], capture_output=True, text=True, check=True
    ).stdout
    line = next(ln for ln in out.splitlines() if ln.startswith("LOADED:"))
    assert not forbidden & set(filter(None, line.removeprefix("LOADED:").split(",")))
