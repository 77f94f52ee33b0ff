"""Workloads (arrival process + length distributions) and the seeded traces drawn from them."""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from typing import Any, Literal

import numpy as np
from numpy.typing import NDArray
from pydantic import BaseModel, ConfigDict, Field, model_validator

from planner.errors import InputError
from planner.sim.arrivals import MAX_ARRIVAL_CV
from planner.sim.gamma import gamma_gaps

# Bounds on traffic, far above what one simulation needs, low enough that a typo cannot exhaust
# the machine: a request longer than 2^24 tokens (16.8 M; the longest contexts served are 10 M),
# a generated workload of more than a million requests, or a trace file of more than half a
# million (a file is parsed as well as simulated; sample or split a longer one) is refused.
MAX_TRACE_REQUEST_TOKENS = 2**24
MAX_GENERATED_REQUESTS = 1_000_000
MAX_TRACE_REQUESTS = 500_000
# Arrival rates a simulation accepts: one request a day to a million a second.
MIN_RATE_PER_S = 1.0 / 86_400
MAX_RATE_PER_S = 1e6
# Arrival times beyond 10^12 s (~31,700 years) are not a trace.
MAX_TRACE_ARRIVAL_S = 1e12
# Measured lengths a workload file may list for one distribution.
MAX_EMPIRICAL_VALUES = 100_000

# The random stream the empty outputs are drawn from, apart from the lengths' and arrivals'
# (a share of empty outputs leaves every other draw of the same seed as it was).
EMPTY_OUTPUT_STREAM = 7


class LengthDist(BaseModel):
    """Token-length distribution, clipped to [min, max].

    "eos": outputs that stop at EOS before the length asked for (a benchmark without
    --ignore-eos): the model ends a sequence with the same chance after every token, so the
    lengths are geometric, capped at `max`, with that chance set so their mean is `mean`.
    "empirical": lengths drawn from measured `values`, each at most once while a run is no
    longer than the sample (a benchmark's own draw), with replacement beyond it."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    distribution: Literal["lognormal", "fixed", "uniform", "eos", "empirical"] = "lognormal"
    median: float = Field(
        default=100, gt=0, allow_inf_nan=False, description="lognormal median / fixed value"
    )
    mean: float | None = Field(
        default=None, ge=1, le=MAX_TRACE_REQUEST_TOKENS, allow_inf_nan=False,
        description="eos: the mean length the outputs stop at",
    )  # fmt: skip
    sigma: float = Field(
        default=1.0, ge=0, le=10, allow_inf_nan=False, description="lognormal sigma (of the log)"
    )
    min: int = Field(default=1, ge=1, le=MAX_TRACE_REQUEST_TOKENS)
    max: int = Field(default=8192, ge=1, le=MAX_TRACE_REQUEST_TOKENS)
    values: tuple[int, ...] = Field(
        default=(), max_length=MAX_EMPIRICAL_VALUES, description="empirical: measured lengths"
    )

    @model_validator(mode="after")
    def _bounds(self) -> LengthDist:
        if self.min > self.max:
            raise ValueError(f"min {self.min} > max {self.max}")
        if self.distribution == "eos" and (self.mean is None or self.mean >= self.max):
            raise ValueError(f"eos lengths need a mean below the cap {self.max}")
        if (self.distribution == "empirical") != bool(self.values):
            raise ValueError("measured values go with an empirical distribution, and only there")
        if self.values and not all(1 <= v <= MAX_TRACE_REQUEST_TOKENS for v in self.values):
            raise ValueError(f"empirical values must be in [1, {MAX_TRACE_REQUEST_TOKENS}]")
        return self

    def stop_probability(self) -> float:
        """eos: the chance of EOS after each token that gives lengths capped at `max` the
        mean `mean` (E[min(G, L)] = (1 - (1 - p)^L) / p for G geometric, by bisection)."""
        assert self.mean is not None
        cap, target = self.max, self.mean
        low, high = 0.0, 1.0
        for _ in range(100):
            p = (low + high) / 2
            mean = (1 - (1 - p) ** cap) / p if p > 0 else float(cap)
            low, high = (p, high) if mean > target else (low, p)
        return (low + high) / 2

    @classmethod
    def stopping_at_eos(cls, cap: int, mean: float) -> LengthDist:
        """Outputs that stop at EOS with mean `mean`, at most `cap` tokens; `median` is the
        distribution's own (the smallest k with 1 - (1 - p)^k >= 1/2), as the echo reports it."""
        eos = cls(distribution="eos", median=cap, max=cap, mean=mean)
        p = eos.stop_probability()
        median = math.ceil(math.log(0.5) / math.log1p(-p)) if p < 1 else 1
        return eos.model_copy(update={"median": float(min(cap, max(1, median)))})

    def measured(self) -> NDArray[np.int64]:
        """empirical: the measured lengths in their order, clipped to [min, max]."""
        return np.clip(np.asarray(self.values, dtype=np.int64), self.min, self.max)

    def draw(self, rng: np.random.Generator, n: int) -> NDArray[np.int64]:
        """n lengths from this distribution, clipped to [min, max]."""
        if self.distribution == "fixed":
            raw = np.full(n, self.median)
        elif self.distribution == "uniform":
            raw = rng.uniform(self.min, self.max, n)
        elif self.distribution == "eos":
            raw = rng.geometric(self.stop_probability(), n)
        elif self.distribution == "empirical":
            # a run no longer than the sample draws each measured length at most once
            raw = rng.choice(np.asarray(self.values), n, replace=n > len(self.values))
        else:
            raw = rng.lognormal(np.log(self.median), self.sigma, n)
        clipped: NDArray[np.int64] = np.clip(np.rint(raw), self.min, self.max).astype(np.int64)
        return clipped


class Workload(BaseModel):
    """A traffic description (presets/workloads/*.yaml)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    description: str = ""
    arrival: Literal["poisson", "uniform", "gamma"] = "poisson"
    cv: float = Field(
        default=1.0,
        gt=0,
        le=MAX_ARRIVAL_CV,
        description="gamma arrivals: coefficient of variation of gaps",
    )
    rate_per_s: float = Field(ge=MIN_RATE_PER_S, le=MAX_RATE_PER_S, allow_inf_nan=False)
    requests: int = Field(gt=0, le=MAX_GENERATED_REQUESTS)
    seed: int = Field(default=0, ge=0, description="numpy seeds are non-negative")
    prompt_tokens: LengthDist
    output_tokens: LengthDist
    shared_prefix_fraction: float = Field(default=0.0, ge=0, le=1, allow_inf_nan=False)
    shared_prefix_tokens: int = Field(default=0, ge=0, le=MAX_TRACE_REQUEST_TOKENS)
    empty_output_share: float = Field(
        default=0.0,
        ge=0,
        lt=1,
        allow_inf_nan=False,
        description="requests whose first token is EOS: no text (with_empty_outputs)",
    )
    paired: bool = Field(
        default=False,
        description="the measured prompt and output lists are one request each, in order "
        "(drawn together; an output of 1 is one that ended at its first token)",
    )
    source_model: str = Field(
        default="", max_length=200, description="the model whose outputs were measured"
    )

    def streamed_outputs(self) -> LengthDist:
        """The output lengths of the requests that stream text: a paired workload's measured
        list without its empty (one-token) outputs, else the output distribution itself."""
        if not self.paired:
            return self.output_tokens
        values = tuple(v for v in self.output_tokens.values if v > 1)
        return self.output_tokens.model_copy(update={"values": values})

    @model_validator(mode="after")
    def _pairs(self) -> Workload:
        if not self.paired:
            return self
        prompts, outputs = self.prompt_tokens.values, self.output_tokens.values
        if not prompts or len(prompts) != len(outputs):
            raise ValueError("paired lengths need measured prompt and output lists of one size")
        empty = sum(1 for v in outputs if v == 1) / len(outputs)
        if abs(empty - self.empty_output_share) > 0.5 / len(outputs):
            raise ValueError(
                f"empty_output_share {self.empty_output_share:g} != the paired outputs' "
                f"share of one-token (empty) outputs {empty:.3g}"
            )
        return self

    def summary(self) -> str:
        """One line describing these exact settings (echoed in reports)."""

        def dist(d: LengthDist) -> str:
            if d.distribution == "fixed":
                return f"fixed {d.median:g}"
            if d.distribution == "uniform":
                return f"uniform {d.min}-{d.max}"
            if d.distribution == "eos":
                return f"stops at EOS (mean {d.mean:g}), at most {d.max}"
            if d.distribution == "empirical":
                return f"measured ({len(d.values):,} lengths, mean {np.mean(d.values):.0f})"
            return f"lognormal (median {d.median:g}, sigma {d.sigma:g})"

        text = (
            f"{self.requests:,} requests, {self.arrival.capitalize()} {self.rate_per_s:g} req/s, "
            f"prompt {dist(self.prompt_tokens)}, output {dist(self.output_tokens)}"
        )
        if self.shared_prefix_fraction and self.shared_prefix_tokens:
            text += (
                f", {self.shared_prefix_fraction:.0%} share a {self.shared_prefix_tokens:,}-token "
                "prefix"
            )
        if self.paired:
            text += ", paired request by request"
        if self.source_model:
            text += f", outputs of {self.source_model}"
        if self.empty_output_share:
            text += f", {self.empty_output_share:.0%} end at their first token (no text)"
        return text


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

    def subset(self, keep: NDArray[np.bool_] | NDArray[np.int64]) -> Trace:
        """The requests where `keep` is true (or at its indices), in order."""
        return Trace(
            self.arrival_s[keep],
            self.prompt_tokens[keep],
            self.output_tokens[keep],
            self.cached_prefix_tokens[keep],
        )

    def share(self, ranks: int) -> Trace:
        """One of `ranks` data-parallel ranks' requests, dealt round-robin (every `ranks`-th,
        from the first), as a load balancer deals a benchmark's requests."""
        if ranks <= 1:
            return self
        return self.subset(np.arange(self.size) % ranks == 0)


def generate(w: Workload) -> Trace:
    """Draw a seeded trace: same workload and seed, same trace."""
    rng = np.random.default_rng(w.seed)
    n = w.requests
    if w.arrival == "poisson":
        gaps = rng.exponential(1.0 / w.rate_per_s, n)
    elif w.arrival == "gamma":
        # Gamma gaps with the same mean and CV `cv` (shape 1/cv^2): bursts at CV > 1, drawn by
        # inverting the same uniforms at every CV >= 1 (planner.sim.gamma: coupled traces)
        shape = 1.0 / (w.cv * w.cv)
        if shape <= 1:
            gaps = gamma_gaps(1.0 - rng.random(n), shape) / w.rate_per_s
        else:
            gaps = rng.gamma(shape, 1.0 / (w.rate_per_s * shape), n)
    else:
        gaps = np.full(n, 1.0 / w.rate_per_s)
    arrival = np.cumsum(gaps) - gaps[0]
    if w.paired:
        # one draw of requests (each at most once while the run fits the sample), both lengths
        pick = rng.choice(len(w.prompt_tokens.values), n, replace=n > len(w.prompt_tokens.values))
        prompt = w.prompt_tokens.measured()[pick]
        output = w.output_tokens.measured()[pick]
    else:
        prompt = w.prompt_tokens.draw(rng, n)
        output = w.output_tokens.draw(rng, n)
    trace = Trace(arrival, prompt, output, np.zeros(n, dtype=np.int64))
    trace = with_shared_prefix(trace, w.shared_prefix_fraction, w.shared_prefix_tokens, rng)
    if w.paired:
        return trace  # its empty outputs are the measured ones
    return with_empty_outputs(trace, w.empty_output_share, w.seed)


def with_means(
    trace: Trace, prompt_mean: float | None, output_mean: float | None, keep_empty: bool = False
) -> Trace:
    """The trace with its prompt and / or output lengths scaled (each rounded, at least one
    token) so their mean is the one given: a benchmark run reports the lengths it produced,
    and outputs that stop at EOS run shorter than the dataset's reference completions.
    `keep_empty`: the one-token outputs are measured empty ones (a paired workload's): they
    stay one token and the others are scaled (at least two) to give the whole the mean."""

    def scaled(tokens: NDArray[np.int64], mean: float | None, fixed: int = 0) -> NDArray[np.int64]:
        if mean is None or tokens.size == 0:
            return tokens
        keep = tokens <= fixed
        rest = float(tokens[~keep].sum())
        if rest <= 0:
            return tokens
        factor = max(0.0, mean * tokens.size - float(tokens[keep].sum())) / rest
        out = np.where(keep, tokens, np.maximum(1 + fixed, np.rint(tokens * factor)))
        return out.astype(np.int64)

    prompt = scaled(trace.prompt_tokens, prompt_mean)
    return Trace(
        trace.arrival_s,
        prompt,
        scaled(trace.output_tokens, output_mean, 1 if keep_empty else 0),
        np.minimum(trace.cached_prefix_tokens, prompt),  # a prefix is never longer than its prompt
    )


def without_empty_outputs(trace: Trace, streamed: LengthDist, seed: int) -> Trace:
    """A paired trace's measured empty outputs given lengths drawn from the ones that streamed
    text (seeded): a share of empty outputs asked for instead of the measured ones is drawn
    afresh over every request (with_empty_outputs)."""
    empty = trace.output_tokens == 1
    if not empty.any():
        return trace
    drawn = streamed.draw(np.random.default_rng([seed, EMPTY_OUTPUT_STREAM]), int(empty.sum()))
    output = trace.output_tokens.copy()
    output[empty] = drawn
    return Trace(trace.arrival_s, trace.prompt_tokens, output, trace.cached_prefix_tokens)


# SGLang's bench_serving draws its random dataset's lengths with NumPy's legacy generator seeded
# by its --seed (default 1): inputs randint(max(int(L x r), 1), L + 1), then outputs
# randint(int(O x r), O + 1), r being --random-range-ratio (python/sglang/bench_serving.py,
# sample_random_requests). The SGLang cookbook's printed runs bear it out to the token
# (sgl-project/sgl-cookbook @7b5bd9c, docs/autoregressive/MiniMax/MiniMax-M2.7.md, 1,000 / 1,000
# at the default ratio 0): 10 prompts hold 6,101 input tokens and 500 hold 249,831, and the
# outputs 4,210 and 252,162 generated tokens (the client counts one more a request: 4,220 and
# 252,662).
SGLANG_BENCH_SEED = 1


def sglang_random_lengths(
    n: int, input_len: int, output_len: int, ratio: float, seed: int = SGLANG_BENCH_SEED
) -> tuple[NDArray[np.int64], NDArray[np.int64]]:
    """The prompt and output lengths SGLang's bench_serving asks for with its random dataset:
    its own draw at its --seed `seed`, request for request; an output may be drawn as 0
    tokens."""
    rng = np.random.RandomState(seed)
    prompt = rng.randint(max(int(input_len * ratio), 1), input_len + 1, size=n)
    output = rng.randint(int(output_len * ratio), output_len + 1, size=n)
    return prompt.astype(np.int64), output.astype(np.int64)


def with_sglang_random_lengths(
    trace: Trace, input_len: int, output_len: int, ratio: float, seed: int
) -> Trace:
    """The trace with the lengths SGLang's bench_serving sends for its random dataset
    (sglang_random_lengths at `seed`): an output drawn as 0 tokens still streams its first,
    and a cached prefix is never longer than its new prompt."""
    prompt, output = sglang_random_lengths(trace.size, input_len, output_len, ratio, seed)
    return Trace(
        trace.arrival_s,
        prompt,
        np.maximum(output, 1),
        np.minimum(trace.cached_prefix_tokens, prompt),
    )


def with_empty_outputs(trace: Trace, share: float, seed: int) -> Trace:
    """The trace with a seeded `share` of its requests ending at their first token (the model
    samples EOS at once: one engine token, no text), every other output at least two tokens
    (a text token and the EOS after it), so a one-token output is an empty one."""
    if share <= 0 or trace.size == 0:
        return trace
    rng = np.random.default_rng([seed, EMPTY_OUTPUT_STREAM])
    empty = rng.random(trace.size) < share
    output = np.where(empty, 1, np.maximum(trace.output_tokens, 2)).astype(np.int64)
    return Trace(trace.arrival_s, trace.prompt_tokens, output, trace.cached_prefix_tokens)


def with_shared_prefix(
    trace: Trace, fraction: float, tokens: int, rng: np.random.Generator
) -> Trace:
    """A seeded `fraction` of requests gain a common `tokens`-long prefix that the prefix cache
    serves after the first of them has computed it."""
    if fraction <= 0 or tokens <= 0:
        return trace
    n = trace.size
    share = rng.random(n) < fraction
    prompt = np.where(share, trace.prompt_tokens + tokens, trace.prompt_tokens)
    cached = np.where(share, tokens, 0).astype(np.int64)
    cached[np.argmax(share)] = 0  # the first sharer computes the prefix and fills the cache
    return Trace(trace.arrival_s, prompt, trace.output_tokens, cached)


def _trace_number(obj: dict[str, Any], key: str, where: str, integer: bool) -> float:
    """One field of a trace row: a finite number in range (tokens whole and >= 1)."""
    if key not in obj:
        raise InputError("--trace", f"{where}: missing {key}")
    value = obj[key]
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise InputError("--trace", f"{where}: {key} must be a number")
    if isinstance(value, float) and not math.isfinite(value):
        raise InputError("--trace", f"{where}: {key} must be finite")
    if isinstance(value, int) and abs(value) > 2**53:
        raise InputError("--trace", f"{where}: {key} is out of range")
    if integer:
        if value != int(value) or not 1 <= value <= MAX_TRACE_REQUEST_TOKENS:
            raise InputError(
                "--trace",
                f"{where}: {key} must be a whole number in [1, {MAX_TRACE_REQUEST_TOKENS:,}]",
            )
    elif not 0 <= value <= MAX_TRACE_ARRIVAL_S:
        raise InputError("--trace", f"{where}: {key} must be in [0, {MAX_TRACE_ARRIVAL_S:g}] s")
    return float(value)


TRACE_FIELDS = ("arrival_s", "prompt_tokens", "output_tokens")


def _fast_trace(lines: list[str]) -> Trace | None:
    """The whole trace parsed in one JSON call and checked with numpy, or None when anything
    is off (then the line-by-line reader finds and names the line)."""
    body = [ln for ln in lines if ln.strip()]
    if not body or len(body) > MAX_TRACE_REQUESTS:
        return None
    try:
        rows = json.loads("[" + ",".join(body) + "]")
    except (ValueError, RecursionError):
        return None
    if len(rows) != len(body) or not all(type(r) is dict for r in rows):
        return None
    columns = []
    for key in TRACE_FIELDS:
        values = [r.get(key) for r in rows]
        if not all(type(v) is int or type(v) is float for v in values):
            return None
        try:
            columns.append(np.asarray(values, dtype=np.float64))
        except OverflowError:  # an integer beyond any float: the line reader names it
            return None
    arrival, prompt, output = columns
    if not (np.isfinite(arrival).all() and arrival.min() >= 0):
        return None
    if arrival.max() > MAX_TRACE_ARRIVAL_S:
        return None
    for tokens in (prompt, output):
        whole = np.isfinite(tokens).all() and (tokens == np.rint(tokens)).all()
        if not whole or tokens.min() < 1 or tokens.max() > MAX_TRACE_REQUEST_TOKENS:
            return None
    order = np.argsort(arrival, kind="stable")
    return Trace(
        arrival[order],
        prompt.astype(np.int64)[order],
        output.astype(np.int64)[order],
        np.zeros(arrival.size, dtype=np.int64),
    )


def load_trace(text: str, origin: str) -> Trace:
    """A JSONL trace: one `{"arrival_s", "prompt_tokens", "output_tokens"}` object per line."""
    lines = text.splitlines()
    if len(lines) > MAX_TRACE_REQUESTS and sum(1 for ln in lines if ln.strip()) > (
        MAX_TRACE_REQUESTS
    ):
        raise InputError(
            "--trace",
            f"{origin}: more than {MAX_TRACE_REQUESTS:,} requests; sample or split the trace",
        )
    fast = _fast_trace(lines)
    if fast is not None:
        return fast
    arrival: list[float] = []
    prompt: list[float] = []
    output: list[float] = []
    for no, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        where = f"{origin} line {no}"
        try:
            obj = json.loads(line)
        except RecursionError as exc:
            raise InputError("--trace", f"{where}: nested too deeply") from exc
        except ValueError as exc:
            raise InputError(
                "--trace", f"{where}: expected {{arrival_s, prompt_tokens, output_tokens}}"
            ) from exc
        if not isinstance(obj, dict):
            raise InputError(
                "--trace", f"{where}: expected {{arrival_s, prompt_tokens, output_tokens}}"
            )
        if len(arrival) >= MAX_TRACE_REQUESTS:
            raise InputError("--trace", f"{origin}: more than {MAX_TRACE_REQUESTS:,} requests")
        arrival.append(_trace_number(obj, "arrival_s", where, integer=False))
        prompt.append(_trace_number(obj, "prompt_tokens", where, integer=True))
        output.append(_trace_number(obj, "output_tokens", where, integer=True))
    if not arrival:
        raise InputError("--trace", f"{origin}: no requests")
    order = np.argsort(np.asarray(arrival), kind="stable")
    return Trace(
        np.asarray(arrival, dtype=np.float64)[order],
        np.asarray(prompt, dtype=np.int64)[order],
        np.asarray(output, dtype=np.int64)[order],
        np.zeros(len(arrival), dtype=np.int64),
    )
