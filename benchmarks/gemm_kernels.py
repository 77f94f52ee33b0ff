"""Published GEMM kernel times against the step model's AMD constants.

benchmarks/data/gemm-kernels.jsonl holds kernel times their authors published: ROCm's AITER
tuning tables (each tuned GEMM's measured time, by CU count: 304 for gfx942, MI300X / MI325X;
256 for gfx950, MI350X / MI355X; the fastest pick where several tables tune one shape) and
DeepGEMM's README table for an H800. This prints what planner/core/step/family.py takes from
them: the streaming share and fixed cost of AMD's decode GEMMs (a least-squares line through
gfx942's rows at 1-16 tokens), the large matrices' share on gfx950, the fixed time an AMD GEMM
keeps beyond an H800 one of the same shape, the share of the tensor-core rate each kernel
reaches at 8,192-32,768 tokens (prefill: CDNA4's BF16 and FP8 factors, block-scaled FP8 on
both families), how much longer than the overlapped stream and multiply the GEMMs at
128-8,192 tokens take (large decode batches and prefill chunks: the mid-M factors SGLang's
steps take on AMD), and AITER's fused MoE: the share of the rate it reaches at 8,192-32,768
tokens (the family's MoE factors) and, at 16-64 tokens, against the expert read the model
charges.

    python benchmarks/gemm_kernels.py [--rows FILE]
"""

from __future__ import annotations

import argparse
import statistics
import sys
from pathlib import Path
from typing import Any

import numpy as np

from planner.core.step import family, gemm
from planner.sources.presets import find_gpu

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "benchmarks"))
from nvidia_kernels import load, moe_width_fit  # noqa: E402

ROWS = ROOT / "benchmarks" / "data" / "gemm-kernels.jsonl"
# Weight matrices of at least this many bytes count as large (the streaming share's regime).
LARGE_BYTES = 80e6


def gemm_us(row: dict[str, Any]) -> float:
    """A GEMM row's time, us (DeepGEMM's table gives TFLOP/s)."""
    if "us" in row:
        return float(row["us"])
    return 2 * row["m"] * row["n"] * row["k"] / (row["tflops"] * 1e12) * 1e6


def fp8_bytes(row: dict[str, Any]) -> int:
    """The weight matrix an fp8 GEMM streams: N x K bytes (its block scales are 1/16,384 of it)."""
    return int(row["n"] * row["k"])


def peak_bytes_per_s(gpu: str) -> float:
    """A card's peak HBM bandwidth, bytes/s, from the catalog (gfx942 with 304 CUs is MI300X or
    MI325X; gfx950 with 256 is MI350X or MI355X)."""
    return float(find_gpu(gpu).hbm_bandwidth_bytes_per_s or 0)


def decode_rows(rows: list[dict[str, Any]], arch: str) -> list[dict[str, Any]]:
    """An architecture's GEMMs at 1-16 tokens (decode)."""
    return [r for r in rows if "n" in r and r["arch"] == arch and r["m"] <= 16]


def decode_fit(rows: list[dict[str, Any]], arch: str) -> tuple[float, float, int]:
    """The least-squares line through an architecture's GEMMs at 1-16 tokens: fixed us a
    kernel, the bytes/s its weights stream at, and how many shapes it went through."""
    decode = decode_rows(rows, arch)
    x = np.array([fp8_bytes(r) for r in decode], dtype=np.float64)
    y = np.array([gemm_us(r) for r in decode])
    fixed_us, us_per_byte = np.linalg.lstsq(np.vstack([np.ones_like(x), x]).T, y, rcond=None)[0]
    return float(fixed_us), float(1e6 / us_per_byte), len(decode)


# The AMD kernel DeepGEMM's block-scaled FP8 GEMMs are compared with.
BLOCK_FP8 = "a8w8 block-scaled GEMM"


def same_shape_floors(
    rows: list[dict[str, Any]], arch: str, card: str
) -> list[tuple[dict[str, Any], float, float]]:
    """Each of an architecture's block-scaled FP8 GEMMs DeepGEMM's H800 table also times, with
    the time each keeps beyond its weight stream at its family's share (AMD's, then the
    H800's), us."""
    h800 = {(r["m"], r["n"], r["k"]): r for r in rows if r["arch"].startswith("sm90")}
    amd_rate = family.AMD_BANDWIDTH_EFFICIENCY * peak_bytes_per_s(card)
    nvidia_rate = family.NVIDIA_BANDWIDTH_EFFICIENCY * peak_bytes_per_s("h800")
    pairs = []
    for r in rows:
        twin = h800.get((r.get("m"), r.get("n"), r.get("k")))
        if r["arch"] != arch or twin is None or r.get("kernel") != BLOCK_FP8:
            continue
        amd = gemm_us(r) - fp8_bytes(r) / amd_rate * 1e6
        nvidia = gemm_us(twin) - fp8_bytes(twin) / nvidia_rate * 1e6
        pairs.append((r, amd, nvidia))
    return pairs


# Token counts at which a GEMM's share of the tensor-core rate is read (prefill's regime), and
# the smallest N and K that count as a large matrix there.
LARGE_M = (8192, 16384, 32768)
LARGE_NK = 2048
# The card each architecture's rows are read against (gfx942 with 304 CUs: MI300X and MI325X
# share its rates; gfx950 with 256: MI355X, whose rates the MI350X's trail by its clock).
ARCH_CARD = {"gfx942": "mi300x", "gfx950": "mi355x"}


def peak_flops(arch: str, kernel: str) -> float:
    """The dense rate of a kernel's input dtype on the architecture's card, FLOP/s."""
    gpu = find_gpu(ARCH_CARD[arch])
    rates = {"bf16": gpu.bf16_dense_flops, "a8w8": gpu.fp8_dense_flops, "a4w4": gpu.fp4_dense_flops}
    return float(rates[kernel.split()[0]] or 0)


def large_m_shares(rows: list[dict[str, Any]]) -> dict[tuple[str, str], tuple[float, int]]:
    """The median share of the tensor-core rate over each architecture's and kernel's GEMMs at
    LARGE_M tokens with N, K >= LARGE_NK, and how many shapes it went through."""
    shares: dict[tuple[str, str], list[float]] = {}
    for r in rows:
        if "n" not in r or r["m"] not in LARGE_M or min(r["n"], r["k"]) < LARGE_NK:
            continue
        flops = 2 * r["m"] * r["n"] * r["k"] / (gemm_us(r) * 1e-6)
        share = flops / peak_flops(r["arch"], r["kernel"])
        shares.setdefault((r["arch"], r["kernel"]), []).append(share)
    return {key: (statistics.median(v), len(v)) for key, v in sorted(shares.items())}


def modelled_shares() -> dict[tuple[str, str], float]:
    """The isolated-GEMM shares the planner's AMD factors stand for (H100's BF16 share x the
    family's compute factor x its low-precision or block-scaled factor)."""
    cdna3 = family.CDNA3_BF16_GEMM_SHARE
    cdna4 = family.HOPPER_BF16_GEMM_SHARE * family.CDNA4_COMPUTE_SCALE
    return {
        ("gfx942", "a8w8 block-scaled GEMM"): cdna3 * family.CDNA3_BLOCK_FP8_SCALE,
        ("gfx950", "bf16 GEMM"): cdna4,
        ("gfx950", "a8w8 GEMM"): cdna4 * family.CDNA4_LOW_PRECISION_SCALE,
        ("gfx950", "a8w8 block-scaled GEMM"): cdna4 * family.CDNA4_BLOCK_FP8_SCALE,
        ("gfx950", "a4w4 block-scaled GEMM"): cdna4 * family.CDNA4_LOW_PRECISION_SCALE,
    }


# The planner's MoE kinds by the fused MoE rows' kernel names, and the rate each is read against
# (MXFP4 with FP8 activations at the FP8 rate, as the planner runs AMD's MXFP4 exports on AMD).
MOE_KINDS = {
    "fused MoE, bf16": ("bf16", "bf16"),
    "fused MoE, fp8 per-token": ("fp8", "a8w8"),
    "fused MoE, fp8 block-scaled": ("fp8-block", "a8w8"),
    "fused MoE, mxfp4 w4a8": ("mxfp4-fp8", "a8w8"),
    "fused MoE, mxfp4 w4a4": ("fp4", "a4w4"),
}


def moe_large_m_points(
    rows: list[dict[str, Any]],
) -> dict[tuple[str, str], list[tuple[float, float]]]:
    """(expert width, share of the rate) of AITER's fused MoE layers at LARGE_M tokens (both
    grouped GEMMs: 6 x tokens x top-k x model_dim x inter_dim FLOPs; inter_dim is the width one
    GPU multiplies), by architecture and the planner's MoE kind."""
    points: dict[tuple[str, str], list[tuple[float, float]]] = {}
    for r in rows:
        if "experts" not in r or r["tokens"] not in LARGE_M:
            continue
        kind, rate = MOE_KINDS[r["kernel"]]
        flops = 6 * r["tokens"] * r["topk"] * r["model_dim"] * r["inter_dim"]
        share = flops / (r["us"] * 1e-6) / peak_flops(r["arch"], rate)
        points.setdefault((r["arch"], kind), []).append((float(r["inter_dim"]), share))
    return dict(sorted(points.items()))


def moe_large_m_fits(
    rows: list[dict[str, Any]],
) -> dict[tuple[str, str], tuple[float, int | None, int]]:
    """Each architecture's and kind's fused MoE share: ceiling x width / (width + half) where
    the tables time two widths or more (nvidia_kernels.moe_width_fit), else the median share
    and no half width; and how many shapes."""
    fits: dict[tuple[str, str], tuple[float, int | None, int]] = {}
    for key, points in moe_large_m_points(rows).items():
        if len({w for w, _ in points}) < 2:
            fits[key] = (statistics.median(s for _, s in points), None, len(points))
            continue
        ceiling, half, _ = moe_width_fit(points)
        fits[key] = (ceiling, half, len(points))
    return fits


# Token counts between decode and the large-M regime at which measured and modelled GEMM times
# are set side by side.
MID_M = (128, 256, 512, 1024, 2048, 4096, 8192)


def modelled_us(row: dict[str, Any], share: float) -> float:
    """The step model's time for a GEMM row, us: its weights streamed at the AMD share of the
    card's bandwidth and its multiply at `share` of the rate, overlapped as gemm.overlapped_ms
    overlaps them (the per-kernel floor aside)."""
    arch, kernel = row["arch"], row["kernel"]
    weight_bytes = row["n"] * row["k"] * (2 if kernel.startswith("bf16") else 1)
    stream_s = weight_bytes / (family.AMD_BANDWIDTH_EFFICIENCY * peak_bytes_per_s(ARCH_CARD[arch]))
    multiply_s = 2 * row["m"] * row["n"] * row["k"] / (peak_flops(arch, kernel) * share)
    # the overlap is a norm of the two times, the same in any unit
    return gemm.overlapped_ms(stream_s * 1e6, multiply_s * 1e6)


def mid_m_ratios(rows: list[dict[str, Any]]) -> dict[tuple[str, str], dict[int, float]]:
    """The median of measured (less the per-kernel floor the model adds apart) over modelled
    time of each architecture's and kernel's GEMMs at each of MID_M tokens (N, K >=
    LARGE_NK), where the planner models its share of the rate."""
    shares = modelled_shares()
    floor_us = family.AMD_GEMM_FLOOR_MS * 1e3
    got: dict[tuple[str, str], dict[int, list[float]]] = {}
    for r in rows:
        key = (r.get("arch", ""), r.get("kernel", ""))
        if key not in shares or r["m"] not in MID_M or min(r["n"], r["k"]) < LARGE_NK:
            continue
        ratio = (gemm_us(r) - floor_us) / modelled_us(r, shares[key])
        got.setdefault(key, {}).setdefault(r["m"], []).append(ratio)
    return {
        key: {m: statistics.median(v) for m, v in sorted(by_m.items())}
        for key, by_m in sorted(got.items())
    }


# A fused MoE layer's bytes a weight element, by the rows' kernel names (MXFP4: 4 bits and an
# e8m0 scale a 32).
MOE_WEIGHT_BYTES = {
    "fused MoE, bf16": 2.0,
    "fused MoE, fp8 per-token": 1.0,
    "fused MoE, fp8 block-scaled": 1.0,
    "fused MoE, mxfp4 w4a8": 0.5 + 1 / 32,
    "fused MoE, mxfp4 w4a4": 0.5 + 1 / 32,
}
MOE_DECODE_TOKENS = (1, 2, 4)


def moe_decode_fit(rows: list[dict[str, Any]], arch: str) -> tuple[float, float, int]:
    """AITER's fused MoE layers (its two grouped-GEMM stages) at MOE_DECODE_TOKENS less their
    routed experts' stream at the family's share of peak, fitted as a fixed time + a time per
    idle local expert (experts no token routed to), us: (fixed, per idle expert, rows)."""
    stream = family.AMD_BANDWIDTH_EFFICIENCY * peak_bytes_per_s(ARCH_CARD[arch])
    idle, left = [], []
    for r in rows:
        if r.get("arch") != arch or "experts" not in r or r["tokens"] not in MOE_DECODE_TOKENS:
            continue
        experts, topk = r["experts"], r["topk"]
        routed = experts * (1 - (1 - topk / experts) ** r["tokens"])
        expert_bytes = 3 * r["model_dim"] * r["inter_dim"] * MOE_WEIGHT_BYTES[r["kernel"]]
        idle.append(experts - routed)
        left.append(r["us"] - routed * expert_bytes / stream * 1e6)
    fixed_us, per_idle_us = np.linalg.lstsq(
        np.vstack([np.ones(len(idle)), idle]).T, np.array(left), rcond=None
    )[0]
    return float(fixed_us), float(per_idle_us), len(left)


def _every_fp8_expert_routed(row: dict[str, Any]) -> bool:
    """A gfx942 block-scaled fp8 fused MoE row at 16-64 tokens that routes to 99% of its
    experts (the regime where the whole expert read is the kernel's floor)."""
    if row.get("kernel") != "fused MoE, fp8 block-scaled" or row["arch"] != "gfx942":
        return False
    if not 16 <= row["tokens"] <= 64:
        return False
    unrouted = (1 - row["topk"] / row["experts"]) ** row["tokens"]
    return bool(unrouted <= 0.01)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rows", type=Path, default=ROWS)
    args = ap.parse_args()
    rows = load(args.rows)
    fixed_us, stream, shapes = decode_fit(rows, "gfx942")
    sizes = [fp8_bytes(r) for r in decode_rows(rows, "gfx942")]
    print(
        f"gfx942 GEMMs at 1-16 tokens ({shapes} shapes, {min(sizes) / 1e6:.1f}-"
        f"{max(sizes) / 1e6:.0f} MB): {fixed_us:.1f} us + bytes / {stream / 1e12:.2f} TB/s = "
        f"{stream / peak_bytes_per_s('mi300x'):.2f} of MI300X's peak, "
        f"{stream / peak_bytes_per_s('mi325x'):.2f} of MI325X's "
        f"(planner: {family.AMD_BANDWIDTH_EFFICIENCY})"
    )
    large = [r for r in decode_rows(rows, "gfx950") if fp8_bytes(r) >= LARGE_BYTES]
    if large:
        rate = statistics.median(fp8_bytes(r) / gemm_us(r) * 1e6 for r in large)
        print(
            f"gfx950 GEMMs at 1-16 tokens, {LARGE_BYTES / 1e6:.0f} MB and more ({len(large)} "
            f"shapes): median {rate / 1e12:.2f} TB/s = "
            f"{rate / peak_bytes_per_s('mi355x'):.2f} of MI355X's peak"
        )
    for arch, card in (("gfx942", "mi300x"), ("gfx950", "mi355x")):
        pairs = same_shape_floors(rows, arch, card)
        for r, amd, nvidia in pairs:
            print(
                f"  M {r['m']} N {r['n']:,} K {r['k']:,}: {arch} {gemm_us(r):.1f} us; beyond "
                f"their weight streams {amd:.1f} us, the H800's {nvidia:.1f}: "
                f"{amd - nvidia:+.1f} us"
            )
        if pairs:
            kept = statistics.median(amd - nvidia for _, amd, nvidia in pairs)
            print(
                f"{arch} keeps a median {kept:.1f} us more a GEMM than the H800 ({len(pairs)} "
                f"shapes; planner: {family.AMD_GEMM_FLOOR_MS * 1e3:.0f} us)"
            )
    modelled = modelled_shares()
    for (arch, kernel), (share, shapes) in large_m_shares(rows).items():
        print(
            f"{arch} {kernel}s at {'/'.join(f'{m:,}' for m in LARGE_M)} tokens, N and K >= "
            f"{LARGE_NK:,} ({shapes} shapes): median {share:.3f} of the rate (planner: "
            f"{modelled[arch, kernel]:.3f})"
        )
    print(
        "(measured - the 6 us floor) / modelled time of the GEMMs between decode and prefill "
        "(median by tokens; the planner's factors for SGLang: family.*_MID_M_SLOWDOWN):"
    )
    for (arch, kernel), by_m in mid_m_ratios(rows).items():
        cells = "  ".join(f"{m:,}: {ratio:.2f}" for m, ratio in by_m.items())
        print(f"  {arch} {kernel}s  {cells}")
    planner_moe = {
        "gfx942": (family.CDNA3_MOE_SHARES, family.CDNA3_DENSE_GEMM_SHARES),
        "gfx950": (family.CDNA4_MOE_SHARES, family.CDNA4_DENSE_GEMM_SHARES),
    }
    points = moe_large_m_points(rows)
    for (arch, kind), (ceiling, half, shapes) in moe_large_m_fits(rows).items():
        moe_shares, dense_shares = planner_moe[arch]
        own_ceiling, own_half = moe_shares.get(kind, (0.0, None))
        if half:
            form = f"{ceiling:.3f} x width / (width + {half})"
            own = f"{own_ceiling:.3f}, {own_half}"
        else:  # one width: the planner's share there (its curve may carry a borrowed half)
            width = points[(arch, kind)][0][0]
            form = f"median {ceiling:.3f} at width {width:,.0f}"
            at = own_ceiling * (width / (width + own_half) if own_half else 1.0)
            own = f"{at:.3f} there" + (f"; {own_ceiling:.3f}, {own_half}" if own_half else "")
        print(
            f"{arch} fused MoE ({kind}) at {'/'.join(f'{m:,}' for m in LARGE_M)} tokens "
            f"({shapes} shapes): {form} of the rate, ceiling {ceiling / dense_shares[kind]:.2f} "
            f"of the dense share (planner: {own})"
        )
    for arch, card in ARCH_CARD.items():
        fixed_us, per_idle_us, n = moe_decode_fit(rows, arch)
        idle_us = family.moe_decode_costs(family.family_of(find_gpu(card)), "sglang")[1] * 1e3
        print(
            f"{arch} fused MoE at {'/'.join(map(str, MOE_DECODE_TOKENS))} tokens ({n} rows): "
            f"{fixed_us:.1f} us + {per_idle_us:.3f} us an idle expert beyond the routed "
            f"experts' stream (planner, SGLang: {family.AMD_GEMM_FLOOR_MS * 3e3:.0f} us of "
            f"three GEMM floors, {idle_us:.3f} us)"
        )
    amd_rate = family.AMD_BANDWIDTH_EFFICIENCY * peak_bytes_per_s("mi300x")
    for r in (r for r in rows if _every_fp8_expert_routed(r)):
        # every expert is routed: their gate, up and down, one byte each
        experts_bytes = r["experts"] * 3 * r["model_dim"] * r["inter_dim"]
        print(
            f"fused MoE on gfx942, {r['experts']} experts of {r['model_dim']:,} x "
            f"{r['inter_dim']:,}, {r['tokens']} tokens: {r['us']:.0f} us measured, "
            f"{experts_bytes / r['us'] / 1e6:.2f} TB/s; the model's read "
            f"{experts_bytes / amd_rate * 1e6:.0f} us"
        )


if __name__ == "__main__":
    main()
