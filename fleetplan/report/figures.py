"""The report's figures as inline SVG: the fleet, each class against its SLO, the hourly plan and
the frontier, drawn by :mod:`fleetplan.viz` off-screen.

Main entry: :func:`plan_figures` (a :class:`~fleetplan.optimize.plan.Plan`, optionally a
frontier -> a list of :class:`Figure`). The SVG is deterministic (fixed ids, no date) and ready
to sit inside an HTML page: no XML prolog or DOCTYPE, and every id is prefixed with the figure's
key so that several figures on one page never share an id.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from fleetplan.optimize.frontier_file import FrontierDoc
from fleetplan.optimize.plan import Plan, fleet_label

_ID = re.compile(r'\bid="([^"]+)"')
_REF = re.compile(r'(url\(|href=")#([^")]+)')


@dataclass(frozen=True)
class Figure:
    key: str  # unique on the page, e.g. "fleet"
    title: str
    caption: str
    svg: str


def _inline_svg(raw: bytes, key: str, title: str) -> str:
    """matplotlib's SVG file made an element of an HTML page."""
    text = raw.decode("utf-8")
    text = text[text.index("<svg"):]  # drop the XML prolog and DOCTYPE
    text = re.sub(r"<metadata>.*?</metadata>\s*", "", text, flags=re.S)
    text = _ID.sub(lambda m: f'id="{key}-{m.group(1)}"', text)
    text = _REF.sub(lambda m: f"{m.group(1)}#{key}-{m.group(2)}", text)
    # an accessible name; the svg's own width/height (pt) stay, CSS scales it to the page
    return text.replace("<svg ", f'<svg role="img" aria-label="{_attr(title)}" ', 1).strip()


def _attr(s: str) -> str:
    from fleetplan.viz.text import safe_text

    return (safe_text(s).replace("&", "&amp;").replace('"', "&quot;").replace("<", "&lt;")
            .replace(">", "&gt;"))


def _render(draw: Any, key: str, title: str, caption: str,
            figsize: tuple[float, float] = (7.5, 4.2)) -> Figure:
    from fleetplan.viz.style import figure_bytes, offscreen_axes

    ax = offscreen_axes(figsize)
    draw(ax)
    return Figure(key, title, caption,
                  _inline_svg(figure_bytes(ax, "svg", salt=f"fleetplan-{key}"), key, title))


def _fleet_records(plan: Plan) -> list[dict[str, Any]]:
    return [{"pool": p.pool, "config": p.config, "region": p.region, "count": p.count,
             "market": p.market or "on-demand", "spare": p.spare or 0} for p in plan.fleet]


def _class_records(plan: Plan, bands: list[Any] | None = None) -> list[dict[str, Any]]:
    out = []
    for i, c in enumerate(plan.classes):
        rec: dict[str, Any] = {"name": c.name, "ttft_p99_ms": c.ttft_p99_ms,
                               "slo_ttft_p99_ms": c.slo_ttft_p99_ms, "met": c.met}
        if c.ttft_p99_ci_ms is not None:
            rec["ttft_p99_ci_ms"] = list(c.ttft_p99_ci_ms)
        band = bands[i] if bands else c.ttft_p99_band_ms
        if band is not None:
            rec["ttft_p99_band_ms"] = list(band)
        out.append(rec)
    return out


def _hour_records(plan: Plan) -> list[dict[str, Any]]:
    return [{"hour": h.hour, "rate_rps": h.rate_rps,
             "fleet": [{"config": p.config, "region": p.region, "count": p.count,
                        "market": p.market} for p in h.fleet],
             "on_demand": [{"config": p.config, "region": p.region, "count": p.count,
                            "market": p.market} for p in h.on_demand]}
            for h in plan.hours or ()]


def frontier_frame(frontier: FrontierDoc) -> Any:
    """One row per point, as :func:`fleetplan.viz.plans.plot_frontier` reads it (unverified
    points count as infeasible: they are not plans)."""
    import pandas as pd

    rows = []
    for p in frontier.points:
        slos = [(c.slo_ttft_p99_ms, c.name) for c in p.classes if c.slo_ttft_p99_ms]
        strict = min(slos) if slos else (None, None)
        rows.append({"value": p.value, "status": p.status if p.verified else "infeasible",
                     "cost_per_hour_usd": p.cost_per_hour_usd,
                     "g_co2_per_mtok": p.g_co2_per_mtok, "slo_ttft_p99_ms": strict[0],
                     "slo_class": strict[1],
                     "rate_rps": sum(c.rate_rps for c in p.classes) or None,
                     "pareto": p.pareto, "label": fleet_label(p.fleet)})
    return pd.DataFrame(rows)


FRONTIER_X = {"carbon": "g_co2_per_mtok", "slo": "slo_ttft_p99_ms", "rate": "rate_rps"}


def plan_figures(plan: Plan, frontier: FrontierDoc | None = None,
                 bands: list[Any] | None = None) -> list[Figure]:
    """The figures of one plan: fleet and latency vs SLO (when a fleet exists), the hourly plan
    (diurnal plans) and the frontier (when one is given). ``bands``: each class's model-error
    band ([lo, hi] ms or None), when the report has them (default: the plan's own)."""
    from fleetplan.viz.fleet import plot_class_latency, plot_fleet_composition
    from fleetplan.viz.plans import plot_frontier, plot_hourly_plan

    figs: list[Figure] = []
    if plan.status != "infeasible" and any(p.count for p in plan.fleet):
        figs.append(_render(lambda ax: plot_fleet_composition(_fleet_records(plan), ax=ax),
                            "fleet", "Fleet composition",
                            "Replicas per pool; the label gives replicas and GPUs."))
    if any(c.ttft_p99_ms is not None for c in plan.classes):
        records = _class_records(plan, bands)
        banded = any("ttft_p99_band_ms" in r for r in records)
        figs.append(_render(lambda ax: plot_class_latency(records, ax=ax),
                            "latency", "P99 TTFT per class against its SLO",
                            "Bars: simulated P99 time to first token with the simulation's "
                            "95% interval (black)"
                            + ("; grey: the replica model's 80% error band, where the real "
                               "P99 fell for 80% of held-out runs" if banded else "")
                            + "; dashed line: the class's SLO."))
    if plan.hours:
        figs.append(_render(lambda ax: plot_hourly_plan(_hour_records(plan), ax=ax), "hours",
                            "Hourly plan", "Replicas per configuration for each hour "
                            "(on-demand replicas hatched) and the offered rate.",
                            figsize=(9.0, 4.6)))
    if frontier is not None and frontier.points:
        df = frontier_frame(frontier)
        x = FRONTIER_X.get(frontier.sweep)
        if (df["status"] != "infeasible").any():
            figs.append(_render(lambda ax: plot_frontier(df, x=x, ax=ax), "frontier",
                                f"Cost frontier over {frontier.sweep}",
                                "Each point is a full solve checked by simulation; the "
                                "Pareto-optimal ones are joined and labelled with their fleet."))
    return figs
