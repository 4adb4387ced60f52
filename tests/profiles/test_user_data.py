"""Commands never write the bundled ``data/``: without --store / --out they write the user's
files (under $XDG_DATA_HOME/fleetplan), which every command then reads by default."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest

from fleetplan.catalog import data_dir


def _digests() -> dict[str, str]:
    return {p.name: hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(data_dir().iterdir()) if p.is_file()}


@pytest.fixture
def user_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "xdg"))
    monkeypatch.delenv("FLEETPLAN_DATA_DIR", raising=False)
    return tmp_path / "xdg" / "fleetplan"


def _new_run(measured_dir: Path, tmp_path: Path) -> Path:
    src = measured_dir / "vllm_200prompts1qps_gemma-2-9b-it_sharegpt_1xNVIDIA-H100-PCIe.json"
    rec = json.loads(src.read_text())
    rec["date"] = "20990101-000000"  # a run the bundled store does not hold
    out = tmp_path / "new-run.json"
    out.write_text(json.dumps(rec) + "\n")
    return out


def test_ingest_without_store_writes_the_user_store_not_data(cli, user_dir: Path,
                                                            measured_dir: Path,
                                                            tmp_path: Path) -> None:
    before = _digests()
    first = cli("profiles", "--format", "json")
    assert "reading your" not in first.stderr  # the bundled store: nothing to say
    bundled = json.loads(first.stdout)
    res = cli("ingest", str(_new_run(measured_dir, tmp_path)))
    assert res.exit_code == 0, res.stderr
    assert _digests() == before
    target = user_dir / "profiles.csv"
    assert target.is_file() and str(target) in res.stderr
    assert "1 run(s) added" in res.stdout
    # the user's store is the bundled runs plus the new one, and is read by default from now on
    shown = cli("profiles", "--format", "json")
    assert f"reading your profile store {target}" in shown.stderr  # says which store it read
    mine = json.loads(shown.stdout)
    assert len(mine) == len(bundled) + 1
    assert {r["run_id"] for r in bundled} < {r["run_id"] for r in mine}
    again = cli("ingest", str(_new_run(measured_dir, tmp_path)))
    assert "0 run(s) added" in again.stdout and _digests() == before


def test_calibrate_without_out_writes_the_user_calibration_not_data(cli,
                                                                   user_dir: Path) -> None:
    before = _digests()
    bundled = json.loads((data_dir() / "calibration.json").read_text())
    res = cli("calibrate", "--model", "DeepSeek-R1-Distill-Qwen-1.5B", "--config", "1xH100-PCIe",
              "--max-nfev", "6", "--jobs", "1", "--format", "json")
    assert res.exit_code == 0, res.stderr
    assert _digests() == before
    target = user_dir / "calibration.json"
    assert str(target) in res.stderr and json.loads(res.stdout)["out"] == str(target)
    mine = json.loads(target.read_text())
    # started from the bundled calibration: every other configuration is still there
    keys = {(e["model"], e["config"]) for e in mine["configs"]}
    assert keys == {(e["model"], e["config"]) for e in bundled["configs"]}
    from fleetplan.replica.calibration_file import default_calibration_path

    assert default_calibration_path() == target  # read by default from now on
    pred = cli("predict", "--model", "DeepSeek-R1-Distill-Qwen-1.5B", "--config", "1xH100-PCIe",
               "--rate", "1", "--steady", "--format", "json")
    assert pred.exit_code == 0, pred.stderr
    assert f"reading your calibration {target}" in pred.stderr
    assert json.loads(pred.stdout)["params_source"] == next(
        e["params"]["source"] for e in mine["configs"]
        if (e["model"], e["config"]) == ("DeepSeek-R1-Distill-Qwen-1.5B", "1xH100-PCIe"))
