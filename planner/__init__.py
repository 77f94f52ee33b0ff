"""planner: capacity planning and tuning advice for LLM serving.

The public API mirrors the commands and is imported lazily, so `import planner` (and
`planner --help`) stays cheap:

    >>> import planner
    >>> planner.capacity(preset="gqa-70b", gpu="mi300x").max_seqs_paged
    69
    >>> planner.slo(tpot_ms=12)["batch_cap"]
    81
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from planner.core.capacity import CapacityPlan

__all__ = ["capacity", "drift", "simulate", "slo", "speculative"]
__version__ = "0.1.0"


def capacity(
    *,
    gpu: str,
    preset: str | None = None,
    model: str | None = None,
    revision: str | None = None,
    **settings: Any,
) -> CapacityPlan:
    """Plan one GPU of a TP group; `settings` are CapacitySettings fields (tp, ...)."""
    from planner.api import capacity_plan

    return capacity_plan(gpu=gpu, preset=preset, model=model, revision=revision, **settings)


def slo(*, tpot_ms: float, **kwargs: Any) -> dict[str, Any]:
    """`planner slo` as a function: the batch cap for a TPOT budget (see planner.api.slo)."""
    from planner.api import slo_advice

    return slo_advice(tpot_ms=tpot_ms, **kwargs)


def speculative(
    *,
    alphas: list[float],
    ks: list[int] | None = None,
    draft_cost: float = 0.05,
    verify_cost: float = 0.0,
    method: str = "eagle3",
    max_batch: int = 4096,
    **kwargs: Any,
) -> dict[str, Any]:
    """`planner spec` as a function: speedup per k, break-even alpha, load coupling."""
    from planner.api import spec_advice

    return spec_advice(
        alphas=alphas,
        ks=ks or list(range(1, 17)),
        draft_cost=draft_cost,
        verify_cost=verify_cost,
        method=method,
        max_batch=max_batch,
        **kwargs,
    )


def simulate(**kwargs: Any) -> dict[str, Any]:
    """`planner simulate` as a function (see planner.api.simulate.simulation)."""
    from planner.api import simulation

    return simulation(**kwargs)


def drift(*, plan_path: str, **kwargs: Any) -> dict[str, Any]:
    """`planner drift` as a function: the drift report of a plan lock file."""
    from planner.api import drift_report

    defaults: dict[str, Any] = {
        "recompute": None,
        "revision_mode": "current",
        "tolerance": 0.02,
        "against_args": [],
        "against_args_files": [],
        "metrics_urls": [],
        "timeout_s": 5.0,
    }
    return drift_report(plan_path=plan_path, **(defaults | kwargs))
