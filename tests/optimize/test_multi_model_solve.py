"""Issue 44 end to end: two models competing for two H100s, planned as one fleet.

Chat on Llama-3-8B and agents on Qwen-7B, each at a rate one H100 does not carry, with the H100
priced below the RTX 4090 per request (the scenario's own price): planned apart, each model takes
2 H100s, 4 together, where 2 exist. The joint plan must keep to 2, meet every class's SLO in
its verification and again when replayed on another seed (`simulate --plan`), and name each
pool's and class's model.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from fleetplan.fleet import simulate
from fleetplan.optimize import solve
from fleetplan.optimize.plan import load_plan
from fleetplan.scenario import load_scenario

LLAMA, QWEN = "Meta-Llama-3-8B-Instruct", "DeepSeek-R1-Distill-Qwen-7B"
SCENARIO: dict[str, Any] = {
    "models": [LLAMA, QWEN],
    "classes": [{"name": "chat", "model": LLAMA, "rate_rps": 70, "slo": {"ttft_p99_ms": 500}},
                {"name": "agent", "model": QWEN, "rate_rps": 80, "slo": {"ttft_p99_ms": 500}}],
    "candidates": ["1xH100-PCIe", "1xRTX-4090"],
    "prices_usd_per_gpu_hour": {"H100-PCIe": 0.5},
    "availability": {"H100-PCIe": 2},
    "capacity": {"duration_s": 60, "warmup_s": 10, "seeds": 1, "min_requests": 100},
    "sim": {"duration_s": 60, "warmup_s": 10, "seed": 1, "replications": 1},
}


def _h100s(fleet: Any) -> int:
    return sum(e.count for e in fleet if e.config == "1xH100-PCIe")


@pytest.fixture(scope="module")
def solved(tmp_path_factory: pytest.TempPathFactory, capacity_cache_dir: str
           ) -> tuple[Path, Any]:
    folder = tmp_path_factory.mktemp("multi")
    path = folder / "two.yaml"
    path.write_text(yaml.safe_dump(SCENARIO), encoding="utf-8")
    sc = load_scenario(path)
    plan = solve(sc, executor="serial", cache_dir=capacity_cache_dir)
    out = folder / "plan.json"
    out.write_text(json.dumps(plan.to_dict(), indent=1), encoding="utf-8")
    return out, plan


def test_joint_plan_keeps_to_the_h100s_that_exist(solved: tuple[Path, Any]) -> None:
    _path, plan = solved
    assert plan.status.value in ("optimal", "feasible")
    assert plan.verified
    assert _h100s(plan.fleet) <= 2
    assert all(c.met for c in plan.classes)


def test_apart_the_models_need_more_h100s(solved: tuple[Path, Any],
                                          capacity_cache_dir: str) -> None:
    """The two one-model plans (each within the same availability) together hold more H100s
    than exist: what the joint plan prevents."""
    sc = load_scenario(solved[0].parent / "two.yaml")
    apart = [solve(sc.for_model(m), executor="serial", cache_dir=capacity_cache_dir)
             for m in (LLAMA, QWEN)]
    assert all(p.verified for p in apart)
    assert all(e.model is None for p in apart for e in p.fleet)  # one-model plans as ever
    assert sum(_h100s(p.fleet) for p in apart) > 2


def test_plan_names_each_model(solved: tuple[Path, Any]) -> None:
    path, _plan = solved
    data = json.loads(path.read_text(encoding="utf-8"))
    for e in data["fleet"]:
        assert e["model"] in (LLAMA, QWEN)
        assert e["pool"].startswith(f"{e['model']}/{e['config']}@")
    models = {c["name"]: c["model"] for c in data["classes"]}
    assert models == {"chat": LLAMA, "agent": QWEN}
    for c in data["classes"]:  # each class is routed to its own model's pools only
        assert all(k.startswith(f"{c['model']}/") for k in c["split"])
    again = load_plan(path)
    assert [e.model for e in again.fleet] == [e["model"] for e in data["fleet"]]
    assert json.loads(json.dumps(again.to_dict())) == {
        k: v for k, v in data.items() if k in again.to_dict()}


def test_replayed_on_another_seed_every_slo_holds(solved: tuple[Path, Any]) -> None:
    path, _plan = solved
    other = {**SCENARIO, "sim": {**SCENARIO["sim"], "seed": 2}}
    target = path.parent / "seed2.yaml"
    target.write_text(yaml.safe_dump(other), encoding="utf-8")
    res = simulate(load_scenario(target), plan=path)
    assert {c.name for c in res.classes} == {"chat", "agent"}
    assert all(c.slo_met for c in res.classes)
    assert not res.overloaded
    assert sum(p.count for p in res.pools if p.config == "1xH100-PCIe") <= 2


def test_report_has_a_table_per_model_and_the_fleets_totals(solved: tuple[Path, Any],
                                                             cli: Any, tmp_path: Path) -> None:
    import re

    path, plan = solved
    out = tmp_path / "r.html"
    res = cli("report", str(path), "--scenario", str(path.parent / "two.yaml"),
              "--out", str(out))
    assert res.exit_code == 0, res.stderr
    page = out.read_text(encoding="utf-8")
    table = page[page.index('id="models-table"'):]
    table = table[:table.index("</table>")]
    rows = {cells[0]: cells for cells in (
        [re.sub("<[^>]+>", "", c).strip() for c in re.findall(r"<t[dh][^>]*>(.*?)</t[dh]>", r)]
        for r in re.findall(r"<tr>(.*?)</tr>", table, re.S)) if cells}
    # the scenario's price for the H100 ($0.5 per GPU-hour), the catalog's $0.25 for the 4090
    price = {"1xH100-PCIe": 0.5, "1xRTX-4090": 0.25}
    for model, cls in ((LLAMA, "chat"), (QWEN, "agent")):
        mine = [e for e in plan.fleet if e.model == model]
        assert rows[model][1] == cls and rows[model][2] == "yes"
        assert int(rows[model][4]) == sum(e.count for e in mine)
        assert rows[model][6] == f"${sum(e.count * price[e.config] for e in mine):,.2f}"
    assert int(rows["fleet"][1]) == sum(e.count for e in plan.fleet)
    assert rows["fleet"][3] == f"${plan.cost_per_hour_usd:,.2f}"
    diff = cli("report", str(path), str(path), "--out", str(tmp_path / "d.html"))
    assert diff.exit_code == 2 and "not supported yet for plans of several models" in diff.stderr


def test_each_class_reaches_its_own_models_replicas_only(solved: tuple[Path, Any]) -> None:
    """The scenario's own fleet under least-outstanding routing (every pool eligible in a
    one-model scenario): each model's pools receive exactly its classes' requests, and the
    models' totals add up to the fleet's."""
    sc = load_scenario(solved[0].parent / "two.yaml").with_updates(fleet=[
        {"model": QWEN, "config": "1xH100-PCIe", "count": 2},
        {"model": LLAMA, "config": "1xH100-PCIe", "count": 1},
        {"model": LLAMA, "config": "1xRTX-4090", "count": 6}])
    res = simulate(sc)
    by = {m.model: m for m in res.models}
    requests = {c.name: c.requests for c in res.classes}
    assert by[LLAMA].classes == ("chat",) and by[QWEN].classes == ("agent",)
    assert by[LLAMA].requests == requests["chat"] > 0
    assert by[QWEN].requests == requests["agent"] > 0
    assert (by[LLAMA].replicas, by[QWEN].replicas) == (7, 2)
    assert sum(m.cost_per_hour_usd for m in res.models) == pytest.approx(
        res.account.cost_per_hour_usd)
    assert sum(m.g_co2_per_hour for m in res.models) == pytest.approx(
        res.account.g_co2_per_hour)
    # $0.5 per H100-hour (the scenario's price) x 3 + 6 RTX 4090s at the catalog's $0.25
    assert res.account.cost_per_hour_usd == pytest.approx(3 * 0.5 + 6 * 0.25)
    assert "models" in res.to_dict()


def test_one_h100_for_two_models_is_infeasible(capacity_cache_dir: str) -> None:
    """A replica serves one model: two models at rates one H100 each carries need 2 H100s,
    and with 1 available there is no plan; the explanation names availability and 2."""
    from fleetplan.scenario import scenario_from_dict

    data = {**SCENARIO, "candidates": ["1xH100-PCIe"], "availability": {"H100-PCIe": 1},
            "classes": [{**c, "rate_rps": 10} for c in SCENARIO["classes"]]}
    plan = solve(scenario_from_dict(data), executor="serial", cache_dir=capacity_cache_dir)
    assert plan.status.value == "infeasible" and not plan.fleet
    assert "availability" in (plan.binding or "")
    assert "H100-PCIe >= 2" in (plan.relaxation or "")
    assert {c.model for c in plan.classes} == {LLAMA, QWEN}


def test_an_infeasible_plan_lists_each_class_on_its_own_models_pools(
        tmp_path: Path, capacity_cache_dir: str) -> None:
    """An infeasible plan lists what each candidate could carry of each class; in a plan of
    several models a class is served by its own model only, so another model's pools are not
    listed for it (they showed as '0.00 req/s', as if that model could not meet the SLO)."""
    path = tmp_path / "poor.yaml"
    path.write_text(yaml.safe_dump({**SCENARIO, "budget_usd_per_hour": 0.5}), encoding="utf-8")
    plan = solve(load_scenario(path), executor="serial", cache_dir=capacity_cache_dir)
    assert plan.status.value == "infeasible"
    models = {c["name"]: c["model"] for c in SCENARIO["classes"]}
    assert {(c.class_name, c.pool.split("/")[0]) for c in plan.capacities} == {
        (name, m) for name, m in models.items()}
    assert len(plan.capacities) == 2 * 2  # each class on its model's two candidates
