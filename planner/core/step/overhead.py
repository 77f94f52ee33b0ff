"""Fixed per-step costs: the kernels every decoder layer launches and the engine's own
scheduling overhead per step."""

from __future__ import annotations

# Fixed cost per decoder layer per step: kernel launch and tail latency of the ~10 kernels a
# layer runs (norms, RoPE, attention, activations), present even inside a CUDA graph. 17 us
# fits the public rows and puts the H200 ideal floor (Llama-3.1-8B, 5.36 ms at B=1) exactly.
KERNEL_MS_PER_LAYER = 0.017
# Per-step engine overhead not hidden behind the GPU (scheduling, sampling, input prep), ms,
# fitted per engine on the public rows: vLLM's V1 engine overlaps most of it (async
# scheduling); V0 (before 0.8) and SGLang's Python scheduler add more; LMDeploy's C++
# TurboMind little. SGLang's figure is an assumption between the two vLLM engines.
ENGINE_OVERHEAD_MS = {"vllm": 0.2, "vllm-v0": 0.5, "sglang": 0.35, "lmdeploy": 0.2}
# vLLM's V1 engine became the default in 0.8.0 (vLLM v0.8.0 release notes).
VLLM_V1_SINCE = (0, 8, 0)


def engine_key(engine: str, version: tuple[int, int, int] | None = None) -> str:
    """The ENGINE_OVERHEAD_MS entry for an engine (vLLM before 0.8 ran the V0 engine)."""
    if engine == "vllm" and version is not None and version < VLLM_V1_SINCE:
        return "vllm-v0"
    return engine if engine in ENGINE_OVERHEAD_MS else "vllm"


# A request's trip outside the GPU, counted in its TTFT and end-to-end latency (and, in a closed
# loop, in the client's wait before its next request): the HTTP server, tokenizing the prompt,
# the hand-off to the engine and, after the first token, detokenizing and streaming it back.
# 7 ms, measured on public vLLM 0.30 runs (benchmarks/data/step-time.jsonl, silybench H100
# Qwen3-8B, 128-token prompts): TTFT p95 14.1 ms at 1 client and 24.8 at 4 against the step
# model's 6.9 and 17.8 ms of prefill. SGLang runs the same path (tokenizer, scheduler and
# detokenizer processes over ZMQ): taken as the same, an estimate.
REQUEST_PATH_MS = 7.0
