"""The profile store: one tidy table of measured runs, persisted as CSV, written atomically.

Main entries: :func:`load_profiles` (bundled or given file, schema-checked),
:class:`ProfileStore` (``.frame``, ``.add``, ``.save``, ``.select``).
"""

from __future__ import annotations

import io
import math
import os
import stat
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

import pandas as pd
from pydantic import ValidationError

from fleetplan._io import atomic_write_text, user_data_dir
from fleetplan.catalog._tables import data_dir, data_lines
from fleetplan.catalog.catalog import Catalog
from fleetplan.errors import DataError, UnknownNameError
from fleetplan.profiles.record import BenchmarkRun
from fleetplan.profiles.schema import BY_NAME, COLUMN_NAMES, COLUMNS, INF_ALLOWED
from fleetplan.profiles.vllm import MAX_COUNT, first_problem, short

DEFAULT_STORE_NAME = "profiles.csv"

_PANDAS_DTYPES = {"str": "string", "int": "Int64", "float": "float64", "bool": "bool"}


def default_store_path(store: str | os.PathLike[str] | None = None) -> Path:
    """The store read by default: ``store`` when given (a data context's,
    :attr:`fleetplan.context.DataContext.store`, e.g. ``--store``), else the user's
    (:func:`user_store_path`) when it exists, else the bundled ``data/profiles.csv``."""
    if store is not None:
        return Path(store)
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
                out[c.name] = [bool(v) if isinstance(v, bool) else _bool(str(v)) is True
                               if not pd.isna(v) else False for v in col]
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

    def split_known(self, catalog: Catalog | None = None) -> tuple[ProfileStore, list[str]]:
        """(the runs whose model and GPU ``catalog`` knows (default: the bundled one), one line
        for each other run): a run of an unknown model or GPU can be stored but not predicted,
        calibrated nor validated, so commands that model runs refuse it alone and go on with
        the rest."""
        from fleetplan.catalog.catalog import bundled_catalog

        cat = catalog if catalog is not None else bundled_catalog()
        models, gpus = set(cat.models()), set(cat.gpus())
        known = self.frame["model"].isin(models) & self.frame["gpu"].isin(gpus)
        lines = []
        for rec in self.frame[~known].to_dict("records"):
            what = (f"unknown model {rec['model']}" if rec["model"] not in models
                    else f"unknown GPU {rec['gpu']}")
            lines.append(f"{self.path or 'store'}: run {rec['run_id']} ({rec['source_file']} "
                         f"line {rec['source_line']}, {rec['config']} at "
                         f"{rec['request_rate']:g} req/s): {what}: not in the catalog (add it "
                         "with --model-config or a --catalog folder); refused, the others go on")
        kept = ProfileStore(self.frame[known].reset_index(drop=True), self.path)
        return kept, lines

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


MAX_STORE_BYTES = 2**30
_TRUE, _FALSE = ("true", "1"), ("false", "0")


def _bool(text: str) -> bool | None:
    """A stored boolean: True/False (as pandas writes them) or 1/0, any case; else None."""
    low = text.strip().lower()
    return True if low in _TRUE else False if low in _FALSE else None


def _check_file(p: Path) -> None:
    """A store must be a regular file of bounded size: a folder, FIFO or device is refused by
    its type before anything is read."""
    try:
        info = os.stat(p)
    except OSError as exc:
        raise DataError(f"{p}: cannot read the profile store ({exc.strerror or exc})") from None
    if stat.S_ISDIR(info.st_mode):
        raise DataError(f"{p}: a folder, not a profile store (give a .csv file with --store)")
    if not stat.S_ISREG(info.st_mode):
        raise DataError(f"{p}: not a regular file (a FIFO or device), not a profile store")
    if info.st_size > MAX_STORE_BYTES:
        raise DataError(f"{p}: {info.st_size} bytes, more than a store's limit of "
                        f"{MAX_STORE_BYTES} bytes")


def _cell(p: Path, line: int, k: str, v: str) -> object:
    """One stored value, typed by its column; refused with file, line, column and value."""
    kind = BY_NAME[k].kind
    if kind == "bool":
        b = _bool(v)
        if b is None:
            raise DataError(f"{p}: line {line}, column {k}: {short(v)} is not a boolean "
                            "(True or False)")
        return b
    if kind not in ("int", "float"):
        return v
    try:
        num = float(v)
    except ValueError:
        raise DataError(f"{p}: line {line}, column {k}: {short(v)} is not a number") from None
    if not math.isfinite(num) and not (k in INF_ALLOWED and num > 0):
        raise DataError(f"{p}: line {line}, column {k}: {short(v)} is not finite")
    if kind == "int":
        if not num.is_integer():
            raise DataError(f"{p}: line {line}, column {k}: {short(v)} is not a whole number")
        if abs(num) > MAX_COUNT:
            raise DataError(f"{p}: line {line}, column {k}: {short(v)} is out of range "
                            f"(at most {MAX_COUNT:g})")
        return int(num)
    return num


def load_profiles(path: str | os.PathLike[str] | None = None, *,
                  default: str | os.PathLike[str] | None = None) -> ProfileStore:
    """Load a store, checking every row against the schema: ``path``, else ``default`` (a data
    context's ``store``), else yours when it exists, else the bundled one
    (:func:`default_store_path`).

    A missing file gives an empty store only when ``path`` was given (a new store); any other
    store must exist. Every value is checked by its column's type (integers whole and bounded,
    booleans True/False or 1/0, numbers finite); a ``run_id`` may appear once.
    """
    p = Path(path) if path is not None else default_store_path(default)
    if not p.exists() and not p.is_symlink():
        if path is None:
            what = "bundled profile store" if default is None else "profile store"
            raise DataError(f"{p}: {what} not found")
        return ProfileStore(empty_frame(), p)
    _check_file(p)
    try:
        # read once as text: the frame, and the file line of each row (blank lines skipped)
        text = p.read_text(encoding="utf-8-sig")
        raw = pd.read_csv(io.StringIO(text), dtype=str, keep_default_na=False)
    except (pd.errors.ParserError, UnicodeDecodeError, ValueError) as exc:
        first = (str(exc).splitlines() or [type(exc).__name__])[0][:200]
        raise DataError(f"{p}: not a readable CSV table ({first})") from None
    except pd.errors.EmptyDataError:
        return ProfileStore(empty_frame(), p)
    except OSError as exc:
        raise DataError(f"{p}: cannot read the profile store ({exc.strerror or exc})") from None
    missing = [c.name for c in COLUMNS if c.required and c.name not in raw.columns]
    if missing:
        raise DataError(f"{p}: missing required column(s) {', '.join(missing)}")
    unknown = [str(c) for c in raw.columns if c not in BY_NAME]
    if unknown:
        raise DataError(f"{p}: unknown column(s) {', '.join(c[:60] for c in unknown[:5])}"
                        + (" ..." if len(unknown) > 5 else ""))
    lines = data_lines(text)
    if len(lines) != len(raw):  # a parse the csv module reads otherwise: rows + 2
        lines = list(range(2, len(raw) + 2))
    seen: dict[str, int] = {}
    for line, rec in zip(lines, raw.to_dict("records"), strict=True):
        vals = {str(k): _cell(p, line, str(k), v) for k, v in rec.items() if v != ""}
        try:
            BenchmarkRun.model_validate(vals)
        except ValidationError as exc:
            col, msg = first_problem(exc)
            raise DataError(f"{p}: line {line}, " + (f"column {col}: {msg}" if col else msg)) \
                from None
        rid = str(vals["run_id"])
        if rid in seen:
            raise DataError(f"{p}: line {line}, column run_id: {short(rid)} is already the "
                            f"run of line {seen[rid]} (each run is stored once)")
        seen[rid] = line
    typed = raw.replace("", pd.NA)
    for c in COLUMNS:  # booleans as checked above (1/0 too), not pandas' reading of them
        if c.kind == "bool" and c.name in typed.columns:
            typed[c.name] = [False if pd.isna(v) else _bool(str(v)) for v in typed[c.name]]
    return ProfileStore(ProfileStore._sorted(_typed(typed)), p)
