"""KV-cache and fixed-state bytes per layer group, per GPU, under tensor parallelism."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict

from planner.core.specs import KvKind, KvLayerGroup, ModelSpec
from planner.errors import InputError
from planner.units import ceil_div


def kv_heads_per_rank(total_kv_heads: int, tp: int) -> int:
    """KV heads each TP rank stores; never below one (heads are replicated past that)."""
    return max(1, total_kv_heads // tp)


def group_bytes_per_token(group: KvLayerGroup, tp: int, kv_dtype_bytes: int) -> int:
    """Bytes one token adds to this group's cache on one GPU (0 for fixed-state kinds)."""
    if group.kind is KvKind.MLA:
        # One latent of kv_lora_rank + qk_rope_head_dim per layer: no K/V factor, not split by TP;
        # DeepSeek-V3.2 adds its indexer's key cache, stored in fp8 whatever the KV dtype.
        per_layer = group.latent_dim * kv_dtype_bytes + group.indexer_bytes_per_token
        return group.num_layers * per_layer
    if group.kind.per_token:
        heads = kv_heads_per_rank(group.num_kv_heads, tp)
        return group.num_layers * heads * (group.head_dim_k + group.head_dim_v) * kv_dtype_bytes
    return 0


def layer_state_bytes(group: KvLayerGroup, tp: int) -> int:
    """Fixed per-sequence state of one Mamba / linear-attention layer on one GPU (heads over TP)."""
    if group.kind.per_token:
        return 0
    return ceil_div(group.state_bytes_per_layer, min(tp, group.state_heads))


def group_state_bytes(group: KvLayerGroup, tp: int) -> int:
    """Fixed per-sequence state (Mamba / linear attention) on one GPU; heads split over TP."""
    return group.num_layers * layer_state_bytes(group, tp)


def group_tokens_held(group: KvLayerGroup, tokens: int) -> int:
    """Tokens of a `tokens`-long sequence this group keeps (window-capped)."""
    if group.window_tokens is None:
        return tokens
    return min(tokens, group.window_tokens)


def kv_bytes_per_token(model: ModelSpec, tp: int, kv_dtype_bytes: int) -> int:
    """Bytes one more token costs on one GPU while it is inside every window."""
    return sum(group_bytes_per_token(g, tp, kv_dtype_bytes) for g in model.kv_groups)


def transfer_split(model: ModelSpec, kv_dtype_bytes: int) -> tuple[int, int, int]:
    """One copy (TP 1) of a model's KV as a prefill instance sends it: bytes a token in its
    layers outside sliding windows, bytes a token in its sliding-window layers, and its Mamba /
    linear-attention states' bytes a sequence."""
    full = sliding = 0
    for g in model.kv_groups:
        if g.kind is KvKind.SLIDING:
            sliding += group_bytes_per_token(g, 1, kv_dtype_bytes)
        else:
            full += group_bytes_per_token(g, 1, kv_dtype_bytes)
    return full, sliding, sum(group_state_bytes(g, 1) for g in model.kv_groups)


def kv_bytes_per_sequence(
    model: ModelSpec, tokens: int, tp: int, kv_dtype_bytes: int, block_tokens: int = 1
) -> int:
    """Bytes one sequence of `tokens` tokens holds on one GPU.

    With `block_tokens` > 1 every per-token group allocates whole pages of that many tokens.
    """
    total = 0
    for g in model.kv_groups:
        held = group_tokens_held(g, tokens)
        pages = ceil_div(held, block_tokens) * block_tokens if held else 0
        total += group_bytes_per_token(g, tp, kv_dtype_bytes) * pages
        total += group_state_bytes(g, tp)
    return total


class KvGroupRow(BaseModel):
    """One line of the per-group KV breakdown, per GPU."""

    model_config = ConfigDict(extra="forbid")

    kind: str
    num_layers: int
    kv_heads_per_gpu: int | None
    bytes_per_token: int
    window_tokens: int | None
    state_bytes_per_sequence: int


def group_rows(model: ModelSpec, tp: int, kv_dtype_bytes: int) -> list[KvGroupRow]:
    """The breakdown shown by --explain and the JSON's `kv_layer_groups`."""
    rows = []
    for g in model.kv_groups:
        heads: int | None = None
        if g.kind is KvKind.MLA:
            heads = 1
        elif g.kind.per_token:
            heads = kv_heads_per_rank(g.num_kv_heads, tp)
        rows.append(
            KvGroupRow(
                kind=g.kind.value,
                num_layers=g.num_layers,
                kv_heads_per_gpu=heads,
                bytes_per_token=group_bytes_per_token(g, tp, kv_dtype_bytes),
                window_tokens=g.window_tokens,
                state_bytes_per_sequence=group_state_bytes(g, tp),
            )
        )
    return rows


def tp_replication(model: ModelSpec, tp: int) -> tuple[int, list[str]]:
    """GPUs of the TP group holding a copy of each KV element, and the warning that goes with it."""
    attention_kinds = {g.kind for g in model.kv_groups if g.kind.per_token}
    if KvKind.MLA in attention_kinds:
        # MLA's compressed latent has no head axis to split: every TP rank holds all of it.
        notes = []
        if tp > 1:
            notes.append(
                f"MLA keeps one latent per token that every one of the {tp} TP ranks holds "
                "whole: KV per GPU does not shrink with TP; use data parallelism (replicas) "
                "for more capacity"
            )
        return tp, notes
    replication = max(1, tp // model.num_kv_heads)
    if replication > 1 and attention_kinds:
        return replication, [
            f"--tp {tp} exceeds the {model.num_kv_heads} KV heads: each head is replicated on "
            f"{replication} GPUs, so KV per GPU no longer shrinks with TP; use data parallelism "
            f"(replicas) for more capacity"
        ]
    return replication, []


def valid_tp_sizes(model: ModelSpec) -> list[int]:
    """TP sizes that split attention heads evenly and KV heads evenly (or replicate them)."""
    sizes = []
    for tp in range(1, model.num_attention_heads + 1):
        if model.num_attention_heads % tp:
            continue
        kv = model.num_kv_heads
        if kv % tp == 0 or tp % kv == 0:
            sizes.append(tp)
    return sizes


def check_tp(model: ModelSpec, tp: int) -> None:
    """Raise with the valid sizes when `tp` cannot shard this model's heads."""
    valid = valid_tp_sizes(model)
    if tp not in valid:
        raise InputError(
            "--tp",
            f"{tp} does not divide {model.name}'s {model.num_attention_heads} attention heads "
            f"/ {model.num_kv_heads} KV heads; valid: {', '.join(map(str, valid))}",
        )
