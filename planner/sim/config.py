"""What a simulation runs under: the scheduler's settings (SimConfig), the admission and pools
beside the KV cache (SGLang's reserve, a sliding-window pool), and the bounds every setting
keeps to."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from planner.sim.door import FrontDoor

# Swapping one 16-token block of a 70B-class model (5 MiB) over PCIe Gen5 x16 at ~50 GB/s
# effective takes ~0.1 ms each way: a named assumption for --preemption swap.
DEFAULT_SWAP_MS_PER_BLOCK = 0.1
# Upper bounds on cost terms and scheduler sizes, each far beyond any GPU or engine, so every
# simulated time stays a finite float: an hour per step or per token is not a serving system,
# and no engine schedules more than 2^31 sequences, tokens or blocks in one step.
MAX_COST_MS = 3.6e6
MAX_SIM_COUNT = 2**31
# Speculative k beyond 64 drafted tokens is not a configuration any engine accepts.
MAX_SPEC_K = 64
# vLLM V0 multi-step rounds: the engine's own docs and benchmarks use 8-16 steps; 256 bounds
# the setting far above any published use.
MAX_MULTI_STEP = 256


class ReserveAdmission(BaseModel):
    """SGLang's admission: a request is admitted only while the pool keeps its own prompt and
    whole output budget free, plus `ratio` x the remaining output of every running request.
    The ratio starts at `init_ratio` (and returns there whenever the server goes idle) and
    falls by (init - min) / `decay_steps` per decode step to `min_ratio`, so a server that has
    not run out of memory admits more and more; when a decode step finds no free page,
    requests are retracted (fewest outputs first, longest prompt among equals) until each one
    left has room for `keep_steps` more tokens, they go to the back of the queue to be
    recomputed, and the ratio is reset to (decoded + retract_steps x running) / their output
    budgets (python/sglang/srt/managers/scheduler.py update_running_batch and on_idle,
    schedule_batch.py retract_decode, schedule_policy.py PrefillAdder add_one_req)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    init_ratio: float = Field(ge=0, le=1)
    min_ratio: float = Field(ge=0, le=1)
    decay_steps: int = Field(ge=1, le=MAX_SIM_COUNT)
    retract_steps: int = Field(ge=0, le=MAX_SIM_COUNT)
    keep_steps: int = Field(
        default=1,
        ge=1,
        le=MAX_SIM_COUNT,
        description="tokens of room per request a retraction leaves: 1 (the next decode step)",
    )
    clip_tokens: int = Field(
        gt=0, le=MAX_SIM_COUNT, description="a request's remaining output counts at most this"
    )
    flat_tokens: int | None = Field(
        default=None,
        ge=0,
        le=MAX_SIM_COUNT,
        description="a PD decode instance's admission: every running request, and the new one "
        "beside its prompt, keeps this many tokens free instead of the ratio of its remaining "
        "output (its whole output for the new one)",
    )


class WindowPool(BaseModel):
    """SGLang's second KV pool for a hybrid sliding-window model: its window layers keep their
    tokens in a pool of `tokens` (--swa-full-tokens-ratio, 0.8, of the full layers' pool:
    pool_configurator.py _solve_pool_sizes). A running request holds its prompt there whole
    (the radix cache locks it until the request ends) and its decoded tokens until they fall
    a window behind, freed only every `window` decode steps (schedule_batch.py
    maybe_evict_swa, SGLANG_SWA_EVICTION_INTERVAL_MULTIPLIER 1.0). A new request is admitted
    while the pool keeps max(its chunk, window) + a page free (schedule_policy.py
    _swa_budget_for_req), nothing kept for the running requests' growth, so a decode step
    that finds the pool full retracts as the full pool's does (read in SGLang 0.5.13)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    tokens: int = Field(gt=0, le=MAX_SIM_COUNT)
    window: int = Field(gt=0, le=MAX_SIM_COUNT)
    page: int = Field(default=1, gt=0, le=MAX_SIM_COUNT)

    @model_validator(mode="after")
    def _page_within_window(self) -> WindowPool:
        """A page no larger than the window (SGLang's windows are 128 tokens and up, its pages
        64 at most)."""
        if self.page > self.window:
            raise ValueError(f"a {self.page}-token page exceeds the {self.window}-token window")
        return self

    def decoded_held(self, decoded: int) -> int:
        """Decoded tokens still in the pool after `decoded` decode steps: all of them until
        the eviction at step 2 x window + 1, then a window and a page plus what has been
        decoded since the last eviction."""
        window = self.window
        if decoded <= 2 * window:
            return decoded
        return decoded - ((decoded - 1) // window - 1) * window + self.page

    def peak_held(self, output: int) -> int:
        """The most decoded tokens a request of `output` tokens holds at once: all of them up
        to two windows, then at most two windows and a page (just before each eviction)."""
        window = self.window
        if output <= 2 * window:
            return output
        return min(2 * window + self.page, max(2 * window, output - window + self.page))

    def admission_need(self, prompt_left: int, chunk_tokens: int) -> int:
        """Room a new request must find: its first chunk, at least a window, and a page."""
        return max(min(prompt_left, chunk_tokens), self.window) + self.page


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
    front_door: FrontDoor | None = Field(
        default=None,
        description="the serial per-request work of the client and the API server: a burst "
        "of requests reaches the scheduler one service time apart; TTFT counts the wait (the "
        "service itself is inside `request_path_ms`)",
    )
    reserve: ReserveAdmission | None = Field(
        default=None,
        description="SGLang's admission and retraction (a new-token ratio kept free for the "
        "running requests' outputs); None: vLLM's (admit on the prompt's blocks, preempt the "
        "newest to the queue's front)",
    )
    window_pool: WindowPool | None = Field(
        default=None,
        description="SGLang's sliding-window pool beside the full one (hybrid SWA models); "
        "admission and retraction watch both",
    )
    mixed: bool = Field(
        default=True,
        description="prefill chunks share a step with the decode tokens (vLLM); False: a step "
        "that prefills decodes nothing (SGLang without --enable-mixed-chunk)",
    )
    whole_prompts: bool = Field(
        default=False,
        description="a prompt is prefilled whole in one step or waits for a step with room for "
        "it, first in line first (vLLM with chunked prefill off, and V0's multi-step rounds, "
        "which do not chunk prompts); False: prompts are split into chunks under the budget",
    )
    admit_chunk: bool = Field(
        default=False,
        description="a request is admitted on the KV blocks of its first chunk, the rest "
        "allocated chunk by chunk (vLLM V1: allocate_slots for the tokens it schedules; a "
        "prefill that later finds no room preempts the newest running request); False: on its "
        "whole prompt's (vLLM V0's can_allocate, SGLang)",
    )
    admit_headroom_blocks: int = Field(
        default=0,
        ge=0,
        le=MAX_SIM_COUNT,
        description="blocks a new admission must leave free (vLLM V0's watermark, 1% of the "
        "pool: block_manager.py can_allocate)",
    )
    state_blocks_per_seq: int = Field(
        default=0,
        ge=0,
        le=MAX_SIM_COUNT,
        description="blocks each running sequence holds whatever its length, beside a block "
        "per block_tokens of it (a vLLM V1 pool's Mamba / linear-attention state blocks, "
        "sliding windows and local chunks: planner.core.engines.vllm.grouped_pool)",
    )
    outputs_one_step_late: bool = Field(
        default=False,
        description="a step's tokens reach the client when the next step ends (vLLM V0's "
        "async output processing); when nothing is left unfinished they go at once",
    )
    lockstep_groups: int = Field(
        default=1,
        ge=1,
        le=MAX_SIM_COUNT,
        description="data-parallel ranks of a MoE model that step together (SGLang's "
        "data-parallel attention, vLLM's DP engine cores): the run is one rank's, and the "
        "others, as loaded as it, prefill as often; a prefill on any rank holds every rank's "
        "step, and its MoE layers meet the other ranks' tokens",
    )
    lockstep_padded: bool = Field(
        default=False,
        description="with `lockstep_groups`: every rank's forward is padded to the most tokens "
        "any rank runs, so a prefill step is the same on every rank (vLLM before 0.17); False: "
        "each runs its own tokens and the MoE layers meet their sum (SGLang, vLLM 0.17 on)",
    )
    lockstep_load: float = Field(
        default=1.0,
        ge=0.0,
        le=1.0,
        description="with `lockstep_groups`: the other ranks' requests, each rank's as a share "
        "of this one's (a closed loop of fewer clients than the ranks hold at this rank's "
        "share: 4 over 8 ranks leaves 4 idle, 3 / 7 of a busy one each); 1: as loaded",
    )
    lockstep_zero_rows: bool = Field(
        default=False,
        description="where a rank is idle (a closed loop's `lockstep_load` below 1, an open "
        "loop's idle share): a decode step pads it to the busiest one's rows with zeros, which "
        "route to the same experts as one token would (SGLang's gather without an all-to-all "
        "backend, vLLM's model runner V2)",
    )
    lockstep_decode_padded: bool = Field(
        default=False,
        description="with `lockstep_groups`: a decode step pads every rank to the busiest "
        "one's rows with ids that route as real tokens (vLLM's V1 model runner), so it stays "
        "the symmetric one whatever `lockstep_load`",
    )
    prompts_landed: bool = Field(
        default=False,
        description="a disaggregated decode instance: its requests' KV arrives from the "
        "prefill pool, so a step computes none of their prompt tokens, and ranks in lockstep "
        "wait on no prefill of another's",
    )
    scheduler_steps: int = Field(
        default=1,
        ge=1,
        le=MAX_MULTI_STEP,
        description="vLLM V0's --num-scheduler-steps: one scheduling pass runs this many "
        "decode steps; requests join and prefill only between rounds, and the engine's "
        "per-step overhead is paid once per round",
    )
    prefill_input_cap: int | None = Field(
        default=None,
        gt=0,
        le=MAX_SIM_COUNT,
        description="SGLang's max_prefill_tokens: a chunked prefill step takes no further "
        "request once its prompt tokens reach this (the last one taken may pass it, up to its "
        "chunk); None: the token budget alone",
    )
    recv_interval: int = Field(
        default=1,
        ge=1,
        description="SGLang's --scheduler-recv-interval: after decode-only steps the scheduler "
        "takes in new requests every N of them (at once after a step with prefill, or idle)",
    )

    def lockstep_others(
        self, tokens: float, decode_only: bool, idle: float | None = None
    ) -> int | None:
        """The tokens the other ranks in lockstep bring to the MoE layers beside `tokens` of
        this rank's: `lockstep_load` of them each, and, in a decode-only step, the zero rows a
        padding gather adds for an idle rank (`lockstep_zero_rows`), which route as one token:
        always below a load of 1 (a closed loop leaves ranks idle); given `idle`, each rank's
        idle share where the ranks fill independently, with the chance that any of them idles.
        None: as many as this rank's each (a decode step `lockstep_decode_padded`)."""
        if decode_only and self.lockstep_decode_padded:
            return None
        others = self.lockstep_groups - 1
        if idle is None:
            idle = 1.0 if self.lockstep_load < 1.0 else 0.0
        else:
            idle = 1.0 - (1.0 - idle) ** others
        padded = idle if self.lockstep_zero_rows and decode_only else 0.0
        return round(others * self.lockstep_load * tokens + padded)

    @model_validator(mode="after")
    def _window_pool_is_sglangs(self) -> SimConfig:
        """The window pool is SGLang's: it needs the full pool and SGLang's admission."""
        if self.window_pool is not None and (self.kv_blocks is None or self.reserve is None):
            raise ValueError("a window pool runs beside a KV pool, under SGLang's admission")
        return self
