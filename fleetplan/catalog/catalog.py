"""The catalog: the bundled tables extended by a user's folders and model configs, and every
lookup in them.

A :class:`Catalog` is the bundled ``data/`` (``FLEETPLAN_DATA_DIR`` names another base, read when
the catalog is built) plus any number of user folders holding any of
``gpus.csv``, ``gpu_aliases.csv``, ``prices.csv``, ``models.csv``, ``grid_intensity.csv``,
``interconnects.csv`` in the bundled schemas, plus model specs read from Hugging Face
``config.json`` files. A user row adds to the bundled rows or replaces the one of the same
name (GPU, model, GPU x market, region, link); a later folder wins over an earlier one. Every
user row keeps its ``source`` column and names its file
(``... [user catalog /path/gpus.csv]``), so every printed figure still says
where it comes from. A user's ``gpus.csv`` needs only the datasheet figures (``gpu``,
``vram_gb``, ``tdp_w``, ``fp16_tflops_dense``, ``mem_bandwidth_gb_s``, ``interconnect_gb_s``);
columns it leaves out come from the bundled row it replaces, else from named estimates.

Main entries: :class:`Catalog` (tables and lookups: :meth:`Catalog.model`, :meth:`Catalog.gpu`,
:meth:`Catalog.normalize_gpu`, :meth:`Catalog.price`, :meth:`Catalog.grid_intensity`,
:meth:`Catalog.interconnect`),
:func:`bundled_catalog`. A catalog is passed to what reads it, usually inside a
:class:`fleetplan.context.DataContext`; there is no process-wide "current" catalog. Tables are
read once per catalog object; nothing is frozen at first use.
"""

from __future__ import annotations

import math
import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from fleetplan.catalog._rows import validate_row
from fleetplan.catalog._tables import data_dir, read_checked_csv, row_line
from fleetplan.catalog.gpus import (
    NUMERIC,
    USER_REQUIRED,
    GPUSpec,
    canonical_gpu,
    read_aliases,
    read_gpus,
    user_gpu_defaults,
)
from fleetplan.catalog.grid import DEFAULT_REGION, GridIntensity, read_grid
from fleetplan.catalog.interconnects import Interconnect, find_link, read_interconnects
from fleetplan.catalog.model_library import library_spec
from fleetplan.catalog.models import ModelSpec, normalize_model, read_models
from fleetplan.catalog.prices import DEFAULT_MARKET, Price, read_prices
from fleetplan.errors import InputError, UnknownNameError

__all__ = ["DEFAULT_MARKET", "DEFAULT_REGION", "Catalog", "bundled_catalog"]

TABLES = ("gpus.csv", "gpu_aliases.csv", "prices.csv", "models.csv", "grid_intensity.csv",
          "interconnects.csv")


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

    def checked(self) -> Catalog:
        """This catalog, every table of its folders read and checked now: a bad user table is
        refused with its own file, row and column before anything names one of its rows."""
        self.gpus()
        self.aliases()
        self.models()
        self.prices()
        self.grid()
        self.interconnects()
        return self

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
        out = dict(read_gpus(self.base / "gpus.csv"))
        for path in self._user_files("gpus.csv"):
            df = read_checked_csv(path, required=USER_REQUIRED,
                                  numeric=[c for c in NUMERIC if c in USER_REQUIRED],
                                  positive=[c for c in USER_REQUIRED if c != "gpu"],
                                  optional_numeric=[c for c in NUMERIC
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
                out[name] = validate_row(GPUSpec, row, path, row_line(df, i))
        return out

    def aliases(self) -> dict[str, str]:
        """Vendor spellings (normalized keys) -> canonical GPU names."""
        def build() -> dict[str, str]:
            gpus = self.gpus()
            out = dict(read_aliases(self.base / "gpu_aliases.csv", gpus))
            for path in self._user_files("gpu_aliases.csv"):
                out.update(read_aliases(path, gpus))
            return out

        return self._cached("aliases", build)  # type: ignore[no-any-return]

    def models(self) -> dict[str, ModelSpec]:
        """Model specs by short name: bundled, user ``models.csv`` rows, then extra specs."""
        def build() -> dict[str, ModelSpec]:
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
            out = dict(read_grid(self.base / "grid_intensity.csv"))
            for path in self._user_files("grid_intensity.csv"):
                for region, g in read_grid(path).items():
                    out[region] = g.model_copy(update={"source": _tag(g.source, path)})
            return out

        return self._cached("grid", build)  # type: ignore[no-any-return]

    def interconnects(self) -> dict[str, Interconnect]:
        """Links by name (:mod:`fleetplan.catalog.interconnects`); a user row replaces the
        bundled one of the same name."""
        def build() -> dict[str, Interconnect]:
            out = dict(read_interconnects(self.base / "interconnects.csv"))
            for path in self._user_files("interconnects.csv"):
                for name, link in read_interconnects(path).items():
                    out[name] = link.model_copy(update={
                        "bandwidth_source": _tag(link.bandwidth_source, path),
                        "latency_source": _tag(link.latency_source, path)})
            return out

        return self._cached("interconnects", build)  # type: ignore[no-any-return]

    # --- lookups ----------------------------------------------------------------------------
    def interconnect(self, name: str) -> Interconnect:
        """A link by its name or an alias, any case or punctuation (``IB NDR``,
        ``ib-ndr-400``); unknown: an :class:`UnknownNameError` naming the valid ones."""
        return find_link(name, self.interconnects())

    def normalize_gpu(self, name: str, *, where: str = "") -> str:
        """Canonical name of a GPU of this catalog, from a canonical name, an alias or a vendor
        spelling (``NVIDIA-GeForce-RTX-4090`` -> ``RTX-4090``). Unknown: an
        :class:`UnknownNameError` naming the closest valid one (prefixed by ``where`` as an
        :class:`InputError` when given)."""
        try:
            return canonical_gpu(name, self.gpus(), self.aliases())
        except UnknownNameError as exc:
            if where:
                raise InputError(f"{where}: {exc}") from None
            raise

    def gpu(self, name: str) -> GPUSpec:
        """The spec of a GPU by any accepted spelling."""
        return self.gpus()[self.normalize_gpu(name)]

    def replaced(self, model: str, gpu: str) -> dict[str, str]:
        """What of this catalog replaces a bundled row of ``model`` or ``gpu`` with other
        figures (a user's gpus.csv / models.csv row, a config.json named like a bundled model):
        ``"gpu"`` and ``"model"`` -> a phrase naming the file; empty when both are the bundled
        ones."""
        base = bundled_catalog()
        out = {}
        spec = self.gpu(gpu)
        if spec.gpu in base.gpus() and spec != base.gpus()[spec.gpu]:
            out["gpu"] = f"the {spec.gpu} row of {spec.spec_source}"
        try:
            mine, theirs = self.model(model), base.model(model)
        except UnknownNameError:
            return out
        if mine != theirs:
            out["model"] = f"the {mine.model} spec of {mine.source}"
        return out

    def knows_gpu(self, name: str) -> bool:
        """Whether ``name`` (any accepted spelling) is a GPU of this catalog: what ingest asks
        before it refuses a run on an unknown GPU."""
        try:
            self.normalize_gpu(name)
        except UnknownNameError:
            return False
        return True

    def model(self, name: str) -> ModelSpec:
        """Spec of a model by short name or hub id (a spec's own ``hf_id`` matches too); a name
        that matches none exactly may match one model whatever its case (a server's
        ``--served-model-name deepseek-r1`` for ``DeepSeek-R1``), never two. A name this
        catalog does not hold is looked up last in the bundled library of popular
        checkpoints' config.json (:mod:`fleetplan.catalog.model_library`)."""
        models = self.models()
        short = normalize_model(name)
        if short in models:
            return models[short]
        for spec in models.values():
            if spec.hf_id == name or normalize_model(spec.hf_id) == short:
                return spec
        folded = short.casefold()
        same = [spec for key, spec in models.items()
                if folded in (key.casefold(), normalize_model(spec.hf_id).casefold())]
        if len(same) == 1:
            return same[0]
        # last, the bundled library of popular checkpoints' config.json (by hub id)
        found = library_spec(name)
        if found is not None:
            return found
        raise UnknownNameError("model", name, models)

    def knows_model(self, name: str) -> bool:
        """Whether ``name`` (short name or hub id) is a model of this catalog."""
        try:
            self.model(name)
        except UnknownNameError:
            return False
        return True

    def markets(self) -> list[str]:
        """The price markets of this catalog, sorted."""
        return sorted({p.market for p in self.prices()})

    def price(self, gpu: str, market: str = DEFAULT_MARKET,
              overrides: Mapping[str, float] | None = None) -> Price:
        """The price of one GPU-hour of ``gpu`` in ``market``; an override (by any GPU
        spelling) wins and says it is the user's."""
        canon = self.normalize_gpu(gpu)
        for name, value in (overrides or {}).items():
            if self.normalize_gpu(name) == canon:
                if not value > 0:
                    raise InputError(f"price for {name}: {value!r} must be > 0 USD per GPU-hour")
                return Price(gpu=canon, market="user", price_usd_per_gpu_hour=float(value),
                             price_date="given", source="user-given price")
        if market not in self.markets():
            raise UnknownNameError("market", market, self.markets())
        for p in self.prices():
            if p.gpu == canon and p.market == market:
                return p
        raise InputError(
            f"no {market} price for GPU {canon} in the catalog; give one with --price "
            f"{canon}=USD (or prices_usd_per_gpu_hour in a scenario)")

    def grid_intensity(self, region: str,
                       overrides: Mapping[str, float] | None = None) -> GridIntensity:
        """Intensity of ``region``; a user override (same region name) wins and says so."""
        if overrides and region in overrides:
            v = overrides[region]
            if not v >= 0:
                raise InputError(f"grid_g_per_kwh.{region}: {v!r} must be >= 0")
            return GridIntensity(region=region, name=region, g_co2_per_kwh=float(v),
                                 year="given", source="user-given grid intensity")
        grid = self.grid()
        if region not in grid:
            raise UnknownNameError("region", region, grid)
        return grid[region]

    def _key(self) -> tuple[Any, ...]:
        return (self.base, self.folders, self.extra_models)

    def __eq__(self, other: object) -> bool:
        # what it is built from (a copy sent to a worker process equals its original)
        return isinstance(other, Catalog) and self._key() == other._key()

    def __hash__(self) -> int:
        return hash(self._key())

    def __repr__(self) -> str:
        return f"Catalog({self.describe()})"


_DEFAULT: dict[str, Catalog] = {}


def bundled_catalog() -> Catalog:
    """The bundled tables (of ``FLEETPLAN_DATA_DIR`` when it is set, read at each call): the
    catalog of a call given none."""
    key = os.environ.get("FLEETPLAN_DATA_DIR", "")
    cat = _DEFAULT.get(key)
    if cat is None:
        cat = _DEFAULT[key] = Catalog()
    return cat
