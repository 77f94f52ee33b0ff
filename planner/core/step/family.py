"""GPU families and the step model's constants for each: which cards share kernels and
efficiencies, and whether a family's figures were fitted on measurements or extrapolated."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict

from planner.core.specs import GpuSpec

Basis = Literal["fitted", "extrapolated"]


class Family(BaseModel):
    """One GPU family's step-model constants and where they come from."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    name: str
    bandwidth_efficiency: float
    compute_scale: float = 1.0
    low_precision_scale: float = 1.0
    attention_bandwidth_scale: float = 1.0
    basis: Basis
    source: str


# Achievable share of peak HBM bandwidth in decode GEMVs and attention. Ampere and Hopper:
# 0.75, fitted on the 38 public rows of benchmarks/data/step-time.jsonl (LMDeploy on A100
# Llama-2 7B/13B, vLLM on H100 Qwen3-8B, vLLM on A100 Mixtral-8x22B TP 4/8). Other NVIDIA
# families run the same kernels (CUTLASS / FlashAttention / Triton) and take the same share:
# extrapolated. AMD CDNA: 0.60 (no step-time row yet). ROCm's own kernel tables put it there:
# AITER's tuned fp8 GEMMs at M <= 16 tokens (ROCm/aiter aiter/configs/model_configs/
# a8w8_blockscale_*tuned_gemm_*.csv, commit e404860, 2026-08; each row a measured kernel time)
# stream their largest matrices, 89 and 131 MB, at 3.3-3.6 TB/s on gfx942 with 304 CUs (0.62-0.68
# of MI300X's 5.3 TB/s, 0.54-0.60 of MI325X's 6.0: the tables do not say which card) and those of
# 80 MB and more at a median 5.31 TB/s on gfx950 with 256 CUs (288 rows: 0.66 of MI350X /
# MI355X's 8.0). Smaller matrices stream slower (40-80 MB: 2.2 and 4.2 TB/s), a fixed ~7-10 us
# a kernel that the per-layer kernel cost stands for only in part. The one
# bandwidth-bound AMD serving row in benchmarks/data/e2e.jsonl agrees: SGLang 0.5.13 on one
# MI300X, Gemma-4-31B in bf16 at one client, TPOT 21.49 ms measured against 21.5 ms modelled,
# nearly all of it the weight read (sgl-project/sglang PR 31216, 2026-07). A card's own
# measured figure (`GpuSpec.achievable_bandwidth_fraction`, e.g. the H200's) wins over its
# family's.
NVIDIA_BANDWIDTH_EFFICIENCY = 0.75
AMD_BANDWIDTH_EFFICIENCY = 0.60
OTHER_BANDWIDTH_EFFICIENCY = 0.70  # other vendors: between the two, an assumption
# Share of the datasheet's dense tensor-core rate a family's GEMM and attention kernels reach,
# relative to NVIDIA's (whose absolute shares are gemm.FLOPS_EFFICIENCY and
# attention.ATTENTION_FLOPS_EFFICIENCY). SemiAnalysis, "MI300X vs H100 vs H200 Benchmark Part 1:
# Training" (2024-12), measured large BF16 GEMMs at about 620 TFLOP/s on MI300X (47% of its
# 1,307) against about 720 on H100 (73% of 989), and FP8 at about 38% against 65%: CDNA3 reaches
# about 0.62 of Hopper's share. CDNA4 and CDNA2 take the same factor (extrapolated).
AMD_COMPUTE_SCALE = 0.62
# Share of the fp8 (and fp4) tensor-core rate the linear layers reach, relative to the 16-bit
# GEMMs' share of theirs: the same SemiAnalysis measurements put H100's FP8 GEMMs at about 65%
# of their 1,979 TFLOP/s against 73% for BF16 (0.89), MI300X's at about 38% against 47% (0.81).
# Low-precision GEMMs keep the same tiles and epilogues while the multiply runs twice as fast,
# so a larger part of their time is not the multiply. FP4 (NVFP4 / MXFP4 w4a4) takes the same
# factor: extrapolated, no measurement.
NVIDIA_LOW_PRECISION_SCALE = 0.65 / 0.73
AMD_LOW_PRECISION_SCALE = 0.38 / 0.47
# Decode attention's share of the HBM bandwidth, relative to the weight reads' (NVIDIA: the same;
# FlashAttention / FlashInfer decode kernels stream the KV cache as fast as GEMVs stream
# weights). CDNA3: half, measured on the one AMD source with attention-bound rows
# (sgl-project/sglang PR 31216, SGLang 0.5.13 on one MI300X, Gemma-4-31B bf16, 1,000-token
# prompts and outputs): TPOT 21.49 / 31.45 / 62.93 ms at 1 / 16 / 64 clients against 21.3 /
# 26.9 / 44.9 with the KV read at the weights' share, 21.5 / 30.4 / 58.6 at half of it (ROCm
# runs those head sizes on the Triton attention backend). CDNA2 and CDNA4 take the same.
AMD_ATTENTION_BANDWIDTH_SCALE = 0.5
# How each basis reads after "<family> constants <basis> ..." in the output.
FITTED_SOURCE = "on public decode step times (benchmarks/data/step-time.jsonl)"
NVIDIA_EXTRAPOLATED = "from Ampere and Hopper; no measured step times"
AMD_EXTRAPOLATED = "from ROCm kernel tables (AITER) and one serving row; no measured step times"

# NVIDIA families by CUDA compute capability major.minor (developer.nvidia.com/cuda-gpus).
NVIDIA_FAMILIES = {
    "7.0": "volta",
    "7.5": "turing",
    "8.0": "ampere",
    "8.6": "ampere",
    "8.7": "ampere",
    "8.9": "ada",
    "9.0": "hopper",
    "10.0": "blackwell",
    "10.3": "blackwell",
    "12.0": "blackwell",
    "12.1": "blackwell",
}
FITTED_FAMILIES = frozenset({"ampere", "hopper"})
# AMD Instinct families by catalog id prefix (rocm.docs.amd.com gpu-specs: MI250X gfx90a
# CDNA2, MI300X / MI325X gfx942 CDNA3, MI350X / MI355X gfx950 CDNA4).
AMD_FAMILIES = (("mi25", "cdna2"), ("mi30", "cdna3"), ("mi32", "cdna3"), ("mi35", "cdna4"))


def family_of(gpu: GpuSpec) -> Family:
    """The family a card belongs to and its constants (a vendor default when unknown)."""
    if gpu.vendor == "nvidia":
        name = NVIDIA_FAMILIES.get(gpu.compute_capability or "", "nvidia")
        fitted = name in FITTED_FAMILIES
        return Family(
            name=name,
            bandwidth_efficiency=NVIDIA_BANDWIDTH_EFFICIENCY,
            low_precision_scale=NVIDIA_LOW_PRECISION_SCALE,
            basis="fitted" if fitted else "extrapolated",
            source=FITTED_SOURCE if fitted else NVIDIA_EXTRAPOLATED,
        )
    if gpu.vendor == "amd":
        name = next((f for prefix, f in AMD_FAMILIES if gpu.id.startswith(prefix)), "amd")
        return Family(
            name=name,
            bandwidth_efficiency=AMD_BANDWIDTH_EFFICIENCY,
            compute_scale=AMD_COMPUTE_SCALE,
            low_precision_scale=AMD_LOW_PRECISION_SCALE,
            attention_bandwidth_scale=AMD_ATTENTION_BANDWIDTH_SCALE,
            basis="extrapolated",
            source=AMD_EXTRAPOLATED,
        )
    return Family(
        name=gpu.vendor,
        bandwidth_efficiency=OTHER_BANDWIDTH_EFFICIENCY,
        basis="extrapolated",
        source="between the NVIDIA and AMD figures; no measured step times",
    )


def bandwidth_efficiency(gpu: GpuSpec) -> float:
    """The GPU's measured achievable bandwidth share, else its family's."""
    if gpu.achievable_bandwidth_fraction is not None:
        return gpu.achievable_bandwidth_fraction
    return family_of(gpu).bandwidth_efficiency
