"""How the public-row benchmarks (e2e.py, step_time.py) find a row's GPU in the catalog, its
checkpoint's config among the shipped ones, and the engine release it ran."""

from __future__ import annotations

import functools
import json
import math
import re
import tempfile
from pathlib import Path
from typing import Any

from planner.core.engines.vllm import PRICED_ALL2ALL
from planner.errors import PlannerError
from planner.sources.models import resolve_model
from planner.sources.presets import card_count, find_gpu, gpu_catalog, without_count

# Releases by the build date of their PyPI wheel (the newest file time stamp inside it; vLLM
# after 0.7.0 by PyPI's upload time, pypi.org/pypi/vllm/json): a row that names no version ran
# the release current on its run date (an image's `latest` tag).
RELEASE_DATES = {
    "sglang": (
        ("2024-12-03", "0.4.0"), ("2024-12-25", "0.4.1"), ("2025-01-27", "0.4.2"),
        ("2025-02-14", "0.4.3"), ("2025-03-13", "0.4.4"), ("2025-04-07", "0.4.5"),
        ("2025-04-27", "0.4.6"), ("2025-06-10", "0.4.7"), ("2025-06-24", "0.4.8"),
        ("2025-07-06", "0.4.9"), ("2025-07-31", "0.4.10"), ("2025-08-23", "0.5.1"),
        ("2025-09-11", "0.5.2"), ("2025-10-06", "0.5.3"), ("2025-10-24", "0.5.4"),
        ("2025-11-06", "0.5.5"), ("2025-12-03", "0.5.6"), ("2026-01-01", "0.5.7"),
        ("2026-01-23", "0.5.8"), ("2026-02-23", "0.5.9"), ("2026-04-05", "0.5.10"),
        ("2026-05-07", "0.5.11"), ("2026-05-16", "0.5.12"), ("2026-06-11", "0.5.13"),
        ("2026-06-26", "0.5.14"), ("2026-07-10", "0.5.15"), ("2026-07-25", "0.5.16"),
        ("2026-08-08", "0.5.17"), ("2026-08-21", "0.5.18"), ("2026-09-04", "0.5.19"),
        ("2026-09-18", "0.5.20"), ("2026-10-01", "0.5.21"), ("2026-10-15", "0.5.22"),
        ("2026-10-30", "0.5.23"),
    ),
    "vllm": (
        ("2024-08-05", "0.5.4"), ("2024-08-23", "0.5.5"), ("2024-09-04", "0.6.0"),
        ("2024-09-11", "0.6.1"), ("2024-09-25", "0.6.2"), ("2024-10-14", "0.6.3"),
        ("2024-11-15", "0.6.4"), ("2024-12-17", "0.6.5"), ("2024-12-27", "0.6.6"),
        ("2025-01-27", "0.7.0"),
        ("2025-02-01", "0.7.1"), ("2025-02-06", "0.7.2"), ("2025-02-20", "0.7.3"),
        ("2025-03-18", "0.8.0"), ("2025-03-19", "0.8.1"), ("2025-03-25", "0.8.2"),
        ("2025-04-06", "0.8.3"), ("2025-04-15", "0.8.4"), ("2025-04-28", "0.8.5"),
        ("2025-05-28", "0.9.0"), ("2025-06-10", "0.9.1"), ("2025-07-08", "0.9.2"),
        ("2025-07-25", "0.10.0"), ("2025-08-19", "0.10.1"), ("2025-09-13", "0.10.2"),
        ("2025-10-04", "0.11.0"), ("2025-11-19", "0.11.1"), ("2025-11-20", "0.11.2"),
        ("2025-12-03", "0.12.0"), ("2025-12-19", "0.13.0"), ("2026-01-20", "0.14.0"),
        ("2026-01-24", "0.14.1"), ("2026-01-29", "0.15.0"), ("2026-02-05", "0.15.1"),
        ("2026-02-26", "0.16.0"), ("2026-03-07", "0.17.0"), ("2026-03-11", "0.17.1"),
        ("2026-03-20", "0.18.0"), ("2026-03-31", "0.18.1"), ("2026-04-03", "0.19.0"),
        ("2026-04-18", "0.19.1"), ("2026-04-27", "0.20.0"), ("2026-05-03", "0.20.1"),
        ("2026-05-10", "0.20.2"), ("2026-05-15", "0.21.0"), ("2026-05-29", "0.22.0"),
        ("2026-06-05", "0.22.1"), ("2026-06-13", "0.23.0"), ("2026-06-30", "0.24.0"),
        ("2026-07-11", "0.25.0"), ("2026-07-14", "0.25.1"), ("2026-07-25", "0.26.0"),
        ("2026-08-10", "0.27.0"), ("2026-08-11", "0.27.1"), ("2026-08-26", "0.28.0"),
        ("2026-09-09", "0.29.0"), ("2026-09-22", "0.30.0"), ("2026-10-05", "0.31.0"),
        ("2026-10-18", "0.32.0"), ("2026-11-02", "0.33.0"), ("2026-11-16", "0.34.0"),
    ),
}  # fmt: skip


# A source dated to the month only ("2025-03", "Mar 2025") ran on a day of it: the middle is
# taken, the release then current standing for the month's (an estimate within about two
# releases either way at 2025-2026's cadence: RELEASE_DATES).
MID_MONTH_DAY = "15"
MONTHS = ("jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec")


def number(value: Any) -> float | None:
    """A load figure as a row gives it: a number, a numeric string, or "inf" / "inf (closed
    loop)" for requests sent at once (None: none given)."""
    if isinstance(value, bool):
        return None
    if isinstance(value, (int, float)):
        return float(value)
    text = str(value or "").strip().lower()
    if text.startswith("inf"):
        return math.inf
    try:
        return float(text)
    except ValueError:
        return None


def integer(value: Any) -> int | None:
    """A count as a row gives it: an int, or a number or numeric string that is a whole one
    (None: absent or not a count)."""
    got = number(value)
    if got is None or not math.isfinite(got) or got != int(got):
        return None
    return int(got)


# The words a row uses for a feature that is off, beside a bool's own spellings.
OFF_WORDS = frozenset({"", "none", "no", "off", "false", "0", "disabled", "null", "n/a"})


def switched_on(value: Any) -> bool:
    """Whether a row's field turns its feature on: anything but its absence, false, 0 or a word
    for off ("none", "No", "off", "disabled"), so a row that spells "off" out is not read as on."""
    return value is not None and value is not False and str(value).strip().lower() not in OFF_WORDS


def stated_switch(value: Any) -> bool | None:
    """An engine switch as a row's config states it: on or off (switched_on), None where it is
    absent or left to the engine ("default", "auto")."""
    if value is None or str(value).strip().lower() in ("", "default", "auto"):
        return None
    return switched_on(value)


def row_gpu_count(row: dict[str, Any]) -> int | None:
    """The GPUs a row ran on: its `gpu_count`, else the count its GPU's name states ("8x
    H200"); None where it states neither."""
    given = integer(row.get("gpu_count"))
    if given:
        return given
    return card_count(str(row.get("gpu") or "")) or card_count(str(row.get("gpu_norm") or ""))


def states_layout(row: dict[str, Any]) -> bool:
    """Whether a row states the layout it ran (a TP, DP or PP size, or disaggregated pools)
    rather than leaving it to be read from its GPU count."""
    return any(integer(row.get(k)) for k in ("tp", "dp", "pp")) or switched_on(row.get("disagg"))


def expert_parallel(value: Any, ranks: int) -> int | None:
    """A row's expert parallelism as a size: a count as given; true (expert parallelism on,
    as vLLM's --enable-expert-parallel says it) every rank of the layout; false or absent
    None."""
    text = str(value).strip().lower()
    if text in ("true", "false"):  # a bool as well as its spelling
        return ranks if text == "true" else None
    return integer(value)


# A build date in an image tag: eight digits standing apart ("nightly_main_20251010").
IMAGE_BUILD_DATE = re.compile(r"(?<!\d)(20\d\d)(0[1-9]|1[0-2])(0[1-9]|[12]\d|3[01])(?!\d)")


def run_date(row: dict[str, Any]) -> str | None:
    """The date the row's engine build is from: the build date a nightly image's tag carries
    ("rocm/vllm-dev:nightly_main_20251010"), else the first run date its source gives
    (YYYYMMDD or YYYY-MM-DD in it, else its month: YYYY-MM or a month's name and year, at
    MID_MONTH_DAY), as YYYY-MM-DD; None where its source is only a text (a step-time row's) or
    gives no date."""
    built = IMAGE_BUILD_DATE.search(str(row.get("engine_image") or ""))
    if built:
        return "-".join(built.groups())
    source = row.get("source")
    text = str(source.get("date") or "") if isinstance(source, dict) else ""
    found = re.search(r"(20\d\d)-?(\d\d)-?(\d\d)", text)
    if found:
        return "-".join(found.groups())
    month = re.search(r"(20\d\d)-(0[1-9]|1[0-2])(?!\d)", text)
    if month:
        return f"{month.group(1)}-{month.group(2)}-{MID_MONTH_DAY}"
    named = re.search(r"\b(" + "|".join(MONTHS) + r")[a-z]*\.?,?\s+(20\d\d)\b", text.lower())
    if named:
        return f"{named.group(2)}-{MONTHS.index(named.group(1)) + 1:02d}-{MID_MONTH_DAY}"
    return None


# An engine's release number in a version string or image tag: "0.6.3.post2.dev308+g...",
# "v0.10.1rc1", "lmsysorg/sglang:v0.5.13.post1-rocm720-mi30x", "rocm/vllm:rocm6.3.1_vllm_0.8.3_
# 20250415". A number glued to letters other than a "v" is another component's (rocm6.3.1,
# cu12.8, py3.12, torch2.7), not the engine's.
RELEASE_NUMBER = re.compile(r"(?<![A-UW-Za-uw-z\d.])[vV]?(\d+\.\d+(?:\.\d+)?)")


# Serving stacks that run an engine inside them and version themselves: Dynamo, llm-d, AIBrix,
# Ray Serve, KServe and NVIDIA's Triton server. A row whose engine names one ("dynamo + vllm")
# gives the stack's release in its version field (Dynamo 0.4.1 ran vLLM 0.10), not the engine's.
SERVING_STACKS = ("dynamo", "llm-d", "aibrix", "ray", "kserve", "triton")


def engine_release(row: dict[str, Any], engine: str | None = None) -> str | None:
    """The `engine` release a row names: in its engine version, else in its image's tag (None:
    neither names one, e.g. a `latest` tag). Where the row's engine is a serving stack around
    the engine (SERVING_STACKS), only a number the engine's own name precedes ("vllm 0.10.2",
    "vllm==0.10.2") is its release: the stack's own is not."""
    named = str(row.get("engine") or "").lower()
    stacked = engine is not None and any(stack in named for stack in SERVING_STACKS)
    for field in ("engine_version", "engine_image"):
        text = str(row.get(field) or "")
        found = (
            re.search(rf"{engine}\W{{0,3}}{RELEASE_NUMBER.pattern}", text, re.IGNORECASE)
            if stacked
            else RELEASE_NUMBER.search(text)
        )
        if found:
            return found.group(1)
    return None


def release_on(engine: str, date: str) -> str | None:
    """The newest release of `engine` built on or before `date` (None: none known then)."""
    known = [version for built, version in RELEASE_DATES.get(engine, ()) if built <= date]
    return known[-1] if known else None


# Name suffixes of quantized exports of a published model, and the weights they carry: the
# export keeps the architecture, so the base model's config.json with these weights poses it
# (ModelOpt / RedHat / AMD Quark naming: -FP8, -FP8-dynamic, -FP8-KV, -FP4 / -NVFP4, -MXFP4,
# AMD's gpt-oss with fp8 activations, AWQ / GPTQ / w4a16 int4). A release tag after it
# (-Preview, -v2) names the same weights.
VARIANT_SUFFIXES = (
    ("-fp8-dynamic", "fp8"),
    ("-fp8-kv", "fp8"),
    ("-w-mxfp4-a-fp8", "mxfp4-a-fp8"),
    ("-fp8", "fp8"),
    ("-nvfp4", "nvfp4"),
    ("-fp4", "nvfp4"),
    ("-mxfp4", "mxfp4"),
    ("-awq", "int4"),
    ("-awq-int4", "int4"),
    ("-gptq-int4", "int4"),
    ("-quantized.w4a16", "int4"),
)
RELEASE_TAG = re.compile(r"(-preview|-v\d+)$", re.IGNORECASE)
# Releases that keep an earlier one's architecture (every shape field of config.json), posed
# on its config: DeepSeek-V3.1 / -Terminus on V3's (as R1 is: their configs agree), the R1
# distill of Llama on Llama-3.3-70B-Instruct (its base), MiniMax-M2 / M2.1 on M2.5's (the M2
# series shares one geometry: ai-dynamo/aiconfigurator commit 1266c183, "identical to M2.5").
# Their published config.json files agree in every shape the planner reads (layers, heads, KV
# heads, hidden and MLP sizes, vocabulary, tied embeddings, context; as published on the Hub,
# not re-read from this repository's copies, which hold the targets only): the
# Llama 2 chat models and their bases; the R1 distills of Qwen 32B / 7B and Llama 8B and
# Qwen2.5-32B / -7B and Llama-3.1-8B; Qwen3-Next's Instruct and Thinking releases; DeepSeek-V3.2
# and V3.2-Exp (V3.2's model card: the same architecture).
SAME_ARCHITECTURE = {
    "deepseek-v3.1": "deepseek-v3",
    "deepseek-v3.1-terminus": "deepseek-v3",
    "deepseek-v3.2-exp": "deepseek-v3.2",
    "deepseek-r1-distill-llama-70b": "llama-3.3-70b-instruct",
    "deepseek-r1-distill-llama-8b": "llama-3.1-8b",
    "deepseek-r1-distill-qwen-32b": "qwen2.5-32b",
    "deepseek-r1-distill-qwen-7b": "qwen2.5-7b",
    "llama-2-7b-chat-hf": "llama-2-7b-hf",
    "llama-2-13b-chat-hf": "llama-2-13b-hf",
    "llama-2-70b-chat-hf": "llama-2-70b-hf",
    "minimax-m2": "minimax-m2.5",
    "minimax-m2.1": "minimax-m2.5",
    "qwen3-next-80b-a3b-instruct": "qwen3-next-80b-a3b-thinking",
}


# A row's stated weight precision -> the weights it poses: the first word of its text that
# names a format ("fp8 (block)", "FP4", "int4 AWQ", "W8A8-FP8"); a 16-bit word first means
# 16-bit weights ("bf16, fp8 KV"). A bare "fp4" is NVIDIA's NVFP4 on NVIDIA cards and the OCP
# MXFP4 AMD Instinct cards run (AMD Quark's exports). INT8 is posed as the planner's int8
# W8A8 variant (int8 weights and activations); so is a bare W8A8 (SmoothQuant's and
# compressed-tensors' int8 scheme), unless a word after it names FP8 ("W8A8 FP8"). W4A8
# (4-bit weights, 8-bit activations) is posed as 4-bit weights (an FP4 format named after it, as
# that format), float8 / e4m3 as fp8.
SIXTEEN_BIT_WORDS = ("bf16", "fp16", "fp32", "float16", "bfloat16")
# Bit-width schemes that name no number format ("W4A16"): a 4-bit float format named after one
# ("W4A16 MXFP4", gpt-oss's weight-only MXFP4 on Hopper) is the weights' format.
WEIGHT_BIT_SCHEMES = ("w4a16", "w4a8")
FP4_FORMATS = ("mxfp4", "nvfp4")
FP8_WORDS = ("fp8", "float8", "e4m3")
PRECISION_WORDS = (
    *((word, "fp8") for word in FP8_WORDS),
    ("w8a8", "int8"),
    ("w4a8", "int4"),
    ("nvfp4", "nvfp4"),
    ("mxfp4", "mxfp4"),
    ("fp4", "fp4"),
    ("int4", "int4"),
    ("awq", "int4"),
    ("gptq", "int4"),
    ("w4a16", "int4"),
    ("int8", "int8"),
)


def words_of(text: str) -> list[str]:
    """A precision text's words, lower case ("W8A8-FP8" -> ["w8a8", "fp8"])."""
    return re.findall(r"[a-z0-9]+", text.lower())


def row_weights(row: dict[str, object], fields: tuple[str, ...], vendor: str) -> str | None:
    """The weight format the first of a row's `fields` that states one names (stated_weights;
    None: 16 bits, or none stated): a field naming 16 bits ends the search."""
    for field in fields:
        text = str(row.get(field) or "")
        got = stated_weights(text, vendor)
        if got is not None:
            return got
        if any(w.startswith(SIXTEEN_BIT_WORDS) for w in words_of(text)):
            return None
    return None


def stated_weights(text: str, vendor: str) -> str | None:
    """The weight format a row's precision text names (None: 16-bit, or none named)."""
    words = words_of(text)
    for i, word in enumerate(words):
        if word.startswith(SIXTEEN_BIT_WORDS):
            return None
        for prefix, dtype in PRECISION_WORDS:
            if word.startswith(prefix):
                if dtype == "fp4":
                    return "mxfp4" if vendor == "amd" else "nvfp4"
                if prefix == "w8a8" and any(w.startswith(FP8_WORDS) for w in words[i + 1 :]):
                    return "fp8"
                if prefix in WEIGHT_BIT_SCHEMES:  # "W4A16 MXFP4": the format it names after
                    named = stated_weights(" ".join(words[i + 1 :]), vendor)
                    if named in FP4_FORMATS:
                        return named
                return dtype
    return None


# Meta's own FP8 exports of Llama 3.1 (meta-llama/...-FP8) quantize the MLPs only, with FBGEMM
# row-wise FP8: every layer's attention and the first and last layers stay bf16 (The Llama 3
# Herd of Models, 2024, section 6.2; the checkpoints list them in modules_to_not_convert).
META_FP8_PREFIX = "meta-llama/"


def meta_fp8_config(base: Path, name: str) -> Path | None:
    """A folder holding the config.json of Meta's FP8 export of the Llama 3 model in `base`
    (None for another family: Llama 4's exports keep other layers, and are posed at fp8)."""
    cfg = json.loads((base / "config.json").read_text())
    if cfg.get("model_type") != "llama" or "num_hidden_layers" not in cfg:
        return None
    n = int(cfg["num_hidden_layers"])
    skip = [f"model.layers.{i}.self_attn.{p}_proj" for i in range(n) for p in "qkvo"]
    skip += [f"model.layers.{i}.mlp.{p}_proj" for i in (0, n - 1) for p in ("gate", "up", "down")]
    cfg["quantization_config"] = {
        "activation_scale_ub": 1200.0,
        "modules_to_not_convert": [*skip, "lm_head"],
        "quant_method": "fbgemm_fp8",
    }
    return derived_config(cfg, name)


# Qwen's and Z.ai's own FP8 releases (Qwen/...-FP8, zai-org/...-FP8) store block-scaled fp8, one
# scale per 128 x 128 tile: their configs say so (tests/data/models: Qwen3-235B-A22B-FP8,
# Qwen3-30B-A3B-FP8, Qwen3-32B-FP8, GLM-5-FP8, GLM-5.1-FP8, all quant_method fp8 with
# weight_block_size [128, 128]). An export of theirs with no config here is posed on its base
# model's config with that quantization (not an online per-tensor fp8, which the engines
# multiply with other kernels).
BLOCK_FP8_PUBLISHERS = ("qwen/", "zai-org/")
BLOCK_FP8 = {
    "activation_scheme": "dynamic",
    "fmt": "e4m3",
    "quant_method": "fp8",
    "weight_block_size": [128, 128],
    "modules_to_not_convert": ["lm_head"],
}


def block_fp8_config(base: Path, name: str) -> Path:
    """A folder holding the config.json of a publisher's block-scaled FP8 export of the model in
    `base` (BLOCK_FP8_PUBLISHERS)."""
    cfg = json.loads((base / "config.json").read_text())
    cfg["quantization_config"] = dict(BLOCK_FP8)
    return derived_config(cfg, name)


# AMD's re-export of an MXFP4 gpt-oss with fp8 activations (amd/gpt-oss-120b-w-mxfp4-a-fp8), posed
# as an AMD Quark checkpoint of the same experts: MXFP4 weights (a scale per 32) and fp8 inputs,
# as its name states; the layers OpenAI's export keeps in bf16 excluded alike (an estimate: the
# planner sizes and prices the formats, not the export's own file).
AMD_MXFP4_FP8 = "mxfp4-a-fp8"
QUARK_MXFP4_FP8 = {
    "quant_method": "quark",
    "global_quant_config": {
        "weight": {"dtype": "fp4", "qscheme": "per_group", "group_size": 32},
        "input_tensors": {"dtype": "fp8_e4m3", "qscheme": "per_tensor"},
    },
}


def quark_mxfp4_fp8_config(base: Path, name: str) -> Path | None:
    """A folder holding the config.json of AMD's fp8-activation export of the OpenAI MXFP4
    checkpoint in `base` (None for a base in another format)."""
    cfg = json.loads((base / "config.json").read_text())
    q = cfg.get("quantization_config")
    if not isinstance(q, dict) or q.get("quant_method") != "mxfp4":
        return None
    kept = list(q.get("modules_to_not_convert") or [])
    cfg["quantization_config"] = QUARK_MXFP4_FP8 | {"exclude": kept}
    return derived_config(cfg, name)


def derived_config(cfg: dict[str, object], name: str) -> Path:
    """A folder under the temporary directory holding `cfg` as checkpoint `name`'s config.json
    (the configs this module derives: meta_fp8_config, quark_mxfp4_fp8_config,
    sibling_config)."""
    out = Path(tempfile.gettempdir()) / "planner-bench-configs" / name.replace("/", "--")
    out.mkdir(parents=True, exist_ok=True)
    (out / "config.json").write_text(json.dumps(cfg))
    return out


# Checkpoints posed on a sibling's geometry at their own context: the sibling's config with
# the fields that differ set back (every other shape field agrees).
# - Llama 3 (April 2024) has Llama 3.1's geometry at 8,192 tokens and without 3.1's RoPE
#   scaling: Meta-Llama-3-8B / -70B(-Instruct) config.json set max_position_embeddings 8192
#   and rope_scaling null, where 3.1's set 131072 and the llama3 scaling.
# - Qwen2.5's Instruct models have their base's geometry at 32,768 tokens where the base has
#   131,072 (the 7B and 1.5B pairs in tests/data/models differ in that field alone among the
#   shape fields; the 72B, 32B and 14B Instruct configs on the Hub set 32768 as well).
# - Qwen2's 0.5B / 1.5B / 7B / 72B are the geometry Qwen2.5 kept at those sizes (Qwen2.5
#   changed the data, not the architecture), at the same contexts (bases 131,072, Instruct
#   32,768).
# - Mistral-7B-Instruct-v0.2 is v0.3's geometry with the 32,000-token vocabulary v0.3 extended
#   to 32,768 (Mistral's v0.3 release notes); both have no sliding window and RoPE theta 1e6.
# - Qwen3's July 2025 updates (Qwen3-235B-A22B / -30B-A3B -Instruct-2507 and -Thinking-2507)
#   and Qwen3-Coder-30B-A3B-Instruct keep Qwen3-235B-A22B's / -30B-A3B's geometry (layers, Q / KV
#   heads, experts and experts a token: their model cards) at 262,144 tokens natively (their
#   model cards: "Context Length: 262,144 natively"), where Qwen3's first releases set 40,960.
# A quantized export of one takes its sibling's own export where one is here (Qwen's FP8
# releases: block-scaled, as BLOCK_FP8_PUBLISHERS says), else the sibling with the export's
# weights.
QWEN3_2507_CONTEXT = 262144
QWEN2_SIZES = r"(?P<size>0\.5b|1\.5b|7b|72b)"
SIBLINGS = (
    (
        re.compile(r"^(meta-)?llama-3-(?P<size>8b|70b)(?P<tuned>-instruct)?$", re.IGNORECASE),
        ("llama-3.1-{size}{tuned}", "llama-3.1-{size}-instruct", "llama-3.1-{size}"),
        {"max_position_embeddings": 8192, "rope_scaling": None},
    ),
    (
        re.compile(r"^qwen2\.5-(?P<size>\d+(\.\d+)?b)-instruct$", re.IGNORECASE),
        ("qwen2.5-{size}",),
        {"max_position_embeddings": 32768},
    ),
    (
        re.compile(rf"^qwen2-{QWEN2_SIZES}-instruct$", re.IGNORECASE),
        ("qwen2.5-{size}",),
        {"max_position_embeddings": 32768},
    ),
    (re.compile(rf"^qwen2-{QWEN2_SIZES}$", re.IGNORECASE), ("qwen2.5-{size}",), {}),
    (
        re.compile(r"^mistral-7b-instruct-v0\.2$", re.IGNORECASE),
        ("mistral-7b-instruct-v0.3",),
        {"vocab_size": 32000},
    ),
    (
        re.compile(r"^qwen3-(?P<size>235b-a22b|30b-a3b)-(instruct|thinking)-2507$", re.IGNORECASE),
        ("qwen3-{size}",),
        {"max_position_embeddings": QWEN3_2507_CONTEXT},
    ),
    (
        re.compile(r"^qwen3-coder-30b-a3b-instruct$", re.IGNORECASE),
        ("qwen3-30b-a3b",),
        {"max_position_embeddings": QWEN3_2507_CONTEXT},
    ),
)


def sibling_config(
    folders: dict[str, Path], stem: str, name: str, weights: str | None
) -> tuple[Path, str | None] | None:
    """A folder holding the config.json of checkpoint `name` (its `stem` without an export's
    suffix), from its sibling's (SIBLINGS), and the export's weights left to pose: an FP8
    export on the sibling's own FP8 release where one is here (its quantization in its
    config), else on the sibling with `weights`. None: not one of them, or no sibling config
    here to derive it from."""
    if stem.lower() in folders:
        return None  # its own config is here
    for pattern, candidates, fields in SIBLINGS:
        found = pattern.match(stem)
        if found is None:
            continue
        words = {k: (v or "").lower() for k, v in found.groupdict().items()}
        for candidate in candidates:
            sibling = candidate.format(**words)
            own_export = folders.get(f"{sibling}-fp8") if weights == "fp8" else None
            folder = own_export or folders.get(sibling)
            if folder is None:
                continue
            cfg = json.loads((folder / "config.json").read_text()) | fields
            return derived_config(cfg, name), None if own_export else weights
    return None


# NVIDIA's own FP4 exports (nvidia/...-FP4, -NVFP4: TensorRT Model Optimizer's NVFP4) keep some
# layers out of FP4 and store an FP8 KV cache scale; their hf_quant_config.json says which
# (tests/data/models: nvidia--Qwen3-235B-A22B-NVFP4 keeps the routers and lm_head,
# nvidia--DeepSeek-V3.1-NVFP4 the MLA projections, lm_head and the MTP layer). An export of
# theirs whose config is not here is posed on their export of the same model under another
# name, or of a release of the same architecture (DeepSeek-V3 and R1 on V3.1's: one geometry,
# SAME_ARCHITECTURE; the recipe taken to be the same, an estimate), not on the base config
# with every linear layer in FP4.
NVFP4_PUBLISHER = "nvidia/"
NVFP4_FOLDER = NVFP4_PUBLISHER.replace("/", "--")
NVFP4_SAME_RECIPE = {"deepseek-r1": "deepseek-v3.1", "deepseek-v3": "deepseek-v3.1"}


def checkpoint_config(name: str, models: Path) -> tuple[Path | None, str | None]:
    """The config folder for a checkpoint, and the weights of a quantized export of it: the
    folder of the same name, else the base model's (the export's suffix, a date revision such
    as -0528 or an -Instruct / Meta- spelling dropped), with the suffix's weights; an FP8
    export whose base ships its own FP8 checkpoint takes that one's config as it is,
    Meta's own FP8 exports the config of their mixed precision (meta_fp8_config), AMD's
    fp8-activation gpt-oss a Quark config (quark_mxfp4_fp8_config), NVIDIA's FP4 exports the
    config of theirs of the same architecture (NVFP4_SAME_RECIPE), and Llama 3, Qwen2 /
    Qwen2.5 Instruct, Mistral-7B-Instruct-v0.2 and Qwen3's 2507 and Coder releases a
    sibling's with the fields that differ set back (sibling_config)."""
    if not models.is_dir():
        return None, None
    folders = {f.name.partition("--")[2].lower(): f for f in sorted(models.iterdir()) if f.is_dir()}
    exact = models / name.replace("/", "--")
    if exact.is_dir():
        return exact, None
    base = name.rpartition("/")[2]
    while RELEASE_TAG.search(base):
        base = RELEASE_TAG.sub("", base)
    weights = None
    for suffix, dtype in VARIANT_SUFFIXES:
        if base.lower().endswith(suffix):
            base, weights = base[: -len(suffix)], dtype
            break
    stems = [base, re.sub(r"-\d{4}$", "", base)]
    stems = [t for s in stems for t in (s, s.removeprefix("Meta-"))]
    stems = [t for s in stems for t in (s, s.removesuffix("-Instruct"), s + "-Instruct")]
    stems += [SAME_ARCHITECTURE[t.lower()] for t in stems if t.lower() in SAME_ARCHITECTURE]
    derived = sibling_config(folders, base, name, weights)
    if derived is not None:
        return derived
    if weights == "fp8":
        for stem in stems:
            if f"{stem}-fp8".lower() in folders:
                return folders[f"{stem}-fp8".lower()], None
    if weights == "nvfp4" and name.lower().startswith(NVFP4_PUBLISHER):
        for stem in stems + [NVFP4_SAME_RECIPE.get(t.lower(), t) for t in stems]:
            folder = folders.get(f"{stem}-nvfp4".lower())
            if folder is not None and folder.name.lower().startswith(NVFP4_FOLDER):
                return folder, None
    for stem in stems:
        if stem.lower() in folders:
            if weights == AMD_MXFP4_FP8:
                quark = quark_mxfp4_fp8_config(folders[stem.lower()], name)
                return (quark, None) if quark is not None else (folders[stem.lower()], "mxfp4")
            if weights == "fp8" and name.lower().startswith(META_FP8_PREFIX):
                mixed = meta_fp8_config(folders[stem.lower()], name)
                if mixed is not None:
                    return mixed, None
            if weights == "fp8" and name.lower().startswith(BLOCK_FP8_PUBLISHERS):
                return block_fp8_config(folders[stem.lower()], name), None
            return folders[stem.lower()], weights
    return None, None


def model_reference(name: str, models: Path) -> tuple[str | None, str | None]:
    """A row's model as `planner --model` takes it, and the weights of a quantized export of it:
    a shipped config (checkpoint_config), else the checkpoint's own name where the planner can
    read it the way `planner simulate --model NAME` does (the Hub, or its cache offline), so a
    row of a model no config here stands for is still posed; (None, None) where neither can. A
    repo id has no spaces: what follows one is a note ("X (FP8 via --quantization fp8)")."""
    name = (name.split() or [""])[0]
    if not name:
        return None, None
    folder, weights = checkpoint_config(name, models)
    if folder is not None:
        return str(folder), weights
    return (name, None) if hub_readable(name) else (None, None)


@functools.cache
def hub_readable(name: str) -> bool:
    """Whether the planner reads this checkpoint's config from the Hub or its local cache (one
    try per name: offline, each name costs the planner's --timeout once)."""
    try:
        resolve_model(None, name)
    except PlannerError:
        return False
    return True


# A memory size a row's description states ("... Superchip 144GB", "MI300X (192 GB)").
STATED_MEMORY = re.compile(r"(?<![\w.])(\d{2,3})\s?GB\b", re.IGNORECASE)


def uncounted(text: str | None) -> str | None:
    """`text` without the count of cards it states (presets.without_count)."""
    return without_count(text) if text else text


def catalog_gpu(short: str | None, full: str | None, table: dict[str, str]) -> str | None:
    """The catalog id of a row's GPU: the benchmark's own table for its short name, else the
    catalog's names and aliases for it (either one yielding to the card of that chip with the
    memory the description states, where the catalog has one: a GH200 of 144GB is not the 96GB
    card), else the card the full description names as `--gpu` reads a name, else the catalog
    card whose device name (as NVML / the driver reports it) the description contains, the
    longest such name winning, else a table name standing as a whole word in the description
    (None where nothing matches: an H100 64GB HBM2e is not an H100 80GB HBM3, nor the B200 of
    a GB200 a B200); a count of cards stated with it ("8x H100") is not part of the name."""
    short, full = uncounted(short), uncounted(full)
    found = table.get(short or "")
    for spelling in (short, (short or "").replace(" ", "-")):
        if found is None and spelling:
            try:
                found = find_gpu(spelling).id
            except PlannerError:
                continue
    if found is not None:
        return sized_card(short or "", found, full or "")
    if full:
        try:
            return find_gpu(full).id  # the planner's own spelling rules ("NVIDIA H100 SXM5 80GB")
        except PlannerError:
            pass
    text = f"{full or ''} {short or ''}".lower()  # a short name with more words: "B200 (HGX)"
    named = [
        (len(name), card.id)
        for card in gpu_catalog()
        for name in (*card.device_names, card.name)
        if name and whole_word(name, text)
    ]
    if named:
        return max(named)[1]
    for key in sorted(table, key=len, reverse=True):
        if whole_word(key, text):
            return table[key]
    return None


def sized_card(short: str, found: str, full: str) -> str:
    """`found`, or the card of its chip that the row's description `full` names (the planner's
    own spelling rules: "NVIDIA H100 PCIe 80GB") or, failing that, the card of chip `short`
    with the memory `full` states ("GH200 Grace Hopper Superchip 144GB"; of `found`'s form
    factor where the size names several: "NVIDIA A100 40GB"), where the catalog holds one; a
    size no card of the chip has keeps `found`."""
    stated = STATED_MEMORY.search(full)
    spellings = [full] + ([f"{short} {stated.group(1)}GB"] if stated else [])
    for spelling in spellings:
        try:
            card = find_gpu(spelling).id
        except PlannerError:
            continue
        if card.partition("-")[0] == found.partition("-")[0]:
            return card
    if stated:
        # a size that names the chip's cards of every form factor ("A100 40GB": PCIe and SXM4)
        # is the one of `found`'s form factor where the catalog has it at that size
        same_form = f"{found.rpartition('-')[0]}-{stated.group(1)}gb"
        if any(card.id == same_form for card in gpu_catalog()):
            return same_form
    return found


def whole_word(name: str, text: str) -> bool:
    """Whether `name` stands in lower-case `text` as a whole word: "NVIDIA A10" is not in
    "NVIDIA A100-80G", nor "B200" in "GB200"."""
    return re.search(rf"(?<![\w-]){re.escape(name.lower())}(?![\w-])", text) is not None


# Engine settings a row may carry, in either engine's spelling (its engine_config keys, or
# the server flags its notes quote) -> the benchmark setting each one sets.
ROW_SETTINGS = {
    "max_num_seqs": "max_num_seqs",
    "max_running_requests": "max_num_seqs",
    "max_num_batched_tokens": "max_num_batched_tokens",
    "chunked_prefill_size": "max_num_batched_tokens",
    "gpu_memory_utilization": "memory_fraction",
    "mem_fraction_static": "memory_fraction",
    "block_size": "block_size",
    "page_size": "block_size",
    "max_model_len": "context_tokens",
    "context_length": "context_tokens",
    "ep_num_redundant_experts": "ep_num_redundant_experts",
    "stream_interval": "stream_interval",
    "scheduler_recv_interval": "scheduler_recv_interval",
    "max_prefill_tokens": "max_prefill_tokens",
    "cuda_graph_max_bs": "cuda_graph_max_bs_decode",
    "moe_dense_tp_size": "moe_dense_tp_size",
}
# The settings above that are SGLang's flags alone (a vLLM row's are not its server's).
SGLANG_ROW_SETTINGS = frozenset(
    {
        "scheduler_recv_interval",
        "max_prefill_tokens",
        "cuda_graph_max_bs_decode",
        "moe_dense_tp_size",
    }
)


def engine_settings(row: dict[str, object]) -> dict[str, int | float]:
    """The server settings a row states: its engine_config, else the `--flag value` pairs its
    notes quote. "default", "auto" and SGLang's -1 (off) leave the engine's own value."""
    given: dict[str, object] = {}
    notes = str(row.get("notes") or "")
    # a bare flag (--enable-dp-attention) takes no value: the next flag is not its value
    for flag, value in re.findall(r"--([a-z][a-z0-9-]*)[ =](?!--)([^\s,;]+)", notes):
        given[flag.replace("-", "_")] = value
    config = row.get("engine_config")
    if isinstance(config, dict):
        given |= config  # the structured field wins over prose
    out: dict[str, int | float] = {}
    for key, value in given.items():
        target = ROW_SETTINGS.get(key)
        if target is None:
            continue
        try:
            number = float(str(value).rstrip("."))
        except ValueError:
            continue
        if target == "memory_fraction":
            if 0 < number <= 1:
                out[target] = number
        elif number >= 1 and number == int(number):
            out[target] = int(number)
    return out


# SGLang engine fields a row's notes may quote: the MoE all-to-all backend (a word), two-batch
# overlap, the attention-DP groups' own lm_head and the radix cache turned off (bare flags).
SGLANG_WORD_FLAGS = {"moe_a2a_backend": ("none", "deepep", "mori")}
SGLANG_BARE_FLAGS = ("enable_two_batch_overlap", "enable_dp_lm_head", "disable_radix_cache")


# The MoE all-to-all each engine's model prices: vLLM its default gather and reduce-scatter and
# DeepEP's two modes (--all2all-backend), SGLang none, DeepEP or AMD's MoRI (--moe-a2a-backend).
# A row that runs another (vLLM's MoRI or pplx kernels, SGLang's Mooncake EP) is refused, not
# posed on the default exchange.
MODELLED_ALL_TO_ALL = {
    "vllm": PRICED_ALL2ALL,
    "sglang": SGLANG_WORD_FLAGS["moe_a2a_backend"],
}
ALL_TO_ALL_SPELLINGS = {
    "vllm": (
        "all2all_backend",
        r"--all2all-backend[ =]([a-z0-9_]+)",
        r"VLLM_ALL2ALL_BACKEND=([a-z0-9_]+)",
    ),
    "sglang": ("moe_a2a_backend", r"--moe-a2a-backend[ =]([a-z0-9_]+)", None),
}


def stated_all_to_all(row: dict[str, object], family: str) -> str | None:
    """The MoE all-to-all backend a row states (its engine_config, else its notes' flag or
    environment), in lower case; None where it states none."""
    field, flag, env = ALL_TO_ALL_SPELLINGS[family]
    notes = str(row.get("notes") or "")
    config = row.get("engine_config")
    stated = config.get(field) if isinstance(config, dict) else None
    for pattern in (flag, env):
        found = re.search(pattern, notes) if pattern and stated is None else None
        stated = found.group(1) if found else stated
    return None if stated is None else str(stated).lower()


def unmodelled_all_to_all(row: dict[str, object], family: str) -> str | None:
    """The MoE all-to-all backend a row states that the engine's model does not price (None:
    none stated, or one it does)."""
    stated = stated_all_to_all(row, family)
    return None if stated in (None, *MODELLED_ALL_TO_ALL[family]) else stated


# vLLM engine fields a row may state as a bare flag or its negation: async scheduling (a
# --no- form turns off what 0.14 turns on by default), dual-batch overlap and prefix caching.
VLLM_SWITCH_FLAGS = ("async_scheduling", "enable_dbo", "enable_prefix_caching")


def vllm_fields(row: dict[str, object]) -> dict[str, object]:
    """The vLLM engine fields a row states in its engine_config or its notes' flags."""
    notes = str(row.get("notes") or "")
    config = row.get("engine_config")
    given: dict[str, object] = dict(config) if isinstance(config, dict) else {}
    out: dict[str, object] = {}
    backend = stated_all_to_all(row, "vllm")
    if backend in MODELLED_ALL_TO_ALL["vllm"]:
        out["all2all_backend"] = backend
    for field in VLLM_SWITCH_FLAGS:
        flag = field.replace("_", "-")
        stated = stated_switch(given.get(field))
        if stated is not None:
            out[field] = stated
        elif re.search(r"--no-" + re.escape(flag) + r"(?![\w-])", notes):
            out[field] = False
        elif re.search(r"--" + re.escape(flag) + r"(?![\w-])", notes):
            out[field] = True
    return out


def sglang_fields(row: dict[str, object]) -> dict[str, object]:
    """The SGLang engine fields a row states in its engine_config or its notes' flags."""
    notes = str(row.get("notes") or "")
    config = row.get("engine_config")
    given: dict[str, object] = dict(config) if isinstance(config, dict) else {}
    out: dict[str, object] = {}
    for field, words in SGLANG_WORD_FLAGS.items():
        flag = "--" + field.replace("_", "-")
        found = re.search(re.escape(flag) + r"[ =]([a-z_]+)", notes)
        value = str(given.get(field) or (found.group(1) if found else ""))
        if value in words:
            out[field] = value
    for field in SGLANG_BARE_FLAGS:
        flag = "--" + field.replace("_", "-")
        if re.search(re.escape(flag) + r"(?![\w-])", notes) or given.get(field) in (True, "true"):
            out[field] = True
    return out
