"""Cost, energy and carbon of a fleet: per pool, per hour and per million tokens.

Main entries: :func:`power_model` (idle + dynamic x utilization per GPU, with its source) and
:func:`account` (a fleet's hourly cost, energy and carbon from its pools' utilizations and the
tokens it served). Every figure carries the source of its inputs.

- Cost: GPU-hours x price per GPU-hour (catalog market or the scenario's override).
- Energy: per GPU ``idle_w + (busy_w - idle_w) x utilization``; ``busy_w`` is the datasheet TDP
  by default, the measured mean GPU power of the profile's runs when the store has it, or the
  scenario's ``power_w_per_gpu`` override. The measured runs are bursts that keep the GPU busy,
  so their mean power stands for busy power (a named assumption).
- Carbon: operational = energy x the pool region's grid intensity; embodied = the catalog's
  per-GPU estimate amortized evenly over ``embodied.lifetime_years`` (zero when not included:
  hardware that already exists and would sit idle).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import pandas as pd

from fleetplan.catalog.gpus import get_gpu
from fleetplan.profiles.store import ProfileStore

HOURS_PER_YEAR = 8760.0


@dataclass(frozen=True)
class PowerModel:
    """Watts per GPU: ``idle_w + (busy_w - idle_w) * utilization``."""

    idle_w: float
    busy_w: float
    source: str

    def watts(self, utilization: float) -> float:
        return self.idle_w + (self.busy_w - self.idle_w) * utilization


def power_model(model: str, config: str, gpu: str, gpu_count: int,
                store: ProfileStore | None = None,
                overrides: Mapping[str, float] | None = None) -> PowerModel:
    """Power per GPU of ``config`` serving ``model``: override, else measured, else datasheet."""
    spec = get_gpu(gpu)
    idle = spec.idle_w
    if overrides and gpu in overrides:
        busy = float(overrides[gpu])
        return PowerModel(min(idle, busy), busy,
                          f"power_w_per_gpu {busy:g} W (scenario); idle {idle:g} W "
                          f"({spec.idle_w_source})")
    if store is not None and len(store):
        df = store.frame
        rows = df[(df["model"] == model) & (df["config"] == config)]
        measured = pd.to_numeric(rows["gpu_avg_power_w"], errors="coerce").dropna()
        if len(measured):
            busy = float(measured.mean()) / gpu_count
            return PowerModel(min(idle, busy), busy,
                              f"measured: mean GPU power of {len(measured)} run(s) of {model} on "
                              f"{config}, {busy:.0f} W per GPU; idle {idle:g} W "
                              f"({spec.idle_w_source})")
    return PowerModel(idle, spec.tdp_w,
                      f"datasheet TDP {spec.tdp_w:g} W per GPU at full utilization "
                      f"({spec.spec_source}); idle {idle:g} W ({spec.idle_w_source})")


@dataclass(frozen=True)
class PoolEconomics:
    """Inputs of one pool's accounting (fixed for a scenario)."""

    label: str
    gpus: int                      # GPUs in the pool: replicas x GPUs per replica
    price_usd_per_gpu_hour: float
    price_source: str
    power: PowerModel
    grid_g_per_kwh: float
    grid_source: str
    embodied_g_per_gpu_hour: float
    embodied_source: str


def embodied_g_per_gpu_hour(gpu: str, include: bool, lifetime_years: float) -> tuple[float, str]:
    """Embodied carbon of one GPU-hour (g), amortized evenly; zero when not included."""
    if not include:
        return 0.0, "excluded (embodied.include: false: existing hardware)"
    spec = get_gpu(gpu)
    g = spec.embodied_kg_co2e * 1000.0 / (lifetime_years * HOURS_PER_YEAR)
    return g, (f"{spec.embodied_kg_co2e:g} kg CO2e per GPU over {lifetime_years:g} years "
               f"({spec.embodied_source})")


@dataclass(frozen=True)
class PoolAccount:
    label: str
    cost_per_hour_usd: float
    power_w: float
    energy_kwh_per_hour: float
    g_co2_operational_per_hour: float
    g_co2_embodied_per_hour: float


@dataclass(frozen=True)
class Account:
    """A fleet's hourly economics; ``*_per_mtok`` are ``nan`` when no token was served."""

    pools: tuple[PoolAccount, ...]
    tokens_per_hour: float
    cost_per_hour_usd: float
    energy_kwh_per_hour: float
    g_co2_operational_per_hour: float
    g_co2_embodied_per_hour: float

    @property
    def g_co2_per_hour(self) -> float:
        return self.g_co2_operational_per_hour + self.g_co2_embodied_per_hour

    def per_mtok(self, per_hour: float) -> float:
        return per_hour / self.tokens_per_hour * 1e6 if self.tokens_per_hour > 0 else math.nan

    @property
    def cost_per_mtok_usd(self) -> float:
        return self.per_mtok(self.cost_per_hour_usd)

    @property
    def g_co2_per_mtok(self) -> float:
        return self.per_mtok(self.g_co2_per_hour)


def account(pools: Sequence[PoolEconomics], utilization: Sequence[float],
            tokens_per_s: float) -> Account:
    """Hourly cost, energy and carbon of pools at the given utilizations (fractions in [0, 1]).

    ``tokens_per_s`` is the served throughput (input + output tokens) used for per-token figures.
    """
    rows = []
    for pool, u in zip(pools, utilization, strict=True):
        if not 0.0 <= u <= 1.0 + 1e-9:
            raise ValueError(f"utilization of {pool.label} is {u!r}, outside [0, 1]")
        watts = pool.gpus * pool.power.watts(u)
        kwh = watts / 1000.0
        rows.append(PoolAccount(
            label=pool.label,
            cost_per_hour_usd=pool.gpus * pool.price_usd_per_gpu_hour,
            power_w=watts,
            energy_kwh_per_hour=kwh,
            g_co2_operational_per_hour=kwh * pool.grid_g_per_kwh,
            g_co2_embodied_per_hour=pool.gpus * pool.embodied_g_per_gpu_hour,
        ))
    return Account(
        pools=tuple(rows),
        tokens_per_hour=tokens_per_s * 3600.0,
        cost_per_hour_usd=sum(r.cost_per_hour_usd for r in rows),
        energy_kwh_per_hour=sum(r.energy_kwh_per_hour for r in rows),
        g_co2_operational_per_hour=sum(r.g_co2_operational_per_hour for r in rows),
        g_co2_embodied_per_hour=sum(r.g_co2_embodied_per_hour for r in rows),
    )
