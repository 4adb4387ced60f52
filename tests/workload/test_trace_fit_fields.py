"""A trace's fitted class fields are a class a scenario accepts, even for lengths all equal."""

from __future__ import annotations

from pathlib import Path

from fleetplan.workload.lengths import LengthModel
from fleetplan.workload.trace import fit_trace, read_trace


def test_fitted_fields_of_constant_lengths_are_a_valid_length_model(tmp_path: Path) -> None:
    rows = "".join(f"{i * 0.5},128,64\n" for i in range(20))  # every prompt 128, every output 64
    p = tmp_path / "const.csv"
    p.write_text("TIMESTAMP,ContextTokens,GeneratedTokens\n" + rows)
    fields = fit_trace(read_trace(p)).class_fields()
    for key in ("input_tokens", "output_tokens"):
        assert fields[key]["cv"] > 0, fields[key]  # 4 decimals printed 0.0: refused (> 0)
    model = LengthModel(input=fields["input_tokens"], output=fields["output_tokens"])
    assert model.input.min == model.input.max == 128
