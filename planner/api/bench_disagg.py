"""Prefill/decode disaggregation (xPyD): the prefill and decode pools as two instances, the
KV handoff between them over the link, and the benchmark run across both."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Literal, NamedTuple

from planner.api.bench_instance import (
    Instance,
    attention_groups_of,
    bench_client_of,
    caches_prefixes,
    lockstep_load,
    with_bench_client,
    with_client_sends,
    with_speculation,
)
from planner.api.bench_load import Posed, Speculation
from planner.api.bench_report import (
    fabric_notes,
    frontend_notes,
    graph_coverage_notes,
    idle_ranks_text,
    lockstep_ranks_name,
    per_gpu,
    prefix_cache_off_note,
    speculation_echo,
    speculation_note,
    step_constants,
    window_tokens,
)
from planner.core.engines import engine_notes
from planner.core.step.overhead import REQUEST_PATH_MS, VLLM_V1_SINCE
from planner.errors import InputError

if TYPE_CHECKING:
    import numpy as np
    from numpy.typing import NDArray

    from planner.core.engines.common import EnginePrediction
    from planner.core.serve import ServePlan
    from planner.core.specs import GpuSpec, ModelSpec
    from planner.sim.config import SimConfig
    from planner.sim.disagg import DisaggLayout, Served
    from planner.sim.engine import RunState
    from planner.sim.prefix import PrefixShare
    from planner.sim.workload import Trace


# A PD decode instance pre-allocates a landing request's KV only while its pool keeps 512 tokens
# free for every request it holds (running, transferring or waiting) and for the new one beside
# its prompt, not SGLang's new-token ratio (disaggregation/decode.py DecodePreallocQueue
# _allocatable_tokens, num_reserved_decode_tokens: SGLANG_NUM_RESERVED_DECODE_TOKENS in 0.4.7,
# --num-reserved-decode-tokens from 0.4.8; read in the 0.4.7, 0.5.2 and 0.5.13 wheels).
SGLANG_PD_RESERVED_DECODE_TOKENS = 512


def pd_command(
    values: dict[str, Any],
    plan: ServePlan,
    role: Literal["prefill", "decode"],
    *,
    gpu: str,
    preset: str | None,
    model: str | None,
    spec: ModelSpec,
    backend: str | None = None,
) -> str:
    """A disaggregated pool's serve line: the pool as planned (`values`, `plan`), with its
    role's flags (planner.core.disagg.role_values) and the memory fraction its plan ran with
    pinned, so the line starts the pool simulated."""
    from planner.api.capacity import pinned_memory_fraction, serve_report
    from planner.core.disagg import role_values

    pooled = role_values(values, str(values.get("engine", "vllm")), role, backend)
    pinned = pooled | {"memory_fraction": pinned_memory_fraction(plan)}
    made, _ = serve_report(
        gpu=gpu, preset=preset, model=model, revision=None, gpu_memory_gib=None,
        settings=pinned, spec=spec,
    )  # fmt: skip
    return str(made.command)


def pd_router(engine: str, prefill: int, decode: int) -> str:
    """What fronts the pools: SGLang's router in PD mode over every instance, or for vLLM a
    prefill/decode-aware router."""
    if engine == "sglang":
        return "python -m sglang_router.launch_router --pd-disaggregation " + " ".join(
            [f"--prefill http://prefill-{i}:30000" for i in range(prefill)]
            + [f"--decode http://decode-{i}:30000" for i in range(decode)]
        )
    return "a prefill/decode-aware router (llm-d or Dynamo) in front of both pools"


# KV transfer between the pools: within one fabric over the GPUs' own links (NVLink through
# NVSwitch at the full rate, one xGMI link between two MI300X-class GPUs), across nodes over
# each GPU's RDMA NIC (planner.core.step.comm.Fabric). SGLang's default transfer backend,
# Mooncake, moves KV over RDMA even between GPUs of one node (MOONCAKE_PROTOCOL defaults to
# "rdma", python/sglang/srt/environ.py, read in 0.5.13; its NVLink pools are opt-in); vLLM's
# NIXL connector rides NVLink inside a node (UCX's CUDA IPC).
# Per request, beside the bytes: the hand-off from the prefill instance to the decode
# instance until the decode instance emits the first token, by engine.
# SGLang: the router's hop to both servers, the decode server's own tokenization, the
# bootstrap handshake (the decode server pre-allocates KV and sends its indices before the
# prefill server may run the request) and the queues each scheduler polls once per event-loop
# iteration (bootstrap, transfer, prebuilt batch): 52 ms, measured as the median excess of
# TTFT over prefill + transfer + one request path on the 15 rows of dstack's 8 x H200
# gpt-oss-120b SGLang 1P1D-3P1D sweep at 32 clients with prompts up to 2,048 tokens
# (benchmarks/data/e2e.jsonl, 2025-09; 46-90 ms where prefill does not queue).
# Those runs were reruns: the sweep's script (comparison/pd_ratio/scripts/run_benchmark.sh)
# runs 128, 64 then 32 clients against servers it does not restart, and `vllm bench serve`'s
# random dataset draws the same prompts for the same seed (0) whatever the output length, so
# the 2,048-token prompts of the 32-client runs were in the prefill servers' radix cache. The
# planner, pricing every prompt as computed, counted a prefill those runs skipped: with the
# cached prompts priced as hits, the same median excess is 88 ms. The planner keeps 52 and cold
# pricing (a first run's hand-off may be ~35 ms longer than this) because pricing the reruns as
# they ran, hits and 88 ms, fits the sweep worse: its prefill-bound reruns (128 output tokens)
# turn 2x optimistic on throughput (the sweep's 56 rows as `benchmarks/e2e.py` poses them, the
# reruns' prompts cached in a scratch run, 2026-12-06: tok/s p90 error 54% -> 98%, TTFT median
# 36% -> 45%), its decode pools running slower the more instances share their node (TPOT
# 0.8-0.9x the prediction at 1P1D, 1.1-1.3x at 3P1D), which is not modelled.
# vLLM: the proxy sends the decode instance a request of its own (one more request path,
# REQUEST_PATH_MS) after the prefill instance answers, plus the connector's setup: an
# estimate of 1 ms until a measurement replaces it.
SGLANG_PD_HANDOFF_MS = 52.0
DISAGG_TRANSFER_SETUP_MS = 1.0


def disagg_handoff_ms(engine: str) -> float:
    """The per-request hand-off between the pools beside the KV bytes, ms."""
    if engine == "sglang":
        return SGLANG_PD_HANDOFF_MS
    return REQUEST_PATH_MS + DISAGG_TRANSFER_SETUP_MS


def transfer_plan(
    spec: ModelSpec, prompt_tokens: NDArray[np.int64], kv_dtype_bytes: int, prefill_tp: int,
    decode_tp: int, link: str | None, gpus: int, card: GpuSpec, engine: str,
    backend: str | None = None, prefill: EnginePrediction | None = None,
) -> tuple[NDArray[np.float64], dict[str, Any]]:  # fmt: skip
    """Per-request KV transfer time (ms) from the prefill pool to the decode pool, and how it
    was priced. Bytes: the prompt's KV, one copy (all layers: K and V of every KV head, or the
    MLA latent), but where the prefill instance (`prefill`, its prediction) sends a hybrid
    model's pools as it keeps them (sent_tail); GQA heads are sharded over the ranks and move
    in parallel, an MLA latent is whole on every rank, so one rank's copy sets the time. The
    engine's hand-off (disagg_handoff_ms) is added to every request."""
    import numpy as np

    from planner.core.engines.common import is_mla
    from planner.core.kv import kv_bytes_per_token, transfer_split
    from planner.core.step.comm import fabric_of

    per_token = kv_bytes_per_token(spec, 1, kv_dtype_bytes)
    full, sliding, states = transfer_split(spec, kv_dtype_bytes)
    mla = is_mla(spec)
    parallel = 1 if mla else max(1, min(prefill_tp, decode_tp, spec.num_kv_heads or 1))
    fabric = fabric_of(card)
    # SGLang's backends other than NIXL (Mooncake by default) move KV over RDMA in a node too
    rdma_in_node = engine == "sglang" and backend != "nixl"
    default = "rdma" if fabric.crosses_nodes(gpus) or rdma_in_node else "nvlink"
    where = link or default
    if where not in ("nvlink", "rdma"):
        raise InputError("--disagg-link", f"{link!r}; accepted: nvlink, rdma")
    rate = fabric.peer_bytes_per_s() if where == "nvlink" else fabric.nic_bytes_per_s
    tokens = np.asarray(prompt_tokens, dtype=np.int64)
    tail, state_bytes = tokens, 0
    if prefill is not None:
        sent = sent_tail(spec, engine, prefill, tokens)
        if sent is not None:
            tail, state_bytes = sent, states
    bytes_ = (tokens * full + tail * sliding + state_bytes).astype(np.float64)
    setup = disagg_handoff_ms(engine)
    ms = bytes_ / (rate * parallel) * 1e3 + setup
    return ms, {
        "kv_bytes_per_token": per_token,
        "mean_bytes_per_request": float(bytes_.mean()) if bytes_.size else 0.0,
        "link": where,
        "link_bytes_per_s": rate,
        "parallel_ranks": parallel,
        "setup_ms": setup,
    }


# SGLang's prefill instance sends a hybrid model's state pools beside the full layers' KV from
# 0.5.4 (disaggregation/prefill.py: the Mamba state's slot; the sliding-window pool's last
# window, from the page it starts in, translate_loc_from_full_to_swa); 0.5.3's sends the KV
# indices alone (read in the 0.5.2 - 0.5.23 wheels).
SGLANG_PD_STATE_TRANSFER_SINCE = (0, 5, 4)


def sent_tail(
    spec: ModelSpec, engine: str, prefill: EnginePrediction, tokens: NDArray[np.int64]
) -> NDArray[np.int64] | None:
    """The prompt tokens a prefill instance sends of its sliding-window layers where it sends
    a hybrid model's pools as it keeps them, with the Mamba / linear-attention states; None
    where it sends every layer's KV for every prompt token and no state. SGLang from
    SGLANG_PD_STATE_TRANSFER_SINCE: its window pool's last window from the page it starts in.
    vLLM's NIXL connector with the hybrid KV cache manager on (from 0.22,
    vllm.VLLM_CONNECTOR_HMA_SINCE): a sliding group's last cdiv(W, block) + 1 blocks
    (nixl/base_scheduler.py blocks_per_sw, 0.20 - 0.34)."""
    import numpy as np

    from planner.core.disagg import VLLM_PD_CONNECTOR
    from planner.core.engines import vllm
    from planner.core.engines.common import parse_version
    from planner.core.specs import KvKind

    version, settings = parse_version(prefill.version), prefill.settings
    if engine == "sglang":
        if version < SGLANG_PD_STATE_TRANSFER_SINCE:
            return None
        if not settings.get("swa_max_total_num_tokens"):
            return tokens
        page = int(str(settings.get("page_size") or 1))
        window = int(str(settings["sliding_window_size"]))
        start: NDArray[np.int64] = np.maximum(0, tokens - window) // page * page
        return tokens - start
    connector = vllm.connector_of(prefill)
    on = vllm.hybrid_manager_off(spec, str(settings.get("engine")), version, connector) is None
    nixl = connector == VLLM_PD_CONNECTOR["kv_connector"]
    if not nixl or not on or version < vllm.VLLM_CONNECTOR_HMA_SINCE:
        return None
    windows = [g.window_tokens for g in spec.kv_groups if g.kind is KvKind.SLIDING]
    if not windows or windows[0] is None:
        return tokens
    block = int(str(settings["block_size"]))
    kept = -(-max(w or 0 for w in windows) // block) + 1
    dropped: NDArray[np.int64] = np.maximum(0, -(-tokens // block) - kept) * block
    return tokens - dropped


def decode_pool_config(dec: Instance) -> SimConfig:
    """A decode instance's scheduler settings: the engine's, except that SGLang's decode
    instance admits on its flat per-request reserve (SGLANG_PD_RESERVED_DECODE_TOKENS), not
    the new-token ratio of an aggregated server."""
    cfg = dec.cfg
    if dec.engine != "sglang" or cfg.reserve is None:
        return cfg
    flat = cfg.reserve.model_copy(
        update={
            "flat_tokens": SGLANG_PD_RESERVED_DECODE_TOKENS,
            "init_ratio": 0.0,
            "min_ratio": 0.0,
        }
    )
    return cfg.model_copy(update={"reserve": flat})


def idle_groups_notes(dec: Instance, clients: int | None, groups: int) -> list[str]:
    """The decode pool's attention-DP groups a closed loop of fewer clients leaves part idle
    (lockstep_load), or an open loop fills apart, in one line; none where every group is as
    loaded."""
    ranks = dec.cfg.lockstep_groups
    if clients is None and ranks > 1 and not dec.cfg.lockstep_decode_padded:
        return [
            f"decode pool: an instance's {ranks} {lockstep_ranks_name(dec.engine)} step "
            "together, each step's MoE layers meeting the others "
            f"{idle_ranks_text(dec.cfg, 1.0, open_loop=True)}"
        ]
    load = lockstep_load(dec, clients or 0, groups)
    if load >= 1.0 or dec.cfg.lockstep_decode_padded:
        return []
    return [
        f"decode pool: {clients} clients over {groups} {lockstep_ranks_name(dec.engine)}: "
        f"the others, {idle_ranks_text(dec.cfg, load)}, bring that share of the busiest "
        "one's decode tokens to the MoE layers"
    ]


def run_pools(
    spec: ModelSpec, trace: Trace, layout: DisaggLayout, pre: Instance, dec: Instance,
    link: str | None, concurrency: int | None, backend: str | None = None,
    served: Served | None = None, paced: bool = False,
) -> tuple[RunState, dict[str, Any], NDArray[np.float64], dict[str, Any]]:  # fmt: skip
    """Both pools of a disaggregated deployment over a trace (open loop, or `concurrency`
    clients, `paced`: each request not before its arrival time): the client-side RunState, the
    pools' figures, each request's transfer time and how the transfer was priced. `served`:
    the shared prefixes as the pools serve them (pools_prefix_served); a prompt's tokens the
    decode instance already holds do not cross."""
    from planner.sim import disagg as dis

    crossing = trace.prompt_tokens
    if served is not None:
        crossing = crossing - served.decode_cached
    ms, how = transfer_plan(
        spec, crossing, pre.curve.kv_dtype_bytes, pre.curve.tp, dec.curve.tp, link,
        layout.gpus, pre.card, pre.engine, backend, pre.prediction,
    )  # fmt: skip
    # a pool's ranks run the same kind of step: all prefill, or all decode (a landing costs
    # nothing), so none waits on another's different work
    alone: dict[str, Any] = {"lockstep_groups": 1}
    # under an open loop the decode groups fill apart: each meets the others at the load the
    # arrival rate leaves in them (the loop's expected_occupancy), its prompts computed
    # elsewhere; a closed loop keeps each at its share of the clients (lockstep_load)
    decode_ranks = alone
    if concurrency is None and dec.cfg.lockstep_groups > 1:
        decode_ranks = {"prompts_landed": True}
    state, info = dis.run(
        trace,
        layout,
        prefill_cost=pre.cost,
        prefill_cfg=pre.cfg.model_copy(update=alone),
        # a closed loop of fewer clients than the decode groups hold leaves some idle
        decode_cost=dis.DecodeOnlyCost(
            dec.cost,
            dec.cfg.model_copy(
                update={
                    "lockstep_load": lockstep_load(dec, concurrency or 0, layout.decode_schedulers)
                }
            ),
        ),
        decode_cfg=decode_pool_config(dec).model_copy(update=decode_ranks),
        transfer_ms=ms,
        concurrency=concurrency,
        served=served,
        paced=paced,
    )
    return state, info, ms, how


def pools_prefix_served(
    trace: Trace,
    prefix: PrefixShare | None,
    pre: Instance,
    dec: Instance,
    layout: DisaggLayout,
    clients: int | None,
    seed: int,
) -> tuple[Trace, Served | None, dict[str, Any] | None]:
    """The trace with its shared prefixes served by the pools, how they serve them (Served)
    and the prefill pool's hits summed over its schedulers; the trace itself where no prefix
    is shared. Each prefill scheduler serves the prefixes of the requests the round-robin
    gives it from its own cache (SGLang's prefill server keeps its radix cache; vLLM's
    instance caches prefixes as its release does), holding the prompts of the step it runs
    (its token budget) beside it; the prompts whose KV waits to cross the link are not counted
    (an estimate). A decode scheduler that caches prefixes (vLLM's, as its release does; an
    SGLang decode server turns its radix cache off) finds a prefix it still holds and pulls
    the rest of the prompt (the NIXL connector's get_num_new_matched_tokens: the prompt less
    the locally computed tokens, vLLM 0.34), its running requests (its share of the clients,
    else its running cap) holding their own tokens beside its cache."""
    if prefix is None or prefix.share <= 0:
        return trace, None, None
    import numpy as np

    from planner.api.bench_aggregated import tiers_served
    from planner.sim.disagg import Served, round_robin
    from planner.sim.prefix import prefix_ids
    from planner.sim.workload import Trace

    ids = prefix_ids(trace.size, prefix, seed)
    prompt = trace.prompt_tokens.copy()
    cached = trace.cached_prefix_tokens.copy()
    delay = np.zeros(trace.size)
    counts = {"requests_with_prefix": 0, "gpu_hits": 0, "cpu_hits": 0, "misses": 0}
    hits: dict[str, Any] = {}
    widest = 0
    for mine in round_robin(trace.size, layout.prefill_schedulers):
        if mine.size == 0:
            continue
        got, wait, tier = tiers_served(trace.subset(mine), prefix, pre, pre.budget, seed, ids[mine])
        prompt[mine], cached[mine] = got.prompt_tokens, got.cached_prefix_tokens
        delay[mine] = wait
        hits = tier.model_dump()  # the tiers' sizes are every scheduler's
        widest = max(widest, tier.working_set_tokens)
        for key in counts:
            counts[key] += hits[key]
    # the counts over every prefill scheduler; the working set and the tiers, one scheduler's
    hits |= counts | {"working_set_tokens": widest}
    held = np.zeros(trace.size, dtype=np.int64)
    if dec.engine == "vllm" and caches_prefixes(dec.engine, dec.prediction, dec.curve.model):
        schedulers = layout.decode_schedulers
        seqs = dec.plan.max_num_seqs
        running = seqs if clients is None else min(seqs, -(-clients // schedulers))
        own = float((trace.prompt_tokens + trace.output_tokens).mean())
        for mine in round_robin(trace.size, schedulers):
            if mine.size:
                kept = tiers_served(
                    trace.subset(mine), prefix, dec, round(running * own), seed, ids[mine]
                )[0]
                held[mine] = kept.cached_prefix_tokens
    hits["decode_hits"] = int(np.count_nonzero(held))  # requests whose prefix did not cross
    served = Trace(trace.arrival_s, prompt, trace.output_tokens, cached)
    return served, Served(delay, held), hits


def _check_pools(engine: str, version: str | None, disagg: DisaggLayout, spec: ModelSpec) -> None:
    """Refuse pool layouts the engine cannot run: experts spread for a dense model, data
    parallelism the engine lacks (SGLang's attention-DP groups inside TP; vLLM V1's DP ranks)."""
    from planner.core.engines.common import parse_version

    for flag, ep in (("--prefill-ep", disagg.prefill_ep), ("--decode-ep", disagg.decode_ep)):
        if ep > 1 and not spec.num_experts:
            raise InputError(flag, f"{spec.name} has no experts to spread")
    for flag, groups, pool_tp in (
        ("--prefill-dp", disagg.prefill_dp, disagg.prefill_tp),
        ("--decode-dp", disagg.decode_dp, disagg.decode_tp),
    ):
        if groups > 1 and engine == "sglang":
            attention_groups_of(
                engine, pool_tp, groups, True, moe=bool(spec.num_experts), version=None, flag=flag
            )
        elif groups > 1 and version is not None and parse_version(version) < VLLM_V1_SINCE:
            raise InputError(flag, "vLLM's data-parallel ranks in one server are V1's (0.8+)")
        if groups > 1 and disagg.dp_within_tp != (engine == "sglang"):
            raise InputError(flag, "the layout's DP placement does not match the engine")


def _deployment(
    pre: Instance,
    dec: Instance,
    disagg: DisaggLayout,
    spec: ModelSpec,
    trace: Trace,
    ms: NDArray[np.float64],
    how: dict[str, Any],
    info: dict[str, Any],
    source: dict[str, str | None] | None,
    backend: str | None,
) -> dict[str, Any]:
    """The run's `deployment` object: the decode pool's instance, as the KV and the command
    there are, with both pools, the router and the KV transfer (`how`: its link and bytes a
    token; `ms`: each request's transfer time) under `disagg`."""
    import numpy as np

    return {
        "model": spec.name,
        "gpu": pre.card.id,
        "engine": pre.engine,
        "engine_version": pre.prediction.version,
        # the decode pool's instance, as the KV and the command here are
        "tp": disagg.decode_tp,
        "pp": 1,
        "dp": disagg.decode_dp,
        "dp_attention": dec.attention_groups > 1,
        "ep": disagg.decode_ep,
        "weight_dtype": pre.weight_dtype,
        "kv_cache_dtype": dec.plan.flags.get("kv_cache_dtype", "auto"),
        "kv_dtype": dec.prediction.kv_dtype,
        "max_num_seqs": dec.plan.max_num_seqs,
        "max_num_batched_tokens": pre.budget,
        "kv_cache_tokens": dec.prediction.kv_cache_tokens,
        "kv_window_tokens": window_tokens(dec.cfg),
        "block_size": dec.cfg.block_tokens,
        "scheduler": f"disaggregated {disagg.label}: prefill-only and decode-only pools",
        "command": dec.plan.command,
        "kv_tiers": None,
        "disagg": {
            "layout": disagg.label,
            "prefill": _pool_json(
                pre,
                "prefill",
                disagg.prefill,
                disagg.prefill_tp,
                disagg.prefill_ep,
                disagg.prefill_dp,
                spec,
                source,
                backend,
            ),
            "decode": _pool_json(
                dec,
                "decode",
                disagg.decode,
                disagg.decode_tp,
                disagg.decode_ep,
                disagg.decode_dp,
                spec,
                source,
                backend,
            ),
            "router": pd_router(pre.engine, disagg.prefill, disagg.decode),
            "transfer": how | {"median_ms": float(np.median(ms))},
            **info,
        },
    }


def _notes(
    pre: Instance,
    dec: Instance,
    disagg: DisaggLayout,
    trace: Trace,
    metrics: dict[str, Any],
    closed: int | None,
    client: str | None,
) -> list[str]:
    """What the run's figures leave out or assume: the release modelled, the decode pool's
    batch against its CUDA graphs (its steps are decode-only), each pool's fabric, idle
    decode groups and the API server's and client's pace."""
    peak = metrics["peak_running_seqs"]
    mean_tokens = max(1, round(float((trace.prompt_tokens + trace.output_tokens).mean())))
    cache: list[str] = []
    if metrics.get("prefix_cache"):
        if caches_prefixes(pre.engine, pre.prediction, pre.curve.model):
            decode = (
                "a decode instance pulls the prompt less the prefix its own cache holds"
                if dec.engine == "vllm"
                else "the decode pool receives every prompt's KV whole (its servers keep no "
                "radix cache)"
            )
            cache.append(
                "prefill pool: each scheduler serves the shared prefixes of the requests the "
                "round-robin sends it from its own cache, its room beside the prompts it holds "
                "an estimate (a cache-aware router, sending a prefix to the instance that "
                f"holds it, finds more); {decode}"
            )
        else:
            cache.append("prefill pool: " + prefix_cache_off_note(pre.engine, pre.prediction))
    return (
        cache
        + engine_notes(dec.prediction)
        + graph_coverage_notes(dec.engine, dec.prediction, dec.curve, peak, mixed=False)
        + fabric_notes(pre.curve, pre.engine, "prefill pool: ")
        + fabric_notes(dec.curve, dec.engine, "decode pool: ")
        + idle_groups_notes(dec, closed, disagg.decode_schedulers)
        + frontend_notes(
            dec.curve,
            dec.engine,
            dec.prediction.version,
            peak,
            mean_tokens,
            dec.api_server_ranks,
            client,
        )
    )


def _pool_json(
    inst: Instance,
    role: Literal["prefill", "decode"],
    count: int,
    tp_size: int,
    ep: int,
    groups: int,
    spec: ModelSpec,
    source: dict[str, str | None] | None,
    backend: str | None,
) -> dict[str, Any]:
    """One pool's instances, layout, engine limits and the command that launches each."""
    p = inst.prediction
    where = source or {}
    return {
        "instances": count,
        "tp": tp_size,
        "ep": ep,
        "dp": groups,
        "max_num_seqs": inst.plan.max_num_seqs,
        "max_num_batched_tokens": inst.budget,
        "kv_cache_tokens": p.kv_cache_tokens,
        "command": pd_command(
            inst.values,
            inst.plan,
            role,
            gpu=inst.card.id,
            preset=where.get("preset"),
            model=where.get("model"),
            spec=spec,
            backend=backend,
        ),
    }


def run_disaggregated(
    disagg: DisaggLayout,
    posed: Posed,
    instance: Callable[[int, int | None, int, Literal["prefill", "decode"]], Instance],
    *,
    engine: str,
    version: str | None,
    spec: ModelSpec,
    source: dict[str, str | None] | None = None,
    prefix: PrefixShare | None = None,
    speculation: Speculation | None = None,
    spec_line: str | None = None,
    sweep: list[int] | None = None,
) -> dict[str, Any]:
    """The benchmark `posed` over a prefill pool and a decode pool (planner.sim.disagg), each
    pool's instance from `instance(tp, ep, groups, role)`. A pool's attention-DP groups
    (SGLang) are its schedulers, each with its share of the requests; the benchmark client
    reads every decode scheduler's streams. `prefix`: a shared prefix the prefill instances
    serve from their caches (pools_prefix_served). `speculation`: the decode pool speculates
    (SGLang; `spec_line`, its flags, on both pools' lines: the prefill server hands the decode
    pool what the draft starts from). `sweep`: the concurrencies to rerun
    it at."""
    from planner.sim.bench import bench_metrics

    _check_pools(engine, version, disagg, spec)
    # each pool planned with its role's flags, as its line launches it (SGLang sizes its memory
    # reserve by the role from 0.5.15)
    pre = instance(
        disagg.prefill_tp,
        disagg.prefill_ep if disagg.prefill_ep > 1 else None,
        disagg.prefill_dp,
        "prefill",
    )
    plain_dec = instance(
        disagg.decode_tp,
        disagg.decode_ep if disagg.decode_ep > 1 else None,
        disagg.decode_dp,
        "decode",
    )
    # the client sends each request (through the router) to the prefill pool
    pre = with_client_sends(pre, posed.client)
    if speculation is not None:  # its draft's pass over each prompt (CurveCost)
        pre = with_speculation(pre, speculation)
    echo = speculation_echo(speculation)

    def run_at(trace: Trace, closed: int | None) -> _PoolsRun:
        """Both pools over `trace`, `closed` clients in a closed loop (None: open): the
        served trace, the decode instance as the client reads it, and the run."""
        trace, served, hits = pools_prefix_served(
            trace, prefix, pre, plain_dec, disagg, closed, posed.load.trace_seed()
        )
        # the client reads every decode scheduler's stream
        dec = with_bench_client(
            plain_dec, trace, disagg.decode_schedulers, posed.client, sends=False
        )
        if speculation is not None:
            dec = with_speculation(dec, speculation)
        state, info, ms, how = run_pools(
            spec, trace, disagg, pre, dec, disagg.link, closed, disagg.transfer_backend, served,
            paced=posed.paced and closed is not None,
        )  # fmt: skip
        metrics = bench_metrics(
            state,
            trace,
            percentiles=posed.percentiles,
            stream_interval=dec.curve.stream_interval,
            **posed.empty,
        )
        if hits is not None:
            metrics["prefix_cache"] = hits
        return _PoolsRun(trace, dec, metrics, info, ms, how)

    run = run_at(posed.trace, posed.closed)
    trace, dec, metrics = run.trace, run.dec, run.metrics
    gpus = disagg.gpus
    deployment = _deployment(
        pre, dec, disagg, spec, trace, run.transfer_ms, run.transfer, run.info, source,
        disagg.transfer_backend,
    )  # fmt: skip
    notes = _notes(pre, dec, disagg, trace, metrics, posed.closed, posed.client)
    if echo is not None and spec_line is not None:
        pools = deployment["disagg"]
        deployment["command"] += " " + spec_line
        for role in ("prefill", "decode"):
            pools[role]["command"] += " " + spec_line
        notes += [
            "decode pool: " + speculation_note(echo),
            "prefill pool: its server speculates too, handing the decode pool each prompt's "
            "last hidden state (SGLang 0.5.2) or the draft's first proposals (0.5.4+; "
            "disaggregation/prefill.py), its draft's pass over each prompt priced as on one "
            "server",
        ]
    points = None
    if sweep:
        client = bench_client_of(engine, posed.client)
        points = [
            {"max_concurrency": n, **per_gpu(run_at(posed.swept(n, client), n).metrics, gpus)}
            for n in sweep
        ]
    load = posed.load
    return {
        **per_gpu(metrics, gpus),
        "max_concurrency": load.concurrency,
        "request_rate": load.rate_per_s,
        "gpus": gpus,
        "estimate": (
            "predicted by the step-time model and the engine's scheduler for each pool, with the "
            "KV transfer priced on the link (docs/disagg.md); not a measurement"
        ),
        "step_constants": step_constants(pre.curve, pre.calibrated),
        "request_path_ms": REQUEST_PATH_MS,
        # the keys an aggregated run prints, so one reader takes both: requests reach the
        # prefill pool's API server; V0's multi-step rounds are refused here
        "front_door": pre.cfg.front_door.model_dump() if pre.cfg.front_door else None,
        "ignored_requests": 0,
        "speculation": echo,
        "bench_client": bench_client_of(engine, posed.client),
        "deployment": deployment,
        "workload": posed.echo,
        # one profile (its card's and engine's) applies to both pools
        "calibration": None if pre.calibrated is None else pre.calibrated.model_dump(),
        "step_ms": {},
        "sweep": points,
        "notes": notes,
    }


class _PoolsRun(NamedTuple):
    """One disaggregated run: the trace as served (shared prefixes in its prompts), the decode
    instance as the client reads it, the benchmark's figures, the pools' own figures, each
    request's KV transfer time and how the transfer was priced."""

    trace: Trace
    dec: Instance
    metrics: dict[str, Any]
    info: dict[str, Any]
    transfer_ms: NDArray[np.float64]
    transfer: dict[str, Any]
