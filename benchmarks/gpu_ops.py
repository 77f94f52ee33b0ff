"""Per-operation micro-benchmarks on the GPU at hand, for the step model's constants.

Measured with CUDA events after a warm-up (ROCm builds of torch expose the same API):

- GEMM: M tokens through a K -> N linear layer (70B-class shapes) in bf16 and, where the card
  has fp8 tensor cores and torch exposes them (`torch._scaled_mm`), in fp8: achieved FLOP/s as a
  share of the catalog's dense peak for that dtype, and bytes/s as a share of its HBM peak.
- Decode attention: one query per sequence over B sequences x C tokens of GQA KV (PyTorch SDPA):
  KV bytes read per second as a share of HBM peak.
- MoE: the routed experts of one layer as a batched GEMM over the experts the tokens reach
  (equal tokens each, the grouped GEMM's best case): time and share of peak.

The results are written to benchmarks/data/ops-<card>.json with the card, driver and library
versions. The step model does not read them yet; they are the measurements its GPU-family
constants are to be fitted on (docs/method.md §3). Without a GPU the script runs on the CPU with
--quick, to check itself; those timings mean nothing.

    pip install ".[gpu]"          # torch, the optional extra
    python benchmarks/gpu_ops.py [--quick] [--out FILE]
"""

from __future__ import annotations

import argparse
import datetime
import json
import math
import platform
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "benchmarks"))
from rows import catalog_gpu  # noqa: E402

from planner.core.step.family import family_of  # noqa: E402
from planner.sources.presets import find_gpu  # noqa: E402

# (name, K, N) of a Llama-3-70B decoder layer on one GPU (hidden 8192, 64 query and 8 KV heads
# of 128, MLP 28672): the shapes whose efficiency the step model's GEMM term stands for.
GEMM_SHAPES = (
    ("qkv", 8192, 10240),
    ("o", 8192, 8192),
    ("gate_up", 8192, 57344),
    ("down", 28672, 8192),
)
GEMM_TOKENS = (1, 16, 64, 128, 256, 512, 1024, 2048, 4096, 8192)
# Decode attention: 64 query heads over 8 KV heads of 128 (the same layer), B sequences x C
# tokens of context.
ATTENTION_HEADS, ATTENTION_KV_HEADS, HEAD_DIM = 64, 8, 128
ATTENTION_BATCHES = (1, 8, 32, 128)
ATTENTION_CONTEXTS = (1024, 4096, 16384)
# A routed-expert layer: 128 experts of width 768 on a 2048 hidden, top-8 (Qwen3-30B-A3B).
MOE_EXPERTS, MOE_TOP_K, MOE_HIDDEN, MOE_WIDTH = 128, 8, 2048, 768
MOE_TOKENS = (1, 16, 64, 256, 1024, 4096)
# The --quick sizes: a self-check on any device in seconds.
QUICK = {
    "gemm_shapes": (("tiny", 256, 512),),
    "gemm_tokens": (1, 16, 64),
    "attention_batches": (1, 2),
    "attention_contexts": (128,),
    "moe_tokens": (1, 16),
}
WARMUP, REPEAT = 3, 20


def timer(torch: Any, cuda: bool) -> Callable[[Callable[[], object]], float]:
    """A function that times a callable: mean ms over REPEAT runs after WARMUP."""

    def time_ms(fn: Callable[[], object]) -> float:
        for _ in range(WARMUP):
            fn()
        if cuda:
            torch.cuda.synchronize()
            start = torch.cuda.Event(enable_timing=True)
            end = torch.cuda.Event(enable_timing=True)
            start.record()
            for _ in range(REPEAT):
                fn()
            end.record()
            torch.cuda.synchronize()
            return float(start.elapsed_time(end)) / REPEAT
        t0 = time.perf_counter()
        for _ in range(REPEAT):
            fn()
        return (time.perf_counter() - t0) * 1e3 / REPEAT

    return time_ms


def share(value: float, peak: float | None) -> float | None:
    """value / peak, where the catalog has the peak."""
    return round(value / peak, 4) if peak else None


def fp8_dtype(torch: Any, card: Any) -> Any:
    """The fp8 format the card's tensor cores take: CDNA3 (MI300X / MI325X, gfx942) multiplies
    the fnuz variant, everything else OCP e4m3."""
    if card is not None and family_of(card).name == "cdna3":
        return torch.float8_e4m3fnuz
    return torch.float8_e4m3fn


def gemm(torch: Any, dev: str, time_ms: Any, card: Any, shapes: Any, tokens: Any) -> list[Any]:
    """bf16 (and fp8 where it runs) GEMM rows: M x K -> N."""
    rows = []
    hbm = card.hbm_bandwidth_bytes_per_s if card else None
    for name, k, n in shapes:
        w = torch.randn(k, n, device=dev, dtype=torch.bfloat16)
        w8 = None
        for m in tokens:
            x = torch.randn(m, k, device=dev, dtype=torch.bfloat16)
            ms = time_ms(lambda x=x, w=w: x @ w)
            flops, moved = 2 * m * k * n, 2 * (m * k + k * n + m * n)
            peak = card.bf16_dense_flops if card else None
            rows.append(gemm_row(name, "bf16", (m, k, n), ms, flops, moved, peak, hbm))
            if dev == "cpu" or m % 16:
                continue  # _scaled_mm wants dimensions in multiples of 16, on a GPU
            try:
                if w8 is None:
                    w8 = w.to(fp8_dtype(torch, card)).t().contiguous().t()  # column-major
                x8 = x.to(w8.dtype)
                one = torch.tensor(1.0, device=dev)
                ms = time_ms(
                    lambda x8=x8, w8=w8, one=one: torch._scaled_mm(
                        x8, w8, scale_a=one, scale_b=one, out_dtype=torch.bfloat16
                    )
                )
            except (RuntimeError, TypeError, AttributeError) as exc:
                rows.append({"op": name, "dtype": "fp8", "m": m, "error": str(exc)[:200]})
                w8 = None
                continue
            moved = m * k + k * n + 2 * m * n  # fp8 inputs, bf16 output
            peak = card.fp8_dense_flops if card else None
            rows.append(gemm_row(name, "fp8", (m, k, n), ms, flops, moved, peak, hbm))
    return rows


def gemm_row(
    name: str, dtype: str, shape: tuple[int, int, int], ms: float, flops: int,
    moved_bytes: int, peak_flops: float | None, hbm_bytes_per_s: float | None,
) -> dict[str, Any]:  # fmt: skip
    """One GEMM measurement: its time, TFLOP/s, and shares of the card's peak FLOPs and HBM."""
    m, k, n = shape
    return {
        "op": name, "dtype": dtype, "m": m, "k": k, "n": n, "ms": round(ms, 5),
        "tflops": round(flops / ms / 1e9, 2),
        "flops_share": share(flops / ms * 1e3, peak_flops),
        "bandwidth_share": share(moved_bytes / ms * 1e3, hbm_bytes_per_s),
    }  # fmt: skip


def attention(torch: Any, dev: str, time_ms: Any, card: Any, batches: Any, contexts: Any) -> Any:
    """Decode attention rows: KV bytes read per second against HBM peak."""
    import torch.nn.functional as f

    rows = []
    for b in batches:
        for c in contexts:
            q = torch.randn(b, ATTENTION_HEADS, 1, HEAD_DIM, device=dev, dtype=torch.bfloat16)
            k = torch.randn(b, ATTENTION_KV_HEADS, c, HEAD_DIM, device=dev, dtype=torch.bfloat16)
            v = torch.randn_like(k)
            try:
                ms = time_ms(lambda q=q, k=k, v=v: f.scaled_dot_product_attention(
                    q, k, v, enable_gqa=True
                ))  # fmt: skip
            except (RuntimeError, TypeError) as exc:
                rows.append({"batch": b, "context": c, "error": str(exc)[:200]})
                continue
            kv_bytes = 2 * k.numel() * k.element_size()
            rows.append(
                {
                    "batch": b, "context": c, "ms": round(ms, 5), "kv_bytes": kv_bytes,
                    "bandwidth_share": share(
                        kv_bytes / ms * 1e3, card.hbm_bandwidth_bytes_per_s if card else None
                    ),
                }
            )  # fmt: skip
    return rows


def moe(torch: Any, dev: str, time_ms: Any, card: Any, tokens: Any) -> list[Any]:
    """Routed-expert rows: the gate/up GEMM of the experts T tokens reach, equal tokens each."""
    rows = []
    for t in tokens:
        reached = MOE_EXPERTS * (1 - (1 - MOE_TOP_K / MOE_EXPERTS) ** t)
        experts = max(1, round(reached))
        per_expert = max(1, math.ceil(t * MOE_TOP_K / experts))
        x = torch.randn(experts, per_expert, MOE_HIDDEN, device=dev, dtype=torch.bfloat16)
        w = torch.randn(experts, MOE_HIDDEN, 2 * MOE_WIDTH, device=dev, dtype=torch.bfloat16)
        ms = time_ms(lambda x=x, w=w: torch.bmm(x, w))
        flops = 2 * experts * per_expert * MOE_HIDDEN * 2 * MOE_WIDTH
        moved = 2 * (w.numel() + x.numel() + experts * per_expert * 2 * MOE_WIDTH)
        rows.append(
            {
                "tokens": t, "experts_reached": experts, "tokens_per_expert": per_expert,
                "ms": round(ms, 5),
                "flops_share": share(flops / ms * 1e3, card.bf16_dense_flops if card else None),
                "bandwidth_share": share(
                    moved / ms * 1e3, card.hbm_bandwidth_bytes_per_s if card else None
                ),
            }
        )  # fmt: skip
    return rows


def versions(torch: Any) -> dict[str, Any]:
    """The software the numbers were taken with."""
    out: dict[str, Any] = {
        "torch": torch.__version__,
        "cuda": torch.version.cuda,
        "hip": getattr(torch.version, "hip", None),
        "python": platform.python_version(),
    }
    try:
        import pynvml

        pynvml.nvmlInit()
        out["driver"] = pynvml.nvmlSystemGetDriverVersion()
    except Exception:  # no NVIDIA driver library (CPU, ROCm): leave it out
        out["driver"] = None
    return out


def main() -> None:
    """Run every operation and write the JSON."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="tiny sizes: a self-check")
    parser.add_argument("--out", type=Path, default=None)
    args = parser.parse_args()
    try:
        import torch
    except ImportError:
        sys.exit("gpu_ops.py needs torch: pip install '.[gpu]'")
    cuda = torch.cuda.is_available()
    dev = "cuda" if cuda else "cpu"
    name = torch.cuda.get_device_name() if cuda else platform.processor() or "cpu"
    gid = catalog_gpu(None, name, {}) if cuda else None
    card = find_gpu(gid) if gid else None
    sizes = QUICK if args.quick else {
        "gemm_shapes": GEMM_SHAPES,
        "gemm_tokens": GEMM_TOKENS,
        "attention_batches": ATTENTION_BATCHES,
        "attention_contexts": ATTENTION_CONTEXTS,
        "moe_tokens": MOE_TOKENS,
    }  # fmt: skip
    time_ms = timer(torch, cuda)
    torch.manual_seed(0)
    result = {
        "what": __doc__.splitlines()[0],
        "device": name,
        "catalog_id": gid,
        "measured": datetime.date.today().isoformat(),
        "versions": versions(torch),
        "quick": args.quick,
        "gemm": gemm(torch, dev, time_ms, card, sizes["gemm_shapes"], sizes["gemm_tokens"]),
        "attention": attention(
            torch, dev, time_ms, card, sizes["attention_batches"], sizes["attention_contexts"]
        ),
        "moe": moe(torch, dev, time_ms, card, sizes["moe_tokens"]),
    }
    out = args.out or ROOT / "benchmarks" / "data" / f"ops-{gid or 'cpu'}.json"
    out.write_text(json.dumps(result, indent=1) + "\n")
    print(f"{len(result['gemm'])} GEMM, {len(result['attention'])} attention and "
          f"{len(result['moe'])} MoE rows on {name} -> {out}")  # fmt: skip


if __name__ == "__main__":
    main()
