"""Prefill/decode disaggregation: x prefill instances and y decode instances with the KV moved
between them.

A request is routed round-robin to a prefill instance, which runs prefill-only steps (its
queue, its chunks; a prefix its cache holds skipped, as the trace's cached tokens say) and
samples the first token; its prompt's KV then crosses the link (less what the decode
instance's own prefix cache holds: Served) to a decode instance (round-robin), which admits it
when it lands and runs decode steps that no prefill interrupts. The client sees the first
token when the decode instance emits it, so TTFT = prefill queueing + prefill + transfer + the
decode instance's admission; TPOT and ITL are the decode pool's. A closed loop couples the two
stages (a client sends its next request when a decode instance finishes its last), so the
stages are re-run with the arrivals the previous pass's finishes imply until they settle.
"""

from __future__ import annotations

import math
from typing import Any, NamedTuple

import numpy as np
from numpy.typing import NDArray
from pydantic import BaseModel, ConfigDict, Field

from planner.sim.config import SimConfig
from planner.sim.cost import CurveCost
from planner.sim.engine import RunState, execute
from planner.sim.workload import Trace

# Closed-loop passes: from the first-generation guess the arrivals settle to within a
# millisecond in ~20 passes on the shipped disaggregated rows (gpt-oss-120b, 500 requests, 32
# clients: 23 passes, the makespan moving 4% after pass 10); past this the last pass is used.
MAX_CLOSED_LOOP_PASSES = 30
SETTLED_MS = 1.0
MAX_POOL_RANKS = 1024


class DisaggLayout(BaseModel):
    """`prefill` instances of TP `prefill_tp` and `decode` instances of TP `decode_tp`."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    prefill: int = Field(gt=0, le=1024)
    decode: int = Field(gt=0, le=1024)
    # wide expert parallelism runs instances of up to hundreds of GPUs (DeepEP is measured to
    # EP 256); the cap keeps the pools' sizes finite
    prefill_tp: int = Field(default=1, gt=0, le=MAX_POOL_RANKS)
    decode_tp: int = Field(default=1, gt=0, le=MAX_POOL_RANKS)
    prefill_ep: int = Field(default=1, gt=0, le=MAX_POOL_RANKS, description="1, or the pool's TP")
    decode_ep: int = Field(default=1, gt=0, le=MAX_POOL_RANKS, description="1, or the pool's TP")
    prefill_dp: int = Field(
        default=1,
        gt=0,
        le=MAX_POOL_RANKS,
        description="data-parallel ranks (schedulers) per prefill instance",
    )
    decode_dp: int = Field(
        default=1,
        gt=0,
        le=MAX_POOL_RANKS,
        description="data-parallel ranks (schedulers) per decode instance",
    )
    dp_within_tp: bool = Field(
        default=True,
        description="the DP ranks share the instance's TP GPUs (SGLang's attention-DP groups); "
        "False: each rank has TP GPUs of its own (vLLM --data-parallel-size)",
    )
    link: str | None = Field(
        default=None,
        description="the catalog interconnect the KV crosses between the pools (None: the "
        "card's own, NVLink inside a node and its NIC between nodes)",
    )
    transfer_backend: str | None = Field(
        default=None, description="SGLang's --disaggregation-transfer-backend (None: its default)"
    )
    prefill_args: str | None = Field(
        default=None, description="the prefill pool's own engine flags, as on its line"
    )
    decode_args: str | None = Field(
        default=None, description="the decode pool's own engine flags, as on its line"
    )

    @property
    def gpus(self) -> int:
        """GPUs of both pools."""
        if self.dp_within_tp:
            return self.prefill * self.prefill_tp + self.decode * self.decode_tp
        return (
            self.prefill * self.prefill_tp * self.prefill_dp
            + self.decode * self.decode_tp * self.decode_dp
        )

    @property
    def prefill_schedulers(self) -> int:
        """Prefill schedulers: one per instance, or per attention-DP group."""
        return self.prefill * self.prefill_dp

    @property
    def decode_schedulers(self) -> int:
        """Decode schedulers: one per instance, or per attention-DP group."""
        return self.decode * self.decode_dp

    @property
    def label(self) -> str:
        """xPyD, as the engines' docs write it."""
        return f"{self.prefill}P{self.decode}D"


class Served(NamedTuple):
    """A trace's shared prefixes as the pools serve them, per request: the wait at its
    prefill instance for the prefix to load from a CPU tier (ms), and the prompt tokens its
    decode instance already holds in its own prefix cache (vLLM's), which it neither receives
    nor stores again."""

    delay_ms: NDArray[np.float64]
    decode_cached: NDArray[np.int64]

    def head(self, n: int) -> Served:
        """The first `n` requests'."""
        return Served(self.delay_ms[:n], self.decode_cached[:n])


def parse_layout(text: str) -> tuple[int, int]:
    """'1P3D' / '1p3d' -> (1, 3); ValueError otherwise."""
    t = text.strip().lower()
    if "p" not in t or not t.endswith("d"):
        raise ValueError(text)
    p_text, d_text = t[:-1].split("p", 1)
    return int(p_text), int(d_text)


class DecodeOnlyCost(CurveCost):
    """A decode instance's step: the KV of a landing request arrives over the link, so its
    prompt tokens cost the decode pool nothing; every step is decode tokens only. Under
    data-parallel attention the other groups bring what `lockstep` says of this one's
    decoders to the MoE layers (SimConfig.lockstep_others where its lockstep_load is below 1;
    else what the loop passes: under an open loop, the load its arrival rate leaves in each
    group, planner.sim.engine `expected_occupancy`; None, or a padded decode step: as many
    each)."""

    def __init__(self, inner: CurveCost, lockstep: SimConfig | None = None) -> None:
        super().__init__(
            inner.curve, f"{inner.source} (decode pool)", inner.spec_k, inner.spec_draft_cost
        )
        self.lockstep = lockstep

    def step_ms(
        self,
        decode_seqs: int,
        decode_tokens: int,
        prefill_tokens: int,
        prefill_pairs: float,
        others: int | None = None,
    ) -> float:
        """Decode tokens only (a step that only lands KV costs one token's step)."""
        seqs, lockstep = max(1, decode_seqs), self.lockstep
        mine = others
        if lockstep is not None and lockstep.lockstep_load < 1.0:
            mine = lockstep.lockstep_others(seqs, decode_only=True)
        return super().step_ms(seqs, decode_tokens, 0, 0.0, mine)


def round_robin(n: int, ways: int) -> list[NDArray[np.int64]]:
    """Each instance's requests, round-robin: request i goes to instance i % ways."""
    ids = np.arange(n)
    return [ids[ids % ways == k] for k in range(ways)]


def run(
    trace: Trace,
    layout: DisaggLayout,
    *,
    prefill_cost: CurveCost,
    prefill_cfg: SimConfig,
    decode_cost: CurveCost,
    decode_cfg: SimConfig,
    transfer_ms: NDArray[np.float64],
    concurrency: int | None,
    served: Served | None = None,
    paced: bool = False,
) -> tuple[RunState, dict[str, Any]]:
    """Both pools over the trace; one RunState as the client sees it, and per-pool figures.
    `served`: the shared prefixes as the pools serve them (None: no shared prefix). `paced`:
    the closed loop's requests go no earlier than their arrival times (vllm bench serve
    --request-rate R --max-concurrency N)."""
    n = trace.size
    scheduled = trace.arrival_s * 1000.0
    # a closed loop's requests go when a client frees (paced: not before their arrival times)
    floor = scheduled if paced else np.zeros(n)
    arrival = scheduled if concurrency is None else floor.copy()
    passes = 0
    if concurrency is not None and concurrency < n and not paced:
        # First guess: the first N requests run alone (the loop's first generation); later
        # ones follow at the rate N clients sustain at that latency. Each pass then moves
        # the arrivals to the finishes the last pass implied.
        first = trace.subset(np.arange(concurrency))
        head = None if served is None else served.head(concurrency)
        generation, _ = _once(
            first, np.zeros(concurrency), layout, prefill_cost, prefill_cfg, decode_cost,
            decode_cfg, transfer_ms[:concurrency], head,
        )  # fmt: skip
        passes += 1
        e2e = float(np.mean(generation.finish_ms))
        arrival[concurrency:] = e2e + np.arange(n - concurrency) * e2e / concurrency
    state: RunState | None = None
    info: dict[str, Any] = {}
    while True:
        passes += 1
        state, info = _once(
            trace, arrival, layout, prefill_cost, prefill_cfg, decode_cost, decode_cfg,
            transfer_ms, served,
        )  # fmt: skip
        if concurrency is None or concurrency >= n or passes >= MAX_CLOSED_LOOP_PASSES:
            break
        finishes = np.sort(state.finish_ms)
        implied = np.zeros(n)
        implied[concurrency:] = finishes[: n - concurrency]
        implied = np.maximum(implied, floor)
        if float(np.max(np.abs(implied - arrival))) < SETTLED_MS:
            break
        arrival = implied
    assert state is not None
    info["closed_loop_passes"] = passes
    return state, info


def _once(
    trace: Trace,
    arrival_ms: NDArray[np.float64],
    layout: DisaggLayout,
    prefill_cost: CurveCost,
    prefill_cfg: SimConfig,
    decode_cost: CurveCost,
    decode_cfg: SimConfig,
    transfer_ms: NDArray[np.float64],
    served: Served | None,
) -> tuple[RunState, dict[str, Any]]:
    """One pass of both pools at given arrival times."""
    n = trace.size
    order = np.argsort(arrival_ms, kind="stable")
    first_prefill = np.full(n, np.nan)
    pre_cfg = prefill_cfg.model_copy(update={"concurrency": None})
    preemptions = 0
    for ids in round_robin(n, layout.prefill_schedulers):
        if ids.size == 0:  # fewer requests than instances: this one idles
            continue
        ids = order[np.isin(order, ids)]  # this instance's requests, in arrival order
        sub = Trace(
            arrival_ms[ids] / 1000.0,
            trace.prompt_tokens[ids],
            np.ones(ids.size, dtype=np.int64),  # the prefill instance samples the first token
            trace.cached_prefix_tokens[ids],
        )
        got = execute(sub, prefill_cost, pre_cfg, None if served is None else served.delay_ms[ids])
        first_prefill[ids] = got.first_ms
        preemptions += got.preemptions
    landing = first_prefill + transfer_ms
    first = np.full(n, np.nan)
    finish = np.full(n, np.nan)
    itl: dict[float, int] = {}
    peak = 0
    dec_cfg = decode_cfg.model_copy(  # requests land from the prefill pool: no client path
        update={
            "concurrency": None,
            "mixed": True,
            "step_token_budget": 2**31 - 1,
            "request_path_ms": 0.0,
        }
    )
    dec_cfg = dec_cfg.model_copy(update={"chunk_tokens": dec_cfg.step_token_budget})
    landing_order = np.argsort(landing, kind="stable")
    peak_running = 0
    for ids in round_robin(n, layout.decode_schedulers):
        if ids.size == 0:
            continue
        ids = landing_order[np.isin(landing_order, ids)]
        sub = Trace(
            landing[ids] / 1000.0,
            trace.prompt_tokens[ids],
            trace.output_tokens[ids],
            np.zeros(ids.size, dtype=np.int64) if served is None else served.decode_cached[ids],
        )
        got = execute(sub, decode_cost, dec_cfg)
        first[ids] = got.first_ms
        finish[ids] = got.finish_ms
        preemptions += got.preemptions
        peak = max(peak, got.peak_blocks)
        peak_running = max(peak_running, got.peak_running)
        for gap, count in got.itl_tokens.items():
            itl[gap] = itl.get(gap, 0) + count
    state = RunState(trace)
    state.arrival_ms = np.asarray(arrival_ms, dtype=np.float64)
    state.first_ms = first
    state.finish_ms = finish
    state.itl_tokens = itl
    state.preemptions = preemptions
    state.peak_blocks = peak
    state.peak_running = peak_running  # the busiest decode scheduler's
    state.generated = trace.output_tokens.copy()
    info = {
        "median_prefill_done_ms": float(np.median(first_prefill - arrival_ms)),
        "median_transfer_ms": float(np.median(transfer_ms)),
        "median_decode_admission_ms": float(np.median(first - landing)),
    }
    if math.isnan(info["median_decode_admission_ms"]):
        info["median_decode_admission_ms"] = 0.0
    return state, info
