"""Each engine's own KV-pool arithmetic (vLLM, SGLang), as pure functions of specs and settings."""

from __future__ import annotations

from typing import TYPE_CHECKING

from planner.core.specs import GpuSpec, ModelSpec

if TYPE_CHECKING:
    from planner.core.engines.common import EnginePrediction


def release(engine: str, version: str | None) -> tuple[int, int, int]:
    """The engine release a `--engine-version` names, else the newest modelled."""
    from planner.core.engines import sglang, vllm
    from planner.core.engines.common import parse_version

    if version:
        return parse_version(version)
    return sglang.NEWEST_VERSION if engine == "sglang" else vllm.NEWEST_VERSION


def release_notes(engine: str, version: str) -> list[str]:
    """A note where `version` lies outside the releases the engine's model reads: the nearest
    one's rules stand in, for its memory and its steps alike (common.outside_table)."""
    from planner.core.engines import sglang, vllm
    from planner.core.engines.common import outside_table, parse_version

    if engine == "sglang":
        return outside_table(
            "SGLang", parse_version(version), sglang.OLDEST_VERSION, sglang.NEWEST_VERSION
        )
    return outside_table("vLLM", parse_version(version), vllm.OLDEST_VERSION, vllm.NEWEST_VERSION)


def engine_notes(prediction: EnginePrediction) -> list[str]:
    """What a run of this engine instance rests on beyond its flags: a release outside those
    modelled (release_notes), then where the engine runs other than the flags name
    (EnginePrediction.resolved_notes)."""
    return release_notes(prediction.name, prediction.version) + prediction.resolved_notes


def engine_kv_dtype(
    engine: str, model: ModelSpec, gpu: GpuSpec, version: str | None, flag: str
) -> str:
    """The KV cache's dtype (a units dtype name) an engine release runs for --kv-cache-dtype
    `flag`: the checkpoint's for `auto`, except where the engine picks its own for DeepSeek's
    sparse attention (SGLang's fp8 on Blackwell, vLLM 0.11's fp8_ds_mla, vLLM 0.32's fp8 for
    GLM-5 on Blackwell) or runs the FP8 cache the checkpoint's quantization declares
    (checkpoint_fp8_kv in each engine). ValueError for a format not modelled."""
    from planner.core.engines import sglang, vllm
    from planner.core.engines.common import kv_cache_dtype

    dtype = kv_cache_dtype(flag, model, "auto")
    at = release(engine, version)
    if engine == "sglang":
        fp8 = sglang.dsa_fp8_kv(model, gpu, at, flag) or sglang.checkpoint_fp8_kv(model, at, flag)
        return "fp8" if fp8 else dtype
    fp8 = (
        vllm.ds_mla_layout(model, at, flag)
        or vllm.glm_dsa_fp8_kv(model, gpu, at, flag)
        or vllm.checkpoint_fp8_kv(model, at, flag)
    )
    return "fp8" if fp8 else dtype
