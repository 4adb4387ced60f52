"""The optimizer's answer: a :class:`Plan` (fleet, traffic split, cost, carbon, verification).

A plan always carries an enum :class:`PlanStatus` (never ``None``): ``optimal`` or ``feasible``
(stopped by the time limit or gap with a plan in hand) when the MILP produced a fleet, and
``infeasible`` with a one-line ``reason`` naming the binding constraint, its numbers and the
cheapest relaxation. ``verified`` says whether the fleet simulation confirmed every class's SLO;
a class's ``met`` is true only when the simulation says so.

:meth:`Plan.to_dict` is the ``fleetplan solve --format json`` contract (field names binding).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

import pandas as pd

from fleetplan._notebook import NotebookRepr
from fleetplan.errors import InputError


class PlanStatus(StrEnum):
    optimal = "optimal"
    feasible = "feasible"
    infeasible = "infeasible"


@dataclass(frozen=True)
class FleetEntry:
    config: str
    count: int
    region: str

    def to_dict(self) -> dict[str, Any]:
        return {"config": self.config, "count": self.count, "region": self.region}


@dataclass(frozen=True)
class ClassResult:
    """One class: its SLO, what the simulation measured, and where its traffic goes."""

    name: str
    rate_rps: float
    slo_ttft_p99_ms: float | None
    ttft_p99_ms: float | None
    met: bool
    split: dict[str, float]
    slo_tpot_p99_ms: float | None = None
    tpot_p99_ms: float | None = None
    slo_e2e_p99_ms: float | None = None
    e2e_p99_ms: float | None = None
    ttft_p99_ci_ms: tuple[float, float] | None = None

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "name": self.name, "rate_rps": self.rate_rps, "slo_ttft_p99_ms": self.slo_ttft_p99_ms,
            "ttft_p99_ms": self.ttft_p99_ms, "met": self.met, "split": dict(self.split),
        }
        if self.ttft_p99_ci_ms is not None:
            out["ttft_p99_ci_ms"] = list(self.ttft_p99_ci_ms)
        for k in ("slo_tpot_p99_ms", "tpot_p99_ms", "slo_e2e_p99_ms", "e2e_p99_ms"):
            if getattr(self, k) is not None:
                out[k] = getattr(self, k)
        return out


@dataclass(frozen=True)
class SolverReport:
    """How the answer was found: solver, its stop criteria, time, rounds of the closed loop."""

    name: str
    status: str
    seconds: float | None
    gap: float
    rounds: int
    time_limit_s: float
    gap_achieved: float | None = None

    def to_dict(self) -> dict[str, Any]:
        return {"name": self.name, "status": self.status, "seconds": self.seconds,
                "gap": self.gap, "rounds": self.rounds, "time_limit_s": self.time_limit_s,
                "gap_achieved": self.gap_achieved}


@dataclass(frozen=True)
class HourPlan:
    """One hour of a diurnal plan."""

    hour: int
    rate_rps: float
    fleet: tuple[FleetEntry, ...]
    cost_per_hour_usd: float
    g_co2_per_hour: float
    met: bool
    on_demand: tuple[FleetEntry, ...] = ()

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "hour": self.hour, "rate_rps": self.rate_rps,
            "fleet": [e.to_dict() for e in self.fleet],
            "cost_per_hour_usd": self.cost_per_hour_usd, "g_co2_per_hour": self.g_co2_per_hour,
            "met": self.met,
        }
        if self.on_demand:
            out["on_demand"] = [e.to_dict() for e in self.on_demand]
        return out


@dataclass(frozen=True)
class CapacityNote:
    """A per-replica capacity the plan relied on (sustained, at the SLO, with its source)."""

    class_name: str
    config: str
    tier_ttft_p99_ms: float | None
    capacity_rps: float
    derate: float
    source: str

    def to_dict(self) -> dict[str, Any]:
        return {"class": self.class_name, "config": self.config,
                "tier_ttft_p99_ms": self.tier_ttft_p99_ms, "capacity_rps": self.capacity_rps,
                "derate": self.derate, "source": self.source}


@dataclass(frozen=True)
class Plan(NotebookRepr):
    """The answer of :func:`fleetplan.optimize.solve`."""

    status: PlanStatus
    fleet: tuple[FleetEntry, ...]
    cost_per_hour_usd: float | None
    cost_per_mtok_usd: float | None
    g_co2_per_mtok: float | None
    classes: tuple[ClassResult, ...]
    solver: SolverReport
    verified: bool
    reason: str | None = None
    binding: str | None = None
    relaxation: str | None = None
    hours: tuple[HourPlan, ...] | None = None
    base_fleet: tuple[FleetEntry, ...] | None = None
    g_co2_per_hour: float | None = None
    capacities: tuple[CapacityNote, ...] = ()
    notes: tuple[str, ...] = field(default_factory=tuple)
    problem: Any = field(default=None, compare=False, repr=False)  # the final MILP's inputs

    def to_frame(self) -> pd.DataFrame:
        """One row per class: rate, SLO, simulated P99 TTFT, met, and the share per config."""
        rows = []
        for c in self.classes:
            d = c.to_dict()
            split = d.pop("split")
            ci = d.pop("ttft_p99_ci_ms", None)
            if ci is not None:
                d["ttft_p99_ci_lo_ms"], d["ttft_p99_ci_hi_ms"] = ci
            d.update({f"share_{k}": v for k, v in split.items()})
            rows.append(d)
        return pd.DataFrame(rows)

    def plot(self, ax: Any = None, *, kind: str | None = None) -> Any:
        """``latency`` (default): simulated P99 TTFT per class against its SLO; ``fleet``:
        the fleet's composition; ``hours`` (default for diurnal plans): the hourly plan.
        Returns the matplotlib Axes."""
        from fleetplan.viz import plot_class_latency, plot_fleet_composition, plot_hourly_plan

        kind = kind or ("hours" if self.hours else "latency")
        if kind == "latency":
            return plot_class_latency(self.to_frame(), ax=ax)
        if kind == "fleet":
            return plot_fleet_composition([e.to_dict() for e in self.fleet], ax=ax)
        if kind == "hours" and self.hours:
            return plot_hourly_plan([h.to_dict() for h in self.hours], ax=ax)
        raise InputError(f"plot kind {kind!r}: expected latency, fleet or hours (diurnal plans)")

    def _summary(self) -> str:
        if self.status is PlanStatus.infeasible:
            return f"infeasible: {self.reason}"
        fleet = " + ".join(f"{e.count}x{e.config}@{e.region}" for e in self.fleet)
        verdict = "verified by simulation" if self.verified else "NOT verified"
        return f"{self.status.value}, {verdict}: {fleet}; ${self.cost_per_hour_usd:.2f}/h"

    @property
    def met(self) -> bool:
        """True when a plan exists and the simulation met every class's SLO."""
        return self.status is not PlanStatus.infeasible and self.verified

    def to_dict(self, *, timing: bool = True) -> dict[str, Any]:
        """The JSON contract. ``timing=False`` reports ``solver.seconds`` as ``null``, so the
        same inputs and seed give byte-identical output (wall time is the one varying field)."""
        solver = self.solver.to_dict()
        if not timing:
            solver["seconds"] = None
        out: dict[str, Any] = {
            "status": self.status.value,
            "fleet": [e.to_dict() for e in self.fleet],
            "cost_per_hour_usd": self.cost_per_hour_usd,
            "cost_per_mtok_usd": self.cost_per_mtok_usd,
            "g_co2_per_mtok": self.g_co2_per_mtok,
            "classes": [c.to_dict() for c in self.classes],
            "solver": solver,
            "verified": self.verified,
        }
        if self.g_co2_per_hour is not None:
            out["g_co2_per_hour"] = self.g_co2_per_hour
        if self.status is PlanStatus.infeasible:
            out["reason"] = self.reason
            out["binding"] = self.binding
            out["relaxation"] = self.relaxation
        if self.base_fleet is not None:
            out["base_fleet"] = [e.to_dict() for e in self.base_fleet]
        if self.hours is not None:
            out["hours"] = [h.to_dict() for h in self.hours]
        out["capacities"] = [c.to_dict() for c in self.capacities]
        out["notes"] = list(self.notes)
        return out
