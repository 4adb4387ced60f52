"""``--plot FILE`` for commands whose result has a ``plot(ax=..., kind=...)`` method."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import typer

PLOT_HELP = "Also draw the result to FILE (.png or .svg)."


def save_result_plot(result: Any, path: Path, *, kind: str | None = None) -> None:
    """Draw ``result`` offscreen (no pyplot state) and write it atomically, deterministically."""
    from fleetplan.viz import save_figure
    from fleetplan.viz.style import offscreen_axes

    ax = offscreen_axes()
    ax = result.plot(ax=ax) if kind is None else result.plot(ax=ax, kind=kind)
    save_figure(ax, path)
    typer.echo(f"plot written to {path}", err=True)
