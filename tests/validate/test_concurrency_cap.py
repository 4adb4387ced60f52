"""A result file of a client that capped the requests in flight (vLLM's ``--max-concurrency``,
guidellm's synchronous and concurrent strategies) is replayed with that cap, by ``validate``
and ``calibrate`` alike. Before, the cap was stored and then dropped: a concurrency sweep was
replayed as bursts of every prompt at once."""

from __future__ import annotations

import json

import pytest


def _predicted(cli, run) -> dict[str, float]:
    res = cli("validate", str(run), "--gpu", "H100-PCIe", "--gpu-count", "1", "--format",
              "json")
    assert res.exit_code == 0, res.stderr
    (rec,) = json.loads(res.stdout)["runs"]
    return {m: row["predicted"] for m, row in rec["metrics"].items()}


def test_one_request_in_flight_is_a_closed_loop_of_one(cli, foreign_run) -> None:
    capped = foreign_run("one.json", max_concurrency=1)
    free = foreign_run("free.json")
    rec = json.loads(capped.read_text())
    mean_out = rec["total_output_tokens"] / rec["completed"]
    one, burst = _predicted(cli, capped), _predicted(cli, free)
    # Little's law with one request in flight: each request starts when the last one ends
    e2e_s = (one["ttft_mean_ms"] + (mean_out - 1) * one["tpot_p50_ms"]) / 1e3
    assert one["request_throughput"] == pytest.approx(1 / e2e_s, rel=0.1)
    # alone on the server: no queue before the first token, and far fewer requests a second
    # than the same 200 prompts sent at 4 req/s with no cap
    assert one["request_throughput"] < 0.5 * burst["request_throughput"]
    assert one["ttft_p99_ms"] < burst["ttft_p99_ms"]


def test_a_cap_above_the_load_changes_nothing(cli, foreign_run) -> None:
    # at 4 req/s about a dozen requests are in flight: a cap of 512 never binds
    free = _predicted(cli, foreign_run("free.json"))
    loose = _predicted(cli, foreign_run("loose.json", max_concurrency=512))
    assert loose == pytest.approx(free, rel=1e-9)
