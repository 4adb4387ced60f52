"""The ``fleetplan`` command line: parse, call the library, format. Nothing else lives here.

Each command is one module of this package exposing ``register(app)``; :data:`COMMANDS` lists
them in help order. :func:`main` turns any :class:`~fleetplan.errors.FleetplanError` into one line
on stderr and its exit code (2, or 3 for an infeasible plan), never a traceback.
"""

from __future__ import annotations

import importlib
import sys

import typer

from fleetplan import __version__
from fleetplan.errors import FleetplanError

COMMANDS = [
    "profiles",
    "ingest",
    "calibrate",
    "predict",
    "validate",
    "simulate",
    "solve",
    "frontier",
    "schema",
    "bench",
]

app = typer.Typer(
    name="fleetplan",
    help=(
        "Plan LLM serving fleets that mix enterprise and consumer GPUs, for cost, latency "
        "and carbon.\n\nExample: fleetplan solve examples/hybrid-chat-batch.yaml"
    ),
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    rich_markup_mode=None,
)


def _version(value: bool) -> None:
    if value:
        typer.echo(f"fleetplan {__version__}")
        raise typer.Exit()


@app.callback()
def _root(
    version: bool = typer.Option(False, "--version", callback=_version, is_eager=True,
                                 help="Print the version and exit."),
) -> None:
    """fleetplan: which GPUs to rent for your LLM traffic."""


for _name in COMMANDS:
    importlib.import_module(f"fleetplan.cli.{_name}_cmd").register(app)


def main(argv: list[str] | None = None) -> int:
    """Console entry point: returns the exit code instead of exiting."""
    try:
        app(args=argv, prog_name="fleetplan")
    except FleetplanError as exc:
        print(f"fleetplan: error: {exc}", file=sys.stderr)
        return exc.exit_code
    except SystemExit as exc:  # click's standalone mode: usage errors, typer.Exit, success
        code = exc.code
        return code if isinstance(code, int) else (0 if code is None else 1)
    return 0


def run() -> None:
    sys.exit(main())
