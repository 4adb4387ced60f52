"""Plots for notebooks and ``--plot FILE``: matplotlib, colour-blind-safe, axes with units.

Each function takes plain data (a DataFrame with documented columns, records, or a result object
with ``to_frame()``/``to_dict()``), draws on the given ``ax`` or a new one, and returns the Axes.
:func:`save_figure` writes PNG or SVG, deterministically. Names (classes, pools, regions,
configurations) are drawn as written: never as matplotlib math (a ``$`` stays a ``$``), with
U+FFFD for a character text cannot carry (:mod:`fleetplan.viz.text`).
"""

from fleetplan.viz.fleet import plot_class_latency, plot_fleet_composition
from fleetplan.viz.plans import hours_frame, pareto_mask, plot_frontier, plot_hourly_plan
from fleetplan.viz.profiles import plot_latency_vs_rate, plot_scaling
from fleetplan.viz.style import OKABE_ITO, label_for, save_figure

__all__ = [
    "OKABE_ITO",
    "hours_frame",
    "label_for",
    "pareto_mask",
    "plot_class_latency",
    "plot_fleet_composition",
    "plot_frontier",
    "plot_hourly_plan",
    "plot_latency_vs_rate",
    "plot_scaling",
    "save_figure",
]
