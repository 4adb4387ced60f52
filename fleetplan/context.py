"""One explicit data context: which catalog, profile store, calibration and cache folder a
command reads.

Main entry: :class:`DataContext`. Build one (``DataContext.build(catalog="my-gpus/",
model_configs=["Qwen3-8B/"], store="runs.csv", calibration="cal.json")``) and pass it down:
:func:`fleetplan.predict` (``context=``), :func:`fleetplan.load_scenario` (``context=``: the
scenario keeps it, and :func:`fleetplan.simulate` and :func:`fleetplan.solve` read it from the
scenario). Its :class:`~fleetplan.catalog.catalog.Catalog` is reached only that way: there is no
process-wide catalog.

The files a context names (store, calibration, cache folder) are passed down the same way:
whatever reads one of them receives it as an argument from its caller (the store of
:func:`fleetplan.profiles.store.load_profiles`, the calibration of
:func:`fleetplan.replica.params.replica_params`, the folder of
:func:`fleetplan.optimize.cache.cache_root`); there is no process-wide default to set, so two
contexts used side by side in one process each read their own files, and a scenario sent to a
worker process takes its context with it. A context that names none of them reads the user's
own files, else the bundled ones (and ``$FLEETPLAN_CACHE_DIR``, else ``~/.cache/fleetplan``).
Nothing is frozen at first use and nothing writes into the installed package's data: a context
only names what is read. The CLI builds one from ``--catalog``, ``--model-config``, ``--store``
and ``--calibration`` (a scenario's ``catalog:`` and ``model_config:`` add to it:
:meth:`DataContext.for_scenario`).
"""

from __future__ import annotations

import functools
import os
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from fleetplan.catalog.catalog import Catalog, bundled_catalog
from fleetplan.catalog.models import ModelSpec

PathLike = str | os.PathLike[str]


@dataclass(frozen=True)
class DataContext:
    """Catalog + profile store + calibration + cache folder (``None``: the usual default).

    ``catalog``: the catalog every lookup of a call given this context reads (default: the
    bundled one, :func:`~fleetplan.catalog.catalog.bundled_catalog`). ``store``,
    ``calibration``, ``cache_dir``: the files the call reads instead of the user's or the bundled
    ones (``None``: those), handed by the call to each reader that needs one."""

    catalog: Catalog = field(default_factory=bundled_catalog)
    store: Path | None = None
    calibration: Path | None = None
    cache_dir: Path | None = None
    models: tuple[ModelSpec, ...] = field(default=())

    @classmethod
    def build(cls, *, catalog: PathLike | Sequence[PathLike] | Catalog | None = None,
              model_configs: Sequence[PathLike] = (), store: PathLike | None = None,
              calibration: PathLike | None = None, cache_dir: PathLike | None = None,
              base: Catalog | None = None) -> DataContext:
        """A context from paths: catalog folder(s) (or a :class:`Catalog`), Hugging Face
        ``config.json`` files or folders (their models join the catalog), store, calibration,
        cache folder. Folders extend ``base`` (default: the bundled catalog)."""
        specs = tuple(ModelSpec.from_hf_config(p) for p in model_configs)
        if isinstance(catalog, Catalog):
            cat = catalog.extend(models=specs) if specs else catalog
        else:
            folders: Sequence[PathLike] = (
                () if catalog is None else [catalog] if isinstance(catalog, str | os.PathLike)
                else catalog)
            cat = base if base is not None else bundled_catalog()
            if folders or specs:
                # read the user's tables now: a bad one is its own one-line refusal, never an
                # error of the first scenario field that names a GPU or model
                cat = cat.extend(*folders, models=specs).checked()
        return cls(catalog=cat, store=Path(store) if store is not None else None,
                   calibration=Path(calibration) if calibration is not None else None,
                   cache_dir=Path(cache_dir) if cache_dir is not None else None, models=specs)

    @property
    def model(self) -> ModelSpec | None:
        """The model of the (first) ``config.json`` given, if any."""
        return self.models[0] if self.models else None

    def for_scenario(self, catalog: str | None, model_config: str | None) -> DataContext:
        """This context with a scenario's ``catalog:`` folder and ``model_config:`` file added
        (paths already resolved against the scenario's folder); itself without either. Built
        once per paths and catalog."""
        if catalog is None and model_config is None:
            return self
        return _for_scenario(self, catalog, model_config)


@functools.lru_cache(maxsize=64)
def _for_scenario(base: DataContext, catalog: str | None,
                  model_config: str | None) -> DataContext:
    ctx = DataContext.build(catalog=catalog, model_configs=[model_config] if model_config
                            else [], base=base.catalog)
    return DataContext(catalog=ctx.catalog, store=base.store, calibration=base.calibration,
                       cache_dir=base.cache_dir, models=ctx.models)
