"""A user's catalog row or config.json that gives a bundled, calibrated model or GPU other
figures is not silently ignored: the prediction and the plan say the calibration decides."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
MODEL = "DeepSeek-R1-Distill-Qwen-14B"


def _shadowing_config(tmp_path: Path) -> Path:
    folder = tmp_path / MODEL  # the folder's name is the model's name in the catalog
    folder.mkdir()
    shutil.copy(ROOT / "tests" / "data" / "hf-configs" / "Qwen2.5-14B-Instruct" / "config.json",
                folder / "config.json")
    return folder


def _cooler_h100(tmp_path: Path) -> Path:
    lines = (ROOT / "data" / "gpus.csv").read_text().splitlines()
    row = next(x for x in lines if x.startswith("H100-PCIe,"))
    folder = tmp_path / "cat"
    folder.mkdir()
    (folder / "gpus.csv").write_text(lines[0] + "\n" + row.replace(",80,350,", ",80,300,", 1)
                                     + "\n", encoding="utf-8")
    return folder


def test_a_config_json_named_like_a_calibrated_model_is_said_to_be_overruled(
        tmp_path: Path, cli) -> None:
    folder = _shadowing_config(tmp_path)
    res = cli("predict", "-m", MODEL, "-c", "1xH100-PCIe", "--rate", "4", "--seeds", "1",
              "--model-config", str(folder), "--format", "json")
    assert res.exit_code == 0, res.stderr
    note = json.loads(res.stdout)["spec_note"]
    assert note.startswith("1xH100-PCIe is calibrated to measured runs: its speed and KV "
                           "capacity come from that fit, not from the")
    assert str(folder / "config.json") in note and "power" not in note


def test_a_user_gpu_row_is_said_to_be_overruled_in_prediction_and_plan(
        tmp_path: Path, cli) -> None:
    folder = _cooler_h100(tmp_path)
    res = cli("predict", "-m", MODEL, "-c", "1xH100-PCIe", "--rate", "4", "--steady",
              "--catalog", str(folder), "--format", "json")
    assert res.exit_code == 0, res.stderr
    note = json.loads(res.stdout)["spec_note"]
    assert "H100-PCIe row of" in note and str(folder / "gpus.csv") in note
    assert note.endswith("(the GPU row's power figures are used)")
    plan = cli("solve", str(ROOT / "examples" / "hybrid-chat-batch.yaml"), "--catalog",
               str(folder), "--format", "json")
    assert plan.exit_code == 0, plan.stderr
    doc = json.loads(plan.stdout)
    used = {e["config"] for e in doc["fleet"]}
    said = [n for n in doc["notes"] if "is calibrated to measured runs" in n]
    assert ("1xH100-PCIe" in used) == bool(said)
    assert all(n.startswith("1xH100-PCIe ") for n in said)


def test_no_note_without_a_user_figure(cli) -> None:
    res = cli("predict", "-m", MODEL, "-c", "1xH100-PCIe", "--rate", "4", "--steady",
              "--format", "json")
    assert res.exit_code == 0, res.stderr
    assert "spec_note" not in json.loads(res.stdout)
