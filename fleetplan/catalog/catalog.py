"""The catalog: the bundled tables extended by a user's folders and model configs.

A :class:`Catalog` is the bundled ``data/`` (``FLEETPLAN_DATA_DIR`` still names another base,
read whenever no catalog is active) plus any number of user folders holding any of
``gpus.csv``, ``gpu_aliases.csv``, ``prices.csv``, ``models.csv``, ``grid_intensity.csv`` in
the bundled schemas, plus model specs read from Hugging Face ``config.json`` files. A user row
adds to the bundled rows or replaces the one of the same name (GPU, model, GPU x market,
region); a later folder wins over an earlier one. Every user row keeps its ``source`` column
and names its file (``... [user catalog /path/gpus.csv]``), so every printed figure still says
where it comes from. A user's ``gpus.csv`` needs only the datasheet figures (``gpu``,
``vram_gb``, ``tdp_w``, ``fp16_tflops_dense``, ``mem_bandwidth_gb_s``, ``interconnect_gb_s``);
columns it leaves out come from the bundled row it replaces, else from named estimates.

Main entries: :class:`Catalog`, :func:`active_catalog` (what ``load_gpus``, ``get_model``,
``price_for`` ... read), :func:`use_catalog` (make one active inside a ``with`` block; the
:class:`fleetplan.context.DataContext` does this for predict, validate, simulate and solve).
Tables are read once per catalog object; nothing is frozen at first use.
"""

from __future__ import annotations

import contextlib
import math
import os
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from fleetplan.catalog._tables import data_dir, read_checked_csv
from fleetplan.errors import InputError

if TYPE_CHECKING:
    from fleetplan.catalog.gpus import GPUSpec
    from fleetplan.catalog.grid import GridIntensity
    from fleetplan.catalog.models import ModelSpec
    from fleetplan.catalog.prices import Price

TABLES = ("gpus.csv", "gpu_aliases.csv", "prices.csv", "models.csv", "grid_intensity.csv")


def _tag(text: str, path: Path) -> str:
    mark = f"[user catalog {path}]"
    return text if str(path) in text else f"{text} {mark}"


class Catalog:
    """Bundled tables + user folders (later wins) + model specs (e.g. from ``config.json``).

    ``Catalog()`` is the bundled catalog; ``Catalog("my-gpus/")`` extends it;
    ``Catalog(models=[ModelSpec.from_hf_config("cfg/")])`` adds a model; :meth:`extend` gives a
    new catalog with more of either. Immutable once built.
    """

    def __init__(self, *folders: str | os.PathLike[str], models: Sequence[ModelSpec] = (),
                 base: str | os.PathLike[str] | None = None) -> None:
        self.base = Path(base) if base is not None else data_dir()
        dirs = []
        for f in folders:
            p = Path(f).expanduser()
            if not p.is_dir():
                raise InputError(f"{p}: no such catalog folder (a folder holding any of "
                                 f"{', '.join(TABLES)})")
            if not any((p / t).is_file() for t in TABLES):
                raise InputError(f"{p}: the catalog folder holds none of {', '.join(TABLES)}")
            dirs.append(p.resolve())
        self.folders: tuple[Path, ...] = tuple(dirs)
        self.extra_models: tuple[ModelSpec, ...] = tuple(models)
        self._tables: dict[str, Any] = {}

    def extend(self, *folders: str | os.PathLike[str],
               models: Sequence[ModelSpec] = ()) -> Catalog:
        """A new catalog: this one plus ``folders`` (after this one's) and ``models``."""
        return Catalog(*self.folders, *folders, models=(*self.extra_models, *models),
                       base=self.base)

    @property
    def is_bundled(self) -> bool:
        """Only the bundled tables (no user folder, no extra model)."""
        return not self.folders and not self.extra_models

    def describe(self) -> str:
        """One line naming what this catalog adds to the bundled tables."""
        parts = [f"user catalog {d}" for d in self.folders]
        parts += [f"model {m.model} ({m.source})" for m in self.extra_models]
        return "bundled catalog" + (" + " + " + ".join(parts) if parts else "")

    def _user_files(self, name: str) -> list[Path]:
        return [d / name for d in self.folders if (d / name).is_file()]

    def _cached(self, name: str, build: Any) -> Any:
        if name not in self._tables:
            self._tables[name] = build()
        return self._tables[name]

    # --- tables -----------------------------------------------------------------------------
    def gpus(self) -> dict[str, GPUSpec]:
        """GPU specs by canonical name."""
        return self._cached("gpus", self._build_gpus)  # type: ignore[no-any-return]

    def _build_gpus(self) -> dict[str, GPUSpec]:
        from fleetplan.catalog._rows import validate_row
        from fleetplan.catalog.gpus import (
            _NUMERIC,
            USER_REQUIRED,
            GPUSpec,
            read_gpus,
            user_gpu_defaults,
        )

        out = dict(read_gpus(self.base / "gpus.csv"))
        for path in self._user_files("gpus.csv"):
            df = read_checked_csv(path, required=USER_REQUIRED,
                                  numeric=[c for c in _NUMERIC if c in USER_REQUIRED],
                                  positive=[c for c in USER_REQUIRED if c != "gpu"],
                                  optional_numeric=[c for c in _NUMERIC
                                                    if c not in USER_REQUIRED],
                                  unique=["gpu"])
            for i, r in enumerate(df.to_dict("records")):
                given = {k: v for k, v in r.items() if k in GPUSpec.model_fields
                         and not (isinstance(v, float) and math.isnan(v))}
                name = str(given["gpu"]).strip()
                old = out.get(name)
                row = {**(old.model_dump() if old else user_gpu_defaults(given, path)), **given}
                row["gpu"] = name
                row["spec_source"] = _tag(str(row["spec_source"]), path)
                out[name] = validate_row(GPUSpec, row, path, i)
        return out

    def aliases(self) -> dict[str, str]:
        """Vendor spellings (normalized keys) -> canonical GPU names."""
        def build() -> dict[str, str]:
            from fleetplan.catalog.gpus import read_aliases

            gpus = self.gpus()
            out = dict(read_aliases(self.base / "gpu_aliases.csv", gpus))
            for path in self._user_files("gpu_aliases.csv"):
                out.update(read_aliases(path, gpus))
            return out

        return self._cached("aliases", build)  # type: ignore[no-any-return]

    def models(self) -> dict[str, ModelSpec]:
        """Model specs by short name: bundled, user ``models.csv`` rows, then extra specs."""
        def build() -> dict[str, ModelSpec]:
            from fleetplan.catalog.models import read_models

            out = dict(read_models(self.base / "models.csv"))
            for path in self._user_files("models.csv"):
                for name, spec in read_models(path).items():
                    out[name] = spec.model_copy(update={"source": _tag(spec.source, path)})
            for spec in self.extra_models:
                out[spec.model] = spec
            return out

        return self._cached("models", build)  # type: ignore[no-any-return]

    def prices(self) -> tuple[Price, ...]:
        """Every price; a user row replaces the bundled one of the same GPU and market."""
        def build() -> tuple[Price, ...]:
            from fleetplan.catalog.prices import read_prices

            rows = {(p.gpu, p.market): p for p in read_prices(self.base / "prices.csv")}
            for path in self._user_files("prices.csv"):
                for p in read_prices(path):
                    gpu = self.normalize_gpu(p.gpu, where=f"{path}: gpu")
                    rows[(gpu, p.market)] = p.model_copy(
                        update={"gpu": gpu, "source": _tag(p.source, path)})
            return tuple(rows.values())

        return self._cached("prices", build)  # type: ignore[no-any-return]

    def grid(self) -> dict[str, GridIntensity]:
        """Grid intensities by region code."""
        def build() -> dict[str, GridIntensity]:
            from fleetplan.catalog.grid import read_grid

            out = dict(read_grid(self.base / "grid_intensity.csv"))
            for path in self._user_files("grid_intensity.csv"):
                for region, g in read_grid(path).items():
                    out[region] = g.model_copy(update={"source": _tag(g.source, path)})
            return out

        return self._cached("grid", build)  # type: ignore[no-any-return]

    def normalize_gpu(self, name: str, *, where: str = "") -> str:
        """Canonical name of a GPU in this catalog (see :func:`fleetplan.catalog.normalize_gpu`)."""
        from fleetplan.catalog.gpus import normalize_gpu
        from fleetplan.errors import UnknownNameError

        with use_catalog(self):
            try:
                return normalize_gpu(name)
            except UnknownNameError as exc:
                if where:
                    raise InputError(f"{where}: {exc}") from None
                raise

    def knows_gpu(self, name: str) -> bool:
        """Whether ``name`` (any accepted spelling) is a GPU of this catalog: what ingest asks
        before it refuses a run on an unknown GPU."""
        from fleetplan.errors import UnknownNameError

        try:
            self.normalize_gpu(name)
        except UnknownNameError:
            return False
        return True

    def knows_model(self, name: str) -> bool:
        """Whether ``name`` (short name or hub id) is a model of this catalog."""
        from fleetplan.catalog.models import get_model
        from fleetplan.errors import UnknownNameError

        with use_catalog(self):
            try:
                get_model(name)
            except UnknownNameError:
                return False
        return True

    def __repr__(self) -> str:
        return f"Catalog({self.describe()})"


_ACTIVE: list[Catalog] = []
_DEFAULT: dict[str, Catalog] = {}


def bundled_catalog() -> Catalog:
    """The bundled tables (of ``FLEETPLAN_DATA_DIR`` when it is set, read at each call)."""
    key = os.environ.get("FLEETPLAN_DATA_DIR", "")
    cat = _DEFAULT.get(key)
    if cat is None:
        cat = _DEFAULT[key] = Catalog()
    return cat


def active_catalog() -> Catalog:
    """The catalog in use: the innermost :func:`use_catalog`, else :func:`bundled_catalog`."""
    return _ACTIVE[-1] if _ACTIVE else bundled_catalog()


@contextlib.contextmanager
def use_catalog(catalog: Catalog | None) -> Iterator[Catalog]:
    """Make ``catalog`` the active one inside the block (``None``: keep the active one).

    Process-wide (the worker processes of a local executor fork with it), restored on exit.
    """
    if catalog is None:
        yield active_catalog()
        return
    _ACTIVE.append(catalog)
    try:
        yield catalog
    finally:
        _ACTIVE.pop()
