"""The plan lock file: what a capacity plan was computed from, what it found, what to launch.

`planner capacity ... --save plan.yaml` writes one; `planner drift plan.yaml` checks reality
against it. The schema is versioned (`schema_version`) and exported to docs/plan.schema.json.
"""

from __future__ import annotations

import shlex
from typing import Any

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from planner.errors import InputError
from planner.sources.files import yaml_line_of
from planner.units import KV_DTYPES

SCHEMA_VERSION = 1


class EngineInputs(BaseModel):
    """The engine a plan was made for, with the flags given to `planner capacity`."""

    model_config = ConfigDict(extra="forbid")

    name: str = Field(description="vllm | sglang")
    version: str | None = None
    flags: dict[str, Any] = Field(default_factory=dict)


class PlanInputs(BaseModel):
    """Everything needed to recompute the plan."""

    model_config = ConfigDict(extra="forbid")

    preset: str | None = None
    model: str | None = Field(default=None, description="config path or Hub repo id")
    requested_revision: str | None = None
    revision: str | None = Field(default=None, description="the commit the config was read at")
    config_sha256: str | None = None
    gpu: str
    gpu_memory_gib: float | None = None
    ledger: str = Field(default="textbook", description="engine | textbook (older plans)")
    settings: dict[str, Any]
    engine: EngineInputs | None = None
    calibration: str | None = Field(
        default=None, description="calibration profile path (relative to the plan's folder)"
    )
    calibration_sha256: str | None = Field(
        default=None, description="sha256 of the profile's content the plan was made with"
    )


class PlanLock(BaseModel):
    """A committed capacity plan."""

    model_config = ConfigDict(extra="forbid")

    schema_version: int = Field(ge=1, description="bumped on incompatible changes")
    planner_version: str
    command: str = "capacity"
    inputs: PlanInputs
    figures: dict[str, Any] = Field(description="the numbers drift compares, by name")
    flags: dict[str, str] = Field(description="launch lines: {vllm, sglang}")


# Figures compared with --tolerance (numbers) or exactly (strings), as capacity --json names them.
FIGURE_KEYS = (
    "kv_bytes_per_token",
    "weights_bytes_per_gpu",
    "kv_pool_bytes",
    "max_seqs_contiguous",
    "max_seqs_paged",
    "operating_concurrency",
    "binding",
)
ENGINE_FIGURE_KEYS = ("kv_cache_tokens", "num_gpu_blocks", "available_kv_bytes")
# Keys `inputs.settings` may hold: the capacity settings a plan is recomputed with.
SETTING_KEYS = (
    "tp",
    "context_tokens",
    "max_model_len_auto",
    "mean_tokens",
    "block_tokens",
    "kv_dtype",
    "weight_dtype",
    "headroom_fraction",
    "workspace_bytes",
    "compute_batch_cap",
    # engine ledger (planner.core.serve.ServeSettings, and the TPOT budget it was capped for)
    "pp",
    "kv_cache_dtype",
    "dtype",
    "quantization",
    "memory_fraction",
    "max_num_seqs",
    "block_size",
    "max_num_batched_tokens",
    "extra",
    "tpot_ms",
    "offload",
    "disagg",
)


def figures_from(capacity: dict[str, Any]) -> dict[str, Any]:
    """The compared figures out of a capacity --json object (engine ones prefixed)."""
    out = {k: capacity[k] for k in FIGURE_KEYS}
    engine = capacity.get("engine")
    if engine:
        out |= {f"engine.{k}": engine[k] for k in ENGINE_FIGURE_KEYS}
        block = (engine.get("settings") or {}).get("block_size")
        if block is not None:
            # the block the engine runs with (a hybrid model's is raised past the flag's)
            out["engine.block_size"] = block
        if engine.get("kv_dtype") is not None:
            # the KV dtype the engine runs (`auto` is fp8 where the release runs the FP8 cache a
            # checkpoint declares, or DeepSeek's sparse attention's): what its metrics report
            out["engine.kv_dtype"] = engine["kv_dtype"]
    if "fits" in capacity:
        out["fits"] = capacity["fits"]
    return out


def dump(lock: PlanLock) -> str:
    """YAML text, keys in schema order."""
    return yaml.safe_dump(lock.model_dump(), sort_keys=False, width=100)


def load(text: str, origin: str) -> PlanLock:
    """Parse and validate a plan file; errors name the line and the field."""
    from planner.sources.files import load_yaml_documents

    docs = load_yaml_documents(text, "plan", origin)
    if len(docs) != 1 or not isinstance(docs[0][1], dict):
        raise InputError("plan", f"{origin} line 1: expected one plan mapping")
    node, data = docs[0]
    version = data.get("schema_version")
    if isinstance(version, int) and version > SCHEMA_VERSION:
        raise InputError(
            "schema_version",
            f"{origin}: schema_version {version} is newer than this planner's {SCHEMA_VERSION}; "
            "upgrade planner",
        )
    try:
        lock = PlanLock.model_validate(data)
    except ValidationError as exc:
        err = exc.errors()[0]
        loc = tuple(err["loc"])
        line = yaml_line_of(node, loc)
        where = f" line {line}" if line else ""
        field = ".".join(str(p) for p in loc) or "plan"
        raise InputError(field, f"{origin}{where}: {err['msg'].lower()}") from exc
    _check_figures(lock, node, origin)
    return lock


def _check_figures(lock: PlanLock, node: yaml.Node | None, origin: str) -> None:
    """Figures are finite numbers (or the binding's word, the KV cache's dtype); settings never
    name call arguments."""
    for key, value in lock.figures.items():
        if key == "binding":
            ok = isinstance(value, str)
        elif key == "fits":
            ok = isinstance(value, bool)
        elif key == "engine.kv_dtype":
            ok = value in KV_DTYPES
        else:
            ok = _finite_number(value)
        if not ok:
            line = yaml_line_of(node, ("figures", key))
            where = f" line {line}" if line else ""
            raise InputError(f"figures.{key}", f"{origin}{where}: {value!r} is not a finite number")
    for key, value in lock.inputs.settings.items():
        if key not in SETTING_KEYS:
            line = yaml_line_of(node, ("inputs", "settings", key))
            where = f" line {line}" if line else ""
            raise InputError(
                f"inputs.settings.{key}",
                f"{origin}{where}: unknown setting; accepted: {', '.join(SETTING_KEYS)}",
            )
        flag = key == "max_model_len_auto" and isinstance(value, bool)
        if not (flag or value is None or isinstance(value, str | dict) or _finite_number(value)):
            line = yaml_line_of(node, ("inputs", "settings", key))
            where = f" line {line}" if line else ""
            raise InputError(
                f"inputs.settings.{key}", f"{origin}{where}: {value!r} is not a finite number"
            )
    for engine, command in lock.flags.items():
        line_no = yaml_line_of(node, ("flags", engine))
        where = f" line {line_no}" if line_no else ""
        if engine not in ("vllm", "sglang"):
            raise InputError(f"flags.{engine}", f"{origin}{where}: accepted engines: vllm, sglang")
        try:
            shlex.split(command)
        except ValueError as exc:
            raise InputError(f"flags.{engine}", f"{origin}{where}: {str(exc).lower()}") from exc
    if lock.inputs.gpu_memory_gib is not None and not (
        _finite_number(lock.inputs.gpu_memory_gib) and lock.inputs.gpu_memory_gib > 0
    ):
        raise InputError("inputs.gpu_memory_gib", f"{origin}: must be a finite number > 0")


def _finite_number(value: Any) -> bool:
    import math

    if isinstance(value, bool):
        return False
    if isinstance(value, int):
        return abs(value) <= 2**63
    return isinstance(value, float) and math.isfinite(value)


def json_schema() -> dict[str, Any]:
    """The lock file's JSON Schema (docs/plan.schema.json is generated from this)."""
    return PlanLock.model_json_schema()
