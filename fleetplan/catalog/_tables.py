"""Locating bundled data and loading checked tables.

``data_dir()`` finds the bundled ``data/`` folder (inside an installed wheel it is
``fleetplan/_data``; in a source checkout it is the repository's ``data/``). The environment
variable ``FLEETPLAN_DATA_DIR`` overrides both; it is read at each call (a default, never
frozen: a user's folders extend the bundled tables through
:class:`fleetplan.catalog.catalog.Catalog`). ``read_checked_csv`` loads a CSV through the bounded
reader (regular file, at most :data:`MAX_TABLE_BYTES`) and refuses it, naming file, row, column
and value, when a required column is missing or empty or a number is not finite.
"""

from __future__ import annotations

import csv
import io
import math
import os
from collections.abc import Iterable
from pathlib import Path

import pandas as pd

from fleetplan.errors import DataError

_PKG = Path(__file__).resolve().parents[1]


def data_dir() -> Path:
    """The folder holding fleetplan's bundled tables."""
    env = os.environ.get("FLEETPLAN_DATA_DIR")
    if env:
        return Path(env)
    installed = _PKG / "_data"
    if installed.is_dir():
        return installed
    return _PKG.parent / "data"


MAX_TABLE_BYTES = 16 * 2**20
"""Largest catalog table read (the bundled ones are at most ~70 KB; a user's is read whole)."""


def data_lines(text: str) -> list[int]:
    """The file line each data row of a CSV text starts on (1-based; the header is line 1),
    as pandas reads it: blank lines are no rows, a quoted cell may span lines."""
    reader = csv.reader(io.StringIO(text))
    lines: list[int] = []
    end = 0
    for k, row in enumerate(reader):
        start, end = end + 1, reader.line_num
        if k > 0 and row:
            lines.append(start)
    return lines


def row_line(df: pd.DataFrame, i: int) -> int:
    """The file line of ``df``'s ``i``-th data row (read by :func:`read_checked_csv`; a frame
    from elsewhere: ``i + 2``, a file without blank lines)."""
    lines = df.attrs.get("lines")
    return lines[i] if lines is not None and i < len(lines) else i + 2


def read_checked_csv(
    path: str | os.PathLike[str],
    *,
    required: Iterable[str],
    numeric: Iterable[str] = (),
    positive: Iterable[str] = (),
    optional_numeric: Iterable[str] = (),
    unique: Iterable[str] = (),
) -> pd.DataFrame:
    """Read ``path`` and check it: required columns present, numbers finite (and > 0 if asked).

    The file is read through the bounded reader (a regular file of at most
    :data:`MAX_TABLE_BYTES`, UTF-8; a FIFO or device is refused by its type). Required columns
    that are not numbers are read as text, and none of their cells may be empty.
    ``optional_numeric`` columns may be empty (NaN) but, when filled, must be finite numbers.
    ``unique``: the columns that name a row (``gpu``; ``gpu`` and ``market``): two rows naming
    the same thing are refused, both rows named (the later one would win silently).
    Every refusal is one :class:`DataError` line naming file, row (the CSV line), column and
    value.
    """
    from fleetplan._load import read_text_bounded, show_value

    p = Path(path)
    if not p.exists() and not p.is_symlink():
        raise DataError(f"{p}: file not found")
    text = read_text_bounded(p, what="CSV table", max_bytes=MAX_TABLE_BYTES)
    required = list(required)
    numeric, optional_numeric = list(numeric), list(optional_numeric)
    texts = [c for c in required if c not in numeric and c not in optional_numeric]
    try:
        df = pd.read_csv(io.StringIO(text), keep_default_na=True,
                         dtype={c: str for c in texts})
    except (pd.errors.ParserError, pd.errors.EmptyDataError, ValueError, OverflowError) as exc:
        why = " ".join(str(exc).split())[:200]
        raise DataError(f"{p}: not a readable CSV table ({why})") from None
    lines = data_lines(text)
    if len(lines) == len(df):  # else (a parse the csv module reads otherwise): rows + 2
        df.attrs["lines"] = lines
    missing = [c for c in required if c not in df.columns]
    if missing:
        raise DataError(f"{p}: missing required column(s) {', '.join(missing)}")
    for col in texts:
        for i, raw in enumerate(df[col]):
            if not isinstance(raw, str) or not raw.strip():
                shown = "" if not isinstance(raw, str) else raw
                raise DataError(f"{p}: row {row_line(df, i)}, column {col}: "
                                f"{show_value(shown, 40)} is empty (a required column)")
    positive = set(positive)
    for col, allow_nan in [(c, False) for c in numeric] + [(c, True) for c in optional_numeric]:
        if col not in df.columns:
            if allow_nan:
                continue
            raise DataError(f"{p}: missing required column {col}")
        try:
            values = pd.to_numeric(df[col], errors="coerce")
        except OverflowError:  # a whole number beyond any float (400 digits): not finite
            values = pd.Series([_number(x) for x in df[col]], index=df.index, dtype=float)
        for i, (raw, v) in enumerate(zip(df[col], values, strict=True)):
            if allow_nan and (raw is None or (isinstance(raw, float) and math.isnan(raw))):
                continue
            if v is None or not math.isfinite(float(v)):
                raise DataError(f"{p}: row {row_line(df, i)}, column {col}: "
                                f"{show_value(raw, 40)} is not a finite number")
            if col in positive and not float(v) > 0:
                raise DataError(f"{p}: row {row_line(df, i)}, column {col}: "
                                f"{show_value(raw, 40)} must be > 0")
        df[col] = values
    key = list(unique)
    if key:
        seen: dict[tuple[str, ...], int] = {}
        for i, row in enumerate(df[key].astype(str).itertuples(index=False, name=None)):
            name = tuple(v.strip() for v in row)
            if name in seen:
                shown = ", ".join(f"{c} {show_value(v, 40)}" for c, v in zip(key, name,
                                                                           strict=True))
                raise DataError(f"{p}: rows {row_line(df, seen[name])} and {row_line(df, i)}: "
                                f"the same {shown} twice (one row each)")
            seen[name] = i
    return df


def bundled(name: str) -> Path:
    """Path of a bundled table by file name (e.g. ``gpus.csv``)."""
    return data_dir() / name


def _number(raw: object) -> float:
    """``raw`` as a float: NaN where it is no number, infinite where it is too large for one."""
    try:
        return float(raw)  # type: ignore[arg-type]
    except OverflowError:
        return math.inf
    except (TypeError, ValueError):
        return math.nan
