"""Spot (interruptible) consumer pools as candidates beside on-demand ones (issue 13).

A candidate names its market; the MILP may open both markets of one configuration and split a
class over them. Spot pools fail at the spot rate (their own ``config@spot`` entry, else the
bundled spot default) and cost the spot price (the catalog's ``spot`` row, else the discount).
Pool names of the default market do not change; a spot pool is ``config@region~spot/tier``.
"""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from optimize_helpers import H100, R2, synth_problem

from fleetplan.errors import InputError
from fleetplan.optimize.milp import solve_problem
from fleetplan.optimize.plan import FleetEntry, Plan
from fleetplan.optimize.problem import Tier
from fleetplan.optimize.solvers import SolverSettings
from fleetplan.report.plan_file import plan_from_dict
from fleetplan.scenario import Scenario, scenario_from_dict
from fleetplan.scenario.fleet import parse_fleet, split_pool_name
from fleetplan.scenario.reliability import DEFAULTS, resolve, unavailability

ROOT = Path(__file__).resolve().parents[2]
EXACT = SolverSettings("cbc", time_limit_s=30, gap=0.0)


def _hybrid(candidates: list) -> dict:
    data = yaml.safe_load((ROOT / "examples" / "hybrid-churn.yaml").read_text())
    data["candidates"] = candidates
    data["sim"] = {"duration_s": 300, "warmup_s": 30, "seed": 7, "replications": 1}  # quick
    return data


BOTH = ["1xH100-PCIe", "2xRTX-4090", {"config": "2xRTX-4090", "market": "spot"}]


def test_default_market_pool_names_do_not_change_and_spot_ones_are_marked() -> None:
    tier = Tier(200.0)
    assert FleetEntry.of_pool("1xH100-PCIe@EU27/200ms", 2, tier).pool == "1xH100-PCIe@EU27/200ms"
    spot = FleetEntry.of_pool("2xRTX-4090@FRA~spot/200ms", 3, tier)
    assert (spot.config, spot.region, spot.market) == ("2xRTX-4090", "FRA", "spot")
    assert spot.pool == "2xRTX-4090@FRA~spot/200ms"
    assert spot.to_dict()["market"] == "spot"
    assert "market" not in FleetEntry.of_pool("2xRTX-4090@FRA/200ms", 3, tier).to_dict()
    assert split_pool_name("2xRTX-4090@EU27~spot") == ("2xRTX-4090", "EU27", "spot")
    pools = parse_fleet("4x2xRTX-4090@FRA~spot+1x1xH100-PCIe")
    assert [p.label for p in pools] == ["2xRTX-4090@FRA~spot", "1xH100-PCIe@EU27"]


def test_the_plan_reader_reads_the_market_back_and_checks_the_pool_name() -> None:
    entry = FleetEntry.of_pool("2xRTX-4090@EU27~spot/2000ms", 8, Tier(2000.0), spare=2)
    doc = {"status": "optimal", "fleet": [entry.to_dict()], "cost_per_hour_usd": 2.0,
           "cost_per_mtok_usd": 1.0, "g_co2_per_mtok": 1.0, "verified": True,
           "classes": [{"name": "batch", "rate_rps": 14, "slo_ttft_p99_ms": 2000,
                        "ttft_p99_ms": 1000, "met": True, "split": {entry.pool: 1.0}}],
           "solver": {"name": "cbc", "status": "optimal", "seconds": None, "gap": 0.01,
                      "rounds": 1, "time_limit_s": 10}}
    row = plan_from_dict(doc).fleet[0]
    assert (row.market, row.pool) == ("spot", "2xRTX-4090@EU27~spot/2000ms")
    assert Plan.from_dict(doc).fleet[0].scenario_pool()["market"] == "spot"
    doc["fleet"][0]["market"] = "on-demand"  # the name says spot: a broken file
    with pytest.raises(InputError, match=r"fleet\[0\]\.pool"):
        plan_from_dict(doc)
    doc["fleet"][0]["market"] = "preemptible"
    with pytest.raises(InputError, match=r"fleet\[0\]\.market"):
        plan_from_dict(doc)


def test_a_spot_pool_fails_at_the_spot_rate_unless_its_own_entry_says_otherwise() -> None:
    sc = Scenario.model_validate(_hybrid(BOTH))
    spot = resolve(sc.reliability, "2xRTX-4090", "RTX-4090", 2, "spot")
    on_demand = resolve(sc.reliability, "2xRTX-4090", "RTX-4090", 2, None)
    assert on_demand is not None and on_demand.failures_per_hour == 0.05  # the RTX-4090 entry
    assert spot is not None and spot.replace_s == 600.0
    assert spot.failures_per_hour == 2 * DEFAULTS[("consumer", "spot")].failures_per_gpu_hour
    assert spot.price_factor == 0.5 and on_demand.price_factor == 1.0
    data = _hybrid(BOTH)
    data["reliability"]["2xrtx-4090@spot"] = {"failures_per_replica_hour": 0.3,
                                             "spot_discount": 0.7}
    sc = Scenario.model_validate(data)
    assert "2xRTX-4090@spot" in sc.reliability
    own = resolve(sc.reliability, "2xRTX-4090", "RTX-4090", 2, "spot")
    assert own is not None and own.failures_per_hour == 0.3
    assert own.price_factor == pytest.approx(0.3)


def test_a_reliability_key_with_an_unknown_market_is_one_line() -> None:
    data = _hybrid(BOTH)
    data["reliability"]["RTX-4090@reserved"] = {}
    with pytest.raises(InputError) as exc:
        scenario_from_dict(data, "s.yaml")
    msg = str(exc.value)
    assert "s.yaml" in msg and "RTX-4090@reserved" in msg and "\n" not in msg


spot_law = settings(max_examples=8, deadline=None, derandomize=True,
                    suppress_health_check=[HealthCheck.too_slow])


@spot_law
@given(rate=st.floats(2.0, 30.0), discount=st.floats(0.0, 0.9),
       u=st.sampled_from([0.0, 0.01, 0.05, 0.2]))
def test_offering_spot_in_addition_never_makes_the_plan_dearer(rate: float, discount: float,
                                                                u: float) -> None:
    base = synth_problem([("chat", 2.0, 150.0, 1.0), ("batch", rate, 2000.0, 1.0)],
                         pools=(H100, replace(R2, unavailability=unavailability(0.05, 600))))
    spot = replace(R2, market="spot", unavailability=u,
                   price_usd_per_hour=R2.price_usd_per_hour * (1 - discount))
    alone, both = solve_problem(base, EXACT), solve_problem(
        base.replace(pools=(*base.pools, spot)), EXACT)
    assert alone.has_plan and both.has_plan
    assert both.cost_per_day_usd <= alone.cost_per_day_usd + 1e-6


def test_both_markets_solve_to_the_cheaper_mix_verified_with_churn_and_replayed(
        tmp_path: Path, capacity_cache_dir: str, cli) -> None:
    from fleetplan import solve

    sc_both = Scenario.model_validate(_hybrid(BOTH))
    sc_od = Scenario.model_validate(_hybrid(["1xH100-PCIe", "2xRTX-4090"]))
    both = solve(sc_both, executor="serial", cache_dir=capacity_cache_dir, max_trims=0)
    od = solve(sc_od, executor="serial", cache_dir=capacity_cache_dir, max_trims=0)
    assert both.verified and od.verified
    # spot costs half at four times the churn: the spares it needs cost less than the discount
    assert both.cost_per_hour_usd < od.cost_per_hour_usd
    spot = [e for e in both.fleet if e.market == "spot"]
    assert spot and all(e.pool.startswith("2xRTX-4090@EU27~spot/") for e in spot)
    assert all(e.spare and e.spare > 0 for e in spot)
    assert any(n.startswith("spot: 2xRTX-4090@EU27~spot at $") for n in both.notes)
    # what the terminal shows first says so in a planner's words: the spot price and, per spot
    # pool, how many of its replicas are spares (the fleet's own figures)
    from fleetplan._notes import headline, pool_names

    shown = " ".join(headline(both.notes, pool_names(both.fleet)))
    assert "2xRTX-4090 spot: $0.25 per replica-hour" in shown
    for e in spot:
        are = "is a spare" if e.spare == 1 else "are spares"
        assert f"{e.spare} of its {e.count} replicas {are}" in shown
    # the on-demand answer's names are today's
    assert {e.pool for e in od.fleet} <= {"1xH100-PCIe@EU27/150ms", "2xRTX-4090@EU27/2000ms"}
    assert all("market" not in e for e in od.to_dict()["fleet"])
    assert not any("~spot" in n or n.startswith("spot:") for n in od.notes)
    # simulate --plan replays the spot pools with their spot price and failures
    scen = tmp_path / "both.yaml"
    scen.write_text(yaml.safe_dump(_hybrid(BOTH), sort_keys=False))
    plan = tmp_path / "plan.json"
    plan.write_text(json.dumps(both.to_dict(timing=False)))
    res = cli("simulate", str(scen), "--plan", str(plan), "--format", "json")
    assert res.exit_code == 0, res.stderr
    out = json.loads(res.stdout)
    pools = {p["label"]: p for p in out["pools"]}
    for e in spot:
        p = pools[e.pool]
        assert p["count"] == e.count
        assert p["price_usd_per_gpu_hour"] == pytest.approx(0.25 * 0.5)  # catalog x (1 - 0.5)
        assert f"pool {e.pool}: 0.2 failures per replica-hour" in " ".join(out["notes"])
    assert all(c["slo_met"] for c in out["classes"])


def test_a_catalog_spot_row_prices_spot_pools_unless_a_discount_is_given(tmp_path: Path) -> None:
    from fleetplan.fleet.pools import build_pools
    from fleetplan.optimize.problem import PlanProblem
    from fleetplan.optimize.problem import Pool as Candidate
    from fleetplan.optimize.solve import with_reliability

    cat = tmp_path / "cat"
    cat.mkdir()
    (cat / "prices.csv").write_text("gpu,market,price_usd_per_gpu_hour,price_date,source\n"
                                    "RTX-4090,spot,0.09,2025-06,a marketplace's spot listing\n")
    data = _hybrid(BOTH)
    data["catalog"] = str(cat)
    data["fleet"] = [{"config": "2xRTX-4090", "count": 2, "market": "spot"},
                     {"config": "2xRTX-4090", "count": 2}]
    sc = scenario_from_dict(data)
    spot, od = build_pools(sc, sc.fleet or [])
    cand = Candidate("2xRTX-4090", "EU27", "RTX-4090", 2, 0.5, 900.0, 242.0, market="spot")
    base = synth_problem([("batch", 4.0, 2000.0, 1.0)], pools=(cand,))
    priced = with_reliability(sc, base).pools[0]
    data["reliability"]["2xRTX-4090@spot"] = {"spot_discount": 0.6}
    discounted = with_reliability(scenario_from_dict(data), base).pools[0]
    assert spot.label == "2xRTX-4090@EU27~spot" and od.label == "2xRTX-4090@EU27"
    assert spot.economics.price_usd_per_gpu_hour == 0.09
    assert "a marketplace's spot listing" in spot.economics.price_source
    assert od.economics.price_usd_per_gpu_hour == 0.25  # the on-demand pool: the catalog's
    assert isinstance(base, PlanProblem) and priced.price_usd_per_hour == pytest.approx(0.18)
    assert discounted.price_usd_per_hour == pytest.approx(0.5 * 0.4)  # the given discount wins
    assert priced.unavailability == pytest.approx(unavailability(0.2, 600))


def test_the_report_prices_a_spot_pool_as_the_plan_does() -> None:
    """``fleetplan report`` reads a pool's price by configuration, region *and* market: a spot
    pool shows the spot price (the catalog price less the named discount), an on-demand pool of
    the same configuration the catalog price."""
    from fleetplan.catalog import bundled_catalog
    from fleetplan.report.context import build_context

    spot = FleetEntry.of_pool("2xRTX-4090@EU27~spot/2000ms", 4, Tier(2000.0))
    plain = FleetEntry.of_pool("2xRTX-4090@EU27/2000ms", 2, Tier(2000.0))
    doc = {"status": "optimal", "fleet": [spot.to_dict(), plain.to_dict()],
           "cost_per_hour_usd": 2.0, "cost_per_mtok_usd": 1.0, "g_co2_per_mtok": 1.0,
           "verified": True,
           "classes": [{"name": "batch", "rate_rps": 14, "slo_ttft_p99_ms": 2000,
                        "ttft_p99_ms": 1000, "met": True,
                        "split": {spot.pool: 0.5, plain.pool: 0.5}}],
           "solver": {"name": "cbc", "status": "optimal", "seconds": None, "gap": 0.01,
                      "rounds": 1, "time_limit_s": 10}}
    sc = scenario_from_dict(_hybrid(BOTH))
    plan = plan_from_dict(doc)
    ctx = build_context(plan, sc, "hybrid-churn.yaml", validation_doc=Path("/nonexistent"))
    catalog = bundled_catalog().price("RTX-4090", sc.market,
                                      sc.prices_usd_per_gpu_hour).price_usd_per_gpu_hour
    by_market = {a.market: a for a in ctx.pools}
    assert set(by_market) == {"spot", None}
    assert by_market[None].price_usd_per_gpu_hour == pytest.approx(catalog)
    assert by_market["spot"].price_usd_per_gpu_hour == pytest.approx(catalog * 0.5)
    assert "spot" in by_market["spot"].price_source
    assert ctx.pool(plan.fleet[0]) is by_market["spot"]
    assert ctx.pool(plan.fleet[1]) is by_market[None]



def test_the_spares_note_says_one_spare_in_the_singular() -> None:
    """'1 of its 7 replicas is a spare', '2 of its 8 replicas are spares'."""
    from types import SimpleNamespace

    from fleetplan.optimize.plan_build import _market_notes

    pools = [SimpleNamespace(key="2xRTX-4090@EU27", config="2xRTX-4090", market="on-demand",
                             unavailability=0.00826),
             SimpleNamespace(key="1xRTX-4090@EU27", config="1xRTX-4090", market="on-demand",
                             unavailability=0.0323)]
    (note,) = _market_notes(None, pools,  # type: ignore[arg-type]  # no spot pool reads it
                            {"2xRTX-4090@EU27/2000ms": 7, "1xRTX-4090@EU27/300ms": 8},
                            {"2xRTX-4090@EU27/2000ms": 1, "1xRTX-4090@EU27/300ms": 2})
    text = str(note)
    assert "2xRTX-4090 (2000ms tier): 1 of its 7 replicas is a spare (" in text
    assert "1xRTX-4090 (300ms tier): 2 of its 8 replicas are spares (" in text


def test_spares_of_a_configuration_at_several_tiers_say_which_replicas_they_cover() -> None:
    """The MILP sizes a configuration's churn spares for the working replicas of all its tiers
    and puts them in the strictest tier: '2 of its 4' alone would read as two spares for two
    working replicas, which the binomial rule never asks for at a 1.64% downtime."""
    from types import SimpleNamespace

    from fleetplan.optimize.plan_build import _market_notes
    from fleetplan.scenario.reliability import spares_needed

    u = 0.0164
    pools = [SimpleNamespace(key="1xRTX-4090@EU27", config="1xRTX-4090", market="on-demand",
                             unavailability=u)]
    counts = {"1xRTX-4090@EU27/250ms": 4, "1xRTX-4090@EU27/1500ms": 7,
              "1xRTX-4090@EU27/8000ms": 1}
    (note,) = _market_notes(None, pools,  # type: ignore[arg-type]  # no spot pool reads it
                            counts, {"1xRTX-4090@EU27/250ms": 2})
    text = str(note)
    assert ("1xRTX-4090 (250ms tier): 2 of its 4 replicas are spares for the 10 working "
            "replicas of its 3 tiers, held in the strictest (a replica is down") in text
    # the figures the note states are the rule's: 2 spares for 10 working, 1 for the 2 of the
    # 250 ms tier alone
    assert spares_needed(10, u, 0.01) == 2 and spares_needed(2, u, 0.01) == 1


def test_a_candidate_without_a_market_takes_its_reliability_entrys_spot_in_name_too() -> None:
    """The documented default market of a candidate or fleet pool is its ``reliability:``
    entry's: under a ``market: spot`` entry it was priced and failed as spot but named, noted
    and learned about as on-demand (``2xRTX-4090@EU27``); it is a spot pool throughout."""
    data = _hybrid(["1xH100-PCIe", "2xRTX-4090"])
    data["reliability"]["RTX-4090"] = {"failures_per_replica_hour": 0.1, "market": "spot"}
    data["fleet"] = [{"config": "2xRTX-4090", "count": 3}, {"config": "1xH100-PCIe", "count": 1}]
    sc = Scenario.model_validate(data)
    assert [c.market for c in sc.candidates or ()] == [None, "spot"]
    assert [p.label for p in sc.fleet or ()] == ["2xRTX-4090@EU27~spot", "1xH100-PCIe@EU27"]
    # a copy keeps it (what solve and simulate re-validate)
    assert [p.label for p in sc.with_updates(redundancy=0).fleet or ()][0] == (
        "2xRTX-4090@EU27~spot")
    # listed again as spot, the same pool twice: refused, saying which entry made it spot
    data["candidates"] = ["2xRTX-4090", {"config": "2xRTX-4090", "market": "spot"}]
    with pytest.raises(InputError) as exc:
        scenario_from_dict(data, "s.yaml")
    msg = str(exc.value)
    assert ("candidates[1]: 2xRTX-4090 in EU27 on market spot is listed in candidates[0] too "
            "(candidates[0] names no market and takes reliability.RTX-4090's") in msg
    assert "market: on-demand" in msg and "\n" not in msg
    # named on-demand, the two markets are offered side by side
    data["candidates"] = [{"config": "2xRTX-4090", "market": "on-demand"},
                          {"config": "2xRTX-4090", "market": "spot"}]
    both = Scenario.model_validate(data)
    on_demand = resolve(both.reliability, "2xRTX-4090", "RTX-4090", 2, "on-demand")
    assert on_demand is not None and on_demand.price_factor == 1.0


def test_a_churn_note_says_where_its_failure_rate_comes_from() -> None:
    """A spot pool of a GPU whose block entry is on-demand fails at the bundled spot default:
    its churn note says so instead of '(reliability block)'."""
    from types import SimpleNamespace

    from fleetplan.optimize.plan_build import _rate_source

    sc = Scenario.model_validate(_hybrid(BOTH))  # RTX-4090: 0.05/h, on-demand
    pool = SimpleNamespace(config="2xRTX-4090", gpu="RTX-4090", market="spot")
    assert _rate_source(sc, pool) == ("the bundled spot default of consumer GPUs, "
                                      "docs/reliability.md")
    assert _rate_source(sc, SimpleNamespace(config="2xRTX-4090", gpu="RTX-4090",
                                            market=None)) == "reliability block"


def test_a_split_key_naming_no_market_still_finds_a_pool_made_spot_by_its_entry() -> None:
    """A scenario's split names '2xRTX-4090@EU27/2000ms'; under a ``market: spot`` entry that
    pool is '2xRTX-4090@EU27~spot/2000ms'. A key without '~spot' names either market's pool,
    as a key without a tier already did."""
    data = _hybrid(["1xH100-PCIe", "2xRTX-4090"])
    data["reliability"]["RTX-4090"] = {"market": "spot"}
    data["routing"] = "planned"
    data["fleet"] = [{"config": "2xRTX-4090", "count": 3, "tier_ttft_p99_ms": 2000},
                     {"config": "1xH100-PCIe", "count": 1, "tier_ttft_p99_ms": 150}]
    data["classes"][0]["split"] = {"1xH100-PCIe@EU27/150ms": 1.0}
    data["classes"][1]["split"] = {"2xRTX-4090@EU27/2000ms": 1.0}
    sc = Scenario.model_validate(data)
    assert [p.label for p in sc.fleet or ()][0] == "2xRTX-4090@EU27~spot/2000ms"
    from fleetplan.scenario.fleet import match_pools

    assert match_pools("2xRTX-4090@EU27/2000ms", sc.fleet or ()) == [0]
    assert match_pools("2xRTX-4090@EU27~spot/2000ms", sc.fleet or ()) == [0]
