"""The step-time model: each term, the ideal floor it must never undercut, and its error on the
public measured rows (benchmarks/data/step-time.jsonl)."""

from __future__ import annotations

import importlib.util
import json
import math
import statistics
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from helpers import MODELS, Result
from hypothesis import given, settings
from hypothesis import strategies as st

from planner.core.hf_config import model_spec_from_config
from planner.core.latency import Roofline
from planner.core.serve import fields_from_line
from planner.core.specs import ModelSpec
from planner.core.step import StepTime, gemm, step_time_for
from planner.core.step.attention_dp import AttentionDp
from planner.core.step.comm import (
    ALLREDUCE_HOP_MS,
    DEEPEP_COMBINE_BYTES_PER_VALUE,
    DEEPEP_DISPATCH_BYTES_PER_VALUE,
    DEEPEP_NVLINK,
    MORI_KERNEL_MS,
    PP_HOP_MS,
    QK_NORM_SUMS_BYTES_PER_TOKEN,
    RDMA_NIC_BYTES_PER_S,
    AllReduceCost,
    Fabric,
    allreduce_ms,
    collective_ms,
    deepep_ms,
    fabric_of,
    host_link_bytes_per_s,
)
from planner.core.step.family import (
    AMD_BANDWIDTH_EFFICIENCY,
    AMD_GEMM_FLOOR_MS,
    AMPERE_ALLREDUCE_MS,
    BLACKWELL_BLOCK_FP8_SCALE,
    BLACKWELL_COMPUTE_SCALE,
    BLACKWELL_FP4_SCALE,
    BLACKWELL_LOW_PRECISION_SCALE,
    BLACKWELL_MOE_SHARES,
    BLACKWELL_SGLANG_MOE_SHARES,
    CDNA3_ALLREDUCE,
    CDNA3_DENSE_GEMM_SHARES,
    CDNA3_MID_M_SLOWDOWN,
    CDNA3_MOE_SHARES,
    CDNA4_DENSE_GEMM_SHARES,
    CDNA4_MID_M_SLOWDOWN,
    CDNA4_MOE_SHARES,
    HOPPER_GEMM_FLOOR_MS,
    HOPPER_KERNEL_MS_PER_LAYER,
    HOPPER_MOE_GEMM_SCALE,
    HOPPER_MOE_HALF_WIDTH,
    HOPPER_MOE_SHARES,
    HOPPER_SGLANG_MOE_GEMM_SCALE,
    HOPPER_SGLANG_MOE_HALF_WIDTH,
    HOPPER_SGLANG_MOE_SHARES,
    PCIE_ALLREDUCE,
    family_of,
    fp8_kv_scale,
    moe_decode_costs,
    slowdown_at,
)
from planner.core.step.model import moe_share_scale, stored_expert_bytes_per_param
from planner.core.step.moe import MOE_KERNEL_MS_PER_LAYER, MOE_MS_PER_IDLE_EXPERT, MoeExchange
from planner.core.step.overhead import (
    ENGINE_OVERHEAD_MS,
    FRONTEND_PER_TOKEN_SHARE,
    GEMMS_PER_MOE_BLOCK,
    KERNEL_MS_PER_LAYER,
    api_server_ms_per_request,
    frontend_ms_per_token,
    gemm_launches_per_layer,
    sglang_overlap,
)
from planner.core.step.sampler import GREEDY_BYTES_PER_LOGIT
from planner.sources.models import resolve_model
from planner.sources.presets import find_gpu, gpu_catalog, load_model_preset

# whole experts over 8 GPUs (--enable-expert-parallel at TP 8)
EP8 = MoeExchange(expert_ranks=8)

Cli = Callable[..., Result]
# An all-reduce at the per-peer latency fitted on Ampere rows, and one with no latency at all.
PER_PEER = AllReduceCost()
NO_HOP = AllReduceCost(hop_ms=0.0)

ROOT = Path(__file__).resolve().parent.parent
LLAMA8 = resolve_model(None, str(MODELS / "meta-llama--Llama-3.1-8B"))
MIXTRAL = resolve_model(None, str(MODELS / "mistralai--Mixtral-8x22B-v0.1"))


@pytest.mark.parametrize(
    "missing",
    [
        {"hbm_bandwidth_bytes_per_s": None},
        {"fp16_dense_flops": None, "bf16_dense_flops": None, "fp8_dense_flops": None},
    ],
)
def test_a_card_without_bandwidth_or_tensor_rate_is_refused_by_gpu(
    missing: dict[str, Any],
) -> None:
    from planner.errors import InputError

    card = find_gpu("h100").model_copy(update=missing)
    with pytest.raises(InputError) as refused:
        step_time_for(LLAMA8, card, tp=1)
    assert refused.value.field == "--gpu" and "no bandwidth/FLOPs on record" in str(refused.value)


def test_all_reduce_is_zero_at_tp1_and_grows_with_tp_and_hidden() -> None:
    gpu = find_gpu("h100")
    one = step_time_for(LLAMA8, gpu, tp=1).terms(16, 2000)
    two = step_time_for(LLAMA8, gpu, tp=2).terms(16, 2000)
    eight = step_time_for(LLAMA8, gpu, tp=8).terms(16, 2000)
    assert one.allreduce_ms == 0
    assert 0 < two.allreduce_ms < eight.allreduce_ms
    wide = step_time_for(load_model_preset("gqa-70b"), gpu, tp=8).terms(256, 2000)
    narrow = step_time_for(LLAMA8, gpu, tp=8).terms(256, 2000)
    assert wide.allreduce_ms > narrow.allreduce_ms  # hidden 8192 vs 4096, more layers


def test_the_amd_all_reduce_follows_the_published_mi300x_times() -> None:
    """mk1-project/quickreduce's README times all-reduces on 2 / 4 / 8 MI300X of one board:
    QuickReduce's two-shot fp16 kernel over peer memory 8.47 / 10.59 / 14.81 us at 32 KB, RCCL
    1,464.3 / 761.2 / 426.0 us at 64 MB. The model (CDNA3_ALLREDUCE: fixed + per peer + the
    ring's bytes over the group's xGMI links) is within 5% of the small ones and 30% of the large
    ones, where the per-peer hop fitted on NVIDIA V0 rows was 3.8x the 8-GPU figure; vLLM V0
    keeps that hop on AMD as on NVIDIA (CUSTOM_ALLREDUCE_ENGINES)."""
    gpu = find_gpu("mi300x")
    cost = family_of(gpu).allreduce
    assert cost == CDNA3_ALLREDUCE

    def one_us(ranks: int, message: int, priced: AllReduceCost = CDNA3_ALLREDUCE) -> float:
        return allreduce_ms(ranks, 1, message, priced, fabric_of(gpu, ranks)) / 2 * 1e3

    for ranks, small_us, large_us in ((2, 8.47, 1464.3), (4, 10.59, 761.2), (8, 14.81, 426.0)):
        assert one_us(ranks, 32 * 1024) == pytest.approx(small_us, rel=0.05)
        assert one_us(ranks, 64 * 1024**2) == pytest.approx(large_us, rel=0.3)
    assert one_us(8, 32 * 1024, PER_PEER) > 3.5 * 14.81
    v1 = step_time_for(LLAMA8, gpu, tp=8, engine="vllm", version=(0, 10, 0))
    v0 = step_time_for(LLAMA8, gpu, tp=8, engine="vllm", version=(0, 6, 3))
    assert v1.allreduce == CDNA3_ALLREDUCE and v0.allreduce == PER_PEER


def test_a_mesh_gives_a_group_only_the_links_among_its_gpus() -> None:
    """MI300X-class boards join 8 GPUs in a full mesh of 7 xGMI links each: TP 2 runs on one
    link, TP 8 on all seven; NVSwitch boards give any group the whole rate; a group wider
    than the fabric crosses nodes on the node's NICs, one per GPU (NCCL's rings run a channel
    per rail), and one more RDMA hop per all-reduce; an all-to-all sends each GPU's own tokens
    over its own NIC."""
    mesh = fabric_of(find_gpu("mi300x"))
    assert mesh.peer_links == 7
    assert mesh.collective_bytes_per_s(2) == pytest.approx(896e9 / 2 / 7)  # one link
    assert mesh.collective_bytes_per_s(4) == pytest.approx(896e9 / 2 * 3 / 7)
    assert mesh.collective_bytes_per_s(8) == pytest.approx(896e9 / 2)
    assert mesh.peer_bytes_per_s() == mesh.collective_bytes_per_s(2)
    switched = fabric_of(find_gpu("h100"))
    assert switched.collective_bytes_per_s(2) == switched.collective_bytes_per_s(8) == 450e9
    assert switched.collective_bytes_per_s(16) == 8 * RDMA_NIC_BYTES_PER_S  # 400 < 450 GB/s
    assert switched.exchange_bytes_per_s(16) == RDMA_NIC_BYTES_PER_S
    assert switched.exchange_bytes_per_s(8) == switched.collective_bytes_per_s(8)
    assert mesh.collective_bytes_per_s(16) == 8 * RDMA_NIC_BYTES_PER_S  # 400 < 448 GB/s
    assert fabric_of(find_gpu("gb200")).collective_bytes_per_s(16) == 900e9  # NVL72 domain
    message = 256 * 8192 * 2
    within = allreduce_ms(8, 80, message, PER_PEER, switched)
    across = allreduce_ms(16, 80, message, PER_PEER, switched)
    hop_only = allreduce_ms(16, 80, 0, PER_PEER, switched)
    assert hop_only == pytest.approx(2 * 80 * (15 * ALLREDUCE_HOP_MS + PP_HOP_MS))
    assert across > within
    # the same TP 4 all-reduce over a mesh's 3 links takes longer than over NVSwitch at the
    # same total rate, and TP 8 the same time
    flat = Fabric(bytes_per_s=mesh.bytes_per_s)
    assert allreduce_ms(4, 80, message, NO_HOP, mesh) == pytest.approx(
        allreduce_ms(4, 80, message, NO_HOP, flat) * 7 / 3
    )
    assert allreduce_ms(8, 80, message, NO_HOP, mesh) == allreduce_ms(8, 80, message, NO_HOP, flat)


@settings(max_examples=80, deadline=None)
@given(
    card=st.sampled_from([g.id for g in gpu_catalog()]),
    ranks=st.integers(min_value=1, max_value=256),
    tokens=st.integers(min_value=1, max_value=4096),
    extra=st.integers(min_value=1, max_value=4096),
)
def test_fabric_invariants(card: str, ranks: int, tokens: int, extra: int) -> None:
    """A group never sends faster than its GPU's links, nor faster than the NIC once it spans
    nodes; more tokens never make DeepEP's exchange or a larger message's all-reduce cheaper."""
    fabric = fabric_of(find_gpu(card))
    rate, own = fabric.collective_bytes_per_s(ranks), fabric.exchange_bytes_per_s(ranks)
    assert 0 < own <= rate <= fabric.bytes_per_s
    if fabric.crosses_nodes(ranks):
        assert rate <= fabric.domain_gpus * fabric.nic_bytes_per_s
        assert own <= fabric.nic_bytes_per_s
    for low_latency in (True, False):
        fewer = deepep_ms(tokens, 8, 7168, max(ranks, 2), fabric, low_latency=low_latency)
        more = deepep_ms(tokens + extra, 8, 7168, max(ranks, 2), fabric, low_latency=low_latency)
        assert 0 < fewer <= more
    message = tokens * 8192 * 2
    assert allreduce_ms(ranks, 80, message, PER_PEER, fabric) <= allreduce_ms(
        ranks, 80, message + extra, PER_PEER, fabric
    )


def test_deepep_all_to_all_matches_its_published_times() -> None:
    """DeepEP's docs time low-latency dispatch + combine of 128 tokens x top-8 x 7,168 at EP 32
    over 400 Gb/s NICs at 155 + 273 us, and the normal kernels (prefill) of 4,096 tokens at EP
    16 at 43 GB/s each way, a rate that counts a token once for every node its experts sit on
    (its own among them: top-4 groups of 8 over 2 nodes reach both but for 2 / 70 of tokens)."""
    fabric = fabric_of(find_gpu("h100"))
    low_latency = deepep_ms(128, 8, 7168, 32, fabric)
    assert low_latency == pytest.approx(0.155 + 0.273, rel=0.1)
    normal = deepep_ms(4096, 8, 7168, 16, fabric, low_latency=False)
    nodes_reached = 2 - 2 / 70
    per_value = DEEPEP_DISPATCH_BYTES_PER_VALUE + DEEPEP_COMBINE_BYTES_PER_VALUE
    assert normal == pytest.approx(4096 * nodes_reached * 7168 * per_value / 43e9 * 1e3, rel=0.15)
    assert deepep_ms(0, 8, 7168, 32, fabric) == 0


def test_deepep_inside_a_node_costs_what_nvidias_tables_give() -> None:
    """NVIDIA's tables time DeepEP on one 8-GPU B200 board under SGLang 0.5.12: the planner's
    fixed time and link share for each mode are the tables' fit (the B300's agrees). A
    decode step's exchange of DeepSeek-V3's shape costs 44 us at one token a rank (the two
    kernels' own time, where the bytes at NVLink's full rate priced it at the 16 us two-hop
    floor) and 319 us at 1,024; a prefill step runs the normal kernels, dearer; across nodes
    the NIC still sets it, and an AMD board (no NVLink) keeps its bytes at the link's rate."""
    bench = benchmark_script("nvidia_kernels")
    rows = bench.load(bench.ROWS)
    for card in ("b200_sxm", "b300_sxm"):
        for table, own in (
            ("deepep_ll", DEEPEP_NVLINK.low_latency),
            ("deepep_normal", DEEPEP_NVLINK.normal),
        ):
            fixed_us, share, error, n = bench.deepep_fit(rows, card, table)
            assert n > 150 and error < 0.12, (card, table)
            assert own.fixed_ms * 1e3 == pytest.approx(fixed_us, rel=0.05), (card, table)
            assert own.link_share == pytest.approx(share, abs=0.015), (card, table)
    b200 = fabric_of(find_gpu("b200"))
    costs = family_of(find_gpu("b200")).deepep_in_fabric
    assert costs == DEEPEP_NVLINK == family_of(find_gpu("h100")).deepep_in_fabric
    one = deepep_ms(1, 8, 7168, 8, b200, in_fabric=costs)
    assert one == pytest.approx(0.022 + 0.022, rel=0.15) and one > 2 * ALLREDUCE_HOP_MS
    assert deepep_ms(1024, 8, 7168, 8, b200, in_fabric=costs) == pytest.approx(0.319, rel=0.1)
    decode = deepep_ms(128, 8, 7168, 8, b200, in_fabric=costs)
    assert deepep_ms(128, 8, 7168, 8, b200, low_latency=False, in_fabric=costs) > decode
    h100 = fabric_of(find_gpu("h100"))
    assert deepep_ms(128, 8, 7168, 32, h100, in_fabric=costs) == deepep_ms(128, 8, 7168, 32, h100)
    assert family_of(find_gpu("mi300x")).deepep_in_fabric is None
    assert family_of(find_gpu("l40s")).deepep_in_fabric is None  # no NVLink


def test_deepgemms_experts_under_deepep_are_what_nvidias_tables_give() -> None:
    """Under DeepEP the experts run DeepGEMM's grouped GEMMs: the share of the fp8 rate they
    multiply at, and the time the masked kernel spends on each expert a rank holds, are the
    tables' fits (H100 / H200 for Hopper, B200 / B300 / GB200 for Blackwell), the share above
    the dense GEMMs' modelled one. With them, a DeepSeek-V3 MoE layer on 16-256 ranks at
    32-128 tokens a rank is priced at 0.85-1.45 of the tables' experts (the routing kernels,
    which the tables do not time, included), and on 2-64 B200 ranks at 0.95-1.05 at the median;
    the fused kernels' share priced 128 tokens on 64 ranks and more at twice the tables'.
    Without DeepEP the fused kernels' share holds."""
    bench = benchmark_script("nvidia_kernels")
    rows = bench.load(bench.ROWS)
    fits = {card: bench.deepgemm_moe_fit(rows, card) for card in bench.DEEPGEMM_MOE_CARDS}
    for card, (_, _, _, multiply, error) in fits.items():
        own = family_of(find_gpu(bench.card_gpu(card))).deepep_moe_fp8_share
        assert own is not None and error < 0.03, card
        assert own == pytest.approx(multiply, abs=0.03), card
    # the masked kernel's cost an expert a rank holds: Hopper's cards' mean, Blackwell's median
    per_expert_us = {card: fit[1] for card, fit in fits.items()}
    hopper = statistics.mean(per_expert_us[c] for c in ("h100_sxm", "h200_sxm"))
    blackwell = statistics.median(per_expert_us[c] for c in ("b200_sxm", "b300_sxm", "gb200"))
    for gpu, fitted in (("h200", hopper), ("b200", blackwell), ("gb200", blackwell)):
        own_us = family_of(find_gpu(gpu)).deepgemm_ms_per_local_expert * 1e3
        assert own_us == pytest.approx(fitted, abs=0.01), gpu
    assert family_of(find_gpu("mi300x")).deepgemm_ms_per_local_expert == 0
    spec = resolve_model(None, str(MODELS / "deepseek-ai--DeepSeek-V3"))
    for card, gpu in (("h200_sxm", "h200"), ("b200_sxm", "b200")):
        checked = 0
        for r in rows:
            if r["table"] != "moe_deepep" or r["card"] != card:
                continue
            if r["ep"] < 16 or r["tokens"] < 32:
                continue
            dp = AttentionDp(groups=r["ep"])
            st = step_time_for(
                spec, find_gpu(gpu), tp=1, dp=dp, engine="sglang",
                exchange=MoeExchange(all_to_all=True),
            )  # fmt: skip
            # DeepGEMM's grouped GEMMs, faster than the dense GEMMs' modelled share
            assert st.deepgemm_experts and st.moe_gemm_scale > 1
            layer_ms = st.terms(r["tokens"], 2000).experts_ms / spec.moe_layers
            ratio = (layer_ms + st.moe_kernel_ms_per_layer) * 1e3 / r["us"]
            assert 0.85 <= ratio <= 1.45, (card, r["ep"], r["tokens"], ratio)
            checked += 1
        assert checked >= 12
    few_ranks = []
    for r in rows:
        if r["table"] != "moe_deepep" or r["card"] != "b200_sxm" or r["ep"] > 64:
            continue
        if r["hidden"] != spec.hidden_size or r["experts"] != spec.num_experts:
            continue
        st = step_time_for(
            spec, find_gpu("b200"), tp=1, dp=AttentionDp(groups=r["ep"]), engine="sglang",
            exchange=MoeExchange(all_to_all=True),
        )  # fmt: skip
        layer_ms = st.terms(r["tokens"], 2000).experts_ms / spec.moe_layers
        few_ranks.append((layer_ms + st.moe_kernel_ms_per_layer) * 1e3 / r["us"])
    assert len(few_ranks) >= 20 and 0.95 <= statistics.median(few_ranks) <= 1.05
    fused = step_time_for(spec, find_gpu("h200"), tp=8, engine="sglang")
    assert not fused.deepgemm_experts and fused.moe_gemm_scale <= 1


def test_a_gathered_batch_pays_each_engines_collectives_there_and_back() -> None:
    """A data-parallel layout's MoE layers meet every group's tokens. vLLM all-gathers them and
    reduce-scatters the outputs through NCCL, in its MoE layers alone, each call at the latency
    NVIDIA's nccl-tests tables give (the planner's constants are their fit): at one token a rank
    over 8 H200s 2 x 11.9 us a MoE layer, where one custom all-reduce's 4.7 stood for the pair.
    SGLang 0.5.23 (on NVIDIA) gathers with its all-reduce and its FFN sums the output with
    another, in every layer: two all-reduces' latency and twice one's traffic; earlier releases
    do so in steps with prompt tokens only. AMD's vLLM keeps one all-reduce's cost for the
    pair."""
    bench = benchmark_script("nvidia_kernels")
    rows = bench.load(bench.ROWS)
    for cards, gpu in ((("h100_sxm", "h200_sxm"), "h200"), (("b200_sxm",), "b200")):
        fixed_us, per_peer_us, error = bench.nccl_latency_fit(rows, cards)
        own = family_of(find_gpu(gpu)).nccl_latency
        assert own is not None and error < 0.12
        assert own.fixed_ms * 1e3 == pytest.approx(fixed_us, abs=0.05)
        assert own.hop_ms * 1e3 == pytest.approx(per_peer_us, abs=0.01)
    spec = resolve_model(None, str(MODELS / "deepseek-ai--DeepSeek-V3"))
    h200 = find_gpu("h200")
    nccl, custom = family_of(h200).nccl_latency, family_of(h200).allreduce
    assert nccl is not None and custom is not None
    one_call_ms = nccl.fixed_ms + 7 * nccl.hop_ms
    assert one_call_ms * 1e3 == pytest.approx(11.9, abs=0.2)
    vllm = step_time_for(spec, h200, tp=1, dp=AttentionDp(groups=8), engine="vllm")
    sglang = step_time_for(spec, h200, tp=1, dp=AttentionDp(groups=8), engine="sglang")
    # one token a rank (attention TP 1: no other all-reduce): vLLM's MoE layers pay two NCCL
    # calls' latency beside the gathered bytes, SGLang's every layer two all-reduces
    moe_layers, fabric = vllm.moe_layers, fabric_of(h200)
    one_token = 8 * spec.hidden_size * 2
    pair = custom.model_copy(update={"fixed_ms": 2 * nccl.fixed_ms, "hop_ms": 2 * nccl.hop_ms})
    assert vllm.allreduce_ms(1) == pytest.approx(
        allreduce_ms(8, moe_layers, one_token, pair, fabric) / 2
    )
    assert vllm.allreduce_ms(1) == pytest.approx(moe_layers * 2 * one_call_ms, rel=0.1)
    assert sglang.allreduce_ms(1) == pytest.approx(
        allreduce_ms(8, spec.num_layers, one_token, custom, fabric)
    )
    assert sglang.allreduce_ms(1) == pytest.approx(spec.num_layers * 2 * custom.fixed_ms, rel=0.2)
    # 512 gathered tokens: SGLang moves the gathered batch through two all-reduces
    message = 512 * spec.hidden_size * 2
    twice = 2 * allreduce_ms(8, spec.num_layers, message, custom, fabric) / 2
    assert sglang.gather_ms(spec.num_layers, message) == pytest.approx(twice)
    # before 0.5.23 (and on AMD) SGLang's decode graphs all-gather and reduce-scatter through
    # NCCL, as vLLM's; a step with prompt tokens all-reduces twice in every release since 0.5.4
    older = step_time_for(
        spec, h200, tp=1, dp=AttentionDp(groups=8), engine="sglang", version=(0, 5, 13)
    )
    assert sglang.sglang_decode_sum_len and not older.sglang_decode_sum_len
    as_vllm = allreduce_ms(8, spec.num_layers, message, pair, fabric) / 2
    assert older.gather_ms(spec.num_layers, message) == pytest.approx(as_vllm)
    assert older.gather_ms(spec.num_layers, message, decode=False) == pytest.approx(twice)
    # 0.5.23 pads decode to the longest group too once the gathered batch outgrows its custom
    # all-reduce's 16 MiB (1,170 of DeepSeek's 7,168-wide bf16 rows); prompts still sum
    big = 1171 * spec.hidden_size * 2
    assert big > 16 * 2**20 >= 1170 * spec.hidden_size * 2
    big_pair = allreduce_ms(8, spec.num_layers, big, pair, fabric) / 2
    assert sglang.gather_ms(spec.num_layers, big) == pytest.approx(big_pair)
    big_twice = allreduce_ms(8, spec.num_layers, big, custom, fabric)
    assert sglang.gather_ms(spec.num_layers, big, decode=False) == pytest.approx(big_twice)
    amd = step_time_for(spec, find_gpu("mi300x"), tp=1, dp=AttentionDp(groups=8), engine="vllm")
    amd_one = allreduce_ms(8, moe_layers, 8, amd.allreduce, amd.fabric) / 2
    assert amd.gather_ms(moe_layers, 8) == pytest.approx(amd_one)


def test_moris_all_to_all_matches_its_published_times() -> None:
    """ROCm/mori's README (DeepSeek-V3 shapes, FP8 dispatch and BF16 combine, MI300X + CX7) at
    EP 8: 35 + 47 us for 128 tokens; 307 / 330 GB/s for 4,096, counted over the tokens a rank
    receives, a token once per rank its top-8 of 256 experts sit on. The planner prices DeepEP's
    bytes (a copy per routed expert inside a node) at the xGMI mesh's rate plus MoRI's fixed
    cost a kernel: within 15% of both, and of its MI355X figures (31 + 36 us, 345 / 420 GB/s)
    with CDNA4's own fixed cost. At EP 16 (V1 kernels, 52 / 67 GB/s of RDMA, counted as DeepEP
    counts its own) it is 25% slower than published: an estimate, said so."""
    fabric = fabric_of(find_gpu("mi300x"))
    small = deepep_ms(128, 8, 7168, 8, fabric, low_latency=False, kernel_ms=MORI_KERNEL_MS)
    assert small == pytest.approx(0.035 + 0.047, rel=0.15)
    idle = 1.0
    for i in range(8):  # a rank's 32 experts all missed by a token's top-8 of 256
        idle *= (224 - i) / (256 - i)
    received = 4096 * 8 * (1 - idle)
    published = received * 7168 * (1 / 307e9 + 2 / 330e9) * 1e3
    big = deepep_ms(4096, 8, 7168, 8, fabric, low_latency=False, kernel_ms=MORI_KERNEL_MS)
    assert big == pytest.approx(published, rel=0.15)
    nodes_reached = 2 * (1 - 0.5**8)
    across = 4096 * nodes_reached * 7168 * (1 / 52e9 + 2 / 67e9) * 1e3
    wide = deepep_ms(4096, 8, 7168, 16, fabric, low_latency=False, kernel_ms=MORI_KERNEL_MS)
    assert wide == pytest.approx(across, rel=0.3) and wide > across
    # its July 2026 README on MI355X + AINIC at EP 8: 31 + 36 us for 128 tokens, 345 / 420 GB/s
    # for 4,096; CDNA4's kernels cost less than CDNA3's (the MI300X's above)
    cdna4 = family_of(find_gpu("mi355x")).mori_kernel_ms
    assert cdna4 < family_of(find_gpu("mi300x")).mori_kernel_ms == MORI_KERNEL_MS
    mi355x = fabric_of(find_gpu("mi355x"))
    small = deepep_ms(128, 8, 7168, 8, mi355x, low_latency=False, kernel_ms=cdna4)
    assert small == pytest.approx(0.031 + 0.036, rel=0.1)
    published = received * 7168 * (1 / 345e9 + 2 / 420e9) * 1e3
    big = deepep_ms(4096, 8, 7168, 8, mi355x, low_latency=False, kernel_ms=cdna4)
    assert big == pytest.approx(published, rel=0.15)


def test_moe_reads_top_k_experts_at_one_token_and_all_of_them_at_many() -> None:
    st = step_time_for(MIXTRAL, find_gpu("a100-sxm4-80gb"), tp=4)
    assert st.experts_read(1) == pytest.approx(MIXTRAL.experts_per_token)
    assert st.experts_read(256) == pytest.approx(MIXTRAL.num_experts, rel=1e-3)
    one = st.terms(1, 100).weights_read_bytes
    many = st.terms(256, 100).weights_read_bytes
    assert many - one == pytest.approx((8 - 2) * st.expert_bytes, rel=1e-3)
    assert st.dense_weights_bytes + 8 * st.expert_bytes == pytest.approx(
        (MIXTRAL.weights_bytes - MIXTRAL.vocab_size * MIXTRAL.hidden_size * 2) / 4, rel=1e-3
    )


def test_idle_experts_cost_their_early_exits_and_routed_ones_only_their_read() -> None:
    # Qwen3-30B-A3B: 48 MoE layers of 128 experts, top-8. At one token 120 experts are idle in
    # every layer; at 1,024 tokens none is: the fixed cost falls to the routing kernels.
    qwen = resolve_model(None, str(MODELS / "Qwen--Qwen3-30B-A3B"))
    st = step_time_for(qwen, find_gpu("a100-sxm4-80gb"), tp=1)
    per_layer = KERNEL_MS_PER_LAYER + MOE_KERNEL_MS_PER_LAYER
    assert st.terms(1, 100).kernels_ms == pytest.approx(
        48 * (per_layer + 120 * MOE_MS_PER_IDLE_EXPERT)
    )
    assert st.terms(1024, 100).kernels_ms == pytest.approx(48 * per_layer, rel=1e-6)
    # the read of a newly routed expert outlasts the exit it replaces: a step never shortens
    times = [st.step_ms(b, 100) for b in (1, 2, 4, 8, 16, 32, 64, 128, 256)]
    assert times == sorted(times)
    # under expert parallelism a GPU's idle experts are its share: DeepSeek-V3 at EP 8 holds 32
    # of 256 per GPU, of which 32 x (1 - 8 / 256) = 31 idle at one token, in 58 MoE layers
    deepseek = load_model_preset("deepseek-v3")
    ep = step_time_for(deepseek, find_gpu("a100-sxm4-80gb"), tp=8, exchange=EP8)
    assert ep.experts_per_gpu == 32
    assert ep.moe_fixed_ms(1) == pytest.approx(
        58 * (MOE_KERNEL_MS_PER_LAYER + 31 * MOE_MS_PER_IDLE_EXPERT)
    )
    assert ep.moe_fixed_ms(4096) == pytest.approx(58 * MOE_KERNEL_MS_PER_LAYER, rel=1e-6)
    # Hopper: NVIDIA's tables time each engine's fused MoE layer at 1-4 tokens at its routed
    # experts' stream + a fixed cost (its routing kernels and three GEMM floors), idle experts
    # costing nothing: vLLM's 46.9 us, SGLang's 38.3 us; SGLang's gpt-oss keeps the estimates
    h200 = find_gpu("h200")
    vllm = step_time_for(deepseek, h200, tp=8, exchange=EP8, engine="vllm")
    assert vllm.moe_fixed_ms(1) == pytest.approx(58 * 0.0469)
    assert vllm.moe_fixed_ms(4096) == pytest.approx(58 * 0.0469)
    sglang = step_time_for(deepseek, h200, tp=8, exchange=EP8, engine="sglang")
    assert sglang.moe_fixed_ms(1) == pytest.approx(58 * 0.0383)
    assert sglang.moe_fixed_ms(4096) == pytest.approx(58 * 0.0383)
    oss = resolve_model(None, str(MODELS / "openai--gpt-oss-120b"))
    oss_sglang = step_time_for(oss, h200, tp=2, engine="sglang")
    routing = MOE_KERNEL_MS_PER_LAYER + 3 * 0.0039
    assert oss_sglang.moe_fixed_ms(1) == pytest.approx(
        36 * (routing + 124 * MOE_MS_PER_IDLE_EXPERT)
    )


def benchmark_script(name: str) -> Any:
    """A script of benchmarks/ loaded as a module (they are scripts, not a package)."""
    spec = importlib.util.spec_from_file_location(
        f"{name}_bench", ROOT / "benchmarks" / f"{name}.py"
    )
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_a_gemm_kernel_costs_its_familys_floor_beyond_the_layer_cost() -> None:
    # Llama-3.1-8B: 32 layers, each a GQA attention block (fused QKV, O) and a dense MLP
    # (gate_up, down): 4 GEMMs a layer, 6 us each on AMD, 3.9 us on Hopper (measured, beside
    # its own 25 us a layer), none on Ampere (inside its fitted 17 us a layer)
    assert gemm_launches_per_layer(LLAMA8) == 4.0 and GEMMS_PER_MOE_BLOCK == 3
    amd = step_time_for(LLAMA8, find_gpu("mi300x")).terms(1, 1)
    assert amd.kernels_ms == pytest.approx(32 * (KERNEL_MS_PER_LAYER + 4 * AMD_GEMM_FLOOR_MS))
    hopper = step_time_for(LLAMA8, find_gpu("h100")).terms(1, 1)
    assert hopper.kernels_ms == pytest.approx(
        32 * (HOPPER_KERNEL_MS_PER_LAYER + 4 * HOPPER_GEMM_FLOOR_MS)
    )
    assert HOPPER_KERNEL_MS_PER_LAYER == 0.025 and HOPPER_GEMM_FLOOR_MS == 0.0039
    ampere = step_time_for(LLAMA8, find_gpu("a100-sxm4-80gb")).terms(1, 1)
    assert ampere.kernels_ms == pytest.approx(32 * KERNEL_MS_PER_LAYER)
    # DeepSeek-V3: 61 MLA blocks (5 GEMMs in the absorbed form), 3 dense MLPs, 58 MoE blocks
    # (router and the grouped GEMM's two stages)
    deepseek = load_model_preset("deepseek-v3")
    assert gemm_launches_per_layer(deepseek) == pytest.approx((61 * 5 + 3 * 2) / 61)
    ds = step_time_for(deepseek, find_gpu("mi300x"), tp=8, engine="sglang")
    fixed = 61 * (KERNEL_MS_PER_LAYER + (61 * 5 + 3 * 2) / 61 * AMD_GEMM_FLOOR_MS)
    routing = 58 * (MOE_KERNEL_MS_PER_LAYER + 3 * AMD_GEMM_FLOOR_MS)
    assert ds.terms(4096, 1).kernels_ms == pytest.approx(fixed + routing, rel=1e-6)
    # Qwen3-30B-A3B: every layer a GQA block and a MoE block
    qwen = resolve_model(None, str(MODELS / "Qwen--Qwen3-30B-A3B"))
    assert gemm_launches_per_layer(qwen) == 2.0


def test_amds_constants_are_what_the_published_kernel_tables_give() -> None:
    # the streaming share is the fit of AITER's gfx942 GEMMs at 1-16 tokens on MI300X's peak, and
    # the fixed cost a GEMM no more than what that fit and the same shapes against the H800 keep
    bench = benchmark_script("gemm_kernels")
    rows = bench.load(bench.ROWS)
    fixed_us, stream, shapes = bench.decode_fit(rows, "gfx942")
    assert shapes == 92
    peak = find_gpu("mi300x").hbm_bandwidth_bytes_per_s
    assert peak and stream / peak == pytest.approx(AMD_BANDWIDTH_EFFICIENCY, abs=0.005)
    pairs = bench.same_shape_floors(rows, "gfx942", "mi300x")
    assert len(pairs) == 2
    kept = [amd - nvidia for _, amd, nvidia in pairs]
    assert AMD_GEMM_FLOOR_MS * 1e3 <= min(fixed_us, *kept) < AMD_GEMM_FLOOR_MS * 1e3 + 0.5


def test_amd_prefill_factors_are_what_the_kernel_tables_give() -> None:
    # each AMD factor, times H100's BF16 share, is the median share of the rate AITER's tuned
    # GEMMs reach at 8K-32K tokens; FP4 on CDNA4 within 0.01 of the FP8 factor it takes
    bench = benchmark_script("gemm_kernels")
    measured = bench.large_m_shares(bench.load(bench.ROWS))
    modelled = bench.modelled_shares()
    assert set(measured) == set(modelled)
    for key, (share, shapes) in measured.items():
        assert shapes >= 90, key
        tolerance = 0.01 if key[1].startswith("a4w4") else 0.0005
        assert modelled[key] == pytest.approx(share, abs=tolerance), key


def test_amd_mid_m_slowdowns_are_what_the_kernel_tables_give() -> None:
    # each factor the planner gives SGLang's AMD GEMMs between decode and prefill is AITER's
    # median (time - the floor) / modelled time at that token count, to the table's 2 decimals
    bench = benchmark_script("gemm_kernels")
    measured = bench.mid_m_ratios(bench.load(bench.ROWS))
    kernels = {"bf16": "bf16 GEMM", "fp8": "a8w8 GEMM", "fp8-block": "a8w8 block-scaled GEMM"}
    for arch, table in (("gfx950", CDNA4_MID_M_SLOWDOWN), ("gfx942", CDNA3_MID_M_SLOWDOWN)):
        for kind, points in table.items():
            for tokens, factor in points[1:-1]:
                got = measured[arch, kernels[kind]][tokens]
                assert factor == pytest.approx(got, abs=0.006), (arch, kind, tokens)
            assert points[0] == (16, 1.0) and points[-1][1] == 1.0
            assert measured[arch, kernels[kind]][points[-1][0]] == pytest.approx(1.0, abs=0.025)


def test_mid_m_slowdown_runs_in_log_tokens_between_its_points() -> None:
    points = CDNA4_MID_M_SLOWDOWN["bf16"]
    assert slowdown_at(points, 1) == slowdown_at(points, 16) == 1.0
    assert slowdown_at(points, 512) == pytest.approx(1.57)
    assert slowdown_at(points, 32) == pytest.approx(1 + 0.29 * math.log(2) / math.log(8))
    assert slowdown_at(points, 362) == pytest.approx(
        1.52 + 0.05 * math.log(362 / 256) / math.log(2)
    )
    assert slowdown_at(points, 8192) == slowdown_at(points, 65536) == slowdown_at((), 512) == 1.0


def test_sglang_on_amd_pays_the_mid_m_slowdown_vllm_and_nvidia_do_not() -> None:
    # Llama-3.1-8B in bf16: a 512-token prefill chunk's dense GEMMs on an MI355X under SGLang
    # take 1.57x what vLLM's (hipBLASLt, unmeasured) take; decode at 8 and prefill at 8,192 the
    # same; on an MI300X AITER tunes no 16-bit GEMM, and NVIDIA's are within the overlap
    def body_ms(gpu_id: str, engine: str, tokens: int) -> float:
        return step_time_for(LLAMA8, find_gpu(gpu_id), engine=engine).linear_parts(tokens)[0]

    assert body_ms("mi355x", "sglang", 512) == pytest.approx(1.57 * body_ms("mi355x", "vllm", 512))
    for tokens in (8, 8192):
        assert body_ms("mi355x", "sglang", tokens) == pytest.approx(
            body_ms("mi355x", "vllm", tokens)
        )
    for gpu_id in ("mi300x", "h200"):
        assert body_ms(gpu_id, "sglang", 512) == pytest.approx(body_ms(gpu_id, "vllm", 512))
    # DeepSeek-V3's block-scaled fp8 on an MI300X under SGLang: its dense GEMMs at 256 tokens
    v3 = load_model_preset("deepseek-v3")
    sglang = step_time_for(v3, find_gpu("mi300x"), tp=8, engine="sglang")
    vllm = step_time_for(v3, find_gpu("mi300x"), tp=8, engine="vllm")
    assert sglang.gemm_kind == "fp8-block"
    assert sglang.linear_parts(256)[0] == pytest.approx(1.61 * vllm.linear_parts(256)[0])


def test_block_scaled_fp8_prefills_slower_on_amd_only() -> None:
    # DeepSeek-V3's own checkpoint scales per 128 x 128 tile; the same weights re-quantized
    # online scale per tensor. AMD's block-scaled dense GEMMs reach less of the fp8 rate,
    # NVIDIA's (DeepGEMM) as much; a decode step, which streams weights, is the same either way
    # (the experts' fused MoE kernels take their own shares: test_amd_moe_*)
    v3 = load_model_preset("deepseek-v3")
    assert v3.fp8_block_scaled and not LLAMA8.fp8_block_scaled
    per_tensor = v3.model_copy(update={"fp8_block_scaled": False})
    for gpu_id, slower in (("mi300x", True), ("mi355x", True), ("h200", False)):
        own = step_time_for(v3, find_gpu(gpu_id), tp=8)
        online = step_time_for(per_tensor, find_gpu(gpu_id), tp=8)
        body, online_body = own.linear_parts(8192)[0], online.linear_parts(8192)[0]
        assert (body > online_body * 1.1) is slower, gpu_id
        assert own.step_ms(8, 2000) == pytest.approx(online.step_ms(8, 2000), rel=0.01), gpu_id


def test_amd_moe_factors_are_what_the_kernel_tables_give() -> None:
    # each family's fused-MoE share is the width fit through AITER's tuned fused MoE layers at
    # 8K-32K tokens (where the tables time one width, the table's median there, on gfx942's half
    # width), and every kind the tables time has one; OpenAI's weight-only MXFP4, which no table
    # times, takes the family's bf16 share
    bench = benchmark_script("gemm_kernels")
    rows = bench.load(bench.ROWS)
    measured, points = bench.moe_large_m_fits(rows), bench.moe_large_m_points(rows)
    planner = {"gfx942": CDNA3_MOE_SHARES, "gfx950": CDNA4_MOE_SHARES}
    timed = {(arch, kind) for arch, shares in planner.items() for kind in shares if kind != "mxfp4"}
    assert timed == set(measured)
    for arch, shares in planner.items():
        assert shares["mxfp4"] == shares["bf16"], arch
    for (arch, kind), (ceiling, half, shapes) in measured.items():
        assert shapes >= 3, (arch, kind)
        own_ceiling, own_half = planner[arch][kind]
        if half is None:
            width = points[(arch, kind)][0][0]
            assert own_half == CDNA3_MOE_SHARES[kind][1], (arch, kind)
            at_width = own_ceiling * width / (width + own_half)
            assert at_width == pytest.approx(ceiling, abs=0.0005), (arch, kind)
        else:
            assert (own_ceiling, own_half) == (pytest.approx(ceiling, abs=0.0005), half)
    # the factor at a DeepSeek-V3 TP 8 width (256 columns) is below the dense share each time
    for shares, dense in (
        (CDNA3_MOE_SHARES, CDNA3_DENSE_GEMM_SHARES),
        (CDNA4_MOE_SHARES, CDNA4_DENSE_GEMM_SHARES),
    ):
        for kind, (ceiling, half) in shares.items():
            at_256 = ceiling * (256 / (256 + half) if half else 1.0)
            assert 0.2 < at_256 / dense[kind] < 0.8, kind


def test_sglang_prefills_experts_at_its_own_kernels_share() -> None:
    # SGLang 0.5.14's fused MoE on the H200 (Triton) and the B200 (TRT-LLM), timed at 8K-32K
    # tokens by NVIDIA's collector: its own width fits, which SGLang takes; vLLM keeps its
    # tables', and a kind SGLang's tables do not time (bf16 on the B200) keeps vLLM's
    bench = benchmark_script("nvidia_kernels")
    rows = bench.load(bench.ROWS)
    for card, shares in (
        ("h200_sxm", HOPPER_SGLANG_MOE_SHARES),
        ("b200_sxm", BLACKWELL_SGLANG_MOE_SHARES),
    ):
        for kind, (ceiling, half) in shares.items():
            fitted, fitted_half, _ = bench.moe_width_fit(
                bench.moe_points(rows, card, kind, "moe_sglang")
            )
            assert (ceiling, half) == (pytest.approx(fitted, abs=0.0005), fitted_half), kind
    v3 = load_model_preset("deepseek-v3")
    # DeepSeek's block-scaled fp8 experts, 256 columns a GPU at TP 8
    for gpu_id, (sglang, sglang_half), (vllm, vllm_half) in (
        ("h200", HOPPER_SGLANG_MOE_SHARES["fp8-block"], HOPPER_MOE_SHARES["fp8-block"]),
        ("b200", BLACKWELL_SGLANG_MOE_SHARES["fp8-block"], BLACKWELL_MOE_SHARES["fp8-block"]),
    ):
        gpu = find_gpu(gpu_id)
        ratio = (
            step_time_for(v3, gpu, tp=8, engine="sglang").moe_gemm_scale
            / step_time_for(v3, gpu, tp=8, engine="vllm").moe_gemm_scale
        )
        expected = (sglang * 256 / (256 + sglang_half)) / (vllm * 256 / (256 + vllm_half))
        assert ratio == pytest.approx(expected, rel=1e-3), gpu_id
    mixtral = load_model_preset("mixtral-8x7b")
    b200 = find_gpu("b200")
    assert step_time_for(mixtral, b200, tp=8, engine="sglang").moe_gemm_scale == (
        step_time_for(mixtral, b200, tp=8, engine="vllm").moe_gemm_scale
    )


def test_an_fp8_kv_cache_streams_at_each_engines_measured_share_on_hopper() -> None:
    # NVIDIA's tables of the decode kernels on the H200: vLLM's FlashAttention-3 streams an fp8
    # cache at 0.72 of its bf16 share, SGLang's (its default backend there) at 0.57; the B200's
    # kernel streams both alike, and a bf16 cache is the same under either engine
    bench = benchmark_script("nvidia_kernels")
    rows = bench.load(bench.ROWS)
    hopper = family_of(find_gpu("h200"))
    for engine, table in (("vllm", "attention"), ("sglang", "attention_sglang")):
        fp8 = bench.attention_fit(rows, "h200_sxm", "fp8", table)[1]
        bf16 = bench.attention_fit(rows, "h200_sxm", "bfloat16", table)[1]
        assert fp8_kv_scale(hopper, engine) == pytest.approx(fp8 / bf16, abs=2e-3), engine
    assert fp8_kv_scale(family_of(find_gpu("b200")), "sglang") == 1.0
    llama = load_model_preset("llama-3.1-8b")
    h200 = find_gpu("h200")
    kv = 2_000_000_000  # an fp8 cache's bytes; the same tokens take twice that in bf16
    steps = {
        (engine, kv_bytes): step_time_for(llama, h200, engine=engine, kv_dtype_bytes=kv_bytes)
        for engine in ("vllm", "sglang")
        for kv_bytes in (1, 2)
    }
    assert steps["vllm", 2].kv_read_ms(2 * kv) == steps["sglang", 2].kv_read_ms(2 * kv)
    ratio = steps["sglang", 1].kv_read_ms(kv) / steps["vllm", 1].kv_read_ms(kv)
    assert ratio == pytest.approx(0.696 / 0.970 / (0.549 / 0.967), rel=0.01)


def test_aiters_fused_moe_charges_no_idle_expert_on_cdna4_under_sglang() -> None:
    # AITER's fused MoE on gfx950 at 1-4 tokens: the routed experts' stream and a fixed time
    # (about the three GEMM floors the family charges), nothing for experts no token reached.
    # SGLang runs it there; vLLM's ROCm build (Triton) and CDNA3 (too few rows) keep the estimate
    bench = benchmark_script("gemm_kernels")
    rows = bench.load(bench.ROWS)
    fixed_us, per_idle_us, n = bench.moe_decode_fit(rows, "gfx950")
    assert n >= 100 and abs(per_idle_us) < 0.05
    assert fixed_us == pytest.approx(3 * AMD_GEMM_FLOOR_MS * 1e3, rel=0.3)
    mi355x, mi300x = family_of(find_gpu("mi355x")), family_of(find_gpu("mi300x"))
    assert moe_decode_costs(mi355x, "sglang", "fp8-block") == (MOE_KERNEL_MS_PER_LAYER, 0.0, {})
    assert moe_decode_costs(mi355x, "vllm")[1] == MOE_MS_PER_IDLE_EXPERT
    assert moe_decode_costs(mi300x, "sglang")[1] == MOE_MS_PER_IDLE_EXPERT
    # DeepSeek-V3 at TP 8 keeps all 256 experts on each GPU: one sequence's step drops by the
    # 58 MoE layers' idle experts under SGLang alone
    v3 = load_model_preset("deepseek-v3")
    gpu = find_gpu("mi355x")
    sglang = step_time_for(v3, gpu, tp=8, engine="sglang").step_ms(1, 2000)
    vllm = step_time_for(v3, gpu, tp=8, engine="vllm").step_ms(1, 2000)
    assert vllm - sglang == pytest.approx(58 * 248 * MOE_MS_PER_IDLE_EXPERT, rel=0.1)


def test_amd_moe_prefill_takes_the_fused_moe_share_and_decode_does_not() -> None:
    # DeepSeek-V3's experts (block-scaled fp8) over a 16K-token prefill: the multiply sets their
    # time, so it grows by about 1 / the factor on AMD; a decode step streams the same experts
    # and moves by under 1%; NVIDIA and the dense layers are untouched
    v3 = load_model_preset("deepseek-v3")
    # SGLang's Triton fused MoE on Hopper over experts 2,048 / 8 = 256 wide on each GPU (TP 8)
    hopper = (
        HOPPER_SGLANG_MOE_GEMM_SCALE["fp8-block"]
        * 256
        / (256 + HOPPER_SGLANG_MOE_HALF_WIDTH["fp8-block"])
    )
    for gpu_id, kind_share in (
        ("mi355x", 0.191 / 0.349 * 256 / (256 + 109)),
        ("mi300x", 0.411 / 0.316 * 256 / (256 + 301)),
        ("h200", hopper),
    ):
        curve = step_time_for(v3, find_gpu(gpu_id), tp=8, engine="sglang")
        assert curve.moe_gemm_scale == pytest.approx(kind_share, rel=1e-3), gpu_id
        plain = curve.model_copy(update={"moe_gemm_scale": 1.0})
        body, experts, head = curve.linear_parts(16384)
        assert (body, head) == plain.linear_parts(16384)[::2]
        grown = experts / plain.linear_parts(16384)[1]
        assert grown == pytest.approx(1 / kind_share, rel=0.1), gpu_id
        assert curve.step_ms(8, 2000) == pytest.approx(plain.step_ms(8, 2000), rel=0.01)
    # OpenAI's MXFP4 experts are weight-only on AMD too (the engines' W4A16 kernels): the bf16
    # rate at the family's bf16 share; AMD's fp8-activation export of them (a Quark
    # checkpoint) runs at the fp8 rate with AITER's MXFP4 x FP8 share on CDNA4, none on CDNA3
    oss = resolve_model(None, str(MODELS / "openai--gpt-oss-120b"))
    quark = oss.model_copy(update={"weight_dtype": "mxfp4-quark-a8"})
    width = 2880
    for gpu_id, own_share, quark_share in (
        ("mi355x", 0.220 * (384 + 161) / 384 / 0.581 * width / (width + 161), 0.402 / 0.491),
        ("mi300x", 0.306 / (0.73 * 0.62) * width / (width + 161), None),
    ):
        gpu = find_gpu(gpu_id)
        own, export = step_time_for(oss, gpu, tp=1), step_time_for(quark, gpu, tp=1)
        assert (own.flops_per_s, export.flops_per_s) == (gpu.bf16_dense_flops, gpu.fp8_dense_flops)
        assert own.moe_gemm_scale == pytest.approx(own_share, rel=1e-3), gpu_id
        if quark_share is None:  # no table times that kernel on CDNA3
            assert export.moe_gemm_scale == 1.0
        else:
            assert export.moe_gemm_scale == pytest.approx(
                quark_share * width / (width + 250), rel=1e-3
            )
        # a long prefill's experts at the 16-bit rate take longer; decode streams the same bytes
        assert own.linear_parts(16384)[1] > 1.5 * export.linear_parts(16384)[1], gpu_id
        assert own.step_ms(1, 2000) == pytest.approx(export.step_ms(1, 2000), rel=0.01)
    # AMD's w4a4 MXFP4 export of DeepSeek-R1 multiplies at gfx950's fp4 rate, its experts at
    # AITER's a4w4 share (kind fp4: 0.227 x w / (w + 287) of the fp4 rate); gfx942 has none
    r1 = load_model_preset("deepseek-v3")
    on_gfx950 = step_time_for(r1, find_gpu("mi355x"), tp=8, weight_dtype="mxfp4")
    assert on_gfx950.flops_per_s == find_gpu("mi355x").fp4_dense_flops
    dense_share = 0.491 / 0.581  # FP4 takes the FP8 factor over the bf16 share on CDNA4
    assert on_gfx950.low_precision_scale == pytest.approx(dense_share, rel=1e-3)
    share = 0.227 / 0.491 * 256 / (256 + 287)
    assert on_gfx950.moe_gemm_scale == pytest.approx(share, rel=1e-3)
    on_gfx942 = step_time_for(r1, find_gpu("mi300x"), tp=8, weight_dtype="mxfp4")
    assert on_gfx942.flops_per_s == find_gpu("mi300x").fp8_dense_flops


def test_nvidia_moe_factors_are_what_the_kernel_tables_give() -> None:
    # each NVIDIA family's fused-MoE share is the width fit through NVIDIA's kernel tables
    # (vLLM 0.24.0 on an H200 and a B200), and every kind the tables time has one
    bench = benchmark_script("nvidia_kernels")
    rows = bench.load(bench.ROWS)
    planner = {"h200_sxm": HOPPER_MOE_SHARES, "b200_sxm": BLACKWELL_MOE_SHARES}
    for card, shares in planner.items():
        kinds = {r["kind"] for r in rows if r["table"] == "moe" and r["card"] == card}
        assert kinds <= set(shares), card
        for kind in kinds:
            points = bench.moe_width_fit(bench.moe_points(rows, card, kind))
            ceiling, half, error = points
            assert shares[kind] == (pytest.approx(ceiling, abs=0.0005), half), (card, kind)
            assert error < 0.1, (card, kind)
    # a fused MoE layer's fixed cost at 1-4 tokens, beyond its routed experts' stream: the
    # families' routing kernels and three GEMM floors, and no cost for idle experts
    for card, gpu_id in (("h200_sxm", "h200"), ("b200_sxm", "b200")):
        fixed_us, per_idle_us, n = bench.moe_fixed_fit(rows, card)
        own = family_of(find_gpu(gpu_id))
        assert n >= 500 and abs(per_idle_us) < 0.1 and own.moe_ms_per_idle_expert == 0
        own_us = (own.moe_kernel_ms_per_layer + 3 * own.gemm_floor_ms) * 1e3
        assert own_us == pytest.approx(fixed_us, abs=0.05), card
    # SGLang 0.5.14's own fused MoE kernels, in the same collector's tables: their fixed cost
    # at 1-4 tokens, and no idle-expert cost either; its gpt-oss MXFP4 experts keep the earlier
    # estimates (its PD rows), as every MoE kind does under SGLang elsewhere
    for card, gpu_id in (("h200_sxm", "h200"), ("b200_sxm", "b200")):
        fixed_us, per_idle_us, n = bench.moe_fixed_fit(rows, card, "moe_sglang")
        own = family_of(find_gpu(gpu_id))
        assert n >= 300 and abs(per_idle_us) < 0.1 and own.sglang_moe_kernel_ms_per_layer
        own_us = (own.sglang_moe_kernel_ms_per_layer + 3 * own.gemm_floor_ms) * 1e3
        assert own_us == pytest.approx(fixed_us, abs=0.05), card
        assert moe_decode_costs(own, "sglang", "fp8-block")[:2] == (
            own.sglang_moe_kernel_ms_per_layer,
            0.0,
        )
        assert moe_decode_costs(own, "sglang", "mxfp4")[:2] == (
            MOE_KERNEL_MS_PER_LAYER,
            MOE_MS_PER_IDLE_EXPERT,
        )
    ampere = family_of(find_gpu("a100-sxm4-80gb"))
    assert moe_decode_costs(ampere, "sglang", "bf16")[1] == MOE_MS_PER_IDLE_EXPERT
    # gpt-oss's MXFP4 experts stream at their own share of peak under vLLM (the kernels unpack
    # 4-bit weights): a decode step at 64 sequences reads every expert that much slower
    oss = resolve_model(None, str(MODELS / "openai--gpt-oss-120b"))
    for card, gpu_id in (("h200_sxm", "h200"), ("b200_sxm", "b200")):
        _, share, n = bench.moe_stream_fit(rows, card, "mxfp4")
        assert n >= 100 and 0.4 < share < 0.6, card
        own = family_of(find_gpu(gpu_id)).moe_stream_share["mxfp4"]
        assert own == pytest.approx(share, abs=0.0005), card
        curve = step_time_for(oss, find_gpu(gpu_id), tp=2, engine="vllm")
        assert curve.moe_stream_scale == pytest.approx(own / 0.85)
    assert step_time_for(oss, find_gpu("h200"), tp=2, engine="sglang").moe_stream_scale == 1
    # on the PCIe cards vLLM runs them through Marlin, which streams them faster (Ada's L40S and
    # SM120's RTX PRO 6000, each chip's cards alike); the B200 keeps TRT-LLM's
    for card, gpu_id in (("l40s", "rtx-4090"), ("rtx_pro_6000_server", "rtx-pro-6000-blackwell")):
        _, share, n = bench.moe_stream_fit(rows, card, "mxfp4")
        own = family_of(find_gpu(gpu_id)).moe_stream_share
        assert n >= 100 and own["mxfp4"] == pytest.approx(share, abs=0.0005), card
    assert (
        family_of(find_gpu("rtx-5090")).moe_stream_share["mxfp4-mxfp8"]
        == (family_of(find_gpu("b200")).moe_stream_share["mxfp4-mxfp8"])
    )
    # SGLang runs them on Blackwell with MXFP8 activations (FlashInfer's TRT-LLM MXFP4 MoE):
    # its own kernel table's stream, its fixed cost, no idle-expert exits and, in prefill, the
    # fp8 rate at that kernel's share, where vLLM multiplies 16-bit activations
    b200 = find_gpu("b200")
    blackwell = family_of(b200)
    fixed_us, share, n = bench.moe_stream_fit(rows, "b200_sxm", "mxfp4-mxfp8", "moe_sglang")
    assert n >= 100 and share > 0.8
    assert blackwell.moe_stream_share["mxfp4-mxfp8"] == pytest.approx(share, abs=0.0005)
    ceiling, half, _ = bench.moe_width_fit(
        bench.moe_points(rows, "b200_sxm", "mxfp4-mxfp8", "moe_sglang")
    )
    assert BLACKWELL_MOE_SHARES["mxfp4-mxfp8"] == (pytest.approx(ceiling, abs=0.0005), half)
    assert moe_decode_costs(blackwell, "sglang", "mxfp4-mxfp8") == (
        blackwell.sglang_moe_kernel_ms_per_layer,
        0.0,
        {"mxfp4-mxfp8": blackwell.moe_stream_share["mxfp4-mxfp8"]},
    )
    sglang = step_time_for(oss, b200, tp=1, engine="sglang")
    vllm = step_time_for(oss, b200, tp=1, engine="vllm")
    assert sglang.moe_stream_scale == pytest.approx(share / 0.85, abs=1e-3)
    assert (sglang.flops_per_s, vllm.flops_per_s) == (b200.fp8_dense_flops, b200.bf16_dense_flops)

    # the two kernels' experts multiply at their tables' shares of their own rates
    def experts_rate(curve: StepTime) -> float:
        return curve.flops_per_s * curve.low_precision_scale * curve.moe_gemm_scale

    bf16_ceiling, bf16_half = BLACKWELL_MOE_SHARES["mxfp4"]
    tables = (b200.fp8_dense_flops * ceiling * 2880 / (2880 + half)) / (
        b200.bf16_dense_flops * bf16_ceiling * 2880 / (2880 + bf16_half)
    )
    assert experts_rate(sglang) / experts_rate(vllm) == pytest.approx(tables, rel=1e-3)
    assert sglang.step_ms(64, 2000) < 0.8 * vllm.step_ms(64, 2000)
    assert sglang.linear_ms(8192) < 0.6 * vllm.linear_ms(8192)
    # Blackwell's dense factors are the B200's shares over bf16's (and over the H200's)
    h200, b200 = bench.dense_shares(rows, "h200_sxm"), bench.dense_shares(rows, "b200_sxm")
    assert pytest.approx(b200["bf16"][0] / h200["bf16"][0], abs=2e-3) == BLACKWELL_COMPUTE_SCALE
    for kind, factor in (
        ("fp8", BLACKWELL_LOW_PRECISION_SCALE),
        ("fp8-block", BLACKWELL_BLOCK_FP8_SCALE),
        ("fp4", BLACKWELL_FP4_SCALE),
    ):
        assert factor == pytest.approx(b200[kind][0] / b200["bf16"][0], abs=2e-3), kind
    # Ada's and SM120 Blackwell's are their own PCIe cards' (L40S, RTX PRO 6000): every card of
    # the chip takes them, the B200 keeps its own
    for card, gpu_ids in (
        ("l40s", ("l40s", "l4", "rtx-4090")),
        ("rtx_pro_6000_server", ("rtx-pro-6000-blackwell", "rtx-5090")),
    ):
        shares = bench.dense_shares(rows, card)
        bf16 = shares["bf16"][0]
        for gpu_id in gpu_ids:
            own = family_of(find_gpu(gpu_id))
            assert own.compute_scale == pytest.approx(bf16 / h200["bf16"][0], abs=2e-3)
            assert own.low_precision_scale == pytest.approx(shares["fp8"][0] / bf16, abs=2e-3)
            assert own.basis == "extrapolated" and "kernel tables" in own.source
    assert family_of(find_gpu("l40s")).block_fp8_scale == pytest.approx(
        bench.dense_shares(rows, "l40s")["fp8-block"][0]
        / bench.dense_shares(rows, "l40s")["bf16"][0],
        abs=2e-3,
    )
    rtx = bench.dense_shares(rows, "rtx_pro_6000_server")
    assert family_of(find_gpu("rtx-5090")).fp4_scale == pytest.approx(
        rtx["fp4"][0] / rtx["bf16"][0], abs=2e-3
    )
    assert family_of(find_gpu("b200")).compute_scale == BLACKWELL_COMPUTE_SCALE
    # Blackwell Ultra (B300, GB300) takes the B300's: its NVFP4 GEMMs reach a smaller share of
    # its larger FP4 rate, so prefill in NVFP4 is barely faster than on a B200, not 1.5x
    b300 = bench.dense_shares(rows, "b300_sxm")
    for gpu_id in ("b300", "gb300"):
        ultra = family_of(find_gpu(gpu_id))
        assert ultra.fp4_scale == pytest.approx(b300["fp4"][0] / b300["bf16"][0], abs=2e-3)
        assert ultra.compute_scale == pytest.approx(b300["bf16"][0] / h200["bf16"][0], abs=2e-3)
    llama = resolve_model(None, str(MODELS / "meta-llama--Llama-3.1-70B"))
    prefill = {
        gpu_id: step_time_for(llama, find_gpu(gpu_id), tp=8, weight_dtype="nvfp4").linear_ms(8192)
        for gpu_id in ("b200", "b300")
    }
    assert 0.85 * prefill["b200"] < prefill["b300"] < prefill["b200"]


def test_an_mla_layer_costs_what_nvidias_module_tables_give() -> None:
    # DeepSeek-V3's whole MLA attention module at TP 8, timed by NVIDIA in a CUDA graph, takes
    # a fixed time beyond the parts the model prices; each family carries the median, by the
    # projections' kind and the latent cache's dtype
    bench = benchmark_script("nvidia_kernels")
    rows = bench.load(bench.ROWS)
    for card, gpu_id in (("h200_sxm", "h200"), ("b200_sxm", "b200")):
        own = family_of(find_gpu(gpu_id)).mla_layer_ms
        fits = bench.mla_module_extras(rows, card)
        assert {k for k, _ in fits} == set(own) == {"bf16", "fp8-block"}
        for (kind, kv), (extra_us, n) in fits.items():
            assert n == 91
            assert own[kind][kv == "fp8"] * 1e3 == pytest.approx(extra_us, abs=0.05), (card, kind)
    # DeepSeek-V3's own block-scaled checkpoint on 8 H200s: its 61 MLA layers take 61.5 us each
    # more a step (80.4 with an fp8 latent); a dense model, AMD and a GQA MoE take nothing more
    v3 = load_model_preset("deepseek-v3")
    h200 = find_gpu("h200")
    st = step_time_for(v3, h200, tp=8)
    assert st.mla_layer_ms == pytest.approx(0.0615)
    plain = st.model_copy(update={"kernel_ms_per_layer": st.kernel_ms_per_layer - 0.0615})
    assert st.step_ms(1, 2000) - plain.step_ms(1, 2000) == pytest.approx(61 * 0.0615)
    assert step_time_for(v3, h200, tp=8, kv_dtype_bytes=1).mla_layer_ms == pytest.approx(0.0804)
    assert step_time_for(v3, find_gpu("b200"), tp=8).mla_layer_ms == pytest.approx(0.0140)
    assert step_time_for(v3, find_gpu("mi300x"), tp=8).mla_layer_ms == 0
    assert step_time_for(LLAMA8, h200).mla_layer_ms == 0
    qwen = resolve_model(None, str(MODELS / "Qwen--Qwen3-30B-A3B"))
    assert step_time_for(qwen, h200, tp=8).mla_layer_ms == 0


def test_custom_all_reduces_are_what_the_kernel_tables_give() -> None:
    # NVIDIA's tables time vLLM's custom all-reduce in a CUDA graph: the B200's and the A100's
    # are the planner's; the H200's agrees with the one measured on our own H200, which it keeps
    bench = benchmark_script("nvidia_kernels")
    rows = bench.load(bench.ROWS)
    for card, gpu_id, exact in (
        ("b200_sxm", "b200", True),
        ("a100_sxm", "a100-sxm4-80gb", True),
        ("h200_sxm", "h200", False),
    ):
        small_us, link_share = bench.allreduce_fit(rows, card)
        own = family_of(find_gpu(gpu_id)).allreduce
        assert own is not None and own.hop_ms == 0
        tolerance = (0.05, 0.005) if exact else (0.2, 0.05)
        assert own.fixed_ms * 1e3 == pytest.approx(small_us, abs=tolerance[0]), card
        assert own.link_share == pytest.approx(link_share, abs=tolerance[1]), card
    # Ampere's holds under the engines that run the kernel and over NVLink only: vLLM's V0
    # engine, LMDeploy and a PCIe card keep the per-peer hop; at TP 8 the custom kernel costs a
    # tenth of the hop's
    llama70 = resolve_model(None, str(MODELS / "meta-llama--Llama-3.1-70B"))
    a100 = find_gpu("a100-sxm4-80gb")
    new = step_time_for(llama70, a100, tp=8, engine="vllm", version=(0, 8, 0))
    old = step_time_for(llama70, a100, tp=8, engine="vllm", version=(0, 4, 0))
    assert new.allreduce.fixed_ms == AMPERE_ALLREDUCE_MS and old.allreduce.hop_ms > 0
    assert new.allreduce_ms(1) < 0.15 * old.allreduce_ms(1)
    assert step_time_for(llama70, a100, tp=8, engine="lmdeploy").allreduce.hop_ms > 0
    # past two PCIe-only GPUs vLLM turns its kernel off: NCCL's all-reduce over PCIe, as NVIDIA's
    # tables of two PCIe servers give it (both fits within 5% of the planner's figures), on an
    # Ampere card and on a Blackwell one alike, where the B200 takes its NVLink table's figure
    for card in ("l40s", "rtx_pro_6000_server"):
        fixed_us, hop_us, share, _ = bench.pcie_allreduce_fit(rows, card)
        assert PCIE_ALLREDUCE.fixed_ms * 1e3 == pytest.approx(fixed_us, rel=0.05), card
        assert PCIE_ALLREDUCE.hop_ms * 1e3 == pytest.approx(hop_us, rel=0.05), card
        assert PCIE_ALLREDUCE.link_share == pytest.approx(share, rel=0.05), card
    assert family_of(find_gpu("a10")).allreduce == PCIE_ALLREDUCE
    pcie = step_time_for(llama70, find_gpu("rtx-pro-6000-blackwell"), tp=4, engine="vllm")
    assert family_of(find_gpu("rtx-pro-6000-blackwell")).name == "blackwell"
    assert pcie.allreduce == PCIE_ALLREDUCE
    # a few hundred bytes cost the latencies (3 + 7 x 3.5 us at TP 8), 2 MB the ring's bytes at
    # 0.42 of the RTX PRO 6000's 64 GB/s a direction besides
    rtx = fabric_of(find_gpu("rtx-pro-6000-blackwell"))
    assert collective_ms(8, 256.0, PCIE_ALLREDUCE, rtx) == pytest.approx(0.0275, abs=1e-4)
    ring = 2 * 7 / 8 * 2_097_152
    assert collective_ms(8, ring, PCIE_ALLREDUCE, rtx) == pytest.approx(
        0.0275 + ring / (0.42 * 64e9) * 1e3
    )


def test_a_group_past_a_pcie_cards_nvlink_bridge_reduces_over_pcie(cli: Cli) -> None:
    # an A100 PCIe's bridge joins two cards: TP 2 reduces over it as the SXM card does (the
    # custom all-reduce over NVLink 3), TP 4 over PCIe through NCCL; the H200 NVL's 4-way bridge
    # holds TP 4 on NVLink; cards joined through NVSwitch never leave it
    llama70 = resolve_model(None, str(MODELS / "meta-llama--Llama-3.1-70B"))
    for gpu_id, bridged in (("a100-pcie-80gb", 2), ("h100-pcie-80gb", 2), ("h200-nvl-141gb", 4)):
        gpu = find_gpu(gpu_id)
        assert gpu.nvlink_bridge_gpus == bridged
        inside = step_time_for(llama70, gpu, tp=bridged, engine="vllm")
        past = step_time_for(llama70, gpu, tp=2 * bridged, engine="vllm")
        assert inside.allreduce == family_of(gpu).allreduce != PCIE_ALLREDUCE
        assert inside.fabric.bytes_per_s == fabric_of(gpu).bytes_per_s
        assert past.allreduce == PCIE_ALLREDUCE
        assert past.fabric.bytes_per_s == host_link_bytes_per_s(gpu) < inside.fabric.bytes_per_s
        assert past.allreduce_ms(64) > 4 * inside.allreduce_ms(64)
    # `slo` names the link past the bridge

    def fixed_line(tp: int) -> str:
        args = ("slo", "--tpot", "80", "--preset", "llama-3.1-70b", "--gpu", "a100-pcie-80gb")
        got = cli(*args, "--tp", str(tp), "--json").json()["arithmetic"]
        return next(x for x in got if x.startswith("fixed:"))

    assert "(TP 4, NCCL over PCIe)" in fixed_line(4)
    assert "(TP 2)" in fixed_line(2)
    sxm = find_gpu("a100-sxm4-80gb")
    assert sxm.nvlink_bridge_gpus is None
    assert step_time_for(llama70, sxm, tp=8, engine="vllm").allreduce == family_of(sxm).allreduce


def test_the_sampler_gathers_the_logits_and_casts_them_to_fp32() -> None:
    # the lm_head's vocabulary columns are all-gathered across the TP group (bf16), then cast to
    # fp32 and reduced by argmax: 2 + 4 + 4 bytes a logit over the whole vocabulary
    llama = load_model_preset("llama-3.1-70b")
    h100 = find_gpu("h100")
    vocab = llama.vocab_size or 0
    one = step_time_for(llama, h100, tp=1)
    eight = step_time_for(llama, h100, tp=8)
    for model in (one, eight):
        passes = 256 * vocab * GREEDY_BYTES_PER_LOGIT / model._bandwidth() * 1e3
        gather = 0.0
        if model.tp > 1:
            rate = model.fabric.collective_bytes_per_s(8) * model.allreduce.link_share
            gather = model.allreduce.fixed_ms + 256 * vocab * 2 * 7 / 8 / rate * 1e3
        assert model.logits_ms(256) == pytest.approx(passes + gather)
        assert model.logits_ms(512) > 1.9 * model.logits_ms(256) and model.logits_ms(0) == 0.0
        # a decode step adds it beside its other terms
        t = model.terms(256, 2000)
        parts = t.linear_ms + t.attention_ms + t.kernels_ms + t.allreduce_ms + t.overhead_ms
        assert t.logits_ms == model.logits_ms(256)
        assert t.step_ms == pytest.approx(parts + t.all_to_all_ms + t.logits_ms)
    assert eight.logits_ms(256) > one.logits_ms(256) / 8
    # SGLang's lm_head spans every GPU under data-parallel attention: the logits of all eight
    # groups' tokens are gathered over all eight GPUs (vLLM's DP ranks each keep their own)
    r1 = resolve_model(None, str(MODELS / "deepseek-ai--DeepSeek-R1"))
    h200 = find_gpu("h200")
    dp = step_time_for(r1, h200, tp=1, dp=AttentionDp(groups=8), engine="sglang")
    rate = dp.fabric.collective_bytes_per_s(8) * dp.allreduce.link_share
    gather = dp.allreduce.fixed_ms + 8 * 64 * (r1.vocab_size or 0) * 2 * 7 / 8 / rate * 1e3
    own = 64 * (r1.vocab_size or 0) * GREEDY_BYTES_PER_LOGIT / dp._bandwidth() * 1e3
    assert dp.logits_ms(64) == pytest.approx(gather + own)
    vllm_dp = step_time_for(r1, h200, tp=1, dp=AttentionDp(groups=8), engine="vllm")
    assert vllm_dp.logits_ms(64) == pytest.approx(own)


def test_a_mixed_checkpoint_reads_its_16_bit_layers_at_16_bits() -> None:
    # gpt-oss stores its experts in MXFP4 (4 bits and an 8-bit scale per 32: 0.53 bytes a
    # parameter) and keeps attention, router, embedding and lm_head in bf16. The experts take
    # what the 16-bit parameters leave of the checkpoint, so a step reads the bf16 attention
    # and lm_head whole: about 2 bytes a parameter, not the checkpoint's 0.56 mean
    oss = resolve_model(None, str(MODELS / "openai--gpt-oss-120b"))
    assert oss.plain_linear_params == oss.attention_params > 0
    per_param = stored_expert_bytes_per_param(oss)
    assert per_param == pytest.approx(4.25 / 8, rel=0.01)
    st = step_time_for(oss, find_gpu("h100"), tp=1)
    bf16_dense = 2 * (oss.attention_params + (oss.vocab_size or 0) * oss.hidden_size)
    assert st.dense_weights_bytes == pytest.approx(bf16_dense, rel=0.05)
    # split over TP 8 like any dense weight; a checkpoint in one format keeps its mean
    assert step_time_for(oss, find_gpu("h100"), tp=8).dense_weights_bytes == pytest.approx(
        st.dense_weights_bytes / 8, rel=0.01
    )
    r1 = resolve_model(None, str(MODELS / "deepseek-ai--DeepSeek-R1"))
    assert stored_expert_bytes_per_param(r1) == r1.weights_bytes / r1.params_total


def test_a_qk_norm_over_every_head_all_reduces_once_more_a_layer_under_tp() -> None:
    # MiniMax-M2 normalizes q and k over all heads at once (use_qk_norm, qk_norm_type
    # per_layer): a TP rank holds some of the heads, so each layer all-reduces each token's two
    # sums of squares (vLLM MiniMaxText01RMSNormTP.forward_qk, SGLang MiniMaxM2QKRMSNorm): a
    # third, latency-bound all-reduce beside the two of every layer; none at TP 1, and Qwen3's
    # per-head norms need none
    minimax = resolve_model(None, str(MODELS / "MiniMaxAI--MiniMax-M2.7"))
    qwen = resolve_model(None, str(MODELS / "Qwen--Qwen3-32B"))
    assert minimax.qk_norm_spans_heads and not qwen.qk_norm_spans_heads
    h200 = find_gpu("h200")
    for tp in (2, 4, 8):
        st = step_time_for(minimax, h200, tp=tp, engine="sglang")
        plain = st.model_copy(update={"qk_norm_allreduce": False})
        sums = allreduce_ms(
            tp, st.layers, 64 * QK_NORM_SUMS_BYTES_PER_TOKEN, st.allreduce, st.fabric
        )
        assert st.allreduce_ms(64) == pytest.approx(plain.allreduce_ms(64) + sums / 2)
        assert sums / 2 == pytest.approx(st.layers * 0.0047, rel=0.01)  # the latency alone
    assert step_time_for(minimax, h200, tp=1).allreduce_ms(64) == 0.0
    # the config's switch: without use_qk_norm (or another norm type) the layers norm per head
    cfg = json.loads((MODELS / "MiniMaxAI--MiniMax-M2.7" / "config.json").read_text())
    for change in ({"use_qk_norm": False}, {"qk_norm_type": "per_head"}):
        spec = model_spec_from_config(cfg | change, name="m", source="test")
        assert not spec.qk_norm_spans_heads


def test_narrow_experts_multiply_slower_and_expert_parallelism_widens_them() -> None:
    # DeepSeek-V3 on 8 H200s: under TP 8 each GPU holds 256 of an expert's 2,048 columns, under
    # expert parallelism whole experts; the fused MoE kernels reach more of the rate on wide ones,
    # so a 16K-token prefill's expert multiply is faster under EP; a decode step's expert read
    # is not a multiply and barely moves
    v3 = load_model_preset("deepseek-v3")
    h200 = find_gpu("h200")
    tp8 = step_time_for(v3, h200, tp=8, engine="vllm")
    ep8 = step_time_for(v3, h200, tp=8, engine="vllm", exchange=EP8)
    assert tp8.moe_gemm_scale < ep8.moe_gemm_scale < 1
    assert ep8.moe_gemm_scale == pytest.approx(
        HOPPER_MOE_GEMM_SCALE["fp8-block"] * 2048 / (2048 + HOPPER_MOE_HALF_WIDTH["fp8-block"])
    )
    assert tp8.linear_parts(16384)[1] > 1.5 * ep8.linear_parts(16384)[1]
    flat = tp8.model_copy(update={"moe_gemm_scale": 1.0})
    assert tp8.step_ms(8, 2000) == pytest.approx(flat.step_ms(8, 2000), rel=0.01)


def test_fp8_kv_reads_slower_per_byte_on_hopper_but_not_on_blackwell() -> None:
    # FlashAttention-3 streams an fp8 cache at 0.72 of its bf16 rate on Hopper (NVIDIA's
    # tables): half the bytes take 0.70 of the time, not half; FlashInfer on Blackwell streams
    # both alike
    for gpu_id, ratio in (("h200", 0.5 / (0.696 / 0.970)), ("b200", 0.5)):
        gpu = find_gpu(gpu_id)
        bf16 = step_time_for(LLAMA8, gpu).terms(64, 4000).attention_ms
        fp8 = step_time_for(LLAMA8, gpu, kv_dtype_bytes=1).terms(64, 4000).attention_ms
        assert fp8 / bf16 == pytest.approx(ratio, rel=1e-6), gpu_id


def test_mla_decode_multiplies_longer_than_it_reads_with_every_head_on_one_gpu() -> None:
    # DeepSeek-V3's absorbed MLA: a cached token costs 2 x (576 + 512) FLOPs a query head, the
    # heads padded to FlashMLA's tile of 64. Under TP 8 (16 heads, one tile) a bf16 latent
    # byte costs 64 x 2,176 / 1,152 = 121 FLOPs and the read binds; under data-parallel
    # attention every GPU runs all 128 heads (242 FLOPs a byte, 484 with an fp8 latent) and the
    # multiply, at 660 / 989 of the bf16 rate, outlasts the read
    v3 = load_model_preset("deepseek-v3")
    h200 = find_gpu("h200")
    rate = h200.bf16_dense_flops * 660 / 989
    tp8 = step_time_for(v3, h200, tp=8, engine="sglang")
    assert tp8.mla_flops_per_kv_byte == pytest.approx(64 * 2 * 1088 / 1152)
    terms = tp8.terms(64, 2000)
    assert terms.attention_ms == pytest.approx(tp8.kv_read_ms(terms.kv_read_bytes))
    for kv_bytes in (2, 1):
        dp = step_time_for(
            v3, h200, tp=1, dp=AttentionDp(groups=8), engine="sglang", kv_dtype_bytes=kv_bytes
        )
        assert dp.mla_flops_per_kv_byte == pytest.approx(128 * 2 * 1088 / (576 * kv_bytes))
        terms = dp.terms(64, 2000)
        multiply_ms = 64 * 2000 * 61 * 128 * 2 * 1088 / rate * 1e3
        assert terms.attention_ms == pytest.approx(multiply_ms, rel=1e-3)
        assert terms.attention_ms > 1.5 * dp.kv_read_ms(terms.kv_read_bytes)
    # verifying 3 drafts a sequence multiplies 4 query rows a head: under data-parallel attention
    # 512 rows (4x the multiply), under TP 8 16 x 4 = 64, still the one padded tile (the read)
    kv = 64 * dp.kv_bytes(2000)
    plain = dp.decode_attention_ms(kv)
    assert dp.decode_attention_ms(kv, 4.0) == pytest.approx(4 * plain)
    verify = dp.mixed_ms(64, kv, 0, 0.0, sampled=256) - dp.mixed_ms(64, kv, 0, 0.0)
    assert verify > 3 * plain
    kv8 = 64 * tp8.kv_bytes(2000)
    assert tp8.decode_attention_ms(kv8, 4.0) == tp8.decode_attention_ms(kv8)
    # GQA models have no such term: their decode attention is the read
    assert step_time_for(LLAMA8, h200).mla_flops_per_kv_byte == 0
    # NVIDIA's tables time vLLM 0.24.0's MLA decode module at 16 and 128 heads: the extra time of
    # 128 is the absorbed multiply's excess over the read, within a quarter (H200 636 us
    # measured, 639 modelled; B200 107 and 128, medians over 33 batch x context points)
    bench = benchmark_script("nvidia_kernels")
    rows = bench.load(bench.ROWS)
    for card in bench.CARDS:
        pairs = bench.mla_head_costs(rows, card)
        assert len(pairs) >= 20, card
        measured = statistics.median(m for m, _ in pairs)
        modelled = statistics.median(p for _, p in pairs)
        assert modelled == pytest.approx(measured, rel=0.25), card


def test_prefill_attention_share_grows_with_keys_and_head_size_as_nvidia_tables_give() -> None:
    # NVIDIA's tables of prefill attention (vLLM 0.24.0, H200 and B200): ceiling(head size) x
    # keys / (keys + half), keys the mean a query sees; the families carry the fits
    bench = benchmark_script("nvidia_kernels")
    rows = bench.load(bench.ROWS)
    for card, gpu_id in (("h200_sxm", "h200"), ("b200_sxm", "b200")):
        ceilings, half, error = bench.prefill_fit(bench.prefill_points(rows, card))
        own = family_of(find_gpu(gpu_id))
        assert own.prefill_attention_half_keys == half and error < 0.1, card
        assert own.prefill_attention_ceilings == {
            dim: pytest.approx(c, abs=0.0005) for dim, c in ceilings.items()
        }, card
    # a 2,048-token prompt of 128-wide heads on an H200: 1,024.5 keys a query on average, at
    # 0.637 x 1,024.5 / (1,024.5 + 446) of the bf16 rate; a 16K one nearer the ceiling
    h200 = step_time_for(LLAMA8, find_gpu("h200"))
    for length in (2048, 16384):
        pairs = length * (length + 1) / 2
        share = 0.637 * (pairs / length) / (pairs / length + 446)
        expected = pairs * h200.attention_flops_per_pair / (989e12 * share) * 1e3
        assert h200.prefill_attention_ms(pairs, length) == pytest.approx(expected, rel=1e-3)
    short, long = (h200.prefill_attention_ms(n * (n + 1) / 2, n) / (n * n) for n in (2048, 16384))
    assert long < 0.8 * short  # the long prompt's pairs cost less each
    # 64-wide heads reach less of the rate than 128-wide ones (gpt-oss against Llama)
    oss = resolve_model(None, str(MODELS / "openai--gpt-oss-120b"))
    assert step_time_for(oss, find_gpu("h200")).attention_flops_efficiency == pytest.approx(0.494)


def test_fixed_costs_are_present_at_one_sequence() -> None:
    terms = step_time_for(LLAMA8, find_gpu("a100-sxm4-80gb"), engine="vllm").terms(1, 1)
    assert terms.overhead_ms == ENGINE_OVERHEAD_MS["vllm"] > 0
    assert terms.kernels_ms == pytest.approx(32 * KERNEL_MS_PER_LAYER)
    assert terms.step_ms > terms.memory_ms + terms.kernels_ms


def test_step_time_grows_with_batch_and_context() -> None:
    st = step_time_for(LLAMA8, find_gpu("mi300x"))
    times = [st.step_ms(b, 2000) for b in (1, 2, 8, 64, 256, 1024)]
    assert times == sorted(times)
    assert st.step_ms(32, 8000) > st.step_ms(32, 2000)


@pytest.mark.parametrize(
    "name", ["Qwen--Qwen3-Next-80B-A3B-Thinking", "Qwen--Qwen3-30B-A3B", "openai--gpt-oss-120b"]
)
@pytest.mark.parametrize("engine", ["vllm", "sglang"])
def test_a_moe_step_never_shortens_as_its_batch_grows(name: str, engine: str) -> None:
    # Narrow experts split 8 ways on fast HBM read in less than an idle expert's exit costs:
    # each expert a step starts routing to still costs no less than it did idle. Before,
    # Qwen3-Next at TP 8 on an MI355X (512 experts of 512 columns) ran 64 sequences in 16.5 ms
    # and one in 21.5.
    model = resolve_model(None, str(MODELS / name))
    for gpu in ("h200", "b200", "mi300x", "mi355x"):
        st = step_time_for(model, find_gpu(gpu), tp=8, engine=engine)
        times = [st.step_ms(b, 2000) for b in (1, 2, 4, 8, 16, 32, 64, 128, 256)]
        assert times == sorted(times), (gpu, times)
        idle = st.moe_layers * st.num_experts * st.moe_ms_per_idle_expert
        # at one token nearly every expert is idle; its exits are priced where the family has them
        assert st.moe_fixed_ms(1) >= 0.9 * idle + st.moe_layers * st.moe_kernel_ms_per_layer


@pytest.mark.parametrize("engine", ["vllm", "sglang"])
def test_fp8_experts_never_multiply_slower_than_bf16_ones(engine: str) -> None:
    # Qwen3-30B-A3B's experts at TP 8 hold 96 columns a GPU: Hopper's block-scaled fp8 fit
    # (0.326 of the fp8 rate, half 346) falls under its bf16 one (0.637, half 274) below about
    # 2,800 columns; the per-tensor re-quantization, which borrows it, is floored at bf16's
    model = resolve_model(None, str(MODELS / "Qwen--Qwen3-30B-A3B"))
    for gpu_id in ("h100", "h200", "b200", "mi300x", "mi355x"):
        gpu = find_gpu(gpu_id)
        bf16 = step_time_for(model, gpu, tp=8, engine=engine)
        fp8 = step_time_for(model, gpu, tp=8, engine=engine, weight_dtype="fp8")
        for batch in (1, 64, 512, 4096):
            assert fp8.step_ms(batch, 2000) <= bf16.step_ms(batch, 2000), (gpu_id, batch)
            assert fp8.linear_parts(batch)[1] <= bf16.linear_parts(batch)[1], (gpu_id, batch)
    h200 = find_gpu("h200")
    fp8 = step_time_for(model, h200, tp=8, weight_dtype="fp8")
    assert fp8.expert_width_per_gpu == 96 and fp8.family is not None
    fitted = moe_share_scale(fp8.family, "fp8", 96)
    floor = moe_share_scale(fp8.family, "bf16", 96) * fp8.plain_flops_per_s
    floor /= fp8.flops_per_s * fp8.low_precision_scale
    assert fitted < floor and fp8.moe_gemm_scale == pytest.approx(floor)
    # the fits cross near 2,800 columns: Qwen3-30B-A3B's whole 768 at TP 1 still take the
    # floor, Mixtral-8x7B's 14,336 their own fit
    whole = step_time_for(model, h200, weight_dtype="fp8")
    assert whole.moe_gemm_scale > moe_share_scale(fp8.family, "fp8", 768)
    mixtral = resolve_model(None, str(MODELS / "mistralai--Mixtral-8x7B-Instruct-v0.1"))
    wide = step_time_for(mixtral, h200, weight_dtype="fp8")
    assert wide.expert_width_per_gpu == 14336
    assert wide.moe_gemm_scale == pytest.approx(moe_share_scale(fp8.family, "fp8", 14336))


@pytest.mark.parametrize("engine", sorted(ENGINE_OVERHEAD_MS))
def test_never_below_the_h200_ideal_floor(engine: str) -> None:
    # The fastest whole Llama-3.1-8B decode steps measured on an H200 with the engines' kinds
    # of kernel (cuBLAS, fused elementwise passes, a flash-decoding attention kernel or
    # FlashAttention-2; benchmarks/step_floor.py), at 2,000 tokens of context: no engine runs a
    # step faster, to within how far repeated runs of one measurement differ (2.7%).
    bench = benchmark_script("step_time")
    floors = {f.batch: f.whole_ms for f in bench.measured_floors() if f.stack == "llama-3.1-8b"}
    assert floors == {1: 4.974, 16: 5.899, 64: 8.926, 256: 22.792}
    spread = bench.run_spread()
    assert spread == pytest.approx(0.0274, abs=1e-4)
    st = step_time_for(LLAMA8, find_gpu("h200"), engine=engine)
    ideal = st.model_copy(update={"overhead_ms": 0.0})  # no engine at all
    for batch, ms in floors.items():
        assert ideal.step_ms(batch, 2000) >= ms * (1 - spread)
    # One GPU's share of Llama-3.1-70B at TP 8, with no all-reduce: the same, except at 4 and 16
    # sequences, where cuBLAS runs these small GEMMs on slower kernels (the linear layers take
    # 5.71-5.87 ms against 5.51-5.70 at 1 and 32 sequences) that the model does not price: at
    # most 5% under there.
    share = {f.batch: f for f in bench.measured_floors() if f.stack == "llama-3.1-70b-tp8"}
    assert sorted(share) == [1, 4, 16, 32, 64, 256]
    assert {("llama-3.1-70b-tp8", 4), ("llama-3.1-70b-tp8", 16)} == bench.CUBLAS_SLOW_FLOORS
    assert bench.CUBLAS_SLOW_SLACK == 0.05
    for f in share.values():
        assert f.model_ms >= f.whole_ms * (1 - bench.floor_slack(f, spread)), f


def test_never_below_the_measured_linear_layers() -> None:
    # Whole decode steps measured on an H200 (benchmarks/step_floor.py): a dense model, its fp8
    # export, one GPU's share of a TP 8 group and a MoE model. The dense stacks' linear layers
    # alone are a floor no engine goes under; the MoE stack's ran torch's grouped GEMM and
    # routing, slower than the engines' fused MoE (NVIDIA's tables: LINEAR_BOUND_STACKS)
    bench = benchmark_script("step_time")
    floors = [f for f in bench.measured_floors() if f.linear_ms]
    assert {(f.stack, f.batch) for f in floors} == {
        (stack, batch)
        for stack in ("llama-3.1-8b", "llama-3.1-8b-fp8", "llama-3.1-70b-tp8", "qwen3-30b-a3b")
        for batch in (1, 64)
    } | {("llama-3.1-70b-tp8", batch) for batch in (4, 16, 32)}
    assert "qwen3-30b-a3b" not in bench.LINEAR_BOUND_STACKS
    for floor in floors:
        assert floor.linear_ms < floor.whole_ms
        if floor.stack in bench.LINEAR_BOUND_STACKS:
            assert floor.model_ms >= floor.linear_ms, floor


def test_error_on_the_public_rows_is_within_bounds() -> None:
    bench = benchmark_script("step_time")
    rows = [json.loads(x) for x in bench.ROWS.read_text().splitlines() if x.strip()]
    errors = []
    for row in rows:
        predicted = bench.predict(row)
        if predicted is not None:
            errors.append((predicted - row["measured_ms"]) / row["measured_ms"])
    absolute = sorted(abs(e) for e in errors)
    assert len(errors) == 38
    assert statistics.median(absolute) <= 0.08
    assert absolute[math.ceil(0.9 * len(absolute)) - 1] <= 0.20
    assert abs(statistics.mean(errors)) <= 0.05
    for tp in (1, 4, 8):  # no systematic miss by TP
        mine = [
            e
            for e, r in zip(errors, [r for r in rows if bench.predict(r) is not None], strict=True)
            if r["tp"] == tp
        ]
        assert abs(statistics.mean(mine)) <= 0.08


def test_slo_reports_terms_at_requested_batches(cli: Callable[..., Result]) -> None:
    data = cli(
        "slo",
        "--tpot",
        "30",
        "--preset",
        "llama-3.1-8b",
        "--gpu",
        "h100",
        "--batch",
        "1,64",
        "--json",
    ).json()
    assert set(data["step_ms_at"]) == {"1", "64"}
    assert data["step_ms_at"]["64"] > data["step_ms_at"]["1"]
    for batch in ("1", "64"):
        # the operations, summed as the GPU runs them: the linear layers memory- or
        # compute-bound, then attention's KV read, kernels, all-reduce, the sampler's logits
        # and the engine
        terms = data["terms_at"][batch]
        assert terms["memory_ms"] == pytest.approx(terms["weights_ms"] + terms["attention_ms"])
        assert terms["linear_ms"] >= max(terms["weights_ms"], terms["compute_ms"])
        parts = terms["dense_linear_ms"] + terms["experts_ms"] + terms["lm_head_ms"]
        assert terms["linear_ms"] == pytest.approx(parts)
        assert terms["experts_ms"] == 0  # a dense model
        total = terms["linear_ms"] + terms["attention_ms"]
        total += terms["kernels_ms"] + terms["allreduce_ms"] + terms["overhead_ms"]
        assert terms["logits_ms"] > 0
        assert data["step_ms_at"][batch] == pytest.approx(total + terms["logits_ms"])
    assert data["terms_at"]["64"]["attention_ms"] > 60 * data["terms_at"]["1"]["attention_ms"]
    assert all(p["terms"] is not None for p in data["curve"])


def test_expert_parallel_waits_for_the_busiest_rank_until_every_expert_is_read() -> None:
    from planner.core.step.moe import expected_max_of_normals

    # Blom's approximation against the exact expected maxima of 2 and 8 standard normals
    # (1/sqrt(pi) = 0.5642; 1.4236)
    assert expected_max_of_normals(1) == 0.0
    assert expected_max_of_normals(2) == pytest.approx(0.5642, abs=0.03)
    assert expected_max_of_normals(8) == pytest.approx(1.4236, abs=0.02)
    spec = load_model_preset("qwen3-30b-a3b")
    tp = step_time_for(spec, find_gpu("h100"), tp=4)
    ep = tp.model_copy(update={"experts_per_gpu": spec.num_experts // 4})
    for batch in (1, 4, 16):
        # the same expected bytes plus the imbalance of 4 ranks drawing their experts
        assert ep.expert_weights_bytes(batch) > tp.expert_weights_bytes(batch)
        q = tp.experts_read(batch) / spec.num_experts
        local = spec.num_experts // 4
        sd = math.sqrt(local * q * (1 - q))
        busiest = local * q + expected_max_of_normals(4) * sd
        assert ep.expert_weights_bytes(batch) == round(min(local, busiest) * tp.expert_bytes * 4)
    # at 4,096 tokens every expert is read on every rank: no imbalance left
    assert ep.expert_weights_bytes(4096) == pytest.approx(tp.expert_weights_bytes(4096), rel=1e-3)


def test_pipeline_stages_split_the_model_and_a_token_crosses_them_all() -> None:
    from planner.core.step.comm import PP_HOP_MS

    spec = load_model_preset("llama-3.1-405b")
    gpu = find_gpu("h100")
    one = step_time_for(spec, gpu, tp=8)
    two = step_time_for(spec, gpu, tp=8, pp=2)
    # a stage holds half the layers, their weights and their KV
    assert two.layers == spec.num_layers // 2
    assert two.dense_weights_bytes == pytest.approx(one.dense_weights_bytes / 2, rel=1e-6)
    assert two.kv_bytes(4096) == pytest.approx(one.kv_bytes(4096) / 2, abs=1)
    # a single sequence's token still crosses every layer: the same time plus one send
    assert two.step_ms(1, 1024) == pytest.approx(one.step_ms(1, 1024) + PP_HOP_MS, rel=0.01)
    # a full batch splits into two micro-batches, each through both stages: never slower per
    # token than one stage group doing it all (the GEMMs of half the batch are cheaper)
    assert two.step_ms(256, 1024) <= one.step_ms(256, 1024)


@pytest.mark.parametrize(
    ("gpu", "family", "basis"),
    [
        ("a100", "ampere", "fitted"),
        ("h100", "hopper", "fitted"),
        ("l40s", "ada", "extrapolated"),
        ("b200", "blackwell", "extrapolated"),
        ("mi300x", "cdna3", "extrapolated"),
        ("mi355x", "cdna4", "extrapolated"),
        ("mi350x", "cdna4", "extrapolated"),
        ("l20", "ada", "extrapolated"),
        ("gaudi3", "intel", "extrapolated"),
    ],
)
def test_each_card_takes_its_familys_constants_and_says_if_they_were_measured(
    gpu: str, family: str, basis: str
) -> None:
    """Ampere and Hopper constants were fitted on public step times; every other family's are
    extrapolated, and a prediction on such a card says so."""
    from planner.core.step.family import family_of

    got = family_of(find_gpu(gpu))
    assert (got.name, got.basis) == (family, basis)
    shares = {"a100": 0.75, "h100": 0.85, "b200": 0.85}  # Blackwell takes Hopper's, extrapolated
    if gpu in shares:
        assert step_time_for(LLAMA8, find_gpu(gpu)).bandwidth_efficiency == shares[gpu]


def test_amd_gemms_reach_a_smaller_share_of_their_datasheet_rate() -> None:
    """CDNA3's GEMM and attention kernels run at 0.62 of the share Hopper's reach (public GEMM
    benchmarks): a prefill-sized step does the same FLOPs at 0.55 x 0.62 of MI300X's rate (the
    GEMMs; attention at 0.5 x 0.62)."""
    nvidia = step_time_for(LLAMA8, find_gpu("h100"))
    amd = step_time_for(LLAMA8, find_gpu("mi300x"))
    assert nvidia.flops_efficiency == 0.55  # measured on public H100 prefill
    assert amd.flops_efficiency == pytest.approx(0.55 * 0.62)
    assert amd.attention_flops_efficiency == pytest.approx(0.5 * 0.62)
    # decode attention streams the KV cache at half the weight reads' share on CDNA3, at 0.89
    # of peak on Hopper (measured on an H200), above the weights' 0.85
    mi300x = find_gpu("mi300x")
    kv = 10**9
    assert amd.kv_read_ms(kv) == pytest.approx(kv / (mi300x.hbm_bandwidth_bytes_per_s * 0.3) * 1e3)
    assert nvidia.kv_read_ms(kv) == pytest.approx(
        kv / (find_gpu("h100").hbm_bandwidth_bytes_per_s * 0.89) * 1e3
    )
    # a weights' share given as 1 (slo --bandwidth-efficiency 1) leaves the KV read at the peak
    h100 = find_gpu("h100")
    whole = nvidia.model_copy(update={"bandwidth_efficiency": 1.0})
    assert whole.kv_read_ms(kv) == pytest.approx(kv / h100.hbm_bandwidth_bytes_per_s * 1e3)
    a100 = step_time_for(LLAMA8, find_gpu("a100"))  # no measurement: the weights' share
    assert a100.kv_read_ms(kv) == pytest.approx(
        kv / (find_gpu("a100").hbm_bandwidth_bytes_per_s * 0.75) * 1e3
    )
    _, _, compute = amd.gemm(4096, sampled=0)  # a prefill chunk: no lm_head, no table GEMM
    flops = 2 * (LLAMA8.params_active - 2 * LLAMA8.vocab_size * LLAMA8.hidden_size) * 4096
    assert compute == pytest.approx(flops / (find_gpu("mi300x").bf16_dense_flops * 0.341) * 1e3)


def test_simulate_names_the_basis_of_its_step_constants(cli: Callable[..., Result]) -> None:
    args = ["--preset", "llama-3.1-8b", "--prompt-len", "100", "--output-len", "100"]
    amd = json.loads(cli("simulate", "--gpu", "mi300x", *args, "--json").out)
    assert amd["step_constants"]["basis"] == "extrapolated"
    r = cli("simulate", "--gpu", "h100", *args)
    assert "step model: hopper constants fitted" in r.out


def test_the_gemm_rate_is_that_of_what_the_tensor_cores_multiply() -> None:
    """NVFP4 (w4a4) runs at the fp4 rate on Blackwell; OpenAI's MXFP4 is weight-only on every
    vendor (16-bit activations); AMD's MXFP4 exports run at the fp4 rate where the card has one
    (w4a4), at the fp8 rate with fp8 inputs or without one; int4 is weight-only everywhere."""
    from planner.core.step.gemm import gemm_flops_per_s

    b200, h200, mi355x = find_gpu("b200"), find_gpu("h200"), find_gpu("mi355x")
    mi300x = find_gpu("mi300x")
    assert gemm_flops_per_s(b200, "nvfp4") == b200.fp4_dense_flops
    assert gemm_flops_per_s(b200, "mxfp4") == b200.bf16_dense_flops
    assert gemm_flops_per_s(h200, "nvfp4") == h200.bf16_dense_flops  # no fp4 tensor cores
    assert gemm_flops_per_s(mi355x, "mxfp4", weight_only=True) == mi355x.bf16_dense_flops
    assert gemm_flops_per_s(mi355x, "mxfp4") == mi355x.fp4_dense_flops
    assert gemm_flops_per_s(mi355x, "mxfp4-quark") == mi355x.fp4_dense_flops
    assert gemm_flops_per_s(mi355x, "mxfp4-quark-a8") == mi355x.fp8_dense_flops
    assert gemm_flops_per_s(mi300x, "mxfp4") == mi300x.fp8_dense_flops  # no fp4 rate
    # NVIDIA's NVFP4 on AMD runs emulated (vLLM) or not at all (SGLang): the 16-bit rate
    assert gemm_flops_per_s(mi355x, "nvfp4") == mi355x.bf16_dense_flops
    assert gemm_flops_per_s(b200, "int4") == b200.bf16_dense_flops
    assert gemm_flops_per_s(h200, "fp8") == h200.fp8_dense_flops


def test_w8a8_int8_multiplies_at_each_cards_int8_rate() -> None:
    """An int8 W8A8 checkpoint's linear layers multiply at the card's INT8 tensor rate: the FP8
    one where the card has one, twice the 16-bit one on Ampere, the 16-bit one on CDNA2, and
    Blackwell Ultra's own cut figure (aiconfigurator's systems tables), so there a prefill
    takes longer than in 16 bits; its decode reads a byte a weight everywhere."""
    rate = {g: gemm.int8_ops_per_s(find_gpu(g)) / 1e12 for g in ("a100", "h100", "mi250x", "b300")}
    assert rate == {"a100": 624.0, "h100": 1979.0, "mi250x": 383.0, "b300": 153.5}
    base = json.loads((MODELS / "meta-llama--Llama-3.1-8B-Instruct" / "config.json").read_text())
    group = {
        "weights": {"type": "int", "num_bits": 8, "strategy": "channel"},
        "input_activations": {"type": "int", "num_bits": 8, "strategy": "token"},
    }
    q = {"quant_method": "compressed-tensors", "config_groups": {"group_0": group}}
    int8 = model_spec_from_config(base | {"quantization_config": q}, name="w8a8", source="local")
    bf16 = model_spec_from_config(base, name="bf16", source="local")
    for gpu, faster in (("a100", True), ("h100", True), ("b300", False)):
        card = find_gpu(gpu)
        prefill = [step_time_for(m, card).mixed_ms(0, 0, 4096, 4096 * 2048) for m in (int8, bf16)]
        assert (prefill[0] < prefill[1]) is faster, gpu
        decode = [step_time_for(m, card).terms(1, 1000).weights_read_bytes for m in (int8, bf16)]
        assert decode[0] < 0.6 * decode[1]


def test_fp8_gemms_reach_less_of_their_rate_and_attention_runs_at_16_bits() -> None:
    """An fp8 GEMM reaches 65/73 of the bf16 share of its rate on Hopper and 38/47 on CDNA3
    (public GEMM benchmarks), so fp8 weights compute 1.78x / 1.62x faster than bf16, not 2x;
    prefill attention multiplies 16-bit queries and keys whatever the weights are stored in."""
    body = LLAMA8.params_active - 2 * LLAMA8.vocab_size * LLAMA8.hidden_size
    for gpu_id, share in (("h100", 0.65 / 0.73), ("mi300x", 0.38 / 0.47)):
        gpu = find_gpu(gpu_id)
        bf16 = step_time_for(LLAMA8, gpu)
        fp8 = step_time_for(LLAMA8, gpu, weight_dtype="fp8")
        assert fp8.low_precision_scale == pytest.approx(share)
        rate = gpu.fp8_dense_flops * bf16.flops_efficiency * share
        assert fp8.gemm(4096, sampled=0)[2] == pytest.approx(2 * body * 4096 / rate * 1e3)
        speedup = bf16.gemm(4096, sampled=0)[2] / fp8.gemm(4096, sampled=0)[2]
        assert 1.6 < speedup < 1.8
        pairs = 4096 * 4097 / 2
        assert fp8.prefill_attention_ms(pairs) == pytest.approx(bf16.prefill_attention_ms(pairs))
    # weights whose GEMMs run at the 16-bit rate (int4 weight-only) keep the 16-bit share
    assert step_time_for(LLAMA8, find_gpu("h100"), weight_dtype="int4").low_precision_scale == 1


def _quantized_llama70b(tmp_path: Path, quantization: dict[str, object]) -> ModelSpec:
    """Llama-3.1-70B's config with a `quantization_config`, resolved."""
    cfg = json.loads((MODELS / "meta-llama--Llama-3.1-70B" / "config.json").read_text())
    cfg["quantization_config"] = quantization
    folder = tmp_path / str(quantization["quant_method"])
    folder.mkdir(parents=True)
    (folder / "config.json").write_text(json.dumps(cfg))
    return resolve_model(None, str(folder))


def test_row_scaled_fp8_on_rocm_before_vllm_0_7_3_pays_the_unfused_dequantization(
    cli: Cli, tmp_path: Path
) -> None:
    """vLLM 0.6.3-0.7.2 on ROCm runs an fp8 linear whose weights scale per output channel or
    whose activations scale per token as a GEMM writing fp32, then two scale multiplies and a
    cast, each a pass over the output: 24 bytes per output element beyond a fused GEMM's. The
    layers a checkpoint keeps in bf16 do not pay it; neither do per-tensor scales, CUDA (CUTLASS
    fuses them), nor 0.7.3+ (a row-wise scaled GEMM)."""
    # FBGEMM (Meta's FP8 exports): every MLP but the first and last; attention stays bf16
    skip = [f"model.layers.{i}.self_attn.{p}_proj" for i in range(80) for p in "qkvo"]
    skip += [f"model.layers.{i}.mlp.{p}_proj" for i in (0, 79) for p in ("gate", "up", "down")]
    fbgemm = _quantized_llama70b(
        tmp_path, {"quant_method": "fbgemm_fp8", "modules_to_not_convert": skip}
    )
    assert fbgemm.rowwise_fp8_outputs == (78 * 2 * 28_672, 78 * 8_192)
    mi300x = find_gpu("mi300x")
    old = step_time_for(fbgemm, mi300x, tp=4, engine="vllm", version=(0, 6, 3))
    per_gpu = 78 * 2 * 28_672 // 4 + 78 * 8_192  # gate / up split by TP, down's whole hidden
    assert old.dequant_bytes_per_token == 24 * per_gpu
    fixed = step_time_for(fbgemm, mi300x, tp=4, engine="vllm", version=(0, 7, 3))
    assert fixed.dequant_bytes_per_token == 0
    rate = mi300x.hbm_bandwidth_bytes_per_s * old.bandwidth_efficiency
    for batch in (1, 256):
        extra = batch * 24 * per_gpu / rate * 1e3
        assert old.terms(batch, 1024).dequant_ms == pytest.approx(extra)
        assert old.step_ms(batch, 1024) == pytest.approx(fixed.step_ms(batch, 1024) + extra)
    h100 = find_gpu("h100")
    assert step_time_for(fbgemm, h100, tp=4, version=(0, 6, 3)).dequant_bytes_per_token == 0
    # the speculative-decoding roofline prices it per scored token as well
    from planner.api.latency import curve_rates, roofline_from
    from planner.core.latency import step_ms

    def roofline(curve: StepTime) -> Roofline:
        return roofline_from(
            mi300x, weights_per_gpu=10**10, kv_per_sequence=10**6, active_params_per_gpu=10**10,
            **curve_rates(curve),
        )  # fmt: skip

    batch = np.array([8.0, 64.0])
    gap = step_ms(roofline(old), batch, 3.0) - step_ms(roofline(fixed), batch, 3.0)
    assert gap == pytest.approx(batch * 3 * 24 * per_gpu / rate * 1e3)
    # compressed-tensors FP8-dynamic: channel-wise weights, per-token activations, every layer
    dynamic = {
        "weights": {"type": "float", "num_bits": 8, "strategy": "channel"},
        "input_activations": {"type": "float", "num_bits": 8, "strategy": "token"},
    }
    ct = _quantized_llama70b(
        tmp_path,
        {"quant_method": "compressed-tensors", "config_groups": {"group_0": dynamic}},
    )
    attention = (64 + 2 * 8) * 128
    assert ct.rowwise_fp8_outputs == (80 * (attention + 2 * 28_672), 80 * 2 * 8_192)
    # 4-bit floats (compressed-tensors NVFP4) are not fp8
    nvfp4 = {"weights": {"type": "float", "num_bits": 4, "strategy": "tensor_group"}}
    fp4 = _quantized_llama70b(
        tmp_path / "nvfp4",
        {"quant_method": "compressed-tensors", "config_groups": {"group_0": nvfp4}},
    )
    assert fp4.rowwise_fp8_outputs == (0, 0)
    # Quark's per-tensor export (amd/...-FP8-KV) fuses its scales
    fp8 = {"dtype": "fp8_e4m3", "qscheme": "per_tensor", "is_dynamic": False}
    quark = _quantized_llama70b(
        tmp_path,
        {
            "quant_method": "quark",
            "exclude": ["lm_head"],
            "global_quant_config": {"weight": fp8, "input_tensors": fp8},
        },
    )
    assert quark.rowwise_fp8_outputs == (0, 0)
    assert step_time_for(quark, mi300x, version=(0, 6, 3)).dequant_bytes_per_token == 0
    # simulate prices it and says so
    folder = str(tmp_path / "fbgemm_fp8")
    where = ("--model", folder, "--gpu", "mi300x", "--tp", "4", "--concurrency", "8")
    where += ("--prompt-len", "256", "--output-len", "64", "--requests", "16", "--json")
    runs = {v: cli("simulate", *where, "--engine-version", v).json() for v in ("0.6.3", "0.7.3")}
    assert runs["0.6.3"]["median_tpot_ms"] > runs["0.7.3"]["median_tpot_ms"]
    assert [n for n in runs["0.6.3"]["notes"] if "row-wise scaled fp8" in n]
    assert not [n for n in runs["0.7.3"]["notes"] if "row-wise scaled fp8" in n]


def test_a_moe_chunk_streams_its_experts_while_its_attention_projections_compute() -> None:
    """The linear layers run one class after another, each memory- or compute-bound on its
    own: a DeepSeek-R1 prefill chunk of 512 tokens on 8 x H200 reads every routed expert
    (16 tokens each: memory-bound, their multiply at the fused MoE kernels' share) and
    multiplies its dense layers (compute-bound), so the step pays both, more than one max over
    their sums would."""
    r1 = resolve_model(None, str(MODELS / "deepseek-ai--DeepSeek-R1"))
    h200 = find_gpu("h200")
    step = step_time_for(r1, h200, tp=8, engine="vllm")
    tokens = 512
    bandwidth = h200.hbm_bandwidth_bytes_per_s * 0.85
    experts_read_ms = step.expert_weights_bytes(tokens) / bandwidth
    active = r1.expert_params // r1.num_experts * r1.experts_per_token // 8
    assert step.expert_active_params_per_gpu == active
    body = step.active_params_per_gpu - step.embedding_params_per_gpu - active
    plain = min(step.plain_params_per_gpu, body)
    rate = h200.fp8_dense_flops * 0.55 * 0.65 / 0.73
    experts_multiply_ms = 2 * tokens * active / (rate * step.moe_gemm_scale)
    dense_ms = 2 * tokens * (plain / (h200.bf16_dense_flops * 0.55) + (body - plain) / rate)
    head_bytes = step.lm_head_params_per_gpu * 2  # the bf16 lm_head: no token samples here
    dense_read_ms = (step.dense_weights_bytes - head_bytes) / bandwidth
    assert dense_ms > 2 * dense_read_ms and experts_read_ms > 1.5 * experts_multiply_ms
    # each class its own GEMM: the Euclidean norm of its stream and its multiply (the larger
    # term and up to a tenth more here), the two classes one after another
    linear = step.linear_ms(tokens, sampled=0)
    experts_ms = math.hypot(experts_read_ms, experts_multiply_ms)
    expected = experts_ms + math.hypot(dense_read_ms, dense_ms)
    assert linear == pytest.approx(expected * 1e3, rel=1e-6)
    _, memory_ms, compute_ms = step.gemm(tokens, sampled=0)
    assert linear > 1.2 * max(memory_ms, compute_ms)
    # a decode step is memory-bound throughout: the classes' reads add up, the norm adding
    # under 0.2% for the multiply of 8 tokens
    _, memory_ms, compute_ms = step.gemm(8)
    assert memory_ms < step.linear_ms(8) < memory_ms * 1.002


def test_a_gemm_at_the_ridge_overlaps_its_stream_and_multiply_only_in_part() -> None:
    # DeepGEMM's table (H800, FP8): M = 256, N = 4,096, K = 7,168 takes 16.1 us, where its
    # 33.3 MB of operands stream in 12.5 us (2,668 GB/s) and the multiply takes 11.5 us (its
    # 1,304 TFLOPS at M = 4,096): the max says 12.5, the norm 17.0
    stream_us = (4096 * 7168 + 256 * 7168 + 256 * 4096 * 2) / 2668e9 * 1e6
    multiply_us = 2 * 256 * 4096 * 7168 / 1304e12 * 1e6
    assert stream_us == pytest.approx(12.5, abs=0.05)
    assert multiply_us == pytest.approx(11.5, abs=0.05)
    assert gemm.overlapped_ms(stream_us, multiply_us) == pytest.approx(16.1, rel=0.07)
    assert max(stream_us, multiply_us) < 16.1 * 0.8
    # equal terms: 1.41x; one term ten times the other: within 0.5% of it; one alone: itself
    assert gemm.overlapped_ms(3.0, 3.0) == pytest.approx(3.0 * math.sqrt(2))
    assert 10.0 < gemm.overlapped_ms(10.0, 1.0) < 10.05
    assert gemm.overlapped_ms(0.0, 4.0) == gemm.overlapped_ms(4.0, 0.0) == 4.0
    assert gemm.overlapped_ms(math.inf, math.inf) == gemm.overlapped_ms(math.inf, 1.0) == math.inf


def test_the_embedding_is_gathered_and_the_lm_head_runs_for_sampled_tokens_only() -> None:
    """A prompt token runs every linear layer but the lm_head (only a sampled token needs
    logits), and no GEMM runs over the input embedding; a tied embedding is the lm_head too,
    so a decode step reads it whole, as it reads an untied lm_head."""
    h100 = find_gpu("h100")
    untied = step_time_for(LLAMA8, h100)  # Llama-3.1-8B: embedding and lm_head apart
    table = LLAMA8.vocab_size * LLAMA8.hidden_size  # 128,256 x 4,096
    rate = h100.bf16_dense_flops * 0.55
    body = LLAMA8.params_active - 2 * table
    assert untied.gemm(1000, sampled=0)[2] == pytest.approx(2 * body * 1000 / rate * 1e3)
    assert untied.gemm(8)[2] == pytest.approx(2 * (body + table) * 8 / rate * 1e3)
    # decode reads everything but the input table (bf16): the lm_head included
    assert untied.dense_weights_bytes == LLAMA8.weights_bytes - 2 * table
    tied_spec = resolve_model(None, str(MODELS / "meta-llama--Llama-3.2-1B-Instruct"))
    assert tied_spec.tied_embeddings
    tied = step_time_for(tied_spec, h100)
    assert tied.dense_weights_bytes == tied_spec.weights_bytes  # the table is the lm_head


def test_sliding_window_layers_attend_inside_their_window_only() -> None:
    """A prefill query in a sliding-window layer attends to at most `window` keys: gpt-oss
    (half its layers at a 128-token window, the other half full) pays about half the full
    attention pairs on a long prompt, and all of them on a prompt inside the window."""
    from planner.core.step.attention import causal_pairs

    assert causal_pairs(0, 10) == 55  # 1 + 2 + ... + 10
    assert causal_pairs(0, 10, window=4) == 1 + 2 + 3 + 4 * 7
    assert causal_pairs(10, 5, window=4) == 5 * 4  # every query past the window
    assert causal_pairs(2, 3, window=100) == causal_pairs(2, 3)  # inside it: uncapped
    gpt = step_time_for(resolve_model(None, str(MODELS / "openai--gpt-oss-120b")), find_gpu("h200"))
    assert [w for w, _ in gpt.window_flops_per_pair] == [128]
    windowed = gpt.window_flops_per_pair[0][1]
    assert windowed == pytest.approx(gpt.attention_flops_per_pair / 2)
    long = gpt.chunk_pairs(0, 32_768)
    want = (causal_pairs(0, 32_768) + causal_pairs(0, 32_768, window=128)) / 2
    assert long == pytest.approx(want) and long < 0.51 * causal_pairs(0, 32_768)
    assert gpt.chunk_pairs(0, 100) == causal_pairs(0, 100)
    # a model without windows counts every pair
    assert step_time_for(LLAMA8, find_gpu("h200")).chunk_pairs(500, 300) == causal_pairs(500, 300)


def test_the_api_server_streams_no_faster_than_its_time_per_token() -> None:
    """vLLM V1 streams every token from one API server process, 24 us each
    (benchmarks/data/host-overhead.jsonl): beside a fast GPU and a large batch the step lasts
    that long for the clients; a small batch hides it. SGLang's: 18 us; vLLM V0's: none."""
    model = load_model_preset("gpt-oss-20b")
    b200 = find_gpu("b200")
    v1 = step_time_for(model, b200, engine="vllm", version=(0, 14, 0))
    assert v1.frontend_ms_per_token == pytest.approx(0.024)
    big = v1.terms(1024, 2000)
    assert big.frontend_ms == pytest.approx(1024 * 0.024)
    assert big.step_ms == pytest.approx(big.frontend_ms)  # the API server binds
    small = v1.terms(8, 2000)
    assert small.frontend_ms < small.step_ms  # the GPU binds
    # a mixed step with prefill streams only its decode tokens
    assert v1.mixed_ms(1024, 0, 0, 0.0) >= 1024 * 0.024
    # SGLang's TokenizerManager: 10.6 us + 7.3 us of HTTP a token (a floor: its stream resends
    # the whole output); vLLM V0's API server is not measured: none
    sglang = step_time_for(model, b200, engine="sglang", version=(0, 5, 13))
    assert sglang.terms(1024, 2000).frontend_ms == pytest.approx(1024 * 0.018)
    v0 = step_time_for(model, b200, engine="vllm", version=(0, 6, 3))
    assert v0.frontend_ms_per_token == 0.0 and v0.terms(1024, 2000).frontend_ms == 0.0


def test_slo_says_when_the_api_server_sets_the_step(cli: Callable[..., Result]) -> None:
    # gpt-oss-20b on a B200 with an fp8 KV cache: its GPU step at 1,024 sequences is about 20 ms,
    # under the 24.6 ms the API server takes to stream their tokens
    where = ("slo", "--tpot", "50", "--preset", "gpt-oss-20b", "--gpu", "b200", "--kv-dtype", "fp8")
    data = cli(*where, "--batch", "8,1024", "--json").json()
    assert data["terms_at"]["1024"]["frontend_ms"] == pytest.approx(1024 * 0.024)
    assert data["step_ms_at"]["1024"] == pytest.approx(1024 * 0.024)
    text = " ".join(cli(*where, "--batch", "8,1024").out.split())
    small, large = text.split("t(8) = ")[1].split("t(1024) = ")
    assert "sets the step" not in small
    assert "the API server's streaming 24.58 sets the step" in large
    # every term of the JSON is in the line, the sampler's logits among them
    sampler_ms = data["terms_at"]["1024"]["logits_ms"]
    assert sampler_ms > 0 and f"sampler {sampler_ms:.2f}, overhead" in large
    # capacity --tpot runs the same cap and names what sets the step there
    where = ("--preset", "gpt-oss-20b", "--gpu", "b200", "--kv-dtype", "fp8", "--tpot", "40")
    where += ("--json",)
    reason = cli("capacity", *where).json()["binding_reason"]
    assert "vLLM's API server, streaming 24 us a token, sets the step" in reason
    # SGLang streams at 18 us a token: its MXFP8-activation experts on Blackwell step faster
    # than that too, so its own API server's figure is named
    sglang = cli("capacity", *where, "--engine", "sglang").json()["binding_reason"]
    assert "latency binds" in sglang
    assert "SGLang's API server, streaming 18 us a token, sets the step" in sglang
    llama = ("--preset", "llama-3.1-8b", "--gpu", "h100", "--tpot", "30", "--json")
    assert "API server" not in cli("capacity", *llama).json()["binding_reason"]


def test_the_scheduler_runs_in_series_only_where_nothing_overlaps_it() -> None:
    """vLLM V0 (11.5 us a sequence, 18.4 us of input preparation and 5.9 of its sampler's
    outputs) and V1 before 0.14 (5.6 us, and 1.2 us of input preparation) schedule between GPU
    steps; async scheduling (0.14 on), a pipeline's batch queue and SGLang's overlap scheduler
    hide it (benchmarks/data/host-overhead.jsonl)."""
    h100 = find_gpu("h100")
    cases = [
        ("vllm", (0, 6, 3), 1, 0.0358),
        ("vllm", (0, 13, 0), 1, 0.0068),
        ("vllm", (0, 13, 0), 2, 0.0),
        ("vllm", (0, 14, 0), 1, 0.0),
        ("sglang", (0, 5, 2), 1, 0.0),
    ]
    for engine, version, pp, host in cases:
        curve = step_time_for(LLAMA8, h100, engine=engine, version=version, pp=pp)
        assert curve.host_ms_per_seq == pytest.approx(host), (engine, version, pp)
    serial = step_time_for(LLAMA8, h100, engine="vllm", version=(0, 13, 0))
    overlapped = step_time_for(LLAMA8, h100, engine="vllm", version=(0, 14, 0))
    gap = serial.step_ms(256, 1000) - overlapped.step_ms(256, 1000)
    assert gap == pytest.approx(256 * 0.0068)
    # --async-scheduling (0.10 on) hides it in earlier releases; --no-async-scheduling brings
    # it back in later ones
    for version, asked, host in (((0, 11, 0), True, 0.0), ((0, 14, 0), False, 0.0068)):
        curve = step_time_for(LLAMA8, h100, version=version, async_scheduling=asked)
        assert curve.host_ms_per_seq == pytest.approx(host), version
    # SGLang's scheduler, 6.9 us a sequence (0.5.13, measured the same way), runs between the
    # steps only under --disable-overlap-schedule
    sglang = step_time_for(LLAMA8, h100, engine="sglang", version=(0, 5, 13))
    off = step_time_for(LLAMA8, h100, engine="sglang", version=(0, 5, 13), async_scheduling=False)
    assert (sglang.host_ms_per_seq, off.host_ms_per_seq) == (0.0, pytest.approx(0.0069))
    assert off.step_ms(256, 1000) - sglang.step_ms(256, 1000) == pytest.approx(256 * 0.0069)
    # its overlap scheduler is the default from 0.3.6, and attention DP kept it off to 0.4.1
    assert step_time_for(LLAMA8, h100, engine="sglang", version=(0, 3, 0)).host_ms_per_seq > 0
    assert step_time_for(LLAMA8, h100, engine="sglang", version=(0, 3, 6)).host_ms_per_seq == 0
    cases = [((0, 4, 1), False, True, False), ((0, 4, 2), False, True, True)]
    cases += [((0, 5, 13), True, False, False), (None, False, False, True)]
    for version, disabled, dp_attention, on in cases:
        assert sglang_overlap(version, disabled, dp_attention) is on, version


def test_a_scheduler_beside_the_gpu_floors_the_step_it_prepares() -> None:
    """Where the scheduler overlaps the GPU its work is hidden until it outlasts the step: a
    0.6B model at 1,024 sequences of 100 tokens on a B200 steps faster than SGLang's scheduler
    readies 1,024 requests (7.1 ms), once its API server streams a hundred tokens a chunk."""
    b200 = find_gpu("b200")
    small = resolve_model(None, str(MODELS / "Qwen--Qwen3-0.6B"))
    where = {"engine": "sglang", "version": (0, 5, 13), "stream_interval": 100}
    curve = step_time_for(small, b200, **where)
    assert curve.overlapped_host_ms_per_seq == pytest.approx(0.0069)
    gpu = curve.model_copy(update={"overlapped_host_ms_per_seq": 0.0})
    assert gpu.step_ms(1024, 100) < 1024 * 0.0069
    assert curve.step_ms(1024, 100) == pytest.approx(1024 * 0.0069)
    # a batch whose GPU step is longer hides it whole
    assert curve.step_ms(64, 100) == pytest.approx(gpu.step_ms(64, 100))
    # run in series instead, it adds to the GPU step
    serial = step_time_for(small, b200, **where, async_scheduling=False)
    assert serial.overlapped_host_ms_per_seq == 0.0
    assert serial.step_ms(1024, 100) == pytest.approx(gpu.step_ms(1024, 100) + 1024 * 0.0069)
    # vLLM's async scheduling (0.14 on) hides its 6.8 us the same way
    vllm = step_time_for(small, b200, engine="vllm", version=(0, 14, 0), stream_interval=100)
    assert vllm.overlapped_host_ms_per_seq == pytest.approx(0.0068)
    assert vllm.host_ms_per_seq == 0.0


def test_async_scheduling_is_the_flag_vllm_takes(cli: Callable[..., Result]) -> None:
    # asked for on 0.11, a step at 256 sequences sheds the scheduler's 6.8 us a sequence: the
    # TPOT simulate predicts falls to what 0.14 (on by default) predicts, and the line says so
    run = (
        "simulate", "--preset", "llama-3.1-8b", "--gpu", "h100", "--engine", "vllm",
        "--concurrency", "256", "--prompt-len", "1000", "--output-len", "200",
        "--requests", "512", "--json",
    )  # fmt: skip
    serial = cli(*run, "--engine-version", "0.11.0").json()
    asked = cli(*run, "--engine-version", "0.11.0", "--async-scheduling").json()
    newer = cli(*run, "--engine-version", "0.14.0").json()
    assert asked["median_tpot_ms"] < serial["median_tpot_ms"] - 1.0
    assert asked["median_tpot_ms"] == pytest.approx(newer["median_tpot_ms"], rel=0.01)
    assert asked["deployment"]["command"].endswith(" --async-scheduling")
    assert "async-scheduling" not in newer["deployment"]["command"]
    off = cli(*run, "--engine-version", "0.14.0", "--no-async-scheduling").json()
    assert off["deployment"]["command"].endswith(" --no-async-scheduling")
    assert off["median_tpot_ms"] == pytest.approx(serial["median_tpot_ms"], rel=0.01)
    # capacity prints the same line and pastes back
    line = cli(
        "capacity", "--preset", "llama-3.1-8b", "--gpu", "h100", "--engine-version", "0.11.0",
        "--async-scheduling", "--json",
    ).json()["flags"]["vllm"]  # fmt: skip
    assert line.endswith(" --async-scheduling")
    assert fields_from_line("vllm", line)["async_scheduling"] is True
    assert fields_from_line("vllm", off["deployment"]["command"])["async_scheduling"] is False
    # where vLLM refuses it: before 0.10, with pipeline stages, under SGLang
    for extra in (
        ("--engine-version", "0.9.2"),
        ("--engine-version", "0.11.0", "--pp", "2"),
        ("--engine", "sglang"),
    ):
        refused = cli(*run[:5], *run[7:], *extra, "--async-scheduling")
        assert refused.code == 2, extra
        assert refused.json()["error"].startswith("--async-scheduling: "), extra


def test_a_stream_interval_sends_the_api_servers_chunks_once_per_n_tokens() -> None:
    """With --stream-interval N the API server's per-chunk work runs once per N tokens: of
    vLLM's, the share the runs of benchmarks/frontend_overhead.py leave per token (its message
    and detokenizer) stays; SGLang's measured parts all run per output message."""
    records = [
        r
        for r in map(json.loads, (ROOT / "benchmarks/data/host-overhead.jsonl").open())
        if r.get("vllm") == "0.14.0" and r["what"].startswith("V1 API server: output")
    ]
    run = {r.get("stream_interval", 1): r for r in records if r["date"] == "2026-12-05"}
    one, ten = run[1]["marginal_us_per_token"], run[10]["marginal_us_per_token"]
    per_token = (10 * ten - one) / 9  # p + c = one, p + c / 10 = ten
    whole = one + run[1]["http_us_per_chunk"]
    assert FRONTEND_PER_TOKEN_SHARE["vllm"] == pytest.approx(per_token / whole, abs=0.005)
    # the third interval of the same run sits on the line the two give
    four = run[4]["marginal_us_per_token"]
    assert four == pytest.approx(per_token + (one - per_token) / 4, rel=0.05)
    assert frontend_ms_per_token("vllm", (0, 14, 0), 10) == pytest.approx(
        0.024 * (0.12 + 0.88 / 10)
    )
    assert frontend_ms_per_token("sglang", (0, 5, 13), 10) == pytest.approx(0.0018)
    # a large batch the API server paced now steps at the GPU's pace
    model, b200 = load_model_preset("gpt-oss-20b"), find_gpu("b200")
    paced = step_time_for(model, b200, version=(0, 14, 0), kv_dtype_bytes=1)
    chunked = step_time_for(model, b200, version=(0, 14, 0), kv_dtype_bytes=1, stream_interval=10)
    assert paced.step_ms(1024, 2000) == pytest.approx(1024 * 0.024)
    assert chunked.step_ms(1024, 2000) < 0.9 * paced.step_ms(1024, 2000)
    assert chunked.terms(1024, 2000).frontend_ms < chunked.step_ms(1024, 2000)
    assert chunked.step_ms(8, 2000) == pytest.approx(paced.step_ms(8, 2000))


def test_simulate_takes_the_servers_stream_interval(cli: Callable[..., Result]) -> None:
    # unpaced (4 clients) the tokens come as fast, N to a chunk: TPOT the same, the client's
    # ITL spans N token gaps; the line carries the flag for both engines and reads back
    run = (
        "simulate", "--preset", "gpt-oss-20b", "--gpu", "b200", "--prompt-len", "1000",
        "--output-len", "200", "--json",
    )  # fmt: skip
    few = ("--concurrency", "4", "--requests", "16")
    for engine in ("vllm", "sglang"):
        one = cli(*run, "--engine", engine, *few).json()
        ten = cli(*run, "--engine", engine, *few, "--stream-interval", "10")
        ten = ten.json()
        assert ten["median_tpot_ms"] == pytest.approx(one["median_tpot_ms"], rel=1e-6)
        assert ten["median_itl_ms"] == pytest.approx(10 * one["median_itl_ms"], rel=1e-6)
        line = ten["deployment"]["command"]
        assert line.endswith(" --stream-interval 10"), engine
        assert fields_from_line(engine, line)["stream_interval"] == 10
        assert "--stream-interval" not in one["deployment"]["command"]
        # and the output says its ITL is an approximation
        assert any(n.startswith("--stream-interval 10: ") for n in ten["notes"])
        assert not any("--stream-interval" in n for n in one["notes"])
    # paced by what streams the tokens (SGLang's client reads every chunk of 512 streams, each
    # carrying the output so far), fewer chunks step faster
    paced = ("--engine", "sglang", "--concurrency", "512", "--requests", "1024")
    slow = cli(*run, *paced).json()
    fast = cli(*run, *paced, "--stream-interval", "10").json()
    assert fast["output_throughput"] > 1.1 * slow["output_throughput"]
    capacity = ("capacity", "--preset", "gpt-oss-20b", "--gpu", "b200", "--json")
    assert (
        cli(*capacity, "--stream-interval", "10")
        .json()["flags"]["vllm"]
        .endswith(" --stream-interval 10")
    )
    refused = cli(*run, *few, "--engine-version", "0.11.0", "--stream-interval", "4")
    assert refused.code == 2
    assert refused.json()["error"].startswith("--stream-interval: vLLM takes it from 0.11.1")
    taken = cli(*capacity, "--engine-version", "0.11.1", "--stream-interval", "4").json()
    assert taken["flags"]["vllm"].endswith(" --stream-interval 4")


def test_only_the_measured_api_servers_admit_at_a_cost() -> None:
    """vLLM V1's API server's per-request work is the measured 159 + 160 us beside 0.084 us a
    prompt token (it tokenizes on another thread); SGLang's event loop tokenizes in line:
    168 + 160 us and 0.913 us a prompt token. V0's server was not measured and costs nothing."""
    fixed, per_token = api_server_ms_per_request("vllm", (0, 10, 1))
    assert fixed == pytest.approx(0.319) and per_token == pytest.approx(0.000084)
    fixed, per_token = api_server_ms_per_request("sglang", (0, 5, 13))
    assert fixed == pytest.approx(0.328) and per_token == pytest.approx(0.000913)
    assert api_server_ms_per_request("vllm", (0, 6, 3)) == (0.0, 0.0)
    assert api_server_ms_per_request("lmdeploy", (0, 6, 0)) == (0.0, 0.0)
    assert api_server_ms_per_request("vllm", None) == (0.0, 0.0)


def test_the_h200_operations_read_as_documented() -> None:
    # The single-token GEMVs measured on an H200 (benchmarks/gpu_ops.py) fit 3.9 us + bytes /
    # 3.81 TB/s, as docs/method.md quotes; the model prices a GEMM by the same terms it uses in
    # a step: Hopper's 3.9 us a GEMM and its weights at 0.85 of the peak (a stack's GEMMs run
    # back to back faster than one alone), so each measured GEMV is within -14% / +26% of it,
    # the small ones of a TP 8 share no longer priced a third fast.
    bench = benchmark_script("ops_vs_model")
    data = json.loads(bench.OPS.read_text())
    single = [r for r in data["gemm"] if r.get("m") == 1 and r["dtype"] == "bf16"]
    a_ms, b_bytes_per_s = bench.gemv_line(single)
    assert (round(a_ms * 1e3, 1), round(b_bytes_per_s / 1e12, 2)) == (3.9, 3.81)
    card = find_gpu(data["catalog_id"])
    large = bench.gemm_model_ms(card, "bf16", 1, 8192, 57344)  # 70B gate_up, 940 MB
    weights = 2 * 8192 * 57344 + 2 * (8192 + 57344)  # and the token in and out
    assert large == pytest.approx(0.0039 + weights / (4.8e12 * 0.85) * 1e3, rel=1e-3)
    ratios = [r["ms"] / bench.gemm_model_ms(card, "bf16", 1, r["k"], r["n"]) for r in single]
    assert len(ratios) == 12
    assert min(ratios) > 0.85 and max(ratios) < 1.3
    assert statistics.median(ratios) == pytest.approx(1.0, abs=0.1)


def test_hopper_all_reduces_take_the_measured_custom_all_reduce() -> None:
    # vLLM's V1 engine (0.8 on) and SGLang (0.4 on) run their custom all-reduce over NVLink:
    # 4.7 us an all-reduce whatever the TP size (NVIDIA's aiconfigurator tables: 4.2-4.7 us up
    # to 8 KB on 2, 4 and 8 GPUs), beside the ring's bytes at 0.7 of the link. vLLM's V0 engine
    # (whose public rows fit it), LMDeploy and AMD keep (TP - 1) x 8 us a peer.
    llama70 = load_model_preset("llama-3.1-70b")
    h100 = find_gpu("h100")
    message = 8192 * 2  # one token's hidden state in bf16
    for tp in (2, 4, 8):
        st = step_time_for(llama70, h100, tp=tp, engine="vllm")
        link = st.fabric.collective_bytes_per_s(tp) * 0.7
        one = 0.0047 + message * 2 * (tp - 1) / tp / link * 1e3
        assert st.allreduce_ms(1) == pytest.approx(2 * 80 * one)
    new = step_time_for(llama70, h100, tp=8, engine="sglang", version=(0, 5, 13))
    old = step_time_for(llama70, h100, tp=8, engine="vllm", version=(0, 6, 3))
    lmdeploy = step_time_for(llama70, h100, tp=8, engine="lmdeploy")
    link = old.fabric.collective_bytes_per_s(8)
    per_peer = 2 * 80 * (7 * ALLREDUCE_HOP_MS + message * 2 * 7 / 8 / link * 1e3)
    assert old.allreduce_ms(1) == lmdeploy.allreduce_ms(1) == pytest.approx(per_peer)
    assert old.allreduce_ms(1) > 10 * new.allreduce_ms(1)
    # the boundary is the engine, not the releases the tables happen to time: V1's first release
    # and the last before the tables' oldest (0.13) take the kernel, V0's last (0.7.3) the hop;
    # SGLang from 0.4.0 (which turned on vLLM's kernel) on
    for engine, version, custom in (
        ("vllm", (0, 7, 3), False),
        ("vllm", (0, 8, 0), True),
        ("vllm", (0, 13, 0), True),
        ("sglang", (0, 3, 6), False),
        ("sglang", (0, 4, 0), True),
        ("sglang", (0, 5, 2), True),
    ):
        got = step_time_for(llama70, h100, tp=8, engine=engine, version=version).allreduce
        assert (got == new.allreduce) is custom and (got.hop_ms > 0) is not custom, version
    amd = step_time_for(llama70, find_gpu("mi300x"), tp=8, engine="vllm")
    assert amd.allreduce == CDNA3_ALLREDUCE and new.allreduce == AllReduceCost(
        fixed_ms=0.0047, hop_ms=0.0, link_share=0.7
    )
    # still zero at TP 1, and more with a larger message
    assert step_time_for(llama70, h100, tp=1).allreduce_ms(64) == 0.0
    st8 = step_time_for(llama70, h100, tp=8)
    assert st8.allreduce_ms(256) > st8.allreduce_ms(1)


def test_eager_kernels_are_counted_by_block_kind() -> None:
    """Hand counts of one eager forward pass (planner.core.step.launch): a Llama layer's four
    GEMMs, its attention block's norm, rotary, KV write and attention and its MLP's norm and
    activation (10), two all-reduces more under TP; a Qwen3-30B-A3B layer's attention (6) and
    MoE block (router, two expert GEMMs, norm, top-k, sort, activation, sum: 8); six kernels
    outside the layers, at 6.05 us each."""
    from planner.core.step.launch import EAGER_MS_PER_KERNEL, kernels_per_layer, launch_ms

    llama = load_model_preset("llama-3.1-8b")
    assert kernels_per_layer(llama, 1) == 10 and kernels_per_layer(llama, 2) == 12
    assert launch_ms(llama, 1, 32) == pytest.approx((32 * 10 + 6) * EAGER_MS_PER_KERNEL)
    moe = load_model_preset("qwen3-30b-a3b")
    assert kernels_per_layer(moe, 1) == 14
    assert launch_ms(moe, 1, 48) == pytest.approx(678 * 0.00605)


def test_a_step_outside_the_graphs_is_floored_at_the_hosts_launches() -> None:
    """A step the engine launches kernel by kernel takes at least the host's launches: a
    0.6B model's decode step (GPU work shorter than its launches) grows to them; a 70B at TP 8
    (GPU work longer) does not change; a step inside the graphs keeps the per-layer costs
    measured there."""
    from planner.core.step.launch import Graphs

    gpu = find_gpu("h100")
    small = resolve_model(None, str(MODELS / "Qwen--Qwen3-0.6B"))
    graphed = step_time_for(small, gpu)
    eager = step_time_for(small, gpu, graphs=Graphs(max_tokens=0))
    plain, floored = graphed.terms(1, 300), eager.terms(1, 300)
    assert floored.step_ms > plain.step_ms
    assert floored.step_ms == pytest.approx(
        eager.eager_launch_ms + floored.overhead_ms + floored.logits_ms
    )
    # past the largest captured batch only: 2 sequences replay a graph of 2, 3 do not
    past = step_time_for(small, gpu, graphs=Graphs(max_tokens=2))
    assert past.step_ms(2, 300) == graphed.step_ms(2, 300)
    assert past.step_ms(3, 300) == eager.step_ms(3, 300) > graphed.step_ms(3, 300)
    # at 64 sequences its GPU work outlasts the launches: eager or not, the same step
    assert eager.step_ms(64, 300) == graphed.step_ms(64, 300)
    # vLLM V0's prompt steps launch eagerly whatever their size; V1 graphs them by tokens
    v0 = Graphs(max_tokens=256, prompt_max_tokens=0)
    assert v0.eager(8, 4) and not v0.eager(8, 0) and v0.eager(257, 0)
    v1 = Graphs(max_tokens=512)
    assert not v1.eager(500, 400) and v1.eager(513, 0)
    large = load_model_preset("llama-3.1-70b")
    for batch in (1, 64):
        on = step_time_for(large, gpu, tp=8).step_ms(batch, 2000)
        off = step_time_for(large, gpu, tp=8, graphs=Graphs(max_tokens=0)).step_ms(batch, 2000)
        assert off == on
