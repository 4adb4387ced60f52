"""Bad input reaches the user as one line naming the file, the field and the value (exit 2).

Each case here once escaped as a Python traceback (a ``ValueError`` from numpy or the length
sampler, an ``int("two")``): the test runs the command a user would run and reads its stderr.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]
HYBRID = ROOT / "examples" / "hybrid-chat-batch.yaml"


def _scenario(tmp_path: Path, edit: dict[str, Any], cls: int) -> Path:
    data = yaml.safe_load(HYBRID.read_text())
    data["classes"][cls].update(edit)
    del data["fleet"]  # solve would say (one note line) that it ignores the fleet
    p = tmp_path / "bad.yaml"
    p.write_text(yaml.safe_dump(data))
    return p


def _one_line_error(res: Any) -> str:
    assert res.exit_code == 2, (res.exit_code, res.stderr)
    assert "Traceback" not in res.stderr
    lines = res.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("fleetplan: error: "), res.stderr
    return lines[0]


# (class index, edit, field path the error names, words it must say)
LENGTH_CASES = [
    (0, {"max_total_tokens": 2}, "classes[0].max_total_tokens = 2", ["shortest request"]),
    (1, {"input_tokens": {"dist": "uniform", "low": 500, "high": 100}},
     "classes[1].input_tokens.high = 100", ["low(=500)"]),
    (1, {"input_tokens": {"dist": "fixed", "value": 5000, "max": 4000}},
     "classes[1].input_tokens.value = 5000", ["max 4000"]),
    (1, {"input_tokens": {"dist": "lognormal", "mean": float("inf"), "cv": 0.8}},
     "classes[1].input_tokens.mean = inf", ["finite"]),
    (1, {"input_tokens": {"dist": "lognormal", "mean": 1e6, "cv": 0.8, "max": 4000}},
     "classes[1].input_tokens", ["mean 1e+06", "max 4000"]),
    (1, {"output_tokens": {"dist": "lognormal", "mean": 300, "cv": 0.8, "min": 100},
         "max_total_tokens": 50},
     "classes[1].max_total_tokens = 50", ["output min 100"]),
    (1, {"input_tokens": {"dist": "empirical", "values": [9000], "max": 4000}},
     "classes[1].input_tokens.values", ["no value", "max 4000"]),
]


@pytest.mark.parametrize("command", ["solve", "simulate"])
@pytest.mark.parametrize("cls, edit, field, words", LENGTH_CASES,
                         ids=[c[2].split(".", 1)[1] + "-" + str(i)
                              for i, c in enumerate(LENGTH_CASES)])
def test_impossible_length_models_are_refused_naming_file_field_and_value(
        tmp_path: Path, cli: Any, command: str, cls: int, edit: dict[str, Any], field: str,
        words: list[str]) -> None:
    path = _scenario(tmp_path, edit, cls)
    line = _one_line_error(cli(command, str(path), "--format", "json"))
    assert f"{path}: {field}" in line
    for w in words:
        assert w in line


def test_a_cap_that_almost_no_request_fits_is_refused_by_solve(tmp_path: Path, cli: Any) -> None:
    # valid per field (1 + 1 <= 3) but a 600-token mean prompt practically never fits 3 tokens:
    # refused when the scenario loads (issue 16), naming the file and the class's field
    path = _scenario(tmp_path, {"max_total_tokens": 3, "input_tokens": {
        "dist": "lognormal", "mean": 600, "cv": 0.8},
        "output_tokens": {"dist": "lognormal", "mean": 300, "cv": 0.8}}, 1)
    line = _one_line_error(cli("solve", str(path)))
    assert f"{path}: classes[1].max_total_tokens" in line and "max_total_tokens(=3)" in line


def test_bench_seed_outside_numpy_range_is_refused_at_parse_time(cli: Any) -> None:
    # the endpoint is never contacted: the option is refused before anything runs
    res = cli("bench", "--endpoint", "http://127.0.0.1:9", "--model", "m",
              "--seed", str(2**32))
    assert res.exit_code == 2 and "Traceback" not in res.stderr
    assert "--seed" in res.stderr and str(2**32 - 1) in res.stderr


def test_predict_arrival_seed_outside_numpy_range_is_refused(cli: Any) -> None:
    res = cli("predict", "-m", "DeepSeek-R1-Distill-Qwen-14B", "-c", "1xH100-PCIe",
              "--rate", "16", "--arrival-seed", str(2**32))
    assert res.exit_code == 2 and "Traceback" not in res.stderr
    assert "--arrival-seed" in res.stderr and str(2**32 - 1) in res.stderr
