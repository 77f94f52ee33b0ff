"""Resolve `--preset` / `--model` (local file, folder or Hub id) into a ModelSpec."""

from __future__ import annotations

from typing import Any

from planner.core.hf_config import model_spec_from_config
from planner.core.safetensors import total_bytes
from planner.core.specs import ModelSpec
from planner.errors import InputError
from planner.sources.files import CONFIG_LIMIT_BYTES, parse_json, read_bytes
from planner.sources.local import (
    QUANT_CONFIG_NAME,
    SAFETENSORS_INDEX_NAME,
    config_path,
    read_config_bytes,
    safetensors_counts,
    sha256_hex,
    with_quant_config,
)
from planner.sources.presets import load_model_preset

# An index claiming more than a petabyte of weights is corrupt, not a model.
MAX_WEIGHTS_BYTES = 10**15


def check_revision(model: str | None, revision: str | None) -> None:
    """--revision pins a Hub --model's config: refused where no --model is given (a command
    that plans nothing, or a preset; resolve_model refuses a local --model)."""
    if revision is not None and model is None:
        raise InputError("--revision", "pins a Hub --model's config: give --model")


def resolve_model(preset: str | None, model: str | None, revision: str | None = None) -> ModelSpec:
    """Exactly one of `preset` and `model` names the model."""
    if (preset is None) == (model is None):
        raise InputError("--preset/--model", "give exactly one of --preset NAME or --model REF")
    if preset is not None:
        if revision is not None:
            raise InputError("--revision", "pins a Hub --model's config; a preset's is shipped")
        return load_model_preset(preset)
    assert model is not None
    path = config_path(model)
    if path is not None:
        if revision is not None:
            raise InputError("--revision", f"pins a Hub --model's config; {model} is a local one")
        raw = read_bytes(str(path), "--model", CONFIG_LIMIT_BYTES)
        total = None
        index = path.parent / SAFETENSORS_INDEX_NAME
        if index.is_file():
            try:
                meta = parse_json(read_bytes(str(index), "--model", CONFIG_LIMIT_BYTES), "", "")
                total = int(meta["metadata"]["total_size"])
            except (InputError, ValueError, KeyError, TypeError, OverflowError):
                total = None  # an unreadable index: weights are estimated instead
            if total is not None and not 0 < total < MAX_WEIGHTS_BYTES:
                total = None
        quant = path.parent / QUANT_CONFIG_NAME
        cfg = with_quant_config(
            read_config_bytes(raw, str(path)),
            read_bytes(str(quant), "--model", CONFIG_LIMIT_BYTES)
            if path.name == "config.json" and quant.is_file()
            else None,
            str(quant),
        )
        counts = safetensors_counts(path.parent) if path.name == "config.json" else None
        params = None
        if counts:
            total = total or total_bytes(counts)
            params = None if "quantization_config" in cfg else sum(counts.values())
        return _from_config(
            str(path),
            cfg,
            name=path.parent.name if path.name == "config.json" else path.stem,
            source="local",
            # An engine loads a model folder or a Hub id, never a lone config file: a config
            # that is not a folder's config.json gets the $MODEL placeholder in launch lines.
            serve_id=str(path.parent) if path.name == "config.json" else None,
            config_sha256=sha256_hex(raw),
            exact_weights_bytes=total,
            exact_params=params,
        )
    from planner.errors import SourceUnavailable
    from planner.sources.hub import fetch_config
    from planner.sources.presets import preset_for_hub_id

    try:
        got = fetch_config(model, revision)
    except SourceUnavailable:
        # Offline (or the Hub unreachable) and not in the local cache: a repo whose config.json
        # ships as a preset plans from that verbatim copy (weights estimated from it).
        shipped = preset_for_hub_id(model) if revision is None else None
        if shipped is None:
            raise
        return load_model_preset(shipped)
    cfg = with_quant_config(
        read_config_bytes(got.raw, f"{model}/config.json"),
        got.quant_raw,
        f"{model}/{QUANT_CONFIG_NAME}",
    )
    params = None
    if got.parameter_counts and "quantization_config" not in cfg:
        params = sum(got.parameter_counts.values())
    return _from_config(
        f"{model}/config.json",
        cfg,
        name=model,
        source="hub",
        serve_id=model,
        revision=got.commit or revision or "main",
        config_sha256=sha256_hex(got.raw),
        exact_weights_bytes=got.total_size_bytes,
        exact_params=params,
    )


def _from_config(where: str, cfg: dict[str, Any], **fields: Any) -> ModelSpec:
    """model_spec_from_config, an error in the config naming --model and the file it is in."""
    try:
        return model_spec_from_config(cfg, **fields)
    except InputError as exc:
        if exc.field.startswith("--"):
            raise  # about a flag, not the file
        raise InputError("--model", f"{where}: {exc}") from exc
