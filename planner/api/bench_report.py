"""What a benchmark prints beside its metrics: the deployment and speculation as run, the
per-GPU figures, and the notes saying where the run's figures are estimates or bound by
something the step model does not price."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from planner.api.bench_instance import (
    BENCH_CLIENT_NAMES,
    Instance,
    bench_client_of,
    caches_prefixes,
    eager_flag,
    engine_graphs,
    runs_v0,
)
from planner.api.bench_load import Speculation
from planner.core.engines import engine_notes
from planner.core.step.overhead import (
    FRONTEND_MS_PER_TOKEN,
    SGLANG_DP_ATTENTION_OVERLAP_SINCE,
    SGLANG_OVERLAP_SINCE,
    api_server_label,
)

if TYPE_CHECKING:
    from planner.core.engines.calibration import StepCalibration
    from planner.core.engines.common import EnginePrediction
    from planner.core.flags import SpecTarget
    from planner.core.specs import ModelSpec
    from planner.core.step.model import StepTime
    from planner.sim.config import SimConfig


def deployment_echo(
    inst: Instance, spec: ModelSpec, dp: int, ep: int | None, scheduler_steps: int
) -> dict[str, Any]:
    """The deployment as the output echoes it: the layout, the engine's resolved scheduler
    settings and pool, and the launch command its plan prints."""
    plan, p, cfg, values = inst.plan, inst.prediction, inst.cfg, inst.values
    scheduler = (
        "prefill chunks mixed into decode steps"
        if cfg.mixed
        else "prefill-only steps (decode waits)"
    )
    if scheduler_steps > 1:
        scheduler += (
            f"; multi-step: {scheduler_steps} decode steps per scheduling round "
            f"(--num-scheduler-steps {scheduler_steps})"
        )
    return {
        "model": spec.name,
        "gpu": inst.card.id,
        "engine": inst.engine,
        "engine_version": p.version,
        "tp": int(values.get("tp", 1)),
        "pp": int(values.get("pp", 1)),
        "dp": dp,
        "dp_attention": inst.attention_groups > 1,
        "ep": ep or 1,
        "weight_dtype": inst.weight_dtype,
        "kv_cache_dtype": values.get("kv_cache_dtype", "auto"),
        "kv_dtype": p.kv_dtype,  # what the engine runs for the flag
        "max_num_seqs": plan.max_num_seqs,
        "max_num_batched_tokens": inst.budget,
        "kv_cache_tokens": p.kv_cache_tokens,
        "kv_window_tokens": window_tokens(cfg),
        "block_size": cfg.block_tokens,
        "scheduler": scheduler,
        "num_scheduler_steps": scheduler_steps,
        "command": plan.command,
        "kv_tiers": plan.kv_tiers.model_dump() if plan.kv_tiers else None,
    }


def speculation_echo(speculation: Speculation | None) -> dict[str, Any] | None:
    """The run's speculative decoding as the output echoes it, with the tokens a step is
    expected to emit per sequence (None: no speculation)."""
    if speculation is None:
        return None
    from planner.core.speculative import expected_tokens

    tokens = expected_tokens(speculation.alpha, speculation.k)
    return speculation.model_dump() | {"expected_tokens_per_step": tokens}


def speculation_note(speculation: dict[str, Any]) -> str:
    """How a run's decode steps speculate (`speculation`: its speculation_echo)."""
    k = speculation["k"]
    return (
        f"speculative decoding: each decode step verifies {k} drafts per sequence on the "
        f"step model ({speculation['expected_tokens_per_step']:.2f} tokens expected at "
        f"alpha {speculation['alpha']:g}) after {k} draft forwards of "
        f"{speculation['draft_cost']:g} x a plain step, and the draft runs over each step's "
        f"prompt tokens at {speculation['draft_cost']:g} x their prefill; the draft's weights and "
        "KV are not in the engine's pool here"
    )


def speculation_flags(
    speculation: Speculation, spec: ModelSpec, engine: str, target: SpecTarget | None = None
) -> str:
    """The engine's speculation flags for the run's method and k, as `capacity --spec-alpha`
    prints them for the server `target` describes (the draft model a placeholder; None: the
    newest release); a method the model or the engine has not is one error naming
    --spec-method."""
    from planner.core.flags import SPEC_METHODS, SpecTarget, check_spec_method, spec_flags
    from planner.errors import InputError

    method = speculation.method
    if method not in SPEC_METHODS:
        raise InputError("--spec-method", f"{method!r}; accepted: {', '.join(SPEC_METHODS)}")
    if method == "mtp" and spec.mtp_layers == 0:
        raise InputError("--spec-method", f"mtp needs MTP layers; {spec.name} has none")
    target = target or SpecTarget(architecture=spec.architecture)
    check_spec_method(method, engine, target, "--spec-method")
    line: str = spec_flags(method, speculation.k, None, target=target).model_dump()[engine]
    return line


def run_notes(
    inst: Instance,
    metrics: dict[str, Any],
    requests: int,
    mean_tokens: int,
    client: str | None,
    scheduler_steps: int,
    speculation: dict[str, Any] | None,
    lockstep_load: float = 1.0,
    open_loop: bool = False,
) -> list[str]:
    """What the run's figures leave out or assume, each in one line: steps outside the
    engine's CUDA graphs, the collectives' fabric, speculation, the host's serial CPU work,
    the API server, ROCm's fp8 rescale passes and the requests multi-step rounds ignore.
    `speculation`: the run's echo of it (speculation_echo); `lockstep_load`: the other
    ranks' load beside the simulated one's (bench_instance.lockstep_load); `open_loop`: the
    requests arrive at a rate, not from a closed loop's clients."""
    curve, p, engine = inst.curve, inst.prediction, inst.engine
    peak = metrics["peak_running_seqs"]
    notes = engine_notes(p)
    notes += graph_coverage_notes(engine, p, curve, peak, inst.cfg.mixed)
    notes += fabric_notes(curve, engine)
    if inst.cfg.lockstep_groups > 1:
        notes.append(lockstep_note(engine, inst.cfg, lockstep_load, open_loop))
    if curve.stream_interval > 1:
        n = curve.stream_interval
        notes.append(
            f"--stream-interval {n}: a request's tokens leave {n} at a time after its first, so "
            f"the ITL figures are {n} x the gaps between its tokens, an approximation where a "
            "chunk spans a stalled step beside plain ones (TTFT, TPOT and E2EL are the tokens' "
            "own)"
        )
    if speculation is not None:
        notes.append(speculation_note(speculation))
    if engine == "sglang" and curve.host_ms_per_seq:
        notes.append(
            f"{sglang_serial_reason(inst)}: SGLang's scheduler prepares each step and processes "
            f"the last one's output between GPU steps: {curve.host_ms_per_seq * 1000:.1f} us of "
            "CPU per running sequence is added (measured on a CPU with 0.5.13; the forward's own "
            "CPU work is not, so the steps are optimistic)"
        )
    if curve.host_ms_per_seq and engine == "vllm":
        notes.append(
            f"vLLM {p.version} schedules each step in series with the GPU: "
            f"{curve.host_ms_per_seq * 1000:.1f} us of CPU per running sequence is added "
            "(its scheduler, its input preparation and, in V0, its sampler's outputs, "
            "measured on a CPU)"
            + (f", once per round of {scheduler_steps} steps" if scheduler_steps > 1 else "")
        )
    notes += frontend_notes(
        curve, engine, p.version, peak, mean_tokens, inst.api_server_ranks, client, scheduler_steps
    )
    if curve.dequant_bytes_per_token:
        notes.append(
            f"vLLM {p.version} on ROCm has no row-wise scaled fp8 GEMM (0.7.3 added one): this "
            "checkpoint's per-channel / per-token fp8 linears write fp32 and rescale in "
            f"separate passes, {curve.dequant_bytes_per_token / 1e6:,.1f} MB of HBM traffic "
            "per token per GPU, priced in every step"
        )
    emulated = emulation_note(inst)
    if emulated:
        notes.append(emulated)
    if curve.plain_flops_per_s and curve.flops_per_s < curve.plain_flops_per_s:
        notes.append(
            f"{inst.weight_dtype} weights multiply at {inst.card.id}'s "
            f"{curve.flops_per_s / 1e12:,.1f} TFLOP/s for them, below its "
            f"{curve.plain_flops_per_s / 1e12:,.0f} in 16 bits: prefill and large batches run "
            "slower than a 16-bit checkpoint's"
        )
    if metrics.get("prefix_cache") and not caches_prefixes(engine, p, curve.model):
        notes.append(prefix_cache_off_note(engine, p))
    if metrics["ignored_requests"]:
        notes.append(
            f"{metrics['ignored_requests']:,} of {requests:,} requests have prompts longer "
            f"than {inst.budget:,} tokens: vLLM V0's multi-step rounds do not chunk prompts and "
            "finish those at once with no output: the client counts them completed (the "
            "benchmark_serving.py of that era with a TTFT of 0, which pulls its TTFT figures "
            "down); raise --max-num-batched-tokens to serve them"
        )
    return notes


def emulation_note(inst: Instance) -> str | None:
    """Where the engine emulates the weights' format on the card (planner.core.step.gemm
    .emulated): the step prices the rate emulation multiplies at, not its dequantization."""
    from planner.core.step import gemm

    card, dtype = inst.card, inst.weight_dtype
    weight_only = gemm.weight_only_mxfp4(str(inst.payload["model"]["weight_dtype"]), dtype)
    if not gemm.emulated(card, dtype, weight_only):
        return None
    if dtype.lower().startswith(gemm.FP4_DTYPES):
        return (
            "NVIDIA's NVFP4 on AMD Instinct runs emulated (vLLM's EMULATION backend: the weights "
            "dequantized, multiplied in 16 bits): priced at the 16-bit rate, the "
            "dequantization's own passes not priced, so the steps are optimistic"
        )
    return (
        f"{card.id} has no MX formats: the engines emulate this MXFP4 export (its weights "
        "dequantized before each multiply), priced at the fp8 rate without those passes, so "
        "the steps are optimistic"
    )


def sglang_serial_reason(inst: Instance) -> str:
    """Why an SGLang run schedules in series with the GPU: the flag, the Mamba strategy that
    implies it, a release before its overlap scheduler, or attention DP through 0.4.1."""
    from planner.core.engines.common import parse_version, version_text

    p = inst.prediction
    version = parse_version(p.version)
    if version is not None and version < SGLANG_OVERLAP_SINCE:
        since = version_text(SGLANG_OVERLAP_SINCE)
        return f"SGLang {p.version} has no overlap scheduler by default ({since} turns it on)"
    if "--disable-overlap-schedule" in inst.plan.command:
        return "--disable-overlap-schedule"
    if p.settings.get("disable_overlap_schedule"):
        if p.settings.get("mamba_radix_cache_strategy") == "no_buffer":
            return "the no_buffer Mamba strategy turns SGLang's overlap scheduler off"
        return "--disable-overlap-schedule"
    kept = version_text(SGLANG_DP_ATTENTION_OVERLAP_SINCE)
    return (
        f"SGLang {p.version} turns its overlap scheduler off under attention DP ({kept} keeps it)"
    )


def frontend_notes(
    curve: StepTime,
    engine: str,
    version: str,
    peak: int,
    context: int,
    ranks: int,
    client: str | None = None,
    scheduler_steps: int = 1,
) -> list[str]:
    """What paced the steps at the run's peak batch where that outlasted the GPU step: the API
    server (`ranks` DP ranks sharing one), the benchmark client or the scheduler's own work
    beside the GPU, measured; an engine whose API server is not measured (vLLM V0), where vLLM
    V1's would have set the pace: the figures may be optimistic, and the output says so rather
    than borrow the number. A V0 multi-step round (`scheduler_steps`) pays the engine's own
    time once, its steps shorter."""
    if not peak:
        return []
    terms = curve.terms(peak, context)
    saved_ms = curve.step_overhead_ms(peak) * (1.0 - 1.0 / scheduler_steps)
    notes = []
    if terms.frontend_ms >= terms.step_ms > 0:
        gpu_ms = curve.model_copy(
            update={"frontend_ms_per_token": 0.0, "client_ms_per_token": 0.0}
        ).step_ms(peak, context)
        if curve.client_ms_per_token / curve.stream_interval > curve.frontend_ms_per_token:
            notes.append(
                f"at {peak:,} running sequences the benchmark client "
                f"({BENCH_CLIENT_NAMES[bench_client_of(engine, client)]}: one process reads "
                f"every stream) takes {terms.frontend_ms:.1f} ms to read a step's chunks "
                f"(measured on a CPU), more than the {gpu_ms:.1f} ms GPU step: the ITL, TPOT and "
                "duration it prints are its own pace (--bench-client none: the engine's)"
            )
        else:
            name, flag = api_server_label(engine)
            shared = (
                f" per DP rank, one API server streaming all {ranks} ranks' tokens ({name} "
                f"default: one unless {flag} says more)"
                if ranks > 1
                else f" {name} API server (one process unless {flag} says more)"
            )
            notes.append(
                f"at {peak:,} running sequences{shared}, "
                f"{curve.frontend_ms_per_token / ranks * 1e3:.0f} us per streamed token "
                f"(measured on a CPU), takes longer than the {gpu_ms:.1f} ms GPU step: tokens "
                "reach the clients at its pace"
            )
    floor_ms = curve.scheduler_floor_ms(peak)
    if floor_ms >= terms.step_ms > 0 and floor_ms > terms.frontend_ms:
        gpu_ms = curve.model_copy(
            update={
                "overlapped_host_ms_per_seq": 0.0,
                "frontend_ms_per_token": 0.0,
                "client_ms_per_token": 0.0,
            }
        ).step_ms(peak, context)
        notes.append(
            f"at {peak:,} running sequences the scheduler's own CPU work, "
            f"{curve.overlapped_host_ms_per_seq * 1e3:.1f} us a sequence (measured on a CPU), "
            f"takes longer than the {gpu_ms:.1f} ms GPU step it runs beside: the steps run at "
            "its pace"
        )
    per_token_ms = FRONTEND_MS_PER_TOKEN["vllm"]
    step_ms = terms.step_ms - saved_ms
    if curve.frontend_ms_per_token or peak * per_token_ms < step_ms:
        return notes
    return [
        *notes,
        f"vLLM {version}'s API server is not priced: streaming {peak:,} tokens a step would "
        f"take vLLM V1's {peak * per_token_ms:.1f} ms ({per_token_ms * 1e3:.0f} us a token, "
        f"measured), more than the {step_ms:.1f} ms step, so TPOT here may be optimistic",
    ]


def fabric_notes(curve: StepTime, engine: str, role: str = "") -> list[str]:
    """Where the collectives leave one board: a TP group spanning nodes, and wide expert
    parallelism (DeepEP's all-to-all where SGLang or vLLM's line runs it, or AMD's MoRI where
    SGLang's does, priced; otherwise the engine's default gather)."""
    fabric, notes = curve.fabric, []
    if fabric.crosses_nodes(curve.tp):
        notes.append(
            f"{role}the TP group of {curve.tp} spans nodes ({fabric.domain_gpus} GPUs a "
            "fabric): its all-reduces cross between nodes on the NICs, one per GPU, each an "
            "RDMA hop more"
        )
    ranks = curve.moe_ranks or curve.tp
    mori = curve.all_to_all_kernels == "mori"
    link = "over xGMI" if mori else "over NVLink"
    where = "across nodes" if fabric.crosses_nodes(ranks) else link
    if curve.moe_layers and curve.moe_all_to_all:
        overlap = (
            "half-batches overlap it with compute (--enable-two-batch-overlap)"
            if curve.overlap_all_to_all
            else "nothing overlaps it with compute (--enable-two-batch-overlap would)"
        )
        priced = f"DeepEP's dispatch and combine {where}"
        if curve.family is not None and curve.family.deepep_in_fabric and where == link:
            priced += (
                ", each mode's kernels at the fixed time and share of NVLink NVIDIA's B200 "
                "tables give them (an estimate on other cards)"
            )
        flag = "--all2all-backend" if engine == "vllm" else "--moe-a2a-backend deepep"
        if mori:
            priced = (
                f"AMD's MoRI dispatch and combine {where}: DeepEP's bytes in its normal "
                "kernels' pattern at the link's rate plus MoRI's fixed cost a kernel, within 15% "
                "of MoRI's published times on one node, 25% slower across two (an estimate; "
                "decode's AsyncLL kernels, SGLang 0.5.10+, are unpublished and priced alike)"
            )
            flag = "--moe-a2a-backend mori"
        elif engine == "vllm":  # one mode for prefill and decode, the same exchange priced
            overlap = "its high-throughput and low-latency modes priced alike; " + (
                "dual-batch overlap hides it under the other micro-batch's work from 32 decode "
                "(512 prompt) tokens (--enable-dbo)"
                if curve.overlap_all_to_all
                else "nothing overlaps it with compute (--enable-dbo would)"
            )
        notes.append(
            f"{role}the MoE layers span {ranks} GPUs: priced as {priced} ({flag}, on the "
            f"line); {overlap}"
        )
    elif curve.moe_layers and fabric.crosses_nodes(ranks):
        other = (
            "--all2all-backend deepep_high_throughput (or deepep_low_latency) would run DeepEP; "
            "the other backends are not modelled"
            if engine == "vllm"
            else "--moe-a2a-backend deepep would run DeepEP on NVIDIA, mori AMD's MoRI"
        )
        notes.append(
            f"{role}the MoE layers span {ranks} GPUs across nodes: priced as {engine}'s default "
            f"exchange, every token gathered on every rank over the NIC; {other}"
        )
    return notes


def idle_ranks_text(cfg: SimConfig, load: float, open_loop: bool = False) -> str:
    """How the other ranks in lockstep are loaded, in words: as loaded as the simulated one
    (under an open loop, on average: what the arrival rate leaves in an engine), or `load` of
    it each where a closed loop leaves some idle, and what their rows route as."""
    rows = "; an idle rank's zero rows route as one token" if cfg.lockstep_zero_rows else ""
    if cfg.lockstep_decode_padded:
        rows = "; a decode step pads them with rows that route as real tokens"
        if open_loop:
            return "as loaded (a decode step pads them to its rows, routed as real tokens)"
    if open_loop:
        return (
            "as loaded on average (the open loop fills each apart: each holds what the arrival "
            "rate leaves in an engine at the time, the rate x the requests' mean stay, not the "
            f"simulated one's count of the moment, and idles as a Poisson count would{rows})"
        )
    if load >= 1.0:
        return "as loaded"
    share = "idle" if load <= 0.0 else f"{load:.2f} as loaded each"
    return f"{share} (the closed loop's clients leave ranks idle{rows})"


def lockstep_ranks_name(engine: str) -> str:
    """What an engine's data-parallel ranks of a MoE model are called in the run's notes."""
    return "attention-DP groups" if engine == "sglang" else "data-parallel ranks"


def lockstep_note(engine: str, cfg: SimConfig, load: float = 1.0, open_loop: bool = False) -> str:
    """What the simulation assumes of data-parallel ranks that step together. Their MoE
    layers meet every rank's tokens in each step, so the ranks run their steps in lockstep:
    SGLang gathers each attention-DP group's batch before every forward and runs an idle one
    where a group has none (managers/scheduler_components/dp_attn.py
    prepare_mlp_sync_batch_raw, 0.5.13; its CUDA graphs only when every group decodes); vLLM's
    DP engine cores of a MoE model run dummy steps to keep in step (v1/engine/core.py
    DPEngineCoreProc). The busiest rank is simulated with its share of the load; the others
    as idle_ranks_text says (planner.sim.config: `SimConfig.lockstep_*`; an open loop's
    occupancy: planner.sim.engine `expected_occupancy`)."""
    return (
        f"the {cfg.lockstep_groups} {lockstep_ranks_name(engine)} step together (their MoE "
        "layers meet every rank's tokens each step): the busiest is simulated with its share "
        f"of the load, and the others, {idle_ranks_text(cfg, load, open_loop)}, start prefills "
        "at its steady rate at random, each holding its decode step as long as a prefill step, "
        "while its own prefill steps meet their decode tokens (a closed loop of identical "
        "requests keeps them in phase: they prefill together); an expectation no run with "
        "data-parallel attention has checked"
    )


def graph_coverage_notes(
    engine: str, prediction: EnginePrediction, curve: StepTime, peak_running: int, mixed: bool
) -> list[str]:
    """Where the run leaves the engine's CUDA graphs: decode steps beyond the largest
    captured batch, and vLLM V0's steps that mix prefill chunks into decodes (V0 captured
    decode-only batches), launch every kernel from the host; the step model floors them at
    the host's launches (StepTime.launched)."""
    notes = []
    v0 = runs_v0(engine, prediction)
    if v0 and mixed:
        notes.append(
            "vLLM V0 runs the steps that mix prefill chunks into decodes without CUDA graphs "
            f"(it captures decode-only batches): each is priced at least {launch_floor(curve)}"
        )
    batch = graph_batch_note(engine, prediction, curve, peak_running, v0)
    return notes + ([batch] if batch else [])


def launch_floor(curve: StepTime) -> str:
    """The host's launches of one eager forward pass, as the notes word the floor."""
    from planner.core.step.launch import EAGER_MS_PER_KERNEL

    kernels = round(curve.eager_launch_ms / EAGER_MS_PER_KERNEL)
    return (
        f"the host's {curve.eager_launch_ms:.2f} ms of launches ({kernels:,} kernels at "
        f"{EAGER_MS_PER_KERNEL * 1e3:.2f} us, PyTorch's eager launch measured on an H200's "
        "host; an engine's ops cost more on the way, so a floor), which binds where the GPU's "
        "work is shorter"
    )


def prefix_cache_off_note(engine: str, p: EnginePrediction) -> str:
    """Why the engine serves no shared prefix from its cache: the line's flag or the release's
    default (caches_prefixes)."""
    if engine != "vllm":
        why = "--disable-radix-cache"
    elif p.settings.get("enable_prefix_caching") is False:
        why = "--no-enable-prefix-caching"
    elif p.settings.get("engine") == "v0":
        why = "V0 leaves it off unless started with --enable-prefix-caching"
    else:
        why = "off for hybrid models before 0.26 unless started with --enable-prefix-caching"
    return (
        f"{'vLLM' if engine == 'vllm' else 'SGLang'} {p.version} caches no prompt prefixes "
        f"({why}): every request prefills its shared prefix"
    )


def graph_batch_note(
    engine: str, prediction: EnginePrediction, curve: StepTime, peak_running: int, v0: bool
) -> str | None:
    """Where the engine runs without CUDA graphs (its flag), or the simulated batch outgrew the
    largest one it captures a graph for (engine_graphs)."""
    eager = eager_flag(engine, prediction, v0)
    if eager is not None:
        return (
            f"{eager}: every step launches each kernel from the host, priced at least "
            f"{launch_floor(curve)}"
        )
    largest = engine_graphs(engine, prediction).max_tokens or 0
    if engine == "sglang":
        flag = "--cuda-graph-max-bs"
    elif v0:
        flag = "its fixed capture list"
    else:
        flag = "--max-cudagraph-capture-size"
    if not largest or peak_running <= largest:
        return None
    return (
        f"up to {peak_running:,} sequences ran at once, past the {largest:,} the engine "
        f"captures CUDA graphs for ({flag}): decode steps above it launch every kernel from "
        f"the host, each priced at least {launch_floor(curve)}"
    )


def window_tokens(cfg: SimConfig) -> int | None:
    """The sliding-window pool's tokens where the engine keeps one (SGLang, hybrid SWA)."""
    return None if cfg.window_pool is None else int(cfg.window_pool.tokens)


def step_constants(curve: StepTime, calibrated: StepCalibration | None) -> dict[str, str]:
    """Where the step model's constants for this card come from: its GPU family's, fitted on
    measured step times or extrapolated from other families, or the user's calibration."""
    family = curve.family
    if calibrated is not None:
        return {
            "gpu_family": family.name if family else "given",
            "basis": "calibrated",
            "source": "by planner calibrate --bench on your own results",
        }
    if family is None:
        return {"gpu_family": "given", "basis": "given", "source": "by the caller"}
    return {"gpu_family": family.name, "basis": family.basis, "source": family.source}


def per_gpu(metrics: dict[str, Any], gpus: int) -> dict[str, Any]:
    """The benchmark's figures plus per-GPU and per-user throughput (the public sweeps' axes)."""
    tpot = metrics["median_tpot_ms"]
    return {
        **metrics,
        "output_throughput_per_gpu": metrics["output_throughput"] / gpus,
        "total_token_throughput_per_gpu": metrics["total_token_throughput"] / gpus,
        "tokens_per_s_per_user": 1000.0 / tpot if tpot > 0 else None,
    }
