"""docs/method.md §2, pinned: gqa-70b on one MI300X, context 8,192, block 16, 5% headroom."""

from __future__ import annotations

import pytest

import planner
from planner.core.capacity import CapacityPlan
from planner.units import GIB_BYTES, KIB_BYTES


def ref(**kw: object) -> CapacityPlan:
    return planner.capacity(preset="gqa-70b", gpu="mi300x", **kw)


def test_kv_per_token_is_320_kib_and_8k_sequence_is_2_5_gib() -> None:
    plan = ref(context_tokens=8192)
    # 2 (K,V) x 80 layers x 8 KV heads x 128 head_dim x 2 bytes (fp16)
    assert plan.kv_bytes_per_token == 2 * 80 * 8 * 128 * 2 == 327_680 == 320 * KIB_BYTES
    assert plan.kv_bytes_per_sequence == 327_680 * 8192 == int(2.5 * GIB_BYTES)


def test_reference_ledger() -> None:
    plan = ref(context_tokens=8192)
    led = plan.ledger
    assert led.hbm_bytes == 192 * 10**9
    assert led.weights_bytes_per_gpu == 140 * 10**9  # 70e9 params x 2 bytes
    assert led.weights_fraction_of_hbm == pytest.approx(0.73, abs=0.005)
    # (192e9 - 140e9 - 4 GiB) x 0.95, the "~42 GiB" pool
    assert led.kv_pool_bytes == (192 * 10**9 - 140 * 10**9 - 4 * GIB_BYTES) - int(
        (192 * 10**9 - 140 * 10**9 - 4 * GIB_BYTES) * 0.05
    )
    assert led.kv_pool_bytes / GIB_BYTES == pytest.approx(42.2, abs=0.1)


def test_contiguous_16_paged_about_4_3x() -> None:
    plan = ref(context_tokens=8192)
    assert plan.max_seqs_contiguous == 16
    assert 67 <= plan.max_seqs_paged <= 69
    assert 4.0 <= plan.max_seqs_paged / plan.max_seqs_contiguous <= 4.4


def test_memory_binds_at_cap_128() -> None:
    plan = ref(context_tokens=8192, compute_batch_cap=128)
    assert plan.binding == "memory"
    assert plan.operating_concurrency == plan.max_seqs_paged


def test_long_context_collapses_contiguous_only() -> None:
    short, long = ref(context_tokens=8192), ref(context_tokens=131_072)
    assert long.max_seqs_contiguous == 1
    assert long.max_seqs_paged == short.max_seqs_paged


def test_fp8_weights_flip_binding_to_latency() -> None:
    plan = ref(context_tokens=8192, weight_dtype="fp8")
    assert plan.ledger.kv_pool_bytes / GIB_BYTES == pytest.approx(104, abs=1.0)
    assert 165 <= plan.max_seqs_paged <= 172  # REFERENCE: "paged ~169 > 128"
    assert plan.binding == "latency"
    assert plan.operating_concurrency == 128


def test_fp8_kv_doubles_paged() -> None:
    fp16, fp8 = ref(context_tokens=8192), ref(context_tokens=8192, kv_dtype="fp8")
    assert fp8.kv_bytes_per_token * 2 == fp16.kv_bytes_per_token
    assert fp8.max_seqs_paged in (2 * fp16.max_seqs_paged, 2 * fp16.max_seqs_paged + 1)


def test_tp16_replicates_heads_and_gains_about_5_percent() -> None:
    tp8, tp16 = ref(context_tokens=8192, tp=8), ref(context_tokens=8192, tp=16)
    assert tp8.kv_bytes_per_token == tp16.kv_bytes_per_token == 2 * 80 * 1 * 128 * 2
    assert tp16.kv_replication_factor == 2
    gain = tp16.max_seqs_paged / tp8.max_seqs_paged - 1
    assert 0.03 <= gain <= 0.07
    assert any("replicated" in w for w in tp16.warnings)
    assert not any("replicated" in w for w in tp8.warnings)


def test_static_waste_example_from_reference() -> None:
    # "A 2,050-token conversation in an 8,192-token contiguous buffer wastes 75% of it."
    plan = ref(context_tokens=8192, mean_tokens=2050)
    used = plan.kv_bytes_per_sequence_mean / plan.kv_bytes_per_sequence
    assert 1 - used == pytest.approx(0.75, abs=0.005)
    # "Paged allocation wastes at most block_size - 1 tokens per sequence."
    waste_tokens = plan.kv_bytes_per_sequence_paged_mean // plan.kv_bytes_per_token - 2050
    assert 0 <= waste_tokens <= 15
