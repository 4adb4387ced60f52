"""``--plot FILE`` for commands whose result has a ``plot(ax=..., kind=...)`` method."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import typer

from fleetplan.cli._format import check_output_path

PLOT_HELP = "Also draw the result to FILE (.png or .svg)."
PLOT_SUFFIXES = (".png", ".svg")  # fleetplan.viz.style.SAVE_FORMATS (not imported: matplotlib)


def check_plot_path(path: Path | None, option: str = "--plot",
                    suffixes: tuple[str, ...] = PLOT_SUFFIXES) -> Path | None:
    """``path`` (or None) once it is known writable as an image, checked before the long work
    (:func:`fleetplan.cli._format.check_output_path`)."""
    return None if path is None else check_output_path(path, option, suffixes=suffixes)


def save_result_plot(result: Any, path: Path, *, kind: str | None = None) -> None:
    """Draw ``result`` offscreen (no pyplot state) and write it atomically, deterministically."""
    from fleetplan.viz import save_figure
    from fleetplan.viz.style import offscreen_axes

    ax = offscreen_axes()
    ax = result.plot(ax=ax) if kind is None else result.plot(ax=ax, kind=kind)
    save_figure(ax, path)
    typer.echo(f"plot written to {path}", err=True)
