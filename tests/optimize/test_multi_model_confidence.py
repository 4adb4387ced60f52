"""``solve --confidence P`` on a scenario of several models (issue 44).

Each configuration's margin is its own model's: ``Meta-Llama-3-8B-Instruct/2xRTX-4090`` (never
measured: the spec path's errors) and ``DeepSeek-R1-Distill-Qwen-7B/2xRTX-4090`` (measured:
its server kind's held-out errors) take different margins on the same hardware. A plan of two
models keeps the promise of one: every class has ``slo_met_probability >= P``, or the plan is
infeasible and names the margin that binds, with its model.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
import yaml

from fleetplan.optimize import solve
from fleetplan.optimize.confidence import margins
from fleetplan.profiles.store import load_profiles
from fleetplan.scenario import scenario_from_dict

LLAMA, QWEN, QWEN14 = ("Meta-Llama-3-8B-Instruct", "DeepSeek-R1-Distill-Qwen-7B",
                       "DeepSeek-R1-Distill-Qwen-14B")
SIM = {"duration_s": 60, "warmup_s": 10, "seed": 3, "replications": 1}
CAPACITY = {"duration_s": 60, "warmup_s": 10, "seeds": 1, "min_requests": 100}


def _two(classes: list[dict[str, Any]], candidates: list[str],
         models: tuple[str, str] = (LLAMA, QWEN)) -> dict[str, Any]:
    return {"models": list(models), "classes": classes, "candidates": candidates,
            "capacity": CAPACITY, "sim": SIM}


def test_each_configuration_takes_its_own_models_errors() -> None:
    configs = ["1xH100-PCIe", "2xRTX-4090"]
    sc = scenario_from_dict(_two(
        [{"name": "chat", "model": LLAMA, "rate_rps": 1, "slo": {"ttft_p99_ms": 500}},
         {"name": "agent", "model": QWEN, "rate_rps": 1, "slo": {"ttft_p99_ms": 500}}], configs))
    m = margins(sc, [f"{model}/{c}" for model in (LLAMA, QWEN) for c in configs], 0.95)
    measured = load_profiles()
    for model in (LLAMA, QWEN):
        alone = margins(sc.for_model(model), configs, 0.95)  # the one-model path
        for c in configs:
            got = m.configs[f"{model}/{c}"]
            # calibrated exactly where the store holds runs of this model on this config
            assert got.calibrated == (c in measured.configs(model))
            want = alone.configs[c]
            assert (got.factor, got.sigma, got.bias, got.source) == (
                want.factor, want.sigma, want.bias, want.source)
    # the same hardware, two models, two error tables
    llama, qwen = m.configs[f"{LLAMA}/2xRTX-4090"], m.configs[f"{QWEN}/2xRTX-4090"]
    assert not llama.calibrated and qwen.calibrated
    assert "spec_errors.json" in llama.source and "spec_errors.json" not in qwen.source


def test_a_confident_plan_of_two_models_keeps_its_promise(capacity_cache_dir: str) -> None:
    sc = scenario_from_dict(_two(
        [{"name": "chat", "model": LLAMA, "rate_rps": 3, "slo": {"ttft_p99_ms": 400}},
         {"name": "agent", "model": QWEN, "rate_rps": 3, "slo": {"ttft_p99_ms": 600}}],
        ["1xH100-PCIe", "1xRTX-4090"]))
    plan = solve(sc, executor="serial", cache_dir=capacity_cache_dir, confidence=0.9)
    assert plan.verified and plan.fleet
    slo = {"chat": 400.0, "agent": 600.0}
    for c in plan.classes:
        assert c.slo_met_probability is not None and c.slo_met_probability >= 0.9
        # the margin is the largest factor of the class's own model's pools, read alone
        own = margins(sc.for_model(c.model), [k.partition("/")[2].partition("@")[0]
                                              for k in c.split], 0.9)
        f = max(e.factor for e in own.configs.values())
        assert c.margin_ms == pytest.approx(slo[c.name] * (1 - 1 / f), abs=1e-3)
        assert all(k.startswith(f"{c.model}/") for k in c.split)
    assert any("confidence 0.9" in n for n in plan.notes)


def test_an_infeasible_confidence_names_the_model_and_margin(cli: Any, tmp_path: Any,
                                                             monkeypatch: pytest.MonkeyPatch,
                                                             capacity_cache_dir: str) -> None:
    """14B on 2 x RTX 4090 at a 700 ms P99 (as for one model, test_confidence_promise): the
    tensor-parallel kind's margin at 0.95 leaves no capacity, whatever the other model does."""
    monkeypatch.setenv("FLEETPLAN_CACHE_DIR", capacity_cache_dir)
    fixed = {"input_tokens": {"dist": "fixed", "value": 300},
             "output_tokens": {"dist": "fixed", "value": 50}}
    path = tmp_path / "s.yaml"
    path.write_text(yaml.safe_dump(_two(
        [{"name": "batch", "model": QWEN14, "rate_rps": 4.0, "slo": {"ttft_p99_ms": 700},
          **fixed},
         {"name": "agent", "model": QWEN, "rate_rps": 1.0, "slo": {"ttft_p99_ms": 5000},
          **fixed}], ["2xRTX-4090"], (QWEN14, QWEN))))
    out = tmp_path / "plan.json"
    res = cli("solve", str(path), "--confidence", "0.95", "--out", str(out), "--no-timing",
              "-q")
    assert res.exit_code == 3, res.stderr
    line = res.stderr.strip().splitlines()[-1]
    assert f"latency margin of {QWEN14}/2xRTX-4090 at confidence 0.95" in line
    assert "RTX-4090, tensor-parallel" in line
    plan = json.loads(out.read_text())
    assert plan["status"] == "infeasible" and plan["fleet"] == []
    assert {c["name"]: c["model"] for c in plan["classes"]} == {"batch": QWEN14, "agent": QWEN}


def test_a_class_of_variants_keeps_the_promise_on_the_variant_chosen(
        capacity_cache_dir: str) -> None:
    """Each combination of variants is solved at the confidence asked; the plan kept holds it,
    and its margin is named for the chosen model's configuration."""
    sc = scenario_from_dict({
        "models": [QWEN14, QWEN],
        "classes": [{"name": "chat", "model": [QWEN14, QWEN], "rate_rps": 8,
                     "slo": {"ttft_p99_ms": 500}}],
        "candidates": ["1xH100-PCIe"], "capacity": CAPACITY, "sim": SIM})
    plan = solve(sc, executor="serial", cache_dir=capacity_cache_dir, confidence=0.9)
    assert plan.verified
    (c,) = plan.classes
    assert c.model in (QWEN14, QWEN)
    assert c.slo_met_probability is not None and c.slo_met_probability >= 0.9
    assert all(e.model == c.model for e in plan.fleet)
    assert any(n.startswith("confidence 0.9") and f"{c.model}/1xH100-PCIe x" in n
               for n in plan.notes)
