"""What a step costs in the simulator: the reference linear model (overhead + a + b x decode slots
+ a prefill cost per token) or the step-time model itself (CurveCost)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from pydantic import BaseModel, ConfigDict, Field

from planner.core.reference import (
    REFERENCE_A_MS,
    REFERENCE_B_MS,
    REFERENCE_OVERHEAD_MS,
    REFERENCE_PREFILL_MS_PER_TOKEN,
)
from planner.core.spec_load import verify_ms
from planner.sim.config import MAX_COST_MS

if TYPE_CHECKING:
    from planner.core.step import StepTime


class CostModel(BaseModel):
    """Step cost: overhead + a + b x decode slots + prefill cost x prefill tokens. The defaults are
    docs/method.md §3's reference model (planner.core.reference, which `slo` reads too)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    a_ms: float = Field(default=REFERENCE_A_MS, ge=0, le=MAX_COST_MS)
    b_ms: float = Field(default=REFERENCE_B_MS, ge=0, le=MAX_COST_MS)
    prefill_ms_per_token: float = Field(
        default=REFERENCE_PREFILL_MS_PER_TOKEN, ge=0, le=MAX_COST_MS
    )
    overhead_ms: float = Field(default=REFERENCE_OVERHEAD_MS, ge=0, le=MAX_COST_MS)
    source: str = "reference"

    def step_ms(self, decode_slots: int, prefill_tokens: int, spec_factor: float = 1.0) -> float:
        """Cost of one step with `decode_slots` sequences and `prefill_tokens` of prompt."""
        return (
            self.overhead_ms
            + (self.a_ms + self.b_ms * decode_slots) * spec_factor
            + self.prefill_ms_per_token * prefill_tokens
        )


class CurveCost:
    """Step cost from the step-time model itself (planner.core.step): the linear layers
    over every token of the step, decode attention over the KV the running sequences hold,
    prefill attention over its (query, key) pairs, kernels, all-reduce and engine overhead."""

    source = "step-time model"

    def __init__(
        self,
        curve: StepTime,
        source: str | None = None,
        spec_k: int = 0,
        spec_draft_cost: float = 0.0,
    ) -> None:
        from planner.core.step.model import PartsCache

        self.curve = curve
        if source is not None:
            self.source = source
        self._kv_bytes: dict[int, int] = {}  # KV bytes one sequence reads, by its context
        self._parts = PartsCache()  # step terms by token counts
        # speculative decoding: each decode step verifies `spec_k` drafts per sequence, after
        # `spec_k` draft forwards of `spec_draft_cost` x a plain step each
        self.spec_k, self.spec_draft_cost = spec_k, spec_draft_cost

    def step_ms(
        self,
        decode_seqs: int,
        decode_tokens: int,
        prefill_tokens: int,
        prefill_pairs: float,
        others: int | None = None,
    ) -> float:
        """One step: `decode_seqs` sequences holding `decode_tokens` tokens in all, plus
        `prefill_tokens` prompt tokens spanning `prefill_pairs` attention pairs (`others`:
        the tokens the other data-parallel attention groups bring to the MoE layers; None:
        as many as this one's each)."""
        kv = context = 0
        if decode_seqs:
            context = max(1, decode_tokens // decode_seqs)
            one = self._kv_bytes.get(context)
            if one is None:
                one = self._kv_bytes[context] = self.curve.kv_bytes(context)
            kv = decode_seqs * one
        prompt_drafts = self._draft_prompt_ms(prefill_tokens, prefill_pairs)
        if self.spec_k and decode_seqs:
            k = self.spec_k
            drafts = k * self.spec_draft_cost * self.curve.mixed_ms(decode_seqs, kv, 0, 0.0)
            verify = verify_ms(
                self.curve, decode_seqs, kv, context, k, prefill_tokens, prefill_pairs
            )
            return verify + drafts + prompt_drafts
        return prompt_drafts + self.curve.mixed_ms(
            decode_seqs, kv, prefill_tokens, prefill_pairs, parts=self._parts, others=others
        )

    def _draft_prompt_ms(self, prefill_tokens: int, prefill_pairs: float) -> float:
        """The draft's own pass over a step's prompt tokens under speculation, which fills its
        KV for them: `spec_draft_cost` x the target's prefill of them. Both engines run it on
        the target's batch: vLLM's drafter ("Draft prefill runs on the target's batch",
        v1/worker/gpu/spec_decode/speculator.py, 0.34), SGLang's after the target's prefill
        (eagle_worker_v2.py forward_batch_generation, _draft_extend_for_prefill, 0.5.14)."""
        if not self.spec_k or not prefill_tokens:
            return 0.0
        return self.spec_draft_cost * self.curve.mixed_ms(0, 0, prefill_tokens, prefill_pairs)
