"""The profile store: one tidy table of measured runs, persisted as CSV, written atomically.

Main entries: :func:`load_profiles` (bundled or given file, schema-checked),
:class:`ProfileStore` (``.frame``, ``.add``, ``.save``, ``.select``).
"""

from __future__ import annotations

import io
import math
import os
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

import pandas as pd
from pydantic import ValidationError

from fleetplan._io import atomic_write_text, user_data_dir
from fleetplan.catalog._tables import data_dir
from fleetplan.errors import DataError, UnknownNameError
from fleetplan.profiles.record import BenchmarkRun
from fleetplan.profiles.schema import BY_NAME, COLUMN_NAMES, COLUMNS, INF_ALLOWED

DEFAULT_STORE_NAME = "profiles.csv"

_PANDAS_DTYPES = {"str": "string", "int": "Int64", "float": "float64", "bool": "bool"}


def default_store_path() -> Path:
    """The store read by default: the active data context's (:func:`fleetplan.context.
    active_data`, e.g. ``--store``), else the user's (:func:`user_store_path`) when it exists,
    else the bundled ``data/profiles.csv``."""
    from fleetplan.context import active_data

    if active_data().store is not None:
        return Path(active_data().store)  # type: ignore[arg-type]
    user = user_store_path()
    return user if user.is_file() else data_dir() / DEFAULT_STORE_NAME


def user_store_path() -> Path:
    """The user's store, ``<user data dir>/profiles.csv`` (:func:`fleetplan._io.user_data_dir`):
    where ``fleetplan ingest`` and ``bench --ingest`` write without ``--store``."""
    return user_data_dir() / DEFAULT_STORE_NAME


def empty_frame() -> pd.DataFrame:
    return _typed(pd.DataFrame({c: [] for c in COLUMN_NAMES}))


def _typed(df: pd.DataFrame) -> pd.DataFrame:
    out = df.reindex(columns=list(COLUMN_NAMES))
    for c in COLUMNS:
        if c.kind == "bool":
            col = out[c.name]
            if col.dtype != bool:
                out[c.name] = [str(v).strip().lower() in ("true", "1") if not pd.isna(v)
                               else False for v in col]
        elif c.kind in ("int", "float") and out[c.name].dtype == object:
            out[c.name] = pd.to_numeric(out[c.name])
    return out.astype({c.name: _PANDAS_DTYPES[c.kind] for c in COLUMNS})


@dataclass
class ProfileStore:
    """A table of runs (one row per run, columns of :mod:`fleetplan.profiles.schema`)."""

    frame: pd.DataFrame = field(default_factory=empty_frame)
    path: Path | None = None

    def __len__(self) -> int:
        return len(self.frame)

    @property
    def run_ids(self) -> set[str]:
        return set(self.frame["run_id"].astype(str))

    def add(self, runs: Iterable[BenchmarkRun]) -> list[BenchmarkRun]:
        """Add runs not already present (by ``run_id``); returns those added. Pure in-memory."""
        seen = self.run_ids
        new = []
        for r in runs:
            rid = r.run_id  # type: ignore[attr-defined]
            if rid not in seen:
                seen.add(rid)
                new.append(r)
        if new:
            rows = pd.DataFrame([r.model_dump() for r in new])
            parts = [f for f in (self.frame, _typed(rows)) if len(f)]
            self.frame = _typed(pd.concat(parts, ignore_index=True))
            self.frame = self._sorted(self.frame)
        return new

    @staticmethod
    def _sorted(df: pd.DataFrame) -> pd.DataFrame:
        keys = ["model", "gpu", "gpu_count", "request_rate", "source_file", "source_line"]
        return df.sort_values(keys, kind="mergesort").reset_index(drop=True)

    def to_csv(self) -> str:
        buf = io.StringIO()
        self.frame.to_csv(buf, index=False, lineterminator="\n")
        return buf.getvalue()

    def save(self, path: str | os.PathLike[str] | None = None) -> Path:
        """Write the table atomically (temporary file + rename)."""
        target = Path(path) if path is not None else self.path
        if target is None:
            raise DataError("no path to save the profile store to")
        atomic_write_text(target, self.to_csv())
        self.path = target
        return target

    def runs(self) -> list[BenchmarkRun]:
        """The rows as typed records."""
        out = []
        for rec in self.frame.to_dict("records"):
            clean = {k: _py(v) for k, v in rec.items() if not _missing(v)}
            out.append(BenchmarkRun.model_validate(clean))
        return out

    def models(self) -> list[str]:
        return sorted(self.frame["model"].dropna().unique())

    def configs(self, model: str | None = None) -> list[str]:
        df = self.frame if model is None else self.frame[self.frame["model"] == model]
        return sorted(df["config"].dropna().unique())

    def select(self, model: str | None = None, gpu: str | None = None,
               config: str | None = None) -> ProfileStore:
        """Runs of one model / GPU / configuration; unknown names fail with the valid ones."""
        df = self.frame
        for col, val in (("model", model), ("gpu", gpu), ("config", config)):
            if val is None:
                continue
            valid = sorted(df[col].dropna().unique())
            if val not in valid:
                raise UnknownNameError(col if col != "gpu" else "GPU", val, valid)
            df = df[df[col] == val]
        return ProfileStore(df.reset_index(drop=True), self.path)


def _missing(v: object) -> bool:
    return v is None or v is pd.NA or (isinstance(v, float) and math.isnan(v))


def _py(v: object) -> object:
    if hasattr(v, "item"):
        return v.item()  # type: ignore[union-attr]
    return v


def load_profiles(path: str | os.PathLike[str] | None = None) -> ProfileStore:
    """Load a store (default: the bundled one), checking every row against the schema.

    A missing file gives an empty store only when a path was given (a new store); the bundled
    store must exist.
    """
    p = Path(path) if path is not None else default_store_path()
    if not p.exists():
        if path is None:
            raise DataError(f"{p}: bundled profile store not found")
        return ProfileStore(empty_frame(), p)
    try:
        raw = pd.read_csv(p, dtype=str, keep_default_na=False)
    except (pd.errors.ParserError, UnicodeDecodeError) as exc:
        raise DataError(f"{p}: not a readable CSV table ({str(exc).splitlines()[0]})") from None
    except pd.errors.EmptyDataError:
        return ProfileStore(empty_frame(), p)
    missing = [c.name for c in COLUMNS if c.required and c.name not in raw.columns]
    if missing:
        raise DataError(f"{p}: missing required column(s) {', '.join(missing)}")
    unknown = [c for c in raw.columns if c not in BY_NAME]
    if unknown:
        raise DataError(f"{p}: unknown column(s) {', '.join(unknown)}")
    for i, rec in enumerate(raw.to_dict("records")):
        vals = {}
        for k, v in rec.items():
            if v == "":
                continue
            kind = BY_NAME[str(k)].kind
            if kind in ("int", "float"):
                try:
                    num = float(v)
                except ValueError:
                    raise DataError(
                        f"{p}: line {i + 2}, column {k}: {v!r} is not a number"
                    ) from None
                if not math.isfinite(num) and not (k in INF_ALLOWED and num > 0):
                    raise DataError(f"{p}: line {i + 2}, column {k}: {v!r} is not finite")
                vals[k] = int(num) if kind == "int" and num.is_integer() else num
            elif kind == "bool":
                vals[k] = v.strip().lower() in ("true", "1")
            else:
                vals[k] = v
        try:
            BenchmarkRun.model_validate(vals)
        except ValidationError as exc:
            err = exc.errors()[0]
            loc = ".".join(str(x) for x in err["loc"])
            raise DataError(
                f"{p}: line {i + 2}, column {loc}: {err.get('input')!r}: {err['msg']}"
            ) from None
    return ProfileStore(ProfileStore._sorted(_typed(raw.replace("", pd.NA))), p)
