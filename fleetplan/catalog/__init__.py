"""Catalogs: GPU specs, hardware configurations, prices, grid intensity, model specs.

Every loader reads the active :class:`Catalog` (bundled tables, a user's folders, model specs
from ``config.json`` files): see :mod:`fleetplan.catalog.catalog`.
"""

from fleetplan.catalog._tables import data_dir
from fleetplan.catalog.catalog import Catalog, active_catalog, bundled_catalog, use_catalog
from fleetplan.catalog.gpus import GPUSpec, get_gpu, load_gpus, normalize_gpu
from fleetplan.catalog.grid import DEFAULT_REGION, GridIntensity, grid_intensity, load_grid
from fleetplan.catalog.hardware import HardwareConfig, config_name
from fleetplan.catalog.models import ModelSpec, get_model, load_models, normalize_model
from fleetplan.catalog.prices import DEFAULT_MARKET, Price, load_prices, price_for

__all__ = [
    "DEFAULT_MARKET", "DEFAULT_REGION", "Catalog", "GPUSpec", "GridIntensity", "HardwareConfig",
    "ModelSpec", "Price", "active_catalog", "bundled_catalog", "config_name", "data_dir",
    "get_gpu", "get_model", "grid_intensity", "load_gpus", "load_grid", "load_models",
    "load_prices", "normalize_gpu", "normalize_model", "price_for", "use_catalog",
]
