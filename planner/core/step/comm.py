"""Communication: the tensor-parallel all-reduces of a forward pass, pipeline sends between
stages, and the links they run over (NVLink / xGMI, PCIe, NVLink-C2C to host memory)."""

from __future__ import annotations

import re

from planner.core.specs import GpuSpec

# One-shot all-reduce latency per peer (each rank reads every other rank's buffer: latency
# grows with TP - 1), fitted on the vLLM Mixtral-8x22B TP 4 and TP 8 rows (A100, NVLink).
ALLREDUCE_HOP_MS = 0.008
# Link bandwidth when the catalog names none (PCIe Gen4 x16, one direction).
DEFAULT_LINK_BYTES_PER_S = 32e9
# One pipeline stage's send to the next across nodes: NCCL send/recv of a micro-batch's
# activations over InfiniBand, latency-bound at decode sizes (nccl-tests sendrecv_perf
# small-message latencies are tens of microseconds over IB); an estimate until measured.
PP_HOP_MS = 0.03
# Grace-Hopper / Grace-Blackwell superchips reach host memory over NVLink-C2C, 900 GB/s both
# ways (NVIDIA GH200 Grace Hopper Superchip datasheet): 450 GB/s each way.
NVLINK_C2C_BYTES_PER_S = 450e9
GRACE_PREFIXES = ("gh200", "gb200", "gb300")
# All-reduces per decoder layer: after attention's output projection and after the MLP.
ALLREDUCES_PER_LAYER = 2


def allreduce_ms(
    tp: int, layers: int, message_bytes: int, hop_ms: float, link_bytes_per_s: float
) -> float:
    """TP all-reduces of one forward pass (two per layer), each (TP - 1) hop latencies plus
    the ring's 2 (TP - 1) / TP of the message over the link, ms; zero at TP 1."""
    if tp <= 1:
        return 0.0
    one = (tp - 1) * hop_ms + message_bytes * 2 * (tp - 1) / tp / link_bytes_per_s * 1e3
    return ALLREDUCES_PER_LAYER * layers * one


def pipelined_ms(stage_ms: float, overhead_ms: float, pp: int, hop_ms: float) -> float:
    """A step through `pp` stages from one stage's time (engine overhead included once): the
    engine keeps `pp` micro-batches in flight, so each sequence's token waits for every stage
    of its micro-batch and the sends between them (vLLM's virtual engines / batch queue, one
    micro-batch per stage)."""
    if pp <= 1:
        return stage_ms
    return pp * (stage_ms - overhead_ms) + (pp - 1) * hop_ms + overhead_ms


def link_bytes_per_s(gpu: GpuSpec) -> float:
    """One direction of the GPU's fastest listed link (catalogs print bidirectional GB/s)."""
    if not gpu.interconnect:
        return DEFAULT_LINK_BYTES_PER_S
    rates = [float(x) for x in re.findall(r"(\d+(?:\.\d+)?)\s*GB/s", gpu.interconnect)]
    return max(rates) * 1e9 / 2 if rates else DEFAULT_LINK_BYTES_PER_S


def host_link_bytes_per_s(gpu: GpuSpec) -> float:
    """One direction of the GPU's link to host memory: NVLink-C2C on Grace superchips, else
    its PCIe (catalogs print bidirectional GB/s), else PCIe Gen4 x16. A ceiling: pinned copies
    reach most of it, pageable ones far less."""
    if gpu.id.startswith(GRACE_PREFIXES):
        return NVLINK_C2C_BYTES_PER_S
    found = re.search(r"PCIE\s+(\d+(?:\.\d+)?)\s*GB/s", gpu.interconnect or "", re.IGNORECASE)
    return float(found.group(1)) * 1e9 / 2 if found else DEFAULT_LINK_BYTES_PER_S
