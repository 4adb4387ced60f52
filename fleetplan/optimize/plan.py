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

import math
import os
from dataclasses import dataclass, field
from enum import StrEnum
from pathlib import Path
from typing import Any

import pandas as pd

from fleetplan._io import read_data_file
from fleetplan._notebook import NotebookRepr
from fleetplan.catalog.hardware import HardwareConfig
from fleetplan.errors import InputError
from fleetplan.scenario.fleet import pool_label


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

    @property
    def pool(self) -> str:
        """The pool's unique name, ``config@region/200ms``."""
        return pool_label(self.config, self.region, self.tier_ttft_p99_ms, self.tier_tpot_p99_ms)

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
        return out

    def scenario_pool(self) -> dict[str, Any]:
        """The entry as a scenario's ``fleet`` item."""
        return {k: v for k, v in self.to_dict().items() if k != "pool" and v is not None}


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
        return out


# ---------------------------------------------------------------------------- reading a plan
class _Reader:
    """Field access with one-line errors naming the file, the field and the value."""

    def __init__(self, source: str) -> None:
        self.source = source

    def fail(self, path: str, msg: str) -> InputError:
        return InputError(f"{self.source}: {path}: {msg}")

    def get(self, data: Any, key: str, path: str, kinds: tuple[type, ...], *,
            required: bool = True, default: Any = None) -> Any:
        where = f"{path}.{key}" if path else key
        if not isinstance(data, dict):
            raise self.fail(path or "(top level)", f"expected an object, got {data!r:.60}")
        if key not in data:
            if required:
                raise self.fail(where, "missing")
            return default
        v = data[key]
        if v is None and not required:
            return None
        if isinstance(v, bool) and bool not in kinds:
            raise self.fail(where, f"{v!r} is not a {'/'.join(k.__name__ for k in kinds)}")
        if not isinstance(v, kinds):
            raise self.fail(where, f"{v!r:.60} is not a {'/'.join(k.__name__ for k in kinds)}")
        if isinstance(v, float) and not math.isfinite(v):
            raise self.fail(where, f"{v!r} is not finite")
        return v

    def num(self, data: Any, key: str, path: str, *, required: bool = True) -> float | None:
        v = self.get(data, key, path, (int, float), required=required)
        return None if v is None else float(v)

    def fleet(self, items: Any, path: str) -> tuple[FleetEntry, ...]:
        if not isinstance(items, list):
            raise self.fail(path, f"expected a list, got {items!r:.60}")
        out = []
        for i, e in enumerate(items):
            where = f"{path}[{i}]"
            count = self.get(e, "count", where, (int,))
            if count < 1:
                raise self.fail(f"{where}.count", f"{count} must be >= 1")
            entry = FleetEntry(self.get(e, "config", where, (str,)), count,
                               self.get(e, "region", where, (str,)),
                               self.num(e, "tier_ttft_p99_ms", where, required=False),
                               self.num(e, "tier_tpot_p99_ms", where, required=False))
            name = self.get(e, "pool", where, (str,), required=False)
            if name is not None and name != entry.pool:
                raise self.fail(f"{where}.pool", f"{name!r} does not match its config, region "
                                f"and tier ({entry.pool})")
            out.append(entry)
        names = [e.pool for e in out]
        for i, n in enumerate(names):
            if names.index(n) != i:
                raise self.fail(f"{path}[{i}].pool", f"{n} repeats {path}[{names.index(n)}]")
        return tuple(out)

    def split(self, v: Any, where: str) -> dict[str, float]:
        if not isinstance(v, dict) or not v:
            raise self.fail(where, f"expected pool name -> share, got {v!r:.60}")
        out = {}
        for k in v:
            x = self.num(v, k, where)
            assert x is not None
            if not 0.0 <= x <= 1.0:
                raise self.fail(f"{where}.{k}", f"share {x:g} must be within [0, 1]")
            out[str(k)] = x
        total = sum(out.values())
        if abs(total - 1.0) > 1e-6:
            raise self.fail(where, f"shares sum to {total:.6g}, not 1")
        return out


def _class_from(r: _Reader, c: Any, i: int) -> ClassResult:
    where = f"classes[{i}]"
    ci = r.get(c, "ttft_p99_ci_ms", where, (list,), required=False)
    return ClassResult(
        name=r.get(c, "name", where, (str,)), rate_rps=r.num(c, "rate_rps", where) or 0.0,
        slo_ttft_p99_ms=r.num(c, "slo_ttft_p99_ms", where, required=False),
        ttft_p99_ms=r.num(c, "ttft_p99_ms", where, required=False),
        met=r.get(c, "met", where, (bool,)), split=r.split(r.get(c, "split", where, (dict,)),
                                                            f"{where}.split"),
        slo_tpot_p99_ms=r.num(c, "slo_tpot_p99_ms", where, required=False),
        tpot_p99_ms=r.num(c, "tpot_p99_ms", where, required=False),
        slo_e2e_p99_ms=r.num(c, "slo_e2e_p99_ms", where, required=False),
        e2e_p99_ms=r.num(c, "e2e_p99_ms", where, required=False),
        ttft_p99_ci_ms=None if ci is None or len(ci) != 2 else (float(ci[0]), float(ci[1])))


def plan_from_dict(data: Any, source: str = "plan") -> Plan:
    """A :class:`Plan` from its JSON contract (what ``fleetplan solve --out`` writes).

    Only a plan with a fleet can be read back (an infeasible plan has nothing to replay);
    ``source`` names the file in errors.
    """
    r = _Reader(source)
    status = r.get(data, "status", "", (str,))
    if status not in {s.value for s in PlanStatus}:
        raise r.fail("status", f"{status!r} is not one of optimal, feasible, infeasible")
    if status == PlanStatus.infeasible.value:
        raise r.fail("status", "infeasible: the plan has no fleet to simulate")
    fleet = r.fleet(r.get(data, "fleet", "", (list,)), "fleet")
    if not fleet:
        raise r.fail("fleet", "[] has no pool")
    items = r.get(data, "classes", "", (list,))
    if not items:
        raise r.fail("classes", "[] has no class")
    classes = tuple(_class_from(r, c, i) for i, c in enumerate(items))
    pools = {e.pool for e in fleet}
    for i, c in enumerate(classes):
        for k in c.split:
            if k not in pools:
                raise r.fail(f"classes[{i}].split.{k}", "names no pool of the plan's fleet "
                             f"(pools: {', '.join(sorted(pools))})")
    sv = r.get(data, "solver", "", (dict,))
    solver = SolverReport(r.get(sv, "name", "solver", (str,)), r.get(sv, "status", "solver",
                                                                     (str,)),
                          r.num(sv, "seconds", "solver", required=False),
                          r.num(sv, "gap", "solver") or 0.0,
                          r.get(sv, "rounds", "solver", (int,)),
                          r.num(sv, "time_limit_s", "solver") or 0.0,
                          r.num(sv, "gap_achieved", "solver", required=False))
    base = r.get(data, "base_fleet", "", (list,), required=False)
    return Plan(
        status=PlanStatus(status), fleet=fleet,
        cost_per_hour_usd=r.num(data, "cost_per_hour_usd", "", required=False),
        cost_per_mtok_usd=r.num(data, "cost_per_mtok_usd", "", required=False),
        g_co2_per_mtok=r.num(data, "g_co2_per_mtok", "", required=False),
        classes=classes, solver=solver, verified=r.get(data, "verified", "", (bool,)),
        base_fleet=None if base is None else r.fleet(base, "base_fleet"),
        g_co2_per_hour=r.num(data, "g_co2_per_hour", "", required=False),
        notes=tuple(str(n) for n in r.get(data, "notes", "", (list,), required=False) or ()))


def load_plan(path: str | os.PathLike[str]) -> Plan:
    """Read a plan file written by ``fleetplan solve --out`` (or ``--format json``)."""
    data = read_data_file(path, "plan file",
                          hint="a plan file is what fleetplan solve --out writes")
    return plan_from_dict(data, str(Path(path)))
