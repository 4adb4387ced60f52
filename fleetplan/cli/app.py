"""The ``fleetplan`` command line: parse, call the library, format. Nothing else lives here.

Each command is one module of this package, ``fleetplan.cli.<name>_cmd``, exposing
``register(app)``; :data:`COMMANDS` lists them in help order with the one-line summary the root
``--help`` shows. A command's module is imported only when that command runs (or its own
``--help`` is asked for), so ``fleetplan --help`` loads no numerical library. :func:`main` turns
any :class:`~fleetplan.errors.FleetplanError` into one line on stderr and its exit code (2, or 3
for an infeasible plan), never a traceback.
"""

from __future__ import annotations

import importlib
import os
import sys
from typing import Any

import typer
from typer.core import TyperCommand, TyperGroup

from fleetplan import __version__
from fleetplan.errors import FleetplanError

# name -> summary in the root --help (the first sentence of the command's own help; a test
# keeps the two equal). Adding a command: its module, then one line here.
COMMANDS: dict[str, str] = {
    "profiles": "Measured runs with cost per run, cost per 1M tokens, tokens per kWh and g CO2 "
                "per 1M tokens.",
    "ingest": "Read vLLM (and other) benchmark results into the profile store; re-ingesting "
              "adds nothing.",
    "calibrate": "Fit each configuration's step-time parameters to its unflagged runs; flag and "
                 "report the runs no work-conserving server can produce.",
    "predict": "Predict what vLLM's benchmark would measure for MODEL on CONFIG at RATE.",
    "validate": "Predicted vs measured for each run, with percent errors; parameters come from "
                "the store's calibration only, never from RUNS.",
    "simulate": "Simulate the scenario's fleet: per-class TTFT/TPOT percentiles with 95% CIs, "
                "pool utilization, overload, cost, energy and carbon.",
    "solve": "The cheapest fleet meeting every class's SLO, checked by simulation.",
    "frontier": "The cost frontier of a scenario: each point is a full solve checked by "
                "simulation.",
    "report": "A plan as one self-contained HTML page (no scripts, no network), or the diff "
              "of two plans.",
    "schema": "Print the JSON Schema of scenario files (YAML or JSON), for editors and "
              "validators.",
    "bench": "Benchmark a running server as vllm bench serve does; write vLLM-shaped results.",
    "cache": "The on-disk cache of simulated capacities: where it is, how big, and clearing it.",
}


def load_command(name: str) -> Any:
    """The click command of ``fleetplan NAME``, built by importing its module."""
    sub = typer.Typer(rich_markup_mode=None, pretty_exceptions_enable=False,
                      add_completion=False)
    importlib.import_module(f"fleetplan.cli.{name}_cmd").register(sub)
    return typer.main.get_group(sub).commands[name]


class _LazyGroup(TyperGroup):
    """Commands imported on first use; the root listing comes from :data:`COMMANDS`."""

    def list_commands(self, ctx: Any) -> list[str]:
        return [*COMMANDS, *(n for n in self.commands if n not in COMMANDS)]

    def get_command(self, ctx: Any, cmd_name: str) -> Any:
        if cmd_name not in self.commands and cmd_name in COMMANDS:
            self.commands[cmd_name] = load_command(cmd_name)
        return self.commands.get(cmd_name)

    def resolve_command(self, ctx: Any, args: list[str]) -> Any:
        name = args[0] if args else None
        if name is None or name in COMMANDS or name in self.commands:
            return super().resolve_command(ctx, args)
        # an unknown name: typer suggests close matches among self.commands, so list them all
        stubs = [n for n in COMMANDS if n not in self.commands]
        for n in stubs:
            self.commands[n] = TyperCommand(n, help=COMMANDS[n])
        try:
            return super().resolve_command(ctx, args)
        finally:
            for n in stubs:
                self.commands.pop(n, None)

    def format_commands(self, ctx: Any, formatter: Any) -> None:
        names = self.list_commands(ctx)
        limit = formatter.width - 6 - max(len(n) for n in names)
        rows = []
        for n in names:
            cmd = self.commands.get(n) or TyperCommand(n, help=COMMANDS[n])
            if not cmd.hidden:
                rows.append((n, cmd.get_short_help_str(limit)))
        with formatter.section("Commands"):
            formatter.write_dl(rows)


app = typer.Typer(
    name="fleetplan",
    cls=_LazyGroup,
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


MAX_ERROR_CHARS = 2000
"""Longest error line printed (messages quote values, cut where they are rendered; this is the
last guard)."""


def main(argv: list[str] | None = None) -> int:
    """Console entry point: returns the exit code instead of exiting."""
    try:
        app(args=argv, prog_name="fleetplan")
    except FleetplanError as exc:
        text = " ".join(str(exc).split("\n"))  # one line, and never a screenful
        if len(text) > MAX_ERROR_CHARS:
            text = text[: MAX_ERROR_CHARS - 3] + "..."
        print(f"fleetplan: error: {text}", file=sys.stderr)
        return exc.exit_code
    except SystemExit as exc:  # click's standalone mode: usage errors, typer.Exit, success
        code = exc.code
        return code if isinstance(code, int) else (0 if code is None else 1)
    except KeyboardInterrupt:  # Ctrl-C outside a command that keeps a partial result (bench)
        print("fleetplan: interrupted (Ctrl-C); files are written atomically, so none is "
              "half-written", file=sys.stderr)
        return 130
    except BrokenPipeError:  # the reader left (`| head`): nothing more to say to it
        _drop_stdout()
        return 0
    except OSError as exc:  # the output cannot be written (disk full, /dev/full ...)
        where = f"{exc.filename}: " if exc.filename else ""
        print(f"fleetplan: error: {where}{exc.strerror or exc}", file=sys.stderr)
        _drop_stdout()
        return 2
    return 0


def _drop_stdout() -> None:
    """Point stdout at the null device, so the interpreter's final flush of what could not be
    written raises nothing more (Python's documented way out of a closed pipe)."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
    except (OSError, ValueError):
        pass


def run() -> None:
    code = main()
    try:
        sys.stdout.flush()
    except BrokenPipeError:
        _drop_stdout()
    except OSError as exc:
        print(f"fleetplan: error: cannot write the output ({exc.strerror or exc})",
              file=sys.stderr)
        _drop_stdout()
        code = code or 2
    sys.exit(code)
