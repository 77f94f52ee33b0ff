"""Speculative decoding (docs/method.md §4): expected tokens, cost, speedup, break-even.

E(alpha, k) = (1 - alpha^(k+1)) / (1 - alpha)      (k + 1 when alpha = 1)
C(k)        = 1 + k*c + k*v
S           = E / C
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict

from planner.errors import InputError

# Bisection tolerance for break-even alpha (reported to three decimals).
BREAK_EVEN_TOLERANCE = 1e-7
# The v grid of the sensitivity table (issue 7): free verification up to a full extra forward.
V_SENSITIVITY_GRID = (0.0, 0.1, 0.25, 0.5, 1.0)


def expected_tokens(alpha: float, k: int) -> float:
    """Tokens accepted per verification step, including the bonus token."""
    if alpha >= 1.0:
        return float(k + 1)
    return (1.0 - alpha ** (k + 1)) / (1.0 - alpha)


def step_cost(k: int, draft_cost: float, verify_cost: float) -> float:
    """Cost of one speculative step relative to one plain decode step."""
    return 1.0 + k * draft_cost + k * verify_cost


def speedup(alpha: float, k: int, draft_cost: float, verify_cost: float) -> float:
    """Tokens per unit time relative to plain decoding."""
    return expected_tokens(alpha, k) / step_cost(k, draft_cost, verify_cost)


def break_even_alpha(k: int, draft_cost: float, verify_cost: float) -> float | None:
    """Smallest alpha with S >= 1 for this k; None if even alpha = 1 does not pay."""
    cost = step_cost(k, draft_cost, verify_cost)
    if k + 1 < cost:
        return None
    lo, hi = 0.0, 1.0
    if expected_tokens(lo, k) >= cost:
        return 0.0
    while hi - lo > BREAK_EVEN_TOLERANCE:
        mid = (lo + hi) / 2
        if expected_tokens(mid, k) >= cost:
            hi = mid
        else:
            lo = mid
    return hi


class SpecRow(BaseModel):
    """E, C and S for one (alpha, k)."""

    model_config = ConfigDict(extra="forbid")

    alpha: float
    k: int
    expected_tokens: float
    cost: float
    speedup: float


class SpecBest(BaseModel):
    """The best k for one alpha and its speedup."""

    model_config = ConfigDict(extra="forbid")

    k: int
    speedup: float


def validate(alphas: list[float], ks: list[int], draft_cost: float, verify_cost: float) -> None:
    """Reject inputs outside the model's domain with the flag named."""
    if not alphas:
        raise InputError("--alpha", "give at least one acceptance rate in [0, 1]")
    for a in alphas:
        if not 0.0 <= a <= 1.0:
            raise InputError("--alpha", f"{a} is outside [0, 1]")
    if not ks:
        raise InputError("--k", "the range is empty")
    if min(ks) < 1:
        raise InputError("--k", f"{min(ks)} < 1: draft at least one token")
    if draft_cost < 0:
        raise InputError("--draft-cost", f"{draft_cost} < 0")
    if verify_cost < 0:
        raise InputError("--verify-cost", f"{verify_cost} < 0")


def table(
    alphas: list[float], ks: list[int], draft_cost: float, verify_cost: float
) -> list[SpecRow]:
    """E, C and S for every (alpha, k)."""
    validate(alphas, ks, draft_cost, verify_cost)
    return [
        SpecRow(
            alpha=a,
            k=k,
            expected_tokens=expected_tokens(a, k),
            cost=step_cost(k, draft_cost, verify_cost),
            speedup=speedup(a, k, draft_cost, verify_cost),
        )
        for a in alphas
        for k in ks
    ]


def best(alpha: float, ks: list[int], draft_cost: float, verify_cost: float) -> SpecBest:
    """The k with the highest speedup (smallest k on ties)."""
    k = max(ks, key=lambda k: (speedup(alpha, k, draft_cost, verify_cost), -k))
    return SpecBest(k=k, speedup=speedup(alpha, k, draft_cost, verify_cost))
