"""One explicit data context: which catalog, profile store, calibration and cache folder a
command reads.

Main entry: :class:`DataContext`. Build one (``DataContext.build(catalog="my-gpus/",
model_configs=["Qwen3-8B/"], store="runs.csv", calibration="cal.json")``) and pass it to
:func:`fleetplan.predict` (``context=``), or run validate, simulate and solve inside
``with ctx.activate():``. Inside the block the loaders read this context's catalog
(:func:`fleetplan.catalog.catalog.active_catalog`), and the default store, calibration and cache
folder are this context's (:func:`active_data`) before the user's own files and the bundled ones.
Nothing is frozen at first use and nothing writes into the installed package's data: a context
only names what is read. The CLI builds one from ``--catalog``, ``--model-config``, ``--store``
and ``--calibration`` (a scenario's ``catalog:`` and ``model_config:`` add to it).
"""

from __future__ import annotations

import contextlib
import functools
import os
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

from fleetplan.catalog.catalog import Catalog, active_catalog, use_catalog
from fleetplan.catalog.models import ModelSpec

PathLike = str | os.PathLike[str]
F = TypeVar("F", bound=Callable[..., Any])


@dataclass(frozen=True)
class DataContext:
    """Catalog + profile store + calibration + cache folder (``None``: the usual default)."""

    catalog: Catalog | None = None
    store: Path | None = None
    calibration: Path | None = None
    cache_dir: Path | None = None
    models: tuple[ModelSpec, ...] = field(default=())

    @classmethod
    def build(cls, *, catalog: PathLike | Sequence[PathLike] | Catalog | None = None,
              model_configs: Sequence[PathLike] = (), store: PathLike | None = None,
              calibration: PathLike | None = None, cache_dir: PathLike | None = None
              ) -> DataContext:
        """A context from paths: catalog folder(s) (or a :class:`Catalog`), Hugging Face
        ``config.json`` files or folders (their models join the catalog), store, calibration,
        cache folder. Extends the active catalog."""
        specs = tuple(ModelSpec.from_hf_config(p) for p in model_configs)
        cat: Catalog | None
        if isinstance(catalog, Catalog):
            cat = catalog.extend(models=specs) if specs else catalog
        else:
            folders: Sequence[PathLike] = (
                () if catalog is None else [catalog] if isinstance(catalog, str | os.PathLike)
                else catalog)
            cat = active_catalog().extend(*folders, models=specs) if (folders or specs) else None
        return cls(catalog=cat, store=Path(store) if store is not None else None,
                   calibration=Path(calibration) if calibration is not None else None,
                   cache_dir=Path(cache_dir) if cache_dir is not None else None, models=specs)

    @property
    def model(self) -> ModelSpec | None:
        """The model of the (first) ``config.json`` given, if any."""
        return self.models[0] if self.models else None

    @contextlib.contextmanager
    def activate(self) -> Iterator[DataContext]:
        """Make this context the one the loaders read inside the block (restored on exit)."""
        _ACTIVE.append(self)
        try:
            with use_catalog(self.catalog):
                yield self
        finally:
            _ACTIVE.pop()


_ACTIVE: list[DataContext] = []
_EMPTY = DataContext()


def active_data() -> DataContext:
    """The innermost active context (an empty one, every default, outside any)."""
    return _ACTIVE[-1] if _ACTIVE else _EMPTY


def use_context(ctx: DataContext | None) -> contextlib.AbstractContextManager[DataContext]:
    """``ctx.activate()``, or the active context unchanged when ``ctx`` is None."""
    if ctx is None:
        return contextlib.nullcontext(active_data())
    return ctx.activate()


_SCENARIO: dict[tuple[str | None, str | None, int], DataContext] = {}


def scenario_context(catalog: str | None, model_config: str | None) -> DataContext:
    """The context a scenario's ``catalog:`` folder and ``model_config:`` file add to the active
    catalog (paths already resolved against the scenario's folder). Built once per paths and
    active catalog."""
    key = (catalog, model_config, id(active_catalog()))
    ctx = _SCENARIO.get(key)
    if ctx is None:
        ctx = DataContext.build(catalog=catalog, model_configs=[model_config] if model_config
                                else [])
        base = active_data()
        ctx = DataContext(catalog=ctx.catalog, store=base.store, calibration=base.calibration,
                          cache_dir=base.cache_dir, models=ctx.models)
        _SCENARIO[key] = ctx
    return ctx


def with_scenario_context(fn: F) -> F:
    """Decorate a function whose first argument is a scenario: it runs inside the scenario's
    data context (:meth:`fleetplan.scenario.Scenario.data_context`) when it has one."""
    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        sc = args[0] if args else kwargs.get("scenario")
        of_scenario = getattr(sc, "data_context", None)
        with use_context(of_scenario() if callable(of_scenario) else None):
            return fn(*args, **kwargs)

    return wrapper  # type: ignore[return-value]
