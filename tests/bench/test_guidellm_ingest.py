"""``fleetplan ingest`` reads GuideLLM run reports (GuideLLM 0.4+ and 0.2/0.3 shapes).

The report is built here from GuideLLM's documented schema (``GenerativeBenchmarksReport``:
``args``, ``benchmarks[]`` with ``config.strategy``, ``scheduler_metrics``, ``metrics`` of
``StatusDistributionSummary`` = successful/incomplete/errored/total ``DistributionSummary``, and
per-request ``requests``) from known per-request values, so the expected store figures are exact.
"""

from __future__ import annotations

import copy
import json
import math
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from fleetplan.profiles.ingest import IngestOptions, read_runs

PCTS = {"p001": 0.1, "p01": 1, "p05": 5, "p10": 10, "p25": 25, "p50": 50, "p75": 75,
        "p90": 90, "p95": 95, "p99": 99, "p999": 99.9}


def dist(values: list[float], weights: list[float] | None = None) -> dict[str, Any]:
    """A GuideLLM DistributionSummary (weighted percentiles as GuideLLM computes them)."""
    if not values:
        return {"mean": 0.0, "median": 0.0, "mode": 0.0, "variance": 0.0, "std_dev": 0.0,
                "min": 0.0, "max": 0.0, "count": 0, "total_sum": 0.0,
                "percentiles": dict.fromkeys(PCTS, 0.0), "pdf": None}
    v = np.asarray(values, float)
    w = np.ones_like(v) if weights is None else np.asarray(weights, float)
    order = np.argsort(v)
    v, w = v[order], w[order]
    p = w / w.sum()
    cdf = np.cumsum(p)
    mean = float((v * p).sum())
    var = float(((v - mean) ** 2 * p).sum())
    pct = {k: float(v[min(np.searchsorted(cdf, q / 100, side="left"), len(v) - 1)])
           for k, q in PCTS.items()}
    return {"mean": mean, "median": pct["p50"], "mode": float(v[np.argmax(p)]),
            "variance": var, "std_dev": math.sqrt(var), "min": float(v[0]), "max": float(v[-1]),
            "count": int(round(w.sum())), "total_sum": mean * round(w.sum()),
            "percentiles": pct, "pdf": None}


def sds(values: list[float], weights: list[float] | None = None) -> dict[str, Any]:
    return {"successful": dist(values, weights), "incomplete": dist([]), "errored": dist([]),
            "total": dist(values, weights)}


def benchmark(strategy: dict[str, Any], n: int, seed: int, errored: int = 0) -> dict[str, Any]:
    rng = np.random.default_rng(seed)
    ttft = rng.uniform(40, 120, n)           # ms
    itl = rng.uniform(15, 25, n)             # ms, per-request mean gap
    out = rng.integers(50, 200, n)
    prompt = rng.integers(100, 400, n)
    lat = (ttft + itl * (out - 1)) / 1e3     # s
    t0 = 1_764_460_000.0
    dur = 60.0
    reqs = [{"request_id": f"r{i}", "prompt_tokens": int(prompt[i]),
             "output_tokens": int(out[i]), "request_latency": float(lat[i]),
             "time_to_first_token_ms": float(ttft[i]),
             "time_per_output_token_ms": float(lat[i] * 1e3 / out[i]),
             "inter_token_latency_ms": float(itl[i])} for i in range(n)]
    return {
        "type_": "generative_benchmark",
        "config": {"id_": f"b{seed}", "run_id": "run-1", "run_index": seed,
                   "strategy": strategy, "constraints": {"max_seconds": {"max_duration": dur}},
                   "sample_requests": None, "warmup": {"percent": None, "value": None,
                                                       "mode": "prefer_duration"},
                   "cooldown": {"percent": None, "value": None, "mode": "prefer_duration"},
                   "prefer_response_metrics": True, "profile": {"type_": "sweep"},
                   "requests": {"data": ["prompt_tokens=256,output_tokens=128"]},
                   "backend": {"type_": "openai_http", "target": "http://localhost:8000"},
                   "environment": {"platform": "linux"}},
        "scheduler_state": {"node_id": 0, "num_processes": 1, "start_time": t0,
                            "end_time": t0 + dur, "created_requests": n + errored,
                            "processed_requests": n + errored, "successful_requests": n,
                            "errored_requests": errored, "cancelled_requests": 0},
        "scheduler_metrics": {"start_time": t0, "request_start_time": t0,
                              "measure_start_time": t0, "measure_end_time": t0 + dur,
                              "request_end_time": t0 + dur, "end_time": t0 + dur,
                              "requests_made": {"successful": n, "incomplete": 0,
                                                "errored": errored, "total": n + errored}},
        "metrics": {
            "request_totals": {"successful": n, "incomplete": 0, "errored": errored,
                               "total": n + errored},
            "requests_per_second": sds([n / dur]),
            "request_concurrency": sds([4.0]),
            "request_latency": sds(lat.tolist()),
            "prompt_token_count": sds(prompt.astype(float).tolist()),
            "output_token_count": sds(out.astype(float).tolist()),
            "total_token_count": sds((prompt + out).astype(float).tolist()),
            "time_to_first_token_ms": sds(ttft.tolist()),
            "time_per_output_token_ms": sds((lat * 1e3 / out).tolist(), out.tolist()),
            "inter_token_latency_ms": sds(itl.tolist(), (out - 1).tolist()),
            "output_tokens_per_second": sds([float(out.sum() / dur)]),
            "tokens_per_second": sds([float((out + prompt).sum() / dur)]),
        },
        "requests": {"successful": reqs, "incomplete": [], "errored": [], "total": None},
        "start_time": t0, "end_time": t0 + dur, "duration": dur,
        "warmup_duration": 0.0, "cooldown_duration": 0.0,
    }


def report() -> dict[str, Any]:
    return {
        "metadata": {"version": 1, "guidellm_version": "0.4.0", "python_version": "3.12.3",
                     "platform": "Linux"},
        "args": {"target": "http://localhost:8000", "model": "meta-llama/Meta-Llama-3-8B-Instruct",
                 "backend": "openai_http", "profile": "sweep", "rate": [4],
                 "data": ["prompt_tokens=256,output_tokens=128"], "max_seconds": 60},
        "benchmarks": [benchmark({"type_": "synchronous"}, 30, 1),
                       benchmark({"type_": "throughput", "max_concurrency": None}, 300, 2),
                       benchmark({"type_": "poisson", "rate": 2.5, "random_seed": 42}, 140, 3,
                                 errored=2)],
    }


def write(tmp_path: Path, obj: dict[str, Any]) -> Path:
    p = tmp_path / "benchmarks.json"
    p.write_text(json.dumps(obj))
    return p


def test_every_benchmark_becomes_a_run_with_vllm_definitions(tmp_path: Path) -> None:
    rep = report()
    runs, errors = read_runs(write(tmp_path, rep), IngestOptions(gpu="L40S", gpu_count=1))
    assert errors == [] and len(runs) == 3
    sync, thr, poi = runs
    assert {r.source_format for r in runs} == {"guidellm"}
    assert len({r.run_id for r in runs}) == 3
    assert sync.model == "Meta-Llama-3-8B-Instruct" and sync.config == "1xL40S"
    assert math.isinf(sync.request_rate) and sync.max_concurrency == 1
    assert math.isinf(thr.request_rate) and thr.max_concurrency is None
    assert poi.request_rate == 2.5 and poi.burstiness == 1.0
    assert poi.completed == 140 and poi.failed == 2 and poi.num_prompts == 142
    b = rep["benchmarks"][2]
    reqs = b["requests"]["successful"]
    ttft = np.array([r["time_to_first_token_ms"] for r in reqs])
    itl = np.array([r["inter_token_latency_ms"] for r in reqs])
    out = np.array([r["output_tokens"] for r in reqs])
    lat = np.array([r["request_latency"] for r in reqs])
    assert poi.duration_s == 60.0
    assert poi.total_output_tokens == out.sum()
    assert poi.request_throughput == pytest.approx(140 / 60)
    assert poi.output_throughput == pytest.approx(out.sum() / 60)
    assert poi.ttft_mean_ms == pytest.approx(ttft.mean())
    assert poi.e2e_mean_ms == pytest.approx(lat.mean() * 1e3)
    # TPOT: per request, unweighted, from the per-request records (vLLM's definition)
    assert poi.tpot_mean_ms == pytest.approx(itl.mean())
    assert poi.tpot_p99_ms == pytest.approx(np.percentile(itl, 99))
    # ITL mean over every gap = decode time / gaps
    assert poi.itl_mean_ms == pytest.approx((itl * (out - 1)).sum() / (out - 1).sum())
    assert poi.date == "20251129-234640"


def test_without_per_request_records_tpot_uses_the_weighted_summary(tmp_path: Path) -> None:
    rep = report()
    for b in rep["benchmarks"]:
        b["requests"] = {"successful": [], "incomplete": [], "errored": [], "total": None}
    runs, errors = read_runs(write(tmp_path, rep), IngestOptions(gpu="L40S", gpu_count=1))
    assert errors == []
    s = rep["benchmarks"][2]["metrics"]["inter_token_latency_ms"]["successful"]
    assert runs[2].tpot_mean_ms == pytest.approx(s["mean"])
    assert runs[2].tpot_p99_ms == pytest.approx(s["percentiles"]["p99"])


def test_guidellm_0_3_report_shape(tmp_path: Path) -> None:
    rep = report()
    del rep["args"]
    for b in rep["benchmarks"]:
        b["args"] = {"strategy": b.pop("config")["strategy"], "max_duration": 60}
        b["worker"] = {"backend_model": "Qwen/QwQ-32B-Preview",
                       "backend_target": "http://localhost:8000"}
        b["run_stats"] = {"start_time": b["start_time"], "end_time": b["end_time"]}
        del b["scheduler_metrics"], b["scheduler_state"], b["duration"]
        b["request_totals"] = b["metrics"].pop("request_totals")
    runs, errors = read_runs(write(tmp_path, rep), IngestOptions(gpu="H100-SXM", gpu_count=2))
    assert errors == [] and len(runs) == 3
    assert runs[0].model == "QwQ-32B-Preview" and runs[0].config == "2xH100-SXM"
    assert runs[2].duration_s == 60.0 and runs[2].completed == 140


def test_hardware_must_be_given(tmp_path: Path) -> None:
    runs, errors = read_runs(write(tmp_path, report()))
    assert runs == [] and len(errors) == 1 and "--gpu and --gpu-count" in errors[0]
    rep = report()
    rep["extras"] = {"gpu": "NVIDIA H200", "gpu_count": 1}
    runs, errors = read_runs(write(tmp_path, rep))
    assert errors == [] and runs[0].config == "1xH200"


def test_constant_rate_benchmarks_are_refused_with_the_reason(tmp_path: Path) -> None:
    rep = report()
    rep["benchmarks"].append(benchmark({"type_": "constant", "rate": 1.5}, 50, 4))
    runs, errors = read_runs(write(tmp_path, rep), IngestOptions(gpu="L40S", gpu_count=1))
    assert runs == [] and "benchmarks[3]" in errors[0] and "constant-rate" in errors[0]


@pytest.mark.parametrize("path, value, msg", [
    (("metrics", "time_to_first_token_ms", "successful", "mean"), -1.0, ">= 0"),
    (("metrics", "time_to_first_token_ms"), None, "missing"),
    (("config", "strategy"), {"type_": "warp"}, "unknown strategy"),
    (("metrics", "output_token_count", "successful", "total_sum"), "x", "not a finite"),
])
def test_broken_fields_are_named(tmp_path: Path, path: tuple[str, ...], value: Any,
                                 msg: str) -> None:
    rep = copy.deepcopy(report())
    node = rep["benchmarks"][1]
    for key in path[:-1]:
        node = node[key]
    node[path[-1]] = value
    runs, errors = read_runs(write(tmp_path, rep), IngestOptions(gpu="L40S", gpu_count=1))
    assert runs == [] and msg in errors[0] and "benchmarks[1]" in errors[0]


def test_cli_ingests_a_guidellm_report(tmp_path: Path, cli: Any) -> None:
    src = write(tmp_path, report())
    store = tmp_path / "s.csv"
    res = cli("ingest", str(src), "--store", str(store), "--gpu", "L40S", "--gpu-count", "1")
    assert res.exit_code == 0, res.stderr
    assert "3 run(s) added" in res.stdout
    res = cli("ingest", str(src), "--store", str(store), "--gpu", "L40S", "--gpu-count", "1")
    assert "0 run(s) added, 3 already present" in res.stdout
