"""The bundled library of popular checkpoints' config.json (data/model_configs): a run or a
scenario naming one by its hub id is predicted without a config.json of the user's; an
instruction-tuned name takes its base's architecture and says so; every file is read or refused
in one line; a model it does not hold is still unknown."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from fleetplan.catalog import ModelSpec, bundled_catalog
from fleetplan.catalog.model_library import find, library_dir
from fleetplan.errors import InputError, UnknownNameError

LIBRARY = sorted(library_dir().glob("*--*"))


def test_the_library_holds_the_checkpoints_its_readme_lists() -> None:
    readme = (library_dir() / "README.md").read_text()
    assert len(LIBRARY) == 67
    for folder in LIBRARY:
        assert f"| `{folder.name.replace('--', '/', 1)}` |" in readme, folder.name


@pytest.mark.parametrize("folder", LIBRARY, ids=lambda p: p.name)
def test_every_file_is_read_or_refused_in_one_line(folder: Path) -> None:
    try:
        spec = ModelSpec.from_hf_config(folder)
    except InputError as exc:
        assert "\n" not in str(exc) and str(folder) in str(exc)
        assert "not modelled" in str(exc)
        return
    assert spec.params_b >= spec.active_b > 0 and spec.weight_bytes > 0


@pytest.mark.parametrize(("name", "total", "active"), [
    ("deepseek-ai/DeepSeek-R1", 671.0, 37.0),  # arXiv:2412.19437 (V3's architecture)
    ("Qwen/Qwen3-235B-A22B", 235.0, 22.0),  # model card
    ("meta-llama/Llama-4-Maverick-17B-128E-Instruct", 400.0, 17.0),  # model card
    ("moonshotai/Kimi-K2-Instruct", 1000.0, 32.0),  # model card: 1 T
])
def test_a_hub_id_is_predicted_from_the_bundled_file(name: str, total: float,
                                                     active: float) -> None:
    spec = bundled_catalog().model(name)
    assert spec.params_b == pytest.approx(total, rel=0.03)
    assert spec.active_b == pytest.approx(active, rel=0.03)
    assert f"bundled config.json of {name}" in spec.source
    assert spec.hf_id == name


def test_an_instruction_tuned_name_takes_its_base_architecture_and_says_so() -> None:
    cat = bundled_catalog()
    tuned = cat.model("meta-llama/Llama-3.1-70B-Instruct")
    base = cat.model("meta-llama/Meta-Llama-3.1-70B")
    assert tuned.model == "Llama-3.1-70B-Instruct" and tuned.hf_id.endswith("70B-Instruct")
    assert (tuned.params_b, tuned.layers, tuned.kv_heads) == (
        base.params_b, base.layers, base.kv_heads)
    assert "meta-llama/Meta-Llama-3.1-70B, whose architecture" in tuned.source
    # the short name a run's hub id leaves, in another case: the same spec
    again = cat.model("llama-3.1-70b-instruct")
    assert again.params_b == tuned.params_b
    mixtral = cat.model("mistralai/Mixtral-8x7B-Instruct-v0.1")
    assert mixtral.params_b == pytest.approx(46.7, rel=0.01)
    # a quantized checkpoint is another model: the FP8 suffix is not dropped
    assert find("meta-llama/Llama-3.1-70B-Instruct-FP8") is None


@pytest.mark.parametrize(("name", "library"), [
    ("meta-llama/Llama-3.3-70B-Instruct", "meta-llama/Meta-Llama-3.1-70B"),
    ("deepseek-ai/DeepSeek-R1-0528", "deepseek-ai/DeepSeek-R1"),
    ("DeepSeek-V3-0324", "deepseek-ai/DeepSeek-V3"),
])
def test_a_later_release_of_the_same_architecture_reads_the_earlier_file(
        name: str, library: str) -> None:
    spec = bundled_catalog().model(name)
    base = bundled_catalog().model(library)
    assert (spec.params_b, spec.context_length) == (base.params_b, base.context_length)
    assert spec.model == name.split("/")[-1]
    assert f"bundled config.json of {library}, whose architecture" in spec.source
    assert "model card" in spec.source


def test_a_refused_architecture_in_the_library_is_one_line_naming_the_field() -> None:
    with pytest.raises(InputError) as exc:
        bundled_catalog().model("nvidia/NVIDIA-Nemotron-3-Nano-30B-A3B-BF16")
    assert "field hybrid_override_pattern" in str(exc.value) and "\n" not in str(exc.value)


def test_a_model_neither_bundled_nor_in_the_library_is_unknown() -> None:
    with pytest.raises(UnknownNameError):
        bundled_catalog().model("acme/No-Such-Model-7B")
    # another organisation's checkpoint of that name is not the library's
    with pytest.raises(UnknownNameError):
        bundled_catalog().model("acme/Llama-3.1-70B-Instruct")


def test_validate_reads_a_run_of_a_library_model_without_a_config(
        cli, tmp_path: Path, foreign_run) -> None:
    run = foreign_run(model_id="Qwen/Qwen3-30B-A3B", tokenizer_id="Qwen/Qwen3-30B-A3B")
    res = cli("validate", str(run), "--gpu", "H100-SXM", "--gpu-count", "1", "--format",
              "json")
    assert res.exit_code == 0, res.stderr
    (rec,) = json.loads(res.stdout)["runs"]
    assert (rec["model"], rec["config"], rec["calibrated"]) == ("Qwen3-30B-A3B", "1xH100-SXM",
                                                                False)


def test_predict_names_where_the_models_architecture_comes_from(cli) -> None:
    res = cli("predict", "--model", "deepseek-ai/DeepSeek-R1", "--config", "8xH200", "--rate",
              "2", "--num-prompts", "20", "--seeds", "1", "--format", "json")
    assert res.exit_code == 0, res.stderr
    out = json.loads(res.stdout)
    assert out["model"] == "DeepSeek-R1" and out["calibrated"] is False
    assert out["model_source"].startswith("bundled config.json of deepseek-ai/DeepSeek-R1 (")
    table = cli("predict", "--model", "deepseek-ai/DeepSeek-R1", "--config", "8xH200",
                "--rate", "2", "--num-prompts", "20", "--seeds", "1")
    assert table.exit_code == 0 and "model: bundled config.json of" in table.stdout
