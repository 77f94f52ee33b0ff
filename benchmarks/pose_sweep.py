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
clients). Deployments run in a process pool (~20 min on 2 cores).

    python benchmarks/pose_sweep.py [--models DIR] [--gpus H100,MI300X] [--layouts tp1,tp8]
        [--precisions bf16,fp8,fp4] [-v]
"""

from __future__ import annotations

import argparse
import sys
import traceback
from collections import Counter
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "benchmarks"))
import e2e  # noqa: E402

from planner.errors import PlannerError  # noqa: E402

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


def deployment(job: tuple[str, str, str, str, str, str]) -> list[tuple[str, str]]:
    """One deployment at each load until one is refused: (kind, text) per event, kind one of
    ok, refused, falls, traceback."""
    model, gpu, engine, layout, precision, models = job
    events: list[tuple[str, str]] = []
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
        events.append(("ok", f"{clients} clients: {per_gpu:.1f} tok/s per GPU"))
        if last is not None and per_gpu < last * (1 - FALL_TOLERANCE):
            # allowed where the KV pool caps the running set (the engine preempts, or admits
            # fewer than the clients): the engine's own throughput falls there too
            capped = got["preemptions"] > 0 or got["peak_running_seqs"] < clients
            what = f"{last:.1f} -> {per_gpu:.1f} tok/s per GPU at {clients}"
            events.append(("capped" if capped else "falls", what))
        last = per_gpu
    return events


def main() -> None:
    """Run the sweep and print its counts."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--models", type=Path, default=e2e.DEFAULT_MODELS)
    parser.add_argument("--gpus", default=",".join(GPUS))
    parser.add_argument("--layouts", default="tp1,tp8", help=f"of {', '.join(LAYOUTS)}")
    parser.add_argument("--precisions", default=",".join(PRECISIONS), help="of bf16, fp8, fp4")
    parser.add_argument("-v", action="store_true", help="print every refusal and capped fall")
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
    with ProcessPoolExecutor() as pool:
        for job, events in zip(jobs, pool.map(deployment, jobs, chunksize=4), strict=True):
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


if __name__ == "__main__":
    main()
