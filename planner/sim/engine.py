"""The step loop: static, continuous and chunked-prefill scheduling over one trace.

Each step admits waiting requests, runs one decode token per running sequence plus any prefill
work, and retires finished sequences, at the cost planner.sim.cost gives it, under the settings
of planner.sim.config.
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

import numpy as np
from numpy.typing import NDArray
from pydantic import BaseModel, ConfigDict

from planner.core.search import largest_passing
from planner.errors import InputError
from planner.sim.config import MAX_SIM_COUNT, SimConfig
from planner.sim.cost import CostModel, CurveCost
from planner.sim.door import Door
from planner.sim.workload import Trace

# While a decaying admission ratio may let waiting requests in, decode-only jumps stop this
# often to look (SGLang's ratio moves by ~1/600 of its range per step: 8 steps is ~1.3%).
RESERVE_RECHECK_STEPS = 8
# SGLang's receive skipper weighs a loop whose last batch had prefill (or anything but decode)
# at 1,000 toward --scheduler-recv-interval, a decode step or an idle loop at 1
# (_DEFAULT_WEIGHT and _WEIGHT_OF_FORWARD_MODE, managers/scheduler_recv_skipper.py, 0.5.4).
RECV_PREFILL_WEIGHT = 1000


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
        # the prefix-cache hits' tokens: not prefilled, attended to (prefill chunks' keys and
        # every decode step's KV read)
        self.cached = trace.prompt_tokens - self.target
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
        self.peak_running = 0  # most sequences running in any step


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
        if cfg.mixed and cfg.max_batch > cfg.step_token_budget:  # unmixed: prefill alone
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
    if cfg.whole_prompts and cfg.scheduler_steps > 1:
        longest = int(np.max(trace.prompt_tokens))
        if longest > cfg.step_token_budget:
            # vLLM V0 (0.6.3+, core/scheduler.py): under multi-step the prompt limit is
            # min(max_model_len, max_num_batched_tokens); a longer prompt is ignored
            raise InputError(
                "--max-num-batched-tokens",
                f"{cfg.step_token_budget:,}: vLLM V0's multi-step rounds do not chunk prompts, "
                f"so it ignores prompts longer than that (finished with no output), and these "
                f"run up to {longest:,} tokens; raise it to hold the longest prompt",
            )
    wp = cfg.window_pool
    if wp is not None:
        # each distinct output length's peak, once (a trace has far fewer than requests)
        lengths, which = np.unique(trace.output_tokens, return_inverse=True)
        peaks = np.asarray([wp.peak_held(int(o)) for o in lengths], dtype=np.int64)
        held = int(np.max(trace.prompt_tokens + peaks[which]))
        if held > wp.tokens:
            raise InputError(
                "--kv-blocks",
                f"the sliding-window pool's {wp.tokens:,} tokens cannot hold one request of "
                f"the trace ({held:,} at its peak: a prompt whole and two windows of output)",
            )
    if cfg.kv_blocks is not None:
        need = int(np.max(_blocks(trace.prompt_tokens + trace.output_tokens, cfg.block_tokens)))
        need += cfg.state_blocks_per_seq
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
        and not cfg.whole_prompts
        and not cfg.outputs_one_step_late
        and cfg.lockstep_groups == 1
        and cfg.recv_interval == 1
        and cfg.prefill_input_cap is None
    ):
        _unbounded(run, cost, cfg, trace, delay_ms)
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
                need += cfg.state_blocks_per_seq
                if used + need > cfg.kv_blocks:
                    break
                used += need
                run.peak_blocks = max(run.peak_blocks, used)
            batch.append(waiting.popleft())
        ids = np.asarray(batch)
        size = ids.size
        run.peak_running = max(run.peak_running, size)
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
    """Continuous batching (whole prompts per step) and chunked prefill (token budget): the
    step loop of `_IterationLoop`, its results written back to `run`."""
    loop = _IterationLoop(run, cost, cfg, trace, delay_ms)
    loop.run_all()
    loop.write_back()


# A decode clock value past any step count: the next finish when nothing is decoding.
NEVER = 2**62


class _IterationLoop:
    """The state of one continuous-batching / chunked-prefill run and its step loop.

    Per-step work does not grow with the running set: decoding sequences advance together on
    one decode clock (each keeps its offset from it), and a heap keyed by the clock value at
    which each finishes gives both the next finish and the length of a decode-only jump. The
    per-request state lives in Python lists during the loop and is written back to `run`.
    Each step is a sequence of phases (`step`): admit waiting requests, pick the prefill
    work, price the step (or a jump of identical decode-only steps), advance the decode clock,
    complete prefills, retire finished requests, and relieve an over-full KV pool.
    """

    def __init__(
        self,
        run: RunState,
        cost: CostModel | CurveCost,
        cfg: SimConfig,
        trace: Trace,
        delay_ms: NDArray[np.float64] | None,
    ) -> None:
        self.run, self.cfg = run, cfg
        n = self.n = run.arrival_ms.size
        block = self.block = cfg.block_tokens
        self.states = cfg.state_blocks_per_seq  # a running sequence's fixed blocks
        pool = cfg.kv_blocks
        if pool is not None and trace.cached_prefix_tokens.any():
            pool -= int(_blocks(int(trace.cached_prefix_tokens.max()), block))  # shared prefix
        self.pool = pool
        self.rng = np.random.default_rng(cfg.seed)
        self.spec = cfg.spec_alpha
        self.spec_factor = 1.0
        if self.spec is not None and not (isinstance(cost, CurveCost) and cost.spec_k):
            # a linear cost model scales its decode step; a step-model cost prices the
            # verification and the drafts itself
            self.spec_factor = 1.0 + cfg.spec_k * (cfg.spec_draft_cost + cfg.spec_verify_cost)
        delay: list[float] = [0.0] * n if delay_ms is None else delay_ms.tolist()
        arrival: list[float] = (run.arrival_ms + (0.0 if delay_ms is None else delay_ms)).tolist()
        self.delay = delay
        self.arrival, self.released, self.sent, self.send = _clients(
            run, cfg, trace, arrival, delay
        )
        self.output: list[int] = run.output.tolist()
        self.target: list[int] = run.target.tolist()
        self.cached: list[int] = run.cached.tolist()  # held once in the pool (above)
        self.prefilled: list[int] = run.prefilled.tolist()
        self.post: list[int] = run.post.tolist()
        self.generated: list[int] = run.generated.tolist()
        self.swapped: list[bool] = run.swapped.tolist()
        self.first: list[float] = run.first_ms.tolist()
        self.finish: list[float] = run.finish_ms.tolist()
        self.max_batch, self.chunked = cfg.max_batch, cfg.policy == "chunked"
        self.budget_tokens, self.chunk_tokens = cfg.step_token_budget, cfg.chunk_tokens
        # CostModel.step_ms, inlined term for term (same floating-point result) for the loop.
        self.curve = cost if isinstance(cost, CurveCost) else None
        self.overhead_ms = self.a_ms = self.b_ms = self.prefill_ms = 0.0
        if isinstance(cost, CostModel):
            self.overhead_ms, self.a_ms, self.b_ms = cost.overhead_ms, cost.a_ms, cost.b_ms
            self.prefill_ms = cost.prefill_ms_per_token
        self.mixed, self.whole = cfg.mixed, cfg.whole_prompts
        # vLLM V0 multi-step: a round of `multi` steps is scheduled at once (admission and
        # prefill only at its start), and its overhead is paid once: each step saves
        # (1 - 1/multi) of it.
        self.multi = cfg.scheduler_steps
        step_overhead_ms = (
            self.curve.curve.overhead_ms if self.curve is not None else self.overhead_ms
        )
        self.round_saving_ms = step_overhead_ms * (1.0 - 1.0 / self.multi)
        # the scheduler's per-sequence work is paid once per round as well
        host_ms = self.curve.curve.host_ms_per_seq if self.curve is not None else 0.0
        self.round_saving_ms_per_seq = host_ms * (1.0 - 1.0 / self.multi)
        self.round_left = 0  # steps left in the current multi-step round
        # SGLang's receive skipper (managers/scheduler_recv_skipper.py, 0.5.4; scheduler_
        # components/recv_skipper.py, 0.5.23): each loop adds its last batch's weight, 1 for a
        # decode step (or none), 1,000 for anything with prefill, and the scheduler takes in
        # new requests only when the sum reaches --scheduler-recv-interval, then starts again
        self.recv_every = cfg.recv_interval
        self.recv_count = cfg.recv_interval  # the first loop takes in what has arrived
        self.preempted_last = False  # the last step preempted: it admits nothing new
        reserve = self.reserve = cfg.reserve
        # vLLM V0 allocates a request's whole prompt at admission (block_manager allocate),
        # chunked or not; V1 allocates the tokens each step schedules, and SGLang's admission
        # keeps its own reserve
        self.whole_prompt_held = not cfg.admit_chunk and reserve is None
        self.reserve_ratio = reserve.init_ratio if reserve is not None else 0.0
        self.ratio_decay = 0.0
        if reserve is not None:
            self.ratio_decay = (reserve.init_ratio - reserve.min_ratio) / reserve.decay_steps
        self.clip = reserve.clip_tokens if reserve is not None else MAX_SIM_COUNT
        self.window_pool = cfg.window_pool
        # What the window pool's evictions have freed of each decoding request's output (and
        # in all), brought up to the clock by a heap of each one's next eviction: the pool then
        # holds the running requests' tokens less that total.
        self.window_freed = [0] * n
        self.window_freed_total = 0
        self.window_events: list[tuple[int, int, int]] = []  # (clock at it, id, version)
        self.stall_ms = 0.0  # unmixed prefill time the decoding sequences have waited through
        # sequences whose first token came out during that wait -> the stall_ms before it: their
        # next token's gap holds only the rest of the wait
        self.joined_stall_ms: dict[int, float] = {}
        # ranks in lockstep (`SimConfig.lockstep_groups`): this rank's prefill steps so far,
        # their time, the prompts they completed and the requests finished (each other rank, as
        # loaded, prefills as often and as long). A closed loop of identical requests keeps the
        # ranks in phase: each prefills when this one does, and a step prefills on all or none.
        self.groups = cfg.lockstep_groups
        self.in_phase = (
            cfg.concurrency is not None
            and not cfg.paced
            and min(self.target, default=0) == max(self.target, default=0)
            and min(self.output, default=0) == max(self.output, default=0)
        )
        self.prefill_steps = self.prompts_done = self.finished = 0
        self.first_arrival_ms = min(self.arrival, default=0.0)
        self.last_arrival_ms = max(self.arrival, default=0.0)
        self.prefill_ms_total = 0.0
        # the time this rank's finished requests spent in the engine, summed: their mean stay
        # sets what an open loop's other ranks hold (expected_occupancy)
        self.sojourn_ms = 0.0
        # vLLM V0's async output processing: the first tokens and finishes of the last step,
        # delivered when the next step ends (and a finish's client sends its next request then)
        self.late = cfg.outputs_one_step_late
        self.late_first: list[int] = []
        self.late_finish: list[int] = []
        # sum over decoding sequences of (prefilled + post_off): their tokens = + clock x n
        self.decode_base = 0
        # sum over decoding sequences of their cached prefixes: read by each step, not held
        self.decode_cached = 0
        self.busy_ms = self.overhead_total_ms = self.slot_ms = 0.0
        self.steps_total = 0
        self.t = 0.0
        self.nxt = 0
        self.waiting: deque[int] = deque()
        self.running: list[int] = []  # admission order (preemption takes the last)
        self.pending: list[int] = []  # running, prompt not yet fully prefilled (admission order)
        self.decoding_now = [False] * n
        self.clock = 0  # decode steps run so far; a decoding sequence's counters: offset + clock
        self.gen_off = [0] * n
        self.post_off = [0] * n
        self.version = [0] * n  # heap entries of older versions are stale
        self.heap: list[tuple[int, int, int]] = []  # (clock value at its finish, id, version)
        # Blocks the decoding sequences hold, kept without a pass over them: a decoding
        # sequence holds ceil((base + clock) / block) blocks for its fixed base = prefilled +
        # post offset; with base = q x block + r that is q + floor((r + clock + block - 1) /
        # block), so the sum needs only the sum of q and how many sequences have each r.
        self.base_q = 0
        self.base_r = [0] * block
        # Outputs the decoding sequences have still to generate, kept without a pass over
        # them: sum(output - gen_off) - clock x decoding, less what SGLang's clip takes from
        # the few whose remainder exceeds it (`long`).
        self.rem_base = 0
        self.long: set[int] = set()

    # -- the decode clock's running totals -------------------------------------------------

    def count_base(self, i: int, sign: int) -> None:
        q, r = divmod(self.prefilled[i] + self.post_off[i], self.block)
        self.base_q += sign * q
        self.base_r[r] += sign

    def start_decoding(self, i: int) -> None:
        output, clock = self.output, self.clock
        self.gen_off[i] = self.generated[i] - clock
        self.post_off[i] = self.post[i] - clock
        self.decoding_now[i] = True
        self.version[i] += 1
        self.decode_base += self.prefilled[i] + self.post_off[i]
        self.decode_cached += self.cached[i]
        self.rem_base += output[i] - self.gen_off[i]
        if output[i] - self.gen_off[i] - clock > self.clip:
            self.long.add(i)
        self.window_start(i)
        self.count_base(i, 1)
        heapq.heappush(self.heap, (output[i] - self.gen_off[i], i, self.version[i]))

    def stop_decoding(self, i: int) -> None:
        self.rem_base -= self.output[i] - self.gen_off[i]
        self.long.discard(i)
        self.window_freed_total -= self.window_freed[i]
        self.window_freed[i] = 0
        self.count_base(i, -1)
        self.generated[i] = self.gen_off[i] + self.clock
        self.post[i] = self.post_off[i] + self.clock
        self.decoding_now[i] = False
        self.decode_base -= self.prefilled[i] + self.post_off[i]
        self.decode_cached -= self.cached[i]
        self.version[i] += 1

    def decoding_blocks(self, at_clock: int) -> int:
        """KV blocks the decoding sequences hold when the decode clock reads `at_clock`."""
        block = self.block
        whole, part = divmod(at_clock + block - 1, block)
        decoding = len(self.running) - len(self.pending)
        held = self.base_q + decoding * (whole + self.states)
        return held + (sum(self.base_r[block - part :]) if part else 0)

    def held_running(self) -> int:
        """KV blocks the running sequences hold: the decoding ones from the counts above,
        the ones still prefilling one by one: what they have computed where blocks follow
        the chunks (vLLM V1, SGLang), their whole prompt where admission allocated it (vLLM
        V0: whole_prompt_held)."""
        prefilled, post, block = self.prefilled, self.post, self.block
        if self.whole_prompt_held:
            target = self.target
            prefilling = sum(
                -(-max(target[i], prefilled[i] + post[i]) // block) for i in self.pending
            )
        else:
            prefilling = sum(-(-(prefilled[i] + post[i]) // block) for i in self.pending)
        return self.decoding_blocks(self.clock) + prefilling + self.states * len(self.pending)

    def holding(self, i: int) -> int:
        held_after = self.post_off[i] + self.clock if self.decoding_now[i] else self.post[i]
        return self.prefilled[i] + held_after

    def generated_now(self, i: int) -> int:
        """Tokens request i has generated so far."""
        return self.gen_off[i] + self.clock if self.decoding_now[i] else self.generated[i]

    def remaining_output(self, i: int) -> int:
        """Tokens request i has still to generate, as the admission counts them."""
        return min(self.clip, max(0, self.output[i] - self.generated_now(i)))

    def window_held(self, i: int) -> int:
        """Tokens request i holds in the window pool: its prompt whole, its decoded tokens
        until they are evicted."""
        wp = self.window_pool
        assert wp is not None
        post = self.post_off[i] + self.clock if self.decoding_now[i] else self.post[i]
        return self.prefilled[i] + wp.decoded_held(post)

    def window_start(self, i: int) -> None:
        """A decoding request's freed tokens at its decoded count now, and its next eviction
        on the heap (again whenever its count jumps: speculation); nothing without a window
        pool, or for an output no longer than two windows (never evicted)."""
        wp = self.window_pool
        if wp is None or self.output[i] <= 2 * wp.window:
            return
        decoded = self.post_off[i] + self.clock
        freed = decoded - wp.decoded_held(decoded)
        self.window_freed_total += freed - self.window_freed[i]
        self.window_freed[i] = freed
        window = wp.window
        at = max(2, (decoded - 1) // window + 1) * window + 1  # the next count evicted at
        heapq.heappush(self.window_events, (at - self.post_off[i], i, self.version[i]))

    def window_in_use(self) -> int:
        """Tokens the running requests hold in the window pool: the tokens they hold, less
        what eviction has freed of the decoded tokens of those past two windows (the
        evictions due by the clock applied first)."""
        wp = self.window_pool
        assert wp is not None
        events, version, decoding_now = self.window_events, self.version, self.decoding_now
        clock, post_off, freed = self.clock, self.post_off, self.window_freed
        while events and events[0][0] <= clock:
            at, i, ver = heapq.heappop(events)
            if ver != version[i] or not decoding_now[i]:
                continue  # stale: it stopped decoding or its count moved
            decoded = at + post_off[i]
            now = decoded - wp.decoded_held(decoded)
            self.window_freed_total += now - freed[i]
            freed[i] = now
            heapq.heappush(events, (at + wp.window, i, ver))
        prefilled, post = self.prefilled, self.post
        decoding = len(self.running) - len(self.pending)
        held = self.decode_base + clock * decoding
        held += sum(prefilled[i] + post[i] for i in self.pending)
        return held - self.window_freed_total

    def remaining_running(self) -> int:
        """sum(remaining_output(j) for j in running), from the running totals."""
        over = 0
        for i in list(self.long):
            extra = self.output[i] - self.gen_off[i] - self.clock - self.clip
            if extra > 0:
                over += extra
            else:
                self.long.discard(i)  # its remainder only falls from here
        decoding = len(self.running) - len(self.pending)
        prefilling = sum(self.remaining_output(j) for j in self.pending)
        return self.rem_base - self.clock * decoding - over + prefilling

    def next_finish(self) -> int:
        """Clock value of the next finish (stale entries dropped); past any clock if none."""
        heap, version, decoding_now = self.heap, self.version, self.decoding_now
        while heap and (heap[0][2] != version[heap[0][1]] or not decoding_now[heap[0][1]]):
            heapq.heappop(heap)
        return heap[0][0] if heap else NEVER

    # -- KV pressure ----------------------------------------------------------------------

    def evict(self, victim: int) -> int:
        """Free a running request's KV (recomputed or swapped when it runs again); the
        blocks it held."""
        freed = -(-self.holding(victim) // self.block) + self.states
        self.run.preemptions += 1
        if self.decoding_now[victim]:
            self.stop_decoding(victim)
        else:
            self.pending.remove(victim)
        if self.cfg.preemption == "recompute":
            self.target[victim] = self.target[victim] + self.post[victim]
            self.prefilled[victim] = 0
            self.post[victim] = 0
        else:
            self.swapped[victim] = True
            blocks_out = -(-(self.prefilled[victim] + self.post[victim]) // self.block)
            blocks_out += self.states
            out_ms = blocks_out * self.cfg.swap_ms_per_block
            self.t += out_ms
            self.busy_ms += out_ms
        return freed

    def retract(self, ids: list[int], in_use: int) -> int:
        """SGLang's retraction: fewest outputs (longest prompt among equals) leave first, to
        the back of the queue (a PD decode instance's to the front: it resumes them before it
        pre-allocates new arrivals, disaggregation/decode.py resume_retracted_reqs), until each
        one left has room for `keep_steps` tokens."""
        reserve, pool, wp = self.reserve, self.pool, self.window_pool
        assert reserve is not None and pool is not None
        target = self.target
        order = sorted(ids, key=lambda j: (self.generated_now(j), -target[j]), reverse=True)
        # the window pool (hybrid SWA) must also hold the next steps' tokens
        window_used = self.window_in_use() if wp is not None else 0
        window_room = wp.tokens if wp is not None else MAX_SIM_COUNT
        while len(order) > 1 and (
            in_use + math.ceil(reserve.keep_steps * len(order) / self.block) > pool
            or window_used + reserve.keep_steps * len(order) > window_room
        ):
            victim = order.pop()
            ids.remove(victim)
            if wp is not None:
                window_used -= self.window_held(victim)
            in_use -= self.evict(victim)
            if reserve.flat_tokens is None:
                self.waiting.append(victim)
            else:  # a PD decode instance resumes its retracted requests before new ones land
                self.waiting.appendleft(victim)
        return in_use

    def relieve_pool(self) -> None:
        """After a step: preempt (vLLM: the most recently admitted first) or retract (SGLang)
        until the running set fits the pool, and note the peak it held."""
        pool, reserve, running = self.pool, self.reserve, self.running
        assert pool is not None
        in_use = self.held_running() if running else 0
        self.preempted_last = in_use > pool or (
            self.window_pool is not None
            and bool(running)
            and self.window_in_use() > self.window_pool.tokens
        )
        if self.preempted_last and reserve is not None:
            in_use = self.retract(running, in_use)
            if reserve.flat_tokens is None:  # a flat reserve (PD decode) has no ratio to raise
                decoded = sum(self.generated_now(j) for j in running)
                budget_out = sum(self.output[j] for j in running)
                self.reserve_ratio = min(
                    1.0, (decoded + reserve.retract_steps * len(running)) / max(1, budget_out)
                )
        while running and in_use > pool:
            victim = running.pop()  # the most recently admitted gives way
            in_use -= self.evict(victim)
            self.waiting.appendleft(victim)
        if running:
            # nothing left the pool: what it holds is what was counted above
            held = self.held_running() if self.preempted_last else in_use
            self.run.peak_blocks = max(self.run.peak_blocks, held)

    # -- the phases of one step -------------------------------------------------------------

    def admit(self) -> float:
        """Admit waiting requests while the running cap and the KV pool allow (SGLang: with
        room kept for the running requests' remaining outputs); the swap-in time, ms."""
        pool, reserve, block = self.pool, self.reserve, self.block
        waiting, running = self.waiting, self.running
        prefilled, post, target, swapped = self.prefilled, self.post, self.target, self.swapped
        swap_ms = 0.0
        in_use = self.held_running() if pool is not None and running else 0
        flat = reserve.flat_tokens if reserve is not None else None
        if reserve is not None and pool is not None:
            # SGLang-style admission: room is kept for the running requests' remaining
            # outputs, times the engine's new-token ratio (a PD decode instance: a flat
            # number of tokens each)
            if flat is not None:
                in_use += math.ceil(flat * len(running) / block)
            else:
                in_use += math.ceil(self.reserve_ratio * self.remaining_running() / block)
        wp = self.window_pool
        window_free = wp.tokens - self.window_in_use() if wp is not None else 0
        while waiting and len(running) < self.max_batch:
            i = waiting[0]
            if wp is not None:
                # the window pool: room for its first chunk or a window, none kept for the
                # running requests' growth
                window_need = wp.admission_need(target[i] - prefilled[i], self.chunk_tokens)
                if window_need >= window_free and running:
                    break
                window_free -= window_need
            if pool is not None:
                tokens = prefilled[i] + post[i] if swapped[i] else target[i]
                if self.cfg.admit_chunk and not swapped[i]:
                    tokens = min(tokens, prefilled[i] + self.budget_tokens)
                need = -(-tokens // block) + self.states
                if reserve is not None:
                    # its whole output budget (clipped), whatever the ratio: the ratio
                    # discounts only requests already running (a PD decode instance: the
                    # same flat reserve as the running ones)
                    extra = min(self.clip, self.output[i]) if flat is None else flat
                    need += -(-extra // block)
                headroom = self.cfg.admit_headroom_blocks if not swapped[i] else 0
                if in_use + need + headroom > pool and (running or in_use):
                    break
                if swapped[i]:
                    swap_ms += need * self.cfg.swap_ms_per_block
                    swapped[i] = False
                in_use += need  # its prompt (and reserve) counts for the next
            running.append(waiting.popleft())
            if prefilled[i] >= target[i]:
                self.start_decoding(i)
            else:
                self.pending.append(i)
        return swap_ms

    def round_saving(self, n_decoding: int) -> float:
        """What a step inside a multi-step round saves of the engine's own time, ms."""
        return self.round_saving_ms + self.round_saving_ms_per_seq * n_decoding

    def prefill_work(self, n_decoding: int) -> dict[int, int]:
        """Prompt tokens each prefilling request runs this step: whole prompts (continuous
        batching), or chunks under the step's token budget (chunked prefill; vLLM mixes them
        with the decode tokens, SGLang's prefill steps run alone); none inside a multi-step
        round."""
        if self.round_left:
            return {}  # inside a multi-step round: the running set decodes, nothing prefills
        target, prefilled = self.target, self.prefilled
        if not self.chunked:
            return {i: target[i] - prefilled[i] for i in self.pending}
        take: dict[int, int] = {}
        # a decoding sequence takes its token of the step's budget, and under speculation the
        # drafts it verifies too (vLLM V1 schedules num_tokens_with_spec)
        per_decode = 1 + (self.cfg.spec_k if self.spec is not None else 0)
        budget = self.budget_tokens - (n_decoding * per_decode if self.mixed else 0)
        # SGLang's PrefillAdder takes no request once the batch's prompt tokens reach
        # max_prefill_tokens (the last one added may pass it)
        cap, taken = self.cfg.prefill_input_cap, 0
        for i in self.pending:
            if budget <= 0 or (cap is not None and taken >= cap):
                break
            left = target[i] - prefilled[i]
            if self.whole and budget < left <= self.budget_tokens:
                break  # the head waits for a step with room for its whole prompt
            got = min(left, self.chunk_tokens, budget)
            take[i] = got
            budget -= got
            taken += got
        return take

    def step_ms(self, n_decoding: int, take: dict[int, int], others: int | None = None) -> float:
        """One step's time with `n_decoding` decode tokens and the prefill `take`, ms
        (`others`: the tokens the ranks in lockstep bring to the MoE layers; None: as many as
        this one's each)."""
        prefill_tokens = sum(take.values())
        factor = self.spec_factor if n_decoding else 1.0
        curve = self.curve
        if curve is None:
            return (
                self.overhead_ms
                + (self.a_ms + self.b_ms * n_decoding) * factor
                + self.prefill_ms * prefill_tokens
            )
        prefilled, cached = self.prefilled, self.cached
        pairs = sum(curve.curve.chunk_pairs(cached[i] + prefilled[i], g) for i, g in take.items())
        decode_tokens = (
            self.decode_base + self.decode_cached + self.clock * n_decoding if n_decoding else 0
        )
        return curve.step_ms(n_decoding, decode_tokens, prefill_tokens, pairs, others) * factor

    def others_tokens(self, decoders: float, prefill_tokens: int) -> int | None:
        """What the other ranks in lockstep bring to this step's MoE layers: each its
        decoders (this rank's x `lockstep_load`; under an open loop, what the arrival rate
        leaves in an engine now, expected_occupancy, with zero rows as often as that is none)
        and, for the share of the time it spends prefilling (steady rate x mean prefill
        step), a prefill of this one's size; all of it before a request has finished (the
        run's first requests reach every rank at once), or in phase (each prefills when this
        one does). Idle ranks' zero rows, where the gather pads a decode step with them, route
        as one token more. None: no ranks in lockstep, or every rank running this step's
        tokens (padded, or in phase and as loaded: the symmetric step)."""
        cfg = self.cfg
        load = cfg.lockstep_load
        if self.groups == 1 or cfg.lockstep_padded or (self.in_phase and load >= 1.0):
            return None
        per_ms = None if self.in_phase else self.prefill_steps_per_ms()
        busy = 1.0 if per_ms is None else min(1.0, per_ms * self.mean_prefill_ms())
        idle = None
        expected = None if self.in_phase else self.expected_occupancy()
        if expected is not None:
            # an open loop: the others' arrivals are not this rank's, so each holds what the
            # arrival rate leaves in an engine at this time, not this rank's count of the moment
            decoders, idle = expected, math.exp(-expected)
        return cfg.lockstep_others(decoders + prefill_tokens * busy, not prefill_tokens, idle)

    def expected_occupancy(self) -> float | None:
        """The requests a rank of an open loop holds at this time in expectation, at most the
        running cap: arrivals at this rank's rate r over its trace's span [a, b], each staying
        its requests' mean sojourn W so far (arrival to last token), leave r x |[t - W, t] and
        [a, b]| in the engine (an M/G/inf count: no lag behind the ramp, none past the drain),
        a Poisson count, idle with chance exp(-mean). None: not an open loop, or its requests
        all arrive at once."""
        if self.cfg.concurrency is not None or self.n < 2 or not self.finished:
            return None
        first, last = self.first_arrival_ms, self.last_arrival_ms
        if last <= first:
            return None
        rate = (self.n - 1) / (last - first)
        t, sojourn = self.t, self.sojourn_ms / self.finished
        overlap = max(0.0, min(t, last) - max(t - sojourn, first))
        return min(float(self.max_batch), rate * overlap)

    def note_prefill(self, dt: float) -> None:
        """Count a prefill step of `dt`."""
        self.prefill_steps += 1
        self.prefill_ms_total += dt

    def mean_prefill_ms(self) -> float:
        """This rank's mean prefill step so far, ms (0 before its first)."""
        return self.prefill_ms_total / max(1, self.prefill_steps)

    def prefill_steps_per_ms(self) -> float | None:
        """Prefill steps a rank starts per ms in the steady state: the requests it finishes
        per ms (as many start) x its prefill steps per prompt. None before a request has
        finished: the run's first requests reach every rank at once."""
        if not (self.finished and self.prompts_done and self.prefill_steps) or self.t <= 0:
            return None
        return self.finished / self.t * self.prefill_steps / self.prompts_done

    def with_foreign(self, dt: float) -> float:
        """A decode-only step of `dt` with the other ranks' prefills landing on it in
        expectation. Each of the G - 1 (x `lockstep_load`, as busy as this one) starts prefill
        steps at this rank's steady rate r, at random, so one within the step with chance
        r x dt; one landing holds the step as long as a mean prefill step P:
        dt + (1 - (1 - r dt)^((G - 1) x load)) x (P - dt)."""
        per_ms = None if self.in_phase else self.prefill_steps_per_ms()
        if per_ms is None:
            return dt
        ranks = (self.groups - 1) * self.cfg.lockstep_load  # the other ranks that prefill
        hit = 1.0 - float(max(0.0, 1.0 - per_ms * dt) ** ranks)
        return dt + hit * max(0.0, self.mean_prefill_ms() - dt)

    def jump(self, dt: float, swap_ms: float, n_decoding: int) -> tuple[int, float]:
        """How many identical decode-only steps run before the next event (a finish, an
        arrival that could be admitted, the pool filling, a multi-step round's end), and the
        mean step over them (the KV read grows by a token per sequence per step)."""
        pool, reserve, clock = self.pool, self.reserve, self.clock
        steps = self.next_finish() - clock
        arrival, nxt = self.arrival, self.nxt
        if nxt < self.n and len(self.running) < self.max_batch and arrival[nxt] < math.inf:
            steps = min(steps, self.received_after(max(1, math.ceil((arrival[nxt] - self.t) / dt))))
        if pool is not None:
            room = pool - (self.held_running() - self.decoding_blocks(clock))

            def fits(more: int, at: int = clock, free: int = room) -> bool:
                return self.decoding_blocks(at + more) <= free

            steps = _steps_within_pool(fits, steps)
        wp = self.window_pool
        if wp is not None:  # a decoding request adds at most a token a step to the window pool
            steps = min(steps, max(1, (wp.tokens - self.window_in_use()) // n_decoding))
        if self.waiting and self.reserve_ratio > (reserve.min_ratio if reserve else 0.0):
            # the decaying ratio may let the queue in mid-jump: look again soon
            steps = min(steps, RESERVE_RECHECK_STEPS)
        if self.multi > 1:
            steps = min(steps, self.round_left)
        if self.curve is not None and steps > 1:
            mid = self.decode_base + self.decode_cached + clock * n_decoding
            mid += n_decoding * (steps - 1) // 2
            others = self.others_tokens(n_decoding, 0)
            dt = self.curve.step_ms(n_decoding, mid, 0, 0.0, others) + swap_ms
            if self.multi > 1:
                dt -= self.round_saving(n_decoding)
        return steps, dt

    def received_after(self, steps: int) -> int:
        """The fewest decode-only steps, at least `steps`, after which the scheduler takes in
        new requests (every step without a receive skipper)."""
        every = self.recv_every
        if every == 1:
            return steps
        first = every - self.recv_count
        if steps <= first:
            return first
        return first + math.ceil((steps - first) / every) * every

    def receives(self) -> bool:
        """Whether this loop takes in the requests that have reached the server."""
        if self.recv_every == 1:
            return True
        if self.recv_count < self.recv_every:
            return False
        self.recv_count = 0
        return True

    def count_towards_recv(self, steps: int, prefilled: bool) -> None:
        """The receive skipper's sum after a step with prefill (its weight) or `steps`
        decode-only ones (one each; a receive passed mid-jump found nothing: the jump stops at
        one that has a request to take)."""
        every = self.recv_every
        if every == 1:
            return
        if prefilled:
            self.recv_count += RECV_PREFILL_WEIGHT
            return
        total = self.recv_count + steps
        if total >= every:
            total = every if total % every == 0 else total % every
        self.recv_count = total

    def decode(self, steps: int, dt: float, n_decoding: int) -> None:
        """Advance the decode clock by `steps` (speculation: each sequence by what it
        accepted) and count the inter-token gaps its tokens saw."""
        reserve = self.reserve
        if reserve is not None:
            self.reserve_ratio = max(
                self.reserve_ratio - self.ratio_decay * steps, reserve.min_ratio
            )
        if self.spec is not None:
            self.speculate(steps)
        self.clock += steps
        itl = self.run.itl_tokens
        if self.stall_ms:  # the first token after unmixed prefill steps waited for them too
            stalled = dt + self.stall_ms
            late = 0
            for i, before in self.joined_stall_ms.items():
                if self.decoding_now[i]:  # not preempted since
                    gap = dt + (self.stall_ms - before)
                    itl[gap] = itl.get(gap, 0) + 1
                    late += 1
            itl[stalled] = itl.get(stalled, 0) + n_decoding - late
            itl[dt] = itl.get(dt, 0) + n_decoding * (steps - 1)
            self.stall_ms = 0.0
            self.joined_stall_ms.clear()
        else:
            itl[dt] = itl.get(dt, 0) + n_decoding * steps

    def speculate(self, steps: int) -> None:
        """Speculative decoding: each decoding sequence emits what the draft had accepted
        (at most what it has left), moved off the shared clock by the difference."""
        assert self.spec is not None
        output, gen_off, post_off = self.output, self.gen_off, self.post_off
        decoding = [i for i in self.running if self.decoding_now[i]]
        remaining = np.asarray([output[i] - gen_off[i] - self.clock for i in decoding])
        drawn = _accepted(self.rng, self.spec, self.cfg.spec_k, len(decoding))
        emitted: list[int] = np.minimum(drawn, remaining).tolist()
        for i, got in zip(decoding, emitted, strict=True):
            self.count_base(i, -1)
            gen_off[i] += got - steps  # the clock adds `steps` to everyone below
            self.rem_base -= got - steps
            post_off[i] += got - steps
            self.count_base(i, 1)
            self.decode_base += got - steps
            self.version[i] += 1
            heapq.heappush(self.heap, (output[i] - gen_off[i], i, self.version[i]))
            self.window_start(i)

    def complete_prefills(self, take: dict[int, int]) -> None:
        """Add this step's prompt tokens; a prompt done samples its first token and decodes."""
        prefilled, target, first = self.prefilled, self.target, self.first
        done_prefill = False
        for i, got in take.items():
            prefilled[i] += got
            if prefilled[i] >= target[i]:
                self.generated[i] += 1
                self.post[i] = 1
                self.prompts_done += 1
                if math.isnan(first[i]):
                    if self.late:
                        first[i] = -math.inf  # sampled: delivered after the next step
                        self.late_first.append(i)
                    else:
                        first[i] = self.t
                    if self.stall_ms and self.output[i] > 1:
                        self.joined_stall_ms[i] = self.stall_ms
                self.start_decoding(i)
                done_prefill = True
        if done_prefill:
            self.pending = [i for i in self.pending if not self.decoding_now[i]]

    def retire(self) -> None:
        """Sequences whose output is done leave; in a closed loop each client sends its next
        request (paced: not before its arrival time)."""
        heap, version, decoding_now = self.heap, self.version, self.decoding_now
        t = self.t
        done: list[int] = []
        while heap:
            due, i, ver = heap[0]
            if ver != version[i] or not decoding_now[i]:
                heapq.heappop(heap)  # stale
                continue
            if due > self.clock:
                break
            heapq.heappop(heap)
            self.stop_decoding(i)
            done.append(i)
            if self.late:
                self.late_finish.append(i)  # delivered after the next step
            else:
                self.deliver_finish(i, t)
        for i in done:  # finished requests leave the running set (a C-level scan each)
            self.running.remove(i)

    def deliver_finish(self, i: int, t: float) -> None:
        """Request i's last token reaches its client at `t`; in a closed loop the client
        sends its next request then (paced: not before that one's arrival time)."""
        self.finish[i] = t
        self.finished += 1
        self.sojourn_ms += t - self.arrival[i]
        if self.released < self.n:
            released = self.released
            go = self.sent[released]
            self.arrival[released] = self.send(released, t if t > go else go)
            self.released += 1

    def deliver_late(self, t: float) -> None:
        """The last step's first tokens and finishes, delivered at `t` (vLLM V0's async output
        processing hands them over when the step after them ends)."""
        first = self.first
        for i in self.late_first:
            first[i] = t
        for i in self.late_finish:
            self.deliver_finish(i, t)
        self.late_first, self.late_finish = [], []

    def step(self) -> None:
        """One scheduler iteration (or a jump of identical decode-only ones)."""
        arrival, waiting, running, pending = self.arrival, self.waiting, self.running, self.pending
        if self.receives():
            while self.nxt < self.n and arrival[self.nxt] <= self.t:
                waiting.append(self.nxt)
                self.nxt += 1
        if self.round_left and len(running) == len(pending):
            self.round_left = 0  # nothing left decoding: the round ends early
        if not running and not waiting:
            self.recv_count = self.recv_every  # idle: the loop spins and takes it in at once
            self.run.idle_ms += max(0.0, arrival[self.nxt] - self.t)
            self.t = max(self.t, arrival[self.nxt])
            if self.reserve is not None:
                # SGLang's idle housekeeping resets the new-token ratio (scheduler.py
                # self_check_during_idle in 0.5.2, on_idle in 0.5.13)
                self.reserve_ratio = self.reserve.init_ratio
            return
        swap_ms = 0.0
        # vLLM's scheduler admits no waiting request in a step that preempted one (v1
        # core/sched/scheduler.py: waiting requests are scheduled only `if not preempted_reqs`),
        # so a full pool does not thrash admitting and evicting the same requests.
        if (
            waiting
            and len(running) < self.max_batch
            and not self.preempted_last
            and not self.round_left
        ):
            swap_ms = self.admit()
        if not running:  # the head of the queue waits for blocks nothing holds: cannot happen
            raise AssertionError("KV pool admits nothing although it is empty")
        if len(running) > self.run.peak_running:
            self.run.peak_running = len(running)

        n_decoding = len(running) - len(self.pending)
        take = self.prefill_work(n_decoding)
        waiting_decoders = 0
        landed = self.cfg.prompts_landed  # a decode pool's prompts are computed elsewhere
        others = self.others_tokens(n_decoding, 0 if landed else sum(take.values()))
        if take and not self.mixed:
            waiting_decoders, n_decoding = n_decoding, 0  # decoders wait for this prefill step
        dt = self.step_ms(n_decoding, take, others)
        if take and self.groups > 1 and not landed:
            self.note_prefill(dt)
        multi = self.multi
        if multi > 1:
            if not self.round_left:  # a round starts: V0 runs an unmixed prefill as a round of one
                self.round_left = 1 if take and not self.mixed else multi
            if self.round_left > 1 or self.mixed or not take:
                dt -= self.round_saving(n_decoding)
        dt += swap_ms
        if self.late_first or self.late_finish:
            self.deliver_late(self.t + dt)  # the last step's outputs, as this one ends

        steps = 1
        if not take and self.spec is None and n_decoding:
            # Identical decode-only steps until the next event: jump there in one move.
            steps, dt = self.jump(dt, swap_ms, n_decoding)
        if self.groups > 1 and not take and n_decoding:
            dt = self.with_foreign(dt)  # the other ranks' prefills hold some of these steps
        if multi > 1:
            self.round_left -= steps
            saved = self.round_saving_ms if self.round_left or self.mixed or not take else 0.0
            self.overhead_total_ms += (self.overhead_ms - saved) * steps
        else:
            self.overhead_total_ms += self.overhead_ms * steps
        self.t += dt * steps
        self.busy_ms += dt * steps
        self.slot_ms += len(running) * dt * steps
        self.steps_total += steps

        if n_decoding:
            self.decode(steps, dt, n_decoding)
        elif waiting_decoders:
            self.stall_ms += dt
        self.count_towards_recv(steps, bool(take))
        if take:
            self.complete_prefills(take)
        self.retire()
        if self.pool is not None:
            self.relieve_pool()
        if (self.late_first or self.late_finish) and not (self.running or self.waiting):
            self.deliver_late(self.t)  # nothing left unfinished: the engine drains at once

    def run_all(self) -> None:
        """Steps until every request has arrived and finished."""
        while self.nxt < self.n or self.waiting or self.running:
            self.step()

    def write_back(self) -> None:
        """The loop's totals and per-request state, into the run."""
        run = self.run
        run.busy_ms += self.busy_ms
        run.overhead_ms += self.overhead_total_ms
        run.slot_ms += self.slot_ms
        run.steps += self.steps_total
        run.target[:] = self.target
        run.prefilled[:] = self.prefilled
        run.post[:] = self.post
        run.generated[:] = self.generated
        run.swapped[:] = self.swapped
        run.first_ms[:] = self.first
        run.finish_ms[:] = self.finish
        run.arrival_ms = np.asarray(self.arrival, dtype=np.float64) - np.asarray(self.delay)


def _unbounded(
    run: RunState,
    cost: CostModel,
    cfg: SimConfig,
    trace: Trace,
    delay_ms: NDArray[np.float64] | None,
) -> None:
    """`_iteration_level` where nothing bounds the running set but max_batch: no KV pool (so
    no preemption), no speculation, one step per scheduling pass, a linear cost. Each request
    is admitted, prefilled and decoded once, so its finish is fixed when it starts decoding and
    the per-event work is a few list operations; the result is the general loop's, float for
    float (tests/test_simulate.py runs both)."""
    n = run.arrival_ms.size
    delay: list[float] = [0.0] * n if delay_ms is None else delay_ms.tolist()
    arrival: list[float] = (run.arrival_ms + (0.0 if delay_ms is None else delay_ms)).tolist()
    arrival, released, sent, send = _clients(run, cfg, trace, arrival, delay)
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
    joined_stall_ms: list[float] = []  # the stall before each first token that came out within it
    busy_ms = slot_ms = stall_ms = idle_ms = overhead_total_ms = 0.0
    steps_total = 0
    t = 0.0
    nxt = 0
    clock = 0  # decode steps run so far
    waiting: deque[int] = deque()
    running = peak_running = 0  # how many are running (admitted, not finished); the most
    pending: list[int] = []  # running, prompt not yet fully prefilled (admission order)
    heap: list[tuple[int, int]] = []  # (clock value at which it finishes, id)

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
        if running > peak_running:
            peak_running = running
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
                    for before in joined_stall_ms:  # first token within the wait: the rest of it
                        itl[dt + (stall_ms - before)] += 1
                    itl[dt + stall_ms] += n_decoding - len(joined_stall_ms)
                    itl[dt] += n_decoding * (steps - 1)
                    stall_ms = 0.0
                    joined_stall_ms = []
                else:
                    itl[dt] += n_decoding * steps
                # retire: requests whose last token is due by `clock` finish at `t`; in a
                # closed loop each frees its client, whose next request goes then (paced: not
                # before its time). Written out twice, not a closure: a closure's variables are
                # cells, slower at every use in this loop (13% of a million-request run)
                while heap and heap[0][0] <= clock:
                    finish[heappop(heap)[1]] = t
                    running -= 1
                    if released < n:
                        go = sent[released]
                        arrival[released] = send(released, t if t > go else go)
                        released += 1
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
            # a step with prefill work decodes only when mixed, and mixed steps never stall:
            # stall_ms is 0 here (it is spent by the decode-only jumps above)
            clock += 1
            itl[dt] += n_decoding
        elif waiting_decoders:
            stall_ms += dt
        done_prefill = 0
        for i, got in take:
            prefilled[i] += got
            if prefilled[i] >= target[i]:
                first[i] = t
                if stall_ms and output[i] > 1:
                    joined_stall_ms.append(stall_ms)
                heappush(heap, (clock + output[i] - 1, i))
                done_prefill += 1
        if done_prefill == len(pending):
            pending = []  # the usual case: every pending prompt finished this step
        elif done_prefill:
            pending = [i for i in pending if prefilled[i] < target[i]]
        # retire, as in the decode jumps above
        while heap and heap[0][0] <= clock:
            finish[heappop(heap)[1]] = t
            running -= 1
            if released < n:
                go = sent[released]
                arrival[released] = send(released, t if t > go else go)
                released += 1
    for gap_ms, tokens in itl.items():
        run.itl_tokens[gap_ms] = run.itl_tokens.get(gap_ms, 0) + tokens
    run.idle_ms += idle_ms
    run.busy_ms += busy_ms
    run.overhead_ms += overhead_total_ms
    run.slot_ms += slot_ms
    run.peak_running = max(run.peak_running, peak_running)
    run.steps += steps_total
    run.prefilled[:] = prefilled
    run.post[:] = run.output
    run.generated[:] = run.output
    run.first_ms[:] = first
    run.finish_ms[:] = finish
    run.arrival_ms = np.asarray(arrival, dtype=np.float64) - np.asarray(delay)


def _clients(
    run: RunState, cfg: SimConfig, trace: Trace, arrival: list[float], delay: list[float]
) -> tuple[list[float], int, list[float], Callable[[int, float], float]]:
    """Arrival times as the scheduler sees them, how many requests are released, the earliest
    each may be sent, and `send(i, t)`: when request i sent at t reaches the scheduler (its
    wait at the front door joins its delay). Open loop: the trace's (all released). Closed
    loop: the first N requests go at once (paced: at their arrival times), each later one when
    a client's last request finishes (set in the loop, in finish order), paced ones not before
    their time."""
    n = len(arrival)
    door = Door(cfg.front_door.service_ms(trace.prompt_tokens)) if cfg.front_door else None

    def send(i: int, t: float) -> float:
        if door is not None:
            delay[i] += door.wait(i, t)
        return t + delay[i]

    if cfg.concurrency is None:
        if door is None:
            return arrival, n, [], send
        sent_ms = run.arrival_ms.tolist()
        return [send(i, sent_ms[i]) for i in range(n)], n, [], send
    released = min(cfg.concurrency, n)
    sent: list[float] = run.arrival_ms.tolist() if cfg.paced else [0.0] * n
    first = [send(i, sent[i]) for i in range(released)]
    return first + [math.inf] * (n - released), released, sent, send


def _steps_within_pool(fits: Callable[[int], bool], steps: int) -> int:
    """Largest number of decode steps (<= steps) after which the running set still fits
    (`fits(s)`: whether it does after s more steps; monotone), at least one."""
    if fits(steps):
        return steps
    return largest_passing(1, steps, fits)  # at least one step


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
