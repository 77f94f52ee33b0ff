"""The step model: how long one engine step takes, built from the operations of a forward pass,
one module per family of operations (docs/method.md §3).

    family    GPU families and whether their constants were fitted or extrapolated
    gemm      dense GEMMs: weights read, tensor-core work at the weights' dtype rate
    attention decode KV reads and prefill attention FLOPs
    moe       experts routed to, the busiest expert-parallel rank, routing kernels, the
              exchange a deployment's flags set (all-to-all, expert split, overlap)
    comm      tensor-parallel all-reduce, pipeline sends, the links they use
    attention_dp  data-parallel attention groups, and the dense weights kept outside them
    overhead  kernels per layer and the engine's per-step overhead
    launch    steps outside the CUDA graphs: the host's kernel launches as their floor
    model     StepTime: the operations summed as the GPU runs them

    t(B, ctx) = hypot(weights, compute) per class of linear layers + attention + kernels
                + all-reduce + engine overhead

Constants were fitted on public measurements (benchmarks/data/step-time.jsonl: LMDeploy on
A100, vLLM on H100 and A100, with sources) and checked against an ideal-step floor measured on
an H200; benchmarks/step_time.py prints the errors.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from planner.core.step.model import StepTerms, StepTime, step_time_for

__all__ = ["StepTerms", "StepTime", "step_time_for"]


def __getattr__(name: str) -> Any:
    """The model's names, imported on first use: the engine models read release facts from
    `overhead` without loading the whole step model on `planner capacity`'s start-up path."""
    if name in __all__:
        from planner.core.step import model

        return getattr(model, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
