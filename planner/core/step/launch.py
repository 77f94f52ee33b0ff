"""Steps outside the engine's CUDA graphs: which steps launch every kernel from the host, and
the host time that takes (a floor under the step where it outlasts the GPU's work)."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field

from planner.core.specs import KvKind, ModelSpec
from planner.core.step.moe import moe_layers
from planner.core.step.overhead import (
    GEMMS_PER_MOE_BLOCK,
    gemm_launches_per_layer,
)

# Host time to launch one kernel from PyTorch's eager mode, ms: a small in-place op issued from
# a Python loop on an H200's host, 6.05 us a kernel, against 1.07 us inside a CUDA graph
# (benchmarks/data/ops-h200-sxm-141gb.json, "launch"; torch 2.11.0+cu130, driver 580.159.04,
# `python benchmarks/gpu_ops.py`). An engine's ops pass through its modules and custom-op
# dispatch on the way, so this is a floor.
EAGER_MS_PER_KERNEL = 0.00605
# Kernels beside the GEMMs a decoder block launches in eager mode, read from vLLM's model code
# (llama.py, deepseek_v2.py, fused_moe): an attention block its input norm, rotary embedding, KV
# cache write and attention kernel; an MLA block those and the q_a / kv_a norms; a linear-attention
# or Mamba block its norm, convolution, recurrent update and gated norm; a dense MLP its norm and
# activation; a MoE block its norm, top-k, expert sort, activation and the weighted sum of the
# experts' outputs. Q / K norms, shared experts and quantization kernels are not counted.
OTHER_KERNELS_PER_ATTENTION_BLOCK = 4
OTHER_KERNELS_PER_MLA_BLOCK = 6
OTHER_KERNELS_PER_STATE_BLOCK = 4
OTHER_KERNELS_PER_DENSE_MLP = 2
OTHER_KERNELS_PER_MOE_BLOCK = 5
# A layer's two tensor-parallel all-reduces (after attention and after the MLP), one kernel each.
ALLREDUCE_KERNELS_PER_LAYER = 2
# Outside the decoder layers: the embedding, the final norm, the lm_head and the sampler's
# few kernels (fp32 logits, temperature, the pick).
KERNELS_OUTSIDE_LAYERS = 6


class Graphs(BaseModel):
    """Which steps replay a CUDA graph: those of at most `max_tokens` tokens (None: every step,
    as the per-layer kernel costs assume; 0: none, an eager engine); a step with prompt tokens
    only up to `prompt_max_tokens` where that is set (0: prompt steps launch eagerly, as vLLM V0
    captures decode-only batches; SGLang captures its prefill graphs apart from its decode
    ones, to their own size)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    max_tokens: int | None = Field(default=None, ge=0)
    prompt_max_tokens: int | None = Field(default=None, ge=0)

    def eager(self, tokens: int, prompt_tokens: int) -> bool:
        """Whether a step of `tokens` tokens, `prompt_tokens` of them prompt, launches its
        kernels from the host."""
        largest = self.max_tokens
        if prompt_tokens and self.prompt_max_tokens is not None:
            largest = self.prompt_max_tokens
        return largest is not None and tokens > largest


ALL_GRAPHED = Graphs()


def kernels_per_layer(model: ModelSpec, tp: int) -> float:
    """Kernels one decoder layer launches, averaged over the layers: its GEMMs, the other
    kernels of its blocks and its all-reduces under tensor parallelism."""
    layers = model.num_layers
    if not layers:
        return 0.0
    others = 0
    for g in model.kv_groups:
        if g.kind is KvKind.MLA:
            others += g.num_layers * OTHER_KERNELS_PER_MLA_BLOCK
        elif g.kind.per_token:
            others += g.num_layers * OTHER_KERNELS_PER_ATTENTION_BLOCK
        else:
            others += g.num_layers * OTHER_KERNELS_PER_STATE_BLOCK
    routed = moe_layers(model) if model.num_experts else 0
    others += routed * (OTHER_KERNELS_PER_MOE_BLOCK + GEMMS_PER_MOE_BLOCK)
    others += max(layers - routed, 0) * OTHER_KERNELS_PER_DENSE_MLP
    reduces = ALLREDUCE_KERNELS_PER_LAYER if tp > 1 else 0
    return gemm_launches_per_layer(model) + others / layers + reduces


def launch_ms(model: ModelSpec, tp: int, layers: int) -> float:
    """Host time to launch one eager forward pass of `layers` decoder layers (a pipeline
    stage's share) and the kernels outside them, ms."""
    kernels = kernels_per_layer(model, tp) * layers + KERNELS_OUTSIDE_LAYERS
    return kernels * EAGER_MS_PER_KERNEL
