"""Step-time model vs measured decode steps: every row of benchmarks/data/step-time.jsonl.

Prints predicted vs measured per row, then median and p90 |error| and the signed bias, overall
and by GPU, model class, engine, TP and batch bucket, and the model against whole decode steps
measured on a GPU (benchmarks/step_floor.py). Rows on
GPUs the catalog does not hold, or of models with no shipped config, are skipped (and counted).
A quantized export (-FP8, -FP4 ...) is priced on its base model's config with its weights; a
row's weights are the format its quantization, weight dtype or dtype names, its KV cache the
one its engine runs (fp8 where it says so, else the release's own for `auto`), its release the
one its version or image tag names (else its run date's), its TP as given (else its GPU count),
its step `measured_ms` (else its raw value in its unit). Rows whose fields are not the schema's
are counted as not readable, never fatal.

    python benchmarks/step_time.py [--rows FILE] [--models DIR]
"""

from __future__ import annotations

import argparse
import json
import math
import statistics
import sys
from collections import defaultdict
from pathlib import Path
from typing import Any, NamedTuple

from planner.api.capacity import VARIANT_CHECKPOINTS
from planner.core.capacity import weights_bytes_for
from planner.core.engines import engine_kv_dtype
from planner.core.engines.common import parse_version
from planner.core.hf_config import quantized_weights_bytes
from planner.core.specs import GpuSpec, ModelSpec
from planner.core.step import StepTime, step_time_for
from planner.core.step.attention_dp import AttentionDp
from planner.core.step.family import family_of
from planner.core.step.moe import MoeExchange
from planner.errors import PlannerError
from planner.sources.models import resolve_model
from planner.sources.presets import find_gpu
from planner.units import dtype_bytes

ROOT = Path(__file__).resolve().parent.parent
# benchmarks/rows.py, beside this file (run as a script or loaded by a test)
sys.path.insert(0, str(ROOT / "benchmarks"))
from rows import (  # noqa: E402
    catalog_gpu,
    engine_release,
    expert_parallel,
    integer,
    model_reference,
    number,
    release_on,
    row_gpu_count,
    row_weights,
    run_date,
)

ROWS = ROOT / "benchmarks" / "data" / "step-time.jsonl"
# Whole decode steps of several stacks measured on a lent GPU (benchmarks/step_floor.py).
FLOORS = sorted((ROOT / "benchmarks" / "data").glob("step-floors-*.json"))
# The variant of a measured stack that keeps only its linear layers (and the MoE routing):
# no engine can run a step in less.
LINEAR_ONLY = ["attention", "elementwise"]
# Stacks whose measured kernels are the engines' own kinds (cuBLAS GEMMs, fused elementwise
# passes, a flash-decoding split-KV attention kernel: benchmarks/triton_decode.py): their fastest
# whole step is a floor for the model too, to within the runs' spread. The fp8 stack pads and
# quantizes each GEMM's input apart and the MoE stack runs torch's grouped GEMM and routing:
# engines run faster kernels there, so only their linear layers bound the model.
IDEAL_STACKS = ("llama-3.1-8b", "llama-3.1-70b-tp8")
# Stacks whose linear layers bound the model: not the MoE stack, whose experts ran torch's
# grouped GEMM and routing, slower than the engines' fused MoE: NVIDIA's tables time vLLM
# 0.24.0's Triton fused MoE for Qwen3-30B-A3B's shape on an H200 at 40 us a layer at one token
# (benchmarks/data/nvidia-kernels.jsonl), the planner at 65 (its experts' read and the tables'
# 46.9 us fixed cost), the stack's own about 105 (its linear layers' 5.94 ms over 48 layers, less
# the attention projections).
LINEAR_BOUND_STACKS = ("llama-3.1-8b", "llama-3.1-8b-fp8", "llama-3.1-70b-tp8")
# Where the model may sit further under a floor: the TP 8 share at 4 and 16 sequences, whose
# small GEMMs cuBLAS runs on slower kernels (its linear layers 5.71-5.87 ms against 5.51-5.70 at
# 1 and 32 sequences, two runs), which a model monotone in the batch cannot follow.
CUBLAS_SLOW_FLOORS = frozenset({("llama-3.1-70b-tp8", 4), ("llama-3.1-70b-tp8", 16)})
CUBLAS_SLOW_SLACK = 0.05
MODELS = ROOT / "tests" / "data" / "models"

# How a row names its GPU -> the catalog id, before the catalog's own device names (rows on
# GPUs the catalog does not hold are skipped).
GPU_IDS = {"A100-80G": "a100-sxm4-80gb", "H100 80GB": "h100-sxm5-80gb"}
# Weight dtypes the step model prices differently from the checkpoint's own 16-bit weights.
REPRICED_DTYPES = ("fp8", "fp4", "nvfp4", "mxfp4", "int4")


def gpu_id(row: dict[str, object]) -> str | None:
    """The catalog id a row's GPU maps to."""
    return catalog_gpu(str(row.get("gpu_norm") or ""), str(row["gpu"]), GPU_IDS)


def engine_of(row: dict[str, object]) -> tuple[str, tuple[int, int, int] | None]:
    """(engine key, version) of a row: the release its version or image tag names (as the e2e
    harness reads one: "rocm/vllm:rocm6.4.1_vllm_0.10.0" is vLLM 0.10.0), else the one current
    on its run date, else None (the newest modelled: "nightly", "latest", nothing)."""
    engine = str(row.get("engine") or "").lower()
    if engine.startswith("lmdeploy"):
        return "lmdeploy", None
    dated = run_date(row)
    named = engine_release(row) or (release_on(engine, dated) if dated else None)
    try:
        return engine, parse_version(named) if named else None
    except PlannerError:
        return engine, None


def predict(row: dict[str, object], models: Path = MODELS) -> float | None:
    """The model's step time for a row, or None when its GPU or model is not available."""
    gid = gpu_id(row)
    reference, variant = model_reference(str(row["model"]), models)
    if gid is None or reference is None:
        return None
    model = resolve_model(None, reference)
    engine, version = engine_of(row)
    # the format the row's weights name (a bare FP4 is NVIDIA's NVFP4 or AMD's MXFP4): its
    # quantization's first (fp8 weights beside a bf16 dtype), then its weight dtype's and its
    # dtype's, else its checkpoint name's
    card = find_gpu(gid)
    stated = row_weights(row, ("quantization", "weight_dtype", "dtype"), card.vendor)
    weight_dtype = stated or variant
    weights = restored_weights(model, weight_dtype)
    kv = kv_dtype_bytes(row, model, card, engine, version)
    tp = tp_of(row)
    # the expert split and data-parallel ranks a MoE row states: DP groups of attention, the
    # MoE layers over all their GPUs; in SGLang's notation the groups sit inside the TP size
    # (GPUs = TP), in vLLM's each is a TP group (GPUs = TP x DP)
    dp = integer(row.get("dp")) or 1
    gpus = row_gpu_count(row) or tp
    ep = expert_parallel(row.get("ep"), gpus) or 1
    groups, attention_tp = 1, tp
    if dp > 1 and model.num_experts and gpus == tp and tp % dp == 0:
        groups, attention_tp = dp, tp // dp
    elif dp > 1 and model.num_experts and gpus == tp * dp:
        groups = dp
    st = step_time_for(
        model,
        card,
        tp=attention_tp,
        weights_bytes=weights,
        weight_dtype=weight_dtype,
        kv_dtype_bytes=kv,
        engine=engine,
        version=version,
        pp=integer(row.get("pp")) or 1,
        dp=AttentionDp(groups=groups),
        exchange=MoeExchange(expert_ranks=ep if ep > 1 and model.num_experts else None),
    )
    return st.step_ms(batch_of(row), context_of(row))


# A row's raw figure in the unit it gives, in ms.
UNIT_MS = {"s": 1000.0, "ms": 1.0, "us": 0.001}


def measured_of(row: dict[str, object]) -> float:
    """A row's measured step, ms: `measured_ms`, else its raw value in its raw unit."""
    if row.get("measured_ms") is not None:
        return float(str(row["measured_ms"]))
    return float(str(row["raw_value"])) * UNIT_MS[str(row["raw_unit"]).strip().lower()]


def tp_of(row: dict[str, object]) -> int:
    """A row's TP size: as given, else its GPU count (one engine over its GPUs) unless it names
    data parallelism."""
    given = integer(row.get("tp"))
    return given or (1 if integer(row.get("dp")) else row_gpu_count(row) or 1)


def batch_of(row: dict[str, object]) -> int:
    """A row's decode batch (`batch`, or `batch_size`)."""
    batch = integer(row.get("batch")) or integer(row.get("batch_size"))
    if batch is None:
        raise KeyError("batch")
    return batch


def kv_dtype_bytes(
    row: dict[str, object],
    model: ModelSpec,
    card: GpuSpec,
    engine: str,
    version: tuple[int, int, int] | None,
) -> int:
    """Bytes a row's KV cache keeps a value in: fp8 where it says so ("FP8", "fp8_e4m3"), or
    where vLLM or SGLang runs one for its `auto` (a checkpoint that declares an FP8 cache,
    DeepSeek's sparse attention: engines.engine_kv_dtype); else 16 bits."""
    text = str(row.get("kv_dtype") or row.get("kv_cache_dtype") or "").strip().lower()
    if text.startswith("fp8"):
        return 1
    if engine in ("vllm", "sglang") and text in ("", "auto"):
        at = ".".join(map(str, version)) if version else None
        return dtype_bytes(engine_kv_dtype(engine, model, card, at, "auto"))
    return 2


def restored_weights(model: ModelSpec, weight_dtype: str | None) -> int | None:
    """The bytes of a row's weights where they are not the checkpoint's own: a variant export's
    (NVFP4 / MXFP4 / AWQ int4, sized as `planner --weight-dtype` sizes one) or fp8 re-stored
    (None: the checkpoint's own, or a format not re-priced)."""
    if weight_dtype not in REPRICED_DTYPES or model.weight_dtype.startswith(weight_dtype):
        return None
    method = VARIANT_CHECKPOINTS.get(weight_dtype)
    if method is not None:
        return quantized_weights_bytes(model, method)
    return weights_bytes_for(model, weight_dtype)[0]


def context_of(row: dict[str, object]) -> int:
    """The context a row's decode steps see: its own figure, else the prompt and half the
    output (the mean over the decode phase, the convention the rows' notes state; a row without
    an output length at its prompt)."""
    given = number(row.get("context_at_decode"))
    if given is not None and math.isfinite(given):
        return round(given)  # a mean context may be fractional
    prompt = integer(row.get("input_len"))
    if prompt is None:
        raise KeyError("input_len")
    return prompt + (integer(row.get("output_len")) or 0) // 2


def model_class(row: dict[str, object], models: Path = MODELS) -> str:
    """dense or MoE, from the row's config."""
    reference, _ = model_reference(str(row["model"]), models)
    return "MoE" if reference and resolve_model(None, reference).num_experts else "dense"


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
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=Path, default=ROWS)
    parser.add_argument("--models", type=Path, default=MODELS)
    args = parser.parse_args()
    rows = [json.loads(line) for line in args.rows.read_text().splitlines() if line.strip()]
    errors: list[float] = []
    groups: dict[str, list[float]] = defaultdict(list)
    skipped = 0
    unreadable = 0
    for row in rows:
        try:
            predicted = predict(row, args.models)
            measured = measured_of(row)
        except (KeyError, TypeError, ValueError, PlannerError):
            unreadable += 1  # fields not the schema's, or a layout the engine refuses
            continue
        if predicted is None:
            skipped += 1
            continue
        error = (predicted - measured) / measured
        errors.append(error)
        card = find_gpu(str(gpu_id(row)))
        groups[f"gpu {card.id}"].append(error)
        groups[f"family {family_of(card).name} ({family_of(card).basis})"].append(error)
        groups[f"class {model_class(row, args.models)}"].append(error)
        groups[f"engine {engine_of(row)[0]}"].append(error)
        tp, batch = tp_of(row), batch_of(row)
        groups[f"tp {tp}"].append(error)
        groups[bucket(batch)].append(error)
        where = f"tp{tp} B{batch:>4} ctx{context_of(row):>6}"
        print(
            f"{str(row.get('id') or '?')[:48]:48s} {where}  measured {measured:7.2f}  "
            f"predicted {predicted:7.2f}  {error:+7.2%}"
        )
    print(
        f"\nall rows: {summary(errors)}  (skipped {skipped}: GPU or model not in the catalog; "
        f"{unreadable} not readable)"
    )
    for name in sorted(groups):
        print(f"  {name:28s} {summary(groups[name])}")
    print_floors()


def floor_curve(stack: dict[str, Any], gpu: str) -> StepTime:
    """The step model of a measured stack with no engine overhead (its all-reduce is taken off
    per step in measured_floors: the measurement runs one GPU's share of a TP group alone)."""
    model = resolve_model(None, str(MODELS / str(stack["model"]).replace("/", "--")))
    fp8 = stack["dtype"] == "fp8"
    return step_time_for(
        model,
        find_gpu(gpu),
        tp=int(stack["tp"]),
        weight_dtype="fp8" if fp8 else None,
        weights_bytes=weights_bytes_for(model, "fp8")[0] if fp8 else None,
    ).model_copy(update={"overhead_ms": 0.0})


class Floor(NamedTuple):
    """One measured stack at one batch: the fastest whole step measured (eager or compiled,
    either KV split, any run), its linear layers alone where measured, and the model's time
    (no engine, no all-reduce)."""

    gpu: str
    stack: str
    batch: int
    whole_ms: float
    linear_ms: float | None
    model_ms: float


def measured_floors() -> list[Floor]:
    """Every measured stack at every batch its whole step was timed at."""
    out: list[Floor] = []
    for path in FLOORS:
        data = json.loads(path.read_text())
        rows, gpu = data["floors"], str(data["catalog_id"])
        for name in dict.fromkeys(str(r["name"]) for r in rows):
            mine = [r for r in rows if r["name"] == name]
            whole = [r for r in mine if not r["leave_out"]]
            linear = [r for r in mine if r["leave_out"] == LINEAR_ONLY]
            curve = floor_curve(mine[0], gpu)
            for batch in sorted({int(b) for r in whole for b in r["step_ms"]}):
                key = str(batch)
                alone = [float(r["step_ms"][key]) for r in linear if key in r["step_ms"]]
                model_ms = curve.step_ms(batch, int(data["context_tokens"]))
                out.append(Floor(
                    gpu=gpu, stack=name, batch=batch,
                    whole_ms=min(float(r["step_ms"][key]) for r in whole if key in r["step_ms"]),
                    linear_ms=min(alone) if alone else None,
                    model_ms=model_ms - curve.allreduce_ms(batch),
                ))  # fmt: skip
    return out


def run_spread() -> float:
    """The largest relative difference between repeated runs of one stack, variant and batch in
    the measured floors: how closely a single floor is known."""
    runs: dict[tuple[object, ...], list[float]] = defaultdict(list)
    for path in FLOORS:
        for r in json.loads(path.read_text())["floors"]:
            kind = (
                path.name,
                r["name"],
                tuple(r["leave_out"]),
                r["split_kv"],
                r["compiled"],
                r.get("attention_kernel", "sdpa"),
            )
            for batch, ms in r["step_ms"].items():
                key = (*kind, batch)
                runs[key].append(float(ms))
    return max((max(v) / min(v) - 1 for v in runs.values() if len(v) > 1), default=0.0)


def floor_slack(floor: Floor, spread: float) -> float:
    """How far under an ideal stack's fastest step the model may sit: the runs' spread, more
    where cuBLAS's kernel choice makes the measured step non-monotone (CUBLAS_SLOW_FLOORS)."""
    return CUBLAS_SLOW_SLACK if (floor.stack, floor.batch) in CUBLAS_SLOW_FLOORS else spread


def print_floors() -> None:
    """The model against the measured stacks: never below the linear layers; for the stacks
    whose kernels are the engines' own (IDEAL_STACKS), never below the whole step less the
    runs' spread (run_spread)."""
    spread = run_spread()
    print(f"\nwhole steps measured on a GPU (repeated runs within {spread:.1%} of each other):")
    for f in measured_floors():
        verdict = "ok"
        if f.stack not in LINEAR_BOUND_STACKS:
            verdict = "ok (torch's MoE kernels, slower than the engines')"
        elif f.linear_ms is not None and f.model_ms < f.linear_ms:
            verdict = "BELOW ITS LINEAR LAYERS"
        elif f.stack in IDEAL_STACKS and f.model_ms < f.whole_ms * (1 - floor_slack(f, spread)):
            verdict = "BELOW THE WHOLE STEP"
        shown = "     -" if f.linear_ms is None else f"{f.linear_ms:6.2f}"
        print(
            f"floor {f.gpu} {f.stack:20s} B={f.batch:<3} whole step {f.whole_ms:6.2f} ms, linear "
            f"layers {shown}, model (no engine, no all-reduce) {f.model_ms:6.2f} "
            f"({f.model_ms / f.whole_ms - 1:+4.0%}): {verdict}"
        )


if __name__ == "__main__":
    main()
