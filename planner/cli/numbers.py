"""The command line's number edge: every float option is finite, every int option is bounded.

Each command is registered through `checked`, which validates the parsed arguments before the
command body runs. Range rules that belong to one option (> 0, a share in [0, 1]) stay with
that option's validator; this layer refuses what no option can honour.
"""

from __future__ import annotations

import functools
import inspect
import math
from collections.abc import Callable
from typing import TYPE_CHECKING, Annotated, Any, TypeVar, get_args, get_origin

import typer

from planner.errors import InputError
from planner.sim.arrivals import cv_of_burstiness

if TYPE_CHECKING:
    from planner.sim.prefix import PrefixShare

# The largest int the planner accepts on the command line: every int it takes (tokens, bytes,
# counts) must convert to a float exactly, so numpy and JSON consumers see the same value.
MAX_CLI_INT = 2**53

# No accelerator has a pebibyte (2^20 GiB) of memory: a larger figure is a typo.
MAX_GPU_MEMORY_GIB = 2**20

F = TypeVar("F", bound=Callable[..., Any])


# --json, as every command that prints one object declares it.
JsonOut = Annotated[bool, typer.Option("--json", help="Print one JSON object.")]
# --kv-dtype, as slo, spec and calibrate declare it (capacity and simulate name the engines'
# own spellings beside it).
KvDtype = Annotated[
    str | None, typer.Option("--kv-dtype", "--kv-cache-dtype", help="KV cache dtype.")
]


# --reserved-gib, as capacity and fleet declare it.
ReservedGib = Annotated[
    float | None,
    typer.Option(help="GiB other processes hold on each GPU (a co-located trainer, LMCache)."),
]


# --timeout, as every command that can read a --model Hub id declares it.
HubTimeout = Annotated[
    float | None,
    typer.Option("--timeout", help="Seconds to wait for the Hub when --model is a Hub id [10]."),
]

# The engine's memory share, in either engine's spelling, as every command that plans a
# deployment's pool takes it (simulate, slo, spec; capacity keeps the two engine flags apart).
MemoryFraction = Annotated[
    float | None,
    typer.Option(
        "--gpu-memory-utilization",
        "--mem-fraction-static",
        help="Share of GPU memory the engine may take (vLLM) / its static pool takes "
        "(SGLang) (default: the engine's).",
    ),
]

# --revision, as every command that reads a --model takes it: the Hub revision its config is
# read at (capacity, simulate, slo, spec and fleet plan one deployment from one config).
Revision = Annotated[
    str | None, typer.Option(help="Hub revision of --model (branch, tag, commit).")
]


# --prefix-share / --prefix-tokens / --prefixes, as simulate and fleet declare them.
PrefixShareOption = Annotated[
    float | None,
    typer.Option(help="Share of requests opening with a shared prefix (prefix cache tiers)."),
]
PrefixTokens = Annotated[int | None, typer.Option(help="Shared prefix length, tokens.")]
Prefixes = Annotated[
    int, typer.Option(help="Distinct shared prefixes, drawn uniformly (the working set).")
]


# The engines' names for the tensor-parallel size and the server's context, which every command
# taking a deployment accepts (vLLM's --tensor-parallel-size / --max-model-len, SGLang's
# --tp-size / --context-length).
TP_FLAGS = ("--tp", "--tensor-parallel-size", "--tp-size")
CONTEXT_FLAGS = ("--context", "--max-model-len", "--context-length")
# The server's context as slo and spec declare it.
ModelLength = Annotated[int | None, typer.Option(*CONTEXT_FLAGS, help="Max model length.")]
# A deployment's pipeline, data- and expert-parallel layout, as slo and spec declare it (the
# names and meanings of capacity's and simulate's).
PipelineParallel = Annotated[
    int, typer.Option("--pp", "--pipeline-parallel-size", help="Pipeline-parallel size.")
]
DataParallel = Annotated[
    int,
    typer.Option(
        "--dp",
        "--data-parallel-size",
        "--dp-size",
        help="Data-parallel ranks (vLLM: a MoE model's experts span TP x DP). With "
        "--dp-attention: SGLang's attention-DP groups inside --tp; the batch is one group's.",
    ),
]
ExpertParallel = Annotated[
    int | None,
    typer.Option(
        "--ep",
        "--ep-size",
        help="Expert-parallel size: the GPUs the MoE layers span (TP x DP; SGLang: TP).",
    ),
]
DataParallelAttention = Annotated[
    bool,
    typer.Option(
        "--dp-attention",
        "--enable-dp-attention",
        help="SGLang data-parallel attention: --dp groups of attention TP = tp / dp.",
    ),
]

# The engine flags capacity's line carries and simulate reads, declared once for both.
EngineDtype = Annotated[
    str | None,
    typer.Option("--dtype", help="Engine --dtype: auto, half, float16, bfloat16, float, float32."),
]
MambaFullMemoryRatio = Annotated[
    float | None,
    typer.Option(
        "--mamba-full-memory-ratio",
        help="SGLang flag (hybrid Mamba / linear models) [0.9].",
    ),
]
MaxMambaCacheSize = Annotated[
    int | None,
    typer.Option(
        "--max-mamba-cache-size", help="SGLang flag (hybrid models): the Mamba state slots."
    ),
]
MambaRadixCacheStrategy = Annotated[
    str | None,
    typer.Option(
        "--mamba-radix-cache-strategy",
        help="SGLang 0.5.14+ flag (hybrid models): auto, no_buffer or extra_buffer, how the "
        "radix cache keeps their states (extra_buffer: 2 slots a request more) [auto].",
        show_default=False,
    ),
]
AsyncScheduling = Annotated[
    bool | None,
    typer.Option(
        "--async-scheduling/--no-async-scheduling",
        help="vLLM 0.10+ flag: schedule the next step while the GPU runs this one (its CPU "
        "time per running request then costs the step nothing) [the release's: on from 0.14].",
        show_default=False,
    ),
]
EnablePrefixCaching = Annotated[
    bool | None,
    typer.Option(
        "--enable-prefix-caching/--no-enable-prefix-caching",
        help="vLLM flag: serve repeated prompt prefixes from the KV cache [the release's: on "
        "from V1 (0.8), for hybrid Mamba / linear-attention models from 0.26].",
        show_default=False,
    ),
]
DisableRadixCache = Annotated[
    bool,
    typer.Option(
        "--disable-radix-cache",
        help="SGLang flag: serve no prompt prefix from the KV cache (its radix cache).",
    ),
]
DisableCudaGraph = Annotated[
    bool,
    typer.Option(
        "--disable-cuda-graph",
        help="SGLang flag: no CUDA graphs (each step takes at least the host's launches of its "
        "kernels; the reserve stops counting graphs from 0.5.14 / 0.5.15).",
    ),
]
DisableOverlapSchedule = Annotated[
    bool,
    typer.Option(
        "--disable-overlap-schedule",
        help="SGLang flag: its scheduler's CPU work runs between GPU steps (not priced).",
    ),
]
All2AllBackend = Annotated[
    str | None,
    typer.Option(
        "--all2all-backend",
        help="vLLM 0.11.1+ flag: the MoE exchange under --enable-expert-parallel over DP ranks: "
        "allgather_reducescatter, deepep_high_throughput or deepep_low_latency "
        "[allgather_reducescatter].",
        show_default=False,
    ),
]
EnableDbo = Annotated[
    bool,
    typer.Option(
        "--enable-dbo",
        help="vLLM 0.11+ flag: dual-batch overlap, each step's DeepEP exchange under the other "
        "micro-batch's compute (32 decode / 512 prompt tokens and up; needs a DeepEP "
        "--all2all-backend).",
    ),
]
EpNumRedundantExperts = Annotated[
    int | None,
    typer.Option(
        "--ep-num-redundant-experts",
        help="SGLang flag: extra expert replicas spread over the EP ranks [0].",
        show_default=False,
    ),
]
MoeA2aBackend = Annotated[
    str | None,
    typer.Option(
        "--moe-a2a-backend",
        help="SGLang flag: none, deepep or mori (AMD, 0.5.9+) [deepep past one 8-GPU board on "
        "NVIDIA, else none].",
        show_default=False,
    ),
]
EnableTwoBatchOverlap = Annotated[
    bool,
    typer.Option(
        "--enable-two-batch-overlap",
        help="SGLang flag: overlap the MoE all-to-all with compute (wide EP).",
    ),
]
MoeDenseTpSize = Annotated[
    int | None,
    typer.Option(
        "--moe-dense-tp-size",
        help="SGLang flag: 1 keeps the dense MLP layers whole on every GPU under DP attention.",
        show_default=False,
    ),
]
EnableDpLmHead = Annotated[
    bool,
    typer.Option(
        "--enable-dp-lm-head",
        help="SGLang flag: the lm_head over each attention-DP group's GPUs (DP attention).",
    ),
]
StreamInterval = Annotated[
    int | None,
    typer.Option(
        "--stream-interval",
        help="Engine flag (vLLM 0.11.1+, SGLang): a request's tokens leave N at a time after its "
        "first [1].",
        show_default=False,
    ),
]
SchedulerRecvInterval = Annotated[
    int | None,
    typer.Option(
        "--scheduler-recv-interval",
        help="SGLang flag: after decode steps the scheduler takes in new requests every N of "
        "them [1].",
        show_default=False,
    ),
]
MaxPrefillTokens = Annotated[
    int | None,
    typer.Option(
        "--max-prefill-tokens",
        help="SGLang flag: the prompt tokens at which a prefill batch stops taking requests "
        "(with chunking off, what its memory heuristic reserves activations for) [16384].",
        show_default=False,
    ),
]


# --trust-remote-code, as a printed line carries it: accepted so the line pastes back (the plan
# adds it wherever config.json names its own code, auto_map, which both engines refuse to load
# without it).
TrustRemoteCode = Annotated[
    bool,
    typer.Option(
        "--trust-remote-code",
        help="Accepted so a printed line pastes back; the plan adds it when config.json "
        "has auto_map.",
    ),
]

# The flags a launch line over hosts carries, accepted so it pastes back (engine_flags.HOST_FLAGS
# checks them against the layout).
Nnodes = Annotated[
    int | None,
    typer.Option(
        "--nnodes",
        help="SGLang flag: the hosts one server spans, as a line over hosts carries it; checked "
        "against the layout's.",
        show_default=False,
    ),
]
NodeRank = Annotated[
    str | None,
    typer.Option(
        "--node-rank",
        help="SGLang flag: accepted so a line over hosts pastes back (a host's rank).",
    ),
]
DistInitAddr = Annotated[
    str | None,
    typer.Option(
        "--dist-init-addr",
        "--nccl-init-addr",
        help="SGLang flag: accepted so a line over hosts pastes back (the rank-0 host's address).",
    ),
]
DataParallelSizeLocal = Annotated[
    int | None,
    typer.Option(
        "--data-parallel-size-local",
        help="vLLM flag: the data-parallel ranks a host runs, as a line over hosts carries it; "
        "checked against the layout's.",
        show_default=False,
    ),
]
DataParallelAddress = Annotated[
    str | None,
    typer.Option(
        "--data-parallel-address",
        help="vLLM flag: accepted so a line over hosts pastes back (the head host's address).",
    ),
]
DistributedExecutorBackend = Annotated[
    str | None,
    typer.Option(
        "--distributed-executor-backend",
        help="vLLM flag: ray or mp (0.4.3+); a server over hosts runs Ray, as its line says.",
    ),
]

# The engines' own spellings of the layout, as a pasted launch line carries them.
EnableExpertParallel = Annotated[
    bool,
    typer.Option(
        "--enable-expert-parallel",
        help="vLLM's flag: the experts span TP x DP whole (--ep TP x DP).",
    ),
]
AttentionDataParallel = Annotated[
    int | None,
    typer.Option(
        "--attn-dp-size",
        help="SGLang 0.5.23+ flag: attention-DP groups (the same as --dp N --dp-attention).",
    ),
]


def engine_layout(
    engine: str | None,
    tp: int | None,
    dp: int | None,
    ep: int | None,
    dp_attention: bool,
    enable_expert_parallel: bool,
    attn_dp_size: int | None,
) -> tuple[int | None, int | None, bool]:
    """(ep, dp, dp_attention) with the engines' own layout flags read in the planner's terms:
    vLLM's --enable-expert-parallel as --ep TP x DP (its experts span every rank), SGLang's
    --attn-dp-size as --dp N --dp-attention; each is refused under the other engine or beside
    the planner's own spelling of something else."""
    from planner.errors import InputError

    if enable_expert_parallel:
        if ep is not None:
            raise InputError("--ep", "give --ep or vLLM's own --enable-expert-parallel, not both")
        if engine not in (None, "vllm"):
            raise InputError("--enable-expert-parallel", "vLLM's flag (SGLang's: --ep-size)")
        ep = (tp or 1) * (dp or 1)
    if attn_dp_size is not None:
        if engine != "sglang":
            raise InputError("--attn-dp-size", "an SGLang flag (--engine sglang)")
        if dp not in (None, 1, attn_dp_size):
            raise InputError(
                "--attn-dp-size", f"is --dp {attn_dp_size} --dp-attention: not --dp {dp}"
            )
        dp, dp_attention = attn_dp_size, True
    return ep, dp, dp_attention


# --calibration, as slo and spec declare it: a profile's step terms.
StepCalibration = Annotated[
    str | None,
    typer.Option(help="Step terms from `planner calibrate --bench` (same deployment)."),
]


# The KV offload tiers' flags, as simulate and fleet declare them.
KvOffloadingSize = Annotated[
    float | None,
    typer.Option(help="vLLM: CPU KV tier, GiB over all ranks (0.11.1+; native 0.14+)."),
]
KvOffloadingBackend = Annotated[str | None, typer.Option(help="vLLM: native or lmcache.")]
EnableHierarchicalCache = Annotated[bool, typer.Option(help="SGLang: HiCache host KV tier.")]
HicacheRatio = Annotated[float | None, typer.Option(help="SGLang: host / device [2].")]
HicacheSize = Annotated[float | None, typer.Option(help="SGLang: host pool per rank, GB.")]


def prefix_share(share: float | None, tokens: int | None, prefixes: int) -> PrefixShare | None:
    """The PrefixShare the prefix flags describe (None without them); a
    bad value is one error naming its flag."""
    if share is None and tokens is None:
        return None
    from pydantic import ValidationError

    from planner.errors import validation_text
    from planner.sim.prefix import PrefixShare

    if share is None or tokens is None:
        raise InputError("--prefix-share", "needs --prefix-tokens (and the other way)")
    try:
        return PrefixShare(share=share, tokens=tokens, prefixes=prefixes)
    except ValidationError as exc:
        err = exc.errors()[0]
        key = str(err["loc"][0]) if err["loc"] else "share"
        name = {"share": "--prefix-share", "tokens": "--prefix-tokens"}.get(key, "--prefixes")
        raise InputError(name, validation_text(err)) from exc


def gamma_cv(cv: float | None, burstiness: float | None) -> float | None:
    """The arrivals' CV from --cv or vllm bench serve's --burstiness (one of them)."""
    if burstiness is None:
        return cv
    if cv is not None:
        raise InputError("--burstiness", "is --cv 1/sqrt(B): give one of them")
    return cv_of_burstiness(burstiness)


def apply_hub_timeout(seconds: float | None) -> None:
    """Set the Hub deadline for this run (refused outside (0, 600] s); the default when not
    given, so one run's --timeout never carries into the next in the same process. A run that
    gives none, in a process that never reached the Hub, leaves the Hub client unimported."""
    import sys

    if seconds is None and "planner.sources.hub" not in sys.modules:
        return  # the module's own default is in force: nothing to reset
    from planner.sources.hub import HUB_TIMEOUT_S, set_timeout

    set_timeout(HUB_TIMEOUT_S if seconds is None else seconds)


def reserved_bytes(gib: float | None) -> int | None:
    """--reserved-gib as bytes (refused when negative or beyond any card)."""
    from planner.units import GIB_BYTES

    if gib is None:
        return None
    if not 0 <= gib <= MAX_GPU_MEMORY_GIB:
        raise InputError(
            "--reserved-gib", f"must be in [0, {MAX_GPU_MEMORY_GIB:,}] GiB (got {gib})"
        )
    return round(gib * GIB_BYTES)


def _flag_names(fn: Callable[..., Any]) -> dict[str, str]:
    """Parameter name -> the flag a user typed for it (the first declared, or the default)."""
    names: dict[str, str] = {}
    # evaluated: under postponed annotations a shared alias (HubTimeout) is only a name
    for name, param in inspect.signature(fn, eval_str=True).parameters.items():
        flag = "--" + name.replace("_", "-")
        annotation = param.annotation
        if get_origin(annotation) is not None:
            for meta in get_args(annotation)[1:]:
                decls = getattr(meta, "param_decls", None) or ()
                first = getattr(meta, "default", None)  # typer.Option("--tp", ...): a decl
                if isinstance(first, str) and first.startswith("--"):
                    decls = (first, *decls)
                long = [d for d in decls if isinstance(d, str) and d.startswith("--")]
                if long:
                    flag = long[0]
        names[name] = flag
    return names


def number_problem(value: Any) -> str | None:
    """Why a parsed option value is refused (non-finite float, int beyond MAX_CLI_INT), or None."""
    if isinstance(value, bool):
        return None
    if isinstance(value, float) and not math.isfinite(value):
        return f"must be a finite number (got {value})"
    if isinstance(value, int) and abs(value) > MAX_CLI_INT:
        return f"{value} is beyond the largest accepted value, {MAX_CLI_INT:,}"
    return None


# (command, option) pairs where +inf is a value the user means: `simulate --rate inf` is
# `vllm bench serve --request-rate inf`, its default (every request sent at once). Every other
# command's rate stays finite.
INFINITE_ALLOWED = frozenset({("simulate", "rate")})


def defaults_of(command: Callable[..., Any]) -> dict[str, Any]:
    """Each option's default in a command's signature. An option counts as typed where its
    value differs from this: a switch whose default is None reads False when the user typed
    its --no- form, which a "not None and not False" rule would miss."""
    return {name: p.default for name, p in inspect.signature(command).parameters.items()}


def checked(fn: F) -> F:
    """Wrap a Typer command so its numeric arguments are refused, naming the flag, when
    `number_problem` finds one. The flag names are read from the signature only on that path:
    evaluating sixty annotations costs every run a few milliseconds of start-up."""

    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        for name, value in kwargs.items():
            if (fn.__name__, name) in INFINITE_ALLOWED and value == math.inf:
                continue
            problem = number_problem(value)
            if problem is not None:
                raise InputError(_flag_names(fn).get(name, name), problem)
        return fn(*args, **kwargs)

    return wrapper  # type: ignore[return-value]


def max_model_len_value(value: str, flag: str) -> int:
    """A --max-model-len / --context value: a positive token count, or `auto` (vLLM 0.14+'s
    fit to the KV cache, which vLLM also reads from -1; here a negative count is refused like
    every other), returned as the engine model's MAX_MODEL_LEN_AUTO."""
    from planner.core.engines.vllm import MAX_MODEL_LEN_AUTO

    text = value.strip().lower()
    if text == "auto":
        return MAX_MODEL_LEN_AUTO
    try:
        number = int(text.replace("_", ""))
    except ValueError:
        number = 0
    if not 0 < number <= MAX_CLI_INT:
        raise InputError(
            flag, f"{value[:40]!r}; accepted: a positive number of tokens, or auto (vLLM 0.14+)"
        )
    return number
