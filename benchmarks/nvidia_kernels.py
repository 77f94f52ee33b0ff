"""NVIDIA's published kernel times (H200, B200) against the step model's NVIDIA constants.

benchmarks/data/nvidia-kernels.jsonl holds rows of the per-kernel tables NVIDIA's
aiconfigurator collects with vLLM 0.24.0's own kernels on an H200 SXM and a B200 SXM, in CUDA
graphs (ai-dynamo/aiconfigurator @095f58a5, aic-core/src/aiconfigurator_core/systems/data/
{h200_sxm,b200_sxm}/{gemm,moe,comm,attention,mla}/vllm/0.24.0/*.parquet): dense GEMMs, fused
MoE layers, the custom all-reduce, decode and prefill attention and the MLA decode module; SGLang
0.5.14's fused MoE layers at decode ({h200_sxm,b200_sxm}/moe/sglang/0.5.14); and the A100 SXM's
custom all-reduce and one-token fused MoE layers (a100_sxm/{comm,moe}/vllm/0.14.0, the newest
release timed there); on two PCIe-only servers NCCL's all-reduce (l40s/comm/nccl/2.27.3,
rtx_pro_6000_server/comm/nccl/2.29.2), the dense GEMMs and gpt-oss's Marlin MoE layers
({l40s,rtx_pro_6000_server}/{gemm,moe}/vllm/0.24.0); and the B300's dense GEMMs
(b300_sxm/gemm/vllm/0.24.0); and DeepEP's dispatch and combine inside one node under SGLang
0.5.12 ({b200_sxm,b300_sxm,gb200}/comm/sglang/0.5.12). This
prints what planner/core/step/family.py (and comm.py) takes from them, each beside the
planner's figure:

- the decode GEMMs' fixed cost and streaming share (bf16 at 1 and 8 tokens), on the H200 (to
  set beside Hopper's constants, measured on an H200 of our own) and on the B200;
- the share of the tensor-core rate dense GEMMs reach at 16,384 tokens (also on the two PCIe
  servers and the B300: Ada's, SM120's and Blackwell Ultra's own), and the fused MoE
  layers' at 8,192-32,768 tokens as a function of the expert width a GPU holds;
- a fused MoE layer's fixed cost at 1-4 tokens (vLLM's kernels, and SGLang 0.5.14's), the
  A100's at one token with its stream share, and the MXFP4 experts' streaming share (the PCIe
  cards' Marlin kernel too);
- the all-reduce's small-message latency and its bytes' share of the NVLink rate (H200, B200,
  A100), and NCCL's over PCIe as a fixed time, a latency a peer and a share of the link;
- the MLA decode module's extra time with 128 query heads over 16, against the model's, and
  its time at TP 8 beyond the parts the model prices;
- prefill attention's share by head size and keys a query sees;
- decode attention's fixed cost and streaming share, bf16 and fp8 KV;
- DeepEP's low-latency and normal kernels inside one node as a fixed time and a share of
  NVLink.

    python benchmarks/nvidia_kernels.py [--rows FILE]
    python benchmarks/nvidia_kernels.py --extract DATA_DIR   # re-extract (pandas, pyarrow)
"""

from __future__ import annotations

import argparse
import json
import statistics
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import numpy as np

from planner.core.step import comm, family
from planner.core.step.comm import fabric_of
from planner.sources.presets import find_gpu

ROOT = Path(__file__).resolve().parent.parent
ROWS = ROOT / "benchmarks" / "data" / "nvidia-kernels.jsonl"
SOURCE = "ai-dynamo/aiconfigurator@095f58a5:aic-core/src/aiconfigurator_core/systems/data"
CARDS = {"h200_sxm": "h200-sxm-141gb", "b200_sxm": "b200-sxm-180gb"}
VERSION = "0.24.0"
# Cards timed with an older vLLM release only (which release), whose custom all-reduce table
# and one-token fused MoE rows are read: the A100's MoE tables route tokens by power laws, with
# no balanced rows, so only one token (its top-k experts whatever the law) is read there.
OLDER_RELEASE_CARDS = {"a100_sxm": ("a100-sxm4-80gb", "0.14.0")}
ALLREDUCE = "custom_allreduce_perf.parquet"
# PCIe-only cards whose NCCL all-reduce table is read (the NCCL release timed): the engines
# reduce through NCCL past two such GPUs.
PCIE_CARDS = {
    "l40s": ("l40s", "2.27.3"),
    "rtx_pro_6000_server": ("rtx-pro-6000-blackwell", "2.29.2"),
}
NCCL_ALLREDUCE = "nccl_perf.parquet"
# NCCL's all-gather and reduce-scatter over NVLink (nccl-tests in NVIDIA's collector, fp16, 2 /
# 4 / 8 GPUs): the collectives that carry a data-parallel layout's gathered batch to the MoE
# layers and back. Read at the messages a decode step sends (NCCL_LATENCY_MAX_BYTES and less),
# where their latency, not their bytes, sets the time.
NCCL_GATHER_CARDS = {"h100_sxm": "2.29.2", "h200_sxm": "2.29.2", "b200_sxm": "2.29.2"}
NCCL_GATHER_OPS = {"all_gather": "nccl_allgather", "reduce_scatter": "nccl_reducescatter"}
NCCL_LATENCY_MAX_BYTES = 262_144
# Cards whose own large dense GEMMs are read (their chip's multiply shares): the PCIe cards and
# Blackwell Ultra (its FP4 rate is its own).
OWN_GEMM_CARDS = {
    **{card: gpu for card, (gpu, _) in PCIE_CARDS.items()},
    "b300_sxm": "b300-sxm-288gb",
}
# gpt-oss's MXFP4 experts on the PCIe cards (vLLM 0.24.0 runs Marlin's W4A16 kernel there).
PCIE_MXFP4_KERNEL = "vllm_gptossmxfp4moe_marlin_marlinexperts"
# The largest NCCL all-reduce message read, bytes: a prefill step's activations at TP 2-8.
NCCL_MAX_BYTES = 33_554_432
ONE_TOKEN_MOE = "moe_one_token"
# Token counts at which a kernel's share of the tensor-core rate is read (prefill's regime) and
# the smallest N and K of a dense GEMM counted there (as benchmarks/gemm_kernels.py reads AMD's).
LARGE_M = (8192, 16384, 32768)
LARGE_NK = 2048
# Decode GEMMs: 1 and 8 tokens, weight matrices of 16 MB and more.
DECODE_M = (1, 8)
DECODE_MIN_BYTES = 16e6
# Decode attention rows kept: GQA groups of 8 query heads a KV head, 128-dim heads, no window,
# at least 2 MB of KV a call.
ATTENTION_GROUP = 8
ATTENTION_HEAD_DIM = 128
ATTENTION_MIN_BYTES = 2e6
# The fused MoE kernels read for each planner MoE kind, and the rate each is read against: the
# engines' default kernels on each card (Hopper: vLLM's and SGLang's Triton fused MoE, which
# also runs per-tensor FP8; FlashInfer's CUTLASS experts, opt-in there, are left out;
# Blackwell: FlashInfer's TRT-LLM experts; gpt-oss's MXFP4 with 16-bit activations on both).
MOE_KERNELS: dict[str, dict[str, tuple[str, str]]] = {
    "h200_sxm": {
        "vllm_unquantizedfusedmoe_triton_tritonexperts": ("bf16", "bf16"),
        "vllm_fp8moe_triton_tritonexperts": ("fp8-block", "fp8"),
        "vllm_gptossmxfp4moe_triton_oaitritonmxfp4expertsmonolithic": ("mxfp4", "bf16"),
    },
    "b200_sxm": {
        "vllm_unquantizedfusedmoe_flashinfer_trtllm_trtllmbf16experts": ("bf16", "bf16"),
        "vllm_modeloptfp8moe_flashinfer_trtllm_trtllmfp8expertsmonolithic": ("fp8", "fp8"),
        "vllm_fp8moe_flashinfer_trtllm_trtllmfp8expertsmonolithic": ("fp8-block", "fp8"),
        "vllm_compressedtensorsw4a4nvfp4moe_flashinfer_trtllm_trtllmnvfp4expertsmonolithic": (
            "fp4",
            "fp4",
        ),
        "vllm_gptossmxfp4moe_flashinfer_trtllm_mxfp4_bf16_trtllmmxfp4expertsmonolithic": (
            "mxfp4",
            "bf16",
        ),
    },
}
# SGLang 0.5.14's fused MoE kernels in the same collector's tables (systems/data/<card>/moe/
# sglang/0.5.14), read at decode only (MOE_DECODE_TOKENS) for their fixed cost: its default
# kernels for the kinds the planner prices this way (Hopper: its Triton fused MoE; Blackwell:
# FlashInfer's TRT-LLM MoE for block fp8 and NVFP4). gpt-oss's MXFP4 experts are read apart
# (SGLANG_MXFP4_KERNELS, the B200's; on Hopper SGLang keeps the earlier estimates:
# planner/core/step/family.py).
SGLANG_VERSION = "0.5.14"
# Cards whose SGLang fused MoE is read at prefill sizes too (its own kernels' tuning), and the
# rate each kind is read against.
SGLANG_LARGE_M_CARDS = ("h200_sxm", "b200_sxm")
MOE_KIND_RATES = {"bf16": "bf16", "fp8-block": "fp8", "fp4": "fp4"}
# SGLang's decode attention kernel read on each card: FlashAttention-3, its default on Hopper.
SGLANG_ATTENTION_KERNELS = {"h200_sxm": "fa3"}
# DeepEP's dispatch and combine inside one node, timed with SGLang 0.5.12's DeepEP build over
# every GPU of the node (8 on a B200 or B300 board, 4 on a GB200 tray): {card}/comm/sglang/
# 0.5.12/wideep_deepep_{ll,normal}_perf.parquet. The low-latency kernels (decode) at 1-1,024
# tokens a rank, the normal ones (prefill) at 1-DEEPEP_NORMAL_MAX_TOKENS with DeepEP's default
# DEEPEP_SMS SMs (deep_ep Buffer.num_sms, which SGLang keeps unless --deepep-config says
# otherwise).
DEEPEP_VERSION = "0.5.12"
DEEPEP_CARDS = {"b200_sxm": 8, "b300_sxm": 8, "gb200": 4}
DEEPEP_SMS = 20
DEEPEP_NORMAL_MAX_TOKENS = 16384
DEEPEP_TABLES = {"deepep_ll": "wideep_deepep_ll_perf", "deepep_normal": "wideep_deepep_normal_perf"}
# SGLang's experts under DeepEP's low-latency exchange (DeepGEMM's masked grouped GEMM in block
# fp8), timed at DeepSeek-V3's shape over simulated EP groups of 2-256 ranks with balanced
# routing, 1-128 tokens a rank: {card}/moe/sglang/0.5.10/wideep_generation_moe_perf.parquet.
DEEPGEMM_MOE_VERSION = "0.5.10"
DEEPGEMM_MOE_CARDS = {
    "h100_sxm": "h100-sxm5-80gb",
    "h200_sxm": "h200-sxm-141gb",
    "b200_sxm": "b200-sxm-180gb",
    "b300_sxm": "b300-sxm-288gb",
    "gb200": "gb200-per-gpu",
}
# A block-scaled fp8 expert weight: one byte and a 4-byte scale a 128 x 128 block.
BLOCK_FP8_WEIGHT_BYTES = 1 + 4 / (128 * 128)
# The rows where the multiply can outlast the stream: 32 tokens a rank and more, on 8 local
# experts or fewer (each then meets 32 tokens and more).
DEEPGEMM_COMPUTE_MIN_TOKENS = 32
DEEPGEMM_COMPUTE_MAX_LOCAL = 8
SGLANG_MOE_KERNELS: dict[str, dict[tuple[str, str], str]] = {
    "h200_sxm": {
        ("sglang_fused_moe_triton", "bfloat16"): "bf16",
        ("sglang_fused_moe_triton", "fp8_block"): "fp8-block",
    },
    "b200_sxm": {
        ("sglang_flashinfer_trtllm_moe", "fp8_block"): "fp8-block",
        ("sglang_flashinfer_trtllm_moe", "nvfp4"): "fp4",
    },
}
# SGLang's gpt-oss MXFP4 experts on Blackwell: FlashInfer's TRT-LLM MXFP4 MoE with MXFP8
# activations (SGLang picks moe_runner_backend flashinfer_mxfp4 on SM100 for an MXFP4 gpt-oss:
# sglang/srt/server_args.py in 0.5.4, arg_groups/model_overrides/gpt_oss.py in 0.5.23; its
# layers/quantization/mxfp4.py quantizes the activations to MXFP8 there), in the same SGLang
# tables: read at 1-512 tokens for its stream and at LARGE_M for its share of the fp8 rate.
SGLANG_MXFP4_KERNELS: dict[str, tuple[str, str]] = {
    "b200_sxm": ("sglang_mxfp4_flashinfer_trtllm_moe", "w4a8_mxfp4_mxfp8"),
}
# A fused MoE layer's fixed cost is read at 1, 2 and 4 tokens (decode at small batch), where the
# routed experts' weight stream is the rest of it; the bytes an expert weight takes, by kind
# (MXFP4: 4 bits and a scale a 32; NVFP4: a scale a 16).
MOE_DECODE_TOKENS = (1, 2, 4)
MOE_WEIGHT_BYTES = {"bf16": 2.0, "fp8": 1.0, "fp8-block": 1.0, "mxfp4": 0.5 + 1 / 32}
MOE_WEIGHT_BYTES["fp4"] = 0.5 + 1 / 16
MOE_WEIGHT_BYTES["mxfp4-mxfp8"] = MOE_WEIGHT_BYTES["mxfp4"]
# The MXFP4 kinds, whose experts stream at their own share (moe_stream_fit), not the fixed fit's.
MOE_STREAM_KINDS = frozenset({"mxfp4", "mxfp4-mxfp8"})
# gpt-oss's MXFP4 experts (16-bit activations) are read at 1-512 tokens for the share of peak
# bandwidth their weights stream at: these kernels unpack 4-bit weights and their scales before
# the multiply.
MOE_STREAM_MAX_TOKENS = 512
# The planner's dense GEMM kinds by the tables' gemm_dtype, and the rate each is read against.
DENSE_KINDS = {
    "bfloat16": ("bf16", "bf16"),
    "fp8": ("fp8", "fp8"),
    "fp8_block": ("fp8-block", "fp8"),
    "nvfp4": ("fp4", "fp4"),
}
# Bytes a weight element takes in each dense kind (NVFP4: 4 bits and an fp8 scale a 16).
WEIGHT_BYTES = {"bf16": 2.0, "fp8": 1.0, "fp8-block": 1.0, "fp4": 0.5 + 1 / 16}
KV_BYTES = {"bfloat16": 2, "fp8": 1}
# DeepSeek-V3's MLA decode module (vLLM 0.24.0: FlashAttention's MLA on the H200, FlashInfer's on
# the B200; its projections in bf16): 16 query heads a GPU (TP 8) and 128 (data-parallel
# attention), 32 sequences and more at 4,096 tokens of context and more.
MLA_HEADS = (16, 128)
MLA_MIN_BATCH = 32
MLA_MIN_CONTEXT = 4096
# The same module's decode regime at TP 8 (16 heads a GPU): 1-64 sequences at up to 8,192 tokens,
# its projections in bf16 and in DeepSeek's block-scaled fp8, a bf16 and an fp8 latent cache:
# what it takes beyond what the step model already prices for it (`mla_module_extras`).
MLA_MODULE_HEADS = 16
MLA_MODULE_MAX_BATCH = 64
MLA_MODULE_MAX_CONTEXT = 8192
MLA_MODULE_GEMMS = {"bfloat16": "bf16", "fp8_block": "fp8-block"}
# Prefill attention (a whole prompt, causal, no cache: `context_attention`): prompts of 1-16K
# tokens, 8-64 query heads, at least 64 (sequence, head) pairs a call (a grid that fills the
# GPU), the head sizes models use.
PREFILL_MIN_ISL = 1024
PREFILL_MIN_HEADS = 64
PREFILL_DIMS = (64, 128, 256)
PREFILL_ISL = (1024, 2048, 4096, 8192, 16384)
PREFILL_HEADS = (8, 16, 32, 64)
# Half lengths tried for the prefill share's fit, in mean keys a query sees.
HALF_KEYS = np.geomspace(64, 8192, 241)
# The all-reduce group whose large messages give the link share.
ALLREDUCE_GPUS = 8


def card_gpu(card: str) -> str:
    """The catalog id of an aiconfigurator card name."""
    named = CARDS.get(card) or OWN_GEMM_CARDS.get(card) or DEEPGEMM_MOE_CARDS.get(card)
    return named or OLDER_RELEASE_CARDS[card][0]


def load(path: Path) -> list[dict[str, Any]]:
    """The kernel rows, one JSON object a line."""
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def rate(card: str, dtype: str) -> float:
    """A card's dense tensor-core rate for an input dtype (bf16, fp8, fp4), FLOP/s."""
    gpu = find_gpu(card_gpu(card))
    rates = {"bf16": gpu.bf16_dense_flops, "fp8": gpu.fp8_dense_flops, "fp4": gpu.fp4_dense_flops}
    return float(rates[dtype] or 0)


def peak_bytes_per_s(card: str) -> float:
    """A card's peak HBM bandwidth, bytes/s, from the catalog."""
    return float(find_gpu(card_gpu(card)).hbm_bandwidth_bytes_per_s or 0)


def line_fit(x: Iterable[float], y: Iterable[float]) -> tuple[float, float]:
    """The least-squares line y = a + b x: (a, b)."""
    xs, ys = np.array(list(x), dtype=np.float64), np.array(list(y), dtype=np.float64)
    a, b = np.linalg.lstsq(np.vstack([np.ones_like(xs), xs]).T, ys, rcond=None)[0]
    return float(a), float(b)


def decode_gemm_fit(rows: list[dict[str, Any]], card: str) -> tuple[float, float, int]:
    """bf16 GEMMs at DECODE_M tokens: fixed us a kernel, the share of peak bandwidth the
    weights stream at, and how many rows."""
    got = [r for r in rows if r["table"] == "gemm" and r["card"] == card and r["m"] in DECODE_M]
    got = [r for r in got if r["kind"] == "bf16"]
    fixed_us, us_per_byte = line_fit((2 * r["n"] * r["k"] for r in got), (r["us"] for r in got))
    return fixed_us, 1e6 / us_per_byte / peak_bytes_per_s(card), len(got)


def dense_shares(rows: list[dict[str, Any]], card: str) -> dict[str, tuple[float, int]]:
    """The median share of its rate each dense kind reaches at LARGE_M tokens."""
    shares: dict[str, list[float]] = {}
    for r in rows:
        if r["table"] != "gemm" or r["card"] != card or r["m"] not in LARGE_M:
            continue
        flops = 2 * r["m"] * r["n"] * r["k"] / (r["us"] * 1e-6)
        shares.setdefault(r["kind"], []).append(flops / rate(card, r["rate"]))
    return {k: (statistics.median(v), len(v)) for k, v in sorted(shares.items())}


def moe_points(
    rows: list[dict[str, Any]], card: str, kind: str, table: str = "moe"
) -> list[tuple[float, float]]:
    """(expert width a GPU holds, share of the rate) of each fused MoE row of a kind in `table`
    with its experts split by TP alone (both grouped GEMMs: 6 x tokens x top-k x hidden x
    intermediate / TP FLOPs). Rows under expert parallelism are left out: how the collector
    spreads the tokens over the local experts there is not recorded."""
    points = []
    for r in rows:
        if r["table"] != table or r["card"] != card or r["kind"] != kind or r["ep"] != 1:
            continue
        if r["tokens"] not in LARGE_M:
            continue
        flops = 6 * r["tokens"] * r["topk"] * r["hidden"] * r["inter"] / r["tp"]
        share = flops / (r["us"] * 1e-6) / rate(card, r["rate"])
        points.append((r["inter"] / r["tp"], share))
    return points


def moe_fixed_fit(
    rows: list[dict[str, Any]], card: str, table: str = "moe"
) -> tuple[float, float, int]:
    """A fused MoE layer's time at MOE_DECODE_TOKENS less its routed experts' weight stream (at
    the planner's share of peak bandwidth), fitted as a fixed cost + a cost per idle local
    expert (experts no token routed to), us, over every kind's rows of `table` (vLLM's "moe",
    SGLang's "moe_sglang"): (fixed, per idle expert, rows)."""
    stream = family.HOPPER_BANDWIDTH_EFFICIENCY * peak_bytes_per_s(card)
    idle, left = [], []
    for r in rows:
        if r["table"] != table or r["card"] != card or r["tokens"] not in MOE_DECODE_TOKENS:
            continue
        if r["kind"] in MOE_STREAM_KINDS:  # streams at its own share (moe_stream_fit)
            continue
        experts, topk = r["experts"], r["topk"]
        routed = experts * (1 - (1 - topk / experts) ** r["tokens"])
        expert_bytes = 3 * r["hidden"] * r["inter"] / r["tp"] * MOE_WEIGHT_BYTES[r["kind"]]
        idle.append(experts - routed)
        left.append(r["us"] - routed * expert_bytes / stream * 1e6)
    fixed_us, per_idle_us = line_fit(idle, left)
    return fixed_us, per_idle_us, len(left)


def moe_one_token_fit(rows: list[dict[str, Any]], card: str) -> tuple[float, float, float, int]:
    """A fused MoE layer's time at one token fitted as a fixed cost + a cost per idle local
    expert + its top-k experts' weights at a share of peak bandwidth, all three free (a card
    whose stream share the planner has not measured): (fixed us, us an idle expert, share,
    rows)."""
    got = [r for r in rows if r["table"] == ONE_TOKEN_MOE and r["card"] == card]
    peak = peak_bytes_per_s(card)
    design = [
        [
            1.0,
            r["experts"] - r["topk"],
            r["topk"]
            * 3
            * r["hidden"]
            * r["inter"]
            / r["tp"]
            * MOE_WEIGHT_BYTES[r["kind"]]
            / peak
            * 1e6,
        ]
        for r in got
    ]
    fixed_us, per_idle_us, per_peak_us = np.linalg.lstsq(
        np.array(design), np.array([r["us"] for r in got]), rcond=None
    )[0]
    return float(fixed_us), float(per_idle_us), 1.0 / float(per_peak_us), len(got)


def moe_stream_fit(
    rows: list[dict[str, Any]], card: str, kind: str, table: str = "moe"
) -> tuple[float, float, int]:
    """A kind's fused MoE layers of `table` at 1-512 tokens (experts split by TP only) as a
    fixed cost + its routed experts' weights streamed at a share of peak bandwidth: (fixed us,
    share, rows)."""
    got = [
        r
        for r in rows
        if r["table"] == table and r["card"] == card and r["kind"] == kind and r["ep"] == 1
        if r["tokens"] <= MOE_STREAM_MAX_TOKENS
    ]
    streamed = []
    for r in got:
        routed = r["experts"] * (1 - (1 - r["topk"] / r["experts"]) ** r["tokens"])
        streamed.append(routed * 3 * r["hidden"] * r["inter"] / r["tp"] * MOE_WEIGHT_BYTES[kind])
    fixed_us, us_per_byte = line_fit(streamed, (r["us"] for r in got))
    return fixed_us, 1e6 / us_per_byte / peak_bytes_per_s(card), len(got)


def prefill_points(rows: list[dict[str, Any]], card: str) -> dict[int, list[tuple[float, float]]]:
    """By head size: (mean keys a query sees, share of the 16-bit rate) of each prefill
    attention row (a causal prompt of L tokens: L (L + 1) / 2 pairs, (L + 1) / 2 keys a query
    on average; 2 x 2 x head size FLOPs a pair and head)."""
    points: dict[int, list[tuple[float, float]]] = {}
    for r in rows:
        if r["table"] != "prefill" or r["card"] != card:
            continue
        pairs = r["isl"] * (r["isl"] + 1) / 2
        flops = r["batch"] * r["heads"] * 4 * r["head_dim"] * pairs
        share = flops / (r["us"] * 1e-6) / rate(card, "bf16")
        points.setdefault(r["head_dim"], []).append(((r["isl"] + 1) / 2, share))
    return dict(sorted(points.items()))


def prefill_fit(
    points: dict[int, list[tuple[float, float]]],
) -> tuple[dict[int, float], int, float]:
    """share = ceiling(head size) x keys / (keys + half): one half length for every head size
    (of HALF_KEYS) and each size's median-centred ceiling, leaving the least median |log
    error|; (ceilings, half, error)."""
    best: tuple[dict[int, float], int, float] | None = None
    for half in HALF_KEYS:
        ceilings, errors = {}, []
        for dim, pts in points.items():
            keys = np.array([k for k, _ in pts])
            share = np.array([s for _, s in pts])
            x = keys / (keys + half)
            ceilings[dim] = float(np.exp(np.median(np.log(share / x))))
            errors.extend(np.abs(np.log(ceilings[dim] * x / share)))
        error = float(np.median(errors))
        if best is None or error < best[2]:
            best = (ceilings, round(float(half)), error)
    assert best is not None
    return best


# Half widths tried for the fused MoE share's fit (expert width per GPU, log-spaced).
HALF_WIDTHS = np.geomspace(16, 4096, 241)


def moe_width_fit(points: list[tuple[float, float]]) -> tuple[float, int, float]:
    """The share = ceiling x width / (width + half) through the points: the half width (of
    HALF_WIDTHS) whose median-centred ceiling leaves the least median |log error|, that
    ceiling, and the error."""
    width = np.array([w for w, _ in points])
    share = np.array([s for _, s in points])
    best: tuple[float, int, float] | None = None
    for half in HALF_WIDTHS:
        x = width / (width + half)
        ceiling = float(np.exp(np.median(np.log(share / x))))
        error = float(np.median(np.abs(np.log(ceiling * x / share))))
        if best is None or error < best[2]:
            best = (ceiling, round(float(half)), error)
    assert best is not None
    return best


def allreduce_fit(rows: list[dict[str, Any]], card: str) -> tuple[float, float]:
    """The custom all-reduce in a CUDA graph: the median time of messages up to 8 KB, us, and
    the median share of the card's NVLink rate (one direction) its ring bytes reach beyond
    that latency for messages of 2-32 MB over 8 GPUs (where TP 8 steps spend the most on it)."""
    got = [r for r in rows if r["table"] == "allreduce" and r["card"] == card]
    small = statistics.median(r["us"] for r in got if r["bytes"] <= 8192)
    link_bytes_per_s = fabric_of(find_gpu(card_gpu(card))).bytes_per_s
    shares = []
    for r in got:
        if r["gpus"] != ALLREDUCE_GPUS or not 2e6 <= r["bytes"] <= 33.6e6:
            continue
        ring = 2 * (r["gpus"] - 1) / r["gpus"] * r["bytes"]
        shares.append(ring / ((r["us"] - small) * 1e-6) / link_bytes_per_s)
    return small, statistics.median(shares)


def deepep_fit(
    rows: list[dict[str, Any]], card: str, table: str
) -> tuple[float, float, float, int]:
    """DeepEP's dispatch + combine in one node (`table`: deepep_ll or deepep_normal) as a
    fixed time + the bytes the planner counts (a copy per routed expert, fp8 out with its
    scales and bf16 back: comm.DEEPEP_*_BYTES_PER_VALUE) at a share of one direction of the
    card's NVLink, least squares in relative error: (fixed us, link share, median |error|,
    rows)."""
    got = [r for r in rows if r["table"] == table and r["card"] == card]
    us = np.array([r["dispatch_us"] + r["combine_us"] for r in got])
    per_value = comm.DEEPEP_DISPATCH_BYTES_PER_VALUE + comm.DEEPEP_COMBINE_BYTES_PER_VALUE
    moved = np.array([r["tokens"] * r["topk"] * r["hidden"] * per_value for r in got])
    weight = 1 / us
    design = np.vstack([np.ones_like(moved), moved]).T * weight[:, None]
    (fixed_us, us_per_byte), *_ = np.linalg.lstsq(design, us * weight, rcond=None)
    error = float(np.median(np.abs((fixed_us + us_per_byte * moved) / us - 1)))
    link_bytes_per_s = fabric_of(find_gpu(card_gpu(card))).bytes_per_s
    share = 1e6 / us_per_byte / link_bytes_per_s
    return float(fixed_us), float(share), error, len(got)


def deepgemm_moe_fit(
    rows: list[dict[str, Any]], card: str
) -> tuple[float, float, float, float, float]:
    """DeepGEMM's masked grouped GEMM under DeepEP (one MoE layer's experts on one rank of an EP
    group): a fixed time + a time a local expert + the larger of the touched experts' stream (at
    a share of peak HBM) and their multiply (at a share of the fp8 rate). The first three are
    fitted (relative error, least squares, the shares on a grid) with the multiply left out of
    reach, then the multiply's share on the rows where it can bind (DEEPGEMM_COMPUTE_*): (fixed
    us, us a local expert, stream share, fp8 share, median |error| over every row)."""
    got = [r for r in rows if r["table"] == "moe_deepep" and r["card"] == card]
    gpu = find_gpu(card_gpu(card))
    bandwidth, fp8 = float(gpu.hbm_bandwidth_bytes_per_s or 0), float(gpu.fp8_dense_flops or 0)
    us = np.array([r["us"] for r in got])
    tokens = np.array([r["tokens"] for r in got])
    local = np.array([r["experts"] / r["ep"] for r in got])
    slots = np.array([r["tokens"] * r["topk"] for r in got])
    expert_bytes = np.array([3 * r["hidden"] * r["inter"] * BLOCK_FP8_WEIGHT_BYTES for r in got])
    streamed = np.minimum(local, slots) * expert_bytes
    flops = np.array([2 * r["tokens"] * r["topk"] * 3 * r["hidden"] * r["inter"] for r in got])

    def predicted(stream: float, multiply: float) -> tuple[np.ndarray, float, float]:
        core = np.maximum(streamed / (stream * bandwidth), flops / (multiply * fp8)) * 1e6
        design = np.vstack([np.ones_like(us), local]).T / us[:, None]
        (fixed, per_expert), *_ = np.linalg.lstsq(design, (us - core) / us, rcond=None)
        return fixed + per_expert * local + core, float(fixed), float(per_expert)

    stream = min(
        np.arange(0.5, 1.0, 0.01), key=lambda b: np.median(np.abs(predicted(b, np.inf)[0] / us - 1))
    )
    _, fixed, per_expert = predicted(stream, np.inf)
    binds = (tokens >= DEEPGEMM_COMPUTE_MIN_TOKENS) & (local <= DEEPGEMM_COMPUTE_MAX_LOCAL)

    def error_at(multiply: float) -> float:
        core = np.maximum(streamed / (stream * bandwidth), flops / (multiply * fp8)) * 1e6
        return float(np.median(np.abs((fixed + per_expert * local + core)[binds] / us[binds] - 1)))

    multiply = min(np.arange(0.2, 1.0, 0.01), key=error_at)
    core = np.maximum(streamed / (stream * bandwidth), flops / (multiply * fp8)) * 1e6
    error = float(np.median(np.abs((fixed + per_expert * local + core) / us - 1)))
    return fixed, per_expert, float(stream), float(multiply), error


def pcie_allreduce_fit(rows: list[dict[str, Any]], card: str) -> tuple[float, float, float, float]:
    """NCCL's all-reduce over PCIe at 2, 4 and 8 GPUs as fixed us + us a peer + the ring's
    bytes (2 (n - 1) / n of the message) at a share of one direction of the card's PCIe link,
    least squares in relative error: (fixed us, us a peer, link share, median |error|)."""
    got = [r for r in rows if r["table"] == "nccl_allreduce" and r["card"] == card]
    us = np.array([r["us"] for r in got])
    ring = np.array([2 * (r["gpus"] - 1) / r["gpus"] * r["bytes"] for r in got])
    terms = np.vstack([np.ones_like(us), [r["gpus"] - 1 for r in got], ring]).T
    fixed, hop, us_per_byte = np.linalg.lstsq(terms / us[:, None], np.ones_like(us), rcond=None)[0]
    error = float(np.median(np.abs(terms @ [fixed, hop, us_per_byte] / us - 1)))
    link_bytes_per_s = fabric_of(find_gpu(card_gpu(card))).bytes_per_s
    return float(fixed), float(hop), float(1e6 / us_per_byte / link_bytes_per_s), error


def attention_fit(
    rows: list[dict[str, Any]], card: str, kv: str, table: str = "attention"
) -> tuple[float, float, int]:
    """Decode attention with `kv` cache (vLLM's rows, or SGLang's: `table`): fixed us a call
    and the share of peak bandwidth the KV streams at (a least-squares line through the rows),
    and how many rows."""
    got = [r for r in rows if r["table"] == table and r["card"] == card and r["kv"] == kv]
    fixed_us, us_per_byte = line_fit((r["kv_bytes"] for r in got), (r["us"] for r in got))
    return fixed_us, 1e6 / us_per_byte / peak_bytes_per_s(card), len(got)


def extract(data: Path) -> list[dict[str, Any]]:
    """The rows this script reads, from aiconfigurator's parquet tables under `data` (its
    systems/data directory). Needs pandas and pyarrow."""
    import pandas as pd

    out: list[dict[str, Any]] = []
    for card in CARDS:
        base = data / card

        def table(kind: str, name: str, card_dir: Path = base) -> Any:
            return pd.read_parquet(card_dir / kind / "vllm" / VERSION / name)

        out += gemm_rows(table("gemm", "gemm_perf.parquet"), card, decode=True)
        m = table("moe", "moe_perf.parquet")
        m = m[(m.version == VERSION) & (m.distribution == "balanced")]
        small = m.num_tokens.isin(list(MOE_DECODE_TOKENS)) & (m.moe_ep_size == 1)
        mxfp4 = [k for k, (kind, _) in MOE_KERNELS[card].items() if kind == "mxfp4"]
        small |= (
            (m.num_tokens <= MOE_STREAM_MAX_TOKENS)
            & (m.moe_ep_size == 1)
            & m.kernel_source.isin(mxfp4)
        )
        m = m[(m.num_tokens.isin(LARGE_M) | small) & m.kernel_source.isin(list(MOE_KERNELS[card]))]
        for r in m.itertuples():
            kind, dtype = MOE_KERNELS[card][r.kernel_source]
            out.append(moe_row(r, card, "moe", kind, dtype))
        out += allreduce_rows(pd.read_parquet(base / "comm" / "vllm" / VERSION / ALLREDUCE), card)
        sg = pd.read_parquet(base / "moe" / "sglang" / SGLANG_VERSION / "moe_perf.parquet")
        sg = sg[(sg.distribution == "balanced") & (sg.moe_ep_size == 1)]
        for r in sg[sg.num_tokens.isin(list(MOE_DECODE_TOKENS))].itertuples():
            kind = SGLANG_MOE_KERNELS[card].get((r.kernel_source, r.moe_dtype))
            if kind is not None:
                out.append(moe_row(r, card, "moe_sglang", kind))
        if card in SGLANG_MXFP4_KERNELS:
            source, dtype = SGLANG_MXFP4_KERNELS[card]
            x = sg[(sg.kernel_source == source) & (sg.moe_dtype == dtype)]
            x = x[(x.num_tokens <= MOE_STREAM_MAX_TOKENS) | x.num_tokens.isin(LARGE_M)]
            for r in x.itertuples():
                out.append(moe_row(r, card, "moe_sglang", "mxfp4-mxfp8", "fp8"))
        out += attention_rows(table("attention", "generation_attention_perf.parquet"), card)
        c = table("attention", "context_attention_perf.parquet")
        c = c[(c.window_size == 0) & (c.kv_cache_dtype == "bfloat16") & (c.isl >= PREFILL_MIN_ISL)]
        c = c[(c.batch_size * c.num_heads >= PREFILL_MIN_HEADS) & c.head_dim.isin(PREFILL_DIMS)]
        c = c[c.isl.isin(PREFILL_ISL) & c.num_heads.isin(PREFILL_HEADS)]
        for r in c.itertuples():
            out.append(
                {
                    "card": card,
                    "table": "prefill",
                    "batch": int(r.batch_size),
                    "isl": int(r.isl),
                    "heads": int(r.num_heads),
                    "head_dim": int(r.head_dim),
                    "us": round(r.latency * 1e3, 3),
                }
            )
        mla = base / "mla" / "vllm" / VERSION / "mla_generation_module_perf.parquet"
        g = pd.read_parquet(mla)
        module = g[(g.num_heads == MLA_MODULE_HEADS) & g.gemm_type.isin(list(MLA_MODULE_GEMMS))]
        module = module[module.batch_size <= MLA_MODULE_MAX_BATCH]
        for r in module[module.step <= MLA_MODULE_MAX_CONTEXT].itertuples():
            out.append(
                {
                    "card": card,
                    "table": "mla_module",
                    "gemm": MLA_MODULE_GEMMS[r.gemm_type],
                    "kv": r.kv_cache_dtype,
                    "batch": int(r.batch_size),
                    "context": int(r.step),
                    "us": round(r.latency * 1e3, 3),
                }
            )
        g = g[(g.gemm_type == "bfloat16") & g.num_heads.isin(list(MLA_HEADS))]
        g = g[(g.batch_size >= MLA_MIN_BATCH) & (g.step >= MLA_MIN_CONTEXT)]
        for r in g.itertuples():
            out.append(
                {
                    "card": card,
                    "table": "mla",
                    "kv": r.kv_cache_dtype,
                    "heads": int(r.num_heads),
                    "batch": int(r.batch_size),
                    "context": int(r.step),
                    "us": round(r.latency * 1e3, 3),
                }
            )
    for card, (_, version) in OLDER_RELEASE_CARDS.items():
        table = data / card / "comm" / "vllm" / version / ALLREDUCE
        out += allreduce_rows(pd.read_parquet(table), card)
        m = pd.read_parquet(data / card / "moe" / "vllm" / version / "moe_perf.parquet")
        m = m[(m.num_tokens == 1) & (m.moe_ep_size == 1) & (m.moe_dtype == "bfloat16")]
        out += [moe_row(r, card, ONE_TOKEN_MOE, "bf16") for r in m.itertuples()]
    for card, (_, nccl) in PCIE_CARDS.items():
        comm = data / card / "comm" / "nccl" / nccl / NCCL_ALLREDUCE
        out += nccl_allreduce_rows(pd.read_parquet(comm), card)
        m = pd.read_parquet(data / card / "moe" / "vllm" / VERSION / "moe_perf.parquet")
        m = m[(m.distribution == "balanced") & (m.moe_ep_size == 1)]
        m = m[(m.num_tokens <= MOE_STREAM_MAX_TOKENS) & (m.kernel_source == PCIE_MXFP4_KERNEL)]
        out += [moe_row(r, card, "moe", "mxfp4", "bf16") for r in m.itertuples()]
    for card in OWN_GEMM_CARDS:
        gemm = data / card / "gemm" / "vllm" / VERSION / "gemm_perf.parquet"
        out += gemm_rows(pd.read_parquet(gemm), card, decode=False)
    for card in SGLANG_LARGE_M_CARDS:
        sg = pd.read_parquet(data / card / "moe" / "sglang" / SGLANG_VERSION / "moe_perf.parquet")
        out += sglang_large_m_rows(sg, card)
    for card, kernel in SGLANG_ATTENTION_KERNELS.items():
        path = data / card / "attention" / "sglang" / SGLANG_VERSION
        a = pd.read_parquet(path / "generation_attention_perf.parquet")
        out += attention_rows(a[a.kernel_source == kernel], card, "attention_sglang")
    for card in DEEPEP_CARDS:
        for name, stem in DEEPEP_TABLES.items():
            path = data / card / "comm" / "sglang" / DEEPEP_VERSION / f"{stem}.parquet"
            out += deepep_rows(pd.read_parquet(path), card, name)
    for card, nccl in NCCL_GATHER_CARDS.items():
        table = pd.read_parquet(data / card / "comm" / "nccl" / nccl / NCCL_ALLREDUCE)
        out += nccl_gather_rows(table, card)
    for card in DEEPGEMM_MOE_CARDS:
        path = data / card / "moe" / "sglang" / DEEPGEMM_MOE_VERSION
        out += deepgemm_moe_rows(pd.read_parquet(path / "wideep_generation_moe_perf.parquet"), card)
    return out


def deepgemm_moe_rows(table: Any, card: str) -> list[dict[str, Any]]:
    """The wide-EP experts' rows with balanced routing, their tokens a rank's (the table
    counts all ranks')."""
    out = []
    for r in table[table.distribution == "uniform"].to_dict("records"):
        ep = int(r["moe_ep_size"])
        out.append(
            {
                "card": card,
                "table": "moe_deepep",
                "kind": "fp8-block" if r["moe_dtype"] == "fp8_block" else r["moe_dtype"],
                "ep": ep,
                "tokens": int(r["num_tokens"]) // ep,
                "hidden": int(r["hidden_size"]),
                "inter": int(r["inter_size"]),
                "topk": int(r["topk"]),
                "experts": int(r["num_experts"]),
                "us": round(float(r["latency"]) * 1e3, 3),
            }
        )
    return out


def deepep_rows(table: Any, card: str, name: str) -> list[dict[str, Any]]:
    """DeepEP's dispatch and combine times in one node: every low-latency row, the normal
    kernels' at DEEPEP_SMS SMs and up to DEEPEP_NORMAL_MAX_TOKENS tokens a rank."""
    if name == "deepep_normal":
        table = table[(table.dispatch_sms == DEEPEP_SMS) & (table.combine_sms == DEEPEP_SMS)]
        table = table[table.num_token <= DEEPEP_NORMAL_MAX_TOKENS]
        times = ("dispatch_transmit_us", "combine_transmit_us")
    else:
        times = ("dispatch_avg_t_us", "combine_avg_t_us")
    return [
        {
            "card": card,
            "table": name,
            "gpus": DEEPEP_CARDS[card],
            "hidden": int(r["hidden_size"]),
            "tokens": int(r["num_token"]),
            "topk": int(r["num_topk"]),
            "experts": int(r["num_experts"]),
            "dispatch_us": round(float(r[times[0]]), 3),
            "combine_us": round(float(r[times[1]]), 3),
        }
        for r in table[table.node_num == 1].to_dict("records")
    ]


def sglang_large_m_rows(table: Any, card: str) -> list[dict[str, Any]]:
    """SGLang's fused MoE rows of the kinds SGLANG_MOE_KERNELS reads at LARGE_M tokens
    (balanced routing, TP only), with the rate each kind is read against."""
    sg = table[(table.distribution == "balanced") & (table.moe_ep_size == 1)]
    out = []
    for r in sg[sg.num_tokens.isin(list(LARGE_M))].itertuples():
        kind = SGLANG_MOE_KERNELS[card].get((r.kernel_source, r.moe_dtype))
        if kind is not None:
            out.append(moe_row(r, card, "moe_sglang", kind, MOE_KIND_RATES[kind]))
    return out


def attention_rows(table: Any, card: str, name: str = "attention") -> list[dict[str, Any]]:
    """A generation_attention table's decode rows: GQA groups of ATTENTION_GROUP query heads a
    KV head, ATTENTION_HEAD_DIM-dim heads, no window, ATTENTION_MIN_BYTES of KV a call or more."""
    a = table[(table.window_size == 0) & (table.head_dim == ATTENTION_HEAD_DIM)]
    a = a[a.num_heads == ATTENTION_GROUP * a.num_key_value_heads]
    out = []
    for r in a.itertuples():
        kv_bytes = (
            r.batch_size
            * r.step
            * r.num_key_value_heads
            * r.head_dim
            * 2
            * KV_BYTES[r.kv_cache_dtype]
        )
        if kv_bytes < ATTENTION_MIN_BYTES:
            continue
        out.append(
            {
                "card": card,
                "table": name,
                "kv": r.kv_cache_dtype,
                "batch": int(r.batch_size),
                "context": int(r.step),
                "kv_heads": int(r.num_key_value_heads),
                "kv_bytes": int(kv_bytes),
                "us": round(r.latency * 1e3, 3),
            }
        )
    return out


def gemm_rows(table: Any, card: str, decode: bool) -> list[dict[str, Any]]:
    """A gemm_perf table's dense GEMMs at LARGE_M[1] tokens with N and K of LARGE_NK and more
    (and with `decode`, the bf16 ones at DECODE_M tokens of DECODE_MIN_BYTES and more)."""
    out = []
    for r in table[table.gemm_dtype.isin(list(DENSE_KINDS))].itertuples():
        kind, dtype = DENSE_KINDS[r.gemm_dtype]
        small = decode and r.m in DECODE_M and kind == "bf16"
        if (small and 2 * r.n * r.k >= DECODE_MIN_BYTES) or (
            r.m == LARGE_M[1] and min(r.n, r.k) >= LARGE_NK
        ):
            out.append(
                {
                    "card": card,
                    "table": "gemm",
                    "kernel": r.kernel_source,
                    "kind": kind,
                    "rate": dtype,
                    "m": int(r.m),
                    "n": int(r.n),
                    "k": int(r.k),
                    "us": round(r.latency * 1e3, 3),
                }
            )
    return out


def moe_row(r: Any, card: str, table: str, kind: str, rate: str | None = None) -> dict[str, Any]:
    """One fused MoE layer's row of a moe_perf table: its kind (and the rate it is read
    against, where a fit needs one), shape, layout and time."""
    return {
        "card": card,
        "table": table,
        "kind": kind,
        **({"rate": rate} if rate else {}),
        "tokens": int(r.num_tokens),
        "hidden": int(r.hidden_size),
        "inter": int(r.inter_size),
        "topk": int(r.topk),
        "experts": int(r.num_experts),
        "tp": int(r.moe_tp_size),
        "ep": int(r.moe_ep_size),
        "us": round(r.latency * 1e3, 3),
    }


def allreduce_rows(table: Any, card: str) -> list[dict[str, Any]]:
    """The custom all-reduce's rows replayed in a CUDA graph (bf16 messages, 2 bytes each)."""
    return [
        {
            "card": card,
            "table": "allreduce",
            "gpus": int(r.num_gpus),
            "bytes": int(r.message_size) * 2,
            "us": round(r.latency * 1e3, 3),
        }
        for r in table[table.backend == "vllm_graph"].itertuples()
    ]


def nccl_allreduce_rows(table: Any, card: str) -> list[dict[str, Any]]:
    """NCCL's all-reduce rows in fp16 up to NCCL_MAX_BYTES (the table counts elements, 2
    bytes each)."""
    got = table[(table.op_name == "all_reduce") & (table.nccl_dtype == "half")]
    return [
        {
            "card": card,
            "table": "nccl_allreduce",
            "gpus": int(r.num_gpus),
            "bytes": int(r.message_size) * 2,
            "us": round(r.latency * 1e3, 3),
        }
        for r in got.itertuples()
        if int(r.message_size) * 2 <= NCCL_MAX_BYTES
    ]


def nccl_gather_rows(table: Any, card: str) -> list[dict[str, Any]]:
    """NCCL's all-gather and reduce-scatter rows in fp16 up to NCCL_LATENCY_MAX_BYTES (the
    table counts elements, 2 bytes each)."""
    got = table[table.op_name.isin(list(NCCL_GATHER_OPS)) & (table.nccl_dtype == "half")]
    return [
        {
            "card": card,
            "table": NCCL_GATHER_OPS[r.op_name],
            "gpus": int(r.num_gpus),
            "bytes": int(r.message_size) * 2,
            "us": round(r.latency * 1e3, 3),
        }
        for r in got.itertuples()
        if int(r.message_size) * 2 <= NCCL_LATENCY_MAX_BYTES
    ]


def nccl_latency_fit(
    rows: list[dict[str, Any]], cards: Iterable[str]
) -> tuple[float, float, float]:
    """NCCL's all-gather and reduce-scatter at decode-sized messages on `cards`, both kinds
    together: a fixed time + a time a peer (least squares over 2 / 4 / 8 GPUs), us, and the
    median |error|."""
    got = [r for r in rows if r["table"] in NCCL_GATHER_OPS.values() and r["card"] in cards]
    peers = np.array([r["gpus"] - 1 for r in got], dtype=float)
    us = np.array([r["us"] for r in got])
    (fixed_us, per_peer_us), *_ = np.linalg.lstsq(
        np.vstack([np.ones_like(peers), peers]).T, us, rcond=None
    )
    error = float(np.median(np.abs((fixed_us + per_peer_us * peers) / us - 1)))
    return float(fixed_us), float(per_peer_us), error


def mla_head_costs(rows: list[dict[str, Any]], card: str) -> list[tuple[float, float]]:
    """(measured, modelled) extra time of DeepSeek-V3's MLA decode module with 128 query heads
    on a GPU over 16 (data-parallel attention against TP 8), us, at each batch and context
    both were timed at (bf16 latent): the modelled one is the absorbed multiply's excess over
    the latent's read (the planner's decode_attention_ms; 16 heads stay read-bound)."""
    from planner.core.step import step_time_for
    from planner.sources.presets import load_model_preset

    v3 = load_model_preset("deepseek-v3")
    gpu = find_gpu(CARDS[card])
    one_gpu = step_time_for(v3, gpu, tp=1)
    by_key = {
        (r["heads"], r["batch"], r["context"]): r["us"]
        for r in rows
        if r["table"] == "mla" and r["card"] == card and r["kv"] == "bfloat16"
    }
    out = []
    for (heads, batch, context), us in sorted(by_key.items()):
        narrow = by_key.get((MLA_HEADS[0], batch, context))
        if heads != MLA_HEADS[1] or narrow is None:
            continue
        kv_bytes = batch * context * 576 * 2  # one layer's latent, bf16
        extra_ms = one_gpu.decode_attention_ms(kv_bytes) - one_gpu.kv_read_ms(kv_bytes)
        out.append((us - narrow, extra_ms * 1e3))
    return out


def mla_module_extras(
    rows: list[dict[str, Any]], card: str
) -> dict[tuple[str, str], tuple[float, int]]:
    """DeepSeek-V3's MLA decode module at TP 8 beyond what the step model prices for it, by
    projection kind and latent-cache dtype: the median over 1-64 sequences at up to 8,192
    tokens of (measured - modelled) us, and how many points. Modelled: the attention weights'
    stream (the model's share of them a GPU reads), a GEMM floor for each of the block's five
    GEMMs, the absorbed attention (read or multiply) and the decode kernel's own fixed cost."""
    from planner.core.step import gemm, step_time_for
    from planner.core.step.overhead import GEMMS_PER_MLA_BLOCK
    from planner.sources.presets import load_model_preset

    v3 = load_model_preset("deepseek-v3")
    gpu = find_gpu(CARDS[card])
    got: dict[tuple[str, str], list[float]] = {}
    for r in rows:
        if r["table"] != "mla_module" or r["card"] != card:
            continue
        kv_bytes = KV_BYTES[r["kv"]]
        st = step_time_for(v3, gpu, tp=8, kv_dtype_bytes=kv_bytes)
        weights = v3.attention_params / v3.num_layers / 8 * WEIGHT_BYTES[r["gemm"]]
        priced_ms = (
            gemm.read_ms(round(weights), st.bandwidth_bytes_per_s * st.bandwidth_efficiency)
            + GEMMS_PER_MLA_BLOCK * (st.family.gemm_floor_ms if st.family else 0.0)
            + st.decode_attention_ms(r["batch"] * r["context"] * 576 * kv_bytes)
            + family.HOPPER_ATTENTION_FIXED_MS
        )
        got.setdefault((r["gemm"], r["kv"]), []).append(r["us"] - priced_ms * 1e3)
    return {key: (statistics.median(v), len(v)) for key, v in got.items()}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rows", type=Path, default=ROWS)
    ap.add_argument("--extract", type=Path, help="aiconfigurator's systems/data directory")
    args = ap.parse_args()
    if args.extract is not None:
        rows = extract(args.extract)
        args.rows.write_text("".join(json.dumps(r) + "\n" for r in rows))
        print(f"wrote {len(rows)} rows to {args.rows}")
    rows = load(args.rows)
    for card in CARDS:
        fixed_us, share, n = decode_gemm_fit(rows, card)
        print(
            f"{card} bf16 GEMMs at {'/'.join(map(str, DECODE_M))} tokens ({n} rows): "
            f"{fixed_us:.2f} us + bytes at {share:.3f} of peak (planner, Hopper's measured: "
            f"{family.HOPPER_GEMM_FLOOR_MS * 1e3:.1f} us, {family.HOPPER_BANDWIDTH_EFFICIENCY})"
        )
    planner_shares = {"h200_sxm": family.HOPPER_MOE_SHARES, "b200_sxm": family.BLACKWELL_MOE_SHARES}
    for card in CARDS:
        dense = dense_shares(rows, card)
        for kind, (share, n) in dense.items():
            print(f"{card} dense {kind} GEMMs at {LARGE_M[1]:,} tokens ({n} shapes): {share:.3f}")
        for kind in sorted({r["kind"] for r in rows if r["table"] == "moe" and r["card"] == card}):
            points = moe_points(rows, card, kind)
            ceiling, half, error = moe_width_fit(points)
            own = planner_shares[card].get(kind, (0.0, 0))
            print(
                f"{card} fused MoE ({kind}) at {'/'.join(f'{m:,}' for m in LARGE_M)} tokens "
                f"({len(points)} rows): {ceiling:.3f} x width / (width + {half}) of the rate, "
                f"median |log error| {error:.3f} (planner: {own[0]:.3f}, {own[1]})"
            )
    for card in CARDS:
        fixed_us, per_idle_us, n = moe_fixed_fit(rows, card)
        own = family.family_of(find_gpu(CARDS[card]))
        planner_us = (own.moe_kernel_ms_per_layer + family.MOE_BLOCK_FLOORS_MS) * 1e3
        print(
            f"{card} fused MoE at {'/'.join(map(str, MOE_DECODE_TOKENS))} tokens ({n} rows): "
            f"{fixed_us:.1f} us + {per_idle_us:.3f} us an idle expert beyond the routed "
            f"experts' stream (planner: {planner_us:.1f} us with three GEMM floors, "
            f"{own.moe_ms_per_idle_expert * 1e3:.3f} us)"
        )
    for card in OLDER_RELEASE_CARDS:
        fixed_us, per_idle_us, share, n = moe_one_token_fit(rows, card)
        own = family.family_of(find_gpu(card_gpu(card)))
        print(
            f"{card} fused MoE at one token ({n} rows, bf16): {fixed_us:.1f} us + "
            f"{per_idle_us:.3f} us an idle expert + the top-k experts at {share:.3f} of peak "
            f"(planner's {own.name}: {own.moe_kernel_ms_per_layer * 1e3:.1f} us + "
            f"{own.moe_ms_per_idle_expert * 1e3:.3f} us + {own.bandwidth_efficiency})"
        )
    for card in CARDS:
        fixed_us, per_idle_us, n = moe_fixed_fit(rows, card, "moe_sglang")
        own_sglang = family.family_of(find_gpu(CARDS[card])).sglang_moe_kernel_ms_per_layer
        print(
            f"{card} SGLang {SGLANG_VERSION} fused MoE at 1/2/4 tokens ({n} rows): "
            f"{fixed_us:.1f} us + {per_idle_us:.3f} us an idle expert (planner: "
            f"{((own_sglang or 0.0) + family.MOE_BLOCK_FLOORS_MS) * 1e3:.1f} us, 0)"
        )
    for card in CARDS:
        fixed_us, share, n = moe_stream_fit(rows, card, "mxfp4")
        own = family.family_of(find_gpu(CARDS[card])).moe_stream_share.get("mxfp4")
        print(
            f"{card} fused MoE (mxfp4) at 1-{MOE_STREAM_MAX_TOKENS} tokens ({n} rows): "
            f"{fixed_us:.1f} us + its routed experts at {share:.3f} of peak (planner: {own})"
        )
    for card in PCIE_CARDS:
        fixed_us, share, n = moe_stream_fit(rows, card, "mxfp4")
        own = family.family_of(find_gpu(card_gpu(card))).moe_stream_share.get("mxfp4")
        print(
            f"{card} fused MoE (mxfp4, Marlin) at 1-{MOE_STREAM_MAX_TOKENS} tokens ({n} rows): "
            f"{fixed_us:.1f} us + its routed experts at {share:.3f} of peak (planner: {own})"
        )
    for card in SGLANG_MXFP4_KERNELS:
        own = family.family_of(find_gpu(CARDS[card]))
        fixed_us, share, n = moe_stream_fit(rows, card, "mxfp4-mxfp8", "moe_sglang")
        print(
            f"{card} SGLang {SGLANG_VERSION} fused MoE (MXFP4 x MXFP8) at "
            f"1-{MOE_STREAM_MAX_TOKENS} tokens ({n} rows): {fixed_us:.1f} us + its routed "
            f"experts at {share:.3f} of peak (planner: "
            f"{own.moe_stream_share.get('mxfp4-mxfp8')})"
        )
        points = moe_points(rows, card, "mxfp4-mxfp8", "moe_sglang")
        ceiling, half, error = moe_width_fit(points)
        mine = family.BLACKWELL_MOE_SHARES.get("mxfp4-mxfp8", (0.0, 0))
        print(
            f"{card} SGLang {SGLANG_VERSION} fused MoE (MXFP4 x MXFP8) at "
            f"{'/'.join(f'{m:,}' for m in LARGE_M)} tokens ({len(points)} rows): {ceiling:.3f} "
            f"x width / (width + {half}) of the fp8 rate, median |log error| {error:.3f} "
            f"(planner: {mine[0]:.3f}, {mine[1]})"
        )
    h200, b200 = dense_shares(rows, "h200_sxm"), dense_shares(rows, "b200_sxm")
    for card, own in (
        ("l40s", family.ADA_OWN),
        ("rtx_pro_6000_server", family.SM120_OWN),
        ("b300_sxm", family.BLACKWELL_OWN | family.BLACKWELL_ULTRA_OWN),
    ):
        shares = dense_shares(rows, card)
        bf16 = shares["bf16"][0]
        print(
            f"{card} dense GEMMs at {LARGE_M[1]:,} tokens: bf16 {bf16:.3f}, "
            f"{bf16 / h200['bf16'][0]:.3f} of the H200's (planner: {own['compute_scale']:.3f}); "
            + ", ".join(
                f"{kind} / bf16 {shares[kind][0] / bf16:.3f} (planner: {own[key]:.3f})"
                for kind, key in (
                    ("fp8", "low_precision_scale"),
                    ("fp8-block", "block_fp8_scale"),
                    ("fp4", "fp4_scale"),
                )
                if kind in shares and key in own
            )
        )
    for label, measured, planner in (
        (
            "bf16 share over the H200's",
            b200["bf16"][0] / h200["bf16"][0],
            family.BLACKWELL_COMPUTE_SCALE,
        ),
        (
            "fp8 / bf16 shares",
            b200["fp8"][0] / b200["bf16"][0],
            family.BLACKWELL_LOW_PRECISION_SCALE,
        ),
        (
            "block-scaled fp8 / bf16",
            b200["fp8-block"][0] / b200["bf16"][0],
            family.BLACKWELL_BLOCK_FP8_SCALE,
        ),
        ("NVFP4 / bf16", b200["fp4"][0] / b200["bf16"][0], family.BLACKWELL_FP4_SCALE),
    ):
        print(f"b200_sxm dense GEMMs, {label}: {measured:.3f} (planner: {planner:.3f})")
    for card in [*CARDS, *OLDER_RELEASE_CARDS]:
        small_us, link_share = allreduce_fit(rows, card)
        own = family.family_of(find_gpu(card_gpu(card))).allreduce
        print(
            f"{card} custom all-reduce: {small_us:.1f} us up to 8 KB; 2-32 MB at "
            f"{link_share:.2f} of NVLink at TP {ALLREDUCE_GPUS} (planner: "
            f"{own.fixed_ms * 1e3 if own else 0:.1f} us, {own.link_share if own else 0:.2f})"
        )
    pcie = family.PCIE_ALLREDUCE
    for card in PCIE_CARDS:
        fixed_us, hop_us, share, error = pcie_allreduce_fit(rows, card)
        print(
            f"{card} NCCL all-reduce at 2/4/8 GPUs: {fixed_us:.2f} us + {hop_us:.2f} us a peer + "
            f"the ring's bytes at {share:.3f} of PCIe, median |error| {error:.3f} (planner: "
            f"{pcie.fixed_ms * 1e3:.1f} us, {pcie.hop_ms * 1e3:.1f} us, {pcie.link_share:.2f})"
        )
    for card in CARDS:
        pairs = mla_head_costs(rows, card)
        if pairs:
            measured = statistics.median(m for m, _ in pairs)
            modelled = statistics.median(p for _, p in pairs)
            print(
                f"{card} MLA decode module, 128 heads over 16 ({len(pairs)} batch x context "
                f"points, bf16): a median {measured:.0f} us more measured, {modelled:.0f} us "
                "modelled (the absorbed multiply past the latent's read)"
            )
    for card in CARDS:
        own_mla = family.family_of(find_gpu(CARDS[card])).mla_layer_ms
        for (kind, kv), (extra_us, n) in sorted(mla_module_extras(rows, card).items()):
            planner_us = own_mla.get(kind, (0.0, 0.0))[KV_BYTES[kv] == 1] * 1e3
            print(
                f"{card} MLA decode module at TP 8, {kind} projections, {kv} latent ({n} "
                f"points): {extra_us:.1f} us a layer beyond its priced parts (planner: "
                f"{planner_us:.1f})"
            )
    for card in CARDS:
        points = prefill_points(rows, card)
        ceilings, half, error = prefill_fit(points)
        shown = ", ".join(f"{dim}: {c:.3f}" for dim, c in ceilings.items())
        n = sum(len(p) for p in points.values())
        print(
            f"{card} prefill attention ({n} rows): ceiling x keys / (keys + {half}) of the bf16 "
            f"rate, keys the mean a query sees, ceiling by head size {shown}; median |log "
            f"error| {error:.3f}"
        )
    for card in CARDS:
        fits = {kv: attention_fit(rows, card, kv) for kv in KV_BYTES}
        for kv, (fixed_us, share, n) in fits.items():
            print(
                f"{card} decode attention, {kv} KV ({n} rows): {fixed_us:.1f} us + bytes at "
                f"{share:.3f} of peak"
            )
        own = family.family_of(find_gpu(CARDS[card])).fp8_kv_attention_scale
        print(
            f"{card} fp8 KV over bf16 KV: {fits['fp8'][1] / fits['bfloat16'][1]:.3f} (planner: "
            f"{own:.3f}; the bf16 share itself: Hopper's measured "
            f"{family.HOPPER_ATTENTION_BANDWIDTH_FRACTION})"
        )
    sglang_shares = {
        "h200_sxm": (family.HOPPER_SGLANG_MOE_SHARES, family.HOPPER_MOE_SHARES),
        "b200_sxm": (family.BLACKWELL_SGLANG_MOE_SHARES, family.BLACKWELL_MOE_SHARES),
    }
    for card in SGLANG_LARGE_M_CARDS:
        sglang_own, vllm_own = sglang_shares[card]
        for kind, (mine, mine_half) in sglang_own.items():
            ceiling, half, error = moe_width_fit(moe_points(rows, card, kind, "moe_sglang"))
            print(
                f"{card} SGLang {SGLANG_VERSION} fused MoE ({kind}) at "
                f"{'/'.join(f'{m:,}' for m in LARGE_M)} tokens: {ceiling:.3f} x width / (width + "
                f"{half}) of the rate, median |log error| {error:.3f} (planner: {mine:.3f}, "
                f"{mine_half}; vLLM's {vllm_own[kind][0]:.3f}, {vllm_own[kind][1]})"
            )
    for card, kernel in SGLANG_ATTENTION_KERNELS.items():
        fits = {kv: attention_fit(rows, card, kv, "attention_sglang") for kv in KV_BYTES}
        shares = ", ".join(f"{kv} KV {share:.3f}" for kv, (_, share, _) in fits.items())
        own_sglang = family.fp8_kv_scale(family.family_of(find_gpu(CARDS[card])), "sglang")
        print(
            f"{card} SGLang {SGLANG_VERSION} decode attention ({kernel}): {shares} of peak; fp8 "
            f"over bf16 {fits['fp8'][1] / fits['bfloat16'][1]:.3f} (planner: {own_sglang:.3f})"
        )
    for cards, gpu in ((("h100_sxm", "h200_sxm"), "h200"), (("b200_sxm",), "b200")):
        fixed_us, per_peer_us, error = nccl_latency_fit(rows, cards)
        own = family.family_of(find_gpu(gpu)).nccl_latency
        mine = "none" if own is None else f"{own.fixed_ms * 1e3:.1f} us + {own.hop_ms * 1e3:.2f}"
        print(
            f"{'/'.join(cards)} NCCL all-gather and reduce-scatter up to "
            f"{NCCL_LATENCY_MAX_BYTES // 1024} KB: {fixed_us:.1f} us + {per_peer_us:.2f} us a "
            f"peer, median |error| {error:.3f} (planner: {mine} us a peer)"
        )
    for card in DEEPGEMM_MOE_CARDS:
        fixed_us, per_expert_us, stream, multiply, error = deepgemm_moe_fit(rows, card)
        own = family.family_of(find_gpu(card_gpu(card)))
        print(
            f"{card} DeepGEMM's masked experts under DeepEP (SGLang {DEEPGEMM_MOE_VERSION}): "
            f"{fixed_us:.1f} us + {per_expert_us:.2f} us a local expert + max(stream at "
            f"{stream:.2f} of peak, multiply at {multiply:.2f} of the fp8 rate), median |error| "
            f"{error:.3f} (planner: {own.deepgemm_ms_per_local_expert * 1e3:.2f} us a local "
            f"expert, multiply at {own.deepep_moe_fp8_share})"
        )
    own_modes = {
        "deepep_ll": comm.DEEPEP_NVLINK.low_latency,
        "deepep_normal": comm.DEEPEP_NVLINK.normal,
    }
    for card, gpus in DEEPEP_CARDS.items():
        for table, own in own_modes.items():
            fixed_us, share, error, n = deepep_fit(rows, card, table)
            print(
                f"{card} DeepEP {table.removeprefix('deepep_')} kernels over {gpus} GPUs, dispatch "
                f"+ combine ({n} rows): {fixed_us:.1f} us + bytes at {share:.3f} of NVLink, "
                f"median |error| {error:.3f} (planner: {own.fixed_ms * 1e3:.1f} us, "
                f"{own.link_share:.3f})"
            )


if __name__ == "__main__":
    main()
