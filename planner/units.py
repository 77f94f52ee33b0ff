"""Unit constants and dtype widths. Bytes are ints everywhere inside the planner."""

from __future__ import annotations

import math

from planner.errors import InputError

KIB_BYTES = 1024
MIB_BYTES = 1024**2
GIB_BYTES = 1024**3  # what engines log as "GiB" (and old logs as "GB")
GB_BYTES = 10**9  # what datasheets print as "GB"

# Storage width of each dtype name the CLI accepts, in bits. int4/fp4 pack two values per byte.
DTYPE_BITS: dict[str, int] = {
    "fp32": 32,
    "fp16": 16,
    "bf16": 16,
    "fp8": 8,
    "int8": 8,
    "int4": 4,
    "fp4": 4,
}
KV_DTYPES = ("fp32", "fp16", "bf16", "fp8", "int8")
WEIGHT_DTYPES = ("fp32", "fp16", "bf16", "fp8", "int8", "int4", "fp4")

# torch_dtype spellings found in config.json -> our names.
TORCH_DTYPE_ALIASES: dict[str, str] = {
    "float32": "fp32",
    "float": "fp32",
    "float16": "fp16",
    "half": "fp16",
    "bfloat16": "bf16",
    "float8_e4m3fn": "fp8",
    "float8_e5m2": "fp8",
    "fp8_e4m3": "fp8",
    "fp8_e5m2": "fp8",
}


def normalize_dtype(name: str, field: str, accepted: tuple[str, ...]) -> str:
    """Map a user or config dtype spelling onto one of `accepted`, or raise naming `field`."""
    key = name.strip().lower()
    key = TORCH_DTYPE_ALIASES.get(key, key)
    if key not in accepted:
        raise InputError(field, f"unknown dtype {name!r}; accepted: {', '.join(accepted)}")
    return key


def dtype_bytes(name: str) -> int:
    """Whole bytes per element for a KV dtype (all KV dtypes are byte-aligned)."""
    return DTYPE_BITS[name] // 8


def bytes_for_elements(count: int, dtype: str) -> int:
    """Bytes to store `count` elements of `dtype`, rounding packed 4-bit storage up."""
    return -(-count * DTYPE_BITS[dtype] // 8)


def as_float(value: float | str) -> float:
    """`value` as a float, an integer past float's range (which JSON and YAML can spell) as
    an infinity of its sign; float()'s own errors otherwise."""
    try:
        return float(value)
    except OverflowError:
        return math.inf if int(value) > 0 else -math.inf


def ceil_div(a: int, b: int) -> int:
    """Integer ceiling division for non-negative ints."""
    return -(-a // b)
