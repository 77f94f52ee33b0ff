"""Step-time model vs measured decode steps: every row of benchmarks/data/step-time.jsonl.

Prints predicted vs measured per row, then median and p90 |error| and the signed bias, overall
and by GPU, TP and batch bucket, and the ideal-step floor check. Rows on GPUs the catalog does
not hold are skipped (and counted).

    python benchmarks/step_time.py
"""

from __future__ import annotations

import json
import math
import statistics
from collections import defaultdict
from pathlib import Path

from planner.core.engines.common import parse_version
from planner.core.step import step_time_for
from planner.sources.models import resolve_model
from planner.sources.presets import find_gpu

ROOT = Path(__file__).resolve().parent.parent
ROWS = ROOT / "benchmarks" / "data" / "step-time.jsonl"
FLOOR = ROOT / "benchmarks" / "data" / "step-floor.json"
MODELS = ROOT / "tests" / "data" / "models"

# How a row names its GPU -> the catalog id (rows on other GPUs are skipped).
GPU_IDS = (("A100-80G", "a100-sxm4-80gb"), ("H100 80GB", "h100-sxm5-80gb"))


def gpu_id(text: str) -> str | None:
    """The catalog id a row's GPU description maps to."""
    return next((gid for key, gid in GPU_IDS if key in text), None)


def engine_of(row: dict[str, object]) -> tuple[str, tuple[int, int, int] | None]:
    """(engine key, version) of a row."""
    engine = str(row["engine"])
    if engine.startswith("lmdeploy"):
        return "lmdeploy", None
    return engine, parse_version(str(row["engine_version"]))


def predict(row: dict[str, object]) -> float | None:
    """The model's step time for a row, or None when its GPU or model is not available."""
    gid = gpu_id(str(row["gpu"]))
    folder = MODELS / str(row["model"]).replace("/", "--")
    if gid is None or not folder.is_dir():
        return None
    model = resolve_model(None, str(folder))
    engine, version = engine_of(row)
    st = step_time_for(model, find_gpu(gid), tp=int(str(row["tp"])), engine=engine, version=version)
    return st.step_ms(int(str(row["batch"])), int(str(row["context_at_decode"])))


def model_class(row: dict[str, object]) -> str:
    """dense or MoE, from the row's config."""
    folder = MODELS / str(row["model"]).replace("/", "--")
    return "MoE" if resolve_model(None, str(folder)).num_experts else "dense"


def summary(errors: list[float]) -> str:
    """median |e|, p90 |e|, bias, n."""
    absolute = sorted(abs(e) for e in errors)
    p90 = absolute[max(0, math.ceil(0.9 * len(absolute)) - 1)]
    return (
        f"median {statistics.median(absolute):6.2%}  p90 {p90:6.2%}  "
        f"bias {statistics.mean(errors):+6.2%}  n {len(errors)}"
    )


def bucket(batch: int) -> str:
    """Batch bucket label."""
    return (
        "B=1" if batch == 1 else "B 2-16" if batch <= 16 else "B 17-64" if batch <= 64 else "B>64"
    )


def main() -> None:
    """Print the table and the summaries."""
    rows = [json.loads(line) for line in ROWS.read_text().splitlines() if line.strip()]
    errors: list[float] = []
    groups: dict[str, list[float]] = defaultdict(list)
    skipped = 0
    for row in rows:
        predicted = predict(row)
        if predicted is None:
            skipped += 1
            continue
        measured = float(row["measured_ms"])
        error = (predicted - measured) / measured
        errors.append(error)
        groups[f"gpu {gpu_id(str(row['gpu']))}"].append(error)
        groups[f"class {model_class(row)}"].append(error)
        groups[f"tp {row['tp']}"].append(error)
        groups[bucket(int(row["batch"]))].append(error)
        where = f"tp{row['tp']} B{row['batch']:>4} ctx{row['context_at_decode']:>6}"
        print(
            f"{row['id'][:48]:48s} {where}  measured {measured:7.2f}  predicted {predicted:7.2f}"
            f"  {error:+7.2%}"
        )
    print(f"\nall rows: {summary(errors)}  (skipped {skipped}: GPU not in the catalog)")
    for name in sorted(groups):
        print(f"  {name:12s} {summary(groups[name])}")
    floor = json.loads(FLOOR.read_text())
    model = resolve_model(None, str(MODELS / "meta-llama--Llama-3.1-8B"))
    st = step_time_for(model, find_gpu(floor["gpu"]), engine="lmdeploy")
    for batch, ms in floor["step_ms"].items():
        ideal = st.model_copy(update={"overhead_ms": 0.0}).step_ms(
            int(batch), floor["context_tokens"]
        )
        verdict = "ok" if ideal >= ms else "BELOW THE FLOOR"
        print(
            f"floor {floor['gpu']} B={batch}: measured ideal {ms} ms, model (no engine) "
            f"{ideal:.2f} ms: {verdict}"
        )


if __name__ == "__main__":
    main()
