"""Dense GEMMs (QKV, O, MLP, lm_head, experts): the weights a step reads and the tensor-core
work it does, at the rate of the weights' dtype on the card."""

from __future__ import annotations

from planner.core.specs import GpuSpec

# Achievable share of dense peak FLOPs in the linear layers (an assumption, kept since the
# step model's first fit: the public decode rows are bandwidth-bound and do not pin it).
FLOPS_EFFICIENCY = 0.5
# Weight dtype names that mean 4-bit floating point (NVFP4 / MXFP4 checkpoints).
FP4_DTYPES = ("fp4", "mxfp4", "nvfp4")


def gemm_flops_per_s(gpu: GpuSpec, weight_dtype: str | None) -> float:
    """Dense tensor-core rate the linear layers run at: fp8 (w8a8) and fp4 (w4a4: NVFP4 /
    MXFP4 on cards with fp4 tensor cores) weights run at their own rate where the card has
    one; weight-only formats (int4, fp4 on older cards) dequantize into 16-bit GEMMs."""
    dtype = (weight_dtype or "").lower()
    base = float(gpu.bf16_dense_flops or gpu.fp16_dense_flops or 0)
    if dtype.startswith("fp8") and gpu.fp8_dense_flops:
        return float(gpu.fp8_dense_flops)
    if any(dtype.startswith(k) for k in FP4_DTYPES):
        if gpu.fp4_dense_flops:
            return float(gpu.fp4_dense_flops)
        if gpu.fp8_dense_flops and dtype.startswith("mxfp4") and gpu.vendor == "amd":
            return float(gpu.fp8_dense_flops)  # CDNA3 dequantizes MXFP4 into fp8 GEMMs
    return base


def read_ms(read_bytes: float, bandwidth_bytes_per_s: float) -> float:
    """Streaming `read_bytes` from HBM at an achievable bandwidth, ms."""
    return read_bytes / bandwidth_bytes_per_s * 1e3


def compute_ms(active_params: int, tokens: int, flops_per_s: float) -> float:
    """The linear layers' multiply-adds for `tokens` tokens (2 FLOPs per parameter each) at
    an achievable rate, ms."""
    return 2 * active_params * tokens / flops_per_s * 1e3
