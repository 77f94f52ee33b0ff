"""Whole decode steps with no engine around them, on the GPU at hand: the floor a step can reach.

Each model is a stack of its decoder layers with random weights, as one GPU of its deployment
holds them, run for B sequences at C tokens of context, the whole step captured in one CUDA graph
and timed by replaying it (CUDA events, the median of REPLAYS replays):

- per layer: RMSNorm, the QKV GEMM, a rotary-embedding stand-in (one elementwise pass over q and
  k), the new token's K and V written into a contiguous cache, decode attention, the O GEMM and
  the residual, RMSNorm, then the MLP (gate/up GEMM, SiLU x up, down GEMM) or the routed experts
  (router GEMM, softmax top-k, tokens sorted by expert, two grouped GEMMs over the experts
  reached (`torch._grouped_mm`), the weighted sum scattered back) and the residual;
- the final norm, the lm_head over the vocabulary (this GPU's share under TP) and an argmax.

Decode attention runs PyTorch's FlashAttention kernel with the KV split into chunks where B x KV
heads would leave SMs idle, the chunks combined by their log-sum-exp (flash-decoding, as the
engines' decode kernels do); `--no-split` keeps one chunk, the plain SDPA call of the first floor
(benchmarks/data/step-floor.json). `--attention-kernel triton` runs the flash-decoding kernel of
benchmarks/triton_decode.py instead (one kernel over the chunks, the GQA group's queries in one
tile, and a combine kernel: the engines' kind), `flex` FlexAttention's decoding kernel. A TP
share runs no all-reduce: that is the link's, priced apart. fp8 runs the dense linears as
per-tensor w8a8 (`torch._scaled_mm`, the activations cast each GEMM), lm_head and experts in
bf16.

`--compile` also times each whole step with its layers through torch.compile, which fuses the
elementwise passes into a few Triton kernels as the engines' compiled model code does (the GEMMs
stay cuBLAS calls). `--variants` times each stack with parts left out, to place its time among
its operations by difference. `--attention` times the decode attention alone, one layer, by
batch, context and head size (PROBE_*, `--probe-heads`, `--probe-contexts`, `--probe-batches`);
`--stacks none` runs only that.

An engine adds scheduling, sampling and its own kernels' overheads to these steps. The results
are written to benchmarks/data/step-floors-<card>.json with the card, driver and library
versions; `python benchmarks/step_time.py` holds the step model to them.

    pip install ".[gpu]"          # torch, the optional extra
    python benchmarks/step_floor.py [--quick] [--compile] [--variants] [--attention]
        [--attention-kernel sdpa|flex|triton] [--out FILE]
"""

from __future__ import annotations

import argparse
import gc
import json
import math
import statistics
import sys
import time
import traceback
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "benchmarks"))
from gpu_ops import header  # noqa: E402


@dataclass(frozen=True)
class Stack:
    """One GPU's share of a model's decoder: per-GPU head counts and widths."""

    name: str
    model: str  # the Hub id whose config.json gives these figures
    tp: int
    layers: int
    hidden: int
    heads: int
    kv_heads: int
    head_dim: int
    intermediate: int  # the dense MLP's width on this GPU (0: MoE)
    vocab: int  # lm_head rows on this GPU
    experts: int = 0
    top_k: int = 0
    expert_width: int = 0
    dtype: str = "bf16"


# From each model's config.json (tests/data/models/<id>/config.json): Llama-3.1-8B (32 layers,
# hidden 4096, 32 / 8 heads of 128, MLP 14336, vocab 128256); Llama-3.1-70B (80 layers, hidden
# 8192, 64 / 8 heads, MLP 28672) as one GPU of TP 8 holds it; Qwen3-30B-A3B (48 layers, hidden
# 2048, 32 / 4 heads of 128, 128 experts of 768, top-8, vocab 151936).
STACKS = (
    Stack("llama-3.1-8b", "meta-llama/Llama-3.1-8B", 1, 32, 4096, 32, 8, 128, 14336, 128256),
    Stack("llama-3.1-8b-fp8", "meta-llama/Llama-3.1-8B", 1, 32, 4096, 32, 8, 128, 14336, 128256,
          dtype="fp8"),
    Stack("llama-3.1-70b-tp8", "meta-llama/Llama-3.1-70B", 8, 80, 8192, 8, 1, 128, 3584, 16032),
    Stack("qwen3-30b-a3b", "Qwen/Qwen3-30B-A3B", 1, 48, 2048, 32, 4, 128, 0, 151936,
          experts=128, top_k=8, expert_width=768),
)  # fmt: skip
BATCHES = (1, 16, 64, 256)
CONTEXT_TOKENS = 2000
QUICK_STACK = Stack("tiny", "none", 1, 2, 256, 4, 2, 64, 512, 1000)
QUICK_MOE = Stack("tiny-moe", "none", 1, 2, 256, 4, 2, 64, 0, 1000, experts=8, top_k=2,
                  expert_width=128)  # fmt: skip
WARMUP, REPLAYS = 3, 20
# Parts left out, to place a step's time among its operations by difference (--variants).
VARIANTS = (
    ("attention",),
    ("elementwise",),
    ("attention", "elementwise"),
    ("ffn",),
    ("attention", "elementwise", "ffn"),
)
VARIANT_BATCHES = (1, 64)
# KV caches beyond this many bytes rotate over fewer buffers than layers (each still far larger
# than the L2 cache at the batches that reach it), so that the largest batches fit beside the
# weights.
KV_BUDGET_BYTES = 40 * 2**30
# Split the KV into chunks until B x KV heads x chunks reaches this many blocks (132 SMs on an
# H200, two blocks each), each chunk at least MIN_CHUNK_TOKENS tokens.
TARGET_BLOCKS = 264
# Decode attention kernels: PyTorch's FlashAttention in chunks combined by log-sum-exp,
# FlexAttention's decoding kernel, and the flash-decoding kernel of triton_decode.py.
ATTENTION_KERNELS = ("sdpa", "flex", "triton")
MIN_CHUNK_TOKENS = 256


class Step:
    """Random weights and caches for one stack at one batch, and its forward pass."""

    def __init__(
        self, torch: Any, stack: Stack, batch: int, context: int, split: bool,
        leave_out: frozenset[str] = frozenset(), compiled: bool = False, kernel: str = "sdpa",
    ) -> None:  # fmt: skip
        self.t, self.s, self.b, self.ctx = torch, stack, batch, context
        self.leave_out = leave_out
        self.kernel = kernel
        self.flex: Any = None
        if kernel == "flex":
            from torch.nn.attention.flex_attention import flex_attention

            # inside a compiled layer dynamo compiles it with the rest; alone, compile it
            self.flex = flex_attention if compiled else torch.compile(flex_attention, dynamic=False)
        # torch.compile fuses a layer's elementwise passes into a few Triton kernels, as the
        # engines' compiled model code does; its GEMMs stay cuBLAS calls
        self.run_layer = (
            torch.compile(self.layer_step, dynamic=False) if compiled else self.layer_step
        )
        dev, bf = "cuda", torch.bfloat16
        self.fp8 = torch.float8_e4m3fn
        s = stack
        q_out = (s.heads + 2 * s.kv_heads) * s.head_dim

        def w(k: int, n: int) -> Any:
            m = torch.randn(n, k, device=dev, dtype=bf) / math.sqrt(k)
            if s.dtype == "fp8":
                return m.to(self.fp8).t()  # column-major, as _scaled_mm takes it
            return m.t()

        self.layers = []
        for _ in range(s.layers):
            layer = {"qkv": w(s.hidden, q_out), "o": w(s.heads * s.head_dim, s.hidden),
                     "n1": torch.ones(s.hidden, device=dev, dtype=bf),
                     "n2": torch.ones(s.hidden, device=dev, dtype=bf)}  # fmt: skip
            if s.experts:
                layer["router"] = torch.randn(s.hidden, s.experts, device=dev, dtype=bf)
                # (experts, N, K) multiplied through a transposed view: the column-major
                # layout grouped GEMMs take
                layer["up"] = (torch.randn(s.experts, 2 * s.expert_width, s.hidden, device=dev,
                                           dtype=bf) * 0.02).transpose(1, 2)  # fmt: skip
                layer["down"] = (torch.randn(s.experts, s.hidden, s.expert_width, device=dev,
                                             dtype=bf) * 0.02).transpose(1, 2)  # fmt: skip
            else:
                layer["gate_up"] = w(s.hidden, 2 * s.intermediate)
                layer["down"] = w(s.intermediate, s.hidden)
            self.layers.append(layer)
        self.head = (torch.randn(s.vocab, s.hidden, device=dev, dtype=bf) * 0.02).t()
        self.norm = torch.ones(s.hidden, device=dev, dtype=bf)
        kv_layer = 2 * batch * s.kv_heads * context * s.head_dim * 2
        buffers = max(2, min(s.layers, KV_BUDGET_BYTES // max(kv_layer, 1)))
        self.kv = [
            (torch.randn(batch, s.kv_heads, context, s.head_dim, device=dev, dtype=bf),
             torch.randn(batch, s.kv_heads, context, s.head_dim, device=dev, dtype=bf))
            for _ in range(buffers)
        ]  # fmt: skip
        self.kv_buffers = buffers
        self.chunks = 1
        if split and kernel != "flex":
            # chunks that divide the context, so that each is a view of the cache
            want = min(math.ceil(TARGET_BLOCKS / (batch * s.kv_heads)), context // MIN_CHUNK_TOKENS)
            self.chunks = max(n for n in range(1, max(want, 1) + 1) if context % n == 0)
        self.triton: Any = None
        if kernel == "triton":
            from triton_decode import DecodeAttention

            run = DecodeAttention(torch, batch, s.heads, s.kv_heads, s.head_dim, context,
                                  self.chunks, dev)  # fmt: skip
            # a compiled layer calls it outside the traced graph (one graph break)
            self.triton = torch.compiler.disable(run.__call__) if compiled else run
        self.x = torch.randn(batch, s.hidden, device=dev, dtype=bf)
        self.rope = torch.randn(1, (s.heads + s.kv_heads) * s.head_dim, device=dev, dtype=bf)
        self.pos = context - 1  # the slot the new token's K and V are written to
        self.one = torch.tensor(1.0, device=dev)

    def linear(self, x: Any, w: Any) -> Any:
        """x @ w in the stack's dtype (fp8: per-tensor, unit scales, padded to 16 rows)."""
        t = self.t
        if self.s.dtype != "fp8":
            return x @ w
        rows = x.shape[0]
        pad = -rows % 16
        x8 = (t.nn.functional.pad(x, (0, 0, 0, pad)) if pad else x).to(self.fp8)
        out = t._scaled_mm(x8, w, scale_a=self.one, scale_b=self.one, out_dtype=t.bfloat16)
        return out[:rows]

    def attention(self, q: Any, k_cache: Any, v_cache: Any) -> Any:
        """One query token per sequence over the cache: (B, heads x head_dim)."""
        t, s, b = self.t, self.s, self.b
        group = s.heads // s.kv_heads
        if self.triton is not None:
            out = self.triton(q.view(b, s.heads, s.head_dim), k_cache, v_cache)
            return out.reshape(b, s.heads * s.head_dim)
        if self.flex is not None:
            # one query head group per KV head (head h reads KV head h // group)
            out = self.flex(q.view(b, s.heads, 1, s.head_dim), k_cache, v_cache, enable_gqa=True)
            return out.reshape(b, s.heads * s.head_dim)
        q = q.view(b, s.kv_heads, group, s.head_dim)
        if self.chunks == 1:
            out = t.nn.functional.scaled_dot_product_attention(q, k_cache, v_cache)
            return out.reshape(b, s.heads * s.head_dim)
        n, c = self.chunks, self.ctx // self.chunks
        # each KV head's context as n heads of c tokens: a view of the contiguous cache
        k = k_cache.view(b, s.kv_heads * n, c, s.head_dim)
        v = v_cache.view(b, s.kv_heads * n, c, s.head_dim)
        qn = q.unsqueeze(2).expand(b, s.kv_heads, n, group, s.head_dim)
        qn = qn.reshape(b, s.kv_heads * n, group, s.head_dim)
        out, lse = t.ops.aten._scaled_dot_product_flash_attention(qn, k, v)[:2]
        out = out.view(b, s.kv_heads, n, group, s.head_dim).float()
        weight = t.softmax(lse.view(b, s.kv_heads, n, group, 1), dim=2)
        return (out * weight).sum(2).to(t.bfloat16).reshape(b, s.heads * s.head_dim)

    def experts(self, x: Any, layer: dict[str, Any]) -> Any:
        """Route each token to its top-k experts and run them as two grouped GEMMs."""
        t, s = self.t, self.s
        probs = (x @ layer["router"]).float().softmax(-1)
        weights, ids = probs.topk(s.top_k, dim=-1)
        flat = ids.flatten()
        order = flat.argsort(stable=True)
        token = order // s.top_k
        counts = t.zeros(s.experts, device=x.device, dtype=t.int32)
        counts.scatter_add_(0, flat.to(t.int64), t.ones_like(flat, dtype=t.int32))
        offs = counts.cumsum(0).to(t.int32)
        rows = x.index_select(0, token)
        h = t._grouped_mm(rows, layer["up"], offs=offs, out_dtype=t.bfloat16)
        act = h[:, : s.expert_width]
        if "elementwise" not in self.leave_out:
            act = t.nn.functional.silu(act) * h[:, s.expert_width :]
        out = t._grouped_mm(act, layer["down"], offs=offs, out_dtype=t.bfloat16)
        if "elementwise" not in self.leave_out:
            out = out * weights.flatten()[order].unsqueeze(1).to(t.bfloat16)
        return t.zeros_like(x).index_add_(0, token, out)

    def layer_step(self, x: Any, layer: dict[str, Any], k_cache: Any, v_cache: Any) -> Any:
        """One decoder layer over the step's hidden states (the parts in `leave_out` left
        out: "attention" the attention kernel, "elementwise" the norms, rotary stand-in, KV
        write, activation and residual adds, "ffn" the MLP or routed experts)."""
        t, s, skip = self.t, self.s, self.leave_out
        keep = "elementwise" not in skip
        qk = (s.heads + s.kv_heads) * s.head_dim
        qkv = self.linear(self.rms(x, layer["n1"]), layer["qkv"])
        qk_rot = qkv[:, :qk] * self.rope if keep else qkv[:, :qk]
        q = qk_rot[:, : s.heads * s.head_dim]
        if keep:
            k = qk_rot[:, s.heads * s.head_dim :].view(self.b, s.kv_heads, 1, s.head_dim)
            v = qkv[:, qk:].view(self.b, s.kv_heads, 1, s.head_dim)
            k_cache[:, :, self.pos : self.pos + 1].copy_(k)
            v_cache[:, :, self.pos : self.pos + 1].copy_(v)
        attended = q if "attention" in skip else self.attention(q, k_cache, v_cache)
        x = self.add(x, self.linear(attended, layer["o"]))
        if "ffn" in skip:
            return x
        h = self.rms(x, layer["n2"])
        if s.experts:
            return self.add(x, self.experts(h, layer))
        gu = self.linear(h, layer["gate_up"])
        act = gu[:, : s.intermediate]
        if keep:
            act = t.nn.functional.silu(act) * gu[:, s.intermediate :]
        return self.add(x, self.linear(act, layer["down"]))

    def rms(self, x: Any, weight: Any) -> Any:
        """RMSNorm, unless elementwise passes are left out."""
        if "elementwise" in self.leave_out:
            return x
        return self.t.nn.functional.rms_norm(x, (self.s.hidden,), weight)

    def add(self, x: Any, y: Any) -> Any:
        """The residual add, unless elementwise passes are left out."""
        return y if "elementwise" in self.leave_out else x + y

    def forward(self) -> Any:
        """One decode step: the next token of each sequence."""
        x = self.x
        for i, layer in enumerate(self.layers):
            k_cache, v_cache = self.kv[i % self.kv_buffers]
            x = self.run_layer(x, layer, k_cache, v_cache)
        logits = self.rms(x, self.norm) @ self.head
        return logits.argmax(-1)


def split_error(torch: Any) -> float:
    """Relative error of the chunked attention against one SDPA call on the same cache: the
    chunks' log-sum-exp combine must give the same output (bf16 rounding, ~1e-3)."""
    stack = Stack("check", "none", 1, 1, 256, 8, 2, 64, 256, 256)
    split = Step(torch, stack, 2, 1024, split=True)
    whole = Step(torch, stack, 2, 1024, split=False)
    q = torch.randn(2, stack.heads * stack.head_dim, device="cuda", dtype=torch.bfloat16)
    k, v = split.kv[0]
    a = split.attention(q, k, v).float()
    b = whole.attention(q, k, v).float()
    return float((a - b).norm() / b.norm())


# Decode attention alone, chunked as above (--attention): (name, heads, KV heads, head dim) at
# every batch and context, the KV bytes read per second against the peak.
PROBE_HEADS = (
    ("gqa-128", 64, 8, 128),
    ("gqa-64", 64, 8, 64),
    ("llama-3.1-8b", 32, 8, 128),  # the 8B stack's heads
    ("llama-3.1-70b-tp8", 8, 1, 128),  # one GPU's heads of the 70B at TP 8
)
PROBE_BATCHES = (1, 2, 4, 8, 16, 64)
PROBE_CONTEXTS = (2000, 8000, 32000)


def attention_probe(
    torch: Any,
    peak_bytes_per_s: float | None,
    heads: tuple[str, ...] = ("gqa-128", "gqa-64"),
    contexts: tuple[int, ...] = PROBE_CONTEXTS,
    batches: tuple[int, ...] = PROBE_BATCHES,
    kernel: str = "sdpa",
) -> list[dict[str, Any]]:
    """Decode attention over a contiguous cache, one layer, captured in a graph, through
    `kernel` (ATTENTION_KERNELS)."""
    rows = []
    for name, q_heads, kv_heads, head_dim in PROBE_HEADS:
        if name not in heads:
            continue
        for context in contexts:
            for batch in batches:
                stack = Stack(name, "none", 1, 1, 256, q_heads, kv_heads, head_dim, 256, 256)
                torch._dynamo.reset()
                try:
                    rows.append(probe_one(torch, stack, batch, context, peak_bytes_per_s, kernel))
                except Exception:
                    rows.append({"heads": name, "batch": batch, "context": context,
                                 "error": traceback.format_exc()[-600:]})  # fmt: skip
                gc.collect()
                torch.cuda.empty_cache()
    return rows


def probe_one(
    torch: Any,
    stack: Stack,
    batch: int,
    context: int,
    peak_bytes_per_s: float | None,
    kernel: str = "sdpa",
) -> dict[str, Any]:
    """One batch and context of attention_probe."""
    step = Step(torch, stack, batch, context, split=True, kernel=kernel)
    k, v = step.kv[0]
    q = torch.randn(batch, stack.heads * stack.head_dim, device="cuda", dtype=torch.bfloat16)
    ms = time_step(torch, _Probe(lambda: step.attention(q, k, v)))
    kv_bytes = 2 * k.numel() * k.element_size()
    share = kv_bytes / ms * 1e3 / peak_bytes_per_s if peak_bytes_per_s else None
    return {
        "heads": stack.name, "kernel": kernel, "batch": batch,
        "context": context, "kv_chunks": step.chunks,
        "ms": round(ms, 4), "kv_bytes": kv_bytes,
        "bandwidth_share": round(share, 3) if share is not None else None,
    }  # fmt: skip


class Forward(Protocol):
    """What time_step captures: one forward pass."""

    def forward(self) -> Any: ...


@dataclass
class _Probe:
    """A callable as a Forward."""

    forward: Callable[[], Any]


def time_step(torch: Any, step: Forward) -> float:
    """The step captured in one CUDA graph: median ms over REPLAYS replays."""
    stream = torch.cuda.Stream()
    stream.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(stream):
        for _ in range(WARMUP):
            step.forward()
    torch.cuda.current_stream().wait_stream(stream)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        step.forward()
    graph.replay()
    times = []
    for _ in range(REPLAYS):
        start = torch.cuda.Event(enable_timing=True)
        end = torch.cuda.Event(enable_timing=True)
        start.record()
        graph.replay()
        end.record()
        torch.cuda.synchronize()
        times.append(float(start.elapsed_time(end)))
    return statistics.median(times)


def main() -> None:
    """Time every stack at every batch and write the JSON after each stack."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="tiny stacks: a self-check")
    parser.add_argument("--no-split", action="store_true", help="one KV chunk (plain SDPA)")
    parser.add_argument("--out", type=Path, default=None)
    parser.add_argument(
        "--compile",
        action="store_true",
        help="also time each stack's whole step with its layers compiled, at VARIANT_BATCHES",
    )
    parser.add_argument("--stacks", default="", help="comma list of stack names (default all)")
    parser.add_argument(
        "--attention", action="store_true", help="also time chunked decode attention alone"
    )
    parser.add_argument(
        "--attention-kernel",
        choices=ATTENTION_KERNELS,
        default="sdpa",
        help="decode attention: chunked SDPA, FlexAttention's decoding kernel, or the "
        "flash-decoding Triton kernel of benchmarks/triton_decode.py",
    )
    parser.add_argument(
        "--probe-heads", default="gqa-128,gqa-64", help="comma list of PROBE_HEADS names"
    )
    parser.add_argument("--probe-contexts", default="", help="comma list (default PROBE_CONTEXTS)")
    parser.add_argument("--probe-batches", default="", help="comma list (default PROBE_BATCHES)")
    parser.add_argument(
        "--batches", default="", help="comma list of batches for every plan (default BATCHES)"
    )
    parser.add_argument(
        "--variants",
        action="store_true",
        help="also time each stack with parts left out (VARIANTS), at VARIANT_BATCHES",
    )
    args = parser.parse_args()
    try:
        import torch
    except ImportError:
        sys.exit("step_floor.py needs torch: pip install '.[gpu]'")
    if not torch.cuda.is_available():
        sys.exit("step_floor.py needs a GPU (CUDA graphs)")
    from rows import catalog_gpu

    name = torch.cuda.get_device_name()
    gid = catalog_gpu(None, name, {})
    out = args.out or ROOT / "benchmarks" / "data" / f"step-floors-{gid or 'gpu'}.json"
    stacks: tuple[Stack, ...] = (QUICK_STACK, QUICK_MOE) if args.quick else STACKS
    if args.stacks:
        stacks = tuple(s for s in stacks if s.name in args.stacks.split(","))
    batches: tuple[int, ...] = (1, 4) if args.quick else BATCHES
    if args.batches:
        batches = tuple(int(b) for b in args.batches.split(","))
    context = 512 if args.quick else CONTEXT_TOKENS
    timing = f"one step in a CUDA graph, median of {REPLAYS} replays"
    result = header(torch, __doc__, name, gid, timing, args.quick)
    result.update({"context_tokens": context, "floors": []})
    torch.manual_seed(0)
    result["split_check_relative_error"] = split_error(torch)
    print(
        f"chunked attention vs one call: relative error {result['split_check_relative_error']:.2e}"
    )
    for stack in stacks:
        few = batches if args.quick or args.batches else VARIANT_BATCHES
        plans: list[tuple[tuple[str, ...], tuple[int, ...], bool]] = [((), batches, False)]
        if args.compile:
            plans.append(((), few, True))
        if args.variants:
            plans += [(v, few, False) for v in VARIANTS]
        for leave_out, plan_batches, compiled in plans:
            row: dict[str, Any] = {**stack.__dict__, "leave_out": list(leave_out),
                                   "split_kv": not args.no_split, "compiled": compiled,
                                   "attention_kernel": args.attention_kernel,
                                   "step_ms": {}, "kv_chunks": {}}  # fmt: skip
            t0 = time.perf_counter()
            for batch in plan_batches:
                step = None
                if compiled:
                    torch._dynamo.reset()  # a fresh cache: each Step is a new `self`
                try:
                    step = Step(torch, stack, batch, context, split=not args.no_split,
                                leave_out=frozenset(leave_out), compiled=compiled,
                                kernel=args.attention_kernel)  # fmt: skip
                    row["step_ms"][str(batch)] = round(time_step(torch, step), 3)
                    row["kv_chunks"][str(batch)] = step.chunks
                except Exception:
                    row.setdefault("errors", {})[str(batch)] = traceback.format_exc()[-600:]
                step = None
                gc.collect()  # a Step holds itself through its bound layer function
                torch.cuda.empty_cache()
            result["floors"].append(row)
            out.write_text(json.dumps(result, indent=1) + "\n")
            label = stack.name + "".join(f" -{part}" for part in leave_out)
            label += " (compiled)" if compiled else ""
            print(f"{label}: {row['step_ms']} ({time.perf_counter() - t0:.1f} s)", flush=True)
            for batch, error in row.get("errors", {}).items():
                print(f"  B={batch}: {error}", flush=True)
    if args.attention:
        from planner.sources.presets import find_gpu

        peak = find_gpu(gid).hbm_bandwidth_bytes_per_s if gid else None
        contexts = tuple(int(c) for c in args.probe_contexts.split(",") if c) or PROBE_CONTEXTS
        probe_batches = tuple(int(b) for b in args.probe_batches.split(",") if b) or PROBE_BATCHES
        result["attention_probe"] = attention_probe(
            torch,
            peak,
            tuple(args.probe_heads.split(",")),
            contexts,
            probe_batches,
            args.attention_kernel,
        )
        out.write_text(json.dumps(result, indent=1) + "\n")
        for row in result["attention_probe"]:
            print(" ".join(f"{k}={v}" for k, v in row.items()), flush=True)
    print(f"-> {out}")


if __name__ == "__main__":
    main()
