"""One unusable candidate never aborts a solve (issue 39, item 8): a configuration whose context
(``max_model_len``) or KV cache cannot hold some of a class's requests is not a pool for that
class (one note says which and why) and the solve goes on with the others; only a class that no
candidate can hold makes the plan infeasible, naming it."""

from __future__ import annotations

import json
from types import SimpleNamespace

import yaml

from fleetplan.optimize.inputs import ClassWorkload, unfit_pairs
from fleetplan.optimize.problem import Demand
from fleetplan.workload.lengths import LengthModel


def _work(inp: dict, out: dict) -> ClassWorkload:
    return ClassWorkload(LengthModel.model_validate({"input": inp, "output": out}), 1.0, (1.0,),
                         0.0)


def test_a_class_longer_than_a_configuration_holds_is_unfit_there() -> None:
    small = SimpleNamespace(max_model_len=2096, kv_blocks=1000, block_size=16)  # 16,000 KV
    tiny_kv = SimpleNamespace(max_model_len=32768, kv_blocks=100, block_size=16)  # 1,600 KV
    demands = [Demand("long", (1.0,), 1000.0), Demand("short", (1.0,), 1000.0),
               Demand("mixed", (1.0,), 1000.0)]
    work = [_work({"dist": "fixed", "value": 3000}, {"dist": "fixed", "value": 100}),
            _work({"dist": "fixed", "value": 300}, {"dist": "fixed", "value": 50}),
            _work({"dist": "uniform", "low": 1000, "high": 3000, "max": 3000},
                  {"dist": "fixed", "value": 96})]
    got = unfit_pairs(demands, work, {"1xSmall": small, "1xTinyKV": tiny_kv})
    assert set(got) == {("long", "1xSmall"), ("long", "1xTinyKV"), ("mixed", "1xSmall"),
                        ("mixed", "1xTinyKV")}
    long_ = got[("long", "1xSmall")]
    assert (long_.share, long_.longest, long_.holds, long_.why) == (1.0, 3100, 2096,
                                                                   "max_model_len")
    assert got[("long", "1xTinyKV")].why == "KV cache" and got[("long", "1xTinyKV")].holds == 1600
    # uniform prompts 1000-3000 + 96: those above 2000 do not fit 2096, about half
    assert 0.45 < got[("mixed", "1xSmall")].share < 0.55
    assert "exceed the 2,096 tokens a replica holds (max_model_len)" in got[
        ("mixed", "1xSmall")].reason


SCENARIO = {
    "model": "DeepSeek-R1-Distill-Qwen-14B",
    "classes": [{"name": "rag", "rate_rps": 1.0, "slo": {"ttft_p99_ms": 3000},
                 "input_tokens": {"dist": "fixed", "value": 2100},
                 "output_tokens": {"dist": "fixed", "value": 20}}],
    "market": "alternative",
    "sim": {"duration_s": 60, "warmup_s": 10, "seed": 3, "replications": 1},
    "capacity": {"duration_s": 60, "warmup_s": 10, "min_requests": 100, "seeds": 1},
}


def test_the_solve_goes_on_without_a_candidate_that_cannot_hold_a_class(
        cli, tmp_path, monkeypatch, capacity_cache_dir) -> None:
    """14B on one RTX 5090 holds 2,096 tokens (model and KV cache): the class's 2,120-token
    requests go to the H100 and the plan says why the 5090 is not used."""
    monkeypatch.setenv("FLEETPLAN_CACHE_DIR", capacity_cache_dir)
    path = tmp_path / "s.yaml"
    path.write_text(yaml.safe_dump({**SCENARIO, "candidates": ["1xRTX-5090", "1xH100-PCIe"]}))
    res = cli("solve", str(path), "--format", "json", "--no-timing", "-q")
    assert res.exit_code == 0, res.stderr
    plan = json.loads(res.stdout)
    assert plan["status"] == "optimal" and plan["verified"]
    assert {e["config"] for e in plan["fleet"]} == {"1xH100-PCIe"}
    (note,) = [n for n in plan["notes"] if n.startswith("1xRTX-5090 is not a pool for class")]
    assert "class rag: 100.00% of its requests" in note and "2,120 tokens" in note


def test_a_class_no_candidate_holds_makes_an_infeasible_plan_that_names_it(
        cli, tmp_path, monkeypatch, capacity_cache_dir) -> None:
    monkeypatch.setenv("FLEETPLAN_CACHE_DIR", capacity_cache_dir)
    path = tmp_path / "s.yaml"
    path.write_text(yaml.safe_dump({**SCENARIO, "candidates": ["1xRTX-5090"]}))
    res = cli("solve", str(path), "--format", "json", "--no-timing", "-q")
    assert res.exit_code == 3
    line = res.stderr.strip()
    assert "\n" not in line and "Traceback" not in line
    assert "class rag: no candidate configuration holds its requests (1xRTX-5090:" in line
    plan = json.loads(res.stdout)
    assert plan["status"] == "infeasible" and plan["binding"] == "classes[0].input_tokens"


# the 14B model in bf16 is 29.5 GB of weights: no room on one 24 GB RTX 4090 (0.9 of it for vLLM)
LEFT_OUT = {**SCENARIO, "candidates": ["1xRTX-4090", "1xH100-PCIe"],
            "classes": [{"name": "chat", "rate_rps": 1.0, "slo": {"ttft_p99_ms": 3000}}]}


def test_a_candidate_the_model_does_not_fit_on_is_left_out_and_the_solve_goes_on(
        cli, tmp_path, monkeypatch, capacity_cache_dir) -> None:
    from fleetplan.catalog.catalog import bundled_catalog

    cat = bundled_catalog()
    weights = cat.model("DeepSeek-R1-Distill-Qwen-14B").weight_bytes
    assert weights > 0.9 * cat.gpu("RTX-4090").vram_gb * 2 ** 30  # the premise, from the catalog
    monkeypatch.setenv("FLEETPLAN_CACHE_DIR", capacity_cache_dir)
    path = tmp_path / "s.yaml"
    path.write_text(yaml.safe_dump(LEFT_OUT))
    res = cli("solve", str(path), "--format", "json", "--no-timing", "-q")
    assert res.exit_code == 0, res.stderr
    plan = json.loads(res.stdout)
    assert plan["status"] == "optimal" and plan["verified"]
    assert {e["config"] for e in plan["fleet"]} == {"1xH100-PCIe"}
    (note,) = [n for n in plan["notes_detail"] if n["topic"] == "candidates"]
    assert note["text"].startswith("candidate 1xRTX-4090 left out (no pool for any class): "
                                   "DeepSeek-R1-Distill-Qwen-14B does not fit on 1xRTX-4090")
    assert note["level"] == "plan"  # the terminal shows it by default
    table = cli("solve", str(path), "-q")
    assert table.exit_code == 0 and "note: candidate 1xRTX-4090 left out" in table.stdout
    # --confidence tightens the SLOs of the candidates it kept
    res = cli("solve", str(path), "--format", "json", "--no-timing", "-q",
              "--confidence", "0.75")
    assert res.exit_code == 0, res.stderr
    assert {e["config"] for e in json.loads(res.stdout)["fleet"]} == {"1xH100-PCIe"}


def test_a_model_that_fits_on_no_candidate_is_one_line_naming_the_first(
        cli, tmp_path, monkeypatch, capacity_cache_dir) -> None:
    monkeypatch.setenv("FLEETPLAN_CACHE_DIR", capacity_cache_dir)
    path = tmp_path / "s.yaml"
    path.write_text(yaml.safe_dump({**LEFT_OUT, "model": "DeepSeek-R1-Distill-Qwen-32B",
                                    "candidates": ["1xRTX-4090", "1xRTX-5090"]}))
    res = cli("solve", str(path), "-q")
    assert res.exit_code == 2
    line = res.stderr.strip()
    assert "\n" not in line and "Traceback" not in line
    assert "candidates[0] (1xRTX-4090): DeepSeek-R1-Distill-Qwen-32B does not fit" in line
    assert line.endswith("; no other candidate either")
