"""Invariants of the ledger, checked with hypothesis over presets and settings."""

from __future__ import annotations

from functools import cache

from hypothesis import assume, given, settings
from hypothesis import strategies as st

from planner.core.capacity import CapacitySettings, DoesNotFit, plan_capacity
from planner.core.specs import GpuSpec, KvKind, ModelSpec
from planner.sources.presets import find_gpu, load_model_preset
from planner.units import GIB_BYTES

MODELS = [
    "gqa-70b",
    "gqa-8b",
    "mqa-7b",
    "mha-60l",
    "gemma-3-4b",
    "gpt-oss-20b",
    "deepseek-v2-lite",
    "nemotron-3-nano-30b",
    "qwen3-30b-a3b",
]


@cache
def model(name: str) -> ModelSpec:
    return load_model_preset(name)


def gpu() -> GpuSpec:
    return find_gpu("mi300x")


HYBRID = ["nemotron-3-nano-30b", "nemotron-h-56b", "qwen3-next-80b-a3b"]
ATTENTION_ONLY = ["gqa-70b", "gqa-8b", "mqa-7b", "mha-60l", "gemma-3-4b", "deepseek-v2-lite"]


@st.composite
def cases(draw: st.DrawFn, names: list[str] = MODELS) -> tuple[ModelSpec, CapacitySettings]:
    m = model(draw(st.sampled_from(names)))
    context = draw(st.integers(min_value=16, max_value=min(m.max_context_tokens, 65_536)))
    tp = draw(st.sampled_from([t for t in (1, 2, 4, 8) if m.num_attention_heads % t == 0]))
    s = CapacitySettings(
        tp=tp,
        context_tokens=context,
        mean_tokens=draw(st.integers(min_value=1, max_value=context)),
        block_tokens=draw(st.sampled_from([1, 8, 16, 32, 64])),
        kv_dtype=draw(st.sampled_from(["fp16", "bf16", "fp8"])),
        headroom_fraction=draw(st.floats(min_value=0.0, max_value=0.5)),
        workspace_bytes=draw(st.integers(min_value=0, max_value=8 * GIB_BYTES)),
        hbm_bytes=draw(st.integers(min_value=8 * GIB_BYTES, max_value=400 * GIB_BYTES)),
    )
    return m, s


def plan_or_none(m: ModelSpec, s: CapacitySettings):  # type: ignore[no-untyped-def]
    try:
        return plan_capacity(m, gpu(), s)
    except DoesNotFit:
        return None


@settings(max_examples=150, deadline=None)
@given(cases(), st.integers(min_value=1, max_value=64 * GIB_BYTES))
def test_more_hbm_never_means_fewer_sequences(case, extra: int) -> None:  # type: ignore[no-untyped-def]
    m, s = case
    small = plan_or_none(m, s)
    assume(small is not None)
    big = plan_capacity(m, gpu(), s.model_copy(update={"hbm_bytes": s.hbm_bytes + extra}))
    assert big.max_seqs_paged >= small.max_seqs_paged
    assert big.max_seqs_contiguous >= small.max_seqs_contiguous
    assert big.operating_concurrency >= small.operating_concurrency


@settings(max_examples=150, deadline=None)
@given(cases())
def test_paged_at_least_contiguous_and_never_negative(case) -> None:  # type: ignore[no-untyped-def]
    m, s = case
    plan = plan_or_none(m, s)
    assume(plan is not None)
    assert plan.max_seqs_contiguous >= 0 and plan.max_seqs_paged >= 0
    assert plan.operating_concurrency >= 0
    # A mean-length paged sequence never costs more than a max-context contiguous one
    # (pages round up, but by less than a block, and mean <= context).
    if s.context_tokens - s.mean_tokens >= s.block_tokens:
        assert plan.max_seqs_paged >= plan.max_seqs_contiguous


@settings(max_examples=150, deadline=None)
@given(cases(ATTENTION_ONLY))
def test_halving_kv_bytes_doubles_paged_for_attention_models(case) -> None:  # type: ignore[no-untyped-def]
    m, s = case
    assert all(g.kind.per_token for g in m.kv_groups)
    wide = plan_or_none(m, s.model_copy(update={"kv_dtype": "bf16"}))
    assume(wide is not None)
    narrow = plan_capacity(m, gpu(), s.model_copy(update={"kv_dtype": "fp8"}))
    assert narrow.kv_bytes_per_token * 2 == wide.kv_bytes_per_token
    assert narrow.max_seqs_paged in (2 * wide.max_seqs_paged, 2 * wide.max_seqs_paged + 1)


@settings(max_examples=100, deadline=None)
@given(cases(HYBRID))
def test_fixed_state_does_not_scale_with_kv_dtype(case) -> None:  # type: ignore[no-untyped-def]
    m, s = case
    assert any(g.kind in (KvKind.MAMBA, KvKind.LINEAR) for g in m.kv_groups)
    wide = plan_or_none(m, s.model_copy(update={"kv_dtype": "bf16"}))
    assume(wide is not None)
    narrow = plan_capacity(m, gpu(), s.model_copy(update={"kv_dtype": "fp8"}))
    assert narrow.kv_bytes_per_sequence_mean > wide.kv_bytes_per_sequence_mean // 2
