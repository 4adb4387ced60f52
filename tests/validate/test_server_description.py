"""Describing a real server (issue 41, item 1): --gpu, --gpu-count, --tp, --pp, --nodes,
--engine-version, --engine-arg and --warm-prefix-cache on validate, predict and ingest."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from fleetplan.errors import InputError
from fleetplan.profiles.server import ENGINE_ARGS, ServerDescription, parse_engine_args
from fleetplan.replica.params import replica_params
from fleetplan.validate.prediction import PredictRequest, run_prediction
from fleetplan.validate.server_params import apply_server

MODEL, CONFIG = "DeepSeek-R1-Distill-Qwen-14B", "1xH100-PCIe"
DESCRIBED = ("--gpu", "H100-PCIe", "--gpu-count", "1")
STUDY_4QPS = "vllm_200prompts4qps_DeepSeek-R1-Distill-Qwen-14B_sharegpt_1xNVIDIA-H100-PCIe.json"


def _foreign(measured_dir: Path, tmp_path: Path, **changes: object) -> Path:
    """The study's 4 req/s run as someone else's file: vLLM's own fields only (no GPU, no
    count) and another date, so it is a run the store does not hold."""
    rec = json.loads((measured_dir / STUDY_4QPS).read_text().splitlines()[0])
    for key in ("gpu_name", "gpu_count"):
        rec.pop(key)
    rec["date"] = "20260101-000000"
    rec.update(changes)
    out = tmp_path / "theirs.json"
    out.write_text(json.dumps(rec))
    return out


# --- parsing: one line naming the flag and value ------------------------------------------


@pytest.mark.parametrize(("item", "words"), [
    ("foo=1", ["'foo=1'", "unknown key 'foo'", "max_num_seqs", "enable_prefix_caching"]),
    ("max_num_seqs", ["'max_num_seqs'", "KEY=VALUE"]),
    ("max_num_seqs=abc", ["'max_num_seqs=abc'", "whole number"]),
    ("max_num_seqs=0", ["'max_num_seqs=0'", ">= 1"]),
    ("gpu_memory_utilization=1.5", ["1.5", "<= 1"]),
    ("gpu_memory_utilization=0", ["'gpu_memory_utilization=0'", "> 0"]),
    ("enable_prefix_caching=maybe", ["maybe", "true or false"]),
])
def test_bad_engine_args_are_one_line_naming_flag_and_value(item: str, words: list[str]) -> None:
    with pytest.raises(InputError) as exc:
        parse_engine_args([item])
    msg = str(exc.value)
    assert "\n" not in msg and msg.startswith("--engine-arg")
    for w in words:
        assert w in msg


def test_engine_args_parse_typed_and_dashes_read_as_underscores() -> None:
    got = parse_engine_args(["max-num-seqs=512", "max_num_batched_tokens=512",
                             "gpu_memory_utilization=0.85", "enable_prefix_caching=false"])
    assert got == {"max_num_seqs": 512, "max_num_batched_tokens": 512,
                   "gpu_memory_utilization": 0.85, "enable_prefix_caching": False}
    assert {"max_num_seqs", "max_num_batched_tokens", "gpu_memory_utilization",
            "enable_prefix_caching"} <= set(ENGINE_ARGS)
    with pytest.raises(InputError, match="already given as 512"):
        parse_engine_args(["max_num_seqs=512", "max_num_seqs=256"])


def test_settings_vllm_refuses_together_are_refused() -> None:
    with pytest.raises(InputError, match="max_num_batched_tokens=128 is below max_num_seqs=256"):
        ServerDescription(engine_args={"max_num_seqs": 256, "max_num_batched_tokens": 128})
    with pytest.raises(InputError, match="--warm-prefix-cache contradicts"):
        ServerDescription(engine_args={"enable_prefix_caching": False}, warm_prefix_cache=True)
    with pytest.raises(InputError, match="--tp 3 does not divide --gpu-count 4"):
        ServerDescription(tp=3, gpu_count=4)
    with pytest.raises(InputError, match="--gpu-count 0"):
        ServerDescription(gpu_count=0)


def test_a_file_value_contradicting_a_flag_names_both() -> None:
    sd = ServerDescription(tp=2)
    assert sd.pick("tp", None, "tensor_parallel_size") == 2  # the user's where the file is silent
    assert ServerDescription().pick("tp", 4, "tensor_parallel_size") == 4  # the file's
    with pytest.raises(InputError) as exc:
        sd.pick("tp", 4, "tensor_parallel_size", "f.json: line 1: ")
    assert str(exc.value) == "f.json: line 1: --tp 2 contradicts the file's tensor_parallel_size 4"


@pytest.mark.parametrize(("flag", "what"), [("pp", "pipeline parallel"),
                                             ("dp", "data-parallel replicas"),
                                             ("nodes", "a multi-node server")])
def test_layouts_are_refused_by_the_store_never_ignored(flag: str, what: str) -> None:
    """The profile store keeps one tensor-parallel group per run: a pipeline-parallel,
    data-parallel or multi-node server is refused there (validate and predict model it)."""
    sd = ServerDescription(**{flag: 2})  # type: ignore[arg-type]
    with pytest.raises(InputError, match=f"--{flag} 2: {what} is not kept in the profile store"):
        sd.check_storable()
    sd.check_modelled()  # modelled: validate and predict replay it
    ServerDescription(**{flag: 1}).check_storable()  # type: ignore[arg-type]  # 1 is stored


# --- the settings reach the prediction ----------------------------------------------------


def test_stating_the_defaults_changes_nothing() -> None:
    p = replica_params(MODEL, CONFIG)
    same = apply_server(p, ServerDescription(engine_args={
        "max_num_seqs": p.max_num_seqs, "max_num_batched_tokens": p.max_num_batched_tokens}))
    assert same.model_dump(exclude={"source"}) == p.model_dump(exclude={"source"})


def test_less_memory_means_a_smaller_kv_cache() -> None:
    p = replica_params(MODEL, CONFIG)
    half = apply_server(p, ServerDescription(engine_args={"gpu_memory_utilization": 0.5}))
    # vLLM's plan: 0.9 x 80 GB minus ~30 GB of weights leaves ~40 GB of cache; 0.5 x 80 GB
    # leaves ~10 GB: well under half of it
    assert half.kv_capacity_tokens < p.kv_capacity_tokens / 2


def test_a_smaller_max_num_seqs_lowers_throughput_and_raises_ttft() -> None:
    """A work-conserving server that may run at most k sequences at once produces at most k
    tokens a step, and a step takes at least c_step: output throughput <= k / c_step. A burst
    of 200 prompts sent at once then waits in the queue for a slot, so its median TTFT rises
    above the uncapped server's."""
    base = run_prediction(PredictRequest(model=MODEL, config=CONFIG, rate=float("inf"),
                                         num_prompts=200, seeds=1))
    capped = run_prediction(PredictRequest(
        model=MODEL, config=CONFIG, rate=float("inf"), num_prompts=200, seeds=1,
        server=ServerDescription(engine_args={"max_num_seqs": 8})))
    assert capped.params.max_num_seqs == 8 and "max_num_seqs=8" in capped.params.source
    k_bound = 8 / capped.params.c_step
    assert capped.result["output_throughput"] <= k_bound
    assert capped.result["output_throughput"] < base.result["output_throughput"]
    assert capped.result["ttft_p50_ms"] > base.result["ttft_p50_ms"]


# --- the CLI --------------------------------------------------------------------------------


def test_predict_takes_gpu_and_count_instead_of_config(cli) -> None:
    a = cli("predict", "-m", MODEL, "--config", CONFIG, "--rate", "4", "--seeds", "1",
            "--format", "json")
    b = cli("predict", "-m", MODEL, "--gpu", "h100-pcie", "--gpu-count", "1", "--rate", "4",
            "--seeds", "1", "--format", "json")
    assert a.exit_code == b.exit_code == 0, a.stderr + b.stderr
    assert json.loads(a.stdout)["metrics"] == json.loads(b.stdout)["metrics"]


@pytest.mark.parametrize(("args", "words"), [
    (["--config", CONFIG, "--gpu-count", "2"], ["--gpu-count 2 contradicts --config"]),
    (["--config", CONFIG, "--gpu", "RTX-4090"], ["--gpu RTX-4090 contradicts --config"]),
    (["--gpu", "H100-PCIe", "--gpu-count", "3", "--tp", "1", "--pp", "2"],
     ["--tp 1 x --pp 2 does not divide --gpu-count 3"]),
    (["--gpu", "H100-PCIe", "--gpu-count", "8", "--tp", "4"],
     ["--gpu-count 8 is not --tp 4 x --pp 1 x --dp 1 = 4"]),
    (["--gpu", "H100-PCIe", "--nodes", "2"], ["--nodes 2", "do not lie evenly on the nodes"]),
    (["--gpu", "H100-PCIe", "--gpu-count", "2", "--interconnect", "IB-NDR-400"],
     ["--interconnect IB-NDR-400 names the network between nodes"]),
    (["--config", CONFIG, "--engine-arg", "speed=11"], ["--engine-arg 'speed=11'", "accepted"]),
    (["--config", CONFIG, "--engine-arg", "enable_prefix_caching=false",
      "--warm-prefix-cache"], ["--warm-prefix-cache contradicts"]),
    ([], ["--config or --gpu is required"]),
])
def test_predict_bad_server_is_one_line_exit_2(cli, args: list[str], words: list[str]) -> None:
    res = cli("predict", "-m", MODEL, "--rate", "4", *args)
    assert res.exit_code == 2 and res.stderr.count("\n") == 1, res.stderr
    for w in words:
        assert w in res.stderr


def test_validate_needs_files_for_a_server_description(cli) -> None:
    res = cli("validate", "--gpu", "H100-PCIe", "--gpu-count", "1")
    assert res.exit_code == 2 and res.stderr.count("\n") == 1
    assert "--gpu describes the server of the result files given" in res.stderr


def test_validate_reads_the_gpu_from_the_flag(cli, measured_dir: Path, tmp_path: Path) -> None:
    f = _foreign(measured_dir, tmp_path)
    bare = cli("validate", str(f), "--format", "json")
    assert bare.exit_code == 2 and "gpu_name" in bare.stderr  # vLLM's file names no GPU
    res = cli("validate", str(f), "--gpu", "H100-PCIe", "--gpu-count", "1", "--format", "json")
    assert res.exit_code == 0, res.stderr
    (run,) = json.loads(res.stdout)["runs"]
    assert run["config"] == CONFIG and run["calibrated"] is True


def test_validate_refuses_a_file_that_contradicts_the_flags(cli, measured_dir: Path,
                                                            tmp_path: Path) -> None:
    f = _foreign(measured_dir, tmp_path, gpu_name="NVIDIA-H100-PCIe", tensor_parallel_size=1)
    res = cli("validate", str(f), "--gpu", "RTX-4090", "--format", "json")
    assert res.exit_code == 2 and res.stderr.count("\n") == 1
    assert "NVIDIA-H100-PCIe" in res.stderr and "--gpu RTX-4090" in res.stderr
    res = cli("validate", str(f), "--tp", "2", "--gpu-count", "2", "--format", "json")
    assert res.exit_code == 2 and "--tp 2 contradicts the file's tensor_parallel_size 1" in (
        res.stderr)


def _ttft(cli, *args: str) -> float:
    """The predicted TTFT p50 of the file's runs (the highest where it holds repeats)."""
    res = cli("validate", *args, "--format", "json")
    assert res.exit_code == 0, res.stderr
    return max(float(r["metrics"]["ttft_p50_ms"]["predicted"])
               for r in json.loads(res.stdout)["runs"])


def test_a_foreign_run_is_replayed_cold_unless_told_warm(cli, measured_dir: Path,
                                                         tmp_path: Path) -> None:
    """The study's 4 req/s run followed its series' 32 and 16 req/s runs of the same prompts:
    it is replayed with them cached. The same run in someone else's file is replayed cold:
    every prompt prefilled, so a later first token; --warm-prefix-cache caches them again."""
    f = str(_foreign(measured_dir, tmp_path))
    study = _ttft(cli, str(measured_dir / STUDY_4QPS))
    cold = _ttft(cli, f, *DESCRIBED)
    warm = _ttft(cli, f, *DESCRIBED, "--warm-prefix-cache")
    assert cold > warm and cold > study
    assert _ttft(cli, f, *DESCRIBED, "--engine-arg", "enable_prefix_caching=false") == cold


def test_validate_applies_the_engine_settings(cli, measured_dir: Path, tmp_path: Path) -> None:
    f = str(_foreign(measured_dir, tmp_path))
    # 4 req/s of ~200-token replies keep ~20 sequences running: a cap of 2 queues them
    capped = _ttft(cli, f, *DESCRIBED, "--engine-arg", "max_num_seqs=2")
    assert capped > _ttft(cli, f, *DESCRIBED)


# --- ingest records the description --------------------------------------------------------


def test_ingest_records_engine_settings_and_a_cold_cache(cli, measured_dir: Path,
                                                        tmp_path: Path) -> None:
    from fleetplan.profiles.store import load_profiles

    f = _foreign(measured_dir, tmp_path)
    store = tmp_path / "store.csv"
    res = cli("ingest", str(f), "--store", str(store), *DESCRIBED, "--engine-arg",
              "max_num_seqs=64", "--engine-arg", "max_num_batched_tokens=4096")
    assert res.exit_code == 0, res.stderr
    row = load_profiles(store).frame.iloc[-1]
    assert row["engine_args"] == "max_num_seqs=64 max_num_batched_tokens=4096"
    assert row["prefix_cache"] == "cold" and row["config"] == CONFIG


@pytest.mark.parametrize(("args", "words"), [
    (["--pp", "2"], ["--pp 2", "pipeline parallel is not kept in the profile store"]),
    (["--nodes", "3"], ["--nodes 3", "multi-node server is not kept in the profile store"]),
    (["--gpu-count", "2", "--tp", "1"], []),  # accepted: 2 GPUs, tp 1 as ingest always read it
])
def test_ingest_parallel_flags(cli, measured_dir: Path, tmp_path: Path, args: list[str],
                               words: list[str]) -> None:
    f = _foreign(measured_dir, tmp_path)
    res = cli("ingest", str(f), "--store", str(tmp_path / "s.csv"), "--gpu", "H100-PCIe", *args)
    if not words:
        assert res.exit_code == 0, res.stderr
        return
    assert res.exit_code == 2 and res.stderr.count("\n") == 1, res.stderr
    for w in words:
        assert w in res.stderr


def test_ingest_bad_engine_arg_is_one_line(cli, measured_dir: Path, tmp_path: Path) -> None:
    f = _foreign(measured_dir, tmp_path)
    res = cli("ingest", str(f), "--store", str(tmp_path / "s.csv"), "--engine-arg", "x=1")
    assert res.exit_code == 2 and res.stderr.count("\n") == 1
    assert "--engine-arg 'x=1': unknown key 'x'" in res.stderr
    assert not (tmp_path / "s.csv").exists()  # nothing half-written


def test_engine_settings_stated_in_the_file_are_read(cli, measured_dir: Path,
                                                     tmp_path: Path) -> None:
    """vllm bench serve --metadata max_num_seqs=2 writes the setting as a string at the top of
    the result: it is read as if stated with --engine-arg, and a contradiction names both."""
    plain = str(_foreign(measured_dir, tmp_path))
    stated = tmp_path / "stated"
    stated.mkdir()
    f = str(_foreign(measured_dir, stated, max_num_seqs="2"))
    assert _ttft(cli, f, *DESCRIBED) == _ttft(cli, f, *DESCRIBED, "--engine-arg",
                                              "max_num_seqs=2") > _ttft(cli, plain, *DESCRIBED)
    res = cli("validate", f, *DESCRIBED, "--engine-arg", "max_num_seqs=4")
    assert res.exit_code == 2 and res.stderr.count("\n") == 1
    assert "--engine-arg max_num_seqs=4 contradicts the file's max_num_seqs 2" in res.stderr


def test_settings_recorded_at_ingest_are_replayed_from_the_store(cli, measured_dir: Path,
                                                                 tmp_path: Path) -> None:
    f = str(_foreign(measured_dir, tmp_path))
    plain, capped = str(tmp_path / "plain.csv"), str(tmp_path / "capped.csv")
    assert cli("ingest", f, "--store", plain, *DESCRIBED).exit_code == 0
    assert cli("ingest", f, "--store", capped, *DESCRIBED, "--engine-arg",
               "max_num_seqs=2").exit_code == 0
    assert _ttft(cli, "--store", capped) > _ttft(cli, "--store", plain)


def test_a_smaller_step_budget_delays_first_tokens() -> None:
    """With chunked prefill a prompt of p tokens needs ceil(p / budget) steps before its first
    token: a 256-token budget cannot give first tokens sooner than an 8192-token one."""
    def ttft(tokens: int) -> float:
        pred = run_prediction(PredictRequest(
            model=MODEL, config=CONFIG, rate=8.0, num_prompts=60, seeds=1,
            server=ServerDescription(engine_args={"max_num_seqs": 256,
                                                  "max_num_batched_tokens": tokens})))
        assert pred.params.max_num_batched_tokens == tokens
        return pred.result["ttft_p50_ms"]

    assert ttft(256) > ttft(8192)


def test_max_model_len_is_applied_and_bounded_by_the_model() -> None:
    p = replica_params(MODEL, CONFIG)
    short_ctx = apply_server(p, ServerDescription(engine_args={"max_model_len": 4096}))
    assert short_ctx.max_model_len == 4096
    with pytest.raises(InputError, match="max_model_len=10000000 exceeds"):
        apply_server(p, ServerDescription(engine_args={"max_model_len": 10**7}))


@pytest.mark.parametrize(("args", "words"), [
    (["--gpu-count", "0"], ["--gpu-count 0", "whole number from 1 to 64"]),
    (["--tp", "-1"], ["--tp -1"]),
    (["--engine-arg", "block_size=0"], ["--engine-arg 'block_size=0'", ">= 1"]),
    (["--gpu-count", "1", "--engine-version", "0.9.0"],
     ["--engine-version 0.9.0 contradicts the file's vllm_version 0.8.5"]),
])
def test_validate_bad_server_flags_are_one_line(cli, measured_dir: Path, tmp_path: Path,
                                                args: list[str], words: list[str]) -> None:
    f = _foreign(measured_dir, tmp_path, vllm_version="0.8.5")
    res = cli("validate", str(f), "--gpu", "H100-PCIe", *args)
    assert res.exit_code == 2 and res.stderr.count("\n") == 1, res.stderr
    for w in words:
        assert w in res.stderr
    ok = cli("validate", str(f), *DESCRIBED, "--engine-version", "0.8.5", "--format", "json")
    assert ok.exit_code == 0, ok.stderr  # the file's version stated again: no contradiction


def test_calibrate_fits_a_described_run_on_its_server_without_a_note(cli, measured_dir: Path,
                                                                     tmp_path: Path) -> None:
    """calibrate replays a run with its recorded engine settings and cold cache
    (tests/replica/test_calibrate_server_settings.py): nothing left to warn about."""
    from fleetplan.replica.calibrate_run import MIN_MAX_NFEV

    f = str(_foreign(measured_dir, tmp_path))
    store = str(tmp_path / "s.csv")
    assert cli("ingest", f, "--store", store, *DESCRIBED, "--engine-arg",
               "max_num_seqs=64").exit_code == 0
    res = cli("calibrate", "--store", store, "--out", str(tmp_path / "cal.json"), "--quiet",
              "--max-nfev", str(MIN_MAX_NFEV), "--jobs", "1")
    assert res.exit_code == 0, res.stderr
    assert "server description" not in res.stderr and "note:" not in res.stderr
