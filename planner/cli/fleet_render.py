"""What `planner fleet` prints: the ranked candidates that fit the terminal, the winner with
its launch lines and cost, and the curves behind the choice."""

from collections.abc import Callable
from typing import Any

from planner.cli.render import WIDEST_TABLE, console, fit_columns, print_table

# Candidate columns a narrow terminal leaves out first, in order (--json keeps them all).
DROP_FIRST = (
    "$/M total",
    "max seqs",
    "replicas",
    "TTFT",  # the promise's percentile of TTFT (its column is named by it)
    "$/h",
    "req/s per replica",
    "GPUs",
    "weights",
)


# The Pareto lines: a marker, the layout's label, the figures (27 characters with their
# spaces) and a bar of up to 30 characters (none when the terminal leaves fewer than 4).
PARETO_FIGURES_WIDTH = 27
MIN_BAR = 4
MAX_BAR = 30


def layout_cell(c: dict[str, Any]) -> str:
    """A candidate's parallelism in the table's TP column: `4 x DP 2 EP` (vLLM's data-parallel
    ranks, whose GPUs the row counts), `8 DP-attn 8 EP` (SGLang's attention groups inside its
    TP), `8 PP2`, `4 1P1D`, as layout_name words them."""
    dp = c.get("dp", 1)
    groups = ""
    if dp > 1:
        groups = f" DP-attn {dp}" if c.get("engine") == "sglang" else f" x DP {dp}"
    return (
        f"{c['tp']}{groups}{' EP' if c['ep'] > 1 else ''}"
        + (f" PP{c['pp']}" if c.get("pp", 1) > 1 else "")
        + (f" {c['disagg']}" if c.get("disagg") else "")
    )


def render(report: dict[str, Any]) -> None:
    """The ranked table, the winner's line, and what was rejected."""
    from rich import box
    from rich.console import Console
    from rich.table import Table

    from planner.api.fleet import layout_name

    out = console()
    p = report["promise"]
    described = report["workload"]["description"]
    out.print(
        f"{report['model']} at {report['rate_per_s']:g} req/s ({described}); "
        f"promise TTFT {p['ttft_ms']:g} ms and TPOT {p['tpot_ms']:g} ms at p{p['percentile']:g}, "
        f"{p['goodput']:.0%} of requests; headroom {report['headroom']:g}",
        markup=False,
    )
    fitting = [c for c in report["candidates"] if c["ranked"]]

    def money(v: float | None) -> str:
        return "-" if v is None else f"{v:,.2f}"

    # the promise's percentile at the planned load, at its upper confidence bound (the figure
    # the promise is judged on; `simulate` prints the point estimate)
    ttft_col, tpot_col = (f"p{p['percentile']:g} {what} ms (bound)" for what in ("TTFT", "TPOT"))

    cells: dict[str, Callable[[dict[str, Any]], str]] = {
        "gpu": lambda c: str(c["gpu"]),
        "TP": layout_cell,
        "weights": lambda c: str(c["precision"]),
        "replicas": lambda c: str(c["replicas"]),
        "GPUs": lambda c: str(c["gpus"]),
        "max seqs": lambda c: f"{c['max_num_seqs']:,}",
        "req/s per replica": lambda c: f"{c['sustainable_rate_per_replica']:.2f}",
        ttft_col: lambda c: f"{c['ttft_ms_at_load']:,.0f}",
        tpot_col: lambda c: f"{c['tpot_ms_at_load']:.1f}",
        "tok/s per GPU": lambda c: f"{c['tokens_per_s_per_gpu']:,.0f}",
        "$/h": lambda c: money(c["dollars_per_hour"]),
        "$/M out": lambda c: money(c["dollars_per_m_output_tokens"]),
        "$/M total": lambda c: money(c["dollars_per_m_total_tokens"]),
    }

    def build(cols: list[str]) -> Table:
        table = Table(
            title=f"Candidates (ranked by {report['ranked_by']})",
            title_justify="left",
            box=box.SIMPLE_HEAD,
        )
        for col in cols:
            table.add_column(col, justify="left" if col in ("gpu", "weights") else "right")
        for c in fitting:
            table.add_row(*(cells[col](c) for col in cols))
        return fit_columns(table)

    # Columns a narrow terminal drops first (never a number cut: a whole column goes, and
    # --json keeps every figure).
    cols = list(cells)
    dropped: list[str] = []
    table = build(cols)
    for col in (ttft_col if c == "TTFT" else c for c in DROP_FIRST):
        if Console(width=WIDEST_TABLE).measure(table).minimum <= out.width:
            break
        cols.remove(col)
        dropped.append(col)
        table = build(cols)
    print_table(out, table)
    if dropped:
        out.print(f"left out to fit {out.width} columns: {', '.join(dropped)}", markup=False)
    if report["prices"] != "given":
        out.print(f"prices {report['prices']}", markup=False)
    for c in [c for c in report["candidates"] if not c["ranked"]]:
        what = "left out" if c["fits"] else "rejected"
        out.print(f"{what} {layout_name(c)}: {c['reason']}", markup=False)
    front = report["pareto"]
    if front:
        slo = 1000.0 / p["tpot_ms"]
        out.print(
            "Pareto front over every layout's concurrency sweep (closed loop, the benchmark "
            f"predictor; output tok/s per GPU and per user; * within TPOT {p['tpot_ms']:g} ms, "
            f"i.e. >= {slo:.0f} tok/s/user):",
            markup=False,
        )
        top = max(q["output_tokens_per_s_per_gpu"] for q in front) or 1.0

        labels = [f"{layout_name(q)} x{q['max_concurrency']}" for q in front]
        width = max(len(t) for t in labels)
        # the bar takes what the console leaves beside the text
        bar_width = min(MAX_BAR, out.width - PARETO_FIGURES_WIDTH - width - 2)
        bar_width = bar_width if bar_width >= MIN_BAR else 0
        for q, text in zip(front, labels, strict=True):
            bar = "#" * max(1, round(q["output_tokens_per_s_per_gpu"] / top * bar_width))
            bar = f"{bar:<{bar_width}} " if bar_width else ""
            out.print(
                f"{'*' if q['meets_tpot'] else ' '}{text:>{width}} {bar}"
                f"{q['output_tokens_per_s_per_gpu']:>7,.0f} /GPU "
                f"{q['tokens_per_s_per_user']:>5,.0f} /user",
                markup=False,
            )
    w = report["winner"]
    if w is None:
        out.print("[bold red]No candidate meets the promise.[/]")
        return
    pools = w.get("pools")
    if pools is not None:
        out.print(
            f"[bold]Deploy:[/] {w['replicas']} x {pools['layout']} of {w['gpu']} at TP {w['tp']} "
            f"({_gpus(w['gpus'])}): per unit {pools['prefill_instances']} prefill and "
            f"{pools['decode_instances']} decode instances behind a router:",
        )
        for role in ("prefill", "decode", "router"):
            out.print(f"{role}: {pools[role + '_command']}", soft_wrap=True, markup=False)
    else:
        deploy = f"{w['replicas']} x {layout_name(w)} ({_gpus(w['gpus'])})"
        out.print(f"[bold]Deploy:[/] {deploy}, each:")
        out.print(w["command"], soft_wrap=True, markup=False)
        if w.get("simulate_command"):
            out.print("[bold]Check one replica[/] at its share of the peak rate:")
            out.print(w["simulate_command"], soft_wrap=True, markup=False)
    out.print(
        "estimates: step times from the step-time model; rates, curves and the front from "
        "the simulator",
        markup=False,
    )
    for note in w.get("notes") or []:
        out.print(f"note: {note}", markup=False)


def _gpus(n: int) -> str:
    """`1 GPU`, `8 GPUs`."""
    return f"{n} GPU" if n == 1 else f"{n} GPUs"
