"""Read a model's config.json from a local file or folder."""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Any

from planner.errors import InputError


def read_config_bytes(raw: bytes, origin: str) -> dict[str, Any]:
    """Parse config.json bytes (Python's json accepts the `Infinity` some configs carry)."""
    from planner.sources.files import parse_json

    data = parse_json(raw, "--model", origin)
    if not isinstance(data, dict):
        raise InputError("--model", f"{origin}: top level must be a JSON object")
    return data


# ModelOpt's exports before 0.31 keep their quantization beside config.json in this file, which
# vLLM reads where config.json has no quantization_config (transformers_utils/config.py, 0.34.0).
QUANT_CONFIG_NAME = "hf_quant_config.json"


def with_quant_config(cfg: dict[str, Any], raw: bytes | None, origin: str) -> dict[str, Any]:
    """`cfg` with a separate hf_quant_config.json (`raw`) as its quantization_config, where
    neither config.json nor its text_config carries one."""
    inner = cfg.get("text_config")
    carried = "quantization_config" in cfg or (
        isinstance(inner, dict) and "quantization_config" in inner
    )
    if raw is None or carried:
        return cfg
    return {**cfg, "quantization_config": read_config_bytes(raw, origin)}


def config_path(ref: str) -> Path | None:
    """The config.json a local reference points at, or None when `ref` is not a local path."""
    path = Path(ref).expanduser()
    if path.is_dir():
        candidate = path / "config.json"
        if not candidate.is_file():
            raise InputError("--model", f"{path} has no config.json")
        return candidate
    if path.is_file():
        return path
    if ref.endswith(".json") or ref.startswith((".", "/", "~")):
        raise InputError("--model", f"{ref}: no such file")
    return None


def sha256_hex(raw: bytes) -> str:
    """Hex digest used to pin the exact config a plan was computed from."""
    return hashlib.sha256(raw).hexdigest()


# Written next to sharded checkpoints; metadata.total_size is the exact bytes of every tensor.
SAFETENSORS_INDEX_NAME = "model.safetensors.index.json"


def safetensors_counts(folder: Path) -> dict[str, int] | None:
    """Elements per dtype over every *.safetensors file in a folder (headers only)."""
    from planner.core.safetensors import HEADER_LENGTH_BYTES, count_parameters, parse_header

    files = sorted(folder.glob("*.safetensors"))
    if not files:
        return None
    counts: dict[str, int] = {}
    for file in files:
        with file.open("rb") as handle:
            head = handle.read(HEADER_LENGTH_BYTES)
            length = int.from_bytes(head, "little") if len(head) == HEADER_LENGTH_BYTES else 0
            prefix = head + handle.read(length)
        for dtype, n in count_parameters(parse_header(prefix, str(file))).items():
            counts[dtype] = counts.get(dtype, 0) + n
    return counts
