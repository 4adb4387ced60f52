"""The profile store's commands as library calls: what ``fleetplan profiles`` and ``fleetplan
ingest`` do, each one call taking a typed request.

:func:`run_economics_table` (:class:`EconomicsRequest`): the store's runs, selected by model
and GPU, with cost, energy and carbon per run (:func:`fleetplan.profiles.economics
.run_economics`). :func:`ingest_files` (:class:`IngestRequest`): result files read into a
store in memory; :meth:`IngestOutcome.save` writes it (atomically) when any run was added.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from fleetplan.catalog.catalog import Catalog
from fleetplan.catalog.grid import DEFAULT_REGION
from fleetplan.catalog.prices import DEFAULT_MARKET

if TYPE_CHECKING:
    import pandas as pd

    from fleetplan.profiles.ingest import IngestReport
    from fleetplan.profiles.server import ServerDescription
    from fleetplan.profiles.store import ProfileStore


@dataclass(frozen=True, kw_only=True)
class EconomicsRequest:
    """The runs of ``store`` (default: yours, else the bundled ones), only ``model`` / ``gpu``
    (any spelling) when given, priced in ``market`` (``prices``: USD per GPU-hour by GPU,
    overriding it), powered at ``power_watts`` per GPU by GPU (default: measured, else TDP)
    on a grid of ``grid_g_per_kwh`` (default: ``region``'s)."""

    model: str | None = None
    gpu: str | None = None
    store: Path | None = None
    market: str = DEFAULT_MARKET
    prices: Mapping[str, float] = field(default_factory=dict)
    power_watts: Mapping[str, float] = field(default_factory=dict)
    grid_g_per_kwh: float | None = None
    region: str = DEFAULT_REGION


def run_economics_table(request: EconomicsRequest, *,
                        catalog: Catalog | None = None) -> pd.DataFrame:
    """One row per selected run: its measured figures, then price, power and grid with their
    sources (``catalog``'s, default: the bundled one), cost per run and per million tokens,
    energy, tokens per kWh, g CO2 per million tokens (the columns of ``fleetplan profiles
    --format csv`` and more)."""
    from fleetplan.catalog.catalog import bundled_catalog
    from fleetplan.catalog.models import normalize_model
    from fleetplan.profiles.economics import run_economics
    from fleetplan.profiles.store import load_profiles

    cat = catalog if catalog is not None else bundled_catalog()
    st = load_profiles(request.store).select(
        model=normalize_model(request.model) if request.model else None,
        gpu=cat.normalize_gpu(request.gpu) if request.gpu else None)
    return run_economics(st, market=request.market, prices=dict(request.prices),
                         power_watts=dict(request.power_watts),
                         grid_g_per_kwh=request.grid_g_per_kwh, region=request.region,
                         catalog=cat)


@dataclass(frozen=True, kw_only=True)
class IngestRequest:
    """Result files or folders (walked for ``*.json``) to add to ``store`` (default: yours,
    started from the bundled runs); ``gpu``, ``gpu_count``, ``engine_version``, ``dataset``:
    facts to record for files that do not say; ``server``: the rest of the user's description
    of the server (:class:`~fleetplan.profiles.server.ServerDescription`: tensor- and
    pipeline-parallel sizes, nodes, engine settings, prefix cache), a contradiction with a file
    refusing its record. A run of a model the catalog (given to :func:`ingest_files`) does not
    know is refused."""

    paths: tuple[Path, ...]
    store: Path | None = None
    gpu: str | None = None
    gpu_count: int | None = None
    engine_version: str | None = None
    dataset: str | None = None
    server: ServerDescription | None = None


@dataclass(frozen=True)
class IngestOutcome:
    """The store with the new runs (in memory), the file it is written to (``target``) and
    the report: runs added, duplicates, one line per refused file or record."""

    store: ProfileStore
    target: Path
    report: IngestReport

    def save(self) -> bool:
        """Write the store to :attr:`target` when any run was added; whether it was."""
        if self.report.added:
            self.store.save(self.target)
        return bool(self.report.added)


def ingest_files(request: IngestRequest, *, catalog: Catalog | None = None) -> IngestOutcome:
    """Read ``request``'s files into its store (nothing written: see
    :meth:`IngestOutcome.save`), their models and GPUs read in ``catalog`` (default: the
    bundled one). Each refused record is a line of the report's ``errors``; every other record
    is added."""
    from fleetplan.profiles.ingest import IngestOptions, ingest_paths
    from fleetplan.profiles.store import load_profiles, user_store_path

    target = request.store if request.store is not None else user_store_path()
    st = load_profiles(request.store)  # default: your store if it exists, else the bundled one
    opts = IngestOptions(gpu=request.gpu, gpu_count=request.gpu_count,
                         engine_version=request.engine_version, dataset=request.dataset,
                         catalog=catalog, server=request.server)
    return IngestOutcome(st, target, ingest_paths(request.paths, st, opts))
