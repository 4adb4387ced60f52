"""Cost, energy and carbon: figures a reader can check by hand."""

from __future__ import annotations

import pandas as pd
import pytest
from fleet_cases import base_dict

from fleetplan.fleet import simulate
from fleetplan.fleet.accounting import (
    PoolEconomics,
    PowerModel,
    account,
    embodied_g_per_gpu_hour,
    power_model,
)
from fleetplan.profiles.store import ProfileStore
from fleetplan.scenario import scenario_from_dict


def test_account_by_hand() -> None:
    # 2 replicas of 2xRTX-4090 = 4 GPUs at $0.25, 25 W idle, 450 W busy, half utilized
    pool = PoolEconomics(label="2xRTX-4090@EU27", gpus=4, price_usd_per_gpu_hour=0.25,
                         price_source="x", power=PowerModel(25.0, 450.0, "x"),
                         grid_g_per_kwh=242.0, grid_source="x",
                         embodied_g_per_gpu_hour=120_000 / (4 * 8760), embodied_source="x")
    a = account([pool], [0.5], tokens_per_s=1000.0)
    assert a.cost_per_hour_usd == pytest.approx(1.0)
    assert a.pools[0].power_w == pytest.approx(4 * (25 + 425 * 0.5))        # 950 W
    assert a.energy_kwh_per_hour == pytest.approx(0.95)
    assert a.g_co2_operational_per_hour == pytest.approx(0.95 * 242)       # 229.9 g
    assert a.g_co2_embodied_per_hour == pytest.approx(4 * 120_000 / 35040)  # 13.70 g
    assert a.tokens_per_hour == 3.6e6
    assert a.cost_per_mtok_usd == pytest.approx(1.0 / 3.6)
    assert a.g_co2_per_mtok == pytest.approx((229.9 + 4 * 120_000 / 35040) / 3.6)
    with pytest.raises(ValueError, match="outside"):
        account([pool], [1.5], tokens_per_s=1.0)


def test_activity_mode_scales_with_the_power_activity_not_the_busy_share() -> None:
    # the same 4 GPUs, power that follows the work: engines busy all the time (1.0) but the
    # steps drew on average 40 % of the idle-to-TDP range
    pool = PoolEconomics(label="2xRTX-4090@EU27", gpus=4, price_usd_per_gpu_hour=0.25,
                         price_source="x", power=PowerModel(25.0, 450.0, "x", "activity"),
                         grid_g_per_kwh=242.0, grid_source="x",
                         embodied_g_per_gpu_hour=0.0, embodied_source="x")
    a = account([pool], [1.0], tokens_per_s=1000.0, activity=[0.4])
    assert a.pools[0].power_w == pytest.approx(4 * (25 + 425 * 0.4))        # 780 W
    assert a.pools[0].power_share == 0.4
    assert a.g_co2_operational_per_hour == pytest.approx(0.78 * 242)
    with pytest.raises(ValueError, match="power activity"):
        account([pool], [1.0], tokens_per_s=1.0)
    with pytest.raises(ValueError, match="outside"):
        account([pool], [1.0], tokens_per_s=1.0, activity=[-0.1])


def test_embodied_can_be_excluded_and_amortizes_over_the_lifetime() -> None:
    g4, src = embodied_g_per_gpu_hour("H100-PCIe", True, 4)
    g8, _ = embodied_g_per_gpu_hour("H100-PCIe", True, 8)
    assert g4 == pytest.approx(160_000 / (4 * 8760)) and g8 == pytest.approx(g4 / 2)
    assert "160 kg" in src
    assert embodied_g_per_gpu_hour("H100-PCIe", False, 4)[0] == 0.0


def test_power_sources_override_measured_datasheet() -> None:
    model = "DeepSeek-R1-Distill-Qwen-14B"
    sheet = power_model(model, "1xH100-PCIe", "H100-PCIe", 1)
    assert (sheet.idle_w, sheet.busy_w) == (50.0, 350.0) and "datasheet" in sheet.source
    store = ProfileStore(pd.DataFrame({"model": [model] * 2, "config": ["2xRTX-4090"] * 2,
                                       "gpu_avg_power_w": [600.0, 700.0]}))
    measured = power_model(model, "2xRTX-4090", "RTX-4090", 2, store)
    assert measured.busy_w == pytest.approx(325.0) and measured.source.startswith("measured")
    given = power_model(model, "2xRTX-4090", "RTX-4090", 2, store, {"RTX-4090": 300.0})
    assert given.busy_w == 300.0 and "scenario" in given.source
    # power that follows the work spans idle to TDP (or the override): a burst's measured mean
    # power is not the top of that range
    act = power_model(model, "2xRTX-4090", "RTX-4090", 2, store, mode="activity")
    assert (act.idle_w, act.busy_w, act.mode) == (25.0, 450.0, "activity")
    assert "ML.ENERGY" in act.source and "datasheet TDP 450 W" in act.source
    act_given = power_model(model, "2xRTX-4090", "RTX-4090", 2, store, {"RTX-4090": 300.0},
                            mode="activity")
    assert act_given.busy_w == 300.0 and "scenario" in act_given.source
    with pytest.raises(ValueError, match="watts"):
        power_model(model, "2xRTX-4090", "RTX-4090", 2, mode="watts")


def test_simulated_fleet_accounts_by_hand() -> None:
    # one H100 pool (2 replicas): $2.50 per GPU-hour given, power 700 W given (the study's
    # figure), idle 50 W, EU27 242 g/kWh, embodied 160 kg over 4 years; fixed 100 + 50 tokens
    d = base_dict(prices_usd_per_gpu_hour={"H100-PCIe": 2.5}, power_w_per_gpu={"H100-PCIe": 700},
                  fleet=[{"config": "1xH100-PCIe", "count": 2}], power={"model": "tdp"})
    d["classes"] = [{**d["classes"][0], "rate_rps": 0.5}]
    res = simulate(scenario_from_dict(d))
    pool, cls = res.pools[0], res.classes[0]
    u = pool.utilization
    assert 0.0 < u < 1.0
    watts = 2 * (50 + (700 - 50) * u)
    assert pool.power_w == pytest.approx(watts)
    out = res.to_dict()
    assert out["cost_per_hour_usd"] == pytest.approx(5.0)
    assert out["energy_kwh_per_hour"] == pytest.approx(watts / 1000)
    op = watts / 1000 * 242
    emb = 2 * 160_000 / (4 * 8760)
    assert out["g_co2_operational_per_hour"] == pytest.approx(op)
    assert out["g_co2_embodied_per_hour"] == pytest.approx(emb)
    assert out["g_co2_per_hour"] == pytest.approx(op + emb)
    # tokens: every measured request is 150 tokens; 2 replications of 80 s each
    tokens_per_s = cls.requests * 150 / (2 * 80.0)
    mtok_per_hour = tokens_per_s * 3600 / 1e6
    assert out["tokens_per_s"] == pytest.approx(tokens_per_s)
    assert out["cost_per_mtok_usd"] == pytest.approx(5.0 / mtok_per_hour)
    assert out["g_co2_per_mtok"] == pytest.approx((op + emb) / mtok_per_hour)
    assert "power_w_per_gpu 700 W (scenario)" in pool.power_source
    assert pool.price_source.startswith("user")
    assert pool.power_model == "tdp" and pool.power_share == u


def test_simulated_fleet_charges_the_steps_activity_by_default() -> None:
    # the same fleet, power that follows the work: idle + (700 - 50) W x the pool's power
    # activity, which lies below its busy share (a step draws at most the top of the range)
    d = base_dict(power_w_per_gpu={"H100-PCIe": 700},
                  fleet=[{"config": "1xH100-PCIe", "count": 2}])
    d["classes"] = [{**d["classes"][0], "rate_rps": 0.5}]
    res = simulate(scenario_from_dict(d))
    pool = res.pools[0]
    assert pool.power_model == "activity"
    assert 0.0 < pool.power_activity < pool.utilization
    watts = 2 * (50 + (700 - 50) * pool.power_activity)
    assert pool.power_w == pytest.approx(watts)
    assert pool.power_w_per_gpu == pytest.approx(watts / 2)
    assert res.to_dict()["energy_kwh_per_hour"] == pytest.approx(watts / 1000)
    assert "ML.ENERGY" in pool.power_source


def test_embodied_false_zeroes_embodied_carbon() -> None:
    d = base_dict(embodied={"include": False})
    out = simulate(scenario_from_dict(d)).to_dict()
    assert out["g_co2_embodied_per_hour"] == 0.0
    assert out["g_co2_per_hour"] == pytest.approx(out["g_co2_operational_per_hour"])
