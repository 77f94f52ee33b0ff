"""Attention: decode reads the KV every running sequence holds (per layer group: full,
sliding window, MLA latent, linear / Mamba state); prefill does FLOPs per (query, key) pair."""

from __future__ import annotations

import itertools
import math

from planner.core.specs import KvKind, ModelSpec

# Achievable share of dense peak FLOPs in prefill attention (FlashAttention-2 reaches 50-73% of
# A100 peak in its paper's forward benchmarks, Dao 2023, fig. 4; FA3 ~75% on H100): the lower
# end, since varlen chunks of mixed lengths run below the paper's fixed-shape figures.
ATTENTION_FLOPS_EFFICIENCY = 0.5
# FLOPs per (query, key) pair per head and head-dimension unit: Q.K^T and P.V are one
# multiply-add each per dimension (2 FLOPs each).
ATTENTION_FLOPS_PER_PAIR_DIM = 2
# MLA decodes in its absorbed form: every query head attends over the cached latent itself, K
# the whole latent (kv_lora_rank + the rotary part, 576 for DeepSeek-V3) and V its first
# kv_lora_rank (512), so a cached token costs 2 x (576 + 512) FLOPs a head where a GQA head's
# costs 2 x (128 + 128). FlashMLA's dense decode kernel packs a KV head's query rows (heads x
# query tokens) into tiles of 64 (deepseek-ai/FlashMLA @9241ae3, csrc/sm90/decode/dense/
# config.h: BLOCK_SIZE_M 64, HEAD_DIM_K 576, HEAD_DIM_V 512): 16 heads a GPU (128 over TP 8)
# compute a whole tile. It reaches 660 TFLOP/s compute-bound on an H800 SXM5 (its README), 0.667
# of the 989 dense bf16 peak: the share this multiply runs at on NVIDIA (the family's compute
# factor elsewhere). With all 128 heads on one GPU (data-parallel attention, or TP 1) a bf16
# latent costs 242 FLOPs a byte, past the H200's ridge: the kernel computes longer than it reads.
MLA_DECODE_TILE_ROWS = 64
MLA_DECODE_FLOPS_EFFICIENCY = 660 / 989


def attention_flops_per_pair(model: ModelSpec, tp: int) -> float:
    """Prefill attention FLOPs per (query, key) pair on one GPU, all attention layers: each
    query head does Q.K^T over head_dim_k and P.V over head_dim_v (MLA prefill runs
    un-absorbed, with the model's head sizes). Sliding windows are capped by the pairs counted
    (StepTime.chunk_pairs, with window_flops_per_pair)."""
    heads = max(1, model.num_attention_heads // tp)
    total = 0.0
    for g in model.kv_groups:
        if not g.kind.per_token:
            continue
        dk = g.head_dim_k or model.head_dim
        dv = g.head_dim_v or model.head_dim
        total += g.num_layers * heads * ATTENTION_FLOPS_PER_PAIR_DIM * (dk + dv)
    return total


def mla_query_heads(model: ModelSpec, tp: int) -> int:
    """Query heads one GPU's absorbed MLA kernels run (0 for a model without dense MLA)."""
    dense_mla = any(g.kind is KvKind.MLA and not g.indexer_bytes_per_token for g in model.kv_groups)
    return max(1, model.num_attention_heads // tp) if dense_mla else 0


def mla_rows(heads: int, queries: float) -> int:
    """The rows an absorbed MLA decode kernel multiplies per cached token: a KV head's query
    rows (heads x query tokens a sequence, 1 + drafts when verifying speculation) padded to
    FlashMLA's tile."""
    wanted = math.ceil(heads * max(queries, 1.0))
    return -(-wanted // MLA_DECODE_TILE_ROWS) * MLA_DECODE_TILE_ROWS


def mla_decode_flops_per_token(model: ModelSpec, tp: int) -> float:
    """FLOPs the absorbed MLA decode kernels do per cached token of one sequence per step on
    one GPU, all MLA layers: each KV head's query rows padded to FlashMLA's tile of 64. Zero
    for other attention kinds (their decode reads far more than it multiplies) and for
    DeepSeek-V3.2's sparse attention (which attends to its indexer's top keys only)."""
    rows = mla_rows(mla_query_heads(model, tp), 1.0)
    total = 0.0
    for g in model.kv_groups:
        if g.kind is not KvKind.MLA or g.indexer_bytes_per_token:
            continue
        value_dim = g.latent_dim - g.rope_dim
        total += g.num_layers * rows * ATTENTION_FLOPS_PER_PAIR_DIM * (g.latent_dim + value_dim)
    return total


def window_flops_per_pair(model: ModelSpec, tp: int) -> tuple[tuple[int, float], ...]:
    """The part of attention_flops_per_pair that sliding-window layers do, by window: a query
    there attends to at most `window` keys (FlashAttention computes only inside the window)."""
    heads = max(1, model.num_attention_heads // tp)
    by_window: dict[int, float] = {}
    for g in model.kv_groups:
        if not g.kind.per_token or not g.window_tokens:
            continue
        dk = g.head_dim_k or model.head_dim
        dv = g.head_dim_v or model.head_dim
        flops = g.num_layers * heads * ATTENTION_FLOPS_PER_PAIR_DIM * (dk + dv)
        by_window[g.window_tokens] = by_window.get(g.window_tokens, 0.0) + flops
    return tuple(sorted(by_window.items()))


def causal_pairs(cached: int, chunk: int, window: int | None = None) -> float:
    """(query, key) pairs of a `chunk`-token prefill chunk after `cached` tokens: query q (from
    cached to cached + chunk - 1) sees q + 1 keys, at most `window` of them."""
    full = chunk * cached + chunk * (chunk + 1) / 2
    first, last = cached + 1, cached + chunk  # keys the first and the last query see
    if window is None or last <= window:
        return full
    if first >= window:
        return float(chunk * window)
    # queries below the window see first .. window - 1 keys; the rest see the window
    return (first + window - 1) * (window - first) / 2 + (last - window + 1) * window


def prefill_head_dim(model: ModelSpec) -> int:
    """The query-key head size prefill attention multiplies over: the first per-token layer
    group's (MLA prefills un-absorbed, at its q/k head size), else the model's."""
    for g in model.kv_groups:
        if g.kind.per_token and g.head_dim_k:
            return g.head_dim_k
    return model.head_dim


def ceiling_at(ceilings: dict[int, float], head_dim: int) -> float:
    """A share by head size from measured sizes: linear in log2(size) between them, the
    nearest measured one beyond."""
    dims = sorted(ceilings)
    if head_dim <= dims[0]:
        return ceilings[dims[0]]
    if head_dim >= dims[-1]:
        return ceilings[dims[-1]]
    for lo, hi in itertools.pairwise(dims):
        if head_dim <= hi:
            t = math.log2(head_dim / lo) / math.log2(hi / lo)
            return ceilings[lo] + (ceilings[hi] - ceilings[lo]) * t
    return ceilings[dims[-1]]


def length_share(ceiling: float, half_keys: float, mean_keys: float) -> float:
    """Prefill attention's share of the rate at `mean_keys` keys a query (a flat `ceiling`
    where no half length is known)."""
    if half_keys <= 0 or mean_keys <= 0:
        return ceiling
    return ceiling * mean_keys / (mean_keys + half_keys)


def prefill_ms(pairs: float, flops_per_pair: float, flops_per_s: float) -> float:
    """Prefill attention over `pairs` pairs at an achievable rate, ms."""
    return pairs * flops_per_pair / flops_per_s * 1e3
