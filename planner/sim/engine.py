"""The step loop: static, continuous and chunked-prefill scheduling over one trace.

Each step admits waiting requests, runs one decode token per running sequence plus any prefill
work, and retires finished sequences; it costs `overhead + a + b*B + prefill_ms_per_token*P`.
Where consecutive steps are identical (only decoding, nothing arriving that could be admitted,
no KV boundary, no speculation) the loop jumps to the next event in one move, so the Python
work is per event, not per token; static batches are solved in closed form.
"""

from __future__ import annotations

import math
from collections import deque
from typing import Literal

import numpy as np
from numpy.typing import NDArray
from pydantic import BaseModel, ConfigDict, Field

from planner.errors import InputError
from planner.sim.workload import Trace

# REFERENCE section 3 cost model ("reference"): a = 5.00 ms, b = 0.086 ms per sequence,
# 47 us per prefill token, 0.3 ms launch overhead per step.
REFERENCE_A_MS = 5.0
REFERENCE_B_MS = 0.086
REFERENCE_PREFILL_MS_PER_TOKEN = 0.047
REFERENCE_OVERHEAD_MS = 0.3
# Swapping one 16-token block of a 70B-class model (5 MiB) over PCIe Gen5 x16 at ~50 GB/s
# effective takes ~0.1 ms each way: a named assumption for --preemption swap.
DEFAULT_SWAP_MS_PER_BLOCK = 0.1


class CostModel(BaseModel):
    """Step cost: overhead + a + b x decode slots + prefill cost x prefill tokens."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    a_ms: float = Field(default=REFERENCE_A_MS, ge=0)
    b_ms: float = Field(default=REFERENCE_B_MS, ge=0)
    prefill_ms_per_token: float = Field(default=REFERENCE_PREFILL_MS_PER_TOKEN, ge=0)
    overhead_ms: float = Field(default=REFERENCE_OVERHEAD_MS, ge=0)
    source: str = "reference"

    def step_ms(self, decode_slots: int, prefill_tokens: int, spec_factor: float = 1.0) -> float:
        """Cost of one step with `decode_slots` sequences and `prefill_tokens` of prompt."""
        return (
            self.overhead_ms
            + (self.a_ms + self.b_ms * decode_slots) * spec_factor
            + self.prefill_ms_per_token * prefill_tokens
        )


class SimConfig(BaseModel):
    """Scheduler and measurement settings for one simulated policy."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    policy: Literal["static", "continuous", "chunked"]
    max_batch: int = Field(default=32, gt=0)
    step_token_budget: int = Field(default=512, gt=0)
    chunk_tokens: int = Field(default=512, gt=0)
    kv_blocks: int | None = Field(default=None, gt=0)
    block_tokens: int = Field(default=16, gt=0)
    preemption: Literal["recompute", "swap"] = "recompute"
    swap_ms_per_block: float = Field(default=DEFAULT_SWAP_MS_PER_BLOCK, ge=0)
    spec_alpha: float | None = Field(default=None, ge=0, le=1)
    spec_k: int = Field(default=4, ge=1)
    spec_draft_cost: float = Field(default=0.05, ge=0)
    spec_verify_cost: float = Field(default=0.0, ge=0)
    slo_ttft_ms: float = Field(default=1000.0, gt=0)
    slo_tpot_ms: float = Field(default=50.0, gt=0)
    seed: int = 0


class Percentiles(BaseModel):
    """Mean and percentiles of a latency, ms."""

    model_config = ConfigDict(extra="forbid")

    mean: float
    p50: float
    p95: float
    p99: float


class TailLatency(BaseModel):
    """Tail of the inter-token latency, ms."""

    model_config = ConfigDict(extra="forbid")

    p99: float
    max: float


class PolicyMetrics(BaseModel):
    """What users would feel under one policy (docs/simulate.md)."""

    model_config = ConfigDict(extra="forbid")

    policy: str
    max_batch: int
    tok_s: float
    req_s: float
    ttft_ms: Percentiles
    tpot_ms: Percentiles
    itl_ms: TailLatency
    occupancy_mean: float
    padded_slot_waste_pct: float
    gpu_idle_pct: float
    launch_overhead_pct: float
    preemptions: int
    goodput_req_s: float
    goodput_pct: float
    steps: int
    makespan_s: float
    output_tokens: int
    requests: int


class RunState:
    """Mutable per-request state and running totals of one simulation."""

    def __init__(self, trace: Trace) -> None:
        n = trace.size
        self.arrival_ms = trace.arrival_s * 1000.0
        self.output = trace.output_tokens
        self.target = (trace.prompt_tokens - trace.cached_prefix_tokens).astype(np.int64)
        self.target = np.maximum(self.target, 1)  # at least the last token is computed
        self.prefilled = np.zeros(n, dtype=np.int64)
        self.generated = np.zeros(n, dtype=np.int64)
        self.post = np.zeros(n, dtype=np.int64)  # tokens held after the last (re)prefill
        self.swapped = np.zeros(n, dtype=bool)
        self.first_ms = np.full(n, np.nan)
        self.finish_ms = np.full(n, np.nan)
        self.itl_dt: list[float] = []
        self.itl_count: list[int] = []
        self.busy_ms = 0.0
        self.idle_ms = 0.0
        self.overhead_ms = 0.0
        self.slot_ms = 0.0  # sum of running sequences x step time
        self.steps = 0
        self.preemptions = 0
        self.occupied_slots = 0
        self.useful_slots = 0
        self.peak_blocks = 0  # most KV blocks held at the end of any step (audit)


def _blocks(tokens: NDArray[np.int64] | int, block: int) -> NDArray[np.int64] | int:
    return -(-tokens // block)


def check(trace: Trace, cfg: SimConfig) -> None:
    """Reject settings the trace cannot run under, naming the flag."""
    if cfg.policy == "chunked":
        if cfg.chunk_tokens > cfg.step_token_budget:
            raise InputError(
                "--chunk-tokens",
                f"{cfg.chunk_tokens} is larger than --step-token-budget {cfg.step_token_budget}",
            )
        if cfg.max_batch > cfg.step_token_budget:
            raise InputError(
                "--max-batch",
                f"{cfg.max_batch} decode tokens do not fit --step-token-budget "
                f"{cfg.step_token_budget} (decode runs first)",
            )
    if cfg.kv_blocks is not None:
        need = int(np.max(_blocks(trace.prompt_tokens + trace.output_tokens, cfg.block_tokens)))
        shared = int(_blocks(int(trace.cached_prefix_tokens.max(initial=0)), cfg.block_tokens))
        if need + shared > cfg.kv_blocks:
            raise InputError(
                "--kv-blocks",
                f"{cfg.kv_blocks} blocks cannot hold one request of the trace ({need} blocks"
                + (f" + {shared} for the shared prefix)" if shared else ")"),
            )


def execute(trace: Trace, cost: CostModel, cfg: SimConfig) -> RunState:
    """Run one policy over the trace; the raw per-request state (for metrics and audits)."""
    check(trace, cfg)
    run = RunState(trace)
    if cfg.policy == "static":
        _static(run, cost, cfg)
    else:
        _iteration_level(run, cost, cfg, trace)
    return run


def simulate(trace: Trace, cost: CostModel, cfg: SimConfig) -> PolicyMetrics:
    """Run one policy over the trace and measure it."""
    return _metrics(execute(trace, cost, cfg), cfg, trace)


def _static(run: RunState, cost: CostModel, cfg: SimConfig) -> None:
    """Batches form from whatever waits when the previous batch retires and run to its longest."""
    n = run.arrival_ms.size
    t = 0.0
    nxt = 0
    waiting: deque[int] = deque()
    while nxt < n or waiting:
        while nxt < n and run.arrival_ms[nxt] <= t:
            waiting.append(nxt)
            nxt += 1
        if not waiting:
            run.idle_ms += run.arrival_ms[nxt] - t
            t = float(run.arrival_ms[nxt])
            continue
        batch: list[int] = []
        used = 0
        while waiting and len(batch) < cfg.max_batch:
            i = waiting[0]
            if cfg.kv_blocks is not None:
                need = int(_blocks(int(run.target[i] + run.output[i]), cfg.block_tokens))
                if used + need > cfg.kv_blocks:
                    break
                used += need
                run.peak_blocks = max(run.peak_blocks, used)
            batch.append(waiting.popleft())
        ids = np.asarray(batch)
        size = ids.size
        # Prompts prefill ragged in one step; the padding is in the decode slots (below).
        prefill = cost.step_ms(0, int(run.target[ids].sum()))
        t += prefill
        run.first_ms[ids] = t
        decode = cost.step_ms(size, 0)
        steps = int(run.output[ids].max()) - 1
        run.finish_ms[ids] = t + (run.output[ids] - 1) * decode
        t += steps * decode
        run.generated[ids] = run.output[ids]
        run.itl_dt.append(decode)
        run.itl_count.append(int((run.output[ids] - 1).sum()))
        run.busy_ms += prefill + steps * decode
        run.overhead_ms += cost.overhead_ms * (steps + 1)
        run.slot_ms += size * (prefill + steps * decode)
        run.steps += steps + 1
        run.occupied_slots += size * (steps + 1)
        run.useful_slots += int(run.output[ids].sum())


def _iteration_level(run: RunState, cost: CostModel, cfg: SimConfig, trace: Trace) -> None:
    """Continuous batching (whole prompts per step) and chunked prefill (token budget)."""
    n = run.arrival_ms.size
    block = cfg.block_tokens
    pool = cfg.kv_blocks
    if pool is not None and trace.cached_prefix_tokens.any():
        pool -= int(_blocks(int(trace.cached_prefix_tokens.max()), block))  # the shared prefix
    rng = np.random.default_rng(cfg.seed)
    spec_factor = 1.0
    if cfg.spec_alpha is not None:
        spec_factor = 1.0 + cfg.spec_k * (cfg.spec_draft_cost + cfg.spec_verify_cost)
    t = 0.0
    nxt = 0
    waiting: deque[int] = deque()
    running: list[int] = []

    def held(ids: list[int], extra: int = 0) -> int:
        """KV blocks the given sequences hold (plus `extra` tokens each)."""
        arr = np.asarray(ids, dtype=np.int64)
        tokens = run.prefilled[arr] + run.post[arr] + extra
        return int(np.sum(_blocks(tokens, block)))

    while nxt < n or waiting or running:
        while nxt < n and run.arrival_ms[nxt] <= t:
            waiting.append(nxt)
            nxt += 1
        if not running and not waiting:
            run.idle_ms += run.arrival_ms[nxt] - t
            t = float(run.arrival_ms[nxt])
            continue
        swap_ms = 0.0
        while waiting and len(running) < cfg.max_batch:
            i = waiting[0]
            if pool is not None:
                need = int(
                    _blocks(
                        int(
                            run.target[i] if not run.swapped[i] else run.prefilled[i] + run.post[i]
                        ),
                        block,
                    )
                )
                if (held(running) if running else 0) + need > pool:
                    break
                if run.swapped[i]:
                    swap_ms += need * cfg.swap_ms_per_block
                    run.swapped[i] = False
            running.append(waiting.popleft())
        if not running:  # the head of the queue waits for blocks nothing holds: cannot happen
            raise AssertionError("KV pool admits nothing although it is empty")

        decoding = [i for i in running if run.prefilled[i] >= run.target[i]]
        pending = [i for i in running if run.prefilled[i] < run.target[i]]
        take: dict[int, int] = {}
        if cfg.policy == "continuous":
            take = {i: int(run.target[i] - run.prefilled[i]) for i in pending}
        else:
            budget = cfg.step_token_budget - len(decoding)
            for i in pending:
                if budget <= 0:
                    break
                got = min(int(run.target[i] - run.prefilled[i]), cfg.chunk_tokens, budget)
                take[i] = got
                budget -= got
        prefill_tokens = sum(take.values())
        factor = spec_factor if decoding else 1.0
        dt = cost.step_ms(len(decoding), prefill_tokens, factor) + swap_ms

        steps = 1
        dec = np.asarray(decoding, dtype=np.int64)
        if not take and cfg.spec_alpha is None and decoding:
            # Identical decode-only steps until the next event: jump there in one move.
            steps = int((run.output[dec] - run.generated[dec]).min())
            if nxt < n and len(running) < cfg.max_batch:
                steps = min(steps, max(1, math.ceil((run.arrival_ms[nxt] - t) / dt)))
            if pool is not None:
                steps = _steps_within_pool(run, dec, steps, pool, block)
        t += dt * steps
        run.busy_ms += dt * steps
        run.overhead_ms += cost.overhead_ms * steps
        run.slot_ms += len(running) * dt * steps
        run.steps += steps

        if decoding:
            remaining = run.output[dec] - run.generated[dec]
            if cfg.spec_alpha is not None:
                emitted = np.minimum(
                    _accepted(rng, cfg.spec_alpha, cfg.spec_k, dec.size), remaining
                )
            else:
                emitted = np.full(dec.size, steps, dtype=np.int64)
            run.generated[dec] += emitted
            run.post[dec] += emitted
            run.itl_dt.append(dt)
            run.itl_count.append(int(dec.size) * steps)
        for i, got in take.items():
            run.prefilled[i] += got
            if run.prefilled[i] >= run.target[i]:
                run.generated[i] += 1
                run.post[i] = 1
                if np.isnan(run.first_ms[i]):
                    run.first_ms[i] = t
        still = []
        for i in running:
            if run.generated[i] >= run.output[i]:
                run.finish_ms[i] = t
            else:
                still.append(i)
        running = still
        if pool is not None:
            while running and held(running) > pool:
                victim = running.pop()  # the most recently admitted gives way
                run.preemptions += 1
                if cfg.preemption == "recompute":
                    run.target[victim] = run.target[victim] + run.post[victim]
                    run.prefilled[victim] = 0
                    run.post[victim] = 0
                else:
                    run.swapped[victim] = True
                    out_ms = int(_blocks(int(run.prefilled[victim] + run.post[victim]), block)) * (
                        cfg.swap_ms_per_block
                    )
                    t += out_ms
                    run.busy_ms += out_ms
                waiting.appendleft(victim)
            if running:
                run.peak_blocks = max(run.peak_blocks, held(running))


def _steps_within_pool(
    run: RunState, dec: NDArray[np.int64], steps: int, pool: int, block: int
) -> int:
    """Largest number of decode steps (<= steps) after which the running set still fits."""
    base = run.prefilled[dec] + run.post[dec]

    def fits(s: int) -> bool:
        """Whether s more decode steps keep the running set inside the pool."""
        return int(np.sum(-(-(base + s) // block))) <= pool

    if fits(steps):
        return steps
    lo, hi = 1, steps  # fits(lo - 1) holds; find the last s that fits, at least one step
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if fits(mid):
            lo = mid
        else:
            hi = mid - 1
    return max(1, lo)


def _accepted(rng: np.random.Generator, alpha: float, k: int, n: int) -> NDArray[np.int64]:
    """Tokens emitted per verification: accepted drafts (truncated geometric) + 1 bonus."""
    if alpha >= 1.0:
        return np.full(n, k + 1, dtype=np.int64)
    # Number of leading successes before the first rejection, capped at k.
    successes = rng.geometric(1.0 - alpha, n) - 1
    return np.minimum(successes, k).astype(np.int64) + 1


def _pct(values: NDArray[np.float64]) -> Percentiles:
    if values.size == 0:
        return Percentiles(mean=0.0, p50=0.0, p95=0.0, p99=0.0)
    p50, p95, p99 = np.percentile(values, [50, 95, 99])
    return Percentiles(mean=float(values.mean()), p50=float(p50), p95=float(p95), p99=float(p99))


def _metrics(run: RunState, cfg: SimConfig, trace: Trace) -> PolicyMetrics:
    start = float(run.arrival_ms.min())
    makespan_ms = float(np.nanmax(run.finish_ms)) - start
    makespan_s = makespan_ms / 1000.0
    ttft = run.first_ms - run.arrival_ms
    multi = run.output > 1
    tpot = np.zeros_like(ttft)
    tpot[multi] = (run.finish_ms[multi] - run.first_ms[multi]) / (run.output[multi] - 1)
    itl = np.repeat(np.asarray(run.itl_dt), np.asarray(run.itl_count, dtype=np.int64))
    ok = (ttft <= cfg.slo_ttft_ms) & (tpot <= cfg.slo_tpot_ms)
    waste = 0.0
    if run.occupied_slots:
        waste = 100.0 * (1.0 - run.useful_slots / run.occupied_slots)
    return PolicyMetrics(
        policy=cfg.policy,
        max_batch=cfg.max_batch,
        tok_s=float(trace.output_tokens.sum()) / makespan_s,
        req_s=trace.size / makespan_s,
        ttft_ms=_pct(ttft),
        tpot_ms=_pct(tpot[multi]),
        itl_ms=TailLatency(
            p99=float(np.percentile(itl, 99)) if itl.size else 0.0,
            max=float(itl.max()) if itl.size else 0.0,
        ),
        occupancy_mean=run.slot_ms / run.busy_ms if run.busy_ms else 0.0,
        padded_slot_waste_pct=waste,
        gpu_idle_pct=100.0 * run.idle_ms / makespan_ms if makespan_ms else 0.0,
        launch_overhead_pct=100.0 * run.overhead_ms / run.busy_ms if run.busy_ms else 0.0,
        preemptions=run.preemptions,
        goodput_req_s=float(ok.sum()) / makespan_s,
        goodput_pct=100.0 * float(ok.mean()),
        steps=run.steps,
        makespan_s=makespan_s,
        output_tokens=int(trace.output_tokens.sum()),
        requests=trace.size,
    )
