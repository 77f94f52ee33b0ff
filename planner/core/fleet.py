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
from functools import lru_cache
from typing import Any

import numpy as np
from numpy.typing import NDArray
from pydantic import BaseModel, ConfigDict, Field

from planner.sim.config import SimConfig
from planner.sim.cost import CostModel, CurveCost
from planner.sim.engine import RunState, execute
from planner.sim.workload import Trace, Workload, generate

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
# Bursty arrivals need a longer horizon: the count of gamma arrivals in a window has CV^2 times
# the variance of Poisson's, so a trial simulates CV^2 times the requests (at most
# MAX_BURST_FACTOR times), over independent traces (seeds) so one lucky or unlucky arrival
# pattern does not decide the rate: two for Poisson arrivals, three for bursty ones, whose
# patterns differ more from seed to seed.
MAX_BURST_FACTOR = 4.0
TRIAL_SEEDS = 2
TRIAL_SEEDS_BURSTY = 3
# The promise is judged at the percentile's one-sided 95% upper confidence bound: the order
# statistic n p + z sqrt(n p (1 - p)) of the n simulated requests (the binomial bound on a
# sample quantile), so a short trial cannot pass on sampling luck.
CONFIDENCE_Z = 1.645
# The highest utilisation a rate search tries: a queue's mean wait grows as rho / (1 - rho)
# (Pollaczek-Khinchine), so near 1 a finite trial cannot tell a stable replica from an
# overloaded one whose queue has not shown yet; 0.95 keeps the wait within ~19x a step's spread.
STABLE_UTILISATION = 0.95
# The lowest utilisation a rate search tries: a layout that keeps the promise only below 5% of
# what a replica can serve (its longest prompts' prefill, or one step, nearly fills a budget on
# an idle replica) would be a fleet of GPUs idle 95% of the time, the plan of a wider layout or
# a looser promise; it is not ranked, and its reason says what missed.
MIN_UTILISATION = 0.05


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
    slow_tpot_share: float = Field(description="share of requests over the TPOT budget")
    peak_running: int = Field(default=0, ge=0, description="most sequences running at once")
    requests: int = Field(default=0, ge=0, description="requests simulated per seed")


def _rank(n: int, percentile: float) -> int:
    """The order statistic (1-based) bounding a sample's `percentile` from above at 95%."""
    p = percentile / 100.0
    return min(n, math.ceil(n * p + CONFIDENCE_Z * math.sqrt(n * p * (1.0 - p))))


def upper_quantile(values: NDArray[np.float64], percentile: float) -> float:
    """The one-sided 95% upper confidence bound of a sample's `percentile` (its order statistic
    at n p + z sqrt(n p (1 - p)), the last one when the sample is too small to bound it)."""
    if values.size == 0:
        return 0.0
    k = _rank(values.size, percentile) - 1
    return float(np.partition(values, k)[k])


@lru_cache(maxsize=64)
def _mean_output(workload: Workload) -> float:
    """Mean output tokens of a workload's length distribution (a fixed-seed sample)."""
    sample = generate(workload.model_copy(update={"requests": MIN_TRIAL_REQUESTS, "seed": 0}))
    return float(sample.output_tokens.mean())


def trial(
    workload: Workload,
    rate: float,
    cost: CostModel | CurveCost | None,
    cfg: SimConfig,
    promise: Promise,
    runner: Callable[[Trace], RunState] | None = None,
    min_requests: int = 0,
) -> Trial:
    """Simulate one replica at `rate` and judge the promise: TTFT and TPOT at the percentile's
    upper confidence bound, and the share of requests meeting both, pooled over seeds, over a
    horizon that grows with the burstiness of the arrivals, ramp and drain excluded. A trial
    stops at the seed after which the requests already over a budget fail it whatever the rest
    do. `runner` simulates a trace another way (a disaggregated unit); `cfg.max_batch` then
    only sizes the trial. `min_requests`: simulate at least these per seed (a lower rate
    judged on as many requests as a higher one was: its bound no looser)."""
    burst = min(MAX_BURST_FACTOR, max(1.0, workload.cv**2)) if workload.arrival == "gamma" else 1.0
    # The steady state's batch: the requests in flight, at most the running cap, and at most
    # what Little's law allows a replica keeping the promise (rate x (TTFT + mean output x
    # TPOT)); a larger batch means the promise already failed, which a shorter trial shows.
    mean_output = _mean_output(workload)
    in_flight = rate * (promise.ttft_ms + mean_output * promise.tpot_ms) / 1000.0
    batch = max(1, min(cfg.max_batch, math.ceil(in_flight)))
    # each of the seeds' traces holds TRIAL_BATCHES such batches (its middle is the steady
    # state) and its share of the horizon
    horizon = min(max(rate * TRIAL_SECONDS, MIN_TRIAL_REQUESTS), MAX_TRIAL_REQUESTS) * burst
    seeds = TRIAL_SEEDS_BURSTY if burst > 1.0 else TRIAL_SEEDS
    requests = max(1, math.ceil(horizon / seeds), TRIAL_BATCHES * batch, min_requests)
    # the ramp from an empty replica and the drain after the last arrival are not its steady
    # state: a batch's worth of requests at each end (at most a quarter each) is not judged
    edge = min(batch, requests // 4)
    total = (requests - 2 * edge) * seeds
    allowed_over = total - _rank(total, promise.percentile)  # past the bound, per budget
    allowed_bad = math.floor((1.0 - promise.goodput) * total + 1e-9)
    ttfts, tpots, multis = [], [], []
    peak_running = 0
    for k in range(seeds):
        trace = generate(
            workload.model_copy(
                update={"rate_per_s": rate, "requests": requests, "seed": workload.seed + k}
            )
        )
        if runner is not None:
            run = runner(trace)
        else:
            assert cost is not None
            run = execute(trace, cost, cfg)
        peak_running = max(peak_running, run.peak_running)
        kept = slice(edge, requests - edge)
        first, finish, out = run.first_ms[kept], run.finish_ms[kept], run.output[kept]
        ttfts.append(first - run.arrival_ms[kept])
        multi = out > 1
        tpot = np.zeros(out.size)  # one-token outputs have no TPOT: they meet it
        tpot[multi] = (finish[multi] - first[multi]) / (out[multi] - 1)
        tpots.append(tpot)
        multis.append(multi)
        late = sum(int((t > promise.ttft_ms).sum()) for t in ttfts)
        slow = sum(int((t > promise.tpot_ms).sum()) for t in tpots)
        bad = sum(
            int(((a > promise.ttft_ms) | (b > promise.tpot_ms)).sum())
            for a, b in zip(ttfts, tpots, strict=True)
        )
        if late > allowed_over or slow > allowed_over or bad > allowed_bad:
            break
    ttft_all, tpot_all = np.concatenate(ttfts), np.concatenate(tpots)
    ttft = upper_quantile(ttft_all, promise.percentile)
    tpot_at = upper_quantile(tpot_all[np.concatenate(multis)], promise.percentile)
    goodput = 1.0 - bad / ttft_all.size
    ok = (
        ttft_all.size == total
        and ttft <= promise.ttft_ms
        and tpot_at <= promise.tpot_ms
        and goodput >= promise.goodput
    )
    return Trial(
        rate_per_s=rate,
        ok=ok,
        ttft_ms=ttft,
        tpot_ms=tpot_at,
        goodput=goodput,
        slow_tpot_share=slow / ttft_all.size,
        peak_running=peak_running,
        requests=requests,
    )


def missed_by(t: Trial, promise: Promise) -> str:
    """What a failed trial missed, in words: the TTFT or TPOT bound, or the share of requests
    meeting both."""
    pct = f"p{promise.percentile:g}"
    if t.ttft_ms > promise.ttft_ms:
        return f"{pct} TTFT is {t.ttft_ms:,.0f} ms (promised {promise.ttft_ms:g})"
    if t.tpot_ms > promise.tpot_ms:
        return f"{pct} TPOT is {t.tpot_ms:.1f} ms (promised {promise.tpot_ms:g})"
    return (
        f"{1 - t.goodput:.1%} of requests miss a budget "
        f"(the promise allows {1 - promise.goodput:.1%})"
    )


def sustainable_rate(
    judge: Callable[[float], Trial],
    first_guess: float,
    floor: float = 1e-3,
    ceiling: float = math.inf,
) -> Trial | None:
    """The highest rate whose trial holds the promise (None: not even `floor` req/s). A rate
    above `ceiling` (the most the replica can serve, at a stable utilisation) fails
    unsimulated: a finite trial of an overloaded replica can drain before its queue shows."""

    def bounded(rate: float) -> Trial:
        if rate <= ceiling:
            return judge(rate)
        inf = math.inf
        return Trial(
            rate_per_s=rate, ok=False, ttft_ms=inf, tpot_ms=0.0, goodput=0.0,
            slow_tpot_share=0.0,
        )  # fmt: skip

    low: Trial | None = None
    high: float | None = None
    rate = max(first_guess, floor)
    for _ in range(MAX_SEARCH_STEPS):
        t = bounded(rate)
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
        t = bounded(mid)
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


def costed(
    *,
    best: Trial,
    at_load: Trial,
    replicas: int,
    gpus_per_replica: int,
    price_per_gpu_hour: float | None,
    rate: float,
    mean_prompt: float,
    mean_output: float,
) -> dict[str, Any]:
    """A searched candidate's figures: replicas and GPUs, the promise at the planned load,
    tokens per GPU at its sustainable rate (in steady state output leaves as fast as it is
    asked for) and per user, and cost at the peak rate."""
    gpus = replicas * gpus_per_replica
    price = price_per_gpu_hour

    def per_million(tokens_per_s: float) -> float | None:
        return None if price is None else cost_per_million(price, gpus, tokens_per_s)

    return {
        "fits": True,
        "reason": None,
        "replicas": replicas,
        "gpus": gpus,
        "sustainable_rate_per_replica": best.rate_per_s,
        "ttft_ms_at_load": at_load.ttft_ms,
        "tpot_ms_at_load": at_load.tpot_ms,
        "goodput_at_load": at_load.goodput,
        "tokens_per_s_per_gpu": best.rate_per_s * mean_output / gpus_per_replica,
        "tokens_per_s_per_user": 1000.0 / max(at_load.tpot_ms, 1e-9),
        "dollars_per_hour": None if price is None else price * gpus,
        "dollars_per_m_output_tokens": per_million(rate * mean_output),
        "dollars_per_m_total_tokens": per_million(rate * (mean_output + mean_prompt)),
    }
