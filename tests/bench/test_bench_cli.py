"""``fleetplan bench`` end to end against the in-process server; its results feed ``ingest``."""

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

from fleetplan.profiles.ingest import IngestOptions, read_runs
from fleetplan.profiles.store import load_profiles

SERVED = str(Path(__file__).resolve().parents[1] / "data" / "catalog-served-names")


def test_sweep_writes_vllm_shaped_results_and_ingests_them(fake_server: Any, cli: Any,
                                                           tmp_path: Path) -> None:
    srv = fake_server(lambda i, b: Plan(tokens=5, ttft_s=0.01, itl_s=0.002))
    out, store = tmp_path / "r.jsonl", tmp_path / "store.csv"
    res = cli("bench", "--endpoint", srv.url, "--model", "org/tiny-model", "--sweep", "40,20",
              "--num-prompts", "12", "--input-len", "fixed:16", "--output-len", "5",
              "--power", "none", "--out", str(out), "--ingest", "--store", str(store),
              "--catalog", SERVED,  # a user catalog naming the served model
              "--gpu", "H100-SXM", "--gpu-count", "1", "--no-progress")
    assert res.exit_code == 0, res.stderr
    assert "TTFT mean / p50 / p99 (ms)" in res.stdout and "40.0 req/s" in res.stdout
    lines = out.read_text().splitlines()
    assert len(lines) == 2
    first = json.loads(lines[0])
    for key in ("duration", "completed", "failed", "total_input_tokens", "total_output_tokens",
                "request_throughput", "output_throughput", "total_token_throughput",
                "mean_ttft_ms", "median_ttft_ms", "p99_ttft_ms", "mean_tpot_ms", "p99_itl_ms",
                "mean_e2el_ms", "ttfts", "itls", "input_lens", "output_lens", "errors",
                "gpu", "gpu_count", "gpu_energy_j", "gpu_avg_power_w", "partial"):
        assert key in first, key
    assert first["request_rate"] == 40.0 and first["completed"] == 12
    assert first["gpu_energy_j"] is None and first["power_status"] == "unknown"
    assert first["input_lens"] == [16] * 12 and first["output_lens"] == [5] * 12
    st = load_profiles(store)
    assert len(st) == 2
    row = st.frame[st.frame["request_rate"] == 40.0].iloc[0]
    assert row["model"] == "tiny-model" and row["config"] == "1xH100-SXM"
    assert row["completed"] == 12 and not row["partial"]
    assert abs(row["ttft_mean_ms"] - first["mean_ttft_ms"]) < 1e-6
    # every request recorded: a replay of this run sends these requests, not drawn ones
    assert row["input_lens"] == " ".join(["16"] * 12)
    assert row["output_lens"] == " ".join(["5"] * 12)


def test_bench_result_reads_back_with_the_vllm_parser(fake_server: Any, cli: Any,
                                                      tmp_path: Path) -> None:
    srv = fake_server(lambda i, b: Plan(tokens=3, status=500 if i == 3 else 200))
    out = tmp_path / "one.json"
    res = cli("bench", "--endpoint", srv.url, "--model", "m", "--rate", "50",
              "--num-prompts", "6", "--input-len", "8", "--output-len", "3", "--power", "none",
              "--out", str(out), "--no-progress", "--format", "json")
    assert res.exit_code == 0, res.stderr
    shown = json.loads(res.stdout)
    assert shown["failed"] == 1 and shown["errors"].count("") == 5
    runs, errors = read_runs(out, IngestOptions(gpu="RTX-4090", gpu_count=2,
                                                known_models={"m"}))  # (not the catalog's)
    assert errors == [] and len(runs) == 1
    run = runs[0]
    assert run.failed == 1 and run.completed == 5 and run.config == "2xRTX-4090"
    assert run.source_format == "vllm" and run.engine == "vllm"
    assert abs(run.ttft_p99_ms - shown["p99_ttft_ms"]) < 1e-6


def test_bench_without_gpu_cannot_ingest_and_says_how(fake_server: Any, cli: Any,
                                                      tmp_path: Path) -> None:
    srv = fake_server(lambda i, b: Plan(tokens=2))
    res = cli("bench", "--endpoint", srv.url, "--model", "m", "--num-prompts", "2",
              "--input-len", "4", "--output-len", "2", "--power", "none", "--ingest",
              "--store", str(tmp_path / "s.csv"), "--no-progress")
    assert res.exit_code == 2
    assert "--gpu" in res.stderr and res.stderr.count("\n") == 1


@pytest.mark.parametrize("args, msg", [
    (["--rate", "2", "--sweep", "1,2"], "not both"),
    (["--sweep", "4,x"], "not a number"),
    (["--input-len", "12"], "both --input-len and --output-len"),
    (["--input-len", "cubic:3", "--output-len", "3"], "unknown kind"),
    (["--api", "rpc"], "--api"),
    (["--endpoint", "localhost:8000"], "http(s) URL"),
])
def test_bad_options_fail_with_one_line(cli: Any, args: list[str], msg: str) -> None:
    base = ["bench", "--endpoint", "http://127.0.0.1:9", "--model", "m", "--power", "none"]
    res = cli(*base, *args)
    assert res.exit_code == 2 and msg in res.stderr, res.stderr


def test_ctrl_c_in_the_cli_writes_the_partial_result(fake_server: Any, tmp_path: Path) -> None:
    srv = fake_server(lambda i, b: Plan(tokens=2, ttft_s=0.01))
    out = tmp_path / "partial.json"
    cmd = [sys.executable, "-c", "from fleetplan.cli.app import run; run()", "bench",
           "--endpoint", srv.url, "--model", "m", "--rate", "5", "--num-prompts", "100",
           "--input-len", "4", "--output-len", "2", "--power", "none", "--out", str(out),
           "--no-progress"]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env={**os.environ, "PYTHONUNBUFFERED": "1"})
    deadline = time.monotonic() + 30
    while len(srv.records) < 4 and time.monotonic() < deadline:
        time.sleep(0.05)
    proc.send_signal(signal.SIGINT)
    stdout, stderr = proc.communicate(timeout=30)
    assert proc.returncode == 130, stderr
    result = json.loads(out.read_text())
    assert result["partial"] is True and "interrupted" in result["partial_reason"]
    assert 2 <= result["completed"] < 100
    assert "partial" in stderr


def _at_third_request(monkeypatch: pytest.MonkeyPatch, event: Any) -> Any:
    """Make ``bench`` call ``event()`` when its third request is done; returns the real
    ``run_sweep`` (the command imports it from :mod:`fleetplan.bench` when it runs)."""
    import fleetplan.bench as bench_pkg

    real = bench_pkg.run_sweep

    def sweep(cfg: Any, rates: Any, reqs: Any, on_start: Any, on_progress: Any,
              *rest: Any) -> Any:
        def tick(done: int, failed: int, total: int) -> None:
            on_progress(done, failed, total)
            if done == 3:
                event()
        return real(cfg, rates, reqs, on_start, tick, *rest)

    monkeypatch.setattr(bench_pkg, "run_sweep", sweep)
    return real


def test_bench_warns_when_the_client_fell_behind_its_schedule(fake_server: Any, cli: Any,
                                                              monkeypatch: pytest.MonkeyPatch
                                                              ) -> None:
    srv = fake_server(lambda i, b: Plan(tokens=2))
    # the event loop blocked, as by a CPU-starved client
    _at_third_request(monkeypatch, lambda: time.sleep(0.3))
    args = ("bench", "--endpoint", srv.url, "--model", "m", "--rate", "40", "--num-prompts",
            "30", "--input-len", "8", "--output-len", "2", "--power", "none", "--no-progress",
            "--format", "json")
    res = cli(*args)
    assert res.exit_code == 0, res.stderr
    assert json.loads(res.stdout)["send_lag_max_ms"] >= 200.0
    assert "behind schedule" in res.stderr and "short of CPU" in res.stderr


def test_bench_reports_the_hosts_cpus_and_warns_when_its_cgroup_was_throttled(
        fake_server: Any, cli: Any, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    import fleetplan.bench.host as host

    cgroup = tmp_path / "cgroup"
    cgroup.mkdir()
    (cgroup / "cpu.max").write_text("200000 100000\n")  # a 2-CPU container
    (cgroup / "cpu.stat").write_text("throttled_usec 5000000\n")
    monkeypatch.setattr(host, "CGROUP_ROOT", cgroup)
    srv = fake_server(lambda i, b: Plan(tokens=2))
    # the kernel throttles the container for 40 ms mid-run
    real = _at_third_request(
        monkeypatch, lambda: (cgroup / "cpu.stat").write_text("throttled_usec 5040000\n"))
    args = ("bench", "--endpoint", srv.url, "--model", "m", "--rate", "40", "--num-prompts",
            "10", "--input-len", "8", "--output-len", "2", "--power", "none", "--no-progress",
            "--format", "json")
    res = cli(*args)
    assert res.exit_code == 0, res.stderr
    d = json.loads(res.stdout)
    assert d["host_cpu_limit"] == 2.0 and d["host_cpu_throttled_ms"] == pytest.approx(40.0)
    assert d["host_cpus"] >= 1 and d["client_cpu_s"] > 0 and d["client_cpu_share"] > 0
    assert "cgroup was throttled for 40 ms" in " ".join(res.stderr.split())
    import fleetplan.bench as bench_pkg

    monkeypatch.setattr(bench_pkg, "run_sweep", real)
    calm = cli(*args)  # nothing throttled: the figures, no warning
    assert calm.exit_code == 0 and json.loads(calm.stdout)["host_cpu_throttled_ms"] == 0.0
    assert "throttled" not in calm.stderr
