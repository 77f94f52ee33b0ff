"""`planner simulate`: replay a workload through static / continuous / chunked scheduling."""

import csv
import io
import sys
from typing import Annotated, Any

import typer
from pydantic import ValidationError

from planner.cli.numbers import (
    CONTEXT_FLAGS,
    TP_FLAGS,
    EnableHierarchicalCache,
    HicacheRatio,
    HicacheSize,
    HubTimeout,
    KvOffloadingBackend,
    KvOffloadingSize,
    Prefixes,
    PrefixShareOption,
    PrefixTokens,
    apply_hub_timeout,
    gamma_cv,
    max_model_len_value,
)
from planner.cli.numbers import prefix_share as parse_prefix
from planner.cli.render import console, emit_json, fit_columns, print_table

# Load / Lengths field -> the flag that sets it.
BENCH_FLAGS = {
    "concurrency": "--concurrency/--max-concurrency",
    "rate_per_s": "--rate/--request-rate",
    "cv": "--cv",
    "burstiness": "--burstiness",
    "requests": "--requests/--num-prompts",
    "seed": "--seed",
    "prompt_len": "--prompt-len/--random-input-len",
    "output_len": "--output-len/--random-output-len",
    "len_range": "--len-range",
    "len_spread": "--len-spread",
    "prompt_mean": "--prompt-mean",
    "output_mean": "--output-mean",
    "empty_share": "--empty-outputs",
    # planner.api.bench.Speculation
    "alpha": "--spec-alpha",
    "k": "--spec-k",
    "draft_cost": "--draft-cost",
}

POLICIES = ("static", "continuous", "chunked")
CSV_COLUMNS = (
    "policy",
    "max_batch",
    "tok_s",
    "req_s",
    "ttft_ms.mean",
    "ttft_ms.p50",
    "ttft_ms.p95",
    "ttft_ms.p99",
    "tpot_ms.mean",
    "tpot_ms.p95",
    "tpot_ms.p99",
    "itl_ms.p99",
    "itl_ms.max",
    "occupancy_mean",
    "padded_slot_waste_pct",
    "gpu_idle_pct",
    "launch_overhead_pct",
    "preemptions",
    "goodput_req_s",
    "goodput_pct",
)


def simulate(
    workload: Annotated[
        str | None,
        typer.Option(
            help="Workload preset (presets/workloads) [default: reference].", show_default=False
        ),
    ] = None,
    dataset_name: Annotated[
        str | None,
        typer.Option(
            "--dataset-name",
            help="vllm bench serve's and sglang.bench_serving's dataset: random (with "
            "--random-input-len / --random-output-len) or sharegpt (--workload sharegpt).",
        ),
    ] = None,
    ignore_eos: Annotated[
        bool,
        typer.Option(
            "--ignore-eos",
            help="Outputs run to their length, as --output-len and the workloads' lengths "
            "always do here (accepted for the benchmark's command line).",
        ),
    ] = False,
    trace: Annotated[
        str | None, typer.Option(help="JSONL trace: arrival_s, prompt_tokens, output_tokens.")
    ] = None,
    rate: Annotated[
        float | None,
        typer.Option(
            "--rate",
            "--request-rate",
            help="Arrival rate, requests/s [with a GPU, default: all at once]; with "
            "--concurrency, the rate requests are released at.",
        ),
    ] = None,
    concurrency: Annotated[
        int | None,
        typer.Option(
            "--concurrency",
            "--max-concurrency",
            help="Closed loop: N clients, each sends its next request when one ends.",
        ),
    ] = None,
    cv: Annotated[
        float | None, typer.Option(help="Gamma arrivals with this CV of the gaps (1: Poisson).")
    ] = None,
    metric_percentiles: Annotated[
        str | None,
        typer.Option(help="Tail percentiles to print, e.g. 90,95,99 (vllm bench serve's) [99]."),
    ] = None,
    burstiness: Annotated[
        float | None,
        typer.Option(help="vllm bench serve's gamma shape: --cv 1/sqrt(B) (below 1 is burstier)."),
    ] = None,
    bench_client: Annotated[
        str | None,
        typer.Option(
            help="The benchmark client reading every stream in one process, priced where it "
            "reads slower than the engine streams: vllm (vllm bench serve, or any client of "
            "the OpenAI stream), sglang (sglang.bench_serving's native stream), vllm-2024 "
            "(vLLM's 2024 benchmark_serving.py: like sglang's, an output with no text counts "
            "TTFT 0) or none (the engine's own pace) [the engine's own].",
        ),
    ] = None,
    prompt_len: Annotated[
        int | None,
        typer.Option(
            "--prompt-len",
            "--random-input-len",
            "--random-input",
            help="Fixed prompt length, tokens.",
        ),
    ] = None,
    output_len: Annotated[
        int | None,
        typer.Option(
            "--output-len",
            "--random-output-len",
            "--random-output",
            help="Fixed output length, tokens (runs to it: ignore-eos; with --output-mean, the "
            "cap outputs stop at EOS under).",
        ),
    ] = None,
    len_range: Annotated[
        float | None,
        typer.Option(help="Lengths uniform in [F x L, L] (SGLang bench_serving's range ratio)."),
    ] = None,
    len_spread: Annotated[
        float | None,
        typer.Option(help="Lengths uniform in [L(1-R), L(1+R)] (vllm bench serve's range ratio)."),
    ] = None,
    random_range_ratio: Annotated[
        float | None,
        typer.Option(
            help="The engine's benchmark client's range ratio: --len-spread for vLLM (vllm "
            "bench serve), --len-range for SGLang (sglang.bench_serving)."
        ),
    ] = None,
    prompt_mean: Annotated[
        float | None,
        typer.Option(help="Scale the workload's prompt lengths to this mean (your run's)."),
    ] = None,
    output_mean: Annotated[
        float | None,
        typer.Option(
            help="Outputs stopped at EOS: scale the workload's to this mean; with --output-len, "
            "lengths stop at EOS with this mean, capped at it (no --ignore-eos)."
        ),
    ] = None,
    empty_outputs: Annotated[
        float | None,
        typer.Option(
            help="Share of requests whose first token is EOS: no text, a prefill and one step "
            "(a base model on chat prompts; the rest stream at least one token)."
        ),
    ] = None,
    requests: Annotated[
        int | None, typer.Option("--requests", "--num-prompts", help="Number of requests.")
    ] = None,
    seed: Annotated[int | None, typer.Option(help="Trace seed.")] = None,
    policy: Annotated[
        str | None, typer.Option(help="static, continuous or chunked [chunked].")
    ] = None,
    compare: Annotated[
        str | None, typer.Option(help="Policies side by side: static,continuous,chunked.")
    ] = None,
    sweep: Annotated[str | None, typer.Option(help="max_batch=4,8,16,...")] = None,
    max_batch: Annotated[int | None, typer.Option(help="Running-sequence cap [32].")] = None,
    chunk_tokens: Annotated[
        int | None, typer.Option(help="Largest prefill chunk (chunked) [512].")
    ] = None,
    step_token_budget: Annotated[
        int | None, typer.Option(help="Tokens per step (chunked) [512].")
    ] = None,
    kv_blocks: Annotated[int | None, typer.Option(help="Paged KV pool size in blocks.")] = None,
    block_size: Annotated[int | None, typer.Option(help="Tokens per KV block [16].")] = None,
    preemption: Annotated[str | None, typer.Option(help="recompute or swap [recompute].")] = None,
    shared_prefix_fraction: Annotated[
        float | None, typer.Option(help="Share of requests with a cached shared prefix.")
    ] = None,
    shared_prefix_tokens: Annotated[int | None, typer.Option(help="Shared prefix length.")] = None,
    spec_alpha: Annotated[float | None, typer.Option(help="Speculative acceptance rate.")] = None,
    spec_k: Annotated[int | None, typer.Option(help="Draft tokens per step [4].")] = None,
    draft_cost: Annotated[
        float | None, typer.Option(help="Draft cost per target forward [0.05].")
    ] = None,
    slo_ttft_ms: Annotated[
        float | None,
        typer.Option("--slo-ttft-ms", "--ttft", help="TTFT budget for goodput, ms [1000]."),
    ] = None,
    slo_tpot_ms: Annotated[
        float | None,
        typer.Option("--slo-tpot-ms", "--tpot", help="TPOT budget for goodput, ms [50]."),
    ] = None,
    a_ms: Annotated[float | None, typer.Option(help="Fixed step cost a, ms.")] = None,
    b_ms: Annotated[float | None, typer.Option(help="Per-sequence step cost b, ms.")] = None,
    prefill_ms_per_token: Annotated[float | None, typer.Option(help="Prefill cost, ms.")] = None,
    overhead_ms: Annotated[float | None, typer.Option(help="Launch overhead per step, ms.")] = None,
    preset: Annotated[
        str | None, typer.Option(help="Derive cost and KV pool from a preset.")
    ] = None,
    model: Annotated[str | None, typer.Option(help="... or from a config / Hub id.")] = None,
    gpu: Annotated[str | None, typer.Option(help="GPU for the derived cost model.")] = None,
    tp: Annotated[
        int | None,
        typer.Option(*TP_FLAGS, help="Tensor-parallel size [1]."),
    ] = None,
    pp: Annotated[
        int | None,
        typer.Option("--pp", "--pipeline-parallel-size", help="Pipeline-parallel size [1]."),
    ] = None,
    dp: Annotated[
        int | None,
        typer.Option(
            "--dp",
            "--data-parallel-size",
            "--dp-size",
            help="Data-parallel ranks (GPUs = TP x PP x DP; vLLM: a MoE model's experts span "
            "them all). With --dp-attention: SGLang's attention-DP groups inside --tp [1].",
        ),
    ] = None,
    ep: Annotated[
        int | None,
        typer.Option(
            "--ep",
            "--ep-size",
            help="Expert-parallel size: the GPUs the MoE layers span (TP x DP; SGLang: TP).",
        ),
    ] = None,
    enable_expert_parallel: Annotated[
        bool,
        typer.Option(
            "--enable-expert-parallel",
            help="vLLM's flag: the experts span TP x DP whole (--ep TP x DP).",
        ),
    ] = False,
    attn_dp_size: Annotated[
        int | None,
        typer.Option(
            "--attn-dp-size",
            help="SGLang 0.5.23+ flag: attention-DP groups (the same as --dp N --dp-attention).",
        ),
    ] = None,
    cuda_graph_max_bs: Annotated[
        int | None,
        typer.Option(
            "--cuda-graph-max-bs", help="SGLang: the largest decode batch it captures a graph for."
        ),
    ] = None,
    max_cudagraph_capture_size: Annotated[
        int | None,
        typer.Option(
            "--max-cudagraph-capture-size",
            help="vLLM: the largest batch it captures a CUDA graph for.",
        ),
    ] = None,
    dp_attention: Annotated[
        bool,
        typer.Option(
            "--dp-attention/--no-dp-attention",
            "--enable-dp-attention",
            help="SGLang data-parallel attention (--attn-dp-size / --enable-dp-attention): --dp "
            "groups of attention TP = tp / dp, MoE over all --tp GPUs.",
        ),
    ] = False,
    weight_dtype: Annotated[
        str | None,
        typer.Option(
            "--weight-dtype",
            "--quantization",
            help="fp8 (online), or a variant checkpoint: fp4/nvfp4, mxfp4, int4.",
        ),
    ] = None,
    kv_dtype: Annotated[
        str | None, typer.Option("--kv-dtype", "--kv-cache-dtype", help="auto, bf16, fp8.")
    ] = None,
    engine: Annotated[str | None, typer.Option(help="vllm or sglang [vllm].")] = None,
    engine_version: Annotated[
        str | None, typer.Option(help="Engine release (default: the newest modelled).")
    ] = None,
    max_num_seqs: Annotated[
        int | None,
        typer.Option(
            "--max-num-seqs", "--max-running-requests", help="Running cap (default: the plan's)."
        ),
    ] = None,
    max_num_batched_tokens: Annotated[
        int | None,
        typer.Option(
            "--max-num-batched-tokens",
            "--chunked-prefill-size",
            help="Tokens per step (default: the engine's).",
        ),
    ] = None,
    ep_num_redundant_experts: Annotated[
        int | None,
        typer.Option(
            "--ep-num-redundant-experts",
            help="SGLang: extra expert replicas spread over the EP ranks [0].",
        ),
    ] = None,
    moe_a2a_backend: Annotated[
        str | None,
        typer.Option(
            "--moe-a2a-backend",
            help="SGLang: none or deepep [deepep past one 8-GPU board on NVIDIA, else none].",
        ),
    ] = None,
    enable_two_batch_overlap: Annotated[
        bool,
        typer.Option(
            "--enable-two-batch-overlap",
            help="SGLang: overlap the MoE all-to-all with compute (wide EP, DeepEP).",
        ),
    ] = False,
    memory_fraction: Annotated[
        float | None,
        typer.Option(
            "--gpu-memory-utilization",
            "--mem-fraction-static",
            help="Share of GPU memory the engine may take (vLLM) / its static pool takes "
            "(SGLang) (default: the engine's).",
        ),
    ] = None,
    context: Annotated[
        str | None,
        typer.Option(
            *CONTEXT_FLAGS,
            metavar="<int|auto>",
            help="Server max model length, tokens, or auto (vLLM 0.14+: the longest the KV "
            "cache holds).",
        ),
    ] = None,
    num_scheduler_steps: Annotated[
        int | None,
        typer.Option(help="vLLM V0 (0.6-0.7) multi-step scheduling: decode steps per round."),
    ] = None,
    enable_chunked_prefill: Annotated[
        bool | None,
        typer.Option(
            help="vLLM: split prompts across steps (off: whole prompts, a budget holding the "
            "context) [release default: V1 on; V0 on above 32K]."
        ),
    ] = None,
    calibration: Annotated[
        str | None,
        typer.Option(help="A profile from `planner calibrate --bench` (step-time terms)."),
    ] = None,
    prefix_share: PrefixShareOption = None,
    prefix_tokens: PrefixTokens = None,
    prefixes: Prefixes = 1,
    kv_offloading_size: KvOffloadingSize = None,
    kv_offloading_backend: KvOffloadingBackend = None,
    enable_hierarchical_cache: EnableHierarchicalCache = False,
    hicache_ratio: HicacheRatio = None,
    hicache_size: HicacheSize = None,
    disagg: Annotated[
        str | None,
        typer.Option(help="Prefill/decode disaggregation: xPyD, e.g. 1P3D (docs/disagg.md)."),
    ] = None,
    prefill_tp: Annotated[
        int | None, typer.Option(help="TP of each prefill instance [default: --tp].")
    ] = None,
    decode_tp: Annotated[
        int | None, typer.Option(help="TP of each decode instance [default: --tp].")
    ] = None,
    prefill_ep: Annotated[
        int | None,
        typer.Option(help="Expert parallelism of each prefill instance: 1 or its TP [1]."),
    ] = None,
    decode_ep: Annotated[
        int | None,
        typer.Option(help="Expert parallelism of each decode instance: 1 or its TP [1]."),
    ] = None,
    prefill_dp: Annotated[
        int | None,
        typer.Option(
            "--prefill-dp",
            "--prefill-dp-attention",
            help="Data-parallel ranks in each prefill instance: SGLang attention-DP groups "
            "inside its TP (divides it; MoE models), vLLM --data-parallel-size ranks of TP "
            "GPUs each [1].",
        ),
    ] = None,
    decode_dp: Annotated[
        int | None,
        typer.Option(
            "--decode-dp",
            "--decode-dp-attention",
            help="Data-parallel ranks in each decode instance (as --prefill-dp) [1].",
        ),
    ] = None,
    disagg_transfer_backend: Annotated[
        str | None,
        typer.Option(
            "--disaggregation-transfer-backend",
            help="SGLang: the pools' KV transfer backend, mooncake (over RDMA, also inside a "
            "node) or nixl (NVLink inside a node) [mooncake].",
        ),
    ] = None,
    disagg_link: Annotated[
        str | None,
        typer.Option(
            help="KV transfer link: nvlink (one node) or rdma (a 400G NIC per GPU) "
            "[default: rdma for SGLang's Mooncake and across nodes, else nvlink]."
        ),
    ] = None,
    hub_timeout: HubTimeout = None,
    json_out: Annotated[bool, typer.Option("--json", help="Print one JSON object.")] = False,
    csv_out: Annotated[bool, typer.Option("--csv", help="Print CSV rows.")] = False,
    plot: Annotated[
        str | None, typer.Option(help="Save the sweep chart as an image (plot extra).")
    ] = None,
) -> None:
    """Throughput, latency percentiles and goodput of scheduling policies on one trace."""
    apply_hub_timeout(hub_timeout)
    from planner.api import simulation
    from planner.api.capacity import served_weight_dtype
    from planner.errors import InputError, validation_text

    weight_dtype = served_weight_dtype(weight_dtype)

    workload = _dataset_workload(dataset_name, workload, prompt_len, output_len)
    if ignore_eos and output_mean is not None:
        raise InputError(
            "--ignore-eos", "outputs run to their length; --output-mean stops them at EOS: give one"
        )
    # the engines' own layout flags, where a deployment takes them (without one, each is
    # refused below by its own name)
    if enable_expert_parallel and gpu is not None:
        if ep is not None:
            raise InputError("--ep", "give --ep or vLLM's own --enable-expert-parallel, not both")
        if engine not in (None, "vllm"):
            raise InputError("--enable-expert-parallel", "vLLM's flag (SGLang's: --ep-size)")
        ep = (tp or 1) * (dp or 1)  # vLLM's experts then span every TP x DP rank
    if attn_dp_size is not None and gpu is not None:
        if engine != "sglang":
            raise InputError("--attn-dp-size", "an SGLang flag (--engine sglang)")
        if dp not in (None, attn_dp_size):
            raise InputError(
                "--attn-dp-size", f"is --dp {attn_dp_size} --dp-attention: not --dp {dp}"
            )
        dp, dp_attention = attn_dp_size, True

    if rate == float("inf"):  # vllm bench serve --request-rate inf: every request at once
        if gpu is None:
            raise InputError("--rate", "inf (every request at once) poses a deployment: give --gpu")
        rate = None
    if gpu is not None:
        from planner.api.bench import Lengths, Load, benchmark
        from planner.cli.capacity import _engine_kv_dtype, offload_settings

        engine = "vllm" if engine is None else engine
        tp = 1 if tp is None else tp
        pp = 1 if pp is None else pp
        dp = 1 if dp is None else dp

        if engine not in ("vllm", "sglang"):
            raise InputError("--engine", f"{engine!r}; accepted: vllm, sglang")
        if compare is not None:
            raise InputError(
                "--compare",
                "with a deployment (--gpu) simulate runs the engine's own scheduler; drop --gpu "
                "to compare policies on a given cost model",
            )
        _refuse_policy_options(
            {
                "--policy": policy,
                "--max-batch": max_batch,
                "--chunk-tokens": chunk_tokens,
                "--step-token-budget": step_token_budget,
                "--kv-blocks": kv_blocks,
                "--block-size": block_size,
                "--preemption": preemption,
                "--shared-prefix-fraction": shared_prefix_fraction,
                "--shared-prefix-tokens": shared_prefix_tokens,
                "--slo-ttft-ms/--ttft": slo_ttft_ms,
                "--slo-tpot-ms/--tpot": slo_tpot_ms,
                "--a-ms": a_ms,
                "--b-ms": b_ms,
                "--prefill-ms-per-token": prefill_ms_per_token,
                "--overhead-ms": overhead_ms,
            }
        )
        points = None
        if sweep:
            key, _, values = sweep.partition("=")
            if key.strip() != "concurrency" or not values:
                raise InputError("--sweep", f"{sweep!r}; accepted: concurrency=1,4,16,64")
            try:
                points = [int(v) for v in values.split(",") if v.strip()]
            except ValueError as exc:
                raise InputError("--sweep", f"{sweep!r}: integers expected") from exc
        settings: dict[str, Any] = {
            "engine": engine,
            "version": engine_version,
            "tp": tp,
            "pp": pp,
            "kv_cache_dtype": _engine_kv_dtype(engine, kv_dtype, engine_version),
            "weight_dtype": weight_dtype,
            "max_num_seqs": max_num_seqs,
            "max_num_batched_tokens": max_num_batched_tokens,
            "memory_fraction": memory_fraction,
        }
        engine_extra = {
            ("sglang", "--moe-a2a-backend", "moe_a2a_backend"): moe_a2a_backend,
            ("sglang", "--ep-num-redundant-experts", "ep_num_redundant_experts"): (
                ep_num_redundant_experts
            ),
            ("sglang", "--enable-two-batch-overlap", "enable_two_batch_overlap"): (
                enable_two_batch_overlap or None
            ),
            ("sglang", "--cuda-graph-max-bs", "cuda_graph_max_bs_decode"): cuda_graph_max_bs,
            ("vllm", "--max-cudagraph-capture-size", "max_cudagraph_capture_size"): (
                max_cudagraph_capture_size
            ),
        }
        for (owner, flag, field), stated in engine_extra.items():
            if stated is None:
                continue
            if engine != owner:
                name = "an SGLang" if owner == "sglang" else "a vLLM"
                raise InputError(flag, f"{name} flag (--engine {owner})")
            settings.setdefault("extra", {})[field] = stated
        if context is not None:
            from planner.core.engines.vllm import MAX_MODEL_LEN_AUTO

            length = max_model_len_value(context, "--context")
            if length == MAX_MODEL_LEN_AUTO:
                settings["max_model_len_auto"] = True
            else:
                settings["context_tokens"] = length
        settings["offload"] = offload_settings(
            gpu=gpu,
            kv_offloading_size=kv_offloading_size,
            kv_offloading_backend=kv_offloading_backend,
            lmcache_config=None,
            hicache=enable_hierarchical_cache,
            hicache_ratio=hicache_ratio,
            hicache_size=hicache_size,
            host_memory_gib=None,
        )
        shared = parse_prefix(prefix_share, prefix_tokens, prefixes)
        layout = _disagg_layout(
            engine,
            tp,
            disagg,
            prefill_tp=prefill_tp,
            decode_tp=decode_tp,
            prefill_ep=prefill_ep,
            decode_ep=decode_ep,
            prefill_dp=prefill_dp,
            decode_dp=decode_dp,
            disagg_link=disagg_link,
            disagg_transfer_backend=disagg_transfer_backend,
        )
        cv = gamma_cv(cv, burstiness)
        if random_range_ratio is not None:
            if len_range is not None or len_spread is not None:
                raise InputError(
                    "--random-range-ratio", "is --len-range or --len-spread: give one of them"
                )
            # the engine's own client: sglang.bench_serving draws in [r L, L], vllm bench
            # serve in [L (1 - r), L (1 + r)] (docs/simulate.md)
            if engine == "sglang":
                len_range = random_range_ratio
            else:
                len_spread = random_range_ratio
        try:
            load = Load(
                concurrency=concurrency, rate_per_s=rate, cv=cv, requests=requests, seed=seed or 0
            )
            lengths = Lengths(
                workload=None if trace is not None else workload,
                prompt_len=prompt_len,
                output_len=output_len,
                len_range=len_range,
                len_spread=len_spread,
                trace=trace,
                prompt_mean=prompt_mean,
                output_mean=output_mean,
                empty_share=empty_outputs,
            )
            speculation = _speculation(spec_alpha, spec_k, draft_cost)
        except ValidationError as exc:
            err = exc.errors()[0]
            key = str(err["loc"][0]) if err["loc"] else "load"
            raise InputError(BENCH_FLAGS.get(key, key), validation_text(err)) from exc
        if (
            lengths.workload is None
            and lengths.trace is None
            and (prompt_len is None or output_len is None)
        ):
            raise InputError(
                "--prompt-len",
                "a deployment benchmark needs --prompt-len and --output-len, --workload "
                "(e.g. sharegpt) or --trace",
            )
        profile = None
        if calibration is not None:
            from planner.sources.calibration import load_calibration

            profile = load_calibration(calibration)
        bench = benchmark(
            calibration=profile,
            gpu=gpu,
            preset=preset,
            model=model,
            settings={k: v for k, v in settings.items() if v is not None},
            dp=dp,
            ep=ep,
            dp_attention=dp_attention,
            load=load,
            lengths=lengths,
            sweep=points,
            chunked_prefill=enable_chunked_prefill,
            scheduler_steps=1 if num_scheduler_steps is None else num_scheduler_steps,
            prefix=shared,
            disagg=layout,
            disagg_link=disagg_link,
            disagg_backend=disagg_transfer_backend,
            percentiles=parse_percentiles(metric_percentiles),
            client=bench_client,
            speculation=speculation,
        )
        if dataset_name is not None and not ignore_eos and output_mean is None:
            cap = "--random-output-len" if dataset_name == "random" else "its reference lengths"
            bench["notes"].append(
                f"--dataset-name {dataset_name} without --ignore-eos: the benchmark's outputs "
                f"stop at EOS, short of {cap}; here they run to it (--output-mean with your "
                "run's mean output poses the shorter ones)"
            )
        if json_out:
            emit_json(bench)
        else:
            render_bench(bench)
        return
    for flag, value in (
        ("--concurrency", concurrency),
        ("--burstiness", burstiness),
        ("--metric-percentiles", metric_percentiles),
        ("--bench-client", bench_client),
        ("--prompt-len", prompt_len),
        ("--output-len", output_len),
        ("--len-range", len_range),
        ("--len-spread", len_spread),
        ("--random-range-ratio", random_range_ratio),
        ("--prompt-mean", prompt_mean),
        ("--output-mean", output_mean),
        ("--empty-outputs", empty_outputs),
        ("--weight-dtype", weight_dtype),
        ("--engine-version", engine_version),
        ("--calibration", calibration),
        ("--prefix-share", prefix_share),
        ("--disagg", disagg),
        ("--prefix-tokens", prefix_tokens),
        ("--kv-offloading-size", kv_offloading_size),
        ("--kv-offloading-backend", kv_offloading_backend),
        ("--enable-hierarchical-cache", enable_hierarchical_cache or None),
        ("--hicache-ratio", hicache_ratio),
        ("--hicache-size", hicache_size),
        ("--num-scheduler-steps", num_scheduler_steps),
        ("--enable-chunked-prefill", enable_chunked_prefill),
        ("--tp", tp),
        ("--pp", pp),
        ("--dp", dp),
        ("--ep", ep),
        ("--dp-attention", dp_attention or None),
        ("--kv-dtype", kv_dtype),
        ("--engine", engine),
        ("--max-num-seqs", max_num_seqs),
        ("--max-num-batched-tokens", max_num_batched_tokens),
        ("--gpu-memory-utilization", memory_fraction),
        ("--ep-num-redundant-experts", ep_num_redundant_experts),
        ("--enable-two-batch-overlap", enable_two_batch_overlap or None),
        ("--moe-a2a-backend", moe_a2a_backend),
        ("--context", context),
        ("--prefill-tp", prefill_tp),
        ("--decode-tp", decode_tp),
        ("--prefill-ep", prefill_ep),
        ("--decode-ep", decode_ep),
        ("--prefill-dp", prefill_dp),
        ("--decode-dp", decode_dp),
        ("--disagg-link", disagg_link),
        ("--disaggregation-transfer-backend", disagg_transfer_backend),
        ("--prefixes", None if prefixes == 1 else prefixes),
        ("--dataset-name", dataset_name),
        ("--ignore-eos", ignore_eos or None),
        ("--enable-expert-parallel", enable_expert_parallel or None),
        ("--attn-dp-size", attn_dp_size),
        ("--cuda-graph-max-bs", cuda_graph_max_bs),
        ("--max-cudagraph-capture-size", max_cudagraph_capture_size),
    ):
        if value is not None:
            raise InputError(flag, "describes a deployment benchmark: add --gpu and a model")
    names = [p.strip() for p in compare.split(",")] if compare else [policy or "chunked"]
    for name in names:
        if name not in POLICIES:
            raise InputError(
                "--compare" if compare else "--policy", f"{name!r}; accepted: {', '.join(POLICIES)}"
            )
    if preemption not in (None, "recompute", "swap"):
        raise InputError("--preemption", f"{preemption!r}; accepted: recompute, swap")
    caps = None
    if sweep:
        key, _, values = sweep.partition("=")
        if key.strip() != "max_batch" or not values:
            raise InputError("--sweep", f"{sweep!r}; accepted: max_batch=4,8,16")
        try:
            caps = [int(v) for v in values.split(",") if v.strip()]
        except ValueError as exc:
            raise InputError("--sweep", f"{sweep!r}: integers expected") from exc
    given = {
        "a_ms": a_ms,
        "b_ms": b_ms,
        "prefill_ms_per_token": prefill_ms_per_token,
        "overhead_ms": overhead_ms,
    }
    cost: dict[str, Any] = {k: v for k, v in given.items() if v is not None}
    if cost and not (preset or model):
        cost["source"] = "given"
    given_sim: dict[str, Any] = {
        "max_batch": max_batch,
        "chunk_tokens": chunk_tokens,
        "step_token_budget": step_token_budget,
        "block_tokens": block_size,
        "preemption": preemption,
        "spec_k": spec_k,
        "spec_draft_cost": draft_cost,
        "slo_ttft_ms": slo_ttft_ms,
        "slo_tpot_ms": slo_tpot_ms,
    }
    # unset ones take the simulator's defaults (SimConfig); these two are None when unset
    sim: dict[str, Any] = {k: v for k, v in given_sim.items() if v is not None}
    sim |= {"kv_blocks": kv_blocks, "spec_alpha": spec_alpha}
    result = simulation(
        workload=workload or "reference",
        trace_path=trace,
        overrides={
            "rate_per_s": rate,
            "arrival": "gamma" if cv is not None else None,
            "cv": cv,
            "requests": requests,
            "seed": seed,
            "shared_prefix_fraction": shared_prefix_fraction,
            "shared_prefix_tokens": shared_prefix_tokens,
        },
        policies=names,
        sweep=caps,
        cost=cost,
        sim=sim,
        gpu=gpu,
        preset=preset,
        model=model,
        capacity_settings={"tp": 1},
    )
    if plot is not None:
        _save_sweep_chart(result, plot)
    if json_out:
        emit_json(result)
    elif csv_out:
        emit_csv(result)
    else:
        render(result)


def _flat(row: dict[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in row.items():
        if isinstance(value, dict):
            out |= {f"{key}.{k}": v for k, v in value.items()}
        else:
            out[key] = value
    return out


def emit_csv(result: dict[str, Any]) -> None:
    """Policy or sweep rows as CSV (nested metrics flattened to dotted columns)."""
    buf = io.StringIO()
    writer = csv.DictWriter(buf, fieldnames=CSV_COLUMNS, extrasaction="ignore")
    writer.writeheader()
    for row in result["sweep"] or result["policies"]:
        writer.writerow(_flat(row))
    sys.stdout.write(buf.getvalue())


def render(result: dict[str, Any]) -> None:
    """The cost model, the policy or sweep table, and the sweep bar chart."""
    from rich import box
    from rich.table import Table

    out = console()
    c = result["cost_model"]
    out.print(
        f"cost model ({c['source']}): a {c['a_ms']:.3f} ms + b {c['b_ms']:.4f} ms/seq, prefill "
        f"{c['prefill_ms_per_token'] * 1000:.1f} us/token, overhead {c['overhead_ms']:.3g} ms/step",
        markup=False,
    )
    rows = result["sweep"] or result["policies"]
    title = "Batch-cap sweep" if result["sweep"] else "Policies"
    table = Table(
        title=f"{title} (times in ms)",
        title_justify="left",
        box=box.SIMPLE_HEAD,
        show_edge=False,
        pad_edge=False,
        padding=(0, 0),  # the blank column rules separate the columns
    )
    cols = (
        "policy",
        "cap",
        "tok/s",
        "TTFT ms",
        "p95 TTFT",
        "p95 TPOT",
        "max ITL",
        "waste %",
        "idle %",
        "preempt",
        "goodput %",
    )
    for col in cols:
        table.add_column(col, justify="right")
    peak = (result["goodput_peak"] or {}).get("max_batch")
    for r in rows:
        mark = " *" if result["sweep"] and r["max_batch"] == peak else ""
        table.add_row(
            r["policy"],
            f"{r['max_batch']}{mark}",
            f"{r['tok_s']:,.0f}",
            f"{r['ttft_ms']['mean']:,.0f}",
            f"{r['ttft_ms']['p95']:,.0f}",
            f"{r['tpot_ms']['p95']:.2f}",
            f"{r['itl_ms']['max']:,.1f}",
            f"{r['padded_slot_waste_pct']:.0f}",
            f"{r['gpu_idle_pct']:.1f}",
            str(r["preemptions"]),
            f"{r['goodput_pct']:.1f}",
        )
    print_table(out, fit_columns(table))
    if result["sweep"]:
        top_tok = max(r["tok_s"] for r in rows) or 1.0
        width = 20
        for r in rows:
            tok = "#" * round(r["tok_s"] / top_tok * width)
            good = "=" * round(r["goodput_pct"] / 100 * width)
            out.print(f"{r['max_batch']:>5}  tok/s {tok:<{width}}  goodput {good}", markup=False)
        out.print(f"goodput peak at max_batch {peak} (*)")


# Options of the policy simulation that a deployment benchmark takes from the engine instead,
# and what to type there.
DEPLOYMENT_EQUIVALENT = {
    "--policy": "the engine's scheduler runs (vLLM: --enable-chunked-prefill or not)",
    "--max-batch": "--max-num-seqs / --max-running-requests caps the running set",
    "--chunk-tokens": "--max-num-batched-tokens / --chunked-prefill-size sets the chunk",
    "--step-token-budget": "--max-num-batched-tokens sets the step budget",
    "--kv-blocks": "the KV pool is the engine's, from the model and the GPU",
    "--block-size": "the KV pool is the engine's, from the model and the GPU",
    "--preemption": "the engine preempts as it does (vLLM recomputes, SGLang retracts)",
    "--shared-prefix-fraction": "--prefix-share / --prefix-tokens pose a shared prefix",
    "--shared-prefix-tokens": "--prefix-share / --prefix-tokens pose a shared prefix",
    "--slo-ttft-ms/--ttft": "the benchmark prints latencies, not goodput (`planner fleet` "
    "sizes to an SLO)",
    "--slo-tpot-ms/--tpot": "the benchmark prints latencies, not goodput (`planner fleet` "
    "sizes to an SLO)",
    "--a-ms": "the step model is derived (`planner calibrate --bench` fits it)",
    "--b-ms": "the step model is derived (`planner calibrate --bench` fits it)",
    "--prefill-ms-per-token": "the step model is derived (`planner calibrate --bench` fits it)",
    "--overhead-ms": "the step model is derived (`planner calibrate --bench` fits it)",
}


def _speculation(alpha: float | None, k: int | None, draft_cost: float | None) -> Any:
    """--spec-alpha / --spec-k / --draft-cost for a deployment (None without --spec-alpha; the
    other two alone are an error naming it). A value out of range raises pydantic's error,
    which the caller names by BENCH_FLAGS."""
    from planner.api.bench import Speculation
    from planner.errors import InputError

    if alpha is None:
        for flag, value in (("--spec-k", k), ("--draft-cost", draft_cost)):
            if value is not None:
                raise InputError(flag, "sets speculative decoding: give --spec-alpha too")
        return None
    given = {"alpha": alpha, "k": k, "draft_cost": draft_cost}
    return Speculation(**{key: v for key, v in given.items() if v is not None})


def _disagg_layout(
    engine: str,
    tp: int,
    disagg: str | None,
    *,
    prefill_tp: int | None,
    decode_tp: int | None,
    prefill_ep: int | None,
    decode_ep: int | None,
    prefill_dp: int | None,
    decode_dp: int | None,
    disagg_link: str | None,
    disagg_transfer_backend: str | None,
) -> Any:
    """The prefill/decode pools --disagg and each pool's --prefill-* / --decode-* options
    describe (a DisaggLayout; None without --disagg), each bad value one error naming its
    flag; the pool options, the link and SGLang's transfer backend are refused without it."""
    from planner.errors import InputError

    pools = (prefill_tp, decode_tp, prefill_ep, decode_ep, prefill_dp, decode_dp)
    layout = None
    if disagg is not None:
        from planner.core.parallel import moe_ranks, ranks_share_tp
        from planner.sim.disagg import DisaggLayout, parse_layout

        for flag, pool_tp in (("--prefill-tp", prefill_tp), ("--decode-tp", decode_tp)):
            if pool_tp is not None and pool_tp < 1:
                raise InputError(flag, f"must be >= 1 (got {pool_tp})")

        try:
            x, y = parse_layout(disagg)
            layout = DisaggLayout(
                prefill=x, decode=y, prefill_tp=prefill_tp or tp, decode_tp=decode_tp or tp
            )
        except ValidationError as exc:
            where = str(exc.errors()[0]["loc"][0])
            flag = {"prefill_tp": "--prefill-tp", "decode_tp": "--decode-tp"}.get(where, "--disagg")
            raise InputError(flag, exc.errors()[0]["msg"].lower()) from exc
        except ValueError as exc:
            raise InputError(
                "--disagg", f"{disagg!r}; expected xPyD (1P1D, 2P6D ...) with x, y >= 1"
            ) from exc
        for flag, groups in (("--prefill-dp", prefill_dp), ("--decode-dp", decode_dp)):
            if groups is not None and groups < 1:
                raise InputError(flag, f"must be >= 1 (got {groups})")
        for flag, pool_ep, pool_tp, ranks in (
            ("--prefill-ep", prefill_ep, layout.prefill_tp, prefill_dp or 1),
            ("--decode-ep", decode_ep, layout.decode_tp, decode_dp or 1),
        ):
            # an instance's MoE layers span its TP GPUs, and vLLM's DP ranks' too
            span = moe_ranks(engine, pool_tp, ranks)
            if pool_ep is not None and pool_ep not in (1, span):
                raise InputError(
                    flag,
                    f"{pool_ep}: a pool's expert parallelism spans its instance's MoE ranks "
                    f"(1 or {span})",
                )
        layout = layout.model_copy(
            update={
                "prefill_ep": prefill_ep or 1,
                "decode_ep": decode_ep or 1,
                "prefill_dp": prefill_dp or 1,
                "decode_dp": decode_dp or 1,
                "dp_within_tp": ranks_share_tp(engine),
            }
        )
    elif any(v is not None for v in (*pools, disagg_link)):
        raise InputError(
            "--prefill-tp",
            "--prefill-tp / --decode-tp / --prefill-ep / --decode-ep / --prefill-dp / "
            "--decode-dp / --disagg-link need --disagg",
        )
    if disagg_transfer_backend is not None:
        from planner.core.disagg import SGLANG_TRANSFER_BACKENDS

        flag = "--disaggregation-transfer-backend"
        if disagg is None:
            raise InputError(flag, "needs --disagg")
        if engine != "sglang":
            raise InputError(flag, "an SGLang flag (vLLM's pools run the NIXL connector)")
        if disagg_transfer_backend not in SGLANG_TRANSFER_BACKENDS:
            raise InputError(
                flag,
                f"{disagg_transfer_backend!r}; accepted: {', '.join(SGLANG_TRANSFER_BACKENDS)}",
            )
    return layout


# vllm bench serve's and sglang.bench_serving's --dataset-name values simulate poses, and the
# workload each one stands for (random: the fixed lengths --random-input-len / -output-len give).
DATASET_WORKLOADS = {"random": None, "sharegpt": "sharegpt"}


def _dataset_workload(
    dataset: str | None, workload: str | None, prompt_len: int | None, output_len: int | None
) -> str | None:
    """The workload a benchmark's --dataset-name names (--workload where none is given)."""
    from planner.errors import InputError

    if dataset is None:
        return workload
    if dataset not in DATASET_WORKLOADS:
        raise InputError(
            "--dataset-name",
            f"{dataset!r}; accepted: {', '.join(DATASET_WORKLOADS)} (or --trace with your own "
            "lengths)",
        )
    if workload is not None:
        raise InputError("--dataset-name", "is --workload: give one of them")
    if dataset == "random" and (prompt_len is None or output_len is None):
        raise InputError(
            "--dataset-name", "random needs --random-input-len and --random-output-len"
        )
    if dataset != "random" and (prompt_len is not None or output_len is not None):
        raise InputError(
            "--random-input-len" if prompt_len is not None else "--random-output-len",
            f"describes the random dataset; {dataset}'s lengths are its own (--prompt-mean / "
            "--output-mean scale them to your run's)",
        )
    return DATASET_WORKLOADS[dataset]


def _save_sweep_chart(result: dict[str, Any], path: str) -> None:
    """Chart a policy simulation's batch-cap sweep (tok/s and goodput by max_batch) to
    `path` (--plot; the plot extra)."""
    from planner.errors import InputError

    if not result["sweep"]:
        raise InputError("--plot", "charts a --sweep; add --sweep max_batch=...")
    from planner.cli.plot import Chart, Series, save

    rows = result["sweep"]
    caps = [r["max_batch"] for r in rows]
    peak = result["goodput_peak"]["max_batch"]
    save(
        Chart(
            title="Batch-cap sweep",
            x_label="max_batch",
            y_label="output tok/s",
            right_label="goodput %",
            log_x=True,
            series=[
                Series("tok/s", caps, [r["tok_s"] for r in rows]),
                Series("goodput %", caps, [r["goodput_pct"] for r in rows], right_axis=True),
            ],
            marks=[(peak, f"goodput peak {peak}")],
        ),
        path,
    )


def _refuse_policy_options(given: dict[str, object]) -> None:
    """A policy-simulation option typed with a deployment (--gpu) is one error naming it and
    what the deployment takes instead: it would otherwise be ignored."""
    from planner.errors import InputError

    for flag, value in given.items():
        if value is not None:
            raise InputError(
                flag,
                f"a policy-simulation option; with a deployment (--gpu) "
                f"{DEPLOYMENT_EQUIVALENT[flag]} (drop it, or drop --gpu)",
            )


def render_bench(result: dict[str, Any]) -> None:
    """The benchmark's own summary layout (vllm bench serve), marked as a prediction."""
    out = console()
    d = result["deployment"]
    width = 50
    lines = [
        " Predicted serving benchmark ".center(width, "="),
        f"{d['model']} on {result['gpus']} x {d['gpu']}",
        *_joined(
            [
                f"{d['engine']} {d['engine_version']}: TP {d['tp']}",
                ("attention " if d.get("dp_attention") else "") + f"DP {d['dp']}",
                *([f"EP {d['ep']}"] if d.get("ep", 1) > 1 else []),
                f"weights {d['weight_dtype']}",
                f"KV {d['kv_cache_dtype']}",
            ],
            width,
        ),
        *_joined(
            [
                f"max_num_seqs {d['max_num_seqs']:,}",
                f"{d['max_num_batched_tokens']:,} tokens/step",
                f"KV {d['kv_cache_tokens']:,} tokens"
                + (
                    f" (window layers {d['kv_window_tokens']:,})"
                    if d.get("kv_window_tokens")
                    else ""
                )
                + (" per DP rank" if d["dp"] > 1 else ""),
            ],
            width,
        ),
        *(
            [f"multi-step: {d['num_scheduler_steps']} decode steps per round"]
            if d.get("num_scheduler_steps", 1) > 1
            else []
        ),
        f"load: {_load_text(result)}",
        f"lengths: {result['workload'].get('description', result['workload'])}",
    ]
    rows: list[tuple[str, str]] = [
        ("Successful requests:", f"{result['completed']:,}"),
        ("Benchmark duration (s):", f"{result['duration']:,.2f}"),
        ("Total input tokens:", f"{result['total_input_tokens']:,}"),
        ("Total generated tokens:", f"{result['total_output_tokens']:,}"),
        ("Request throughput (req/s):", f"{result['request_throughput']:,.2f}"),
        ("Output token throughput (tok/s):", f"{result['output_throughput']:,.2f}"),
        ("Total token throughput (tok/s):", f"{result['total_token_throughput']:,.2f}"),
        ("Output tok/s per GPU:", f"{result['output_throughput_per_gpu']:,.2f}"),
        ("Preemptions:", f"{result['preemptions']:,}"),
    ]
    if result.get("ignored_requests"):
        rows.insert(1, ("Ignored requests:", f"{result['ignored_requests']:,}"))
    for line in lines:
        out.print(line, markup=False, soft_wrap=True)
    for label, value in rows:
        out.print(f"{label:<34}{value:>16}", markup=False)
    for key, title in (
        ("ttft", "Time to First Token"),
        ("tpot", "Time per Output Token (excl. 1st)"),
        ("itl", "Inter-token Latency"),
        ("e2el", "End-to-end Latency"),
    ):
        out.print(f" {title} ".center(width, "-"), markup=False)
        tails = [k.split("_")[0] for k in result if k.startswith("p") and k.endswith(f"_{key}_ms")]
        for stat in ("mean", "median", *tails):
            label = f"{stat.capitalize() if stat[0] != 'p' else stat.upper()} {key.upper()} (ms):"
            out.print(f"{label:<34}{result[f'{stat}_{key}_ms']:>16,.2f}", markup=False)
    out.print("=" * width, markup=False)
    if result["sweep"]:
        out.print("concurrency sweep: conc  out tok/s/GPU  tok/s/user  TPOT  TTFT", markup=False)
        for r in result["sweep"]:
            user = r["tokens_per_s_per_user"] or 0.0
            out.print(
                f"{r['max_concurrency']:>6}  {r['output_throughput_per_gpu']:>10,.1f}  "
                f"{user:>9,.1f}  {r['median_tpot_ms']:>7,.1f}  {r['median_ttft_ms']:>8,.0f}",
                markup=False,
            )
    out.print(f"estimate: {result['estimate']}", markup=False)
    for note in result.get("notes") or []:
        out.print(f"note: {note}", markup=False)
    basis = result.get("step_constants")
    if basis:
        out.print(
            f"step model: {basis['gpu_family']} constants {basis['basis']} {basis['source']}",
            markup=False,
        )


# Tail percentiles one run prints at most (vllm bench serve takes any list; ten is plenty).
MAX_PERCENTILES = 10


def parse_percentiles(text: str | None) -> tuple[float, ...] | None:
    """--metric-percentiles "90,95,99" -> (90.0, 95.0, 99.0), each in (0, 100], in order."""
    from planner.errors import InputError

    if text is None:
        return None
    try:
        values = tuple(float(x) for x in text.split(",") if x.strip())
    except ValueError as exc:
        raise InputError("--metric-percentiles", f"{text!r}: numbers, e.g. 90,95,99") from exc
    if not values or len(values) > MAX_PERCENTILES:
        raise InputError(
            "--metric-percentiles", f"{text!r}: 1 to {MAX_PERCENTILES} percentiles, e.g. 90,99"
        )
    for v in values:
        if not 0 < v <= 100:
            raise InputError("--metric-percentiles", f"{v:g} is not a percentile in (0, 100]")
    return tuple(dict.fromkeys(values))


def _joined(parts: list[str], width: int) -> list[str]:
    """`parts` joined by commas into as few lines as keep each within `width` (one part per
    line at worst): the summary stays inside a narrow terminal."""
    lines: list[str] = []
    for part in parts:
        if lines and len(lines[-1]) + 2 + len(part) <= width:
            lines[-1] += f", {part}"
        else:
            lines.append(part)
    return lines


def _load_text(result: dict[str, Any]) -> str:
    rate = result["request_rate"]
    if result["max_concurrency"] is not None:
        clients = f"closed loop, {result['max_concurrency']:,} clients"
        if rate is not None and rate != float("inf"):
            return f"{clients}, requests released at {rate:g} req/s"
        return clients
    w = result["workload"]
    if rate is None or rate == float("inf"):
        return "all requests at t = 0"
    kind = "Poisson" if w.get("arrival", "poisson") == "poisson" else f"gamma CV {w.get('cv')}"
    return f"{kind} {rate:g} req/s"
