"""Locating bundled data and loading checked tables.

``data_dir()`` finds the bundled ``data/`` folder (inside an installed wheel it is
``fleetplan/_data``; in a source checkout it is the repository's ``data/``). The environment
variable ``FLEETPLAN_DATA_DIR`` overrides both; it is read at each call (a default, never
frozen: a user's folders extend the bundled tables through
:class:`fleetplan.catalog.catalog.Catalog`). ``read_checked_csv`` loads a CSV and refuses it,
naming file, row, column and value, when a required column is missing or a number is not finite.
"""

from __future__ import annotations

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


def read_checked_csv(
    path: str | os.PathLike[str],
    *,
    required: Iterable[str],
    numeric: Iterable[str] = (),
    positive: Iterable[str] = (),
    optional_numeric: Iterable[str] = (),
) -> pd.DataFrame:
    """Read ``path`` and check it: required columns present, numbers finite (and > 0 if asked).

    ``optional_numeric`` columns may be empty (NaN) but, when filled, must be finite numbers.
    """
    p = Path(path)
    if p.exists():  # a FIFO or device would hang read_csv (issue 16)
        from fleetplan._load import check_regular_file

        check_regular_file(p, what="CSV table")
    try:
        df = pd.read_csv(p, keep_default_na=True)
    except FileNotFoundError:
        raise DataError(f"{p}: file not found") from None
    except (pd.errors.ParserError, pd.errors.EmptyDataError, UnicodeDecodeError) as exc:
        raise DataError(f"{p}: not a readable CSV table ({str(exc).splitlines()[0]})") from None
    missing = [c for c in required if c not in df.columns]
    if missing:
        raise DataError(f"{p}: missing required column(s) {', '.join(missing)}")
    positive = set(positive)
    for col, allow_nan in [(c, False) for c in numeric] + [(c, True) for c in optional_numeric]:
        if col not in df.columns:
            if allow_nan:
                continue
            raise DataError(f"{p}: missing required column {col}")
        values = pd.to_numeric(df[col], errors="coerce")
        for i, (raw, v) in enumerate(zip(df[col], values, strict=True)):
            if allow_nan and (raw is None or (isinstance(raw, float) and math.isnan(raw))):
                continue
            if v is None or not math.isfinite(float(v)):
                raise DataError(f"{p}: row {i + 2}, column {col}: {raw!r} is not a finite number")
            if col in positive and not float(v) > 0:
                raise DataError(f"{p}: row {i + 2}, column {col}: {raw!r} must be > 0")
        df[col] = values
    return df


def bundled(name: str) -> Path:
    """Path of a bundled table by file name (e.g. ``gpus.csv``)."""
    return data_dir() / name
