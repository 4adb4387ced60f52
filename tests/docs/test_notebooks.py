"""Notebooks: committed without outputs, and each one runs top to bottom.

Each notebook runs in a fresh kernel of this interpreter with ``notebooks/`` as its working
directory; any cell that raises fails the test with the cell's error. The notebooks check their
own headline figures with asserts (e.g. the study's $0.185 per 1M tokens).
"""

from __future__ import annotations

from pathlib import Path

import nbformat
import pytest

ROOT = Path(__file__).resolve().parents[2]
NOTEBOOKS = sorted((ROOT / "notebooks").glob("*.ipynb"))
EXPECTED = {"01-reproduce-the-study.ipynb", "02-plan-a-hybrid-fleet.ipynb",
            "03-replay-a-production-trace.ipynb", "04-several-models.ipynb"}


def test_the_notebooks_exist() -> None:
    assert {p.name for p in NOTEBOOKS} >= EXPECTED


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_committed_notebook_has_no_outputs(path: Path) -> None:
    nb = nbformat.read(path, as_version=4)
    nbformat.validate(nb)
    dirty = [i for i, c in enumerate(nb.cells) if c.cell_type == "code"
             and (c.get("outputs") or c.get("execution_count") is not None)]
    assert not dirty, f"{path.name}: cells {dirty} carry outputs; strip them before committing"


@pytest.mark.slow
@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_notebook_runs(path: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from nbclient import NotebookClient

    # the kernel inherits the environment: keep plots off-screen and caches in a temp dir
    monkeypatch.setenv("MPLBACKEND", "module://matplotlib_inline.backend_inline")
    monkeypatch.setenv("FLEETPLAN_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setenv("PYDEVD_DISABLE_FILE_VALIDATION", "1")
    nb = nbformat.read(path, as_version=4)
    client = NotebookClient(nb, timeout=600, kernel_name="python3",
                            resources={"metadata": {"path": str(path.parent)}})
    client.execute()
    errors = [o for c in nb.cells if c.cell_type == "code" for o in c.get("outputs", [])
              if o.get("output_type") == "error"]
    assert not errors
    shown = sum(1 for c in nb.cells if c.cell_type == "code" for o in c.get("outputs", [])
                if "image/png" in o.get("data", {}))
    assert shown >= 1, f"{path.name}: no figure was drawn"
