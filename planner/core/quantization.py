"""The engines' names for weight quantization methods, and the releases that take each: on
their --quantization flag, and in the registry a checkpoint's own method loads from."""

from __future__ import annotations

from planner.core.engines.common import ENGINE_NAMES, version_text
from planner.core.specs import MODELOPT_MIXED_METHOD, MODELOPT_NVFP4_METHOD, ModelSpec
from planner.errors import InputError

# Quantisation labels of checkpoints (ModelSpec.weight_dtype prefixes) -> the engines'
# --quantization method names (vLLM and SGLang spell these alike).
CHECKPOINT_QUANTIZATION = {
    # before "fp8" / "mxfp4": the first matching prefix names the method
    "fp8-fbgemm": "fbgemm_fp8",
    "fp8-quark": "quark",
    "mxfp4-quark": "quark",
    "fp8": "fp8",
    "awq": "awq",
    "gptq": "gptq",
    "mxfp4": "mxfp4",
    "nvfp4": MODELOPT_NVFP4_METHOD,
    "modelopt-mixed": MODELOPT_MIXED_METHOD,
    "compressed-tensors": "compressed-tensors",
    "bnb": "bitsandbytes",
}


# ModelOpt's FP8 exports are its `modelopt` method in both engines (vLLM from 0.6.1, SGLang from
# 0.4.2): the name a line must give where the release does not map `fp8` onto it itself (vLLM
# before 0.10.0 has no ModelOptFp8Config.override_quantization_method, and with `fp8` loads the
# checkpoint as an unquantized one; SGLang's registry parses such a config as modelopt).
MODELOPT_FP8_METHOD = "modelopt"


def checkpoint_method(spec: ModelSpec) -> str | None:
    """The engines' --quantization name for a quantized checkpoint's own method (None: not
    quantized, or a method the line need not name)."""
    if spec.quantized_by_modelopt and spec.weight_dtype == "fp8":
        return MODELOPT_FP8_METHOD
    return next(
        (q for k, q in CHECKPOINT_QUANTIZATION.items() if spec.weight_dtype.startswith(k)), None
    )


# The first release whose --quantization takes each method the planner prints, read in the
# wheels: vLLM's argument choices through 0.4.0 (awq from the oldest modelled, gptq from 0.2.6),
# then its QUANTIZATION_METHODS (model_executor/layers/quantization/__init__.py), which is also
# the registry a checkpoint's own method loads from; each absent from the release before.
# SGLang's server_args.py choices: its flag lists fewer methods than its registry, and it reads
# a checkpoint's own method from the config, where SGLANG_QUANTIZATION_LOADS_SINCE says.
QUANTIZATION_FLAG_SINCE: dict[str, dict[str, tuple[int, int, int]]] = {
    "vllm": {
        "awq": (0, 2, 0),
        "gptq": (0, 2, 6),
        "fp8": (0, 4, 1),
        "gptq_marlin": (0, 4, 2),
        "compressed-tensors": (0, 5, 0),
        "bitsandbytes": (0, 5, 0),
        "fbgemm_fp8": (0, 5, 3),
        "awq_marlin": (0, 5, 3),
        "modelopt": (0, 6, 1),
        "quark": (0, 7, 0),
        "modelopt_fp4": (0, 9, 0),
        "mxfp4": (0, 10, 1),
        "modelopt_mixed": (0, 17, 0),
    },
    "sglang": {
        "awq": (0, 3, 0),
        "fp8": (0, 3, 0),
        "gptq": (0, 3, 0),
        "gptq_marlin": (0, 3, 0),
        "awq_marlin": (0, 3, 0),
        "bitsandbytes": (0, 3, 0),
        "modelopt": (0, 4, 2),
        "modelopt_fp4": (0, 4, 6),
        "mxfp4": (0, 5, 1),
        "compressed-tensors": (0, 5, 4),
        "modelopt_mixed": (0, 5, 10),
    },
}
# SGLang's quantization registry (srt/layers/quantization/__init__.py) where it loads a
# checkpoint's method before its flag lists it: compressed-tensors and FBGEMM's fp8 from 0.3.2
# (0.3.0-0.3.1 load through vLLM 0.5's registry, which has both), Quark's from 0.5.1.
SGLANG_QUANTIZATION_LOADS_SINCE = {
    "compressed-tensors": (0, 3, 0),
    "fbgemm_fp8": (0, 3, 0),
    "quark": (0, 5, 1),
}
# vLLM 0.28.0 dropped bitsandbytes from QUANTIZATION_METHODS (present in 0.27.0's).
VLLM_QUANTIZATION_REMOVED = {"bitsandbytes": (0, 28, 0)}


def _release_gap(
    engine: str, method: str, version: tuple[int, int, int], since: tuple[int, int, int] | None,
    text: str, from_words: str = "from",
) -> tuple[str, tuple[int, int, int] | None] | None:  # fmt: skip
    """`text` with why a release is outside [since, vLLM's removal of `method`), and the first
    release inside (None: no newer one); None where it is inside."""
    if since is not None and version < since:
        return f"{text} ({from_words} {version_text(since)})", since
    removed = VLLM_QUANTIZATION_REMOVED.get(method) if engine == "vllm" else None
    if removed is not None and version >= removed:
        return f"{text} (dropped in {version_text(removed)})", None
    return None


def flag_gap(engine: str, method: str, version: tuple[int, int, int]) -> str | None:
    """Why a release's --quantization does not take `method` (QUANTIZATION_FLAG_SINCE, vLLM's
    removals); None where it does, or for a method outside the table (left to the engine)."""
    since = QUANTIZATION_FLAG_SINCE.get(engine, {}).get(method)
    text = (
        f"{method}: {ENGINE_NAMES[engine]} {version_text(version)}'s --quantization does not "
        "take it"
    )
    gap = _release_gap(engine, method, version, since, text, "it takes it from")
    return None if gap is None else gap[0]


def load_gap(
    engine: str, method: str, version: tuple[int, int, int]
) -> tuple[str, tuple[int, int, int] | None] | None:
    """Why a release cannot load weights quantized with `method` (its registry: the flag's
    table, SGLang's own where earlier, vLLM's removals) and the first release that can (None:
    no newer one); None where it loads them."""
    since = QUANTIZATION_FLAG_SINCE.get(engine, {}).get(method)
    if engine == "sglang":
        since = SGLANG_QUANTIZATION_LOADS_SINCE.get(method, since)
    text = f"{ENGINE_NAMES[engine]} {version_text(version)} cannot load {method} weights"
    return _release_gap(engine, method, version, since, text)


def checkpoint_load_gap(
    model: ModelSpec, engine: str, version: tuple[int, int, int]
) -> tuple[str, tuple[int, int, int] | None] | None:
    """load_gap for the method a quantized checkpoint stores (None: not quantized, or loaded)."""
    method = checkpoint_method(model)
    return None if method is None else load_gap(engine, method, version)


def check_quantization_loads(
    engine: str, method: str, version: tuple[int, int, int], flag: str
) -> None:
    """Refuse, by `flag`, weights in `method` a release cannot load (load_gap)."""
    gap = load_gap(engine, method, version)
    if gap is not None:
        raise InputError(flag, gap[0])


def check_flag_takes(engine: str, method: str, version: tuple[int, int, int], flag: str) -> None:
    """Refuse, by the flag typed, a --quantization method the release's parser does not take
    (flag_gap)."""
    why = flag_gap(engine, method, version)
    if why is not None:
        raise InputError(flag, why)
