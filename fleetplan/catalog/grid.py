"""Grid carbon intensity by region (g CO2e per kWh, with year and source).

Regions are ISO-3166 alpha-3 country codes (from CodeCarbon's bundled Our World in Data / Ember
figures) plus ``EU27`` (242 g/kWh, 2023, the study's figure). Main entries: :class:`GridIntensity`,
:func:`read_grid` (one ``grid_intensity.csv``); a region is looked up in a
:class:`~fleetplan.catalog.catalog.Catalog` (:meth:`Catalog.grid_intensity`).
"""

from __future__ import annotations

import os
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field, field_validator

from fleetplan.catalog._names import check_name
from fleetplan.catalog._rows import validate_row
from fleetplan.catalog._tables import read_checked_csv, row_line

DEFAULT_REGION = "EU27"


class GridIntensity(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    region: str
    name: str
    g_co2_per_kwh: float = Field(ge=0)
    year: int | str
    source: str

    @field_validator("region")
    @classmethod
    def _region_code(cls, v: str) -> str:
        return check_name("region", v)


def read_grid(path: str | os.PathLike[str]) -> dict[str, GridIntensity]:
    """The regions of one ``grid_intensity.csv`` (``name``, ``year``, ``source`` may be left
    out of a user's file: the region code, ``given`` and the file's name stand in)."""
    df = read_checked_csv(path, required=["region", "g_co2_per_kwh"], numeric=["g_co2_per_kwh"],
                          unique=["region"])
    out = {}
    for i, r in enumerate(df.to_dict("records")):
        def text(key: str, default: str, r: dict = r) -> str:
            v = r.get(key)
            return str(v) if isinstance(v, str | int) and str(v).strip() else default

        out[r["region"]] = validate_row(GridIntensity, {
            "region": r["region"], "name": text("name", str(r["region"])),
            "g_co2_per_kwh": r["g_co2_per_kwh"],
            "year": int(r["year"]) if isinstance(r.get("year"), int) else text("year", "given"),
            "source": text("source", f"user catalog {path}")}, Path(path), row_line(df, i))
    return out
