"""The plan report as one self-contained HTML page, rendered by Jinja2 from the package's
templates (``fleetplan/report/templates``).

Main entries: :func:`render_report` (a plan, optionally its context and frontier -> HTML text),
:func:`render_diff` (two plans -> HTML text, in :mod:`fleetplan.report.diff`'s terms) and
:func:`write_html` (atomic, mode from the umask). The page needs no network and no JavaScript:
styles are inline, figures are inline SVG. The same inputs give the same bytes (no date, no
absolute path, deterministic SVG).
"""

from __future__ import annotations

import math
import os
from dataclasses import replace
from functools import cache
from pathlib import Path
from typing import Any

from fleetplan.report.context import ReportContext
from fleetplan.report.figures import Figure, plan_figures
from fleetplan.report.plan_file import FrontierDoc, PlanDoc, PoolRow, fleet_label

MTOK = "1M tokens (input + output)"


@cache
def _env() -> Any:
    import jinja2

    env = jinja2.Environment(
        loader=jinja2.PackageLoader("fleetplan.report", "templates"),
        autoescape=jinja2.select_autoescape(["html", "j2"], default=True),
        undefined=jinja2.StrictUndefined, trim_blocks=True, lstrip_blocks=True,
        keep_trailing_newline=True)
    env.filters["num"] = num
    env.filters["usd"] = usd
    env.filters["pct"] = pct
    env.filters["signed"] = signed
    return env


def num(v: float | None, digits: int = 1) -> str:
    """``v`` with ``digits`` decimals and thousands separators; an em dash for no value."""
    if v is None or (isinstance(v, float) and math.isnan(v)):
        return "\u2014"
    if math.isinf(v):
        return "\u221e"
    return f"{v:,.{digits}f}"


def usd(v: float | None, digits: int = 2) -> str:
    return "\u2014" if v is None else f"${v:,.{digits}f}"


def pct(v: float | None, digits: int = 1) -> str:
    return "\u2014" if v is None else f"{v:.{digits}f}%"


def signed(v: float | None, digits: int = 2, unit: str = "") -> str:
    if v is None:
        return "\u2014"
    if round(v, digits) == 0:
        return f"0{unit}" if not unit.startswith("$") else "$0"
    sign = "+" if v > 0 else "\u2212"
    if unit == "$":
        return f"{sign}${abs(v):,.{digits}f}"
    return f"{sign}{abs(v):,.{digits}f}{unit}"


def _pool_view(p: PoolRow, ctx: ReportContext | None) -> dict[str, Any]:
    a = ctx.pool(p) if ctx else None
    return {
        "pool": p.pool, "config": p.config, "region": p.region,
        "tier": None if p.tier_ttft_p99_ms is None else f"{p.tier_ttft_p99_ms:g} ms",
        "count": p.count, "gpus": p.gpus,
        "price": None if a is None else a.price_usd_per_gpu_hour,
        "cost": None if a is None else p.gpus * a.price_usd_per_gpu_hour,
        "grid": None if a is None else a.grid_g_per_kwh,
    }


def _split_view(plan: PlanDoc) -> dict[str, Any]:
    keys: list[str] = []
    for c in plan.classes:
        keys += [k for k in c.split if k not in keys]
    return {"keys": keys, "rows": [{"name": c.name, "shares": [c.split.get(k) for k in keys]}
                                   for c in plan.classes]}


def _carbon_view(plan: PlanDoc, ctx: ReportContext | None) -> dict[str, Any]:
    total_h = plan.g_co2_per_hour
    op = ctx.g_co2_operational_per_hour if ctx else None
    emb = ctx.g_co2_embodied_per_hour if ctx else None
    per_mtok = plan.g_co2_per_mtok
    share = (op / total_h) if op is not None and total_h else None
    return {"total_per_hour": total_h, "operational_per_hour": op, "embodied_per_hour": emb,
            "total_per_mtok": per_mtok,
            "operational_per_mtok": None if share is None or per_mtok is None
            else per_mtok * share,
            "embodied_per_mtok": None if share is None or per_mtok is None
            else per_mtok * (1 - share)}


def _tokens_per_hour(plan: PlanDoc) -> float | None:
    if plan.cost_per_hour_usd and plan.cost_per_mtok_usd:
        return plan.cost_per_hour_usd / plan.cost_per_mtok_usd * 1e6
    return None


def _name(source: str) -> str:
    """A file as the page names it: its name, not the machine's path (same plan, same bytes)."""
    return os.path.basename(source) or source


def report_view(plan: PlanDoc, ctx: ReportContext | None = None,
                frontier: FrontierDoc | None = None) -> dict[str, Any]:
    """Everything the template shows, as plain values (the template only lays them out)."""
    from fleetplan import __version__

    figs: list[Figure] = plan_figures(plan, frontier)
    infeasible = plan.status == "infeasible"
    title = (f"Fleet plan: infeasible ({_name(plan.source)})" if infeasible else
             f"Fleet plan: {plan.fleet_label()}, {usd(plan.cost_per_hour_usd)}/h")
    fr_rows = []
    for p in frontier.points if frontier else ():
        fr_rows.append({"value": p.value, "status": p.status, "verified": p.verified,
                        "cost": p.cost_per_hour_usd, "cost_mtok": p.cost_per_mtok_usd,
                        "carbon": p.g_co2_per_mtok, "pareto": p.pareto,
                        "fleet": fleet_label(p.fleet)})
    return {
        "title": title, "version": __version__, "plan": plan, "plan_file": _name(plan.source),
        "ctx": ctx, "scenario_file": _name(ctx.scenario) if ctx else None,
        "infeasible": infeasible, "mtok": MTOK,
        "pools": [_pool_view(p, ctx) for p in plan.fleet],
        "base_fleet": [_pool_view(p, ctx) for p in plan.base_fleet or ()],
        "split": _split_view(plan), "carbon": _carbon_view(plan, ctx),
        "tokens_per_hour": _tokens_per_hour(plan),
        "hours": [{"hour": h.hour, "rate": h.rate_rps, "fleet": fleet_label(h.fleet),
                   "on_demand": fleet_label(h.on_demand), "cost": h.cost_per_hour_usd,
                   "carbon": h.g_co2_per_hour, "met": h.met} for h in plan.hours or ()],
        "frontier": frontier, "frontier_file": _name(frontier.source) if frontier else None,
        "frontier_rows": fr_rows, "figures": figs,
        "calibration_file": _calibration_name(ctx.calibration_file) if ctx else None,
    }


def _calibration_name(path: str) -> str:
    from fleetplan.catalog._tables import data_dir

    p = Path(path)
    return "the bundled data/calibration.json" if p.parent == data_dir() else str(p)


def render_report(plan: PlanDoc, ctx: ReportContext | None = None,
                  frontier: FrontierDoc | None = None) -> str:
    """The report of ``plan`` as HTML text."""
    return str(_env().get_template("report.html.j2").render(**report_view(plan, ctx, frontier)))


def render_diff(view: dict[str, Any]) -> str:
    """A diff (:func:`fleetplan.report.diff.diff_view`) as HTML text."""
    return str(_env().get_template("diff.html.j2").render(**view))


def write_html(path: str | os.PathLike[str], html: str) -> Path:
    """Write the page atomically; a new file's mode follows the umask."""
    from fleetplan._io import write_bytes_atomic

    write_bytes_atomic(path, html.encode("utf-8"))
    return Path(path)


def write_report(path: str | os.PathLike[str], plan: PlanDoc, *, scenario: Any = None,
                 scenario_path: str = "", frontier: FrontierDoc | None = None) -> Path:
    """Render ``plan`` (with the context of ``scenario``, a loaded
    :class:`~fleetplan.scenario.Scenario`, when given) and write the page to ``path``."""
    from fleetplan.report.context import build_context

    ctx = build_context(plan, scenario, scenario_path) if scenario is not None else None
    return write_html(path, render_report(plan, ctx, frontier))


def write_diff(path: str | os.PathLike[str], a: PlanDoc, b: PlanDoc, *, scenario: Any = None,
               scenario_path: str = "") -> Path:
    """The diff of plans ``a`` -> ``b`` (pools priced with ``scenario``, when given) to ``path``."""
    from fleetplan.report.context import build_context
    from fleetplan.report.diff import diff_plans, diff_view

    ctx = None
    if scenario is not None:  # one context prices the pools of both plans
        both = replace(a, fleet=(*a.fleet, *(p for p in b.fleet if p not in a.fleet)),
                       hours=None, base_fleet=None)
        ctx = build_context(both, scenario, scenario_path)
    return write_html(path, render_diff(diff_view(diff_plans(a, b, ctx), ctx)))
