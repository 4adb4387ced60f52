"""``fleetplan solve --report``: the page of the plan just solved, beside its ``--out`` file."""

from __future__ import annotations

import json
from pathlib import Path

import yaml
from report_helpers import valid_page

SCENARIO = {  # one candidate, short simulations: a cold solve in seconds
    "model": "DeepSeek-R1-Distill-Qwen-14B",
    "sim": {"duration_s": 240, "warmup_s": 60, "seed": 7, "replications": 2},
    "capacity": {"duration_s": 120, "warmup_s": 30, "min_requests": 300, "seeds": 2},
    "classes": [{"name": "chat", "rate_rps": 16, "slo": {"ttft_p99_ms": 1000}}],
    "candidates": ["1xH100-PCIe"],
}


def test_solve_writes_the_report_of_its_plan(cli, tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setenv("FLEETPLAN_CACHE_DIR", str(tmp_path / "cache"))
    sc = tmp_path / "s.yaml"
    sc.write_text(yaml.safe_dump(SCENARIO), encoding="utf-8")
    html, plan_file = tmp_path / "plan.html", tmp_path / "plan.json"
    res = cli("solve", str(sc), "--quiet", "--out", str(plan_file), "--report", str(html))
    assert res.exit_code == 0, res.stderr
    assert f"report written to {html}" in res.stderr
    plan = json.loads(plan_file.read_text(encoding="utf-8"))
    page_html = html.read_text(encoding="utf-8")
    page = valid_page(page_html)
    assert [(r[0], r[4]) for r in page.rows("fleet-table")] == [
        (e["pool"], str(e["count"])) for e in plan["fleet"]]
    assert [r[0] for r in page.rows("classes-table")] == ["chat"]
    assert "plan.json" in page.text  # named by its --out file
    assert [r[0] for r in page.rows("validation-table")] == ["1xH100-PCIe"]
    # the plan records the model's band and calibration; the page is the one report writes
    assert plan["classes"][0]["calibrated"] is True and plan["fleet"][0]["calibrated"] is True
    lo, hi = plan["classes"][0]["ttft_p99_band_ms"]
    assert lo <= hi and "H100-PCIe, one GPU" in plan["classes"][0]["band_basis"]
    again = tmp_path / "again.html"
    res = cli("report", str(plan_file), "-s", str(sc), "-o", str(again))
    assert res.exit_code == 0, res.stderr
    assert again.read_text(encoding="utf-8") == page_html


def test_solve_refuses_a_report_name_before_solving(cli, tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setenv("FLEETPLAN_CACHE_DIR", str(tmp_path / "cache"))
    sc = tmp_path / "s.yaml"
    sc.write_text(yaml.safe_dump(SCENARIO), encoding="utf-8")
    res = cli("solve", str(sc), "--quiet", "--report", str(tmp_path / "plan.pdf"))
    assert res.exit_code == 2 and "--report" in res.stderr and "FILE.html" in res.stderr
    assert not (tmp_path / "cache").exists()  # nothing was searched or simulated
