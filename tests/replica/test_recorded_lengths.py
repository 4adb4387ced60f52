"""A run whose result file recorded each request's tokens (vLLM's per-request arrays, every
``fleetplan bench`` result) is replayed with those requests, not with drawn lengths: the store
keeps them (``input_lens`` / ``output_lens``) and the replay sends them as they were sent."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
from pydantic import ValidationError

from fleetplan.errors import InputError
from fleetplan.profiles.ingest import IngestOptions, read_runs
from fleetplan.profiles.record import BenchmarkRun
from fleetplan.profiles.store import load_profiles
from fleetplan.replica.params import replica_params
from fleetplan.replica.protocol import replay
from fleetplan.replica.runs import predict_run, runs_from_frame
from fleetplan.workload.lengths import FixedLengths, LengthModel

MODEL_ID = "deepseek-ai/DeepSeek-R1-Distill-Qwen-1.5B"
KEY = ("DeepSeek-R1-Distill-Qwen-1.5B", "1xH100-PCIe")


def _result(n: int = 4, **over: object) -> dict:
    ins, outs = [10 + 7 * i for i in range(n)], [3 + i for i in range(n)]
    obj = {
        "date": "20261201-120000", "backend": "vllm", "model_id": MODEL_ID, "num_prompts": n,
        "request_rate": 2.0, "burstiness": 1.0, "duration": 3.0, "completed": n, "failed": 0,
        "total_input_tokens": sum(ins), "total_output_tokens": sum(outs),
        "request_throughput": n / 3, "output_throughput": sum(outs) / 3,
        "total_token_throughput": (sum(ins) + sum(outs)) / 3,
        "input_lens": ins, "output_lens": outs,
        "mean_ttft_ms": 25.0, "median_ttft_ms": 25.0, "p99_ttft_ms": 39.7,
        "mean_tpot_ms": 5.0, "median_tpot_ms": 5.0, "p99_tpot_ms": 9.9,
        "mean_itl_ms": 5.3, "median_itl_ms": 5.0, "p99_itl_ms": 9.8,
    }
    obj.update(over)
    return obj


def _read(tmp_path: Path, obj: dict) -> BenchmarkRun:
    f = tmp_path / "r.json"
    f.write_text(json.dumps(obj))
    runs, errors = read_runs(f, IngestOptions(gpu="NVIDIA H100 PCIe", gpu_count=1))
    assert errors == []
    (run,) = runs
    return run


def test_recorded_lengths_go_into_the_store_and_come_back_as_the_runs_requests(
        cli, tmp_path: Path) -> None:
    f, store = tmp_path / "r.json", tmp_path / "store.csv"
    f.write_text(json.dumps(_result()))
    res = cli("ingest", str(f), "--store", str(store), "--gpu", "NVIDIA H100 PCIe",
              "--gpu-count", "1")
    assert res.exit_code == 0, res.stderr
    frame = load_profiles(store).frame
    assert frame["input_lens"].tolist() == ["10 17 24 31"]
    assert frame["output_lens"].tolist() == ["3 4 5 6"]
    (run,) = runs_from_frame(frame)
    assert run.request_lengths == ((10, 17, 24, 31), (3, 4, 5, 6))
    # calibrating that store says the run was replayed with its recorded requests
    res = cli("calibrate", "--store", str(store), "--out", str(tmp_path / "cal.json"),
              "--max-nfev", "5", "--jobs", "1", "-q", "--format", "json")
    assert res.exit_code == 0, res.stderr
    (row,) = json.loads(res.stdout)["configs"]
    assert row["runs_with_recorded_lengths"] == 1


@pytest.mark.parametrize("over", [
    {"completed": 3, "failed": 1},  # a failed request's reply length is not known
    {"num_prompts": 5, "failed": 1, "completed": 4},  # arrays of the completed ones only
    {"output_lens": None},  # only one of the two arrays
    {"input_lens": [0, 17, 24, 31]},  # a prompt of no tokens
    {"partial": True},  # an interrupted run did not send them all
])
def test_lengths_are_kept_only_when_every_request_sent_has_them(tmp_path: Path, over) -> None:
    run = _read(tmp_path, _result(**over))
    assert run.input_lens is None and run.output_lens is None


@pytest.mark.parametrize("cells", [("1 2 x", "1 2 3"), ("1 2 3", None), ("1 2", "1 2"),
                                   ("1  2 3", "1 2 3"), ("0 2 3", "1 2 3")])
def test_a_store_row_with_bad_lengths_is_refused(tmp_path: Path, cells) -> None:
    good = _read(tmp_path, _result(n=3)).model_dump()
    good["input_lens"], good["output_lens"] = cells
    with pytest.raises(ValidationError):
        BenchmarkRun.model_validate(good)


def _bundled_run(rate: float):
    runs = [r for r in runs_from_frame(load_profiles().frame) if r.key == KEY
            and r.request_rate == rate]
    return runs[0]


def test_the_replay_sends_the_recorded_requests() -> None:
    run = _bundled_run(4.0)
    n = run.num_prompts
    ins, outs = (100,) * n, (50,) * n
    rec = replace(run, request_lengths=(ins, outs))
    params = replica_params(*KEY)
    one, three = predict_run(params, rec, seeds=(0,)), predict_run(params, rec, seeds=(0, 1, 2))
    assert one == three  # exact send times and recorded lengths: nothing left to chance
    # the same as a fixed 100 / 50 length model, which a recording of such requests is
    fixed = LengthModel(input=FixedLengths(value=100), output=FixedLengths(value=50))
    drawn = predict_run(params, replace(run, pinned_outputs=(),
                                        total_input_tokens=100 * n,
                                        total_output_tokens=50 * n),
                        lengths=fixed, seeds=(0,))
    assert drawn == one
    # and each request is the one recorded: one long prompt shows in the TTFT tail
    long_in = tuple(1000 if i == n // 2 else 100 for i in range(n))
    tail = predict_run(params, replace(run, request_lengths=(long_in, outs)), seeds=(0,))
    assert tail["ttft_p99_ms"] >= one["ttft_p99_ms"]
    assert tail["ttft_mean_ms"] > one["ttft_mean_ms"]
    assert tail["ttft_p50_ms"] == pytest.approx(one["ttft_p50_ms"], rel=0.05)


def test_recorded_lengths_of_another_count_are_refused() -> None:
    params = replica_params(*KEY)
    with pytest.raises(InputError, match="need 4 prompt and 4 reply counts"):
        replay(params, rate=1.0, num_prompts=4, seeds=(0,), arrival_seed=42,
               request_lengths=((10, 10, 10), (5, 5, 5)))
    with pytest.raises(InputError, match=">= 1"):
        replay(params, rate=1.0, num_prompts=2, seeds=(0,), arrival_seed=42,
               request_lengths=((10, 0), (5, 5)))
    got = replay(params, rate=1.0, num_prompts=2, seeds=(0,), arrival_seed=42,
                 request_lengths=((10**6, 10), (5, 5)))  # cut to the context, as a server would
    assert np.isfinite(got.metrics["ttft_p50_ms"].mean)
