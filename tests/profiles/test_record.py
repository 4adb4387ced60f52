"""The typed run record and the store schema describe the same columns."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from fleetplan.profiles.record import BenchmarkRun
from fleetplan.profiles.schema import COLUMNS
from fleetplan.profiles.store import load_profiles

_PY = {"str": str, "int": int, "float": float, "bool": bool}


def test_record_fields_are_the_store_columns() -> None:
    fields = BenchmarkRun.model_fields
    assert list(fields) == [c.name for c in COLUMNS]
    for c in COLUMNS:
        assert fields[c.name].is_required() == (c.required and c.name != "partial"), c.name
        assert _PY[c.kind] in (getattr(fields[c.name].annotation, "__args__", None)
                               or (fields[c.name].annotation,)), c.name


def test_record_refuses_unknown_fields_and_bad_numbers() -> None:
    base = load_profiles().runs()[0].model_dump()
    with pytest.raises(ValidationError, match="extra"):
        BenchmarkRun.model_validate({**base, "colour": "red"})
    for field, value in [("duration_s", -1.0), ("ttft_p99_ms", float("nan")),
                         ("ttft_p50_ms", float("inf")), ("gpu_count", 0)]:
        with pytest.raises(ValidationError):
            BenchmarkRun.model_validate({**base, field: value})
    # request_rate may be inf: vLLM's "send everything at once"
    assert BenchmarkRun.model_validate({**base, "request_rate": float("inf")}).request_rate > 1e300
