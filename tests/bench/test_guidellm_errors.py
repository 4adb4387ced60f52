"""A GuideLLM report that ingest cannot read is refused alone: one line naming the file, the
field and the value, while the other reports of the same folder are still ingested (exit 2)."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest
from test_guidellm_ingest import report as guidellm_report


@pytest.mark.parametrize("extras, field, value", [
    ({"gpu": "L40S", "gpu_count": "two"}, "extras.gpu_count", "'two'"),
    ({"gpu": "L40S", "gpu_count": 0}, "extras.gpu_count", "0"),
    ({"gpu": "L40S", "gpu_count": True}, "extras.gpu_count", "True"),
    ("L40S x2", "extras", "str"),
])
def test_a_bad_guidellm_report_is_refused_alone(tmp_path: Path, cli: Any, extras: Any,
                                                field: str, value: str) -> None:
    good = copy.deepcopy(guidellm_report())
    good["extras"] = {"gpu": "L40S", "gpu_count": 1}
    bad = copy.deepcopy(guidellm_report())
    bad["extras"] = extras
    src = tmp_path / "reports"
    src.mkdir()
    (src / "a-bad.json").write_text(json.dumps(bad))
    (src / "b-good.json").write_text(json.dumps(good))
    store = tmp_path / "store.csv"
    res = cli("ingest", str(src), "--store", str(store))
    assert res.exit_code == 2 and "Traceback" not in res.stderr
    errs = [ln for ln in res.stderr.splitlines() if "a-bad.json" in ln]
    assert len(errs) == 1 and f": {field}: " in errs[0] and value in errs[0], res.stderr
    assert "3 run(s) added" in res.stdout      # the good report's three benchmarks
    assert len(store.read_text().strip().splitlines()) == 1 + 3


def test_guidellm_gpu_count_as_a_digit_string_is_read(tmp_path: Path, cli: Any) -> None:
    rep = copy.deepcopy(guidellm_report())
    rep["extras"] = {"gpu": "L40S", "gpu_count": "2"}
    (tmp_path / "r.json").write_text(json.dumps(rep))
    res = cli("ingest", str(tmp_path / "r.json"), "--store", str(tmp_path / "s.csv"))
    assert res.exit_code == 0, res.stderr
    assert "2xL40S" in (tmp_path / "s.csv").read_text()
