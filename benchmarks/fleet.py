"""`planner fleet` wall time as a ratio to `planner capacity`, whole processes, in one run.

Targets (2-core CI machine): under 10 s for the 70B case over the default GPU set (five types,
every TP of a node, bf16 and fp8, with each ranked layout's Pareto curve); under 20 s for
DeepSeek-V3 on H200 and MI300X with disaggregated units beside the aggregated layouts.

    python benchmarks/fleet.py
"""

from __future__ import annotations

import subprocess
import sys
import time

BASE = [sys.executable, "-m", "planner"]
# The workload: 20 req/s under TPOT 50 ms and TTFT 1 s, over the default GPU set.
WORKLOAD = ["--rate", "20", "--tpot", "50", "--ttft", "1000", "--json"]
MOE_WORKLOAD = ["--engine", "sglang", "--rate", "5", "--tpot", "50", "--ttft", "2000"]
MOE_WORKLOAD += ["--gpus", "h200,mi300x", "--json"]
COMMANDS = {
    "capacity (llama-3.1-8b, h100)": ["capacity", "--preset", "llama-3.1-8b", "--gpu", "h100"],
    "fleet 8B, default GPUs": ["fleet", "--preset", "llama-3.1-8b", *WORKLOAD],
    "fleet 70B, default GPUs": ["fleet", "--preset", "llama-3.1-70b", *WORKLOAD],
    # aggregated and disaggregated candidates on 8-GPU H200 and MI300X nodes (target < 20 s)
    "fleet DeepSeek-V3, h200+mi300x": ["fleet", "--preset", "deepseek-v3", *MOE_WORKLOAD],
}


def main() -> None:
    """Time each command once (best of two) and print it against capacity."""
    times = {}
    for name, args in COMMANDS.items():
        best = float("inf")
        for _ in range(2):
            started = time.perf_counter()
            subprocess.run([*BASE, *args], check=False, capture_output=True)
            best = min(best, time.perf_counter() - started)
        times[name] = best
    base = times["capacity (llama-3.1-8b, h100)"]
    for name, seconds in times.items():
        print(f"{name:32s} {seconds:6.2f} s  x{seconds / base:5.1f} capacity")


if __name__ == "__main__":
    main()
