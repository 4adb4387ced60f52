"""A saved frontier (``fleetplan frontier --format json``) read back as a typed record, checked
field by field (one line naming the file, the field and the value), for ``fleetplan report
--frontier``.

Main entries: :func:`load_frontier` / :func:`frontier_from_dict` (a :class:`FrontierDoc`).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from fleetplan._io import read_data_file
from fleetplan.errors import InputError
from fleetplan.optimize.plan_fields import TOP, FieldReader
from fleetplan.optimize.plan_parts import ClassResult, FleetEntry, pools_from_list

#: What became of a point, in the words the table, the CSV, the plot and the report share:
#: ``verified`` (a plan whose simulation met every SLO and the constraints), ``not verified``
#: (the MILP found a plan, but its simulation still missed an SLO or the cap after the closed
#: loop's rounds: not a plan to rent, not drawn) or ``infeasible`` (no plan at all).
VERIFIED, NOT_VERIFIED, INFEASIBLE = "verified", "not verified", "infeasible"


def point_outcome(status: str, verified: bool) -> str:
    """:data:`VERIFIED`, :data:`NOT_VERIFIED` or :data:`INFEASIBLE` for a point whose plan has
    ``status`` and ``verified``."""
    if status == "infeasible":
        return INFEASIBLE
    return VERIFIED if verified else NOT_VERIFIED


@dataclass(frozen=True)
class FrontierPointRow:
    value: float
    status: str
    verified: bool
    cost_per_hour_usd: float | None
    cost_per_mtok_usd: float | None
    g_co2_per_mtok: float | None
    pareto: bool
    fleet: tuple[FleetEntry, ...]
    classes: tuple[ClassResult, ...]


@dataclass(frozen=True)
class FrontierDoc:
    source: str
    sweep: str
    parameter: str
    unit: str
    points: tuple[FrontierPointRow, ...]


def frontier_from_dict(data: Any, source: str = "<dict>") -> FrontierDoc:
    """A frontier's JSON object as a :class:`FrontierDoc`."""
    r = FieldReader(source)
    d = r.obj(data, TOP)
    if "points" not in d and "fleet" in d:
        raise InputError(f"{source}: a plan file, not a frontier; write one with fleetplan "
                         "frontier SCENARIO --sweep carbon --format json")
    points = r.list_(d, "points", TOP)
    rows = []
    for i, raw in enumerate(points):
        where = f"points[{i}]"
        p = r.obj(raw, where)
        status = r.status(p, where)
        rows.append(FrontierPointRow(
            value=r.num(p, "value", where, lo=None), status=status,
            verified=r.bool_(p, "verified", where),
            cost_per_hour_usd=r.opt_num(p, "cost_per_hour_usd", where),
            cost_per_mtok_usd=r.opt_num(p, "cost_per_mtok_usd", where),
            g_co2_per_mtok=r.opt_num(p, "g_co2_per_mtok", where),
            pareto=p.get("pareto") is not None and r.bool_(p, "pareto", where),
            fleet=pools_from_list(r, r.list_(p, "fleet", where) or [], f"{where}.fleet"),
            classes=tuple(ClassResult.from_dict(r, c, f"{where}.classes[{j}]",
                                                split_required=False)
                          for j, c in enumerate(r.list_(p, "classes", where) or []))))
    return FrontierDoc(source=source, sweep=r.str_(d, "sweep", TOP),
                       parameter=r.str_(d, "parameter", TOP),
                       unit=r.opt_str(d, "unit", TOP) or "",
                       points=tuple(rows))


def load_frontier(path: str | Path) -> FrontierDoc:
    """Read and check a frontier file written by ``fleetplan frontier --format json``."""
    data = read_data_file(path, "frontier file", hint="write it with fleetplan frontier "
                          "SCENARIO --sweep carbon --format json")
    return frontier_from_dict(data, str(path))
