"""The calibration file read into typed records and written back: same bytes, clear errors."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from fleetplan.catalog._tables import data_dir
from fleetplan.errors import DataError
from fleetplan.replica.calibration_file import (
    DEFAULT_CALIBRATION_NAME,
    CalibrationFile,
    load_calibration_file,
)
from fleetplan.replica.params import replica_params


def _bundled() -> Path:
    return data_dir() / DEFAULT_CALIBRATION_NAME


def test_bundled_file_round_trips_byte_for_byte() -> None:
    path = _bundled()
    raw = path.read_text(encoding="utf-8")
    cal = CalibrationFile.from_dict(json.loads(raw), str(path))
    assert cal.configs and all(e.params.model == e.model for e in cal.configs)
    assert json.dumps(cal.to_dict(), indent=1, allow_nan=False) + "\n" == raw


def test_a_calibrated_pair_reads_its_entry(tmp_path: Path) -> None:
    data = json.loads(_bundled().read_text(encoding="utf-8"))
    entry = data["configs"][0]
    entry["params"]["c_step"] = 0.0123
    f = tmp_path / "cal.json"
    f.write_text(json.dumps(data), encoding="utf-8")
    p = replica_params(entry["model"], entry["config"], calibration=f)
    assert p.c_step == 0.0123 and p.calibrated == entry["params"]["calibrated"]


@pytest.mark.parametrize(("field", "value", "message"), [
    ("gpu_count", "two", "configs[0]: field 'gpu_count'(='two') must be int"),
    ("params", {"model": "x"}, "configs[0]: invalid replica parameters 'params'"),
    ("ratios_to_ideal", None, "configs[0]: field 'ratios_to_ideal'(=None) must be dict"),
])
def test_a_bad_entry_is_one_line_naming_file_entry_and_field(
        tmp_path: Path, field: str, value: object, message: str) -> None:
    data = json.loads(_bundled().read_text(encoding="utf-8"))
    data["configs"][0][field] = value
    f = tmp_path / "bad.json"
    f.write_text(json.dumps(data), encoding="utf-8")
    with pytest.raises(DataError) as err:
        load_calibration_file(f)
    assert str(f.resolve()) in str(err.value) and message in str(err.value)


def test_a_missing_field_is_named(tmp_path: Path) -> None:
    data = json.loads(_bundled().read_text(encoding="utf-8"))
    del data["configs"][1]["nfev"]
    with pytest.raises(DataError, match=r"configs\[1\]: missing field 'nfev'"):
        load_calibration_file(data)
