"""Public end-to-end serving results through `planner simulate` (the benchmark predictor).

Reads a JSONL of published results (default benchmarks/data/e2e.jsonl: MLPerf Inference, dstack
benchmarks and engine pull-request tables, each row with its source; or --rows FILE), poses
each vLLM / SGLang non-speculative row (aggregated or prefill/decode disaggregated) as the
simulate flags a user would type, and prints predicted vs measured output tokens/s per GPU
(total tokens/s, so labelled, where a row reports that alone), TPOT and TTFT (the median; the
mean where a source reports only that, as the SGLang cookbook's tables do), with median / p90
|error| by GPU vendor, engine, model class and source (and each bar's rows by vendor and by
class), and how well the predictions rank GPU types: Kendall's tau over every pair of GPU types
measured on the same model, engine, precision and workload (what `planner fleet` ranks by).
Rows whose outputs stopped at EOS (no --ignore-eos) are posed at their measured mean output
length, the lengths the run produced (a workload fact, not a performance figure): a random
dataset's as geometric lengths at that mean under the cap it asked for, a dataset's as its own
distribution scaled to it; a dataset whose length mix is not modelled is posed at the mean
lengths the run reported, where it did. vLLM V0 rows with --num-scheduler-steps are posed with
multi-step scheduling (with chunked prefill as well from 0.6.3, which first ran the two
together). A row that names no release (a serving stack's, Dynamo's or llm-d's, is not its
engine's) is posed at the one current on its run date (an image's `latest` tag; by the PyPI
wheels' build dates; a source dated to the month only, at its middle), else, for multi-step
rows, at the newest V0 release (the flag exists only there). A dense model on a multiple of its
TP x PP GPUs, no DP named, runs that many replicas. The server's context is the one a row
states (--max-model-len / --context-length), else the model's own maximum, which is what the
engines run without the flag (it sets vLLM V0's default batched-token budget with chunked
prefill off); where the engine could not start with it, the run must have set a smaller one and
the row is posed at 8,192. A run whose requests partly failed (completed < sent) is not
compared on throughput: the benchmark divides by a duration their timeouts set. Rows that
cannot be posed are counted with their one-line reason, and no row stops the table: counts and
figures given as numeric strings are read as numbers (a GPU name's "8x" as the row's GPU count,
`ep: true` as expert parallelism over the layout's ranks, P50 / avg latencies as the median /
mean), a feature spelled off ("None", "off", false, 0) as off, the engine is vLLM or SGLang
wherever the row's engine family or engine names one ("dynamo + vllm" runs vLLM's scheduler and
kernels; llm-d, AIBrix and Ray Serve LLM serve with vLLM), a precision is the first format its
text names (an INT8 or bare W8A8 one posed as the planner's int8 W8A8 variant), a disaggregated
row is posed on its pools' layout (flat, nested per pool, or "2P2D" beside one TP or among the
layout's fields; a pool that gives no TP at the row's), and `vllm bench serve --save-result`
JSON's own names (dataset_name, median_tpot_ms, output_throughput, random_input_len,
max_concurrency) and the ISL / OSL shorthand read as the rows' fields (a row that names no
dataset beside its input and output lengths ran the clients' random one, as cross-vendor sweeps
do); a random prefix (random_prefix_len: one prefix opening every prompt) is posed as
simulate's --random-prefix-len poses it, sglang.bench_serving's generated-shared-prefix dataset
as its groups' shared system prompts (simulate's --prefix-share 1 --prefixes G) and vLLM's
sonnet dataset as its prompts' shared opening before their own lines.

    python benchmarks/e2e.py [--rows FILE] [--models DIR] [-v]
"""

from __future__ import annotations

import argparse
import functools
import json
import math
import re
import statistics
import sys
from collections import defaultdict
from pathlib import Path
from typing import Any

from planner.api.bench import benchmark
from planner.api.bench_instance import Deployment
from planner.api.bench_load import Lengths, Load, gsp_run, sonnet_run
from planner.api.capacity import DEFAULT_CONTEXT_TOKENS
from planner.core.disagg import SGLANG_TRANSFER_BACKENDS as TRANSFER_BACKENDS
from planner.core.engines.common import parse_version, version_text
from planner.core.parallel import ranks_share_tp
from planner.core.quantization import checkpoint_load_gap
from planner.core.step.overhead import VLLM_V1_SINCE
from planner.errors import PlannerError
from planner.sim.disagg import DisaggLayout
from planner.sim.prefix import PrefixShare
from planner.sources.models import resolve_model
from planner.sources.presets import find_gpu

ROOT = Path(__file__).resolve().parent.parent
# benchmarks/rows.py, beside this file (run as a script or loaded by a test)
sys.path.insert(0, str(ROOT / "benchmarks"))
from rows import (  # noqa: E402
    SGLANG_ROW_SETTINGS,
    catalog_gpu,
    engine_release,
    engine_settings,
    expert_parallel,
    integer,
    model_reference,
    number,
    release_on,
    row_gpu_count,
    run_date,
    sglang_fields,
    stated_switch,
    stated_weights,
    states_layout,
    switched_on,
    unmodelled_all_to_all,
    vllm_fields,
)

DEFAULT_ROWS = ROOT / "benchmarks" / "data" / "e2e.jsonl"
DEFAULT_MODELS = ROOT / "tests" / "data" / "models"

# A row's GPU name -> the catalog id.
GPUS = {
    "H100": "h100-sxm5-80gb",
    "H200": "h200-sxm-141gb",
    "MI300X": "mi300x",
    "L40S": "l40s",
    "H100-NVL": "h100-nvl-94gb",
    "GH200": "gh200-96gb",
    "B200": "b200-sxm-180gb",
    "H100-PCIe": "h100-pcie-80gb",
}
# The catalog's vendor ids as the tables name them (a row that gives no gpu_vendor).
VENDOR_NAMES = {"nvidia": "NVIDIA", "amd": "AMD"}
# Checkpoints whose config is a base model's, and the precision that makes them the checkpoint,
# by their Hub id in lower case (the Hub matches ids without regard to case).
CHECKPOINTS = {
    "amd/llama-3.1-405b-instruct-fp8-kv": ("meta-llama/Llama-3.1-405B", "fp8"),
    "meta-llama/llama-2-70b-chat-hf": ("meta-llama/Llama-2-70b-hf", None),
}


# A base model (no chat tuning): a name that says so, or the plain name of a family that
# publishes its base model under it (Llama 2 / 3, Mistral and Mixtral, Qwen 2 / 2.5, Yi, Gemma
# 2 / 3) without an instruct, chat or -it suffix. Other families' plain names (Qwen3, DeepSeek
# V3 / R1, gpt-oss, MiniMax, Kimi) are their chat models.
BASE_NAMED = re.compile(r"-base\b", re.IGNORECASE)
BASE_FAMILIES = re.compile(
    r"(^|/)((meta-)?llama-[23]|mistral-|mixtral-|qwen2(\.5)?-|yi-|gemma-[23]-)", re.IGNORECASE
)
TUNED = re.compile(r"instruct|chat|-it\b", re.IGNORECASE)


def base_model(name: str) -> bool:
    """Whether a checkpoint name is a base model's (BASE_NAMED, BASE_FAMILIES)."""
    return bool(BASE_NAMED.search(name)) or bool(
        BASE_FAMILIES.search(name) and not TUNED.search(name)
    )


# vLLM benchmark runs before this date read as "vllm-2024" (planner.sim.bench.TEXT_TTFT_CLIENTS:
# dstack's 2024-11 runs record TTFT 0 for an output with no text); the 0.9.0 wheel's client
# (2025-05) stamps the first chunk, text or not, and a run between the two is taken as the newer.
VLLM_FIRST_CHUNK_TTFT_BY = "2025-01-01"
# The newest vLLM release whose default engine was V0 (V1 became the default in 0.8.0).
V0_NEWEST = "0.7.3"


# A disaggregated layout's pools as a row may nest them ({"prefill": {"instances": 1, "tp": 8},
# "decode": {...}}): each pool's fields' other names.
POOLS = ("prefill", "decode")
POOL_FIELDS = {
    "workers": ("workers", "instances", "replicas", "count"),
    "tp": ("tp", "tp_size", "tensor_parallel_size"),
    "dp": ("dp", "dp_size", "data_parallel_size"),
    "ep": ("ep", "ep_size", "expert_parallel_size"),
}


def flat_pools(split: dict[str, Any]) -> dict[str, Any]:
    """A nested disaggregated layout in the rows' flat form (prefill_workers, decode_tp ...)."""
    flat = {k: v for k, v in split.items() if k not in POOLS}
    for pool in POOLS:
        given = split.get(pool)
        if not isinstance(given, dict):
            continue
        for field, names in POOL_FIELDS.items():
            found = next((given[n] for n in names if given.get(n) is not None), None)
            if found is not None:
                flat[f"{pool}_{field}"] = found
    return flat


# A disaggregated layout written as its instance counts ("2P2D", "1p3d").
XPYD = re.compile(r"(\d+)\s*[pP]\s*(\d+)\s*[dD]")


def counted_pools(split: dict[str, Any], tp: Any) -> dict[str, Any]:
    """A disaggregated layout's instance counts from an xPyD it names among its fields
    ({"mode": "1P2D"}) where it gives no counts, and each pool's TP from the row's one TP
    where it gives none (both pools at it, as "2P2D" beside one TP reads)."""
    out = dict(split)
    if out.get("prefill_workers") is None and out.get("decode_workers") is None:
        for value in split.values():
            named = XPYD.fullmatch(value.strip()) if isinstance(value, str) else None
            if named:
                out["prefill_workers"], out["decode_workers"] = (int(n) for n in named.groups())
                break
    for pool in POOLS:
        if out.get(f"{pool}_tp") is None and tp is not None:
            out[f"{pool}_tp"] = tp
    return out


def run_means(row: dict[str, Any]) -> tuple[float | None, float | None]:
    """Mean prompt and output tokens per request the run reported: given, or its totals over
    the requests it completed (None where it reported neither)."""
    m = row.get("measured") or {}
    done = number(
        m.get("completed_requests") or m.get("completed") or row["workload"].get("num_prompts")
    )

    def mean(given: str, total: str) -> float | None:
        stated, summed = number(m.get(given)), number(m.get(total))
        if stated:
            return stated
        if summed and done:
            return summed / done
        return None

    return (
        mean("mean_input_tokens_per_request", "total_input_tokens"),
        mean("mean_output_tokens_per_request", "total_output_tokens"),
    )


def stated_context(row: dict[str, Any]) -> int | None:
    """The context the server was started with, where the row states it (its engine config,
    or a --max-model-len / --context-length in its notes or command)."""
    config = row.get("engine_config") or {}
    for key in ("max_model_len", "context_length"):
        stated = integer(config.get(key))
        if stated and stated > 0:
            return stated
    text = " ".join(str(row.get(k) or "") for k in ("notes", "command"))
    found = re.search(r"--(?:max-model-len|context-length)[ =](\d+)", text)
    return int(found.group(1)) if found else None


# SGLang's client as sources spell it: "sglang bench_serving", "python -m sglang.bench_serving",
# "sglang-bench_serving".
SGLANG_CLIENT = re.compile(r"sglang[\s._-]*bench[_ ]serving")


def bench_client(row: dict[str, Any]) -> str | None:
    """The client that read the run's streams, as its source names it: SGLang's bench_serving
    (its native stream), a vLLM benchmark script (OpenAI stream deltas), MLPerf's LoadGen (not
    one Python process reading every stream); None: the engine's own."""
    text = f"{row['workload'].get('dataset')} {(row.get('source') or {}).get('kind')}".lower()
    if SGLANG_CLIENT.search(text):
        return "sglang"
    if "vllm bench serve" in text or "benchmark_serving" in text:
        # the script's TTFT for an output with no text changed between 2024 and 0.9.0
        return "vllm-2024" if (run_date(row) or "9999") < VLLM_FIRST_CHUNK_TTFT_BY else "vllm"
    if "mlperf" in text:
        return "none"
    return None


def predict(row: dict[str, Any], kwargs: dict[str, Any]) -> dict[str, Any]:
    """benchmark() on a posed row. A row that states no context is posed at the model's own
    maximum (what `vllm serve` and SGLang run without --max-model-len / --context-length);
    where the engine could not have started with it, the run must have set a smaller one,
    and it is posed at the planner's default context instead."""
    where, rest = Deployment.split(kwargs)
    try:
        return benchmark(where, **rest)
    except PlannerError as exc:
        if stated_context(row) is not None or "would not start" not in str(exc):
            raise
    settings = {k: v for k, v in where.settings.items() if k != "context_tokens"}
    return benchmark(where.model_copy(update={"settings": settings}), **rest)


@functools.cache
def sharegpt_base() -> tuple[str, float]:
    """The model whose outputs the sharegpt-base workload measured, and the mean of those
    that stream text."""
    from planner.api.simulate import load_workload

    workload = load_workload("sharegpt-base")
    values = workload.streamed_outputs().values
    return workload.source_model, float(sum(values)) / len(values)


# Serving stacks whose model server is vLLM whatever else they add (routing, KV-aware
# scheduling): llm-d (llm-d/llm-d), AIBrix (vllm-project/aibrix) and Ray Serve LLM (ray's
# serve/llm, its VLLMEngine). A stack with several backends (Dynamo, KServe) names none.
VLLM_STACKS = ("llm-d", "aibrix", "ray serve llm")


def engine_of(row: dict[str, Any]) -> str:
    """The engine whose scheduler and kernels ran the row, as the planner names it: "vllm" or
    "sglang" wherever the row's engine family or its engine names one of them ("vLLM (ROCm)",
    "SGLang PD", a serving framework's "dynamo + vllm" backend), else the family (or engine)
    in lower case."""
    for field in ("engine_family", "engine"):
        name = str(row.get(field) or "").lower()
        for engine in ("sglang", "vllm"):
            if engine in name:
                return engine
        if any(stack in name for stack in VLLM_STACKS):
            return "vllm"
    return str(row.get("engine_family") or row.get("engine") or "").lower()


def pose(row: dict[str, Any], models: Path) -> tuple[dict[str, Any], str | None]:
    """The benchmark() arguments for a row, flat (the Deployment's fields beside the load's;
    `predict` splits them), or a reason it cannot be posed."""
    family = engine_of(row)
    if family not in ("vllm", "sglang"):
        return {}, f"engine {row.get('engine')}"
    if switched_on(row.get("spec_decode")):
        return {}, "speculative"
    exchange = unmodelled_all_to_all(row, family)
    if exchange is not None:
        return {}, f"MoE all-to-all {exchange} not modelled"
    split = row.get("disagg") if switched_on(row.get("disagg")) else None
    layout = None
    gpu_count = row_gpu_count(row)
    if isinstance(split, str) and (named := XPYD.fullmatch(split.strip())) and row.get("tp"):
        # "2P2D" beside one TP: every instance of both pools at the row's TP
        prefill, decode = (int(n) for n in named.groups())
        split = {"prefill_workers": prefill, "decode_workers": decode}
        split |= {"prefill_tp": row["tp"], "decode_tp": row["tp"]}
    if isinstance(split, dict) and any(isinstance(split.get(p), dict) for p in POOLS):
        split = flat_pools(split)
    if isinstance(split, dict):
        split = counted_pools(split, row.get("tp"))
    if split and not isinstance(split, dict):
        return {}, "disaggregated layout not given per pool"
    if split:
        pools = {
            k: integer(split.get(k))
            for k in ("prefill_workers", "decode_workers", "prefill_tp", "decode_tp")
        }
        if not all(pools.values()):
            return {}, "disaggregated layout not given per pool"
        # optional per-pool expert and data parallelism, where a row states them
        extra = {
            k: got
            for k in ("prefill_ep", "decode_ep", "prefill_dp", "decode_dp")
            if (got := integer(split.get(k))) is not None and got > 0
        }
        # the transfer backend the row names (NIXL rides NVLink inside a node; Mooncake,
        # SGLang's default, RDMA)
        backend = split.get("transfer_backend")
        layout = DisaggLayout(
            prefill=pools["prefill_workers"],
            decode=pools["decode_workers"],
            prefill_tp=pools["prefill_tp"],
            decode_tp=pools["decode_tp"],
            dp_within_tp=ranks_share_tp(family),
            transfer_backend=backend
            if family == "sglang" and backend in TRANSFER_BACKENDS
            else None,
            **extra,
        )
    gpu = catalog_gpu(row.get("gpu_norm"), row.get("gpu"), GPUS)
    if gpu is None:
        return {}, f"GPU {row.get('gpu_norm') or row.get('gpu')} not in the catalog"
    dp_attention = switched_on(row.get("dp_attention"))
    tp, dp, pp = (integer(row.get(k)) or 1 for k in ("tp", "dp", "pp"))
    if dp_attention and family != "sglang":
        # vLLM runs a MoE model's --data-parallel-size ranks as attention DP on its own, each
        # rank a TP group (GPUs = TP x DP); a row in SGLang's notation (the groups inside the
        # TP size) names the same layout with attention TP = TP / DP
        dp_attention = False
        if gpu_count == tp and dp > 1 and tp % dp == 0:
            tp //= dp
    name, weights = CHECKPOINTS.get(row["model"].lower(), (row["model"], None))
    reference, variant = model_reference(name, models)
    if reference is None:
        return {}, f"no config for {name} (none shipped; the Hub did not answer)"
    weights = weights or variant
    precision = row.get("precision") or {}
    if not isinstance(precision, dict):  # one text for the weights ("fp8")
        precision = {"weights": precision}
    spec = resolve_model(None, reference)
    if weights is None:
        stated = stated_weights(str(precision.get("weights") or ""), find_gpu(gpu).vendor)
        own = spec.weight_dtype or ""
        # a format the checkpoint does not already carry: a re-quantization (online fp8) or
        # a variant checkpoint of the same architecture
        if stated and not own.lower().startswith(stated):
            weights = stated
    kv = "fp8" if str(precision.get("kv") or "").lower().startswith("fp8") else None
    w = workload_fields(row)
    if layout is not None:
        if gpu_count and layout.gpus != gpu_count:
            return {}, f"layout {layout.label} != {gpu_count} GPUs"
    elif gpu_count and (tp if dp_attention else tp * dp) * pp != gpu_count:
        # SGLang's attention-DP groups live inside its TP group
        if row.get("tp") is None and row.get("dp") is None:
            return {}, f"layout not given for {gpu_count} GPUs"
        if (
            row.get("dp") is None
            and not dp_attention
            and not spec.num_experts
            and gpu_count % (tp * pp) == 0
        ):
            # a dense model's GPUs beyond its TP x PP: replicas behind the benchmark's one
            # endpoint (vLLM's --data-parallel-size, or servers behind a router), each a copy
            dp = gpu_count // (tp * pp)
        else:
            return {}, f"layout TP {tp} x PP {pp} x DP {dp} != {gpu_count} GPUs"
    dataset = str(w.get("dataset") or "")
    load: dict[str, Any] = {"requests": w.get("num_prompts")}
    dataset_prefix: PrefixShare | None = None
    mean_in, mean_out = run_means(row)
    input_len, output_len = integer(w.get("input_len")), integer(w.get("output_len"))
    lengths_given = bool(input_len and output_len)
    if "sharegpt" in dataset.lower():
        # the lengths the run produced: prompts at its mean; outputs stop at EOS short of the
        # references (the sampler's max_tokens). The base model sharegpt-base measured
        # answers as it did, request by request (dstack's raw per-request results, 2024);
        # another base model on these chat prompts loses the difference to requests that end
        # at their first token, the rest as measured; an instruct model's answers end early,
        # the references' lengths scaled to the run's mean
        base = base_model(str(row.get("model")))
        empty = output_mean = None
        source_model, streamed = sharegpt_base()
        if base and row.get("model") == source_model:
            pass  # its requests as measured: what it lost to ignored prompts, the engine's
        elif base and mean_out:
            empty = max(0.0, 1.0 - mean_out / streamed)
            output_mean = mean_out if mean_out > streamed else None
        elif mean_out:
            output_mean = mean_out
        lengths = Lengths(
            workload="sharegpt-base" if base else "sharegpt",
            prompt_mean=mean_in,
            output_mean=output_mean,
            empty_share=empty,
        )
    elif lengths_given and (RANDOM_DATASET.search(dataset) or not dataset.strip()):
        # the random dataset, or a row that states only its lengths (the ISL / OSL of a
        # cross-vendor sweep, which runs the clients' random dataset)
        ratio = number(w.get("range_ratio"))
        # The client decides what --random-range-ratio means. SGLang's bench_serving (and
        # vLLM's 2024 benchmark_serving.py) draw uniform in [r L, L], SGLang's default 0.0 being
        # [1, L] (python/sglang/bench_serving.py); `vllm bench serve` draws in
        # [L (1 - r), L (1 + r)] with r < 1, default 0: fixed (vllm/benchmarks/datasets.py).
        around = "vllm bench serve" in dataset.lower()
        if ratio is None and bench_client(row) == "sglang" and not around:
            ratio = 0.0
        out_len = output_len
        stopped = None
        if "no --ignore-eos" in dataset and mean_out:
            # outputs stopped at EOS: at the mean the run produced, capped at what it asked for
            if mean_out < out_len and not (ratio and ratio < 1):
                stopped = mean_out
            else:
                out_len = max(1, round(mean_out))
        lengths = Lengths(
            prompt_len=input_len,
            output_len=out_len,
            output_mean=stopped,
            len_range=None if around else ratio,
            len_spread=ratio if around and ratio else None,
        )
    elif "sonnet" in dataset.lower():
        # vLLM's sonnet dataset: every prompt opens with the same instruction and poem lines,
        # then lines drawn to at most input_len in all (the run's mean prompt where it says)
        total = round(mean_in) if mean_in else input_len
        run = sonnet_run(total, integer(w.get("prefix_len")), output_len)
        stopped = mean_out if mean_out and mean_out < run.output_len else None
        lengths = Lengths(prompt_len=run.prompt_len, output_len=run.output_len, output_mean=stopped)
        dataset_prefix = PrefixShare(share=1.0, tokens=run.prefix_tokens)
    elif GSP.search(dataset):
        if gsp_modes(w):
            return {}, "generated-shared-prefix beyond single-turn uniform fixed lengths"
        run = gsp_run(*(integer(w.get(f"gsp_{k}")) for k in GSP_FIELDS))
        lengths = Lengths(prompt_len=run.prompt_len, output_len=run.output_len)
        dataset_prefix = PrefixShare(share=1.0, tokens=run.prefix_tokens, prefixes=run.prefixes)
        load["requests"] = run.requests
    elif mean_in and mean_out:
        # a dataset whose length mix is not modelled, posed at the lengths the run reported
        # (their means: throughput and the medians follow them, the tails less so)
        lengths = Lengths(prompt_len=max(1, round(mean_in)), output_len=max(1, round(mean_out)))
    else:
        return {}, "dataset lengths not modelled (no mean lengths reported)"
    # vllm bench serve's --random-prefix-len: one prefix opening every prompt, before its
    # input_len tokens (served from the prefix cache after the first, where the engine caches)
    prefix_len = integer(w.get("prefix_len")) or 0
    if dataset_prefix is not None:  # the dataset's own (sonnet's, generated-shared-prefix's)
        prefix: PrefixShare | None = dataset_prefix
    else:
        prefix = PrefixShare(share=1.0, tokens=prefix_len) if prefix_len > 0 else None
    if prefix is not None and layout is not None:
        return {}, "a shared prefix is not modelled with disaggregation"
    rate = number(w.get("request_rate"))
    clients = number(w.get("concurrency"))
    if clients is not None and math.isfinite(clients) and clients >= 1:
        load["concurrency"] = int(clients)
        if rate is not None and math.isfinite(rate):
            load["rate_per_s"] = rate  # released at the rate, at most N in flight
    elif rate is not None:
        load["rate_per_s"] = rate
    else:
        return {}, "no load given"
    version = engine_release(row, family)
    settings: dict[str, Any] = {"engine": family, "tp": tp} | ({"pp": pp} if pp > 1 else {})
    config = row.get("engine_config") or {}
    settings |= engine_settings(row)  # "default": the engine's own
    # the engine's own fields, not plan settings: they go in as the line's own
    line_fields = sglang_fields(row) if family == "sglang" else vllm_fields(row)
    for field in ("ep_num_redundant_experts", "stream_interval", *SGLANG_ROW_SETTINGS):
        if field in settings:
            value = settings.pop(field)
            if family == "sglang" or field not in SGLANG_ROW_SETTINGS:
                line_fields[field] = value
    if line_fields:
        settings["extra"] = line_fields
    chunked = stated_switch(config.get("enable_chunked_prefill"))
    steps = integer(config.get("num_scheduler_steps")) or 1
    if chunked is False and settings.get("max_num_batched_tokens", math.inf) < (
        DEFAULT_CONTEXT_TOKENS
    ):
        # vLLM refuses to start with chunked prefill off and a budget under max_model_len
        # (posed at the model's maximum, or 8,192 where that would not start): a run that
        # completed cannot have used the recorded budget, so it is posed at the engine's default
        del settings["max_num_batched_tokens"]
    dated = release_on(family, run_date(row) or "") if not version else None
    if version:
        settings["version"] = version
    elif dated and (steps == 1 or parse_version(dated) < VLLM_V1_SINCE):
        settings["version"] = dated  # the image's `latest` on the run date
    elif steps > 1:
        # --num-scheduler-steps exists only in vLLM V0 (0.6.0-0.7.x): the newest V0 release
        settings["version"] = V0_NEWEST
    named = settings.get("version")
    gap = checkpoint_load_gap(spec, family, parse_version(named)) if named else None
    if gap is not None and gap[1] is not None:
        # a run that completed loaded its weights: a release named loosely ("~v0.10.x", a PR
        # branch) that cannot is posed at the first release that can
        settings["version"] = version_text(gap[1])

    if weights:
        settings["weight_dtype"] = weights
    if kv:
        settings["kv_cache_dtype"] = "fp8" if family == "vllm" else "fp8_e4m3"
    # the server's context: as stated, else the model's own maximum (the engines' default)
    settings["context_tokens"] = stated_context(row) or spec.max_context_tokens
    return {
        "client": bench_client(row),
        "gpu": gpu,
        "preset": None,
        "model": reference,
        "settings": settings,
        # a disaggregated row's pools carry their own layout (DisaggLayout), not the row's
        "dp": 1 if layout else dp,
        "ep": None if layout else expert_parallel(row.get("ep"), tp if dp_attention else tp * dp),
        "dp_attention": dp_attention and not layout,
        "load": Load(**{k: v for k, v in load.items() if v is not None}),
        "lengths": lengths,
        "chunked_prefill": chunked,
        "scheduler_steps": steps,
        "disagg": layout,
        **({"prefix": prefix} if prefix is not None else {}),
    }, None


# sglang.bench_serving's generated-shared-prefix dataset ("gsp"; planner.api.bench_load.gsp_run)
# and a row's fields for its flags, in gsp_run's order.
GSP = re.compile(r"generated[-_ ]shared[-_ ]prefix|\bgsp\b", re.IGNORECASE)
GSP_FIELDS = ("num_groups", "prompts_per_group", "system_prompt_len", "question_len", "output_len")


def gsp_modes(w: dict[str, Any]) -> bool:
    """Whether a generated-shared-prefix run used a mode not modelled: Zipf-sized groups,
    multi-turn prompts, groups in order, or lengths drawn in a range."""
    ratio = number(w.get("gsp_range_ratio"))
    return (
        str(w.get("gsp_group_distribution") or "uniform").lower() != "uniform"
        or (integer(w.get("gsp_num_turns")) or 1) != 1
        or bool(w.get("gsp_ordered"))
        or (ratio is not None and ratio != 1.0)
    )


def load_band(load: Load) -> str:
    """The load a row was run at, banded: closed-loop clients, or an open-loop rate."""
    n = load.concurrency
    if n is None:
        return "load open loop (rate)"
    return f"load {'c1' if n == 1 else 'c2-16' if n <= 16 else 'c17-128' if n <= 128 else 'c>128'}"


# The SGLang cookbook names the mean TTFT, TPOT and ITL as its key metrics ("Understanding the
# Results", sgl-project/sgl-cookbook docs/autoregressive/*, 2026-05): a cookbook benchmark
# table that labels no statistic reports those.
MEAN_REPORTING_SOURCES = re.compile(r"sglang cookbook", re.IGNORECASE)


# A dataset the row names as the clients' random text one ("random", "Random (vllm bench
# serve)", SGLang's "random-ids"), not vLLM's multimodal or reranking random datasets
# ("random-mm", "random-rerank": their prompts carry images or pairs the lengths do not count).
RANDOM_DATASET = re.compile(r"\brandom(?:-ids)?\b(?![-_](?:mm|rerank))", re.IGNORECASE)


# Other spellings of a row's workload fields: `vllm bench serve` JSON's and the ISL / OSL
# shorthand of cross-vendor sweeps.
WORKLOAD_ALIASES = {
    "dataset": ("dataset_name",),
    "input_len": ("random_input_len", "sonnet_input_len", "isl"),
    "output_len": ("random_output_len", "sonnet_output_len", "osl"),
    "range_ratio": ("random_range_ratio",),
    "concurrency": ("max_concurrency", "conc"),
    "prefix_len": ("random_prefix_len", "sonnet_prefix_len"),
}


def workload_fields(row: dict[str, Any]) -> dict[str, Any]:
    """A row's workload, its fields' other spellings (WORKLOAD_ALIASES, in any case: "ISL",
    "Max_Concurrency") read as the rows' own."""
    w = dict(row["workload"])
    lowered = {str(k).lower(): v for k, v in w.items()}
    for key, aliases in WORKLOAD_ALIASES.items():
        if w.get(key) is None:
            w[key] = next((lowered[a] for a in (key, *aliases) if lowered.get(a) is not None), None)
    return w


# Other names of the statistics a row's latencies give.
STATISTIC_NAMES = {"p50": "median", "avg": "mean", "average": "mean"}


def measured_fields(row: dict[str, Any]) -> dict[str, Any]:
    """A row's measured figures, the flat keys of `vllm bench serve --save-result` JSON
    (median_tpot_ms, mean_ttft_ms, output_throughput) and of `planner simulate --json`
    (output_throughput_per_gpu) read as the nested ones the rows use, and a nested P50 / avg as
    the median / mean. Tokens/s per user is not read for a TPOT: sources define it over the
    decode alone or over the whole request."""
    m = dict(row["measured"])
    for key in ("tpot", "ttft"):
        nested = m.get(f"{key}_ms")
        if isinstance(nested, dict):  # its statistics in the names sources use (P50, avg)
            named = {
                STATISTIC_NAMES.get(str(k).lower(), str(k).lower()): v for k, v in nested.items()
            }
            m[f"{key}_ms"] = named | {k: v for k, v in nested.items() if k in ("median", "mean")}
        flat = {
            stat: m[f"{stat}_{key}_ms"]
            for stat in ("median", "mean")
            if m.get(f"{stat}_{key}_ms") is not None
        }
        if flat and not m.get(f"{key}_ms"):
            m[f"{key}_ms"] = flat
    if m.get("output_tokens_per_s") is None and m.get("output_throughput") is not None:
        m["output_tokens_per_s"] = m["output_throughput"]
    if m.get("output_tokens_per_s_per_gpu") is None:
        # simulate --json's own name for it
        m["output_tokens_per_s_per_gpu"] = m.get("output_throughput_per_gpu")
    return m


def statistic(row: dict[str, Any], key: str) -> tuple[str, bool]:
    """Which statistic of `key` ("tpot", "ttft") the row is compared at, and whether the row
    labels it: the median where given, else the mean where given, else (unlabelled) the mean
    where the source reports means (MEAN_REPORTING_SOURCES) and the median elsewhere."""
    value = measured_fields(row).get(f"{key}_ms") or {}
    if not isinstance(value, dict):  # a bare figure, its statistic not labelled
        value = {}
    if "median" in value:
        return "median", True
    if "mean" in value:
        return "mean", True
    if MEAN_REPORTING_SOURCES.search(str((row.get("source") or {}).get("kind", ""))):
        return "mean", False
    return "median", False


def measured(row: dict[str, Any], layout_gpus: int | None = None) -> dict[str, Any]:
    """Output tok/s per GPU, TPOT and TTFT as the row gives them (the statistic that
    `statistic` picks). A row that reports its total (input and output) tokens/s alone, labelled
    so, is compared on that: `tok_s_basis` "total" (the predictor's total_token_throughput_per_
    gpu); a throughput whose kind its source does not label is not compared. A row that states
    no GPU count (as a field, or in its GPU's name: "8x H200") is divided by `layout_gpus`, the
    GPUs its stated layout takes, where given."""
    m = measured_fields(row)

    def positive(value: Any) -> float | None:
        """A measured figure as a number (numeric strings too), None unless finite and > 0."""
        got = number(value)
        return got if got is not None and math.isfinite(got) and got > 0 else None

    def pick(key: str) -> float | None:
        value = m.get(f"{key}_ms") or {}
        if not isinstance(value, dict):  # a bare figure: as reported
            return positive(value)
        return positive(value.get(statistic(row, key)[0], value.get("as_reported")))

    per_gpu = positive(m.get("output_tokens_per_s_per_gpu"))
    total = positive(m.get("output_tokens_per_s"))
    gpus = row_gpu_count(row) or layout_gpus
    if per_gpu is None and total and gpus:
        per_gpu = total / gpus
    basis = "output"
    if per_gpu is None:
        per_gpu = positive(m.get("tokens_per_s_per_gpu"))
        both = positive(m.get("total_tokens_per_s") or m.get("total_token_throughput"))
        if per_gpu is None and both and gpus:
            per_gpu = both / gpus
        basis = "total"
    done = positive(m.get("completed_requests") or m.get("completed"))
    sent = positive(m.get("num_prompts") or row["workload"].get("num_prompts"))
    if done and sent and done < sent:
        # requests failed: the benchmark divides by a duration their timeouts set, not the
        # server's pace (the latencies are the completed requests' own and still count)
        per_gpu = None
    return {"tok_s_gpu": per_gpu, "tpot": pick("tpot"), "ttft": pick("ttft"), "tok_s_basis": basis}


def summary(errors: list[float]) -> str:
    """median |e|, p90 |e|, signed median, n."""
    if not errors:
        return "n 0"
    absolute = sorted(abs(e) for e in errors)
    p90 = absolute[max(0, math.ceil(0.9 * len(absolute)) - 1)]
    return (
        f"median {statistics.median(absolute):6.1%}  p90 {p90:6.1%}  "
        f"bias {statistics.median(errors):+6.1%}  n {len(errors)}"
    )


def ranking_key(row: dict[str, Any]) -> str:
    """Rows comparable across GPU types: one model, engine, precision and load."""
    w = workload_fields(row)
    return json.dumps(
        [
            row.get("model"),
            row.get("engine_family") or row.get("engine"),
            row.get("precision"),
            row.get("disagg"),
            w.get("input_len"),
            w.get("output_len"),
            w.get("concurrency"),
            w.get("request_rate"),
            str(w.get("dataset", "")),
        ],
        sort_keys=True,
        default=str,
    )


def kendall_tau(groups: dict[str, dict[str, list[tuple[float, float]]]]) -> tuple[float, int]:
    """Tau over every pair of GPU types within a group (mean measured vs mean predicted tok/s
    per GPU of each type): (concordant - discordant) / pairs, and the number of pairs."""
    concordant = discordant = 0
    for by_gpu in groups.values():
        means = {
            gpu: (statistics.mean(m for m, _ in v), statistics.mean(p for _, p in v))
            for gpu, v in by_gpu.items()
        }
        names = sorted(means)
        for i, a in enumerate(names):
            for b in names[i + 1 :]:
                sign = (means[a][0] - means[b][0]) * (means[a][1] - means[b][1])
                concordant += sign > 0
                discordant += sign < 0
    pairs = concordant + discordant
    return ((concordant - discordant) / pairs if pairs else float("nan")), pairs


def _bar_kind(row: dict[str, Any]) -> str | None:
    """Which bar a row counts toward: "aggregated" (the benchmark predictor's), "disaggregated"
    (prefill/decode disaggregation's), or None (another engine, or speculative decoding)."""
    family = engine_of(row)
    if family not in ("vllm", "sglang") or switched_on(row.get("spec_decode")):
        return None
    return "disaggregated" if switched_on(row.get("disagg")) else "aggregated"


def main() -> None:
    """Print every posed row and the error summaries."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=Path, default=DEFAULT_ROWS)
    parser.add_argument("--models", type=Path, default=DEFAULT_MODELS)
    parser.add_argument("-v", action="store_true", help="print every row")
    args = parser.parse_args()
    rows = [json.loads(x) for x in args.rows.read_text().splitlines() if x.strip()]
    groups: dict[str, dict[str, list[float]]] = defaultdict(lambda: defaultdict(list))
    refused: dict[str, int] = defaultdict(int)
    ranks: dict[str, dict[str, list[tuple[float, float]]]] = defaultdict(lambda: defaultdict(list))
    # the rows each issue's bar counts: vLLM / SGLang, not speculative; aggregated or not
    eligible: dict[str, list[int]] = {"aggregated": [0, 0], "disaggregated": [0, 0]}
    for row in rows:
        kind = _bar_kind(row)
        if kind:
            eligible[kind][1] += 1
        try:
            kwargs, why = pose(row, args.models)
            meas = measured(row)
        except (KeyError, TypeError, ValueError, AttributeError) as exc:
            # a row whose fields are not the schema's: counted as not posed, never fatal
            kwargs, why = {}, f"row not readable: {type(exc).__name__} {exc}"[:100]
        except PlannerError as exc:  # a config or GPU the planner refuses, by name
            kwargs, why = {}, f"planner: {exc}"[:100]
        if why is not None:
            refused[why] += 1
            continue
        try:
            got = predict(row, kwargs)
        except (PlannerError, ValueError) as exc:
            refused[f"planner: {exc}"[:100]] += 1
            continue
        except (KeyError, TypeError, AttributeError, ZeroDivisionError) as exc:
            # a row posed from fields the schema does not promise: counted, named, never fatal
            refused[f"planner failed: {type(exc).__name__} {exc}"[:100]] += 1
            continue
        if kind:
            eligible[kind][0] += 1
        if not row_gpu_count(row) and states_layout(row):
            meas = measured(row, got["gpus"])  # per GPU over the GPUs its layout takes
        pred = {
            "tok_s_gpu": got[
                "output_throughput_per_gpu"
                if meas["tok_s_basis"] == "output"
                else "total_token_throughput_per_gpu"
            ],
            "tpot": got[f"{statistic(row, 'tpot')[0]}_tpot_ms"],
            "ttft": got[f"{statistic(row, 'ttft')[0]}_ttft_ms"],
        }
        # the row's vendor, else the catalog card's it was posed on
        vendor = row.get("gpu_vendor") or VENDOR_NAMES.get(find_gpu(kwargs["gpu"]).vendor, "?")
        # the class by the config's experts (what the step model sees), as well as the row's
        experts = resolve_model(None, kwargs["model"]).num_experts
        klass = "MoE" if experts or "moe" in str(row.get("model_class", "")).lower() else "dense"
        if meas["tok_s_gpu"] and meas["tok_s_basis"] == "output":
            ranks[ranking_key(row)][row.get("gpu_norm") or row.get("gpu") or "?"].append(
                (float(meas["tok_s_gpu"]), float(pred["tok_s_gpu"]))
            )
        line = [f"{str(row.get('id') or '?')[:58]:58s}"]
        for key in ("tok_s_gpu", "tpot", "ttft"):
            if meas[key] is None or not meas[key]:
                line.append(f"{key} -")
                continue
            error = (pred[key] - meas[key]) / meas[key]
            line.append(f"{key} {meas[key]:9.1f} -> {pred[key]:9.1f} ({error:+6.1%})")
            if key == "tok_s_gpu" and meas["tok_s_basis"] == "total":
                line[-1] += " [total tokens]"
            if key != "tok_s_gpu":
                stat, stated = statistic(row, key)
                other = "mean" if stat == "median" else "median"
                note = "" if stated else "; not labelled"
                line[-1] += f" [{stat}{note}; {other} {got[f'{other}_{key}_ms']:.1f}]"
            basis = got["step_constants"]  # the GPU family the prediction was priced on
            for g in (
                "all",
                *([f"{kind} (the issue's bar)"] if kind else []),
                f"vendor {vendor}",
                f"family {basis['gpu_family']} ({basis['basis']})",
                f"engine {row.get('engine') or row.get('engine_family') or '?'}",
                f"class {klass}",
                f"tp {kwargs['settings']['tp']}",
                load_band(kwargs["load"]),
                f"source {row.get('source_group') or '?'}",
                # each bar's slices: its rows by vendor and by model class
                *([f"{kind}, vendor {vendor}", f"{kind}, class {klass}"] if kind else []),
            ):
                groups[key][g].append(error)
        if args.v:
            print("  ".join(line))
    for key, title in (
        ("tok_s_gpu", "output tok/s per GPU (total tok/s where a row reports that alone)"),
        ("tpot", "TPOT (the median, or the mean where that is what the source reports)"),
        ("ttft", "TTFT (the median, or the mean where that is what the source reports)"),
    ):
        print(f"\n{title}:")
        for g in sorted(groups[key], key=lambda x: (x != "all", x)):
            print(f"  {g:34s} {summary(groups[key][g])}")
    tau, pairs = kendall_tau(ranks)
    ranked = f"Kendall tau {tau:+.2f} over {pairs} pairs" if pairs else "no two GPU types posed"
    print(f"\nGPU types ranked by output tok/s per GPU on one workload: {ranked}")
    for kind, (posed, total) in eligible.items():
        if total:
            print(
                f"expressed {posed} of {total} {kind} vLLM / SGLang rows without speculation "
                f"({posed / total:.0%})"
            )
    print(f"\nposed {len(rows) - sum(refused.values())} of {len(rows)} rows; not posed:")
    for why, n in sorted(refused.items(), key=lambda x: -x[1]):
        print(f"  {n:4d}  {why}")


if __name__ == "__main__":
    main()
