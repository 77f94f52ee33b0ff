"""Published AMD all-reduce times against the step model's AMD all-reduce.

benchmarks/data/amd-allreduce.jsonl holds the all-reduce latencies mk1-project/quickreduce's
README publishes for 2, 4 and 8 MI300X of one platform (ROCm 6.2, RCCL 2.20.5; fp16 messages
of 32 KB to 64 MB): RCCL's, and QuickReduce's own uncompressed two-shot kernel over peer
memory, the kind of kernel the engines' custom all-reduce is. An engine reduces small
messages in its custom kernel and large ones in RCCL, so the faster of the two at each size
is the curve the step model prices. This fits it as a fixed time, a time per peer and the
ring's bytes at a share of the links among the group's GPUs (one xGMI link per peer: the
planner's comm.Fabric), in relative error, and prints the fit beside the planner's
constants (family.CDNA3_ALLREDUCE) and the model's error by group size.

    python benchmarks/amd_allreduce.py [--rows FILE]
"""

from __future__ import annotations

import argparse
import json
import statistics
from pathlib import Path
from typing import Any

import numpy as np

from planner.core.step import comm, family
from planner.core.step.comm import fabric_of
from planner.sources.presets import find_gpu

ROOT = Path(__file__).resolve().parent.parent
ROWS = ROOT / "benchmarks" / "data" / "amd-allreduce.jsonl"
# The grid the fit searches: fixed us, us per peer, share of the links' rate.
FIXED_US = np.arange(0.0, 20.0, 0.1)
HOP_US = np.arange(0.0, 5.0, 0.05)
SHARES = np.arange(0.30, 1.001, 0.01)


def load(path: Path) -> list[dict[str, Any]]:
    """The table's rows, one per group size, message size and kernel."""
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def fastest(rows: list[dict[str, Any]]) -> list[tuple[int, int, float]]:
    """(GPUs, message bytes, us) of the faster kernel at each group and message size."""
    best: dict[tuple[int, int], float] = {}
    for r in rows:
        key = (int(r["gpus"]), int(r["message_bytes"]))
        best[key] = min(best.get(key, float("inf")), float(r["us"]))
    return [(gpus, size, us) for (gpus, size), us in sorted(best.items())]


def modelled_us(points: list[tuple[int, int, float]], cost: comm.AllReduceCost) -> list[float]:
    """The step model's time for each point's one all-reduce on MI300X, us."""
    gpu = find_gpu("mi300x")
    return [
        comm.allreduce_ms(n, 1, size, cost, fabric_of(gpu, n)) / 2 * 1e3 for n, size, _ in points
    ]


def fit(points: list[tuple[int, int, float]]) -> tuple[float, float, float, float]:
    """(fixed us, us per peer, link share, median relative error) minimizing the median
    relative error over the points."""
    gpu = find_gpu("mi300x")
    peers = np.array([n - 1 for n, _, _ in points], dtype=float)
    measured = np.array([us for _, _, us in points])
    # the ring's bytes at the whole rate of the group's links, us (share 1)
    wire_us = np.array(
        [
            size * 2 * (n - 1) / n / fabric_of(gpu, n).collective_bytes_per_s(n) * 1e6
            for n, size, _ in points
        ]
    )
    best = (0.0, 0.0, 1.0, float("inf"))
    for share in SHARES:
        base = wire_us / share
        for hop in HOP_US:
            fixed = FIXED_US[:, None] + hop * peers[None, :] + base[None, :]
            errors = np.median(np.abs(fixed / measured[None, :] - 1.0), axis=1)
            i = int(np.argmin(errors))
            if errors[i] < best[3]:
                best = (float(FIXED_US[i]), float(hop), float(share), float(errors[i]))
    return best


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rows", type=Path, default=ROWS)
    args = ap.parse_args()
    points = fastest(load(args.rows))
    fixed_us, hop_us, share, error = fit(points)
    planner = family.CDNA3_ALLREDUCE
    print(
        f"MI300X all-reduce, the faster of RCCL and QuickReduce's fp16 kernel ({len(points)} "
        f"points, 2-8 GPUs, 32 KB-64 MB): {fixed_us:.1f} us + {hop_us:.2f} us a peer + the "
        f"ring's bytes at {share:.2f} of the links' rate (median error {error:.1%}); planner: "
        f"{planner.fixed_ms * 1e3:.1f} us + {planner.hop_ms * 1e3:.2f} us, {planner.link_share}"
    )
    got = modelled_us(points, planner)
    per_peer = modelled_us(points, comm.AllReduceCost())
    for gpus in sorted({n for n, _, _ in points}):
        idx = [i for i, (n, _, _) in enumerate(points) if n == gpus]
        errs = [got[i] / points[i][2] - 1 for i in idx]
        old = [per_peer[i] / points[i][2] - 1 for i in idx]
        small = points[idx[0]]
        print(
            f"  {gpus} GPUs: median |error| {statistics.median(abs(e) for e in errs):.1%}, worst "
            f"{max(errs, key=abs):+.1%}; {small[1] // 1024} KB {small[2]:.1f} us measured, "
            f"{got[idx[0]]:.1f} priced (the per-peer hop fitted on NVIDIA V0 rows: "
            f"{per_peer[idx[0]]:.1f}, median |error| {statistics.median(abs(e) for e in old):.0%})"
        )


if __name__ == "__main__":
    main()
