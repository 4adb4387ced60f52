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

from fleetplan._notes import usd
from fleetplan.optimize.frontier_file import FrontierDoc, point_outcome
from fleetplan.optimize.plan import FleetEntry, Plan, fleet_label
from fleetplan.optimize.plan_rules import check_plan_scenario
from fleetplan.report.context import ReportContext
from fleetplan.report.figures import Figure, plan_figures
from fleetplan.viz.text import safe_text

MTOK = "1M tokens (input + output)"


@cache
def _env() -> Any:
    import jinja2

    from fleetplan.optimize.confidence import shown_probability

    env = jinja2.Environment(
        loader=jinja2.PackageLoader("fleetplan.report", "templates"),
        autoescape=jinja2.select_autoescape(["html", "j2"], default=True),
        undefined=jinja2.StrictUndefined, trim_blocks=True, lstrip_blocks=True,
        keep_trailing_newline=True, finalize=_finalize)
    env.filters["num"] = num
    env.filters["usd"] = usd
    env.filters["grams"] = grams
    env.filters["pct"] = pct
    env.filters["signed"] = signed
    env.filters["chance"] = shown_probability
    return env


def _finalize(v: Any) -> Any:
    """Every value the page prints: text without the characters HTML cannot carry (NUL,
    controls, lone surrogates, U+FFFE: each becomes U+FFFD, :func:`fleetplan.viz.text.safe_text`,
    the plots' rule too). Markup (the inline SVG) keeps its markup."""
    import markupsafe

    if isinstance(v, markupsafe.Markup):
        return markupsafe.Markup(safe_text(str(v)))
    if isinstance(v, str):
        return safe_text(v)
    return v


def num(v: float | None, digits: int = 1) -> str:
    """``v`` with ``digits`` decimals and thousands separators; an em dash for no value."""
    if v is None or (isinstance(v, float) and math.isnan(v)):
        return "\u2014"
    if math.isinf(v):
        return "\u221e"
    return f"{v:,.{digits}f}"


def grams(v: float | None, digits: int = 1) -> str:
    """``1,225.5 g``; an em dash (no unit) for no value."""
    return "\u2014" if v is None else f"{num(v, digits)} g"


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


def _pool_view(p: FleetEntry, ctx: ReportContext | None) -> dict[str, Any]:
    a = ctx.pool(p) if ctx else None
    calibrated = p.calibrated
    if calibrated is None and ctx is not None:  # an older plan file: the scenario's model says
        name = p.config if p.model is None else f"{p.model}/{p.config}"
        calibrated = next((v.calibrated for v in ctx.validation if v.config == name), None)
    return {
        "pool": p.pool, "config": p.config, "region": p.region, "model": p.model,
        "label": p.config if p.model is None else f"{p.model}/{p.config}",
        "market": p.market or "on-demand",
        "tier": None if p.tier_ttft_p99_ms is None else f"{p.tier_ttft_p99_ms:g} ms" + (
            "" if p.tier_tpot_p99_ms is None else f", TPOT {p.tier_tpot_p99_ms:g} ms"),
        "count": p.count, "gpus": p.gpus, "spare": p.spare, "calibrated": calibrated,
        "price": None if a is None else a.price_usd_per_gpu_hour,
        "cost": None if a is None else p.gpus * a.price_usd_per_gpu_hour,
        "grid": None if a is None else a.grid_g_per_kwh,
    }


def _spec_models(pools: list[dict[str, Any]]) -> str:
    """In a plan of several models, which model was never measured on which configuration:
    ``A was never measured on 1xL40S, nor B on 1xA100-80GB, 1xL40S`` ("" for one model)."""
    by: dict[str, set[str]] = {}
    for p in pools:
        if p["calibrated"] is False and p["model"] is not None:
            by.setdefault(p["model"], set()).add(p["config"])
    parts = [f"{m} {'was never measured ' if i == 0 else ''}on {', '.join(sorted(c))}"
             for i, (m, c) in enumerate(sorted(by.items()))]
    return ", nor ".join(parts)


def _models_view(plan: Plan, pools: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """A plan of several models, model by model: its classes and whether they met their SLOs,
    its pools' replicas, GPUs and cost (with the scenario's prices); empty for one model."""
    names = list(dict.fromkeys([*(c.model for c in plan.classes if c.model is not None),
                                *(p["model"] for p in pools if p["model"] is not None)]))
    out = []
    for m in names:
        mine = [p for p in pools if p["model"] == m]
        cls = [c for c in plan.classes if c.model == m]
        costs = [p["cost"] for p in mine]
        out.append({"model": m, "classes": ", ".join(c.name for c in cls) or "\u2014",
                    "met": all(c.met for c in cls), "pools": len(mine),
                    "replicas": sum(p["count"] for p in mine),
                    "gpus": sum(p["gpus"] for p in mine),
                    "cost": None if any(c is None for c in costs) else sum(costs)})
    return out


def _split_view(plan: Plan) -> dict[str, Any]:
    keys: list[str] = []
    for c in plan.classes:
        keys += [k for k in c.split if k not in keys]
    return {"keys": keys, "rows": [{"name": c.name, "shares": [c.split.get(k) for k in keys]}
                                   for c in plan.classes]}


def _carbon_view(plan: Plan, ctx: ReportContext | None) -> dict[str, Any]:
    total_h = plan.g_co2_per_hour
    op = ctx.g_co2_operational_per_hour if ctx else None
    emb = ctx.g_co2_embodied_per_hour if ctx else None
    per_mtok = plan.g_co2_per_mtok
    share = (op / total_h) if op is not None and total_h else None
    return {"total_per_hour": total_h, "operational_per_hour": op, "embodied_per_hour": emb,
            "total_per_mtok": per_mtok,
            "embodied_counted": ctx is None or ctx.embodied_included,
            "operational_per_mtok": None if share is None or per_mtok is None
            else per_mtok * share,
            "embodied_per_mtok": None if share is None or per_mtok is None
            else per_mtok * (1 - share)}


def _class_views(plan: Plan, ctx: ReportContext | None) -> list[dict[str, Any]]:
    """Each class with its model-error band: the plan's, else the context's (computed from the
    scenario for an older plan file), else not recorded."""
    bands = {b.name: b for b in ctx.bands} if ctx else {}
    out = []
    for c in plan.classes:
        b = bands.get(c.name)
        band, basis, calibrated, recorded = (
            (c.ttft_p99_band_ms, c.band_basis, c.calibrated, True)
            if c.ttft_p99_band_ms is not None or c.calibrated is not None or b is None
            else (b.band_ms, b.basis, b.calibrated, b.recorded))
        out.append({"c": c, "band": band, "basis": basis, "calibrated": calibrated,
                    "recorded": recorded,
                    "band_above_slo": band is not None and c.slo_ttft_p99_ms is not None
                    and band[1] > c.slo_ttft_p99_ms})
    return out


def _verdict(plan: Plan, classes: list[dict[str, Any]]) -> dict[str, Any]:
    """The banner: what the simulation verified and on what kind of predictions."""
    if plan.status == "infeasible":
        return {"kind": "missed", "text": "no plan meets the constraints"}
    if not plan.verified:
        return {"kind": "missed", "text": "not verified by simulation: a class missed its SLO "
                "or the carbon cap in the simulated plan"}
    unknown = [v for v in classes if v["calibrated"] is None]
    spec = [v for v in classes if v["calibrated"] is False]
    if spec:
        return {"kind": "warn", "text": "every class's SLO verified by simulation of "
                "predictions that are not calibrated", "classes": spec}
    if unknown:
        return {"kind": "met", "text": "every class's SLO verified by simulation (whether the "
                "predictions are calibrated is not recorded in this plan file; --scenario "
                "says)"}
    return {"kind": "met", "text": "every class's SLO verified by simulation of calibrated "
            "predictions"}


def _tokens_per_hour(plan: Plan) -> float | None:
    if plan.cost_per_hour_usd and plan.cost_per_mtok_usd:
        return plan.cost_per_hour_usd / plan.cost_per_mtok_usd * 1e6
    return None


def _name(source: str) -> str:
    """A file as the page names it: its name, not the machine's path (same plan, same bytes)."""
    return os.path.basename(source) or source


def report_view(plan: Plan, ctx: ReportContext | None = None,
                frontier: FrontierDoc | None = None) -> dict[str, Any]:
    """Everything the template shows, as plain values (the template only lays them out)."""
    from fleetplan import __version__

    classes = _class_views(plan, ctx)
    figs: list[Figure] = plan_figures(plan, frontier, [v["band"] for v in classes])
    infeasible = plan.status == "infeasible"
    # a diurnal plan's fleet is its peak hour's, its cost per hour the day's average
    title = (f"Fleet plan: infeasible ({_name(plan.source)})" if infeasible else
             f"Fleet plan: {plan.fleet_label()} at the peak hour, "
             f"{usd(plan.cost_per_hour_usd)}/h averaged over the day" if plan.hours else
             f"Fleet plan: {plan.fleet_label()}, {usd(plan.cost_per_hour_usd)}/h")
    pools = [_pool_view(p, ctx) for p in plan.fleet]
    fr_rows = []
    for p in frontier.points if frontier else ():
        fr_rows.append({"value": p.value,  # outcome: the words of frontier's own table
                        "outcome": point_outcome(p.status, p.verified),
                        "cost": p.cost_per_hour_usd, "cost_mtok": p.cost_per_mtok_usd,
                        "carbon": p.g_co2_per_mtok, "pareto": p.pareto,
                        "fleet": fleet_label(p.fleet)})
    return {
        "title": title, "version": __version__, "plan": plan, "plan_file": _name(plan.source),
        "ctx": ctx, "scenario_file": _name(ctx.scenario) if ctx else None,
        "infeasible": infeasible, "mtok": MTOK,
        "pools": pools, "show_market": any(p["market"] == "spot" for p in pools),
        "fleet_cost": (plan.cost_per_hour_usd if not plan.hours else None if ctx is None
                       else sum(p["cost"] or 0.0 for p in pools)),
        "show_spare": any(p["spare"] is not None for p in pools),
        "spares": sum(p["spare"] or 0 for p in pools),
        "spec_configs": sorted({p["label"] for p in pools if p["calibrated"] is False}),
        "spec_models": _spec_models(pools),
        "models": _models_view(plan, pools),
        "classes": classes, "verdict": _verdict(plan, classes),
        "show_confidence": any(c.slo_met_probability is not None for c in plan.classes),
        "failures": ctx is not None and any(a.failure_source for a in ctx.pools),
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


def render_report(plan: Plan, ctx: ReportContext | None = None,
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


def write_report(path: str | os.PathLike[str], plan: Plan, *, scenario: Any = None,
                 scenario_path: str = "", frontier: FrontierDoc | None = None) -> Path:
    """Render ``plan`` (with the context of ``scenario``, a loaded
    :class:`~fleetplan.scenario.Scenario`, when given) and write the page to ``path``."""
    from fleetplan.report.context import build_context

    ctx = None
    if scenario is not None:  # the plan must agree with it, as simulate --plan checks
        check_plan_scenario(plan, scenario)
        ctx = build_context(plan, scenario, scenario_path)
    return write_html(path, render_report(plan, ctx, frontier))


def write_diff(path: str | os.PathLike[str], a: Plan, b: Plan, *, scenario: Any = None,
               scenario_path: str = "") -> Path:
    """The diff of plans ``a`` -> ``b`` (pools priced with ``scenario``, when given) to ``path``."""
    from fleetplan.report.context import build_context
    from fleetplan.report.diff import diff_plans, diff_view

    ctx = None
    if scenario is not None:  # one context prices the pools of both plans
        check_plan_scenario(a, scenario)
        check_plan_scenario(b, scenario)
        both = replace(a, fleet=(*a.fleet, *(p for p in b.fleet if p not in a.fleet)),
                       hours=None, base_fleet=None)
        ctx = build_context(both, scenario, scenario_path)
    return write_html(path, render_diff(diff_view(diff_plans(a, b, ctx), ctx)))
