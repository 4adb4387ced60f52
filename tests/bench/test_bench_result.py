"""The typed bench result and its file: field names, order and the derived figures."""

from __future__ import annotations

import json
from pathlib import Path

from fleetplan.bench.power import PowerReport
from fleetplan.bench.result import RunFacts, RunHeader, bench_result, summary_rows, write_results
from fleetplan.bench.runner import send_lag
from fleetplan.bench.stream import RequestOutcome

# vLLM 0.32's leading keys, then fleetplan's (the order ingest and people read)
LEADING = ["date", "endpoint_type", "backend", "label", "model_id", "tokenizer_id",
           "num_prompts", "request_rate", "burstiness", "max_concurrency", "duration",
           "completed", "failed", "total_input_tokens", "total_output_tokens",
           "request_throughput", "request_goodput", "output_throughput",
           "total_token_throughput", "input_lens", "output_lens", "ttfts", "itls", "latencies",
           "start_times", "queue_times", "errors", "max_output_tokens_per_s",
           "max_concurrent_requests", "mean_ttft_ms", "median_ttft_ms", "std_ttft_ms",
           "p50_ttft_ms", "p90_ttft_ms", "p95_ttft_ms", "p99_ttft_ms"]
TRAILING = ["engine", "engine_version", "dataset_name", "gpu", "gpu_count", "power_status",
            "power_source", "gpu_names", "gpu_energy_j", "gpu_energy_j_per_gpu",
            "gpu_avg_power_w", "gpu_sampled_power_mean_w", "gpu_sampled_power_max_w",
            "gpu_power_samples", "partial", "partial_reason", "num_sent", "seed",
            "arrival_schedule", "ignore_eos", "request_timeout_s", "endpoint", "client",
            "send_lag_p50_ms", "send_lag_p99_ms", "send_lag_max_ms", "host_cpus",
            "host_cpu_limit", "host_cpu_throttled_ms", "client_cpu_s", "client_cpu_share",
            "host_load_avg_1m", "gpu_energy_per_output_token_j"]


def _result(energy_j: float | None):
    outs = [RequestOutcome(0, True, 10.0, 0.05, [0.01, 0.03], 0.1, 4, 3, True),
            RequestOutcome(1, False, 10.5, error="HTTP 500: boom")]
    header = RunHeader("20260101-000000", "openai", "openai", None, "m", None, 2, 4.0, 1.0,
                       None)
    power = PowerReport("measured" if energy_j else "unknown", "test", ("H100",), energy_j)
    facts = RunFacts("vllm", "0.8.5", "random", "H100-SXM", 1, power, False, None, 2, 0,
                     "first-at-zero", False, 600.0, "http://x/v1/completions", "fleetplan",
                     send_lag([0.0, 0.002]))
    return bench_result(outs, t0=10.0, duration_s=2.0, header=header, facts=facts,
                        fallback_prompt_tokens=[4, 7])


def test_the_result_file_keeps_vllms_field_order(tmp_path: Path) -> None:
    res = _result(90.0)
    out = tmp_path / "r.json"
    write_results(out, [res])
    d = json.loads(out.read_text())
    keys = list(d)
    assert keys[:len(LEADING)] == LEADING and keys[-len(TRAILING):] == TRAILING
    assert d["input_lens"] == [4, 7] and d["output_lens"] == [3, 0]
    assert d["itls"] == [[0.01, 0.03], []] and d["errors"] == ["", "HTTP 500: boom"]
    assert d["mean_tpot_ms"] == res.tpot.mean_ms == 25.0  # (0.1 - 0.05) / (3 - 1)
    assert d["gpu_energy_per_output_token_j"] == 30.0  # 90 J over 3 output tokens
    assert d["send_lag_max_ms"] == res.facts.send_lag.max_ms == 2.0
    assert "server usage for 1 of 2 requests" in d["input_tokens_source"]


def test_unmeasured_figures_are_null_and_show_as_unknown() -> None:
    res = _result(None)
    assert res.to_dict()["gpu_energy_per_output_token_j"] is None
    rows = dict(summary_rows(res))
    assert rows["GPU energy (J)"] == "unknown"
    assert rows["Requests completed / failed"] == "1 / 1"


def test_a_result_reads_like_its_json_object_as_run_returned_before() -> None:
    res = _result(None)
    d = res.to_dict()
    assert res["duration"] == d["duration"] == 2.0
    assert res["errors"] == ["", "HTTP 500: boom"] and res["gpu_energy_j"] is None
    assert all(res[k] == d[k] for k in d)
