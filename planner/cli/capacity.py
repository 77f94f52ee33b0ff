"""`planner capacity`: the HBM ledger, contiguous vs paged concurrency, binding, launch flags."""

from __future__ import annotations

from typing import Annotated

import typer

from planner.cli.render import console, emit_json, gb_gib, kv_table, per_token

DTYPE_HELP = "fp32, fp16, bf16, fp8, int8"


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
    json_out: Annotated[bool, typer.Option("--json", help="Print one JSON object.")] = False,
) -> None:
    """Does the model fit, how many sequences run at once, and what binds them."""
    from planner.api import capacity_plan
    from planner.core.capacity import capacity_json
    from planner.errors import InputError
    from planner.units import GIB_BYTES

    if not gpu:
        raise InputError("--gpu", "required: a GPU id such as mi300x or h100 (see `planner gpus`)")
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
    if gpu_memory_gib is not None and gpu_memory_gib <= 0:
        raise InputError("--gpu-memory-gib", f"must be > 0 (got {gpu_memory_gib})")
    if workspace_gib < 0:
        raise InputError("--workspace-gib", f"must be >= 0 (got {workspace_gib})")
    plan = capacity_plan(
        gpu=gpu,
        preset=preset,
        model=model,
        revision=revision,
        gpu_memory_bytes=round(gpu_memory_gib * GIB_BYTES) if gpu_memory_gib else None,
        **settings,
    )
    if json_out:
        emit_json(capacity_json(plan))
        return
    render_capacity(plan, explain)


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
        out.print(table)
        out.print(f"weights: {m.weights_basis}")
    for line in plan.gpu_provenance:
        out.print(f"GPU {line}", markup=False)
    out.print(f"[bold]Binding:[/] {plan.binding_reason}.")
    for w in plan.warnings:
        out.print(f"[yellow]warning:[/] {escape(w)}")
    out.print("[bold]vLLM:[/]   " + plan.flags.vllm, soft_wrap=True)
    out.print("[bold]SGLang:[/] " + plan.flags.sglang, soft_wrap=True)
