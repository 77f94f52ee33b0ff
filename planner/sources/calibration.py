"""Calibration profiles on disk: read (bounded, validated, errors with their line) and write."""

from __future__ import annotations

import math

import yaml
from pydantic import ValidationError

from planner.core.engines.calibration import SCHEMA_VERSION, Calibration
from planner.errors import InputError
from planner.sources.files import PLAN_LIMIT_BYTES, load_yaml_documents, read_text, yaml_line_of

FIELD = "--calibration"


def load_calibration(path: str) -> Calibration:
    """A profile written by `planner calibrate --save`."""
    text = read_text(path, FIELD, PLAN_LIMIT_BYTES)
    docs = load_yaml_documents(text, FIELD, path)
    if len(docs) != 1 or not isinstance(docs[0][1], dict):
        raise InputError(FIELD, f"{path} line 1: expected one calibration mapping")
    node, data = docs[0]
    version = data.get("schema_version")
    if isinstance(version, int) and version > SCHEMA_VERSION:
        raise InputError(
            FIELD,
            f"{path}: schema_version {version} is newer than this planner's {SCHEMA_VERSION}; "
            "upgrade planner",
        )
    try:
        cal = Calibration.model_validate(data)
    except ValidationError as exc:
        err = exc.errors()[0]
        loc = tuple(err["loc"])
        line = yaml_line_of(node, loc)
        where = ".".join(str(p) for p in loc) or "profile"
        raise InputError(FIELD, f"{path} line {line}: {where}: {err['msg'].lower()}") from exc
    for i, t in enumerate(cal.terms):
        bad = not math.isfinite(t.value) or (t.how == "ratio" and t.value <= 0)
        if bad or (t.how == "absolute" and t.value <= 0):
            line = yaml_line_of(node, ("terms", i, "value"))
            raise InputError(
                FIELD, f"{path} line {line}: terms.{t.term}: {t.value!r} is not usable"
            )
    return cal


def dump_calibration(cal: Calibration) -> str:
    """YAML text, keys in schema order."""
    return yaml.safe_dump(cal.model_dump(), sort_keys=False, width=100)
