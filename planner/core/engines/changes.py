"""What changed in an engine between two releases, as the engine models encode it.

The entries are the version switches the models act on (their constants and rule tables), so
an upgrade comparison can name the mechanism behind each moved term.
"""

from __future__ import annotations

from typing import Any

from planner.core.engines import sglang, vllm
from planner.core.engines.common import EnginePrediction, version_text
from planner.units import MIB_BYTES

Version = tuple[int, int, int]


def _vllm_changes() -> list[tuple[Version, str]]:
    out = [(r.since, r.note) for r in vllm.VLLM_RULES if r.since > (0, 0, 0)]
    for rule in vllm.V2_RUNNER_RULES[1:]:
        scope = {
            "listed": "the listed architectures",
            "dense": "every dense non-hybrid model",
            "all": "every model",
        }[rule.scope]
        out.append((rule.since, f"model runner V2 becomes the default for {scope}"))
    out += [
        (
            vllm.FREE_MEMORY_CHECK_SINCE,
            "budget from the worker's own baseline; start-up "
            "refused when free memory is below total x gpu_memory_utilization",
        ),
        (
            vllm.FLASHINFER_SAMPLER_SINCE,
            "FlashInfer's top-k/top-p kernels sample where it is "
            "installed (no sort in the profile)",
        ),
        (vllm.FLASHINFER_SAMPLER_UNTIL, "FlashInfer sampling becomes opt-in: the sort again"),
        (
            vllm.ALLREDUCE_FUSION_SINCE,
            "FlashInfer all-reduce + RMSNorm fusion on by default "
            "(TP > 1 on compute capability 9.0 / 10.x): its workspace counts as non-torch memory",
        ),
        (vllm.ALLREDUCE_FUSION_WITH_PP_SINCE, "all-reduce fusion also with PP > 1"),
        (
            vllm.V2_PERSISTENT_STATE_SINCE,
            "free-memory based budget: model runner V2's persistent sampler buffers count",
        ),
        (vllm.V2_CUDAGRAPH_ESTIMATE_SINCE, "model runner V2 reserves its CUDA-graph estimate"),
        (vllm.ROCM_CUDAGRAPH_ESTIMATE_SINCE, "the CUDA-graph estimate is reserved on ROCm too"),
        (vllm.V2_SAMPLER_WARMUP_SINCE, "model runner V2 warms the full sampler in the profile"),
        (vllm.LORA_EXTRA_VOCAB_UNTIL, "LoRA extra vocabulary rows removed"),
        (
            vllm.V0_CHUNKED_BATCHED_TOKENS_SINCE,
            "V0's default budget with chunked prefill rises from 512 to 2,048 tokens",
        ),
    ]
    return out


def _sglang_changes() -> list[tuple[Version, str]]:
    return [
        (sglang.TIER_RESERVE_SINCE, "memory fraction reserves by GPU tier"),
        (sglang.ACTIVATION_HEURISTIC_SINCE, "memory fraction from the activation heuristic"),
        (sglang.VLM_ADJUST_SINCE, "memory fraction lowered for vision towers"),
        (
            sglang.PIECEWISE_GRAPH_RESERVE_SINCE,
            "reserve for piecewise prefill CUDA graphs (CUDA only; not under DP attention, PP, "
            "a PD role or a vision model)",
        ),
        (
            sglang.BREAKABLE_GRAPH_SINCE,
            "breakable prefill CUDA graphs (not for MLA, DP attention or vision models); the "
            "reserve follows the PD role",
        ),
        (
            sglang.DEEPEP_DECODE_RESERVE_SINCE,
            "2 GiB more reserved for DeepEP's buffers where decode graphs are captured",
        ),
        (sglang.BREAKABLE_DP_ATTENTION_SINCE, "prefill CUDA graphs under DP attention too"),
        (
            sglang.DEEPEP_PREFILL_GRAPH_RESERVE_SINCE,
            "1 GiB more reserved with DeepEP where prefill graphs are captured",
        ),
        (sglang.BREAKABLE_MLA_SINCE, "prefill CUDA graphs for MLA models (1.5 GiB reserved)"),
        (
            sglang.DP_ATTENTION_SPLIT_EMBEDDING_SINCE,
            "under DP attention the input embedding is split over the attention TP group "
            "(DeepSeek-V2 / V3 from 0.5.8)",
        ),
        (sglang.TIERS_0_5_20_SINCE, "new GPU memory tiers"),
        (
            sglang.GRAPH_BS_RUNNING_CAP_SINCE,
            "a default decode graph batch above --max-running-requests is lowered to it",
        ),
        (
            sglang.VLM_CACHE_RESERVE_SINCE,
            f"{sglang.VLM_CACHE_RESERVE_BYTES // MIB_BYTES} MiB reserved for the multimodal "
            "embedding cache",
        ),
    ]


def changes_between(engine: str, a: Version, b: Version) -> list[str]:
    """The modelled changes of one engine between two versions, oldest first."""
    low, high = min(a, b), max(a, b)
    found = _vllm_changes() if engine == "vllm" else _sglang_changes()
    picked = sorted((v, text) for v, text in found if low < v <= high)
    direction = "" if a <= b else " (undone by the downgrade)"
    return [f"{version_text(v)}: {text}{direction}" for v, text in picked]


# Terms compared, in ledger order.
COMPARED_TERMS = (
    "total_memory_bytes",
    "requested_memory_bytes",
    "weights_bytes",
    "activation_peak_bytes",
    "non_torch_bytes",
    "cudagraph_bytes",
    "available_kv_bytes",
    "kv_cache_tokens",
    "max_concurrency",
)


# The settings both engines have, under each engine's name (compared across engines).
COMMON_SETTINGS = {
    "memory fraction": ("gpu_memory_utilization", "mem_fraction_static"),
    "max running sequences": ("max_num_seqs", "max_running_requests"),
    "batched / chunked prefill tokens": ("max_num_batched_tokens", "chunked_prefill_size"),
    "block / page size": ("block_size", "page_size"),
    "max model length": ("max_model_len", "context_length"),
    "tensor parallel": ("tensor_parallel_size", "tp_size"),
}


def _setting_rows(a: EnginePrediction, b: EnginePrediction) -> list[dict[str, Any]]:
    if a.name == b.name:
        keys = sorted(set(a.settings) | set(b.settings))
        pairs = [(k, a.settings.get(k), b.settings.get(k)) for k in keys]
    else:
        index = {"vllm": 0, "sglang": 1}
        pairs = [
            (label, a.settings.get(names[index[a.name]]), b.settings.get(names[index[b.name]]))
            for label, names in COMMON_SETTINGS.items()
        ]
    return [{"setting": k, "before": x, "after": y} for k, x, y in pairs if x != y]


def change_row(term: str, before: float, after: float) -> dict[str, Any]:
    """One compared figure: both values, the change and the change relative to before."""
    return {
        "term": term,
        "before": before,
        "after": after,
        "change": after - before,
        "relative": (after - before) / before if before else None,
    }


def compare(a: EnginePrediction, b: EnginePrediction) -> dict[str, Any]:
    """Term-by-term difference of two predictions, the settings that moved and the notes."""
    return {
        "terms": [change_row(t, getattr(a, t), getattr(b, t)) for t in COMPARED_TERMS],
        "settings": _setting_rows(a, b),
        "notes_before": [n for n in a.notes if n not in b.notes],
        "notes_after": [n for n in b.notes if n not in a.notes],
    }
