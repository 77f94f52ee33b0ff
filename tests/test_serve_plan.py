"""The serve plan: the default `planner capacity` is the engine's own arithmetic, and the line it
prints, fed back to the engine model, reproduces the prediction exactly."""

from __future__ import annotations

import json
import shlex
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml
from helpers import MODELS, Result, model_config

from planner.api.engines import SIZED_QUANTIZATIONS
from planner.core.engines import vllm
from planner.core.flags import parse_argv
from planner.core.hf_config import quantized_weights_bytes
from planner.core.serve import (
    ENGINE_DTYPES,
    SGLANG_KV_CACHE_DTYPES,
    VLLM_KV_CACHE_DTYPES,
    ServeSettings,
    fields_from_line,
    plan_serve,
    predict,
    vllm_takes_block_size,
)
from planner.core.specs import ModelSpec
from planner.errors import InputError
from planner.sources.models import resolve_model
from planner.sources.presets import find_gpu

Cli = Callable[..., Result]
CONFIGS = sorted(p.parent.name for p in MODELS.glob("*/config.json"))
GPUS = ("h100", "mi300x", "l40s")  # one AMD card
LLAMA70 = str(MODELS / "meta-llama--Llama-3.1-70B-Instruct")

# Every flag the engine ledger may print, with the values that engine's parser accepts.
GRAMMAR: dict[str, dict[str, Callable[[str], bool]]] = {
    "vllm": {
        "--model": lambda v: bool(v),
        "--tensor-parallel-size": lambda v: int(v) >= 1,
        "--pipeline-parallel-size": lambda v: int(v) >= 1,
        "--max-model-len": lambda v: int(v) >= 1,
        "--max-num-seqs": lambda v: int(v) >= 1,
        "--max-num-batched-tokens": lambda v: int(v) >= 1,
        "--gpu-memory-utilization": lambda v: 0 < float(v) <= 1,
        "--block-size": lambda v: vllm_takes_block_size(vllm.NEWEST_VERSION, int(v)),
        "--kv-cache-dtype": lambda v: v in VLLM_KV_CACHE_DTYPES,
        "--dtype": lambda v: v in ENGINE_DTYPES,
        "--quantization": lambda v: v in (*SIZED_QUANTIZATIONS, "compressed-tensors"),
        "--trust-remote-code": lambda v: v == "true",  # a bare flag (BooleanOptionalAction)
    },
    "sglang": {
        "--model": lambda v: bool(v),
        "--tp-size": lambda v: int(v) >= 1,
        "--pp-size": lambda v: int(v) >= 1,
        "--context-length": lambda v: int(v) >= 1,
        "--max-running-requests": lambda v: int(v) >= 1,
        "--chunked-prefill-size": lambda v: int(v) >= -1,
        "--mem-fraction-static": lambda v: 0 < float(v) < 1,
        "--page-size": lambda v: int(v) >= 1,
        "--kv-cache-dtype": lambda v: v in SGLANG_KV_CACHE_DTYPES,
        "--dtype": lambda v: v in ENGINE_DTYPES,
        "--quantization": lambda v: v in (*SIZED_QUANTIZATIONS, "compressed-tensors"),
        "--trust-remote-code": lambda v: v == "true",  # store_true
    },
}


def quantization_of(weight_dtype: str) -> str | None:
    for label in ("fp8", "awq", "gptq", "mxfp4", "compressed-tensors"):
        if weight_dtype.startswith(label):
            return label
    return None


def check_round_trip(name: str, gpu_id: str, context: int, engine: str) -> None:
    model = resolve_model(None, str(MODELS / name))
    gpu = find_gpu(gpu_id)
    context = min(context, model.max_context_tokens)
    settings = ServeSettings(
        engine=engine,  # type: ignore[arg-type]
        context_tokens=context,
        mean_tokens=min(2000, context),
        quantization=quantization_of(model.weight_dtype),
    )
    plan = plan_serve(model, gpu, settings, suggest=False)
    parsed = parse_argv(shlex.split(plan.command), "line")
    assert parsed is not None
    for flag, value in parsed.flags.items():
        assert flag in GRAMMAR[engine], (flag, plan.command)
        assert GRAMMAR[engine][flag](value), (flag, value)
    if not plan.fits:
        assert plan.reasons and plan.binding == "none"
        return
    assert plan.prediction is not None
    fields = fields_from_line(engine, plan.command)
    fields.pop("quantization", None)  # the weights' form, passed as bytes below
    again = predict(model, gpu, engine, fields, None, None)
    p = plan.prediction
    assert (again.kv_cache_tokens, again.num_gpu_blocks, again.max_concurrency) == (
        p.kv_cache_tokens,
        p.num_gpu_blocks,
        p.max_concurrency,
    )
    assert 1 <= plan.max_num_seqs <= plan.max_seqs_at_mean


@pytest.mark.parametrize("context", [4096, 32768])
@pytest.mark.parametrize("gpu_id", GPUS)
@pytest.mark.parametrize("name", CONFIGS)
def test_vllm_line_round_trips(name: str, gpu_id: str, context: int) -> None:
    check_round_trip(name, gpu_id, context, "vllm")


@pytest.mark.parametrize(
    "name",
    [
        "meta-llama--Llama-3.1-8B-Instruct",
        "Qwen--Qwen3-30B-A3B",
        "google--gemma-3-27b-it",
        "deepseek-ai--DeepSeek-V2-Lite",
        "nvidia--NVIDIA-Nemotron-3-Nano-30B-A3B-BF16",
    ],
)
@pytest.mark.parametrize("gpu_id", GPUS)
def test_sglang_line_round_trips(name: str, gpu_id: str) -> None:
    check_round_trip(name, gpu_id, 8192, "sglang")


def test_llama_70b_on_one_h200_does_not_fit_and_tp2_does(cli: Cli) -> None:
    # vLLM 0.33 at its 0.92 utilisation (0.34's extensible cache at 1.0 finds room for a few)
    r = cli("capacity", "--model", LLAMA70, "--gpu", "h200", "--engine-version", "0.33", "--json")
    assert r.code == 1
    data = r.json()
    assert data["fits"] is False and data["reasons"]
    changes = [s["change"] for s in data["suggestions"]]
    assert "--tensor-parallel-size 2" in changes
    tp2 = next(s for s in data["suggestions"] if s["change"] == "--tensor-parallel-size 2")
    again = cli("capacity", "--model", LLAMA70, "--gpu", "h200", "--tp", "2",
                "--engine-version", "0.33", "--json").json()  # fmt: skip
    assert again["fits"] is True
    assert again["operating_concurrency"] == tp2["max_num_seqs"]


def test_sglangs_window_pool_holds_fewer_sequences_than_its_full_pool(cli: Cli) -> None:
    # Gemma-4-31B under SGLang 0.5.13 on one MI300X: a full pool of 134,719 tokens and a
    # window-layer pool of 0.8 x that, 107,775. A 2,000-token sequence (output within two
    # 1,024-token windows) holds all its tokens in both: 107,775 // 2,000 = 53, not the full
    # pool's 67; before 0.5.11 SGLang keeps one pool and the full count holds.
    gemma = str(MODELS / "google--gemma-4-31B-it")
    args = ("capacity", "--model", gemma, "--gpu", "mi300x", "--engine", "sglang", "--json")
    now = cli(*args, "--engine-version", "0.5.13").json()
    assert now["engine"]["settings"]["swa_max_total_num_tokens"] == int(134_719 * 0.8)
    assert now["operating_concurrency"] == 107_775 // 2000
    assert "the window layers' pool (107,775 tokens) holds 53" in now["binding_reason"]
    before = cli(*args, "--engine-version", "0.5.10").json()
    assert before["engine"]["settings"]["swa_max_total_num_tokens"] is None
    tokens = before["engine"]["kv_cache_tokens"]
    assert before["operating_concurrency"] == tokens // 2000
    assert "window" not in before["binding_reason"]


def test_kv_that_cannot_hold_one_request_is_a_refusal(cli: Cli) -> None:
    # Llama-3.1-70B on 2x H100 at 128K: one sequence needs 20 GiB per GPU, the cache has less.
    r = cli("capacity", "--model", LLAMA70, "--gpu", "h100", "--tp", "2", "--context", "131072")
    assert r.code == 1
    assert "vLLM refuses to start" in r.out and "vllm serve" not in r.out
    data = cli(
        "capacity",
        "--model",
        LLAMA70,
        "--gpu",
        "h100",
        "--tp",
        "2",
        "--context",
        "131072",
        "--json",
    ).json()
    fitting = [s for s in data["suggestions"] if s["change"].startswith("--max-model-len")]
    assert fitting and fitting[0]["flags"]["max_model_len"] < 131072


def test_gpus_without_bf16_get_dtype_half(cli: Cli) -> None:
    r = cli(
        "capacity",
        "--preset",
        "qwen2.5-7b",
        "--gpu",
        "t4",
        "--tp",
        "1",
        "--context",
        "2048",
        "--json",
    )
    line = r.json()["flags"]["vllm"]
    assert "--dtype half" in line
    r = cli("capacity", "--preset", "llama-3.1-8b", "--gpu", "t4", "--dtype", "bfloat16")
    assert r.code == 2 and "no bf16" in r.err


def test_engine_flag_grammar_is_checked(cli: Cli) -> None:
    r = cli("capacity", "--preset", "llama-3.1-8b", "--gpu", "h100", "--block-size", "7")
    assert r.code == 2 and "1, 8, 16, 32, 64, 128, 256 or any multiple of 16" in r.err
    r = cli("capacity", "--preset", "llama-3.1-8b", "--gpu", "h100", "--mem-fraction-static", "0.8")
    assert r.code == 2 and "not a vllm flag" in r.err


@pytest.mark.parametrize(
    ("version", "block", "taken"),
    [
        ("0.3.2", 128, False),
        ("0.3.3", 128, True),  # 0.3.3-0.4.0 list 128 ...
        ("0.4.1", 128, False),  # ... and 0.4.1 drops it again
        ("0.5.4", 256, False),
        ("0.5.5", 256, True),  # 0.5.5 alone lists up to 2048
        ("0.6.0", 256, False),
        ("0.6.4", 64, True),
        ("0.6.5", 64, False),  # 0.6.5's branch lacks 0.6.4's 64 and 128
        ("0.6.6", 64, True),
        ("0.8.4", 1, False),
        ("0.8.5", 1, None),  # the parser takes it, V1's kernels on an H100 do not
        ("0.11.0", 256, False),
        ("0.11.1", 256, True),
        ("0.17.0", 48, False),
        ("0.18.0", 48, True),  # any int from 0.18; the kernels split multiples of 16
        ("0.18.0", 40, False),
    ],
)
def test_block_sizes_follow_the_release(
    cli: Cli, version: str, block: int, taken: bool | None
) -> None:
    """--block-size is checked against the choices of the release the line runs: a size its
    parser refuses is one clear error naming the release, a size it takes is on the line (None:
    the parser takes it and the attention kernels refuse it, one error naming them)."""
    where = ("--preset", "llama-3.1-8b", "--gpu", "h100", "--engine-version", version)
    r = cli("capacity", *where, "--block-size", str(block), "--json")
    if taken:
        assert r.code == 0, r.err
        assert f"--block-size {block} " in r.json()["flags"]["vllm"]
    elif taken is None:
        assert r.code == 2 and "multiples of 16 tokens" in r.json()["error"]
    else:
        assert r.code == 2 and f"vLLM {version} takes" in r.json()["error"]


def test_launch_line_names_a_model_folder_never_a_config_file(cli: Cli, tmp_path: Path) -> None:
    cfg = tmp_path / "x.json"
    cfg.write_text(json.dumps(model_config("meta-llama--Llama-3.1-8B-Instruct")))
    line = cli("capacity", "--model", str(cfg), "--gpu", "h100", "--json").json()["flags"]["vllm"]
    assert line.startswith("vllm serve $MODEL ")
    folder = MODELS / "meta-llama--Llama-3.1-8B-Instruct"
    line = cli("capacity", "--model", str(folder), "--gpu", "h100", "--json").json()["flags"][
        "vllm"
    ]
    assert line.startswith(f"vllm serve {folder} ")


def test_short_context_defaults_the_mean_to_it(cli: Cli) -> None:
    for ledger in ("engine", "textbook"):
        r = cli(
            "capacity",
            "--preset",
            "llama-3.1-8b",
            "--gpu",
            "h100",
            "--context",
            "1000",
            "--ledger",
            ledger,
            "--json",
        )
        assert r.code == 0, r.err
        assert r.json()["settings"]["mean_tokens"] == 1000


def test_fp8_weights_are_on_the_line(cli: Cli) -> None:
    base = ["capacity", "--preset", "llama-3.1-70b", "--gpu", "h100", "--json"]
    fp8 = cli(*base, "--weight-dtype", "fp8").json()
    assert fp8["fits"] is True and "--quantization fp8" in fp8["flags"]["vllm"]
    assert cli(*base).json()["fits"] is False  # 131 GiB of bf16 weights on one 80 GB card


def test_quantized_checkpoint_fits_on_engine_arithmetic(cli: Cli) -> None:
    r = cli("capacity", "--preset", "qwen3-235b-a22b-fp8", "--gpu", "h200", "--tp", "4", "--json")
    data = r.json()
    assert r.code == 0 and data["fits"] is True
    assert "--quantization fp8" in data["flags"]["vllm"]


def test_an_online_quantization_of_a_quantized_checkpoint_is_refused(cli: Cli) -> None:
    """The engines serve a quantized checkpoint as stored (a --quantization other than its
    config's method is refused, or dropped where the checkpoint's own method overrides it):
    fp8 asked of an NVFP4, MXFP4 or int4 checkpoint is refused by the flag it came by, in
    every command that plans an instance; fp8 asked of one that stores fp8 is its own."""
    for name, stored in (
        ("nvidia--Qwen3-235B-A22B-NVFP4", "nvfp4"),
        ("openai--gpt-oss-20b", "mxfp4"),
        ("moonshotai--Kimi-K2.5", "compressed-tensors-int4"),
    ):
        base = ("--model", str(MODELS / name), "--gpu", "b200", "--tp", "8")
        for flag in ("--weight-dtype", "--quantization"):
            r = cli("capacity", *base, flag, "fp8", "--json")
            assert r.code == 2 and r.json()["field"] == flag, (name, flag)
            assert f"is already quantized ({stored})" in r.json()["error"]
        load = ("--concurrency", "2", "--requests", "4", "--prompt-len", "64", "--output-len", "8")
        r = cli("simulate", *base, *load, "--weight-dtype", "fp8", "--json")
        assert r.code == 2 and r.json()["field"] == "--weight-dtype"
        assert cli("capacity", *base, "--json").code == 0  # served as stored
    fp8 = ("capacity", "--model", str(MODELS / "Qwen--Qwen3-32B-FP8"), "--gpu", "h100")
    own, asked = cli(*fp8, "--json").json(), cli(*fp8, "--weight-dtype", "fp8", "--json").json()
    assert asked["flags"] == own["flags"] and "--quantization fp8" in own["flags"]["vllm"]
    assert asked["kv_pool_bytes"] == own["kv_pool_bytes"]


def test_tpot_budget_caps_max_num_seqs(cli: Cli) -> None:
    base = ["capacity", "--preset", "llama-3.1-8b", "--gpu", "h100", "--json"]
    free = cli(*base).json()
    capped = cli(*base, "--tpot", "12").json()
    assert capped["binding"] == "latency" and capped["settings"]["latency_cap"] is not None
    assert capped["operating_concurrency"] == capped["batch_cap"] < free["operating_concurrency"]
    assert "no latency budget given" in free["binding_reason"]


def test_given_max_num_seqs_is_kept_and_warned(cli: Cli) -> None:
    r = cli("capacity", "--preset", "gqa-70b", "--gpu", "mi300x", "--max-num-seqs", "256", "--json")
    data = r.json()
    assert "--max-num-seqs 256" in data["flags"]["vllm"]
    assert any("expect preemptions" in w for w in data["warnings"])
    # the binding names the cap as the user's own, whichever binds
    assert data["binding_reason"].startswith("memory binds: the KV cache holds ")
    assert "fewer than your max_num_seqs cap of 256" in data["binding_reason"]
    small = ["capacity", "--preset", "llama-3.1-70b", "--gpu", "h100", "--tp", "4", "--json"]
    own = cli(*small, "--max-num-seqs", "64").json()
    assert own["binding"] == "engine"
    assert own["binding_reason"].startswith("your max_num_seqs of 64 binds: the KV cache ")
    engine_cap = cli(*small).json()["binding_reason"]
    assert engine_cap.endswith(
        "fewer than the max_num_seqs cap of 1,024 (no latency budget given: "
        "pass --tpot for a latency cap)"
    )


def test_sglang_plan(cli: Cli) -> None:
    data = cli(
        "capacity", "--preset", "llama-3.1-8b", "--gpu", "h100", "--engine", "sglang", "--json"
    ).json()
    line = data["flags"]["sglang"]
    assert line.startswith("python -m sglang.launch_server --model-path")
    assert f"--max-running-requests {data['operating_concurrency']}" in line


def test_engine_plan_locks_and_drift_recomputes_clean(cli: Cli, tmp_path: Path) -> None:
    plan = tmp_path / "plan.yaml"
    assert (
        cli(
            "capacity",
            "--preset",
            "llama-3.1-8b",
            "--gpu",
            "h100",
            "--tpot",
            "20",
            "--save",
            str(plan),
        ).code
        == 0
    )
    text = plan.read_text()
    assert "ledger: engine" in text and "tpot_ms: 20" in text
    r = cli("drift", str(plan))
    assert r.code == 0, r.out


def test_no_output_names_files_users_do_not_have() -> None:
    commands = [
        ["capacity", "--preset", "gqa-70b", "--gpu", "mi300x"],
        ["capacity", "--preset", "gqa-70b", "--gpu", "mi300x", "--ledger", "textbook"],
        ["capacity", "--preset", "gqa-70b", "--gpu", "mi300x", "--json"],
        ["gpus", "--json"],
        ["slo", "--tpot", "50"],
        ["spec", "--alpha", "0.7"],
        ["simulate", "--requests", "30", "--json"],
        ["capacity", "--help"],
    ]
    for args in commands:
        out = subprocess.run(
            [sys.executable, "-m", "planner", *args], capture_output=True, text=True, check=False
        )
        text = out.stdout + out.stderr
        for word in ("REFERENCE", "DESIGN", "../shared", "NOTES.md"):
            assert word not in text, (args, word)


def test_quantized_weights_helper_matches_fp8_suggestion() -> None:
    model = resolve_model(None, LLAMA70)
    assert quantized_weights_bytes(model, "fp8") < 0.55 * model.weights_bytes


def test_one_line_covers_memory_latency_and_speculation(cli: Cli) -> None:
    data = cli(
        "capacity",
        "--preset",
        "llama-3.1-8b",
        "--gpu",
        "h100",
        "--tpot",
        "30",
        "--spec-alpha",
        "0.7",
        "--spec-method",
        "ngram",
        "--json",
    ).json()
    line = data["flags"]["vllm"]
    assert (
        data["speculation"]["enable"] is True
        and data["speculation"]["concurrency"] == (data["operating_concurrency"])
    )
    assert "--speculative-config" in line and "--max-num-seqs" in line
    # at alpha 0 speculation never pays: the line leaves it off and says so
    off = cli(
        "capacity", "--preset", "llama-3.1-8b", "--gpu", "h100", "--spec-alpha", "0", "--json"
    ).json()
    assert off["speculation"]["enable"] is False and "--speculative" not in off["flags"]["vllm"]
    assert any("does not pay" in w for w in off["warnings"])


@pytest.mark.parametrize(
    "flag",
    [
        ["--engine", "vllm"],
        ["--tpot", "50"],
        ["--max-num-seqs", "8"],
        ["--pp", "2"],
        # a switch typed off is typed too (its unset value is None, not False)
        ["--no-flashinfer"],
        ["--no-enable-chunked-prefill"],
    ],
)
def test_engine_options_are_refused_by_the_textbook_not_ignored(cli: Cli, flag: list[str]) -> None:
    r = cli("capacity", "--preset", "gqa-70b", "--gpu", "mi300x", "--ledger", "textbook", *flag)
    assert r.code == 2 and "engine-ledger option" in r.err


def test_batched_tokens_below_max_num_seqs_is_refused(cli: Cli) -> None:
    r = cli(
        "capacity",
        "--preset",
        "llama-3.1-8b",
        "--gpu",
        "h100",
        "--max-num-seqs",
        "512",
        "--max-num-batched-tokens",
        "256",
    )
    assert r.code == 2 and "below --max-num-seqs 512" in r.err
    kept = cli(
        "capacity", "--preset", "llama-3.1-8b", "--gpu", "h100", "--max-num-seqs", "512", "--json"
    ).json()
    line = kept["flags"]["vllm"]
    assert "--max-num-seqs 512" in line and "--max-num-batched-tokens 8192" in line


@pytest.mark.parametrize(
    ("name", "needs"),
    [
        ("moonshotai--Kimi-K2-Instruct", True),  # auto_map: DeepseekV3 classes in the repo
        ("nvidia--Llama-3_3-Nemotron-Super-49B-v1", True),
        ("meta-llama--Llama-3.1-8B-Instruct", False),
    ],
)
def test_lines_carry_trust_remote_code_where_the_config_names_its_code(
    name: str, needs: bool
) -> None:
    model = resolve_model(None, str(MODELS / name))
    assert model.trust_remote_code is needs
    for engine in ("vllm", "sglang"):
        settings = ServeSettings(engine=engine, context_tokens=4096, mean_tokens=2000)  # type: ignore[arg-type]
        line = plan_serve(model, find_gpu("h200"), settings, suggest=False).command
        assert ("--trust-remote-code" in line.split()) is needs


@pytest.mark.parametrize(
    ("version", "head", "kv_flag"),
    [
        ("0.2.7", "python -m vllm.entrypoints.openai.api_server --model ", False),
        ("0.4.2", "python -m vllm.entrypoints.openai.api_server --model ", True),
        ("0.5.1", "python -m vllm.entrypoints.openai.api_server --model ", True),
        ("0.5.2", "vllm serve ", True),
    ],
)
def test_the_line_uses_the_entry_point_and_flags_the_release_had(
    cli: Cli, tmp_path: Path, version: str, head: str, kv_flag: bool
) -> None:
    # `vllm serve` arrived in 0.5.2 and --kv-cache-dtype in 0.3.0: an older release gets the
    # module entry point and no flag it would refuse; drift reads the line back as clean
    where = ("--preset", "llama-3.1-8b", "--gpu", "a100-sxm4-80gb", "--engine-version", version)
    lock = tmp_path / "plan.yaml"
    line = cli("capacity", *where, "--json", "--save", str(lock)).json()["flags"]["vllm"]
    assert line.startswith(head + "meta-llama/Llama-3.1-8B-Instruct ")
    assert ("--kv-cache-dtype" in line) == kv_flag
    assert cli("drift", str(lock), "--against-args", line).code == 0


@pytest.mark.parametrize(
    ("version", "block"), [("0.7.2", 16), ("0.8.5", 64), ("0.12.0", 64), ("0.19.0", 16)]
)
def test_mla_on_hopper_gets_the_block_size_flashmla_forces(
    cli: Cli, version: str, block: int
) -> None:
    # vLLM 0.7.3-0.17.x force blocks of 64 for FlashMLA (MLA models on SM 9.0); the pool is then
    # whole 64-token blocks, and a block size asked for is overridden with a note
    where = ("--preset", "deepseek-v3", "--gpu", "h200", "--tp", "8", "--engine-version", version)
    got = cli("capacity", *where, "--json").json()
    assert f"--block-size {block} " in got["flags"]["vllm"]
    assert got["engine"]["kv_cache_tokens"] % block == 0
    dense = cli("capacity", "--preset", "llama-3.1-8b", "--gpu", "h200", "--engine-version",
                version, "--json").json()  # fmt: skip
    assert "--block-size 16 " in dense["flags"]["vllm"]  # not MLA: the default stands
    if block == 64:
        asked = cli("capacity", *where, "--block-size", "16")
        assert "block_size 16 -> 64" in asked.out


@pytest.mark.parametrize(
    ("gpu", "version", "outcome"),
    [
        ("h100", "0.7.3", "runs"),  # V0: XFormers takes the block FlashAttention does not
        ("h100", "0.10.0", "Block size must be a multiple of 16"),
        ("h100", "0.12.0", "No common block size for 8"),
        ("b200", "0.10.0", "runs"),  # FlashInfer, SM 10.0's default, checked nothing then
        ("b200", "0.12.0", "No common block size for 8"),
        ("h100", "0.20.0", "FlexAttention"),  # the selector falls back, warning
        ("mi300x", "0.20.0", "No common block size for 8"),  # ROCm's selector does not
    ],
)
def test_a_block_v1_kernels_do_not_page_is_refused_where_vllm_fails(
    cli: Cli, gpu: str, version: str, outcome: str
) -> None:
    """vLLM V1's attention kernels take blocks in multiples of 16 tokens: --block-size 8 is
    refused by its flag where the release fails to start, and where 0.18+ falls back to
    FlexAttention the plan says the step times do not model it."""
    where = ("--preset", "llama-3.1-8b", "--gpu", gpu, "--engine-version", version)
    got = cli("capacity", *where, "--block-size", "8", "--json")
    if outcome in ("runs", "FlexAttention"):
        assert got.code == 0 and "--block-size 8 " in got.json()["flags"]["vllm"]
        notes = " ".join(got.json()["engine"]["notes"])
        assert ("FlexAttention" in notes) == (outcome == "FlexAttention")
    else:
        assert got.code == 2 and got.json()["field"] == "--block-size"
        assert outcome in got.json()["error"]
    assert cli("capacity", *where, "--block-size", "32", "--json").code == 0


def test_a_gpu_the_engine_model_does_not_cover_is_refused_not_guessed(cli: Cli) -> None:
    # Gaudi runs vLLM through vllm-gaudi (HPU graphs, bucketing): no CUDA arithmetic for it
    r = cli("capacity", "--preset", "llama-3.1-8b", "--gpu", "gaudi3", "--json")
    assert r.code == 2 and r.json()["field"] == "--gpu" and "vllm-gaudi" in r.json()["error"]
    assert cli("simulate", "--preset", "llama-3.1-8b", "--gpu", "gaudi3", "--prompt-len", "100",
               "--output-len", "10", "--concurrency", "2").code == 2  # fmt: skip
    textbook = cli(
        "capacity", "--preset", "llama-3.1-8b", "--gpu", "gaudi3", "--ledger", "textbook"
    )
    assert textbook.code == 0


def test_chunked_prefill_off_needs_a_budget_of_the_whole_context(cli: Cli) -> None:
    """vLLM refuses to start with chunked prefill off and max_num_batched_tokens under
    max_model_len; off, the default budget is raised to the context (V1 8192-token tier at a
    16K context: 16,384), and V0 turns chunking on by itself only above 32K."""
    base = ("capacity", "--preset", "llama-3.1-8b", "--gpu", "h100")
    refused = cli(*base, "--no-enable-chunked-prefill", "--max-num-batched-tokens", "4096")
    assert refused.code == 1
    assert "max_num_batched_tokens (4,096) is smaller than max_model_len (8,192)" in refused.out
    assert "vllm serve" not in refused.out
    off = cli(*base, "--no-enable-chunked-prefill", "--context", "16384", "--json").json()
    assert off["fits"] and "--max-num-batched-tokens 16384" in off["flags"]["vllm"]
    assert off["flags"]["vllm"].endswith("--no-enable-chunked-prefill")
    on = cli(*base, "--context", "16384", "--json").json()
    assert "--max-num-batched-tokens 8192" in on["flags"]["vllm"]
    assert "chunked-prefill" not in on["flags"]["vllm"]
    # V0 (0.6.3): off at 8K (budget = the context), on at 64K (its 512-token chunks; 2,048
    # from 0.6.5), and a budget under the context is taken only with the flag on, spelled as
    # 0.6 parsed it
    v0 = (*base, "--engine-version", "0.6.3")
    short = cli(*v0, "--json").json()
    assert "--max-num-batched-tokens 8192" in short["flags"]["vllm"]
    long = cli(*v0, "--context", "65536", "--json").json()
    assert "--max-num-batched-tokens 512" in long["flags"]["vllm"]
    later = cli(*base, "--engine-version", "0.6.5", "--context", "65536", "--json").json()
    assert "--max-num-batched-tokens 2048" in later["flags"]["vllm"]
    assert cli(*v0, "--max-num-batched-tokens", "512").code == 1
    chunked = cli(*v0, "--max-num-batched-tokens", "512", "--enable-chunked-prefill", "--json")
    assert chunked.code == 0 and "--enable-chunked-prefill" in chunked.json()["flags"]["vllm"]
    off_long = cli(*v0, "--context", "65536", "--no-enable-chunked-prefill", "--json").json()
    assert off_long["flags"]["vllm"].endswith("--enable-chunked-prefill False")
    assert "--max-num-batched-tokens 65536" in off_long["flags"]["vllm"]
    # the optional boolean lasted through 0.8.4; 0.8.5 generated BooleanOptionalAction flags
    for version, spelled in (("0.8.4", "--enable-chunked-prefill False"),
                             ("0.8.5", "--no-enable-chunked-prefill")):  # fmt: skip
        line = cli(*base, "--engine-version", version, "--no-enable-chunked-prefill",
                   "--context", "16384", "--json").json()["flags"]["vllm"]  # fmt: skip
        assert line.endswith(spelled)


@pytest.mark.parametrize(
    ("version", "flags", "gpu", "chunked"),
    [
        ("0.5.2", (), "h100", False),  # the 32K rule is 0.5.3's
        ("0.5.3", (), "h100", True),
        ("0.5.3", ("--enable-prefix-caching",), "h100", False),  # 0.5.3-0.6.0 stop at caching
        ("0.6.1", ("--enable-prefix-caching",), "h100", True),
        ("0.6.3", ("--enable-lora",), "h100", False),
        ("0.6.4", (), "mi300x", True),
        ("0.6.5", (), "mi300x", False),  # 0.6.5-0.7.3 not on ROCm
        ("0.7.3", (), "mi300x", False),
    ],
)
def test_v0_turns_chunked_prefill_on_above_32k_as_its_release_did(
    cli: Cli, version: str, flags: tuple[str, ...], gpu: str, chunked: bool
) -> None:
    """V0's long-context rule, release by release: where it leaves chunking off the budget is
    the whole context (vLLM refuses a smaller one then), where it turns it on the chunk."""
    got = cli("capacity", "--preset", "llama-3.1-8b", "--gpu", gpu, "--engine-version", version,
              "--context", "65536", *flags, "--json").json()  # fmt: skip
    settings = got["engine"]["settings"]
    assert settings["enable_chunked_prefill"] is chunked
    budget = int(settings["max_num_batched_tokens"])
    assert (budget < 65536) is chunked
    assert f"--max-num-batched-tokens {budget}" in got["flags"]["vllm"]


@pytest.mark.parametrize(
    ("line", "expected"),
    [
        ("vllm serve m --no-enable-chunked-prefill", False),
        ("vllm serve m --enable-chunked-prefill", True),
        ("vllm serve m --enable-chunked-prefill False --max-num-seqs 8", False),
        ("vllm serve m --enable-chunked-prefill=false", False),
        ("vllm serve m --max-num-seqs 8", None),
    ],
)
def test_a_deployed_line_reads_chunked_prefill_in_both_spellings(
    line: str, expected: bool | None
) -> None:
    fields = fields_from_line("vllm", line)
    assert fields.get("enable_chunked_prefill") is expected
    if "--max-num-seqs" in line:
        assert fields["max_num_seqs"] == 8


@pytest.mark.parametrize(
    ("line", "expected"),
    [
        ("vllm serve m --no-enable-prefix-caching", False),
        ("vllm serve m --enable-prefix-caching", True),
        ("vllm serve m --enable-prefix-caching False", False),
        ("vllm serve m --enable-prefix-caching=false", False),
    ],
)
def test_a_line_reads_any_boolean_flag_in_every_spelling(line: str, expected: bool) -> None:
    """Every boolean field, not only chunked prefill, reads an explicit value (it was read as
    an int before, and `False` raised)."""
    assert fields_from_line("vllm", line)["enable_prefix_caching"] is expected


def test_a_fraction_on_the_printed_grid_is_pinned_as_it_is() -> None:
    """A pasted line's --mem-fraction-static 0.7605 is 7604.9999... x 10,000 in floats: the pin
    keeps it (else every paste-back would step it down by 0.0001); off the grid it floors."""
    from planner.core.serve import pinned_fraction

    assert pinned_fraction(0.7605) == 0.7605
    assert pinned_fraction(0.92) == 0.92
    assert pinned_fraction(0.76049) == 0.7604
    assert pinned_fraction(0.8123456) == 0.8123


def test_16_bit_kv_cache_dtype_spellings_from_the_release_that_takes_them() -> None:
    """vLLM takes --kv-cache-dtype bfloat16 from 0.11, fp8_ds_mla from 0.12 and float16 from
    0.18, SGLang bf16 / bfloat16 from 0.5.4 (their CacheDType / choices); earlier releases
    refuse them, and the error names the release and what it takes."""
    from planner.core.serve import check_kv_cache_dtype
    from planner.errors import InputError

    def check(engine: str, version: str, dtype: str) -> None:
        settings = ServeSettings(
            engine=engine,  # type: ignore[arg-type]
            version=version,
            kv_cache_dtype=dtype,
            context_tokens=8192,
            mean_tokens=2000,
        )
        check_kv_cache_dtype(settings)

    check("vllm", "0.11.0", "bfloat16")
    check("vllm", "0.18.0", "float16")
    check("sglang", "0.5.4", "bf16")
    with pytest.raises(InputError, match=r"vLLM 0\.10\.0 takes auto, fp8, fp8_e4m3, fp8_e5m2$"):
        check("vllm", "0.10.0", "bfloat16")
    with pytest.raises(InputError, match=r"vLLM 0\.17\.0 takes .*bfloat16, fp8_ds_mla$"):
        check("vllm", "0.17.0", "float16")
    check("vllm", "0.12.0", "fp8_ds_mla")
    with pytest.raises(InputError, match=r"vLLM 0\.11\.0 takes .*bfloat16$"):
        check("vllm", "0.11.0", "fp8_ds_mla")
    with pytest.raises(InputError, match=r"SGLang 0\.5\.3 takes auto, fp8_e4m3, fp8_e5m2$"):
        check("sglang", "0.5.3", "bfloat16")


def test_max_model_len_auto_fits_the_pool_as_vllm_does(cli: Cli) -> None:
    # Llama-3.1-70B (full attention only) on 2x A100-80GB, vLLM 0.14: `auto` starts from the
    # model's 131,072 tokens and lowers it to the blocks the pool has, x 16 tokens each
    llama = resolve_model(None, LLAMA70)
    a100 = find_gpu("a100-sxm4-80gb")
    auto = vllm_predict(llama, a100, "0.14", -1, tp=2)
    blocks, block = auto.num_gpu_blocks, int(str(auto.settings["block_size"]))
    assert block == 16 and auto.settings["max_model_len"] == blocks * block < 131_072
    assert f"Auto-fit max_model_len: reduced from 131072 to {blocks * block}" in auto.log_lines
    # the same pool as a plain 131,072-token start (the fit moves only the length)
    full = vllm_predict(llama, a100, "0.14", 131_072, tp=2)
    assert (full.num_gpu_blocks, full.available_kv_bytes) == (blocks, auto.available_kv_bytes)
    # the start check counts the null block; serving does not: the note says a request of
    # the whole fitted length cannot run
    assert any("cannot run in full" in n for n in auto.notes)
    # more memory never fits a shorter length
    lengths = [
        int(str(vllm_predict(llama, a100, "0.20", -1, util, tp=2).settings["max_model_len"]))
        for util in (0.88, 0.9, 0.92, 0.95)
    ]
    assert lengths == sorted(lengths) and lengths[0] < lengths[-1]
    # before 0.14 vLLM takes a number only
    with pytest.raises(InputError, match=r"from 0\.14\.0; 0\.13\.0 takes a number"):
        vllm_predict(llama, a100, "0.13", -1, tp=2)


def test_max_model_len_auto_counts_kv_groups_by_release() -> None:
    # Gemma-3-27B (sliding layers first, then every sixth full) on one A100 at 0.74: 0.14-0.18
    # count the first KV group's blocks (a sliding group: any length passes), 0.19+ all groups
    gemma = resolve_model("gemma-3-27b", None)
    a100 = find_gpu("a100-sxm4-80gb")
    old = vllm_predict(gemma, a100, "0.16", -1, 0.74)
    new = vllm_predict(gemma, a100, "0.20", -1, 0.74)
    assert old.settings["max_model_len"] == 131_072
    assert any("check the first KV group's blocks only" in n for n in old.notes)
    fitted = int(str(new.settings["max_model_len"]))
    assert fitted < 131_072
    assert vllm.start_blocks(gemma, new, fitted) <= new.num_gpu_blocks
    assert vllm.start_blocks(gemma, new, fitted + 1) > new.num_gpu_blocks


def test_capacity_max_model_len_auto_line_and_refusals(cli: Cli, tmp_path: Path) -> None:
    r = cli("capacity", "--model", LLAMA70, "--gpu", "a100-sxm4-80gb", "--tp", "2",
            "--max-model-len", "auto", "--engine-version", "0.20", "--json")  # fmt: skip
    assert r.code == 0, r.out
    data = r.json()
    fitted = data["engine"]["settings"]["max_model_len"]
    assert data["settings"]["context_tokens"] == fitted < 131_072
    assert "--max-model-len auto " in data["flags"]["vllm"]
    # what the line says is what a running server's `-1` says, and the plan recomputes
    lock = tmp_path / "auto.yaml"
    assert cli("capacity", "--preset", "llama-3.1-8b", "--gpu", "h100", "--context", "auto",
               "--save", str(lock)).code == 0  # fmt: skip
    line = yaml.safe_load(lock.read_text())["flags"]["vllm"]
    assert cli("drift", str(lock)).code == 0
    deployed = line.replace("--max-model-len auto", "--max-model-len -1")
    assert cli("drift", str(lock), "--against-args", deployed).code == 0
    assert cli("drift", str(lock), "--against-args", line.replace("auto", "131072", 1)).code == 1
    for args, field in (
        (("--engine", "sglang"), "--context"),
        (("--ledger", "textbook"), "--context"),
        (("--engine-version", "0.10"), "--context"),  # the spelling typed
    ):
        bad = cli("capacity", "--preset", "llama-3.1-8b", "--gpu", "h100", "--context", "auto",
                  *args, "--json")  # fmt: skip
        assert bad.code == 2 and bad.json()["field"] == field, bad.out
    typo = cli("capacity", "--preset", "llama-3.1-8b", "--gpu", "h100", "--context", "autox")
    assert typo.code == 2 and "or auto" in typo.err


def vllm_predict(
    model: Any, gpu: Any, version: str, max_model_len: int, util: float | None = None, tp: int = 1
) -> Any:
    """vLLM's prediction for these flags (None: its default utilization)."""
    settings = vllm.VllmSettings(
        version=version,
        max_model_len=max_model_len,
        tensor_parallel_size=tp,
        gpu_memory_utilization=util,
    )
    return vllm.predict(model, gpu, settings)


def test_bf16_kv_keeps_the_release_spelling_where_auto_is_not_16_bits(cli: Cli) -> None:
    # DeepSeek-V3.2 on SGLang caches fp8 on B200 under `auto`: --kv-dtype bf16 says bf16 (0.5.4+)
    v32 = str(MODELS / "deepseek-ai--DeepSeek-V3.2")
    base = ("capacity", "--model", v32, "--gpu", "b200", "--tp", "8", "--engine", "sglang",
            "--json")  # fmt: skip
    auto, bf16 = cli(*base).json(), cli(*base, "--kv-dtype", "bf16").json()
    assert "--kv-cache-dtype bf16 " in bf16["flags"]["sglang"]
    assert "--kv-cache-dtype auto " in auto["flags"]["sglang"]
    # 61 layers x (576 latent + 132 indexer) bytes per token in fp8, (1152 + 132) in bf16
    ratio = auto["engine"]["kv_cache_tokens"] / bf16["engine"]["kv_cache_tokens"]
    assert ratio == pytest.approx(1284 / 708, rel=0.002)
    old = cli("capacity", "--preset", "llama-3.1-8b", "--gpu", "h100", "--kv-dtype", "bf16",
              "--engine-version", "0.10", "--json").json()  # fmt: skip
    assert "--kv-cache-dtype auto" in old["flags"]["vllm"]  # no bfloat16 spelling before 0.11


def test_sglang_starts_with_a_pool_smaller_than_the_context(cli: Cli) -> None:
    # Llama-3.1-8B on 2x L4 at a 131,072-token context: SGLang's pool is smaller than one
    # request of that length, and SGLang starts anyway, capping requests at the pool
    r = cli("capacity", "--preset", "llama-3.1-8b", "--gpu", "l4", "--tp", "2", "--engine",
            "sglang", "--context", "131072", "--json")  # fmt: skip
    assert r.code == 0, r.out
    data = r.json()
    tokens = data["engine"]["kv_cache_tokens"]
    assert data["fits"] and tokens < 131_072 and data["max_seqs_contiguous"] == 0
    assert any(f"refuses requests longer than {tokens - 1:,} tokens" in w for w in data["warnings"])


def test_a_mixed_precision_export_loads_where_the_release_knows_its_algorithms(cli: Cli) -> None:
    """A ModelOpt MIXED_PRECISION checkpoint (nvidia/Qwen3.6-27B-NVFP4: FP8 attention,
    W4A16_NVFP4 MLPs) loads in vLLM from 0.22 (W4A16 layers; the format itself from 0.17) and
    SGLang from 0.5.15; before, the plan is refused by the flag that names the release. The
    line names the method, and the FP8 cache it declares runs."""
    model = str(MODELS / "nvidia--Qwen3.6-27B-NVFP4")

    def plan(engine: str, version: str) -> Result:
        return cli("capacity", "--model", model, "--gpu", "b200", "--engine", engine,
                   "--engine-version", version, "--json")  # fmt: skip

    for engine, before, since in (("vllm", "0.21.0", "0.22.0"), ("sglang", "0.5.14", "0.5.15")):
        refused = plan(engine, before)
        assert refused.code == 2
        assert refused.json()["error"].startswith(f"--engine-version: {before}: {engine} loads")
        assert f"(FP8, W4A16_NVFP4) from {since}" in refused.json()["error"]
        got = plan(engine, since)
        assert got.code == 0, got.out
        data = got.json()
        assert data["model"]["weight_dtype"] == "modelopt-mixed"
        assert "--quantization modelopt_mixed" in data["flags"][engine]
        assert any("declares an FP8 KV cache" in n for n in data["engine"]["notes"])
    # the line's method pasted into --weight-dtype names the checkpoint's own format
    own = cli("capacity", "--model", model, "--gpu", "b200", "--weight-dtype", "modelopt_mixed",
              "--json")  # fmt: skip
    assert own.code == 0 and own.json()["model"] == plan("vllm", "0.34.0").json()["model"]


def test_a_mixed_precision_exports_nvfp4_layers_meet_sglangs_nvfp4_moe_check() -> None:
    """w4a4 NVFP4 layers in a MIXED_PRECISION export run SGLang's NVFP4 MoE method, which
    refuses a card before Blackwell until its Marlin fallback (0.5.13); the W4A16 ones do not."""
    from planner.api.capacity import serve_report
    from planner.core.hf_config import model_spec_from_config

    raw = model_config("nvidia--Qwen3.6-35B-A3B-NVFP4")
    quant = raw["quantization_config"]
    w4a4 = {"quant_algo": "NVFP4", "group_size": 16}
    layers = {
        k: w4a4 if v["quant_algo"] == "W4A16_NVFP4" else v
        for k, v in quant["quantized_layers"].items()
    }
    spec = model_spec_from_config(
        raw | {"quantization_config": quant | {"quantized_layers": layers}}, name="m", source="t"
    )

    def plan(gpu: str, version: str, model: ModelSpec = spec) -> object:
        settings = {"engine": "sglang", "version": version}
        return serve_report(gpu=gpu, preset=None, model=None, revision=None,
                            gpu_memory_gib=None, settings=settings, spec=model)  # fmt: skip

    with pytest.raises(InputError, match=r"SGLang 0\.5\.12 runs NVFP4 experts on compute"):
        plan("h100", "0.5.12")
    assert plan("b200", "0.5.12") and plan("h100", "0.5.13")
    assert plan(
        "h100", "0.5.15", resolve_model(None, str(MODELS / "nvidia--Qwen3.6-35B-A3B-NVFP4"))
    )


def test_a_checkpoint_that_declares_an_fp8_kv_cache_runs_one_under_auto(cli: Cli) -> None:
    """NVIDIA's ModelOpt exports declare an FP8 KV cache (kv_cache_quant_algo FP8): vLLM runs
    `auto` as fp8 from 0.14 and SGLang from 0.5.3, so the pool holds twice the tokens of a
    16-bit one (DeepSeek's MLA latent: 61 layers x 576 values, 1 byte each against 2); an
    explicit bfloat16 keeps 16 bits, and earlier releases run the compute dtype."""
    nvfp4 = str(MODELS / "nvidia--DeepSeek-V3.1-NVFP4")
    assert resolve_model(None, nvfp4).fp8_kv_declared_by == "modelopt"

    def tokens(engine: str, version: str, *flags: str) -> tuple[int, list[str]]:
        got = cli("capacity", "--model", nvfp4, "--gpu", "b200", "--tp", "8", "--engine",
                  engine, "--engine-version", version, *flags, "--json").json()  # fmt: skip
        return got["engine"]["kv_cache_tokens"], got["engine"]["notes"]

    for engine, before, since, sixteen in (
        ("vllm", "0.13.0", "0.14.0", "bfloat16"),
        ("sglang", "0.5.2", "0.5.23", "bf16"),
    ):
        fp8, notes = tokens(engine, since)
        bf16, _ = tokens(engine, since, "--kv-dtype", sixteen)
        assert fp8 / bf16 == pytest.approx((61 * 576 * 2) / (61 * 576 * 1), rel=0.01)
        assert any("declares an FP8 KV cache" in n for n in notes)
        old, old_notes = tokens(engine, before)
        assert old < fp8 and not any("declares an FP8" in n for n in old_notes)
    # SGLang's first release that reads it
    _, notes = tokens("sglang", "0.5.3")
    assert any("declares an FP8 KV cache, which SGLang 0.5.3 runs" in n for n in notes)
    # DeepSeek-V3.2's config hook sees the resolved fp8 spelling: 0.14-0.17 store its auto
    # cache in the fp8_ds_mla layout, as an explicit fp8 is stored
    v32 = str(MODELS / "nvidia--DeepSeek-V3.2-NVFP4")
    auto_v32, fp8_v32 = (
        cli("capacity", "--model", v32, "--gpu", "b200", "--tp", "8", "--engine-version",
            "0.15", "--kv-dtype", kv, "--json").json()["engine"]["kv_cache_tokens"]
        for kv in ("auto", "fp8")
    )  # fmt: skip
    assert auto_v32 == fp8_v32
    # the step model's KV dtype (slo, simulate) is the ledger's
    from planner.core.engines import engine_kv_dtype

    spec, b200 = resolve_model(None, nvfp4), find_gpu("b200")
    assert engine_kv_dtype("vllm", spec, b200, "0.14.0", "auto") == "fp8"
    assert engine_kv_dtype("vllm", spec, b200, "0.13.0", "auto") == "bf16"
    assert engine_kv_dtype("sglang", spec, b200, "0.5.3", "auto") == "fp8"


def test_which_configs_declare_an_fp8_kv_cache_and_which_releases_run_it() -> None:
    """ModelOpt's kv_cache_quant_algo or 8-bit-float kv_cache_scheme, compressed-tensors'
    kv_cache_scheme, an fp8 config's kv_cache_quant_algo; vLLM forces an llm-compressor scheme's
    fp8 in 0.15-0.21 whatever the flag, from 0.22 for auto; SGLang reads fp8 configs' from
    0.5.18 and compressed-tensors' from 0.5.19."""
    from planner.core.engines import sglang
    from planner.core.hf_config import model_spec_from_config

    base = model_config("meta-llama--Llama-3.1-8B-Instruct")
    scheme = {"type": "float", "num_bits": 8, "strategy": "tensor", "dynamic": False}
    group = {"weights": {"type": "float", "num_bits": 8}, "targets": ["Linear"]}
    configs = {
        "compressed-tensors": {"quant_method": "compressed-tensors",
                               "config_groups": {"group_0": group}, "kv_cache_scheme": scheme},
        "fp8": {"quant_method": "fp8", "kv_cache_quant_algo": "FP8"},
        None: {"quant_method": "fp8"},
    }  # fmt: skip
    specs = {
        by: model_spec_from_config(base | {"quantization_config": q}, name="x", source="local")
        for by, q in configs.items()
    }
    for by, spec in specs.items():
        assert spec.fp8_kv_declared_by == by
    ct, fp8 = specs["compressed-tensors"], specs["fp8"]
    assert not vllm.checkpoint_fp8_kv(ct, (0, 14, 0), "auto")
    assert vllm.checkpoint_fp8_kv(ct, (0, 15, 0), "bfloat16")  # forced, whatever the flag
    assert vllm.checkpoint_fp8_kv(ct, (0, 22, 0), "auto")
    assert not vllm.checkpoint_fp8_kv(ct, (0, 22, 0), "bfloat16")
    assert not vllm.checkpoint_fp8_kv(fp8, (0, 34, 0), "auto")  # vLLM reads no fp8 config's
    assert not sglang.checkpoint_fp8_kv(fp8, (0, 5, 17), "auto")
    assert sglang.checkpoint_fp8_kv(fp8, (0, 5, 18), "auto")
    assert not sglang.checkpoint_fp8_kv(ct, (0, 5, 18), "auto")
    assert sglang.checkpoint_fp8_kv(ct, (0, 5, 19), "auto")
    assert not sglang.checkpoint_fp8_kv(ct, (0, 5, 23), "bf16")
    # the plan says so where the flag asked otherwise, not where it asked for fp8 itself
    from planner.api import engine_plan

    def notes(kv: str) -> list[str]:
        got = engine_plan(engine="vllm", gpu="h100", spec=ct, version="0.18.0",
                          kv_cache_dtype=kv, max_model_len=4096)  # fmt: skip
        return [n for n in got.notes if "declares an FP8 KV cache" in n]

    assert notes("bfloat16") and "whatever --kv-cache-dtype says" in notes("bfloat16")[0]
    assert notes("fp8") == []
