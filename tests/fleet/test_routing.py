"""Routing policies: the registry, each policy's rule, and each policy inside a simulation."""

from __future__ import annotations

import pytest
from fleet_cases import MODEL, base_dict, make

from fleetplan.errors import UnknownNameError
from fleetplan.fleet import ROUTERS, Router, RoutingContext, get_router, register_router, simulate
from fleetplan.fleet.pools import unloaded_ttft_s
from fleetplan.replica.params import replica_params


def _ctx(pools: list[int], ncls: int = 1, **kw) -> RoutingContext:
    out = kw.pop("outstanding", [0] * len(pools))
    elig = kw.pop("eligible", [list(range(len(pools)))] * ncls)
    return RoutingContext(replica_pool=pools, eligible=elig, outstanding=out, **kw)


def test_registry_refuses_duplicates_and_lists_valid_names() -> None:
    assert {"round-robin", "least-outstanding", "slo-aware", "planned"} <= set(ROUTERS)
    with pytest.raises(ValueError, match="already registered"):
        register_router("round-robin")(type("Again", (Router,), {}))
    with pytest.raises(UnknownNameError, match="valid: least-outstanding, planned, round-robin"):
        get_router("random")


def test_make_router_hands_the_policy_its_parameters() -> None:
    from fleetplan.fleet.routing import make_router

    spec = make(routing={"policy": "round-robin"}).routing
    r = make_router(spec, _ctx([0, 1]))
    assert type(r) is ROUTERS["round-robin"] and r.params == spec
    by_name = make_router("least-outstanding", _ctx([0, 1]))
    assert by_name.params.policy == "least-outstanding"
    with pytest.raises(UnknownNameError, match="valid: least-outstanding"):
        make_router("random", _ctx([0, 1]))


def test_round_robin_cycles_per_class() -> None:
    r = get_router("round-robin")(_ctx([0, 0, 1], ncls=2, eligible=[[0, 1, 2], [2, 1]]))
    assert [r.route(0, 10) for _ in range(4)] == [0, 1, 2, 0]
    assert [r.route(1, 10) for _ in range(3)] == [2, 1, 2]


def test_least_outstanding_takes_the_emptiest_and_rotates_ties() -> None:
    out = [3, 1, 1, 2]
    r = get_router("least-outstanding")(_ctx([0, 0, 1, 1], outstanding=out))
    assert r.route(0, 10) == 1
    assert r.route(0, 10) == 1  # start 1: replica 1 first among the tied
    assert r.route(0, 10) == 2  # start 2: replica 2 first among the tied
    out[:] = [0, 5, 5, 5]
    assert r.route(0, 10) == 0


def test_planned_deals_exact_shares_then_least_outstanding_inside() -> None:
    out = [0, 0, 0]
    r = get_router("planned")(_ctx([0, 1, 1], outstanding=out, split=[[0.25, 0.75]]))
    picks = [r.route(0, 10) for _ in range(100)]
    assert sum(p == 0 for p in picks) == 25
    out[1] = 4
    assert {r.route(0, 10) for _ in range(8)} <= {0, 2}


def test_slo_aware_prefers_then_spills_and_keeps_pins() -> None:
    pred = {0: 0.05, 1: 0.05, 2: 0.05}

    def predict(rep: int, tokens: int) -> float:
        return pred[rep]

    # pool 0 (replica 0, fast), pool 1 (replicas 1-2, slow when unloaded)
    ctx = _ctx([0, 1, 1], ncls=3, eligible=[[0, 1, 2], [0, 1, 2], [1, 2]],
               slo_ttft_s=[0.1, 1.0, 0.1], unloaded_ttft_s=[[0.04, 0.2]] * 3,
               predict_ttft_s=predict)
    r = get_router("slo-aware")(ctx)
    assert r.route(0, 10) == 0      # tight class: only the fast pool meets its SLO
    assert r.route(1, 10) in (1, 2)  # loose class leaves the fast pool to the tight one
    pred[0] = 0.5                   # the fast pool's queue would break the tight SLO
    assert r.route(0, 10) in (1, 2)  # spill: the other pool predicts better
    pred[1] = pred[2] = 0.9
    assert r.route(0, 10) == 0      # the others predict worse: stay
    pred[0] = pred[1] = pred[2] = 5.0
    assert r.route(2, 10) in (1, 2)  # class 2 is pinned to pool 1: never replica 0


@pytest.mark.parametrize("policy", ["round-robin", "least-outstanding", "slo-aware"])
def test_every_policy_serves_a_small_fleet(policy: str) -> None:
    res = simulate(make(routing=policy))
    assert not res.overloaded
    assert all(c.requests > 100 and c.unfinished == 0 for c in res.classes)
    assert sum(p.requests for p in res.pools) == sum(c.requests for c in res.classes)
    assert all(p.requests > 0 for p in res.pools)


def test_planned_routing_follows_the_split() -> None:
    d = base_dict(routing="planned")
    d["classes"][0]["split"] = {"1xH100-PCIe": 1.0}
    d["classes"][1]["split"] = {"1xH100-PCIe": 0.2, "2xRTX-4090@EU27": 0.8}
    res = simulate(make(**{k: d[k] for k in ("routing", "classes")}))
    chat, batch = res.classes
    assert chat.pools == {"1xH100-PCIe@EU27": 1.0}
    assert batch.pools["1xH100-PCIe@EU27"] == pytest.approx(0.2, abs=0.01)


def test_a_class_split_over_two_pools_is_judged_in_each_pool() -> None:
    """Under planned routing each pool's share of a class has its own P99s and verdict (what
    the closed loop blames a pool on): chat split evenly over an H100 and two 2 x RTX 4090
    replicas misses its 150 ms P99 TTFT on the RTX 4090s only, and the class's P99, a
    percentile of the two shares together, lies between the shares' P99s."""
    d = base_dict(routing="planned")
    d["classes"][0]["split"] = {"1xH100-PCIe": 0.5, "2xRTX-4090@EU27": 0.5}
    d["classes"][1]["split"] = {"2xRTX-4090@EU27": 1.0}
    res = simulate(make(**{k: d[k] for k in ("routing", "classes")}))
    chat, batch = res.classes
    h100, rtx = chat.by_pool["1xH100-PCIe@EU27"], chat.by_pool["2xRTX-4090@EU27"]
    assert chat.slo_met is False
    assert h100.met is True and h100.ttft_p99_ms <= 150 < rtx.ttft_p99_ms and rtx.met is False
    assert h100.ttft_p99_ms < chat.ttft_p99_ms < rtx.ttft_p99_ms
    assert h100.requests + rtx.requests == chat.requests
    assert set(batch.by_pool) == {"2xRTX-4090@EU27"} and batch.by_pool[
        "2xRTX-4090@EU27"].ttft_p99_ms == pytest.approx(batch.ttft_p99_ms)
    # in the JSON too: which pool misses
    assert res.to_dict()["classes"][0]["by_pool"]["2xRTX-4090@EU27"]["met"] is False


def test_slo_aware_routes_tiers_and_pins() -> None:
    fast = unloaded_ttft_s(replica_params(MODEL, "1xH100-PCIe"), 100)
    slow = unloaded_ttft_s(replica_params(MODEL, "2xRTX-4090"), 100)
    assert fast < slow
    d = base_dict(routing="slo-aware")
    d["classes"][0]["slo"]["ttft_p99_ms"] = (fast + slow) / 2 * 1e3
    res = simulate(make(routing="slo-aware", classes=d["classes"]))
    chat, batch = res.classes
    # idle, a 100-token prompt is faster on the H100 than on 2xRTX-4090; with an SLO between
    # the two, chat prefers the H100 and batch leaves it to chat
    assert chat.pools.get("1xH100-PCIe@EU27", 0) > 0.9
    assert batch.pools.get("2xRTX-4090@EU27", 0) > 0.9
    d = base_dict(routing="slo-aware")
    d["classes"][0]["pin"] = ["2xRTX-4090"]
    pinned = simulate(make(**{k: d[k] for k in ("routing", "classes")}))
    assert pinned.classes[0].pools == {"2xRTX-4090@EU27": 1.0}
