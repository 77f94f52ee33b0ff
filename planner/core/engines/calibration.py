"""A calibration profile: per-deployment corrections to the engine model, measured from logs.

A start-up log prints some of the terms the engine model predicts (total memory, weights,
activation peak, non-torch memory, CUDA-graph estimate) or at least the KV budget they leave.
Each measured term becomes one correction, applied the way that term behaves when the settings
change (docs/calibrate.md):

    absolute  the logged value itself          total memory (a property of the device)
    ratio     modelled now x logged / modelled  weights, activation peak, CUDA graphs (they
              at the log's settings            scale with TP, batch and capture sizes)
    offset    modelled now + (logged -          non-torch memory, and the whole non-KV remainder
              modelled at the log's settings)  when a log prints only the budget it leaves (a
                                               KV connector's buffers, when the log names one)

At the log's own settings every rule reproduces the logged term; elsewhere it carries the
deployment's difference from the model.
"""

from __future__ import annotations

import statistics
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from planner.core.engines.common import TermSource
from planner.errors import InputError

SCHEMA_VERSION = 1
How = Literal["absolute", "ratio", "offset"]
TermName = Literal[
    "total_memory_bytes",
    "weights_bytes",
    "activation_peak_bytes",
    "non_torch_bytes",
    "cudagraph_bytes",
    "connector_bytes",
    "pre_load_free_bytes",
]
# How each term is carried to other settings (the module docstring).
HOW: dict[str, How] = {
    "total_memory_bytes": "absolute",
    "pre_load_free_bytes": "absolute",
    "weights_bytes": "ratio",
    "activation_peak_bytes": "ratio",
    "cudagraph_bytes": "ratio",
    "non_torch_bytes": "offset",
    "connector_bytes": "offset",
}
CALIBRATED: TermSource = "your-logs"


class TermCalibration(BaseModel):
    """One term's correction: a value (absolute), a factor (ratio) or bytes added (offset)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    term: TermName
    how: How
    value: float = Field(description="bytes (absolute, offset) or a factor (ratio)")
    basis: str = Field(description="what was measured, in words")
    logs: int = Field(ge=1, description="how many logs measured it")

    def apply(self, modelled_bytes: int) -> int:
        """The term at other settings, from the modelled value there."""
        if self.how == "absolute":
            return round(self.value)
        if self.how == "ratio":
            return round(modelled_bytes * self.value)
        return max(0, modelled_bytes + round(self.value))


class CalibrationLog(BaseModel):
    """One log a profile was measured from."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    path: str
    sha256: str
    engine_version: str | None
    settings: dict[str, object]
    kv_cache_tokens: int | None
    available_kv_bytes: int | None


class StepCalibration(BaseModel):
    """Corrections to the step-time model fitted on your serving benchmarks: HBM-read time
    scaled (ratio: carried to other batches and contexts in proportion to the bytes read) and
    a fixed time per step added (offset: the host and kernel time the model misses)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    memory_scale: float = Field(gt=0, le=100, description="measured / modelled HBM-read time")
    step_offset_ms: float = Field(ge=-1000, le=1000, description="ms added to every step")
    basis: str = Field(description="what was measured, in words")
    results: int = Field(ge=1, description="how many benchmark results it was fitted on")


# The benchmark clients whose reading pace `simulate` prices (planner.core.step.overhead).
BenchClient = Literal["vllm", "sglang"]


class BenchRecord(BaseModel):
    """One serving-benchmark result a profile's step terms were fitted on."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    path: str
    sha256: str
    max_concurrency: int | None
    request_rate: float | None
    burstiness: float | None = Field(
        default=None, gt=0, description="vllm bench serve's gamma shape (1 or None: Poisson)"
    )
    completed: int
    mean_input_tokens: float
    mean_output_tokens: float
    median_tpot_ms: float
    output_throughput: float
    client: BenchClient | None = Field(
        default=None,
        description="the client that read the streams: sglang (sglang.bench_serving's native "
        "stream), vllm (an OpenAI stream), None: not stated (the engine's own)",
    )


class Calibration(BaseModel):
    """A calibration profile (YAML, docs/calibrate.md), applied by the engine models."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    schema_version: Literal[1] = 1  # SCHEMA_VERSION
    kind: Literal["planner-calibration"] = "planner-calibration"
    engine: Literal["vllm", "sglang"]
    engine_version: str
    gpu: str = Field(description="catalog id of the card the logs ran on")
    model: str
    tensor_parallel_size: int = Field(ge=1)
    pipeline_parallel_size: int = Field(ge=1)
    terms: tuple[TermCalibration, ...] = ()
    logs: tuple[CalibrationLog, ...] = ()
    step: StepCalibration | None = Field(
        default=None, description="step-time corrections from `calibrate --bench`"
    )
    benchmarks: tuple[BenchRecord, ...] = ()

    def fingerprint(self) -> str:
        """sha256 of the profile's content (key order and YAML layout do not matter)."""
        import hashlib
        import json

        text = json.dumps(self.model_dump(), sort_keys=True, separators=(",", ":"))
        return hashlib.sha256(text.encode()).hexdigest()

    def term(self, name: str) -> TermCalibration | None:
        """The correction for one term, if the logs measured it."""
        return next((t for t in self.terms if t.term == name), None)


def correct(
    calibration: Calibration | None,
    name: str,
    modelled_bytes: int,
    sources: dict[str, TermSource],
) -> int:
    """A term with the profile's correction applied (and its source marked), or as modelled."""
    t = calibration.term(name) if calibration else None
    if t is None:
        return modelled_bytes
    sources[name] = CALIBRATED
    return t.apply(modelled_bytes)


def measure(name: str, logged_bytes: int, modelled_bytes: int, basis: str) -> TermCalibration:
    """One log's correction for one term (a ratio needs a modelled value above zero)."""
    how = HOW[name]
    if how == "ratio" and modelled_bytes <= 0:
        how = "offset"  # the model says 0 (e.g. no graph estimate): carry the logged bytes
    if how == "absolute":
        value = float(logged_bytes)
    elif how == "ratio":
        value = logged_bytes / modelled_bytes
    else:
        value = float(logged_bytes - modelled_bytes)
    return TermCalibration.model_validate(
        {"term": name, "how": how, "value": value, "basis": basis, "logs": 1}
    )


def combine(per_log: list[list[TermCalibration]]) -> tuple[TermCalibration, ...]:
    """One correction per term over several logs: the median of the logs that measured it."""
    by_term: dict[str, list[TermCalibration]] = {}
    for terms in per_log:
        for t in terms:
            by_term.setdefault(t.term, []).append(t)
    out = []
    for found in by_term.values():
        hows = [t.how for t in found]
        how = max(dict.fromkeys(hows), key=hows.count)  # the rule most logs allowed
        same = [t for t in found if t.how == how]
        value = statistics.median(t.value for t in same)
        out.append(same[0].model_copy(update={"value": value, "logs": len(same)}))
    return tuple(sorted(out, key=lambda t: list(HOW).index(t.term)))


def cal_notes(
    cal: Calibration, engine: str, version: str, gpu: str, model: str, tp: int, pp: int
) -> list[str]:
    """What a calibration profile was measured on, where that differs from this plan."""
    if cal.engine != engine:
        raise InputError(
            "--calibration", f"the profile was measured on {cal.engine}, this plan is {engine}"
        )
    if cal.gpu != gpu:
        raise InputError(
            "--calibration",
            f"the profile was measured on {cal.gpu}, this plan is for {gpu} (its total memory "
            "and non-torch terms are the card's own)",
        )
    terms = ", ".join(t.term.removesuffix("_bytes").replace("_", " ") for t in cal.terms)
    count = f"{len(cal.logs)} log{'' if len(cal.logs) == 1 else 's'} of {cal.model}"
    out = [f"calibrated from your logs ({count}): {terms}"]
    differs = [
        f"{what} {theirs} (here {mine})"
        for what, theirs, mine in (
            ("engine version", cal.engine_version, version),
            ("model", cal.model, model),
            ("TP", cal.tensor_parallel_size, tp),
            ("PP", cal.pipeline_parallel_size, pp),
        )
        if str(theirs) != str(mine)
    ]
    if differs:
        out.append(
            "the profile's logs differ from this plan in " + ", ".join(differs) + ": its "
            "corrections are carried over by rule (docs/calibrate.md), not measured"
        )
    return out
