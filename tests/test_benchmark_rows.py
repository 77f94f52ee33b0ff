"""How the public-row benchmarks pose a row they have not seen (benchmarks/rows.py): the
catalog card for its GPU, the shipped config for its checkpoint, the server settings it states."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
from helpers import MODELS

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "benchmarks"))
from rows import catalog_gpu, checkpoint_config, engine_settings


@pytest.mark.parametrize(
    ("short", "full", "card"),
    [
        ("MI355X", None, "mi355x"),
        ("B300", None, "b300-sxm-288gb"),
        ("RTX 4090", None, "rtx-4090"),
        (None, "NVIDIA H200 NVL (PCIe)", "h200-nvl-141gb"),
        (None, "NVIDIA H100 80GB HBM3 (SXM5)", "h100-sxm5-80gb"),
        # a card the catalog does not hold is not taken for its nearest name
        (None, "NVIDIA H100 64GB HBM2e (MareNostrum 5)", None),
        ("Foo", "Bar", None),
    ],
)
def test_a_rows_gpu_is_the_catalog_card_it_names(
    short: str | None, full: str | None, card: str | None
) -> None:
    assert catalog_gpu(short, full, {}) == card


@pytest.mark.parametrize(
    ("name", "folder", "weights"),
    [
        ("openai/gpt-oss-120b", "openai--gpt-oss-120b", None),
        (
            "RedHatAI/Llama-3.3-70B-Instruct-FP8-dynamic",
            "meta-llama--Llama-3.3-70B-Instruct",
            "fp8",
        ),
        ("nvidia/DeepSeek-R1-0528-FP4", "deepseek-ai--DeepSeek-R1", "nvfp4"),
        ("meta-llama/Meta-Llama-3.1-70B-Instruct", "meta-llama--Llama-3.1-70B-Instruct", None),
        # an FP8 export whose base ships its own FP8 checkpoint takes that config as it is
        ("Qwen/Qwen3-235B-A22B-Instruct-2507-FP8", "Qwen--Qwen3-235B-A22B-FP8", None),
        ("acme/Unknown-Model-FP8", None, None),
    ],
)
def test_a_quantized_export_is_posed_on_its_base_config(
    name: str, folder: str | None, weights: str | None
) -> None:
    got, dtype = checkpoint_config(name, MODELS)
    assert (got.name if got else None, dtype) == (folder, weights)


def test_a_rows_server_settings_read_in_either_engines_spelling() -> None:
    row = {
        "engine_config": {"max_num_seqs": "256", "max_num_batched_tokens": "default"},
        "notes": "Server flags: --mem-fraction-static 0.85 --chunked-prefill-size -1 "
        "--page-size 64 --context-length 32768.",
    }
    # "default" and SGLang's -1 (off) leave the engine's own value; the config wins over prose
    assert engine_settings(row) == {
        "max_num_seqs": 256,
        "memory_fraction": 0.85,
        "block_size": 64,
        "context_tokens": 32768,
    }
