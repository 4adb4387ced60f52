"""The nastiest result files, GuideLLM reports and stores (``tests/data/bad/``; README there):
each is refused alone with one line naming the file and what is wrong, never a traceback, and
the good records of the same call are stored."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from fleetplan.profiles.store import load_profiles

BAD = Path(__file__).resolve().parents[1] / "data" / "bad"
GOOD = {"results": (BAD / "good" / "vllm-result.json", 1),
        "guidellm": (BAD / "good" / "guidellm-report.json", 3)}


def _cases(folder: str) -> list[tuple[str, str]]:
    expected = json.loads((BAD / folder / "expected.json").read_text())
    files = sorted(p.name for p in (BAD / folder).iterdir()
                   if p.name not in ("expected.json", "README.md"))
    assert files == sorted(expected), "every corpus file has its expected message"
    return sorted(expected.items())


def _error_lines(stderr: str) -> list[str]:
    return [ln for ln in stderr.splitlines() if ln.startswith("fleetplan: error: ")]


@pytest.mark.parametrize(("folder", "name", "expect"),
                         [("results", n, e) for n, e in _cases("results")]
                         + [("guidellm", n, e) for n, e in _cases("guidellm")])
def test_a_bad_file_is_refused_alone_and_the_good_one_stored(tmp_path: Path, cli: Any,
                                                             folder: str, name: str,
                                                             expect: str) -> None:
    good, n_good = GOOD[folder]
    bad = BAD / folder / name
    store = tmp_path / "store.csv"
    res = cli("ingest", str(bad), str(good), "--store", str(store))
    assert res.exit_code == 2, res.stdout + res.stderr
    assert "Traceback" not in res.stderr
    errs = _error_lines(res.stderr)
    assert len(errs) == 1 and str(bad) in errs[0], res.stderr
    assert expect in errs[0], errs[0]
    assert len(errs[0]) < 600  # bounded: the value is never rendered whole
    assert f"{n_good} run(s) added" in res.stdout
    assert len(load_profiles(store)) == n_good  # the good records are stored, and readable


def test_a_whole_folder_of_bad_files_loses_no_good_record(tmp_path: Path, cli: Any) -> None:
    folder = tmp_path / "mixed"
    folder.mkdir()
    for sub in ("results", "guidellm"):
        for p in (BAD / sub).iterdir():
            if p.name not in ("expected.json", "README.md"):
                (folder / f"{sub}-{p.name}").write_bytes(p.read_bytes())
    for sub, (good, _n) in GOOD.items():
        (folder / f"{sub}-zz-good.json").write_bytes(good.read_bytes())
    store = tmp_path / "store.csv"
    res = cli("ingest", str(folder), "--store", str(store))
    assert res.exit_code == 2 and "Traceback" not in res.stderr
    n_bad = len(_cases("results")) + len(_cases("guidellm"))
    assert len(_error_lines(res.stderr)) == n_bad
    assert len(load_profiles(store)) == 1 + 3


@pytest.mark.parametrize(("name", "expect"), _cases("store"))
def test_a_bad_store_is_one_line(tmp_path: Path, cli: Any, name: str, expect: str) -> None:
    path = BAD / "store" / name
    res = cli("profiles", "--store", str(path))
    assert res.exit_code == 2 and "Traceback" not in res.stderr
    assert res.stderr.count("\n") == 1 and str(path) in res.stderr, res.stderr
    assert expect in res.stderr
    # ingest into it refuses before anything is written: the store is left as it was
    copy = tmp_path / name
    copy.write_bytes(path.read_bytes())
    res = cli("ingest", str(GOOD["results"][0]), "--store", str(copy))
    assert res.exit_code == 2 and "Traceback" not in res.stderr
    assert copy.read_bytes() == path.read_bytes()
