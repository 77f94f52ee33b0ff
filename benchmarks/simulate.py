"""Simulator speed as whole processes, as ratios to `python -c pass` in one run.

Targets on the 2-core CI machine: the three-policy comparison on the reference workload well
under 1 s; the 8-point batch-cap sweep in a few seconds.

    python benchmarks/simulate.py [--runs 5]
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import time

PLANNER = [sys.executable, "-m", "planner", "simulate"]
COMMANDS = {
    "python -c pass": [sys.executable, "-c", "pass"],
    "compare static,continuous,chunked": [*PLANNER, "--compare", "static,continuous,chunked"],
    "sweep max_batch x 8 (20 req/s)": [
        *PLANNER,
        "--rate",
        "20",
        "--slo-ttft-ms",
        "2000",
        "--slo-tpot-ms",
        "12",
        "--sweep",
        "max_batch=4,8,16,24,32,48,64,128",
    ],
    "sweep x 8 with a 700-block KV pool": [
        *PLANNER,
        "--rate",
        "20",
        "--kv-blocks",
        "700",
        "--sweep",
        "max_batch=4,8,16,24,32,48,64,128",
    ],
}


def best(cmd: list[str], runs: int) -> float:
    times = []
    for _ in range(runs):
        t0 = time.perf_counter()
        subprocess.run(cmd, check=True, capture_output=True)
        times.append(time.perf_counter() - t0)
    return min(times)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=5)
    runs = parser.parse_args().runs
    base = best(COMMANDS["python -c pass"], runs)
    print(f"{'command':40s} {'best s':>8s} {'x python':>9s}")
    for name, cmd in COMMANDS.items():
        t = best(cmd, runs)
        print(f"{name:40s} {t:8.3f} {t / base:9.1f}")


if __name__ == "__main__":
    main()
