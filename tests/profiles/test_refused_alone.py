"""A run whose model or GPU the catalog does not know, or a file that cannot be read, is
refused alone with one line in ``validate`` and ``calibrate`` (as in ``ingest``); the others go
on and the command exits 2."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

from fleetplan.profiles.ingest import read_runs
from fleetplan.profiles.store import ProfileStore, empty_frame, load_profiles

DATA = Path(__file__).resolve().parents[1] / "data"
GEMMA = (DATA / "ionet-vllm-0.8.5"
         / "vllm_200prompts1qps_gemma-2-9b-it_sharegpt_1xNVIDIA-H100-PCIe.json")
UNKNOWN_MODEL = DATA / "bad" / "results" / "unknown-model.json"


def _errors(stderr: str) -> list[str]:
    return [ln for ln in stderr.splitlines() if ln.startswith("fleetplan: error: ")]


def test_validate_refuses_bad_files_and_unknown_models_alone(tmp_path: Path, cli: Any) -> None:
    runs = tmp_path / "runs"
    runs.mkdir()
    for f in (GEMMA, UNKNOWN_MODEL, DATA / "bad" / "results" / "tp-abc.json"):
        shutil.copy(f, runs / f.name)
    res = cli("validate", str(runs), "--format", "json")
    assert res.exit_code == 2 and "Traceback" not in res.stderr
    errs = _errors(res.stderr)
    assert len(errs) == 2
    assert any("unknown-model.json" in e and "unknown model 'No-Such-Model-7B'" in e
               for e in errs)
    assert any("tp-abc.json" in e and "tensor_parallel_size" in e for e in errs)
    out = json.loads(res.stdout)
    assert [r["model"] for r in out["runs"]] == ["gemma-2-9b-it"]  # the good one, validated


def test_calibrate_refuses_a_stored_run_of_an_unknown_model_alone(tmp_path: Path,
                                                                  cli: Any) -> None:
    st = ProfileStore(empty_frame())
    for f in (GEMMA, UNKNOWN_MODEL):  # stored without a catalog check (the library's default)
        found, errors = read_runs(f)
        assert errors == []
        st.add(found)
    store = st.save(tmp_path / "store.csv")
    out = tmp_path / "cal.json"
    res = cli("calibrate", "--store", str(store), "--max-nfev", "5", "--out", str(out),
              "--format", "json", "--quiet")
    assert res.exit_code == 2 and "Traceback" not in res.stderr
    (err,) = _errors(res.stderr)
    assert "unknown model No-Such-Model-7B" in err and "unknown-model.json line 1" in err
    shown = json.loads(res.stdout)
    assert [(c["model"], c["config"]) for c in shown["configs"]] == [("gemma-2-9b-it",
                                                                     "1xH100-PCIe")]
    written = json.loads(out.read_text())  # the others' fit is written
    assert "gemma-2-9b-it" in json.dumps(written)
    assert len(load_profiles(store)) == 2  # the store itself is left as it was
