"""`planner slo`: turn TTFT / TPOT budgets into a batch cap, and check it against goodput."""

from typing import TYPE_CHECKING, Annotated, Any

import typer

from planner.cli.engine_flags import ENGINE_EXTRA_FLAGS, engine_extra, stated_exchange
from planner.cli.numbers import (
    TP_FLAGS,
    All2AllBackend,
    AttentionDataParallel,
    DataParallel,
    DataParallelAttention,
    EnableDbo,
    EnableDpLmHead,
    EnableExpertParallel,
    EnableTwoBatchOverlap,
    EpNumRedundantExperts,
    ExpertParallel,
    HubTimeout,
    JsonOut,
    KvDtype,
    MemoryFraction,
    ModelLength,
    MoeA2aBackend,
    MoeDenseTpSize,
    PipelineParallel,
    Revision,
    StepCalibration,
    apply_hub_timeout,
    engine_layout,
)
from planner.cli.render import console, emit_json

if TYPE_CHECKING:
    from planner.core.engines.calibration import Calibration

# The longest per-step engine overhead accepted: a second per step is not a serving engine.
MAX_OVERHEAD_MS = 1000.0


def slo(
    tpot: Annotated[float, typer.Option(help="TPOT budget per output token, ms.")],
    ttft: Annotated[float | None, typer.Option(help="TTFT budget, ms (with --prompt-len).")] = None,
    prompt_len: Annotated[
        int | None,
        typer.Option(
            help="Prompt tokens for the TTFT check; with --output-len, also the prompt tokens "
            "per output token the line's batch brings (instead of --workload's)."
        ),
    ] = None,
    output_len: Annotated[
        int | None, typer.Option(help="Output tokens per request (with --prompt-len).")
    ] = None,
    a_ms: Annotated[float | None, typer.Option(help="Given fixed step cost a, ms.")] = None,
    b_ms: Annotated[float | None, typer.Option(help="Given per-sequence cost b, ms.")] = None,
    prefill_ms_per_token: Annotated[
        float | None, typer.Option(help="Prefill cost per prompt token, ms [default: 0.047].")
    ] = None,
    fit: Annotated[
        str | None,
        typer.Option(
            help="Measurements to fit (comma-separated files): CSV batch,step_ms, `vllm bench "
            "serve` JSON, SGLang bench_one_batch JSONL, or a --save-fit file."
        ),
    ] = None,
    save_fit: Annotated[
        str | None, typer.Option(help="Save the step model used (JSON, reusable with --fit).")
    ] = None,
    batch: Annotated[
        str | None, typer.Option(help="Report t(B) and its terms at these batches: 1,8,64.")
    ] = None,
    preset: Annotated[str | None, typer.Option(help="Derive a and b from a model preset.")] = None,
    model: Annotated[str | None, typer.Option(help="... or a config / Hub id.")] = None,
    revision: Revision = None,
    gpu: Annotated[str | None, typer.Option(help="GPU for the derived model.")] = None,
    tp: Annotated[
        int,
        typer.Option(*TP_FLAGS, help="Tensor-parallel size."),
    ] = 1,
    pp: PipelineParallel = 1,
    dp: DataParallel = 1,
    ep: ExpertParallel = None,
    dp_attention: DataParallelAttention = False,
    enable_expert_parallel: EnableExpertParallel = False,
    attn_dp_size: AttentionDataParallel = None,
    all2all_backend: All2AllBackend = None,
    enable_dbo: EnableDbo = False,
    moe_a2a_backend: MoeA2aBackend = None,
    enable_two_batch_overlap: EnableTwoBatchOverlap = False,
    ep_num_redundant_experts: EpNumRedundantExperts = None,
    moe_dense_tp_size: MoeDenseTpSize = None,
    enable_dp_lm_head: EnableDpLmHead = False,
    context: ModelLength = None,
    memory_fraction: MemoryFraction = None,
    weight_dtype: Annotated[
        str | None,
        typer.Option(
            "--weight-dtype",
            "--quantization",
            help="Weights as served: bf16, fp8, fp4, int4 [default: the checkpoint's].",
        ),
    ] = None,
    kv_dtype: KvDtype = None,
    engine: Annotated[
        str, typer.Option(help="vllm, sglang or lmdeploy (its step overhead).")
    ] = "vllm",
    engine_version: Annotated[
        str | None, typer.Option(help="Engine release (vLLM before 0.8: the V0 engine).")
    ] = None,
    calibration: StepCalibration = None,
    mean_len: Annotated[int, typer.Option(help="Working context per sequence.")] = 2000,
    bandwidth_efficiency: Annotated[
        float | None,
        typer.Option(
            help="Achievable share of peak HBM bandwidth [default: the GPU's, calibrated]."
        ),
    ] = None,
    flops_efficiency: Annotated[
        float | None,
        typer.Option(help="Achievable share of dense FLOPs [default: 0.5 x the GPU family's]."),
    ] = None,
    overhead_ms: Annotated[
        float | None, typer.Option(help="Engine overhead per step, ms [default: calibrated].")
    ] = None,
    validate: Annotated[
        bool, typer.Option(help="Check the cap against simulated goodput.")
    ] = False,
    rate: Annotated[float | None, typer.Option(help="Arrival rate for --validate, req/s.")] = None,
    workload: Annotated[
        str | None,
        typer.Option(
            help="Workload whose prompts share the steps (its prompt tokens per output token "
            "cap the line's batch), and --validate's [reference]."
        ),
    ] = None,
    plot: Annotated[
        str | None, typer.Option(help="Also save the chart as an image (plot extra).")
    ] = None,
    hub_timeout: HubTimeout = None,
    json_out: JsonOut = False,
) -> None:
    """The largest batch meeting TPOT, the prefill chunk that keeps stalls inside it, and flags."""
    apply_hub_timeout(hub_timeout)
    from planner.api import slo_advice
    from planner.api.capacity import served_weight_dtype
    from planner.api.slo import memory_flag
    from planner.errors import InputError

    weight_dtype = served_weight_dtype(weight_dtype)

    if validate and rate is None:
        raise InputError("--rate", "required with --validate (arrival rate, req/s)")
    if rate is not None and not validate:
        raise InputError("--rate", "only used by --validate (add --validate to simulate at it)")
    for name, value in (
        ("--bandwidth-efficiency", bandwidth_efficiency),
        ("--flops-efficiency", flops_efficiency),
    ):
        if value is not None and not 0 < value <= 1:
            raise InputError(name, f"must be in (0, 1] (got {value})")
    if overhead_ms is not None and not 0 <= overhead_ms <= MAX_OVERHEAD_MS:
        raise InputError(
            "--overhead-ms", f"must be in [0, {MAX_OVERHEAD_MS:g}] (got {overhead_ms})"
        )
    # the engine's own exchange flags, as capacity and simulate take them (unset ones left out)
    exchange = stated_exchange(locals())
    if gpu is None and preset is None and model is None:
        # these shape a derived step model or its pool: without a model they change nothing
        shaping: tuple[tuple[str, object], ...] = (
            ("--tp", tp if tp != 1 else None),
            ("--context", context),
            ("--weight-dtype", weight_dtype),
            ("--kv-dtype", kv_dtype),
            (memory_flag(engine), memory_fraction),
            ("--bandwidth-efficiency", bandwidth_efficiency),
            ("--flops-efficiency", flops_efficiency),
            ("--overhead-ms", overhead_ms),
            ("--enable-expert-parallel", enable_expert_parallel or None),
            ("--attn-dp-size", attn_dp_size),
            *((ENGINE_EXTRA_FLAGS[k][1], v) for k, v in exchange.items()),
        )
        for flag, given in shaping:
            if given is not None:
                raise InputError(flag, "shapes a derived model: add --preset/--model and --gpu")
    ep, layout_dp, dp_attention = engine_layout(
        engine, tp, dp, ep, dp_attention, enable_expert_parallel, attn_dp_size
    )
    dp = 1 if layout_dp is None else layout_dp
    settings: dict[str, Any] = {"tp": tp, "pp": pp, "mean_tokens": mean_len}
    extra = engine_extra(engine, exchange)
    if extra:
        settings["extra"] = extra
    if context is not None:
        settings["context_tokens"] = context
    if weight_dtype is not None:
        settings["weight_dtype"] = weight_dtype
    if kv_dtype is not None:
        kv = kv_dtype.strip().lower()
        settings["kv_dtype"] = "fp8" if kv.startswith("fp8") else kv
    result = slo_advice(
        tpot_ms=tpot,
        ttft_ms=ttft,
        prompt_tokens=prompt_len,
        output_tokens=output_len,
        a_ms=a_ms,
        b_ms=b_ms,
        prefill_ms_per_token=prefill_ms_per_token,
        fit_path=fit,
        efficiencies={
            k: v
            for k, v in (
                ("bandwidth_efficiency", bandwidth_efficiency),
                ("flops_efficiency", flops_efficiency),
                ("overhead_ms", overhead_ms),
            )
            if v is not None
        },
        validate_rate=rate if validate else None,
        workload=workload or "reference",
        batches=_batches(batch),
        save_fit=save_fit,
        gpu=gpu,
        preset=preset,
        model=model,
        revision=revision,
        memory_fraction=memory_fraction,
        engine=engine,
        engine_version=engine_version,
        calibration=None if calibration is None else _profile(calibration),
        dp=dp,
        ep=ep,
        dp_attention=dp_attention,
        **settings,
    )
    if plot is not None:
        from planner.cli.plot import Chart, Series, save

        curve = result["curve"]
        save(
            Chart(
                title=f"Step time and throughput vs batch ({result['source']})",
                x_label="batch size B",
                y_label="step time (ms)",
                right_label="tok/s",
                series=[
                    Series("t_step", [p["batch"] for p in curve], [p["step_ms"] for p in curve]),
                    Series(
                        "throughput",
                        [p["batch"] for p in curve],
                        [p["tok_s"] for p in curve],
                        right_axis=True,
                    ),
                ],
                marks=[(result["batch_cap"], f"cap {result['batch_cap']} @ TPOT {tpot:g} ms")],
            ),
            plot,
        )
    if json_out:
        emit_json(result)
        return
    render(result)


def _batches(text: str | None) -> list[int]:
    """`--batch 1,8,64` -> [1, 8, 64]."""
    from planner.errors import InputError

    if text is None:
        return []
    try:
        values = [int(x) for x in text.split(",") if x.strip()]
    except ValueError as exc:
        raise InputError("--batch", f"{text!r}: expected batch sizes like 1,8,64") from exc
    if not values or any(not 1 <= v <= 2**20 for v in values):
        raise InputError("--batch", f"{text!r}: batch sizes in [1, 1,048,576]")
    return values


def render(r: dict[str, Any]) -> None:
    """The model and its arithmetic, the cap, the curve chart, prefill limits, flags."""
    out = console()
    out.print(
        f"step-time model ({r['source']}): t(B) = {r['a_ms']:.3f} + {r['b_ms']:.4f} x B ms",
        markup=False,
    )
    for line in r["arithmetic"]:
        out.print(f"  {line}", markup=False)
    if r["source"] == "reference":
        out.print(
            "  reference: the worked example of docs/method.md §3, not a model or a card; "
            "--preset/--model and --gpu derive your coefficients, --fit measures them",
            markup=False,
        )
    if r["compute_bound_above_batch"] is not None:
        out.print(
            f"  compute-bound above B = {r['compute_bound_above_batch']:.0f}: the slope "
            "switches to the FLOPs term there"
        )
    cap = r["batch_cap"]
    out.print(
        f"[bold]batch cap for TPOT {r['tpot_ms']:g} ms:[/] {cap} "
        f"(step {r['step_ms_at_cap']:.2f} ms, {r['throughput_tok_s_at_cap']:,.0f} tok/s; "
        f"x{r['latency_x_vs_batch_1']:.1f} latency for x{r['throughput_x_vs_batch_1']:.1f} "
        "throughput vs B = 1)"
    )
    width = 40
    top_t = max(p["step_ms"] for p in r["curve"])
    top_x = max(p["tok_s"] for p in r["curve"])
    for p in r["curve"]:
        b, t = p["batch"], p["step_ms"]
        mark = "  <- cap" if b == cap else ""
        out.print(
            f"  B={b:>5}  t {'#' * round(t / top_t * width):<{width}} {t:7.2f} ms  "
            f"tok/s {'=' * round(p['tok_s'] / top_x * 20):<20}{mark}",
            markup=False,
        )
    out.print(f"largest prefill chunk inside TPOT: {r['max_prefill_chunk_tokens']:,} tokens")
    if r["prefill_stall_ms"] is not None:
        out.print(f"a whole prompt in one step stalls decoding for {r['prefill_stall_ms']:.0f} ms")
    if r["ttft_single_prefill_fits"] is not None:
        verdict = "fits" if r["ttft_single_prefill_fits"] else "does NOT fit"
        out.print(f"TTFT budget: a single prefill {verdict}")
    if r["memory_cap"] is not None:
        out.print(
            f"memory cap {r['memory_cap']}, operating concurrency {r['operating_concurrency']}"
        )
    if r["step_budget"] is not None:
        budget = r["step_budget"]
        out.print(
            f"step budget {budget['tokens']:,} tokens (set at {budget['at_batch']} sequences: "
            "their decodes and the prompt tokens inside TPOT, at most the engine's own; "
            "the memory cap is the pool planned at it)",
            markup=False,
        )
    out.print(f"[bold]Binding:[/] {r['binding_reason']}.")
    if r["validation"]:
        v = r["validation"]
        out.print(
            f"validated at {v['rate_per_s']} req/s ({v['workload']}, chunked, TTFT <= "
            f"{v['slo_ttft_ms']:g} ms):"
        )
        for row in v["caps"]:
            mark = "  <- goodput peak" if row["max_batch"] == r["validated_cap"] else ""
            out.print(
                f"  cap {row['max_batch']:>5}: goodput {row['goodput_pct']:5.1f}%  "
                f"{row['tok_s']:,.0f} tok/s  p95 TPOT {row['tpot_p95_ms']:.2f} ms{mark}"
            )
        out.print(
            f"[bold]goodput cap {r['validated_cap']}[/] vs the curve's {cap}: the curve is "
            "a necessary condition, not the answer"
        )
    for b, ms in r["step_ms_at"].items():
        terms = r["terms_at"][b]
        detail = ""
        if terms:
            detail = (
                f" (linear layers {terms['linear_ms']:.2f}: weights read "
                f"{terms['weights_ms']:.2f}, compute {terms['compute_ms']:.2f}; attention "
                f"{terms['attention_ms']:.2f}, kernels {terms['kernels_ms']:.2f}, all-reduce "
                f"{terms['allreduce_ms']:.2f}"
                + (
                    f", DeepEP all-to-all {terms['all_to_all_ms']:.2f}"
                    if terms.get("all_to_all_ms")
                    else ""
                )
                + f", sampler {terms.get('logits_ms', 0.0):.2f}"
                + f", overhead {terms['overhead_ms']:.2f}"
            )
            streamed = terms.get("frontend_ms") or 0.0
            scheduler = terms.get("scheduler_ms") or 0.0
            if streamed >= ms:  # the API server, beside the engine, sets the clients' pace
                detail += f"; the API server's streaming {streamed:.2f} sets the step"
            elif scheduler >= ms:  # the scheduler beside the GPU readies steps no faster
                detail += f"; the scheduler's work beside the GPU {scheduler:.2f} sets the step"
            detail += ")"
        out.print(f"t({b}) = {ms:.2f} ms{detail}", markup=False)
    for row in r["fit_residuals"]:
        out.print(
            f"fit: B={row['batch']:g} measured {row['measured_ms']:.2f} ms, fitted "
            f"{row['fitted_ms']:.2f} ms ({row['residual_pct']:+.1f}%)",
            markup=False,
        )
    for w in r["warnings"]:
        out.print(f"[yellow]warning:[/] {w}")
    if r["source"] == "reference":
        out.print("example lines for the reference coefficients (not sized for a real model):")
    for engine, label in (("vllm", "vLLM:  "), ("sglang", "SGLang:")):
        if engine in r["flags"]:  # a deployment's own engine; without one, both
            out.print(f"[bold]{label}[/] " + r["flags"][engine], soft_wrap=True)


def _profile(path: str) -> "Calibration":
    """A calibration profile from a file."""
    from planner.sources.calibration import load_calibration

    return load_calibration(path)
