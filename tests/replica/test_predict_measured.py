"""``fleetplan predict`` of a burst the store measured prints the measured runs beside it."""

from __future__ import annotations

import csv
import json
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
MODEL, CONFIG = "DeepSeek-R1-Distill-Qwen-14B", "1xH100-PCIe"


def _store_rows(rate: float) -> list[dict[str, str]]:
    with (ROOT / "data" / "profiles.csv").open(newline="", encoding="utf-8") as f:
        return [r for r in csv.DictReader(f) if r["model"] == MODEL and r["config"] == CONFIG
                and float(r["request_rate"]) == rate and r["num_prompts"] == "200"]


def test_a_measured_burst_is_shown_beside_the_prediction_and_an_unmeasured_one_is_not(
        cli) -> None:
    args = ("predict", "-m", MODEL, "-c", CONFIG, "--seeds", "1")
    rows = sorted(_store_rows(16.0), key=lambda r: r["date"])
    assert len(rows) == 2  # the bundled store ran 16 req/s twice
    out = json.loads(cli(*args, "--rate", "16", "--format", "json").stdout)
    got = out["measured_runs"]
    assert [r["run_id"] for r in got] == [r["run_id"] for r in rows]
    for mine, row in zip(got, rows, strict=True):
        assert mine["ttft_p99_ms"] == float(row["ttft_p99_ms"])
        assert mine["request_throughput"] == float(row["request_throughput"])
    table = cli(*args, "--rate", "16").stdout
    assert "┃ measured 1" in table and "┃ measured 2" in table
    assert all(r["run_id"] in " ".join(table.split()) for r in rows)
    assert not _store_rows(8.0)
    unmeasured = json.loads(cli(*args, "--rate", "8", "--format", "json").stdout)
    assert "measured_runs" not in unmeasured
    plain = cli(*args, "--rate", "8").stdout
    assert "┃ measured" not in plain and "the store's run" not in plain
