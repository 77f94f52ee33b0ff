"""What `planner simulate` prints: the benchmark summary (the deployment, its pools, the
load and the figures `vllm bench serve` prints), the policy table, CSV rows and the sweep
chart."""

import csv
import io
import sys
from typing import Any

from planner.cli.render import console, fit_columns, print_table

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


def save_sweep_chart(result: dict[str, Any], path: str) -> None:
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


def _instance_lines(d: dict[str, Any], width: int) -> list[str]:
    """The header lines naming one engine instance's layout, settings and KV pool."""
    return [
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
    ]


def _pool_lines(d: dict[str, Any], pools: dict[str, Any], width: int) -> list[str]:
    """The header lines of a disaggregated deployment: the engine, then each pool's instances,
    layout and KV pool (a pool's own, not the other's)."""
    lines = _joined(
        [
            f"{d['engine']} {d['engine_version']}: {pools['layout']}",
            f"weights {d['weight_dtype']}",
            f"KV {d['kv_cache_dtype']}",
        ],
        width,
    )
    attention = "attention DP" if d["engine"] == "sglang" else "DP"
    for role in ("prefill", "decode"):
        p = pools[role]
        layout = [
            f"{role}: {p['instances']} x TP {p['tp']}",
            *([f"{attention} {p['dp']}"] if p["dp"] > 1 else []),
            *([f"EP {p['ep']}"] if p["ep"] > 1 else []),
            f"max_num_seqs {p['max_num_seqs']:,}",
            *([f"{p['max_num_batched_tokens']:,} tokens/step"] if role == "prefill" else []),
            f"KV {p['kv_cache_tokens']:,} tokens" + (" per DP rank" if p["dp"] > 1 else ""),
        ]
        lines += _joined(layout, width)
    t = pools["transfer"]
    lines += _joined(
        [
            f"KV transfer: {t['mean_bytes_per_request'] / 1e6:,.1f} MB a request",
            f"over {t['link']}",
            f"median {t['median_ms']:,.1f} ms",
        ],
        width,
    )
    return lines


def render_bench(result: dict[str, Any]) -> None:
    """The benchmark's own summary layout (vllm bench serve), marked as a prediction."""
    out = console()
    d = result["deployment"]
    width = 50
    pools = d.get("disagg")
    layout = _pool_lines(d, pools, width) if pools else _instance_lines(d, width)
    lines = [
        " Predicted serving benchmark ".center(width, "="),
        f"{d['model']} on {result['gpus']} x {d['gpu']}",
        *layout,
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
    hits = result.get("prefix_cache")
    if hits:  # the shared prefixes' requests by where their prefix came from
        rows += [
            ("Prefix from the GPU cache:", f"{hits['gpu_hits']:,}"),
            ("Prefix from the CPU tier:", f"{hits['cpu_hits']:,}"),
            ("Prefix prefilled:", f"{hits['misses']:,}"),
        ]
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
