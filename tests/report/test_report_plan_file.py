"""The plan loader reads what solve writes (today's shape and issue 10's), and refuses a broken
file with one line naming the file, the field and the value."""

from __future__ import annotations

import copy
import json
from pathlib import Path

import pytest
from report_helpers import sample_plan

from fleetplan.errors import InputError
from fleetplan.optimize.frontier import Frontier, FrontierPoint, Sweep
from fleetplan.optimize.plan import ClassResult, FleetEntry, HourPlan, PlanStatus
from fleetplan.report import frontier_from_dict, load_frontier, load_plan, plan_from_dict


def test_reads_what_plan_to_dict_writes() -> None:
    doc = plan_from_dict(sample_plan().to_dict(), "plan.json")
    assert [(p.pool, p.count, p.gpus) for p in doc.fleet] == [
        ("1xH100-PCIe@EU27", 2, 2), ("2xRTX-4090@FRA", 3, 6)]
    assert doc.replicas == 5 and doc.gpus == 8 and doc.tiered  # to_dict names its pools
    assert doc.classes[0].ttft_p99_ci_ms == (90.0, 110.0)
    assert doc.classes[1].split == {"1xH100-PCIe": 0.25, "2xRTX-4090": 0.75}
    assert doc.capacities[0].config == "1xH100-PCIe" and doc.capacities[0].pool is None
    assert doc.fleet_label() == "2x1xH100-PCIe + 3x2xRTX-4090"


def test_reads_a_diurnal_plan_and_an_infeasible_one() -> None:
    hours = tuple(HourPlan(h, 2.0 + h, (FleetEntry("1xH100-PCIe", 1 + h % 2, "EU27"),), 2.0,
                           300.0, True, on_demand=(FleetEntry("2xRTX-4090", 1, "EU27"),)
                           if h == 1 else ()) for h in range(3))
    base = (FleetEntry("1xH100-PCIe", 1, "EU27"),)
    # a diurnal plan's cost is its hours' mean (here 2.0 each)
    doc = plan_from_dict(sample_plan(hours=hours, base_fleet=base,
                                     cost_per_hour_usd=2.0).to_dict())
    assert doc.hours is not None and [h.hour for h in doc.hours] == [0, 1, 2]
    assert doc.hours[1].on_demand[0].config == "2xRTX-4090" and doc.base_fleet is not None
    bad = sample_plan(status=PlanStatus.infeasible, fleet=(), cost_per_hour_usd=None,
                cost_per_mtok_usd=None, g_co2_per_mtok=None, verified=False,
                classes=(ClassResult("chat", 4.0, 10.0, None, False, {}),),
                reason="no candidate meets chat's SLO of 10 ms", binding="slo:chat",
                relaxation="chat's SLO to 90 ms")
    doc = plan_from_dict(bad.to_dict())
    assert doc.status == "infeasible" and doc.relaxation == "chat's SLO to 90 ms"


def test_reads_the_older_shape(legacy_plan: dict) -> None:
    doc = plan_from_dict(legacy_plan, "old.json")
    assert not doc.tiered
    assert [(p.pool, p.tier_ttft_p99_ms) for p in doc.fleet] == [
        ("1xH100-PCIe@EU27", None), ("2xRTX-4090@EU27", None)]
    assert doc.classes[1].split == {"2xRTX-4090": 1.0}


def test_reads_the_issue_10_shape(tiered_plan: dict) -> None:
    doc = plan_from_dict(tiered_plan, "tiered.json")
    assert doc.tiered
    assert [(p.pool, p.tier_ttft_p99_ms) for p in doc.fleet] == [
        ("1xH100-PCIe@EU27/150ms", 150.0), ("2xRTX-4090@EU27/2000ms", 2000.0)]
    assert doc.classes[0].split == {"1xH100-PCIe@EU27/150ms": 1.0}
    cap = {c.class_name: c for c in doc.capacities}
    assert cap["chat"].pool == "1xH100-PCIe@EU27/150ms"
    assert cap["chat"].ttft_p99_ms_at_capacity == 138.0


def test_two_tiers_of_one_configuration_are_two_pools(tiered_plan: dict) -> None:
    d = copy.deepcopy(tiered_plan)
    d["fleet"].append({"pool": "1xH100-PCIe@EU27/2000ms", "config": "1xH100-PCIe",
                       "region": "EU27", "tier_ttft_p99_ms": 2000.0, "count": 1})
    d["classes"][1]["split"] = {"2xRTX-4090@EU27/2000ms": 0.8, "1xH100-PCIe@EU27/2000ms": 0.2}
    doc = plan_from_dict(d)
    assert [p.pool for p in doc.fleet if p.config == "1xH100-PCIe"] == [
        "1xH100-PCIe@EU27/150ms", "1xH100-PCIe@EU27/2000ms"]


def _set(d: dict, path: str, value: object) -> dict:
    d = copy.deepcopy(d)
    keys = path.split(".")
    cur: object = d
    for k in keys[:-1]:
        cur = cur[int(k)] if isinstance(cur, list) else cur[k]  # type: ignore[index]
    last = keys[-1]
    if value is KeyError:
        del cur[last]  # type: ignore[attr-defined]
    elif isinstance(cur, list):
        cur[int(last)] = value
    else:
        cur[last] = value  # type: ignore[index]
    return d


@pytest.mark.parametrize("path, value, field, shown", [
    ("status", "great", "status", '"great"'),
    ("fleet.0.count", -1, "fleet[0].count", "-1"),
    ("fleet.0.count", 1.5, "fleet[0].count", "1.5"),
    ("fleet.1.config", "3xBanana", "fleet[1].config", '"3xBanana"'),
    ("classes.0.rate_rps", "fast", "classes[0].rate_rps", '"fast"'),
    ("classes.0.met", "yes", "classes[0].met", '"yes"'),
    ("classes.1.split", {"2xRTX-4090": 0.5}, "classes[1].split", '{"2xRTX-4090": 0.5}'),
    ("classes.1.split", {"8xTPU": 1.0}, "classes[1].split", '"8xTPU"'),
    ("classes.0.ttft_p99_ci_ms", [120, 80], "classes[0].ttft_p99_ci_ms", "[120, 80]"),
    ("cost_per_hour_usd", None, "cost_per_hour_usd", "null"),
    ("fleet", KeyError, "fleet", "missing"),
    ("solver", "CBC", "solver", '"CBC"'),
])
def test_a_broken_file_is_one_line_naming_file_field_and_value(
        legacy_plan: dict, tmp_path: Path, path: str, value: object, field: str,
        shown: str) -> None:
    f = tmp_path / "plan.json"
    f.write_text(json.dumps(_set(legacy_plan, path, value)), encoding="utf-8")
    with pytest.raises(InputError) as err:
        load_plan(f)
    msg = str(err.value)
    assert "\n" not in msg and msg.startswith(f"{f}: ")
    assert field in msg and shown in msg


def test_not_json_a_frontier_or_no_file(tmp_path: Path, legacy_plan: dict) -> None:
    f = tmp_path / "plan.json"
    f.write_text("{not json", encoding="utf-8")
    with pytest.raises(InputError, match=r"plan.json: not JSON \(line 1"):
        load_plan(f)
    fr = Frontier(Sweep.carbon, "carbon cap", "g CO2e per Mtok",
                  (FrontierPoint(40.0, sample_plan(), True),))
    f.write_text(json.dumps(fr.to_dict()), encoding="utf-8")
    with pytest.raises(InputError, match="a frontier file .* give it with --frontier"):
        load_plan(f)
    with pytest.raises(InputError, match="missing.json: no such plan file"):
        load_plan(tmp_path / "missing.json")


def test_reads_what_frontier_to_dict_writes(tmp_path: Path) -> None:
    cheap = sample_plan()
    clean = sample_plan(cost_per_hour_usd=8.0, g_co2_per_mtok=9.0)
    unverified = sample_plan(verified=False, cost_per_hour_usd=3.0)
    fr = Frontier(Sweep.carbon, "carbon cap", "g CO2e per Mtok",
                  (FrontierPoint(40.0, cheap, True), FrontierPoint(10.0, clean, True),
                   FrontierPoint(5.0, unverified, None)))
    f = tmp_path / "frontier.json"
    f.write_text(json.dumps(fr.to_dict()), encoding="utf-8")
    doc = load_frontier(f)
    assert doc.sweep == "carbon" and [p.value for p in doc.points] == [40.0, 10.0, 5.0]
    assert [p.pareto for p in doc.points] == [True, True, False]
    assert doc.points[1].cost_per_hour_usd == 8.0 and not doc.points[2].verified
    with pytest.raises(InputError, match=r"points\[0\]\.status"):
        frontier_from_dict({"sweep": "carbon", "parameter": "p",
                            "points": [{**fr.to_dict()["points"][0], "status": "meh"}]}, "f")
