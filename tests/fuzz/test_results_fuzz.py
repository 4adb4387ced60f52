"""Result files, GuideLLM reports and profile stores from an adversary (issue 16). The law, for
whatever hypothesis generates (valid and broken): ingest exits 0 or 2, prints one line per
refused file and no traceback, stores every good record, and leaves the store old-or-new, never
half-written (it loads, and no temporary file is left beside it). Small ``max_examples``: the
corpus under ``tests/data/bad/`` (``tests/profiles/test_bad_corpus.py``) holds the worst cases.
"""

from __future__ import annotations

import copy
import json
import math
import tempfile
from pathlib import Path
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from fleetplan.catalog import bundled_catalog
from fleetplan.errors import DataError
from fleetplan.profiles.ingest import IngestOptions, ingest_paths, read_runs
from fleetplan.profiles.store import ProfileStore, empty_frame, load_profiles

GOOD = Path(__file__).resolve().parents[1] / "data" / "bad" / "good"
VLLM: dict[str, Any] = json.loads((GOOD / "vllm-result.json").read_text())
GUIDELLM: dict[str, Any] = json.loads((GOOD / "guidellm-report.json").read_text())
FUZZ = settings(max_examples=10, deadline=None, derandomize=True,
                suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])

# hostile JSON values: huge and fractional numbers, odd strings, containers, nesting
hostile = st.recursive(
    st.none() | st.booleans()
    | st.integers(min_value=-(10**40), max_value=10**40)
    | st.floats(allow_nan=True, allow_infinity=True)
    | st.sampled_from(["", "abc", "1_000", "\u0661\u0662", "inf", "-1", "1e400", "false",
                       "NaN", "x" * 2000, "2", "1.7"]),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=5), inner,
                                                                 max_size=3),
    max_leaves=8,
)


def _paths(obj: Any, prefix: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    """Every key path of a JSON value (to pick one to break)."""
    out = [prefix] if prefix else []
    if isinstance(obj, dict):
        for k, v in obj.items():
            out += _paths(v, (*prefix, k))
    elif isinstance(obj, list):
        for i, v in enumerate(obj[:4]):
            out += _paths(v, (*prefix, i))
    return out


def _set(obj: Any, path: tuple[Any, ...], value: Any) -> None:
    for k in path[:-1]:
        obj = obj[k]
    if value is _DROP:
        del obj[path[-1]]
    else:
        obj[path[-1]] = value


_DROP = object()


@st.composite
def mutants(draw: Any, base: dict[str, Any]) -> dict[str, Any]:
    """``base`` with 0-3 values replaced by hostile ones or dropped."""
    obj = copy.deepcopy(base)
    for _ in range(draw(st.integers(0, 3))):
        paths = _paths(obj)
        if not paths:
            break
        path = draw(st.sampled_from(paths))
        _set(obj, path, draw(hostile | st.just(_DROP)))
    return obj


def _text(obj: Any) -> str:
    return json.dumps(obj, allow_nan=True)


def _law(files: dict[str, str]) -> None:
    """Ingest every file beside one good vLLM record into a fresh store, through the library and
    the command line; check the law."""
    with tempfile.TemporaryDirectory() as d:
        folder = Path(d) / "in"
        folder.mkdir()
        for name, text in files.items():
            (folder / name).write_text(text)
        (folder / "zz-good.json").write_text(_text(VLLM))
        store = ProfileStore(empty_frame())
        opts = IngestOptions(known_models=frozenset(bundled_catalog().models()))
        report = ingest_paths([folder], store, opts)  # never raises for what files hold
        assert all("\n" not in e and len(e) < 1000 for e in report.errors)
        refused = {(Path(e.split(": ", 1)[0]).name, e.split(": ")[1]) for e in report.errors}
        assert {name for name, _line in refused} <= set(files)
        assert len(report.errors) == len(refused)  # one line per refused record (file, line)
        good_ids = {r.run_id for r in read_runs(folder / "zz-good.json")[0]}
        assert good_ids <= {r.run_id for r in report.added}  # the good record is stored
        saved = store.save(Path(d) / "store.csv")
        assert len(load_profiles(saved)) == len(report.added)  # what was stored reads back
        assert sorted(p.name for p in Path(d).iterdir()) == ["in", "store.csv"]


@FUZZ
@given(mutants(VLLM))
def test_mutated_vllm_results_obey_the_law(obj: dict[str, Any]) -> None:
    _law({"a.json": _text(obj)})


@FUZZ
@given(mutants(GUIDELLM))
def test_mutated_guidellm_reports_obey_the_law(obj: dict[str, Any]) -> None:
    _law({"a.json": _text(obj)})


@FUZZ
@given(st.lists(mutants(VLLM), min_size=1, max_size=3), st.integers(0, 200))
def test_json_lines_and_cut_files_obey_the_law(objs: list[dict[str, Any]], cut: int) -> None:
    lines = "\n".join(_text(o) for o in objs) + "\n"
    _law({"lines.json": lines, "cut.json": _text(objs[0])[:cut]})


@settings(max_examples=5, deadline=None, derandomize=True,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
@given(mutants(VLLM))
def test_the_command_line_obeys_the_law(cli: Any, obj: dict[str, Any]) -> None:
    with tempfile.TemporaryDirectory() as d:
        bad, good = Path(d) / "a.json", Path(d) / "zz-good.json"
        bad.write_text(_text(obj))
        good.write_text(_text(VLLM))
        store = Path(d) / "store.csv"
        res = cli("ingest", str(bad), str(good), "--store", str(store))
        assert res.exit_code in (0, 2) and "Traceback" not in res.stderr
        errors = [ln for ln in res.stderr.splitlines() if ln.startswith("fleetplan: error: ")]
        assert len(errors) == (res.exit_code == 2) and all(str(bad) in e for e in errors)
        assert len(load_profiles(store)) >= 1  # the good record at least
        assert sorted(p.name for p in Path(d).iterdir()) == ["a.json", "store.csv",
                                                            "zz-good.json"]


# --- stores ---------------------------------------------------------------------------------

STORE_ROWS = load_profiles().frame.iloc[:3].astype(object)
cell_text = st.sampled_from(["", "1e30", "-1", "1.5", "yes", "no", "True", "0", "nan", "inf",
                             "abc", "\u0661", "9" * 400, '"', "a,b", "1e-320"]) \
    | st.text(max_size=8)


@FUZZ
@given(st.lists(st.tuples(st.integers(0, 2), st.sampled_from(list(STORE_ROWS.columns)),
                          cell_text), min_size=1, max_size=3))
def test_mutated_stores_load_or_fail_in_one_line(changes: list[tuple[int, str, str]]) -> None:
    df = STORE_ROWS.copy()
    for row, col, value in changes:
        df.loc[row, col] = value
    with tempfile.TemporaryDirectory() as d:
        path = Path(d) / "store.csv"
        df.to_csv(path, index=False)
        try:
            st_ = load_profiles(path)
        except DataError as exc:
            msg = str(exc)
            assert msg.startswith(f"{path}: ") and "\n" not in msg and len(msg) < 1000
            return
        for r in st_.runs():  # what loads is typed and bounded
            assert r.completed + r.failed <= r.num_prompts and 1 <= r.tp_size <= r.gpu_count
            assert all(not isinstance(v, float) or not math.isnan(v)
                       for v in r.model_dump().values())
        out = st_.save(Path(d) / "again.csv")
        assert load_profiles(out).frame.equals(st_.frame)  # round trip, nothing half-written
