"""planner: capacity planning and tuning advice for LLM serving.

The public API is lazy so that importing the package (and `planner --help`) stays cheap:

    >>> import planner
    >>> plan = planner.capacity(preset="gqa-70b", gpu="mi300x")
    >>> plan.max_seqs_paged
    69
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from planner.core.capacity import CapacityPlan

__all__ = ["capacity"]
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
