"""Catalogs: GPU specs, hardware configurations, prices, grid intensity, model specs.

The table modules (:mod:`~fleetplan.catalog.gpus`, :mod:`~fleetplan.catalog.models`,
:mod:`~fleetplan.catalog.prices`, :mod:`~fleetplan.catalog.grid`,
:mod:`~fleetplan.catalog.hf_config`) define the records and read one file each; a
:class:`Catalog` (bundled tables, a user's folders, model specs from ``config.json`` files) holds
them and answers every lookup (:meth:`Catalog.model`, :meth:`Catalog.gpu`,
:meth:`Catalog.price`, :meth:`Catalog.grid_intensity` ...): see :mod:`fleetplan.catalog.catalog`.
It is passed to what reads it (:class:`fleetplan.context.DataContext`); :func:`bundled_catalog`
is the catalog of a call given none.
"""

from fleetplan.catalog._tables import data_dir
from fleetplan.catalog.catalog import Catalog, bundled_catalog
from fleetplan.catalog.gpus import GPUSpec
from fleetplan.catalog.grid import DEFAULT_REGION, GridIntensity
from fleetplan.catalog.hardware import HardwareConfig, config_name
from fleetplan.catalog.models import ModelSpec, normalize_model
from fleetplan.catalog.prices import DEFAULT_MARKET, Price

__all__ = [
    "DEFAULT_MARKET", "DEFAULT_REGION", "Catalog", "GPUSpec", "GridIntensity", "HardwareConfig",
    "ModelSpec", "Price", "bundled_catalog", "config_name", "data_dir", "normalize_model",
]
