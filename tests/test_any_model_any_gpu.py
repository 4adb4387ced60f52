"""Issue 11's must-shows, end to end: a model absent from data/models.csv, given only its
config.json, is predicted, validated and planned; a GPU absent from data/gpus.csv, given one
row of a user gpus.csv, is predicted and offered to the optimizer. Nothing leaks out of the
command or call that named them."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from fleetplan.catalog import bundled_catalog

DATA = Path(__file__).resolve().parent / "data"
QWEN3 = DATA / "hf-configs" / "Qwen3-8B-FP8"
GEMMA_RUN = (DATA / "ionet-vllm-0.8.5"
             / "vllm_200prompts1qps_gemma-2-9b-it_sharegpt_1xNVIDIA-H100-PCIe.json")


@pytest.fixture
def user_catalog() -> Path:
    """A user catalog with one GPU the bundled one lacks (the L4) and its price."""
    return DATA / "catalog-l4"


def _bundled_untouched() -> None:
    bundled = bundled_catalog()
    assert "Qwen3-8B-FP8" not in bundled.models() and "L4" not in bundled.gpus()


def test_predict_a_model_known_only_by_its_config_json_on_a_user_gpu(cli, user_catalog) -> None:
    _bundled_untouched()
    res = cli("predict", "--model-config", str(QWEN3), "--catalog", str(user_catalog),
              "--config", "1xL4", "--rate", "2", "--num-prompts", "40", "--seeds", "1",
              "--format", "json")
    assert res.exit_code == 0, res.stderr
    out = json.loads(res.stdout)
    assert (out["model"], out["config"], out["calibrated"]) == ("Qwen3-8B-FP8", "1xL4", False)
    mean = out["metrics"]["ttft_p99_ms"]["mean"]
    lo, hi = out["ttft_p99_ms_band"]
    assert 0 < lo < hi and lo <= mean * 1.5 and hi >= mean / 1.5
    assert "none measured on L4" in out["band_basis"]  # a user GPU: errors of other GPU types
    for m in ("request_throughput", "tpot_p50_ms", "tpot_p99_ms"):
        assert len(out[f"{m}_band"]) == 2
    _bundled_untouched()


def test_calibrated_predictions_carry_no_band(cli) -> None:
    out = json.loads(cli("predict", "--model", "DeepSeek-R1-Distill-Qwen-1.5B", "--config",
                         "1xH100-PCIe", "--rate", "8", "--num-prompts", "40", "--seeds", "1",
                         "--format", "json").stdout)
    assert out["calibrated"] is True and "ttft_p99_ms_band" not in out


def test_predict_without_model_or_config_file_says_what_is_needed(cli) -> None:
    res = cli("predict", "--config", "1xH100-PCIe", "--rate", "2")
    assert res.exit_code == 2 and "--model or --model-config" in res.stderr


def test_validate_runs_of_a_new_model_on_a_new_gpu(cli, user_catalog, tmp_path) -> None:
    runs = tmp_path / "runs"
    runs.mkdir()
    run = json.loads(GEMMA_RUN.read_text())  # a real result file, renamed to the new pair
    run.update(model_id="Qwen/Qwen3-8B-FP8", gpu_name="NVIDIA-L4", num_prompts=40,
               completed=40, total_input_tokens=run["total_input_tokens"] // 5,
               total_output_tokens=run["total_output_tokens"] // 5)  # a 40-prompt burst: fast
    (runs / "r.json").write_text(json.dumps(run))
    res = cli("validate", str(runs), "--model-config", str(QWEN3), "--catalog",
              str(user_catalog), "--format", "json")
    assert res.exit_code == 0, res.stderr
    run = json.loads(res.stdout)["runs"][0]
    assert (run["model"], run["config"], run["calibrated"]) == ("Qwen3-8B-FP8", "1xL4", False)
    row = run["metrics"]["request_throughput"]
    assert row["measured"] > 0 and row["predicted"] > 0 and row["error_pct"] is not None
    _bundled_untouched()


def test_solve_plans_a_config_json_model_and_offers_the_user_gpu(tmp_path, user_catalog) -> None:
    from fleetplan import solve
    from fleetplan.scenario import load_scenario

    shutil.copytree(QWEN3, tmp_path / "models" / "Qwen3-8B-FP8")
    shutil.copytree(user_catalog, tmp_path / "my-catalog")
    sc_path = tmp_path / "plan.yaml"
    sc_path.write_text(
        "model_config: models/Qwen3-8B-FP8\n"   # relative to the scenario file
        "catalog: my-catalog\n"
        "classes:\n  - {name: chat, rate_rps: 1, slo: {ttft_p99_ms: 3000}}\n"
        "candidates: [1xL4, 1xH100-PCIe]\n"
        "sim: {duration_s: 60, warmup_s: 10, seed: 1}\n"
        "capacity: {duration_s: 60, warmup_s: 10, min_requests: 50, seeds: 1, refine_steps: 0}\n")
    sc = load_scenario(sc_path)
    assert sc.model == "Qwen3-8B-FP8"
    _bundled_untouched()  # the scenario carries its context; loading activates nothing
    plan = solve(sc, executor="serial", cache_dir=False)
    d = plan.to_dict()
    text = json.dumps(d)
    assert "1xL4" in text  # the user's GPU was a candidate and, cheapest, is chosen
    assert any(p["config"] == "1xL4" for p in d["fleet"])
    _bundled_untouched()


def test_validate_follows_the_vllm_version_each_run_recorded(cli, tmp_path) -> None:
    run = json.loads(GEMMA_RUN.read_text())
    run.update(model_id="Qwen/Qwen3-8B-FP8", num_prompts=40, completed=40,
               total_input_tokens=run["total_input_tokens"] // 5,
               total_output_tokens=run["total_output_tokens"] // 5)
    preds = {}
    for version in ("0.6.3", "0.8.5"):  # 0.8.5 on an H100: 8192 batched tokens, V1 chunking
        d = tmp_path / version
        d.mkdir()
        (d / "r.json").write_text(json.dumps({**run, "vllm_version": version}))
        res = cli("validate", str(d), "--model-config", str(QWEN3), "--format", "json")
        assert res.exit_code == 0, res.stderr
        out = json.loads(res.stdout)["runs"][0]
        assert out["calibrated"] is False
        preds[version] = out["metrics"]["ttft_p99_ms"]["predicted"]
    assert preds["0.6.3"] != preds["0.8.5"]


def test_simulate_a_user_gpu_fleet_names_the_user_price(tmp_path, user_catalog) -> None:
    from fleetplan import simulate
    from fleetplan.scenario import scenario_from_dict

    sc = scenario_from_dict({
        "model_config": str(QWEN3), "catalog": str(user_catalog),
        "classes": [{"name": "chat", "rate_rps": 0.5, "slo": {"ttft_p99_ms": 3000}}],
        "fleet": [{"config": "1xL4", "count": 1}],
        "sim": {"duration_s": 40, "warmup_s": 5, "seed": 1}})
    pool = simulate(sc).to_dict()["pools"][0]
    assert pool["config"] == "1xL4" and pool["calibrated"] is False
    assert pool["price_usd_per_gpu_hour"] == 0.45
    assert "on-demand L4 listing" in pool["price_source"]
    assert str(user_catalog) in pool["price_source"]
    _bundled_untouched()


def test_a_run_naming_the_hub_id_finds_a_config_folder_named_org_dash_dash_name(
        cli, foreign_run, tmp_path: Path) -> None:
    # vLLM's result names the model by its hub id; a config.json kept in a folder named as the
    # hub id with its slash written "--" (as Hugging Face's cache and data/external/configs
    # keep them) describes it: the run is validated under the folder's name
    run = foreign_run(model_id="Qwen/Qwen3-8B-FP8", tokenizer_id="Qwen/Qwen3-8B-FP8")
    folder = tmp_path / "Qwen--Qwen3-8B-FP8"
    shutil.copytree(QWEN3, folder)
    res = cli("validate", str(run), "--gpu", "H100-SXM", "--gpu-count", "1",
              "--model-config", str(folder), "--format", "json")
    assert res.exit_code == 0, res.stderr
    (rec,) = json.loads(res.stdout)["runs"]
    assert (rec["model"], rec["config"], rec["calibrated"]) == (
        "Qwen--Qwen3-8B-FP8", "1xH100-SXM", False)
    # a folder of another name does not say which model it is: refused, one line
    other = tmp_path / "my-model"
    shutil.copytree(QWEN3, other)
    res = cli("validate", str(run), "--gpu", "H100-SXM", "--gpu-count", "1",
              "--model-config", str(other))
    assert res.exit_code != 0
    assert "field model_id: unknown model 'Qwen3-8B-FP8'" in res.stderr
    assert len(res.stderr.strip().splitlines()) == 1
