"""Start-up cost of the CLI as whole processes, as ratios to `python -c pass` in one run.

Targets (2-core CI machine): `planner --help` < 0.15 s, `planner capacity --preset gqa-70b
--gpu mi300x` < 0.3 s, the reference three-policy `planner simulate` < 0.2 s, the benchmark
predictor's 1,000-request closed loop of a 70B model at concurrency 64 < 1 s (printed also as
a ratio to `planner capacity`), and neither numpy nor huggingface_hub imported on the --help
path.

Runs are interleaved (one of each command per round, so a busy machine slows all of them
alike) and read bytecode from a warm cache in a temporary PYTHONPYCACHEPREFIX, as an installed
package does (pip compiles it at install), even where PYTHONDONTWRITEBYTECODE is set.

    python benchmarks/startup.py [--runs 10]
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time

COMMANDS = {
    "python -c pass": [sys.executable, "-c", "pass"],
    "planner --help": [sys.executable, "-m", "planner", "--help"],
    "planner capacity (gqa-70b, mi300x)": [
        sys.executable,
        "-m",
        "planner",
        "capacity",
        "--preset",
        "gqa-70b",
        "--gpu",
        "mi300x",
    ],
    "planner simulate (reference, 3 policies)": [
        sys.executable,
        "-m",
        "planner",
        "simulate",
        "--compare",
        "static,continuous,chunked",
    ],
    "planner simulate (70B TP 4, 1,000 req, c64)": [
        sys.executable,
        "-m",
        "planner",
        "simulate",
        "--preset",
        "llama-3.1-70b",
        "--gpu",
        "h100",
        "--tp",
        "4",
        "--concurrency",
        "64",
        "--prompt-len",
        "1000",
        "--output-len",
        "1000",
        "--requests",
        "1000",
    ],
}
HEAVY = ("numpy", "huggingface_hub")


def timings(runs: int, env: dict[str, str]) -> dict[str, list[float]]:
    """Wall times of every command, `runs` rounds of one run each, after one warm-up round."""
    times: dict[str, list[float]] = {name: [] for name in COMMANDS}
    for round_ in range(runs + 1):
        for name, cmd in COMMANDS.items():
            t0 = time.perf_counter()
            subprocess.run(cmd, check=True, capture_output=True, env=env)
            if round_:
                times[name].append(time.perf_counter() - t0)
    return times


def heavy_imports_on_help() -> list[str]:
    probe = (
        "import sys; from planner.cli.app import main\n"
        "main(['--help'])\n"
        f"print('HEAVY:' + ','.join(m for m in {HEAVY!r} if m in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", probe], check=True, capture_output=True, text=True)
    line = [ln for ln in out.stdout.splitlines() if ln.startswith("HEAVY:")][-1]
    return [m for m in line.removeprefix("HEAVY:").split(",") if m]


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=10)
    runs = parser.parse_args().runs
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    with tempfile.TemporaryDirectory() as cache:
        env["PYTHONPYCACHEPREFIX"] = cache
        times = timings(runs, env)
    base_best = min(times["python -c pass"])
    print(f"{'command':44s} {'best s':>8s} {'median s':>9s} {'x python':>9s}")
    bests = {}
    for name, got in times.items():
        best, median = min(got), statistics.median(got)
        bests[name] = best
        print(f"{name:44s} {best:8.3f} {median:9.3f} {best / base_best:9.1f}")
    sim, cap = "planner simulate (70B TP 4, 1,000 req, c64)", "planner capacity (gqa-70b, mi300x)"
    print(f"simulate / capacity: {bests[sim] / bests[cap]:.2f}x")
    heavy = heavy_imports_on_help()
    print(f"heavy modules imported by --help: {', '.join(heavy) or 'none'}")


if __name__ == "__main__":
    main()
