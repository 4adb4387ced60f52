"""Ingest of vLLM result files: every measured file, normalization, dedupe, bad input."""

from __future__ import annotations

import json
import math
import os
from pathlib import Path

import pandas as pd
import pytest

from fleetplan.profiles.ingest import IngestOptions, ingest_paths, read_runs
from fleetplan.profiles.store import ProfileStore, load_profiles

QWEN14_H100 = "DeepSeek-R1-Distill-Qwen-14B_sharegpt_1xNVIDIA-H100-PCIe"


def _lines(path: Path) -> int:
    return sum(1 for line in path.read_text().splitlines() if line.strip())


def _sample(ionet_dir: Path) -> dict:
    f = ionet_dir / f"vllm_200prompts16qps_{QWEN14_H100}.json"
    return json.loads(f.read_text().splitlines()[0])


def _check_ingests_completely(files: list[Path]) -> None:
    for f in files:
        runs, errors = read_runs(f)
        assert errors == [], errors
        assert len(runs) == _lines(f), f.name
        for r in runs:
            assert r.gpu in {"RTX-4090", "H100-PCIe"}
            assert "/" not in r.model and r.model_id.endswith(r.model)
            assert r.config == f"{r.gpu_count}x{r.gpu}"
            assert f"{r.gpu_count}x" in f.name and f"{int(r.request_rate)}qps" in f.name
            assert r.completed + r.failed == r.num_prompts
            assert r.request_goodput is not None  # read from the `request_goodput:` key
            assert r.dataset == "sharegpt"


def test_every_shipped_measured_file_ingests_completely(measured_dir: Path) -> None:
    files = sorted(measured_dir.glob("*.json"))
    assert len(files) == 11
    _check_ingests_completely(files)


def test_every_file_of_the_full_collection_ingests_completely(ionet_dir: Path) -> None:
    files = sorted(ionet_dir.glob("*.json"))
    assert len(files) >= 80
    _check_ingests_completely(files)


def test_multi_run_files_give_one_row_per_line(measured_dir: Path) -> None:
    f = measured_dir / f"vllm_200prompts32qps_{QWEN14_H100}.json"
    runs, errors = read_runs(f)
    assert not errors and len(runs) == 2
    assert [r.source_line for r in runs] == [1, 2]
    assert runs[0].run_id != runs[1].run_id
    assert {round(r.duration_s, 1) for r in runs} == {26.7, 26.9}


def test_bundled_store_rows_are_exactly_what_ingest_makes_of_the_files(measured_dir: Path) -> None:
    """The bundled store is derived data: re-ingesting the raw files reproduces its rows."""
    store = ProfileStore()
    report = ingest_paths([measured_dir], store, IngestOptions(engine_version="0.8.5"))
    assert report.errors == []
    ours = store.frame.set_index("run_id").sort_index()
    bundled = load_profiles().frame.set_index("run_id")
    assert len(ours) == sum(_lines(f) for f in measured_dir.glob("*.json")) == 15
    assert set(ours.index) <= set(bundled.index)
    pd.testing.assert_frame_equal(ours, bundled.loc[ours.index, ours.columns])


def test_bundled_store_is_exactly_the_full_measured_folder(ionet_dir: Path) -> None:
    store = ProfileStore()
    report = ingest_paths([ionet_dir], store, IngestOptions(engine_version="0.8.5"))
    bundled = load_profiles()
    assert report.errors == []
    assert sorted(store.run_ids) == sorted(bundled.run_ids)
    assert len(bundled) == sum(_lines(f) for f in ionet_dir.glob("*.json"))


def test_reingest_adds_nothing(measured_dir: Path, tmp_path: Path, cli) -> None:
    store = tmp_path / "s.csv"
    first = cli("ingest", str(measured_dir), "--store", str(store))
    assert first.exit_code == 0, first.stderr
    before = store.read_bytes()
    second = cli("ingest", str(measured_dir), "--store", str(store))
    assert second.exit_code == 0
    assert "0 run(s) added" in second.stdout
    assert store.read_bytes() == before


def _write(path: Path, obj: object) -> Path:
    path.write_text(json.dumps(obj) if not isinstance(obj, str) else obj)
    return path


@pytest.mark.parametrize(
    ("mutate", "expect"),
    [
        (lambda d: d.pop("duration"), "missing required field 'duration'"),
        (lambda d: d.update(duration=-3.0), "field duration: -3.0 must be >= 0"),
        (lambda d: d.update(mean_ttft_ms=float("nan")), "field mean_ttft_ms: nan is not a finite"),
        (lambda d: d.update(output_throughput=float("inf")), "field output_throughput: inf"),
        (lambda d: d.update(gpu_name="NVIDIA-GeForce-RTX-4091"), "field gpu_name: unknown GPU"),
        (lambda d: d.update(completed="many"), "field completed: 'many' is not a whole number"),
        (lambda d: d.update(tensor_parallel_size="abc"),
         "field tensor_parallel_size: 'abc' is not a whole number"),
        (lambda d: d.update(tensor_parallel_size=[1, 2]),
         "field tensor_parallel_size: [1, 2] is not a whole number"),
        (lambda d: d.update(tensor_parallel_size=2),  # on one GPU
         "field tensor_parallel_size: 2 must be between 1 and 1"),
        (lambda d: d.update(gpu_count=10**30),
         f"field gpu_count: {10**30} must be between 1 and 1024"),
    ],
)
def test_bad_record_is_refused_with_file_line_and_field(
    measured_dir: Path, tmp_path: Path, cli, mutate, expect: str
) -> None:
    bad = _sample(measured_dir)
    mutate(bad)
    good = _sample(measured_dir)
    good["date"] = "20990101-000000"  # another run
    bad_file = tmp_path / "bad.json"
    bad_file.write_text(json.dumps(good) + "\n" + json.dumps(bad) + "\n")
    other = _write(tmp_path / "other.json", _sample(measured_dir))
    store = tmp_path / "store.csv"
    res = cli("ingest", str(bad_file), str(other), "--store", str(store))
    assert res.exit_code == 2
    err_lines = [ln for ln in res.stderr.splitlines() if ln.strip()]
    assert len(err_lines) == 1, res.stderr
    assert f"{bad_file}: line 2" in err_lines[0] and expect in err_lines[0]
    assert "Traceback" not in res.stderr
    # the good line of the bad file and the other file are still ingested
    assert len(load_profiles(store)) == 2


@pytest.mark.parametrize(
    "content", ['{"date": "2025", "backend": "vllm", "num_pro', "not json at all", ""]
)
def test_truncated_or_non_json_file(tmp_path: Path, measured_dir: Path, cli, content: str) -> None:
    broken = _write(tmp_path / "broken.json", content)
    store = tmp_path / "store.csv"
    cli("ingest", str(measured_dir), "--store", str(store))
    before = store.read_bytes()
    res = cli("ingest", str(broken), "--store", str(store))
    assert res.exit_code == 2
    assert res.stderr.count("\n") == 1 and str(broken) in res.stderr and "line 1" in res.stderr
    assert store.read_bytes() == before


def test_refused_records_never_touch_the_store(tmp_path: Path, measured_dir: Path, cli) -> None:
    bad = _sample(measured_dir)
    bad["duration"] = -1
    f = _write(tmp_path / "bad.json", bad)
    store = tmp_path / "store.csv"
    res = cli("ingest", str(f), "--store", str(store))
    assert res.exit_code == 2
    assert not store.exists()


def test_store_write_is_atomic(tmp_path: Path, measured_dir: Path, cli, monkeypatch) -> None:
    store = tmp_path / "store.csv"
    one = measured_dir / "vllm_200prompts1qps_gemma-2-9b-it_sharegpt_1xNVIDIA-H100-PCIe.json"
    cli("ingest", str(one), "--store", str(store))
    before = store.read_bytes()

    def boom(*a, **k):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(os, "replace", boom)
    res = cli("ingest", str(measured_dir), "--store", str(store))
    assert res.exit_code == 2 and "Traceback" not in res.stderr
    assert f"{store}: cannot write (No space left on device)" in res.stderr
    assert store.read_bytes() == before
    assert [p.name for p in tmp_path.iterdir()] == ["store.csv"]  # no temp file left


def test_current_vllm_bench_serve_format_with_per_request_arrays(tmp_path: Path) -> None:
    ttfts = [0.010, 0.020, 0.030, 0.040]
    itls = [[0.005, 0.005], [0.010], [0.002, 0.004, 0.006], []]
    obj = {
        "date": "20260101-120000", "endpoint_type": "openai", "backend": "openai",
        "model_id": "org/Tiny-Llama", "tokenizer_id": "org/Tiny-Llama", "num_prompts": 5,
        "request_rate": 2.0, "burstiness": 1.0, "max_concurrency": 8, "duration": 3.0,
        "completed": 4, "failed": 1, "total_input_tokens": 40, "total_output_tokens": 10,
        "request_throughput": 4 / 3, "request_goodput": None, "output_throughput": 10 / 3,
        "total_token_throughput": 50 / 3, "max_concurrent_requests": 3,
        "input_lens": [10, 10, 10, 10], "output_lens": [3, 2, 4, 1],
        "ttfts": ttfts, "itls": itls, "errors": ["", "", "", ""],
        "mean_ttft_ms": 25.0, "median_ttft_ms": 25.0, "std_ttft_ms": 11.18, "p99_ttft_ms": 39.7,
        "mean_tpot_ms": 5.0, "median_tpot_ms": 5.0, "std_tpot_ms": 1.0, "p99_tpot_ms": 9.9,
        "mean_itl_ms": 5.33, "median_itl_ms": 5.0, "std_itl_ms": 2.0, "p99_itl_ms": 9.8,
        "mean_e2el_ms": 33.0, "median_e2el_ms": 32.5, "std_e2el_ms": 5.0, "p99_e2el_ms": 50.0,
    }
    f = _write(tmp_path / "serve.json", obj)
    runs, errors = read_runs(f, IngestOptions(gpu="NVIDIA GeForce RTX 4090", gpu_count=1,
                                              known_models={"Tiny-Llama"}))  # not the catalog's
    assert errors == []
    (r,) = runs
    assert r.failed == 1 and r.max_concurrency == 8 and r.config == "1xRTX-4090"
    assert r.engine == "vllm"  # the client's "openai" backend is vLLM's OpenAI-compatible API
    assert r.ttft_p99_ms == 39.7  # summary key wins
    assert math.isclose(r.ttft_p90_ms, float(pd.Series([10, 20, 30, 40]).quantile(0.9)))
    assert r.e2e_p99_ms == 50.0
    # without GPU facts the record is refused, naming what to give
    runs, errors = read_runs(f)
    assert runs == [] and "gpu_name" in errors[0] and "--gpu" in errors[0]


# --- issue 16: one file never costs the others ---------------------------------------------


def test_a_record_that_crashes_its_reader_is_refused_alone(tmp_path: Path, measured_dir: Path,
                                                           cli, monkeypatch) -> None:
    import fleetplan.profiles.ingest as ingest

    fmt = ingest.get_format("vllm")
    real = fmt.parse

    def flaky(obj, src, opt):  # a bug in a reader, hit by one file only
        if src.path.name.startswith("a-"):
            raise ZeroDivisionError("float division by zero")
        return real(obj, src, opt)

    monkeypatch.setitem(ingest.FORMATS, "vllm", ingest.IngestFormat("vllm", fmt.detect, flaky))
    folder = tmp_path / "runs"
    folder.mkdir()
    gemma = "vllm_200prompts1qps_gemma-2-9b-it_sharegpt_1xNVIDIA-H100-PCIe.json"
    (folder / "a-crash.json").write_text(json.dumps(_sample(measured_dir)))
    (folder / "b-good.json").write_bytes((measured_dir / gemma).read_bytes())
    store = tmp_path / "store.csv"
    res = cli("ingest", str(folder), "--store", str(store))
    assert res.exit_code == 2 and "Traceback" not in res.stderr
    errs = [ln for ln in res.stderr.splitlines() if ln.startswith("fleetplan: error: ")]
    assert len(errs) == 1 and "a-crash.json: line 1: cannot read this record" in errs[0]
    assert "ZeroDivisionError" in errs[0]
    assert len(load_profiles(store)) == 1  # the good file's run is stored


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="FIFOs are POSIX")
def test_a_fifo_or_a_symlink_loop_in_a_folder_is_refused_without_hanging(
        tmp_path: Path, measured_dir: Path, cli) -> None:
    folder = tmp_path / "runs"
    folder.mkdir()
    gemma = "vllm_200prompts1qps_gemma-2-9b-it_sharegpt_1xNVIDIA-H100-PCIe.json"
    (folder / "good.json").write_bytes((measured_dir / gemma).read_bytes())
    os.mkfifo(folder / "pipe.json")  # reading it would block forever
    (folder / "loop").symlink_to(folder, target_is_directory=True)
    store = tmp_path / "store.csv"
    res = cli("ingest", str(folder), "--store", str(store))
    assert res.exit_code == 2 and "Traceback" not in res.stderr
    errs = [ln for ln in res.stderr.splitlines() if ln.startswith("fleetplan: error: ")]
    assert len(errs) == 1 and "pipe.json: a FIFO" in errs[0]
    assert len(load_profiles(store)) == 1


@pytest.mark.skipif(not os.path.exists("/dev/zero"), reason="no /dev/zero")
def test_a_device_as_result_file_is_refused_by_its_type_before_reading() -> None:
    runs, errors = read_runs("/dev/zero")  # reading it would fill memory
    assert runs == [] and errors == ["/dev/zero: a device, not a result file (a regular file)"]
