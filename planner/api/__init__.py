"""Name-based entry points shared by the CLI and the Python API (same validation, same numbers).

One module per command; this package re-exports them.
"""

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
from planner.api.latency import derived_cost_model, derived_step_model, roofline_for, sim_cost_from
from planner.api.simulate import load_workload, simulation
from planner.api.slo import read_fit_points, slo_advice
from planner.api.spec import parse_floats, parse_ks, spec_advice

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
