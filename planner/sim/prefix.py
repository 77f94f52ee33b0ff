"""A tiered prefix cache: which requests find their prefix on the GPU, in a CPU tier, or nowhere.

A share of requests opens with one of N shared prefixes (documents, system prompts, earlier
turns), each `tokens` long, drawn uniformly. Both tiers are LRU over prefixes, the CPU tier
inclusive (vLLM's OffloadingConnector and LMCache store every computed block; HiCache writes
through), so a prefix is found in a tier when the distinct prefixes used since its last use
(its LRU stack distance) fit in that tier beside it. A GPU hit skips the prefix's prefill; a CPU
hit skips it too but waits for the prefix's KV to cross the host link first; a miss prefills.
"""

from __future__ import annotations

import numpy as np
from numpy.typing import NDArray
from pydantic import BaseModel, ConfigDict, Field

from planner.sim.workload import Trace

# No prefix: the request's prompt is its own.
NO_PREFIX = -1


class PrefixShare(BaseModel):
    """`share` of requests open with one of `prefixes` shared prefixes of `tokens` tokens."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    share: float = Field(ge=0, le=1)
    tokens: int = Field(gt=0, le=2**24)
    prefixes: int = Field(default=1, gt=0, le=10**6)

    @property
    def mean_tokens(self) -> float:
        """Prefix tokens per request on average (the prompts open with them)."""
        return self.share * self.tokens


class TierHits(BaseModel):
    """How the requests' prefixes were served."""

    model_config = ConfigDict(extra="forbid")

    requests_with_prefix: int
    gpu_hits: int
    cpu_hits: int
    misses: int
    working_set_tokens: int = Field(description="every distinct prefix, tokens")
    gpu_room_tokens: int
    cpu_tier_tokens: int
    load_ms_per_cpu_hit: float


def assign(n: int, share: PrefixShare, rng: np.random.Generator) -> NDArray[np.int64]:
    """The prefix each request opens with (NO_PREFIX for none), seeded."""
    has = rng.random(n) < share.share
    ids = rng.integers(0, share.prefixes, n)
    return np.where(has, ids, NO_PREFIX).astype(np.int64)


def prefix_ids(n: int, share: PrefixShare, seed: int) -> NDArray[np.int64]:
    """The prefix each of `n` requests opens with, drawn from `seed` (NO_PREFIX: none)."""
    return assign(n, share, np.random.default_rng(seed + 1))


def stack_distances(ids: NDArray[np.int64]) -> NDArray[np.int64]:
    """Distinct other prefixes used since each request's prefix was last used (-1: first use
    or no prefix): the marks of last uses after this prefix's own, counted in a Fenwick tree
    over request positions (n log n)."""
    n = ids.size
    out = np.full(n, -1, dtype=np.int64)
    tree = [0] * (n + 1)

    def add(pos: int, value: int) -> None:
        pos += 1
        while pos <= n:
            tree[pos] += value
            pos += pos & -pos

    def count(pos: int) -> int:
        """Marks at positions < pos."""
        total = 0
        while pos > 0:
            total += tree[pos]
            pos -= pos & -pos
        return total

    last: dict[int, int] = {}
    marks = 0
    for i, p in enumerate(ids.tolist()):
        if p == NO_PREFIX:
            continue
        before = last.get(p)
        if before is not None:
            out[i] = marks - count(before + 1)  # last uses after `before`
            add(before, -1)
            marks -= 1
        add(i, 1)
        marks += 1
        last[p] = i
    return out


def with_tiers(
    trace: Trace,
    share: PrefixShare,
    *,
    gpu_room_tokens: int,
    cpu_tier_tokens: int,
    kv_bytes_per_token: int,
    host_link_bytes_per_s: float,
    seed: int,
    ids: NDArray[np.int64] | None = None,
) -> tuple[Trace, NDArray[np.float64], TierHits]:
    """The trace with the prefixes added to the prompts, the prefix-cache hits as cached
    tokens, and the load time (ms) each request waits for its prefix to come from the CPU.
    `ids`: the prefix each request opens with (prefix_ids), else drawn from `seed`."""
    if ids is None:
        ids = prefix_ids(trace.size, share, seed)
    distance = stack_distances(ids)
    has = ids != NO_PREFIX
    # fits beside the distinct prefixes used since: (distance + 1) prefixes of `tokens`
    need = (distance + 1) * share.tokens
    seen = distance >= 0
    gpu = seen & (need <= gpu_room_tokens)
    cpu = seen & ~gpu & (need <= cpu_tier_tokens)
    prompt = np.where(has, trace.prompt_tokens + share.tokens, trace.prompt_tokens)
    cached = np.where(gpu | cpu, share.tokens, 0).astype(np.int64)
    load_ms = share.tokens * kv_bytes_per_token / host_link_bytes_per_s * 1e3
    delay = np.where(cpu, load_ms, 0.0)
    hits = TierHits(
        requests_with_prefix=int(has.sum()),
        gpu_hits=int(gpu.sum()),
        cpu_hits=int(cpu.sum()),
        misses=int((has & ~gpu & ~cpu).sum()),
        working_set_tokens=len(set(ids[has].tolist())) * share.tokens,
        gpu_room_tokens=gpu_room_tokens,
        cpu_tier_tokens=cpu_tier_tokens,
        load_ms_per_cpu_hit=load_ms,
    )
    out = Trace(trace.arrival_s, prompt.astype(np.int64), trace.output_tokens, cached)
    return out, delay, hits
