"""Communication: the tensor-parallel all-reduces of a forward pass, pipeline sends between
stages, and the links they run over (NVLink / xGMI, PCIe, NVLink-C2C to host memory)."""

from __future__ import annotations

import re

from pydantic import BaseModel, ConfigDict, Field

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
# A layer whose q / k RMSNorm spans every head adds a third: each token's two sums of squares
# (q's and k's), 4 bytes each (SGLang 0.5.13 MiniMaxM2QKRMSNorm's fp32 sums; vLLM 0.14.0
# stacks q's and k's variances in one tensor): latency-bound.
QK_NORM_SUMS_BYTES_PER_TOKEN = 2 * 4
# AMD Instinct 8-GPU platforms (MI300X, MI325X, MI355X) join their GPUs in a full mesh: each
# GPU has 7 xGMI links, one to each peer, and the catalog's figure is their sum (AMD Instinct
# MI300X platform data sheet: 896 GB/s = 7 x 128 GB/s; MI355X 7 x 153.6 GB/s). A collective
# over k of the GPUs runs on the k - 1 links among them, a transfer between two on one link.
# NVLink boards join their GPUs through NVSwitch chips, so any group reaches the full rate.
# MI250X boards (two dies per OAM, links of unequal width) are read the same way: an estimate.
XGMI_PEER_LINKS = 7
# GPUs one NVLink / xGMI fabric joins: the 8 of an HGX / DGX / OAM baseboard, and the 72 of a
# GB200 / GB300 NVL72 rack (NVIDIA GB200 NVL72 product page: "72 Blackwell GPUs ... a single
# NVLink domain"). A collective over more GPUs crosses nodes.
NODE_DOMAIN_GPUS = 8
NVL72_DOMAIN_GPUS = 72
NVL72_PREFIXES = ("gb200", "gb300")
# GPUs one host (one OS, one engine process tree) drives: the 8 of an HGX / DGX / OAM server;
# an NVL72 rack's compute tray holds 4 (NVIDIA GB200 NVL72: 18 compute trays of 2 Grace CPUs and
# 4 Blackwell GPUs). An engine server over more GPUs spans nodes (its --nnodes).
HOST_GPUS = 8
NVL72_HOST_GPUS = 4


def host_gpus(gpu: GpuSpec) -> int:
    """GPUs one host of this card drives (HOST_GPUS; NVL72 trays: NVL72_HOST_GPUS)."""
    return NVL72_HOST_GPUS if gpu.id.startswith(NVL72_PREFIXES) else HOST_GPUS


def hosts_spanned(gpus: int, gpu: GpuSpec) -> int:
    """Hosts an engine server over `gpus` of this card spans (host_gpus a host)."""
    return -(-gpus // host_gpus(gpu))


# Across nodes each GPU has its RDMA NIC: 400 Gb/s (one ConnectX-7 per GPU in NVIDIA DGX /
# HGX H100 and H200 systems, DGX H100 user guide; the same 400G class on MI300X platforms).
RDMA_NIC_BYTES_PER_S = 50e9
# A ring collective (NCCL's all-reduce, all-gather, reduce-scatter) over GPUs on several nodes
# runs one channel per rail: each channel crosses between nodes on its own GPU's NIC, so every
# NIC of a node carries one channel's share of the ring's 2 (n - 1) / n x S and the group's bus
# rate (nccl-tests doc/PERFORMANCE.md: t = S x 2 (n - 1) / n / B, B the bottleneck per rank)
# is the node's NICs together, capped by the fabric inside it: 8 x 50 GB/s on an HGX H100,
# not one NIC's 50. An exchange in which each GPU sends its own tokens (DeepEP's) has only its
# own NIC: Fabric.exchange_bytes_per_s.


# DeepEP (deepseek-ai/DeepEP) moves a MoE layer's tokens to the GPUs of their experts and
# back when the experts span nodes. Its low-latency kernels (decode steps under SGLang's
# --deepep-mode auto) send one copy per routed expert, fp8 on the way out (1 byte and a 4-byte
# scale per 128 values) and bf16 back (2 bytes); its normal kernels (prefill steps) send each
# token once to every node holding one of its experts and forward it over NVLink there.
# Both run at about the NIC's rate: DeepEP's docs/legacy.md (H800, one 400 Gb/s CX7 each)
# times low-latency dispatch / combine of 128 tokens x top-8 x 7,168 at EP 32 at 155 / 273 us
# (48 / 53 GB/s) and 39-63 GB/s from EP 16 to 256, normal kernels at 43-58 GB/s of RDMA from
# EP 16 to 64. The normal kernels' rate counts a token once for every node its experts sit on,
# its own node among them (tests/legacy/test_internode.py: num_rdma_token_sent over
# topk_idx // experts per node, deduplicated per token; ROCm/mori docs/MORI-EP-BENCHMARK.md calls
# it the "algo" count, and reports MoRI's the same way): their time is that count's bytes at
# the rate, so it is priced so (at EP 16, two nodes, twice the tokens that leave the node).
DEEPEP_DISPATCH_BYTES_PER_VALUE = 1 + 4 / 128
DEEPEP_COMBINE_BYTES_PER_VALUE = 2
# AMD's MoRI EP (ROCm/mori; SGLang's --moe-a2a-backend mori) moves the same bytes, and its
# kernels keep a fixed cost beside them. Its README (commit 624002c8, DeepSeek-V3 shapes: 7,168
# hidden, top-8, FP8 dispatch and BF16 combine, MI300X + CX7 at EP 8) times dispatch / combine at
# 35 / 47 us for 128 tokens and at 307 / 330 GB/s for 4,096: a line through the two points gives
# 20 / 19 us fixed a kernel beside 319 / 337 GB/s. Priced with DeepEP's bytes at the link's rate
# plus this per kernel, the model is within 15% of both points (tests/test_step_time.py).
MORI_KERNEL_MS = 0.020
# Its README of July 2026 (commit ba156a88) times the same shapes on MI355X + AINIC at EP 8: 31 /
# 36 us for 128 tokens, 345 / 420 GB/s for 4,096; the same line gives 17.5 / 13.3 us fixed a
# kernel beside 359 / 428 GB/s. CDNA4 takes their mean; the MI300X's figures there are the ones
# above.
MORI_CDNA4_KERNEL_MS = 0.0154


class ExchangeCost(BaseModel):
    """One MoE layer's dispatch and combine inside one fabric beside their bytes: the two
    kernels' fixed time together, and the share of the link's rate their bytes reach."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    fixed_ms: float = Field(default=0.0, ge=0, description="dispatch and combine together, ms")
    link_share: float = Field(default=1.0, gt=0, le=1)


class DeepEpCosts(BaseModel):
    """DeepEP inside one NVLink fabric: its low-latency kernels (decode steps) and its normal
    ones (steps with prompt tokens)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    low_latency: ExchangeCost
    normal: ExchangeCost


# DeepEP inside one NVLink fabric, timed by NVIDIA's aiconfigurator collector with SGLang
# 0.5.12's DeepEP over the 8 GPUs of one B200 board (ai-dynamo/aiconfigurator @095f58a5,
# systems/data/b200_sxm/comm/sglang/0.5.12/wideep_deepep_{ll,normal}_perf.parquet: hidden
# 2,048-7,168, top-1 to top-22 of 8-512 experts; the low-latency kernels at 1-1,024 tokens a
# rank, the normal ones at 1-16,384 with DeepEP's default 20 SMs; rows in benchmarks/data/
# nvidia-kernels.jsonl, `python benchmarks/nvidia_kernels.py`). Fitted as a fixed time + the
# bytes deepep_ms counts (a copy per routed expert) at a share of NVLink 5's 900 GB/s a
# direction, in relative error: low-latency dispatch + combine 37.5 us and 0.66 (median error
# 10%), normal 85 us and 0.555 (9%); the B300's tables give the same within 3% (38.6 us, 0.661;
# 86.7 us, 0.566), a GB200 tray's four GPUs 28 us and 0.72, 77 us and 0.69. At DeepSeek-V3's
# shape the kernels take 44 us at one token (22 + 22: no exchange is cheaper than its two
# kernels) and 319 us at 1,024 tokens (130 + 189), where the bytes at NVLink's full rate with
# two peer hops' floor priced 16 and 198 us. Every NVLink card takes these (Hopper's own
# kernels are not in the tables: an estimate); across nodes the NIC's rate is priced as before.
DEEPEP_NVLINK = DeepEpCosts(
    low_latency=ExchangeCost(fixed_ms=0.0375, link_share=0.66),
    normal=ExchangeCost(fixed_ms=0.085, link_share=0.555),
)


class Fabric(BaseModel):
    """The links among a platform's GPUs: the rate each GPU reaches over them (one direction,
    all its links), whether those links are a full mesh (one per peer) or switched, how many
    GPUs they join, and the NIC beyond them."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    bytes_per_s: float = Field(default=DEFAULT_LINK_BYTES_PER_S, gt=0)
    peer_links: int = Field(
        default=0, ge=0, description="mesh: links per GPU, one per peer (0: switched)"
    )
    domain_gpus: int = Field(default=NODE_DOMAIN_GPUS, ge=1)
    nic_bytes_per_s: float = Field(default=RDMA_NIC_BYTES_PER_S, gt=0)

    def crosses_nodes(self, ranks: int) -> bool:
        """Whether a group of `ranks` GPUs spans more than one fabric."""
        return ranks > self.domain_gpus

    def collective_bytes_per_s(self, ranks: int) -> float:
        """The bus rate of a ring collective over `ranks` GPUs: across nodes, the rails of a
        node together (one NIC per GPU), capped by the fabric; inside one, the k - 1 links to
        its peers on a mesh, the whole fabric when switched."""
        if self.crosses_nodes(ranks):
            return min(self.domain_gpus * self.nic_bytes_per_s, self.bytes_per_s)
        if self.peer_links:
            return self.bytes_per_s * min(max(1, ranks - 1), self.peer_links) / self.peer_links
        return self.bytes_per_s

    def exchange_bytes_per_s(self, ranks: int) -> float:
        """The rate one GPU sends its own data at to the others of `ranks` GPUs (an
        all-to-all): its NIC across nodes, else as a collective inside the fabric."""
        if self.crosses_nodes(ranks):
            return min(self.nic_bytes_per_s, self.bytes_per_s)
        return self.collective_bytes_per_s(ranks)

    def peer_bytes_per_s(self) -> float:
        """The rate between two GPUs of one fabric: one link on a mesh."""
        return self.collective_bytes_per_s(2)


def deepep_ms(
    tokens_per_rank: int,
    experts_per_token: int,
    hidden: int,
    ranks: int,
    fabric: Fabric,
    low_latency: bool = True,
    kernel_ms: float = 0.0,
    in_fabric: DeepEpCosts | None = None,
) -> float:
    """One MoE layer's DeepEP dispatch and combine for a rank's tokens, ms, at the group's
    rate over the fabric (the NIC across nodes, NVLink inside an NVL72 rack): a copy per routed
    expert (low-latency kernels, and any kernel inside one fabric), or across nodes a copy per
    node its experts sit on, its own included (normal kernels, as their published rates count
    them; top-k experts spread uniformly); never less than one hop's latency each way (an RDMA
    hop across nodes, an NVLink peer's inside); `kernel_ms`: a fixed cost each of the two
    kernels adds (MoRI's, Family.mori_kernel_ms); `in_fabric`: DeepEP's own costs where the group
    stays inside one fabric (DEEPEP_NVLINK: the kernels' fixed time and the share of the link
    their bytes reach, by mode)."""
    if tokens_per_rank <= 0 or experts_per_token <= 0:
        return 0.0
    copies = float(experts_per_token)
    if not low_latency and fabric.crosses_nodes(ranks):
        nodes = ranks / fabric.domain_gpus
        copies = nodes * (1 - (1 - 1 / nodes) ** experts_per_token)
    per_value = DEEPEP_DISPATCH_BYTES_PER_VALUE + DEEPEP_COMBINE_BYTES_PER_VALUE
    rate = fabric.exchange_bytes_per_s(ranks)
    fixed_ms = 2 * kernel_ms
    if in_fabric is not None and not fabric.crosses_nodes(ranks):
        own = in_fabric.low_latency if low_latency else in_fabric.normal
        rate *= own.link_share
        fixed_ms += own.fixed_ms
    # a few tokens still pay each transfer's latency: one hop for dispatch, one for combine
    hop_ms = PP_HOP_MS if fabric.crosses_nodes(ranks) else ALLREDUCE_HOP_MS
    moved_ms = tokens_per_rank * copies * hidden * per_value / rate * 1e3
    return max(moved_ms + fixed_ms, 2 * hop_ms)


def beyond_bridge(gpu: GpuSpec, ranks: int) -> bool:
    """Whether a collective over `ranks` GPUs of a PCIe card outgrows its NVLink bridge (which
    joins `nvlink_bridge_gpus` of them): past it every ring crosses PCIe, and vLLM's custom
    all-reduce, which needs every pair NVLink-joined past two GPUs (custom_all_reduce.py,
    0.9.2), gives way to NCCL."""
    bridge = gpu.nvlink_bridge_gpus
    return bridge is not None and ranks > bridge


def fabric_of(gpu: GpuSpec, ranks: int = 1) -> Fabric:
    """The card's platform fabric from its catalog interconnect (xGMI: a full mesh), for a
    group of `ranks` GPUs: a bridged PCIe card's PCIe link past its bridge."""
    if beyond_bridge(gpu, ranks):
        return Fabric(bytes_per_s=host_link_bytes_per_s(gpu))
    mesh = "XGMI" in (gpu.interconnect or "").upper()
    domain = NVL72_DOMAIN_GPUS if gpu.id.startswith(NVL72_PREFIXES) else NODE_DOMAIN_GPUS
    return Fabric(
        bytes_per_s=link_bytes_per_s(gpu),
        peer_links=XGMI_PEER_LINKS if mesh else 0,
        domain_gpus=domain,
    )


class AllReduceCost(BaseModel):
    """What one all-reduce costs beside its ring's bytes: a latency, a latency per peer, and
    the share of the group's link rate its bytes reach."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    fixed_ms: float = Field(default=0.0, ge=0, description="once an all-reduce, ms")
    hop_ms: float = Field(default=ALLREDUCE_HOP_MS, ge=0, description="per peer, ms")
    link_share: float = Field(default=1.0, gt=0, le=1)


def allreduce_ms(
    tp: int, layers: int, message_bytes: int, cost: AllReduceCost, fabric: Fabric
) -> float:
    """TP all-reduces of one forward pass (two per layer), each its fixed and (TP - 1) hop
    latencies plus the ring's 2 (TP - 1) / TP of the message at its share of the group's rate
    over the fabric, ms, and one RDMA hop (PP_HOP_MS) where the group spans nodes; zero at
    TP 1."""
    if tp <= 1:
        return 0.0
    one = collective_ms(tp, message_bytes * 2 * (tp - 1) / tp, cost, fabric)
    return ALLREDUCES_PER_LAYER * layers * one


def collective_ms(ranks: int, wire_bytes: float, cost: AllReduceCost, fabric: Fabric) -> float:
    """One collective over `ranks` GPUs that puts `wire_bytes` through each one's link: its
    fixed and (ranks - 1) hop latencies, the bytes at its share of the group's rate over the
    fabric, and one RDMA hop (PP_HOP_MS) where the group spans nodes, ms."""
    rate = fabric.collective_bytes_per_s(ranks) * cost.link_share
    one = cost.fixed_ms + (ranks - 1) * cost.hop_ms + wire_bytes / rate * 1e3
    if fabric.crosses_nodes(ranks):
        one += PP_HOP_MS
    return one


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
