"""The step model's terms against per-operation measurements on a GPU (benchmarks/gpu_ops.py).

For every measured operation in benchmarks/data/ops-<card>.json, the time the step model gives
that operation alone on that card, with the constants it uses for the card's family, and the
ratio measured / modelled (above 1: the model is optimistic). Printed by operation and band:

- dense GEMMs by tokens (decode GEMVs, the ridge, prefill) and matrix size, bf16 and fp8: the
  weight stream at the card's achievable share and the multiply at gemm.FLOPS_EFFICIENCY,
  overlapped (gemm.overlapped_ms); and the measured GEMV line, time = a + bytes / B, fitted on
  the single-token rows;
- the routed experts of one MoE layer by experts reached: the read of the reached experts,
  the multiply, and the idle local experts' early exits (moe.MOE_MS_PER_IDLE_EXPERT), without
  the routing kernels (which the measurement does not run);
- decode attention by batch: the KV read at the family's attention share (PyTorch's kernel
  splits no KV, so one sequence runs on a few SMs); prefill attention: causal FLOPs at
  attention.ATTENTION_FLOPS_EFFICIENCY;
- a kernel's launch cost in a CUDA graph and eagerly.

No GPU is needed: it reads the measurements.

    python benchmarks/ops_vs_model.py [--ops FILE]
"""

from __future__ import annotations

import argparse
import json
import statistics
from collections import defaultdict
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from planner.core.specs import GpuSpec
from planner.core.step import attention, gemm, moe, step_time_for
from planner.core.step.family import bandwidth_efficiency, family_of
from planner.sources.models import resolve_model
from planner.sources.presets import find_gpu

ROOT = Path(__file__).resolve().parent.parent
OPS = ROOT / "benchmarks" / "data" / "ops-h200-sxm-141gb.json"
MODELS = ROOT / "tests" / "data" / "models"
# Token bands of the GEMM table: decode GEMVs, the ridge, prefill.
GEMM_BANDS = ((1, 16, "M 1-16"), (17, 256, "M 32-256"), (257, 2048, "M 512-2048"),
              (2049, 1 << 30, "M 4096-8192"))  # fmt: skip
# A weight matrix below this many bytes is "small" (a wide TP's share of a layer).
SMALL_MATRIX_BYTES = 64 * 2**20
BF16_BYTES = 2


def gemm_model_ms(card: GpuSpec, dtype: str, m: int, k: int, n: int) -> float:
    """One GEMM as the step model prices a layer's linears: the family's fixed cost a GEMM (in
    the step's kernels term) and the stream and multiply overlapped."""
    weight_bytes = k * n * (1 if dtype == "fp8" else BF16_BYTES)
    stream = gemm.read_ms(weight_bytes + BF16_BYTES * m * (k + n), _bandwidth(card))
    family = family_of(card)
    rate = gemm.gemm_flops_per_s(card, dtype) * _flops_share(card)
    if dtype == "fp8":
        rate *= family.low_precision_scale
    return family.gemm_floor_ms + gemm.overlapped_ms(stream, gemm.compute_ms(k * n, m, rate))


def moe_model_ms(card: GpuSpec, row: dict[str, Any]) -> float:
    """The routed experts of one layer: the reached experts' read and multiply, overlapped, and
    the idle local experts' early exits."""
    params = row["hidden"] * 3 * row["width"]
    stream = gemm.read_ms(row["experts_reached"] * params * BF16_BYTES, _bandwidth(card))
    rate = gemm.gemm_flops_per_s(card, "bf16") * _flops_share(card)
    idle = int(row["experts_local"]) - int(row["experts_reached"])
    return gemm.overlapped_ms(stream, gemm.compute_ms(params, row["routed"], rate)) + (
        idle * moe.MOE_MS_PER_IDLE_EXPERT
    )


def _flops_share(card: GpuSpec) -> float:
    return gemm.FLOPS_EFFICIENCY * family_of(card).compute_scale


def _bandwidth(card: GpuSpec) -> float:
    return float(card.hbm_bandwidth_bytes_per_s or 0) * bandwidth_efficiency(card)


def band(rows: Iterable[tuple[str, float]]) -> dict[str, list[float]]:
    """Ratios grouped by their label."""
    out: dict[str, list[float]] = defaultdict(list)
    for label, ratio in rows:
        out[label].append(ratio)
    return out


def show(title: str, groups: dict[str, list[float]]) -> None:
    """Median, min and max of measured / modelled per group."""
    print(f"\n{title} (measured / modelled; above 1: the model is optimistic)")
    for label in sorted(groups, key=_order):
        ratios = groups[label]
        print(f"  {label:40s} median {statistics.median(ratios):5.2f}  "
              f"range {min(ratios):5.2f}-{max(ratios):5.2f}  n {len(ratios)}")  # fmt: skip


def _order(label: str) -> tuple[str, int]:
    digits = "".join(c for c in label.split("M ")[-1].split("-")[0] if c.isdigit())
    return (label.split(" M ")[0], int(digits or 0))


def gemv_line(rows: list[dict[str, Any]]) -> tuple[float, float]:
    """(a ms, B bytes/s): least squares of time = a + bytes / B over the single-token rows."""
    xs = [r["k"] * r["n"] * BF16_BYTES for r in rows]
    ys = [r["ms"] for r in rows]
    slope, intercept = statistics.linear_regression(xs, ys)
    return float(intercept), 1e3 / float(slope)


def gemm_ratios(card: GpuSpec, rows: list[dict[str, Any]]) -> list[tuple[str, float]]:
    """Dense GEMMs: (dtype, matrix size, token band) -> measured / modelled."""
    out = []
    for r in (r for r in rows if "ms" in r):
        size = "small" if r["k"] * r["n"] * BF16_BYTES < SMALL_MATRIX_BYTES else "large"
        label = next(name for lo, hi, name in GEMM_BANDS if lo <= r["m"] <= hi)
        modelled = gemm_model_ms(card, r["dtype"], r["m"], r["k"], r["n"])
        out.append((f"{r['dtype']} {size} {label}", r["ms"] / modelled))
    return out


def moe_ratios(card: GpuSpec, rows: list[dict[str, Any]]) -> list[tuple[str, float]]:
    """Routed-expert layers: (layer, experts reached) -> measured / modelled."""
    out = []
    for r in (r for r in rows if "ms" in r):
        reached = r["experts_reached"]
        label = "1-8" if reached <= 8 else "9-64" if reached <= 64 else "65+"
        out.append((f"{r['layer']} experts {label}", r["ms"] / moe_model_ms(card, r)))
    return out


def attention_ratios(card: GpuSpec, data: dict[str, Any]) -> list[tuple[str, float]]:
    """Decode attention by batch (the KV read as the step model prices it: StepTime.kv_read_ms,
    on the 70B layer whose heads were measured) and causal prefill by length."""
    model = resolve_model(
        None, str(ROOT / "tests" / "data" / "models" / "meta-llama--Llama-3.1-70B")
    )
    st = step_time_for(model, card)
    out = [
        (f"decode attention B {r['batch']}", r["ms"] / st.kv_read_ms(r["kv_bytes"]))
        for r in data["attention"]
        if "ms" in r
    ]
    rate = float(card.bf16_dense_flops or 0) * attention.ATTENTION_FLOPS_EFFICIENCY
    for r in (r for r in data.get("prefill_attention", []) if "ms" in r):
        flops = 2 * r["tokens"] ** 2 * r["heads"] * r["head_dim"]
        out.append((f"prefill attention S {r['tokens']}", r["ms"] / (flops / rate * 1e3)))
    return out


def main() -> None:
    """Print the tables."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--ops", type=Path, default=OPS)
    args = parser.parse_args()
    data = json.loads(args.ops.read_text())
    card = find_gpu(data["catalog_id"])
    print(f"{data['device']} ({card.id}), measured {data['measured']}, {data['versions']}")
    print(f"model: bandwidth share {bandwidth_efficiency(card)}, GEMM FLOPs share "
          f"{_flops_share(card):.2f}, family {family_of(card).name}")  # fmt: skip
    show(
        "dense GEMMs by dtype, matrix size (64 MiB) and tokens",
        band(gemm_ratios(card, data["gemm"])),
    )
    single = [r for r in data["gemm"] if r.get("m") == 1 and r["dtype"] == "bf16"]
    a_ms, b_bytes_per_s = gemv_line(single)
    sizes_mib = [r["k"] * r["n"] * BF16_BYTES / 2**20 for r in single]
    share = b_bytes_per_s / float(card.hbm_bandwidth_bytes_per_s or b_bytes_per_s)
    print(f"  single-token bf16 GEMVs: time = {a_ms * 1e3:.1f} us + bytes / "
          f"{b_bytes_per_s / 1e12:.2f} TB/s ({share:.2f} of peak; {len(single)} shapes, "
          f"{min(sizes_mib):.0f}-{max(sizes_mib):.0f} MiB)")  # fmt: skip
    show("routed experts of one layer (grouped GEMM) by experts reached",
         band(moe_ratios(card, data["moe"])))  # fmt: skip
    show("attention (PyTorch SDPA: FlashAttention-2, no split-KV)",
         band(attention_ratios(card, data)))  # fmt: skip
    for r in data.get("launch", []):
        print(f"  launch {r['timed']:5s}: {r['us_per_kernel']} us a kernel")


if __name__ == "__main__":
    main()
