"""The one search the planner runs over integer settings: the largest value a monotone test
still passes (a length that fits, a batch inside a budget)."""

from __future__ import annotations

from collections.abc import Callable


def largest_passing(low: int, high: int, passes: Callable[[int], bool]) -> int:
    """The largest x in [low, high] for which `passes(x)` holds, where `passes` holds up to
    some x and fails above it; `low` itself is not tested (the caller knows it passes, or takes
    it as the floor)."""
    while low < high:
        mid = (low + high + 1) // 2
        if passes(mid):
            low = mid
        else:
            high = mid - 1
    return low
