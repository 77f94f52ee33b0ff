"""Workloads (arrival process + length distributions) and the seeded traces drawn from them."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Literal

import numpy as np
from numpy.typing import NDArray
from pydantic import BaseModel, ConfigDict, Field, model_validator

from planner.errors import InputError


class LengthDist(BaseModel):
    """Token-length distribution, clipped to [min, max]."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    distribution: Literal["lognormal", "fixed", "uniform"] = "lognormal"
    median: float = Field(default=100, gt=0, description="lognormal median / fixed value")
    sigma: float = Field(default=1.0, ge=0, description="lognormal sigma (of the log)")
    min: int = Field(default=1, ge=1)
    max: int = Field(default=8192, ge=1)

    @model_validator(mode="after")
    def _bounds(self) -> LengthDist:
        if self.min > self.max:
            raise ValueError(f"min {self.min} > max {self.max}")
        return self

    def draw(self, rng: np.random.Generator, n: int) -> NDArray[np.int64]:
        """n lengths from this distribution, clipped to [min, max]."""
        if self.distribution == "fixed":
            raw = np.full(n, self.median)
        elif self.distribution == "uniform":
            raw = rng.uniform(self.min, self.max, n)
        else:
            raw = rng.lognormal(np.log(self.median), self.sigma, n)
        clipped: NDArray[np.int64] = np.clip(np.rint(raw), self.min, self.max).astype(np.int64)
        return clipped


class Workload(BaseModel):
    """A traffic description (presets/workloads/*.yaml)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    description: str = ""
    arrival: Literal["poisson", "uniform"] = "poisson"
    rate_per_s: float = Field(gt=0)
    requests: int = Field(gt=0)
    seed: int = 0
    prompt_tokens: LengthDist
    output_tokens: LengthDist
    shared_prefix_fraction: float = Field(default=0.0, ge=0, le=1)
    shared_prefix_tokens: int = Field(default=0, ge=0)


@dataclass(frozen=True)
class Trace:
    """Per-request arrays, sorted by arrival."""

    arrival_s: NDArray[np.float64]
    prompt_tokens: NDArray[np.int64]
    output_tokens: NDArray[np.int64]
    cached_prefix_tokens: NDArray[np.int64]  # prefix-cache hits skip these prompt tokens

    @property
    def size(self) -> int:
        """Number of requests."""
        return int(self.arrival_s.size)


def generate(w: Workload) -> Trace:
    """Draw a seeded trace: same workload and seed, same trace."""
    rng = np.random.default_rng(w.seed)
    n = w.requests
    if w.arrival == "poisson":
        gaps = rng.exponential(1.0 / w.rate_per_s, n)
    else:
        gaps = np.full(n, 1.0 / w.rate_per_s)
    arrival = np.cumsum(gaps) - gaps[0]
    prompt = w.prompt_tokens.draw(rng, n)
    output = w.output_tokens.draw(rng, n)
    cached = np.zeros(n, dtype=np.int64)
    if w.shared_prefix_fraction > 0 and w.shared_prefix_tokens > 0:
        share = rng.random(n) < w.shared_prefix_fraction
        prompt = np.where(share, prompt + w.shared_prefix_tokens, prompt)
        cached = np.where(share, w.shared_prefix_tokens, 0).astype(np.int64)
        cached[np.argmax(share)] = 0  # the first sharer computes the prefix and fills the cache
    return Trace(arrival, prompt, output, cached)


def load_trace(text: str, origin: str) -> Trace:
    """A JSONL trace: one `{"arrival_s", "prompt_tokens", "output_tokens"}` object per line."""
    rows: list[tuple[float, int, int]] = []
    for no, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        try:
            obj = json.loads(line)
            row = (float(obj["arrival_s"]), int(obj["prompt_tokens"]), int(obj["output_tokens"]))
        except (ValueError, KeyError, TypeError) as exc:
            raise InputError(
                "--trace",
                f"{origin} line {no}: expected {{arrival_s, prompt_tokens, output_tokens}}",
            ) from exc
        if row[0] < 0 or row[1] < 1 or row[2] < 1:
            raise InputError("--trace", f"{origin} line {no}: negative time or zero tokens")
        rows.append(row)
    if not rows:
        raise InputError("--trace", f"{origin}: no requests")
    rows.sort(key=lambda r: r[0])
    arr = np.array(rows, dtype=np.float64)
    n = len(rows)
    return Trace(
        arr[:, 0],
        arr[:, 1].astype(np.int64),
        arr[:, 2].astype(np.int64),
        np.zeros(n, dtype=np.int64),
    )
