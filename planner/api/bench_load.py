"""A benchmark's load and lengths as `vllm bench serve` / SGLang `bench_serving` pose them
(closed loop or an arrival rate; fixed, ranged or dataset lengths), speculation's settings,
and the request trace they make."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal, NamedTuple

from pydantic import BaseModel, ConfigDict, Field

from planner.errors import InputError
from planner.sim.arrivals import MAX_ARRIVAL_CV
from planner.sim.config import MAX_SPEC_K

if TYPE_CHECKING:
    from planner.sim.bench import EmptyCounting
    from planner.sim.workload import LengthDist, Trace, Workload


# vllm bench serve's default --num-prompts (vllm/benchmarks/serve.py).
DEFAULT_BENCH_REQUESTS = 1000
# A closed loop runs at least this many requests per client by default, so the steady state
# outweighs the ramp at the start and the drain at the end (a benchmark's own choice; the
# public sweeps use 5-10 per client, and the SGLang cookbook's "standard benchmark" is
# num_prompts = concurrency x 5: sgl-project/sgl-cookbook, docs/autoregressive/DeepSeek/
# DeepSeek-R1.md).
REQUESTS_PER_CLIENT = 5


# vLLM's sonnet dataset (vllm/benchmarks/datasets.py SonnetDataset, 0.14.0, deprecated there;
# the 2024 benchmark_serving.py's alike): each prompt an instruction and the poem's same opening
# lines (about --sonnet-prefix-len tokens, shared by every request), then lines drawn to at most
# --sonnet-input-len tokens in all; outputs of --sonnet-output-len. Its defaults:
SONNET_INPUT_LEN = 550
SONNET_PREFIX_LEN = 200
SONNET_OUTPUT_LEN = 150
# sglang.bench_serving's generated-shared-prefix dataset (python/sglang/bench_serving.py,
# 0.5.13): --gsp-num-groups groups of --gsp-prompts-per-group prompts, each its group's random
# system prompt of --gsp-system-prompt-len tokens then its own question of --gsp-question-len,
# shuffled across groups, outputs of --gsp-output-len (the client ignores EOS by default); it
# sends groups x prompts per group requests, whatever --num-prompts says. Its defaults:
GSP_NUM_GROUPS = 64
GSP_PROMPTS_PER_GROUP = 16
GSP_SYSTEM_PROMPT_LEN = 2048
GSP_QUESTION_LEN = 128
GSP_OUTPUT_LEN = 256


@dataclass(frozen=True)
class Posed:
    """The benchmark as the client runs it: its requests (`trace`, drawn from `load` and
    `lengths`; `echo`, the workload as the output states it), `closed` clients of a closed loop
    (None: an open loop at the load's rate), whether a rate paces the clients (`paced`), the
    tail figures it prints, what it counts of an empty output, and its client (None: the
    engine's own)."""

    trace: Trace
    echo: dict[str, Any]
    load: Load
    lengths: Lengths
    closed: int | None
    paced: bool
    percentiles: tuple[float, ...]
    empty: EmptyCounting
    client: str | None

    def swept(self, clients: int, client: str) -> Trace:
        """The requests of a concurrency sweep's point at `clients`: the load's number, else
        a quarter of the default run or REQUESTS_PER_CLIENT a client, drawn as the run's by
        `client` (resolved: bench_instance.bench_client_of)."""
        if clients < 1:
            raise InputError("--sweep", "concurrency values must be >= 1")
        requests = self.load.requests or max(
            DEFAULT_BENCH_REQUESTS // 4, REQUESTS_PER_CLIENT * clients
        )
        trace, _ = bench_trace(
            self.load.model_copy(update={"requests": requests}), self.lengths, client
        )
        return trace


class SharedPrefixRun(NamedTuple):
    """A shared-prefix dataset's requests in the planner's terms: each prompt's own tokens after
    one of `prefixes` shared prefixes of `prefix_tokens` (--prefix-share 1), fixed outputs, and
    the requests it sends (None: the run's own count)."""

    prompt_len: int
    output_len: int
    prefix_tokens: int
    prefixes: int
    requests: int | None


def _bounded(flag: str, value: int, top: int) -> int:
    """A dataset flag's token or request count, in [1, top], else one error naming the flag."""
    if not 1 <= value <= top:
        raise InputError(flag, f"must be in [1, {top:,}] (got {value:,})")
    return value


def sonnet_run(
    input_len: int | None, prefix_len: int | None, output_len: int | None
) -> SharedPrefixRun:
    """vLLM's sonnet dataset (its defaults where None): prompts of `input_len` tokens whose first
    `prefix_len` every request shares."""
    from planner.sim.workload import MAX_TRACE_REQUEST_TOKENS as top

    total = _bounded(
        "--sonnet-input-len", SONNET_INPUT_LEN if input_len is None else input_len, top
    )
    shared = _bounded(
        "--sonnet-prefix-len", SONNET_PREFIX_LEN if prefix_len is None else prefix_len, top
    )
    if total <= shared:
        raise InputError(
            "--sonnet-input-len",
            f"{total:,} tokens must pass the {shared:,}-token shared prefix (--sonnet-prefix-len)",
        )
    out = SONNET_OUTPUT_LEN if output_len is None else output_len
    return SharedPrefixRun(
        total - shared, _bounded("--sonnet-output-len", out, top), shared, 1, None
    )


def gsp_run(
    groups: int | None,
    per_group: int | None,
    system_len: int | None,
    question_len: int | None,
    output_len: int | None,
) -> SharedPrefixRun:
    """sglang.bench_serving's generated-shared-prefix dataset (its defaults where None)."""
    from planner.sim.workload import MAX_GENERATED_REQUESTS, MAX_TRACE_REQUEST_TOKENS

    def given(flag: str, value: int | None, default: int, top: int) -> int:
        return _bounded(flag, default if value is None else value, top)

    tokens, requests = MAX_TRACE_REQUEST_TOKENS, MAX_GENERATED_REQUESTS
    g = given("--gsp-num-groups", groups, GSP_NUM_GROUPS, requests)
    per = given("--gsp-prompts-per-group", per_group, GSP_PROMPTS_PER_GROUP, requests // g)
    system = given("--gsp-system-prompt-len", system_len, GSP_SYSTEM_PROMPT_LEN, tokens)
    question = given("--gsp-question-len", question_len, GSP_QUESTION_LEN, tokens)
    out = given("--gsp-output-len", output_len, GSP_OUTPUT_LEN, tokens)
    return SharedPrefixRun(question, out, system, g, g * per)


class Load(BaseModel):
    """The benchmark's load: a closed loop of N clients, or an arrival rate."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    concurrency: int | None = Field(default=None, gt=0, le=1_000_000)
    rate_per_s: float | None = Field(default=None, gt=0, allow_inf_nan=True)
    cv: float | None = Field(default=None, gt=0, le=MAX_ARRIVAL_CV)
    requests: int | None = Field(default=None, gt=0, le=1_000_000)
    seed: int | None = Field(
        default=None, ge=0, description="None: the planner's 0, or the client's own default"
    )

    def trace_seed(self) -> int:
        """The seed the planner's own draws take (0 unless given)."""
        return 0 if self.seed is None else self.seed


class Lengths(BaseModel):
    """Prompt and output lengths: fixed (`--prompt-len/--output-len`), ranged
    (`--len-range F`: uniform in [F x L, L]) or a workload preset's distributions."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    workload: str | None = None
    prompt_len: int | None = Field(default=None, gt=0, le=2**24)
    output_len: int | None = Field(default=None, gt=0, le=2**24)
    len_range: float | None = Field(default=None, ge=0, le=1)
    len_spread: float | None = Field(default=None, ge=0, lt=1)
    trace: str | None = None
    prompt_mean: float | None = Field(default=None, ge=1, le=2**24)
    output_mean: float | None = Field(default=None, ge=1, le=2**24)
    empty_share: float | None = Field(
        default=None,
        ge=0,
        lt=1,
        description="share of requests whose first token is EOS: no text, one engine step "
        "after the prefill (the rest stream at least one token)",
    )


# A draft forward dearer than ten target steps is no draft (its c: a draft model's step over
# the target's): above it, a typo.
MAX_DRAFT_COST = 10.0


class Speculation(BaseModel):
    """Speculative decoding in the benchmark: each sequence's draft proposes `k` tokens a step,
    each accepted with probability `alpha` (the first rejection ends the run), each draft
    forward costing `draft_cost` x a plain target step (an EAGLE head ~0.05; a draft model its
    own step over the target's)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    alpha: float = Field(ge=0, le=1)
    k: int = Field(default=4, ge=1, le=MAX_SPEC_K)
    draft_cost: float = Field(default=0.05, ge=0, le=MAX_DRAFT_COST)
    method: str = Field(
        default="eagle3",
        description="the engines' speculation method the launch line names (planner.core."
        "flags.SPEC_METHODS), as `planner spec` and `capacity --spec-method` take it",
    )


def _check_means(lengths: Lengths) -> None:
    """Refuse --prompt-mean / --output-mean where they cannot rescale the lengths: on a
    --trace, on a fixed prompt length, or an output mean at or above a fixed output cap."""
    for flag, mean, fixed in (
        ("--prompt-mean", lengths.prompt_mean, lengths.prompt_len),
        ("--output-mean", lengths.output_mean, lengths.output_len),
    ):
        if mean is None:
            continue
        if lengths.trace is not None:
            raise InputError(flag, "rescales a generated workload; a --trace keeps its lengths")
        ranged_lengths = (lengths.len_range is not None and lengths.len_range < 1) or bool(
            lengths.len_spread
        )
        if fixed is not None and not ranged_lengths:
            if flag == "--prompt-mean":
                raise InputError(flag, "rescales a length distribution; a fixed length is its mean")
            if mean >= fixed:
                raise InputError(
                    flag, f"with --output-len, outputs stop at EOS: give a mean below {fixed}"
                )


def _length_dist(
    length: int | None, current: LengthDist, lengths: Lengths, ranged: str
) -> LengthDist:
    """One side's lengths: the workload's (`current`) where no length is given, else `length`
    fixed, uniform in [L x ratio, L] (--len-range, SGLang's and the 2024 script's range ratio)
    or in [L (1 - r), L (1 + r)] (--len-spread, vllm bench serve's); `ranged` names the flag."""
    from planner.sim.workload import LengthDist

    ratio, spread = lengths.len_range, lengths.len_spread
    if length is None:
        if (ratio is not None or spread is not None) and lengths.workload is None:
            raise InputError(ranged, "needs --prompt-len and --output-len")
        return current
    if spread:  # vllm bench serve: uniform in [L (1 - r), L (1 + r)]
        low, high = max(1, int(length * (1 - spread))), int(length * (1 + spread))
        return LengthDist(distribution="uniform", median=length, min=low, max=high)
    if ratio is None or ratio >= 1:
        return LengthDist(distribution="fixed", median=length, min=length, max=length)
    low = max(1, int(length * ratio))
    return LengthDist(distribution="uniform", median=length, min=low, max=length)


class _Drawn(NamedTuple):
    """How a generated trace was drawn, as its description reports it: the workload, its rate
    (inf: a closed loop or every request at once), the output mean it was scaled to (None: not
    scaled), whether the workload's measured empty outputs were kept, the empty share, and the
    seed of SGLang's own length draw (None: not drawn so)."""

    workload: Workload
    rate_per_s: float
    output_mean: float | None
    measured_empty: bool
    empty_share: float
    sglang_seed: int | None


def _described(drawn: _Drawn, load: Load, lengths: Lengths) -> dict[str, Any]:
    """The echo of a generated run's requests (the workload's fields as the run drew them) with
    its one-line description: the arrival process the load gives them (paced, closed loop or
    every request at once), the means they were scaled to, the empty outputs and SGLang's own
    length draw."""
    w, rate, output_mean = drawn.workload, drawn.rate_per_s, drawn.output_mean
    measured_empty, empty_share = drawn.measured_empty, drawn.empty_share
    echo = w.model_dump(
        exclude={
            "description",
            "shared_prefix_fraction",
            "shared_prefix_tokens",
            "empty_output_share",
            "paired",
            "source_model",
        }
    )
    if w.paired:
        echo.update(paired=True, source_model=w.source_model)
    # a paired workload's own share of empty outputs, unless another was drawn in its place
    summary = (w if measured_empty else w.model_copy(update={"empty_output_share": 0.0})).summary()
    if load.concurrency is not None and math.isfinite(rate):
        # paced: released at the rate, at most N in flight (vllm bench serve's semaphore)
        summary = summary.replace(" req/s,", f" req/s, at most {load.concurrency:,} in flight,", 1)
        echo["max_concurrency"] = load.concurrency
    elif load.concurrency is not None or load.rate_per_s is None or not math.isfinite(rate):
        # the arrival process is not the workload's: say only what the requests are
        summary = f"{w.requests:,} requests, " + summary.split(", ", 2)[-1]
        echo["arrival"] = "closed loop" if load.concurrency is not None else "all at t = 0"
        echo.pop("rate_per_s")
        echo.pop("cv")
    for name, mean in (("prompt", lengths.prompt_mean), ("output", output_mean)):
        if mean is not None:
            summary += f", {name}s scaled to mean {mean:g}"
            echo[f"{name}_mean"] = mean
    if empty_share:
        if not measured_empty:  # the measured share is in the workload's summary
            summary += f", {empty_share:.0%} end at their first token (no text)"
        echo["empty_output_share"] = empty_share
    if drawn.sglang_seed is not None:
        seed = drawn.sglang_seed
        summary += f", the lengths sglang.bench_serving draws at --seed {seed}"
        echo["length_sampler"] = f"sglang.bench_serving --seed {seed}"
    echo["description"] = summary
    return echo


def bench_trace(
    load: Load, lengths: Lengths, client: str | None = None
) -> tuple[Trace, dict[str, Any]]:
    """The requests to send and a description of them. SGLang's client (`client` "sglang")
    sends its random dataset's lengths as it draws them (planner.sim.workload.
    with_sglang_random_lengths), request for request at its seed."""
    import numpy as np

    from planner.api.simulate import load_workload
    from planner.sim.workload import (
        SGLANG_BENCH_SEED,
        LengthDist,
        Workload,
        generate,
        load_trace,
        with_empty_outputs,
        with_means,
        with_sglang_random_lengths,
        without_empty_outputs,
    )

    _check_means(lengths)
    if lengths.trace is not None and lengths.empty_share:
        raise InputError("--empty-outputs", "draws on a generated workload; a --trace has its own")
    if lengths.trace is not None:
        from planner.sources.files import TRACE_LIMIT_BYTES, read_text

        trace = load_trace(read_text(lengths.trace, "--trace", TRACE_LIMIT_BYTES), lengths.trace)
        return trace, {"trace": lengths.trace, "requests": trace.size}
    base = load_workload(lengths.workload or "reference")
    prompt, output = base.prompt_tokens, base.output_tokens
    ratio, spread = lengths.len_range, lengths.len_spread
    if ratio is not None and spread is not None:
        raise InputError("--len-spread", "give --len-range or --len-spread, not both")
    ranged = "--len-range" if ratio is not None else "--len-spread"

    prompt = _length_dist(lengths.prompt_len, prompt, lengths, ranged)
    output = _length_dist(lengths.output_len, output, lengths, ranged)
    output_mean = lengths.output_mean
    if output.distribution == "fixed" and output_mean is not None:
        # --output-len L --output-mean M: run without --ignore-eos, stopping at EOS before L
        output = LengthDist.stopping_at_eos(output.max, output_mean)
        output_mean = None
    requests = load.requests
    if requests is None:
        requests = DEFAULT_BENCH_REQUESTS
        if load.concurrency is not None:
            requests = max(requests, REQUESTS_PER_CLIENT * load.concurrency)
    arrival: Literal["poisson", "gamma"] = "poisson"
    if load.cv is not None and load.cv != 1.0:
        arrival = "gamma"
    rate = load.rate_per_s if load.rate_per_s and math.isfinite(load.rate_per_s) else math.inf
    # a measured workload's pairs hold while both its lists are drawn; either replaced, its
    # outputs are the ones that streamed text, drawn apart from the prompts
    paired = base.paired and prompt is base.prompt_tokens and output is base.output_tokens
    if base.paired and not paired and output is base.output_tokens:
        output = base.streamed_outputs()
    w = Workload(
        arrival=arrival,
        cv=load.cv or 1.0,
        rate_per_s=rate if math.isfinite(rate) else 1.0,  # unused: closed loop or all at once
        requests=requests,
        seed=load.trace_seed(),
        prompt_tokens=prompt,
        output_tokens=output,
        paired=paired,
        empty_output_share=base.empty_output_share if paired else 0.0,
        source_model=base.source_model if paired else "",
    )
    trace = generate(w)
    # SGLang's client sends its random dataset's own draw (uniform lengths from a range ratio)
    sglang_seed = SGLANG_BENCH_SEED if load.seed is None else load.seed
    uniform = ratio is not None and ratio < 1 and output.distribution == "uniform"
    sglang_drawn = False
    if client == "sglang" and uniform and lengths.prompt_len and lengths.output_len:
        trace = with_sglang_random_lengths(
            trace, lengths.prompt_len, lengths.output_len, ratio or 0.0, sglang_seed
        )
        sglang_drawn = True
    # a paired trace keeps its measured empty outputs unless another share is asked for
    measured_empty = paired and lengths.empty_share is None
    trace = with_means(trace, lengths.prompt_mean, output_mean, keep_empty=measured_empty)
    # after the means (a one-token output is an empty one): the share asked for, else the
    # workload's own
    empty_share = base.empty_output_share if lengths.empty_share is None else lengths.empty_share
    if paired and not measured_empty:
        trace = without_empty_outputs(trace, base.streamed_outputs(), load.trace_seed())
    if not measured_empty:
        trace = with_empty_outputs(trace, empty_share, load.trace_seed())
    if load.rate_per_s is not None and not math.isfinite(load.rate_per_s):
        trace = type(trace)(
            np.zeros(trace.size),
            trace.prompt_tokens,
            trace.output_tokens,
            trace.cached_prefix_tokens,
        )
    drawn = _Drawn(
        w, rate, output_mean, measured_empty, empty_share, sglang_seed if sglang_drawn else None
    )
    return trace, _described(drawn, load, lengths)
