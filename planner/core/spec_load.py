"""Speculative decoding under load: v from the step-time model, where speculation stops paying."""

from __future__ import annotations

import numpy as np
from numpy.typing import NDArray
from pydantic import BaseModel, ConfigDict

from planner.core.latency import Roofline, step_ms, verify_cost
from planner.core.speculative import expected_tokens


class LoadPoint(BaseModel):
    """Speculation at one concurrency: v per the roofline, the best k and its speedup."""

    model_config = ConfigDict(extra="forbid")

    batch: int
    draft_cost: float
    verify_cost_best_k: float
    best_k: int
    speedup: float


def best_speedup_by_batch(
    target: Roofline,
    alpha: float,
    ks: list[int],
    batches: NDArray[np.int64],
    draft_cost: float,
    draft: Roofline | None = None,
) -> tuple[NDArray[np.float64], NDArray[np.int64], NDArray[np.float64], NDArray[np.float64]]:
    """(best speedup, best k, c, v at best k) for every batch size, vectorised over batches."""
    b = batches.astype(np.float64)
    c = step_ms(draft, b) / step_ms(target, b) if draft is not None else np.full_like(b, draft_cost)
    speeds = []
    vs = []
    for k in ks:
        v = verify_cost(target, b, k)
        speeds.append(expected_tokens(alpha, k) / (1.0 + k * c + k * v))
        vs.append(v)
    s = np.vstack(speeds)
    idx = np.argmax(s, axis=0)
    cols = np.arange(b.size)
    return s[idx, cols], np.asarray(ks)[idx], c, np.vstack(vs)[idx, cols]


def disable_above(
    target: Roofline,
    alpha: float,
    ks: list[int],
    max_batch: int,
    draft_cost: float,
    draft: Roofline | None = None,
) -> int | None:
    """Largest concurrency at which the best k still pays (S >= 1); None if it pays up to max.

    Returns 0 when speculation loses even at one sequence.
    """
    batches = np.arange(1, max_batch + 1)
    best, _, _, _ = best_speedup_by_batch(target, alpha, ks, batches, draft_cost, draft)
    losing = np.nonzero(best < 1.0)[0]
    if losing.size == 0:
        return None
    return int(batches[losing[0]]) - 1


def load_points(
    target: Roofline,
    alpha: float,
    ks: list[int],
    batches: list[int],
    draft_cost: float,
    draft: Roofline | None = None,
) -> list[LoadPoint]:
    """The table of speculation at a few concurrencies."""
    arr = np.asarray(batches)
    best, kbest, c, v = best_speedup_by_batch(target, alpha, ks, arr, draft_cost, draft)
    return [
        LoadPoint(
            batch=int(arr[i]),
            draft_cost=float(c[i]),
            verify_cost_best_k=float(v[i]),
            best_k=int(kbest[i]),
            speedup=float(best[i]),
        )
        for i in range(arr.size)
    ]
