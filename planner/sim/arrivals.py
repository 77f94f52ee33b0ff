"""Arrival-process bounds, and the benchmark clients' burstiness as a CV (no numpy: the
command line's edge reads it before any simulation runs)."""

from __future__ import annotations

import math

from planner.errors import InputError

# The burstiest arrivals a simulation takes (a workload's gamma CV, a benchmark load's): CV 20,
# a gamma shape of 1/400.
MAX_ARRIVAL_CV = 20.0


def cv_of_burstiness(burstiness: float, flag: str = "--burstiness") -> float:
    """The CV of gaps `vllm bench serve --burstiness B` draws: gamma gaps of shape B and mean
    1 / rate (vllm/benchmarks/serve.py), so CV 1 / sqrt(B); B = 1 is Poisson."""
    if not (math.isfinite(burstiness) and burstiness > 0):
        raise InputError(flag, f"must be a gamma shape > 0 (got {burstiness})")
    cv = 1.0 / math.sqrt(burstiness)
    if cv > MAX_ARRIVAL_CV:
        raise InputError(
            flag, f"at least {1 / MAX_ARRIVAL_CV**2:g} (CV {MAX_ARRIVAL_CV:g}; got {burstiness})"
        )
    return cv
