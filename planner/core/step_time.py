"""Decode step time t(B, context) from the bytes a step moves, the FLOPs it does and what the
engine adds, each term named (docs/method.md §3).

    t(B, ctx) = max(memory(B, ctx), compute(B)) + kernels + all-reduce(B) + engine overhead
    memory    = (weights read at B + B x KV bytes per sequence at ctx) / achievable bandwidth
    weights   = dense matrices + lm_head (the embedding table is gathered, B rows, not read)
                + MoE: the distinct experts B tokens route to, E x (1 - (1 - k/E)^B) per layer
    compute   = 2 x active parameters x B / (dense FLOP/s x efficiency)
    kernels   = layers x a fixed cost per layer (launch tails, norms, RoPE: present even in a
                CUDA graph)
    all-reduce= TP > 1: 2 per layer, each (TP - 1) x hop latency + bytes x 2 (TP - 1) / TP / link

Constants were fitted on public measurements (benchmarks/data/step-time.jsonl: LMDeploy on
A100, vLLM on H100 and A100, with sources) and checked against an ideal-step floor measured on
an H200; benchmarks/step_time.py prints the errors.
"""

from __future__ import annotations

import math
import re
from statistics import NormalDist

from pydantic import BaseModel, ConfigDict, Field

from planner.core.kv import kv_bytes_per_sequence
from planner.core.specs import GpuSpec, ModelSpec
from planner.units import bytes_for_elements, ceil_div

# Achievable share of peak HBM bandwidth in decode GEMVs and attention, by vendor: NVIDIA 0.75
# fitted on the 38 public rows (LMDeploy A100 Llama-2 7B/13B, vLLM H100 Qwen3-8B, vLLM A100
# Mixtral-8x22B TP 4/8); AMD 0.60 is an assumption (ROCm kernels run further from peak; no
# public row yet). A GPU's own measured figure (`GpuSpec.achievable_bandwidth_fraction`) wins.
VENDOR_BANDWIDTH_EFFICIENCY = {"nvidia": 0.75, "amd": 0.60}
DEFAULT_BANDWIDTH_EFFICIENCY = 0.70  # other vendors: between the two, an assumption
# Achievable share of dense peak FLOPs in decode GEMMs (an assumption, as before).
FLOPS_EFFICIENCY = 0.5
# Fixed cost per decoder layer per step: kernel launch and tail latency of the ~10 kernels a
# layer runs (norms, RoPE, attention, activations), present even inside a CUDA graph. 17 us
# fits the public rows and puts the H200 ideal floor (Llama-3.1-8B, 5.36 ms at B=1) exactly.
KERNEL_MS_PER_LAYER = 0.017
# One-shot all-reduce latency per peer (each rank reads every other rank's buffer: latency
# grows with TP - 1), fitted on the vLLM Mixtral-8x22B TP 4 and TP 8 rows (A100, NVLink).
ALLREDUCE_HOP_MS = 0.008
# Link bandwidth when the catalog names none (PCIe Gen4 x16, one direction).
DEFAULT_LINK_BYTES_PER_S = 32e9
# Per-step engine overhead not hidden behind the GPU (scheduling, sampling, input prep), ms,
# fitted per engine on the public rows: vLLM's V1 engine overlaps most of it (async
# scheduling); V0 (before 0.8) and SGLang's Python scheduler add more; LMDeploy's C++
# TurboMind little. SGLang's figure is an assumption between the two vLLM engines.
ENGINE_OVERHEAD_MS = {"vllm": 0.2, "vllm-v0": 0.5, "sglang": 0.35, "lmdeploy": 0.2}
# Tokens per step at which MoE expert activation is reported as saturated (all experts read).
SATURATED_EXPERT_SHARE = 0.999
# A MoE layer launches kernels a dense one does not: the router GEMM, top-k softmax, the token
# sort / block alignment of fused MoE and the weighted combine (vLLM fused_moe.py: 4 kernels
# beside the two grouped GEMMs), 30 us per MoE layer at the 4-9 us a kernel costs in
# KERNEL_MS_PER_LAYER above. The alignment kernel walks every local expert and the grouped
# GEMMs launch a grid over all of them (most blocks exit at once when few tokens route), so
# part of the cost grows with the experts on the GPU: 0.5 us per local expert, an estimate
# that puts Qwen3-30B-A3B (128 experts) at batch 1 on an A100 near its published 9.7 ms and
# MiniMax-M2.7 (256 experts) at concurrency 1 on 2 x MI300X near the 14.9 ms of SGLang PR
# 31044 (benchmarks/data/e2e.jsonl), while the Mixtral-8x22B rows (8 experts) of
# benchmarks/data/step-time.jsonl barely move.
MOE_KERNEL_MS_PER_LAYER = 0.03
MOE_MS_PER_LOCAL_EXPERT = 0.0005
# Achievable share of dense peak FLOPs in prefill attention (FlashAttention-2 reaches 50-73% of
# A100 peak in its paper's forward benchmarks, Dao 2023, fig. 4; FA3 ~75% on H100): the lower
# end, since varlen chunks of mixed lengths run below the paper's fixed-shape figures.
ATTENTION_FLOPS_EFFICIENCY = 0.5
# FLOPs per (query, key) pair per head and head-dimension unit: Q.K^T and P.V are one
# multiply-add each per dimension (2 FLOPs each).
ATTENTION_FLOPS_PER_PAIR_DIM = 2


class StepTerms(BaseModel):
    """One step's time, term by term, ms."""

    model_config = ConfigDict(extra="forbid")

    batch: int
    context_tokens: int
    weights_read_bytes: int
    kv_read_bytes: int
    memory_ms: float
    attention_ms: float = Field(description="KV read: the decode attention kernels, ms")
    compute_ms: float
    kernels_ms: float
    allreduce_ms: float
    overhead_ms: float
    step_ms: float
    experts_read_per_layer: float | None = None


class StepTime(BaseModel):
    """Everything t(B, ctx) needs for one model on one GPU of a TP group, under one engine."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    label: str
    dense_weights_bytes: int = Field(ge=0, description="read every step, per GPU")
    expert_bytes: int = Field(default=0, ge=0, description="one expert across its layers, per GPU")
    num_experts: int = Field(default=0, ge=0)
    experts_per_token: int = Field(default=0, ge=0)
    moe_layers: int = Field(default=0, ge=0, description="layers with routed experts")
    moe_kernel_ms_per_layer: float = Field(default=MOE_KERNEL_MS_PER_LAYER, ge=0)
    moe_ms_per_local_expert: float = Field(default=MOE_MS_PER_LOCAL_EXPERT, ge=0)
    experts_per_gpu: int = Field(
        default=0, ge=0, description="experts resident on one GPU (all under TP, E / EP)"
    )
    model: ModelSpec = Field(description="for the KV bytes of each layer group")
    kv_dtype_bytes: int = Field(default=2, gt=0)
    active_params_per_gpu: int = Field(gt=0)
    bandwidth_bytes_per_s: float = Field(gt=0, description="peak HBM bandwidth")
    bandwidth_efficiency: float = Field(gt=0, le=1)
    flops_per_s: float = Field(gt=0)
    flops_efficiency: float = Field(default=FLOPS_EFFICIENCY, gt=0, le=1)
    layers: int = Field(gt=0)
    kernel_ms_per_layer: float = Field(default=KERNEL_MS_PER_LAYER, ge=0)
    tp: int = Field(default=1, ge=1)
    hidden_size: int = Field(gt=0)
    activation_bytes: int = Field(default=2, gt=0)
    link_bytes_per_s: float = Field(default=DEFAULT_LINK_BYTES_PER_S, gt=0)
    allreduce_hop_ms: float = Field(default=ALLREDUCE_HOP_MS, ge=0)
    overhead_ms: float = Field(default=ENGINE_OVERHEAD_MS["vllm"], ge=0)
    engine: str = "vllm"
    attention_flops_per_pair: float = Field(
        default=0.0, ge=0, description="prefill: FLOPs per (query, key) pair, all layers, per GPU"
    )
    attention_flops_efficiency: float = Field(default=ATTENTION_FLOPS_EFFICIENCY, gt=0, le=1)
    memory_scale: float = Field(
        default=1.0, gt=0, description="calibrated: measured / modelled time of HBM reads"
    )
    pp: int = Field(
        default=1, ge=1, description="pipeline stages: the fields above are one stage's"
    )
    pp_hop_ms: float = Field(default=0.0, ge=0, description="one stage-to-stage send, ms")

    def experts_read(self, batch: int) -> float:
        """Expected distinct experts B tokens route to, per MoE layer (uniform routing)."""
        if not self.num_experts:
            return 0.0
        share = 1.0 - (1.0 - self.experts_per_token / self.num_experts) ** batch
        return self.num_experts * share

    def expert_weights_bytes(self, tokens: int) -> int:
        """Expert weights the slowest GPU reads for `tokens` tokens, per step. Under TP every
        GPU reads its 1/TP of each routed expert; under expert parallelism a GPU reads its own
        routed experts whole, and the step waits for the rank that drew the most: each of its
        E/EP experts is routed to with the same probability q, so its count is binomial and the
        busiest of the EP ranks sits expected_max_of_normals(EP) standard deviations above
        the mean."""
        read = self.experts_read(tokens)
        local = self.experts_per_gpu
        if not local or local >= self.num_experts:
            return round(read * self.expert_bytes)
        ranks = math.ceil(self.num_experts / local)
        q = read / self.num_experts
        busiest = local * q + expected_max_of_normals(ranks) * math.sqrt(local * q * (1 - q))
        return round(min(local, busiest) * self.expert_bytes * self.tp)

    def kv_bytes(self, context: int) -> int:
        """KV bytes one sequence reads per step at `context` on one GPU: every layer group,
        windows capped, MLA latent whole, Mamba / linear-attention state (a stage's share of
        the layers under pipeline parallelism)."""
        whole = kv_bytes_per_sequence(self.model, context, self.tp, self.kv_dtype_bytes)
        return ceil_div(whole, self.pp)

    def _pipelined(self, stage_ms: float) -> float:
        """A step through `pp` stages from one stage's time (engine overhead included once):
        the engine keeps `pp` micro-batches in flight, so each sequence's token waits for
        every stage of its micro-batch and the sends between them (vLLM's virtual engines /
        batch queue, one micro-batch per stage)."""
        if self.pp <= 1:
            return stage_ms
        work = stage_ms - self.overhead_ms
        return self.pp * work + (self.pp - 1) * self.pp_hop_ms + self.overhead_ms

    def gemm(self, tokens: int) -> tuple[int, float, float]:
        """Weights read, their memory time and the GEMM compute time for `tokens` tokens in one
        forward pass (ms): the linear layers run once over every token of the step."""
        weights = self.dense_weights_bytes + self.expert_weights_bytes(tokens)
        memory_ms = (
            weights / (self.bandwidth_bytes_per_s * self.bandwidth_efficiency) * 1e3
        ) * self.memory_scale
        compute_ms = (
            2 * self.active_params_per_gpu * tokens / (self.flops_per_s * self.flops_efficiency)
        ) * 1e3
        return weights, memory_ms, compute_ms

    def moe_fixed_ms(self, tokens: int) -> float:
        """The MoE layers' routing kernels and their per-expert part (fixed per step), ms."""
        if not self.num_experts or not self.moe_layers or tokens <= 0:
            return 0.0
        local = self.experts_per_gpu or self.num_experts
        return self.moe_layers * (
            self.moe_kernel_ms_per_layer + local * self.moe_ms_per_local_expert
        )

    def allreduce_ms(self, tokens: int) -> float:
        """TP all-reduces of one forward pass over `tokens` tokens (two per layer), ms."""
        if self.tp <= 1:
            return 0.0
        message = tokens * self.hidden_size * self.activation_bytes
        one = (self.tp - 1) * self.allreduce_hop_ms + (
            message * 2 * (self.tp - 1) / self.tp / self.link_bytes_per_s * 1e3
        )
        return 2 * self.layers * one

    def kv_read_ms(self, kv_bytes: int) -> float:
        """Decode attention: reading `kv_bytes` of cache, ms."""
        bandwidth = self.bandwidth_bytes_per_s * self.bandwidth_efficiency
        return kv_bytes / bandwidth * 1e3 * self.memory_scale

    def prefill_attention_ms(self, pairs: float) -> float:
        """Prefill attention over `pairs` (query, key) pairs (causal), ms."""
        flops = pairs * self.attention_flops_per_pair
        return flops / (self.flops_per_s * self.attention_flops_efficiency) * 1e3

    def mixed_ms(
        self, decode_seqs: int, decode_kv_bytes: int, prefill_tokens: int, prefill_pairs: float
    ) -> float:
        """One engine step: `decode_seqs` decode tokens reading `decode_kv_bytes` of KV, plus
        `prefill_tokens` prompt tokens whose attention spans `prefill_pairs` pairs. The linear
        layers see every token once (memory- or compute-bound, whichever is longer); attention
        is its own kernel and adds; then kernels, all-reduce and the engine's overhead."""
        if self.pp > 1:  # one micro-batch's share of the step, through every stage
            decode_seqs = ceil_div(decode_seqs, self.pp)
            decode_kv_bytes = ceil_div(decode_kv_bytes, self.pp)
            prefill_tokens = ceil_div(prefill_tokens, self.pp)
            prefill_pairs = prefill_pairs / self.pp
        tokens = decode_seqs + prefill_tokens
        if tokens <= 0:
            return 0.0
        _, memory_ms, compute_ms = self.gemm(tokens)
        return self._pipelined(
            max(memory_ms, compute_ms)
            + self.kv_read_ms(decode_kv_bytes)
            + self.prefill_attention_ms(prefill_pairs)
            + self.layers * self.kernel_ms_per_layer
            + self.moe_fixed_ms(tokens)
            + self.allreduce_ms(tokens)
            + self.overhead_ms
        )

    def terms(self, batch: int, context: int) -> StepTerms:
        """Every term of one decode step of `batch` sequences at `context` tokens (under
        pipeline parallelism the terms are one stage's for one micro-batch of batch / pp; the
        step is the token's whole trip through the stages)."""
        micro = ceil_div(batch, self.pp)
        experts = self.experts_read(micro)
        weights, weights_ms, compute_ms = self.gemm(micro)
        kv = micro * self.kv_bytes(context)
        attention_ms = self.kv_read_ms(kv)
        memory_ms = weights_ms + attention_ms
        kernels_ms = self.layers * self.kernel_ms_per_layer + self.moe_fixed_ms(micro)
        allreduce_ms = self.allreduce_ms(micro)
        step = max(weights_ms, compute_ms) + attention_ms + kernels_ms + allreduce_ms
        step = self._pipelined(step + self.overhead_ms)
        return StepTerms(
            batch=batch,
            context_tokens=context,
            weights_read_bytes=weights,
            kv_read_bytes=kv,
            memory_ms=memory_ms,
            attention_ms=attention_ms,
            compute_ms=compute_ms,
            kernels_ms=kernels_ms,
            allreduce_ms=allreduce_ms,
            overhead_ms=self.overhead_ms,
            step_ms=step,
            experts_read_per_layer=experts if self.num_experts else None,
        )

    def step_ms(self, batch: int, context: int) -> float:
        """t(B, ctx) in ms."""
        return self.terms(batch, context).step_ms


def expected_max_of_normals(n: int) -> float:
    """E[max] of n independent standard normals, by Blom's approximation
    Phi^-1((n - 0.375) / (n + 0.25)) (Blom 1958, Statistical Estimates and Transformed
    Beta-Variables): 0 for one, 0.56 for two, 1.42 for eight."""
    if n <= 1:
        return 0.0
    return NormalDist().inv_cdf((n - 0.375) / (n + 0.25))


def link_bytes_per_s(gpu: GpuSpec) -> float:
    """One direction of the GPU's fastest listed link (catalogs print bidirectional GB/s)."""
    if not gpu.interconnect:
        return DEFAULT_LINK_BYTES_PER_S
    rates = [float(x) for x in re.findall(r"(\d+(?:\.\d+)?)\s*GB/s", gpu.interconnect)]
    return max(rates) * 1e9 / 2 if rates else DEFAULT_LINK_BYTES_PER_S


# One pipeline stage's send to the next across nodes: NCCL send/recv of a micro-batch's
# activations over InfiniBand, latency-bound at decode sizes (nccl-tests sendrecv_perf
# small-message latencies are tens of microseconds over IB); an estimate until measured.
PP_HOP_MS = 0.03

# Grace-Hopper / Grace-Blackwell superchips reach host memory over NVLink-C2C, 900 GB/s both
# ways (NVIDIA GH200 Grace Hopper Superchip datasheet): 450 GB/s each way.
NVLINK_C2C_BYTES_PER_S = 450e9
GRACE_PREFIXES = ("gh200", "gb200", "gb300")


def host_link_bytes_per_s(gpu: GpuSpec) -> float:
    """One direction of the GPU's link to host memory: NVLink-C2C on Grace superchips, else
    its PCIe (catalogs print bidirectional GB/s), else PCIe Gen4 x16. A ceiling: pinned copies
    reach most of it, pageable ones far less."""
    if gpu.id.startswith(GRACE_PREFIXES):
        return NVLINK_C2C_BYTES_PER_S
    found = re.search(r"PCIE\s+(\d+(?:\.\d+)?)\s*GB/s", gpu.interconnect or "", re.IGNORECASE)
    return float(found.group(1)) * 1e9 / 2 if found else DEFAULT_LINK_BYTES_PER_S


def engine_key(engine: str, version: tuple[int, int, int] | None = None) -> str:
    """The ENGINE_OVERHEAD_MS entry for an engine (vLLM before 0.8 ran the V0 engine)."""
    if engine == "vllm" and version is not None and version < (0, 8, 0):
        return "vllm-v0"
    return engine if engine in ENGINE_OVERHEAD_MS else "vllm"


def bandwidth_efficiency(gpu: GpuSpec) -> float:
    """The GPU's measured achievable bandwidth share, else its vendor's."""
    if gpu.achievable_bandwidth_fraction is not None:
        return gpu.achievable_bandwidth_fraction
    return VENDOR_BANDWIDTH_EFFICIENCY.get(gpu.vendor, DEFAULT_BANDWIDTH_EFFICIENCY)


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
) -> StepTime:
    """The step-time model of `model` on one GPU of a TP group (weights: the checkpoint's, or
    `weights_bytes` when re-stored); with `pp` stages, of one stage (its share of the layers,
    their weights and KV), the stages joined over the link between nodes."""
    total = weights_bytes if weights_bytes is not None else model.weights_bytes
    vocab = model.vocab_size or 0
    embedding = bytes_for_elements(vocab * model.hidden_size, "bf16")
    expert_all = 0
    expert_one = 0
    if model.num_experts and model.experts_per_token and model.moe_intermediate_size:
        moe_layers = _moe_layers(model)
        per_expert_params = 3 * model.hidden_size * model.moe_intermediate_size * moe_layers
        scale = total / max(model.params_total, 1)  # bytes per parameter as stored
        expert_one = round(per_expert_params * scale)
        expert_all = expert_one * model.num_experts
    dense = max(total - embedding - expert_all, 0)
    flops = gemm_flops_per_s(gpu, weight_dtype)
    if not gpu.hbm_bandwidth_bytes_per_s or not flops:
        from planner.errors import InputError

        raise InputError("--gpu", f"{gpu.id} has no bandwidth/FLOPs on record")
    layout = f"TP {tp}" + (f" x PP {pp}" if pp > 1 else "")
    return StepTime(
        label=f"{model.name} on {gpu.id} x {layout} ({engine})",
        dense_weights_bytes=ceil_div(dense, tp * pp),
        expert_bytes=ceil_div(expert_one, tp * pp),
        num_experts=model.num_experts or 0,
        experts_per_token=model.experts_per_token or 0,
        moe_layers=ceil_div(_moe_layers(model), pp) if expert_one else 0,
        model=model,
        kv_dtype_bytes=kv_dtype_bytes,
        active_params_per_gpu=max(1, model.params_active // (tp * pp)),
        bandwidth_bytes_per_s=float(gpu.hbm_bandwidth_bytes_per_s),
        bandwidth_efficiency=bandwidth_efficiency(gpu),
        flops_per_s=float(flops),
        layers=ceil_div(model.num_layers, pp),
        tp=tp,
        hidden_size=model.hidden_size,
        link_bytes_per_s=link_bytes_per_s(gpu),
        overhead_ms=ENGINE_OVERHEAD_MS[engine_key(engine, version)],
        engine=engine,
        attention_flops_per_pair=attention_flops_per_pair(model, tp) / pp,
        pp=pp,
        pp_hop_ms=PP_HOP_MS if pp > 1 else 0.0,
    )


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


# Weight dtype names that mean 4-bit floating point (NVFP4 / MXFP4 checkpoints).
FP4_DTYPES = ("fp4", "mxfp4", "nvfp4")


def attention_flops_per_pair(model: ModelSpec, tp: int) -> float:
    """Prefill attention FLOPs per (query, key) pair on one GPU, all attention layers: each
    query head does Q.K^T over head_dim_k and P.V over head_dim_v (MLA prefill runs
    un-absorbed, with the model's head sizes). Sliding windows are not capped here."""
    heads = max(1, model.num_attention_heads // tp)
    total = 0.0
    for g in model.kv_groups:
        if not g.kind.per_token:
            continue
        dk = g.head_dim_k or model.head_dim
        dv = g.head_dim_v or model.head_dim
        total += g.num_layers * heads * ATTENTION_FLOPS_PER_PAIR_DIM * (dk + dv)
    return total


def _moe_layers(model: ModelSpec) -> int:
    """Decoder layers that carry routed experts (all, unless the config says fewer)."""
    return model.moe_layers or model.num_layers
