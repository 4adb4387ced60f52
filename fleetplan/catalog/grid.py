"""Grid carbon intensity by region (g CO2e per kWh, with year and source).

Regions are ISO-3166 alpha-3 country codes (from CodeCarbon's bundled Our World in Data / Ember
figures) plus ``EU27`` (242 g/kWh, 2023, the study's figure). Main entry: :func:`grid_intensity`.
"""

from __future__ import annotations

from collections.abc import Mapping
from functools import cache

from pydantic import BaseModel, ConfigDict, Field

from fleetplan.catalog._tables import bundled, read_checked_csv
from fleetplan.errors import InputError, UnknownNameError

DEFAULT_REGION = "EU27"


class GridIntensity(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    region: str
    name: str
    g_co2_per_kwh: float = Field(ge=0)
    year: int | str
    source: str


@cache
def load_grid() -> dict[str, GridIntensity]:
    df = read_checked_csv(bundled("grid_intensity.csv"), required=list(GridIntensity.model_fields),
                          numeric=["g_co2_per_kwh"])
    return {r["region"]: GridIntensity.model_validate(r) for r in df.to_dict("records")}


def grid_intensity(region: str, overrides: Mapping[str, float] | None = None) -> GridIntensity:
    """Intensity of ``region``; a user override (same region name) wins and says so."""
    if overrides and region in overrides:
        v = overrides[region]
        if not v >= 0:
            raise InputError(f"grid_g_per_kwh.{region}: {v!r} must be >= 0")
        return GridIntensity(region=region, name=region, g_co2_per_kwh=float(v), year="given",
                             source="user-given grid intensity")
    grid = load_grid()
    if region not in grid:
        raise UnknownNameError("region", region, grid)
    return grid[region]
