"""Every preset loads; an installed (non-editable) copy finds its presets inside the package."""

from __future__ import annotations

from pathlib import Path

import pytest

import planner
from planner.sources.presets import (
    KINDS,
    gpu_catalog,
    load_model_preset,
    preset_names,
    preset_root,
    read_yaml,
)


@pytest.mark.parametrize("name", preset_names("models"))
def test_every_model_preset_loads(name: str) -> None:
    spec = load_model_preset(name)
    assert spec.weights_bytes > 0 and spec.kv_groups


def test_every_gpu_preset_validates_and_ids_are_unique() -> None:
    catalog = gpu_catalog()
    assert len(catalog) == len(preset_names("gpus")) >= 30
    ids = [g.id for g in catalog] + [a for g in catalog for a in g.aliases]
    assert len(ids) == len(set(ids))
    for g in catalog:
        assert g.source
    # find_gpu reads one file for a catalog id: the id must be that file's name
    assert [g.id for g in catalog] == preset_names("gpus")


def test_every_workload_preset_parses() -> None:
    for name in preset_names("workloads"):
        data = read_yaml(preset_root() / "workloads" / f"{name}.yaml", "--workload")
        assert isinstance(data, dict)


def test_installed_copy_ships_its_presets() -> None:
    package_dir = Path(planner.__file__).resolve().parent
    if (package_dir.parent / "pyproject.toml").exists():
        pytest.skip("running from a source checkout; .ci/run tests the installed wheel")
    assert preset_root() == package_dir / "_presets"
    for kind in KINDS:
        assert preset_names(kind), kind
