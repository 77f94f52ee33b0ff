"""What to deploy for a traffic and a latency promise: candidates, the rate one replica sustains,
replicas, GPUs and cost (docs/fleet.md).

For one candidate (GPU, TP, weight precision, engine) the serve plan gives the replica's
max_num_seqs, batched-token budget and KV pool; the step-time model gives its step costs; the
simulator, run on the workload at a trial rate, says whether the promise holds (TTFT and TPOT at
the percentile, and the share of requests meeting both). A bracketing search finds the highest
rate that holds; replicas = ceil(peak rate / (that rate x headroom)).
"""

from __future__ import annotations

import math
from collections.abc import Callable

from pydantic import BaseModel, ConfigDict, Field

from planner.sim.engine import CostModel, PolicyMetrics, SimConfig, simulate
from planner.sim.workload import Workload, generate

# Rate search: bracket by doubling / halving from a first guess, then bisect to this relative
# precision (the sustainable rate is reported to ~3%).
SEARCH_PRECISION = 0.05
# Bound on each loop (bracketing, bisection): 2^24 spans any rate from a request per day to the
# catalog's largest; a search that has not converged by then is a bug, not a slow case.
MAX_SEARCH_STEPS = 24
# Requests simulated per trial: TRIAL_SECONDS of traffic, and at least TRIAL_BATCHES full batches
# so a replica reaches its steady state (a short burst fits in one batch and hides overload);
# within [MIN, MAX] so a p95 means something and a candidate stays around a second.
TRIAL_SECONDS = 15.0
TRIAL_BATCHES = 4
MIN_TRIAL_REQUESTS = 400
MAX_TRIAL_REQUESTS = 3000


class Promise(BaseModel):
    """What every request is promised."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    tpot_ms: float = Field(gt=0)
    ttft_ms: float = Field(gt=0)
    percentile: float = Field(default=95.0, gt=0, lt=100)
    goodput: float = Field(default=0.99, gt=0, le=1, description="share meeting both")


class Trial(BaseModel):
    """One simulated rate."""

    model_config = ConfigDict(extra="forbid")

    rate_per_s: float
    ok: bool
    ttft_ms: float
    tpot_ms: float
    goodput: float
    tok_s: float


def _percentile_value(p: PolicyMetrics, which: str, percentile: float) -> float:
    """TTFT / TPOT at the promise's percentile (p50 / p95 / p99 reported; nearest above)."""
    dist = p.ttft_ms if which == "ttft" else p.tpot_ms
    if percentile <= 50:
        return dist.p50
    if percentile <= 95:
        return dist.p95
    return dist.p99


def trial(
    workload: Workload, rate: float, cost: CostModel, cfg: SimConfig, promise: Promise
) -> Trial:
    """Simulate one replica at `rate` and judge the promise."""
    wanted = max(rate * TRIAL_SECONDS, TRIAL_BATCHES * cfg.max_batch, MIN_TRIAL_REQUESTS)
    requests = int(min(wanted, MAX_TRIAL_REQUESTS))
    trace = generate(workload.model_copy(update={"rate_per_s": rate, "requests": requests}))
    m = simulate(trace, cost, cfg)
    ttft = _percentile_value(m, "ttft", promise.percentile)
    tpot = _percentile_value(m, "tpot", promise.percentile)
    ok = (
        ttft <= promise.ttft_ms
        and tpot <= promise.tpot_ms
        and m.goodput_pct / 100.0 >= promise.goodput
    )
    return Trial(
        rate_per_s=rate,
        ok=ok,
        ttft_ms=ttft,
        tpot_ms=tpot,
        goodput=m.goodput_pct / 100.0,
        tok_s=m.tok_s,
    )


def sustainable_rate(
    judge: Callable[[float], Trial], first_guess: float, floor: float = 1e-3
) -> Trial | None:
    """The highest rate whose trial holds the promise (None: not even `floor` req/s)."""
    low: Trial | None = None
    high: float | None = None
    rate = max(first_guess, floor)
    for _ in range(MAX_SEARCH_STEPS):
        t = judge(rate)
        if t.ok:
            low = t
            if high is not None:
                break
            rate *= 2
        else:
            high = rate
            if low is not None:
                break
            rate /= 2
            if rate < floor:
                return None
    if low is None or high is None:
        return low
    for _ in range(MAX_SEARCH_STEPS):
        if (high - low.rate_per_s) / high <= SEARCH_PRECISION:
            break
        mid = (low.rate_per_s + high) / 2
        t = judge(mid)
        if t.ok:
            low = t
        else:
            high = mid
    return low


def replicas_for(peak_rate: float, sustainable: float, headroom: float) -> int:
    """Replicas so that each runs at most `headroom` of what it sustains at the peak."""
    return max(1, math.ceil(peak_rate / (sustainable * headroom) - 1e-9))


def cost_per_million(price_per_gpu_hour: float, gpus: int, tokens_per_s: float) -> float:
    """$ per million tokens: price x GPUs per hour / millions of tokens per hour."""
    return price_per_gpu_hour * gpus / (tokens_per_s * 3600 / 1e6)
