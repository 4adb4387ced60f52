"""``fleetplan bench`` loses no result: ``--out`` checked before the run, a sweep writes each rate
as it ends, Ctrl-C and ``--deadline`` end even the test request, and the exit code says when
nothing succeeded (0 measured, 1 no request succeeded, 2 refused, 130 partial)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from bench_fake_server import Plan

SERVED = str(Path(__file__).resolve().parents[1] / "data" / "catalog-served-names")  # knows "m"
BASE = ["--model", "m", "--input-len", "8", "--output-len", "4", "--power", "none",
        "--no-progress"]


def args(url: str, *more: str) -> list[str]:
    return ["bench", "--endpoint", url, *BASE, *more]


def one_error_line(stderr: str) -> str:
    errors = [ln for ln in stderr.splitlines() if ln.startswith("fleetplan: error:")]
    assert len(errors) == 1 and "Traceback" not in stderr, stderr
    return errors[0]


@pytest.mark.parametrize("where", ["dir", "under-a-file"])
def test_an_unwritable_out_is_refused_before_any_request(fake_server: Any, cli: Any,
                                                         tmp_path: Path, where: str) -> None:
    srv = fake_server(lambda i, b: Plan(tokens=2))
    blocker = tmp_path / "a-file"
    blocker.write_text("x")
    out = tmp_path if where == "dir" else blocker / "r.json"  # (root may write anywhere else)
    res = cli(*args(srv.url, "--num-prompts", "3", "--out", str(out)))
    assert res.exit_code == 2
    assert f"--out {out}" in one_error_line(res.stderr)
    assert srv.records == []  # refused before the test request: no run was lost
    assert blocker.read_text() == "x"


def test_a_sweep_keeps_the_rates_done_before_a_later_test_request_fails(
        fake_server: Any, cli: Any, tmp_path: Path) -> None:
    n = 4
    # the first rate: its test request and n requests succeed; then the server refuses all
    srv = fake_server(lambda i, b: Plan(tokens=2) if i <= n else Plan(status=503))
    out = tmp_path / "sweep.jsonl"
    res = cli(*args(srv.url, "--sweep", "40,20,10", "--num-prompts", str(n), "--out", str(out),
                    "--format", "json"))
    assert res.exit_code == 2
    line = one_error_line(res.stderr)
    assert "at 20 req/s" in line and "test request" in line and "HTTP 503" in line
    assert "1 rate(s) before it are complete" in line and str(out) in line
    (kept,) = [json.loads(x) for x in out.read_text().splitlines()]
    assert kept["request_rate"] == 40.0 and kept["completed"] == n and kept["partial"] is False
    assert json.loads(res.stdout)["request_rate"] == 40.0  # and shown


def test_a_failed_later_rate_still_ingests_the_rates_before_it(fake_server: Any, cli: Any,
                                                               tmp_path: Path) -> None:
    from fleetplan.profiles.store import load_profiles

    srv = fake_server(lambda i, b: Plan(tokens=2) if i <= 3 else Plan(status=503))
    store = tmp_path / "store.csv"
    res = cli(*args(srv.url, "--sweep", "40,20", "--num-prompts", "3", "--ingest", "--store",
                    str(store), "--gpu", "H100-SXM", "--gpu-count", "1", "--catalog", SERVED))
    assert res.exit_code == 2 and "at 20 req/s" in one_error_line(res.stderr)
    rows = load_profiles(store).frame
    assert list(rows["request_rate"]) == [40.0] and list(rows["completed"]) == [3]


def test_each_rate_is_on_disk_when_it_ends(fake_server: Any, cli: Any, tmp_path: Path,
                                           monkeypatch: pytest.MonkeyPatch) -> None:
    import fleetplan.bench.runner as runner

    srv = fake_server(lambda i, b: Plan(tokens=2))
    out = tmp_path / "sweep.jsonl"
    seen: list[list[float]] = []
    real = runner.run_benchmark

    async def spy(cfg: Any, *rest: Any) -> Any:  # what the file holds as each rate starts
        seen.append([json.loads(x)["request_rate"] for x in out.read_text().splitlines()]
                    if out.exists() else [])
        return await real(cfg, *rest)

    monkeypatch.setattr(runner, "run_benchmark", spy)
    res = cli(*args(srv.url, "--sweep", "40,20,10", "--num-prompts", "2", "--out", str(out)))
    assert res.exit_code == 0, res.stderr
    assert seen == [[], [40.0], [40.0, 20.0]]


def test_no_successful_request_exits_1_with_the_result_written(fake_server: Any, cli: Any,
                                                               tmp_path: Path) -> None:
    srv = fake_server(lambda i, b: Plan(tokens=2) if i == 0 else Plan(status=500))
    out = tmp_path / "r.json"
    res = cli(*args(srv.url, "--rate", "50", "--num-prompts", "3", "--out", str(out)))
    assert res.exit_code == 1
    line = one_error_line(res.stderr)
    assert "no request succeeded at 50 req/s" in line and "HTTP 500" in line
    written = json.loads(out.read_text())
    assert written["completed"] == 0 and written["failed"] == 3 and len(written["errors"]) == 3


def test_ingest_without_a_gpu_is_refused_before_the_run(fake_server: Any, cli: Any,
                                                        tmp_path: Path) -> None:
    srv = fake_server(lambda i, b: Plan(tokens=2))
    res = cli(*args(srv.url, "--num-prompts", "2", "--ingest", "--store",
                    str(tmp_path / "s.csv")))
    assert res.exit_code == 2 and "--gpu" in one_error_line(res.stderr)
    assert srv.records == []


@pytest.mark.parametrize("more, fragment", [
    (["--endpoint", "http://127.0.0.1:99999"], "http(s) URL"),
    (["--endpoint", "http://a..b:8000"], "http(s) URL"),  # an empty label (IDNA refuses it)
    (["--rate", "1e-9"], "send schedule would last"),
    (["--sweep", "40,1e-9"], "send schedule would last"),
    (["--burstiness", "1e-300", "--rate", "1"], "burstiness"),
    (["--max-concurrency", "10000000"], "--max-concurrency"),
])
def test_impossible_settings_are_refused_with_one_line(cli: Any, more: list[str],
                                                       fragment: str) -> None:
    res = cli("bench", "--endpoint", "http://127.0.0.1:9", *BASE, *more)
    assert res.exit_code == 2 and fragment in one_error_line(res.stderr)


def test_the_deadline_ends_a_hanging_test_request(fake_server: Any, cli: Any,
                                                  tmp_path: Path) -> None:
    srv = fake_server(lambda i, b: Plan(hang_headers=True))
    out = tmp_path / "partial.json"
    # the request timeout is 600 s: only the deadline can end this run
    res = cli(*args(srv.url, "--rate", "5", "--num-prompts", "10", "--out", str(out),
                    "--deadline", "0.5"))
    assert res.exit_code == 130 and "partial" in res.stderr
    result = json.loads(out.read_text())
    assert result["partial"] is True
    assert "deadline of 0.5 s reached during the test request" in result["partial_reason"]
    assert result["num_sent"] == 0


def test_ctrl_c_ends_a_hanging_test_request(fake_server: Any, tmp_path: Path) -> None:
    srv = fake_server(lambda i, b: Plan(hang_headers=True))
    out = tmp_path / "partial.json"
    cmd = [sys.executable, "-c", "from fleetplan.cli.app import run; run()",
           *args(srv.url, "--rate", "5", "--num-prompts", "10", "--out", str(out))]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env={**os.environ, "PYTHONUNBUFFERED": "1"})
    guard = time.monotonic() + 30  # (a guard against a hang, not a timing)
    while not srv.records and time.monotonic() < guard:
        time.sleep(0.02)
    proc.send_signal(signal.SIGINT)
    _, stderr = proc.communicate(timeout=30)  # the request timeout is 600 s: this is Ctrl-C
    assert proc.returncode == 130, stderr
    assert "Traceback" not in stderr and "partial" in stderr
    result = json.loads(out.read_text())
    assert result["partial"] is True
    assert "interrupted (Ctrl-C) during the test request" in result["partial_reason"]
    assert result["num_sent"] == 0
