"""Real config.json files (tests/data/models, verbatim from ../shared/models), sized by hand.

Each expected figure is written as the arithmetic it comes from, read off the config:
per-token bytes of a group = K/V factor x layers x KV heads x head_dim x 2 bytes (bf16/fp16);
MLA = layers x (kv_lora_rank + qk_rope_head_dim) x 2; fixed states are per sequence.
"""

from __future__ import annotations

import pytest
from helpers import MODELS, model_config

from planner.core.hf_config import model_spec_from_config
from planner.core.kv import group_bytes_per_token, group_state_bytes
from planner.core.specs import INT8_W8A8_LABEL, MODELOPT_MIXED, ModelSpec
from planner.errors import InputError

BF16 = 2


def spec(name: str) -> ModelSpec:
    return model_spec_from_config(model_config(name), name=name, source="local")


def groups(m: ModelSpec, tp: int = 1) -> list[tuple[str, int, int, int | None, int]]:
    return [
        (
            g.kind.value,
            g.num_layers,
            group_bytes_per_token(g, tp, BF16),
            g.window_tokens,
            group_state_bytes(g, tp),
        )
        for g in m.kv_groups
    ]


# name -> [(kind, layers, bytes/token at TP 1, window, state bytes per sequence)]
EXPECTED = {
    # Llama 3.1 8B: 32 layers, 8 KV heads (GQA 32/8), head_dim 4096/32 = 128.
    "meta-llama--Llama-3.1-8B-Instruct": [("full", 32, 2 * 32 * 8 * 128 * BF16, None, 0)],
    # Llama 3.1 70B: 80 layers x 8 KV heads x 128 -> the 320 KiB of docs/method.md §1.
    "meta-llama--Llama-3.1-70B-Instruct": [("full", 80, 2 * 80 * 8 * 128 * BF16, None, 0)],
    # Llama 2 7B: full MHA, 32 KV heads, fp16.
    "meta-llama--Llama-2-7b-hf": [("full", 32, 2 * 32 * 32 * 128 * BF16, None, 0)],
    # Qwen3-30B-A3B (MoE): 48 layers, 4 KV heads, explicit head_dim 128 (hidden/heads = 64).
    "Qwen--Qwen3-30B-A3B": [("full", 48, 2 * 48 * 4 * 128 * BF16, None, 0)],
    # Qwen2.5-7B: sliding_window 131072 is present but use_sliding_window is false -> all full.
    "Qwen--Qwen2.5-7B-Instruct": [("full", 28, 2 * 28 * 4 * 128 * BF16, None, 0)],
    # Mixtral 8x7B: 32 layers, 8 KV heads, head_dim 128; sliding_window null.
    "mistralai--Mixtral-8x7B-v0.1": [("full", 32, 2 * 32 * 8 * 128 * BF16, None, 0)],
    # Mistral 7B v0.1: sliding_window 4096 on every layer.
    "mistralai--Mistral-7B-v0.1": [("sliding", 32, 2 * 32 * 8 * 128 * BF16, 4096, 0)],
    # DeepSeek-V3 (MLA): 61 layers x (512 + 64) latent, no factor 2.
    "deepseek-ai--DeepSeek-V3": [("mla", 61, 61 * (512 + 64) * BF16, None, 0)],
    # DeepSeek-V2-Lite (MLA, q_lora_rank null): 27 layers x 576.
    "deepseek-ai--DeepSeek-V2-Lite": [("mla", 27, 27 * (512 + 64) * BF16, None, 0)],
    # Kimi-K2: DeepseekV3 architecture, 61 MLA layers.
    "moonshotai--Kimi-K2-Instruct": [("mla", 61, 61 * (512 + 64) * BF16, None, 0)],
    # gpt-oss-20b: layer_types alternate sliding(128)/full over 24 layers; 8 KV heads x 64.
    "openai--gpt-oss-20b": [
        ("sliding", 12, 2 * 12 * 8 * 64 * BF16, 128, 0),
        ("full", 12, 2 * 12 * 8 * 64 * BF16, None, 0),
    ],
    # Gemma 2 9B: even layers slide (4096), odd layers global; 8 KV heads, head_dim 256.
    "google--gemma-2-9b-it": [
        ("sliding", 21, 2 * 21 * 8 * 256 * BF16, 4096, 0),
        ("full", 21, 2 * 21 * 8 * 256 * BF16, None, 0),
    ],
    # Gemma 3 4B (text_config holds 5 keys; transformers defaults: 4 KV heads, head_dim 256,
    # pattern 6): layers 5, 11, 17, 23, 29 global, the other 29 slide over 1024 tokens.
    "google--gemma-3-4b-it": [
        ("sliding", 29, 2 * 29 * 4 * 256 * BF16, 1024, 0),
        ("full", 5, 2 * 5 * 4 * 256 * BF16, None, 0),
    ],
    # Llama 4 Scout (nested text_config): chunked-local 8192 except every 4th (NoPE) layer.
    "meta-llama--Llama-4-Scout-17B-16E-Instruct": [
        ("chunked", 36, 2 * 36 * 8 * 128 * BF16, 8192, 0),
        ("full", 12, 2 * 12 * 8 * 128 * BF16, None, 0),
    ],
    # Nemotron-H 56B: pattern has 54 'M' (Mamba2) and 10 '*' (attention) blocks.
    # Mamba2 state per layer: conv (256*64 + 2*8*256) x (4-1) + ssm 256 heads x 64 x 256, bf16.
    "nvidia--Nemotron-H-56B-Base-8K": [
        ("mamba", 54, 0, None, 54 * ((256 * 64 + 2 * 8 * 256) * 3 + 256 * 64 * 256) * BF16),
        ("full", 10, 2 * 10 * 8 * 128 * BF16, None, 0),
    ],
    # Nemotron-3-Nano: 23 Mamba2 layers; ssm state in float32 (mamba_ssm_cache_dtype), conv bf16:
    # conv (64*64 + 2*8*128) x 3 x 2 B + ssm 64 x 64 x 128 x 4 B; 6 attention layers, 2 KV heads.
    "nvidia--NVIDIA-Nemotron-3-Nano-30B-A3B-BF16": [
        ("mamba", 23, 0, None, 23 * ((64 * 64 + 2 * 8 * 128) * 3 * 2 + 64 * 64 * 128 * 4)),
        ("full", 6, 2 * 6 * 2 * 128 * BF16, None, 0),
    ],
    # Qwen3-Next 80B: every 4th layer full attention (2 KV heads x 256), 36 Gated DeltaNet
    # layers: conv (2*16*128 + 32*128) x (4-1) + recurrent 32 heads x 128 x 128, bf16.
    "Qwen--Qwen3-Next-80B-A3B-Thinking": [
        ("linear", 36, 0, None, 36 * ((2 * 16 * 128 + 32 * 128) * 3 + 32 * 128 * 128) * BF16),
        ("full", 12, 2 * 12 * 2 * 256 * BF16, None, 0),
    ],
    # Nemotron-Super 49B (NAS): 49 of 80 layers keep attention, each 64/8 = 8 KV heads.
    "nvidia--Llama-3_3-Nemotron-Super-49B-v1": [("full", 49, 2 * 49 * 8 * 128 * BF16, None, 0)],
    # phi-4: sliding_window 16384 (= the max context) on all 40 layers, 10 KV heads.
    "microsoft--phi-4": [("sliding", 40, 2 * 40 * 10 * 128 * BF16, 16384, 0)],
    # --- the rest of ../shared/models: layers x KV heads x head_dim (hidden / heads unless
    # head_dim is given), all full attention unless said otherwise.
    "01-ai--Yi-34B": [("full", 60, 2 * 60 * 8 * (7168 // 56) * BF16, None, 0)],
    # Qwen2.5: use_sliding_window false, so sliding_window / max_window_layers do not apply.
    "Qwen--Qwen2.5-1.5B-Instruct": [("full", 28, 2 * 28 * 2 * (1536 // 12) * BF16, None, 0)],
    "Qwen--Qwen2.5-1.5B": [("full", 28, 2 * 28 * 2 * (1536 // 12) * BF16, None, 0)],
    "Qwen--Qwen2.5-3B-Instruct": [("full", 36, 2 * 36 * 2 * (2048 // 16) * BF16, None, 0)],
    "Qwen--Qwen2.5-7B": [("full", 28, 2 * 28 * 4 * (3584 // 28) * BF16, None, 0)],
    "Qwen--Qwen2.5-32B": [("full", 64, 2 * 64 * 8 * (5120 // 40) * BF16, None, 0)],
    "Qwen--Qwen2.5-72B": [("full", 80, 2 * 80 * 8 * (8192 // 64) * BF16, None, 0)],
    "Qwen--Qwen2.5-VL-7B-Instruct": [("full", 28, 2 * 28 * 4 * (3584 // 28) * BF16, None, 0)],
    "Qwen--Qwen3-8B": [("full", 36, 2 * 36 * 8 * 128 * BF16, None, 0)],
    "Qwen--Qwen3-14B": [("full", 40, 2 * 40 * 8 * 128 * BF16, None, 0)],
    "Qwen--Qwen3-32B": [("full", 64, 2 * 64 * 8 * 128 * BF16, None, 0)],
    "Qwen--Qwen3-235B-A22B": [("full", 94, 2 * 94 * 4 * 128 * BF16, None, 0)],
    # The FP8 checkpoint quantises weights only; the KV cache stays in the model dtype.
    "Qwen--Qwen3-235B-A22B-FP8": [("full", 94, 2 * 94 * 4 * 128 * BF16, None, 0)],
    "Qwen--Qwen3-Coder-480B-A35B-Instruct": [("full", 62, 2 * 62 * 8 * 128 * BF16, None, 0)],
    "codellama--CodeLlama-34b-Instruct-hf": [
        ("full", 48, 2 * 48 * 8 * (8192 // 64) * BF16, None, 0)
    ],
    "deepseek-ai--DeepSeek-R1": [("mla", 61, 61 * (512 + 64) * BF16, None, 0)],
    # V3.2 adds the lightning indexer's key: index_head_dim 128 in fp8 + one fp32 scale per 128.
    "deepseek-ai--DeepSeek-V3.2": [("mla", 61, 61 * ((512 + 64) * BF16 + 128 + 4), None, 0)],
    # Gemma 3 27B: pattern 6 over 62 layers -> globals at 5, 11, ..., 59 (10), 52 sliding.
    "google--gemma-3-27b-it": [
        ("sliding", 52, 2 * 52 * 16 * 128 * BF16, 1024, 0),
        ("full", 10, 2 * 10 * 16 * 128 * BF16, None, 0),
    ],
    "meta-llama--Llama-2-13b-hf": [("full", 40, 2 * 40 * 40 * (5120 // 40) * BF16, None, 0)],
    "meta-llama--Llama-2-70b-hf": [("full", 80, 2 * 80 * 8 * (8192 // 64) * BF16, None, 0)],
    "meta-llama--Llama-3.1-8B": [("full", 32, 2 * 32 * 8 * 128 * BF16, None, 0)],
    "meta-llama--Meta-Llama-3.1-8B": [("full", 32, 2 * 32 * 8 * 128 * BF16, None, 0)],
    "meta-llama--Llama-3.1-70B": [("full", 80, 2 * 80 * 8 * 128 * BF16, None, 0)],
    "meta-llama--Llama-3.1-405B": [("full", 126, 2 * 126 * 8 * (16384 // 128) * BF16, None, 0)],
    "meta-llama--Llama-3.2-1B-Instruct": [("full", 16, 2 * 16 * 8 * 64 * BF16, None, 0)],
    "meta-llama--Llama-3.2-3B-Instruct": [("full", 28, 2 * 28 * 8 * 128 * BF16, None, 0)],
    "meta-llama--Llama-3.3-70B-Instruct": [("full", 80, 2 * 80 * 8 * 128 * BF16, None, 0)],
    "meta-llama--Llama-4-Maverick-17B-128E-Instruct": [
        ("chunked", 36, 2 * 36 * 8 * 128 * BF16, 8192, 0),
        ("full", 12, 2 * 12 * 8 * 128 * BF16, None, 0),
    ],
    "mistralai--Mistral-7B-Instruct-v0.3": [("full", 32, 2 * 32 * 8 * 128 * BF16, None, 0)],
    "mistralai--Mistral-Nemo-Instruct-2407": [("full", 40, 2 * 40 * 8 * 128 * BF16, None, 0)],
    "mistralai--Mixtral-8x7B-Instruct-v0.1": [("full", 32, 2 * 32 * 8 * 128 * BF16, None, 0)],
    "mistralai--Mixtral-8x22B-v0.1": [("full", 56, 2 * 56 * 8 * (6144 // 48) * BF16, None, 0)],
    "mistralai--Mixtral-8x22B-Instruct-v0.1": [
        ("full", 56, 2 * 56 * 8 * (6144 // 48) * BF16, None, 0)
    ],
    "MiniMaxAI--MiniMax-M2.5": [("full", 62, 2 * 62 * 8 * 128 * BF16, None, 0)],
    "MiniMaxAI--MiniMax-M2.7": [("full", 62, 2 * 62 * 8 * 128 * BF16, None, 0)],
    # Gemma 4 31B: layer_types 5 sliding : 1 full over 60 layers; the full layers use
    # global_head_dim 512 with num_global_key_value_heads 4 (K and V both held: k_eq_v shares
    # the projection, the cache is counted for both).
    "google--gemma-4-31B-it": [
        ("sliding", 50, 2 * 50 * 16 * 256 * BF16, 1024, 0),
        ("full", 10, 2 * 10 * 4 * 512 * BF16, None, 0),
    ],
    "openai--gpt-oss-120b": [
        ("sliding", 18, 2 * 18 * 8 * 64 * BF16, 128, 0),
        ("full", 18, 2 * 18 * 8 * 64 * BF16, None, 0),
    ],
    # --- 2026 models and NVIDIA's quantized exports (ai-dynamo/aiconfigurator's copies) ---
    "Qwen--Qwen3-0.6B": [("full", 28, 2 * 28 * 8 * 128 * BF16, None, 0)],
    "Qwen--Qwen3-1.7B": [("full", 28, 2 * 28 * 8 * 128 * BF16, None, 0)],
    "Qwen--Qwen3-30B-A3B-FP8": [("full", 48, 2 * 48 * 4 * 128 * BF16, None, 0)],
    "Qwen--Qwen3-32B-FP8": [("full", 64, 2 * 64 * 8 * 128 * BF16, None, 0)],
    # Qwen3-VL: the text_config's layers (36 / 48 / 94) and KV heads x 128.
    "Qwen--Qwen3-VL-8B-Instruct": [("full", 36, 2 * 36 * 8 * 128 * BF16, None, 0)],
    "Qwen--Qwen3-VL-30B-A3B-Instruct": [("full", 48, 2 * 48 * 4 * 128 * BF16, None, 0)],
    "Qwen--Qwen3-VL-235B-A22B-Instruct": [("full", 94, 2 * 94 * 4 * 128 * BF16, None, 0)],
    # Qwen3.5: every 4th layer full attention (head_dim 256), the rest Gated DeltaNet with 16
    # key heads and V value heads of 128: conv (2*16*128 + V*128) x (4-1) + V x 128 x 128, bf16.
    "Qwen--Qwen3.5-27B": [
        ("linear", 48, 0, None, 48 * ((2 * 16 * 128 + 48 * 128) * 3 + 48 * 128 * 128) * BF16),
        ("full", 16, 2 * 16 * 4 * 256 * BF16, None, 0),
    ],
    "Qwen--Qwen3.5-35B-A3B": [
        ("linear", 30, 0, None, 30 * ((2 * 16 * 128 + 32 * 128) * 3 + 32 * 128 * 128) * BF16),
        ("full", 10, 2 * 10 * 2 * 256 * BF16, None, 0),
    ],
    "Qwen--Qwen3.5-122B-A10B": [
        ("linear", 36, 0, None, 36 * ((2 * 16 * 128 + 64 * 128) * 3 + 64 * 128 * 128) * BF16),
        ("full", 12, 2 * 12 * 2 * 256 * BF16, None, 0),
    ],
    "Qwen--Qwen3.5-397B-A17B": [
        ("linear", 45, 0, None, 45 * ((2 * 16 * 128 + 64 * 128) * 3 + 64 * 128 * 128) * BF16),
        ("full", 15, 2 * 15 * 2 * 256 * BF16, None, 0),
    ],
    "nvidia--Qwen3.5-122B-A10B-NVFP4": [
        ("linear", 36, 0, None, 36 * ((2 * 16 * 128 + 64 * 128) * 3 + 64 * 128 * 128) * BF16),
        ("full", 12, 2 * 12 * 2 * 256 * BF16, None, 0),
    ],
    "nvidia--Qwen3.5-397B-A17B-NVFP4": [
        ("linear", 45, 0, None, 45 * ((2 * 16 * 128 + 64 * 128) * 3 + 64 * 128 * 128) * BF16),
        ("full", 15, 2 * 15 * 2 * 256 * BF16, None, 0),
    ],
    "nvidia--Qwen3-235B-A22B-NVFP4": [("full", 94, 2 * 94 * 4 * 128 * BF16, None, 0)],
    # Qwen3.6 (Qwen3.5's layers): every 4th layer full attention, the rest Gated DeltaNet
    "nvidia--Qwen3.6-27B-NVFP4": [
        ("linear", 48, 0, None, 48 * ((2 * 16 * 128 + 48 * 128) * 3 + 48 * 128 * 128) * BF16),
        ("full", 16, 2 * 16 * 4 * 256 * BF16, None, 0),
    ],
    "nvidia--Qwen3.6-35B-A3B-NVFP4": [
        ("linear", 30, 0, None, 30 * ((2 * 16 * 128 + 32 * 128) * 3 + 32 * 128 * 128) * BF16),
        ("full", 10, 2 * 10 * 2 * 256 * BF16, None, 0),
    ],
    # Gemma 4 26B-A4B: 25 sliding (1024) layers of 8 KV heads x 256, 5 full layers of
    # num_global_key_value_heads 2 x global_head_dim 512 (K and V both counted, as for 31B).
    "google--gemma-4-26B-A4B": [
        ("sliding", 25, 2 * 25 * 8 * 256 * BF16, 1024, 0),
        ("full", 5, 2 * 5 * 2 * 512 * BF16, None, 0),
    ],
    # MiMo-V2-Flash: 39 sliding (128) layers of 8 KV heads, 9 full of 4; K 192 and V 128 wide
    "XiaomiMiMo--MiMo-V2-Flash": [
        ("full", 9, 9 * 4 * (192 + 128) * BF16, None, 0),
        ("sliding", 39, 39 * 8 * (192 + 128) * BF16, 128, 0),
    ],
    "nvidia--Gemma-4-26B-A4B-NVFP4": [
        ("sliding", 25, 2 * 25 * 8 * 256 * BF16, 1024, 0),
        ("full", 5, 2 * 5 * 2 * 512 * BF16, None, 0),
    ],
    "nvidia--Gemma-4-31B-IT-NVFP4": [
        ("sliding", 50, 2 * 50 * 16 * 256 * BF16, 1024, 0),
        ("full", 10, 2 * 10 * 4 * 512 * BF16, None, 0),
    ],
    # MLA latents (kv_lora_rank 512 + RoPE 64); DeepSeek Sparse Attention (GLM-5's
    # glm_moe_dsa, DeepSeek-V3.2) adds the indexer key: 128 fp8 values + one fp32 scale.
    "moonshotai--Kimi-K2.5": [("mla", 61, 61 * (512 + 64) * BF16, None, 0)],
    "nvidia--Kimi-K2.5-NVFP4": [("mla", 61, 61 * (512 + 64) * BF16, None, 0)],
    "nvidia--DeepSeek-V3.1-NVFP4": [("mla", 61, 61 * (512 + 64) * BF16, None, 0)],
    "nvidia--DeepSeek-V3.2-NVFP4": [("mla", 61, 61 * ((512 + 64) * BF16 + 128 + 4), None, 0)],
    "zai-org--GLM-5": [("mla", 78, 78 * ((512 + 64) * BF16 + 128 + 4), None, 0)],
    "zai-org--GLM-5-FP8": [("mla", 78, 78 * ((512 + 64) * BF16 + 128 + 4), None, 0)],
    "zai-org--GLM-5.1": [("mla", 78, 78 * ((512 + 64) * BF16 + 128 + 4), None, 0)],
    "zai-org--GLM-5.1-FP8": [("mla", 78, 78 * ((512 + 64) * BF16 + 128 + 4), None, 0)],
    # GLM-5.2: an indexer in layers 0-2 and every 4th from 6 (index_topk_freq 4, offset 3): 21
    "zai-org--GLM-5.2": [
        ("mla", 21, 21 * ((512 + 64) * BF16 + 128 + 4), None, 0),
        ("mla", 57, 57 * (512 + 64) * BF16, None, 0),
    ],
    "zai-org--GLM-5.2-FP8": [
        ("mla", 21, 21 * ((512 + 64) * BF16 + 128 + 4), None, 0),
        ("mla", 57, 57 * (512 + 64) * BF16, None, 0),
    ],
    "nvidia--GLM-5.2-NVFP4": [  # layer_types: deepseek_sparse_attention in every layer
        ("mla", 21, 21 * ((512 + 64) * BF16 + 128 + 4), None, 0),
        ("mla", 57, 57 * (512 + 64) * BF16, None, 0),
    ],
    "nvidia--GLM-5-NVFP4": [("mla", 78, 78 * ((512 + 64) * BF16 + 128 + 4), None, 0)],
    "nvidia--GLM-5.1-NVFP4": [("mla", 78, 78 * ((512 + 64) * BF16 + 128 + 4), None, 0)],
    "nvidia--Llama-3.1-70B-Instruct-FP8": [("full", 80, 2 * 80 * 8 * 128 * BF16, None, 0)],
    "nvidia--MiniMax-M2.5-NVFP4": [("full", 62, 2 * 62 * 8 * 128 * BF16, None, 0)],
    "nvidia--MiniMax-M2.7-NVFP4": [("full", 62, 2 * 62 * 8 * 128 * BF16, None, 0)],
    # Nemotron 3 Super / Ultra: Mamba2 layers (128 / 256 heads of 64, 8 groups, state 128,
    # float32 ssm state, bf16 conv over 4 - 1 steps) and attention layers of 2 KV heads x 128.
    "nvidia--NVIDIA-Nemotron-3-Super-120B-A12B-FP8": [
        ("mamba", 40, 0, None, 40 * ((128 * 64 + 2 * 8 * 128) * 3 * 2 + 128 * 64 * 128 * 4)),
        ("full", 8, 2 * 8 * 2 * 128 * BF16, None, 0),
    ],
    "nvidia--NVIDIA-Nemotron-3-Super-120B-A12B-NVFP4": [
        ("mamba", 40, 0, None, 40 * ((128 * 64 + 2 * 8 * 128) * 3 * 2 + 128 * 64 * 128 * 4)),
        ("full", 8, 2 * 8 * 2 * 128 * BF16, None, 0),
    ],
    "nvidia--NVIDIA-Nemotron-3-Ultra-550B-A55B-FP8": [
        ("mamba", 48, 0, None, 48 * ((256 * 64 + 2 * 8 * 128) * 3 * 2 + 256 * 64 * 128 * 4)),
        ("full", 12, 2 * 12 * 2 * 128 * BF16, None, 0),
    ],
    # Kimi-K2.6 (NVIDIA's NVFP4 export): DeepseekV3 architecture, 61 MLA layers
    "nvidia--Kimi-K2.6-NVFP4": [("mla", 61, 61 * (512 + 64) * BF16, None, 0)],
    # Step-3.7-Flash: layer_types put full attention on every 4th of 45 layers (0, 4, ... 44),
    # the other 33 slide over 512 tokens; 8 KV heads x 128 on both
    "stepfun-ai--Step-3.7-Flash": [
        ("full", 12, 2 * 12 * 8 * 128 * BF16, None, 0),
        ("sliding", 33, 2 * 33 * 8 * 128 * BF16, 512, 0),
    ],
    # MiMo-7B: 36 layers, 8 KV heads x 128 (use_sliding_window false: every layer full)
    "XiaomiMiMo--MiMo-7B-Base": [("full", 36, 2 * 36 * 8 * 128 * BF16, None, 0)],
    # Qwen3-VL-32B (text_config): 64 layers, 8 KV heads x 128
    "Qwen--Qwen3-VL-32B-Instruct": [("full", 64, 2 * 64 * 8 * 128 * BF16, None, 0)],
}
# Other releases of the same layers (the weights re-stored, the cache as the engine keeps it):
# NVIDIA's and the publishers' own quantized exports, a BF16 release beside an FP8 one.
for _release, _same in (
    (
        "nvidia--NVIDIA-Nemotron-3-Ultra-550B-A55B-BF16",
        "nvidia--NVIDIA-Nemotron-3-Ultra-550B-A55B-FP8",
    ),
    ("nvidia--NVIDIA-Nemotron-3-Nano-30B-A3B-NVFP4", "nvidia--NVIDIA-Nemotron-3-Nano-30B-A3B-BF16"),
    ("nvidia--Kimi-K2.7-Code-NVFP4", "nvidia--Kimi-K2.6-NVFP4"),
    ("stepfun-ai--Step-3.7-Flash-FP8", "stepfun-ai--Step-3.7-Flash"),
    ("Qwen--Qwen3-32B-FP8-Static-PerTensor", "Qwen--Qwen3-32B"),
):
    EXPECTED[_release] = EXPECTED[_same]


def test_every_shared_config_is_pinned() -> None:
    assert {p.parent.name for p in MODELS.glob("*/config.json")} == set(EXPECTED)


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_kv_groups_match_hand_derivation(name: str) -> None:
    assert groups(spec(name)) == EXPECTED[name]


@pytest.mark.parametrize("path", sorted(MODELS.glob("*/config.json")), ids=lambda p: p.parent.name)
def test_every_shared_config_loads(path: object) -> None:
    m = spec(path.parent.name)  # type: ignore[attr-defined]
    assert m.kv_groups and m.weights_bytes > 0 and m.params_active <= m.params_total


@pytest.mark.parametrize("name", sorted(p.parent.name for p in MODELS.glob("*/total_size.txt")))
def test_estimated_weights_match_safetensors_total_within_1pct(name: str) -> None:
    total = int((MODELS / name / "total_size.txt").read_text())
    assert spec(name).weights_bytes == pytest.approx(total, rel=0.01)


def test_phi4_estimate_is_just_under_the_file_bytes() -> None:
    # weights_file_bytes.txt includes the safetensors JSON headers, so it is a ceiling.
    files = int((MODELS / "microsoft--phi-4" / "weights_file_bytes.txt").read_text())
    est = spec("microsoft--phi-4").weights_bytes
    assert files * 0.99 < est <= files


@pytest.mark.parametrize(
    ("name", "total_b", "active_b"),
    [
        ("mistralai--Mixtral-8x7B-v0.1", 46.7, 12.9),  # Mistral: 46.7B total, 12.9B active
        ("Qwen--Qwen3-30B-A3B", 30.5, 3.3),  # Qwen3 card: 30.5B total, 3.3B activated
        ("deepseek-ai--DeepSeek-V3", 671, 37),  # DeepSeek: 671B total, 37B activated (w/o MTP)
        ("openai--gpt-oss-120b", 116.8, 5.1),  # OpenAI: 117B total, 5.1B active (excl. embed)
        ("Qwen--Qwen3-Next-80B-A3B-Thinking", 80, 3),  # 80B total, ~3B activated
    ],
)
def test_moe_total_and_active_parameters(name: str, total_b: float, active_b: float) -> None:
    m = spec(name)
    assert m.params_total / 1e9 == pytest.approx(total_b, rel=0.02)
    assert m.params_active / 1e9 == pytest.approx(active_b, rel=0.35)  # embeddings counted
    assert m.num_experts and m.experts_per_token


def test_fp8_checkpoint_weights_are_about_one_byte_per_linear_param() -> None:
    fp8 = spec("Qwen--Qwen3-235B-A22B-FP8")
    bf16 = spec("Qwen--Qwen3-235B-A22B")
    assert fp8.weight_dtype == "fp8" and bf16.weight_dtype == "bf16"
    assert fp8.params_total == bf16.params_total
    # 235B params: linear layers in fp8 (+ one fp32 scale per 128x128 tile), embeddings bf16.
    assert 0.49 < fp8.weights_bytes / bf16.weights_bytes < 0.52


def test_block_scaled_fp8_is_read_from_the_quantization_config() -> None:
    # a weight_block_size (Qwen3's FP8 export, as DeepSeek-V3's) or compressed-tensors' block
    # strategy means 2-D tile scales; the fp8 method without one and a channel strategy do not
    assert spec("Qwen--Qwen3-235B-A22B-FP8").fp8_block_scaled
    assert not spec("Qwen--Qwen3-235B-A22B").fp8_block_scaled
    base = model_config("Qwen--Qwen3-8B")
    per_tensor = {"quant_method": "fp8", "activation_scheme": "dynamic"}
    weights = {"type": "float", "num_bits": 8, "strategy": "block", "block_structure": [128, 128]}
    block = {"quant_method": "compressed-tensors", "config_groups": {"g": {"weights": weights}}}
    channel = {
        "quant_method": "compressed-tensors",
        "config_groups": {"g": {"weights": weights | {"strategy": "channel"}}},
    }
    expected = ((per_tensor, False), (block, True), (channel, False))
    for q, scaled in expected:
        m = model_spec_from_config(base | {"quantization_config": q}, name="q", source="local")
        assert m.fp8_block_scaled is scaled, q


def test_int8_weights_with_int8_inputs_are_w8a8() -> None:
    """compressed-tensors int8 weights whose config group quantizes the input activations to
    8-bit integers (its W8A8 exports) carry the W8A8 label; int8 weights alone (W8A16) do not;
    both store a byte a weight."""
    base = model_config("meta-llama--Llama-3.1-8B-Instruct")
    weights = {"type": "int", "num_bits": 8, "strategy": "channel", "symmetric": True}
    inputs = {"type": "int", "num_bits": 8, "strategy": "token", "dynamic": True}

    def labelled(group: dict[str, object]) -> ModelSpec:
        q = {"quant_method": "compressed-tensors", "config_groups": {"group_0": group}}
        return model_spec_from_config(base | {"quantization_config": q}, name="q", source="local")

    w8a8 = labelled({"weights": weights, "input_activations": inputs})
    w8a16 = labelled({"weights": weights})
    fp8_inputs = labelled({"weights": weights, "input_activations": inputs | {"type": "float"}})
    assert w8a8.weight_dtype == INT8_W8A8_LABEL
    assert w8a16.weight_dtype == fp8_inputs.weight_dtype == "compressed-tensors-int8"
    assert w8a8.weights_bytes == w8a16.weights_bytes


def test_gpt_oss_mxfp4_quantises_only_the_experts() -> None:
    m = spec("openai--gpt-oss-20b")
    assert m.weight_dtype == "mxfp4"
    # ~19.1B expert params at 4.25 bits + ~1.8B bf16 params: 13.8 GB (HF checkpoint 13.8 GB).
    assert m.weights_bytes / 1e9 == pytest.approx(13.8, rel=0.02)


def test_awq_checkpoint_uses_group_scales() -> None:
    cfg = model_config("Qwen--Qwen2.5-7B-Instruct") | {
        "quantization_config": {"quant_method": "awq", "bits": 4, "group_size": 128}
    }
    m = model_spec_from_config(cfg, name="awq", source="local")
    assert m.weight_dtype == "awq-int4"
    # 6.53B linear params x (0.5 B + 3 B per 128) + 1.09B embed/head/norm params x 2 B.
    assert m.weights_bytes / 1e9 == pytest.approx(5.58, rel=0.02)


def test_jamba_style_mamba1_hybrid() -> None:
    # ai21labs/Jamba-v0.1 geometry (no vendored copy): attention every 8th layer from offset 4.
    cfg = {
        "model_type": "jamba",
        "num_hidden_layers": 32,
        "hidden_size": 4096,
        "num_attention_heads": 32,
        "num_key_value_heads": 8,
        "intermediate_size": 14336,
        "vocab_size": 65536,
        "max_position_embeddings": 262144,
        "attn_layer_period": 8,
        "attn_layer_offset": 4,
        "mamba_d_state": 16,
        "mamba_d_conv": 4,
        "mamba_expand": 2,
        "num_experts": 16,
        "num_experts_per_tok": 2,
        "expert_layer_period": 2,
        "expert_layer_offset": 1,
        "torch_dtype": "bfloat16",
    }
    m = model_spec_from_config(cfg, name="jamba", source="local")
    # AI21 publishes 52B total / 12B active parameters for Jamba-v0.1.
    assert m.params_total / 1e9 == pytest.approx(52, rel=0.03)
    assert m.params_active / 1e9 == pytest.approx(12, rel=0.1)
    assert groups(m) == [
        ("mamba", 28, 0, None, 28 * (8192 * 3 + 8192 * 16) * BF16),
        ("full", 4, 2 * 4 * 8 * 128 * BF16, None, 0),
    ]


def test_mla_latent_is_not_divided_by_tp() -> None:
    m = spec("deepseek-ai--DeepSeek-V3")
    assert groups(m, tp=8) == groups(m, tp=1)


@pytest.mark.parametrize(
    ("patch", "field"),
    [
        ({"num_hidden_layers": None}, "num_hidden_layers: missing"),
        ({"num_hidden_layers": "32"}, "num_hidden_layers: must be a positive integer"),
        ({"layer_types": ["full_attention"] * 31 + ["sparse_attention"]}, "layer_types[31]"),
        ({"layer_types": ["full_attention"] * 3}, "layer_types: has 3 entries for 32 layers"),
        ({"vocab_size": None}, "vocab_size: missing"),
        ({"quantization_config": {"quant_method": "hqq"}}, "quantization_config.quant_method"),
        ({"torch_dtype": "float7"}, "torch_dtype"),
    ],
)
def test_malformed_configs_name_the_field(patch: dict[str, object], field: str) -> None:
    cfg = model_config("meta-llama--Llama-3.1-8B-Instruct") | patch
    cfg = {k: v for k, v in cfg.items() if v is not None}
    with pytest.raises(InputError) as err:
        model_spec_from_config(cfg, name="x", source="local")
    assert field in str(err.value)


def test_unknown_hybrid_block_is_an_error_not_dense() -> None:
    cfg = model_config("nvidia--Nemotron-H-56B-Base-8K")
    cfg["hybrid_override_pattern"] = "X" + cfg["hybrid_override_pattern"][1:]
    with pytest.raises(InputError, match=r"hybrid_override_pattern\[0\]"):
        model_spec_from_config(cfg, name="x", source="local")


# GLM-4.5's config.json (zai-org/GLM-4.5, model_type glm4_moe): DeepSeek-style MoE whose first
# three layers keep a dense MLP.
GLM45 = {
    "architectures": ["Glm4MoeForCausalLM"], "model_type": "glm4_moe", "attention_bias": True,
    "head_dim": 128, "hidden_size": 5120, "intermediate_size": 12288, "partial_rotary_factor": 0.5,
    "max_position_embeddings": 131072, "moe_intermediate_size": 1536, "num_attention_heads": 96,
    "n_routed_experts": 160, "n_shared_experts": 1, "num_experts_per_tok": 8,
    "first_k_dense_replace": 3, "num_hidden_layers": 92, "num_key_value_heads": 8,
    "num_nextn_predict_layers": 1, "tie_word_embeddings": False, "torch_dtype": "bfloat16",
    "use_qk_norm": True, "vocab_size": 151552,
}  # fmt: skip


def test_glm4_moe_keeps_its_first_k_layers_dense() -> None:
    """`first_k_dense_replace` means what it means in DeepSeek's configs for every model that
    carries it (transformers Glm4MoeDecoderLayer: experts from layer 3 of GLM-4.5); GLM's
    attention bias covers Q, K and V (o_proj has none), its QK norm is one head_dim each, its
    router keeps DeepSeek's correction bias. Hand-derived to the parameter."""
    m = model_spec_from_config(GLM45, name="glm-4.5", source="test")
    assert m.moe_layers == 89
    attention = 5120 * 12288 * 2 + 2 * 5120 * 1024 + (96 + 16) * 128 + 2 * 128 + 2 * 5120
    moe = 161 * 3 * 5120 * 1536 + 160 * 5120 + 160  # routed + shared experts, router, bias
    dense = 3 * 5120 * 12288
    embeddings = 2 * 151552 * 5120  # untied
    assert m.params_total == 92 * attention + 89 * moe + 3 * dense + 5120 + embeddings
    # the model card's "355B total parameters, 32B active" (the active figure without the
    # embedding tables)
    assert m.params_total == pytest.approx(355e9, rel=0.01)
    assert m.params_active - embeddings == pytest.approx(32e9, rel=0.02)


# Ernie 4.5 MoE as transformers' Ernie4_5_MoeConfig defaults it ("ERNIE-4.5-21B-A3B style"):
# its own keys for the experts (moe_num_experts, moe_k, moe_num_shared_experts) and the layers
# that carry them (moe_layer_start_index / _end_index / _interval).
ERNIE45 = {
    "architectures": ["Ernie4_5_MoeForCausalLM"], "model_type": "ernie4_5_moe",
    "hidden_size": 2560, "intermediate_size": 12288, "num_hidden_layers": 28,
    "num_attention_heads": 20, "num_key_value_heads": 4, "max_position_embeddings": 131072,
    "vocab_size": 103424, "tie_word_embeddings": True, "moe_intermediate_size": 1536, "moe_k": 6,
    "moe_num_experts": 64, "moe_num_shared_experts": 2, "moe_layer_start_index": 1,
    "moe_layer_end_index": -1, "moe_layer_interval": 1, "torch_dtype": "bfloat16",
}  # fmt: skip


def test_ernie45_moe_reads_its_own_expert_keys() -> None:
    """Ernie4_5_MoeDecoderLayer carries experts where (i + 1) % interval == 0 and start <= i <=
    end (-1: the last layer): 27 of 28 layers here, 64 experts, top 6, two shared experts as one
    MLP twice as wide, the router's correction bias. Hand-derived to the parameter; the name's
    21B total / 3B active."""
    m = model_spec_from_config(ERNIE45, name="ernie-4.5-21b-a3b", source="test")
    assert (m.moe_layers, m.num_experts, m.experts_per_token) == (27, 64, 6)
    attention = 2560 * 2560 * 2 + 2 * 2560 * 512 + 2 * 2560
    moe = 64 * 3 * 2560 * 1536 + 3 * 2560 * 3072 + 64 * 2560 + 64
    assert m.params_total == 28 * attention + 27 * moe + 3 * 2560 * 12288 + 103424 * 2560 + 2560
    assert m.params_total == pytest.approx(21.8e9, rel=0.01)
    assert m.params_active == pytest.approx(3.35e9, rel=0.01)
    # the last MoE layer, when the config names one, closes the range
    ends = model_spec_from_config(ERNIE45 | {"moe_layer_end_index": 20}, name="e", source="t")
    assert ends.moe_layers == 20


@pytest.mark.parametrize(
    ("name", "total_b", "active_b"),
    [
        ("Qwen--Qwen3.5-397B-A17B", 397, 17),  # the names' totals and active parameters
        ("Qwen--Qwen3.5-122B-A10B", 122, 10),
        ("Qwen--Qwen3.5-35B-A3B", 35, 3),
        ("google--gemma-4-26B-A4B", 26, 4),  # a dense MLP beside 128 experts in every layer
        ("nvidia--NVIDIA-Nemotron-3-Super-120B-A12B-FP8", 120, 12),  # latent MoE (1,024 wide)
        ("nvidia--NVIDIA-Nemotron-3-Ultra-550B-A55B-FP8", 550, 55),  # layers_block_type only
        ("zai-org--GLM-5", 744, 40),  # Z.ai: 744B parameters, 40B active
    ],
)
def test_2026_moe_totals_match_their_names(name: str, total_b: float, active_b: float) -> None:
    m = spec(name)
    assert m.params_total / 1e9 == pytest.approx(total_b, rel=0.02)
    assert m.params_active / 1e9 == pytest.approx(active_b, rel=0.35)  # embeddings counted


def test_nemotron_h_layer_list_stands_for_the_pattern_and_the_layer_count() -> None:
    # transformers 5.3 NemotronHConfig: layers_block_type replaces hybrid_override_pattern and
    # num_hidden_layers (its length); mamba M, moe E, attention *
    cfg = model_config("nvidia--NVIDIA-Nemotron-3-Super-120B-A12B-FP8")
    letters = {"M": "mamba", "E": "moe", "*": "attention"}
    listed = {k: v for k, v in cfg.items() if k not in ("hybrid_override_pattern",)}
    listed["layers_block_type"] = [letters[ch] for ch in cfg["hybrid_override_pattern"]]
    del listed["num_hidden_layers"]
    a = model_spec_from_config(cfg, name="pattern", source="local")
    b = model_spec_from_config(listed, name="listed", source="local")
    assert (a.params_total, a.weights_bytes, a.kv_groups) == (
        b.params_total,
        b.weights_bytes,
        b.kv_groups,
    )
    with pytest.raises(InputError, match=r"layers_block_type\[0\]"):
        model_spec_from_config(
            listed | {"layers_block_type": ["conv", *listed["layers_block_type"][1:]]},
            name="bad",
            source="local",
        )


# Llama 3.1 8B's linears per layer: attention 4096 x (4096 + 2 x 1024 + 4096), MLP 3 x 4096 x 14336
LLAMA8_ATTENTION = 4096 * (4096 + 2 * 1024 + 4096)
LLAMA8_MLP = 3 * 4096 * 14336


@pytest.mark.parametrize(
    ("exclude", "kept_in_bf16"),
    [
        ([], 0),
        (["lm_head"], 0),  # not a decoder layer's
        (["self_attn"], 32 * LLAMA8_ATTENTION),  # a part of every layer's names
        (["model.layers.0*"], LLAMA8_ATTENTION + LLAMA8_MLP),  # ModelOpt wildcard: layer 0
        (
            ["model.layers.1.*", "model.layers.2.self_attn*"],
            LLAMA8_ATTENTION + LLAMA8_MLP + LLAMA8_ATTENTION,
        ),
        ([r"re:.*mlp\.(gate|up|down)_proj.*"], 32 * LLAMA8_MLP),  # compressed-tensors regex
        (["model.layers.0.mlp.gate"], 0),  # a router's name is not its gate_proj's
        (["model.layers.*.self_attn"], 32 * LLAMA8_ATTENTION),  # a wildcard module: its children
        (["model.layers.1"], LLAMA8_ATTENTION + LLAMA8_MLP),  # not layers 10-19
    ],
)
def test_excluded_modules_stay_in_16_bits(exclude: list[str], kept_in_bf16: int) -> None:
    # ModelOpt FP8: one byte a quantized weight; an excluded one keeps its two bytes
    base = model_config("meta-llama--Llama-3.1-8B-Instruct")
    q = {"quant_method": "modelopt", "quant_algo": "FP8"}
    plain = model_spec_from_config(base | {"quantization_config": q}, name="a", source="local")
    cfg = base | {"quantization_config": q | {"exclude_modules": exclude}}
    excluded = model_spec_from_config(cfg, name="b", source="local")
    assert excluded.weights_bytes - plain.weights_bytes == kept_in_bf16


def test_modelopt_legacy_hf_quant_config_is_read_beside_config_json() -> None:
    # NVIDIA's FP8 Llama 3.1 70B keeps its quantization in hf_quant_config.json (ModelOpt
    # 0.23): vLLM reads it there; every linear but lm_head is one byte a weight
    from planner.sources.models import resolve_model

    folder = MODELS / "nvidia--Llama-3.1-70B-Instruct-FP8"
    assert "quantization_config" not in model_config(folder.name)
    fp8 = resolve_model(None, str(folder))
    bf16 = spec(folder.name)
    assert fp8.weight_dtype == "fp8" and bf16.weight_dtype == "bf16"
    linear = bf16.quantizable_params
    assert fp8.weights_bytes == linear + 2 * (bf16.params_total - linear)


def test_modelopt_nested_form_and_unknown_algorithms() -> None:
    base = model_config("meta-llama--Llama-3.1-8B-Instruct")
    nested = {"quantization": {"quant_algo": "NVFP4", "group_size": 16}}
    assert (
        model_spec_from_config(
            base | {"quantization_config": nested}, name="n", source="local"
        ).weight_dtype
        == "nvfp4"
    )
    unknown = {"quant_method": "modelopt", "quant_algo": "W4A8_AWQ"}
    with pytest.raises(InputError, match=r"quant_algo: ModelOpt's 'W4A8_AWQ' is not sized"):
        model_spec_from_config(base | {"quantization_config": unknown}, name="u", source="local")
    # MIXED_PRECISION is sized from its per-layer map (test_a_mixed_precision_export_...): one
    # without the map is refused by that field
    mixed = {"quant_method": "modelopt", "quant_algo": "MIXED_PRECISION"}
    with pytest.raises(InputError, match=r"quantized_layers: MIXED_PRECISION needs a non-empty"):
        model_spec_from_config(base | {"quantization_config": mixed}, name="m", source="local")


def test_mimo_v2s_layers_keep_their_own_heads_and_v_width() -> None:
    # MiMo-V2-Flash (vLLM 0.34 mimo_v2.py): hybrid_layer_pattern 1 = a sliding layer of its
    # own heads (64 Q, 8 KV, K 192, V 128), 0 = a full one (64 Q, 4 KV, K 192, V 128); the first
    # layer's MLP dense (moe_layer_freq 0), the others 256 experts of 2,048, top 8
    m = spec("XiaomiMiMo--MiMo-V2-Flash")
    assert m.params_total / 1e9 == pytest.approx(309, rel=0.02)  # Xiaomi: 309B total
    assert m.params_active / 1e9 == pytest.approx(15, rel=0.05)  # 15B active
    assert m.moe_layers == 47 and m.expert_params == 47 * 256 * 3 * 4096 * 2048
    # the full layers' attention: Q 4096 x 64 x 192, K 4096 x 4 x 192, V 4096 x 4 x 128,
    # O 64 x 128 x 4096; the sliding layers' with 8 KV heads
    full = 4096 * 64 * 192 + 4096 * 4 * (192 + 128) + 64 * 128 * 4096
    sliding = 4096 * 64 * 192 + 4096 * 8 * (192 + 128) + 64 * 128 * 4096
    assert m.attention_params == 9 * full + 39 * sliding
    cfg = model_config("XiaomiMiMo--MiMo-V2-Flash")
    with pytest.raises(InputError, match="hybrid_layer_pattern"):
        model_spec_from_config(cfg | {"hybrid_layer_pattern": [0, 1]}, name="mimo", source="local")


def test_minimax_m3s_block_sparse_attention_is_refused_by_name() -> None:
    cfg = model_config("MiniMaxAI--MiniMax-M2.7") | {
        "sparse_attention_config": {"use_sparse_attention": True, "sparse_topk_blocks": 16}
    }
    with pytest.raises(InputError, match=r"sparse_attention_config.*not modelled"):
        model_spec_from_config(cfg, name="m3", source="local")


def test_kimi_linear_attention_is_refused_by_name() -> None:
    cfg = model_config("moonshotai--Kimi-K2-Instruct") | {
        "model_type": "kimi_linear",
        "linear_attn_config": {"full_attn_layers": [4, 8], "kda_layers": [1, 2, 3]},
    }
    with pytest.raises(InputError, match=r"linear_attn_config.*not modelled"):
        model_spec_from_config(cfg, name="kimi", source="local")


def test_deepseek_v4_compressed_attention_is_refused_by_name() -> None:
    cfg = model_config("deepseek-ai--DeepSeek-V3") | {
        "model_type": "deepseek_v4",
        "compress_ratios": [0, 4, 128],
    }
    with pytest.raises(InputError, match=r"compress_ratios.*not modelled"):
        model_spec_from_config(cfg, name="v4", source="local")


def test_dsa_indexer_follows_index_topk_freq() -> None:
    # vLLM 0.34 deepseek_v2.py: with index_topk_freq 4 from index_skip_topk_offset 3, layers
    # 0-2 and then every 4th (6, 10, ...) build an indexer; the others reuse its picks
    cfg = model_config("zai-org--GLM-5") | {"index_topk_freq": 4, "index_skip_topk_offset": 3}
    m = model_spec_from_config(cfg, name="glm", source="local")
    with_indexer = 3 + len(range(6, 78, 4))
    assert sorted((g.num_layers, g.indexer_bytes_per_token) for g in m.kv_groups) == sorted(
        [(with_indexer, 128 + 4), (78 - with_indexer, 0)]
    )


def test_routed_expert_params_are_the_configs_own_matrices() -> None:
    # Nemotron 3 Super: 40 MoE blocks of 512 non-gated (relu2: up and down) experts, each
    # 1,024 (moe_latent_size) x 2,688 wide; the gated form at the hidden size (3 x 4,096 x
    # 2,688) would count 6x that, more than the whole model
    super_ = spec("nvidia--NVIDIA-Nemotron-3-Super-120B-A12B-FP8")
    assert super_.expert_params == 40 * 512 * 2 * 1024 * 2688
    assert super_.expert_params < super_.params_total
    # a gated MoE keeps gate, up and down at the hidden size: DeepSeek-V3's 58 MoE layers
    deepseek = spec("deepseek-ai--DeepSeek-V3")
    assert deepseek.expert_params == 58 * 256 * 3 * 7168 * 2048


def test_gemma4s_nvfp4_export_quantizes_its_experts_alone() -> None:
    # NVIDIA's Gemma 4 26B-A4B NVFP4 ignores every layer's self_attn* and mlp* (the dense MLP
    # beside the experts): only the routed experts, which Gemma 4 keeps at the layer's
    # "experts", are NVFP4 (4 bits and an fp8 scale per 16); the rest stays bf16
    nvfp4 = spec("nvidia--Gemma-4-26B-A4B-NVFP4")
    experts = nvfp4.expert_params
    assert nvfp4.weight_dtype == "nvfp4" and experts == 30 * 128 * 3 * 2816 * 704
    expected = experts // 2 + -(-experts // 16) + 2 * (nvfp4.params_total - experts)
    assert nvfp4.weights_bytes == expected


def _fp4(params: int) -> int:
    """NVFP4 (and its weight-only W4A16 form): half a byte a weight, one fp8 scale per 16."""
    return params // 2 + params // 16


def test_a_mixed_precision_export_is_sized_block_by_block() -> None:
    """NVIDIA's Qwen3.6 NVFP4 exports are ModelOpt MIXED_PRECISION: quantized_layers gives the
    attention and Gated DeltaNet projections FP8 (one byte a weight) and the MLPs, experts and
    lm_head W4A16_NVFP4. Against the same config in bf16, the weights shrink by exactly those
    blocks' savings, hand-derived from the configs' dimensions."""
    for name, saved, experts, kv in (
        (
            # 64 layers, hidden 5,120: 16 full-attention layers (q_proj 24 x 256 x 2 with its
            # output gate, k / v 4 x 256, o 6,144 wide) and 48 DeltaNet ones (qkv 2 x 16 x 128 +
            # 48 x 128, z 48 x 128, b / a 2 x 48, out 6,144 wide); MLP 3 x 17,408; vocab 248,320
            "nvidia--Qwen3.6-27B-NVFP4",
            (64 * 3 * 5120 * 17408) * 2
            - _fp4(64 * 3 * 5120 * 17408)
            + 16 * (5120 * 12288 + 2 * 5120 * 1024 + 6144 * 5120)
            + 48 * (5120 * 10240 + 5120 * 6144 + 5120 * 96 + 6144 * 5120)
            + 248320 * 5120 * 2
            - _fp4(248320 * 5120),
            None,
            "modelopt",  # its config's kv_cache_scheme: 8-bit floats
        ),
        (
            # 40 layers, hidden 2,048: 256 experts and a shared one, 512 wide; 10 full-attention
            # layers (16 heads x 256, gated; 2 KV heads), 30 DeltaNet (16 key / 32 value heads)
            "nvidia--Qwen3.6-35B-A3B-NVFP4",
            (40 * 257 * 3 * 2048 * 512) * 2
            - _fp4(40 * 256 * 3 * 2048 * 512)
            - _fp4(40 * 3 * 2048 * 512)
            + 10 * (2048 * 8192 + 2 * 2048 * 512 + 4096 * 2048)
            + 30 * (2048 * 8192 + 2048 * 4096 + 2048 * 64 + 4096 * 2048)
            + 248320 * 2048 * 2
            - _fp4(248320 * 2048),
            0.5625,
            # its config.json names no KV algorithm (only its hf_quant_config.json does, which
            # the engines read where config.json has no quantization_config)
            None,
        ),
    ):
        mixed = spec(name)
        raw = model_config(name)
        raw.pop("quantization_config")
        plain = model_spec_from_config(raw, name=name, source="test")
        assert plain.weights_bytes - mixed.weights_bytes == saved
        assert mixed.weight_dtype == MODELOPT_MIXED
        assert mixed.mixed_precision_algos == ("FP8", "W4A16_NVFP4")
        assert mixed.expert_bytes_per_param == experts
        assert mixed.plain_linear_params == 0  # every block it lists, none left in 16 bits
        assert mixed.fp8_kv_declared_by == kv
        assert "MIXED_PRECISION quantized_layers names (FP8, W4A16_NVFP4" in mixed.weights_basis


def test_a_mixed_precision_nemotron_h_is_read_by_its_mixer_names() -> None:
    """Nemotron-H names every block "mixer" (Nemotron-3.5's MIXED_PRECISION export): a Mamba
    layer's in_proj / out_proj are its mixer, "mixer.experts.N" its routed experts (a block
    named by any of them), "mixer.shared_experts" its shared one; an attention layer it does
    not list stays in 16 bits. On Nemotron-3-Nano's layers (hidden 2,688; Mamba in_proj 2 x
    4,096 + 2 x 8 x 128 + 64 wide, out_proj 4,096; 128 relu2 experts of 1,856, a shared one of
    3,712; vocab 131,072), hand-derived."""
    raw = model_config("nvidia--NVIDIA-Nemotron-3-Nano-30B-A3B-BF16")
    pattern = raw["hybrid_override_pattern"]
    fp8, fp4 = {"quant_algo": "FP8"}, {"quant_algo": "W4A16_NVFP4", "group_size": 16}
    listed: dict[str, dict[str, object]] = {"lm_head": fp4}
    for i, kind in enumerate(pattern):
        if kind == "M":
            listed |= {f"backbone.layers.{i}.mixer.{p}": fp8 for p in ("in_proj", "out_proj")}
        elif kind == "E":
            listed |= {
                f"backbone.layers.{i}.mixer.experts.0.{p}": fp4 for p in ("up_proj", "down_proj")
            }
            listed |= {
                f"backbone.layers.{i}.mixer.shared_experts.{p}": fp8
                for p in ("up_proj", "down_proj")
            }
    quant = {
        "quant_method": "modelopt",
        "quant_algo": "MIXED_PRECISION",
        "quantized_layers": listed,
    }
    mixed = model_spec_from_config(raw | {"quantization_config": quant}, name="m", source="t")
    plain = model_spec_from_config(raw, name="p", source="t")
    mamba, moe, attention = pattern.count("M"), pattern.count("E"), pattern.count("*")
    routed = moe * 128 * 2 * 2688 * 1856
    head = 131072 * 2688
    saved = (
        mamba * 2688 * (2 * 4096 + 2 * 8 * 128 + 64 + 4096)  # FP8: a byte of two saved
        + 2 * routed
        - _fp4(routed)
        + moe * 2 * 2688 * 3712  # the shared experts in FP8
        + 2 * head
        - _fp4(head)
    )
    assert plain.weights_bytes - mixed.weights_bytes == saved
    # the attention layers' projections, unlisted, stay in 16 bits
    assert mixed.plain_linear_params == attention * (2 * 2688 * 4096 + 2 * 2688 * 256)
    assert mixed.expert_bytes_per_param == 0.5625


def test_every_mixed_precision_algorithm_sized_has_a_first_release_in_each_engine() -> None:
    # an algorithm the planner sizes is one each engine's table gives a release for, so the
    # release check never meets one it does not know
    from planner.core.engines.common import MIXED_PRECISION_SINCE
    from planner.core.hf_config import MIXED_ALGOS

    for engine, since in MIXED_PRECISION_SINCE.items():
        assert set(since) == MIXED_ALGOS, engine


def test_a_mixed_precision_map_the_planner_cannot_size_is_refused_by_its_field() -> None:
    raw = model_config("nvidia--Qwen3.6-27B-NVFP4")
    layers = raw["quantization_config"]["quantized_layers"]
    odd = raw | {
        "quantization_config": raw["quantization_config"]
        | {
            "quantized_layers": {
                **layers,
                "model.language_model.layers.0.linear_attn.out_proj": {"quant_algo": "INT8"},
            }
        }
    }
    with pytest.raises(InputError, match=r"out_proj\.quant_algo: 'INT8' is not sized"):
        model_spec_from_config(odd, name="odd", source="test")
    split = raw | {
        "quantization_config": raw["quantization_config"]
        | {
            "quantized_layers": {
                **layers,
                "model.language_model.layers.0.mlp.down_proj": {"quant_algo": "FP8"},
            }
        }
    }
    with pytest.raises(InputError, match="layer 0's mlp mixes W4A16_NVFP4 and FP8"):
        model_spec_from_config(split, name="split", source="test")
    # an MTP stack's layer 0 is not the decoder's: its entry sizes nothing there
    mtp = raw | {
        "quantization_config": raw["quantization_config"]
        | {"quantized_layers": {**layers, "mtp.layers.0.mlp.down_proj": {"quant_algo": "FP8"}}}
    }
    same = model_spec_from_config(mtp, name="mtp", source="test")
    assert same.weights_bytes == spec("nvidia--Qwen3.6-27B-NVFP4").weights_bytes
    empty = raw | {"quantization_config": raw["quantization_config"] | {"quantized_layers": {}}}
    with pytest.raises(InputError, match="non-empty quantized_layers"):
        model_spec_from_config(empty, name="empty", source="test")


def test_qwen35_attention_counts_its_output_gate() -> None:
    """Qwen3.5's text models reuse Qwen3-Next's attention (vLLM qwen3_5.py): q_proj emits an
    output gate beside the queries while attn_output_gate holds (16 full-attention layers of
    Qwen3.5-27B: 24 heads x 256 x 5,120 more), and q_norm / k_norm."""
    raw = model_config("Qwen--Qwen3.5-27B")
    gated = model_spec_from_config(raw, name="g", source="test")
    text = raw["text_config"] | {"attn_output_gate": False}
    plain = model_spec_from_config(raw | {"text_config": text}, name="p", source="test")
    assert gated.params_total - plain.params_total == 16 * 24 * 256 * 5120
