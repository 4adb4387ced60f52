"""The request records' one way of naming a field in an error: the caller's ``names`` (the CLI's
flags), else the field's own name (a notebook user's keyword)."""

from __future__ import annotations

import pytest

from fleetplan.errors import InputError
from fleetplan.replica.calibrate_run import CalibrateRequest
from fleetplan.validate.prediction import PredictRequest
from fleetplan.validate.run import ValidateRequest


def test_an_error_names_the_flag_the_caller_gave_else_the_field() -> None:
    with pytest.raises(InputError, match=r"^num_prompts 0 must be"):
        PredictRequest(config="1xH100-PCIe", rate=1.0, num_prompts=0)
    with pytest.raises(InputError, match=r"^--num-prompts 0 must be"):
        PredictRequest(config="1xH100-PCIe", rate=1.0, num_prompts=0,
                       names={"num_prompts": "--num-prompts"})


@pytest.mark.parametrize("record", [
    PredictRequest(config="1xH100-PCIe", rate=1.0), ValidateRequest(), CalibrateRequest()])
def test_names_are_how_a_record_is_called_not_what_it_asks(record: object) -> None:
    from dataclasses import replace

    named = replace(record, names={"jobs": "--jobs"})  # type: ignore[type-var]
    assert named.name("jobs") == "--jobs" and named.name("store") == "store"
    assert record.name("jobs") == "jobs"  # type: ignore[attr-defined]
    assert named == record and hash(named) == hash(record)
    assert "--jobs" not in repr(named)
