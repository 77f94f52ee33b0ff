"""What `planner capacity` prints: the engine ledger and its KV groups and tiers, the textbook
ledger and concurrency tables, a plan compared with a deployed one, and a start-up log read
back."""

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from planner.cli.render import console, fit_columns, gb_gib, kv_table, per_token, print_table

if TYPE_CHECKING:
    from planner.core.offload import KvTiers


def render_tiers(tiers: "KvTiers") -> None:
    """Where the KV lives: tokens per tier, bytes per rank, and the host memory it takes."""
    from rich.table import Table

    from planner.units import GIB_BYTES

    out = console()
    table = Table(
        title="KV tiers (each rank holds its shard of every token)",
        title_justify="left",
        pad_edge=False,
    )
    for name in ("tier", "tokens", "GiB/rank", "kept by"):
        table.add_column(name, justify="left" if name in ("tier", "kept by") else "right")
    for t in tiers.tiers:
        table.add_row(t.tier, f"{t.tokens:,}", f"{t.bytes_per_rank / GIB_BYTES:,.2f}", t.by)
    print_table(out, fit_columns(table, wrap=("kept by",)))
    ranks = f"{tiers.ranks} rank" + ("s" if tiers.ranks != 1 else "")
    need = f"host memory per node: {tiers.host_bytes_per_node / GIB_BYTES:,.1f} GiB ({ranks})"
    if tiers.host_memory_bytes is None:
        need += "; not checked: pass --host-memory-gib"
    else:
        verdict = "fits" if tiers.fits_host else "DOES NOT FIT"
        need += (
            f" of {tiers.host_memory_bytes / GIB_BYTES:,.1f} GiB "
            f"({tiers.host_memory_source}): {verdict}"
        )
    out.print(need, markup=False)
    if tiers.gpu_buffer_bytes:
        out.print(
            f"connector staging per GPU: {tiers.gpu_buffer_bytes / 2**20:,.1f} MiB (in the "
            "GPU ledger)",
            markup=False,
        )
    for note in tiers.notes:
        out.print(f"note: {note}", markup=False)


def render_serve(plan: object, payload: dict[str, object], explain: bool) -> None:
    """The engine ledger, the verdict, and the launch line (or why it would not start)."""
    from rich.markup import escape

    from planner.core.serve import ServePlan

    assert isinstance(plan, ServePlan)
    out = console()
    model, settings = payload["model"], payload["settings"]
    assert isinstance(model, dict) and isinstance(settings, dict)
    p = plan.prediction
    engine = f"{p.name} {p.version}" if p else plan.engine
    gpu = payload["gpu"]
    assert isinstance(gpu, dict)
    tp, pp = int(settings["tp"]), int(settings.get("pp") or 1)
    layout_gpus, layout = tp * pp, f"TP {tp}" + (f" x PP {pp}" if pp > 1 else "")
    out.print(
        f"[bold]{escape(str(model['name']))}[/] on {layout_gpus} x [bold]"
        f"{escape(str(gpu['name']))}[/] ({layout}) with [bold]{engine}[/]  "
        f"context {settings['context_tokens']:,}  "
        f"mean {settings['mean_tokens']:,}  weights {model['weight_dtype']}"
    )
    if p is not None:
        render_engine(p, f"{engine}: what the engine allocates (per GPU)")
        print_table(
            out,
            kv_table(
                "Concurrency (sequences per engine)",
                [
                    (
                        f"at the context ({settings['context_tokens']:,} tokens)",
                        f"{plan.max_seqs_at_context:,}",
                    ),
                    (
                        f"at the mean ({settings['mean_tokens']:,} tokens)",
                        f"{plan.max_seqs_at_mean:,}",
                    ),
                    (f"cap ({plan.cap_source})", f"{plan.cap:,}"),
                    ("max_num_seqs to run", f"{plan.max_num_seqs:,}"),
                ],
            ),
        )
    if plan.kv_tiers is not None:
        render_tiers(plan.kv_tiers)
    if explain:
        render_groups(payload)
        out.print(f"weights: {model['weights_basis']}", markup=False)
    for w in plan.warnings:
        out.print(f"[yellow]warning:[/] {escape(w)}")
    if not plan.fits:
        out.print("[bold red]Does not fit:[/]")
        for reason in plan.reasons:
            out.print(f"  {escape(reason)}")
        if plan.suggestions:
            out.print("[bold]What would start (each re-planned):[/]")
            for sug in plan.suggestions:
                out.print(
                    f"  {escape(sug.change)}: max_num_seqs {sug.max_num_seqs:,}, "
                    f"{sug.kv_cache_tokens:,} KV tokens"
                )
        elif plan.kv_tiers is None or plan.kv_tiers.fits_host is not False:
            out.print("no variant tried (TP, max model length, utilisation, fp8) starts")
        return
    out.print(f"[bold]Binding:[/] {escape(plan.binding_reason)}.")
    label = "vLLM:  " if plan.engine == "vllm" else "SGLang:"
    out.print(f"[bold]{label}[/] " + escape(plan.command), soft_wrap=True)


def render_groups(payload: dict[str, object]) -> None:
    """The per-layer-group KV breakdown."""
    from rich.table import Table

    out = console()
    table = Table(title="KV layer groups (per GPU)", title_justify="left")
    for col in ("kind", "layers", "KV heads/GPU", "bytes/token", "window", "state/seq"):
        table.add_column(col, justify="right")
    rows = payload["kv_layer_groups"]
    assert isinstance(rows, list)
    for row in rows:
        table.add_row(
            row["kind"],
            str(row["num_layers"]),
            "-" if row["kv_heads_per_gpu"] is None else str(row["kv_heads_per_gpu"]),
            f"{row['bytes_per_token']:,} B",
            "-" if row["window_tokens"] is None else f"{row['window_tokens']:,}",
            f"{row['state_bytes_per_sequence']:,} B",
        )
    print_table(out, fit_columns(table))


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
        f"[bold]{m.name}[/] on {s.tp} x [bold]{plan.gpu.name}[/] (TP {s.tp})  "
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


def render_engine(pred: object, title: str | None = None) -> None:
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
    if "connector_bytes" in src:  # a KV connector runs: its GPU-side buffers
        rows.insert(-1, ("KV connector buffers", pred.connector_bytes, src["connector_bytes"]))
    out.print(
        kv_table(
            title or f"{pred.name} {pred.version}: the engine's own arithmetic (per GPU)",
            [(escape(f"{k} [{s}]") if s else k, gb_gib(v)) for k, v, s in rows]
            + [
                ("bytes per block", f"{pred.bytes_per_block:,} B"),
                ("blocks (vLLM: incl. the null block; SGLang: pages)", f"{pred.num_gpu_blocks:,}"),
                (
                    "KV groups / blocks per request",
                    f"{pred.num_kv_groups} / {pred.blocks_per_request:,}",
                ),
                ("KV cache tokens", f"{pred.kv_cache_tokens:,}"),
                *(
                    [("SWA pool tokens (window layers)", f"{window:,}")]
                    if (window := pred.settings.get("swa_max_total_num_tokens"))
                    else []
                ),
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


def render_comparison(c: dict[str, Any]) -> None:
    """Before vs after, term by term, then the settings and engine changes behind it."""
    from rich.table import Table

    out = console()
    before, after = c["before"], c["after"]
    title = (
        f"{before['engine']} {before['version'] or '(does not start)'} -> "
        f"{after['engine']} {after['version'] or '(does not start)'}"
    )
    table = Table(title=title, title_justify="left")
    for col in ("term", "before", "after", "change"):
        table.add_column(col, justify="left" if col == "term" else "right")
    for row in c["terms"]:
        fmt = _fmt_term(row["term"])
        rel = "" if row["relative"] is None else f" ({row['relative']:+.2%})"
        table.add_row(row["term"], fmt(row["before"]), fmt(row["after"]), fmt(row["change"]) + rel)
    print_table(out, fit_columns(table))
    for s in c["settings"]:
        out.print(f"setting {s['setting']}: {s['before']} -> {s['after']}", markup=False)
    for change in c["engine_changes"]:
        out.print(f"engine change {change}", markup=False)
    for note in c["notes_after"]:
        out.print(f"after only: {note}", markup=False)
    for note in c["notes_before"]:
        out.print(f"before only: {note}", markup=False)
    for side in (before, after):
        for reason in side["reasons"]:
            out.print(f"{side['engine']} {side['version'] or ''}: {reason}", markup=False)
    out.print(f"after: {after['command']}", markup=False)


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
