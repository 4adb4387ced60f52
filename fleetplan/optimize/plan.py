"""The optimizer's answer: a :class:`Plan` (fleet, traffic split, cost, carbon, verification).

A plan always carries an enum :class:`PlanStatus` (never ``None``): ``optimal`` or ``feasible``
(stopped by the time limit or gap with a plan in hand) when the MILP produced a fleet, and
``infeasible`` with a one-line ``reason`` naming the binding constraint, its numbers and the
cheapest relaxation. ``verified`` says whether the fleet simulation confirmed every class's SLO;
a class's ``met`` is true only when the simulation says so.

:meth:`Plan.to_dict` is the ``fleetplan solve --format json`` contract (field names binding);
:func:`load_plan` / :meth:`Plan.from_dict` read it back (``fleetplan simulate --plan``), refusing
a malformed file with one line naming the file, the field and the value.

A pool of a plan is (configuration, region, SLO tier), named ``1xH100-PCIe@EU27/200ms``; the
fleet lists each with its replicas, and a class's ``split`` maps pool names to shares.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field, replace
from enum import StrEnum
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pandas as pd

from fleetplan._io import read_data_file
from fleetplan._notebook import NotebookRepr
from fleetplan._notes import note_detail
from fleetplan.catalog.hardware import HardwareConfig
from fleetplan.errors import InputError
from fleetplan.scenario.fleet import pool_label, split_pool_name

if TYPE_CHECKING:
    from fleetplan.optimize.problem import Tier


class PlanStatus(StrEnum):
    optimal = "optimal"
    feasible = "feasible"
    infeasible = "infeasible"


@dataclass(frozen=True)
class FleetEntry:
    """``count`` replicas of one pool: a configuration in a region, run at an SLO tier."""

    config: str
    count: int
    region: str
    tier_ttft_p99_ms: float | None = None
    tier_tpot_p99_ms: float | None = None
    spare: int | None = None  # of ``count``, replicas kept for churn (reliability block only)
    market: str | None = None  # ``spot`` for a spot pool (named ``config@region~spot/...``)
    # whether the replica model of this configuration is calibrated (measured runs) or
    # spec-based; None in plan files written before it was recorded
    calibrated: bool | None = field(default=None, compare=False)

    @classmethod
    def of_pool(cls, name: str, count: int, tier: Tier, spare: int | None = None) -> FleetEntry:
        """``count`` replicas of the pool named ``name`` (``config@region/200ms``, or
        ``config@region~spot/200ms``) at ``tier``."""
        config, region, market = split_pool_name(name)
        return cls(config, count, region, tier.ttft_ms, tier.tpot_p99_ms, spare, market)

    @property
    def pool(self) -> str:
        """The pool's unique name, ``config@region/200ms`` (``config@region~spot/200ms``)."""
        return pool_label(self.config, self.region, self.tier_ttft_p99_ms, self.tier_tpot_p99_ms,
                          self.market)

    @property
    def gpus_per_replica(self) -> int:
        return HardwareConfig.parse(self.config).gpu_count

    @property
    def gpus(self) -> int:
        return self.count * self.gpus_per_replica

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"pool": self.pool, "config": self.config, "region": self.region,
                               "tier_ttft_p99_ms": self.tier_ttft_p99_ms, "count": self.count}
        if self.tier_tpot_p99_ms is not None:
            out["tier_tpot_p99_ms"] = self.tier_tpot_p99_ms
        if self.spare is not None:
            out["spare"] = self.spare
        if self.market is not None and self.market != "on-demand":
            out["market"] = self.market
        if self.calibrated is not None:
            out["calibrated"] = self.calibrated
        return out

    def scenario_pool(self) -> dict[str, Any]:
        """The entry as a scenario's ``fleet`` item."""
        return {k: v for k, v in self.to_dict().items()
                if k not in ("pool", "spare", "calibrated") and v is not None}


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
    # solve --confidence only: the chance the SLO holds given the model's measured error, and
    # the latency margin (ms off the TTFT SLO) the plan was sized with
    slo_met_probability: float | None = None
    margin_ms: float | None = None
    # the replica model's own error (fleetplan.optimize.model_band): where the real P99 TTFT
    # fell for 80% of held-out runs, given the simulated one [lo, hi]; the words naming the
    # error table; whether every pool carrying the class is calibrated
    ttft_p99_band_ms: tuple[float, float] | None = None
    band_basis: str | None = None
    calibrated: bool | None = None

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "name": self.name, "rate_rps": self.rate_rps, "slo_ttft_p99_ms": self.slo_ttft_p99_ms,
            "ttft_p99_ms": self.ttft_p99_ms, "met": self.met, "split": dict(self.split),
        }
        if self.ttft_p99_ci_ms is not None:
            out["ttft_p99_ci_ms"] = list(self.ttft_p99_ci_ms)
        for k in ("slo_tpot_p99_ms", "tpot_p99_ms", "slo_e2e_p99_ms", "e2e_p99_ms",
                  "slo_met_probability", "margin_ms"):
            if getattr(self, k) is not None:
                out[k] = getattr(self, k)
        if self.ttft_p99_band_ms is not None:
            out["ttft_p99_band_ms"] = list(self.ttft_p99_band_ms)
        for k in ("band_basis", "calibrated"):
            if getattr(self, k) is not None:
                out[k] = getattr(self, k)
        return out


@dataclass(frozen=True)
class SolverReport:
    """How the answer was found: solver, its stop criteria, time, rounds of the closed loop."""

    name: str
    status: str
    seconds: float | None
    gap: float | None  # None only in a plan file that lacks it (the report reads such files)
    rounds: int | None
    time_limit_s: float | None
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
    """A per-replica capacity (sustained, at the tier's SLO, with its source): of a pool the plan
    uses, or (infeasible plans) of every candidate configuration at the class's own SLO."""

    class_name: str
    config: str
    tier_ttft_p99_ms: float | None
    capacity_rps: float
    derate: float | None  # None only in a plan file that lacks it (the report reads such files)
    source: str | None
    pool: str | None = None
    region: str | None = None
    ttft_p99_ms_at_capacity: float | None = None

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"class": self.class_name}
        if self.pool is not None:
            out["pool"] = self.pool
        out.update({"config": self.config, "region": self.region,
                    "tier_ttft_p99_ms": self.tier_ttft_p99_ms, "capacity_rps": self.capacity_rps,
                    "ttft_p99_ms_at_capacity": self.ttft_p99_ms_at_capacity,
                    "derate": self.derate, "source": self.source})
        return out


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
            band = d.pop("ttft_p99_band_ms", None)
            if band is not None:
                d["ttft_p99_band_lo_ms"], d["ttft_p99_band_hi_ms"] = band
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
            return plot_class_latency(self, ax=ax)  # the whole plan: the title names fleet, cost
        if kind == "fleet":
            return plot_fleet_composition([e.to_dict() for e in self.fleet], ax=ax)
        if kind == "hours" and self.hours:
            return plot_hourly_plan([h.to_dict() for h in self.hours], ax=ax)
        if kind == "hours":
            raise InputError("plot kind 'hours' needs a diurnal plan; this plan has one hour")
        raise InputError(f"plot kind {kind!r}: expected latency, fleet or hours (diurnal plans)")

    def _summary(self) -> str:
        if self.status is PlanStatus.infeasible:
            return f"infeasible: {self.reason}"
        fleet = " + ".join(f"{e.count}x{e.pool}" for e in self.fleet)
        verdict = "verified by simulation" if self.verified else "NOT verified"
        return f"{self.status.value}, {verdict}: {fleet}; ${self.cost_per_hour_usd:.2f}/h"

    @staticmethod
    def from_dict(data: Any, source: str = "plan") -> Plan:
        """A plan from its JSON contract (see :func:`plan_from_dict`)."""
        return plan_from_dict(data, source)

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
        # the same notes with their topic, pools, level and priority (fleetplan._notes)
        out["notes_detail"] = [note_detail(n) for n in self.notes]
        return out


# ---------------------------------------------------------------------------- reading a plan
PLOT_KINDS = ("latency", "fleet", "hours")  # Plan.plot's kinds ("hours": diurnal plans)


def plan_from_dict(data: Any, source: str = "plan") -> Plan:
    """A :class:`Plan` from its JSON contract (what ``fleetplan solve --out`` writes), to replay.

    The file is read and checked by the one plan reader and validator
    (:func:`fleetplan.optimize.plan_file.plan_from_dict`, the report's too: one-line errors
    naming the file, the field and the value); a replay further needs a fleet (an infeasible
    plan has nothing to replay). A split of the older shape (keyed by configuration) is keyed by
    the pool it names. ``source`` names the file in errors.
    """
    from fleetplan.optimize.plan_file import plan_from_dict as read_plan
    from fleetplan.optimize.plan_file import split_pool

    doc = read_plan(data, source)
    if doc.status == PlanStatus.infeasible.value:
        raise InputError(f"{source}: status = \"infeasible\": the plan has no fleet to simulate")
    classes = []
    for c in doc.classes:
        split: dict[str, float] = {}
        for k, share in c.split.items():
            if share > 0:
                pool = split_pool(doc, k) or k
                split[pool] = split.get(pool, 0.0) + share
        classes.append(replace(c, split=split))
    return Plan(
        status=PlanStatus(doc.status), fleet=doc.fleet, cost_per_hour_usd=doc.cost_per_hour_usd,
        cost_per_mtok_usd=doc.cost_per_mtok_usd, g_co2_per_mtok=doc.g_co2_per_mtok,
        classes=tuple(classes), solver=doc.solver, verified=doc.verified,
        base_fleet=doc.base_fleet, g_co2_per_hour=doc.g_co2_per_hour, notes=doc.notes,
        hours=doc.hours)


def load_plan(path: str | os.PathLike[str]) -> Plan:
    """Read a plan file written by ``fleetplan solve --out`` (or ``--format json``)."""
    data = read_data_file(path, "plan file",
                          hint="a plan file is what fleetplan solve --out writes")
    return plan_from_dict(data, str(Path(path)))
