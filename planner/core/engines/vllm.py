"""vLLM's KV-cache sizing, version by version (docs/engines.md; vLLM's gpu_worker.py and
kv_cache_utils.py of each release).

    available = total x gpu_memory_utilization - weights - activation peak - non-torch
                - CUDA-graph estimate (0.20+; on model runner V2 0.29+; not with --enforce-eager)
    num_blocks = available // bytes_per_block          (one block is the reserved null block)
    tokens     = as that version logs them

Behaviour that changed across releases lives in VLLM_RULES (data), not in scattered ifs.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from planner.core.engines.calibration import Calibration, cal_notes, correct
from planner.core.engines.common import (
    BLACKWELL_MAJOR,
    CONSUMER_BLACKWELL_MAJOR,
    ENGINE_DTYPES,
    HOPPER_MAJOR,
    EnginePrediction,
    NoKvCache,
    Sharding,
    TermSource,
    capability,
    check_stages,
    compute_dtype,
    ds_mla_latent_bytes,
    is_dsa,
    is_mla,
    kv_cache_dtype,
    outside_table,
    parse_version,
    refuse_before,
    rope_cache_bytes,
    total_term,
    version_text,
    weights_term,
)
from planner.core.kv import kv_heads_per_rank, layer_state_bytes
from planner.core.offload import LMCACHE_CHUNK_TOKENS
from planner.core.search import largest_passing
from planner.core.specs import GpuSpec, KvKind, KvLayerGroup, ModelSpec
from planner.core.step import gemm
from planner.core.step.comm import NODE_DOMAIN_GPUS, NVL72_PREFIXES
from planner.core.step.overhead import (
    VLLM_ASYNC_SCHEDULING_FLAG_SINCE,
    VLLM_STREAM_INTERVAL_SINCE,
    async_scheduling_default,
)
from planner.errors import InputError
from planner.units import GIB_BYTES, ceil_div, dtype_bytes

# --- calibrated constants (each with the log lines it was fitted on) -------------------------

# Peak of the dummy sampler run, in bytes per logit (max_num_seqs rows x vocab), by the top-k /
# top-p implementation the profile exercises (it samples with top_k = vocab - 1, top_p = 0.9):
# - "sort" (V0, and V1 before 0.17): torch's segmented sort is live at the peak. Counted from the
#   code (vllm/v1/sample/ops/topk_topp_sampler.py, ATen SortStable.cu): bf16 logits 2 + fp32
#   logits 4 + sorted values 4 + int64 indices 8 + two int2 (index, segment) buffers 16 + the
#   radix sort's keys-out buffer 4 = 38 B. Checked against two logs it was not fitted on:
#   Llama-3.2-3B, 320 rows, vLLM 0.8.1 V0 -> 1.45 GiB (logged 1.49); Qwen3-8B, 224 rows, vLLM
#   0.10.2 V1 -> 1.20 GiB (logged 1.23).
# - "triton" (V1 runner from 0.17: a Triton top-k/top-p kernel for >= 8 rows, no sort): 3.86
#   fp32 copies, fitted on five vLLM 0.19 H100 logs whose peak is the sampler: Llama-3.1-8B TP1
#   and TP2 1.89 GiB, Qwen2.5-7B 2.21, gemma-3-4b 3.89, gpt-oss-20b TP2 2.87 (1024 rows each).
# - "logits" (model runner V2 before 0.33; see V2_RUNNER_RULES for which models run on it): the
#   dummy sampler applies no top-k / top-p and samples in one Gumbel kernel, so only the logits
#   themselves (model dtype).
# - "flashinfer" (V1 runner on CUDA, 0.9 - 0.11, FlashInfer installed): TopKTopPSampler takes
#   FlashInfer's top-k / top-p kernels unless VLLM_USE_FLASHINFER_SAMPLER=0
#   (v1/sample/ops/topk_topp_sampler.py; 0.8.x refused FlashInfer >= 0.2.3, and from 0.12 the
#   kernels are opt-in). FlashInfer ships in the vllm/vllm-openai image but is only the
#   `flashinfer` extra of the pip wheel before 0.12, so `vllm serve` is taken to have it and the
#   LLM class or a co-located trainer (pip installs: Unsloth, TRL) not; --flashinfer /
#   --no-flashinfer says which. Bytes: bf16 logits 2 + fp32 logits 4 + fp32 probabilities 4. The
#   0.10.1.1 `vllm serve` log (Qwen2-7B, A100 80GB, 256 rows, utilisation 0.5) leaves 0.52 GiB
#   for activation + non-torch, the 2048-token forward plus non-torch with no room for the
#   sort's 1.38 GiB; the 0.10.2 Unsloth (pip) log still shows the sort.
SORT_SAMPLER_BYTES_PER_LOGIT = 2 + 4 + 4 + 8 + 16 + 4
TRITON_SAMPLER_BYTES_PER_LOGIT = 3.86 * 4
FLASHINFER_SAMPLER_BYTES_PER_LOGIT = 2 + 4 + 4
FLASHINFER_SAMPLER_SINCE, FLASHINFER_SAMPLER_UNTIL = (0, 9, 0), (0, 12, 0)
TRITON_TOPK_MIN_ROWS = 8  # apply_top_k_top_p falls back to the sort below 8 rows
# Forward pass of the profiling batch: per token the gate/up output (2 x I), the activation
# output (I) and ~3 hidden-size buffers, in the activation dtype. Fits the V0 logs where the
# forward dominates: Llama-3.1-8B on an RTX 3090 at 20,000 / 29,000 tokens (2.07 / 2.99 GiB)
# and Qwen2.5-1.5B on a T4 at 32,768 tokens (2.02 GiB).
FORWARD_INTERMEDIATE_BUFFERS = 3
FORWARD_HIDDEN_BUFFERS = 3
# Non-torch memory the profile sees grow (cuBLAS/attention workspaces): median of the twelve
# single-GPU start-up logs of docs/engines.md's calibration cases (0.01-0.35 GiB; the six H100
# 0.19 logs 0.24-0.27).
NON_TORCH_BYTES = round(0.25 * GIB_BYTES)
# Extra with TP x PP > 1 (NCCL channel buffers set up at the first collective, custom
# all-reduce): the Mixtral-8x7B TP2 log on H100 under vLLM 0.15.1 (no all-reduce fusion) leaves
# 0.59 GiB of non-torch memory once every other term is taken as modelled, 0.34 above the
# single-GPU 0.25.
NON_TORCH_MULTI_GPU_EXTRA_BYTES = round(0.34 * GIB_BYTES)
# FlashInfer's all-reduce + RMSNorm fusion workspace (IPC buffers, created by the compile pass
# after the baseline snapshot). vLLM turns the pass on by default at -O2 from 0.17
# (config/vllm.py enable_allreduce_rms_fusion): TP > 1 on compute capability 9.0 or the 10.x
# family, PP 1 before 0.28, compiled (not --enforce-eager); the pass skips TP sizes outside
# FlashInfer's 2 / 4 / 8. Both vLLM 0.19 H100 TP2 logs (Llama-3.1-8B, gpt-oss-20b) carry
# 2.07 GiB of non-torch memory, 1.48 GiB above 0.25 + 0.34. FlashInfer's documented layout
# (trtllm_ar.py: 4 x TP x tokens x hidden x 2 B) gives 0.35-0.50 GiB for those shapes, yet both
# logs show the same figure, so the term is the logged one, not the layout's.
ALLREDUCE_FUSION_BYTES = round(1.48 * GIB_BYTES)
ALLREDUCE_FUSION_SINCE = (0, 17, 0)
ALLREDUCE_FUSION_WITH_PP_SINCE = (0, 28, 0)
ALLREDUCE_FUSION_TP_SIZES = (2, 4, 8)  # FlashInfer's supported world sizes
# Pre-Ampere NVIDIA cards (compute capability < 8.0: T4, V100) have no FlashAttention-2, so V0
# runs XFormers, whose prefill holds one more query-width buffer at the forward peak. One log:
# Qwen2.5-1.5B on a T4 at 32,768 profile tokens logs 2.02 GiB where three hidden buffers give
# 1.92 (a 3090 running FlashAttention fits three exactly).
XFORMERS_QUERY_BUFFERS = 1
XFORMERS_BELOW_CAPABILITY = (8, 0)
# From 0.28 the budget is free-memory based (total_consumed: everything the process holds since
# the baseline), so model runner V2's persistent sampler state counts: penalties'
# output_bin_counts (max_num_seqs x vocab int32) and prompt_bin_mask (max_num_seqs x vocab / 32
# int32), vllm/v1/worker/gpu/sample/penalties.py.
V2_PERSISTENT_STATE_SINCE = (0, 28, 0)
PENALTY_ENTRY_BYTES = 4  # int32 counts and mask words
PENALTY_MASK_BITS = 32  # prompt_bin_mask packs one vocabulary entry per bit
# Non-torch growth when vLLM starts inside a process that already ran CUDA work (Unsloth or TRL
# "colocate" training loops): the libraries and kernels are resident before vLLM's baseline
# snapshot, so little shows up. Median of the three such calibration logs (docs/engines.md): Unsloth
# on a T4 0.01 GiB, an A100-40GB 0.09 GiB and an L4 0.02 GiB.
NON_TORCH_COLOCATED_BYTES = round(0.02 * GIB_BYTES)
# vLLM V0 before 0.6.4 took the profile's peak as the device memory in use after the profile
# run less the memory in use before it (worker.py determine_num_available_blocks, 0.6.3.post1:
# init_gpu_memory - mem_get_info() free): the caching allocator's segments, not torch's
# allocated peak, which 0.6.4 reads (memory_stats()["allocated_bytes.all.peak"]).
VLLM_TORCH_PEAK_SINCE = (0, 6, 4)
# vLLM V0 0.6.4 and V1 0.8.x counted all non-torch memory on the device, the CUDA context
# included (mem_get_info used - torch allocated): both 0.6.4 RTX 3090 logs print 0.35 GiB.
NON_TORCH_WITH_CONTEXT_BYTES = round(0.35 * GIB_BYTES)
# CUDA-graph pool per layer per captured batch size: median of the four estimates logged
# (Llama-3.1-8B 0.84 GiB / 32 layers / 51 sizes, gemma-3-4b 0.70 / 34 / 51, gpt-oss-20b TP2
# 1.09 / 24 / 51, Qwen2.5-7B-AWQ on an RTX 4080 0.48 / 28 / 51) = 0.47 MiB.
CUDAGRAPH_BYTES_PER_LAYER_PER_SIZE = round(0.47 * 1024 * 1024)

# --- engine facts (vllm/config/*.py and vllm/engine/arg_utils.py) --------------------------
# Memory other processes hold: the releases that count the whole device's non-torch memory (V0
# 0.6.4, V1 0.8.x: device used - torch allocated) charge it to the KV budget; V0 before 0.6.4
# (peak = free at init - free after the profile) and V0 0.6.5+ (memory_profiling's baseline) do
# not; V1 from 0.9 budgets from its own baseline snapshot and refuses to start when free memory
# is below total x gpu_memory_utilization (v1/worker/gpu_worker.py, 0.9.2 - 0.33).
FREE_MEMORY_CHECK_SINCE = (0, 9, 0)
DEFAULT_BLOCK_SIZE = 16  # CacheConfig.DEFAULT_BLOCK_SIZE on CUDA (64 from 0.34: VllmRules)
# The smallest block the CUDA attention kernels take (FlashAttention: multiples of 16 tokens;
# vllm/platforms/interface.py aligns hybrid blocks to max(it, the block asked for)).
KERNEL_MIN_BLOCK_SIZE = 16
# vLLM 0.34's extensible KV cache (on by default on CUDA and ROCm unless kv_cache_memory_bytes is
# set; vllm/v1/worker/extensible_kv_cache.py measure_kv_cache_bytes): sized after warm-up and
# CUDA-graph capture from the memory then free. The budget is min(requested - everything
# resident but the KV, free at start less the same - margin) - the transient peak, the margin
# being max(1 GiB (3 GiB on ROCm), 0.75 x the transient peak); gpu_memory_utilization defaults
# to 1.0 there (config/cache.py resolved_gpu_memory_utilization), so the second term binds.
EXTENSIBLE_MARGIN_FLOOR_BYTES = GIB_BYTES
EXTENSIBLE_MARGIN_FLOOR_ROCM_BYTES = 3 * GIB_BYTES
EXTENSIBLE_MARGIN_FRACTION = 0.75
EXTENSIBLE_DEFAULT_UTILIZATION = 1.0
# Physical pages are committed per KV tensor in granules of at least 2 MiB (the CUDA VMM
# granularity; ROCm's 4 KiB is floored to it): vllm/utils/extensible_tensor.py granule_size.
EXTENSIBLE_GRANULE_BYTES = 2 * 1024 * 1024
# What this process's CUDA context holds before vLLM's start snapshot, outside what it counts:
# the difference between the non-torch figure of the releases that counted the context (0.35
# GiB) and of those that did not (0.25 GiB), both calibrated on start-up logs (an estimate).
CUDA_CONTEXT_BYTES = NON_TORCH_WITH_CONTEXT_BYTES - NON_TORCH_BYTES
# MLA models on Hopper ran the FlashMLA backend by default from vLLM 0.7.3, whose paged KV is in
# blocks of 64 tokens: the platform forced block_size 64 whatever was asked ("Forcing kv cache
# block size to 64 for FlashMLA backend.", vllm/platforms/cuda.py check_and_update_config;
# FlashMLA needs SM 9.0), and from 0.11.1 only a size that is not a multiple of 64. Read in
# each wheel from 0.7.3 to 0.17.1 (is_flashmla_supported, then is_flashmla_dense_supported from
# 0.15); 0.18 let the attention backends choose their own block, picking FlashAttention's MLA
# kernel first on Hopper: a 0.19 start-up log of DeepSeek-V2-Lite on an H100
# (tests/data/calibration, llmd-h100-deepseek-v2-lite) keeps blocks of 16 (94,097 blocks,
# 1,505,552 tokens).
FLASHMLA_BLOCK_SIZE = 64
FLASHMLA_SINCE = (0, 7, 3)
FLASHMLA_MULTIPLES_SINCE = (0, 11, 1)
FLASHMLA_DEFAULT_UNTIL = (0, 18, 0)
# Compute capability 10.x (B200, B300, GB200) runs MLA on other backends, each with its blocks
# (vllm/platforms/cuda.py; from 0.18 AttentionBackend.get_preferred_block_size; read in the
# 0.10-0.34 wheels): CUTLASS MLA from 0.10.1 (any size not a multiple of 128 forced to 128),
# FlashInfer MLA first from 0.15 (forced to 64 unless 32 or a multiple of 64), and from 0.18
# an unset size takes the backend's smallest, FlashInfer MLA's 32 (0.34's default of 64 it
# accepts). DeepSeek-V3.2's sparse MLA (FlashMLA sparse) forced blocks of 64 from 0.11 to 0.17;
# after, Hopper's sparse backends prefer multiples of 64 (Blackwell's pick by heads per rank:
# not modelled).
CUTLASS_MLA_BLOCK_SIZE = 128
CUTLASS_MLA_SINCE = (0, 10, 1)
FLASHINFER_MLA_FIRST_SINCE = (0, 15, 0)
FLASHINFER_MLA_BLOCK_SIZE = 64
PREFERRED_BLOCK_SINCE = (0, 18, 0)
FLASHINFER_MLA_PREFERRED_BLOCK_SIZE = 32
SPARSE_MLA_BLOCK_SIZE = 64
SPARSE_MLA_SINCE = (0, 11, 0)
# ROCm runs plain attention on the ROCM_ATTN backend first, whose native paged-attention
# kernel takes blocks of 16 or 32: an unset size is 16 whatever the release's default (its
# get_preferred_block_size; vllm/v1/attention/backends/rocm_attn.py and platforms/rocm.py
# backend priorities, 0.34, where the default became 64). It does not run attention sinks
# (gpt-oss), KV connectors or head sizes outside its list; those models take the default.
ROCM_ATTN_BLOCK_SIZE = 16
ROCM_ATTN_PREFERENCE_SINCE = (0, 34, 0)
ROCM_ATTN_HEAD_SIZES = frozenset({32, 64, 80, 96, 128, 160, 192, 224, 256})
SINK_ARCHITECTURES = frozenset({"GptOssForCausalLM"})


def backend_block_size(
    model: ModelSpec,
    gpu: GpuSpec,
    version: tuple[int, int, int],
    requested: int | None = None,
    connector: bool = False,
) -> tuple[int, str] | None:
    """The KV block size the attention backend runs with for this model, GPU and release,
    given the --block-size asked (None: unset) and whether a KV connector runs, and the
    backend; None where the release's default (or the flag) stands."""
    mla = is_mla(model)
    if gpu.vendor == "amd" and not mla:
        heads = {g.head_dim_k for g in model.kv_groups if g.kind.per_token}
        native = bool(heads) and heads <= ROCM_ATTN_HEAD_SIZES
        sinks = model.architecture in SINK_ARCHITECTURES
        unset = requested is None and version >= ROCM_ATTN_PREFERENCE_SINCE
        plain = not has_state_layers(model)  # no Mamba / linear state
        if unset and native and plain and not sinks and not connector:
            return ROCM_ATTN_BLOCK_SIZE, "ROCm paged attention"
        return None
    if not mla or gpu.vendor != "nvidia":
        return None
    major = capability(gpu)[0]
    if is_dsa(model) and major in (HOPPER_MAJOR, BLACKWELL_MAJOR):
        if SPARSE_MLA_SINCE <= version < PREFERRED_BLOCK_SINCE:
            return SPARSE_MLA_BLOCK_SIZE, "FlashMLA sparse"
        if major == HOPPER_MAJOR and version >= PREFERRED_BLOCK_SINCE and requested is None:
            return SPARSE_MLA_BLOCK_SIZE, "sparse MLA"
        return None
    if major == HOPPER_MAJOR and FLASHMLA_SINCE <= version < FLASHMLA_DEFAULT_UNTIL:
        asked = requested if requested is not None else default_block_size(version)
        if version >= FLASHMLA_MULTIPLES_SINCE and asked % FLASHMLA_BLOCK_SIZE == 0:
            return None
        return FLASHMLA_BLOCK_SIZE, "FlashMLA"
    if major != BLACKWELL_MAJOR or version < CUTLASS_MLA_SINCE:
        return None
    block = requested if requested is not None else default_block_size(version)
    if version < FLASHINFER_MLA_FIRST_SINCE:
        if block % CUTLASS_MLA_BLOCK_SIZE:
            return CUTLASS_MLA_BLOCK_SIZE, "CUTLASS MLA"
        return None
    takes = block == FLASHINFER_MLA_PREFERRED_BLOCK_SIZE or block % FLASHINFER_MLA_BLOCK_SIZE == 0
    if version < PREFERRED_BLOCK_SINCE:
        return None if takes else (FLASHINFER_MLA_BLOCK_SIZE, "FlashInfer MLA")
    # an unset size the backend does not take becomes its smallest (0.34's 64 it takes)
    if requested is None and not takes:
        return FLASHINFER_MLA_PREFERRED_BLOCK_SIZE, "FlashInfer MLA"
    return None


# vLLM V1's attention kernels page the KV in blocks of a multiple of 16 tokens: FlashAttention
# (the default on compute capability 8.0+) and Triton raise "Block size must be a multiple of
# 16." at start-up (get_kv_cache_shape, read in the 0.8.0 - 0.11.0 wheels), ROCm's backends
# likewise; from 0.11.1 each backend lists its kernel block sizes (FlashAttention and FlashInfer
# 16 / 32 / 64, Triton and ROCm multiples of 16) and a block none of them divides fails with
# "No common block size" (v1/worker/gpu_model_runner.py select_common_block_size). Exceptions:
# FlashInfer, the default on SM 10.0 from 0.9.1 where installed, checked nothing before 0.11.1;
# FlexAttention (cards below 8.0) takes any size; and from 0.18 the CUDA selector passes the
# asked size to the backends and falls to the first that takes it, FlexAttention, warning that
# the size "precluded higher-priority backend(s)" (platforms/cuda.py, 0.18 - 0.34). MLA models
# run their own backends (backend_block_size) and are not judged here.
KERNEL_BLOCK_MULTIPLE = 16
FLEX_ATTENTION_BELOW_CAPABILITY = (8, 0)
FLASHINFER_SM100_DEFAULT_SINCE = (0, 9, 1)
SM100_CAPABILITY = (10, 0)  # B200 / GB200: vLLM's is_device_capability(100)
KERNEL_BLOCK_SIZES_SINCE = (0, 11, 1)
BLOCK_SIZE_FALLBACK_SINCE = (0, 18, 0)


def flashinfer_installed(s: VllmSettings) -> bool:
    """Whether FlashInfer is taken as installed: the flag's, else yes for `vllm serve` (the
    vllm-openai image ships it) outside a process that already ran CUDA work."""
    if s.flashinfer is not None:
        return s.flashinfer
    return s.usage_context == "serve" and not s.colocated


def kernel_block_gap(at: _Release, block: int) -> tuple[bool, str] | None:
    """Whether the V1 attention kernels run a KV block of `block` tokens for this model, card
    and release: None where they do; (True, why) where vLLM fails to start; (False, why) where
    it starts on FlexAttention, slower than the kernel the step model prices."""
    model, gpu, version = at.model, at.gpu, at.version
    hybrid = has_state_layers(model)  # vLLM sets a hybrid's attention block itself
    if at.engine != "v1" or block % KERNEL_BLOCK_MULTIPLE == 0 or is_mla(model) or hybrid:
        return None
    if gpu.vendor == "nvidia":
        cap = capability(gpu)
        if cap < FLEX_ATTENTION_BELOW_CAPABILITY:
            return None
        flashinfer = flashinfer_installed(at.settings) and cap == SM100_CAPABILITY
        if flashinfer and FLASHINFER_SM100_DEFAULT_SINCE <= version < KERNEL_BLOCK_SIZES_SINCE:
            return None
        if version >= BLOCK_SIZE_FALLBACK_SINCE:
            return False, (
                f"block_size {block}: no FlashAttention / FlashInfer / Triton kernel takes it "
                f"(multiples of {KERNEL_BLOCK_MULTIPLE}); vLLM {version_text(version)} falls back "
                "to FlexAttention and warns of reduced performance, which the step times do "
                "not model"
            )
    raised = (
        f"No common block size for {block}"
        if version >= KERNEL_BLOCK_SIZES_SINCE
        else f"Block size must be a multiple of {KERNEL_BLOCK_MULTIPLE}"
    )
    return True, (
        f"{block}: vLLM {version_text(version)}'s attention kernels on {gpu.name} page the KV "
        f'in multiples of {KERNEL_BLOCK_MULTIPLE} tokens; it fails to start ("{raised}")'
    )


V0_MAX_NUM_SEQS = 256
V0_MIN_BATCHED_TOKENS = 2048
# V0's default budget with chunked prefill on: 512 tokens until 0.6.4, 2,048 from 0.6.5
# (vllm/config.py SchedulerConfig, read in the 0.5.5 - 0.7.3 wheels).
V0_CHUNKED_BATCHED_TOKENS_OLD = 512
V0_CHUNKED_BATCHED_TOKENS_SINCE = (0, 6, 5)
# `--max-model-len auto` (or -1): vLLM derives the model's own length, plans the KV cache, then
# lowers the length to the longest one request whose blocks fit in the KV memory (binary search;
# vllm/engine/arg_utils.py human_readable_int_or_auto and vllm/v1/core/kv_cache_utils.py
# _auto_fit_max_model_len, from 0.14; absent in 0.13). The request's blocks: from 0.19 the sum
# over KV-cache groups (each group claims its own blocks); 0.14-0.18 counted only the first
# group's (_max_memory_usage_bytes_from_groups, read in 0.14-0.19 and 0.34).
MAX_MODEL_LEN_AUTO = -1
AUTO_FIT_SINCE = (0, 14, 0)
AUTO_FIT_SUMS_GROUPS_SINCE = (0, 19, 0)
# DeepSeek-V3.2 (sparse attention): vLLM stores an fp8 KV cache in DeepSeek's scaled layout
# ("fp8_ds_mla", common.ds_mla_latent_bytes: 656 bytes per token per layer): 0.11 turns `auto`
# and any fp8 spelling into it, 0.12-0.17 any fp8 spelling (`auto` stays bf16), and from 0.18
# the flag is kept (vllm/model_executor/models/config.py DeepseekV32ForCausalLM, read in the
# 0.10.2-0.34 wheels; absent in 0.10.2).
DS_MLA_SINCE = (0, 11, 0)
DS_MLA_AUTO_UNTIL = (0, 12, 0)
DS_MLA_UNTIL = (0, 18, 0)
# The layout's own --kv-cache-dtype spelling (CacheDType from 0.12; any release from 0.11 runs it).
DS_MLA_FLAG = "fp8_ds_mla"
# The architecture that hook serves (the hook map in models/config.py names it alone: GLM-5's
# GlmMoeDsaForCausalLM, loaded from 0.16, gets no hook before 0.30).
DS_MLA_ARCHITECTURE = "DeepseekV32ForCausalLM"
# GLM-5 (GlmMoeDsaForCausalLM) on data-centre Blackwell: from 0.32 vLLM turns `auto` into an
# fp8_e4m3 KV cache (models/config.py GlmMoeDsaForCausalLM.verify_and_update_config, read in the
# 0.30-0.34 wheels: absent in 0.31, present in 0.32).
GLM_DSA_ARCHITECTURE = "GlmMoeDsaForCausalLM"
GLM_DSA_FP8_KV_SINCE = (0, 32, 0)
# The MoE layers' exchange across data-parallel ranks under expert parallelism
# (--all2all-backend, from 0.11.1; VLLM_ALL2ALL_BACKEND before): the default gathers every token
# on every rank and reduce-scatters the outputs; DeepEP's kernels send each token to the ranks
# of its experts alone. They run where the experts are split whole across DP > 1 ranks
# (FusedMoEParallelConfig.use_all2all_kernels, 0.34.0). The planner prices these three.
ALL2ALL_FLAG_SINCE = (0, 11, 1)
# --data-parallel-size: first in the 0.8.3 wheel's engine/arg_utils.py (absent from 0.8.2's).
DATA_PARALLEL_FLAG_SINCE = (0, 8, 3)
# --kv-cache-memory-bytes: first in the 0.10.2 wheel's engine/arg_utils.py (absent from 0.10.1's).
KV_CACHE_MEMORY_BYTES_SINCE = (0, 10, 2)
# Switches the line may carry, by the first release whose engine/arg_utils.py has them (each
# absent from the release before: 0.2.5, 0.2.7, 0.3.3; read in the wheels). Asked of an older
# release they are refused; chunked prefill asked off there is the release's own behaviour.
FLAG_SINCE = {
    "--enforce-eager": (0, 2, 6),
    "--enable-lora": (0, 3, 0),
    "--enable-prefix-caching": (0, 4, 0),
    "--enable-chunked-prefill": (0, 4, 0),
}
# --enable-expert-parallel: first in the 0.8.0 wheel's engine/arg_utils.py (absent from 0.7.3's);
# before it every rank holds a TP shard of every expert.
EXPERT_PARALLEL_SINCE = (0, 8, 0)
# Pipeline parallelism: through 0.5.0 ParallelConfig._verify_args raises NotImplementedError
# ("Pipeline parallelism is not supported yet.", vllm/config.py, read in the 0.5.0 wheel); 0.5.1
# serves it for the architectures of its _PP_SUPPORTED_MODELS, later releases for every model
# whose class supports it (ModelRegistry.is_pp_supported_model, 0.6.3).
PP_SINCE = (0, 5, 1)
# The architectures of _PP_SUPPORTED_MODELS (vllm/config.py), by the release that added each
# (read in the 0.5.1-0.6.2 wheels; 0.6.3 replaced the list with each model class's SupportsPP).
PP_ARCHITECTURES_SINCE: dict[str, tuple[int, int, int]] = {
    **dict.fromkeys(
        (
            "AquilaModel",
            "AquilaForCausalLM",
            "InternLMForCausalLM",
            "LlamaForCausalLM",
            "LLaMAForCausalLM",
            "MistralForCausalLM",
            "Phi3ForCausalLM",
            "GPT2LMHeadModel",
        ),
        (0, 5, 1),
    ),
    "MixtralForCausalLM": (0, 5, 3),
    **dict.fromkeys(
        (
            "DeepseekV2ForCausalLM",
            "NemotronForCausalLM",
            "Qwen2ForCausalLM",
            "Qwen2MoeForCausalLM",
            "QWenLMHeadModel",
        ),
        (0, 5, 4),
    ),
    "JAISLMHeadModel": (0, 5, 5),
    "InternLM2ForCausalLM": (0, 6, 1),
    "InternVLChatModel": (0, 6, 1),
    "Qwen2VLForConditionalGeneration": (0, 6, 2),
}
PP_LIST_UNTIL = (0, 6, 3)
# From 0.6.3, architectures registered before their model class declared SupportsPP (every
# architecture of the shipped configs scanned in the 0.6.3-0.34.0 wheels: gpt-oss alone, whose
# class in 0.10.1 lacks it and in 0.10.2 has it).
PP_CLASS_SINCE = {"GptOssForCausalLM": (0, 10, 2)}
DEFAULT_ALL2ALL = "allgather_reducescatter"
DEEPEP_HIGH_THROUGHPUT = "deepep_high_throughput"
DEEPEP_LOW_LATENCY = "deepep_low_latency"
PRICED_ALL2ALL = (DEFAULT_ALL2ALL, DEEPEP_HIGH_THROUGHPUT, DEEPEP_LOW_LATENCY)
# DeepEP's buffers, outside torch's allocator, allocated as the model loads (so the profile
# counts them): NVLink bytes VLLM_DEEPEP_BUFFER_SIZE_MB (1,024 MiB) in either mode; the high-
# throughput kernels as many RDMA bytes where the ranks span hosts, the low-latency ones what
# DeepEP's size hint asks for their token cap (device_communicators/all2all.py, 0.11.1-0.34.0).
DEEPEP_BUFFER_BYTES = GIB_BYTES
# The low-latency kernels' token cap per rank: VLLM_MOE_DP_CHUNK_SIZE (256) before 0.20, then
# max_num_batched_tokens, whose default is 256 where they run with EP over DP > 1 ranks
# (SchedulerConfig.DEFAULT_MAX_NUM_BATCHED_TOKENS_FOR_BATCHED_DP, ParallelConfig
# .use_batched_dp_moe; read in the 0.19-0.34 wheels).
MOE_DP_CHUNK_TOKENS = 256
BATCHED_DP_MOE_TOKENS = 256
BATCHED_DP_MOE_SINCE = (0, 20, 0)
# The hidden sizes DeepEP's low-latency kernels take, a layer's rounded up to the next
# (DeepEPLLPrepareAndFinalize.SUPPORTED_HIDDEN_SIZES, 0.34.0).
DEEPEP_LL_HIDDEN_SIZES = (2048, 2560, 3072, 4096, 5120, 6144, 7168, 8192)
# DeepEP's low-latency layout (csrc/legacy/config.hpp LowLatencyLayout, deepseek-ai/DeepEP
# dd758ca): a dispatch message is a 16-byte header and the larger of the bf16 hidden vector and
# an fp8 one with an fp32 scale per 128 values; a combine message a bf16 min / max pair per 128
# values and the bf16 vector; two send, two receive and two 128-byte-aligned signalling buffers,
# the whole rounded up to 128 bytes.
DEEPEP_LL_HEADER_BYTES = 16
DEEPEP_LL_SCALE_VALUES = 128
DEEPEP_ALIGN_BYTES = 128
# GPUs behind one host (vLLM's "internode" asks whether every rank shares rank 0's node): a
# node's eight (NODE_DOMAIN_GPUS), or an NVL72 rack's compute tray's four (NVIDIA GB200 NVL72:
# 18 trays of 2 Grace + 4 Blackwell).
NVL72_TRAY_GPUS = 4
# Dual-batch overlap (--enable-dbo, 0.11.0+): a step splits into two micro-batches, one's
# DeepEP exchange under the other's compute, where it holds enough tokens: 32 in a decode-only
# step, 512 in one with prompt tokens (ParallelConfig.dbo_decode_token_threshold /
# dbo_prefill_token_threshold; v1/worker/ubatch_utils.py check_ubatch_thresholds, 0.34.0). On
# CUDA vLLM asserts a DeepEP (or NIXL EP) backend for it (config/vllm.py).
DBO_SINCE = (0, 11, 0)
DBO_MIN_TOKENS = (32, 512)
# V0 turned chunked prefill on by itself above this max_model_len (vllm/engine/arg_utils.py,
# 0.5.3-0.7.3 create_engine_config: use_long_context = max_model_len > 32K; absent from
# 0.5.2), unless the scheduler saw a sliding window (a model whose every attention layer has
# one: ModelConfig hides interleaved windows from it), LoRA was on, or, in 0.5.3-0.6.0, prefix
# caching was; from 0.6.2 never for a multimodal model, and in 0.6.5-0.7.3 never on ROCm
# (`not current_platform.is_rocm()`, gone from 0.8.0's V0). Read in each release's wheel.
V0_CHUNKED_PREFILL_ABOVE_TOKENS = 32_768
V0_LONG_CONTEXT_CHUNKED_SINCE = (0, 5, 3)
V0_LONG_CONTEXT_CHUNKED_WITH_PREFIX_CACHING_SINCE = (0, 6, 1)
V0_LONG_CONTEXT_UNCHUNKED_MULTIMODAL_SINCE = (0, 6, 2)
V0_LONG_CONTEXT_UNCHUNKED_ROCM = ((0, 6, 5), (0, 7, 3))
# Default ceiling of --max-cudagraph-capture-size: min(2 x max_num_seqs, 512), and 1024 on
# data-centre Blackwell (compute capability 10.x: B200, B300, GB200) from 0.28.0
# (vllm/config/vllm.py _set_cudagraph_sizes, default_max_graph_size; 512 everywhere in 0.27.1).
CUDAGRAPH_CAPTURE_CAP = 512
BLACKWELL_CUDAGRAPH_CAPTURE_CAP = 1024
BLACKWELL_CAPTURE_CAP_SINCE = (0, 28, 0)
SWAP_SPACE_BYTES = 4 * GIB_BYTES  # V0 --swap-space default (CPU blocks in its log)
NEWEST_VERSION = (0, 34, 0)
# The oldest release a logged start-up checks (a v0.2.x PagedAttention profile, docs/engines.md).
OLDEST_VERSION = (0, 2, 0)
DEFAULT_MAX_LORA_RANK = 16  # LoRAConfig.max_lora_rank
DEFAULT_MAX_LORAS = 1  # LoRAConfig.max_loras
LORA_EXTRA_VOCAB = 256  # LoRAConfig.lora_extra_vocab_size, removed in 0.12
LORA_EXTRA_VOCAB_UNTIL = (0, 12, 0)
LORA_VOCAB_PADDING = 256  # lora_vocab_padding_size on CUDA: the lm_head LoRA B is padded to it
# Model classes that declare `embedding_modules`, so their embedding and lm_head get LoRA buffers
# too (vllm/model_executor/models/*.py, 0.10.2), by Hugging Face model_type.
LORA_EMBEDDING_MODEL_TYPES = frozenset(
    {
        "apertus",
        "bamba",
        "cohere",
        "exaone",
        "exaone4",
        "falcon_h1",
        "granite",
        "granitemoe",
        "granitemoehybrid",
        "granitemoeshared",
        "jamba",
        "lfm2",
        "llama",
        "minicpm",
        "mistral",
        "mixtral",
        "nemotron",
        "nemotron_h",
        "phimoe",
        "solar",
    }
)


@dataclass(frozen=True)
class VllmRules:
    """What a range of vLLM releases does; the newest entry whose `since` <= version applies."""

    since: tuple[int, int, int]
    engine: Literal["v0", "v1"]
    default_gpu_memory_utilization: float
    subtracts_cudagraph: bool
    tokens: Literal["blocks", "blocks_per_group", "concurrency"]
    log: Literal["v0", "two_line", "one_line"]
    batch_defaults: Literal["v0", "two_tier", "no_a100", "with_160gib"]
    sampler: Literal["sort", "triton"]
    note: str
    non_torch_counts_context: bool = False
    extensible_kv: bool = False
    default_block_size: int = 16


VLLM_RULES: tuple[VllmRules, ...] = (
    VllmRules((0, 0, 0), "v0", 0.9, False, "blocks", "v0", "v0", "sort", "V0 engine"),
    VllmRules(
        (0, 6, 4),
        "v0",
        0.9,
        False,
        "blocks",
        "v0",
        "v0",
        "sort",
        "non-torch = device memory in use - torch allocated (CUDA context included)",
        non_torch_counts_context=True,
    ),
    VllmRules(
        (0, 6, 5),
        "v0",
        0.9,
        False,
        "blocks",
        "v0",
        "v0",
        "sort",
        "memory_profiling: non-torch growth since the baseline snapshot",
    ),
    VllmRules(
        (0, 8, 0),
        "v1",
        0.9,
        False,
        "blocks",
        "two_line",
        "two_tier",
        "sort",
        "V1 default; non-torch = device memory in use - torch allocated (context included)",
        non_torch_counts_context=True,
    ),
    VllmRules(
        (0, 9, 0), "v1", 0.9, False, "blocks", "two_line", "no_a100", "sort", "A100 small tier"
    ),
    VllmRules(
        (0, 10, 0),
        "v1",
        0.9,
        False,
        "blocks_per_group",
        "two_line",
        "no_a100",
        "sort",
        "hybrid KV groups",
    ),
    VllmRules(
        (0, 17, 0),
        "v1",
        0.9,
        False,
        "blocks_per_group",
        "two_line",
        "no_a100",
        "triton",
        "Triton top-k/top-p sampler (no sort in the profile)",
    ),
    VllmRules(
        (0, 20, 0),
        "v1",
        0.92,
        True,
        "concurrency",
        "two_line",
        "no_a100",
        "triton",
        "util 0.92 (PR #38284); CUDA-graph estimate subtracted",
    ),
    VllmRules(
        (0, 28, 0),
        "v1",
        0.92,
        True,
        "concurrency",
        "one_line",
        "with_160gib",
        "triton",
        "one-line capacity log; >= 160 GiB tier",
    ),
    VllmRules(
        (0, 34, 0),
        "v1",
        0.92,
        True,
        "concurrency",
        "one_line",
        "with_160gib",
        "triton",
        "extensible KV cache sized after warm-up (utilization 1.0 by default); block size 64",
        extensible_kv=True,
        default_block_size=64,
    ),
)


def rules_for(version: tuple[int, int, int]) -> VllmRules:
    """The VLLM_RULES entry for a version."""
    return [r for r in VLLM_RULES if r.since <= version][-1]


@dataclass(frozen=True)
class V2RunnerRule:
    """Which models get model runner V2 by default (VllmConfig.use_v2_model_runner)."""

    since: tuple[int, int, int]
    scope: Literal["none", "listed", "dense", "all"]  # listed archs / + dense non-hybrid / all
    architectures: frozenset[str] = frozenset()
    quantized: bool = True  # quantised checkpoints allowed


# vllm/config/vllm.py: DEFAULT_V2_MODEL_RUNNER_ARCHITECTURES and _is_default_v2_model_runner_model
# per release; from 0.29 V2 is the default for every model (bar unsupported features).
V2_RUNNER_RULES: tuple[V2RunnerRule, ...] = (
    V2RunnerRule((0, 0, 0), "none"),
    V2RunnerRule((0, 22, 0), "listed", frozenset({"Qwen3ForCausalLM"}), quantized=False),
    V2RunnerRule(
        (0, 23, 0),
        "listed",
        frozenset({"LlamaForCausalLM", "MistralForCausalLM", "Qwen3ForCausalLM"}),
        quantized=False,
    ),
    V2RunnerRule(
        (0, 24, 0),
        "listed",
        frozenset(
            {
                "Qwen3ForCausalLM",
                "DeepseekV2ForCausalLM",
                "Qwen2MoeForCausalLM",
                "GraniteMoeForCausalLM",
                "LlamaForCausalLM",
                "MistralForCausalLM",
            }
        ),
    ),
    V2RunnerRule(
        (0, 25, 0),
        "dense",
        frozenset({"DeepseekV2ForCausalLM", "Qwen2MoeForCausalLM", "GraniteMoeForCausalLM"}),
    ),
    V2RunnerRule((0, 29, 0), "all"),
)


# Model runner V2 returned 0 from profile_cudagraph_memory() until 0.29, so no CUDA-graph estimate
# was reserved for it even where VLLM_MEMORY_PROFILER_ESTIMATE_CUDAGRAPHS defaulted to 1.
V2_CUDAGRAPH_ESTIMATE_SINCE = (0, 29, 0)
# The worker only estimated graph memory on CUDA (`not is_rocm()` in 0.20, `is_cuda()` through
# 0.25); ROCm joined in 0.26 (`is_cuda_alike()`, PR #44825), other accelerators never.
ROCM_CUDAGRAPH_ESTIMATE_SINCE = (0, 26, 0)
# From 0.33 V2's dummy sampler also runs SamplingParams.for_sampler_warmup() (top-k/top-p, min-p,
# penalties, logprobs: the fp32 pipeline); taken as the V1 Triton figure, not yet checked on a log.
V2_SAMPLER_WARMUP_SINCE = (0, 33, 0)


def has_state_layers(model: ModelSpec) -> bool:
    """Whether a model is hybrid in vLLM's sense: Mamba or linear-attention state layers beside
    (or instead of) attention."""
    return any(not g.kind.per_token for g in model.kv_groups)


def uses_v2_runner(model: ModelSpec, version: tuple[int, int, int], quantized: bool) -> bool:
    """Whether this vLLM version runs this model on model runner V2 by default."""
    rule = [r for r in V2_RUNNER_RULES if r.since <= version][-1]
    if rule.scope == "none" or (quantized and not rule.quantized):
        return False
    if rule.scope == "all" or model.architecture in rule.architectures:
        return True
    hybrid = has_state_layers(model)
    return rule.scope == "dense" and not model.num_experts and not hybrid


# vLLM's V1 engine leaves prefix caching off by default for hybrid models (Mamba or linear-
# attention state beside attention layers): 0.11 turns it off for them (MambaModelConfig), 0.12 -
# 0.25 default it off (ModelConfig.is_prefix_caching_supported: "Hybrid models do not support
# prefix caching"), 0.26 on (the same property: "Generative hybrid models support prefix
# caching"); read in the 0.11.0, 0.12.0, 0.14.0, 0.20.0, 0.25.0, 0.26.0 and 0.34.0 wheels. V0
# (before 0.8) ran every model with it off unless asked (--enable-prefix-caching, store_true:
# vllm/engine/arg_utils.py, 0.6.4).
VLLM_HYBRID_PREFIX_CACHING_SINCE = (0, 26, 0)


# With prefix caching on, a hybrid model's Mamba / linear-attention states are cached at block
# boundaries (--mamba-cache-mode, resolved in MambaModelConfig.verify_and_update_config,
# vllm/model_executor/models/config.py): from 0.20 "all" (a state every block: memory that
# grows with the context) for the models declaring SupportsMambaPrefixCaching (the Mamba-2
# family below, as 0.26 lists it) and "align" for the rest (Qwen3-Next's and Qwen3.5's Gated
# DeltaNet), "align" for every model from 0.28 (read in the 0.20.0, 0.26.0, 0.27.0, 0.28.0,
# 0.30.0 and 0.34.0 wheels). Under "align" a request holds 2 state blocks a Mamba group, plus a
# prefill checkpoint block where its layers export one (MambaSpec.max_memory_usage_bytes: 2 +
# num_speculative_blocks + num_prefill_checkpoint_blocks): Mamba-2 mixers from 0.32
# (mamba_mixer2.py get_kv_cache_spec), Gated DeltaNet from 0.33 where FlashInfer's GDN prefill
# runs ("auto" on Hopper; on Blackwell with 128-dim keys, as Qwen3-Next's and Qwen3.5's, and
# CUDA 13, taken as the wheels' runtime: qwen_gdn_linear_attn.py _resolve_gdn_prefill_backend).
# Without prefix caching ("none") a request holds one. Under "all" a request holds a state
# block a block of context (MambaSpec.max_memory_usage_bytes: cdiv(max_model_len, block)), and
# the attention block is raised to a multiple of lcm(the Mamba chunk, the kernel's alignment)
# whose page covers a state (platforms/interface.py _align_hybrid_block_size: the chunk is
# ModelConfig.get_mamba_chunk_size, mamba_chunk_size or chunk_size in the config, else
# VLLM_MAMBA_DEFAULT_CHUNK_TOKENS; read in the 0.20.0, 0.23.0, 0.26.0 and 0.27.0 wheels).
# Speculative decoding's extra state blocks are not modelled.
VLLM_MAMBA_CACHE_MODES_SINCE = (0, 20, 0)
VLLM_MAMBA_DEFAULT_CHUNK_TOKENS = 2048
VLLM_MAMBA_ALIGN_DEFAULT_SINCE = (0, 28, 0)
_MAMBA2_PREFIX_CACHING = frozenset(
    {
        "NemotronHForCausalLM",
        "Mamba2ForCausalLM",
        "Zamba2ForCausalLM",
        "GraniteMoeHybridForCausalLM",
        "FalconH1ForCausalLM",
    }
)
VLLM_MAMBA_ALL_ARCHS = _MAMBA2_PREFIX_CACHING | {"JambaForCausalLM", "MambaForCausalLM"}
MAMBA_ALIGN_STATE_BLOCKS = 2
# Mamba-2 mixer architectures (the checkpoint's exporter is mamba_mixer2.py's), and the release
# each layer kind starts exporting a prefill checkpoint block in.
VLLM_MAMBA2_ARCHS = _MAMBA2_PREFIX_CACHING | {"BambaForCausalLM"}
VLLM_MAMBA2_CHECKPOINT_SINCE = (0, 32, 0)
VLLM_GDN_CHECKPOINT_SINCE = (0, 33, 0)
# The architectures built on Qwen's Gated DeltaNet layer (qwen_gdn_linear_attn.py, the one GDN
# layer that exports checkpoints; 0.34: qwen3_next.py, qwen3_5.py, interns2_mobius.py and
# interns2_preview.py, built on Qwen3.5's).
VLLM_QWEN_GDN_ARCHS = frozenset(
    {
        "Qwen3NextForCausalLM",
        "Qwen3_5ForCausalLM",
        "Qwen3_5MoeForCausalLM",
        "Qwen3_5ForConditionalGeneration",
        "Qwen3_5MoeForConditionalGeneration",
        "InternS2MobiusForCausalLM",
        "InternS2MobiusForConditionalGeneration",
        "InternS2PreviewForConditionalGeneration",
    }
)
# The compute capabilities FlashInfer's GDN prefill runs on: Hopper 9.x, Blackwell 10.x and
# 12.x (RTX PRO 6000, RTX 50).
GDN_FLASHINFER_MAJORS = (HOPPER_MAJOR, BLACKWELL_MAJOR, CONSUMER_BLACKWELL_MAJOR)
# FlashInfer's GDN prefill exports its states every 64 tokens (FLASHINFER_GDN_CHECKPOINT_
# ALIGNMENT, vllm/v1/attention/backends/gdn_attn.py, 0.34).
GDN_CHECKPOINT_ALIGNMENT_TOKENS = 64


def mamba_cache_mode(
    model: ModelSpec, version: tuple[int, int, int], engine: str, stated: bool | None
) -> str | None:
    """How vLLM keeps a hybrid model's states ("none", "align" or "all"), or None where the
    model has no state layers or the release predates the modes."""
    if not has_state_layers(model) or version < VLLM_MAMBA_CACHE_MODES_SINCE:
        return None
    if not prefix_caching_on(model, version, engine, stated):
        return "none"
    all_mode = model.architecture in VLLM_MAMBA_ALL_ARCHS
    return "all" if all_mode and version < VLLM_MAMBA_ALIGN_DEFAULT_SINCE else "align"


def mamba_state_blocks(
    model: ModelSpec, version: tuple[int, int, int], gpu: GpuSpec, mode: str | None
) -> int | None:
    """State blocks one request holds in each Mamba / linear-attention KV-cache group: 2 under
    "align" (3 where the layers export a prefill checkpoint), None under "all" (one a block of
    context, as an attention layer holds), else 1."""
    if mode == "all":
        return None
    if mode != "align":
        return 1
    checkpoint = False
    if model.architecture in VLLM_MAMBA2_ARCHS:
        checkpoint = version >= VLLM_MAMBA2_CHECKPOINT_SINCE
    elif model.architecture in VLLM_QWEN_GDN_ARCHS:
        flashinfer = capability(gpu)[0] in GDN_FLASHINFER_MAJORS
        checkpoint = flashinfer and version >= VLLM_GDN_CHECKPOINT_SINCE
    return MAMBA_ALIGN_STATE_BLOCKS + int(checkpoint)


def prefix_caching_on(
    model: ModelSpec, version: tuple[int, int, int], engine: str, stated: bool | None
) -> bool:
    """Whether the started vLLM (`engine` "v0" or "v1") serves repeated prompt prefixes from
    its KV cache: as the flag states, else the release's default for the model."""
    if stated is not None:
        return stated
    if engine == "v0":
        return False
    return not has_state_layers(model) or version >= VLLM_HYBRID_PREFIX_CACHING_SINCE


class VllmSettings(BaseModel):
    """vLLM flags that move the KV cache; None = the engine's default for that version and GPU."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    version: str = version_text(NEWEST_VERSION)
    engine: Literal["v0", "v1"] | None = None
    usage_context: Literal["serve", "llm"] = "serve"
    gpu_memory_utilization: float | None = Field(default=None, gt=0, le=1)
    max_model_len: int | None = Field(
        default=None,
        ge=MAX_MODEL_LEN_AUTO,
        description="--max-model-len; MAX_MODEL_LEN_AUTO (-1): `auto`, fitted to the KV cache",
    )
    max_num_batched_tokens: int | None = Field(default=None, gt=0)
    max_num_seqs: int | None = Field(default=None, gt=0)
    block_size: int | None = Field(default=None, gt=0)
    kv_cache_dtype: str = "auto"
    dtype: Literal["auto", "half", "float16", "bfloat16", "float", "float32"] = "auto"
    enforce_eager: bool = False
    async_scheduling: bool | None = Field(
        default=None,
        description="--async-scheduling / --no-async-scheduling: schedule the next step while "
        "the GPU runs this one (None: the release's default, on from 0.14 without PP)",
    )
    stream_interval: int = Field(
        default=1,
        ge=1,
        description="--stream-interval (0.11.1+): a request's tokens sent N at a time",
    )
    enable_prefix_caching: bool | None = Field(
        default=None,
        description="--enable-prefix-caching / --no-enable-prefix-caching: serve repeated "
        "prompt prefixes from the KV cache (None: the release's default for the model, "
        "prefix_caching_on); the pool is the same either way but for hybrid models",
    )
    kv_cache_memory_bytes: int | None = Field(default=None, gt=0)
    tensor_parallel_size: int = Field(default=1, ge=1)
    pipeline_parallel_size: int = Field(default=1, ge=1)
    enable_lora: bool = False
    max_lora_rank: int = Field(default=DEFAULT_MAX_LORA_RANK, gt=0)
    max_loras: int = Field(default=DEFAULT_MAX_LORAS, gt=0)
    enable_expert_parallel: bool = Field(
        default=False,
        description="MoE experts split whole across the MoE ranks (EP = TP x DP) instead of "
        "each sharded",
    )
    data_parallel_size: int = Field(
        default=1,
        ge=1,
        description="DP ranks of one deployment (each its own scheduler, KV cache and "
        "max_num_seqs); on a MoE model the expert layers span TP x DP ranks",
    )
    max_cudagraph_capture_size: int | None = Field(
        default=None,
        gt=0,
        description="--max-cudagraph-capture-size: the largest batch captured in a CUDA graph "
        "(None: min(2 x max_num_seqs, 512))",
    )
    enable_chunked_prefill: bool | None = Field(
        default=None,
        description="--enable-chunked-prefill / --no-enable-chunked-prefill (None: the "
        "release's default: V1 on; V0 on above 32K max_model_len)",
    )
    flashinfer: bool | None = Field(
        default=None,
        description="FlashInfer installed (None: yes for `vllm serve`, the image; no for the "
        "LLM class or a co-located trainer)",
    )
    colocated: bool = Field(
        default=False,
        description="started inside a process that already ran CUDA work (Unsloth, TRL colocate)",
    )
    reserved_bytes: int = Field(
        default=0, ge=0, description="memory other processes hold on each GPU (--reserved-gib)"
    )
    kv_connector: str | None = Field(
        default=None,
        max_length=200,
        description="the KV connector (--kv-transfer-config's kv_connector, or the one "
        "--kv-offloading-backend names): its GPU-side buffers join the ledger",
    )
    kv_connector_chunk_tokens: int = Field(
        default=LMCACHE_CHUNK_TOKENS, gt=0, le=2**20, description="LMCache's chunk_size"
    )
    num_scheduler_steps: int = Field(
        default=1,
        ge=1,
        description="--num-scheduler-steps: V0's multi-step rounds (0.6.0 - 0.10.0; 0.8 on, "
        "the V1 oracle falls back to V0 for them)",
    )
    distributed_executor_backend: str | None = Field(
        default=None,
        max_length=64,
        description="--distributed-executor-backend as the line names it (None: the release's "
        "choice); 0.8.3 - 0.9.0 run pipeline stages on V1 only under some executors",
    )
    all2all_backend: str | None = Field(
        default=None,
        max_length=64,
        description="--all2all-backend: the MoE exchange under EP over DP > 1 ranks (None: the "
        "release's allgather_reducescatter); the planner prices it and DeepEP's two modes",
    )
    enable_dbo: bool = Field(
        default=False,
        description="--enable-dbo: dual-batch overlap, each step's DeepEP exchange under the "
        "other micro-batch's compute (needs a DeepEP --all2all-backend)",
    )
    calibration: Calibration | None = Field(
        default=None, description="per-deployment corrections measured from start-up logs"
    )


class MeasuredTerms(BaseModel):
    """Terms read from a start-up log; each replaces the modelled one."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    total_memory_bytes: int | None = None
    total_memory_source: TermSource = "log"
    weights_bytes: int | None = None
    activation_peak_bytes: int | None = None
    non_torch_bytes: int | None = None
    cudagraph_bytes: int | None = None


# vLLM 0.33.0 keeps the GB10 (DGX Spark, compute capability 12.1) on the small batch tier:
# "has the memory but not the compute of a large discrete GPU" (vllm/engine/arg_utils.py
# _get_batch_defaults, is_gb10; absent from 0.32.0).
GB10_CAPABILITY = (12, 1)
GB10_SMALL_TIER_SINCE = (0, 33, 0)
# V1's max_num_seqs on the large-memory tiers, the largest any release defaults to
# (vllm/engine/arg_utils.py _get_batch_defaults; vllm.md section 2).
V1_LARGE_TIER_MAX_NUM_SEQS = 1024


def batch_defaults(
    kind: str,
    memory_bytes: int,
    gpu_name: str,
    usage: str,
    max_model_len: int,
    chunked: bool,
    version: tuple[int, int, int] = NEWEST_VERSION,
    gpu_capability: tuple[int, int] = (99, 0),
) -> tuple[int, int]:
    """(max_num_batched_tokens, max_num_seqs) vLLM picks when unset (vllm.md section 2).
    Without chunked prefill (`chunked`: `chunked_prefill`'s answer) a step must hold a whole
    prompt, so the budget is raised to max_model_len. From 0.33 a GB10 (DGX Spark) stays on
    the small tier whatever its unified memory."""
    if kind == "v0":
        if chunked:
            old = version < V0_CHUNKED_BATCHED_TOKENS_SINCE
            tokens = V0_CHUNKED_BATCHED_TOKENS_OLD if old else V0_MIN_BATCHED_TOKENS
            return tokens, V0_MAX_NUM_SEQS
        return max(max_model_len, V0_MIN_BATCHED_TOKENS), V0_MAX_NUM_SEQS
    gib = memory_bytes / GIB_BYTES
    serve = usage == "serve"
    is_a100 = "a100" in gpu_name.lower()
    small = gpu_capability == GB10_CAPABILITY and version >= GB10_SMALL_TIER_SINCE
    if small:
        tokens, seqs = (2048 if serve else 8192), 256
    elif kind == "with_160gib" and gib >= 160:
        tokens, seqs = 16384, V1_LARGE_TIER_MAX_NUM_SEQS
    elif gib >= 70 and not (is_a100 and kind != "two_tier"):
        tokens, seqs = (8192 if serve else 16384), V1_LARGE_TIER_MAX_NUM_SEQS
    else:
        tokens, seqs = (2048 if serve else 8192), 256
    if not chunked:
        tokens = max(tokens, max_model_len)
    return tokens, seqs


def chunked_prefill(at: _Release, max_model_len: int) -> bool:
    """Whether the scheduler splits prompts across steps: the flag, else the release's default
    (vllm.md section 1: V1 has always defaulted it on for generative models; V0 from 0.5.3
    turned it on for a max_model_len above 32K where nothing it names stood in the way)."""
    s, version, model = at.settings, at.version, at.model
    if s.enable_chunked_prefill is not None:
        return s.enable_chunked_prefill
    if at.engine != "v0":
        return True
    if max_model_len <= V0_CHUNKED_PREFILL_ABOVE_TOKENS or version < V0_LONG_CONTEXT_CHUNKED_SINCE:
        return False
    attention = [g for g in model.kv_groups if g.kind.per_token]
    windowed = bool(attention) and all(g.kind is KvKind.SLIDING for g in attention)
    prefix = bool(s.enable_prefix_caching)
    blocked = (
        windowed
        or s.enable_lora
        or (prefix and version < V0_LONG_CONTEXT_CHUNKED_WITH_PREFIX_CACHING_SINCE)
        or (model.has_vision and version >= V0_LONG_CONTEXT_UNCHUNKED_MULTIMODAL_SINCE)
        or (
            at.gpu.vendor == "amd"
            and V0_LONG_CONTEXT_UNCHUNKED_ROCM[0] <= version <= V0_LONG_CONTEXT_UNCHUNKED_ROCM[1]
        )
    )
    return not blocked


def unchunked_budget_refusal(settings: dict[str, object]) -> str | None:
    """Why vLLM refuses to start when chunked prefill is off and a step cannot hold a whole
    max_model_len prompt (vllm.md section 2: the scheduler config's validation), else None."""
    if settings.get("enable_chunked_prefill") is not False:
        return None
    tokens = int(str(settings["max_num_batched_tokens"]))
    length = int(str(settings["max_model_len"]))
    if tokens >= length:
        return None
    return (
        f"vLLM refuses to start: max_num_batched_tokens ({tokens:,}) is smaller than "
        f"max_model_len ({length:,}) with chunked prefill off (raise "
        "--max-num-batched-tokens, lower --max-model-len or pass --enable-chunked-prefill)"
    )


def allreduce_fusion(
    gpu: GpuSpec, version: tuple[int, int, int], tp: int, pp: int, eager: bool
) -> bool:
    """Whether vLLM builds FlashInfer's all-reduce + RMSNorm fusion workspace (see above)."""
    major, minor = capability(gpu)
    hopper_or_blackwell = (major, minor) == (9, 0) or major == 10
    return (
        version >= ALLREDUCE_FUSION_SINCE
        and hopper_or_blackwell
        and tp in ALLREDUCE_FUSION_TP_SIZES
        and (pp == 1 or version >= ALLREDUCE_FUSION_WITH_PP_SINCE)
        and not eager
    )


def capture_cap(version: tuple[int, int, int], gpu: GpuSpec) -> int:
    """The release's default ceiling on CUDA-graph capture sizes for this card."""
    if capability(gpu)[0] == BLACKWELL_MAJOR and version >= BLACKWELL_CAPTURE_CAP_SINCE:
        return BLACKWELL_CUDAGRAPH_CAPTURE_CAP
    return CUDAGRAPH_CAPTURE_CAP


def capture_sizes(
    max_num_seqs: int,
    max_num_batched_tokens: int,
    largest: int | None = None,
    cap: int = CUDAGRAPH_CAPTURE_CAP,
) -> list[int]:
    """CUDA-graph capture sizes (vllm.md section 1.4): 1, 2, 4, every 8 to 248, every 16 from
    256, up to --max-cudagraph-capture-size (`largest`; default min(2 x max_num_seqs, `cap`),
    `capture_cap`'s), never past max_num_batched_tokens."""
    top = min(largest or min(max_num_seqs * 2, cap), max_num_batched_tokens)
    sizes = [s for s in (1, 2, 4) if s <= top]
    sizes += list(range(8, min(248, top) + 1, 8))
    sizes += list(range(256, top + 1, 16))
    if max_num_batched_tokens <= top and max_num_batched_tokens not in sizes:
        sizes.append(max_num_batched_tokens)
    return sorted(set(sizes))


def sampler_bytes_per_logit(kind: str, act_bytes: int) -> float:
    """Bytes live at the dummy sampler's peak per logit, for one implementation (see above)."""
    if kind == "logits":
        return act_bytes
    if kind == "triton":
        return TRITON_SAMPLER_BYTES_PER_LOGIT
    if kind == "flashinfer":
        return FLASHINFER_SAMPLER_BYTES_PER_LOGIT
    return SORT_SAMPLER_BYTES_PER_LOGIT


def activation_peak_bytes(
    model: ModelSpec,
    tokens: int,
    seqs: int,
    tp: int,
    act_bytes: int,
    sampler: str = "triton",
    xformers: bool = False,
    expert_parallel: bool = False,
    moe_ranks: int | None = None,
    rescale_bytes_per_token: int = 0,
) -> int:
    """Torch peak above the weights during profiling: max(forward, sampler) + MoE workspace.
    `moe_ranks`: the GPUs the MoE layers span (TP x DP under data parallelism; None: TP).
    `rescale_bytes_per_token`: fp32 copies an unfused fp8 rescale holds beside the forward's
    buffers (step.gemm.unfused_dequant_peak_bytes_per_token; 0 where the GEMM fuses it)."""
    hidden = model.hidden_size
    inter = (model.intermediate_size or 4 * hidden) // tp
    if model.num_experts:
        inter = 0  # MoE FFNs run through the fused-MoE workspaces below
    query = XFORMERS_QUERY_BUFFERS * model.num_attention_heads * model.head_dim // tp
    forward = tokens * (
        FORWARD_INTERMEDIATE_BUFFERS * inter
        + FORWARD_HIDDEN_BUFFERS * hidden
        + (query if xformers else 0)
    )
    forward = forward * act_bytes + tokens * rescale_bytes_per_token
    per_logit = sampler_bytes_per_logit(sampler, act_bytes)
    sampler_peak = per_logit * seqs * (model.vocab_size or 0)
    workspace = 0
    if model.num_experts and model.experts_per_token and model.moe_intermediate_size:
        # With expert parallelism each rank holds whole experts, so the width is not split.
        moe = model.moe_intermediate_size // (1 if expert_parallel else moe_ranks or tp)
        # fused_moe keeps workspace13 (max(2I, H)) and workspace2 (I) per routed token.
        workspace = tokens * model.experts_per_token * (max(2 * moe, hidden) + moe) * act_bytes
    return int(max(forward, sampler_peak) + workspace)


def lora_bytes(
    model: ModelSpec,
    rank: int,
    loras: int,
    tp: int,
    pp: int,
    act_bytes: int,
    version: tuple[int, int, int],
) -> int:
    """The LoRA manager's stacked A/B buffers on one rank, allocated with the weights.

    Every linear layer of a decoder layer gets max_loras x (rank x in + out x rank) in the model
    dtype (vllm/lora/layers: column-parallel layers keep A whole and shard B's outputs, row-
    parallel ones shard A's inputs and keep B whole); models that declare embedding_modules also
    get embedding and lm_head buffers. MoE expert weights are not counted.
    """
    hidden = model.hidden_size
    q_out = model.num_attention_heads * model.head_dim // tp
    kv_out = kv_heads_per_rank(model.num_kv_heads, tp) * model.head_dim
    inter = 0 if model.num_experts else (model.intermediate_size or 4 * hidden) // tp
    # qkv: A 3 x (r x H), B (q + 2 kv) x r | o: A r x q, B H x r | gate_up: A 2 x (r x H),
    # B 2I x r | down: A r x I, B H x r
    per_layer = rank * (3 * hidden + q_out + 2 * kv_out + q_out + hidden)
    if inter:
        per_layer += rank * (2 * hidden + 2 * inter + inter + hidden)
    elements = per_layer * ceil_div(model.num_layers, pp)
    if model.model_type in LORA_EMBEDDING_MODEL_TYPES and model.vocab_size:
        extra = LORA_EXTRA_VOCAB if version < LORA_EXTRA_VOCAB_UNTIL else 0
        vocab_padded = ceil_div(model.vocab_size, LORA_VOCAB_PADDING) * LORA_VOCAB_PADDING
        embed = extra * hidden + (model.vocab_size + extra) * rank + hidden * rank
        head = rank * hidden + vocab_padded * rank + extra * hidden
        elements += embed + head
    return elements * loras * act_bytes


def connector_buffer_bytes(
    model: ModelSpec,
    tp: int,
    pp: int,
    kv_bytes: int,
    connector: str | None,
    chunk_tokens: int,
    ds_mla: bool = False,
) -> int:
    """A KV connector's GPU-side buffer on one GPU, as modelled. LMCache's GPU connector
    stages one chunk of this rank's KV (chunk_size tokens x every layer's K and V) to copy it
    to and from its CPU tier (lmcache/v1/gpu_connector.py); vLLM's native OffloadingConnector
    and NIXL move blocks straight from the pool (none). A log of the deployment calibrates it
    (`planner calibrate`: the non-KV remainder a connector's log leaves)."""
    if connector is None or not connector.lower().startswith("lmcache"):
        return 0
    buckets = _buckets(model, tp, pp, 1, kv_bytes, ds_mla=ds_mla)
    per_token = sum(b.layers * b.page_bytes for b in buckets if b.kind.per_token)
    return chunk_tokens * per_token


@dataclass(frozen=True)
class _Bucket:
    kind: KvKind
    layers: int
    page_bytes: int
    window: int | None


def _buckets(
    model: ModelSpec,
    tp: int,
    pp: int,
    block: int,
    kv_bytes: int,
    stage: int | None = None,
    ds_mla: bool = False,
    states: bool = True,
) -> list[_Bucket]:
    """Layer buckets of one rank: `stage` layers of the model's when a PP stage is named
    (`ds_mla`: MLA latents in DeepSeek's scaled fp8 layout; `states`: whether the Mamba /
    linear-attention states page in the pool, as V1's hybrid allocator pages them, not V0)."""
    out = []
    for g in model.kv_groups:
        if not (states or g.kind.per_token):
            continue
        layers = ceil_div(g.num_layers, pp)
        if stage is not None:
            layers = ceil_div(g.num_layers * stage, model.num_layers)
        page = _page_bytes(g, tp, block, kv_bytes, ds_mla)
        out.append(_Bucket(g.kind, layers, page, g.window_tokens))
    return out


def ds_mla_layout(model: ModelSpec, version: tuple[int, int, int], flag: str) -> bool:
    """Whether a vLLM release stores this model's KV in DeepSeek's scaled fp8 layout for the
    --kv-cache-dtype spelling `flag` (see DS_MLA_SINCE): any sparse-attention model where the
    flag names it, DeepSeek-V3.2 where the release turns `auto` or fp8 into it."""
    if not is_dsa(model):
        return False
    if flag == DS_MLA_FLAG:
        return version >= DS_MLA_SINCE
    if model.architecture != DS_MLA_ARCHITECTURE or not DS_MLA_SINCE <= version < DS_MLA_UNTIL:
        return False
    if flag == "auto" and checkpoint_fp8_kv(model, version, flag):
        # the engine resolves `auto` to the checkpoint's FP8 cache before the model's config
        # hook runs (EngineArgs.create_engine_config builds CacheConfig with it; VllmConfig's
        # post-init calls the hook): the hook sees an fp8 spelling
        flag = "fp8"
    return flag.startswith("fp8") or (flag == "auto" and version < DS_MLA_AUTO_UNTIL)


def _check_all2all(settings: VllmSettings, version: tuple[int, int, int]) -> None:
    """--all2all-backend: a backend the planner prices, on a release that takes the flag."""
    backend = settings.all2all_backend
    if backend is None:
        return
    if version < ALL2ALL_FLAG_SINCE:
        raise InputError(
            "--all2all-backend",
            f"vLLM takes it from {version_text(ALL2ALL_FLAG_SINCE)} (this plan runs vLLM "
            f"{version_text(version)}, which reads VLLM_ALL2ALL_BACKEND)",
        )
    if backend not in PRICED_ALL2ALL:
        raise InputError(
            "--all2all-backend",
            f"{backend!r} is not modelled; accepted: {', '.join(PRICED_ALL2ALL)}",
        )


def _check_dbo(settings: VllmSettings, version: tuple[int, int, int]) -> None:
    """--enable-dbo: on a release that has it, with a DeepEP backend vLLM runs it with."""
    if not settings.enable_dbo:
        return
    if version < DBO_SINCE:
        raise InputError(
            "--enable-dbo",
            f"vLLM takes it from {version_text(DBO_SINCE)} (this plan runs vLLM "
            f"{version_text(version)})",
        )
    if settings.all2all_backend not in (DEEPEP_HIGH_THROUGHPUT, DEEPEP_LOW_LATENCY):
        raise InputError(
            "--enable-dbo",
            "vLLM overlaps micro-batches only over DeepEP's all-to-all: add --all2all-backend "
            f"{DEEPEP_LOW_LATENCY} or {DEEPEP_HIGH_THROUGHPUT}",
        )


def deepep_mode(settings: VllmSettings) -> str | None:
    """The DeepEP kernels the MoE layers run (DEEPEP_HIGH_THROUGHPUT / DEEPEP_LOW_LATENCY), or
    None: another backend, or no expert parallelism over DP > 1 ranks for them to run in."""
    backend = settings.all2all_backend
    if backend not in (DEEPEP_HIGH_THROUGHPUT, DEEPEP_LOW_LATENCY):
        return None
    if not settings.enable_expert_parallel or settings.data_parallel_size < 2:
        return None
    return backend


def batched_dp_moe(settings: VllmSettings, version: tuple[int, int, int]) -> bool:
    """Whether the release's max_num_batched_tokens default is BATCHED_DP_MOE_TOKENS: DeepEP's
    low-latency kernels running (deepep_mode) on a release from BATCHED_DP_MOE_SINCE."""
    return version >= BATCHED_DP_MOE_SINCE and deepep_mode(settings) == DEEPEP_LOW_LATENCY


def deepep_ll_rdma_bytes(tokens: int, hidden: int, experts: int) -> int:
    """DeepEP's low-latency RDMA buffer for `tokens` per rank of `hidden` values routed to
    `experts` (get_low_latency_rdma_size_hint)."""
    scales = hidden // DEEPEP_LL_SCALE_VALUES
    dispatch_msg = DEEPEP_LL_HEADER_BYTES + max(2 * hidden, hidden + 4 * scales)
    combine_msg = 4 * scales + 2 * hidden
    send = max(tokens * dispatch_msg, experts * tokens * combine_msg)
    receive = experts * tokens * max(dispatch_msg, combine_msg)
    signal = ceil_div(experts * 4, DEEPEP_ALIGN_BYTES) * DEEPEP_ALIGN_BYTES
    total = 2 * (send + receive + signal)
    return (total + DEEPEP_ALIGN_BYTES) // DEEPEP_ALIGN_BYTES * DEEPEP_ALIGN_BYTES


def deepep_buffer_bytes(
    model: ModelSpec,
    gpu: GpuSpec,
    settings: VllmSettings,
    version: tuple[int, int, int],
    tokens: int,
) -> int:
    """The DeepEP buffers one GPU holds (0 where the kernels do not run): NVLink bytes in
    either mode; RDMA bytes where the high-throughput kernels' ranks span hosts, or the
    low-latency layout for its token cap (`tokens`, the step budget, from 0.20)."""
    mode = deepep_mode(settings)
    if mode is None or not model.num_experts:
        return 0
    ranks = settings.tensor_parallel_size * settings.data_parallel_size
    host = NVL72_TRAY_GPUS if gpu.id.startswith(NVL72_PREFIXES) else NODE_DOMAIN_GPUS
    if mode == DEEPEP_HIGH_THROUGHPUT:
        return DEEPEP_BUFFER_BYTES * (2 if ranks > host else 1)
    hidden = next((h for h in DEEPEP_LL_HIDDEN_SIZES if h >= model.hidden_size), None)
    if hidden is None:
        raise InputError(
            "--all2all-backend",
            f"{DEEPEP_LOW_LATENCY} takes hidden sizes up to {DEEPEP_LL_HIDDEN_SIZES[-1]:,}; "
            f"{model.name}'s is {model.hidden_size:,}",
        )
    cap = tokens if version >= BATCHED_DP_MOE_SINCE else MOE_DP_CHUNK_TOKENS
    return DEEPEP_BUFFER_BYTES + deepep_ll_rdma_bytes(cap, hidden, model.num_experts)


# A checkpoint whose quantization declares an FP8 KV cache (ModelSpec.fp8_kv_declared_by): vLLM
# resolves `auto` to it from 0.14 for ModelOpt's (EngineArgs.create_engine_config calls
# utils/torch_utils.py resolve_kv_cache_dtype_string, which reads kv_cache_quant_algo or an
# 8-bit-float kv_cache_scheme where quant_method starts "modelopt"; absent in the 0.13.0 wheel).
# An llm-compressor kv_cache_scheme sets fp8 in the attention layer: in 0.15-0.21 whatever the
# flag says ("llm-compressor mdls need to set cache_dtype to 'fp8' manually"), from 0.22 for
# `auto` only (model_executor/layers/attention/attention.py; absent in 0.14.0). An fp8
# config's own kv_cache_quant_algo is not read.
CHECKPOINT_KV_MODELOPT_SINCE = (0, 14, 0)
CHECKPOINT_KV_SCHEME_SINCE = (0, 15, 0)
CHECKPOINT_KV_SCHEME_AUTO_ONLY_SINCE = (0, 22, 0)


def checkpoint_fp8_kv(model: ModelSpec, version: tuple[int, int, int], flag: str) -> bool:
    """Whether vLLM runs the KV cache in fp8 because the checkpoint declares one (see
    CHECKPOINT_KV_MODELOPT_SINCE)."""
    by = model.fp8_kv_declared_by
    if by == "modelopt":
        return flag == "auto" and version >= CHECKPOINT_KV_MODELOPT_SINCE
    if by == "compressed-tensors" and version >= CHECKPOINT_KV_SCHEME_SINCE:
        return flag == "auto" or version < CHECKPOINT_KV_SCHEME_AUTO_ONLY_SINCE
    return False


def glm_dsa_fp8_kv(
    model: ModelSpec, gpu: GpuSpec, version: tuple[int, int, int], flag: str
) -> bool:
    """Whether vLLM runs GLM-5's KV cache in fp8 for `auto` (see GLM_DSA_FP8_KV_SINCE)."""
    return (
        flag == "auto"
        and model.architecture == GLM_DSA_ARCHITECTURE
        and gpu.vendor == "nvidia"
        and capability(gpu)[0] == BLACKWELL_MAJOR
        and version >= GLM_DSA_FP8_KV_SINCE
    )


def _page_bytes(g: KvLayerGroup, tp: int, block: int, kv_bytes: int, ds_mla: bool = False) -> int:
    if g.kind is KvKind.MLA:
        latent = g.latent_dim * kv_bytes
        if ds_mla:
            latent = ds_mla_latent_bytes(g.latent_dim, g.rope_dim)
        return block * (latent + g.indexer_bytes_per_token)
    if g.kind.per_token:
        return (
            block * kv_heads_per_rank(g.num_kv_heads, tp) * (g.head_dim_k + g.head_dim_v) * kv_bytes
        )
    return layer_state_bytes(g, tp)


def _kv_groups(buckets: list[_Bucket]) -> tuple[int, list[tuple[_Bucket, int]]]:
    """vLLM's KV-cache groups: layers per group, and how many groups each bucket needs."""
    sizes = [b.layers for b in buckets]
    if len(buckets) == 1:
        return sizes[0], [(buckets[0], 1)]
    small, large = min(sizes), max(sizes)
    group_size = large if large < 1.5 * small else small
    return group_size, [(b, ceil_div(b.layers, group_size)) for b in buckets]


def request_blocks(model: ModelSpec, p: EnginePrediction, tokens: int) -> int:
    """Blocks one request of `tokens` tokens holds under a prediction's settings once it
    decodes: V1 frees a sliding-window (chunked-local) group's blocks behind its window
    (chunk), so there it holds the window, not the window and a step's tokens that its start
    check counts (grouped_pool)."""
    return _prediction_blocks(model, p, tokens, start_check=False)


def grouped_pool(model: ModelSpec, p: EnginePrediction) -> tuple[int, int] | None:
    """A V1 pool of KV-cache groups of more than one kind, in a simulator's terms: blocks of
    one full-attention group (a block per `block_size` tokens of a request), and the blocks a
    running sequence holds in the other groups whatever its length, in those units (rounded up
    where groups share them). A Mamba / linear-attention group holds its state blocks
    (mamba_state_blocks; under "all" a block per block of context, as attention does); a
    sliding-window group the window once decoding, cdiv(W - 1, block) + 1 (V1 frees the blocks
    behind it: SlidingWindowManager.remove_skipped_blocks; a request shorter than the window
    holds fewer, counted as this many); a chunked-local group its chunk, cdiv(C, block)
    (ChunkedLocalAttentionManager). None where one kind of group holds the whole pool (its
    token count stands), under V0, or without a full-attention group."""
    engine = str(p.settings.get("engine"))
    model = pool_model(model, engine, parse_version(p.version), connector_of(p))
    kinds = {g.kind for g in model.kv_groups}
    full = {KvKind.FULL, KvKind.MLA}
    if engine == "v0" or p.num_gpu_blocks is None or not kinds & full or kinds <= full:
        return None
    tp = int(str(p.settings["tensor_parallel_size"]))
    pp = int(str(p.settings["pipeline_parallel_size"]))
    block = int(str(p.settings["block_size"]))
    groups = _kv_groups(_buckets(model, tp, pp, block, 1))[1]
    all_mode = p.settings.get("mamba_cache_mode") == "all"
    state_blocks = int(str(p.settings.get("mamba_state_blocks") or 1))
    growing = fixed = 0
    for b, n in groups:
        if b.kind in full or (all_mode and not b.kind.per_token):
            growing += n
        elif not b.kind.per_token:
            fixed += n * state_blocks
        elif b.kind is KvKind.SLIDING and b.window is not None:
            fixed += n * (ceil_div(b.window - 1, block) + 1)
        elif b.kind is KvKind.CHUNKED and b.window is not None:
            fixed += n * ceil_div(b.window, block)
        else:
            growing += n
    usable = p.num_gpu_blocks - 1  # vLLM keeps the null block back
    return usable // growing, ceil_div(fixed, growing)


def connector_of(p: EnginePrediction) -> str | None:
    """The KV connector a prediction's server runs (None: none)."""
    name = p.settings.get("kv_connector")
    return None if name is None else str(name)


def start_blocks(model: ModelSpec, p: EnginePrediction, tokens: int) -> int:
    """Blocks vLLM's start check (and `--max-model-len auto`) counts for one request of
    `tokens` tokens: the sum over KV-cache groups, or 0.14-0.18's first group alone."""
    return _prediction_blocks(model, p, tokens, start_check=True)


def _prediction_blocks(
    model: ModelSpec, p: EnginePrediction, tokens: int, start_check: bool
) -> int:
    """One request's blocks under a prediction's settings, as held or as the start check
    counts them."""
    block = int(str(p.settings["block_size"]))
    tp = int(str(p.settings["tensor_parallel_size"]))
    pp = int(str(p.settings["pipeline_parallel_size"]))
    engine = str(p.settings.get("engine"))
    model = pool_model(model, engine, parse_version(p.version), connector_of(p))
    in_flight = int(str(p.settings["max_num_batched_tokens"]))
    if not start_check and engine != "v0":
        in_flight = 0  # held while decoding: the window alone (request_blocks)
    stated = p.settings.get("mamba_state_blocks")
    all_mode = p.settings.get("mamba_cache_mode") == "all"
    state_blocks = None if all_mode else int(str(stated or 1))
    states = paged_states(model, engine)
    buckets = _buckets(model, tp, pp, block, 1, states=states)
    if start_check:
        groups = _counted_groups(buckets, parse_version(p.version))
    else:
        groups = _kv_groups(buckets)[1]
    return _blocks(groups, tokens, block, in_flight, state_blocks)


def _blocks(
    groups: list[tuple[_Bucket, int]],
    tokens: int,
    block: int,
    in_flight: int,
    state_blocks: int | None = 1,
) -> int:
    """Blocks one request of `tokens` tokens takes over KV-cache groups (bucket, how many);
    `state_blocks` in each Mamba / linear-attention group (mamba_state_blocks; None: one a
    block of context)."""
    return sum(n * _request_blocks(b, tokens, block, in_flight, state_blocks) for b, n in groups)


def _counted_groups(
    buckets: list[_Bucket], version: tuple[int, int, int]
) -> list[tuple[_Bucket, int]]:
    """The KV-cache groups whose blocks vLLM's start check adds up for one request (see
    MAX_MODEL_LEN_AUTO): all of them, or 0.14-0.18's first one standing for the rest."""
    _size, groups = _kv_groups(buckets)
    if AUTO_FIT_SINCE <= version < AUTO_FIT_SUMS_GROUPS_SINCE:
        return [(groups[0][0], 1)]
    return groups


def pp_partition(num_layers: int, pp: int) -> list[int]:
    """Decoder layers per pipeline stage (vllm/distributed/utils.py get_pp_indices): even, the
    remainder to the stages before the last."""
    parts = [num_layers // pp] * pp
    for i in range(2, num_layers % pp + 2):
        parts[-i] += 1
    return parts


@dataclass(frozen=True)
class _Stage:
    index: int
    layers: int
    weights: int
    activation: int
    graph: int
    blocks: int
    bytes_per_block: int


def _pp_stage(
    at: _Release,
    lay: _Layout,
    checkpoint_bytes: int,
    avg: tuple[int, int, int],
    act_without_sampler: int,
    act_modelled: int,
    budget: int,
    notes: list[str],
) -> _Stage:
    """The PP stage vLLM sizes the KV cache by (the fewest blocks: _binding_stage), with a
    note of every stage's layers and blocks."""
    pp = at.settings.pipeline_parallel_size
    bound, stages = _binding_stage(
        at, lay, checkpoint_bytes, avg, act_without_sampler, act_modelled, budget
    )
    notes.append(
        f"PP {pp}: stages of {'/'.join(str(st.layers) for st in stages)} layers hold "
        f"{', '.join(f'{max(st.blocks, 0):,}' for st in stages)} KV blocks (embedding on "
        "the first, lm_head and sampler on the last); vLLM takes the smallest, stage "
        f"{bound.index}'s"
    )
    return bound


def _binding_stage(
    at: _Release,
    lay: _Layout,
    checkpoint_bytes: int,
    avg: tuple[int, int, int],
    act_without_sampler: int,
    act_modelled: int,
    budget: int,
) -> tuple[_Stage, list[_Stage]]:
    """Each PP stage's memory, and the one with the fewest KV blocks (vLLM takes the minimum).

    The first stage holds the embedding, the last the lm_head (a tied model's last stage holds
    its own copy of the embedding: vllm/model_executor/models/llama.py) and runs the sampler;
    `avg` (weights, activation, graph) is the even-split prediction the stages are moved from.
    """
    model, tp = at.model, at.settings.tensor_parallel_size
    pp = at.settings.pipeline_parallel_size
    w_avg, act, graph_avg = avg
    matrix = model.embedding_params * lay.act_bytes
    in_checkpoint = matrix * (1 if model.tied_embeddings else 2)
    body = max(0, checkpoint_bytes - in_checkpoint)
    even = ceil_div(checkpoint_bytes, tp * pp)
    layers_even = ceil_div(model.num_layers, pp)
    ratio = act / act_modelled if act_modelled else 1.0
    stages = []
    parts = pp_partition(model.num_layers, pp)
    for i, n in enumerate(parts):
        own = body * n // model.num_layers + matrix * ((i == 0) + (i == pp - 1))
        weights = w_avg + ceil_div(own, tp) - even
        activation = act if i == pp - 1 else round(act_without_sampler * ratio)
        graph = graph_avg * n // layers_even
        buckets = _buckets(
            model, tp, pp, lay.block, lay.kv_bytes, n, lay.ds_mla, paged_states(model, at.engine)
        )
        group_size, _groups = _kv_groups(buckets)
        per_block = group_size * max(b.page_bytes for b in buckets)
        blocks = (budget - weights - activation - graph) // per_block
        stages.append(_Stage(i, n, weights, activation, graph, blocks, per_block))
    return min(stages, key=lambda st: (st.blocks, -st.index)), stages


def _mamba_mode(at: _Release) -> str | None:
    """mamba_cache_mode for the release's model and flags."""
    return mamba_cache_mode(at.model, at.version, at.engine, at.settings.enable_prefix_caching)


def _checkpoint_alignment(at: _Release) -> int:
    """The token grid a hybrid block must also fall on under "align" mode: FlashInfer's GDN
    prefill exports its checkpoints every GDN_CHECKPOINT_ALIGNMENT_TOKENS (vLLM's platform
    makes the block a multiple of it: interface.py _align_hybrid_block_size, 0.34), 1
    elsewhere (Mamba-2 checkpoints land on any token)."""
    if (
        at.model.architecture in VLLM_QWEN_GDN_ARCHS
        and (_state_blocks(at) or 0) > MAMBA_ALIGN_STATE_BLOCKS
    ):
        return GDN_CHECKPOINT_ALIGNMENT_TOKENS
    return 1


def _state_blocks(at: _Release) -> int | None:
    """mamba_state_blocks for the release's model, card and flags."""
    return mamba_state_blocks(at.model, at.version, at.gpu, _mamba_mode(at))


def _request_blocks(
    b: _Bucket, max_len: int, block: int, in_flight: int, state_blocks: int | None = 1
) -> int:
    if b.kind in (KvKind.MAMBA, KvKind.LINEAR):
        return ceil_div(max_len, block) if state_blocks is None else state_blocks
    if b.kind is KvKind.SLIDING and b.window is not None:
        return ceil_div(min(b.window - 1 + in_flight, max_len), block) + 1
    if b.kind is KvKind.CHUNKED and b.window is not None:
        return ceil_div(min(b.window + in_flight, max_len), block)
    return ceil_div(max_len, block)


@dataclass(frozen=True)
class _Release:
    """What every phase of a prediction reads: the model, the card, the flags, and the
    engine and release's rules they run under."""

    model: ModelSpec
    gpu: GpuSpec
    settings: VllmSettings
    engine: str
    rules: VllmRules
    version: tuple[int, int, int]


@dataclass(frozen=True)
class _Profile:
    """How the start-up profile runs: the model runner, the sampler it warms up, and whether
    its attention is XFormers'."""

    runner: str
    sampler: str
    xformers: bool


@dataclass(frozen=True)
class _Pool:
    """The paged KV pool the available bytes buy, and what vLLM reports of it."""

    block: int
    bytes_per_block: int
    num_blocks: int
    blocks_per_request: int
    num_groups: int
    kv_tokens: int
    concurrency: float


@dataclass(frozen=True)
class _Layout:
    """What the flags resolve to before any memory is counted: the context, the share of the
    card asked for, the KV block and the dtypes the pool and the activations are stored in."""

    max_len: int
    extensible: bool
    util: float
    block: int
    block_note: str | None
    kv_dtype: str
    kv_bytes: int
    act_bytes: int
    ds_mla: bool


@dataclass(frozen=True)
class _Ledger:
    """The memory the start-up profile charges before the KV cache, and the scheduler limits
    it was profiled at."""

    total: int
    requested: int
    weights: int
    activation: int
    non_torch: int
    connector: int
    graph: int
    graph_max_batch: int | None
    stage_layers: int | None
    tokens: int
    seqs: int
    chunked: bool
    profile: _Profile
    state_cache: int = 0  # V0's Mamba state cache, in `activation` (_v0_state_cache)

    @property
    def charged(self) -> int:
        """Everything the profile takes out of the requested memory but the KV cache."""
        return self.weights + self.activation + self.non_torch + self.graph + self.connector


# vLLM 0.8 - 0.10 start the V1 engine unless its oracle finds something V1 lacks, and then fall
# back to V0 with a warning ("... is not supported by the V1 Engine. Falling back to V0.":
# engine/arg_utils.py _is_v1_supported_oracle, read in the 0.8.0 - 0.10.2 wheels; 0.11 removed
# V0). The planner follows the fallbacks its inputs decide:
# - an NVIDIA card below compute capability 8.0 (no FlashAttention), until 0.10.2 ran V1 there;
# - a --kv-cache-dtype other than auto: every fp8 cache before 0.8.5; from 0.8.5 V1 keeps
#   FlashAttention 3's fp8 on Hopper, from 0.9 any on ROCm, from 0.10 any on SM 10.0 (its
#   backends all take fp8), from 0.10.2 an MLA model's (FlashMLA / CUTLASS MLA; the platform's
#   is_kv_cache_dtype_supported);
# - --dtype float32 before 0.9.2 (V1_SUPPORTED_DTYPES: bf16, fp16);
# - a model with Mamba / linear-attention state: V0-only model classes before 0.9.2, then
#   "Mamba is experimental on VLLM_USE_V1=1. Falling back to V0 Engine." (has_inner_state)
#   until 0.10.2.
# - a KV connector (--kv-transfer-config) before 0.8.5, V1's connectors arriving then.
# - --num-scheduler-steps (V0's multi-step rounds) until 0.10.1 removed the flag.
# Features V1 ran as experimental fall back too unless VLLM_USE_V1=1 opts in (_warn_or_fallback):
# - LoRA, 0.8.0 - 0.8.2;
# - pipeline parallelism: any PP > 1 in 0.8.0 - 0.8.2; in 0.8.3 - 0.8.5 unless
#   --distributed-executor-backend ray, in 0.9.0 unless ray, mp or external_launcher (the
#   default, unset, not among them), from 0.9.1 under any executor but a custom class;
# - a platform other than CUDA (and TPU), ROCm included, 0.8.0 - 0.9.1; 0.9.2 asks the
#   platform's default_v1, which ROCm's supports_v1 answers True.
# Encoder-decoders and V0-only features (speculative methods, prompt adapters, ...) are not
# followed here. V0 keeps a hybrid model's states in its own cache (v0_state_slots).
V1_ORACLE_SINCE = (0, 8, 0)
V0_REMOVED_IN = (0, 11, 0)
V1_PRE_AMPERE_SINCE = (0, 10, 2)
V1_AMPERE_CAPABILITY = (8, 0)
V1_FP8_KV_HOPPER_SINCE = (0, 8, 5)
V1_FP8_KV_ROCM_SINCE = (0, 9, 0)
V1_FP8_KV_SM100_SINCE = (0, 10, 0)
V1_FP8_KV_MLA_SINCE = (0, 10, 2)
V1_FP32_SINCE = (0, 9, 2)
V1_STATE_MODELS_SINCE = (0, 10, 2)
V1_KV_CONNECTOR_SINCE = (0, 8, 5)
V1_LORA_SINCE = (0, 8, 3)
V1_PP_RAY_SINCE = (0, 8, 3)
V1_PP_MP_SINCE = (0, 9, 0)
V1_PP_ANY_EXECUTOR_SINCE = (0, 9, 1)
# The executors 0.9.0's oracle runs pipeline stages on V1 under (its tuple).
V1_PP_EXECUTORS_090 = ("ray", "mp", "external_launcher")
V1_ROCM_SINCE = (0, 9, 2)
# The experimental fallbacks' own words ("... is experimental on VLLM_USE_V1=1. Falling back
# to V0 Engine."), and how to opt in.
V1_OPT_IN = "experimental on V1; VLLM_USE_V1=1 opts in"
V0_STATE_NOTE = (
    "V0 runs an attention-free model's states without a paged KV cache, which the ledger does "
    "not model: the pool is sized as V1's hybrid allocator sizes it (an estimate)"
)

# vLLM V0 keeps a hybrid model's Mamba states apart from the paged KV cache: the model's first
# forward, the start-up profile's, allocates conv and SSM state tensors of (its Mamba layers on
# the rank, a slot per sequence the engine may batch) in the states' dtypes, so the profile's
# torch peak charges them and the blocks hold the attention layers alone (worker/cache_engine.py
# get_cache_block_size counts only "attention" layers). The slots: max_num_seqs padded to the
# CUDA-graph batch it replays, 1, 2, 4, then multiples of 8 (model_runner.py
# _get_graph_batch_size until 0.6.4, even under --enforce-eager; VllmConfig.pad_for_cudagraph
# from 0.6.5, which 0.6.5 - 0.7.2 replace by 8192 + 2 slots under --enforce-eager and 0.7.3
# (mamba_cache.py MambaCacheManager) by max_num_seqs itself). Read in the jamba.py, mamba.py
# and mamba_cache.py of the 0.5.5, 0.6.3 - 0.6.6, 0.7.0 - 0.7.3, 0.8.0, 0.9.2 and 0.10.1 wheels.
V0_STATE_CACHE_EAGER_SLOTS_SINCE = (0, 6, 5)
V0_STATE_CACHE_EAGER_UNPADDED_SINCE = (0, 7, 3)
V0_STATE_CACHE_EAGER_SLOTS = 8192 + 2
V0_GRAPH_BATCH_ALIGNMENT = 8  # _BATCH_SIZE_ALIGNMENT (worker/model_runner.py, 0.5 - 0.6)


# vLLM V1 runs a model with chunked-local attention layers (Llama 4) without its hybrid KV
# cache manager from 0.10.1 ("There is a latency regression when using chunked local attention
# with the hybrid KV cache manager. Disabling it, by default", unless
# VLLM_ALLOW_CHUNKED_LOCAL_ATTN_WITH_HYBRID_KV_CACHE=1: VllmConfig.__post_init__, read in the
# 0.10.0, 0.10.1, 0.11.0, 0.20.0, 0.26.0 and 0.34.0 wheels); its KV-cache specs are then
# unified into full attention (v1/core/kv_cache_utils.py unify_hybrid_kv_cache_specs): every
# layer holds every token, one group.
VLLM_CHUNKED_LOCAL_UNIFIED_SINCE = (0, 10, 1)
# A KV connector (--kv-transfer-config) turns the hybrid manager off too: any connector from
# 0.9.2, when the manager arrived ("Hybrid KV cache manager is not compatible with KV
# transfer"), through 0.21; from 0.22 only one that does not subclass SupportsHMA
# (VllmConfig: supports_hma of the connector's class, a MultiConnector's every child; read in
# the 0.9.2 - 0.34 wheels). Of the connectors the planner names, NIXL's and the native
# OffloadingConnector do from 0.22; a MultiConnector is taken as not (its children are not
# modelled); LMCache's, P2pNccl's and SharedStorage's never. Without the manager a model with
# Mamba / linear-attention layers does not start (unify_hybrid_kv_cache_specs raises).
VLLM_HYBRID_MANAGER_SINCE = (0, 9, 2)
VLLM_CONNECTOR_HMA_SINCE = (0, 22, 0)
VLLM_HMA_CONNECTORS = frozenset({"NixlConnector", "OffloadingConnector"})


def hybrid_manager_off(
    model: ModelSpec, engine: str, version: tuple[int, int, int], connector: str | None = None
) -> str | None:
    """Why vLLM runs this model without its hybrid KV cache manager (None: it keeps it or has
    none to turn off): chunked-local layers from 0.10.1 (VLLM_CHUNKED_LOCAL_UNIFIED_SINCE), or
    a KV connector that does not support it (VLLM_CONNECTOR_HMA_SINCE)."""
    if engine != "v1" or version < VLLM_HYBRID_MANAGER_SINCE:
        return None
    chunked = any(g.kind is KvKind.CHUNKED for g in model.kv_groups)
    if chunked and version >= VLLM_CHUNKED_LOCAL_UNIFIED_SINCE:
        return "chunked-local attention"
    if connector is None:
        return None
    if version >= VLLM_CONNECTOR_HMA_SINCE and connector in VLLM_HMA_CONNECTORS:
        return None
    return f"the {connector} KV connector"


def unified_kv(
    model: ModelSpec, engine: str, version: tuple[int, int, int], connector: str | None = None
) -> bool:
    """Whether vLLM runs this model's window layers as full attention, every layer one group:
    its hybrid KV cache manager off (hybrid_manager_off) for a model with window layers."""
    windowed = any(g.kind in (KvKind.SLIDING, KvKind.CHUNKED) for g in model.kv_groups)
    return windowed and hybrid_manager_off(model, engine, version, connector) is not None


def pool_model(
    model: ModelSpec, engine: str, version: tuple[int, int, int], connector: str | None = None
) -> ModelSpec:
    """The model as vLLM's KV cache holds it: its window layers as full attention, one group
    of every layer of a shape, where the hybrid manager is off (unified_kv); else itself."""
    if not unified_kv(model, engine, version, connector):
        return model
    merged: dict[tuple[int, int, int, int, int], KvLayerGroup] = {}
    for g in model.kv_groups:
        if not g.kind.per_token:
            return model  # a state layer needs the manager: predict refuses such a plan
        kind = KvKind.MLA if g.kind is KvKind.MLA else KvKind.FULL
        shape = (g.num_kv_heads, g.head_dim_k, g.head_dim_v, g.latent_dim, g.rope_dim)
        held = merged.get(shape)
        layers = g.num_layers + (held.num_layers if held else 0)
        merged[shape] = g.model_copy(
            update={"kind": kind, "num_layers": layers, "window_tokens": None}
        )
    return model.model_copy(update={"kv_groups": list(merged.values())})


def paged_states(model: ModelSpec, engine: str) -> bool:
    """Whether a model's Mamba / linear-attention states page in the KV pool: V1's hybrid
    allocator pages them; V0 keeps them in a cache of their own (v0_state_cache_bytes), but
    for an attention-free model, whose pool is V1's estimate (V0_STATE_NOTE)."""
    attention = any(g.kind.per_token for g in model.kv_groups)
    return engine != "v0" or not attention


def v0_state_slots(max_num_seqs: int, eager: bool, version: tuple[int, int, int]) -> int:
    """Sequences V0's Mamba state cache holds a slot for (see V0_STATE_CACHE_EAGER_SLOTS_SINCE)."""
    if eager and version >= V0_STATE_CACHE_EAGER_UNPADDED_SINCE:
        return max_num_seqs
    if eager and version >= V0_STATE_CACHE_EAGER_SLOTS_SINCE:
        return V0_STATE_CACHE_EAGER_SLOTS
    if max_num_seqs <= 2:
        return max_num_seqs
    if max_num_seqs <= 4:
        return 4
    return ceil_div(max_num_seqs, V0_GRAPH_BATCH_ALIGNMENT) * V0_GRAPH_BATCH_ALIGNMENT


def v0_state_cache_bytes(model: ModelSpec, tp: int, pp: int, slots: int) -> int:
    """V0's Mamba state cache on one GPU: every state layer of the rank's stage, a slot each."""
    per_seq = sum(
        ceil_div(g.num_layers, pp) * layer_state_bytes(g, tp)
        for g in model.kv_groups
        if not g.kind.per_token
    )
    return slots * per_seq


# The KV connectors vLLM's factory registers, by the first release that has them
# (distributed/kv_transfer/kv_connector/factory.py, read in the 0.7.3 - 0.34 wheels): the V1
# connectors arrived in 0.8.5 (LMCacheConnectorV1, SharedStorageConnector), NIXL in 0.9.0 with
# MultiConnector, P2pNcclConnector in 0.9.2, the native OffloadingConnector in 0.11.0. An
# earlier release fails at start on the name.
CONNECTOR_SINCE = {
    "LMCacheConnectorV1": (0, 8, 5),
    "SharedStorageConnector": (0, 8, 5),
    "NixlConnector": (0, 9, 0),
    "MultiConnector": (0, 9, 0),
    "P2pNcclConnector": (0, 9, 2),
    "OffloadingConnector": (0, 11, 0),
}


def v0_fallback(
    model: ModelSpec, gpu: GpuSpec, s: VllmSettings, version: tuple[int, int, int]
) -> str | None:
    """What makes vLLM 0.8 - 0.10 fall back from V1 to V0 for this model, card and flags, in
    its oracle's words (None: V1 runs; see V1_ORACLE_SINCE)."""
    if not V1_ORACLE_SINCE <= version < V0_REMOVED_IN:
        return None
    if s.num_scheduler_steps > 1:
        return "--num-scheduler-steps"
    cap = capability(gpu)
    if gpu.vendor == "nvidia" and cap < V1_AMPERE_CAPABILITY and version < V1_PRE_AMPERE_SINCE:
        return "Compute Capability < 8.0"
    if s.kv_cache_dtype != "auto" and not _v1_takes_kv_dtype(model, gpu, version):
        return "--kv-cache-dtype"
    if ENGINE_DTYPES.get(s.dtype) == "fp32" and version < V1_FP32_SINCE:
        return f"--dtype {s.dtype}"
    if has_state_layers(model) and version < V1_STATE_MODELS_SINCE:
        return f"{model.architecture or 'a state-space model'} (Mamba)"
    if s.kv_connector is not None and version < V1_KV_CONNECTOR_SINCE:
        return "--kv-transfer-config"
    if s.enable_lora and version < V1_LORA_SINCE:
        return f"LoRA ({V1_OPT_IN})"
    executor = s.distributed_executor_backend
    if s.pipeline_parallel_size > 1 and not _v1_runs_stages(executor, version):
        return f"pipeline parallelism under {executor or 'the default executor'}"
    if gpu.vendor == "amd" and version < V1_ROCM_SINCE:
        return f"ROCm ({V1_OPT_IN})"
    return None


def _v1_runs_stages(executor: str | None, version: tuple[int, int, int]) -> bool:
    """Whether V1 in 0.8 - 0.10 runs pipeline stages under this executor (V1_PP_RAY_SINCE ...)."""
    if version >= V1_PP_ANY_EXECUTOR_SINCE:
        return True
    if version >= V1_PP_MP_SINCE:
        return executor in V1_PP_EXECUTORS_090
    return version >= V1_PP_RAY_SINCE and executor == "ray"


def _v1_takes_kv_dtype(model: ModelSpec, gpu: GpuSpec, version: tuple[int, int, int]) -> bool:
    """Whether V1's attention in 0.8 - 0.10 runs an fp8 KV cache on this card (V1_ORACLE_SINCE)."""
    if version < V1_FP8_KV_HOPPER_SINCE:
        return False
    if gpu.vendor == "amd":
        return version >= V1_FP8_KV_ROCM_SINCE
    cap = capability(gpu)
    return (
        cap[0] == HOPPER_MAJOR
        or (cap == SM100_CAPABILITY and version >= V1_FP8_KV_SM100_SINCE)
        or (is_mla(model) and version >= V1_FP8_KV_MLA_SINCE)
    )


def predict(
    model: ModelSpec,
    gpu: GpuSpec,
    settings: VllmSettings,
    measured: MeasuredTerms | None = None,
    weights_bytes: int | None = None,
    weights_exact: bool | None = None,
) -> EnginePrediction:
    """What vLLM will log at start-up for this model, GPU and flags: the settings it resolves,
    each memory term the profile charges, and the KV pool the rest buys."""
    s = settings
    version = parse_version(s.version)
    rules = rules_for(version)
    fallback = None if s.engine is not None else v0_fallback(model, gpu, s, version)
    engine = s.engine or ("v0" if fallback is not None else rules.engine)
    off = hybrid_manager_off(model, engine, version, s.kv_connector)
    if off is not None and has_state_layers(model):
        flag = "--kv-transfer-config"
        if s.kv_connector in VLLM_HMA_CONNECTORS:
            flag = "--engine-version"
        raise InputError(
            flag,
            f"vLLM {version_text(version)} turns its hybrid KV cache manager off for {off}, "
            f"and {model.name}'s Mamba / linear-attention layers do not start without it"
            + (
                f" ({s.kv_connector} keeps it from {version_text(VLLM_CONNECTOR_HMA_SINCE)})"
                if flag == "--engine-version"
                else ""
            ),
        )
    unified = unified_kv(model, engine, version, s.kv_connector)
    model = pool_model(model, engine, version, s.kv_connector)
    at = _Release(model, gpu, s, engine, rules, version)
    async_on = _async_scheduling(at)
    if s.stream_interval > 1 and (version < VLLM_STREAM_INTERVAL_SINCE or at.engine != "v1"):
        raise InputError(
            "--stream-interval",
            f"vLLM takes it from {version_text(VLLM_STREAM_INTERVAL_SINCE)} (this plan runs "
            f"vLLM {version_text(version)})",
        )
    _check_all2all(s, version)
    _check_dbo(s, version)
    _check_switches(s, version)
    if s.enable_expert_parallel and version < EXPERT_PARALLEL_SINCE:
        raise InputError(
            "--engine-version",
            f"vLLM {version_text(version)} has no --enable-expert-parallel (expert parallelism "
            f"from {version_text(EXPERT_PARALLEL_SINCE)}; before it every expert shards over "
            "TP)",
        )
    sources: dict[str, TermSource] = {}
    defaults: list[str] = []
    lay = _layout(at, defaults)
    notes: list[str] = outside_table("vLLM", version, OLDEST_VERSION, NEWEST_VERSION)
    if fallback is not None:
        notes.append(
            f"vLLM {version_text(version)} runs V0 here: its V1 oracle falls back for "
            f"{fallback} (0.8 - 0.10); planned as V0"
        )
    if at.engine == "v0" and has_state_layers(model) and paged_states(model, at.engine):
        notes.append(V0_STATE_NOTE)
    if unified:
        why = (
            "(a latency regression; VLLM_ALLOW_CHUNKED_LOCAL_ATTN_WITH_HYBRID_KV_CACHE=1 keeps it)"
            if off == "chunked-local attention"
            else "(it does not support it)"
        )
        notes.append(
            f"vLLM {version_text(version)} turns its hybrid KV cache manager off for {off} "
            f"{why}: every layer holds every token, one KV-cache group"
        )
    if lay.block_note is not None:
        notes.append(lay.block_note)
    kv_notes = _kv_dtype_notes(at, lay.ds_mla)
    notes += kv_notes
    led = _ledger(
        at, lay, measured or MeasuredTerms(), weights_bytes, weights_exact, sources, defaults, notes
    )
    available, profiled = _available_kv(at, lay, led, sources, notes)
    pool, max_len, fit_line = _fitted_pool(at, lay, led, available, notes)
    lines = _log_lines(
        rules,
        at.engine,
        profiled if lay.extensible else available,
        pool.num_blocks,
        pool.bytes_per_block,
        pool.kv_tokens,
        pool.concurrency,
        max_len,
    )
    if fit_line is not None:
        lines.insert(1, fit_line)
    if lay.extensible:
        lines.insert(
            1,
            f"Memory after warmup: ... {pool.num_blocks} KV cache blocks "
            f"({pool.num_blocks * pool.bytes_per_block / GIB_BYTES:.2f} GiB) fit within the "
            f"requested {led.requested / GIB_BYTES:.2f} GiB.",
        )
    return EnginePrediction(
        name="vllm",
        version=version_text(version),
        total_memory_bytes=led.total,
        requested_memory_bytes=led.requested,
        weights_bytes=led.weights,
        rope_cache_bytes=rope_cache_bytes(model, lay.act_bytes),
        activation_peak_bytes=led.activation,
        non_torch_bytes=led.non_torch,
        cudagraph_bytes=led.graph,
        graph_max_batch=led.graph_max_batch,
        connector_bytes=led.connector,
        available_kv_bytes=available,
        kv_dtype=lay.kv_dtype,
        resolved_notes=kv_notes,
        bytes_per_block=pool.bytes_per_block,
        num_gpu_blocks=pool.num_blocks,
        usable_blocks=pool.num_blocks - 1,
        kv_cache_tokens=pool.kv_tokens,
        max_concurrency=pool.concurrency,
        blocks_per_request=pool.blocks_per_request,
        num_kv_groups=pool.num_groups,
        settings=_resolved(at, lay, led, pool.block, max_len, async_on),
        defaults_used=defaults,
        term_sources=sources,
        log_lines=lines,
        notes=notes,
    )


def _kv_dtype_notes(at: _Release, ds_mla: bool) -> list[str]:
    """Where the KV cache runs another dtype than --kv-cache-dtype names: DeepSeek's sparse
    attention in vLLM's fp8_ds_mla layout, GLM-5's fp8 on Blackwell for `auto`, and the FP8
    cache a checkpoint declares (an fp8 asked for is run as asked: nothing to say)."""
    model, s, version = at.model, at.settings, at.version
    if ds_mla:
        return [
            f"KV cache fp8_ds_mla: vLLM {version_text(version)} stores DeepSeek's sparse-attention "
            "cache in its scaled fp8 layout (fp8 latent with a scale per 128 values, bf16 RoPE "
            "part)" + (" for `auto` too" if s.kv_cache_dtype == "auto" else "")
        ]
    if glm_dsa_fp8_kv(model, at.gpu, version, s.kv_cache_dtype):
        return [
            f"KV cache fp8_e4m3: vLLM {version_text(version)} runs GLM-5's cache in fp8 on "
            "Blackwell for `auto` (--kv-cache-dtype bfloat16 keeps 16 bits)"
        ]
    if not s.kv_cache_dtype.startswith("fp8") and checkpoint_fp8_kv(
        model, version, s.kv_cache_dtype
    ):
        return [
            f"KV cache fp8: the checkpoint's {model.fp8_kv_declared_by} config declares an FP8 "
            f"KV cache, which vLLM {version_text(version)} runs"
            + (
                " for `auto` (--kv-cache-dtype bfloat16 keeps 16 bits)"
                if s.kv_cache_dtype == "auto"
                else " whatever --kv-cache-dtype says (0.15-0.21)"
            )
        ]
    return []


def _resolved(
    at: _Release, lay: _Layout, led: _Ledger, block: int, max_len: int, async_on: bool
) -> dict[str, object]:
    """The settings vLLM resolves and runs (the prediction's `settings`)."""
    model, s = at.model, at.settings
    return {
        "engine": at.engine,
        "gpu_memory_utilization": lay.util,
        "max_model_len": max_len,
        "max_num_batched_tokens": led.tokens,
        "max_num_seqs": led.seqs,
        "block_size": block,
        "kv_cache_dtype": s.kv_cache_dtype,
        "dtype": s.dtype,
        "enforce_eager": s.enforce_eager,
        "async_scheduling": async_on,
        "stream_interval": s.stream_interval,
        "enable_prefix_caching": s.enable_prefix_caching,
        "mamba_cache_mode": _mamba_mode(at),
        "mamba_state_blocks": _state_blocks(at) if has_state_layers(model) else None,
        "tensor_parallel_size": s.tensor_parallel_size,
        "pipeline_parallel_size": s.pipeline_parallel_size,
        "enable_lora": s.enable_lora,
        "max_lora_rank": s.max_lora_rank if s.enable_lora else None,
        "max_loras": s.max_loras if s.enable_lora else None,
        "enable_expert_parallel": s.enable_expert_parallel,
        "max_cudagraph_capture_size": s.max_cudagraph_capture_size,
        "enable_chunked_prefill": led.chunked,
        "data_parallel_size": s.data_parallel_size,
        "all2all_backend": s.all2all_backend,
        "enable_dbo": s.enable_dbo,
        "deepep": deepep_mode(s) is not None and bool(model.num_experts),
        "colocated": s.colocated,
        "kv_connector": s.kv_connector,
        "model_runner": led.profile.runner,
        "profile_sampler": led.profile.sampler,
    }


def _check_switches(s: VllmSettings, version: tuple[int, int, int]) -> None:
    """Refuse a switch turned on that the release has no flag for (FLAG_SINCE)."""
    asked = {
        "--enforce-eager": s.enforce_eager,
        "--enable-lora": s.enable_lora,
        "--enable-prefix-caching": bool(s.enable_prefix_caching),
        "--enable-chunked-prefill": bool(s.enable_chunked_prefill),
    }
    refuse_before("vLLM", version, FLAG_SINCE, asked)


def _async_scheduling(at: _Release) -> bool:
    """--async-scheduling as the release resolves it; refused where vLLM refuses it (before
    the flag, on the V0 engine, with pipeline stages)."""
    s, version = at.settings, at.version
    pp = s.pipeline_parallel_size
    if s.async_scheduling is None:
        return at.engine == "v1" and async_scheduling_default(version, pp)
    if version < VLLM_ASYNC_SCHEDULING_FLAG_SINCE or at.engine != "v1":
        raise InputError(
            "--async-scheduling",
            f"vLLM's V1 engine takes it from {version_text(VLLM_ASYNC_SCHEDULING_FLAG_SINCE)} "
            f"(this plan runs vLLM {version_text(version)}"
            + (" on its V0 engine)" if at.engine != "v1" else ")"),
        )
    if s.async_scheduling and pp > 1:
        raise InputError(
            "--async-scheduling", "vLLM refuses it with --pipeline-parallel-size above 1"
        )
    return s.async_scheduling


def _check_pipelined(model: ModelSpec, pp: int, version: tuple[int, int, int]) -> None:
    """Refuse pipeline stages the release cannot run: none before PP_SINCE, only the listed
    architectures before PP_LIST_UNTIL, and a class registered without SupportsPP after it."""
    if pp == 1:
        return
    if version < PP_SINCE:
        raise InputError(
            "--pp",
            f"vLLM runs pipeline parallelism from {version_text(PP_SINCE)}; "
            f"{version_text(version)} refuses it (not supported yet)",
        )
    late = PP_CLASS_SINCE.get(model.architecture or "")
    if late is not None and PP_LIST_UNTIL <= version < late:
        raise InputError(
            "--pp",
            f"vLLM {version_text(version)}'s {model.architecture} does not support pipeline "
            f"parallelism (from {version_text(late)}); it refuses the layout",
        )
    listed = PP_ARCHITECTURES_SINCE.get(model.architecture or "")
    if version < PP_LIST_UNTIL and (listed is None or version < listed):
        first = (
            f"listed from {version_text(listed)}"
            if listed
            else f"from {version_text(PP_LIST_UNTIL)} where its model class supports it"
        )
        raise InputError(
            "--pp",
            f"vLLM {version_text(version)} pipelines only the architectures it lists, not "
            f"{model.architecture} ({first}); it refuses the layout",
        )


def _layout(at: _Release, defaults: list[str]) -> _Layout:
    """Resolve the flags that shape the pool: the context, the utilization (the extensible KV
    cache's default where it runs), the block size the attention backend settles on, and the
    KV and activation dtypes. Refuses a TP that splits heads and a layout the model lacks."""
    model, gpu, s, version = at.model, at.gpu, at.settings, at.version
    tp, pp = s.tensor_parallel_size, s.pipeline_parallel_size
    if model.num_attention_heads % tp:
        raise InputError(
            "--tp", f"{tp} does not divide {model.num_attention_heads} attention heads"
        )
    check_stages(model, pp)
    _check_pipelined(model, pp, version)
    max_len = _max_model_len(model, s, version, defaults)
    extensible = (
        at.rules.extensible_kv
        and at.engine == at.rules.engine
        and gpu.vendor in ("nvidia", "amd")
        and s.kv_cache_memory_bytes is None
    )
    util = s.gpu_memory_utilization
    if util is None:
        util = (
            EXTENSIBLE_DEFAULT_UTILIZATION
            if extensible
            else at.rules.default_gpu_memory_utilization
        )
        defaults.append(
            f"gpu_memory_utilization={util} (vLLM {version_text(version)} default"
            + (" with the extensible KV cache)" if extensible else ")")
        )
    block = s.block_size or at.rules.default_block_size
    # the MLA backend's size wins over the flag where it forces one (the serve plan says so
    # when one was given)
    backend = backend_block_size(
        model, gpu, version, s.block_size, connector=s.kv_connector is not None
    )
    block_note = None
    if backend is not None and backend[0] != block:
        block_note = f"block_size {backend[0]}: set by the {backend[1]} attention backend"
        block = backend[0]
    if s.block_size is None:
        defaults.append(f"block_size={block}")
    gap = kernel_block_gap(at, block)
    if gap is not None and gap[0]:
        raise InputError("--block-size", gap[1])
    if gap is not None:
        block_note = gap[1]
    run_dtype = compute_dtype(model, s.dtype)
    try:
        kv_dtype = kv_cache_dtype(s.kv_cache_dtype, model, s.dtype)
    except ValueError as exc:
        raise InputError("--kv-cache-dtype", str(exc)) from exc
    ds_mla = ds_mla_layout(model, version, s.kv_cache_dtype)
    if s.kv_cache_dtype == DS_MLA_FLAG and not ds_mla:
        raise InputError(
            "--kv-cache-dtype",
            f"{DS_MLA_FLAG} is DeepSeek's sparse-attention layout (vLLM 0.11+): "
            + (
                f"{model.name} has no sparse attention"
                if version >= DS_MLA_SINCE
                else f"vLLM {version_text(version)} predates it"
            ),
        )
    flag = s.kv_cache_dtype
    if (
        ds_mla
        or glm_dsa_fp8_kv(model, gpu, version, flag)
        or checkpoint_fp8_kv(model, version, flag)
    ):
        kv_dtype = "fp8"
    return _Layout(
        max_len=max_len,
        extensible=extensible,
        util=util,
        block=block,
        block_note=block_note,
        kv_dtype=kv_dtype,
        kv_bytes=dtype_bytes(kv_dtype),
        act_bytes=dtype_bytes(run_dtype),
        ds_mla=ds_mla,
    )


def _unfused_rescale_bytes(at: _Release, own: bool, notes: list[str]) -> int:
    """The fp32 bytes per token the unfused fp8 rescale of vLLM's ROCm build before 0.7.3
    holds at its widest linear (step.gemm), for a row-wise scaled checkpoint served as stored;
    0 elsewhere. Before 0.6.4 the profile charges the device memory then in use, the caching
    allocator's segments: more than torch's peak where allocations of several widths cannot
    reuse each other's blocks, which a note says."""
    model, s = at.model, at.settings
    widest = model.rowwise_fp8_widest
    if not any(widest) or not gemm.unfused_rocm_dequant("vllm", at.gpu, at.version, own):
        return 0
    per_token = gemm.unfused_dequant_peak_bytes_per_token(widest, s.tensor_parallel_size)
    note = (
        f"{model.name}'s row-wise scaled fp8 linears rescale their outputs in fp32 outside the "
        f"GEMM on ROCm before vLLM {version_text(gemm.VLLM_ROCM_ROWWISE_FP8_SINCE)}: "
        f"{gemm.UNFUSED_DEQUANT_FP32_COPIES} fp32 copies of the widest output, {per_token:,} "
        "bytes per profiled token, are in the activation peak"
    )
    if at.version < VLLM_TORCH_PEAK_SINCE:
        note += (
            f"; vLLM {version_text(at.version)} charges the device memory in use after "
            "profiling (the allocator's cached segments, of every width these copies take), "
            "more than this peak: expect fewer KV blocks than planned"
        )
    notes.append(note)
    return per_token


def _v0_state_cache(at: _Release, seqs: int, notes: list[str]) -> int:
    """V0's Mamba state cache on one GPU for `seqs` (max_num_seqs), with a note of its size;
    0 where the states page in the KV pool (paged_states)."""
    model, s = at.model, at.settings
    if paged_states(model, at.engine):
        return 0
    slots = v0_state_slots(seqs, s.enforce_eager, at.version)
    size = v0_state_cache_bytes(model, s.tensor_parallel_size, s.pipeline_parallel_size, slots)
    notes.append(
        f"V0 keeps the Mamba states apart from the KV blocks: {slots:,} sequence slots "
        + (f"(max_num_seqs {seqs:,} padded to its CUDA-graph batch) " if slots != seqs else "")
        + f"take {size / GIB_BYTES:.2f} GiB, allocated in the profile run (in the activation "
        "peak); the blocks hold the attention layers alone"
    )
    return size


def _activation_term(
    at: _Release,
    lay: _Layout,
    m: MeasuredTerms,
    profile: _Profile,
    tokens: int,
    seqs: int,
    ep: bool,
    moe_ranks: int,
    rescale: int,
    state_cache: int,
    sources: dict[str, TermSource],
) -> tuple[int, int]:
    """The profile run's torch peak above the weights: as modelled (what a pipeline stage's
    split is read against), and as charged (model runner V2's persistent sampler state added,
    a calibration's correction, a log's figure winning). `rescale`: the unfused fp8 rescale's
    fp32 bytes per token (_unfused_rescale_bytes); `state_cache`: V0's Mamba state cache, which
    the profile's forward allocates (_v0_state_cache)."""
    model, version, tp = at.model, at.version, at.settings.tensor_parallel_size
    cal = at.settings.calibration
    act_modelled = state_cache + activation_peak_bytes(
        model,
        tokens,
        min(seqs, tokens),
        tp,
        lay.act_bytes,
        profile.sampler,
        profile.xformers,
        ep,
        moe_ranks,
        rescale,
    )
    act = act_modelled
    if profile.runner == "v2" and version >= V2_PERSISTENT_STATE_SINCE:
        vocab = model.vocab_size or 0
        act += seqs * (vocab + ceil_div(vocab, PENALTY_MASK_BITS)) * PENALTY_ENTRY_BYTES
    sources["activation_peak_bytes"] = "calibrated"
    act = correct(cal, "activation_peak_bytes", act, sources)
    if m.activation_peak_bytes is not None:
        act, sources["activation_peak_bytes"] = m.activation_peak_bytes, "log"
    return act_modelled, act


def _non_torch_term(
    at: _Release,
    m: MeasuredTerms,
    tokens: int,
    sources: dict[str, TermSource],
    notes: list[str],
) -> int:
    """Memory outside torch the profile charges: the release's non-torch figure and DeepEP's
    buffers (a calibration's correction; a log's figure wins)."""
    model, gpu, s, version = at.model, at.gpu, at.settings, at.version
    tp, dp = s.tensor_parallel_size, s.data_parallel_size
    cal = s.calibration
    non_torch = _non_torch_bytes(at, notes)
    deepep = deepep_buffer_bytes(model, gpu, s, version, tokens)
    if s.all2all_backend not in (None, DEFAULT_ALL2ALL) and deepep_mode(s) is None:
        notes.append(
            f"--all2all-backend {s.all2all_backend} runs only where the experts are split whole "
            "over DP > 1 ranks (--enable-expert-parallel with --data-parallel-size): nothing "
            "here is exchanged with it"
        )
    if deepep:
        non_torch += deepep
        notes.append(
            f"DeepEP buffers {deepep / GIB_BYTES:.2f} GiB outside torch ({s.all2all_backend} over "
            f"{tp * dp} expert-parallel ranks: vLLM's NVLink buffer"
            + (
                ", and the RDMA layout for its token cap"
                if s.all2all_backend == DEEPEP_LOW_LATENCY
                else ", and as many RDMA bytes across hosts"
                if deepep > DEEPEP_BUFFER_BYTES
                else ""
            )
            + ")"
        )
    sources["non_torch_bytes"] = "calibrated"
    non_torch = correct(cal, "non_torch_bytes", non_torch, sources)
    if m.non_torch_bytes is not None:
        non_torch, sources["non_torch_bytes"] = m.non_torch_bytes, "log"
    return non_torch


def _weights_ledger(
    at: _Release,
    lay: _Layout,
    m: MeasuredTerms,
    weights_bytes: int | None,
    weights_exact: bool | None,
    moe_ranks: int,
    sharding: Sharding | None,
    sources: dict[str, TermSource],
    notes: list[str],
) -> int:
    """The weights one GPU loads (a log's figure wins; a calibration corrects the model's):
    its share of the checkpoint, the LoRA buffers loaded with it; the data-parallel ranks'
    note."""
    model, s = at.model, at.settings
    tp, pp, dp = s.tensor_parallel_size, s.pipeline_parallel_size, s.data_parallel_size
    w, sources["weights_bytes"] = weights_term(
        model, weights_bytes, weights_exact, m.weights_bytes, tp, pp, lay.act_bytes, sharding
    )
    if dp > 1:
        notes.append(
            f"{dp} data-parallel ranks, each with this KV cache and max_num_seqs"
            + (
                f"; the experts span all {moe_ranks} GPUs (weights split by parameter count: "
                "an estimate)"
                if sharding is not None
                else ""
            )
        )
    if s.enable_lora and m.weights_bytes is None:
        lora = lora_bytes(model, s.max_lora_rank, s.max_loras, tp, pp, lay.act_bytes, at.version)
        w += lora
        notes.append(
            f"LoRA buffers {lora / GIB_BYTES:.3f} GiB (max_loras {s.max_loras} x rank "
            f"{s.max_lora_rank}) are loaded with the weights"
            + ("; MoE expert LoRA is not counted" if model.num_experts else "")
        )
    if m.weights_bytes is None:
        w = correct(s.calibration, "weights_bytes", w, sources)
    return w


def _ledger(
    at: _Release,
    lay: _Layout,
    m: MeasuredTerms,
    weights_bytes: int | None,
    weights_exact: bool | None,
    sources: dict[str, TermSource],
    defaults: list[str],
    notes: list[str],
) -> _Ledger:
    """Each memory term the start-up profile charges (a term a log gave wins over the model's,
    a calibration corrects the model's), at the scheduler limits it profiles; under PP, the
    stage with the fewest KV blocks'."""
    model, gpu, s, version, engine = at.model, at.gpu, at.settings, at.version, at.engine
    tp, pp, dp = s.tensor_parallel_size, s.pipeline_parallel_size, s.data_parallel_size
    cal = s.calibration
    total, sources["total_memory_bytes"] = total_term(
        gpu, m.total_memory_bytes, m.total_memory_source
    )
    if m.total_memory_bytes is None:
        total = correct(cal, "total_memory_bytes", total, sources)
    chunked = chunked_prefill(at, lay.max_len)
    tokens, seqs = _scheduler_limits(at, total, lay.max_len, chunked, defaults)
    requested = math.ceil(total * lay.util)
    if dp > 1 and engine != "v1":
        # DP ranks in one server (and a MoE model's experts across them) are the V1 engine's;
        # V0 deployments ran one server per replica, each planned as this one
        raise InputError(
            "--dp",
            f"vLLM {version_text(version)} runs the V0 engine: one server per data-parallel "
            "replica (plan one, without --dp)",
        )
    if dp > 1 and version < DATA_PARALLEL_FLAG_SINCE:
        raise InputError(
            "--dp",
            f"vLLM takes --data-parallel-size from {version_text(DATA_PARALLEL_FLAG_SINCE)}; "
            f"{version_text(version)} has no such flag (one server per replica)",
        )
    moe_ranks = tp * dp if model.num_experts else tp
    sharding = None
    if moe_ranks > tp:
        # Data parallelism on a MoE model: attention and the dense layers stay TP within each
        # DP rank, the expert layers form one group of TP x DP ranks (sharded, or whole experts
        # with --enable-expert-parallel): docs.vllm.ai, "Data Parallel Deployment".
        sharding = Sharding(attention_ranks=tp, dense_ranks=tp, expert_ranks=moe_ranks)
    w = _weights_ledger(
        at, lay, m, weights_bytes, weights_exact, moe_ranks, sharding, sources, notes
    )
    quantized = weights_bytes is not None or model.weight_dtype not in ("fp32", "fp16", "bf16")
    profile = _profile(at, quantized, seqs, tokens, notes)
    ep = _expert_parallel(model, s, moe_ranks, notes)
    rescale = _unfused_rescale_bytes(at, weights_bytes is None, notes)
    state_cache = _v0_state_cache(at, seqs, notes)
    act_modelled, act = _activation_term(
        at, lay, m, profile, tokens, seqs, ep, moe_ranks, rescale, state_cache, sources
    )
    non_torch = _non_torch_term(at, m, tokens, sources, notes)
    connector = connector_buffer_bytes(
        model, tp, pp, lay.kv_bytes, s.kv_connector, s.kv_connector_chunk_tokens, lay.ds_mla
    )
    if s.kv_connector is not None:
        sources["connector_bytes"] = "derived"
        connector = correct(cal, "connector_bytes", connector, sources)
    sizes = capture_sizes(seqs, tokens, s.max_cudagraph_capture_size, capture_cap(version, gpu))
    graph = _cudagraph_bytes(at, profile.runner, len(sizes), m, sources)
    graph_max_batch = None
    if engine == "v1":
        graph_max_batch = 0 if s.enforce_eager else sizes[-1]

    stage_layers: int | None = None
    if pp > 1 and s.kv_cache_memory_bytes is None:
        # the stage with the fewest KV blocks: its weights, activation and graphs
        act_without_sampler = state_cache + activation_peak_bytes(
            model,
            tokens,
            0,
            tp,
            lay.act_bytes,
            profile.sampler,
            profile.xformers,
            ep,
            rescale_bytes_per_token=rescale,
        )
        room = requested - non_torch - connector
        stored = model.weights_bytes if weights_bytes is None else weights_bytes
        bound = _pp_stage(
            at, lay, stored, (w, act, graph), act_without_sampler, act_modelled, room, notes
        )
        w, act, graph, stage_layers = bound.weights, bound.activation, bound.graph, bound.layers
    return _Ledger(
        total=total,
        requested=requested,
        weights=w,
        activation=act,
        non_torch=non_torch,
        connector=connector,
        graph=graph,
        graph_max_batch=graph_max_batch,
        stage_layers=stage_layers,
        tokens=tokens,
        seqs=seqs,
        chunked=chunked,
        profile=profile,
        state_cache=state_cache,
    )


def _available_kv(
    at: _Release,
    lay: _Layout,
    led: _Ledger,
    sources: dict[str, TermSource],
    notes: list[str],
) -> tuple[int, int]:
    """The bytes the KV cache gets, and what the profile left (the two differ under the
    extensible KV cache, sized after warm-up, and a given --kv-cache-memory-bytes). Raises
    NoKvCache where nothing is left."""
    s, gpu, engine, version = at.settings, at.gpu, at.engine, at.version
    profiled = led.requested - led.charged
    if s.kv_cache_memory_bytes is not None:
        available = s.kv_cache_memory_bytes
        sources["available_kv_bytes"] = "user"
    elif lay.extensible:
        available = extensible_kv_bytes(
            led.total,
            led.requested,
            led.weights + led.non_torch + led.graph + led.connector,
            led.activation,
            s.reserved_bytes,
            gpu,
        )
        sources["available_kv_bytes"] = "derived"
        notes.append(
            "extensible KV cache: sized after warm-up from the memory then free, less a margin "
            "of max(1 GiB, 0.75 x the activation peak) and the peak itself"
            + (" (3 GiB floor on ROCm)" if gpu.vendor == "amd" else "")
            + " (the release's formula; no start-up log of it checked yet)"
            + (
                f"; other processes' {s.reserved_bytes / GIB_BYTES:.2f} GiB are not free "
                "at start, so they come off it"
                if s.reserved_bytes
                else ""
            )
        )
    else:
        available = profiled
        sources["available_kv_bytes"] = "derived"
    if s.reserved_bytes and not lay.extensible:
        charged = at.rules.non_torch_counts_context and engine == at.rules.engine
        available -= _other_tenants(
            s.reserved_bytes, engine, version, led.total, led.requested, charged, notes
        )
    if s.calibration is not None:
        notes += cal_notes(
            s.calibration,
            "vllm",
            version_text(version),
            gpu.id,
            at.model.name,
            s.tensor_parallel_size,
            s.pipeline_parallel_size,
        )
    if available <= 0:
        raise NoKvCache(
            "--gpu-memory-utilization",
            f"{lay.util} leaves no KV cache: {led.requested / GIB_BYTES:.2f} GiB requested, "
            f"{led.charged / GIB_BYTES:.2f} GiB taken by "
            + (
                "weights, activations, non-torch memory, CUDA graphs and the KV connector"
                if led.connector
                else "weights, activations, non-torch memory and CUDA graphs"
            )
            + (_state_cache_reason(at, led) if led.state_cache else ""),
        )
    return available, profiled


def _state_cache_reason(at: _Release, led: _Ledger) -> str:
    """What V0's Mamba state cache takes of a pool that came to nothing, and what sizes it."""
    eager, version = at.settings.enforce_eager, at.version
    slots = v0_state_slots(led.seqs, eager, version)
    fixed = eager and V0_STATE_CACHE_EAGER_SLOTS_SINCE <= version < (
        V0_STATE_CACHE_EAGER_UNPADDED_SINCE
    )
    sized = "whatever --max-num-seqs, under --enforce-eager" if fixed else "--max-num-seqs sizes it"
    return (
        f" (V0's Mamba state cache, {led.state_cache / GIB_BYTES:.2f} GiB of the activations: "
        f"{slots:,} sequence slots, {sized})"
    )


def _fitted_pool(
    at: _Release, lay: _Layout, led: _Ledger, available: int, notes: list[str]
) -> tuple[_Pool, int, str | None]:
    """The KV pool the available bytes buy, the context it serves and, under --max-model-len
    auto, the log line of the fit (vLLM shortens the context to the longest request whose
    blocks fit)."""
    granule = EXTENSIBLE_GRANULE_BYTES if lay.extensible else 0
    max_len = lay.max_len

    def pool_at(length: int) -> _Pool:
        return _kv_pool(
            at, lay.block, lay.kv_bytes, led.stage_layers, available, length, led.tokens, granule
        )

    pool = pool_at(max_len)
    if pool.block != lay.block:
        notes.append(f"attention block size raised to {pool.block} to cover the Mamba state page")
    mode = _mamba_mode(at)
    if mode == "align":
        notes.append(
            "prefix caching on a hybrid model: vLLM keeps its Mamba / linear-attention states "
            f"in 'align' mode, {_state_blocks(at)} state blocks a request in each of their "
            "KV-cache groups (the running state, the last block boundary's and, where the "
            "layers export one, a prefill checkpoint), not 1 (no start-up log of it checked)"
        )
    elif mode == "all":
        chunk = at.model.mamba_chunk_tokens or VLLM_MAMBA_DEFAULT_CHUNK_TOKENS
        notes.append(
            "prefix caching on a hybrid model: vLLM keeps its Mamba states in 'all' mode, a "
            f"state block a request for every {pool.block:,}-token block of context (the block "
            f"a multiple of the {chunk:,}-token Mamba chunk), as many as its attention layers "
            "hold (no start-up log of it checked)"
        )
    elif (
        mode is None
        and has_state_layers(at.model)
        and prefix_caching_on(at.model, at.version, at.engine, at.settings.enable_prefix_caching)
    ):
        notes.append(
            "prefix caching on a hybrid model: vLLM then keeps a Mamba state at every block "
            "boundary and aligns its block to the Mamba chunk; the pool here counts one state "
            "a request (an estimate: fewer requests fit)"
        )
    if at.settings.max_model_len != MAX_MODEL_LEN_AUTO:
        return pool, max_len, None
    fit_line = None
    derived = max_len
    max_len = _auto_fit(at, pool, lay.kv_bytes, led.stage_layers, derived, led.tokens)
    if max_len < derived:
        pool = pool_at(max_len)
        fit_line = f"Auto-fit max_model_len: reduced from {derived} to {max_len}"
    fitted = f"max_model_len auto: {max_len:,} tokens, " + (
        f"the longest request whose KV blocks fit (the model's {derived:,} do not)"
        if max_len < derived
        else "the model's full length (it fits)"
    )
    if pool.blocks_per_request > pool.num_blocks - 1:
        # the null block is kept back after the check; 0.14-0.18 count one group only
        fitted += (
            f"; a request that long needs {pool.blocks_per_request:,} blocks of the "
            f"{pool.num_blocks - 1:,} vLLM hands out (it keeps a null block back), so "
            "cannot run in full"
            + (
                " (vLLM 0.14-0.18 check the first KV group's blocks only)"
                if AUTO_FIT_SINCE <= at.version < AUTO_FIT_SUMS_GROUPS_SINCE
                and len(at.model.kv_groups) > 1
                else ""
            )
        )
    notes.append(fitted)
    return pool, max_len, fit_line


def _max_model_len(
    model: ModelSpec, s: VllmSettings, version: tuple[int, int, int], defaults: list[str]
) -> int:
    """--max-model-len, or the model's own maximum (vLLM refuses a longer one; `auto` starts
    from it and is fitted once the KV cache is known)."""
    if s.max_model_len == 0:
        raise InputError("--max-model-len", "0; accepted: a positive length, or auto (-1)")
    if s.max_model_len == MAX_MODEL_LEN_AUTO and version < AUTO_FIT_SINCE:
        raise InputError(
            "--max-model-len",
            f"auto: vLLM fits the length itself from {version_text(AUTO_FIT_SINCE)}; "
            f"{version_text(version)} takes a number",
        )
    if s.max_model_len in (None, MAX_MODEL_LEN_AUTO):
        if s.max_model_len is None:
            defaults.append(f"max_model_len={model.max_context_tokens} (the model's maximum)")
        return model.max_context_tokens
    if s.max_model_len > model.max_context_tokens:
        raise InputError(
            "--max-model-len",
            f"{s.max_model_len:,} exceeds {model.name}'s {model.max_context_tokens:,} (vLLM "
            "refuses it unless VLLM_ALLOW_LONG_MAX_MODEL_LEN=1)",
        )
    return s.max_model_len


def _scheduler_limits(
    at: _Release, total: int, max_len: int, chunked: bool, defaults: list[str]
) -> tuple[int, int]:
    """max_num_batched_tokens and max_num_seqs: the flags, else the release's defaults for
    this GPU's memory tier and chunked prefill (a V1 engine asked of a release that defaulted
    to V0 takes the first V1 tiers)."""
    s = at.settings
    kind = "v0" if at.engine == "v0" else at.rules.batch_defaults
    if at.engine == "v1" and kind == "v0":
        kind = "two_tier"
    d_tokens, d_seqs = batch_defaults(
        kind,
        total,
        at.gpu.name,
        s.usage_context,
        max_len,
        chunked,
        at.version,
        capability(at.gpu),
    )
    seqs = s.max_num_seqs or d_seqs
    tokens = s.max_num_batched_tokens or d_tokens
    if s.max_num_batched_tokens is None and batched_dp_moe(s, at.version):
        tokens = BATCHED_DP_MOE_TOKENS if chunked else max(BATCHED_DP_MOE_TOKENS, max_len)
        defaults.append(
            f"max_num_batched_tokens={tokens} (vLLM's default under {DEEPEP_LOW_LATENCY} with "
            "expert parallelism over DP ranks)"
        )
    elif s.max_num_batched_tokens is None:
        tokens = min(tokens, seqs * max_len)
        defaults.append(f"max_num_batched_tokens={tokens} (default for this GPU tier)")
    if s.max_num_seqs is None:
        seqs = min(seqs, tokens)
        defaults.append(f"max_num_seqs={seqs} (default for this GPU tier)")
    return tokens, seqs


def _profile(at: _Release, quantized: bool, seqs: int, tokens: int, notes: list[str]) -> _Profile:
    """The model runner and the sampler the profile warms up (their buffers differ), and
    whether the profile's attention is XFormers'."""
    model, gpu, s, engine, version = at.model, at.gpu, at.settings, at.engine, at.version
    runner = "v0" if engine == "v0" else "v1"
    sampler: str = "sort" if engine == "v0" else at.rules.sampler
    if engine == "v1" and uses_v2_runner(model, version, quantized):
        runner = "v2"
        sampler = "triton" if version >= V2_SAMPLER_WARMUP_SINCE else "logits"
        if sampler == "triton":
            notes.append(
                "model runner V2's sampler warm-up is taken at the V1 Triton sampler's "
                "15.44 B per logit (estimate: no V2 log checked yet)"
            )
    if sampler == "triton" and min(seqs, tokens) < TRITON_TOPK_MIN_ROWS:
        sampler = "sort"
    flashinfer = flashinfer_installed(s)
    if (
        runner == "v1"
        and gpu.vendor.lower() == "nvidia"
        and FLASHINFER_SAMPLER_SINCE <= version < FLASHINFER_SAMPLER_UNTIL
        and sampler == "sort"
    ):
        if flashinfer:
            sampler = "flashinfer"
        notes.append(
            f"vLLM {version_text(version)} samples top-k/top-p with FlashInfer where it is "
            + (
                "installed: taken as installed (the vllm-openai image; --no-flashinfer for a "
                "pip install without the flashinfer extra)"
                if flashinfer
                else "installed: taken as not installed (pip without the flashinfer extra; "
                "--flashinfer if it is)"
            )
        )
    xformers = engine == "v0" and capability(gpu) < XFORMERS_BELOW_CAPABILITY
    if xformers:
        notes.append(
            "XFormers attention (no FlashAttention-2 below compute capability 8.0): one more "
            "query-width buffer in the profile's forward (estimate from one T4 log)"
        )
    return _Profile(runner, sampler, xformers)


def _expert_parallel(model: ModelSpec, s: VllmSettings, moe_ranks: int, notes: list[str]) -> bool:
    """--enable-expert-parallel takes effect: whole experts per rank (a MoE model over more
    than one rank)."""
    ep = s.enable_expert_parallel and bool(model.num_experts) and moe_ranks > 1
    if s.enable_expert_parallel:
        notes.append(
            f"expert parallel: each rank holds {(model.num_experts or 0) // moe_ranks} whole "
            "experts "
            "and the fused-MoE workspace is sized by the full expert width"
            if ep
            else "--enable-expert-parallel changes nothing here (a dense model or TP 1)"
        )
    return ep


def _non_torch_bytes(at: _Release, notes: list[str]) -> int:
    """Memory outside torch's allocator the profile counts: NCCL and the CUDA context where
    the release counts it, and FlashInfer's all-reduce fusion workspace where it runs."""
    s, rules, engine = at.settings, at.rules, at.engine
    tp, pp = s.tensor_parallel_size, s.pipeline_parallel_size
    non_torch = NON_TORCH_COLOCATED_BYTES if s.colocated else NON_TORCH_BYTES
    if rules.non_torch_counts_context and engine == rules.engine:
        # The whole device's use less torch's allocations: the CUDA context counts (V0 0.6.4;
        # V1 0.8.x, v1/worker/gpu_worker.py determine_available_memory); V0 under 0.8 did not.
        non_torch = NON_TORCH_WITH_CONTEXT_BYTES
    non_torch += NON_TORCH_MULTI_GPU_EXTRA_BYTES if tp * pp > 1 else 0
    if allreduce_fusion(at.gpu, at.version, tp, pp, s.enforce_eager or engine == "v0"):
        non_torch += ALLREDUCE_FUSION_BYTES
        notes.append(
            f"FlashInfer all-reduce + RMSNorm fusion workspace "
            f"{ALLREDUCE_FUSION_BYTES / GIB_BYTES:.2f} GiB (vLLM turns it on for TP > 1 on "
            "compute capability 9.0 / 10.x from 0.17; the size is an estimate from two vLLM "
            "0.19 H100 TP2 logs)"
        )
    return non_torch


def _cudagraph_bytes(
    at: _Release,
    runner: str,
    n_sizes: int,
    m: MeasuredTerms,
    sources: dict[str, TermSource],
) -> int:
    """The CUDA-graph memory the release subtracts before sizing the KV cache for `n_sizes`
    captured sizes (0 where it does not: older releases, eager mode, ROCm before its
    estimate)."""
    model, s, version = at.model, at.settings, at.version
    layers_rank = ceil_div(sum(g.num_layers for g in model.kv_groups), s.pipeline_parallel_size)
    graphs_on = at.engine == "v1" and not s.enforce_eager
    vendor = at.gpu.vendor.lower()
    estimates_graphs = (
        at.rules.subtracts_cudagraph
        and (runner != "v2" or version >= V2_CUDAGRAPH_ESTIMATE_SINCE)
        and (vendor == "nvidia" or (vendor == "amd" and version >= ROCM_CUDAGRAPH_ESTIMATE_SINCE))
    )
    graph = 0
    if graphs_on and estimates_graphs:
        graph = CUDAGRAPH_BYTES_PER_LAYER_PER_SIZE * layers_rank * n_sizes
        sources["cudagraph_bytes"] = "calibrated"
        graph = correct(s.calibration, "cudagraph_bytes", graph, sources)
    else:
        sources["cudagraph_bytes"] = "exact"  # not reserved by this version / eager mode
    if m.cudagraph_bytes is not None and estimates_graphs and graphs_on:
        graph, sources["cudagraph_bytes"] = m.cudagraph_bytes, "log"
    return graph


def _kv_pool(
    at: _Release,
    block: int,
    kv_bytes: int,
    stage_layers: int | None,
    available: int,
    max_len: int,
    tokens: int,
    granule: int = 0,
) -> _Pool:
    """The blocks `available` bytes hold, one block spanning a KV-cache group's layers, and
    the token count and concurrency the release reports for them. `granule`: each of the
    group's KV tensors is committed in whole granules of this many bytes (the extensible KV
    cache), so the blocks are those whose rounded-up pages fit."""
    model, rules, engine = at.model, at.rules, at.engine
    tp, pp = at.settings.tensor_parallel_size, at.settings.pipeline_parallel_size
    ds_mla = ds_mla_layout(model, at.version, at.settings.kv_cache_dtype)
    states = paged_states(model, engine)
    buckets = _buckets(model, tp, pp, block, kv_bytes, stage_layers, ds_mla, states)
    attn_pages = [b.page_bytes for b in buckets if b.kind.per_token]
    state_pages = [b.page_bytes for b in buckets if not b.kind.per_token]
    if attn_pages and state_pages:
        # Hybrid models: the attention block grows until its page covers a Mamba state page, in
        # multiples of max(the kernel's smallest block, the block asked for) (vllm/platforms/
        # interface.py, kernel_block_alignment_size: 16-token multiples under the 16-token
        # default, 64 under 0.34's); under "all" in multiples of its lcm with the Mamba chunk
        # (VLLM_MAMBA_CACHE_MODES_SINCE)
        per_token = max(attn_pages) // block
        align = math.lcm(max(KERNEL_MIN_BLOCK_SIZE, block), _checkpoint_alignment(at))
        if _mamba_mode(at) == "all":
            chunk = model.mamba_chunk_tokens or VLLM_MAMBA_DEFAULT_CHUNK_TOKENS
            align = math.lcm(chunk, max(KERNEL_MIN_BLOCK_SIZE, block))
        raised = ceil_div(ceil_div(max(state_pages), per_token), align) * align
        if raised > block:
            block = raised
            buckets = _buckets(model, tp, pp, block, kv_bytes, stage_layers, ds_mla, states)
    page = max(b.page_bytes for b in buckets)
    group_size, groups = _kv_groups(buckets)
    num_groups = sum(n for _, n in groups)
    bytes_per_block = group_size * page
    num_blocks = available // bytes_per_block
    if granule:
        per_tensor = available // group_size // granule * granule
        num_blocks = per_tensor // page
    per_request = _blocks(groups, max_len, block, tokens, _state_blocks(at))
    concurrency = num_blocks / per_request
    if rules.tokens == "blocks" or engine == "v0":
        kv_tokens = num_blocks * block
    elif rules.tokens == "blocks_per_group":
        kv_tokens = num_blocks // num_groups * block
    else:
        kv_tokens = int(concurrency * max_len)
    if engine == "v0" or rules.tokens == "blocks":
        concurrency = kv_tokens / max_len  # V0 and V1 0.8-0.9: tokens / max_model_len
    return _Pool(
        block, bytes_per_block, num_blocks, per_request, num_groups, kv_tokens, concurrency
    )


def _auto_fit(
    at: _Release,
    pool: _Pool,
    kv_bytes: int,
    stage_layers: int | None,
    derived: int,
    in_flight: int,
) -> int:
    """`--max-model-len auto`: the longest length, up to the derived one, whose request's
    blocks fit in the KV memory (the release's count of them: see MAX_MODEL_LEN_AUTO)."""
    tp, pp = at.settings.tensor_parallel_size, at.settings.pipeline_parallel_size
    buckets = _buckets(at.model, tp, pp, pool.block, kv_bytes, stage_layers)
    groups = _counted_groups(buckets, at.version)
    budget = pool.num_blocks  # available // bytes_per_block, or the extensible pool's granules

    state_blocks = _state_blocks(at)  # the same at every length the search tries

    def fits(length: int) -> bool:
        return _blocks(groups, length, pool.block, in_flight, state_blocks) <= budget

    if not fits(1):
        raise NoKvCache(
            "--max-model-len",
            "auto: the KV cache holds no block for even one token (vLLM refuses to start)",
        )
    return largest_passing(1, derived, fits)


def extensible_kv_bytes(
    total: int, requested: int, resident: int, peak: int, reserved: int, gpu: GpuSpec
) -> int:
    """vLLM 0.34's extensible KV cache: what the KV may occupy once warm-up has run, given
    everything resident but the KV (`resident`: weights, non-torch memory, CUDA graphs, the
    connector's buffers) and the transient peak; memory other processes hold (`reserved`) and
    this process's CUDA context are not free at start (measure_kv_cache_bytes)."""
    amd = gpu.vendor == "amd"
    floor = EXTENSIBLE_MARGIN_FLOOR_ROCM_BYTES if amd else EXTENSIBLE_MARGIN_FLOOR_BYTES
    margin = max(floor, int(peak * EXTENSIBLE_MARGIN_FRACTION))
    headroom = total - CUDA_CONTEXT_BYTES - reserved - resident
    return min(requested - resident, headroom - margin) - peak


def default_block_size(version: tuple[int, int, int]) -> int:
    """The KV block size a vLLM release takes when --block-size is not given."""
    return rules_for(version).default_block_size


def _other_tenants(
    reserved: int,
    engine: str,
    version: tuple[int, int, int],
    total: int,
    requested: int,
    charged: bool,
    notes: list[str],
) -> int:
    """What memory held by other processes takes from the KV budget (see the constants)."""
    gib = reserved / GIB_BYTES
    if charged:
        notes.append(f"other processes' {gib:.2f} GiB are charged to the KV cache by this release")
        return reserved
    if engine == "v1" and version >= FREE_MEMORY_CHECK_SINCE:
        free = total - reserved
        if free < requested:
            most = math.floor(free / total * 100) / 100
            raise NoKvCache(
                "--reserved-gib",
                f"vLLM refuses to start: {free / GIB_BYTES:.2f} GiB free at start (total less "
                f"{gib:.2f} GiB held by other processes) is below the {requested / GIB_BYTES:.2f} "
                f"GiB gpu_memory_utilization asks for; use --gpu-memory-utilization {most:.2f} "
                "or lower",
            )
        notes.append(
            f"other processes' {gib:.2f} GiB are not charged to the KV cache (vLLM budgets from "
            "its own baseline); they leave the memory the utilisation asks for free at start "
            f"(this process's own CUDA context, ~{NON_TORCH_WITH_CONTEXT_BYTES / GIB_BYTES:.2f} "
            "GiB, is not counted in that check)"
        )
        return 0
    notes.append(f"other processes' {gib:.2f} GiB are not charged by this release")
    return 0


def _log_lines(
    rules: VllmRules,
    engine: str,
    available: int,
    num_blocks: int,
    bytes_per_block: int,
    tokens: int,
    concurrency: float,
    max_len: int,
) -> list[str]:
    if engine == "v0":
        cpu_blocks = SWAP_SPACE_BYTES // bytes_per_block
        return [
            f"# GPU blocks: {num_blocks}, # CPU blocks: {cpu_blocks}",
            f"Maximum concurrency for {max_len} tokens per request: {concurrency:.2f}x",
        ]
    lines = [f"Available KV cache memory: {available / GIB_BYTES:.2f} GiB"]
    size = f"GPU KV cache size: {tokens:,} tokens"
    conc = f"Maximum concurrency for {max_len:,} tokens per request: {concurrency:.2f}x"
    if rules.log == "one_line":
        return [*lines, f"{size}, {conc}"]
    return [*lines, size, conc]
