"""``fleetplan solve`` / ``fleetplan frontier``: the JSON contract, exit codes, saved models."""

from __future__ import annotations

import json

import pulp
import pytest
import yaml
from optimize_helpers import highs_objective

from fleetplan.optimize.solvers import SolverSettings, make_solver

FAST = {
    "model": "DeepSeek-R1-Distill-Qwen-14B",
    "sim": {"duration_s": 240, "warmup_s": 60, "seed": 7, "replications": 2},
    "capacity": {"duration_s": 120, "warmup_s": 30, "min_requests": 300, "seeds": 2},
}


@pytest.fixture
def write(tmp_path, monkeypatch, capacity_cache_dir):
    monkeypatch.setenv("FLEETPLAN_CACHE_DIR", capacity_cache_dir)

    def make(classes, name="s.yaml", **extra):
        path = tmp_path / name
        path.write_text(yaml.safe_dump({**FAST, "classes": classes, **extra}))
        return str(path)

    return make


LOOSE = [{"name": "chat", "rate_rps": 16, "slo": {"ttft_p99_ms": 1000}}]


def test_solve_json_contract_and_determinism(cli, write):
    path = write(LOOSE)
    first = cli("solve", path, "--format", "json", "--no-timing")
    assert first.exit_code == 0, first.stderr
    out = json.loads(first.stdout)
    assert list(out)[:7] == ["status", "fleet", "cost_per_hour_usd", "cost_per_mtok_usd",
                             "g_co2_per_mtok", "classes", "solver"]
    assert out["status"] in ("optimal", "feasible") and out["verified"] is True
    # issue 39 extends each entry with whether the replica model is calibrated on its config
    assert all(list(e) == ["pool", "config", "region", "tier_ttft_p99_ms", "count", "calibrated"]
               and isinstance(e["calibrated"], bool) for e in out["fleet"])
    assert [e["pool"] for e in out["fleet"]] == [
        f"{e['config']}@{e['region']}/1000ms" for e in out["fleet"]]
    (c,) = out["classes"]
    assert {"name", "rate_rps", "slo_ttft_p99_ms", "ttft_p99_ms", "met", "split"} <= set(c)
    assert c["met"] is True and c["ttft_p99_ms"] <= c["slo_ttft_p99_ms"]
    assert sum(c["split"].values()) == pytest.approx(1.0)
    assert set(c["split"]) <= {e["pool"] for e in out["fleet"]}
    assert {"class", "pool", "config", "region", "tier_ttft_p99_ms", "capacity_rps",
            "ttft_p99_ms_at_capacity"} <= set(out["capacities"][0])
    assert {"name", "status", "seconds", "gap", "rounds"} <= set(out["solver"])
    assert out["solver"]["seconds"] is None and out["solver"]["gap"] == 0.01
    assert out["solver"]["time_limit_s"] == 10.0 and out["solver"]["rounds"] >= 1
    assert "hours" not in out
    timed = json.loads(cli("solve", path, "--format", "json").stdout)
    assert timed["solver"]["seconds"] >= 0
    timed["solver"]["seconds"] = None  # the one field that varies: wall time
    assert json.dumps(timed, indent=2) + "\n" == first.stdout


def test_save_lp_is_resolvable_by_other_solvers(cli, write, tmp_path):
    lp = tmp_path / "plan.lp"
    res = cli("solve", write(LOOSE), "--format", "json", "--save-lp", str(lp))
    assert res.exit_code == 0, res.stderr
    cost = json.loads(res.stdout)["cost_per_hour_usd"]
    _vars, again = pulp.LpProblem.fromDict(json.loads((tmp_path / "plan.lp.json").read_text()))
    again.solve(make_solver(SolverSettings("cbc", gap=0.0)))
    assert pulp.value(again.objective) == pytest.approx(cost, rel=1e-3)
    assert highs_objective(lp) == pytest.approx(cost, rel=1e-3)


def test_infeasible_exits_3_with_one_line_reason(cli, write):
    res = cli("solve", write([{"name": "chat", "rate_rps": 4, "slo": {"ttft_p99_ms": 20}}]),
              "--format", "json", "--no-timing")
    assert res.exit_code == 3
    line = res.stderr.strip()
    assert "\n" not in line
    assert line.startswith("fleetplan: error: infeasible: class chat: ttft_p99_ms 20 is below "
                           "the best any candidate reaches")
    assert "cheapest relaxation: classes[0].slo.ttft_p99_ms >= " in line
    out = json.loads(res.stdout)
    assert out["status"] == "infeasible" and out["fleet"] == [] and out["verified"] is False
    assert out["binding"] == "classes[0].slo.ttft_p99_ms"
    # the capacities are listed on every status: here every candidate's, at the class's SLO
    assert out["capacities"] and {c["tier_ttft_p99_ms"] for c in out["capacities"]} == {20}
    assert all(c["capacity_rps"] == 0 for c in out["capacities"])


def test_a_plan_its_simulation_did_not_verify_exits_4_after_writing_it(cli, write, tmp_path,
                                                                       monkeypatch):
    """A CI job reads the exit code: a plan whose simulation missed must not pass for an
    answer, yet the planner gets it (stdout, --out) to inspect and replay."""
    from dataclasses import replace

    from fleetplan.cli import solve_cmd

    real = solve_cmd.run_solve
    why = ("NOT VERIFIED: after 12 round(s) the simulated plan still misses an SLO or the "
           "carbon cap; classes marked met=false did not meet it")

    def missed(*args, **kwargs):  # the loop's answer as it ends when no plan passed
        plan = real(*args, **kwargs)
        return replace(plan, verified=False, notes=(why, *plan.notes),
                       classes=tuple(replace(c, met=False) for c in plan.classes))

    monkeypatch.setattr(solve_cmd, "run_solve", missed)
    out = tmp_path / "plan.json"
    res = cli("solve", write(LOOSE), "--out", str(out))
    assert res.exit_code == 4
    assert "verified by simulation: NO" in res.stdout  # the plan is printed first
    line = res.stderr.strip().splitlines()[-1]
    assert line.startswith("fleetplan: error: not verified by simulation ($")
    assert "classes not met: chat" in line and "after 12 round(s)" in line
    assert line.endswith(f"the plan is printed and written to {out}, marked verified: false")
    saved = json.loads(out.read_text())
    assert saved["verified"] is False and saved["fleet"] and saved["status"] == "optimal"
    as_json = cli("solve", write(LOOSE), "--format", "json")
    assert as_json.exit_code == 4 and json.loads(as_json.stdout)["verified"] is False
    # a plan failed by the carbon cap (or the margin) with every class met says so, not "none"
    monkeypatch.setattr(solve_cmd, "run_solve",
                        lambda *a, **k: replace(real(*a, **k), verified=False))
    capped = cli("solve", write(LOOSE), "-q")
    assert capped.exit_code == 4 and "no class missed its SLO outright" in capped.stderr
    assert "printed, marked verified: false" in capped.stderr  # no --out: nothing written


def test_table_output_and_bad_solver(cli, write):
    path = write(LOOSE, fleet=[{"config": "1xH100-PCIe", "count": 2}])
    res = cli("solve", path)
    assert res.exit_code == 0, res.stderr
    assert ("the scenario's fleet (2x1xH100-PCIe) is ignored: solve chooses the fleet"
            in res.stderr)  # the given fleet is for fleetplan simulate
    assert "verified by simulation: yes" in res.stdout and "sustained capacity" in res.stdout
    bad = cli("solve", path, "--solver", "gurobee")
    assert bad.exit_code == 2 and "unknown solver gurobee" in bad.stderr
    assert "cbc" in bad.stderr


def test_frontier_cli_json_and_plot(cli, write, tmp_path):
    png, saved = tmp_path / "f.png", tmp_path / "front.json"
    res = cli("frontier", write(LOOSE), "--sweep", "carbon", "--points", "2", "--plot",
              str(png), "--format", "json", "--no-timing", "--out", str(saved))
    assert res.exit_code == 0, res.stderr
    out = json.loads(res.stdout)
    assert saved.read_text() == res.stdout  # --out holds what --format json prints
    assert out["sweep"] == "carbon" and len(out["points"]) == 2
    lo, hi = out["points"]
    assert lo["value"] < hi["value"]
    assert lo["cost_per_hour_usd"] >= hi["cost_per_hour_usd"]
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    bad = cli("frontier", write(LOOSE), "--sweep", "carbon", "--plot", str(tmp_path / "f.jpg"))
    assert bad.exit_code == 2


@pytest.mark.parametrize("kind,message", [
    ("bogus", "plot kind 'bogus': expected latency, fleet or hours"),
    ("hours", "plot kind 'hours' needs a diurnal plan"),
])
def test_a_bad_plot_kind_fails_before_any_output_is_written(cli, write, tmp_path, kind, message):
    out, png = tmp_path / "o" / "plan.json", tmp_path / "o" / "x.png"
    out.parent.mkdir()
    r = cli("solve", write(LOOSE), "-q", "--format", "json", "--out", str(out), "--plot",
            str(png), "--plot-kind", kind)
    assert r.exit_code == 2
    assert message in r.stderr and len(r.stderr.strip().splitlines()) == 1
    assert not out.exists() and not png.exists()
