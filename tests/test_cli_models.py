"""`planner capacity --model` on local files and folders, and `--explain` output."""

from __future__ import annotations

import json
import shutil
from collections.abc import Callable
from pathlib import Path

from helpers import MODELS, Result, safetensors_file

from planner.units import GIB_BYTES

Cli = Callable[..., Result]
LLAMA8 = MODELS / "meta-llama--Llama-3.1-8B-Instruct"


def test_model_from_config_file(cli: Cli) -> None:
    r = cli(
        "capacity",
        "--model",
        str(LLAMA8 / "config.json"),
        "--gpu",
        "h100",
        "--json",
        "--ledger",
        "textbook",
    )
    assert r.code == 0, r.err
    m = r.json()["model"]
    assert m["source"] == "local" and m["weights_exact"] is False
    assert m["params_total"] == 8_030_261_248  # = total_size 16,060,522,496 / 2 bytes
    assert len(m["config_sha256"]) == 64


def test_model_folder_with_safetensors_index_is_exact(cli: Cli, tmp_path: Path) -> None:
    shutil.copy(LLAMA8 / "config.json", tmp_path / "config.json")
    index = {"metadata": {"total_size": 16060522496}, "weight_map": {}}
    (tmp_path / "model.safetensors.index.json").write_text(json.dumps(index))
    data = cli("capacity", "--model", str(tmp_path), "--gpu", "h100", "--json").json()
    assert data["model"]["weights_exact"] is True
    assert data["model"]["weights_bytes"] == 16060522496


def test_json_has_model_groups_and_sequence_figures(cli: Cli) -> None:
    data = cli(
        "capacity",
        "--preset",
        "gpt-oss-20b",
        "--gpu",
        "h100",
        "--context",
        "8192",
        "--mean-len",
        "2000",
        "--json",
        "--ledger",
        "textbook",
    ).json()
    for key in (
        "name",
        "source",
        "revision",
        "params_total",
        "params_active",
        "weights_bytes",
        "weights_exact",
    ):
        assert key in data["model"]
    sliding, full = data["kv_layer_groups"]
    assert sliding == {
        "kind": "sliding",
        "num_layers": 12,
        "kv_heads_per_gpu": 8,
        "bytes_per_token": 2 * 12 * 8 * 64 * 2,
        "window_tokens": 128,
        "state_bytes_per_sequence": 0,
    }
    assert full["kind"] == "full" and full["window_tokens"] is None
    # Per-sequence, not per-token x length: the sliding half stops growing at 128 tokens.
    per_layer_token = 8 * 64 * 2 * 2
    assert data["kv_bytes_per_sequence"] == 12 * per_layer_token * (8192 + 128)
    assert data["kv_bytes_per_sequence_mean"] == 12 * per_layer_token * (2000 + 128)
    paged_seq = 12 * per_layer_token * (2000 + 128)  # 2000 is a whole number of 16-token pages
    assert data["max_seqs_paged"] == data["kv_pool_bytes"] // paged_seq


def test_hybrid_state_is_per_sequence(cli: Cli) -> None:
    data = cli("capacity", "--preset", "nemotron-h-56b", "--gpu", "h200", "--json").json()
    mamba = data["kv_layer_groups"][0]
    assert mamba["kind"] == "mamba" and mamba["bytes_per_token"] == 0
    assert mamba["state_bytes_per_sequence"] > 0
    attention_per_token = data["kv_bytes_per_token"]
    assert data["kv_bytes_per_sequence_mean"] == (
        attention_per_token * 2000 + mamba["state_bytes_per_sequence"]
    )


def test_explain_prints_groups_and_weights_basis(cli: Cli) -> None:
    r = cli(
        "capacity", "--preset", "gemma-3-4b", "--gpu", "l4", "--explain", "--ledger", "textbook"
    )
    assert r.code == 0, r.err
    assert "KV layer groups" in r.out and "sliding" in r.out and "1,024" in r.out
    assert "weights: estimated from config.json parameter count" in r.out


def test_missing_file_and_bad_json_exit_2(cli: Cli, tmp_path: Path) -> None:
    r = cli("capacity", "--model", str(tmp_path / "nope.json"), "--gpu", "h100")
    assert r.code == 2 and "no such file" in r.err
    bad = tmp_path / "config.json"
    bad.write_text('{"num_hidden_layers": 32,\n  oops}')
    r = cli("capacity", "--model", str(bad), "--gpu", "h100")
    assert r.code == 2 and "line 2: not valid JSON" in r.err and r.err.count("\n") == 1
    empty = tmp_path / "empty"
    empty.mkdir()
    assert "has no config.json" in cli("capacity", "--model", str(empty), "--gpu", "h100").err


def test_unknown_layer_type_in_a_file_exits_2(cli: Cli, tmp_path: Path) -> None:
    cfg = json.loads((MODELS / "openai--gpt-oss-20b" / "config.json").read_text())
    cfg["layer_types"][3] = "banded_attention"
    path = tmp_path / "config.json"
    path.write_text(json.dumps(cfg))
    r = cli("capacity", "--model", str(path), "--gpu", "h100")
    assert r.code == 2 and "layer_types[3]: unknown layer type 'banded_attention'" in r.err


def test_weight_dtype_override_is_labelled_estimate(cli: Cli) -> None:
    data = cli(
        "capacity",
        "--preset",
        "llama-3.1-8b",
        "--gpu",
        "l4",
        "--weight-dtype",
        "fp8",
        "--json",
        "--ledger",
        "textbook",
    ).json()
    assert data["model"]["weights_exact"] is False and data["model"]["weight_dtype"] == "fp8"
    assert data["weights_bytes_per_gpu"] / GIB_BYTES < 8.5
    assert any("estimated" in w for w in data["warnings"])


def test_local_folder_counts_parameters_from_safetensors_headers(cli: Cli, tmp_path: Path) -> None:
    shutil.copy(LLAMA8 / "config.json", tmp_path / "config.json")
    (tmp_path / "model-1.safetensors").write_bytes(safetensors_file({"w": ("BF16", [100, 40])}))
    (tmp_path / "model-2.safetensors").write_bytes(safetensors_file({"v": ("F32", [7])}))
    model = cli("capacity", "--model", str(tmp_path), "--gpu", "h100", "--json").json()["model"]
    assert model["params_total"] == 4007 and model["params_exact"] is True
    assert model["weights_bytes"] == 4000 * 2 + 7 * 4 and model["weights_exact"] is True


def test_a_bad_config_names_the_flag_and_the_file(cli: Cli, tmp_path: Path) -> None:
    config = json.loads((MODELS / "meta-llama--Llama-3.1-8B-Instruct" / "config.json").read_text())
    config["num_hidden_layers"] = -2
    folder = tmp_path / "broken"
    folder.mkdir()
    (folder / "config.json").write_text(json.dumps(config))
    r = cli("capacity", "--model", str(folder), "--gpu", "h100", "--json")
    assert r.code == 2 and r.err.count("\n") == 1
    error = r.json()
    assert error["field"] == "--model"
    assert f"{folder / 'config.json'}: num_hidden_layers" in error["error"]


def test_a_native_nvfp4_checkpoint_runs_its_gemms_at_the_fp4_rate(cli: Cli, tmp_path: Path) -> None:
    """A ModelOpt NVFP4 checkpoint's own config and the base model posed as its NVFP4 variant
    are one deployment: the same weights and the same fp4 prefill."""
    cfg = json.loads((MODELS / "meta-llama--Llama-3.1-70B" / "config.json").read_text())
    cfg["quantization_config"] = {"quant_method": "modelopt", "quant_algo": "NVFP4"}
    (tmp_path / "config.json").write_text(json.dumps(cfg))
    run = ("--gpu", "b200", "--prompt-len", "4000", "--output-len", "10", "--concurrency", "1")
    native = cli("simulate", "--model", str(tmp_path), *run, "--requests", "5", "--json").json()
    variant = cli(
        "simulate", "--model", str(MODELS / "meta-llama--Llama-3.1-70B"), *run, "--requests", "5",
        "--weight-dtype", "nvfp4", "--json",
    ).json()  # fmt: skip
    assert native["deployment"]["weight_dtype"] == "nvfp4"
    assert native["median_ttft_ms"] == variant["median_ttft_ms"]
    bf16 = cli(
        "simulate", "--model", str(MODELS / "meta-llama--Llama-3.1-70B"), *run, "--requests", "5",
        "--json",
    ).json()  # fmt: skip
    # fp4 tensor cores at 4x bf16's rate, NVFP4 GEMMs at 0.53 of bf16's share of theirs
    # (NVIDIA's B200 kernel tables): the prefill about twice as fast
    assert native["median_ttft_ms"] < bf16["median_ttft_ms"] / 1.8


def test_an_amd_quark_fp8_checkpoint_is_sized_and_named_as_it_loads(
    cli: Cli, tmp_path: Path
) -> None:
    """AMD Quark's FP8 export (per-tensor fp8_e4m3 weights, lm_head excluded): one byte per
    linear weight; vLLM's line names `quark`, SGLang's none (it reads the checkpoint)."""
    from planner.sources.models import resolve_model

    base_dir = MODELS / "meta-llama--Llama-3.1-70B"
    cfg = json.loads((base_dir / "config.json").read_text())
    fp8 = {"dtype": "fp8_e4m3", "qscheme": "per_tensor", "is_dynamic": False}
    cfg["quantization_config"] = {
        "quant_method": "quark",
        "exclude": ["lm_head"],
        "global_quant_config": {"weight": fp8, "input_tensors": fp8, "output_tensors": None},
    }
    (tmp_path / "config.json").write_text(json.dumps(cfg))
    base, quark = resolve_model(None, str(base_dir)), resolve_model(None, str(tmp_path))
    assert quark.weight_dtype == "fp8-quark"
    assert base.weights_bytes - quark.weights_bytes == base.quantizable_params
    where = ("--model", str(tmp_path), "--gpu", "mi300x", "--json")
    vllm = cli("capacity", *where).json()["flags"]["vllm"]
    assert vllm.endswith("--quantization quark")
    assert cli("capacity", *where, "--quantization", "quark").json()["flags"]["vllm"] == vllm
    sglang = cli("capacity", *where, "--engine", "sglang").json()["flags"]["sglang"]
    assert "--quantization" not in sglang
    cfg["quantization_config"]["global_quant_config"]["weight"] = {"dtype": "int3"}
    (tmp_path / "config.json").write_text(json.dumps(cfg))
    bad = cli("capacity", *where)
    assert bad.code == 2 and "quantization_config.global_quant_config.weight.dtype" in bad.err
