"""The optimizer's and the simulator's settings blocks of a scenario.

:class:`Candidate` (what the optimizer may buy, and its engine settings:
:mod:`fleetplan.scenario.engine`), :class:`CarbonCap`, :class:`Commitment`,
:class:`Embodied`, :class:`SolverSettings` (the one solver record, also the optimizer's: it
validates against the solver registry, :mod:`fleetplan.registry.solvers`),
:class:`CapacitySettings` (capacity measurement on the replica model), :class:`SimSettings` and
:class:`PowerSettings` (how energy is charged).
"""

from __future__ import annotations

import math
from typing import Any, Literal

from pydantic import Field, ValidationError, ValidationInfo, field_validator, model_validator

from fleetplan.catalog.grid import DEFAULT_REGION
from fleetplan.errors import FleetplanError, InputError
from fleetplan.registry.solvers import SOLVERS, resolve_solver
from fleetplan.scenario.base import Strict, canon_config, catalog_of, check_region
from fleetplan.scenario.engine import EngineSettings
from fleetplan.scenario.messages import format_validation_error


class Embodied(Strict):
    """Embodied (manufacturing) carbon of the GPUs, amortised over their lifetime."""

    include: bool = Field(default=True, description="false: hardware already manufactured "
                                                    "(count operational carbon only)")
    lifetime_years: float = Field(default=4.0, gt=0, le=30,
                                  description="years the embodied carbon is spread over",
                                  examples=[5])


class PowerSettings(Strict):
    """How the GPUs' power is charged in the fleet simulator's energy and carbon."""

    model: Literal["activity", "tdp"] = Field(
        default="activity",
        description="`activity`: power follows the work, each engine step draws between idle "
                    "and TDP by its tokens (ML.ENERGY v3.0 anchors, `fleetplan/replica/power.py`, "
                    "data/README.md); `tdp`: idle + (busy - idle) x the share of time a request "
                    "is in flight, so a loaded replica draws its full busy power (the study's "
                    "Table 3 assumption; the figures before this option existed)",
        examples=["tdp"])


class Candidate(Strict):
    """A configuration the optimizer may deploy, where, and how many at most."""

    config: str = Field(description="hardware configuration (`<GPUs>x<GPU type>`, or with "
                                    "a layout after `+`: `8xRTX-4090+tp4pp2`)",
                        examples=["1xH100-PCIe"])
    regions: list[str] = Field(
        fail_fast=True, default_factory=lambda: [DEFAULT_REGION], min_length=1,
        description=f"grid regions it may go to (default: [{DEFAULT_REGION}])",
        examples=[["EU27", "FRA"]])
    max_replicas: int | None = Field(default=None, ge=0, le=100_000,
                                     description="most replicas of it per region (default: no "
                                                 "limit but `availability`)", examples=[16])
    market: Literal["on-demand", "spot"] | None = Field(
        default=None, description="`spot`: interruptible replicas at the spot price and failure "
        "rate (docs/reliability.md); list the configuration twice to offer both markets "
        "(default: the market of its `reliability:` entry, on-demand without one)",
        examples=["spot"])
    server: EngineSettings | None = Field(
        default=None,
        description="engine settings its replicas are started with, as `--engine-arg` takes "
        "them (`{max_num_seqs: 64, gpu_memory_utilization: 0.85}`): the capacity the optimizer "
        "measures and the plan's simulation use them (docs/profile-store.md, Describing the "
        "server); a configuration listed twice states the same ones (default: the engine "
        "version's defaults)",
        examples=[{"max_num_seqs": 64}])

    _c = field_validator("config")(classmethod(
        lambda cls, v, info: canon_config(v, catalog_of(info))))

    @field_validator("regions")
    @classmethod
    def _regions(cls, v: list[str], info: ValidationInfo) -> list[str]:
        return list(check_region(r, catalog_of(info)) for r in v)


class CarbonCap(Strict):
    """A cap on the plan's carbon (operational + embodied); give exactly one of the two."""

    max_g_per_mtok: float | None = Field(
        default=None, ge=0, allow_inf_nan=False,
        description="grams CO2e per million tokens served (prompt + output)", examples=[150])
    max_kg_per_day: float | None = Field(default=None, ge=0, allow_inf_nan=False,
                                         description="kilograms CO2e per day of the whole fleet",
                                         examples=[20])

    @model_validator(mode="after")
    def _exactly_one(self) -> CarbonCap:
        if (self.max_g_per_mtok is None) == (self.max_kg_per_day is None):
            raise ValueError("give exactly one of max_g_per_mtok or max_kg_per_day")
        return self


class Commitment(Strict):
    """How a diurnal plan (classes with `rate_profile_rps`) commits replicas over the day."""

    mode: Literal["per-hour", "fixed-peak", "base-plus-on-demand"] = Field(
        default="per-hour",
        description="`per-hour`: replicas chosen hour by hour (pay per hour used); `fixed-peak`: "
                    "one fleet all day, sized for the peak hour; `base-plus-on-demand`: a "
                    "committed base all day plus hourly on-demand replicas at "
                    "`on_demand_price_factor` x the price")
    on_demand_price_factor: float = Field(
        default=1.0, ge=1.0, le=10.0,
        description="price multiplier of on-demand replicas (base-plus-on-demand)", examples=[1.5])


DEFAULT_SOLVER = "CBC"
DEFAULT_TIME_LIMIT_S = 10.0
DEFAULT_GAP = 0.01


def _registered() -> list[str]:
    return sorted(SOLVERS)


class SolverSettings(Strict):
    """Which MILP solver, and the stop criteria that are always set and always reported (the
    scenario's `solver:` block and the optimizer's settings: one record)."""

    name: str = Field(
        default=DEFAULT_SOLVER,
        description="solver: a name of the solver registry (`fleetplan.optimize.solvers`): "
                    "`cbc` (PuLP's bundled CBC, the default), `highs` (HiGHS, `pip install "
                    "'fleetplan[highs]'`), `glpk` (GLPK's glpsol), or any PuLP solver name "
                    "available on the machine; case does not matter. A name not available "
                    "here fails at load with the ones that are", examples=["highs"],
        json_schema_extra=lambda s: s.update(description=f"{s['description']} (registered: "
                                                         f"{', '.join(_registered())})"))
    time_limit_s: float = Field(default=DEFAULT_TIME_LIMIT_S, gt=0, le=86400,
                                description="wall-clock limit of one MILP solve (s)",
                                examples=[30])
    gap: float = Field(default=DEFAULT_GAP, ge=0, lt=1,
                       description="relative optimality gap at which the solver may stop "
                                   "(0.01 = within 1% of the best bound)", examples=[0.001])

    def __init__(self, name: str | None = None, /, **data: Any) -> None:
        """``SolverSettings("cbc", time_limit_s=7)``: the name may come first; bad values raise
        :class:`~fleetplan.errors.InputError` naming ``solver.FIELD``."""
        if name is not None:
            data["name"] = name
        try:
            super().__init__(**data)
        except ValidationError as exc:
            text = format_validation_error(exc, data, "solver")
            raise InputError(text.replace("solver: ", "solver.", 1)) from None

    # Validation inside a scenario (``solver:``) must not go through this constructor, or its
    # InputError would escape the scenario's error path: tell pydantic it is the base one.
    __init__.__pydantic_base_init__ = True  # type: ignore[attr-defined]

    @field_validator("name")
    @classmethod
    def _known(cls, v: str) -> str:
        try:
            resolve_solver(v)
        except FleetplanError as exc:
            raise ValueError(str(exc)) from None
        return v

    @property
    def pulp_name(self) -> str:
        """PuLP's name of the solver (checked again: availability is the machine's)."""
        return resolve_solver(self.name)


class CapacitySettings(Strict):
    """How the optimizer measures capacities at SLO on the replica model (noise + safety); every
    field is part of the capacity cache key."""
    # read by fleetplan.optimize.capacity

    duration_s: float = Field(default=300.0, gt=0, le=86400,
                              description="simulated seconds per run, before the request floor")
    warmup_s: float = Field(default=60.0, ge=0, le=3600, description="excluded from statistics")
    min_requests: int = Field(default=600, ge=50, le=10**6,
                              description="runs last long enough to see this many requests")
    seeds: int = Field(default=2, ge=1, le=32, description="independent runs per rate")
    seed: int = Field(default=0, ge=0, le=2**31, description="first seed")
    slo_margin: float = Field(default=0.05, ge=0, lt=0.5,
                              description="P99 must stay within (1 - margin) x SLO")
    start_rps: float = Field(default=1.0, gt=0, le=1e4, description="first rate of the ladder")
    step: float = Field(default=math.sqrt(2.0), gt=1.05, le=4.0,
                        description="ratio between ladder rates")
    min_rps: float = Field(default=1.0 / 32, gt=0, le=1e4, description="lowest rate tried")
    max_rps: float = Field(default=1024.0, gt=0, le=1e6, description="highest rate tried")
    refine_steps: int = Field(default=3, ge=0, le=10,
                              description="bisections between the last pass and first fail")

    @model_validator(mode="after")
    def _ranges(self) -> CapacitySettings:
        if self.min_rps > self.max_rps:
            raise ValueError(f"min_rps(={self.min_rps:g}) must be <= max_rps(={self.max_rps:g})")
        if not self.min_rps <= self.start_rps <= self.max_rps:
            raise ValueError(f"start_rps(={self.start_rps:g}) must be within [min_rps "
                             f"{self.min_rps:g}, max_rps {self.max_rps:g}]")
        from fleetplan.workload.arrivals import check_arrivals

        # the longest run the search can make: its top rate over the run's length
        top = max(self.duration_s, self.warmup_s + self.min_requests / self.max_rps)
        try:
            check_arrivals(self.max_rps * top, f"max_rps {self.max_rps:g} x duration_s {top:g}")
        except FleetplanError as exc:
            raise ValueError(str(exc)) from None
        return self


class SimSettings(Strict):
    """How the fleet simulation runs: length, warm-up, seed, replications, start hour."""

    duration_s: float = Field(default=600.0, gt=0, le=8 * 86400,
                              description="simulated seconds of traffic per replication")
    warmup_s: float = Field(default=60.0, ge=0,
                            description="first seconds excluded from statistics (< duration_s)")
    seed: int = Field(default=0, ge=0, le=2**63 - 1,
                      description="seed of every random draw: same seed, same JSON")
    replications: int = Field(default=1, ge=1, le=1000,
                              description="independent replications (confidence intervals)")
    start_hour: int = Field(default=0, ge=0, le=23,
                            description="hour of day at t=0 (for rate_profile_rps)")

    @model_validator(mode="after")
    def _warmup(self) -> SimSettings:
        if self.warmup_s >= self.duration_s:
            raise ValueError(f"warmup_s(={self.warmup_s:g}) must be < duration_s"
                             f"(={self.duration_s:g})")
        return self
