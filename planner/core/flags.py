"""Launch flags for vLLM and SGLang, spelled as in ../shared/engines (vLLM 0.33, SGLang 0.5.23)."""

from __future__ import annotations

import shlex

from pydantic import BaseModel, ConfigDict

from planner.core.specs import ModelSpec

# Placeholder for shape presets that name no checkpoint; shell-friendly so the line still pastes.
MODEL_PLACEHOLDER = "$MODEL"

# Our KV dtype -> the engine's --kv-cache-dtype. 16-bit KV is the engine's "auto" (model dtype).
VLLM_KV_DTYPE = {"fp16": "auto", "bf16": "auto", "fp8": "fp8", "int8": "auto", "fp32": "auto"}
SGLANG_KV_DTYPE = {
    "fp16": "auto",
    "bf16": "auto",
    "fp8": "fp8_e4m3",
    "int8": "auto",
    "fp32": "auto",
}


class EngineFlags(BaseModel):
    """One paste-able command line per engine."""

    model_config = ConfigDict(extra="forbid")

    vllm: str
    sglang: str


def _join(parts: list[str]) -> str:
    return " ".join(p if p == MODEL_PLACEHOLDER else shlex.quote(p) for p in parts)


def engine_flags(
    *,
    model: ModelSpec,
    tp: int,
    context_tokens: int,
    max_seqs: int,
    gpu_memory_utilization: float,
    mem_fraction_static: float,
    kv_dtype: str,
    block_tokens: int,
) -> EngineFlags:
    """The launch lines that realise a plan."""
    ref = model.serve_id or MODEL_PLACEHOLDER
    vllm = [
        "vllm", "serve", ref,
        "--tensor-parallel-size", str(tp),
        "--max-model-len", str(context_tokens),
        "--max-num-seqs", str(max_seqs),
        "--gpu-memory-utilization", f"{gpu_memory_utilization:.2f}",
        "--kv-cache-dtype", VLLM_KV_DTYPE[kv_dtype],
        "--block-size", str(block_tokens),
    ]  # fmt: skip
    sglang = [
        "python", "-m", "sglang.launch_server",
        "--model-path", ref,
        "--tp-size", str(tp),
        "--context-length", str(context_tokens),
        "--max-running-requests", str(max_seqs),
        "--mem-fraction-static", f"{mem_fraction_static:.2f}",
        "--kv-cache-dtype", SGLANG_KV_DTYPE[kv_dtype],
        "--page-size", str(block_tokens),
    ]  # fmt: skip
    return EngineFlags(vllm=_join(vllm), sglang=_join(sglang))
