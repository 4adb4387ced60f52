"""The ``fleetplan`` command line: parse, call the library, format. Nothing else lives here.

Each command is one module of this package, ``fleetplan.cli.<name>_cmd``, exposing
``register(app)``; :data:`COMMANDS` lists them in help order with the one-line summary the root
``--help`` shows. A command's module is imported only when that command runs (or its own
``--help`` is asked for), so ``fleetplan --help`` loads no numerical library. :func:`main` turns
any :class:`~fleetplan.errors.FleetplanError` into one line on stderr and its exit code (2, or 3
for an infeasible plan), never a traceback. Every other way a command ends is one line too: a
usage error (an option out of its range, a missing argument; click would print its usage
block) is ``fleetplan: error: ...`` naming the option and value, exit 2; Ctrl-C is
``fleetplan: interrupted (Ctrl-C) during COMMAND (STEP) ...`` (the library's progress step
running, where one was), exit 130 (typer's own handling would
exit 130 in silence), nothing half-written since outputs are written atomically.
"""

from __future__ import annotations

import contextlib
import errno
import importlib
import io
import os
import sys
import warnings
from typing import Any

import typer
from typer.core import TyperCommand, TyperGroup

from fleetplan import __version__
from fleetplan.errors import FleetplanError

try:  # typer >= 0.2x carries its own copy of click, whose exceptions its commands raise
    from typer._click.exceptions import ClickException
except ImportError:  # pragma: no cover - an older typer uses click itself
    from click.exceptions import ClickException  # type: ignore[assignment]


class _Interrupted(BaseException):
    """Ctrl-C inside a command, carried past typer's own handler (which would exit 130 with
    nothing said) to :func:`main`. A BaseException, like KeyboardInterrupt: no ``except
    Exception`` on the way may swallow it."""

    def __init__(self, command: str | None, step: str | None = None) -> None:
        super().__init__(command, step)
        self.command, self.step = command, step


class _UsageLine(BaseException):
    """A click usage error (bad option value, missing argument, unknown command) as the one
    line :func:`main` prints instead of click's usage block."""

    def __init__(self, text: str, exit_code: int) -> None:
        super().__init__(text)
        self.text = text
        self.exit_code = exit_code


def _usage_line(exc: ClickException) -> _UsageLine:
    text = " ".join(exc.format_message().split())
    ctx = getattr(exc, "ctx", None)
    if ctx is not None:
        text += f" (see: {ctx.command_path} --help)"
    return _UsageLine(text, exc.exit_code)

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
    "cache": ("The on-disk cache of simulated capacities and plan checks: where it is, how big, "
              "and clearing it."),
}


def load_command(name: str) -> Any:
    """The click command of ``fleetplan NAME``, built by importing its module."""
    sub = typer.Typer(rich_markup_mode=None, pretty_exceptions_enable=False,
                      add_completion=False)
    importlib.import_module(f"fleetplan.cli.{name}_cmd").register(sub)
    return typer.main.get_group(sub).commands[name]


class _ReaderLeft(Exception):
    """The reader of standard output left while a command wrote (``fleetplan solve S | head``):
    :func:`main` ends quietly with exit code 0, whether the table or the JSON was cut."""


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

    def make_context(self, info_name: str | None, args: list[str], parent: Any = None,
                     **extra: Any) -> Any:
        try:
            return super().make_context(info_name, args, parent=parent, **extra)
        except ClickException as exc:  # the root's own options (fleetplan --bogus)
            raise _usage_line(exc) from None

    def invoke(self, ctx: Any) -> Any:
        try:
            return super().invoke(ctx)
        except KeyboardInterrupt as exc:  # in a command that does not keep a partial result
            # the library's innermost progress step (fleetplan._progress.step) names itself
            raise _Interrupted(ctx.invoked_subcommand,
                               getattr(exc, "fleetplan_step", None)) from None
        except ClickException as exc:  # a command's options, or raised by the command itself
            raise _usage_line(exc) from None
        except BrokenPipeError:  # past click, which would make it exit 1 (main: exit 0)
            raise _ReaderLeft from None

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


class _ClosedStdout(io.TextIOBase):
    """Standard output when the shell closed it (``fleetplan ... >&-``): a command that writes
    nothing succeeds, one that writes fails with one line, as any output it cannot write does
    (``main``'s ``OSError``), never a traceback."""

    def writable(self) -> bool:
        return True

    def write(self, s: str) -> int:
        raise OSError(errno.EBADF, "standard output is closed")

    def flush(self) -> None:
        pass


def _show_warning(message: Warning | str, category: type[Warning], filename: str,
                  lineno: int, file: Any = None, line: str | None = None) -> None:
    """A library's warning (numpy, matplotlib) as one line on stderr, without the source line
    that raised it (a planner has no use for ``return _methods._mean(a, ...)``)."""
    text = " ".join(str(message).split())
    with contextlib.suppress(OSError, ValueError, AttributeError):  # no stderr to say it on
        print(f"fleetplan: warning: {_cut(text)} ({category.__name__})", file=sys.stderr)


def main(argv: list[str] | None = None) -> int:
    """Console entry point: returns the exit code instead of exiting."""
    with warnings.catch_warnings():
        warnings.showwarning = _show_warning
        return _main(argv)


def _main(argv: list[str] | None) -> int:
    if sys.stdout is None:  # closed by the shell: Python then sets it to None
        sys.stdout = _ClosedStdout()
    try:
        app(args=argv, prog_name="fleetplan")
    except FleetplanError as exc:
        text = " ".join(str(exc).split("\n"))  # one line, and never a screenful
        print(f"fleetplan: error: {_cut(text)}", file=sys.stderr)
        return exc.exit_code
    except _UsageLine as exc:
        print(f"fleetplan: error: {_cut(exc.text)}", file=sys.stderr)
        return exc.exit_code
    except SystemExit as exc:  # click's standalone mode: typer.Exit, --help, success
        code = exc.code
        return code if isinstance(code, int) else (0 if code is None else 1)
    except (KeyboardInterrupt, _Interrupted) as exc:  # Ctrl-C, but in bench (a partial result)
        during = ""
        if isinstance(exc, _Interrupted) and exc.command:
            during = f" during {exc.command}" + (f" ({exc.step})" if exc.step else "")
        print(f"fleetplan: interrupted (Ctrl-C){during}; files are written atomically, so "
              "none is half-written", file=sys.stderr)
        return 130
    except (BrokenPipeError, _ReaderLeft):  # the reader left (`| head`): nothing more to say
        _drop_stdout()
        return 0
    except OSError as exc:  # the output cannot be written (disk full, /dev/full ...)
        where = f"{exc.filename}: " if exc.filename else ""
        print(f"fleetplan: error: {where}{exc.strerror or exc}", file=sys.stderr)
        _drop_stdout()
        return 2
    return 0


def _cut(text: str) -> str:
    return text if len(text) <= MAX_ERROR_CHARS else text[: MAX_ERROR_CHARS - 3] + "..."


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
