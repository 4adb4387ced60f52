"""Options shared by commands: repeated ``NAME=VALUE`` pairs (``--price H100-PCIe=2.0``), the
progress bars of long commands (``--progress`` / ``--quiet``, :func:`progress_reporter`) and the
data context (``--catalog``, ``--model-config``, ``--store``, ``--calibration``:
:func:`use_cli_context`, passed down by the command)."""

from __future__ import annotations

import contextlib
import math
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from fleetplan.errors import InputError

if TYPE_CHECKING:
    from fleetplan.context import DataContext
    from fleetplan.scenario import Scenario


def parse_pairs(values: list[str] | None, option: str) -> dict[str, float]:
    out: dict[str, float] = {}
    for item in values or []:
        name, sep, raw = item.partition("=")
        if not sep or not name.strip():
            raise InputError(f"{option} {item!r}: expected NAME=NUMBER, e.g. H100-PCIe=2.0")
        try:
            value = float(raw)
        except ValueError:
            raise InputError(f"{option} {item!r}: {raw!r} is not a number") from None
        if not math.isfinite(value) or value <= 0:
            raise InputError(f"{option} {item!r}: {raw!r} must be a positive number")
        out[name.strip()] = value
    return out


def parse_fit_seeds(text: str | None, option: str = "--fit-seeds") -> tuple[int, ...] | None:
    """``"2,3"`` -> ``(2, 3)`` (the length seeds a fit replays); None stays None (the default
    seeds). One-line :class:`InputError` naming the option and value otherwise."""
    if text is None:
        return None
    from fleetplan.replica.calibrate import check_fit_seeds

    parts = [p.strip() for p in text.split(",")]
    if not all(p.isascii() and p.isdigit() for p in parts):
        raise InputError(f"{option} {text!r}: expected whole numbers separated by commas, "
                         "e.g. 2,3")
    try:
        return check_fit_seeds([int(p) for p in parts])
    except InputError as exc:
        raise InputError(f"{option} {text!r}: {exc}") from None


FIT_SEEDS_HELP = ("Length seeds every fit replays, comma-separated (default: the "
                  "calibration's, 0,1). Another set shows how far the fit's own noise moves "
                  "the figures (docs/replica-model.md).")
PROGRESS_HELP = ("Show progress bars on stderr even when it is not a terminal (e.g. CI logs: "
                 "one line per step). Default: only on a terminal.")
QUIET_HELP = "No progress bars."
VERBOSE_HELP = ("Print every note (how each figure was made); by default at most three notes "
                "about the pools on hand. --format json always carries all of them.")
TIMING_HELP = "Report solver seconds (--no-timing: byte-identical JSON)."


class RichProgress:
    """:class:`fleetplan._progress.Progress` as rich bars on stderr when it is a terminal, else
    (``--progress`` into a log) one line per finished step: name, count, seconds. ``lines``:
    off a terminal, also one line per unit done (``fleetplan: leave-one-config-out folds 3/14:
    DeepSeek-R1-Distill-Qwen-14B on 1xH100-PCIe``), for steps whose units take seconds each;
    the unit's label is what the library last passed to :meth:`describe`."""

    def __init__(self, lines: bool = False) -> None:
        from rich.console import Console
        from rich.progress import (
            BarColumn,
            MofNCompleteColumn,
            Progress,
            SpinnerColumn,
            TextColumn,
            TimeElapsedColumn,
        )

        self.console = Console(stderr=True, highlight=False)
        self.live = self.console.is_terminal
        self.bar = Progress(SpinnerColumn(finished_text="-"), TextColumn("{task.description}"),
                            BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                            console=self.console, disable=not self.live)
        self.steps: dict[str, tuple[Any, int | None, float]] = {}  # task, total, start time
        self.done: dict[str, int] = {}
        self.lines = lines
        self.labels: dict[str, str] = {}

    def __enter__(self) -> RichProgress:
        self.bar.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.bar.stop()

    def start(self, name: str, total: int | None = None) -> None:
        self.steps[name] = (self.bar.add_task(name, total=total), total, time.monotonic())
        self.done[name] = 0

    def describe(self, name: str, label: str) -> None:
        """The unit of step ``name`` just done, named on its line (``lines``)."""
        self.labels[name] = label

    def advance(self, name: str, amount: int = 1) -> None:
        self.done[name] += amount
        self.bar.advance(self.steps[name][0], amount)
        if self.lines and not self.live:
            total = self.steps[name][1]
            label = self.labels.pop(name, None)
            self.console.print(f"fleetplan: {name} {self.done[name]}"
                               + (f"/{total}" if total is not None else "")
                               + (f": {label}" if label else ""), soft_wrap=True)

    def finish(self, name: str) -> None:
        task, total, t0 = self.steps.pop(name)
        done = self.done.pop(name)
        self.bar.update(task, total=total if total is not None else 1,
                        completed=done if total is not None else 1)
        if not self.live:
            count = f" {done}/{total}," if total is not None else ""
            self.console.print(f"fleetplan: {name}:{count} {time.monotonic() - t0:.1f} s",
                               soft_wrap=True)


@contextlib.contextmanager
def progress_reporter(quiet: bool, force: bool, *, lines: bool = False) -> Iterator[Any]:
    """The reporter a command passes to the library: ``None`` (nothing shown) unless stderr is
    a terminal or ``force``; ``quiet`` wins. ``lines``: see :class:`RichProgress`."""
    if quiet or not (force or sys.stderr.isatty()):
        yield None
        return
    with RichProgress(lines=lines) as reporter:
        yield reporter


STORE_DEFAULT = ("default: yours, $XDG_DATA_HOME/fleetplan/profiles.csv (~/.local/share/"
                 "fleetplan/), when you have one, else the bundled runs")
CALIBRATION_DEFAULT = ("default: yours, $XDG_DATA_HOME/fleetplan/calibration.json (~/.local/"
                       "share/fleetplan/, written by fleetplan calibrate), when you have one, "
                       "else the bundled one")


def note_user_files(*, store: bool = False, calibration: bool = False,
                    has_options: bool = True) -> None:
    """Say on stderr that a command reads the user's own store / calibration by default
    (``store=True``: it reads the default store; likewise ``calibration``); nothing when the
    bundled files are read. ``has_options``: the command has ``--store`` / ``--calibration``."""
    from fleetplan.profiles.store import user_store_path
    from fleetplan.replica.calibration_file import user_calibration_path

    for kind, wanted, path, flag in (
            ("profile store", store, user_store_path(), "--store"),
            ("calibration", calibration, user_calibration_path(), "--calibration")):
        if wanted and path.is_file():
            how = f" ({flag} FILE reads another)" if has_options else ""
            print(f"fleetplan: reading your {kind} {path}{how}", file=sys.stderr)


CATALOG_HELP = ("A folder of your own catalog tables (any of gpus.csv, gpu_aliases.csv, "
                "prices.csv, models.csv, grid_intensity.csv in the bundled schemas): its rows add "
                "to or replace the bundled ones by name. Repeatable; a later folder wins.")
MODEL_CONFIG_HELP = ("A Hugging Face config.json (or the folder holding one; never downloaded): "
                     "its model joins the catalog under the folder's name. Repeatable.")
# The options several commands share, declared once (``store: StoreOpt = None``); a command
# whose flag says more than these (bench's --store, validate's --progress) declares its own.
CatalogOpt = Annotated[list[Path] | None, typer.Option("--catalog", help=CATALOG_HELP)]
ModelConfigOpt = Annotated[list[Path] | None,
                           typer.Option("--model-config", help=MODEL_CONFIG_HELP)]
StoreOpt = Annotated[Path | None, typer.Option("--store",
                                                 help=f"Profile store ({STORE_DEFAULT}).")]
CalibrationOpt = Annotated[Path | None, typer.Option(
    "--calibration", help=f"Calibration file ({CALIBRATION_DEFAULT}).")]
ProgressOpt = Annotated[bool, typer.Option("--progress", help=PROGRESS_HELP)]
QuietOpt = Annotated[bool, typer.Option("--quiet", "-q", help=QUIET_HELP)]
CATALOG_OPTION: Any = typer.Option(None, "--catalog", help=CATALOG_HELP)
MODEL_CONFIG_OPTION: Any = typer.Option(None, "--model-config", help=MODEL_CONFIG_HELP + (
    " A scenario without `model` serves this one."))
STORE_OPTION: Any = typer.Option(None, "--store", help=f"Profile store ({STORE_DEFAULT}).")
CALIBRATION_OPTION: Any = typer.Option(None, "--calibration",
                                       help=f"Calibration file ({CALIBRATION_DEFAULT}).")


def use_cli_context(*, catalog: list[Path] | None = None, model_config: list[Path] | None = None,
                    store: Path | None = None, calibration: Path | None = None,
                    cache_dir: Path | None = None) -> DataContext:
    """The command's :class:`~fleetplan.context.DataContext`, built from its options: the
    command passes it (or a scenario loaded in it) to every library call it makes."""
    from fleetplan.context import DataContext

    return DataContext.build(catalog=list(catalog or []), model_configs=list(model_config or []),
                             store=store, calibration=calibration, cache_dir=cache_dir)


def model_name(model: str | None, ctx: DataContext, option: str = "--model") -> str:
    """The model a command is about: ``--model``, else the one ``--model-config`` gave."""
    if model:
        return model
    if ctx.model is not None:
        return ctx.model.model
    raise InputError(f"{option} or --model-config is required (a catalog model name, or a "
                     "Hugging Face config.json)")


def check_read_files(*, store: Path | None = None, calibration: Path | None = None) -> None:
    """One line for a ``--store`` or ``--calibration`` that does not exist, for a command that
    only reads them: a missing one is not an empty store or calibration (``ingest`` and ``bench
    --ingest``, which write a store, start a new one instead)."""
    for option, named in (("--store", store), ("--calibration", calibration)):
        if named is not None and not named.exists():
            raise InputError(f"{option} {named}: no such file")


def load_cli_scenario(path: Path, *, chooser: str | None = None,
                      catalog: list[Path] | None = None, model_config: list[Path] | None = None,
                      store: Path | None = None, calibration: Path | None = None) -> Scenario:
    """The scenario of a simulating command (simulate, solve, frontier), loaded, with the notes on
    the user's calibration. ``chooser``: the command chooses its own fleet (solve, frontier), so a
    note on stderr says that the scenario's fleet is not used and what chooses it instead.
    ``catalog``, ``model_config``, ``store``, ``calibration``: the command's data options; the
    scenario keeps them (its own ``catalog:`` and ``model_config:`` added) and hands them to
    every call that takes it."""
    from fleetplan.scenario import load_scenario

    check_read_files(store=store, calibration=calibration)
    ctx = use_cli_context(catalog=catalog, model_config=model_config, store=store,
                          calibration=calibration)
    sc = load_scenario(path, context=ctx)
    note_user_files(calibration=calibration is None, has_options=True)  # --calibration exists
    if chooser is not None and sc.fleet is not None:
        given = " + ".join(f"{p.count}x{p.model + '/' if p.model else ''}{p.config}"
                           for p in sc.fleet)
        typer.echo(f"note: {path}: the scenario's fleet ({given}) is ignored: {chooser}",
                   err=True)
    return sc



# --- options of the planning commands (solve, simulate, frontier, report), declared once as
# Annotated aliases so each command's signature reads as its list of options
import pathlib  # noqa: E402  (kept with the aliases that use it)
from typing import Annotated  # noqa: E402

from fleetplan.cli._plot import PLOT_HELP  # noqa: E402

ScenarioArg = Annotated[pathlib.Path, typer.Argument(help="Scenario file (YAML or JSON).")]
SolverOpt = Annotated[str | None, typer.Option(
    "--solver", help="MILP solver: cbc (default), highs, or a PuLP name.")]
TimingOpt = Annotated[bool, typer.Option("--timing/--no-timing", help=TIMING_HELP)]
VerboseOpt = Annotated[bool, typer.Option("--verbose", "-v", help=VERBOSE_HELP)]
PlanModelConfigOpt = Annotated[list[pathlib.Path] | None, typer.Option(
    "--model-config", help=MODEL_CONFIG_HELP + " A scenario without `model` serves this one.")]
PlotOpt = Annotated[pathlib.Path | None, typer.Option("--plot", help=PLOT_HELP)]
