"""``bench --ingest`` stores every result the store accepts: a refused one is one line and exit 2,
the others are saved (issue 16); a model the catalog lacks is refused before measuring."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from bench_fake_server import Plan

SERVED = str(Path(__file__).resolve().parents[1] / "data" / "catalog-served-names")  # knows "m"
BASE = ["--model", "m", "--input-len", "8", "--output-len", "4", "--power", "none",
        "--no-progress", "--gpu", "H100-SXM", "--gpu-count", "1"]


def test_a_refused_result_of_a_sweep_costs_only_itself(fake_server: Any, cli: Any,
                                                       tmp_path: Path,
                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    import fleetplan.profiles.ingest as ingest
    from fleetplan.profiles.store import load_profiles

    real = ingest.check_model

    def refuse_the_second(src: Any, model: str, opt: Any, *rest: Any) -> str:  # 20 req/s
        if src.line == 2:
            raise ingest._fail(src, "model_id", "refused by the test")
        return real(src, model, opt, *rest)

    monkeypatch.setattr(ingest, "check_model", refuse_the_second)
    srv = fake_server(lambda i, b: Plan(tokens=2))
    store = tmp_path / "store.csv"
    res = cli("bench", "--endpoint", srv.url, *BASE, "--sweep", "40,20", "--num-prompts", "3",
              "--ingest", "--store", str(store), "--catalog", SERVED)
    errors = [ln for ln in res.stderr.splitlines() if ln.startswith("fleetplan: error:")]
    assert res.exit_code == 2 and "Traceback" not in res.stderr
    assert len(errors) == 1 and "line 2" in errors[0] and "refused by the test" in errors[0]
    rows = load_profiles(store).frame
    assert list(rows["request_rate"]) == [40.0] and list(rows["model"]) == ["m"]
    assert f"1 run(s) added to {store}" in res.stderr


def test_ingest_of_a_model_the_catalog_lacks_is_refused_before_any_request(
        fake_server: Any, cli: Any, tmp_path: Path) -> None:
    srv = fake_server(lambda i, b: Plan(tokens=2))
    store = tmp_path / "s.csv"
    res = cli("bench", "--endpoint", srv.url, *BASE, "--num-prompts", "2", "--ingest",
              "--store", str(store))  # no --catalog: "m" is not a model of the bundled one
    errors = [ln for ln in res.stderr.splitlines() if ln.startswith("fleetplan: error:")]
    assert res.exit_code == 2 and len(errors) == 1, res.stderr
    assert "--model 'm'" in errors[0] and "--model-config" in errors[0]
    assert srv.records == [] and not store.exists()
