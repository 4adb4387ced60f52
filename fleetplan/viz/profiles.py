"""Plots of measured runs and of the replica model's predictions of them.

Main entries:

* :func:`plot_scaling`: the study's "target QPS vs achieved req/s" figure, one line per
  configuration, from the profile store (columns ``config``, ``request_rate``,
  ``request_throughput``; ``model`` when several models are present). Repeated runs are drawn as
  points around the line through their mean; the dashed diagonal is "achieved = target" (on a
  log rate axis both axes are logarithmic, so the diagonal is a straight line).
* :func:`plot_latency_vs_rate`: a latency metric (default ``ttft_p99_ms``) against request rate,
  measured runs as points and, when given, the model's curve with its band (columns ``config``,
  ``request_rate``, the metric, and optionally ``<metric>_lo`` / ``<metric>_hi``); with
  ``slo_ms``, the SLO as a horizontal reference line.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd
from matplotlib.axes import Axes
from matplotlib.ticker import FuncFormatter

from fleetplan.errors import InputError
from fleetplan.viz.style import REFERENCE_COLOR, as_frame, label_for, legend, new_axes, style_map
from fleetplan.viz.text import plain_plot


def _one_model(df: pd.DataFrame, model: str | None, what: str) -> tuple[pd.DataFrame, str | None]:
    """Rows of ``model``; with no model given, the data must hold at most one."""
    if "model" not in df.columns:
        return df, model
    models = sorted(df["model"].dropna().unique())
    if model is None:
        if len(models) > 1:
            raise InputError(f"{what}: {len(models)} models in the data; pick one (model=, or "
                             f"--model) (valid: {', '.join(models)})")
        return df, models[0] if models else None
    if model not in models:
        from fleetplan.errors import UnknownNameError

        raise UnknownNameError("model", model, models)
    return df[df["model"] == model], model


def _rate_axis(ax: Axes, rates: np.ndarray) -> None:
    finite = rates[np.isfinite(rates) & (rates > 0)]
    if finite.size and finite.max() / finite.min() >= 8:
        ax.set_xscale("log", base=2)
        ticks = np.unique(finite)
        ax.set_xticks(ticks, [f"{t:g}" for t in ticks])
        ax.minorticks_off()


@plain_plot
def plot_scaling(data: Any, *, model: str | None = None, ax: Axes | None = None) -> Axes:
    """Achieved throughput vs target request rate per configuration (the study's scaling figure).

    ``data``: a :class:`~fleetplan.profiles.store.ProfileStore` or a frame with columns
    ``config``, ``request_rate`` (req/s), ``request_throughput`` (completed req/s) and, when it
    holds several models, ``model`` (then pass ``model=``). Runs with an infinite target rate are
    left out (they have no place on a rate axis). One line per configuration (the mean over
    repeated runs) plus the "achieved = target" diagonal.
    """
    df = as_frame(data, required=("config", "request_rate", "request_throughput"),
                  what="plot_scaling")
    df, model = _one_model(df, model, "plot_scaling")
    df = df[np.isfinite(df["request_rate"].astype(float))]
    if df.empty:
        raise InputError("plot_scaling: no runs with a finite request rate to plot")
    ax = new_axes(ax)
    styles = style_map(df["config"])
    for config, (color, marker) in styles.items():
        runs = df[df["config"] == config]
        mean = runs.groupby("request_rate")["request_throughput"].mean().sort_index()
        ax.plot(mean.index.to_numpy(dtype=float), mean.to_numpy(dtype=float), color=color,
                marker=marker, label=config)
        if runs["request_rate"].duplicated().any():  # repeated runs: show each one
            ax.scatter(runs["request_rate"], runs["request_throughput"], color=color,
                       marker=marker, s=14, alpha=0.5, zorder=3)
    rates = np.sort(df["request_rate"].astype(float).unique())
    top = float(max(df["request_throughput"].max(), rates[0])) * 1.05
    diag = np.geomspace(rates[0], min(top, rates[-1]), 64)  # stops where it leaves the plot
    ax.plot(diag, diag, color=REFERENCE_COLOR, linestyle="--", linewidth=1,
            label="achieved = target")
    _rate_axis(ax, rates)
    if ax.get_xscale() == "log":  # y = x is straight only when both axes are logarithmic
        ax.set_yscale("log", base=2)
        low = float(min(df["request_throughput"].astype(float).min(), rates[0]))
        ax.set_ylim(low / 1.3, top)
        ax.yaxis.set_major_formatter(FuncFormatter(lambda v, _pos: f"{v:g}"))
    else:
        ax.set_ylim(bottom=0)
    ax.set_xlabel(label_for("request_rate"))
    ax.set_ylabel(label_for("request_throughput"))
    n = df["num_prompts"].iloc[0] if "num_prompts" in df.columns and df["num_prompts"].nunique() \
        == 1 else None
    burst = f"bursts of {int(n)} requests" if n is not None else "bursts"
    ax.set_title(f"{model + ': ' if model else ''}target vs achieved rate ({burst})",
                 fontsize="medium")
    ax.grid(True, alpha=0.3)
    legend(ax, title="configuration", title_fontsize="small")
    return ax


@plain_plot
def plot_latency_vs_rate(measured: Any, predicted: Any | None = None, *,
                         metric: str = "ttft_p99_ms", model: str | None = None,
                         ax: Axes | None = None, logy: bool = True,
                         xlabel: str | None = None, band_label: str = "spread over seeds",
                         slo_ms: float | None = None) -> Axes:
    """A latency metric vs request rate per configuration: measured points, model curve and band.

    ``measured``: store or frame with ``config``, ``request_rate`` and ``metric`` (and ``model``
    when it holds several). ``predicted`` (optional): frame with ``config``, ``request_rate``,
    ``metric`` and optionally ``<metric>_lo``/``<metric>_hi`` (the band, e.g. the spread over
    seeds); drawn as a line per configuration with a shaded band. A ``calibrated`` column, when
    present and false for a configuration, dashes its line and says "spec-based" in the legend.
    ``slo_ms`` (the metric's objective, ms) draws the SLO as a dashed black line.
    """
    df = as_frame(measured, required=("config", "request_rate", metric),
                  what="plot_latency_vs_rate")
    df, model = _one_model(df, model, "plot_latency_vs_rate")
    df = df[np.isfinite(df["request_rate"].astype(float))]
    pred = None
    if predicted is not None:
        pred = as_frame(predicted, required=("config", "request_rate", metric),
                        what="plot_latency_vs_rate predicted")
        pred, _ = _one_model(pred, model, "plot_latency_vs_rate predicted")
    configs = set(df["config"]) | (set(pred["config"]) if pred is not None else set())
    if not configs:
        raise InputError("plot_latency_vs_rate: nothing to plot")
    ax = new_axes(ax, figsize=(9.0, 4.5))
    styles = style_map(configs)
    banded = False
    for config, (color, marker) in styles.items():
        runs = df[df["config"] == config]
        if len(runs):
            ax.scatter(runs["request_rate"], runs[metric], color=color, marker=marker, s=30,
                       zorder=3, label=f"{config} measured")
        if pred is None:
            continue
        cur = pred[pred["config"] == config].sort_values("request_rate")
        if cur.empty:
            continue
        spec = "calibrated" in cur.columns and not bool(cur["calibrated"].all())
        ax.plot(cur["request_rate"], cur[metric], color=color, linestyle="--" if spec else "-",
                label=f"{config} model" + (" (spec-based)" if spec else ""))
        lo, hi = f"{metric}_lo", f"{metric}_hi"
        if lo in cur.columns and hi in cur.columns:
            ax.fill_between(cur["request_rate"], cur[lo], cur[hi], color=color, alpha=0.2,
                            linewidth=0)
            banded = True
    if banded:  # one legend entry explains every band
        ax.fill_between([], [], [], color="#999999", alpha=0.3, linewidth=0,
                        label=f"model band ({band_label})")
    # ticks at the measured rates (the model's grid is finer than the labels need)
    rates = df["request_rate"] if len(df) else pred["request_rate"]  # type: ignore[index]
    _rate_axis(ax, rates.astype(float).to_numpy())
    if slo_ms is not None:
        ax.axhline(float(slo_ms), color=REFERENCE_COLOR, linestyle="--", linewidth=1.5,
                   label=f"SLO {float(slo_ms):g} ms")
    if logy:
        ax.set_yscale("log")
    ax.set_xlabel(xlabel or label_for("request_rate"))
    ax.set_ylabel(label_for(metric))
    title = f"{label_for(metric).split(' (')[0]} vs request rate"
    ax.set_title(f"{model}: {title}" if model else title, fontsize="medium")
    ax.grid(True, alpha=0.3, which="both")
    if len(ax.get_legend_handles_labels()[0]) > 4:  # many entries: beside the plot
        legend(ax, loc="upper left", bbox_to_anchor=(1.01, 1.0))
    else:
        legend(ax)
    return ax
