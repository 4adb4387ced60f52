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
