"""Churn in the fleet simulator: replicas fail and are replaced, requests are re-sent or lost.

Without a reliability block (or with failure rates of 0) a simulation is what it was; with one,
failures come from their own seeded stream (same seed, same bytes), the re-sent requests keep
their first send, and a pool that is never up loses its requests, which enter the P99.
"""

from __future__ import annotations

import json

import pytest
from fleet_cases import base_dict, make, refusal

from fleetplan.fleet import simulate

CHURN = ("requests_retried", "requests_lost")


def _strip(d: dict) -> dict:
    d = json.loads(json.dumps(d))
    for c in d["classes"]:
        for k in CHURN:
            c.pop(k, None)
    for p in d["pools"]:
        p.pop("availability", None)
    d["notes"] = [n for n in d["notes"] if not n.startswith("pool ") or "failure" not in n
                  and "no failures" not in n]
    d["notes_detail"] = [n for n in d["notes_detail"] if n["text"] in d["notes"]]
    return d


SHORT = {"duration_s": 40, "warmup_s": 5, "seed": 3, "replications": 1}


def test_no_block_has_no_churn_fields_and_zero_rates_change_nothing() -> None:
    plain = simulate(make(sim=SHORT)).to_dict()
    assert all(k not in c for c in plain["classes"] for k in CHURN)
    assert all("availability" not in p for p in plain["pools"])
    zero = simulate(make(sim=SHORT, reliability={"RTX-4090": {"failures_per_replica_hour": 0,
                                                              "replace_s": 600}})).to_dict()
    assert [c["requests_retried"] for c in zero["classes"]] == [0, 0]
    assert [p["availability"] for p in zero["pools"]] == [1.0, 1.0]
    assert _strip(zero) == _strip(plain)


def test_failures_retry_requests_and_cut_availability_deterministically() -> None:
    sc = make(reliability={"2xRTX-4090": {"failures_per_replica_hour": 60, "replace_s": 20}},
              sim={"duration_s": 200, "warmup_s": 10, "seed": 5, "replications": 2})
    a = simulate(sc)
    assert json.dumps(a.to_dict()) == json.dumps(simulate(sc).to_dict())
    by = {p.config: p for p in a.pools}
    assert by["1xH100-PCIe"].availability == 1.0
    # steady state: down 60 * 20 / 3600 / (1 + that) = 25% of the time; two replicas, two runs
    assert 0.55 < by["2xRTX-4090"].availability < 0.9
    assert sum(c.requests_retried for c in a.classes) > 0
    # least-outstanding finds another replica up: nothing lost, every request finished
    assert all(c.requests_lost == 0 and c.unfinished == 0 for c in a.classes)


def test_a_pool_never_up_loses_its_requests_and_they_count_in_the_p99() -> None:
    d = base_dict(fleet=[{"config": "2xRTX-4090", "count": 1}],
                  reliability={"RTX-4090": {"failures_per_replica_hour": 100, "replace_s": 3600}},
                  sim={"duration_s": 60, "warmup_s": 5, "seed": 1, "replications": 1})
    for c in d["classes"]:
        c.pop("slo")
    res = simulate(make(**{k: v for k, v in d.items() if k != "model"}))
    lost = sum(c.requests_lost for c in res.classes)
    assert lost > 0
    worst = max(c.ttft_p99_ms for c in res.classes)
    assert worst > 1000.0  # censored waits of lost requests, not the ~100 ms of a live replica


def test_reliability_block_is_checked_with_one_line() -> None:
    bad = refusal(base_dict(reliability={"RTX-4091": {}}))
    assert "reliability" in bad and "RTX-4091" in bad
    bad = refusal(base_dict(reliability={"RTX-4090": {"failures_per_replica_hour": -1}}))
    assert "failures_per_replica_hour" in bad
    ok = make(reliability={"rtx-4090": {}, "2xrtx-4090": {"market": "spot"}}).reliability
    assert ok is not None and set(ok) == {"RTX-4090", "2xRTX-4090"}


def test_spot_entries_fail_more_and_cost_less() -> None:
    on = make(reliability={"RTX-4090": {}})
    spot = make(reliability={"RTX-4090": {"market": "spot", "spot_discount": 0.6}})
    a, b = ({p.config: p for p in simulate(s).pools}["2xRTX-4090"] for s in (on, spot))
    assert b.price_usd_per_gpu_hour == pytest.approx(a.price_usd_per_gpu_hour * 0.4)
    assert "spot: 60% off" in b.price_source
    rel = spot.reliability["RTX-4090"] if spot.reliability else None
    assert rel is not None and rel.rate_per_hour("RTX-4090", 2) > (
        on.reliability["RTX-4090"].rate_per_hour("RTX-4090", 2) if on.reliability else 0)
    bad = refusal(base_dict(reliability={"RTX-4090": {"spot_discount": 0.5}}))
    assert "spot_discount" in bad and "market: spot" in bad
