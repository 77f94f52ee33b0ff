"""Turn a Hugging Face `config.json` (already parsed) into a ModelSpec.

Pure: the caller reads the file. Covers dense MHA/GQA/MQA, MoE, MLA, sliding-window and
chunked-local layers, Mamba2 and Gated-DeltaNet hybrids, per-layer NAS blocks, nested
`text_config` wrappers and `quantization_config`. A config we cannot size raises InputError
naming the field; nothing unknown is silently treated as dense.
"""

from __future__ import annotations

import fnmatch
import math
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal, NamedTuple, TypeVar

from pydantic import ValidationError

from planner.core.specs import (
    INT8_W8A8_LABEL,
    MODELOPT_MIXED,
    MODELOPT_NVFP4,
    OPENAI_MXFP4,
    QUARK_MXFP4_FP8_INPUTS,
    W8A8_INT8_METHOD,
    KvKind,
    KvLayerGroup,
    ModelSpec,
)
from planner.errors import InputError
from planner.units import DTYPE_BITS, TORCH_DTYPE_ALIASES, ceil_div

Config = Mapping[str, Any]
T = TypeVar("T")

# Defaults transformers fills in for keys a config may omit (transformers Gemma3TextConfig;
# the vendored gemma-3-4b-it text_config carries only five keys).
MODEL_TYPE_DEFAULTS: dict[str, dict[str, Any]] = {
    "gemma3_text": {
        "vocab_size": 262_208,
        "num_attention_heads": 8,
        "num_key_value_heads": 4,
        "head_dim": 256,
        "max_position_embeddings": 131_072,
        "sliding_window": 4096,
        "sliding_window_pattern": 6,
        "tie_word_embeddings": True,
    },
    "gemma2": {"tie_word_embeddings": True},
}

# Model types whose MLP is not gated (two matrices, not three).
NON_GATED_MLP_TYPES = {"nemotron", "nemotron_h", "gpt2", "gpt_bigcode", "starcoder2", "phi", "opt"}
# Model types whose q/k/v projections carry a bias without saying so in the config.
QKV_BIAS_TYPES = {"qwen2", "qwen2_moe", "qwen2_5_vl", "qwen2_vl"}
# Hybrids whose Mamba layers also carry an MLP / MoE block (Nemotron-H puts them apart).
MAMBA_LAYERS_WITH_FFN = {"jamba", "granitemoehybrid"}
# Layer-type strings seen in `layer_types` lists -> our kinds.
LAYER_TYPE_KINDS: dict[str, KvKind] = {
    "full_attention": KvKind.FULL,
    "attention": KvKind.FULL,
    "sliding_attention": KvKind.SLIDING,
    "chunked_attention": KvKind.CHUNKED,
    "linear_attention": KvKind.LINEAR,
    "mamba": KvKind.MAMBA,
    "mamba2": KvKind.MAMBA,
    # GLM-5.2's every layer in NVIDIA's export: full attention through DeepSeek's sparse (MLA +
    # indexer) module, which vLLM builds for every layer of the model (deepseek_v2.py, 0.34.0)
    "deepseek_sparse_attention": KvKind.FULL,
}
# Bounds on what a config.json may say, each far above any real model, low enough that a typo
# (1e9 layers) is refused instead of exhausting memory: the deepest real decoders have ~128
# layers; the widest figure in the configs we ship is a 10,485,760-token context (Llama 4 Scout).
MAX_CONFIG_LAYERS = 4096
MAX_CONFIG_HEADS = 65_536
MAX_CONFIG_SIZE = 2**31
# Bit widths a quantised checkpoint can store weights in (GPTQ/AWQ 2-8, compressed-tensors to 16).
QUANT_BITS = range(1, 17)
# nemotron-nas `ffn_mult`: real blocks use 0.5-5.25; anything above 64 is not an FFN width.
MAX_FFN_MULT = 64
# DeepSeek-V3.2 indexer keys: fp8 (1 byte) with an fp32 scale per 128-value block.
INDEXER_KEY_BYTES = 1
INDEXER_SCALE_BLOCK = 128
# Block-scaled FP8 checkpoints store one fp32 scale per 128 x 128 tile (DeepSeek-V3 format).
FP8_SCALE_BYTES = 4
# MXFP4 (OCP microscaling): 4-bit values plus one 8-bit shared scale per 32 values.
MXFP4_BLOCK = 32
# NVFP4 (NVIDIA ModelOpt checkpoints, quant_algo "NVFP4"): 4-bit values plus one fp8 (e4m3)
# scale per 16 values (vLLM modelopt.py ModelOptNvFp4Config: group_size 16); the per-tensor
# fp32 global scales are a few bytes per matrix and not counted.
NVFP4_BLOCK = 16
# GPTQ/AWQ: per group and output column one fp16 scale (2 B) plus a packed zero point.
GPTQ_SCALE_BYTES = 2
# bitsandbytes NF4: one fp32 absmax per 64-value block (without double quantisation).
BNB_4BIT_BLOCK = 64


@dataclass
class _Layer:
    """One decoder layer as far as capacity cares: its cache kind and its parameters."""

    kind: KvKind | None  # None: no cache (attention-free / no-op attention)
    num_kv_heads: int = 0
    head_dim: int = 0
    head_dim_v: int = 0  # V's width where it is not K's (0: head_dim)
    window: int | None = None
    state_bytes: int = 0
    state_heads: int = 1
    latent_dim: int = 0
    rope_dim: int = 0  # MLA: the RoPE part of latent_dim
    indexer_bytes: int = 0  # DeepSeek-V3.2 indexer key cache per token
    attention_params: int = 0  # the attention matrices inside linear_params
    mixer_params: int = 0  # a linear-attention or SSM mixer's matrices inside linear_params
    routed: bool = False  # the FFN is routed experts
    shared_params: int = 0  # matrices every token takes beside routed experts (shared experts)
    expert_params: int = 0  # the routed experts' matrices
    linear_params: int = 0  # quantisable matrices (attention, MLP, experts, SSM projections)
    other_params: int = 0  # norms, biases, routers, SSM scalars
    active_linear_params: int = 0
    quantized_linear_params: int = 0  # the part the checkpoint's quantisation covers
    attention_outputs: int = 0  # Q, K, V output features (column-parallel; O writes hidden)
    mlp_outputs: int = 0  # a dense MLP's gate / up output features (down writes hidden)
    dense_mlp_params: int = 0  # a dense (not routed) MLP's matrices inside linear_params
    quantized_outputs: tuple[int, int] = (0, 0)  # (column, row) features of quantized ones
    quantized_widest: tuple[int, int] = (0, 0)  # the widest single quantized (column, row) one


def _get(cfg: Config, *names: str, default: Any = None) -> Any:
    for n in names:
        if n in cfg and cfg[n] is not None:
            return cfg[n]
    return default


def _shown(value: Any) -> str:
    """A config value for an error line: short, whatever its size."""
    text = repr(value) if not isinstance(value, int) or abs(value) < 10**30 else "a huge integer"
    return text if len(text) <= 60 else text[:57] + "..."


def _size(value: Any, field: str, limit: int = MAX_CONFIG_SIZE, positive: bool = False) -> int:
    """A config size or count: a whole, finite number in [0 or 1, limit]."""
    kind = "a positive integer" if positive else "a non-negative integer"
    whole = isinstance(value, int) or (
        isinstance(value, float) and math.isfinite(value) and value == int(value)
    )
    if isinstance(value, bool) or not whole:
        raise InputError(field, f"must be {kind}, got {_shown(value)}")
    number = int(value)
    if number < (1 if positive else 0) or number > limit:
        raise InputError(field, f"must be {kind} up to {limit:,}, got {_shown(value)}")
    return number


def _require_int(cfg: Config, *names: str, limit: int = MAX_CONFIG_SIZE) -> int:
    value = _get(cfg, *names)
    if value is None:
        raise InputError(names[0], "missing from config.json")
    return _size(value, names[0], limit, positive=True)


def _opt_int(cfg: Config, *names: str, default: int | None = None) -> int | None:
    value = _get(cfg, *names)
    if value is None:
        return default
    return _size(value, names[0])


def _opt_positive(cfg: Config, *names: str, default: int) -> int:
    """A size that may be left out (then `default`) but is never 0 when given."""
    value = _get(cfg, *names)
    return default if value is None else _size(value, names[0], positive=True)


def _list(value: Any, field: str) -> list[Any]:
    """A config list (absent = empty)."""
    if value is None:
        return []
    if not isinstance(value, list):
        raise InputError(field, f"must be a list, got {_shown(value)}")
    return value


def _mapping(value: Any, field: str) -> Mapping[str, Any]:
    """A config object (absent = empty)."""
    if value is None:
        return {}
    if not isinstance(value, Mapping):
        raise InputError(field, f"must be an object, got {_shown(value)}")
    return value


def text_config(cfg: Config) -> dict[str, Any]:
    """The language model's config: nested `text_config`/`llm_config` merged over defaults."""
    inner = _get(cfg, "text_config", "llm_config", "language_config")
    if inner is not None and not isinstance(inner, Mapping):
        raise InputError("text_config", f"must be an object, got {_shown(inner)}")
    if isinstance(inner, Mapping):
        merged: dict[str, Any] = dict(MODEL_TYPE_DEFAULTS.get(str(inner.get("model_type")), {}))
        for key in ("torch_dtype", "dtype", "quantization_config", "tie_word_embeddings"):
            if key in cfg and key not in inner:
                merged[key] = cfg[key]
        merged.update(inner)
        return merged
    merged = dict(MODEL_TYPE_DEFAULTS.get(str(cfg.get("model_type")), {}))
    merged.update(cfg)
    return merged


# Nemotron-H's block letters by transformers' names for them (configuration_nemotron_h.py,
# 5.3.0: NemotronHConfig._list_to_pattern). Its newer configs give the list and no layer count,
# which is the list's length there.
NEMOTRON_H_BLOCKS = {"mamba": "M", "moe": "E", "attention": "*", "mlp": "-"}


def _each_known(values: list[Any], table: Mapping[str, T], field: str, what: str) -> list[T]:
    """Each entry of a config list read through `table`; an entry it lacks is an InputError
    naming its index and the known ones."""
    out = []
    for i, value in enumerate(values):
        if not isinstance(value, str) or value not in table:
            raise InputError(
                f"{field}[{i}]",
                f"unknown {what} {_shown(value)}; known: {', '.join(sorted(table))}",
            )
        out.append(table[value])
    return out


def nemotron_h_pattern(cfg: dict[str, Any]) -> dict[str, Any]:
    """A Nemotron-H config that lists layers_block_type, given the hybrid_override_pattern and
    num_hidden_layers the engines read from it (vLLM 0.34.0 nemotron_h.py reads the pattern)."""
    blocks = cfg.get("layers_block_type")
    if cfg.get("model_type") != "nemotron_h" or not isinstance(blocks, list):
        return cfg
    letters = _each_known(blocks, NEMOTRON_H_BLOCKS, "layers_block_type", "block")
    out = {k: v for k, v in cfg.items() if k != "layers_block_type"}
    out["hybrid_override_pattern"] = "".join(letters)
    out["num_hidden_layers"] = len(letters)
    return out


def native_dtype(cfg: Config) -> str:
    """The dtype an engine loads unquantised weights in (fp32 checkpoints load as fp16)."""
    raw = _get(cfg, "torch_dtype", "dtype", default="float16")
    name = TORCH_DTYPE_ALIASES.get(str(raw).lower(), str(raw).lower())
    if name not in DTYPE_BITS:
        raise InputError("torch_dtype", f"unknown dtype {raw!r}")
    # vLLM/SGLang `--dtype auto`: FP16 for FP32/FP16 checkpoints, BF16 for BF16 ones.
    return "fp16" if name == "fp32" else name


def _mlp_params(cfg: Config, hidden: int, inter: int) -> int:
    act = str(_get(cfg, "mlp_hidden_act", "hidden_act", default="silu"))
    gated = str(cfg.get("model_type")) not in NON_GATED_MLP_TYPES and act != "relu2"
    return (3 if gated else 2) * hidden * inter


# Qwen3-Next's attention, which Qwen3.5's text models reuse (vLLM 0.28.0 qwen3_5.py builds
# Qwen3NextAttention): q_proj emits an output gate beside the queries unless the config's
# attn_output_gate says false (its default true: qwen3_next.py), and q_norm / k_norm.
GATED_ATTENTION_TYPES = ("qwen3_next", "qwen3_5_text", "qwen3_5_moe_text")


def _attention_params(
    cfg: Config, hidden: int, heads: int, kv: int, head_dim: int, v_dim: int | None = None
) -> tuple[int, int]:
    """(matrix params, bias/norm params) of one standard attention block (`v_dim`: V's and the
    output projection's head width where it is not Q's and K's)."""
    v = v_dim or head_dim
    # gated output: q_proj emits the gate beside the queries (2x)
    gated = cfg.get("model_type") in GATED_ATTENTION_TYPES and cfg.get("attn_output_gate", True)
    q_mult = 2 if gated else 1
    mats = hidden * heads * head_dim * q_mult + hidden * kv * (head_dim + v) + heads * v * hidden
    other = 0
    if cfg.get("attention_bias") or cfg.get("model_type") in QKV_BIAS_TYPES:
        other += (heads + kv) * head_dim + kv * v
        # GLM-4 MoE's attention_bias covers Q, K, V only (modeling_glm4_moe.py: o_proj bias=False)
        if cfg.get("attention_bias") and cfg.get("model_type") != "glm4_moe":
            other += hidden
    if cfg.get("model_type") == "gpt_oss":
        other += heads  # attention sinks
    qk_norm = cfg.get("model_type") in ("qwen3", "qwen3_moe", "gemma3_text", *GATED_ATTENTION_TYPES)
    if qk_norm or (cfg.get("model_type") == "glm4_moe" and cfg.get("use_qk_norm")):
        other += 2 * head_dim  # q_norm, k_norm
    return mats, other


def _mla_params(cfg: Config, hidden: int, heads: int) -> tuple[int, int, int, int]:
    """(matrix params, other params, latent dim, its RoPE part) of one MLA block
    (DeepSeek-V2/V3)."""
    kv_rank = _require_int(cfg, "kv_lora_rank")
    rope = _require_int(cfg, "qk_rope_head_dim")
    nope = _require_int(cfg, "qk_nope_head_dim")
    v_dim = _require_int(cfg, "v_head_dim")
    q_rank = _opt_int(cfg, "q_lora_rank")
    if q_rank:
        q = hidden * q_rank + q_rank * heads * (nope + rope)
        other = q_rank  # q_a_layernorm
    else:
        q = hidden * heads * (nope + rope)
        other = 0
    mats = q + hidden * (kv_rank + rope) + kv_rank * heads * (nope + v_dim) + heads * v_dim * hidden
    other += kv_rank  # kv_a_layernorm
    if cfg.get("model_type") == "deepseek_v32":
        # Lightning indexer: wq_b, wk, weights_proj and its k_norm (DeepSeek-V3.2 modeling code).
        ih, idim = _require_int(cfg, "index_n_heads"), _require_int(cfg, "index_head_dim")
        mats += (q_rank or hidden) * ih * idim + hidden * idim + hidden * ih
        other += 2 * idim
    return mats, other, kv_rank + rope, rope


def _indexer_bytes(cfg: Config, layer: int) -> int:
    """A DeepSeek-Sparse-Attention indexer's key cache per token in one layer: index_head_dim
    in fp8 with one fp32 scale per 128 values (DeepSeek-V3.2-Exp inference/model.py: k_cache
    float8_e4m3fn, k_scale_cache float32 over head_dim // block_size, block_size 128). vLLM
    builds an indexer where the config names index_topk (DeepSeek-V3.2, GLM-5's glm_moe_dsa)
    and, with index_topk_freq > 1, in one layer of every freq from index_skip_topk_offset - 1
    (or where index_topk_pattern does not say "S"), the others reusing its picks (0.34.0
    deepseek_v2.py DeepseekV2MLAAttention: is_v32, _skip_topk)."""
    if "index_topk" not in cfg:
        return 0
    pattern = cfg.get("index_topk_pattern")
    if isinstance(pattern, str | list) and 0 <= layer < len(pattern):
        skipped = pattern[layer] == "S"
    else:
        freq = _opt_positive(cfg, "index_topk_freq", default=1)
        offset = _opt_int(cfg, "index_skip_topk_offset", default=2) or 0
        skipped = max(layer - offset + 1, 0) % freq != 0
    if skipped:
        return 0
    dim = _require_int(cfg, "index_head_dim")
    return dim * INDEXER_KEY_BYTES + ceil_div(dim, INDEXER_SCALE_BLOCK) * FP8_SCALE_BYTES


def _mamba2_layer(cfg: Config, hidden: int, state_bits: int, conv_bits: int) -> _Layer:
    heads = _require_int(cfg, "mamba_num_heads", "mamba_n_heads")
    head_dim = _require_int(cfg, "mamba_head_dim", "mamba_d_head")
    d_state = _require_int(cfg, "ssm_state_size", "mamba_d_state")
    groups = _opt_positive(cfg, "n_groups", "mamba_n_groups", default=1)
    kernel = _opt_positive(cfg, "conv_kernel", "mamba_d_conv", default=4)
    d_inner = heads * head_dim
    conv_dim = d_inner + 2 * groups * d_state
    conv_state = conv_dim * (kernel - 1)
    ssm_state = heads * head_dim * d_state
    state = ceil_div(conv_state * conv_bits, 8) + ceil_div(ssm_state * state_bits, 8)
    mats = hidden * (2 * d_inner + 2 * groups * d_state + heads) + d_inner * hidden
    other = conv_dim * kernel + conv_dim + 3 * heads + d_inner + hidden
    return _Layer(
        kind=KvKind.MAMBA,
        state_bytes=state,
        state_heads=heads,
        mixer_params=mats,
        linear_params=mats,
        other_params=other,
        active_linear_params=mats,
    )


def _mamba1_layer(cfg: Config, hidden: int, bits: int) -> _Layer:
    """Jamba-style Mamba(1) mixer."""
    # Defaults of transformers' JambaConfig; dt_rank "auto" = ceil(hidden / 16) (Mamba paper).
    d_state = _opt_positive(cfg, "mamba_d_state", default=16)
    kernel = _opt_positive(cfg, "mamba_d_conv", default=4)
    expand = _opt_positive(cfg, "mamba_expand", default=2)
    dt_rank = _opt_int(cfg, "mamba_dt_rank") or ceil_div(hidden, 16)
    d_inner = expand * hidden
    state = ceil_div((d_inner * (kernel - 1) + d_inner * d_state) * bits, 8)
    mats = hidden * 2 * d_inner + d_inner * (dt_rank + 2 * d_state) + dt_rank * d_inner
    mats += d_inner * hidden
    other = d_inner * kernel + d_inner + d_inner * d_state + 2 * d_inner + hidden
    return _Layer(
        kind=KvKind.MAMBA,
        state_bytes=state,
        state_heads=d_inner,
        mixer_params=mats,
        linear_params=mats,
        other_params=other,
        active_linear_params=mats,
    )


def _gated_deltanet_layer(cfg: Config, hidden: int, bits: int) -> _Layer:
    """Qwen3-Next linear-attention (Gated DeltaNet) mixer."""
    k_heads = _require_int(cfg, "linear_num_key_heads")
    v_heads = _require_int(cfg, "linear_num_value_heads")
    k_dim = _require_int(cfg, "linear_key_head_dim")
    v_dim = _require_int(cfg, "linear_value_head_dim")
    kernel = _opt_positive(cfg, "linear_conv_kernel_dim", default=4)
    key_total, value_total = k_heads * k_dim, v_heads * v_dim
    conv_dim = 2 * key_total + value_total
    state = ceil_div((conv_dim * (kernel - 1) + v_heads * k_dim * v_dim) * bits, 8)
    mats = hidden * (2 * key_total + 2 * value_total) + hidden * 2 * v_heads + value_total * hidden
    other = conv_dim * kernel + 2 * v_heads + v_dim + hidden
    return _Layer(
        kind=KvKind.LINEAR,
        state_bytes=state,
        state_heads=k_heads,
        mixer_params=mats,
        linear_params=mats,
        other_params=other,
        active_linear_params=mats,
    )


def _layer_kinds(cfg: Config, n: int) -> list[KvKind | None]:
    """Each layer's cache kind, from whichever per-layer description the config uses."""
    mtype = str(cfg.get("model_type"))
    types = cfg.get("layer_types") or cfg.get("layers_block_type")
    if isinstance(types, list):
        if len(types) != n:
            raise InputError("layer_types", f"has {len(types)} entries for {n} layers")
        return _each_known(types, LAYER_TYPE_KINDS, "layer_types", "layer type")
    hybrid = cfg.get("hybrid_layer_pattern")
    if isinstance(hybrid, list):
        # MiMo-V2: 1 a sliding-window layer, 0 a full one (vLLM 0.34.0 mimo_v2.py
        # is_compressed_softmax_layer)
        if len(hybrid) != n:
            raise InputError("hybrid_layer_pattern", f"has {len(hybrid)} entries for {n} layers")
        return [KvKind.SLIDING if flag == 1 else KvKind.FULL for flag in hybrid]
    pattern = cfg.get("hybrid_override_pattern")
    if isinstance(pattern, str):
        if len(pattern) > MAX_CONFIG_LAYERS:
            raise InputError("hybrid_override_pattern", f"longer than {MAX_CONFIG_LAYERS} blocks")
        legend = {"M": KvKind.MAMBA, "*": KvKind.FULL, "-": None, "E": None}
        out: list[KvKind | None] = []
        for i, ch in enumerate(pattern):
            if ch not in legend:
                raise InputError(
                    f"hybrid_override_pattern[{i}]", f"unknown block {ch!r}; known: M * - E"
                )
            out.append(legend[ch])
        return out
    if mtype == "qwen3_next":
        interval = _require_int(cfg, "full_attention_interval")
        return [KvKind.FULL if (i + 1) % interval == 0 else KvKind.LINEAR for i in range(n)]
    if mtype == "jamba" or "attn_layer_period" in cfg:
        period = _require_int(cfg, "attn_layer_period")
        offset = _opt_int(cfg, "attn_layer_offset", default=0) or 0
        return [KvKind.FULL if i % period == offset else KvKind.MAMBA for i in range(n)]
    if _get(cfg, "attention_chunk_size"):
        nope = _list(cfg.get("no_rope_layers"), "no_rope_layers")
        if nope:
            if len(nope) != n:
                raise InputError("no_rope_layers", f"has {len(nope)} entries for {n} layers")
            # 1 = RoPE layer (chunked-local), 0 = NoPE layer (global attention).
            return [KvKind.CHUNKED if flag else KvKind.FULL for flag in nope]
        # Llama 4 default: every 4th layer is a global NoPE layer (transformers Llama4TextConfig).
        return [KvKind.FULL if (i + 1) % 4 == 0 else KvKind.CHUNKED for i in range(n)]
    window = _get(cfg, "sliding_window")
    if "use_sliding_window" in cfg:
        # Qwen2/Qwen3 style: sliding only when switched on, and only from max_window_layers up.
        if not cfg.get("use_sliding_window") or not window:
            return [KvKind.FULL] * n
        first = _opt_int(cfg, "max_window_layers", default=0) or 0
        return [KvKind.SLIDING if i >= first else KvKind.FULL for i in range(n)]
    if not window:
        return [KvKind.FULL] * n
    if mtype == "gemma2":
        return [KvKind.SLIDING if i % 2 == 0 else KvKind.FULL for i in range(n)]
    pattern_n = _opt_int(cfg, "sliding_window_pattern")
    if pattern_n:
        return [KvKind.FULL if (i + 1) % pattern_n == 0 else KvKind.SLIDING for i in range(n)]
    return [KvKind.SLIDING] * n


# DeepSeek-style MoE model types (V2 first: it routes without a correction bias).
DEEPSEEK_MOE_TYPES = ("deepseek_v2", "deepseek_v3", "deepseek_v32", "kimi_k2")
# The config keys of a MoE's routed-expert count and top-k, by family: DeepSeek's, Mixtral's,
# Qwen's; Ernie 4.5's moe_num_experts / moe_k (transformers Ernie4_5_MoeConfig attribute_map);
# Hunyuan's moe_topk; Gemma 4's top_k_experts (vLLM 0.34.0 gemma4.py).
EXPERT_COUNT_KEYS = ("n_routed_experts", "num_local_experts", "num_experts", "moe_num_experts")
EXPERT_TOP_K_KEYS = (
    "num_experts_per_tok",
    "experts_per_token",
    "moe_topk",
    "moe_k",
    "top_k_experts",
)


def _moe_layout(cfg: Config, n: int) -> list[bool]:
    """Which layers carry routed experts."""
    experts = _get(cfg, *EXPERT_COUNT_KEYS)
    if not experts:
        return [False] * n
    mtype = str(cfg.get("model_type"))
    flags = cfg.get("moe_layer_freq")
    if isinstance(flags, list):
        # a flag per layer (MiMo-V2: vLLM 0.34.0 mimo_v2.py is_moe_layer)
        if len(flags) != n:
            raise InputError("moe_layer_freq", f"has {len(flags)} entries for {n} layers")
        return [bool(flag) for flag in flags]
    # DeepSeek's layout key, which GLM-4.5+ (glm4_moe) and other DeepSeek-style MoE configs
    # share: the first k layers keep a dense MLP (transformers modeling_glm4_moe.py
    # Glm4MoeDecoderLayer: experts where layer_idx >= first_k_dense_replace)
    if mtype in DEEPSEEK_MOE_TYPES or "first_k_dense_replace" in cfg:
        first = _opt_int(cfg, "first_k_dense_replace", default=0) or 0
        freq = _opt_positive(cfg, "moe_layer_freq", default=1)
        return [i >= first and i % freq == 0 for i in range(n)]
    if mtype == "llama4_text":
        step = _opt_positive(cfg, "interleave_moe_layer_step", default=1)
        return [(i + 1) % step == 0 for i in range(n)]
    if mtype == "ernie4_5_moe":
        # Ernie4_5_MoeDecoderLayer: experts where (i + 1) % interval == 0 and start <= i <= end
        # (end -1: the last layer; transformers configuration_ernie4_5_moe.py defaults)
        start = _opt_int(cfg, "moe_layer_start_index", default=1) or 0
        raw_end = cfg.get("moe_layer_end_index")
        last = n - 1 if raw_end in (None, -1) else _size(raw_end, "moe_layer_end_index")
        step = _opt_positive(cfg, "moe_layer_interval", default=1)
        return [(i + 1) % step == 0 and start <= i <= last for i in range(n)]
    if "expert_layer_period" in cfg:  # Jamba: experts every `period` layers from `offset`
        period = _opt_positive(cfg, "expert_layer_period", default=1)
        offset = _opt_int(cfg, "expert_layer_offset", default=0) or 0
        return [i % period == offset for i in range(n)]
    only_dense = {
        _size(i, "mlp_only_layers") for i in _list(cfg.get("mlp_only_layers"), "mlp_only_layers")
    }
    step = _opt_positive(cfg, "decoder_sparse_step", default=1)
    return [i not in only_dense and (i + 1) % step == 0 for i in range(n)]


def _dense_inter(cfg: Config) -> int:
    """A dense FFN's intermediate width."""
    inter = (
        _opt_int(cfg, "intermediate_size_mlp") if cfg.get("model_type") == "llama4_text" else None
    )
    return inter or _require_int(cfg, "intermediate_size", "ffn_hidden_size", "n_inner")


class FfnParams(NamedTuple):
    """One FFN block's parameters: its matrices, those a token takes, the rest (routers,
    biases), and the matrices every token takes beside routed experts."""

    mats: int
    active: int
    other: int
    shared: int = 0
    routed: int = 0  # the routed experts' matrices among mats


def _ffn(cfg: Config, hidden: int, moe: bool) -> FfnParams:
    """One FFN block's parameters (FfnParams)."""
    mtype = str(cfg.get("model_type"))
    if not moe:
        mats = _mlp_params(cfg, hidden, _dense_inter(cfg))
        return FfnParams(mats, mats, 0)
    experts = _require_int(cfg, *EXPERT_COUNT_KEYS)
    top_k = _require_int(cfg, *EXPERT_TOP_K_KEYS)
    if top_k > experts:
        raise InputError("num_experts_per_tok", f"{top_k} is more than the {experts} experts")
    inter = _require_int(cfg, "moe_intermediate_size", "intermediate_size")
    # A latent MoE (Nemotron 3's moe_latent_size) runs its routed experts in a narrower width,
    # projected down from the hidden size and back by two linears every token takes (vLLM
    # 0.34.0 nemotron_h.py: fc1_latent_proj / fc2_latent_proj; the shared expert stays wide).
    latent = _opt_int(cfg, "moe_latent_size")
    per_expert = _mlp_params(cfg, latent or hidden, inter)
    projections = 2 * hidden * latent if latent else 0
    other = hidden * experts  # router
    if mtype == "gpt_oss":
        other += experts + experts * (2 * inter + hidden)  # router bias, expert biases
    shared = 0
    n_shared = _opt_int(cfg, "n_shared_experts", "moe_num_shared_experts", default=0) or 0
    if n_shared:
        # Nemotron-H's shared width is per shared expert (nemotron_h.py: x n_shared_experts)
        shared_width = _opt_int(cfg, "moe_shared_expert_intermediate_size")
        shared_inter = shared_width * n_shared if shared_width else inter * n_shared
        shared = _mlp_params(cfg, hidden, shared_inter)
    elif _opt_int(cfg, "shared_expert_intermediate_size"):
        shared = _mlp_params(cfg, hidden, _require_int(cfg, "shared_expert_intermediate_size"))
        other += hidden  # shared_expert_gate
    elif mtype == "llama4_text":
        shared = per_expert
    elif mtype == "gemma4_text":
        # Gemma 4's MoE layers keep their dense MLP beside the experts, which every token
        # takes, and a router scale per hidden unit and per expert (vLLM 0.34.0 gemma4.py:
        # Gemma4DecoderLayer.mlp next to .experts, Gemma4Router.scale / per_expert_scale)
        shared = _mlp_params(cfg, hidden, _dense_inter(cfg))
        other += hidden + experts
    if mtype in (*DEEPSEEK_MOE_TYPES[1:], "glm4_moe", "ernie4_5_moe"):
        other += experts  # e_score_correction_bias (Ernie's moe_statics holds one as well)
    mats = experts * per_expert + shared + projections
    return FfnParams(
        mats, top_k * per_expert + shared + projections, other, shared, experts * per_expert
    )


def _nas_layers(cfg: Config, hidden: int, heads: int, head_dim: int) -> list[_Layer]:
    """nemotron-nas (DeciLM): per-layer `block_configs` with pruned attention / FFN widths."""
    blocks = cfg.get("block_configs")
    if not isinstance(blocks, list) or not blocks:
        raise InputError("block_configs", "nemotron-nas configs need a per-layer block list")
    if len(blocks) > MAX_CONFIG_LAYERS:
        raise InputError("block_configs", f"more than {MAX_CONFIG_LAYERS} layers")
    layers = []
    for i, block in enumerate(blocks):
        block = _mapping(block, f"block_configs[{i}]")
        att = _mapping(block.get("attention"), f"block_configs[{i}].attention")
        ffn = _mapping(block.get("ffn"), f"block_configs[{i}].ffn")
        layer = _Layer(kind=None)
        if att.get("replace_with_linear"):
            layer.linear_params += hidden * hidden
        elif not att.get("no_op"):
            field = f"block_configs[{i}].attention.n_heads_in_group"
            group = _require_int(att, "n_heads_in_group") if att.get("n_heads_in_group") else 0
            if not group:
                raise InputError(field, "missing")
            if heads % group:
                raise InputError(field, f"{group} does not divide the {heads} attention heads")
            kv = heads // group
            mats, other = _attention_params(cfg, hidden, heads, kv, head_dim)
            window = _opt_int(att, "window_length") or None
            layer = _Layer(
                kind=KvKind.SLIDING if window else KvKind.FULL,
                num_kv_heads=kv,
                head_dim=head_dim,
                window=window,
                attention_params=mats,
                linear_params=mats,
                other_params=other + hidden,
            )
        if ffn.get("replace_with_linear"):
            layer.linear_params += hidden * hidden
        elif not ffn.get("no_op"):
            mult = ffn.get("ffn_mult")
            if mult is None:
                raise InputError(f"block_configs[{i}].ffn.ffn_mult", "missing")
            if (
                isinstance(mult, bool)
                or not isinstance(mult, (int, float))
                or not 0 < mult <= MAX_FFN_MULT
            ):
                raise InputError(
                    f"block_configs[{i}].ffn.ffn_mult", f"must be in (0, {MAX_FFN_MULT}]"
                )
            # transformers DeciLM _ffn_mult_to_intermediate_size: round 2/3*mult*hidden up to 256.
            inter = ceil_div(int(2 * float(mult) * hidden / 3), 256) * 256
            layer.linear_params += 3 * hidden * inter
            layer.other_params += hidden
        layer.active_linear_params = layer.linear_params
        layers.append(layer)
    return layers


def _vision_params(cfg: Config, text_hidden: int) -> int:
    """Estimated parameters of a ViT tower and projector (weights only; no KV)."""
    v = cfg.get("vision_config")
    if not isinstance(v, Mapping):
        return 0
    depth = _opt_int(v, "depth", "num_hidden_layers")
    width = _opt_int(v, "hidden_size", "embed_dim")
    inter = _opt_int(v, "intermediate_size")
    if not (depth and width and inter):
        return 0
    if depth > MAX_CONFIG_LAYERS:
        raise InputError("vision_config.depth", f"more than {MAX_CONFIG_LAYERS} layers")
    gated = str(cfg.get("model_type")) in ("qwen2_5_vl",)
    mlp = (3 if gated else 2) * width * inter + (2 * inter if gated else inter) + width
    block = 4 * width * width + 4 * width + mlp + 4 * width  # qkv+o with biases, two norms
    # Defaults: SigLIP / Qwen-VL patch 14, RGB input, one frame per patch.
    patch = _opt_positive(v, "patch_size", "spatial_patch_size", default=14)
    channels = _opt_positive(v, "in_chans", "num_channels", default=3)
    temporal = _opt_positive(v, "temporal_patch_size", default=1)
    total = depth * block + channels * temporal * patch * patch * width
    image = _opt_int(v, "image_size")
    if image:
        total += (image // patch) ** 2 * width + width  # position embeddings, post norm
    merge = _opt_int(v, "spatial_merge_size")
    out = _opt_int(v, "out_hidden_size", "projector_output_dim", "vision_output_dim", default=0)
    if merge:
        merged = width * merge**2
        total += (
            width + merged * merged + merged + merged * (out or text_hidden) + (out or text_hidden)
        )
    else:
        total += width * text_hidden + width  # linear projector and its norm
    return total


# ModelOpt's producer name: its exports before 0.31 keep the quantization in a separate
# hf_quant_config.json, {"producer": {"name": "modelopt"}, "quantization": {"quant_algo": ...,
# "exclude_modules": [...]}}, with no quant_method; vLLM reads that file where config.json has no
# quantization_config and names the method from quant_algo (transformers_utils/config.py and
# model_arch_config_convertor.py, 0.34.0: FP8 -> modelopt, NVFP4 -> modelopt_fp4).
MODELOPT_PRODUCER = "modelopt"
# ModelOpt's fp8 algorithms, one byte a weight (vLLM 0.34.0 modelopt.py LINEAR_ALGOS: per-tensor,
# per-channel / per-token and 128 x 128 block scales); their scales are not counted.
MODELOPT_FP8_ALGOS = frozenset({"FP8", "FP8_PER_CHANNEL_PER_TOKEN", "FP8_PB_WO"})
# A kv_cache_scheme of 8-bit floats declares an FP8 KV cache (compressed-tensors' QuantizationArgs
# num_bits / type, as vLLM's and SGLang's kv-cache methods check them).
FP8_KV_BITS = 8


# ModelOpt's MIXED_PRECISION exports name each quantized linear's own algorithm in
# quantized_layers ({"model.layers.0.self_attn.q_proj": {"quant_algo": "FP8"},
# "model.layers.0.mlp.experts": {"quant_algo": "W4A16_NVFP4", "group_size": 16}}); a linear it
# does not list stays in the checkpoint's dtype (vLLM 0.34.0 modelopt.py
# ModelOptMixedPrecisionConfig._resolve_quant_algo; SGLang 0.5.23 modelopt_quant.py alike). A
# weight takes one byte under FP8 (per-tensor scales not counted, as for MODELOPT_FP8_ALGOS);
# half a byte and one fp8 scale per group_size (16) weights under NVFP4 and its weight-only
# W4A16_NVFP4; one byte and one e8m0 scale per 32 under MXFP8 (the OCP MX block).
MODELOPT_MIXED_ALGO = "MIXED_PRECISION"
MIXED_FP4_ALGOS = frozenset({"NVFP4", "W4A16_NVFP4"})
MIXED_ALGOS = MIXED_FP4_ALGOS | {"FP8", "MXFP8"}
MXFP8_BLOCK = 32
# A quantized_layers name: the layer stack (a decoder's is one of LAYER_PREFIXES; an MTP or
# vision stack is not), the layer and the module path inside it.
LAYER_MODULE = re.compile(r"^(?P<stack>.+?)\.(?P<index>\d+)\.(?P<module>.+)$")


def _mixed_block(module: str) -> str:
    """The block of a decoder layer a quantized_layers module belongs to: routed experts
    ("mlp.experts", "block_sparse_moe.experts.3.w1", Nemotron-H's "mixer.experts.0.up_proj"),
    shared experts, a dense MLP ("mlp.down_proj", Nemotron-H's "mixer.down_proj") or the
    sequence mixer (attention, linear attention, SSM projections)."""
    parts = module.split(".")
    if any(p.startswith("shared_expert") for p in parts):
        return "shared"
    if "experts" in parts:
        return "routed"
    if parts[0] in ("mlp", "feed_forward", "ffn") or (
        parts[0] == "mixer" and parts[-1] in ("up_proj", "down_proj", "gate_proj")
    ):
        return "mlp"
    return "mixer"


def _mixed_bytes(params: int, algo: str, group: int) -> int:
    """Bytes of `params` weights stored under one of MIXED_ALGOS."""
    if algo in MIXED_FP4_ALGOS:
        return ceil_div(params * 4, 8) + ceil_div(params, group)
    if algo == "MXFP8":
        return params + ceil_div(params, MXFP8_BLOCK)
    return params


class _MixedPrecision(NamedTuple):
    """A MIXED_PRECISION checkpoint's linear layers as stored: their bytes (the lm_head's
    apart), the parameters it quantizes, its routed experts' bytes per parameter (None: none
    listed) and the algorithms it names."""

    linear_bytes: int
    head_bytes: int
    quantized_params: int
    expert_bytes_per_param: float | None
    algos: tuple[str, ...]


def _mixed_precision(
    q: Mapping[str, Any], layers: list[_Layer], head_params: int, bits: int
) -> _MixedPrecision:
    """Size a ModelOpt MIXED_PRECISION checkpoint block by block from its quantized_layers: each
    decoder layer's mixer, dense MLP, routed and shared experts at the algorithm its modules
    name (one per block, as the engines' fused layers require), the rest at `bits`."""
    field = "quantization_config.quantized_layers"
    listed = _mapping(q.get("quantized_layers"), field)
    if not listed:
        raise InputError(field, "MIXED_PRECISION needs a non-empty quantized_layers map")
    found: dict[tuple[int, str], tuple[str, int]] = {}
    head: tuple[str, int] | None = None
    for name, info in listed.items():
        entry = _mapping(info, f"{field}.{name}")
        algo = str(entry.get("quant_algo", "")).upper()
        if algo not in MIXED_ALGOS:
            raise InputError(
                f"{field}.{name}.quant_algo",
                f"{algo!r} is not sized; known: {', '.join(sorted(MIXED_ALGOS))}",
            )
        group = _opt_int(entry, "group_size") or NVFP4_BLOCK
        match = LAYER_MODULE.match(str(name))
        if match is None or match["stack"] not in LAYER_PREFIXES:
            if str(name).split(".")[-1] == "lm_head":
                head = (algo, group)
            continue  # the embedding, an MTP or vision module: not a decoder layer's linear
        layer = int(match["index"])
        if layer >= len(layers):
            continue
        block = _mixed_block(match["module"])
        if block == "mlp" and layers[layer].routed:
            block = "shared"  # Gemma 4: the MLP beside its routed experts every token takes
        seen = found.setdefault((layer, block), (algo, group))
        if seen[0] != algo:
            raise InputError(
                f"{field}.{name}",
                f"layer {layer}'s {block} mixes {seen[0]} and {algo}; one algorithm a block "
                "is sized",
            )
    linear_bytes = quantized = 0
    expert_rate: float | None = None
    for i, ly in enumerate(layers):
        mixer = ly.attention_params or ly.mixer_params
        blocks = {
            "mixer": mixer,
            "routed": ly.expert_params,
            "shared": ly.shared_params,
            "mlp": ly.linear_params - mixer - ly.expert_params - ly.shared_params,
        }
        for block, params in blocks.items():
            if params <= 0:
                continue
            got = found.get((i, block))
            if got is None:
                linear_bytes += ceil_div(params * bits, 8)
                continue
            stored = _mixed_bytes(params, *got)
            linear_bytes += stored
            quantized += params
            if block == "routed" and expert_rate is None:
                expert_rate = stored / params
        ly.quantized_linear_params = sum(
            params for block, params in blocks.items() if (i, block) in found and params > 0
        )
    head_bytes = (
        _mixed_bytes(head_params, *head)
        if head and head_params
        else ceil_div(head_params * bits, 8)
    )
    algos = tuple(sorted({a for a, _ in found.values()} | ({head[0]} if head else set())))
    return _MixedPrecision(linear_bytes, head_bytes, quantized, expert_rate, algos)


def normalized_quantization(q: Any) -> Any:
    """A quantization_config as the engines read it: ModelOpt's (its producer's name, or its
    nested {"quantization": {"quant_algo": ...}}, a shape no other tool writes) flattened to
    quant_method "modelopt" with quant_algo and exclude_modules at the top; any other value as
    it is."""
    if not isinstance(q, Mapping) or q.get("quant_method"):
        return q
    producer = q.get("producer")
    nested = q.get("quantization")
    by_modelopt = isinstance(producer, Mapping) and producer.get("name") == MODELOPT_PRODUCER
    if isinstance(nested, Mapping) and "quant_algo" in nested:
        flat = {k: v for k, v in q.items() if k != "quantization"} | dict(nested)
    elif by_modelopt and "quant_algo" in q:
        flat = dict(q)
    else:
        return q  # no algorithm named: not sized (InputError names quant_method)
    flat["quant_method"] = "modelopt"
    return flat


def _quant_method(cfg: Config) -> str:
    """The quant_method of a (normalized) quantization_config, lower case ("" where none)."""
    q = cfg.get("quantization_config")
    return str(q.get("quant_method", "")).lower() if isinstance(q, Mapping) else ""


def _quantization(
    cfg: Config, linear_params: int, quantized_params: int, native_bits: int
) -> tuple[str, int]:
    """(label, bytes of the quantised linear layers) from quantization_config."""
    q = cfg.get("quantization_config")
    if not isinstance(q, Mapping):
        return "", 0
    method = str(q.get("quant_method", "")).lower()
    where = "quantization_config"
    plain = linear_params - quantized_params
    plain_bytes = ceil_div(plain * native_bits, 8)
    if method == "fp8":
        block = _list(q.get("weight_block_size"), f"{where}.weight_block_size") or [128, 128]
        if len(block) != 2:  # DeepSeek-V3's block-scale tile is [128, 128]
            raise InputError(
                f"{where}.weight_block_size", "must be two tile sizes, e.g. [128, 128]"
            )
        rows = _require_int({"weight_block_size": block[0]}, "weight_block_size")
        cols = _require_int({"weight_block_size": block[1]}, "weight_block_size")
        tiles = ceil_div(quantized_params, rows * cols)
        return "fp8", quantized_params + tiles * FP8_SCALE_BYTES + plain_bytes
    if method == "fbgemm_fp8":
        # FBGEMM row-wise FP8 (Meta's Llama-3.1 FP8 checkpoints): one byte per weight and a
        # per-output-channel scale, whose bytes (under 0.1% of the layer's) are not counted.
        return "fp8-fbgemm", quantized_params + plain_bytes
    if method == "quark":
        # AMD Quark exports (amd/...-FP8-KV, ...-MXFP4): the weights' dtype is the global
        # config's; per-tensor fp8 scales are one float per matrix, not counted
        quant = _mapping(q.get("global_quant_config"), f"{where}.global_quant_config")
        weight = _mapping(quant.get("weight"), f"{where}.global_quant_config.weight")
        wdtype = str(weight.get("dtype", "")).lower()
        if wdtype.startswith("fp8"):
            return "fp8-quark", quantized_params + plain_bytes
        if wdtype in ("fp4", "mxfp4"):
            # MXFP4 weights with MXFP4 inputs (AMD's "-MXFP4" exports: w4a4) or fp8 ones
            # (amd/gpt-oss-120b-w-mxfp4-a-fp8), which the GEMMs' rate follows (step.gemm)
            inputs = quant.get("input_tensors")
            adtype = str(inputs.get("dtype", "")).lower() if isinstance(inputs, Mapping) else ""
            label = QUARK_MXFP4_FP8_INPUTS if adtype.startswith("fp8") else "mxfp4-quark"
            scales = ceil_div(quantized_params, MXFP4_BLOCK)
            return label, ceil_div(quantized_params * 4, 8) + scales + plain_bytes
        raise InputError(
            f"{where}.global_quant_config.weight.dtype",
            f"{wdtype!r} is not sized for quark; known: fp8_e4m3, fp8_e5m2, fp4 (MXFP4)",
        )
    if method in ("awq", "gptq", "gptq_marlin", "awq_marlin"):
        bits = _quant_bits(q.get("bits", q.get("w_bit", 4)), f"{where}.bits")
        # 128 is AutoAWQ's and AutoGPTQ's default group size; GPTQ's -1 means one group per
        # column, sized here at the default (an estimate).
        raw_group = q.get("group_size", q.get("q_group_size", 128))
        group = 128 if raw_group in (None, -1, 0) else _size(raw_group, f"{where}.group_size")
        group = group or 128
        groups = ceil_div(quantized_params, group)
        per_group = GPTQ_SCALE_BYTES + ceil_div(bits, 8)
        return f"{method}-int{bits}", ceil_div(
            quantized_params * bits, 8
        ) + groups * per_group + plain_bytes
    if method == "mxfp4":
        scales = ceil_div(quantized_params, MXFP4_BLOCK)
        return OPENAI_MXFP4, ceil_div(quantized_params * 4, 8) + scales + plain_bytes
    if method in ("modelopt", "modelopt_fp4"):
        algo = str(q.get("quant_algo", "NVFP4" if method == "modelopt_fp4" else "FP8")).upper()
        if algo == "NVFP4":
            scales = ceil_div(quantized_params, NVFP4_BLOCK)
            return MODELOPT_NVFP4, ceil_div(quantized_params * 4, 8) + scales + plain_bytes
        if algo in MODELOPT_FP8_ALGOS:
            return "fp8", quantized_params + plain_bytes
        raise InputError(
            "quantization_config.quant_algo",
            f"ModelOpt's {algo!r} is not sized; known: NVFP4, "
            f"{', '.join(sorted(MODELOPT_FP8_ALGOS))} (or pass --weight-dtype)",
        )
    if method == "bitsandbytes":
        if q.get("load_in_4bit"):
            blocks = ceil_div(quantized_params, BNB_4BIT_BLOCK)
            return "bnb-nf4", ceil_div(quantized_params, 2) + blocks * 4 + plain_bytes
        if q.get("load_in_8bit"):
            return "bnb-int8", quantized_params + plain_bytes
    if method == "compressed-tensors":
        config_groups = _mapping(q.get("config_groups"), f"{where}.config_groups")
        for key, grp in config_groups.items():
            field = f"{where}.config_groups.{key}"
            w = _mapping(_mapping(grp, field).get("weights"), f"{field}.weights")
            wbits = _quant_bits(w.get("num_bits", 8), f"{field}.weights.num_bits")
            kind = str(w.get("type", "int"))
            label = f"compressed-tensors-{kind}{wbits}"
            inputs = _mapping(grp, field).get("input_activations")
            if (kind, wbits) == ("int", 8) and _int8_inputs(inputs):
                label = INT8_W8A8_LABEL  # its GEMMs multiply int8 by int8
            size = _opt_int(w, "group_size") if w.get("group_size") != -1 else None
            scale = ceil_div(quantized_params, size) * GPTQ_SCALE_BYTES if size else 0
            return label, ceil_div(quantized_params * wbits, 8) + scale + plain_bytes
    raise InputError(
        "quantization_config.quant_method",
        f"{method!r} is not sized; known: fp8, fbgemm_fp8, quark, awq, gptq, mxfp4, modelopt "
        "(NVFP4 / FP8), bitsandbytes, compressed-tensors (or pass --weight-dtype)",
    )


def _rowwise_scaled_fp8(cfg: Config) -> bool:
    """Whether the checkpoint's fp8 linears scale per output channel or per token: FBGEMM's
    (Meta's Llama-3.1 FP8), compressed-tensors' channel / token strategies (the FP8-dynamic
    exports), Quark's per_channel / per_token schemes. A per-tensor fp8 GEMM fuses its scales;
    these need a row-wise scaled GEMM, which some engines and cards lack (step.gemm)."""
    q = cfg.get("quantization_config")
    if not isinstance(q, Mapping):
        return False
    method = str(q.get("quant_method", "")).lower()
    if method == "fbgemm_fp8":
        return True
    schemes: list[tuple[Any, Any, str]] = []  # (weights, activations, key naming the scheme)
    if method == "compressed-tensors" and isinstance(q.get("config_groups"), Mapping):
        for grp in q["config_groups"].values():
            if isinstance(grp, Mapping):
                schemes.append((grp.get("weights"), grp.get("input_activations"), "strategy"))
    if method == "quark" and isinstance(q.get("global_quant_config"), Mapping):
        quant = q["global_quant_config"]
        schemes.append((quant.get("weight"), quant.get("input_tensors"), "qscheme"))
    for weights, acts, key in schemes:
        if not isinstance(weights, Mapping):
            continue
        float8 = str(weights.get("type", "")) == "float" and weights.get("num_bits") == 8
        fp8 = float8 or str(weights.get("dtype", "")).startswith("fp8")
        scales = [str(d.get(key, "")) for d in (weights, acts) if isinstance(d, Mapping)]
        if fp8 and any(s in ("channel", "token", "per_channel", "per_token") for s in scales):
            return True
    return False


def _fp8_kv_declared_by(cfg: Config) -> Literal["modelopt", "compressed-tensors", "fp8"] | None:
    """The quantization method whose config declares an FP8 KV cache: ModelOpt's
    kv_cache_quant_algo "FP8" (or a kv_cache_scheme of 8-bit floats, as vLLM 0.34's
    get_kv_cache_quant_algo_string reads either), compressed-tensors' kv_cache_scheme of 8-bit
    floats (llm-compressor's FP8-KV exports), an fp8 config's kv_cache_quant_algo "FP8" (SGLang
    0.5.18's Fp8Config reads it); None: none declared."""
    q = cfg.get("quantization_config")
    if not isinstance(q, Mapping):
        return None
    method = str(q.get("quant_method", "")).lower()
    scheme = q.get("kv_cache_scheme")
    eight_bit_floats = isinstance(scheme, Mapping) and (
        str(scheme.get("type", "")) == "float" and scheme.get("num_bits") == FP8_KV_BITS
    )
    algo = str(q.get("kv_cache_quant_algo") or "").upper()
    if method.startswith("modelopt"):
        declared = algo == "FP8" or eight_bit_floats or str(scheme or "").upper() == "FP8"
        return "modelopt" if declared else None
    if method == "compressed-tensors":
        return "compressed-tensors" if eight_bit_floats else None
    if method == "fp8":
        return "fp8" if algo == "FP8" else None
    return None


def _block_scaled_fp8(cfg: Config) -> bool:
    """Whether the checkpoint's fp8 linears scale per 2-D tile: the fp8 method with a
    weight_block_size (DeepSeek-V3 and the FP8 exports that follow it), compressed-tensors'
    block strategy (its FP8-block exports)."""
    q = cfg.get("quantization_config")
    if not isinstance(q, Mapping):
        return False
    method = str(q.get("quant_method", "")).lower()
    if method == "fp8":
        return q.get("weight_block_size") is not None
    if method == "compressed-tensors" and isinstance(q.get("config_groups"), Mapping):
        for grp in q["config_groups"].values():
            weights = grp.get("weights") if isinstance(grp, Mapping) else None
            if (
                isinstance(weights, Mapping)
                and str(weights.get("type", "")) == "float"
                and weights.get("num_bits") == 8
                and str(weights.get("strategy", "")) == "block"
            ):
                return True
    return False


def _quant_bits(value: Any, field: str) -> int:
    """A quantised weight width in bits."""
    bits = _size(value, field)
    if bits not in QUANT_BITS:
        raise InputError(field, f"{bits} bits; accepted: {QUANT_BITS.start}-{QUANT_BITS.stop - 1}")
    return bits


# The quantization_config of an int8 W8A8 export (compressed-tensors' W8A8 int8 scheme: per-
# channel int8 weights, per-token dynamic int8 activations), which --weight-dtype int8 sizes.
INT8_W8A8_EXPORT: Config = {
    "quant_method": "compressed-tensors",
    "config_groups": {
        "group_0": {
            "weights": {"num_bits": 8, "type": "int", "strategy": "channel"},
            "input_activations": {"num_bits": 8, "type": "int", "strategy": "token"},
        }
    },
}


def _int8_inputs(inputs: Any) -> bool:
    """Whether a compressed-tensors config group quantizes its input activations to 8-bit
    integers (its W8A8 scheme: num_bits 8, type int; a group without them is weight-only)."""
    if not isinstance(inputs, Mapping):
        return False
    return inputs.get("num_bits") == 8 and str(inputs.get("type", "int")) == "int"


def quantized_weights_bytes(model: ModelSpec, method: str) -> int:
    """Weight bytes if the linear layers were stored with `method` (awq, gptq, fp8, mxfp4, or
    bitsandbytes: vLLM's in-flight 4-bit NF4 of an unquantised checkpoint)."""
    bits = DTYPE_BITS[model.native_dtype]
    q = model.quantizable_params
    # an int8 W8A8 export is sized as compressed-tensors stores one (int8 weights, a scale
    # per output channel, int8 activations)
    config: dict[str, Any] = (
        dict(INT8_W8A8_EXPORT) if method == W8A8_INT8_METHOD else {"quant_method": method}
    )
    if method == "bitsandbytes":
        config["load_in_4bit"] = True
    _label, linear = _quantization({"quantization_config": config}, q, q, bits)
    other = model.params_total - q
    return linear + ceil_div(other * bits, 8)


# Model types whose transformers config class defaults tie_word_embeddings to False (the
# PretrainedConfig default is True): configuration_llama.py, configuration_llama4.py,
# configuration_mistral.py, configuration_mixtral.py, configuration_qwen2.py / qwen3 / their MoE
# variants. A config that omits the key gets its class's default, as the engines load it.
UNTIED_BY_DEFAULT = frozenset(
    {"llama", "llama4_text", "mistral", "mixtral", "qwen2", "qwen3", "qwen2_moe", "qwen3_moe"}
)
# Module names a decoder layer's linears go by in the checkpoints, by block: its sequence mixer
# (attention's projections, MLA's among them; a linear-attention or SSM mixer's, Nemotron-H
# naming every block "mixer"), a dense MLP, routed experts, the shared experts beside them; under
# the prefixes text-only, multimodal and Nemotron-H exports use. An exclusion matching any of a
# block's names keeps that block in 16 bits (a router, "mlp.gate", is not counted here).
MIXER_MODULES = (
    "self_attn.q_proj", "self_attn.qkv_proj", "self_attn.o_proj", "self_attn.q_a_proj",
    "self_attn.q_b_proj", "self_attn.kv_a_proj_with_mqa", "self_attn.kv_b_proj",
    "linear_attn.in_proj_qkvz", "linear_attn.in_proj_qkv", "linear_attn.out_proj",
    "mixer.in_proj", "mixer.out_proj", "mixer.q_proj", "mixer.o_proj",
)  # fmt: skip
DENSE_MLP_MODULES = ("mlp.gate_proj", "mlp.up_proj", "mlp.down_proj", "mixer.down_proj")
ROUTED_MODULES = (
    "mlp.experts.0.gate_proj", "mlp.experts.0.up_proj", "mlp.experts.0.down_proj",
    "block_sparse_moe.experts.0.w1", "block_sparse_moe.experts.0.w2",
    "mixer.experts.0.up_proj", "mixer.experts.0.down_proj",
)  # fmt: skip
SHARED_MODULES = (
    "mlp.shared_experts.down_proj", "mlp.shared_expert.down_proj",
    "mixer.shared_experts.down_proj",
)  # fmt: skip
# Gemma 4 keeps its routed experts beside the layer's MLP, not inside it (vLLM 0.34.0
# gemma4.py: Gemma4DecoderLayer.experts and .mlp): the dense MLP every token takes is its
# shared part, "experts" its routed one.
GEMMA4_ROUTED_MODULES = ("experts.0.down_proj", "experts.down_proj")
GEMMA4_SHARED_MODULES = ("mlp.gate_proj", "mlp.up_proj", "mlp.down_proj")
LAYER_PREFIXES = (
    "model.layers",
    "model.language_model.layers",
    "language_model.model.layers",
    "backbone.layers",
)
# compressed-tensors' prefix for a regular expression in its ignore list (matched from the
# name's start: compressed_tensors/utils/match.py, re.match)
REGEX_PREFIX = "re:"


def _excluded(patterns: list[str], layer: int, modules: tuple[str, ...]) -> bool:
    """Whether an exclusion list names one of a layer's `modules`: a regular expression
    ("re:.*self_attn.*", compressed-tensors), a wildcard naming them or a module above them
    ("model.layers.0*", "model.layers.10.self_attn*": vLLM 0.34.0 modelopt.py
    is_layer_excluded; Quark's "model.layers.*.self_attn"), or a run of whole
    name parts ("self_attn": every layer's attention; "model.layers.0.mlp.down_proj"; not
    "mlp.gate", the router, in "mlp.gate_proj")."""
    names = [f"{prefix}.{layer}.{module}" for prefix in LAYER_PREFIXES for module in modules]
    for pattern in patterns:
        if pattern.startswith(REGEX_PREFIX):
            try:
                regex = re.compile(pattern.removeprefix(REGEX_PREFIX))
            except re.error:
                continue  # not an expression the engines could match either
            hit = any(regex.match(name) for name in names)
        elif any(ch in pattern for ch in "*?"):  # a module's pattern covers its children
            hit = any(
                fnmatch.fnmatchcase(name, pattern) or fnmatch.fnmatchcase(name, f"{pattern}.*")
                for name in names
            )
        else:
            wanted = f".{pattern}."
            hit = any(wanted in f".{name}." for name in names)
        if hit:
            return True
    return False


def _quantized_share(cfg: Config, layers: list[_Layer], hidden: int) -> None:
    """Mark which linear params the checkpoint's quantisation covers, and the output features
    of the attention and dense-MLP linears among them (column- and row-parallel)."""
    q = cfg.get("quantization_config")
    if not isinstance(q, Mapping):
        return
    field = "quantization_config.modules_to_not_convert"
    kept = (
        q.get("modules_to_not_convert")
        or q.get("ignore")
        or q.get("exclude")  # quark
        or q.get("exclude_modules")  # ModelOpt
    )
    skip = [str(m) for m in _list(kept, field)]
    gemma4 = cfg.get("model_type") == "gemma4_text"
    routed_names = GEMMA4_ROUTED_MODULES if gemma4 else ROUTED_MODULES
    shared_names = GEMMA4_SHARED_MODULES if gemma4 else SHARED_MODULES
    for i, layer in enumerate(layers):
        layer.quantized_linear_params = layer.linear_params
        mixer = layer.attention_params or layer.mixer_params
        attention = True
        if str(q.get("quant_method")) == "mxfp4":
            # gpt-oss: only the MoE experts are MXFP4; attention and router stay bf16.
            layer.quantized_linear_params -= mixer
            attention = False
        elif _excluded(skip, i, MIXER_MODULES):
            layer.quantized_linear_params -= mixer
            attention = False
        ffn = layer.linear_params - mixer
        mlp = not _excluded(skip, i, routed_names if layer.routed else DENSE_MLP_MODULES)
        if not mlp:  # the layer's FFN too: what is left quantized is its mixer at most
            layer.quantized_linear_params -= ffn
        elif layer.shared_params and _excluded(skip, i, shared_names):
            layer.quantized_linear_params -= layer.shared_params
        blocks = [
            out
            for out, kept in ((layer.attention_outputs, attention), (layer.mlp_outputs, mlp))
            if kept and out
        ]
        layer.quantized_outputs = (sum(blocks), hidden * len(blocks))
        layer.quantized_widest = (max(blocks, default=0), hidden if blocks else 0)


class _Shape(NamedTuple):
    """A config's attention shape, as its top level gives it (layers may override it)."""

    hidden: int
    heads: int
    kv_heads: int
    head_dim: int


def _refuse_unmodelled(t: Config) -> None:
    """Refuse, by the key that names it, an attention whose cache or state is not sized here
    (a plain reading of the rest of the config would price a cache the model does not keep)."""
    if isinstance(t.get("linear_attn_config"), Mapping):
        # Kimi Linear (Kimi-K3's text model): KDA linear-attention layers between MLA ones,
        # listed in linear_attn_config; neither state nor layer split is read here
        raise InputError(
            "linear_attn_config",
            f"{t.get('model_type')!s}'s linear attention (KDA) is not modelled; its KV cache "
            "and state cannot be sized",
        )
    sparse = t.get("sparse_attention_config")
    if isinstance(sparse, Mapping) and sparse.get("use_sparse_attention"):
        # MiniMax-M3's block-sparse attention keeps an index cache of its own, not sized here
        raise InputError(
            "sparse_attention_config",
            f"{t.get('model_type')!s}'s block-sparse attention is not modelled; its KV cache "
            "cannot be sized",
        )
    if "compress_ratios" in t:
        # DeepSeek-V4 caches most layers' KV compressed by a per-layer ratio beside a sliding
        # window, and stores its experts in FP4 (expert_dtype): neither is sized here, and a
        # plain reading of its config would price a cache it does not keep
        raise InputError(
            "compress_ratios",
            f"{t.get('model_type')!s}'s compressed attention is not modelled; its KV cache "
            "cannot be sized (no --weight-dtype or --kv-dtype changes that)",
        )


def _decoder_layers(t: Config, n: int, shape: _Shape, bits: int) -> tuple[list[_Layer], int]:
    """Every decoder layer's mixer and feed-forward parameters and KV kind, and the number of
    layers with routed experts."""
    kinds = _layer_kinds(t, n)
    moe = _moe_layout(t, len(kinds))
    pattern = t.get("hybrid_override_pattern")
    moe_layers = pattern.count("E") if isinstance(pattern, str) else sum(moe)
    ssm_bits = bits
    ssm_dtype = t.get("mamba_ssm_cache_dtype")
    if ssm_dtype:
        ssm_name = TORCH_DTYPE_ALIASES.get(str(ssm_dtype), str(ssm_dtype))
        ssm_bits = DTYPE_BITS.get(ssm_name, bits)
    mtype = str(t.get("model_type"))
    layers = []
    for i, kind in enumerate(kinds):
        layer = _mixer(t, i, kind, shape, bits, ssm_bits)
        if kind is not None and kind.per_token:
            layer.attention_params = layer.linear_params
        layer.active_linear_params = layer.linear_params
        # FFN: Nemotron-H puts MLP/MoE in their own pattern layers; others pair one per layer.
        hidden = shape.hidden
        if isinstance(pattern, str):
            ch = pattern[i]
            if ch in "-E":
                _add_ffn(layer, _ffn(t, hidden, moe=ch == "E"), routed=ch == "E")
            layer.other_params += hidden  # one norm per pattern block
        elif kind is not KvKind.MAMBA or mtype in MAMBA_LAYERS_WITH_FFN:
            ffn = _ffn(t, hidden, moe[i])
            if not moe[i]:  # gate / up: the MLP's matrices less down's (inter x hidden)
                layer.mlp_outputs = ffn.mats // hidden - _dense_inter(t)
            _add_ffn(layer, ffn, routed=moe[i])
            layer.other_params += 2 * hidden
        else:
            layer.other_params += hidden
        if mtype in ("gemma2", "gemma3_text"):
            layer.other_params += 2 * hidden  # pre/post feed-forward norms
        layers.append(layer)
    return layers, moe_layers


def _add_ffn(layer: _Layer, ffn: FfnParams, *, routed: bool) -> None:
    """A layer's feed-forward block added to its parameters (a dense one's matrices counted
    apart as well)."""
    layer.linear_params += ffn.mats
    layer.active_linear_params += ffn.active
    layer.other_params += ffn.other
    layer.routed, layer.shared_params = routed, ffn.shared
    layer.expert_params = ffn.routed
    layer.dense_mlp_params = 0 if routed else ffn.mats


def _mixer(
    t: Config, i: int, kind: KvKind | None, shape: _Shape, bits: int, ssm_bits: int
) -> _Layer:
    """Layer i's token mixer: attention of its kind (MLA, or GQA / MHA with its own heads
    where the config gives them per kind), a Mamba or linear-attention block, or none."""
    hidden, heads, kv, head_dim = shape
    if kind is KvKind.MAMBA:
        if "mamba_num_heads" in t or "mamba_n_heads" in t:
            return _mamba2_layer(t, hidden, ssm_bits, bits)
        return _mamba1_layer(t, hidden, bits)
    if kind is KvKind.LINEAR:
        return _gated_deltanet_layer(t, hidden, bits)
    if kind is None:
        return _Layer(kind=None)
    if t.get("kv_lora_rank"):
        mats, other, latent, rope = _mla_params(t, hidden, heads)
        return _Layer(
            kind=KvKind.MLA,
            latent_dim=latent,
            rope_dim=rope,
            indexer_bytes=_indexer_bytes(t, i),
            linear_params=mats,
            other_params=other,
        )
    layer_heads, layer_kv, layer_dim = heads, kv, head_dim
    layer_v = _opt_int(t, "v_head_dim") or head_dim
    if kind is KvKind.FULL and t.get("global_head_dim"):
        # Gemma 4: the full-attention layers have their own KV heads and head size
        # (global_head_dim, num_global_key_value_heads; transformers Gemma4Config)
        layer_dim = layer_v = _require_int(t, "global_head_dim")
        layer_kv = _opt_int(t, "num_global_key_value_heads") or kv
    hybrid = isinstance(t.get("hybrid_layer_pattern"), list)
    if hybrid and kind is KvKind.SLIDING:
        # MiMo-V2: its sliding-window layers have their own heads, KV heads and
        # widths (vLLM 0.34.0 mimo_v2.py: swa_num_attention_heads,
        # swa_num_key_value_heads, swa_head_dim, swa_v_head_dim)
        layer_heads = _opt_int(t, "swa_num_attention_heads") or heads
        layer_kv = _opt_int(t, "swa_num_key_value_heads") or kv
        layer_dim = _opt_int(t, "swa_head_dim") or head_dim
        layer_v = _opt_int(t, "swa_v_head_dim") or layer_dim
    mats, other = _attention_params(t, hidden, layer_heads, layer_kv, layer_dim, layer_v)
    if hybrid and kind is KvKind.SLIDING and t.get("add_swa_attention_sink_bias"):
        other += layer_heads  # a sink per head (make_attention_sink)
    window = None
    if kind is KvKind.SLIDING:
        window = _require_int(t, "sliding_window_size", "sliding_window")
    elif kind is KvKind.CHUNKED:
        window = _require_int(t, "attention_chunk_size")
    return _Layer(
        kind=kind,
        num_kv_heads=layer_kv,
        head_dim=layer_dim,
        head_dim_v=layer_v if layer_v != layer_dim else 0,
        window=window,
        linear_params=mats,
        other_params=other,
        attention_outputs=(mats - layer_heads * layer_v * hidden) // hidden,
    )


def _attention_shape(t: Config) -> _Shape:
    """The top level's attention shape: hidden size, query and KV heads (KV heads dividing the
    query heads; multi-query configs one) and head width."""
    hidden = _require_int(t, "hidden_size", "d_model", "n_embd")
    heads = _require_int(t, "num_attention_heads", "n_head", limit=MAX_CONFIG_HEADS)
    kv = _opt_int(t, "num_key_value_heads", "num_kv_heads")
    if kv is None:
        kv = 1 if t.get("multi_query") else heads
    if kv == 0 or heads % kv:
        raise InputError(
            "num_key_value_heads", f"{kv} must be positive and divide the {heads} attention heads"
        )
    return _Shape(
        hidden, heads, kv, _opt_int(t, "head_dim", "attention_head_dim") or hidden // heads
    )


class _StoredLinears(NamedTuple):
    """The decoder's linear layers as the checkpoint stores them: their bytes (with the lm_head
    where a mixed-precision checkpoint quantizes it: `head_in_linear` of its parameters), the
    quantization label ('' for 16-bit), the parameters it quantizes, and the row-wise scaled fp8
    outputs (summed and widest, per token: zero unless row-wise scaled)."""

    label: str
    linear_bytes: int
    head_in_linear: int
    quantized_params: int
    rowwise_outputs: tuple[int, int]
    rowwise_widest: tuple[int, int]
    mixed: _MixedPrecision | None


def _stored_linears(t: Config, layers: list[_Layer], head: int, bits: int) -> _StoredLinears:
    """How the checkpoint stores the decoder's linear layers (_StoredLinears): a ModelOpt
    MIXED_PRECISION one block by block, else at its quantization_config's format, else at the
    native `bits`."""
    q = t.get("quantization_config")
    linear = sum(ly.linear_params for ly in layers)
    mixed = None
    if (
        isinstance(q, Mapping)
        and str(q.get("quant_method", "")).lower() == "modelopt"
        and str(q.get("quant_algo", "")).upper() == MODELOPT_MIXED_ALGO
    ):
        mixed = _mixed_precision(q, layers, head, bits)
    if mixed is not None:
        quantized = mixed.quantized_params
        label, linear_bytes = MODELOPT_MIXED, mixed.linear_bytes + mixed.head_bytes
        head_in_linear = head
    else:
        quantized = sum(ly.quantized_linear_params for ly in layers)
        label, linear_bytes = _quantization(t, linear, quantized, bits)
        head_in_linear = 0
    rowwise_scaled = _rowwise_scaled_fp8(t)
    rowwise = (
        tuple(sum(part) for part in zip(*(ly.quantized_outputs for ly in layers), strict=True))
        if rowwise_scaled
        else (0, 0)
    )
    widest = (
        tuple(max(part) for part in zip(*(ly.quantized_widest for ly in layers), strict=True))
        if rowwise_scaled and layers
        else (0, 0)
    )
    if not label:
        linear_bytes = ceil_div(linear * bits, 8)
    return _StoredLinears(
        label,
        linear_bytes,
        head_in_linear,
        quantized,
        rowwise,
        widest,
        mixed,
    )


def model_spec_from_config(
    cfg: Config,
    *,
    name: str,
    source: str,
    serve_id: str | None = None,
    revision: str | None = None,
    config_sha256: str | None = None,
    exact_weights_bytes: int | None = None,
    exact_params: int | None = None,
) -> ModelSpec:
    """Size a model from its config.json. `exact_*` come from safetensors metadata when known."""
    if not isinstance(cfg, Mapping):
        raise InputError("config.json", "top level must be a JSON object")
    for where, doc in (("model_type", cfg), ("text_config.model_type", text_config(cfg))):
        if "model_type" in doc and not isinstance(doc["model_type"], str | None):
            raise InputError(where, f"must be a string, got {_shown(doc['model_type'])}")
    t = nemotron_h_pattern(text_config(cfg))
    _refuse_unmodelled(t)
    if "quantization_config" in t:
        t["quantization_config"] = normalized_quantization(t["quantization_config"])
    n = _require_int(t, "num_hidden_layers", "n_layer", "num_layers", limit=MAX_CONFIG_LAYERS)
    hidden, heads, kv, head_dim = shape = _attention_shape(t)
    vocab = _opt_int(t, "vocab_size", "padded_vocab_size")
    if not vocab:
        raise InputError("vocab_size", "missing from config.json")
    max_ctx = _opt_int(
        t, "max_position_embeddings", "max_sequence_length", "n_positions", "seq_length"
    )
    if not max_ctx:
        raise InputError("max_position_embeddings", "missing from config.json")
    dtype = native_dtype(t)
    bits = DTYPE_BITS[dtype]
    mtype = str(t.get("model_type"))

    if mtype == "nemotron-nas":
        layers = _nas_layers(t, hidden, heads, head_dim)
        if len(layers) != n:
            raise InputError("block_configs", f"has {len(layers)} entries for {n} layers")
        kv_values = [ly.num_kv_heads for ly in layers if ly.kind]
        kv = min(kv_values) if kv_values else heads
        moe_layers = 0
    else:
        layers, moe_layers = _decoder_layers(t, n, shape, bits)
        n = len(layers)

    _quantized_share(t, layers, hidden)

    tie = t.get("tie_word_embeddings", mtype not in UNTIED_BY_DEFAULT)
    embed = vocab * hidden
    head = 0 if tie else vocab * hidden
    extra = _vision_params(cfg, hidden)
    linear = sum(ly.linear_params for ly in layers)
    active_linear = sum(ly.active_linear_params for ly in layers)
    other = sum(ly.other_params for ly in layers) + hidden  # final norm
    params_total = linear + other + embed + head + extra
    params_active = active_linear + other + embed + head + extra

    stored = _stored_linears(t, layers, head, bits)
    quant_label, quantized, mixed = stored.label, stored.quantized_params, stored.mixed
    weights = stored.linear_bytes + ceil_div(
        (other + embed + head - stored.head_in_linear + extra) * bits, 8
    )
    basis = "estimated from config.json parameter count"
    if mixed is not None:
        basis += (
            ", each layer's blocks at the algorithm its ModelOpt MIXED_PRECISION quantized_layers "
            f"names ({', '.join(mixed.algos)}; the rest 16-bit)"
        )
    if exact_weights_bytes:
        weights = exact_weights_bytes
        basis = "exact: safetensors metadata"
    if exact_params:
        params_total = exact_params
        params_active = min(params_active, params_total)

    groups = _group_layers(layers, mtype)
    if not groups:
        raise InputError("num_hidden_layers", "no layer keeps a KV cache or state")
    experts = _opt_int(t, *EXPERT_COUNT_KEYS)
    architectures = _list(cfg.get("architectures"), "architectures")
    if architectures and not isinstance(architectures[0], str):
        raise InputError("architectures", f"must be a list of names, got {_shown(architectures)}")
    spec = dict(
        name=name,
        source=source,
        serve_id=serve_id,
        revision=revision,
        config_sha256=config_sha256,
        model_type=str(cfg.get("model_type")),
        architecture=str(architectures[0]) if architectures else None,
        num_layers=n,
        hidden_size=hidden,
        num_attention_heads=heads,
        num_kv_heads=kv,
        head_dim=head_dim,
        intermediate_size=_opt_int(t, "intermediate_size"),
        vocab_size=vocab,
        max_context_tokens=max_ctx,
        native_dtype=dtype,
        params_total=params_total,
        params_exact=bool(exact_params),
        params_active=params_active,
        weight_dtype=quant_label or dtype,
        weights_bytes=weights,
        weights_exact=bool(exact_weights_bytes),
        weights_basis=basis,
        quantizable_params=linear,
        plain_linear_params=linear - quantized if quant_label else 0,
        rowwise_fp8_outputs=stored.rowwise_outputs,
        rowwise_fp8_widest=stored.rowwise_widest,
        fp8_block_scaled=_block_scaled_fp8(t),
        fp8_kv_declared_by=_fp8_kv_declared_by(t),
        quantized_by_modelopt=_quant_method(t) == MODELOPT_PRODUCER,
        mixed_precision_algos=mixed.algos if mixed else (),
        expert_bytes_per_param=mixed.expert_bytes_per_param if mixed else None,
        num_experts=experts or None,
        experts_per_token=_opt_int(t, *EXPERT_TOP_K_KEYS),
        moe_intermediate_size=(
            _opt_int(t, "moe_intermediate_size", "intermediate_size") if experts else None
        ),
        kv_groups=groups,
        mtp_layers=_mtp_layers(t),
        mamba_chunk_tokens=(
            (_opt_int(t, "mamba_chunk_size", "chunk_size") or None)
            if any(g.kind is KvKind.MAMBA for g in groups)
            else None
        ),
        moe_layers=moe_layers if experts else 0,
        routed_expert_params=sum(ly.expert_params for ly in layers) if experts else None,
        embedding_params=embed,
        attention_params=sum(ly.attention_params for ly in layers),
        dense_mlp_params=sum(ly.dense_mlp_params for ly in layers),
        tied_embeddings=bool(tie),
        qk_norm_spans_heads=_qk_norm_spans_heads(t),
        trust_remote_code=isinstance(cfg.get("auto_map"), Mapping),
        **_vision_shape(cfg),
    )
    try:
        return ModelSpec(**spec)
    except ValidationError as exc:
        err = exc.errors()[0]
        key = ".".join(str(p) for p in err["loc"]) or "config.json"
        raise InputError(key, f"{err['msg'].lower()} (from config.json)") from exc


# Model types whose q / k RMSNorm spans every head of the layer rather than each head: MiniMax-M2
# (q_norm over num_attention_heads x head_dim, k_norm over the KV heads'). Under TP each rank
# holds a share of the heads, so both engines all-reduce the sums of squares once a layer:
# vLLM's MiniMaxText01RMSNormTP.forward_qk (vllm/model_executor/models/minimax_m2.py, 0.14.0)
# and SGLang's MiniMaxM2QKRMSNorm (attn_tp_all_reduce of the stacked sums, 0.5.13), where
# config.json sets use_qk_norm with qk_norm_type "per_layer" (SGLang's default type).
HEAD_SPANNING_QK_NORM_TYPES = ("minimax_m2",)


def _qk_norm_spans_heads(cfg: Config) -> bool:
    """Whether the layers' q / k RMSNorm spans every head (HEAD_SPANNING_QK_NORM_TYPES)."""
    return (
        cfg.get("model_type") in HEAD_SPANNING_QK_NORM_TYPES
        and bool(cfg.get("use_qk_norm"))
        and cfg.get("qk_norm_type", "per_layer") == "per_layer"
    )


# Model types whose checkpoints carry an MTP head without a layer-count key in config.json
# (vLLM qwen3_next_mtp.py loads it from the same checkpoint).
MTP_NATIVE_TYPES = {"qwen3_next"}


def _mtp_layers(cfg: Config) -> int:
    """MTP layers the checkpoint ships (DeepSeek-V3 `num_nextn_predict_layers`)."""
    layers = _opt_int(cfg, "num_nextn_predict_layers", "mtp_num_hidden_layers")
    if layers is None:
        return 1 if cfg.get("model_type") in MTP_NATIVE_TYPES else 0
    return layers


def _vision_shape(cfg: Config) -> dict[str, Any]:
    """The vision tower keys engines read to size their headroom, as written (None if absent)."""
    v = cfg.get("vision_config")
    if not isinstance(v, Mapping):
        return {}
    return {
        "has_vision": True,
        "vision_num_hidden_layers": _opt_int(v, "num_hidden_layers") or None,
        "vision_hidden_size": _opt_int(v, "hidden_size") or None,
    }


def _group_layers(layers: list[_Layer], mtype: str) -> tuple[KvLayerGroup, ...]:
    """Collapse layers with identical cache shape into groups, in first-seen order."""
    keyed: dict[tuple[Any, ...], int] = {}
    proto: dict[tuple[Any, ...], _Layer] = {}
    for ly in layers:
        if ly.kind is None:
            continue
        key = (
            ly.kind,
            ly.num_kv_heads,
            ly.head_dim,
            ly.head_dim_v,
            ly.window,
            ly.latent_dim,
            ly.rope_dim,
            ly.indexer_bytes,
            ly.state_bytes,
        )
        keyed[key] = keyed.get(key, 0) + 1
        proto.setdefault(key, ly)
    groups = []
    for key, count in keyed.items():
        ly = proto[key]
        groups.append(
            KvLayerGroup(
                kind=ly.kind,
                num_layers=count,
                num_kv_heads=ly.num_kv_heads,
                head_dim_k=ly.head_dim,
                head_dim_v=ly.head_dim_v or ly.head_dim,
                latent_dim=ly.latent_dim,
                rope_dim=ly.rope_dim,
                indexer_bytes_per_token=ly.indexer_bytes,
                window_tokens=ly.window,
                state_bytes_per_layer=ly.state_bytes,
                state_heads=ly.state_heads,
            )
        )
    return tuple(groups)
