"""Data-parallel attention as the step model sees it: how many attention groups a deployment
runs, and which dense weights SGLang keeps outside them (AttentionDp)."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field


class AttentionDp(BaseModel):
    """Data-parallel attention, as the engine's flags set it: `groups` attention groups of the
    step's TP size each, the MoE layers spanning all of them (vLLM --data-parallel-size on a MoE
    model, SGLang --enable-dp-attention). vLLM keeps every non-expert weight at the group's TP;
    SGLang splits only attention that way and the dense FFN and lm_head over all the GPUs, unless
    `dense_mlp_replicated` (--moe-dense-tp-size 1: the dense MLPs whole on every GPU) or
    `dp_lm_head` (--enable-dp-lm-head: an untied lm_head on the attention TP group, scoring each
    group's own tokens)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    groups: int = Field(default=1, ge=1, description="attention-DP groups (1: none)")
    dense_mlp_replicated: bool = Field(
        default=False, description="SGLang --moe-dense-tp-size 1 (under attention DP)"
    )
    dp_lm_head: bool = Field(
        default=False, description="SGLang --enable-dp-lm-head (under attention DP)"
    )


# A deployment without data-parallel attention.
NO_ATTENTION_DP = AttentionDp()
