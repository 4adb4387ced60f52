"""The nastiest result files, GuideLLM reports and stores (``tests/data/bad/``; README there):
each is refused alone with one line naming the file and what is wrong, never a traceback, and
the good records of the same call are stored."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from fleetplan.catalog import bundled_catalog
from fleetplan.errors import DataError
from fleetplan.profiles.ingest import IngestOptions, read_runs
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
def test_a_bad_file_is_refused_with_one_line(folder: str, name: str, expect: str) -> None:
    bad = BAD / folder / name
    runs, errors = read_runs(bad, IngestOptions(known_models=frozenset(bundled_catalog().models())))
    assert runs == [] and len(errors) == 1, errors
    assert errors[0].startswith(f"{bad}: ") and "\n" not in errors[0]
    assert expect in errors[0], errors[0]
    assert len(errors[0]) < 600  # bounded: the value is never rendered whole


def test_a_whole_folder_of_bad_files_loses_no_good_record(tmp_path: Path, cli: Any) -> None:
    folder = tmp_path / "mixed"
    folder.mkdir()
    expected = {}
    for sub in ("results", "guidellm"):
        for name, expect in _cases(sub):
            (folder / f"{sub}-{name}").write_bytes((BAD / sub / name).read_bytes())
            expected[f"{sub}-{name}"] = expect
    for sub, (good, _n) in GOOD.items():
        (folder / f"{sub}-zz-good.json").write_bytes(good.read_bytes())
    store = tmp_path / "store.csv"
    res = cli("ingest", str(folder), "--store", str(store))
    assert res.exit_code == 2 and "Traceback" not in res.stderr
    errs = _error_lines(res.stderr)
    assert len(errs) == len(expected)  # one line per refused file, nothing else
    for name, expect in expected.items():
        (line,) = [e for e in errs if f"{folder / name}: " in e]
        assert expect in line, line
    assert "4 run(s) added" in res.stdout
    assert len(load_profiles(store)) == 1 + 3  # every good record stored, and readable


@pytest.mark.parametrize(("name", "expect"), _cases("store"))
def test_a_bad_store_is_refused_with_one_line(name: str, expect: str) -> None:
    path = BAD / "store" / name
    with pytest.raises(DataError) as err:
        load_profiles(path)
    msg = str(err.value)
    assert msg.startswith(f"{path}: ") and "\n" not in msg and expect in msg, msg


@pytest.mark.parametrize("name", ["int-1e30.csv", "bool-yes.csv", "duplicate-run-id.csv"])
def test_commands_on_a_bad_store_say_one_line_and_write_nothing(tmp_path: Path, cli: Any,
                                                                name: str) -> None:
    path = BAD / "store" / name
    res = cli("profiles", "--store", str(path))
    assert res.exit_code == 2 and "Traceback" not in res.stderr
    assert res.stderr.count("\n") == 1 and str(path) in res.stderr, res.stderr
    copy = tmp_path / name
    copy.write_bytes(path.read_bytes())
    res = cli("ingest", str(GOOD["results"][0]), "--store", str(copy))
    assert res.exit_code == 2 and "Traceback" not in res.stderr
    assert copy.read_bytes() == path.read_bytes()  # refused before anything is written
