"""A split-KV decode attention kernel in Triton for the step floor (benchmarks/step_floor.py).

The kind of kernel engines decode with (flash-decoding: Dao et al., "Flash-Decoding for
long-context inference", 2023; SGLang's and vLLM's Triton decode backends work the same way):
one program per (sequence, KV head, chunk of the context) reads its chunk of K and V once for
every query head of the GQA group (the group's queries packed as the rows of one tile), keeps
a running max and sum, and writes the chunk's output and log-sum-exp; a second kernel combines
the chunks. Written here from the published algorithm, for measurement only.

Needs triton (shipped with CUDA builds of torch). `python benchmarks/triton_decode.py` checks it
against PyTorch's SDPA (on a CPU under TRITON_INTERPRET=1).
"""

from __future__ import annotations

import math
from typing import Any

import triton
import triton.language as tl

# Tokens a program reads per loop iteration.
BLOCK_TOKENS = 64
# tl.dot multiplies tiles of at least 16 rows: a GQA group is padded to this many.
MIN_DOT_ROWS = 16


@triton.jit
def _chunk_kernel(
    q_ptr, k_ptr, v_ptr, o_ptr, lse_ptr,
    stride_qb, stride_qh,
    stride_kb, stride_kh, stride_kt,
    stride_ob, stride_oh, stride_os,
    stride_lb, stride_lh,
    context, chunk, scale,
    GROUP: tl.constexpr, GROUP_ROWS: tl.constexpr, HEAD_DIM: tl.constexpr,
    BLOCK: tl.constexpr,
):  # fmt: skip
    """One (sequence, KV head, chunk): the chunk's attention output and log-sum-exp for each
    query head of the group."""
    b = tl.program_id(0)
    kv = tl.program_id(1)
    c = tl.program_id(2)
    rows = tl.arange(0, GROUP_ROWS)
    dims = tl.arange(0, HEAD_DIM)
    live = rows < GROUP
    heads = kv * GROUP + rows
    q = tl.load(
        q_ptr + b * stride_qb + heads[:, None] * stride_qh + dims[None, :],
        mask=live[:, None],
        other=0.0,
    )
    start = c * chunk
    end = tl.minimum(start + chunk, context)
    m = tl.full([GROUP_ROWS], float("-inf"), tl.float32)
    total = tl.zeros([GROUP_ROWS], tl.float32)
    acc = tl.zeros([GROUP_ROWS, HEAD_DIM], tl.float32)
    base = b * stride_kb + kv * stride_kh
    for t0 in range(start, end, BLOCK):
        t = t0 + tl.arange(0, BLOCK)
        inside = t < end
        offsets = base + t[:, None] * stride_kt + dims[None, :]
        k = tl.load(k_ptr + offsets, mask=inside[:, None], other=0.0)
        s = tl.dot(q, tl.trans(k)) * scale
        s = tl.where(inside[None, :], s, float("-inf"))
        m_new = tl.maximum(m, tl.max(s, 1))
        p = tl.exp(s - m_new[:, None])
        alpha = tl.exp(m - m_new)
        total = total * alpha + tl.sum(p, 1)
        v = tl.load(v_ptr + offsets, mask=inside[:, None], other=0.0)
        acc = acc * alpha[:, None] + tl.dot(p.to(v.dtype), v)
        m = m_new
    out = acc / total[:, None]
    o = o_ptr + b * stride_ob + heads[:, None] * stride_oh + c * stride_os + dims[None, :]
    tl.store(o, out, mask=live[:, None])
    tl.store(lse_ptr + b * stride_lb + heads * stride_lh + c, m + tl.log(total), mask=live)


@triton.jit
def _combine_kernel(
    o_ptr, lse_ptr, out_ptr,
    stride_ob, stride_oh, stride_os,
    stride_lb, stride_lh,
    stride_xb, stride_xh,
    chunks,
    CHUNKS: tl.constexpr, HEAD_DIM: tl.constexpr,
):  # fmt: skip
    """One (sequence, query head): the chunks' outputs weighted by their share of the sum."""
    b = tl.program_id(0)
    h = tl.program_id(1)
    c = tl.arange(0, CHUNKS)
    dims = tl.arange(0, HEAD_DIM)
    live = c < chunks
    lse = tl.load(lse_ptr + b * stride_lb + h * stride_lh + c, mask=live, other=float("-inf"))
    w = tl.exp(lse - tl.max(lse, 0))
    w = w / tl.sum(w, 0)
    o = tl.load(
        o_ptr + b * stride_ob + h * stride_oh + c[:, None] * stride_os + dims[None, :],
        mask=live[:, None],
        other=0.0,
    )
    out = tl.sum(o * w[:, None], 0)
    tl.store(out_ptr + b * stride_xb + h * stride_xh + dims, out.to(out_ptr.dtype.element_ty))


class DecodeAttention:
    """Decode attention for B sequences, one query token each, over contiguous (B, KV heads,
    context, head dim) caches, split into `chunks` per KV head; buffers allocated once, so
    that a CUDA graph can capture it."""

    def __init__(
        self, torch: Any, batch: int, heads: int, kv_heads: int, head_dim: int, context: int,
        chunks: int, device: str, dtype: Any = None,
    ) -> None:  # fmt: skip
        dtype = dtype or torch.bfloat16
        self.torch = torch
        self.batch, self.heads, self.kv_heads = batch, heads, kv_heads
        self.head_dim, self.context, self.chunks = head_dim, context, chunks
        self.chunk = -(-context // chunks)
        self.group = heads // kv_heads
        self.rows = max(MIN_DOT_ROWS, triton.next_power_of_2(self.group))
        self.partial = torch.empty(batch, heads, chunks, head_dim, device=device,
                                   dtype=torch.float32)  # fmt: skip
        self.lse = torch.empty(batch, heads, chunks, device=device, dtype=torch.float32)
        self.out = torch.empty(batch, heads, head_dim, device=device, dtype=dtype)
        self.scale = 1.0 / math.sqrt(head_dim)

    def __call__(self, q: Any, k: Any, v: Any) -> Any:
        """q: (B, heads, head dim); k, v: (B, KV heads, context, head dim) with unit stride
        in the head dim. Returns (B, heads, head dim) in the buffers' dtype."""
        o, lse, out = self.partial, self.lse, self.out
        _chunk_kernel[(self.batch, self.kv_heads, self.chunks)](
            q, k, v, o, lse,
            q.stride(0), q.stride(1),
            k.stride(0), k.stride(1), k.stride(2),
            o.stride(0), o.stride(1), o.stride(2),
            lse.stride(0), lse.stride(1),
            self.context, self.chunk, self.scale,
            GROUP=self.group, GROUP_ROWS=self.rows, HEAD_DIM=self.head_dim,
            BLOCK=BLOCK_TOKENS,
        )  # fmt: skip
        _combine_kernel[(self.batch, self.heads)](
            o, lse, out,
            o.stride(0), o.stride(1), o.stride(2),
            lse.stride(0), lse.stride(1),
            out.stride(0), out.stride(1),
            self.chunks,
            CHUNKS=triton.next_power_of_2(self.chunks), HEAD_DIM=self.head_dim,
        )  # fmt: skip
        return out


def check(torch: Any, device: str) -> float:
    """Relative error against SDPA on a small GQA case with three chunks (fp16 on a CPU:
    Triton's interpreter does not load bf16)."""
    b, heads, kv_heads, d, ctx = 2, 8, 2, 64, 200
    dtype = torch.bfloat16 if device == "cuda" else torch.float16
    q = torch.randn(b, heads, d, device=device, dtype=dtype)
    k = torch.randn(b, kv_heads, ctx, d, device=device, dtype=dtype)
    v = torch.randn_like(k)
    mine = DecodeAttention(torch, b, heads, kv_heads, d, ctx, 3, device, dtype)(q, k, v).float()
    group = heads // kv_heads
    ref = torch.nn.functional.scaled_dot_product_attention(
        q.view(b, kv_heads, group, d).float(), k.float(), v.float()
    ).reshape(b, heads, d)
    return float((mine - ref).norm() / ref.norm())


if __name__ == "__main__":
    import torch

    dev = "cuda" if torch.cuda.is_available() else "cpu"
    print(f"relative error against SDPA: {check(torch, dev):.2e}")
