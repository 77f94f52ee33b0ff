"""`planner capacity`: the HBM ledger, contiguous vs paged concurrency, binding, launch flags."""

from __future__ import annotations

from collections.abc import Callable
from typing import Annotated, Any

import typer

from planner.cli.render import (
    console,
    emit_json,
    fit_columns,
    gb_gib,
    kv_table,
    per_token,
    print_table,
)

DTYPE_HELP = "fp32, fp16, bf16, fp8, int8"
# No accelerator has a pebibyte (2^20 GiB) of memory: a larger figure is a typo.
MAX_GPU_MEMORY_GIB = 2**20


def capacity(
    preset: Annotated[
        str | None, typer.Option(help="Model preset name (see `planner presets`).")
    ] = None,
    model: Annotated[
        str | None, typer.Option(help="config.json path, model folder, or Hub repo id.")
    ] = None,
    revision: Annotated[
        str | None, typer.Option(help="Hub revision (branch, tag, commit).")
    ] = None,
    gpu: Annotated[
        str, typer.Option(help="GPU id, alias or device name (see `planner gpus`).")
    ] = "",
    tp: Annotated[int, typer.Option(help="Tensor-parallel size.")] = 1,
    context: Annotated[
        int | None, typer.Option(help="Max model length in tokens [default: min(8192, model max)].")
    ] = None,
    mean_len: Annotated[int, typer.Option(help="Mean actual tokens per sequence.")] = 2000,
    block_size: Annotated[int, typer.Option(help="KV page size in tokens.")] = 16,
    kv_dtype: Annotated[
        str | None, typer.Option(help=f"KV cache dtype: {DTYPE_HELP} [default: model dtype].")
    ] = None,
    weight_dtype: Annotated[
        str | None,
        typer.Option(
            help="Re-store linear weights as fp32/fp16/bf16/fp8/int8/int4/fp4 (estimate)."
        ),
    ] = None,
    headroom: Annotated[
        float, typer.Option(help="Fragmentation headroom fraction of free HBM.")
    ] = 0.05,
    workspace_gib: Annotated[
        float, typer.Option(help="Activations and workspace per GPU, GiB.")
    ] = 4.0,
    compute_batch_cap: Annotated[int, typer.Option(help="Batch cap from compute / latency.")] = 128,
    gpu_memory_gib: Annotated[
        float | None, typer.Option(help="Override the GPU's memory per device, GiB.")
    ] = None,
    explain: Annotated[bool, typer.Option(help="Show the per-layer-group KV breakdown.")] = False,
    engine: Annotated[
        str | None, typer.Option(help="Predict an engine's own KV figures: vllm or sglang.")
    ] = None,
    engine_version: Annotated[
        str | None, typer.Option(help="Engine version [default: newest documented].")
    ] = None,
    gpu_memory_utilization: Annotated[float | None, typer.Option(help="vLLM flag.")] = None,
    max_model_len: Annotated[int | None, typer.Option(help="vLLM flag.")] = None,
    max_num_batched_tokens: Annotated[int | None, typer.Option(help="vLLM flag.")] = None,
    max_num_seqs: Annotated[int | None, typer.Option(help="vLLM flag.")] = None,
    enforce_eager: Annotated[bool, typer.Option(help="vLLM flag: no CUDA graphs.")] = False,
    kv_cache_memory_bytes: Annotated[int | None, typer.Option(help="vLLM flag.")] = None,
    enable_lora: Annotated[
        bool, typer.Option(help="vLLM flag: LoRA buffers load with the weights.")
    ] = False,
    max_lora_rank: Annotated[
        int | None, typer.Option(help="vLLM flag (with --enable-lora) [default: 16].")
    ] = None,
    max_loras: Annotated[
        int | None, typer.Option(help="vLLM flag (with --enable-lora) [default: 1].")
    ] = None,
    usage_context: Annotated[
        str, typer.Option(help="vLLM entry point: serve (`vllm serve`) or llm (the LLM class).")
    ] = "serve",
    colocated: Annotated[
        bool,
        typer.Option(
            help="vLLM runs inside a process that already used CUDA (Unsloth, TRL colocate)."
        ),
    ] = False,
    pp: Annotated[int, typer.Option("--pp", help="Pipeline-parallel size (engine mode).")] = 1,
    quantization: Annotated[
        str | None, typer.Option(help="Engine --quantization: awq, gptq, fp8, mxfp4.")
    ] = None,
    mem_fraction_static: Annotated[float | None, typer.Option(help="SGLang flag.")] = None,
    chunked_prefill_size: Annotated[int | None, typer.Option(help="SGLang flag.")] = None,
    cuda_graph_max_bs_decode: Annotated[
        int | None,
        typer.Option("--cuda-graph-max-bs-decode", "--cuda-graph-max-bs", help="SGLang flag."),
    ] = None,
    page_size: Annotated[int | None, typer.Option(help="SGLang flag.")] = None,
    max_running_requests: Annotated[int | None, typer.Option(help="SGLang flag.")] = None,
    mamba_full_memory_ratio: Annotated[
        float | None, typer.Option(help="SGLang flag (hybrid Mamba / linear models) [0.9].")
    ] = None,
    max_mamba_cache_size: Annotated[int | None, typer.Option(help="SGLang flag.")] = None,
    context_length: Annotated[int | None, typer.Option(help="SGLang flag.")] = None,
    from_log: Annotated[
        str | None, typer.Option(help="Re-run a vLLM / SGLang start-up log, term by term.")
    ] = None,
    save: Annotated[
        str | None, typer.Option(help="Write a plan lock file (YAML) for `planner drift`.")
    ] = None,
    json_out: Annotated[bool, typer.Option("--json", help="Print one JSON object.")] = False,
) -> None:
    """Does the model fit, how many sequences run at once, and what binds them."""
    from planner.api import capacity_report, lock_for
    from planner.core.capacity import DEFAULT_BLOCK_TOKENS, capacity_json
    from planner.errors import InputError
    from planner.sources.files import check_writable, saved_model_ref, write_file
    from planner.units import GIB_BYTES

    if from_log is not None:
        from planner.api import from_log_report

        report = from_log_report(
            log_path=from_log,
            gpu=gpu or None,
            preset=preset,
            model=model,
            revision=revision,
            version=engine_version,
        )
        if json_out:
            emit_json(report)
        else:
            render_log_report(report)
        return
    if not gpu:
        raise InputError("--gpu", "required: a GPU id such as mi300x or h100 (see `planner gpus`)")
    if save is not None:
        check_writable(save, "--save")
    settings: dict[str, object] = {
        "tp": tp,
        "mean_tokens": mean_len,
        "block_tokens": block_size,
        "kv_dtype": kv_dtype,
        "weight_dtype": weight_dtype,
        "headroom_fraction": headroom,
        "workspace_bytes": round(workspace_gib * GIB_BYTES),
        "compute_batch_cap": compute_batch_cap,
    }
    if context is not None:
        settings["context_tokens"] = context
    if gpu_memory_gib is not None and not 0 < gpu_memory_gib <= MAX_GPU_MEMORY_GIB:
        raise InputError(
            "--gpu-memory-gib", f"must be in (0, {MAX_GPU_MEMORY_GIB:,}] GiB (got {gpu_memory_gib})"
        )
    if not 0 <= workspace_gib <= MAX_GPU_MEMORY_GIB:
        raise InputError(
            "--workspace-gib", f"must be in [0, {MAX_GPU_MEMORY_GIB:,}] GiB (got {workspace_gib})"
        )
    engine_inputs: dict[str, Any] | None = None
    if engine is not None:
        kv_flag = "fp8" if kv_dtype == "fp8" else "auto"
        if engine == "vllm":
            flags: dict[str, Any] = {
                "gpu_memory_utilization": gpu_memory_utilization,
                "max_model_len": max_model_len or context,
                "max_num_batched_tokens": max_num_batched_tokens,
                "max_num_seqs": max_num_seqs,
                # planner's default page size is the engine's; pass it only when changed
                "block_size": block_size if block_size != DEFAULT_BLOCK_TOKENS else None,
                "kv_cache_dtype": kv_flag,
                "enforce_eager": enforce_eager,
                "kv_cache_memory_bytes": kv_cache_memory_bytes,
                "tensor_parallel_size": tp,
                "pipeline_parallel_size": pp,
                "usage_context": usage_context,
                "colocated": colocated,
            }
            if not enable_lora and (max_lora_rank is not None or max_loras is not None):
                raise InputError(
                    "--max-lora-rank", "--max-lora-rank / --max-loras need --enable-lora"
                )
            if enable_lora:
                flags |= {
                    "enable_lora": True,
                    "max_lora_rank": max_lora_rank,
                    "max_loras": max_loras,
                }
        else:
            flags = {
                "mem_fraction_static": mem_fraction_static,
                "context_length": context_length or context,
                "chunked_prefill_size": chunked_prefill_size,
                "cuda_graph_max_bs_decode": cuda_graph_max_bs_decode,
                "page_size": page_size,
                "kv_cache_dtype": kv_flag,
                "tp_size": tp,
                "pp_size": pp,
                "max_running_requests": max_running_requests,
                "mamba_full_memory_ratio": mamba_full_memory_ratio,
                "max_mamba_cache_size": max_mamba_cache_size,
            }
        quant = quantization or ("fp8" if weight_dtype == "fp8" else None)
        flags |= {"version": engine_version, "quantization": quant}
        engine_inputs = {
            "name": engine,
            "version": engine_version,
            "flags": {k: v for k, v in flags.items() if v is not None and k != "version"},
        }
    plan, prediction = capacity_report(
        gpu=gpu,
        preset=preset,
        model=model,
        revision=revision,
        gpu_memory_gib=gpu_memory_gib,
        settings=settings,
        engine=engine_inputs,
    )
    if save is not None:
        from planner.plan import dump

        lock = lock_for(
            plan,
            prediction,
            preset=preset,
            model=None if model is None else saved_model_ref(model, save),
            revision=revision,
            gpu=gpu,
            gpu_memory_gib=gpu_memory_gib,
            settings=settings,
            engine=engine_inputs,
        )
        write_file(save, "--save", dump(lock))
    if json_out:
        payload = capacity_json(plan)
        if prediction is not None:
            payload["engine"] = prediction.model_dump()
        emit_json(payload)
        return
    render_capacity(plan, explain)
    if prediction is not None:
        render_engine(prediction)


def render_capacity(plan: object, explain: bool) -> None:
    """The ledger, the concurrency verdict, warnings and flags as tables."""
    from rich.markup import escape

    from planner.core.capacity import CapacityPlan

    assert isinstance(plan, CapacityPlan)
    m, s, led = plan.model, plan.settings, plan.ledger
    out = console()
    weights_note = "exact" if led.weights_exact else "estimated"
    params = f"{m.params_total / 1e9:,.2f}B"
    if m.params_active != m.params_total:
        params += f" ({m.params_active / 1e9:,.2f}B active)"
    out.print(
        f"[bold]{m.name}[/] on [bold]{plan.gpu.name}[/] x TP {s.tp}  "
        f"context {s.context_tokens:,}  mean {s.mean_tokens:,}  KV {s.kv_dtype}  "
        f"weights {plan.weight_dtype}  params {params}"
    )
    out.print(
        kv_table(
            "Ledger (per GPU)",
            [
                (f"HBM ({led.hbm_basis})", gb_gib(led.hbm_bytes)),
                (
                    f"weights / TP ({weights_note})",
                    f"{gb_gib(led.weights_bytes_per_gpu)}  "
                    f"{led.weights_fraction_of_hbm:.0%} of HBM",
                ),
                ("activations + workspace", gb_gib(led.workspace_bytes)),
                (f"fragmentation headroom ({s.headroom_fraction:.0%})", gb_gib(led.headroom_bytes)),
                ("KV pool", gb_gib(led.kv_pool_bytes)),
                ("KV per token", per_token(plan.kv_bytes_per_token)),
                (f"KV per sequence @ {s.context_tokens:,}", gb_gib(plan.kv_bytes_per_sequence)),
                (f"KV per sequence @ {s.mean_tokens:,}", gb_gib(plan.kv_bytes_per_sequence_mean)),
            ],
        )
    )
    ratio = f"{plan.paged_over_contiguous:.1f}x" if plan.paged_over_contiguous else "n/a"
    out.print(
        kv_table(
            "Concurrency (sequences per TP group)",
            [
                (f"contiguous (reserve {s.context_tokens:,})", f"{plan.max_seqs_contiguous:,}"),
                (
                    f"paged (block {s.block_tokens}, mean {s.mean_tokens:,})",
                    f"{plan.max_seqs_paged:,}",
                ),
                ("paged / contiguous", ratio),
                ("batch cap", f"{plan.batch_cap:,}"),
                ("operating concurrency", f"{plan.operating_concurrency:,}"),
            ],
        )
    )
    if explain:
        from rich.table import Table

        table = Table(title="KV layer groups (per GPU)", title_justify="left")
        for col in ("kind", "layers", "KV heads/GPU", "bytes/token", "window", "state/seq"):
            table.add_column(col, justify="right")
        for row in plan.kv_layer_groups:
            table.add_row(
                row.kind,
                str(row.num_layers),
                "-" if row.kv_heads_per_gpu is None else str(row.kv_heads_per_gpu),
                f"{row.bytes_per_token:,} B",
                "-" if row.window_tokens is None else f"{row.window_tokens:,}",
                f"{row.state_bytes_per_sequence:,} B",
            )
        print_table(out, fit_columns(table))
        out.print(f"weights: {m.weights_basis}")
    for line in plan.gpu_provenance:
        out.print(f"GPU {line}", markup=False)
    out.print(f"[bold]Binding:[/] {plan.binding_reason}.")
    for w in plan.warnings:
        out.print(f"[yellow]warning:[/] {escape(w)}")
    out.print("[bold]vLLM:[/]   " + plan.flags.vllm, soft_wrap=True)
    out.print("[bold]SGLang:[/] " + plan.flags.sglang, soft_wrap=True)


def render_engine(pred: object) -> None:
    """The engine's own ledger, its sources, and the lines it should log."""
    from rich.markup import escape

    from planner.core.engines.common import EnginePrediction

    assert isinstance(pred, EnginePrediction)
    out = console()
    src = pred.term_sources
    rows = [
        ("total memory (CUDA)", pred.total_memory_bytes, src.get("total_memory_bytes")),
        ("requested (x utilization)", pred.requested_memory_bytes, None),
        ("weights as loaded", pred.weights_bytes, src.get("weights_bytes")),
        ("activation peak", pred.activation_peak_bytes, src.get("activation_peak_bytes")),
        ("non-torch", pred.non_torch_bytes, src.get("non_torch_bytes")),
        ("CUDA-graph estimate", pred.cudagraph_bytes, src.get("cudagraph_bytes")),
        ("available KV", pred.available_kv_bytes, src.get("available_kv_bytes")),
    ]
    out.print(
        kv_table(
            f"{pred.name} {pred.version}: the engine's own arithmetic (per GPU)",
            [(escape(f"{k} [{s}]") if s else k, gb_gib(v)) for k, v, s in rows]
            + [
                ("bytes per block", f"{pred.bytes_per_block:,} B"),
                ("blocks (vLLM: incl. the null block; SGLang: pages)", f"{pred.num_gpu_blocks:,}"),
                (
                    "KV groups / blocks per request",
                    f"{pred.num_kv_groups} / {pred.blocks_per_request:,}",
                ),
                ("KV cache tokens", f"{pred.kv_cache_tokens:,}"),
                ("max concurrency", f"{pred.max_concurrency:.2f}x"),
            ],
        )
    )
    for note in pred.defaults_used:
        out.print(f"default: {note}", markup=False)
    for note in pred.notes:
        out.print(f"note: {note}", markup=False)
    out.print("[bold]Expected log lines:[/]")
    for line in pred.log_lines:
        out.print(f"  {line}", markup=False)


def render_log_report(report: dict[str, object]) -> None:
    """Logged vs predicted, term by term, then the replay with the logged terms."""
    from rich.table import Table

    out = console()
    log = report["log"]
    predicted = report["predicted"]
    replayed = report["replayed"]
    assert isinstance(log, dict) and isinstance(predicted, dict) and isinstance(replayed, dict)
    out.print(
        f"{log['engine']} {log['version'] or '(version not in log)'}, model {log['model']}",
        markup=False,
    )
    table = Table(title="Logged vs predicted", title_justify="left")
    for col in ("term", "logged", "predicted", "difference"):
        table.add_column(col, justify="right")
    rows = report["differences"]
    assert isinstance(rows, list)
    for row in rows:
        fmt = _fmt_term(row["term"])
        rel = "" if row["relative"] is None else f" ({row['relative']:+.2%})"
        table.add_row(
            row["term"], fmt(row["logged"]), fmt(row["predicted"]), fmt(row["difference"]) + rel
        )
    print_table(out, fit_columns(table))
    out.print(
        f"replayed with the logged terms: {replayed['kv_cache_tokens']:,} tokens "
        f"(logged {log['kv_cache_tokens']:,})"
    )
    notes = report.get("notes") or []
    assert isinstance(notes, list)
    for note in notes:
        out.print(f"note: {note}", markup=False)


def _fmt_term(term: str) -> Callable[[float], str]:
    from planner.units import GIB_BYTES

    if term.endswith("_bytes"):
        return lambda v: f"{v / GIB_BYTES:,.2f} GiB"
    if term == "max_concurrency":
        return lambda v: f"{v:.2f}x"
    return lambda v: f"{v:,.0f}"
