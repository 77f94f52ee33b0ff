"""Test helpers shared by several modules (tests/ is on sys.path under pytest)."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

DATA = Path(__file__).parent / "data"
MODELS = DATA / "models"


@dataclass
class Result:
    code: int
    out: str
    err: str

    def json(self) -> Any:
        return json.loads(self.out)


def model_config(name: str) -> dict[str, Any]:
    """A real config.json from tests/data/models (copied verbatim from ../shared/models)."""
    return json.loads((MODELS / name / "config.json").read_text())
