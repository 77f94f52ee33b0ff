"""Name-based entry points shared by the CLI and the Python API (same validation, same numbers).

One module per command; this package re-exports them, each imported when first used.
"""

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from planner.api.capacity import (
        DEFAULT_CONTEXT_TOKENS,
        capacity_plan,
        capacity_report,
        lock_for,
        serve_lock,
        serve_report,
        settings_error,
    )
    from planner.api.drift import drift_report, parse_tolerance
    from planner.api.engines import SIZED_QUANTIZATIONS, engine_plan, from_log_report
    from planner.api.latency import (
        derived_cost_model,
        derived_step_model,
        roofline_for,
        sim_cost_from,
    )
    from planner.api.simulate import load_workload, simulation
    from planner.api.slo import read_fit_points, slo_advice
    from planner.api.spec import parse_floats, parse_ks, spec_advice

# Each name and its module: a name is imported on first use, so a command that needs one
# module (`planner capacity`) does not pay for the others.
_MODULES = {
    "DEFAULT_CONTEXT_TOKENS": "planner.api.capacity",
    "capacity_plan": "planner.api.capacity",
    "capacity_report": "planner.api.capacity",
    "lock_for": "planner.api.capacity",
    "serve_lock": "planner.api.capacity",
    "serve_report": "planner.api.capacity",
    "settings_error": "planner.api.capacity",
    "drift_report": "planner.api.drift",
    "parse_tolerance": "planner.api.drift",
    "SIZED_QUANTIZATIONS": "planner.api.engines",
    "engine_plan": "planner.api.engines",
    "from_log_report": "planner.api.engines",
    "derived_cost_model": "planner.api.latency",
    "derived_step_model": "planner.api.latency",
    "roofline_for": "planner.api.latency",
    "sim_cost_from": "planner.api.latency",
    "load_workload": "planner.api.simulate",
    "simulation": "planner.api.simulate",
    "read_fit_points": "planner.api.slo",
    "slo_advice": "planner.api.slo",
    "parse_floats": "planner.api.spec",
    "parse_ks": "planner.api.spec",
    "spec_advice": "planner.api.spec",
}


__all__ = [
    "DEFAULT_CONTEXT_TOKENS",
    "SIZED_QUANTIZATIONS",
    "capacity_plan",
    "capacity_report",
    "derived_cost_model",
    "derived_step_model",
    "drift_report",
    "engine_plan",
    "from_log_report",
    "load_workload",
    "lock_for",
    "parse_floats",
    "parse_ks",
    "parse_tolerance",
    "read_fit_points",
    "roofline_for",
    "serve_lock",
    "serve_report",
    "settings_error",
    "sim_cost_from",
    "simulation",
    "slo_advice",
    "spec_advice",
]


def __getattr__(name: str) -> Any:
    """Import a re-exported name from its module on first use."""
    module = _MODULES.get(name)
    if module is None:
        raise AttributeError(f"module 'planner.api' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value
