"""Dense GEMMs (QKV, O, MLP, lm_head, experts): the weights a step reads and the tensor-core
work it does, at the rate of the weights' dtype on the card."""

from __future__ import annotations

import math

from planner.core.specs import INT8_W8A8_LABEL, OPENAI_MXFP4, QUARK_MXFP4_FP8_INPUTS, GpuSpec
from planner.units import ceil_div, dtype_bytes

# Achievable share of dense peak FLOPs in the linear layers, measured on public prefill: vLLM
# 0.30 on one H100 serving Qwen3-8B in bf16 (benchmarks/data/step-time.jsonl, silybench rows
# at 1 client) takes 61.3 ms to the first token of a 2,048-token prompt and 253.9 ms of an
# 8,192-token one (p95); less the request path, that is ~0.55 of the 989 TFLOP/s peak over
# the linear layers and attention together (the decode rows are bandwidth-bound and do not
# pin it). Large isolated GEMMs run faster (~0.73 on H100, SemiAnalysis 2024-12); a whole
# prefill pass also runs norms, RoPE, activations and the sampler between them.
FLOPS_EFFICIENCY = 0.55
# Weight dtype names that mean 4-bit floating point weights with 4-bit activations (ModelOpt
# NVFP4: w4a4, the card's fp4 tensor-core rate where it has one). On AMD Instinct no engine
# multiplies NVIDIA's format natively: vLLM's NVFP4 MoE oracle falls back to its EMULATION
# backend (the weights dequantized, multiplied in 16 bits: fused_moe/oracle/nvfp4.py, read in
# 0.20 and 0.34), SGLang refuses it (planner.core.engines.sglang.check_nvfp4_experts): the
# 16-bit rate there, the emulation's dequantization not priced.
FP4_DTYPES = ("fp4", "nvfp4")
# MXFP4 as gpt-oss ships it (quant_method "mxfp4", OpenAI's format) quantizes the expert
# weights only, and every engine multiplies them with 16-bit activations: on NVIDIA (Hopper:
# Triton / Marlin w4a16; Blackwell: FlashInfer's MXFP4 MoE with BF16 activations unless
# VLLM_USE_FLASHINFER_MOE_MXFP4_MXFP8=1 is exported, which vllm-project/recipes OpenAI/GPT-OSS.md,
# 2026-05, sets as an opt-in "for better performance") and on AMD Instinct alike (vLLM 0.14's
# Mxfp4Config runs the OAI Triton kernels on ROCm, 0.34's backend oracle puts the BF16-activation
# AITER / Triton W4A16 kernels first for gpt-oss: layers/quantization/mxfp4.py and
# fused_moe/oracle/mxfp4.py; SGLang 0.5.6 the triton_kernels backend, 0.5.23 AITER's A16W4
# unless AITER_SITUV2_A8W4 / _A4W4 is exported). AMD's own MXFP4 exports (AMD Quark) quantize
# the activations as well: to MXFP4 in its "-MXFP4" exports (amd/DeepSeek-R1-MXFP4-Preview:
# w4a4, which gfx950 multiplies at its fp4 rate: vLLM's QuarkOCP_MX runs AITER's native a4w4
# kernels for w_mxfp4_a_mxfp4 where the card supports MX, quark_moe.py 0.14), to fp8 in
# amd/gpt-oss-120b-w-mxfp4-a-fp8 (the fp8 rate). A card without an fp4 rate (gfx942) takes
# the fp8 rate for w4a4 as well: the engines emulate MX there ("Simulated weight
# dequantization"), a cost not modelled.
MXFP4_DTYPES = ("mxfp4",)
# Checkpoint labels of w8a8 FP8 formats beside "fp8..." (planner.core.hf_config): compressed-
# tensors float8 (its FP8-dynamic exports quantize activations per token).
FP8_LABELS = ("compressed-tensors-float8",)
# Checkpoint labels of w8a8 INT8 (planner.core.hf_config): compressed-tensors' int8 weights with
# int8 input activations (its W8A8 exports; vLLM multiplies them with its CUTLASS int8 scaled
# GEMM from compute capability 7.5, ROCm's AITER / Triton ones: vllm/model_executor/layers/
# quantization/kernels/scaled_mm, 0.14.0). Int8 weights alone (W8A16) multiply in 16 bits.
INT8_W8A8_LABELS = (INT8_W8A8_LABEL,)


def int8_ops_per_s(gpu: GpuSpec) -> float:
    """The card's dense INT8 tensor rate: its own figure where it departs from the rule
    (Blackwell Ultra's cut one), else its FP8 rate where it has one (the same figures in NVIDIA's
    aiconfigurator systems tables for H100, H200, L4, L40S, B200, GB200 and RTX PRO 6000, and in
    the MI300X and MI355X datasheets), else twice its 16-bit rate on NVIDIA (A100 624 against
    312 in those tables; the A10 and T4 datasheets 250 against 125, 130 against 65) and the
    16-bit rate on AMD (the MI250X datasheet: 383 and 383)."""
    if gpu.int8_dense_ops:
        return float(gpu.int8_dense_ops)
    if gpu.fp8_dense_flops:
        return float(gpu.fp8_dense_flops)
    base = float(gpu.bf16_dense_flops or gpu.fp16_dense_flops or 0)
    return 2.0 * base if gpu.vendor == "nvidia" else base


# vLLM's fp8 linears on ROCm before 0.7.3 have no row-wise scaled GEMM: apply_fp8_linear
# (vllm/model_executor/layers/quantization/utils/w8a8_utils.py, 0.6.3-0.7.2) fuses the scales
# only when both are per-tensor (or on CUDA's CUTLASS kernels). A checkpoint whose weights scale
# per output channel or whose activations scale per token (FBGEMM's, FP8-dynamic) takes its
# "unfused DQ" fallback: torch._scaled_mm with unit scales writes an fp32 output, then
# `output * x_scale * weight_scale.t()` and `.to(bf16)` run as separate passes. 0.7.3 added
# USE_ROWWISE_TORCH_SCALED_MM (ROCm, gfx94x and later): one fused row-wise GEMM.
VLLM_ROCM_ROWWISE_FP8_SINCE = (0, 7, 3)
# HBM bytes that fallback moves per output element beyond a fused GEMM's 2-byte bf16 write:
# fp32 write (4) instead of bf16 (2) = +2, each of the two scale multiplies reads and writes
# fp32 (8 + 8), the cast reads fp32 and writes bf16 (6): 24.
UNFUSED_DEQUANT_BYTES_PER_OUTPUT = 24


# Its memory: `output * x_scale * weight_scale.t()` allocates each product anew, so while the
# second is written the fp32 GEMM output, the first product and the second are all live: three
# fp32 copies (12 bytes) per output element of the widest such linear (the bf16 cast that follows
# holds 6).
UNFUSED_DEQUANT_FP32_COPIES = 3


def unfused_rocm_dequant(
    engine: str, gpu: GpuSpec, version: tuple[int, int, int] | None, own: bool
) -> bool:
    """Whether vLLM runs a row-wise scaled fp8 checkpoint's linears through the unfused
    fallback above: its own ROCm build before 0.7.3, on a card with fp8 tensor cores, serving
    the checkpoint's own weights (a re-quantization is per-tensor)."""
    return bool(
        own
        and engine == "vllm"
        and gpu.vendor == "amd"
        and gpu.fp8_dense_flops
        and version is not None
        and version < VLLM_ROCM_ROWWISE_FP8_SINCE
    )


def unfused_dequant_peak_bytes_per_token(widest: tuple[int, int], tp: int) -> int:
    """The fallback's fp32 copies live at once per token on one GPU, at the widest such
    linear: a column-parallel one's 1/TP of its features, a row-parallel one's whole hidden."""
    column, row = widest
    return UNFUSED_DEQUANT_FP32_COPIES * dtype_bytes("fp32") * max(ceil_div(column, tp), row)


def unfused_dequant_bytes_per_token(rowwise_outputs: tuple[int, int], tp: int, pp: int = 1) -> int:
    """The unfused dequantization's extra HBM bytes per token on one GPU: column-parallel
    linears write their 1/TP of the features, row-parallel ones (O, down) the whole hidden
    before the all-reduce; a pipeline stage holds 1/PP of the layers."""
    column, row = rowwise_outputs
    per_gpu = -(-column // tp) + row
    return -(-UNFUSED_DEQUANT_BYTES_PER_OUTPUT * per_gpu // pp)


def weight_only_mxfp4(checkpoint_dtype: str, weight_dtype: str | None) -> bool:
    """Whether the weights are OpenAI's weight-only MXFP4: the checkpoint's own format (none
    other asked, or the same named) and OpenAI's label."""
    own = weight_dtype is None or weight_dtype.lower() == checkpoint_dtype.lower()
    return own and checkpoint_dtype == OPENAI_MXFP4


def emulated(gpu: GpuSpec, weight_dtype: str | None, weight_only: bool = False) -> bool:
    """Whether the engines emulate the weights' format on this card (gemm_flops_per_s prices
    the rate emulation multiplies at, not its dequantization): NVIDIA's NVFP4 on AMD Instinct,
    AMD's w4a4 MXFP4 on an AMD card without MX formats."""
    dtype = (weight_dtype or "").lower()
    if gpu.vendor != "amd":
        return False
    if dtype.startswith(FP4_DTYPES):
        return True
    return (
        dtype.startswith(MXFP4_DTYPES)
        and not weight_only
        and not gpu.fp4_dense_flops
        and dtype != QUARK_MXFP4_FP8_INPUTS
    )


def gemm_flops_per_s(gpu: GpuSpec, weight_dtype: str | None, weight_only: bool = False) -> float:
    """Dense tensor-core rate the linear layers run at: the rate of the activations' dtype.
    fp8 (w8a8), int8 w8a8 (int8_ops_per_s) and NVFP4 (w4a4, on cards with fp4 tensor cores)
    run at their own rate; MXFP4 and weight-only int4 at the rate of the activations they are
    multiplied with: 16-bit where
    the format is weight-only (OpenAI's MXFP4 checkpoints, `weight_only`) and on NVIDIA; AMD's
    MXFP4 exports on AMD Instinct at the fp4 rate (w4a4, where the card has one) or the fp8
    rate (fp8 inputs, or no fp4 rate); NVFP4 on AMD Instinct (emulated) at the 16-bit rate. A
    ModelOpt MIXED_PRECISION checkpoint (its label names no one format) at the 16-bit rate: its
    bulk, NVIDIA's W4A16_NVFP4 MLPs and experts, multiplies 16-bit activations, and its FP8
    attention is priced there too (an estimate that errs slow on prefill)."""
    dtype = (weight_dtype or "").lower()
    base = float(gpu.bf16_dense_flops or gpu.fp16_dense_flops or 0)
    if dtype in INT8_W8A8_LABELS or dtype == "int8":  # a checkpoint's, or the int8 variant
        return int8_ops_per_s(gpu)
    if (dtype.startswith("fp8") or dtype in FP8_LABELS) and gpu.fp8_dense_flops:
        return float(gpu.fp8_dense_flops)
    if dtype.startswith(MXFP4_DTYPES):
        if gpu.vendor != "amd" or weight_only or not gpu.fp8_dense_flops:
            return base
        if gpu.fp4_dense_flops and dtype != QUARK_MXFP4_FP8_INPUTS:
            return float(gpu.fp4_dense_flops)
        return float(gpu.fp8_dense_flops)
    if dtype.startswith(FP4_DTYPES) and gpu.fp4_dense_flops and not emulated(gpu, dtype):
        return float(gpu.fp4_dense_flops)
    return base


# A GEMM near the ridge, where streaming its operands and multiplying take about as long,
# overlaps the two only in part: its time is the Euclidean norm of the two terms, not their max.
# Measured on DeepGEMM's published table (deepseek-ai/DeepGEMM README, first release, 2025-02:
# FP8 GEMMs on an H800 SXM5), with the operands streamed at the table's best bandwidth (2,668
# GB/s: M = 64, N = 7,168, K = 16,384) and the multiply at its M = 4,096-8,192 rate, at M = 256,
# 512 and 1,024 tokens for N = 4,096 / K = 7,168 and N = 7,168 / K = 2,048: the norm is within
# -8% to +7% of the six measured times, the max 5-23% short (M = 256, N = 4,096: 16.1 us
# measured, 12.5 us of stream and 11.5 of multiply; the norm 17.0). Far from the ridge the norm
# is the larger term to within a few percent: decode GEMVs stay at their weight read, long
# prefills at their FLOPs.
GEMM_OVERLAP_NORM = 2


def overlapped_ms(memory_ms: float, compute_ms: float) -> float:
    """One GEMM's time from its weight stream and its multiply, ms: their GEMM_OVERLAP_NORM-norm
    (the larger alone far from the ridge, 1.41x it where the two are equal), taken relative to
    the larger so that no power overflows."""
    larger, smaller = max(memory_ms, compute_ms), min(memory_ms, compute_ms)
    if smaller <= 0 or math.isinf(larger):
        return larger
    share = smaller / larger
    return float(larger * (1.0 + share**GEMM_OVERLAP_NORM) ** (1.0 / GEMM_OVERLAP_NORM))


def read_ms(read_bytes: float, bandwidth_bytes_per_s: float) -> float:
    """Streaming `read_bytes` from HBM at an achievable bandwidth, ms."""
    return read_bytes / bandwidth_bytes_per_s * 1e3


def compute_ms(active_params: int, tokens: float, flops_per_s: float) -> float:
    """The linear layers' multiply-adds for `tokens` tokens (2 FLOPs per parameter each) at
    an achievable rate, ms."""
    return 2 * active_params * tokens / flops_per_s * 1e3
