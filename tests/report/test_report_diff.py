"""The diff of two plans says what changed and what it costs; and the command line of both."""

from __future__ import annotations

import copy
import json
from pathlib import Path

import pytest
from report_helpers import (
    EXAMPLE,
    EXAMPLE_PLAN,
    EXAMPLE_SCENARIO,
    LEGACY_PLAN,
    catalog_price,
    valid_page,
)

from fleetplan.report import build_context, diff_plans, load_plan, plan_from_dict

SC = EXAMPLE_SCENARIO


def _bigger(d: dict) -> dict:
    """The plan with two more 2xRTX-4090 replicas and a dearer hour."""
    d = copy.deepcopy(d)
    d["fleet"][1]["count"] += 2
    d["cost_per_hour_usd"] += 1.0
    return d


def test_the_issue_10_answer_against_the_old_one() -> None:
    old, new = load_plan(LEGACY_PLAN), load_plan(EXAMPLE_PLAN)
    diff = diff_plans(old, new)
    kinds = {p.pool: p.kind for p in diff.pools}
    assert kinds["2xRTX-4090@EU27"] == "removed"
    assert {k for k, v in kinds.items() if v == "added"} == {p.pool for p in new.fleet}
    lines = diff.summary()
    assert lines[0] == f"Cost: unchanged at ${new.cost_per_hour_usd:.2f}/h."  # $4.00 both
    assert any(s.startswith(f"Carbon: {old.g_co2_per_mtok:,.1f} \u2192 "
                            f"{new.g_co2_per_mtok:,.1f} g CO2e") for s in lines)
    p99 = {c.name: (c.p99_a, c.p99_b) for c in diff.classes}
    assert p99["batch"] == (old.classes[1].ttft_p99_ms, new.classes[1].ttft_p99_ms)


def test_what_a_change_costs_per_pool_day_and_month(legacy_plan: dict) -> None:
    a = plan_from_dict(legacy_plan, "a.json")
    b = plan_from_dict(_bigger(legacy_plan), "b.json")
    ctx = build_context(a, SC, str(EXAMPLE))
    diff = diff_plans(a, b, ctx)
    rtx = next(p for p in diff.pools if p.config == "2xRTX-4090")
    price, _ = catalog_price("RTX-4090")
    assert (rtx.count_a, rtx.count_b, rtx.kind) == (4, 6, "grown")
    assert rtx.cost_delta_per_hour == pytest.approx(2 * 2 * price)  # 2 replicas x 2 GPUs
    assert diff.cost_delta_per_hour == pytest.approx(1.0)
    assert diff.summary()[0] == ("B costs $1.00 more per hour than A ($24.00 a day, $730 a "
                                 "month of 730 h): $4.00 \u2192 $5.00/h.")
    unchanged = next(p for p in diff.pools if p.config == "1xH100-PCIe")
    assert unchanged.kind == "unchanged" and unchanged.cost_delta_per_hour == 0


def test_a_plan_against_an_infeasible_one_says_there_is_no_plan(legacy_plan: dict) -> None:
    """B has no plan (its constraints leave none): the diff says so with B's reason; no pool is
    "removed" at a saving, no class "missed" an SLO it was never simulated against, and no
    traffic split is compared."""
    a = plan_from_dict(legacy_plan, "a.json")
    b = plan_from_dict({**legacy_plan, "status": "infeasible", "fleet": [],
                        "cost_per_hour_usd": None, "cost_per_mtok_usd": None,
                        "g_co2_per_mtok": None, "g_co2_per_hour": None, "verified": False,
                        "reason": "redundancy 1 needs more replicas than availability allows",
                        "classes": [{**c, "met": False, "split": {}, "ttft_p99_ms": None}
                                    for c in legacy_plan["classes"]]}, "b.json")
    diff = diff_plans(a, b, build_context(a, SC, str(EXAMPLE)))
    lines = diff.summary()
    assert lines == ["Status: optimal \u2192 infeasible.",
                     "B has no plan: redundancy 1 needs more replicas than availability "
                     "allows."]
    assert {p.kind for p in diff.pools} == {"no plan in B"}
    assert all(p.cost_delta_per_hour is None for p in diff.pools)
    assert {c.verdict("b") for c in diff.classes} == {"no plan"} and not diff.splits
    back = diff_plans(b, a)
    assert back.summary()[1].startswith("A has no plan: ")
    assert {c.verdict("a") for c in back.classes} == {"no plan"}


def test_diff_command_writes_a_valid_page(cli, tmp_path: Path, legacy_plan: dict) -> None:
    a, b = tmp_path / "a.json", tmp_path / "b.json"
    a.write_text(json.dumps(legacy_plan), encoding="utf-8")
    b.write_text(json.dumps(_bigger(legacy_plan)), encoding="utf-8")
    res = cli("report", str(a), str(b), "--scenario", str(EXAMPLE))
    out = tmp_path / "a-vs-b.html"
    assert res.exit_code == 0, res.stderr
    assert res.stderr.strip() == f"report written to {out}"
    html = out.read_text(encoding="utf-8")
    page = valid_page(html)
    assert page.title == "Plan diff: a.json \u2192 b.json"
    rows = {r[0]: r for r in page.rows("fleet-table")}
    assert rows["2xRTX-4090@EU27"][1:3] == ["4", "6"] and rows["2xRTX-4090@EU27"][5] == "grown"
    assert rows["2xRTX-4090@EU27"][6] == f"+${4 * catalog_price('RTX-4090')[0]:.2f}"
    totals = {r[0]: r for r in page.rows("totals-table")}
    assert totals["cost ($ per hour)"][1:4] == ["4.00", "5.00", "+1.00"]
    assert "over a month of 730 hours: +$730" in page.text


def test_report_command_and_its_errors(cli, tmp_path: Path) -> None:
    plan = tmp_path / "plan.json"
    plan.write_text(EXAMPLE_PLAN.read_text(encoding="utf-8"), encoding="utf-8")
    res = cli("report", str(plan))
    assert res.exit_code == 0 and (tmp_path / "plan.html").is_file()
    assert "pass the scenario" in valid_page((tmp_path / "plan.html").read_text("utf-8")).text
    res = cli("report", str(plan), "-s", str(EXAMPLE), "-o", str(tmp_path / "x" / "r.html"))
    assert res.exit_code == 0 and (tmp_path / "x" / "r.html").is_file()
    for args, says in [
        ((str(plan), "-o", str(tmp_path / "r.pdf")), "name it FILE.html"),
        ((str(plan), str(plan), str(plan)), "3 plan files given"),
        ((str(plan), str(plan), "--frontier", str(plan)), "shows no frontier"),
        ((str(tmp_path / "none.json"),), "none.json: no such plan file"),
        ((str(plan), "--frontier", str(plan)), "a plan file, not a frontier"),
    ]:
        res = cli("report", *args)
        assert res.exit_code == 2, args
        assert res.stderr.count("\n") == 1 and says in res.stderr, res.stderr


def test_spot_prices_are_compared_as_the_plans_state_them(legacy_plan: dict) -> None:
    """Plans of spot replicas cost $1.375 and $3.125 an hour: the page said '$1.38 -> $3.12/h'
    (and 1.38, 3.12 in its table) beside a difference of $1.75, which those two do not make."""
    from fleetplan.report.diff import diff_view
    from fleetplan.report.render import render_diff

    a_d, b_d = copy.deepcopy(legacy_plan), copy.deepcopy(legacy_plan)
    a_d["cost_per_hour_usd"], b_d["cost_per_hour_usd"] = 1.375, 3.125
    diff = diff_plans(plan_from_dict(a_d, "a.json"), plan_from_dict(b_d, "b.json"))
    assert diff.summary()[0].endswith("per hour than A ($42.00 a day, $1,278 a month of 730 "
                                      "h): $1.375 \u2192 $3.125/h.")
    assert diff.summary()[0].startswith("B costs $1.75 more")
    page = valid_page(render_diff(diff_view(diff)))
    cost = next(r for r in page.rows("totals-table") if r[0] == "cost ($ per hour)")
    assert cost[1:4] == ["1.375", "3.125", "+1.750"]
