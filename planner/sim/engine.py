"""The step loop: static, continuous and chunked-prefill scheduling over one trace.

Each step admits waiting requests, runs one decode token per running sequence plus any prefill
work, and retires finished sequences; it costs `overhead + a + b*B + prefill_ms_per_token*P`.
Where consecutive steps are identical (only decoding, nothing arriving that could be admitted,
no KV boundary, no speculation) the loop jumps to the next event in one move, so the Python
work is per event, not per token; static batches are solved in closed form. Without a KV pool,
speculation or multi-step rounds a request is admitted, prefilled and decoded exactly once, and
a shorter loop (`_unbounded`) runs that case with the same result, float for float.
"""

from __future__ import annotations

import heapq
import math
from collections import defaultdict, deque
from collections.abc import Callable
from typing import TYPE_CHECKING, Literal

import numpy as np
from numpy.typing import NDArray
from pydantic import BaseModel, ConfigDict, Field

from planner.errors import InputError
from planner.sim.workload import Trace

if TYPE_CHECKING:
    from planner.core.step import StepTime

# docs/method.md §3 cost model ("reference"): a = 5.00 ms, b = 0.086 ms per sequence,
# 47 us per prefill token, 0.3 ms launch overhead per step.
REFERENCE_A_MS = 5.0
REFERENCE_B_MS = 0.086
REFERENCE_PREFILL_MS_PER_TOKEN = 0.047
REFERENCE_OVERHEAD_MS = 0.3
# Swapping one 16-token block of a 70B-class model (5 MiB) over PCIe Gen5 x16 at ~50 GB/s
# effective takes ~0.1 ms each way: a named assumption for --preemption swap.
DEFAULT_SWAP_MS_PER_BLOCK = 0.1
# Upper bounds on cost terms and scheduler sizes, each far beyond any GPU or engine, so every
# simulated time stays a finite float: an hour per step or per token is not a serving system,
# and no engine schedules more than 2^31 sequences, tokens or blocks in one step.
MAX_COST_MS = 3.6e6
MAX_SIM_COUNT = 2**31
# While a decaying admission ratio may let waiting requests in, decode-only jumps stop this
# often to look (SGLang's ratio moves by ~1/600 of its range per step: 8 steps is ~1.3%).
RESERVE_RECHECK_STEPS = 8
# Speculative k beyond 64 drafted tokens is not a configuration any engine accepts.
MAX_SPEC_K = 64
# vLLM V0 multi-step rounds: the engine's own docs and benchmarks use 8-16 steps; 256 bounds
# the setting far above any published use.
MAX_MULTI_STEP = 256


class CostModel(BaseModel):
    """Step cost: overhead + a + b x decode slots + prefill cost x prefill tokens."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    a_ms: float = Field(default=REFERENCE_A_MS, ge=0, le=MAX_COST_MS)
    b_ms: float = Field(default=REFERENCE_B_MS, ge=0, le=MAX_COST_MS)
    prefill_ms_per_token: float = Field(
        default=REFERENCE_PREFILL_MS_PER_TOKEN, ge=0, le=MAX_COST_MS
    )
    overhead_ms: float = Field(default=REFERENCE_OVERHEAD_MS, ge=0, le=MAX_COST_MS)
    source: str = "reference"

    def step_ms(self, decode_slots: int, prefill_tokens: int, spec_factor: float = 1.0) -> float:
        """Cost of one step with `decode_slots` sequences and `prefill_tokens` of prompt."""
        return (
            self.overhead_ms
            + (self.a_ms + self.b_ms * decode_slots) * spec_factor
            + self.prefill_ms_per_token * prefill_tokens
        )


class CurveCost:
    """Step cost from the step-time model itself (planner.core.step): the linear layers
    over every token of the step, decode attention over the KV the running sequences hold,
    prefill attention over its (query, key) pairs, kernels, all-reduce and engine overhead."""

    source = "step-time model"

    def __init__(self, curve: StepTime, source: str | None = None) -> None:
        self.curve = curve
        if source is not None:
            self.source = source
        self._kv_bytes: dict[int, int] = {}  # KV bytes one sequence reads, by its context

    def step_ms(
        self, decode_seqs: int, decode_tokens: int, prefill_tokens: int, prefill_pairs: float
    ) -> float:
        """One step: `decode_seqs` sequences holding `decode_tokens` tokens in all, plus
        `prefill_tokens` prompt tokens spanning `prefill_pairs` attention pairs."""
        kv = 0
        if decode_seqs:
            context = max(1, decode_tokens // decode_seqs)
            one = self._kv_bytes.get(context)
            if one is None:
                one = self._kv_bytes[context] = self.curve.kv_bytes(context)
            kv = decode_seqs * one
        return self.curve.mixed_ms(decode_seqs, kv, prefill_tokens, prefill_pairs)


class ReserveAdmission(BaseModel):
    """SGLang's admission: a request is admitted only while the pool keeps `ratio` x the
    remaining output of every running request (and its own) free. The ratio starts at
    `init_ratio` and falls by (init - min) / `decay_steps` per decode step to `min_ratio`, so a
    server that has not run out of memory admits more and more; when a decode step finds no
    free page, requests are retracted (fewest outputs first, longest prompt among equals) until
    each one left has room for `retract_steps` more tokens, they go to the back of the queue to
    be recomputed, and the ratio is reset to (decoded + retract_steps x running) / their
    output budgets (python/sglang/srt/managers/scheduler.py update_running_batch,
    schedule_batch.py retract_decode, global_config.py)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    init_ratio: float = Field(ge=0, le=1)
    min_ratio: float = Field(ge=0, le=1)
    decay_steps: int = Field(ge=1, le=MAX_SIM_COUNT)
    retract_steps: int = Field(ge=0, le=MAX_SIM_COUNT)
    clip_tokens: int = Field(
        gt=0, le=MAX_SIM_COUNT, description="a request's remaining output counts at most this"
    )


class SimConfig(BaseModel):
    """Scheduler and measurement settings for one simulated policy."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    policy: Literal["static", "continuous", "chunked"]
    max_batch: int = Field(default=32, gt=0, le=MAX_SIM_COUNT)
    step_token_budget: int = Field(default=512, gt=0, le=MAX_SIM_COUNT)
    chunk_tokens: int = Field(default=512, gt=0, le=MAX_SIM_COUNT)
    kv_blocks: int | None = Field(default=None, gt=0, le=MAX_SIM_COUNT)
    block_tokens: int = Field(default=16, gt=0, le=MAX_SIM_COUNT)
    preemption: Literal["recompute", "swap"] = "recompute"
    swap_ms_per_block: float = Field(default=DEFAULT_SWAP_MS_PER_BLOCK, ge=0, le=MAX_COST_MS)
    spec_alpha: float | None = Field(default=None, ge=0, le=1)
    spec_k: int = Field(default=4, ge=1, le=MAX_SPEC_K)
    spec_draft_cost: float = Field(default=0.05, ge=0, le=MAX_COST_MS)
    spec_verify_cost: float = Field(default=0.0, ge=0, le=MAX_COST_MS)
    slo_ttft_ms: float = Field(default=1000.0, gt=0, allow_inf_nan=False)
    slo_tpot_ms: float = Field(default=50.0, gt=0, allow_inf_nan=False)
    seed: int = 0
    concurrency: int | None = Field(
        default=None,
        gt=0,
        le=MAX_SIM_COUNT,
        description="closed loop: this many clients, each sends its next request when its last "
        "one finishes (the trace's arrival times are ignored unless `paced`)",
    )
    paced: bool = Field(
        default=False,
        description="with `concurrency`: a request goes at its arrival time or when a client "
        "frees, whichever is later (vllm bench serve --request-rate R --max-concurrency N: "
        "requests are released at the rate and wait for the semaphore)",
    )
    request_path_ms: float = Field(
        default=0.0,
        ge=0,
        description="each request's way between the client and the scheduler (server, "
        "tokenizer, hand-off, the first token's way back): TTFT and end-to-end latency count it",
    )
    reserve: ReserveAdmission | None = Field(
        default=None,
        description="SGLang's admission and retraction (a new-token ratio kept free for the "
        "running requests' outputs); None: vLLM's (admit on the prompt's blocks, preempt the "
        "newest to the queue's front)",
    )
    mixed: bool = Field(
        default=True,
        description="prefill chunks share a step with the decode tokens (vLLM); False: a step "
        "that prefills decodes nothing (SGLang without --enable-mixed-chunk)",
    )
    scheduler_steps: int = Field(
        default=1,
        ge=1,
        le=MAX_MULTI_STEP,
        description="vLLM V0's --num-scheduler-steps: one scheduling pass runs this many "
        "decode steps; requests join and prefill only between rounds, and the engine's "
        "per-step overhead is paid once per round",
    )


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
        # inter-token latency (ms) -> how many tokens were emitted after a gap that long
        self.itl_tokens: dict[float, int] = {}
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
    if cfg.paced and cfg.concurrency is None:
        raise InputError("--rate", "pacing a closed loop needs --concurrency")
    if cfg.scheduler_steps > 1 and cfg.spec_alpha is not None:
        raise InputError(
            "--num-scheduler-steps", "multi-step scheduling does not run speculative decoding"
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


def execute(
    trace: Trace,
    cost: CostModel | CurveCost,
    cfg: SimConfig,
    delay_ms: NDArray[np.float64] | None = None,
) -> RunState:
    """Run one policy over the trace; the raw per-request state (for metrics and audits).

    `delay_ms`: time each request waits after it is sent before the scheduler sees it (its
    prefix's KV crossing the host link from a CPU tier); TTFT counts it. Requests are still
    taken in trace order, so a delayed one holds back those behind it by at most its delay.
    The config's request path is added to every request's delay."""
    check(trace, cfg)
    run = RunState(trace)
    if cfg.request_path_ms:
        base = np.zeros(trace.size) if delay_ms is None else np.asarray(delay_ms, dtype=float)
        delay_ms = base + cfg.request_path_ms
    if cfg.policy == "static":
        if not isinstance(cost, CostModel) or cfg.concurrency is not None:
            raise InputError("--policy", "static batching runs on a given cost model, open loop")
        _static(run, cost, cfg)
    elif (
        isinstance(cost, CostModel)
        and cfg.kv_blocks is None
        and cfg.reserve is None
        and cfg.spec_alpha is None
        and cfg.scheduler_steps == 1
    ):
        _unbounded(run, cost, cfg, delay_ms)
    else:
        _iteration_level(run, cost, cfg, trace, delay_ms)
    return run


def simulate(trace: Trace, cost: CostModel | CurveCost, cfg: SimConfig) -> PolicyMetrics:
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
        run.itl_tokens[decode] = run.itl_tokens.get(decode, 0) + int((run.output[ids] - 1).sum())
        run.busy_ms += prefill + steps * decode
        run.overhead_ms += cost.overhead_ms * (steps + 1)
        run.slot_ms += size * (prefill + steps * decode)
        run.steps += steps + 1
        run.occupied_slots += size * (steps + 1)
        run.useful_slots += int(run.output[ids].sum())


def _iteration_level(
    run: RunState,
    cost: CostModel | CurveCost,
    cfg: SimConfig,
    trace: Trace,
    delay_ms: NDArray[np.float64] | None = None,
) -> None:
    """Continuous batching (whole prompts per step) and chunked prefill (token budget).

    Per-step work does not grow with the running set: decoding sequences advance together on
    one decode clock (each keeps its offset from it), and a heap keyed by the clock value at
    which each finishes gives both the next finish and the length of a decode-only jump. The
    per-request state lives in Python lists during the loop and is written back to `run`.
    """
    n = run.arrival_ms.size
    block = cfg.block_tokens
    pool = cfg.kv_blocks
    if pool is not None and trace.cached_prefix_tokens.any():
        pool -= int(_blocks(int(trace.cached_prefix_tokens.max()), block))  # the shared prefix
    rng = np.random.default_rng(cfg.seed)
    spec = cfg.spec_alpha
    spec_factor = 1.0
    if spec is not None:
        spec_factor = 1.0 + cfg.spec_k * (cfg.spec_draft_cost + cfg.spec_verify_cost)
    delay: list[float] = [0.0] * n if delay_ms is None else delay_ms.tolist()
    arrival: list[float] = (run.arrival_ms + (0.0 if delay_ms is None else delay_ms)).tolist()
    arrival, released, sent = _clients(run, cfg, arrival, delay)
    output: list[int] = run.output.tolist()
    target: list[int] = run.target.tolist()
    prefilled: list[int] = run.prefilled.tolist()
    post: list[int] = run.post.tolist()
    generated: list[int] = run.generated.tolist()
    swapped: list[bool] = run.swapped.tolist()
    first: list[float] = run.first_ms.tolist()
    finish: list[float] = run.finish_ms.tolist()
    max_batch, chunked = cfg.max_batch, cfg.policy == "chunked"
    budget_tokens, chunk_tokens = cfg.step_token_budget, cfg.chunk_tokens
    # CostModel.step_ms, inlined term for term (same floating-point result) for the hot loop.
    curve = cost if isinstance(cost, CurveCost) else None
    overhead_ms = a_ms = b_ms = prefill_ms = 0.0
    if isinstance(cost, CostModel):
        overhead_ms, a_ms, b_ms = cost.overhead_ms, cost.a_ms, cost.b_ms
        prefill_ms = cost.prefill_ms_per_token
    mixed = cfg.mixed
    # vLLM V0 multi-step: a round of `multi` steps is scheduled at once (admission and prefill
    # only at its start), and its overhead is paid once: each step saves (1 - 1/multi) of it.
    multi = cfg.scheduler_steps
    step_overhead_ms = curve.curve.overhead_ms if curve is not None else overhead_ms
    round_saving_ms = step_overhead_ms * (1.0 - 1.0 / multi)
    round_left = 0  # steps left in the current multi-step round
    preempted_last = False  # the last step preempted: it admits nothing new
    reserve = cfg.reserve
    reserve_ratio = reserve.init_ratio if reserve is not None else 0.0
    ratio_decay = 0.0
    if reserve is not None:
        ratio_decay = (reserve.init_ratio - reserve.min_ratio) / reserve.decay_steps
    clip = reserve.clip_tokens if reserve is not None else MAX_SIM_COUNT
    stall_ms = 0.0  # unmixed prefill time the decoding sequences have waited through
    decode_base = 0  # sum over decoding sequences of (prefilled + post_off): tokens = + clock x n
    busy_ms = overhead_total_ms = slot_ms = 0.0
    steps_total = 0
    heappush, heappop, ceil, isnan = heapq.heappush, heapq.heappop, math.ceil, math.isnan
    itl = run.itl_tokens
    t = 0.0
    nxt = 0
    waiting: deque[int] = deque()
    running: list[int] = []  # admission order (preemption takes the last)
    pending: list[int] = []  # running, prompt not yet fully prefilled (admission order)
    decoding_now = [False] * n
    NEVER = 2**62
    clock = 0  # decode steps run so far; a decoding sequence's counters are offset + clock
    gen_off = [0] * n
    post_off = [0] * n
    version = [0] * n  # heap entries of older versions are stale
    heap: list[tuple[int, int, int]] = []  # (clock value at which it finishes, id, version)

    # Blocks the decoding sequences hold, kept without a pass over them: a decoding sequence
    # holds ceil((base + clock) / block) blocks for its fixed base = prefilled + post offset;
    # with base = q x block + r that is q + floor((r + clock + block - 1) / block), so the sum
    # needs only the sum of q and how many sequences have each remainder r.
    base_q = 0
    base_r = [0] * block

    def count_base(i: int, sign: int) -> None:
        nonlocal base_q
        q, r = divmod(prefilled[i] + post_off[i], block)
        base_q += sign * q
        base_r[r] += sign

    # Outputs the decoding sequences have still to generate, kept without a pass over them:
    # sum(output - gen_off) - clock x decoding, less what SGLang's clip takes from the few
    # whose remainder exceeds it (`long`).
    rem_base = 0
    long: set[int] = set()

    def start_decoding(i: int) -> None:
        nonlocal decode_base, rem_base
        gen_off[i] = generated[i] - clock
        post_off[i] = post[i] - clock
        decoding_now[i] = True
        version[i] += 1
        decode_base += prefilled[i] + post_off[i]
        rem_base += output[i] - gen_off[i]
        if output[i] - gen_off[i] - clock > clip:
            long.add(i)
        count_base(i, 1)
        heappush(heap, (output[i] - gen_off[i], i, version[i]))

    def stop_decoding(i: int) -> None:
        nonlocal decode_base, rem_base
        rem_base -= output[i] - gen_off[i]
        long.discard(i)
        count_base(i, -1)
        generated[i] = gen_off[i] + clock
        post[i] = post_off[i] + clock
        decoding_now[i] = False
        decode_base -= prefilled[i] + post_off[i]
        version[i] += 1

    def decoding_blocks(at_clock: int) -> int:
        """KV blocks the decoding sequences hold when the decode clock reads `at_clock`."""
        whole, part = divmod(at_clock + block - 1, block)
        decoding = len(running) - len(pending)
        return base_q + decoding * whole + (sum(base_r[block - part :]) if part else 0)

    def held_running() -> int:
        """KV blocks the running sequences hold: the decoding ones from the counts above,
        the ones still prefilling one by one."""
        prefilling = sum(-(-(prefilled[i] + post[i]) // block) for i in pending)
        return decoding_blocks(clock) + prefilling

    def holding(i: int) -> int:
        return prefilled[i] + (post_off[i] + clock if decoding_now[i] else post[i])

    def generated_now(i: int) -> int:
        """Tokens request i has generated so far."""
        return gen_off[i] + clock if decoding_now[i] else generated[i]

    def remaining_output(i: int) -> int:
        """Tokens request i has still to generate, as the admission counts them."""
        return min(clip, max(0, output[i] - generated_now(i)))

    def remaining_running() -> int:
        """sum(remaining_output(j) for j in running), from the running totals."""
        over = 0
        for i in list(long):
            extra = output[i] - gen_off[i] - clock - clip
            if extra > 0:
                over += extra
            else:
                long.discard(i)  # its remainder only falls from here
        decoding = len(running) - len(pending)
        prefilling = sum(remaining_output(j) for j in pending)
        return rem_base - clock * decoding - over + prefilling

    def next_finish() -> int:
        """Clock value of the next finish (stale entries dropped); past any clock if none."""
        while heap and (heap[0][2] != version[heap[0][1]] or not decoding_now[heap[0][1]]):
            heappop(heap)
        return heap[0][0] if heap else NEVER

    def evict(victim: int) -> int:
        """Free a running request's KV (recomputed or swapped when it runs again); the
        blocks it held."""
        nonlocal t, busy_ms
        freed = -(-holding(victim) // block)
        run.preemptions += 1
        if decoding_now[victim]:
            stop_decoding(victim)
        else:
            pending.remove(victim)
        if cfg.preemption == "recompute":
            target[victim] = target[victim] + post[victim]
            prefilled[victim] = 0
            post[victim] = 0
        else:
            swapped[victim] = True
            blocks_out = -(-(prefilled[victim] + post[victim]) // block)
            out_ms = blocks_out * cfg.swap_ms_per_block
            t += out_ms
            busy_ms += out_ms
        return freed

    def retract(ids: list[int], in_use: int) -> int:
        """SGLang's retraction: fewest outputs (longest prompt among equals) leave first, to
        the back of the queue, until each one left has room for `retract_steps` tokens."""
        assert reserve is not None and pool is not None
        order = sorted(ids, key=lambda j: (generated_now(j), -target[j]), reverse=True)
        while len(order) > 1 and in_use + ceil(reserve.retract_steps * len(order) / block) > pool:
            victim = order.pop()
            ids.remove(victim)
            in_use -= evict(victim)
            waiting.append(victim)
        return in_use

    while nxt < n or waiting or running:
        while nxt < n and arrival[nxt] <= t:
            waiting.append(nxt)
            nxt += 1
        if round_left and len(running) == len(pending):
            round_left = 0  # nothing left decoding: the round ends early
        if not running and not waiting:
            run.idle_ms += arrival[nxt] - t
            t = arrival[nxt]
            continue
        swap_ms = 0.0
        # vLLM's scheduler admits no waiting request in a step that preempted one (v1
        # core/sched/scheduler.py: waiting requests are scheduled only `if not preempted_reqs`),
        # so a full pool does not thrash admitting and evicting the same requests.
        if waiting and len(running) < max_batch and not preempted_last and not round_left:
            in_use = held_running() if pool is not None and running else 0
            if reserve is not None and pool is not None:
                # SGLang-style admission: room is kept for the running requests' remaining
                # outputs, times the engine's new-token ratio
                in_use += ceil(reserve_ratio * remaining_running() / block)
            while waiting and len(running) < max_batch:
                i = waiting[0]
                if pool is not None:
                    tokens = prefilled[i] + post[i] if swapped[i] else target[i]
                    need = -(-tokens // block)
                    if reserve is not None:
                        need += ceil(reserve_ratio * remaining_output(i) / block)
                    if in_use + need > pool and (running or in_use):
                        break
                    if swapped[i]:
                        swap_ms += need * cfg.swap_ms_per_block
                        swapped[i] = False
                    in_use += need  # its prompt (and reserve) counts for the next
                running.append(waiting.popleft())
                if prefilled[i] >= target[i]:
                    start_decoding(i)
                else:
                    pending.append(i)
        if not running:  # the head of the queue waits for blocks nothing holds: cannot happen
            raise AssertionError("KV pool admits nothing although it is empty")

        n_decoding = len(running) - len(pending)
        take: dict[int, int] = {}
        if round_left:
            pass  # inside a multi-step round: the running set decodes, nothing prefills
        elif not chunked:
            take = {i: target[i] - prefilled[i] for i in pending}
        else:
            # Unmixed (SGLang): a step with prefill work runs only prefill, up to the budget.
            budget = budget_tokens - (n_decoding if mixed else 0)
            for i in pending:
                if budget <= 0:
                    break
                got = min(target[i] - prefilled[i], chunk_tokens, budget)
                take[i] = got
                budget -= got
        waiting_decoders = 0
        if take and not mixed:
            waiting_decoders, n_decoding = n_decoding, 0  # decoders wait for this prefill step
        prefill_tokens = sum(take.values())
        factor = spec_factor if n_decoding else 1.0
        if curve is None:
            dt = overhead_ms + (a_ms + b_ms * n_decoding) * factor + prefill_ms * prefill_tokens
        else:
            pairs = sum(curve.curve.chunk_pairs(prefilled[i], g) for i, g in take.items())
            decode_tokens = decode_base + clock * n_decoding if n_decoding else 0
            dt = curve.step_ms(n_decoding, decode_tokens, prefill_tokens, pairs) * factor
        if multi > 1:
            if not round_left:  # a round starts: V0 runs an unmixed prefill as a round of one
                round_left = 1 if take and not mixed else multi
            if round_left > 1 or mixed or not take:
                dt -= round_saving_ms
        dt += swap_ms

        steps = 1
        if not take and spec is None and n_decoding:
            # Identical decode-only steps until the next event: jump there in one move.
            steps = next_finish() - clock
            if nxt < n and len(running) < max_batch and arrival[nxt] < math.inf:
                steps = min(steps, max(1, ceil((arrival[nxt] - t) / dt)))
            if pool is not None:
                room = pool - (held_running() - decoding_blocks(clock))

                def fits(more: int, at: int = clock, free: int = room) -> bool:
                    return decoding_blocks(at + more) <= free

                steps = _steps_within_pool(fits, steps)
            if waiting and reserve_ratio > (reserve.min_ratio if reserve else 0.0):
                # the decaying ratio may let the queue in mid-jump: look again soon
                steps = min(steps, RESERVE_RECHECK_STEPS)
            if multi > 1:
                steps = min(steps, round_left)
            if curve is not None and steps > 1:
                # the KV read grows by one token per sequence per step: the jump's mean step
                mid = decode_base + clock * n_decoding + n_decoding * (steps - 1) // 2
                dt = curve.step_ms(n_decoding, mid, 0, 0.0) + swap_ms
                if multi > 1:
                    dt -= round_saving_ms
        if multi > 1:
            round_left -= steps
            saved = round_saving_ms if round_left or mixed or not take else 0.0
            overhead_total_ms += (overhead_ms - saved) * steps
        else:
            overhead_total_ms += overhead_ms * steps
        t += dt * steps
        busy_ms += dt * steps
        slot_ms += len(running) * dt * steps
        steps_total += steps

        if n_decoding:
            if reserve is not None:
                reserve_ratio = max(reserve_ratio - ratio_decay * steps, reserve.min_ratio)
            if spec is not None:
                decoding = [i for i in running if decoding_now[i]]
                remaining = np.asarray([output[i] - gen_off[i] - clock for i in decoding])
                drawn = _accepted(rng, spec, cfg.spec_k, len(decoding))
                emitted: list[int] = np.minimum(drawn, remaining).tolist()
                for i, got in zip(decoding, emitted, strict=True):
                    count_base(i, -1)
                    gen_off[i] += got - steps  # the clock adds `steps` to everyone below
                    rem_base -= got - steps
                    post_off[i] += got - steps
                    count_base(i, 1)
                    decode_base += got - steps
                    version[i] += 1
                    heappush(heap, (output[i] - gen_off[i], i, version[i]))
            clock += steps
            if stall_ms:  # the first token after unmixed prefill steps waited for them too
                itl[dt + stall_ms] = itl.get(dt + stall_ms, 0) + n_decoding
                itl[dt] = itl.get(dt, 0) + n_decoding * (steps - 1)
                stall_ms = 0.0
            else:
                itl[dt] = itl.get(dt, 0) + n_decoding * steps
        elif waiting_decoders:
            stall_ms += dt
        if take:
            done_prefill = False
            for i, got in take.items():
                prefilled[i] += got
                if prefilled[i] >= target[i]:
                    generated[i] += 1
                    post[i] = 1
                    if isnan(first[i]):
                        first[i] = t
                    start_decoding(i)
                    done_prefill = True
            if done_prefill:
                pending = [i for i in pending if not decoding_now[i]]
        done: list[int] = []
        while heap:
            due, i, ver = heap[0]
            if ver != version[i] or not decoding_now[i]:
                heappop(heap)  # stale
                continue
            if due > clock:
                break
            heappop(heap)
            stop_decoding(i)
            finish[i] = t
            done.append(i)
            if released < n:  # closed loop: this client sends its next request now
                go = sent[released]  # paced: not before its arrival time
                arrival[released] = (t if t > go else go) + delay[released]
                released += 1
        for i in done:  # finished requests leave the running set (a C-level scan each)
            running.remove(i)
        if pool is not None:
            in_use = held_running() if running else 0
            preempted_last = in_use > pool
            if preempted_last and reserve is not None:
                in_use = retract(running, in_use)
                decoded = sum(generated_now(j) for j in running)
                budget_out = sum(output[j] for j in running)
                reserve_ratio = min(
                    1.0, (decoded + reserve.retract_steps * len(running)) / max(1, budget_out)
                )
            while running and in_use > pool:
                victim = running.pop()  # the most recently admitted gives way
                in_use -= evict(victim)
                waiting.appendleft(victim)
            if running:
                run.peak_blocks = max(run.peak_blocks, held_running())
    run.busy_ms += busy_ms
    run.overhead_ms += overhead_total_ms
    run.slot_ms += slot_ms
    run.steps += steps_total
    run.target[:] = target
    run.prefilled[:] = prefilled
    run.post[:] = post
    run.generated[:] = generated
    run.swapped[:] = swapped
    run.first_ms[:] = first
    run.finish_ms[:] = finish
    run.arrival_ms = np.asarray(arrival, dtype=np.float64) - np.asarray(delay)


def _unbounded(
    run: RunState, cost: CostModel, cfg: SimConfig, delay_ms: NDArray[np.float64] | None
) -> None:
    """`_iteration_level` where nothing bounds the running set but max_batch: no KV pool (so
    no preemption), no speculation, one step per scheduling pass, a linear cost. Each request
    is admitted, prefilled and decoded once, so its finish is fixed when it starts decoding and
    the per-event work is a few list operations; the result is the general loop's, float for
    float (tests/test_simulate.py runs both)."""
    n = run.arrival_ms.size
    delay: list[float] = [0.0] * n if delay_ms is None else delay_ms.tolist()
    arrival: list[float] = (run.arrival_ms + (0.0 if delay_ms is None else delay_ms)).tolist()
    arrival, released, sent = _clients(run, cfg, arrival, delay)
    output: list[int] = run.output.tolist()
    target: list[int] = run.target.tolist()
    prefilled = [0] * n
    first: list[float] = run.first_ms.tolist()
    finish: list[float] = run.finish_ms.tolist()
    max_batch, chunked, mixed = cfg.max_batch, cfg.policy == "chunked", cfg.mixed
    budget_tokens, chunk_tokens = cfg.step_token_budget, cfg.chunk_tokens
    overhead_ms, a_ms, b_ms = cost.overhead_ms, cost.a_ms, cost.b_ms
    prefill_ms = cost.prefill_ms_per_token
    heappush, heappop, ceil, inf = heapq.heappush, heapq.heappop, math.ceil, math.inf
    itl: defaultdict[float, int] = defaultdict(int)  # run.itl_tokens, gathered here
    busy_ms = slot_ms = stall_ms = idle_ms = overhead_total_ms = 0.0
    steps_total = 0
    t = 0.0
    nxt = 0
    clock = 0  # decode steps run so far
    waiting: deque[int] = deque()
    running = 0  # how many are running (admitted, not finished)
    pending: list[int] = []  # running, prompt not yet fully prefilled (admission order)
    heap: list[tuple[int, int]] = []  # (clock value at which it finishes, id)

    def retire() -> None:
        """Requests whose last token is due by `clock` finish at `t`; in a closed loop each
        frees its client, whose next request goes then (paced: not before its arrival time)."""
        nonlocal running, released
        while heap and heap[0][0] <= clock:
            finish[heappop(heap)[1]] = t
            running -= 1
            if released < n:
                go = sent[released]
                arrival[released] = (t if t > go else go) + delay[released]
                released += 1

    while nxt < n or waiting or running:
        while nxt < n and arrival[nxt] <= t:
            waiting.append(nxt)
            nxt += 1
        if not running and not waiting:
            idle_ms += arrival[nxt] - t
            t = arrival[nxt]
            continue
        while waiting and running < max_batch:
            pending.append(waiting.popleft())
            running += 1
        n_decoding = running - len(pending)  # a new prompt has a token left (target >= 1)
        if not pending:
            # Decode-only: jump to the next finish (or to the next arrival while a slot is
            # free), retire, and go on jumping until an arrival can be admitted or nothing
            # runs; the same steps the loop above would take one pass at a time.
            while True:
                dt = overhead_ms + (a_ms + b_ms * n_decoding)
                steps = heap[0][0] - clock
                if nxt < n and running < max_batch and arrival[nxt] < inf:
                    gap = ceil((arrival[nxt] - t) / dt)
                    if gap < steps:
                        steps = gap if gap > 1 else 1
                overhead_total_ms += overhead_ms * steps
                t += dt * steps
                busy_ms += dt * steps
                slot_ms += running * dt * steps
                steps_total += steps
                clock += steps
                if stall_ms:  # the first token after unmixed prefill steps waited for them too
                    itl[dt + stall_ms] += n_decoding
                    itl[dt] += n_decoding * (steps - 1)
                    stall_ms = 0.0
                else:
                    itl[dt] += n_decoding * steps
                retire()
                n_decoding = running
                while nxt < n and arrival[nxt] <= t:
                    waiting.append(nxt)
                    nxt += 1
                if not running or (waiting and running < max_batch):
                    break
            continue
        # A step with prefill work: the pending prompts' chunks (with the decodes, mixed).
        take: list[tuple[int, int]] = []
        if not chunked:
            take = [(i, target[i] - prefilled[i]) for i in pending]
            prefill_tokens = sum(g for _, g in take)
        else:
            budget = budget_tokens - (n_decoding if mixed else 0)
            for i in pending:
                if budget <= 0:
                    break
                got = target[i] - prefilled[i]  # min(left, chunk, budget), unrolled
                if got > chunk_tokens:
                    got = chunk_tokens
                if got > budget:
                    got = budget
                take.append((i, got))
                budget -= got
            prefill_tokens = budget_tokens - (n_decoding if mixed else 0) - budget
        waiting_decoders = 0
        if take and not mixed:
            waiting_decoders, n_decoding = n_decoding, 0
        dt = overhead_ms + (a_ms + b_ms * n_decoding) + prefill_ms * prefill_tokens
        overhead_total_ms += overhead_ms  # one step: x 1 is exact, so these match the jumps
        t += dt
        busy_ms += dt
        slot_ms += running * dt
        steps_total += 1
        if n_decoding:
            clock += 1
            if stall_ms:
                itl[dt + stall_ms] += n_decoding
                itl[dt] += 0  # the general loop records the step's length with no token
                stall_ms = 0.0
            else:
                itl[dt] += n_decoding
        elif waiting_decoders:
            stall_ms += dt
        done_prefill = 0
        for i, got in take:
            prefilled[i] += got
            if prefilled[i] >= target[i]:
                first[i] = t
                heappush(heap, (clock + output[i] - 1, i))
                done_prefill += 1
        if done_prefill == len(pending):
            pending = []  # the usual case: every pending prompt finished this step
        elif done_prefill:
            pending = [i for i in pending if prefilled[i] < target[i]]
        retire()
    for gap_ms, tokens in itl.items():
        run.itl_tokens[gap_ms] = run.itl_tokens.get(gap_ms, 0) + tokens
    run.idle_ms += idle_ms
    run.busy_ms += busy_ms
    run.overhead_ms += overhead_total_ms
    run.slot_ms += slot_ms
    run.steps += steps_total
    run.prefilled[:] = prefilled
    run.post[:] = run.output
    run.generated[:] = run.output
    run.first_ms[:] = first
    run.finish_ms[:] = finish
    run.arrival_ms = np.asarray(arrival, dtype=np.float64) - np.asarray(delay)


def _clients(
    run: RunState, cfg: SimConfig, arrival: list[float], delay: list[float]
) -> tuple[list[float], int, list[float]]:
    """Arrival times as the scheduler sees them, how many requests are released, and the
    earliest each may be sent. Open loop: the trace's (all released). Closed loop: the first N
    requests go at once (paced: at their arrival times), each later one when a client's last
    request finishes (set in the loop, in finish order), paced ones not before their time."""
    n = len(arrival)
    if cfg.concurrency is None:
        return arrival, n, []
    released = min(cfg.concurrency, n)
    sent: list[float] = run.arrival_ms.tolist() if cfg.paced else [0.0] * n
    first = [sent[i] + delay[i] for i in range(released)]
    return first + [math.inf] * (n - released), released, sent


def _steps_within_pool(fits: Callable[[int], bool], steps: int) -> int:
    """Largest number of decode steps (<= steps) after which the running set still fits
    (`fits(s)`: whether it does after s more steps; monotone), at least one."""
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


def _weighted_tail(dt_ms: list[float], counts: list[int]) -> TailLatency:
    """p99 and max of inter-token latencies given as (value, how many tokens saw it).

    Equal to np.percentile (linear interpolation) over the expanded array, without expanding
    it: a trace with billions of output tokens needs no per-token array.
    """
    values = np.asarray(dt_ms, dtype=np.float64)
    weights = np.asarray(counts, dtype=np.int64)
    keep = weights > 0
    values, weights = values[keep], weights[keep]
    if values.size == 0:
        return TailLatency(p99=0.0, max=0.0)
    order = np.argsort(values, kind="stable")
    values, ends = values[order], np.cumsum(weights[order])
    position = 0.99 * (int(ends[-1]) - 1)
    low = math.floor(position)
    at_low = values[np.searchsorted(ends, low, side="right")]
    at_high = values[np.searchsorted(ends, min(low + 1, int(ends[-1]) - 1), side="right")]
    p99 = float(at_low + (position - low) * (at_high - at_low))
    return TailLatency(p99=p99, max=float(values[-1]))


def _metrics(run: RunState, cfg: SimConfig, trace: Trace) -> PolicyMetrics:
    start = float(run.arrival_ms.min())
    makespan_ms = float(np.nanmax(run.finish_ms)) - start
    makespan_s = makespan_ms / 1000.0
    ttft = run.first_ms - run.arrival_ms
    multi = run.output > 1
    tpot = np.zeros_like(ttft)
    tpot[multi] = (run.finish_ms[multi] - run.first_ms[multi]) / (run.output[multi] - 1)
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
        itl_ms=_weighted_tail(list(run.itl_tokens), list(run.itl_tokens.values())),
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
