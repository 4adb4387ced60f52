"""What to measure next (issue 41, item 5): a plan that leans on uncalibrated pools names the
one benchmark whose uncertainty moves its cost most, the cost range it spans, and the commands
that measure it and plan on the measurement."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from fleetplan.optimize.measure_next import MeasureNext, cost_range
from fleetplan.optimize.plan import Plan
from fleetplan.optimize.problem import Demand, Limits, PlanProblem, Pool, Tier
from fleetplan.optimize.solvers import SolverSettings

# two candidates: A (uncalibrated, 5 req/s a replica for $1/h) and B (calibrated, 4 req/s for
# $1.50/h); 20 req/s to serve
A = Pool("1xA", "EU27", "L40S", 1, 1.0, 100.0, 242.0)
B = Pool("1xB", "EU27", "H100-PCIe", 1, 1.5, 100.0, 242.0)
T = Tier(500.0)


def _problem() -> PlanProblem:
    cap = {("c", "1xA", T): 5.0, ("c", "1xB", T): 4.0}
    return PlanProblem((Demand("c", (20.0,), 500.0),), (A, B), cap,
                       {("c", "1xA"): 20.0, ("c", "1xB"): 20.0}, Limits())


def test_the_cost_range_is_the_cheapest_plan_at_each_end_of_the_band() -> None:
    # by hand: at half A's predicted capacity (2.5 req/s, $0.40 per req/s) B is cheaper per
    # req/s ($0.375): 5 x B = $7.50 (8 x A = $8; any mix of the two costs more than 7.5); at
    # twice it (10 req/s) 2 x A = $2
    lo, hi = cost_range(_problem(), SolverSettings(), "1xA", (0.5, 2.0))
    assert lo == pytest.approx(2.0) and hi == pytest.approx(7.5)
    # a band that keeps A the cheapest at the same count moves nothing: 4 x A both ways
    lo, hi = cost_range(_problem(), SolverSettings(), "1xA", (1.0, 1.2))
    assert lo == pytest.approx(4.0) and hi == pytest.approx(4.0)


def test_no_plan_at_the_low_end_is_infinite() -> None:
    # at most 4 replicas of A: at half its capacity 8 are needed, so no plan; at 1.5x, 3
    capped = Pool("1xA", "EU27", "L40S", 1, 1.0, 100.0, 242.0, max_replicas=4)
    only_a = PlanProblem((Demand("c", (20.0,), 500.0),), (capped,), {("c", "1xA", T): 5.0},
                         {("c", "1xA"): 20.0}, Limits())
    lo, hi = cost_range(only_a, SolverSettings(), "1xA", (0.5, 1.5))
    assert lo == pytest.approx(3.0) and hi == float("inf")


def test_the_record_round_trips_and_says_what_it_measured() -> None:
    m = MeasureNext("M", "1xL40S", (4.4, None), (0.69, 1.1), "basis", ("a", "b"))
    assert MeasureNext.from_dict(json.loads(json.dumps(m.to_dict()))) == m
    assert "no plan meeting every SLO at its low end" in m.sentence()
    assert m.span_usd_per_hour == float("inf")


def _scenario(tmp_path: Path, chat_rps: float) -> Path:
    sc = yaml.safe_load(Path("examples/hybrid-chat-batch.yaml").read_text())
    sc.pop("fleet")
    sc["classes"][0].update(rate_rps=chat_rps, slo={"ttft_p99_ms": 400})
    sc["candidates"] = ["1xL40S", "2xRTX-4090"]  # the L40S is not calibrated
    sc["sim"] = {"duration_s": 120, "warmup_s": 20, "seed": 7, "replications": 1}
    path = tmp_path / "s.yaml"
    path.write_text(yaml.safe_dump(sc))
    return path


def test_solve_names_the_uncalibrated_pool_and_its_cost_range(cli, tmp_path: Path) -> None:
    report = tmp_path / "report.html"
    out = cli("solve", str(_scenario(tmp_path, 20.0)), "--format", "json",
              "--executor", "serial", "--report", str(report))
    assert out.exit_code == 0, out.stderr
    doc = json.loads(out.stdout)
    plan = Plan.from_dict(doc)
    nxt = doc["measure_next"]
    assert plan.measure_next is not None and plan.measure_next.to_dict() == nxt
    assert (nxt["model"], nxt["config"]) == ("DeepSeek-R1-Distill-Qwen-14B", "1xL40S")
    assert any(e.config == "1xL40S" and e.calibrated is False for e in plan.fleet)
    lo_f, hi_f = nxt["capacity_factors"]
    assert lo_f < 1.0 < hi_f
    # the plan is the cheapest at the predicted capacity, which lies inside the band: its cost
    # lies inside the range (capacity up, cost never up)
    lo, hi = nxt["cost_range_usd_per_hour"]
    assert lo < hi
    assert lo <= plan.cost_per_hour_usd <= hi
    bench = next(c for c in nxt["commands"] if c.startswith("fleetplan bench"))
    assert "--gpu L40S --gpu-count 1 --tp 1 --ingest" in bench
    assert "--model deepseek-ai/DeepSeek-R1-Distill-Qwen-14B" in bench
    # the sweep brackets one replica's planned capacity: 2x it first
    cap = max(c.capacity_rps for c in plan.capacities if c.config == "1xL40S")
    top = float(bench.split("--sweep ")[1].split(",")[0])
    assert top == pytest.approx(2 * cap, rel=0.05)
    assert "fleetplan calibrate --model DeepSeek-R1-Distill-Qwen-14B --config 1xL40S" in (
        nxt["commands"])
    # the report says the same where it says the plan rests on uncalibrated predictions
    html = report.read_text()
    said = html.split('id="measure-next">')[1].split("</pre>")[0]
    assert "DeepSeek-R1-Distill-Qwen-14B on 1xL40S" in said and bench in said
    assert f"${lo:.2f}-${hi:.2f}/h" in said
    table = cli("solve", str(_scenario(tmp_path, 20.0)), "--executor", "serial").stdout
    assert "measure next: DeepSeek-R1-Distill-Qwen-14B on 1xL40S" in " ".join(table.split())


def test_a_plan_of_calibrated_pools_names_nothing(cli, tmp_path: Path) -> None:
    sc = yaml.safe_load(_scenario(tmp_path, 20.0).read_text())
    sc["candidates"] = ["1xH100-PCIe", "2xRTX-4090"]
    path = tmp_path / "cal.yaml"
    path.write_text(yaml.safe_dump(sc))
    out = cli("solve", str(path), "--format", "json", "--executor", "serial")
    assert out.exit_code == 0, out.stderr
    assert "measure_next" not in json.loads(out.stdout)


def test_a_pipeline_parallel_pool_is_planned_but_not_named_for_a_benchmark(cli,
                                                                          tmp_path: Path) -> None:
    """A server of pipeline stages is a plan's replica like any other, but its runs cannot be
    ingested (the store keeps one tensor-parallel group per run): measure next does not send
    the planner to bench one."""
    sc = yaml.safe_load(_scenario(tmp_path, 20.0).read_text())
    sc["candidates"] = ["8xRTX-4090+tp4pp2"]
    sc["classes"][0]["slo"] = {"ttft_p99_ms": 2000}  # beyond its first-token delays
    path = tmp_path / "pp.yaml"
    path.write_text(yaml.safe_dump(sc))
    out = cli("solve", str(path), "--format", "json", "--executor", "serial")
    assert out.exit_code == 0, out.stderr
    doc = json.loads(out.stdout)
    assert {e["config"] for e in doc["fleet"]} == {"8xRTX-4090+tp4pp2"}
    assert doc["verified"] is True and "measure_next" not in doc


def test_a_model_of_a_config_json_is_measured_from_its_weights_under_its_planned_name(
        tmp_path: Path) -> None:
    """In a scenario of several models, each from its own config.json, the printed commands
    serve the model from the folder of *its* config.json under the name it is planned by, and
    give ``bench`` and ``calibrate`` that config.json, so that the three name one model (before,
    the second model's commands had no ``--model-config``: calibrate refused it as unknown,
    and ``vllm serve`` was given the folder's bare name)."""
    import shlex
    import shutil

    from fleetplan import load_scenario
    from fleetplan.optimize.measure_next import bench_commands
    from fleetplan.scenario.served import model_config_of

    hf = Path(__file__).resolve().parents[1] / "data" / "hf-configs"
    models = {"Llama-3.1-8B-Instruct": "my models/Llama-3.1-8B-Instruct",
              "Qwen3-8B-FP8": "my models/Qwen3-8B-FP8/config.json"}  # a folder, a file
    for name in models:
        shutil.copytree(hf / name, tmp_path / "my models" / name)
    scenario = {"models": [{"name": n, "model_config": c} for n, c in models.items()],
                "classes": [{"name": "chat", "rate_rps": 1, "model": "Llama-3.1-8B-Instruct"},
                            {"name": "agent", "rate_rps": 1, "model": "Qwen3-8B-FP8"}]}
    (tmp_path / "s.yaml").write_text(yaml.safe_dump(scenario), encoding="utf-8")
    sc = load_scenario(tmp_path / "s.yaml")
    qwen = model_config_of(sc, "Qwen3-8B-FP8")
    assert qwen is not None and Path(qwen) == tmp_path / "my models" / "Qwen3-8B-FP8" / (
        "config.json")
    assert model_config_of(sc, "Meta-Llama-3-8B-Instruct") is None  # not a model of it
    cap = {("agent", "Qwen3-8B-FP8/1xL40S", T): 5.0}
    problem = PlanProblem((Demand("agent", (1.0,), 500.0),), (A,), cap, {}, Limits())
    serve, bench, calibrate, _solve = bench_commands(
        "Qwen3-8B-FP8", "Qwen3-8B-FP8/1xL40S", problem, "Qwen3-8B-FP8", "L40S", 1, qwen)
    words = shlex.split(serve.split("#")[0])
    assert words[:3] == ["vllm", "serve", str(tmp_path / "my models" / "Qwen3-8B-FP8")]
    assert words[words.index("--served-model-name") + 1] == "Qwen3-8B-FP8"
    for cmd in (bench, calibrate):
        args = shlex.split(cmd)
        assert args[args.index("--model") + 1] == "Qwen3-8B-FP8"
        assert args[args.index("--model-config") + 1] == qwen
    # a catalog model is served by its hub id, as before
    serve, bench, *_ = bench_commands("M", "1xL40S", problem, "org/M", "L40S", 1)
    assert serve.startswith("vllm serve org/M --tensor-parallel-size 1")
    assert "--model org/M " in bench and "--model-config" not in bench
