"""``fleetplan frontier`` on a scenario of several models (issue 44): every point plans the
whole fleet, so the constraints over the fleet (here one H100 for both models, which at $0.40
per GPU-hour each model planned apart would take) hold at every point, and the point at the
scenario's own rate is the plan ``solve`` gives."""

from __future__ import annotations

from typing import Any

import pytest
import yaml

from fleetplan.optimize import solve
from fleetplan.optimize.frontier import frontier
from fleetplan.scenario import scenario_from_dict

LLAMA, QWEN = "Meta-Llama-3-8B-Instruct", "DeepSeek-R1-Distill-Qwen-7B"
SCENARIO: dict[str, Any] = {
    "models": [LLAMA, QWEN],
    "classes": [{"name": "chat", "model": LLAMA, "rate_rps": 12, "slo": {"ttft_p99_ms": 500}},
                {"name": "agent", "model": QWEN, "rate_rps": 24, "slo": {"ttft_p99_ms": 500}}],
    "candidates": ["1xH100-PCIe", "1xRTX-4090"],
    "prices_usd_per_gpu_hour": {"H100-PCIe": 0.4},
    "availability": {"H100-PCIe": 1},
    "capacity": {"duration_s": 60, "warmup_s": 10, "seeds": 1, "min_requests": 100},
    "sim": {"duration_s": 60, "warmup_s": 10, "seed": 1, "replications": 1},
}


def test_every_point_plans_one_fleet_within_the_shared_h100(capacity_cache_dir: str) -> None:
    sc = scenario_from_dict(SCENARIO)
    front = frontier(sc, "rate", points=2, lo=0.5, hi=1.0, scheduler="serial",
                     cache_dir=capacity_cache_dir)
    assert [p.value for p in front.points] == [0.5, 1.0]
    # the fleet labels name each pool's model, and the note under them says so
    assert "model/configuration" in front.label_note()
    assert all(lbl.count("/") >= 2 for lbl in front.to_frame()["label"] if lbl != "-")
    for point in front.points:
        plan = point.plan
        assert plan.verified
        assert sum(e.gpus for e in plan.fleet if e.config == "1xH100-PCIe") <= 1
        for e in plan.fleet:
            assert e.model in (LLAMA, QWEN) and e.pool.startswith(f"{e.model}/")
        assert {c.name: c.model for c in plan.classes} == {"chat": LLAMA, "agent": QWEN}
        for c in plan.classes:  # each class on its own model's pools only
            assert all(k.startswith(f"{c.model}/") for k in c.split)
    # at the scenario's own rate the point is the plan solve gives
    apart = [solve(sc.for_model(m), executor="serial", cache_dir=capacity_cache_dir)
             for m in (LLAMA, QWEN)]
    assert sum(e.gpus for p in apart for e in p.fleet if e.config == "1xH100-PCIe") > 1
    alone = solve(sc, executor="serial", cache_dir=capacity_cache_dir)
    at_one = front.points[1].plan
    assert alone.verified
    assert at_one.cost_per_hour_usd == pytest.approx(alone.cost_per_hour_usd, abs=1e-9)
    assert sorted((e.pool, e.count) for e in at_one.fleet) == sorted(
        (e.pool, e.count) for e in alone.fleet)


def test_a_frontier_over_variants_is_refused_in_one_line(cli: Any, tmp_path: Any) -> None:
    data = {**SCENARIO, "classes": [{**SCENARIO["classes"][0], "model": [LLAMA, QWEN]},
                                    SCENARIO["classes"][1]]}
    path = tmp_path / "v.yaml"
    path.write_text(yaml.safe_dump(data), encoding="utf-8")
    res = cli("frontier", str(path), "--sweep", "rate", "--points", "2")
    assert res.exit_code == 2
    assert "not supported yet for a scenario with several models" in res.stderr
    assert "variants" in res.stderr
    assert len(res.stderr.strip().splitlines()) == 1
