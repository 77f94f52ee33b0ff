"""The sampler's GPU work in a step: the lm_head's logits gathered across the TP group, cast to
fp32 and reduced to each sequence's next token."""

from __future__ import annotations

# The lm_head writes bf16 logits, split by vocabulary over the TP group: each rank its share of
# the columns. vLLM's V1 LogitsProcessor all-gathers them (_gather_logits, use_all_gather under
# V1: vllm/model_executor/layers/logits_processor.py, read in the 0.9.2 wheel) and SGLang's does
# the same (tensor_model_parallel_all_gather: sglang/srt/layers/logits_processor.py, 0.5.13).
LOGIT_BYTES = 2
# Both then cast them to fp32 (V1's Sampler.forward `logits.to(torch.float32)`, vllm/v1/sample/
# sampler.py 0.9.2; SGLang's `logits[:, :vocab_size].float()`) and, when every request is
# greedy (temperature 0: what vllm bench serve sends, vllm/benchmarks/endpoint_request_func.py
# 0.9.2, and sglang.bench_serving's --temperature default, 0.5.13), take the argmax:
# a read of 2 bytes and a write of 4 a logit, then a read of 4. Sampling at a temperature makes
# more passes (softmax, top-p / top-k); they are not priced.
GREEDY_BYTES_PER_LOGIT = 2 + 4 + 4


def gather_bytes(sampled: int, vocab: int, ranks: int) -> float:
    """The logits one GPU receives in the all-gather: the other ranks' columns, bytes."""
    if ranks <= 1 or sampled <= 0:
        return 0.0
    return sampled * vocab * LOGIT_BYTES * (ranks - 1) / ranks


def greedy_bytes(sampled: int, vocab: int) -> int:
    """The HBM bytes the fp32 cast and the argmax move over the gathered logits."""
    return max(sampled, 0) * vocab * GREEDY_BYTES_PER_LOGIT
