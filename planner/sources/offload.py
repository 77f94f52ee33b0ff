"""Edges of the KV offload plan: an LMCache configuration (file or LMCACHE_* variables) and
this host's memory."""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any

from pydantic import ValidationError

from planner.core.offload import LmcacheConfig
from planner.errors import InputError
from planner.sources.files import ARGS_LIMIT_BYTES, load_yaml_documents, read_text

# The LMCache keys that size its tiers and their environment variables (LMCache reads
# LMCACHE_<KEY upper-cased>, and LMCACHE_CONFIG_FILE for a YAML file: lmcache/v1/config.py).
LMCACHE_KEYS = (
    "chunk_size",
    "local_cpu",
    "max_local_cpu_size",
    "local_disk",
    "max_local_disk_size",
)
LMCACHE_CONFIG_ENV = "LMCACHE_CONFIG_FILE"
# /proc/meminfo reports kB (KiB).
MEMINFO_UNIT_BYTES = 1024


def lmcache_config(path: str | None, env: Mapping[str, str] | None = None) -> LmcacheConfig:
    """LMCache's sizing keys from `path` (or $LMCACHE_CONFIG_FILE), else LMCACHE_* variables."""
    env = os.environ if env is None else env
    field = "--lmcache-config"
    path = path or env.get(LMCACHE_CONFIG_ENV)
    values: dict[str, Any] = {}
    origin = "LMCACHE_* environment variables"
    if path:
        origin = path
        docs = load_yaml_documents(read_text(path, field, ARGS_LIMIT_BYTES), field, path)
        data = docs[0][1] if docs else {}
        if not isinstance(data, dict):
            raise InputError(field, f"{path}: expected a mapping of LMCache settings")
        values = {k: data[k] for k in LMCACHE_KEYS if k in data and data[k] is not None}
    else:
        for key in LMCACHE_KEYS:
            raw = env.get(f"LMCACHE_{key.upper()}")
            if raw is not None and raw != "":
                values[key] = (
                    raw.strip().lower() in ("1", "true", "yes") if key == "local_cpu" else raw
                )
    try:
        return LmcacheConfig(**values)
    except ValidationError as exc:
        err = exc.errors()[0]
        key = str(err["loc"][0]) if err["loc"] else "settings"
        raise InputError(field, f"{origin}: {key}: {err['msg'].lower()}") from exc


def host_memory_bytes(path: str = "/proc/meminfo") -> int | None:
    """This host's total memory, or None where it cannot be read."""
    try:
        with open(path, encoding="ascii") as handle:
            for line in handle:
                if line.startswith("MemTotal:"):
                    return int(line.split()[1]) * MEMINFO_UNIT_BYTES
    except (OSError, ValueError, IndexError, UnicodeDecodeError):
        return None
    return None
