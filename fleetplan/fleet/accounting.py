"""Cost, energy and carbon of a fleet: per pool, per hour and per million tokens.

Main entries: :func:`power_model` (idle + dynamic x a share per GPU, with its source) and
:func:`account` (a fleet's hourly cost, energy and carbon from its pools' shares and the tokens
it served). Every figure carries the source of its inputs.

- Cost: GPU-hours x price per GPU-hour (catalog market or the scenario's override).
- Energy, per GPU, by the scenario's ``power: {model: ...}``:

  - ``activity`` (the default): power that follows the work (:mod:`fleetplan.replica.power`):
    ``idle_w + (busy_w - idle_w) x a``, ``a`` the pool's *power activity* over the measured
    window (each engine step draws a share ``f(tokens)`` of the idle-to-TDP range, log-linear
    through the ML.ENERGY v3.0 H100 anchors and capped at TDP; ``a`` is the sum of
    ``f x step time`` over the window, from ``ReplicaEngine.active_s_at``, per replica-second).
    ``busy_w`` is the datasheet TDP, or the scenario's ``power_w_per_gpu`` override (the power
    of a fully active step). A profile's measured mean power is not used here: it is the mean
    of a burst, already below the top of the range (fitting the dynamic part's scale from NVML
    energy, :func:`fleetplan.replica.power.fit_activity_scale`, is not wired into the fleet).
  - ``tdp``: ``idle_w + (busy_w - idle_w) x utilization``, ``utilization`` the share of time a
    replica's engine is stepping (any request in flight: ~1.0 for a loaded replica, so a loaded
    pool draws its full busy power: an upper bound, the study's Table 3 assumption). ``busy_w``
    is the datasheet TDP, the measured mean GPU power of the profile's runs when the store has
    it, or the scenario's override; the measured runs are bursts that keep the GPU busy, so
    their mean power stands for busy power (a named assumption). These are the figures
    fleetplan reported before ``power:`` existed.

- Carbon: operational = energy x the pool region's grid intensity; embodied = the catalog's
  per-GPU estimate amortized evenly over ``embodied.lifetime_years`` (zero when not included:
  hardware that already exists and would sit idle).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import pandas as pd

from fleetplan.catalog.catalog import Catalog, bundled_catalog
from fleetplan.profiles.store import ProfileStore
from fleetplan.replica.power import ACTIVITY_MODE, POWER_MODES, POWER_SOURCE, TDP_MODE

HOURS_PER_YEAR = 8760.0


@dataclass(frozen=True)
class PowerModel:
    """Watts per GPU: ``idle_w + (busy_w - idle_w) * share``, where the share is the pool's
    power activity (``mode`` ``activity``) or its engines' busy share (``tdp``)."""

    idle_w: float
    busy_w: float
    source: str
    mode: str = TDP_MODE

    def watts(self, share: float) -> float:
        return self.idle_w + (self.busy_w - self.idle_w) * share

    def share(self, utilization: float, activity: float | None) -> float:
        """The share this model scales with: ``activity`` in ``activity`` mode (it must be
        given), else ``utilization``."""
        if self.mode == ACTIVITY_MODE:
            if activity is None:
                raise ValueError(f"power model {self.mode}: the pool's power activity is needed")
            return activity
        return utilization


def power_model(model: str, config: str, gpu: str, gpu_count: int,
                store: ProfileStore | None = None,
                overrides: Mapping[str, float] | None = None,
                mode: str = TDP_MODE, catalog: Catalog | None = None) -> PowerModel:
    """Power per GPU of ``config`` serving ``model`` under the scenario's power ``mode``
    (``tdp``: override, else measured, else datasheet; ``activity``: override, else datasheet
    TDP, as the top of the range the steps' activity scales; see the module docstring).
    ``catalog``: whose GPU datasheet (default: the bundled one)."""
    if mode not in POWER_MODES:
        raise ValueError(f"power model {mode!r}: expected one of {', '.join(POWER_MODES)}")
    spec = (catalog or bundled_catalog()).gpu(gpu)
    idle = spec.idle_w
    if mode == ACTIVITY_MODE:
        if overrides and gpu in overrides:
            busy = float(overrides[gpu])
            top = f"power_w_per_gpu {busy:g} W (scenario) at a fully active step"
        else:
            busy = spec.tdp_w
            top = f"datasheet TDP {busy:g} W per GPU ({spec.spec_source})"
        return PowerModel(min(idle, busy), busy,
                          f"follows the work ({POWER_SOURCE}; data/README.md); {top}; idle "
                          f"{idle:g} W ({spec.idle_w_source})", ACTIVITY_MODE)
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


def embodied_g_per_gpu_hour(gpu: str, include: bool, lifetime_years: float,
                            catalog: Catalog | None = None) -> tuple[float, str]:
    """Embodied carbon of one GPU-hour (g), amortized evenly; zero when not included.
    ``catalog``: whose GPU row (default: the bundled one)."""
    if not include:
        return 0.0, "excluded (embodied.include: false: existing hardware)"
    spec = (catalog or bundled_catalog()).gpu(gpu)
    g = spec.embodied_kg_co2e * 1000.0 / (lifetime_years * HOURS_PER_YEAR)
    return g, (f"{spec.embodied_kg_co2e:g} kg CO2e per GPU over {lifetime_years:g} years "
               f"({spec.embodied_source})")


@dataclass(frozen=True)
class PoolAccount:
    label: str
    cost_per_hour_usd: float
    power_w: float
    power_share: float  # what the power model scaled with: activity or busy share (its mode)
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
            tokens_per_s: float, activity: Sequence[float] | None = None) -> Account:
    """Hourly cost, energy and carbon of pools at the given utilizations (busy shares) and
    power activities (fractions in [0, 1]; ``activity`` is needed for pools whose power model
    is in ``activity`` mode, :meth:`PowerModel.share`).

    ``tokens_per_s`` is the served throughput (input + output tokens) used for per-token figures.
    """
    rows = []
    acts: Sequence[float | None] = [None] * len(pools) if activity is None else activity
    for pool, u, act in zip(pools, utilization, acts, strict=True):
        for what, x in (("utilization", u), ("power activity", act)):
            if x is not None and not 0.0 <= x <= 1.0 + 1e-9:
                raise ValueError(f"{what} of {pool.label} is {x!r}, outside [0, 1]")
        share = pool.power.share(u, act)
        watts = pool.gpus * pool.power.watts(share)
        kwh = watts / 1000.0
        rows.append(PoolAccount(
            label=pool.label,
            cost_per_hour_usd=pool.gpus * pool.price_usd_per_gpu_hour,
            power_w=watts, power_share=share,
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
