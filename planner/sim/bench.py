"""The figures `vllm bench serve --save-result` prints, measured on one simulated run.

Names and definitions follow the benchmark (vllm/benchmarks/serve.py): TTFT from send to first
token, TPOT = (end-to-end - TTFT) / (output tokens - 1) per request, ITL every gap between
tokens, E2EL send to last token, throughputs over the whole run (first send to last finish).
"""

from __future__ import annotations

from typing import Any, TypedDict

import numpy as np
from numpy.typing import NDArray

from planner.sim.engine import RunState
from planner.sim.workload import Trace

# Benchmark clients whose TTFT waits for the first chunk carrying text, and which count a
# request that streams none (its first token was EOS) at TTFT 0 among the rest:
# sglang.bench_serving (`if data["choices"][0]["text"]` / `if data["text"]` before it stamps
# TTFT, then ttfts.append for every successful request; python/sglang/bench_serving.py, read in
# 0.5.13), and vLLM's benchmarks/benchmark_serving.py as run in 2024 (dstackai/benchmarks
# raw_data, 2024-11: the 378 of 1,000 ShareGPT requests with no output text record TTFT 0.0).
# `vllm bench serve` stamps TTFT at the first chunk whether or not it has text ("text could be
# empty here", vllm/benchmarks/endpoint_request_func.py, read in 0.9.0 and 0.30.0).
TEXT_TTFT_CLIENTS = frozenset({"sglang", "vllm-2024"})


class EmptyCounting(TypedDict):
    """How a run counts empty outputs (bench_metrics' `empty_outputs` and `text_ttft`)."""

    empty_outputs: bool
    text_ttft: bool


# Percentiles `vllm bench serve` prints by default (--metric-percentiles 99) plus the median.
BENCH_PERCENTILE = 99
DEFAULT_PERCENTILES = (float(BENCH_PERCENTILE),)


def percentile_key(p: float) -> str:
    """The benchmark's name for a percentile: p99, p99.9 (vllm/benchmarks/serve.py writes
    the integer part alone when the percentile is whole)."""
    return f"p{int(p)}" if p == int(p) else f"p{p}"


def weighted_quantiles(
    values: NDArray[np.float64], counts: NDArray[np.int64], qs: list[float]
) -> list[float]:
    """Quantiles (0-1, linear interpolation, as np.percentile) of `values` each repeated
    `counts` times, without expanding them."""
    keep = counts > 0
    values, counts = values[keep], counts[keep]
    if values.size == 0:
        return [0.0 for _ in qs]
    order = np.argsort(values, kind="stable")
    values, ends = values[order], np.cumsum(counts[order])
    total = int(ends[-1])
    out = []
    for q in qs:
        position = q * (total - 1)
        low = int(np.floor(position))
        at_low = values[np.searchsorted(ends, low, side="right")]
        at_high = values[np.searchsorted(ends, min(low + 1, total - 1), side="right")]
        out.append(float(at_low + (position - low) * (at_high - at_low)))
    return out


def _stats(
    name: str, values: NDArray[np.float64], percentiles: tuple[float, ...]
) -> dict[str, float]:
    if values.size == 0:
        values = np.zeros(1)
    median, *tails = np.percentile(values, [50, *percentiles])
    named = zip(percentiles, tails, strict=True)
    return {
        f"mean_{name}_ms": float(values.mean()),
        f"median_{name}_ms": float(median),
        f"std_{name}_ms": float(values.std()),
        **{f"{percentile_key(p)}_{name}_ms": float(t) for p, t in named},
    }


def bench_metrics(
    run: RunState,
    trace: Trace,
    replicas: int = 1,
    percentiles: tuple[float, ...] = DEFAULT_PERCENTILES,
    empty_outputs: bool = False,
    text_ttft: bool = False,
    stream_interval: int = 1,
    clients: int | None = None,
    requests: int | None = None,
    ignored_prompt_tokens: NDArray[np.int64] | None = None,
) -> dict[str, Any]:
    """The benchmark's summary for one run; `replicas` identical data-parallel copies of it
    multiply the throughputs (each served its share of the load). `requests`: the benchmark's
    over all the replicas, where the run's share (every replicas-th, from the first: the
    busiest rank's) holds more than its part of them (3 requests over 16 ranks: 1 a rank, 3 in
    all); None: the share's times the replicas. `clients`: the benchmark's
    closed-loop clients over all the replicas (None: an open loop). Where they are fewer than
    the replicas hold at the run's share (4 over 8 ranks, 12 over 8: 1 or 2 a rank, run at the
    larger), they cannot keep every replica busy: the benchmark takes at least the time its
    clients need to send every request, one after another each, at the run's mean latency
    (Little's law), whatever its pace of arrivals. `percentiles` the tail
    figures it prints (--metric-percentiles). `empty_outputs`: the trace's one-token outputs
    are EOS at once (planner.sim.workload.with_empty_outputs): they stream no text, so count no
    output tokens, and a `text_ttft` client (TEXT_TTFT_CLIENTS) records their TTFT as 0.
    `stream_interval`: the engine sends a request's tokens N at a time after its first, so the
    client's inter-chunk latency spans N token gaps: its ITL figures are N times the token
    gaps' (an approximation where a chunk mixes a stalled step with plain ones).
    `ignored_prompt_tokens`: the share's prompts the engine finished at once with no output (vLLM
    V0's multi-step rounds, planner.api.bench_instance.multi_step_ignored), not in `trace`:
    the client counts them completed, their prompts among its input tokens; a `text_ttft`
    client records their TTFT and latency as 0 (no chunk with text), so they join those
    figures; another times them at the finishing chunk, a wait not priced here, and they
    stay out of them."""
    start = float(np.min(run.arrival_ms))
    duration_s = (float(np.nanmax(run.finish_ms)) - start) / 1000.0
    ttft = run.first_ms - run.arrival_ms
    empty = trace.output_tokens == 1 if empty_outputs else np.zeros(trace.size, dtype=bool)
    if text_ttft:
        ttft = np.where(empty, 0.0, ttft)
    e2el = run.finish_ms - run.arrival_ms
    multi = run.output > 1
    tpot = (e2el[multi] - ttft[multi]) / (run.output[multi] - 1)
    gaps = np.asarray(list(run.itl_tokens), dtype=np.float64) * stream_interval
    counts = np.asarray(list(run.itl_tokens.values()), dtype=np.int64)
    itl_mean = float((gaps * counts).sum() / counts.sum()) if counts.sum() else 0.0
    itl_median, *itl_tails = weighted_quantiles(
        gaps, counts, [0.5, *(p / 100 for p in percentiles)]
    )
    itl_std = 0.0
    if counts.sum():
        itl_std = float(np.sqrt((counts * (gaps - itl_mean) ** 2).sum() / counts.sum()))
    completed = trace.size * replicas if requests is None else requests
    scale = completed / max(1, trace.size)  # the share's totals, taken to the benchmark's
    inputs = round(int(trace.prompt_tokens.sum()) * scale)
    outputs = round((int(trace.output_tokens.sum()) - int(empty.sum())) * scale)
    served = e2el[np.isfinite(e2el)]
    if clients and replicas > 1 and served.size:
        duration_s = max(duration_s, completed * float(served.mean()) / 1000.0 / clients)
    if ignored_prompt_tokens is not None and ignored_prompt_tokens.size:
        completed += round(ignored_prompt_tokens.size * scale)
        inputs += round(int(ignored_prompt_tokens.sum()) * scale)
        if text_ttft:
            ttft = np.concatenate([ttft, np.zeros(ignored_prompt_tokens.size)])
            e2el = np.concatenate([e2el, np.zeros(ignored_prompt_tokens.size)])
    return {
        "completed": completed,
        "duration": duration_s,
        "total_input_tokens": inputs,
        "total_output_tokens": outputs,
        "request_throughput": completed / duration_s,
        "output_throughput": outputs / duration_s,
        "total_token_throughput": (inputs + outputs) / duration_s,
        **_stats("ttft", ttft, percentiles),
        **_stats("tpot", tpot, percentiles),
        "mean_itl_ms": itl_mean,
        "median_itl_ms": itl_median,
        "std_itl_ms": itl_std,
        **{f"{percentile_key(p)}_itl_ms": t for p, t in zip(percentiles, itl_tails, strict=True)},
        **_stats("e2el", e2el, percentiles),
        "preemptions": round(run.preemptions * scale),
        "peak_kv_blocks": run.peak_blocks,
        "peak_running_seqs": run.peak_running,
    }
