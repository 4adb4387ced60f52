"""Plots of one fleet: what it is made of, and how each class fares against its SLO.

Main entries (each accepts a result object, its ``to_dict()``, or the list of records):

* :func:`plot_fleet_composition`: replicas (or GPUs) per pool, from records with ``config``,
  ``count`` and optionally ``region`` and ``utilization`` (``fleetplan simulate``'s ``pools`` or
  ``fleetplan solve``'s ``fleet``); the title counts spot replicas (``market``) and spares
  (``spare``) when the records carry them.
* :func:`plot_class_latency`: each class's P99 TTFT next to its SLO, from records with ``name``,
  ``ttft_p99_ms``, ``slo_ttft_p99_ms`` and optionally ``ttft_p99_ci_ms`` ([lo, hi]) and
  ``met``/``slo_met`` (``classes`` of the simulate and solve JSON), and the replica model's
  error band ``ttft_p99_band_ms`` ([lo, hi], solve) drawn in grey beside the interval.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

import numpy as np
import pandas as pd
from matplotlib.axes import Axes
from matplotlib.lines import Line2D
from matplotlib.patches import Patch
from matplotlib.ticker import FuncFormatter, LogLocator, NullFormatter

from fleetplan.catalog.hardware import HardwareConfig
from fleetplan.errors import InputError
from fleetplan.viz.style import (
    MET_COLOR,
    MISSED_COLOR,
    REFERENCE_COLOR,
    as_frame,
    integer_axis,
    label_for,
    new_axes,
    style_map,
)
from fleetplan.viz.text import plain_plot


def _records(data: Any, keys: tuple[str, ...], required: tuple[str, ...], what: str
             ) -> pd.DataFrame:
    """The first of ``keys`` that a dict/result holds, or ``data`` itself when it is records."""
    if isinstance(data, pd.DataFrame | list | tuple):
        return as_frame(data, required=required, what=what)
    d = data.to_dict() if hasattr(data, "to_dict") and not isinstance(data, dict) else data
    if isinstance(d, dict):
        for k in keys:
            if k in d:
                return as_frame(d[k], required=required, what=f"{what} ({k})")
        raise InputError(f"{what}: expected one of {', '.join(keys)} in the result "
                         f"(has: {', '.join(map(str, d))})")
    return as_frame(data, required=required, what=what)


def _n(count: object, noun: str) -> str:
    n = int(count)  # type: ignore[call-overload]
    return f"{n} {noun}{'' if n == 1 else 's'}"


def _gpus(config: str) -> int:
    return HardwareConfig.split(config)[0]


@plain_plot
def plot_fleet_composition(fleet: Any, *, unit: str = "replicas", ax: Axes | None = None) -> Axes:
    """Horizontal bars: replicas (``unit="replicas"``) or GPUs (``unit="gpus"``) per pool.

    One bar per pool (its ``pool`` name when the records carry one, e.g. one per SLO tier, else
    configuration @ region), coloured by configuration; the label at the end of each bar gives
    replicas, GPUs and, when the records carry it, utilization. The count axis has whole-number
    ticks only. The title counts spot replicas (``market``) and spares (``spare``) when the
    records carry them.
    """
    if unit not in ("replicas", "gpus"):
        raise InputError(f"unit {unit!r}: expected 'replicas' or 'gpus'")
    df = _records(fleet, ("pools", "fleet"), ("config", "count"), "plot_fleet_composition")
    df = df[df["count"] > 0].copy()
    if df.empty:
        raise InputError("plot_fleet_composition: the fleet is empty")
    if "region" not in df.columns:
        df["region"] = ""
    df["gpus"] = [int(c) * _gpus(cfg) for cfg, c in zip(df["config"], df["count"], strict=True)]
    if "pool" not in df.columns:
        df["pool"] = [f"{c} @ {r}" if r else c for c, r in
                      zip(df["config"], df["region"], strict=True)]
    df = df.sort_values(["config", "region", "pool"], kind="mergesort").reset_index(drop=True)
    ax = new_axes(ax, figsize=(7.0, max(2.5, 1.2 + 0.5 * len(df))))
    styles = style_map(df["config"])
    values = df["count"] if unit == "replicas" else df["gpus"]
    labels = [str(p) for p in df["pool"]]
    y = np.arange(len(df))
    seen: set[str] = set()
    for i, rec in enumerate(df.to_dict("records")):
        color = styles[rec["config"]][0]
        label = rec["config"] if rec["config"] not in seen else None
        seen.add(rec["config"])
        ax.barh(y[i], values.iloc[i], color=color, label=label)
        note = f"{_n(rec['count'], 'replica')}, {_n(rec['gpus'], 'GPU')}"
        util = rec.get("utilization")
        if util is not None and not (isinstance(util, float) and math.isnan(util)):
            note += f", {100 * float(util):.0f}% busy"
        ax.annotate(note, (values.iloc[i], y[i]), xytext=(4, 0), textcoords="offset points",
                    va="center", fontsize="small")
    ax.set_yticks(y, labels)
    ax.invert_yaxis()
    ax.set_xlabel("replicas" if unit == "replicas" else "GPUs")
    ax.set_xlim(0, float(values.max()) * 1.6)
    integer_axis(ax.xaxis)
    total_r, total_g = int(df["count"].sum()), int(df["gpus"].sum())
    extra = []
    if "market" in df.columns:
        spot = int(df.loc[df["market"] == "spot", "count"].sum())
        if spot:
            extra.append("all spot" if spot == total_r else f"{spot} spot")
    if "spare" in df.columns:
        spares = int(pd.to_numeric(df["spare"], errors="coerce").fillna(0).sum())
        if spares:
            extra.append(_n(spares, "spare"))  # for churn, redundancy or both
    ax.set_title(f"Fleet: {_n(total_r, 'replica')}" + (f" ({', '.join(extra)})" if extra else "")
                 + f", {_n(total_g, 'GPU')}", fontsize="medium")
    ax.grid(True, axis="x", alpha=0.3)
    return ax


@plain_plot
def plot_class_latency(classes: Any, *, metric: str = "ttft_p99_ms", ax: Axes | None = None,
                       logy: bool | None = None) -> Axes:
    """Per class: simulated P99 (bar, with its 95% interval when given) against the SLO (tick).

    Bars of classes that met their SLO are green, missed ones vermillion and hatched (so the
    difference survives greyscale and colour-vision deficiencies). ``met`` (solve) or
    ``slo_met`` (simulate) decides; without either, the bar is compared with the SLO. The
    interval comes from ``<metric>_ci_ms`` ([lo, hi]) or ``<metric>_ci_lo_ms``/``_ci_hi_ms``.
    The replica model's own error band, ``<metric>_band_ms`` ([lo, hi], or ``_band_lo_ms`` /
    ``_band_hi_ms``: where the real P99 fell for 80% of held-out runs, solve's plans), is drawn in
    grey beside the interval, with its own legend entry.
    ``logy=None`` picks a log axis when the values span more than a factor of 10 (a 100 ms bar
    beside a 2 s SLO stays readable). Given a whole plan (a result or its ``to_dict()`` with
    ``fleet`` and ``cost_per_hour_usd``), the title also names the fleet and its cost.
    """
    slo_col = f"slo_{metric}"
    df = _records(classes, ("classes",), ("name", metric), "plot_class_latency")
    if df.empty:
        raise InputError("plot_class_latency: no classes")
    ax = new_axes(ax, figsize=(max(4.0, 1.4 * len(df) + 2), 4.5))
    x = np.arange(len(df))
    slo = df[slo_col] if slo_col in df.columns else pd.Series([None] * len(df))
    met_col = "met" if "met" in df.columns else "slo_met" if "slo_met" in df.columns else None
    banded = False
    for i, rec in enumerate(df.to_dict("records")):
        value = rec[metric]
        target = slo.iloc[i]
        if met_col is not None:
            met = bool(rec[met_col])
        else:
            met = target is None or pd.isna(target) or (value is not None and value <= target)
        height = float(value) if value is not None and not pd.isna(value) else 0.0
        ax.bar(x[i], height, width=0.6, color=MET_COLOR if met else MISSED_COLOR,
               hatch=None if met else "//", edgecolor="white" if met else REFERENCE_COLOR)
        stem = metric.removesuffix("_ms")
        ci = rec.get(f"{stem}_ci_ms")  # ttft_p99_ci_ms: [lo, hi] (JSON); split in frames
        if ci is None and f"{stem}_ci_lo_ms" in rec:
            ci = [rec[f"{stem}_ci_lo_ms"], rec.get(f"{stem}_ci_hi_ms")]
        if isinstance(ci, list | tuple) and any(v is None or pd.isna(v) for v in ci):
            ci = None
        if isinstance(ci, list | tuple) and len(ci) == 2:
            ax.errorbar(x[i], height, yerr=[[height - ci[0]], [ci[1] - height]],
                        color=REFERENCE_COLOR, capsize=4, linewidth=1)
        band = _band(rec, stem)
        if band is not None and height > 0:  # beside the bar's centre, so both stay readable
            ax.errorbar(x[i] + 0.18, height, yerr=[[max(height - band[0], 0.0)],
                                                    [max(band[1] - height, 0.0)]],
                        color=BAND_COLOR, capsize=6, linewidth=2.5, alpha=0.9)
            banded = True
        if target is not None and not pd.isna(target):
            ax.hlines(float(target), x[i] - 0.4, x[i] + 0.4, color=REFERENCE_COLOR,
                      linestyles="--", linewidth=2)
            ax.annotate(f"SLO {float(target):g} ms", (x[i] + 0.4, float(target)),
                        xytext=(0, 2), textcoords="offset points", ha="right", va="bottom",
                        fontsize="small")
    ax.set_xticks(x, list(df["name"]))
    ax.set_xlabel("traffic class")
    ax.set_ylabel(f"simulated {label_for(metric)}")
    ends = [v for rec in df.to_dict("records")
            for v in (_band(rec, metric.removesuffix("_ms")) or ())]
    shown = [float(v) for v in [*df[metric], *slo, *ends]
             if v is not None and not pd.isna(v) and v > 0]
    if logy is None:
        logy = bool(shown) and max(shown) / min(shown) > 10
    if not logy and shown:  # room above the tallest bar or SLO for the legend
        ax.set_ylim(0, max(shown) * 1.3)
    if logy:  # plain numbers at 1-2-5 steps, not powers of ten: readers compare milliseconds
        ax.set_yscale("log")
        ax.set_ylim(bottom=min(shown) / 2)
        ax.yaxis.set_major_locator(LogLocator(base=10, subs=(1.0, 2.0, 5.0)))
        ax.yaxis.set_major_formatter(FuncFormatter(lambda v, _pos: f"{v:g}"))
        ax.yaxis.set_minor_formatter(NullFormatter())
    handles = [Patch(color=MET_COLOR, label="met"),
               Patch(facecolor=MISSED_COLOR, hatch="//", edgecolor=REFERENCE_COLOR,
                     label="missed"),
               Line2D([], [], color=REFERENCE_COLOR, linestyle="--", linewidth=2, label="SLO")]
    if banded:
        handles.append(Line2D([], [], color=BAND_COLOR, linewidth=2.5,
                              label="model error band (80%)"))
    ax.legend(handles=handles, frameon=False, fontsize="small")
    title = f"{label_for(metric).split(' (')[0]} per class vs SLO"
    caption = plan_caption(classes)
    ax.set_title(title + (f"\n{caption}" if caption else ""), fontsize="medium")
    ax.grid(True, axis="y", alpha=0.3)
    return ax


BAND_COLOR = "#8c8c8c"  # the model's error band: grey, apart from the simulation's black CI


def _band(rec: Mapping[Any, Any], stem: str) -> tuple[float, float] | None:
    """A record's model-error band ``<stem>_band_ms`` ([lo, hi], or split in frames)."""
    band = rec.get(f"{stem}_band_ms")
    if band is None and f"{stem}_band_lo_ms" in rec:
        band = [rec[f"{stem}_band_lo_ms"], rec.get(f"{stem}_band_hi_ms")]
    if not isinstance(band, list | tuple) or len(band) != 2 or any(
            v is None or pd.isna(v) for v in band):
        return None
    return float(band[0]), float(band[1])


def plan_caption(plan: Any) -> str | None:
    """``fleet 1x1xH100-PCIe + 4x2xRTX-4090: $4.00/h, 37.7 g CO2e/Mtok`` for a plan (a result
    or its ``to_dict()``); None for anything without a fleet and a cost."""
    d = plan.to_dict() if hasattr(plan, "to_dict") and not isinstance(plan, dict) else plan
    if not isinstance(d, dict) or not d.get("fleet") or d.get("cost_per_hour_usd") is None:
        return None
    counts: dict[str, int] = {}  # replicas per configuration and market, over regions, tiers
    for e in d["fleet"]:
        key = e["config"] + (" (spot)" if e.get("market") == "spot" else "")
        counts[key] = counts.get(key, 0) + int(e.get("count") or 0)
    fleet = " + ".join(f"{n}x{c}" for c, n in counts.items() if n)
    out = f"fleet {fleet}: ${float(d['cost_per_hour_usd']):.2f}/h"
    g = d.get("g_co2_per_mtok")
    if isinstance(g, int | float) and not math.isnan(g):
        out += f", {float(g):.1f} g CO2e/Mtok (in+out)"
    return out

