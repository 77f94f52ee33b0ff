"""The closed-loop benchmark runs behind the step-time rows, run whole through `simulate`.

Some rows of benchmarks/data/step-time.jsonl quote the whole `vllm bench serve` summary of the
run they were read from (a CSV excerpt with concurrency, lengths, output throughput, p95 TPOT
and p99 TTFT). Each is posed as the closed loop it was (fixed lengths, N clients, the same
request count) on the deployment it names, and predicted vs measured is printed with the median
and largest |error| per figure: a check of the whole predictor (scheduler, prefill, request
path) on runs whose decode steps the step model was fitted to, not a held-out set.

    python benchmarks/closed_loop.py [--rows FILE] [--models DIR]
"""

from __future__ import annotations

import argparse
import csv
import io
import json
import re
import statistics
import sys
from pathlib import Path
from typing import Any

from planner.api.bench import benchmark
from planner.api.bench_instance import Deployment
from planner.api.bench_load import Lengths, Load

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "benchmarks"))
from rows import catalog_gpu, model_reference  # noqa: E402

ROWS = ROOT / "benchmarks" / "data" / "step-time.jsonl"
MODELS = ROOT / "tests" / "data" / "models"
GPU_IDS = {"H100 80GB": "h100-sxm5-80gb"}
# The summary columns a row must quote to be posed.
NEEDED = ("concurrency", "input_len", "output_len", "num_prompts", "output_throughput")


def summary(row: dict[str, Any]) -> dict[str, str] | None:
    """The benchmark summary a row quotes (its CSV excerpt), or None."""
    text = row.get("excerpt")
    if not isinstance(text, str) or "output_throughput" not in text:
        return None
    records = list(csv.DictReader(io.StringIO(text)))
    if len(records) != 1 or not all(records[0].get(k) for k in NEEDED):
        return None
    return records[0]


def main() -> None:
    """Print every posed run and the error summaries."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=Path, default=ROWS)
    parser.add_argument("--models", type=Path, default=MODELS)
    args = parser.parse_args()
    errors: dict[str, list[float]] = {"throughput": [], "tpot_p95": [], "ttft_p99": []}
    for line in args.rows.read_text().splitlines():
        if not line.strip():
            continue
        row = json.loads(line)
        m = summary(row)
        if m is None:
            continue
        gpu = catalog_gpu(None, row.get("gpu"), GPU_IDS)
        reference, weights = model_reference(str(row.get("model")), args.models)
        if gpu is None or reference is None:
            continue
        settings: dict[str, Any] = {"engine": row.get("engine", "vllm"), "tp": row.get("tp", 1)}
        if row.get("engine_version"):
            settings["version"] = row["engine_version"]
        if weights:
            settings["weight_dtype"] = weights
        context = re.search(r"--max-model-len (\d+)", str(row.get("source", "")))
        if context:
            settings["context_tokens"] = int(context.group(1))
        clients = int(m["concurrency"])
        got = benchmark(
            Deployment(gpu=gpu, model=reference, settings=settings),
            load=Load(concurrency=clients, requests=max(int(m["num_prompts"]), 4 * clients)),
            lengths=Lengths(prompt_len=int(m["input_len"]), output_len=int(m["output_len"])),
            percentiles=(95.0, 99.0),  # the run's summary quotes these
        )
        pairs = {
            "throughput": (float(m["output_throughput"]), got["output_throughput"]),
            "tpot_p95": (float(m["tpot_p95_ms"]), got["p95_tpot_ms"]),
            "ttft_p99": (float(m["ttft_p99_ms"]), got["p99_ttft_ms"]),
        }
        text = [f"{row['id'][:44]:44s} c{clients:<4d}"]
        for key, (measured, predicted) in pairs.items():
            error = predicted / measured - 1
            errors[key].append(error)
            text.append(f"{key} {measured:8.1f} -> {predicted:8.1f} ({error:+6.1%})")
        print("  ".join(text))
    print()
    for key, values in errors.items():
        if values:
            worst = max(values, key=abs)
            middle = statistics.median(abs(v) for v in values)
            print(f"{key:10s} median |error| {middle:6.1%}  largest {worst:+6.1%}  n {len(values)}")


if __name__ == "__main__":
    main()
