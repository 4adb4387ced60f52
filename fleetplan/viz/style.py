"""Shared plumbing of the plots: palette, axis labels, input frames, saving to PNG/SVG.

Every plot in :mod:`fleetplan.viz` takes plain data (a pandas DataFrame with documented columns,
a list of records, or a result object with ``to_frame()``/``to_dict()``), draws on the ``ax`` it
is given (or a new one) and returns that :class:`~matplotlib.axes.Axes`. Colours are the
Okabe-Ito palette (distinguishable with the common colour-vision deficiencies); series also
differ by marker, so a greyscale print still reads.

Main entries: :func:`color_for`, :func:`label_for`, :func:`as_frame`, :func:`save_figure`,
:func:`figure_bytes`.
"""

from __future__ import annotations

import io
import os
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

import matplotlib
import pandas as pd
from matplotlib.axes import Axes
from matplotlib.figure import Figure

from fleetplan._io import write_bytes_atomic
from fleetplan.errors import InputError

# Okabe & Ito (2008), "Color Universal Design"; black last (reserved for references and SLOs).
OKABE_ITO: tuple[str, ...] = (
    "#0072B2",  # blue
    "#E69F00",  # orange
    "#009E73",  # bluish green
    "#D55E00",  # vermillion
    "#CC79A7",  # reddish purple
    "#56B4E9",  # sky blue
    "#F0E442",  # yellow
    "#000000",  # black
)
MARKERS: tuple[str, ...] = ("o", "s", "^", "D", "v", "P", "X", "*")
REFERENCE_COLOR = "#000000"
MET_COLOR = OKABE_ITO[2]
MISSED_COLOR = OKABE_ITO[3]

# Axis labels with units, by column name (the units are the names' suffixes, see DESIGN.md).
LABELS: dict[str, str] = {
    "request_rate": "target request rate (req/s, burst)",
    "request_throughput": "completed throughput (req/s)",
    "output_throughput": "output throughput (tokens/s)",
    "total_token_throughput": "total throughput (tokens/s)",
    "rate_rps": "request rate (req/s)",
    "cost_per_hour_usd": "cost (USD per hour)",
    "cost_per_mtok_usd": "cost (USD per 1M tokens)",
    "g_co2_per_mtok": "carbon (g CO2e per 1M tokens)",
    "g_co2_per_hour": "carbon (g CO2e per hour)",
    "kg_co2_per_day": "carbon (kg CO2e per day)",
    "energy_kwh_per_hour": "energy (kWh per hour)",
    "slo_ttft_p99_ms": "P99 TTFT objective (ms)",
    "utilization": "utilization (fraction of busy time)",
}
_METRIC_NAMES = {"ttft": "TTFT", "tpot": "TPOT", "itl": "ITL", "e2e": "E2E latency"}


def label_for(column: str) -> str:
    """An axis label with its unit for a column name (``ttft_p99_ms`` -> ``P99 TTFT (ms)``)."""
    if column in LABELS:
        return LABELS[column]
    parts = column.split("_")
    if len(parts) == 3 and parts[0] in _METRIC_NAMES and parts[2] in ("ms", "s"):
        stat = parts[1].upper() if parts[1].startswith("p") else parts[1]
        return f"{stat} {_METRIC_NAMES[parts[0]]} ({parts[2]})"
    return column


def color_for(index: int) -> str:
    """The ``index``-th series colour (cycles through the palette)."""
    return OKABE_ITO[index % len(OKABE_ITO)]


def marker_for(index: int) -> str:
    return MARKERS[index % len(MARKERS)]


def style_map(keys: Iterable[str]) -> dict[str, tuple[str, str]]:
    """A stable (colour, marker) per key, in sorted key order (same keys, same styles)."""
    return {k: (color_for(i), marker_for(i)) for i, k in enumerate(sorted(set(keys)))}


def new_axes(ax: Axes | None, figsize: tuple[float, float] = (7.0, 4.5)) -> Axes:
    """``ax``, or the axes of a new figure (pyplot's, so notebooks show it)."""
    if ax is not None:
        return ax
    import matplotlib.pyplot as plt

    _, new = plt.subplots(figsize=figsize, layout="constrained")
    return new


def offscreen_axes(figsize: tuple[float, float] = (7.0, 4.5)) -> Axes:
    """Axes of a figure outside pyplot (no backend, no global state): for files, not screens."""
    return Figure(figsize=figsize, layout="constrained").add_subplot()


def as_frame(data: Any, *, key: str | None = None, required: Sequence[str] = (),
             what: str = "data") -> pd.DataFrame:
    """A DataFrame from a frame, a list of records, a result object or a dict holding ``key``.

    Result objects are read through ``to_frame()`` when ``key`` is None, else through
    ``to_dict()[key]``. Missing ``required`` columns raise :class:`InputError` naming them.
    """
    obj = data
    if key is not None and not isinstance(obj, pd.DataFrame | list | tuple):
        if hasattr(obj, "to_dict") and not isinstance(obj, Mapping):
            obj = obj.to_dict()
        if isinstance(obj, Mapping):
            if key not in obj:
                raise InputError(f"{what}: no {key!r} entry (has: {', '.join(map(str, obj))})")
            obj = obj[key]
    elif hasattr(obj, "to_frame") and not isinstance(obj, pd.DataFrame):
        obj = obj.to_frame()
    elif hasattr(obj, "frame") and isinstance(obj.frame, pd.DataFrame):  # ProfileStore
        obj = obj.frame
    if isinstance(obj, pd.DataFrame):
        df = obj
    elif isinstance(obj, list | tuple):
        df = pd.DataFrame(list(obj))
    else:
        raise InputError(f"{what}: expected a DataFrame or a list of records, "
                         f"got {type(obj).__name__}")
    missing = [c for c in required if c not in df.columns]
    if missing:
        raise InputError(f"{what}: missing column(s) {', '.join(missing)} "
                         f"(has: {', '.join(map(str, df.columns))})")
    return df


def legend(ax: Axes, **kwargs: Any) -> None:
    """A legend without a frame, outside the data when there are many entries."""
    handles, labels = ax.get_legend_handles_labels()
    if handles:
        ax.legend(handles, labels, frameon=False, fontsize="small", **kwargs)


SAVE_FORMATS = ("png", "svg")


def figure_bytes(target: Axes | Figure, fmt: str, *, dpi: int = 150,
                 salt: str = "fleetplan") -> bytes:
    """The figure of ``target`` as PNG or SVG bytes, deterministically (no creation date; SVG
    ids hashed with ``salt``, so two figures of one page can be given different ids)."""
    if fmt not in SAVE_FORMATS:
        raise InputError(f"image type {fmt!r}: expected one of {', '.join(SAVE_FORMATS)}")
    fig = target.get_figure(root=True) if isinstance(target, Axes) else target
    if not isinstance(fig, Figure):  # pragma: no cover - an Axes always belongs to a figure
        raise InputError("the plot has no figure to save")
    from fleetplan.viz.text import safe_figure_texts

    safe_figure_texts(fig)  # a figure drawn elsewhere may hold a lone surrogate: no crash
    metadata: dict[str, Any] = {"Date": None} if fmt == "svg" else {"Software": None}
    buf = io.BytesIO()
    with matplotlib.rc_context({"svg.hashsalt": salt, "svg.fonttype": "none"}):
        fig.savefig(buf, format=fmt, dpi=dpi, metadata=metadata)
    return buf.getvalue()


def save_figure(target: Axes | Figure, path: str | os.PathLike[str], *, dpi: int = 150) -> Path:
    """Write the figure of ``target`` to ``path`` (PNG or SVG by suffix), atomically.

    Output is deterministic (no creation date, fixed SVG ids): the same plot gives the same bytes.
    The file's mode follows the umask (or stays that of the file it replaces).
    """
    p = Path(path)
    fmt = p.suffix.lower().lstrip(".")
    if fmt not in SAVE_FORMATS:
        raise InputError(f"--plot {p}: unsupported image type {p.suffix or '(none)'!r} "
                         f"(valid: {', '.join('.' + f for f in SAVE_FORMATS)})")
    write_bytes_atomic(p, figure_bytes(target, fmt, dpi=dpi))
    return p


def integer_axis(axis: Any) -> None:
    """Ticks at whole numbers only (replica and GPU counts)."""
    from matplotlib.ticker import MaxNLocator

    axis.set_major_locator(MaxNLocator(integer=True))
