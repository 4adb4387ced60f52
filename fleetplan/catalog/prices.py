"""GPU rental prices by market ($ per GPU-hour, dated, with their source).

Main entry: :func:`price_for` (the active catalog's price, or a user override marked as such).
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field

from fleetplan.catalog._tables import read_checked_csv
from fleetplan.catalog.gpus import normalize_gpu
from fleetplan.errors import InputError, UnknownNameError

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
    from fleetplan.catalog._rows import validate_row

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
            Path(path), i))
    return tuple(out)


def load_prices() -> tuple[Price, ...]:
    """Every price of the active catalog."""
    from fleetplan.catalog.catalog import active_catalog

    return active_catalog().prices()


def markets() -> list[str]:
    return sorted({p.market for p in load_prices()})


def price_for(
    gpu: str, market: str = DEFAULT_MARKET, overrides: Mapping[str, float] | None = None
) -> Price:
    """The price of one GPU-hour of ``gpu``; an override (by any GPU spelling) wins."""
    canon = normalize_gpu(gpu)
    for name, value in (overrides or {}).items():
        if normalize_gpu(name) == canon:
            if not value > 0:
                raise InputError(f"price for {name}: {value!r} must be > 0 USD per GPU-hour")
            return Price(gpu=canon, market="user", price_usd_per_gpu_hour=float(value),
                         price_date="given", source="user-given price")
    if market not in markets():
        raise UnknownNameError("market", market, markets())
    for p in load_prices():
        if p.gpu == canon and p.market == market:
            return p
    raise InputError(
        f"no {market} price for GPU {canon} in the catalog; give one with --price {canon}=USD "
        f"(or prices_usd_per_gpu_hour in a scenario)"
    )
