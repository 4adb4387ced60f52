"""Output helpers shared by commands: tables (rich), CSV and JSON (deterministic bytes), and
:func:`check_output_path`, which a command calls on every file it will write (``--out``,
``--plot``, ``--save-lp``, ``--report``) *before* its long work, so a path that cannot be written
fails at once as one line, not after the run with the results lost."""

from __future__ import annotations

import contextlib
import json
import os
import sys
import tempfile
from collections.abc import Iterator, Sequence
from enum import StrEnum
from pathlib import Path
from typing import TYPE_CHECKING, Any

from fleetplan._io import json_safe
from fleetplan.errors import InputError

if TYPE_CHECKING:  # pandas and rich are imported by the functions that use them
    import pandas as pd


# Every per-token figure (cost, carbon) counts prompt and output tokens together: say so wherever
# one is shown. JSON field names (``cost_per_mtok_usd``) are a contract and stay as they are.
MTOK = "Mtok (in+out)"
MTOK_NOTE = "Mtok: a million tokens, prompt (input) + output tokens together"


class OutputFormat(StrEnum):
    table = "table"
    csv = "csv"
    json = "json"


class TableOrJson(StrEnum):
    """``--format`` of a command without a CSV form: the choices offered are the ones it has."""

    table = "table"
    json = "json"


def check_output_path(path: str | os.PathLike[str], option: str, *,
                      suffixes: Sequence[str] = ()) -> Path:
    """``path`` when a command can write it there later (atomically, as ``fleetplan._io``
    does); else one :class:`InputError` line naming the option and the path.

    Refused: a suffix not in ``suffixes`` (when given), an existing directory or other
    non-regular file (a FIFO, ``/dev/null``: an atomic write would replace it), a parent that
    is a file, a folder where no file can be created (read-only, no permission: probed by
    creating and removing an empty file, so it holds for root and read-only mounts too).
    Nothing is left behind; missing folders are not created here (the write creates them)."""
    p = Path(path)
    if suffixes and p.suffix.lower() not in suffixes:
        shown = " or ".join(suffixes)
        raise InputError(f"{option} {p}: the file must end with {shown}")
    target = Path(os.path.realpath(p)) if p.is_symlink() else p
    if target.is_dir():
        raise InputError(f"{option} {p}: a directory, not a file to write")
    if target.exists() and not target.is_file():
        raise InputError(f"{option} {p}: not a regular file (a device, FIFO or socket); "
                         "name a file to write")
    folder = target.parent
    while not folder.exists() and folder != folder.parent:
        folder = folder.parent
    if not folder.is_dir():
        raise InputError(f"{option} {p}: {folder} is not a folder")
    try:
        fd, probe = tempfile.mkstemp(prefix=f".{target.name[:100]}.", suffix=".probe",
                                     dir=folder)
    except OSError as exc:
        raise InputError(f"{option} {p}: cannot write in {folder} "
                         f"({exc.strerror or exc})") from None
    os.close(fd)
    with contextlib.suppress(OSError):
        os.unlink(probe)
    return p


def _same_file(a: Path, b: Path) -> bool:
    try:
        return os.path.samefile(a, b)
    except OSError:  # one of them does not exist (yet): the same path is the same file
        return os.path.realpath(a) == os.path.realpath(b)


def scenario_inputs(scenario: Path | None, *, catalog: Sequence[Path] | None = None,
                    model_config: Sequence[Path] | None = None, store: Path | None = None,
                    calibration: Path | None = None) -> list[tuple[str, Path | None]]:
    """The files a scenario command reads, as :func:`check_no_overwrite` takes them."""
    return [("the scenario", scenario), *(("a --catalog", c) for c in catalog or ()),
            *(("a --model-config", m) for m in model_config or ()), ("the --store", store),
            ("the --calibration", calibration)]


def check_no_overwrite(outputs: Sequence[tuple[str, Path | None]],
                       inputs: Sequence[tuple[str, Path | None]]) -> None:
    """One :class:`InputError` line when an output file would replace a file the command reads
    (``solve S.yaml --out S.yaml``, ``report P.json -o P.json``) or another of its outputs
    (``--out x.json --report x.json``), checked before any work: the same path, a link to it or
    a hard link. ``outputs`` and ``inputs`` are ``(option, path)`` pairs (None: not given)."""
    given = [(o, Path(p)) for o, p in outputs if p is not None]
    for i, (option, path) in enumerate(given):
        for what, src in inputs:
            if src is not None and _same_file(path, Path(src)):
                raise InputError(f"{option} {path}: is {what} {src}, which this command reads; "
                                 "name another file to write")
        for other, path2 in given[:i]:
            if _same_file(path, path2):
                raise InputError(f"{option} {path}: also named by {other}; give each output "
                                 "its own file")


@contextlib.contextmanager
def errors_name_file(path: str | os.PathLike[str]) -> Iterator[None]:
    """Input errors raised inside (a simulation or solve of the scenario loaded from ``path``)
    name that file first, as load errors do: ``S.yaml: classes[0] (chat): ...``. A message that
    already starts with a file or an option (``--plan X: ...``, ``t.csv: line 3``) is kept."""
    try:
        yield
    except InputError as exc:
        text = str(exc)
        first = text.split(": ", 1)[0]
        if not (first.startswith("--") or first == str(path) or _is_path(first)):
            exc.args = (f"{path}: {text}",)
        raise


def _is_path(text: str) -> bool:
    try:
        return len(text) < 4096 and ("/" in text or os.sep in text) and Path(text).exists()
    except (OSError, ValueError):
        return False


def dumps(obj: Any) -> str:
    """Deterministic JSON (sorted keys are not imposed: field order is the contract's order)."""
    return json.dumps(json_safe(obj), indent=2, allow_nan=False) + "\n"


def emit_json(obj: Any) -> None:
    sys.stdout.write(dumps(obj))


def emit_csv(df: pd.DataFrame) -> None:
    sys.stdout.write(df.to_csv(index=False, lineterminator="\n", float_format="%.6g"))


def _fmt_cell(v: Any, digits: int) -> str:
    v = json_safe(v)
    if v is None:
        return "-"
    if isinstance(v, float):
        return f"{v:.{digits}f}" if abs(v) < 1e6 else f"{v:.4g}"
    return str(v)


def stdout_console(width: int | None = None) -> Any:
    """A rich console on standard output whose reader may leave (``| head``): the write raises
    ``BrokenPipeError`` (the CLI then exits 0, as with JSON) where rich would exit 1."""
    from rich.console import Console

    class _Out(Console):
        def on_broken_pipe(self) -> None:
            self.quiet = True
            raise BrokenPipeError

    return _Out(width=width)


def emit_table(df: pd.DataFrame, title: str | None = None, digits: int = 3,
               columns: Sequence[str] | None = None, caption: str | None = None, *,
               fit: bool = False) -> None:
    """Print ``df`` as a rich table on stdout, 160 columns wide at least; ``fit``: as wide as
    the terminal (``COLUMNS``; 80 when not a terminal), headers never wrapped (each column at
    least its header and its longest word wide: cells wrap between words), a lighter frame."""
    import pandas as pd
    from rich import box
    from rich.cells import cell_len
    from rich.console import Console
    from rich.measure import Measurement
    from rich.segment import Segment
    from rich.table import Table

    cols = list(columns) if columns is not None else list(df.columns)
    rows = [[_fmt_cell(rec[c], digits) for c in cols] for rec in df[cols].to_dict("records")]
    table = Table(title=title, caption=caption, caption_justify="left")
    if fit:
        table.box, table.pad_edge, table.collapse_padding = box.SIMPLE_HEAD, False, True
    for c in cols:
        numeric = pd.api.types.is_numeric_dtype(df[c]) and not pd.api.types.is_bool_dtype(df[c])
        # fit: the header and the longest word of a cell (up to 30) are never broken
        words = [len(w) for r in rows for w in r[cols.index(c)].split()]
        table.add_column(c, justify="right" if numeric else "left", overflow="fold",
                         min_width=max(len(str(c)), min(max(words, default=0), 30))
                         if fit else None)
    for row in rows:
        table.add_row(*row)
    width = Console().width
    console = stdout_console(width=width if fit else max(160, width))
    # a table whose columns cannot fold below the console's width is printed at its own
    # width: rich would crop each line at the console's edge, losing what stood beyond it.
    # Its measured minimum is not enough: at that width rich still lays out some tables a few
    # characters wider (columns held at their min_width), so the width is the widest line
    # the table actually renders to
    need = max(console.width,
               Measurement.get(console, console.options.update_width(10_000), table).minimum)
    for _ in range(8):
        lines = Segment.split_lines(console.render(table, console.options.update_width(need)))
        # what a line shows (rich pads some lines a column past the width with a space)
        widest = max((cell_len("".join(seg.text for seg in line).rstrip()) for line in lines),
                     default=0)
        if widest <= need:
            break
        need = widest
    if need > console.width:
        console = stdout_console(width=need)
    console.print(table)
