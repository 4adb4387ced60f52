"""One plan validator for ``report`` and ``simulate --plan`` (#43 item 3): a plan whose fields are
each well-formed but contradict one another is refused by both, with the same one line naming
the file, the field and the value; the plans ``fleetplan solve`` writes are accepted by both."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest
from report_helpers import DATA, EXAMPLE, EXAMPLE_PLAN

from fleetplan.errors import InputError
from fleetplan.optimize import plan as replay
from fleetplan.report.plan_file import check_plan_scenario, load_plan
from fleetplan.scenario import load_scenario

SOLVED = DATA / "solved"


def _example() -> dict[str, Any]:
    return json.loads(EXAMPLE_PLAN.read_text(encoding="utf-8"))


def _diurnal(hours: list[int]) -> dict[str, Any]:
    """The example plan as a diurnal one: each hour runs the whole fleet, at the plan's cost
    (the mean of equal hours is that cost)."""
    d = _example()
    d["hours"] = [{"hour": h, "rate_rps": 10.0, "fleet": copy.deepcopy(d["fleet"]),
                   "cost_per_hour_usd": d["cost_per_hour_usd"], "g_co2_per_hour": 100.0,
                   "met": True} for h in hours]
    return d


def _broken(case: str) -> dict[str, Any]:
    d = _example()
    chat = d["classes"][0]
    if case == "ci_excludes_p99":
        chat["ttft_p99_ci_ms"] = [chat["ttft_p99_ms"] + 50, chat["ttft_p99_ms"] + 60]
    elif case == "zero_replicas_carrying_traffic":
        d["fleet"][0]["count"] = 0
    elif case == "infeasible_with_fleet":
        d.update(status="infeasible", verified=False, reason="r", binding="b", relaxation="x")
    elif case == "verified_with_a_missed_class":
        chat["met"] = False
    elif case == "repeated_hour":
        d = _diurnal([0, 3, 0])
    elif case == "huge_cost":
        d["cost_per_hour_usd"] = 1e308
    elif case == "infinite_cost":
        d["cost_per_hour_usd"] = "inf"
    elif case == "count_beyond_bound":
        d["fleet"][1]["count"] = 10**6
    elif case == "repeated_class":
        d["classes"].append(copy.deepcopy(chat))
    elif case == "spares_beyond_count":
        d["fleet"][0]["spare"] = d["fleet"][0]["count"] + 1
    elif case == "cost_off_the_scenarios_prices":
        d["cost_per_hour_usd"] += 1.0
    elif case == "diurnal_cost_off_its_hours":
        d = _diurnal([0, 1])
        d["cost_per_hour_usd"] += 1.0
    return d


# case -> (field, value as the line shows it)
CASES = {
    "ci_excludes_p99": ("classes[0].ttft_p99_ci_ms", "["),
    "zero_replicas_carrying_traffic": ("fleet[0].count", "= 0"),
    "infeasible_with_fleet": ("fleet", "1xH100-PCIe@EU27/150ms"),
    "verified_with_a_missed_class": ("classes[0].met", "false"),
    "repeated_hour": ("hours[2].hour", "= 0"),
    "huge_cost": ("cost_per_hour_usd", "1e+308"),
    "infinite_cost": ("cost_per_hour_usd", '"inf"'),
    "count_beyond_bound": ("fleet[1].count", "1000000"),
    "repeated_class": ("classes[2].name", "'chat': repeated"),
    "spares_beyond_count": ("fleet[0].spare", "= "),
    "cost_off_the_scenarios_prices": ("cost_per_hour_usd", "prices"),
    "diurnal_cost_off_its_hours": ("cost_per_hour_usd", "mean of the hours"),
}


def _line(res: Any) -> str:
    assert res.exit_code == 2, (res.exit_code, res.stdout, res.stderr)
    line = res.stderr.strip()
    assert "\n" not in line and "Traceback" not in line, line
    return line


@pytest.mark.parametrize("case", list(CASES))
def test_report_and_simulate_refuse_a_contradicting_plan_with_one_same_line(
        cli: Any, tmp_path: Path, case: str) -> None:
    plan = tmp_path / "plan.json"
    plan.write_text(json.dumps(_broken(case)), encoding="utf-8")
    out = tmp_path / "page.html"
    report = _line(cli("report", str(plan), "-s", str(EXAMPLE), "-o", str(out)))
    simulate = _line(cli("simulate", str(EXAMPLE), "--plan", str(plan), "--duration", "60"))
    field, shown = CASES[case]
    assert report == simulate  # one validator
    assert f"{plan}: {field}" in report and shown in report, report
    assert not out.exists()  # nothing half-written


def test_the_cases_are_broken_only_where_they_say(cli: Any, tmp_path: Path) -> None:
    # the plans above differ from one both commands accept: the example plan itself (so each
    # refusal is the rule it names, not some other fault of the file)
    plan = tmp_path / "plan.json"
    plan.write_text(json.dumps(_example()), encoding="utf-8")
    doc = load_plan(plan)
    check_plan_scenario(doc, load_scenario(EXAMPLE))
    assert replay.load_plan(plan).for_replay().fleet == doc.fleet
    # a diurnal plan whose cost is its hours' mean is read
    plan.write_text(json.dumps(_diurnal([0, 1])), encoding="utf-8")
    assert load_plan(plan).hours is not None
    assert replay.load_plan(plan).for_replay().hours is not None


def test_a_contradicting_cost_is_only_known_with_the_scenario(tmp_path: Path) -> None:
    # without --scenario the report has no prices to compare: the plan is read
    plan = tmp_path / "plan.json"
    plan.write_text(json.dumps(_broken("cost_off_the_scenarios_prices")), encoding="utf-8")
    doc = load_plan(plan)
    want = sum(p["count"] for p in _example()["fleet"] if p["config"] == "1xH100-PCIe") * 2.0 \
        + sum(p["count"] for p in _example()["fleet"] if p["config"] == "2xRTX-4090") * 0.5
    assert doc.cost_per_hour_usd == pytest.approx(want + 1.0)  # H100 $2, RTX 4090 $0.25/GPU-h
    with pytest.raises(InputError, match=rf"cost_per_hour_usd = {want + 1.0!r}: expected "
                                         rf"\${want:g}/h"):
        check_plan_scenario(doc, load_scenario(EXAMPLE))


SOLVED_PLANS = ["hcb", "conf", "diurnal", "od", "spot", "infeasible"]
SCENARIO_OF = {"hcb": "hcb", "conf": "hcb", "diurnal": "diurnal", "od": "od", "spot": "spot",
               "infeasible": "infeasible"}


@pytest.mark.parametrize("name", SOLVED_PLANS)
def test_plans_solve_writes_are_read_by_both_readers(name: str) -> None:
    from fleetplan.fleet.simulate import _plan_scenario

    path = SOLVED / f"{name}.plan.json"
    sc = load_scenario(SOLVED / f"{SCENARIO_OF[name]}.yaml")
    doc = load_plan(path)
    check_plan_scenario(doc, sc)  # report --scenario
    raw = json.loads(path.read_text(encoding="utf-8"))
    if name == "infeasible":
        assert doc.status == "infeasible" and not doc.fleet
        with pytest.raises(InputError, match="no fleet to simulate"):
            replay.load_plan(path).for_replay()
        return
    replayed = _plan_scenario(sc, str(path), None)  # simulate --plan's reader and checks
    assert [p.count for p in replayed.fleet] == [e["count"] for e in raw["fleet"]]
    # the fields the newer solves write are kept
    if name == "conf":
        assert any(c.ttft_p99_band_ms for c in doc.classes)
        assert all(c.band_basis for c in doc.classes)
    if name == "spot":
        assert any(p.market == "spot" and p.spare for p in doc.fleet)
    if name in ("diurnal", "od"):
        assert doc.hours is not None and len(doc.hours) == 24
    if name == "od":  # on-demand replicas in some hours, at the scenario's price factor
        assert doc.base_fleet and any(h.on_demand for h in doc.hours or ())


@pytest.mark.parametrize("classes", ["as solved", "none"])
def test_an_infeasible_plan_with_or_without_its_classes_is_read(tmp_path: Path,
                                                               classes: str) -> None:
    # solve writes an infeasible plan's classes with no simulated figures; before, it wrote
    # classes = []: both are reported
    d = json.loads((SOLVED / "infeasible.plan.json").read_text(encoding="utf-8"))
    assert [c["name"] for c in d["classes"]] == ["chat", "batch"]
    if classes == "none":
        d["classes"] = []
    plan = tmp_path / "plan.json"
    plan.write_text(json.dumps(d), encoding="utf-8")
    doc = load_plan(plan)
    check_plan_scenario(doc, load_scenario(SOLVED / "infeasible.yaml"))
    assert len(doc.classes) == (2 if classes == "as solved" else 0) and not doc.fleet


def test_the_older_shape_is_replayed_as_the_report_reads_it(tmp_path: Path) -> None:
    # split keyed by configuration (one pool per configuration): both readers accept it, and
    # the replay sends each share to the pool of that configuration
    from report_helpers import LEGACY_PLAN

    from fleetplan.fleet.simulate import _plan_scenario

    sc = load_scenario(EXAMPLE)
    doc = load_plan(LEGACY_PLAN)
    check_plan_scenario(doc, sc)
    replayed = _plan_scenario(sc, str(LEGACY_PLAN), None)
    raw = json.loads(LEGACY_PLAN.read_text(encoding="utf-8"))
    for c, given in zip(replayed.classes, raw["classes"], strict=True):
        want = {f"{k}@EU27": v for k, v in given["split"].items() if v > 0}
        assert {k.split("/")[0]: v for k, v in (c.split or {}).items()} == want
