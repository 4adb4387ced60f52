"""vLLM result files of 0.6.x, 0.8.x and current ``vllm bench serve`` (``tests/data/vllm-formats``)
are ingested, with and without per-request arrays; GPU and parallel degree come from the options
or the file; pipeline-parallel and multi-node runs are refused by the store,
never read as tensor-parallel."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from fleetplan.profiles.ingest import IngestOptions, read_runs
from fleetplan.profiles.store import load_profiles

FORMATS = Path(__file__).resolve().parents[1] / "data" / "vllm-formats"
L40S = IngestOptions(gpu="NVIDIA L40S", gpu_count=1)


def _read(name: str, opt: IngestOptions | None = L40S) -> Any:
    runs, errors = read_runs(FORMATS / name, opt)
    assert errors == [] and len(runs) == 1, errors
    return runs[0]


def _raw(name: str) -> dict[str, Any]:
    return json.loads((FORMATS / name).read_text())


@pytest.mark.parametrize("name", sorted(p.name for p in FORMATS.glob("*.json")))
def test_every_generation_is_read_with_vllm_definitions(name: str) -> None:
    raw = _raw(name)
    run = _read(name, None if "0.8.5-benchmark_serving-detailed" in name else L40S)
    assert run.num_prompts == 5 and run.completed == 4
    assert run.failed == 1  # stated (current) or num_prompts - completed (older)
    assert run.ttft_mean_ms == raw["mean_ttft_ms"] and run.ttft_p50_ms == raw["median_ttft_ms"]
    assert run.tpot_p99_ms == raw["p99_tpot_ms"] and run.itl_mean_ms == raw["mean_itl_ms"]
    if "ttfts" in raw:  # statistics vLLM did not write come from the per-request arrays
        ok = [not e for e in raw["errors"]]
        lat = raw.get("latencies") or [t + sum(g) for t, g in zip(raw["ttfts"], raw["itls"],
                                                                   strict=True)]
        e2e = np.array([x for x, good in zip(lat, ok, strict=True) if good]) * 1e3
        assert run.e2e_p50_ms == pytest.approx(float(np.median(e2e)))
        ttft = np.array([x for x, good in zip(raw["ttfts"], ok, strict=True) if good]) * 1e3
        assert run.ttft_p90_ms == pytest.approx(float(np.percentile(ttft, 90)))
    else:
        assert run.e2e_p50_ms == raw.get("median_e2el_ms")  # none without arrays or keys


def test_summary_only_all_at_once_file() -> None:
    run = _read("vllm-0.8.5-benchmark_serving-summary.json")
    assert math.isinf(run.request_rate) and run.max_concurrency == 8
    assert run.tpot_p90_ms == _raw("vllm-0.8.5-benchmark_serving-summary.json")["p90_tpot_ms"]


def test_gpu_and_tensor_parallel_degree_from_the_file() -> None:
    run = _read("vllm-0.8.5-benchmark_serving-detailed.json", None)
    assert run.config == "2xRTX-4090" and run.gpu_count == 2 and run.tp_size == 2
    assert run.model == "DeepSeek-R1-Distill-Qwen-14B" and run.engine == "vllm"


def test_tensor_parallel_size_alone_gives_the_gpu_count(tmp_path: Path) -> None:
    raw = _raw("vllm-0.8.5-benchmark_serving-detailed.json")
    raw.pop("gpu_count")
    f = tmp_path / "tp-only.json"
    f.write_text(json.dumps(raw))
    runs, errors = read_runs(f)
    assert errors == [] and runs[0].gpu_count == 2 and runs[0].tp_size == 2


@pytest.mark.parametrize("model_id", [
    "/data/models/DeepSeek-R1-Distill-Qwen-14B",
    "/home/u/.cache/huggingface/hub/models--deepseek-ai--DeepSeek-R1-Distill-Qwen-14B/"
    "snapshots/1df8507178afcc1bef68cd8c393f61a886323761",
    # a repository without an organisation: models--<name>
    "/home/u/.cache/huggingface/hub/models--DeepSeek-R1-Distill-Qwen-14B/snapshots/1df8507",
])
def test_a_server_started_on_a_local_folder_names_its_model(tmp_path: Path,
                                                            model_id: str) -> None:
    """vLLM records the ``--model`` it was started with: a hub id, a local folder, or a
    snapshot in the Hugging Face cache, whose last part is a revision hash, not a model."""
    raw = _raw("vllm-0.8.5-benchmark_serving-detailed.json")
    raw["model_id"] = raw["tokenizer_id"] = model_id
    f = tmp_path / "local.json"
    f.write_text(json.dumps(raw))
    runs, errors = read_runs(f)
    assert errors == [] and runs[0].model == "DeepSeek-R1-Distill-Qwen-14B"


def test_a_served_model_name_is_read_through_the_tokenizer(tmp_path: Path) -> None:
    """A server started with ``--served-model-name bench`` records ``bench`` as the model; the
    client's ``tokenizer_id`` (the checkpoint it counted tokens with) names the model then.
    Where neither is known the one line names both."""
    raw = _raw("vllm-0.8.5-benchmark_serving-detailed.json")
    raw["model_id"] = "bench"
    raw["tokenizer_id"] = "/models/DeepSeek-R1-Distill-Qwen-14B"
    f = tmp_path / "served.json"
    f.write_text(json.dumps(raw))
    runs, errors = read_runs(f)
    assert errors == [] and runs[0].model == "DeepSeek-R1-Distill-Qwen-14B"
    assert runs[0].model_id == "bench"
    raw["tokenizer_id"] = "acme/Unknown-7B"
    f.write_text(json.dumps(raw))
    runs, errors = read_runs(f)
    assert runs == [] and len(errors) == 1
    msg = str(errors[0])
    assert "'bench'" in msg and "Unknown-7B" in msg and "model_id" in msg and "\n" not in msg
    # a hub id names its own checkpoint: an unknown one is refused whatever the tokenizer
    raw["model_id"], raw["tokenizer_id"] = "acme/Finetune-14B", "DeepSeek-R1-Distill-Qwen-14B"
    f.write_text(json.dumps(raw))
    runs, errors = read_runs(f)
    assert runs == [] and "Finetune-14B" in str(errors[0])


def test_files_without_hardware_say_what_to_give() -> None:
    runs, errors = read_runs(FORMATS / "vllm-bench-serve-current-summary.json")
    assert runs == [] and "gpu_name" in errors[0] and "--gpu" in errors[0]
    runs, errors = read_runs(FORMATS / "vllm-bench-serve-current-summary.json",
                             IngestOptions(gpu="L40S"))
    assert runs == [] and "--gpu-count" in errors[0]


@pytest.mark.parametrize("blank", ["", "  "])
def test_a_blank_gpu_field_is_not_recorded_and_the_options_give_it(tmp_path: Path,
                                                                   blank: str) -> None:
    """A script that fills ``gpu_count`` / ``gpu_name`` from an unset variable writes "": the
    file does not state them, so ``--gpu`` / ``--gpu-count`` describe the server."""
    raw = _raw("vllm-0.8.5-benchmark_serving-detailed.json")
    raw.update(gpu_count=blank, gpu_name=blank, tensor_parallel_size=blank)
    f = tmp_path / "blank.json"
    f.write_text(json.dumps(raw))
    runs, errors = read_runs(f, IngestOptions(gpu="RTX-4090", gpu_count=2))
    assert errors == [] and runs[0].config == "2xRTX-4090" and runs[0].tp_size == 2
    runs, errors = read_runs(f, IngestOptions(gpu="RTX-4090"))
    assert runs == [] and errors[0].endswith(
        "missing required field 'gpu_count' (give it with --gpu-count)")
    raw["gpu_count"] = "two"  # not blank: still refused as the value it is
    f.write_text(json.dumps(raw))
    runs, errors = read_runs(f, IngestOptions(gpu="RTX-4090", gpu_count=2))
    assert runs == [] and "field gpu_count: 'two' is not a whole number" in errors[0]


def test_a_file_stating_more_tensor_parallelism_than_gpus_given_is_refused(
        tmp_path: Path) -> None:
    raw = _raw("vllm-0.8.5-benchmark_serving-detailed.json")
    del raw["gpu_count"]  # the file states tensor_parallel_size 2 only
    f = tmp_path / "tp2.json"
    f.write_text(json.dumps(raw))
    runs, errors = read_runs(f, IngestOptions(gpu_count=1))
    assert runs == [] and "field tensor_parallel_size: 2 must be between 1 and 1" in errors[0]


def test_a_file_contradicting_the_stated_gpu_count_is_refused_naming_both() -> None:
    runs, errors = read_runs(FORMATS / "vllm-0.8.5-benchmark_serving-detailed.json",
                             IngestOptions(gpu_count=1))
    assert runs == [] and errors[0].endswith(
        "line 1: --gpu-count 1 contradicts the file's gpu_count 2")


@pytest.mark.parametrize(("key", "value", "expect"), [
    ("pipeline_parallel_size", "2", "pipeline-parallel runs are not kept in the profile store"),
    ("pp_size", 4, "pipeline-parallel runs are not kept in the profile store"),
    ("num_nodes", 2, "multi-node runs are not kept in the profile store"),
    ("nnodes", "2", "multi-node runs are not kept in the profile store"),
])
def test_pipeline_parallel_and_multi_node_runs_are_refused_not_read_as_tp(
        tmp_path: Path, key: str, value: Any, expect: str) -> None:
    raw = _raw("vllm-0.8.5-benchmark_serving-detailed.json")
    raw[key] = value
    f = tmp_path / "pp.json"
    f.write_text(json.dumps(raw))
    runs, errors = read_runs(f)
    assert runs == [] and f"field {key}: {value}: {expect}" in errors[0]


def test_the_folder_ingests_through_the_cli(tmp_path: Path, cli: Any) -> None:
    store = tmp_path / "s.csv"
    res = cli("ingest", str(FORMATS), "--store", str(store), "--gpu", "L40S", "--gpu-count", "1")
    # --gpu L40S refuses the file that states another GPU (2 x RTX-4090): it alone
    assert res.exit_code == 2 and "Traceback" not in res.stderr
    assert res.stderr.count("fleetplan: error: ") == 1
    assert "NVIDIA-GeForce-RTX-4090 (RTX-4090) contradicts --gpu L40S" in res.stderr
    assert len(load_profiles(store)) == 4


def test_a_06_file_has_no_traffic_shape_keys_and_reads_as_poisson_without_a_cap() -> None:
    """0.6.3 benchmark_serving.py wrote neither burstiness nor max_concurrency (lines 693-713)."""
    raw = _raw("vllm-0.6.3-benchmark_serving.json")
    assert "burstiness" not in raw and "max_concurrency" not in raw and "failed" not in raw
    run = _read("vllm-0.6.3-benchmark_serving.json")
    assert run.burstiness == 1.0 and run.max_concurrency is None and run.request_rate == 2.0


def test_a_current_summary_keeps_latencies_but_no_ttfts_and_uses_the_written_statistics() -> None:
    """vllm bench serve (0.32.0 serve.py:2380-2392) drops ttfts/itls without --save-detailed but
    keeps latencies and queue_times: the run's figures are the written ones, E2EL included."""
    raw = _raw("vllm-bench-serve-current-summary.json")
    assert "latencies" in raw and "queue_times" in raw and "ttfts" not in raw
    run = _read("vllm-bench-serve-current-summary.json")
    assert run.e2e_p90_ms == raw["p90_e2el_ms"] and run.ttft_p90_ms == raw["p90_ttft_ms"]
