"""GPU rental prices by market ($ per GPU-hour, dated, with their source): the record and its
reader.

Main entries: :class:`Price`, :func:`read_prices` (one ``prices.csv``). A GPU's price is looked up
in a :class:`~fleetplan.catalog.catalog.Catalog` (:meth:`Catalog.price`, a user override marked
as such).
"""

from __future__ import annotations

import os
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field

from fleetplan.catalog._rows import validate_row
from fleetplan.catalog._tables import read_checked_csv, row_line

DEFAULT_MARKET = "alternative"


class Price(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    gpu: str
    market: str
    price_usd_per_gpu_hour: float = Field(gt=0)
    price_date: str
    source: str


def read_prices(path: str | os.PathLike[str]) -> tuple[Price, ...]:
    """The prices of one ``prices.csv`` (``price_date`` and ``source`` may be left out of a
    user's file: they then say ``given`` and name the file)."""
    df = read_checked_csv(path, required=["gpu", "market", "price_usd_per_gpu_hour"],
                          numeric=["price_usd_per_gpu_hour"], positive=["price_usd_per_gpu_hour"],
                          unique=["gpu", "market"])
    out = []
    for i, r in enumerate(df.to_dict("records")):
        date = r.get("price_date")
        src = r.get("source")
        out.append(validate_row(Price, {
            **{str(k): v for k, v in r.items()},
            "price_date": str(date) if isinstance(date, str | int) else "given",
            "source": src if isinstance(src, str) and src.strip() else f"user catalog {path}"},
            Path(path), row_line(df, i)))
    return tuple(out)
