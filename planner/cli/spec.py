"""`planner spec`: which k to draft, what it buys, and when to switch speculation off."""

from typing import Annotated, Any

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
from planner.cli.render import console, emit_json, fit_columns, print_table

BARS = " ▁▂▃▄▅▆▇█"
# The largest concurrency the table scans when --max-batch is not given: past any engine's
# default running cap (vLLM 1,024, SGLang 4,096).
DEFAULT_SCAN_LIMIT = 4096


def spec(
    alpha: Annotated[
        str,
        typer.Option(
            "--alpha", "--spec-alpha", help="Acceptance rate(s) in [0, 1]: 0.7 or 0.5,0.7,0.9."
        ),
    ],
    k: Annotated[
        str, typer.Option("--k", "--spec-k", help="Draft length(s): 4, 1-16 or 1,2,4.")
    ] = "1-16",
    draft_cost: Annotated[float, typer.Option(help="c: draft cost per target forward.")] = 0.05,
    verify_cost: Annotated[float, typer.Option(help="v: cost per extra scored position.")] = 0.0,
    method: Annotated[
        str,
        typer.Option(
            "--method",
            "--spec-method",
            help="ngram, eagle, eagle3, medusa, mtp or draft (flags only).",
        ),
    ] = "eagle3",
    preset: Annotated[
        str | None, typer.Option(help="Target model preset (couples to load).")
    ] = None,
    model: Annotated[str | None, typer.Option(help="Target config.json / folder / Hub id.")] = None,
    revision: Revision = None,
    draft_model: Annotated[
        str | None, typer.Option(help="Draft model: derive c and its memory cost.")
    ] = None,
    gpu: Annotated[str | None, typer.Option(help="GPU for the load coupling.")] = None,
    tp: Annotated[
        int | None,
        typer.Option(*TP_FLAGS, help="Tensor-parallel size [1]."),
    ] = None,
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
    calibration: StepCalibration = None,
    context: ModelLength = None,
    memory_fraction: MemoryFraction = None,
    weight_dtype: Annotated[
        str | None,
        typer.Option(
            "--weight-dtype",
            "--quantization",
            help="Target weights as served, as `capacity` takes them [the checkpoint's].",
        ),
    ] = None,
    kv_dtype: KvDtype = None,
    engine: Annotated[
        str | None, typer.Option(help="vllm or sglang: the engine the target runs on [vllm].")
    ] = None,
    engine_version: Annotated[
        str | None, typer.Option(help="Engine release [the newest modelled].")
    ] = None,
    mean_len: Annotated[int | None, typer.Option(help="Mean tokens per sequence [2000].")] = None,
    max_batch: Annotated[
        int | None, typer.Option(help="Largest concurrency scanned [4096].")
    ] = None,
    concurrency: Annotated[
        int | None,
        typer.Option(help="Concurrency to pick k at [default: the plan's operating point]."),
    ] = None,
    plot: Annotated[
        str | None, typer.Option(help="Also save S against k as an image (plot extra).")
    ] = None,
    hub_timeout: HubTimeout = None,
    json_out: JsonOut = False,
) -> None:
    """Speculative-decoding speedup per k, break-even alpha, and the concurrency it stops paying."""
    apply_hub_timeout(hub_timeout)
    from planner.api import parse_floats, parse_ks, spec_advice
    from planner.api.capacity import DEFAULT_MEAN_TOKENS, served_weight_dtype
    from planner.api.slo import memory_flag
    from planner.errors import InputError
    from planner.sources.calibration import load_calibration

    weight_dtype = served_weight_dtype(weight_dtype)
    # the engine's own exchange flags, as capacity and simulate take them (unset ones left out)
    exchange = stated_exchange(locals())

    if gpu is None and preset is None and model is None:
        # these size the deployment the speculation is coupled to: alone they change nothing
        for flag, value in (
            ("--tp", tp),
            ("--context", context),
            (memory_flag(engine or "vllm"), memory_fraction),
            ("--mean-len", mean_len),
            ("--max-batch", max_batch),
            ("--weight-dtype", weight_dtype),
            ("--kv-dtype", kv_dtype),
            ("--engine", engine),
            ("--engine-version", engine_version),
            ("--pp", pp if pp != 1 else None),
            ("--dp", dp if dp != 1 else None),
            ("--ep", ep),
            ("--dp-attention", dp_attention or None),
            ("--enable-expert-parallel", enable_expert_parallel or None),
            ("--attn-dp-size", attn_dp_size),
            ("--calibration", calibration),
            *((ENGINE_EXTRA_FLAGS[k][1], v) for k, v in exchange.items()),
        ):
            if value is not None:
                raise InputError(flag, "needs a model and GPU (--preset/--model, --gpu)")
    ep, layout_dp, dp_attention = engine_layout(
        engine, tp, dp, ep, dp_attention, enable_expert_parallel, attn_dp_size
    )
    dp = 1 if layout_dp is None else layout_dp
    settings: dict[str, Any] = {
        "tp": 1 if tp is None else tp,
        "pp": pp,
        "mean_tokens": DEFAULT_MEAN_TOKENS if mean_len is None else mean_len,
    }
    extra = engine_extra(engine or "vllm", exchange)
    if extra:
        settings["extra"] = extra
    if context is not None:
        settings["context_tokens"] = context
    if weight_dtype is not None:
        settings["weight_dtype"] = weight_dtype
    if kv_dtype is not None:
        kv = kv_dtype.strip().lower()
        settings["kv_dtype"] = "fp8" if kv.startswith("fp8") else kv
    result = spec_advice(
        alphas=parse_floats(alpha, "--alpha"),
        ks=parse_ks(k),
        draft_cost=draft_cost,
        verify_cost=verify_cost,
        method=method,
        max_batch=DEFAULT_SCAN_LIMIT if max_batch is None else max_batch,
        concurrency=concurrency,
        gpu=gpu,
        preset=preset,
        model=model,
        revision=revision,
        memory_fraction=memory_fraction,
        draft_model=draft_model,
        engine=engine or "vllm",
        engine_version=engine_version,
        dp=dp,
        ep=ep,
        dp_attention=dp_attention,
        calibration=None if calibration is None else load_calibration(calibration),
        **settings,
    )
    if plot is not None:
        from planner.cli.plot import Chart, Series, save

        alphas = sorted({r["alpha"] for r in result["rows"]})
        save(
            Chart(
                title=f"Speculative speedup (c = {draft_cost}, v = {verify_cost})",
                x_label="draft length k",
                y_label="speedup S = E / C",
                series=[
                    Series(
                        f"alpha {a}",
                        [r["k"] for r in result["rows"] if r["alpha"] == a],
                        [r["speedup"] for r in result["rows"] if r["alpha"] == a],
                    )
                    for a in alphas
                ],
            ),
            plot,
        )
    if json_out:
        emit_json(result)
        return
    render(result)


def render(r: dict[str, Any]) -> None:
    """Tables of E, C, S; the best k; break-even; sensitivity; load; a bar chart; flags."""
    from rich.table import Table

    out = console()
    alphas = sorted({row["alpha"] for row in r["rows"]})
    ks = sorted({row["k"] for row in r["rows"]})
    table = Table(
        title=f"Speedup S = E / C  (c = {r['draft_cost']}, v = {r['verify_cost']})",
        title_justify="left",
    )
    table.add_column("k", justify="right")
    table.add_column("C", justify="right")
    for a in alphas:
        table.add_column(f"E a={a}", justify="right")
        table.add_column(f"S a={a}", justify="right")
    by = {(row["alpha"], row["k"]): row for row in r["rows"]}
    for k in ks:
        cells = [str(k), f"{by[(alphas[0], k)]['cost']:.2f}"]
        for a in alphas:
            cells += [f"{by[(a, k)]['expected_tokens']:.2f}", f"{by[(a, k)]['speedup']:.2f}x"]
        table.add_row(*cells)
    print_table(out, fit_columns(table))
    top = max(row["speedup"] for row in r["rows"])
    for a in alphas:
        bars = "".join(BARS[round(by[(a, k)]["speedup"] / top * (len(BARS) - 1))] for k in ks)
        out.print(f"S vs k  a={a:<5} |{bars}| k={ks[0]}..{ks[-1]}")
    for b in r["best"]:
        out.print(f"[bold]best k at alpha {b['alpha']}:[/] k = {b['k']}, {b['speedup']:.2f}x")
    even = ", ".join(
        f"k={e['k']}: {'never' if e['alpha'] is None else format(e['alpha'], '.3f')}"
        for e in r["break_even_alpha"]
    )
    out.print(f"break-even alpha (S >= 1): {even}", soft_wrap=True)
    sens = ", ".join(
        f"v={s['v']}: k={s['k']} {s['speedup']:.2f}x"
        for s in r["v_sensitivity"]
        if s["alpha"] == alphas[-1]
    )
    out.print(f"sensitivity to v at alpha {alphas[-1]}: {sens}", soft_wrap=True)
    if r["load"]:
        load = Table(
            title="Under load (v from the engine's step-time model; an estimate)",
            title_justify="left",
        )
        for col in ("alpha", "concurrency", "c", "v", "best k", "S"):
            load.add_column(col, justify="right")
        for p in r["load"]:
            cells = [p["alpha"], p["batch"], f"{p['draft_cost']:.3f}"]
            cells += [f"{p['verify_cost_best_k']:.3f}", p["best_k"], f"{p['speedup']:.2f}x"]
            load.add_row(*map(str, cells))
        print_table(out, fit_columns(load))
        for d in r["disable_above_concurrency"]:
            n = d["concurrency"]
            msg = (
                f"pays at every concurrency the KV pool allows (<= {r['scan_limit']})"
                if n is None
                else ("never pays" if n == 0 else f"disable above {n} concurrent sequences")
            )
            out.print(f"[bold]alpha {d['alpha']}:[/] {msg}")
    if r["draft"]:
        d = r["draft"]
        out.print(
            f"draft {d['name']}: paged concurrency {d['max_seqs_paged_without_draft']} -> "
            f"{d['max_seqs_paged_with_draft']} with its weights and KV in the pool"
        )
    out.print(f"method {r['method']} needs {r['method_needs']}")
    out.print(f"[bold]Advice:[/] {r['advice']}.", markup=True)
    for note in r["notes"]:
        out.print(f"note: {note}", markup=False)
    if r["flags"] is None:
        return
    out.print("[bold]vLLM:[/]   " + r["flags"]["vllm"], soft_wrap=True, markup=True)
    out.print("[bold]SGLang:[/] " + r["flags"]["sglang"], soft_wrap=True, markup=True)
