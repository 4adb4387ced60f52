"""The optimizer's answer: a :class:`Plan` (fleet, traffic split, cost, carbon, verification),
the one record of a plan, whether just solved or read back from a file.

A plan always carries an enum :class:`PlanStatus` (never ``None``): ``optimal`` or ``feasible``
(stopped by the time limit or gap with a plan in hand) when the MILP produced a fleet, and
``infeasible`` with a one-line ``reason`` naming the binding constraint, its numbers and the
cheapest relaxation. ``verified`` says whether the fleet simulation confirmed every class's SLO;
a class's ``met`` is true only when the simulation says so.

:meth:`Plan.to_dict` is the ``fleetplan solve --format json`` contract (field names binding);
:meth:`Plan.from_dict` / :func:`load_plan` read it back (``fleetplan report``, ``fleetplan
simulate --plan``, a notebook), checked field by field (:mod:`fleetplan.optimize.plan_parts`)
and as a whole (:mod:`fleetplan.optimize.plan_rules`): a malformed file is refused with one
line naming the file, the field and the value. :meth:`Plan.for_replay` is what a replay needs
on top (a fleet; a split keyed by pool).

A pool of a plan is (configuration, region, SLO tier), named ``1xH100-PCIe@EU27/200ms``; the
fleet lists each with its replicas, and a class's ``split`` maps pool names to shares.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from enum import StrEnum
from pathlib import Path
from typing import Any

import pandas as pd

from fleetplan._io import read_data_file
from fleetplan._notebook import NotebookRepr
from fleetplan._notes import Note, note_detail
from fleetplan.catalog.catalog import Catalog
from fleetplan.errors import InputError
from fleetplan.optimize.plan_fields import TOP, FieldReader
from fleetplan.optimize.plan_parts import (
    CapacityNote,
    ClassResult,
    FleetEntry,
    HourPlan,
    MeasureNext,
    SolverReport,
    pools_from_list,
)
from fleetplan.optimize.plan_rules import check_split_keys, check_whole, split_pool

__all__ = ["PLOT_KINDS", "CapacityNote", "ClassResult", "FleetEntry", "HourPlan", "Plan",
           "PlanStatus", "SolverReport", "fleet_label", "load_plan", "plan_from_dict"]

PLOT_KINDS = ("latency", "fleet", "hours")  # Plan.plot's kinds ("hours": diurnal plans)
_HINT = "write it with fleetplan solve --format json"


class PlanStatus(StrEnum):
    optimal = "optimal"
    feasible = "feasible"
    infeasible = "infeasible"


def fleet_label(fleet: tuple[FleetEntry, ...]) -> str:
    """Replicas per configuration and market, tiers and regions added up: ``2x1xH100-PCIe +
    4x2xRTX-4090 (spot)`` (``-`` when empty); per model and configuration in a plan of several
    models (``1xMeta-Llama-3-8B-Instruct/1xH100-PCIe``)."""
    counts: dict[tuple[str, str | None], int] = {}
    for p in fleet:
        if p.count:
            name = p.config if p.model is None else f"{p.model}/{p.config}"
            counts[(name, p.market)] = counts.get((name, p.market), 0) + p.count
    return " + ".join(f"{n}x{c}" + (f" ({m})" if m else "")
                      for (c, m), n in counts.items()) or "-"


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
    # the benchmark whose uncertainty moves the cost most (fleetplan.optimize.measure_next):
    # only on a plan that leans on uncalibrated pools
    measure_next: MeasureNext | None = None
    problem: Any = field(default=None, compare=False, repr=False)  # the final MILP's inputs
    # where the plan was read from (a file's path; "<dict>"), named in errors and on the report
    source: str = field(default="<dict>", compare=False, repr=False)
    # the pools-per-SLO-tier shape (issue 10); False: a file of the older per-configuration shape
    tiered: bool = field(default=True, compare=False, repr=False)

    @property
    def replicas(self) -> int:
        return sum(p.count for p in self.fleet)

    @property
    def gpus(self) -> int:
        return sum(p.gpus for p in self.fleet)

    def fleet_label(self) -> str:
        """``2x1xH100-PCIe + 4x2xRTX-4090`` (see :func:`fleet_label`)."""
        return fleet_label(self.fleet)

    def all_pools(self) -> list[FleetEntry]:
        """Every pool the plan names: its fleet, each hour's (and its on-demand pools), the
        base fleet."""
        pools = list(self.fleet)
        for h in self.hours or ():
            pools += [*h.fleet, *h.on_demand]
        return pools + list(self.base_fleet or ())

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

    @classmethod
    def from_dict(cls, data: Any, source: str = "<dict>",
                  catalog: Catalog | None = None) -> Plan:
        """A plan from its JSON contract (what ``fleetplan solve --out`` writes), checked field
        by field and as a whole; ``source`` names it in errors; its configurations name GPUs of
        ``catalog`` (default: the bundled one)."""
        r = FieldReader(source, catalog)
        d = r.obj(data, TOP)
        if "points" in d and "sweep" in d:
            raise InputError(f"{source}: a frontier file (sweep {d.get('sweep')!r}), not a "
                             "plan; give it with --frontier")
        status = r.status(d, TOP)
        fleet_items = r.list_(d, "fleet", TOP)
        feasible = status != "infeasible"
        caps = r.opt_list(d, "capacities", TOP) or []
        hours = r.opt_list(d, "hours", TOP)
        base = r.opt_list(d, "base_fleet", TOP)
        notes = _notes(r, d)
        plan = cls(
            source=source, status=PlanStatus(status),
            fleet=pools_from_list(r, fleet_items, "fleet"),
            cost_per_hour_usd=r.opt_num(d, "cost_per_hour_usd", TOP, finite=True),
            cost_per_mtok_usd=r.opt_num(d, "cost_per_mtok_usd", TOP, finite=True),
            g_co2_per_mtok=r.opt_num(d, "g_co2_per_mtok", TOP, finite=True),
            g_co2_per_hour=r.opt_num(d, "g_co2_per_hour", TOP, finite=True),
            classes=_classes(r, d, split_required=feasible),
            solver=SolverReport.from_dict(r, r.field(d, "solver", TOP)),
            verified=r.bool_(d, "verified", TOP),
            capacities=tuple(CapacityNote.from_dict(r, c, f"capacities[{i}]")
                             for i, c in enumerate(caps)),
            notes=tuple(notes),
            tiered=any(isinstance(e, Mapping) and "pool" in e for e in fleet_items),
            reason=r.opt_str(d, "reason", TOP), binding=r.opt_str(d, "binding", TOP),
            relaxation=r.opt_str(d, "relaxation", TOP),
            hours=None if hours is None else tuple(HourPlan.from_dict(r, h, f"hours[{i}]")
                                                   for i, h in enumerate(hours)),
            base_fleet=None if base is None else pools_from_list(r, base, "base_fleet"),
            measure_next=_measure_next(r, d))
        if feasible and plan.cost_per_hour_usd is None:
            raise r.fail("cost_per_hour_usd", None, f"a number (status is {status})")
        check_split_keys(r, plan)
        check_whole(r, plan)
        return plan

    def for_replay(self) -> Plan:
        """The plan as ``fleetplan simulate --plan`` replays it: it needs a fleet (an infeasible
        plan has nothing to replay), and a split of the older shape (keyed by configuration)
        is keyed by the pool it names."""
        if self.status is PlanStatus.infeasible:
            raise InputError(f"{self.source}: status = \"infeasible\": the plan has no fleet "
                             "to simulate")
        classes = []
        for c in self.classes:
            split: dict[str, float] = {}
            for k, share in c.split.items():
                if share > 0:
                    pool = split_pool(self, k) or k
                    split[pool] = split.get(pool, 0.0) + share
            classes.append(replace(c, split=split))
        return replace(self, classes=tuple(classes))

    def without_timing(self) -> Plan:
        """The plan with ``solver.seconds`` unknown (``solve --no-timing``: the one field that
        varies between runs of the same inputs)."""
        return replace(self, solver=replace(self.solver, seconds=None))

    @property
    def met(self) -> bool:
        """True when a plan exists and the simulation met every class's SLO."""
        return self.status is not PlanStatus.infeasible and self.verified

    def to_dict(self, *, timing: bool = True) -> dict[str, Any]:
        """The JSON contract. ``timing=False`` reports ``solver.seconds`` as ``null``, so the
        same inputs and seed give byte-identical output (wall time is the one varying field)."""
        solver = (self.solver if timing else self.without_timing().solver).to_dict()
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
        if self.measure_next is not None:
            out["measure_next"] = self.measure_next.to_dict()
        return out


def _measure_next(r: FieldReader, d: Mapping[str, Any]) -> MeasureNext | None:
    raw = d.get("measure_next")
    if raw is None:
        return None
    try:
        return MeasureNext.from_dict(r.obj(raw, "measure_next"))
    except (KeyError, TypeError, ValueError):
        raise r.fail("measure_next", raw, "model, config, cost_range_usd_per_hour, "
                     "capacity_factors, basis and commands") from None


def _classes(r: FieldReader, d: Mapping[str, Any], *, split_required: bool
             ) -> tuple[ClassResult, ...]:
    items = r.list_(d, "classes", TOP)
    out = tuple(ClassResult.from_dict(r, c, f"classes[{i}]", split_required=split_required)
                for i, c in enumerate(items))
    if not out and split_required:  # an infeasible plan may carry none (solve writes [])
        raise r.fail("classes", [], "at least one class")
    return out


def _notes(r: FieldReader, d: Mapping[str, Any]) -> list[str]:
    """``notes``, each with its topic, pools, level and priority from ``notes_detail`` where
    that gives the same text (a file written before the details were recorded, or whose notes
    were edited since, has plain notes: topic ``other``)."""
    notes = r.opt_list(d, "notes", TOP) or []
    if not all(isinstance(n, str) for n in notes):
        raise r.fail("notes", notes, "a list of strings")
    details = r.opt_list(d, "notes_detail", TOP) or []
    out: list[str] = list(notes)
    for i, (text, raw) in enumerate(zip(notes, details, strict=False)):
        where = f"notes_detail[{i}]"
        one = r.obj(raw, where)
        if one.get("text") != text:
            continue
        pools = r.list_(one, "pools", where)
        if not all(isinstance(p, str) for p in pools):
            raise r.fail(f"{where}.pools", pools, "a list of pool names")
        out[i] = Note(text, r.str_(one, "topic", where), pools=pools,
                      level=r.str_(one, "level", where),
                      priority=r.int_(one, "priority", where))
    return out


def plan_from_dict(data: Any, source: str = "<dict>", catalog: Catalog | None = None) -> Plan:
    """A plan's JSON object as a :class:`Plan` (:meth:`Plan.from_dict`)."""
    return Plan.from_dict(data, source, catalog)


def load_plan(path: str | os.PathLike[str], catalog: Catalog | None = None) -> Plan:
    """Read and check a plan file written by ``fleetplan solve --out`` (or ``--format json``;
    GPUs of ``catalog``, default: the bundled one)."""
    return Plan.from_dict(read_data_file(path, "plan file", hint=_HINT), str(Path(path)),
                          catalog)
