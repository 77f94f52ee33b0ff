"""`planner simulate`: replay a workload through static / continuous / chunked scheduling."""

from __future__ import annotations

import csv
import io
import sys
from typing import Annotated, Any

import typer

from planner.cli.render import console, emit_json, fit_columns, print_table

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
        str, typer.Option(help="Workload preset (presets/workloads).")
    ] = "reference",
    trace: Annotated[
        str | None, typer.Option(help="JSONL trace: arrival_s, prompt_tokens, output_tokens.")
    ] = None,
    rate: Annotated[float | None, typer.Option(help="Arrival rate, requests/s.")] = None,
    requests: Annotated[int | None, typer.Option(help="Number of requests.")] = None,
    seed: Annotated[int | None, typer.Option(help="Trace seed.")] = None,
    policy: Annotated[str, typer.Option(help="static, continuous or chunked.")] = "chunked",
    compare: Annotated[
        str | None, typer.Option(help="Policies side by side: static,continuous,chunked.")
    ] = None,
    sweep: Annotated[str | None, typer.Option(help="max_batch=4,8,16,...")] = None,
    max_batch: Annotated[int, typer.Option(help="Running-sequence cap.")] = 32,
    chunk_tokens: Annotated[int, typer.Option(help="Largest prefill chunk (chunked).")] = 512,
    step_token_budget: Annotated[int, typer.Option(help="Tokens per step (chunked).")] = 512,
    kv_blocks: Annotated[int | None, typer.Option(help="Paged KV pool size in blocks.")] = None,
    block_size: Annotated[int, typer.Option(help="Tokens per KV block.")] = 16,
    preemption: Annotated[str, typer.Option(help="recompute or swap.")] = "recompute",
    shared_prefix_fraction: Annotated[
        float | None, typer.Option(help="Share of requests with a cached shared prefix.")
    ] = None,
    shared_prefix_tokens: Annotated[int | None, typer.Option(help="Shared prefix length.")] = None,
    spec_alpha: Annotated[float | None, typer.Option(help="Speculative acceptance rate.")] = None,
    spec_k: Annotated[int, typer.Option(help="Draft tokens per step.")] = 4,
    draft_cost: Annotated[float, typer.Option(help="Draft cost per target forward.")] = 0.05,
    slo_ttft_ms: Annotated[float, typer.Option(help="TTFT budget for goodput, ms.")] = 1000.0,
    slo_tpot_ms: Annotated[float, typer.Option(help="TPOT budget for goodput, ms.")] = 50.0,
    a_ms: Annotated[float | None, typer.Option(help="Fixed step cost a, ms.")] = None,
    b_ms: Annotated[float | None, typer.Option(help="Per-sequence step cost b, ms.")] = None,
    prefill_ms_per_token: Annotated[float | None, typer.Option(help="Prefill cost, ms.")] = None,
    overhead_ms: Annotated[float | None, typer.Option(help="Launch overhead per step, ms.")] = None,
    preset: Annotated[
        str | None, typer.Option(help="Derive cost and KV pool from a preset.")
    ] = None,
    model: Annotated[str | None, typer.Option(help="... or from a config / Hub id.")] = None,
    gpu: Annotated[str | None, typer.Option(help="GPU for the derived cost model.")] = None,
    tp: Annotated[int, typer.Option(help="Tensor-parallel size (derived cost).")] = 1,
    json_out: Annotated[bool, typer.Option("--json", help="Print one JSON object.")] = False,
    csv_out: Annotated[bool, typer.Option("--csv", help="Print CSV rows.")] = False,
    plot: Annotated[
        str | None, typer.Option(help="Save the sweep chart as an image (plot extra).")
    ] = None,
) -> None:
    """Throughput, latency percentiles and goodput of scheduling policies on one trace."""
    from planner.api import simulation
    from planner.errors import InputError

    names = [p.strip() for p in compare.split(",")] if compare else [policy]
    for name in names:
        if name not in POLICIES:
            raise InputError(
                "--compare" if compare else "--policy", f"{name!r}; accepted: {', '.join(POLICIES)}"
            )
    if preemption not in ("recompute", "swap"):
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
    sim: dict[str, Any] = {
        "max_batch": max_batch,
        "chunk_tokens": chunk_tokens,
        "step_token_budget": step_token_budget,
        "kv_blocks": kv_blocks,
        "block_tokens": block_size,
        "preemption": preemption,
        "spec_alpha": spec_alpha,
        "spec_k": spec_k,
        "spec_draft_cost": draft_cost,
        "slo_ttft_ms": slo_ttft_ms,
        "slo_tpot_ms": slo_tpot_ms,
    }
    result = simulation(
        workload=workload,
        trace_path=trace,
        overrides={
            "rate_per_s": rate,
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
        capacity_settings={"tp": tp},
    )
    if plot is not None:
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
            plot,
        )
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
