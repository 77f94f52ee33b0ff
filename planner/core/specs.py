"""Input specs at the core's boundary: the model, the GPU, and the capacity settings."""

from __future__ import annotations

from enum import Enum
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

STRICT = ConfigDict(extra="forbid", frozen=True)
# ModelSpec.weight_dtype of OpenAI's MXFP4 checkpoints (quant_method mxfp4: gpt-oss), whose
# experts are weight-only MXFP4.
OPENAI_MXFP4 = "mxfp4"
# ModelSpec.weight_dtype of an AMD Quark MXFP4 checkpoint whose inputs are fp8 (w4a8:
# amd/gpt-oss-120b-w-mxfp4-a-fp8; its w4a4 exports are "mxfp4-quark"): the prefixes kept, so
# the MXFP4 and engine-method lookups read it as the other Quark MXFP4.
QUARK_MXFP4_FP8_INPUTS = "mxfp4-quark-a8"
# ModelSpec.weight_dtype of a compressed-tensors checkpoint whose int8 weights multiply int8
# activations (its W8A8 scheme: the card's INT8 rate, planner.core.step.gemm); int8 weights
# alone keep "compressed-tensors-int8" (16-bit multiplies).
INT8_W8A8_LABEL = "compressed-tensors-w8a8-int8"
# SGLang's --quantization name for int8 W8A8 checkpoints (python/sglang/srt/layers/quantization/
# w8a8_int8.py), and the method the planner sizes an int8 variant checkpoint by.
W8A8_INT8_METHOD = "w8a8_int8"
# ModelSpec.weight_dtype of NVIDIA ModelOpt NVFP4 checkpoints (quant_algo NVFP4), and the
# engines' --quantization name for them (vLLM's QUANTIZATION_METHODS; SGLang spells it alike).
MODELOPT_NVFP4 = "nvfp4"
MODELOPT_NVFP4_METHOD = "modelopt_fp4"
# ModelSpec.weight_dtype of a ModelOpt MIXED_PRECISION checkpoint (each quantized layer its own
# algorithm: NVIDIA's Qwen3.6 / Nemotron-3.5 NVFP4 exports), and the engines' --quantization
# name for it (vLLM's QUANTIZATION_METHODS, 0.17+; SGLang's loader spells it alike).
MODELOPT_MIXED = "modelopt-mixed"
MODELOPT_MIXED_METHOD = "modelopt_mixed"


class KvKind(str, Enum):
    """How a layer keeps state for past tokens."""

    FULL = "full"  # MHA / GQA / MQA: K and V for every token
    SLIDING = "sliding"  # K and V for the last `window_tokens` tokens only
    CHUNKED = "chunked"  # chunked-local attention (Llama 4): at most one chunk of tokens
    MLA = "mla"  # one compressed latent per token, not split by TP
    MAMBA = "mamba"  # Mamba / SSM: fixed state per sequence
    LINEAR = "linear"  # linear attention (Gated DeltaNet ...): fixed state per sequence

    @property
    def per_token(self) -> bool:
        """Whether the layer keeps something per token (vs a fixed state)."""
        return self in (KvKind.FULL, KvKind.SLIDING, KvKind.CHUNKED, KvKind.MLA)


class KvLayerGroup(BaseModel):
    """Layers that keep the same kind and size of state."""

    model_config = STRICT

    kind: KvKind
    num_layers: int = Field(gt=0)
    num_kv_heads: int = Field(default=0, ge=0, description="attention kinds: KV heads (total)")
    head_dim_k: int = Field(default=0, ge=0)
    head_dim_v: int = Field(default=0, ge=0)
    latent_dim: int = Field(default=0, ge=0, description="MLA: kv_lora_rank + qk_rope_head_dim")
    rope_dim: int = Field(default=0, ge=0, description="MLA: qk_rope_head_dim (in latent_dim)")
    indexer_bytes_per_token: int = Field(
        default=0,
        ge=0,
        description="DeepSeek-V3.2 lightning-indexer key cache per token per layer (its own fp8)",
    )
    window_tokens: int | None = Field(default=None, gt=0, description="sliding / chunked cap")
    state_bytes_per_layer: int = Field(
        default=0, ge=0, description="mamba / linear: state bytes per sequence per layer at TP 1"
    )
    state_heads: int = Field(default=1, ge=1, description="heads the fixed state splits over in TP")


class ModelSpec(BaseModel):
    """A model reduced to what capacity arithmetic needs, with where each figure came from."""

    model_config = STRICT

    name: str
    source: str = Field(description="preset | local | hub")
    serve_id: str | None = Field(default=None, description="what an engine loads (Hub id / path)")
    revision: str | None = None
    config_sha256: str | None = None
    model_type: str | None = None
    architecture: str | None = None
    num_layers: int = Field(gt=0)
    hidden_size: int = Field(gt=0)
    num_attention_heads: int = Field(gt=0)
    num_kv_heads: int = Field(gt=0, description="KV heads of the attention layers (TP checks)")
    head_dim: int = Field(gt=0)
    intermediate_size: int | None = None
    vocab_size: int | None = None
    max_context_tokens: int = Field(gt=0)
    native_dtype: str = "bf16"
    params_total: int = Field(gt=0)
    params_exact: bool = Field(default=False, description="counted from safetensors headers")
    params_active: int = Field(gt=0)
    weight_dtype: str = Field(description="dtype (or quantisation) the weights load in")
    weights_bytes: int = Field(gt=0)
    weights_exact: bool = False
    weights_basis: str = Field(description="how weights_bytes was obtained")
    quantizable_params: int = Field(
        ge=0, description="parameters a --weight-dtype override applies to (linear layers)"
    )
    plain_linear_params: int = Field(
        default=0,
        ge=0,
        description="linear parameters a quantized checkpoint keeps in its native dtype "
        "(modules_to_not_convert, gpt-oss's attention): their GEMMs run at the 16-bit rate",
    )
    rowwise_fp8_outputs: tuple[int, int] = Field(
        default=(0, 0),
        description="output features, summed over the layers, of the attention and dense-MLP "
        "fp8 linears whose scales are per output channel or per token (column-parallel ones, "
        "split by TP; row-parallel ones, hidden each on every GPU): what a GEMM without "
        "row-wise scaling rescales in separate passes, per token",
    )
    rowwise_fp8_widest: tuple[int, int] = Field(
        default=(0, 0),
        description="the widest single such linear's output features (column-parallel, split "
        "by TP; row-parallel, the hidden): what one unfused rescale holds in fp32 per token",
    )
    fp8_block_scaled: bool = Field(
        default=False,
        description="the checkpoint's fp8 linears scale per 2-D tile (DeepSeek-V3's "
        "weight_block_size [128, 128], compressed-tensors' block strategy): a block-scaled "
        "GEMM, which some families run further from their fp8 rate (step.family)",
    )
    fp8_kv_declared_by: Literal["modelopt", "compressed-tensors", "fp8"] | None = Field(
        default=None,
        description="the quantization method whose config declares an FP8 KV cache (ModelOpt's "
        "kv_cache_quant_algo, compressed-tensors' kv_cache_scheme, an fp8 config's "
        "kv_cache_quant_algo): the engines that read it run the cache in fp8 for "
        "--kv-cache-dtype auto (checkpoint_fp8_kv in engines.vllm and engines.sglang)",
    )
    quantized_by_modelopt: bool = Field(
        default=False,
        description="the quantization_config is ModelOpt's (its producer or quant_method): the "
        "engines name its fp8 method `modelopt` (planner.core.quantization.checkpoint_method)",
    )
    mixed_precision_algos: tuple[str, ...] = Field(
        default=(),
        description="ModelOpt MIXED_PRECISION: the algorithms its quantized_layers name (the "
        "engines load each from a given release: engines.common.check_mixed_precision)",
    )
    expert_bytes_per_param: float | None = Field(
        default=None,
        gt=0,
        description="the routed experts' stored bytes per parameter where the checkpoint "
        "gives them a format of their own (MIXED_PRECISION); None: read from the totals",
    )
    num_experts: int | None = None
    experts_per_token: int | None = None
    moe_intermediate_size: int | None = Field(default=None, description="per-expert FFN width")
    has_vision: bool = Field(default=False, description="config.json has a vision_config")
    vision_num_hidden_layers: int | None = Field(
        default=None, description="vision_config.num_hidden_layers as written (engines read it)"
    )
    vision_hidden_size: int | None = Field(default=None, description="vision_config.hidden_size")
    kv_groups: tuple[KvLayerGroup, ...]
    mtp_layers: int = Field(
        default=0, ge=0, description="multi-token-prediction layers (speculation by MTP)"
    )
    mamba_chunk_tokens: int | None = Field(
        default=None,
        gt=0,
        description="Mamba mixers' scan chunk (mamba_chunk_size / chunk_size): vLLM's 'all' "
        "Mamba cache mode aligns its block to it",
    )
    moe_layers: int = Field(default=0, ge=0, description="layers with routed experts (0: none)")
    routed_expert_params: int | None = Field(
        default=None,
        ge=0,
        description="the routed experts' matrices as the config sizes them (None: three "
        "hidden x moe_intermediate_size matrices an expert, the gated form)",
    )
    embedding_params: int = Field(
        default=0, ge=0, description="vocab x hidden: one embedding (or lm_head) matrix"
    )
    attention_params: int = Field(
        default=0,
        ge=0,
        description="the attention layers' projection matrices (Q, K, V, O; MLA's low-rank "
        "factors): what data-parallel attention replicates",
    )
    dense_mlp_params: int = Field(
        default=0,
        ge=0,
        description="the dense (not routed) MLPs' matrices: what SGLang's --moe-dense-tp-size 1 "
        "replicates",
    )
    tied_embeddings: bool = Field(default=True, description="lm_head shares the embedding")
    qk_norm_spans_heads: bool = Field(
        default=False,
        description="the q / k RMSNorm runs over every head at once (MiniMax-M2's per_layer "
        "qk_norm), so under tensor parallelism each layer all-reduces its sums of squares",
    )
    trust_remote_code: bool = Field(
        default=False,
        description="config.json names its own code (auto_map): the engines load it only with "
        "--trust-remote-code",
    )

    @property
    def expert_params(self) -> int:
        """Routed-expert parameters of every expert in every MoE layer: as the config sizes them
        (a non-gated expert's two matrices, a latent MoE's narrower width), else gate, up and
        down at the hidden size."""
        if not (self.num_experts and self.experts_per_token and self.moe_intermediate_size):
            return 0
        if self.routed_expert_params is not None:
            return self.routed_expert_params
        layers = self.moe_layers or self.num_layers
        return 3 * self.hidden_size * self.moe_intermediate_size * layers * self.num_experts


class GpuSpec(BaseModel):
    """One GPU model: memory as marketed and as reported, bandwidth and dense throughput."""

    model_config = STRICT

    id: str
    vendor: str
    name: str
    device_names: tuple[str, ...] = ()
    aliases: tuple[str, ...] = ()
    memory_bytes_marketed: int = Field(gt=0)
    memory_bytes_nvml: int | None = None
    memory_bytes_cuda: int | None = None
    hbm_bandwidth_bytes_per_s: int | None = None
    supports_bf16: bool = Field(
        default=True, description="False before NVIDIA Ampere (T4, V100): engines need fp16"
    )
    fp16_dense_flops: int | None = Field(
        default=None, description="tensor FP16 FLOP/s where no BF16 figure exists"
    )
    achievable_bandwidth_fraction: float | None = Field(
        default=None, gt=0, le=1, description="measured decode share of peak HBM bandwidth"
    )
    bf16_dense_flops: int | None = None
    fp8_dense_flops: int | None = None
    fp4_dense_flops: int | None = None
    int8_dense_ops: int | None = Field(
        default=None,
        description="tensor INT8 op/s where the datasheet departs from the rule the planner "
        "derives it by (planner.core.step.gemm.int8_ops_per_s)",
    )
    interconnect: str | None = None
    nvlink_bridge_gpus: int | None = Field(
        default=None,
        ge=2,
        description="a PCIe card's NVLink bridge: how many GPUs it joins (None: NVLink through "
        "NVSwitch, or none); a larger group reduces over PCIe",
    )
    compute_capability: str | None = Field(
        default=None,
        pattern=r"^\d{1,2}\.\d$",
        description="NVIDIA CUDA compute capability (developer.nvidia.com/cuda-gpus); engines "
        "switch kernels and fusions on it",
    )
    source: str
