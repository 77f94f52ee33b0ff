"""Charts as image files (the `plot` extra: matplotlib), for slo, spec and simulate."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from planner.errors import InputError


@dataclass
class Series:
    """One line of a chart; `right_axis` puts it on the second y axis."""

    label: str
    x: Sequence[float]
    y: Sequence[float]
    right_axis: bool = False


@dataclass
class Chart:
    """A line chart: series, axis labels, vertical marks."""

    title: str
    x_label: str
    y_label: str
    series: list[Series]
    right_label: str | None = None
    marks: list[tuple[float, str]] = field(default_factory=list)  # vertical lines
    log_x: bool = False


def save(chart: Chart, path: str) -> None:
    """Render to PNG/SVG/PDF (by extension) with matplotlib's headless Agg backend."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError as exc:
        raise InputError("--plot", "needs matplotlib: pip install 'serving-planner[plot]'") from exc
    fig, left = plt.subplots(figsize=(7, 4.2), dpi=120)
    right = left.twinx() if any(s.right_axis for s in chart.series) else None
    for s in chart.series:
        axis = right if s.right_axis and right is not None else left
        axis.plot(
            list(s.x),
            list(s.y),
            marker="o",
            markersize=3,
            label=s.label,
            linestyle="--" if s.right_axis else "-",
        )
    for x, label in chart.marks:
        left.axvline(x, color="grey", linewidth=1, linestyle=":")
        left.annotate(label, (x, left.get_ylim()[1]), rotation=90, va="top", ha="right", fontsize=8)
    left.set_title(chart.title)
    left.set_xlabel(chart.x_label)
    left.set_ylabel(chart.y_label)
    if chart.log_x:
        left.set_xscale("log", base=2)
    handles, labels = left.get_legend_handles_labels()
    if right is not None:
        right.set_ylabel(chart.right_label or "")
        more = right.get_legend_handles_labels()
        handles, labels = handles + more[0], labels + more[1]
    left.legend(handles, labels, fontsize=8, loc="best")
    left.grid(alpha=0.3)
    fig.tight_layout()
    try:
        fig.savefig(path)
    except (OSError, ValueError) as exc:
        raise InputError("--plot", f"{path}: {exc}") from exc
    finally:
        plt.close(fig)
