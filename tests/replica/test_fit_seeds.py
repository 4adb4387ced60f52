"""The fit's length seeds as a choice (``--fit-seeds``): how far the fit's own noise moves the
figures is something a user can measure, and a calibration file says which seeds made it."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from fleetplan.errors import InputError
from fleetplan.profiles.store import load_profiles
from fleetplan.replica.calibrate import FIT_SEEDS, MAX_FIT_SEEDS, check_fit_seeds, fit_many
from fleetplan.replica.calibration_file import load_calibration_file
from fleetplan.validate.core import load_runs, validate
from fleetplan.validate.cv import leave_one_config_out, leave_one_rate_out
from fleetplan.validate.markdown import validation_markdown
from fleetplan.validate.records import CrossValidation, ValidationResult

KEY = ("DeepSeek-R1-Distill-Qwen-1.5B", "1xH100-PCIe")
ONE = ("--model", KEY[0], "--config", KEY[1], "--max-nfev", "6", "--jobs", "1", "-q")


def _runs() -> list:
    return [r for r in load_runs(load_profiles()) if r.key == KEY]


@given(st.lists(st.integers(0, 2**32 - 1), min_size=1, max_size=MAX_FIT_SEEDS, unique=True))
def test_any_set_of_distinct_seeds_is_taken_as_given(seeds: list[int]) -> None:
    assert check_fit_seeds(seeds) == tuple(seeds)


@pytest.mark.parametrize("seeds", [[], [1, 1], [-1], [2**32], [True], [0.5], "01",
                                   list(range(MAX_FIT_SEEDS + 1))])
def test_seeds_a_fit_cannot_replay_are_refused(seeds) -> None:
    with pytest.raises(InputError):
        check_fit_seeds(seeds)


def test_the_seeds_reach_the_fit() -> None:
    runs = _runs()
    default, = fit_many([runs], jobs=1, max_nfev=6)
    again, = fit_many([runs], jobs=1, max_nfev=6, seeds=FIT_SEEDS)
    other, = fit_many([runs], jobs=1, max_nfev=6, seeds=(2, 3))
    assert again.params == default.params  # the default is FIT_SEEDS
    assert other.params != default.params  # other replays, another fit


def test_calibrate_records_the_seeds_and_refuses_to_mix_them_in_one_file(
        cli, tmp_path: Path) -> None:
    out = tmp_path / "cal.json"
    res = cli("calibrate", *ONE, "--fit-seeds", "2,3", "--out", str(out), "--format", "json")
    assert res.exit_code == 0, res.stderr
    assert json.loads(res.stdout)["fit_seeds"] == [2, 3]
    first = out.read_bytes()
    assert json.loads(first)["fit"]["seeds"] == [2, 3]
    res = cli("calibrate", *ONE, "--fit-seeds", "2, 3", "--out", str(out))
    assert res.exit_code == 0 and out.read_bytes() == first  # same seeds: same bytes
    # another configuration with the default seeds would leave the file claiming one set
    res = cli("calibrate", "--model", KEY[0], "--config", "1xRTX-4090", "--max-nfev", "6",
              "--jobs", "1", "-q", "--out", str(out))
    assert res.exit_code == 2
    (line,) = res.stderr.strip().splitlines()
    assert str(out) in line and "(2, 3)" in line and "(0, 1)" in line
    assert out.read_bytes() == first  # refused before fitting: nothing written


@pytest.mark.parametrize("value", ["", "1,x", "1,1", "-1", "1;2"])
def test_a_bad_seed_list_is_one_line(cli, tmp_path: Path, value: str) -> None:
    out = tmp_path / "cal.json"
    res = cli("calibrate", *ONE, "--fit-seeds", value, "--out", str(out))
    assert res.exit_code == 2
    (line,) = res.stderr.strip().splitlines()
    assert line.startswith("fleetplan: error: --fit-seeds") and repr(value) in line
    assert not out.exists()
    res = cli("validate", "--cv", "--fit-seeds", value)
    assert res.exit_code == 2 and len(res.stderr.strip().splitlines()) == 1


def test_validate_takes_fit_seeds_only_with_cv(cli) -> None:
    res = cli("validate", "--fit-seeds", "2,3")
    assert res.exit_code == 2
    assert "--cv" in res.stderr.strip()


def test_leave_one_rate_out_refits_with_the_seeds_and_the_result_says_which() -> None:
    runs = _runs()
    default = leave_one_rate_out(runs, jobs=1, max_nfev=6, seeds=(0,))
    other = leave_one_rate_out(runs, jobs=1, max_nfev=6, seeds=(0,), fit_seeds=(2, 3))
    preds = [[r.metrics["ttft_p50_ms"].predicted for r in cv.runs] for cv in (default, other)]
    assert preds[0] != preds[1]
    loco = leave_one_config_out(runs, load_calibration_file().configs, seeds=(0,))
    cv = CrossValidation(other, loco, fit_seeds=(2, 3))
    assert cv.to_dict()["fit_seeds"] == [2, 3]
    saved = replace(validate(runs, calibration=load_calibration_file()), cv=cv).to_dict()
    back = ValidationResult.from_dict(json.loads(json.dumps(saved)))
    assert back.cv is not None and back.cv.fit_seeds == (2, 3)
    assert "replays length seeds 2, 3" in validation_markdown(back, command="x")
    # a result saved before the field was made with the default seeds
    del saved["cv"]["fit_seeds"]
    old = ValidationResult.from_dict(saved)
    assert old.cv is not None and old.cv.fit_seeds == FIT_SEEDS


def test_refitting_every_entry_of_a_file_with_other_seeds_is_not_mixing(
        cli, tmp_path: Path) -> None:
    """The configuration is named as the user spells it (an alias of the GPU): the entry it
    replaces is the file's only one, so nothing fitted with the old seeds stays."""
    out = tmp_path / "cal.json"
    assert cli("calibrate", *ONE, "--out", str(out)).exit_code == 0
    res = cli("calibrate", "--model", KEY[0], "--config", "1xh100-pcie", "--max-nfev", "6",
              "--jobs", "1", "-q", "--fit-seeds", "2,3", "--out", str(out))
    assert res.exit_code == 0, res.stderr
    data = json.loads(out.read_text())
    assert data["fit"]["seeds"] == [2, 3] and len(data["configs"]) == 1
