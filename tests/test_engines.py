"""Engine-faithful KV predictions: vLLM's and SGLang's own arithmetic, versions, --from-log."""

from __future__ import annotations

import json
import statistics
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from helpers import DATA, MODELS, Result, model_config

from planner.api import engine_plan, from_log_report
from planner.core.engines import sglang, vllm
from planner.core.engines.common import EnginePrediction, parse_version
from planner.core.specs import ModelSpec
from planner.errors import InputError
from planner.sources.models import resolve_model
from planner.sources.presets import find_gpu
from planner.sources.startup_log import parse_startup_log
from planner.units import GIB_BYTES

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "benchmarks"))
import engine_fidelity

Cli = Callable[..., Result]
CASES = [json.loads(x) for x in (DATA / "calibration" / "cases.jsonl").read_text().splitlines()]
LLAMA8 = str(MODELS / "meta-llama--Llama-3.1-8B-Instruct" / "config.json")
GIB = GIB_BYTES


def gib(x: float) -> int:
    return round(x * GIB)


def plan(**kw: object) -> EnginePrediction:
    base: dict[str, object] = {"engine": "vllm", "gpu": "h100", "model": LLAMA8}
    result = engine_plan(**(base | kw))
    assert isinstance(result, EnginePrediction)
    return result


def test_older_vllm_llama8b_h100_term_by_term() -> None:
    # weights 14.99 GiB, activations 4.76, non-torch 0.13, 79.18 GiB seen by the engine
    p = plan(
        version="0.10.1",
        gpu_memory_utilization=0.9,
        max_model_len=8192,
        measured={
            "total_memory_bytes": gib(79.18),
            "weights_bytes": gib(14.99),
            "activation_peak_bytes": gib(4.76),
            "non_torch_bytes": gib(0.13),
        },
    )
    # 0.9 x 79.18 - 14.99 - 4.76 - 0.13 = 51.38 GiB (inputs are the log's 2-decimal GiB)
    assert p.available_kv_bytes / GIB == pytest.approx(51.38, abs=0.005)
    assert p.bytes_per_block == 32 * 16 * 8 * 256 * 2  # 2 MiB: 32 layers x 16 tokens x 8 heads
    assert abs(p.num_gpu_blocks - 26_306) <= 1  # rounding of the four logged terms
    # From the logged 51.38 GiB on, the arithmetic is exact: blocks, tokens, concurrency, lines.
    p = plan(
        version="0.10.1",
        gpu_memory_utilization=0.9,
        max_model_len=8192,
        kv_cache_memory_bytes=gib(51.38),
    )
    assert p.num_gpu_blocks == 26_306
    assert p.kv_cache_tokens == 420_896 == 26_306 * 16
    assert round(p.max_concurrency, 2) == 51.38
    assert p.log_lines[1:] == [
        "GPU KV cache size: 420,896 tokens",
        "Maximum concurrency for 8,192 tokens per request: 51.38x",
    ]


def test_version_table_utilization_graphs_and_log_format() -> None:
    old = plan(version="0.19.0", max_model_len=8192)
    new = plan(version="0.20.2", max_model_len=8192)
    one_line = plan(version="0.33.0", max_model_len=8192)
    newest = plan(max_model_len=8192)
    assert old.settings["gpu_memory_utilization"] == 0.9
    assert new.settings["gpu_memory_utilization"] == 0.92
    assert old.cudagraph_bytes == 0 and new.cudagraph_bytes > 0  # estimate subtracted from 0.20
    assert plan(version="0.20.2", max_model_len=8192, enforce_eager=True).cudagraph_bytes == 0
    assert len(old.log_lines) == 3 and len(new.log_lines) == 3  # two capacity lines
    assert len(one_line.log_lines) == 2  # one combined line since 0.28
    assert one_line.log_lines[1].startswith("GPU KV cache size: ")
    assert ", Maximum concurrency for 8,192 tokens per request: " in one_line.log_lines[1]
    assert any("default" in d for d in newest.defaults_used)
    # 0.34: the extensible KV cache at utilization 1.0 and 64-token blocks; the profile's
    # estimate, then the size after warm-up, then the capacity line
    assert newest.settings["gpu_memory_utilization"] == 1.0
    assert newest.settings["block_size"] == 64
    assert newest.log_lines[1].startswith("Memory after warmup: ")
    assert newest.log_lines[2].startswith("GPU KV cache size: ")


def test_gb10_takes_the_small_batch_tier_from_0_33() -> None:
    """vLLM 0.33 keeps a GB10 (DGX Spark, 12.1) on the 2,048 / 256 tier its 119 GiB of unified
    memory would otherwise lift to 8,192 / 1,024 (arg_utils.py is_gb10); an H200 keeps its tier."""
    old = plan(gpu="gb10", version="0.32.0", max_model_len=8192)
    new = plan(gpu="gb10", version="0.33.0", max_model_len=8192)
    assert (old.settings["max_num_batched_tokens"], old.settings["max_num_seqs"]) == (8192, 1024)
    assert (new.settings["max_num_batched_tokens"], new.settings["max_num_seqs"]) == (2048, 256)
    assert plan(gpu="h200", version="0.33.0", max_model_len=8192).settings["max_num_seqs"] == 1024


def test_null_block_is_reserved_but_counted_in_the_log() -> None:
    p = plan(version="0.19.0", max_model_len=8192, gpu_memory_utilization=0.95)
    assert p.usable_blocks == p.num_gpu_blocks - 1
    assert p.kv_cache_tokens == p.num_gpu_blocks * 16


def test_v0_log_format() -> None:
    p = plan(
        version="0.6.4",
        engine_mode="v0",
        gpu="rtx-3090",
        gpu_memory_utilization=0.9,
        max_model_len=20000,
    )
    assert p.log_lines[0].startswith("# GPU blocks: ")
    assert p.log_lines[1].startswith("Maximum concurrency for 20000 tokens per request: ")
    assert p.settings["max_num_batched_tokens"] == 20000  # V0 profiles a max-length prompt


def test_tp_beyond_kv_heads_keeps_one_head_per_rank() -> None:
    tp8 = plan(version="0.19.0", tensor_parallel_size=8, max_model_len=8192)
    tp16 = plan(version="0.19.0", tensor_parallel_size=16, max_model_len=8192)
    page_one_head = 16 * 1 * 256 * 2
    assert tp8.bytes_per_block == tp16.bytes_per_block == 32 * page_one_head


def test_mla_latent_not_divided_by_tp() -> None:
    dsv2 = str(MODELS / "deepseek-ai--DeepSeek-V2-Lite" / "config.json")
    one = plan(model=dsv2, version="0.19.0", max_model_len=8192)
    two = plan(model=dsv2, version="0.19.0", max_model_len=8192, tensor_parallel_size=2)
    assert one.bytes_per_block == two.bytes_per_block == 27 * 16 * (512 + 64) * 2


def test_sliding_window_per_request_blocks_gpt_oss() -> None:
    gpt = str(MODELS / "openai--gpt-oss-20b" / "config.json")
    p = plan(
        model=gpt,
        version="0.19.0",
        max_model_len=8192,
        tensor_parallel_size=2,
        max_num_batched_tokens=8192,
    )
    assert p.num_kv_groups == 2  # 12 sliding + 12 full layers: equal buckets, one group each
    # full: 8192/16 = 512; sliding: cdiv(min(128 - 1 + 8192, 8192), 16) + 1 = 513
    assert p.blocks_per_request == 512 + 513
    assert p.bytes_per_block == 12 * 16 * 4 * (64 + 64) * 2
    assert p.kv_cache_tokens == p.num_gpu_blocks // 2 * 16


def test_gemma3_hybrid_groups() -> None:
    gemma = str(MODELS / "google--gemma-3-4b-it" / "config.json")
    p = plan(model=gemma, version="0.19.0", max_model_len=8192, gpu_memory_utilization=0.95)
    assert p.num_kv_groups == 1 + 6  # 5 global layers; 29 sliding layers in groups of 5
    assert p.blocks_per_request == 512 + 6 * 513


def test_calibration_errors_within_bounds() -> None:
    errors: dict[str, list[float]] = {"vllm": [], "sglang": []}
    for case in CASES:
        predicted = engine_fidelity.predict(case).kv_cache_tokens
        err = abs(predicted - case["kv_cache_tokens"]) / case["kv_cache_tokens"]
        errors[case["engine"]].append(err)
        if case["id"].startswith("llmd-"):
            assert err < 0.01, case["id"]  # H100 vLLM 0.19 sweep: every case within 1%
    for engine in ("vllm", "sglang"):  # the issue's bounds
        assert statistics.median(errors[engine]) <= 0.02, engine
        assert max(errors[engine]) <= 0.05, engine


def test_sglang_docs_case() -> None:
    p = engine_plan(
        engine="sglang", gpu="h100", model=LLAMA8, version="0.4.1", mem_fraction_static=0.88
    )
    assert p.kv_cache_tokens == pytest.approx(444_500, rel=0.005)
    assert p.settings["max_running_requests"] == 2049  # 0.4.x logs the pool size (+1)
    # 0.4.1 wording, as the log has it: no #tokens in the KV line, no chunked_prefill_size
    assert p.log_lines[0].startswith("KV Cache is allocated. K size: ")
    assert p.log_lines[0].endswith(" GB.")
    assert p.log_lines[1] == (
        f"max_total_num_tokens={p.kv_cache_tokens}, max_prefill_tokens=16384, "
        "max_running_requests=2049, context_len=131072"
    )
    new = engine_plan(engine="sglang", gpu="h100", model=LLAMA8, mem_fraction_static=0.88)
    assert new.log_lines[0].startswith(
        f"KV Cache is allocated. dtype: torch.bfloat16, #tokens: {new.kv_cache_tokens}, K size: "
    )
    assert new.log_lines[1].startswith(
        f"max_total_num_tokens={new.kv_cache_tokens}, chunked_prefill_size=8192, "
        "max_prefill_tokens=16384, "
    )
    replay = engine_plan(
        engine="sglang",
        gpu="h100",
        model=LLAMA8,
        version="0.4.1",
        mem_fraction_static=0.88,
        measured={"pre_load_free_bytes": gib(78.81), "weights_bytes": gib(78.81 - 63.72)},
    )
    assert replay.kv_cache_tokens == pytest.approx(444_500, rel=0.0005)
    assert replay.log_lines[0] == "KV Cache is allocated. K size: 27.13 GB, V size: 27.13 GB."


def test_sglang_page_size_follows_its_attention_backend() -> None:
    """Unset, SGLang's page is 1, except where its attention backend sets it: 64 on B200 for
    a plain-attention model from 0.5.7 (trtllm_mha), for DeepSeek-R1 from 0.5.4 (trtllm_mla),
    and for DeepSeek-V3.2's sparse attention on any NVIDIA card from 0.5.4 (on ROCm by release);
    an explicit page is kept; AMD keeps 1 otherwise."""

    def page(**kw: object) -> object:
        return engine_plan(**({"engine": "sglang", "context_length": 8192} | kw)).settings[
            "page_size"
        ]

    assert page(gpu="b200", model=LLAMA8) == 64
    gemma4 = MODELS / "google--gemma-4-31B-it"
    assert page(gpu="b200", model=gemma4) == 64
    assert page(gpu="b200", model=gemma4, version="0.5.12") == 1  # Triton until then
    assert page(gpu="b200", model=LLAMA8, version="0.5.6") == 1
    assert page(gpu="h200", model=LLAMA8) == page(gpu="mi355x", model=LLAMA8) == 1
    assert page(gpu="b200", model=LLAMA8, page_size=16) == 16
    r1 = MODELS / "deepseek-ai--DeepSeek-R1"
    assert page(gpu="b200", model=r1, tp_size=8) == 64
    assert page(gpu="b200", model=r1, tp_size=8, version="0.5.3") == 1
    assert page(gpu="h200", model=r1, tp_size=8) == 1
    v32 = MODELS / "deepseek-ai--DeepSeek-V3.2"
    assert page(gpu="h200", model=v32, tp_size=8) == 64
    # on ROCm: 64 through 0.5.7, 1 in 0.5.8-0.5.11, 64 from 0.5.12 (aiter's preshuffle path)
    expected = {"0.5.3": 1, "0.5.4": 64, "0.5.7": 64, "0.5.8": 1, "0.5.11": 1, "0.5.12": 64}
    for version, size in (expected | {"0.5.23": 64}).items():
        assert page(gpu="mi355x", model=v32, tp_size=8, version=version) == size, version
    rocm_plan = engine_plan(
        engine="sglang", gpu="mi355x", model=v32, tp_size=8, context_length=8192
    )
    assert any("page_size=64" in d and "Triton < 3.5" in d for d in rocm_plan.defaults_used)


def test_a_page_the_tensorrt_llm_kernels_do_not_take_is_changed_to_64(cli: Cli) -> None:
    """Where SGLang runs TensorRT-LLM attention (B200), a --page-size outside the kernel's
    sizes is changed to 64 (MHA: 16 / 32 / 64, and 128 from 0.5.17; MLA: 32 / 64), and
    DeepSeek's sparse attention runs its own page whatever is asked: the plan runs the page
    SGLang runs, the line states it and a warning names the backend. Elsewhere the page asked
    stands."""

    def page(**kw: object) -> object:
        return engine_plan(**({"engine": "sglang", "context_length": 8192} | kw)).settings[
            "page_size"
        ]

    assert page(gpu="b200", model=LLAMA8, page_size=1) == 64
    assert page(gpu="b200", model=LLAMA8, page_size=32) == 32
    assert page(gpu="b200", model=LLAMA8, page_size=128, version="0.5.16") == 64
    assert page(gpu="b200", model=LLAMA8, page_size=128, version="0.5.17") == 128
    assert page(gpu="b200", model=LLAMA8, page_size=1, version="0.5.6") == 1  # before trtllm_mha
    assert page(gpu="h200", model=LLAMA8, page_size=8) == 8
    r1 = MODELS / "deepseek-ai--DeepSeek-R1"
    assert page(gpu="b200", model=r1, tp_size=8, page_size=16) == 64
    assert page(gpu="b200", model=r1, tp_size=8, page_size=32) == 32
    v32 = MODELS / "deepseek-ai--DeepSeek-V3.2"
    assert page(gpu="h200", model=v32, tp_size=8, page_size=16) == 64
    got = cli("capacity", "--preset", "llama-3.1-8b", "--gpu", "b200", "--engine", "sglang",
              "--page-size", "1", "--json").json()  # fmt: skip
    assert "--page-size 64 " in got["flags"]["sglang"]
    assert any("page_size 1 -> 64" in w and "TensorRT-LLM MHA" in w for w in got["warnings"])


@pytest.mark.parametrize(("version", "per_group"), [("0.4.3", 8192 // 2), ("0.4.5", 8192 // 8)])
def test_sglang_data_parallel_attention_divides_the_chunk_as_its_release_does(
    version: str, per_group: int
) -> None:
    """SGLang 0.4.0-0.4.4 halved --chunked-prefill-size under data-parallel attention (each
    group running half the flag's, whatever the groups); 0.4.5 on divides it among the groups.
    The line slo and capacity --tpot print undoes the same division."""
    r1 = MODELS / "deepseek-ai--DeepSeek-R1"
    plan = engine_plan(
        engine="sglang", gpu="h200", model=r1, version=version, tp_size=8, attn_dp_size=8,
        chunked_prefill_size=8192, context_length=8192,
    )  # fmt: skip
    assert plan.settings["chunked_prefill_per_group"] == per_group
    assert per_group * sglang.chunk_divisor(8, parse_version(version)) == 8192  # the line


def test_sglang_0_4_0_caps_data_parallel_attentions_decode_graphs() -> None:
    """0.4.0 capped the decode CUDA graphs at 96 sequences under data-parallel attention,
    after the memory fraction was set (the pool is the same); 0.4.1 dropped the cap."""
    r1 = MODELS / "deepseek-ai--DeepSeek-R1"
    where = {"engine": "sglang", "gpu": "h200", "model": r1, "tp_size": 8, "context_length": 8192}
    capped = engine_plan(**where, version="0.4.0", attn_dp_size=8)
    later = engine_plan(**where, version="0.4.1", attn_dp_size=8)
    pure_tp = engine_plan(**where, version="0.4.0")
    assert capped.settings["cuda_graph_max_bs_decode"] == 96
    assert later.settings["cuda_graph_max_bs_decode"] > 96
    assert pure_tp.settings["cuda_graph_max_bs_decode"] > 96
    assert capped.kv_cache_tokens == later.kv_cache_tokens


@pytest.mark.parametrize(
    ("engine", "before", "since"), [("vllm", "0.5.0", "0.5.1"), ("sglang", "0.4.6", "0.4.7")]
)
def test_pipeline_parallelism_is_refused_before_the_release_that_runs_it(
    cli: Cli, engine: str, before: str, since: str
) -> None:
    """vLLM raises on --pipeline-parallel-size > 1 through 0.5.0 ("not supported yet") and
    SGLang has no --pp-size before 0.4.7: a plan for those releases is refused by --pp, in
    capacity and simulate alike; the next release plans it."""
    base = ("--preset", "llama-3.1-70b", "--gpu", "h100", "--tp", "4", "--engine", engine)
    load = ("--concurrency", "2", "--requests", "4", "--prompt-len", "64", "--output-len", "8")
    for command in (("capacity",), ("simulate", *load)):
        r = cli(*command, *base, "--pp", "2", "--engine-version", before, "--json")
        assert r.code == 2 and r.json()["field"] == "--pp", (command, r.out)
        assert f"from {since}" in r.json()["error"]
        assert cli(*command, *base, "--pp", "2", "--engine-version", since, "--json").code == 0
    # one stage is no pipeline: the old release plans it
    assert cli("capacity", *base, "--engine-version", before, "--json").code == 0


@pytest.mark.parametrize(
    ("preset", "before", "since"),
    [
        ("mixtral-8x7b", "0.5.2", "0.5.3"),
        ("qwen2.5-7b", "0.5.3", "0.5.4"),
        ("gemma-2-9b", "0.6.2", "0.6.3"),
    ],
)
def test_vllm_pipelines_only_the_architectures_its_release_lists(
    cli: Cli, preset: str, before: str, since: str
) -> None:
    """vLLM 0.5.1-0.6.2 ran pipeline parallelism for the architectures of its
    _PP_SUPPORTED_MODELS alone (Mixtral from 0.5.3, Qwen2 from 0.5.4; Gemma 2 never listed,
    pipelined from 0.6.3 by its class's SupportsPP): an architecture a release does not list is
    refused by --pp, and the release that lists it plans the layout."""
    base = ("capacity", "--preset", preset, "--gpu", "h100", "--tp", "2", "--pp", "2", "--json")
    r = cli(*base, "--engine-version", before)
    assert r.code == 2 and r.json()["field"] == "--pp", r.out
    assert "pipelines only the architectures it lists" in r.json()["error"]
    assert cli(*base, "--engine-version", since).code == 0


@pytest.mark.parametrize(
    ("preset", "before", "since"),
    [("deepseek-v2-lite", "0.4.10", "0.5.1"), ("gemma-3-27b", "0.5.23", None)],
)
def test_sglang_pipelines_only_models_whose_class_takes_stages(
    cli: Cli, preset: str, before: str, since: str | None
) -> None:
    """SGLang asserts at start-up that a pipelined model's forward takes pp_proxy_tensors:
    DeepSeek-V2's does from 0.5.1, Gemma 3's in no release through 0.5.23. --pp 2 is refused by
    the flag there (capacity and fleet's layouts alike go through the engine model)."""
    base = ("capacity", "--preset", preset, "--gpu", "h100", "--pp", "2", "--engine", "sglang")
    r = cli(*base, "--engine-version", before, "--json")
    assert r.code == 2 and r.json()["field"] == "--pp", r.out
    assert "cannot pipeline" in r.json()["error"]
    if since is not None:
        assert cli(*base, "--engine-version", since, "--json").code == 0
    # one stage: planned in any release
    assert cli(*base[:-4], "--engine", "sglang", "--engine-version", before, "--json").code == 0


def test_sglang_deepep_beside_dp_attention_from_the_release_that_allows_its_auto_mode(
    cli: Cli,
) -> None:
    """SGLang 0.4.5-0.4.8 assert against DeepEP's default auto mode with DP attention; 0.4.9
    drops the assertion. The plan prices the auto mode (low-latency kernels in decode batches,
    normal ones in prefill batches): an aggregated server on such a release is refused by the
    flag, either alone plans, and a PD instance, whose batches are of one kind, names its mode."""
    v3 = ("capacity", "--preset", "deepseek-v3", "--gpu", "h200", "--tp", "8", "--engine", "sglang")
    both = ("--dp", "8", "--dp-attention", "--ep", "8", "--moe-a2a-backend", "deepep", "--json")
    r = cli(*v3, *both, "--engine-version", "0.4.8")
    assert r.code == 2 and r.json()["field"] == "--moe-a2a-backend", r.out
    assert (
        "--deepep-mode"
        not in cli(*v3, *both, "--engine-version", "0.4.9").json()["flags"]["sglang"]
    )
    assert cli(*v3, *both[3:], "--engine-version", "0.4.8").code == 0  # DeepEP alone
    pools = ("--disagg", "1P1D", "--prefill-tp", "16", "--decode-tp", "16", "--prefill-dp", "16")
    pools += ("--decode-dp", "16", "--prefill-ep", "16", "--decode-ep", "16")
    load = ("--prompt-len", "1000", "--output-len", "20", "--concurrency", "8", "--requests", "8")
    pd = cli("simulate", "--preset", "deepseek-v3", "--gpu", "h100", "--engine", "sglang",
             "--engine-version", "0.4.8", *pools, *load, "--json")  # fmt: skip
    assert pd.code == 0, pd.out
    lines = pd.json()["deployment"]["disagg"]
    assert "--deepep-mode normal " in lines["prefill"]["command"]
    assert "--deepep-mode low_latency " in lines["decode"]["command"]


def test_sglang_chunks_must_divide_by_the_page_size_as_its_release_checks(cli: Cli) -> None:
    """SGLang asserts the chunked-prefill size divides by the page size: the global size
    through 0.4.9, each attention-DP group's share from 0.4.10. A page that does not divide it
    is refused by the flag given; one that divides the size but not the group's share passes
    0.4.9 and is refused by 0.4.10."""
    llama = ("capacity", "--preset", "llama-3.1-8b", "--gpu", "h100", "--engine", "sglang")
    r = cli(*llama, "--page-size", "48", "--json")
    assert r.code == 2 and r.json()["field"] == "--page-size", r.out
    assert "divides by the page size, 48" in r.json()["error"]
    assert cli(*llama, "--page-size", "64", "--json").code == 0
    given = cli(*llama, "--page-size", "16", "--chunked-prefill-size", "1000", "--json")
    assert given.code == 2 and given.json()["field"] == "--page-size"
    # DeepSeek-V3 at 8 attention-DP groups: a 4,160-token chunk is 65 pages of 64, each
    # group's 520 tokens are not
    v3 = ("capacity", "--preset", "deepseek-v3", "--gpu", "h200", "--tp", "8", "--dp", "8")
    v3 += ("--dp-attention", "--engine", "sglang", "--page-size", "64")
    v3 += ("--chunked-prefill-size", "4160", "--json")
    per_group = cli(*v3, "--engine-version", "0.4.10")
    assert per_group.code == 2 and "each attention-DP group's share" in per_group.json()["error"]
    assert cli(*v3, "--engine-version", "0.4.9").code == 0


def test_sglang_keeps_a_servers_dp_replicas_on_one_host(cli: Cli) -> None:
    """From 0.4.2 SGLang asserts that --dp-size replicas without DP attention do not span
    nodes: TP 8 x DP 2 on 8-GPU H100 hosts is refused by --dp (0.4.1 took it), TP 4 x DP 2 on
    one host plans, and on an NVL72 rack a host is a 4-GPU tray."""
    base = ("capacity", "--preset", "llama-3.1-70b", "--engine", "sglang", "--json")
    r = cli(*base, "--gpu", "h100", "--tp", "8", "--dp", "2")
    assert r.code == 2 and r.json()["field"] == "--dp", r.out
    assert "8 a host" in r.json()["error"]
    assert (
        cli(*base, "--gpu", "h100", "--tp", "8", "--dp", "2", "--engine-version", "0.4.1").code == 0
    )
    assert (
        "--dp-size 2"
        in cli(*base, "--gpu", "h100", "--tp", "4", "--dp", "2").json()["flags"]["sglang"]
    )
    tray = cli(*base, "--gpu", "gb200", "--tp", "4", "--dp", "2")
    assert tray.code == 2 and "4 a host" in tray.json()["error"]


def test_a_server_over_hosts_names_them_on_its_line(cli: Cli) -> None:
    """SGLang spreads one server over hosts with --nnodes, --node-rank and the rank-0 host's
    address (--nccl-init-addr before 0.3.3): a TP-16 line on 8-GPU hosts carries them, with
    the rank and address as shell variables, and drift reads the line back as the plan's. A
    vLLM server over hosts runs its line on a Ray cluster's head: the plan says so, and the
    line names the Ray backend where the flag exists (0.4.3+; 0.11.1+ refuse a world larger
    than the host without it)."""
    v3 = ("capacity", "--preset", "deepseek-v3", "--gpu", "h100", "--tp", "16", "--json")
    got = cli(*v3, "--engine", "sglang").json()
    line = got["flags"]["sglang"]
    assert "--nnodes 2 --node-rank $NODE_RANK --dist-init-addr $HEAD_ADDR:25000" in line
    assert any("NODE_RANK=0..1" in w for w in got["warnings"])
    one_host = cli("capacity", "--preset", "deepseek-v3", "--gpu", "h200", "--tp", "8",
                   "--engine", "sglang", "--json").json()["flags"]["sglang"]  # fmt: skip
    assert "--nnodes" not in one_host
    old = cli("capacity", "--preset", "llama-3.1-405b", "--gpu", "h100", "--tp", "16",
              "--engine", "sglang", "--engine-version", "0.3.2", "--json")  # fmt: skip
    assert "--nccl-init-addr $HEAD_ADDR:25000" in old.json()["flags"]["sglang"]
    vllm_plan = cli(*v3[:-1], "--pp", "1", "--json").json()
    assert any("Ray cluster" in w for w in vllm_plan["warnings"])
    assert "--nnodes" not in vllm_plan["flags"]["vllm"]
    assert "--distributed-executor-backend ray" in vllm_plan["flags"]["vllm"]
    one = cli("capacity", "--preset", "deepseek-v3", "--gpu", "h200", "--tp", "8", "--json")
    assert "--distributed-executor-backend" not in one.json()["flags"]["vllm"]
    before = cli("capacity", "--preset", "llama-3.1-405b", "--gpu", "h100", "--tp", "16",
                 "--engine-version", "0.4.2", "--json").json()["flags"]["vllm"]  # fmt: skip
    assert "--distributed-executor-backend" not in before  # every TP > 1 ran on Ray then


@pytest.mark.parametrize(
    ("engine", "preset", "gpu", "layout"),
    [
        ("vllm", "llama-3.1-405b", "h100", ("--tp", "16")),
        ("sglang", "llama-3.1-405b", "h100", ("--tp", "16")),
        ("vllm", "deepseek-v3", "h200", ("--tp", "4", "--dp", "4", "--enable-expert-parallel")),
    ],
)
def test_a_line_over_hosts_pastes_back_as_the_same_deployment(
    cli: Cli, tmp_path: Path, engine: str, preset: str, gpu: str, layout: tuple[str, ...]
) -> None:
    """The flags a line over hosts carries (SGLang's --nnodes / --node-rank / --dist-init-addr,
    vLLM's --distributed-executor-backend ray, or its --data-parallel-size-local /
    --data-parallel-address for data-parallel ranks a host) are taken back by capacity and
    simulate: the same line, and drift finds it the plan's. A host count other than the
    layout's, or multiprocessing over hosts, is refused by its flag."""
    import shlex

    lock = tmp_path / "plan.yaml"
    where = ("--preset", preset, "--gpu", gpu, "--engine", engine)
    first = cli("capacity", *where, *layout, "--save", str(lock), "--json")
    line = first.json()["flags"][engine]
    words = shlex.split(line)
    flags = words[3:] if engine == "vllm" else words[words.index("--model-path") + 2 :]
    again = cli("capacity", *where, *flags, "--json")
    assert again.code == 0, again.out
    assert again.json()["flags"][engine] == line
    assert cli("drift", str(lock), "--against-args", line).code == 0
    sim = cli("simulate", *where, *flags, "--prompt-len", "500", "--output-len", "20",
              "--concurrency", "2", "--requests", "4", "--json")  # fmt: skip
    assert sim.code == 0, sim.out
    if "--dp" in layout:
        wrong = cli("capacity", *where, *layout, "--data-parallel-size-local", "4", "--json")
        assert wrong.code == 2 and wrong.json()["field"] == "--data-parallel-size-local"
        assert "2 data-parallel ranks a host" in wrong.json()["error"]
    elif engine == "sglang":
        wrong = cli("capacity", *where, "--tp", "16", "--nnodes", "4", "--json")
        assert wrong.code == 2 and wrong.json()["field"] == "--nnodes"
        assert "span 2 hosts of 8" in wrong.json()["error"]
        other = cli("capacity", *where, "--tp", "16", "--distributed-executor-backend", "ray")
        assert other.code == 2 and "--distributed-executor-backend" in other.err
    else:
        mp = cli("capacity", *where, "--tp", "16", "--distributed-executor-backend", "mp")
        assert mp.code == 2 and "runs on Ray" in mp.err
        one_host = cli("capacity", *where, "--tp", "8", "--quantization", "fp8",
                       "--distributed-executor-backend", "mp")  # fmt: skip
        assert one_host.code == 0, one_host.out
        assert cli("capacity", *where, "--tp", "8", "--nnodes", "1").code == 2  # SGLang's


def test_gpt_oss_pipelines_from_the_release_whose_class_supports_it(cli: Cli) -> None:
    """vLLM 0.10.1 registered gpt-oss with a model class that does not declare SupportsPP
    (0.10.2's does): --pp 2 is refused there, planned a release later."""
    base = ("capacity", "--preset", "gpt-oss-120b", "--gpu", "h100", "--tp", "2", "--pp", "2")
    r = cli(*base, "--engine-version", "0.10.1", "--json")
    assert r.code == 2 and r.json()["field"] == "--pp", r.out
    assert "(from 0.10.2)" in r.json()["error"]
    assert cli(*base, "--engine-version", "0.10.2", "--json").code == 0


def test_vllm_lines_spell_fp8_kv_and_the_capture_size_as_each_release_takes_them(
    cli: Cli,
) -> None:
    """vLLM's --kv-cache-dtype took fp8_e5m2 alone through 0.4.0, fp8 from 0.4.1; the largest
    captured batch is --cuda-graph-sizes N from 0.9.0 and --max-cudagraph-capture-size from
    0.11.1, with no flag before 0.9.0: the line uses the release's own spelling (the same
    bytes), and a size asked of a release without the flag is refused by it."""
    base = ("capacity", "--preset", "llama-3.1-8b", "--gpu", "h100", "--json")

    def line(version: str, *more: str) -> str:
        return str(cli(*base, "--engine-version", version, *more).json()["flags"]["vllm"])

    assert line("0.3.3", "--kv-dtype", "fp8").endswith("--kv-cache-dtype fp8_e5m2")
    assert line("0.4.1", "--kv-dtype", "fp8").endswith("--kv-cache-dtype fp8")
    old, new = (
        cli(*base, "--engine-version", v, "--kv-dtype", "fp8").json() for v in ("0.3.3", "0.4.1")
    )
    assert old["kv_bytes_per_token"] == new["kv_bytes_per_token"]  # a byte either way
    size = ("--max-cudagraph-capture-size", "256")
    assert line("0.9.0", *size).endswith("--cuda-graph-sizes 256")
    assert line("0.11.0", *size).endswith("--cuda-graph-sizes 256")
    assert line("0.11.1", *size).endswith("--max-cudagraph-capture-size 256")
    r = cli(*base, "--engine-version", "0.8.5", *size)
    assert r.code == 2 and r.json()["field"] == "--max-cudagraph-capture-size"
    assert "--cuda-graph-sizes from 0.9.0" in r.json()["error"]


def test_vllm_switches_are_refused_before_the_release_that_has_them(cli: Cli) -> None:
    """--enforce-eager is first in vLLM 0.2.6's arguments, --enable-lora in 0.3.0, prefix
    caching and chunked prefill in 0.4.0: asked on, each is refused by an older release (no
    line carries a flag it would reject); chunked prefill asked off there is how that release
    runs, and the line leaves the flag out."""
    base = ("capacity", "--preset", "llama-3.1-8b", "--gpu", "h100", "--json")
    for flag, before, since in (
        ("--enforce-eager", "0.2.5", "0.2.6"),
        ("--enable-lora", "0.2.7", "0.3.0"),
        ("--enable-prefix-caching", "0.3.3", "0.4.0"),
        ("--enable-chunked-prefill", "0.3.3", "0.4.0"),
    ):
        r = cli(*base, "--engine-version", before, flag)
        assert r.code == 2 and r.json()["field"] == flag, r.out
        assert f"from {since}" in r.json()["error"]
        got = cli(*base, "--engine-version", since, flag)
        assert got.code == 0 and flag in got.json()["flags"]["vllm"], flag
    off = cli(*base, "--engine-version", "0.3.3", "--no-enable-chunked-prefill").json()
    assert "chunked-prefill" not in off["flags"]["vllm"]
    assert off["engine"]["settings"]["enable_chunked_prefill"] is False
    later = cli(*base, "--engine-version", "0.4.0", "--no-enable-chunked-prefill").json()
    assert later["flags"]["vllm"].endswith("--enable-chunked-prefill False")


def test_quantization_methods_follow_the_release(cli: Cli, tmp_path: Path) -> None:
    """Each --quantization method from the first release whose parser (and registry) takes it:
    an online fp8 re-quantization is refused by the flag typed before vLLM 0.4.1, in-flight
    bitsandbytes after vLLM dropped it in 0.28.0; a checkpoint whose method the release cannot
    load (NVFP4 before vLLM 0.9.0, MXFP4 before 0.10.1) does not start, the plan naming the
    first release that loads it; SGLang, which reads a checkpoint's
    method from its config, loads compressed-tensors before its flag lists it (0.5.4): the line
    leaves the flag off there."""
    base = ("capacity", "--gpu", "h100", "--json")
    llama = ("--preset", "llama-3.1-8b")
    r = cli(*base, *llama, "--engine-version", "0.4.0", "--weight-dtype", "fp8")
    assert r.code == 2 and r.json()["field"] == "--weight-dtype", r.out
    assert "takes it from 0.4.1" in r.json()["error"]
    line = cli(*base, *llama, "--engine-version", "0.4.1", "--weight-dtype", "fp8").json()
    assert line["flags"]["vllm"].endswith("--quantization fp8")
    nvfp4 = ("--model", str(MODELS / "nvidia--Qwen3-235B-A22B-NVFP4"), "--tp", "4")
    oss = ("--model", str(MODELS / "openai--gpt-oss-20b"))
    for model, before, since, method in (
        (nvfp4, "0.8.5", "0.9.0", "modelopt_fp4"),
        (oss, "0.10.0", "0.10.1", "mxfp4"),
    ):
        # the release does not start: the plan says why, and which release loads it
        r = cli("capacity", "--gpu", "b200", *model, "--engine-version", before, "--json")
        assert r.code == 1 and not r.json()["fits"], r.out
        assert any(f"cannot load {method} weights (from {since})" in w for w in r.json()["reasons"])
        changes = [s["change"] for s in r.json()["suggestions"]]
        assert changes == [f"--engine-version {since} (the first with {method} weights)"]
        got = cli("capacity", "--gpu", "b200", *model, "--engine-version", since, "--json")
        assert got.json()["flags"]["vllm"].endswith(f"--quantization {method}")
    bnb = (*base, *llama, "--quantization", "bitsandbytes", "--engine-version")
    assert cli(*bnb, "0.27.0").json()["flags"]["vllm"].endswith("--quantization bitsandbytes")
    dropped = cli(*bnb, "0.28.0")
    assert dropped.code == 2 and "dropped in 0.28.0" in dropped.json()["error"]
    assert dropped.json()["field"] == "--quantization"
    # a compressed-tensors int4 checkpoint of Llama 3.1 8B (Kimi K2.5's quantization_config)
    config = model_config("meta-llama--Llama-3.1-8B-Instruct")
    kimi = json.loads((MODELS / "moonshotai--Kimi-K2.5" / "config.json").read_text())
    config["quantization_config"] = kimi["text_config"]["quantization_config"] | {
        "ignore": ["lm_head"]
    }
    folder = tmp_path / "llama-w4a16"
    folder.mkdir()
    (folder / "config.json").write_text(json.dumps(config))
    sglang = (*base, "--model", str(folder), "--engine", "sglang", "--engine-version")
    read = cli(*sglang, "0.5.3").json()
    assert read["fits"] and "--quantization" not in read["flags"]["sglang"]
    named = cli(*sglang, "0.5.4").json()
    assert named["flags"]["sglang"].endswith("--quantization compressed-tensors")
    assert read["engine"]["weights_bytes"] == named["engine"]["weights_bytes"]


def test_a_modelopt_fp8_export_is_named_modelopt_on_the_line(cli: Cli) -> None:
    """NVIDIA's ModelOpt FP8 exports (quantization beside config.json, or inline with its
    producer) are the engines' `modelopt` method: vLLM before 0.10.0 maps no `fp8` onto it and
    loads the checkpoint as unquantized, so the line names it, from the releases that load it
    (vLLM 0.6.1, SGLang 0.4.2); a checkpoint with quant_method fp8 keeps `fp8`."""
    export = ("capacity", "--model", str(MODELS / "nvidia--Llama-3.1-70B-Instruct-FP8"))
    export += ("--gpu", "h100", "--tp", "2", "--json")
    for version in ("0.6.1", "0.9.2", "0.34.0"):
        line = cli(*export, "--engine-version", version).json()["flags"]["vllm"]
        assert line.endswith("--quantization modelopt"), (version, line)
    old = cli(*export, "--engine-version", "0.6.0").json()
    assert not old["fits"] and any("cannot load modelopt weights" in r for r in old["reasons"])
    sglang = cli(*export, "--engine", "sglang").json()["flags"]["sglang"]
    assert sglang.endswith("--quantization modelopt")
    own = ("capacity", "--model", str(MODELS / "Qwen--Qwen3-32B-FP8"), "--gpu", "h100", "--json")
    assert cli(*own).json()["flags"]["vllm"].endswith("--quantization fp8")


def test_sglang_lines_use_only_the_flags_each_release_takes(cli: Cli) -> None:
    """SGLang's server_args.py took --cuda-graph-max-bs and --enable-dp-attention from 0.3.6,
    --ep-size from 0.4.1, fp8_e4m3 KV from 0.4.3 (fp8_e5m2 alone before), --page-size from
    0.4.4, and DeepEP, HiCache's sizes, the dense-TP, two-batch-overlap, redundant-expert and
    DP lm_head flags and --scheduler-recv-interval in 0.4.5-0.5.0: a 0.3.0 line leaves
    --page-size out (its pages are single tokens) and spells an fp8 cache fp8_e5m2; a setting
    that needs a flag the release lacks is refused by it."""
    base = ("capacity", "--preset", "mixtral-8x7b", "--gpu", "h100", "--tp", "2")
    base += ("--engine", "sglang", "--json")

    def plan(version: str, *more: str) -> Result:
        return cli(*base, "--engine-version", version, *more)

    old = str(plan("0.3.0", "--kv-dtype", "fp8").json()["flags"]["sglang"])
    assert "--page-size" not in old and old.endswith("--kv-cache-dtype fp8_e5m2")
    # no overlap scheduler before 0.3.6, nor a flag to turn it off: the line leaves it out
    serial = str(plan("0.3.2", "--disable-overlap-schedule").json()["flags"]["sglang"])
    assert "overlap" not in serial
    assert str(plan("0.3.6", "--disable-overlap-schedule").json()["flags"]["sglang"]).endswith(
        "--disable-overlap-schedule"
    )
    new = str(plan("0.4.4", "--kv-dtype", "fp8").json()["flags"]["sglang"])
    assert "--page-size 1" in new and new.endswith("--kv-cache-dtype fp8_e4m3")
    for asked, flag, since in (
        (("--ep", "2"), "--ep", "0.4.1"),
        (("--dp", "2", "--dp-attention"), "--dp-attention", "0.3.6"),
        (("--cuda-graph-max-bs", "64"), "--cuda-graph-max-bs", "0.3.6"),
        (("--page-size", "16"), "--page-size", "0.4.4"),
    ):
        r = plan("0.3.0", *asked)
        assert r.code == 2 and r.json()["field"] == flag, (asked, r.out)
        assert f"from {since}" in r.json()["error"]
        assert plan(since, *asked).code == 0, asked
    # DeepSeek-V3's MoE, data-parallel and HiCache flags, each at the release before its own
    v3 = ("capacity", "--model", str(MODELS / "deepseek-ai--DeepSeek-V3"), "--gpu", "h200")
    v3 += ("--tp", "8", "--engine", "sglang", "--json")
    dp, deepep = ("--dp", "8", "--dp-attention"), ("--ep", "8", "--moe-a2a-backend", "deepep")
    hc, redundant = "--enable-hierarchical-cache", ("--ep-num-redundant-experts", "8", "--ep", "8")
    for asked, flag, before, since in (
        (deepep, "--moe-a2a-backend", "0.4.3", "0.4.5"),
        (("--moe-dense-tp-size", "1", *dp), "--moe-dense-tp-size", "0.4.5", "0.4.6"),
        (("--enable-two-batch-overlap", *deepep), "--enable-two-batch-overlap", "0.4.6", "0.4.7"),
        (redundant, "--ep-num-redundant-experts", "0.4.6", "0.4.7"),
        (("--enable-dp-lm-head", *dp), "--enable-dp-lm-head", "0.4.6", "0.4.7"),
        (("--scheduler-recv-interval", "4"), "--scheduler-recv-interval", "0.4.10", "0.5.0"),
        ((hc,), hc, "0.4.1", "0.4.3"),
        ((hc, "--hicache-ratio", "3"), "--hicache-ratio", "0.4.4", "0.4.5"),
        ((hc, "--hicache-size", "100"), "--hicache-size", "0.4.5", "0.4.6"),
    ):
        r = cli(*v3, "--engine-version", before, *asked)
        assert r.code == 2 and r.json()["field"] == flag, (asked, r.out)
        assert cli(*v3, "--engine-version", since, *asked).code == 0, asked


def test_expert_parallelism_is_refused_before_vllm_takes_the_flag(cli: Cli) -> None:
    """--enable-expert-parallel is first in vLLM 0.8.0's arguments: --ep (or the flag itself)
    with an earlier release is refused by the release asked for; 0.8.0 prints the flag. Its
    --data-parallel-size is first in 0.8.3, --kv-cache-memory-bytes in 0.10.2."""
    base = ("capacity", "--preset", "mixtral-8x7b", "--gpu", "h100", "--tp", "2", "--json")
    for ep in (("--ep", "2"), ("--enable-expert-parallel",)):
        r = cli(*base, *ep, "--engine-version", "0.7.3")
        assert r.code == 2 and r.json()["field"] == "--engine-version", r.out
        assert "from 0.8.0" in r.json()["error"]
        line = cli(*base, *ep, "--engine-version", "0.8.0").json()["flags"]["vllm"]
        assert line.endswith("--enable-expert-parallel")
    assert cli(*base, "--engine-version", "0.7.3").code == 0  # experts sharded over TP
    # --data-parallel-size arrives in 0.8.3 (V1 from 0.8.0 serves without it)
    dp = ("capacity", "--preset", "llama-3.1-8b", "--gpu", "h100", "--dp", "2", "--json")
    r = cli(*dp, "--engine-version", "0.8.2")
    assert r.code == 2 and r.json()["field"] == "--dp" and "from 0.8.3" in r.json()["error"]
    assert "--data-parallel-size 2" in cli(*dp, "--engine-version", "0.8.3").json()["flags"]["vllm"]
    # --kv-cache-memory-bytes arrives in 0.10.2
    kv = ("capacity", "--preset", "llama-3.1-8b", "--gpu", "h100", "--json")
    kv += ("--kv-cache-memory-bytes", "10000000000")
    r = cli(*kv, "--engine-version", "0.10.1")
    assert r.code == 2 and r.json()["field"] == "--kv-cache-memory-bytes"
    assert cli(*kv, "--engine-version", "0.10.2").code == 0


def test_sglang_0_5_4_runs_deepseek_sparse_attention_data_parallel(cli: Cli) -> None:
    """SGLang 0.5.4 and 0.5.5 turn on data-parallel attention (--dp-size = TP) for DeepSeek-V3.2
    by themselves, after the memory heuristic ran without it: the plan is that of the explicit
    flags at the fraction of none, each group chunking its share of the chunked-prefill size;
    `simulate` runs the same groups and pool; 0.5.6 runs pure TP."""
    v32 = MODELS / "deepseek-ai--DeepSeek-V3.2"
    where = {"engine": "sglang", "gpu": "h200", "model": v32, "tp_size": 8, "context_length": 8192}
    forced = engine_plan(**where, version="0.5.4")
    assert forced.settings["attn_dp_size"] == 8
    assert any("turns on data-parallel attention" in n for n in forced.notes)
    assert forced.settings["chunked_prefill_per_group"] == 8192 // 8  # H200: an 8,192 flag
    assert "chunked_prefill_size=1024," in forced.log_lines[-1]
    fraction = forced.settings["mem_fraction_static"]
    flags = engine_plan(**where, version="0.5.4", attn_dp_size=8)
    assert flags.settings["mem_fraction_static"] < fraction  # the flag's reserve is larger
    pinned = engine_plan(**where, version="0.5.4", attn_dp_size=8, mem_fraction_static=fraction)
    assert pinned.kv_cache_tokens == forced.kv_cache_tokens
    assert engine_plan(**where, version="0.5.6").settings["attn_dp_size"] == 1
    run = cli(
        "simulate", "--model", str(v32), "--gpu", "h200", "--tp", "8", "--engine", "sglang",
        "--engine-version", "0.5.4", "--context", "8192", "--concurrency", "8",
        "--prompt-len", "512", "--output-len", "32", "--requests", "16", "--json",
    ).json()  # fmt: skip
    deployment = run["deployment"]
    assert deployment["dp_attention"] and run["gpus"] == 8
    assert deployment["kv_cache_tokens"] == forced.kv_cache_tokens
    assert deployment["max_num_batched_tokens"] == 1024
    assert "--enable-dp-attention" not in deployment["command"]  # the server sets it itself
    # capacity plans the same pool, and its line's running cap is the deployment's (8 groups)
    plan = cli(
        "capacity", "--model", str(v32), "--gpu", "h200", "--tp", "8", "--engine", "sglang",
        "--engine-version", "0.5.4", "--context", "8192", "--json",
    ).json()  # fmt: skip
    assert plan["engine"]["kv_cache_tokens"] == forced.kv_cache_tokens
    assert plan["settings"]["data_parallel_ranks"] == 8
    assert f"--max-running-requests {plan['max_seqs_paged'] * 8} " in plan["flags"]["sglang"]


def test_sglang_runs_deepseek_sparse_attention_in_fp8_on_blackwell() -> None:
    """DeepSeek-V3.2 (61 layers, a 512 + 64 latent, a 128-value fp8 indexer key with its fp32
    scale: 132 bytes) on SGLang: `auto` caches fp8 on B200 (0.5.5+; 0.5.4 whatever the flag),
    bf16 on H200; the pool's cell is the raw 576 bytes until 0.5.16 and on Blackwell's
    TensorRT-LLM layout, 656 (scales, bf16 rope) for Hopper's fp8 from 0.5.17."""
    from planner.core.engines import engine_kv_dtype
    from planner.core.engines.sglang import _token_cell_bytes

    v32 = MODELS / "deepseek-ai--DeepSeek-V3.2"
    spec = resolve_model(None, str(v32))
    spec = getattr(spec, "spec", spec)
    assert _token_cell_bytes(spec, 1, 8, 1, swa=False) == 61 * (576 + 132)
    assert _token_cell_bytes(spec, 1, 8, 1, swa=False, scaled=True) == 61 * (656 + 132)
    assert _token_cell_bytes(spec, 1, 8, 2, swa=False) == 61 * (1152 + 132)

    def plan(gpu: str, version: str, kv: str = "auto") -> Any:
        return engine_plan(engine="sglang", gpu=gpu, model=v32, tp_size=8, version=version,
                           kv_cache_dtype=kv, mem_fraction_static=0.8)  # fmt: skip

    auto, fp8, bf16 = (plan("b200", "0.5.23", kv) for kv in ("auto", "fp8_e4m3", "bfloat16"))
    assert auto.kv_cache_tokens == fp8.kv_cache_tokens
    assert auto.kv_dtype == "fp8" and "torch.float8_e4m3fn" in auto.log_lines[0]
    assert any("sets it for DeepSeek's sparse attention" in n for n in auto.notes)
    ratio = auto.kv_cache_tokens / bf16.kv_cache_tokens
    assert ratio == pytest.approx((1152 + 132) / (576 + 132), rel=0.001)
    assert plan("b200", "0.5.4", "bfloat16").kv_dtype == "fp8"  # 0.5.4 overrides the flag
    assert plan("b200", "0.5.5", "bfloat16").kv_dtype == "bf16"
    assert plan("h200", "0.5.23").kv_dtype == "bf16"
    assert any("data-parallel attention" in n for n in plan("b200", "0.5.5").notes)
    hopper = {v: plan("h200", v, "fp8_e4m3").kv_cache_tokens for v in ("0.5.16", "0.5.17")}
    assert hopper["0.5.16"] / hopper["0.5.17"] == pytest.approx(788 / 708, rel=0.001)
    b200, h200 = find_gpu("b200"), find_gpu("h200")
    assert engine_kv_dtype("sglang", spec, b200, "0.5.23", "auto") == "fp8"
    assert engine_kv_dtype("vllm", spec, b200, None, "auto") == "bf16"
    assert engine_kv_dtype("sglang", spec, h200, "0.5.23", "auto") == "bf16"


def test_vllm_stores_deepseek_sparse_attention_in_its_scaled_fp8_layout() -> None:
    """vLLM's fp8_ds_mla for DeepSeek-V3.2: 656 bytes of latent per token and layer (512 fp8,
    four fp32 scales, 64 bf16) beside the 132-byte indexer key; 0.11 takes it for `auto` and
    fp8, 0.12-0.17 for fp8 only, 0.18 keeps the flag (576 raw fp8 bytes)."""
    from planner.core.engines import engine_kv_dtype
    from planner.core.engines.common import ds_mla_latent_bytes

    assert ds_mla_latent_bytes(576, 64) == 656
    v32 = MODELS / "deepseek-ai--DeepSeek-V3.2"

    def per_token_layer(version: str, kv: str) -> float:
        p = engine_plan(engine="vllm", gpu="h200", model=v32, tensor_parallel_size=8,
                        version=version, kv_cache_dtype=kv, max_model_len=8192)  # fmt: skip
        return p.bytes_per_block / int(str(p.settings["block_size"])) / 61

    assert per_token_layer("0.11", "auto") == per_token_layer("0.11", "fp8") == 656 + 132
    assert per_token_layer("0.12", "auto") == 1152 + 132
    assert per_token_layer("0.17", "fp8") == 656 + 132
    assert per_token_layer("0.18", "fp8") == 576 + 132
    assert per_token_layer("0.34", "fp8_ds_mla") == 656 + 132  # its own spelling, from 0.12
    with pytest.raises(InputError, match="has no sparse attention"):
        engine_plan(engine="vllm", gpu="h200", model=LLAMA8, kv_cache_dtype="fp8_ds_mla")
    spec = resolve_model(None, str(v32))
    spec = getattr(spec, "spec", spec)
    h200 = find_gpu("h200")
    assert engine_kv_dtype("vllm", spec, h200, "0.11", "auto") == "fp8"
    assert engine_kv_dtype("vllm", spec, h200, "0.12", "auto") == "bf16"


def test_sglang_pools_window_layers_apart_only_for_the_models_it_lists() -> None:
    """SGLang sizes window layers at 0.8 of the full layers' tokens only for listed
    architectures: gpt-oss from 0.5.8 (not on B200's TensorRT-LLM MHA until 0.5.10), Llama 4's
    chunked layers from 0.5.8; Gemma 3 and Mistral's window layers count as full ones, so the
    same memory holds fewer tokens than with the split."""
    from planner.core.engines.sglang import _token_cell_bytes, hybrid_swa

    def spec(name: str) -> ModelSpec:
        m = resolve_model(name, None, None)
        return getattr(m, "spec", m)

    oss, h200, b200 = spec("gpt-oss-120b"), find_gpu("h200"), find_gpu("b200")
    assert not hybrid_swa(oss, h200, (0, 5, 2)) and hybrid_swa(oss, h200, (0, 5, 8))
    assert not hybrid_swa(oss, b200, (0, 5, 9)) and hybrid_swa(oss, b200, (0, 5, 10))
    scout = spec("llama-4-scout")
    assert not hybrid_swa(scout, h200, (0, 5, 7)) and hybrid_swa(scout, h200, (0, 5, 8))
    for name in ("gemma-3-27b", "mistral-7b-v0.1"):
        assert not hybrid_swa(spec(name), h200, (0, 5, 23))
    # gpt-oss: 18 window + 18 full layers, 8 KV heads of 64 (K and V), 2 bytes, TP 1
    per_layer = 8 * (64 + 64) * 2
    assert _token_cell_bytes(oss, 1, 1, 2, swa=False) == 36 * per_layer
    assert _token_cell_bytes(oss, 1, 1, 2, swa=True) == 18 * per_layer + int(18 * per_layer * 0.8)
    old = engine_plan(engine="sglang", gpu="h200", preset="gpt-oss-120b", version="0.5.2")
    new = engine_plan(engine="sglang", gpu="h200", preset="gpt-oss-120b", version="0.5.10")
    assert old.kv_cache_tokens < new.kv_cache_tokens


def test_sglang_default_mem_fraction_h100() -> None:
    # sglang.md worked example: 81,559 MiB, TP 1, non-MLA, defaults -> 0.830
    p = engine_plan(engine="sglang", gpu="h100", model=LLAMA8, context_length=8192)
    assert p.settings["mem_fraction_static"] == 0.830
    p8 = engine_plan(engine="sglang", gpu="h100", model=LLAMA8, context_length=8192, tp_size=8)
    assert p8.settings["mem_fraction_static"] == 0.812


# Replays need a verbatim start-up log with its own terms: the 4080 record is an author's
# breakdown and the PR 2031 one a block-count comparison, and the GB10 log (unified memory)
# prints neither the device total nor the activation peak. The two 0.28 records are a blog's
# table and the Mixtral one a study's table of logged tokens, not log lines.
NOT_REPLAYABLE = (
    "vllm-4080-qwen25-7b-awq",
    "vllm-a100-80g-llama2-7b-pr2031",
    "vllm011nv-dgxspark-gb10-mistral7b-v02-gptq",
    "vllm028-l40s-qwen3-14b-awq-default",
    "vllm028-l4x2-qwen3-14b-awq-tp2",
    "vllm0151-h100x2-mixtral-8x7b-tp2-simreal",
)
LOG_CASES = [c for c in CASES if c["id"] not in NOT_REPLAYABLE]


@pytest.mark.parametrize("case", LOG_CASES, ids=lambda c: c["id"])
def test_from_log_replays_the_logged_tokens(case: dict[str, object], tmp_path: Path) -> None:
    log = tmp_path / "startup.log"
    log.write_text(str(case["evidence"]).replace(" | ", "\n"))
    kw = engine_fidelity.case_settings(case)
    report = from_log_report(
        log_path=str(log),
        gpu=kw["gpu"],
        model=kw["model"],
        version=str(case["engine_version"] or "0.6.4"),
    )
    logged = report["log"]["kv_cache_tokens"]
    assert logged == case["kv_cache_tokens"]
    assert report["replayed"]["kv_cache_tokens"] == pytest.approx(logged, rel=0.005)
    assert any(r["term"] == "kv_cache_tokens" for r in report["differences"])


def test_cli_from_log_and_errors(cli: Cli, tmp_path: Path) -> None:
    case = next(c for c in CASES if c["id"] == "llmd-h100-llama31-8b-tp1")
    log = tmp_path / "vllm.log"
    log.write_text(case["evidence"].replace(" | ", "\n"))
    r = cli(
        "capacity",
        "--from-log",
        str(log),
        "--gpu",
        "h100",
        "--model",
        LLAMA8,
        "--engine-version",
        "0.19.0",
    )
    assert r.code == 0, r.err
    assert "Logged vs predicted" in r.out and "476,016" in r.out
    junk = tmp_path / "junk.log"
    junk.write_text("hello\nworld\n")
    r = cli("capacity", "--from-log", str(junk), "--gpu", "h100")
    assert r.code == 2 and "line 1: not a vLLM or SGLang start-up log" in r.err
    truncated = tmp_path / "cut.log"
    lines = case["evidence"].split(" | ")
    truncated.write_text("\n".join(lines[:3]))
    r = cli("capacity", "--from-log", str(truncated), "--gpu", "h100", "--model", LLAMA8)
    assert r.code == 2 and "line 3: parsing stopped there" in r.err and r.err.count("\n") == 1


def test_cli_engine_json_and_device_name(cli: Cli) -> None:
    data = cli(
        "capacity",
        "--model",
        LLAMA8,
        "--gpu",
        "NVIDIA H100 80GB HBM3",
        "--engine",
        "vllm",
        "--engine-version",
        "0.19.0",
        "--gpu-memory-utilization",
        "0.95",
        "--context",
        "8192",
        "--max-num-seqs",  # the logged server ran vLLM's H100 default; given, it is kept as is
        "1024",
        "--json",
    ).json()
    e = data["engine"]
    for key in (
        "name",
        "version",
        "total_memory_bytes",
        "requested_memory_bytes",
        "weights_bytes",
        "activation_peak_bytes",
        "non_torch_bytes",
        "cudagraph_bytes",
        "available_kv_bytes",
        "num_gpu_blocks",
        "kv_cache_tokens",
        "max_concurrency",
        "term_sources",
    ):
        assert key in e
    assert e["kv_cache_tokens"] == pytest.approx(476_016, rel=0.001)
    assert e["term_sources"]["total_memory_bytes"] == "calibrated"


def test_weight_dtype_override_is_online_fp8(cli: Cli) -> None:
    base = ["capacity", "--model", LLAMA8, "--gpu", "h100", "--engine", "vllm", "--json"]
    bf16 = cli(*base).json()["engine"]
    fp8 = cli(*base, "--weight-dtype", "fp8").json()["engine"]
    assert fp8["weights_bytes"] < 0.6 * bf16["weights_bytes"]
    assert fp8["kv_cache_tokens"] > bf16["kv_cache_tokens"]


def test_engine_bad_input(cli: Cli) -> None:
    r = cli("capacity", "--model", LLAMA8, "--gpu", "h100", "--engine", "trtllm")
    assert r.code == 2 and "--engine" in r.err
    r = cli(
        "capacity",
        "--model",
        LLAMA8,
        "--gpu",
        "h100",
        "--engine",
        "vllm",
        "--gpu-memory-utilization",
        "0.1",
        "--json",
    )
    # A plan the engine cannot start is a finding: exit 1, the whole JSON, and what would start.
    data = r.json()
    assert r.code == 1 and data["fits"] is False and "leaves no KV cache" in data["reasons"][0]
    changes = [x["change"] for x in data["suggestions"]]
    assert any(c.startswith("memory fraction") for c in changes), changes
    r = cli(
        "capacity",
        "--model",
        LLAMA8,
        "--gpu",
        "h100",
        "--engine",
        "vllm",
        "--engine-version",
        "latest",
    )
    assert r.code == 2 and "--engine-version" in r.err


def test_data_centre_blackwell_captures_graphs_up_to_1024_from_0_28() -> None:
    """vLLM 0.28 raised the default capture ceiling to 1,024 on compute capability 10.x (B200,
    B300, GB200; config/vllm.py default_max_graph_size): 83 sizes against 51, so more graph
    memory comes off the KV cache; an H200 and 0.27 keep 512."""
    b200, h200 = find_gpu("b200"), find_gpu("h200")
    assert len(vllm.capture_sizes(1024, 16384, cap=vllm.capture_cap((0, 28, 0), b200))) == 83
    assert vllm.capture_cap((0, 27, 1), b200) == vllm.capture_cap((0, 34, 0), h200) == 512
    b200 = plan(gpu="b200", version="0.34.0", max_model_len=8192)
    assert b200.graph_max_batch == 1024
    assert plan(gpu="b200", version="0.27.1", max_model_len=8192).graph_max_batch == 512
    assert plan(gpu="h200", version="0.34.0", max_model_len=8192).graph_max_batch == 512
    eager = plan(gpu="b200", version="0.34.0", max_model_len=8192, enforce_eager=True)
    assert eager.graph_max_batch == 0


def test_mla_block_size_follows_the_blackwell_backend_by_release() -> None:
    """DeepSeek-R1 on a B200: CUTLASS MLA forces 128 (0.12), FlashInfer MLA forces 64 (0.16),
    its preferred 32 stands for an unset size from 0.18 and a flag is kept, 0.34's default of 64
    is accepted; Hopper keeps FlashMLA's 64 through 0.17 (from 0.11.1 a multiple of 64 asked
    stands) and the default after; V3.2's sparse MLA takes 64 on Hopper."""
    r1 = MODELS / "deepseek-ai--DeepSeek-R1"

    def block(gpu: str, version: str, model: Path = r1, **kw: object) -> object:
        settings = {"max_model_len": 8192, "tensor_parallel_size": 8} | kw
        return plan(gpu=gpu, model=model, version=version, **settings).settings["block_size"]

    assert block("b200", "0.12.0") == 128
    assert block("b200", "0.12.0", block_size=256) == 256  # a multiple of 128 is kept
    assert block("b200", "0.16.0") == 64
    assert block("b200", "0.20.0") == 32
    assert block("b200", "0.20.0", block_size=64) == 64
    assert block("b200", "0.34.0") == 64
    assert block("h200", "0.8.0") == 64 and block("h200", "0.20.0") == 16
    assert block("h200", "0.10.0", block_size=128) == 64  # `!= 64` forced 64 before 0.11.1
    assert block("h200", "0.17.0") == 64 and block("h200", "0.17.0", block_size=128) == 128
    assert block("h200", "0.20.0", model=MODELS / "deepseek-ai--DeepSeek-V3.2") == 64


def test_rocm_keeps_blocks_of_16_under_0_34_for_its_native_attention() -> None:
    """vLLM 0.34 defaults to 64-token blocks, but on ROCm plain attention runs ROCM_ATTN first,
    whose preferred size is 16 (its native kernel's); gpt-oss (attention sinks) and a KV
    connector take other backends and the default; an explicit size is kept."""
    assert plan(gpu="mi300x", max_model_len=8192).settings["block_size"] == 16
    assert plan(gpu="mi300x", max_model_len=8192, block_size=64).settings["block_size"] == 64
    assert plan(gpu="h100", max_model_len=8192).settings["block_size"] == 64
    oss = plan(gpu="mi300x", preset="gpt-oss-120b", model=None, max_model_len=8192)
    assert oss.settings["block_size"] == 64


def test_capture_sizes_example() -> None:
    # vllm.md: H100 serve defaults -> max 512 -> 3 + 31 + 17 = 51 sizes
    assert len(vllm.capture_sizes(1024, 8192)) == 51


def test_a_larger_cuda_graph_capture_size_captures_more_graphs(cli: Callable[..., Result]) -> None:
    """--max-cudagraph-capture-size 2048 (vLLM's gpt-oss recipe) captures every 16 tokens from
    256 to 2,048: 3 + 31 + 113 = 147 sizes against the default's 51, each holding graph memory;
    a start-up log's non-default args carry it, and the vLLM line echoes it."""
    sizes = vllm.capture_sizes(1024, 8192, 2048)
    assert len(sizes) == 147 and sizes[-1] == 2048
    assert vllm.capture_sizes(1024, 1024, 2048)[-1] == 1024  # never past the token budget
    spec = spec_of(QWEN3_8B)
    gpu = find_gpu("h100")
    base = {"version": "0.33.0", "max_num_seqs": 1024, "max_num_batched_tokens": 8192}
    default = vllm.predict(spec, gpu, vllm.VllmSettings(**base))
    wide = vllm.predict(spec, gpu, vllm.VllmSettings(**base, max_cudagraph_capture_size=2048))
    assert wide.cudagraph_bytes == default.cudagraph_bytes * 147 // 51
    assert wide.available_kv_bytes == default.available_kv_bytes - (
        wide.cudagraph_bytes - default.cudagraph_bytes
    )
    parsed = parse_startup_log(
        "non-default args: {'model': 'm', 'max_cudagraph_capture_size': 2048}\n"
        "Available KV cache memory: 1.00 GiB\n",
        "x.log",
        require_tokens=False,
    )
    assert parsed.settings["max_cudagraph_capture_size"] == 2048
    flag = ("--max-cudagraph-capture-size", "2048")
    r = cli("capacity", "--model", QWEN3_8B, "--gpu", "h100", "--engine", "vllm", *flag, "--json")
    assert r.code == 0, r.err
    assert r.json()["flags"]["vllm"].endswith("--max-cudagraph-capture-size 2048")
    r = cli("capacity", "--model", QWEN3_8B, "--gpu", "h100", "--engine", "sglang", *flag)
    assert r.code == 2 and "--max-cudagraph-capture-size" in r.err
    # a 0 is refused, not taken for "unset" (as --kv-cache-memory-bytes 0 was)
    for zero in ("--max-cudagraph-capture-size", "--kv-cache-memory-bytes"):
        r = cli("capacity", "--model", QWEN3_8B, "--gpu", "h100", "--engine", "vllm", zero, "0")
        assert r.code == 2 and zero in r.err, (zero, r.err)


QWEN3_8B = str(MODELS / "Qwen--Qwen3-8B" / "config.json")
LLAMA32_3B = str(MODELS / "meta-llama--Llama-3.2-3B-Instruct" / "config.json")
QWEN25_7B = str(MODELS / "Qwen--Qwen2.5-7B-Instruct" / "config.json")


def spec_of(path: str) -> ModelSpec:
    return resolve_model(None, path, None)


def test_lora_buffers_by_hand() -> None:
    """Qwen3-8B (no embedding_modules): per layer r x (7H + q + 2kv + q + 3I), 36 layers."""
    spec = spec_of(QWEN3_8B)
    per_layer = 32 * (7 * 4096 + (4096 + 2 * 1024) + 4096 + 3 * 12288)
    assert per_layer == 32 * 75_776
    assert vllm.lora_bytes(spec, 32, 1, 1, 1, 2, (0, 10, 2)) == per_layer * 36 * 2
    # Llama-3.2-3B declares embedding_modules: embedding and lm_head buffers too, with the
    # 256 extra vocabulary rows before 0.12.
    llama = spec_of(LLAMA32_3B)
    layers = 64 * (7 * 3072 + (3072 + 2 * 1024) + 3072 + 3 * 8192) * 28
    embed_old = 256 * 3072 + (128_256 + 256) * 64 + 3072 * 64
    head_old = 64 * 3072 + 128_256 * 64 + 256 * 3072  # 128,256 is a multiple of 256
    assert vllm.lora_bytes(llama, 64, 1, 1, 1, 2, (0, 8, 1)) == (
        (layers + embed_old + head_old) * 2
    )
    embed_new, head_new = 128_256 * 64 + 3072 * 64, 64 * 3072 + 128_256 * 64
    assert vllm.lora_bytes(llama, 64, 2, 1, 1, 2, (0, 19, 0)) == (
        (layers + embed_new + head_new) * 2 * 2
    )
    # TP shards B of column-parallel and A of row-parallel layers.
    assert vllm.lora_bytes(spec, 32, 1, 2, 1, 2, (0, 19, 0)) < per_layer * 36 * 2


def test_unsloth_l4_case_term_by_term() -> None:
    """Qwen3-8B-FP8 on an L4, vLLM 0.10.2 inside Unsloth with LoRA rank 32 (65,376 tokens)."""
    p = plan(
        model=QWEN3_8B,
        gpu="NVIDIA L4",
        quantization="fp8",
        version="0.10.2",
        gpu_memory_utilization=0.8661508568217998,
        max_model_len=2048,
        max_num_seqs=224,
        max_num_batched_tokens=2048,
        enable_lora=True,
        max_lora_rank=32,
        usage_context="llm",
        colocated=True,
    )
    assert p.settings["profile_sampler"] == "sort" and p.settings["model_runner"] == "v1"
    assert p.weights_bytes / GIB == pytest.approx(8.9638, abs=0.01)  # logged, LoRA included
    assert p.activation_peak_bytes == 224 * 151_936 * 38  # the sort dominates the forward
    assert p.activation_peak_bytes / GIB == pytest.approx(1.23, abs=0.03)
    assert p.non_torch_bytes == vllm.NON_TORCH_COLOCATED_BYTES
    assert p.cudagraph_bytes == 0  # not reserved before 0.20
    assert p.available_kv_bytes == (
        p.requested_memory_bytes - p.weights_bytes - p.activation_peak_bytes - p.non_torch_bytes
    )
    assert p.kv_cache_tokens == pytest.approx(65_376, rel=0.01)
    assert any("LoRA buffers 0.163 GiB" in n for n in p.notes)


def test_sampler_implementation_by_version() -> None:
    # max_num_seqs large enough, batch small, that the sampler is the peak
    kw = {"max_model_len": 4096, "max_num_seqs": 512, "max_num_batched_tokens": 1024}
    sort = plan(version="0.16.0", **kw)
    triton = plan(version="0.17.0", **kw)
    assert sort.settings["profile_sampler"] == "sort"
    assert triton.settings["profile_sampler"] == "triton"
    assert sort.activation_peak_bytes == 512 * 128_256 * 38
    assert triton.activation_peak_bytes == int(512 * 128_256 * 3.86 * 4)
    assert triton.kv_cache_tokens > sort.kv_cache_tokens
    few = plan(version="0.19.0", max_model_len=4096, max_num_seqs=4, max_num_batched_tokens=1024)
    assert few.settings["profile_sampler"] == "sort"  # Triton top-k/top-p needs >= 8 rows
    v0 = plan(version="0.8.1", engine_mode="v0", **kw)
    assert v0.settings["profile_sampler"] == "sort"


def test_vllm_0101_profile_sampler_has_no_sort() -> None:
    # vLLM 0.10.1.1, Qwen2-7B (Qwen2.5-7B shapes) on an A100 80GB at utilization 0.5: the log
    # leaves 0.52 GiB for activation peak + non-torch, the forward alone, not the 1.38 GiB sort.
    case = next(c for c in CASES if c["id"] == "vllm0101-a100-80g-qwen2-7b-util05")
    kw = {k: v for k, v in engine_fidelity.case_settings(case).items() if v is not None}
    p = engine_plan(**kw)
    assert p.settings["profile_sampler"] == "flashinfer"
    assert p.activation_peak_bytes == 256 * 152_064 * 10  # rows x vocab x (2 + 4 + 4) B
    assert p.kv_cache_tokens == pytest.approx(464_848, rel=0.01)
    assert any("FlashInfer" in n for n in p.notes)

    # FlashInfer's kernels run where it is installed (the image: `vllm serve`), 0.9 - 0.11;
    # a pip install without the extra (the LLM class, Unsloth's 0.10.2 L4 log), 0.8.x (it
    # refused FlashInfer >= 0.2.3), 0.12+ (opt-in) and AMD cards keep the sort
    def sampler(**change: object) -> object:
        return engine_plan(**(kw | change)).settings["profile_sampler"]

    assert sampler(version="0.10.2") == sampler(version="0.9.0") == "flashinfer"
    assert sampler(version="0.11.0") == "flashinfer"
    assert sampler(version="0.10.2", usage_context="llm") == "sort"
    assert sampler(version="0.10.2", flashinfer=False) == "sort"
    assert sampler(version="0.10.2", colocated=True) == "sort"
    assert sampler(version="0.8.5") == sampler(version="0.12.0") == "sort"
    assert sampler(gpu="mi300x") == "sort"


def test_model_runner_v2_rules() -> None:
    """V2 runs dense models from 0.25 (Llama from 0.23); it reserved no graph memory until 0.29."""
    kw = {"max_model_len": 8192}
    assert plan(version="0.22.0", **kw).settings["model_runner"] == "v1"
    llama23 = plan(version="0.23.0", **kw)
    assert llama23.settings["model_runner"] == "v2"
    assert llama23.cudagraph_bytes == 0 and llama23.settings["profile_sampler"] == "logits"
    # forward only: 8192 tokens x (3 x 14336 + 3 x 4096) x 2 B
    assert llama23.activation_peak_bytes == 8192 * (3 * 14_336 + 3 * 4096) * 2
    quantized = plan(version="0.23.0", quantization="awq", **kw)
    assert quantized.settings["model_runner"] == "v1" and quantized.cudagraph_bytes > 0
    moe = plan(model=str(MODELS / "Qwen--Qwen3-30B-A3B" / "config.json"), version="0.26.0", **kw)
    assert moe.settings["model_runner"] == "v1" and moe.cudagraph_bytes > 0
    assert plan(version="0.28.0", **kw).cudagraph_bytes == 0
    v29 = plan(version="0.29.0", **kw)
    assert v29.settings["model_runner"] == "v2" and v29.cudagraph_bytes > 0
    newest = plan(**kw)
    assert newest.settings["profile_sampler"] == "triton"  # 0.33 warms the full sampler


def test_rtx4080_v2_runner_reserves_no_graph_memory() -> None:
    """vLLM 0.26, Qwen2.5-7B-AWQ, LLM class: 15.99 x 0.9 - 5.29 - 1.04 - 0.06 = 8.0 GiB logged."""
    run: dict[str, object] = {
        "model": QWEN25_7B,
        "gpu": "NVIDIA GeForce RTX 4080",
        "quantization": "awq",
        "version": "0.26.0",
        "gpu_memory_utilization": 0.9,
        "max_model_len": 32768,
    }
    p = plan(usage_context="llm", **run)
    assert p.settings["max_num_batched_tokens"] == 8192  # LLM-class default under 70 GiB
    assert p.cudagraph_bytes == 0
    assert p.activation_peak_bytes / GIB == pytest.approx(1.04, abs=0.02)
    assert p.kv_cache_tokens == pytest.approx(149_712, rel=0.02)
    serve = plan(**run)
    assert serve.settings["max_num_batched_tokens"] == 2048
    assert serve.kv_cache_tokens > p.kv_cache_tokens


def test_colocated_non_torch() -> None:
    alone = plan(version="0.19.0", max_model_len=8192)
    inside = plan(version="0.19.0", max_model_len=8192, colocated=True)
    assert alone.non_torch_bytes - inside.non_torch_bytes == (
        vllm.NON_TORCH_BYTES - vllm.NON_TORCH_COLOCATED_BYTES
    )
    assert inside.available_kv_bytes > alone.available_kv_bytes


def test_log_parser_reads_lora_and_the_in_process_launcher() -> None:
    case = next(c for c in CASES if c["id"] == "unsloth-l4-qwen3-8b-fp8")
    log = parse_startup_log(str(case["evidence"]).replace(" | ", "\n"), "l4.log")
    assert log.settings["enable_lora"] is True and log.settings["max_lora_rank"] == 32
    assert log.settings["max_num_seqs"] == 224
    assert log.settings["colocated"] is True  # Unsloth's banner: "Num GPUs = 1. Max memory"
    a100 = next(c for c in CASES if c["id"] == "unsloth-a100-40g-llama32-3b-bf16")
    log = parse_startup_log(str(a100["evidence"]).replace(" | ", "\n"), "a100.log")
    assert log.settings["colocated"] is True and log.settings["usage_context"] == "llm"


def sglang_plan(**kw: object) -> EnginePrediction:
    result = engine_plan(**({"engine": "sglang", "gpu": "h100", "model": LLAMA8} | kw))
    assert isinstance(result, EnginePrediction)
    return result


def test_sglang_hybrid_state_pool_before_kv() -> None:
    """Qwen3-Next: state : full KV = 0.9 (mamba_full_memory_ratio), K + 1 slots, running <= K/3
    (K/5 under SGLang 0.5.14+'s extra_buffer strategy)."""
    nxt = str(MODELS / "Qwen--Qwen3-Next-80B-A3B-Thinking" / "config.json")
    spec = spec_of(nxt)
    per_request = sglang.mamba_state_bytes_per_request(spec, 2, 1)
    linear = next(g for g in spec.kv_groups if not g.kind.per_token)
    assert per_request == linear.num_layers * -(-linear.state_bytes_per_layer // 2)
    p = sglang_plan(model=nxt, gpu="h200", tp_size=2, context_length=32768)
    rest = p.requested_memory_bytes - p.weights_bytes
    slots = p.settings["max_mamba_cache_size"]
    assert slots == (int(rest * 0.9 / 1.9) - per_request) // per_request
    kv_bytes = rest - (slots + 1) * per_request
    assert p.available_kv_bytes == kv_bytes  # what is left for the KV pool
    full = next(g for g in spec.kv_groups if g.kind.per_token)
    cell = full.num_layers * 1 * (full.head_dim_k + full.head_dim_v) * 2  # 2 KV heads / TP2
    assert p.kv_cache_tokens == kv_bytes // cell
    assert p.settings["max_running_requests"] <= slots // 3
    assert any("state pool" in n for n in p.notes)
    fixed = sglang_plan(
        model=nxt, gpu="h200", tp_size=2, context_length=32768, max_mamba_cache_size=64
    )
    assert fixed.settings["max_mamba_cache_size"] == 64
    assert fixed.kv_cache_tokens == (rest - 65 * per_request) // cell
    # the radix cache keeps 3 state slots a request (cached states beside its own), and from
    # 0.5.14 its default strategy for Qwen3-Next with the overlap scheduler, extra_buffer, 2
    # tracking slots more: K // 5; without the overlap scheduler "auto" is no_buffer (K // 3)
    # unless pages are longer than a token (extra_buffer with one tracking slot: K // 4)
    assert fixed.settings["mamba_radix_cache_strategy"] == "extra_buffer"
    assert fixed.settings["max_running_requests"] == 64 // 5
    assert any("5 state slots a running request" in n for n in fixed.notes)

    def capped(**kw: object) -> tuple[object, int]:
        got = sglang_plan(
            model=nxt, gpu="h200", tp_size=2, context_length=32768, max_mamba_cache_size=64, **kw
        )
        return got.settings["mamba_radix_cache_strategy"], got.settings["max_running_requests"]

    assert capped(version="0.5.13") == (None, 64 // 3)  # "auto" was always no_buffer
    assert capped(version="0.5.14") == ("extra_buffer", 64 // 5)
    assert capped(disable_overlap_schedule=True) == ("no_buffer", 64 // 3)
    assert capped(disable_overlap_schedule=True, page_size=16) == ("extra_buffer", 64 // 4)
    # an architecture the release does not list resolves to no_buffer, and SGLang then turns
    # its overlap scheduler off itself
    other = sglang.predict(
        spec.model_copy(update={"architecture": "JambaForCausalLM"}),
        find_gpu("h200"),
        sglang.SglangSettings(tp_size=2, context_length=32768, max_mamba_cache_size=64),
    )
    assert other.settings["mamba_radix_cache_strategy"] == "no_buffer"
    assert other.settings["disable_overlap_schedule"] is True
    assert other.settings["max_running_requests"] == 64 // 3
    with pytest.raises(InputError, match="JambaForCausalLM"):
        sglang.predict(
            spec.model_copy(update={"architecture": "JambaForCausalLM"}),
            find_gpu("h200"),
            sglang.SglangSettings(
                tp_size=2, context_length=32768, mamba_radix_cache_strategy="extra_buffer"
            ),
        )
    # without the radix cache a request holds its own state slot only: K // 1
    plain = sglang_plan(
        model=nxt,
        gpu="h200",
        tp_size=2,
        context_length=32768,
        max_mamba_cache_size=64,
        disable_radix_cache=True,
    )
    assert plain.settings["max_running_requests"] == 64
    assert plain.kv_cache_tokens == fixed.kv_cache_tokens  # the same pools


def test_sglang_vision_models_lower_the_default_fraction() -> None:
    vl = str(MODELS / "Qwen--Qwen2.5-VL-7B-Instruct" / "config.json")
    text = sglang_plan(model=QWEN25_7B, context_length=8192)
    image = sglang_plan(model=vl, context_length=8192)
    # Qwen2.5-VL's vision_config has depth, not num_hidden_layers: SGLang's getattr default 24
    factor = 0.95 * (1 - 0.1 * (24 * 1280**2 / (24 * 1024**2) - 1))
    assert sglang.vlm_fraction_factor(spec_of(vl)) == pytest.approx(factor)
    # a multimodal model captures no prefill graphs: the heuristic's fraction without them,
    # lowered by the vision factor
    from planner.sources.presets import find_gpu

    mib = find_gpu("h100").memory_bytes_nvml // 2**20
    case = sglang.ReserveCase(gpu_mem_mib=mib, chunked=8192, decode_bs=256, multimodal=True)
    assert sglang.default_mem_fraction(case) > text.settings["mem_fraction_static"]
    assert image.settings["mem_fraction_static"] == pytest.approx(
        sglang.default_mem_fraction(case) * factor
    )
    assert any("100 MiB" in n for n in image.notes)  # 0.5.20+ multimodal reservation
    old = sglang_plan(model=vl, context_length=8192, version="0.5.10")
    assert not any("100 MiB" in n for n in old.notes)
    older = sglang_plan(model=vl, context_length=8192, version="0.4.6")
    assert older.settings["mem_fraction_static"] > image.settings["mem_fraction_static"]
    gemma = spec_of(str(MODELS / "google--gemma-3-4b-it" / "config.json"))
    assert sglang.vlm_fraction_factor(gemma) == pytest.approx(
        0.95 * (1 - 0.1 * (27 * 1152**2 / (24 * 1024**2) - 1))
    )


def test_log_parser_reads_the_length_max_model_len_auto_fitted() -> None:
    """`--max-model-len auto` logs -1 among the non-default args, then the length vLLM fitted
    to the KV cache: the reduction after warm-up wins over the tentative one before it (0.34),
    and a model whose whole context fits keeps it (0.30's line)."""
    head = (
        "INFO vLLM API server version 0.34.0\n"
        "INFO non-default args: {'model': 'x', 'max_model_len': -1}\n"
    )
    reduced = head + (
        "INFO Auto-fit max_model_len: reduced from 131,072 to 60,000 to fit in available KV "
        "cache memory (5.00 GiB); the final length is set after CUDA graph capture and warmup\n"
        "INFO --max-model-len auto reduced max_model_len from 131072 to 59008 (4.90 GiB left "
        "for the KV cache after CUDA graph capture and warmup).\n"
        "INFO GPU KV cache size: 59,008 tokens\n"
    )
    assert parse_startup_log(reduced, "l").settings["max_model_len"] == 59008
    whole = head + (
        "INFO Auto-fit max_model_len: full model context length 131072 fits in available KV "
        "cache memory (40.00 GiB)\n"
        "INFO GPU KV cache size: 600,000 tokens\n"
    )
    assert parse_startup_log(whole, "l").settings["max_model_len"] == 131072
    # without an auto-fit line the length is left to the model's own maximum, not refused
    bare = head + "INFO GPU KV cache size: 59,008 tokens\n"
    assert "max_model_len" not in parse_startup_log(bare, "l").settings


def test_log_parser_reads_unsloths_batch_line() -> None:
    text = (
        "Unsloth: vLLM loading unsloth/Llama-3.2-3B-Instruct with actual GPU utilization = 79.08%\n"
        "Unsloth: Using conservativeness = 1.0. "
        "Chunked prefill tokens = 2048. Num Sequences = 320.\n"
        "# cuda blocks: 13724, # CPU blocks: 3510\n"
    )
    log = parse_startup_log(text, "unsloth.log")
    assert log.settings["max_num_batched_tokens"] == 2048 and log.settings["max_num_seqs"] == 320
    assert log.settings["colocated"] is True and log.kv_cache_tokens == 13724 * 16


def test_fidelity_benchmark_skips_cases_it_has_no_data_for(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    case = dict(CASES[0], id="unknown-model", model="acme/NoSuchModel", base_model=None)
    # a case in another engine, one that logged no tokens, and one whose fields are not the
    # schema's are skipped by name too, never fatal
    trt = dict(CASES[4], id="trt-case", engine="trt-llm")
    untold = dict(CASES[4], id="no-tokens", kv_cache_tokens=None, num_gpu_blocks=None)
    odd = dict(CASES[4], id="odd-fields", tensor_parallel_size="two")
    cases = tmp_path / "cases.jsonl"
    lines = [case, trt, untold, odd, CASES[4]]
    cases.write_text("".join(json.dumps(c) + "\n" for c in lines))
    argv = sys.argv
    sys.argv = ["engine_fidelity.py", "--cases", str(cases), "--models", str(MODELS)]
    try:
        engine_fidelity.main()
    finally:
        sys.argv = argv
    out = capsys.readouterr().out
    assert "unknown-model" in out and "skipped: no config.json for acme/NoSuchModel" in out
    assert "trt-case" in out and "skipped: engine 'trt-llm' is not modelled" in out
    assert "no-tokens" in out and "skipped: no logged KV-cache tokens or blocks" in out
    assert "odd-fields" in out and "skipped: --tensor-parallel-size" in out
    assert "vllm: 1 cases" in out


def test_fidelity_benchmark_compares_blocks_where_a_case_logged_only_blocks(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """vLLM V0 logs '# GPU blocks: N': a case with no token count is compared block for block
    (issue 10517's RTX 3090 run: 1,952 blocks logged)."""
    case = next(c for c in CASES if c["id"] == "vllm-10517-3090-llama31-8b-20k")
    cases = tmp_path / "cases.jsonl"
    cases.write_text(json.dumps(dict(case, kv_cache_tokens=None)) + "\n")
    argv = sys.argv
    sys.argv = ["engine_fidelity.py", "--cases", str(cases)]
    try:
        engine_fidelity.main()
    finally:
        sys.argv = argv
    out = capsys.readouterr().out
    predicted = engine_fidelity.predict(case).num_gpu_blocks
    assert f"1,952 {predicted:>10,}" in out and "(GPU blocks)" in out
    assert abs(predicted - 1952) <= 10


def test_fidelity_benchmark_reads_a_cases_release_as_the_row_harnesses_do() -> None:
    """The engine's number in an image tag, not the ROCm one beside it; a case naming none
    V0's last default (0.6.4); vLLM 0.26 is not V0 though its number starts with 0.2."""
    case = dict(CASES[4], engine_version="rocm/vllm:rocm6.4.1_vllm_0.10.0_20250812")
    assert engine_fidelity.case_settings(case)["version"] == "0.10.0"
    assert engine_fidelity.case_settings(dict(case, engine_version=None))["version"] == "0.6.4"
    v26 = engine_fidelity.case_settings(dict(case, engine_version="0.26.0"))
    assert v26["version"] == "0.26.0" and "engine_mode" not in v26


def test_vllm_064_counts_the_cuda_context_as_non_torch() -> None:
    kw = {"engine_mode": "v0", "gpu": "rtx-3090", "gpu_memory_utilization": 0.9}
    v064 = plan(version="0.6.4", max_model_len=20000, **kw)
    v065 = plan(version="0.6.5", max_model_len=20000, **kw)
    assert v064.non_torch_bytes == vllm.NON_TORCH_WITH_CONTEXT_BYTES
    assert v065.non_torch_bytes == vllm.NON_TORCH_BYTES
    # issue #10517: 1,952 blocks logged; the forward at 20,000 tokens is the activation peak
    assert v064.activation_peak_bytes == 20_000 * (3 * 14_336 + 3 * 4096) * 2
    assert abs(v064.num_gpu_blocks - 1952) <= 10


def test_log_parser_reads_the_consumed_memory_line() -> None:
    """vLLM 0.29+ folds weights and non-torch into 'consumed' and the graph estimate into the
    peak activation; the parser splits them back with the earlier lines."""
    text = (
        "Model loading took 14.99 GiB memory and 5.1 seconds\n"
        "Estimated CUDA graph memory: 0.91 GiB total\n"
        "Free memory on device (78.69/79.19 GiB) on startup. Desired GPU memory utilization is "
        "(0.92, 72.85 GiB). Actual usage is 15.24 GiB for consumed memory (weights + non-torch), "
        "2.80 GiB for peak activation, and 0.91 GiB for CUDAGraph memory.\n"
        "GPU KV cache size: 420,896 tokens\n"
    )
    log = parse_startup_log(text, "v33.log")
    assert log.terms["weights_bytes"] == gib(14.99)
    assert log.terms["non_torch_bytes"] == gib(15.24) - gib(14.99)
    assert log.terms["activation_peak_bytes"] == gib(2.80) - gib(0.91)
    assert log.terms["cudagraph_bytes"] == gib(0.91)
    assert log.terms["total_memory_bytes"] == gib(79.19)


def test_sglang_default_fraction_by_release() -> None:
    from planner.sources.presets import find_gpu

    h100_mib = find_gpu("h100").memory_bytes_nvml // 2**20
    h200_mib = find_gpu("h200").memory_bytes_nvml // 2**20
    frac = lambda **kw: sglang_plan(context_length=8192, **kw).settings["mem_fraction_static"]  # noqa: E731
    # 0.4.x: a table by TP size up to 80 GiB (the docs case ran 0.4.1 at its default 0.88) ...
    assert frac(version="0.4.1") == 0.88
    assert frac(version="0.4.1", tp_size=8) == 0.81
    # ... and memory - 13 GiB above it
    assert frac(version="0.4.6", gpu="h200") == pytest.approx((h200_mib - 13 * 1024) / h200_mib)
    # 0.4.8 - 0.5.2: a fixed reserve per tier, 9.5 GiB + TP x PP / 2 GiB on an H100
    assert frac(version="0.5.1") == round((h100_mib - (9.5 + 0.5) * 1024) / h100_mib, 3)
    # 0.5.3+: activations + graphs, floored at 10 GiB. H100 at 0.5.9: 512 + 1.5 x 8192 +
    # 1/8 x 1024 + 2 x 256 = 13,440 MiB (above the floor); 0.5.10 turned piecewise prefill
    # graphs on by default on CUDA: + 8 MiB x 58 captured sizes up to the 8,192-token chunk
    assert frac(version="0.5.9") == round((h100_mib - 13_440) / h100_mib, 3)
    assert frac(version="0.5.10") == round((h100_mib - 13_904) / h100_mib, 3)
    # not on ROCm, nor (before 0.5.17) under DP attention
    amd = sglang.ReserveCase(version=(0, 5, 10), gpu_mem_mib=h100_mib, chunked=8192, decode_bs=256)
    assert sglang.graph_reserve_mib(amd) == 2 * 256 + 8 * 58
    assert sglang.graph_reserve_mib(amd.model_copy(update={"cuda": False})) == 2 * 256
    assert sglang.graph_reserve_mib(amd.model_copy(update={"attn_dp": 2})) == 2 * 256 + 3 * 512
    # from 0.5.15 the reserve follows the PD role: a decode instance keeps no prefill graphs
    # and sizes its activation slack by its running cap, a prefill one no decode graphs
    now = amd.model_copy(update={"version": (0, 5, 23)})
    assert sglang.graph_reserve_mib(now.model_copy(update={"role": "decode"})) == 2 * 256
    assert sglang.graph_reserve_mib(now.model_copy(update={"role": "prefill"})) == 8 * 58
    # a Llama 2 path's prefill graphs stop at 4,096 tokens: 50 sizes, not 58
    assert sglang.graph_reserve_mib(now.model_copy(update={"llama2": True})) == 2 * 256 + 8 * 50
    llama2 = sglang.predict(
        resolve_model(None, str(MODELS / "meta-llama--Llama-2-7b-hf")),
        find_gpu("h100"),
        sglang.SglangSettings(context_length=4096),
    )
    assert llama2.settings["mem_fraction_static"] == round(
        (h100_mib - (512 + 1.5 * 8192 + 1024 / 8 + 2 * 256 + 8 * 50)) / h100_mib, 3
    )
    decode = now.model_copy(update={"role": "decode", "max_running_requests": 8192})
    assert sglang.default_mem_fraction(decode) == round(
        (h100_mib - (512 + 1.5 * 8192 + 128 + 2 * 256)) / h100_mib, 3
    )
    # (at 4,096 running the 10 GiB floor binds)
    fewer = decode.model_copy(update={"max_running_requests": 4096})
    assert sglang.default_mem_fraction(fewer) == round((h100_mib - 10 * 1024) / h100_mib, 3)
    # DP attention with a decode graph batch above 300: 1.5 MiB more per size and group
    big = now.model_copy(update={"attn_dp": 8, "decode_bs": 512, "mla": True})
    assert sglang.graph_reserve_mib(big) == 2 * 512 + 3 * 512 * 8 + 1.5 * 512 * 8 + 1536
    # DeepEP: 1 GiB more beside captured prefill graphs (0.5.17+), and 2 GiB past the floor
    # where decode graphs are captured (0.5.15+; not on a prefill instance)
    wide = big.model_copy(update={"deepep": True})
    assert sglang.graph_reserve_mib(wide) == sglang.graph_reserve_mib(big) + 1024
    assert sglang.graph_reserve_mib(wide.model_copy(update={"version": (0, 5, 16)})) == (
        sglang.graph_reserve_mib(big.model_copy(update={"version": (0, 5, 16)}))
    )
    small = sglang.ReserveCase(gpu_mem_mib=h200_mib, chunked=2048, decode_bs=256, cuda=False)
    for version, more in (((0, 5, 14), 0), ((0, 5, 15), 2048), ((0, 5, 23), 2048)):
        floored = small.model_copy(update={"version": version})  # 4,224 MiB: the floor binds
        assert sglang.default_mem_fraction(floored) == round((h200_mib - 10_240) / h200_mib, 3)
        assert sglang.default_mem_fraction(floored.model_copy(update={"deepep": True})) == round(
            (h200_mib - 10_240 - more) / h200_mib, 3
        ), version
    # chunking off (--chunked-prefill-size -1): the activation slack is max_prefill_tokens',
    # 16,384 (server_args.py 0.5.3 - 0.5.13, arg_groups/memory_hook.py 0.5.23), not 2,048
    unchunked = sglang.predict(
        resolve_model("llama-3.1-8b", None),
        find_gpu("h100"),
        sglang.SglangSettings(chunked_prefill_size=-1, context_length=8192),
    )
    assert unchunked.settings["mem_fraction_static"] == round(
        (h100_mib - (512 + 1.5 * 16384 + 1024 / 8 + 2 * 256)) / h100_mib, 3
    )
    smaller = sglang.predict(
        resolve_model("llama-3.1-8b", None),
        find_gpu("h100"),
        sglang.SglangSettings(
            chunked_prefill_size=-1, context_length=8192, max_prefill_tokens=8192
        ),
    )  # --max-prefill-tokens 8192
    assert smaller.settings["mem_fraction_static"] == round(
        (h100_mib - (512 + 1.5 * 8192 + 1024 / 8 + 2 * 256)) / h100_mib, 3
    )
    # from 0.5.22 a default decode graph batch above --max-running-requests is lowered to it
    # before the reserve is sized: 64 running on an H100 reserve 2 x 64 MiB of graphs, not 256
    for version, graphs in (("0.5.21", 256), ("0.5.22", 64)):
        capped = sglang.predict(
            resolve_model("llama-3.1-8b", None),
            find_gpu("h100"),
            sglang.SglangSettings(
                version=version, max_running_requests=64, chunked_prefill_size=8192
            ),
        )
        assert capped.settings["cuda_graph_max_bs_decode"] == graphs
        activation = 512 + 1.5 * 8192 + 1024 / 8
        assert capped.settings["mem_fraction_static"] == round(
            (h100_mib - (activation + 2 * graphs + 8 * 58)) / h100_mib, 3
        )
    prefill = small.model_copy(update={"role": "prefill", "deepep": True})
    assert sglang.default_mem_fraction(prefill) == round((h200_mib - 10_240) / h200_mib, 3)
    assert (
        sglang_plan(version="0.4.6", gpu="rtx-4090", context_length=8192).settings[
            "chunked_prefill_size"
        ]
        == 2048
    )


def test_v1_before_010_logs_concurrency_as_tokens_over_length() -> None:
    # vLLM 0.8-0.9 kv_cache_utils: max_concurrency = num_tokens / max_model_len; 0.10+ counts the
    # blocks one request needs (the same here: one full-attention group, 8192 a multiple of 16)
    p = plan(version="0.9.0", max_model_len=8000)
    assert p.max_concurrency == p.kv_cache_tokens / 8000
    q = plan(version="0.10.2", max_model_len=8000)
    assert q.max_concurrency == q.num_gpu_blocks / 500


def test_cli_lora_flags(cli: Cli) -> None:
    base = ("capacity", "--model", LLAMA8, "--gpu", "h100", "--engine", "vllm", "--json")
    plain = json.loads(cli(*base).out)["engine"]
    lora = json.loads(cli(*base, "--enable-lora", "--max-lora-rank", "64").out)["engine"]
    assert lora["settings"]["max_lora_rank"] == 64
    assert lora["weights_bytes"] > plain["weights_bytes"]
    r = cli(*base, "--max-lora-rank", "64")
    assert r.code == 2 and "--max-lora-rank" in r.err and "--enable-lora" in r.err
    # the field is the flag typed
    r = cli(*base, "--max-loras", "2")
    assert r.code == 2 and r.json()["field"] == "--max-loras"


def _case_plan(case_id: str, **change: object) -> tuple[EnginePrediction, int]:
    case = next(c for c in CASES if c["id"] == case_id)
    kw = {k: v for k, v in engine_fidelity.case_settings(case).items() if v is not None}
    return engine_plan(**(kw | change)), int(case["kv_cache_tokens"])


def test_allreduce_fusion_workspace_by_version_and_card() -> None:
    """FlashInfer's all-reduce + RMSNorm fusion (vLLM 0.17+, TP > 1 on cc 9.0 / 10.x)."""
    from planner.core.engines.vllm import ALLREDUCE_FUSION_BYTES

    # Mixtral-8x7B TP2 on H100 under 0.15.1: no fusion yet; the logged tokens within 0.5%
    before, logged = _case_plan("vllm0151-h100x2-mixtral-8x7b-tp2-simreal")
    assert before.kv_cache_tokens == pytest.approx(logged, rel=0.005)
    assert not any("fusion" in n for n in before.notes)
    after, _ = _case_plan("vllm0151-h100x2-mixtral-8x7b-tp2-simreal", version="0.19.0")
    assert after.non_torch_bytes - before.non_torch_bytes == ALLREDUCE_FUSION_BYTES
    assert any("fusion" in n for n in after.notes)
    # the same flags on cards and modes the pass skips: Ada (L4), eager, PP 2 before 0.28
    eager, _ = _case_plan(
        "vllm0151-h100x2-mixtral-8x7b-tp2-simreal", version="0.19.0", enforce_eager=True
    )
    assert eager.non_torch_bytes == before.non_torch_bytes
    tp2_l4, logged_l4 = _case_plan("vllm028-l4x2-qwen3-14b-awq-tp2")
    assert tp2_l4.non_torch_bytes == before.non_torch_bytes  # cc 8.9: no fusion
    assert tp2_l4.kv_cache_tokens == pytest.approx(logged_l4, rel=0.03)
    # both vLLM 0.19 H100 TP2 logs, which carry the fusion workspace, stay within 0.5%
    for case_id in ("llmd-h100-llama31-8b-tp2", "llmd-h100-gpt-oss-20b-tp2"):
        p, tokens = _case_plan(case_id)
        assert p.kv_cache_tokens == pytest.approx(tokens, rel=0.005)


def test_xformers_forward_below_ampere() -> None:
    """V0 on a T4 (no FlashAttention-2) holds one more query-width buffer at the peak."""
    t4, logged = _case_plan("vllm-t4-qwen25-1.5b-util05")
    # 32,768 tokens x (3 x 8960 + 3 x 1536 + 12 x 128) x 2 B = 2.01 GiB (logged 2.02)
    assert t4.activation_peak_bytes == 32_768 * (3 * 8960 + 3 * 1536 + 1536) * 2
    assert t4.kv_cache_tokens == pytest.approx(logged, rel=0.005)
    assert any("XFormers" in n for n in t4.notes)
    # an Ampere card under the same V0 release runs FlashAttention: three hidden buffers
    a10, _ = _case_plan("vllm-t4-qwen25-1.5b-util05", gpu="a10")
    assert a10.activation_peak_bytes == 32_768 * (3 * 8960 + 3 * 1536) * 2


def test_v2_persistent_sampler_state_counts_from_028() -> None:
    """0.28 budgets from free memory, so runner V2's penalty buffers are in the non-KV part."""
    p28, logged = _case_plan("vllm028-l40s-qwen3-14b-awq-default")
    p27, _ = _case_plan("vllm028-l40s-qwen3-14b-awq-default", version="0.27.0")
    vocab = 151_936
    assert p28.settings["model_runner"] == p27.settings["model_runner"] == "v2"
    assert p28.activation_peak_bytes - p27.activation_peak_bytes == 256 * (vocab + vocab // 32) * 4
    assert p28.kv_cache_tokens == pytest.approx(logged, rel=0.05)  # +4.1%: open, docs/engines.md


def test_pipeline_stages_hold_their_own_layers_and_matrices() -> None:
    """vLLM's PP split (get_pp_indices) and where the embedding / lm_head / sampler live."""
    assert vllm.pp_partition(32, 3) == [11, 11, 10]  # the remainder to the stages before the last
    assert vllm.pp_partition(61, 4) == [15, 15, 16, 15]
    assert vllm.pp_partition(40, 2) == [20, 20]
    llama3b = str(MODELS / "meta-llama--Llama-3.2-3B-Instruct" / "config.json")
    spec = resolve_model(None, llama3b)
    assert spec.tied_embeddings and spec.embedding_params == 128_256 * 3072
    kw = {"engine": "vllm", "gpu": "l4", "model": llama3b, "max_model_len": 8192}
    one = engine_plan(**kw)
    two = engine_plan(**kw, pipeline_parallel_size=2)
    matrix = 128_256 * 3072 * 2
    # tied: the last stage loads its own copy of the embedding for the lm_head, so each of
    # the two 14-layer stages holds half the body plus one vocab matrix
    body = spec.weights_bytes - matrix
    rope = one.weights_bytes - spec.weights_bytes
    assert two.weights_bytes == body * 14 // 28 + matrix + rope
    assert any("PP 2: stages of 14/14 layers" in n for n in two.notes)
    # each stage keeps 14 layers of KV: a block is half the single-GPU block
    assert two.bytes_per_block * 2 == one.bytes_per_block
    assert two.num_gpu_blocks > one.num_gpu_blocks  # half the weights, half the block size


def test_pp_with_awq_on_two_l4s_plans() -> None:
    """Qwen3-14B-AWQ with PP 2 on two L4s: planned stage by stage, not refused."""
    qwen14 = str(MODELS / "Qwen--Qwen3-14B" / "config.json")
    kw = {
        "engine": "vllm",
        "gpu": "l4",
        "model": qwen14,
        "quantization": "awq",
        "version": "0.28.0",
        "max_model_len": 40_960,
    }
    p = engine_plan(**kw, pipeline_parallel_size=2)
    assert p.kv_cache_tokens > 0 and any("PP 2: stages of 20/20 layers" in n for n in p.notes)
    tp2 = engine_plan(**kw, tensor_parallel_size=2)
    assert p.bytes_per_block == tp2.bytes_per_block  # 20 layers x 8 heads vs 40 x 4


def test_expert_parallel_workspace_uses_the_whole_expert_width() -> None:
    """--enable-expert-parallel: ranks hold whole experts, so fused-MoE buffers are not split."""
    from planner.core.serve import command_line, fields_from_line

    qwen_moe = str(MODELS / "Qwen--Qwen3-30B-A3B" / "config.json")
    kw = {"engine": "vllm", "gpu": "l40s", "model": qwen_moe, "max_model_len": 8192}
    tp = engine_plan(**kw, tensor_parallel_size=4, version="0.10.2")
    ep = engine_plan(**kw, tensor_parallel_size=4, version="0.10.2", enable_expert_parallel=True)
    tokens = int(str(tp.settings["max_num_batched_tokens"]))
    # per routed token: max(2 x 768, 2048) + 768 with EP vs max(2 x 192, 2048) + 192 with TP
    assert ep.activation_peak_bytes - tp.activation_peak_bytes == tokens * 8 * (2816 - 2240) * 2
    assert ep.weights_bytes == tp.weights_bytes and ep.bytes_per_block == tp.bytes_per_block
    assert any("each rank holds 32 whole experts" in n for n in ep.notes)  # 128 experts / TP 4
    dense = engine_plan(**(kw | {"model": LLAMA8}), enable_expert_parallel=True)
    assert any("changes nothing" in n for n in dense.notes)
    spec = resolve_model(None, qwen_moe)
    line = command_line(spec, "vllm", {"tensor_parallel_size": 4, "enable_expert_parallel": True})
    assert line.endswith("--enable-expert-parallel")
    assert fields_from_line("vllm", line)["enable_expert_parallel"] is True


def test_log_says_whether_flashinfer_samples() -> None:
    """TopKTopPSampler's start-up line (vLLM 0.9 - 0.11) sets the sampler the replay uses."""
    head = "INFO 09-04 [api_server.py:1805] vLLM API server version 0.10.1.1\n"
    tail = "INFO [kv_cache_utils.py:849] GPU KV cache size: 464,848 tokens\n"
    on = parse_startup_log(
        head
        + "INFO [topk_topp_sampler.py:49] Using FlashInfer for top-p & top-k sampling.\n"
        + tail,
        "on.log",
    )
    off = parse_startup_log(
        head + "WARNING [topk_topp_sampler.py:60] FlashInfer is not available. Falling back to "
        "the PyTorch-native implementation of top-p & top-k sampling.\n" + tail,
        "off.log",
    )
    assert on.settings["flashinfer"] is True and off.settings["flashinfer"] is False
    assert "flashinfer" not in parse_startup_log(head + tail, "none.log").settings


def test_in_flight_bitsandbytes_weights() -> None:
    """--quantization bitsandbytes on an unquantised checkpoint: vLLM's in-flight 4-bit NF4."""
    from planner.core.hf_config import BNB_4BIT_BLOCK, quantized_weights_bytes

    spec = resolve_model(None, LLAMA8)
    q = spec.quantizable_params
    expected = q // 2 + -(-q // BNB_4BIT_BLOCK) * 4 + (spec.params_total - q) * 2
    assert quantized_weights_bytes(spec, "bitsandbytes") == expected
    p = engine_plan(engine="vllm", gpu="l4", model=LLAMA8, quantization="bitsandbytes")
    bf16 = engine_plan(engine="vllm", gpu="l4", model=LLAMA8)
    assert p.weights_bytes < bf16.weights_bytes / 2 and p.kv_cache_tokens > bf16.kv_cache_tokens


def test_graph_estimate_on_rocm_from_026() -> None:
    """vLLM estimated CUDA-graph memory on CUDA only until 0.26 added ROCm (is_cuda_alike)."""
    qwen_moe = str(MODELS / "Qwen--Qwen3-30B-A3B" / "config.json")  # runner V1 in 0.20-0.28
    kw = {"engine": "vllm", "model": qwen_moe, "max_model_len": 8192}
    assert engine_plan(**kw, gpu="mi300x", version="0.25.0").cudagraph_bytes == 0
    assert engine_plan(**kw, gpu="mi300x", version="0.26.0").cudagraph_bytes > 0
    assert engine_plan(**kw, gpu="h100", version="0.20.0").cudagraph_bytes > 0


@pytest.mark.parametrize(
    ("gpu", "fp8_v1_since"),
    [
        ("a100", "0.11.0"),  # FlashAttention 2 has no fp8: V0 until V0 is gone
        ("h100", "0.8.5"),  # FlashAttention 3's fp8 on Hopper
        ("b200", "0.10.0"),  # SM 10.0's backends
    ],
)
def test_vllm_08_to_010_falls_back_to_v0_where_its_oracle_says(gpu: str, fp8_v1_since: str) -> None:
    """vLLM 0.8 - 0.10 run V1 unless its oracle finds something V1 lacks: an fp8 KV cache the
    card's V1 attention does not run, a card below compute capability 8.0 (until 0.10.2) or
    float32 (until 0.9.2). The plan runs V0 there and says why; the engine named by a log is
    kept."""
    from planner.core.engines.common import parse_version

    releases = ("0.7.3", "0.8.0", "0.8.4", "0.8.5", "0.9.0", "0.10.0", "0.10.2", "0.11.0")
    for version in releases:
        p = plan(gpu=gpu, version=version, kv_cache_dtype="fp8", max_model_len=8192)
        v1 = parse_version(version) >= parse_version(fp8_v1_since)
        expected = "v0" if version == "0.7.3" else ("v1" if v1 else "v0")
        assert p.settings["engine"] == expected, version
        fell_back = any("V1 oracle falls back for --kv-cache-dtype" in n for n in p.notes)
        assert fell_back == (expected == "v0" and version != "0.7.3"), version
        assert plan(gpu=gpu, version=version, max_model_len=8192).settings["engine"] == (
            "v0" if version == "0.7.3" else "v1"
        )
    kept = plan(gpu="a100", version="0.9.0", kv_cache_dtype="fp8", engine_mode="v1")
    assert kept.settings["engine"] == "v1"


def test_vllm_08_to_091_runs_rocm_pipelines_lora_and_connectors_on_v0() -> None:
    """What V1 ran as experimental or lacked falls back to V0 unless VLLM_USE_V1=1: ROCm until
    0.9.2, LoRA until 0.8.3, a KV connector until 0.8.5, pipeline stages in 0.8.0 - 0.8.2
    always, 0.8.3 - 0.8.5 unless on Ray, 0.9.0 unless on Ray or mp. The plan runs V0 there and
    says why."""

    def engine(**kw: object) -> str:
        p = plan(max_model_len=8192, **kw)
        if p.settings["engine"] == "v0" and kw["version"] != "0.7.3":
            assert any("V1 oracle falls back for" in n for n in p.notes)
        return str(p.settings["engine"])

    for version, rocm in (("0.8.0", "v0"), ("0.9.1", "v0"), ("0.9.2", "v1")):
        assert engine(gpu="mi300x", version=version) == rocm, version
        assert engine(gpu="h100", version=version) == "v1", version
    assert engine(version="0.8.2", enable_lora=True) == "v0"
    assert engine(version="0.8.3", enable_lora=True) == "v1"
    assert engine(version="0.8.4", kv_connector="PyNcclConnector") == "v0"  # V0's
    assert engine(version="0.8.5", kv_connector="LMCacheConnectorV1") == "v1"
    stages = {"pipeline_parallel_size": 2}
    for version, default, on_ray, on_mp in (
        ("0.8.2", "v0", "v0", "v0"),
        ("0.8.3", "v0", "v1", "v0"),
        ("0.9.0", "v0", "v1", "v1"),
        ("0.9.1", "v1", "v1", "v1"),
    ):
        assert engine(version=version, **stages) == default, version
        ray = engine(version=version, distributed_executor_backend="ray", **stages)
        mp = engine(version=version, distributed_executor_backend="mp", **stages)
        assert (ray, mp) == (on_ray, on_mp), version


def test_a_latency_budget_on_a_v0_fallback_turns_chunked_prefill_on(cli: Cli) -> None:
    """`capacity --tpot` lowers the step budget below max_model_len, which V0 takes only with
    chunked prefill on: a 0.9.0 plan that falls back to V0 (fp8 KV on an A100) says so on its
    line, as a 0.6.3 one does; the budget is the TPOT's."""
    where = ("capacity", "--preset", "llama-3.1-8b", "--gpu", "a100", "--kv-dtype", "fp8")
    for version in ("0.6.3", "0.9.0"):
        got = cli(*where, "--engine-version", version, "--tpot", "15", "--json").json()
        assert got["engine"]["settings"]["engine"] == "v0", version
        line = got["flags"]["vllm"]
        assert line.endswith("--enable-chunked-prefill"), (version, line)
        assert "--max-num-batched-tokens 8192" not in line, version


def test_a_pipeline_line_names_the_executor_it_plans(cli: Cli) -> None:
    """The executor given is the line's (a single host's pipeline too), and the plan is the
    engine that executor starts: vLLM 0.8.5 runs stages on V1 only on Ray."""
    where = ("capacity", "--model", LLAMA8, "--gpu", "h100", "--pp", "2", "--json")
    given = cli(*where, "--engine-version", "0.8.5", "--distributed-executor-backend", "ray")
    assert given.code == 0, given.err
    assert given.json()["engine"]["settings"]["engine"] == "v1"
    assert "--distributed-executor-backend ray" in given.json()["flags"]["vllm"]
    default = cli(*where, "--engine-version", "0.8.5").json()
    assert default["engine"]["settings"]["engine"] == "v0"
    assert "--distributed-executor-backend" not in default["flags"]["vllm"]


def test_vllm_runs_a_model_with_state_layers_on_v0_until_0_10_2_with_its_state_cache(
    cli: Cli,
) -> None:
    """Mamba / linear-attention models were V0-only before 0.9.2 and fell back to V0 until
    0.10.2 ("Mamba is experimental on VLLM_USE_V1=1"): the plan runs V0 there (its 256-sequence
    cap), its Mamba states in V0's own cache, a slot per sequence, charged in the profile's
    activation peak, and its blocks hold the 10 attention layers alone. By hand for
    Nemotron-H-56B at TP 4: a Mamba-2 layer's conv state (64 x 256 + 2 x 8 x 256) x 3 and SSM
    state 256 x 64 x 256 in bf16, a quarter a GPU, 54 layers, 256 slots; a block 16 tokens x
    10 layers x 2 KV heads x (128 + 128) x 2 bytes."""
    where = ("capacity", "--preset", "nemotron-h-56b", "--gpu", "h100", "--tp", "4", "--json")
    layer = ((64 * 256 + 2 * 8 * 256) * 3 + 256 * 64 * 256) * 2 // 4
    state_cache = 256 * 54 * layer
    for version, engine, cap in (
        ("0.9.0", "v0", 256),
        ("0.10.1", "v0", 256),
        ("0.10.2", "v1", 1024),
    ):
        got = cli(*where, "--engine-version", version).json()
        assert got["engine"]["settings"]["engine"] == engine, version
        notes = " ".join(got["engine"]["notes"])
        assert ("V0 keeps the Mamba states apart" in notes) == (engine == "v0"), version
        assert "does not model" not in notes, version
        assert got["batch_cap"] == cap, version  # V0 caps at 256 sequences, V1 here at 1,024
        if engine == "v0":
            assert f"{state_cache / 2**30:.2f} GiB" in notes
            assert got["engine"]["bytes_per_block"] == 16 * 10 * 2 * 256 * 2
    # at TP 2 the 256 slots (twice the bytes) leave no KV cache: the reason names the state
    # cache, and the fewer sequences that start are offered
    tight = cli(*where[:-2], "2", "--engine-version", "0.9.2", "--json").json()
    assert not tight["fits"]
    assert "Mamba state cache" in tight["binding_reason"]
    assert "256 sequence slots, --max-num-seqs sizes it" in tight["binding_reason"]
    offered = [s for s in tight["suggestions"] if s["change"].startswith("--max-num-seqs")]
    assert len(offered) == 1 and 1 < offered[0]["max_num_seqs"] < 256
    seqs = offered[0]["max_num_seqs"]
    flags = ("--max-num-seqs", str(seqs), "--engine-version", "0.9.2", "--json")
    assert cli(*where[:-2], "2", *flags).json()["fits"]
    flags = ("--max-num-seqs", str(seqs + 1), "--engine-version", "0.9.2", "--json")
    assert not cli(*where[:-2], "2", *flags).json()["fits"]
    # 0.6.5 - 0.7.2 give it 8,194 slots under --enforce-eager, whatever the cap
    eager = ("--enforce-eager", "--max-num-seqs", "8", "--engine-version", "0.7.2", "--json")
    fixed = cli(*where[:-1], *eager).json()
    assert "8,194 sequence slots, whatever --max-num-seqs" in fixed["binding_reason"]


def test_v0_mamba_state_slots_follow_the_release_graph_padding() -> None:
    """V0's state cache holds max_num_seqs padded to its CUDA-graph batch (1, 2, 4, then
    multiples of 8); under --enforce-eager padded still through 0.6.4, 8,194 slots in
    0.6.5 - 0.7.2, max_num_seqs itself from 0.7.3."""
    from planner.core.engines.vllm import v0_state_slots

    graphs = [v0_state_slots(n, False, (0, 9, 2)) for n in (1, 2, 3, 5, 8, 61, 256)]
    assert graphs == [1, 2, 4, 8, 8, 64, 256]
    assert v0_state_slots(61, True, (0, 6, 4)) == 64
    assert v0_state_slots(61, True, (0, 7, 2)) == 8194
    assert v0_state_slots(61, True, (0, 7, 3)) == 61


def test_vllm_runs_v0_below_ampere_until_0_10_2_and_float32_until_0_9_2() -> None:
    gemma = MODELS / "google--gemma-3-4b-it"
    kw = {"gpu": "t4", "model": str(gemma), "max_model_len": 2048}
    assert plan(version="0.10.1", **kw).settings["engine"] == "v0"
    assert plan(version="0.10.2", **kw).settings["engine"] == "v1"
    fp32 = {"gpu": "h100", "max_model_len": 2048, "dtype": "float32"}
    assert plan(version="0.9.1", **fp32).settings["engine"] == "v0"
    assert plan(version="0.9.2", **fp32).settings["engine"] == "v1"


def test_v1_08_counts_the_cuda_context_as_non_torch() -> None:
    """V1 0.8.x subtracted device memory in use less torch's allocations (context included)."""
    from planner.core.engines.vllm import NON_TORCH_BYTES, NON_TORCH_WITH_CONTEXT_BYTES

    kw = {"engine": "vllm", "gpu": "h100", "model": LLAMA8, "max_model_len": 8192}
    assert engine_plan(**kw, version="0.8.5").non_torch_bytes == NON_TORCH_WITH_CONTEXT_BYTES
    v0 = engine_plan(**kw, version="0.8.5", engine_mode="v0")
    assert v0.non_torch_bytes == NON_TORCH_BYTES  # V0 there used memory_profiling's growth
    assert engine_plan(**kw, version="0.9.0").non_torch_bytes == NON_TORCH_BYTES


@pytest.mark.parametrize("engine", ["vllm", "sglang"])
def test_more_stages_than_layers_is_refused(cli: Cli, engine: str) -> None:
    r = cli("capacity", "--model", LLAMA8, "--gpu", "h100", "--engine", engine, "--pp", "33")
    assert r.code == 2 and "--pp: 33 stages for 32 layers" in r.err


@pytest.mark.parametrize("engine", ["vllm", "sglang"])
def test_unquantized_weights_load_in_the_run_dtype(engine: str) -> None:
    # A bf16 checkpoint under --dtype float32 is cast as it loads: twice the bytes, less KV
    # (a held-out vLLM log of an 8B model at float32 was 36% below the bf16-sized prediction).
    bf16 = plan(engine=engine)
    fp32 = plan(engine=engine, dtype="float32")
    spec = resolve_model(None, LLAMA8, None)
    rope_bf16 = bf16.weights_bytes - spec.weights_bytes
    rope_fp32 = fp32.weights_bytes - 2 * spec.weights_bytes
    assert rope_fp32 == 2 * rope_bf16  # the RoPE cache is in the run dtype too
    assert fp32.available_kv_bytes < bf16.available_kv_bytes - spec.weights_bytes * 0.99
    assert fp32.kv_cache_tokens < bf16.kv_cache_tokens / 2  # 4-byte KV and less room


def test_a_logged_server_keeps_its_chunked_prefill_setting() -> None:
    """A start-up log names chunked prefill in its non-default args and its engine config
    line; the engine model then takes that server's budget default (off: the whole context)."""
    from planner.sources.startup_log import parse_startup_log

    args = parse_startup_log(
        "non-default args: {'model': 'm', 'enable_chunked_prefill': False}\n"
        "Available KV cache memory: 1.00 GiB\n",
        "x.log",
        require_tokens=False,
    )
    assert args.settings["enable_chunked_prefill"] is False
    config = parse_startup_log(
        "INFO Initializing a V1 LLM engine (v0.10.1.1) with config: model='m', "
        "max_seq_len=16384, tensor_parallel_size=1, chunked_prefill_enabled=False\n"
        "Available KV cache memory: 1.00 GiB\n",
        "y.log",
        require_tokens=False,
    )
    assert config.settings["enable_chunked_prefill"] is False
    assert config.settings["max_model_len"] == 16384
    from planner.sources.models import resolve_model
    from planner.sources.presets import find_gpu

    logged = {k: config.settings[k] for k in ("enable_chunked_prefill", "max_model_len")}
    spec, card = resolve_model("llama-3.1-8b", None), find_gpu("h100")
    planned = vllm.predict(spec, card, vllm.VllmSettings(version="0.10.1.1", **logged))
    assert planned.settings["max_num_batched_tokens"] == 16384  # 8,192 with it on
    on = vllm.predict(spec, card, vllm.VllmSettings(version="0.10.1.1", max_model_len=16384))
    assert on.settings["max_num_batched_tokens"] == 8192


def test_sglang_log_replays_its_parallel_layout(tmp_path: Path) -> None:
    """A ServerArgs repr records the layout SGLang ran after its own adjustments: attention-DP
    groups (dp_size with enable_dp_attention, or 0.5.23's attn_dp_size), whole replicas
    (dp_size alone) and expert parallelism; the replay plans that layout, not pure TP. Its
    chunked_prefill_size is each attention-DP group's share of the flag (SGLang divides it)."""
    args = (
        "server_args=ServerArgs(model_path='deepseek-ai/DeepSeek-R1', tp_size=8, "
        "mem_fraction_static=0.8, chunked_prefill_size={chunk}, page_size=1, "
        "kv_cache_dtype='auto', {layout}, moe_dense_tp_size=None)"
    )
    chunks = {8: 1024, 4: 2048, 1: 8192}  # the 8,192-token flag's share per group
    tail = (
        "KV Cache is allocated. #tokens: 500000, KV size: 30.00 GB\n"
        "max_total_num_tokens=500000, chunked_prefill_size=1024, max_prefill_tokens=16384, "
        "max_running_requests=1024, context_len=163840\n"
    )
    layouts = {
        "dp_size=8, ep_size=8, enable_dp_attention=True": {"attn_dp_size": 8, "ep_size": 8},
        "attn_dp_size=4, dp_size=1": {"attn_dp_size": 4},
        "dp_size=2, enable_dp_attention=False": {"dp_size": 2},
        "dp_size=1, ep_size=1": {},
    }
    for layout, settings in layouts.items():
        chunk = chunks[int(str(settings.get("attn_dp_size", 1)))]
        log = parse_startup_log(args.format(layout=layout, chunk=chunk) + "\n" + tail, "s.log")
        assert {k: log.settings[k] for k in settings} == settings
        assert not {"attn_dp_size", "dp_size", "ep_size"} - set(settings) & set(log.settings)
        assert log.settings["chunked_prefill_size"] == 8192  # the flag that launched it
    path = tmp_path / "sglang.log"
    path.write_text(args.format(layout=next(iter(layouts)), chunk=1024) + "\n" + tail)
    r1 = str(MODELS / "deepseek-ai--DeepSeek-R1")
    report = from_log_report(log_path=str(path), gpu="h200", model=r1, version="0.5.4")
    predicted = report["predicted"]
    assert predicted["settings"]["attn_dp_size"] == 8 and predicted["settings"]["ep_size"] == 8
    assert predicted["settings"]["chunked_prefill_per_group"] == 1024
    assert "chunked_prefill_size=1024," in predicted["log_lines"][-1]
    logged = {"mem_fraction_static": 0.8, "chunked_prefill_size": 8192, "page_size": 1}
    pure_tp = engine_plan(
        engine="sglang", gpu="h200", model=r1, version="0.5.4", tp_size=8, **logged
    )
    # attention weights whole on every GPU: more weight bytes per GPU than pure TP's
    assert predicted["weights_bytes"] > pure_tp.weights_bytes


def test_a_release_before_the_engines_native_model_says_so(cli: Cli) -> None:
    """Each engine's registry, read release by release: an architecture arrives in one release
    (gpt-oss in vLLM 0.10.1, DeepSeek-V3.2 in vLLM 0.11.0 and SGLang 0.5.3). An older release
    refuses the model outright before its Transformers-backend fallback (vLLM 0.7.2) and, after
    it, may run the model on transformers' class: the plan warns that it is the native one's."""
    from planner.core.engines.registry import native_since, registry_gap

    assert native_since("vllm", "GptOssForCausalLM") == "0.10.1"
    assert native_since("vllm", "DeepseekV32ForCausalLM") == "0.11.0"
    assert native_since("sglang", "DeepseekV32ForCausalLM") == "0.5.3"
    assert native_since("vllm", "LlamaForCausalLM") == "0.2.0"
    old = registry_gap("vllm", "GptOssForCausalLM", (0, 6, 3))
    assert old is not None and old[1] and "first in 0.10.1" in old[0]
    fallback = registry_gap("vllm", "DeepseekV32ForCausalLM", (0, 10, 2))
    assert fallback is not None and not fallback[1] and "Transformers backend" in fallback[0]
    assert registry_gap("vllm", "DeepseekV32ForCausalLM", (0, 11, 0)) is None
    unknown = registry_gap("sglang", "NoSuchModelForCausalLM", (0, 5, 23))
    assert unknown is not None and "no release through 0.5.23" in unknown[0]
    assert registry_gap("sglang", "NoSuchModelForCausalLM", (0, 6, 0)) is None  # not read
    gpt_oss = ("--model", str(MODELS / "openai--gpt-oss-120b"), "--gpu", "h100", "--tp", "4")
    refused = cli("capacity", *gpt_oss, "--engine-version", "0.6.3", "--json")
    assert refused.code == 1 and not refused.json()["fits"]
    assert any("vLLM 0.6.3 has no GptOssForCausalLM" in r for r in refused.json()["reasons"])
    # the one change that starts it: the first release with the model
    changes = [s["change"] for s in refused.json()["suggestions"]]
    assert changes == ["--engine-version 0.10.1 (the first with GptOssForCausalLM)"]
    served = cli("capacity", *gpt_oss, "--engine-version", "0.10.1", "--json").json()
    assert served["fits"] and not any("GptOssForCausalLM" in w for w in served["warnings"])


@pytest.mark.parametrize(
    ("gpu", "version", "starts"),
    [
        ("b200", "0.5.4", True),
        ("rtx-pro-6000-blackwell", "0.5.4", False),  # 10.x alone through 0.5.4
        ("rtx-pro-6000-blackwell", "0.5.5", True),
        ("h200", "0.5.12", False),
        ("h200", "0.5.13", True),  # its Marlin fallback on 8.0-9.x
        ("a100", "0.5.23", True),
        ("mi355x", "0.5.23", False),  # never on AMD
    ],
)
def test_sglang_runs_nvfp4_experts_where_its_moe_method_does(
    cli: Callable[..., Result], gpu: str, version: str, starts: bool
) -> None:
    """SGLang's ModelOptNvFp4FusedMoEMethod refuses NVFP4 experts off Blackwell (12.x from
    0.5.5), save on compute capability 8.0-9.x through Marlin from 0.5.13; a dense NVFP4 model
    and vLLM are not held to it."""
    args = ("capacity", "--preset", "deepseek-v3", "--gpu", gpu, "--tp", "8", "--weight-dtype",
            "nvfp4", "--engine", "sglang", "--engine-version", version, "--json")  # fmt: skip
    r = cli(*args)
    if starts:
        assert r.code == 0, r.err
    else:
        assert r.code == 2 and r.json()["field"] == "--gpu"
        assert "does not support NVFP4" in r.json()["error"]
    dense = ("capacity", "--preset", "llama-3.1-8b", "--gpu", gpu, "--weight-dtype", "nvfp4",
             "--engine", "sglang", "--engine-version", version, "--json")  # fmt: skip
    assert cli(*dense).code == 0
    vllm = ("capacity", "--preset", "deepseek-v3", "--gpu", gpu, "--tp", "8", "--weight-dtype",
            "nvfp4", "--json")  # fmt: skip
    assert cli(*vllm).code == 0


def test_a_logged_fraction_past_floats_range_is_one_bad_figure() -> None:
    """A log whose gpu_memory_utilization is an integer too large for a float (a fuzzed
    line; seed 5903) is refused naming the setting, not an OverflowError."""
    from planner.errors import InputError
    from planner.sources.startup_log import parse_startup_log

    huge = "9" * 400
    with pytest.raises(InputError, match=r"gpu_memory_utilization='9999.*is not a valid float"):
        parse_startup_log(
            f"non-default args: {{'model': 'm', 'gpu_memory_utilization': {huge}}}\n"
            "Available KV cache memory: 1.00 GiB\n",
            "x.log",
            require_tokens=False,
        )


def test_vllm_prefix_caching_default_by_release_and_model() -> None:
    """vLLM's V1 caches prefixes unless told not to, hybrid models (Mamba / linear attention)
    from 0.26 only; V0 never unless asked. Where a hybrid model runs with it, the plan says how
    it keeps the Mamba states (test_vllm_hybrid_prefix_caching_holds_more_state_blocks)."""
    hybrid = spec_of(str(MODELS / "Qwen--Qwen3-Next-80B-A3B-Thinking" / "config.json"))
    dense = spec_of(str(MODELS / "meta-llama--Llama-3.1-8B-Instruct" / "config.json"))
    on = vllm.prefix_caching_on
    assert on(dense, (0, 8, 0), "v1", None) and not on(dense, (0, 6, 4), "v0", None)
    assert not on(hybrid, (0, 25, 0), "v1", None) and on(hybrid, (0, 26, 0), "v1", None)
    assert on(hybrid, (0, 14, 0), "v1", True) and not on(dense, (0, 34, 0), "v1", False)
    gpu = find_gpu("h200")
    note = "prefix caching on a hybrid model"

    def notes(version: str, stated: bool | None) -> list[str]:
        settings = vllm.VllmSettings(
            version=version, tensor_parallel_size=2, enable_prefix_caching=stated
        )
        return vllm.predict(hybrid, gpu, settings).notes

    assert any(note in n for n in notes("0.34.0", None))
    assert not any(note in n for n in notes("0.34.0", False))
    assert not any(note in n for n in notes("0.25.0", None))
    assert any(note in n for n in notes("0.25.0", True))


def test_vllm_hybrid_prefix_caching_holds_more_state_blocks() -> None:
    """With prefix caching on, vLLM keeps a hybrid model's states in "align" mode: each request
    holds 2 state blocks in every Mamba / linear-attention KV-cache group (3 where the layers
    export a prefill checkpoint: Mamba-2 mixers from 0.32, Gated DeltaNet from 0.33 under
    FlashInfer's prefill, on NVIDIA), not 1; the Mamba-2 family ran "all" mode before 0.28: a
    state block for every block of context, the block a multiple of the Mamba chunk. Fewer
    requests fit: the logged concurrency is the blocks over one request's."""
    nxt = spec_of(str(MODELS / "Qwen--Qwen3-Next-80B-A3B-Thinking" / "config.json"))
    nano = spec_of(str(MODELS / "nvidia--NVIDIA-Nemotron-3-Nano-30B-A3B-BF16" / "config.json"))
    mode, states = vllm.mamba_cache_mode, vllm.mamba_state_blocks
    h200, mi300x = find_gpu("h200"), find_gpu("mi300x")
    assert mode(nxt, (0, 19, 0), "v1", True) is None  # before the modes
    assert mode(nxt, (0, 26, 0), "v1", None) == "align"
    assert mode(nxt, (0, 26, 0), "v1", False) == "none"
    assert mode(nano, (0, 26, 0), "v1", None) == "all"
    assert mode(nano, (0, 28, 0), "v1", None) == "align"
    assert [states(nxt, (0, v, 0), h200, "align") for v in (30, 32, 33)] == [2, 2, 3]
    assert states(nxt, (0, 34, 0), mi300x, "align") == 2  # AMD runs its own GDN prefill
    kimi = nxt.model_copy(update={"architecture": "KimiLinearForCausalLM"})  # not Qwen's GDN
    assert states(kimi, (0, 34, 0), h200, "align") == 2
    assert [states(nano, (0, v, 0), h200, "align") for v in (31, 32)] == [2, 3]
    assert states(nxt, (0, 34, 0), h200, "none") == 1
    assert states(nano, (0, 26, 0), h200, "all") is None  # one a block of context

    def plan(version: str, stated: bool | None) -> EnginePrediction:
        settings = vllm.VllmSettings(
            version=version, tensor_parallel_size=2, enable_prefix_caching=stated
        )
        return vllm.predict(nxt, h200, settings)

    off, on = plan("0.32.0", False), plan("0.32.0", None)
    assert off.num_gpu_blocks == on.num_gpu_blocks  # the same pool
    # Qwen3-Next's 36 Gated DeltaNet layers make 3 groups beside its 12 attention layers'
    assert on.blocks_per_request - off.blocks_per_request == 3 * (2 - 1)
    assert on.max_concurrency == pytest.approx(on.num_gpu_blocks / on.blocks_per_request)
    assert on.kv_cache_tokens < off.kv_cache_tokens
    assert any("'align' mode, 2 state blocks a request" in n for n in on.notes)
    assert not any("'align'" in n for n in off.notes)
    # Nemotron-3-Nano by hand: a Mamba-2 layer's state is its conv state (64 x 64 + 2 x 8 x
    # 128) x 3 in bf16 and SSM state 64 x 64 x 128 in fp32 (its mamba_ssm_cache_dtype), 2,084
    # tokens of an attention layer's 2 KV heads x (128 + 128) x 2 bytes; "all" raises the block
    # to a multiple of its 128-token chunk (2,176), "align" (0.28) of 16 (2,096). Its 6
    # attention and 23 Mamba layers make 1 + 4 groups; at 8,192 tokens "all" holds 4 blocks in
    # each, "align" 2 state blocks in each Mamba group.
    state = (64 * 64 + 2 * 8 * 128) * 3 * 2 + 64 * 64 * 128 * 4
    tokens = -(-state // (2 * 256 * 2))
    assert tokens == 2084
    nano_all = vllm.predict(nano, h200, vllm.VllmSettings(version="0.26.0", max_model_len=8192))
    nano_align = vllm.predict(nano, h200, vllm.VllmSettings(version="0.28.0", max_model_len=8192))
    assert nano_all.settings["block_size"] == 128 * -(-tokens // 128) == 2176
    assert nano_align.settings["block_size"] == 16 * -(-tokens // 16) == 2096
    assert nano_all.blocks_per_request == 5 * -(-8192 // 2176) == 20
    assert nano_align.blocks_per_request == -(-8192 // 2096) + 4 * 2 == 12
    assert any("'all' mode" in n and "2,176-token block" in n for n in nano_all.notes)
    assert not any("an estimate" in n for n in nano_all.notes)


def test_sglang_disable_cuda_graph_leaves_the_reserve_by_release() -> None:
    """--disable-cuda-graph: up to 0.5.13 SGLang's reserve counts the graphs anyway; 0.5.14
    stops counting the prefill graphs, 0.5.15 the decode graphs too (H100, chunk 8,192, decode
    graphs to 256: 512 + 1.5 x 8,192 + 1,024 / 8 MiB of base, + 2 x 256 for decode graphs, + 8
    MiB per prefill capture size), and the plan says its steps are launched from the host."""
    mib = find_gpu("h100").memory_bytes_nvml // 2**20
    sizes = sglang.prefill_capture_sizes(8192)
    base = 512 + 1.5 * 8192 + 1024 / 8

    def fraction(version: tuple[int, int, int], graphs: bool) -> float:
        case = sglang.ReserveCase(
            version=version, gpu_mem_mib=mib, chunked=8192, decode_bs=256, graphs=graphs
        )
        return sglang.default_mem_fraction(case)

    def expect(reserved: float) -> float:
        return round((mib - reserved) / mib, 3)

    full = expect(base + 2 * 256 + 8 * sizes)
    for version in ((0, 5, 13), (0, 5, 14), (0, 5, 15), (0, 5, 23)):
        assert fraction(version, graphs=True) == full
    assert fraction((0, 5, 13), graphs=False) == full
    assert fraction((0, 5, 14), graphs=False) == expect(base + 2 * 256)
    assert fraction((0, 5, 15), graphs=False) == fraction((0, 5, 23), graphs=False)
    assert fraction((0, 5, 23), graphs=False) == expect(base)
    assert expect(base) > full  # a larger pool without the graphs' reserve


def test_sglang_prefill_graphs_by_release_card_and_layout() -> None:
    """SGLang replays its prompt steps in prefill graphs from 0.5.10 on CUDA, up to its chunk
    (2,048 tokens with an MLA backend); before 0.5.10, on AMD, under DP attention before 0.5.17
    and with an MoE all-to-all backend (any before 0.5.17, all but DeepEP after) it launches
    them from the host, which the step model floors at the host's launches."""
    from planner.api.bench_instance import engine_graphs

    def prefill(**kw: object) -> int:
        return int(str(sglang_plan(context_length=8192, **kw).settings["prefill_graph_max_tokens"]))

    assert prefill(version="0.5.9") == 0
    assert prefill(version="0.5.10") == 8192  # the H100's chunk, as its reserve counts them
    assert prefill(version="0.5.23", chunked_prefill_size=4096) == 4096
    assert prefill(version="0.5.13", gpu="mi300x") == 0
    dsv2 = str(MODELS / "deepseek-ai--DeepSeek-V2-Lite" / "config.json")
    assert prefill(version="0.5.13", model=dsv2) == 2048
    assert prefill(version="0.5.13", model=dsv2, tp_size=2, attn_dp_size=2) == 0
    assert prefill(version="0.5.23", model=dsv2, tp_size=2, attn_dp_size=2) == 2048
    moe = str(MODELS / "Qwen--Qwen3-30B-A3B" / "config.json")
    assert prefill(version="0.5.15", model=moe, tp_size=2) == 8192
    for version, kept in (("0.5.15", 0), ("0.5.23", 8192)):
        deepep = prefill(version=version, model=moe, tp_size=2, moe_a2a_backend="deepep")
        assert deepep == kept, version
    # DeepSeek-V3 prefills on TensorRT-LLM's MLA kernels on a B200, which a graph would
    # replace with FlashAttention's: from 0.5.15 SGLang captures none there
    r1 = str(MODELS / "deepseek-ai--DeepSeek-R1" / "config.json")
    assert prefill(version="0.5.23", model=r1, gpu="h200", tp_size=8) == 2048
    assert prefill(version="0.5.23", model=r1, gpu="b200", tp_size=8) == 0
    # the simulator's graphs: decode batches by --cuda-graph-max-bs, prompt steps by these
    graphs = engine_graphs("sglang", sglang_plan(version="0.5.13", context_length=8192))
    assert not graphs.eager(256, 0) and graphs.eager(257, 0)
    assert not graphs.eager(8000, 8000) and graphs.eager(8193, 8193)
    old = engine_graphs("sglang", sglang_plan(version="0.5.9", context_length=8192))
    assert old.eager(300, 300) and not old.eager(256, 0)


def test_a_decoding_request_holds_its_sliding_windows_not_the_start_checks_span() -> None:
    """vLLM V1 frees a sliding-window group's blocks behind the window, so a decoding request
    of Gemma-3-27B holds 17 blocks of 64 tokens (cdiv(1,023, 64) + 1) in each of its 6
    sliding groups; the start check counts each window with a step's tokens beside it
    (cdiv(min(1,023 + 8,192, L), 64) + 1). At 2,000 tokens: 32 + 6 x 17 held, 32 + 6 x 33
    checked; the plan's sequences at the mean are the pool over the held count."""
    from planner.core.serve import sequences_held

    gemma = spec_of(str(MODELS / "google--gemma-3-27b-it"))
    settings = vllm.VllmSettings(max_model_len=32768, tensor_parallel_size=2)
    p = vllm.predict(gemma, find_gpu("h200"), settings)
    assert p.settings["max_num_batched_tokens"] == 8192 and p.settings["block_size"] == 64
    assert vllm.request_blocks(gemma, p, 2000) == 32 + 6 * 17
    assert vllm.start_blocks(gemma, p, 2000) == 32 + 6 * 33
    assert sequences_held(gemma, p, 2000) == p.usable_blocks // (32 + 6 * 17)


def test_vllm_runs_llama4_chunked_layers_as_full_attention_from_0_10_1() -> None:
    """From 0.10.1 vLLM turns its hybrid KV cache manager off for chunked-local attention (a
    latency regression), so Llama-4-Scout's 36 chunked layers hold every token as its 12 full
    ones do: one group of 48 layers, 64 tokens x 48 layers x 2 KV heads a GPU at TP 4 x (128 +
    128) x 2 B a block, 2,048 blocks a 131,072-token request. 0.10.0 kept the 8,192-token
    chunks apart: 4 groups of 12 layers."""
    scout = resolve_model("llama-4-scout", None, None)
    h100 = find_gpu("h100")

    def plan(version: str) -> EnginePrediction:
        settings = vllm.VllmSettings(
            version=version, tensor_parallel_size=4, max_model_len=131072, block_size=64
        )
        return vllm.predict(scout, h100, settings)

    old, new = plan("0.10.0"), plan("0.34.0")
    assert old.num_kv_groups == 4 and new.num_kv_groups == 1
    assert new.bytes_per_block == 64 * 48 * 2 * 256 * 2
    assert new.blocks_per_request == 131072 // 64
    assert any("hybrid KV cache manager off" in n for n in new.notes)
    assert not any("hybrid KV cache manager off" in n for n in old.notes)
    # the plan's held blocks and the simulator's pool read the same unified layout
    assert vllm.request_blocks(scout, new, 2000) == -(-2000 // 64)
    assert vllm.grouped_pool(scout, new) is None


def test_a_kv_connector_turns_vllms_hybrid_manager_off_unless_it_supports_it() -> None:
    """Any KV connector turned vLLM's hybrid KV cache manager off from 0.9.2 through 0.21; from
    0.22 only one that does not support it (NIXL and the native offloading connector do,
    LMCache's does not). Without it Gemma-3-27B's sliding layers hold every token in one
    group, and a Mamba hybrid does not start: refused, naming the flag that changes it."""
    gemma = spec_of(str(MODELS / "google--gemma-3-27b-it"))
    nano = spec_of(str(MODELS / "nvidia--NVIDIA-Nemotron-3-Nano-30B-A3B-BF16"))
    h200 = find_gpu("h200")

    def plan(model: ModelSpec, version: str, connector: str) -> EnginePrediction:
        settings = vllm.VllmSettings(
            version=version, tensor_parallel_size=2, max_model_len=32768, kv_connector=connector
        )
        return vllm.predict(model, h200, settings)

    groups = {
        (version, connector): plan(gemma, version, connector).num_kv_groups
        for version in ("0.21.0", "0.22.0", "0.34.0")
        for connector in ("NixlConnector", "LMCacheConnectorV1")
    }
    assert groups == {
        ("0.21.0", "NixlConnector"): 1,
        ("0.21.0", "LMCacheConnectorV1"): 1,
        ("0.22.0", "NixlConnector"): 7,
        ("0.22.0", "LMCacheConnectorV1"): 1,
        ("0.34.0", "NixlConnector"): 7,
        ("0.34.0", "LMCacheConnectorV1"): 1,
    }
    unified = plan(gemma, "0.34.0", "LMCacheConnectorV1")
    assert unified.blocks_per_request == 32768 // 64  # every layer holds every token
    assert any("LMCacheConnectorV1 KV connector" in n for n in unified.notes)
    with pytest.raises(InputError) as old:
        plan(nano, "0.21.0", "NixlConnector")
    assert old.value.field == "--engine-version" and "0.22" in str(old.value)
    with pytest.raises(InputError) as lmcache:
        plan(nano, "0.34.0", "LMCacheConnectorV1")
    assert lmcache.value.field == "--kv-transfer-config"
    assert plan(nano, "0.34.0", "NixlConnector").num_kv_groups == 5
