"""Plan files from an adversary (#43 items 1-3). Two laws:

- any name (a class's, a region's in a plan file) round-trips through the plan JSON unchanged,
  and reaches the report's HTML and its SVG figures as written where HTML can carry it, with
  U+FFFD for each character it cannot; the page is valid HTML and nothing crashes;
- any plan ``report --scenario`` accepts, ``simulate --plan`` accepts (an infeasible plan is
  reported, never replayed), and the reverse; when both refuse, it is with the same line.

Small ``max_examples`` and small plans (the example's two pools and two classes): the cases
each rule refuses are in ``tests/report/test_plan_rules.py``.
"""

from __future__ import annotations

import copy
import html as htmllib
import json
import re
import sys
import tempfile
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from fleetplan.errors import InputError
from fleetplan.report import render_report
from fleetplan.report.plan_file import check_plan_scenario, load_plan, plan_from_dict
from fleetplan.scenario import load_scenario
from fleetplan.viz.text import safe_text

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "report"))
from report_helpers import EXAMPLE, EXAMPLE_PLAN, assert_valid_html  # noqa: E402

PLAN: dict[str, Any] = json.loads(EXAMPLE_PLAN.read_text(encoding="utf-8"))
SCENARIO = load_scenario(EXAMPLE)
FUZZ = settings(max_examples=15, deadline=None, derandomize=True,
                suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])

# any code point, lone surrogates included (JSON's \ud800), with the ones that matter most often
HOSTILE = ["$", "\\", "^", "{", "}", "_", "<", "&", '"', "\x00", "\x07", "\x1b", "\x7f", "\x85",
           "\ud800", "\udfff", "\ufffe", "\uffff", "\U0001fffe", "\ufdd0", "\u00e9", "\U0001f600"]
chars = st.characters(exclude_categories=[]) | st.sampled_from(HOSTILE)
# newline, tab and CR are kept by the sanitizer but split or fold a figure's text: left out of
# the names so the SVG check can read a label whole; space at the ends is folded by SVG too
names = st.text(chars, min_size=1, max_size=10).map(
    lambda s: re.sub(r"[\t\n\r]", "x", s).strip() or "x")


def _svg_texts(page: str) -> list[str]:
    return [htmllib.unescape(re.sub(r"<[^>]+>", "", m))
            for m in re.findall(r"<text\b[^>]*>(.*?)</text>", page, flags=re.S)]


def _named(cls: str, region: str) -> dict[str, Any]:
    """The example plan with its first class named ``cls`` and its pools in ``region``."""
    d = copy.deepcopy(PLAN)
    first = d["classes"][0]["name"]
    d["classes"][0]["name"] = cls
    if cls == d["classes"][1]["name"]:
        d["classes"][1]["name"] += "2"
    for c in d["capacities"]:
        if c.get("class") == first:
            c["class"] = cls
    renamed = {}
    for e in d["fleet"]:
        old = e["pool"]
        e["region"] = region
        e["pool"] = old.replace(f"@{old.split('@')[1].split('/')[0]}", f"@{region}", 1)
        renamed[old] = e["pool"]
    for c in d["classes"]:
        c["split"] = {renamed.get(k, k): v for k, v in c["split"].items()}
    for c in d["capacities"]:
        if c.get("pool") in renamed:
            c["pool"] = renamed[c["pool"]]
            c["region"] = region
    return d


@FUZZ
@given(cls=names, region=names)
# a drawn name may hold characters no bundled font has: matplotlib says so, which is not
# what this test checks (the text itself must survive)
@pytest.mark.filterwarnings("ignore:Glyph .* missing from font:UserWarning")
def test_any_name_round_trips_through_json_html_and_svg(cls: str, region: str) -> None:
    doc = plan_from_dict(json.loads(json.dumps(_named(cls, region))), "plan.json")
    assert doc.classes[0].name == cls and doc.fleet[0].region == region  # JSON: unchanged
    page = render_report(doc)
    assert_valid_html(page)
    shown = safe_text(cls)
    assert shown in htmllib.unescape(page)  # the class table: as written, or U+FFFD
    texts = _svg_texts(page)
    assert shown in texts  # the latency figure's tick label, whole
    assert safe_text(doc.fleet[0].pool) in texts  # the fleet figure's pool label, whole
    assert all(safe_text(t) == t for t in texts)


def _mutate(d: dict[str, Any], kind: str, k: int) -> dict[str, Any]:
    """One edit of the example plan, valid or not: what a hand-edited plan file holds."""
    d = copy.deepcopy(d)
    chat, batch = d["classes"]
    if kind == "count":
        d["fleet"][k % 2]["count"] = [0, 1, 3, 100_000, 100_001, -1][k % 6]
    elif kind == "scale":  # counts and the cost they imply, consistently
        for e in d["fleet"]:
            e["count"] *= 1 + k % 3
        d["cost_per_hour_usd"] *= 1 + k % 3
    elif kind == "cost":
        d["cost_per_hour_usd"] = [0.0, 1e308, "inf", d["cost_per_hour_usd"] + 1e-7, -1.0,
                                  d["cost_per_hour_usd"] * 2][k % 6]
    elif kind == "ci":
        p = chat["ttft_p99_ms"]
        chat["ttft_p99_ci_ms"] = [[p - 1, p + 1], [p + 1, p + 2], [p - 2, p - 1], [p, p]][k % 4]
    elif kind == "met":
        [chat, batch][k % 2]["met"] = False
        d["verified"] = bool(k % 3)
    elif kind == "status":
        d["status"] = ["optimal", "feasible", "infeasible"][k % 3]
        if d["status"] == "infeasible" and k % 2:
            d.update(fleet=[], cost_per_hour_usd=None, verified=False)
            for c in d["classes"]:
                c["split"] = {}
    elif kind == "split":
        pools = [e["pool"] for e in d["fleet"]]
        share = [0.5, 0.25, 0.9995, 0.7][k % 4]
        batch["split"] = {pools[0]: share, pools[1]: 1 - share if k % 4 != 3 else 0.0}
    elif kind == "legacy":  # the older shape's split, keyed by configuration
        for c in d["classes"]:
            c["split"] = {k2.split("@")[0]: v for k2, v in c["split"].items()}
    elif kind == "spare":
        d["fleet"][k % 2]["spare"] = [0, 1, d["fleet"][k % 2]["count"] + 1][k % 3]
    elif kind == "classes":
        if k % 2:
            d["classes"].append(copy.deepcopy(chat))
        else:
            d["classes"] = [chat]
    elif kind == "hours":
        hours = [[0, 1], [0, 0], [5, 24], [3]][k % 4]
        d["hours"] = [{"hour": h, "rate_rps": 1.0, "fleet": copy.deepcopy(d["fleet"]),
                       "cost_per_hour_usd": d["cost_per_hour_usd"], "g_co2_per_hour": 1.0,
                       "met": bool(k % 5)} for h in hours]
    return d


def _verdict(f: Any) -> str:
    try:
        f()
    except InputError as exc:
        return str(exc)
    return "ok"


KINDS = ["count", "scale", "cost", "ci", "met", "status", "split", "legacy", "spare", "classes",
         "hours"]


@FUZZ
@given(edits=st.lists(st.tuples(st.sampled_from(KINDS), st.integers(0, 59)), max_size=3))
def test_report_accepts_a_plan_exactly_when_simulate_does(edits: list[tuple[str, int]]) -> None:
    from fleetplan.fleet.simulate import _plan_scenario

    d = PLAN
    for kind, k in edits:
        d = _mutate(d, kind, k)
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "plan.json"
        path.write_text(json.dumps(d), encoding="utf-8")

        def report() -> None:  # fleetplan report plan.json --scenario S
            check_plan_scenario(load_plan(path), SCENARIO)

        def simulate() -> None:  # fleetplan simulate S --plan plan.json, up to the simulation
            _plan_scenario(SCENARIO, str(path), None)

        by_report, by_simulate = _verdict(report), _verdict(simulate)
    if by_report == "ok" and d["status"] == "infeasible":
        assert "no fleet to simulate" in by_simulate
    else:
        assert by_report == by_simulate
