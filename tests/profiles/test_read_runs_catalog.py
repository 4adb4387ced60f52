"""``read_runs`` checks a record's model against the active catalog by default (issue 16): a
store never holds a run of a model no command can model, unless the model is described (a user
catalog, a config.json) or the caller names its own models."""

from __future__ import annotations

import shutil
from pathlib import Path

from fleetplan.context import DataContext
from fleetplan.profiles.ingest import IngestOptions, ingest_paths, read_runs
from fleetplan.profiles.store import ProfileStore, empty_frame

DATA = Path(__file__).resolve().parents[1] / "data"
UNKNOWN_MODEL = DATA / "bad" / "results" / "unknown-model.json"  # model No-Such-Model-7B
GEMMA_CFG = DATA / "hf-configs" / "gemma-2-9b-it" / "config.json"


def test_a_run_of_a_model_the_catalog_lacks_is_refused_by_default() -> None:
    runs, errors = read_runs(UNKNOWN_MODEL)
    assert runs == [] and len(errors) == 1
    assert "model_id" in errors[0] and "No-Such-Model-7B" in errors[0]
    assert "--model-config" in errors[0]  # says how to describe it
    store = ProfileStore(empty_frame())
    report = ingest_paths([UNKNOWN_MODEL], store)  # the library's store boundary too
    assert report.added == [] and len(report.errors) == 1 and len(store) == 0


def test_a_described_model_is_accepted_in_the_catalog_given(tmp_path: Path) -> None:
    cfg = tmp_path / "No-Such-Model-7B"
    cfg.mkdir()
    shutil.copy(GEMMA_CFG, cfg / "config.json")  # the folder names the model
    ctx = DataContext.build(model_configs=[cfg])
    runs, errors = read_runs(UNKNOWN_MODEL, IngestOptions(catalog=ctx.catalog))
    assert errors == [] and [r.model for r in runs] == ["No-Such-Model-7B"]
    assert read_runs(UNKNOWN_MODEL)[0] == []  # given no catalog: the bundled one


def test_a_caller_naming_its_own_models_decides() -> None:
    runs, errors = read_runs(UNKNOWN_MODEL, IngestOptions(known_models={"No-Such-Model-7B"}))
    assert errors == [] and len(runs) == 1
