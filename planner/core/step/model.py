"""The step time of one model on one GPU of a layout under one engine: the operations of a
forward pass summed as the GPU runs them (docs/method.md §3)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal, NamedTuple

from pydantic import BaseModel, ConfigDict, Field

from planner.core.kv import kv_bytes_per_sequence
from planner.core.parallel import deepep_wide
from planner.core.specs import GpuSpec, ModelSpec
from planner.core.step import attention, comm, gemm, launch, moe, overhead, sampler
from planner.core.step.attention_dp import NO_ATTENTION_DP, AttentionDp
from planner.core.step.family import (
    CUSTOM_ALLREDUCE_ENGINES,
    MID_M_ENGINES,
    SGLANG_DECODE_SUM_LEN_MAX_BYTES,
    SGLANG_DECODE_SUM_LEN_SINCE,
    Family,
    attention_bandwidth_scale,
    bandwidth_efficiency,
    engine_moe_family,
    family_of,
    fp8_kv_scale,
    mla_layer_ms,
    moe_decode_costs,
    ranks_family,
    slowdown_at,
)
from planner.core.step.launch import ALL_GRAPHED, Graphs
from planner.core.step.moe import ENGINE_DEFAULT_EXCHANGE, TWO_BATCH_MIN_TOKENS, MoeExchange
from planner.units import DTYPE_BITS, bytes_for_elements, ceil_div


class StepTerms(BaseModel):
    """One step's time, term by term, ms."""

    model_config = ConfigDict(extra="forbid")

    batch: int
    context_tokens: int
    weights_read_bytes: int
    kv_read_bytes: int
    memory_ms: float
    attention_ms: float = Field(
        description="the decode attention kernels: their KV read (or an MLA multiply that "
        "takes longer), ms"
    )
    compute_ms: float
    linear_ms: float = Field(
        description="the linear layers: the dense body, the routed experts and the lm_head, "
        "each the norm of its weight stream and its multiply, one after another, ms"
    )
    dense_linear_ms: float = Field(description="the dense body's linear layers, ms")
    dequant_ms: float = Field(
        default=0.0,
        description="inside dense_linear_ms: the fp8 linears' unfused dequantization passes "
        "(row-wise scales on an engine without a row-wise scaled GEMM), ms",
    )
    experts_ms: float = Field(description="the routed experts' grouped GEMMs, ms")
    lm_head_ms: float = Field(description="the lm_head over the sampled tokens, ms")
    logits_ms: float = Field(
        default=0.0,
        description="the sampler's logits: gathered across the TP group, cast to fp32 and "
        "reduced to the greedy token, ms",
    )
    kernels_ms: float
    allreduce_ms: float = Field(
        description="the TP all-reduces and data-parallel gathers of the step, ms"
    )
    all_to_all_ms: float = Field(
        default=0.0,
        description="DeepEP's MoE dispatch and combine, ms: what the step shows of it (under "
        "two-batch overlap, the part the other half's work does not hide)",
    )
    overhead_ms: float
    frontend_ms: float = Field(
        default=0.0,
        description="the API server streaming the step's tokens, in its own process beside "
        "the engine: the step lasts at least this long for the clients, ms",
    )
    scheduler_ms: float = Field(
        default=0.0,
        description="the scheduler readying the next step beside the GPU (async / overlap "
        "scheduling): the step lasts at least this long, ms",
    )
    step_ms: float
    experts_read_per_layer: float | None = None


class TokenParts(NamedTuple):
    """The terms of one step fixed by its token counts (StepTime.token_parts), ms: the
    serving pipeline's floor, the scheduler's work beside the GPU, the engine's own time, the
    linear layers, the fixed kernels, the MoE all-to-all and the all-reduces; `tokens` per
    micro-batch (0: an empty step)."""

    tokens: int
    streamed_ms: float = 0.0
    scheduler_ms: float = 0.0
    own_ms: float = 0.0
    linear_ms: float = 0.0
    fixed_ms: float = 0.0
    all_to_all_ms: float = 0.0
    allreduce_ms: float = 0.0
    logits_ms: float = 0.0


@dataclass
class PartsCache:
    """A simulation's cache of step terms (StepTime.mixed_ms): whole steps' token terms by
    (decode sequences, prompt tokens, sampled, others), and beneath them the terms of a step's
    token count (by tokens, others, decode-only) and of its sampled positions, which steps
    of other mixes share (a full token budget is met with any split of decode and prompt)."""

    steps: dict[tuple[int, int, int | None, int | None], TokenParts] = field(default_factory=dict)
    tokens: dict[tuple[int, int | None, bool], tuple[float, float, float, float, float]] = field(
        default_factory=dict
    )
    sampled: dict[int, tuple[float, float]] = field(default_factory=dict)


class StepTime(BaseModel):
    """Everything t(B, ctx) needs for one model on one GPU of a TP group, under one engine."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    label: str
    dense_weights_bytes: int = Field(ge=0, description="read every step, per GPU")
    expert_bytes: int = Field(default=0, ge=0, description="one expert across its layers, per GPU")
    num_experts: int = Field(default=0, ge=0)
    experts_per_token: int = Field(default=0, ge=0)
    moe_layers: int = Field(default=0, ge=0, description="layers with routed experts")
    moe_kernel_ms_per_layer: float = Field(default=moe.MOE_KERNEL_MS_PER_LAYER, ge=0)
    moe_ms_per_idle_expert: float = Field(default=moe.MOE_MS_PER_IDLE_EXPERT, ge=0)
    experts_per_gpu: int = Field(
        default=0, ge=0, description="experts resident on one GPU (all under TP, E / EP)"
    )
    expert_active_params_per_gpu: int = Field(
        default=0,
        ge=0,
        description="routed-expert parameters one token multiplies, over the MoE ranks (inside "
        "active_params_per_gpu)",
    )
    model: ModelSpec = Field(description="for the KV bytes of each layer group")
    kv_dtype_bytes: int = Field(default=2, gt=0)
    active_params_per_gpu: int = Field(gt=0)
    bandwidth_bytes_per_s: float = Field(gt=0, description="peak HBM bandwidth")
    bandwidth_efficiency: float = Field(gt=0, le=1)
    flops_per_s: float = Field(gt=0)
    plain_params_per_gpu: int = Field(
        default=0, ge=0, description="active parameters the checkpoint keeps unquantized"
    )
    embedding_params_per_gpu: int = Field(
        default=0,
        ge=0,
        description="the embedding matrices inside active_params_per_gpu (input table, and an "
        "untied lm_head): no GEMM runs over them per token",
    )
    lm_head_params_per_gpu: int = Field(
        default=0, ge=0, description="the lm_head GEMM (vocab x hidden / TP), per sampled token"
    )
    plain_flops_per_s: float = Field(
        default=0.0, ge=0, description="the 16-bit rate those run at (0: flops_per_s)"
    )
    flops_efficiency: float = Field(default=gemm.FLOPS_EFFICIENCY, gt=0, le=1)
    low_precision_scale: float = Field(
        default=1.0,
        gt=0,
        le=1,
        description="the fp8 / fp4 GEMMs' share of their rate relative to the 16-bit share "
        "(1: the quantized layers run at the 16-bit rate)",
    )
    dequant_bytes_per_token: int = Field(
        default=0,
        ge=0,
        description="HBM bytes per token of the fp8 linears' unfused dequantization passes, "
        "per GPU (0: the GEMMs fuse their scales)",
    )
    layers: int = Field(gt=0)
    kernel_ms_per_layer: float = Field(default=overhead.KERNEL_MS_PER_LAYER, ge=0)
    tp: int = Field(default=1, ge=1)
    hidden_size: int = Field(gt=0)
    activation_bytes: int = Field(default=2, gt=0)
    fabric: comm.Fabric = Field(
        default_factory=comm.Fabric, description="the links the collectives run over"
    )
    allreduce: comm.AllReduceCost = Field(
        default_factory=comm.AllReduceCost, description="one all-reduce's latencies and link share"
    )
    qk_norm_allreduce: bool = Field(
        default=False,
        description="each layer also all-reduces its q / k norms' sums of squares over the "
        "attention TP group (a norm spanning every head: ModelSpec.qk_norm_spans_heads)",
    )
    overhead_ms: float = Field(default=overhead.ENGINE_OVERHEAD_MS["vllm"], ge=0)
    host_ms_per_seq: float = Field(
        default=0.0,
        ge=0,
        description="the scheduler's CPU time per running sequence, in series with the GPU, ms",
    )
    overlapped_host_ms_per_seq: float = Field(
        default=0.0,
        ge=0,
        description="the scheduler's CPU time per running sequence where it runs beside the GPU "
        "(vLLM's async scheduling, SGLang's overlap scheduler), ms: a floor under the step",
    )
    frontend_ms_per_token: float = Field(
        default=0.0, ge=0, description="the API server's time per streamed token, ms"
    )
    client_ms_per_token: float = Field(
        default=0.0,
        ge=0,
        description="the benchmark client's time per chunk it reads, ms (simulate only: it "
        "runs in parallel with the API server, and the slower of the two paces the stream)",
    )
    stream_interval: int = Field(
        default=1,
        ge=1,
        description="--stream-interval: a request's tokens leave N at a time after its first "
        "(the API server's and the client's per-chunk work once per N tokens)",
    )
    engine: str = "vllm"
    attention_flops_per_pair: float = Field(
        default=0.0, ge=0, description="prefill: FLOPs per (query, key) pair, all layers, per GPU"
    )
    attention_flops_efficiency: float = Field(
        default=attention.ATTENTION_FLOPS_EFFICIENCY,
        gt=0,
        le=1,
        description="prefill attention's share of the 16-bit rate (with attention_half_keys: "
        "the share long prompts approach)",
    )
    attention_half_keys: float = Field(
        default=0.0,
        ge=0,
        description="the mean keys a query sees at which prefill attention reaches half its "
        "share (0: the share is flat)",
    )
    mla_flops_per_kv_byte: float = Field(
        default=0.0,
        ge=0,
        description="decode: FLOPs the absorbed MLA kernels do per byte of KV they read (0: "
        "not MLA; decode attention is its read)",
    )
    mla_flops_per_s: float = Field(
        default=0.0, ge=0, description="the rate the absorbed MLA decode kernels multiply at"
    )
    mla_query_heads: int = Field(
        default=0,
        ge=0,
        description="query heads a GPU's absorbed MLA kernels run (their rows grow with the "
        "query tokens a sequence verifies)",
    )
    mla_layer_ms: float = Field(
        default=0.0,
        ge=0,
        description="an MLA layer's decode module beyond its priced parts (inside "
        "kernel_ms_per_layer, averaged over the layers)",
    )
    window_flops_per_pair: tuple[tuple[int, float], ...] = Field(
        default=(),
        description="(window, FLOPs per pair) of the sliding-window layers, inside "
        "attention_flops_per_pair",
    )
    memory_scale: float = Field(
        default=1.0, gt=0, description="calibrated: measured / modelled time of HBM reads"
    )
    attention_bandwidth_scale: float = Field(
        default=1.0, gt=0, description="decode attention's bandwidth share / the weights'"
    )
    pp: int = Field(
        default=1, ge=1, description="pipeline stages: the fields above are one stage's"
    )
    pp_hop_ms: float = Field(default=0.0, ge=0, description="one stage-to-stage send, ms")
    family: Family | None = Field(
        default=None, description="the GPU family whose constants these are (None: given)"
    )
    gemm_kind: str = Field(
        default="bf16",
        description="the weights' GEMM kind (bf16, fp8, fp8-block): which of the family's "
        "mid-M slowdowns the dense GEMMs take",
    )
    moe_gemm_scale: float = Field(
        default=1.0,
        gt=0,
        le=2,
        description="the share of the weights' rate the routed experts' kernels reach, relative "
        "to the dense GEMMs' share (the family's, by the experts' kind): at most 1 for the "
        "fused MoE kernels, above it for DeepGEMM's grouped GEMMs under DeepEP",
    )
    sglang_decode_sum_len: bool = Field(
        default=False,
        description="SGLang's decode steps gather every attention group's rows with an "
        "all-reduce (SUM_LEN: 0.5.23 on NVIDIA, its CustomAllReduceV2 holding the buffer); "
        "else they all-gather and reduce-scatter (MAX_LEN)",
    )
    deepgemm_experts: bool = Field(
        default=False,
        description="the experts multiply in DeepGEMM's grouped GEMMs under DeepEP, at "
        "Family.deepep_moe_fp8_share (moe_gemm_scale holds it)",
    )
    sglang_moe_shares: bool = Field(
        default=False,
        description="whether moe_gemm_scale is SGLang's own kernels' share "
        "(Family.sglang_moe_gemm_scale)",
    )
    moe_stream_scale: float = Field(
        default=1.0,
        gt=0,
        le=1,
        description="the routed experts' stream relative to the weights' share of bandwidth "
        "(the family's fused MoE kernels of the experts' kind; 1: the same)",
    )
    expert_width_per_gpu: int = Field(
        default=0,
        ge=0,
        description="the intermediate columns of an expert each GPU multiplies (whole under "
        "expert parallelism, split over the MoE ranks under TP)",
    )
    attention_dp: int = Field(
        default=1,
        ge=1,
        description="data-parallel attention groups whose tokens meet in the MoE layers (each "
        "GPU's attention runs its own group's batch; `tp` is the attention TP)",
    )
    moe_ranks: int = Field(
        default=0, ge=0, description="GPUs the MoE layers span (0: the TP group)"
    )
    gathered_params_per_gpu: int = Field(
        default=0,
        ge=0,
        description="dense parameters outside attention that multiply every attention group's "
        "tokens, split over the MoE ranks (SGLang's data-parallel attention runs its dense "
        "FFNs and shared experts on the gathered batch), as a share of active_params_per_gpu "
        "at the attention TP",
    )
    moe_all_to_all: bool = Field(
        default=False,
        description="the MoE layers exchange tokens with DeepEP's all-to-all (wide EP)",
    )
    dp_lm_head: bool = Field(
        default=False,
        description="SGLang's --enable-dp-lm-head: each attention-DP group scores its own tokens "
        "on its own GPUs (no gather of the logits over every group)",
    )
    all_to_all_kernels: Literal["deepep", "mori"] = Field(
        default="deepep",
        description="whose all-to-all kernels: DeepEP's (low-latency in decode steps, as "
        "SGLang's --deepep-mode auto runs them) or AMD's MoRI (its normal kernels in every "
        "step, each with its fixed cost)",
    )
    overlap_all_to_all: bool = Field(
        default=False,
        description="two-batch overlap: each half of a batch runs its all-to-all under the "
        "other half's compute, and every kernel launches twice",
    )
    overlap_min_tokens: tuple[int, int] = Field(
        default=TWO_BATCH_MIN_TOKENS,
        description="the tokens a step needs before it splits in two: (a decode-only step, one "
        "with prompt tokens); SGLang any two, vLLM's dual-batch overlap its thresholds",
    )
    graphs: Graphs = Field(
        default=ALL_GRAPHED,
        description="the steps the engine replays CUDA graphs for; the others launch every "
        "kernel from the host (launch.Graphs)",
    )
    eager_launch_ms: float = Field(
        default=0.0,
        ge=0,
        description="host time to launch one stage's forward pass kernel by kernel, ms: the "
        "floor of a step outside the graphs (launch.launch_ms)",
    )

    def _moe_ranks(self) -> int:
        return self.moe_ranks or self.tp

    def experts_read(self, batch: int) -> float:
        """Expected distinct experts B tokens route to, per MoE layer (uniform routing)."""
        return moe.experts_read(self.num_experts, self.experts_per_token, batch)

    def gathered(self, tokens: int, others: int | None = None) -> int:
        """The tokens the MoE layers meet in a step of `tokens` tokens in this attention
        group: every group's (attention-DP gathers them), the other groups bringing `others`
        in all (None: as many as this one each, the groups in step on the same work)."""
        if self.attention_dp == 1:
            return tokens
        return tokens * self.attention_dp if others is None else tokens + others

    def experts_routed(self, tokens: int, others: int | None = None) -> float:
        """Experts a step of `tokens` tokens per attention group routes to, per MoE layer:
        every group's tokens route (`gathered`)."""
        return self.experts_read(self.gathered(tokens, others))

    def expert_weights_bytes(self, tokens: int, others: int | None = None) -> int:
        """Expert weights the slowest GPU reads for `tokens` tokens (and the other attention
        groups' `others`), per step. Under TP every GPU reads its 1/TP of each routed expert;
        under expert parallelism a GPU reads its own routed experts whole, and the step waits
        for the rank that drew the most."""
        read = self.experts_routed(tokens, others)
        local = self.experts_per_gpu
        if not local or local >= self.num_experts:
            return round(read * self.expert_bytes)
        busiest = moe.busiest_rank_experts(read, self.num_experts, local)
        return round(busiest * self.expert_bytes * self._moe_ranks())

    def kv_bytes(self, context: int) -> int:
        """KV bytes one sequence reads per step at `context` on one GPU: every layer group,
        windows capped, MLA latent whole, Mamba / linear-attention state (a stage's share of
        the layers under pipeline parallelism)."""
        whole = kv_bytes_per_sequence(self.model, context, self.tp, self.kv_dtype_bytes)
        return ceil_div(whole, self.pp)

    def _bandwidth(self) -> float:
        return self.bandwidth_bytes_per_s * self.bandwidth_efficiency

    def _gemm_rates(self) -> tuple[float, float]:
        """Achievable FLOP/s of the 16-bit GEMMs (the layers a checkpoint leaves unquantized,
        the lm_head) and of the weights' own dtype (fp8 / fp4 at their low-precision share)."""
        plain = (self.plain_flops_per_s or self.flops_per_s) * self.flops_efficiency
        return plain, self.flops_per_s * self.flops_efficiency * self.low_precision_scale

    def _linear_params(self) -> tuple[int, int]:
        """Parameters one token multiplies on this GPU outside the embedding, and those of
        them the checkpoint left in 16 bits."""
        body = max(self.active_params_per_gpu - self.embedding_params_per_gpu, 0)
        return body, min(self.plain_params_per_gpu, body)

    def linear_ms(
        self, tokens: int, sampled: int | None = None, others: int | None = None
    ) -> float:
        """The linear layers of one forward pass over `tokens` tokens, ms (`linear_parts`
        summed)."""
        body_ms, experts_ms, head_ms = self.linear_parts(tokens, sampled, others)
        return body_ms + experts_ms + head_ms

    def linear_parts(
        self, tokens: int, sampled: int | None = None, others: int | None = None
    ) -> tuple[float, float, float]:
        """The dense body, the routed experts and the lm_head (over the `sampled` tokens only;
        default all) of one forward pass, ms: they run one after another, each the norm of its
        weight stream and its multiply (gemm.overlapped_ms). A MoE prefill chunk streams every
        expert (a few tokens each: memory-bound) while its attention projections are
        compute-bound; one max over their sums would hide the one behind the other. Under
        data-parallel attention each GPU's experts multiply its share of the gathered tokens
        (`others`: the other groups' in all, None: as many as this group's each)."""
        body_ms, experts_ms = self.body_parts(tokens, others)
        return body_ms, experts_ms, self.head_ms(tokens if sampled is None else sampled)

    def head_ms(self, head_tokens: int) -> float:
        """The lm_head over `head_tokens` positions, ms (it stays in 16 bits in quantized
        checkpoints, inside the dense weights)."""
        if head_tokens <= 0:
            return 0.0
        plain_rate, _ = self._gemm_rates()
        return gemm.overlapped_ms(
            gemm.read_ms(self._head_bytes(), self._bandwidth()) * self.memory_scale,
            gemm.compute_ms(self.lm_head_params_per_gpu, head_tokens, plain_rate),
        ) * self.mid_m_slowdown("bf16", head_tokens)

    def _head_bytes(self) -> int:
        """The lm_head's weight bytes on one GPU, inside the dense weights."""
        return min(self.dense_weights_bytes, self.lm_head_params_per_gpu * self.activation_bytes)

    def body_parts(self, tokens: int, others: int | None = None) -> tuple[float, float]:
        """The dense body (the lm_head's weights left out) and the routed experts of one
        forward pass over `tokens` tokens, ms (see `linear_parts`)."""
        bandwidth = self._bandwidth()
        plain_rate, quantized_rate = self._gemm_rates()
        body, plain = self._linear_params()
        experts = min(self.expert_active_params_per_gpu, body - plain)
        # the layers that meet every group's tokens multiply this GPU's share of them
        share = self.gathered(tokens, others) / self.attention_dp
        gathered = min(self.gathered_params_per_gpu, body - plain - experts)
        body_ms = gemm.overlapped_ms(
            gemm.read_ms(self.dense_weights_bytes - self._head_bytes(), bandwidth)
            * self.memory_scale,
            gemm.compute_ms(plain, tokens, plain_rate)
            + gemm.compute_ms(body - plain - experts - gathered, tokens, quantized_rate)
            + gemm.compute_ms(gathered, share, quantized_rate),
        ) * self.mid_m_slowdown(self.gemm_kind, tokens)
        body_ms += self.dequant_ms(tokens)
        experts_ms = 0.0
        if self.num_experts:
            experts_ms = gemm.overlapped_ms(
                gemm.read_ms(
                    self.expert_weights_bytes(tokens, others), bandwidth * self.moe_stream_scale
                )
                * self.memory_scale,
                gemm.compute_ms(experts, share, quantized_rate * self.moe_gemm_scale),
            )
        return body_ms, experts_ms

    def mid_m_slowdown(self, kind: str, tokens: int) -> float:
        """The family's factor on a dense GEMM of `kind` over `tokens` tokens (1 where it
        has none: NVIDIA, an engine not on the measured kernels, decode and long prefill)."""
        family = self.family
        if family is None or kind not in family.mid_m_slowdown or self.engine not in MID_M_ENGINES:
            return 1.0
        return slowdown_at(family.mid_m_slowdown[kind], tokens)

    def dequant_ms(self, tokens: int) -> float:
        """The unfused dequantization passes over `tokens` tokens' outputs, ms: separate
        elementwise kernels after each GEMM, so they add to it."""
        moved_bytes = tokens * self.dequant_bytes_per_token
        return gemm.read_ms(moved_bytes, self._bandwidth()) * self.memory_scale

    def gemm(self, tokens: int, sampled: int | None = None) -> tuple[int, float, float]:
        """Weights read, their memory time and the GEMM compute time for `tokens` tokens in one
        forward pass (ms): the linear layers run once over every token of the step, the lm_head
        only over the `sampled` ones (default: all; a prompt token samples nothing)."""
        expert_bytes = self.expert_weights_bytes(tokens)
        weights = self.dense_weights_bytes + expert_bytes
        memory_ms = (
            gemm.read_ms(self.dense_weights_bytes, self._bandwidth())
            + gemm.read_ms(expert_bytes, self._bandwidth() * self.moe_stream_scale)
        ) * self.memory_scale
        rate, quantized_rate = self._gemm_rates()
        body, plain = self._linear_params()
        experts = min(self.expert_active_params_per_gpu, body - plain) if self.num_experts else 0
        compute_ms = gemm.compute_ms(body - plain - experts, tokens, quantized_rate)
        compute_ms += gemm.compute_ms(experts, tokens, quantized_rate * self.moe_gemm_scale)
        # the layers the checkpoint left in 16 bits, and the lm_head, at the 16-bit rate
        compute_ms += gemm.compute_ms(plain, tokens, rate)
        head_tokens = tokens if sampled is None else sampled
        compute_ms += gemm.compute_ms(self.lm_head_params_per_gpu, head_tokens, rate)
        return weights, memory_ms, compute_ms

    def moe_fixed_ms(
        self, tokens: int, others: int | None = None, experts_ms: float | None = None
    ) -> float:
        """The MoE layers' routing kernels and their idle local experts' early exits for a
        step of `tokens` tokens (the other attention groups bringing `others`), ms. A GPU's
        idle experts are its local ones less those the step routes to (under expert
        parallelism, its share of them); a routed expert whose share of the experts' time
        (`experts_ms`, the routed experts' term of `linear_parts`) is shorter than an exit
        costs the exit (moe.routing_ms)."""
        if not self.num_experts or not self.moe_layers or tokens <= 0:
            return 0.0
        local = self.experts_per_gpu or self.num_experts
        routed = local * self.experts_routed(tokens, others) / self.num_experts
        if experts_ms is None:
            experts_ms = self.linear_parts(tokens, others=others)[1]
        each_ms = experts_ms / (self.moe_layers * routed) if routed > 0 else 0.0
        return moe.routing_ms(
            self.moe_layers,
            local - routed,
            self.moe_kernel_ms_per_layer,
            self.moe_ms_per_idle_expert,
            routed,
            each_ms,
        )

    def collectives_ms(self, tokens: int, decode: bool = True) -> float:
        """Every collective of one forward pass over `tokens` tokens, ms."""
        return self.allreduce_ms(tokens, decode=decode) + self.all_to_all_ms(tokens, decode)

    def _all_to_all(self) -> bool:
        return self.moe_all_to_all and self.moe_layers > 0

    def allreduce_ms(self, tokens: int, others: int | None = None, decode: bool = True) -> float:
        """TP all-reduces of one forward pass over `tokens` tokens (two per layer, three where
        the q / k norms span every head: `qk_norm_allreduce`, a latency-bound one), ms. Under
        data-parallel attention the one after attention spans the attention TP group, and the
        FFN / MoE half gathers every group's tokens (`gathered`) over the MoE ranks and
        scatters them back (`gather_ms`: vLLM's all-gather + reduce-scatter, SGLang's two
        all-reduces), except in the MoE layers that run DeepEP (`all_to_all_ms`). Each
        collective runs at its group's rate over the fabric (comm.Fabric)."""
        message = tokens * self.hidden_size * self.activation_bytes
        cost, link = self.allreduce, self.fabric
        all_to_all = self._all_to_all()
        per_layer = comm.ALLREDUCES_PER_LAYER  # allreduce_ms counts two a layer
        norms = 0.0
        if self.qk_norm_allreduce:
            sums = tokens * comm.QK_NORM_SUMS_BYTES_PER_TOKEN
            norms = comm.allreduce_ms(self.tp, self.layers, sums, cost, link) / per_layer
        if self.attention_dp == 1 and self._moe_ranks() == self.tp and not all_to_all:
            return comm.allreduce_ms(self.tp, self.layers, message, cost, link) + norms
        attention = comm.allreduce_ms(self.tp, self.layers, message, cost, link) / per_layer
        gathered = self.gathered(tokens, others) * self.hidden_size * self.activation_bytes
        if self.engine == "sglang":
            # its dense FFNs span every GPU too: every layer gathers, or (DeepEP) the dense ones
            gathering = self.layers - self.moe_layers if all_to_all else self.layers
        else:
            # vLLM's data-parallel ranks run their dense layers alone: the MoE layers gather,
            # unless DeepEP carries their tokens
            gathering = 0 if all_to_all else self.moe_layers
        return attention + self.gather_ms(gathering, gathered, decode) + norms

    def gather_ms(self, layers: int, message_bytes: int, decode: bool = True) -> float:
        """The way of every group's tokens (`message_bytes` in all) to the FFN / MoE half of
        `layers` layers and back, ms. vLLM all-gathers them and reduce-scatters the outputs
        through NCCL (its all2all manager's all_gatherv / reduce_scatterv): one all-reduce's
        traffic, each call at NCCL's latency where the family's tables give it
        (Family.nccl_latency; else one all-reduce's cost stands for the pair). SGLang pads
        every group's rows into one buffer, gathers it with an all-reduce and sums the FFN's
        output with another in a step with prompt tokens (DpPaddingMode.SUM_LEN,
        layers/dp_attention.py, 0.5.4+), and in decode steps where `sglang_decode_sum_len`
        says so while its custom all-reduce holds the buffer (SGLANG_DECODE_SUM_LEN_MAX_BYTES)
        and no MoE all-to-all runs; its other decode steps pad to the longest group and
        all-gather and reduce-scatter through NCCL (MAX_LEN, the mode its CUDA graphs
        capture), as vLLM's."""
        ranks, link, cost = self._moe_ranks(), self.fabric, self.allreduce
        sum_len_decode = (
            self.sglang_decode_sum_len
            and not self._all_to_all()
            and message_bytes <= SGLANG_DECODE_SUM_LEN_MAX_BYTES
        )
        if self.engine == "sglang" and (not decode or sum_len_decode):
            return comm.allreduce_ms(ranks, layers, message_bytes, cost, link)
        nccl = self.family.nccl_latency if self.family else None
        if nccl is not None:
            cost = cost.model_copy(
                update={"fixed_ms": 2 * nccl.fixed_ms, "hop_ms": 2 * nccl.hop_ms}
            )
        pair = comm.allreduce_ms(ranks, layers, message_bytes, cost, link)
        return pair / comm.ALLREDUCES_PER_LAYER  # allreduce_ms counts two a layer

    def all_to_all_ms(self, tokens: int, decode: bool = True) -> float:
        """DeepEP's dispatch and combine in every MoE layer (wide expert parallelism),
        each GPU sending its share of its group's `tokens`, ms; zero elsewhere. A decode step
        runs the low-latency kernels, a step with prompt tokens the normal ones (SGLang's
        --deepep-mode auto), inside one NVLink fabric at the costs NVIDIA's tables give them
        (Family.deepep_in_fabric); MoRI's run the normal pattern in every step, each kernel
        with its fixed cost (Family.mori_kernel_ms)."""
        if not self._all_to_all():
            return 0.0
        per_rank = -(-tokens // self.tp)
        deepep = self.all_to_all_kernels == "deepep"
        mori_ms = self.family.mori_kernel_ms if self.family else comm.MORI_KERNEL_MS
        return self.moe_layers * comm.deepep_ms(
            per_rank,
            self.experts_per_token,
            self.hidden_size,
            self._moe_ranks(),
            self.fabric,
            low_latency=decode and deepep,
            kernel_ms=0.0 if deepep else mori_ms,
            in_fabric=self.family.deepep_in_fabric if deepep and self.family else None,
        )

    def logits_ms(self, sampled: int) -> float:
        """The sampler's GPU work over `sampled` positions, ms: the lm_head's vocabulary
        columns all-gathered across the TP group (one collective: the other ranks' columns on
        each GPU's link) and the greedy sampler's fp32 cast and argmax over
        the whole vocabulary (planner.core.step.sampler)."""
        vocab = self.model.vocab_size or 0
        if sampled <= 0 or vocab <= 0:
            return 0.0
        read_ms = gemm.read_ms(sampler.greedy_bytes(sampled, vocab), self._bandwidth())
        passes = read_ms * self.memory_scale
        ranks, scored = self.tp, sampled
        if self.attention_dp > 1 and self.engine == "sglang" and not self.dp_lm_head:
            # SGLang's lm_head spans every GPU (unless --enable-dp-lm-head): each scores every
            # group's gathered tokens on its share of the vocabulary and the logits are
            # all-gathered over all of them before each group keeps its own (LogitsProcessor's
            # dp_gather_replicate and dp_scatter, 0.5.13)
            ranks, scored = self.tp * self.attention_dp, self.gathered(sampled)
        received = sampler.gather_bytes(scored, vocab, ranks)
        if received <= 0:
            return passes
        return passes + comm.collective_ms(ranks, received, self.allreduce, self.fabric)

    def kv_read_ms(self, kv_bytes: int) -> float:
        """Decode attention: reading `kv_bytes` of cache at the family's attention share of
        the bandwidth (never above the peak, whatever share the weights are given), ms."""
        rate = min(self._bandwidth() * self.attention_bandwidth_scale, self.bandwidth_bytes_per_s)
        return gemm.read_ms(kv_bytes, rate) * self.memory_scale

    def decode_attention_ms(self, kv_bytes: int, queries: float = 1.0) -> float:
        """Decode attention over `kv_bytes` of cache, ms: its read, or the absorbed MLA
        kernels' multiply where that takes longer (many query heads on one GPU; `queries`
        tokens a sequence, 1 + drafts when verifying speculation, multiply more rows)."""
        read_ms = self.kv_read_ms(kv_bytes)
        if self.mla_flops_per_kv_byte <= 0 or self.mla_flops_per_s <= 0:
            return read_ms
        rows = attention.mla_rows(self.mla_query_heads, queries)
        extra = rows / attention.mla_rows(self.mla_query_heads, 1.0)
        multiply_ms = kv_bytes * self.mla_flops_per_kv_byte * extra / self.mla_flops_per_s * 1e3
        return max(read_ms, multiply_ms)

    def chunk_pairs(self, cached: int, chunk: int) -> float:
        """The (query, key) pairs a prefill chunk of `chunk` tokens after `cached` ones costs,
        as pairs of a full-attention layer: sliding-window layers count only the keys inside
        their window, weighted by their share of the attention FLOPs."""
        full = attention.causal_pairs(cached, chunk)
        total = self.attention_flops_per_pair
        if not self.window_flops_per_pair or total <= 0:
            return full
        windowed = sum(f for _, f in self.window_flops_per_pair)
        capped = sum(
            f * attention.causal_pairs(cached, chunk, w) for w, f in self.window_flops_per_pair
        )
        return ((total - windowed) * full + capped) / total

    def prefill_attention_ms(self, pairs: float, tokens: int = 0) -> float:
        """Prefill attention over `pairs` (query, key) pairs (causal) of `tokens` prompt
        tokens, ms: at the 16-bit rate whatever the weights' dtype (the attention kernels
        multiply 16-bit queries and keys), at the share the mean keys a query sees (pairs /
        tokens) reach where the family's share grows with them."""
        share = self.attention_flops_efficiency
        if tokens > 0 and pairs > 0:
            share = attention.length_share(share, self.attention_half_keys, pairs / tokens)
        rate = (self.plain_flops_per_s or self.flops_per_s) * share
        return attention.prefill_ms(pairs, self.attention_flops_per_pair, rate)

    def step_overhead_ms(self, seqs: int) -> float:
        """The engine's own time in a step of `seqs` sequences, ms: its fixed overhead and the
        scheduler's serial work per sequence."""
        return self.overhead_ms + self.host_ms_per_seq * seqs

    def scheduler_floor_ms(self, seqs: int) -> float:
        """The scheduler's work for a step of `seqs` sequences where it runs beside the GPU,
        ms: the step ends no sooner than the next one is ready."""
        return self.overlapped_host_ms_per_seq * seqs

    def streamed_ms(self, seqs: int) -> float:
        """Streaming one token to each of `seqs` sequences, ms: the API server and, in a
        benchmark, its client work in parallel, and the slower one sets the pace."""
        client_ms = self.client_ms_per_token / self.stream_interval
        return max(self.frontend_ms_per_token, client_ms) * seqs

    def launched(self, gpu_ms: float, tokens: int, prompt_tokens: int) -> float:
        """One stage's time for a step of `tokens` tokens (`prompt_tokens` of them prompt)
        whose GPU work takes `gpu_ms`: outside the engine's CUDA graphs the host launches its
        kernels one by one, and the GPU cannot finish before the last is launched."""
        if self.eager_launch_ms and self.graphs.eager(tokens, prompt_tokens):
            return max(gpu_ms, self.eager_launch_ms)
        return gpu_ms

    def _pipelined(self, stage_ms: float, overhead_ms: float) -> float:
        return comm.pipelined_ms(stage_ms, overhead_ms, self.pp, self.pp_hop_ms)

    def _overlapped(
        self,
        work_ms: float,
        kernels_ms: float,
        all_to_all_ms: float,
        tokens: int,
        decode_only: bool = True,
    ) -> tuple[float, float]:
        """The kernels' fixed cost and the all-to-all time a step shows: under two-batch
        overlap (SGLang --enable-two-batch-overlap, vLLM --enable-dbo) a batch of enough
        tokens (overlap_min_tokens) runs as two halves, each launching every kernel, one half's
        dispatch and combine under the other half's linear layers and attention."""
        least = self.overlap_min_tokens[0 if decode_only else 1]
        if not self.overlap_all_to_all or all_to_all_ms <= 0 or tokens < least:
            return kernels_ms, all_to_all_ms
        return 2 * kernels_ms, max(0.0, all_to_all_ms - work_ms)

    def token_parts(
        self,
        decode_seqs: int,
        prefill_tokens: int,
        sampled: int | None = None,
        others: int | None = None,
        cache: PartsCache | None = None,
    ) -> TokenParts:
        """The terms of a step that depend on its token counts alone (see `mixed_ms`);
        `cache`: a caller's PartsCache (the terms of the step's tokens and of its sampled
        positions, met again by steps of other mixes)."""
        streamed_ms = self.streamed_ms(decode_seqs)
        scheduler_ms = self.scheduler_floor_ms(decode_seqs)
        sampled = decode_seqs if sampled is None else sampled
        if self.pp > 1:  # one micro-batch's share of the step, through every stage
            decode_seqs = ceil_div(decode_seqs, self.pp)
            prefill_tokens = ceil_div(prefill_tokens, self.pp)
            sampled = ceil_div(sampled, self.pp)
            others = None if others is None else ceil_div(others, self.pp)
        tokens = decode_seqs + prefill_tokens
        if tokens <= 0:
            return TokenParts(tokens=0)
        key = (tokens, others, prefill_tokens == 0)
        by_tokens = cache.tokens.get(key) if cache is not None else None
        if by_tokens is None:
            by_tokens = self._token_terms(tokens, others, prefill_tokens == 0)
            if cache is not None:
                cache.tokens[key] = by_tokens
        by_sampled = cache.sampled.get(sampled) if cache is not None else None
        if by_sampled is None:
            by_sampled = (self.head_ms(sampled), self.logits_ms(sampled))
            if cache is not None:
                cache.sampled[sampled] = by_sampled
        body_ms, experts_ms, fixed_ms, all_to_all_ms, allreduce_ms = by_tokens
        head_ms, logits_ms = by_sampled
        return TokenParts(
            tokens=tokens,
            streamed_ms=streamed_ms,
            scheduler_ms=scheduler_ms,
            own_ms=self.step_overhead_ms(decode_seqs),
            linear_ms=body_ms + experts_ms + head_ms,
            fixed_ms=fixed_ms,
            all_to_all_ms=all_to_all_ms,
            allreduce_ms=allreduce_ms,
            logits_ms=logits_ms,
        )

    def _token_terms(
        self, tokens: int, others: int | None, decode: bool
    ) -> tuple[float, float, float, float, float]:
        """The terms fixed by a micro-batch's token count: the dense body, the routed experts,
        the fixed kernels (MoE routing included), the all-to-all and the all-reduces, ms."""
        body_ms, experts_ms = self.body_parts(tokens, others)
        moe_ms = self.moe_fixed_ms(tokens, others, experts_ms)
        return (
            body_ms,
            experts_ms,
            self.layers * self.kernel_ms_per_layer + moe_ms,
            self.all_to_all_ms(tokens, decode=decode),
            self.allreduce_ms(tokens, others, decode=decode),
        )

    def mixed_ms(
        self,
        decode_seqs: int,
        decode_kv_bytes: int,
        prefill_tokens: int,
        prefill_pairs: float,
        sampled: int | None = None,
        parts: PartsCache | None = None,
        others: int | None = None,
    ) -> float:
        """One engine step: `decode_seqs` decode tokens reading `decode_kv_bytes` of KV, plus
        `prefill_tokens` prompt tokens whose attention spans `prefill_pairs` pairs. The linear
        layers see every token once (their dense body, routed experts and lm_head each memory-
        or compute-bound); attention is its own kernel and adds; then kernels, all-reduce and
        the engine's overhead. `sampled`: the positions the lm_head scores (default: one per
        decoding sequence; speculative verification scores every drafted one too). `parts`:
        a caller's PartsCache of `token_parts` by token counts (a simulation meets the same
        counts many times). `others`: under data-parallel attention, the tokens the other groups
        bring to the MoE layers in this step (None: as many as this group's each)."""
        key = (decode_seqs, prefill_tokens, sampled, others)
        got = parts.steps.get(key) if parts is not None else None
        if got is None:
            got = self.token_parts(decode_seqs, prefill_tokens, sampled, others, parts)
            if parts is not None:
                parts.steps[key] = got
        if got.tokens <= 0:
            return 0.0
        prefill_ms = self.prefill_attention_ms(prefill_pairs, prefill_tokens)
        if self.pp > 1:  # one micro-batch's share of the step, through every stage
            decode_kv_bytes = ceil_div(decode_kv_bytes, self.pp)
            prefill_ms = prefill_ms / self.pp
        queries = sampled / decode_seqs if sampled and decode_seqs else 1.0
        decode_ms = self.decode_attention_ms(decode_kv_bytes, queries)
        work_ms = got.linear_ms + decode_ms + prefill_ms
        kernels_ms, all_to_all_ms = self._overlapped(
            work_ms, got.fixed_ms, got.all_to_all_ms, got.tokens, prefill_tokens == 0
        )
        stage_ms = self.launched(
            work_ms + kernels_ms + got.allreduce_ms + all_to_all_ms, got.tokens, prefill_tokens
        )
        engine_ms = self._pipelined(stage_ms + got.own_ms, got.own_ms)
        # the last stage samples each micro-batch once, after its trip through the stages
        return max(engine_ms + got.logits_ms, got.streamed_ms, got.scheduler_ms)

    def terms(self, batch: int, context: int) -> StepTerms:
        """Every term of one decode step of `batch` sequences at `context` tokens (under
        pipeline parallelism the terms are one stage's for one micro-batch of batch / pp; the
        step is the token's whole trip through the stages)."""
        micro = ceil_div(batch, self.pp)
        experts = self.experts_read(micro)
        weights, weights_ms, compute_ms = self.gemm(micro)
        body_ms, experts_ms, head_ms = self.linear_parts(micro)
        linear_ms = body_ms + experts_ms + head_ms
        kv = micro * self.kv_bytes(context)
        attention_ms = self.decode_attention_ms(kv)
        memory_ms = weights_ms + attention_ms
        kernels_ms, all_to_all_ms = self._overlapped(
            linear_ms + attention_ms,
            self.layers * self.kernel_ms_per_layer + self.moe_fixed_ms(micro, None, experts_ms),
            self.all_to_all_ms(micro),
            micro,
        )
        allreduce_ms = self.allreduce_ms(micro)
        step = self.launched(
            linear_ms + attention_ms + kernels_ms + allreduce_ms + all_to_all_ms, micro, 0
        )
        own_ms = self.step_overhead_ms(micro)
        streamed_ms = self.streamed_ms(batch)
        logits_ms = self.logits_ms(micro)
        scheduler_ms = self.scheduler_floor_ms(batch)
        step = max(self._pipelined(step + own_ms, own_ms) + logits_ms, streamed_ms, scheduler_ms)
        return StepTerms(
            batch=batch,
            context_tokens=context,
            weights_read_bytes=weights,
            kv_read_bytes=kv,
            memory_ms=memory_ms,
            attention_ms=attention_ms,
            compute_ms=compute_ms,
            linear_ms=linear_ms,
            dense_linear_ms=body_ms,
            dequant_ms=self.dequant_ms(micro),
            experts_ms=experts_ms,
            lm_head_ms=head_ms,
            logits_ms=logits_ms,
            kernels_ms=kernels_ms,
            allreduce_ms=allreduce_ms,
            all_to_all_ms=all_to_all_ms,
            overhead_ms=own_ms,
            frontend_ms=streamed_ms,
            scheduler_ms=scheduler_ms,
            step_ms=step,
            experts_read_per_layer=experts if self.num_experts else None,
        )

    def step_ms(self, batch: int, context: int) -> float:
        """t(B, ctx) in ms."""
        return self.terms(batch, context).step_ms


def gemm_kind(model: ModelSpec, own: bool, quantized_rate: bool) -> str:
    """The weights' GEMM kind: the checkpoint's own block-scaled fp8, another fp8 / fp4 rate,
    or 16-bit."""
    if not quantized_rate:
        return "bf16"
    return "fp8-block" if own and model.fp8_block_scaled else "fp8"


def moe_gemm_kind(
    model: ModelSpec,
    weight_dtype: str,
    own: bool,
    quantized_rate: bool,
    mxfp8: bool = False,
    fp4_rate: bool = False,
) -> str:
    """The routed experts' GEMM kind: MXFP4 with 16-bit activations ("mxfp4"), with MXFP8 ones
    where an NVIDIA engine quantizes them (`mxfp8`), with FP8 ones at the fp8 rate (AMD's
    exports on AMD Instinct: `quantized_rate`) or MXFP4 ones at the fp4 rate (`fp4_rate`:
    w4a4, kind fp4), and FP4 (w4a4) beside the dense kinds (gemm_kind)."""
    dtype = weight_dtype.lower()
    if dtype.startswith(gemm.MXFP4_DTYPES):
        if mxfp8:
            return "mxfp4-mxfp8"
        if quantized_rate:
            return "fp4" if fp4_rate else "mxfp4-fp8"
        return "mxfp4"
    if dtype.startswith(gemm.FP4_DTYPES) and quantized_rate:
        return "fp4"
    return gemm_kind(model, own, quantized_rate)


def low_precision_scale(family: Family, model: ModelSpec, own: bool, weight_dtype: str) -> float:
    """The share of an fp8 / fp4 rate the linear layers reach relative to 16-bit GEMMs' share
    of theirs: the family's block-scaled figure for a checkpoint's own block-scaled fp8 (an
    online re-quantization scales per tensor), its FP4 figure for w4a4 weights."""
    if own and model.fp8_block_scaled and family.block_fp8_scale is not None:
        return family.block_fp8_scale
    if weight_dtype.lower().startswith(gemm.FP4_DTYPES) and family.fp4_scale is not None:
        return family.fp4_scale
    return family.low_precision_scale


def moe_share_scale(family: Family, kind: str, width: int) -> float:
    """The routed experts' multiply relative to the dense GEMMs' share of the rate: the
    family's ceiling for the experts' kind, times width / (width + half) where its fused MoE
    kernels' share grows with the expert width each GPU holds (1 where nothing is known)."""
    ceiling = family.moe_gemm_scale.get(kind, 1.0)
    half = family.moe_half_width.get(kind)
    if half is None or width <= 0:
        return min(ceiling, 1.0)
    return min(ceiling * width / (width + half), 1.0)


def deepep_moe_scale(family: Family, kind: str, quantized_share: float) -> float | None:
    """The experts' multiply under DeepEP relative to the dense GEMMs' share of the rate: the
    share of the fp8 rate DeepGEMM's grouped GEMMs reach on block-scaled experts where NVIDIA's
    tables time them (Family.deepep_moe_fp8_share), over the dense fp8 GEMMs' modelled share;
    None elsewhere (the fused MoE kernels' share holds)."""
    share = family.deepep_moe_fp8_share
    if share is None or kind != "fp8-block":
        return None
    return share / (gemm.FLOPS_EFFICIENCY * family.compute_scale * quantized_share)


def moe_share_floored(family: Family, kind: str, width: int, bf16_over_quantized: float) -> float:
    """`moe_share_scale`, where per-tensor fp8 experts multiply no slower than the same experts
    in bf16 (`bf16_over_quantized`: the 16-bit rate over the fp8 one the share multiplies).
    Hopper's per-tensor fp8 share is the block-scaled kernels' (NVIDIA's tables time no other),
    which at twice the rate still multiply slower than bf16 below about 2,800 columns; a
    per-tensor fp8 expert reads half the bytes and scales its output once, with none of the
    block scaling's work, so it is taken as no slower than its bf16 form."""
    share = moe_share_scale(family, kind, width)
    if kind != "fp8":
        return share
    return max(share, moe_share_scale(family, "bf16", width) * bf16_over_quantized)


def allreduce_cost(
    family: Family, engine: str, version: tuple[int, int, int] | None, v0: bool = False
) -> comm.AllReduceCost:
    """One all-reduce's cost: the family's measured one (the custom all-reduce over NVLink,
    NCCL's over PCIe, the faster of RCCL and a peer-memory kernel over xGMI) in the engines
    that run such a kernel (CUSTOM_ALLREDUCE_ENGINES: vLLM's V1 engine, SGLang 0.4+; no
    release: the newest), else the per-peer hop fitted on vLLM V0's rows (`v0`: a 0.8 - 0.10
    release that falls back to V0 keeps it too)."""
    since = CUSTOM_ALLREDUCE_ENGINES.get(engine)
    if family.allreduce is None or since is None or (v0 and engine == "vllm"):
        return comm.AllReduceCost()
    if version is not None and version < since:
        return comm.AllReduceCost()
    return family.allreduce


def stored_expert_bytes_per_param(model: ModelSpec) -> float:
    """Bytes an expert parameter takes in the checkpoint. A mixed checkpoint, one that leaves
    some linear layers in its native dtype (ModelSpec.plain_linear_params: gpt-oss's MXFP4
    experts beside bf16 attention, an NVFP4 export's 16-bit layers), stores its quantized
    layers, the experts among them, in what the total leaves after every parameter it does not
    quantize takes its native bytes (gpt-oss-120b: 0.53 bytes, MXFP4's 4.25 bits); the checkpoint's
    mean bytes per parameter would price its experts at the 16-bit layers' cost as well and
    leave those layers almost nothing. Otherwise (one format throughout) the mean; a checkpoint
    that names its experts' own format (ModelOpt MIXED_PRECISION) that format's bytes."""
    if model.expert_bytes_per_param is not None:
        return model.expert_bytes_per_param
    mean = model.weights_bytes / max(model.params_total, 1)
    quantized = model.quantizable_params - model.plain_linear_params
    if not model.plain_linear_params or quantized <= 0 or model.expert_params > quantized:
        return mean
    native = DTYPE_BITS.get(model.native_dtype, 16) / 8
    per_param = (model.weights_bytes - native * (model.params_total - quantized)) / quantized
    return per_param if 0 < per_param <= mean else mean


def mla_flops_per_kv_byte(model: ModelSpec, tp: int, kv_dtype_bytes: int) -> float:
    """FLOPs the absorbed MLA decode kernels do per byte of KV cache a sequence reads (its
    per-token bytes on one GPU; a hybrid's fixed state is not counted)."""
    flops = attention.mla_decode_flops_per_token(model, tp)
    per_token = kv_bytes_per_sequence(model, 1, tp, kv_dtype_bytes)
    return flops / per_token if flops and per_token else 0.0


@dataclass(frozen=True)
class WeightSplit:
    """Where a model's stored weights sit on one GPU of a layout: its dense bytes (under
    SGLang's data-parallel attention the attention's at the attention TP, the rest over every
    MoE rank), one routed expert's bytes, the expert parameters a token activates, the dense
    parameters that multiply the gathered batch (SGLang's DP attention) and the embedding's."""

    dense_per_gpu: int
    expert_one: int
    expert_active: int
    gathered_params: int
    embedding_params: int


def weight_split(
    model: ModelSpec,
    weights_bytes: int | None,
    tp: int,
    pp: int,
    dp: AttentionDp,
    engine: str,
) -> WeightSplit:
    """The checkpoint's weights (or `weights_bytes` when re-stored) split for one GPU of TP
    `tp` x PP `pp` under data-parallel attention `dp` (AttentionDp says what SGLang keeps
    outside its groups)."""
    total = weights_bytes if weights_bytes is not None else model.weights_bytes
    vocab = model.vocab_size or 0
    # The input embedding is gathered (B rows), not read; a tied one is the lm_head as well,
    # read whole every step like the untied lm_head that stays in the dense weights.
    embedding = (
        0 if model.tied_embeddings else bytes_for_elements(vocab * model.hidden_size, "bf16")
    )
    embedding_params = vocab * model.hidden_size
    expert_all = 0
    expert_one = 0
    scale = total / max(model.params_total, 1)  # bytes per parameter as stored
    if model.expert_params:
        per_param = scale if weights_bytes is not None else stored_expert_bytes_per_param(model)
        expert_one = round(model.expert_params // (model.num_experts or 1) * per_param)
        expert_all = expert_one * (model.num_experts or 0)
    dense = max(total - embedding - expert_all, 0)
    dense_per_gpu = ceil_div(dense, tp * pp)
    expert_active = (
        model.expert_params // model.num_experts * (model.experts_per_token or 0)
        if model.expert_params and model.num_experts
        else 0
    )
    gathered_params = 0
    attention_dp = dp.groups
    if attention_dp > 1 and engine == "sglang":
        # the dense weights' own bytes per parameter (a mixed checkpoint keeps them in 16 bits)
        untied = 0 if model.tied_embeddings else embedding_params
        dense_params = model.params_total - model.expert_params - untied
        dense_scale = dense / max(dense_params, 1) if model.expert_params else scale
        attention_bytes = min(dense, round(model.attention_params * dense_scale))
        mlp_bytes = round(model.dense_mlp_params * dense_scale) if dp.dense_mlp_replicated else 0
        # an untied lm_head (the same bytes as the input embedding, which `dense` leaves out)
        head_bytes = embedding if dp.dp_lm_head else 0
        spread = max(0, dense - attention_bytes - mlp_bytes - head_bytes)
        dense_per_gpu = (
            ceil_div(attention_bytes + head_bytes, tp * pp)
            + ceil_div(spread, tp * attention_dp * pp)
            + ceil_div(mlp_bytes, pp)
        )
        # the dense FFNs and shared experts run on the gathered batch, over every GPU
        untied = 1 if model.tied_embeddings else 2
        outside = model.params_active - untied * embedding_params - model.attention_params
        gathered_params = max(0, outside - expert_active) // (tp * pp)
    return WeightSplit(dense_per_gpu, expert_one, expert_active, gathered_params, embedding_params)


def _not_on_record(gpu: GpuSpec) -> Exception:
    """The error for a card the catalog holds no bandwidth or tensor-core rate for."""
    from planner.errors import InputError

    return InputError("--gpu", f"{gpu.id} has no bandwidth/FLOPs on record")


@dataclass(frozen=True)
class ExpertLayout:
    """How a MoE model's experts sit on the GPUs of one instance: the ranks its MoE layers
    span, whether tokens reach them by an all-to-all (DeepEP's or MoRI's), the whole experts
    each GPU holds under expert parallelism (0 without) and the width of an expert each GPU
    multiplies (whole under expert parallelism, else split over the MoE ranks)."""

    moe_ranks: int
    all_to_all: bool
    local_experts: int
    width_per_gpu: int

    @classmethod
    def of(
        cls, model: ModelSpec, gpu: GpuSpec, engine: str, moe_ranks: int, exchange: MoeExchange
    ) -> ExpertLayout:
        """The layout `exchange` asks for (an all-to-all where it says so, else where the
        planner plans one: parallel.deepep_wide); an all-to-all sets the EP size to the MoE
        ranks, and each GPU then holds (E + redundant experts) / EP whole experts."""
        wide = (
            deepep_wide(engine, bool(model.num_experts), moe_ranks, gpu.vendor)
            if exchange.all_to_all is None
            else exchange.all_to_all and bool(model.num_experts)
        )
        ep_size = moe_ranks if wide else (exchange.expert_ranks or 1)
        local = (
            ceil_div((model.num_experts or 0) + exchange.redundant_experts, ep_size)
            if ep_size > 1
            else 0
        )
        width = (model.moe_intermediate_size or 0) * ep_size // moe_ranks
        return cls(moe_ranks=moe_ranks, all_to_all=wide, local_experts=local, width_per_gpu=width)


@dataclass(frozen=True)
class GemmRates:
    """The tensor-core rates a model's linear layers run at on one GPU family: the rate of
    what they multiply (`flops`) beside the 16-bit one, the share of it quantized GEMMs reach,
    and the experts' kernel kind."""

    own: bool
    flops_per_s: float
    plain_flops_per_s: float
    family: Family
    moe_kind: str
    quantized_share: float

    @property
    def quantized(self) -> bool:
        """Whether the weights' GEMMs run above the 16-bit rate (fp8 / fp4)."""
        return self.flops_per_s > self.plain_flops_per_s

    @classmethod
    def of(cls, model: ModelSpec, gpu: GpuSpec, engine: str, weight_dtype: str | None) -> GemmRates:
        """The rates for the checkpoint's own format, or `weight_dtype` re-quantized."""
        # the checkpoint's own quantization leaves some layers in 16 bits (an online or
        # variant re-quantization is taken to cover every linear layer)
        own = weight_dtype is None or weight_dtype == model.weight_dtype
        dtype = weight_dtype or model.weight_dtype
        # the rate of what the tensor cores multiply: a re-quantization asked for, else the
        # checkpoint's own format (an FP8 checkpoint runs its GEMMs at the fp8 rate; OpenAI's
        # MXFP4 is weight-only on every vendor, an MXFP4 variant of another checkpoint named
        # on AMD is AMD's activation-quantized export)
        weight_only = gemm.weight_only_mxfp4(model.weight_dtype, weight_dtype)
        flops = gemm.gemm_flops_per_s(gpu, dtype, weight_only)
        plain_rate = gemm.gemm_flops_per_s(gpu, None)
        family = family_of(gpu)
        # MXFP4 experts an engine multiplies with MXFP8 activations run at the fp8 rate
        mxfp8 = bool(
            engine in family.mxfp8_moe_engines
            and dtype.lower().startswith(gemm.MXFP4_DTYPES)
            and gpu.fp8_dense_flops
        )
        if mxfp8:
            flops = float(gpu.fp8_dense_flops or flops)
        if not flops:
            raise _not_on_record(gpu)
        moe_kind = moe_gemm_kind(
            model,
            dtype,
            own,
            flops > plain_rate,
            mxfp8,
            fp4_rate=bool(gpu.fp4_dense_flops) and flops == gpu.fp4_dense_flops,
        )
        # the weights' GEMMs at an fp8 / fp4 rate reach less of it than 16-bit ones of theirs
        # (the checkpoint's own block-scaled fp8 less again on some families)
        share = low_precision_scale(family, model, own, dtype) if flops > plain_rate else 1.0
        return cls(
            own=own,
            flops_per_s=float(flops),
            plain_flops_per_s=float(plain_rate),
            family=family,
            moe_kind=moe_kind,
            quantized_share=share,
        )


def step_time_for(
    model: ModelSpec,
    gpu: GpuSpec,
    *,
    tp: int = 1,
    weights_bytes: int | None = None,
    weight_dtype: str | None = None,
    kv_dtype_bytes: int = 2,
    engine: str = "vllm",
    version: tuple[int, int, int] | None = None,
    pp: int = 1,
    dp: AttentionDp = NO_ATTENTION_DP,
    exchange: MoeExchange = ENGINE_DEFAULT_EXCHANGE,
    async_scheduling: bool | None = None,
    stream_interval: int = 1,
    graphs: Graphs = ALL_GRAPHED,
    v0: bool = False,
) -> StepTime:
    """The step-time model of `model` on one GPU of a TP group (weights: the checkpoint's, or
    `weights_bytes` when re-stored); with `pp` stages, of one stage (its share of the layers,
    their weights and KV), the stages joined over the link between nodes.

    `dp`: data-parallel attention (AttentionDp), `tp` being each group's TP size and the MoE
    layers spanning tp x dp.groups GPUs.

    The MoE layers' `exchange`: DeepEP's (or MoRI's) all-to-all where it says so (else where
    the planner plans it, parallel.deepep_wide), half-batches overlapping it where it asks.
    Under expert parallelism (its expert_ranks > 1, or an all-to-all, which sets the EP size
    to the MoE ranks) each GPU holds (E + redundant experts) / EP whole experts.
    `async_scheduling`: vLLM's --async-scheduling as the engine resolved it (None:
    the release's default; for SGLang, False where its overlap scheduler is off);
    `stream_interval`: the engine's --stream-interval; `graphs`: the steps the engine replays
    CUDA graphs for (the others are floored at the host's launches); `v0`: vLLM runs its V0
    engine, a 0.8 - 0.10 release falling back to it (V0's overhead and scheduler time)."""
    attention_dp = dp.groups
    split = weight_split(model, weights_bytes, tp, pp, dp, engine)
    experts = ExpertLayout.of(model, gpu, engine, tp * attention_dp, exchange)
    moe_ranks, wide = experts.moe_ranks, experts.all_to_all
    local_experts, expert_width = experts.local_experts, experts.width_per_gpu
    fabric = comm.fabric_of(gpu, moe_ranks)  # the widest collective group (MoE ranks >= TP)
    bandwidth = gpu.hbm_bandwidth_bytes_per_s
    if not bandwidth:
        raise _not_on_record(gpu)
    rates = GemmRates.of(model, gpu, engine, weight_dtype)
    own, family = rates.own, rates.family
    flops, plain_rate = rates.flops_per_s, rates.plain_flops_per_s
    moe_kind, quantized_share = rates.moe_kind, rates.quantized_share
    plain = model.plain_linear_params if own else 0
    dequant = 0
    if gemm.unfused_rocm_dequant(engine, gpu, version, own):
        dequant = gemm.unfused_dequant_bytes_per_token(model.rowwise_fp8_outputs, tp, pp)
    efficiency = bandwidth_efficiency(gpu)
    moe_routing_ms, moe_idle_ms, moe_stream = moe_decode_costs(family, engine, moe_kind)
    dense_kind = gemm_kind(model, own, rates.quantized)
    mla_share = overhead.mla_layer_share(model)
    serial_host_ms, beside_host_ms = overhead.host_ms_per_seq(
        engine, version, pp, async_scheduling, v0
    )
    mla_ms = mla_layer_ms(family, dense_kind, kv_dtype_bytes) if mla_share else 0.0
    # the experts' multiply: DeepGEMM's under DeepEP where its tables time it, else the fused
    # MoE kernels' (the engine's own where measured)
    deepgemm = (
        deepep_moe_scale(family, moe_kind, quantized_share)
        if wide and exchange.kernels == "deepep"
        else None
    )
    moe_scale = deepgemm or moe_share_floored(
        engine_moe_family(family, engine),
        moe_kind,
        expert_width,
        plain_rate / (flops * quantized_share),
    )
    layout = f"TP {tp}" + (f" x PP {pp}" if pp > 1 else "")
    if attention_dp > 1:
        layout += f", attention DP {attention_dp} (MoE over {tp * attention_dp})"
    return StepTime(
        label=f"{model.name} on {gpu.id} x {layout} ({engine})",
        dense_weights_bytes=split.dense_per_gpu,
        expert_bytes=ceil_div(split.expert_one, moe_ranks * pp),
        num_experts=model.num_experts or 0,
        experts_per_token=model.experts_per_token or 0,
        expert_active_params_per_gpu=split.expert_active // (tp * pp),
        moe_layers=ceil_div(moe.moe_layers(model), pp) if split.expert_one else 0,
        model=model,
        kv_dtype_bytes=kv_dtype_bytes,
        active_params_per_gpu=max(1, model.params_active // (tp * pp)),
        bandwidth_bytes_per_s=float(bandwidth),
        bandwidth_efficiency=efficiency,
        flops_per_s=float(flops),
        plain_params_per_gpu=plain // (tp * pp),
        embedding_params_per_gpu=split.embedding_params
        * (1 if model.tied_embeddings else 2)
        // (tp * pp),
        lm_head_params_per_gpu=split.embedding_params // (tp * pp),
        plain_flops_per_s=float(plain_rate),
        flops_efficiency=gemm.FLOPS_EFFICIENCY * family.compute_scale,
        low_precision_scale=quantized_share,
        attention_flops_efficiency=(
            attention.ceiling_at(
                family.prefill_attention_ceilings, attention.prefill_head_dim(model)
            )
            if family.prefill_attention_ceilings
            else attention.ATTENTION_FLOPS_EFFICIENCY * family.compute_scale
        ),
        attention_half_keys=family.prefill_attention_half_keys,
        attention_bandwidth_scale=attention_bandwidth_scale(gpu)
        * (fp8_kv_scale(family, engine) if kv_dtype_bytes == 1 else 1.0),
        dequant_bytes_per_token=dequant,
        layers=ceil_div(model.num_layers, pp),
        kernel_ms_per_layer=family.kernel_ms_per_layer
        + family.gemm_floor_ms * overhead.gemm_launches_per_layer(model)
        + mla_ms * mla_share,
        mla_layer_ms=mla_ms,
        moe_kernel_ms_per_layer=moe_routing_ms
        + family.gemm_floor_ms * overhead.GEMMS_PER_MOE_BLOCK
        + (family.deepgemm_ms_per_local_expert * local_experts if deepgemm is not None else 0.0),
        moe_ms_per_idle_expert=moe_idle_ms,
        tp=tp,
        hidden_size=model.hidden_size,
        fabric=fabric,
        allreduce=allreduce_cost(ranks_family(family, gpu, moe_ranks), engine, version, v0),
        qk_norm_allreduce=model.qk_norm_spans_heads,
        overhead_ms=overhead.ENGINE_OVERHEAD_MS[overhead.engine_key(engine, version, v0)],
        host_ms_per_seq=serial_host_ms,
        overlapped_host_ms_per_seq=beside_host_ms,
        frontend_ms_per_token=overhead.frontend_ms_per_token(engine, version, stream_interval, v0),
        stream_interval=stream_interval,
        engine=engine,
        attention_flops_per_pair=attention.attention_flops_per_pair(model, tp) / pp,
        mla_flops_per_kv_byte=mla_flops_per_kv_byte(model, tp, kv_dtype_bytes),
        mla_query_heads=attention.mla_query_heads(model, tp),
        mla_flops_per_s=plain_rate * attention.MLA_DECODE_FLOPS_EFFICIENCY * family.compute_scale,
        window_flops_per_pair=tuple(
            (w, f / pp) for w, f in attention.window_flops_per_pair(model, tp)
        ),
        pp=pp,
        pp_hop_ms=comm.PP_HOP_MS if pp > 1 else 0.0,
        family=family,
        gemm_kind=dense_kind,
        moe_gemm_scale=moe_scale,
        deepgemm_experts=deepgemm is not None,
        sglang_decode_sum_len=engine == "sglang"
        and gpu.vendor == "nvidia"
        and (version or SGLANG_DECODE_SUM_LEN_SINCE) >= SGLANG_DECODE_SUM_LEN_SINCE,
        sglang_moe_shares=engine == "sglang" and moe_kind in family.sglang_moe_gemm_scale,
        expert_width_per_gpu=expert_width,
        moe_stream_scale=min(1.0, moe_stream.get(moe_kind, efficiency) / efficiency),
        attention_dp=attention_dp,
        moe_ranks=moe_ranks,
        gathered_params_per_gpu=split.gathered_params,
        moe_all_to_all=wide,
        all_to_all_kernels=exchange.kernels,
        dp_lm_head=dp.dp_lm_head and attention_dp > 1,
        experts_per_gpu=local_experts if model.num_experts else 0,
        overlap_all_to_all=exchange.two_batch_overlap and wide,
        overlap_min_tokens=exchange.overlap_min_tokens,
        graphs=graphs,
        eager_launch_ms=launch.launch_ms(model, tp, ceil_div(model.num_layers, pp)),
    )
