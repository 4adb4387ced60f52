"""Cost, energy and carbon of each measured run (the study's cost and energy tables).

Main entry: :func:`run_economics`. Cost is GPU-hours x price; energy is run duration x GPU count x
power, where power is (in order of precedence) a user-given wattage, the run's measured GPU power,
or the datasheet TDP; carbon is energy x grid intensity. Every row names the price, power and grid
sources it used.
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np
import pandas as pd

from fleetplan.catalog.catalog import Catalog, bundled_catalog
from fleetplan.catalog.grid import DEFAULT_REGION
from fleetplan.catalog.prices import DEFAULT_MARKET
from fleetplan.errors import InputError
from fleetplan.profiles.store import ProfileStore

ECONOMICS_COLUMNS = [
    "price_usd_per_gpu_hour", "price_source", "power_w", "power_source", "grid_g_per_kwh",
    "grid_source", "gpu_hours", "cost_per_run_usd", "cost_per_mtok_usd", "energy_kwh",
    "tokens_per_kwh", "g_co2_per_mtok",
]


def run_economics(
    store: ProfileStore,
    *,
    market: str = DEFAULT_MARKET,
    prices: Mapping[str, float] | None = None,
    power_watts: Mapping[str, float] | None = None,
    grid_g_per_kwh: float | None = None,
    region: str = DEFAULT_REGION,
    catalog: Catalog | None = None,
) -> pd.DataFrame:
    """The store's runs with the derived economics columns appended.

    ``power_watts`` maps GPU names to watts per GPU; ``grid_g_per_kwh`` overrides the region's
    catalog intensity; prices, datasheets and grid intensities are ``catalog``'s (default: the
    bundled one).
    """
    cat = catalog if catalog is not None else bundled_catalog()
    watts = {}
    for name, w in (power_watts or {}).items():
        if not (w > 0 and np.isfinite(w)):
            raise InputError(f"--power-watts {name}={w!r}: must be a positive number of watts")
        watts[cat.normalize_gpu(name)] = float(w)
    if grid_g_per_kwh is not None:
        if not (grid_g_per_kwh >= 0 and np.isfinite(grid_g_per_kwh)):
            raise InputError(f"--grid-g-per-kwh {grid_g_per_kwh!r}: must be >= 0")
        grid_value, grid_source = float(grid_g_per_kwh), "user-given"
    else:
        g = cat.grid_intensity(region)
        grid_value, grid_source = g.g_co2_per_kwh, f"{g.region} {g.year}: {g.source}"

    df = store.frame.copy()
    rows = []
    for rec in df.to_dict("records"):
        gpu, n = rec["gpu"], int(rec["gpu_count"])
        price = cat.price(gpu, market, prices)
        if gpu in watts:
            power, psrc = watts[gpu], "user-given"
        elif pd.notna(rec.get("gpu_avg_power_w")):
            power, psrc = float(rec["gpu_avg_power_w"]) / n, "measured"
        else:
            power, psrc = cat.gpu(gpu).tdp_w, "TDP (datasheet)"
        hours = float(rec["duration_s"]) / 3600.0
        gpu_hours = hours * n
        cost = gpu_hours * price.price_usd_per_gpu_hour
        tokens = float(rec["total_input_tokens"]) + float(rec["total_output_tokens"])
        if psrc == "measured" and pd.notna(rec.get("gpu_energy_j")):
            energy_kwh = float(rec["gpu_energy_j"]) / 3.6e6
        else:
            energy_kwh = gpu_hours * power / 1000.0
        rows.append({
            "price_usd_per_gpu_hour": price.price_usd_per_gpu_hour,
            "price_source": f"{price.market} {price.price_date}: {price.source}",
            "power_w": power,
            "power_source": psrc,
            "grid_g_per_kwh": grid_value,
            "grid_source": grid_source,
            "gpu_hours": gpu_hours,
            "cost_per_run_usd": cost,
            "cost_per_mtok_usd": cost / tokens * 1e6 if tokens else np.nan,
            "energy_kwh": energy_kwh,
            "tokens_per_kwh": tokens / energy_kwh if energy_kwh else np.nan,
            "g_co2_per_mtok": energy_kwh * grid_value / tokens * 1e6 if tokens else np.nan,
        })
    econ = pd.DataFrame(rows, columns=ECONOMICS_COLUMNS, index=df.index)
    return pd.concat([df, econ], axis=1)
