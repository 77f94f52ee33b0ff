"""One deployment, one answer: capacity, slo and spec print the same pool and max_num_seqs."""

from __future__ import annotations

from collections.abc import Callable

import pytest
from helpers import Result

Cli = Callable[..., Result]

PAIRS = [
    ("llama-3.1-8b", "h100"),
    ("gqa-70b", "mi300x"),
    ("qwen3-8b", "a100-sxm4-80gb"),
    ("mistral-7b-v0.1", "l40s"),
    ("qwen3-30b-a3b", "h200"),
]


@pytest.mark.parametrize(("preset", "gpu"), PAIRS)
def test_capacity_slo_and_spec_agree_on_the_pool(cli: Cli, preset: str, gpu: str) -> None:
    where = ("--preset", preset, "--gpu", gpu, "--json")
    capacity = cli("capacity", *where).json()
    slo = cli("slo", "--tpot", "500", *where).json()  # a loose TPOT: memory binds
    spec = cli("spec", "--alpha", "0.7", *where).json()
    held = capacity["max_seqs_paged"]
    assert slo["memory_cap"] == held
    assert spec["scan_limit"] == min(held, 4096)  # scanned up to the pool (--max-batch 4096)
    assert spec["operating_concurrency"] == capacity["operating_concurrency"]
    assert slo["operating_concurrency"] == min(held, slo["batch_cap"])


def _flags(line: str) -> list[str]:
    """The flags of a printed launch line, without the entry point and the model."""
    words = line.split()
    if words[:2] == ["vllm", "serve"]:
        return words[3:]
    start = words.index("--model-path") + 2  # python -m sglang.launch_server --model-path M
    return words[start:]


GPUS = ("h100", "mi300x", "a100-sxm4-80gb")


@pytest.mark.parametrize("engine", ["vllm", "sglang"])
def test_printed_lines_paste_back_into_capacity(cli: Cli, engine: str) -> None:
    """Every shipped model on a rotation of three GPUs: the line capacity prints, fed back
    verbatim, is accepted and reproduces the same line (so the same plan)."""
    from planner.sources.presets import preset_names

    checked = 0
    for i, preset in enumerate(preset_names("models")):
        gpu = GPUS[i % len(GPUS)]
        where = ("--preset", preset, "--gpu", gpu, "--engine", engine, "--json")
        first = cli("capacity", *where)
        if first.code != 0:  # does not fit on this card: nothing to paste
            continue
        line = first.json()["flags"][engine]
        again = cli("capacity", *where, *_flags(line))
        assert again.code == 0, (preset, gpu, again.err)
        assert again.json()["flags"][engine] == line, (preset, gpu)
        checked += 1
    assert checked >= 15


@pytest.mark.parametrize(("preset", "gpu"), PAIRS)
def test_simulate_runs_the_pool_capacity_plans(cli: Cli, preset: str, gpu: str) -> None:
    # the benchmark predictor launched with capacity's own line holds capacity's KV pool
    capacity = cli("capacity", "--preset", preset, "--gpu", gpu, "--json").json()
    engine = capacity["engine"]
    seqs = engine["settings"]["max_num_seqs"]
    context = engine["settings"]["max_model_len"]
    sim = cli(
        "simulate", "--preset", preset, "--gpu", gpu, "--max-num-seqs", str(seqs),
        "--context", str(context), "--prompt-len", "512", "--output-len", "128",
        "--concurrency", "4", "--requests", "8", "--json",
    ).json()  # fmt: skip
    deployment = sim["deployment"]
    assert deployment["kv_cache_tokens"] == engine["kv_cache_tokens"]
    assert deployment["max_num_seqs"] == seqs
    assert f"--max-num-seqs {seqs}" in deployment["command"]
