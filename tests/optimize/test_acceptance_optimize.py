"""Acceptance of issue 7 on the calibrated 14B model: the plans the tool finds, and why.

Every plan is the full pipeline: capacities at SLO on the calibrated replica model (short runs,
cached for the session), the MILP, and the closed loop's fleet simulation. Figures the tests
print (``-s``) are the ones docs/optimizer.md discusses.
"""

from __future__ import annotations

import pytest

from fleetplan.optimize import PlanStatus, solve
from fleetplan.scenario import scenario_from_dict

MODEL = "DeepSeek-R1-Distill-Qwen-14B"
H100 = "1xH100-PCIe"
RTX = ("2xRTX-4090", "4xRTX-4090", "8xRTX-4090")
FAST = {
    "sim": {"duration_s": 240, "warmup_s": 60, "seed": 7, "replications": 2},
    "capacity": {"duration_s": 120, "warmup_s": 30, "min_requests": 300, "seeds": 2},
}


def scenario(classes, **extra):
    return scenario_from_dict({"model": MODEL, "classes": classes, **FAST, **extra})


def one(slo_ms: float, rate: float = 16.0, **extra):
    return [{"name": "chat", "rate_rps": rate, "slo": {"ttft_p99_ms": slo_ms}, **extra}]


@pytest.fixture(scope="session")
def plan_of(capacity_cache_dir):
    """Solve once per scenario for the whole session (capacities shared through the cache)."""
    memo = {}

    def get(key, sc):
        if key not in memo:
            memo[key] = solve(sc, executor="local:2", cache_dir=capacity_cache_dir)
        return memo[key]

    return get


def configs(plan):
    return {e.config for e in plan.fleet}


def test_tight_slo_needs_h100_capacity_or_is_explained(plan_of):
    """P99 TTFT <= 55 ms at 16 req/s. No RTX 4090 configuration comes near (measured: none gets
    under 55 ms at any rate). On fresh prompts the calibrated H100 model's unloaded P99 is
    itself above 55 ms (the measured 45-56 ms came with prompts in the prefix cache), so the
    tool may answer infeasible, naming the SLO, the best candidate and the relaxation; if it
    finds a plan, it must be H100-only and verified."""
    plan = plan_of("tight55", scenario(one(55)))
    if plan.status is PlanStatus.infeasible:
        assert plan.binding == "classes[0].slo.ttft_p99_ms"
        assert "ttft_p99_ms 55 is below the best any candidate reaches" in plan.reason
        assert f"on {H100} at" in plan.reason
        assert plan.relaxation.startswith("classes[0].slo.ttft_p99_ms >= ")
        assert "stating classes[0].prefix_cache_hit lowers prefill time" in plan.reason
        print("55 ms:", plan.reason, "|", plan.relaxation)
    else:
        assert configs(plan) == {H100} and plan.verified


def test_tight_slo_with_cached_prompts_uses_several_h100s_only(plan_of):
    """The same 55 ms at 16 req/s with the prompts stated to be in the prefix cache
    (prefix_cache_hit 1.0, as in the measured repeated runs): only prefill of the last block
    remains, so P99 TTFT falls to the measured 45-50 ms and H100 replicas meet it. Decode then
    binds: a replica holds the SLO up to ~9 req/s with the bundled calibration."""
    plan = plan_of("tight55-cached", scenario(one(55, prefix_cache_hit=1.0)))
    cap = next(c.capacity_rps for c in plan.capacities if c.config == H100)
    assert plan.status is not PlanStatus.infeasible, (plan.reason, plan.relaxation)
    assert plan.verified and configs(plan) == {H100}
    (entry,) = plan.fleet
    chat = plan.classes[0]
    msg = (f"55 ms cached: {entry.count} x {H100}, {cap:.2f} req/s per replica, "
           f"${plan.cost_per_hour_usd}/h, simulated P99 {chat.ttft_p99_ms:.1f} ms")
    assert cap < 16.0 and entry.count >= 2 and entry.count * cap >= 16.0, msg
    assert chat.met and chat.ttft_p99_ms <= 55, msg
    print(msg)


def test_tight_but_reachable_slo_uses_several_h100s_only(plan_of):
    plan = plan_of("tight100", scenario(one(100)))
    assert plan.status is not PlanStatus.infeasible and plan.verified
    assert configs(plan) == {H100}
    (entry,) = plan.fleet
    cap = next(c.capacity_rps for c in plan.capacities if c.config == H100)
    # a replica sustains far less than the 16 req/s the measured burst was sent at
    assert cap < 16.0 / 3 and entry.count >= 3
    chat = plan.classes[0]
    assert chat.met and chat.ttft_p99_ms <= 100 and chat.split == {f"{H100}@EU27/100ms": 1.0}
    print(f"100 ms: {entry.count} x {H100}, ${plan.cost_per_hour_usd}/h, "
          f"{cap:.2f} req/s per replica, simulated P99 {chat.ttft_p99_ms:.1f} ms")


def test_loose_slo_uses_rtx_4090_and_beats_the_cheapest_h100_fleet(plan_of):
    plan = plan_of("loose", scenario(one(1000)))
    h100 = plan_of("loose-h100", scenario(one(1000), candidates=[{"config": H100}]))
    assert plan.verified and h100.verified
    assert configs(plan) & set(RTX)
    assert plan.cost_per_hour_usd < h100.cost_per_hour_usd
    ratio = plan.cost_per_hour_usd / h100.cost_per_hour_usd
    print(f"1000 ms: {[(e.count, e.config) for e in plan.fleet]} ${plan.cost_per_hour_usd}/h vs "
          f"H100-only {[(e.count, e.config) for e in h100.fleet]} "
          f"${h100.cost_per_hour_usd}/h: ratio {ratio:.2f}")


def test_a_plan_names_the_candidates_calibrated_with_flagged_runs(plan_of):
    # the 14B tensor-parallel RTX 4090 servers' low-rate runs are flagged (docs/validation.md:
    # 2x at 1 req/s, 4x and 8x at 1 and 4): a plan that may use them says so
    plan = plan_of("loose", scenario(one(1000)))
    (note,) = [n for n in plan.notes if "flagged and not fitted" in n]
    assert note.endswith("2xRTX-4090 (1 req/s); 4xRTX-4090 (1, 4 req/s); "
                         "8xRTX-4090 (1, 4 req/s)")
    (slow,) = [n for n in plan.notes if "expect token gaps below the plan's" in n]
    assert all(f"{c}xRTX-4090 (token gaps replayed up to" in slow for c in (2, 4, 8))
    h100 = plan_of("loose-h100", scenario(one(1000), candidates=[{"config": H100}]))
    assert not [n for n in h100.notes if "flagged" in n]


def test_a_plan_says_whose_p99_carries_a_first_token_delay(plan_of):
    """Issue 42: the tensor-parallel RTX 4090 servers' first-token delays are in every P99 a
    plan simulates; the plan names the servers and the delays their calibrations fitted."""
    from fleetplan.replica.calibration_file import load_calibration_file

    plan = plan_of("loose", scenario(one(1000)))
    (note,) = [n for n in plan.notes if "first tokens reach the client later" in n]
    for config in RTX:
        entry = load_calibration_file().entry(MODEL, config)
        assert entry is not None
        ms = entry.params.first_token_delay_s * 1e3
        assert f"{config} ({ms:.0f} ms median" in note
    assert H100 not in note
    h100 = plan_of("loose-h100", scenario(one(1000), candidates=[{"config": H100}]))
    assert not [n for n in h100.notes if "first tokens reach the client later" in n]


def test_chat_plus_batch_beats_every_single_tier_fleet(plan_of):
    classes = [{"name": "chat", "rate_rps": 8, "slo": {"ttft_p99_ms": 100}},
               {"name": "batch", "rate_rps": 8, "slo": {"ttft_p99_ms": 1000}}]
    mix = plan_of("mix", scenario(classes))
    assert mix.verified
    chat, batch = mix.classes
    assert chat.split == {f"{H100}@EU27/100ms": 1.0}
    assert sum(batch.split.values()) == pytest.approx(1.0)
    # batch may share an H100 run at either tier, but its pools are named by tier
    assert all(k.startswith(tuple(f"{c}@EU27/" for c in (H100, *RTX))) for k in batch.split)
    # single tier: one configuration for both classes (only H100 reaches the chat SLO)
    single = plan_of("mix-h100", scenario(classes, candidates=[{"config": H100}]))
    assert single.verified and mix.cost_per_hour_usd < single.cost_per_hour_usd
    print(f"chat+batch: {[(e.count, e.config) for e in mix.fleet]} ${mix.cost_per_hour_usd}/h "
          f"vs single tier ${single.cost_per_hour_usd}/h")


def test_carbon_cap_changes_the_plan_and_is_met(plan_of):
    cheapest = plan_of("loose", scenario(one(1000)))
    cap = round(cheapest.g_co2_per_mtok * 0.8, 3)
    green = plan_of("green", scenario(one(1000), carbon={"max_g_per_mtok": cap}))
    assert green.status is not PlanStatus.infeasible and green.verified
    assert green.g_co2_per_mtok <= cap
    assert configs(green) != configs(cheapest) or green.fleet != cheapest.fleet
    assert green.cost_per_hour_usd >= cheapest.cost_per_hour_usd
    print(f"carbon: cheapest {cheapest.g_co2_per_mtok:.1f} g/Mtok; cap {cap} -> "
          f"{[(e.count, e.config) for e in green.fleet]} {green.g_co2_per_mtok:.1f} g/Mtok "
          f"${green.cost_per_hour_usd}/h")


def test_impossible_carbon_cap_is_infeasible_with_the_reason(plan_of):
    plan = plan_of("no-carbon", scenario(one(1000), carbon={"max_g_per_mtok": 0.5}))
    assert plan.status is PlanStatus.infeasible and not plan.verified and not plan.fleet
    assert plan.binding == "carbon.max_g_per_mtok"
    assert plan.reason.startswith("carbon.max_g_per_mtok 0.5 is below the lowest carbon")
    assert "carbon.max_g_per_mtok >= " in plan.relaxation
