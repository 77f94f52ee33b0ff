"""Speculative decoding under load: c and v from the step-time model, where speculation stops
paying."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

import numpy as np
from numpy.typing import NDArray
from pydantic import BaseModel, ConfigDict

from planner.core.speculative import expected_tokens

if TYPE_CHECKING:
    from planner.core.step import StepTime

# A step's time in ms for each batch size, each sequence scoring `tokens` positions (1: a plain
# decode step; 1 + k: the target verifying k drafted tokens).
StepCost = Callable[[NDArray[np.float64], int], NDArray[np.float64]]


def verify_ms(
    curve: StepTime,
    seqs: int,
    kv_bytes: int,
    context: int,
    k: int,
    prefill_tokens: int = 0,
    prefill_pairs: float = 0.0,
) -> float:
    """The target's step verifying k drafts for each of `seqs` sequences at `context` tokens
    (reading `kv_bytes` of KV), beside any prefill chunk: one engine step of seqs x (1 + k)
    scored positions (planner.core.step.StepTime.mixed_ms) whose drafted ones attend over the
    context as cached prefill does."""
    extra = seqs * k
    return curve.mixed_ms(
        seqs,
        kv_bytes,
        prefill_tokens + extra,
        prefill_pairs + extra * (context + (k + 1) / 2),
        sampled=seqs * (1 + k),
    )


def curve_cost(curve: StepTime, context: int) -> StepCost:
    """The engine's step model (planner.core.step), every term of it: B sequences at `context`
    tokens each score `tokens` positions in one step. The linear layers (routed experts
    included: more tokens touch more of them), the collectives and the lm_head see B x tokens;
    attention reads each sequence's KV once, and the drafted positions attend over the
    context as a chunk of cached prefill does."""
    kv = curve.kv_bytes(context)

    def cost(batch: NDArray[np.float64], tokens: int) -> NDArray[np.float64]:
        k = max(0, tokens - 1)
        return np.fromiter(
            (verify_ms(curve, b, b * kv, context, k) for b in (max(1, int(x)) for x in batch)),
            dtype=np.float64,
            count=batch.size,
        )

    return cost


class LoadPoint(BaseModel):
    """Speculation at one concurrency: v per the step model, the best k and its speedup."""

    model_config = ConfigDict(extra="forbid")

    batch: int
    draft_cost: float
    verify_cost_best_k: float
    best_k: int
    speedup: float


def best_speedup_by_batch(
    target: StepCost,
    alpha: float,
    ks: list[int],
    batches: NDArray[np.int64],
    draft_cost: float,
    draft: StepCost | None = None,
) -> tuple[NDArray[np.float64], NDArray[np.int64], NDArray[np.float64], NDArray[np.float64]]:
    """(best speedup, best k, c, v at best k) for every batch size, vectorised over batches:
    v is each scored position's marginal cost relative to a plain step, c the draft's step
    relative to it (or `draft_cost` without a draft model)."""
    b = batches.astype(np.float64)
    plain = target(b, 1)
    c = draft(b, 1) / plain if draft is not None else np.full_like(b, draft_cost)
    speeds = []
    vs = []
    for k in ks:
        v = (target(b, 1 + k) - plain) / (k * plain)
        speeds.append(expected_tokens(alpha, k) / (1.0 + k * c + k * v))
        vs.append(v)
    s = np.vstack(speeds)
    idx = np.argmax(s, axis=0)
    cols = np.arange(b.size)
    return s[idx, cols], np.asarray(ks)[idx], c, np.vstack(vs)[idx, cols]


def disable_above(
    target: StepCost,
    alpha: float,
    ks: list[int],
    max_batch: int,
    draft_cost: float,
    draft: StepCost | None = None,
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
    target: StepCost,
    alpha: float,
    ks: list[int],
    batches: list[int],
    draft_cost: float,
    draft: StepCost | None = None,
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
