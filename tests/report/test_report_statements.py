"""Every statement of the report is true for the plan at hand (issue 39): plans with and without
a reliability block, spot pools, spares, uncalibrated pools, recorded model-error bands,
``--confidence`` figures and a frontier, each page checked statement by statement.

Expected figures are worked out here from the catalog CSVs, ``data/spec_errors.json`` and the
validation page's signed-error table, not from the report's code."""

from __future__ import annotations

import json
import re
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import given
from hypothesis import strategies as st
from report_helpers import EXAMPLE, EXAMPLE_PLAN, ROOT, SOLVER, catalog_price, valid_page

from fleetplan.optimize.frontier import Frontier, FrontierPoint, Sweep
from fleetplan.optimize.plan import ClassResult, FleetEntry, Plan, PlanStatus
from fleetplan.report import build_context, frontier_from_dict, plan_from_dict, render_report
from fleetplan.report.render import usd
from fleetplan.scenario import load_scenario

MODEL = "AceMath-7B-Instruct"  # measured on 1xH100-PCIe only, never on an RTX 4090
H100 = FleetEntry("1xH100-PCIe", 2, "EU27", 150.0, spare=0, calibrated=True)
SPOT = FleetEntry("1xRTX-4090", 6, "EU27", 2000.0, spare=2, market="spot", calibrated=False)
SCENARIO = {
    "model": MODEL,
    "classes": [{"name": "chat", "rate_rps": 4, "slo": {"ttft_p99_ms": 150}},
                {"name": "batch", "rate_rps": 6, "slo": {"ttft_p99_ms": 2000}}],
    "candidates": ["1xH100-PCIe", {"config": "1xRTX-4090", "market": "spot"}],
    "reliability": {"RTX-4090": {"failures_per_replica_hour": 0.05, "replace_s": 600}},
    "carbon": {"max_g_per_mtok": 30},
    "embodied": {"include": False},
    "power": {"model": "tdp"},
}


def spec_row(fold: str, gpu: str) -> dict[str, float]:
    errors = json.loads((ROOT / "data" / "spec_errors.json").read_text(encoding="utf-8"))
    return errors["folds"][fold][gpu]["ttft_p99_ms"]


def kind_row(kind: str) -> tuple[float, float]:
    """(p10, p90) of the validation page's signed ttft_p99_ms error of a server kind."""
    text = (ROOT / "docs" / "validation.md").read_text(encoding="utf-8")
    m = re.search(rf"^\| {re.escape(kind)} \| (\S+) \| (\S+) \| (\S+) \| \d+ \|$", text, re.M)
    assert m, kind
    return float(m.group(1)) / 100, float(m.group(3)) / 100


def spot_plan(*, bands: bool = True, confidence: bool = False) -> dict[str, Any]:
    """2 calibrated H100s for chat, 6 spot RTX 4090s (2 spares) for batch; with ``bands`` the
    fields solve records (figures chosen here, so the page must show exactly them)."""
    extra: dict[str, Any] = {}
    chat: dict[str, Any] = dict(extra)
    batch: dict[str, Any] = dict(extra)
    if bands:
        chat.update(ttft_p99_band_ms=(94.5, 105.3), band_basis="chat's table", calibrated=True)
        batch.update(ttft_p99_band_ms=(736.0, 1986.3), band_basis="batch's table",
                     calibrated=False)
    if confidence:
        chat.update(slo_met_probability=0.9992, margin_ms=7.5)
        batch.update(slo_met_probability=0.81, margin_ms=120.0)
    fleet = (H100, SPOT) if bands else tuple(
        FleetEntry(e.config, e.count, e.region, e.tier_ttft_p99_ms, spare=e.spare,
                   market=e.market) for e in (H100, SPOT))
    plan = Plan(PlanStatus.optimal, fleet, 4.75, 0.0125, 20.0,
                (ClassResult("chat", 4.0, 150.0, 100.0, True, {H100.pool: 1.0},
                             ttft_p99_ci_ms=(95.0, 105.0), **chat),
                 ClassResult("batch", 6.0, 2000.0, 900.0, True, {SPOT.pool: 1.0},
                             ttft_p99_ci_ms=(850.0, 950.0), **batch)),
                SOLVER, True, g_co2_per_hour=400.0)
    return plan.to_dict(timing=False)


@pytest.fixture(scope="module")
def scenario(tmp_path_factory: pytest.TempPathFactory) -> Any:
    f = tmp_path_factory.mktemp("sc") / "spot.yaml"
    f.write_text(yaml.safe_dump(SCENARIO), encoding="utf-8")
    return load_scenario(f)


def page_of(d: dict[str, Any], scenario: Any = None, frontier: Any = None) -> tuple[Any, str]:
    plan = plan_from_dict(d, "plan.json")
    ctx = build_context(plan, scenario, "scenario.yaml") if scenario is not None else None
    html = render_report(plan, ctx, frontier)
    return valid_page(html), html


def header(page: Any, table: str) -> list[str]:
    return page.tables[table][0]


def test_spares_held_for_a_configurations_several_tiers_say_so(scenario: Any) -> None:
    """The MILP keeps a configuration's churn spares in its strictest tier's pool, sized for
    the working replicas of all its tiers: the page says for how many."""
    strict = FleetEntry("1xRTX-4090", 4, "EU27", 300.0, spare=2, market="spot",
                        calibrated=False)
    d = spot_plan()
    d["fleet"].append({"pool": strict.pool, "config": strict.config, "region": strict.region,
                       "tier_ttft_p99_ms": 300.0, "count": 4, "spare": 2, "market": "spot",
                       "calibrated": False})
    for e in d["fleet"]:
        if e["pool"] == SPOT.pool:
            e["spare"] = 0
    page, _html = page_of(d, scenario)
    spares = {r[0]: r[1] for r in page.rows("scenario-assumptions")}["spare replicas"]
    # 6 + 4 replicas of spot 1xRTX-4090, 2 of them spares: 8 working over 2 tiers
    assert spares.startswith(f"for churn: 2 in {strict.pool}, for the 8 working replicas "
                             "of its 2 tiers"), spares


def test_spot_spares_and_an_uncalibrated_pool_are_stated(scenario: Any) -> None:
    page, html = page_of(spot_plan(), scenario)
    assert page.title == "Fleet plan: 2x1xH100-PCIe + 6x1xRTX-4090 (spot), $4.75/h"
    cols = header(page, "fleet-table")
    assert "market" in cols and "of which spare" in cols
    rows = {r[0]: dict(zip(cols, r, strict=True)) for r in page.rows("fleet-table")}
    spot, h100 = rows[SPOT.pool], rows[H100.pool]
    assert (spot["market"], spot["of which spare"], spot["replicas"]) == ("spot", "2", "6")
    assert (h100["market"], h100["of which spare"]) == ("on-demand", "0")
    assert spot["replica model"] == "spec-based (not calibrated)"
    assert h100["replica model"] == "calibrated"
    # spot: half the catalog's alternative-market price (the bundled assumption), all figures
    half = catalog_price("RTX-4090")[0] / 2
    assert half == 0.125 and spot["$ per GPU-hour"] == "$0.125" and spot["$ per hour"] == "$0.75"
    total = page.tables["fleet-table"][-1]  # total, replicas, spares, GPUs (a colspan first)
    assert total[:4] == ["total", "8", "2", "8"]
    # the banner says what was verified, on what, and names only the uncalibrated class
    assert "every class's SLO verified by simulation of predictions that are not calibrated" \
        in page.text
    banner = re.search(r'id="uncalibrated-banner">(.*?)</div>', html, re.S)
    assert banner is not None
    words = " ".join(re.sub(r"<[^>]+>", " ", banner.group(1)).split())
    assert "never measured on 1xRTX-4090 (carrying batch)" in words
    assert "batch: simulated 900.0 ms, model error band 736.0 to 1,986.3 ms, SLO 2,000 ms" \
        in words
    assert "chat:" not in words and "reaches above the SLO" not in words
    assert "solve --confidence P sizes the fleet for these errors" in words


def test_the_classes_show_the_recorded_band_next_to_the_simulations_interval(
        scenario: Any) -> None:
    page, _ = page_of(spot_plan(), scenario)
    cols = header(page, "classes-table")
    rows = {r[0]: dict(zip(cols, r, strict=True)) for r in page.rows("classes-table")}
    assert rows["chat"]["simulation's 95% interval (ms)"] == "95.0 to 105.0"
    assert rows["chat"]["model error band, 80% (ms)"] == "94.5 to 105.3"
    assert rows["batch"]["model error band, 80% (ms)"] == "736.0 to 1,986.3"
    assert (rows["chat"]["predictions"], rows["batch"]["predictions"]) == (
        "calibrated", "not calibrated")
    assert "chat: chat's table" in page.text and "batch: batch's table" in page.text
    assert "computed by the report" not in page.text
    assert "P(SLO met)" not in cols  # no --confidence figures in this plan


def test_failures_spares_power_carbon_cap_and_embodied_are_the_scenarios(scenario: Any) -> None:
    page, html = page_of(spot_plan(), scenario)
    assumptions = {r[0]: r[1] for r in page.rows("scenario-assumptions")}
    failures = assumptions["failure rates"]
    assert "RTX-4090 (on-demand): 0.05 failures per replica-hour, replaced after 600 s" \
        in failures and "none modelled" not in failures
    assert assumptions["spare replicas"].startswith(f"for churn: 2 in {SPOT.pool}")
    assert assumptions["carbon cap"] == ("at most 30 g CO2e (operational + embodied) per 1M "
                                         "tokens (input + output)")
    assert assumptions["embodied carbon"].startswith("not counted (embodied.include: false")
    assert "power.model: tdp" in assumptions["power"]
    assert not any("{" in v for v in assumptions.values())  # no Python dict printed
    pools = {r[0]: r for r in page.rows("pool-assumptions")}
    # a spot RTX 4090 pool takes the bundled consumer spot rate, 0.1 per GPU-hour, replaced
    # after the block's 600 s: down u = l R / (1 + l R)
    lr = 0.1 * 600 / 3600
    assert pools["1xRTX-4090 @ EU27 (spot)"][5].startswith(
        f"0.100 per replica-hour, replaced after 600 s: down {100 * lr / (1 + lr):.2f}%")
    assert pools["1xH100-PCIe @ EU27"][5] == "none modelled"
    assert all(r[4] == "not counted (embodied.include: false)" for r in pools.values())
    carbon = {r[0]: r[1:] for r in page.rows("carbon-table")}
    assert carbon["carbon, embodied (manufacturing, amortized)"] == [
        "not counted (embodied.include: false)"]
    assert "a request is in flight (power.model: tdp)" in page.text
    assert "follows the work" not in page.text


@pytest.mark.parametrize(("availability", "said"), [
    ({"H100-PCIe": 1}, "at most 1 H100-PCIe GPU"),
    ({"H100-PCIe": 3, "FRA": {"RTX-4090": 1}}, "at most 1 RTX-4090 GPU in FRA, 3 H100-PCIe GPUs"),
])
def test_the_availability_reads_as_the_scenario_states_it(tmp_path: Path, availability: Any,
                                                          said: str) -> None:
    """Counts of GPUs in plain words ('1 H100-PCIe GPU', not '1 H100-PCIe in FRA GPUs'), and
    'in every hour' only where the plan has hours."""
    f = tmp_path / "s.yaml"
    f.write_text(yaml.safe_dump({**SCENARIO, "availability": availability}), encoding="utf-8")
    page, _html = page_of(spot_plan(), load_scenario(f))
    assert {r[0]: r[1] for r in page.rows("scenario-assumptions")}["availability"] == said
    day = {**SCENARIO, "availability": availability, "classes": [
        {"name": "chat", "rate_profile_rps": [4] * 24, "slo": {"ttft_p99_ms": 150}},
        SCENARIO["classes"][1]]}
    f.write_text(yaml.safe_dump(day), encoding="utf-8")
    page, _html = page_of(spot_plan(), load_scenario(f))
    assert {r[0]: r[1] for r in page.rows("scenario-assumptions")}["availability"] == (
        f"{said} in every hour")


def test_accuracy_comes_from_package_data_never_the_docs(scenario: Any) -> None:
    page, html = page_of(spot_plan(), scenario)
    assert "docs/validation.md" not in html and "not found" not in page.text
    cols = header(page, "validation-table")
    rows = {r[0]: dict(zip(cols, r, strict=True)) for r in page.rows("validation-table")}
    held = "held-out P99 TTFT: measured / predicted, 80% of runs"
    q = spec_row("leave-one-config-out", "RTX-4090")  # the model was measured elsewhere
    assert rows["1xRTX-4090"][held] == f"{1 / (1 + q['p90']):.2f}\u00d7 to " \
        f"{1 / (1 + q['p10']):.2f}\u00d7"
    p10, p90 = kind_row("H100-PCIe, one GPU")
    assert rows["1xH100-PCIe"][held] == f"{1 / (1 + p90):.2f}\u00d7 to {1 / (1 + p10):.2f}\u00d7"
    assert rows["1xRTX-4090"]["fitted runs"] == "0"
    assert rows["1xRTX-4090"]["in-sample P99 TTFT error"] == "\u2014"
    assert f"(1xRTX-4090) has no measured run of {MODEL}" in page.text
    assert f"over the measured runs of model {MODEL}" in page.text  # the H100 has fitted runs


def test_an_older_plan_file_gets_its_band_computed_or_not_recorded(scenario: Any) -> None:
    page, _ = page_of(spot_plan(bands=False), scenario)
    cols = header(page, "classes-table")
    rows = {r[0]: dict(zip(cols, r, strict=True)) for r in page.rows("classes-table")}
    q = spec_row("leave-one-config-out", "RTX-4090")
    assert rows["batch"]["model error band, 80% (ms)"] == \
        f"{900 / (1 + q['p90']):,.1f} to {900 / (1 + q['p10']):,.1f}"
    p10, p90 = kind_row("H100-PCIe, one GPU")
    assert rows["chat"]["model error band, 80% (ms)"] == \
        f"{100 / (1 + p90):,.1f} to {100 / (1 + p10):,.1f}"
    assert "computed by the report from the scenario" in page.text
    assert "not calibrated" in page.text
    # without the scenario nothing is known about it, and the page says so
    bare, _ = page_of(spot_plan(bands=False))
    cols = header(bare, "classes-table")
    rows = {r[0]: dict(zip(cols, r, strict=True)) for r in bare.rows("classes-table")}
    assert {r["model error band, 80% (ms)"] for r in rows.values()} == {"not recorded"}
    assert "whether the predictions are calibrated is not recorded in this plan file" \
        in bare.text
    assert "verified by simulation of calibrated predictions" not in bare.text


def test_a_plain_calibrated_plan_claims_no_spot_spares_or_failures() -> None:
    page, html = page_of(json.loads(EXAMPLE_PLAN.read_text(encoding="utf-8")),
                         load_scenario(EXAMPLE))
    rest = page.text.replace("no spot pool", "")
    assert "spot" not in page.title and "spot" not in rest, rest[rest.find("spot") - 200:][:300]
    assert "market" not in header(page, "fleet-table")
    assert "of which spare" not in header(page, "fleet-table")
    assumptions = {r[0]: r[1] for r in page.rows("scenario-assumptions")}
    assert assumptions["failure rates"].startswith("none modelled: no reliability block and "
                                                   "no spot pool")
    assert assumptions["spare replicas"] == "none (redundancy 0, no reliability block)"
    assert "every class's SLO verified by simulation of calibrated predictions" in page.text
    assert 'id="uncalibrated-banner"' not in html and "not calibrated" not in page.text
    assert len(page.rows("pool-assumptions")[0]) == 5  # no failures column
    assert "docs/validation.md" not in html


def test_confidence_figures_are_shown_when_the_plan_has_them(scenario: Any) -> None:
    page, html = page_of(spot_plan(confidence=True), scenario)
    cols = header(page, "classes-table")
    rows = {r[0]: dict(zip(cols, r, strict=True)) for r in page.rows("classes-table")}
    # three decimals, never rounded up to a certainty the plan does not have
    assert (rows["chat"]["P(SLO met)"], rows["batch"]["P(SLO met)"]) == ("0.999", "0.810")
    assert rows["batch"]["margin (ms)"] == "120.0"
    assert "solve --confidence P sizes the fleet" not in page.text  # it already was


def test_a_frontier_and_the_latency_figure_name_spot_and_the_band(scenario: Any) -> None:
    d = spot_plan()
    plan = Plan(PlanStatus.optimal, (H100, SPOT), 4.75, 0.0125, 20.0,
                (ClassResult("chat", 4.0, 150.0, 100.0, True, {}),), SOLVER, True)
    fr = Frontier(Sweep.carbon, "carbon cap", "g/Mtok", (FrontierPoint(30.0, plan, True),))
    page, html = page_of(d, scenario, frontier_from_dict(fr.to_dict(), "f.json"))
    assert [r[-1] for r in page.rows("frontier-table")] == ["2x1xH100-PCIe + 6x1xRTX-4090 (spot)"]
    assert page.figures == ["figure-fleet", "figure-latency", "figure-frontier"]
    assert "model error band (80%)" in html  # the latency plot's legend
    assert "Fleet: 8 replicas (6 spot, 2 spares), 8 GPUs" in html
    assert "grey: the replica model's 80% error band" in page.text


def test_report_reads_a_model_config_scenario_as_solve_does(cli, tmp_path: Path) -> None:
    config = ROOT / "tests" / "data" / "hf-configs" / "Llama-3.1-8B-Instruct"
    sc = {**SCENARIO, "model_config": str(config)}
    del sc["model"]
    f = tmp_path / "llama.yaml"
    f.write_text(yaml.safe_dump(sc), encoding="utf-8")
    plan = tmp_path / "plan.json"
    plan.write_text(json.dumps(spot_plan(bands=False)), encoding="utf-8")
    res = cli("report", str(plan), "-s", str(f), "-o", str(tmp_path / "p.html"))
    assert res.exit_code == 0, res.stderr
    page = valid_page((tmp_path / "p.html").read_text(encoding="utf-8"))
    assert "(model Llama-3.1-8B-Instruct)" in page.text
    assumptions = {r[0]: r for r in page.rows("scenario-assumptions")}
    assert "model_config" in assumptions["model"][2]
    # a model never measured: every configuration is spec-based, bands leave-one-model-out
    q = spec_row("leave-one-model-out", "RTX-4090")
    cols = header(page, "classes-table")
    rows = {r[0]: dict(zip(cols, r, strict=True)) for r in page.rows("classes-table")}
    assert rows["batch"]["model error band, 80% (ms)"] == \
        f"{900 / (1 + q['p90']):,.1f} to {900 / (1 + q['p10']):,.1f}"
    assert {r["predictions"] for r in rows.values()} == {"not calibrated"}
    # the same model given with --model-config, as solve takes it
    del sc["model_config"]
    f.write_text(yaml.safe_dump(sc), encoding="utf-8")
    res = cli("report", str(plan), "-s", str(f), "--model-config", str(config),
              "-o", str(tmp_path / "q.html"))
    assert res.exit_code == 0, res.stderr
    assert "(model Llama-3.1-8B-Instruct)" in valid_page(
        (tmp_path / "q.html").read_text(encoding="utf-8")).text


@pytest.mark.parametrize(("value", "digits", "shown"), [
    (0.125, 2, "$0.125"), (9.88, 2, "$9.88"), (1.875, 2, "$1.875"), (4.0, 2, "$4.00"),
    (1.88341, 2, "$1.88"), (0.0113333, 3, "$0.0113"), (1234.5, 2, "$1,234.50"),
    (None, 2, "\u2014")])
def test_money_keeps_its_figures(value: float | None, digits: int, shown: str) -> None:
    assert usd(value, digits) == shown


@given(st.floats(min_value=1e-4, max_value=1e6, allow_nan=False))
def test_money_is_within_half_its_last_digit_and_three_figures(v: float) -> None:
    text = usd(v)
    shown = float(text[1:].replace(",", ""))
    decimals = len(text.split(".")[1])
    assert decimals >= 2
    assert abs(shown - v) <= 0.5 * 10 ** -decimals + 1e-12
    assert abs(shown - v) <= 0.005 * v + 1e-12  # at least three significant figures


def test_a_calibrated_band_above_the_slo_is_said_too(scenario: Any) -> None:
    d = spot_plan()
    d["classes"][0]["ttft_p99_band_ms"] = [80.0, 180.0]  # calibrated chat, SLO 150 ms
    page, html = page_of(d, scenario)
    assert 'id="band-banner"' in html
    assert "chat: simulated 100.0 ms, model error band 80.0 to 180.0 ms, SLO 150 ms." \
        in page.text
    _, plain = page_of(spot_plan(), scenario)  # 94.5 to 105.3 ms: within the SLO
    assert 'id="band-banner"' not in plain


def test_report_reads_the_scenarios_own_catalog(cli, tmp_path: Path) -> None:
    """A GPU only a user catalog knows (L4, tests/data/catalog-l4): priced from that catalog,
    and banded with the spec path's errors on other people's GPUs (the external fold: nobody's
    runs here are on an L4)."""
    catalog = ROOT / "tests" / "data" / "catalog-l4"
    config = ROOT / "tests" / "data" / "hf-configs" / "Llama-3.1-8B-Instruct"
    sc = {"model_config": str(config), "catalog": str(catalog),
          "classes": [{"name": "chat", "rate_rps": 2, "slo": {"ttft_p99_ms": 500}}],
          "candidates": ["1xL4"]}
    f = tmp_path / "l4.yaml"
    f.write_text(yaml.safe_dump(sc), encoding="utf-8")
    l4 = FleetEntry("1xL4", 3, "EU27", 500.0)
    plan = Plan(PlanStatus.optimal, (l4,), 1.35, 0.05, 10.0,
                (ClassResult("chat", 2.0, 500.0, 200.0, True, {l4.pool: 1.0}),), SOLVER, True)
    pf = tmp_path / "plan.json"
    pf.write_text(json.dumps(plan.to_dict(timing=False)), encoding="utf-8")
    res = cli("report", str(pf), "-s", str(f), "-o", str(tmp_path / "p.html"))
    assert res.exit_code == 0, res.stderr
    page = valid_page((tmp_path / "p.html").read_text(encoding="utf-8"))
    cols = header(page, "fleet-table")
    row = dict(zip(cols, page.rows("fleet-table")[0], strict=True))
    with open(catalog / "prices.csv", encoding="utf-8") as fh:
        price = float(next(r for r in fh if r.startswith("L4,")).split(",")[2])
    assert row["$ per GPU-hour"] == usd(price) == "$0.45" and row["$ per hour"] == "$1.35"
    q = spec_row("external", "all")
    rows = {r[0]: dict(zip(header(page, "classes-table"), r, strict=True))
            for r in page.rows("classes-table")}
    assert rows["chat"]["model error band, 80% (ms)"] == \
        f"{200 / (1 + q['p90']):,.1f} to {200 / (1 + q['p10']):,.1f}"
    assert "none measured on L4" in page.text


def test_a_diurnal_plan_says_its_fleet_is_the_peak_hours_and_its_cost_the_days_average(
        ) -> None:
    from fleetplan.optimize.plan import HourPlan

    peak = FleetEntry("1xH100-PCIe", 3, "EU27", 150.0)
    hours = tuple(HourPlan(h, 1.0 + h, (FleetEntry("1xH100-PCIe", 1 + h, "EU27", 150.0),),
                           2.0 * (1 + h), 200.0 * (1 + h), True) for h in range(3))
    day = sum(h.cost_per_hour_usd for h in hours) / 3  # $4.00: the day's average, not the peak
    plan = Plan(PlanStatus.optimal, (peak,), day, 0.3, 20.0,
                (ClassResult("chat", 2.0, 150.0, 120.0, True, {peak.pool: 1.0}),), SOLVER, True,
                hours=hours)
    page, _ = page_of(plan.to_dict(timing=False), load_scenario(EXAMPLE))
    assert page.title == ("Fleet plan: 3x1xH100-PCIe at the peak hour, $4.00/h averaged over "
                          "the day")
    price = catalog_price("H100-PCIe")[0]
    total = page.tables["fleet-table"][-1]
    assert total[:3] == ["total", "3", "3"] and f"${3 * price:.2f}" in total  # the peak fleet
    assert "per hour, averaged over the day" in page.text
    carbon = {r[0]: r[1:] for r in page.rows("carbon-table")}
    assert carbon["carbon, operational (energy x grid)"] == ["\u2014", "\u2014"]  # no "— g"
    # its class rows are the day's mean rate and the worst hour's P99, and say so: "rate 2.00"
    # beside the P99 of the 3 req/s hour read as that P99 at 2 req/s
    head = page.tables["classes-table"][0]
    assert "rate (req/s, mean over the day)" in head
    assert "simulated P99 TTFT (ms, worst hour)" in head
    assert "each class's rate is its mean over the day, its simulated P99 TTFT and error band " \
        "those of its worst hour" in page.text
    one, _ = page_of(replace(plan, hours=None).to_dict(timing=False), load_scenario(EXAMPLE))
    assert "rate (req/s)" in one.tables["classes-table"][0]
    assert "worst hour" not in one.text


def test_spares_of_redundancy_alone_are_not_said_to_be_for_churn(tmp_path: Path) -> None:
    """A plan of ``redundancy: 1`` without a reliability block keeps one spare per pool: the
    page says it is for redundancy (it said 'for churn', and the fleet plot 'spare for
    churn', where nothing fails)."""
    data = {k: v for k, v in SCENARIO.items() if k != "reliability"}
    data["redundancy"] = 1
    data["candidates"] = ["1xH100-PCIe", "1xRTX-4090"]
    f = tmp_path / "n1.yaml"
    f.write_text(yaml.safe_dump(data), encoding="utf-8")
    d = spot_plan()
    for e in d["fleet"]:
        e.pop("market", None)
        e["pool"] = e["pool"].replace("~spot", "")
        e["spare"] = 1
    for c in d["classes"]:
        c["split"] = {k.replace("~spot", ""): v for k, v in c["split"].items()}
    page, html = page_of(d, load_scenario(f))
    spares = {r[0]: r[1] for r in page.rows("scenario-assumptions")}["spare replicas"]
    assert spares.startswith("for redundancy: 1 in 1xH100-PCIe@EU27/150ms; 1 in "), spares
    assert "N+1: every pool keeps 1 more than its load needs" in spares
    assert "churn" not in spares and "for churn" not in html


def test_the_banner_of_several_models_says_which_model_was_never_measured_where() -> None:
    """'the model was never measured on Qwen2.5-14B-Instruct/1xA100-80GB' named no model; in a
    plan of several models each uncalibrated model is named with its configurations."""
    from fleetplan.report.render import _spec_models

    def pool(model: str | None, config: str, calibrated: bool | None) -> dict[str, Any]:
        return {"model": model, "config": config, "calibrated": calibrated}

    pools = [pool("B", "1xL40S", False), pool("A", "1xA100-80GB", False),
             pool("B", "1xA100-80GB", False), pool("A", "1xH100-PCIe", True),
             pool("B", "1xL40S", False)]
    assert _spec_models(pools) == ("A was never measured on 1xA100-80GB, nor B on "
                                   "1xA100-80GB, 1xL40S")
    assert _spec_models([pool(None, "1xL40S", False)]) == ""  # one model: the old sentence
