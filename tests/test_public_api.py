"""The Python API mirrors the commands (docstring examples run here too)."""

from __future__ import annotations

import doctest
from pathlib import Path

import planner


def test_docstring_examples() -> None:
    assert doctest.testmod(planner).failed == 0


def test_functions_match_the_reference_figures(tmp_path: Path) -> None:
    assert planner.slo(tpot_ms=50)["batch_cap"] == 523
    spec = planner.speculative(alphas=[0.3])
    assert spec["best"][0]["k"] == 2
    sim = planner.simulate(
        overrides={}, policies=["continuous"], sweep=None, cost=None, sim={"max_batch": 32}
    )
    assert sim["policies"][0]["goodput_pct"] >= 95
    plan = tmp_path / "plan.yaml"
    from planner.api import capacity_report, lock_for
    from planner.plan import dump

    settings = {"context_tokens": 8192}
    p, pred = capacity_report(
        gpu="mi300x",
        preset="gqa-70b",
        model=None,
        revision=None,
        gpu_memory_gib=None,
        settings=settings,
        engine=None,
    )
    lock = lock_for(
        p,
        pred,
        preset="gqa-70b",
        model=None,
        revision=None,
        gpu="mi300x",
        gpu_memory_gib=None,
        settings=settings,
        engine=None,
    )
    plan.write_text(dump(lock))
    assert planner.drift(plan_path=str(plan))["clean"] is True
