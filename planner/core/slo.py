"""Batch caps from latency budgets (docs/method.md §3): t_step(B) = a + b x B.

A step-time model has a fixed cost `a` (one pass over the weights plus overhead) and a slope
`b` per running sequence (its KV read). A derived model may also carry a compute slope: above
the knee batch, where 2 x active params x B FLOPs outlast the memory pass, the step is
compute-bound and the slope switches. The cap is a necessary condition, not the answer: it
ignores queueing, prefill interference, p95 vs mean, and context growth.
"""

from __future__ import annotations

import math

from pydantic import BaseModel, ConfigDict, Field

from planner.core.reference import (
    REFERENCE_PREFILL_MS_PER_TOKEN,
)
from planner.core.search import largest_passing
from planner.core.step import StepTime
from planner.errors import InputError


class StepModel(BaseModel):
    """t(B) = a + max(b x B, compute x B - (memory part of a)) with its provenance."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    a_ms: float = Field(ge=0)
    b_ms: float = Field(ge=0)
    prefill_ms_per_token: float = Field(default=REFERENCE_PREFILL_MS_PER_TOKEN, ge=0)
    source: str
    memory_a_ms: float | None = Field(default=None, description="derived: weights pass only")
    compute_ms_per_seq: float | None = Field(default=None, description="derived: FLOPs slope")
    arithmetic: tuple[str, ...] = ()
    r2: float | None = None
    curve: StepTime | None = Field(
        default=None, description="derived: the full step-time model; a and b linearise it"
    )
    context_tokens: int | None = Field(default=None, description="the context t(B) is read at")

    @property
    def knee_batch(self) -> float | None:
        """Batch above which a step is compute-bound (None: never, or not modelled)."""
        c, m = self.compute_ms_per_seq, self.memory_a_ms
        if c is None or m is None or c <= self.b_ms:
            return None
        return m / (c - self.b_ms)

    def step_ms(self, batch: float) -> float:
        """t(B) in ms: the derived model's own curve, else a + b x B (compute slope above the
        knee)."""
        if self.curve is not None and self.context_tokens is not None:
            return self.curve.step_ms(max(1, round(batch)), self.context_tokens)
        memory = self.a_ms + self.b_ms * batch
        if self.compute_ms_per_seq is None or self.memory_a_ms is None:
            return memory
        fixed = self.a_ms - self.memory_a_ms  # overhead
        return max(memory, fixed + self.compute_ms_per_seq * batch)


def check_budget(flag: str, budget_ms: float) -> None:
    """A latency budget is a positive, finite number of ms no longer than MAX_BUDGET_MS."""
    if not 0 < budget_ms <= MAX_BUDGET_MS:
        raise InputError(flag, f"must be in (0, {MAX_BUDGET_MS:,.0f}] ms (got {budget_ms:g})")


def batch_cap(model: StepModel, tpot_ms: float) -> int:
    """Largest B with t(B) <= TPOT; raises when even one sequence misses it."""
    check_budget("--tpot", tpot_ms)
    if tpot_ms <= model.a_ms or model.step_ms(1) > tpot_ms:
        raise InputError(
            "--tpot",
            f"no batch size meets TPOT {tpot_ms:g} ms: the fixed step cost is {model.a_ms:.2f} ms"
            f" and one sequence's step {model.step_ms(1):.4g} ms",
        )
    if model.curve is not None:
        return _curve_cap(model, tpot_ms)
    if model.b_ms == 0 and model.compute_ms_per_seq is None:
        raise InputError("--b-ms", "b = 0 gives no cap: every batch size meets the budget")
    cap = math.floor((tpot_ms - model.a_ms) / model.b_ms + 1e-9) if model.b_ms else 10**9
    if model.compute_ms_per_seq is not None and model.memory_a_ms is not None:
        fixed = model.a_ms - model.memory_a_ms
        cap = min(cap, math.floor((tpot_ms - fixed) / model.compute_ms_per_seq + 1e-9))
    return max(cap, 1)


def _curve_cap(model: StepModel, tpot_ms: float) -> int:
    """Largest B whose step stays within TPOT on a (monotone) step-time curve."""
    low, high = 1, 1
    while high < MAX_CURVE_BATCH and model.step_ms(high * 2) <= tpot_ms:
        high *= 2
    high = min(high * 2, MAX_CURVE_BATCH)
    return largest_passing(low, high, lambda b: model.step_ms(b) <= tpot_ms)


# The largest batch a curve is searched to: beyond any engine's max_num_seqs.
MAX_CURVE_BATCH = 2**20
# The longest latency budget accepted: an hour per token or to first token is no serving SLO.
MAX_BUDGET_MS = 3_600_000.0


def max_prefill_chunk(model: StepModel, budget_ms: float) -> int:
    """Largest prefill chunk whose step stays within the budget: (budget - a) / prefill cost."""
    if model.prefill_ms_per_token == 0:
        raise InputError("--prefill-ms-per-token", "0 gives no chunk bound")
    return max(0, math.floor((budget_ms - model.a_ms) / model.prefill_ms_per_token + 1e-9))


def prefill_room(model: StepModel, budget_ms: float, batch: int) -> int:
    """Prompt tokens a step of `batch` decodes still carries inside the budget."""
    if not model.prefill_ms_per_token:
        return 0
    spare = (budget_ms - model.step_ms(batch)) / model.prefill_ms_per_token
    return max(0, math.floor(spare + 1e-9))


def step_tokens(model: StepModel, budget_ms: float, batch: int) -> int:
    """vLLM's token budget for a step of `batch` decodes inside the budget: every running
    sequence's decode token plus the prompt tokens that still fit (at most the largest chunk
    that fits alone; the largest chunk where none do, a step that then runs past the budget)."""
    chunk = max_prefill_chunk(model, budget_ms)
    room = prefill_room(model, budget_ms, batch) if model.prefill_ms_per_token else chunk
    return batch + (min(chunk, room) if room else chunk)


def mean_step_ms(model: StepModel, batch: int, prompt_per_output: float) -> float:
    """The mean step of `batch` running sequences in steady state, ms: their decodes, plus the
    prompts their requests bring. Each request prefills P prompt tokens for the O it decodes,
    so B sequences bring B x P / O prompt tokens per step on average (in the step's own
    chunk under vLLM, in prefill steps between the decodes under SGLang: the same time either
    way), and the mean TPOT is this step's length."""
    return model.step_ms(batch) + batch * prompt_per_output * model.prefill_ms_per_token


def balanced_cap(model: StepModel, budget_ms: float, cap: int, prompt_per_output: float) -> int:
    """The largest batch (<= cap) whose mean step, its prompts' prefill included, stays inside
    the budget (`mean_step_ms`); 1 where even one sequence's does not. Monotone in the budget:
    a looser TPOT never runs fewer sequences."""
    if not model.prefill_ms_per_token or prompt_per_output <= 0:
        return cap

    def inside(batch: int) -> bool:
        return mean_step_ms(model, batch, prompt_per_output) <= budget_ms

    if inside(cap):
        return cap
    if not inside(1):
        return 1
    return largest_passing(1, cap, inside)


def prefill_ms(model: StepModel, prompt_tokens: int) -> float:
    """One step that prefills a whole prompt (the stall every decoding sequence feels)."""
    return model.a_ms + model.prefill_ms_per_token * prompt_tokens


def fit(batches: list[float], step_ms: list[float], prefill_ms_per_token: float) -> StepModel:
    """Least-squares a + b x B from measurements; needs two distinct batch sizes."""
    import numpy as np  # only the fit needs it; capacity stays numpy-free

    if len(set(batches)) < 2:
        raise InputError("--fit", "needs measurements at 2 or more distinct batch sizes")
    x = np.asarray(batches, dtype=np.float64)
    y = np.asarray(step_ms, dtype=np.float64)
    design = np.vstack([np.ones_like(x), x]).T
    (a, b), *_ = np.linalg.lstsq(design, y, rcond=None)
    predicted = a + b * x
    ss_res = float(np.sum((y - predicted) ** 2))
    ss_tot = float(np.sum((y - y.mean()) ** 2))
    r2 = 1.0 - ss_res / ss_tot if ss_tot else 1.0
    if b < 0:
        raise InputError("--fit", f"the fitted slope is negative ({b:.4f} ms per sequence)")
    return StepModel(
        a_ms=max(0.0, float(a)),
        b_ms=float(b),
        prefill_ms_per_token=prefill_ms_per_token,
        source=f"fitted: {len(x)} points, R^2 {r2:.4f}",
        r2=r2,
    )
