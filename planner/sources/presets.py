"""Built-in presets: YAML under `presets/` (shipped in the wheel as `planner/_presets`)."""

from __future__ import annotations

import difflib
import hashlib
import json
import re
from functools import cache
from pathlib import Path
from typing import Any

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from planner.core.hf_config import model_spec_from_config
from planner.core.specs import GpuSpec, ModelSpec
from planner.errors import InputError
from planner.units import DTYPE_BITS, ceil_div

KINDS = ("models", "gpus", "workloads")


class ModelPreset(BaseModel):
    """A model preset: a config.json (inline or a file beside it) plus what we know of it."""

    model_config = ConfigDict(extra="forbid")

    description: str
    config: str | dict[str, Any]
    serve_id: str | None = None
    params: int | None = Field(default=None, gt=0, description="parameter count to plan with")
    total_size_bytes: int | None = Field(default=None, gt=0, description="safetensors total_size")


@cache
def preset_root() -> Path:
    """The presets folder: inside the installed package, else the source checkout's."""
    installed = Path(__file__).resolve().parent.parent / "_presets"
    if installed.is_dir():
        return installed
    return Path(__file__).resolve().parent.parent.parent / "presets"


def preset_names(kind: str) -> list[str]:
    """Names of the presets of one kind, sorted."""
    return sorted(p.stem for p in (preset_root() / kind).glob("*.yaml"))


def unknown_name_error(field: str, kind: str, name: str, known: list[str]) -> InputError:
    """An InputError that suggests the closest known names."""
    close = difflib.get_close_matches(name.lower(), known, n=3, cutoff=0.5)
    hint = f"; did you mean {', '.join(close)}?" if close else ""
    return InputError(field, f"unknown {kind} {name!r}{hint} (see `planner presets`)")


# libyaml's C loader where PyYAML was built with it (PyPI wheels are): the same safe subset,
# ~10x faster on the GPU catalog than the pure-Python loader (benchmarks/startup.py).
SAFE_LOADER: Any = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


def read_yaml(path: Path, field: str) -> Any:
    """Parse one shipped preset YAML file, turning syntax errors into a one-line InputError."""
    try:
        return yaml.load(path.read_text(encoding="utf-8"), Loader=SAFE_LOADER)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" line {mark.line + 1}" if mark is not None else ""
        raise InputError(field, f"{path}{where}: invalid YAML") from exc


def validation_message(exc: ValidationError) -> str:
    """The first pydantic error as `field.path: message`."""
    err = exc.errors()[0]
    loc = ".".join(str(p) for p in err["loc"])
    return f"{loc}: {err['msg']}"


def preset_for_hub_id(repo_id: str) -> str | None:
    """The model preset whose serve_id is this Hub id (case-insensitive), if one ships."""
    key = repo_id.strip().lower()
    for name in preset_names("models"):
        data = read_yaml(preset_root() / "models" / f"{name}.yaml", "--model")
        if isinstance(data, dict) and str(data.get("serve_id") or "").lower() == key:
            return name
    return None


def load_model_preset(name: str, field: str = "--preset") -> ModelSpec:
    """Build the ModelSpec of a named model preset."""
    names = preset_names("models")
    if name not in names:
        raise unknown_name_error(field, "model preset", name, names)
    path = preset_root() / "models" / f"{name}.yaml"
    try:
        preset = ModelPreset.model_validate(read_yaml(path, field))
    except ValidationError as exc:
        raise InputError(field, f"{path}: {validation_message(exc)}") from exc
    if isinstance(preset.config, str):
        raw = (path.parent / preset.config).read_bytes()
        cfg = json.loads(raw)
        source = f"preset {name} (config {preset.config})"
    else:
        cfg = preset.config
        raw = json.dumps(cfg, sort_keys=True).encode()
        source = f"preset {name}"
    spec = model_spec_from_config(
        cfg,
        name=name,
        source=source,
        serve_id=preset.serve_id,
        config_sha256=hashlib.sha256(raw).hexdigest(),
        exact_weights_bytes=preset.total_size_bytes,
    )
    if preset.params is not None:
        bits = DTYPE_BITS[spec.native_dtype]
        spec = spec.model_copy(
            update={
                "params_total": preset.params,
                "params_active": preset.params,
                "quantizable_params": preset.params,
                "weights_bytes": ceil_div(preset.params * bits, 8),
                "weights_basis": (
                    f"preset parameter count ({preset.params:,}) x {spec.native_dtype}"
                ),
            }
        )
    return spec


@cache
def gpu_preset(name: str) -> GpuSpec:
    """One GPU preset by file name (its catalog id), validated."""
    path = preset_root() / "gpus" / f"{name}.yaml"
    try:
        return GpuSpec.model_validate(read_yaml(path, "--gpu"))
    except ValidationError as exc:
        raise InputError("--gpu", f"{path}: {validation_message(exc)}") from exc


@cache
def gpu_catalog() -> tuple[GpuSpec, ...]:
    """Every GPU preset, validated."""
    return tuple(gpu_preset(name) for name in preset_names("gpus"))


def find_gpu(name: str, field: str = "--gpu") -> GpuSpec:
    """A GPU by catalog id, alias, or the device name NVML / AMD-SMI / an engine log prints."""
    key = name.strip().lower()
    if key in preset_names("gpus"):
        # A catalog id names its own file (tested): one file read instead of the catalog.
        return gpu_preset(key)
    for gpu in gpu_catalog():
        if key == gpu.id or key in gpu.aliases:
            return gpu
    for gpu in gpu_catalog():
        if any(key == d.lower() for d in gpu.device_names):
            return gpu
    bare = " ".join(_card_words(key))  # past a maker's words: "AMD MI300X", "NVIDIA H100"
    for gpu in gpu_catalog():
        if bare != key and (bare == gpu.id or bare in gpu.aliases):
            return gpu
    spelled = _cards_spelled(key)
    if len(spelled) == 1:
        return spelled[0]
    if spelled:
        ids = ", ".join(g.id for g in spelled)
        raise InputError(field, f"{name!r} names {len(spelled)} cards ({ids}): give one")
    card = without_count(key)
    if card and card != key:
        try:
            one = find_gpu(card, field)
        except InputError:
            pass
        else:
            raise InputError(
                field,
                f"{name!r} counts cards: {field} names one ({one.id}); the count is the layout "
                "(--tp, --pp, --dp)",
            )
    known = [g.id for g in gpu_catalog()] + [a for g in gpu_catalog() for a in g.aliases]
    raise unknown_name_error(field, "GPU", name, known)


# How many of a card a spelling counts: "8x H100", "8xMI300X", "H100 x8", "4*A100", "HGX B200
# (8 GPUs)" (MI300X's own X is not a count).
CARD_COUNT = re.compile(
    r"(?<![\w.])\d+\s*[x×*]\s*(?=[a-z])|\s+[x×*]\s*\d+(?![\w.])|\(\s*\d+\s*gpus?\s*\)",
    re.IGNORECASE,
)


def without_count(text: str) -> str:
    """`text` without the count of cards it states ("8x H100" is the H100)."""
    return CARD_COUNT.sub(" ", text).strip()


def card_count(text: str) -> int | None:
    """The count of cards `text` states ("8x H100", "MI300X x 8": 8), None where it states
    none."""
    found = CARD_COUNT.search(text)
    digits = re.search(r"\d+", found.group(0)) if found else None
    return int(digits.group(0)) if digits else None


# Words a card's spelling may open with that name its maker, line or the system around it
# (NVIDIA's DGX / HGX boards: "DGX B200", "HGX H100"), not the card.
MAKER_WORDS = frozenset({"nvidia", "amd", "instinct", "tesla", "geforce", "radeon", "dgx", "hgx"})
# A rack's NVLink domain after the card ("GB200 NVL72", "GB300 NVL72"): the system, not the card
# (an "H100 NVL" card has no count).
RACK_WORD = re.compile(r"nvl\d+")
MEMORY_WORD = re.compile(r"(\d+)gb")


def _cards_spelled(key: str) -> list[GpuSpec]:
    """The catalog cards a looser spelling names: its words, split at spaces, hyphens or
    underscores and past a maker's ("NVIDIA", "AMD Instinct"), are the card's chip (the id's
    first word) and the starts of its other words or its memory ("H100 SXM5", "h200-sxm",
    "A100 80GB PCIe", "AMD MI300X 192GB" name h100-sxm5-80gb, h200-sxm-141gb, a100-pcie-80gb
    and mi300x; "a100-pcie" names two)."""
    words = _card_words(key)
    if len(words) < 2:
        return []
    chip, rest = words[0], words[1:]
    found = []
    for gpu in gpu_catalog():
        parts = gpu.id.split("-")
        if parts[0] == chip and all(
            any(p.startswith(w) for p in parts[1:]) or _memory_word(w, gpu) for w in rest
        ):
            found.append(gpu)
    return found


def _card_words(key: str) -> list[str]:
    """A spelling's words, split at spaces, hyphens or underscores, past a maker's, without a
    rack's NVLink domain."""
    words = [w for w in re.split(r"[\s_-]+", key) if w]
    while words and words[0] in MAKER_WORDS:
        words = words[1:]
    return [w for w in words if not RACK_WORD.fullmatch(w)]


def _memory_word(word: str, gpu: GpuSpec) -> bool:
    """Whether `word` ("192gb") is the card's marketed memory in GB."""
    got = MEMORY_WORD.fullmatch(word)
    marketed = gpu.memory_bytes_marketed
    return bool(got and marketed and round(marketed / 1e9) == int(got.group(1)))
