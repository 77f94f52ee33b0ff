"""How the public-row benchmarks pose a row they have not seen (benchmarks/rows.py): the
catalog card for its GPU, the shipped config for its checkpoint, the server settings it states."""

from __future__ import annotations

import json
import sys
from collections.abc import Callable
from pathlib import Path

import pytest
from helpers import MODELS, Result

from planner.errors import PlannerError

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "benchmarks"))
from rows import catalog_gpu, checkpoint_config, engine_settings, sglang_fields, vllm_fields

Cli = Callable[..., Result]


def vllm_random_row(model: str, gpu: str, tp: int, concurrency: int) -> dict[str, object]:
    """A vllm bench serve row of `model` at TP `tp` on as many of `gpu`: 1,000 / 100 random
    tokens, `concurrency` clients, vLLM 0.12.0."""
    return {
        "model": model,
        "gpu_norm": gpu,
        "gpu_count": tp,
        "tp": tp,
        "engine": "vllm",
        "engine_version": "0.12.0",
        "workload": {
            "dataset": "random (vllm bench serve)",
            "input_len": 1000,
            "output_len": 100,
            "concurrency": concurrency,
        },
    }


@pytest.mark.parametrize(
    ("text", "count"),
    [
        ("8x H200", 8),
        ("8xMI300X", 8),
        ("MI300X x 8", 8),
        ("4*A100", 4),
        ("NVIDIA HGX B200 (8 GPUs)", 8),
        ("MI300X", None),  # its X is not a count
        ("NVIDIA H100 80GB HBM3", None),
        ("GB200 NVL72", None),  # the rack's NVLink domain, not a count of cards
    ],
)
def test_the_count_of_cards_a_gpu_name_states(text: str, count: int | None) -> None:
    from planner.sources.presets import card_count

    assert card_count(text) == count


@pytest.mark.parametrize(
    ("short", "full", "card"),
    [
        ("MI355X", None, "mi355x"),
        (None, "AMD Instinct MI350X (288 GB)", "mi350x"),
        ("L20", None, "l20"),
        ("B300", None, "b300-sxm-288gb"),
        ("RTX 4090", None, "rtx-4090"),
        (None, "NVIDIA H200 NVL (PCIe)", "h200-nvl-141gb"),
        (None, "NVIDIA H100 80GB HBM3 (SXM5)", "h100-sxm5-80gb"),
        # a description in the words `--gpu` reads
        (None, "NVIDIA H100 SXM5 80GB", "h100-sxm5-80gb"),
        (None, "NVIDIA A100 80GB SXM4", "a100-sxm4-80gb"),
        # a card the catalog does not hold is not taken for its nearest name
        (None, "NVIDIA H100 64GB HBM2e (MareNostrum 5)", None),
        # nor for a card whose name it begins with (the catalog's NVIDIA A10)
        (None, "NVIDIA A100-80G (x8 A100-80G server)", None),
        ("Foo", "Bar", None),
        # a count of cards stated with the name is not part of it
        (None, "8x AMD MI355X", "mi355x"),
        ("8xH100", None, "h100-sxm5-80gb"),
        ("H100 x8", None, "h100-sxm5-80gb"),
        ("MI300X x 8", None, "mi300x"),
        (None, "NVIDIA HGX B200 (8 GPUs)", "b200-sxm-180gb"),
        # the system a chip ships in
        (None, "NVIDIA DGX Spark", "gb10"),
    ],
)
def test_a_rows_gpu_is_the_catalog_card_it_names(
    short: str | None, full: str | None, card: str | None
) -> None:
    assert catalog_gpu(short, full, {}) == card


@pytest.mark.parametrize(
    ("short", "full", "card"),
    [
        # a table's B200 is not the B200 inside "GB200", nor its H100 an H100 NVL
        ("GB200", "NVIDIA GB200 NVL72", "gb200-per-gpu"),
        (None, "NVIDIA GB300 NVL72 (Blackwell Ultra)", "gb300-per-gpu"),
        (None, "NVIDIA H100 NVL (94 GB)", "h100-nvl-94gb"),
        ("H100", "NVIDIA H100 80GB HBM3", "h100-sxm5-80gb"),
        # a table name standing as a whole word of the description, where nothing else names it
        (None, "8x MI300X (OAM)", "mi300x"),
        # ... or of a short name with more words in it
        ("B200 (HGX)", None, "b200-sxm-180gb"),
        # the table's card yields to the one of its chip the description names or sizes
        ("GH200", "NVIDIA GH200 Grace Hopper Superchip 144GB", "gh200-144gb"),
        ("GH200", "NVIDIA GH200 Grace Hopper Superchip 96GB", "gh200-96gb"),
        ("H100", "NVIDIA H100 PCIe 80GB", "h100-pcie-80gb"),
        # a size that names the chip's cards of both form factors: the table card's form's
        ("A100", "NVIDIA A100 40GB", "a100-sxm4-40gb"),
        ("A100", "NVIDIA A100 80GB PCIe", "a100-pcie-80gb"),
        # a size no card of the chip has keeps the table's card, another chip's name too
        ("B200", "NVIDIA B200 192GB", "b200-sxm-180gb"),
        ("B200", "NVIDIA GB200", "b200-sxm-180gb"),
    ],
)
def test_a_rows_gpu_is_read_whole_word_beside_the_benchmarks_table(
    short: str | None, full: str | None, card: str
) -> None:
    import e2e

    assert catalog_gpu(short, full, e2e.GPUS) == card


@pytest.mark.parametrize(
    ("name", "folder", "weights"),
    [
        ("openai/gpt-oss-120b", "openai--gpt-oss-120b", None),
        (
            "RedHatAI/Llama-3.3-70B-Instruct-FP8-dynamic",
            "meta-llama--Llama-3.3-70B-Instruct",
            "fp8",
        ),
        ("RedHatAI/DeepSeek-R1-0528-FP4", "deepseek-ai--DeepSeek-R1", "nvfp4"),
        ("meta-llama/Meta-Llama-3.1-70B-Instruct", "meta-llama--Llama-3.1-70B-Instruct", None),
        # an FP8 export whose base ships its own FP8 checkpoint takes that config as it is
        ("RedHatAI/Qwen3-32B-FP8-dynamic", "Qwen--Qwen3-32B-FP8", None),
        # a release tag after the format, AMD's fp8-activation gpt-oss, w4a16 int4
        ("amd/DeepSeek-R1-0528-MXFP4-Preview", "deepseek-ai--DeepSeek-R1", "mxfp4"),
        ("RedHatAI/DeepSeek-R1-0528-NVFP4-v2", "deepseek-ai--DeepSeek-R1", "nvfp4"),
        # AMD's fp8-activation gpt-oss: a Quark config derived from OpenAI's
        ("amd/gpt-oss-120b-w-mxfp4-a-fp8", "amd--gpt-oss-120b-w-mxfp4-a-fp8", None),
        (
            "RedHatAI/Llama-3.3-70B-Instruct-quantized.w4a16",
            "meta-llama--Llama-3.3-70B-Instruct",
            "int4",
        ),
        # a release that keeps an earlier one's architecture
        ("nvidia/DeepSeek-V3.1-FP8", "deepseek-ai--DeepSeek-V3", "fp8"),
        # an export shipped here as itself: its own config, its quantization read beside it
        ("nvidia/DeepSeek-V3.1-NVFP4", "nvidia--DeepSeek-V3.1-NVFP4", None),
        ("deepseek-ai/DeepSeek-R1-Distill-Llama-70B", "meta-llama--Llama-3.3-70B-Instruct", None),
        ("deepseek-ai/DeepSeek-R1-Distill-Qwen-32B", "Qwen--Qwen2.5-32B", None),
        ("meta-llama/Llama-2-70b-chat-hf", "meta-llama--Llama-2-70b-hf", None),
        ("deepseek-ai/DeepSeek-V3.2-Exp", "deepseek-ai--DeepSeek-V3.2", None),
        # Qwen's own FP8 exports are block-scaled: the base's config with that quantization
        ("Qwen/Qwen3-Next-80B-A3B-Instruct-FP8", "Qwen--Qwen3-Next-80B-A3B-Instruct-FP8", None),
        # another publisher's FP8 of a Qwen model: an fp8 of unknown scaling, posed online
        ("RedHatAI/Qwen3-Next-80B-A3B-Instruct-FP8", "Qwen--Qwen3-Next-80B-A3B-Thinking", "fp8"),
        # Meta's FP8 export of a Llama 4 is not the Llama 3 mixed precision: posed at fp8
        (
            "meta-llama/Llama-4-Scout-17B-16E-Instruct-FP8",
            "meta-llama--Llama-4-Scout-17B-16E-Instruct",
            "fp8",
        ),
        ("acme/Unknown-Model-FP8", None, None),
    ],
)
def test_a_quantized_export_is_posed_on_its_base_config(
    name: str, folder: str | None, weights: str | None
) -> None:
    got, dtype = checkpoint_config(name, MODELS)
    assert (got.name if got else None, dtype) == (folder, weights)


@pytest.mark.parametrize(
    ("name", "layers", "context", "weights"),
    [
        ("meta-llama/Meta-Llama-3-70B-Instruct", 80, 8192, None),
        ("meta-llama/Meta-Llama-3-8B", 32, 8192, None),
        ("neuralmagic/Meta-Llama-3-8B-Instruct-FP8", 32, 8192, "fp8"),
        ("Qwen/Qwen2.5-72B-Instruct", 80, 32768, None),
        ("Qwen/Qwen2.5-72B-Instruct-AWQ", 80, 32768, "int4"),
        ("Qwen/Qwen2-7B-Instruct", 28, 32768, None),
        ("Qwen/Qwen2-72B", 80, 131072, None),
        ("mistralai/Mistral-7B-Instruct-v0.2", 32, 32768, None),
        ("Qwen/Qwen3-235B-A22B-Instruct-2507", 94, 262144, None),
        ("Qwen/Qwen3-30B-A3B-Thinking-2507-FP8", 48, 262144, None),
        ("Qwen/Qwen3-Coder-30B-A3B-Instruct", 48, 262144, None),
        ("Qwen/Qwen3-Coder-30B-A3B-Instruct-AWQ", 48, 262144, "int4"),
    ],
)
def test_a_checkpoint_is_posed_on_its_siblings_geometry_at_its_own_context(
    name: str, layers: int, context: int, weights: str | None
) -> None:
    """Llama 3 on Llama 3.1's config of its size at 8,192 tokens without 3.1's RoPE scaling,
    Qwen2.5's Instruct models on their base's at 32,768, Qwen2 on Qwen2.5's, Mistral-7B v0.2 on
    v0.3's with its 32,000-token vocabulary, Qwen3's 2507 and Coder releases on Qwen3's at
    262,144 (their own config.json files, their model cards), so the engines start at the
    context, and hold the weights, they would; Qwen's own FP8 export of one on the sibling's
    own FP8 release (block-scaled)."""
    from planner.sources.models import resolve_model

    got, dtype = checkpoint_config(name, MODELS)
    assert got is not None and dtype == weights
    config = json.loads((got / "config.json").read_text())
    assert config["max_position_embeddings"] == context
    if "llama" in name.lower():
        assert config["rope_scaling"] is None
    if "mistral" in name.lower():  # v0.3 extended v0.2's vocabulary
        assert config["vocab_size"] == 32000 and config["sliding_window"] is None
    spec = resolve_model(None, str(got))
    assert (spec.num_layers, spec.max_context_tokens) == (layers, context)
    if name.endswith("-FP8") and weights is None:  # the sibling's own FP8 release
        assert spec.weight_dtype == "fp8" and spec.fp8_block_scaled
    # an Instruct model whose own config is here is posed on it
    own_folder, _ = checkpoint_config("Qwen/Qwen2.5-7B-Instruct-AWQ", MODELS)
    assert own_folder is not None and own_folder.name == "Qwen--Qwen2.5-7B-Instruct"
    # the siblings keep their own context
    for own, length in (("meta-llama/Llama-3.1-8B-Instruct", 131072), ("Qwen/Qwen2.5-72B", 131072)):
        folder, _ = checkpoint_config(own, MODELS)
        assert folder is not None and resolve_model(None, str(folder)).max_context_tokens == length


def test_nvidias_fp4_exports_are_posed_on_its_export_of_the_same_architecture() -> None:
    """nvidia/...-FP4 exports whose config is not here take NVIDIA's NVFP4 export of the same
    model or architecture (its excluded layers and FP8 KV scale), not the base config with
    every linear layer in FP4; another publisher's FP4 export keeps the base config."""
    from planner.sources.models import resolve_model

    for name, folder in (
        ("nvidia/DeepSeek-R1-0528-FP4-v2", "nvidia--DeepSeek-V3.1-NVFP4"),
        ("nvidia/DeepSeek-V3-0324-FP4", "nvidia--DeepSeek-V3.1-NVFP4"),
        ("nvidia/Qwen3-235B-A22B-FP4", "nvidia--Qwen3-235B-A22B-NVFP4"),
    ):
        got, weights = checkpoint_config(name, MODELS)
        assert (got.name if got else None, weights) == (folder, None)
        # its FP8 KV cache scale and quantization read from the export's own files
        spec = resolve_model(None, str(got))
        assert spec.weight_dtype == "nvfp4"
    base, weights = checkpoint_config("RedHatAI/DeepSeek-R1-0528-NVFP4", MODELS)
    assert base is not None and (base.name, weights) == ("deepseek-ai--DeepSeek-R1", "nvfp4")


def test_a_rows_server_settings_read_in_either_engines_spelling() -> None:
    row = {
        "engine_config": {"max_num_seqs": "256", "max_num_batched_tokens": "default"},
        "notes": "Server flags: --mem-fraction-static 0.85 --chunked-prefill-size -1 "
        "--page-size 64 --context-length 32768 --ep-num-redundant-experts 32.",
    }
    # "default" and SGLang's -1 (off) leave the engine's own value; the config wins over prose
    assert engine_settings(row) == {
        "max_num_seqs": 256,
        "memory_fraction": 0.85,
        "block_size": 64,
        "context_tokens": 32768,
        "ep_num_redundant_experts": 32,
    }
    # a bare flag before a valued one does not take that flag for its value
    bare = {
        "notes": "--enable-dp-attention --ep-num-redundant-experts 32 --enable-two-batch-overlap"
    }
    assert engine_settings(bare) == {"ep_num_redundant_experts": 32}


def test_a_rows_sglang_moe_flags_are_read_from_its_notes() -> None:
    notes = "Server flags: --tp 16 --moe-a2a-backend deepep --enable-two-batch-overlap."
    assert sglang_fields({"notes": notes}) == {
        "moe_a2a_backend": "deepep",
        "enable_two_batch_overlap": True,
    }
    # a longer flag is not this one; an unknown backend is left to the engine's default
    assert sglang_fields({"notes": "--enable-two-batch-overlap-x --moe-a2a-backend pplx"}) == {}
    assert sglang_fields({"notes": "--moe-a2a-backend mori"}) == {"moe_a2a_backend": "mori"}
    # the large-EP recipes' dense-MLP and lm_head flags, and the largest decode graph
    recipe = {"notes": "--moe-dense-tp-size 1 --enable-dp-lm-head --cuda-graph-max-bs 128"}
    assert sglang_fields(recipe) == {"enable_dp_lm_head": True}
    assert engine_settings(recipe) == {"moe_dense_tp_size": 1, "cuda_graph_max_bs_decode": 128}
    # a run without the radix cache serves no shared prefix from it
    assert sglang_fields({"notes": "--disable-radix-cache --tp 8"}) == {"disable_radix_cache": True}


def test_a_vllm_rows_switches_and_stream_interval_are_posed_as_its_line() -> None:
    # --async-scheduling and its negation, from the notes or the engine_config, and a stream
    # interval either engine takes, go into the line's own fields
    import e2e

    assert vllm_fields({"notes": "vllm serve m --async-scheduling --tp 8"}) == {
        "async_scheduling": True
    }
    assert vllm_fields({"notes": "--no-async-scheduling"}) == {"async_scheduling": False}
    assert vllm_fields({"engine_config": {"async_scheduling": True}}) == {"async_scheduling": True}
    assert vllm_fields({"notes": "--async-scheduling-x"}) == {}
    # prefix caching as a dstack sweep's engine_config states it, or a --no- flag in the notes
    off = {"engine_config": {"enable_prefix_caching": "FALSE"}}
    assert vllm_fields(off) == {"enable_prefix_caching": False}
    assert vllm_fields({"notes": "--no-enable-prefix-caching"}) == {"enable_prefix_caching": False}
    row = vllm_random_row("meta-llama/Llama-3.1-8B-Instruct", "H100", 1, concurrency=4)
    row["notes"] = "vllm serve m --async-scheduling --stream-interval 10"
    kwargs, why = e2e.pose(row, MODELS)
    assert why is None
    assert kwargs["settings"]["extra"] == {"async_scheduling": True, "stream_interval": 10}
    # SGLang's own scheduler flags go on an SGLang row's line, and are no vLLM server's
    flags = " --max-prefill-tokens 32768 --scheduler-recv-interval 4"
    sglang_row = row | {"engine": "sglang", "engine_version": "0.5.13", "notes": flags}
    kwargs, why = e2e.pose(sglang_row, MODELS)
    assert why is None
    assert kwargs["settings"]["extra"] == {
        "max_prefill_tokens": 32768,
        "scheduler_recv_interval": 4,
    }
    kwargs, why = e2e.pose(row | {"notes": flags}, MODELS)
    assert why is None and "extra" not in kwargs["settings"]


def test_metas_fp8_export_keeps_attention_and_the_end_layers_in_bf16(cli: Cli) -> None:
    """meta-llama/...-FP8 is posed as Meta stores it (FBGEMM row-wise FP8 on the MLPs only):
    the planner sizes it to the byte and the vLLM line names the checkpoint's method."""
    from planner.core.step import step_time_for
    from planner.core.step.gemm import FLOPS_EFFICIENCY
    from planner.sources.models import resolve_model
    from planner.sources.presets import find_gpu

    folder, weights = checkpoint_config("meta-llama/Llama-3.1-405B-FP8", MODELS)
    assert folder is not None and weights is None
    base = resolve_model(None, str(MODELS / "meta-llama--Llama-3.1-405B"))
    meta = resolve_model(None, str(folder))
    # 124 of 126 MLPs (3 x 16,384 x 53,248 parameters each) drop from two bytes to one
    assert base.weights_bytes - meta.weights_bytes == 124 * 3 * 16_384 * 53_248
    assert meta.weight_dtype == "fp8-fbgemm"
    # what stays bf16 (every layer's Q, K, V, O and two MLPs) multiplies at the bf16 rate
    attention, mlp = 16_384 * (16_384 + 2 * 1_024) + 16_384 * 16_384, 3 * 16_384 * 53_248
    assert meta.plain_linear_params == 126 * attention + 2 * mlp
    gpu = find_gpu("h100")
    step = step_time_for(meta, gpu, tp=8, weight_dtype=meta.weight_dtype)
    plain = meta.plain_linear_params // 8
    table = 128_256 * 16_384 // 8  # an embedding matrix's share of one GPU (vocab-parallel)
    body = meta.params_active // 8 - 2 * table  # no GEMM over the input table or the lm_head
    # fp8 GEMMs reach 65/73 of the bf16 share of their rate on Hopper
    fp8_rate = gpu.fp8_dense_flops * FLOPS_EFFICIENCY * 0.65 / 0.73
    bf16_rate = gpu.bf16_dense_flops * FLOPS_EFFICIENCY
    prompt = 2 * 512 * ((body - plain) / fp8_rate + plain / bf16_rate) * 1e3
    assert step.gemm(512, sampled=0)[2] == pytest.approx(prompt, rel=1e-6)
    # 512 decode tokens each sample: the lm_head (bf16) for every one of them
    head = 2 * 512 * table / bf16_rate * 1e3
    assert step.gemm(512)[2] == pytest.approx(prompt + head, rel=1e-6)
    where = ("--model", str(folder), "--gpu", "h100", "--tp", "8", "--json")
    vllm = cli("capacity", *where).json()["flags"]["vllm"]
    assert vllm.endswith("--quantization fbgemm_fp8")
    assert cli("capacity", *where, "--quantization", "fbgemm_fp8").json()["flags"]["vllm"] == vllm
    # SGLang reads the method from the checkpoint: its line names none
    sglang = cli("capacity", *where, "--engine", "sglang").json()["flags"]["sglang"]
    assert "--quantization" not in sglang


def test_rocm_unfused_fp8_rescale_holds_three_fp32_copies_in_the_profile(cli: Cli) -> None:
    """vLLM's ROCm build before 0.7.3 rescales Meta's FBGEMM fp8 MLPs in fp32 outside the GEMM:
    while the second scale multiply writes, the GEMM's fp32 output and both products are live,
    12 bytes per element of the widest such linear, down_proj's whole hidden (16,384, above
    gate_up's 2 x 53,248 / 8 = 13,312). Unchunked, the profile runs max_model_len tokens, each
    holding them; 0.7.3's fused row-wise GEMM holds none, nor CUDA's CUTLASS kernels. Before
    0.6.4 the profile charges the allocator's segments: the output says to expect fewer blocks."""
    from planner.sources.models import resolve_model

    folder, _ = checkpoint_config("meta-llama/Llama-3.1-405B-FP8", MODELS)
    assert folder is not None
    assert resolve_model(None, str(folder)).rowwise_fp8_widest == (2 * 53_248, 16_384)
    where = ("--model", str(folder), "--tp", "8", "--context", "131072",
             "--no-enable-chunked-prefill", "--json")  # fmt: skip

    def engine(gpu: str, version: str) -> dict[str, object]:
        payload = cli("capacity", *where, "--gpu", gpu, "--engine-version", version).json()
        return dict(payload["engine"])

    unfused, fused = engine("mi300x", "0.7.2"), engine("mi300x", "0.7.3")
    delta = int(str(unfused["activation_peak_bytes"])) - int(str(fused["activation_peak_bytes"]))
    assert delta == 131_072 * 3 * 4 * 16_384
    assert int(str(unfused["num_gpu_blocks"])) < int(str(fused["num_gpu_blocks"]))

    def rescale_notes(payload: dict[str, object]) -> list[str]:
        notes = payload["notes"]
        assert isinstance(notes, list)
        return [str(n) for n in notes if "rescale" in str(n)]

    assert len(rescale_notes(unfused)) == 1 and not rescale_notes(fused)
    assert "fewer KV blocks" not in rescale_notes(unfused)[0]
    assert "fewer KV blocks" in rescale_notes(engine("mi300x", "0.6.3"))[0]
    assert not rescale_notes(engine("h200", "0.6.3"))


def test_amds_fp8_activation_gpt_oss_is_posed_as_a_quark_export_of_the_same_experts(
    cli: Cli,
) -> None:
    """amd/gpt-oss-120b-w-mxfp4-a-fp8 is OpenAI's experts re-exported by AMD Quark with fp8
    activations: the same bytes, the fp8 rate on AMD Instinct (OpenAI's own export multiplies
    in bf16 there), and SGLang takes it where it refuses OpenAI's MXFP4."""
    from planner.core.step import step_time_for
    from planner.sources.models import resolve_model
    from planner.sources.presets import find_gpu

    folder, weights = checkpoint_config("amd/gpt-oss-120b-w-mxfp4-a-fp8", MODELS)
    assert folder is not None and weights is None
    openai = resolve_model(None, str(MODELS / "openai--gpt-oss-120b"))
    amd = resolve_model(None, str(folder))
    assert (amd.weight_dtype, openai.weight_dtype) == ("mxfp4-quark-a8", "mxfp4")
    assert amd.weights_bytes == openai.weights_bytes
    assert amd.plain_linear_params == openai.plain_linear_params  # attention stays bf16
    mi355x = find_gpu("mi355x")
    assert step_time_for(amd, mi355x).flops_per_s == mi355x.fp8_dense_flops
    assert step_time_for(openai, mi355x).flops_per_s == mi355x.bf16_dense_flops
    where = ("--gpu", "mi300x", "--engine", "sglang", "--json")
    refused = cli("capacity", "--model", str(MODELS / "openai--gpt-oss-120b"), *where)
    assert refused.code == 2
    assert refused.json()["field"] == "--gpu"
    assert "not support mxfp4 computation" in refused.json()["error"]
    assert cli("capacity", "--model", str(folder), *where).code == 0
    gfx950 = ("--gpu", "mi355x", "--engine", "sglang", "--json")
    assert cli("capacity", "--model", str(MODELS / "openai--gpt-oss-120b"), *gfx950).code == 0


def test_a_row_on_a_dataset_not_modelled_is_posed_at_the_lengths_it_reported() -> None:
    import e2e

    row = {
        "engine": "vllm",
        "engine_family": "vllm",
        "model": "meta-llama/Llama-3.1-8B-Instruct",
        "gpu_norm": "H100",
        "gpu_count": 1,
        "tp": 1,
        "workload": {"dataset": "instructcoder", "concurrency": 8, "num_prompts": 100},
        "measured": {"total_input_tokens": 55_000, "total_output_tokens": 15_000, "completed": 100},
    }
    args, why = e2e.pose(row, MODELS)
    assert why is None
    assert (args["lengths"].prompt_len, args["lengths"].output_len) == (550, 150)
    del row["measured"]["total_input_tokens"]
    assert e2e.pose(row, MODELS)[1] == "dataset lengths not modelled (no mean lengths reported)"
    row["tp"] = None
    row["gpu_count"] = 8
    assert e2e.pose(row, MODELS)[1] == "layout not given for 8 GPUs"


def test_a_random_row_that_stopped_at_eos_is_posed_under_its_cap() -> None:
    import e2e

    row = {
        "engine": "sglang",
        "model": "meta-llama/Llama-3.1-8B-Instruct",
        "gpu_norm": "H100",
        "gpu_count": 1,
        "tp": 1,
        "workload": {
            "dataset": "random (vllm bench serve, default range, no --ignore-eos)",
            "input_len": 2048,
            "output_len": 2048,
            "concurrency": 32,
            "num_prompts": 500,
        },
        "measured": {"mean_output_tokens_per_request": 695.0, "completed_requests": 500},
    }
    args, why = e2e.pose(row, MODELS)
    assert why is None
    lengths = args["lengths"]
    # geometric stops at the run's mean, under the 2,048 tokens it asked for
    assert (lengths.output_len, lengths.output_mean) == (2048, 695.0)


def test_the_closed_loop_check_reads_a_rows_quoted_benchmark_summary() -> None:
    import closed_loop

    excerpt = (
        "run_id,workload,input_len,output_len,concurrency,num_prompts,output_throughput,"
        "tpot_p95_ms,ttft_p99_ms\nr,w,128,1024,4,50,547.85,7.02,25.13"
    )
    got = closed_loop.summary({"excerpt": excerpt})
    assert got is not None and (got["concurrency"], got["output_throughput"]) == ("4", "547.85")
    assert closed_loop.summary({"excerpt": "batch,step_ms\n8,12.5"}) is None


def test_a_rows_model_is_its_repo_id_before_any_note() -> None:
    """A repo id has no spaces: a note after one is not part of it; no name is no model."""
    from rows import model_reference

    noted = model_reference("meta-llama/Llama-3.1-70B-Instruct (FP8 via fp8)", MODELS)
    assert noted == (str(MODELS / "meta-llama--Llama-3.1-70B-Instruct"), None)
    assert model_reference("  ", MODELS) == (None, None)


def test_a_rows_engine_is_the_one_whose_scheduler_ran_it() -> None:
    """vLLM or SGLang wherever the row's engine or family names one; a stack whose model server
    is always vLLM (llm-d, AIBrix, Ray Serve LLM) is vLLM; a multi-backend one names none."""
    import e2e

    for engine, family in (
        ("vLLM (ROCm)", "vllm"),
        ("NVIDIA Dynamo (SGLang backend)", "sglang"),
        ("llm-d", "vllm"),
        ("AIBrix", "vllm"),
        ("Ray Serve LLM", "vllm"),
        ("Dynamo", "dynamo"),
        ("TensorRT-LLM", "tensorrt-llm"),
    ):
        assert e2e.engine_of({"engine": engine}) == family, engine


def test_a_step_time_rows_release_is_read_as_the_e2e_harness_reads_one() -> None:
    """The step-time harness reads a row's release as the e2e one does: the engine's number in
    an image tag, not the ROCm one beside it; a row naming none the release current on its run
    date where its source gives one, else the newest modelled (None)."""
    import step_time

    rocm = {"engine": "vllm", "engine_version": "rocm/vllm:rocm6.4.1_vllm_0.10.0_20250812"}
    assert step_time.engine_of(rocm) == ("vllm", (0, 10, 0))
    dated = {"engine": "sglang", "engine_version": "latest", "source": {"date": "2025-09-15"}}
    assert step_time.engine_of(dated) == ("sglang", (0, 5, 2))
    assert step_time.engine_of({"engine": "vllm", "source": "a README"}) == ("vllm", None)
    assert step_time.engine_of({"engine": "LMDeploy-TurboMind", "engine_version": "0.1.0"}) == (
        "lmdeploy",
        None,
    )


def test_a_step_time_row_is_read_from_the_fields_it_gives() -> None:
    """A row naming no TP ran one engine over its GPUs (TP = its GPU count) unless it names
    data parallelism; `batch_size` stands for `batch`; a row with a prompt and no output length
    decodes at its prompt."""
    import step_time

    row = {
        "model": "meta-llama/Llama-3.1-70B-Instruct",
        "gpu": "NVIDIA H100 80GB HBM3",
        "engine": "vllm",
        "engine_version": "0.10.1",
        "tp": 8,
        "gpu_count": 8,
        "batch": 16,
        "input_len": 2000,
        "output_len": 0,
    }
    tp8 = step_time.predict(row)
    assert tp8 is not None
    assert step_time.predict(row | {"tp": None}) == tp8
    assert step_time.predict(row | {"batch": None, "batch_size": 16}) == tp8
    assert step_time.predict({k: v for k, v in row.items() if k != "output_len"}) == tp8
    assert step_time.predict(row | {"tp": None, "dp": 8}) != tp8  # eight replicas of TP 1
    # a row without measured_ms is read from its raw figure in its unit
    assert step_time.measured_of({"raw_value": 0.0123, "raw_unit": "s"}) == pytest.approx(12.3)
    assert step_time.measured_of({"raw_value": "850", "raw_unit": "us"}) == pytest.approx(0.85)


def test_a_step_time_rows_kv_cache_is_the_one_its_engine_runs() -> None:
    """A row's KV bytes: fp8 where it says so in any spelling, or where the engine runs fp8 for
    `auto` (NVIDIA's ModelOpt FP8 export declares an FP8 cache: vLLM 0.14+, SGLang 0.5.3+);
    else 16 bits (an explicit bf16, an earlier release, another engine)."""
    import step_time

    from planner.sources.models import resolve_model
    from planner.sources.presets import find_gpu

    model = resolve_model(None, str(MODELS / "nvidia--Llama-3.1-70B-Instruct-FP8"))
    h100 = find_gpu("h100")
    for kv, engine, version, expected in (
        ("", "vllm", (0, 14, 0), 1),
        ("auto", "vllm", (0, 13, 0), 2),
        ("FP8 (e4m3)", "vllm", (0, 13, 0), 1),
        ("bf16", "vllm", (0, 14, 0), 2),
        ("", "sglang", (0, 5, 2), 2),
        ("", "sglang", (0, 5, 3), 1),
        ("", "lmdeploy", None, 2),
    ):
        row = {"kv_dtype": kv}
        assert step_time.kv_dtype_bytes(row, model, h100, engine, version) == expected, kv


def test_a_row_without_a_release_is_posed_at_the_one_current_on_its_run_date() -> None:
    """An image's `latest` tag ran the newest release built before the run: SGLang 0.5.2
    (built 2025-09-11) for a run on 2025-09-15, not the newest modelled; a row that names its
    release keeps it, one dated to the month only the release of the month's middle, and one
    without a run date the engine's newest."""
    import e2e

    row = {
        "engine": "sglang",
        "engine_family": "sglang",
        "engine_version": "lmsysorg/sglang:latest (Sep 2025; exact version not recorded)",
        "source": {"date": "2025-09 (run dates 20250915)"},
        "model": "meta-llama/Llama-3.1-8B-Instruct",
        "gpu_norm": "H100",
        "gpu_count": 1,
        "tp": 1,
        "workload": {"dataset": "random", "input_len": 128, "output_len": 64, "concurrency": 4},
        "measured": {},
    }
    assert e2e.run_date(row) == "2025-09-15"
    assert e2e.pose(row, MODELS)[0]["settings"]["version"] == "0.5.2"
    assert e2e.release_on("sglang", "2025-09-10") == "0.5.1"
    named = row | {"engine_version": "0.5.13"}
    assert e2e.pose(named, MODELS)[0]["settings"]["version"] == "0.5.13"
    # a precision given as one text names the weights
    assert e2e.pose(named | {"precision": "FP8"}, MODELS)[0]["settings"]["weight_dtype"] == "fp8"
    # a version field naming no release leaves it to the image's tag, whose ROCm or CUDA
    # number beside the engine's is not the engine's
    tagged = row | {"engine_image": "lmsysorg/sglang:v0.5.13.post1-rocm720-mi30x"}
    assert e2e.pose(tagged, MODELS)[0]["settings"]["version"] == "0.5.13"
    # a nightly image's build date, not the source's, dates the engine it ran
    nightly = row | {"engine_image": "rocm/sgl-dev:nightly_main_20250910"}
    assert e2e.run_date(nightly) == "2025-09-10"
    assert e2e.pose(nightly, MODELS)[0]["settings"]["version"] == "0.5.1"
    assert e2e.engine_release({"engine_image": "rocm/vllm:rocm6.3.1_vllm_0.8.3_20250415"}) == (
        "0.8.3"
    )
    assert e2e.engine_release({"engine_version": "vllm/vllm-openai:nightly-cu12.8"}) is None
    # a serving stack's version is its own, not the engine's inside it: a Dynamo row is posed
    # at the vLLM release current on its run date unless its text names vLLM's own
    dynamo = row | {"engine": "dynamo + vllm", "engine_family": "vllm", "engine_version": "0.4.1"}
    dynamo["source"] = {"date": "2025-10-15"}
    assert e2e.engine_release(dynamo, "vllm") is None
    assert e2e.pose(dynamo, MODELS)[0]["settings"]["version"] == "0.11.0"
    both = dynamo | {"engine_version": "dynamo 0.4.1 (vllm 0.10.1.1)"}
    assert e2e.pose(both, MODELS)[0]["settings"]["version"] == "0.10.1"
    llmd = {"engine": "llm-d", "engine_image": "ghcr.io/llm-d/llm-d:v0.2.0"}
    assert e2e.engine_release(llmd, "vllm") is None
    # a source dated to the month ran in the middle of it (the release then current)
    for month in ("2025-09", "Sep 2025", "September 2025 (blog)"):
        assert e2e.run_date({"source": {"date": month}}) == "2025-09-15"
        dated = row | {"source": {"date": month}}
        assert e2e.pose(dated, MODELS)[0]["settings"]["version"] == "0.5.2"
    undated = row | {"source": {"date": "2025"}}
    assert "version" not in e2e.pose(undated, MODELS)[0]["settings"]
    # vLLM's `latest` in October 2025 was a V1 release (0.11.0, uploaded 2025-10-04), not the
    # last V0 one
    vllm = row | {"engine": "vllm", "engine_family": "vllm", "engine_version": "latest"}
    vllm["source"] = {"date": "2025-10-15"}
    assert e2e.pose(vllm, MODELS)[0]["settings"]["version"] == "0.11.0"
    # a run that completed loaded its weights: a release named loosely that cannot load them
    # (gpt-oss's MXFP4 before vLLM 0.10.1) is posed at the first that can
    branch = vllm | {
        "engine_version": "PR branch (Aug 2025, ~v0.10.x)",
        "model": "openai/gpt-oss-20b",
    }
    assert e2e.pose(branch, MODELS)[0]["settings"]["version"] == "0.10.1"
    later = branch | {"engine_version": "0.10.2"}
    assert e2e.pose(later, MODELS)[0]["settings"]["version"] == "0.10.2"


@pytest.mark.parametrize(
    ("model", "text", "gpu", "weights"),
    [
        # a 16-bit checkpoint stated at fp8 or fp4 is re-quantized (online fp8, a variant)
        ("meta-llama/Llama-3.1-8B-Instruct", "FP8 (dynamic)", "H100", "fp8"),
        ("meta-llama/Llama-3.1-8B-Instruct", "fp4", "B200", "nvfp4"),
        ("meta-llama/Llama-3.1-8B-Instruct", "fp4", "MI355X", "mxfp4"),
        ("meta-llama/Llama-3.1-8B-Instruct", "int4 (AWQ)", "H100", "int4"),
        ("meta-llama/Llama-3.1-8B-Instruct", "bf16", "H100", None),
        # a checkpoint already in the stated format keeps its own
        ("openai/gpt-oss-120b", "mxfp4 (native)", "H100", None),
        ("deepseek-ai/DeepSeek-V3", "fp8", "H200", None),
    ],
)
def test_a_rows_stated_precision_poses_its_weights(
    model: str, text: str, gpu: str, weights: str | None
) -> None:
    import e2e

    row = {
        "engine": "vllm",
        "engine_version": "0.11.0",
        "model": model,
        "gpu_norm": gpu,
        "gpu_count": 8,
        "tp": 8,
        "precision": {"weights": text},
        "workload": {"dataset": "random", "input_len": 128, "output_len": 64, "concurrency": 4},
    }
    args, why = e2e.pose(row, MODELS)
    assert why is None
    assert args["settings"].get("weight_dtype") == weights


def test_a_row_is_posed_at_the_context_its_server_ran() -> None:
    """A row that states --max-model-len / --context-length is posed at it; one that does not,
    at the model's own maximum (the engines' default: Llama-3.1's 131,072), which with chunked
    prefill off is vLLM V0's batched-token budget too. On eight H100s vLLM 0.6.3 could not
    start with that budget (its profile run leaves no KV cache), so a run that completed set a
    smaller context: it is posed at 8,192. Eight MI300X start with it."""
    import e2e

    row = {
        "engine": "vllm",
        "engine_family": "vllm",
        "engine_version": "0.6.3",
        "model": "meta-llama/Llama-3.1-405B-FP8",
        "gpu_norm": "H100",
        "gpu_count": 8,
        "tp": 8,
        "precision": {"weights": "fp8"},
        "workload": {
            "dataset": "random",
            "input_len": 200,
            "output_len": 20,
            "request_rate": 4.0,
            "num_prompts": 16,
        },
        "engine_config": {"enable_chunked_prefill": "FALSE"},
        "measured": {},
    }
    assert e2e.stated_context(row) is None
    assert e2e.stated_context(row | {"notes": "vllm serve m --max-model-len 32768 -tp 8"}) == 32768
    assert e2e.stated_context(row | {"engine_config": {"context_length": "4096"}}) == 4096
    args, why = e2e.pose(row, MODELS)
    assert why is None and args["settings"]["context_tokens"] == 131_072
    h100 = e2e.predict(row, args)["deployment"]
    assert "--max-model-len 8192 " in h100["command"]
    assert h100["max_num_batched_tokens"] == 8192
    mi300x = row | {"gpu_norm": "MI300X"}
    got = e2e.predict(mi300x, e2e.pose(mi300x, MODELS)[0])["deployment"]
    assert "--max-model-len 131072 " in got["command"]
    assert got["max_num_batched_tokens"] == 131_072
    # a context the row states is kept, even where the engine refuses it
    stated = row | {"notes": "--max-model-len 131072"}
    with pytest.raises(PlannerError, match="would not start"):
        e2e.predict(stated, e2e.pose(stated, MODELS)[0])


def test_a_run_with_failed_requests_is_not_compared_on_throughput() -> None:
    """380 of 500 requests completed: the benchmark's throughput divides by a duration the
    failures' timeouts set, so only the completed requests' latencies are compared."""
    import e2e

    row = {
        "workload": {"num_prompts": 500},
        "measured": {
            "output_tokens_per_s_per_gpu": 1.9,
            "tpot_ms": {"median": 10.7},
            "ttft_ms": {"median": 1294.2},
            "completed_requests": 380,
        },
    }
    assert e2e.measured(row) == {
        "tok_s_gpu": None,
        "tpot": 10.7,
        "ttft": 1294.2,
        "tok_s_basis": "output",
    }
    row["measured"]["completed_requests"] = 500
    assert e2e.measured(row)["tok_s_gpu"] == 1.9


def test_a_vllm_row_with_attention_dp_is_posed_as_vllms_data_parallel_ranks() -> None:
    """vLLM runs a MoE model's DP ranks as attention DP by itself (GPUs = TP x DP): a row in
    that notation is posed as it is, one in SGLang's (the groups inside the TP size) at
    attention TP = TP / DP, neither refused."""
    import e2e

    row = {
        "engine": "vllm",
        "engine_family": "vllm",
        "engine_version": "0.11.0",
        "model": "deepseek-ai/DeepSeek-R1",
        "gpu_norm": "H200",
        "gpu_count": 8,
        "tp": 1,
        "dp": 8,
        "ep": 8,
        "dp_attention": True,
        "workload": {
            "dataset": "random",
            "input_len": 1024,
            "output_len": 1024,
            "concurrency": 64,
            "num_prompts": 320,
        },
    }
    args, why = e2e.pose(row, MODELS)
    assert why is None
    assert (args["settings"]["tp"], args["dp"], args["dp_attention"]) == (1, 8, False)
    row["tp"] = 8  # SGLang's notation for the same eight GPUs
    args, why = e2e.pose(row, MODELS)
    assert why is None
    assert (args["settings"]["tp"], args["dp"]) == (1, 8)
    out = e2e.predict(row, args)
    assert out["gpus"] == 8
    assert "--data-parallel-size 8" in out["deployment"]["command"]


def test_a_rows_load_and_dataset_are_read_in_the_spellings_sources_use(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Numbers as strings, "inf" for requests sent at once, a lower-case sharegpt; a row the
    harness cannot read is counted as not posed, and the run goes on."""
    import e2e

    assert [e2e.number(v) for v in ("16", 2.5, "inf (closed loop)", None, "n/a", True)] == [
        16.0,
        2.5,
        float("inf"),
        None,
        None,
        None,
    ]
    row = {
        "engine": "vLLM",
        "engine_version": "0.11.0",
        "model": "meta-llama/Llama-3.1-8B-Instruct",
        "gpu_norm": "H100",
        "gpu_count": 1,
        "tp": 1,
        "workload": {"dataset": "sharegpt", "concurrency": "32", "num_prompts": 320},
        "measured": {
            "mean_input_tokens_per_request": 220.0,
            "mean_output_tokens_per_request": 190.0,
        },
    }
    args, why = e2e.pose(row, MODELS)
    assert why is None
    assert (args["load"].concurrency, args["lengths"].workload) == (32, "sharegpt")
    rows = tmp_path / "rows.jsonl"
    rows.write_text('{"id": "broken", "engine": "vllm", "workload": {}}\n')
    monkeypatch.setattr(sys, "argv", ["e2e.py", "--rows", str(rows)])
    e2e.main()
    assert "row not readable: KeyError" in capsys.readouterr().out
    # a config the planner refuses (here one without its layer count) is a refusal, not a stop
    models = tmp_path / "models"
    (models / "acme--Broken").mkdir(parents=True)
    (models / "acme--Broken" / "config.json").write_text('{"model_type": "llama"}')
    rows.write_text(json.dumps(row | {"id": "refused", "model": "acme/Broken"}) + "\n")
    monkeypatch.setattr(sys, "argv", ["e2e.py", "--rows", str(rows), "--models", str(models)])
    e2e.main()
    assert "planner: --model:" in capsys.readouterr().out


def test_a_random_row_is_posed_whatever_it_calls_the_dataset() -> None:
    """`vllm bench serve` JSON's dataset_name, "random" anywhere in the dataset's words, and a
    row that gives only its input and output lengths (a cross-vendor sweep's ISL / OSL) are
    the clients' random dataset at those lengths (SGLang's random-ids too); another named
    dataset with no reported means (vLLM's multimodal and reranking random ones among them) is
    still refused, by reason."""
    import e2e

    row = {
        "engine": "vllm",
        "engine_version": "0.11.0",
        "model": "meta-llama/Llama-3.1-8B-Instruct",
        "gpu_norm": "H100",
        "gpu_count": 1,
        "tp": 1,
        "measured": {},
    }
    lengths = {"random_input_len": 1000, "random_output_len": 200, "max_concurrency": 8}
    for spelled in (
        {"dataset_name": "random"},
        {"dataset": "Synthetic random tokens"},
        {},
    ):
        args, why = e2e.pose(row | {"workload": spelled | lengths}, MODELS)
        assert why is None, (spelled, why)
        got = args["lengths"]
        assert (got.prompt_len, got.output_len, got.workload) == (1000, 200, None), spelled
        assert args["load"].concurrency == 8
    for other in ("custom-chat", "random-mm", "random-rerank"):  # images, pairs: not text
        _, why = e2e.pose(row | {"workload": {"dataset": other} | lengths}, MODELS)
        assert why == "dataset lengths not modelled (no mean lengths reported)", other
    assert e2e.pose(row | {"workload": {"dataset": "random-ids"} | lengths}, MODELS)[1] is None


def test_a_row_without_a_gpu_count_is_compared_per_gpu_of_its_layout(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Output tokens/s over a layout the row states (TP 4) but no GPU count: per GPU of that
    layout, not dropped; a stated count, as a field or in the GPU's name ("8x H100"), still
    wins, and a row with neither a layout nor a count is not posed on a guessed one."""
    import e2e

    row = {
        "id": "no-count",
        "engine": "vllm",
        "engine_version": "0.11.0",
        "model": "meta-llama/Llama-3.1-8B-Instruct",
        "gpu_norm": "H100",
        "tp": 4,
        "workload": {"dataset": "random", "input_len": 500, "output_len": 100, "concurrency": 8},
        "measured": {"output_tokens_per_s": 2000.0, "tpot_ms": {"median": 5.0}},
    }
    assert e2e.measured(row)["tok_s_gpu"] is None
    assert e2e.measured(row, 4)["tok_s_gpu"] == 500.0
    assert e2e.measured(row | {"gpu_count": 8}, 4)["tok_s_gpu"] == 250.0
    # simulate --json's own key for it, as a user saving a prediction beside a run would
    saved = row | {"measured": {"output_throughput_per_gpu": 300.0, "median_tpot_ms": 5.0}}
    assert (e2e.measured(saved)["tok_s_gpu"], e2e.measured(saved)["tpot"]) == (300.0, 5.0)
    # a count in the GPU's name is the row's count, for the comparison and the layout
    named = row | {"gpu": "8x H100"}
    assert e2e.measured(named, 4)["tok_s_gpu"] == 250.0
    assert e2e.pose(named, MODELS)[0]["dp"] == 2  # a dense model's replicas over the 8
    assert e2e.pose(named | {"tp": None}, MODELS)[1] == "layout not given for 8 GPUs"
    rows = tmp_path / "rows.jsonl"
    rows.write_text(json.dumps(row) + "\n")
    monkeypatch.setattr(sys, "argv", ["e2e.py", "--rows", str(rows), "-v"])
    e2e.main()
    assert "tok_s_gpu     500.0 ->" in capsys.readouterr().out


def test_a_feature_a_row_spells_off_is_off() -> None:
    """ "None", "off", "No", "false" and 0 for speculation, disaggregation and data-parallel
    attention mean the feature is off (bool("false") is True: such a row was refused as
    speculative, or posed with attention DP it did not run); a method name or true is on."""
    import e2e

    row = {
        "engine": "sglang",
        "engine_version": "0.5.3",
        "model": "deepseek-ai/DeepSeek-R1-0528",
        "gpu_norm": "H200",
        "gpu_count": 8,
        "tp": 8,
        "workload": {"isl": 1024, "osl": 1024, "conc": 64},
        "measured": {},
    }
    for off in ("None", "off", "No", "false", 0, False, ""):
        args, why = e2e.pose(row | {"spec_decode": off, "disagg": off, "dp_attention": off}, MODELS)
        assert why is None, (off, why)
        assert (args["dp_attention"], args["disagg"]) == (False, None), off
        assert e2e._bar_kind(row | {"spec_decode": off, "disagg": off}) == "aggregated", off
    assert e2e.pose(row | {"spec_decode": "EAGLE-3"}, MODELS)[1] == "speculative"
    assert e2e._bar_kind(row | {"spec_decode": "mtp"}) is None
    assert e2e.pose(row | {"dp": 8, "dp_attention": "true"}, MODELS)[0]["dp_attention"] is True


def test_a_rows_engine_config_is_read_in_json_and_text_spellings() -> None:
    """Chunked prefill off as JSON's false (it was read as not stated, so the release's default
    ran), on as "yes"; "default" leaves the engine's own; a scheduler-steps "default" and a
    context "8192.0" read as the engine's default and 8,192; run totals as numeric strings."""
    import e2e

    row = {
        "engine": "vllm",
        "engine_version": "0.6.3",
        "model": "meta-llama/Llama-3.1-8B-Instruct",
        "gpu_norm": "H100",
        "gpu_count": 1,
        "tp": 1,
        "workload": {"dataset": "random", "input_len": 1000, "output_len": 100, "concurrency": 8},
        "measured": {},
    }

    def posed(config: dict[str, object]) -> dict[str, object]:
        args, why = e2e.pose(row | {"engine_config": config}, MODELS)
        assert why is None, why
        return args

    assert posed({"enable_chunked_prefill": False})["chunked_prefill"] is False
    assert posed({"enable_chunked_prefill": "yes"})["chunked_prefill"] is True
    assert posed({"enable_chunked_prefill": "default"})["chunked_prefill"] is None
    assert posed({"num_scheduler_steps": "default"})["scheduler_steps"] == 1
    assert posed({"max_model_len": "8192.0"})["settings"]["context_tokens"] == 8192
    totals = {"total_input_tokens": "20000", "total_output_tokens": "2000", "completed": "20"}
    assert e2e.run_means(row | {"measured": totals}) == (1000.0, 100.0)


def test_a_rows_layout_is_read_from_counts_as_text_and_expert_parallelism_as_a_switch() -> None:
    """TP given as "8" or "8.0", the clients as a sweep's `conc`, and `ep: true` (expert
    parallelism on, vLLM's --enable-expert-parallel) as every rank of the layout: the experts
    over TP x DP, or over the TP group where SGLang's attention-DP groups live inside it."""
    import e2e

    row = {
        "engine": "vllm",
        "engine_version": "0.10.1",
        "model": "deepseek-ai/DeepSeek-R1-0528",
        "gpu_norm": "H200",
        "gpu_count": 8,
        "workload": {"isl": 1024, "osl": 1024, "conc": 64},
        "measured": {},
    }
    for tp in ("8", "8.0", 8):
        args, why = e2e.pose(row | {"tp": tp, "ep": True}, MODELS)
        assert why is None, why
        assert (args["settings"]["tp"], args["ep"], args["load"].concurrency) == (8, 8, 64)
    args, _ = e2e.pose(row | {"tp": 2, "dp": 4, "ep": "true"}, MODELS)
    assert (args["settings"]["tp"], args["dp"], args["ep"]) == (2, 4, 8)
    sglang = row | {"engine": "sglang", "engine_version": "0.5.3", "dp_attention": True}
    args, _ = e2e.pose(sglang | {"tp": 8, "dp": 8, "ep": True}, MODELS)
    assert (args["settings"]["tp"], args["dp"], args["ep"], args["dp_attention"]) == (8, 8, 8, True)
    for off in (False, None, "false"):
        assert e2e.pose(row | {"tp": 8, "ep": off}, MODELS)[0]["ep"] is None
    assert e2e.pose(row | {"tp": 8, "ep": 4}, MODELS)[0]["ep"] == 4


def test_a_row_in_looser_spellings_is_scored_and_one_the_harness_cannot_pose_never_stops_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Counts and figures as strings, no `engine` beside `engine_family`, a bare figure for a
    latency: the row is posed and scored. A disaggregated row without its pools is refused by
    name, and the table still prints."""
    import e2e

    assert [e2e.integer(v) for v in (8, "8", 8.0, "8.5", None, "n/a")] == [
        8,
        8,
        8,
        None,
        None,
        None,
    ]
    row = {
        "id": "loose",
        "engine_family": "SGLang",
        "model": "meta-llama/Llama-3.1-8B-Instruct",
        "gpu_norm": "H100",
        "gpu_count": "1",
        "tp": "1",
        "workload": {"dataset": "random", "input_len": 512, "output_len": 128, "concurrency": 4},
        "measured": {"tpot_ms": "9.5", "ttft_ms": 40, "output_tokens_per_s": "400"},
    }
    args, why = e2e.pose(row, MODELS)
    assert why is None and args["settings"]["tp"] == 1
    got = {"tok_s_gpu": 400.0, "tpot": 9.5, "ttft": 40.0, "tok_s_basis": "output"}
    assert e2e.measured(row) == got
    # the flat keys of `vllm bench serve --save-result` JSON, as a row may embed them
    flat = {"median_tpot_ms": 12.5, "mean_ttft_ms": 210.0, "output_throughput": 800.0}
    saved = dict(row, gpu_count=2, measured=flat)
    got = {"tok_s_gpu": 400.0, "tpot": 12.5, "ttft": 210.0, "tok_s_basis": "output"}
    assert e2e.measured(saved) == got
    # a row that reports its total tokens/s alone is compared on the total; an unlabelled
    # throughput (the SGLang cookbook's column) on nothing
    total = dict(row, gpu_count=2, measured={"tpot_ms": 9.5, "total_token_throughput": 1000.0})
    assert e2e.measured(total)["tok_s_gpu"] == 500.0
    assert e2e.measured(total)["tok_s_basis"] == "total"
    unlabelled = dict(row, measured={"tpot_ms": 9.5, "throughput_tokens_per_s_as_reported": 900})
    assert e2e.measured(unlabelled)["tok_s_gpu"] is None
    assert e2e.statistic(saved, "tpot") == ("median", True)
    assert e2e.statistic(saved, "ttft") == ("mean", True)
    assert e2e.statistic(row, "tpot") == ("median", False)
    # SGLang's client however the source spells it: its random lengths' default range [1, L]
    sglang = dict(row, source={"kind": "table (python -m sglang.bench_serving)"})
    assert e2e.bench_client(sglang) == "sglang"
    assert e2e.pose(sglang, MODELS)[0]["lengths"].len_range == 0.0
    assert e2e.pose(row, MODELS)[0]["lengths"].len_range is None  # no client named: fixed
    # lengths and range as strings: vllm bench serve's [L (1 - r), L (1 + r)]
    spread = dict(
        row,
        workload={
            "dataset": "random (vllm bench serve)",
            "input_len": "1024",
            "output_len": "1024",
            "range_ratio": "0.8",
            "concurrency": "16",
        },
    )
    lengths = e2e.pose(spread, MODELS)[0]["lengths"]
    assert (lengths.prompt_len, lengths.output_len, lengths.len_spread) == (1024, 1024, 0.8)
    closed = dict(row, workload={**row["workload"], "max_concurrency": 8})
    del closed["workload"]["concurrency"]
    assert e2e.pose(closed, MODELS)[0]["load"].concurrency == 8
    # vllm bench serve's JSON names and the ISL / OSL shorthand
    bench = {"dataset": "random (vllm bench serve)", "random_input_len": 2048, "osl": 256,
             "random_range_ratio": 0.5, "max_concurrency": 4}  # fmt: skip
    lengths = e2e.pose(dict(row, workload=bench), MODELS)[0]["lengths"]
    assert (lengths.prompt_len, lengths.output_len, lengths.len_spread) == (2048, 256, 0.5)
    # in whatever case a sweep spells them
    upper = {"dataset": "random", "ISL": 1024, "OSL": 128, "Max_Concurrency": 32}
    posed = e2e.pose(dict(row, workload=upper), MODELS)[0]
    assert (posed["lengths"].prompt_len, posed["lengths"].output_len) == (1024, 128)
    assert posed["load"].concurrency == 32
    # its random prefix: one shared prefix before every prompt's own tokens
    prefixed = e2e.pose(dict(row, workload=bench | {"random_prefix_len": 512}), MODELS)[0]
    assert (prefixed["prefix"].share, prefixed["prefix"].tokens) == (1.0, 512)
    assert "prefix" not in e2e.pose(dict(row, workload=bench), MODELS)[0]
    # a disaggregated row's layout is its pools', whatever its top-level DP says
    pools = {"prefill_workers": 1, "decode_workers": 1, "prefill_tp": 1, "decode_tp": 1}
    pd = dict(row, gpu_count=2, dp=8, dp_attention=True, disagg=pools)
    args, why = e2e.pose(pd, MODELS)
    assert why is None and (args["dp"], args["dp_attention"], args["disagg"].gpus) == (1, False, 2)
    shared = dict(pd, workload=row["workload"] | {"random_prefix_len": 64})
    assert e2e.pose(shared, MODELS)[1] == "a shared prefix is not modelled with disaggregation"
    split = dict(row, id="split", disagg=True)
    assert e2e.pose(split, MODELS)[1] == "disaggregated layout not given per pool"
    # pools nested, each under its own field names
    nested = {"prefill": {"instances": 1, "tp_size": 1}, "decode": {"replicas": 1, "tp": 1}}
    args, why = e2e.pose(dict(pd, disagg=nested), MODELS)
    assert why is None and (args["disagg"].prefill, args["disagg"].decode_tp) == (1, 1)
    # "2P2D" beside one TP: both pools' instances at it
    named = dict(row, gpu_count=4, disagg="2P2D")
    layout = e2e.pose(named, MODELS)[0]["disagg"]
    assert (layout.prefill, layout.decode, layout.prefill_tp, layout.decode_tp) == (2, 2, 1, 1)
    assert e2e.pose(dict(named, tp=None), MODELS)[1] == "disaggregated layout not given per pool"
    # an xPyD among a layout's fields names its counts; a pool without its TP takes the row's
    moded = e2e.pose(dict(named, disagg={"mode": "1p3d", "transfer": "nixl"}), MODELS)[0]
    layout = moded["disagg"]
    assert (layout.prefill, layout.decode, layout.prefill_tp, layout.decode_tp) == (1, 3, 1, 1)
    counted = {"prefill_workers": 2, "decode_workers": 1, "decode_tp": 2}
    layout = e2e.pose(dict(named, disagg=counted), MODELS)[0]["disagg"]
    assert (layout.prefill, layout.decode, layout.prefill_tp, layout.decode_tp) == (2, 1, 1, 2)
    rows = tmp_path / "rows.jsonl"
    total = dict(row, id="total", measured={"tpot_ms": 9.5, "total_token_throughput": 2000.0})
    rows.write_text("\n".join(json.dumps(r) for r in (row, split, total)) + "\n")
    monkeypatch.setattr(sys, "argv", ["e2e.py", "--rows", str(rows), "-v"])
    e2e.main()
    out = capsys.readouterr().out
    assert out.startswith("loose") and "tpot       9.5 ->" in out
    # the total-only row against the predicted total, and labelled so
    line = next(x for x in out.splitlines() if x.startswith("total"))
    predicted = e2e.predict(total, e2e.pose(total, MODELS)[0])["total_token_throughput_per_gpu"]
    assert f"2000.0 -> {predicted:9.1f}" in line and "[total tokens]" in line
    assert "1  disaggregated layout not given per pool" in out
    # no gpu_vendor given: the vendor of the catalog card the row was posed on
    assert "vendor NVIDIA" in out and "vendor ?" not in out


def test_shared_prefix_datasets_pose_their_prefixes() -> None:
    """sglang.bench_serving's generated-shared-prefix dataset: one system prompt a group
    before each prompt's question, groups x prompts per group requests (its defaults where
    the row gives none); its other modes are refused by name. vLLM's sonnet dataset: one
    shared opening before each prompt's own lines."""
    import e2e

    row = {
        "engine": "sglang",
        "engine_version": "0.5.13",
        "model": "meta-llama/Llama-3.1-8B-Instruct",
        "gpu_norm": "H100",
        "gpu_count": 1,
        "tp": 1,
        "workload": {
            "dataset": "generated-shared-prefix",
            "gsp_num_groups": 32,
            "gsp_question_len": 200,
            "concurrency": 16,
            "num_prompts": 1000,
        },
    }
    args, why = e2e.pose(row, MODELS)
    assert why is None
    prefix, lengths = args["prefix"], args["lengths"]
    assert (prefix.share, prefix.tokens, prefix.prefixes) == (1.0, 2048, 32)
    assert (lengths.prompt_len, lengths.output_len) == (200, 256)
    assert args["load"].requests == 32 * 16  # its groups' prompts, not --num-prompts
    turns = dict(row, workload=row["workload"] | {"gsp_num_turns": 2})
    assert "beyond single-turn" in str(e2e.pose(turns, MODELS)[1])
    # vLLM's sonnet dataset: its prompts' shared opening (prefix_len) before their own lines
    sonnet = {"dataset": "sonnet", "sonnet_input_len": 1024, "concurrency": 8}
    args, why = e2e.pose(dict(row, engine="vllm", engine_version="0.10.1", workload=sonnet), MODELS)
    assert why is None and (args["prefix"].tokens, args["prefix"].prefixes) == (200, 1)
    assert (args["lengths"].prompt_len, args["lengths"].output_len) == (1024 - 200, 150)


def test_a_rows_weights_are_the_first_format_its_precision_names() -> None:
    """The first word naming a format, wherever it stands ("W8A8-FP8"); a 16-bit word first
    means 16-bit weights; INT8 is passed on as the planner's int8 W8A8 variant, not priced as
    bf16."""
    from rows import stated_weights

    cases = {
        "fp8 (block)": "fp8",
        "W8A8-FP8": "fp8",
        "mxfp4 (native gpt-oss checkpoint)": "mxfp4",
        "INT4 (AWQ)": "int4",
        "bf16 (fp8 KV)": None,
        "w8a8 int8": "int8",
        "W8A8": "int8",  # SmoothQuant's int8 scheme: the int8 W8A8 variant, never bf16
        "W8A8 (FP8 dynamic)": "fp8",
        "float8_e4m3fn": "fp8",
        "W4A8 AWQ": "int4",
        "W4A16 MXFP4": "mxfp4",  # a bit-width scheme, then the FP4 format it runs
        "W4A16 bf16 activations": "int4",
        "auto": None,
    }
    assert {text: stated_weights(text, "nvidia") for text in cases} == cases
    assert (stated_weights("FP4", "nvidia"), stated_weights("FP4", "amd")) == ("nvfp4", "mxfp4")


def test_a_sharegpt_run_short_of_the_references_is_posed_with_empty_outputs() -> None:
    """A base model's ShareGPT run whose outputs averaged 122 tokens against the 196.5 of
    outputs that stream text lost the rest to requests that ended at their first token
    (dstack's raw results: 37.8%); vLLM's 2024 script counted their TTFT as 0, vllm bench serve
    would not. The model those results measured runs them as measured. An instruct model's
    answers end early instead: its lengths are scaled."""
    import e2e

    row = {
        "engine": "vllm",
        "engine_version": "0.6.3",
        "source": {"date": "2024-11 (runs dated 20241109)"},
        "model": "meta-llama/Llama-3.1-8B",
        "gpu_norm": "H100",
        "gpu_count": 1,
        "tp": 1,
        "workload": {
            "dataset": "ShareGPT_V3_unfiltered_cleaned_split (vLLM benchmark_serving sharegpt)",
            "request_rate": 16.0,
            "num_prompts": 1000,
        },
        "measured": {
            "mean_input_tokens_per_request": 215.2,
            "mean_output_tokens_per_request": 122.2,
        },
    }
    args, why = e2e.pose(row, MODELS)
    assert why is None
    lengths = args["lengths"]
    assert (lengths.workload, lengths.output_mean) == ("sharegpt-base", None)
    assert lengths.empty_share == pytest.approx(1 - 122.2 / 196.455, abs=1e-3)
    assert args["client"] == "vllm-2024"
    # the base model sharegpt-base measured runs its requests as measured, pair by pair: a run
    # short of their mean lost it to the prompts the engine ignored, which the simulator serves
    # as the engine does
    source = row | {"model": "meta-llama/Llama-3.1-405B-FP8", "gpu_count": 8, "tp": 8}
    source["measured"] = source["measured"] | {"mean_output_tokens_per_request": 118.1}
    lengths = e2e.pose(source, MODELS)[0]["lengths"]
    assert (lengths.workload, lengths.output_mean, lengths.empty_share) == (
        "sharegpt-base",
        None,
        None,
    )
    instruct = row | {"model": "meta-llama/Llama-3.1-8B-Instruct"}
    lengths = e2e.pose(instruct, MODELS)[0]["lengths"]
    assert (lengths.workload, lengths.output_mean, lengths.empty_share) == (
        "sharegpt",
        122.2,
        None,
    )
    # a 2025 run reads as vllm bench serve
    row["source"] = {"date": "2025-06-02"}
    assert e2e.pose(row, MODELS)[0]["client"] == "vllm"


@pytest.mark.parametrize(
    ("name", "base"),
    [
        ("meta-llama/Llama-3.1-405B-FP8", True),
        ("amd/Llama-3.1-405B-Instruct-FP8-KV", False),
        ("meta-llama/Llama-2-70b-chat-hf", False),
        ("mistralai/Mixtral-8x7B-v0.1", True),
        ("google/gemma-2-9b-it", False),
        ("Qwen/Qwen3-8B-Base", True),
        # families whose plain name is the chat model
        ("Qwen/Qwen3-8B", False),
        ("deepseek-ai/DeepSeek-R1", False),
        ("openai/gpt-oss-120b", False),
    ],
)
def test_a_base_model_is_told_by_its_name(name: str, base: bool) -> None:
    import e2e

    assert e2e.base_model(name) is base


def test_a_row_with_pipeline_stages_is_posed_with_them() -> None:
    import e2e

    row = {
        "engine": "vllm",
        "engine_version": "0.11.0",
        "model": "meta-llama/Llama-3.1-405B",
        "gpu_norm": "H100",
        "gpu_count": 16,
        "tp": 8,
        "pp": 2,
        "workload": {"dataset": "random", "input_len": 1024, "output_len": 1024, "concurrency": 32},
    }
    args, why = e2e.pose(row, MODELS)
    assert why is None and (args["settings"]["tp"], args["settings"]["pp"]) == (8, 2)
    row["gpu_count"] = 8
    assert e2e.pose(row, MODELS)[1] == "layout TP 8 x PP 2 x DP 1 != 8 GPUs"
    # a dense model on a multiple of its TP x PP GPUs runs that many replicas; a MoE model's
    # GPUs beyond them are not read (its data-parallel ranks would share the experts)
    row["gpu_count"] = 32
    assert e2e.pose(row, MODELS)[0]["dp"] == 2
    moe = row | {"model": "Qwen/Qwen3-235B-A22B", "gpu_count": 16, "pp": 1}
    assert e2e.pose(moe, MODELS)[1] == "layout TP 8 x PP 1 x DP 1 != 16 GPUs"


def test_a_row_is_compared_at_the_statistic_its_source_reports() -> None:
    """The median (or P50) where a row gives it, the mean (avg) where it gives only that, and
    the mean for an unlabelled figure from the SGLang cookbook (whose key metrics are the
    means); any other unlabelled figure is taken for the median; both unlabelled ones say so."""
    import e2e

    def row(value: dict[str, float], kind: str = "vendor blog") -> dict[str, object]:
        return {"source": {"kind": kind}, "workload": {}, "measured": {"tpot_ms": value}}

    both = row({"mean": 12.0, "median": 10.0})
    assert e2e.statistic(both, "tpot") == ("median", True)
    assert e2e.measured(both)["tpot"] == 10.0
    assert e2e.statistic(row({"mean": 12.0}), "tpot") == ("mean", True)
    assert e2e.measured(row({"mean": 12.0}))["tpot"] == 12.0
    cookbook = row({"as_reported": 31.45}, "GitHub PR description table (SGLang cookbook data)")
    assert e2e.statistic(cookbook, "tpot") == ("mean", False)
    assert e2e.measured(cookbook)["tpot"] == 31.45
    assert e2e.statistic(row({"as_reported": 31.45}), "tpot") == ("median", False)
    # a P50 is the median, an avg the mean, in either case
    spelled = row({"P50": 10.0, "Avg": 12.0, "p99": 30.0})
    assert e2e.statistic(spelled, "tpot") == ("median", True)
    assert e2e.measured(spelled)["tpot"] == 10.0
    assert e2e.measured(row({"avg": 12.0, "p99": 30.0}))["tpot"] == 12.0


def test_a_rows_checkpoint_id_is_read_without_regard_to_case() -> None:
    """The Hub matches ids without regard to case, and so do the checkpoints posed on a base
    model's config: AMD's Llama-3.1-405B-Instruct-FP8-KV in any spelling runs on
    Llama-3.1-405B's config with fp8 weights."""
    import e2e

    row = {
        "engine": "vllm",
        "engine_family": "vllm",
        "model": "amd/Llama-3.1-405B-Instruct-FP8-KV",
        "gpu_norm": "MI300X",
        "gpu_count": 8,
        "tp": 8,
        "workload": {"dataset": "random", "input_len": 128, "output_len": 64, "concurrency": 4},
        "measured": {},
    }
    canonical, why = e2e.pose(row, MODELS)
    assert why is None and canonical["model"].endswith("meta-llama--Llama-3.1-405B")
    assert canonical["settings"]["weight_dtype"] == "fp8"
    lower, why = e2e.pose(row | {"model": row["model"].lower()}, MODELS)
    assert why is None and lower == canonical


def test_qwen_fp8_exports_are_posed_block_scaled() -> None:
    # their own -FP8 releases store a scale per 128 x 128 tile, as every one shipped here does
    from planner.sources.models import resolve_model

    for name in ("Qwen/Qwen3.5-397B-A17B-FP8", "Qwen/Qwen3-30B-A3B-Instruct-2507-FP8"):
        folder, weights = checkpoint_config(name, MODELS)
        assert folder is not None and weights is None
        spec = resolve_model(None, str(folder))
        assert spec.weight_dtype == "fp8" and spec.fp8_block_scaled
    online, weights = checkpoint_config("RedHatAI/Qwen3.5-27B-FP8-dynamic", MODELS)
    assert online is not None and weights == "fp8"
    assert not resolve_model(None, str(online)).fp8_block_scaled
    shipped = resolve_model(None, str(MODELS / "Qwen--Qwen3-32B-FP8"))
    assert shipped.fp8_block_scaled


def test_a_row_on_an_all_to_all_the_model_does_not_price_is_refused() -> None:
    # vLLM's model prices its default gather and DeepEP's modes; SGLang's none, DeepEP or MoRI:
    # a row on vLLM's pplx or MoRI kernels (flag or environment) or SGLang's Mooncake EP is
    # refused by name
    import e2e

    row = vllm_random_row("deepseek-ai/DeepSeek-R1", "H200", 8, concurrency=64)
    assert e2e.pose(row, MODELS)[1] is None
    for notes, backend in (
        ("vllm serve m --all2all-backend pplx", "pplx"),
        ("VLLM_ALL2ALL_BACKEND=mori vllm serve m", "mori"),
    ):
        assert (
            e2e.pose(row | {"notes": notes}, MODELS)[1] == f"MoE all-to-all {backend} not modelled"
        )
    # DeepEP's two modes are priced: posed on the line
    deep = row | {"notes": "vllm serve m --all2all-backend deepep_low_latency"}
    assert e2e.pose(deep, MODELS)[1] is None
    assert vllm_fields(deep) == {"all2all_backend": "deepep_low_latency"}
    overlapped = {"notes": "vllm serve m --all2all-backend deepep_low_latency --enable-dbo"}
    assert vllm_fields(overlapped) == {"all2all_backend": "deepep_low_latency", "enable_dbo": True}
    stated = row | {"engine_config": {"all2all_backend": "allgather_reducescatter"}}
    assert e2e.pose(stated, MODELS)[1] is None
    sglang = row | {
        "engine": "sglang",
        "engine_version": "0.5.13",
        "notes": "--moe-a2a-backend mooncake",
    }
    assert e2e.pose(sglang, MODELS)[1] == "MoE all-to-all mooncake not modelled"
    deepep = sglang | {"notes": "--moe-a2a-backend deepep"}
    assert e2e.pose(deepep, MODELS)[1] is None
    # AMD's MoRI is posed on the line (its cap on a rank's prompt tokens met with DP attention)
    mori = sglang | {
        "gpu_norm": "MI300X",
        "notes": "--moe-a2a-backend mori --enable-dp-attention --dp 8",
        "dp": 8,
        "dp_attention": True,
    }
    kwargs, why = e2e.pose(mori, MODELS)
    assert why is None and kwargs["settings"]["extra"]["moe_a2a_backend"] == "mori"
    got = e2e.predict(mori, kwargs)
    assert "--moe-a2a-backend mori" in got["deployment"]["command"]
    assert any("AMD's MoRI dispatch and combine over xGMI" in n for n in got["notes"])


def test_a_moe_step_time_row_is_posed_with_its_expert_and_data_parallel_split() -> None:
    # SGLang's notation (the DP groups inside TP 8 on 8 GPUs) and vLLM's (TP 1 x DP 8 on 8 GPUs)
    # name one layout: attention TP 1 in 8 groups, the experts whole over 8 ranks
    import step_time

    from planner.core.step import step_time_for
    from planner.core.step.attention_dp import AttentionDp
    from planner.core.step.moe import MoeExchange
    from planner.sources.models import resolve_model
    from planner.sources.presets import find_gpu

    row = {
        "model": "deepseek-ai/DeepSeek-R1",
        "gpu": "NVIDIA H200",
        "gpu_count": 8,
        "engine": "sglang",
        "engine_version": "0.5.6",
        "batch": 64,
        "context_at_decode": 2000,
        "ep": 8,
    }
    model = resolve_model(None, str(MODELS / "deepseek-ai--DeepSeek-R1"))
    expected = step_time_for(
        model,
        find_gpu("h200"),
        tp=1,
        engine="sglang",
        version=(0, 5, 6),
        dp=AttentionDp(groups=8),
        exchange=MoeExchange(expert_ranks=8),
    ).step_ms(64, 2000)
    sglang = row | {"tp": 8, "dp": 8, "dp_attention": True}
    vllm = row | {"tp": 1, "dp": 8}
    assert step_time.predict(sglang) == pytest.approx(expected)
    assert step_time.predict(vllm | {"engine": "sglang"}) == pytest.approx(expected)
    # without the split: TP 8, experts sharded
    plain = step_time.predict(row | {"tp": 8, "ep": 1})
    assert plain is not None and plain != pytest.approx(expected)
    # counts as text, and expert parallelism as a switch: on, the experts over every GPU
    assert step_time.predict(sglang | {"ep": True, "batch": "64.0"}) == pytest.approx(expected)
    assert step_time.predict(row | {"tp": "8", "ep": "false"}) == pytest.approx(plain)


def test_a_step_time_row_of_a_4_bit_export_is_priced_on_its_weights() -> None:
    """An NVFP4 / MXFP4 / int4 row is sized as `--weight-dtype` sizes the export (not dropped
    as unreadable), and a row without a decode context takes its prompt and half its output."""
    import step_time

    from planner.api.capacity import VARIANT_CHECKPOINTS
    from planner.core.capacity import weights_bytes_for
    from planner.core.hf_config import quantized_weights_bytes
    from planner.core.step import step_time_for
    from planner.sources.models import resolve_model
    from planner.sources.presets import find_gpu

    row = {
        "model": "RedHatAI/Llama-3.3-70B-Instruct-NVFP4",
        "gpu": "NVIDIA B200",
        "engine": "vllm",
        "engine_version": "0.14.0",
        "tp": 2,
        "batch": 32,
        "input_len": 1000,
        "output_len": 1000,
    }
    model = resolve_model(None, str(MODELS / "meta-llama--Llama-3.3-70B-Instruct"))
    weights = quantized_weights_bytes(model, VARIANT_CHECKPOINTS["nvfp4"])
    assert weights < model.weights_bytes // 3  # 4.5 bits a weight beside 16
    expected = step_time_for(
        model,
        find_gpu("b200"),
        tp=2,
        weights_bytes=weights,
        weight_dtype="nvfp4",
        engine="vllm",
        version=(0, 14, 0),
    ).step_ms(32, 1500)
    assert step_time.predict(row) == pytest.approx(expected)
    bf16 = step_time.predict(row | {"model": "meta-llama/Llama-3.3-70B-Instruct"})
    assert bf16 is not None and bf16 > expected
    # a bare FP4 on an AMD card is AMD's MXFP4 (as the e2e harness reads a row's precision)
    mxfp4 = step_time_for(
        model,
        find_gpu("mi355x"),
        tp=2,
        weights_bytes=quantized_weights_bytes(model, VARIANT_CHECKPOINTS["mxfp4"]),
        weight_dtype="mxfp4",
        engine="vllm",
        version=(0, 14, 0),
    ).step_ms(32, 1500)
    amd = row | {"model": "meta-llama/Llama-3.3-70B-Instruct", "weight_dtype": "FP4"}
    assert step_time.predict(amd | {"gpu": "AMD Instinct MI355X"}) == pytest.approx(mxfp4)
    # the quantization a row names comes before a 16-bit weight dtype beside it (vLLM's
    # --quantization fp8 over a bf16 checkpoint); a 16-bit row names none
    base = row | {"model": "meta-llama/Llama-3.3-70B-Instruct", "weight_dtype": "bf16"}
    fp8 = step_time_for(
        model,
        find_gpu("b200"),
        tp=2,
        weights_bytes=weights_bytes_for(model, "fp8")[0],
        weight_dtype="fp8",
        engine="vllm",
        version=(0, 14, 0),
    ).step_ms(32, 1500)
    assert step_time.predict(base | {"quantization": "fp8"}) == pytest.approx(fp8)
    assert step_time.predict(base | {"dtype": "fp8"}) == pytest.approx(bf16)
