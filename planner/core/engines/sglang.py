"""SGLang's KV-pool sizing (docs/engines.md; SGLang's model_runner.py and server_args.py of
each release).

    rest   = free memory before weights x mem_fraction_static - memory taken since (weights)
    tokens = rest // cell_size, floored to a multiple of page_size

Activations and CUDA graphs are not measured: they must fit in (1 - mem_fraction_static).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal, NamedTuple

from pydantic import BaseModel, ConfigDict, Field

from planner.core.engines.calibration import Calibration, cal_notes, correct
from planner.core.engines.common import (
    BLACKWELL_MAJOR,
    CONSUMER_BLACKWELL_MAJOR,
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
    rope_cache_bytes,
    total_term,
    version_text,
    weights_term,
)
from planner.core.kv import kv_heads_per_rank, layer_state_bytes
from planner.core.parallel import deepep_wide
from planner.core.specs import OPENAI_MXFP4, GpuSpec, KvKind, ModelSpec
from planner.core.step.comm import host_gpus, hosts_spanned
from planner.errors import InputError
from planner.units import GIB_BYTES, MIB_BYTES, ceil_div, dtype_bytes

NEWEST_VERSION = (0, 5, 23)
# The oldest release modelled: 0.3, the oldest line the version rules here start from; earlier
# releases get a note rather than a silent stand-in.
OLDEST_VERSION = (0, 3, 0)
# The first release whose server_args.py takes each flag a plan may ask for (read in the 0.3.0,
# 0.3.6, 0.4.0, 0.4.1, 0.4.3-0.4.10 and 0.5.0rc0 wheels): pipeline parallelism arrives with
# --pp-size in 0.4.7 (which turns the overlap scheduler off under it, as 0.5.13 still does);
# DeepEP as --enable-deepep-moe in 0.4.5 (--moe-a2a-backend deepep from 0.5.0, the line's
# spelling by release: planner.core.serve).
CUDA_GRAPH_MAX_BS_SINCE = (0, 3, 6)
DP_ATTENTION_SINCE = (0, 3, 6)
EP_SIZE_SINCE = (0, 4, 1)
PAGE_SIZE_SINCE = (0, 4, 4)
DEEPEP_SINCE = (0, 4, 5)
MOE_DENSE_TP_SIZE_SINCE = (0, 4, 6)
PP_SINCE = (0, 4, 7)
# DP replicas (--dp-size without DP attention) in one server on one host only: from 0.4.2
# server_args.py asserts "multi-node data parallel is not supported unless dp attention!"
# (absent from 0.4.1; 0.5.23's validation_hook.py: "multi-node data-parallel replicas are not
# supported").
DP_REPLICAS_ONE_HOST_SINCE = (0, 4, 2)
# SGLang asserts the chunked-prefill size divides by the page size (server_args.py, every
# release with --page-size): on the global size in __post_init__ through 0.4.9, on each
# attention-DP group's share in check_server_args from 0.4.10; chunking off (-1) exempt from
# 0.5.1 (0.4.10 checks -1 too), a decode instance from 0.5.3.
CHUNK_PAGE_PER_GROUP_SINCE = (0, 4, 10)
CHUNK_PAGE_OFF_EXEMPT_SINCE = (0, 5, 1)
CHUNK_PAGE_DECODE_EXEMPT_SINCE = (0, 5, 3)
# DeepEP's default `--deepep-mode auto` beside DP attention: 0.4.5-0.4.8 assert against it
# ("DeepEP MoE `auto` mode is not supported with DP Attention", server_args.py), 0.4.9 drops
# the assertion. The planner prices the auto mode (low-latency kernels in decode batches, the
# normal ones in prefill batches: the flag's help), which a PD instance runs as the one mode
# of its batches: its line names that mode there; an aggregated server cannot run it.
DEEPEP_AUTO_WITH_DP_ATTENTION_SINCE = (0, 4, 9)
DEEPEP_MODE_OF_ROLE = {"prefill": "normal", "decode": "low_latency"}
# SGLang pipelines a model whose forward takes pp_proxy_tensors, and asserts it otherwise
# ("Pipeline Parallel is not compatible with this model": model_executor/model_runner.py,
# 0.4.7-0.5.23). Every shipped architecture's class scanned in each wheel from 0.4.7 to 0.5.23
# (through its EntryClass and bases): these gained it after they were registered (None: not
# through 0.5.23); the others take it from their registration.
PP_ARCHITECTURES_SINCE: dict[str, tuple[int, int, int] | None] = {
    "DeepseekV2ForCausalLM": (0, 5, 1),
    "DeepseekV3ForCausalLM": (0, 5, 1),
    "Qwen2_5_VLForConditionalGeneration": (0, 5, 6),
    "Qwen3VLForConditionalGeneration": (0, 5, 7),
    "Qwen3VLMoeForConditionalGeneration": (0, 5, 7),
    "KimiK25ForConditionalGeneration": (0, 5, 10),
    "MiniMaxM2ForCausalLM": (0, 5, 10),
    "Gemma4ForConditionalGeneration": (0, 5, 13),
    "Gemma2ForCausalLM": None,
    "Gemma3ForConditionalGeneration": None,
    "Llama4ForConditionalGeneration": None,
    "MiMoForCausalLM": None,
    "Qwen3NextForCausalLM": None,
}
TWO_BATCH_OVERLAP_SINCE = (0, 4, 7)
REDUNDANT_EXPERTS_SINCE = (0, 4, 7)
DP_LM_HEAD_SINCE = (0, 4, 7)
SCHEDULER_RECV_INTERVAL_SINCE = (0, 5, 0)
# --kv-cache-dtype fp8_e4m3 from 0.4.3 (fp8_e5m2 alone before).
FP8_E4M3_KV_SINCE = (0, 4, 3)
# Memory in use before weights load (CUDA context, torch and NCCL init): the one SGLang log in
# the calibration cases (docs/engines.md) printed "Load weight begin. avail mem=78.81 GB" on an
# 80 GB card whose
# CUDA total is 79.19 GiB (the H100 figure) -> 0.38 GiB. One log: treat as an estimate.
PRE_LOAD_USED_BYTES = round(0.38 * GIB_BYTES)
# Hybrid SWA models: SWA-layer tokens per full-layer token (--swa-full-tokens-ratio default).
SWA_FULL_TOKENS_RATIO = 0.8
# SGLang pools a model's window layers apart (at that ratio of the full layers' tokens) only
# for the architectures it lists (python/sglang/srt/configs/model_config.py
# is_hybrid_swa_model, from 0.5.8; Llama 4's chunked layers are its window layers). Before,
# the runner's own test found no common model it did not switch off: gpt-oss and Gemma 2 / 3
# set disable_hybrid_swa_memory (0.4.10.post2-0.5.7). Every other model sizes its window
# layers as full ones, Gemma 2 / 3 in every release. gpt-oss kept it off on the TensorRT-LLM
# MHA backend (compute capability 10.x) in 0.5.8-0.5.9. Read in the 0.4.10-0.5.23 wheels.
HYBRID_SWA_SINCE = {
    "GptOssForCausalLM": (0, 5, 8),
    "Llama4ForConditionalGeneration": (0, 5, 8),
    "MiMoV2FlashForCausalLM": (0, 5, 8),
    "Step3p5ForCausalLM": (0, 5, 9),
    "Gemma4ForCausalLM": (0, 5, 11),
    "Gemma4ForConditionalGeneration": (0, 5, 11),
    "Gemma4UnifiedForConditionalGeneration": (0, 5, 13),
}
GPT_OSS_TRTLLM_SWA_SINCE = (0, 5, 10)
# Default chunked-prefill size and decode capture max batch by GPU memory (MiB):
# (upper bound, chunked, max_bs tp<4, max_bs tp>=4), per release (server_args.py /
# arg_groups/memory_hook.py, read at 0.5.10 and 0.5.20-0.5.23).
GPU_TIERS_MIB = (
    (20_480, 2048, 8, 8),
    (35_840, 4096, 48, 160),
    (61_440, 4096, 32, 160),
    (92_160, 8192, 256, 512),
    (163_840, 8192, 256, 512),
    (10**9, 16384, 512, 512),
)
GPU_TIERS_MIB_0_5_3 = (
    (20_480, 2048, 8, 8),
    (35_840, 2048, 24, 80),
    (61_440, 4096, 32, 160),
    (92_160, 8192, 256, 512),
    (163_840, 8192, 256, 512),
    (10**9, 16384, 512, 512),
)
TIERS_0_5_20_SINCE = (0, 5, 20)
# The activation + graph heuristic for mem_fraction_static arrived in 0.5.3. Prefill CUDA graphs
# add 8 MiB per captured size (1.5 GiB with MLA) where they run (server_args.py; from 0.5.16
# arg_groups/memory_hook.py reserve_for_graph_mb; read in the 0.5.3 - 0.5.23 wheels):
#   0.5.10 - 0.5.14  piecewise graphs, on by default on CUDA only; off under DP attention, PP,
#                    a multimodal model, or a PD role (_handle_piecewise_cuda_graph; its list of
#                    architectures turned off is not modelled); their tokens run to the chunk,
#                    capped at the context
#   0.5.15 - 0.5.16  breakable graphs on CUDA (ROCm's piecewise default is off there); off for MLA,
#                    DP attention, a multimodal model
#   0.5.17 - 0.5.18  off for MLA (non-DSA)
#   0.5.19 on        off for a multimodal model; MLA counts 1.5 GiB
# From 0.5.15 the reserve follows the PD role: a decode instance keeps no prefill graphs and
# sizes its activation slack by max(max_running_requests or its graph batch, 2,048) tokens; a
# prefill instance keeps no decode graphs (nor DP attention's decode padding).
# DP attention adds 1.5 MiB per decode batch size per group on top of its 3 when the largest
# decode batch exceeds 300 (0.5.3 on).
ACTIVATION_HEURISTIC_SINCE = (0, 5, 3)
PIECEWISE_GRAPH_RESERVE_SINCE = (0, 5, 10)
BREAKABLE_GRAPH_SINCE = (0, 5, 15)
PD_ROLE_RESERVE_SINCE = (0, 5, 15)
BREAKABLE_DP_ATTENTION_SINCE = (0, 5, 17)
BREAKABLE_MLA_SINCE = (0, 5, 19)
DP_ATTENTION_LARGE_BATCH = 300
DP_ATTENTION_LARGE_BATCH_MIB_PER_BS = 1.5
# DeepEP's all-to-all buffers (--moe-a2a-backend deepep): 2 GiB more where decode graphs are
# captured (not on a PD prefill instance), added after the 10 GiB floor, from 0.5.15
# (server_args.py _handle_gpu_memory_settings; 0.5.16 on reserve_for_deepep_a2a_mb, from 0.5.19
# in arg_groups/memory_hook.py; read in the 0.5.14 - 0.5.23 wheels: absent from 0.5.14); and
# 1 GiB more inside the graph reserve where breakable prefill graphs are captured ("Prefill-BCG
# DeepEP delta", reserve_for_graph_mb, from 0.5.17: absent from 0.5.16).
DEEPEP_DECODE_RESERVE_SINCE = (0, 5, 15)
DEEPEP_DECODE_RESERVE_MIB = 2 * 1024
DEEPEP_PREFILL_GRAPH_RESERVE_SINCE = (0, 5, 17)
DEEPEP_PREFILL_GRAPH_RESERVE_MIB = 1024
# AMD's MoRI all-to-all (--moe-a2a-backend mori: ROCm/mori's EP dispatch and combine, ROCm
# builds only) from 0.5.9 (server_args.py MOE_A2A_BACKEND_CHOICES: absent from the 0.5.8 wheel).
# Like DeepEP it sets --ep-size to the TP size; unlike it, it always runs its normal kernels
# (deepep_mode set to normal, its CUDA graphs kept: _handle_a2a_moe, 0.5.9 - 0.5.23). It asserts
# that a rank's chunked-prefill size is at most SGLANG_MORI_NUM_MAX_DISPATCH_TOKENS_PER_RANK
# (4,096 by default), the size as data-parallel attention divided it; in 0.5.9 always, from
# 0.5.10 only where chunking is on and the instance is not a PD decode one. Its buffers live in
# the mori library's symmetric heap (MORI_SHMEM_HEAP_SIZE; by default 2 GiB, 4 GiB from ROCm/mori
# PR 204, 2026-03: include/mori/shmem/internal.hpp), allocated when the dispatcher first runs
# (layers/moe/token_dispatcher/moriep.py: the op is built on first use), after the KV pool.
MORI_SINCE = (0, 5, 9)
MORI_CHUNK_CHECK_SCOPED_SINCE = (0, 5, 10)
MORI_MAX_DISPATCH_TOKENS_PER_RANK = 4096
# --disable-cuda-graph turns both phases' graphs off (0.5.14's cuda_graph_config: decode and
# prefill backends DISABLED). The reserve stops counting the prefill graphs from 0.5.14 and the
# decode graphs (and DeepEP's decode buffers) from 0.5.15 (`backend != Backend.DISABLED` in
# _handle_gpu_memory_settings; reserve_for_graph_mb from 0.5.16); up to 0.5.13 the flag leaves
# the reserve as it is (read in the 0.5.10, 0.5.13, 0.5.14, 0.5.15 and 0.5.23 wheels). DP
# attention's padding is counted either way.
NO_GRAPH_PREFILL_RESERVE_SINCE = (0, 5, 14)
NO_GRAPH_DECODE_RESERVE_SINCE = (0, 5, 15)
# From 0.5.22 a default decode graph batch above --max-running-requests is lowered to it
# before the reserve is sized (arg_groups/memory_hook.py `decode_max_bs_is_default`; read in
# the 0.5.21 and 0.5.22 wheels: absent from 0.5.21).
GRAPH_BS_RUNNING_CAP_SINCE = (0, 5, 22)
# A model path naming Llama 2 caps the prefill graphs' tokens at 4,096 ("For Llama2 series
# models, the max tokens is limited to 4096": server_args.py 0.5.10 - 0.5.15,
# arg_groups/memory_hook.py 0.5.19 - 0.5.23).
LLAMA2_PREFILL_GRAPH_TOKENS = 4096
LLAMA2_PATH_MARK = "llama-2"
# With an MLA attention backend the prefill graphs stop at 2,048 tokens, the chunk's size
# otherwise ("the introduction of piecewise cuda graph will influence the kernel dispatch":
# piecewise_cuda_graph_max_tokens in server_args.py 0.5.10, the prefill phase's max_bs from
# 0.5.15). An MoE all-to-all backend turns them off at start-up: any in the piecewise graphs'
# rules (0.5.10's _handle_piecewise_cuda_graph, "MoE A2A backend") and the breakable ones'
# (0.5.15's _disable_breakable_cudagraph_if_incompatible); from 0.5.17, where the reserve
# counts DeepEP's delta beside breakable prefill graphs, all but DeepEP ("unvalidated a2a
# backend": arg_groups/cuda_graph_hook.py, 0.5.23, which keeps DeepEP, MegaMoE and FlashInfer's).
MLA_PREFILL_GRAPH_TOKENS = 2048
# A captured prefill graph makes TensorRT-LLM's MLA backend fall back to FlashAttention for
# prefill, so from 0.5.15 SGLang turns the prefill graphs off for the DeepSeek-V3 architecture
# where trtllm_mla prefills (_disable_prefill_cuda_graph_for_deepseek_trtllm_mla in
# server_args.py 0.5.15, arg_groups/cuda_graph_hook.py 0.5.23), unless the prefill graph
# backend is set explicitly.
TRTLLM_MLA_NO_PREFILL_GRAPH_SINCE = (0, 5, 15)
DEEPSEEK_V3_ARCHITECTURE = "DeepseekV3ForCausalLM"
# ServerArgs.max_prefill_tokens, 16,384 (server_args.py in 0.5.13, arg_groups/fields/
# schedule.py in 0.5.23): the log's summary line, and the prompt tokens a prefill batch stops
# taking requests at (planner.api.bench_instance)
DEFAULT_MAX_PREFILL_TOKENS = 16384
# 0.4.8 - 0.5.2: a fixed reserve per GPU tier, p = TP x PP:
# (upper bound MiB, reserve MiB = base + per_rank x p).
TIER_RESERVE_SINCE = (0, 4, 8)
TIER_RESERVES_MIB = (
    (35 * 1024, 2.8 * 1024, 1024 / 10),
    (90 * 1024, 9.5 * 1024, 1024 / 2),
    (160 * 1024, 12 * 1024, 1024 / 2),
    (10**9, 32 * 1024, 0.0),
)
# Before 0.4.8: a table by TP size on cards up to 80 GiB, else (memory - 13 GiB) / memory; chunked
# prefill 2048 under 25,000 MiB, else 8192 (0.4.6 server_args.py).
TP_TABLE_FRACTIONS = ((16, 0.79), (8, 0.81), (4, 0.85), (2, 0.87), (1, 0.88))
TP_TABLE_MAX_MIB = 81_920
LARGE_CARD_RESERVE_MIB = 13 * 1024
RESERVED_FLOOR_MIB = 10_240  # reserved memory floor on cards above 61,440 MiB (0.5.8+)
RESERVED_BASE_MIB = 512
MLA_PREFILL_GRAPH_RESERVE_MIB = 1536
PREFILL_GRAPH_MIB_PER_SIZE = 8
# Vision models (adjust_mem_fraction_for_vlm, 0.5.5+): the default fraction x 0.95 x a factor
# that falls 10% per 100% of ViT "complexity" (layers x hidden^2) above ViT-L/14 (24 x 1024^2),
# clamped to [0.8, 1.05]; getattr defaults 24 / 1024 when vision_config lacks the keys.
VLM_FRACTION_BASE = 0.95
VLM_BASELINE_LAYERS = 24
VLM_BASELINE_HIDDEN = 1024
VLM_SENSITIVITY = 0.1
VLM_FACTOR_RANGE = (0.8, 1.05)
VLM_ADJUST_SINCE = (0, 5, 5)

# The page size SGLang's attention backend sets where --page-size is not given (the default
# is 1): DeepSeek's sparse attention (V3.2's indexer) takes 64-token pages on NVIDIA from
# 0.5.4 ("Setting page size to 64 for DeepSeek NSA / DSA"; 64 x the config's index_kpool in
# 0.5.23), and on compute capability 10.x (B200, B300, GB200) the TensorRT-LLM kernels SGLang
# picks raise pages of 1 to 64: trtllm_mha for gpt-oss (0.5.1), Llama 4 (0.5.5) and Gemma 4
# (0.5.13), trtllm_mla for DeepSeek-V3 architectures (0.5.4), trtllm_mha as the default of
# plain-attention models (0.5.7)
# (python/sglang/srt/server_args.py model_specific_adjustments and
# _handle_attention_backend_compatibility, read in the 0.5.1-0.5.23 wheels; later releases
# move them to arg_groups/). Other architectures carry per-model overrides and keep 1 here.
# On ROCm DSA takes 64 as well through 0.5.7 (the override is `if not is_npu()`), 1 from 0.5.8
# ("Setting page size to 1 for DeepSeek DSA on ROCm"), and from 0.5.12 64 again where aiter's
# preshuffle paged-MQA kernel runs (dsa/utils.py aiter_can_use_preshuffle_paged_mqa: Triton
# >= 3.5 with SGLANG_USE_AITER on; 1 otherwise).
TRTLLM_PAGE_TOKENS = 64
DSA_PAGE_SINCE = (0, 5, 4)
DSA_ROCM_PAGE_ONE_SINCE = (0, 5, 8)
DSA_ROCM_PRESHUFFLE_SINCE = (0, 5, 12)
BLACKWELL_PAGE_SINCE = {
    "GptOssForCausalLM": (0, 5, 1),
    "DeepseekV3ForCausalLM": (0, 5, 4),
    "Llama4ForConditionalGeneration": (0, 5, 5),
    # Gemma 4 ran Triton attention until 0.5.12 (its ModelOpt FP4 MoE variant still does)
    "Gemma4ForCausalLM": (0, 5, 13),
    "Gemma4ForConditionalGeneration": (0, 5, 13),
}
PLAIN_ATTENTION_PAGE_SINCE = (0, 5, 7)
PLAIN_ATTENTION_ARCHITECTURES = frozenset(
    {
        "LlamaForCausalLM",
        "MistralForCausalLM",
        "MixtralForCausalLM",
        "Qwen2ForCausalLM",
        "Qwen2MoeForCausalLM",
        "Qwen3ForCausalLM",
        "Qwen3MoeForCausalLM",
        "Phi3ForCausalLM",
    }
)


# DeepSeek's sparse attention (V3.2: "NSA" in SGLang's code, "DSA" from 0.5.13) on NVIDIA
# compute capability 10 and up stores its latent cache in fp8_e4m3: 0.5.4 sets it whatever
# --kv-cache-dtype says, 0.5.5 on where the flag is `auto` (Hopper's `auto` stays bf16)
# (server_args.py _handle_model_specific_adjustments 0.5.4-0.5.13, arg_groups/overrides.py
# _dsa_kv_cache_dtype_default 0.5.16-0.5.23). 0.5.4 and 0.5.5 also turn on data-parallel
# attention with --dp-size = --tp-size for it on any GPU (`if not is_npu()`), after the memory
# heuristic has run (_handle_gpu_memory_settings precedes _handle_model_specific_adjustments
# in __post_init__): the fraction is the one without it, the rest runs with it, the
# chunked-prefill size divided among the groups as for the flag (_handle_data_parallelism).
DSA_FP8_KV_SINCE = (0, 5, 4)
DSA_FP8_KV_AUTO_ONLY_SINCE = (0, 5, 5)
DSA_DP_ATTENTION_UNTIL = (0, 5, 6)
# The DSA pool's token cell: kv_lora_rank + rope at the KV dtype's size until 0.5.16, whatever
# the stored layout; from 0.5.17 the layout's own width (kv_cache_configurator.py
# calculate_mla_kv_cache_dim): the fp8 FlashMLA layout Hopper defaults to is DeepSeek's scaled
# one (common.ds_mla_latent_bytes: 656 bytes for V3.2), the TensorRT-LLM layout compute
# capability 10+ defaults to keeps the raw 576.
DSA_SCALED_LAYOUT_SINCE = (0, 5, 17)


def forced_attention_dp(model: ModelSpec, version: tuple[int, int, int], tp: int) -> int:
    """The attention-DP groups SGLang turns on by itself (see DSA_DP_ATTENTION_UNTIL): TP of
    them for DeepSeek's sparse attention in 0.5.4-0.5.5, else 1."""
    forced = is_dsa(model) and DSA_FP8_KV_SINCE <= version < DSA_DP_ATTENTION_UNTIL
    return tp if forced else 1


# SGLang divides the --chunked-prefill-size among the attention-DP groups from 0.4.5
# (server_args.py: `chunked_prefill_size // self.dp_size`; _handle_data_parallelism, and
# arg_groups/parallel_hook.py in 0.5.23); 0.4.0-0.4.4 halved it whatever the groups
# (`chunked_prefill_size // 2`, read in the 0.4.0, 0.4.3 and 0.4.4 wheels).
DP_ATTENTION_CHUNK_SHARED_SINCE = (0, 4, 5)
DP_ATTENTION_CHUNK_DIVISOR_BEFORE = 2


# SGLang 0.4.0 also capped the decode CUDA graphs at 96 sequences under data-parallel
# attention (`cuda_graph_max_bs = min(cuda_graph_max_bs, 96)`, after the memory fraction is set;
# read in the 0.4.0 wheel, gone from 0.4.1).
DP_ATTENTION_GRAPH_BS_CAP = 96
DP_ATTENTION_GRAPH_BS_CAP_RELEASES = ((0, 4, 0), (0, 4, 1))


def chunk_divisor(attn_dp: int, version: tuple[int, int, int] | None) -> int:
    """What SGLang divides the flag's chunked-prefill size by to get each group's (1 without
    data-parallel attention)."""
    if attn_dp <= 1:
        return 1
    if version is not None and version < DP_ATTENTION_CHUNK_SHARED_SINCE:
        return DP_ATTENTION_CHUNK_DIVISOR_BEFORE
    return attn_dp


def group_chunk(chunk: int, attn_dp: int, version: tuple[int, int, int] | None) -> int:
    """The chunked-prefill size each attention-DP group runs (`chunk_divisor`); -1 (no
    chunking) stays."""
    return chunk // chunk_divisor(attn_dp, version) if chunk > 0 else chunk


# A checkpoint whose quantization declares an FP8 KV cache (ModelSpec.fp8_kv_declared_by):
# SGLang runs `auto` as fp8 where the loaded quantization config's kv_cache_quant_algo is "FP8"
# (model_runner.py's pool set-up from 0.5.3, absent in 0.5.2; mem_cache/kv_cache_dtype.py in
# 0.5.23). ModelOpt's configs carry it from then; Fp8Config reads its own from 0.5.18
# (layers/quantization/fp8.py, absent in 0.5.17), compressed-tensors' config derives it from an
# 8-bit-float kv_cache_scheme from 0.5.19 (absent in 0.5.18).
CHECKPOINT_KV_SINCE = {
    "modelopt": (0, 5, 3),
    "fp8": (0, 5, 18),
    "compressed-tensors": (0, 5, 19),
}


def checkpoint_fp8_kv(model: ModelSpec, version: tuple[int, int, int], flag: str) -> bool:
    """Whether SGLang runs the KV cache in fp8 for `auto` because the checkpoint declares one
    (see CHECKPOINT_KV_SINCE)."""
    since = CHECKPOINT_KV_SINCE.get(model.fp8_kv_declared_by or "")
    return flag == "auto" and since is not None and version >= since


def dsa_fp8_kv(model: ModelSpec, gpu: GpuSpec, version: tuple[int, int, int], flag: str) -> bool:
    """Whether SGLang runs a DSA model's KV cache in fp8_e4m3 whatever the flag asked (see
    DSA_FP8_KV_SINCE)."""
    if not is_dsa(model) or gpu.vendor != "nvidia" or version < DSA_FP8_KV_SINCE:
        return False
    if capability(gpu)[0] < BLACKWELL_MAJOR:
        return False
    return version < DSA_FP8_KV_AUTO_ONLY_SINCE or flag == "auto"


def default_page_size(model: ModelSpec, gpu: GpuSpec, version: tuple[int, int, int]) -> int:
    """The page size SGLang runs with when --page-size is not given (see above)."""
    if is_dsa(model) and gpu.vendor in ("nvidia", "amd") and version >= DSA_PAGE_SINCE:
        rocm_one = DSA_ROCM_PAGE_ONE_SINCE <= version < DSA_ROCM_PRESHUFFLE_SINCE
        return 1 if gpu.vendor == "amd" and rocm_one else TRTLLM_PAGE_TOKENS
    if gpu.vendor != "nvidia" or is_dsa(model):
        return 1
    if capability(gpu)[0] != BLACKWELL_MAJOR:
        return 1
    arch = model.architecture or ""
    since = BLACKWELL_PAGE_SINCE.get(arch)
    if since is None and arch in PLAIN_ATTENTION_ARCHITECTURES:
        since = PLAIN_ATTENTION_PAGE_SINCE
    return TRTLLM_PAGE_TOKENS if since is not None and version >= since else 1


# The page sizes the TensorRT-LLM kernels take: a --page-size outside them is changed to 64
# ("TensorRT-LLM MHA only supports page_size of 16, 32 or 64, changing page_size from 1 to
# 64"; MLA: 32 or 64), and DeepSeek's sparse attention takes its own whatever is asked
# ("Setting page size to 64 for DeepSeek NSA"): server_args.py _handle_attention_backend_
# compatibility, then arg_groups/overrides.py, read in the 0.5.1 - 0.5.23 wheels. MHA takes
# 128 as well from 0.5.17 (trtllm-gen's dynamic tokens-per-page kernels).
TRTLLM_MHA_PAGE_SIZES = (16, 32, 64)
TRTLLM_MHA_PAGE_128_SINCE = (0, 5, 17)
TRTLLM_MLA_PAGE_SIZES = (32, 64)
TRTLLM_MLA_ARCHITECTURE = "DeepseekV3ForCausalLM"


def run_page_size(
    model: ModelSpec, gpu: GpuSpec, version: tuple[int, int, int], given: int | None
) -> tuple[int, str | None]:
    """The page size SGLang runs with for --page-size `given` (None: unset), and where it is
    not the one given, the backend that set it."""
    default = default_page_size(model, gpu, version)
    if given is None or default == 1:
        return given or default, None
    if is_dsa(model):
        backend = "DeepSeek sparse attention (NSA)"
        return default, None if given == default else backend
    taken: tuple[int, ...] = TRTLLM_MHA_PAGE_SIZES
    backend = "TensorRT-LLM MHA"
    if model.architecture == TRTLLM_MLA_ARCHITECTURE:
        taken, backend = TRTLLM_MLA_PAGE_SIZES, "TensorRT-LLM MLA"
    elif version >= TRTLLM_MHA_PAGE_128_SINCE:
        taken += (128,)
    if given in taken:
        return given, None
    return TRTLLM_PAGE_TOKENS, backend


def trtllm_mla_prefill(model: ModelSpec, gpu: GpuSpec, version: tuple[int, int, int]) -> bool:
    """Whether SGLang prefills a DeepSeek-V3 architecture on TensorRT-LLM's MLA kernels, its
    default attention backend for it on compute capability 10.x (BLACKWELL_PAGE_SINCE)."""
    arch = model.architecture or ""
    if arch != DEEPSEEK_V3_ARCHITECTURE or gpu.vendor != "nvidia":
        return False
    return capability(gpu)[0] == BLACKWELL_MAJOR and version >= BLACKWELL_PAGE_SINCE[arch]


# Multimodal models reserve SGLANG_VLM_CACHE_SIZE_MB (100) of the KV budget for the embedding
# cache allocated after the pool is sized (mm_runtime_reservation_gb; present by 0.5.20).
VLM_CACHE_RESERVE_BYTES = 100 * MIB_BYTES
VLM_CACHE_RESERVE_SINCE = (0, 5, 20)
# Hybrid Mamba / linear-attention models: the rest is split so that state : full KV =
# --mamba-full-memory-ratio (default 0.9, 0.5.5+); the state pool holds (K + 1) request slots and
# max_running_requests is capped at K // 3 (MAMBA_CACHE_SIZE_MAX_RUNNING_REQUESTS_RATIO).
MAMBA_FULL_MEMORY_RATIO = 0.9
# Bound on the ratio we accept: a state pool a million times the KV pool leaves no KV at all;
# beyond it the arithmetic overflows rather than says so.
MAX_MAMBA_FULL_MEMORY_RATIO = 1e6
MAMBA_SLOTS_PER_RUNNING_REQUEST = 3
# --disable-radix-cache: a request holds one state slot (no cached states beside its own), so the
# cap is K // 1 (`ratio = 1` in ModelRunner's running cap, 0.5.4; _calculate_mamba_ratio,
# 0.5.10 - 0.5.23's kv_cache_configurator.py).
MAMBA_SLOTS_PER_REQUEST_NO_RADIX = 1
# The radix cache's strategy for those states (--mamba-radix-cache-strategy). Its default "auto"
# resolves, from 0.5.14, to "extra_buffer" for the architectures that support it (with the
# default Triton linear-attention kernels) wherever the overlap scheduler is on or a page holds
# more than one token, else to "no_buffer", which turns the overlap scheduler off
# (server_args.py _handle_mamba_radix_cache, 0.5.14 and 0.5.15; arg_groups/overrides.py
# _mamba_radix_cache_resolution, 0.5.23). Before, "auto" always meant "no_buffer" (0.5.10 -
# 0.5.13, then named --mamba-scheduler-strategy). extra_buffer keeps a ping-pong pair of tracking
# slots a request beside the 3 under the overlap scheduler, one without it
# (_calculate_mamba_ratio: MAMBA_CACHE_V2_ADDITIONAL_RATIO_OVERLAP 2 / _NO_OVERLAP 1, 0.5.14;
# get_mamba_tracking_slots, 0.5.23): the running cap falls to K // 5 (K // 4).
MAMBA_EXTRA_BUFFER_SINCE = (0, 5, 14)
MAMBA_EXTRA_BUFFER_SLOTS_OVERLAP = 2
MAMBA_EXTRA_BUFFER_SLOTS_NO_OVERLAP = 1
# The architectures that support it, by the release that lists them (_support_mamba_cache_
# extra_buffer in 0.5.14 and 0.5.15; _MAMBA_EXTRA_BUFFER_ARCHS in 0.5.23, whose additions are
# dated to it: the releases between were not read).
_EXTRA_BUFFER_0_5_14 = (
    "Qwen3_5ForConditionalGeneration",
    "Qwen3_5MoeForConditionalGeneration",
    "Qwen3NextForCausalLM",
    "InternS2PreviewForConditionalGeneration",
    "MiniCPMV4_6ForConditionalGeneration",
    "BailingMoeV2_5ForCausalLM",
    "FalconH1ForCausalLM",
    "GraniteMoeHybridForCausalLM",
    "NemotronHForCausalLM",
    "NemotronHPuzzleForCausalLM",
)
_EXTRA_BUFFER_0_5_23 = (
    "KimiLinearForCausalLM",
    "Qwen3_5MoeForCausalLM",
    "Qwen3_5ForCausalLM",
    "Qwen4ExpForConditionalGeneration",
    "MiniCPMV4_7ForConditionalGeneration",
    "BailingMoeV3ForCausalLM",
    "BailingMoeV3VLForConditionalGeneration",
    "Glm5NextForConditionalGeneration",
    "NemotronH_Omni_Reasoning_V3",
)
MAMBA_EXTRA_BUFFER_ARCHS: dict[str, tuple[int, int, int]] = {
    **dict.fromkeys(_EXTRA_BUFFER_0_5_14, MAMBA_EXTRA_BUFFER_SINCE),
    **dict.fromkeys(_EXTRA_BUFFER_0_5_23, (0, 5, 23)),
}
# Data-parallel attention (server_args.py; arg_groups/parallel_hook.py from 0.5.23): the
# reserve grows by 4 GiB under the 0.4.8-0.5.2 tier table and by 3 MiB per decode batch size
# per attention-DP group in the activation formula; the chunked-prefill size and the running
# cap are divided among the groups. The input embedding is whole on every GPU
# (VocabParallelEmbedding(enable_tp=not is_dp_attention_enabled())) until the model files split
# it over the attention-TP group (use_attn_tp_group=is_dp_attention_enabled()): DeepSeek-V2 / V3
# from 0.5.8, the other MoE families (Qwen MoE, gpt-oss, Llama 4, GLM-4 MoE) from 0.5.9
# (sglang/srt/models/*.py, read in the 0.5.3 - 0.5.13 wheels).
DP_ATTENTION_TIER_RESERVE_MIB = 4 * 1024
DP_ATTENTION_SPLIT_EMBEDDING_SINCE = (0, 5, 9)
DP_ATTENTION_SPLIT_EMBEDDING_SINCE_BY_TYPE = {
    "deepseek_v2": (0, 5, 8),
    "deepseek_v3": (0, 5, 8),
    "kimi_k2": (0, 5, 8),  # DeepseekV3ForCausalLM
}
DP_ATTENTION_GRAPH_MIB_PER_BS = 3
# Under data-parallel attention two flags keep more on every GPU (server_args.py in the
# 0.4.9.post6, 0.5.3 and 0.5.13 wheels, arg_groups/ in 0.5.23): --moe-dense-tp-size 1 (1 or
# unset) replicates the dense (not routed) MLP layers in the model files that read it
# (enable_moe_dense_fully_dp / is_dense_ffn_fully_dp: deepseek_v2.py and glm4_moe.py in all
# four, bailing_moe.py from 0.5.3, mimo_v2.py from 0.5.13), and --enable-dp-lm-head splits the
# attention-TP group only (ParallelLMHead(use_attn_tp_group=enable_dp_lm_head)), each group
# scoring its own tokens. SGLang turns --enable-dp-lm-head off with one DP rank and refuses it
# with DP ranks that are not attention DP.
DENSE_TP_ARCHITECTURES = frozenset(
    {
        "DeepseekV2ForCausalLM",
        "DeepseekV3ForCausalLM",
        "DeepseekV32ForCausalLM",
        "Glm4MoeForCausalLM",
        "GlmMoeDsaForCausalLM",
        "MiMoV2FlashForCausalLM",
        "BailingMoeV2ForCausalLM",
    }
)


class SglangSettings(BaseModel):
    """SGLang flags that move the KV pool; None = the default for that version and GPU."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    version: str = version_text(NEWEST_VERSION)
    mem_fraction_static: float | None = Field(default=None, gt=0, lt=1)
    context_length: int | None = Field(default=None, gt=0)
    chunked_prefill_size: int | None = None
    cuda_graph_max_bs_decode: int | None = Field(default=None, gt=0)
    stream_interval: int = Field(
        default=1, ge=1, description="--stream-interval: a request's tokens sent N at a time"
    )
    scheduler_recv_interval: int = Field(
        default=1,
        ge=1,
        description="--scheduler-recv-interval: new requests taken in every N decode steps",
    )
    max_prefill_tokens: int = Field(
        default=DEFAULT_MAX_PREFILL_TOKENS,
        gt=0,
        description="--max-prefill-tokens: the prompt tokens at which a prefill batch stops "
        "taking requests (with chunking off, what the memory heuristic reserves activations "
        "for)",
    )
    page_size: int | None = Field(default=None, gt=0)
    kv_cache_dtype: str = "auto"
    dtype: Literal["auto", "half", "float16", "bfloat16", "float", "float32"] = "auto"
    tp_size: int = Field(default=1, ge=1)
    pp_size: int = Field(default=1, ge=1)
    attn_dp_size: int = Field(
        default=1,
        ge=1,
        description="data-parallel attention groups inside the TP group (--attn-dp-size; "
        "--dp-size with --enable-dp-attention before 0.5.23); attention TP = tp / attn_dp",
    )
    ep_size: int = Field(
        default=1,
        ge=1,
        description="expert parallelism (--ep-size): whole experts per rank, "
        "the same bytes as TP-sharded ones",
    )
    dp_size: int = Field(
        default=1,
        ge=1,
        description="whole replicas behind SGLang's DP controller (--dp-size without DP "
        "attention): each one's memory is this plan's",
    )
    max_running_requests: int | None = Field(default=None, gt=0)
    ep_num_redundant_experts: int = Field(
        default=0,
        ge=0,
        description="expert replicas beside the routed experts, spread over the EP ranks "
        "(--ep-num-redundant-experts): each rank holds (E + R) / EP experts",
    )
    moe_dense_tp_size: Literal[1] | None = Field(
        default=None,
        description="--moe-dense-tp-size: 1 replicates the dense MLP layers on every GPU under "
        "data-parallel attention (None: split over the TP group)",
    )
    enable_dp_lm_head: bool = Field(
        default=False,
        description="--enable-dp-lm-head: the lm_head over each attention-TP group, not the "
        "whole TP group (data-parallel attention only)",
    )
    disable_overlap_schedule: bool = Field(
        default=False,
        description="--disable-overlap-schedule: the scheduler's CPU work runs between GPU "
        "steps (not priced); the pool is the same",
    )
    mamba_radix_cache_strategy: Literal["auto", "no_buffer", "extra_buffer"] | None = Field(
        default=None,
        description="--mamba-radix-cache-strategy (0.5.14+; hybrid models with the radix "
        "cache): how it keeps their states (None or auto: the release's resolution, "
        "mamba_radix_cache_strategy)",
    )
    disable_cuda_graph: bool = Field(
        default=False,
        description="--disable-cuda-graph: every step launched from the host (its time not "
        "priced); the reserve stops counting the graphs from 0.5.14 / 0.5.15",
    )
    disable_radix_cache: bool = Field(
        default=False,
        description="--disable-radix-cache: no prompt prefix is served from the KV cache "
        "(the pool is the same)",
    )
    enable_two_batch_overlap: bool = Field(
        default=False,
        description="split each batch in two so one half's MoE all-to-all runs under the "
        "other's compute (--enable-two-batch-overlap; needs an all-to-all backend)",
    )
    moe_a2a_backend: Literal["none", "deepep", "mori"] | None = Field(
        default=None,
        description="the MoE all-to-all (--moe-a2a-backend; None: DeepEP where the MoE layers "
        "span more than one 8-GPU board on NVIDIA, else none; mori: AMD's MoRI)",
    )
    disaggregation_mode: Literal["prefill", "decode"] | None = Field(
        default=None,
        description="this instance's role in a disaggregated deployment (its reserve follows it)",
    )
    mamba_full_memory_ratio: float = Field(
        default=MAMBA_FULL_MEMORY_RATIO, gt=0, le=MAX_MAMBA_FULL_MEMORY_RATIO, allow_inf_nan=False
    )
    max_mamba_cache_size: int | None = Field(default=None, gt=0)
    reserved_bytes: int = Field(
        default=0, ge=0, description="memory other processes hold on each GPU (--reserved-gib)"
    )
    calibration: Calibration | None = Field(
        default=None, description="per-deployment corrections measured from start-up logs"
    )


class MeasuredTerms(BaseModel):
    """Terms read from an SGLang start-up log; each replaces the modelled one."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    total_memory_bytes: int | None = None
    total_memory_source: TermSource = "log"
    pre_load_free_bytes: int | None = None
    weights_bytes: int | None = None


def prefill_capture_sizes(top: int) -> int:
    """Length of the default prefill capture list up to `top` tokens (sglang.md 1.3)."""
    sizes = [
        *range(4, 33, 4),
        *range(48, 257, 16),
        *range(288, 513, 32),
        *range(576, 1025, 64),
        *range(1280, 4097, 256),
        *range(4608, top + 1, 512),
    ]
    return len([s for s in sizes if s <= top])


def default_chunk_and_bs(
    version: tuple[int, int, int], gpu_mem_mib: int, tp: int
) -> tuple[int, int]:
    """(chunked_prefill_size, decode cuda_graph_max_bs) SGLang picks for this card and version."""
    if version < ACTIVATION_HEURISTIC_SINCE:
        if version < TIER_RESERVE_SINCE:
            chunk = 2048 if gpu_mem_mib < 25_000 else 8192
        else:
            chunk = 2048 if gpu_mem_mib < 35 * 1024 else 8192 if gpu_mem_mib < 160 * 1024 else 16384
        small_card_bs = 8 if tp < 4 else 80  # under 25,000 MiB (0.4.x)
        return chunk, small_card_bs if gpu_mem_mib < 25_000 else 160
    tiers = GPU_TIERS_MIB if version >= TIERS_0_5_20_SINCE else GPU_TIERS_MIB_0_5_3
    chunked, bs_small, bs_large = next((c, a, b) for top, c, a, b in tiers if gpu_mem_mib < top)
    return chunked, (bs_small if tp < 4 else bs_large)


class ReserveCase(BaseModel):
    """What SGLang's mem_fraction_static heuristic reads of a deployment."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    version: tuple[int, int, int] = NEWEST_VERSION
    gpu_mem_mib: int
    tp: int = 1
    pp: int = 1
    chunked: int
    decode_bs: int
    mla: bool = False
    attn_dp: int = 1
    cuda: bool = True
    multimodal: bool = False
    role: Literal["prefill", "decode"] | None = None
    max_running_requests: int | None = None
    context: int | None = None
    deepep: bool = False  # the MoE layers' all-to-all is DeepEP's (--moe-a2a-backend deepep)
    llama2: bool = False  # the model path names Llama 2 (its prefill graphs stop at 4,096)
    max_prefill_tokens: int = DEFAULT_MAX_PREFILL_TOKENS  # the activation tokens, chunking off
    graphs: bool = True  # False: --disable-cuda-graph


def prefill_graphs_run(c: ReserveCase) -> bool:
    """Whether this release captures prefill CUDA graphs for the deployment (see above), as its
    reserve counts them."""
    if c.version < PIECEWISE_GRAPH_RESERVE_SINCE or not c.cuda or c.multimodal:
        return False
    if not c.graphs and c.version >= NO_GRAPH_PREFILL_RESERVE_SINCE:
        return False
    if c.version < BREAKABLE_GRAPH_SINCE:
        return c.attn_dp == 1 and c.pp == 1 and c.role is None
    if c.role == "decode":
        return False
    if c.attn_dp > 1 and c.version < BREAKABLE_DP_ATTENTION_SINCE:
        return False
    return not (c.mla and c.version < BREAKABLE_MLA_SINCE)


def prefill_graph_top(c: ReserveCase) -> int:
    """The largest prompt step, tokens, SGLang captures a prefill graph for where it captures
    them: the chunk (MLA: MLA_PREFILL_GRAPH_TOKENS), capped at the context before 0.5.15 and at
    4,096 on a Llama 2 path."""
    top = MLA_PREFILL_GRAPH_TOKENS if c.mla else c.chunked
    if c.context is not None and c.version < BREAKABLE_GRAPH_SINCE:
        top = min(top, c.context)
    if c.llama2:
        top = min(top, LLAMA2_PREFILL_GRAPH_TOKENS)
    return top


def prefill_graph_tokens(c: ReserveCase, all_to_all: str | None, trtllm_mla: bool = False) -> int:
    """The largest prompt step SGLang replays a prefill graph for, tokens (0: it launches every
    prompt step eagerly): where its reserve counts the graphs, unless the MoE layers' all-to-all
    backend (`all_to_all`) turns them off at start-up (any before 0.5.17, all but DeepEP's
    after; the sources are beside MLA_PREFILL_GRAPH_TOKENS) or DeepSeek-V3 prefills on
    TensorRT-LLM's MLA kernels (`trtllm_mla`: TRTLLM_MLA_NO_PREFILL_GRAPH_SINCE)."""
    if not prefill_graphs_run(c):
        return 0
    if trtllm_mla and c.version >= TRTLLM_MLA_NO_PREFILL_GRAPH_SINCE:
        return 0
    deepep_kept = all_to_all == "deepep" and c.version >= DEEPEP_PREFILL_GRAPH_RESERVE_SINCE
    if all_to_all is not None and not deepep_kept:
        return 0
    return prefill_graph_top(c)


def decode_graphs_reserved(c: ReserveCase) -> bool:
    """Whether the reserve counts decode CUDA graphs: unless --disable-cuda-graph turns them off
    in a release whose reserve reads it (NO_GRAPH_DECODE_RESERVE_SINCE)."""
    return c.graphs or c.version < NO_GRAPH_DECODE_RESERVE_SINCE


def graph_reserve_mib(c: ReserveCase) -> float:
    """The CUDA-graph part of the reserve: decode graphs (and DP attention's padding) unless
    this is a prefill instance, prefill graphs where they run."""
    graph = 0.0
    if not (c.role == "prefill" and c.version >= PD_ROLE_RESERVE_SINCE):
        if decode_graphs_reserved(c):
            graph += 2 * c.decode_bs
        if c.attn_dp > 1:
            graph += DP_ATTENTION_GRAPH_MIB_PER_BS * c.decode_bs * c.attn_dp
            if c.decode_bs > DP_ATTENTION_LARGE_BATCH:
                graph += DP_ATTENTION_LARGE_BATCH_MIB_PER_BS * c.decode_bs * c.attn_dp
    if prefill_graphs_run(c):
        if c.mla:
            graph += MLA_PREFILL_GRAPH_RESERVE_MIB
        else:
            graph += PREFILL_GRAPH_MIB_PER_SIZE * prefill_capture_sizes(prefill_graph_top(c))
        if c.deepep and c.version >= DEEPEP_PREFILL_GRAPH_RESERVE_SINCE:
            graph += DEEPEP_PREFILL_GRAPH_RESERVE_MIB
    return graph


def default_mem_fraction(c: ReserveCase) -> float:
    """mem_fraction_static SGLang derives when unset, by release (sglang.md section 2)."""
    gpu_mem_mib, tp, pp = c.gpu_mem_mib, c.tp, c.pp
    if c.version < TIER_RESERVE_SINCE:
        if gpu_mem_mib > TP_TABLE_MAX_MIB:
            return (gpu_mem_mib - LARGE_CARD_RESERVE_MIB) / gpu_mem_mib
        return next(f for size, f in TP_TABLE_FRACTIONS if tp >= size)
    if c.version < ACTIVATION_HEURISTIC_SINCE:
        base, per_rank = next((b, r) for top, b, r in TIER_RESERVES_MIB if gpu_mem_mib < top)
        if c.attn_dp > 1:
            base += DP_ATTENTION_TIER_RESERVE_MIB
        return round((gpu_mem_mib - (base + per_rank * tp * pp)) / gpu_mem_mib, 3)
    # chunking off (--chunked-prefill-size -1 or 0): a prefill batch of max_prefill_tokens
    activation = max(c.chunked if c.chunked > 0 else c.max_prefill_tokens, 2048)
    if c.role == "decode" and c.version >= PD_ROLE_RESERVE_SINCE:
        activation = max(c.max_running_requests or c.decode_bs or 1, 2048)
    reserved = RESERVED_BASE_MIB + 1.5 * activation + tp * pp / 8 * 1024 + graph_reserve_mib(c)
    if gpu_mem_mib > 61_440:
        reserved = max(reserved, RESERVED_FLOOR_MIB)
    if (
        c.deepep
        and c.role != "prefill"
        and c.version >= DEEPEP_DECODE_RESERVE_SINCE
        and decode_graphs_reserved(c)
    ):
        reserved += DEEPEP_DECODE_RESERVE_MIB
    return round((gpu_mem_mib - reserved) / gpu_mem_mib, 3)


def vlm_fraction_factor(model: ModelSpec) -> float:
    """adjust_mem_fraction_for_vlm: how much a vision tower lowers the default fraction."""
    layers = model.vision_num_hidden_layers or VLM_BASELINE_LAYERS
    hidden = model.vision_hidden_size or VLM_BASELINE_HIDDEN
    ratio = layers * hidden**2 / (VLM_BASELINE_LAYERS * VLM_BASELINE_HIDDEN**2)
    low, high = VLM_FACTOR_RANGE
    return VLM_FRACTION_BASE * max(low, min(high, 1.0 - VLM_SENSITIVITY * (ratio - 1.0)))


def mamba_state_bytes_per_request(model: ModelSpec, tp: int, pp: int) -> int:
    """Conv + SSM (or linear-attention) state of one request across this rank's layers."""
    return sum(ceil_div(g.num_layers, pp) * layer_state_bytes(g, tp) for g in model.kv_groups)


@dataclass(frozen=True)
class _Layout:
    """What SGLang's flags and heuristics resolve to before the pool is sized: the chunk and
    graph batch, the attention-DP groups it runs, its static memory fraction, context, page
    and the KV dtype."""

    chunk: int
    decode_bs: int
    mla: bool
    attn_dp: int
    attn_tp: int
    fraction: float
    context: int
    page: int
    kv_dtype: str
    act_bytes: int
    prefill_graph_tokens: int  # the largest prompt step it replays a graph for (0: none)
    resolved: tuple[str, ...] = ()  # where it runs other than the flags name (notes, too)


@dataclass(frozen=True)
class _Experts:
    """How the MoE layers are spread: DeepEP's all-to-all, AMD's MoRI or neither, the
    expert-parallel ranks and the redundant experts placed on them."""

    deepep: bool
    ep: int
    redundant: int
    mori: bool = False

    @property
    def all_to_all(self) -> str | None:
        """The all-to-all backend the MoE layers exchange their tokens with (None: none)."""
        return "deepep" if self.deepep else "mori" if self.mori else None


def _check_chunk_pages(
    s: SglangSettings, version: tuple[int, int, int], lay: _Layout, chunk_per_group: int
) -> None:
    """Refuse a chunked-prefill size the page size does not divide, as SGLang asserts
    (CHUNK_PAGE_PER_GROUP_SINCE), naming the flag the user gave."""
    if lay.page == 1 or version < PAGE_SIZE_SINCE:
        return
    checked = chunk_per_group if version >= CHUNK_PAGE_PER_GROUP_SINCE else lay.chunk
    if checked <= 0 and version >= CHUNK_PAGE_OFF_EXEMPT_SINCE:
        return
    if s.disaggregation_mode == "decode" and version >= CHUNK_PAGE_DECODE_EXEMPT_SINCE:
        return
    if checked % lay.page == 0:
        return
    share = " (each attention-DP group's share)" if checked != lay.chunk else ""
    raise InputError(
        "--page-size" if s.page_size is not None else "--chunked-prefill-size",
        f"SGLang {version_text(version)} asserts the chunked-prefill size{share}, "
        f"{checked:,}, divides by the page size, {lay.page}",
    )


def _deepep_mode(
    s: SglangSettings, version: tuple[int, int, int], experts: _Experts, attn_dp: int
) -> str | None:
    """The --deepep-mode a line names (None: the default auto): where the release refuses
    auto beside DP attention, a PD instance's one mode (DEEPEP_MODE_OF_ROLE); an aggregated
    server there is refused, naming the flag that asked for the exchange."""
    if not experts.deepep or attn_dp == 1 or version >= DEEPEP_AUTO_WITH_DP_ATTENTION_SINCE:
        return None
    if s.disaggregation_mode is not None:
        return DEEPEP_MODE_OF_ROLE[s.disaggregation_mode]
    raise InputError(
        "--moe-a2a-backend" if s.moe_a2a_backend == "deepep" else "--dp-attention",
        f"SGLang {version_text(version)} refuses DeepEP's auto mode beside DP attention (it "
        f"asserts against it before {version_text(DEEPEP_AUTO_WITH_DP_ATTENTION_SINCE)}), and "
        "a server that prefills and decodes runs both of its modes; a PD instance names its "
        "one (--disagg)",
    )


def _check_replicas_on_one_host(
    s: SglangSettings, gpu: GpuSpec, version: tuple[int, int, int]
) -> None:
    """Refuse DP replicas in one server whose GPUs span hosts (DP_REPLICAS_ONE_HOST_SINCE):
    separate servers behind a router serve them."""
    gpus = s.tp_size * s.pp_size * s.dp_size
    if s.dp_size == 1 or version < DP_REPLICAS_ONE_HOST_SINCE or hosts_spanned(gpus, gpu) == 1:
        return
    raise InputError(
        "--dp",
        f"SGLang {version_text(version)} keeps a server's {s.dp_size} data-parallel replicas "
        f"on one host ({gpus} GPUs asked, {host_gpus(gpu)} a host): it refuses them across "
        "nodes; run one server per replica behind a router, or DP attention",
    )


def _check_pipelined(model: ModelSpec, pp: int, version: tuple[int, int, int]) -> None:
    """Refuse pipeline stages for an architecture whose model class this release cannot
    pipeline (PP_ARCHITECTURES_SINCE)."""
    architecture = model.architecture or ""
    if pp == 1 or architecture not in PP_ARCHITECTURES_SINCE:
        return
    since = PP_ARCHITECTURES_SINCE[architecture]
    if since is not None and version >= since:
        return
    why = (
        f"its model class takes pipeline stages from {version_text(since)}"
        if since
        else f"no release through {version_text(NEWEST_VERSION)} pipelines its model class"
    )
    raise InputError(
        "--pp",
        f"SGLang {version_text(version)} cannot pipeline {architecture} ({why}); it refuses "
        "--pp-size above 1",
    )


def _check_flags_taken(s: SglangSettings, version: tuple[int, int, int]) -> None:
    """Refuse a setting that needs a flag the release does not have yet, naming it."""
    asked = (
        ("--pp", "pipeline parallelism (--pp-size)", s.pp_size > 1, PP_SINCE),
        ("--ep", "expert parallelism (--ep-size)", s.ep_size > 1, EP_SIZE_SINCE),
        ("--dp-attention", "--enable-dp-attention", s.attn_dp_size > 1, DP_ATTENTION_SINCE),
        ("--page-size", "--page-size", s.page_size not in (None, 1), PAGE_SIZE_SINCE),
        (
            "--cuda-graph-max-bs",
            "--cuda-graph-max-bs",
            s.cuda_graph_max_bs_decode is not None,
            CUDA_GRAPH_MAX_BS_SINCE,
        ),
        ("--moe-a2a-backend", "DeepEP", s.moe_a2a_backend == "deepep", DEEPEP_SINCE),
        (
            "--moe-dense-tp-size",
            "--moe-dense-tp-size",
            s.moe_dense_tp_size is not None,
            MOE_DENSE_TP_SIZE_SINCE,
        ),
        (
            "--enable-two-batch-overlap",
            "--enable-two-batch-overlap",
            s.enable_two_batch_overlap,
            TWO_BATCH_OVERLAP_SINCE,
        ),
        (
            "--ep-num-redundant-experts",
            "--ep-num-redundant-experts",
            s.ep_num_redundant_experts > 0,
            REDUNDANT_EXPERTS_SINCE,
        ),
        ("--enable-dp-lm-head", "--enable-dp-lm-head", s.enable_dp_lm_head, DP_LM_HEAD_SINCE),
        (
            "--scheduler-recv-interval",
            "--scheduler-recv-interval",
            s.scheduler_recv_interval > 1,
            SCHEDULER_RECV_INTERVAL_SINCE,
        ),
    )
    for flag, what, given, since in asked:
        if given and version < since:
            raise InputError(
                flag,
                f"SGLang takes {what} from {version_text(since)}; {version_text(version)} has "
                "no such flag",
            )


def check_mxfp4_platform(model: ModelSpec, gpu: GpuSpec) -> None:
    """Refuse OpenAI's MXFP4 checkpoint (quant_method mxfp4, gpt-oss) on an AMD GPU without MX
    formats, as SGLang's ROCm build does: Mxfp4Config.from_config raises "Current platform ...
    not support mxfp4 computation" on any AMD GPU but gfx95x (srt/layers/quantization/mxfp4.py:
    mxfp_supported() in 0.5.4 and 0.5.6, is_gfx95_supported() in 0.5.23). The AMD cards with MX
    formats are those with an fp4 rate on record (MI350X, MI355X)."""
    openai = model.weight_dtype == OPENAI_MXFP4
    if openai and gpu.vendor == "amd" and not gpu.fp4_dense_flops:
        raise InputError(
            "--gpu",
            f"{gpu.id}: SGLang loads {model.name}'s MXFP4 checkpoint (quant_method mxfp4) on "
            "AMD's gfx950 cards alone (MI350X, MI355X) and refuses this one ('not support "
            "mxfp4 computation'); vLLM serves it here",
        )


# SGLang's NVFP4 MoE method (ModelOptNvFp4FusedMoEMethod, srt/layers/quantization/
# modelopt_quant.py) raises "Current platform does not support NVFP4 quantization" off
# Blackwell: through 0.5.4 it takes compute capability 10.x alone (is_sm100_supported; read in
# 0.5.3 and 0.5.4), from 0.5.5 10.x and 12.x (is_blackwell_supported; 0.5.5-0.5.12), and from
# 0.5.13 its auto MoE backend falls back to Marlin (FP4 weights, 16-bit activations) on
# compute capability 8.0-9.x; never on AMD (not CUDA; read in 0.5.13-0.5.23).
NVFP4_MOE_SM12X_SINCE = (0, 5, 5)
NVFP4_MOE_MARLIN_SINCE = (0, 5, 13)
# The compute capabilities the Marlin fallback takes: 8.0 up to, not including, 10.0.
NVFP4_MOE_MARLIN_CAPABILITIES = ((8, 0), (10, 0))


def check_nvfp4_experts(model: ModelSpec, gpu: GpuSpec, version: tuple[int, int, int]) -> None:
    """Refuse NVFP4 experts where SGLang's NVFP4 MoE method does (the caller knows the weights
    are NVFP4: a ModelOpt NVFP4 checkpoint's, or a variant named with --weight-dtype nvfp4)."""
    if not model.num_experts:
        return
    sm12x = version >= NVFP4_MOE_SM12X_SINCE
    marlin = version >= NVFP4_MOE_MARLIN_SINCE
    low, high = NVFP4_MOE_MARLIN_CAPABILITIES
    cap = capability(gpu)
    if gpu.vendor == "nvidia" and (
        cap[0] == BLACKWELL_MAJOR
        or (sm12x and cap[0] == CONSUMER_BLACKWELL_MAJOR)
        or (marlin and low <= cap < high)
    ):
        return
    takes = "compute capability 10.x" + (" and 12.x" if sm12x else "")
    if marlin:
        takes += ", and 8.0-9.x through its Marlin fallback"
    hint = "; AMD's FP4 exports are MXFP4 (--weight-dtype mxfp4)" if gpu.vendor == "amd" else ""
    raise InputError(
        "--gpu",
        f"{gpu.id}: SGLang {version_text(version)} runs NVFP4 experts on {takes}, and "
        f"refuses this card ('Current platform does not support NVFP4 quantization'){hint}",
    )


class _TokenPool(NamedTuple):
    """The KV token pool the memory left buys, and the hybrid models' state slots beside it."""

    tokens: int
    cell_bytes: int
    windowed: tuple[int, int] | None
    strategy: str | None
    mamba_slots: int
    mamba_bytes: int
    mamba_cap: int | None


def _token_pool(
    model: ModelSpec,
    gpu: GpuSpec,
    s: SglangSettings,
    version: tuple[int, int, int],
    lay: _Layout,
    available: int,
    notes: list[str],
) -> _TokenPool:
    """The pool SGLang sizes from `available` bytes: the hybrid models' state slots first (and
    the requests they let run), then the tokens a page-aligned cell of every layer's KV buys."""
    mamba_slots, mamba_bytes = _mamba_pool(model, s, available, lay.fraction, notes)
    available -= mamba_bytes
    kv_bytes = dtype_bytes(lay.kv_dtype)
    swa = hybrid_swa(model, gpu, version)
    scaled = (
        is_dsa(model)
        and kv_bytes == 1
        and version >= DSA_SCALED_LAYOUT_SINCE
        and gpu.vendor == "nvidia"
        and capability(gpu)[0] < BLACKWELL_MAJOR
    )
    cell = _token_cell_bytes(model, s.pp_size, lay.attn_tp, kv_bytes, swa, scaled)
    if cell == 0:  # no attention layer keeps KV: SGLang sizes the (empty) pool at the context
        tokens = lay.context
        notes.append("no attention KV: the token pool is nominal (context length)")
    else:
        tokens = available // cell
    tokens -= tokens % lay.page
    windowed = window_pool(model, gpu, version, tokens, lay.page)
    strategy = mamba_radix_cache_strategy(model, s, version, lay.page)
    mamba_cap = None
    if mamba_slots:
        per_request = mamba_slots_per_request(
            s.disable_radix_cache, strategy, not s.disable_overlap_schedule
        )
        mamba_cap = mamba_slots // per_request
        if strategy == "extra_buffer":
            notes.append(
                "the radix cache keeps hybrid states with SGLang's extra_buffer strategy "
                f"(--mamba-radix-cache-strategy auto, {version_text(MAMBA_EXTRA_BUFFER_SINCE)}+): "
                f"{per_request} state slots a running request, so at most {mamba_cap:,} run"
            )
    return _TokenPool(tokens, cell, windowed, strategy, mamba_slots, mamba_bytes, mamba_cap)


def _check_exchange(
    s: SglangSettings,
    version: tuple[int, int, int],
    experts: _Experts,
    attn_dp: int,
    chunk_per_group: int,
    notes: list[str],
) -> None:
    """Refuse what SGLang refuses of the MoE exchange the plan runs (two-batch overlap with
    none, MoRI past its dispatch limits), and note the exchange planned."""
    if s.enable_two_batch_overlap and experts.all_to_all is None:
        raise InputError(
            "--enable-two-batch-overlap",
            "overlaps the MoE all-to-all, and this plan has none (SGLang refuses it with "
            "--moe-a2a-backend none): it is planned past one 8-GPU board on NVIDIA (DeepEP), or "
            "with --moe-a2a-backend mori on AMD",
        )
    if experts.deepep and s.moe_a2a_backend is None:
        notes.append(
            f"the MoE layers span {s.tp_size} GPUs, past one 8-GPU board: "
            "planned with DeepEP's all-to-all (--moe-a2a-backend deepep); its communication "
            "buffers are not in this ledger"
        )
    if experts.mori:
        check_mori(version, chunk_per_group, chunk_divisor(attn_dp, version), s)
        notes.append(
            f"the MoE layers exchange their tokens with AMD's MoRI over {s.tp_size} GPUs "
            "(--moe-a2a-backend mori, its normal kernels); its symmetric heap "
            "(MORI_SHMEM_HEAP_SIZE) is allocated at its first exchange, after the KV pool is "
            "sized: it comes out of the memory SGLang leaves free, not out of the pool"
        )


def predict(
    model: ModelSpec,
    gpu: GpuSpec,
    settings: SglangSettings,
    measured: MeasuredTerms | None = None,
    weights_bytes: int | None = None,
    weights_exact: bool | None = None,
) -> EnginePrediction:
    """What SGLang will log at start-up for this model, GPU and flags: the settings its
    heuristics resolve, the memory it sizes the pool from, and the token pool that buys."""
    s = settings
    version = parse_version(s.version)
    m = measured or MeasuredTerms()
    sources: dict[str, TermSource] = {}
    defaults: list[str] = []
    tp, pp = s.tp_size, s.pp_size
    check_stages(model, pp)
    _check_flags_taken(s, version)
    _check_pipelined(model, pp, version)
    _check_replicas_on_one_host(s, gpu, version)
    check_mxfp4_platform(model, gpu)
    cal = s.calibration
    total, sources["total_memory_bytes"] = total_term(
        gpu, m.total_memory_bytes, m.total_memory_source
    )
    if m.total_memory_bytes is None:
        total = correct(cal, "total_memory_bytes", total, sources)
    notes: list[str] = outside_table("SGLang", version, OLDEST_VERSION, NEWEST_VERSION)
    experts = _experts(model, gpu, s)
    lay = _layout(model, gpu, s, version, total, sources, defaults, notes, experts)
    deepep_mode = _deepep_mode(s, version, experts, lay.attn_dp)
    pre_free = _pre_load_free_bytes(s, total, m, sources, notes)
    w = _weights(model, s, version, lay, weights_bytes, weights_exact, m, sources, notes)
    w += _redundant_bytes(model, experts, pp, weights_bytes, sources, notes)
    available = int(pre_free * lay.fraction) - w
    sources["available_kv_bytes"] = "derived"
    if cal is not None:
        notes += cal_notes(cal, "sglang", version_text(version), gpu.id, model.name, tp, pp)
    if model.has_vision and version >= VLM_CACHE_RESERVE_SINCE:
        available -= VLM_CACHE_RESERVE_BYTES
        notes.append("100 MiB of the KV budget reserved for the multimodal embedding cache")
    _check_room(lay, available)
    pool = _token_pool(model, gpu, s, version, lay, available, notes)
    tokens, cell = pool.tokens, pool.cell_bytes
    available -= pool.mamba_bytes
    running = _max_running_requests(s, version, tokens, lay.context, pool.mamba_cap, lay.attn_dp)
    chunk_per_group = group_chunk(lay.chunk, lay.attn_dp, version)
    _check_chunk_pages(s, version, lay, chunk_per_group)
    _check_exchange(s, version, experts, lay.attn_dp, chunk_per_group, notes)
    lines = _log_lines(
        version,
        tokens=tokens,
        size_gib=(tokens + lay.page) * cell / 2 / GIB_BYTES,
        mla=lay.mla,
        kv_dtype=s.kv_cache_dtype if s.kv_cache_dtype.startswith("fp8") else lay.kv_dtype,
        chunk=chunk_per_group,
        running=running,
        context=lay.context,
        max_prefill=s.max_prefill_tokens,
    )
    return EnginePrediction(
        name="sglang",
        version=version_text(version),
        total_memory_bytes=total,
        requested_memory_bytes=int(pre_free * lay.fraction),
        weights_bytes=w,
        rope_cache_bytes=rope_cache_bytes(model, lay.act_bytes),
        activation_peak_bytes=0,
        non_torch_bytes=total - pre_free,
        cudagraph_bytes=0,
        available_kv_bytes=available,
        kv_dtype=lay.kv_dtype,
        resolved_notes=list(lay.resolved),
        bytes_per_block=cell * lay.page,
        num_gpu_blocks=tokens // lay.page,
        usable_blocks=tokens // lay.page,
        kv_cache_tokens=tokens,
        max_concurrency=tokens / lay.context,
        blocks_per_request=ceil_div(lay.context, lay.page),
        num_kv_groups=len(model.kv_groups),
        settings=_resolved(model, s, lay, experts, pool, running, chunk_per_group, deepep_mode),
        defaults_used=defaults,
        term_sources=sources
        | {
            "activation_peak_bytes": "exact",
            "cudagraph_bytes": "exact",
            "non_torch_bytes": sources["pre_load_free_bytes"],
        },
        log_lines=lines,
        notes=notes,
    )


def _check_room(lay: _Layout, available: int) -> None:
    """Refuse a layout that leaves SGLang no memory share (only its own default goes that low:
    the flag must be > 0) or no KV cache beside the weights."""
    if lay.fraction <= 0:
        raise NoKvCache(
            "--mem-fraction-static",
            f"SGLang's default here is {lay.fraction}: its reserve for activations and the "
            f"decode CUDA graphs of {lay.attn_dp} attention-DP group(s) at batch "
            f"{lay.decode_bs} exceeds the card, so it would not start; pass "
            "--mem-fraction-static, or a smaller --cuda-graph-max-bs",
        )
    if available <= 0:
        raise NoKvCache(
            "--mem-fraction-static",
            f"loaded weights leave no KV cache under --mem-fraction-static={lay.fraction}",
        )


def _resolved(
    model: ModelSpec,
    s: SglangSettings,
    lay: _Layout,
    experts: _Experts,
    pool: _TokenPool,
    running: int,
    chunk_per_group: int,
    deepep_mode: str | None,
) -> dict[str, object]:
    """The settings SGLang resolves and runs (the prediction's `settings`)."""
    return {
        "mem_fraction_static": lay.fraction,
        "context_length": lay.context,
        "chunked_prefill_size": lay.chunk,
        "chunked_prefill_per_group": chunk_per_group,
        "cuda_graph_max_bs_decode": lay.decode_bs,
        "prefill_graph_max_tokens": lay.prefill_graph_tokens,
        "page_size": lay.page,
        "kv_cache_dtype": s.kv_cache_dtype,
        "tp_size": s.tp_size,
        "pp_size": s.pp_size,
        "attn_dp_size": lay.attn_dp,
        "ep_size": s.ep_size,
        "dp_size": s.dp_size,
        "max_running_requests": running,
        "swa_max_total_num_tokens": pool.windowed[0] if pool.windowed else None,
        "sliding_window_size": pool.windowed[1] if pool.windowed else None,
        "max_mamba_cache_size": pool.mamba_slots or None,
        "mamba_radix_cache_strategy": pool.strategy,
        "moe_a2a_backend": experts.all_to_all,
        "deepep_mode": deepep_mode,
        "moe_dense_tp_size": s.moe_dense_tp_size,
        "dense_mlp_replicated": dense_mlp_replicated(model, s, lay.attn_dp) or None,
        "enable_dp_lm_head": (s.enable_dp_lm_head and lay.attn_dp > 1) or None,
        "ep_num_redundant_experts": experts.redundant or None,
        "enable_two_batch_overlap": s.enable_two_batch_overlap or None,
        "disable_radix_cache": s.disable_radix_cache or None,
        "disable_cuda_graph": s.disable_cuda_graph or None,
        # SGLang turns its overlap scheduler off itself under no_buffer (the comment above)
        "disable_overlap_schedule": s.disable_overlap_schedule
        or pool.strategy == "no_buffer"
        or None,
        "stream_interval": s.stream_interval,
        "scheduler_recv_interval": s.scheduler_recv_interval,
        "max_prefill_tokens": s.max_prefill_tokens,
    }


def _default_fraction(
    model: ModelSpec, case: ReserveCase, sources: dict[str, TermSource], defaults: list[str]
) -> float:
    """--mem-fraction-static as SGLang derives it when unset (its reserve heuristic, lowered
    for a vision tower from VLM_ADJUST_SINCE), said among the defaults."""
    fraction = default_mem_fraction(case)
    if model.has_vision and case.version >= VLM_ADJUST_SINCE:
        fraction *= vlm_fraction_factor(model)
    defaults.append(
        f"mem_fraction_static={fraction:.4f} (SGLang heuristic for {case.gpu_mem_mib} MiB"
        + (", lowered for the vision tower)" if model.has_vision else ")")
    )
    sources["mem_fraction_static"] = "derived"
    return fraction


def _kv_dtype_run(
    model: ModelSpec, gpu: GpuSpec, s: SglangSettings, version: tuple[int, int, int]
) -> tuple[str, str | None]:
    """The KV dtype SGLang stores for --kv-cache-dtype, and why where it is not what the flag
    names: fp8 for DeepSeek's sparse attention on Blackwell, or a checkpoint that declares it."""
    if s.kv_cache_dtype == "fp8_ds_mla":
        raise InputError("--kv-cache-dtype", "fp8_ds_mla is vLLM's spelling; SGLang's: fp8_e4m3")
    try:
        kv_dtype = kv_cache_dtype(s.kv_cache_dtype, model, s.dtype)
    except ValueError as exc:
        raise InputError("--kv-cache-dtype", str(exc)) from exc
    if kv_dtype != "fp8" and dsa_fp8_kv(model, gpu, version, s.kv_cache_dtype):
        return "fp8", (
            f"KV cache fp8_e4m3: SGLang {version_text(version)} sets it for DeepSeek's sparse "
            f"attention on compute capability {BLACKWELL_MAJOR}+"
            + (" whatever --kv-cache-dtype says" if version < DSA_FP8_KV_AUTO_ONLY_SINCE else "")
        )
    if kv_dtype != "fp8" and checkpoint_fp8_kv(model, version, s.kv_cache_dtype):
        return "fp8", (
            f"KV cache fp8_e4m3: the checkpoint's {model.fp8_kv_declared_by} config declares an "
            f"FP8 KV cache, which SGLang {version_text(version)} runs for `auto` "
            "(--kv-cache-dtype bf16, from 0.5.4, keeps 16 bits)"
        )
    return kv_dtype, None


def _layout(
    model: ModelSpec,
    gpu: GpuSpec,
    s: SglangSettings,
    version: tuple[int, int, int],
    total: int,
    sources: dict[str, TermSource],
    defaults: list[str],
    notes: list[str],
    experts: _Experts,
) -> _Layout:
    """Resolve the server arguments SGLang's heuristics set for this card and layout: the
    chunk and decode graph batch, the attention-DP groups (the flag's, or those it forces for
    DeepSeek's sparse attention), --mem-fraction-static (DeepEP's buffers reserved too where
    the MoE layers exchange through it), the prefill graphs it replays, the context, the page
    and the KV dtype it stores (fp8 where it forces that)."""
    tp, pp = s.tp_size, s.pp_size
    gpu_mem_mib = (gpu.memory_bytes_nvml or total) // MIB_BYTES
    chunked, default_bs = default_chunk_and_bs(version, gpu_mem_mib, tp)
    chunk = s.chunked_prefill_size if s.chunked_prefill_size is not None else chunked
    decode_bs = s.cuda_graph_max_bs_decode or default_bs
    if (
        s.cuda_graph_max_bs_decode is None
        and s.max_running_requests is not None
        and version >= GRAPH_BS_RUNNING_CAP_SINCE
    ):
        decode_bs = min(decode_bs, s.max_running_requests)
    mla = is_mla(model)
    if tp % s.attn_dp_size:
        raise InputError(
            "--dp",
            f"{s.attn_dp_size} attention-DP groups must divide the TP size {tp} (SGLang refuses)",
        )
    # the groups the server runs: the ones it sets by itself (whatever the flags), else the flag's
    forced = forced_attention_dp(model, version, tp)
    attn_dp = forced if forced > 1 else s.attn_dp_size
    case = ReserveCase(
        version=version,
        gpu_mem_mib=gpu_mem_mib,
        tp=tp,
        pp=pp,
        chunked=max(chunk, 0),
        decode_bs=decode_bs,
        mla=mla,
        attn_dp=s.attn_dp_size,  # the heuristic runs before a forced DP attention
        cuda=gpu.vendor == "nvidia",
        multimodal=model.has_vision,
        role=s.disaggregation_mode,
        max_running_requests=s.max_running_requests,
        context=s.context_length or model.max_context_tokens,
        deepep=experts.deepep,
        llama2=LLAMA2_PATH_MARK in model.name.lower(),
        max_prefill_tokens=s.max_prefill_tokens,
        graphs=not s.disable_cuda_graph,
    )
    fraction = s.mem_fraction_static
    if fraction is None:
        fraction = _default_fraction(model, case, sources, defaults)
    context = s.context_length or model.max_context_tokens
    if s.context_length is None:
        defaults.append(f"context_length={context} (the model's maximum)")
    page, page_backend = run_page_size(model, gpu, version, s.page_size)
    if page_backend is not None:
        notes.append(f"page_size {page}: set by the {page_backend} attention backend")
    if s.page_size is None and page > 1:
        runtime = ""
        if gpu.vendor == "amd" and version >= DSA_ROCM_PRESHUFFLE_SINCE:
            runtime = "; 1 where the image lacks aiter's preshuffle paged-MQA path, Triton < 3.5"
        defaults.append(f"page_size={page} (the attention backend's on this GPU{runtime})")
    run_dtype = compute_dtype(model, s.dtype)
    kv_dtype, kv_note = _kv_dtype_run(model, gpu, s, version)
    resolved = [] if kv_note is None else [kv_note]
    if forced > 1 and s.attn_dp_size != forced:
        resolved.append(
            f"SGLang {version_text(version)} turns on data-parallel attention with --dp-size "
            f"{tp} for DeepSeek's sparse attention by itself (after sizing its memory fraction "
            "without it): planned so"
        )
    notes += resolved
    first, past = DP_ATTENTION_GRAPH_BS_CAP_RELEASES
    if attn_dp > 1 and first <= version < past:  # capped after the fraction was sized
        decode_bs = min(decode_bs, DP_ATTENTION_GRAPH_BS_CAP)
    return _Layout(
        chunk=chunk,
        decode_bs=decode_bs,
        mla=mla,
        attn_dp=attn_dp,
        attn_tp=tp // attn_dp,
        fraction=fraction,
        context=context,
        page=page,
        kv_dtype=kv_dtype,
        act_bytes=dtype_bytes(run_dtype),
        prefill_graph_tokens=prefill_graph_tokens(
            case.model_copy(update={"attn_dp": attn_dp}),  # the groups it runs
            experts.all_to_all,
            trtllm_mla_prefill(model, gpu, version),
        ),
        resolved=tuple(resolved),
    )


def _weights(
    model: ModelSpec,
    s: SglangSettings,
    version: tuple[int, int, int],
    lay: _Layout,
    weights_bytes: int | None,
    weights_exact: bool | None,
    m: MeasuredTerms,
    sources: dict[str, TermSource],
    notes: list[str],
) -> int:
    """A GPU's weights as loaded: 1/TP of the model, except under data-parallel attention,
    whose attention weights (and, in later releases, embedding) are split over the attention
    TP group only; a log's figure wins, a calibration corrects the model's."""
    tp, pp, attn_dp, attn_tp = s.tp_size, s.pp_size, lay.attn_dp, lay.attn_tp
    sharding = None
    if attn_dp > 1:
        since = DP_ATTENTION_SPLIT_EMBEDDING_SINCE_BY_TYPE.get(
            model.model_type or "", DP_ATTENTION_SPLIT_EMBEDDING_SINCE
        )
        split = version >= since
        replicated = dense_mlp_replicated(model, s, attn_dp)
        sharding = Sharding(
            attention_ranks=attn_tp,
            dense_ranks=tp,
            expert_ranks=tp,
            embedding_ranks=attn_tp if split else 1,
            dense_mlp_ranks=1 if replicated else 0,
            lm_head_ranks=attn_tp if s.enable_dp_lm_head else 0,
        )
        embedding = f"on the attention TP group's {attn_tp}" if split else "whole on every GPU"
        extra = (
            " the dense MLP layers whole on every GPU (--moe-dense-tp-size 1),"
            if replicated
            else ""
        ) + (
            f" the lm_head on {attn_tp} GPU(s) (--enable-dp-lm-head),"
            if s.enable_dp_lm_head
            else ""
        )
        notes.append(
            f"data-parallel attention: {attn_dp} groups of attention TP {attn_tp}, each with its "
            f"own scheduler and KV pool; attention weights on {attn_tp} GPU(s),{extra} the input "
            f"embedding {embedding} (weights split by parameter count: an estimate)"
        )
    elif s.enable_dp_lm_head and s.dp_size > 1:
        raise InputError(
            "--enable-dp-lm-head",
            "splits the lm_head over attention-DP groups: SGLang refuses it without "
            "--enable-dp-attention",
        )
    w, sources["weights_bytes"] = weights_term(
        model, weights_bytes, weights_exact, m.weights_bytes, tp, pp, lay.act_bytes, sharding
    )
    if m.weights_bytes is None:
        w = correct(s.calibration, "weights_bytes", w, sources)
    return w


def dense_mlp_replicated(model: ModelSpec, s: SglangSettings, attn_dp: int) -> bool:
    """Whether SGLang keeps the dense MLP layers whole on every GPU (--moe-dense-tp-size 1 under
    data-parallel attention, in the model files that read it: DENSE_TP_ARCHITECTURES)."""
    return (
        s.moe_dense_tp_size == 1
        and attn_dp > 1
        and (model.architecture or "") in DENSE_TP_ARCHITECTURES
        and model.dense_mlp_params > 0
    )


class MoriChunkRefused(InputError):
    """SGLang's refusal to start MoRI past its dispatch cap, with the largest
    --chunked-prefill-size it takes for this layout (`largest`), for a caller that sets the
    chunk itself (slo's line) to plan at."""

    def __init__(self, message: str, largest: int) -> None:
        super().__init__("--chunked-prefill-size", message)
        self.largest = largest


def check_mori(
    version: tuple[int, int, int], chunk_per_rank: int, divisor: int, s: SglangSettings
) -> None:
    """Refuse MoRI where SGLang would: before its first release, or past its dispatch cap
    (a rank's chunked-prefill size over MORI_MAX_DISPATCH_TOKENS_PER_RANK; see MORI_SINCE)."""
    if version < MORI_SINCE:
        raise InputError(
            "--moe-a2a-backend",
            f"mori: SGLang runs AMD's MoRI all-to-all from {version_text(MORI_SINCE)}, not in "
            f"{version_text(version)}",
        )
    checked = version < MORI_CHUNK_CHECK_SCOPED_SINCE or (
        chunk_per_rank > 0 and s.disaggregation_mode != "decode"
    )
    if checked and chunk_per_rank > MORI_MAX_DISPATCH_TOKENS_PER_RANK:
        largest = MORI_MAX_DISPATCH_TOKENS_PER_RANK * divisor
        raise MoriChunkRefused(
            f"{chunk_per_rank * divisor}: SGLang refuses to start MoRI (--moe-a2a-backend "
            f"mori) with {chunk_per_rank:,} prompt tokens a rank, over the "
            f"{MORI_MAX_DISPATCH_TOKENS_PER_RANK:,} it dispatches "
            "(SGLANG_MORI_NUM_MAX_DISPATCH_TOKENS_PER_RANK); pass --chunked-prefill-size "
            f"{largest} or less",
            largest,
        )


def _experts(model: ModelSpec, gpu: GpuSpec, s: SglangSettings) -> _Experts:
    """The MoE layers' spread: DeepEP where the flag or the planner's wide-EP default runs it,
    MoRI where the flag names it on AMD (both set --ep-size to the TP size), and the redundant
    experts, refused where SGLang would refuse them (no expert parallelism, or a split that
    leaves a remainder)."""
    tp = s.tp_size
    deepep = (
        s.moe_a2a_backend == "deepep"
        if s.moe_a2a_backend is not None
        else deepep_wide("sglang", bool(model.num_experts), tp, gpu.vendor)
    )
    mori = s.moe_a2a_backend == "mori"
    if mori and gpu.vendor != "amd":
        raise InputError(
            "--moe-a2a-backend",
            f"mori: AMD's MoRI all-to-all runs in SGLang's ROCm builds (Instinct GPUs); on "
            f"{gpu.name}, deepep",
        )
    ep = tp if deepep or mori else s.ep_size  # both set --ep-size to the TP size
    redundant = s.ep_num_redundant_experts
    if redundant and (not model.num_experts or ep < 2):
        raise InputError(
            "--ep-num-redundant-experts",
            f"{redundant}: redundant experts spread over expert-parallel ranks (--ep > 1 or "
            "DeepEP) of a MoE model",
        )
    physical = (model.num_experts or 0) + redundant
    if model.num_experts and ep > 1 and physical % ep:
        raise InputError(
            "--ep-num-redundant-experts" if redundant else ("--ep" if s.ep_size > 1 else "--tp"),
            f"{redundant if redundant else ep}: SGLang places {model.name}'s {physical} "
            + (
                f"experts ({model.num_experts} routed + {redundant} redundant)"
                if redundant
                else "experts"
            )
            + f" evenly over its {ep} expert-parallel ranks and refuses a split that leaves a "
            "remainder",
        )
    return _Experts(deepep=deepep, ep=ep, redundant=redundant, mori=mori)


def _redundant_bytes(
    model: ModelSpec,
    experts: _Experts,
    pp: int,
    weights_bytes: int | None,
    sources: dict[str, TermSource],
    notes: list[str],
) -> int:
    """A GPU's weights for its share of the redundant experts: R / EP more a rank, at the
    checkpoint's mean bytes per parameter."""
    redundant, ep = experts.redundant, experts.ep
    if not (redundant and model.num_experts):
        return 0
    loaded = weights_bytes if weights_bytes is not None else model.weights_bytes
    expert_bytes = model.expert_params / model.num_experts * loaded / model.params_total
    extra_bytes = ceil_div(round(redundant * expert_bytes), ep * pp)
    sources["weights_bytes"] = "derived"
    notes.append(
        f"{redundant} redundant experts: {redundant / ep:g} more a rank, "
        f"{extra_bytes / GIB_BYTES:.2f} GiB of weights (by parameter count)"
    )
    return extra_bytes


def _pre_load_free_bytes(
    s: SglangSettings,
    total: int,
    m: MeasuredTerms,
    sources: dict[str, TermSource],
    notes: list[str],
) -> int:
    """The free memory SGLang sees before it loads the weights, which it sizes its pool from
    (model_runner.py: get_available_gpu_memory): other processes' memory comes off it."""
    pre_free = total - PRE_LOAD_USED_BYTES
    sources["pre_load_free_bytes"] = "calibrated"
    pre_free = correct(s.calibration, "pre_load_free_bytes", pre_free, sources)
    if m.pre_load_free_bytes is not None:
        pre_free, sources["pre_load_free_bytes"] = m.pre_load_free_bytes, "log"
    if s.reserved_bytes:
        pre_free -= s.reserved_bytes
        notes.append(
            f"other processes' {s.reserved_bytes / GIB_BYTES:.2f} GiB come off the free memory "
            "SGLang sizes its pool from"
        )
    return pre_free


def _mamba_pool(
    model: ModelSpec, s: SglangSettings, available: int, fraction: float, notes: list[str]
) -> tuple[int, int]:
    """Hybrid models: the Mamba / linear-attention state slots and their bytes, taken from
    the KV budget before the token pool (--max-mamba-cache-size, else
    --mamba-full-memory-ratio of it); (0, 0) for a model with no state layers."""
    state_per_request = mamba_state_bytes_per_request(model, s.tp_size, s.pp_size)
    if not state_per_request:
        return 0, 0
    if s.max_mamba_cache_size is not None:
        slots = s.max_mamba_cache_size
    else:
        ratio = s.mamba_full_memory_ratio
        budget = int(available * ratio / (1 + ratio))
        slots = (budget - state_per_request) // state_per_request
    state_bytes = (slots + 1) * state_per_request
    notes.append(
        f"Mamba / linear-attention state pool: {slots:,} slots x "
        f"{state_per_request / MIB_BYTES:.2f} MiB = {state_bytes / GIB_BYTES:.2f} GiB "
        "taken before the KV pool"
    )
    if slots <= 0 or available - state_bytes <= 0:
        raise InputError(
            "--mem-fraction-static",
            f"the hybrid state pool leaves no KV cache under --mem-fraction-static={fraction}",
        )
    return slots, state_bytes


def hybrid_swa(model: ModelSpec, gpu: GpuSpec, version: tuple[int, int, int]) -> bool:
    """Whether SGLang pools this model's window layers apart from its full ones (above)."""
    since = HYBRID_SWA_SINCE.get(model.architecture or "")
    if since is None or version < since:
        return False
    blackwell = capability(gpu)[0] == BLACKWELL_MAJOR
    trtllm = model.architecture == "GptOssForCausalLM" and blackwell
    return not (trtllm and version < GPT_OSS_TRTLLM_SWA_SINCE)


def window_pool(
    model: ModelSpec, gpu: GpuSpec, version: tuple[int, int, int], full_tokens: int, page: int
) -> tuple[int, int] | None:
    """A hybrid SWA model's second pool beside the full one of `full_tokens`: its tokens
    (the ratio of the full pool's, page-aligned: pool_configurator.py _solve_pool_sizes) and
    the window its radix cache evicts behind (the model's; Llama 4's attention chunk), or
    None where SGLang keeps one pool."""
    windows = [
        g.window_tokens
        for g in model.kv_groups
        if g.kind in (KvKind.SLIDING, KvKind.CHUNKED) and g.window_tokens
    ]
    if not windows or not hybrid_swa(model, gpu, version):
        return None
    tokens = int(full_tokens * SWA_FULL_TOKENS_RATIO)
    return tokens - tokens % page, max(windows)


def _token_cell_bytes(
    model: ModelSpec, pp: int, attn_tp: int, kv_bytes: int, swa: bool, scaled: bool = False
) -> int:
    """Bytes one token of the pool costs on a rank: every attention layer's KV (MLA: the
    latent and the indexer's key; `scaled`: DSA's fp8 layout with its scales and a bf16 rope);
    with a hybrid SWA pool (`swa`), the window layers at the SWA pool's share of the full one."""
    cell = 0
    for g in model.kv_groups:
        layers = ceil_div(g.num_layers, pp)
        if g.kind is KvKind.MLA:
            latent = g.latent_dim * kv_bytes
            if scaled:
                latent = ds_mla_latent_bytes(g.latent_dim, g.rope_dim)
            cell += layers * (latent + g.indexer_bytes_per_token)
        elif g.kind.per_token:
            heads = kv_heads_per_rank(g.num_kv_heads, attn_tp)
            per = layers * heads * (g.head_dim_k + g.head_dim_v)
            window = g.kind in (KvKind.SLIDING, KvKind.CHUNKED)
            ratio = SWA_FULL_TOKENS_RATIO if swa and window else 1.0
            cell += int(per * kv_bytes * ratio)
    return cell


def mamba_radix_cache_strategy(
    model: ModelSpec, s: SglangSettings, version: tuple[int, int, int], page: int
) -> str | None:
    """The strategy the radix cache keeps a hybrid model's states with (from 0.5.14, where
    --mamba-radix-cache-strategy has that name; None otherwise or without the radix cache):
    the one stated, else what "auto" resolves to: "extra_buffer" where the architecture
    supports it and the overlap scheduler is on or pages are longer than a token, else
    "no_buffer". What SGLang refuses at start-up is one error: extra_buffer on an
    architecture without it, no_buffer with the overlap scheduler or longer pages."""
    stated = s.mamba_radix_cache_strategy
    if version < MAMBA_EXTRA_BUFFER_SINCE:
        if stated is not None:
            raise InputError(
                "--mamba-radix-cache-strategy",
                f"SGLang {version_text(MAMBA_EXTRA_BUFFER_SINCE)}+ (this is "
                f"{version_text(version)}: its --mamba-scheduler-strategy is not modelled)",
            )
        return None
    if s.disable_radix_cache or not mamba_state_bytes_per_request(model, s.tp_size, s.pp_size):
        return None
    since = MAMBA_EXTRA_BUFFER_ARCHS.get(model.architecture or "")
    supported = since is not None and version >= since
    if stated is None or stated == "auto":
        wanted = not s.disable_overlap_schedule or page > 1
        return "extra_buffer" if wanted and supported else "no_buffer"
    if stated == "extra_buffer" and not supported:
        raise InputError(
            "--mamba-radix-cache-strategy",
            f"extra_buffer: SGLang {version_text(version)} supports it for "
            f"{', '.join(a for a, v in MAMBA_EXTRA_BUFFER_ARCHS.items() if version >= v)}, "
            f"not {model.architecture}; no_buffer (with --disable-overlap-schedule) or auto",
        )
    if stated == "no_buffer" and (not s.disable_overlap_schedule or page > 1):
        raise InputError(
            "--mamba-radix-cache-strategy",
            "no_buffer: SGLang refuses it with the overlap scheduler or pages over one token "
            "(add --disable-overlap-schedule, keep --page-size 1)",
        )
    return stated


def mamba_slots_per_request(
    disable_radix_cache: bool, strategy: str | None = None, overlap: bool = True
) -> int:
    """State slots the running cap counts per request of a hybrid model: 3 with the radix cache
    (its cached states beside the request's own) and, under the extra_buffer `strategy`, its
    tracking slots (2 with the overlap scheduler, 1 without); 1 without the radix cache."""
    if disable_radix_cache:
        return MAMBA_SLOTS_PER_REQUEST_NO_RADIX
    if strategy != "extra_buffer":
        return MAMBA_SLOTS_PER_RUNNING_REQUEST
    extra = MAMBA_EXTRA_BUFFER_SLOTS_OVERLAP if overlap else MAMBA_EXTRA_BUFFER_SLOTS_NO_OVERLAP
    return MAMBA_SLOTS_PER_RUNNING_REQUEST + extra


def _max_running_requests(
    s: SglangSettings,
    version: tuple[int, int, int],
    tokens: int,
    context: int,
    mamba_cap: int | None,
    attn_dp: int,
) -> int:
    """The running-request cap of one scheduler: resolve_max_num_reqs (sglang.md 3.4),
    clamp(tokens / context x 512, 2048, 4096), or the user's cap shared among the `attn_dp`
    groups; never above half the token pool nor the Mamba slots' share (`mamba_cap`: the
    slots over mamba_slots_per_request; None for a model without state layers)."""
    running = min(max(int(tokens / context * 512), 2048), 4096)
    if s.max_running_requests is not None:
        running = max(1, s.max_running_requests // attn_dp)
    running = min(running, tokens // 2)
    if mamba_cap is not None:
        running = min(running, mamba_cap)
    if version < (0, 5, 0):
        running += 1  # 0.4.x logged the req_to_token pool size (one padding slot)
    return running


# Log formats by release (memory_pool.py / scheduler.py): "#tokens" in the KV line from 0.4.6,
# "dtype" from 0.5.15; chunked_prefill_size in the summary from 0.4.3, available_gpu_mem from 0.4.8.
KV_LINE_TOKENS_SINCE = (0, 4, 6)
KV_LINE_DTYPE_SINCE = (0, 5, 15)
SUMMARY_CHUNK_SINCE = (0, 4, 3)
SUMMARY_AVAILABLE_SINCE = (0, 4, 8)
TORCH_DTYPES = {
    "bf16": "torch.bfloat16",
    "fp16": "torch.float16",
    "fp32": "torch.float32",
    "fp8": "torch.float8_e4m3fn",
    "fp8_e4m3": "torch.float8_e4m3fn",
    "fp8_e5m2": "torch.float8_e5m2",
}


def _log_lines(
    version: tuple[int, int, int],
    *,
    tokens: int,
    size_gib: float,
    mla: bool,
    kv_dtype: str,
    chunk: int,
    running: int,
    context: int,
    max_prefill: int = DEFAULT_MAX_PREFILL_TOKENS,
) -> list[str]:
    """The KV-pool and scheduler lines, in that release's wording (GB there means GiB)."""
    kv = "KV Cache is allocated. "
    if version >= KV_LINE_DTYPE_SINCE:
        kv += f"dtype: {TORCH_DTYPES.get(kv_dtype, kv_dtype)}, "
    if version >= KV_LINE_TOKENS_SINCE:
        kv += f"#tokens: {tokens}, "
    kv += (
        f"KV size: {2 * size_gib:.2f} GB"
        if mla
        else f"K size: {size_gib:.2f} GB, V size: {size_gib:.2f} GB"
    )
    if version < KV_LINE_TOKENS_SINCE:
        kv += "."
    summary = [f"max_total_num_tokens={tokens}"]
    if version >= SUMMARY_CHUNK_SINCE:
        summary.append(f"chunked_prefill_size={chunk}")
    summary += [
        f"max_prefill_tokens={max_prefill}",
        f"max_running_requests={running}",
        f"context_len={context}",
    ]
    if version >= SUMMARY_AVAILABLE_SINCE:
        summary.append("available_gpu_mem=(not predicted) GB")
    return [kv, ", ".join(summary)]
