"""The registry of arrival processes a scenario's traffic class may name, and the built-in ones.

The gamma-renewal draws themselves (:func:`benchmark_arrivals`, :func:`arrivals_until`,
:func:`gamma_gaps`, :func:`check_arrivals`) are :mod:`fleetplan.workload.gamma`'s, re-exported
here; the hourly profile is :mod:`fleetplan.workload.profile`'s.

The registry (:data:`ARRIVALS`, :func:`register_arrivals`; :mod:`fleetplan.registry.base`): each
member is an
:class:`ArrivalProcess` model named by its ``process`` tag, holding its parameters and drawing its
arrival times (:meth:`ArrivalProcess.times`). Registering a member is the one step that makes it
valid in a scenario (``arrivals: {process: NAME, ...}``) and lists it in ``fleetplan schema``.
Built in: ``gamma`` (stationary, ``rate_rps`` + ``burstiness``), ``profile`` (24 hourly rates)
and ``trace`` (an Azure-format CSV replayed as recorded, lengths included).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any, ClassVar, Literal, TypeVar

import numpy as np
from pydantic import BaseModel, ConfigDict, Field, field_validator

from fleetplan.registry.base import Registry
from fleetplan.workload.gamma import (
    MAX_ARRIVALS,
    MIN_BURSTINESS,
    arrivals_until,
    benchmark_arrivals,
    check_arrivals,
    gamma_gaps,
)
from fleetplan.workload.profile import expected_profile_arrivals, profile_arrivals

__all__ = [
    "ARRIVALS", "MAX_ARRIVALS", "MIN_BURSTINESS", "TRACE_FIELDS", "ArrivalProcess",
    "GammaArrivals", "ProfileArrivals", "TraceArrivals", "arrivals_until", "benchmark_arrivals",
    "check_arrivals", "check_profile", "gamma_gaps", "get_arrivals", "register_arrivals",
]

# --- the registry of arrival processes ----------------------------------------------------------


class ArrivalProcess(BaseModel):
    """Base of the arrival processes a traffic class may name (``process``) with parameters."""

    model_config = ConfigDict(extra="forbid", strict=True, frozen=True)

    process: str
    draws_lengths: ClassVar[bool] = False
    """True when the process gives each request's lengths too (a trace): the class sets none."""

    def times(self, duration_s: float, rng: np.random.Generator, *,
              start_hour: int = 0) -> np.ndarray:
        """Arrival times (s) in ``[0, duration_s)``; ``start_hour`` is the hour of day at t=0."""
        raise NotImplementedError(f"arrival process {self.process} draws no times")

    def mean_rate_rps(self) -> float | None:
        """The mean offered rate (req/s) when the parameters state it."""
        return None

    def expected_arrivals(self, duration_s: float, *, start_hour: int = 0) -> float | None:
        """Expected arrivals in ``[0, duration_s)`` when the parameters state them (for the
        resource check made when a scenario loads); default: the mean rate x the duration."""
        rate = self.mean_rate_rps()
        return None if rate is None else rate * duration_s


ARRIVALS: Registry[type[ArrivalProcess]] = Registry("arrival process")
"""Process name -> its model (members are defined beside the registry or by the user)."""

_P = TypeVar("_P", bound=type[ArrivalProcess])


def register_arrivals(cls: _P) -> _P:
    """Class decorator adding a process to the registry under its ``process`` tag's default
    (``process: Literal["name"] = "name"``); a second process of one name is refused."""
    spec: type[ArrivalProcess] = cls
    name = spec.model_fields["process"].default
    if not isinstance(name, str) or not name:
        raise ValueError(f"{cls.__name__}: give process a default, its registry name")
    ARRIVALS.add(name, spec)
    return cls


def get_arrivals(name: str) -> type[ArrivalProcess]:
    """The process registered as ``name``; unknown names fail with the valid ones."""
    return ARRIVALS.lookup(name)


def check_profile(rates: Sequence[float]) -> None:
    """24 hourly rates: each finite and >= 0, at least one > 0 (``ValueError`` naming the hour)."""
    for h, r in enumerate(rates):
        if not (math.isfinite(r) and r >= 0):
            raise ValueError(f"hour {h}: {r!r} must be a finite rate >= 0")
    if not any(r > 0 for r in rates):
        raise ValueError("at least one hourly rate must be > 0")


RATE_DOC = ("mean arrival rate (req/s) of a stationary gamma-renewal process (shape "
            "`burstiness`)")
PROFILE_DOC = "24 hourly mean rates (req/s), hour 0 first (the run starts at `sim.start_hour`)"
_TAG_DOC = "the process's name in the arrivals registry"
BURSTINESS_DOC = ("gamma shape of the gaps; 1.0 = Poisson, < 1 burstier, > 1 smoother "
                  f"(at least {MIN_BURSTINESS:g})")


@register_arrivals
class GammaArrivals(ArrivalProcess):
    """Stationary gamma-renewal arrivals (vLLM's benchmark process); Poisson at burstiness 1."""

    process: Literal["gamma"] = Field(default="gamma", description=_TAG_DOC)
    rate_rps: float = Field(gt=0, le=1e5, description=RATE_DOC, examples=[4.0])
    burstiness: float = Field(default=1.0, ge=MIN_BURSTINESS, le=100,
                              description=BURSTINESS_DOC, examples=[0.5])

    def times(self, duration_s: float, rng: np.random.Generator, *,
              start_hour: int = 0) -> np.ndarray:
        return arrivals_until(duration_s, self.rate_rps, self.burstiness, rng)

    def mean_rate_rps(self) -> float | None:
        return self.rate_rps


@register_arrivals
class ProfileArrivals(ArrivalProcess):
    """Non-homogeneous arrivals following 24 hourly mean rates (gamma gaps in operational time)."""

    process: Literal["profile"] = Field(default="profile", description=_TAG_DOC)
    rate_profile_rps: list[float] = Field(
        fail_fast=True, min_length=24, max_length=24, description=PROFILE_DOC)
    burstiness: float = Field(default=1.0, ge=MIN_BURSTINESS, le=100,
                              description=BURSTINESS_DOC)

    @field_validator("rate_profile_rps")
    @classmethod
    def _profile(cls, v: list[float]) -> list[float]:
        check_profile(v)
        return v

    def times(self, duration_s: float, rng: np.random.Generator, *,
              start_hour: int = 0) -> np.ndarray:
        return profile_arrivals(self.rate_profile_rps, duration_s, self.burstiness, rng,
                                start_hour=start_hour)

    def mean_rate_rps(self) -> float | None:
        return sum(self.rate_profile_rps) / 24.0

    def expected_arrivals(self, duration_s: float, *, start_hour: int = 0) -> float | None:
        return expected_profile_arrivals(self.rate_profile_rps, duration_s, start_hour)


# A trace's fields, shared by the `trace` process and a class's `trace:` shorthand (the
# scenario's TraceSpec), so both document and validate them alike.
TRACE_FIELDS: dict[str, Any] = {
    "file": Field(min_length=1, description="CSV path, relative to the scenario file",
                  examples=["traces/azure-conv-1h.csv"]),
    "scale_to_rps": Field(
        default=None, gt=0, le=1e5,
        description="time-scale the trace to this mean rate (req/s); default: as recorded",
        examples=[12.0]),
    "loop": Field(default=False, description="repeat the trace when the run is longer"),
}


@register_arrivals
class TraceArrivals(ArrivalProcess):
    """Replay an Azure-format trace (`TIMESTAMP,ContextTokens,GeneratedTokens`): arrivals and
    lengths as recorded (the file is read when the scenario is simulated)."""

    process: Literal["trace"] = Field(default="trace", description=_TAG_DOC)
    draws_lengths: ClassVar[bool] = True
    file: str = TRACE_FIELDS["file"]
    scale_to_rps: float | None = TRACE_FIELDS["scale_to_rps"]
    loop: bool = TRACE_FIELDS["loop"]

    def mean_rate_rps(self) -> float | None:
        return self.scale_to_rps
