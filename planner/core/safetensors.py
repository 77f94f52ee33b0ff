"""Parameter counts and bytes from safetensors headers (the JSON before the tensor data)."""

from __future__ import annotations

import json
import math
import struct
from typing import Any

from planner.errors import InputError

# Bytes per element of each safetensors dtype (the format's specification).
DTYPE_BYTES = {
    "F64": 8,
    "I64": 8,
    "U64": 8,
    "F32": 4,
    "I32": 4,
    "U32": 4,
    "F16": 2,
    "BF16": 2,
    "I16": 2,
    "U16": 2,
    "F8_E4M3": 1,
    "F8_E5M2": 1,
    "F8_E8M0": 1,
    "I8": 1,
    "U8": 1,
    "BOOL": 1,
}
HEADER_LENGTH_BYTES = 8  # little-endian u64 before the JSON header


def parse_header(prefix: bytes, origin: str) -> dict[str, Any]:
    """The JSON header of a safetensors file, given at least its first 8 + length bytes."""
    if len(prefix) < HEADER_LENGTH_BYTES:
        raise InputError("safetensors", f"{origin}: shorter than a header")
    (length,) = struct.unpack("<Q", prefix[:HEADER_LENGTH_BYTES])
    body = prefix[HEADER_LENGTH_BYTES : HEADER_LENGTH_BYTES + length]
    if len(body) < length:
        raise InputError("safetensors", f"{origin}: header truncated")
    try:
        header = json.loads(body)
    except ValueError as exc:
        raise InputError("safetensors", f"{origin}: header is not JSON") from exc
    if not isinstance(header, dict):
        raise InputError("safetensors", f"{origin}: header is not a JSON object")
    return header


def count_parameters(header: dict[str, Any]) -> dict[str, int]:
    """Elements per dtype over every tensor of one header."""
    counts: dict[str, int] = {}
    for name, info in header.items():
        if name == "__metadata__" or not isinstance(info, dict):
            continue
        dtype = str(info.get("dtype"))
        counts[dtype] = counts.get(dtype, 0) + math.prod(int(d) for d in info.get("shape", []))
    return counts


def total_bytes(counts: dict[str, int]) -> int:
    """Tensor bytes for per-dtype element counts (unknown dtypes counted at one byte)."""
    return sum(n * DTYPE_BYTES.get(dtype, 1) for dtype, n in counts.items())
