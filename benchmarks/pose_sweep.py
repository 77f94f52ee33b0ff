"""Every shipped model config through `planner simulate`, posed as the e2e harness poses a row.

A robustness check, not an accuracy one: each config in tests/data/models is run on each GPU
type of a held-out sweep (NVIDIA and AMD), under vLLM and SGLang, at TP 1 and 8 (and, with
`--layouts tp1,tp8,dp8`, 8 data-parallel attention ranks: SGLang's TP 8 with --dp 8
--enable-dp-attention, vLLM's --data-parallel-size 8; refused for dense models), in bf16 and
fp8 (`--precisions bf16,fp8,fp4` adds 4-bit weights: NVFP4 on NVIDIA, MXFP4 on AMD, weight-only
where the card has no fp4 tensor cores), as a random closed loop (1,024 / 1,024 tokens, range
ratio 0.8) at 1, 8, 32 and 128 clients. It prints any traceback (there should be none: bad
input is one error naming its flag), the refusals counted by their reason, and where output
tokens/s per GPU falls as clients are added where the KV pool does not cap the running set
(there it is allowed, and counted apart: the engine preempts or admits fewer than the
clients). Across deployments it checks what no engine would contradict, at each load where
neither side's KV pool caps the running set: the median TPOT never falls as clients are added;
fp8 weights are never slower than the checkpoint's own 16-bit ones (tokens/s per GPU, median
TPOT) on a card with fp8 tensor cores; and a card that matches another of its family in every
figure but has more bandwidth and memory (H200 over H100, MI325X over MI300X) is never slower.
One exception is counted apart, not as broken: an MLA model's fp8 projections cost more a layer
than its 16-bit ones in NVIDIA's measured kernel tables (docs/method.md §3, the MLA decode
module), which can outweigh the bytes they save where a wide TP leaves few of them at small
batches. Deployments run in a process pool (~20 min on 2 cores).

    python benchmarks/pose_sweep.py [--models DIR] [--gpus H100,MI300X] [--layouts tp1,tp8]
        [--precisions bf16,fp8,fp4] [-v]
"""

from __future__ import annotations

import argparse
import itertools
import sys
import traceback
from collections import Counter
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "benchmarks"))
import e2e  # noqa: E402
from rows import catalog_gpu, model_reference  # noqa: E402

from planner.core.specs import KvKind  # noqa: E402
from planner.errors import PlannerError  # noqa: E402
from planner.sources.models import resolve_model  # noqa: E402
from planner.sources.presets import find_gpu  # noqa: E402

GPUS = ("H100", "H200", "B200", "MI300X", "MI325X", "MI355X", "A100")
ENGINES = ("vllm", "sglang")
# Layouts by name: (TP, DP, data-parallel attention), in SGLang's notation (its attention
# groups inside the TP size; the e2e harness poses vLLM's as TP 1 x DP 8).
LAYOUTS = {"tp1": (1, 1, False), "tp8": (8, 1, False), "dp8": (8, 8, True)}
PRECISIONS = ("bf16", "fp8")
CLIENTS = (1, 8, 32, 128)
PROMPT_TOKENS = OUTPUT_TOKENS = 1024
RANGE_RATIO = 0.8
# A fall in output tokens/s per GPU from one load to the next smaller than this is noise.
FALL_TOLERANCE = 0.02
# The same tolerance for the invariants across deployments (a simulation's requests are drawn
# anew for each, so two near-equal deployments differ by about this much).
INVARIANT_TOLERANCE = 0.02
# Cards that match the first of each pair in every figure but bandwidth and memory, which the
# second has more of (presets/gpus: the same tensor-core rates and family).
DOMINATED = (("H100", "H200"), ("MI300X", "MI325X"))


def row(
    model: str, gpu: str, engine: str, layout: str, precision: str, clients: int
) -> dict[str, Any]:
    """One deployment and load in the shape of an e2e row."""
    tp, dp, dp_attention = LAYOUTS[layout]
    return {
        "model": model,
        "gpu_norm": gpu,
        "gpu": gpu,
        "engine": engine,
        "engine_family": engine,
        "tp": tp,
        "dp": dp,
        "dp_attention": dp_attention,
        "pp": 1,
        "gpu_count": tp,
        "precision": {"weights": precision},
        "source": {"date": "2025-10-01"},
        "measured": {},
        "workload": {
            "dataset": "random",
            "input_len": PROMPT_TOKENS,
            "output_len": OUTPUT_TOKENS,
            "concurrency": clients,
            "range_ratio": RANGE_RATIO,
        },
    }


# One load's prediction: output tokens/s per GPU, median TPOT (ms), and whether the KV pool
# capped the running set (the engine preempted, or admitted fewer than the clients).
Point = tuple[float, float, bool]
# A deployment: model, GPU, engine, layout, precision.
Key = tuple[str, str, str, str, str]


def deployment(
    job: tuple[str, str, str, str, str, str],
) -> tuple[list[tuple[str, str]], dict[int, Point]]:
    """One deployment at each load until one is refused: (kind, text) per event, kind one of
    ok, refused, falls, capped, traceback; and the prediction at each load posed."""
    model, gpu, engine, layout, precision, models = job
    events: list[tuple[str, str]] = []
    points: dict[int, Point] = {}
    last = None
    for clients in CLIENTS:
        r = row(model, gpu, engine, layout, precision, clients)
        try:
            kwargs, why = e2e.pose(r, Path(models))
            if why:
                events.append(("refused", why))
                break
            got = e2e.predict(r, kwargs)
        except PlannerError as exc:
            events.append(("refused", str(exc).split(":")[0]))
            break
        except Exception:  # a traceback is what this looks for
            events.append(("traceback", traceback.format_exc()))
            break
        per_gpu = got["output_throughput"] / got["gpus"]
        # the engine preempts, or admits fewer than the clients: its KV pool caps the load
        capped = got["preemptions"] > 0 or got["peak_running_seqs"] < clients
        points[clients] = (per_gpu, got["median_tpot_ms"], capped)
        events.append(("ok", f"{clients} clients: {per_gpu:.1f} tok/s per GPU"))
        if last is not None and per_gpu < last * (1 - FALL_TOLERANCE):
            # allowed where the KV pool caps the running set: the engine's own throughput
            # falls there too
            what = f"{last:.1f} -> {per_gpu:.1f} tok/s per GPU at {clients}"
            events.append(("capped" if capped else "falls", what))
        last = per_gpu
    return events, points


def broken_invariants(
    found: dict[Key, dict[int, Point]], sixteen_bit: set[str], mla: set[str]
) -> tuple[list[str], list[str]]:
    """What the predictions across deployments contradict (module docstring), one line each,
    at loads where no side's KV pool caps the running set; and apart, the MLA models' fp8
    that is slower than their 16-bit weights (`sixteen_bit`: the models whose checkpoint is
    16-bit, the only ones whose "bf16" deployment is bf16; `mla`: the MLA models)."""
    tol = INVARIANT_TOLERANCE
    lines: list[str] = []
    apart: list[str] = []
    for key, points in found.items():
        loads = sorted(c for c, p in points.items() if not p[2])
        for low, high in itertools.pairwise(loads):
            if points[high][1] < points[low][1] * (1 - tol):
                lines.append(
                    f"TPOT falls: {' '.join(key)}: {points[low][1]:.2f} ms at {low} clients, "
                    f"{points[high][1]:.2f} at {high}"
                )

    def compare(slow: Key, fast: Key, why: str, into: list[str] = lines) -> None:
        a, b = found.get(slow), found.get(fast)
        if a is None or b is None:
            return
        for clients in sorted(set(a) & set(b)):
            (a_tok, a_tpot, a_cap), (b_tok, b_tpot, b_cap) = a[clients], b[clients]
            if a_cap or b_cap:
                continue
            if b_tok < a_tok * (1 - tol) or b_tpot > a_tpot * (1 + tol):
                into.append(
                    f"{why}: {' '.join(fast)} at {clients} clients: {b_tok:.1f} tok/s per GPU, "
                    f"TPOT {b_tpot:.2f} ms; {' '.join(slow)}: {a_tok:.1f}, {a_tpot:.2f}"
                )

    for model, gpu, engine, layout, precision in found:
        fp8_card = find_gpu(catalog_gpu(gpu, gpu, {}) or gpu).fp8_dense_flops
        if precision == "bf16" and model in sixteen_bit and fp8_card:
            fp8 = (model, gpu, engine, layout, "fp8")
            into = apart if model in mla else lines
            compare((model, gpu, engine, layout, precision), fp8, "fp8 slower than bf16", into)
        for smaller, larger in DOMINATED:
            if gpu == smaller:
                bigger = (model, larger, engine, layout, precision)
                compare((model, gpu, engine, layout, precision), bigger, f"{larger} slower")
    return lines, apart


def checkpoint_kinds(names: list[str], models: Path) -> tuple[set[str], set[str]]:
    """Of `names`, the models whose checkpoint stores 16-bit weights, and the MLA models."""
    sixteen_bit: set[str] = set()
    mla: set[str] = set()
    for name in names:
        reference, _ = model_reference(name, models)
        if reference is None:
            continue
        spec = resolve_model(None, reference)
        if (spec.weight_dtype or "bf16") in ("bf16", "fp16"):
            sixteen_bit.add(name)
        if any(g.kind == KvKind.MLA for g in spec.kv_groups):
            mla.add(name)
    return sixteen_bit, mla


def main() -> None:
    """Run the sweep and print its counts."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--models", type=Path, default=e2e.DEFAULT_MODELS)
    parser.add_argument("--gpus", default=",".join(GPUS))
    parser.add_argument("--layouts", default="tp1,tp8", help=f"of {', '.join(LAYOUTS)}")
    parser.add_argument("--precisions", default=",".join(PRECISIONS), help="of bf16, fp8, fp4")
    parser.add_argument(
        "-v", action="store_true", help="print every refusal, capped fall and MLA exception"
    )
    args = parser.parse_args()
    names = sorted(f.name.replace("--", "/", 1) for f in args.models.iterdir() if "--" in f.name)
    jobs = [
        (m, g, e, layout, p, str(args.models))
        for m in names
        for g in args.gpus.split(",")
        for e in ENGINES
        for layout in args.layouts.split(",")
        for p in args.precisions.split(",")
    ]
    kinds: Counter[str] = Counter()
    reasons: Counter[str] = Counter()
    found: dict[Key, dict[int, Point]] = {}
    with ProcessPoolExecutor() as pool:
        for job, (events, points) in zip(
            jobs, pool.map(deployment, jobs, chunksize=4), strict=True
        ):
            found[job[:5]] = points
            where = f"{job[0]} on {job[1]} {job[2]} {job[3]} {job[4]}"
            for kind, text in events:
                kinds[kind] += 1
                if kind == "refused":
                    reasons[text] += 1
                if kind in ("traceback", "falls") or (args.v and kind in ("refused", "capped")):
                    print(f"{kind}: {where}: {text}")
    print(f"{len(jobs)} deployments, {kinds['ok']} predictions, {kinds['traceback']} tracebacks")
    print(
        f"refused: {kinds['refused']}; throughput fell as clients were added: {kinds['falls']}"
        f" (and {kinds['capped']} times where the KV pool capped the running set)"
    )
    for reason, count in reasons.most_common():
        print(f"  {count:5d}  {reason}")
    broken, apart = broken_invariants(found, *checkpoint_kinds(names, args.models))
    for line in broken + (apart if args.v else []):
        print(line)
    print(
        f"invariants across deployments broken: {len(broken)} (and {len(apart)} times an MLA"
        " model's fp8 projections cost more than the bytes they save)"
    )


if __name__ == "__main__":
    main()
