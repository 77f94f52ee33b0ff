"""GPU families and the step model's constants for each: which cards share kernels and
efficiencies, and whether a family's figures were fitted on measurements or extrapolated."""

from __future__ import annotations

import itertools
import math
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from planner.core.specs import GpuSpec
from planner.core.step.comm import (
    DEEPEP_NVLINK,
    MORI_CDNA4_KERNEL_MS,
    MORI_KERNEL_MS,
    AllReduceCost,
    DeepEpCosts,
    beyond_bridge,
)
from planner.core.step.moe import MOE_KERNEL_MS_PER_LAYER, MOE_MS_PER_IDLE_EXPERT
from planner.core.step.overhead import GEMMS_PER_MOE_BLOCK, KERNEL_MS_PER_LAYER, VLLM_V1_SINCE

Basis = Literal["fitted", "extrapolated"]


class Family(BaseModel):
    """One GPU family's step-model constants and where they come from."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    name: str
    bandwidth_efficiency: float
    compute_scale: float = 1.0
    low_precision_scale: float = 1.0
    block_fp8_scale: float | None = Field(
        default=None,
        description="low_precision_scale for block-scaled fp8 checkpoints (None: the same)",
    )
    attention_bandwidth_scale: float = 1.0
    attention_bandwidth_fraction: float | None = Field(
        default=None,
        description="share of peak HBM bandwidth decode attention streams the KV cache at, "
        "measured (None: the weights' share x attention_bandwidth_scale)",
    )
    gemm_floor_ms: float = 0.0
    allreduce: AllReduceCost | None = Field(
        default=None,
        description="one all-reduce in the engines' custom all-reduce (NCCL's over PCIe), where "
        "measured (None: comm.ALLREDUCE_HOP_MS a peer)",
    )
    kernel_ms_per_layer: float = Field(
        default=KERNEL_MS_PER_LAYER,
        description="fixed cost per decoder layer beside its GEMMs' own floors, ms",
    )
    mid_m_slowdown: dict[str, tuple[tuple[int, float], ...]] = Field(
        default_factory=dict,
        description="by the weights' GEMM kind (bf16, fp8, fp8-block): (tokens, factor) points "
        "on the dense GEMMs' time between decode and prefill (none: 1)",
    )
    fp4_scale: float | None = Field(
        default=None,
        description="low_precision_scale for FP4 (w4a4) weights (None: the same)",
    )
    moe_gemm_scale: dict[str, float] = Field(
        default_factory=dict,
        description="by the experts' GEMM kind (bf16, fp8, fp8-block, mxfp4, fp4, ...): the share "
        "of the rate the fused MoE kernels reach, relative to the dense GEMMs' of that kind "
        "(none: 1); with moe_half_width, the ceiling wide experts approach",
    )
    moe_half_width: dict[str, int] = Field(
        default_factory=dict,
        description="by the experts' GEMM kind: the expert width per GPU (intermediate size "
        "over the MoE TP) at which the fused MoE kernels reach half their ceiling (none: the "
        "share does not depend on it)",
    )
    sglang_moe_gemm_scale: dict[str, float] = Field(
        default_factory=dict,
        description="by the experts' kind: SGLang's own fused-MoE ceiling where its kernel tables "
        "time it at prefill sizes, over moe_gemm_scale's (none: the same)",
    )
    sglang_moe_half_width: dict[str, int] = Field(
        default_factory=dict,
        description="by the experts' kind: SGLang's own half width beside its ceiling",
    )
    moe_kernel_ms_per_layer: float = Field(
        default=MOE_KERNEL_MS_PER_LAYER,
        description="a MoE layer's routing kernels beside its grouped GEMMs' floors, ms",
    )
    moe_ms_per_idle_expert: float = Field(
        default=MOE_MS_PER_IDLE_EXPERT,
        description="each idle local expert's early exit in the grouped GEMMs' grid, ms",
    )
    moe_stream_share: dict[str, float] = Field(
        default_factory=dict,
        description="by the experts' GEMM kind: the share of peak bandwidth the fused MoE "
        "kernels stream their routed experts at, where it is below the weights' (none: the "
        "weights' share)",
    )
    prefill_attention_ceilings: dict[int, float] = Field(
        default_factory=dict,
        description="by head size: the share of the 16-bit rate prefill attention approaches "
        "on long prompts (none: attention.ATTENTION_FLOPS_EFFICIENCY x compute_scale, flat)",
    )
    prefill_attention_half_keys: float = Field(
        default=0.0,
        ge=0,
        description="the mean keys a query sees at which prefill attention reaches half its "
        "ceiling",
    )
    fp8_kv_attention_scale: float = Field(
        default=1.0,
        description="decode attention's bandwidth share with an fp8 KV cache over a 16-bit one",
    )
    sglang_fp8_kv_attention_scale: float | None = Field(
        default=None,
        description="the same under SGLang's decode kernel, where its tables time it (None: "
        "fp8_kv_attention_scale)",
    )
    sglang_moe_kernel_ms_per_layer: float | None = Field(
        default=None,
        description="SGLang's MoE routing kernels a layer where its kernel tables time its fused "
        "MoE (no idle-expert cost; None: the earlier estimates)",
    )
    mxfp8_moe_engines: frozenset[str] = Field(
        default=frozenset(),
        description="engines that multiply MXFP4 experts with MXFP8 activations on this family "
        "(the fp8 rate, the experts' kind mxfp4-mxfp8; none: 16-bit activations on NVIDIA)",
    )
    nccl_latency: AllReduceCost | None = Field(
        default=None,
        description="NCCL's all-gather / reduce-scatter at decode-sized messages over NVLink: "
        "a fixed time and a time a peer (link_share unused), where NVIDIA's tables time it "
        "(None: the all-reduce's cost stands for them)",
    )
    deepep_moe_fp8_share: float | None = Field(
        default=None,
        description="the share of the fp8 rate block-scaled experts multiply at under DeepEP "
        "(DeepGEMM's grouped GEMMs), where NVIDIA's tables time it (None: the fused MoE "
        "kernels' share)",
    )
    deepgemm_ms_per_local_expert: float = Field(
        default=0.0,
        ge=0,
        description="what DeepGEMM's masked grouped GEMM spends on each expert a GPU holds, "
        "touched or not, under DeepEP, where NVIDIA's tables time it, ms",
    )
    mori_kernel_ms: float = Field(
        default=MORI_KERNEL_MS,
        ge=0,
        description="the fixed cost of each of MoRI's dispatch and combine kernels (AMD's MoE "
        "all-to-all), as its README times them on the family's card, ms",
    )
    deepep_in_fabric: DeepEpCosts | None = Field(
        default=None,
        description="DeepEP's dispatch and combine inside one NVLink fabric, as NVIDIA's tables "
        "time them (None: their bytes at the link's full rate)",
    )
    mla_layer_ms: dict[str, tuple[float, float]] = Field(
        default_factory=dict,
        description="an MLA layer's decode module beyond its priced parts, ms, by projection "
        "kind (bf16, fp8-block): with a 16-bit and with an fp8 latent cache (none: 0)",
    )
    basis: Basis
    source: str


# Achievable share of peak HBM bandwidth in decode GEMVs and attention (Hopper and Blackwell
# apart: HOPPER_*, below, measured with their fixed costs split out). Ampere: 0.75, fitted with
# the 17 us a layer of overhead.KERNEL_MS_PER_LAYER on the public rows of
# benchmarks/data/step-time.jsonl (LMDeploy on A100 Llama-2 7B/13B, vLLM on A100 Mixtral-8x22B
# TP 4/8). Other NVIDIA families run the same kernels (CUTLASS / FlashAttention / Triton) and
# take the same share: extrapolated. AMD
# CDNA: 0.62 (no step-time row yet), from ROCm's own kernel tables: AITER records the time of each
# GEMM it tunes (ROCm/aiter aiter/configs/model_configs/a8w8_blockscale_*tuned_gemm_*.csv, commit
# e404860, 2026-08; the rows used are in benchmarks/data/gemm-kernels.jsonl: `python
# benchmarks/gemm_kernels.py`), and its fp8 GEMMs at 1-16 tokens on gfx942 with 304 CUs fit 6.3 us
# + bytes / 3.28 TB/s (92 rows, 1.6-131 MB): a fixed cost a kernel (AMD_GEMM_FLOOR_MS, below) and
# a stream at 0.62 of MI300X's 5.3 TB/s (0.55 of MI325X's 6.0, which shares those CUs: the tables
# do not say which card). On gfx950 with 256 CUs matrices of 80 MB and more stream at a median
# 5.01 TB/s (23 shapes: 0.63 of MI350X / MI355X's 8.0). The one bandwidth-bound AMD serving row in
# benchmarks/data/e2e.jsonl agrees: SGLang 0.5.13 on one MI300X, Gemma-4-31B in bf16 at one
# client, TPOT 21.49 ms measured against 22.2 ms modelled, nearly all of it the weight read
# (sgl-project/sglang PR 31216, 2026-07). A card's own measured figure
# (`GpuSpec.achievable_bandwidth_fraction`, e.g. the H200's) wins over its family's.
NVIDIA_BANDWIDTH_EFFICIENCY = 0.75
AMD_BANDWIDTH_EFFICIENCY = 0.62
OTHER_BANDWIDTH_EFFICIENCY = 0.70  # other vendors: between the two, an assumption
# Share of the datasheet's dense tensor-core rate a family's GEMM and attention kernels reach,
# relative to NVIDIA's (whose absolute shares are gemm.FLOPS_EFFICIENCY and
# attention.ATTENTION_FLOPS_EFFICIENCY). SemiAnalysis, "MI300X vs H100 vs H200 Benchmark Part 1:
# Training" (2024-12), measured large BF16 GEMMs at about 620 TFLOP/s on MI300X (47% of its
# 1,307) against about 720 on H100 (73% of 989), and FP8 at about 38% against 65%: CDNA3 reaches
# about 0.62 of Hopper's share. CDNA2 takes the same factor (extrapolated); CDNA4 its own
# (below).
AMD_COMPUTE_SCALE = 0.62
# H100's large BF16 GEMMs' share of its rate in those measurements: the isolated-kernel share
# the other families' kernel tables are read against.
HOPPER_BF16_GEMM_SHARE = 0.73
# CDNA3's large BF16 GEMMs' share as the planner models it (about 0.45; SemiAnalysis: 0.47).
CDNA3_BF16_GEMM_SHARE = HOPPER_BF16_GEMM_SHARE * AMD_COMPUTE_SCALE
# Share of the fp8 (and fp4) tensor-core rate the linear layers reach, relative to the 16-bit
# GEMMs' share of theirs: the same SemiAnalysis measurements put H100's FP8 GEMMs at about 65%
# of their 1,979 TFLOP/s against 73% for BF16 (0.89), MI300X's at about 38% against 47% (0.81).
# Low-precision GEMMs keep the same tiles and epilogues while the multiply runs twice as fast,
# so a larger part of their time is not the multiply. FP4 (NVFP4 / MXFP4 w4a4) takes the same
# factor (measured on CDNA4 only, below).
NVIDIA_LOW_PRECISION_SCALE = 0.65 / 0.73
AMD_LOW_PRECISION_SCALE = 0.38 / 0.47
# CDNA4 from ROCm's own kernel tables (ROCm/aiter aiter/configs/**/*tuned_gemm*.csv, commit
# e404860; the rows used are in benchmarks/data/gemm-kernels.jsonl, `python
# benchmarks/gemm_kernels.py`): the median share of the datasheet rate over the tuned GEMMs of
# M = 8,192 / 16,384 / 32,768 tokens and N, K >= 2,048 on gfx950 with 256 CUs (MI350X /
# MI355X; the fastest kernel where several tables tune a shape). BF16: 0.581 of 2.5 PFLOP/s
# (144 shapes), 0.80 of H100's 0.73; per-token / per-tensor FP8: 0.491 of 5.0 (147 shapes),
# 0.85 of BF16's share (CDNA3: 0.81, above); block-scaled FP8 (below): 0.349 (135 shapes).
# Its MXFP4 w4a4 GEMMs reach 0.486 of 10 PFLOP/s (165 shapes), 0.84: FP4 takes the FP8 figure.
CDNA4_BF16_GEMM_SHARE = 0.581
CDNA4_FP8_GEMM_SHARE = 0.491
CDNA4_COMPUTE_SCALE = CDNA4_BF16_GEMM_SHARE / HOPPER_BF16_GEMM_SHARE
CDNA4_LOW_PRECISION_SCALE = CDNA4_FP8_GEMM_SHARE / CDNA4_BF16_GEMM_SHARE
# Block-scaled FP8 (a scale per 128 x 128 tile: DeepSeek-V3 and the exports that follow it)
# against the family's 16-bit GEMMs. NVIDIA runs it as fast as per-tensor FP8 (DeepGEMM on an
# H800 up to 1,550 TFLOP/s, 0.78 of peak: deepseek-ai/DeepGEMM README, first release): the
# same factor. AMD's block-scaled kernels stay further from the rate: the same tables and
# selection give 0.316 of MI300X's 2.6 PFLOP/s on gfx942 with 304 CUs (96 shapes; 0.70 of the
# 0.45 BF16 share CDNA3's factor above gives) and 0.349 on gfx950 (0.60 of its 0.581).
CDNA3_BLOCK_FP8_GEMM_SHARE = 0.316
CDNA4_BLOCK_FP8_GEMM_SHARE = 0.349
CDNA3_BLOCK_FP8_SCALE = CDNA3_BLOCK_FP8_GEMM_SHARE / CDNA3_BF16_GEMM_SHARE
CDNA4_BLOCK_FP8_SCALE = CDNA4_BLOCK_FP8_GEMM_SHARE / CDNA4_BF16_GEMM_SHARE
# AMD's fused MoE kernels against its dense GEMMs of the same kind: the share of the rate AITER's
# tuned fused MoE layers reach (both grouped GEMMs, gate-up and down: 6 x tokens x top-k x
# model_dim x inter_dim FLOPs) at M = 8,192 / 16,384 / 32,768 tokens, from the same tables and
# selection (ROCm/aiter aiter/configs/**/*tuned_fmoe*.csv, commit e404860; the rows used are in
# benchmarks/data/gemm-kernels.jsonl: `python benchmarks/gemm_kernels.py`), over the family's
# modelled dense share of that kind (above). As on NVIDIA (HOPPER_MOE_SHARES, below) the share
# grows with the columns of an expert a GPU holds (inter_dim, after TP): ceiling x width / (width
# + half), fitted the same way where the tables time two widths or more. gfx950 with 256 CUs:
# per-token FP8 0.348 and 549 (12 shapes, 192-1,536 wide), block-scaled FP8 0.191 and 109 (46,
# 128-1,536), MXFP4 weights with FP8 activations 0.402 and 250 of the FP8 rate (50, 256-3,072),
# with FP4 ones 0.227 and 287 of the FP4 rate (93, 256-3,072); BF16 a median 0.220 at its one
# width (3 shapes, 384). gfx942 with 304 CUs: BF16 0.306 and 161 (6, 192 and 384), block-scaled
# FP8 0.411 and 301 (9, 256 and 2,048); per-token FP8 has no row (1). Between decode and
# prefill the factor leaves the model within 0.72-1.0 of the tables' times (decode stays at the
# expert read). Both engines take it: SGLang's ROCm build runs these kernels (SGLANG_USE_AITER=1),
# vLLM's its Triton fused MoE by default, whose times no public table gives (AITER's tuned
# kernels taken as its bound). OpenAI's weight-only MXFP4 (gpt-oss) runs W4A16 kernels on AMD
# (planner.core.step.gemm): no table times them; they take the family's BF16 fused MoE share
# (they dequantize the weights and multiply in bf16; NVIDIA's H200 tables put the two within
# 4%: HOPPER_MOE_SHARES), an estimate. gfx950's BF16 rows time one width alone (384), where
# gfx942's curve of the same AITER kernels gives 0.216 (0.306 x 384 / 545): CDNA4 takes
# gfx942's half width (161), its ceiling set to meet its own 0.220 at 384, where the share
# of every kernel table that times several widths grows with the width.
CDNA4_BF16_MOE_WIDTH = 384
CDNA4_BF16_MOE_SHARE = 0.220
CDNA3_BF16_MOE_HALF_WIDTH = 161
CDNA4_MOE_SHARES: dict[str, tuple[float, int | None]] = {
    "bf16": (
        CDNA4_BF16_MOE_SHARE
        * (CDNA4_BF16_MOE_WIDTH + CDNA3_BF16_MOE_HALF_WIDTH)
        / CDNA4_BF16_MOE_WIDTH,
        CDNA3_BF16_MOE_HALF_WIDTH,
    ),
    "fp8": (0.348, 549),
    "fp8-block": (0.191, 109),
    "mxfp4-fp8": (0.402, 250),
    "fp4": (0.227, 287),
}
CDNA3_MOE_SHARES: dict[str, tuple[float, int | None]] = {
    "bf16": (0.306, CDNA3_BF16_MOE_HALF_WIDTH),
    "fp8-block": (0.411, 301),
}
CDNA4_MOE_SHARES["mxfp4"] = CDNA4_MOE_SHARES["bf16"]
CDNA3_MOE_SHARES["mxfp4"] = CDNA3_MOE_SHARES["bf16"]
# The dense share the planner models for each kind (AMD's fp8-input MXFP4 exports, mxfp4-fp8, at
# the FP8 rate; FP4, AMD's w4a4 MXFP4 exports among it, at the FP4 rate; both with the FP8
# factor; OpenAI's weight-only MXFP4 at the BF16 one).
CDNA4_DENSE_GEMM_SHARES = {
    "bf16": CDNA4_BF16_GEMM_SHARE,
    "fp8": CDNA4_FP8_GEMM_SHARE,
    "fp8-block": CDNA4_BLOCK_FP8_GEMM_SHARE,
    "mxfp4": CDNA4_BF16_GEMM_SHARE,
    "mxfp4-fp8": CDNA4_FP8_GEMM_SHARE,
    "fp4": CDNA4_FP8_GEMM_SHARE,
}
CDNA3_DENSE_GEMM_SHARES = {
    "bf16": CDNA3_BF16_GEMM_SHARE,
    "fp8-block": CDNA3_BLOCK_FP8_GEMM_SHARE,
    "mxfp4": CDNA3_BF16_GEMM_SHARE,
}


def moe_factors(
    shares: dict[str, tuple[float, int | None]], dense: dict[str, float]
) -> tuple[dict[str, float], dict[str, int]]:
    """A family's fused-MoE ceilings over its modelled dense share of each kind, and the half
    widths of the kinds whose share grows with the expert width."""
    ceilings = {k: share / dense[k] for k, (share, _) in shares.items()}
    return ceilings, {k: half for k, (_, half) in shares.items() if half is not None}


# At decode the same tables time AITER's fused MoE (its two grouped-GEMM stages) on gfx950 at
# 1-4 tokens (198 rows, 16-257 local experts, every kind): beyond the routed experts' stream at
# the family's share, 14.4 us fixed and -0.002 us an idle local expert (`python
# benchmarks/gemm_kernels.py`): no early-exit cost for experts no token reached, where the
# estimate carried from the A100 charges 0.5 us each (124 us a layer for DeepSeek's 248 idle
# experts at TP 8). The fixed part is the three GEMM floors the family already charges (18 us).
# SGLang's ROCm build runs these kernels (above), so on CDNA4 it takes no idle-expert cost and
# keeps the routing kernels' estimate (MOE_KERNEL_MS_PER_LAYER: the tables do not time the
# top-k and sorting kernels). gfx942's 14 rows (two models with 128 and 257 local experts, the
# rest 32-33) do not separate the two terms (a negative fixed time beside 0.42 us an idle
# expert): CDNA3 keeps the estimates, as vLLM's ROCm build (Triton's fused MoE) does on both.
CDNA4_SGLANG_MOE_KERNEL_MS_PER_LAYER = MOE_KERNEL_MS_PER_LAYER
CDNA4_MOE_GEMM_SCALE, CDNA4_MOE_HALF_WIDTH = moe_factors(CDNA4_MOE_SHARES, CDNA4_DENSE_GEMM_SHARES)
CDNA3_MOE_GEMM_SCALE, CDNA3_MOE_HALF_WIDTH = moe_factors(CDNA3_MOE_SHARES, CDNA3_DENSE_GEMM_SHARES)
# Decode attention's share of the HBM bandwidth, relative to the weight reads' (NVIDIA: the same;
# FlashAttention / FlashInfer decode kernels stream the KV cache as fast as GEMVs stream
# weights). CDNA3: 0.30 of peak, measured on the one AMD source with attention-bound rows
# (sgl-project/sglang PR 31216, SGLang 0.5.13 on one MI300X, Gemma-4-31B bf16, 1,000-token
# prompts and outputs): TPOT 21.49 / 31.45 / 62.93 ms at 1 / 16 / 64 clients against 22.0 /
# 27.6 / 46.4 with the KV read at the weights' share, 22.2 / 31.3 / 61.1 at 0.30 (ROCm runs
# those head sizes on the Triton attention backend). CDNA2 and CDNA4 take the same.
AMD_ATTENTION_BANDWIDTH_SCALE = 0.30 / AMD_BANDWIDTH_EFFICIENCY
# Hopper streams the KV cache faster than the weights: a flash-decoding kernel (benchmarks/
# triton_decode.py) reads it on an H200 in 13.9 us + bytes / (0.89 x 4.8 TB/s) a layer over 20
# probes (1-256 sequences, 2,000 and 8,000 tokens, 8 and 1 KV heads: median error 7%;
# benchmarks/data/step-floors-h200-sxm-141gb.json, `python benchmarks/step_floor.py --attention
# --attention-kernel triton`), and PyTorch's FlashAttention-2 at 256 sequences at 0.89-0.94. The
# fixed part is inside the per-layer cost (HOPPER_KERNEL_MS_PER_LAYER, below). MLA's latent
# cache streams alike: FlashMLA's dense decode kernel reaches up to 3,000 GB/s memory-bound on
# an H800 SXM5, 0.90 of its 3.35 TB/s (deepseek-ai/FlashMLA README @9241ae3).
HOPPER_ATTENTION_BANDWIDTH_FRACTION = 0.89
# the flash-decoding kernel's own 13.9 us above (step-floors-h200-sxm-141gb.json), one part of
# HOPPER_KERNEL_MS_PER_LAYER
HOPPER_ATTENTION_FIXED_MS = 0.0139
# Fixed time a GEMM kernel takes beyond its weight stream, on top of the 17 us a layer AMD takes
# from the Ampere fit (overhead.KERNEL_MS_PER_LAYER, which holds NVIDIA's GEMMs' own), ms. The same
# fp8 block-scaled GEMMs at 64 tokens, timed by their kernels' authors: DeepGEMM on an H800
# (deepseek-ai/DeepGEMM README, first release, 2025-02) and AITER's CK kernels on gfx942 with 304
# CUs (ROCm/aiter a8w8_blockscale_tuned_gemm_ds_v3.csv, commit e404860): N = 2,112 / K = 7,168 in
# 9.4 and 16.5 us, N = 7,168 / K = 2,048 in 6.4 and 11.1 us. Less each card's weight stream at its
# family's share (0.75 of 3.35 TB/s, 0.62 of 5.3), the AMD kernel keeps 8.5 and 6.1 us more; AITER's
# rows at 1-16 tokens keep 6.3 us (above). 6 us, below the three. gfx950's five shapes in both
# tables keep a median 4.8 us more than the H800's (1.4-14): CDNA4 and CDNA2 take the same 6. A
# layer pays it once a GEMM it launches (overhead.gemm_launches_per_layer).
AMD_GEMM_FLOOR_MS = 0.006
# Hopper's fixed costs, measured on an H200 in CUDA graphs (benchmarks/data/ops-h200-sxm-141gb.json
# and step-floors-h200-sxm-141gb.json: `python benchmarks/ops_vs_model.py`, `python
# benchmarks/step_time.py`). A GEMM kernel takes 3.9 us beyond its weight stream: single-token
# GEMVs of 12 shapes, 16-896 MiB, fit 3.9 us + bytes / 3.81 TB/s. Beside its GEMMs a decoder
# layer costs 25 us: one GPU's share of Llama-3.1-70B at TP 8, one sequence at 2,000 tokens,
# compiled, with a flash-decoding attention kernel (benchmarks/triton_decode.py), takes
# 7.44-7.65 ms a step (three runs) against 5.59-5.70 for its linear layers alone: 25 us a layer
# in the two later runs, of which attention about 11 by difference and the fused norms, rotary
# embedding, KV write, activation and residual adds the rest (Llama-3.1-8B: 25.6). With those
# two, the weights stream at 0.85 of peak: the share that centres the 15 public H100 rows (vLLM
# on Qwen3-8B, benchmarks/data/step-time.jsonl); the H200's measured linear layers agree
# (Llama-3.1-8B 4.01-4.15 ms measured, 4.18 modelled; the 70B TP 8 share 5.59-5.87 and 5.51).
# A TP 8 share's layers, with small GEMMs, thus cost more than one GPU's large ones, which the
# single share before this (0.75 with 17 us a layer and no GEMM floor) could not show. Blackwell
# runs the same kinds of kernel and takes these figures (its decode GEMMs' in NVIDIA's tables
# agree, below); Ampere keeps the constants fitted on its own rows.
HOPPER_BANDWIDTH_EFFICIENCY = 0.85
HOPPER_GEMM_FLOOR_MS = 0.0039
HOPPER_KERNEL_MS_PER_LAYER = 0.025
HOPPER_CONSTANT_FAMILIES = frozenset({"hopper", "blackwell"})
# Hopper's all-reduce inside a decode step: vLLM's and SGLang's custom all-reduce (one- and
# two-shot kernels over NVLink peer memory), replayed in a CUDA graph, timed by NVIDIA's
# aiconfigurator collector (ai-dynamo/aiconfigurator @095f58a5, aic-core/.../systems/data/
# h200_sxm/comm/vllm/0.18.0 and h100_sxm/comm/vllm/0.24.0 custom_allreduce_perf.parquet, bf16,
# `vllm_graph`): 4.2-4.7 us up to 8 KB whatever the group (2, 4 or 8 GPUs; SGLang 0.5.14's
# 2.4-4.8), not the (TP - 1) x 8 us a peer fitted on the A100 rows (56 us at TP 8). Above that
# the time follows the ring's bytes at about 0.7 of one direction of NVLink (450 GB/s on H100 /
# H200): at TP 8, 2 / 8 / 32 MB take 18.4 / 53.7 / 166 us measured, 15.8 / 49.1 / 182 so
# priced. Blackwell has its own from NVIDIA's tables (BLACKWELL_ALLREDUCE, below), AMD from
# published MI300X times (CDNA3_ALLREDUCE, below).
HOPPER_ALLREDUCE_MS = 0.0047
HOPPER_ALLREDUCE_LINK_SHARE = 0.7
HOPPER_ALLREDUCE = AllReduceCost(
    fixed_ms=HOPPER_ALLREDUCE_MS, hop_ms=0.0, link_share=HOPPER_ALLREDUCE_LINK_SHARE
)
# Ampere's, from the same collector's table for vLLM 0.14.0 on an A100 SXM4 80GB (systems/data/
# a100_sxm/comm/vllm/0.14.0, `vllm_graph`; rows in benchmarks/data/nvidia-kernels.jsonl): 5.3 us
# up to 8 KB at TP 2-8, and 2-32 MB at TP 8 at 0.54 of NVLink 3's 300 GB/s a direction. It holds
# where the engine runs its custom all-reduce (CUSTOM_ALLREDUCE_ENGINES, from the releases
# measured) and the cards are NVLink-joined; older releases keep the per-peer hop their public
# rows were fitted with (vLLM ~0.4 serving Mixtral-8x22B on 4 and 8 A100s).
AMPERE_ALLREDUCE_MS = 0.0053
AMPERE_ALLREDUCE_LINK_SHARE = 0.54
AMPERE_ALLREDUCE = AllReduceCost(
    fixed_ms=AMPERE_ALLREDUCE_MS, hop_ms=0.0, link_share=AMPERE_ALLREDUCE_LINK_SHARE
)
# AMD's all-reduce inside one platform: mk1-project/quickreduce's README (@910e892) times RCCL
# 2.20.5 and QuickReduce's uncompressed two-shot kernel over peer memory (the kind the engines'
# custom all-reduce is) on 2, 4 and 8 MI300X of one board under ROCm 6.2, fp16 messages of 32 KB
# to 64 MB (rows in benchmarks/data/amd-allreduce.jsonl, `python benchmarks/amd_allreduce.py`).
# The faster of the two at each size (an engine reduces small messages in its custom kernel,
# large ones in RCCL) fits 6.4 us + 1.2 us a peer + the ring's bytes at 0.71 of the xGMI links
# among the group's GPUs (comm.Fabric: one link a peer), median error 3% over the 36 points:
# 8.5 / 10.6 / 14.8 us at 32 KB on 2 / 4 / 8 GPUs, where the (TP - 1) x 8 us a peer fitted on
# NVIDIA's V0 rows priced 8 / 24 / 56. ROCm/mori's Triton peer-read all-reduce example (about
# 76 us for 896 KB over 8 MI300X: examples/shmem/ir/README.md @0179be5b), which the per-peer
# figure was once held to, is a demonstration three times slower than RCCL there (26 us at 1
# MB). CDNA2 and CDNA4 take it too (their boards are not in the table: extrapolated).
CDNA3_ALLREDUCE = AllReduceCost(fixed_ms=0.0064, hop_ms=0.0012, link_share=0.71)
# NVIDIA's own kernel tables for vLLM 0.24.0 on an H200 SXM and a B200 SXM (aiconfigurator's
# collector: ai-dynamo/aiconfigurator @095f58a5, systems/data/{h200_sxm,b200_sxm}/{gemm,moe,comm,
# attention}/vllm/0.24.0; the rows used are in benchmarks/data/nvidia-kernels.jsonl, `python
# benchmarks/nvidia_kernels.py`). On the H200 they agree with Hopper's constants above, measured
# on our own H200: bf16 GEMMs at 1 and 8 tokens fit 3.8 us + bytes at 0.842 of peak (466 rows;
# ours 3.9 us and 0.85), TP 8's all-reduce 4.6 us and 0.74 of NVLink (ours 4.7 and 0.7). The B200's
# decode GEMMs fit 3.7 us + bytes at 0.849 of its 7.7 TB/s: Blackwell keeps Hopper's stream and
# floor. Its own figures, where they differ:
# - the multiply: large bf16 GEMMs (16,384 tokens, N and K >= 2,048, 195 shapes) reach 0.688 of
#   the B200's rate against 0.737 of the H200's in the same tables (0.93); per-tensor fp8 0.436
#   (0.63 of bf16's share), block-scaled fp8 0.478 (0.69), NVFP4 0.362 of the fp4 rate (0.53);
# - the custom all-reduce in a CUDA graph: 7.0 us up to 8 KB at TP 2-8, and 2-32 MB at TP 8 at
#   0.51 of NVLink 5's 900 GB/s a direction;
# - decode attention streams bf16 and fp8 KV alike (FlashInfer's TRT-LLM decode kernel: 0.990
#   and 0.986 of peak beyond its fixed cost), where Hopper's FlashAttention-3 streams an fp8
#   cache at 0.696 of peak against 0.970 for bf16 (0.72; 369 and 410 rows of 8-head GQA groups,
#   128-dim heads).
BLACKWELL_COMPUTE_SCALE = 0.688 / 0.737
BLACKWELL_LOW_PRECISION_SCALE = 0.436 / 0.688
BLACKWELL_BLOCK_FP8_SCALE = 0.478 / 0.688
BLACKWELL_FP4_SCALE = 0.362 / 0.688
BLACKWELL_ALLREDUCE = AllReduceCost(fixed_ms=0.0070, hop_ms=0.0, link_share=0.51)
HOPPER_FP8_KV_ATTENTION_SCALE = 0.696 / 0.970
# SGLang 0.5.14's decode attention on the H200 in the same collector's tables (its default
# FlashAttention-3 backend, systems/data/h200_sxm/attention/sglang/0.5.14, the same 8-head GQA
# groups of 128-dim heads; rows in benchmarks/data/nvidia-kernels.jsonl): bf16 KV at 0.967 of
# peak beyond its fixed cost, fp8 KV at 0.549: 0.57 of bf16's, where vLLM's build of the kernel
# keeps 0.72.
HOPPER_SGLANG_FP8_KV_ATTENTION_SCALE = 0.549 / 0.967
# Two PCIe cards' own dense GEMMs in the same collector's tables for vLLM 0.24.0 (systems/data/
# {l40s,rtx_pro_6000_server}/gemm/vllm/0.24.0; rows in benchmarks/data/nvidia-kernels.jsonl):
# large GEMMs (16,384 tokens, N and K >= 2,048, 193-195 shapes a kind) reach, of the card's
# rate, on an L40S (Ada) bf16 0.567 (0.77 of the H200's 0.737 in the same tables), per-tensor
# fp8 0.456 (0.80 of bf16's share), block-scaled fp8 (Triton's kernel there) 0.334 (0.59); on an
# RTX PRO 6000 Blackwell Server (SM120, tensor cores of another kind than the B200's) bf16 0.801
# (1.09 of the H200's), fp8 0.682 (0.85), NVFP4 0.562 (0.70), where the B200 gives 0.93, 0.63 and
# 0.53 (above). gpt-oss's MXFP4 experts run Marlin's W4A16 kernel on both (vLLM 0.24.0; the
# B200 runs TRT-LLM's), which the same tables time at 1-512 tokens (balanced routing, TP only,
# 204 rows each) at 35.4 and 31.7 us + their routed experts streamed at 0.699 and 0.689 of peak
# (the B200's kernel 0.473). Every Ada card takes the L40S's, every SM120 card (RTX PRO 6000,
# RTX 5090, GB10) the RTX PRO 6000's; their other decode constants stay their family's.
ADA_COMPUTE_SCALE = 0.567 / 0.737
ADA_LOW_PRECISION_SCALE = 0.456 / 0.567
ADA_BLOCK_FP8_SCALE = 0.334 / 0.567
SM120_COMPUTE_SCALE = 0.801 / 0.737
SM120_LOW_PRECISION_SCALE = 0.682 / 0.801
SM120_FP4_SCALE = 0.562 / 0.801
ADA_MOE_STREAM_SHARE = {"mxfp4": 0.699}
SM120_MOE_STREAM_SHARE = {"mxfp4": 0.689}
# Blackwell Ultra (B300, GB300: compute capability 10.3) in the same collector's tables for vLLM
# 0.24.0 (systems/data/b300_sxm/gemm/vllm/0.24.0, read as the B200's): bf16 0.703 of its rate
# (0.95 of the H200's), fp8 0.464 (0.66 of bf16's share), block-scaled fp8 0.503 (0.72) and
# NVFP4 0.265 (0.38 of it, where the B200 reaches 0.53): its NVFP4 GEMMs take 0.93 of the B200's
# time, not the two thirds its 1.5x FP4 rate would give.
BLACKWELL_ULTRA_COMPUTE_SCALE = 0.703 / 0.737
BLACKWELL_ULTRA_LOW_PRECISION_SCALE = 0.464 / 0.703
BLACKWELL_ULTRA_BLOCK_FP8_SCALE = 0.503 / 0.703
BLACKWELL_ULTRA_FP4_SCALE = 0.265 / 0.703
# NVIDIA cards joined by PCIe alone (L40S, L4, RTX, A10G): the engines reduce through NCCL past
# two GPUs (vLLM's CustomAllreduce is "not supported on more than two PCIe-only GPUs":
# custom_all_reduce.py, 0.9.2; at two its table is within 2 us of NCCL's). NVIDIA's collector
# times nccl-tests' all-reduce on an L40S server (NCCL 2.27.3) and on an RTX PRO 6000 Blackwell
# server (2.29.2) (ai-dynamo/aiconfigurator @095f58a5, systems/data/{l40s,rtx_pro_6000_server}/
# comm/nccl/*/nccl_perf.parquet, fp16, 2 / 4 / 8 GPUs, messages up to 32 MB: the decode and
# prefill range; rows in benchmarks/data/nvidia-kernels.jsonl, `python
# benchmarks/nvidia_kernels.py`). Fitted as a fixed time + a latency a peer + the ring's bytes
# (2 (n - 1) / n of the message) at a share of one direction of the card's PCIe link, both give
# the same: 3.13 and 3.05 us, 3.44 and 3.52 us a peer, 0.424 and 0.420 of the link (median error
# 7% on the RTX PRO 6000; 34% on the L40S, whose server's ring at 4 and 8 GPUs falls to a fifth
# and a twentieth of its rate at 2 on large messages: a topology the fit does not follow). The
# per-peer hop at the full link rate this replaces priced 8 GPUs' 2 KB at 56 us (26 measured)
# and 2 MB at 113 us (221 measured on the RTX PRO 6000, 164 so priced).
PCIE_ALLREDUCE = AllReduceCost(fixed_ms=0.0030, hop_ms=0.0035, link_share=0.42)
# Prefill attention in the same tables (vLLM 0.24.0's `context_attention`: FlashAttention-3 on
# the H200, FlashInfer's TRT-LLM prefill on the B200; a causal prompt of 1-16K tokens, 8-64 heads,
# no cache, 945 rows each) reaches a share of the bf16 rate that grows with the keys a query sees
# and with the head size: ceiling(head size) x keys / (keys + half), keys the mean over the
# prompt's queries, fitted with one half for every size (median |log error| 0.075 and 0.093).
# H200: half 446 keys, ceilings 0.494 / 0.637 / 0.774 at 64 / 128 / 256-wide heads; B200: half
# 513, 0.341 / 0.561 / 0.650. A 2,048-token prompt of 128-wide heads thus runs at 0.44 of the
# H200's rate, a 16K one at 0.60, where the FlashAttention-2 paper's 0.5 held for every prompt.
HOPPER_PREFILL_ATTENTION_CEILINGS = {64: 0.494, 128: 0.637, 256: 0.774}
HOPPER_PREFILL_ATTENTION_HALF_KEYS = 446.0
BLACKWELL_PREFILL_ATTENTION_CEILINGS = {64: 0.341, 128: 0.561, 256: 0.650}
BLACKWELL_PREFILL_ATTENTION_HALF_KEYS = 513.0
# An MLA attention layer's decode module costs more fixed time than its priced parts, in the
# same tables (DeepSeek-V3's whole `DeepseekV2MLAAttention` forward in a CUDA graph: projections,
# the latent's norms and rope, the absorbed BMMs, the attention kernel; 16 heads a GPU as at
# TP 8, 1-64 sequences at up to 8,192 tokens, 91 points a kind). Beyond its weights' stream,
# five GEMM floors, the absorbed attention and the decode kernel's fixed 13.9 us, the median
# excess a layer, by the projections' kind, with a 16-bit / an fp8 latent cache: H200
# (FlashAttention's and FlashMLA's MLA backends) bf16 54.7 / 77.5 us, block-scaled fp8 61.5 /
# 80.4; B200 (FlashInfer's) 1.9 / 2.4 and 14.0 / 14.6 (`python benchmarks/nvidia_kernels.py`).
# The H100's table (h100_sxm/mla/vllm/0.24.0, read the same way) agrees within 4 us: 57.7 / 80.8
# and 64.2 / 84.1.
# The excess runs from about 0.8x the median at one sequence to 1.2x at 64. Other quantized
# projections (per-tensor fp8, NVFP4) take the block-scaled figure: their activations are
# quantized before each GEMM too. The other engines run the same form's kernels and take it.
HOPPER_MLA_LAYER_MS = {"bf16": (0.0547, 0.0775), "fp8-block": (0.0615, 0.0804)}
BLACKWELL_MLA_LAYER_MS = {"bf16": (0.0019, 0.0024), "fp8-block": (0.0140, 0.0146)}
# The fused MoE layers in the same tables (both grouped GEMMs, at 8,192 / 16,384 / 32,768
# tokens, routing balanced, TP only) reach a share of the rate that grows with the width each GPU
# holds of an expert (intermediate size / TP: the N of its gate-up GEMM): share = ceiling x width /
# (width + half), fitted per kind (median |log error| 2-9%): narrow experts fill few tiles. The
# engines' default kernels: Hopper vLLM's and SGLang's Triton fused MoE (bf16 0.637 and 274 over
# 192 rows; block-scaled fp8 0.326 and 346 over 148, which per-tensor fp8 takes; gpt-oss's MXFP4
# with 16-bit activations 0.615 and 256 over 24), Blackwell FlashInfer's TRT-LLM experts (bf16
# 0.453 and 147 over 126; per-tensor fp8 0.463 and 362 over 132; block-scaled fp8 0.191 and 144
# over 106; NVFP4 0.400 and 616 over 154; MXFP4 with 16-bit activations 0.276 and 323 over 24).
# DeepSeek-V3's experts at TP 8 (256 wide) thus multiply at 0.14 of the H200's fp8 rate, where
# its dense GEMMs reach about 0.6; under expert parallelism (whole experts, 2,048 wide) at 0.28.
# Ampere and the other NVIDIA families run the same Triton kernels: Hopper's figures,
# extrapolated.
# At 1-4 tokens the same tables time a fused MoE layer at its routed experts' stream (at the
# family's share of peak) + a fixed 46.9 us on the H200 (Triton) and 23.7 us on the B200
# (TRT-LLM), with no cost for idle local experts (-0.07 and -0.03 us each: 510 and 780 rows of the
# 16-bit, fp8 and NVFP4 kinds, 8-512 experts): less the three GEMM floors each layer takes, the
# routing kernels cost 35 and 12 us, and no idle-expert exit is charged there
# (MOE_MS_PER_IDLE_EXPERT stays Ampere's estimate). gpt-oss's MXFP4 experts (16-bit
# activations) stream slower than any other kind: at 1-512 tokens 45.2 us + their routed
# experts at 0.525 of peak on the H200, 37.1 us + 0.473 on the B200 (204 rows each): the
# kernels unpack 4-bit weights and their scales before the multiply. (With MXFP8 activations,
# the opt-in VLLM_USE_FLASHINFER_MOE_MXFP4_MXFP8=1 of vLLM's gpt-oss recipe, the B200's kernel
# streams them at 0.832 with 75.5 us fixed; the planner prices vLLM's default.)
# These time vLLM's kernels, and only vLLM takes them (MOE_TABLE_ENGINES). SGLang's own, in the
# same collector's tables for SGLang 0.5.14 (systems/data/{h200_sxm,b200_sxm}/moe/sglang/0.5.14,
# balanced routing, TP only, 1-4 tokens; rows in benchmarks/data/nvidia-kernels.jsonl), read the
# same way: its Triton fused MoE on the H200 (bf16 and block fp8, 468 rows) 38.3 us + the routed
# experts' stream, FlashInfer's TRT-LLM MoE on the B200 (block fp8 and NVFP4, 378 rows) 25.3 us,
# and no idle-expert cost in either (-0.03 and -0.04 us an expert), as in vLLM's. gpt-oss's
# MXFP4 experts keep the earlier estimates under SGLang on Hopper (MOE_KERNEL_MS_PER_LAYER,
# MOE_MS_PER_IDLE_EXPERT, the weights' share): its public PD rows on H200 (gpt-oss-120b,
# benchmarks/data/e2e.jsonl) decode faster at 64-128 sequences than an MXFP4 stream at 0.525
# allows and slower at 8-16 than no idle-expert cost does, which no kernel table explains.
MOE_TABLE_ENGINES = frozenset({"vllm"})
# Under DeepEP the experts run DeepGEMM's grouped GEMMs on the tokens dispatched to them, not the
# fused MoE kernels above (SGLang's DeepEPMoE: the masked kernel behind the low-latency exchange;
# vLLM's DeepEP experts alike for block-scaled fp8). NVIDIA's collector times SGLang 0.5.10's
# (ai-dynamo/aiconfigurator @095f58a5, systems/data/{h100_sxm,h200_sxm,b200_sxm,b300_sxm,gb200}/
# moe/sglang/0.5.10/wideep_generation_moe_perf.parquet: DeepSeek-V3's block-fp8 experts over EP
# groups of 2-256 ranks, balanced routing, 1-128 tokens a rank; rows in benchmarks/data/
# nvidia-kernels.jsonl, `python benchmarks/nvidia_kernels.py`): a fixed 22-25 us + 0.5-0.8 us a
# local expert + the larger of the touched experts' stream (0.78-0.87 of peak) and their
# multiply, which reaches 0.67 / 0.70 of the fp8 rate on the H100 / H200 and 0.44 / 0.45 / 0.44
# on the B200 / B300 / GB200 (median error 1-2% over 56 rows each). The fused MoE share above
# gives whole experts (2,048 wide) 0.34 and 0.19: at 128 tokens a rank on 64-256 ranks the
# layer was priced at twice its time. Hopper takes 0.68, Blackwell 0.44. The fixed costs stay
# the fused MoE layer's (routing included, which these tables do not time), with the masked
# kernel's cost an expert a rank holds beside them (below). The same share serves prefill
# steps (the contiguous kernel behind the normal exchange: about 0.5 and 0.36 at 1-16K tokens a
# rank in the same tables' context rows, which add a larger fixed cost).
HOPPER_DEEPEP_MOE_FP8_SHARE = 0.68
BLACKWELL_DEEPEP_MOE_FP8_SHARE = 0.44
# The masked kernel walks every expert a rank holds, touched or not: the same fits give 0.53 /
# 0.72 us an expert on the H100 / H200 and 0.77 / 0.76 / 0.55 on the B200 / B300 / GB200, which
# the fused layer's fixed cost above does not hold (32 experts a rank at EP 8: 20-25 us a layer).
# Hopper takes its two cards' mean, Blackwell its cards' median. With it a DeepSeek-V3 layer on
# 2-64 Blackwell ranks is priced at 0.94-1.04 of the tables' experts at the median (0.68-0.98
# without), on 4-64 Hopper ranks 1.02-1.28 (0.98-1.24), the routing kernels included.
HOPPER_DEEPGEMM_MS_PER_LOCAL_EXPERT = 0.00062
BLACKWELL_DEEPGEMM_MS_PER_LOCAL_EXPERT = 0.00076
# A data-parallel layout's MoE layers meet every group's tokens: vLLM's default exchange
# all-gathers them and reduce-scatters the outputs through NCCL (AgRsAll2AllManager's
# all_gatherv / reduce_scatterv, device_communicators/all2all.py, 0.11-0.34; SGLang instead
# all-reduces twice: StepTime.gather_ms). NVIDIA's collector times nccl-tests' all-gather and
# reduce-scatter (systems/data/{h100_sxm,h200_sxm,b200_sxm}/comm/nccl/2.29.2/nccl_perf.parquet,
# fp16, 2 / 4 / 8 GPUs, messages up to 256 KB; rows in benchmarks/data/nvidia-kernels.jsonl):
# 5.0 us + 0.99 us a peer on the H100 / H200 (12 us over 8 GPUs), 8.3 us + 1.37 us on the B200
# (18 us), median error 10% and 7%, where the engines' custom all-reduce takes 4.7 and 7.0 us.
# vLLM's two calls take these (bytes at the all-reduce's share, as before), timed outside CUDA
# graphs, as nccl-tests runs them.
HOPPER_NCCL_LATENCY = AllReduceCost(fixed_ms=0.0050, hop_ms=0.00099)
BLACKWELL_NCCL_LATENCY = AllReduceCost(fixed_ms=0.0083, hop_ms=0.00137)
# SGLang's decode steps under data-parallel attention: through 0.5.22 its CUDA graphs capture
# MAX_LEN (all-gather and reduce-scatter; DpPaddingMode.get_default_mode_in_cuda_graph, read in
# the 0.5.10-0.5.22 wheels); 0.5.23 takes SUM_LEN (two all-reduces) where its JIT custom
# all-reduce (CustomAllReduceV2, CUDA only) holds the buffer (_decode_sum_len_fits_custom_all_
# reduce); ROCm keeps MAX_LEN.
SGLANG_DECODE_SUM_LEN_SINCE = (0, 5, 23)
# ... while the custom all-reduce holds the gathered buffer (tokens x hidden x 2 bytes): its
# workspace is the tuned per-card size capped at SGLANG_CUSTOM_ALL_REDUCE_V2_MAX_SIZE_KB, 16 MiB
# by default (sglang/srt/environ.py; device_communicators/custom_all_reduce_v2.py takes the
# smaller, and the tuned tables of configs/custom_all_reduce_v2.py hold 16 MiB and more for
# every world size on SM90 and SM100; read in the 0.5.23 wheel). Past it, or with a MoE
# all-to-all backend named, decode pads to the longest group (MAX_LEN).
SGLANG_DECODE_SUM_LEN_MAX_BYTES = 16 * 1024 * 1024
HOPPER_MOE_FIXED_MS = 0.0469
BLACKWELL_MOE_FIXED_MS = 0.0237
HOPPER_SGLANG_MOE_FIXED_MS = 0.0383
BLACKWELL_SGLANG_MOE_FIXED_MS = 0.0253
# the routing kernels alone: the fixed cost less the floors of the MoE block's GEMMs
MOE_BLOCK_FLOORS_MS = GEMMS_PER_MOE_BLOCK * HOPPER_GEMM_FLOOR_MS
HOPPER_MOE_KERNEL_MS_PER_LAYER = HOPPER_MOE_FIXED_MS - MOE_BLOCK_FLOORS_MS
BLACKWELL_MOE_KERNEL_MS_PER_LAYER = BLACKWELL_MOE_FIXED_MS - MOE_BLOCK_FLOORS_MS
HOPPER_SGLANG_MOE_KERNEL_MS_PER_LAYER = HOPPER_SGLANG_MOE_FIXED_MS - MOE_BLOCK_FLOORS_MS
BLACKWELL_SGLANG_MOE_KERNEL_MS_PER_LAYER = BLACKWELL_SGLANG_MOE_FIXED_MS - MOE_BLOCK_FLOORS_MS
# SGLang runs gpt-oss's MXFP4 experts on Blackwell with MXFP8 activations: it picks FlashInfer's
# TRT-LLM MXFP4 MoE there (moe_runner_backend flashinfer_mxfp4 on SM100 for an MXFP4 gpt-oss:
# sglang/srt/server_args.py in 0.5.4, arg_groups/model_overrides/gpt_oss.py in 0.5.23), whose
# layers/quantization/mxfp4.py quantizes the activations to MXFP8 before the experts (0.5.23: "the
# Blackwell paths already run MXFP8 activations"; SM120 there too, through CUTLASS: the family
# takes it whole). SGLang 0.5.14's own table of that kernel on the B200 (read as above; rows in
# benchmarks/data/nvidia-kernels.jsonl, kind mxfp4-mxfp8): at 1-512 tokens 49.2 us + the routed
# experts streamed at 0.821 of peak (153 rows; at 1-4 tokens 19.6 us + 0.855, near SGLang's
# 25.3 us fixed cost, which it takes); at 8K-32K tokens 0.441 x width / (width + 287) of the fp8
# rate (18 rows of two shapes, median |log error| 0.12).
BLACKWELL_MXFP8_MOE_ENGINES = frozenset({"sglang"})
HOPPER_MOE_STREAM_SHARE = {"mxfp4": 0.525}
BLACKWELL_MOE_STREAM_SHARE = {"mxfp4": 0.473, "mxfp4-mxfp8": 0.821}
HOPPER_MOE_SHARES: dict[str, tuple[float, int | None]] = {
    "bf16": (0.637, 274),
    "fp8": (0.326, 346),
    "fp8-block": (0.326, 346),
    "mxfp4": (0.615, 256),
}
BLACKWELL_MOE_SHARES: dict[str, tuple[float, int | None]] = {
    "bf16": (0.453, 147),
    "fp8": (0.463, 362),
    "fp8-block": (0.191, 144),
    "fp4": (0.400, 616),
    "mxfp4": (0.276, 323),
    "mxfp4-mxfp8": (0.441, 287),
}


def nvidia_dense_shares(
    compute_scale: float, low_precision: float, block_fp8: float, fp4: float
) -> dict[str, float]:
    """An NVIDIA family's modelled dense share of each kind: H100's BF16 share x its compute
    factor x its low-precision factor for the kind (MXFP4 weights multiply bf16 activations, or
    MXFP8 ones at the fp8 rate)."""
    dense = HOPPER_BF16_GEMM_SHARE * compute_scale
    return {
        "bf16": dense,
        "mxfp4": dense,
        "mxfp4-mxfp8": dense * low_precision,
        "fp8": dense * low_precision,
        "fp8-block": dense * block_fp8,
        "fp4": dense * fp4,
    }


# The dense shares each NVIDIA family's fused-MoE shares are read against.
HOPPER_DENSE_GEMM_SHARES = nvidia_dense_shares(
    1.0, NVIDIA_LOW_PRECISION_SCALE, NVIDIA_LOW_PRECISION_SCALE, 1.0
)
BLACKWELL_DENSE_GEMM_SHARES = nvidia_dense_shares(
    BLACKWELL_COMPUTE_SCALE,
    BLACKWELL_LOW_PRECISION_SCALE,
    BLACKWELL_BLOCK_FP8_SCALE,
    BLACKWELL_FP4_SCALE,
)
HOPPER_MOE_GEMM_SCALE, HOPPER_MOE_HALF_WIDTH = moe_factors(
    HOPPER_MOE_SHARES, HOPPER_DENSE_GEMM_SHARES
)
# SGLang 0.5.14's own Triton fused MoE on the H200 at 8K-32K tokens (the same collector's tables,
# systems/data/h200_sxm/moe/sglang/0.5.14, balanced routing, TP only; rows in benchmarks/data/
# nvidia-kernels.jsonl, read as vLLM's): bf16 0.279 x width / (width + 74) of the rate (164
# rows), block-scaled fp8 0.397 x width / (width + 323) (148 rows), against vLLM's 0.637 / 274
# and 0.326 / 346: at DeepSeek-V3's 256 columns a GPU (TP 8) its fp8 experts multiply 23% faster
# than vLLM's, a bf16 model's 30% slower. On the B200 SGLang's TRT-LLM MoE (its tables, read the
# same way: 132 and 120 rows) fits block-scaled fp8 0.215 / 262 and NVFP4 0.490 / 691 against
# vLLM's 0.191 / 144 and 0.400 / 616: 0.87 and 1.13 of vLLM's at 256 columns. SGLang takes its
# own where they are timed (16-bit experts on the B200 are not in its tables: vLLM's).
HOPPER_SGLANG_MOE_SHARES: dict[str, tuple[float, int | None]] = {
    "bf16": (0.279, 74),
    "fp8-block": (0.397, 323),
}
HOPPER_SGLANG_MOE_GEMM_SCALE, HOPPER_SGLANG_MOE_HALF_WIDTH = moe_factors(
    HOPPER_SGLANG_MOE_SHARES, HOPPER_DENSE_GEMM_SHARES
)
BLACKWELL_SGLANG_MOE_SHARES: dict[str, tuple[float, int | None]] = {
    "fp8-block": (0.215, 262),
    "fp4": (0.490, 691),
}
BLACKWELL_SGLANG_MOE_GEMM_SCALE, BLACKWELL_SGLANG_MOE_HALF_WIDTH = moe_factors(
    BLACKWELL_SGLANG_MOE_SHARES,
    BLACKWELL_DENSE_GEMM_SHARES,
)
BLACKWELL_MOE_GEMM_SCALE, BLACKWELL_MOE_HALF_WIDTH = moe_factors(
    BLACKWELL_MOE_SHARES,
    BLACKWELL_DENSE_GEMM_SHARES,
)
# Engines that run that custom all-reduce, from the first release the planner prices it for.
# The kernel is older than the tables: vLLM's V1 engine (0.8.0 on, the default) reduces through
# CustomAllreduce wherever should_custom_ar holds (vllm/distributed/device_communicators/
# cuda_communicator.py, read in the 0.8.0 and 0.9.2 wheels: 2, 4, 6 or 8 NVLink-joined GPUs,
# messages under 8 MB, captured in its CUDA graphs), and SGLang from 0.4.0 (model_runner.py
# turns on vLLM's CustomAllreduce unless --disable-custom-all-reduce; 0.4.3 ships its own copy,
# "adapted from vLLM v0.6.4.post1"). vLLM's V0 engine ran it too, but its public rows (0.6
# serving Llama-3.1-405B on 8 x H100, ~0.4 Mixtral-8x22B on 4 and 8 A100s) fit (TP - 1) x 8 us
# an all-reduce: a stand-in for the per-step costs V0 adds with TP that the model does not
# price apart, so V0 keeps it (a 0.8 - 0.10 release falling back to V0 too), as do LMDeploy
# and other engines.
CUSTOM_ALLREDUCE_ENGINES: dict[str, tuple[int, int, int]] = {
    "vllm": VLLM_V1_SINCE,
    "sglang": (0, 4, 0),
}
# How much longer AMD's dense GEMMs take than their overlapped stream and multiply (above) between
# decode and prefill, by the tokens they multiply: AITER's tuned GEMMs (benchmarks/data/gemm-
# kernels.jsonl, N and K >= 2,048; `python benchmarks/gemm_kernels.py`), the median of (time -
# the 6 us floor) / modelled time at each token count. gfx950 BF16: 1.29 / 1.52 / 1.57 / 1.35 /
# 1.18 / 1.09 at 128 / 256 / 512 / 1,024 / 2,048 / 4,096 tokens (51-65 shapes each), 1.00 at
# 8,192; per-token FP8 1.20 / 1.37 / 1.31 / 1.28 / 1.15 / 1.08 (48-53), 1.01; block-scaled FP8
# 1.53 / 1.64 / 1.53 / 1.43 / 1.25 / 1.12 (46), 1.02, and on gfx942 1.60 / 1.61 / 1.52 / 1.37 /
# 1.14 / 1.03 (34), 0.99. Decode (16 tokens and fewer) keeps the fit above: 1 there, the factor
# running from it in log(tokens) to the first point. DeepGEMM's H800 times at 256-1,024 tokens
# are within 8% of the overlap itself: NVIDIA takes none. The tables time AITER's kernels, which
# SGLang's ROCm build runs its linear layers on where AITER tunes the shape (16-bit ones through
# aiter.tuned_gemm.tgemm, else torch's hipBLASLt; block-scaled and per-token FP8 through AITER's
# block-scale and pre-shuffled GEMMs: sglang/srt/layers/quantization/unquant.py and fp8_utils.py,
# 0.5.13) under SGLANG_USE_AITER=1, which the SGLang cookbook's AMD configurations set
# (sgl-project/sgl-cookbook data/optimal-configs). On gfx942 with 304 CUs AITER tunes
# block-scaled FP8 only (no 16-bit GEMM, per-token FP8 for two shapes with a side under 2,048),
# so only those take it on CDNA3; CDNA2 none. vLLM's ROCm build runs hipBLASLt unless
# VLLM_ROCM_USE_AITER is exported (off by default), whose times no public table gives: it takes
# none. The fused MoE kernels take none of it: their multiply takes its own share
# (*_MOE_GEMM_SCALE, above), which keeps the model within 0.72-1.0 of AITER's times from decode
# to prefill.
MID_M_ENGINES = frozenset({"sglang"})
MID_M_TOKENS = (16, 128, 256, 512, 1024, 2048, 4096, 8192)


def _at_mid_m(*factors: float) -> tuple[tuple[int, float], ...]:
    """(tokens, factor) points at MID_M_TOKENS, 1 at both ends."""
    return tuple(zip(MID_M_TOKENS, (1.0, *factors, 1.0), strict=True))


CDNA4_MID_M_SLOWDOWN = {
    "bf16": _at_mid_m(1.29, 1.52, 1.57, 1.35, 1.18, 1.09),
    "fp8": _at_mid_m(1.20, 1.37, 1.31, 1.28, 1.15, 1.08),
    "fp8-block": _at_mid_m(1.53, 1.64, 1.53, 1.43, 1.25, 1.12),
}
CDNA3_MID_M_SLOWDOWN = {"fp8-block": _at_mid_m(1.60, 1.61, 1.52, 1.37, 1.14, 1.03)}
# How each basis reads after "<family> constants <basis> ..." in the output.
FITTED_SOURCE = "on public decode step times (benchmarks/data/step-time.jsonl)"
NVIDIA_EXTRAPOLATED = "from Ampere; no measured step times"
HOPPER_EXTRAPOLATED = "from Hopper's kernels measured on an H200; no measured step times"
BLACKWELL_EXTRAPOLATED = (
    "from Hopper's kernels measured on an H200 and NVIDIA's B200 kernel tables; no measured "
    "step times"
)
BLACKWELL_ULTRA_EXTRAPOLATED = (
    "from Hopper's kernels measured on an H200 and NVIDIA's B200 and B300 kernel tables; no "
    "measured step times"
)
AMD_EXTRAPOLATED = (
    "from ROCm kernel tables (AITER), published MI300X all-reduce times (RCCL, QuickReduce) "
    "and one serving row; no measured step times"
)
ADA_EXTRAPOLATED = "from Ampere and NVIDIA's L40S kernel tables; no measured step times"
SM120_EXTRAPOLATED = (
    "from Hopper's kernels measured on an H200 and NVIDIA's B200 and RTX PRO 6000 kernel "
    "tables; no measured step times"
)
# What Ada and SM120 Blackwell take of their own (NVIDIA's L40S and RTX PRO 6000 tables, above).
ADA_OWN: dict[str, object] = {
    "compute_scale": ADA_COMPUTE_SCALE,
    "low_precision_scale": ADA_LOW_PRECISION_SCALE,
    "block_fp8_scale": ADA_BLOCK_FP8_SCALE,
    "moe_stream_share": ADA_MOE_STREAM_SHARE,
    "source": ADA_EXTRAPOLATED,
}
BLACKWELL_ULTRA_OWN: dict[str, object] = {
    "compute_scale": BLACKWELL_ULTRA_COMPUTE_SCALE,
    "low_precision_scale": BLACKWELL_ULTRA_LOW_PRECISION_SCALE,
    "block_fp8_scale": BLACKWELL_ULTRA_BLOCK_FP8_SCALE,
    "fp4_scale": BLACKWELL_ULTRA_FP4_SCALE,
    "source": BLACKWELL_ULTRA_EXTRAPOLATED,
}
SM120_OWN: dict[str, object] = {
    "compute_scale": SM120_COMPUTE_SCALE,
    "low_precision_scale": SM120_LOW_PRECISION_SCALE,
    "fp4_scale": SM120_FP4_SCALE,
    "moe_stream_share": BLACKWELL_MOE_STREAM_SHARE | SM120_MOE_STREAM_SHARE,
    "source": SM120_EXTRAPOLATED,
}

# What Blackwell takes of its own (NVIDIA's B200 tables, above) over Hopper's constants.
BLACKWELL_OWN: dict[str, object] = {
    "compute_scale": BLACKWELL_COMPUTE_SCALE,
    "low_precision_scale": BLACKWELL_LOW_PRECISION_SCALE,
    "block_fp8_scale": BLACKWELL_BLOCK_FP8_SCALE,
    "fp4_scale": BLACKWELL_FP4_SCALE,
    "allreduce": BLACKWELL_ALLREDUCE,
    "fp8_kv_attention_scale": 1.0,
    "moe_gemm_scale": BLACKWELL_MOE_GEMM_SCALE,
    "sglang_moe_gemm_scale": BLACKWELL_SGLANG_MOE_GEMM_SCALE,
    "sglang_moe_half_width": BLACKWELL_SGLANG_MOE_HALF_WIDTH,
    "moe_half_width": BLACKWELL_MOE_HALF_WIDTH,
    "moe_kernel_ms_per_layer": BLACKWELL_MOE_KERNEL_MS_PER_LAYER,
    "moe_stream_share": BLACKWELL_MOE_STREAM_SHARE,
    "prefill_attention_ceilings": BLACKWELL_PREFILL_ATTENTION_CEILINGS,
    "prefill_attention_half_keys": BLACKWELL_PREFILL_ATTENTION_HALF_KEYS,
    "mla_layer_ms": BLACKWELL_MLA_LAYER_MS,
    "sglang_moe_kernel_ms_per_layer": BLACKWELL_SGLANG_MOE_KERNEL_MS_PER_LAYER,
    "deepgemm_ms_per_local_expert": BLACKWELL_DEEPGEMM_MS_PER_LOCAL_EXPERT,
    "deepep_moe_fp8_share": BLACKWELL_DEEPEP_MOE_FP8_SHARE,
    "nccl_latency": BLACKWELL_NCCL_LATENCY,
    "mxfp8_moe_engines": BLACKWELL_MXFP8_MOE_ENGINES,
    "source": BLACKWELL_EXTRAPOLATED,
}
# Blackwell Ultra's compute capability (B300, GB300: developer.nvidia.com/cuda-gpus).
BLACKWELL_ULTRA_CAPABILITY = "10.3"
# NVIDIA families by CUDA compute capability major.minor (developer.nvidia.com/cuda-gpus).
NVIDIA_FAMILIES = {
    "7.0": "volta",
    "7.5": "turing",
    "8.0": "ampere",
    "8.6": "ampere",
    "8.7": "ampere",
    "8.9": "ada",
    "9.0": "hopper",
    "10.0": "blackwell",
    "10.3": "blackwell",
    "12.0": "blackwell",
    "12.1": "blackwell",
}
FITTED_FAMILIES = frozenset({"ampere", "hopper"})
# AMD Instinct families by catalog id prefix (rocm.docs.amd.com gpu-specs: MI250X gfx90a
# CDNA2, MI300X / MI325X gfx942 CDNA3, MI350X / MI355X gfx950 CDNA4).
AMD_FAMILIES = (("mi25", "cdna2"), ("mi30", "cdna3"), ("mi32", "cdna3"), ("mi35", "cdna4"))


def family_of(gpu: GpuSpec) -> Family:
    """The family a card belongs to and its constants (a vendor default when unknown)."""
    if gpu.vendor == "nvidia":
        name = NVIDIA_FAMILIES.get(gpu.compute_capability or "", "nvidia")
        fitted = name in FITTED_FAMILIES
        hopper = name in HOPPER_CONSTANT_FAMILIES
        # the engines' custom all-reduce needs NVLink past two GPUs, so a PCIe-only card (RTX /
        # RTX PRO, L40S) reduces through NCCL (PCIE_ALLREDUCE)
        nvlinked = "NVLINK" in (gpu.interconnect or "").upper()
        family = Family(
            name=name,
            bandwidth_efficiency=(
                HOPPER_BANDWIDTH_EFFICIENCY if hopper else NVIDIA_BANDWIDTH_EFFICIENCY
            ),
            gemm_floor_ms=HOPPER_GEMM_FLOOR_MS if hopper else 0.0,
            allreduce=(
                PCIE_ALLREDUCE
                if not nvlinked
                else HOPPER_ALLREDUCE
                if hopper
                else AMPERE_ALLREDUCE
                if name == "ampere"
                else None
            ),
            kernel_ms_per_layer=HOPPER_KERNEL_MS_PER_LAYER if hopper else KERNEL_MS_PER_LAYER,
            attention_bandwidth_fraction=HOPPER_ATTENTION_BANDWIDTH_FRACTION if hopper else None,
            fp8_kv_attention_scale=HOPPER_FP8_KV_ATTENTION_SCALE if hopper else 1.0,
            sglang_fp8_kv_attention_scale=(
                HOPPER_SGLANG_FP8_KV_ATTENTION_SCALE if name == "hopper" else None
            ),
            low_precision_scale=NVIDIA_LOW_PRECISION_SCALE,
            moe_gemm_scale=HOPPER_MOE_GEMM_SCALE,
            moe_half_width=HOPPER_MOE_HALF_WIDTH,
            sglang_moe_gemm_scale=HOPPER_SGLANG_MOE_GEMM_SCALE if name == "hopper" else {},
            sglang_moe_half_width=HOPPER_SGLANG_MOE_HALF_WIDTH if name == "hopper" else {},
            moe_kernel_ms_per_layer=(
                HOPPER_MOE_KERNEL_MS_PER_LAYER if hopper else MOE_KERNEL_MS_PER_LAYER
            ),
            moe_ms_per_idle_expert=0.0 if hopper else MOE_MS_PER_IDLE_EXPERT,
            moe_stream_share=HOPPER_MOE_STREAM_SHARE if hopper else {},
            prefill_attention_ceilings=HOPPER_PREFILL_ATTENTION_CEILINGS if hopper else {},
            prefill_attention_half_keys=HOPPER_PREFILL_ATTENTION_HALF_KEYS if hopper else 0.0,
            mla_layer_ms=HOPPER_MLA_LAYER_MS if hopper else {},
            sglang_moe_kernel_ms_per_layer=(
                HOPPER_SGLANG_MOE_KERNEL_MS_PER_LAYER if hopper else None
            ),
            deepep_in_fabric=DEEPEP_NVLINK if nvlinked else None,
            nccl_latency=HOPPER_NCCL_LATENCY if hopper and nvlinked else None,
            deepep_moe_fp8_share=HOPPER_DEEPEP_MOE_FP8_SHARE if name == "hopper" else None,
            deepgemm_ms_per_local_expert=(
                HOPPER_DEEPGEMM_MS_PER_LOCAL_EXPERT if name == "hopper" else 0.0
            ),
            basis="fitted" if fitted else "extrapolated",
            source=(
                FITTED_SOURCE if fitted else HOPPER_EXTRAPOLATED if hopper else NVIDIA_EXTRAPOLATED
            ),
        )
        if name == "ada":
            return family.model_copy(update=ADA_OWN)
        # Blackwell: Hopper's, less what NVIDIA's B200 tables give it of its own (an SM120
        # card's GEMMs: the RTX PRO 6000's)
        if name != "blackwell":
            return family
        capability = gpu.compute_capability or ""
        chip = (
            SM120_OWN
            if capability.startswith("12.")
            else BLACKWELL_ULTRA_OWN
            if capability == BLACKWELL_ULTRA_CAPABILITY
            else {}
        )
        return family.model_copy(
            update=BLACKWELL_OWN
            | ({} if nvlinked else {"allreduce": PCIE_ALLREDUCE, "nccl_latency": None})
            | chip
        )
    if gpu.vendor == "amd":
        name = next((f for prefix, f in AMD_FAMILIES if gpu.id.startswith(prefix)), "amd")
        cdna4 = name == "cdna4"
        return Family(
            name=name,
            bandwidth_efficiency=AMD_BANDWIDTH_EFFICIENCY,
            compute_scale=CDNA4_COMPUTE_SCALE if cdna4 else AMD_COMPUTE_SCALE,
            low_precision_scale=CDNA4_LOW_PRECISION_SCALE if cdna4 else AMD_LOW_PRECISION_SCALE,
            block_fp8_scale=CDNA4_BLOCK_FP8_SCALE if cdna4 else CDNA3_BLOCK_FP8_SCALE,
            attention_bandwidth_scale=AMD_ATTENTION_BANDWIDTH_SCALE,
            gemm_floor_ms=AMD_GEMM_FLOOR_MS,
            allreduce=CDNA3_ALLREDUCE,
            mid_m_slowdown=(
                CDNA4_MID_M_SLOWDOWN if cdna4 else CDNA3_MID_M_SLOWDOWN if name == "cdna3" else {}
            ),
            moe_gemm_scale=(
                CDNA4_MOE_GEMM_SCALE if cdna4 else CDNA3_MOE_GEMM_SCALE if name == "cdna3" else {}
            ),
            moe_half_width=(
                CDNA4_MOE_HALF_WIDTH if cdna4 else CDNA3_MOE_HALF_WIDTH if name == "cdna3" else {}
            ),
            sglang_moe_kernel_ms_per_layer=CDNA4_SGLANG_MOE_KERNEL_MS_PER_LAYER if cdna4 else None,
            mori_kernel_ms=MORI_CDNA4_KERNEL_MS if cdna4 else MORI_KERNEL_MS,
            basis="extrapolated",
            source=AMD_EXTRAPOLATED,
        )
    return Family(
        name=gpu.vendor,
        bandwidth_efficiency=OTHER_BANDWIDTH_EFFICIENCY,
        basis="extrapolated",
        source="between the NVIDIA and AMD figures; no measured step times",
    )


def ranks_family(family: Family, gpu: GpuSpec, ranks: int) -> Family:
    """`family` for collectives over `ranks` GPUs: past a PCIe card's NVLink bridge its
    all-reduce is NCCL's over PCIe (PCIE_ALLREDUCE), whatever the bridge's own."""
    if not beyond_bridge(gpu, ranks):
        return family
    return family.model_copy(update={"allreduce": PCIE_ALLREDUCE})


def engine_moe_family(family: Family, engine: str) -> Family:
    """`family` with SGLang's own fused-MoE prefill shares under SGLang, where its tables time
    them (HOPPER_SGLANG_MOE_SHARES, BLACKWELL_SGLANG_MOE_SHARES), else as it is."""
    if engine != "sglang" or not family.sglang_moe_gemm_scale:
        return family
    return family.model_copy(
        update={
            "moe_gemm_scale": family.moe_gemm_scale | family.sglang_moe_gemm_scale,
            "moe_half_width": family.moe_half_width | family.sglang_moe_half_width,
        }
    )


def fp8_kv_scale(family: Family, engine: str) -> float:
    """Decode attention's bandwidth share with an fp8 KV cache over a 16-bit one under
    `engine` on `family`: SGLang's own where its tables time it, else the family's."""
    own = family.sglang_fp8_kv_attention_scale
    if engine == "sglang" and own is not None:
        return own
    return family.fp8_kv_attention_scale


def mla_layer_ms(family: Family, kind: str, kv_dtype_bytes: int) -> float:
    """The fixed time an MLA layer's decode module takes on `family` beyond its priced parts,
    ms, for projections of `kind` (quantized kinds: the block-scaled figure) and the latent
    cache's dtype (0 where the family has no figure)."""
    got = family.mla_layer_ms.get(kind if kind == "bf16" else "fp8-block")
    if got is None:
        return 0.0
    return got[1] if kv_dtype_bytes == 1 else got[0]


def moe_decode_costs(
    family: Family, engine: str, kind: str = "bf16"
) -> tuple[float, float, dict[str, float]]:
    """A MoE layer's routing kernels (ms), each idle local expert's exit (ms) and the experts'
    stream shares by kind, for `engine` on `family` with experts of `kind`: the family's where
    NVIDIA's tables time that engine's kernels (SGLang's, save gpt-oss's MXFP4 with 16-bit
    activations), the earlier estimates elsewhere."""
    if engine in MOE_TABLE_ENGINES:
        return (
            family.moe_kernel_ms_per_layer,
            family.moe_ms_per_idle_expert,
            family.moe_stream_share,
        )
    sglang = family.sglang_moe_kernel_ms_per_layer
    if engine == "sglang" and sglang is not None and kind != "mxfp4":
        return sglang, 0.0, {k: v for k, v in family.moe_stream_share.items() if k == kind}
    return MOE_KERNEL_MS_PER_LAYER, MOE_MS_PER_IDLE_EXPERT, {}


def slowdown_at(points: tuple[tuple[int, float], ...], tokens: int) -> float:
    """The factor on a dense GEMM's time at `tokens` from (tokens, factor) points: 1 before
    the first and after the last, linear in log(tokens) between them."""
    if not points or tokens <= points[0][0] or tokens >= points[-1][0]:
        return 1.0
    for (lo, f_lo), (hi, f_hi) in itertools.pairwise(points):
        if tokens <= hi:
            share = math.log(tokens / lo) / math.log(hi / lo)
            return f_lo + (f_hi - f_lo) * share
    return 1.0


def attention_bandwidth_scale(gpu: GpuSpec) -> float:
    """Decode attention's bandwidth share over the weights' on this GPU: the family's measured
    share of peak over the card's weight share, else the family's relative scale."""
    family = family_of(gpu)
    if family.attention_bandwidth_fraction is not None:
        return family.attention_bandwidth_fraction / bandwidth_efficiency(gpu)
    return family.attention_bandwidth_scale


def bandwidth_efficiency(gpu: GpuSpec) -> float:
    """The GPU's measured achievable bandwidth share, else its family's."""
    if gpu.achievable_bandwidth_fraction is not None:
        return gpu.achievable_bandwidth_fraction
    return family_of(gpu).bandwidth_efficiency
