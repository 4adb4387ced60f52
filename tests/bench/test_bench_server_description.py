"""``fleetplan bench`` records the server as the user describes it (issue 41, item 1): --gpu,
--gpu-count, --tp, --pp, --dp, --nodes, --engine-version and --engine-arg are written into each
result in the form ``ingest`` and ``validate`` read, so the description is stated once; what is
not stated is not written."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from bench_fake_server import Plan

from fleetplan.profiles.server import ENGINE_ARGS
from fleetplan.profiles.store import load_profiles

MODEL = "DeepSeek-R1-Distill-Qwen-14B"  # a catalog model: ingest and validate know it
SERVER = ("--gpu", "H100-PCIe", "--gpu-count", "1", "--tp", "1")


def _bench(cli: Any, url: str, out: Path, *extra: str) -> Any:
    return cli("bench", "--endpoint", url, "--model", MODEL, "--rate", "50",
               "--num-prompts", "16", "--input-len", "fixed:64", "--output-len", "24",
               "--power", "none", "--out", str(out), "--no-progress", *extra)


def _ttft_p50(cli: Any, *args: str) -> float:
    res = cli("validate", *args, "--format", "json")
    assert res.exit_code == 0, res.stderr
    (run,) = json.loads(res.stdout)["runs"]
    assert run["config"] == "1xH100-PCIe"
    return float(run["metrics"]["ttft_p50_ms"]["predicted"])


def test_bench_ingest_validate_round_trip_without_restating(fake_server: Any, cli: Any,
                                                            tmp_path: Path) -> None:
    srv = fake_server(lambda i, b: Plan(tokens=24, ttft_s=0.005, itl_s=0.001))
    out = tmp_path / "r.json"
    res = _bench(cli, srv.url, out, *SERVER, "--engine-arg", "max_num_seqs=2")
    assert res.exit_code == 0, res.stderr
    rec = json.loads(out.read_text())
    assert rec["gpu"] == "H100-PCIe" and rec["gpu_count"] == 1
    assert rec["tensor_parallel_size"] == 1 and rec["max_num_seqs"] == 2
    # ingest with no flag at all reads the description from the file
    store = tmp_path / "s.csv"
    assert cli("ingest", str(out), "--store", str(store)).exit_code == 0
    row = load_profiles(store).frame.iloc[-1]
    assert row["config"] == "1xH100-PCIe" and row["tp_size"] == 1
    assert row["engine_args"] == "max_num_seqs=2" and row["prefix_cache"] == "cold"
    # validate replays the run with the recorded cap: 50 req/s of 24-token replies keep more
    # than 2 sequences running, so a cap of 2 queues them and the first token comes later
    # than on the same file without the setting (the engine's default cap)
    bare = dict(rec)
    bare.pop("max_num_seqs")
    plain = tmp_path / "plain.json"
    plain.write_text(json.dumps(bare))
    assert _ttft_p50(cli, str(out)) > _ttft_p50(cli, str(plain))
    # ... and the same as stating the setting on validate's command line
    assert _ttft_p50(cli, str(out)) == _ttft_p50(cli, str(plain), "--engine-arg",
                                                 "max_num_seqs=2")


def test_the_tensor_parallel_size_is_the_replicas_gpu_count_unless_stated(
        fake_server: Any, cli: Any, tmp_path: Path) -> None:
    srv = fake_server(lambda i, b: Plan(tokens=3))
    out = tmp_path / "r.json"
    assert _bench(cli, srv.url, out, "--gpu", "H100-PCIe", "--tp", "2").exit_code == 0
    rec = json.loads(out.read_text())
    assert (rec["gpu_count"], rec["tensor_parallel_size"]) == (2, 2)


def test_bench_records_nothing_it_was_not_told(fake_server: Any, cli: Any,
                                               tmp_path: Path) -> None:
    srv = fake_server(lambda i, b: Plan(tokens=3))
    out = tmp_path / "r.json"
    assert _bench(cli, srv.url, out).exit_code == 0
    rec = json.loads(out.read_text())
    assert "tensor_parallel_size" not in rec
    assert not set(ENGINE_ARGS) & set(rec)
    assert rec["gpu"] is None and rec["gpu_count"] is None  # --power none: no NVML either
    assert rec["engine_version"] == "fake-1.0"  # the server's own /version answer


def test_engine_version_contradicting_the_server_refuses_before_measuring(
        fake_server: Any, cli: Any, tmp_path: Path) -> None:
    srv = fake_server(lambda i, b: Plan(tokens=3))
    out = tmp_path / "r.json"
    res = _bench(cli, srv.url, out, "--engine-version", "0.8.5")
    assert res.exit_code == 2 and res.stderr.count("\n") == 1, res.stderr
    assert "--engine-version 0.8.5" in res.stderr and "fake-1.0" in res.stderr
    assert not out.exists()
    # a release the server's version extends (fake-1 -> fake-1.0) agrees; the server's own,
    # more precise answer is recorded
    res = _bench(cli, srv.url, out, "--engine-version", "fake-1")
    assert res.exit_code == 0, res.stderr
    assert json.loads(out.read_text())["engine_version"] == "fake-1.0"


def test_bad_server_options_are_one_line_before_measuring(cli: Any, tmp_path: Path) -> None:
    base = ("--endpoint", "http://127.0.0.1:9", "--model", MODEL, "--power", "none")
    for args, words in (
            (["--engine-arg", "max_num_seqs=0"], ["--engine-arg", "max_num_seqs=0", ">= 1"]),
            (["--engine-arg", "speed=fast"], ["unknown key 'speed'"]),
            (["--gpu-count", "3", "--tp", "2"], ["--tp 2", "does not divide", "--gpu-count 3"]),
            (["--engine-arg", "max_num_seqs=64", "--engine-arg", "max_num_batched_tokens=32"],
             ["max_num_batched_tokens=32 is below max_num_seqs=64"])):
        res = cli("bench", *base, *args)
        assert res.exit_code == 2 and res.stderr.count("\n") == 1, res.stderr
        for w in words:
            assert w in res.stderr, res.stderr


def test_a_pipeline_parallel_server_is_recorded_and_validated_as_laid_out(
        fake_server: Any, cli: Any, tmp_path: Path) -> None:
    """--pp, --dp and --nodes are written as vLLM's own keys; validate then predicts the run
    on that layout with no flag restated. --ingest refuses them before measuring (the store
    keeps one tensor-parallel group on one node per run)."""
    srv = fake_server(lambda i, b: Plan(tokens=24, ttft_s=0.005, itl_s=0.001))
    out = tmp_path / "r.json"
    res = _bench(cli, srv.url, out, "--gpu", "H100-PCIe", "--tp", "1", "--pp", "2")
    assert res.exit_code == 0, res.stderr
    rec = json.loads(out.read_text())
    assert (rec["gpu_count"], rec["tensor_parallel_size"], rec["pipeline_parallel_size"]) == (
        2, 1, 2)
    assert "data_parallel_size" not in rec and "num_nodes" not in rec
    got = cli("validate", str(out), "--format", "json")
    assert got.exit_code == 0, got.stderr
    (run,) = json.loads(got.stdout)["runs"]
    assert run["config"] == "2xH100-PCIe+tp1pp2"
    ingested = tmp_path / "never.json"
    res = _bench(cli, srv.url, ingested, "--gpu", "H100-PCIe", "--tp", "1", "--dp", "2",
                 "--ingest", "--store", str(tmp_path / "s.csv"))
    assert res.exit_code == 2 and res.stderr.count("\n") == 1, res.stderr
    assert "--ingest with --dp 2" in res.stderr and "fleetplan validate" in res.stderr
    assert not ingested.exists() and not (tmp_path / "s.csv").exists()
