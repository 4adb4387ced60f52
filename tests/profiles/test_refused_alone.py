"""A run whose model or GPU the catalog does not know, a file that cannot be read, or a run the
replica cannot replay is refused alone with one line in ``validate`` and ``calibrate`` (as in
``ingest``); the others go on and the command exits 2."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest

from fleetplan.profiles.ingest import IngestOptions, read_runs
from fleetplan.profiles.store import ProfileStore, empty_frame, load_profiles

DATA = Path(__file__).resolve().parents[1] / "data"
GEMMA = (DATA / "ionet-vllm-0.8.5"
         / "vllm_200prompts1qps_gemma-2-9b-it_sharegpt_1xNVIDIA-H100-PCIe.json")
UNKNOWN_MODEL = DATA / "bad" / "results" / "unknown-model.json"
# 4 requests, 9 output tokens: well-formed, but the replay protocol cannot spread its tokens
TINY = DATA / "bad" / "good" / "vllm-result.json"


def _errors(stderr: str) -> list[str]:
    return [ln for ln in stderr.splitlines() if ln.startswith("fleetplan: error: ")]


def test_validate_refuses_bad_files_unknown_models_and_unreplayable_runs_alone(
        tmp_path: Path, cli: Any) -> None:
    runs = tmp_path / "runs"
    runs.mkdir()
    for f in (GEMMA, UNKNOWN_MODEL, TINY, DATA / "bad" / "results" / "tp-abc.json"):
        shutil.copy(f, runs / f.name)
    res = cli("validate", str(runs), "--format", "json")
    assert res.exit_code == 2 and "Traceback" not in res.stderr
    errs = _errors(res.stderr)
    assert len(errs) == 3, res.stderr
    assert any("unknown-model.json" in e and "unknown model 'No-Such-Model-7B'" in e
               for e in errs)
    assert any("tp-abc.json" in e and "tensor_parallel_size" in e for e in errs)
    assert any("vllm-result.json" in e and "this run is refused" in e for e in errs)
    out = json.loads(res.stdout)
    assert [(r["model"], r["request_rate"]) for r in out["runs"]] == [("gemma-2-9b-it", 1.0)]


@pytest.mark.parametrize("extra", [(), ("--fit-host-time",)])
def test_calibrate_refuses_unknown_models_and_failing_configurations_alone(tmp_path: Path,
                                                                         cli: Any,
                                                                         extra: tuple) -> None:
    st = ProfileStore(empty_frame())
    on_two = tmp_path / "vllm-result.json"  # the tiny run as if served on 2xH100-PCIe
    on_two.write_text(json.dumps({**json.loads(TINY.read_text()), "gpu_count": 2}))
    for f, opt in ((GEMMA, None),  # a caller naming its own models stores an unknown one
                   (UNKNOWN_MODEL, IngestOptions(known_models={"No-Such-Model-7B"})),
                   (on_two, None)):
        found, errors = read_runs(f, opt)
        assert errors == []
        st.add(found)
    store = st.save(tmp_path / "store.csv")
    out = tmp_path / "cal.json"
    res = cli("calibrate", "--store", str(store), "--max-nfev", "5", "--out", str(out),
              "--format", "json", "--quiet", *extra)
    assert res.exit_code == 2 and "Traceback" not in res.stderr
    errs = _errors(res.stderr)
    assert len(errs) == 2, res.stderr
    assert "unknown model No-Such-Model-7B" in errs[0] and "unknown-model.json line 1" in errs[0]
    assert "gemma-2-9b-it on 2xH100-PCIe" in errs[1] and "configuration is refused" in errs[1]
    shown = json.loads(res.stdout)
    assert [(c["model"], c["config"]) for c in shown["configs"]] == [("gemma-2-9b-it",
                                                                     "1xH100-PCIe")]
    written = json.loads(out.read_text())  # the others' fit is written
    assert "1xH100-PCIe" in json.dumps(written) and "2xH100-PCIe" not in json.dumps(written)
    assert len(load_profiles(store)) == 3  # the store itself is left as it was
    if extra:  # the host time is chosen over the configurations left, together
        search = shown["host_time_search"]
        assert search["configs"] == 1 and len(search["points"]) == 6
        (entry,) = written["configs"]
        assert entry["params"]["c_deliver"] == pytest.approx(search["host_time_us"] * 1e-6)
