"""Plots of the optimizer's answers: the cost frontier and the hourly plan of a diurnal scenario.

Main entries:

* :func:`plot_frontier`: cost against carbon (or against the swept SLO or rate), one point per
  solve, the Pareto-optimal ones joined by a step line and labelled with their fleet. Input:
  records or a frame with the ``x`` and ``y`` columns, optionally ``status`` (``infeasible``
  points are counted, not drawn), ``pareto`` (bool; computed when absent), ``label`` (the
  fleet) and ``slo_class`` (the class whose SLO ``slo_ttft_p99_ms`` is), or a result with
  ``to_frame()``. The cost axis starts at zero.
* :func:`plot_hourly_plan`: replicas per configuration for each hour (stacked; on-demand replicas
  hatched) with the offered rate on a second axis. Input: the ``hours`` of a plan (records with
  ``hour``, ``rate_rps``, ``fleet`` and optionally ``on_demand``, each a list of ``{config,
  count, region}``), a plan or its ``to_dict()``, or a long frame (``hour``, ``config``,
  ``count``, optionally ``kind`` = base/on_demand and ``rate_rps``) as :func:`hours_frame` makes.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd
from matplotlib.artist import Artist
from matplotlib.axes import Axes
from matplotlib.patches import Patch

from fleetplan.errors import InputError
from fleetplan.viz.style import (
    REFERENCE_COLOR,
    as_frame,
    color_for,
    integer_axis,
    label_for,
    new_axes,
    style_map,
)
from fleetplan.viz.text import plain_plot

LABEL_LINE = 32  # a frontier label longer than this is drawn one pool per line
_X_CANDIDATES = ("g_co2_per_mtok", "kg_co2_per_day", "slo_ttft_p99_ms", "rate_rps")


def pareto_mask(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """True where no other point has x <= and y <= with one of them strictly smaller."""
    keep = np.ones(len(x), dtype=bool)
    for i in range(len(x)):
        dominated = (x <= x[i]) & (y <= y[i]) & ((x < x[i]) | (y < y[i]))
        keep[i] = not dominated.any()
    return keep


@plain_plot
def plot_frontier(points: Any, *, x: str | None = None, y: str = "cost_per_hour_usd",
                  ax: Axes | None = None, annotate: bool | None = None,
                  xlabel: str | None = None, label_note: str | None = None) -> Axes:
    """Cost vs carbon (or the swept quantity): every feasible solve, the frontier highlighted.

    ``x`` defaults to the first of ``g_co2_per_mtok``, ``kg_co2_per_day``, ``slo_ttft_p99_ms``,
    ``rate_rps`` present in the data. Each frontier point is labelled with the ``label`` column
    (the fleet) when there is one (``annotate=False``: not). The x axis of an SLO names its class
    (from ``slo_class``, or give ``xlabel``). The y axis starts at zero, so plans that differ by
    a few cents do not look a factor apart. Points whose ``outcome`` (when given) is not
    ``verified``, or whose ``status`` is ``infeasible``, are not drawn; the title counts them in
    the words of their outcome. ``label_note``: what a label says, as the legend's title.
    Between two points the line shows the cost of the plan that serves the values in between:
    a plan verified at a carbon cap or SLO scale serves every looser one (the line runs right
    from it), one verified at a confidence, rate or failure rate every lower one (left).
    """
    df = as_frame(points, required=(y,), what="plot_frontier")
    if x is None:
        found = [c for c in _X_CANDIDATES if c in df.columns]
        if not found:
            raise InputError(f"plot_frontier: no x column (expected one of "
                             f"{', '.join(_X_CANDIDATES)}; has: {', '.join(map(str, df.columns))})")
        x = found[0]
    elif x not in df.columns:
        raise InputError(f"plot_frontier: no column {x!r} (has: {', '.join(map(str, df.columns))})")
    if "outcome" in df.columns:  # fleetplan.optimize.frontier's words: verified or not
        why = df["outcome"].astype(str).where(df["outcome"].astype(str) != "verified")
    elif "status" in df.columns:
        why = df["status"].astype(str).where(df["status"].astype(str) == "infeasible")
    else:
        why = pd.Series(None, index=df.index, dtype=object)
    hidden = why.notna()
    ok = df[~hidden & df[x].notna() & df[y].notna()].copy()
    if ok.empty:
        raise InputError("plot_frontier: no feasible point to plot")
    xs, ys = ok[x].astype(float).to_numpy(), ok[y].astype(float).to_numpy()
    front = ok["pareto"].astype(bool).to_numpy() if "pareto" in ok.columns else pareto_mask(xs, ys)
    ax = new_axes(ax)
    order = np.argsort(xs[front], kind="mergesort")
    fx, fy = xs[front][order], ys[front][order]
    # each plan's cost holds over the values it also serves: a plan verified at a carbon cap
    # (or an SLO scale) serves every looser one, to its right, while one verified at a
    # confidence, rate or failure rate serves every lower one, to its left. So a front whose
    # cost rises with x steps up before each point, never drawing a cost below what any plan
    # verified for the values in between
    rising = len(fy) > 1 and fy[-1] > fy[0]
    ax.step(fx, fy, where="pre" if rising else "post", color=color_for(0), linewidth=1.5,
            marker="o", label="Pareto-optimal plans")
    if (~front).any():
        ax.scatter(xs[~front], ys[~front], facecolors="none", edgecolors=color_for(1),
                   marker="s", label="dominated plans")
    if annotate is None:
        annotate = "label" in ok.columns
    annotated = bool(annotate and "label" in ok.columns)
    if annotated:
        mid = (float(xs.min()) + float(xs.max())) / 2
        for lx, ly, text in zip(fx, fy, ok["label"].to_numpy()[front][order], strict=True):
            right = len(fx) > 1 and lx > mid  # labels of the right half point left: inside
            # a long fleet one pool per line, so the labels do not crowd the axes out
            text = str(text) if len(str(text)) <= LABEL_LINE else str(text).replace(" + ",
                                                                                "\n+ ")
            ax.annotate(text, (lx, ly), xytext=(-4 if right else 4, 4),
                        textcoords="offset points", ha="right" if right else "left",
                        fontsize="x-small")
    ax.set_xlabel(xlabel or _x_label(x, ok))
    ax.set_ylabel(label_for(y))
    ax.set_ylim(bottom=0, top=max(float(ys.max()) * 1.15, 1e-9))
    counts = why.dropna().value_counts(sort=False)
    title = f"{label_for(y).split(' (')[0]} vs {label_for(x).split(' (')[0]}"
    if len(counts):
        title += " (not shown: " + ", ".join(
            f"{n} {word} point{'s' * (n > 1)}" for word, n in
            sorted(counts.items(), key=lambda kv: str(kv[0]))) + ")"
    ax.set_title(title, fontsize="medium")
    ax.grid(True, alpha=0.3)
    ax.legend(frameon=False, fontsize="small",
              title=label_note if annotated and label_note else None, title_fontsize="x-small")
    return ax


def _x_label(x: str, df: pd.DataFrame) -> str:
    if x == "slo_ttft_p99_ms" and "slo_class" in df.columns:
        names = sorted(set(df["slo_class"].dropna().astype(str)))
        if names:
            return f"P99 TTFT objective of class {', '.join(names)} (ms)"
    return label_for(x)


def hours_frame(hours: Any) -> pd.DataFrame:
    """A plan's ``hours`` as a long frame: ``hour``, ``config``, ``region``, ``count``, ``kind``
    (``base`` or ``on_demand``), ``rate_rps``, ``market`` (``on-demand`` or ``spot``)."""
    if isinstance(hours, pd.DataFrame):
        return as_frame(hours, required=("hour", "config", "count"), what="plot_hourly_plan")
    obj = hours.to_dict() if hasattr(hours, "to_dict") and not isinstance(hours, dict) else hours
    if isinstance(obj, dict):
        if not obj.get("hours"):
            raise InputError("plot_hourly_plan: the plan has no hours (not a diurnal scenario)")
        obj = obj["hours"]
    rows = []
    for h in obj:
        for kind in ("fleet", "on_demand"):
            for e in h.get(kind) or []:
                rows.append({"hour": int(h["hour"]), "config": e["config"],
                             "region": e.get("region", ""), "count": int(e["count"]),
                             "kind": "base" if kind == "fleet" else "on_demand",
                             "rate_rps": h.get("rate_rps"),
                             "market": e.get("market") or "on-demand"})
        if not (h.get("fleet") or h.get("on_demand")):  # an hour with no replicas still shows
            rows.append({"hour": int(h["hour"]), "config": None, "region": "", "count": 0,
                         "kind": "base", "rate_rps": h.get("rate_rps"), "market": "on-demand"})
    return pd.DataFrame(rows, columns=["hour", "config", "region", "count", "kind", "rate_rps",
                                       "market"])


@plain_plot
def plot_hourly_plan(hours: Any, *, ax: Axes | None = None) -> Axes:
    """Replicas per configuration per hour (stacked bars) and the offered rate (line, right axis).

    Returns the left (replicas) axes; the rate axes is its twin.
    """
    df = hours_frame(hours)
    if "kind" not in df.columns:
        df = df.assign(kind="base")
    ax = new_axes(ax, figsize=(9.0, 4.5))
    hrs = sorted(df["hour"].unique())
    configs = sorted(c for c in df["config"].dropna().unique())
    styles = style_map(configs)
    bottom = pd.Series(0.0, index=hrs)
    handles: list[Artist] = []
    for config in configs:
        color = styles[config][0]
        for kind in ("base", "on_demand"):
            part = df[(df["config"] == config) & (df["kind"] == kind)]
            if part.empty:
                continue
            counts = part.groupby("hour")["count"].sum().reindex(hrs, fill_value=0)
            on_demand = kind == "on_demand"
            ax.bar(hrs, counts.to_numpy(dtype=float), bottom=bottom.to_numpy(dtype=float),
                   color=color, width=0.8, hatch="//" if on_demand else None,
                   edgecolor="white", linewidth=0.5)
            bottom += counts.values
            handles.append(Patch(facecolor=color, hatch="//" if on_demand else None,
                                 edgecolor="white",
                                 label=f"{config} on demand" if on_demand else config))
    ax.set_xlabel("hour of day")
    ax.set_ylabel("replicas")
    integer_axis(ax.yaxis)
    ax.set_xticks(hrs)
    ax.set_xlim(min(hrs) - 0.6, max(hrs) + 0.6)
    if "rate_rps" in df.columns and df["rate_rps"].notna().any():
        rate = df.groupby("hour")["rate_rps"].first().reindex(hrs)
        twin = ax.twinx()
        (line,) = twin.plot(hrs, rate.to_numpy(dtype=float), color=REFERENCE_COLOR, marker=".",
                            label="offered rate")
        twin.set_ylabel(label_for("rate_rps"))
        twin.set_ylim(bottom=0)
        handles.append(line)
    ax.legend(handles=handles, frameon=False, fontsize="small", loc="upper center",
              bbox_to_anchor=(0.5, -0.14), ncols=min(4, len(handles)))
    title = "Hourly plan: replicas per configuration"
    if "market" in df.columns and (df["market"] == "spot").any():  # spot shares its config's bar
        spot = int(df[df["market"] == "spot"].groupby("hour")["count"].sum().max())
        title += f" (spot included: up to {spot} an hour)"
    ax.set_title(title, fontsize="medium")
    ax.grid(True, axis="y", alpha=0.3)
    return ax
