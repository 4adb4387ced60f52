"""`fleetplan predict` and `fleetplan calibrate` from the command line."""

from __future__ import annotations

import json
from pathlib import Path

import pytest


def test_predict_json_says_whether_the_figures_are_calibrated(cli) -> None:
    res = cli("predict", "--model", "DeepSeek-R1-Distill-Qwen-1.5B", "--config", "1xH100-PCIe",
              "--rate", "8", "--num-prompts", "40", "--seeds", "2", "--format", "json")
    assert res.exit_code == 0, res.stderr
    out = json.loads(res.stdout)
    assert out["calibrated"] is True and out["mode"] == "burst"
    assert out["metrics"]["ttft_p99_ms"]["mean"] > 0 and "burst" in out["note"]
    spec = json.loads(cli("predict", "--model", "DeepSeek-R1-Distill-Qwen-1.5B", "--config",
                          "1xL40S", "--rate", "8", "--num-prompts", "40", "--seeds", "1",
                          "--format", "json").stdout)
    assert spec["calibrated"] is False and "pooled" in spec["params_source"]


def test_predict_steady_reports_stability(cli) -> None:
    res = cli("predict", "--model", "DeepSeek-R1-Distill-Qwen-1.5B", "--config", "1xH100-PCIe",
              "--rate", "2", "--steady", "--format", "json")
    out = json.loads(res.stdout)
    assert out["mode"] == "steady" and out["stable"] is True and out["status"] == "stable"


def test_predict_steady_takes_a_stated_prefix_cache_hit(cli) -> None:
    args = ("predict", "--model", "DeepSeek-R1-Distill-Qwen-14B", "--config", "1xH100-PCIe",
            "--rate", "2", "--steady", "--format", "json")
    fresh = json.loads(cli(*args).stdout)
    cached = json.loads(cli(*args, "--prefix-cache-hit", "1").stdout)
    assert (fresh["prefix_cache_hit"], cached["prefix_cache_hit"]) == (0.0, 1.0)
    assert cached["ttft_p99_ms"] < fresh["ttft_p99_ms"]
    bad = cli(*args, "--prefix-cache-hit", "1.5")
    assert bad.exit_code == 2 and "--prefix-cache-hit(=1.5) must be a number within [0, 1]" in (
        bad.stderr)
    burst = cli("predict", "--model", "DeepSeek-R1-Distill-Qwen-14B", "--config", "1xH100-PCIe",
                "--rate", "2", "--prefix-cache-hit", "0.5")
    assert burst.exit_code == 2 and "--warm-prefix-cache" in burst.stderr


def test_predict_unknown_model_is_one_line_exit_2(cli) -> None:
    res = cli("predict", "--model", "DeepSeek-R1-Distill-Qwen-14", "--config", "1xH100-PCIe",
              "--rate", "1")
    assert res.exit_code == 2
    assert "did you mean DeepSeek-R1-Distill-Qwen-14B" in res.stderr
    assert res.stderr.count("\n") == 1


def test_calibrate_one_configuration_writes_a_deterministic_file(cli, tmp_path: Path) -> None:
    out = tmp_path / "cal.json"
    args = ("calibrate", "--model", "DeepSeek-R1-Distill-Qwen-1.5B", "--config", "1xH100-PCIe",
            "--out", str(out), "--max-nfev", "6", "--jobs", "1", "--format", "json")
    res = cli(*args)
    assert res.exit_code == 0, res.stderr
    first = out.read_bytes()
    data = json.loads(first)
    (entry,) = data["configs"]
    assert entry["calibrated"] is True and entry["params"]["calibrated"] is True
    assert {r["request_rate"] for r in entry["runs"]} == {1.0, 4.0, 16.0, 32.0}
    out.unlink()
    cli(*args)
    assert out.read_bytes() == first  # same store, seeds and code -> same bytes


@pytest.mark.parametrize("config", ["128xH100-PCIe", "0xH100-PCIe",
                                    "99999999999999999999xH100-PCIe"])
def test_a_gpu_count_out_of_range_is_one_line(cli, config):
    r = cli("predict", "-m", "DeepSeek-R1-Distill-Qwen-14B", "-c", config, "-r", "4", "--steady")
    assert r.exit_code == 2
    assert r.stderr.strip().splitlines() == [
        f"fleetplan: error: configuration '{config}': the GPU count "
        f"{int(config.split('x')[0])} must be within 1..64"]


def test_a_tensor_parallel_split_vllm_refuses_is_one_line(cli):
    # 28 attention heads cannot be split over 3 GPUs: vLLM would not start this server
    r = cli("predict", "-m", "DeepSeek-R1-Distill-Qwen-7B", "-c", "3xRTX-4090", "-r", "4")
    assert r.exit_code == 2 and not r.stdout
    assert r.stderr.strip().splitlines() == [
        "fleetplan: error: DeepSeek-R1-Distill-Qwen-7B cannot run on 3xRTX-4090: vLLM needs "
        "its 28 attention heads divisible by the tensor-parallel size 3"]


@pytest.mark.parametrize("extra,message", [
    (["--steady", "--warm-prefix-cache"], "--warm-prefix-cache applies to a burst replay, not "
     "to --steady (use --prefix-cache-hit 1)"),
    (["--steady", "--seeds", "5"], "--seeds applies to a burst replay"),
    (["--steady", "--arrival-seed", "42"], "--arrival-seed applies to a burst replay"),
    (["--steady", "--num-prompts", "1"], "--num-prompts applies to a burst replay"),
    (["--steady", "--max-concurrency", "1"], "--max-concurrency applies to a burst replay"),
    (["--steady", "-r", "7576"], "at most 7,575 req/s with --steady"),
    (["--num-prompts", "2000000"], "at most 100,000 requests in a burst"),
])
def test_options_that_would_be_ignored_or_overflow_are_refused(cli, extra, message):
    # a steady run takes none of the burst's options: accepting them silently misled (a
    # --warm-prefix-cache steady run reported prefix_cache_hit 0)
    r = cli("predict", "-m", "DeepSeek-R1-Distill-Qwen-14B", "-c", "1xH100-PCIe", "-r", "4",
            *extra)
    assert r.exit_code == 2
    assert message in r.stderr and len(r.stderr.strip().splitlines()) == 1


def test_the_steady_rate_bound_is_the_one_the_run_accepts(cli):
    r = cli("predict", "-m", "DeepSeek-R1-Distill-Qwen-1.5B", "-c", "1xH100-PCIe", "-r", "7575",
            "--steady", "--format", "json")
    assert r.exit_code == 0, r.stderr
    assert json.loads(r.stdout)["status"] == "overloaded"


@pytest.mark.parametrize(("extra", "prompts", "seeds"), [
    ((), 200, 5),  # the defaults, which the options leave unset (None) until the replay
    (("--num-prompts", "30", "--seeds", "2"), 30, 2),
])
def test_the_burst_table_names_the_prompts_and_seeds_it_replayed(cli, extra, prompts, seeds):
    res = cli("predict", "--model", "DeepSeek-R1-Distill-Qwen-1.5B", "--config", "1xH100-PCIe",
              "--rate", "4", *extra)
    assert res.exit_code == 0, res.stderr
    text = " ".join(res.stdout.split())  # the table wraps its caption
    assert f"{prompts} prompts at 4 req/s" in text
    assert f"over {seeds} length seeds" in text and "None" not in text


def test_calibrate_takes_the_hosts_time_per_streamed_output(cli, tmp_path: Path) -> None:
    from fleetplan.replica.priors import C_DELIVER_S

    def fitted(*extra: str) -> dict:
        out = tmp_path / "cal.json"
        res = cli("calibrate", "--model", "DeepSeek-R1-Distill-Qwen-1.5B", "--config",
                  "1xH100-PCIe", "--out", str(out), "--max-nfev", "6", "--jobs", "1",
                  "--format", "json", *extra)
        assert res.exit_code == 0, res.stderr
        (entry,) = json.loads(out.read_text())["configs"]
        out.unlink()
        return entry

    assert fitted()["params"]["c_deliver"] == C_DELIVER_S  # the default: the shared prior
    own = fitted("--host-time-us", "250")
    assert own["params"]["c_deliver"] == pytest.approx(250e-6)
    assert fitted("--host-time-us", "0")["params"]["c_deliver"] == 0.0


@pytest.mark.parametrize("value", ["-1", "20000", "nan", "fast"])
def test_a_bad_host_time_is_one_line_and_writes_nothing(cli, tmp_path: Path, value) -> None:
    out = tmp_path / "cal.json"
    res = cli("calibrate", "--config", "1xH100-PCIe", "--out", str(out), "--host-time-us", value)
    assert res.exit_code == 2 and not out.exists()
    assert "Traceback" not in res.stderr and "host" in res.stderr.lower() + res.stdout.lower()


def test_calibrate_can_choose_the_host_time_from_the_runs(cli, tmp_path: Path) -> None:
    from fleetplan.replica.host_time import HOST_TIME_GRID_S

    out = tmp_path / "cal.json"
    res = cli("calibrate", "--model", "DeepSeek-R1-Distill-Qwen-1.5B", "--config", "1xH100-PCIe",
              "--out", str(out), "--max-nfev", "5", "--jobs", "1", "--format", "json",
              "--fit-host-time")
    assert res.exit_code == 0, res.stderr
    search = json.loads(res.stdout)["host_time_search"]
    losses = {p["host_time_us"]: p["summed_loss"] for p in search["points"]}
    assert sorted(losses) == pytest.approx([v * 1e6 for v in HOST_TIME_GRID_S])
    # the value kept is the lowest summed loss, and it is the one the file's entry carries
    assert losses[search["host_time_us"]] == min(losses.values()) and search["configs"] == 1
    (entry,) = json.loads(out.read_text())["configs"]
    assert entry["params"]["c_deliver"] == pytest.approx(search["host_time_us"] * 1e-6)
    assert entry["loss"] == pytest.approx(losses[search["host_time_us"]])


def test_a_host_time_and_its_search_together_are_refused(cli, tmp_path: Path) -> None:
    out = tmp_path / "cal.json"
    res = cli("calibrate", "--config", "1xH100-PCIe", "--out", str(out), "--host-time-us", "60",
              "--fit-host-time")
    assert res.exit_code == 2 and not out.exists()
    assert res.stderr.strip().splitlines() == [
        "fleetplan: error: --host-time-us and --fit-host-time: give a host time or let the runs "
        "choose it, not both"]
