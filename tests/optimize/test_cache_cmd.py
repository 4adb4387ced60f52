"""Cache keys follow the model code, and ``fleetplan cache info`` / ``clear``."""

from __future__ import annotations

import json
import os
import shutil

import pytest

from fleetplan import __version__
from fleetplan.optimize import cache as cache_mod
from fleetplan.optimize import capacity as capacity_mod
from fleetplan.optimize import capacity_records
from fleetplan.optimize.cache import DiskCache, code_key


@pytest.fixture
def fresh_code_key():
    code_key.cache_clear()
    yield
    code_key.cache_clear()


def test_code_key_names_the_version_and_changes_with_the_model_code(tmp_path, monkeypatch,
                                                                     fresh_code_key) -> None:
    pkg = tmp_path / "fleetplan"
    assert {"replica", "workload", "optimize/capacity.py"} <= set(cache_mod.MODEL_CODE)
    for rel in cache_mod.MODEL_CODE:  # the model code's folders and single modules
        if (cache_mod._PACKAGE / rel).is_dir():
            shutil.copytree(cache_mod._PACKAGE / rel, pkg / rel)
        else:
            (pkg / rel).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy(cache_mod._PACKAGE / rel, pkg / rel)
    monkeypatch.setattr(cache_mod, "_PACKAGE", pkg)
    before = code_key()
    assert before.startswith(__version__ + "+")
    code_key.cache_clear()
    assert code_key() == before  # same code, same key
    steady = pkg / "replica" / "steady.py"
    steady.write_text(steady.read_text() + "\n# an edit\n")
    code_key.cache_clear()
    assert code_key() != before
    (pkg / "unrelated.py").write_text("x = 1\n")  # outside MODEL_CODE: no effect
    after = code_key()
    code_key.cache_clear()
    assert code_key() == after


def test_an_entry_of_other_code_is_not_read(tmp_path, monkeypatch) -> None:
    from test_capacity_optimize import curve, job

    calls = []

    def counting(j, rate):
        calls.append(rate)
        return curve(j, rate)

    capacity_mod.find_capacity(job(100.0), cache=DiskCache(tmp_path), point_fn=counting)
    n = len(calls)
    assert n > 0
    capacity_mod.find_capacity(job(100.0), cache=DiskCache(tmp_path), point_fn=counting)
    assert len(calls) == n  # same code: every value from the cache
    # the jobs' cache keys hold the code key (fleetplan.optimize.capacity_records)
    monkeypatch.setattr(capacity_records, "code_key", lambda: "9.9.9+other")
    capacity_mod.find_capacity(job(100.0), cache=DiskCache(tmp_path), point_fn=counting)
    assert len(calls) == 2 * n  # edited code: recomputed


def test_cache_info_and_clear(cli, tmp_path, monkeypatch) -> None:
    root = tmp_path / "c"
    monkeypatch.setenv("FLEETPLAN_CACHE_DIR", str(root))
    c = DiskCache(root)
    c.put("point", {"a": 1}, {"x": 1})
    c.put("capacity", {"a": 2}, {"x": 2})
    (root / "notes.txt").write_text("mine\n")  # not fleetplan's: stays
    (root / "point" / "README").write_text("mine too\n")
    (entry,) = (root / "point").rglob("*.json")
    stale = entry.parent / f".{entry.name}.k2j3.tmp"  # an interrupted write, hours ago
    stale.write_text("{")
    os.utime(stale, (1e9, 1e9))
    jit = root / "jit" / "replica_0123"  # Numba's files of the compiled engine
    jit.mkdir(parents=True)
    (jit / "steady_loop.steady_loop-170.py311.nbi").write_bytes(b"index")
    (jit / "steady_loop.steady_loop-170.py311.1.nbc").write_bytes(b"code")
    r = cli("cache", "info", "--format", "json")
    assert r.exit_code == 0, r.stderr
    d = json.loads(r.stdout)
    entries = sorted(root.rglob("*.json"))
    assert d == {"folder": str(root), "entries": 2,
                 "bytes": sum(p.stat().st_size for p in entries), "code_key": code_key()}
    r = cli("cache", "clear")
    assert r.exit_code == 0 and "removed 2 cache entries" in r.stdout
    assert "and 2 compiled-engine files" in r.stdout  # the machine code goes too
    assert sorted(p.relative_to(root).as_posix() for p in root.rglob("*")) == [
        "notes.txt", "point", "point/README"]
    assert json.loads(cli("cache", "info", "--format", "json").stdout)["entries"] == 0
    assert "removed 0 cache entries" in cli("cache", "clear").stdout


def test_cache_info_of_a_missing_folder_creates_nothing(cli, tmp_path, monkeypatch) -> None:
    monkeypatch.setenv("FLEETPLAN_CACHE_DIR", str(tmp_path / "none"))
    r = cli("cache", "info")
    assert r.exit_code == 0 and "entries: 0" in r.stdout and "code_key: " in r.stdout
    assert not (tmp_path / "none").exists()


@pytest.mark.parametrize("below", ["", "sub"])
def test_a_cache_folder_that_is_a_file_is_one_warning_and_no_disk_cache(
        cli, tmp_path, monkeypatch, caplog, below) -> None:
    # not one "failed validation" per entry it could not read: the folder is unusable, said once
    blocked = tmp_path / "a-file"
    blocked.write_text("mine\n")
    root = blocked / below if below else blocked
    monkeypatch.setattr(cache_mod, "_WARNED", set())
    c, c2 = DiskCache(root), DiskCache(root)
    assert c.root is None and c2.root is None  # memory only
    c.put("point", {"a": 1}, {"x": 1})
    assert c.get("point", {"a": 1}) == {"x": 1} and not c.rejected
    warnings = [r.getMessage() for r in caplog.records]
    assert len(warnings) == 1 and "a file, not a folder" in warnings[0] \
        and "nothing is cached on disk" in warnings[0], warnings
    assert blocked.read_text() == "mine\n"
    monkeypatch.setenv("FLEETPLAN_CACHE_DIR", str(root))
    r = cli("cache", "info", "--format", "json")
    assert r.exit_code == 0 and json.loads(r.stdout)["folder"] == str(root)
    assert json.loads(r.stdout)["entries"] == 0
