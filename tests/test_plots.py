"""Image charts (the plot extra) for slo, spec and simulate, and the missing-extra message."""

from __future__ import annotations

import sys
from collections.abc import Callable
from pathlib import Path

import pytest
from helpers import Result

Cli = Callable[..., Result]
PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


@pytest.mark.parametrize(
    "args",
    [
        ["slo", "--tpot", "12"],
        ["spec", "--alpha", "0.5,0.7,0.9"],
        ["simulate", "--sweep", "max_batch=4,8,16,32"],
    ],
)
def test_plot_writes_a_png(cli: Cli, tmp_path: Path, args: list[str]) -> None:
    pytest.importorskip("matplotlib")
    out = tmp_path / "chart.png"
    r = cli(*args, "--plot", str(out))
    assert r.code == 0, r.err
    data = out.read_bytes()
    assert data.startswith(PNG_MAGIC) and len(data) > 10_000


def test_plot_without_matplotlib_names_the_extra(
    cli: Cli, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setitem(sys.modules, "matplotlib", None)
    r = cli("slo", "--tpot", "12", "--plot", str(tmp_path / "x.png"))
    assert r.code == 2 and "serving-planner[plot]" in r.err


def test_simulate_plot_needs_a_sweep(cli: Cli, tmp_path: Path) -> None:
    r = cli("simulate", "--plot", str(tmp_path / "x.png"))
    assert r.code == 2 and "--sweep" in r.err
