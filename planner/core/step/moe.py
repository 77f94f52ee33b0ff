"""Mixture-of-experts layers: the experts B tokens route to (and, under expert parallelism,
the busiest rank's share), the routing kernels a MoE layer adds, and how a deployment's flags
exchange tokens with experts on other GPUs (MoeExchange)."""

from __future__ import annotations

import math
from statistics import NormalDist
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from planner.core.specs import ModelSpec

# A MoE layer launches kernels a dense one does not: the router GEMM, top-k softmax, the token
# sort / block alignment of fused MoE and the weighted combine (vLLM fused_moe.py: 4 kernels
# beside the two grouped GEMMs), 30 us per MoE layer at the 4-9 us a kernel costs
# (overhead.KERNEL_MS_PER_LAYER). The grouped GEMMs launch a grid sized for every local expert:
# cdiv(tokens x top-k + E x (BLOCK_M - 1), BLOCK_M) row blocks (moe_align_block_size's
# max_num_tokens_padded, vllm/model_executor/layers/fused_moe/fused_moe.py, 0.6.3), of which
# those past the routed experts' padded rows exit at once: about one per idle expert (E less
# those routed). An expert with tokens spends its blocks streaming its weights and multiplying,
# time the experts' term already counts where it outlasts the exit (a whole expert's read takes
# several us); a slice done sooner (narrow experts split by TP on fast HBM: a GPU's eighth of
# one of Qwen3-Next's 512-wide experts reads in under 0.2 us) still costs what an exiting block
# does, so a routed expert never costs less than an idle one and a step never shortens as its
# batch grows (routing_ms's `expert_ms`). 0.5 us per idle local expert, an estimate that puts
# Qwen3-30B-A3B (128 experts, 120 idle) at batch 1 on an A100 at 9.4 ms against its published
# 9.7 ms, while the Mixtral-8x22B rows (8 experts) of
# benchmarks/data/step-time.jsonl barely move. MiniMax-M2.7 (256 experts, fp8) at concurrency 1
# on 2 x MI300X is still 11.8 ms against the 14.9 ms of SGLang PR 31044 (benchmarks/data/
# e2e.jsonl): the AMD side is unsettled. Not, it seems, in the grouped GEMM: ROCm's AITER fused
# MoE, timed in its tuning table (ROCm/aiter a8w8_blockscale_tuned_fmoe_ds_v3.csv, commit
# e404860: DeepSeek-V3 at EP 8 on gfx942 with 304 CUs, 32 experts and the shared one, fp8), takes
# 354-363 us at 16-64 tokens, its 1.45 GB of experts at 4.0-4.1 TB/s, where the model's read of
# them alone takes 442 us (benchmarks/gemm_kernels.py). Nor on the A100: NVIDIA's table of
# vLLM 0.14.0's fused MoE there (ai-dynamo/aiconfigurator a100_sxm/moe/vllm/0.14.0, one token,
# 102 rows in benchmarks/data/nvidia-kernels.jsonl: `python benchmarks/nvidia_kernels.py`) fits
# 25.9 us + 0.04 us an idle expert + the top-k experts at 0.795 of peak: the kernels' idle
# experts cost next to nothing, so the 0.5 us here stands for time the measured Qwen3-30B-A3B
# step spends outside the fused MoE kernels (which these tables do not say), an estimate kept
# until a whole step on an A100 splits it.
MOE_KERNEL_MS_PER_LAYER = 0.03
MOE_MS_PER_IDLE_EXPERT = 0.0005
# The tokens a step needs before two-batch overlap splits it, (decode-only, with prompt
# tokens): any two, as SGLang splits a batch of two sequences or more (vLLM's --enable-dbo
# takes its own thresholds: planner.core.engines.vllm.DBO_MIN_TOKENS).
TWO_BATCH_MIN_TOKENS = (2, 2)


class MoeExchange(BaseModel):
    """How a deployment's MoE layers reach experts on other GPUs, as the engine's flags set it:
    the all-to-all and whose kernels run it, the expert split, redundant experts, and two-batch
    overlap of the exchange with compute."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    all_to_all: bool | None = Field(
        default=None,
        description="DeepEP-style all-to-all (None: where the planner plans it, "
        "parallel.deepep_wide)",
    )
    kernels: Literal["deepep", "mori"] = Field(
        default="deepep", description="whose all-to-all kernels: DeepEP's, or AMD's MoRI"
    )
    expert_ranks: int | None = Field(
        default=None,
        ge=1,
        description="the EP size: each of that many GPUs holds whole experts (None: experts "
        "split over the MoE ranks; an all-to-all sets it to them)",
    )
    redundant_experts: int = Field(default=0, ge=0, description="extra expert replicas")
    two_batch_overlap: bool = Field(
        default=False,
        description="half-batches overlap the all-to-all with compute (SGLang's "
        "--enable-two-batch-overlap, vLLM's --enable-dbo)",
    )
    overlap_min_tokens: tuple[int, int] = Field(
        default=TWO_BATCH_MIN_TOKENS,
        description="the tokens a step needs before it splits in two: (decode-only, with "
        "prompt tokens)",
    )


# The exchange of a deployment that asks for none: each engine's default.
ENGINE_DEFAULT_EXCHANGE = MoeExchange()


def experts_read(num_experts: int, experts_per_token: int, tokens: int) -> float:
    """Expected distinct experts `tokens` tokens route to, per MoE layer (uniform routing):
    E x (1 - (1 - k/E)^B): top-k at one token, all of them at large B."""
    if not num_experts:
        return 0.0
    share = 1.0 - (1.0 - experts_per_token / num_experts) ** tokens
    return num_experts * share


def busiest_rank_experts(read: float, num_experts: int, local: int) -> float:
    """Experts the busiest expert-parallel rank reads when `read` of `num_experts` are routed
    to and each rank holds `local`: each of its experts is routed to with probability
    q = read / E, so its count is binomial, and the busiest of the E / local ranks sits
    expected_max_of_normals(ranks) standard deviations above the mean."""
    ranks = math.ceil(num_experts / local)
    q = read / num_experts
    busiest = local * q + expected_max_of_normals(ranks) * math.sqrt(local * q * (1 - q))
    return min(local, busiest)


def expected_max_of_normals(n: int) -> float:
    """E[max] of n independent standard normals, by Blom's approximation
    Phi^-1((n - 0.375) / (n + 0.25)) (Blom 1958, Statistical Estimates and Transformed
    Beta-Variables): 0 for one, 0.56 for two, 1.42 for eight."""
    if n <= 1:
        return 0.0
    return NormalDist().inv_cdf((n - 0.375) / (n + 0.25))


def routing_ms(
    moe_layers: int,
    idle_experts: float,
    kernel_ms: float,
    per_expert_ms: float,
    routed_experts: float = 0.0,
    expert_ms: float = 0.0,
) -> float:
    """The MoE layers' routing kernels and the early exits of their idle local experts'
    blocks (fixed per step for a given batch), ms; each of the `routed_experts` local experts
    whose read and multiply take `expert_ms` (counted with the linear layers) adds what that
    falls short of an exit."""
    shortfall = max(0.0, per_expert_ms - expert_ms)
    return moe_layers * (kernel_ms + idle_experts * per_expert_ms + routed_experts * shortfall)


def moe_layers(model: ModelSpec) -> int:
    """Decoder layers that carry routed experts (all, unless the config says fewer)."""
    return model.moe_layers or model.num_layers
