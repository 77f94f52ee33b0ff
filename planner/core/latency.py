"""Decode step-time model from a roofline: one pass over the weights plus each sequence's KV.

    t_step(B, q) = max(memory_ms(B), compute_ms(B * q)) + overhead_ms

memory_ms reads the weights once and every sequence's KV once; compute_ms is 2 FLOPs per active
parameter per scored token. q is tokens scored per sequence (1 for plain decode, 1 + k when
verifying k drafts). Efficiencies are named knobs, not fitted constants.
"""

from __future__ import annotations

import numpy as np
from numpy.typing import NDArray
from pydantic import BaseModel, ConfigDict, Field

from planner.core.reference import REFERENCE_OVERHEAD_MS
from planner.core.step.attention import mla_rows

# ai-dynamo/aiconfigurator uses mem_bw_empirical_scaling_factor 0.8 for every system
# (aic-core/src/aiconfigurator_core/systems/*.yaml): achievable share of peak HBM bandwidth.
DEFAULT_BANDWIDTH_EFFICIENCY = 0.8
# Achievable share of dense peak FLOPs in decode GEMMs: an assumption (no source measures it
# for every card); exposed as an option so users can set their own.
DEFAULT_FLOPS_EFFICIENCY = 0.5
FLOPS_PER_PARAM_PER_TOKEN = 2  # one multiply and one add per weight per token


class Roofline(BaseModel):
    """What one GPU moves and computes per decode step."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    weights_bytes_per_gpu: int = Field(gt=0)
    kv_bytes_per_sequence: int = Field(ge=0, description="KV read per sequence per step")
    active_params_per_gpu: int = Field(gt=0)
    bandwidth_bytes_per_s: float = Field(gt=0)
    flops_per_s: float = Field(gt=0)
    bandwidth_efficiency: float = Field(default=DEFAULT_BANDWIDTH_EFFICIENCY, gt=0, le=1)
    flops_efficiency: float = Field(default=DEFAULT_FLOPS_EFFICIENCY, gt=0, le=1)
    overhead_ms: float = Field(default=REFERENCE_OVERHEAD_MS, ge=0)
    attention_bandwidth_scale: float = Field(
        default=1.0, gt=0, description="the KV read's share of bandwidth / the weights'"
    )
    dequant_bytes_per_token: int = Field(
        default=0,
        ge=0,
        description="HBM bytes per token of unfused fp8 dequantization passes (step.gemm), "
        "separate kernels after the GEMMs",
    )
    mla_flops_per_kv_byte: float = Field(
        default=0.0, ge=0, description="absorbed MLA decode: FLOPs per byte of KV read"
    )
    mla_flops_per_s: float = Field(
        default=0.0, ge=0, description="the rate the absorbed MLA decode kernels multiply at"
    )
    mla_query_heads: int = Field(
        default=0, ge=0, description="query heads a GPU's absorbed MLA kernels run"
    )


def step_ms(
    r: Roofline, batch: NDArray[np.float64], tokens_per_seq: float = 1.0
) -> NDArray[np.float64]:
    """Step time in ms for each batch size (vectorised)."""
    bw = r.bandwidth_bytes_per_s * r.bandwidth_efficiency
    flops = r.flops_per_s * r.flops_efficiency
    # the KV read's share, never above the peak whatever share the weights are given
    kv_scale = min(r.attention_bandwidth_scale, 1.0 / r.bandwidth_efficiency)
    kv = batch * r.kv_bytes_per_sequence / kv_scale
    if r.mla_flops_per_kv_byte > 0 and r.mla_flops_per_s > 0:
        # the absorbed MLA kernels multiply longer than they read: as many bytes at that pace,
        # more rows for every verified token
        rows = mla_rows(r.mla_query_heads, tokens_per_seq) / mla_rows(r.mla_query_heads, 1.0)
        flops_per_byte = r.mla_flops_per_kv_byte * rows
        multiply_s = batch * r.kv_bytes_per_sequence * flops_per_byte / r.mla_flops_per_s
        kv = np.maximum(kv, multiply_s * bw)
    memory = (r.weights_bytes_per_gpu + kv) / bw * 1e3
    compute = (
        FLOPS_PER_PARAM_PER_TOKEN * r.active_params_per_gpu * batch * tokens_per_seq / flops * 1e3
    )
    dequant = batch * tokens_per_seq * r.dequant_bytes_per_token / bw * 1e3
    return np.maximum(memory, compute) + dequant + r.overhead_ms
