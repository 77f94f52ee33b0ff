"""Per-operation micro-benchmarks on the GPU at hand, for the step model's constants.

Every operation is captured REPEAT times in one CUDA graph and timed by replaying it (CUDA
events, the median of REPLAYS replays, after a warm-up), as the engines replay their decode
steps; where capture fails it is timed eagerly and the row says so. Weights rotate over copies
that together exceed the L2 cache several times, so a GEMV reads HBM as a decode step does.
ROCm builds of torch expose the same API.

- ceilings: a large device-to-device copy (bytes read + written per second) and large square
  GEMMs in bf16 and fp8: what this card reaches, against which the shares below can be read.
- gemm: M tokens through K -> N linear layers of a Llama-3-70B and a Llama-3-8B decoder layer,
  bf16 and (where the card has fp8 tensor cores and torch exposes them, `torch._scaled_mm`)
  per-tensor fp8: achieved FLOP/s as a share of the catalog's dense peak for that dtype, and
  bytes/s as a share of its HBM peak.
- attention: decode, one query per sequence over B sequences x C tokens of GQA KV (64 query
  heads over 8 KV heads of 128; the 8 query heads of a group posed as 8 queries of one head,
  which is exact for a single decode token): KV bytes read per second against HBM peak.
- prefill_attention: causal attention over S prompt tokens (the same heads, KV expanded):
  FLOPs (2 x 2 x S^2/2 x heads x head_dim) per second against the bf16 dense peak.
- moe: the routed experts of one layer (gate/up then down) for T tokens routed at random to
  top-k of E experts, as one grouped GEMM (`torch._grouped_mm`, where torch has it; else a
  batched GEMM padded to the busiest expert): time, the experts reached, and the weight bytes
  they read per second against HBM peak. Qwen3-30B-A3B on one GPU and DeepSeek-V3's share of
  one GPU under 8-way expert parallelism.
- launch: a tiny kernel's cost launched eagerly and replayed in a CUDA graph, the floor a
  decode step's kernels pay each.

The results are written to benchmarks/data/ops-<card>.json with the card, driver and library
versions (after each section, so a run cut short keeps what it measured). Without a GPU the
script runs on the CPU with --quick, to check itself; those timings mean nothing.

    pip install ".[gpu]"          # torch, the optional extra
    python benchmarks/gpu_ops.py [--quick] [--out FILE]
"""

from __future__ import annotations

import argparse
import datetime
import json
import math
import platform
import statistics
import sys
import time
import traceback
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "benchmarks"))
from rows import catalog_gpu  # noqa: E402

from planner.core.step.family import family_of  # noqa: E402
from planner.sources.presets import find_gpu  # noqa: E402

# (model, name, K, N) of a decoder layer on one GPU: Llama-3-70B (hidden 8192, 64 query and 8
# KV heads of 128, MLP 28672) whole and its share of one GPU under TP 8, and Llama-3-8B (hidden
# 4096, 32 / 8 heads, MLP 14336): the shapes whose efficiency the step model's GEMM term stands
# for, from matrices of 1 GB down to the 15 MB a wide TP leaves each GPU.
GEMM_SHAPES = (
    ("70b-tp8", "qkv", 8192, 1280),
    ("70b-tp8", "o", 1024, 8192),
    ("70b-tp8", "gate_up", 8192, 7168),
    ("70b-tp8", "down", 3584, 8192),
    ("70b", "qkv", 8192, 10240),
    ("70b", "o", 8192, 8192),
    ("70b", "gate_up", 8192, 57344),
    ("70b", "down", 28672, 8192),
    ("8b", "qkv", 4096, 6144),
    ("8b", "o", 4096, 4096),
    ("8b", "gate_up", 4096, 28672),
    ("8b", "down", 14336, 4096),
)
GEMM_TOKENS = (1, 8, 16, 32, 64, 128, 256, 512, 1024, 2048, 4096, 8192)
# Decode attention: 64 query heads over 8 KV heads of 128 (the 70B layer), B sequences x C
# tokens of context.
ATTENTION_HEADS, ATTENTION_KV_HEADS, HEAD_DIM = 64, 8, 128
ATTENTION_BATCHES = (1, 8, 32, 128)
ATTENTION_CONTEXTS = (1024, 4096, 16384)
PREFILL_LENGTHS = (512, 2048, 8192, 16384)
# Routed-expert layers (name, experts on this GPU, experts in all, top-k, hidden, expert width):
# Qwen3-30B-A3B and gpt-oss-120b (in bf16) whole on one GPU, Mixtral-8x7B's eight large
# experts, DeepSeek-V3's 32 of 256 experts under 8-way EP (fed the gathered tokens of all 8
# ranks) and all 256 sliced 8 ways under TP 8.
MOE_LAYERS = (
    ("qwen3-30b-a3b", 128, 128, 8, 2048, 768),
    ("gpt-oss-120b", 128, 128, 4, 2880, 2880),
    ("mixtral-8x7b", 8, 8, 2, 4096, 14336),
    ("deepseek-v3-ep8", 32, 256, 8, 7168, 2048),
    ("deepseek-v3-tp8", 256, 256, 8, 7168, 256),
)
MOE_TOKENS = (1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024, 4096)
LAUNCH_KERNELS = 200
# The --quick sizes: a self-check on any device in seconds.
QUICK = {
    "gemm_shapes": (("tiny", "x", 256, 512),),
    "gemm_tokens": (1, 16, 64),
    "attention_batches": (1, 2),
    "attention_contexts": (128,),
    "prefill_lengths": (64,),
    "moe_layers": (("tiny", 8, 16, 2, 64, 32),),
    "moe_tokens": (1, 16),
    "launch_kernels": 10,
}
WARMUP, REPEAT, REPLAYS = 2, 10, 5
# Weights rotate over copies totalling at least this many bytes (the H200's L2 is 60 MB).
ROTATE_BYTES = 512 * 2**20
MAX_COPIES = 16


class Timer:
    """Times a callable of the repetition index: captured REPEAT times in a CUDA graph and
    replayed (median of REPLAYS replays / REPEAT), or eagerly where capture fails or no GPU."""

    def __init__(self, torch: Any, cuda: bool) -> None:
        self.torch, self.cuda = torch, cuda

    def __call__(self, fn: Callable[[int], object]) -> tuple[float, str]:
        """(ms per call, 'graph' or 'eager')."""
        torch = self.torch
        for i in range(WARMUP):
            fn(i)
        if not self.cuda:
            t0 = time.perf_counter()
            for i in range(REPEAT):
                fn(i)
            return (time.perf_counter() - t0) * 1e3 / REPEAT, "eager"
        torch.cuda.synchronize()
        try:
            stream = torch.cuda.Stream()
            stream.wait_stream(torch.cuda.current_stream())
            with torch.cuda.stream(stream):
                fn(0)
            torch.cuda.current_stream().wait_stream(stream)
            graph = torch.cuda.CUDAGraph()
            with torch.cuda.graph(graph):
                for i in range(REPEAT):
                    fn(i)
            run, how = graph.replay, "graph"
        except Exception:  # capture refused (an op that syncs, a backend that cannot): eager
            torch.cuda.synchronize()

            def run() -> None:
                for i in range(REPEAT):
                    fn(i)

            how = "eager"
        run()
        times = []
        for _ in range(REPLAYS):
            start = torch.cuda.Event(enable_timing=True)
            end = torch.cuda.Event(enable_timing=True)
            start.record()
            run()
            end.record()
            torch.cuda.synchronize()
            times.append(float(start.elapsed_time(end)) / REPEAT)
        return statistics.median(times), how


def share(value: float, peak: float | None) -> float | None:
    """value / peak, where the catalog has the peak."""
    return round(value / peak, 4) if peak else None


def copies(one_bytes: int, quick: bool) -> int:
    """How many copies of a weight to rotate over so that they do not sit in L2."""
    if quick:
        return 1
    return max(1, min(MAX_COPIES, math.ceil(ROTATE_BYTES / max(one_bytes, 1))))


def fp8_dtype(torch: Any, card: Any) -> Any:
    """The fp8 format the card's tensor cores take: CDNA3 (MI300X / MI325X, gfx942) multiplies
    the fnuz variant, everything else OCP e4m3."""
    if card is not None and family_of(card).name == "cdna3":
        return torch.float8_e4m3fnuz
    return torch.float8_e4m3fn


def scaled_mm(torch: Any, one: Any) -> Callable[[Any, Any], Any]:
    """Per-tensor fp8 GEMM with unit scales and a bf16 output."""
    return lambda a, b: torch._scaled_mm(a, b, scale_a=one, scale_b=one, out_dtype=torch.bfloat16)


def ceilings(torch: Any, dev: str, timer: Timer, card: Any, quick: bool) -> list[Any]:
    """What the card reaches: a large copy and large square GEMMs."""
    rows: list[Any] = []
    n = 2**20 if quick else 2**30  # bf16 elements: 2 GiB
    src = torch.randn(n, device=dev, dtype=torch.bfloat16)
    dst = torch.empty_like(src)
    ms, how = timer(lambda i: dst.copy_(src))
    moved = 2 * src.numel() * src.element_size()
    rows.append({"op": "copy", "bytes": moved, "ms": round(ms, 4), "timed": how,
                 "bytes_per_s": round(moved / ms * 1e3),
                 "bandwidth_share": share(moved / ms * 1e3, card.hbm_bandwidth_bytes_per_s
                                          if card else None)})  # fmt: skip
    src = dst = None
    size = 256 if quick else 8192
    x = torch.randn(size, size, device=dev, dtype=torch.bfloat16)
    w = torch.randn(size, size, device=dev, dtype=torch.bfloat16)
    ms, how = timer(lambda i: x @ w)
    flops = 2 * size**3
    rows.append({"op": "matmul", "dtype": "bf16", "m": size, "ms": round(ms, 4), "timed": how,
                 "tflops": round(flops / ms / 1e9, 1),
                 "flops_share": share(flops / ms * 1e3,
                                      card.bf16_dense_flops if card else None)})  # fmt: skip
    if dev != "cpu":
        try:
            x8 = x.to(fp8_dtype(torch, card))
            w8 = w.to(x8.dtype).t().contiguous().t()
            mm = scaled_mm(torch, torch.tensor(1.0, device=dev))
            ms, how = timer(lambda i: mm(x8, w8))
            rows.append({"op": "matmul", "dtype": "fp8", "m": size, "ms": round(ms, 4),
                         "timed": how, "tflops": round(flops / ms / 1e9, 1),
                         "flops_share": share(flops / ms * 1e3,
                                              card.fp8_dense_flops if card else None)})  # fmt: skip
        except Exception as exc:
            rows.append({"op": "matmul", "dtype": "fp8", "error": str(exc)[:200]})
    return rows


def gemm(torch: Any, dev: str, timer: Timer, card: Any, shapes: Any, tokens: Any,
         quick: bool) -> list[Any]:  # fmt: skip
    """bf16 (and fp8 where it runs) GEMM rows: M x K -> N, weights rotated out of L2."""
    rows: list[Any] = []
    for model, name, k, n in shapes:
        rows += gemm_shape(torch, dev, timer, card, (model, name, k, n), tokens, quick)
        if dev != "cpu":
            torch.cuda.empty_cache()
    return rows


def gemm_shape(torch: Any, dev: str, timer: Timer, card: Any, shape: Any, tokens: Any,
               quick: bool) -> list[Any]:  # fmt: skip
    """One linear layer's rows at every token count."""
    model, name, k, n = shape
    rows = []
    hbm = card.hbm_bandwidth_bytes_per_s if card else None
    mm8 = scaled_mm(torch, torch.tensor(1.0, device=dev)) if dev != "cpu" else None
    ws = [torch.randn(k, n, device=dev, dtype=torch.bfloat16)
          for _ in range(copies(2 * k * n, quick))]  # fmt: skip
    w8s: list[Any] = []
    if mm8 is not None:
        try:
            w8s = [w.to(fp8_dtype(torch, card)).t().contiguous().t() for w in ws]
        except Exception:
            w8s = []
    for m in tokens:
        x = torch.randn(m, k, device=dev, dtype=torch.bfloat16)
        ms, how = timer(lambda i, x=x: x @ ws[i % len(ws)])
        flops, moved = 2 * m * k * n, 2 * (m * k + k * n + m * n)
        peak = card.bf16_dense_flops if card else None
        rows.append(gemm_row(model, name, "bf16", (m, k, n), ms, how, flops, moved, peak, hbm))
        if not w8s or mm8 is None or m % 16:
            continue  # _scaled_mm wants dimensions in multiples of 16
        try:
            x8 = x.to(w8s[0].dtype)
            ms, how = timer(lambda i, x8=x8: mm8(x8, w8s[i % len(w8s)]))
        except Exception as exc:
            rows.append({"model": model, "op": name, "dtype": "fp8", "m": m,
                         "error": str(exc)[:200]})  # fmt: skip
            continue
        moved = m * k + k * n + 2 * m * n  # fp8 inputs, bf16 output
        peak = card.fp8_dense_flops if card else None
        rows.append(gemm_row(model, name, "fp8", (m, k, n), ms, how, flops, moved, peak, hbm))
    return rows


def gemm_row(
    model: str, name: str, dtype: str, shape: tuple[int, int, int], ms: float, how: str,
    flops: int, moved_bytes: int, peak_flops: float | None, hbm_bytes_per_s: float | None,
) -> dict[str, Any]:  # fmt: skip
    """One GEMM measurement: its time, TFLOP/s, and shares of the card's peak FLOPs and HBM."""
    m, k, n = shape
    return {
        "model": model, "op": name, "dtype": dtype, "m": m, "k": k, "n": n, "ms": round(ms, 5),
        "timed": how, "tflops": round(flops / ms / 1e9, 2),
        "flops_share": share(flops / ms * 1e3, peak_flops),
        "bandwidth_share": share(moved_bytes / ms * 1e3, hbm_bytes_per_s),
    }  # fmt: skip


def attention(torch: Any, dev: str, timer: Timer, card: Any, batches: Any, contexts: Any) -> Any:
    """Decode attention rows: KV bytes read per second against HBM peak."""
    import torch.nn.functional as f

    rows = []
    group = ATTENTION_HEADS // ATTENTION_KV_HEADS
    for b in batches:
        for c in contexts:
            q = torch.randn(b, ATTENTION_KV_HEADS, group, HEAD_DIM, device=dev,
                            dtype=torch.bfloat16)  # fmt: skip
            k = torch.randn(b, ATTENTION_KV_HEADS, c, HEAD_DIM, device=dev, dtype=torch.bfloat16)
            v = torch.randn_like(k)
            try:
                ms, how = timer(lambda i, q=q, k=k, v=v: f.scaled_dot_product_attention(q, k, v))
            except Exception as exc:
                rows.append({"batch": b, "context": c, "error": str(exc)[:200]})
                continue
            kv_bytes = 2 * k.numel() * k.element_size()
            rows.append({
                "batch": b, "context": c, "ms": round(ms, 5), "timed": how, "kv_bytes": kv_bytes,
                "bandwidth_share": share(kv_bytes / ms * 1e3,
                                         card.hbm_bandwidth_bytes_per_s if card else None),
            })  # fmt: skip
    return rows


def prefill_attention(torch: Any, dev: str, timer: Timer, card: Any, lengths: Any) -> Any:
    """Causal prefill attention rows: FLOPs per second against the bf16 dense peak."""
    import torch.nn.functional as f

    rows = []
    for s in lengths:
        q = torch.randn(1, ATTENTION_HEADS, s, HEAD_DIM, device=dev, dtype=torch.bfloat16)
        k = torch.randn_like(q)
        v = torch.randn_like(q)
        try:
            ms, how = timer(lambda i, q=q, k=k, v=v: f.scaled_dot_product_attention(
                q, k, v, is_causal=True))  # fmt: skip
        except Exception as exc:
            rows.append({"tokens": s, "error": str(exc)[:200]})
            continue
        flops = 2 * 2 * s * s / 2 * ATTENTION_HEADS * HEAD_DIM
        rows.append({"tokens": s, "heads": ATTENTION_HEADS, "head_dim": HEAD_DIM,
                     "ms": round(ms, 5), "timed": how,
                     "tflops": round(flops / ms / 1e9, 1),
                     "flops_share": share(flops / ms * 1e3,
                                          card.bf16_dense_flops if card else None)})  # fmt: skip
    return rows


def moe(torch: Any, dev: str, timer: Timer, card: Any, layers: Any, tokens: Any,
        quick: bool) -> list[Any]:  # fmt: skip
    """Routed-expert rows: gate/up then down over the experts T tokens reach at random."""
    rows: list[Any] = []
    for layer in layers:
        rows += moe_layer(torch, dev, timer, card, layer, tokens, quick)
        if dev != "cpu":
            torch.cuda.empty_cache()
    return rows


def moe_layer(torch: Any, dev: str, timer: Timer, card: Any, layer: Any, tokens: Any,
              quick: bool) -> list[Any]:  # fmt: skip
    """One routed-expert layer's rows at every token count."""
    name, local, total, top_k, hidden, width = layer
    rows: list[Any] = []
    gen = torch.Generator().manual_seed(0)
    n_copies = copies(2 * local * hidden * 3 * width, quick)
    # Stored (experts, N, K) and multiplied through a transposed view: the column-major layout
    # grouped GEMMs take (torch._grouped_mm, as torchtitan's MoE calls it).
    ups = [torch.randn(local, 2 * width, hidden, device=dev, dtype=torch.bfloat16).transpose(1, 2)
           for _ in range(n_copies)]  # fmt: skip
    downs = [torch.randn(local, hidden, width, device=dev, dtype=torch.bfloat16).transpose(1, 2)
             for _ in range(n_copies)]  # fmt: skip
    grouped = getattr(torch, "_grouped_mm", None) if dev != "cpu" else None
    hbm = card.hbm_bandwidth_bytes_per_s if card else None

    def grouped_layer(i: int, x: Any, offs: Any) -> Any:
        j = i % n_copies
        h = grouped(x, ups[j], offs=offs, out_dtype=torch.bfloat16)
        return grouped(h[:, :width].contiguous(), downs[j], offs=offs, out_dtype=torch.bfloat16)

    def padded_layer(i: int, x: Any) -> Any:
        j = i % n_copies
        return torch.bmm(torch.bmm(x, ups[j])[:, :, :width].contiguous(), downs[j])

    for t in tokens:
        # Each token's top-k distinct experts out of `total`; the rows of local ones count.
        picks = torch.rand(t, total, generator=gen).argsort(dim=1)[:, :top_k]
        counts = torch.bincount(picks.flatten(), minlength=total)[:local]
        reached, routed = int((counts > 0).sum()), int(counts.sum())
        row: dict[str, Any] = {"layer": name, "experts_local": local, "experts": total,
                               "top_k": top_k, "hidden": hidden, "width": width, "tokens": t,
                               "routed": routed, "experts_reached": reached}  # fmt: skip
        if routed == 0:
            rows.append(row)
            continue
        read = 2 * reached * hidden * 3 * width
        kernel = "bmm"
        if grouped is not None:
            offs = torch.cumsum(counts, 0).to(device=dev, dtype=torch.int32)
            x = torch.randn(routed, hidden, device=dev, dtype=torch.bfloat16)
            try:
                ms, how = timer(lambda i, x=x, offs=offs: grouped_layer(i, x, offs))
                kernel = "grouped_mm"
            except Exception as exc:
                row["grouped_mm_error"] = str(exc)[:200]
                grouped = None
        if kernel == "bmm":
            x = torch.randn(local, int(counts.max()), hidden, device=dev, dtype=torch.bfloat16)
            ms, how = timer(lambda i, x=x: padded_layer(i, x))
            read = 2 * local * hidden * 3 * width
        flops = 2 * routed * hidden * 3 * width
        row.update({
            "kernel": kernel, "ms": round(ms, 5), "timed": how, "weight_bytes": read,
            "bandwidth_share": share(read / ms * 1e3, hbm),
            "flops_share": share(flops / ms * 1e3, card.bf16_dense_flops if card else None),
        })  # fmt: skip
        rows.append(row)
    return rows


def launch(torch: Any, dev: str, timer: Timer, kernels: int) -> list[Any]:
    """A tiny kernel's cost, eager and in a graph: us per kernel."""
    x = torch.zeros(16, device=dev)
    rows = []

    def many(i: int) -> None:
        for _ in range(kernels):
            x.add_(1.0)

    ms, how = timer(many)
    rows.append({"kernels": kernels, "timed": how, "us_per_kernel": round(ms * 1e3 / kernels, 3)})
    if dev != "cpu":
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        for _ in range(REPEAT):
            many(0)
        torch.cuda.synchronize()
        us = (time.perf_counter() - t0) * 1e6 / REPEAT / kernels
        rows.append({"kernels": kernels, "timed": "eager", "us_per_kernel": round(us, 3)})
    return rows


def header(
    torch: Any, doc: str | None, device: str, gid: str | None, timing: str, quick: bool
) -> dict[str, Any]:
    """What a result file says of itself: the script, the card, the day, the software."""
    return {
        "what": (doc or "").splitlines()[0],
        "device": device,
        "catalog_id": gid,
        "measured": datetime.date.today().isoformat(),
        "versions": versions(torch),
        "timing": timing,
        "quick": quick,
    }


def versions(torch: Any) -> dict[str, Any]:
    """The software the numbers were taken with."""
    out: dict[str, Any] = {
        "torch": torch.__version__,
        "cuda": torch.version.cuda,
        "hip": getattr(torch.version, "hip", None),
        "cudnn": torch.backends.cudnn.version() if torch.backends.cudnn.is_available() else None,
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
    """Run every operation and write the JSON after each."""
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
    quick = args.quick
    timer = Timer(torch, cuda)
    torch.manual_seed(0)
    out = args.out or ROOT / "benchmarks" / "data" / f"ops-{gid or 'cpu'}.json"
    timing = f"CUDA graph of {REPEAT} calls, median of {REPLAYS} replays"
    result = header(torch, __doc__, name, gid, timing, quick)
    if cuda:
        props = torch.cuda.get_device_properties(0)
        result["multiprocessors"] = props.multi_processor_count
        result["memory_bytes"] = props.total_memory
    sections: dict[str, Callable[[], Any]] = {
        "ceilings": lambda: ceilings(torch, dev, timer, card, quick),
        "gemm": lambda: gemm(torch, dev, timer, card,
                             QUICK["gemm_shapes"] if quick else GEMM_SHAPES,
                             QUICK["gemm_tokens"] if quick else GEMM_TOKENS, quick),
        "attention": lambda: attention(
            torch, dev, timer, card,
            QUICK["attention_batches"] if quick else ATTENTION_BATCHES,
            QUICK["attention_contexts"] if quick else ATTENTION_CONTEXTS),
        "prefill_attention": lambda: prefill_attention(
            torch, dev, timer, card, QUICK["prefill_lengths"] if quick else PREFILL_LENGTHS),
        "moe": lambda: moe(torch, dev, timer, card,
                           QUICK["moe_layers"] if quick else MOE_LAYERS,
                           QUICK["moe_tokens"] if quick else MOE_TOKENS, quick),
        "launch": lambda: launch(torch, dev, timer,
                                 QUICK["launch_kernels"] if quick else LAUNCH_KERNELS),
    }  # fmt: skip
    for section, run in sections.items():
        t0 = time.perf_counter()
        try:
            result[section] = run()
        except Exception:
            result[section] = {"error": traceback.format_exc()[-800:]}
        print(f"{section}: {time.perf_counter() - t0:.1f} s", flush=True)
        out.write_text(json.dumps(result, indent=1) + "\n")
        if cuda:
            torch.cuda.empty_cache()
    summary(result)
    print(f"-> {out}")


def summary(result: dict[str, Any]) -> None:
    """A short table of what was measured."""
    for section in ("ceilings", "gemm", "attention", "prefill_attention", "moe", "launch"):
        rows = result.get(section)
        if not isinstance(rows, list):
            print(section, rows)
            continue
        for row in rows:
            print(section, " ".join(f"{k}={v}" for k, v in row.items() if k != "error"),
                  row.get("error", ""))  # fmt: skip


if __name__ == "__main__":
    main()
