"""The HTML report of a plan: what it says is what the plan, the scenario and the catalog say; the
page is valid, self-contained, and the same plan gives the same bytes."""

from __future__ import annotations

import os
from dataclasses import replace
from pathlib import Path

import pytest
import yaml
from report_helpers import (
    EXAMPLE,
    EXAMPLE_PLAN,
    EXAMPLE_SCENARIO,
    LEGACY_PLAN,
    SOLVER,
    Page,
    assert_valid_html,
    catalog_embodied_kg,
    catalog_price,
    valid_page,
)

from fleetplan.optimize.frontier import Frontier, FrontierPoint, Sweep
from fleetplan.optimize.plan import (
    CapacityNote,
    ClassResult,
    FleetEntry,
    HourPlan,
    Plan,
    PlanStatus,
)
from fleetplan.report import build_context, frontier_from_dict, plan_from_dict, render_report
from fleetplan.report.render import write_report
from fleetplan.scenario import load_scenario

SC = EXAMPLE_SCENARIO
def _gpus(config: str) -> int:
    return int(config.split("x", 1)[0])


def _gpu(config: str) -> str:
    return config.split("x", 1)[1]


def _report(d: dict, scenario=SC, frontier=None) -> str:
    plan = plan_from_dict(d, "plan.json")
    ctx = build_context(plan, scenario, str(EXAMPLE)) if scenario is not None else None
    return render_report(plan, ctx, frontier)


@pytest.fixture(scope="module")
def example_html() -> str:
    import json

    return _report(json.loads(EXAMPLE_PLAN.read_text(encoding="utf-8")))


def test_fleet_table_and_costs_follow_the_catalog(example_plan: dict, example_html: str) -> None:
    page = Page(example_html)
    rows = page.rows("fleet-table")
    assert [r[0] for r in rows] == [e["pool"] for e in example_plan["fleet"]]
    total = 0.0
    for r, e in zip(rows, example_plan["fleet"], strict=True):
        gpus = e["count"] * _gpus(e["config"])
        price, _ = catalog_price(_gpu(e["config"]))
        assert r[4] == str(e["count"]) and r[5] == str(gpus)
        assert r[6] == f"${price:.2f}" and r[7] == f"${gpus * price:.2f}"
        assert r[3] == f"{e['tier_ttft_p99_ms']:g} ms"
        total += gpus * price
    assert total == pytest.approx(example_plan["cost_per_hour_usd"])
    assert page.tables["fleet-table"][-1][:2] == ["total", str(sum(
        e["count"] for e in example_plan["fleet"]))]
    per_config: dict[str, int] = {}
    for e in example_plan["fleet"]:
        per_config[e["config"]] = per_config.get(e["config"], 0) + e["count"]
    fleet = " + ".join(f"{n}x{c}" for c, n in per_config.items())
    assert page.title == f"Fleet plan: {fleet}, ${example_plan['cost_per_hour_usd']:.2f}/h"


def test_classes_show_the_scenario_slo_the_simulated_p99_and_its_interval(
        example_plan: dict, example_html: str) -> None:
    slos = {c["name"]: c["slo"]["ttft_p99_ms"]
            for c in yaml.safe_load(EXAMPLE.read_text(encoding="utf-8"))["classes"]}
    rows = {r[0]: r for r in Page(example_html).rows("classes-table")}
    assert set(rows) == set(slos)
    for c in example_plan["classes"]:
        r = rows[c["name"]]
        assert r[2] == f"{slos[c['name']]:,.0f}"
        assert r[3] == f"{c['ttft_p99_ms']:,.1f}"
        lo, hi = c["ttft_p99_ci_ms"]
        assert r[4] == f"{lo:,.1f} to {hi:,.1f}" and r[-1] == "met"
    split = Page(example_html).tables["split-table"]
    keys = split[0][1:]
    assert set(keys) == {k for c in example_plan["classes"] for k in c["split"]}
    for row, c in zip(split[1:], example_plan["classes"], strict=True):
        assert row[0] == c["name"]
        assert row[1:] == [f"{100 * c['split'][k]:.1f}%" if k in c["split"] else "\u2014"
                           for k in keys]


def test_tpot_and_e2e_targets_are_shown_beside_their_simulated_p99s(example_plan: dict,
                                                                    example_html: str) -> None:
    """A class with a TPOT or end-to-end target gets a row of its own with each target and its
    simulated P99 (the verdict covers them); a plan without such targets has no such table."""
    assert "targets-table" not in Page(example_html).tables
    d = {**example_plan, "classes": [dict(c) for c in example_plan["classes"]]}
    first, second = d["classes"][0], d["classes"][1]
    first.update(slo_tpot_p99_ms=40.0, tpot_p99_ms=35.84)
    second.update(slo_e2e_p99_ms=20000.0, e2e_p99_ms=17329.27)
    rows = Page(_report(d)).rows("targets-table")
    assert rows == [[first["name"], "40", "35.8", "\u2014", "\u2014"],
                    [second["name"], "\u2014", "\u2014", "20,000", "17,329.3"]]


def test_the_terminal_shows_tpot_and_e2e_targets_too(example_plan: dict, capsys) -> None:
    from fleetplan.cli.solve_cmd import _print_plan

    _print_plan(plan_from_dict(example_plan, "plan.json"))
    assert "tpot" not in capsys.readouterr().out
    d = {**example_plan, "classes": [dict(c) for c in example_plan["classes"]]}
    d["classes"][0].update(slo_tpot_p99_ms=40.0, tpot_p99_ms=35.84)
    _print_plan(plan_from_dict(d, "plan.json"))
    out = capsys.readouterr().out
    assert "P99 TTFT, TPOT simulated" in out and "sim_tpot_p99_ms" in out and "35.8" in out
    assert "e2e" not in out


def test_cost_per_token_and_carbon_are_stated_with_their_basis(example_html: str,
                                                               example_plan: dict) -> None:
    page = Page(example_html)
    assert "per 1M tokens (input + output)" in page.text
    assert f"${example_plan['cost_per_mtok_usd']:.3f}" in page.text
    # the example excludes embodied carbon: all of it is operational, and the embodied row
    # says that it was not counted (not "0.0 g", which would read as measured)
    g = example_plan["g_co2_per_hour"]
    rows = {r[0]: r[1:] for r in page.rows("carbon-table")}
    assert rows["carbon, operational (energy x grid)"][0] == f"{g:,.1f} g"
    assert rows["carbon, embodied (manufacturing, amortized)"] == [
        "not counted (embodied.include: false)"]
    assert rows["carbon, total"] == [f"{g:,.1f} g", f"{example_plan['g_co2_per_mtok']:,.1f} g"]


def test_embodied_carbon_when_the_scenario_includes_it(example_plan: dict,
                                                       tmp_path: Path) -> None:
    data = yaml.safe_load(EXAMPLE.read_text(encoding="utf-8"))
    data["embodied"] = {"include": True, "lifetime_years": 4}
    f = tmp_path / "sc.yaml"
    f.write_text(yaml.safe_dump(data), encoding="utf-8")
    emb = sum(e["count"] * _gpus(e["config"]) * catalog_embodied_kg(_gpu(e["config"])) * 1000
              / (4 * 8760) for e in example_plan["fleet"])
    rows = {r[0]: r[1:] for r in Page(_report(example_plan, load_scenario(f))).rows(
        "carbon-table")}
    assert rows["carbon, embodied (manufacturing, amortized)"][0] == f"{emb:,.1f} g"
    assert rows["carbon, operational (energy x grid)"][0] == \
        f"{example_plan['g_co2_per_hour'] - emb:,.1f} g"


def test_assumptions_name_their_sources_and_the_model_accuracy_each_config(
        example_html: str, example_plan: dict) -> None:
    page = Page(example_html)
    pools = {r[0]: r for r in page.rows("pool-assumptions")}
    configs = {e["config"] for e in example_plan["fleet"]}
    assert set(pools) == {f"{c} @ EU27" for c in configs}
    for config in configs:
        price, date = catalog_price(_gpu(config))
        r = pools[f"{config} @ EU27"]
        assert r[1].startswith(f"${price:.2f} per GPU-hour") and date in r[1]
        assert "W busy" in r[2] and "datasheet" in r[2]
        assert r[3].startswith("242 g CO2e/kWh")  # the scenario's grid_g_per_kwh
        assert r[4] == "not counted (embodied.include: false)"
    names = [r[0] for r in page.rows("scenario-assumptions")]
    assert {"price market", "embodied carbon", "failure rates", "grid intensity overrides"} \
        <= set(names)
    val = {r[0]: r for r in page.rows("validation-table")}
    assert set(val) == configs
    assert all(r[1] == "calibrated" and r[3].endswith("%") for r in val.values())
    assert "calibration.json" in val["1xH100-PCIe"][6]


def test_the_older_plan_shape_reports_too(legacy_plan: dict) -> None:
    from fleetplan.report import load_plan

    html = render_report(load_plan(LEGACY_PLAN), build_context(load_plan(LEGACY_PLAN), SC, ""))
    page = valid_page(html)
    assert [r[0] for r in page.rows("fleet-table")] == ["1xH100-PCIe@EU27", "2xRTX-4090@EU27"]
    assert "one pool per configuration and region" in page.text
    assert {r[0] for r in page.rows("validation-table")} == {"1xH100-PCIe", "2xRTX-4090"}


def test_same_plan_same_bytes_and_a_valid_self_contained_page(
        example_plan: dict, example_html: str, tmp_path: Path) -> None:
    assert _report(example_plan) == example_html
    a = tmp_path / "a" / "plan.json"
    b = tmp_path / "b" / "plan.json"
    outs = []
    for f in (a, b):  # the same plan in two folders: the page names the file, not the path
        f.parent.mkdir()
        f.write_text(EXAMPLE_PLAN.read_text(encoding="utf-8"), encoding="utf-8")
        from fleetplan.report import load_plan

        outs.append(write_report(f.with_suffix(".html"), load_plan(f), scenario=SC,
                                 scenario_path=str(EXAMPLE)).read_bytes())
    assert outs[0] == outs[1]
    page = valid_page(example_html)
    assert page.refs == []  # no script, stylesheet, image or link to fetch
    assert page.svgs == len(page.figures) == 2
    assert page.figures == ["figure-fleet", "figure-latency"]


def test_the_validity_check_can_fail() -> None:
    import html5lib

    with pytest.raises(html5lib.html5parser.ParseError):
        assert_valid_html("<!DOCTYPE html><html><head><title>t</title></head><body><p></div>"
                          "</body></html>")
    with pytest.raises(AssertionError, match="repeated ids"):
        assert_valid_html('<!DOCTYPE html><html><head><title>t</title></head><body>'
                          '<p id="x"></p><p id="x"></p></body></html>')


def test_an_hourly_plan_and_a_frontier_get_their_tables_and_figures() -> None:
    fleet = (FleetEntry("1xH100-PCIe", 2, "EU27", 150.0),)
    hours = tuple(HourPlan(h, 1.0 + h, (FleetEntry("1xH100-PCIe", 1 + h, "EU27", 150.0),),
                           2.0 * (1 + h), 200.0 * (1 + h), True) for h in range(3))
    plan = Plan(PlanStatus.optimal, fleet, 4.0, 0.3, 20.0,
                (ClassResult("chat", 3.0, 150.0, 120.0, True, {fleet[0].pool: 1.0}),),
                SOLVER, True, hours=hours)
    cheap = Plan(PlanStatus.optimal, (FleetEntry("2xRTX-4090", 3, "EU27", 400.0),), 1.5, 0.1,
                 40.0, (ClassResult("chat", 3.0, 400.0, 300.0, True, {}),), SOLVER, True)
    missed = replace(cheap, verified=False, fleet=(FleetEntry("2xRTX-4090", 2, "EU27", 800.0),),
                     classes=(ClassResult("chat", 3.0, 800.0, 900.0, False, {}),))
    fr = Frontier(Sweep.slo, "SLO scale", "x", (FrontierPoint(0.5, plan, True),
                                                 FrontierPoint(2.0, cheap, True),
                                                 FrontierPoint(4.0, missed, False)))
    html = _report(plan.to_dict(timing=False), frontier=frontier_from_dict(fr.to_dict(), "f.json"))
    page = valid_page(html)
    assert [r[0] for r in page.rows("hours-table")] == ["0", "1", "2"]
    assert page.rows("hours-table")[2][2] == "3x1xH100-PCIe"
    assert page.figures == ["figure-fleet", "figure-latency", "figure-hours", "figure-frontier"]
    assert page.svgs == 4
    assert [r[-1] for r in page.rows("frontier-table")] == ["2x1xH100-PCIe", "3x2xRTX-4090",
                                                           "2x2xRTX-4090"]
    # each point's outcome in the words of fleetplan frontier's own table
    assert [r[1] for r in page.rows("frontier-table")] == ["verified", "verified",
                                                          "not verified"]
    # the frontier's x axis names the class whose SLO it is; its points carry their fleet
    assert "P99 TTFT objective of class chat (ms)" in html
    assert ">3x2xRTX-4090<" in html


def test_a_pool_of_a_tpot_tier_shows_both_targets_of_its_tier() -> None:
    """A pool whose tier also sets a TPOT target (its name ends ``-tpot50ms``) shows both in
    the fleet table's SLO tier column, not the TTFT target alone."""
    fleet = (FleetEntry("1xH100-PCIe", 2, "EU27", 500.0, 50.0),
             FleetEntry("2xRTX-4090", 1, "EU27", 2000.0))
    plan = Plan(PlanStatus.optimal, fleet, 4.5, 0.3, 20.0,
                (ClassResult("chat", 3.0, 500.0, 300.0, True, {fleet[0].pool: 1.0},
                             slo_tpot_p99_ms=50.0, tpot_p99_ms=40.0),
                 ClassResult("batch", 1.0, 2000.0, 900.0, True, {fleet[1].pool: 1.0})),
                SOLVER, True)
    page = valid_page(_report(plan.to_dict(timing=False)))
    tiers = {r[0]: r[3] for r in page.rows("fleet-table")}  # pool, config, region, tier
    assert tiers == {"1xH100-PCIe@EU27/500ms-tpot50ms": "500 ms, TPOT 50 ms",
                     "2xRTX-4090@EU27/2000ms": "2000 ms"}


def test_an_infeasible_plan_says_why_and_what_to_relax() -> None:
    plan = Plan(PlanStatus.infeasible, (), None, None, None,
                (ClassResult("chat", 4.0, 10.0, None, False, {}),), SOLVER, False,
                reason="no candidate meets chat's P99 TTFT SLO of 10 ms",
                binding="slo:chat", relaxation="chat's SLO to 95 ms",
                capacities=(CapacityNote("chat", "1xH100-PCIe", 10.0, 0.0, 1.0,
                                         "replica model, steady state"),))
    html = _report(plan.to_dict())
    page = valid_page(html)
    assert page.title.startswith("Fleet plan: infeasible")
    assert "no candidate meets chat's P99 TTFT SLO of 10 ms" in page.text
    assert "chat's SLO to 95 ms" in page.text and page.svgs == 0
    # no plan was simulated: no band, no calibration, and no "missed" verdict per class
    assert page.rows("classes-table") == [["chat", "4.00", "10", "\u2014", "\u2014", "\u2014",
                                           "\u2014", "no plan"]]
    # the candidates' capacities are what could have been, not what a plan relies on
    assert "capacity of every candidate" in page.text
    assert "the plan relies on" not in page.text


def test_without_the_scenario_the_page_says_what_it_needs(example_plan: dict) -> None:
    page = Page(_report(example_plan, scenario=None))
    assert "pass the scenario it was solved from" in page.text
    assert page.rows("fleet-table")[0][6] == "\u2014"  # no price without the scenario


def test_the_file_mode_follows_the_umask(example_plan: dict, tmp_path: Path) -> None:
    old = os.umask(0o027)
    try:
        out = write_report(tmp_path / "r.html", plan_from_dict(example_plan), scenario=None)
    finally:
        os.umask(old)
    assert out.stat().st_mode & 0o777 == 0o640
