"""The calibrated model's held-out errors come from one data file that the validation writes:
a damaged file is refused with the file and the field, never planned with."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from fleetplan.errors import DataError
from fleetplan.validate.model_errors import ModelErrors, model_errors

BUNDLED = Path(__file__).resolve().parents[2] / "data" / "model_errors.json"


def test_the_bundled_file_reads_back_to_what_it_holds(tmp_path: Path) -> None:
    errors = model_errors()
    again = ModelErrors.from_dict(errors.to_dict(), "copy")
    assert again == errors
    # every server kind with signed quantiles has its median |error| figure too
    assert set(errors.quantiles_by_kind) <= set(errors.by_kind)


@pytest.mark.parametrize("edit, words", [
    (lambda d: d["by_gpu"]["H100-PCIe"].pop("n"), "by_gpu.H100-PCIe: expected"),
    (lambda d: d["by_kind"]["RTX-4090, one GPU"].update(median_abs_error_pct=-1),
     "by_kind.RTX-4090, one GPU: -1.0"),
    (lambda d: d["quantiles_by_kind"]["RTX-4090, one GPU"].update(p10=0.5),
     "quantiles must be finite, > -1 and ordered"),
    (lambda d: d.update(metric="tpot_p50_ms"), "metric: expected 'ttft_p99_ms'"),
    (lambda d: d.pop("unmeasured_pct"), "unmeasured_pct: expected a number"),
])
def test_a_damaged_file_is_refused_with_its_field(tmp_path: Path, edit, words: str) -> None:
    data = json.loads(BUNDLED.read_text(encoding="utf-8"))
    edit(data)
    path = tmp_path / "model_errors.json"
    path.write_text(json.dumps(data), encoding="utf-8")
    with pytest.raises(DataError, match=None) as info:
        model_errors(path)
    assert str(path.resolve()) in str(info.value) and words in str(info.value)


def test_the_figures_are_those_of_the_validation_that_writes_them() -> None:
    from fleetplan.validate.bands import ErrorQuantiles
    from fleetplan.validate.records import (
        CrossValidation,
        CvMetricSummary,
        CvResult,
        NoiseFloor,
        ValidationResult,
    )

    def rows(pct: float | None, n: int) -> dict[str, CvMetricSummary]:
        return {"ttft_p99_ms": CvMetricSummary(pct, n),
                "tpot_p50_ms": CvMetricSummary(99.0, n)}  # another metric: not taken

    loro = CvResult((), {}, {"A": rows(3.44, 24), "B": rows(23.46, 17), "C": rows(None, 0)},
                    by_kind={"A, one GPU": rows(3.05, 20), "B, tensor-parallel": rows(90.2, 7)},
                    error_quantiles_by_kind={"B, tensor-parallel": {
                        "ttft_p99_ms": ErrorQuantiles(-0.925912, -0.60718, 0.64123, 7)}})
    loco = CvResult((), {}, {"A": rows(8.2, 48), "B": rows(19.6, 33)})
    result = ValidationResult((), {}, NoiseFloor(0, {}), CrossValidation(loro, loco))
    e = ModelErrors.from_validation(result, "test")
    # rounded as docs/validation.md prints them; a GPU with no figure is left out
    assert e.by_gpu == {"A": (3.4, 24), "B": (23.5, 17)}
    assert e.by_kind == {"A, one GPU": (3.0, 20), "B, tensor-parallel": (90.2, 7)}
    assert e.quantiles_by_kind == {"B, tensor-parallel": ErrorQuantiles(-0.9259, -0.6072,
                                                                         0.6412, 7)}
    assert e.unmeasured_pct == 19.6  # the worst GPU type held out of its own configurations
    with pytest.raises(DataError, match="without --cv"):
        ModelErrors.from_validation(ValidationResult((), {}, NoiseFloor(0, {})), "x")
